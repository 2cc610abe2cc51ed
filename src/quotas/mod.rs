//! Fair share between webstores. Owns each webstore's quotas in force (writes and reads per
//! second with a burst, requests in progress at once: [`crate::domain::quotas`]) and the
//! fair admission of requests while the host is saturated (`admission`). A request is
//! checked against its webstore's concurrency quota, then its rate quota ([`Quotas::check`]),
//! and once its body has arrived waits for an admission slot ([`Checked::admit`]); what it
//! holds is released by guards, whenever its future is dropped.
//!
//! The limiters live here, one set per webstore of the catalogue in force: a reload keeps the
//! state of every webstore whose quotas did not change, starts afresh those whose did, and
//! drops those of webstores it removes, so that state never outgrows the catalogue.
//!
//! Must not touch: status codes and headers (the HTTP layer renders [`Throttled`] and
//! [`Checked`]), the store, the actors.

mod admission;
mod rates;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;
use bytes::Bytes;
use prometheus::{Histogram, IntCounter};

use crate::domain::catalogue::{Catalogue, Webstore};
use crate::domain::quotas::QuotaSettings;

pub use admission::{Admission, Slot};
use rates::Rate;
pub use rates::Remaining;

/// Which rate quota a request takes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Creates and changes.
    Write,
    /// Everything else a webstore asks.
    Read,
}

/// The quota that refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quota {
    /// Writes per second.
    Writes,
    /// Reads per second.
    Reads,
    /// Requests in progress at once.
    Concurrency,
}

impl Quota {
    /// The policy's name in the `RateLimit` fields, and in metrics (`throttled_` + it).
    pub fn name(self) -> &'static str {
        match self {
            Quota::Writes => "writes",
            Quota::Reads => "reads",
            Quota::Concurrency => "concurrency",
        }
    }
}

/// A request refused by its webstore's quotas.
#[derive(Debug, Clone)]
pub struct Throttled {
    /// The quota it went past.
    pub quota: Quota,
    /// Whole seconds until a request of the same kind may succeed (at least 1).
    pub retry_after_secs: u64,
    /// The webstore's policies, as `policy_field` writes them (the `RateLimit-Policy` field;
    /// shared bytes, so that each answer's field is a reference count, not a copy).
    pub policies: Bytes,
}

/// A request its quotas let through: counted against its webstore's concurrency quota
/// until dropped, and what is left of the rate quota it took from. It waits for its turn in
/// service with [`Checked::admit`] once it has what it needs from its client (its body), so
/// that a slow client holds its own webstore's quota and never a slot the others share.
pub struct Checked {
    /// The rate quota it took from.
    pub quota: Quota,
    /// What is left of it.
    pub remaining: Remaining,
    /// The webstore's policies, as `policy_field` writes them (the `RateLimit-Policy` field;
    /// shared bytes, so that each answer's field is a reference count, not a copy).
    pub policies: Bytes,
    quotas: Arc<WebstoreQuotas>,
    admission: Arc<Admission>,
    _in_progress: InProgress,
}

impl Checked {
    /// A slot in service, once the request's turn comes (at once while one is free).
    /// Dropping the future gives up its place in the queue.
    pub async fn admit(&self) -> Slot {
        let began = Instant::now();
        let admitted = self.admission.admit(self.quotas.lane).await;
        self.quotas.counted.admitted.inc();
        self.quotas.counted.wait.observe(if admitted.waited {
            began.elapsed().as_secs_f64()
        } else {
            0.0
        });
        admitted.slot
    }
}

/// One webstore's quotas and their state.
struct WebstoreQuotas {
    webstore: String,
    settings: QuotaSettings,
    lane: u32,
    writes: Rate,
    reads: Rate,
    in_progress: Arc<AtomicU32>,
    policies: Bytes,
    /// The minute (Unix time / 60) of the last log line about a refusal.
    logged_minute: AtomicU64,
    counted: Counted,
}

