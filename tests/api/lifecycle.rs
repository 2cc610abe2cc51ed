//! Subscriptions that live (issue 49): `PATCH /v1/orders/{id}` (pauses, skips, changes of
//! box, cancellation), halted customers, their refusals (every failing field in one 422,
//! a locked date with the earliest date it can take effect, another webstore's order a 404,
//! nothing changed by a refusal), idempotency, the `order.updated` and `customer.updated`
//! events, and the history kept across a kill -9 and through export and import.
//!
//! The dates are relative to now in the webstore's zone (London) and its default cut-off
//! (18:00 three days before a date): a date up to two days ahead is always locked, one five
//! or more days ahead always open.

use std::path::Path;
use std::time::Duration;

use jiff::civil::Date;
use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{
    boxsub_command, customer_body, id_of, run_to_exit, spawn_app, store_b, DataDir, Launch,
    TestApp, TestResponse,
};

/// Today in the test webstore's zone.
fn today() -> Date {
    jiff::Timestamp::now()
        .to_zoned_datetime(jiff::tz::TimeZone::get("Europe/London").unwrap())
        .date()
}

/// The first date on or after `from` that is a `weekday` (Monday = 1 … Sunday = 7).
fn next(from: Date, weekday: i8) -> Date {
    (0..7)
        .map(|n| from.checked_add(jiff::Span::new().days(n)).unwrap())
        .find(|d| d.weekday().to_monday_one_offset() == weekday)
        .unwrap()
}

fn plus(d: Date, days: i64) -> Date {
    d.checked_add(jiff::Span::new().days(days)).unwrap()
}

/// A customer of store A (courier 91: Mondays and Thursdays) with a weekly order on both
/// days that started three weeks ago; (customer id, order).
async fn subscribed(app: &TestApp, email: &str) -> (i64, Value) {
    let customer = id_of(&app.create_customer_ok(&customer_body(email)).await);
    let start = next(plus(today(), -21), 1);
    let order = app
        .create_order_ok(&json!({
            "customer_id": customer, "box_id": 217, "frequency": "weekly",
            "start_date": start.to_string(), "week_days": [1, 4],
            "extras": [{"id": 28, "quantity": 1}],
        }))
        .await;
    (customer, order)
}

async fn patch_order(app: &TestApp, id: i64, change: Value, key: Option<&str>) -> TestResponse {
    let body = serde_json::to_vec(&json!({ "order": change })).unwrap();
    let mut headers = vec![("Content-Type", "application/json")];
    if let Some(key) = key {
        headers.push(("Idempotency-Key", key));
    }
    app.send(
        Method::PATCH,
        &format!("/v1/orders/{id}"),
        Some(&app.creds),
        Some(body),
        &headers,
    )
    .await
}

async fn get_order(app: &TestApp, id: i64) -> Value {
    let response = app.get(&format!("/v1/orders/{id}")).await;
    response.assert_status(200);
    response.json()
}

