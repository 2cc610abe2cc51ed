//! The test harness: starts the real `boxsub` binary on an ephemeral port of
//! 127.0.0.1 with a catalogue and data directory of its own, and offers typed
//! request helpers and assertions on the contract's response shapes.
//!
//! Every process started here is owned by a value whose `Drop` kills and reaps
//! it; every wait is bounded in count and time.

use std::collections::{BTreeSet, VecDeque};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::header::HeaderMap;
use reqwest::Method;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long the server may take to print its `listening on` line.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a raw TCP exchange may take before the test fails.
const RAW_TIMEOUT: Duration = Duration::from_secs(15);

/// The address fields of a customer, in the contract's order (section 4).
pub const ADDRESS_FIELDS: [&str; 9] = [
    "address_1",
    "address_2",
    "suburb",
    "city",
    "postcode",
    "delivery_note",
    "home_phone",
    "mobile_phone",
    "work_phone",
];

/// Webstore ids of the test catalogue.
pub const STORE_A: &str = "store-a";
/// The second webstore, used to prove tenant isolation.
pub const STORE_B: &str = "store-b";

/// Store A's API key.
pub const STORE_A_KEY: &str = "ak_test_store_a_3f9c2e71b5";
/// Store A's API secret (only its SHA-256 goes into the catalogue).
pub const STORE_A_SECRET: &str = "sk_Qm7vT2xL9pR4wZ8cN1bH6jK3dF5gS0aYe2Uo";
/// Store B's API key.
pub const STORE_B_KEY: &str = "ak_test_store_b_8d41b0c6a2";
/// Store B's API secret.
pub const STORE_B_SECRET: &str = "sk_Xe4nU7yP2qW9rT6mV3zL8kJ1hG5fD0sCi7Ba";

/// The exact 401 bodies of the contract, section 1.
pub const MSG_MISSING_CREDS: &str =
    "Could not authenticate. You must set the API-Key and API-Secret headers.";
/// The 401 message for a wrong key or secret.
pub const MSG_BAD_CREDS: &str = "Could not authenticate. Invalid API-Key or API-Secret headers.";
/// The 404 message.
pub const MSG_NOT_FOUND: &str = "Resource not found";
/// The 405 message.
pub const MSG_METHOD_NOT_ALLOWED: &str = "Method not allowed";
/// The 413 message.
pub const MSG_TOO_LARGE: &str = "Request body too large";
/// The 422 message for a body that is not JSON.
pub const MSG_INVALID_JSON: &str = "Invalid JSON";

/// Validation messages fixed by the contract.
pub const BLANK: &str = "can't be blank";
/// See [`BLANK`].
pub const INVALID: &str = "is invalid";
/// See [`BLANK`].
pub const TAKEN: &str = "has already been taken";
/// See [`BLANK`].
pub const NOT_IN_LIST: &str = "is not included in the list";
/// See [`BLANK`].
pub const TOO_LONG_255: &str = "is too long (maximum is 255 characters)";

/// An API key pair.
#[derive(Clone, Debug)]
pub struct Creds {
    /// The `API-Key` header value.
    pub key: String,
    /// The `API-Secret` header value.
    pub secret: String,
}

impl Creds {
    /// A key pair from two strings.
    pub fn new(key: &str, secret: &str) -> Self {
        Self {
            key: key.to_string(),
            secret: secret.to_string(),
        }
    }
}

/// Store A's credentials (the default of every helper).
pub fn store_a() -> Creds {
    Creds::new(STORE_A_KEY, STORE_A_SECRET)
}

/// Store B's credentials.
pub fn store_b() -> Creds {
    Creds::new(STORE_B_KEY, STORE_B_SECRET)
}

