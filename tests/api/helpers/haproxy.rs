//! A real HAProxy in front of a group of servers, for the replication tests: [`Haproxy`]
//! starts Debian's `haproxy` (2.6) in the foreground on a free port of 127.0.0.1 with a
//! configuration it writes into a temp directory of its own: one HTTP frontend, one backend
//! of the given servers health-checked with `GET /health` every 200 ms, and an admin stats
//! socket for the test to read or change server states. There are no mocks.
//!
//! Where `haproxy` is missing, [`Haproxy::start`] goes through [`skip_or_fail`] and returns
//! `None`. The process is killed and reaped when its [`Haproxy`] drops; every wait is
//! bounded in time.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::skip::{host_program, skip_or_fail};

/// The backend's name; its servers are `s0`, `s1`, ... in the order given to
/// [`Haproxy::start`], so that server `i` is `boxsub/s{i}` on the admin socket.
pub const HAPROXY_BACKEND: &str = "boxsub";

/// How long HAProxy may take to accept connections on its frontend.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the start is tried: the frontend's port is found by binding and releasing it,
/// so another process may take it before HAProxy binds it.
const START_ATTEMPTS: usize = 3;

/// How many of HAProxy's last log lines [`Haproxy::logs`] returns.
const LOG_TAIL_LINES: usize = 200;

/// The configuration: `port` is the frontend's, `socket` the admin socket's path.
fn config_text(port: u16, socket: &Path, backends: &[SocketAddr]) -> String {
    let servers: Vec<String> = backends
        .iter()
        .enumerate()
        .map(|(i, address)| format!("    server s{i} {address}"))
        .collect();
    let servers = servers.join("\n");
    let socket = socket.display();
    // - `noreuseport`: HAProxy sets SO_REUSEPORT by default, and would then share its port
    //   with another process that took it meanwhile instead of failing to start.
    // - `log stderr`: health-check transitions ("Server boxsub/s1 is DOWN") and each
    //   request go to the log file beside the configuration, for failure messages.
    // - `retries 0`: a request whose connection to a server fails is answered 503 at once
    //   instead of being retried on that server, so that a test sees the failure it caused.
    // - `inter 200ms fall 2 rise 2`: a server is taken out within about half a second of
    //   failing its checks, and back as fast, so that tests wait little. HAProxy deems every
    //   server up at start, until its checks fail.
    format!(
        "global
    noreuseport
    log stderr format raw local0 info
    stats socket {socket} mode 600 level admin

defaults
    mode http
    log global
    option httplog
    timeout connect 1s
    timeout client 30s
    timeout server 30s
    timeout check 1s
    retries 0

frontend boxsub_front
    bind 127.0.0.1:{port}
    default_backend {HAPROXY_BACKEND}

backend {HAPROXY_BACKEND}
    balance roundrobin
    option httpchk GET /health
    http-check expect status 200
    default-server check inter 200ms fall 2 rise 2
{servers}
"
    )
}

