//! A replicated group under test: a real three-node NATS cluster ([`NatsCluster`]) and
//! boxsub nodes (`boxsub serve --changelog`), each reaching the NATS servers only through
//! links of its own ([`Link`]) that a test can cut and heal. With it, what the group tests
//! share: the keyed creates a cart sends, what became of each, and the checks that no
//! acknowledged write was lost and no retried one made twice.
//!
//! Only one group runs at a time on the two cores (a lock every [`Group`] holds), so that
//! its timings are the group's, not the machine's contention. Every process is stopped when
//! its [`Group`] is dropped; every wait is bounded.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::Value;

use super::{customer_body, store_a, DataDir, Launch, Link, NatsCluster, NatsOptions, TestApp};

/// `count` data directories holding the same store of `customers` customers with an order
/// each (written by `boxsub-tools seed`'s code, for the test catalogue's first webstore):
/// nodes of a group may start from copies of one store, since only what changes after
/// travels in the changelog.
pub fn seeded_dirs(count: usize, customers: u64) -> Vec<DataDir> {
    let first = DataDir::new();
    let text = std::fs::read_to_string(&first.catalogue).expect("the test catalogue");
    let catalogue = boxsub::domain::catalogue::Catalogue::parse(&text, 0).expect("it parses");
    boxsub::tools::seed::seed(&first.data, &catalogue, customers).expect("seeding a store");
    let mut dirs = vec![first];
    for _ in 1..count {
        let dir = DataDir::new();
        copy_dir(&dirs[0].data, &dir.data);
        dirs.push(dir);
    }
    dirs
}

/// Copies the files under `from` into `to` (created if missing).
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("create a directory");
    for entry in std::fs::read_dir(from).expect("read a directory") {
        let entry = entry.expect("a directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy a file");
        }
    }
}

/// A changelog stream name no other group of this test process uses.
pub fn group_stream() -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("t{}x{n}", std::process::id())
}

/// Only one group at a time.
static ONE_GROUP_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The longest a failover may take, from the primary's death to the first write the new
/// primary acknowledges (the bound: the 2 s lease, a poll, the promotion).
pub const FAILOVER_BOUND: Duration = Duration::from_secs(5);

/// A boxsub node of the group under test, on a data directory of its own.
pub struct Member {
    /// `a`, `b`, ...
    pub name: String,
    /// Its data directory.
    pub dir: DataDir,
    /// Its process, while it runs.
    pub app: Option<TestApp>,
    /// Its links to the three NATS servers, in their order: it reaches them only through
    /// these.
    pub links: Vec<Link>,
}

/// Boxsub nodes on one NATS cluster.
pub struct Group {
    /// The NATS cluster.
    pub nats: NatsCluster,
    /// The changelog stream's name.
    pub stream: String,
    /// The nodes, `a`, `b`, ...
    pub members: Vec<Member>,
    extra: Vec<String>,
    /// Held while the group runs (declared last: released once its processes are gone).
    _one_at_a_time: tokio::sync::MutexGuard<'static, ()>,
}

impl Group {
    /// A NATS cluster and `nodes` boxsub nodes named `a`, `b`, ... on a stream of their own,
    /// each started with `extra`; `None` (after SKIPPED) without nats-server.
    pub async fn start(test: &str, nodes: usize, extra: &[&str]) -> Option<Group> {
        Group::start_with(test, nodes, extra, NatsOptions::default()).await
    }

    /// [`Group::start`] on a NATS cluster started with `nats` (with its security, each
    /// node connects over TLS as its own user).
    pub async fn start_with(
        test: &str,
        nodes: usize,
        extra: &[&str],
        nats: NatsOptions,
    ) -> Option<Group> {
        let dirs = (0..nodes).map(|_| DataDir::new()).collect();
        Group::start_from(test, dirs, extra, nats).await
    }

