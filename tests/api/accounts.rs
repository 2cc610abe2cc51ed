//! Each customer's account over HTTP: a payment recorded once with its key (refused without
//! one, 428, nothing changed), amounts read exactly and every failing field named, a
//! reversal made once, adjustments, the ledger paged with its balance the sum of its
//! transactions, the customer's answers telling the balance, another webstore's customer or
//! payment a 404, and all of it still there after a restart.

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{customer_body, id_of, store_b, DataDir, Launch, TestApp, TestResponse};

/// POSTs `body` to `path` with `Idempotency-Key: key` (none for `None`).
async fn post_money(app: &TestApp, path: &str, body: &Value, key: Option<&str>) -> TestResponse {
    let mut headers = vec![("Content-Type", "application/json")];
    headers.extend(key.map(|key| ("Idempotency-Key", key)));
    app.send(
        Method::POST,
        path,
        Some(&app.creds),
        Some(serde_json::to_vec(body).unwrap()),
        &headers,
    )
    .await
}

/// The customer's account and its whole ledger.
async fn account_and_ledger(app: &TestApp, customer: i64) -> (Value, Vec<Value>) {
    let account = app.get(&format!("/v1/customers/{customer}/account")).await;
    account.assert_status(200);
    let ledger = app
        .get(&format!("/v1/customers/{customer}/transactions?limit=500"))
        .await;
    ledger.assert_status(200);
    let ledger = ledger.json();
    assert_eq!(ledger["has_more"], false, "{ledger}");
    (
        account.json(),
        ledger["transactions"].as_array().unwrap().clone(),
    )
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

/// The balance is the sum of the ledger's amounts, and each transaction's `balance` the
/// running sum, numbered from 1.
#[track_caller]
fn assert_ledger_adds_up(account: &Value, ledger: &[Value]) {
    let mut running = 0;
    for (n, transaction) in ledger.iter().enumerate() {
        running += cents(&transaction["amount"]);
        assert_eq!(cents(&transaction["balance"]), running, "{transaction}");
        assert_eq!(transaction["number"], n as u64 + 1, "{transaction}");
    }
    assert_eq!(cents(&account["balance"]), running, "{account}");
}

#[tokio::test]
async fn a_payment_is_recorded_once_with_its_key_and_refused_without_one() {
    // Arrange
    let dir = DataDir::new();
    let app = Launch::new().on(&dir).spawn().await;
    let customer = id_of(
        &app.create_customer_ok(&customer_body("pays@example.com"))
            .await,
    );
    let path = format!("/v1/customers/{customer}/payments");
    let body = json!({"payment": {"amount": "25.00", "method": "cash",
                                  "description": "At the door"}});

    // Act
    let keyless = post_money(&app, &path, &body, None).await;
    let first = post_money(&app, &path, &body, Some("pay-1")).await;
    let again = post_money(&app, &path, &body, Some("pay-1")).await;
    let other_body = post_money(
        &app,
        &path,
        &json!({"payment": {"amount": "30.00"}}),
        Some("pay-1"),
    )
    .await;

    // Assert
    keyless.assert_status(428);
    assert!(
        keyless.json()["message"]
            .as_str()
            .unwrap()
            .contains("Idempotency-Key"),
        "{}",
        keyless.text()
    );
    first.assert_status(201);
    let payment = first.json();
    assert_eq!(payment["amount"], "25.00", "{payment}");
    assert_eq!(payment["method"], "cash");
    assert_eq!(payment["reversed"], false);
    let id = payment["id"].as_u64().unwrap();
    assert_eq!(first.header("location"), Some(format!("/v1/payments/{id}")));
    again.assert_status(201);
    assert_eq!(again.header("idempotent-replayed").as_deref(), Some("true"));
    assert_eq!(again.json(), payment, "the first answer again");
    other_body.assert_status(422);
    assert!(other_body.json()["errors"]["idempotency_key"].is_array());
    let (account, ledger) = account_and_ledger(&app, customer).await;
    assert_eq!(
        account["balance"], "25.00",
        "one payment, not two: {account}"
    );
    assert_eq!(ledger.len(), 1);
    assert_eq!(ledger[0]["kind"], "payment");
    assert_eq!(ledger[0]["payment_id"], id);
    assert_ledger_adds_up(&account, &ledger);
    let read = app.get(&format!("/v1/payments/{id}")).await;
    read.assert_status(200);
    assert_eq!(read.json(), payment);
    let listed = app.get(&path).await;
    listed.assert_status(200);
    assert_eq!(listed.json(), json!([payment]));
    let shown = app.get(&format!("/v1/customers/{customer}")).await.json();
    assert_eq!(shown["account_balance"], "25.00", "{shown}");

    // And after a restart, the same.
    drop(app);
    let app = Launch::new().on(&dir).spawn().await;
    let (after, ledger_after) = account_and_ledger(&app, customer).await;
    assert_eq!(after["balance"], "25.00");
    assert_eq!(ledger_after, ledger);
    let replay = post_money(&app, &path, &body, Some("pay-1")).await;
    replay.assert_status(201);
    assert_eq!(
        replay.header("idempotent-replayed").as_deref(),
        Some("true")
    );
}

#[tokio::test]
async fn money_is_read_exactly_and_every_failing_field_is_named_with_nothing_changed() {
    // Arrange
    let app = Launch::new().spawn().await;
    let customer = id_of(
        &app.create_customer_ok(&customer_body("exact@example.com"))
            .await,
    );
    let payments = format!("/v1/customers/{customer}/payments");
    let adjustments = format!("/v1/customers/{customer}/adjustments");

    // Act
    let all_wrong = post_money(
        &app,
        &payments,
        &json!({"payment": {"amount": 2.675, "method": "cheque", "date": "2026-13-01",
                            "tip": "1.00"}}),
        Some("bad-1"),
    )
    .await;
    let zero = post_money(&app, &payments, &json!({"amount": "0.00"}), Some("bad-2")).await;
    let as_number = post_money(&app, &payments, &json!({"amount": 12.5}), Some("ok-1")).await;
    let no_description = post_money(
        &app,
        &adjustments,
        &json!({"adjustment": {"amount": "0"}}),
        Some("bad-3"),
    )
    .await;
    let debit = post_money(
        &app,
        &adjustments,
        &json!({"adjustment": {"amount": "-2.50", "description": "Damaged box credit taken back"}}),
        Some("ok-2"),
    )
    .await;

    // Assert
    all_wrong.assert_status(422);
    let errors = &all_wrong.json()["errors"];
    for field in ["amount", "method", "date", "tip"] {
        assert!(errors[field].is_array(), "{field} named: {errors}");
    }
    assert_eq!(errors["amount"], json!(["is invalid"]), "{errors}");
    zero.assert_status(422);
    assert_eq!(
        zero.json()["errors"]["amount"],
        json!(["must be greater than 0"])
    );
    as_number.assert_status(201);
    assert_eq!(as_number.json()["amount"], "12.50");
    no_description.assert_status(422);
    let errors = &no_description.json()["errors"];
    assert!(
        errors["amount"].is_array() && errors["description"].is_array(),
        "{errors}"
    );
    debit.assert_status(201);
    assert_eq!(debit.json()["kind"], "adjustment");
    assert_eq!(debit.json()["amount"], "-2.50");
    let (account, ledger) = account_and_ledger(&app, customer).await;
    assert_eq!(
        account["balance"], "10.00",
        "only the two accepted: {account}"
    );
    assert_eq!(ledger.len(), 2);
    assert_ledger_adds_up(&account, &ledger);
}

#[tokio::test]
async fn a_payment_is_reversed_once_and_the_balance_follows() {
    // Arrange
    let app = Launch::new().spawn().await;
    let customer = id_of(
        &app.create_customer_ok(&customer_body("reverse@example.com"))
            .await,
    );
    let paid = post_money(
        &app,
        &format!("/v1/customers/{customer}/payments"),
        &json!({"amount": "40.00", "method": "bank_transfer", "reference": "TX-1"}),
        Some("pay"),
    )
    .await;
    paid.assert_status(201);
    let id = paid.json()["id"].as_u64().unwrap();
    let reversal = format!("/v1/payments/{id}/reversal");

    // Act
    let keyless = post_money(&app, &reversal, &json!({}), None).await;
    let reversed = post_money(&app, &reversal, &json!({}), Some("rev-1")).await;
    let replayed = post_money(&app, &reversal, &json!({}), Some("rev-1")).await;
    let twice = post_money(&app, &reversal, &json!({}), Some("rev-2")).await;

    // Assert
    keyless.assert_status(428);
    reversed.assert_status(200);
    let payment = reversed.json();
    assert_eq!(payment["reversed"], true, "{payment}");
    assert!(payment["reversal_transaction_id"].is_u64(), "{payment}");
    replayed.assert_status(200);
    assert_eq!(
        replayed.header("idempotent-replayed").as_deref(),
        Some("true")
    );
    twice.assert_status(422);
    assert_eq!(
        twice.json()["errors"]["payment"],
        json!(["has already been reversed"])
    );
    let (account, ledger) = account_and_ledger(&app, customer).await;
    assert_eq!(account["balance"], "0.00", "{account}");
    let kinds: Vec<_> = ledger.iter().map(|t| t["kind"].clone()).collect();
    assert_eq!(kinds, vec![json!("payment"), json!("payment_reversal")]);
    assert_ledger_adds_up(&account, &ledger);
    assert_eq!(app.get(&format!("/v1/payments/{id}")).await.json(), payment);
}

#[tokio::test]
async fn the_ledger_pages_oldest_first_and_adds_up() {
    // Arrange
    let app = Launch::new().spawn().await;
    let customer = id_of(
        &app.create_customer_ok(&customer_body("pages@example.com"))
            .await,
    );
    for n in 1..=7 {
        post_money(
            &app,
            &format!("/v1/customers/{customer}/adjustments"),
            &json!({"amount": format!("{n}.0{n}"), "description": format!("Credit {n}")}),
            Some(&format!("adj-{n}")),
        )
        .await
        .assert_status(201);
    }

    // Act
    let mut seen = Vec::new();
    let mut after = 0;
    let mut pages = 0;
    loop {
        pages += 1;
        assert!(pages <= 10, "the pages end");
        let page = app
            .get(&format!(
                "/v1/customers/{customer}/transactions?after={after}&limit=3"
            ))
            .await;
        page.assert_status(200);
        let page = page.json();
        seen.extend(page["transactions"].as_array().unwrap().iter().cloned());
        after = page["next"].as_u64().unwrap();
        if page["has_more"] == false {
            break;
        }
    }
    let bad = app
        .get(&format!(
            "/v1/customers/{customer}/transactions?limit=0&after=x"
        ))
        .await;

    // Assert
    assert_eq!(pages, 3);
    let account = app
        .get(&format!("/v1/customers/{customer}/account"))
        .await
        .json();
    assert_eq!(
        account["balance"], "28.28",
        "1.01 + 2.02 + ... + 7.07: {account}"
    );
    assert_ledger_adds_up(&account, &seen);
    bad.assert_status(422);
    let errors = &bad.json()["errors"];
    assert!(
        errors["limit"].is_array() && errors["after"].is_array(),
        "{errors}"
    );
    let empty = app
        .get(&format!("/v1/customers/{customer}/transactions?after="))
        .await;
    empty.assert_status(422);
    assert!(empty.json()["errors"]["after"].is_array());
}

#[tokio::test]
async fn another_webstore_s_customer_or_payment_is_as_absent_as_none() {
    // Arrange
    let app = Launch::new().spawn().await;
    let customer = id_of(
        &app.create_customer_ok(&customer_body("mine@example.com"))
            .await,
    );
    let paid = post_money(
        &app,
        &format!("/v1/customers/{customer}/payments"),
        &json!({"amount": "5.00"}),
        Some("mine"),
    )
    .await;
    let id = paid.json()["id"].as_u64().unwrap();
    let b = store_b();
    let as_b = |method: Method, path: String, body: &'static [u8]| {
        let app = &app;
        let b = &b;
        async move {
            app.send(
                method,
                &path,
                Some(b),
                Some(body.to_vec()),
                &[
                    ("Content-Type", "application/json"),
                    ("Idempotency-Key", "theirs"),
                ],
            )
            .await
        }
    };
    let payment = br#"{"amount": "1.00"}"#;
    let adjustment = br#"{"amount": "1.00", "description": "theirs"}"#;

    // Act
    let answers = [
        as_b(
            Method::GET,
            format!("/v1/customers/{customer}/account"),
            b"",
        )
        .await,
        as_b(
            Method::GET,
            format!("/v1/customers/{customer}/transactions"),
            b"",
        )
        .await,
        as_b(
            Method::GET,
            format!("/v1/customers/{customer}/payments"),
            b"",
        )
        .await,
        as_b(
            Method::POST,
            format!("/v1/customers/{customer}/payments"),
            payment,
        )
        .await,
        as_b(
            Method::POST,
            format!("/v1/customers/{customer}/adjustments"),
            adjustment,
        )
        .await,
        as_b(Method::GET, format!("/v1/payments/{id}"), b"").await,
        as_b(Method::POST, format!("/v1/payments/{id}/reversal"), b"{}").await,
    ];

    // Assert
    for answer in &answers {
        answer.assert_status(404);
    }
    let account = app
        .get(&format!("/v1/customers/{customer}/account"))
        .await
        .json();
    assert_eq!(account["balance"], "5.00", "nothing changed: {account}");
}

