//! Webhooks as a receiver sees them: real HTTP receivers on loopback (one whose deliveries
//! are verified by Python's own `hmac`, one down for a while, one answering 500 then 204,
//! one that hangs, one that answers 410, one throttling with `Retry-After`), a secret
//! rotation through catalogue reloads, a restart with deliveries pending, destinations on
//! private networks, an endpoint given up on, and the operator's redelivery.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::{
    boxsub_command, customer_body, default_catalogue, run_to_exit, sample, scrape, Answer, DataDir,
    Delivery, Launch, Receiver, TestApp,
};

/// The Standard Webhooks specification's example secret.
const OLD_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// Another secret: base64 of 32 bytes.
const NEW_SECRET: &str = "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
/// Failed deliveries are retried after about this long here (five seconds by default).
const FAST_RETRY: [&str; 2] = ["--webhook-first-retry-secs", "0.2"];
const WAIT: Duration = Duration::from_secs(20);
const ADMIN_TOKEN: &str = "webhooks-admin-token";

/// A store-A endpoint on loopback (allowed) wanting every type.
fn endpoint(id: &str, url: &str, secrets: &[&str]) -> Value {
    json!({
        "id": id, "url": url,
        "events": ["customer.created", "customer.updated", "order.created"],
        "secrets": secrets, "allow_private_network": true,
    })
}

fn catalogue_with(endpoints: Vec<Value>) -> Value {
    let mut catalogue = default_catalogue();
    catalogue["webstores"][0]["webhooks"] = json!(endpoints);
    catalogue
}

/// A server on `dir` with fast retries, an admin listener, and `extra` flags.
async fn start(dir: &DataDir, extra: &[&str]) -> TestApp {
    let token = dir.sibling("admin-token");
    std::fs::write(&token, ADMIN_TOKEN).unwrap();
    let token = token.display().to_string();
    let mut args = vec!["--admin-addr", "127.0.0.1:0", "--admin-token-file", &token];
    args.extend(FAST_RETRY);
    args.extend(extra);
    Launch::new().on(dir).args(&args).spawn().await
}

/// A server (see [`start`]) whose store A has one endpoint, `erp`, at `receiver`, signing
/// with `secrets`, once its deliveries have started; and its data directory.
async fn with_erp(receiver: &Receiver, secrets: &[&str], extra: &[&str]) -> (DataDir, TestApp) {
    let dir = DataDir::with_catalogue(catalogue_with(vec![endpoint(
        "erp",
        &receiver.url(),
        secrets,
    )]));
    let app = start(&dir, extra).await;
    wait_for_endpoint(&app, "erp").await;
    (dir, app)
}

/// Waits until endpoint `id`'s deliveries have started (a new endpoint is sent what happens
/// from then on).
pub(crate) async fn wait_for_endpoint(app: &TestApp, id: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        let metrics = app.get_without_auth("/metrics").await.text();
        if metrics.contains(&format!(
            "boxsub_webhook_endpoint_disabled{{endpoint=\"{id}\""
        )) {
            return;
        }
        assert!(Instant::now() < deadline, "endpoint {id} never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn metric(app: &TestApp, name: &str, labels: &[(&str, &str)]) -> f64 {
    sample(&scrape(app).await, name, labels)
}

/// Waits until `name` with `labels` reaches `at_least`.
async fn wait_for_metric(app: &TestApp, name: &str, labels: &[(&str, &str)], at_least: f64) {
    let deadline = Instant::now() + WAIT;
    loop {
        if metric(app, name, labels).await >= at_least {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name}{labels:?} never reached {at_least}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every event of store A in the feed, oldest first.
async fn feed(app: &TestApp) -> Vec<Value> {
    let page = app.get("/v1/events?limit=1000").await;
    page.assert_status(200);
    page.json()["events"].as_array().unwrap().clone()
}

/// A customer, a change to it and an order: three events.
async fn three_events(app: &TestApp, email: &str) -> i64 {
    let customer = app.create_customer_ok(&customer_body(email)).await;
    let id = customer["id"].as_i64().unwrap();
    app.patch_json(&format!("/v1/customers/{id}"), &json!({"first_name": "Jo"}))
        .await
        .assert_status(200);
    app.create_order_ok(&json!({"customer_id": id, "box_id": 218}))
        .await;
    id
}

/// The deliveries' distinct ids in the order they first came, with their sequences.
fn first_arrivals(deliveries: &[Delivery]) -> Vec<(String, u64)> {
    let mut seen = BTreeSet::new();
    deliveries
        .iter()
        .filter(|d| seen.insert(d.id.clone()))
        .map(|d| (d.id.clone(), d.sequence()))
        .collect()
}

/// What `tests/fixtures/verify_webhooks.py` says of `deliveries` under `secrets`.
fn verify_in_python(deliveries: &[Delivery], secrets: &[&str]) -> Value {
    let input: Vec<Value> = deliveries
        .iter()
        .map(|d| {
            json!({
                "id": d.id, "timestamp": d.timestamp, "signature": d.signature,
                "body": String::from_utf8(d.body.clone()).unwrap(),
            })
        })
        .collect();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/verify_webhooks.py"
    );
    let mut child = std::process::Command::new("python3")
        .arg(script)
        .args(secrets)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(&serde_json::to_vec(&input).unwrap())
            .unwrap();
    }
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "the verifier failed");
    serde_json::from_slice(&output.stdout).unwrap()
}

