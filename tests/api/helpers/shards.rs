//! Shards by webstore under test, for the moves between them (`boxsub move-webstore`): a
//! [`Deployment`] of two shards (a single node each, or a replicated group for the second),
//! the placement file, `boxsub haproxy-config`'s configuration and API-key map, and a real
//! HAProxy in front; carts that write keyed creates through it, and the checks that every
//! acknowledged write is found once. Every process is stopped when its owner is dropped;
//! every wait is bounded.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{
    boxsub_command, customer_body, customer_body_b, default_catalogue, run_to_exit, sha256_hex,
    store_b, Creds, DataDir, Finished, Group, Haproxy, Launch, NatsOptions, TestApp, STORE_A,
    STORE_A_KEY, STORE_B,
};

/// The third webstore of [`three_webstores`].
pub const STORE_C: &str = "store-c";
/// Its API key.
pub const STORE_C_KEY: &str = "ak_test_store_c_51e0c77d93";
/// Its secret.
pub const STORE_C_SECRET: &str = "sk_Cc3pL8vN2xQ7wR4tY9uI1oP6aS5dF0gHj2Kl";
/// The admin listeners' token.
pub const TOKEN: &str = "admin-token-for-the-move-tests-0123456789";

/// Store C's credentials.
pub fn store_c() -> Creds {
    Creds::new(STORE_C_KEY, STORE_C_SECRET)
}

/// Store C's producer account: email and password.
pub const PRODUCER_C: (&str, &str) = ("packer@store-c.example", "shed key for store c");

/// The default catalogue with a third webstore, a copy of store B, and a producer account in
/// stores A ([`super::PRODUCER_A`]) and C ([`PRODUCER_C`]).
pub fn three_webstores() -> Value {
    let mut catalogue = default_catalogue();
    let mut c = catalogue["webstores"][1].clone();
    c["id"] = json!(STORE_C);
    c["name"] = json!("Store C");
    c["api_keys"] = json!([{"key": STORE_C_KEY, "secret_sha256": sha256_hex(STORE_C_SECRET)}]);
    for (webstore, (email, password), salt) in [
        (&mut catalogue["webstores"][0], super::PRODUCER_A, 1u8),
        (&mut c, PRODUCER_C, 3u8),
    ] {
        let hash = boxsub::domain::password::hash_password(password, &[salt; 16])
            .expect("a password hashes");
        webstore["producers"] = json!([{"email": email, "password_hash": hash}]);
    }
    catalogue["webstores"]
        .as_array_mut()
        .expect("webstores")
        .push(c);
    catalogue
}

/// Webstore `k` of those [`Deployment::start_moving`] adds on shard one for moves: its id
/// and credentials (copies of store B).
pub fn moving_webstore(k: usize) -> (String, Creds) {
    (
        format!("store-m{k}"),
        Creds::new(
            &format!("ak_test_store_m{k}_0a1b2c3d"),
            &format!("sk_Mm{k}pL8vN2xQ7wR4tY9uI1oP6aS5dF0gH"),
        ),
    )
}

/// [`three_webstores`] and `moving` more ([`moving_webstore`]).
fn catalogue_with(moving: usize) -> Value {
    let mut catalogue = three_webstores();
    for k in 0..moving {
        let (id, creds) = moving_webstore(k);
        let mut webstore = catalogue["webstores"][1].clone();
        webstore["id"] = json!(id);
        webstore["name"] = json!(format!("Store M{k}"));
        webstore["api_keys"] = json!([{
            "key": creds.key, "secret_sha256": sha256_hex(&creds.secret)
        }]);
        catalogue["webstores"]
            .as_array_mut()
            .expect("webstores")
            .push(webstore);
    }
    catalogue
}

/// A shard: one node on a data directory of its own, with its command line kept for
/// restarts.
pub struct ShardNode {
    /// Its data directory.
    pub dir: DataDir,
    args: Vec<String>,
    env: Vec<(String, String)>,
    /// Its process, while it runs.
    pub app: Option<TestApp>,
}

impl ShardNode {
    pub async fn start(catalogue: &Value, webstores: &str, range: &str, token: &Path) -> ShardNode {
        ShardNode::start_with(catalogue, webstores, range, token, &[]).await
    }