/// The webstore's metric handles, looked up once.
struct Counted {
    admitted: IntCounter,
    throttled_writes: IntCounter,
    throttled_reads: IntCounter,
    throttled_concurrency: IntCounter,
    wait: Histogram,
}

impl Counted {
    fn of(webstore: &str) -> Counted {
        let metrics = &crate::metrics::METRICS;
        let outcome = |name| {
            metrics
                .webstore_requests
                .with_label_values(&[webstore, name])
        };
        Counted {
            admitted: outcome("admitted"),
            throttled_writes: outcome("throttled_writes"),
            throttled_reads: outcome("throttled_reads"),
            throttled_concurrency: outcome("throttled_concurrency"),
            wait: metrics.admission_wait.with_label_values(&[webstore]),
        }
    }

    fn throttled(&self, quota: Quota) -> &IntCounter {
        match quota {
            Quota::Writes => &self.throttled_writes,
            Quota::Reads => &self.throttled_reads,
            Quota::Concurrency => &self.throttled_concurrency,
        }
    }
}

/// A request counted against its webstore's concurrency quota until dropped.
struct InProgress(Arc<AtomicU32>);

impl Drop for InProgress {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Every webstore's quotas, and the admission they share.
pub struct Quotas {
    by_webstore: ArcSwap<HashMap<String, Arc<WebstoreQuotas>>>,
    admission: Arc<Admission>,
}

impl Quotas {
    /// The quotas of `catalogue`'s webstores, admitting `slots` requests at once.
    pub fn new(catalogue: &Catalogue, slots: usize) -> Quotas {
        let quotas = Quotas {
            by_webstore: ArcSwap::from_pointee(HashMap::new()),
            admission: Admission::new(slots),
        };
        quotas.reload(catalogue);
        quotas
    }

    /// Puts `catalogue`'s quotas in force, keeping the state of those that did not change.
    pub fn reload(&self, catalogue: &Catalogue) {
        let current = self.by_webstore.load();
        let next = catalogue
            .webstores()
            .iter()
            .map(|webstore| {
                let id = &webstore.settings.id;
                let kept = current
                    .get(id)
                    .filter(|quotas| quotas.settings == webstore.quotas)
                    .cloned();
                let quotas = kept.unwrap_or_else(|| Arc::new(WebstoreQuotas::new(webstore)));
                (id.clone(), quotas)
            })
            .collect();
        self.by_webstore.store(Arc::new(next));
    }

    /// Counts a request of `webstore` against its quotas, or refuses it.
    pub fn check(&self, webstore: &Webstore, kind: Kind) -> Result<Checked, Throttled> {
        let quotas = self
            .by_webstore
            .load()
            .get(&webstore.settings.id)
            .cloned()
            // A webstore authenticated against a catalogue just replaced: its quotas as
            // that catalogue states them, held by this request alone.
            .unwrap_or_else(|| Arc::new(WebstoreQuotas::new(webstore)));
        let in_progress = quotas.begin().map_err(|quota| quotas.refuse(quota, 1))?;
        let (quota, rate) = match kind {
            Kind::Write => (Quota::Writes, &quotas.writes),
            Kind::Read => (Quota::Reads, &quotas.reads),
        };
        let remaining = rate.take().map_err(|wait| {
            let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            quotas.refuse(quota, secs.max(1))
        })?;
        Ok(Checked {
            quota,
            remaining,
            policies: quotas.policies.clone(),
            admission: self.admission.clone(),
            quotas,
            _in_progress: in_progress,
        })
    }