/// Lowercase hex SHA-256 of a string's bytes.
pub fn sha256_hex(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

/// Percent-encodes everything but RFC 3986 unreserved characters.
pub fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn delivery_service(id: i64, name: &str, fee: &str, days: &[&str], pickup: bool) -> Value {
    let mut ds = json!({
        "id": id, "name": name, "instructions": format!("Instructions for {name}"),
        "fee": fee, "pickup_point": pickup,
    });
    for day in ["mon", "tue", "wed", "thu", "fri", "sat", "sun"] {
        ds[day] = json!(days.contains(&day));
    }
    ds
}

#[allow(clippy::too_many_arguments)]
fn a_box(
    id: i64,
    name: &str,
    price: &str,
    likes: bool,
    dislikes: bool,
    extras_allowed: bool,
    limits: (i64, i64, i64),
    hidden: bool,
    extra_ids: &[i64],
    images: Value,
) -> Value {
    json!({
        "id": id, "name": name, "description": format!("The {name}"), "price": price,
        "likes": likes, "dislikes": dislikes, "extras_allowed": extras_allowed,
        "extras_limit": limits.0, "exclusions_limit": limits.1, "substitutions_limit": limits.2,
        "hidden": hidden, "extra_ids": extra_ids, "images": images,
    })
}

fn store_a_json() -> Value {
    let mut ws = json!({
        "id": STORE_A, "name": "Store A Organics", "locale": "en", "currency": "GBP",
        "time_zone": "London", "city": "London", "email": "hello@store-a.example",
        "phone": "020 7946 0000", "sidebar_description": "Fresh boxes for London",
        "active": true, "payment_options": ["cash_on_delivery"],
        "require_phone": false, "require_address_1": true, "require_address_2": false,
        "require_suburb": false, "require_city": true, "require_postcode": false,
        "require_delivery_note": false, "collect_phone": true, "collect_delivery_note": true,
    });
    ws["api_keys"] = json!([{"key": STORE_A_KEY, "secret_sha256": sha256_hex(STORE_A_SECRET)}]);
    ws["delivery_services"] = json!([
        delivery_service(91, "Courier", "5.00", &["mon", "thu"], false),
        delivery_service(92, "Market Pickup", "2.50", &["tue", "sat"], true),
    ]);
    ws["box_items"] = json!([
        {"id": 240, "name": "Apple (Red)"},
        {"id": 241, "name": "Banana"},
        {"id": 242, "name": "Carrot"},
        {"id": 243, "name": "Date"},
        {"id": 244, "name": "Eggplant"},
    ]);
    ws["extras"] = json!([
        {"id": 28, "name": "Apple Juice", "unit": "4 litres", "price": "7.50"},
        {"id": 29, "name": "Free Range Eggs", "unit": "dozen", "price": "6.00"},
        {"id": 30, "name": "Honey", "unit": "jar", "price": "9.25"},
    ]);
    ws["boxes"] = json!([
        a_box(
            217,
            "5kg Box",
            "30.00",
            true,
            true,
            true,
            (-1, 3, 2),
            false,
            &[28, 29],
            json!({"thumb": "https://example.com/217-thumb.jpg"})
        ),
        a_box(
            218,
            "Fixed Box",
            "18.00",
            false,
            false,
            false,
            (0, 0, 0),
            false,
            &[],
            json!({})
        ),
        a_box(
            219,
            "Flexi Box",
            "22.50",
            true,
            true,
            true,
            (2, -1, -1),
            false,
            &[28, 29, 30],
            json!({})
        ),
        a_box(
            220,
            "Secret Box",
            "99.00",
            true,
            true,
            true,
            (-1, -1, -1),
            true,
            &[28],
            json!({})
        ),
    ]);
    ws
}

fn store_b_json() -> Value {
    let mut ws = json!({
        "id": STORE_B, "name": "Store B Gemuese", "locale": "de", "currency": "EUR",
        "time_zone": "Berlin", "city": "Berlin", "email": "hallo@store-b.example",
        "phone": "", "sidebar_description": "", "active": true,
        "payment_options": ["cash_on_delivery"],
        "require_phone": true, "require_address_1": false, "require_address_2": false,
        "require_suburb": false, "require_city": false, "require_postcode": false,
        "require_delivery_note": false, "collect_phone": true, "collect_delivery_note": true,
    });
    ws["api_keys"] = json!([{"key": STORE_B_KEY, "secret_sha256": sha256_hex(STORE_B_SECRET)}]);
    ws["delivery_services"] = json!([delivery_service(
        95,
        "Bike Courier",
        "3.50",
        &["mon", "wed", "fri"],
        false
    )]);
    ws["box_items"] = json!([{"id": 400, "name": "Kartoffel"}]);
    ws["extras"] = json!([{"id": 50, "name": "Brot", "unit": "loaf", "price": "4.00"}]);
    ws["boxes"] = json!([a_box(
        300,
        "Gemuesekiste",
        "25.00",
        true,
        true,
        true,
        (-1, -1, -1),
        false,
        &[50],
        json!({})
    )]);
    ws
}

/// The catalogue every test uses unless it passes its own: two webstores.
pub fn default_catalogue() -> Value {
    json!({"webstores": [store_a_json(), store_b_json()]})
}

/// The default catalogue with every `require_*` of store A switched off.
pub fn relaxed_catalogue() -> Value {
    let mut cat = default_catalogue();
    for field in [
        "require_phone",
        "require_address_1",
        "require_address_2",
        "require_suburb",
        "require_city",
        "require_postcode",
        "require_delivery_note",
    ] {
        cat["webstores"][0][field] = json!(false);
    }
    cat
}

/// A valid store-A customer body with this email.
pub fn customer_body(email: &str) -> Value {
    json!({
        "first_name": "Joe", "last_name": "Dalton", "email": email,
        "delivery_service_id": 91,
        "address": {"address_1": "1 My Street", "city": "London", "postcode": "XXX123",
                    "home_phone": "007"},
    })
}

/// A valid store-B customer body with this email (store B requires a phone).
pub fn customer_body_b(email: &str) -> Value {
    json!({
        "first_name": "Jana", "last_name": "Berg", "email": email,
        "delivery_service_id": 95,
        "address": {"mobile_phone": "+49 170 0000000"},
    })
}

/// The command that runs the binary under test, with the environment cleared of
/// everything that could change its configuration.
pub fn boxsub_command() -> Command {
    clean(Command::new(env!("CARGO_BIN_EXE_boxsub")))
}

/// `cmd` with the environment cleared of everything that could change the server's
/// configuration, and no stdin.
fn clean(mut cmd: Command) -> Command {
    for var in [
        "RUST_LOG",
        "BOXSUB_ADDR",
        "BOXSUB_DATA_DIR",
        "BOXSUB_CATALOGUE",
        "BOXSUB_DURABILITY",
    ] {
        cmd.env_remove(var);
    }
    cmd.stdin(Stdio::null());
    cmd
}

/// Reads a pipe line by line on a thread, sending each line (lossily decoded)
/// until end of file. Dropping the receiver just discards the rest, so the child
/// never blocks on a full pipe.
fn pipe_lines(pipe: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let reader = BufReader::new(pipe);
        for line in reader.split(b'\n') {
            let Ok(line) = line else { break };
            let line = String::from_utf8_lossy(&line).trim_end().to_string();
            let _ = tx.send(line);
        }
    });
    rx
}

/// Keeps the last lines a child wrote to stderr, for failure messages.
fn keep_tail(pipe: impl Read + Send + 'static) -> Arc<Mutex<VecDeque<String>>> {
    let tail = Arc::new(Mutex::new(VecDeque::new()));
    let sink = Arc::clone(&tail);
    std::thread::spawn(move || {
        let reader = BufReader::new(pipe);
        for line in reader.split(b'\n') {
            let Ok(line) = line else { break };
            let mut tail = sink.lock().unwrap_or_else(|e| e.into_inner());
            if tail.len() >= 200 {
                tail.pop_front();
            }
            tail.push_back(String::from_utf8_lossy(&line).trim_end().to_string());
        }
    });
    tail
}