#[tokio::test]
async fn every_money_write_makes_its_event_with_what_it_answered() {
    // Arrange
    let app = Launch::new().spawn().await;
    let customer = id_of(
        &app.create_customer_ok(&customer_body("events@example.com"))
            .await,
    );
    let paid = post_money(
        &app,
        &format!("/v1/customers/{customer}/payments"),
        &json!({"amount": "9.99"}),
        Some("e-pay"),
    )
    .await
    .json();
    let id = paid["id"].as_u64().unwrap();
    let reversed = post_money(
        &app,
        &format!("/v1/payments/{id}/reversal"),
        &json!({}),
        Some("e-rev"),
    )
    .await
    .json();
    let adjusted = post_money(
        &app,
        &format!("/v1/customers/{customer}/adjustments"),
        &json!({"amount": "1.00", "description": "Goodwill"}),
        Some("e-adj"),
    )
    .await
    .json();
    // A replay and a refusal make none.
    post_money(
        &app,
        &format!("/v1/customers/{customer}/adjustments"),
        &json!({"amount": "1.00", "description": "Goodwill"}),
        Some("e-adj"),
    )
    .await
    .assert_status(201);
    post_money(
        &app,
        &format!("/v1/payments/{id}/reversal"),
        &json!({}),
        Some("e-rev-2"),
    )
    .await
    .assert_status(422);

    // Act
    let feed = app
        .get("/v1/events?type=payment.created,payment.reversed,transaction.created")
        .await;

    // Assert
    feed.assert_status(200);
    let events = feed.json()["events"].as_array().unwrap().clone();
    let seen: Vec<(Value, Value)> = events
        .iter()
        .map(|event| (event["type"].clone(), event["data"].clone()))
        .collect();
    assert_eq!(
        seen,
        vec![
            (json!("payment.created"), paid),
            (json!("payment.reversed"), reversed),
            (json!("transaction.created"), adjusted),
        ]
    );
}

