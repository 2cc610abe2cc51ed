//! Events and webhooks in a replicated group: the primary killed with deliveries pending
//! (its receiver failing), the new primary delivering every event in order from where the
//! group stood, and a poller's cursor from the old primary good on the new one, the
//! numbering going on without a gap or a repeat.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::*;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn catalogue_with_webhook(url: &str) -> Value {
    let mut catalogue = default_catalogue();
    catalogue["webstores"][0]["webhooks"] = json!([{
        "id": "erp", "url": url, "events": ["customer.created", "order.created"],
        "secrets": [SECRET], "allow_private_network": true,
    }]);
    catalogue
}

/// Every event after `cursor` (from the oldest without one), following the pages.
async fn follow(app: &TestApp, cursor: Option<&str>) -> (Vec<Value>, String) {
    let mut cursor = cursor.map(str::to_owned);
    let mut events = Vec::new();
    for _ in 0..1_000 {
        let path = match &cursor {
            Some(cursor) => format!("/v1/events?after={cursor}&limit=5"),
            None => "/v1/events?limit=5".to_owned(),
        };
        let page = app.get(&path).await;
        page.assert_status(200);
        let body = page.json();
        let got = body["events"].as_array().unwrap().clone();
        cursor = Some(body["next"].as_str().unwrap().to_owned());
        if got.is_empty() {
            break;
        }
        events.extend(got);
    }
    (events, cursor.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failover_with_deliveries_pending_delivers_everything_and_keeps_the_feed_whole() {
    let test = "a_failover_with_deliveries_pending_delivers_everything_and_keeps_the_feed_whole";
    let receiver = Receiver::start().await;
    receiver.answer(Answer::Status(500));
    let dirs = (0..2)
        .map(|_| DataDir::with_catalogue(catalogue_with_webhook(&receiver.url())))
        .collect();
    let extra = ["--webhook-first-retry-secs", "0.2"];
    let Some(mut group) = Group::start_from(test, dirs, &extra, NatsOptions::default()).await
    else {
        return;
    };
    let primary = group.primary(Duration::from_secs(20)).await;
    let standby = 1 - primary;
    let app = group.app(primary);
    // The endpoint's deliveries start once it is first seen; wait for its first attempt.
    let first = app
        .create_customer_ok(&customer_body("first@example.com"))
        .await;
    receiver.wait_for_requests(1, Duration::from_secs(20)).await;
    for _ in 0..6 {
        app.create_order_ok(&json!({"customer_id": first["id"], "box_id": 218}))
            .await;
    }
    let (before, cursor) = follow(app, None).await;
    assert_eq!(before.len(), 7);
    let first_seen = receiver.requests()[0].id.clone();
    let first_event = before[0]["id"].as_str().unwrap().to_owned();

    // Act: the primary dies with everything after its first event undelivered.
    group.members[primary]
        .app
        .take()
        .expect("the primary")
        .crash();
    let new_primary = group.primary(Duration::from_secs(20)).await;
    assert_eq!(new_primary, standby);
    receiver.answer(Answer::Status(204));
    let app = group.app(new_primary);
    let after = app
        .create_customer_ok(&customer_body("after@example.com"))
        .await;
    let delivered = receiver
        .wait_for_delivered(8, Duration::from_secs(30))
        .await;
    let (rest, _) = follow(app, Some(&cursor)).await;
    let (whole, _) = follow(app, None).await;

    // Assert
    assert_eq!(
        first_seen, first_event,
        "the first attempt was the first event"
    );
    let mut seen = BTreeSet::new();
    let arrivals: Vec<u64> = delivered
        .iter()
        .filter(|d| seen.insert(d.id.clone()))
        .map(Delivery::sequence)
        .collect();
    assert_eq!(
        arrivals,
        (1..=8).collect::<Vec<u64>>(),
        "in order, none missing"
    );
    assert_eq!(
        rest.len(),
        1,
        "the feed goes on from the old primary's cursor"
    );
    assert_eq!(rest[0]["sequence"], 8);
    assert_eq!(rest[0]["data"]["id"], after["id"]);
    assert_eq!(
        &whole[..7],
        &before[..],
        "the events are the same on the new primary"
    );
    let ids: BTreeSet<&str> = whole.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 8);
}