fn admin_addr(app: &TestApp) -> String {
    app.startup_output
        .iter()
        .find_map(|line| line.strip_prefix("admin listening on http://"))
        .expect("the admin listener's address")
        .to_owned()
}

async fn admin_status(app: &TestApp) -> Value {
    let response = reqwest::Client::new()
        .get(format!(
            "http://{}/admin/webstores/store-a/webhooks",
            admin_addr(app)
        ))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

#[tokio::test]
async fn deliveries_are_signed_per_standard_webhooks_and_verify_in_python() {
    // Arrange
    let receiver = Receiver::start().await;
    let (_dir, app) = with_erp(&receiver, &[OLD_SECRET, NEW_SECRET], &[]).await;

    // Act
    let customer_id = three_events(&app, "signed@example.com").await;
    let delivered = receiver.wait_for_delivered(3, WAIT).await;

    // Assert
    let events = feed(&app).await;
    assert_eq!(delivered.len(), 3, "each event once: {delivered:?}");
    let now = jiff::Timestamp::now().as_second();
    for (delivery, event) in delivered.iter().zip(&events) {
        assert_eq!(&delivery.json, event, "a delivery is the feed's event");
        assert_eq!(delivery.id, event["id"].as_str().unwrap());
        assert_eq!(delivery.content_type, "application/json");
        let timestamp: i64 = delivery.timestamp.parse().unwrap();
        assert!(
            (now - timestamp).abs() < 60,
            "timestamp {timestamp}, now {now}"
        );
        assert_eq!(delivery.signature.split(' ').count(), 2, "one per secret");
    }
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        ["customer.created", "customer.updated", "order.created"]
    );
    let order = &events[2]["data"];
    let read = app.get(&format!("/v1/orders/{}", order["id"])).await.json();
    assert_eq!(
        order, &read,
        "an order event's data is the order as GET shows it"
    );
    let customer = app
        .get(&format!("/v1/customers/{customer_id}?embed=address"))
        .await
        .json();
    assert_eq!(events[1]["data"], customer);
    for secrets in [
        vec![OLD_SECRET],
        vec![NEW_SECRET],
        vec![OLD_SECRET, NEW_SECRET],
    ] {
        let verdict = verify_in_python(&delivered, &secrets);
        assert_eq!(verdict["verified"], 3, "{secrets:?}: {verdict}");
    }
    let stranger = "whsec_c3RyYW5nZXJzdHJhbmdlcnN0cmFuZ2Vyc3RyYW5nZXI=";
    assert_eq!(verify_in_python(&delivered, &[stranger])["verified"], 0);
    let mut tampered = delivered[0].clone();
    tampered.body = with_sequence_changed(tampered.body);
    assert_eq!(verify_in_python(&[tampered], &[OLD_SECRET])["verified"], 0);
}