/// Posts an adjustment of `amount` with key `key`.
async fn adjust_by(app: &TestApp, customer: i64, amount: &str, key: &str) {
    let body = json!({"amount": amount, "description": "Test"});
    let path = format!("/v1/customers/{customer}/adjustments");
    post_money(app, &path, &body, Some(key))
        .await
        .assert_status(201);
}

/// The customer's `halted?`, its account's `halted_by_balance`, and its `account_balance`.
async fn halted(app: &TestApp, customer: i64) -> (Value, Value, Value) {
    let path = format!("/v1/customers/{customer}");
    let view = app.get(&path).await.json();
    let account = app.get(&format!("{path}/account")).await.json();
    (
        view["halted?"].clone(),
        account["halted_by_balance"].clone(),
        view["account_balance"].clone(),
    )
}

/// The customer's deliveries from today on, as `GET /v1/orders/{id}/deliveries` lists them.
async fn dates_delivered(app: &TestApp, order: i64) -> Vec<Value> {
    let response = app.get(&format!("/v1/orders/{order}/deliveries")).await;
    response.assert_status(200);
    response
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|delivery| delivery["date"].clone())
        .collect()
}

#[tokio::test]
async fn a_balance_at_the_spend_limit_halts_its_customer_until_a_payment_lifts_it() {
    // Arrange: store A's spend limit is -10.00; an order delivered twice a week.
    let mut catalogue = crate::helpers::default_catalogue();
    catalogue["webstores"][0]["balance_threshold"] = json!("-10.00");
    let dir = DataDir::with_catalogue(catalogue);
    let mut app = Launch::new().on(&dir).spawn().await;
    let customer = id_of(
        &app.create_customer_ok(&customer_body("limit@example.com"))
            .await,
    );
    let start = jiff::Timestamp::now()
        .to_zoned_datetime(jiff::tz::TimeZone::UTC)
        .date()
        .checked_add(jiff::Span::new().days(7))
        .unwrap()
        .to_string();
    let order = id_of(
        &app.create_order_ok(&json!({
            "customer_id": customer, "box_id": 217, "frequency": "weekly",
            "start_date": start, "week_days": [1, 4],
        }))
        .await,
    );
    let delivered = dates_delivered(&app, order).await;
    assert!(delivered.len() >= 12, "{delivered:?}");
    // Act and assert: above the limit, nothing; at it, halted from the first open date.
    adjust_by(&app, customer, "-9.99", "a1").await;
    assert_eq!(
        halted(&app, customer).await,
        (json!(false), json!(false), json!("-9.99"))
    );
    adjust_by(&app, customer, "-0.01", "a2").await;
    assert_eq!(
        halted(&app, customer).await,
        (json!(true), json!(true), json!("-10.00"))
    );
    let while_halted = dates_delivered(&app, order).await;
    assert!(while_halted.len() < delivered.len(), "{while_halted:?}");
    assert!(
        delivered.starts_with(&while_halted),
        "only the dates already locked stay: {while_halted:?}"
    );
    // A halt by hand lifted while the balance halts leaves the customer halted.
    for halt in [true, false] {
        app.patch_json(
            &format!("/v1/customers/{customer}"),
            &json!({"halted": halt}),
        )
        .await
        .assert_status(200);
        assert_eq!(
            halted(&app, customer).await.0,
            json!(true),
            "halted by hand: {halt}"
        );
    }
    // A payment that lifts the balance above the limit ends the halt by itself.
    let paid = post_money(
        &app,
        &format!("/v1/customers/{customer}/payments"),
        &json!({"amount": "0.01"}),
        Some("p1"),
    )
    .await;
    paid.assert_status(201);
    assert_eq!(
        halted(&app, customer).await,
        (json!(false), json!(false), json!("-9.99"))
    );
    assert_eq!(dates_delivered(&app, order).await, delivered);
    // Halted by hand, then by balance too: the payment ends only the halt by balance.
    app.patch_json(
        &format!("/v1/customers/{customer}"),
        &json!({"halted": true}),
    )
    .await
    .assert_status(200);
    adjust_by(&app, customer, "-5.00", "a3").await;
    post_money(
        &app,
        &format!("/v1/customers/{customer}/payments"),
        &json!({"amount": "20.00"}),
        Some("p2"),
    )
    .await
    .assert_status(201);
    assert_eq!(
        halted(&app, customer).await,
        (json!(true), json!(false), json!("5.01"))
    );

    // Each change of halted? is a customer.updated event telling the balance.
    let feed = app.get("/v1/events?type=customer.updated").await;
    feed.assert_status(200);
    let told: Vec<(Value, Value)> = feed.json()["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|event| {
            (
                event["data"]["halted?"].clone(),
                event["data"]["account_balance"].clone(),
            )
        })
        .collect();
    assert_eq!(
        told,
        vec![
            (json!(true), json!("-10.00")),
            (json!(true), json!("-10.00")),
            (json!(true), json!("-10.00")),
            (json!(false), json!("-9.99")),
            (json!(true), json!("-9.99")),
        ],
        "the balance's halt, the hand's on and off, the payment's end, the hand's again"
    );

    // All of it the same after a restart.
    let before = halted(&app, customer).await;
    app.terminate_ok(std::time::Duration::from_secs(10));
    drop(app);
    let app = Launch::new().on(&dir).spawn().await;
    assert_eq!(halted(&app, customer).await, before);
    let (account, ledger) = account_and_ledger(&app, customer).await;
    assert_ledger_adds_up(&account, &ledger);
}

