//! Durability across restarts (contract sections 6 and 7): a new server on the
//! same data directory serves the same customers, orders, email index and ids;
//! `--durability off` still flushes on a graceful shutdown and, after a kill -9,
//! keeps what its log synced in the background; and a data directory that cannot
//! be used stops start-up with a message naming it.
//!
//! Every test owns a [`DataDir`] and starts servers on it one after another;
//! each server is stopped (SIGTERM or SIGKILL) and reaped before the next one
//! starts.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::future::join_all;
use serde_json::{json, Value};

use crate::helpers::{
    boxsub_command, customer_body, customer_body_b, id_of, run_to_exit, store_a, store_b, Creds,
    DataDir, Launch, TestApp, TAKEN,
};

/// How long a graceful stop may take.
const STOP: Duration = Duration::from_secs(10);
/// How long a server refusing its data directory may take to exit.
const REFUSAL: Duration = Duration::from_secs(15);

/// A customer the test created, and how to reach it.
struct Known {
    creds: Creds,
    id: i64,
    email: String,
    password: Option<String>,
}

/// What a test wrote before a restart: its customers and `(creds, order id)`.
#[derive(Default)]
struct Written {
    customers: Vec<Known>,
    orders: Vec<(Creds, i64)>,
}

impl Written {
    fn max_customer_id(&self) -> i64 {
        self.customers.iter().map(|c| c.id).max().unwrap_or(0)
    }

    fn max_order_id(&self) -> i64 {
        self.orders.iter().map(|(_, id)| *id).max().unwrap_or(0)
    }
}

/// The status, the headers that matter and the JSON body of a read.
async fn view(app: &TestApp, path: &str, creds: &Creds) -> Value {
    let response = app.get_as(path, creds).await;
    json!({
        "status": response.status,
        "x-total-count": response.header("x-total-count"),
        "link": response.header("link"),
        "body": serde_json::from_slice::<Value>(&response.body).unwrap_or(Value::Null),
    })
}

/// Everything the API shows about what the test wrote, read through every
/// read endpoint and sign-in, keyed by a description of the request.
async fn observe(app: &TestApp, written: &Written) -> BTreeMap<String, Value> {
    let mut seen = BTreeMap::new();
    for creds in [store_a(), store_b()] {
        for path in [
            "/v1/customers?embed=address&per_page=1000".to_string(),
            "/v1/customers?per_page=2&page=2".to_string(),
            "/v1/customers?per_page=2".to_string(),
        ] {
            let key = format!("{} GET {path}", creds.key);
            seen.insert(key, view(app, &path, &creds).await);
        }
    }
    for customer in &written.customers {
        let creds = &customer.creds;
        for path in [
            format!("/v1/customers/{}?embed=address", customer.id),
            format!("/v1/customers/{}", customer.id),
            format!(
                "/v1/customers?email={}&embed=address",
                crate::helpers::enc(&customer.email)
            ),
            format!("/v1/orders?customer_id={}", customer.id),
        ] {
            let key = format!("{} GET {path}", creds.key);
            seen.insert(key, view(app, &path, creds).await);
        }
        if let Some(password) = &customer.password {
            let response = app
                .post_json_as(
                    "/v1/customers/sign_in?embed=address",
                    &json!({"email": customer.email, "password": password}),
                    creds,
                )
                .await;
            let key = format!("{} sign_in {}", creds.key, customer.email);
            seen.insert(
                key,
                json!({
                    "status": response.status,
                    "body": serde_json::from_slice::<Value>(&response.body)
                        .unwrap_or(Value::Null),
                }),
            );
        }
    }
    for (creds, id) in &written.orders {
        let path = format!("/v1/orders/{id}");
        seen.insert(
            format!("{} GET {path}", creds.key),
            view(app, &path, creds).await,
        );
    }
    seen
}

/// Fails listing every view that differs between two observations.
#[track_caller]
fn assert_same_views(before: &BTreeMap<String, Value>, after: &BTreeMap<String, Value>) {
    let mut differences = Vec::new();
    for (key, was) in before {
        let now = after.get(key).unwrap_or(&Value::Null);
        if was != now {
            differences.push(format!("{key}\n  before: {was}\n  after:  {now}"));
        }
    }
    assert!(
        differences.is_empty(),
        "{} of {} views changed across the restart:\n{}",
        differences.len(),
        before.len(),
        differences.join("\n")
    );
}

