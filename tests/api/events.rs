//! The events feed (`GET /v1/events`) as a poller sees it: pages oldest first behind an
//! opaque cursor, filtered by type, every malformed parameter named, another webstore's
//! cursor and one past the retention refused with 410, a cursor that stays good across a
//! restart with the numbering going on, and a page whose `type` matches none of thousands of
//! events ending once it has looked at 2,000 of them, with `has_more`.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::{
    customer_body, parse_link_header, path_and_query, spawn_app, store_b, DataDir, Launch, TestApp,
};

/// Follows the feed from `cursor` (from the start without one) to its end: the events and
/// the last cursor.
async fn follow(app: &TestApp, cursor: Option<&str>, limit: usize) -> (Vec<Value>, String) {
    let mut events = Vec::new();
    let mut path = match cursor {
        Some(cursor) => format!("/v1/events?after={cursor}&limit={limit}"),
        None => format!("/v1/events?limit={limit}"),
    };
    for _ in 0..1_000 {
        let page = app.get(&path).await;
        page.assert_status(200);
        let body = page.json();
        let got = body["events"].as_array().unwrap().clone();
        let link = parse_link_header(&page.header("link").expect("a Link header"));
        let next = body["next"].as_str().unwrap().to_owned();
        assert_eq!(link[0].0, "next");
        assert!(link[0].1.contains(&format!("after={next}")), "{link:?}");
        if got.is_empty() {
            return (events, next);
        }
        events.extend(got);
        path = path_and_query(&link[0].1);
    }
    panic!("the feed did not end");
}

fn sequences(events: &[Value]) -> Vec<u64> {
    events
        .iter()
        .map(|e| e["sequence"].as_u64().unwrap())
        .collect()
}

