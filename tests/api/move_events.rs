//! A webstore's events move with it, behind a real HAProxy: a client reads the source's feed
//! part-way, the webstore moves to the other shard while a cart creates customers and orders
//! all along, and on the target the feed goes on from the source's cursor with no event
//! lost, none repeated and none renumbered (each the very event the source gave, id and
//! all), every acknowledged write has its event, and the target numbers its own writes
//! after the highest moved. And an export of version 1 (without events) still imports, its
//! webstore's numbering starting at 1.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::*;

/// One page of `webstore`'s feed at `base` (`http://127.0.0.1:PORT`) after `cursor`: the
/// status, the events and the next cursor. Plain reqwest, so that any answer is taken
/// (the source stops serving the webstore during the move).
async fn page_at(
    base: &str,
    creds: &Creds,
    cursor: Option<&str>,
    limit: usize,
) -> (u16, Vec<Value>, String) {
    let mut url = format!("{base}/v1/events?limit={limit}");
    if let Some(cursor) = cursor {
        url.push_str(&format!("&after={}", enc(cursor)));
    }
    let response = reqwest::Client::new()
        .get(url)
        .header("API-Key", creds.key.as_str())
        .header("API-Secret", creds.secret.as_str())
        .timeout(Duration::from_secs(10))
        .send()
        .await;
    let Ok(response) = response else {
        return (0, Vec::new(), String::new());
    };
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    let events = body["events"].as_array().cloned().unwrap_or_default();
    let next = body["next"].as_str().unwrap_or_default().to_owned();
    (status, events, next)
}

/// Every event of the feed of `app` after `cursor`, page by page of `limit` (through the
/// contract-checked client), and the cursor after the last.
async fn read_to_the_end(
    app: &TestApp,
    creds: &Creds,
    mut cursor: Option<String>,
    limit: usize,
) -> (Vec<Value>, String) {
    let mut events = Vec::new();
    for _ in 0..10_000 {
        let path = match &cursor {
            Some(cursor) => format!("/v1/events?limit={limit}&after={}", enc(cursor)),
            None => format!("/v1/events?limit={limit}"),
        };
        let response = app.get_as(&path, creds).await;
        response.assert_status(200);
        let body = response.json();
        let page = body["events"].as_array().cloned().expect("events");
        let next = body["next"].as_str().expect("a next cursor").to_owned();
        if page.is_empty() {
            return (events, next);
        }
        assert!(
            page.len() <= limit,
            "a page of {} past limit={limit}",
            page.len()
        );
        events.extend(page);
        cursor = Some(next);
    }
    panic!("the feed never ended");
}

fn sequence(event: &Value) -> u64 {
    event["sequence"]
        .as_u64()
        .unwrap_or_else(|| panic!("an event without a sequence: {event}"))
}

/// The sequences of `events` rise strictly: none repeated, none out of order.
#[track_caller]
fn assert_rising(events: &[Value], what: &str) {
    for pair in events.windows(2) {
        assert!(
            sequence(&pair[0]) < sequence(&pair[1]),
            "{what}: {} then {}",
            pair[0],
            pair[1]
        );
    }
}

