//! A closed-loop HTTP/1.1 keep-alive load generator: N connections, each sending its next
//! request as soon as the previous answer is read, for a warm-up and then a measured period.
//! Written against raw sockets so that its own cost per request is a write, a read and a
//! few comparisons; only loopback addresses are ever a target.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Builds the request bytes for sequence number `n` (unique across connections).
pub type RequestFn = Arc<dyn Fn(u64) -> Vec<u8> + Send + Sync>;
/// The status that request `n` must get.
pub type ExpectFn = Arc<dyn Fn(u64) -> u16 + Send + Sync>;

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
#[derive(Debug, Clone, Default)]
pub struct LoadResult {
    /// Requests answered in the measured period.
    pub requests: u64,
    /// Answers with another status than expected, or connection failures.
    pub errors: u64,
    /// Length of the measured period.
    pub seconds: f64,
    /// Latency of each measured request, microseconds.
    pub latencies_us: Vec<u32>,
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

    /// The `q` quantile of latency in milliseconds (latencies must be sorted).
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.latencies_us.is_empty() {
            return 0.0;
        }
        let rank = ((self.latencies_us.len() as f64 - 1.0) * q).round() as usize;
        f64::from(self.latencies_us[rank.min(self.latencies_us.len() - 1)]) / 1000.0
    }
}

/// Runs the load and gathers the results of every connection.
pub async fn run(spec: LoadSpec) -> Result<LoadResult, String> {
    if !spec.addr.ip().is_loopback() {
        return Err(format!(
            "refusing to load a non-loopback address {}",
            spec.addr
        ));
    }
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
        total.requests += part.requests;
        total.errors += part.errors;
        total.latencies_us.extend(part.latencies_us);
    }
    total.seconds = spec.duration.as_secs_f64();
    total.latencies_us.sort_unstable();
    Ok(total)
}

async fn connection(spec: LoadSpec, index: u64, measure_from: Instant, end: Instant) -> LoadResult {
    let mut result = LoadResult::default();
    let mut sequence = index;
    let mut buffer = vec![0u8; 64 * 1024];
    let mut stream: Option<TcpStream> = None;
    while Instant::now() < end {
        if stream.is_none() {
            match TcpStream::connect(spec.addr).await {
                Ok(connected) => {
                    let _ = connected.set_nodelay(true);
                    stream = Some(connected);
                }
                Err(_) => {
                    result.errors += 1;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            }
        }
        let Some(open) = stream.as_mut() else {
            continue;
        };
        let request = (spec.request)(sequence);
        let expected = (spec.expect)(sequence);
        sequence += spec.connections as u64;
        let sent = Instant::now();
        let answer = exchange(open, &request, &mut buffer).await;
        let measured = sent >= measure_from && Instant::now() <= end;
        match answer {
            Ok(Answer {
                status, keep_alive, ..
            }) => {
                if measured {
                    result.requests += 1;
                    let micros = sent.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
                    result.latencies_us.push(micros);
                    if status != expected {
                        result.errors += 1;
                    }
                }
                if !keep_alive {
                    stream = None;
                }
            }
            Err(_) => {
                if measured {
                    result.errors += 1;
                }
                stream = None;
            }
        }
    }
    result
}

/// Sends one request on a new connection and returns the response's status and body length.
pub async fn one_request(addr: SocketAddr, request: &[u8]) -> std::io::Result<Answer> {
    if !addr.ip().is_loopback() {
        return Err(std::io::Error::other("refusing a non-loopback address"));
    }
    let mut stream = TcpStream::connect(addr).await?;
    let mut buffer = vec![0u8; 64 * 1024];
    exchange(&mut stream, request, &mut buffer).await
}

/// What a response said, as far as the benchmark cares.
#[derive(Debug, Clone, Copy)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// Whether the connection stays open.
    pub keep_alive: bool,
    /// The body's length.
    pub body_length: usize,
    /// `X-Total-Count`, on lists.
    pub total_count: Option<u64>,
}

/// Sends one request and reads its whole response.
async fn exchange(
    stream: &mut TcpStream,
    request: &[u8],
    buffer: &mut [u8],
) -> std::io::Result<Answer> {
    stream.write_all(request).await?;
    let mut filled = 0;
    let head_end = loop {
        if filled == buffer.len() {
            return Err(std::io::Error::other("response head too large"));
        }
        let read = stream.read(&mut buffer[filled..]).await?;
        if read == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        filled += read;
        if let Some(at) = find(&buffer[..filled], b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = std::str::from_utf8(&buffer[..head_end]).map_err(std::io::Error::other)?;
    let status: u16 = head
        .get(9..12)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| std::io::Error::other("no status line"))?;
    let mut content_length = 0usize;
    let mut keep_alive = true;
    let mut total_count = None;
    for line in head.split("\r\n").skip(1) {
        if let Some((name, value)) = line.split_once(':') {
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                content_length = value.parse().map_err(std::io::Error::other)?;
            } else if name.eq_ignore_ascii_case("connection") && value.eq_ignore_ascii_case("close")
            {
                keep_alive = false;
            } else if name.eq_ignore_ascii_case("x-total-count") {
                total_count = value.parse().ok();
            }
        }
    }
    let mut body_read = filled - head_end;
    while body_read < content_length {
        let want = (content_length - body_read).min(buffer.len());
        let read = stream.read(&mut buffer[..want]).await?;
        if read == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        body_read += read;
    }
    Ok(Answer {
        status,
        keep_alive,
        body_length: content_length,
        total_count,
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// An HTTP/1.1 request with the demo credentials and an optional JSON body.
pub fn request(method: &str, path: &str, credentials: (&str, &str), body: Option<&str>) -> Vec<u8> {
    let mut text = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAPI-Key: {}\r\nAPI-Secret: {}\r\n",
        credentials.0, credentials.1
    );
    match body {
        Some(body) => {
            text.push_str("Content-Type: application/json\r\n");
            text.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
        }
        None => text.push_str("\r\n"),
    }
    text.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_pick_ranks() {
        let result = LoadResult {
            requests: 5,
            errors: 0,
            seconds: 1.0,
            latencies_us: vec![1000, 2000, 3000, 4000, 5000],
        };
        assert_eq!(result.quantile_ms(0.5), 3.0);
        assert_eq!(result.quantile_ms(1.0), 5.0);
        assert_eq!(result.rps(), 5.0);
    }

    #[test]
    fn requests_carry_a_length() {
        let bytes = request("POST", "/v1/orders", ("k", "s"), Some("{}"));
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.ends_with("Content-Length: 2\r\n\r\n{}"));
    }
}
