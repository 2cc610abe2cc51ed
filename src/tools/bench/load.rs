//! A closed-loop HTTP/1.1 keep-alive load generator: N connections, each sending its next
//! request as soon as the previous answer is read, for a warm-up and then a measured period.
//! Each connection is hyper's own client connection (no pool, no retries: one request in
//! flight per connection, driven by the task that sends on it) and records its latencies into an HdrHistogram of its own; the
//! histograms are merged at the end. Only loopback addresses are ever a target. Must not
//! touch: what a scenario sends and expects (`scenarios`), the servers, the report.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{Connection, SendRequest};
use hyper::header::{HeaderMap, HeaderValue, CONNECTION, CONTENT_TYPE, HOST};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// A request as the load generator sends it.
pub type Req = Request<Full<Bytes>>;
/// Builds the request for sequence number `n` (unique across connections).
pub type RequestFn = Arc<dyn Fn(u64) -> Req + Send + Sync>;
/// Whether request `n` got a status it may get.
pub type ExpectFn = Arc<dyn Fn(u64, u16) -> bool + Send + Sync>;

/// Every request must get `status`.
pub fn expect_status(status: u16) -> ExpectFn {
    Arc::new(move |_, got| got == status)
}

/// Latencies above this (one minute, in µs) are recorded as this.
const HIGHEST_US: u64 = 60_000_000;

/// One load run.
#[derive(Clone)]
pub struct LoadSpec {
    /// The server (must be a loopback address).
    pub addr: SocketAddr,
    /// Concurrent connections.
    pub connections: usize,
    /// Unmeasured time first.
    pub warmup: Duration,
    /// Measured time.
    pub duration: Duration,
    /// Request builder.
    pub request: RequestFn,
    /// Expected status per request.
    pub expect: ExpectFn,
}

/// What a run measured (warm-up excluded).
#[derive(Debug, Clone)]
pub struct LoadResult {
    /// Requests answered in the measured period.
    pub requests: u64,
    /// Answers with another status than expected, or connection failures.
    pub errors: u64,
    /// Length of the measured period.
    pub seconds: f64,
    /// Latency of each measured request, microseconds.
    pub latencies_us: Histogram<u64>,
}

impl Default for LoadResult {
    fn default() -> LoadResult {
        LoadResult {
            requests: 0,
            errors: 0,
            seconds: 0.0,
            latencies_us: latency_histogram(),
        }
    }
}

/// An empty histogram of latencies in µs, from 1 µs to a minute, 3 significant digits.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIGHEST_US, 3).expect("constant histogram bounds are valid")
}

/// Records the time since `sent` into `latencies` (a [`latency_histogram`]), in µs, within
/// its bounds.
pub fn record_since(latencies: &mut Histogram<u64>, sent: Instant) {
    let micros = u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX);
    latencies.saturating_record(micros.clamp(1, HIGHEST_US));
}

impl LoadResult {
    /// Requests per second.
    pub fn rps(&self) -> f64 {
        if self.seconds > 0.0 {
            self.requests as f64 / self.seconds
        } else {
            0.0
        }
    }

    /// The `q` quantile of latency in milliseconds.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.latencies_us.is_empty() {
            return 0.0;
        }
        self.latencies_us.value_at_quantile(q) as f64 / 1000.0
    }

    /// Adds another run's (or connection's) figures to these; the seconds are not added.
    pub fn merge(&mut self, other: &LoadResult) {
        self.requests += other.requests;
        self.errors += other.errors;
        // Same bounds on both sides, so this cannot fail.
        let _ = self.latencies_us.add(&other.latencies_us);
    }
}