#[tokio::test]
async fn the_discount_and_spend_limit_are_set_read_exactly_and_refused_whole() {
    // Arrange
    let app = Launch::new().spawn().await;
    let customer = id_of(
        &app.create_customer_ok(&customer_body("settings@example.com"))
            .await,
    );
    let path = format!("/v1/customers/{customer}/account");

    // Act: a discount and a limit at the balance (0.00): halted by balance.
    let set = app
        .patch_json(
            &path,
            &json!({"account": {"discount": 0.125, "balance_threshold": "0.00"}}),
        )
        .await;

    // Assert
    set.assert_status(200);
    let account = set.json();
    assert_eq!(account["discount"], 0.125, "{account}");
    assert_eq!(account["balance_threshold"], "0.00", "{account}");
    assert_eq!(account["halted_by_balance"], true, "{account}");
    let view = app.get(&format!("/v1/customers/{customer}")).await.json();
    assert_eq!(
        (view["discount"].clone(), view["discount?"].clone()),
        (json!(0.125), json!(true))
    );
    assert_eq!(view["halted?"], true);
    assert_eq!(
        app.get(&path).await.json(),
        account,
        "read back as answered"
    );

    // Refusals name every failing field and change nothing.
    let bad = app
        .patch_json(
            &path,
            &json!({"discount": 1.5, "balance_threshold": "1.234", "balance": "9.00", "x": 1}),
        )
        .await;
    bad.assert_status(422);
    let errors = bad.field_errors();
    for field in ["discount", "balance_threshold", "balance", "x"] {
        assert!(errors.contains_key(field), "{field}: {errors:?}");
    }
    let beside = app
        .patch_json(
            &path,
            &json!({"account": {"discount": 0.1}, "balance_threshold": {}}),
        )
        .await;
    beside.assert_status(422);
    assert_eq!(
        beside.field_errors().keys().collect::<Vec<_>>(),
        ["balance_threshold"],
        "a field beside the envelope is no field of the request"
    );
    for discount in [json!(0.12345), json!("lots"), json!(-0.1), Value::Null] {
        let refused = app.patch_json(&path, &json!({"discount": discount})).await;
        refused.assert_status(422);
        assert!(
            refused.field_errors().contains_key("discount"),
            "{discount}"
        );
    }
    assert_eq!(app.get(&path).await.json(), account, "nothing changed");
    let theirs = app
        .send(
            reqwest::Method::PATCH,
            &path,
            Some(&store_b()),
            Some(br#"{"discount": 0.5}"#.to_vec()),
            &[("Content-Type", "application/json")],
        )
        .await;
    theirs.assert_status(404);

    // Back to the webstore's limit (none): the halt by balance ends; the same again writes
    // nothing.
    let back = app
        .patch_json(&path, &json!({"balance_threshold": null}))
        .await;
    back.assert_status(200);
    assert_eq!(back.json()["halted_by_balance"], false);
    assert_eq!(
        back.json()["discount"],
        0.125,
        "an absent field keeps its value"
    );
    let again = app
        .patch_json(&path, &json!({"balance_threshold": null}))
        .await;
    again.assert_status(200);
    assert_eq!(again.json(), back.json());
    let feed = app.get("/v1/events?type=customer.updated").await.json();
    let told: Vec<Value> = feed["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|event| event["data"]["halted?"].clone())
        .collect();
    assert_eq!(
        told,
        vec![json!(true), json!(false)],
        "one event per change"
    );
}

#[tokio::test]
async fn the_books_list_the_webstore_s_transactions_by_date_in_json_and_csv() {
    // Arrange: two customers of store A, one of store B; payments dated on three days.
    let app = Launch::new().spawn().await;
    let ann = id_of(
        &app.create_customer_ok(&customer_body("books-ann@example.com"))
            .await,
    );
    let bob = id_of(
        &app.create_customer_ok(&customer_body("books-bob@example.com"))
            .await,
    );
    let theirs = id_of(&app.create_customer_b_ok("books-b@example.com").await);
    let pay = |customer: i64, amount: &str, date: &str, key: &str| {
        let body = json!({"payment": {"amount": amount, "date": date, "method": "cash"}});
        (
            format!("/v1/customers/{customer}/payments"),
            body,
            key.to_owned(),
        )
    };
    for (path, body, key) in [
        pay(ann, "10.00", "2026-11-30", "b1"),
        pay(bob, "20.00", "2026-12-01", "b2"),
        pay(ann, "5.50", "2026-12-01", "b3"),
        pay(bob, "1.00", "2026-12-03", "b4"),
    ] {
        post_money(&app, &path, &body, Some(&key))
            .await
            .assert_status(201);
    }
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Idempotency-Key", "bb"),
    ];
    let b_body = serde_json::to_vec(&json!({"amount": "99.00", "date": "2026-12-01"})).unwrap();
    app.send(
        Method::POST,
        &format!("/v1/customers/{theirs}/payments"),
        Some(&store_b()),
        Some(b_body),
        &headers,
    )
    .await
    .assert_status(201);

    // Act
    let books = app
        .get("/v1/transactions?from=2026-11-30&to=2026-12-02")
        .await;
    let first = app
        .get("/v1/transactions?from=2026-11-30&to=2026-12-02&per_page=2")
        .await;
    let second = app
        .get("/v1/transactions?from=2026-11-30&to=2026-12-02&per_page=2&page=2")
        .await;
    headers = vec![("Accept", "text/csv")];
    let csv = app
        .send(
            Method::GET,
            "/v1/transactions?from=2026-12-01&to=2026-12-01",
            Some(&app.creds),
            None,
            &headers,
        )
        .await;
    let bad = app
        .get("/v1/transactions?from=2026-12-05&to=2026-12-01&page=0")
        .await;
    let wide = app
        .get("/v1/transactions?from=2026-01-01&to=2027-06-01")
        .await;
    let not_a_date = app.get("/v1/transactions?from=yesterday").await;

    // Assert: store A's three in the range, by date, none of store B's.
    books.assert_status(200);
    let listed: Vec<(Value, Value, Value)> = books
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["date"].clone(),
                t["customer_id"].clone(),
                t["amount"].clone(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        vec![
            (json!("2026-11-30"), json!(ann), json!("10.00")),
            (json!("2026-12-01"), json!(bob), json!("20.00")),
            (json!("2026-12-01"), json!(ann), json!("5.50")),
        ]
    );
    assert_eq!(books.header("x-total-count").as_deref(), Some("3"));
    first.assert_status(200);
    second.assert_status(200);
    let paged: Vec<Value> = first
        .json()
        .as_array()
        .unwrap()
        .iter()
        .chain(second.json().as_array().unwrap())
        .cloned()
        .collect();
    assert_eq!(
        paged,
        books.json().as_array().unwrap().clone(),
        "two pages, the same"
    );
    assert!(first
        .header("link")
        .is_some_and(|link| link.contains("page=2")));
    csv.assert_status(200);
    let text = csv.text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "date,id,customer_id,number,kind,amount,balance,description,order_id,payment_id,created_at"
    );
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[1].starts_with("2026-12-01,") && lines[1].contains(",payment,20.00,20.00,"),
        "{text}"
    );
    assert!(lines[2].contains(",payment,5.50,15.50,"), "{text}");
    bad.assert_status(422);
    let errors = bad.field_errors();
    assert!(errors.contains_key("page"), "{errors:?}");
    let reversed = app
        .get("/v1/transactions?from=2026-12-05&to=2026-12-01")
        .await;
    reversed.assert_status(422);
    assert!(reversed.field_errors().contains_key("to"));
    wide.assert_status(422);
    assert!(wide.field_errors().contains_key("to"));
    not_a_date.assert_status(422);
    assert!(not_a_date.field_errors().contains_key("from"));
}
