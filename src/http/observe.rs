//! What every request leaves behind: a request id (the client's `X-Request-Id` when it is a
//! sane one, else a new one), returned in the `X-Request-Id` response header; one log line
//! with the method, the route template, the status, the latency, the webstore and the
//! request id; and the request metrics. A request whose client goes away before its answer
//! is logged and counted too, as `cancelled`.
//!
//! Never logged: headers (credentials), bodies (passwords), query strings (emails).
//! Must not touch: routing decisions, the service.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::LazyLock;
use std::time::Instant;

use warp::http::{HeaderMap, HeaderName, HeaderValue, Method};
use warp::reply::Response;

use crate::metrics;

use super::router::Route;

/// The request id header, both ways (a `HeaderName` made once: from a `&str`, each use
/// would parse it again).
pub static REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Longest client-given request id kept.
const MAX_ID_CHARS: usize = 128;

/// A process-wide random prefix, so that ids of different runs do not collide, and a
/// counter, so that ids within a run never do.
static ID_PREFIX: LazyLock<u32> = LazyLock::new(|| u32::from_be_bytes(crate::random::unique()));
static ID_COUNTER: AtomicU64 = AtomicU64::new(0);

/// 24 hex digits: the prefix, then the counter. Written by hand into a buffer on the
/// stack: `format!` took a fifth of what a request's record costs.
fn new_id() -> HeaderValue {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let n = ID_COUNTER.fetch_add(1, Ordering::Relaxed);
    let digits = (u128::from(*ID_PREFIX) << 64) | u128::from(n);
    let mut id = [0u8; 24];
    for (position, digit) in id.iter_mut().enumerate() {
        *digit = HEX[((digits >> (4 * (23 - position))) & 0xf) as usize];
    }
    HeaderValue::from_bytes(&id).unwrap_or_else(|_| HeaderValue::from_static("0"))
}

/// The client's request id if it is 1 to 128 visible ASCII characters; otherwise a new one.
fn request_id(headers: &HeaderMap) -> HeaderValue {
    headers
        .get(&REQUEST_ID)
        .filter(|value| {
            let bytes = value.as_bytes();
            (1..=MAX_ID_CHARS).contains(&bytes.len()) && bytes.iter().all(u8::is_ascii_graphic)
        })
        .cloned()
        .unwrap_or_else(new_id)
}

/// One request's record, finished with its response or, if the request is dropped first,
/// on drop.
pub struct RequestRecord {
    id: HeaderValue,
    method: Method,
    route: Route,
    started: Instant,
    webstore: Option<String>,
    finished: bool,
}

impl RequestRecord {
    /// Starts the record of a request to `route`.
    pub fn begin(method: &Method, route: Route, headers: &HeaderMap) -> RequestRecord {
        RequestRecord {
            id: request_id(headers),
            method: method.clone(),
            route,
            started: Instant::now(),
            webstore: None,
            finished: false,
        }
    }

    /// Notes the caller's webstore, once authenticated.
    pub fn webstore(&mut self, id: &str) {
        self.webstore = Some(id.to_owned());
    }

    /// Stamps the response with the request id, then logs and counts the request.
    pub fn finish(mut self, response: &mut Response) {
        response
            .headers_mut()
            .insert(REQUEST_ID.clone(), self.id.clone());
        let status = response.status();
        self.record(status.as_str());
        self.finished = true;
    }

    fn record(&self, status: &str) {
        let seconds = self.started.elapsed().as_secs_f64();
        let method = self.method.as_str();
        metrics::request(self.route.label(), method, status, seconds);
        tracing::info!(
            target: "boxsub::request",
            request_id = self.id.to_str().unwrap_or(""),
            method,
            route = self.route.template(),
            status,
            latency_ms = seconds * 1000.0,
            webstore = self.webstore.as_deref().unwrap_or("-"),
            "request"
        );
    }
}

impl Drop for RequestRecord {
    fn drop(&mut self) {
        if !self.finished {
            self.record("cancelled");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sane_client_id_is_kept_and_anything_else_replaced() {
        let mut headers = HeaderMap::new();
        headers.insert(REQUEST_ID.clone(), HeaderValue::from_static("abc-123"));
        assert_eq!(request_id(&headers), "abc-123");
        for bad in ["", "has space", &"x".repeat(129)] {
            headers.insert(REQUEST_ID.clone(), HeaderValue::from_str(bad).unwrap());
            let replaced = request_id(&headers);
            assert_ne!(replaced, bad);
            assert_eq!(replaced.len(), 24);
        }
        assert_ne!(new_id(), new_id());
    }

    #[test]
    fn a_new_id_is_the_prefix_then_the_counter_in_hex() {
        let id = new_id();
        let text = id.to_str().unwrap();
        assert_eq!(text.len(), 24);
        assert_eq!(&text[..8], format!("{:08x}", *ID_PREFIX));
        let n = u64::from_str_radix(&text[8..], 16).unwrap();
        let next = new_id();
        // Other tests take ids meanwhile: later, not necessarily next.
        assert!(u64::from_str_radix(&next.to_str().unwrap()[8..], 16).unwrap() > n);
    }
}
