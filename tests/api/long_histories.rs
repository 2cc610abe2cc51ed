//! An order changed ten thousand times stays a small record: read, listed on its dates,
//! exported, cancellable, and read again after a restart, its export line a few kilobytes.
//! The changes carry the longest lists the box allows (100 extras, 100 exclusions, 100
//! substitutions), and one in three plans a version from a later date; then forty changes each
//! from a later date than the last meet the cap of 32 planned versions (a change past it is
//! refused with a 422 naming `effective_date`). What the data directory grows by is the event
//! feed (each change's `order.updated` event carries the order), about 3.7 KB a change.

use std::time::Duration;

use jiff::civil::Date;
use serde_json::{json, Value};

use crate::helpers::{
    boxsub_command, customer_body, default_catalogue, id_of, run_to_exit, DataDir, Launch,
};

const CHANGES: usize = 10_000;
const WRITERS: usize = 4;
const LONG: u64 = 100;

/// The default catalogue with store A's box 217 allowing 100 of everything: 100 more extras
/// and 200 more box items to choose them from.
fn long_lists() -> Value {
    let mut catalogue = default_catalogue();
    let store = &mut catalogue["webstores"][0];
    let extras = store["extras"].as_array_mut().unwrap();
    extras.extend((0..LONG).map(
        |n| json!({"id": 5_000 + n, "name": format!("Extra {n}"), "unit": "each", "price": "1.00"}),
    ));
    let items = store["box_items"].as_array_mut().unwrap();
    items.extend((0..2 * LONG).map(|n| json!({"id": 6_000 + n, "name": format!("Item {n}")})));
    let the_box = &mut store["boxes"][0];
    assert_eq!(the_box["id"], 217);
    the_box["extras_limit"] = json!(-1);
    the_box["exclusions_limit"] = json!(LONG);
    the_box["substitutions_limit"] = json!(LONG);
    the_box["extra_ids"] = json!((0..LONG).map(|n| 5_000 + n).collect::<Vec<_>>());
    catalogue
}

/// The `n`th change: every list full, turned by `n` so that each change changes them, and
/// every third one from a Thursday up to 40 weeks on.
fn change(n: usize, first_thursday: Date) -> Value {
    let turn = n as u64 % LONG;
    let extras: Vec<Value> = (0..LONG)
        .map(|i| json!({"id": 5_000 + i, "quantity": 1 + (i + turn) % 5}))
        .collect();
    let exclusions: Vec<u64> = (0..LONG).map(|i| 6_000 + (i + turn) % (2 * LONG)).collect();
    let substitutions: Vec<u64> = (0..LONG)
        .map(|i| 6_000 + (i + turn + LONG) % (2 * LONG))
        .collect();
    let mut body = json!({"extras": extras, "exclusions": exclusions,
                          "substitutions": substitutions});
    if n.is_multiple_of(3) {
        let weeks = (n / 3 % 40) as i64;
        let from = first_thursday
            .checked_add(jiff::Span::new().weeks(weeks))
            .unwrap();
        body["effective_date"] = json!(from.to_string());
    }
    json!({"order": body})
}

