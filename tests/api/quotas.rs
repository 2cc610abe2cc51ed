//! Webstores' quotas through the real binary: 429 with `Retry-After` and the draft's
//! `RateLimit` fields past a write quota and a read quota, the fields counting down, two
//! webstores' quotas apart, a reload changing a quota in force, and the concurrency quota
//! held by requests whose bodies never come.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::helpers::{
    customer_body, customer_body_b, default_catalogue, sample, scrape, store_a, store_b, DataDir,
    Launch, TestResponse,
};

/// The default catalogue with these quotas for every webstore.
fn catalogue_with(quotas: Value) -> Value {
    let mut catalogue = default_catalogue();
    catalogue["quotas"] = quotas;
    catalogue
}

/// `(policy, remaining, reset)` of an answer's `RateLimit` field.
fn state(response: &TestResponse) -> (String, u64, u64) {
    let field = response
        .header("ratelimit")
        .unwrap_or_else(|| panic!("no RateLimit field: {}", response.describe()));
    let mut parts = field.split(';');
    let policy = parts.next().unwrap().trim_matches('"').to_owned();
    let mut remaining = None;
    let mut reset = None;
    for part in parts {
        match part.split_once('=') {
            Some(("r", value)) => remaining = value.parse().ok(),
            Some(("t", value)) => reset = value.parse().ok(),
            _ => panic!("unexpected parameter {part:?} in {field:?}"),
        }
    }
    (policy, remaining.expect("r"), reset.expect("t"))
}

fn assert_over_quota(response: &TestResponse, policy: &str) {
    response.assert_status(429);
    let retry_after: u64 = response
        .header("retry-after")
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("no Retry-After: {}", response.describe()));
    assert!((1..=60).contains(&retry_after), "{}", response.describe());
    let (named, remaining, reset) = state(response);
    assert_eq!((named.as_str(), remaining), (policy, 0));
    assert_eq!(reset, retry_after, "{}", response.describe());
    assert!(response.header("ratelimit-policy").is_some());
    let message = response.json()["message"].as_str().unwrap_or("").to_owned();
    assert!(message.contains("quota"), "{}", response.describe());
}

#[tokio::test]
async fn writes_past_their_quota_get_429_with_the_fields_counting_down_and_change_nothing() {
    // Arrange: three writes at once, then one a minute.
    let dir = DataDir::with_catalogue(catalogue_with(
        json!({"writes_per_second": 1, "write_burst": 3}),
    ));
    let app = Launch::new().on(&dir).spawn().await;

    // Act
    let mut answers = Vec::new();
    for i in 0..4 {
        answers.push(
            app.create_customer(&customer_body(&format!("w{i}@example.com")))
                .await,
        );
    }

    // Assert
    // The quotas not given are the built-in defaults: no read quota, 1,024 at once.
    let policy = answers[0].header("ratelimit-policy").unwrap_or_default();
    assert_eq!(
        policy,
        "\"writes\";q=3;w=3, \"concurrency\";q=1024;qu=\"concurrent-requests\""
    );
    for (i, answer) in answers[..3].iter().enumerate() {
        answer.assert_status(201);
        let (named, remaining, reset) = state(answer);
        assert_eq!((named.as_str(), remaining), ("writes", 2 - i as u64));
        assert!((1..=3).contains(&reset), "{}", answer.describe());
    }
    assert_over_quota(&answers[3], "writes");
    assert!(app.lookup_email("w3@example.com").await.is_empty());
    // Counted by quota, and logged once in the minute however many follow.
    for i in 4..6 {
        let again = app
            .create_customer(&customer_body(&format!("w{i}@example.com")))
            .await;
        assert_over_quota(&again, "writes");
    }
    let metrics = scrape(&app).await;
    let count = |outcome| {
        sample(
            &metrics,
            "boxsub_webstore_requests_total",
            &[("webstore", "store-a"), ("outcome", outcome)],
        )
    };
    // Three creates and the lookup were admitted.
    assert_eq!((count("admitted"), count("over_quota_writes")), (4.0, 3.0));
    // Log lines reach the test through a pipe, later than the answers: count once the three
    // refusals' request lines are in, which the server writes after anything it logged
    // while refusing them (bounded).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while app.stderr_tail().matches("status=\"429\"").count() < 3
        && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let logged = app.stderr_tail().matches("went past its quota").count();
    assert!((1..=2).contains(&logged), "{}", app.stderr_tail());
    // Reads have no quota here: they take from none, and their answers say only the
    // policies.
    let read = app.get("/v1/customers").await;
    read.assert_status(200);
    assert_eq!(read.header("ratelimit"), None);
    assert_eq!(read.header("ratelimit-policy"), Some(policy));
}

