//! `boxsub-tools day-page`: what a producer's whole delivery day costs in the web app, beside
//! the API's delivery list of the same day. It starts boxsub (durable, the demo catalogue, a
//! scratch store), seeds N customers of the demo's first webstore through the API, each with
//! one weekly order on every day of its Courier (so each of those days, the date measured
//! among them, has N deliveries; server CPU per order created is measured); with
//! `--changes-per-order C` it changes each order C times (`PATCH`, server CPU per change
//! measured in the same run), so that the day is read over histories of C versions. It signs
//! in once as the webstore's producer, and reads the whole day one request at a time over
//! one keep-alive connection, K runs of each read, interleaved so that a noisy machine's
//! drift hits every read alike: the day page, its CSV, and the API's list (every page of
//! 1,000) as JSON and as CSV; and, cold, the page and the API's JSON each right after a new
//! order (on another day) has made the kept sorted list of the day stale, so that each pays
//! the sort again; and the week page of the date's week (its five delivery days of N
//! deliveries each). It reports latency quantiles, bytes and server CPU per read (by thread,
//! to the nanosecond: a read takes a few ms, less than the ticks of 10 ms of the process's
//! CPU in `/proc/PID/stat`, which it gives over the whole measurement as a check). Must not
//! touch: how servers start and are measured (`servers`), the HTTP client (`load`), the main
//! bench's scenarios and report.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use futures_util::future::try_join_all;
use hdrhistogram::Histogram;
use hyper::header::{HeaderValue, ACCEPT, CONTENT_TYPE, COOKIE, SET_COOKIE};
use serde::Serialize;
use serde_json::{json, Value};

use super::large_store::checked;
use super::load::{self, Answer, Client, Req};
use super::servers::{credentials, machine, serve_args, Program, Scratch, Server, ThreadCpu};
use super::{round, Machine};
use crate::domain::catalogue::DEMO_PRODUCERS;

/// Settings of `boxsub-tools day-page`.
#[derive(Debug, Clone, Args)]
pub struct DayPageConfig {
    /// Deliveries on the day measured (one customer with one weekly order each).
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub deliveries: u64,
    /// Changes made to each order after it is created (`PATCH /v1/orders/{id}`), each a
    /// version of its history: a skipped date after the day measured, or its extras from a
    /// date before it, so that the day keeps every delivery while each order's history
    /// grows.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=100))]
    pub changes_per_order: u64,
    /// Measured runs of each read (after one unmeasured run of each).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
    pub runs: u64,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// The day measured: a Thursday, on which the demo's first webstore delivers with its
/// Courier alone (one route).
const DATE: &str = "2027-06-03";
/// The seeded orders' weekdays (0 being Sunday): every day of the Courier, so that each of
/// its days has the N deliveries of [`DATE`].
const WEEK_DAYS: [u8; 5] = [1, 2, 3, 4, 5];
/// The week measured: the seven days from the Sunday before [`DATE`].
const WEEK_OF: &str = "2027-05-30";
/// When the seeded orders start: the Monday of that week, so that each of its delivery
/// days has them all.
const ORDERS_FROM: &str = "2027-05-31";
/// The Courier: Monday to Friday.
const COURIER: u64 = 91;
/// The orders that make the day's kept list stale before a cold read: weekly on Fridays
/// from the week after the one measured. Any new order of the webstore moves the generation
/// its lists are kept at, and these add no delivery to the day or the week measured, which
/// keep their deliveries and the API its number of pages through the run.
const STALE_START: &str = "2027-06-11";
/// Their weekday.
const STALE_WEEK_DAY: u8 = 5;
/// The API's largest page.
const PER_PAGE: u64 = 1000;
/// Connections seeding the day at once.
const SEEDING_CONNECTIONS: u64 = 4;
/// The app's cookies.
const FORM_COOKIE: &str = "boxsub_form";
const SESSION_COOKIE: &str = "boxsub_session";

/// What one run measured.
#[derive(Debug, Clone, Serialize)]
pub struct DayPageReport {
    /// Where.
    pub machine: Machine,
    /// The day read.
    pub date: String,
    /// Deliveries on it.
    pub deliveries: u64,
    /// Routes (delivery services) on the day page.
    pub routes: u64,
    /// Measured runs of each read.
    pub runs: u64,
    /// Pages of 1,000 (the largest) in the API's whole list.
    pub api_pages: u64,
    /// Seconds seeding the customers and orders through the API.
    pub seeding_seconds: f64,
    /// Changes made to each order before the reads.
    pub changes_per_order: u64,
    /// Server CPU per `POST /v1/orders` while seeding the orders, µs (by thread, to the
    /// nanosecond; four connections at once).
    pub order_create_cpu_us: f64,
    /// Server CPU per `PATCH /v1/orders/{id}` while changing them, µs, measured the same
    /// way in the same run (absent without changes).
    pub order_change_cpu_us: Option<f64>,
    /// Each read, in the order of a round.
    pub reads: Vec<DayRead>,
    /// The day page's median over the API's whole JSON list's median.
    pub page_over_api_json: f64,
    /// The same, cold.
    pub cold_page_over_cold_api_json: f64,
    /// Server CPU from the first measured read to the last (the reads, and the orders made
    /// before the cold ones), by thread to the nanosecond: the sum the reads' figures come
    /// from, plus the orders', s.
    pub measured_cpu_seconds: f64,
    /// The same from `/proc/PID/stat` (ticks of 10 ms), s: a check of the above.
    pub measured_cpu_seconds_ticks: f64,
}

/// One way of reading the whole day, measured over the runs.
#[derive(Debug, Clone, Serialize)]
pub struct DayRead {
    /// Its name.
    pub name: String,
    /// What it sends.
    pub request: String,
    /// HTTP requests in one read (the API's pages).
    pub requests_per_read: u64,
    /// Whether each run came right after a new order made the kept list stale.
    pub cold: bool,
    /// Median time from sending the first request to the whole last answer, ms.
    pub median_ms: f64,
    /// Its 90th percentile, ms.
    pub p90_ms: f64,
    /// Its maximum, ms.
    pub max_ms: f64,
    /// Bytes of the bodies of one read.
    pub bytes: u64,
    /// Server CPU over the runs' reads (the sum over the server's threads of their time on
    /// a CPU, `/proc/PID/task/TID/schedstat`) divided by the runs, ms.
    pub cpu_ms_per_read: f64,
}

/// The reads of a round, in the order they are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Page,
    PageCsv,
    ApiJson,
    ApiCsv,
    ColdPage,
    ColdApiJson,
    Week,
}

