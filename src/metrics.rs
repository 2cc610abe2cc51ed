//! Prometheus metrics: one process-wide set of families, registered once in their own
//! registry and rendered in the text exposition format at `GET /metrics`. Every layer counts
//! its own events here (it is a leaf: it depends on nothing of boxsub's), so that no layer
//! has to carry a handle for another's sake.
//!
//! Label values are bounded: routes are templates (`/v1/customers/:id`, never a raw path),
//! statuses and methods are few, webstores are the catalogue's. The request metrics, counted
//! on every request, go through each worker thread's own handles ([`request`]).
//!
//! Must not touch: anything but counting and rendering.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::LazyLock;

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

/// Every metric family of boxsub.
pub struct Metrics {
    registry: Registry,
    /// `boxsub_http_requests_total{route,method,status}`.
    pub http_requests: IntCounterVec,
    /// `boxsub_http_request_duration_seconds{route,method}`.
    pub http_duration: HistogramVec,
    /// `boxsub_http_connections_open`.
    pub connections_open: IntGauge,
    /// `boxsub_orders_created_total{webstore}`.
    pub orders_created: IntCounterVec,
    /// `boxsub_customers_created_total{webstore}`.
    pub customers_created: IntCounterVec,
    /// `boxsub_actors_active`: customer actors live now.
    pub actors_active: IntGauge,
    /// `boxsub_actors_activated_total`.
    pub actors_activated: IntCounter,
    /// `boxsub_group_commit_batches_total`.
    pub commit_batches: IntCounter,
    /// `boxsub_group_commit_batch_writers`: writers answered per group commit.
    pub commit_batch_size: Histogram,
    /// `boxsub_group_commit_duration_seconds`: log append and fsync of one group commit.
    pub commit_duration: Histogram,
    /// `boxsub_wal_bytes_total`: bytes appended to the write-ahead log.
    pub wal_bytes: IntCounter,
    /// `boxsub_wal_checkpoints_total`: log segments checkpointed into the store.
    pub wal_checkpoints: IntCounter,
    /// `boxsub_sign_in_failures_total`.
    pub sign_in_failures: IntCounter,
    /// `boxsub_sign_in_throttled_total`.
    pub sign_in_throttled: IntCounter,
    /// `boxsub_password_jobs_total{share}`: argon2 hashes and checks run, by whose share of
    /// the password pool they ran in (`api`: a webstore's, `app`: the app's sign-ins).
    pub password_jobs: IntCounterVec,
    /// `boxsub_app_sign_ins_limited_total`: app sign-ins refused with 429 for too many from
    /// one client address, before any password check.
    pub app_sign_ins_limited: IntCounter,
    /// `boxsub_requests_refused_total{reason}`: refused for overload (503, or a connection
    /// closed at once).
    pub refused: IntCounterVec,
    /// `boxsub_store_size_bytes`: the store's files on disk.
    pub store_size: IntGauge,
    /// `boxsub_disk_free_bytes`: free space of the data directory's filesystem.
    pub disk_free: IntGauge,
    /// `boxsub_disk_writes_refused`: 1 while writes are refused for a full or unwritable disk.
    pub disk_writes_refused: IntGauge,
    /// `boxsub_catalogue_reloads_total{outcome}`.
    pub catalogue_reloads: IntCounterVec,
    /// `boxsub_idempotency_records_expired_total`.
    pub idempotency_expired: IntCounter,
    /// `boxsub_idempotency_records`: records the last complete expiry pass kept.
    pub idempotency_records: IntGauge,
    /// `boxsub_group_serving`: 1 while this node takes requests (`/health` 200), else 0.
    pub group_serving: IntGauge,
    /// `boxsub_changelog_applied`: the last changelog message applied (published, on the
    /// primary).
    pub changelog_applied: IntGauge,
    /// `boxsub_changelog_lag`: changelog messages this node has yet to apply.
    pub changelog_lag: IntGauge,
    /// `boxsub_changelog_takeovers_total`: times this node took the primary's place.
    pub changelog_takeovers: IntCounter,
    /// `boxsub_changelog_publish_retries_total`: publishes retried for want of an
    /// acknowledgement.
    pub changelog_publish_retries: IntCounter,
    /// `boxsub_changelog_snapshots_total`: replica snapshots this node wrote.
    pub changelog_snapshots: IntCounter,
    /// `boxsub_webhook_sends_total{webstore,endpoint,outcome}`: attempts to send an event to
    /// an endpoint.
    pub webhook_sends: IntCounterVec,
    /// `boxsub_webhook_oldest_unsent_seconds{webstore,endpoint}`: the age of the oldest
    /// event the endpoint wants and has not had (0 when it has had them all).
    pub webhook_oldest_unsent: IntGaugeVec,
    /// `boxsub_webhook_endpoint_disabled{webstore,endpoint}`: 1 while the endpoint is
    /// disabled (a 410, or retries given up).
    pub webhook_disabled: IntGaugeVec,
    /// `boxsub_webhook_send_latency_seconds`: from an event's write to its endpoint's 2xx,
    /// over first attempts that succeeded.
    pub webhook_latency: Histogram,
    /// `boxsub_unreadable_records`: stored records found unreadable since the start (each
    /// once).
    pub unreadable_records: IntGauge,
    /// `boxsub_events_pruned_total`: events the retention sweep removed.
    pub events_pruned: IntCounter,
    /// `boxsub_webstore_requests_total{webstore,outcome}`: authenticated API requests by
    /// what their quotas made of them (`admitted`, or `throttled_` and the quota).
    pub webstore_requests: IntCounterVec,
    /// `boxsub_admission_wait_seconds{webstore}`: how long requests that had to wait for a
    /// turn (while webstores contended and the slots were taken) waited.
    pub admission_wait: HistogramVec,
    /// `boxsub_admission_in_service`: requests admitted and not yet answered, as of the last
    /// scrape.
    pub admission_in_service: IntGauge,
}