fn size_of(path: &std::path::Path) -> u64 {
    std::fs::read_dir(path)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                size_of(&entry.path())
            } else {
                meta.len()
            }
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_changed_ten_thousand_times_stays_small_listed_exported_and_cancellable() {
    // Arrange: a weekly Thursday order of the long box.
    let dir = DataDir::with_catalogue(long_lists());
    let mut app = Launch::new().on(&dir).spawn().await;
    let customer = id_of(
        &app.create_customer_ok(&customer_body("long@example.com"))
            .await,
    );
    let order = app
        .create_order_ok(
            &json!({"customer_id": customer, "box_id": 217, "frequency": "weekly",
                                 "week_days": [4]}),
        )
        .await;
    let id = id_of(&order);
    let path = format!("/v1/orders/{id}");
    let first: Date = order["start_date"].as_str().unwrap().parse().unwrap();

    // Act: ten thousand changes from four writers at once.
    let writers = (0..WRITERS).map(|writer| {
        let (app, path) = (&app, &path);
        async move {
            let (mut made, mut capped) = (0, 0);
            for n in (writer..CHANGES).step_by(WRITERS) {
                let response = app.patch_json(path, &change(n, first)).await;
                match response.status {
                    200 => made += 1,
                    422 => {
                        response.assert_has_error("effective_date");
                        capped += 1;
                    }
                    other => panic!("change {n}: {other} {}", response.text()),
                }
            }
            (made, capped)
        }
    });
    let (made, capped) = futures_util::future::join_all(writers)
        .await
        .into_iter()
        .fold((0, 0), |(m, c), (made, capped)| (m + made, c + capped));

    // Then 40 changes each planned from a later Thursday than the last: the 33rd and every
    // one after it would plan more than 32 versions.
    let mut planned = Vec::new();
    for weeks in 1..=40 {
        let from = first.checked_add(jiff::Span::new().weeks(weeks)).unwrap();
        let body = json!({"order": {"extras": [{"id": 5_000, "quantity": weeks}],
                                    "effective_date": from.to_string()}});
        let response = app.patch_json(&path, &body).await;
        if response.status == 422 {
            response.assert_has_error("effective_date");
        } else {
            response.assert_status(200);
        }
        planned.push(response.status);
    }

    // Assert: every change answered; the order reads, lists and delivers.
    assert_eq!(made + capped, CHANGES);
    assert!(
        made >= CHANGES / 2,
        "{made} made, {capped} refused at the cap"
    );
    let first_refused = planned.iter().position(|status| *status == 422);
    assert!(
        first_refused.is_some_and(|at| at <= 32 && planned[at..].iter().all(|s| *s == 422)),
        "the cap of 32 planned versions: {planned:?}"
    );
    let read = app.get(&path).await;
    read.assert_status(200);
    assert_eq!(
        read.json()["exclusions"].as_array().unwrap().len(),
        LONG as usize
    );
    let deliveries = app.get(&format!("{path}/deliveries")).await;
    deliveries.assert_status(200);
    let next = deliveries.json()[0]["date"].as_str().unwrap().to_owned();
    let listed = app
        .get(&format!("/v1/deliveries?date={next}&per_page=1000"))
        .await;
    listed.assert_status(200);
    assert!(
        listed
            .json()
            .as_array()
            .unwrap()
            .iter()
            .any(|delivery| delivery["order_id"] == id),
        "the order is on its next date's list"
    );

    // And it exports as one line of a few kilobytes, restarts, and cancels.
    app.terminate_ok(Duration::from_secs(20));
    drop(app);
    let data_dir = size_of(&dir.data);
    let export = dir.sibling("export.jsonl");
    let mut cmd = boxsub_command();
    cmd.args(["export", "--output", export.to_str().unwrap(), "--data-dir"])
        .arg(&dir.data);
    let finished = run_to_exit(cmd, Duration::from_secs(120));
    assert!(
        finished.status.is_some_and(|status| status.success()),
        "export: {}",
        finished.stderr
    );
    let text = std::fs::read_to_string(&export).unwrap();
    let line = text
        .lines()
        .find(|line| line.starts_with(&format!("{{\"type\":\"order\",\"id\":{id},")))
        .expect("the order is exported");
    eprintln!(
        "{made} changes made, {capped} refused at the cap; data directory {:.1} MB; the \
         order's export line {} bytes",
        data_dir as f64 / 1e6,
        line.len()
    );
    assert!(
        line.len() < 64 * 1024,
        "the order's line is {} bytes",
        line.len()
    );
    // What grows with the changes is the event feed (each order.updated event carries the
    // order as it became: about 3.7 KB here), not the order's record.
    assert!(
        data_dir < (CHANGES as u64) * 8 * 1024,
        "the data directory holds {data_dir} bytes"
    );
    app = Launch::new().on(&dir).spawn().await;
    app.get(&path).await.assert_status(200);
    let cancelled = app
        .patch_json(&path, &json!({"order": {"active": false}}))
        .await;
    cancelled.assert_status(200);
    assert_eq!(cancelled.json()["active"], false);
    app.terminate_ok(Duration::from_secs(20));
}
