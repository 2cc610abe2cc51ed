//! The accept loop: serves the API's filter over HTTP/1.1 on a bound listener, with the
//! limits a public server needs and warp's own server lacks.
//!
//! - **A cap on connections.** Past it, a new connection is answered with a canned 503 and
//!   closed at once, rather than left to queue; its slot is a guard released when the
//!   connection ends, however it ends.
//! - **Phase deadlines** for heads and idle keep-alive connections ([`super::watch`]); bodies
//!   and whole requests have theirs in the handler.
//! - **Accept errors** (`EMFILE` when out of file descriptors, `ENOBUFS`, …) back off briefly,
//!   doubling up to half a second, and are logged at most once a second.
//! - **Graceful shutdown**: on the signal it stops accepting and asks every connection to
//!   finish its request in flight and close; idle ones close at once.
//!
//! Must not touch: routes, requests, the service.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use warp::reply::Response;
use warp::Filter;

use super::client::WithPeer;
use super::watch::{watch, PhaseDeadlines};

/// The transport limits of the server.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Connections open at once; past this, new ones are refused.
    pub max_connections: usize,
    /// Deadlines of heads and idle keep-alive connections.
    pub deadlines: PhaseDeadlines,
}

/// Largest request head (request line and headers) accepted, in bytes. hyper answers a
/// larger one with 431. It also bounds each connection's read buffer, and so the memory that
/// `max_connections` connections can hold.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;

/// The answer to a connection past the cap, written without waiting before it is closed.
const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
content-type: application/json; charset=utf-8\r\nretry-after: 1\r\nconnection: close\r\n\
content-length: 93\r\n\r\n\
{\"message\":\"Service temporarily unavailable. Try again shortly.\",\"outcome\":\"nothing_changed\"}";

/// Logs one line for a burst of similar events, at most once a second.
struct LogAtMostEverySecond {
    last: Option<Instant>,
    suppressed: u64,
}

impl LogAtMostEverySecond {
    fn new() -> Self {
        LogAtMostEverySecond {
            last: None,
            suppressed: 0,
        }
    }

    /// `Some(n)` when a line is due now, `n` being the similar events not logged since.
    fn due(&mut self) -> Option<u64> {
        let now = Instant::now();
        match self.last {
            Some(last) if now.duration_since(last) < Duration::from_secs(1) => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }
}

/// Serves `routes` on `listener` until `shutdown` completes, then stops accepting and
/// completes once every connection has finished (the caller bounds that wait).
pub async fn serve<F>(
    listener: TcpListener,
    routes: F,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) where
    F: Filter<Extract = (Response,), Error = Infallible> + Clone + Send + Sync + 'static,
{
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut refusals = LogAtMostEverySecond::new();
    let mut accept_errors = LogAtMostEverySecond::new();
    let mut backoff = Duration::ZERO;
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => {
                backoff = Duration::ZERO;
                accepted
            }
            Err(error) if is_connection_error(&error) => continue,
            Err(error) => {
                backoff =
                    (backoff * 2).clamp(Duration::from_millis(10), Duration::from_millis(500));
                if let Some(suppressed) = accept_errors.due() {
                    tracing::error!(%error, suppressed, backoff_ms = backoff.as_millis() as u64,
                        "accepting a connection failed; pausing before the next accept");
                }
                tokio::select! {
                    () = tokio::time::sleep(backoff) => continue,
                    () = &mut shutdown => break,
                }
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            refuse(stream);
            crate::metrics::refused(crate::metrics::Refusal::ConnectionCap);
            if let Some(suppressed) = refusals.due() {
                tracing::warn!(
                    max_connections = limits.max_connections,
                    suppressed,
                    "refused a connection: the server is at its connection cap"
                );
            }
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (stream, handler) = watch(
            stream,
            WithPeer::new(
                TowerToHyperService::new(warp::service(routes.clone())),
                peer.ip(),
            ),
            limits.deadlines,
        );
        let connection = http1::Builder::new()
            .max_buf_size(MAX_HEAD_BYTES)
            .max_header_size(MAX_HEAD_BYTES)
            // Heads are watched by `super::watch`, which tells them apart from idle time.
            .header_read_timeout(None)
            .serve_connection(TokioIo::new(stream), handler);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            // The slot is the connection's for as long as this task lives.
            let _slot = (slot, OpenConnection::count());
            if let Err(error) = connection.await {
                tracing::debug!(%error, "connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// Counts a connection as open in the metrics while it lives.
struct OpenConnection;

impl OpenConnection {
    fn count() -> OpenConnection {
        crate::metrics::METRICS.connections_open.inc();
        OpenConnection
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        crate::metrics::METRICS.connections_open.dec();
    }
}

/// Answers a connection past the cap with a 503 if the socket takes it at once, and closes
/// it. Never waits: a client that is not reading gets only the close.
fn refuse(stream: TcpStream) {
    let _ = stream.try_write(REFUSAL);
}

/// Errors of one connection that `accept` reports; the next accept is unaffected.
fn is_connection_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_a_complete_response() {
        let text = std::str::from_utf8(REFUSAL).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let length: usize = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(body.len(), length);
        let parsed: serde_json::Value = serde_json::from_str(body).unwrap();
        assert!(parsed["message"].is_string());
    }

    #[test]
    fn bursts_are_logged_once_a_second() {
        let mut log = LogAtMostEverySecond::new();
        assert_eq!(log.due(), Some(0));
        assert_eq!(log.due(), None);
        assert_eq!(log.due(), None);
        log.last = Some(Instant::now() - Duration::from_secs(2));
        assert_eq!(log.due(), Some(2));
    }
}