/// A running `haproxy` in front of a backend of servers; see the module documentation.
pub struct Haproxy {
    addr: SocketAddr,
    socket: PathBuf,
    log: PathBuf,
    child: Child,
    /// Holds the configuration, the admin socket and the log; removed after the process
    /// is reaped (by [`Drop`]).
    _dir: TempDir,
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Haproxy {
    /// Starts HAProxy in front of `backends` (server `i` is `boxsub/s{i}`) and waits
    /// (bounded) until it answers on its admin socket and its frontend accepts TCP
    /// connections. `None` after [`skip_or_fail`]
    /// for test `test` when `haproxy` is not installed. Panics with `haproxy -c`'s output
    /// if the configuration is refused, or with HAProxy's log if it does not start.
    ///
    /// It blocks its thread while it waits (HAProxy binds within milliseconds); call it
    /// from a multi-threaded runtime if the backends are tasks of the test's runtime.
    pub fn start(test: &str, backends: &[SocketAddr]) -> Option<Haproxy> {
        let Some(program) = host_program("haproxy") else {
            skip_or_fail(
                test,
                "haproxy is not installed (neither /usr/sbin/haproxy nor on PATH; Debian \
                 package haproxy)",
            );
            return None;
        };
        assert!(!backends.is_empty(), "HAProxy needs at least one backend");
        let mut failures = Vec::new();
        for attempt in 1..=START_ATTEMPTS {
            match Haproxy::try_start(&program, backends) {
                Ok(haproxy) => return Some(haproxy),
                // Another process took the port between its pick and HAProxy's bind: start
                // again on a new one.
                Err(failure) if failure.contains("Address already in use") => {
                    failures.push(format!("attempt {attempt}: {failure}"));
                }
                Err(failure) => panic!("HAProxy did not start: {failure}"),
            }
        }
        panic!(
            "HAProxy did not start in {START_ATTEMPTS} attempts, each losing its port to \
             another process:\n{}",
            failures.join("\n")
        );
    }

    /// One start on a fresh port; an error (with the log) if HAProxy exits or does not
    /// accept connections in time.
    fn try_start(program: &Path, backends: &[SocketAddr]) -> Result<Haproxy, String> {
        let dir = tempfile::tempdir().expect("create a temp dir for HAProxy");
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("bind 127.0.0.1:0 to find a free port")
            .port();
        let socket = dir.path().join("admin.sock");
        let config = dir.path().join("haproxy.cfg");
        let log = dir.path().join("haproxy.log");
        std::fs::write(&config, config_text(port, &socket, backends))
            .expect("write the HAProxy configuration");

        Haproxy::run(
            program,
            &config,
            SocketAddr::from(([127, 0, 0, 1], port)),
            socket,
            log,
            dir,
        )
    }

    /// Starts HAProxy on a configuration of the test's own (`boxsub haproxy-config`'s)
    /// whose frontend binds `addr` and whose admin socket is `socket`; `None` after
    /// [`skip_or_fail`] without haproxy. Panics if `haproxy -c` refuses it or it does not
    /// start.
    pub fn start_config(
        test: &str,
        config: &Path,
        addr: SocketAddr,
        socket: &Path,
    ) -> Option<Haproxy> {
        let Some(program) = host_program("haproxy") else {
            skip_or_fail(test, "haproxy is not installed (Debian package haproxy)");
            return None;
        };
        let dir = tempfile::tempdir().expect("create a temp dir for HAProxy");
        let log = dir.path().join("haproxy.log");
        Some(
            Haproxy::run(&program, config, addr, socket.to_path_buf(), log, dir)
                .unwrap_or_else(|failure| panic!("HAProxy did not start: {failure}")),
        )
    }

    /// Checks `config` with `haproxy -c` (panicking if refused), starts HAProxy on it and
    /// waits until it serves.
    fn run(
        program: &Path,
        config: &Path,
        addr: SocketAddr,
        socket: PathBuf,
        log: PathBuf,
        dir: TempDir,
    ) -> Result<Haproxy, String> {
        let check = Command::new(program)
            .arg("-c")
            .arg("-f")
            .arg(config)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|error| panic!("run {} -c: {error}", program.display()));
        assert!(
            check.status.success(),
            "haproxy -c refuses the generated configuration ({}):\n{}{}\nconfiguration:\n{}",
            check.status,
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr),
            std::fs::read_to_string(config).unwrap_or_default()
        );

