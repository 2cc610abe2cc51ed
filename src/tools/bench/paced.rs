//! A paced client: one request every interval on one keep-alive connection, on a thread and
//! runtime of its own, so that its latencies are the server's and not the wait of a client
//! behind a flood's hundreds of connections in the bench's own runtime. The noisy
//! neighbour's webstore B and its ping are paced clients, and so is the webhook scenario's
//! probe of delivery latency.
//!
//! Must not touch: what is sent (its callers make the requests) or the flood beside it.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::load::{self, record_since, Answer, Client, LoadResult};

/// [`paced`] on a thread and runtime of its own.
pub(super) async fn paced_apart(
    addr: SocketAddr,
    interval: Duration,
    warmup: Duration,
    duration: Duration,
    make: impl Fn() -> load::Req + Send + 'static,
    expected: u16,
    keep: impl FnMut(&Answer) + Send + 'static,
) -> Result<LoadResult, String> {
    let (done, result) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let answer = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
            .and_then(|runtime| {
                runtime.block_on(paced(
                    addr, interval, warmup, duration, make, expected, keep,
                ))
            });
        let _ = done.send(answer);
    });
    result
        .await
        .map_err(|_| "a paced client's thread ended".to_owned())?
}

/// One request every `interval` on one keep-alive connection, the measured ones after
/// `warmup`, each measured answer with the `expected` status handed to `keep` as it arrives;
/// a request that takes longer than the interval delays the next (never two at once).
async fn paced(
    addr: SocketAddr,
    interval: Duration,
    warmup: Duration,
    duration: Duration,
    make: impl Fn() -> load::Req,
    expected: u16,
    mut keep: impl FnMut(&Answer),
) -> Result<LoadResult, String> {
    let mut client = Client::new(addr)?;
    let started = Instant::now();
    let measure_from = started + warmup;
    let end = measure_from + duration;
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut result = LoadResult::default();
    while Instant::now() < end {
        ticks.tick().await;
        let sent = Instant::now();
        let answer = client.send(make()).await;
        if sent < measure_from {
            continue;
        }
        result.requests += 1;
        match answer {
            Ok(answer) if answer.status == expected => {
                record_since(&mut result.latencies_us, sent);
                keep(&answer);
            }
            Ok(answer) => {
                result.errors += 1;
                tracing::warn!(status = answer.status, "a paced request got another status");
            }
            Err(error) => {
                result.errors += 1;
                tracing::warn!(%error, "a paced request failed");
            }
        }
    }
    result.seconds = duration.as_secs_f64();
    Ok(result)
}