/// A delivery's body with one digit of its sequence number changed.
fn with_sequence_changed(mut body: Vec<u8>) -> Vec<u8> {
    let at = body
        .windows(11)
        .position(|w| w == b"\"sequence\":")
        .expect("a sequence")
        + 11;
    body[at] = if body[at] == b'9' { b'1' } else { body[at] + 1 };
    body
}

#[tokio::test]
async fn a_receiver_down_for_a_while_gets_everything_in_order_once_back() {
    // Arrange
    let mut receiver = Receiver::start().await;
    let (_dir, app) = with_erp(&receiver, &[OLD_SECRET], &[]).await;
    receiver.down().await;

    // Act
    let customer = app
        .create_customer_ok(&customer_body("down@example.com"))
        .await;
    for _ in 0..10 {
        app.create_order_ok(&json!({"customer_id": customer["id"], "box_id": 218}))
            .await;
    }
    let labels = [("endpoint", "erp"), ("outcome", "unreachable")];
    wait_for_metric(&app, "boxsub_webhook_sends_total", &labels, 2.0).await;
    assert!(
        metric(
            &app,
            "boxsub_webhook_oldest_unsent_seconds",
            &[("endpoint", "erp")]
        )
        .await
            >= 0.0
    );
    receiver.up().await;
    let delivered = receiver
        .wait_for_delivered(11, Duration::from_secs(30))
        .await;

    // Assert
    let events = feed(&app).await;
    let arrivals = first_arrivals(&delivered);
    let expected: Vec<(String, u64)> = events
        .iter()
        .map(|e| {
            (
                e["id"].as_str().unwrap().to_owned(),
                e["sequence"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(arrivals, expected, "every event, in sequence order");
}

#[tokio::test]
async fn a_500_is_retried_until_a_2xx() {
    // Arrange
    let receiver = Receiver::start().await;
    receiver.answer_next(&[Answer::Status(500), Answer::Status(502)]);
    let (_dir, app) = with_erp(&receiver, &[OLD_SECRET], &[]).await;

    // Act
    app.create_customer_ok(&customer_body("retried@example.com"))
        .await;
    receiver.wait_for_delivered(1, WAIT).await;

    // Assert
    let requests = receiver.requests();
    let statuses: Vec<u16> = requests.iter().map(|d| d.status).collect();
    assert_eq!(statuses, [500, 502, 204]);
    assert!(
        requests.iter().all(|d| d.id == requests[0].id),
        "one event, retried"
    );
    let failed = [("endpoint", "erp"), ("outcome", "failed")];
    assert_eq!(
        metric(&app, "boxsub_webhook_sends_total", &failed).await,
        2.0
    );
    let delivered = [("endpoint", "erp"), ("outcome", "accepted")];
    wait_for_metric(&app, "boxsub_webhook_sends_total", &delivered, 1.0).await;
}

#[tokio::test]
async fn an_endpoint_that_hangs_is_cut_off_and_delays_no_other_endpoint_nor_the_api() {
    // Arrange
    let slow = Receiver::start().await;
    slow.answer_next(&[Answer::Hang]);
    let fast = Receiver::start().await;
    let dir = DataDir::with_catalogue(catalogue_with(vec![
        endpoint("slow", &slow.url(), &[OLD_SECRET]),
        endpoint("fast", &fast.url(), &[OLD_SECRET]),
    ]));
    let app = start(&dir, &[]).await;
    wait_for_endpoint(&app, "slow").await;
    wait_for_endpoint(&app, "fast").await;

    // Act
    let customer = app
        .create_customer_ok(&customer_body("hang@example.com"))
        .await;
    slow.wait_for_requests(1, WAIT).await;
    for _ in 0..5 {
        app.create_order_ok(&json!({"customer_id": customer["id"], "box_id": 218}))
            .await;
    }
    let fast_got = fast.wait_for_delivered(6, WAIT).await;
    let slow_got = slow.wait_for_delivered(6, Duration::from_secs(40)).await;

    // Assert
    assert!(
        fast_got[5].at < slow.requests()[0].at + Duration::from_secs(9),
        "the fast endpoint waited for the slow one"
    );
    let requests = slow.requests();
    let cut_off_after = requests[1].at - requests[0].at;
    assert!(
        cut_off_after >= Duration::from_secs(9) && cut_off_after < Duration::from_secs(20),
        "the hanging attempt was given up after {cut_off_after:?}"
    );
    assert_eq!(requests[1].id, requests[0].id, "the same event again");
    assert_eq!(first_arrivals(&slow_got), first_arrivals(&fast_got));
    let timeouts = [("endpoint", "slow"), ("outcome", "timeout")];
    assert_eq!(
        metric(&app, "boxsub_webhook_sends_total", &timeouts).await,
        1.0
    );
}

#[tokio::test]
async fn retry_after_of_a_429_or_503_is_honoured() {
    // Arrange
    let receiver = Receiver::start().await;
    receiver.answer_next(&[Answer::RetryAfter(429, 2), Answer::RetryAfter(503, 1)]);
    let (_dir, app) = with_erp(&receiver, &[OLD_SECRET], &[]).await;

    // Act
    app.create_customer_ok(&customer_body("asked-to-wait@example.com"))
        .await;
    receiver.wait_for_delivered(1, WAIT).await;

    // Assert: without Retry-After the retries would come about 0.2 s and 0.8 s apart.
    let requests = receiver.requests();
    assert_eq!(requests.len(), 3);
    assert!(requests[1].at - requests[0].at >= Duration::from_millis(1_900));
    assert!(requests[2].at - requests[1].at >= Duration::from_millis(900));
    let asked_to_wait = [("endpoint", "erp"), ("outcome", "asked_to_wait")];
    assert_eq!(
        metric(&app, "boxsub_webhook_sends_total", &asked_to_wait).await,
        2.0
    );
}

#[tokio::test]
async fn a_410_disables_the_endpoint_until_the_operator_redelivers() {
    // Arrange
    let receiver = Receiver::start().await;
    receiver.answer(Answer::Status(410));
    let (dir, app) = with_erp(&receiver, &[OLD_SECRET], &[]).await;
    let before = app.get("/v1/events").await.json()["next"]
        .as_str()
        .unwrap()
        .to_owned();

    // Act
    three_events(&app, "gone@example.com").await;
    receiver.wait_for_requests(1, WAIT).await;
    let disabled = [("endpoint", "erp")];
    wait_for_metric(&app, "boxsub_webhook_endpoint_disabled", &disabled, 1.0).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    let while_disabled = receiver.requests().len();
    let status = admin_status(&app).await;
    receiver.answer(Answer::Status(204));
    let token = dir.sibling("admin-token");
    let redeliver = run_to_exit(
        {
            let mut command = boxsub_command();
            command.args([
                "redeliver-webhook",
                "--webstore",
                "store-a",
                "--endpoint",
                "erp",
                "--after",
                &before,
                "--admin",
                &admin_addr(&app),
                "--admin-token-file",
            ]);
            command.arg(&token);
            command
        },
        Duration::from_secs(30),
    );
    let delivered = receiver.wait_for_delivered(3, WAIT).await;

    // Assert
    assert_eq!(
        while_disabled, 1,
        "nothing more was sent to a disabled endpoint"
    );
    let endpoint_status = &status["endpoints"][0];
    assert_eq!(endpoint_status["endpoint"], "erp");
    assert!(endpoint_status["disabled"]
        .as_str()
        .unwrap()
        .contains("410"));
    assert_eq!(status["last_event"], 3);
    assert!(
        redeliver.status.is_some_and(|s| s.success()),
        "{}",
        redeliver.stderr
    );
    assert!(
        redeliver.stdout.contains("redelivering"),
        "{}",
        redeliver.stdout
    );
    let sequences: Vec<u64> = delivered.iter().map(Delivery::sequence).collect();
    assert_eq!(sequences, [1, 2, 3]);
    wait_for_metric(
        &app,
        "boxsub_webhook_sends_total",
        &[("outcome", "accepted")],
        3.0,
    )
    .await;
    assert_eq!(
        metric(&app, "boxsub_webhook_endpoint_disabled", &disabled).await,
        0.0
    );
}

#[tokio::test]
async fn a_secret_rotation_signs_with_both_secrets_then_the_new_one_alone() {
    // Arrange
    let receiver = Receiver::start().await;
    let catalogue =
        |secrets: &[&str]| catalogue_with(vec![endpoint("erp", &receiver.url(), secrets)]);
    let dir = DataDir::with_catalogue(catalogue(&[OLD_SECRET]));
    let mut app = start(&dir, &[]).await;
    wait_for_endpoint(&app, "erp").await;
    let reload = |app: &mut TestApp, secrets: &[&str]| {
        std::fs::write(
            &dir.catalogue,
            serde_json::to_vec(&catalogue(secrets)).unwrap(),
        )
        .unwrap();
        app.signal("HUP");
        let reloaded = app.wait_for_stderr_line(Duration::from_secs(10), |line| {
            line.contains("catalogue reloaded")
        });
        assert!(reloaded.is_some(), "{}", app.stderr_tail());
    };

    // Act
    app.create_customer_ok(&customer_body("r1@example.com"))
        .await;
    receiver.wait_for_delivered(1, WAIT).await;
    reload(&mut app, &[OLD_SECRET, NEW_SECRET]);
    app.create_customer_ok(&customer_body("r2@example.com"))
        .await;
    receiver.wait_for_delivered(2, WAIT).await;
    reload(&mut app, &[NEW_SECRET]);
    app.create_customer_ok(&customer_body("r3@example.com"))
        .await;
    let delivered = receiver.wait_for_delivered(3, WAIT).await;

    // Assert
    let old = verify_in_python(&delivered, &[OLD_SECRET]);
    let new = verify_in_python(&delivered, &[NEW_SECRET]);
    assert_eq!(old["signatures_per_delivery"], json!([1, 2, 1]));
    assert_eq!(old["failed"], json!([delivered[2].id]));
    assert_eq!(new["failed"], json!([delivered[0].id]));
}

#[tokio::test]
async fn deliveries_pending_at_a_restart_go_on_after_it() {
    // Arrange
    let receiver = Receiver::start().await;
    receiver.answer(Answer::Status(500));
    let (dir, mut app) = with_erp(&receiver, &[OLD_SECRET], &[]).await;
    three_events(&app, "restart@example.com").await;
    receiver.wait_for_requests(2, WAIT).await;
    let ids: Vec<String> = feed(&app)
        .await
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect();

    // Act
    app.terminate_ok(Duration::from_secs(10));
    receiver.answer(Answer::Status(204));
    let app = start(&dir, &[]).await;
    let delivered = receiver.wait_for_delivered(3, WAIT).await;

    // Assert
    let arrivals: Vec<String> = first_arrivals(&delivered)
        .into_iter()
        .map(|a| a.0)
        .collect();
    assert_eq!(arrivals, ids, "the events of before the restart, in order");
    app.create_customer_ok(&customer_body("after@example.com"))
        .await;
    let delivered = receiver.wait_for_delivered(4, WAIT).await;
    assert_eq!(delivered.last().unwrap().sequence(), 4, "numbering goes on");
}

#[tokio::test]
async fn destinations_on_private_networks_are_refused_unless_allowed() {
    // Arrange
    let receiver = Receiver::start().await;
    let mut literal = endpoint("literal", &receiver.url(), &[OLD_SECRET]);
    literal["allow_private_network"] = json!(false);
    let mut named = endpoint(
        "named",
        &receiver.url().replace("127.0.0.1", "localhost"),
        &[OLD_SECRET],
    );
    named["allow_private_network"] = json!(false);
    let dir = DataDir::with_catalogue(catalogue_with(vec![literal, named]));
    let app = start(&dir, &[]).await;
    wait_for_endpoint(&app, "literal").await;
    wait_for_endpoint(&app, "named").await;

    // Act
    app.create_customer_ok(&customer_body("ssrf@example.com"))
        .await;
    for id in ["literal", "named"] {
        let refused = [("endpoint", id), ("outcome", "refused")];
        wait_for_metric(&app, "boxsub_webhook_sends_total", &refused, 2.0).await;
    }

    // Assert
    assert!(
        receiver.requests().is_empty(),
        "a refused destination was reached"
    );
}

#[tokio::test]
async fn an_endpoint_failing_past_the_give_up_time_is_disabled() {
    // Arrange
    let receiver = Receiver::start().await;
    receiver.answer(Answer::Status(500));
    let (_dir, app) = with_erp(&receiver, &[OLD_SECRET], &["--webhook-give-up-secs", "1"]).await;

    // Act
    app.create_customer_ok(&customer_body("given-up@example.com"))
        .await;
    wait_for_metric(
        &app,
        "boxsub_webhook_endpoint_disabled",
        &[("endpoint", "erp")],
        1.0,
    )
    .await;
    let tried = receiver.requests().len();
    tokio::time::sleep(Duration::from_millis(800)).await;

    // Assert
    let status = admin_status(&app).await;
    let disabled = status["endpoints"][0]["disabled"].as_str().unwrap();
    assert!(disabled.contains("given up"), "{disabled}");
    assert!(tried >= 2, "retried before giving up: {tried}");
    assert_eq!(
        receiver.requests().len(),
        tried,
        "nothing sent once disabled"
    );
}

#[test]
fn webhook_secret_prints_a_new_secret_and_check_catalogue_names_webhook_problems() {
    let first = run_to_exit(
        {
            let mut command = boxsub_command();
            command.arg("webhook-secret");
            command
        },
        Duration::from_secs(10),
    );
    assert!(first.status.is_some_and(|s| s.success()));
    let secret = first.stdout.trim();
    assert!(
        secret.starts_with("whsec_") && secret.len() == 6 + 44,
        "{secret}"
    );

    let dir = DataDir::with_catalogue(catalogue_with(vec![json!({
        "id": "erp", "url": "ftp://example.com/", "events": ["order.shipped"],
        "secrets": ["whsec_short"],
    })]));
    let checked = run_to_exit(
        {
            let mut command = boxsub_command();
            command.arg("check-catalogue").arg(&dir.catalogue);
            command
        },
        Duration::from_secs(10),
    );
    assert!(!checked.status.is_some_and(|s| s.success()));
    let said = format!("{}{}", checked.stdout, checked.stderr);
    for expected in [
        "webhooks[0]",
        "http or https",
        "order.shipped",
        "secrets[0]",
    ] {
        assert!(said.contains(expected), "{expected} missing from {said}");
    }
}

/// The niceness of each thread of process `pid` named `name`.
fn niceness_of_threads(pid: u32, name: &str) -> Vec<i64> {
    let mut found = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let path = task.path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            continue;
        }
        let stat = std::fs::read_to_string(path.join("stat")).unwrap_or_default();
        // After the command's closing parenthesis: state is field 3, nice field 19.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        found.push(fields[16].parse().unwrap());
    }
    found
}

#[tokio::test]
async fn deliveries_run_on_a_thread_of_their_own_below_the_apis_priority() {
    // Arrange
    let receiver = Receiver::start().await;
    let (_dir, app) = with_erp(&receiver, &[OLD_SECRET], &[]).await;

    // Act: a delivery made.
    app.create_customer_ok(&customer_body("niced@example.com"))
        .await;
    receiver.wait_for_delivered(1, WAIT).await;

    // Assert: one deliveries thread, 10 nicer than the process (whatever niceness the test
    // runs at, as under `nice -n 10`; 19 at most); the API's workers at the process's own.
    let pid = app.pid();
    let own = niceness_of_process(pid);
    assert_eq!(
        niceness_of_threads(pid, "boxsub-webhooks"),
        [(own + 10).min(19)],
        "the process runs at niceness {own}"
    );
    let workers = niceness_of_threads(pid, "tokio-rt-worker");
    assert!(
        !workers.is_empty(),
        "the API's runtime workers are named so"
    );
    assert!(
        workers.iter().all(|&nice| nice == own),
        "{workers:?}, the process at {own}"
    );
}

/// The niceness of process `pid` (its main thread's).
fn niceness_of_process(pid: u32) -> i64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    fields[16].parse().unwrap()
}
