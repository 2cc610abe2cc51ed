//! The servers a bench run measures, each a child process of the running executable: boxsub
//! on a scratch directory (its store seeded with `boxsub-tools seed`) and the bare warp server
//! (`bare_server`, the front end's limit). A server's resident memory and CPU time come from
//! `/proc` (CPU in ticks of the whole process, or to the nanosecond by thread); stopping it
//! ends it with SIGTERM. Also: the host's description. Must not touch:
//! what is sent to the servers (`scenarios`, `load`), the report.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::Machine;
use crate::domain::catalogue::DEMO_CREDENTIALS;

/// A server child process that is stopped when dropped.
pub(super) struct Server {
    pub(super) child: Child,
    pub(super) addr: SocketAddr,
}

/// Which binary a server runs.
#[derive(Debug, Clone, Copy)]
pub(super) enum Program {
    /// The `boxsub` binary operators deploy, found beside this one (cargo builds both into
    /// one directory).
    Service,
    /// This binary (`boxsub-tools`), for the bare server.
    Tools,
}

impl Program {
    fn path(self) -> Result<PathBuf, String> {
        let tools = std::env::current_exe().map_err(|e| format!("finding boxsub-tools: {e}"))?;
        match self {
            Program::Tools => Ok(tools),
            Program::Service => {
                let service = tools.with_file_name("boxsub");
                if service.is_file() {
                    Ok(service)
                } else {
                    Err(format!(
                        "{} is missing: `cargo build --release --features tools` builds it \
                         beside boxsub-tools",
                        service.display()
                    ))
                }
            }
        }
    }
}

impl Server {
    pub(super) fn start(program: Program, args: &[String]) -> Result<Server, String> {
        let exe = program.path()?;
        let mut child = Command::new(exe)
            .args(args)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("starting {args:?}: {e}"))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (found, wait) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(addr) = line.strip_prefix("listening on http://") {
                    let _ = found.send(addr.trim().to_owned());
                }
            }
        });
        let addr = match wait.recv_timeout(Duration::from_secs(120)) {
            Ok(addr) => addr,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{args:?} did not start listening"));
            }
        };
        let addr = addr
            .parse()
            .map_err(|e| format!("bad address {addr}: {e}"))?;
        Ok(Server { child, addr })
    }

    pub(super) fn rss_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|value| {
                value
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<f64>()
                    .ok()
            })
            .map_or(0.0, |kib| kib / 1024.0)
    }

    /// User plus system CPU seconds the process has used (`/proc/PID/stat`, in the kernel's
    /// USER_HZ ticks, which are 1/100 s on Linux).
    pub(super) fn cpu_seconds(&self) -> f64 {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        let ticks = |at: usize| {
            fields
                .get(at)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        (ticks(11) + ticks(12)) / 100.0
    }

    /// The CPU time of each of the process's threads so far, to the nanosecond: for reads
    /// too short for [`Server::cpu_seconds`]'s ticks of 10 ms.
    pub(super) fn thread_cpu(&self) -> ThreadCpu {
        let mut threads = HashMap::new();
        let tasks = std::fs::read_dir(format!("/proc/{}/task", self.child.id()));
        for task in tasks.into_iter().flatten().flatten() {
            let Some(tid) = task.file_name().to_str().and_then(|name| name.parse().ok()) else {
                continue;
            };
            // The first field: time on a CPU, ns, as the scheduler counts it.
            let nanos = std::fs::read_to_string(task.path().join("schedstat"))
                .ok()
                .and_then(|stat| stat.split_whitespace().next()?.parse().ok());
            if let Some(nanos) = nanos {
                threads.insert(tid, nanos);
            }
        }
        ThreadCpu(threads)
    }

    /// SIGTERM, then wait (bounded) for a clean exit.
    pub(super) fn stop(mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// CPU nanoseconds of each thread of a server by thread id (`/proc/PID/task/TID/schedstat`),
/// read by [`Server::thread_cpu`].
pub(super) struct ThreadCpu(HashMap<u32, u64>);

impl ThreadCpu {
    /// CPU seconds the process used from `before` to this reading: a thread started in
    /// between counts whole, one that ended in between does not count.
    pub(super) fn seconds_since(&self, before: &ThreadCpu) -> f64 {
        let nanos: u64 = self
            .0
            .iter()
            .map(|(tid, now)| now.saturating_sub(before.0.get(tid).copied().unwrap_or(0)))
            .sum();
        nanos as f64 / 1e9
    }
}

/// A scratch directory removed when dropped.
pub(super) struct Scratch(pub(super) PathBuf);

impl Scratch {
    pub(super) fn new() -> Result<Scratch, String> {
        let nonce = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("boxsub-bench-{}-{nonce}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        Ok(Scratch(dir))
    }

    pub(super) fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(super) fn seed(dir: &Path, customers: u64, orders_per_customer: u64) -> Result<(), String> {
    let status = Command::new(Program::Tools.path()?)
        .args(["seed", "--customers", &customers.to_string()])
        .args(["--orders-per-customer", &orders_per_customer.to_string()])
        .arg("--data-dir")
        .arg(dir)
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("seeding: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("seeding {} failed", dir.display()))
    }
}

pub(super) fn machine() -> Machine {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory_kib = meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|line| line.strip_prefix("model name"))
        .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        .unwrap_or_else(|| "unknown".into());
    Machine {
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        memory_gib: (memory_kib / 1024.0 / 1024.0 * 10.0).round() / 10.0,
        cpu,
    }
}

/// `boxsub serve` on `dir` with the [`demo_catalogue`].
pub(super) fn serve_args(dir: &Path, durability: &str) -> Result<Vec<String>, String> {
    serve_args_with(dir, durability, &demo_catalogue()?)
}

/// `boxsub serve` on `dir` with `catalogue`, written beside the data directory.
pub(super) fn serve_args_with(
    dir: &Path,
    durability: &str,
    catalogue: &serde_json::Value,
) -> Result<Vec<String>, String> {
    let path = dir.with_extension("catalogue.json");
    let text = serde_json::to_vec_pretty(catalogue).map_err(|e| e.to_string())?;
    std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    let dir = dir.display().to_string();
    let path = path.display().to_string();
    Ok([
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--data-dir",
        &dir,
        "--durability",
        durability,
        "--catalogue",
        &path,
    ]
    .map(str::to_owned)
    .to_vec())
}

/// The demo catalogue as built in: the benchmark measures what a user gets by default (no
/// rate quota, fair admission at its default slots).
pub(super) fn demo_catalogue() -> Result<serde_json::Value, String> {
    serde_json::from_str(crate::domain::catalogue::DEMO_CATALOGUE_JSON).map_err(|e| e.to_string())
}

pub(super) fn credentials() -> (&'static str, &'static str) {
    (DEMO_CREDENTIALS[0].1, DEMO_CREDENTIALS[0].2)
}

/// The bare warp server: a fixed small JSON body for every request, on warp's own server.
/// Prints `listening on http://ADDR` when ready.
pub async fn bare_server(addr: &str) -> Result<(), String> {
    use warp::Filter;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("binding {addr}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    let route = warp::any().map(|| {
        let mut response = warp::reply::Response::new(r#"{"ok":true}"#.into());
        response.headers_mut().insert(
            warp::http::header::CONTENT_TYPE,
            warp::http::HeaderValue::from_static("application/json; charset=utf-8"),
        );
        response
    });
    println!("listening on http://{local}");
    warp::serve(route)
        .incoming(listener)
        .graceful(crate::startup::shutdown_signal())
        .run()
        .await;
    Ok(())
}