/// The process's metrics.
pub static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

fn counter_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let family = IntCounterVec::new(Opts::new(name, help), labels)
        .expect("metric names and labels are valid");
    registry
        .register(Box::new(family.clone()))
        .expect("each family is registered once");
    family
}

fn gauge_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let family =
        IntGaugeVec::new(Opts::new(name, help), labels).expect("metric names and labels are valid");
    registry
        .register(Box::new(family.clone()))
        .expect("each family is registered once");
    family
}

fn counter(registry: &Registry, name: &str, help: &str) -> IntCounter {
    let family = IntCounter::new(name, help).expect("metric names are valid");
    registry
        .register(Box::new(family.clone()))
        .expect("each family is registered once");
    family
}

fn gauge(registry: &Registry, name: &str, help: &str) -> IntGauge {
    let family = IntGauge::new(name, help).expect("metric names are valid");
    registry
        .register(Box::new(family.clone()))
        .expect("each family is registered once");
    family
}

fn histogram(registry: &Registry, name: &str, help: &str, buckets: Vec<f64>) -> Histogram {
    let family = Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets))
        .expect("metric names and buckets are valid");
    registry
        .register(Box::new(family.clone()))
        .expect("each family is registered once");
    family
}

impl Metrics {
    fn new() -> Metrics {
        let registry = Registry::new();
        let latency = vec![
            0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
        ];
        let http_duration = HistogramVec::new(
            HistogramOpts::new(
                "boxsub_http_request_duration_seconds",
                "Time from a request's head to its response, by route template and method.",
            )
            .buckets(latency.clone()),
            &["route", "method"],
        )
        .expect("metric names and labels are valid");
        registry
            .register(Box::new(http_duration.clone()))
            .expect("each family is registered once");
        Metrics {
            http_requests: counter_vec(
                &registry,
                "boxsub_http_requests_total",
                "HTTP requests answered, by route template, method and status.",
                &["route", "method", "status"],
            ),
            http_duration,
            connections_open: gauge(
                &registry,
                "boxsub_http_connections_open",
                "Client connections open now.",
            ),
            orders_created: counter_vec(
                &registry,
                "boxsub_orders_created_total",
                "Orders created (durably), by webstore.",
                &["webstore"],
            ),
            customers_created: counter_vec(
                &registry,
                "boxsub_customers_created_total",
                "Customers created (durably), by webstore.",
                &["webstore"],
            ),
            actors_active: gauge(
                &registry,
                "boxsub_actors_active",
                "Customer actors live now.",
            ),
            actors_activated: counter(
                &registry,
                "boxsub_actors_activated_total",
                "Customer actors activated from the store.",
            ),
            commit_batches: counter(
                &registry,
                "boxsub_group_commit_batches_total",
                "Group commits (one write-ahead log append and fsync each).",
            ),
            commit_batch_size: histogram(
                &registry,
                "boxsub_group_commit_batch_writers",
                "Writers answered by one group commit.",
                vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0],
            ),
            commit_duration: histogram(
                &registry,
                "boxsub_group_commit_duration_seconds",
                "Time one group commit took to append to the write-ahead log and fsync it.",
                latency.clone(),
            ),
            wal_bytes: counter(
                &registry,
                "boxsub_wal_bytes_total",
                "Bytes appended to the write-ahead log.",
            ),
            wal_checkpoints: counter(
                &registry,
                "boxsub_wal_checkpoints_total",
                "Write-ahead log segments whose writes were flushed into the store, freeing \
                 the segment for reuse.",
            ),
            sign_in_failures: counter(
                &registry,
                "boxsub_sign_in_failures_total",
                "Sign-in attempts whose password check failed.",
            ),
            sign_in_throttled: counter(
                &registry,
                "boxsub_sign_in_throttled_total",
                "Sign-in attempts refused with 429 for too many failures.",
            ),
            password_jobs: counter_vec(
                &registry,
                "boxsub_password_jobs_total",
                "Password hashes and checks run, by the share of the password pool they ran \
                 in (api: a webstore's, app: the app's sign-ins).",
                &["share"],
            ),
            app_sign_ins_limited: counter(
                &registry,
                "boxsub_app_sign_ins_limited_total",
                "App sign-ins refused with 429 for too many from one client address, before \
                 any password check.",
            ),
            refused: counter_vec(
                &registry,
                "boxsub_requests_refused_total",
                "Requests refused for overload, by reason.",
                &["reason"],
            ),
            store_size: gauge(
                &registry,
                "boxsub_store_size_bytes",
                "Size of the store's files on disk.",
            ),
            disk_free: gauge(
                &registry,
                "boxsub_disk_free_bytes",
                "Free space of the data directory's filesystem.",
            ),
            disk_writes_refused: gauge(
                &registry,
                "boxsub_disk_writes_refused",
                "1 while writes are refused because the disk is nearly full or unwritable.",
            ),
            catalogue_reloads: counter_vec(
                &registry,
                "boxsub_catalogue_reloads_total",
                "Catalogue reloads on SIGHUP, by outcome (applied or refused).",
                &["outcome"],
            ),
            idempotency_expired: counter(
                &registry,
                "boxsub_idempotency_records_expired_total",
                "Idempotency records removed after their time to live.",
            ),
            group_serving: gauge(
                &registry,
                "boxsub_group_serving",
                "1 while this node takes requests (a single node, or a group's primary that \
                 is not stalled), else 0.",
            ),
            changelog_applied: gauge(
                &registry,
                "boxsub_changelog_applied",
                "In a replicated group: the last changelog message this node applied (on the \
                 primary: published).",
            ),
            changelog_lag: gauge(
                &registry,
                "boxsub_changelog_lag",
                "In a replicated group: changelog messages this node has yet to apply.",
            ),
            changelog_takeovers: counter(
                &registry,
                "boxsub_changelog_takeovers_total",
                "Times this node took the primary's place in its group.",
            ),
            changelog_publish_retries: counter(
                &registry,
                "boxsub_changelog_publish_retries_total",
                "Changelog publishes retried because their acknowledgement did not come.",
            ),
            changelog_snapshots: counter(
                &registry,
                "boxsub_changelog_snapshots_total",
                "Replica snapshots this node wrote.",
            ),
            webhook_sends: counter_vec(
                &registry,
                "boxsub_webhook_sends_total",
                "Attempts to send an event to a webhook endpoint, by outcome: accepted (2xx), \
                 failed (another status), timeout, unreachable (no connection), refused (a \
                 destination on a private network the catalogue does not allow), \
                 asked_to_wait (429 or 503), gone (410).",
                &["webstore", "endpoint", "outcome"],
            ),
            webhook_oldest_unsent: gauge_vec(
                &registry,
                "boxsub_webhook_oldest_unsent_seconds",
                "Age of the oldest event a webhook endpoint wants and has not had yet (0 when \
                 it has had them all).",
                &["webstore", "endpoint"],
            ),
            webhook_disabled: gauge_vec(
                &registry,
                "boxsub_webhook_endpoint_disabled",
                "1 while a webhook endpoint is disabled (it answered 410, or its retries were \
                 given up): it gets nothing until redelivered.",
                &["webstore", "endpoint"],
            ),
            webhook_latency: histogram(
                &registry,
                "boxsub_webhook_send_latency_seconds",
                "From an event's write to its endpoint's 2xx, for events accepted at the \
                 first attempt.",
                latency,
            ),
            unreadable_records: gauge(
                &registry,
                "boxsub_unreadable_records",
                "Stored records found unreadable since the start, each once (GET /health names \
                 them): passed over by the feed, webhooks, the retention sweep and the delivery \
                 lists.",
            ),
            events_pruned: counter(
                &registry,
                "boxsub_events_pruned_total",
                "Events the retention sweep removed (--events-retention).",
            ),
            webstore_requests: counter_vec(
                &registry,
                "boxsub_webstore_requests_total",
                "Authenticated API requests of each webstore by outcome: admitted, or \
                 throttled_writes, throttled_reads, throttled_concurrency (a 429 for that \
                 quota).",
                &["webstore", "outcome"],
            ),
            admission_wait: {
                let family = HistogramVec::new(
                    HistogramOpts::new(
                        "boxsub_admission_wait_seconds",
                        "How long each webstore's requests that had to wait for their turn \
                         waited (while webstores contended and every slot was taken).",
                    )
                    .buckets(vec![
                        0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                        1.0,
                    ]),
                    &["webstore"],
                )
                .expect("metric names and labels are valid");
                registry
                    .register(Box::new(family.clone()))
                    .expect("each family is registered once");
                family
            },
            admission_in_service: gauge(
                &registry,
                "boxsub_admission_in_service",
                "API requests admitted and not yet answered, when /metrics was read (at most \
                 about --admission-slots while webstores contend; a webstore alone is never \
                 held back).",
            ),
            idempotency_records: gauge(
                &registry,
                "boxsub_idempotency_records",
                "Idempotency records the last complete expiry pass kept (records written behind the pass are not counted).",
            ),
            registry,
        }
    }

    /// Every family in the Prometheus text exposition format.
    pub fn render(&self) -> Vec<u8> {
        let mut text = Vec::new();
        // Encoding into a Vec fails only on invalid families, which registration rules out.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut text);
        text
    }
}