/// Runs the load and gathers the results of every connection.
pub async fn run(spec: LoadSpec) -> Result<LoadResult, String> {
    refuse_non_loopback(spec.addr)?;
    let started = Instant::now();
    let measure_from = started + spec.warmup;
    let end = measure_from + spec.duration;
    let mut tasks = Vec::with_capacity(spec.connections);
    for index in 0..spec.connections {
        let spec = spec.clone();
        tasks.push(tokio::spawn(async move {
            connection(spec, index as u64, measure_from, end).await
        }));
    }
    let mut total = LoadResult::default();
    for task in tasks {
        let part = task.await.map_err(|e| e.to_string())?;
        total.merge(&part);
    }
    total.seconds = spec.duration.as_secs_f64();
    Ok(total)
}

async fn connection(spec: LoadSpec, index: u64, measure_from: Instant, end: Instant) -> LoadResult {
    let mut result = LoadResult::default();
    let mut sequence = index;
    let mut client = Client {
        addr: spec.addr,
        open: None,
    };
    while Instant::now() < end {
        if let Err(error) = client.connected().await {
            result.errors += 1;
            tracing::debug!(%error, "bench connection failed");
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        }
        let request = (spec.request)(sequence);
        let n = sequence;
        sequence += spec.connections as u64;
        let sent = Instant::now();
        let answer = client.send(request).await;
        let measured = sent >= measure_from && Instant::now() <= end;
        if !measured {
            continue;
        }
        match answer {
            Ok(answer) => {
                result.requests += 1;
                record_since(&mut result.latencies_us, sent);
                if !(spec.expect)(n, answer.status) {
                    result.errors += 1;
                }
            }
            Err(_) => result.errors += 1,
        }
    }
    result
}

fn refuse_non_loopback(addr: SocketAddr) -> Result<(), String> {
    if addr.ip().is_loopback() {
        Ok(())
    } else {
        Err(format!("refusing to load a non-loopback address {addr}"))
    }
}

/// A keep-alive HTTP/1.1 connection to a loopback server, opened on first use and opened
/// again after a failure or an answer saying `Connection: close`.
pub struct Client {
    addr: SocketAddr,
    open: Option<Open>,
}

/// hyper's two halves of one connection: the handle requests are sent through, and the
/// connection future that reads and writes the socket. The future is polled by the task
/// sending the request rather than spawned, so that a request and its answer cost no wake-up
/// of another task (possibly on the other core).
struct Open {
    sender: SendRequest<Full<Bytes>>,
    connection: Pin<Box<Connection<TokioIo<TcpStream>, Full<Bytes>>>>,
}

impl Client {
    /// A client of `addr`, which must be a loopback address; it connects on first use.
    pub fn new(addr: SocketAddr) -> Result<Client, String> {
        refuse_non_loopback(addr)?;
        Ok(Client { addr, open: None })
    }

    /// Opens the connection unless one is open.
    async fn connected(&mut self) -> Result<(), String> {
        if self
            .open
            .as_ref()
            .is_some_and(|open| !open.sender.is_closed())
        {
            return Ok(());
        }
        self.open = None;
        let stream = TcpStream::connect(self.addr)
            .await
            .map_err(|e| format!("connecting to {}: {e}", self.addr))?;
        let _ = stream.set_nodelay(true);
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("HTTP/1.1 handshake with {}: {e}", self.addr))?;
        self.open = Some(Open {
            sender,
            connection: Box::pin(connection),
        });
        Ok(())
    }

    /// Sends one request and reads its whole answer, (re)connecting first if needed. After
    /// an error the connection is dropped, so the next request opens a new one.
    pub async fn send(&mut self, request: Req) -> Result<Answer, String> {
        self.connected().await?;
        let open = self.open.as_mut().ok_or("not connected")?;
        let mut closed = false;
        let answer = {
            let exchange = exchange(&mut open.sender, request);
            tokio::pin!(exchange);
            loop {
                tokio::select! {
                    biased;
                    answer = &mut exchange => break answer,
                    // The connection ended (the server closed it, or it failed): the
                    // exchange now ends too, with its answer or with the failure.
                    _ = open.connection.as_mut(), if !closed => closed = true,
                }
            }
        };
        if closed || !answer.as_ref().is_ok_and(|answer| answer.keep_alive) {
            self.open = None;
        }
        answer
    }
}

