//! A store with one undecodable record: `--verify-store` refuses to start and names the
//! record; without the flag the server starts, the damaged customer answers 503 (never a
//! wrong answer or a 500), and every other customer is served.

use boxsub::store::kinds::customers;
use std::time::Duration;

use boxsub::store::WriteBatch;

use crate::helpers::*;

/// Overwrites a customer's record with bytes that carry a valid header but a bad payload.
fn damage_customer_record(dir: &DataDir, id: u64) {
    let store = dir.open_store();
    let mut damage = WriteBatch::default();
    damage.put(
        customers::customer_key(id),
        b"BXS\x01\x00\x01\x00\x00\x00\x00garbage".to_vec(),
    );
    store.apply(damage).expect("the damage is written");
    store.close().expect("the store closes");
}

#[tokio::test]
async fn a_damaged_record_is_refused_by_verify_store_and_isolated_without_it() {
    // Arrange: two customers, one of them then damaged while the server is stopped
    let dir = DataDir::new();
    let mut app = Launch::new().on(&dir).spawn().await;
    let damaged = app
        .create_customer_ok(&customer_body("damaged@example.com"))
        .await;
    let healthy = app
        .create_customer_ok(&customer_body("healthy@example.com"))
        .await;
    app.terminate_ok(Duration::from_secs(10));
    drop(app);
    damage_customer_record(&dir, id_of(&damaged) as u64);

    // Act + Assert: --verify-store refuses to serve, naming the data dir and a record
    let mut cmd = boxsub_command();
    cmd.arg("serve")
        .args(["--addr", "127.0.0.1:0", "--verify-store", "--data-dir"])
        .arg(&dir.data)
        .arg("--catalogue")
        .arg(&dir.catalogue);
    let refused = run_to_exit(cmd, Duration::from_secs(20));
    let status = refused
        .status
        .expect("serve --verify-store must exit, not serve");
    assert!(!status.success(), "stderr:\n{}", refused.stderr);
    assert!(
        refused.stderr.contains("unreadable"),
        "stderr:\n{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains(&dir.data.display().to_string()),
        "stderr:\n{}",
        refused.stderr
    );

    // Without the flag: it serves; the damaged customer is a 503, the other one is intact
    let mut app = Launch::new().on(&dir).spawn().await;
    let broken = app.get(&format!("/v1/customers/{}", id_of(&damaged))).await;
    assert_eq!(broken.status, 503, "{}", broken.text());
    assert!(broken.header("retry-after").is_some());
    assert!(!broken.text().contains("garbage") && !broken.text().contains("record"));
    let fine = app.get(&format!("/v1/customers/{}", id_of(&healthy))).await;
    assert_eq!(fine.status, 200, "{}", fine.text());
    assert_eq!(fine.json(), healthy);
    let logged =
        app.wait_for_stderr_line(Duration::from_secs(10), |line| line.contains("unreadable"));
    assert!(
        logged.is_some(),
        "the background check must log the damaged record"
    );
    app.terminate_ok(Duration::from_secs(10));
}
