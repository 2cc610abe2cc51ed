//! Hostile clients: connections reset mid-request by the thousand, stalled heads and bodies,
//! a flood past the connection cap (each refused with the canned 503), a request that
//! outlives the request deadline (503, nothing stored), an email change that outlives its
//! deadline. Each test
//! then checks that the customer, the email or the server it aimed at still works.
//!
//! Every loop is bounded in count and time; every socket is closed by the end of its test.
//! Figures (how many requests, how long things took) are printed; run with `--nocapture`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

use crate::helpers::{
    customer_body, id_of, read_raw_response, read_until_closed, spawn_app, store_a, Closed, Creds,
    DataDir, Launch, RawResponse, TestApp,
};

/// Concurrent connections a storm keeps open at once.
const STORM_WIDTH: usize = 48;

/// A raw HTTP/1.1 request that leaves the connection open (no `Connection: close`).
fn request(app: &TestApp, method: &str, path: &str, creds: &Creds, body: &[u8]) -> Vec<u8> {
    let mut bytes = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAPI-Key: {}\r\nAPI-Secret: {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        app.port,
        creds.key,
        creds.secret,
        body.len()
    )
    .into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// Where a hostile client cuts its connection.
#[derive(Debug, Clone, Copy)]
enum Cut {
    /// Sends the whole request, waits this long, then resets.
    After(Duration),
    /// Sends all but the last `n` bytes, then resets.
    Short(usize),
}

impl Cut {
    /// The `i`th cut of a storm: mostly after the whole request at delays from 0 to 6 ms,
    /// every fifth one mid-request.
    fn nth(i: usize) -> Cut {
        if i % 5 == 4 {
            Cut::Short(1 + i % 40)
        } else {
            Cut::After(Duration::from_micros(((i * 1_237) % 7_000) as u64))
        }
    }
}

/// Sends `bytes` on a new connection and resets it (RST, not FIN) at `cut`.
async fn send_and_reset(port: u16, bytes: &[u8], cut: Cut) {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)).await else {
        return;
    };
    let _ = stream.set_zero_linger();
    match cut {
        Cut::After(delay) => {
            let _ = stream.write_all(bytes).await;
            tokio::time::sleep(delay).await;
        }
        Cut::Short(missing) => {
            let _ = stream
                .write_all(&bytes[..bytes.len().saturating_sub(missing)])
                .await;
        }
    }
    drop(stream);
}

/// Runs `count` reset requests made by `make(i)`, at most [`STORM_WIDTH`] at a time, and
/// returns how long the storm took.
async fn storm(app: &TestApp, count: usize, make: impl Fn(usize) -> Vec<u8>) -> Duration {
    let started = Instant::now();
    let width = Arc::new(Semaphore::new(STORM_WIDTH));
    let mut tasks = Vec::with_capacity(count);
    for i in 0..count {
        let permit = width.clone().acquire_owned().await.expect("never closed");
        let bytes = make(i);
        let port = app.port;
        tasks.push(tokio::spawn(async move {
            let _permit = permit;
            send_and_reset(port, &bytes, Cut::nth(i)).await;
        }));
    }
    let all = tokio::time::timeout(Duration::from_secs(120), join_all(tasks)).await;
    assert!(all.is_ok(), "a storm of {count} requests took over 120 s");
    started.elapsed()
}