fn tail_text(tail: &Arc<Mutex<VecDeque<String>>>) -> String {
    let tail = tail.lock().unwrap_or_else(|e| e.into_inner());
    tail.iter().cloned().collect::<Vec<_>>().join("\n")
}

/// A running `boxsub serve` and a client for it.
pub struct TestApp {
    /// Base URL, always `http://127.0.0.1:PORT`.
    pub address: String,
    /// The port the server picked.
    pub port: u16,
    /// A shared HTTP client.
    pub client: reqwest::Client,
    /// The credentials the plain helpers send (store A by default).
    pub creds: Creds,
    /// The stdout lines printed before `listening on`.
    pub startup_output: Vec<String>,
    child: Child,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    /// The temp dir of a server started by `spawn_app*`; `None` for one started
    /// on a [`DataDir`] the test owns.
    _dir: Option<TempDir>,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the server with the default two-store catalogue.
pub async fn spawn_app() -> TestApp {
    spawn_app_with(default_catalogue()).await
}

/// Starts the server with this catalogue.
pub async fn spawn_app_with(catalogue: Value) -> TestApp {
    let dir = tempfile::tempdir().expect("failed to create a temp dir");
    let path = dir.path().join("catalogue.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&catalogue).unwrap())
        .expect("failed to write the catalogue");
    start_server(dir, Some(&path))
}

/// Starts the server with its built-in demo catalogue (no `--catalogue`).
pub async fn spawn_demo_app() -> TestApp {
    let dir = tempfile::tempdir().expect("failed to create a temp dir");
    start_server(dir, None)
}

/// A data directory and catalogue that outlive any one server process, so a
/// test can stop a server and start another on the same state.
pub struct DataDir {
    /// The directory passed as `--data-dir` (created empty).
    pub data: PathBuf,
    /// The catalogue file passed as `--catalogue`.
    pub catalogue: PathBuf,
    root: TempDir,
}

impl Default for DataDir {
    fn default() -> Self {
        Self::new()
    }
}

impl DataDir {
    /// A fresh, empty data directory with the default two-store catalogue.
    pub fn new() -> Self {
        Self::with_catalogue(default_catalogue())
    }

    /// Opens the store of a stopped server, as a tool would, to change it behind the
    /// server's back. Close it to leave it as a clean shutdown would; drop it without
    /// closing to leave it as a crash would.
    pub fn open_store(&self) -> boxsub::store::Store {
        use boxsub::store::{disk::Reserve, Durability, Store, StoreError, StoreOptions};
        let options = StoreOptions {
            durability: Durability::Sync {
                commit_interval: std::time::Duration::ZERO,
            },
            cache_bytes: 1 << 20,
            reserve: Reserve::Bytes(0),
        };
        Store::open(&self.data, options, Arc::new(|_: &StoreError| {}))
            .expect("the stopped server's store opens")
    }

    /// A fresh, empty data directory with this catalogue.
    pub fn with_catalogue(catalogue: Value) -> Self {
        let root = tempfile::tempdir().expect("failed to create a temp dir");
        let data = root.path().join("data");
        std::fs::create_dir_all(&data).expect("failed to create the data dir");
        let path = root.path().join("catalogue.json");
        std::fs::write(&path, serde_json::to_vec_pretty(&catalogue).unwrap())
            .expect("failed to write the catalogue");
        Self {
            data,
            catalogue: path,
            root,
        }
    }

    /// A data directory at `data` (created if missing; a test's own filesystem, say),
    /// with the default catalogue kept in a temp directory.
    pub fn at(data: PathBuf) -> Self {
        let root = tempfile::tempdir().expect("failed to create a temp dir");
        std::fs::create_dir_all(&data).expect("failed to create the data dir");
        let path = root.path().join("catalogue.json");
        std::fs::write(
            &path,
            serde_json::to_vec_pretty(&default_catalogue()).unwrap(),
        )
        .expect("failed to write the catalogue");
        Self {
            data,
            catalogue: path,
            root,
        }
    }

    /// A path inside the temp root, beside the data directory (for files a
    /// test makes itself).
    pub fn sibling(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }
}

/// Starts the server on `dir` (the same directory may be used again by a later
/// server once this one has stopped).
pub async fn spawn_app_on(dir: &DataDir) -> TestApp {
    spawn_app_on_with(dir, &[], &[]).await
}

/// Starts the server on `dir` with extra arguments (`["--durability", "off"]`)
/// and environment variables.
pub async fn spawn_app_on_with(
    dir: &DataDir,
    extra_args: &[&str],
    env: &[(&str, &str)],
) -> TestApp {
    let launch = Launch {
        extra_args,
        env,
        ulimit: None,
        log_file: None,
    };
    start_process(&dir.data, Some(&dir.catalogue), launch, None)
}

/// Starts the server on `dir` with extra arguments, under an open-files limit set by the
/// shell: `ulimit_args` such as `-Sn 1024` (a host whose default soft limit is that low) or
/// `-n 64` (soft and hard).
pub async fn spawn_app_on_under_ulimit(
    dir: &DataDir,
    ulimit_args: &str,
    extra_args: &[&str],
) -> TestApp {
    let launch = Launch {
        extra_args,
        env: &[],
        ulimit: Some(ulimit_args),
        log_file: None,
    };
    start_process(&dir.data, Some(&dir.catalogue), launch, None)
}

/// How a server process is started, beyond its data directory and catalogue.
struct Launch<'a> {
    extra_args: &'a [&'a str],
    env: &'a [(&'a str, &'a str)],
    /// Run it under `ulimit` with these arguments.
    ulimit: Option<&'a str>,
    /// Write its whole stderr to this file (the tail kept for diagnostics stays empty).
    log_file: Option<&'a Path>,
}