    /// [`Group::start_with`] with a node on each of `dirs` (which may hold a store already:
    /// [`seeded_dirs`]).
    pub async fn start_from(
        test: &str,
        dirs: Vec<DataDir>,
        extra: &[&str],
        nats: NatsOptions,
    ) -> Option<Group> {
        Group::launch(test, group_stream(), dirs, extra, nats).await
    }

    /// [`Group::start_with`] on changelog stream `stream` (which the cluster's users may
    /// have been made for: [`super::NatsSecurity`]).
    pub async fn start_named(
        test: &str,
        stream: &str,
        nodes: usize,
        extra: &[&str],
        nats: NatsOptions,
    ) -> Option<Group> {
        let dirs = (0..nodes).map(|_| DataDir::new()).collect();
        Group::launch(test, stream.to_owned(), dirs, extra, nats).await
    }

    async fn launch(
        test: &str,
        stream: String,
        dirs: Vec<DataDir>,
        extra: &[&str],
        nats: NatsOptions,
    ) -> Option<Group> {
        let one_at_a_time = ONE_GROUP_AT_A_TIME.lock().await;
        let nats = NatsCluster::start_with(test, nats).await?;
        let mut group = Group {
            nats,
            stream,
            members: Vec::new(),
            extra: extra.iter().map(|arg| arg.to_string()).collect(),
            _one_at_a_time: one_at_a_time,
        };
        for dir in dirs {
            group.add(dir).await;
        }
        Some(group)
    }

    /// Starts one more node, on `dir`: its name is the next letter.
    pub async fn add(&mut self, dir: DataDir) -> usize {
        let name = ((b'a' + self.members.len() as u8) as char).to_string();
        let mut links = Vec::new();
        for i in 0..3 {
            links.push(Link::to(self.nats.address(i)).await);
        }
        let mut member = Member {
            name,
            dir,
            app: None,
            links,
        };
        member.app = Some(self.spawn(&member).await);
        self.members.push(member);
        self.members.len() - 1
    }

    async fn spawn(&self, member: &Member) -> TestApp {
        let security = self.nats.security();
        let scheme = "nats";
        let urls: Vec<String> = member.links.iter().map(|link| link.url(scheme)).collect();
        let urls = urls.join(",");
        let mut args: Vec<String> = vec![
            "--changelog".into(),
            urls,
            "--changelog-stream".into(),
            self.stream.clone(),
            "--node-name".into(),
            member.name.clone(),
        ];
        if let Some(security) = security {
            args.push("--changelog-creds".into());
            args.push(security.creds_file(&member.name).display().to_string());
            args.push("--changelog-tls-ca".into());
            args.push(security.ca.display().to_string());
        }
        args.extend(self.extra.iter().cloned());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Launch::new()
            .on(&member.dir)
            .args(&args)
            .env(&[("RUST_LOG", "info")])
            .spawn()
            .await
    }

    /// Node `i`'s process (panics if it is not running).
    pub fn app(&self, i: usize) -> &TestApp {
        self.members[i].app.as_ref().expect("the node runs")
    }