    /// [`ShardNode::start`] with `env` in its environment (kept for its restarts).
    pub async fn start_with(
        catalogue: &Value,
        webstores: &str,
        range: &str,
        token: &Path,
        env: &[(&str, &str)],
    ) -> ShardNode {
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
            env: env
                .iter()
                .map(|(name, value)| (name.to_string(), value.to_string()))
                .collect(),
            app: None,
        };
        node.restart().await;
        node
    }

    pub async fn restart(&mut self) {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
            .collect();
        self.app = Some(
            Launch::new()
                .on(&self.dir)
                .args(&args)
                .env(&env)
                .spawn()
                .await,
        );
    }

    pub fn app(&self) -> &TestApp {
        self.app.as_ref().expect("the node runs")
    }

    /// `127.0.0.1:PORT` of its admin listener.
    pub fn admin(&self) -> String {
        self.app()
            .startup_output
            .iter()
            .find_map(|line| line.strip_prefix("admin listening on http://"))
            .expect("the admin listener's line")
            .to_owned()
    }

    /// The status of store B's customer list asked of this node directly.
    pub async fn store_b_listing(&self) -> u16 {
        self.app().get_as("/v1/customers", &store_b()).await.status
    }

    pub fn api(&self) -> String {
        format!("127.0.0.1:{}", self.app().port)
    }

    /// What this node holds of webstore `id` (`GET /admin/webstores/ID`).
    pub async fn held(&self, id: &str) -> Value {
        let (status, held) = admin(
            self,
            reqwest::Method::GET,
            &format!("/admin/webstores/{id}"),
            vec![],
        )
        .await;
        assert_eq!(status, 200, "what the node holds of {id}: {held}");
        held
    }

    /// Step `step` of a move of webstore `id` on this node (`POST /admin/webstores/ID/STEP`,
    /// without a body: `freeze`, `hand-over`, `take`, `call-off`, `release`…): the status and
    /// JSON body.
    pub async fn move_step(&self, id: &str, step: &str) -> (u16, Value) {
        admin(
            self,
            reqwest::Method::POST,
            &format!("/admin/webstores/{id}/{step}"),
            vec![],
        )
        .await
    }
}

/// An admin request to `node`; the status and JSON body.
pub async fn admin(
    node: &ShardNode,
    method: reqwest::Method,
    path: &str,
    body: Vec<u8>,
) -> (u16, Value) {
    admin_at(&node.admin(), method, path, body).await
}

