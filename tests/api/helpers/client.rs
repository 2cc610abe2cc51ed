//! Talking to the server: [`TestResponse`] and the typed request helpers of [`TestApp`]
//! (every answer they get is held to the OpenAPI document, [`super::contract`]), raw
//! HTTP/1.1 over TCP for what reqwest cannot send ([`TestApp::raw_exchange`],
//! [`RawResponse`]), and the URL pieces clients build and follow (percent-encoding, `Link`
//! headers, query parameters).

use std::time::Duration;

use reqwest::header::HeaderMap;
use reqwest::Method;
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::fixtures::{customer_body_b, store_b, Creds};
use super::server::TestApp;

/// How long a raw TCP exchange may take before the test fails.
const RAW_TIMEOUT: Duration = Duration::from_secs(15);

/// Percent-encodes everything but RFC 3986 unreserved characters.
pub fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A response, read completely, with the request it answers for diagnostics.
pub struct TestResponse {
    /// `METHOD path` of the request.
    pub request: String,
    /// The status code.
    pub status: u16,
    /// The response headers.
    pub headers: HeaderMap,
    /// The raw body.
    pub body: Vec<u8>,
}

impl TestResponse {
    /// The body as (lossy) text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).to_string()
    }

    /// A header's value, if present and visible ASCII.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }

    /// The request, status, headers and body, for failure messages.
    pub fn describe(&self) -> String {
        format!(
            "{} answered {} with headers {:?} and body {}",
            self.request,
            self.status,
            self.headers,
            self.text()
        )
    }
}

/// An HTTP response read from a raw TCP exchange.
#[derive(Debug)]
pub struct RawResponse {
    /// The status code.
    pub status: u16,
    /// Headers in arrival order, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The decoded body.
    pub body: Vec<u8>,
}

impl RawResponse {
    /// The first header of that name.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The status, headers and body (as lossy text), for failure messages.
    pub fn describe(&self) -> String {
        format!(
            "{} with headers {:?} and body {:?}",
            self.status,
            self.headers,
            String::from_utf8_lossy(&self.body)
        )
    }

    /// The body as JSON (panics with the response otherwise).
    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "raw response body is not JSON ({e}): {self:?} {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

/// Decodes a complete chunked body with `httparse`; `None` while incomplete or malformed.
fn dechunk(mut data: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let httparse::Status::Complete((start, size)) = httparse::parse_chunk_size(data).ok()?
        else {
            return None;
        };
        let size = usize::try_from(size).ok()?;
        data = &data[start..];
        if size == 0 {
            return Some(out);
        }
        let chunk = data.get(..size)?;
        out.extend_from_slice(chunk);
        data = data.get(size + 2..)?;
    }
}

/// Parses one response (with `httparse`) from the bytes read so far; `eof` says no more
/// will come.
fn parse_raw(buf: &[u8], eof: bool) -> Option<RawResponse> {
    let mut slots = [httparse::EMPTY_HEADER; 64];
    let mut head = httparse::Response::new(&mut slots);
    let httparse::Status::Complete(head_len) = head.parse(buf).ok()? else {
        return None;
    };
    let status = head.code?;
    let headers: Vec<(String, String)> = head
        .headers
        .iter()
        .map(|h| {
            let value = String::from_utf8_lossy(h.value).trim().to_string();
            (h.name.to_ascii_lowercase(), value)
        })
        .collect();
    let rest = &buf[head_len..];
    let get = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v);
    let body = if get("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        dechunk(rest)?
    } else if let Some(len) = get("content-length").and_then(|v| v.parse::<usize>().ok()) {
        rest.get(..len)?.to_vec()
    } else if status == 204 || status == 304 || (100..200).contains(&status) {
        Vec::new()
    } else if eof {
        rest.to_vec()
    } else {
        return None;
    };
    Some(RawResponse {
        status,
        headers,
        body,
    })
}

/// How a raw connection ended, as [`read_until_closed`] saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// The server closed it (end of file).
    Eof,
    /// Reading failed: a reset (the server closed it with unread bytes), say.
    Error(std::io::ErrorKind),
    /// It was still open when the time given ran out.
    StillOpen,
}

impl RawResponse {
    /// The response at the start of everything a connection carried until it closed
    /// (a body without a length runs to the end); `None` if no complete response is there.
    pub fn parse(bytes: &[u8]) -> Option<RawResponse> {
        parse_raw(bytes, true)
    }
}

