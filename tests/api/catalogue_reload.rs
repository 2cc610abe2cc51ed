//! Catalogue changes without a restart (SIGHUP), and `boxsub check-catalogue`.

use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::{
    boxsub_command, customer_body, default_catalogue, run_to_exit, sha256_hex, store_a, store_b,
    Creds, DataDir, Launch,
};

const STORE_C_KEY: &str = "ak_test_store_c_reloaded";
const STORE_C_SECRET: &str = "sk_store_c_secret_added_by_a_reload";

/// The default catalogue with a third webstore, store C, in front (reordering must not move
/// the others' data).
fn grown_catalogue() -> Value {
    let mut catalogue = default_catalogue();
    let mut store_c = catalogue["webstores"][1].clone();
    store_c["id"] = json!("store-c");
    store_c["name"] = json!("Store C");
    store_c["api_keys"] =
        json!([{"key": STORE_C_KEY, "secret_sha256": sha256_hex(STORE_C_SECRET)}]);
    catalogue["webstores"]
        .as_array_mut()
        .unwrap()
        .insert(0, store_c);
    // Store A's box 218 is renamed, as an operator edits a catalogue.
    catalogue["webstores"][1]["boxes"][1]["name"] = json!("Renamed Box");
    catalogue
}

fn write(dir: &DataDir, catalogue: &Value) {
    std::fs::write(
        &dir.catalogue,
        serde_json::to_vec_pretty(catalogue).unwrap(),
    )
    .unwrap();
}

#[tokio::test]
async fn sighup_with_a_grown_catalogue_adds_a_webstore_and_changes_boxes() {
    // Arrange
    let dir = DataDir::new();
    let app = Launch::new().on(&dir).spawn().await;
    let ann = app
        .create_customer_ok(&customer_body("ann@example.com"))
        .await;
    let store_c = Creds::new(STORE_C_KEY, STORE_C_SECRET);
    app.get_as("/v1/webstore", &store_c)
        .await
        .assert_status(401);

    // Act
    write(&dir, &grown_catalogue());
    app.signal("HUP");
    let reloaded = app.wait_for_stderr_line(Duration::from_secs(10), |line| {
        line.contains("catalogue reloaded")
    });

    // Assert
    assert!(reloaded.is_some(), "{}", app.stderr_tail());
    let webstore = app.get_as("/v1/webstore", &store_c).await;
    webstore.assert_status(200);
    assert_eq!(webstore.json()["id"], "store-c");
    let c_customer = app
        .post_json_as(
            "/v1/customers",
            &crate::helpers::customer_body_b("c@example.com"),
            &store_c,
        )
        .await;
    c_customer.assert_status(201);
    // Store A is as it was, with the edit in force.
    assert_eq!(
        app.get(&format!("/v1/customers/{}", ann["id"]))
            .await
            .json(),
        ann
    );
    assert_eq!(app.get("/v1/boxes/218").await.json()["name"], "Renamed Box");
    app.create_order_ok(&json!({"customer_id": ann["id"], "box_id": 217}))
        .await;
    app.get_as("/v1/webstore", &store_b())
        .await
        .assert_status(200);
    // And store C's customer is not store A's.
    app.get(&format!("/v1/customers/{}", c_customer.json()["id"]))
        .await
        .assert_not_found();
}

#[tokio::test]
async fn sighup_with_a_broken_catalogue_or_one_dropping_a_webstore_in_use_changes_nothing() {
    // Arrange
    let dir = DataDir::new();
    let app = Launch::new().on(&dir).spawn().await;
    app.create_customer_ok(&customer_body("ann@example.com"))
        .await;
    let mut broken = grown_catalogue();
    broken["webstores"][0]["boxes"][0]["extra_ids"] = json!([999]);
    let mut without_a = default_catalogue();
    without_a["webstores"].as_array_mut().unwrap().remove(0);

    for (what, catalogue, expected) in [
        ("broken", broken, "extra_ids names unknown extra 999"),
        ("without store A", without_a, "store-a still has customers"),
    ] {
        // Act
        write(&dir, &catalogue);
        app.signal("HUP");
        let refused = app.wait_for_stderr_line(Duration::from_secs(10), |line| {
            line.contains("catalogue reload refused") && line.contains(expected)
        });

        // Assert
        assert!(refused.is_some(), "{what}: {}", app.stderr_tail());
        app.get_as("/v1/webstore", &store_a())
            .await
            .assert_status(200);
        app.get_as("/v1/webstore", &Creds::new(STORE_C_KEY, STORE_C_SECRET))
            .await
            .assert_status(401);
        assert_eq!(app.get("/v1/boxes/218").await.json()["name"], "Fixed Box");
    }
}

#[test]
fn check_catalogue_prints_every_problem_with_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.json");
    std::fs::write(&good, serde_json::to_vec(&default_catalogue()).unwrap()).unwrap();
    let mut broken = default_catalogue();
    broken["webstores"][0]["time_zone"] = json!("Atlantis");
    broken["webstores"][0]["boxes"][0]["price"] = json!("cheap");
    broken["webstores"][1]["api_keys"][0]["secret_sha256"] = json!("not hex");
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, serde_json::to_vec(&broken).unwrap()).unwrap();

    let mut check = boxsub_command();
    check.arg("check-catalogue").arg(&good);
    let passed = run_to_exit(check, Duration::from_secs(20));
    assert!(
        passed.status.is_some_and(|s| s.success()),
        "{}",
        passed.stderr
    );
    assert!(
        passed.stdout.contains("a valid catalogue of 2 webstores"),
        "{}",
        passed.stdout
    );

    let mut check = boxsub_command();
    check.arg("check-catalogue").arg(&bad);
    let failed = run_to_exit(check, Duration::from_secs(20));
    assert!(failed.status.is_some_and(|s| !s.success()));
    for (place, problem) in [
        ("webstores[0] (store-a)", "time_zone"),
        (
            "webstores[0] (store-a).boxes[0] (id 217)",
            "price \"cheap\"",
        ),
        ("webstores[1] (store-b).api_keys[0]", "secret_sha256"),
    ] {
        assert!(
            failed
                .stdout
                .lines()
                .any(|line| line.contains(place) && line.contains(problem)),
            "{place}: {problem} missing from:\n{}",
            failed.stdout
        );
    }
}