/// The content type of the exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Why a request was refused for overload.
#[derive(Debug, Clone, Copy)]
pub enum Refusal {
    /// Too many actor calls in flight in all (the call cap).
    CallCap,
    /// Too many calls waiting for one customer.
    CustomerBusy,
    /// An actor did not begin a call within its deadline.
    CallDeadline,
    /// The password pool was full and the caller's share of it taken.
    PasswordQueue,
    /// A password job waiting in the pool gave its place to a share below its due.
    PasswordShare,
    /// A whole request ran past its deadline.
    RequestDeadline,
    /// A connection past the connection cap.
    ConnectionCap,
}

impl Refusal {
    fn label(self) -> &'static str {
        match self {
            Refusal::CallCap => "call_cap",
            Refusal::CustomerBusy => "customer_busy",
            Refusal::CallDeadline => "call_deadline",
            Refusal::PasswordQueue => "password_queue",
            Refusal::PasswordShare => "password_share",
            Refusal::RequestDeadline => "request_deadline",
            Refusal::ConnectionCap => "connection_cap",
        }
    }
}

/// A route as the request metrics label it: its template, and its place among the router's
/// routes, which keys the per-thread cache (the router makes these; see
/// `http::router::Route::label`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteLabel {
    /// The route's place among the router's routes.
    pub index: u8,
    /// The route template (`/v1/customers/:id`), never a raw path.
    pub template: &'static str,
}