const ROUND: [Kind; 7] = [
    Kind::Page,
    Kind::PageCsv,
    Kind::ApiJson,
    Kind::ApiCsv,
    Kind::ColdPage,
    Kind::ColdApiJson,
    Kind::Week,
];

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Page => "day_page",
            Kind::PageCsv => "day_page_csv",
            Kind::ApiJson => "api_list_json",
            Kind::ApiCsv => "api_list_csv",
            Kind::ColdPage => "day_page_cold",
            Kind::ColdApiJson => "api_list_json_cold",
            Kind::Week => "week_page",
        }
    }

    fn cold(self) -> bool {
        matches!(self, Kind::ColdPage | Kind::ColdApiJson)
    }

    fn is_page(self) -> bool {
        matches!(self, Kind::Page | Kind::ColdPage)
    }

    fn is_api(self) -> bool {
        matches!(self, Kind::ApiJson | Kind::ApiCsv | Kind::ColdApiJson)
    }

    fn is_csv(self) -> bool {
        matches!(self, Kind::PageCsv | Kind::ApiCsv)
    }

    fn describe(self, pages: u64) -> String {
        let api = format!("GET /v1/deliveries?date={DATE}&page=1..={pages}&per_page={PER_PAGE}");
        let described = match self {
            Kind::Page | Kind::ColdPage => format!("GET /app/deliveries/{DATE}"),
            Kind::PageCsv => format!("GET /app/deliveries/{DATE}.csv"),
            Kind::ApiJson | Kind::ColdApiJson => api,
            Kind::ApiCsv => format!("{api}, Accept: text/csv"),
            Kind::Week => format!("GET /app/weeks/{WEEK_OF}"),
        };
        if self.cold() {
            format!("{described}, after a new order")
        } else {
            described
        }
    }

    /// The requests of one read.
    fn requests(self, session: &str, pages: u64) -> Vec<Req> {
        if self.is_api() {
            return (1..=pages)
                .map(|page| {
                    let path =
                        format!("/v1/deliveries?date={DATE}&page={page}&per_page={PER_PAGE}");
                    let mut request = load::request("GET", &path, credentials(), None);
                    if self.is_csv() {
                        let csv = HeaderValue::from_static("text/csv");
                        request.headers_mut().insert(ACCEPT, csv);
                    }
                    request
                })
                .collect();
        }
        let suffix = if self.is_csv() { ".csv" } else { "" };
        let path = if self == Kind::Week {
            format!("/app/weeks/{WEEK_OF}")
        } else {
            format!("/app/deliveries/{DATE}{suffix}")
        };
        vec![app_request("GET", &path, Some(session), None)]
    }

    /// What every answer of this read must say in its head.
    fn check_head(self, answer: &Answer, deliveries: u64) -> Option<String> {
        let wanted = match (self.is_csv(), self.is_api()) {
            (true, _) => "text/csv",
            (false, true) => "application/json",
            (false, false) => "text/html",
        };
        let content_type = answer.headers.get(CONTENT_TYPE).map(HeaderValue::as_bytes);
        if !content_type.is_some_and(|value| value.starts_with(wanted.as_bytes())) {
            return Some(format!("Content-Type {content_type:?}, not {wanted}"));
        }
        (self.is_api() && answer.total_count != Some(deliveries))
            .then(|| format!("X-Total-Count {:?}, not {deliveries}", answer.total_count))
    }

    /// Whether one read's answers hold the whole day: a row of the page, a line of the
    /// CSV, an element of the JSON for each delivery; the week, every delivery of its
    /// [`WEEK_DAYS`] delivery days.
    fn check_whole(self, answers: &[Answer], deliveries: u64) -> Result<(), String> {
        if self == Kind::Week {
            let body = String::from_utf8_lossy(&answers[0].body);
            let found: u64 = body
                .split("data-deliveries=\"")
                .skip(1)
                .filter_map(|rest| rest.split('"').next()?.parse::<u64>().ok())
                .sum();
            let wanted = deliveries * WEEK_DAYS.len() as u64;
            return if found == wanted {
                Ok(())
            } else {
                Err(format!("the week holds {found} deliveries, not {wanted}"))
            };
        }
        let mut found = 0;
        for answer in answers {
            found += if self.is_page() {
                occurrences(&answer.body, b"data-order-id=")
            } else if self.is_csv() {
                // A header line and a line a delivery (the seeded fields have no newline).
                occurrences(&answer.body, b"\n").saturating_sub(1)
            } else {
                serde_json::from_slice::<Vec<Value>>(&answer.body)
                    .map_err(|e| format!("{}: not a JSON list: {e}", self.name()))?
                    .len() as u64
            };
        }
        if found == deliveries {
            Ok(())
        } else {
            Err(format!(
                "{} holds {found} deliveries, not {deliveries}",
                self.name()
            ))
        }
    }
}

