//! A move's edges, where a request meets the move at its worst moment, behind a real
//! HAProxy:
//!
//! - a cart's create held on its way to the source (a link in front of it) while the move
//!   switches HAProxy to the target and the source releases the webstore: the source answers
//!   it 503 with `Retry-After: 1` (not 421), and the cart's retry with its key lands once, on
//!   the target;
//! - a client trickling a create's body to the source while a move with `--max-freeze 0.2`
//!   freezes it: the body is read before the write's ticket is taken, so the freeze does not
//!   wait for it, and the cart writing beside it sees its writes refused for a moment only;
//! - a call-off racing a hand-over: one of them wins, whole, and the other is refused;
//! - a move's command killed after starting its copy session and never run again: the
//!   session ends on its own (`--copy-session-idle-secs`);
//! - an operator's redelivery asked while the webstore is frozen: refused (503), since the
//!   move's last round may have carried the endpoint's position already.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::AsyncWriteExt;

use crate::helpers::*;

/// A keyed create of store B through `base`: the status, `Retry-After` and the body.
async fn create_b(base: &str, email: &str, key: &str) -> (u16, Option<String>, Value) {
    let response = reqwest::Client::new()
        .post(format!("{base}/v1/customers"))
        .header("API-Key", STORE_B_KEY)
        .header("API-Secret", STORE_B_SECRET)
        .header("Idempotency-Key", key)
        .json(&customer_body_b(email))
        .timeout(Duration::from_secs(60))
        .send()
        .await
        .expect("HAProxy answers");
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    (
        status,
        retry_after,
        response.json().await.unwrap_or(Value::Null),
    )
}