/// Creates a customer (keyed) and then an order for it through `base`, `n` of `tag`: the
/// statuses and ids of both (0 and `None` for the order if the customer was not made).
async fn customer_and_order(
    base: &str,
    creds: &Creds,
    tag: &str,
    n: usize,
) -> [(u16, Option<i64>); 2] {
    let customer = create(base, creds, tag, n).await;
    let Some(id) = customer.1.filter(|_| customer.0 == 201) else {
        return [customer, (0, None)];
    };
    let sent = reqwest::Client::new()
        .post(format!("{base}/v1/orders"))
        .header("API-Key", creds.key.as_str())
        .header("API-Secret", creds.secret.as_str())
        .json(&json!({"customer_id": id, "box_id": 300}))
        .timeout(Duration::from_secs(30))
        .send()
        .await;
    let order = match sent {
        Ok(response) => {
            let status = response.status().as_u16();
            let id = response
                .json::<Value>()
                .await
                .ok()
                .and_then(|b| b["id"].as_i64());
            (status, id)
        }
        Err(_) => (0, None),
    };
    [customer, order]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_feed_goes_on_from_the_sources_cursor_on_the_target_with_every_event_once() {
    let test =
        "move_events::the_feed_goes_on_from_the_sources_cursor_on_the_target_with_every_event_once";
    let Some(deployment) = Deployment::start(test).await else {
        return;
    };
    let base = deployment.base();
    let creds = store_b();
    let source = deployment.one.app();
    let source_base = format!("http://{}", deployment.one.api());

    // Arrange: customers with an order each on the source, and a client that has read the
    // feed part-way.
    for n in 0..20 {
        let [customer, order] = customer_and_order(&base, &creds, "seed-", n).await;
        assert_eq!((customer.0, order.0), (201, 201), "seed {n}");
    }
    let (before, _) = read_to_the_end(source, &creds, None, 7).await;
    assert_eq!(
        before.len(),
        40,
        "a customer.created and an order.created each"
    );
    assert_rising(&before, "the source's feed");
    let first = source.get_as("/v1/events?limit=15", &creds).await;
    first.assert_status(200);
    let first = first.json();
    let read: Vec<Value> = first["events"].as_array().cloned().expect("events");
    assert_eq!(read, before[..15], "a page is the start of the whole");
    let cursor = first["next"].as_str().expect("a cursor").to_owned();

    // Act: a cart writes customers and orders all along; a watcher keeps reading the
    // source's feed from the cursor, to know every event the source ever gave; the move.
    let stop = Arc::new(AtomicBool::new(false));
    let cart = tokio::spawn({
        let (base, creds, stop) = (base.clone(), creds.clone(), stop.clone());
        async move {
            let mut log = Vec::new();
            for n in 0..100_000 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                log.push(customer_and_order(&base, &creds, "cart-", n).await);
            }
            log
        }
    });
    let seen: Arc<Mutex<BTreeMap<u64, Value>>> = Arc::default();
    let watcher = tokio::spawn({
        let (creds, stop, seen, cursor) =
            (creds.clone(), stop.clone(), seen.clone(), cursor.clone());
        async move {
            let mut after = cursor;
            while !stop.load(Ordering::Relaxed) {
                let (status, events, next) =
                    page_at(&source_base, &creds, Some(&after), 1000).await;
                if status == 200 && !next.is_empty() {
                    let mut seen = seen.lock().unwrap();
                    for event in events {
                        seen.insert(sequence(&event), event);
                    }
                    after = next;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let moved = tokio::task::block_in_place(|| deployment.move_webstore(STORE_B, "two"));
    assert!(
        moved.status.is_some_and(|s| s.success()),
        "{}\n{}",
        moved.stdout,
        moved.stderr
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    let log = cart.await.expect("the cart");
    watcher.await.expect("the watcher");
    let acknowledged = log.iter().filter(|[customer, _]| customer.0 == 201).count();
    assert!(
        acknowledged > 5,
        "the cart wrote little: {} of {}",
        acknowledged,
        log.len()
    );

    // Assert: on the target, the feed from the source's cursor.
    let target = deployment.two.node().app();
    let (after, last_cursor) = read_to_the_end(target, &creds, Some(cursor.clone()), 9).await;
    eprintln!(
        "{}\nthe cart made {acknowledged} customers in {} tries; the watcher saw {} events of \
         the source; the target has {} after the cursor",
        moved.stdout,
        log.len(),
        seen.lock().unwrap().len(),
        after.len()
    );
    assert_rising(&after, "the target's feed from the source's cursor");
    assert!(
        after
            .first()
            .is_some_and(|event| sequence(event) > sequence(&before[14])),
        "the feed goes on after the cursor: {:?}",
        after.first()
    );
    // Every event the source gave, the same one (id, type, time, data), under its number.
    let on_target: BTreeMap<u64, &Value> =
        after.iter().map(|event| (sequence(event), event)).collect();
    let seen = seen.lock().unwrap().clone();
    assert!(seen.len() >= 25, "the watcher saw {} events", seen.len());
    for (number, event) in before[15..]
        .iter()
        .map(|e| (sequence(e), e))
        .chain(seen.iter().map(|(n, e)| (*n, e)))
    {
        assert_eq!(
            on_target.get(&number),
            Some(&event),
            "event {number} on the target"
        );
    }
    // From the start, the target gives what the source gave before the move.
    let (all, _) = read_to_the_end(target, &creds, None, 50).await;
    assert_eq!(
        all[..before.len()],
        before[..],
        "the target's oldest events are the source's"
    );
    assert_eq!(
        all[15..],
        after[..],
        "the cursor's page boundary is the same on both"
    );
    // Every acknowledged write has its one event.
    let mut told: BTreeMap<(String, i64), usize> = BTreeMap::new();
    for event in &all {
        let kind = event["type"].as_str().expect("a type").to_owned();
        let id = event["data"]["id"]
            .as_i64()
            .unwrap_or_else(|| panic!("no data.id: {event}"));
        *told.entry((kind, id)).or_default() += 1;
    }
    for [customer, order] in &log {
        for (kind, (status, id)) in [("customer.created", customer), ("order.created", order)] {
            if *status == 201 {
                let id = id.expect("an acknowledged create's id");
                assert_eq!(told.get(&(kind.to_owned(), id)), Some(&1), "{kind} {id}");
            }
        }
    }
    assert!(
        told.values().all(|&count| count == 1),
        "an event told twice: {told:?}"
    );

    // A new write on the target is numbered right after the highest moved event, which
    // its admin listener says it holds.
    let highest = sequence(all.last().expect("events"));
    let held = deployment.two.node().held(STORE_B).await;
    assert_eq!(held["last_event"], highest, "{held}");
    let [customer, _] = customer_and_order(&base, &creds, "after-", 0).await;
    assert_eq!(customer.0, 201, "the target takes writes");
    let (fresh, _) = read_to_the_end(target, &creds, Some(last_cursor), 10).await;
    let fresh: Vec<u64> = fresh.iter().map(sequence).collect();
    assert_eq!(
        fresh,
        [highest + 1, highest + 2],
        "customer.created and order.created"
    );
}

#[tokio::test]
async fn an_export_of_version_1_imports_and_its_webstores_events_start_at_1() {
    let dir = DataDir::new();
    let export = dir.sibling("v1.jsonl");
    let lines = [
        json!({"type": "header", "format": "boxsub-export", "version": 1, "webstore": STORE_B}),
        json!({
            "type": "customer", "id": 5, "webstore_id": STORE_B, "number": 1,
            "first_name": "Jana", "last_name": "Berg", "email": "jana@example.com",
            "delivery_service_id": 95,
            "address": {
                "address_1": null, "address_2": null, "suburb": null, "city": null,
                "postcode": null, "delivery_note": null, "home_phone": null,
                "mobile_phone": "+49 170 0000000", "work_phone": null
            },
            "password_hash": null
        }),
    ];
    let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
    std::fs::write(&export, text).unwrap();
    let mut cmd = boxsub_command();
    cmd.args(["import", "--input"])
        .arg(&export)
        .arg("--data-dir")
        .arg(&dir.data);
    let imported = run_to_exit(cmd, Duration::from_secs(60));
    assert!(
        imported.status.is_some_and(|s| s.success()),
        "{}\n{}",
        imported.stdout,
        imported.stderr
    );
    assert!(
        imported.stdout.contains("1 customers"),
        "{}",
        imported.stdout
    );

    let app = Launch::new().on(&dir).spawn().await;
    app.get_as("/v1/customers/5", &store_b())
        .await
        .assert_status(200);
    let (events, _) = read_to_the_end(&app, &store_b(), None, 10).await;
    assert!(events.is_empty(), "version 1 has no events: {events:?}");
    app.post_json_as(
        "/v1/orders",
        &json!({"customer_id": 5, "box_id": 300}),
        &store_b(),
    )
    .await
    .assert_status(201);
    let (events, _) = read_to_the_end(&app, &store_b(), None, 10).await;
    let numbers: Vec<u64> = events.iter().map(sequence).collect();
    assert_eq!(numbers, [1], "{events:?}");
    assert_eq!(events[0]["type"], "order.created");
}