/// Reads one response off a raw connection, waiting at most `within`: `Err` says what
/// arrived instead (nothing, or an incomplete response, before a close or the time ran out).
pub async fn read_raw_response<R: AsyncRead + Unpin>(
    reader: &mut R,
    within: Duration,
) -> Result<RawResponse, String> {
    let mut buf = Vec::new();
    let read = tokio::time::timeout(within, async {
        let mut chunk = vec![0u8; 16 * 1024];
        loop {
            if let Some(response) = parse_raw(&buf, false) {
                return Ok(response);
            }
            match reader.read(&mut chunk).await {
                Ok(0) => return parse_raw(&buf, true).ok_or("the connection was closed"),
                Err(_) => return parse_raw(&buf, true).ok_or("reading failed"),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await;
    let failure = match read {
        Ok(Ok(response)) => return Ok(response),
        Ok(Err(why)) => why.to_string(),
        Err(_) => format!("nothing complete within {within:?}"),
    };
    Err(format!(
        "no response: {failure}; received {:?}",
        String::from_utf8_lossy(&buf)
    ))
}

/// Reads a raw connection until the server closes it or `within` passes: everything that
/// arrived, and how it ended.
pub async fn read_until_closed<R: AsyncRead + Unpin>(
    reader: &mut R,
    within: Duration,
) -> (Vec<u8>, Closed) {
    let mut buf = Vec::new();
    let read = tokio::time::timeout(within, async {
        let mut chunk = vec![0u8; 16 * 1024];
        loop {
            match reader.read(&mut chunk).await {
                Ok(0) => return Closed::Eof,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(error) => return Closed::Error(error.kind()),
            }
        }
    })
    .await;
    (buf, read.unwrap_or(Closed::StillOpen))
}

impl TestApp {
    /// The full URL of a path.
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.address, path)
    }

    /// Like [`TestApp::send`], but a transport failure (connection refused or
    /// reset, no complete answer) is returned as `Err` instead of failing the
    /// test: for requests racing a crash.
    pub async fn try_send(
        &self,
        method: Method,
        path: &str,
        creds: Option<&Creds>,
        body: Option<Vec<u8>>,
        headers: &[(&str, &str)],
    ) -> Result<TestResponse, String> {
        let request = format!("{method} {path}");
        let method_name = method.as_str().to_owned();
        let mut builder = self.client.request(method, self.url(path));
        if let Some(creds) = creds {
            builder = builder
                .header("API-Key", creds.key.as_str())
                .header("API-Secret", creds.secret.as_str());
        }
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        if let Some(body) = body {
            builder = builder.body(body);
        }
        let response = builder
            .send()
            .await
            .map_err(|e| format!("{request} failed: {e:?}"))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response
            .bytes()
            .await
            .map_err(|e| format!("{request}: reading the body failed: {e:?}"))?
            .to_vec();
        // Every answer any test gets is held to the OpenAPI document.
        if let Err(mismatch) = super::contract::check(&method_name, path, status, &headers, &body) {
            panic!("{request}: the answer does not match docs/openapi.json: {mismatch}");
        }
        Ok(TestResponse {
            request,
            status,
            headers,
            body,
        })
    }

    /// Sends any request; `creds: None` sends no credential headers. A transport failure
    /// fails the test, with the server's last log lines.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        creds: Option<&Creds>,
        body: Option<Vec<u8>>,
        headers: &[(&str, &str)],
    ) -> TestResponse {
        self.try_send(method, path, creds, body, headers)
            .await
            .unwrap_or_else(|failure| panic!("{failure}\nserver stderr:\n{}", self.stderr_tail()))
    }

    async fn send_json(
        &self,
        method: Method,
        path: &str,
        creds: Option<&Creds>,
        body: &Value,
    ) -> TestResponse {
        let bytes = serde_json::to_vec(body).unwrap();
        self.send(
            method,
            path,
            creds,
            Some(bytes),
            &[("Content-Type", "application/json")],
        )
        .await
    }

    /// GET with the default credentials.
    pub async fn get(&self, path: &str) -> TestResponse {
        self.send(Method::GET, path, Some(&self.creds), None, &[])
            .await
    }

    /// GET with explicit credentials.
    pub async fn get_as(&self, path: &str, creds: &Creds) -> TestResponse {
        self.send(Method::GET, path, Some(creds), None, &[]).await
    }

    /// GET without credentials.
    pub async fn get_without_auth(&self, path: &str) -> TestResponse {
        self.send(Method::GET, path, None, None, &[]).await
    }

    /// POST a JSON body with the default credentials.
    pub async fn post_json(&self, path: &str, body: &Value) -> TestResponse {
        self.send_json(Method::POST, path, Some(&self.creds), body)
            .await
    }

    /// POST a JSON body with explicit credentials.
    pub async fn post_json_as(&self, path: &str, body: &Value, creds: &Creds) -> TestResponse {
        self.send_json(Method::POST, path, Some(creds), body).await
    }

    /// POST raw bytes (no Content-Type) with the default credentials.
    pub async fn post_raw(&self, path: &str, body: impl Into<Vec<u8>>) -> TestResponse {
        self.send(
            Method::POST,
            path,
            Some(&self.creds),
            Some(body.into()),
            &[],
        )
        .await
    }

    /// PATCH a JSON body with the default credentials.
    pub async fn patch_json(&self, path: &str, body: &Value) -> TestResponse {
        self.send_json(Method::PATCH, path, Some(&self.creds), body)
            .await
    }

    /// PATCH a JSON body with explicit credentials.
    pub async fn patch_json_as(&self, path: &str, body: &Value, creds: &Creds) -> TestResponse {
        self.send_json(Method::PATCH, path, Some(creds), body).await
    }

    /// PUT a JSON body with the default credentials.
    pub async fn put_json(&self, path: &str, body: &Value) -> TestResponse {
        self.send_json(Method::PUT, path, Some(&self.creds), body)
            .await
    }

    /// POST /v1/customers.
    pub async fn create_customer(&self, body: &Value) -> TestResponse {
        self.post_json("/v1/customers", body).await
    }

    /// POST /v1/customers, asserting 201; returns the customer.
    pub async fn create_customer_ok(&self, body: &Value) -> Value {
        let response = self.create_customer(body).await;
        response.assert_status(201);
        response.json()
    }

    /// Creates a store-B customer with store B's credentials; returns it.
    pub async fn create_customer_b_ok(&self, email: &str) -> Value {
        let response = self
            .post_json_as("/v1/customers", &customer_body_b(email), &store_b())
            .await;
        response.assert_status(201);
        response.json()
    }

    /// POST /v1/orders.
    pub async fn create_order(&self, body: &Value) -> TestResponse {
        self.post_json("/v1/orders", body).await
    }

    /// POST /v1/orders, asserting 201; returns the order.
    pub async fn create_order_ok(&self, body: &Value) -> Value {
        let response = self.create_order(body).await;
        response.assert_status(201);
        response.json()
    }

    /// POST /v1/customers/sign_in with a JSON body.
    pub async fn sign_in(&self, email: &str, password: &str) -> TestResponse {
        self.post_json(
            "/v1/customers/sign_in",
            &json!({"email": email, "password": password}),
        )
        .await
    }

    /// GET /v1/customers?email=..., asserting 200; returns the array.
    pub async fn lookup_email(&self, email: &str) -> Vec<Value> {
        self.lookup_email_as(email, &self.creds).await
    }

    /// GET /v1/customers?email=... with explicit credentials.
    pub async fn lookup_email_as(&self, email: &str, creds: &Creds) -> Vec<Value> {
        let response = self
            .get_as(&format!("/v1/customers?email={}", enc(email)), creds)
            .await;
        response.assert_status(200);
        response
            .json()
            .as_array()
            .cloned()
            .unwrap_or_else(|| panic!("expected an array: {}", response.text()))
    }

    /// GET /v1/orders?customer_id=..., asserting 200; returns the array.
    pub async fn orders_of(&self, customer_id: i64) -> Vec<Value> {
        let response = self
            .get(&format!("/v1/orders?customer_id={customer_id}"))
            .await;
        response.assert_status(200);
        response
            .json()
            .as_array()
            .cloned()
            .unwrap_or_else(|| panic!("expected an array: {}", response.text()))
    }

    /// Every customer of the webstore of `creds` through the paginated list
    /// (`embed=address`, bounded to 100 pages of 500), with the `X-Total-Count`
    /// of the first page.
    pub async fn all_customers_as(&self, creds: &Creds) -> (Vec<Value>, Option<u64>) {
        let mut all = Vec::new();
        let mut total = None;
        for page in 1..=100 {
            let response = self
                .get_as(
                    &format!("/v1/customers?embed=address&per_page=500&page={page}"),
                    creds,
                )
                .await;
            response.assert_status(200);
            if page == 1 {
                total = response
                    .header("x-total-count")
                    .and_then(|v| v.parse::<u64>().ok());
            }
            let items = response
                .json()
                .as_array()
                .cloned()
                .unwrap_or_else(|| panic!("expected an array: {}", response.text()));
            if items.is_empty() {
                break;
            }
            all.extend(items);
        }
        (all, total)
    }

    /// The head of a raw HTTP/1.1 request with `Connection: close`.
    pub fn raw_head(&self, method: &str, target: &str, creds: Option<&Creds>) -> String {
        let mut head = format!(
            "{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n",
            self.port
        );
        if let Some(creds) = creds {
            head.push_str(&format!(
                "API-Key: {}\r\nAPI-Secret: {}\r\n",
                creds.key, creds.secret
            ));
        }
        head
    }

    /// A raw chunked POST of `body`, split into chunks of `chunk_size`.
    pub fn chunked_request(&self, path: &str, body: &[u8], chunk_size: usize) -> Vec<u8> {
        let mut request = self.raw_head("POST", path, Some(&self.creds)).into_bytes();
        request.extend_from_slice(
            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
        );
        for chunk in body.chunks(chunk_size) {
            request.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
            request.extend_from_slice(chunk);
            request.extend_from_slice(b"\r\n");
        }
        request.extend_from_slice(b"0\r\n\r\n");
        request
    }

    /// Writes raw bytes to a fresh connection while reading the answer.
    /// Returns `None` when the server closed the connection without a response.
    /// Panics if nothing complete arrives within 15 s.
    pub async fn raw_exchange(&self, request: Vec<u8>) -> Option<RawResponse> {
        let stream = TcpStream::connect(("127.0.0.1", self.port))
            .await
            .expect("failed to connect to the server");
        let (mut reader, mut writer) = stream.into_split();
        // The writer half is kept alive (returned from the task) until we are
        // done reading, so the server never sees a half-closed connection.
        let write_task = tokio::spawn(async move {
            let _ = writer.write_all(&request).await;
            let _ = writer.flush().await;
            writer
        });
        let mut buf = Vec::new();
        let read = tokio::time::timeout(RAW_TIMEOUT, async {
            let mut chunk = vec![0u8; 16 * 1024];
            loop {
                if let Some(response) = parse_raw(&buf, false) {
                    return Some(response);
                }
                match reader.read(&mut chunk).await {
                    Ok(0) | Err(_) => return parse_raw(&buf, true),
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
        })
        .await;
        write_task.abort();
        match read {
            Ok(response) => response,
            Err(_) => panic!(
                "no complete response within {RAW_TIMEOUT:?}; received so far: {:?}",
                String::from_utf8_lossy(&buf)
            ),
        }
    }

    /// Asserts that GET /v1/ping still answers 204.
    pub async fn assert_alive(&self) {
        let response = self.get_without_auth("/v1/ping").await;
        response.assert_status(204);
        assert!(response.body.is_empty(), "204 must have no body");
    }
}

/// Parses an RFC 8288 `Link` header into (rel, url) pairs.
pub fn parse_link_header(value: &str) -> Vec<(String, String)> {
    value
        .split(',')
        .filter_map(|part| {
            let (url, params) = part.split_once(';')?;
            let url = url.trim().trim_start_matches('<').trim_end_matches('>');
            let rel = params.split(';').find_map(|p| {
                let (k, v) = p.split_once('=')?;
                (k.trim() == "rel").then(|| v.trim().trim_matches('"').to_string())
            })?;
            Some((rel, url.to_string()))
        })
        .collect()
}

/// The value of one query parameter of a (relative or absolute) URL.
pub fn query_param(url: &str, name: &str) -> Option<String> {
    let query = url.split_once('?')?.1;
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == name).then(|| v.to_string())
    })
}

/// The path and query of a URL that may be absolute.
pub fn path_and_query(url: &str) -> String {
    match url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
    {
        Some(rest) => rest
            .find('/')
            .map_or("/".to_string(), |i| rest[i..].to_string()),
        None => url.to_string(),
    }
}