/// Waits (bounded) until `link` has held `count` requests.
async fn until_held(link: &Link, count: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while link.requests_held() < count {
        assert!(Instant::now() < deadline, "the link held no request");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_write_held_at_the_source_across_the_switch_is_answered_503_and_lands_once_on_the_target()
{
    let test = "move_edges::a_write_held_at_the_source_across_the_switch_is_answered_503_and_lands_once_on_the_target";
    let Some(mut deployment) = Deployment::start(test).await else {
        return;
    };
    // HAProxy reaches shard one through a link, which lets its health checks through.
    let link = Link::to(deployment.one.api().parse().unwrap()).await;
    deployment.reach_one_at(&link.address().to_string(), test);
    let base = deployment.base();
    seed_customers(&base, &store_b(), "seed", 5).await;

    // Arrange: a cart's create routed to the source, held on its way there.
    link.hold_requests(b"POST /v1/customers");
    let held = tokio::spawn({
        let base = base.clone();
        async move { create_b(&base, "held@example.com", "held-1").await }
    });
    until_held(&link, 1).await;

    // Act: the move runs to its end (HAProxy switched, the source released the webstore),
    // then the held create reaches the source.
    let moved = tokio::task::block_in_place(|| deployment.move_webstore(STORE_B, "two"));
    assert!(
        moved.status.is_some_and(|s| s.success()),
        "{}\n{}",
        moved.stdout,
        moved.stderr
    );
    assert_eq!(deployment.one.held(STORE_B).await["recorded"], "released");
    link.release_requests();
    let (status, retry_after, body) = held.await.expect("the held create");

    // Assert: a 503 a cart retries, and its retry with the same key lands once, on the
    // target.
    assert_eq!(status, 503, "{body}");
    assert_eq!(retry_after.as_deref(), Some("1"));
    assert!(body["message"].as_str().is_some(), "{body}");
    let (status, _, created) = create_b(&base, "held@example.com", "held-1").await;
    assert_eq!(status, 201, "the retry lands on the target: {created}");
    let (again, _, replayed) = create_b(&base, "held@example.com", "held-1").await;
    assert_eq!(
        (again, &replayed["id"]),
        (201, &created["id"]),
        "{replayed}"
    );
    let found = deployment
        .two
        .node()
        .app()
        .lookup_email_as("held@example.com", &store_b())
        .await;
    assert_eq!(found.len(), 1, "once on the target: {found:?}");
    let source = deployment.one.held(STORE_B).await;
    assert_eq!(source["customers"], 0, "nothing on the source: {source}");
}

/// The longest time the cart of `log` went without an acknowledged write, from its last
/// one before `from` to its first one after it (what a move's freeze cost it), and how many
/// of its writes were refused (503).
fn writes_stopped(log: &[(Duration, u16, Option<i64>)], from: Duration) -> (Duration, usize) {
    let acked: Vec<Duration> = log
        .iter()
        .filter(|(_, status, _)| *status == 201)
        .map(|(at, _, _)| *at)
        .collect();
    let stopped = acked
        .windows(2)
        .filter(|pair| pair[1] >= from)
        .map(|pair| pair[1] - pair[0])
        .max()
        .unwrap_or_default();
    let refused = log.iter().filter(|(_, status, _)| *status == 503).count();
    (stopped, refused)
}

/// A keyed create of store B sent straight to the node at `api`, its body trickled a byte
/// every `every`: the answer's status (0 if none came) and body.
async fn trickled_create(api: String, email: &str, key: &str, every: Duration) -> (u16, Value) {
    let body = serde_json::to_vec(&customer_body_b(email)).unwrap();
    let head = format!(
        "POST /v1/customers HTTP/1.1\r\nHost: {api}\r\nAPI-Key: {STORE_B_KEY}\r\n\
         API-Secret: {STORE_B_SECRET}\r\nIdempotency-Key: {key}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(&api).await.unwrap();
    stream.set_nodelay(true).unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    for byte in body {
        tokio::time::sleep(every).await;
        if stream.write_all(&[byte]).await.is_err() {
            return (0, Value::Null);
        }
    }
    match read_raw_response(&mut stream, Duration::from_secs(40)).await {
        Ok(response) => (
            response.status,
            serde_json::from_slice(&response.body).unwrap_or(Value::Null),
        ),
        Err(_) => (0, Value::Null),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_body_trickling_through_a_freeze_holds_no_writes_back_past_max_freeze() {
    let test = "move_edges::a_body_trickling_through_a_freeze_holds_no_writes_back_past_max_freeze";
    let Some(deployment) = Deployment::start(test).await else {
        return;
    };
    let base = deployment.base();
    seed_customers(&base, &store_b(), "seed", 5).await;
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let cart = tokio::spawn(cart_since(
        started,
        base.clone(),
        store_b(),
        "c".into(),
        stop.clone(),
    ));

    // Arrange: a client sends a create's head to the source, then its body a byte every
    // 40 ms (about 5 s for the whole body, well within the 20 s a body may take).
    let trickling = tokio::spawn(trickled_create(
        deployment.one.api(),
        "trickled@example.com",
        "trickled-1",
        Duration::from_millis(40),
    ));
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Act: a move whose freeze may last 0.2 s, while the body trickles.
    let move_began = started.elapsed();
    let mut cmd = deployment.move_command(STORE_B, "two");
    cmd.args(["--max-freeze", "0.2"]);
    let moved = tokio::task::block_in_place(|| run_to_exit(cmd, Duration::from_secs(120)));
    let move_ended = started.elapsed();
    eprintln!("move-webstore said:\n{}\n{}", moved.stdout, moved.stderr);
    let (status, answer) = trickling.await.expect("the trickled create");
    let completed = moved.status.is_some_and(|s| s.success());
    if !completed {
        // Called off (a slow machine may take longer than 0.2 s to cut over): as before,
        // and the move completes with the default bound.
        assert!(moved.stderr.contains("called off"), "{}", moved.stderr);
        let again = tokio::task::block_in_place(|| deployment.move_webstore(STORE_B, "two"));
        assert!(
            again.status.is_some_and(|s| s.success()),
            "{}",
            again.stderr
        );
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let log = cart.await.expect("the cart");

    // Assert: the cart's writes stopped for a moment only, the move was not held up by the
    // trickling body, and every write, the trickled one included, is on the target once.
    let (stopped, refused) = writes_stopped(&log, move_began);
    eprintln!(
        "with --max-freeze 0.2 and a body trickling, the cart's writes stopped for at most {} \
         ms ({refused} refused) during a move of {} ms ({}); the trickled create was answered \
         {status}",
        stopped.as_millis(),
        (move_ended - move_began).as_millis(),
        if completed {
            "completed"
        } else {
            "called off, then run again"
        },
    );
    assert!(
        log.iter().all(|(_, s, _)| matches!(s, 201 | 503)),
        "{:?}",
        log.iter()
            .filter(|(_, s, _)| !matches!(s, 201 | 503))
            .collect::<Vec<_>>()
    );
    assert!(
        stopped <= Duration::from_secs(2),
        "the cart's writes stopped for {stopped:?}"
    );
    assert!(matches!(status, 201 | 503), "{status} {answer}");
    assert_each_once(&base, &store_b(), "c", &log).await;
    let (retried, _, created) = create_b(&base, "trickled@example.com", "trickled-1").await;
    assert_eq!(retried, 201, "{created}");
    let found = deployment
        .two
        .node()
        .app()
        .lookup_email_as("trickled@example.com", &store_b())
        .await;
    assert_eq!(found.len(), 1, "{found:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_call_off_racing_a_hand_over_ends_as_one_of_them_whole() {
    let test = "move_edges::a_call_off_racing_a_hand_over_ends_as_one_of_them_whole";
    let Some(deployment) = Deployment::start(test).await else {
        return;
    };
    let base = deployment.base();
    let mut log = Vec::new();
    for n in 0..5 {
        let (status, id) = create(&base, &store_b(), "r", n).await;
        log.push((Duration::ZERO, status, id));
    }
    let mut handed_over = false;
    for round in 0..10 {
        let (status, body) = deployment.one.move_step(STORE_B, "freeze").await;
        assert_eq!(status, 200, "{body}");
        // Act: the operator's call-off and a move's hand-over at once, either first.
        let ((hand_over, handed), (call_off, called)) = if round % 2 == 0 {
            tokio::join!(
                deployment.one.move_step(STORE_B, "hand-over"),
                deployment.one.move_step(STORE_B, "call-off")
            )
        } else {
            let (called, handed) = tokio::join!(
                deployment.one.move_step(STORE_B, "call-off"),
                deployment.one.move_step(STORE_B, "hand-over")
            );
            (handed, called)
        };
        // Assert: exactly one of them happened, whole.
        let held = deployment.one.held(STORE_B).await;
        let (written, id) = create(&base, &store_b(), "r", log.len()).await;
        log.push((Duration::ZERO, written, id));
        match (hand_over, call_off) {
            (200, 409) => {
                assert_eq!(held["recorded"], "handed_over", "{held}");
                assert_eq!(written, 503, "handed over: its writes stay refused");
                handed_over = true;
                break;
            }
            (409, 200) => {
                assert!(held["recorded"].is_null(), "{held}");
                assert_eq!(held["served"], "here", "{held}");
                assert_eq!(written, 201, "called off: its writes are taken again");
            }
            other => panic!(
                "round {round}: hand-over and call-off answered {other:?} ({handed}, \
                 {called}); the source holds {held}"
            ),
        }
    }
    if !handed_over {
        let (status, body) = deployment.one.move_step(STORE_B, "freeze").await;
        assert_eq!(status, 200, "{body}");
        let (status, body) = deployment.one.move_step(STORE_B, "hand-over").await;
        assert_eq!(status, 200, "{body}");
    }
    // The move, run, finishes from the hand-over: every write on the target once.
    let moved = tokio::task::block_in_place(|| deployment.move_webstore(STORE_B, "two"));
    assert!(
        moved.status.is_some_and(|s| s.success()),
        "{}\n{}",
        moved.stdout,
        moved.stderr
    );
    assert_each_once(&base, &store_b(), "r", &log).await;
    assert_eq!(deployment.one.held(STORE_B).await["recorded"], "released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_copy_session_whose_command_died_and_never_ran_again_ends_on_its_own() {
    let test = "move_edges::a_copy_session_whose_command_died_and_never_ran_again_ends_on_its_own";
    let idle = Duration::from_secs(2);
    let Some(deployment) =
        Deployment::start_with_env(test, &[("BOXSUB_COPY_SESSION_IDLE_SECS", "2")]).await
    else {
        return;
    };
    let base = deployment.base();
    seed_customers(&base, &store_b(), "seed", 3).await;

    // Arrange: the command killed with SIGKILL once it says its copy session began, never
    // run again.
    let mut cmd = deployment.move_command(STORE_B, "two");
    cmd.stdout(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("the move starts");
    let stdout = child.stdout.take().expect("piped");
    let said = tokio::task::block_in_place(|| {
        use std::io::BufRead;
        std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .find(|line| line.starts_with("tracking "))
    });
    let _ = child.kill();
    let _ = child.wait();
    let killed = Instant::now();
    assert!(said.is_some(), "the command never said it began tracking");
    let held = deployment.one.held(STORE_B).await;
    let session = held["copy_session"].as_u64().expect("a copy session");

    // Act: writes go on, tracked while the session lasts.
    let mut n = 0;
    let ended = loop {
        assert_eq!(create(&base, &store_b(), "w", n).await.0, 201);
        n += 1;
        let held = deployment.one.held(STORE_B).await;
        if held["copy_session"].is_null() {
            break killed.elapsed();
        }
        assert_eq!(held["copy_session"].as_u64(), Some(session), "{held}");
        assert!(
            killed.elapsed() < idle + Duration::from_secs(10),
            "copy session {session} still tracks {STORE_B}'s writes {:?} after its command \
             was killed: {held}",
            killed.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    // Assert: it ended once unused for its idle time; its round is refused; the webstore
    // takes writes as ever, and a move run later completes with all of them.
    eprintln!(
        "the copy session ended {} ms after its command was killed (idle {} ms)",
        ended.as_millis(),
        idle.as_millis()
    );
    let (status, body) = admin(
        &deployment.one,
        reqwest::Method::GET,
        &format!("/admin/webstores/{STORE_B}/changes/{session}"),
        vec![],
    )
    .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(create(&base, &store_b(), "w", n).await.0, 201);
    let moved = tokio::task::block_in_place(|| deployment.move_webstore(STORE_B, "two"));
    assert!(
        moved.status.is_some_and(|s| s.success()),
        "{}",
        moved.stderr
    );
    let (customers, _) = deployment
        .two
        .node()
        .app()
        .all_customers_as(&store_b())
        .await;
    assert_eq!(customers.len(), 3 + n + 1);
}

#[tokio::test]
async fn a_redelivery_asked_while_the_webstore_is_frozen_is_refused_and_taken_after() {
    // Arrange: store A with an endpoint, frozen for a move.
    let receiver = Receiver::start().await;
    let mut catalogue = default_catalogue();
    catalogue["webstores"][0]["webhooks"] = serde_json::json!([{
        "id": "erp", "url": receiver.url(), "events": ["customer.created"],
        "secrets": ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"], "allow_private_network": true,
    }]);
    let dir = DataDir::with_catalogue(catalogue);
    let token = dir.sibling("admin-token");
    std::fs::write(&token, TOKEN).unwrap();
    let token = token.display().to_string();
    let app = Launch::new()
        .on(&dir)
        .args(&["--admin-addr", "127.0.0.1:0", "--admin-token-file", &token])
        .spawn()
        .await;
    app.create_customer_ok(&customer_body("r@example.com"))
        .await;
    let admin_addr = admin_of(&app);
    let step = |method: reqwest::Method, path: &str| {
        let path = format!("/admin/webstores/{STORE_A}{path}");
        let admin_addr = admin_addr.clone();
        async move { admin_at(&admin_addr, method, &path, vec![]).await }
    };
    let (status, body) = step(reqwest::Method::POST, "/freeze").await;
    assert_eq!(status, 200, "{body}");

    // Act: the operator asks the endpoint to deliver everything again.
    let (refused, refusal) = step(reqwest::Method::POST, "/webhooks/erp/redeliver").await;
    let (status, webhooks) = step(reqwest::Method::GET, "/webhooks").await;
    assert_eq!(status, 200, "{webhooks}");

    // Assert: refused while frozen, nothing asked; taken once the freeze is called off.
    assert_eq!(refused, 503, "{refusal}");
    assert!(
        webhooks["endpoints"][0]["redelivery_after"].is_null(),
        "{webhooks}"
    );
    let (status, body) = step(reqwest::Method::POST, "/call-off").await;
    assert_eq!(status, 200, "{body}");
    let (accepted, body) = step(reqwest::Method::POST, "/webhooks/erp/redeliver").await;
    assert_eq!(accepted, 202, "{body}");
}
