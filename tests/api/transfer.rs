//! Export, import and online backups: byte-identical round trips, a webstore moved to a host
//! that holds another, refused collisions that write nothing, a running server's directory
//! refused, and a backup taken under writes that holds every write acknowledged before it.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::{
    boxsub_command, customer_body, customer_body_b, id_of, run_to_exit, store_b, DataDir, Finished,
    Launch, TestApp,
};

fn run(args: &[&str], data_dir: &Path) -> Finished {
    let mut cmd = boxsub_command();
    cmd.args(args).arg("--data-dir").arg(data_dir);
    run_to_exit(cmd, Duration::from_secs(60))
}

#[track_caller]
fn succeeded(finished: &Finished) {
    assert!(
        finished.status.is_some_and(|status| status.success()),
        "exit {:?}\nstdout: {}\nstderr: {}",
        finished.status,
        finished.stdout,
        finished.stderr
    );
}

/// Customers of both webstores, with passwords, orders with schedules, and keyed creates.
async fn populate(app: &TestApp) -> Vec<Value> {
    let mut made = Vec::new();
    for n in 0..4 {
        let mut body = customer_body(&format!("a{n}@example.com"));
        body["password"] = json!(format!("password number {n}"));
        let customer = app
            .send(
                reqwest::Method::POST,
                "/v1/customers",
                Some(&app.creds),
                Some(serde_json::to_vec(&body).unwrap()),
                &[("Idempotency-Key", &format!("customer-{n}"))],
            )
            .await;
        customer.assert_status(201);
        let customer = customer.json();
        let order = json!({"customer_id": customer["id"], "box_id": 217, "frequency": "weekly",
                           "start_date": "2027-01-04", "week_days": [1, 4],
                           "extras": [{"id": 28, "quantity": 1}], "exclusions": [240]});
        app.send(
            reqwest::Method::POST,
            "/v1/orders",
            Some(&app.creds),
            Some(serde_json::to_vec(&order).unwrap()),
            &[("Idempotency-Key", &format!("order-{n}"))],
        )
        .await
        .assert_status(201);
        made.push(customer);
    }
    for n in 0..2 {
        let b = app.create_customer_b_ok(&format!("b{n}@example.com")).await;
        app.post_json_as(
            "/v1/orders",
            &json!({"customer_id": b["id"], "box_id": 300}),
            &store_b(),
        )
        .await
        .assert_status(201);
        made.push(b);
    }
    made
}

/// Every customer (with address) and its orders, as the API answers for them.
async fn everything(app: &TestApp, customers: &[Value]) -> Vec<Value> {
    let mut seen = Vec::new();
    for customer in customers {
        let creds = if customer["webstore_id"] == "store-b" {
            store_b()
        } else {
            app.creds.clone()
        };
        let id = id_of(customer);
        seen.push(
            app.get_as(&format!("/v1/customers/{id}?embed=address"), &creds)
                .await
                .json(),
        );
        seen.push(
            app.get_as(&format!("/v1/orders?customer_id={id}"), &creds)
                .await
                .json(),
        );
    }
    seen
}