    /// Requests admitted and not yet answered.
    pub fn in_service(&self) -> usize {
        self.admission.in_service()
    }
}

impl WebstoreQuotas {
    fn new(webstore: &Webstore) -> WebstoreQuotas {
        let settings = webstore.quotas;
        let writes = Rate::new(settings.writes_per_second, settings.write_burst);
        let reads = Rate::new(settings.reads_per_second, settings.read_burst);
        let policies = policy_field(&writes, &reads, settings.concurrent_requests);
        WebstoreQuotas {
            webstore: webstore.settings.id.clone(),
            settings,
            lane: webstore.idx.0,
            writes,
            reads,
            in_progress: Arc::new(AtomicU32::new(0)),
            policies: Bytes::from(policies),
            logged_minute: AtomicU64::new(0),
            counted: Counted::of(&webstore.settings.id),
        }
    }

    /// Counts a request in progress, unless the webstore has its quota of them already.
    fn begin(&self) -> Result<InProgress, Quota> {
        let limit = self.settings.concurrent_requests;
        let mut current = self.in_progress.load(Ordering::SeqCst);
        loop {
            if current >= limit {
                return Err(Quota::Concurrency);
            }
            match self.in_progress.compare_exchange_weak(
                current,
                current + 1,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => return Ok(InProgress(self.in_progress.clone())),
                Err(now) => current = now,
            }
        }
    }

    /// Counts and (once a minute per webstore) logs a refusal.
    fn refuse(&self, quota: Quota, retry_after_secs: u64) -> Throttled {
        self.counted.throttled(quota).inc();
        let minute = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_secs() / 60);
        let logged = self.logged_minute.load(Ordering::Relaxed);
        if logged != minute
            && self
                .logged_minute
                .compare_exchange(logged, minute, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::warn!(
                webstore = %self.webstore,
                quota = quota.name(),
                "a webstore went past its quota (logged once a minute per webstore; \
                 boxsub_webstore_requests_total counts every refusal)"
            );
        }
        Throttled {
            quota,
            retry_after_secs,
            policies: self.policies.clone(),
        }
    }
}

