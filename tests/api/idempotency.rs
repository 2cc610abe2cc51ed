//! `Idempotency-Key` on `POST /v1/customers` and `POST /v1/orders` (contract
//! section 6): a repeat with the same body replays the first response and
//! creates nothing, a different body is a 422, keys are 1 to 255 characters,
//! scoped per webstore, not consumed by a failed validation, shared safely by
//! concurrent requests, and kept across restarts and crashes.

use std::time::Duration;

use boxsub::domain::catalogue::DEMO_CREDENTIALS;
use futures_util::future::join_all;
use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{
    customer_body, customer_body_b, id_of, spawn_app, store_a, store_b, Creds, DataDir, Launch,
    TestApp, TestResponse,
};

/// The header naming a replay.
const REPLAYED: &str = "idempotent-replayed";

/// POSTs exactly these bytes with an `Idempotency-Key`.
async fn post_keyed(
    app: &TestApp,
    path: &str,
    body: &[u8],
    key: &str,
    creds: &Creds,
) -> TestResponse {
    app.send(
        Method::POST,
        path,
        Some(creds),
        Some(body.to_vec()),
        &[("Idempotency-Key", key)],
    )
    .await
}

/// The compact JSON bytes of a body.
fn bytes(body: &Value) -> Vec<u8> {
    serde_json::to_vec(body).unwrap()
}

/// Asserts a first, non-replayed 201 with a `Location`.
#[track_caller]
fn assert_fresh_create(response: &TestResponse) {
    response.assert_status(201);
    assert!(
        response.header("location").is_some(),
        "201 without Location: {}",
        response.text()
    );
    assert_ne!(
        response.header(REPLAYED).as_deref(),
        Some("true"),
        "a first create must not say it is a replay: {}",
        response.text()
    );
}

/// Asserts `again` is `first` replayed: same status, body bytes and `Location`,
/// plus `Idempotent-Replayed: true`.
#[track_caller]
fn assert_replay_of(first: &TestResponse, again: &TestResponse) {
    again.assert_status(first.status);
    assert_eq!(
        again.text(),
        first.text(),
        "a replay must return the first body byte for byte"
    );
    assert_eq!(again.header("location"), first.header("location"));
    assert_eq!(
        again.header(REPLAYED).as_deref(),
        Some("true"),
        "a replay must carry `Idempotent-Replayed: true`: {:?}",
        again.headers
    );
}

/// The number of customers of a webstore (`X-Total-Count`).
async fn customer_count(app: &TestApp, creds: &Creds) -> usize {
    let (all, total) = app.all_customers_as(creds).await;
    assert_eq!(total, Some(all.len() as u64), "X-Total-Count");
    all.len()
}