/// How many times `needle` stands in `haystack`.
fn occurrences(haystack: &[u8], needle: &[u8]) -> u64 {
    haystack
        .windows(needle.len())
        .filter(|window| *window == needle)
        .count() as u64
}

/// A request to the app: no API credentials, the cookie given, a form body if any.
fn app_request(method: &str, path: &str, cookie: Option<&str>, form: Option<&str>) -> Req {
    let mut request = load::request(method, path, ("", ""), form);
    let headers = request.headers_mut();
    headers.remove("api-key");
    headers.remove("api-secret");
    if form.is_some() {
        let form = HeaderValue::from_static("application/x-www-form-urlencoded");
        headers.insert(CONTENT_TYPE, form);
        // As a browser posts the app's own form: the app refuses a form that does not say
        // where it comes from (docs/app.md).
        headers.insert("sec-fetch-site", HeaderValue::from_static("same-origin"));
    }
    if let Some(cookie) = cookie.and_then(|cookie| HeaderValue::from_str(cookie).ok()) {
        headers.insert(COOKIE, cookie);
    }
    request
}

/// The value the answer's `Set-Cookie` gives cookie `name`.
fn cookie_set(answer: &Answer, name: &str) -> Option<String> {
    answer
        .headers
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .filter_map(|value| value.split(';').next())
        .find_map(|pair| pair.trim().strip_prefix(name)?.strip_prefix('='))
        .map(str::to_owned)
}