#[tokio::test]
async fn the_feed_pages_a_webstores_events_oldest_first() {
    // Arrange
    let app = spawn_app().await;
    let empty = app.get("/v1/events").await;
    empty.assert_status(200);
    assert_eq!(empty.json()["events"], json!([]));

    // Act
    let mut ids = Vec::new();
    for n in 0..4 {
        let customer = app
            .create_customer_ok(&customer_body(&format!("feed{n}@example.com")))
            .await;
        app.create_order_ok(&json!({"customer_id": customer["id"], "box_id": 218}))
            .await;
        ids.push(customer["id"].as_i64().unwrap());
    }
    app.patch_json(
        &format!("/v1/customers/{}", ids[0]),
        &json!({"last_name": "Changed"}),
    )
    .await
    .assert_status(200);
    let (events, _) = follow(&app, None, 3).await;
    let orders_only = app
        .get("/v1/events?type=order.created&limit=1000")
        .await
        .json();

    // Assert
    assert_eq!(sequences(&events), (1..=9).collect::<Vec<u64>>());
    let distinct: std::collections::BTreeSet<&str> =
        events.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(distinct.len(), 9, "ids are unique");
    assert_eq!(events[0]["type"], "customer.created");
    assert_eq!(events[1]["type"], "order.created");
    assert_eq!(events[8]["type"], "customer.updated");
    assert_eq!(events[8]["data"]["last_name"], "Changed");
    let order_events = orders_only["events"].as_array().unwrap();
    assert_eq!(order_events.len(), 4);
    assert!(order_events.iter().all(|e| e["type"] == "order.created"));
    let b_feed = app.get_as("/v1/events", &store_b()).await.json();
    assert_eq!(
        b_feed["events"],
        json!([]),
        "another webstore sees none of them"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_whose_type_matches_nothing_ends_after_2000_events_with_more_to_come() {
    // Arrange: 2,050 customer.created events and no order.
    let app = spawn_app().await;
    let carts = (0..25).map(|cart| {
        let app = &app;
        async move {
            for n in 0..82 {
                app.create_customer_ok(&customer_body(&format!("scan{cart}x{n}@example.com")))
                    .await;
            }
        }
    });
    futures_util::future::join_all(carts).await;

    // Act
    let first = app.get("/v1/events?type=order.created&limit=1000").await;
    first.assert_status(200);
    let first = first.json();
    let next = first["next"].as_str().unwrap();
    let second = app
        .get(&format!(
            "/v1/events?after={next}&type=order.created&limit=1000"
        ))
        .await
        .json();
    let whole = app.get("/v1/events?limit=1000").await.json();
    let last = app
        .get(&format!(
            "/v1/events?after={}&limit=1000",
            second["next"].as_str().unwrap()
        ))
        .await
        .json();

    // Assert
    assert_eq!(first["events"], json!([]));
    assert_eq!(
        first["has_more"], true,
        "the page ended at its budget, not at the newest event"
    );
    assert_eq!(second["events"], json!([]));
    assert_eq!(second["has_more"], false, "the rest of the feed was read");
    assert_ne!(
        second["next"], first["next"],
        "the second page went on from where the first stopped"
    );
    assert_eq!(whole["events"].as_array().unwrap().len(), 1000);
    assert_eq!(whole["has_more"], true, "a full page says there are more");
    assert_eq!(
        last["events"],
        json!([]),
        "the cursor was at the newest event"
    );
    assert_eq!(last["has_more"], false);
}

#[tokio::test]
async fn every_malformed_parameter_is_named_and_another_webstores_cursor_is_gone() {
    // Arrange
    let app = spawn_app().await;
    app.create_customer_ok(&customer_body("mine@example.com"))
        .await;
    let a_cursor = app.get("/v1/events").await.json()["next"]
        .as_str()
        .unwrap()
        .to_owned();

    // Act
    let malformed = app
        .get("/v1/events?after=%21%21&type=order.created,order.shipped&limit=0")
        .await;
    let foreign = app
        .get_as(&format!("/v1/events?after={a_cursor}"), &store_b())
        .await;

    // Assert
    malformed.assert_status(422);
    let errors = &malformed.json()["errors"];
    assert_eq!(errors["after"], json!(["is invalid"]));
    assert_eq!(errors["type"], json!(["is not included in the list"]));
    assert_eq!(errors["limit"], json!(["must be between 1 and 1000"]));
    foreign.assert_status(410);
    assert!(foreign.json()["message"]
        .as_str()
        .unwrap()
        .contains("not given to this webstore"));
    app.get_as(&format!("/v1/events?after={a_cursor}"), &store_b())
        .await
        .assert_status(410);
}

#[tokio::test]
async fn a_cursor_past_the_retention_is_gone() {
    // Arrange
    let dir = DataDir::new();
    let app = Launch::new()
        .on(&dir)
        .args(&["--events-retention-secs", "1"])
        .spawn()
        .await;
    let start = app.get("/v1/events").await.json()["next"]
        .as_str()
        .unwrap()
        .to_owned();
    app.create_customer_ok(&customer_body("old@example.com"))
        .await;

    // Act: the sweep runs every second and removes what is older than one.
    let deadline = Instant::now() + Duration::from_secs(20);
    let gone = loop {
        let answer = app.get(&format!("/v1/events?after={start}")).await;
        if answer.status == 410 || Instant::now() >= deadline {
            break answer;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    app.create_customer_ok(&customer_body("new@example.com"))
        .await;
    let (kept, _) = follow(&app, None, 10).await;

    // Assert
    gone.assert_status(410);
    assert!(gone.json()["message"]
        .as_str()
        .unwrap()
        .contains("older than the feed keeps"));
    assert_eq!(sequences(&kept), [2], "the oldest kept, numbered on");
}

#[tokio::test]
async fn a_cursor_stays_good_across_a_restart_and_the_numbering_goes_on() {
    // Arrange
    let dir = DataDir::new();
    let mut app = Launch::new().on(&dir).spawn().await;
    for n in 0..3 {
        app.create_customer_ok(&customer_body(&format!("r{n}@example.com")))
            .await;
    }
    let (first, cursor) = follow(&app, None, 2).await;

    // Act
    app.terminate_ok(Duration::from_secs(10));
    let app = Launch::new().on(&dir).spawn().await;
    app.create_customer_ok(&customer_body("after@example.com"))
        .await;
    let (rest, _) = follow(&app, Some(&cursor), 2).await;

    // Assert
    assert_eq!(sequences(&first), [1, 2, 3]);
    assert_eq!(sequences(&rest), [4]);
    assert_eq!(rest[0]["data"]["email"], "after@example.com");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn after_a_kill_every_acknowledged_order_has_its_event_and_every_event_its_order() {
    // Arrange
    let dir = DataDir::new();
    let mut app = Launch::new().on(&dir).spawn().await;
    let customer = app
        .create_customer_ok(&customer_body("killed@example.com"))
        .await;

    // Act: four writers, and SIGKILL in the middle of their writes.
    let client = reqwest::Client::new();
    let url = format!("{}/v1/orders", app.address);
    let writers: Vec<_> = (0..4)
        .map(|_| {
            let (client, url, id) = (client.clone(), url.clone(), customer["id"].clone());
            tokio::spawn(async move {
                let mut acknowledged = Vec::new();
                for _ in 0..2_000 {
                    let sent = client
                        .post(&url)
                        .header("API-Key", crate::helpers::STORE_A_KEY)
                        .header("API-Secret", crate::helpers::STORE_A_SECRET)
                        .json(&json!({"customer_id": id, "box_id": 218}))
                        .timeout(Duration::from_secs(5))
                        .send()
                        .await;
                    match sent {
                        Ok(response) if response.status() == 201 => {
                            let order: Value = response.json().await.unwrap_or(Value::Null);
                            acknowledged.push(order["id"].as_i64().unwrap_or(0));
                        }
                        _ => break,
                    }
                }
                acknowledged
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(700)).await;
    app.crash();
    let mut acknowledged = Vec::new();
    for writer in writers {
        acknowledged.extend(writer.await.unwrap());
    }
    let app = Launch::new().on(&dir).spawn().await;
    let (events, _) = follow(&app, None, 1000).await;

    // Assert
    assert!(
        acknowledged.len() > 10,
        "few writes before the kill: {}",
        acknowledged.len()
    );
    let evented: std::collections::BTreeSet<i64> = events
        .iter()
        .filter(|e| e["type"] == "order.created")
        .map(|e| e["data"]["id"].as_i64().unwrap())
        .collect();
    for id in &acknowledged {
        assert!(evented.contains(id), "acknowledged order {id} has no event");
    }
    for id in &evented {
        app.get(&format!("/v1/orders/{id}"))
            .await
            .assert_status(200);
    }
    let numbers = sequences(&events);
    assert!(
        numbers.windows(2).all(|w| w[0] < w[1]),
        "in order: {numbers:?}"
    );
}
