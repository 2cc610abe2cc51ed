//! Sharding by webstore: a node started with `--webstores` serves only those webstores of
//! its catalogue and answers every other with 421, changing nothing; what its store records
//! of ownership (a webstore taken from another shard, or released to one) outlasts the flag,
//! and a webstore it released is answered 503 with `Retry-After: 1` (a request routed before
//! the front end switched, which the client sends again), never 421.

use reqwest::Method;
use std::time::Duration;

use crate::helpers::*;

/// Every kind of request of `creds`'s webstore, none of which this node may serve: each is
/// answered `status` with a message that says `says` (and `Retry-After: 1` with a 503).
async fn assert_refused(app: &TestApp, creds: &Creds, status: u16, says: &str) {
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
        assert_eq!(
            response.status,
            status,
            "{method} {path}: {}",
            response.text()
        );
        assert!(
            response.json()["message"]
                .as_str()
                .is_some_and(|message| message.contains(says)),
            "{method} {path}: {}",
            response.text()
        );
        if status == 503 {
            assert_eq!(
                response.header("retry-after").as_deref(),
                Some("1"),
                "{method} {path}"
            );
        }
    }
}

#[tokio::test]
async fn a_node_serves_only_its_webstores_and_answers_421_for_the_others() {
    let dir = DataDir::new();
    let app = Launch::new()
        .on(&dir)
        .args(&["--webstores", STORE_A])
        .spawn()
        .await;
    app.create_customer_ok(&customer_body("ann@example.com"))
        .await;
    assert_refused(&app, &store_b(), 421, "not served here").await;
    // Wrong credentials are still 401: a misdirected request must authenticate first.
    let wrong = Creds::new(STORE_B_KEY, "not-the-secret");
    let response = app.get_as("/v1/customers", &wrong).await;
    assert_eq!(response.status, 401);
    assert_eq!(app.get_without_auth("/v1/ping").await.status, 204);
    drop(app);
    // Nothing of the misrouted requests reached the store.
    let app = Launch::new().on(&dir).spawn().await;
    let (b_customers, _) = app.all_customers_as(&store_b()).await;
    assert!(b_customers.is_empty(), "{b_customers:?}");
    let (a_customers, _) = app.all_customers_as(&store_a()).await;
    assert_eq!(a_customers.len(), 1);
}

#[tokio::test]
async fn a_released_webstore_is_never_served_again_and_a_taken_one_always() {
    use boxsub::domain::ownership::Ownership;
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
        let app = Launch::new().on(&dir).args(args).spawn().await;
        assert_refused(&app, &store_a(), 503, "moved to another host").await;
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
    let finished = serve_to_exit(&dir, &["--webstores", &format!("{STORE_A},no-such-store")]);
    assert!(!finished.status.is_some_and(|s| s.success()));
    assert!(
        finished.stderr.contains("no-such-store"),
        "{}",
        finished.stderr
    );
}