#[tokio::test]
async fn export_import_export_is_byte_identical_and_everything_reads_the_same() {
    // Arrange
    let source = DataDir::new();
    let app = Launch::new().on(&source).spawn().await;
    let customers = populate(&app).await;
    let before = everything(&app, &customers).await;
    drop(app);
    let first = source.sibling("first.jsonl");
    let second = source.sibling("second.jsonl");
    let target = DataDir::new();

    // Act
    succeeded(&run(
        &["export", "--output", first.to_str().unwrap()],
        &source.data,
    ));
    succeeded(&run(
        &["import", "--input", first.to_str().unwrap()],
        &target.data,
    ));
    succeeded(&run(
        &["export", "--output", second.to_str().unwrap()],
        &target.data,
    ));

    // Assert
    let first_bytes = std::fs::read(&first).unwrap();
    assert_eq!(
        first_bytes,
        std::fs::read(&second).unwrap(),
        "not byte-identical"
    );
    let text = String::from_utf8(first_bytes).unwrap();
    assert!(
        text.contains("\"password_hash\":\"$argon2id$"),
        "hashes are exported"
    );
    assert_eq!(
        text.lines()
            .filter(|l| l.contains("\"type\":\"idempotency\""))
            .count(),
        8
    );
    let app = Launch::new().on(&target).spawn().await;
    assert_eq!(everything(&app, &customers).await, before);
    let signed_in = app.sign_in("a2@example.com", "password number 2").await;
    signed_in.assert_status(200);
    assert_eq!(signed_in.json()[0]["id"], customers[2]["id"]);
    // A replay of a keyed create still replays, from the imported record.
    let replay = app
        .send(
            reqwest::Method::POST,
            "/v1/customers",
            Some(&app.creds),
            Some(
                serde_json::to_vec(&{
                    let mut body = customer_body("a1@example.com");
                    body["password"] = json!("password number 1");
                    body
                })
                .unwrap(),
            ),
            &[("Idempotency-Key", "customer-1")],
        )
        .await;
    replay.assert_status(201);
    assert_eq!(
        replay.header("idempotent-replayed").as_deref(),
        Some("true")
    );
    // New ids continue above the imported ones.
    let fresh = app
        .create_customer_ok(&customer_body("fresh@example.com"))
        .await;
    assert!(customers.iter().all(|c| id_of(c) < id_of(&fresh)));
}

#[tokio::test]
async fn a_webstore_moves_to_a_host_that_holds_another() {
    // Arrange: host 1 (id range 0) has both webstores; host 2 (id range 1) has store A only.
    let host1 = DataDir::new();
    let app1 = Launch::new().on(&host1).spawn().await;
    let customers = populate(&app1).await;
    let b_customers: Vec<Value> = customers
        .iter()
        .filter(|c| c["webstore_id"] == "store-b")
        .cloned()
        .collect();
    let b_before = everything(&app1, &b_customers).await;
    drop(app1);
    let host2 = DataDir::new();
    let app2 = Launch::new()
        .on(&host2)
        .args(&["--id-range", "1"])
        .spawn()
        .await;
    let resident = app2
        .create_customer_ok(&customer_body("resident@example.com"))
        .await;
    assert_eq!(
        id_of(&resident),
        (1i64 << 40) + 1,
        "host 2 gives out ids of range 1"
    );
    drop(app2);
    let moving = host1.sibling("store-b.jsonl");

    // Act
    succeeded(&run(
        &[
            "export",
            "--webstore",
            "store-b",
            "--output",
            moving.to_str().unwrap(),
        ],
        &host1.data,
    ));
    let imported = run(
        &["import", "--input", moving.to_str().unwrap()],
        &host2.data,
    );

    // Assert
    succeeded(&imported);
    assert!(
        imported.stdout.contains("of store-b"),
        "{}",
        imported.stdout
    );
    let app2 = Launch::new()
        .on(&host2)
        .args(&["--id-range", "1"])
        .spawn()
        .await;
    assert_eq!(everything(&app2, &b_customers).await, b_before);
    app2.get(&format!("/v1/customers/{}", id_of(&resident)))
        .await
        .assert_status(200);
    let (all_a, _) = app2.all_customers_as(&app2.creds).await;
    assert_eq!(
        all_a.len(),
        1,
        "store A's customers did not come along: {all_a:?}"
    );
    // Both webstores keep taking customers, with host 2's ids.
    let b_new = app2
        .post_json_as(
            "/v1/customers",
            &customer_body_b("b-new@example.com"),
            &store_b(),
        )
        .await;
    b_new.assert_status(201);
    assert!(id_of(&b_new.json()) > 1i64 << 40);
    assert_eq!(
        b_new.json()["number"],
        "0003",
        "numbers continue after the moved ones"
    );
}