/// The orders of a customer of a webstore.
async fn orders_of_as(app: &TestApp, customer_id: i64, creds: &Creds) -> Vec<Value> {
    let response = app
        .get_as(&format!("/v1/orders?customer_id={customer_id}"), creds)
        .await;
    response.assert_status(200);
    response.json().as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn repeating_a_create_with_its_key_replays_the_first_response_and_creates_nothing() {
    // Arrange
    let app = spawn_app().await;
    let a = store_a();
    let customer = bytes(&customer_body("once@example.com"));

    // Act
    let first = post_keyed(&app, "/v1/customers", &customer, "cust-1", &a).await;
    let again = post_keyed(&app, "/v1/customers", &customer, "cust-1", &a).await;
    let third = post_keyed(&app, "/v1/customers", &customer, "cust-1", &a).await;

    // Assert
    assert_fresh_create(&first);
    assert_replay_of(&first, &again);
    assert_replay_of(&first, &third);
    assert_eq!(customer_count(&app, &a).await, 1);

    // Arrange: an order, sent bare and with a string customer id
    let customer_id = id_of(&first.json());
    let order = bytes(&json!({
        "customer_id": customer_id.to_string(), "box_id": 217, "frequency": "weekly",
        "extras": [{"id": 28, "quantity": 2}], "exclusions": [240], "substitutions": [241],
    }));

    // Act
    let first = post_keyed(&app, "/v1/orders", &order, "order-1", &a).await;
    let again = post_keyed(&app, "/v1/orders", &order, "order-1", &a).await;

    // Assert
    assert_fresh_create(&first);
    assert_replay_of(&first, &again);
    let orders = app.orders_of(customer_id).await;
    assert_eq!(orders.len(), 1, "{orders:?}");
    assert_eq!(orders[0], first.json());
}

#[tokio::test]
async fn the_same_key_with_a_different_body_is_a_422_naming_idempotency_key() {
    // Arrange
    let app = spawn_app().await;
    let a = store_a();
    let first_body = customer_body("first@example.com");
    let first = post_keyed(&app, "/v1/customers", &bytes(&first_body), "k", &a).await;
    assert_fresh_create(&first);
    let customer_id = id_of(&first.json());
    let order = json!({"customer_id": customer_id, "box_id": 217});
    let first_order = post_keyed(&app, "/v1/orders", &bytes(&order), "ko", &a).await;
    assert_fresh_create(&first_order);

    // The same JSON with other bytes (pretty-printed) is a different body.
    let cases: Vec<(&str, &str, Vec<u8>)> = vec![
        (
            "/v1/customers",
            "k",
            bytes(&customer_body("second@example.com")),
        ),
        (
            "/v1/customers",
            "k",
            serde_json::to_vec_pretty(&first_body).unwrap(),
        ),
        (
            "/v1/orders",
            "ko",
            bytes(&json!({"customer_id": customer_id, "box_id": 218})),
        ),
        (
            "/v1/orders",
            "ko",
            serde_json::to_vec_pretty(&order).unwrap(),
        ),
    ];
    for (path, key, body) in cases {
        // Act
        let response = post_keyed(&app, path, &body, key, &a).await;

        // Assert
        response.assert_has_error("idempotency_key");
        assert_ne!(response.header(REPLAYED).as_deref(), Some("true"));
    }
    assert_eq!(customer_count(&app, &a).await, 1);
    assert_eq!(app.lookup_email("second@example.com").await.len(), 0);
    assert_eq!(app.orders_of(customer_id).await.len(), 1);
    // The original still replays.
    let again = post_keyed(&app, "/v1/customers", &bytes(&first_body), "k", &a).await;
    assert_replay_of(&first, &again);
}

#[tokio::test]
async fn idempotency_keys_have_1_to_255_characters() {
    // Arrange
    let app = spawn_app().await;
    let a = store_a();
    let longest = "k".repeat(255);
    let too_long = "k".repeat(256);

    // Act
    let empty = post_keyed(
        &app,
        "/v1/customers",
        &bytes(&customer_body("empty-key@example.com")),
        "",
        &a,
    )
    .await;
    let long = post_keyed(
        &app,
        "/v1/customers",
        &bytes(&customer_body("long-key@example.com")),
        &too_long,
        &a,
    )
    .await;
    let ok = post_keyed(
        &app,
        "/v1/customers",
        &bytes(&customer_body("max-key@example.com")),
        &longest,
        &a,
    )
    .await;

    // Assert
    empty.assert_has_error("idempotency_key");
    long.assert_has_error("idempotency_key");
    assert_fresh_create(&ok);
    assert_eq!(customer_count(&app, &a).await, 1);
    assert_eq!(app.lookup_email("long-key@example.com").await.len(), 0);

    // And for orders (keys are per webstore, not per endpoint: a new one)
    let longest = "o".repeat(255);
    let customer_id = id_of(&ok.json());
    let order = bytes(&json!({"customer_id": customer_id, "box_id": 217}));
    let long = post_keyed(&app, "/v1/orders", &order, &too_long, &a).await;
    long.assert_has_error("idempotency_key");
    let empty = post_keyed(&app, "/v1/orders", &order, "", &a).await;
    empty.assert_has_error("idempotency_key");
    // A tab passes as a header value but is no printable character.
    let tabbed = post_keyed(&app, "/v1/orders", &order, "o\to", &a).await;
    tabbed.assert_has_error("idempotency_key");
    let first = post_keyed(&app, "/v1/orders", &order, &longest, &a).await;
    assert_fresh_create(&first);
    let again = post_keyed(&app, "/v1/orders", &order, &longest, &a).await;
    assert_replay_of(&first, &again);
    assert_eq!(app.orders_of(customer_id).await.len(), 1);
}

#[tokio::test]
async fn idempotency_keys_are_scoped_per_webstore() {
    // Arrange
    let app = spawn_app().await;
    let (a, b) = (store_a(), store_b());
    let body_a = bytes(&customer_body("scoped@example.com"));
    let body_b = bytes(&customer_body_b("scoped@example.com"));
    let first_a = post_keyed(&app, "/v1/customers", &body_a, "shared", &a).await;
    assert_fresh_create(&first_a);

    // Act
    let first_b = post_keyed(&app, "/v1/customers", &body_b, "shared", &b).await;
    let again_b = post_keyed(&app, "/v1/customers", &body_b, "shared", &b).await;
    let again_a = post_keyed(&app, "/v1/customers", &body_a, "shared", &a).await;
    // Store A's exact bytes under store B: store B's own validation answers
    // (store A's delivery service is unknown there), never store A's replay.
    let a_bytes_as_b = post_keyed(&app, "/v1/customers", &body_a, "shared-2", &b).await;
    let first_a2 = post_keyed(
        &app,
        "/v1/customers",
        &bytes(&customer_body("s2@example.com")),
        "shared-2",
        &a,
    )
    .await;

    // Assert
    assert_fresh_create(&first_b);
    assert_ne!(first_a.json()["id"], first_b.json()["id"]);
    assert_eq!(first_b.json()["webstore_id"], "store-b");
    assert_replay_of(&first_b, &again_b);
    assert_replay_of(&first_a, &again_a);
    a_bytes_as_b.assert_has_error("delivery_service_id");
    assert_fresh_create(&first_a2);
    assert_eq!(customer_count(&app, &a).await, 2);
    assert_eq!(customer_count(&app, &b).await, 1);

    // Orders: one key in both stores
    let order_a = bytes(&json!({"customer_id": first_a.json()["id"], "box_id": 217}));
    let order_b = bytes(&json!({"customer_id": first_b.json()["id"], "box_id": 300}));
    let first_a = post_keyed(&app, "/v1/orders", &order_a, "order-key", &a).await;
    let first_b = post_keyed(&app, "/v1/orders", &order_b, "order-key", &b).await;
    assert_fresh_create(&first_a);
    assert_fresh_create(&first_b);
    assert_ne!(first_a.json()["id"], first_b.json()["id"]);
    let again_b = post_keyed(&app, "/v1/orders", &order_b, "order-key", &b).await;
    assert_replay_of(&first_b, &again_b);
}

#[tokio::test]
async fn a_request_failing_validation_does_not_consume_its_key() {
    // Arrange
    let app = spawn_app().await;
    let a = store_a();
    let mut invalid = customer_body("fixed@example.com");
    invalid["first_name"] = json!("   ");
    let valid = bytes(&customer_body("fixed@example.com"));

    // Act
    let rejected = post_keyed(&app, "/v1/customers", &bytes(&invalid), "retry", &a).await;
    let fixed = post_keyed(&app, "/v1/customers", &valid, "retry", &a).await;
    let again = post_keyed(&app, "/v1/customers", &valid, "retry", &a).await;

    // Assert
    rejected.assert_error_keys(&["first_name"]);
    assert_fresh_create(&fixed);
    assert_replay_of(&fixed, &again);
    assert_eq!(customer_count(&app, &a).await, 1);

    // And for orders: an unknown box, then the right one
    let customer_id = id_of(&fixed.json());
    let invalid = bytes(&json!({"customer_id": customer_id, "box_id": 999}));
    let valid = bytes(&json!({"customer_id": customer_id, "box_id": 217}));
    let rejected = post_keyed(&app, "/v1/orders", &invalid, "retry-order", &a).await;
    let fixed = post_keyed(&app, "/v1/orders", &valid, "retry-order", &a).await;
    let again = post_keyed(&app, "/v1/orders", &valid, "retry-order", &a).await;
    rejected.assert_error_keys(&["box_id"]);
    assert_fresh_create(&fixed);
    assert_replay_of(&fixed, &again);
    assert_eq!(app.orders_of(customer_id).await.len(), 1);
}

/// Sends `n` concurrent POSTs of one body with one key; asserts every answer is
/// the same 201 and exactly one of them is not a replay. Returns the first.
async fn concurrent_keyed(
    app: &TestApp,
    path: &str,
    body: &[u8],
    key: &str,
    n: usize,
) -> TestResponse {
    let a = store_a();
    let responses = join_all((0..n).map(|_| post_keyed(app, path, body, key, &a))).await;
    let statuses: Vec<u16> = responses.iter().map(|r| r.status).collect();
    assert!(
        statuses.iter().all(|s| *s == 201),
        "every concurrent request with one key must get the 201: {statuses:?}; first: {}",
        responses[0].text()
    );
    let originals: Vec<&TestResponse> = responses
        .iter()
        .filter(|r| r.header(REPLAYED).as_deref() != Some("true"))
        .collect();
    assert_eq!(
        originals.len(),
        1,
        "exactly one of {n} concurrent requests is not a replay"
    );
    for response in &responses {
        assert_eq!(response.text(), originals[0].text(), "bodies differ");
        assert_eq!(response.header("location"), originals[0].header("location"));
    }
    responses.into_iter().next().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_requests_with_one_key_create_one_record_and_share_its_response() {
    // Arrange
    let app = spawn_app().await;
    let customer = bytes(&customer_body("concurrent@example.com"));

    // Act
    let created = concurrent_keyed(&app, "/v1/customers", &customer, "same-customer", 10).await;

    // Assert
    assert_eq!(customer_count(&app, &store_a()).await, 1);

    // Arrange
    let customer_id = id_of(&created.json());
    let order = bytes(&json!({
        "customer_id": customer_id, "box_id": 217, "frequency": "fortnightly",
        "extras": [{"id": 29, "quantity": 3}],
    }));

    // Act
    let order = concurrent_keyed(&app, "/v1/orders", &order, "same-order", 10).await;

    // Assert
    let orders = app.orders_of(customer_id).await;
    assert_eq!(
        orders.len(),
        1,
        "ten concurrent requests with one key: {orders:?}"
    );
    assert_eq!(orders[0], order.json());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_keys_survive_a_restart_and_a_crash() {
    // Arrange
    let dir = DataDir::new();
    let (a, b) = (store_a(), store_b());
    let mut app = Launch::new().on(&dir).spawn().await;
    let customer = bytes(&customer_body("kept@example.com"));
    let first_customer = post_keyed(&app, "/v1/customers", &customer, "kept-c", &a).await;
    assert_fresh_create(&first_customer);
    let customer_id = id_of(&first_customer.json());
    let order = bytes(&json!({"customer_id": customer_id, "box_id": 219,
                              "extras": [{"id": 30, "quantity": 2}]}));
    let first_order = post_keyed(&app, "/v1/orders", &order, "kept-o", &a).await;
    assert_fresh_create(&first_order);
    let customer_b = bytes(&customer_body_b("kept@example.de"));
    let first_b = post_keyed(&app, "/v1/customers", &customer_b, "kept-c", &b).await;
    assert_fresh_create(&first_b);

    // Act
    app.terminate_ok(Duration::from_secs(10));
    drop(app);
    let mut app = Launch::new().on(&dir).spawn().await;

    // Assert
    let again = post_keyed(&app, "/v1/customers", &customer, "kept-c", &a).await;
    assert_replay_of(&first_customer, &again);
    let again = post_keyed(&app, "/v1/orders", &order, "kept-o", &a).await;
    assert_replay_of(&first_order, &again);
    let again = post_keyed(&app, "/v1/customers", &customer_b, "kept-c", &b).await;
    assert_replay_of(&first_b, &again);
    let other = bytes(&json!({"customer_id": customer_id, "box_id": 217}));
    post_keyed(&app, "/v1/orders", &other, "kept-o", &a)
        .await
        .assert_has_error("idempotency_key");
    assert_eq!(customer_count(&app, &a).await, 1);
    assert_eq!(app.orders_of(customer_id).await.len(), 1);

    // Act again: keys written just before a kill -9
    let first_after = post_keyed(&app, "/v1/orders", &other, "after-restart", &a).await;
    assert_fresh_create(&first_after);
    app.crash();
    drop(app);
    let app = Launch::new().on(&dir).spawn().await;

    // Assert
    let again = post_keyed(&app, "/v1/orders", &other, "after-restart", &a).await;
    assert_replay_of(&first_after, &again);
    let again = post_keyed(&app, "/v1/orders", &order, "kept-o", &a).await;
    assert_replay_of(&first_order, &again);
    let orders = orders_of_as(&app, customer_id, &a).await;
    assert_eq!(orders.len(), 2, "{orders:?}");
}

/// A metric without labels, from `/metrics`.
async fn metric(app: &TestApp, name: &str) -> f64 {
    let metrics = app.get_without_auth("/metrics").await;
    metrics
        .text()
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Waits (bounded) until `name` reads `wanted`.
async fn await_metric(app: &TestApp, name: &str, wanted: impl Fn(f64) -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let value = metric(app, name).await;
        if wanted(value) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{name} still {value} after 15 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn records_expire_after_their_time_to_live_and_free_their_key() {
    // Arrange: records count for 2 s; the sweeper runs every second.
    let dir = DataDir::new();
    let app = Launch::new()
        .on(&dir)
        .args(&["--idempotency-ttl", "2"])
        .spawn()
        .await;
    let a = store_a();
    let first_body = bytes(&customer_body("ttl-first@example.com"));
    let first = post_keyed(&app, "/v1/customers", &first_body, "ttl-key", &a).await;
    assert_fresh_create(&first);

    // Act + Assert: inside the time to live, a repeat replays.
    let again = post_keyed(&app, "/v1/customers", &first_body, "ttl-key", &a).await;
    assert_replay_of(&first, &again);

    // Act: wait (bounded) until the sweeper has removed the record.
    await_metric(&app, "boxsub_idempotency_records_expired_total", |n| {
        n >= 1.0
    })
    .await;
    await_metric(&app, "boxsub_idempotency_records", |n| n == 0.0).await;

    // Assert: the key is free again: another body is a new create, not a 422, and that
    // create is replayed in its turn.
    let second_body = bytes(&customer_body("ttl-second@example.com"));
    let second = post_keyed(&app, "/v1/customers", &second_body, "ttl-key", &a).await;
    assert_fresh_create(&second);
    assert_ne!(id_of(&second.json()), id_of(&first.json()));
    let replay = post_keyed(&app, "/v1/customers", &second_body, "ttl-key", &a).await;
    assert_replay_of(&second, &replay);
    assert_eq!(customer_count(&app, &a).await, 2);
    await_metric(&app, "boxsub_idempotency_records", |n| n == 1.0).await;
}

#[tokio::test]
async fn the_same_key_and_body_past_the_time_to_live_is_a_new_request() {
    // Arrange: a time to live of 1 s (swept or not by the time of the repeat, the record no
    // longer counts).
    let dir = DataDir::new();
    let app = Launch::new()
        .on(&dir)
        .args(&["--idempotency-ttl", "1"])
        .spawn()
        .await;
    let a = store_a();
    let body = bytes(&customer_body("unswept@example.com"));
    let first = post_keyed(&app, "/v1/customers", &body, "unswept", &a).await;
    assert_fresh_create(&first);

    // Act: past the time to live, the same key and body again.
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let again = post_keyed(&app, "/v1/customers", &body, "unswept", &a).await;

    // Assert: not a replay: a new create, refused because the email is taken.
    assert_eq!(again.header(REPLAYED), None);
    again.assert_has_error("email");
}

#[tokio::test]
async fn a_record_of_a_create_cut_before_its_write_frees_its_key() {
    // Arrange: a customer; then, with the server stopped, what a crash between a keyed
    // create's two writes leaves: its idempotency record, but no order (or customer) with
    // the id its `Location` names.
    use boxsub::store::codec::encode;
    use boxsub::store::kinds::idempotency::{self, IdempotencyRecord};
    use sha2::{Digest, Sha256};

    let dir = DataDir::new();
    let mut app = Launch::new().on(&dir).spawn().await;
    let a = store_a();
    let ann = id_of(
        &app.create_customer_ok(&customer_body("ann@example.com"))
            .await,
    );
    app.terminate_ok(Duration::from_secs(10));
    drop(app);
    let order = bytes(&json!({"customer_id": ann, "box_id": 217}));
    let customer = bytes(&customer_body("cut@example.com"));
    let store = dir.open_store();
    for (key, body, location) in [
        ("cut-order", &order, "/v1/orders/999999"),
        ("cut-customer", &customer, "/v1/customers/999999"),
    ] {
        let record = IdempotencyRecord {
            body_sha256: Sha256::digest(body).to_vec(),
            status: 201,
            location: Some(location.to_owned()),
            body: br#"{"id":999999}"#.to_vec(),
            created_at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs() as i64,
        };
        store
            .put_raw(
                &idempotency::idempotency_version(crate::helpers::STORE_A, key, 1),
                encode(&record),
            )
            .unwrap();
    }
    drop(store);

    // Act
    let app = Launch::new().on(&dir).spawn().await;
    let first_order = post_keyed(&app, "/v1/orders", &order, "cut-order", &a).await;
    let first_customer = post_keyed(&app, "/v1/customers", &customer, "cut-customer", &a).await;

    // Assert: fresh creates, not replays of what never was; then replayed in their turn.
    assert_fresh_create(&first_order);
    assert_ne!(id_of(&first_order.json()), 999_999);
    assert_fresh_create(&first_customer);
    assert_ne!(id_of(&first_customer.json()), 999_999);
    let again = post_keyed(&app, "/v1/orders", &order, "cut-order", &a).await;
    assert_replay_of(&first_order, &again);
    let again = post_keyed(&app, "/v1/customers", &customer, "cut-customer", &a).await;
    assert_replay_of(&first_customer, &again);
    assert_eq!(app.orders_of(ann).await.len(), 1);
}

/// What one webstore of the demo catalogue needs for the cross-endpoint test: its
/// credentials, a valid customer body for an email, and a box it sells.
struct DemoWebstore {
    creds: Creds,
    delivery_service_id: u64,
    box_id: u64,
}

impl DemoWebstore {
    /// A customer body with every field either demo webstore requires.
    fn customer(&self, email: &str) -> Vec<u8> {
        bytes(&json!({
            "first_name": "Ida", "last_name": "Keyes", "email": email,
            "delivery_service_id": self.delivery_service_id,
            "address": {"address_1": "1 Mill Lane", "city": "Nelson", "postcode": "7010",
                        "mobile_phone": "021 000 000"},
        }))
    }
}

/// Both webstores of the built-in demo catalogue, where the issue was first seen.
fn demo_webstores() -> [DemoWebstore; 2] {
    let [(fantastic, key_a, secret_a), (green, key_b, secret_b)] = DEMO_CREDENTIALS;
    assert_eq!(
        (fantastic, green),
        ("fantastic-vege-people", "green-valley-farm")
    );
    [
        DemoWebstore {
            creds: Creds::new(key_a, secret_a),
            delivery_service_id: 91,
            box_id: 217,
        },
        DemoWebstore {
            creds: Creds::new(key_b, secret_b),
            delivery_service_id: 501,
            box_id: 801,
        },
    ]
}

/// A key's record is judged by the resource it names, whichever endpoint the key comes
/// back on: a key first used for an order is another request's on `POST /v1/customers`
/// (and the other way round), and a customer's key on `PATCH /v1/orders/{id}`, refused with
/// a 422 that creates and changes nothing and leaves the record as it was, so that the first request's retry still replays it, across a restart too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_used_on_one_create_endpoint_is_refused_on_the_other_and_kept() {
    // Arrange: in each webstore, a customer, an order keyed "o-then-c" and a customer keyed
    // "c-then-o"; the ids of the two kinds never line up by chance in both webstores.
    let demo: Value =
        serde_json::from_str(include_str!("../../src/domain/demo_catalogue.json")).unwrap();
    let dir = DataDir::with_catalogue(demo);
    let mut app = Launch::new().on(&dir).spawn().await;
    let mut firsts = Vec::new();
    for (n, webstore) in demo_webstores().iter().enumerate() {
        let creds = &webstore.creds;
        let owner = webstore.customer(&format!("owner{n}@example.com"));
        let owner = app
            .send(Method::POST, "/v1/customers", Some(creds), Some(owner), &[])
            .await;
        owner.assert_status(201);
        let owner_id = id_of(&owner.json());
        let order = bytes(&json!({"customer_id": owner_id, "box_id": webstore.box_id}));
        let first_order = post_keyed(&app, "/v1/orders", &order, "o-then-c", creds).await;
        assert_fresh_create(&first_order);
        let customer = webstore.customer(&format!("keyed{n}@example.com"));
        let first_customer = post_keyed(&app, "/v1/customers", &customer, "c-then-o", creds).await;
        assert_fresh_create(&first_customer);
        firsts.push((owner_id, order, first_order, customer, first_customer));
    }

    for restarted in [false, true] {
        if restarted {
            app.terminate_ok(Duration::from_secs(10));
            drop(app);
            app = Launch::new().on(&dir).spawn().await;
        }
        for (n, webstore) in demo_webstores().iter().enumerate() {
            let creds = &webstore.creds;
            let (owner_id, order, first_order, customer, first_customer) = &firsts[n];
            let when = if restarted {
                "after a restart"
            } else {
                "at once"
            };

            // Act: each key on the other endpoint, with a body valid there
            let other_customer = webstore.customer(&format!("other{n}@example.com"));
            let on_customers =
                post_keyed(&app, "/v1/customers", &other_customer, "o-then-c", creds).await;
            let other_order = bytes(&json!({"customer_id": owner_id, "box_id": webstore.box_id,
                                            "frequency": "fortnightly"}));
            let on_orders = post_keyed(&app, "/v1/orders", &other_order, "c-then-o", creds).await;

            // Assert: both refused, nothing created, and the first requests replay
            on_customers.assert_status(422);
            on_customers.assert_has_error("idempotency_key");
            on_orders.assert_status(422);
            on_orders.assert_has_error("idempotency_key");
            let order_path = format!("/v1/orders/{}", id_of(&first_order.json()));
            let on_change = app
                .send(
                    Method::PATCH,
                    &order_path,
                    Some(creds),
                    Some(bytes(&json!({"frequency": "weekly"}))),
                    &[("Idempotency-Key", "c-then-o")],
                )
                .await;
            on_change.assert_status(422);
            on_change.assert_has_error("idempotency_key");
            let unchanged = app
                .send(Method::GET, &order_path, Some(creds), None, &[])
                .await;
            assert_eq!(
                unchanged.json()["frequency"],
                "single",
                "webstore {n} {when}: a key of a customer changed an order"
            );
            assert_eq!(
                customer_count(&app, creds).await,
                2,
                "webstore {n} {when}: a key of an order created a customer"
            );
            assert_eq!(
                orders_of_as(&app, *owner_id, creds).await.len(),
                1,
                "webstore {n} {when}: a key of a customer created an order"
            );
            let again = post_keyed(&app, "/v1/orders", order, "o-then-c", creds).await;
            assert_replay_of(first_order, &again);
            let again = post_keyed(&app, "/v1/customers", customer, "c-then-o", creds).await;
            assert_replay_of(first_customer, &again);
            assert_eq!(orders_of_as(&app, *owner_id, creds).await.len(), 1);
            assert_eq!(customer_count(&app, creds).await, 2);
        }
    }
}