/// Asserts the views a test relies on were successful reads to begin with, so
/// that "identical after the restart" is not comparing two failures.
#[track_caller]
fn assert_all_ok(views: &BTreeMap<String, Value>) {
    for (key, view) in views {
        assert_eq!(view["status"], 200, "{key} did not succeed: {view}");
    }
}

/// Starts a server on `dir` and asserts its start-up stderr line about the
/// store's contents.
async fn restart(dir: &DataDir) -> TestApp {
    let app = Launch::new().on(dir).spawn().await;
    let line = app.wait_for_stderr_line(Duration::from_secs(5), |l| {
        l.contains("customers") && l.contains("orders")
    });
    assert!(
        line.is_some(),
        "start-up must write a line mentioning the customers and orders held; stderr:\n{}",
        app.stderr_tail()
    );
    app
}

/// Creates a customer and returns it as [`Known`].
async fn create_known(app: &TestApp, creds: &Creds, body: Value) -> Known {
    let response = app.post_json_as("/v1/customers", &body, creds).await;
    response.assert_status(201);
    let customer = response.json();
    Known {
        creds: creds.clone(),
        id: id_of(&customer),
        email: body["email"].as_str().unwrap().to_string(),
        password: body["password"].as_str().map(str::to_string),
    }
}

/// Creates an order and records it.
async fn create_order_as(app: &TestApp, creds: &Creds, body: Value, written: &mut Written) {
    let response = app.post_json_as("/v1/orders", &body, creds).await;
    response.assert_status(201);
    written
        .orders
        .push((creds.clone(), id_of(&response.json())));
}

/// Customers with passwords and full addresses, and orders of every shape, in
/// both stores.
async fn seed(app: &TestApp) -> Written {
    let mut written = Written::default();
    let (a, b) = (store_a(), store_b());

    let mut full = customer_body("Full.Address@Example.com");
    full["password"] = json!("correct horse battery");
    full["address"] = json!({
        "address_1": "1 My Street", "address_2": "Flat 2", "suburb": "Soho",
        "city": "London", "postcode": "W1D 3AF", "delivery_note": "Leave by the door",
        "home_phone": "007", "mobile_phone": "+44 7700 900000", "work_phone": "020 7946 0001",
    });
    written.customers.push(create_known(app, &a, full).await);
    let mut plain = customer_body("plain@example.com");
    plain["password"] = json!("another secret 2");
    plain["delivery_service_id"] = json!(92);
    written.customers.push(create_known(app, &a, plain).await);
    let mut nameless = customer_body("no-password@example.com");
    nameless.as_object_mut().unwrap().remove("last_name");
    written
        .customers
        .push(create_known(app, &a, nameless).await);

    let mut berg = customer_body_b("jana@example.de");
    berg["password"] = json!("kartoffelsalat");
    written.customers.push(create_known(app, &b, berg).await);
    let mut other = customer_body_b("Plain@Example.com");
    other["password"] = json!("same email other store");
    written.customers.push(create_known(app, &b, other).await);

    let (c0, c1, c3, c4) = (
        written.customers[0].id,
        written.customers[1].id,
        written.customers[3].id,
        written.customers[4].id,
    );
    let orders = [
        (
            &a,
            json!({"customer_id": c0, "box_id": 217, "frequency": "weekly",
                    "extras": [{"id": 28, "quantity": 2}, {"id": 29, "quantity": 1}],
                    "exclusions": [240, 241], "substitutions": [243]}),
        ),
        (&a, json!({"customer_id": c0.to_string(), "box_id": 218})),
        (
            &a,
            json!({"order": {"customer_id": c1, "box_id": "219", "frequency": "fortnightly",
                              "extras_one_off": true, "extras": [{"id": 30, "quantity": 2}],
                              "exclusions": [244]}}),
        ),
        (
            &b,
            json!({"customer_id": c3, "box_id": 300, "frequency": "weekly",
                    "extras": [{"id": 50, "quantity": 3}], "substitutions": [400]}),
        ),
        (
            &b,
            json!({"customer_id": c4, "box_id": 300, "exclusions": [400]}),
        ),
        (
            &a,
            json!({"customer_id": c1, "box_id": 217, "frequency": "single"}),
        ),
    ];
    for (creds, body) in orders {
        create_order_as(app, creds, body, &mut written).await;
    }
    written
}

