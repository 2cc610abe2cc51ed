//! `boxsub bench`: measures boxsub against the physical limit of this host in one run. It
//! starts, on 127.0.0.1, a bare warp server answering a fixed small JSON body and boxsub
//! itself (durable; durable with each sync started at once, without gathering writers;
//! and with durability off), drives each with the same closed-loop
//! load generator, alternating bare and boxsub runs so that a noisy machine's drift hits both,
//! and reports requests/s, latency quantiles and the ratio to the bare server. It then
//! seeds a large store (N customers with K orders each) and measures restart time, resident
//! memory per customer and per order, and the cost of single requests at that scale (first
//! and deep page of customers, a customer by email, an order create, a date's delivery
//! list), one at a time, in latency and in server CPU.
//!
//! Servers run as child processes of the current executable, so each has its own runtime
//! and the binary measured is the one that runs the benchmark.

pub mod load;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::config::BenchConfig;
use crate::domain::catalogue::DEMO_CREDENTIALS;
use load::{request, LoadResult, LoadSpec};

/// Customers seeded for the request scenarios.
const SEEDED: u64 = 10_000;

/// One scenario's figures.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioReport {
    /// Scenario name.
    pub name: String,
    /// Requests per second.
    pub rps: f64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 99th percentile latency, ms.
    pub p99_ms: f64,
    /// 99.9th percentile latency, ms.
    pub p999_ms: f64,
    /// rps over the bare server's rps measured beside it.
    pub ratio_to_bare: f64,
    /// Requests that did not get the expected status.
    pub errors: u64,
    /// The bare server's rps in the runs beside this one.
    pub bare_rps: f64,
    /// boxsub's CPU (user + system, `/proc/PID/stat`) over its measured periods divided by
    /// the requests answered in them, µs.
    pub cpu_us_per_request: f64,
    /// The same for the bare server in the runs beside it, µs.
    pub bare_cpu_us_per_request: f64,
}

/// Keyed creates against a short idempotency time to live: the records kept stay bounded
/// while the creates go on.
#[derive(Debug, Clone, Serialize)]
pub struct ExpiryReport {
    /// `--idempotency-ttl` of the server, seconds.
    pub ttl_seconds: u64,
    /// Connections sending keyed `POST /v1/orders`, each with a key of its own.
    pub connections: usize,
    /// Once a second: seconds since the start, keyed creates acknowledged so far, records
    /// expired so far and records kept after the last expiry pass.
    pub samples: Vec<ExpirySample>,
    /// Requests that did not get a 201.
    pub errors: u64,
}

/// One reading of [`ExpiryReport`].
#[derive(Debug, Clone, Serialize)]
pub struct ExpirySample {
    /// Seconds since the keyed creates started.
    pub seconds: f64,
    /// `boxsub_orders_created_total` (every order of the run is a keyed create).
    pub created: u64,
    /// `boxsub_idempotency_records_expired_total`.
    pub expired: u64,
    /// `boxsub_idempotency_records`: kept by the last complete expiry pass. Only a lower
    /// bound of the records held: a pass walks the keys in order and does not see records
    /// written behind its cursor.
    pub kept: u64,
    /// Records in the store: keyed creates (each wrote one) less records expired.
    pub held: u64,
    /// `boxsub_store_size_bytes`, MiB.
    pub store_mib: f64,
}

/// The machine the figures were taken on.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// Logical CPUs.
    pub cores: usize,
    /// Total memory, GiB.
    pub memory_gib: f64,
    /// CPU model.
    pub cpu: String,
}

/// Restart, memory and per-request cost at scale, over a large seeded store.
#[derive(Debug, Clone, Serialize)]
pub struct RestartReport {
    /// Customers in the store.
    pub customers: u64,
    /// Orders of each customer (weekly, on the delivery service's days in turn).
    pub orders_per_customer: u64,
    /// Orders in the store.
    pub orders: u64,
    /// Seconds from starting the process to the first answered request, on a store a
    /// previous process had closed cleanly.
    pub restart_seconds: f64,
    /// The same on the first start after seeding (sled replays its whole log then).
    pub first_start_seconds: f64,
    /// Seconds from start until the last seeded order (`last_order_id`) is found by id
    /// (order lookups wait for the background scan that indexes the stored orders).
    pub orders_ready_seconds: f64,
    /// The id of the last seeded order.
    pub last_order_id: u64,
    /// Resident memory once the stored orders are indexed and the background census of the
    /// store is over (memory stopped changing and the server is idle), MiB.
    pub rss_mib: f64,
    /// Resident memory of a server on an empty store, MiB.
    pub empty_rss_mib: f64,
    /// Resident memory, measured the same way, of a store of as many customers with one
    /// order each, MiB (the store above when it has one order per customer).
    pub one_order_rss_mib: f64,
    /// (one-order rss - empty rss) / customers: a customer with its one order, bytes.
    pub bytes_per_customer: f64,
    /// (rss - one-order rss) / (orders - customers): each further order, bytes; only
    /// measured when customers have more than one order.
    pub bytes_per_order: Option<f64>,
    /// Which stores the memory figures come from.
    pub memory_measured_on: String,
    /// One request at a time over the same store.
    pub scale: Vec<SequentialReport>,
    /// Deep page over first page: median latency.
    pub deep_over_first_page_latency: f64,
    /// Deep page over first page: server CPU per request.
    pub deep_over_first_page_cpu: f64,
    /// The delivery list of one date over the same store.
    pub delivery_list: DeliveryListReport,
}