/// The `order.updated` events of the webstore, oldest first.
async fn order_events(app: &TestApp, kind: &str) -> Vec<Value> {
    let response = app.get(&format!("/v1/events?type={kind}&limit=100")).await;
    response.assert_status(200);
    let page = response.json();
    page["events"]
        .as_array()
        .or_else(|| page.as_array())
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn each_refusal_names_its_fields_and_changes_nothing() {
    let app = spawn_app().await;
    let (_, order) = subscribed(&app, "refused@example.com").await;
    let id = id_of(&order);
    let before = get_order(&app, id).await;
    assert_eq!(before["active"], true);
    assert_eq!(before["skipped_dates"], json!([]));
    assert_eq!(before["pause_date"], Value::Null);
    assert_eq!(before["updated_at"], before["created_at"]);

    // Read-only and unknown fields, a resume before its pause, a date not in the
    // schedule: all in one 422.
    let thursday = next(plus(today(), 7), 4);
    let tuesday = next(plus(today(), 7), 2);
    let response = patch_order(
        &app,
        id,
        json!({
            "id": 5, "created_at": "x", "colour": "red",
            "pause_date": thursday.to_string(),
            "resume_date": plus(thursday, -7).to_string(),
            "skipped_dates": [plus(thursday, 7).to_string(), tuesday.to_string()],
        }),
        None,
    )
    .await;
    let errors = response.field_errors();
    let mut named: Vec<&str> = errors.keys().map(String::as_str).collect();
    named.sort_unstable();
    assert_eq!(
        named,
        [
            "colour",
            "created_at",
            "id",
            "resume_date",
            "skipped_dates[1]"
        ]
    );
    assert_eq!(errors["id"], json!(["is read-only"]));
    assert_eq!(errors["resume_date"], json!(["must be after pause_date"]));
    assert_eq!(
        errors["skipped_dates[1]"],
        json!(["is not a delivery date of the order"])
    );

    // More than 100 skipped dates.
    let many: Vec<String> = (0..101)
        .map(|n| plus(next(plus(today(), 7), 1), 7 * n).to_string())
        .collect();
    patch_order(&app, id, json!({ "skipped_dates": many }), None)
        .await
        .assert_field_error("skipped_dates", "has too many dates (maximum is 100)");

    // A pause from a date already locked for packing: the earliest date it could take
    // effect is named, and it is the first date not locked (three or four days ahead).
    let locked = plus(today(), 1);
    let response = patch_order(&app, id, json!({ "pause_date": locked.to_string() }), None).await;
    let messages = response.messages_for("pause_date");
    let earliest: Date = messages[0]
        .rsplit(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap_or_else(|_| panic!("no date in {messages:?}"));
    assert!(
        (plus(today(), 3)..=plus(today(), 4)).contains(&earliest),
        "{messages:?}"
    );
    assert!(messages[0].contains("locked"), "{messages:?}");

    // Another webstore's order is as absent as none, and so is an unknown one.
    let foreign = app
        .send(
            Method::PATCH,
            &format!("/v1/orders/{id}"),
            Some(&store_b()),
            Some(br#"{"order":{"active":false}}"#.to_vec()),
            &[("Content-Type", "application/json")],
        )
        .await;
    foreign.assert_not_found();
    patch_order(&app, id + 1000, json!({ "active": false }), None)
        .await
        .assert_not_found();

    // Nothing changed, and no event was made.
    assert_eq!(get_order(&app, id).await, before);
    assert!(order_events(&app, "order.updated").await.is_empty());
}

#[tokio::test]
async fn changes_are_answered_replayed_and_told_as_events() {
    let app = spawn_app().await;
    let (customer, order) = subscribed(&app, "changes@example.com").await;
    let id = id_of(&order);
    let pause = next(plus(today(), 7), 4);
    let resume = plus(pause, 14);

    // A pause, with an idempotency key.
    let change = json!({ "pause_date": pause.to_string(), "resume_date": resume.to_string() });
    let first = patch_order(&app, id, change.clone(), Some("pause-1")).await;
    first.assert_status(200);
    assert_eq!(
        first.header("location").as_deref(),
        Some(format!("/v1/orders/{id}").as_str())
    );
    let paused = first.json();
    assert_eq!(paused["pause_date"], pause.to_string());
    assert_eq!(paused["resume_date"], resume.to_string());
    assert_eq!(paused["active"], true);
    assert_eq!(paused["box_id"], 217);

    // The same key and body: the first answer again, and no second change.
    let again = patch_order(&app, id, change, Some("pause-1")).await;
    again.assert_status(200);
    assert_eq!(again.header("idempotent-replayed").as_deref(), Some("true"));
    assert_eq!(again.json(), paused);
    // The same key with another body is refused.
    patch_order(&app, id, json!({ "pause_date": null }), Some("pause-1"))
        .await
        .assert_has_error("idempotency_key");
    // The same key and body on another order is another request: refused, that order
    // untouched (not the first order's answer replayed).
    let (_, other) = subscribed(&app, "changes-other@example.com").await;
    let other_id = id_of(&other);
    let before = get_order(&app, other_id).await;
    patch_order(
        &app,
        other_id,
        json!({ "pause_date": pause.to_string(), "resume_date": resume.to_string() }),
        Some("pause-1"),
    )
    .await
    .assert_has_error("idempotency_key");
    assert_eq!(get_order(&app, other_id).await, before);

    // A skipped date (a Monday after the pause), then the same list again: no change.
    let skipped = next(plus(resume, 1), 1);
    let skip = json!({ "skipped_dates": [skipped.to_string()] });
    let after_skip = patch_order(&app, id, skip.clone(), None).await;
    after_skip.assert_status(200);
    assert_eq!(
        after_skip.json()["skipped_dates"],
        json!([skipped.to_string()])
    );
    patch_order(&app, id, skip, None).await.assert_status(200);

    // A later box from a date on: the answer shows the latest.
    let swap = patch_order(
        &app,
        id,
        json!({ "box_id": 218, "extras": [], "effective_date": plus(skipped, 7).to_string() }),
        None,
    )
    .await;
    swap.assert_status(200);
    let swapped = swap.json();
    assert_eq!(swapped["box_id"], 218);
    assert_eq!(get_order(&app, id).await, swapped);

    // Three changes, three events, each the order as GET answered it after the change.
    let events = order_events(&app, "order.updated").await;
    assert_eq!(events.len(), 3, "{events:?}");
    assert_eq!(events[0]["data"], paused);
    assert_eq!(events[2]["data"], swapped);

    // Halting the customer: halted? says so, and a customer.updated event tells it.
    let halted = app
        .patch_json(
            &format!("/v1/customers/{customer}"),
            &json!({"customer": {"halted": true}}),
        )
        .await;
    halted.assert_status(200);
    assert_eq!(halted.json()["halted?"], true);
    let customer_events = order_events(&app, "customer.updated").await;
    assert_eq!(customer_events.last().unwrap()["data"]["halted?"], true);
    app.patch_json(
        &format!("/v1/customers/{customer}"),
        &json!({"halted": "maybe"}),
    )
    .await
    .assert_field_error("halted", "must be true or false");

    // Cancelling: from the first delivery date after the cut-off by default.
    let cancelled = patch_order(&app, id, json!({ "active": false }), None).await;
    cancelled.assert_status(200);
    let cancelled = cancelled.json();
    assert_eq!(cancelled["active"], false);
    let cancel_date: Date = cancelled["cancel_date"].as_str().unwrap().parse().unwrap();
    assert!(cancel_date >= plus(today(), 3) && cancel_date <= plus(today(), 11));
    assert!([1, 4].contains(&cancel_date.weekday().to_monday_one_offset()));
}

fn run(args: &[&str], data_dir: &Path) {
    let mut cmd = boxsub_command();
    cmd.args(args).arg("--data-dir").arg(data_dir);
    let finished = run_to_exit(cmd, Duration::from_secs(60));
    assert!(
        finished.status.is_some_and(|status| status.success()),
        "{args:?}: {:?}\n{}",
        finished.status,
        finished.stderr
    );
}

#[tokio::test]
async fn the_history_survives_a_kill_and_travels_through_export_and_import() {
    let source = DataDir::new();
    let app = Launch::new().on(&source).spawn().await;
    let (customer, order) = subscribed(&app, "travels@example.com").await;
    let id = id_of(&order);
    let pause = next(plus(today(), 7), 1);
    patch_order(&app, id, json!({ "pause_date": pause.to_string() }), None)
        .await
        .assert_status(200);
    let changed = patch_order(
        &app,
        id,
        json!({ "exclusions": [240], "effective_date": plus(pause, 21).to_string() }),
        None,
    )
    .await;
    changed.assert_status(200);
    let changed = changed.json();
    app.patch_json(
        &format!("/v1/customers/{customer}"),
        &json!({"halted": true}),
    )
    .await
    .assert_status(200);
    // Another customer's order, paused from the same date: the delivery lists leave it out
    // from then on, as they did before the kill, after a restart rebuilds them from the
    // store and after an import.
    let (_, other) = subscribed(&app, "paused-too@example.com").await;
    let other = id_of(&other);
    patch_order(
        &app,
        other,
        json!({ "pause_date": pause.to_string() }),
        None,
    )
    .await
    .assert_status(200);
    let dates = (plus(pause, -7), pause);
    assert_eq!(
        listed_on(&app, other, dates).await,
        (true, false),
        "before the kill"
    );
    let mut app = app;
    app.crash();
    drop(app);

    let app = Launch::new().on(&source).spawn().await;
    assert_eq!(get_order(&app, id).await, changed, "after kill -9");
    let customer_after = app.get(&format!("/v1/customers/{customer}")).await.json();
    assert_eq!(customer_after["halted?"], true);
    assert_eq!(
        listed_on(&app, other, dates).await,
        (true, false),
        "after kill -9"
    );
    drop(app);

    let export = source.sibling("export.jsonl");
    run(
        &["export", "--output", export.to_str().unwrap()],
        &source.data,
    );
    let target = DataDir::new();
    run(
        &["import", "--input", export.to_str().unwrap()],
        &target.data,
    );
    let app = Launch::new().on(&target).spawn().await;
    assert_eq!(
        get_order(&app, id).await,
        changed,
        "after export and import"
    );
    let customer_after = app.get(&format!("/v1/customers/{customer}")).await.json();
    assert_eq!(customer_after["halted?"], true);
    assert_eq!(
        listed_on(&app, other, dates).await,
        (true, false),
        "after export and import"
    );
}

/// Whether `order` is on the delivery list of each of `dates`.
async fn listed_on(app: &TestApp, order: i64, dates: (Date, Date)) -> (bool, bool) {
    (
        listed(app, dates.0).await.contains(&order),
        listed(app, dates.1).await.contains(&order),
    )
}

/// The ids of the orders on the webstore's delivery list of `date` (one page of up to
/// 1,000), which `X-Total-Count` counts exactly: the list was sorted without what is
/// withheld that day.
async fn listed(app: &TestApp, date: Date) -> Vec<i64> {
    let response = app
        .get(&format!("/v1/deliveries?date={date}&per_page=1000"))
        .await;
    response.assert_status(200);
    let ids: Vec<i64> = response
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|delivery| delivery["order_id"].as_i64().unwrap())
        .collect();
    assert_eq!(
        response.header("x-total-count"),
        Some(ids.len().to_string()),
        "the total of {date} counts what is listed"
    );
    ids
}

#[tokio::test]
async fn deliveries_follow_the_history_and_a_locked_date_never_changes() {
    let app = spawn_app().await;
    let (customer, order) = subscribed(&app, "deliveries@example.com").await;
    let id = id_of(&order);
    // A delivery date already locked (a Monday or Thursday of the last week: one before the
    // server first froze a date, today, so answered from the histories; the frozen ones
    // have tests of their own, tests/api/frozen_lists.rs), and open ones.
    let locked = (1..8)
        .map(|n| plus(today(), -n))
        .find(|d| [1, 4].contains(&d.weekday().to_monday_one_offset()))
        .unwrap();
    let skipped = next(plus(today(), 7), 4);
    let after = next(plus(skipped, 1), 1);
    let locked_list = app
        .get(&format!("/v1/deliveries?date={locked}"))
        .await
        .json();
    assert!(listed(&app, locked).await.contains(&id));
    assert!(listed(&app, skipped).await.contains(&id));

    // The order's own deliveries: the locked date is locked, an open one is not.
    let path = format!("/v1/orders/{id}/deliveries?from={locked}&to={after}");
    let own = app.get(&path).await;
    own.assert_status(200);
    let own = own.json();
    let dates: Vec<&str> = own
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["date"].as_str().unwrap())
        .collect();
    assert_eq!(dates.first(), Some(&locked.to_string().as_str()));
    assert!(dates.contains(&skipped.to_string().as_str()));
    assert_eq!(own[0]["locked"], true);
    assert_eq!(own[0]["box_id"], 217);
    assert_eq!(own.as_array().unwrap().last().unwrap()["locked"], false);

    // A skip, a halt and a cancellation later: the locked date's list is the same.
    patch_order(
        &app,
        id,
        json!({ "skipped_dates": [skipped.to_string()] }),
        None,
    )
    .await
    .assert_status(200);
    assert!(!listed(&app, skipped).await.contains(&id), "skipped");
    assert!(listed(&app, after).await.contains(&id));
    app.patch_json(
        &format!("/v1/customers/{customer}"),
        &json!({"halted": true}),
    )
    .await
    .assert_status(200);
    assert!(!listed(&app, after).await.contains(&id), "halted");
    let own = app.get(&path).await.json();
    assert_eq!(own[0]["date"], locked.to_string(), "the locked date stays");
    assert!(own
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d["date"].as_str().unwrap() < plus(today(), 3).to_string().as_str()));
    patch_order(&app, id, json!({ "active": false }), None)
        .await
        .assert_status(200);
    assert_eq!(
        app.get(&format!("/v1/deliveries?date={locked}"))
            .await
            .json(),
        locked_list,
        "a locked date's list never changes"
    );

    // The range's refusals, and another webstore's order.
    let refused = |query: String| {
        let app = &app;
        async move {
            app.get(&format!("/v1/orders/{id}/deliveries?{query}"))
                .await
        }
    };
    refused(format!("from={after}&to={locked}"))
        .await
        .assert_has_error("to");
    refused(format!("from={locked}&to={}", plus(locked, 400)))
        .await
        .assert_has_error("to");
    refused("from=someday".into())
        .await
        .assert_has_error("from");
    app.get_as(&format!("/v1/orders/{id}/deliveries"), &store_b())
        .await
        .assert_not_found();
}