/// Signs in as the demo webstore's producer: the form, then the form posted with its token.
/// Returns the `Cookie` header of the session.
async fn sign_in(client: &mut Client) -> Result<String, String> {
    let (_, email, password) = DEMO_PRODUCERS[0];
    let form_request = app_request("GET", "/app/sign_in", None, None);
    let form = checked(client, "the sign-in form", form_request, 200, |_| None).await?;
    let token =
        cookie_set(&form, FORM_COOKIE).ok_or("the sign-in form set no form cookie".to_owned())?;
    let hidden = format!("name=\"form_token\" value=\"{token}\"");
    if !String::from_utf8_lossy(&form.body).contains(&hidden) {
        return Err("the sign-in form's token is not its cookie's".into());
    }
    let body = serde_urlencoded::to_string([
        ("email", email),
        ("password", password),
        ("form_token", &token),
    ])
    .map_err(|e| e.to_string())?;
    let cookie = format!("{FORM_COOKIE}={token}");
    let post = app_request("POST", "/app/sign_in", Some(&cookie), Some(&body));
    let signed_in = checked(client, "signing in", post, 303, |_| None).await?;
    let session = cookie_set(&signed_in, SESSION_COOKIE)
        .ok_or("signing in set no session cookie".to_owned())?;
    Ok(format!("{SESSION_COOKIE}={session}"))
}

/// Customer `i` of the day: on the Courier, with an address, a phone, and for some a second
/// address line, a delivery note and characters the page escapes.
fn customer_body(i: u64) -> String {
    let first_names = ["Aroha", "Ben", "Chloé", "Dmitri", "Eve", "Farid", "Grace"];
    let mut address = json!({
        "address_1": format!("{} Market Street", i + 1),
        "city": "London",
        "postcode": format!("E{} {}AB", 1 + i % 20, i % 10),
        "mobile_phone": format!("07700 {i:06}"),
    });
    if i.is_multiple_of(3) {
        address["address_2"] = json!(format!("Flat {}", 1 + i % 9));
    }
    if i.is_multiple_of(4) {
        address["delivery_note"] = json!("Leave by the back door, behind the <green> bin & gate");
    }
    json!({"customer": {
        "first_name": first_names[(i % 7) as usize],
        "last_name": if i.is_multiple_of(10) { "O'Brien & Daughters".to_owned() } else { format!("Day{i}") },
        "email": format!("day{i}@example.com"),
        "delivery_service_id": COURIER,
        "address": address,
    }})
    .to_string()
}

/// A weekly order for `customer` from `start_date` on `week_days`: the 5 kg box (217) with
/// some exclusions, substitutions and extras, or for one in four the fruit bag (218).
fn order_body(customer: u64, i: u64, start_date: &str, week_days: &[u8]) -> String {
    let some = |yes: bool, value: Value| if yes { value } else { json!([]) };
    let (box_id, exclusions, substitutions, extras) = if i % 4 == 3 {
        let exclusions = some(i % 8 == 3, json!([241]));
        (
            218,
            exclusions,
            json!([]),
            some(i.is_multiple_of(3), json!([{"id": 28, "quantity": 1}])),
        )
    } else {
        (
            217,
            some(i.is_multiple_of(2), json!([240 + i % 6])),
            some(i.is_multiple_of(3), json!([240 + (i + 3) % 6])),
            some(
                !i.is_multiple_of(5),
                json!([{"id": 28 + i % 3, "quantity": 1 + i % 2}]),
            ),
        )
    };
    json!({"order": {
        "customer_id": customer, "box_id": box_id, "frequency": "weekly",
        "start_date": start_date, "week_days": week_days,
        "exclusions": exclusions, "substitutions": substitutions, "extras": extras,
    }})
    .to_string()
}

/// The id in a created record's answer.
fn created_id(answer: &Answer) -> Result<u64, String> {
    serde_json::from_slice::<Value>(&answer.body)
        .ok()
        .and_then(|created| created["id"].as_u64())
        .ok_or_else(|| "a 201 without an id".to_owned())
}

