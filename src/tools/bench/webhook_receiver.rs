//! The benchmark's webhook receiver (`boxsub-tools webhook-receiver`): answers every
//! `POST` with 204 and keeps, for each delivery, the time from its event's `created_at` to
//! its arrival (an HdrHistogram in microseconds); `GET /stats` answers what it holds as
//! JSON. The bench drives boxsub with one endpoint pointed here, beside boxsub with none.
//!
//! `created_at` is taken when the write is made, a little before it is durable and
//! acknowledged, so the latency counted here is the delivery's from acknowledgement plus
//! the write's own commit wait: an upper bound of the former.
//!
//! Must not touch: boxsub's servers (it is one of the bench's own).

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
}

/// Serves on `addr` until SIGTERM; prints `listening on http://ADDR` when ready.
pub async fn webhook_receiver(addr: &str) -> Result<(), String> {
    use warp::Filter;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("binding {addr}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    let latencies = Arc::new(Mutex::new(
        Histogram::<u64>::new_with_bounds(1, 600_000_000, 3).map_err(|e| e.to_string())?,
    ));
    let received = latencies.clone();
    let deliveries = warp::post()
        .and(warp::body::bytes())
        .map(move |body: bytes::Bytes| {
            let now = jiff::Timestamp::now();
            let waited = serde_json::from_slice::<EventHead<'_>>(&body)
                .ok()
                .and_then(|head| head.created_at.parse::<jiff::Timestamp>().ok())
                .map(|at| (now.as_microsecond() - at.as_microsecond()).max(1) as u64);
            if let Some(waited) = waited {
                let mut histogram = received.lock().unwrap_or_else(|e| e.into_inner());
                let _ = histogram.record(waited.min(600_000_000));
            }
            warp::http::StatusCode::NO_CONTENT
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
    warp::serve(deliveries.or(stats))
        .incoming(listener)
        .graceful(crate::startup::shutdown_signal())
        .run()
        .await;
    Ok(())
}

/// The receiver's stats at `addr`.
pub(super) async fn stats(addr: std::net::SocketAddr) -> Result<ReceiverStats, String> {
    let answer = reqwest::get(format!("http://{addr}/stats"))
        .await
        .map_err(|e| format!("the webhook receiver's stats: {e}"))?;
    let body = answer
        .bytes()
        .await
        .map_err(|e| format!("the webhook receiver's stats: {e}"))?;
    serde_json::from_slice(&body).map_err(|e| format!("the webhook receiver's stats: {e}"))
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