/// A request's labels as the per-thread cache keys them: the route's index, the method's
/// place in [`CACHED_METHODS`] and the status code (0 for `cancelled`).
type RequestLabels = (u8, u8, u16);

/// Methods whose label sets are cached; requests with any other method (rare, and refused
/// anyway) are counted without the cache, so that clients cannot grow it.
const CACHED_METHODS: [&str; 7] = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];

thread_local! {
    /// This thread's handles to the request counter and latency histogram of each label set
    /// it has seen. `with_label_values` hashes the label strings and takes the family's
    /// lock on every call, and a request takes two; so each worker thread keeps the handles
    /// it got. Label sets are bounded (templates, the methods above, statuses).
    static REQUEST_HANDLES: RefCell<
        HashMap<RequestLabels, (IntCounter, Histogram), foldhash::fast::RandomState>,
    > = RefCell::new(HashMap::default());
}

/// The cache key of a request's labels, if they are cached.
fn request_labels(route: RouteLabel, method: &str, status: &str) -> Option<RequestLabels> {
    let method = CACHED_METHODS.iter().position(|known| *known == method)?;
    let status = match status {
        "cancelled" => 0,
        code if code.len() == 3 => code.parse::<u16>().ok()?,
        _ => return None,
    };
    Some((route.index, method as u8, status))
}