/// Retries `attempt` until it returns `Some`, every 50 ms for at most 20 s (the server may
/// still be draining what a storm left in its queues; that must end, and quickly).
async fn eventually<T, F, Fut>(what: &str, mut attempt: F) -> (T, Duration)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(value) = attempt().await {
            return (value, started.elapsed());
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{what} did not recover within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thousands_of_reset_writes_leave_every_customer_and_email_working() {
    // Arrange: one customer per storm, so each storm's aftermath is seen on its own.
    let app = spawn_app().await;
    let creds = store_a();
    let with_password = |email: &str| {
        let mut body = customer_body(email);
        body["password"] = json!("correct horse battery");
        body
    };
    let orders_target = id_of(
        &app.create_customer_ok(&customer_body("o@example.com"))
            .await,
    );
    let patch_target = id_of(
        &app.create_customer_ok(&customer_body("p@example.com"))
            .await,
    );
    let signer = app
        .create_customer_ok(&with_password("signer@example.com"))
        .await;
    let mut figures = Vec::new();

    // Act + Assert: orders for one customer, each connection reset mid-flight.
    let order = serde_json::to_vec(&json!({"customer_id": orders_target, "box_id": 217})).unwrap();
    let took = storm(&app, 2_000, |_| {
        request(&app, "POST", "/v1/orders", &creds, &order)
    })
    .await;
    let (_, recovered) = eventually("POST /v1/orders after the storm", || async {
        let response = app
            .create_order(&json!({"customer_id": orders_target, "box_id": 217}))
            .await;
        (response.status == 201).then_some(())
    })
    .await;
    figures.push(("POST /v1/orders", 2_000, took, recovered));
    let stored = app.orders_of(orders_target).await.len();
    println!(
        "reset storm: {} of 2000 reset orders were stored before their reset",
        stored - 1
    );

    // Updates of one customer, alternating two emails and a name.
    let took = storm(&app, 2_000, |i| {
        let body =
            json!({"email": format!("p{}@example.com", i % 2), "last_name": format!("L{i}")});
        let path = format!("/v1/customers/{patch_target}");
        request(
            &app,
            "PATCH",
            &path,
            &creds,
            &serde_json::to_vec(&body).unwrap(),
        )
    })
    .await;
    // A storm request whose reset the server has not noticed yet is still a request, and
    // may change the email after this one: recovered means a change that then stays.
    let (found, recovered) = eventually("PATCH /v1/customers/:id after the storm", || async {
        let response = app
            .patch_json(
                &format!("/v1/customers/{patch_target}"),
                &json!({"email": "p.final@example.com"}),
            )
            .await;
        if response.status != 200 {
            return None;
        }
        let found = app.lookup_email("P.FINAL@example.com").await;
        (found.len() == 1).then_some(found)
    })
    .await;
    figures.push(("PATCH /v1/customers/:id", 2_000, took, recovered));
    assert_eq!(id_of(&found[0]), patch_target);
    for released in ["p0@example.com", "p1@example.com"] {
        // Neither storm email is left claimed: each can be taken by a new customer.
        app.create_customer_ok(&customer_body(released)).await;
    }

    // Creates of one email, every connection reset.
    let body = serde_json::to_vec(&customer_body("storm@example.com")).unwrap();
    let took = storm(&app, 2_000, |_| {
        request(&app, "POST", "/v1/customers", &creds, &body)
    })
    .await;
    let holders = app.lookup_email("storm@example.com").await;
    assert!(holders.len() <= 1, "one email, one customer: {holders:?}");
    let (_, recovered) = eventually("POST /v1/customers after the storm", || async {
        let response = app
            .create_customer(&customer_body("after-storm@example.com"))
            .await;
        (response.status == 201).then_some(())
    })
    .await;
    figures.push(("POST /v1/customers", 2_000, took, recovered));
    if holders.is_empty() {
        app.create_customer_ok(&customer_body("storm@example.com"))
            .await;
    }

    // Sign-ins with the right password, every one abandoned.
    let sign_in = serde_json::to_vec(
        &json!({"email": "signer@example.com", "password": "correct horse battery"}),
    )
    .unwrap();
    let took = storm(&app, 1_000, |_| {
        request(&app, "POST", "/v1/customers/sign_in", &creds, &sign_in)
    })
    .await;
    let (signed_in, recovered) = eventually("sign-in after the storm", || async {
        let response = app
            .sign_in("signer@example.com", "correct horse battery")
            .await;
        (response.status == 200).then(|| response.json())
    })
    .await;
    figures.push(("POST /v1/customers/sign_in", 1_000, took, recovered));
    assert_eq!(signed_in.as_array().map(Vec::len), Some(1), "{signed_in}");
    assert_eq!(signed_in[0]["id"], signer["id"]);

    // The whole webstore still lists.
    let (all, total) = app.all_customers_as(&creds).await;
    assert_eq!(Some(all.len() as u64), total);
    app.assert_alive().await;
    for (endpoint, count, took, recovered) in figures {
        println!(
            "reset storm: {count} × {endpoint} in {:.2} s; the next request succeeded after {} ms",
            took.as_secs_f64(),
            recovered.as_millis()
        );
    }
}

/// Raises this test process's soft open-files limit to its hard limit and returns it.
fn raise_own_open_files() -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit");
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).expect("setrlimit");
    }
    hard
}