/// Starts the server on `dir` with extra arguments and environment, writing everything it
/// logs to `log_file`.
pub async fn spawn_app_logging_to(
    dir: &DataDir,
    log_file: &Path,
    extra_args: &[&str],
    env: &[(&str, &str)],
) -> TestApp {
    let launch = Launch {
        extra_args,
        env,
        ulimit: None,
        log_file: Some(log_file),
    };
    start_process(&dir.data, Some(&dir.catalogue), launch, None)
}

fn start_server(dir: TempDir, catalogue: Option<&Path>) -> TestApp {
    let data_dir = dir.path().join("data");
    std::fs::create_dir_all(&data_dir).expect("failed to create the data dir");
    let launch = Launch {
        extra_args: &[],
        env: &[],
        ulimit: None,
        log_file: None,
    };
    start_process(&data_dir, catalogue, launch, Some(dir))
}

/// Starts the server on `dir` where it may refuse to start: the server if it serves, or
/// why it did not (what it said on stderr) if it stopped first.
pub async fn try_spawn_app_on(dir: &DataDir) -> Result<TestApp, String> {
    let launch = Launch {
        extra_args: &[],
        env: &[],
        ulimit: None,
        log_file: None,
    };
    try_start_process(&dir.data, Some(&dir.catalogue), launch, None)
}

/// Starts `boxsub serve` on `data_dir` with extra arguments and environment and
/// waits (bounded) for its `listening on` line.
fn start_process(
    data_dir: &Path,
    catalogue: Option<&Path>,
    launch: Launch<'_>,
    owned_dir: Option<TempDir>,
) -> TestApp {
    try_start_process(data_dir, catalogue, launch, owned_dir)
        .unwrap_or_else(|failure| panic!("{failure}"))
}

/// [`start_process`], with a server that does not start as an error saying why.
fn try_start_process(
    data_dir: &Path,
    catalogue: Option<&Path>,
    launch: Launch<'_>,
    owned_dir: Option<TempDir>,
) -> Result<TestApp, String> {
    let Launch {
        extra_args,
        env,
        ulimit,
        log_file,
    } = launch;
    let mut cmd = match ulimit {
        None => boxsub_command(),
        Some(limits) => {
            // The shell lowers its limits and then becomes the server (`exec`), so the
            // process the test owns and kills is the server itself.
            let mut shell = clean(Command::new("sh"));
            shell
                .arg("-c")
                .arg(format!("ulimit {limits} && exec \"$0\" \"$@\""))
                .arg(env!("CARGO_BIN_EXE_boxsub"));
            shell
        }
    };
    cmd.arg("serve")
        .arg("--addr")
        .arg("127.0.0.1:0")
        .arg("--data-dir")
        .arg(data_dir);
    if let Some(catalogue) = catalogue {
        cmd.arg("--catalogue").arg(catalogue);
    }
    cmd.args(extra_args);
    for (name, value) in env {
        cmd.env(name, value);
    }
    cmd.stdout(Stdio::piped());
    match log_file {
        Some(path) => cmd.stderr(std::fs::File::create(path).expect("create the log file")),
        None => cmd.stderr(Stdio::piped()),
    };
    let mut child = cmd.spawn().expect("failed to start the boxsub binary");
    let stdout = pipe_lines(child.stdout.take().expect("stdout is piped"));
    let stderr_tail = match child.stderr.take() {
        Some(stderr) => keep_tail(stderr),
        None => Arc::new(Mutex::new(VecDeque::new())),
    };

    let deadline = Instant::now() + STARTUP_TIMEOUT;
    let mut seen = Vec::new();
    let hostport = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let failure = if left.is_zero() {
            Some("did not print `listening on http://` within 30 s".to_string())
        } else {
            match stdout.recv_timeout(left.min(Duration::from_millis(100))) {
                Ok(line) => {
                    if let Some(rest) = line.strip_prefix("listening on http://") {
                        break rest.trim().to_string();
                    }
                    seen.push(line);
                    None
                }
                Err(mpsc::RecvTimeoutError::Timeout) => match child.try_wait() {
                    Ok(Some(status)) => Some(format!("exited during start-up with {status}")),
                    _ => None,
                },
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    Some("closed stdout before printing `listening on http://`".to_string())
                }
            }
        };
        if let Some(failure) = failure {
            let _ = child.kill();
            let _ = child.wait();
            // The pipe's reader thread may still be taking in the last lines.
            std::thread::sleep(Duration::from_millis(100));
            return Err(format!(
                "boxsub serve {failure}\nstdout so far: {seen:#?}\nstderr:\n{}",
                tail_text(&stderr_tail)
            ));
        }
    };
    // Drain the rest of stdout in the background so the child never blocks.
    std::thread::spawn(move || stdout.iter().for_each(drop));

    let port: u16 = match hostport.rsplit(':').next().and_then(|p| p.parse().ok()) {
        Some(port) if hostport.starts_with("127.0.0.1:") => port,
        _ => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("unexpected listening address {hostport:?}; expected 127.0.0.1:PORT");
        }
    };
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("failed to build the HTTP client");
    Ok(TestApp {
        address: format!("http://127.0.0.1:{port}"),
        port,
        client,
        creds: store_a(),
        startup_output: seen,
        child,
        stderr_tail,
        _dir: owned_dir,
    })
}

/// A response, read completely, with the request it answers for diagnostics.
pub struct TestResponse {
    /// `METHOD path` of the request.
    pub request: String,
    /// The status code.
    pub status: u16,
    /// The response headers.
    pub headers: HeaderMap,
    /// The raw body.
    pub body: Vec<u8>,
}