/// An admin request to the admin listener at `address`; the status and JSON body.
pub async fn admin_at(
    address: &str,
    method: reqwest::Method,
    path: &str,
    body: Vec<u8>,
) -> (u16, Value) {
    let response = reqwest::Client::new()
        .request(method, format!("http://{address}{path}"))
        .bearer_auth(TOKEN)
        .body(body)
        .send()
        .await
        .expect("the admin listener answers");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The second shard: a single node, or a replicated group.
pub enum Shard {
    /// One node.
    Node(ShardNode),
    /// A replicated group's nodes.
    Group(Group),
}

impl Shard {
    /// The single node (panics for a group).
    pub fn node(&self) -> &ShardNode {
        match self {
            Shard::Node(node) => node,
            Shard::Group(_) => panic!("the shard is a group"),
        }
    }

    /// The single node, to stop or restart (panics for a group).
    pub fn node_mut(&mut self) -> &mut ShardNode {
        match self {
            Shard::Node(node) => node,
            Shard::Group(_) => panic!("the shard is a group"),
        }
    }

    /// `127.0.0.1:PORT` of each node's API listener.
    pub fn apis(&self) -> Vec<String> {
        match self {
            Shard::Node(node) => vec![node.api()],
            Shard::Group(group) => group
                .members
                .iter()
                .filter_map(|member| member.app.as_ref())
                .map(|app| format!("127.0.0.1:{}", app.port))
                .collect(),
        }
    }

    /// `127.0.0.1:PORT` of each node's admin listener.
    pub fn admins(&self) -> Vec<String> {
        match self {
            Shard::Node(node) => vec![node.admin()],
            Shard::Group(group) => group
                .members
                .iter()
                .filter_map(|member| member.app.as_ref())
                .map(admin_of)
                .collect(),
        }
    }
}

/// The admin listener's address of a node started with `--admin-addr`.
pub fn admin_of(app: &TestApp) -> String {
    app.startup_output
        .iter()
        .find_map(|line| line.strip_prefix("admin listening on http://"))
        .expect("the admin listener's line")
        .to_owned()
}

/// The deployment: two shards, the placement file, the map, HAProxy.
pub struct Deployment {
    /// Shard `one`: stores A and B at first.
    pub one: ShardNode,
    /// Shard `two`: store C at first.
    pub two: Shard,
    files: tempfile::TempDir,
    frontend: String,
    /// Where HAProxy reaches shard one's API, if not at the node itself (a [`super::Link`]
    /// in front of it).
    one_reached_at: Option<String>,
    /// HAProxy, while it runs.
    pub haproxy: Option<Haproxy>,
}

impl Deployment {
    /// Store A and B on shard one, C on shard two; `None` (SKIPPED) without haproxy.
    pub async fn start(test: &str) -> Option<Deployment> {
        Deployment::start_shards(test, None, 0, &[]).await
    }

    /// [`Deployment::start`] with `env` in shard one's environment.
    pub async fn start_with_env(test: &str, env: &[(&str, &str)]) -> Option<Deployment> {
        Deployment::start_shards(test, None, 0, env).await
    }

    /// [`Deployment::start`] with `moving` more webstores on shard one
    /// ([`moving_webstore`]).
    pub async fn start_moving(test: &str, moving: usize) -> Option<Deployment> {
        Deployment::start_shards(test, None, moving, &[]).await
    }

    /// [`Deployment::start`] with shard two a replicated group of two nodes on a NATS cluster
    /// started with `nats`; `None` (SKIPPED) without nats-server or haproxy.
    pub async fn start_with_group(test: &str, nats: NatsOptions) -> Option<Deployment> {
        Deployment::start_shards(test, Some(nats), 0, &[]).await
    }

    async fn start_shards(
        test: &str,
        group: Option<NatsOptions>,
        moving: usize,
        one_env: &[(&str, &str)],
    ) -> Option<Deployment> {
        let catalogue = catalogue_with(moving);
        let mut on_one = vec![STORE_A.to_owned(), STORE_B.to_owned()];
        on_one.extend((0..moving).map(|k| moving_webstore(k).0));
        let files = tempfile::tempdir().expect("a temp dir");
        let token = files.path().join("admin.token");
        std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
        let one = ShardNode::start_with(&catalogue, &on_one.join(","), "1", &token, one_env).await;
        let two = match group {
            None => Shard::Node(ShardNode::start(&catalogue, STORE_C, "2", &token).await),
            Some(nats) => {
                let token = token.display().to_string();
                let extra = [
                    "--webstores",
                    STORE_C,
                    "--id-range",
                    "2",
                    "--admin-addr",
                    "127.0.0.1:0",
                    "--admin-token-file",
                    token.as_str(),
                ];
                let dirs = (0..2)
                    .map(|_| DataDir::with_catalogue(catalogue.clone()))
                    .collect();
                let group = Group::start_from(test, dirs, &extra, nats).await?;
                group.primary(Duration::from_secs(30)).await;
                Shard::Group(group)
            }
        };
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
            one_reached_at: None,
            haproxy: None,
        };
        let mut placed: Vec<(&str, &str)> = on_one.iter().map(|id| (id.as_str(), "one")).collect();
        placed.push((STORE_C, "two"));
        deployment.write_placement(&placed);
        if !deployment.start_haproxy(test) {
            return None;
        }
        Some(deployment)
    }

    /// A file of the deployment (`placement.json`, `shards.map`, `admin.token`).
    pub fn path(&self, name: &str) -> PathBuf {
        self.files.path().join(name)
    }

    /// Writes the placement file with `webstores` on their shards.
    pub fn write_placement(&self, webstores: &[(&str, &str)]) {
        let placement = json!({
            "frontend": self.frontend,
            "haproxy_socket": self.path("admin.sock"),
            "haproxy_map": self.path("shards.map"),
            "shards": {
                "one": {
                    "nodes": [self.one_reached_at.clone().unwrap_or_else(|| self.one.api())],
                    "admin": [self.one.admin()],
                },
                "two": {"nodes": self.two.apis(), "admin": self.two.admins()},
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
    pub fn refresh_placement(&self) {
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

    /// Has HAProxy reach shard one's API at `address` (a link in front of it) from now on:
    /// the placement file says so, and HAProxy starts again on a configuration made from it.
    pub fn reach_one_at(&mut self, address: &str, test: &str) {
        self.one_reached_at = Some(address.to_owned());
        self.refresh_placement();
        assert!(self.start_haproxy(test), "HAProxy starts again");
    }

    /// Generates the configuration with `boxsub haproxy-config` and starts HAProxy on it.
    pub fn start_haproxy(&mut self, test: &str) -> bool {
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
        while !["shard_one", "shard_two"].iter().all(|backend| {
            // Exactly one: a group's standby must have been found down too.
            let servers = match *backend {
                "shard_two" => self.two.apis().len(),
                _ => 1,
            };
            (0..servers)
                .filter(|&server| haproxy.server_status_of(backend, server).starts_with("UP"))
                .count()
                == 1
        }) {
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

    /// Runs `boxsub move-webstore` to its end (bounded).
    pub fn move_webstore(&self, webstore: &str, to: &str) -> Finished {
        run_to_exit(self.move_command(webstore, to), Duration::from_secs(120))
    }

    /// The `move-webstore` command line for `webstore` to shard `to`.
    pub fn move_command(&self, webstore: &str, to: &str) -> std::process::Command {
        let mut cmd = boxsub_command();
        cmd.args(["move-webstore", webstore, "--placement"])
            .arg(self.path("placement.json"))
            .args(["--to", to, "--admin-token-file"])
            .arg(self.path("admin.token"));
        cmd
    }

    /// HAProxy's front end, `http://127.0.0.1:PORT`.
    pub fn base(&self) -> String {
        self.haproxy.as_ref().expect("HAProxy runs").base_url()
    }
}

/// A keyed create through HAProxy: the status (0 without an answer), and the id on 201.
pub async fn create(base: &str, creds: &Creds, tag: &str, n: usize) -> (u16, Option<i64>) {
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

/// Creates `count` customers of webstore `creds` through the front end, keyed `{tag}{n}`.
pub async fn seed_customers(base: &str, creds: &Creds, tag: &str, count: usize) {
    for n in 0..count {
        assert_eq!(create(base, creds, tag, n).await.0, 201, "{tag}{n}");
    }
}

/// Writes keyed creates through HAProxy until `stop`: each one's time (since the cart
/// started), status and id.
pub async fn cart(
    base: String,
    creds: Creds,
    tag: String,
    stop: Arc<AtomicBool>,
) -> Vec<(Duration, u16, Option<i64>)> {
    cart_since(Instant::now(), base, creds, tag, stop).await
}

/// [`cart`] with each write's time counted from `started`, so that several carts and other
/// events of a test share one clock.
pub async fn cart_since(
    started: Instant,
    base: String,
    creds: Creds,
    tag: String,
    stop: Arc<AtomicBool>,
) -> Vec<(Duration, u16, Option<i64>)> {
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
pub async fn assert_each_once(
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

/// What a webstore's subscriptions that lived look like through the front end: two
/// customers of the webstore of `creds` with weekly orders on Mondays, Wednesdays and
/// Fridays from February 2027, one paused for a week and moved to Mondays alone from a
/// date, one skipping a Wednesday and cancelled from a date, and the second customer
/// halted; their answers and the delivery lists of the dates that tell each change apart.
/// A move, a failover or a restart must keep every byte of it.
pub struct LivedOrders {
    customers: Vec<i64>,
    orders: Vec<i64>,
    answers: Vec<Value>,
    lists: Vec<(String, Value)>,
}

/// Dates whose lists tell the changes apart: the pause's Monday, the skipped Wednesday, the
/// Friday after the pause, one after the cancellation, a Wednesday after the move to Mondays.
const LIVED_DATES: [&str; 5] = [
    "2027-03-01",
    "2027-03-03",
    "2027-03-12",
    "2027-03-19",
    "2027-03-24",
];

impl LivedOrders {
    /// Makes them through `base` and reads them back.
    pub async fn make(base: &str, creds: &Creds) -> LivedOrders {
        let client = reqwest::Client::new();
        let send = |method: reqwest::Method, path: String, body: Value| {
            client
                .request(method, format!("{base}{path}"))
                .header("API-Key", creds.key.as_str())
                .header("API-Secret", creds.secret.as_str())
                .json(&body)
                .timeout(Duration::from_secs(30))
                .send()
        };
        let answer = |sent: reqwest::Result<reqwest::Response>, expected: u16| async move {
            let response = sent.expect("an answer");
            assert_eq!(response.status().as_u16(), expected);
            response.json::<Value>().await.expect("JSON")
        };
        let mut customers = Vec::new();
        let mut orders = Vec::new();
        for tag in ["lived-one", "lived-two"] {
            let body = if creds.key == STORE_A_KEY {
                customer_body(&format!("{tag}@example.com"))
            } else {
                customer_body_b(&format!("{tag}@example.com"))
            };
            let customer = answer(
                send(reqwest::Method::POST, "/v1/customers".into(), body).await,
                201,
            )
            .await;
            let customer = customer["id"].as_i64().expect("an id");
            let mut order = json!({"customer_id": customer, "frequency": "weekly",
                                   "start_date": "2027-02-01", "week_days": [1, 3, 5]});
            order["box_id"] = json!(if creds.key == STORE_A_KEY { 217 } else { 300 });
            let order = answer(
                send(reqwest::Method::POST, "/v1/orders".into(), order).await,
                201,
            )
            .await;
            customers.push(customer);
            orders.push(order["id"].as_i64().expect("an id"));
        }
        for (order, change) in [
            (
                orders[0],
                json!({"pause_date": "2027-03-01", "resume_date": "2027-03-08"}),
            ),
            (
                orders[0],
                json!({"week_days": [1], "effective_date": "2027-03-22"}),
            ),
            (orders[1], json!({"skipped_dates": ["2027-03-03"]})),
            (
                orders[1],
                json!({"active": false, "cancel_date": "2027-03-10"}),
            ),
        ] {
            let path = format!("/v1/orders/{order}");
            let sent = send(reqwest::Method::PATCH, path, json!({ "order": change })).await;
            answer(sent, 200).await;
        }
        let path = format!("/v1/customers/{}", customers[1]);
        let halt = json!({"customer": {"halted": true}});
        answer(send(reqwest::Method::PATCH, path, halt).await, 200).await;
        let lived = LivedOrders {
            customers,
            orders,
            answers: Vec::new(),
            lists: Vec::new(),
        };
        let (answers, lists) = lived.read(base, creds).await;
        // The halt withholds the second customer's order from its first open date; the
        // lists carry the first customer's order where its pause and schedule let it.
        let on = |date: &str| {
            let list = &lists.iter().find(|(d, _)| d == date).expect("read").1;
            list.as_array()
                .expect("a list")
                .iter()
                .map(|delivery| delivery["order_id"].as_i64().expect("an id"))
                .collect::<Vec<_>>()
        };
        let first = lived.orders[0];
        assert_eq!(on("2027-03-01"), Vec::<i64>::new(), "paused");
        assert_eq!(on("2027-03-12"), vec![first], "paused for one week only");
        assert_eq!(on("2027-03-19"), vec![first], "still on Fridays");
        assert_eq!(on("2027-03-24"), Vec::<i64>::new(), "Mondays alone by then");
        LivedOrders {
            answers,
            lists,
            ..lived
        }
    }

    /// The answers of the customers and orders, and the lists of [`LIVED_DATES`].
    async fn read(&self, base: &str, creds: &Creds) -> (Vec<Value>, Vec<(String, Value)>) {
        let client = reqwest::Client::new();
        let get = |path: String| {
            let request = client
                .get(format!("{base}{path}"))
                .header("API-Key", creds.key.as_str())
                .header("API-Secret", creds.secret.as_str())
                .timeout(Duration::from_secs(30));
            async move {
                let response = request.send().await.expect("an answer");
                assert_eq!(response.status().as_u16(), 200, "{path}");
                response.json::<Value>().await.expect("JSON")
            }
        };
        let mut answers = Vec::new();
        for customer in &self.customers {
            answers.push(get(format!("/v1/customers/{customer}")).await);
        }
        for order in &self.orders {
            answers.push(get(format!("/v1/orders/{order}")).await);
            let deliveries = "/deliveries?from=2027-02-22&to=2027-03-31";
            answers.push(get(format!("/v1/orders/{order}{deliveries}")).await);
        }
        let mut lists = Vec::new();
        for date in LIVED_DATES {
            let list = get(format!("/v1/deliveries?date={date}&per_page=1000")).await;
            lists.push((date.to_owned(), list));
        }
        (answers, lists)
    }

    /// Reads them again through `base` and holds them to what was read when they were made.
    pub async fn assert_kept(&self, base: &str, creds: &Creds, what: &str) {
        let (answers, lists) = self.read(base, creds).await;
        assert_eq!(answers, self.answers, "the changed orders' answers {what}");
        assert_eq!(lists, self.lists, "the delivery lists {what}");
    }

    /// The customers it made.
    pub fn customers(&self) -> usize {
        self.customers.len()
    }
}