/// One kind of request sent one at a time (each after the previous answer) over one
/// keep-alive connection, after one unmeasured warm-up request.
#[derive(Debug, Clone, Serialize)]
pub struct SequentialReport {
    /// Scenario name.
    pub name: String,
    /// The request (a representative one where they vary).
    pub request: String,
    /// Requests measured.
    pub requests: u64,
    /// Median time to the whole answer, ms.
    pub median_ms: f64,
    /// Server CPU (user + system, `/proc/PID/stat`) over the measured requests divided by
    /// their number, µs.
    pub cpu_us_per_request: f64,
}

/// The cost of `GET /v1/deliveries` for one date over the restart store (whose orders are
/// weekly, spread over the delivery service's days): the first page, which sorts the date's
/// list, and the later pages, served from the list kept sorted.
#[derive(Debug, Clone, Serialize)]
pub struct DeliveryListReport {
    /// The date listed.
    pub date: String,
    /// Deliveries on it (`X-Total-Count`).
    pub entries: u64,
    /// Time to the whole answer of the first page of 100, ms.
    pub first_page_ms: f64,
    /// Server CPU of the first page, ms.
    pub first_page_cpu_ms: f64,
    /// Server CPU of the first page per delivery on the date, µs.
    pub first_page_cpu_us_per_entry: f64,
    /// Later pages of 100 measured, one after another, through the list.
    pub later_pages: u64,
    /// Their median time to the whole answer, ms.
    pub later_page_median_ms: f64,
    /// Their server CPU per request, µs.
    pub later_page_cpu_us: f64,
}

/// Everything one run measured.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// Where.
    pub machine: Machine,
    /// Request scenarios, the headline (`orders_create`) first.
    pub scenarios: Vec<ScenarioReport>,
    /// Keyed creates with expiry.
    pub expiry: Option<ExpiryReport>,
    /// Restart and memory.
    pub restart: Option<RestartReport>,
    /// Settings of the run.
    pub connections: usize,
    /// Measured seconds per run.
    pub duration_seconds: f64,
}

