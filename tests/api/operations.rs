//! What an operator sees: request ids, request logs (text and JSON) that never hold a
//! secret, and Prometheus metrics that move with requests.

use std::collections::HashMap;
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{customer_body, sample, scrape, spawn_app, store_a, DataDir, Launch};

#[tokio::test]
async fn the_request_id_round_trips_and_is_made_up_when_absent() {
    // Arrange
    let app = spawn_app().await;

    // Act
    let given = app
        .send(
            Method::GET,
            "/v1/webstore",
            Some(&store_a()),
            None,
            &[("X-Request-Id", "cart-4711-retry-2")],
        )
        .await;
    let made_up: Vec<String> = [
        app.get("/v1/webstore").await,
        app.get_without_auth("/v1/ping").await,
        app.get("/v1/no-such-thing").await,
        app.post_raw("/v1/customers", "not json").await,
    ]
    .iter()
    .map(|response| {
        response
            .header("x-request-id")
            .expect("every answer has an id")
    })
    .collect();
    let unusable = app
        .send(
            Method::GET,
            "/v1/webstore",
            Some(&store_a()),
            None,
            &[("X-Request-Id", &"x".repeat(200))],
        )
        .await;

    // Assert
    assert_eq!(
        given.header("x-request-id").as_deref(),
        Some("cart-4711-retry-2")
    );
    for id in &made_up {
        assert!(!id.is_empty() && id.len() <= 128, "{id}");
    }
    let distinct: std::collections::HashSet<&String> = made_up.iter().collect();
    assert_eq!(distinct.len(), made_up.len(), "ids repeat: {made_up:?}");
    assert_ne!(unusable.header("x-request-id"), Some("x".repeat(200)));
}

#[tokio::test]
async fn metrics_parse_and_move_with_requests() {
    // Arrange
    let app = spawn_app().await;
    let before = scrape(&app).await;

    // Act
    for _ in 0..3 {
        app.get("/v1/webstore").await.assert_status(200);
    }
    app.get("/v1/customers/424242").await.assert_status(404);
    let customer = app
        .create_customer_ok(&customer_body("metrics@example.com"))
        .await;
    app.create_order_ok(&json!({"customer_id": customer["id"], "box_id": 217}))
        .await;
    app.sign_in("metrics@example.com", "wrong password!").await;
    let after = scrape(&app).await;

    // Assert
    let grew = |name: &str, labels: &[(&str, &str)]| {
        sample(&after, name, labels) - sample(&before, name, labels)
    };
    let webstore_ok = [
        ("route", "/v1/webstore"),
        ("method", "GET"),
        ("status", "200"),
    ];
    assert_eq!(grew("boxsub_http_requests_total", &webstore_ok), 3.0);
    let by_id = [
        ("route", "/v1/customers/:id"),
        ("method", "GET"),
        ("status", "404"),
    ];
    assert_eq!(grew("boxsub_http_requests_total", &by_id), 1.0);
    assert!(
        after.samples.iter().all(|s| !s
            .labels
            .get("route")
            .is_some_and(|route| route.contains("424242"))),
        "routes are templates, never raw paths"
    );
    assert_eq!(
        grew("boxsub_customers_created_total", &[("webstore", "store-a")]),
        1.0
    );
    assert_eq!(
        grew("boxsub_orders_created_total", &[("webstore", "store-a")]),
        1.0
    );
    assert!(grew("boxsub_group_commit_batches_total", &[]) >= 1.0);
    assert_eq!(grew("boxsub_sign_in_failures_total", &[]), 1.0);
    assert!(sample(&after, "boxsub_actors_active", &[]) >= 1.0);
    assert!(sample(&after, "boxsub_store_size_bytes", &[]) > 0.0);
    assert!(sample(&after, "boxsub_disk_free_bytes", &[]) > 0.0);
    assert_eq!(sample(&after, "boxsub_disk_writes_refused", &[]), 0.0);
    let durations: Vec<&str> = after
        .samples
        .iter()
        .map(|s| s.metric.as_str())
        .filter(|name| name.starts_with("boxsub_http_request_duration_seconds"))
        .collect();
    assert!(!durations.is_empty(), "the latency histogram is there");
    for family in [
        "boxsub_http_connections_open",
        "boxsub_group_commit_duration_seconds_count",
    ] {
        assert!(
            after.samples.iter().any(|s| s.metric == family),
            "{family} is exposed"
        );
    }
}

#[tokio::test]
async fn metrics_can_move_to_an_address_of_their_own_or_be_turned_off() {
    // Arrange: a free port for the metrics listener.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let metrics_addr = free.local_addr().unwrap().to_string();
    drop(free);
    let dir = DataDir::new();
    let moved = Launch::new()
        .on(&dir)
        .args(&["--metrics", &metrics_addr])
        .spawn()
        .await;
    let off_dir = DataDir::new();
    let off = Launch::new()
        .on(&off_dir)
        .args(&["--metrics", "off"])
        .spawn()
        .await;

    // Act
    let on_own = reqwest::get(format!("http://{metrics_addr}/metrics"))
        .await
        .unwrap();
    let on_main = moved.get_without_auth("/metrics").await;
    let when_off = off.get_without_auth("/metrics").await;

    // Assert
    assert_eq!(on_own.status(), 200);
    assert!(on_own
        .text()
        .await
        .unwrap()
        .contains("boxsub_actors_active"));
    on_main.assert_not_found();
    when_off.assert_not_found();
}

