//! The webhook scenario's probe of delivery latency from acknowledgement: beside each of
//! the scenario's measured runs, one order every 20 ms on a paced client of its own
//! (`super::paced`), each order's id kept with the wall-clock time its 201 arrived; once
//! the endpoint's deliveries have drained, the receiver says when each of those orders'
//! `order.created` reached it, and the differences are the latency from the client's
//! acknowledgement to the receiver, under the scenario's load.
//!
//! Must not touch: the scenario's load or its figures (the probe's few orders are not
//! counted in them).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::load::{request, Answer, LoadResult};
use super::paced::paced_apart;
use super::servers::credentials;
use super::{round, webhook_receiver};

/// The probe's pace.
const INTERVAL: Duration = Duration::from_millis(20);

/// One of the probe's orders, acknowledged.
#[derive(Debug, Clone, Copy)]
pub(super) struct Acked {
    order: u64,
    /// When its 201 arrived, Unix microseconds.
    at_us: i64,
}

/// Latency from acknowledgement to the receiver.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FromAcknowledgement {
    /// The probe's orders acknowledged.
    pub orders: u64,
    /// Those whose `order.created` reached the receiver.
    pub delivered: u64,
    /// Median, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// The longest, ms.
    pub max_ms: f64,
}

#[derive(Deserialize)]
struct Created {
    id: u64,
}

/// Sends the probe's orders to `addr` for `warmup` then `duration` (those of the warm-up
/// are not kept): what it got, and the orders acknowledged in the measured period.
pub(super) async fn orders_beside(
    addr: SocketAddr,
    warmup: Duration,
    duration: Duration,
) -> Result<(LoadResult, Vec<Acked>), String> {
    let acked: Arc<Mutex<Vec<Acked>>> = Arc::default();
    let kept = acked.clone();
    let keep = move |answer: &Answer| {
        let at_us = jiff::Timestamp::now().as_microsecond();
        if let Ok(created) = serde_json::from_slice::<Created>(&answer.body) {
            kept.lock().unwrap_or_else(|e| e.into_inner()).push(Acked {
                order: created.id,
                at_us,
            });
        }
    };
    let body = r#"{"customer_id":1,"box_id":217,"frequency":"weekly"}"#;
    let order = move || request("POST", "/v1/orders", credentials(), Some(body));
    let run = paced_apart(addr, INTERVAL, warmup, duration, order, 201, keep).await?;
    let acked = std::mem::take(&mut *acked.lock().unwrap_or_else(|e| e.into_inner()));
    Ok((run, acked))
}

/// The latency of `acked`'s deliveries to the receiver at `receiver`, from each order's
/// acknowledgement.
pub(super) async fn from_acknowledgement(
    receiver: SocketAddr,
    acked: &[Acked],
) -> Result<FromAcknowledgement, String> {
    let orders: Vec<u64> = acked.iter().map(|acked| acked.order).collect();
    let arrivals = webhook_receiver::arrivals(receiver, &orders).await?;
    let mut latencies = webhook_receiver::delivery_histogram();
    for (acked, arrival) in acked.iter().zip(arrivals) {
        if let Some(arrived_us) = arrival {
            // The receiver's clock is this machine's: one clock on both sides. A delivery
            // that arrived before the 201 was read counts as 1 µs.
            let waited = (arrived_us - acked.at_us).max(1) as u64;
            latencies.saturating_record(waited.min(webhook_receiver::LONGEST_US));
        }
    }
    let ms = |micros: u64| round(micros as f64 / 1000.0, 3);
    Ok(FromAcknowledgement {
        orders: acked.len() as u64,
        delivered: latencies.len(),
        p50_ms: ms(latencies.value_at_quantile(0.5)),
        p99_ms: ms(latencies.value_at_quantile(0.99)),
        max_ms: ms(latencies.max()),
    })
}