async fn exchange(sender: &mut SendRequest<Full<Bytes>>, request: Req) -> Result<Answer, String> {
    sender.ready().await.map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let (head, body) = response.into_parts();
    let headers = head.headers;
    let status = head.status.as_u16();
    let keep_alive = !headers
        .get(CONNECTION)
        .is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"close"));
    let total_count = headers
        .get("x-total-count")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse().ok());
    let body = body
        .collect()
        .await
        .map_err(|e| format!("reading the body: {e}"))?
        .to_bytes();
    Ok(Answer {
        status,
        keep_alive,
        body_length: body.len(),
        total_count,
        headers,
        body,
    })
}

/// Sends one request on a new connection and returns the response's status and body length.
pub async fn one_request(addr: SocketAddr, request: Req) -> Result<Answer, String> {
    Client::new(addr)?.send(request).await
}

/// What a response said, as far as the benchmark cares.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// Whether the connection stays open.
    pub keep_alive: bool,
    /// The body's length.
    pub body_length: usize,
    /// `X-Total-Count`, on lists.
    pub total_count: Option<u64>,
    /// Every header (moved out of the response, not copied).
    pub headers: HeaderMap,
    /// The body (already read whole, so keeping it costs nothing more).
    pub body: Bytes,
}

/// An HTTP/1.1 request with the demo credentials and an optional JSON body.
pub fn request(method: &str, path: &str, credentials: (&str, &str), body: Option<&str>) -> Req {
    let method = Method::from_bytes(method.as_bytes()).unwrap_or(Method::GET);
    let mut builder = Request::builder()
        .method(method)
        .uri(path)
        .header(HOST, HeaderValue::from_static("127.0.0.1"))
        .header("api-key", credentials.0)
        .header("api-secret", credentials.1);
    if body.is_some() {
        builder = builder.header(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    let body = Full::new(body.map_or_else(Bytes::new, |b| Bytes::copy_from_slice(b.as_bytes())));
    builder
        .body(body)
        .expect("the benchmark's own paths and headers are valid")
}

/// `GET /` with no credentials (the bare server's request).
pub fn bare_request() -> Req {
    Request::builder()
        .uri("/")
        .header(HOST, HeaderValue::from_static("127.0.0.1"))
        .body(Full::new(Bytes::new()))
        .expect("a constant request is valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_come_from_the_merged_histograms() {
        let mut total = LoadResult::default();
        for part in [[1000u64, 2000], [3000, 4000]] {
            let mut result = LoadResult {
                requests: 2,
                ..LoadResult::default()
            };
            for micros in part {
                result.latencies_us.record(micros).unwrap();
            }
            total.merge(&result);
        }
        total.seconds = 2.0;
        assert_eq!(total.requests, 4);
        assert_eq!(total.rps(), 2.0);
        // Three significant digits: within 0.1%.
        assert!((total.quantile_ms(0.5) - 2.0).abs() < 0.01);
        assert!((total.quantile_ms(1.0) - 4.0).abs() < 0.01);
    }

    #[test]
    fn requests_carry_credentials_and_body() {
        let request = request("POST", "/v1/orders?x=1", ("k", "s"), Some("{}"));
        assert_eq!(request.method(), Method::POST);
        assert_eq!(request.uri().path_and_query().unwrap(), "/v1/orders?x=1");
        assert_eq!(request.headers()["api-key"], "k");
        assert_eq!(request.headers()[CONTENT_TYPE], "application/json");
        assert_eq!(
            hyper::body::Body::size_hint(request.body()).exact(),
            Some(2)
        );
    }

    #[tokio::test]
    async fn only_loopback_is_a_target() {
        let error = one_request("192.0.2.1:80".parse().unwrap(), bare_request())
            .await
            .unwrap_err();
        assert!(error.contains("non-loopback"), "{error}");
    }
}