/// The `RateLimit-Policy` field of a webstore (draft-ietf-httpapi-ratelimit-headers-11): its
/// write and read quotas (`q` requests in a window of `w` seconds) and its concurrency quota
/// (`qu="concurrent-requests"`), as Structured Fields.
fn policy_field(writes: &Rate, reads: &Rate, concurrent: u32) -> String {
    let (write_q, write_w) = writes.policy();
    let (read_q, read_w) = reads.policy();
    format!(
        "\"writes\";q={write_q};w={write_w}, \"reads\";q={read_q};w={read_w}, \
         \"concurrency\";q={concurrent};qu=\"concurrent-requests\""
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalogue(quotas: &str) -> Catalogue {
        let mut document: serde_json::Value =
            serde_json::from_str(crate::domain::catalogue::DEMO_CATALOGUE_JSON).unwrap();
        document["quotas"] = serde_json::from_str(quotas).unwrap();
        Catalogue::parse(&document.to_string(), 0).unwrap()
    }

    #[tokio::test]
    async fn writes_past_the_burst_are_refused_with_a_wait_and_reads_go_on() {
        let catalogue = catalogue(r#"{"writes_per_second": 1, "write_burst": 2}"#);
        let webstore = catalogue.webstores()[0].clone();
        let quotas = Quotas::new(&catalogue, 8);
        let first = quotas.check(&webstore, Kind::Write).unwrap();
        assert_eq!(first.remaining.requests, 1);
        drop(first);
        drop(quotas.check(&webstore, Kind::Write).unwrap());
        let refused = quotas.check(&webstore, Kind::Write).err().unwrap();
        assert_eq!(refused.quota, Quota::Writes);
        assert_eq!(refused.retry_after_secs, 1);
        assert!(quotas.check(&webstore, Kind::Read).is_ok());
        // Another webstore's writes are its own.
        let other = catalogue.webstores()[1].clone();
        assert!(quotas.check(&other, Kind::Write).is_ok());
        assert_eq!(quotas.in_service(), 0);
    }

    #[tokio::test]
    async fn the_concurrency_quota_counts_requests_in_progress() {
        let catalogue = catalogue(r#"{"concurrent_requests": 2}"#);
        let webstore = catalogue.webstores()[0].clone();
        let quotas = Quotas::new(&catalogue, 8);
        let a = quotas.check(&webstore, Kind::Read).unwrap();
        let _b = quotas.check(&webstore, Kind::Read).unwrap();
        let refused = quotas.check(&webstore, Kind::Read).err().unwrap();
        assert_eq!(refused.quota, Quota::Concurrency);
        drop(a);
        assert!(quotas.check(&webstore, Kind::Read).is_ok());
    }

    #[tokio::test]
    async fn a_reload_keeps_the_state_of_unchanged_quotas_and_renews_changed_ones() {
        let tight = catalogue(r#"{"writes_per_second": 1, "write_burst": 1}"#);
        let webstore = tight.webstores()[0].clone();
        let quotas = Quotas::new(&tight, 8);
        drop(quotas.check(&webstore, Kind::Write).unwrap());
        quotas.reload(&tight);
        assert!(quotas.check(&webstore, Kind::Write).is_err());
        let wider = catalogue(r#"{"writes_per_second": 1, "write_burst": 5}"#);
        quotas.reload(&wider);
        let granted = quotas.check(&webstore, Kind::Write).unwrap();
        assert_eq!(granted.remaining.requests, 4);
        assert!(granted.policies.starts_with(b"\"writes\";q=5;w=5, "));
    }

    #[tokio::test]
    async fn a_request_dropped_while_it_waits_for_its_turn_gives_everything_back() {
        let catalogue = catalogue(r#"{"concurrent_requests": 1}"#);
        let (a, b) = (
            catalogue.webstores()[0].clone(),
            catalogue.webstores()[1].clone(),
        );
        let quotas = Quotas::new(&catalogue, 1);
        let b_checked = quotas.check(&b, Kind::Read).unwrap();
        let b_slot = b_checked.admit().await;
        assert_eq!(quotas.in_service(), 1);
        // A's request waits for the one slot, and its future is dropped there.
        let a_checked = quotas.check(&a, Kind::Write).unwrap();
        let waiting =
            tokio::time::timeout(std::time::Duration::from_millis(30), a_checked.admit()).await;
        assert!(waiting.is_err(), "it had to wait");
        drop(a_checked);
        drop((b_slot, b_checked));
        assert_eq!(quotas.in_service(), 0);
        // A's concurrency quota of one is free again, and so is the slot.
        let checked = quotas.check(&a, Kind::Write).unwrap();
        let slot = checked.admit().await;
        assert_eq!(quotas.in_service(), 1);
        drop(slot);
        assert_eq!(quotas.in_service(), 0);
    }

    #[tokio::test]
    async fn a_request_counted_but_not_yet_admitted_holds_no_slot() {
        // A slow client (its body still coming) holds its webstore's quota, never a slot.
        let catalogue = catalogue("{}");
        let webstore = catalogue.webstores()[0].clone();
        let quotas = Quotas::new(&catalogue, 1);
        let slow: Vec<Checked> = (0..5)
            .map(|_| quotas.check(&webstore, Kind::Write).unwrap())
            .collect();
        assert_eq!(quotas.in_service(), 0);
        let other = catalogue.webstores()[1].clone();
        let checked = quotas.check(&other, Kind::Read).unwrap();
        let slot = tokio::time::timeout(std::time::Duration::from_secs(1), checked.admit())
            .await
            .expect("a slot is free while the slow requests wait for their bodies");
        drop((slot, slow));
    }

    #[test]
    fn the_policy_field_names_the_three_quotas() {
        let field = policy_field(&Rate::new(100, 100), &Rate::new(200, 400), 64);
        assert_eq!(
            field,
            "\"writes\";q=100;w=1, \"reads\";q=400;w=2, \
             \"concurrency\";q=64;qu=\"concurrent-requests\""
        );
    }
}