        let output = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("open the HAProxy log file");
        let output_too = output.try_clone().expect("clone a log file handle");
        // `-db`: in the foreground, one process, no master: killing the child stops it all.
        let child = Command::new(program)
            .arg("-f")
            .arg(config)
            .arg("-db")
            .stdin(Stdio::null())
            .stdout(Stdio::from(output_too))
            .stderr(Stdio::from(output))
            .spawn()
            .unwrap_or_else(|error| panic!("start {}: {error}", program.display()));
        let mut haproxy = Haproxy {
            addr,
            socket,
            log,
            child,
            _dir: dir,
        };
        haproxy.wait_accepting()?;
        Ok(haproxy)
    }

    /// Waits until HAProxy answers on its admin socket and its frontend accepts TCP
    /// connections, at most [`STARTUP_TIMEOUT`]. The socket is the proof that the frontend
    /// is this HAProxy's: HAProxy binds every listener before it serves any, and another
    /// process may have taken the port (a connection alone would then reach that process).
    fn wait_accepting(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("haproxy exited with {status}:\n{}", self.logs()));
            }
            if self.try_admin("show info").is_ok() && TcpStream::connect(self.addr).is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "haproxy did not serve its admin socket and {} within {STARTUP_TIMEOUT:?}:\n{}",
                    self.addr,
                    self.logs()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The frontend's address, `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The frontend's base URL, `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The admin stats socket (`level admin`), for `socat` or [`admin`](Self::admin).
    pub fn socket_path(&self) -> &Path {
        &self.socket
    }

    /// Sends one command to the admin socket (`show stat`, `disable server boxsub/s0`,
    /// ...) and returns HAProxy's whole answer. Panics if the socket does not answer
    /// within 5 s.
    pub fn admin(&self, command: &str) -> String {
        self.try_admin(command)
            .unwrap_or_else(|error| panic!("{error}\nHAProxy's log:\n{}", self.logs()))
    }

    /// [`admin`](Self::admin), with a socket that does not answer as an error.
    fn try_admin(&self, command: &str) -> Result<String, String> {
        let socket = self.socket.display();
        let mut stream = UnixStream::connect(&self.socket)
            .map_err(|error| format!("connect to HAProxy's socket {socket}: {error}"))?;
        let timeout = Some(Duration::from_secs(5));
        stream
            .set_read_timeout(timeout)
            .and_then(|()| stream.set_write_timeout(timeout))
            .map_err(|error| format!("set the timeouts of {socket}: {error}"))?;
        // Without `prompt`, HAProxy answers one command and closes the connection.
        stream
            .write_all(format!("{command}\n").as_bytes())
            .map_err(|error| format!("send {command:?} to HAProxy: {error}"))?;
        let mut answer = String::new();
        stream
            .read_to_string(&mut answer)
            .map_err(|error| format!("read HAProxy's answer to {command:?}: {error}"))?;
        Ok(answer)
    }

    /// Server `i`'s status as `show stat` gives it: `UP`, `DOWN`, `MAINT`, `no check`,
    /// or a transition such as `UP 1/2`.
    pub fn server_status(&self, i: usize) -> String {
        self.status_of(HAPROXY_BACKEND, &format!("s{i}"))
    }

    /// The status of server `{backend}`'s `i`th, named `{shard}_{i}` as `boxsub
    /// haproxy-config` names them (its backends are `shard_{shard}`).
    pub fn server_status_of(&self, backend: &str, i: usize) -> String {
        let shard = backend.trim_start_matches("shard_");
        self.status_of(backend, &format!("{shard}_{i}"))
    }

    /// The `status` column of `show stat` for `backend`/`server`.
    fn status_of(&self, backend: &str, name: &str) -> String {
        let stat = self.admin("show stat");
        let header = stat
            .lines()
            .next()
            .unwrap_or_else(|| panic!("`show stat` answered nothing"));
        let column = header
            .trim_start_matches("# ")
            .split(',')
            .position(|name| name == "status")
            .unwrap_or_else(|| panic!("`show stat` has no status column:\n{stat}"));
        stat.lines()
            .map(|line| line.split(',').collect::<Vec<_>>())
            .find(|fields| fields.first() == Some(&backend) && fields.get(1) == Some(&name))
            .and_then(|fields| fields.get(column).map(|status| status.to_string()))
            .unwrap_or_else(|| panic!("`show stat` has no server {backend}/{name}:\n{stat}"))
    }

    /// The last lines HAProxy logged (alerts, health-check transitions, requests).
    pub fn logs(&self) -> String {
        let text = std::fs::read(&self.log).unwrap_or_default();
        let text = String::from_utf8_lossy(&text);
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
    }
}