#[tokio::test]
async fn a_colliding_import_is_refused_and_writes_nothing() {
    // Arrange: an export, and a second store that already received it.
    let source = DataDir::new();
    let app = Launch::new().on(&source).spawn().await;
    populate(&app).await;
    drop(app);
    let export = source.sibling("export.jsonl");
    succeeded(&run(
        &["export", "--output", export.to_str().unwrap()],
        &source.data,
    ));
    let target = DataDir::new();
    succeeded(&run(
        &["import", "--input", export.to_str().unwrap()],
        &target.data,
    ));
    let before = target.sibling("before.jsonl");
    succeeded(&run(
        &["export", "--output", before.to_str().unwrap()],
        &target.data,
    ));
    // And a store that has customers of its own in webstore B, from another id range. It
    // serves B alone: a node that served A past a cut-off would hold A's frozen (empty)
    // lists, and be refused for A first.
    let other = DataDir::new();
    let app = Launch::new()
        .on(&other)
        .args(&["--id-range", "2", "--webstores", "store-b"])
        .spawn()
        .await;
    app.create_customer_b_ok("mine@example.com").await;
    drop(app);

    for (what, data_dir, expected) in [
        (
            "the same export again",
            &target.data,
            "already in this store",
        ),
        (
            "into a store with webstore B's own customers",
            &other.data,
            "already has customers",
        ),
    ] {
        // Act
        let refused = run(&["import", "--input", export.to_str().unwrap()], data_dir);

        // Assert
        assert!(
            refused.status.is_some_and(|s| !s.success()),
            "{what}: accepted"
        );
        assert!(
            refused.stderr.contains(expected),
            "{what}: {}",
            refused.stderr
        );
    }
    let after = target.sibling("after.jsonl");
    succeeded(&run(
        &["export", "--output", after.to_str().unwrap()],
        &target.data,
    ));
    assert_eq!(
        std::fs::read(before).unwrap(),
        std::fs::read(after).unwrap()
    );
    // With the range it ran with: a data directory keeps its range for good.
    let app = Launch::new()
        .on(&other)
        .args(&["--id-range", "2"])
        .spawn()
        .await;
    let (b_list, _) = app.all_customers_as(&store_b()).await;
    assert_eq!(b_list.len(), 1, "nothing of the refused import was written");
}

#[tokio::test]
async fn export_and_import_refuse_a_running_servers_data_directory() {
    let dir = DataDir::new();
    let _app = Launch::new().on(&dir).spawn().await;
    for args in [&["export"][..], &["import", "--input", "/dev/null"][..]] {
        let refused = run(args, &dir.data);
        assert!(refused.status.is_some_and(|s| !s.success()), "{args:?}");
        assert!(
            refused.stderr.contains("running server") && refused.stderr.contains("SIGUSR1"),
            "{args:?}: {}",
            refused.stderr
        );
    }
}

