//! `boxsub-tools bench`: measures boxsub against the physical limit of this host in one run. It
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
//!
//! This file holds the report's types and runs the request scenarios. The parts: `servers`
//! starts, measures and stops the servers; `scenarios` says what each scenario sends and
//! expects; [`load`] is the load generator; `expiry` runs keyed creates against record
//! expiry; `large_store` measures restart and single requests on a large store; `report`
//! renders the report as markdown; `day` measures a producer's delivery day in the web app
//! beside the API's list (`boxsub-tools day-page`, a command of its own).
//!
//! This file also owns `bench`'s settings ([`BenchConfig`]); `day-page`'s are in `day`. Must
//! not touch: the command line that parses them and prints the report ([`crate::tools`]),
//! which calls in here and is never called from here.

mod day;
mod expiry;
mod large_store;
pub mod load;
mod noisy_neighbour;
mod paced;
mod report;
mod scenarios;
mod servers;
mod webhook_probe;
mod webhook_receiver;

pub use day::{day_page, DayPageConfig, DayPageReport, DayRead};
pub use noisy_neighbour::{NoisyNeighbourReport, NoisyRun};
pub use report::markdown;
pub use servers::bare_server;
pub use webhook_probe::FromAcknowledgement;
pub use webhook_receiver::{webhook_receiver, ReceiverStats};

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use serde::Serialize;

use expiry::measure_expiry;
use large_store::measure_restart;
use load::{LoadResult, LoadSpec};
use noisy_neighbour::measure_noisy_neighbour;
use scenarios::{scenarios, Scenario, Target};
use servers::{demo_catalogue, machine, seed, serve_args_with, Program, Scratch, Server};

/// Settings of `boxsub-tools bench`.
#[derive(Debug, Clone, Args)]
pub struct BenchConfig {
    /// Measured seconds per run.
    #[arg(long, default_value_t = 20.0)]
    pub duration: f64,
    /// Unmeasured warm-up seconds before each run.
    #[arg(long, default_value_t = 3.0)]
    pub warmup: f64,
    /// Concurrent keep-alive connections.
    #[arg(long, default_value_t = 64)]
    pub connections: usize,
    /// Runs of each scenario, each beside a bare-server run.
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,
    /// Customers in the large store whose restart time, memory and per-request cost at scale
    /// are measured (0 skips it).
    #[arg(long, default_value_t = 1_000_000)]
    pub restart_customers: u64,
    /// Orders of each customer in that store. Above 1, a store with one order per customer
    /// is seeded too, so that memory per order can be told from memory per customer.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub restart_orders_per_customer: u64,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Run only the scenarios whose names contain this text (`noisy_neighbour` is one).
    #[arg(long)]
    pub only: Option<String>,
    /// Connections of webstore A's flood in the noisy-neighbour scenario.
    #[arg(long, default_value_t = 512)]
    pub flood_connections: usize,
    /// The `--admission-slots` of the noisy-neighbour scenario's servers, one server each
    /// (`default`: the service's default; 100000: more than any flood, no fair admission).
    #[arg(long, value_delimiter = ',', default_value = "default,100000")]
    pub noisy_admission_slots: Vec<String>,
}

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
    /// With a webhook endpoint: what its receiver got, counted once its deliveries drained.
    pub webhook: Option<WebhookReport>,
}

/// The deliveries of a scenario run with a webhook endpoint.
#[derive(Debug, Clone, Serialize)]
pub struct WebhookReport {
    /// What the receiver got over the whole scenario (its warm-ups included).
    pub receiver: ReceiverStats,
    /// Seconds from the end of a run until the receiver stopped getting deliveries (the
    /// endpoint's backlog), the longest of the scenario's runs: each is drained before the
    /// next bare run, and the server's CPU meanwhile counts with the run's requests.
    pub drained_after_s: f64,
    /// From the acknowledgement of a probe's orders, sent beside the measured runs, to the
    /// receiver.
    pub from_acknowledgement: FromAcknowledgement,
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
    /// One webstore's orders beside another's flood.
    pub noisy_neighbour: Option<NoisyNeighbourReport>,
    /// Restart and memory.
    pub restart: Option<RestartReport>,
    /// Settings of the run.
    pub connections: usize,
    /// Measured seconds per run.
    pub duration_seconds: f64,
}

