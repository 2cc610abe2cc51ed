//! The fixtures of the replication tests, proven on their own before any test leans on
//! them: a real three-node NATS JetStream cluster ([`NatsCluster`]) keeps acknowledging
//! writes to a three-replica stream with one node killed, and takes the node back; a real
//! HAProxy ([`Haproxy`]) sends requests only to the backend that passes its health check.
//! Plus one fact of JetStream that the changelog's retries rely on: what a publish that
//! repeats both the message id and the expected last sequence of one already stored gets.
//!
//! Where `nats-server` or `haproxy` is missing these tests go through [`skip_or_fail`]
//! (inside the fixtures' `start`): a `SKIPPED: <test>: <reason>` line on stderr, or a
//! failure where `BOXSUB_REQUIRE_ALL_TESTS=1` (as in CI).
//!
//! [`skip_or_fail`]: crate::helpers::skip_or_fail

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::{self, stream, ErrorCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::helpers::{Haproxy, NatsCluster};

/// A three-replica file stream `name` taking subject `subject`, created through `context`.
async fn r3_stream(context: &jetstream::Context, name: &str, subject: &str) -> stream::Stream {
    let config = stream::Config {
        name: name.to_string(),
        subjects: vec![subject.to_string()],
        storage: stream::StorageType::File,
        num_replicas: 3,
        ..Default::default()
    };
    context
        .get_or_create_stream(config)
        .await
        .unwrap_or_else(|error| panic!("create the three-replica stream {name}: {error}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_nats_cluster_acknowledges_r3_writes_with_a_node_killed_and_takes_it_back() {
    // Arrange
    let test =
        "group_harness::a_nats_cluster_acknowledges_r3_writes_with_a_node_killed_and_takes_it_back";
    let started = Instant::now();
    let Some(mut cluster) = NatsCluster::start(test).await else {
        return;
    };
    eprintln!("the NATS cluster was ready in {:?}", started.elapsed());
    // What `boxsub serve --changelog` will be given: every node's URL.
    let urls = cluster.urls();
    assert_eq!(urls.split(',').collect::<Vec<_>>(), cluster.url_list());
    // A client on n1 (the node to be killed) knowing all three URLs, so that it must
    // reconnect to another.
    let client = async_nats::ConnectOptions::new()
        .retain_servers_order()
        .connect(cluster.url_list())
        .await
        .unwrap_or_else(|error| panic!("connect to the NATS cluster: {error}"));
    assert_eq!(client.server_info().server_name, "n1");
    let context = jetstream::new(client.clone());
    r3_stream(&context, "HARNESS_KILL", "harness.kill").await;

    // Act: the first write, on an empty stream
    let first = context
        .send_publish(
            "harness.kill",
            PublishMessage::build()
                .payload("first".into())
                .message_id("first")
                .expected_last_sequence(0),
        )
        .await
        .expect("the first publish is sent")
        .await
        .unwrap_or_else(|error| panic!("the first publish is acknowledged: {error}"));

    // Assert
    assert_eq!(first.sequence, 1, "the first write of an empty stream");
    assert!(!first.duplicate);

    // Act: one node crashes, and a second write follows
    cluster.kill(0);
    assert!(!cluster.is_running(0), "n1 was killed");
    // n1 holds its replica of the stream on disk, for its restart.
    let replica = cluster
        .store_dir(0)
        .join("jetstream/$G/streams/HARNESS_KILL");
    assert!(replica.is_dir(), "n1's replica is at {}", replica.display());
    // The client was on n1, and n1 may have led the stream: until the client has
    // reconnected and the two others have elected a leader, a publish times out or fails
    // at once with "no stream found for given subject" (while the stream has no leader no
    // server answers for it: 5 to 7 s on nats-server 2.9.10 here). It is retried, bounded;
    // its message id makes a retry of a write that was stored but whose acknowledgement
    // was lost an acknowledged duplicate (see the third test).
    let crashed = Instant::now();
    let deadline = crashed + Duration::from_secs(30);
    let second = loop {
        let attempt = async {
            context
                .send_publish(
                    "harness.kill",
                    PublishMessage::build()
                        .payload("second".into())
                        .message_id("second")
                        .expected_last_sequence(1),
                )
                .await?
                .await
        };
        match attempt.await {
            Ok(ack) => break ack,
            Err(error) if Instant::now() < deadline => {
                eprintln!("publish with n1 down: {error}; retrying");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(error) => panic!(
                "no write was acknowledged within 30 s of n1's crash: {error}\n{}",
                cluster.all_logs()
            ),
        }
    };

    eprintln!("acknowledged {:?} after n1's crash", crashed.elapsed());

    // Assert
    assert_eq!(second.sequence, 2, "the second write, with n1 down");
    assert_ne!(client.server_info().server_name, "n1", "the client moved");

    // Act: n1 comes back on its store
    cluster.restart(0).await;

    // Assert: once the stream has a leader again and n1's replica has caught up, the stream
    // holds both writes, and n1 serves clients again
    assert!(cluster.is_running(0), "n1 was restarted");
    let settled = cluster.settled_stream("HARNESS_KILL").await;
    assert_eq!(
        (settled.state.messages, settled.state.last_sequence),
        (2, 2),
        "both writes are in the stream"
    );
    assert_eq!(settled.config.num_replicas, 3);
    let through_n1 = cluster.stream_through(0, "HARNESS_KILL").await;
    assert_eq!(through_n1.state.messages, 2);
}

/// What the changelog's retry of a lost acknowledgement gets. JetStream checks a publish's
/// `Nats-Msg-Id` against its duplicate window (two minutes by default) BEFORE its
/// `Nats-Expected-Last-Sequence`: a repeat of a stored message id is acknowledged as a
/// duplicate with the sequence the first copy got, whatever the expected last sequence says
/// (the same stale one, or one the stream has moved past since); only a NEW message id with
/// a stale expected last sequence is refused, "wrong last sequence" (code 10071). So a writer
/// may repeat a publish (same id, same expectation) until it is acknowledged, and a
/// `duplicate` acknowledgement means "stored, by an earlier attempt of yours". Shown on
/// nats-server 2.9.10, three replicas.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_repeated_message_id_is_acknowledged_as_a_duplicate_before_the_expected_sequence_is_checked(
) {
    // Arrange
    let test = "group_harness::a_repeated_message_id_is_acknowledged_as_a_duplicate_before_the_\
                expected_sequence_is_checked";
    let Some(cluster) = NatsCluster::start(test).await else {
        return;
    };
    let context = jetstream::new(cluster.connect().await);
    r3_stream(&context, "HARNESS_DEDUPE", "harness.dedupe").await;
    let publish = |id: &str, last: u64| {
        let message = PublishMessage::build()
            .payload(format!("message {id}").into())
            .message_id(id)
            .expected_last_sequence(last);
        let context = context.clone();
        async move {
            context
                .send_publish("harness.dedupe", message)
                .await
                .expect("the publish is sent")
                .await
        }
    };
    let a = publish("a", 0)
        .await
        .expect("a, the first write, is stored");
    assert_eq!((a.sequence, a.duplicate), (1, false));
    let b = publish("b", 1)
        .await
        .expect("b, the second write, is stored");
    assert_eq!((b.sequence, b.duplicate), (2, false));

    // Act: each id again with the expected last sequence it was stored with, as a writer
    // does that retries a write whose acknowledgement it lost; for a, the stream has moved
    // on since (its last sequence is 2, not 0)
    let b_again = publish("b", 1).await;
    let a_again = publish("a", 0).await;
    // A new id expecting the stream's old end
    let c_stale = publish("c", 1).await;

    // Assert
    let b_again = b_again.expect("a repeat of b, the last write, is acknowledged");
    assert_eq!(
        (b_again.sequence, b_again.duplicate),
        (2, true),
        "a repeat of the last write is a duplicate, acknowledged with its first sequence"
    );
    let a_again = a_again.expect("a repeat of a, stored before b, is acknowledged");
    assert_eq!(
        (a_again.sequence, a_again.duplicate),
        (1, true),
        "a repeat of an older write is a duplicate too, though its expected sequence is stale"
    );
    let refusal = c_stale.expect_err("a new write expecting a stale last sequence is refused");
    assert_eq!(
        refusal.kind(),
        PublishErrorKind::WrongLastSequence,
        "{refusal:?}"
    );
    let code = std::error::Error::source(&refusal)
        .and_then(|source| source.downcast_ref::<jetstream::Error>())
        .map(jetstream::Error::error_code);
    assert_eq!(
        code,
        Some(ErrorCode::STREAM_WRONG_LAST_SEQUENCE),
        "the server's code is 10071: {refusal:?}"
    );
    let info = context
        .get_stream("HARNESS_DEDUPE")
        .await
        .expect("the stream")
        .info()
        .await
        .expect("the stream's information")
        .state
        .clone();
    assert_eq!(
        (info.messages, info.last_sequence),
        (2, 2),
        "no repeat and no refused write was stored"
    );
}

/// A one-line HTTP server on 127.0.0.1 answering every request with `status` and the body
/// `name`, then closing the connection; it runs as a task of the test's runtime.
async fn fixed_http_server(name: &'static str, status: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a backend on 127.0.0.1:0");
    let address = listener
        .local_addr()
        .expect("a bound backend has an address");
    tokio::spawn(async move {
        while let Ok((mut connection, _)) = listener.accept().await {
            tokio::spawn(async move {
                // The request's head, enough to answer it; its content is not looked at.
                let mut head = Vec::new();
                let mut buffer = [0_u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match connection.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(read) => head.extend_from_slice(&buffer[..read]),
                    }
                }
                let answer = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n{name}",
                    name.len()
                );
                let _ = connection.write_all(answer.as_bytes()).await;
                let _ = connection.shutdown().await;
            });
        }
    });
    address
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn haproxy_sends_requests_only_to_the_backend_that_passes_its_health_check() {
    // Arrange
    let test =
        "group_harness::haproxy_sends_requests_only_to_the_backend_that_passes_its_health_check";
    let healthy = fixed_http_server("healthy", "200 OK").await;
    let sick = fixed_http_server("sick", "503 Service Unavailable").await;
    let Some(haproxy) = Haproxy::start(test, &[healthy, sick]) else {
        return;
    };
    assert_eq!(haproxy.base_url(), format!("http://{}", haproxy.addr()));
    // The admin socket changes server states: only the test's user may use it.
    let socket_mode = std::fs::metadata(haproxy.socket_path())
        .expect("HAProxy's admin socket exists")
        .permissions()
        .mode();
    assert_eq!(socket_mode & 0o777, 0o600, "the admin socket's mode");
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("build the HTTP client");

    // Act: HAProxy deems both servers up at start, until the sick one fails two checks
    // (200 ms apart): wait, bounded, for twenty answers in a row from the healthy one.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut in_a_row = 0;
    let mut seen = Vec::new();
    while in_a_row < 20 {
        assert!(
            Instant::now() < deadline,
            "HAProxy still sent requests to the sick backend after 10 s; answers: {seen:?}\n\
             HAProxy's log:\n{}",
            haproxy.logs()
        );
        let response = client
            .get(format!("{}/v1/anything", haproxy.base_url()))
            .send()
            .await
            .unwrap_or_else(|error| {
                panic!("a request through HAProxy: {error}\n{}", haproxy.logs())
            });
        let status = response.status().as_u16();
        let body = response.text().await.expect("read the body");
        if (status, body.as_str()) == (200, "healthy") {
            in_a_row += 1;
        } else {
            in_a_row = 0;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        seen.push((status, body));
    }

    // Assert: HAProxy says so too, on its admin socket
    assert_eq!(haproxy.server_status(0), "UP", "{}", haproxy.logs());
    assert_eq!(haproxy.server_status(1), "DOWN", "{}", haproxy.logs());
}
