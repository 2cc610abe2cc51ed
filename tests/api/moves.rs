//! Moving a webstore between running shards behind a real HAProxy (`boxsub move-webstore`):
//! carts write to three webstores through HAProxy while one of them moves; the webstores
//! that stay see no error, the moving one only 503s for a moment, nothing is lost or doubled,
//! and every process restarted with its original command line (HAProxy from a freshly
//! generated configuration) serves each webstore from its new shard only. Interrupted moves
//! (the command, the source or the target stopped midway) are run again to completion.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::*;

const STORE_C: &str = "store-c";
const STORE_C_KEY: &str = "ak_test_store_c_51e0c77d93";
const STORE_C_SECRET: &str = "sk_Cc3pL8vN2xQ7wR4tY9uI1oP6aS5dF0gHj2Kl";
const TOKEN: &str = "admin-token-for-the-move-tests-0123456789";

fn store_c() -> Creds {
    Creds::new(STORE_C_KEY, STORE_C_SECRET)
}

/// The default catalogue with a third webstore, a copy of store B.
fn three_webstores() -> Value {
    let mut catalogue = default_catalogue();
    let mut c = catalogue["webstores"][1].clone();
    c["id"] = json!(STORE_C);
    c["name"] = json!("Store C");
    c["api_keys"] = json!([{"key": STORE_C_KEY, "secret_sha256": sha256_hex(STORE_C_SECRET)}]);
    catalogue["webstores"]
        .as_array_mut()
        .expect("webstores")
        .push(c);
    catalogue
}

/// A shard: one node on a data directory of its own, with its command line kept for
/// restarts.
struct ShardNode {
    dir: DataDir,
    args: Vec<String>,
    app: Option<TestApp>,
}

impl ShardNode {
    async fn start(catalogue: &Value, webstores: &str, range: &str, token: &Path) -> ShardNode {
        let dir = DataDir::with_catalogue(catalogue.clone());
        let args = vec![
            "--webstores".to_owned(),
            webstores.to_owned(),
            "--id-range".to_owned(),
            range.to_owned(),
            "--admin-addr".to_owned(),
            "127.0.0.1:0".to_owned(),
            "--admin-token-file".to_owned(),
            token.display().to_string(),
        ];
        let mut node = ShardNode {
            dir,
            args,
            app: None,
        };
        node.restart().await;
        node
    }

    async fn restart(&mut self) {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        self.app = Some(spawn_app_on_with(&self.dir, &args, &[]).await);
    }

    fn app(&self) -> &TestApp {
        self.app.as_ref().expect("the node runs")
    }

    /// `127.0.0.1:PORT` of its admin listener.
    fn admin(&self) -> String {
        self.app()
            .startup_output
            .iter()
            .find_map(|line| line.strip_prefix("admin listening on http://"))
            .expect("the admin listener's line")
            .to_owned()
    }

    /// The status of store B's customer list asked of this node directly.
    async fn store_b_listing(&self) -> u16 {
        self.app().get_as("/v1/customers", &store_b()).await.status
    }

    fn api(&self) -> String {
        format!("127.0.0.1:{}", self.app().port)
    }
}