/// Creates customers `share`, `share + SEEDING_CONNECTIONS`, ... below `deliveries` over
/// one connection; returns each one's number and id.
async fn seed_customers(
    addr: SocketAddr,
    share: u64,
    deliveries: u64,
) -> Result<Vec<(u64, u64)>, String> {
    let mut client = Client::new(addr)?;
    let mut ids = Vec::new();
    for i in (share..deliveries).step_by(SEEDING_CONNECTIONS as usize) {
        let create = load::request(
            "POST",
            "/v1/customers",
            credentials(),
            Some(&customer_body(i)),
        );
        let customer =
            created_id(&checked(&mut client, "a customer", create, 201, |_| None).await?)?;
        ids.push((i, customer));
    }
    Ok(ids)
}

/// Creates each of `customers`' order on the day over one connection; returns their ids.
async fn seed_orders(addr: SocketAddr, customers: Vec<(u64, u64)>) -> Result<Vec<u64>, String> {
    let mut client = Client::new(addr)?;
    let mut ids = Vec::with_capacity(customers.len());
    for (i, customer) in customers {
        let body = order_body(customer, i, ORDERS_FROM, &WEEK_DAYS);
        let create = load::request("POST", "/v1/orders", credentials(), Some(&body));
        ids.push(created_id(
            &checked(&mut client, "an order", create, 201, |_| None).await?,
        )?);
    }
    Ok(ids)
}

/// Change `n` of an order: even ones skip a Thursday after [`DATE`] (a date of its
/// schedule), odd ones make its extras come once, or every time again, from a date in May before it. Each is a new
/// version of its history; none takes a delivery off the day measured.
fn order_change(n: u64) -> String {
    let date: jiff::civil::Date = DATE.parse().unwrap_or_default();
    let change = if n.is_multiple_of(2) {
        let weeks = i64::try_from(n / 2 + 1).unwrap_or(1);
        let skipped = date
            .checked_add(jiff::Span::new().weeks(weeks))
            .unwrap_or(date);
        json!({"skipped_dates": [skipped.to_string()]})
    } else {
        // Seeded orders' extras come every time: these alternate, each a change.
        json!({"extras_one_off": n % 4 == 1,
               "effective_date": format!("2027-05-{:02}", 1 + n / 2)})
    };
    json!({ "order": change }).to_string()
}

/// Makes `changes` changes of each of `orders` over one connection, each answered 200.
async fn change_orders(addr: SocketAddr, orders: Vec<u64>, changes: u64) -> Result<(), String> {
    let mut client = Client::new(addr)?;
    for n in 0..changes {
        for order in &orders {
            let path = format!("/v1/orders/{order}");
            let change = load::request("PATCH", &path, credentials(), Some(&order_change(n)));
            checked(&mut client, "an order's change", change, 200, |_| None).await?;
        }
    }
    Ok(())
}

/// A new order of a seeded customer on another day: the day's kept list is stale after it.
async fn make_stale(client: &mut Client, customer: u64, n: u64) -> Result<(), String> {
    let body = order_body(customer, n, STALE_START, &[STALE_WEEK_DAY]);
    let create = load::request("POST", "/v1/orders", credentials(), Some(&body));
    checked(client, "an order on another day", create, 201, |_| None)
        .await
        .map(drop)
}

/// One read: its requests one after another, each answer checked as it comes.
async fn read(
    client: &mut Client,
    kind: Kind,
    requests: Vec<Req>,
    deliveries: u64,
) -> Result<Vec<Answer>, String> {
    let mut answers = Vec::with_capacity(requests.len());
    for request in requests {
        let check = |answer: &Answer| kind.check_head(answer, deliveries);
        answers.push(checked(client, kind.name(), request, 200, check).await?);
    }
    Ok(answers)
}

/// A read's figures over the runs.
struct Tally {
    latencies: Histogram<u64>,
    cpu_seconds: f64,
    bytes: u64,
}

