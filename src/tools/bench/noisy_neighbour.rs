//! The noisy neighbour: webstore B sends one order every 20 ms while webstore A floods
//! `POST /v1/orders` (over 200 customers) through many connections, both with the default
//! quotas (no rate quota), so that fair admission, not a quota, is what shares the host. B's
//! latency is measured alone and under the flood, and A's rate alone and beside B, against
//! servers with each of `--noisy-admission-slots` (by default the default `--admission-slots`,
//! fair admission, and 100000, beyond any flood: none): the figures before and after, in one
//! run. B's client runs on a thread of its own, apart from A's connections.
//!
//! Must not touch: the other scenarios; what B may get is a 201, always (never refused).

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use super::load::{self, request, LoadResult, LoadSpec};
use super::paced::paced_apart;
use super::servers::{demo_catalogue, seed, serve_args_with, Program, Scratch, Server};
use super::{round, BenchConfig, SEEDED};
use crate::domain::catalogue::DEMO_CREDENTIALS;

/// B's pace.
const B_INTERVAL: Duration = Duration::from_millis(20);
/// A's orders go to this many customers.
const A_CUSTOMERS: u64 = 200;

/// One server's figures.
#[derive(Debug, Clone, Serialize)]
pub struct NoisyRun {
    /// `--admission-slots` of the server (`default`, or the number).
    pub admission_slots: String,
    /// B's median latency alone, ms.
    pub b_alone_p50_ms: f64,
    /// B's 99th percentile alone, ms.
    pub b_alone_p99_ms: f64,
    /// B's median latency under A's flood, ms.
    pub b_flooded_p50_ms: f64,
    /// B's 99th percentile under A's flood, ms.
    pub b_flooded_p99_ms: f64,
    /// B's orders under the flood.
    pub b_flooded_requests: u64,
    /// B's requests that did not get a 201 (in both phases), and pings that did not get 204.
    pub b_errors: u64,
    /// Median of a `GET /v1/ping` every 20 ms beside B under the flood, ms: the front end's and
    /// the reactor's share of B's wait (no quota, actor or log).
    pub ping_flooded_p50_ms: f64,
    /// Its 99th percentile, ms.
    pub ping_flooded_p99_ms: f64,
    /// A's orders per second alone.
    pub a_alone_rps: f64,
    /// A's orders per second beside B.
    pub a_with_b_rps: f64,
    /// A's requests that did not get a 201.
    pub a_errors: u64,
}

/// The scenario's figures.
#[derive(Debug, Clone, Serialize)]
pub struct NoisyNeighbourReport {
    /// A's connections.
    pub a_connections: usize,
    /// B's interval between orders, ms.
    pub b_interval_ms: u64,
    /// Measured seconds per phase.
    pub seconds: f64,
    /// With fair admission (the default) and without.
    pub runs: Vec<NoisyRun>,
}

impl NoisyNeighbourReport {
    /// Requests of A or B that did not get a 201.
    pub fn errors(&self) -> u64 {
        self.runs
            .iter()
            .map(|run| run.a_errors + run.b_errors)
            .sum()
    }
}

/// Runs the scenario against a server with fair admission and one without.
pub(super) async fn measure_noisy_neighbour(
    scratch: &Scratch,
    config: &BenchConfig,
) -> Result<NoisyNeighbourReport, String> {
    let mut runs = Vec::new();
    for slots in &config.noisy_admission_slots {
        let slots = (slots != "default").then_some(slots.as_str());
        runs.push(one_server(scratch, config, slots).await?);
    }
    Ok(NoisyNeighbourReport {
        a_connections: config.flood_connections,
        b_interval_ms: B_INTERVAL.as_millis() as u64,
        seconds: config.duration,
        runs,
    })
}