/// An admin request to `node`; the status and JSON body.
async fn admin(
    node: &ShardNode,
    method: reqwest::Method,
    path: &str,
    body: Vec<u8>,
) -> (u16, Value) {
    let response = reqwest::Client::new()
        .request(method, format!("http://{}{path}", node.admin()))
        .bearer_auth(TOKEN)
        .body(body)
        .send()
        .await
        .expect("the admin listener answers");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The deployment: two shards, the placement file, the map, HAProxy.
struct Deployment {
    one: ShardNode,
    two: ShardNode,
    files: tempfile::TempDir,
    frontend: String,
    haproxy: Option<Haproxy>,
}

impl Deployment {
    /// Store A and B on shard one, C on shard two; `None` (SKIPPED) without haproxy.
    async fn start(test: &str) -> Option<Deployment> {
        let catalogue = three_webstores();
        let files = tempfile::tempdir().expect("a temp dir");
        let token = files.path().join("admin.token");
        std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
        let one = ShardNode::start(&catalogue, &format!("{STORE_A},{STORE_B}"), "1", &token).await;
        let two = ShardNode::start(&catalogue, STORE_C, "2", &token).await;
        let frontend = format!(
            "127.0.0.1:{}",
            std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port()
        );
        let mut deployment = Deployment {
            one,
            two,
            files,
            frontend,
            haproxy: None,
        };
        deployment.write_placement(&[(STORE_A, "one"), (STORE_B, "one"), (STORE_C, "two")]);
        if !deployment.start_haproxy(test) {
            return None;
        }
        Some(deployment)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.files.path().join(name)
    }

    fn write_placement(&self, webstores: &[(&str, &str)]) {
        let placement = json!({
            "frontend": self.frontend,
            "haproxy_socket": self.path("admin.sock"),
            "haproxy_map": self.path("shards.map"),
            "shards": {
                "one": {"nodes": [self.one.api()], "admin": [self.one.admin()]},
                "two": {"nodes": [self.two.api()], "admin": [self.two.admin()]},
            },
            "webstores": webstores.iter().map(|(w, s)| (w.to_string(), json!(s))).collect::<serde_json::Map<_, _>>(),
        });
        std::fs::write(
            self.path("placement.json"),
            serde_json::to_vec_pretty(&placement).unwrap(),
        )
        .unwrap();
    }

    /// The nodes' addresses in the placement file, as they are now (after restarts).
    fn refresh_placement(&self) {
        let text = std::fs::read_to_string(self.path("placement.json")).unwrap();
        let placement: Value = serde_json::from_str(&text).unwrap();
        let webstores: Vec<(String, String)> = placement["webstores"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(w, s)| (w.clone(), s.as_str().unwrap().to_owned()))
            .collect();
        let pairs: Vec<(&str, &str)> = webstores
            .iter()
            .map(|(w, s)| (w.as_str(), s.as_str()))
            .collect();
        self.write_placement(&pairs);
    }

    /// Generates the configuration with `boxsub haproxy-config` and starts HAProxy on it.
    fn start_haproxy(&mut self, test: &str) -> bool {
        self.haproxy = None;
        let mut cmd = boxsub_command();
        cmd.args(["haproxy-config", "--placement"])
            .arg(self.path("placement.json"))
            .arg("--catalogue")
            .arg(&self.one.dir.catalogue);
        let generated = run_to_exit(cmd, Duration::from_secs(20));
        assert!(
            generated.status.is_some_and(|s| s.success()),
            "{}",
            generated.stderr
        );
        std::fs::write(self.path("haproxy.cfg"), format!("{}\n", generated.stdout)).unwrap();
        let Some(haproxy) = Haproxy::start_config(
            test,
            &self.path("haproxy.cfg"),
            self.frontend.parse().unwrap(),
            &self.path("admin.sock"),
        ) else {
            return false;
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !["shard_one", "shard_two"]
            .iter()
            .all(|backend| haproxy.server_status_of(backend, 0).starts_with("UP"))
        {
            assert!(
                Instant::now() < deadline,
                "backends not up:\n{}",
                haproxy.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        self.haproxy = Some(haproxy);
        true
    }

    fn move_webstore(&self, webstore: &str, to: &str) -> Finished {
        let mut cmd = boxsub_command();
        cmd.args(["move-webstore", webstore, "--placement"])
            .arg(self.path("placement.json"))
            .args(["--to", to, "--admin-token-file"])
            .arg(self.path("admin.token"));
        run_to_exit(cmd, Duration::from_secs(120))
    }

    fn base(&self) -> String {
        self.haproxy.as_ref().expect("HAProxy runs").base_url()
    }
}

/// A keyed create through HAProxy: the status (0 without an answer), and the id on 201.
async fn create(base: &str, creds: &Creds, tag: &str, n: usize) -> (u16, Option<i64>) {
    let body = if creds.key == STORE_A_KEY {
        customer_body(&format!("{tag}{n}@example.com"))
    } else {
        customer_body_b(&format!("{tag}{n}@example.com"))
    };
    let sent = reqwest::Client::new()
        .post(format!("{base}/v1/customers"))
        .header("API-Key", creds.key.as_str())
        .header("API-Secret", creds.secret.as_str())
        .header("Idempotency-Key", format!("{tag}-{n}"))
        .json(&body)
        .timeout(Duration::from_secs(30))
        .send()
        .await;
    match sent {
        Ok(response) => {
            let status = response.status().as_u16();
            let id = response
                .json::<Value>()
                .await
                .ok()
                .and_then(|b| b["id"].as_i64());
            (status, id)
        }
        Err(_) => (0, None),
    }
}

/// Writes keyed creates through HAProxy until `stop`: each one's time, status and id.
async fn cart(
    base: String,
    creds: Creds,
    tag: String,
    stop: Arc<AtomicBool>,
) -> Vec<(Duration, u16, Option<i64>)> {
    let started = Instant::now();
    let mut log = Vec::new();
    for n in 0..100_000 {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let (status, id) = create(&base, &creds, &tag, n).await;
        log.push((started.elapsed(), status, id));
    }
    log
}

/// Every acknowledged create of `tag` is found through HAProxy with its id, and every other
/// one, retried with its key, exists exactly once.
async fn assert_each_once(
    base: &str,
    creds: &Creds,
    tag: &str,
    log: &[(Duration, u16, Option<i64>)],
) {
    let client = reqwest::Client::new();
    for (n, (_, status, id)) in log.iter().enumerate() {
        let (status, id) = if *status == 201 {
            (201, *id)
        } else {
            create(base, creds, tag, n).await
        };
        assert_eq!(status, 201, "{tag}{n}");
        let found: Vec<Value> = client
            .get(format!("{base}/v1/customers?email={tag}{n}@example.com"))
            .header("API-Key", creds.key.as_str())
            .header("API-Secret", creds.secret.as_str())
            .send()
            .await
            .expect("a lookup")
            .json()
            .await
            .expect("a list");
        let ids: Vec<Option<i64>> = found.iter().map(|c| c["id"].as_i64()).collect();
        assert_eq!(
            ids,
            vec![id],
            "{tag}{n} exists once, with the id it was answered"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_webstore_moves_between_running_shards_while_carts_write_to_three() {
    let test = "a_webstore_moves_between_running_shards_while_carts_write_to_three";
    let Some(mut deployment) = Deployment::start(test).await else {
        return;
    };
    let stop = Arc::new(AtomicBool::new(false));
    let carts: Vec<_> = [(store_a(), "a"), (store_b(), "b"), (store_c(), "c")]
        .into_iter()
        .map(|(creds, tag)| {
            tokio::spawn(cart(deployment.base(), creds, tag.to_owned(), stop.clone()))
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let moved = {
        let deployment = &deployment;
        tokio::task::block_in_place(|| deployment.move_webstore(STORE_B, "two"))
    };
    assert!(
        moved.status.is_some_and(|s| s.success()),
        "{}\n{}",
        moved.stdout,
        moved.stderr
    );
    eprintln!("move-webstore said:\n{}", moved.stdout);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    stop.store(true, Ordering::Relaxed);
    let mut logs = BTreeMap::new();
    for (tag, cart) in ["a", "b", "c"].into_iter().zip(carts) {
        logs.insert(tag, cart.await.expect("a cart"));
    }
    // The webstores that stayed saw no error at all.
    for tag in ["a", "c"] {
        let errors: Vec<_> = logs[tag].iter().filter(|(_, s, _)| *s != 201).collect();
        assert!(
            errors.is_empty(),
            "store {tag} saw errors during the move: {errors:?}"
        );
    }
    // The moving one saw only 503s, for a moment.
    let b = &logs["b"];
    assert!(
        b.iter().all(|(_, s, _)| matches!(s, 201 | 503)),
        "{:?}",
        b.iter()
            .filter(|(_, s, _)| !matches!(s, 201 | 503))
            .collect::<Vec<_>>()
    );
    let first_refused = b.iter().position(|(_, s, _)| *s == 503);
    if let Some(first) = first_refused {
        let before = if first == 0 {
            Duration::ZERO
        } else {
            b[first - 1].0
        };
        let after = b[first..]
            .iter()
            .find(|(_, s, _)| *s == 201)
            .map(|(at, _, _)| *at)
            .expect("writes resumed");
        let refused = b.iter().filter(|(_, s, _)| *s == 503).count();
        eprintln!(
            "store b: {refused} writes refused, for {} ms",
            (after - before).as_millis()
        );
        assert!(
            after - before <= Duration::from_secs(2),
            "store b's writes stopped for {:?}",
            after - before
        );
    }
    let base = deployment.base();
    assert_each_once(&base, &store_a(), "a", &logs["a"]).await;
    assert_each_once(&base, &store_b(), "b", &logs["b"]).await;
    assert_each_once(&base, &store_c(), "c", &logs["c"]).await;
    // The source holds nothing of it, and refuses it.
    assert_eq!(deployment.one.store_b_listing().await, 421);
    let (_, held) = admin(
        &deployment.one,
        reqwest::Method::GET,
        &format!("/admin/webstores/{STORE_B}"),
        vec![],
    )
    .await;
    assert_eq!(
        (held["customers"].as_u64(), held["orders"].as_u64()),
        (Some(0), Some(0)),
        "{held}"
    );
    assert_eq!(held["recorded"], "released");
    let placement: Value =
        serde_json::from_str(&std::fs::read_to_string(deployment.path("placement.json")).unwrap())
            .unwrap();
    assert_eq!(placement["webstores"][STORE_B], "two");
    let map = std::fs::read_to_string(deployment.path("shards.map")).unwrap();
    assert!(map.contains(&format!("{STORE_B_KEY} shard_two")), "{map}");
    // Every process restarted with its original command line, HAProxy from a fresh config.
    let b_customers = logs["b"].len();
    deployment.haproxy = None;
    deployment.one.app = None;
    deployment.two.app = None;
    deployment.one.restart().await;
    deployment.two.restart().await;
    deployment.refresh_placement();
    assert!(deployment.start_haproxy(test));
    let base = deployment.base();
    assert_eq!(
        deployment.one.store_b_listing().await,
        421,
        "released for good"
    );
    let (b_now, _) = deployment.two.app().all_customers_as(&store_b()).await;
    assert_eq!(
        b_now.len(),
        b_customers,
        "store b on shard two after the restarts"
    );
    assert_eq!(create(&base, &store_b(), "after", 0).await.0, 201);
    assert_eq!(create(&base, &store_a(), "after", 0).await.0, 201);
    // Moving it again is a no-op that says so.
    let again = deployment.move_webstore(STORE_B, "two");
    assert!(
        again.status.is_some_and(|s| s.success()),
        "{}",
        again.stderr
    );
    assert!(again.stdout.contains("nothing to do"), "{}", again.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_move_interrupted_on_either_side_or_in_the_command_completes_when_run_again() {
    let test = "a_move_interrupted_on_either_side_or_in_the_command_completes_when_run_again";
    let Some(mut deployment) = Deployment::start(test).await else {
        return;
    };
    let base = deployment.base();
    for n in 0..20 {
        assert_eq!(create(&base, &store_b(), "m", n).await.0, 201);
    }
    let path = format!("/admin/webstores/{STORE_B}");
    // The command stopped after the freeze: the source refuses the webstore's writes...
    let (status, _) = admin(
        &deployment.one,
        reqwest::Method::POST,
        &format!("{path}/freeze"),
        vec![],
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(create(&base, &store_b(), "m", 99).await.0, 503);
    // ...and the source crashed and came back with its command line: still frozen (durable).
    if let Some(mut app) = deployment.one.app.take() {
        app.crash();
    }
    deployment.one.restart().await;
    deployment.refresh_placement();
    assert!(deployment.start_haproxy(test));
    let base = deployment.base();
    assert_eq!(
        create(&base, &store_b(), "m", 99).await.0,
        503,
        "a restarted source stays frozen"
    );
    assert_eq!(deployment.one.store_b_listing().await, 200, "reads go on");
    // The target took an import and crashed before taking the webstore.
    let export = reqwest::Client::new()
        .get(format!("http://{}{path}/export", deployment.one.admin()))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .to_vec();
    let (status, imported) = admin(
        &deployment.two,
        reqwest::Method::POST,
        &format!("{path}/import"),
        export,
    )
    .await;
    assert_eq!(status, 200, "{imported}");
    if let Some(mut app) = deployment.two.app.take() {
        app.crash();
    }
    deployment.two.restart().await;
    assert_eq!(deployment.two.store_b_listing().await, 421, "not taken yet");
    deployment.refresh_placement();
    assert!(deployment.start_haproxy(test));
    // Run again, the move completes: nothing lost, nothing twice.
    let moved = deployment.move_webstore(STORE_B, "two");
    assert!(
        moved.status.is_some_and(|s| s.success()),
        "{}\n{}",
        moved.stdout,
        moved.stderr
    );
    let base = deployment.base();
    let (customers, _) = deployment.two.app().all_customers_as(&store_b()).await;
    assert_eq!(customers.len(), 20, "{}", moved.stdout);
    assert_eq!(
        create(&base, &store_b(), "m", 99).await.0,
        201,
        "writes resume on the target"
    );
    for n in 0..20 {
        assert_eq!(
            create(&base, &store_b(), "m", n).await.0,
            201,
            "a keyed retry replays"
        );
    }
    let (customers, _) = deployment.two.app().all_customers_as(&store_b()).await;
    assert_eq!(customers.len(), 21);
    // The admin listener wants its token.
    let response = reqwest::Client::new()
        .get(format!("http://{}{path}", deployment.two.admin()))
        .bearer_auth("wrong-token-wrong-token")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    // A shard never takes back a webstore it released.
    let (status, body) = admin(
        &deployment.one,
        reqwest::Method::POST,
        &format!("{path}/take"),
        vec![],
    )
    .await;
    assert_eq!(status, 409, "{body}");
}