/// The customer number as an integer.
#[track_caller]
fn number_of(customer: &Value) -> u64 {
    let number = customer["number"]
        .as_str()
        .unwrap_or_else(|| panic!("customer without a string number: {customer}"));
    number
        .parse()
        .unwrap_or_else(|_| panic!("customer number is not digits: {customer}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_serves_the_same_customers_orders_lists_and_sign_ins() {
    // Arrange
    let dir = DataDir::new();
    let mut app = Launch::new().on(&dir).spawn().await;
    let written = seed(&app).await;
    let before = observe(&app, &written).await;
    assert_all_ok(&before);

    // Act
    app.terminate_ok(STOP);
    drop(app);
    let app = restart(&dir).await;
    let after = observe(&app, &written).await;

    // Assert
    assert_same_views(&before, &after);
    for customer in written.customers.iter().filter(|c| c.password.is_some()) {
        let key = format!("{} sign_in {}", customer.creds.key, customer.email);
        let signed_in = &after[&key]["body"];
        assert_eq!(
            signed_in.as_array().map(Vec::len),
            Some(1),
            "sign-in after the restart: {key}: {signed_in}"
        );
        assert_eq!(id_of(&signed_in[0]), customer.id);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_and_customer_numbers_continue_after_a_restart() {
    // Arrange
    let dir = DataDir::new();
    let mut app = Launch::new().on(&dir).spawn().await;
    let written = seed(&app).await;
    let (customers_a, _) = app.all_customers_as(&store_a()).await;
    let (customers_b, _) = app.all_customers_as(&store_b()).await;
    let max_number_a = customers_a.iter().map(number_of).max().unwrap();
    let max_number_b = customers_b.iter().map(number_of).max().unwrap();
    app.terminate_ok(STOP);
    drop(app);

    // Act
    let mut app = restart(&dir).await;
    let new_a = app
        .create_customer_ok(&customer_body("after-restart@example.com"))
        .await;
    let new_b = app.create_customer_b_ok("after-restart@example.de").await;
    let new_order = app
        .create_order_ok(&json!({"customer_id": new_a["id"], "box_id": 217}))
        .await;
    let response = app
        .post_json_as(
            "/v1/orders",
            &json!({"customer_id": new_b["id"], "box_id": 300}),
            &store_b(),
        )
        .await;
    response.assert_status(201);
    let new_order_b = response.json();

    // Assert
    let max_customer = written.max_customer_id();
    let max_order = written.max_order_id();
    for customer in [&new_a, &new_b] {
        assert!(
            id_of(customer) > max_customer,
            "a customer created after the restart must have an id above {max_customer}: {customer}"
        );
    }
    assert_ne!(new_a["id"], new_b["id"]);
    for order in [&new_order, &new_order_b] {
        assert!(
            id_of(order) > max_order,
            "an order created after the restart must have an id above {max_order}: {order}"
        );
    }
    assert_ne!(new_order["id"], new_order_b["id"]);
    assert_eq!(
        number_of(&new_a),
        max_number_a + 1,
        "store A's next customer number: {new_a}"
    );
    assert_eq!(
        number_of(&new_b),
        max_number_b + 1,
        "store B's next customer number: {new_b}"
    );

    // And once more, after a crash right after those writes.
    let max_customer = id_of(&new_a).max(id_of(&new_b));
    let max_order = id_of(&new_order).max(id_of(&new_order_b));
    app.crash();
    drop(app);
    let app = restart(&dir).await;
    let newer = app
        .create_customer_ok(&customer_body("after-crash@example.com"))
        .await;
    let newer_order = app
        .create_order_ok(&json!({"customer_id": newer["id"], "box_id": 218}))
        .await;
    assert!(id_of(&newer) > max_customer, "after a crash: {newer}");
    assert!(
        id_of(&newer_order) > max_order,
        "after a crash: {newer_order}"
    );
    assert_eq!(number_of(&newer), max_number_a + 2, "{newer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_email_index_survives_restarts_including_changed_emails() {
    // Arrange
    let dir = DataDir::new();
    let mut app = Launch::new().on(&dir).spawn().await;
    let holder = app
        .create_customer_ok(&customer_body("taken@example.com"))
        .await;
    let mover = app
        .create_customer_ok(&customer_body("old@example.com"))
        .await;
    let mover_path = format!("/v1/customers/{}", mover["id"]);
    app.patch_json(&mover_path, &json!({"email": "New@Example.com"}))
        .await
        .assert_status(200);

    // Act
    app.terminate_ok(STOP);
    drop(app);
    let mut app = restart(&dir).await;

    // Assert
    let response = app
        .create_customer(&customer_body("TAKEN@example.com"))
        .await;
    response.assert_error_keys(&["email"]);
    response.assert_field_error("email", TAKEN);
    let response = app.create_customer(&customer_body("new@example.com")).await;
    response.assert_field_error("email", TAKEN);
    assert_eq!(
        app.lookup_email("old@example.com").await,
        Vec::<Value>::new()
    );
    let found = app.lookup_email("NEW@example.com").await;
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["id"], mover["id"]);
    let freed = app
        .create_customer_ok(&customer_body("old@example.com"))
        .await;
    assert_ne!(freed["id"], mover["id"]);
    let found = app.lookup_email("taken@example.com").await;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["id"], holder["id"]);

    // Act again: an acknowledged email change survives kill -9.
    app.patch_json(&mover_path, &json!({"email": "newer@example.com"}))
        .await
        .assert_status(200);
    app.crash();
    drop(app);
    let app = restart(&dir).await;

    // Assert
    assert_eq!(
        app.lookup_email("new@example.com").await,
        Vec::<Value>::new()
    );
    let found = app.lookup_email("newer@example.com").await;
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["id"], mover["id"]);
    let found = app.lookup_email("old@example.com").await;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["id"], freed["id"]);
    app.create_customer_ok(&customer_body("new@example.com"))
        .await;
    app.create_customer(&customer_body("Newer@example.com"))
        .await
        .assert_field_error("email", TAKEN);
}

/// Writes a batch of customers (concurrently), orders and one update.
async fn write_batch(app: &TestApp, tag: &str, written: &mut Written) {
    let a = store_a();
    let bodies: Vec<Value> = (0..12)
        .map(|i| {
            let mut body = customer_body(&format!("{tag}-{i}@example.com"));
            body["first_name"] = json!(format!("{tag} {i}"));
            body
        })
        .collect();
    let responses = join_all(bodies.iter().map(|body| app.create_customer(body))).await;
    for (body, response) in bodies.iter().zip(&responses) {
        response.assert_status(201);
        written.customers.push(Known {
            creds: a.clone(),
            id: id_of(&response.json()),
            email: body["email"].as_str().unwrap().to_string(),
            password: None,
        });
    }
    let ids: Vec<i64> = written
        .customers
        .iter()
        .rev()
        .take(12)
        .map(|c| c.id)
        .collect();
    let orders: Vec<Value> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            json!({"customer_id": id, "box_id": 217, "frequency": "weekly",
                   "extras": [{"id": 28, "quantity": i + 1}]})
        })
        .collect();
    let responses = join_all(orders.iter().map(|body| app.create_order(body))).await;
    for response in responses {
        response.assert_status(201);
        written.orders.push((a.clone(), id_of(&response.json())));
    }
    app.patch_json(
        &format!("/v1/customers/{}", ids[0]),
        &json!({"last_name": format!("Renamed {tag}"), "address": {"city": "Leeds"}}),
    )
    .await
    .assert_status(200);
    let b = app.create_customer_b_ok(&format!("{tag}@example.de")).await;
    written.customers.push(Known {
        creds: store_b(),
        id: id_of(&b),
        email: format!("{tag}@example.de"),
        password: None,
    });
}

