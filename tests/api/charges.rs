//! Charges: a frozen delivery is charged its frozen price once its date's `delivered_at`
//! passes, exactly once (not again after a restart, nor after an export and an import);
//! a withheld delivery is never charged; `PUT /v1/orders/{id}/deliveries/{date}` marks a
//! frozen delivery not delivered (the charge reversed) or delivered again (charged again),
//! refuses a date not yet locked and a malformed mark with every failing field named, and
//! another webstore's order is a 404; each change is a `delivery.updated` event.
//!
//! The catalogue locks today at the next minute and delivers at the same minute (store A
//! in UTC, its courier on every day), so the test waits for that minute (at most about
//! 75 s, plus the duty's few seconds).

use std::time::{Duration, Instant};

use jiff::civil::Date;
use serde_json::{json, Value};

use crate::helpers::{
    boxsub_command, customer_body, default_catalogue, id_of, run_to_exit, store_b, DataDir, Launch,
    TestApp,
};

const STOP: Duration = Duration::from_secs(10);

/// The default catalogue with store A in UTC, its courier on every day, and its dates
/// locking and delivered at `at` (HH:MM) on the day itself.
fn delivering_at(at: &str) -> Value {
    let mut catalogue = default_catalogue();
    let store = &mut catalogue["webstores"][0];
    store["time_zone"] = json!("UTC");
    store["cutoff"] = json!({"days_before": 0, "time": at});
    store["delivered_at"] = json!(at);
    for day in ["mon", "tue", "wed", "thu", "fri", "sat", "sun"] {
        store["delivery_services"][0][day] = json!(true);
    }
    catalogue
}

fn cents(amount: &Value) -> i64 {
    let text = amount.as_str().unwrap();
    let negative = text.starts_with('-');
    let (whole, fraction) = text.trim_start_matches('-').split_once('.').unwrap();
    let value = whole.parse::<i64>().unwrap() * 100 + fraction.parse::<i64>().unwrap();
    if negative {
        -value
    } else {
        value
    }
}

/// The customer's balance in cents and its whole ledger, checked to add up.
async fn balance_and_ledger(app: &TestApp, customer: i64) -> (i64, Vec<Value>) {
    let account = app.get(&format!("/v1/customers/{customer}/account")).await;
    account.assert_status(200);
    let ledger = app
        .get(&format!("/v1/customers/{customer}/transactions?limit=500"))
        .await;
    ledger.assert_status(200);
    let ledger = ledger.json()["transactions"].as_array().unwrap().clone();
    let balance = cents(&account.json()["balance"]);
    let sum: i64 = ledger.iter().map(|t| cents(&t["amount"])).sum();
    assert_eq!(
        balance, sum,
        "the balance is the sum of the ledger: {ledger:?}"
    );
    (balance, ledger)
}

/// The one delivery of `order` on `date`, as the order's deliveries list it.
async fn own_delivery(app: &TestApp, order: i64, date: Date) -> Value {
    let response = app
        .get(&format!(
            "/v1/orders/{order}/deliveries?from={date}&to={date}"
        ))
        .await;
    response.assert_status(200);
    let list = response.json();
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    list[0].clone()
}