/// A connection the test holds open, and when it was opened.
struct Held {
    stream: TcpStream,
    opened: Instant,
}

/// Opens `count` connections (a few at a time) and sends `bytes` on each.
async fn hold_connections(port: u16, count: usize, bytes: &[u8]) -> Vec<Held> {
    let mut held = Vec::with_capacity(count);
    for batch in (0..count).collect::<Vec<_>>().chunks(100) {
        let opened = join_all(batch.iter().map(|_| async {
            // Taken before connecting: the server's deadline starts at its accept, which is
            // later, so a connection can never seem to close before its deadline.
            let opened = Instant::now();
            let mut stream = TcpStream::connect(("127.0.0.1", port))
                .await
                .expect("connect");
            stream.write_all(bytes).await.expect("write");
            Held { stream, opened }
        }))
        .await;
        held.extend(opened);
    }
    held
}

/// Reads each held connection until the server closes it (bounded by `within`), returning
/// how long each lived and what it was answered.
async fn wait_for_closes(held: Vec<Held>, within: Duration) -> Vec<(Duration, Vec<u8>)> {
    let closes = held
        .into_iter()
        .map(|Held { mut stream, opened }| async move {
            let mut answer = Vec::new();
            let read = tokio::time::timeout(within, stream.read_to_end(&mut answer)).await;
            assert!(
                read.is_ok(),
                "a stalled connection was still open after {within:?}"
            );
            (opened.elapsed(), answer)
        });
    join_all(closes).await
}