/// Counts one answered (or `cancelled`) request to `route` and records its latency.
pub fn request(route: RouteLabel, method: &str, status: &str, seconds: f64) {
    let template = route.template;
    let handles = || {
        (
            METRICS
                .http_requests
                .with_label_values(&[template, method, status]),
            METRICS.http_duration.with_label_values(&[template, method]),
        )
    };
    let record = |(count, latency): &(IntCounter, Histogram)| {
        count.inc();
        latency.observe(seconds);
    };
    match request_labels(route, method, status) {
        Some(key) => REQUEST_HANDLES.with(|cache| {
            record(cache.borrow_mut().entry(key).or_insert_with(handles));
        }),
        None => record(&handles()),
    }
}

/// Counts one refusal.
pub fn refused(why: Refusal) {
    METRICS.refused.with_label_values(&[why.label()]).inc();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_under_their_own_labels_through_the_cache() {
        let (first, second) = (
            RouteLabel {
                index: 200,
                template: "/test/cached",
            },
            RouteLabel {
                index: 201,
                template: "/test/cached/other",
            },
        );
        let count = |route: RouteLabel, method: &str, status: &str| {
            METRICS
                .http_requests
                .with_label_values(&[route.template, method, status])
                .get()
        };
        for _ in 0..2 {
            request(first, "GET", "200", 0.001);
        }
        request(second, "GET", "200", 0.001);
        request(second, "GET", "cancelled", 0.001);
        for _ in 0..3 {
            request(second, "BREW", "405", 0.001);
        }
        assert_eq!(count(first, "GET", "200"), 2);
        assert_eq!(count(second, "GET", "200"), 1);
        assert_eq!(count(second, "GET", "cancelled"), 1);
        assert_eq!(count(second, "BREW", "405"), 3);
        let observed = METRICS
            .http_duration
            .with_label_values(&[second.template, "GET"])
            .get_sample_count();
        assert_eq!(observed, 2);
    }

    #[test]
    fn every_family_renders_under_its_name() {
        METRICS
            .http_requests
            .with_label_values(&["/v1/ping", "GET", "204"])
            .inc();
        refused(Refusal::CallCap);
        let text = String::from_utf8(METRICS.render()).unwrap();
        for family in [
            "boxsub_http_requests_total{method=\"GET\",route=\"/v1/ping\",status=\"204\"}",
            "boxsub_actors_active",
            "boxsub_group_commit_batch_writers_bucket",
            "boxsub_requests_refused_total{reason=\"call_cap\"}",
            "boxsub_disk_writes_refused",
        ] {
            assert!(text.contains(family), "{family} missing from:\n{text}");
        }
    }
}