#[tokio::test]
async fn a_catalogue_without_quotas_refuses_no_cart() {
    // Arrange: the catalogue names no quota; a cart imports its customers and their orders
    // as fast as 32 connections go.
    let app = Launch::new().spawn().await;
    let emails: Vec<String> = (0..250).map(|i| format!("import{i}@example.com")).collect();

    // Act
    let creates = futures_util::stream::iter(emails.iter())
        .map(|email| {
            let app = &app;
            async move { app.create_customer(&customer_body(email)).await }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    let ids: Vec<u64> = creates
        .iter()
        .filter_map(|answer| answer.json()["id"].as_u64())
        .collect();
    let orders = futures_util::stream::iter(ids.iter().cycle().take(600))
        .map(|id| {
            let app = &app;
            async move {
                app.create_order(&json!({"order": {"customer_id": id, "box_id": 217,
                                                    "frequency": "weekly"}}))
                    .await
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;

    // Assert: every one created, none told of a rate quota.
    for answer in creates.iter().chain(&orders) {
        answer.assert_status(201);
        assert_eq!(answer.header("ratelimit"), None, "{}", answer.describe());
        assert_eq!(
            answer.header("ratelimit-policy").as_deref(),
            Some("\"concurrency\";q=1024;qu=\"concurrent-requests\""),
        );
    }
    assert_eq!(ids.len(), 250);
}

#[tokio::test]
async fn reads_past_their_quota_get_429_and_the_other_webstore_reads_on() {
    // Arrange
    let dir = DataDir::with_catalogue(catalogue_with(
        json!({"reads_per_second": 1, "read_burst": 2}),
    ));
    let app = Launch::new().on(&dir).spawn().await;

    // Act
    let first = app.get("/v1/boxes").await;
    let second = app.get("/v1/customers?page=1").await;
    let third = app.get("/v1/webstore").await;
    let other = app.get_as("/v1/boxes", &store_b()).await;

    // Assert
    first.assert_status(200);
    assert_eq!(state(&first), ("reads".to_owned(), 1, 1));
    second.assert_status(200);
    assert_eq!(state(&second).1, 0);
    assert_over_quota(&third, "reads");
    other.assert_status(200);
    assert_eq!(state(&other), ("reads".to_owned(), 1, 1));
    // An answer that is an error still counts and says so.
    let missing = app.get_as("/v1/customers/999999", &store_b()).await;
    missing.assert_status(404);
    assert_eq!(state(&missing).1, 0);
}

#[tokio::test]
async fn one_webstores_quota_is_its_own() {
    // Arrange: store A may write once; store B has no write quota (the default).
    let mut catalogue = default_catalogue();
    catalogue["webstores"][0]["quotas"] = json!({"writes_per_second": 1, "write_burst": 1});
    let dir = DataDir::with_catalogue(catalogue);
    let app = Launch::new().on(&dir).spawn().await;

    // Act
    let a1 = app.create_customer(&customer_body("a1@example.com")).await;
    let a2 = app.create_customer(&customer_body("a2@example.com")).await;
    let mut b_answers = Vec::new();
    for i in 0..5 {
        b_answers.push(
            app.post_json_as(
                "/v1/customers",
                &customer_body_b(&format!("b{i}@example.com")),
                &store_b(),
            )
            .await,
        );
    }

    // Assert
    a1.assert_status(201);
    assert_over_quota(&a2, "writes");
    for answer in &b_answers {
        answer.assert_status(201);
    }
    assert_eq!(
        b_answers[4].header("ratelimit-policy").unwrap(),
        "\"concurrency\";q=1024;qu=\"concurrent-requests\""
    );
    assert_eq!(
        a1.header("ratelimit-policy").unwrap().split(',').next(),
        Some("\"writes\";q=1;w=1")
    );
}

#[tokio::test]
async fn a_catalogue_reload_changes_a_quota_in_force() {
    // Arrange: store A may write once, and has.
    let tight = catalogue_with(json!({"writes_per_second": 1, "write_burst": 1}));
    let dir = DataDir::with_catalogue(tight.clone());
    let app = Launch::new().on(&dir).spawn().await;
    app.create_customer(&customer_body("r0@example.com"))
        .await
        .assert_status(201);
    assert_over_quota(
        &app.create_customer(&customer_body("r1@example.com")).await,
        "writes",
    );

    // Act: the operator gives every webstore a burst of 50.
    let wide = catalogue_with(json!({"writes_per_second": 1, "write_burst": 50}));
    std::fs::write(&dir.catalogue, serde_json::to_vec_pretty(&wide).unwrap()).unwrap();
    app.signal("HUP");
    let reloaded = app.wait_for_stderr_line(Duration::from_secs(10), |line| {
        line.contains("catalogue reloaded")
    });
    assert!(reloaded.is_some(), "{}", app.stderr_tail());

    // Assert: the new quota is in force at once, and says so.
    let answer = app.create_customer(&customer_body("r2@example.com")).await;
    answer.assert_status(201);
    assert_eq!(state(&answer).1, 49);
    assert!(answer
        .header("ratelimit-policy")
        .unwrap()
        .starts_with("\"writes\";q=50;w=50,"));
    // And back: the tight quota again, fresh.
    std::fs::write(&dir.catalogue, serde_json::to_vec_pretty(&tight).unwrap()).unwrap();
    app.signal("HUP");
    let mut refused_again = None;
    for i in 0..100 {
        let answer = app
            .create_customer(&customer_body(&format!("r3-{i}@example.com")))
            .await;
        if answer.status == 429 {
            refused_again = Some(answer);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_over_quota(
        &refused_again.expect("the tight quota came back into force"),
        "writes",
    );
}

#[tokio::test]
async fn the_concurrency_quota_refuses_while_slow_requests_hold_it_and_frees_with_them() {
    // Arrange: two requests in progress at once; the two that hold them never send their
    // bodies.
    let dir = DataDir::with_catalogue(catalogue_with(json!({"concurrent_requests": 2})));
    let app = Launch::new().on(&dir).spawn().await;
    let creds = store_a();
    let head = format!(
        "POST /v1/customers HTTP/1.1\r\nHost: 127.0.0.1\r\nAPI-Key: {}\r\nAPI-Secret: {}\r\n\
         Content-Type: application/json\r\nContent-Length: 500\r\n\r\n{{\"first_name\"",
        creds.key, creds.secret
    );
    let slow_request = || async {
        let mut stream = TcpStream::connect(("127.0.0.1", app.port)).await.unwrap();
        stream.write_all(head.as_bytes()).await.unwrap();
        stream
    };
    let mut slow = vec![slow_request().await, slow_request().await];

    // Act: wait until both are held (bounded: 10 s, for a machine busy with other tests),
    // then ask. The server takes the connections' requests in any order, so a probe can
    // come in between and a slow request be the one refused (its connection then has an
    // answer, and every later probe is let through): that one is sent again.
    let mut refused = None;
    let mut seen = Vec::new();
    let mut sent_again = 0;
    for _ in 0..500 {
        for stream in &mut slow {
            // An answer or a close (`Ok`): this one holds nothing. Nothing yet: `WouldBlock`.
            let mut answered = [0u8; 64];
            if stream.try_read(&mut answered).is_ok() {
                *stream = slow_request().await;
                sent_again += 1;
            }
        }
        let answer = app.get("/v1/boxes").await;
        if answer.status == 429 {
            refused = Some(answer);
            break;
        }
        seen.push(answer.status);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let other = app.get_as("/v1/boxes", &store_b()).await;
    drop(slow);

    // Assert
    let refused = refused.unwrap_or_else(|| {
        panic!(
            "the third request in progress was never refused: {} answers {:?}…, slow requests \
             sent again {sent_again} times; {}",
            seen.len(),
            &seen[..seen.len().min(5)],
            app.stderr_tail()
        )
    });
    assert_over_quota(&refused, "concurrency");
    other.assert_status(200);
    let mut freed = false;
    for _ in 0..500 {
        if app.get("/v1/boxes").await.status == 200 {
            freed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        freed,
        "the quota was given back when the slow requests went away"
    );
}