fn run(args: &[&str], data_dir: &std::path::Path) {
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

/// The next minute at least 15 s away (UTC), today; and today.
async fn next_minute() -> (jiff::civil::DateTime, Date) {
    let mut now = jiff::Timestamp::now().to_zoned_datetime(jiff::tz::TimeZone::UTC);
    if now.hour() == 23 && now.minute() >= 58 {
        tokio::time::sleep(Duration::from_secs(130)).await;
        now = jiff::Timestamp::now().to_zoned_datetime(jiff::tz::TimeZone::UTC);
    }
    let mut at = now
        .with()
        .second(0)
        .subsec_nanosecond(0)
        .build()
        .unwrap()
        .checked_add(jiff::Span::new().minutes(1))
        .unwrap();
    if (&at - &now).get_seconds() < 15 {
        at = at.checked_add(jiff::Span::new().minutes(1)).unwrap();
    }
    (at.datetime(), now.date())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivered_delivery_is_charged_once_and_its_marks_reverse_and_charge_again() {
    // Arrange: an order delivered today, another skipped today, before the lock.
    let (at, today) = next_minute().await;
    let hh_mm = format!("{:02}:{:02}", at.hour(), at.minute());
    let dir = DataDir::with_catalogue(delivering_at(&hh_mm));
    let mut app = Launch::new().on(&dir).spawn().await;
    let customer = id_of(
        &app.create_customer_ok(&customer_body("charged@example.com"))
            .await,
    );
    let order_body = |box_id: u64| {
        json!({
            "customer_id": customer, "box_id": box_id, "frequency": "weekly",
            "start_date": today.to_string(), "week_days": [0, 1, 2, 3, 4, 5, 6],
        })
    };
    let order = id_of(&app.create_order_ok(&order_body(217)).await);
    let skipped = id_of(&app.create_order_ok(&order_body(218)).await);
    app.patch_json(
        &format!("/v1/orders/{skipped}"),
        &json!({"order": {"skipped_dates": [today.to_string()]}}),
    )
    .await
    .assert_status(200);
    let pending = own_delivery(&app, order, today).await;
    assert_eq!(pending["status"], "pending", "{pending}");
    assert_eq!(pending["locked"], false, "{pending}");
    let price = cents(&pending["price"]);
    assert!(price > 0, "{pending}");
    let mark = |id: i64, date: &str| format!("/v1/orders/{id}/deliveries/{date}");
    let not_yet = app
        .put_json(
            &mark(order, &today.to_string()),
            &json!({"delivery": {"status": "not_delivered"}}),
        )
        .await;
    not_yet.assert_status(422);
    assert!(
        not_yet.field_errors().contains_key("date"),
        "{}",
        not_yet.text()
    );

    // Act: the lock and delivered_at pass.
    let deadline = Instant::now() + Duration::from_secs(100);
    let (balance, ledger) = loop {
        let (balance, ledger) = balance_and_ledger(&app, customer).await;
        if !ledger.is_empty() {
            break (balance, ledger);
        }
        assert!(
            Instant::now() < deadline,
            "no charge within 100 s of {hh_mm}\n{}",
            app.stderr_tail()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };

    // Assert: one charge of minus the frozen price, of the order's delivery today.
    assert_eq!(
        ledger.len(),
        1,
        "one charge, the skipped order none: {ledger:?}"
    );
    let charge = &ledger[0];
    assert_eq!(charge["kind"], "charge", "{charge}");
    assert_eq!(cents(&charge["amount"]), -price, "{charge}");
    assert_eq!(charge["order_id"], order, "{charge}");
    assert_eq!(charge["date"], today.to_string(), "{charge}");
    assert_eq!(balance, -price);
    let delivered = own_delivery(&app, order, today).await;
    assert_eq!(delivered["status"], "delivered", "{delivered}");
    assert_eq!(delivered["locked"], true, "{delivered}");
    assert_eq!(
        cents(&delivered["price"]),
        price,
        "the price frozen as it was"
    );
    let listed = app
        .get(&format!("/v1/deliveries?date={today}&per_page=1000"))
        .await
        .json();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["status"], "delivered", "{listed}");
    assert_eq!(cents(&listed[0]["price"]), price, "{listed}");
    let customer_view = app.get(&format!("/v1/customers/{customer}")).await.json();
    assert_eq!(cents(&customer_view["account_balance"]), -price);

    // Marks: not delivered reverses the charge, once; delivered again charges again.
    let reversed = app
        .put_json(
            &mark(order, &today.to_string()),
            &json!({"delivery": {"status": "not_delivered", "note": "Gate locked"}}),
        )
        .await;
    reversed.assert_status(200);
    let reversed = reversed.json();
    assert_eq!(reversed["status"], "not_delivered", "{reversed}");
    assert_eq!(reversed["note"], "Gate locked", "{reversed}");
    assert_eq!(
        reversed["transaction"]["kind"], "charge_reversal",
        "{reversed}"
    );
    assert_eq!(
        cents(&reversed["transaction"]["amount"]),
        price,
        "{reversed}"
    );
    assert_eq!(balance_and_ledger(&app, customer).await.0, 0);
    let again = app
        .put_json(
            &mark(order, &today.to_string()),
            &json!({"status": "not_delivered"}),
        )
        .await;
    again.assert_status(200);
    assert_eq!(
        again.json()["transaction"],
        Value::Null,
        "a mark in force posts nothing"
    );
    assert_eq!(
        own_delivery(&app, order, today).await["status"],
        "not_delivered"
    );
    let recharged = app
        .put_json(
            &mark(order, &today.to_string()),
            &json!({"delivery": {"status": "delivered"}}),
        )
        .await;
    recharged.assert_status(200);
    assert_eq!(recharged.json()["transaction"]["kind"], "charge");
    let (balance, ledger) = balance_and_ledger(&app, customer).await;
    assert_eq!(balance, -price);
    assert_eq!(ledger.len(), 3, "{ledger:?}");

    // Refusals: every failing field named, nothing changed.
    let bad = app
        .put_json(
            &mark(order, &today.to_string()),
            &json!({"delivery": {"status": "lost", "colour": "red"}}),
        )
        .await;
    bad.assert_status(422);
    let errors = bad.field_errors();
    assert!(
        errors.contains_key("status") && errors.contains_key("colour"),
        "{errors:?}"
    );
    let bad_date = app
        .put_json(&mark(order, "2026-13-40"), &json!({"status": "delivered"}))
        .await;
    bad_date.assert_status(422);
    assert!(bad_date.field_errors().contains_key("date"));
    let tomorrow = today.tomorrow().unwrap().to_string();
    let unlocked = app
        .put_json(&mark(order, &tomorrow), &json!({"status": "delivered"}))
        .await;
    unlocked.assert_status(422);
    assert!(unlocked.field_errors().contains_key("date"));
    let withheld = app
        .put_json(
            &mark(skipped, &today.to_string()),
            &json!({"status": "delivered"}),
        )
        .await;
    withheld.assert_status(422);
    assert!(
        withheld.field_errors().contains_key("date"),
        "{}",
        withheld.text()
    );
    let theirs = app
        .send(
            reqwest::Method::PUT,
            &mark(order, &today.to_string()),
            Some(&store_b()),
            Some(br#"{"status": "not_delivered"}"#.to_vec()),
            &[("Content-Type", "application/json")],
        )
        .await;
    theirs.assert_status(404);
    assert_eq!(
        balance_and_ledger(&app, customer).await,
        (balance, ledger.clone())
    );

    // Events: the charge and the two marks that changed something.
    let events = app.get("/v1/events?type=delivery.updated").await;
    events.assert_status(200);
    let statuses: Vec<Value> = events.json()["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|event| event["data"]["status"].clone())
        .collect();
    assert_eq!(
        statuses,
        vec![
            json!("delivered"),
            json!("not_delivered"),
            json!("delivered")
        ]
    );

    // A restart charges nothing again (the duty runs at start and every 5 s).
    app.terminate_ok(STOP);
    drop(app);
    let mut app = Launch::new().on(&dir).spawn().await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(
        balance_and_ledger(&app, customer).await,
        (balance, ledger.clone()),
        "after a restart"
    );
    let delivered = own_delivery(&app, order, today).await;
    app.terminate_ok(STOP);
    drop(app);

    // Nor does an import of an export, which keeps the statuses and what was charged.
    let export = dir.sibling("export.jsonl");
    run(&["export", "--output", export.to_str().unwrap()], &dir.data);
    let target = DataDir::with_catalogue(delivering_at(&hh_mm));
    run(
        &["import", "--input", export.to_str().unwrap()],
        &target.data,
    );
    let app = Launch::new().on(&target).spawn().await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(
        balance_and_ledger(&app, customer).await,
        (balance, ledger),
        "after an import"
    );
    assert_eq!(own_delivery(&app, order, today).await, delivered);
    let books = app.get(&format!("/v1/transactions?from={today}")).await;
    books.assert_status(200);
    let kinds: Vec<Value> = books
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|transaction| transaction["kind"].clone())
        .collect();
    assert_eq!(
        kinds,
        vec![json!("charge"), json!("charge_reversal"), json!("charge")],
        "the books imported with the ledger"
    );
}