/// Runs the whole measurement.
pub async fn day_page(config: &DayPageConfig) -> Result<DayPageReport, String> {
    let scratch = Scratch::new()?;
    let server = Server::start(Program::Service, &serve_args(&scratch.path("day"), "on")?)?;
    let deliveries = config.deliveries;
    let pages = deliveries.div_ceil(PER_PAGE);
    eprintln!("seeding {deliveries} customers with an order each on {DATE}...");
    let seeding = Instant::now();
    let shares =
        (0..SEEDING_CONNECTIONS).map(|share| seed_customers(server.addr, share, deliveries));
    let customer_shares = try_join_all(shares).await?;
    let before = server.thread_cpu();
    let order_shares = try_join_all(
        customer_shares
            .iter()
            .map(|share| seed_orders(server.addr, share.clone())),
    )
    .await?;
    let order_create_cpu_us = server.thread_cpu().seconds_since(&before) * 1e6 / deliveries as f64;
    let customers: Vec<u64> = customer_shares
        .concat()
        .into_iter()
        .map(|(_, id)| id)
        .collect();
    let seeding_seconds = seeding.elapsed().as_secs_f64();
    let changes = config.changes_per_order;
    let order_change_cpu_us = if changes > 0 {
        eprintln!("changing each order {changes} times...");
        let before = server.thread_cpu();
        try_join_all(
            order_shares
                .into_iter()
                .map(|orders| change_orders(server.addr, orders, changes)),
        )
        .await?;
        let spent = server.thread_cpu().seconds_since(&before);
        Some(round(spent * 1e6 / (deliveries * changes) as f64, 1))
    } else {
        None
    };
    let mut client = Client::new(server.addr)?;
    let session = sign_in(&mut client).await?;
    let mut tallies: Vec<Tally> = ROUND
        .iter()
        .map(|_| Tally {
            latencies: load::latency_histogram(),
            cpu_seconds: 0.0,
            bytes: 0,
        })
        .collect();
    let mut stale_orders = 0;
    let mut routes = 0;
    let mut measured_from: Option<(ThreadCpu, f64)> = None;
    // Round 0 is not measured: it checks that every read holds the whole day.
    for run in 0..=config.runs {
        if run == 1 {
            eprintln!("reading the day, {} runs of each read...", config.runs);
            measured_from = Some((server.thread_cpu(), server.cpu_seconds()));
        }
        for (kind, tally) in ROUND.into_iter().zip(&mut tallies) {
            if kind.cold() {
                let customer = customers[stale_orders % customers.len()];
                make_stale(&mut client, customer, stale_orders as u64).await?;
                stale_orders += 1;
            }
            let requests = kind.requests(&session, pages);
            let cpu = server.thread_cpu();
            let sent = Instant::now();
            let answers = read(&mut client, kind, requests, deliveries).await?;
            if run == 0 {
                kind.check_whole(&answers, deliveries)?;
                tally.bytes = answers.iter().map(|answer| answer.body_length as u64).sum();
                if kind == Kind::Page {
                    routes = occurrences(&answers[0].body, b"<section class=\"route\"");
                }
                continue;
            }
            load::record_since(&mut tally.latencies, sent);
            tally.cpu_seconds += server.thread_cpu().seconds_since(&cpu);
        }
    }
    let (measured_cpu_seconds, measured_cpu_seconds_ticks) = match measured_from {
        Some((threads, ticks)) => (
            server.thread_cpu().seconds_since(&threads),
            server.cpu_seconds() - ticks,
        ),
        None => (0.0, 0.0),
    };
    server.stop();
    let ms = |tally: &Tally, q: f64| tally.latencies.value_at_quantile(q) as f64 / 1000.0;
    let reads: Vec<DayRead> = ROUND
        .iter()
        .zip(&tallies)
        .map(|(kind, tally)| DayRead {
            name: kind.name().to_owned(),
            request: kind.describe(pages),
            requests_per_read: if kind.is_api() { pages } else { 1 },
            cold: kind.cold(),
            median_ms: round(ms(tally, 0.5), 2),
            p90_ms: round(ms(tally, 0.9), 2),
            max_ms: round(tally.latencies.max() as f64 / 1000.0, 2),
            bytes: tally.bytes,
            cpu_ms_per_read: round(tally.cpu_seconds * 1000.0 / config.runs as f64, 2),
        })
        .collect();
    let median = |kind: Kind| {
        ms(
            &tallies[ROUND.iter().position(|k| *k == kind).unwrap_or(0)],
            0.5,
        )
    };
    Ok(DayPageReport {
        machine: machine(),
        date: DATE.to_owned(),
        deliveries,
        routes,
        runs: config.runs,
        api_pages: pages,
        seeding_seconds: round(seeding_seconds, 1),
        changes_per_order: changes,
        order_create_cpu_us: round(order_create_cpu_us, 1),
        order_change_cpu_us,
        page_over_api_json: round(median(Kind::Page) / median(Kind::ApiJson).max(1e-9), 2),
        cold_page_over_cold_api_json: round(
            median(Kind::ColdPage) / median(Kind::ColdApiJson).max(1e-9),
            2,
        ),
        reads,
        measured_cpu_seconds: round(measured_cpu_seconds, 3),
        measured_cpu_seconds_ticks: round(measured_cpu_seconds_ticks, 2),
    })
}

