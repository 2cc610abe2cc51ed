//! A customer is written key by key, its record last (the commit point): an email entry and
//! a number entry first. These tests cut a create and an email change between those writes,
//! as a crash can, then start the server: it finds the store not closed cleanly, puts the
//! entries right from the records, and answers as if the cut writes had never begun.

use boxsub::store::kinds::customers;
use serde_json::json;

use crate::helpers::*;

/// Opens a stopped server's store and writes `entries` as single keys, then drops it without
/// closing it, as a crash would leave it.
fn write_and_crash(dir: &DataDir, entries: &[(Vec<u8>, u64)]) {
    let store = dir.open_store();
    for (key, id) in entries {
        store
            .put_raw(key, id.to_be_bytes().to_vec())
            .expect("the entry is written");
    }
    drop(store);
}

#[tokio::test]
async fn creates_and_email_changes_cut_before_their_record_leave_nothing_behind() {
    // Arrange: two customers, then (server stopped) the first writes of a create of
    // cut@example.com (next id, next number) and of Ann's change to ann.new@example.com.
    let dir = DataDir::new();
    let mut app = Launch::new().on(&dir).spawn().await;
    let ann = id_of(
        &app.create_customer_ok(&customer_body("ann@example.com"))
            .await,
    );
    let bob = id_of(
        &app.create_customer_ok(&customer_body("bob@example.com"))
            .await,
    );
    app.terminate_ok(std::time::Duration::from_secs(10));
    drop(app);
    let cut_id = bob as u64 + 1;
    write_and_crash(
        &dir,
        &[
            (
                customers::email_holder_key(STORE_A, "cut@example.com", cut_id),
                cut_id,
            ),
            (customers::number_key(STORE_A, 3), cut_id),
            (
                customers::email_holder_key(STORE_A, "ann.new@example.com", ann as u64),
                ann as u64,
            ),
        ],
    );

    // Act
    let app = Launch::new().on(&dir).spawn().await;

    // Assert: neither cut write shows.
    let (listed, total) = app.all_customers_as(&store_a()).await;
    assert_eq!(total, Some(2), "{listed:?}");
    let ids: Vec<i64> = listed.iter().map(|c| c["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, [ann, bob]);
    assert!(app.lookup_email("cut@example.com").await.is_empty());
    assert!(app.lookup_email("ann.new@example.com").await.is_empty());
    assert_eq!(app.lookup_email("ann@example.com").await.len(), 1);

    // Both emails are free, and a new customer is listed once, with a number of its own.
    let cut = id_of(
        &app.create_customer_ok(&customer_body("cut@example.com"))
            .await,
    );
    let moved = app
        .patch_json(
            &format!("/v1/customers/{bob}"),
            &json!({"email": "ann.new@example.com"}),
        )
        .await;
    moved.assert_status(200);
    let (listed, total) = app.all_customers_as(&store_a()).await;
    assert_eq!(total, Some(3), "{listed:?}");
    let ids: Vec<i64> = listed.iter().map(|c| c["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, [ann, bob, cut]);
    let mut numbers: Vec<String> = listed.iter().map(|c| c["number"].to_string()).collect();
    numbers.dedup();
    assert_eq!(numbers.len(), 3, "{listed:?}");
    let found = app.lookup_email("ann.new@example.com").await;
    assert_eq!(found[0]["id"].as_i64(), Some(bob));
}