/// A server child process that is stopped when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Server {
    fn start(args: &[String]) -> Result<Server, String> {
        let exe = std::env::current_exe().map_err(|e| format!("finding boxsub: {e}"))?;
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

    fn rss_mib(&self) -> f64 {
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
    fn cpu_seconds(&self) -> f64 {
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

    /// SIGTERM, then wait (bounded) for a clean exit.
    fn stop(mut self) {
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

/// A scratch directory removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Result<Scratch, String> {
        let nonce = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("boxsub-bench-{}-{nonce}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        Ok(Scratch(dir))
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn seed(dir: &Path, customers: u64, orders_per_customer: u64) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding boxsub: {e}"))?;
    let status = Command::new(exe)
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

/// Which server a scenario drives.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    Durable,
    /// Durable, each sync started as soon as the previous one ends (`--commit-interval-us
    /// 0`): what gathering writers saves, measured in the same run.
    DurableSyncingAtOnce,
    NotDurable,
}

struct Scenario {
    name: &'static str,
    target: Target,
    request: load::RequestFn,
    expect: load::ExpectFn,
}

fn scenarios() -> Vec<Scenario> {
    let credentials = credentials();
    let customer = |n: u64| n % SEEDED + 1;
    let order_body = move |n: u64| {
        format!(
            r#"{{"customer_id":{},"box_id":217,"frequency":"weekly","exclusions":[241],"extras":[{{"id":28,"quantity":1}}]}}"#,
            customer(n)
        )
    };
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let fresh = Arc::new(AtomicU64::new(0));
    let post_order: load::RequestFn =
        Arc::new(move |n| request("POST", "/v1/orders", credentials, Some(&order_body(n))));
    let created = |_: u64| 201;
    let ok = |_: u64| 200;
    let by_email = move |n: u64| {
        request(
            "GET",
            &format!("/v1/customers?email=seed{}@example.com", customer(n)),
            credentials,
            None,
        )
    };
    let order_by_id = move |n: u64| {
        request(
            "GET",
            &format!("/v1/orders/{}", customer(n)),
            credentials,
            None,
        )
    };
    vec![
        Scenario {
            name: "orders_create",
            target: Target::Durable,
            request: post_order.clone(),
            expect: Arc::new(created),
        },
        Scenario {
            name: "orders_create_commit_interval_0",
            target: Target::DurableSyncingAtOnce,
            request: post_order.clone(),
            expect: Arc::new(created),
        },
        Scenario {
            name: "customers_create",
            target: Target::Durable,
            request: Arc::new(move |_| {
                let n = fresh.fetch_add(1, Ordering::Relaxed);
                let body = format!(
                    r#"{{"first_name":"Bench","last_name":"Load","email":"bench-{run}-{n}@example.com","delivery_service_id":91,"address":{{"address_1":"1 Load Street","city":"London"}}}}"#
                );
                request("POST", "/v1/customers", credentials, Some(&body))
            }),
            expect: Arc::new(created),
        },
        Scenario {
            name: "customers_by_email",
            target: Target::Durable,
            request: Arc::new(by_email),
            expect: Arc::new(ok),
        },
        Scenario {
            name: "order_by_id",
            target: Target::Durable,
            request: Arc::new(order_by_id),
            expect: Arc::new(ok),
        },
        Scenario {
            name: "mix_80_read_20_order_create",
            target: Target::Durable,
            request: Arc::new(move |n| match n % 5 {
                0 => post_order(n),
                1 | 3 => by_email(n),
                _ => order_by_id(n),
            }),
            expect: Arc::new(move |n| if n % 5 == 0 { 201 } else { 200 }),
        },
        Scenario {
            name: "orders_create_durability_off",
            target: Target::NotDurable,
            request: Arc::new(move |n| {
                request("POST", "/v1/orders", credentials, Some(&order_body(n)))
            }),
            expect: Arc::new(created),
        },
    ]
}

fn machine() -> Machine {
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

/// Runs the whole benchmark.
pub async fn run(config: &BenchConfig) -> Result<BenchReport, String> {
    let scratch = Scratch::new()?;
    let durable_dir = scratch.path("durable");
    let at_once_dir = scratch.path("durable-syncing-at-once");
    let relaxed_dir = scratch.path("durability-off");
    seed(&durable_dir, SEEDED, 1)?;
    seed(&at_once_dir, SEEDED, 1)?;
    seed(&relaxed_dir, SEEDED, 1)?;
    let bare = Server::start(&["bare-server", "--addr", "127.0.0.1:0"].map(str::to_owned))?;
    let durable = Server::start(&serve_args(&durable_dir, "on"))?;
    let mut at_once_args = serve_args(&at_once_dir, "on");
    at_once_args.extend(["--commit-interval-us".to_owned(), "0".to_owned()]);
    let at_once = Server::start(&at_once_args)?;
    let relaxed = Server::start(&serve_args(&relaxed_dir, "off"))?;
    let warmup = Duration::from_secs_f64(config.warmup);
    let duration = Duration::from_secs_f64(config.duration);
    let bare_spec = LoadSpec {
        addr: bare.addr,
        connections: config.connections,
        warmup,
        duration,
        request: Arc::new(|_| load::bare_request()),
        expect: Arc::new(|_| 200),
    };
    let mut reports = Vec::new();
    let chosen = scenarios().into_iter().filter(|scenario| {
        config
            .only
            .as_deref()
            .is_none_or(|only| scenario.name.contains(only))
    });
    for scenario in chosen {
        let server = match scenario.target {
            Target::Durable => &durable,
            Target::DurableSyncingAtOnce => &at_once,
            Target::NotDurable => &relaxed,
        };
        let spec = LoadSpec {
            addr: server.addr,
            request: scenario.request.clone(),
            expect: scenario.expect.clone(),
            ..bare_spec.clone()
        };
        // Alternate bare and boxsub runs so that drift of a shared machine hits both.
        let mut bare_runs = Vec::new();
        let mut runs = Vec::new();
        for _ in 0..config.rounds.max(1) {
            bare_runs.push(run_with_cpu(bare_spec.clone(), &bare).await?);
            runs.push(run_with_cpu(spec.clone(), server).await?);
        }
        bare_runs.push(run_with_cpu(bare_spec.clone(), &bare).await?);
        let cpu_us = |runs: &[(LoadResult, f64)]| {
            let cpu: f64 = runs.iter().map(|(_, cpu)| cpu).sum();
            let requests: u64 = runs.iter().map(|(run, _)| run.requests).sum();
            round(cpu * 1e6 / requests.max(1) as f64, 1)
        };
        let (cpu_us_per_request, bare_cpu_us_per_request) = (cpu_us(&runs), cpu_us(&bare_runs));
        let bare_runs: Vec<LoadResult> = bare_runs.into_iter().map(|(run, _)| run).collect();
        let bare_rps = bare_runs.iter().map(LoadResult::rps).sum::<f64>() / bare_runs.len() as f64;
        let combined = combine(runs.into_iter().map(|(run, _)| run).collect());
        let report = ScenarioReport {
            name: scenario.name.to_owned(),
            rps: round(combined.rps(), 0),
            p50_ms: round(combined.quantile_ms(0.5), 3),
            p99_ms: round(combined.quantile_ms(0.99), 3),
            p999_ms: round(combined.quantile_ms(0.999), 3),
            ratio_to_bare: round(combined.rps() / bare_rps.max(1.0), 3),
            errors: combined.errors + bare_runs.iter().map(|r| r.errors).sum::<u64>(),
            bare_rps: round(bare_rps, 0),
            cpu_us_per_request,
            bare_cpu_us_per_request,
        };
        eprintln!(
            "{}: {} rps (bare {} rps), ratio {:.3}, p99 {} ms, CPU {} µs/request (bare {}), errors {}",
            report.name,
            report.rps,
            report.bare_rps,
            report.ratio_to_bare,
            report.p99_ms,
            report.cpu_us_per_request,
            report.bare_cpu_us_per_request,
            report.errors
        );
        reports.push(report);
    }
    durable.stop();
    at_once.stop();
    relaxed.stop();
    bare.stop();
    let expiry = if config.only.is_none() {
        Some(measure_expiry(&scratch, config).await?)
    } else {
        None
    };
    let restart = if config.restart_customers > 0 {
        Some(
            measure_restart(
                &scratch,
                config.restart_customers,
                config.restart_orders_per_customer,
            )
            .await?,
        )
    } else {
        None
    };
    Ok(BenchReport {
        machine: machine(),
        scenarios: reports,
        expiry,
        restart,
        connections: config.connections,
        duration_seconds: config.duration,
    })
}

fn serve_args(dir: &Path, durability: &str) -> Vec<String> {
    let dir = dir.display().to_string();
    [
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--data-dir",
        &dir,
        "--durability",
        durability,
    ]
    .map(str::to_owned)
    .to_vec()
}

fn combine(runs: Vec<LoadResult>) -> LoadResult {
    let mut total = LoadResult::default();
    for run in runs {
        total.merge(&run);
        total.seconds += run.seconds;
    }
    total
}

/// One load run, and the server's CPU seconds over its measured period (read when the
/// warm-up ends and when the measured period ends).
async fn run_with_cpu(spec: LoadSpec, server: &Server) -> Result<(LoadResult, f64), String> {
    let (warmup, duration) = (spec.warmup, spec.duration);
    let cpu = async {
        tokio::time::sleep(warmup).await;
        let before = server.cpu_seconds();
        tokio::time::sleep(duration).await;
        server.cpu_seconds() - before
    };
    let (run, cpu) = tokio::join!(load::run(spec), cpu);
    Ok((run?, cpu))
}

/// Time to live of the records in [`measure_expiry`], seconds (the sweep runs every second).
const EXPIRY_TTL: u64 = 2;
/// How long [`measure_expiry`] sends keyed creates: five times the time to live.
const EXPIRY_SECONDS: u64 = 5 * EXPIRY_TTL;

/// Keyed creates (a fresh key each) for [`EXPIRY_SECONDS`] against a server whose records
/// live [`EXPIRY_TTL`] seconds, reading its metrics once a second.
async fn measure_expiry(scratch: &Scratch, config: &BenchConfig) -> Result<ExpiryReport, String> {
    let dir = scratch.path("expiry");
    seed(&dir, SEEDED, 1)?;
    let mut args = serve_args(&dir, "on");
    args.extend(["--idempotency-ttl".to_owned(), EXPIRY_TTL.to_string()]);
    let server = Server::start(&args)?;
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let spec = LoadSpec {
        addr: server.addr,
        connections: config.connections,
        warmup: Duration::ZERO,
        duration: Duration::from_secs(EXPIRY_SECONDS),
        request: Arc::new(move |n| {
            let body = format!(
                r#"{{"customer_id":{},"box_id":217,"frequency":"weekly"}}"#,
                n % SEEDED + 1
            );
            let mut keyed = request("POST", "/v1/orders", credentials(), Some(&body));
            if let Ok(key) = format!("bench-{run}-{n}").parse() {
                keyed.headers_mut().insert("idempotency-key", key);
            }
            keyed
        }),
        expect: Arc::new(|_| 201),
    };
    eprintln!("keyed creates for {EXPIRY_SECONDS} s with --idempotency-ttl {EXPIRY_TTL}...");
    let started = Instant::now();
    let load = tokio::spawn(load::run(spec));
    let mut samples = Vec::new();
    // Samples while the creates go on, then two more as the last records expire.
    for second in 1..=EXPIRY_SECONDS + 2 * EXPIRY_TTL {
        tokio::time::sleep_until((started + Duration::from_secs(second)).into()).await;
        let text = load::one_request(server.addr, request("GET", "/metrics", credentials(), None))
            .await
            .map(|answer| String::from_utf8_lossy(&answer.body).into_owned())?;
        let value = |name: &str| metric_value(&text, name).unwrap_or(0.0) as u64;
        let created = value("boxsub_orders_created_total");
        let expired = value("boxsub_idempotency_records_expired_total");
        samples.push(ExpirySample {
            seconds: round(started.elapsed().as_secs_f64(), 1),
            created,
            expired,
            kept: value("boxsub_idempotency_records"),
            held: created.saturating_sub(expired),
            store_mib: round(
                value("boxsub_store_size_bytes") as f64 / (1 << 20) as f64,
                1,
            ),
        });
    }
    let result = load.await.map_err(|e| e.to_string())??;
    server.stop();
    Ok(ExpiryReport {
        ttl_seconds: EXPIRY_TTL,
        connections: config.connections,
        samples,
        errors: result.errors,
    })
}

/// The sum of the samples of metric `name` (over its labels) in Prometheus text.
fn metric_value(text: &str, name: &str) -> Option<f64> {
    let mut found = None;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        // The name itself, not a longer one it begins.
        if !(rest.starts_with(' ') || rest.starts_with('{')) {
            continue;
        }
        if let Some(value) = rest.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) {
            *found.get_or_insert(0.0) += value;
        }
    }
    found
}

fn round(value: f64, places: i32) -> f64 {
    let scale = 10f64.powi(places);
    (value * scale).round() / scale
}

fn credentials() -> (&'static str, &'static str) {
    (DEMO_CREDENTIALS[0].1, DEMO_CREDENTIALS[0].2)
}

/// Seconds from process start until the first answered request, and the server.
async fn time_to_first_answer(dir: &Path) -> Result<(f64, Server, Instant), String> {
    let started = Instant::now();
    let server = Server::start(&serve_args(dir, "on"))?;
    let lookup = request(
        "GET",
        "/v1/customers?email=seed1@example.com",
        credentials(),
        None,
    );
    let answer = load::one_request(server.addr, lookup)
        .await
        .map_err(|e| format!("asking the restarted server: {e}"))?;
    let (status, body_length) = (answer.status, answer.body_length);
    // `[]` would mean the seeded customer was not found.
    if status != 200 || body_length <= 2 {
        return Err(format!(
            "the restarted server answered {status} without the seeded customer"
        ));
    }
    Ok((started.elapsed().as_secs_f64(), server, started))
}

/// Resident memory once background start-up work (the order index fill, the census of the
/// store) is over: read every half second until memory stops changing and the server uses
/// less than a twentieth of a core, for at most two minutes. Requests measured after this
/// are charged for their own CPU only.
async fn settled_rss(server: &Server) -> f64 {
    let mut previous = (server.rss_mib(), server.cpu_seconds());
    for _ in 0..240 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = (server.rss_mib(), server.cpu_seconds());
        if (now.0 - previous.0).abs() < 0.5 && now.1 - previous.1 < 0.025 {
            return now.0;
        }
        previous = now;
    }
    previous.0
}

/// Seconds from `started` until order `id` is found by id. The lookup waits for the
/// background scan that indexes the stored orders; should that outlast the server's request
/// deadline, it is asked again.
async fn time_to_order(server: &Server, id: u64, started: Instant) -> Result<f64, String> {
    loop {
        let lookup = request("GET", &format!("/v1/orders/{id}"), credentials(), None);
        let status = load::one_request(server.addr, lookup)
            .await
            .map_err(|e| format!("asking the restarted server for an order: {e}"))?
            .status;
        match status {
            200 => return Ok(started.elapsed().as_secs_f64()),
            408 | 503 | 504 if started.elapsed() < Duration::from_secs(900) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            _ => {
                return Err(format!(
                    "the restarted server answered {status} for seeded order {id}"
                ))
            }
        }
    }
}

/// A seeded store started twice (the first start after seeding, stopped, then a restart),
/// left running with its orders indexed and its memory settled.
struct Started {
    server: Server,
    first_start: f64,
    restart: f64,
    orders_ready: f64,
    rss_mib: f64,
}

async fn start_twice(dir: &Path, last_order_id: u64) -> Result<Started, String> {
    let (first_start, server, _) = time_to_first_answer(dir).await?;
    server.stop();
    let (restart, server, started) = time_to_first_answer(dir).await?;
    let orders_ready = time_to_order(&server, last_order_id, started).await?;
    let rss_mib = settled_rss(&server).await;
    Ok(Started {
        server,
        first_start,
        restart,
        orders_ready,
        rss_mib,
    })
}

async fn measure_restart(
    scratch: &Scratch,
    customers: u64,
    orders_per_customer: u64,
) -> Result<RestartReport, String> {
    let empty = Server::start(&serve_args(&scratch.path("empty"), "on"))?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let empty_rss = empty.rss_mib();
    empty.stop();
    // With more than one order per customer, a store of one order per customer tells memory
    // per customer from memory per order; it is removed before the large one is seeded.
    let one_order_rss = if orders_per_customer > 1 {
        let dir = scratch.path("one-order");
        eprintln!("seeding {customers} customers with one order each for the memory baseline...");
        seed(&dir, customers, 1)?;
        let baseline = start_twice(&dir, crate::seed::last_order_id(customers, 1)).await?;
        baseline.server.stop();
        let _ = std::fs::remove_dir_all(&dir);
        Some(baseline.rss_mib)
    } else {
        None
    };
    let dir = scratch.path("large");
    let orders = crate::seed::last_order_id(customers, orders_per_customer);
    eprintln!("seeding {customers} customers with {orders} orders for the restart measurement...");
    let seeding = Instant::now();
    seed(&dir, customers, orders_per_customer)?;
    eprintln!(
        "seeded in {:.1} s; restarting",
        seeding.elapsed().as_secs_f64()
    );
    let large = start_twice(&dir, orders).await?;
    let server = large.server;
    let mib = 1024.0 * 1024.0;
    let one_order = one_order_rss.unwrap_or(large.rss_mib);
    let bytes_per_customer = (one_order - empty_rss).max(0.0) * mib / customers.max(1) as f64;
    let bytes_per_order = one_order_rss.map(|one_order| {
        (large.rss_mib - one_order).max(0.0) * mib / (orders - customers).max(1) as f64
    });
    let memory_measured_on = match one_order_rss {
        Some(_) => format!(
            "an empty store, a store of {customers} customers with one order each (per \
             customer) and the store of {orders} orders (per further order)"
        ),
        None => format!(
            "an empty store and the store of {customers} customers with one order each (per \
             customer, its order included); per order not measured (one order per customer)"
        ),
    };
    eprintln!("measuring requests over the large store, one at a time...");
    let mut rng = SplitMix(now_nanos());
    let scale = measure_at_scale(&server, customers, &mut rng).await?;
    let (first, deep) = (&scale[0], &scale[1]);
    let deep_over_first_page_latency = round(deep.median_ms / first.median_ms.max(1e-9), 2);
    let deep_over_first_page_cpu = round(
        deep.cpu_us_per_request / first.cpu_us_per_request.max(1e-9),
        2,
    );
    let delivery_list = measure_delivery_list(&server).await?;
    // Order creates last: they add to the store the other figures were taken on.
    let mut scale = scale;
    scale.push(measure_order_create(&server, customers, &mut rng).await?);
    server.stop();
    Ok(RestartReport {
        customers,
        orders_per_customer,
        orders,
        restart_seconds: round(large.restart, 3),
        first_start_seconds: round(large.first_start, 3),
        orders_ready_seconds: round(large.orders_ready, 3),
        last_order_id: orders,
        rss_mib: round(large.rss_mib, 1),
        empty_rss_mib: round(empty_rss, 1),
        one_order_rss_mib: round(one_order, 1),
        bytes_per_customer: round(bytes_per_customer, 0),
        bytes_per_order: bytes_per_order.map(|bytes| round(bytes, 1)),
        memory_measured_on,
        scale,
        deep_over_first_page_latency,
        deep_over_first_page_cpu,
        delivery_list,
    })
}

/// SplitMix64: which seeded customers the scale scenarios ask for (no need for a crate).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A seeded customer number, 1 to `customers`.
    fn customer(&mut self, customers: u64) -> u64 {
        self.next() % customers.max(1) + 1
    }
}

fn now_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// At least this many requests per sequential measurement...
const SEQUENTIAL_REQUESTS: u64 = 50;
/// ... and at least this long: the kernel counts a process's CPU in 10 ms ticks, so a
/// second of requests keeps the rounding of CPU per request within 1% of the time measured.
const SEQUENTIAL_SECONDS: f64 = 1.0;

/// What [`sequential`] measured.
struct Measured {
    requests: u64,
    median_ms: f64,
    cpu_us_per_request: f64,
}

/// Sends `make(0)` unmeasured, then `make(1)`, `make(2)`, ... one at a time over one
/// keep-alive connection, at least `min_requests` of them and for at least
/// [`SEQUENTIAL_SECONDS`]; every answer must have status `expect` and pass `check` (given
/// the answer, an error message if it does not).
async fn sequential(
    server: &Server,
    what: &str,
    min_requests: u64,
    mut make: impl FnMut(u64) -> load::Req,
    expect: u16,
    check: impl Fn(&load::Answer) -> Option<String>,
) -> Result<Measured, String> {
    let mut client = load::Client::new(server.addr)?;
    let verify = |answer: Result<load::Answer, String>| {
        let answer = answer.map_err(|e| format!("{what}: {e}"))?;
        if answer.status != expect {
            return Err(format!(
                "{what} answered {} instead of {expect}",
                answer.status
            ));
        }
        match check(&answer) {
            Some(problem) => Err(format!("{what}: {problem}")),
            None => Ok(answer),
        }
    };
    verify(client.send(make(0)).await)?;
    let mut latencies = load::latency_histogram();
    let cpu_before = server.cpu_seconds();
    let started = Instant::now();
    let mut requests = 0;
    while requests < min_requests || started.elapsed().as_secs_f64() < SEQUENTIAL_SECONDS {
        requests += 1;
        let sent = Instant::now();
        verify(client.send(make(requests)).await)?;
        let micros = u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX);
        latencies.saturating_record(micros.max(1));
    }
    let cpu = server.cpu_seconds() - cpu_before;
    Ok(Measured {
        requests,
        median_ms: latencies.value_at_quantile(0.5) as f64 / 1000.0,
        cpu_us_per_request: cpu * 1e6 / requests as f64,
    })
}