impl DayPageReport {
    /// The report as the markdown `boxsub-tools day-page` prints.
    pub fn markdown(&self) -> String {
        let m = &self.machine;
        let mut out = format!(
            "Machine: {} cores, {} GiB, {}. {} deliveries on {} ({} route{}), seeded through \
             the API in {} s; {} measured runs of each read, one request at a time, \
             interleaved, after one unmeasured run of each.\n\n\
             | read | request | requests | median ms | p90 ms | max ms | bytes | server CPU \
             ms/read |\n|---|---|---:|---:|---:|---:|---:|---:|\n",
            m.cores,
            m.memory_gib,
            m.cpu,
            self.deliveries,
            self.date,
            self.routes,
            if self.routes == 1 { "" } else { "s" },
            self.seeding_seconds,
            self.runs
        );
        for r in &self.reads {
            out.push_str(&format!(
                "| {} | `{}` | {} | {:.2} | {:.2} | {:.2} | {} | {:.2} |\n",
                r.name,
                r.request,
                r.requests_per_read,
                r.median_ms,
                r.p90_ms,
                r.max_ms,
                r.bytes,
                r.cpu_ms_per_read
            ));
        }
        out.push_str(&format!(
            "\nServer CPU per `POST /v1/orders` while seeding: {:.1} µs",
            self.order_create_cpu_us
        ));
        if let Some(change) = self.order_change_cpu_us {
            out.push_str(&format!(
                "; each order then changed {} times, per `PATCH /v1/orders/{{id}}`: {:.1} µs \
                 ({:.2}× a create)",
                self.changes_per_order,
                change,
                change / self.order_create_cpu_us.max(1e-9)
            ));
        }
        out.push_str(&format!(" ({SEEDING_CONNECTIONS} connections at once).\n"));
        out.push_str(&format!(
            "\nDay page over the API's whole list as JSON, median latency: {:.2}× (cold: \
             {:.2}×).\n\nServer CPU by thread to the nanosecond (`/proc/PID/task/TID/schedstat`); \
             over the whole measurement (the reads and the orders before the cold ones) {:.3} s, \
             against {:.2} s in the process's ticks of 10 ms (`/proc/PID/stat`).\n",
            self.page_over_api_json,
            self.cold_page_over_cold_api_json,
            self.measured_cpu_seconds,
            self.measured_cpu_seconds_ticks
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_days_are_the_weekdays_named() {
        let weekday = |date: &str| {
            let date: jiff::civil::Date = date.parse().unwrap();
            date.weekday().to_sunday_zero_offset() as u8
        };
        assert!(WEEK_DAYS.contains(&weekday(DATE)));
        assert_eq!(weekday(STALE_START), STALE_WEEK_DAY);
        assert_eq!(weekday(WEEK_OF), 0, "a week starts on a Sunday");
        assert_eq!(weekday(ORDERS_FROM), 1);
        assert!(ORDERS_FROM > WEEK_OF && ORDERS_FROM < DATE);
        let (week_of, stale): (jiff::civil::Date, jiff::civil::Date) =
            (WEEK_OF.parse().unwrap(), STALE_START.parse().unwrap());
        assert!(stale > week_of.saturating_add(jiff::Span::new().days(6)));
    }

    #[test]
    fn cookies_are_read_from_set_cookie() {
        let mut answer = Answer {
            status: 303,
            keep_alive: true,
            body_length: 0,
            total_count: None,
            headers: hyper::HeaderMap::new(),
            body: bytes::Bytes::new(),
        };
        for value in ["boxsub_form=ab; Path=/app", "boxsub_session=cd; HttpOnly"] {
            answer
                .headers
                .append(SET_COOKIE, HeaderValue::from_static(value));
        }
        assert_eq!(cookie_set(&answer, SESSION_COOKIE).as_deref(), Some("cd"));
        assert_eq!(cookie_set(&answer, FORM_COOKIE).as_deref(), Some("ab"));
        assert_eq!(cookie_set(&answer, "boxsub"), None);
    }
}