#[tokio::test]
async fn a_log_of_passwords_and_sign_ins_holds_no_secret() {
    // Arrange: everything the server logs at the most verbose level, to a file.
    let dir = DataDir::new();
    let log = dir.sibling("server.log");
    let password = "s3cret-Passw0rd-never-logged";
    let mut app = Launch::new()
        .on(&dir)
        .log_to(&log)
        .env(&[("RUST_LOG", "trace")])
        .spawn()
        .await;
    let mut body = customer_body("logged@example.com");
    body["password"] = json!(password);

    // Act
    let customer = app.create_customer_ok(&body).await;
    app.patch_json(
        &format!("/v1/customers/{}", customer["id"]),
        &json!({"password": format!("{password}-2")}),
    )
    .await
    .assert_status(200);
    app.sign_in("logged@example.com", &format!("{password}-2"))
        .await
        .assert_status(200);
    app.sign_in("logged@example.com", "a wrong one").await;
    app.terminate_ok(Duration::from_secs(20));

    // Assert
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("route=/v1/customers/sign_in") || text.contains("/v1/customers/sign_in"));
    for secret in [
        password,
        store_a().secret.as_str(),
        "$argon2id$",
        "correct horse",
    ] {
        assert!(!text.contains(secret), "the log holds {secret:?}");
    }
}

#[tokio::test]
async fn json_logs_carry_one_object_per_request() {
    // Arrange
    let dir = DataDir::new();
    let log = dir.sibling("server.json.log");
    let mut app = Launch::new()
        .on(&dir)
        .log_to(&log)
        .args(&["--log-format", "json"])
        .spawn()
        .await;

    // Act
    app.send(
        Method::GET,
        "/v1/webstore",
        Some(&store_a()),
        None,
        &[("X-Request-Id", "json-log-check")],
    )
    .await
    .assert_status(200);
    app.terminate_ok(Duration::from_secs(20));

    // Assert: every line is JSON, and the request's line has what an operator needs.
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    let request = lines
        .iter()
        .find(|line| line["request_id"] == "json-log-check")
        .unwrap_or_else(|| panic!("no line for the request in {text}"));
    let fields: HashMap<&str, &Value> = request
        .as_object()
        .unwrap()
        .iter()
        .map(|(key, value)| (key.as_str(), value))
        .collect();
    assert_eq!(fields["method"], "GET");
    assert_eq!(fields["route"], "/v1/webstore");
    assert_eq!(fields["status"], "200");
    assert_eq!(fields["webstore"], "store-a");
    assert!(fields["latency_ms"].is_number());
}

#[tokio::test]
async fn log_lines_are_written_whole_and_at_once_even_in_a_burst() {
    // Arrange
    let dir = DataDir::new();
    let log = dir.sibling("server.burst.log");
    let mut app = Launch::new()
        .on(&dir)
        .log_to(&log)
        .args(&["--log-format", "json"])
        .spawn()
        .await;
    let logged = |id: &str| {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains(&format!("\"request_id\":\"{id}\""))
    };

    // Act 1: one request on an idle server.
    app.send(
        Method::GET,
        "/v1/webstore",
        Some(&store_a()),
        None,
        &[("X-Request-Id", "alone")],
    )
    .await
    .assert_status(200);

    // Assert 1: its line is on disk while the server runs (the log thread's buffer does
    // not hold a line back when nothing follows it).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !logged("alone") && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        logged("alone"),
        "the line of an idle server's request is not written"
    );

    // Act 2: a burst of 300 requests on 30 connections at once.
    let ids: Vec<String> = (0..300).map(|n| format!("burst-{n}")).collect();
    let creds = store_a();
    let app_ref = &app;
    let sends = ids.chunks(10).map(|chunk| {
        let creds = &creds;
        async move {
            for id in chunk {
                app_ref
                    .send(
                        Method::GET,
                        "/v1/webstore",
                        Some(creds),
                        None,
                        &[("X-Request-Id", id)],
                    )
                    .await
                    .assert_status(200);
            }
        }
    });
    futures_util::future::join_all(sends).await;
    app.terminate_ok(Duration::from_secs(20));

    // Assert 2: every line is one whole JSON object, and each request has exactly one.
    let text = std::fs::read_to_string(&log).unwrap();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for line in text.lines() {
        let object: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("a broken line ({e}): {line}"));
        if let Some(id) = object["request_id"].as_str() {
            *seen.entry(id.to_owned()).or_default() += 1;
        }
    }
    for id in &ids {
        assert_eq!(seen.get(id), Some(&1), "lines for request {id}");
    }
}
