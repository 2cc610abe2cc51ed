//! A webhook receiver on 127.0.0.1: a real HTTP/1 server that records every request
//! boxsub makes of it (with the path it was sent to, so that nodes given different paths
//! can be told apart) and answers as the test says (a status, a status with `Retry-After`,
//! a status after a pause, or no answer at all), and that can go down (its port refuses
//! connections) and come back on the same port. Owned by the test: dropping it stops it.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// How the receiver answers a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// This status, no body.
    Status(u16),
    /// This status with `Retry-After` in seconds.
    RetryAfter(u16, u64),
    /// No answer for a minute (past boxsub's timeout).
    Hang,
    /// This status after this pause (a slow receiver, which deliveries queue behind).
    Slow(u16, Duration),
}

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The path it was sent to (`/hooks`, or whatever the catalogue's URL says).
    pub path: String,
    /// `webhook-id`.
    pub id: String,
    /// `webhook-timestamp`.
    pub timestamp: String,
    /// `webhook-signature`.
    pub signature: String,
    /// `content-type`.
    pub content_type: String,
    /// The body as sent.
    pub body: Vec<u8>,
    /// The body as JSON (`null` if it is not).
    pub json: Value,
    /// What the receiver answered (0 for no answer).
    pub status: u16,
    /// When it came.
    pub at: Instant,
}

impl Delivery {
    /// The event's sequence number.
    pub fn sequence(&self) -> u64 {
        self.json["sequence"].as_u64().unwrap_or(0)
    }
}

#[derive(Default)]
struct State {
    /// Answers for the next requests, in order; then `usual`.
    next: VecDeque<Answer>,
    usual: Option<Answer>,
    got: Vec<Delivery>,
}

/// A webhook receiver; see the module's documentation.
pub struct Receiver {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    serving: Option<JoinHandle<()>>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if let Some(serving) = self.serving.take() {
            serving.abort();
        }
    }
}

impl Receiver {
    /// A receiver on a free port of 127.0.0.1 answering 204.
    pub async fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding the receiver");
        let addr = listener.local_addr().expect("the receiver's address");
        let state = Arc::new(Mutex::new(State::default()));
        let serving = Some(tokio::spawn(serve(listener, state.clone())));
        Receiver {
            addr,
            state,
            serving,
        }
    }

    /// `http://127.0.0.1:PORT/hooks`.
    pub fn url(&self) -> String {
        format!("http://{}/hooks", self.addr)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Answers every request from now on with `answer`.
    pub fn answer(&self, answer: Answer) {
        let mut state = self.state();
        state.next.clear();
        state.usual = Some(answer);
    }

    /// Answers the next requests with `answers`, in order, then as before.
    pub fn answer_next(&self, answers: &[Answer]) {
        self.state().next.extend(answers.iter().copied());
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Delivery> {
        self.state().got.clone()
    }

    /// The requests answered with a 2xx.
    pub fn delivered(&self) -> Vec<Delivery> {
        self.requests()
            .into_iter()
            .filter(|d| (200..300).contains(&d.status))
            .collect()
    }

    /// Stops listening and drops every open connection: the port refuses connections.
    pub async fn down(&mut self) {
        if let Some(serving) = self.serving.take() {
            serving.abort();
            let _ = serving.await;
        }
    }

    /// Listens again on the same port.
    pub async fn up(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let listener = loop {
            match TcpListener::bind(self.addr).await {
                Ok(listener) => break listener,
                Err(error) if Instant::now() < deadline => {
                    let _ = error;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(error) => panic!("rebinding the receiver on {}: {error}", self.addr),
            }
        };
        self.serving = Some(tokio::spawn(serve(listener, self.state.clone())));
    }

    /// Waits until at least `count` requests were answered with a 2xx (within `within`),
    /// and returns them; panics with what came if they do not.
    pub async fn wait_for_delivered(&self, count: usize, within: Duration) -> Vec<Delivery> {
        let deadline = Instant::now() + within;
        loop {
            let delivered = self.delivered();
            if delivered.len() >= count {
                return delivered;
            }
            if Instant::now() >= deadline {
                panic!(
                    "{} of {count} deliveries within {within:?}; requests: {:?}",
                    delivered.len(),
                    self.requests()
                        .iter()
                        .map(|d| (d.sequence(), d.status))
                        .collect::<Vec<_>>()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until at least `count` requests came (whatever the answer), within `within`.
    pub async fn wait_for_requests(&self, count: usize, within: Duration) -> Vec<Delivery> {
        let deadline = Instant::now() + within;
        loop {
            let got = self.requests();
            if got.len() >= count || Instant::now() >= deadline {
                assert!(
                    got.len() >= count,
                    "{} of {count} requests within {within:?}",
                    got.len()
                );
                return got;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Accepts connections until aborted; the connections' tasks are aborted with it.
async fn serve(listener: TcpListener, state: Arc<Mutex<State>>) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let state = state.clone();
        connections.spawn(async move {
            let service = service_fn(move |request| answer(request, state.clone()));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
        while connections.try_join_next().is_some() {}
    }
}

async fn answer(
    request: Request<hyper::body::Incoming>,
    state: Arc<Mutex<State>>,
) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let path = request.uri().path().to_owned();
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let (id, timestamp, signature, content_type) = (
        header("webhook-id"),
        header("webhook-timestamp"),
        header("webhook-signature"),
        header("content-type"),
    );
    let body = request
        .into_body()
        .collect()
        .await
        .map(|collected| collected.to_bytes().to_vec())
        .unwrap_or_default();
    let chosen = {
        let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
        let chosen = state
            .next
            .pop_front()
            .or(state.usual)
            .unwrap_or(Answer::Status(204));
        state.got.push(Delivery {
            path,
            id,
            timestamp,
            signature,
            content_type,
            json: serde_json::from_slice(&body).unwrap_or(Value::Null),
            body,
            status: match chosen {
                Answer::Status(status)
                | Answer::RetryAfter(status, _)
                | Answer::Slow(status, _) => status,
                Answer::Hang => 0,
            },
            at: Instant::now(),
        });
        chosen
    };
    let mut response = Response::new(Full::new(Bytes::new()));
    match chosen {
        Answer::Status(status) => {
            *response.status_mut() = hyper::StatusCode::from_u16(status).expect("a status");
        }
        Answer::RetryAfter(status, seconds) => {
            *response.status_mut() = hyper::StatusCode::from_u16(status).expect("a status");
            response.headers_mut().insert(
                "retry-after",
                seconds.to_string().parse().expect("a header"),
            );
        }
        Answer::Hang => {
            tokio::time::sleep(Duration::from_secs(60)).await;
        }
        Answer::Slow(status, pause) => {
            tokio::time::sleep(pause).await;
            *response.status_mut() = hyper::StatusCode::from_u16(status).expect("a status");
        }
    }
    Ok(response)
}