/// A free port of 127.0.0.1, released for whoever binds it next.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn haproxy_from_a_generated_config_routes_each_webstore_to_its_shard() {
    let test = "haproxy_from_a_generated_config_routes_each_webstore_to_its_shard";
    let (one, two) = (DataDir::new(), DataDir::new());
    let shard_one = Launch::new()
        .on(&one)
        .args(&["--webstores", STORE_A, "--id-range", "1"])
        .spawn()
        .await;
    let shard_two = Launch::new()
        .on(&two)
        .args(&["--webstores", STORE_B, "--id-range", "2"])
        .spawn()
        .await;
    let files = tempfile::tempdir().expect("a temp dir");
    let frontend = format!("127.0.0.1:{}", free_port());
    let socket = files.path().join("admin.sock");
    let map = files.path().join("shards.map");
    let placement = files.path().join("placement.json");
    std::fs::write(
        &placement,
        serde_json::to_vec_pretty(&serde_json::json!({
            "frontend": frontend,
            "haproxy_socket": socket,
            "haproxy_map": map,
            "shards": {
                "one": {"nodes": [format!("127.0.0.1:{}", shard_one.port)]},
                "two": {"nodes": [format!("127.0.0.1:{}", shard_two.port)]},
            },
            "webstores": {STORE_A: "one", STORE_B: "two"},
        }))
        .unwrap(),
    )
    .unwrap();
    let mut cmd = boxsub_command();
    cmd.args(["haproxy-config", "--placement"])
        .arg(&placement)
        .arg("--catalogue")
        .arg(&one.catalogue);
    let generated = run_to_exit(cmd, Duration::from_secs(20));
    assert!(
        generated.status.is_some_and(|s| s.success()),
        "{}",
        generated.stderr
    );
    let map_text = std::fs::read_to_string(&map).expect("the map file is written");
    assert!(
        map_text.contains(&format!("{STORE_A_KEY} shard_one")),
        "{map_text}"
    );
    assert!(
        map_text.contains(&format!("{STORE_B_KEY} shard_two")),
        "{map_text}"
    );
    let config = files.path().join("haproxy.cfg");
    // The helper gives the output as lines joined without the last end of line.
    std::fs::write(&config, format!("{}\n", generated.stdout)).unwrap();
    let Some(haproxy) = Haproxy::start_config(test, &config, frontend.parse().unwrap(), &socket)
    else {
        return;
    };
    let client = reqwest::Client::new();
    let base = haproxy.base_url();
    // Both backends pass their health checks before anything is sent.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let up = (0..2)
            .filter(|&i| {
                haproxy
                    .server_status_of(["shard_one", "shard_two"][i], 0)
                    .starts_with("UP")
            })
            .count();
        if up == 2 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "backends not up:\n{}",
            haproxy.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for (creds, body) in [
        (store_a(), customer_body("ann@example.com")),
        (store_b(), customer_body_b("bob@example.com")),
    ] {
        let response = client
            .post(format!("{base}/v1/customers"))
            .header("API-Key", creds.key.as_str())
            .header("API-Secret", creds.secret.as_str())
            .json(&body)
            .send()
            .await
            .expect("through HAProxy");
        assert_eq!(response.status(), 201);
    }
    let unknown = client
        .get(format!("{base}/v1/customers"))
        .header("API-Key", "no-such-key")
        .header("API-Secret", "x")
        .send()
        .await
        .expect("through HAProxy");
    assert_eq!(
        unknown.status(),
        401,
        "an unknown key is answered by a node"
    );
    // Each shard holds its own webstore's customer and refuses the other's.
    assert_eq!(shard_one.lookup_email("ann@example.com").await.len(), 1);
    assert_eq!(
        shard_one.get_as("/v1/customers", &store_b()).await.status,
        421
    );
    assert_eq!(
        shard_two
            .lookup_email_as("bob@example.com", &store_b())
            .await
            .len(),
        1
    );
    assert_eq!(shard_two.get("/v1/customers").await.status, 421);
}

#[tokio::test]
async fn a_data_directory_keeps_its_id_range_for_good() {
    let dir = DataDir::new();
    let app = Launch::new()
        .on(&dir)
        .args(&["--id-range", "3"])
        .spawn()
        .await;
    let created = app
        .create_customer_ok(&customer_body("ann@example.com"))
        .await;
    assert_eq!(created["id"].as_u64(), Some((3u64 << 40) + 1));
    drop(app);
    let refused = serve_to_exit(&dir, &["--id-range", "4"]);
    assert!(!refused.status.is_some_and(|s| s.success()));
    assert!(
        refused.stderr.contains("start it with --id-range 3"),
        "{}",
        refused.stderr
    );
    let app = Launch::new()
        .on(&dir)
        .args(&["--id-range", "3"])
        .spawn()
        .await;
    assert_eq!(app.lookup_email("ann@example.com").await.len(), 1);
}