/// Writes a batch tagged `tag` through `app`, and returns what the API then shows of
/// everything written (every view a success).
async fn write_and_observe(
    app: &TestApp,
    tag: &str,
    written: &mut Written,
) -> BTreeMap<String, Value> {
    write_batch(app, tag, written).await;
    let before = observe(app, written).await;
    assert_all_ok(&before);
    before
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_durability_off_a_graceful_shutdown_still_keeps_every_acknowledged_write() {
    // Arrange: `--durability off` on the command line
    let dir = DataDir::new();
    let mut written = Written::default();
    let mut app = Launch::new()
        .on(&dir)
        .args(&["--durability", "off"])
        .spawn()
        .await;
    let before = write_and_observe(&app, "flag", &mut written).await;

    // Act
    app.terminate_ok(STOP);
    drop(app);
    let mut app = restart(&dir).await;

    // Assert
    assert_same_views(&before, &observe(&app, &written).await);

    // Arrange again: `BOXSUB_DURABILITY=off` in the environment
    app.terminate_ok(STOP);
    drop(app);
    let mut app = Launch::new()
        .on(&dir)
        .env(&[("BOXSUB_DURABILITY", "off")])
        .spawn()
        .await;
    let before = write_and_observe(&app, "env", &mut written).await;

    // Act
    app.terminate_ok(STOP);
    drop(app);
    let app = restart(&dir).await;

    // Assert
    assert_same_views(&before, &observe(&app, &written).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_durability_off_a_kill_9_keeps_what_the_log_synced_before_it() {
    // Arrange: writes answered at once, then time for the log's syncs in the background
    // (at most one every --commit-interval-us, 1 ms) to cover them
    let dir = DataDir::new();
    let mut written = Written::default();
    let mut app = Launch::new()
        .on(&dir)
        .args(&["--durability", "off"])
        .spawn()
        .await;
    let before = write_and_observe(&app, "crash", &mut written).await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Act
    app.crash();
    drop(app);
    let app = restart(&dir).await;

    // Assert: the restart replayed the log
    assert_same_views(&before, &observe(&app, &written).await);
}

/// Rounds of creates with durability off, syncing at most every 100 ms, each ended by a
/// kill -9 the moment its reader has seen the feed (so that the log's syncs have not
/// covered the last writes), and a restart:
/// an id answered to a client is never another record's afterwards (its record is there as
/// it was answered, or gone), and an event number a reader was shown never another event's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_durability_off_a_kill_9_never_gives_an_answered_id_or_a_shown_event_number_again() {
    let dir = DataDir::new();
    // Customer id → its email; order id → its customer; event sequence → its id.
    let mut customers: BTreeMap<i64, String> = BTreeMap::new();
    let mut orders: BTreeMap<i64, i64> = BTreeMap::new();
    let mut events: BTreeMap<u64, String> = BTreeMap::new();
    let mut lost = 0;
    for round in 0..4 {
        let mut app = Launch::new()
            .on(&dir)
            .args(&["--durability", "off", "--commit-interval-us", "100000"])
            .spawn()
            .await;
        // Everything answered before this start still reads as it was answered, or not at
        // all.
        for (id, email) in &customers {
            let got = app.get(&format!("/v1/customers/{id}")).await;
            match got.status {
                200 => assert_eq!(got.json()["email"], json!(email), "customer {id}"),
                404 => lost += 1,
                other => panic!("customer {id}: {other}"),
            }
        }
        for (id, customer) in &orders {
            let got = app.get(&format!("/v1/orders/{id}")).await;
            match got.status {
                200 => assert_eq!(got.json()["customer_id"], json!(customer), "order {id}"),
                404 => lost += 1,
                other => panic!("order {id}: {other}"),
            }
        }
        let feed = app.get("/v1/events?limit=1000").await;
        assert_eq!(feed.status, 200, "{}", feed.text());
        for event in feed.json()["events"].as_array().unwrap() {
            let sequence = event["sequence"].as_u64().unwrap();
            let id = event["id"].as_str().unwrap().to_owned();
            if let Some(shown) = events.get(&sequence) {
                assert_eq!(shown, &id, "event {sequence} was shown as another event");
            }
        }
        // New writes, as fast as they are answered, then the feed as a reader sees it, and
        // the crash at once.
        for n in 0..30 {
            let email = format!("r{round}n{n}@example.com");
            let customer = app.create_customer_ok(&customer_body(&email)).await;
            let customer_id = id_of(&customer);
            customers.insert(customer_id, email);
            let order = app
                .create_order_ok(&json!({"order": {"customer_id": customer_id, "box_id": 217}}))
                .await;
            orders.insert(id_of(&order), customer_id);
        }
        let feed = app.get("/v1/events?limit=1000").await;
        for event in feed.json()["events"].as_array().unwrap() {
            let sequence = event["sequence"].as_u64().unwrap();
            let id = event["id"].as_str().unwrap().to_owned();
            assert_eq!(
                events.entry(sequence).or_insert_with(|| id.clone()),
                &id,
                "event {sequence} was shown as another event"
            );
        }
        app.crash();
        drop(app);
    }
    eprintln!("answered writes a crash took: {lost}");
    assert!(
        lost > 0,
        "no crash took an answered write: the test proves nothing"
    );
}

#[test]
fn a_data_dir_that_is_a_regular_file_stops_start_up_naming_it() {
    // Arrange
    let dir = DataDir::new();
    let file = dir.sibling("not-a-directory");
    std::fs::write(&file, b"I am a file, not a store\n").unwrap();
    let mut cmd = boxsub_command();
    cmd.arg("serve")
        .args(["--addr", "127.0.0.1:0", "--data-dir"])
        .arg(&file)
        .arg("--catalogue")
        .arg(&dir.catalogue);

    // Act
    let finished = run_to_exit(cmd, REFUSAL);

    // Assert
    let status = finished.status.unwrap_or_else(|| {
        panic!(
            "serve with a regular file as --data-dir did not exit within {REFUSAL:?}\nstdout:\n{}\nstderr:\n{}",
            finished.stdout, finished.stderr
        )
    });
    assert!(
        !status.success(),
        "must exit non-zero, got {status}; stderr:\n{}",
        finished.stderr
    );
    assert!(
        finished.stderr.contains(&file.display().to_string()),
        "stderr must name {}:\n{}",
        file.display(),
        finished.stderr
    );
    assert_eq!(
        std::fs::read(&file).unwrap(),
        b"I am a file, not a store\n",
        "the file must be left alone"
    );
}

/// A xorshift generator seeded from the clock (its seed is printed).
fn clock_rng() -> impl FnMut() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    let mut state = nanos | 1;
    eprintln!("garbage seed: {state}");
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_overwritten_with_garbage_stops_start_up_naming_the_directory() {
    // Arrange: a store with something in it, stopped cleanly
    let dir = DataDir::new();
    let mut app = Launch::new().on(&dir).spawn().await;
    let customer = app
        .create_customer_ok(&customer_body("soon-garbage@example.com"))
        .await;
    app.create_order_ok(&json!({"customer_id": customer["id"], "box_id": 217}))
        .await;
    app.terminate_ok(STOP);
    drop(app);
    let mut next = clock_rng();
    for name in ["db", "conf"] {
        let path = dir.data.join(name);
        let len = std::fs::metadata(&path)
            .unwrap_or_else(|e| {
                let listing: Vec<_> = std::fs::read_dir(&dir.data)
                    .map(|d| d.filter_map(Result::ok).map(|e| e.file_name()).collect())
                    .unwrap_or_default();
                panic!("expected sled's {name} in the data dir ({e}); it holds {listing:?}")
            })
            .len()
            .max(4096) as usize;
        let garbage: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        std::fs::write(&path, garbage).unwrap();
    }
    let mut cmd = boxsub_command();
    cmd.arg("serve")
        .args(["--addr", "127.0.0.1:0", "--data-dir"])
        .arg(&dir.data)
        .arg("--catalogue")
        .arg(&dir.catalogue);

    // Act
    let started = Instant::now();
    let finished = run_to_exit(cmd, REFUSAL);

    // Assert
    let status = finished.status.unwrap_or_else(|| {
        panic!(
            "serve on a garbage store did not exit within {REFUSAL:?} (it was killed after {:?})\nstdout:\n{}\nstderr:\n{}",
            started.elapsed(),
            finished.stdout,
            finished.stderr
        )
    });
    assert!(
        !status.success(),
        "must exit non-zero, got {status}; stderr:\n{}",
        finished.stderr
    );
    assert!(
        finished.stderr.contains(&dir.data.display().to_string()),
        "stderr must name {}:\n{}",
        dir.data.display(),
        finished.stderr
    );
}