fn summary(lives: &[Duration]) -> String {
    let mut sorted = lives.to_vec();
    sorted.sort();
    let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q) as usize].as_secs_f64();
    format!(
        "lived min {:.2} s, median {:.2} s, max {:.2} s",
        at(0.0),
        at(0.5),
        at(1.0)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thousands_of_stalled_connections_neither_starve_others_nor_outlive_their_deadlines() {
    // Arrange: a server started under the usual soft limit of 1,024 open files, with short
    // deadlines so that the test is quick.
    let hard = raise_own_open_files();
    let heads = if hard >= 4_000 {
        3_000
    } else {
        (hard as usize) / 2
    };
    let bodies = 200.min(heads / 10);
    if hard < 4_000 {
        eprintln!("WARNING: only {hard} open files allowed here; holding {heads} connections");
    }
    let dir = DataDir::new();
    let app = Launch::new()
        .on(&dir)
        .ulimit("-Sn 1024")
        .args(&["--header-timeout-secs", "3", "--body-timeout-secs", "3"])
        .spawn()
        .await;
    // Log lines reach the test through a pipe of their own: wait (bounded) for this one.
    assert!(
        app.wait_for_stderr_line(Duration::from_secs(10), |line| line
            .contains("open-files limit"))
            .is_some(),
        "the server logs its open-files limits: {}",
        app.stderr_tail()
    );
    let half_head = format!(
        "GET /v1/webstore HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAPI-Key: {}\r\n",
        app.port,
        store_a().key
    );
    let mut slow_body = request(&app, "POST", "/v1/customers", &store_a(), &[b' '; 100]);
    slow_body.truncate(slow_body.len() - 90);

    // Act: hold thousands of stalled heads and some stalled bodies, then be a normal client.
    let stalled_heads = hold_connections(app.port, heads, half_head.as_bytes()).await;
    let stalled_bodies = hold_connections(app.port, bodies, &slow_body).await;
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let asked = Instant::now();
    let answer = client
        .get(app.url("/v1/webstore"))
        .header("API-Key", &app.creds.key)
        .header("API-Secret", &app.creds.secret)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .expect("a normal client is answered while stalled connections are held");
    let waited = asked.elapsed();
    assert_eq!(answer.status(), 200);
    let created = app
        .create_customer(&customer_body("normal@example.com"))
        .await;
    created.assert_status(201);

    // Assert: the normal client did not wait, and every stalled connection was closed soon
    // after its deadline (three seconds), the stalled bodies with a 408.
    assert!(
        waited < Duration::from_secs(2),
        "a normal client waited {waited:?}"
    );
    let heads_closed = wait_for_closes(stalled_heads, Duration::from_secs(25)).await;
    let bodies_closed = wait_for_closes(stalled_bodies, Duration::from_secs(25)).await;
    let head_lives: Vec<_> = heads_closed.iter().map(|(life, _)| *life).collect();
    let body_lives: Vec<_> = bodies_closed.iter().map(|(life, _)| *life).collect();
    for life in head_lives.iter().chain(&body_lives) {
        assert!(
            // A life counts from before the connect, and on a machine loaded by the whole
            // suite the server accepts the first of 3,200 connections seconds late (alone:
            // at most 4 s; under the suite, 12.4 s was seen): the upper bound leaves room for
            // that, and stays below the idle deadline (30 s) and "never".
            (Duration::from_millis(2_900)..Duration::from_secs(20)).contains(life),
            "a stalled connection lived {life:?} with a 3 s deadline"
        );
    }
    for (_, answer) in &bodies_closed {
        let text = String::from_utf8_lossy(answer);
        assert!(
            text.starts_with("HTTP/1.1 408"),
            "a stalled body got {text:?}"
        );
        assert!(
            text.to_ascii_lowercase().contains("connection: close"),
            "{text}"
        );
    }
    app.assert_alive().await;
    println!(
        "stalled: {heads} heads ({}), {bodies} bodies ({}); a normal client waited {} ms",
        summary(&head_lives),
        summary(&body_lives),
        waited.as_millis()
    );
}

/// Opens a connection and completes one keep-alive request on it, so that the server has
/// certainly accepted it.
async fn open_served(port: u16) -> TcpStream {
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let ping = format!("GET /v1/ping HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    stream.write_all(ping.as_bytes()).await.expect("write");
    let mut answer = [0u8; 256];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut answer))
        .await
        .expect("a served connection is answered")
        .expect("read");
    assert!(
        answer[..n].starts_with(b"HTTP/1.1 204"),
        "{:?}",
        &answer[..n]
    );
    stream
}

/// The connections a capped server gets past its cap, one after another, in the cap test.
const PAST_THE_CAP: usize = 3;