fn report(name: &str, request: String, measured: &Measured) -> SequentialReport {
    SequentialReport {
        name: name.to_owned(),
        request,
        requests: measured.requests,
        median_ms: round(measured.median_ms, 3),
        cpu_us_per_request: round(measured.cpu_us_per_request, 1),
    }
}

/// The first and a deep page of customers, and customers by email, over the large store.
async fn measure_at_scale(
    server: &Server,
    customers: u64,
    rng: &mut SplitMix,
) -> Result<Vec<SequentialReport>, String> {
    let mut reports = Vec::new();
    let last_full_page = (customers / 100).max(1);
    for (name, page) in [
        ("customers_first_page", 1),
        ("customers_deep_page", last_full_page),
    ] {
        let path = format!("/v1/customers?page={page}&per_page=100");
        let measured = sequential(
            server,
            name,
            SEQUENTIAL_REQUESTS,
            |_| request("GET", &path, credentials(), None),
            200,
            |answer| {
                (answer.total_count != Some(customers) || answer.body_length <= 2).then(|| {
                    format!(
                        "X-Total-Count {:?} and {} bytes, not a page of {customers} customers",
                        answer.total_count, answer.body_length
                    )
                })
            },
        )
        .await?;
        reports.push(report(name, format!("GET {path}"), &measured));
    }
    let measured = sequential(
        server,
        "customers_by_email",
        SEQUENTIAL_REQUESTS,
        |_| {
            let path = format!(
                "/v1/customers?email=seed{}@example.com",
                rng.customer(customers)
            );
            request("GET", &path, credentials(), None)
        },
        200,
        |answer| (answer.body_length <= 2).then(|| "a seeded customer was not found".into()),
    )
    .await?;
    reports.push(report(
        "customers_by_email",
        "GET /v1/customers?email=seedN@example.com (random seeded N)".into(),
        &measured,
    ));
    Ok(reports)
}