/// When a customer (and, if it got one, its order) was acknowledged.
type Acknowledged = (Instant, i64, Option<i64>);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_online_backup_under_writes_holds_every_write_acknowledged_before_it() {
    // Arrange: a server taking customers and orders from four writers.
    let dir = DataDir::new();
    let app = Arc::new(Launch::new().on(&dir).spawn().await);
    let acknowledged: Arc<Mutex<Vec<Acknowledged>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (app, acknowledged, stop) = (app.clone(), acknowledged.clone(), stop.clone());
            tokio::spawn(async move {
                for n in 0..2_000 {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let customer = app
                        .create_customer(&customer_body(&format!("w{w}-{n}@example.com")))
                        .await;
                    if customer.status != 201 {
                        continue;
                    }
                    let id = id_of(&customer.json());
                    let order = app
                        .create_order(&json!({"customer_id": id, "box_id": 217}))
                        .await;
                    let order = (order.status == 201).then(|| id_of(&order.json()));
                    acknowledged
                        .lock()
                        .unwrap()
                        .push((Instant::now(), id, order));
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(700)).await;

    // Act: the backup, while the writers go on.
    let began = Instant::now();
    app.signal("USR1");
    let written = app
        .wait_for_stderr_line(Duration::from_secs(60), |line| {
            line.contains("backup written")
        })
        .unwrap_or_else(|| panic!("no backup: {}", app.stderr_tail()));
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.await.unwrap();
    }

    // Assert: restored into an empty directory, it holds everything acknowledged before the
    // signal, and it imported, so nothing in it was half there.
    let backups: Vec<_> = std::fs::read_dir(dir.data.join("backups"))
        .unwrap()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .collect();
    assert_eq!(backups.len(), 1, "{written}");
    let restored = DataDir::new();
    succeeded(&run(
        &["import", "--input", backups[0].to_str().unwrap()],
        &restored.data,
    ));
    drop(Arc::try_unwrap(app).ok());
    let app = Launch::new().on(&restored).spawn().await;
    let before: Vec<(i64, Option<i64>)> = acknowledged
        .lock()
        .unwrap()
        .iter()
        .filter(|(at, _, _)| *at < began)
        .map(|(_, customer, order)| (*customer, *order))
        .collect();
    assert!(
        before.len() > 10,
        "too few writes before the backup: {}",
        before.len()
    );
    for (customer, order) in &before {
        app.get(&format!("/v1/customers/{customer}"))
            .await
            .assert_status(200);
        if let Some(order) = order {
            app.get(&format!("/v1/orders/{order}"))
                .await
                .assert_status(200);
        }
    }
    let total = acknowledged.lock().unwrap().len();
    println!(
        "online backup: {} of {total} acknowledged customers were written before it began, all \
         in it; {written}",
        before.len()
    );
}

/// A customer's answers tell its account's truth: an export's account line (as a store that
/// recorded a payment and a discount writes it) imported, the customer's `account_balance`,
/// `discount` and `discount?` are the account's; a customer
/// without an account still says `0.00` and no discount.
#[tokio::test]
async fn a_customer_s_answers_carry_its_account_s_balance_and_discount() {
    // Arrange
    let source = DataDir::new();
    let app = Launch::new().on(&source).spawn().await;
    let paid = id_of(
        &app.create_customer_ok(&customer_body("paid@example.com"))
            .await,
    );
    let unpaid = id_of(
        &app.create_customer_ok(&customer_body("unpaid@example.com"))
            .await,
    );
    drop(app);
    let export = source.sibling("with-account.jsonl");
    succeeded(&run(
        &["export", "--output", export.to_str().unwrap()],
        &source.data,
    ));
    let mut text = std::fs::read_to_string(&export).unwrap();
    let account = json!({
        "type": "account", "customer_id": paid, "webstore_id": "store-a",
        "balance_cents": -1250, "discount_ten_thousandths": 1250, "threshold_cents": null,
        "halted_by_balance": false, "transactions": 0, "updated_at": 1_799_000_000
    });
    text.push_str(&format!("{account}\n"));
    std::fs::write(&export, text).unwrap();
    let target = DataDir::new();
    succeeded(&run(
        &["import", "--input", export.to_str().unwrap()],
        &target.data,
    ));

    // Act
    let app = Launch::new().on(&target).spawn().await;
    let by_id = app.get(&format!("/v1/customers/{paid}")).await;
    let other = app.get(&format!("/v1/customers/{unpaid}")).await;

    // Assert
    by_id.assert_status(200);
    let customer = by_id.json();
    assert_eq!(customer["account_balance"], "-12.50", "{customer}");
    assert_eq!(customer["discount"], 0.125, "{customer}");
    assert_eq!(customer["discount?"], true, "{customer}");
    let customer = other.json();
    assert_eq!(customer["account_balance"], "0.00", "{customer}");
    assert_eq!(customer["discount"], 0.0, "{customer}");
    assert_eq!(customer["discount?"], false, "{customer}");
}