/// Asserts that `answer`, everything a connection past the cap carried until it was closed,
/// is the canned refusal that docs/api.md documents: a 503 with `Retry-After: 1`, JSON body
/// `{"message":"Service temporarily unavailable. Try again shortly.","outcome":"nothing_changed"}`,
/// and the close.
#[track_caller]
fn assert_canned_refusal(answer: &[u8], closed: Closed) {
    let text = String::from_utf8_lossy(answer);
    assert_eq!(
        closed,
        Closed::Eof,
        "refused but not closed cleanly: {text:?}"
    );
    let response = RawResponse::parse(answer)
        .unwrap_or_else(|| panic!("the connection past the cap got no canned 503: {text:?}"));
    assert_eq!(response.status, 503, "{text}");
    assert_eq!(response.header("retry-after"), Some("1"), "{text}");
    assert_eq!(response.header("connection"), Some("close"), "{text}");
    assert_eq!(
        response.header("content-type"),
        Some("application/json; charset=utf-8"),
        "{text}"
    );
    assert_eq!(
        response.json(),
        json!({"message": "Service temporarily unavailable. Try again shortly.",
               "outcome": "nothing_changed"}),
        "{text}"
    );
    let length = response.header("content-length").map(str::parse::<usize>);
    assert_eq!(length, Some(Ok(response.body.len())), "{text}");
    assert!(
        text.ends_with('}'),
        "nothing may follow the refusal: {text:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_past_the_cap_is_refused_at_once_and_service_resumes() {
    // Arrange: a cap of 8, every slot taken by a connection the server has certainly
    // accepted (each has been answered) and keeps (60 s idle timeout).
    let dir = DataDir::new();
    let app = Launch::new()
        .on(&dir)
        .args(&["--max-connections", "8", "--idle-timeout-secs", "60"])
        .spawn()
        .await;
    let mut held = Vec::new();
    for _ in 0..8 {
        held.push(open_served(app.port).await);
    }

    // Act: a few more, one after another; none sends anything, so the server has nothing
    // unread when it closes them (no reset can overtake its answer).
    let mut refusals = Vec::new();
    for _ in 0..PAST_THE_CAP {
        let knocked = Instant::now();
        let mut past = TcpStream::connect(("127.0.0.1", app.port))
            .await
            .expect("connect");
        let (answer, closed) = read_until_closed(&mut past, Duration::from_secs(5)).await;
        refusals.push((knocked.elapsed(), answer, closed));
    }

    // Assert: each got the canned 503 and the close, at once, not a wait.
    for (refused_after, answer, closed) in &refusals {
        assert_canned_refusal(answer, *closed);
        assert!(
            *refused_after < Duration::from_secs(1),
            "refused after {refused_after:?}"
        );
    }
    // The held connections were not the ones closed: each still serves.
    for stream in &mut held {
        let ping = format!(
            "GET /v1/ping HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\r\n",
            app.port
        );
        stream.write_all(ping.as_bytes()).await.expect("write");
        let pong = read_raw_response(stream, Duration::from_secs(5))
            .await
            .unwrap_or_else(|why| panic!("a held connection: {why}"));
        assert_eq!(pong.status, 204, "{}", pong.describe());
    }

    // Once two close, new connections are served again.
    held.truncate(6);
    let (_, resumed) = eventually("a connection after two closed", || async {
        let mut stream = TcpStream::connect(("127.0.0.1", app.port)).await.ok()?;
        let ping = format!(
            "GET /v1/ping HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\r\n",
            app.port
        );
        stream.write_all(ping.as_bytes()).await.ok()?;
        let mut answer = [0u8; 64];
        let n = tokio::time::timeout(Duration::from_secs(2), stream.read(&mut answer))
            .await
            .ok()?
            .ok()?;
        answer[..n].starts_with(b"HTTP/1.1 204").then_some(())
    })
    .await;
    let waits: Vec<u128> = refusals
        .iter()
        .map(|(after, _, _)| after.as_millis())
        .collect();
    println!(
        "connection cap 8: {PAST_THE_CAP} connections past it were refused after {waits:?} ms; \
         service resumed {} ms after two closed",
        resumed.as_millis()
    );
    drop(held);
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    // Arrange
    let dir = DataDir::new();
    let app = Launch::new()
        .on(&dir)
        .args(&["--idle-timeout-secs", "1"])
        .spawn()
        .await;
    let mut stream = open_served(app.port).await;

    // Act
    let idle_from = Instant::now();
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut rest)).await;

    // Assert
    assert!(read.is_ok(), "an idle connection was kept open past 10 s");
    let lived = idle_from.elapsed();
    assert!(
        (Duration::from_millis(800)..Duration::from_secs(4)).contains(&lived),
        "closed after {lived:?} idle with a 1 s timeout"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_past_the_request_deadline_gets_503_and_stores_nothing() {
    // Arrange: a 1 s deadline for a whole request, and a body deadline far above it, so
    // that a slow body meets the request deadline first.
    let dir = DataDir::new();
    let app = Launch::new()
        .on(&dir)
        .args(&["--request-timeout-secs", "1", "--body-timeout-secs", "30"])
        .spawn()
        .await;
    let body = serde_json::to_vec(&customer_body("slow@example.com")).unwrap();
    let bytes = request(&app, "POST", "/v1/customers", &store_a(), &body);
    let (head, body) = bytes.split_at(bytes.len() - body.len());
    let stream = TcpStream::connect(("127.0.0.1", app.port))
        .await
        .expect("connect");
    let (mut reader, mut writer) = stream.into_split();

    // Act: the head at once, then a valid customer's body in ten pieces 300 ms apart, so
    // that it is complete after about 3 s (without the deadline, a 201 then).
    writer.write_all(head).await.expect("write the head");
    let sent = Instant::now();
    let pieces: Vec<Vec<u8>> = body
        .chunks(body.len().div_ceil(10))
        .map(<[u8]>::to_vec)
        .collect();
    let trickle = tokio::spawn(async move {
        for piece in pieces {
            tokio::time::sleep(Duration::from_millis(300)).await;
            if writer.write_all(&piece).await.is_err() {
                break;
            }
        }
        writer
    });
    let answer = read_raw_response(&mut reader, Duration::from_secs(10)).await;
    let answered_after = sent.elapsed();

    // Assert: the documented 503, at the deadline rather than once the body is in.
    let answer = answer.unwrap_or_else(|why| panic!("past the request deadline: {why}"));
    assert_eq!(answer.status, 503, "{}", answer.describe());
    assert_eq!(
        answer.header("retry-after"),
        Some("1"),
        "{}",
        answer.describe()
    );
    assert_eq!(
        answer.header("content-type"),
        Some("application/json; charset=utf-8"),
        "{}",
        answer.describe()
    );
    assert_eq!(
        answer.json(),
        json!({"message": "The request took too long and was cut off. Nothing was changed; \
                           try again shortly.",
               "outcome": "nothing_changed"})
    );
    assert!(
        (Duration::from_millis(900)..Duration::from_millis(2_500)).contains(&answered_after),
        "answered {answered_after:?} after the head, with a 1 s deadline"
    );

    // Nothing was stored, even once the whole body could have arrived.
    let writer = tokio::time::timeout(Duration::from_secs(10), trickle)
        .await
        .expect("the trickle ends")
        .expect("the trickle task");
    drop((writer, reader));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(app.lookup_email("slow@example.com").await.is_empty());
    let (all, total) = app.all_customers_as(&store_a()).await;
    assert!(all.is_empty() && total == Some(0), "stored: {all:?}");
    app.create_customer_ok(&customer_body("slow@example.com"))
        .await;
    println!(
        "request deadline 1 s: a slow body was answered 503 after {} ms",
        answered_after.as_millis()
    );
}

#[tokio::test]
async fn a_413_before_the_body_tells_a_keep_alive_client_the_connection_closes() {
    // Arrange: a keep-alive request announcing 10 MB.
    let app = spawn_app().await;
    let mut stream = TcpStream::connect(("127.0.0.1", app.port))
        .await
        .expect("connect");
    let head = format!(
        "POST /v1/customers HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAPI-Key: {}\r\nAPI-Secret: {}\r\n\
         Content-Length: 10000000\r\n\r\n",
        app.port,
        store_a().key,
        store_a().secret
    );

    // Act
    stream.write_all(head.as_bytes()).await.expect("write");
    stream.write_all(&[b' '; 1024]).await.expect("write");
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;

    // Assert: the answer says so, and the server does close.
    assert!(read.is_ok(), "the connection stayed open after a 413");
    let text = String::from_utf8_lossy(&answer).to_ascii_lowercase();
    assert!(text.starts_with("http/1.1 413"), "{text}");
    assert!(text.contains("connection: close"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_email_change_past_its_deadline_and_a_create_never_both_win() {
    // Arrange: actor calls time out after 1 ms, and a customer's actor is kept busy by a
    // flood of orders, so email changes often outlive their deadline in its queue.
    let dir = DataDir::new();
    let rounds = 12;
    let mut outcomes = Vec::new();
    let mover;
    {
        let app = Launch::new()
            .on(&dir)
            .args(&["--call-timeout-ms", "1"])
            .spawn()
            .await;
        let app = &app;
        mover = id_of(
            &app.create_customer_ok(&customer_body("mover@example.com"))
                .await,
        );
        let flood = json!({"customer_id": mover, "box_id": 217});
        for round in 0..rounds {
            let email = format!("race{round}@example.com");

            // Act: the change and a create of the same email race, under the flood.
            let orders = join_all((0..32).map(|_| app.create_order(&flood)));
            let (path, change_body) = (format!("/v1/customers/{mover}"), json!({"email": email}));
            let change = app.patch_json(&path, &change_body);
            let create = async {
                tokio::time::sleep(Duration::from_millis(round % 4)).await;
                app.create_customer(&customer_body(&email)).await
            };
            let (_, change, create) = tokio::join!(orders, change, create);
            assert!(
                [200, 422, 503].contains(&change.status),
                "change: {} {}",
                change.status,
                change.text()
            );
            assert!(
                [201, 422].contains(&create.status),
                "create: {} {}",
                create.status,
                create.text()
            );
            outcomes.push((email, change.status, create.status));
        }
    }

    // Assert: after a restart, each email has exactly one holder, and whoever holds it got
    // the 2xx.
    let app = Launch::new().on(&dir).spawn().await;
    let (all, _) = app.all_customers_as(&store_a()).await;
    for (email, change, create) in &outcomes {
        let holders: Vec<&Value> = all
            .iter()
            .filter(|c| c["email"].as_str() == Some(email.as_str()))
            .collect();
        assert!(
            holders.len() <= 1,
            "{email}: {} holders (change {change}, create {create})",
            holders.len()
        );
        assert!(
            !(*change == 200 && *create == 201),
            "{email}: both the change and the create were acknowledged"
        );
        if *create == 201 {
            assert_eq!(holders.len(), 1, "{email}: the created customer is gone");
        }
        if *change != 200 {
            assert!(
                holders.iter().all(|holder| id_of(holder) != mover),
                "{email}: a change answered {change} was applied"
            );
        }
        let found = app.lookup_email(email).await;
        assert_eq!(
            found.len(),
            holders.len(),
            "{email}: lookup disagrees with the list"
        );
    }
    let changes: Vec<u16> = outcomes.iter().map(|(_, change, _)| *change).collect();
    println!("email race: change statuses over {rounds} rounds: {changes:?}");
}

/// User plus system CPU time the process has used so far (Linux `/proc/PID/stat`).
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc stat");
    // Fields after the command name (which is in parentheses and may hold spaces).
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("a stat line")
        .1
        .split_whitespace()
        .collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // Linux reports these in USER_HZ, which is 100 on every architecture it supports.
    Duration::from_millis(ticks * 10)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_file_descriptors_the_server_backs_off_and_recovers() {
    // Arrange: a server allowed only 64 open files, with a cap far above that, so that
    // accepting fails with EMFILE once the descriptors are used up.
    let dir = DataDir::new();
    let app = Launch::new()
        .on(&dir)
        .ulimit("-n 64")
        .args(&["--max-connections", "1000"])
        .spawn()
        .await;
    let mut held = Vec::new();
    for _ in 0..120 {
        if let Ok(Ok(stream)) = tokio::time::timeout(
            Duration::from_secs(2),
            TcpStream::connect(("127.0.0.1", app.port)),
        )
        .await
        {
            held.push(stream);
        }
    }

    // Act: let it sit out of descriptors for three seconds.
    let before = cpu_time(app.pid());
    tokio::time::sleep(Duration::from_secs(3)).await;
    let spent = cpu_time(app.pid()) - before;

    // Assert: it did not spin, logged a line a second at most, and serves again once the
    // descriptors are free.
    assert!(
        spent < Duration::from_millis(600),
        "{spent:?} of CPU in 3 s out of descriptors"
    );
    let logged = app
        .stderr_tail()
        .matches("accepting a connection failed")
        .count();
    assert!(
        (1..=5).contains(&logged),
        "{logged} accept-error lines:\n{}",
        app.stderr_tail()
    );
    drop(held);
    let (_, recovered) = eventually("a request once descriptors are free", || async {
        let response = app.client.get(app.url("/v1/ping")).send().await.ok()?;
        (response.status() == 204).then_some(())
    })
    .await;
    println!(
        "out of descriptors: {spent:?} of CPU in 3 s, {logged} log lines; served again after {} ms",
        recovered.as_millis()
    );
}