/// Orders created for random seeded customers, one at a time (durable: each answer waits
/// for its commit).
async fn measure_order_create(
    server: &Server,
    customers: u64,
    rng: &mut SplitMix,
) -> Result<SequentialReport, String> {
    let measured = sequential(
        server,
        "orders_create",
        SEQUENTIAL_REQUESTS,
        |_| {
            let body = format!(
                r#"{{"customer_id":{},"box_id":217,"frequency":"weekly","exclusions":[241],"extras":[{{"id":28,"quantity":1}}]}}"#,
                rng.customer(customers)
            );
            request("POST", "/v1/orders", credentials(), Some(&body))
        },
        201,
        |_| None,
    )
    .await?;
    Ok(report(
        "orders_create",
        "POST /v1/orders (random seeded customer)".into(),
        &measured,
    ))
}

/// Lists the deliveries of the first Monday after today (seeded orders start today and come
/// weekly on one of the service's days each): the first page alone, then later pages one at
/// a time.
async fn measure_delivery_list(server: &Server) -> Result<DeliveryListReport, String> {
    let mut date = jiff::Timestamp::now()
        .to_zoned_datetime(jiff::tz::TimeZone::UTC)
        .date();
    loop {
        date = date.tomorrow().map_err(|e| e.to_string())?;
        if date.weekday() == jiff::civil::Weekday::Monday {
            break;
        }
    }
    let page = |n: u64| {
        let path = format!("/v1/deliveries?date={date}&per_page=100&page={n}");
        request("GET", &path, credentials(), None)
    };
    let cpu_before = server.cpu_seconds();
    let sent = Instant::now();
    let first = load::one_request(server.addr, page(1)).await?;
    let first_page_ms = sent.elapsed().as_secs_f64() * 1000.0;
    let first_page_cpu_ms = (server.cpu_seconds() - cpu_before) * 1000.0;
    if first.status != 200 {
        return Err(format!("the delivery list answered {}", first.status));
    }
    let entries = first.total_count.unwrap_or(0);
    let pages = entries.div_ceil(100).max(2);
    let later = sequential(
        server,
        "later pages of the delivery list",
        SEQUENTIAL_REQUESTS,
        // Pages 2, 3, ... and round again.
        |n| page(2 + n % (pages - 1)),
        200,
        |answer| {
            (answer.total_count != Some(entries))
                .then(|| format!("X-Total-Count {:?}, not {entries}", answer.total_count))
        },
    )
    .await?;
    Ok(DeliveryListReport {
        date: date.to_string(),
        entries,
        first_page_ms: round(first_page_ms, 1),
        first_page_cpu_ms: round(first_page_cpu_ms, 1),
        first_page_cpu_us_per_entry: round(first_page_cpu_ms * 1000.0 / entries.max(1) as f64, 3),
        later_pages: later.requests,
        later_page_median_ms: round(later.median_ms, 3),
        later_page_cpu_us: round(later.cpu_us_per_request, 1),
    })
}

