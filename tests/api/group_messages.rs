//! Every changelog message fits: a group whose NATS servers take messages of at most
//! 64 KiB (`max_payload`) imports a webstore of 4 KiB records (1,000 of them would be a
//! 4 MiB batch) through the admin listener, in batches cut to fit, and keeps it across a
//! failover; an export holding one record larger than any message is refused with a clear
//! error, nothing of it is written, and the primary stays the primary. The events' retention
//! sweep of a webstore with a long id, in messages of at most 8 KiB, removes hundreds of
//! events in changes cut to fit, and the primary stays the primary.

use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::*;

const TOKEN: &str = "admin-token-for-the-group-message-tests-0123";

/// How many customers the import brings.
const CUSTOMERS: u64 = 300;

/// An export of store B: `count` customers from id `first`, each with an `address_2` of
/// `note_bytes` bytes.
fn export_of_store_b(first: u64, count: u64, note_bytes: usize) -> String {
    let mut lines = vec![json!({
        "type": "header", "format": "boxsub-export", "version": 1, "webstore": STORE_B
    })];
    for n in 0..count {
        let id = first + n;
        lines.push(json!({
            "type": "customer", "id": id, "webstore_id": STORE_B, "number": n + 1,
            "first_name": "Jana", "last_name": "Berg",
            "email": format!("big{id}@example.com"), "delivery_service_id": 95,
            "address": {
                "address_1": "1 Long Street", "address_2": "x".repeat(note_bytes),
                "suburb": null, "city": "Berlin", "postcode": null, "delivery_note": null,
                "home_phone": null, "mobile_phone": "+49 170 0000000", "work_phone": null
            },
            "password_hash": null
        }));
    }
    lines
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// An admin request to node `i` of `group`: the status and JSON body.
async fn admin(group: &Group, i: usize, path: &str, body: Vec<u8>) -> (u16, Value) {
    let address = group
        .app(i)
        .startup_output
        .iter()
        .find_map(|line| line.strip_prefix("admin listening on http://"))
        .expect("the admin listener's line")
        .to_owned();
    let response = reqwest::Client::new()
        .post(format!("http://{address}{path}"))
        .bearer_auth(TOKEN)
        .body(body)
        .timeout(Duration::from_secs(60))
        .send()
        .await
        .expect("the admin listener answers");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_import_of_4_kib_records_into_64_kib_messages_goes_through_and_survives_a_failover() {
    let test = "group_messages::an_import_of_4_kib_records_into_64_kib_messages_goes_through_and_survives_a_failover";
    let token = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(token.path(), format!("{TOKEN}\n")).unwrap();
    let token_path = token.path().display().to_string();
    let nats = NatsOptions {
        max_payload: Some(64 * 1024),
        ..Default::default()
    };
    let extra = [
        "--webstores",
        STORE_A,
        "--admin-addr",
        "127.0.0.1:0",
        "--admin-token-file",
        token_path.as_str(),
    ];
    let Some(mut group) = Group::start_with(test, 2, &extra, nats).await else {
        return;
    };
    let primary = group.primary(Duration::from_secs(20)).await;
    let standby = 1 - primary;

    // One record larger than any message: refused whole, and the primary stays.
    let (status, body) = admin(
        &group,
        primary,
        &format!("/admin/webstores/{STORE_B}/import"),
        export_of_store_b(900_000, 2, 70 * 1024).into_bytes(),
    )
    .await;
    assert_eq!(status, 409, "an oversized record: {body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("larger than the log takes"),
        "the refusal says why: {message}"
    );
    assert_eq!(health(group.app(primary)).await.0, 200, "still the primary");

    // 300 records of 4 KiB: batches cut to fit 64 KiB messages.
    let (status, body) = admin(
        &group,
        primary,
        &format!("/admin/webstores/{STORE_B}/import"),
        export_of_store_b(1_000_000, CUSTOMERS, 4 * 1024).into_bytes(),
    )
    .await;
    assert_eq!(status, 200, "the import: {body}");
    let (status, body) = admin(
        &group,
        primary,
        &format!("/admin/webstores/{STORE_B}/take"),
        Vec::new(),
    )
    .await;
    assert_eq!(status, 200, "taking store B: {body}");
    assert_eq!(health(group.app(primary)).await.0, 200, "still the primary");
    let (customers, _) = group.app(primary).all_customers_as(&store_b()).await;
    assert_eq!(customers.len() as u64, CUSTOMERS);
    assert!(
        group
            .app(primary)
            .lookup_email_as("big900000@example.com", &store_b())
            .await
            .is_empty(),
        "nothing of the refused export was written"
    );

    // The standby holds it too, once it takes over.
    wait_caught_up(group.app(standby)).await;
    group.kill_and_wipe(primary);
    until_serving(group.app(standby), Duration::from_secs(20))
        .await
        .unwrap_or_else(|| panic!("no takeover:\n{}", group.logs()));
    let (customers, _) = group.app(standby).all_customers_as(&store_b()).await;
    assert_eq!(customers.len() as u64, CUSTOMERS, "after the failover");
    let long = customers
        .iter()
        .filter(|customer| {
            customer["address"]["address_2"]
                .as_str()
                .is_some_and(|note| note.len() == 4 * 1024)
        })
        .count();
    assert_eq!(long as u64, CUSTOMERS, "every record whole");
}

/// A webstore id long enough that a sweep's removals of a few hundred events (about 80
/// bytes each) are larger than a message of 8 KiB.
const LONG_ID: &str = "a-webstore-whose-id-is-long-enough-to-make-each-event-key-long";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_retention_sweep_of_a_long_webstore_id_fits_8_kib_messages_and_the_primary_stays() {
    let test = "group_messages::the_retention_sweep_of_a_long_webstore_id_fits_8_kib_messages_and_the_primary_stays";
    let nats = NatsOptions {
        max_payload: Some(8 * 1024),
        ..Default::default()
    };
    let mut catalogue = default_catalogue();
    catalogue["webstores"][0]["id"] = json!(LONG_ID);
    let dirs = (0..2)
        .map(|_| DataDir::with_catalogue(catalogue.clone()))
        .collect();
    let extra = ["--events-retention-secs", "3"];
    let Some(group) = Group::start_from(test, dirs, &extra, nats).await else {
        return;
    };
    let primary = group.primary(Duration::from_secs(20)).await;
    let app = group.app(primary);

    // 300 events made within about a second, so that a sweep finds most of them old at once.
    let carts = (0..30).map(|cart| async move {
        let mut created = 0;
        for n in 0..10 {
            let email = format!("swept{cart}x{n}@example.com");
            if app.create_customer(&customer_body(&email)).await.status == 201 {
                created += 1;
            }
        }
        created
    });
    let created: usize = futures_util::future::join_all(carts)
        .await
        .into_iter()
        .sum();
    assert_eq!(created, 300);
    let feed = app.get("/v1/events?limit=1000").await;
    feed.assert_status(200);
    assert_eq!(feed.json()["events"].as_array().unwrap().len(), 300);

    // Act and assert: the sweeps remove them all while the primary stays the primary, and
    // it still does 5 s after the last removal (a stalled publish reports it stalled in 2 s).
    let started = std::time::Instant::now();
    let mut emptied: Option<Duration> = None;
    while started.elapsed() < Duration::from_secs(30) {
        let (status, body) = health(app).await;
        assert_eq!(
            status,
            200,
            "the primary stopped serving {} ms into the sweeps: {body}\n{}",
            started.elapsed().as_millis(),
            group.logs()
        );
        if emptied.is_none() {
            let feed = app.get("/v1/events?limit=1000").await;
            feed.assert_status(200);
            if feed.json()["events"].as_array().unwrap().is_empty() {
                emptied = Some(started.elapsed());
            }
        }
        if emptied.is_some_and(|at| started.elapsed() > at + Duration::from_secs(5)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let emptied = emptied.expect("the sweeps removed every old event");
    eprintln!(
        "the sweeps removed 300 events within {} ms",
        emptied.as_millis()
    );
    app.create_customer_ok(&customer_body("after-the-sweep@example.com"))
        .await;
    assert_eq!(group.primary(Duration::from_secs(5)).await, primary);
}