/// Runs the whole benchmark.
pub async fn run(config: &BenchConfig) -> Result<BenchReport, String> {
    let scratch = Scratch::new()?;
    let chosen: Vec<Scenario> = scenarios()
        .into_iter()
        .filter(|scenario| {
            config
                .only
                .as_deref()
                .is_none_or(|only| scenario.name.contains(only))
        })
        .collect();
    let reports = run_scenarios(&scratch, &chosen, config).await?;
    let noisy_neighbour = if config
        .only
        .as_deref()
        .is_none_or(|only| "noisy_neighbour".contains(only))
    {
        Some(measure_noisy_neighbour(&scratch, config).await?)
    } else {
        None
    };
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
        noisy_neighbour,
        restart,
        connections: config.connections,
        duration_seconds: config.duration,
    })
}

/// Runs the chosen request scenarios, each beside the bare server. Only the servers they
/// drive are seeded and started: `--only` matching no scenario starts none.
async fn run_scenarios(
    scratch: &Scratch,
    chosen: &[Scenario],
    config: &BenchConfig,
) -> Result<Vec<ScenarioReport>, String> {
    if chosen.is_empty() {
        return Ok(Vec::new());
    }
    let mut servers: Vec<(Target, Server)> = Vec::new();
    let mut receiver = None;
    for scenario in chosen {
        if !servers.iter().any(|(target, _)| *target == scenario.target) {
            let (server, its_receiver) = start_target(scratch, scenario.target)?;
            servers.push((scenario.target, server));
            receiver = receiver.or(its_receiver);
        }
    }
    let bare = Server::start(
        Program::Tools,
        &["bare-server", "--addr", "127.0.0.1:0"].map(str::to_owned),
    )?;
    let warmup = Duration::from_secs_f64(config.warmup);
    let duration = Duration::from_secs_f64(config.duration);
    let bare_spec = LoadSpec {
        addr: bare.addr,
        connections: config.connections,
        warmup,
        duration,
        request: Arc::new(|_| load::bare_request()),
        expect: load::expect_status(200),
    };
    let mut reports = Vec::new();
    for scenario in chosen {
        let server = servers
            .iter()
            .find(|(target, _)| *target == scenario.target)
            .map(|(_, server)| server)
            .ok_or("a scenario's server was not started")?;
        let spec = LoadSpec {
            addr: server.addr,
            request: scenario.request.clone(),
            expect: scenario.expect.clone(),
            ..bare_spec.clone()
        };
        // Alternate bare and boxsub runs so that drift of a shared machine hits both.
        let mut bare_runs = Vec::new();
        let mut runs = Vec::new();
        let mut probed = Vec::new();
        let mut drains = Vec::new();
        for _ in 0..config.rounds.max(1) {
            bare_runs.push(run_with_cpu(bare_spec.clone(), &bare).await?);
            match (&receiver, scenario.target) {
                (Some(receiver), Target::DurableWithWebhook) => {
                    let (run, probe) = tokio::join!(
                        run_with_cpu(spec.clone(), server),
                        webhook_probe::orders_beside(server.addr, warmup, duration)
                    );
                    let (run, mut cpu) = run?;
                    let (probe_run, acked) = probe?;
                    if probe_run.errors > 0 {
                        return Err(format!(
                            "{} of the webhook probe's orders did not get a 201",
                            probe_run.errors
                        ));
                    }
                    probed.extend(acked);
                    // The endpoint's backlog is delivered before the next bare run (which it
                    // would slow), and what delivering it costs counts with the run's orders.
                    let before = server.cpu_seconds();
                    drains.push(drained(receiver).await?);
                    cpu += server.cpu_seconds() - before;
                    runs.push((run, cpu));
                }
                _ => runs.push(run_with_cpu(spec.clone(), server).await?),
            }
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
        let webhook = match (&receiver, drains.last()) {
            (Some(receiver), Some((stats, _))) => {
                let from_acknowledgement =
                    webhook_probe::from_acknowledgement(receiver.addr, &probed).await?;
                eprintln!(
                    "webhook: from acknowledgement to receiver p50 {} ms p99 {} ms ({} of the \
                     probe's {} orders delivered)",
                    from_acknowledgement.p50_ms,
                    from_acknowledgement.p99_ms,
                    from_acknowledgement.delivered,
                    from_acknowledgement.orders
                );
                Some(WebhookReport {
                    receiver: stats.clone(),
                    drained_after_s: drains.iter().map(|(_, after)| *after).fold(0.0, f64::max),
                    from_acknowledgement,
                })
            }
            _ => None,
        };
        let report = ScenarioReport {
            webhook,
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
    for (_, server) in servers {
        server.stop();
    }
    if let Some(receiver) = receiver {
        receiver.stop();
    }
    bare.stop();
    Ok(reports)
}

/// The receiver's stats once its deliveries stop coming (they stop for a second), and how
/// many seconds after the call that was; at most two minutes.
async fn drained(receiver: &Server) -> Result<(ReceiverStats, f64), String> {
    let started = std::time::Instant::now();
    let mut last = webhook_receiver::stats(receiver.addr).await?;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = webhook_receiver::stats(receiver.addr).await?;
        if now.received == last.received || started.elapsed() > Duration::from_secs(120) {
            let drained_after_s = round((started.elapsed().as_secs_f64() - 1.0).max(0.0), 1);
            eprintln!(
                "webhook: {} delivered, write to receiver p50 {} ms p99 {} ms, drained {:.1} s after the run",
                now.received, now.p50_ms, now.p99_ms, drained_after_s
            );
            return Ok((now, drained_after_s));
        }
        last = now;
    }
}

/// Seeds a store for `target` and starts the boxsub server it names, and the webhook
/// receiver it sends to if it has one.
fn start_target(scratch: &Scratch, target: Target) -> Result<(Server, Option<Server>), String> {
    let mut receiver = None;
    let mut catalogue = demo_catalogue()?;
    let (name, durability, extra): (&str, &str, &[&str]) = match target {
        Target::Durable => ("durable", "on", &[]),
        Target::DurableWithWebhook => {
            let started = Server::start(
                Program::Tools,
                &["webhook-receiver", "--addr", "127.0.0.1:0"].map(str::to_owned),
            )?;
            catalogue = webhook_receiver::with_endpoint(catalogue, started.addr)?;
            receiver = Some(started);
            ("durable-webhook", "on", &[])
        }
        Target::DurableSyncingAtOnce => (
            "durable-syncing-at-once",
            "on",
            &["--commit-interval-us", "0"],
        ),
        Target::NotDurable => ("durability-off", "off", &[]),
        Target::OverQuota => {
            // One read a second: every request of the scenario is past the quota.
            catalogue["webstores"][0]["quotas"] =
                serde_json::json!({"reads_per_second": 1, "read_burst": 1});
            ("over-quota", "on", &[])
        }
    };
    let dir = scratch.path(name);
    seed(&dir, SEEDED, 1)?;
    let mut args = serve_args_with(&dir, durability, &catalogue)?;
    args.extend(extra.iter().map(|arg| (*arg).to_owned()));
    Ok((Server::start(Program::Service, &args)?, receiver))
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

fn round(value: f64, places: i32) -> f64 {
    let scale = 10f64.powi(places);
    (value * scale).round() / scale
}