/// The report as a Markdown table.
pub fn markdown(report: &BenchReport) -> String {
    let m = &report.machine;
    let mut out = format!(
        "Machine: {} cores, {} GiB, {}; {} connections, {} s measured per run.\n\n",
        m.cores, m.memory_gib, m.cpu, report.connections, report.duration_seconds
    );
    if !report.scenarios.is_empty() {
        out.push_str(
            "| scenario | requests/s | p50 ms | p99 ms | p99.9 ms | ratio to bare | bare \
             requests/s | server CPU µs/request | bare CPU µs/request | CPU over bare | errors |\n",
        );
        out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    }
    for s in &report.scenarios {
        out.push_str(&format!(
            "| {} | {:.0} | {:.3} | {:.3} | {:.3} | {:.3} | {:.0} | {:.1} | {:.1} | {:.2}× | {} |\n",
            s.name,
            s.rps,
            s.p50_ms,
            s.p99_ms,
            s.p999_ms,
            s.ratio_to_bare,
            s.bare_rps,
            s.cpu_us_per_request,
            s.bare_cpu_us_per_request,
            s.cpu_us_per_request / s.bare_cpu_us_per_request.max(0.1),
            s.errors
        ));
    }
    if let Some(e) = &report.expiry {
        out.push_str(&format!(
            "\nKeyed `POST /v1/orders` (a new key each) on {} connections with \
             `--idempotency-ttl {}`, read from `/metrics` once a second ({} errors):\n\n\
             | s | keyed creates | records expired | records held (creates − expired) | store MiB |\n\
             |---:|---:|---:|---:|---:|\n",
            e.connections, e.ttl_seconds, e.errors
        ));
        for sample in &e.samples {
            out.push_str(&format!(
                "| {:.1} | {} | {} | {} | {:.1} |\n",
                sample.seconds, sample.created, sample.expired, sample.held, sample.store_mib
            ));
        }
    }
    if let Some(r) = &report.restart {
        out.push_str(&format!(
            "\nRestart with {} customers and {} orders ({} per customer): first answer {:.3} s \
             after start (first start after seeding: {:.3} s); the last seeded order (id {}) \
             found by id {:.3} s after start; resident memory {:.1} MiB (empty store {:.1} \
             MiB, one order per customer {:.1} MiB): {:.0} bytes per customer with its first \
             order, {}.\n",
            r.customers,
            r.orders,
            r.orders_per_customer,
            r.restart_seconds,
            r.first_start_seconds,
            r.last_order_id,
            r.orders_ready_seconds,
            r.rss_mib,
            r.empty_rss_mib,
            r.one_order_rss_mib,
            r.bytes_per_customer,
            r.bytes_per_order.map_or_else(
                || "per further order not measured (one order per customer)".to_owned(),
                |bytes| format!("{bytes:.1} bytes per further order")
            ),
        ));
        out.push_str(
            "\nOne request at a time over that store (after one warm-up request):\n\n\
             | scenario | request | requests | median ms | server CPU µs/request |\n\
             |---|---|---:|---:|---:|\n",
        );
        for s in &r.scale {
            out.push_str(&format!(
                "| {} | `{}` | {} | {:.3} | {:.1} |\n",
                s.name, s.request, s.requests, s.median_ms, s.cpu_us_per_request
            ));
        }
        out.push_str(&format!(
            "\nDeep page over first page: {:.2}× the median latency, {:.2}× the server CPU.\n",
            r.deep_over_first_page_latency, r.deep_over_first_page_cpu
        ));
        let d = &r.delivery_list;
        out.push_str(&format!(
            "\nDelivery list of {} over that store: {} deliveries. The first page of 100, \
             which sorts the list, answered in {:.1} ms with {:.1} ms of server CPU ({:.3} µs \
             per delivery on the date); later pages, from the list kept sorted: median \
             {:.3} ms and {:.1} µs of server CPU per page ({} pages).\n",
            d.date,
            d.entries,
            d.first_page_ms,
            d.first_page_cpu_ms,
            d.first_page_cpu_us_per_entry,
            d.later_page_median_ms,
            d.later_page_cpu_us,
            d.later_pages
        ));
    }
    out
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
