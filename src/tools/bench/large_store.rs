//! The large store: restart time, time until the last order is found, resident memory per
//! customer and per order, and single requests at that scale (pages, email lookup, an
//! order create, a date's delivery list), one at a time, in latency and server CPU.
//! Must not touch: how the store is seeded (`boxsub-tools seed`, [`mod@crate::tools::seed`]) and
//! how servers start (`servers`), the report.

use std::path::Path;
use std::time::{Duration, Instant};

use super::load::{self, request};
use super::servers::{credentials, seed, serve_args, Program, Scratch, Server};
use super::{round, DeliveryListReport, RestartReport, SequentialReport};

/// Seconds from process start until the first answered request, and the server.
async fn time_to_first_answer(dir: &Path) -> Result<(f64, Server, Instant), String> {
    let started = Instant::now();
    let server = Server::start(Program::Service, &serve_args(dir, "on")?)?;
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

pub(super) async fn measure_restart(
    scratch: &Scratch,
    customers: u64,
    orders_per_customer: u64,
) -> Result<RestartReport, String> {
    let empty = Server::start(Program::Service, &serve_args(&scratch.path("empty"), "on")?)?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let empty_rss = empty.rss_mib();
    empty.stop();
    // With more than one order per customer, a store of one order per customer tells memory
    // per customer from memory per order; it is removed before the large one is seeded.
    let one_order_rss = if orders_per_customer > 1 {
        let dir = scratch.path("one-order");
        eprintln!("seeding {customers} customers with one order each for the memory baseline...");
        seed(&dir, customers, 1)?;
        let baseline = start_twice(&dir, crate::tools::seed::last_order_id(customers, 1)).await?;
        baseline.server.stop();
        let _ = std::fs::remove_dir_all(&dir);
        Some(baseline.rss_mib)
    } else {
        None
    };
    let dir = scratch.path("large");
    let orders = crate::tools::seed::last_order_id(customers, orders_per_customer);
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

/// Sends `request` over `client`; its answer must have status `expect` and pass `check`
/// (given the answer, an error message if it does not). `what` names the request in errors.
pub(super) async fn checked(
    client: &mut load::Client,
    what: &str,
    request: load::Req,
    expect: u16,
    check: impl Fn(&load::Answer) -> Option<String>,
) -> Result<load::Answer, String> {
    let answer = client
        .send(request)
        .await
        .map_err(|e| format!("{what}: {e}"))?;
    if answer.status != expect {
        let start = answer.body.len().min(300);
        return Err(format!(
            "{what} answered {} instead of {expect}: {}",
            answer.status,
            String::from_utf8_lossy(&answer.body[..start])
        ));
    }
    match check(&answer) {
        Some(problem) => Err(format!("{what}: {problem}")),
        None => Ok(answer),
    }
}

/// Sends `make(0)` unmeasured, then `make(1)`, `make(2)`, ... one at a time over one
/// keep-alive connection, at least `min_requests` of them and for at least
/// [`SEQUENTIAL_SECONDS`]; every answer must have status `expect` and pass `check` (see
/// [`checked`]).
async fn sequential(
    server: &Server,
    what: &str,
    min_requests: u64,
    mut make: impl FnMut(u64) -> load::Req,
    expect: u16,
    check: impl Fn(&load::Answer) -> Option<String>,
) -> Result<Measured, String> {
    let mut client = load::Client::new(server.addr)?;
    checked(&mut client, what, make(0), expect, &check).await?;
    let mut latencies = load::latency_histogram();
    let cpu_before = server.cpu_seconds();
    let started = Instant::now();
    let mut requests = 0;
    while requests < min_requests || started.elapsed().as_secs_f64() < SEQUENTIAL_SECONDS {
        requests += 1;
        let sent = Instant::now();
        checked(&mut client, what, make(requests), expect, &check).await?;
        load::record_since(&mut latencies, sent);
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