    /// The index of the node whose `/health` answers 200, once exactly one does.
    pub async fn primary(&self, within: Duration) -> usize {
        let deadline = Instant::now() + within;
        loop {
            let mut serving = Vec::new();
            for (i, member) in self.members.iter().enumerate() {
                if let Some(app) = &member.app {
                    if health(app).await.0 == 200 {
                        serving.push(i);
                    }
                }
            }
            assert!(serving.len() <= 1, "two nodes serve at once: {serving:?}");
            if let [only] = serving[..] {
                return only;
            }
            assert!(
                Instant::now() < deadline,
                "no primary within {within:?}:\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Kills node `i` with SIGKILL and deletes its data directory.
    pub fn kill_and_wipe(&mut self, i: usize) {
        let member = &mut self.members[i];
        if let Some(mut app) = member.app.take() {
            app.crash();
        }
        std::fs::remove_dir_all(&member.dir.data).expect("deleting the data directory");
        std::fs::create_dir_all(&member.dir.data).expect("an empty data directory");
    }

    /// Starts node `i` again on its (possibly emptied) data directory.
    pub async fn restart(&mut self, i: usize) {
        let app = self.spawn(&self.members[i]).await;
        self.members[i].app = Some(app);
    }

    /// Cuts node `i`'s links to the NATS servers `servers` (every byte stalls).
    pub fn cut(&self, i: usize, servers: &[usize]) {
        for &server in servers {
            self.members[i].links[server].cut();
        }
    }

    /// Heals every link of node `i`.
    pub fn heal(&self, i: usize) {
        for link in &self.members[i].links {
            link.heal();
        }
    }

    /// The last lines each running node logged, for failure messages.
    pub fn logs(&self) -> String {
        self.members
            .iter()
            .filter_map(|member| {
                member
                    .app
                    .as_ref()
                    .map(|app| format!("--- node {}:\n{}", member.name, app.stderr_tail()))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The changelog stream's first and last sequence numbers, read from NATS.
    pub async fn stream_bounds(&self) -> (u64, u64) {
        let client = self.nats.connect().await;
        let jetstream = async_nats::jetstream::new(client);
        let mut stream = jetstream
            .get_stream(&self.stream)
            .await
            .expect("the changelog stream exists");
        let info = stream.info().await.expect("the stream's info");
        (info.state.first_sequence, info.state.last_sequence)
    }
}

/// `GET /health`: the status and body, (0, Null) when the node does not answer.
pub async fn health(app: &TestApp) -> (u16, Value) {
    match app.try_send(Method::GET, "/health", None, None, &[]).await {
        Ok(response) => {
            let body = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
            (response.status, body)
        }
        Err(_) => (0, Value::Null),
    }
}

/// What became of one keyed create.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// 201 with this customer id.
    Acked(i64),
    /// Any other answer, or none: the client does not know.
    Unknown(String),
}

/// What one answer said of its request's write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Said {
    /// 201, made by this request.
    Made,
    /// 201, the replay of an earlier request's (`Idempotent-Replayed: true`).
    Replayed,
    /// 503 with `"outcome":"nothing_changed"`.
    NothingChanged,
    /// Anything else, or no answer: it may or may not be stored.
    Unknown,
}

/// A keyed customer create on `app`: email `{tag}{n}@example.com`, key `{tag}-{n}`.
pub async fn keyed_create(app: &TestApp, tag: &str, n: usize) -> Outcome {
    keyed_create_saying(app, tag, n).await.0
}

/// [`keyed_create`], with what its answer said of the write. A 503 says `nothing_changed`
/// or it is a failure of the test: boxsub answers a write it may have stored otherwise.
pub async fn keyed_create_saying(app: &TestApp, tag: &str, n: usize) -> (Outcome, Said) {
    let email = format!("{tag}{n}@example.com");
    let key = format!("{tag}-{n}");
    let body = serde_json::to_vec(&customer_body(&email)).unwrap();
    let sent = tokio::time::timeout(
        Duration::from_secs(15),
        app.try_send(
            Method::POST,
            "/v1/customers",
            Some(&store_a()),
            Some(body),
            &[
                ("Content-Type", "application/json"),
                ("Idempotency-Key", key.as_str()),
            ],
        ),
    )
    .await;
    match sent {
        Ok(Ok(response)) if response.status == 201 => {
            let said = if response.header("idempotent-replayed").as_deref() == Some("true") {
                Said::Replayed
            } else {
                Said::Made
            };
            let id = response.json()["id"].as_i64().expect("an id");
            (Outcome::Acked(id), said)
        }
        Ok(Ok(response)) => {
            let said = match (
                response.status,
                serde_json::from_slice::<Value>(&response.body),
            ) {
                (503, Ok(body)) => {
                    assert_eq!(
                        body["outcome"], "nothing_changed",
                        "a 503 that does not say nothing was changed: {body}"
                    );
                    Said::NothingChanged
                }
                _ => Said::Unknown,
            };
            let outcome = Outcome::Unknown(format!("{} {}", response.status, response.text()));
            (outcome, said)
        }
        Ok(Err(error)) => (Outcome::Unknown(error), Said::Unknown),
        Err(_) => (Outcome::Unknown("no answer in 15 s".into()), Said::Unknown),
    }
}

/// Holds what a create's answers said to the group's record of it: a create made by an
/// earlier attempt (its last, successful one a replay) must have had an attempt that said
/// its outcome was unknown; one whose every earlier attempt said "nothing was changed" was
/// refused and held.
pub fn assert_refusals_were_true(tag: &str, n: usize, said: &[Said]) {
    if said.last() == Some(&Said::Replayed) {
        assert!(
            said[..said.len() - 1].contains(&Said::Unknown),
            "{tag}{n}: answered \"nothing was changed\" and then replayed as made: {said:?}"
        );
    }
}

/// Keyed creates on `app`, one after another, until `stop` turns true or `limit` are sent:
/// each request's outcome.
pub async fn write_until(
    app: Arc<TestApp>,
    tag: String,
    stop: Arc<std::sync::atomic::AtomicBool>,
    limit: usize,
) -> BTreeMap<usize, Outcome> {
    let mut outcomes = BTreeMap::new();
    for n in 0..limit {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        outcomes.insert(n, keyed_create(&app, &tag, n).await);
    }
    outcomes
}

/// Keyed creates as a cart behind a front end would send them: to whichever of `apps`
/// takes them, each retried with its key (bounded) while they answer 503, until `stop`.
pub async fn write_to_group_until(
    apps: Vec<Arc<TestApp>>,
    tag: String,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> BTreeMap<usize, Outcome> {
    write_to_group_showing(apps, tag, stop, Arc::default()).await
}

/// [`write_to_group_until`], keeping in `progress` the number of the create under way (for
/// readers that look for it: [`read_until`]).
pub async fn write_to_group_showing(
    apps: Vec<Arc<TestApp>>,
    tag: String,
    stop: Arc<std::sync::atomic::AtomicBool>,
    progress: Arc<AtomicUsize>,
) -> BTreeMap<usize, Outcome> {
    let mut outcomes = BTreeMap::new();
    let mut current = 0;
    for n in 0..10_000 {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        progress.store(n, std::sync::atomic::Ordering::Relaxed);
        let (mut outcome, first) = keyed_create_saying(&apps[current], &tag, n).await;
        let mut said = vec![first];
        for _ in 0..100 {
            if matches!(outcome, Outcome::Acked(_))
                || stop.load(std::sync::atomic::Ordering::Relaxed)
            {
                break;
            }
            current = (current + 1) % apps.len();
            tokio::time::sleep(Duration::from_millis(50)).await;
            let (again, saying) = keyed_create_saying(&apps[current], &tag, n).await;
            outcome = again;
            said.push(saying);
        }
        assert_refusals_were_true(&tag, n, &said);
        outcomes.insert(n, outcome);
    }
    outcomes
}

/// One read a reader made.
#[derive(Debug, Clone)]
pub struct Read {
    /// The node it asked.
    pub node: usize,
    /// When the answer came.
    pub at: Instant,
    /// Its status (0 without an answer).
    pub status: u16,
    /// The customer it showed: email and id.
    pub shown: Option<(String, i64)>,
}

/// Looks up by email, on every node in turn, the customers the writers are creating right
/// now (for each writer `(tag, progress)`, the create under way and the one before it) until
/// `stop`: every answer, with the customer it showed. A node that shows a customer whose
/// create it has not made durable is caught here.
pub async fn read_until(
    apps: Vec<Arc<TestApp>>,
    writers: Vec<(String, Arc<AtomicUsize>)>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> Vec<Read> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("a client");
    let creds = store_a();
    let mut reads = Vec::new();
    for round in 0..100_000usize {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        let node = round % apps.len();
        for (tag, progress) in &writers {
            let n = progress.load(std::sync::atomic::Ordering::Relaxed);
            for n in [n.saturating_sub(1), n] {
                let email = format!("{tag}{n}@example.com");
                let answer = client
                    .get(format!(
                        "{}/v1/customers?email={}",
                        apps[node].address,
                        super::enc(&email)
                    ))
                    .header("API-Key", creds.key.as_str())
                    .header("API-Secret", creds.secret.as_str())
                    .send()
                    .await;
                let (status, body) = match answer {
                    Ok(answer) => {
                        let status = answer.status().as_u16();
                        (status, answer.json::<Value>().await.unwrap_or(Value::Null))
                    }
                    Err(_) => (0, Value::Null),
                };
                let shown = body
                    .as_array()
                    .and_then(|found| found.first())
                    .and_then(|customer| customer["id"].as_i64())
                    .map(|id| (email.clone(), id));
                reads.push(Read {
                    node,
                    at: Instant::now(),
                    status,
                    shown,
                });
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    reads
}

/// Every customer a reader was shown is held by the group, as `app` (its primary now)
/// answers: the same email with the same id. How many were checked.
pub async fn assert_every_read_held(app: &TestApp, reads: &[Read]) -> usize {
    let mut shown: BTreeMap<String, i64> = BTreeMap::new();
    for read in reads {
        if let Some((email, id)) = &read.shown {
            if let Some(earlier) = shown.insert(email.clone(), *id) {
                assert_eq!(
                    earlier, *id,
                    "{email} was shown as two customers ({earlier} and {id})"
                );
            }
        }
    }
    for (email, id) in &shown {
        let found = app.lookup_email(email).await;
        let ids: Vec<i64> = found.iter().filter_map(|c| c["id"].as_i64()).collect();
        assert_eq!(
            ids,
            vec![*id],
            "a reader was shown {email} as customer {id}; the group holds {ids:?}"
        );
    }
    shown.len()
}

/// Every acknowledged create is on `app` with its id; every unknown one, retried there with
/// its key, ends with exactly one customer of its email.
pub async fn assert_nothing_lost_or_doubled(
    app: &TestApp,
    tag: &str,
    outcomes: &BTreeMap<usize, Outcome>,
) {
    let mut acked = 0;
    let mut retried = 0;
    for (n, outcome) in outcomes {
        let email = format!("{tag}{n}@example.com");
        match outcome {
            Outcome::Acked(id) => {
                acked += 1;
                let found = app.lookup_email(&email).await;
                let ids: Vec<i64> = found.iter().filter_map(|c| c["id"].as_i64()).collect();
                assert_eq!(
                    ids,
                    vec![*id],
                    "acknowledged create {email} on the new primary"
                );
            }
            Outcome::Unknown(first) => {
                retried += 1;
                let again = keyed_create(app, tag, *n).await;
                let Outcome::Acked(id) = again else {
                    panic!(
                        "the retry of {email} (first answered {first}) on the primary: {again:?}"
                    );
                };
                let found = app.lookup_email(&email).await;
                let ids: Vec<i64> = found.iter().filter_map(|c| c["id"].as_i64()).collect();
                assert_eq!(ids, vec![id], "{email} exists once after its retry");
            }
        }
    }
    eprintln!("{tag}: {acked} acknowledged creates found, {retried} unanswered ones retried");
}

/// Polls `app`'s `/health` until it answers 200; how long that took.
pub async fn until_serving(app: &TestApp, within: Duration) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < within {
        if health(app).await.0 == 200 {
            return Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

/// Waits (bounded) until `app` is a standby that holds the whole changelog.
pub async fn wait_caught_up(app: &TestApp) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, body) = health(app).await;
        if body["state"] == "following" && body["lag"] == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "never caught up: {body}\n{}",
            app.stderr_tail()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
