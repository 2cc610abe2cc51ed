//! The client side of the nodes' admin listeners (`crate::http::admin`), as `boxsub
//! move-webstore` speaks to them: one request at a time over HTTP/1 (hyper's client
//! connection), each bounded in time, and the node of a shard that answers for a webstore
//! (a replicated shard's primary: its standbys answer 503).
//!
//! Must not touch: what the steps mean (the move's), HAProxy, the operator's files.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::Value;

/// How long connecting to an admin listener may take.
const CONNECT_WITHIN: Duration = Duration::from_secs(5);
/// How long one admin request may take (an import of a large webstore is one request).
const ANSWER_WITHIN: Duration = Duration::from_secs(600);

/// One admin request's answer: the status and the body.
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// The body.
    pub body: Bytes,
}

impl Answer {
    /// The body as JSON (`null` if it is not).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

/// The admin listeners of the nodes a move speaks to, with the bearer token.
pub struct AdminClient {
    token: String,
}

impl AdminClient {
    /// A client sending `token`.
    pub fn new(token: &str) -> AdminClient {
        AdminClient {
            token: token.to_owned(),
        }
    }

    /// One request to the admin listener at `addr`.
    pub async fn request(
        &self,
        addr: &str,
        method: &str,
        path: &str,
        body: Bytes,
    ) -> Result<Answer, String> {
        let failed =
            |error: &dyn std::fmt::Display| format!("{method} http://{addr}{path}: {error}");
        let stream = tokio::time::timeout(CONNECT_WITHIN, tokio::net::TcpStream::connect(addr))
            .await
            .map_err(|_| failed(&"connecting timed out"))?
            .map_err(|error| failed(&error))?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .map_err(|error| failed(&error))?;
        // Ends with the connection, or when this request's future is dropped.
        let driver = AbortOnDrop(tokio::spawn(connection));
        let request = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", addr)
            .header("authorization", format!("Bearer {}", self.token))
            .body(Full::new(body))
            .map_err(|error| failed(&error))?;
        let response = tokio::time::timeout(ANSWER_WITHIN, sender.send_request(request))
            .await
            .map_err(|_| failed(&format!("no answer in {} s", ANSWER_WITHIN.as_secs())))?
            .map_err(|error| failed(&error))?;
        let status = response.status().as_u16();
        let body = tokio::time::timeout(ANSWER_WITHIN, response.into_body().collect())
            .await
            .map_err(|_| failed(&"the answer's body did not come"))?
            .map_err(|error| failed(&error))?
            .to_bytes();
        drop(driver);
        Ok(Answer { status, body })
    }

    /// A request that must succeed: its answer's JSON, or why not.
    pub async fn step(
        &self,
        addr: &str,
        method: &str,
        path: &str,
        body: Bytes,
    ) -> Result<Value, String> {
        let answer = self.request(addr, method, path, body).await?;
        if answer.status != 200 {
            return Err(format!(
                "{method} {path} on {addr}: {} {}",
                answer.status,
                String::from_utf8_lossy(&answer.body)
            ));
        }
        Ok(answer.json())
    }

    /// The admin address of `addrs` that answers for webstore `id` (a replicated shard's
    /// primary; standbys answer 503), and what that node holds of it.
    pub async fn reachable(&self, addrs: &[String], id: &str) -> Result<(String, Value), String> {
        let mut tried = Vec::new();
        for addr in addrs {
            match self
                .request(addr, "GET", &format!("/admin/webstores/{id}"), Bytes::new())
                .await
            {
                Ok(answer) if answer.status == 200 => return Ok((addr.clone(), answer.json())),
                Ok(answer) => tried.push(format!("{addr}: {}", answer.status)),
                Err(error) => tried.push(error),
            }
        }
        Err(format!("no admin listener answered ({})", tried.join("; ")))
    }
}

/// A task aborted when this is dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