impl TestResponse {
    /// The body as (lossy) text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).to_string()
    }

    /// A header's value, if present and visible ASCII.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }

    fn describe(&self) -> String {
        format!(
            "{} answered {} with headers {:?} and body {}",
            self.request,
            self.status,
            self.headers,
            self.text()
        )
    }

    /// Asserts the status code.
    #[track_caller]
    pub fn assert_status(&self, status: u16) -> &Self {
        assert_eq!(self.status, status, "{}", self.describe());
        self
    }

    /// Asserts the JSON content type and parses the body.
    #[track_caller]
    pub fn json(&self) -> Value {
        assert_eq!(
            self.header("content-type").as_deref(),
            Some("application/json; charset=utf-8"),
            "{}",
            self.describe()
        );
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.describe()))
    }

    /// Asserts status and a `{"message": ...}` body exactly.
    #[track_caller]
    pub fn assert_message(&self, status: u16, message: &str) {
        self.assert_status(status);
        assert_eq!(
            self.json(),
            json!({ "message": message }),
            "{}",
            self.describe()
        );
    }

    /// Asserts the contract's 404.
    #[track_caller]
    pub fn assert_not_found(&self) {
        self.assert_message(404, MSG_NOT_FOUND);
    }

    /// Asserts a 422 `{"errors": {...}}` body and returns the errors.
    #[track_caller]
    pub fn field_errors(&self) -> Map<String, Value> {
        self.assert_status(422);
        let body = self.json();
        let obj = body.as_object().cloned().unwrap_or_default();
        assert_eq!(
            obj.keys().collect::<Vec<_>>(),
            vec!["errors"],
            "422 body must be {{\"errors\": ...}}: {}",
            self.describe()
        );
        let errors = obj["errors"]
            .as_object()
            .cloned()
            .unwrap_or_else(|| panic!("errors is not an object: {}", self.describe()));
        for (key, messages) in &errors {
            let ok = messages
                .as_array()
                .is_some_and(|m| !m.is_empty() && m.iter().all(Value::is_string));
            assert!(
                ok,
                "errors.{key} must be a non-empty array of strings: {}",
                self.describe()
            );
        }
        errors
    }

    /// Asserts a 422 naming exactly these fields.
    #[track_caller]
    pub fn assert_error_keys(&self, keys: &[&str]) {
        let errors = self.field_errors();
        let got: BTreeSet<&str> = errors.keys().map(String::as_str).collect();
        let want: BTreeSet<&str> = keys.iter().copied().collect();
        assert_eq!(got, want, "wrong error fields: {}", self.describe());
    }

    /// Asserts a 422 naming at least this field.
    #[track_caller]
    pub fn assert_has_error(&self, key: &str) {
        let errors = self.field_errors();
        assert!(
            errors.contains_key(key),
            "expected an error on {key}: {}",
            self.describe()
        );
    }

    /// Asserts a 422 whose errors for `key` include `message`.
    #[track_caller]
    pub fn assert_field_error(&self, key: &str, message: &str) {
        let messages = self.messages_for(key);
        assert!(
            messages.iter().any(|m| m == message),
            "expected {key}: {message:?}: {}",
            self.describe()
        );
    }

    /// The messages for one field of a 422 (asserting the field is there).
    #[track_caller]
    pub fn messages_for(&self, key: &str) -> Vec<String> {
        let errors = self.field_errors();
        let messages = errors
            .get(key)
            .unwrap_or_else(|| panic!("expected an error on {key}: {}", self.describe()));
        messages
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    }

    /// Asserts the status is not a server error.
    #[track_caller]
    pub fn assert_no_server_error(&self) {
        assert!(self.status < 500, "server error: {}", self.describe());
    }
}

/// An HTTP response read from a raw TCP exchange.
#[derive(Debug)]
pub struct RawResponse {
    /// The status code.
    pub status: u16,
    /// Headers in arrival order, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The decoded body.
    pub body: Vec<u8>,
}

impl RawResponse {
    /// The first header of that name.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON (panics with the response otherwise).
    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "raw response body is not JSON ({e}): {self:?} {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

/// Decodes a complete chunked body with `httparse`; `None` while incomplete or malformed.
fn dechunk(mut data: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let httparse::Status::Complete((start, size)) = httparse::parse_chunk_size(data).ok()?
        else {
            return None;
        };
        let size = usize::try_from(size).ok()?;
        data = &data[start..];
        if size == 0 {
            return Some(out);
        }
        let chunk = data.get(..size)?;
        out.extend_from_slice(chunk);
        data = data.get(size + 2..)?;
    }
}

/// Parses one response (with `httparse`) from the bytes read so far; `eof` says no more
/// will come.
fn parse_raw(buf: &[u8], eof: bool) -> Option<RawResponse> {
    let mut slots = [httparse::EMPTY_HEADER; 64];
    let mut head = httparse::Response::new(&mut slots);
    let httparse::Status::Complete(head_len) = head.parse(buf).ok()? else {
        return None;
    };
    let status = head.code?;
    let headers: Vec<(String, String)> = head
        .headers
        .iter()
        .map(|h| {
            let value = String::from_utf8_lossy(h.value).trim().to_string();
            (h.name.to_ascii_lowercase(), value)
        })
        .collect();
    let rest = &buf[head_len..];
    let get = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v);
    let body = if get("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        dechunk(rest)?
    } else if let Some(len) = get("content-length").and_then(|v| v.parse::<usize>().ok()) {
        rest.get(..len)?.to_vec()
    } else if status == 204 || status == 304 || (100..200).contains(&status) {
        Vec::new()
    } else if eof {
        rest.to_vec()
    } else {
        return None;
    };
    Some(RawResponse {
        status,
        headers,
        body,
    })
}

