//! Keyed creates against idempotency-record expiry: a stream of creates with a new key
//! each, with `/metrics` read once a second, showing that the records kept stay bounded.
//! Must not touch: how servers start (`servers`), the other scenarios, the report.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::load::{self, request, LoadSpec};
use super::servers::{credentials, seed, serve_args, Program, Scratch, Server};
use super::{round, BenchConfig, ExpiryReport, ExpirySample, SEEDED};

/// Time to live of the records in [`measure_expiry`], seconds (the sweep runs every second).
const EXPIRY_TTL: u64 = 2;
/// How long [`measure_expiry`] sends keyed creates: five times the time to live.
const EXPIRY_SECONDS: u64 = 5 * EXPIRY_TTL;

/// Keyed creates (a fresh key each) for [`EXPIRY_SECONDS`] against a server whose records
/// live [`EXPIRY_TTL`] seconds, reading its metrics once a second.
pub(super) async fn measure_expiry(
    scratch: &Scratch,
    config: &BenchConfig,
) -> Result<ExpiryReport, String> {
    let dir = scratch.path("expiry");
    seed(&dir, SEEDED, 1)?;
    let mut args = serve_args(&dir, "on")?;
    args.extend(["--idempotency-ttl".to_owned(), EXPIRY_TTL.to_string()]);
    let server = Server::start(Program::Service, &args)?;
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
        expect: load::expect_status(201),
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
