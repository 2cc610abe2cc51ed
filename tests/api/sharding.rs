//! Sharding by webstore: a node started with `--webstores` serves only those webstores of
//! its catalogue and answers every other with 421, changing nothing; what its store records
//! of ownership (a webstore taken from another shard, or released to one) outlasts the flag.

use reqwest::Method;
use std::time::Duration;

use crate::helpers::*;

/// Every kind of request of `creds`'s webstore, none of which this node may serve.
async fn assert_misdirected(app: &TestApp, creds: &Creds) {
    let body = serde_json::to_vec(&customer_body_b("misrouted@example.com")).unwrap();
    for (method, path, body) in [
        (Method::GET, "/v1/customers", None),
        (Method::GET, "/v1/customers/1", None),
        (Method::GET, "/v1/orders", None),
        (Method::GET, "/v1/webstore", None),
        (Method::POST, "/v1/customers", Some(body.clone())),
        (Method::POST, "/v1/orders", Some(body.clone())),
        (Method::GET, "/v1/no-such-path", None),
    ] {
        let response = app
            .send(
                method.clone(),
                path,
                Some(creds),
                body,
                &[("Content-Type", "application/json")],
            )
            .await;
        assert_eq!(response.status, 421, "{method} {path}: {}", response.text());
        assert!(
            response.json()["message"]
                .as_str()
                .is_some_and(|message| message.contains("not served here")),
            "{method} {path}: {}",
            response.text()
        );
    }
}

#[tokio::test]
async fn a_node_serves_only_its_webstores_and_answers_421_for_the_others() {
    let dir = DataDir::new();
    let app = spawn_app_on_with(&dir, &["--webstores", STORE_A], &[]).await;
    app.create_customer_ok(&customer_body("ann@example.com"))
        .await;
    assert_misdirected(&app, &store_b()).await;
    // Wrong credentials are still 401: a misdirected request must authenticate first.
    let wrong = Creds::new(STORE_B_KEY, "not-the-secret");
    let response = app.get_as("/v1/customers", &wrong).await;
    assert_eq!(response.status, 401);
    assert_eq!(app.get_without_auth("/v1/ping").await.status, 204);
    drop(app);
    // Nothing of the misrouted requests reached the store.
    let app = spawn_app_on(&dir).await;
    let (b_customers, _) = app.all_customers_as(&store_b()).await;
    assert!(b_customers.is_empty(), "{b_customers:?}");
    let (a_customers, _) = app.all_customers_as(&store_a()).await;
    assert_eq!(a_customers.len(), 1);
}

#[tokio::test]
async fn a_released_webstore_is_never_served_again_and_a_taken_one_always() {
    use boxsub::domain::placement::Ownership;
    let dir = DataDir::new();
    {
        let store = dir.open_store();
        // What a move leaves: this shard gave store A away and took store B.
        drop(store.set_ownership(STORE_A, Ownership::Released).unwrap());
        drop(store.set_ownership(STORE_B, Ownership::Taken).unwrap());
        store.close().unwrap();
    }
    // Started with the command line it had before the move, and with none.
    for (pass, args) in [&["--webstores", STORE_A][..], &[]].into_iter().enumerate() {
        let app = spawn_app_on_with(&dir, args, &[]).await;
        assert_misdirected(&app, &store_a()).await;
        let created = app
            .create_customer_b_ok(&format!("bo{pass}@example.com"))
            .await;
        assert!(created["id"].as_i64().is_some());
    }
    let store = dir.open_store();
    let records = store.ownership_records().unwrap();
    assert!(records.contains(&(STORE_A.to_owned(), Ownership::Released)));
    assert!(records.contains(&(STORE_B.to_owned(), Ownership::Taken)));
    store.close().unwrap();
}

#[test]
fn webstores_the_catalogue_does_not_have_are_refused_at_start() {
    let dir = DataDir::new();
    let mut cmd = boxsub_command();
    cmd.arg("serve")
        .arg("--addr")
        .arg("127.0.0.1:0")
        .arg("--data-dir")
        .arg(&dir.data)
        .arg("--catalogue")
        .arg(&dir.catalogue)
        .args(["--webstores", &format!("{STORE_A},no-such-store")]);
    let finished = run_to_exit(cmd, Duration::from_secs(20));
    assert!(!finished.status.is_some_and(|s| s.success()));
    assert!(
        finished.stderr.contains("no-such-store"),
        "{}",
        finished.stderr
    );
}
