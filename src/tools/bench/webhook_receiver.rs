//! The benchmark's webhook receiver (`boxsub-tools webhook-receiver`): answers every
//! `POST` with 204 and keeps, for each delivery, the time from its event's `created_at` to
//! its arrival (an HdrHistogram in microseconds), and for each `order.created` the wall-clock
//! time its first delivery arrived, by order id; `GET /stats` answers the former as JSON,
//! `POST /arrivals` (a JSON list of order ids) the latter for those orders. The bench drives
//! boxsub with one endpoint pointed here, beside boxsub with none.
//!
//! `created_at` is taken when the write is made, a little before it is durable and
//! acknowledged, so the latency counted from it is the delivery's from acknowledgement plus
//! the write's own commit wait: an upper bound of the former. The arrivals give the
//! latency from acknowledgement itself, matched with the times a probe's orders were
//! acknowledged (`super::webhook_probe`).
//!
//! Must not touch: boxsub's servers (it is one of the bench's own).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// What the receiver got.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReceiverStats {
    /// Deliveries received.
    pub received: u64,
    /// Median time from the event's write to its arrival, ms.
    pub p50_ms: f64,
    /// 99th percentile of it, ms.
    pub p99_ms: f64,
    /// The longest, ms.
    pub max_ms: f64,
}

#[derive(Deserialize)]
struct EventHead<'a> {
    created_at: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    data: ResourceId,
}

#[derive(Deserialize)]
struct ResourceId {
    id: u64,
}

/// The longest delivery latency recorded, µs (ten minutes): longer ones count as this.
pub(super) const LONGEST_US: u64 = 600_000_000;

/// An empty histogram of delivery latencies in µs, 1 µs to [`LONGEST_US`], 3 digits.
pub(super) fn delivery_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LONGEST_US, 3).expect("constant histogram bounds are valid")
}

/// Orders whose arrival is kept, at most: a bound on the receiver's memory (16 bytes an
/// order) well past the longest benchmark run.
const ARRIVALS_KEPT: usize = 20_000_000;

/// Serves on `addr` until SIGTERM; prints `listening on http://ADDR` when ready. It runs on
/// a thread and runtime of its own at boxsub's deliveries' niceness: it stands in for a
/// system on another host, and must not take from the CPU the server's API threads want
/// more than a delivery's other end would.
pub async fn webhook_receiver(addr: &str) -> Result<(), String> {
    let addr = addr.to_owned();
    let (done, result) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("receiver".to_owned())
        .spawn(move || {
            if let Err(error) = crate::webhooks::lower_priority() {
                eprintln!("the receiver keeps its priority: {error:?}");
            }
            let answer = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
                .and_then(|runtime| runtime.block_on(serve(&addr)));
            let _ = done.send(answer);
        })
        .map_err(|e| format!("the receiver's thread: {e}"))?;
    result
        .await
        .map_err(|_| "the receiver's thread ended".to_owned())?
}

async fn serve(addr: &str) -> Result<(), String> {
    use warp::Filter;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("binding {addr}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    let latencies = Arc::new(Mutex::new(delivery_histogram()));
    let arrivals: Arc<Mutex<HashMap<u64, i64>>> = Arc::default();
    let received = latencies.clone();
    let arrived = arrivals.clone();
    let deliveries = warp::post()
        .and(warp::path("hooks"))
        .and(warp::body::bytes())
        .map(move |body: bytes::Bytes| {
            let now = jiff::Timestamp::now().as_microsecond();
            let Ok(head) = serde_json::from_slice::<EventHead<'_>>(&body) else {
                return warp::http::StatusCode::NO_CONTENT;
            };
            if let Ok(at) = head.created_at.parse::<jiff::Timestamp>() {
                let waited = (now - at.as_microsecond()).max(1) as u64;
                let mut histogram = received.lock().unwrap_or_else(|e| e.into_inner());
                histogram.saturating_record(waited.min(LONGEST_US));
            }
            if head.kind == "order.created" {
                let mut arrived = arrived.lock().unwrap_or_else(|e| e.into_inner());
                if arrived.len() < ARRIVALS_KEPT {
                    // A redelivery keeps the first arrival.
                    arrived.entry(head.data.id).or_insert(now);
                }
            }
            warp::http::StatusCode::NO_CONTENT
        });
    let asked = warp::post()
        .and(warp::path("arrivals"))
        .and(warp::body::json())
        .map(move |orders: Vec<u64>| {
            let arrived = arrivals.lock().unwrap_or_else(|e| e.into_inner());
            let answer: Vec<Option<i64>> = orders
                .iter()
                .map(|order| arrived.get(order).copied())
                .collect();
            warp::reply::json(&answer)
        });
    let stats = warp::get().and(warp::path("stats")).map(move || {
        let histogram = latencies.lock().unwrap_or_else(|e| e.into_inner());
        let ms = |micros: u64| micros as f64 / 1000.0;
        warp::reply::json(&ReceiverStats {
            received: histogram.len(),
            p50_ms: ms(histogram.value_at_quantile(0.5)),
            p99_ms: ms(histogram.value_at_quantile(0.99)),
            max_ms: ms(histogram.max()),
        })
    });
    println!("listening on http://{local}");
    warp::serve(deliveries.or(asked).or(stats))
        .incoming(listener)
        .graceful(crate::startup::shutdown_signal())
        .run()
        .await;
    Ok(())
}

/// The receiver's stats at `addr`.
pub(super) async fn stats(addr: std::net::SocketAddr) -> Result<ReceiverStats, String> {
    let request = reqwest::Client::new().get(format!("http://{addr}/stats"));
    ask(request, "the webhook receiver's stats").await
}

/// When the first delivery of each of `orders`' `order.created` reached the receiver at
/// `addr`, in Unix microseconds (`None` for one that has not).
pub(super) async fn arrivals(
    addr: std::net::SocketAddr,
    orders: &[u64],
) -> Result<Vec<Option<i64>>, String> {
    let request = reqwest::Client::new()
        .post(format!("http://{addr}/arrivals"))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(orders).map_err(|e| e.to_string())?);
    ask(request, "the webhook receiver's arrivals").await
}

/// `request`'s JSON answer, its failures said with `what`.
async fn ask<T: serde::de::DeserializeOwned>(
    request: reqwest::RequestBuilder,
    what: &str,
) -> Result<T, String> {
    let answer = request.send().await.map_err(|e| format!("{what}: {e}"))?;
    let body = answer.bytes().await.map_err(|e| format!("{what}: {e}"))?;
    serde_json::from_slice(&body).map_err(|e| format!("{what}: {e}"))
}

/// `catalogue` with one webhook endpoint on its first webstore, sent every type, pointed at
/// the receiver at `addr`.
pub(super) fn with_endpoint(
    mut catalogue: serde_json::Value,
    addr: std::net::SocketAddr,
) -> Result<serde_json::Value, String> {
    let secret = crate::webhooks::signing::new_secret().map_err(|e| e.to_string())?;
    catalogue["webstores"][0]["webhooks"] = serde_json::json!([{
        "id": "bench",
        "url": format!("http://{addr}/hooks"),
        "events": ["customer.created", "customer.updated", "order.created"],
        "secrets": [secret],
        "allow_private_network": true,
    }]);
    Ok(catalogue)
}