impl TestApp {
    /// The full URL of a path.
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.address, path)
    }

    /// The last lines the server wrote to stderr.
    pub fn stderr_tail(&self) -> String {
        tail_text(&self.stderr_tail)
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Polls the child until it exits or `timeout` passes.
    pub fn wait_for_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Sends a signal (`"TERM"`, `"KILL"`, ...) to the server with `kill(1)`.
    /// The child is not reaped here, so its pid cannot have been reused.
    pub fn signal(&self, signal: &str) {
        use std::str::FromStr;
        let signal = nix::sys::signal::Signal::from_str(&format!("SIG{signal}"))
            .unwrap_or_else(|_| panic!("no signal SIG{signal}"));
        let pid = nix::unistd::Pid::from_raw(self.pid() as i32);
        nix::sys::signal::kill(pid, signal)
            .unwrap_or_else(|error| panic!("sending {signal} to {pid}: {error}"));
    }

    /// Graceful stop: SIGTERM, then waits up to `timeout` for the exit. If the
    /// server is still running then, it is killed, reaped, and `None` returned.
    pub fn terminate(&mut self, timeout: Duration) -> Option<ExitStatus> {
        self.signal("TERM");
        let status = self.wait_for_exit(timeout);
        if status.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        status
    }

    /// SIGTERM and asserts an exit with status 0 within `timeout`.
    #[track_caller]
    pub fn terminate_ok(&mut self, timeout: Duration) {
        let status = self.terminate(timeout);
        assert!(
            status.is_some_and(|s| s.success()),
            "after SIGTERM the server must exit 0 within {timeout:?}; got {status:?}; stderr:\n{}",
            self.stderr_tail()
        );
    }

    /// Crash: SIGKILL, then reaps the process (bounded).
    pub fn crash(&mut self) {
        let _ = self.child.kill();
        self.reap();
    }

    /// Waits for an already signalled child to exit (bounded), killing it if
    /// it has not after 10 s.
    pub fn reap(&mut self) -> Option<ExitStatus> {
        let status = self.wait_for_exit(Duration::from_secs(10));
        if status.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        status
    }

    /// Waits (bounded) until a line the server wrote to stderr satisfies
    /// `pred`, and returns it.
    pub fn wait_for_stderr_line(
        &self,
        timeout: Duration,
        pred: impl Fn(&str) -> bool,
    ) -> Option<String> {
        let deadline = Instant::now() + timeout;
        loop {
            {
                let tail = self.stderr_tail.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(line) = tail.iter().find(|l| pred(l)) {
                    return Some(line.clone());
                }
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Like [`TestApp::send`], but a transport failure (connection refused or
    /// reset, no complete answer) is returned as `Err` instead of failing the
    /// test: for requests racing a crash.
    pub async fn try_send(
        &self,
        method: Method,
        path: &str,
        creds: Option<&Creds>,
        body: Option<Vec<u8>>,
        headers: &[(&str, &str)],
    ) -> Result<TestResponse, String> {
        let request = format!("{method} {path}");
        let method_name = method.as_str().to_owned();
        let mut builder = self.client.request(method, self.url(path));
        if let Some(creds) = creds {
            builder = builder
                .header("API-Key", creds.key.as_str())
                .header("API-Secret", creds.secret.as_str());
        }
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        if let Some(body) = body {
            builder = builder.body(body);
        }
        let response = builder
            .send()
            .await
            .map_err(|e| format!("{request} failed: {e:?}"))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response
            .bytes()
            .await
            .map_err(|e| format!("{request}: reading the body failed: {e:?}"))?
            .to_vec();
        if let Err(mismatch) = crate::contract::check(&method_name, path, status, &headers, &body) {
            panic!("{request}: the answer does not match docs/openapi.json: {mismatch}");
        }
        Ok(TestResponse {
            request,
            status,
            headers,
            body,
        })
    }

    /// Sends any request; `creds: None` sends no credential headers.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        creds: Option<&Creds>,
        body: Option<Vec<u8>>,
        headers: &[(&str, &str)],
    ) -> TestResponse {
        let request = format!("{method} {path}");
        let method_name = method.as_str().to_owned();
        let mut builder = self.client.request(method, self.url(path));
        if let Some(creds) = creds {
            builder = builder
                .header("API-Key", creds.key.as_str())
                .header("API-Secret", creds.secret.as_str());
        }
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        if let Some(body) = body {
            builder = builder.body(body);
        }
        let response = builder.send().await.unwrap_or_else(|e| {
            panic!(
                "{request} failed: {e:?}\nserver stderr:\n{}",
                self.stderr_tail()
            )
        });
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response
            .bytes()
            .await
            .unwrap_or_else(|e| panic!("{request}: reading the body failed: {e:?}"))
            .to_vec();
        // Every answer any test gets is held to the OpenAPI document.
        if let Err(mismatch) = crate::contract::check(&method_name, path, status, &headers, &body) {
            panic!("{request}: the answer does not match docs/openapi.json: {mismatch}");
        }
        TestResponse {
            request,
            status,
            headers,
            body,
        }
    }

    async fn send_json(
        &self,
        method: Method,
        path: &str,
        creds: Option<&Creds>,
        body: &Value,
    ) -> TestResponse {
        let bytes = serde_json::to_vec(body).unwrap();
        self.send(
            method,
            path,
            creds,
            Some(bytes),
            &[("Content-Type", "application/json")],
        )
        .await
    }

    /// GET with the default credentials.
    pub async fn get(&self, path: &str) -> TestResponse {
        self.send(Method::GET, path, Some(&self.creds), None, &[])
            .await
    }

    /// GET with explicit credentials.
    pub async fn get_as(&self, path: &str, creds: &Creds) -> TestResponse {
        self.send(Method::GET, path, Some(creds), None, &[]).await
    }

    /// GET without credentials.
    pub async fn get_without_auth(&self, path: &str) -> TestResponse {
        self.send(Method::GET, path, None, None, &[]).await
    }

    /// POST a JSON body with the default credentials.
    pub async fn post_json(&self, path: &str, body: &Value) -> TestResponse {
        self.send_json(Method::POST, path, Some(&self.creds), body)
            .await
    }

    /// POST a JSON body with explicit credentials.
    pub async fn post_json_as(&self, path: &str, body: &Value, creds: &Creds) -> TestResponse {
        self.send_json(Method::POST, path, Some(creds), body).await
    }

    /// POST raw bytes (no Content-Type) with the default credentials.
    pub async fn post_raw(&self, path: &str, body: impl Into<Vec<u8>>) -> TestResponse {
        self.send(
            Method::POST,
            path,
            Some(&self.creds),
            Some(body.into()),
            &[],
        )
        .await
    }

    /// PATCH a JSON body with the default credentials.
    pub async fn patch_json(&self, path: &str, body: &Value) -> TestResponse {
        self.send_json(Method::PATCH, path, Some(&self.creds), body)
            .await
    }

    /// PATCH a JSON body with explicit credentials.
    pub async fn patch_json_as(&self, path: &str, body: &Value, creds: &Creds) -> TestResponse {
        self.send_json(Method::PATCH, path, Some(creds), body).await
    }

    /// PUT a JSON body with the default credentials.
    pub async fn put_json(&self, path: &str, body: &Value) -> TestResponse {
        self.send_json(Method::PUT, path, Some(&self.creds), body)
            .await
    }

    /// POST /v1/customers.
    pub async fn create_customer(&self, body: &Value) -> TestResponse {
        self.post_json("/v1/customers", body).await
    }

    /// POST /v1/customers, asserting 201; returns the customer.
    pub async fn create_customer_ok(&self, body: &Value) -> Value {
        let response = self.create_customer(body).await;
        response.assert_status(201);
        response.json()
    }

    /// Creates a store-B customer with store B's credentials; returns it.
    pub async fn create_customer_b_ok(&self, email: &str) -> Value {
        let response = self
            .post_json_as("/v1/customers", &customer_body_b(email), &store_b())
            .await;
        response.assert_status(201);
        response.json()
    }

    /// POST /v1/orders.
    pub async fn create_order(&self, body: &Value) -> TestResponse {
        self.post_json("/v1/orders", body).await
    }

    /// POST /v1/orders, asserting 201; returns the order.
    pub async fn create_order_ok(&self, body: &Value) -> Value {
        let response = self.create_order(body).await;
        response.assert_status(201);
        response.json()
    }

    /// POST /v1/customers/sign_in with a JSON body.
    pub async fn sign_in(&self, email: &str, password: &str) -> TestResponse {
        self.post_json(
            "/v1/customers/sign_in",
            &json!({"email": email, "password": password}),
        )
        .await
    }

    /// GET /v1/customers?email=..., asserting 200; returns the array.
    pub async fn lookup_email(&self, email: &str) -> Vec<Value> {
        self.lookup_email_as(email, &self.creds).await
    }

    /// GET /v1/customers?email=... with explicit credentials.
    pub async fn lookup_email_as(&self, email: &str, creds: &Creds) -> Vec<Value> {
        let response = self
            .get_as(&format!("/v1/customers?email={}", enc(email)), creds)
            .await;
        response.assert_status(200);
        response
            .json()
            .as_array()
            .cloned()
            .unwrap_or_else(|| panic!("expected an array: {}", response.text()))
    }

    /// GET /v1/orders?customer_id=..., asserting 200; returns the array.
    pub async fn orders_of(&self, customer_id: i64) -> Vec<Value> {
        let response = self
            .get(&format!("/v1/orders?customer_id={customer_id}"))
            .await;
        response.assert_status(200);
        response
            .json()
            .as_array()
            .cloned()
            .unwrap_or_else(|| panic!("expected an array: {}", response.text()))
    }

    /// Every customer of the webstore of `creds` through the paginated list
    /// (`embed=address`, bounded to 100 pages of 500), with the `X-Total-Count`
    /// of the first page.
    pub async fn all_customers_as(&self, creds: &Creds) -> (Vec<Value>, Option<u64>) {
        let mut all = Vec::new();
        let mut total = None;
        for page in 1..=100 {
            let response = self
                .get_as(
                    &format!("/v1/customers?embed=address&per_page=500&page={page}"),
                    creds,
                )
                .await;
            response.assert_status(200);
            if page == 1 {
                total = response
                    .header("x-total-count")
                    .and_then(|v| v.parse::<u64>().ok());
            }
            let items = response
                .json()
                .as_array()
                .cloned()
                .unwrap_or_else(|| panic!("expected an array: {}", response.text()));
            if items.is_empty() {
                break;
            }
            all.extend(items);
        }
        (all, total)
    }

    /// The head of a raw HTTP/1.1 request with `Connection: close`.
    pub fn raw_head(&self, method: &str, target: &str, creds: Option<&Creds>) -> String {
        let mut head = format!(
            "{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n",
            self.port
        );
        if let Some(creds) = creds {
            head.push_str(&format!(
                "API-Key: {}\r\nAPI-Secret: {}\r\n",
                creds.key, creds.secret
            ));
        }
        head
    }

    /// A raw chunked POST of `body`, split into chunks of `chunk_size`.
    pub fn chunked_request(&self, path: &str, body: &[u8], chunk_size: usize) -> Vec<u8> {
        let mut request = self.raw_head("POST", path, Some(&self.creds)).into_bytes();
        request.extend_from_slice(
            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
        );
        for chunk in body.chunks(chunk_size) {
            request.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
            request.extend_from_slice(chunk);
            request.extend_from_slice(b"\r\n");
        }
        request.extend_from_slice(b"0\r\n\r\n");
        request
    }

    /// Writes raw bytes to a fresh connection while reading the answer.
    /// Returns `None` when the server closed the connection without a response.
    /// Panics if nothing complete arrives within 15 s.
    pub async fn raw_exchange(&self, request: Vec<u8>) -> Option<RawResponse> {
        let stream = TcpStream::connect(("127.0.0.1", self.port))
            .await
            .expect("failed to connect to the server");
        let (mut reader, mut writer) = stream.into_split();
        // The writer half is kept alive (returned from the task) until we are
        // done reading, so the server never sees a half-closed connection.
        let write_task = tokio::spawn(async move {
            let _ = writer.write_all(&request).await;
            let _ = writer.flush().await;
            writer
        });
        let mut buf = Vec::new();
        let read = tokio::time::timeout(RAW_TIMEOUT, async {
            let mut chunk = vec![0u8; 16 * 1024];
            loop {
                if let Some(response) = parse_raw(&buf, false) {
                    return Some(response);
                }
                match reader.read(&mut chunk).await {
                    Ok(0) | Err(_) => return parse_raw(&buf, true),
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
        })
        .await;
        write_task.abort();
        match read {
            Ok(response) => response,
            Err(_) => panic!(
                "no complete response within {RAW_TIMEOUT:?}; received so far: {:?}",
                String::from_utf8_lossy(&buf)
            ),
        }
    }

    /// Asserts that GET /v1/ping still answers 204.
    pub async fn assert_alive(&self) {
        let response = self.get_without_auth("/v1/ping").await;
        response.assert_status(204);
        assert!(response.body.is_empty(), "204 must have no body");
    }
}

/// The outcome of running the binary to completion.
pub struct Finished {
    /// `None` if it was killed after the timeout.
    pub status: Option<ExitStatus>,
    /// Everything written to stdout.
    pub stdout: String,
    /// Everything written to stderr.
    pub stderr: String,
}

/// Runs a command to completion, killing it after `timeout` — or as soon as it
/// prints `listening on http://`, since a command expected to exit must not serve.
pub fn run_to_exit(mut cmd: Command, timeout: Duration) -> Finished {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("failed to start the boxsub binary");
    let stdout = pipe_lines(child.stdout.take().expect("stdout is piped"));
    let stderr = pipe_lines(child.stderr.take().expect("stderr is piped"));
    let deadline = Instant::now() + timeout;
    let mut out_lines = Vec::new();
    let mut served = false;
    let status = loop {
        while let Ok(line) = stdout.try_recv() {
            served |= line.starts_with("listening on http://");
            out_lines.push(line);
        }
        if served || Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        if let Ok(Some(status)) = child.try_wait() {
            break Some(status);
        }
        std::thread::sleep(Duration::from_millis(25));
    };
    // The pipes close once the process is gone; collect what is left, bounded.
    let collect = |rx: &mpsc::Receiver<String>, lines: &mut Vec<String>| {
        let deadline = Instant::now() + Duration::from_secs(5);
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match rx.recv_timeout(left) {
                Ok(line) => lines.push(line),
                Err(_) => break,
            }
        }
    };
    collect(&stdout, &mut out_lines);
    let mut err_lines = Vec::new();
    collect(&stderr, &mut err_lines);
    Finished {
        status,
        stdout: out_lines.join("\n"),
        stderr: err_lines.join("\n"),
    }
}

/// Parses an RFC 8288 `Link` header into (rel, url) pairs.
pub fn parse_link_header(value: &str) -> Vec<(String, String)> {
    value
        .split(',')
        .filter_map(|part| {
            let (url, params) = part.split_once(';')?;
            let url = url.trim().trim_start_matches('<').trim_end_matches('>');
            let rel = params.split(';').find_map(|p| {
                let (k, v) = p.split_once('=')?;
                (k.trim() == "rel").then(|| v.trim().trim_matches('"').to_string())
            })?;
            Some((rel, url.to_string()))
        })
        .collect()
}

/// The value of one query parameter of a (relative or absolute) URL.
pub fn query_param(url: &str, name: &str) -> Option<String> {
    let query = url.split_once('?')?.1;
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == name).then(|| v.to_string())
    })
}

/// The path and query of a URL that may be absolute.
pub fn path_and_query(url: &str) -> String {
    match url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
    {
        Some(rest) => rest
            .find('/')
            .map_or("/".to_string(), |i| rest[i..].to_string()),
        None => url.to_string(),
    }
}

/// Asserts a string is an RFC 3339 UTC timestamp ending in `Z`.
#[track_caller]
pub fn assert_rfc3339_utc(value: &Value) {
    let s = value
        .as_str()
        .unwrap_or_else(|| panic!("timestamp is not a string: {value}"));
    let b = s.as_bytes();
    let digits =
        |mut r: std::ops::Range<usize>| r.all(|i| b.get(i).is_some_and(u8::is_ascii_digit));
    let shape = b.len() >= 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && (b[10] == b'T' || b[10] == b't')
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && s.ends_with('Z')
        && (b.len() == 20 || (b[19] == b'.' && digits(20..b.len() - 1) && b.len() > 21));
    assert!(shape, "not an RFC 3339 UTC timestamp ending in Z: {s:?}");
}

/// The integer `id` of a resource.
#[track_caller]
pub fn id_of(resource: &Value) -> i64 {
    resource["id"]
        .as_i64()
        .unwrap_or_else(|| panic!("resource has no integer id: {resource}"))
}

/// Collects failures of table-driven checks so one run reports every failing
/// row, then fails the test listing them.
#[derive(Default)]
pub struct SoftAsserts {
    failures: Vec<String>,
}

impl SoftAsserts {
    /// Runs one row's assertions, recording a panic instead of unwinding.
    pub fn check(&mut self, row: &str, assertions: impl FnOnce()) {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(assertions));
        if let Err(panic) = outcome {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            self.failures.push(format!("{row}: {message}"));
        }
    }

    /// Fails the test if any row failed.
    #[track_caller]
    pub fn finish(self) {
        assert!(
            self.failures.is_empty(),
            "{} row(s) failed:\n{}",
            self.failures.len(),
            self.failures.join("\n\n")
        );
    }
}
