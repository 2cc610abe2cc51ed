//! Frozen delivery lists: a date's list is frozen once its cut-off passes, and from then on it
//! is what the producer packs, whatever is done later: an order made after the lock is not on
//! it, a change of an order does not reach it, and it stays the same across a restart and
//! through an export and an import.
//!
//! The catalogue locks today at the next minute (store A in UTC, `cutoff` the same day at
//! that minute, its courier on every day), so that a date locks while the test runs: the
//! test waits for the minute (at most about 75 s, plus the freezer's few seconds).

use std::time::{Duration, Instant};

use jiff::civil::Date;
use serde_json::{json, Value};

use crate::helpers::{
    boxsub_command, customer_body, default_catalogue, id_of, run_to_exit, DataDir, Launch, TestApp,
};

const STOP: Duration = Duration::from_secs(10);

/// The default catalogue with store A in UTC, its courier (91) on every day, and its dates
/// locking at `locks` (HH:MM) on the day itself.
fn locking_at(locks: &str) -> Value {
    let mut catalogue = default_catalogue();
    let store = &mut catalogue["webstores"][0];
    store["time_zone"] = json!("UTC");
    store["cutoff"] = json!({"days_before": 0, "time": locks});
    for day in ["mon", "tue", "wed", "thu", "fri", "sat", "sun"] {
        store["delivery_services"][0][day] = json!(true);
    }
    catalogue
}

/// The ids of the orders on store A's list of `date`.
async fn listed(app: &TestApp, date: Date) -> Vec<i64> {
    let response = app
        .get(&format!("/v1/deliveries?date={date}&per_page=1000"))
        .await;
    response.assert_status(200);
    response
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|delivery| delivery["order_id"].as_i64().unwrap())
        .collect()
}

async fn order_on(app: &TestApp, customer: i64, date: Date, box_id: u64) -> i64 {
    id_of(
        &app.create_order_ok(&json!({
            "customer_id": customer, "box_id": box_id, "frequency": "weekly",
            "start_date": date.to_string(), "week_days": [0, 1, 2, 3, 4, 5, 6],
        }))
        .await,
    )
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_date_is_frozen_as_it_was_and_stays_so() {
    // Arrange: today locks at the next minute at least 15 s away (UTC), not tomorrow.
    let mut now = jiff::Timestamp::now().to_zoned_datetime(jiff::tz::TimeZone::UTC);
    if now.hour() == 23 && now.minute() >= 58 {
        tokio::time::sleep(Duration::from_secs(130)).await;
        now = jiff::Timestamp::now().to_zoned_datetime(jiff::tz::TimeZone::UTC);
    }
    let mut lock = now
        .with()
        .second(0)
        .subsec_nanosecond(0)
        .build()
        .unwrap()
        .checked_add(jiff::Span::new().minutes(1))
        .unwrap();
    if (&lock - &now).get_seconds() < 15 {
        lock = lock.checked_add(jiff::Span::new().minutes(1)).unwrap();
    }
    let today = now.date();
    let dir = DataDir::with_catalogue(locking_at(&format!(
        "{:02}:{:02}",
        lock.hour(),
        lock.minute()
    )));
    let mut app = Launch::new().on(&dir).spawn().await;
    let customer = id_of(
        &app.create_customer_ok(&customer_body("frozen@example.com"))
            .await,
    );
    let before = order_on(&app, customer, today, 217).await;
    assert!(listed(&app, today).await.contains(&before));

    // Act: the lock passes; an order made after it, and a change of the first.
    let deadline = Instant::now() + Duration::from_secs(100);
    while jiff::Timestamp::now() < lock.timestamp() {
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let after = order_on(&app, customer, today, 218).await;
    let frozen = loop {
        let list = listed(&app, today).await;
        if !list.contains(&after) {
            break list;
        }
        assert!(
            Instant::now() < deadline,
            "today's list was not frozen within 100 s: {list:?}\n{}",
            app.stderr_tail()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let changed = app
        .patch_json(
            &format!("/v1/orders/{before}"),
            &json!({"order": {"exclusions": [240]}}),
        )
        .await;
    changed.assert_status(200);

    // Assert: the frozen list is what was made before the lock, as it was then.
    assert_eq!(
        frozen,
        vec![before],
        "an order made after the lock is not on the list"
    );
    let list = app
        .get(&format!("/v1/deliveries?date={today}&per_page=1000"))
        .await
        .json();
    assert_eq!(list[0]["box_id"], 217);
    assert_eq!(
        list[0]["exclusions"],
        json!([]),
        "the change does not reach it"
    );
    let own = |id: i64| format!("/v1/orders/{id}/deliveries?from={today}&to={today}");
    let own_before = app.get(&own(before)).await.json();
    assert_eq!(own_before[0]["date"], today.to_string());
    assert_eq!(own_before[0]["locked"], true);
    assert_eq!(app.get(&own(after)).await.json(), json!([]));

    // The same after a restart.
    app.terminate_ok(STOP);
    drop(app);
    let mut app = Launch::new().on(&dir).spawn().await;
    let again = app
        .get(&format!("/v1/deliveries?date={today}&per_page=1000"))
        .await
        .json();
    assert_eq!(again, list, "after a restart");
    assert_eq!(app.get(&own(before)).await.json(), own_before);
    app.terminate_ok(STOP);
    drop(app);

    // And through an export and an import into an empty store.
    let export = dir.sibling("export.jsonl");
    run(&["export", "--output", export.to_str().unwrap()], &dir.data);
    let text = std::fs::read_to_string(&export).unwrap();
    assert!(text.contains(r#""type":"frozen_delivery""#), "{text}");
    assert!(text.contains(r#""type":"frozen_through""#), "{text}");
    let target = DataDir::with_catalogue(locking_at(&format!(
        "{:02}:{:02}",
        lock.hour(),
        lock.minute()
    )));
    run(
        &["import", "--input", export.to_str().unwrap()],
        &target.data,
    );
    let app = Launch::new().on(&target).spawn().await;
    let imported = app
        .get(&format!("/v1/deliveries?date={today}&per_page=1000"))
        .await
        .json();
    assert_eq!(imported, list, "after an import");
    assert_eq!(app.get(&own(after)).await.json(), json!([]));
}