async fn one_server(
    scratch: &Scratch,
    config: &BenchConfig,
    slots: Option<&str>,
) -> Result<NoisyRun, String> {
    let name = format!("noisy-{}", slots.unwrap_or("default"));
    let dir = scratch.path(&name);
    seed(&dir, SEEDED, 1)?;
    // Both webstores with the defaults: no rate quota, so that admission alone shares the
    // host.
    let mut args = serve_args_with(&dir, "on", &demo_catalogue()?)?;
    if let Some(slots) = slots {
        args.extend(["--admission-slots".to_owned(), slots.to_owned()]);
    }
    let server = Server::start(Program::Service, &args)?;
    let b_customer = create_b_customer(server.addr).await?;
    let duration = Duration::from_secs_f64(config.duration);
    let warmup = Duration::from_secs_f64(config.warmup);
    let flood = LoadSpec {
        addr: server.addr,
        connections: config.flood_connections,
        warmup,
        duration,
        request: Arc::new(|n| {
            let body = format!(
                r#"{{"customer_id":{},"box_id":217,"frequency":"weekly"}}"#,
                n % A_CUSTOMERS + 1
            );
            request("POST", "/v1/orders", a_credentials(), Some(&body))
        }),
        expect: load::expect_status(201),
    };
    // A first: B alone then finds a server past its start-up work (the stored orders'
    // indexing, the census), as it is under the flood.
    eprintln!("noisy neighbour ({name}): A alone...");
    let a_alone = load::run(flood.clone()).await?;
    eprintln!("noisy neighbour ({name}): B alone...");
    let b_alone = paced_b_apart(server.addr, b_customer, warmup, duration).await?;
    eprintln!("noisy neighbour ({name}): A's flood with B...");
    let (a_with_b, b_flooded, ping) = tokio::join!(
        load::run(flood),
        paced_b_apart(server.addr, b_customer, warmup, duration),
        paced_ping_apart(server.addr, warmup, duration)
    );
    let (a_with_b, b_flooded, ping) = (a_with_b?, b_flooded?, ping?);
    server.stop();
    let run = NoisyRun {
        admission_slots: slots.unwrap_or("default").to_owned(),
        b_alone_p50_ms: round(b_alone.quantile_ms(0.5), 3),
        b_alone_p99_ms: round(b_alone.quantile_ms(0.99), 3),
        b_flooded_p50_ms: round(b_flooded.quantile_ms(0.5), 3),
        b_flooded_p99_ms: round(b_flooded.quantile_ms(0.99), 3),
        b_flooded_requests: b_flooded.requests,
        b_errors: b_alone.errors + b_flooded.errors + ping.errors,
        ping_flooded_p50_ms: round(ping.quantile_ms(0.5), 3),
        ping_flooded_p99_ms: round(ping.quantile_ms(0.99), 3),
        a_alone_rps: round(a_alone.rps(), 0),
        a_with_b_rps: round(a_with_b.rps(), 0),
        a_errors: a_alone.errors + a_with_b.errors,
    };
    Ok(run)
}

fn a_credentials() -> (&'static str, &'static str) {
    (DEMO_CREDENTIALS[0].1, DEMO_CREDENTIALS[0].2)
}

fn b_credentials() -> (&'static str, &'static str) {
    (DEMO_CREDENTIALS[1].1, DEMO_CREDENTIALS[1].2)
}

/// B's one customer, made through the API.
async fn create_b_customer(addr: std::net::SocketAddr) -> Result<u64, String> {
    let body = r#"{"first_name":"Bea","last_name":"Neighbour","email":"bea@example.org","delivery_service_id":501,"address":{"address_1":"1 Quiet Lane","city":"Dublin","postcode":"D01","home_phone":"01 555 0100"}}"#;
    let answer = load::one_request(
        addr,
        request("POST", "/v1/customers", b_credentials(), Some(body)),
    )
    .await?;
    if answer.status != 201 {
        return Err(format!(
            "creating B's customer answered {}: {}",
            answer.status,
            String::from_utf8_lossy(&answer.body)
        ));
    }
    let customer: serde_json::Value =
        serde_json::from_slice(&answer.body).map_err(|e| e.to_string())?;
    customer["id"]
        .as_u64()
        .ok_or_else(|| "B's customer has no id".to_owned())
}

/// B's orders, [`paced_apart`].
async fn paced_b_apart(
    addr: std::net::SocketAddr,
    customer: u64,
    warmup: Duration,
    duration: Duration,
) -> Result<LoadResult, String> {
    let body = format!(r#"{{"customer_id":{customer},"box_id":801,"frequency":"weekly"}}"#);
    let order = move || request("POST", "/v1/orders", b_credentials(), Some(&body));
    paced_apart(addr, B_INTERVAL, warmup, duration, order, 201, |_| {}).await
}

/// `GET /v1/ping` (no credentials, no quota, no actor, no log: only the HTTP front end and
/// the reactor), [`paced_apart`]: how long any request waits behind the flood's connections.
async fn paced_ping_apart(
    addr: std::net::SocketAddr,
    warmup: Duration,
    duration: Duration,
) -> Result<LoadResult, String> {
    let ping = || request("GET", "/v1/ping", ("", ""), None);
    paced_apart(addr, B_INTERVAL, warmup, duration, ping, 204, |_| {}).await
}
