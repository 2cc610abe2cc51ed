//! The server under test as a process: starting `boxsub serve` on an ephemeral port of
//! 127.0.0.1 through one builder, [`Launch`] (a catalogue and data directory of its own or a
//! [`DataDir`] the test keeps, extra flags, environment, an open-files limit, a log file;
//! [`spawn_app`] for the default), waiting for its `listening on` line, keeping the tail of
//! its stderr, signalling, stopping, crashing and reaping it, and running the binary's other
//! commands to completion ([`run_to_exit`]).
//!
//! Every process started here is owned by a value whose `Drop` kills and reaps it; every
//! wait is bounded in count and time.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

use super::fixtures::{default_catalogue, store_a, Creds};

/// How long the server may take to print its `listening on` line.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

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
    /// The temp dir of a server started by a [`Launch`] of its own; `None` for one
    /// started on a [`DataDir`] the test owns.
    _dir: Option<TempDir>,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the server with the default two-store catalogue in a temp dir of its own: the
/// one-liner for `Launch::new().spawn()`.
pub async fn spawn_app() -> TestApp {
    Launch::new().spawn().await
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

/// Which catalogue a server started by [`Launch`] reads.
#[derive(Default)]
enum Catalogue {
    /// The default two-store catalogue ([`default_catalogue`]).
    #[default]
    Default,
    /// This catalogue.
    Given(Value),
    /// The binary's built-in demo catalogue (no `--catalogue`).
    Demo,
}

/// How a server process is started, built up and then spawned: by default `boxsub serve` on a
/// data directory and the default catalogue in a temp dir of its own, with no extra flags or
/// environment, stderr kept in a tail for diagnostics.
///
/// ```ignore
/// let app = Launch::new().on(&dir).args(&["--durability", "off"]).spawn().await;
/// ```
#[derive(Default)]
#[must_use = "a Launch starts nothing until it is spawned"]
pub struct Launch<'a> {
    /// The [`DataDir`] (and its catalogue) the server runs on, if the test keeps one.
    on: Option<&'a DataDir>,
    catalogue: Catalogue,
    args: Vec<String>,
    env: Vec<(String, String)>,
    /// Run it under `ulimit` with these arguments.
    ulimit: Option<String>,
    /// Write its whole stderr to this file (the tail kept for diagnostics stays empty).
    log_to: Option<PathBuf>,
}

impl<'a> Launch<'a> {
    /// The default launch: the default catalogue in a temp dir of its own.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs the server on `dir` (its data directory and catalogue), which outlives the server:
    /// the same directory may be used again by a later server once this one has stopped.
    pub fn on(mut self, dir: &'a DataDir) -> Self {
        self.on = Some(dir);
        self
    }

    /// Gives the server this catalogue, in a temp dir of its own (a server [`on`](Self::on) a
    /// [`DataDir`] reads the catalogue the `DataDir` was made with).
    pub fn catalogue(mut self, catalogue: Value) -> Self {
        self.catalogue = Catalogue::Given(catalogue);
        self
    }

    /// Leaves the server on its built-in demo catalogue (no `--catalogue`), in a temp dir of
    /// its own.
    pub fn demo(mut self) -> Self {
        self.catalogue = Catalogue::Demo;
        self
    }

    /// Passes these extra arguments after `serve` and its address, data directory and
    /// catalogue (`["--durability", "off"]`).
    pub fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|arg| arg.to_string()));
        self
    }

    /// Sets these environment variables (on an environment cleared of the server's own).
    pub fn env(mut self, env: &[(&str, &str)]) -> Self {
        self.env.extend(
            env.iter()
                .map(|(name, value)| (name.to_string(), value.to_string())),
        );
        self
    }

    /// Runs the server under an open-files limit set by the shell: `ulimit_args` such as
    /// `-Sn 1024` (a host whose default soft limit is that low) or `-n 64` (soft and hard).
    pub fn ulimit(mut self, ulimit_args: &str) -> Self {
        self.ulimit = Some(ulimit_args.to_string());
        self
    }

    /// Writes everything the server logs to `log_file` (the tail kept for diagnostics stays
    /// empty).
    pub fn log_to(mut self, log_file: &Path) -> Self {
        self.log_to = Some(log_file.to_path_buf());
        self
    }

    /// Starts the server and waits (bounded) for its `listening on` line; panics with what it
    /// said if it does not start.
    pub async fn spawn(self) -> TestApp {
        self.try_spawn()
            .await
            .unwrap_or_else(|failure| panic!("{failure}"))
    }

    /// Starts the server where it may refuse to start: the server if it serves, or why it did
    /// not (what it said on stderr) if it stopped first.
    pub async fn try_spawn(self) -> Result<TestApp, String> {
        if let Some(dir) = self.on {
            assert!(
                matches!(self.catalogue, Catalogue::Default),
                "a server on a DataDir reads the DataDir's catalogue; make the DataDir with it"
            );
            return try_start_process(&dir.data, Some(&dir.catalogue), &self, None);
        }
        let dir = tempfile::tempdir().expect("failed to create a temp dir");
        let catalogue = match &self.catalogue {
            Catalogue::Default => Some(default_catalogue()),
            Catalogue::Given(catalogue) => Some(catalogue.clone()),
            Catalogue::Demo => None,
        };
        let path = catalogue.map(|catalogue| {
            let path = dir.path().join("catalogue.json");
            std::fs::write(&path, serde_json::to_vec_pretty(&catalogue).unwrap())
                .expect("failed to write the catalogue");
            path
        });
        let data_dir = dir.path().join("data");
        std::fs::create_dir_all(&data_dir).expect("failed to create the data dir");
        try_start_process(&data_dir, path.as_deref(), &self, Some(dir))
    }
}

/// Starts `boxsub serve` on `data_dir` as `launch` says and waits (bounded) for its
/// `listening on` line; a server that does not start is an error saying why.
fn try_start_process(
    data_dir: &Path,
    catalogue: Option<&Path>,
    launch: &Launch<'_>,
    owned_dir: Option<TempDir>,
) -> Result<TestApp, String> {
    let mut cmd = match &launch.ulimit {
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
    cmd.args(&launch.args);
    for (name, value) in &launch.env {
        cmd.env(name, value);
    }
    cmd.stdout(Stdio::piped());
    match &launch.log_to {
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

impl TestApp {
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
}

/// `boxsub serve` on `dir` (its catalogue, port 0) with `args`, run as a command expected to
/// refuse to start: what it printed, and how it exited.
pub fn serve_to_exit(dir: &DataDir, args: &[&str]) -> Finished {
    let mut cmd = boxsub_command();
    cmd.arg("serve")
        .args(["--addr", "127.0.0.1:0", "--data-dir"])
        .arg(&dir.data)
        .arg("--catalogue")
        .arg(&dir.catalogue)
        .args(args);
    run_to_exit(cmd, Duration::from_secs(30))
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
