//! Fair share between webstores. Owns each webstore's quotas in force (writes and reads per
//! second with a burst, where the catalogue sets them, and requests in progress at once:
//! [`crate::domain::quotas`]) and the fair admission of requests while webstores contend for
//! the host (`admission`). A request is checked against its webstore's concurrency quota,
//! then its rate quota if it has one ([`Quotas::check`]), and once its body has arrived is
//! admitted ([`Checked::admit`]: at once while its webstore is alone); what it holds is
//! released by guards, whenever its future is dropped.
//!
//! The limiters live here, one set per webstore of the catalogue in force: a reload keeps the
//! state of every webstore whose quotas did not change, starts afresh those whose did, and
//! drops those of webstores it removes, so that state never outgrows the catalogue.
//!
//! One piece of HTTP is made here, on purpose: the value of each webstore's
//! `RateLimit-Policy` field (`policy_field`), written once per webstore when its quotas
//! come into force, so that each answer's field is a reference count rather than a new
//! string (only this module knows when a webstore's quotas change). Putting it on answers,
//! and every other field, is `crate::http::ratelimit`'s.
//!
//! Must not touch: status codes, header maps and the other fields (the HTTP layer renders
//! [`OverQuota`] and [`Checked`]), the store, the actors.

mod admission;
pub mod fair_queue;
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

pub use admission::{Admission, Share, Slot, CONTENTION_WINDOW};
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
    /// The policy's name in the `RateLimit` fields, and in metrics (`over_quota_` + it).
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
pub struct OverQuota {
    /// The quota it went past.
    pub quota: Quota,
    /// Whole seconds until a request of the same kind may succeed (at least 1).
    pub retry_after_secs: u64,
    /// The webstore's policies, as `policy_field` writes them (the `RateLimit-Policy` field;
    /// shared bytes, so that each answer's field is a reference count, not a copy).
    pub policies: Bytes,
}

/// A request its quotas let through: counted against its webstore's concurrency quota
/// until dropped, and what is left of the rate quota it took from, if one applies. It waits
/// for its turn in service with [`Checked::admit`] once it has what it needs from its client
/// (its body), so that a slow client holds its own webstore's quota and never a slot the
/// others share.
pub struct Checked {
    /// The rate quota it took from, and what is left of it; `None` when its kind of request
    /// has no rate quota.
    pub rate: Option<(Quota, Remaining)>,
    /// The webstore's policies, as `policy_field` writes them (the `RateLimit-Policy` field;
    /// shared bytes, so that each answer's field is a reference count, not a copy).
    pub policies: Bytes,
    quotas: Arc<WebstoreQuotas>,
    admission: Arc<Admission>,
    _in_progress: InProgress,
}

impl Checked {
    /// A slot in service, once the request's turn comes (at once while its webstore is
    /// alone on the host, or has fewer than its fair part in service). Dropping the future gives
    /// up its place in the queue.
    pub async fn admit(&self) -> Slot {
        let began = Instant::now();
        let admitted = self.admission.admit(&self.quotas.share).await;
        self.quotas.counted.admitted.inc();
        if admitted.waited {
            self.quotas
                .counted
                .wait
                .observe(began.elapsed().as_secs_f64());
        }
        admitted.slot
    }
}

/// One webstore's quotas and their state.
struct WebstoreQuotas {
    webstore: String,
    settings: QuotaSettings,
    share: Arc<Share>,
    writes: Option<Rate>,
    reads: Option<Rate>,
    in_progress: Arc<AtomicU32>,
    policies: Bytes,
    /// The minute (Unix time / 60) of the last log line about a refusal.
    logged_minute: AtomicU64,
    counted: Counted,
}

/// The webstore's metric handles, looked up once.
struct Counted {
    admitted: IntCounter,
    over_quota_writes: IntCounter,
    over_quota_reads: IntCounter,
    over_quota_concurrency: IntCounter,
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
            over_quota_writes: outcome("over_quota_writes"),
            over_quota_reads: outcome("over_quota_reads"),
            over_quota_concurrency: outcome("over_quota_concurrency"),
            wait: metrics.admission_wait.with_label_values(&[webstore]),
        }
    }

    fn over_quota(&self, quota: Quota) -> &IntCounter {
        match quota {
            Quota::Writes => &self.over_quota_writes,
            Quota::Reads => &self.over_quota_reads,
            Quota::Concurrency => &self.over_quota_concurrency,
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
    /// The quotas of `catalogue`'s webstores, admitting `slots` requests at once while
    /// webstores contend.
    pub fn new(catalogue: &Catalogue, slots: usize) -> Quotas {
        let quotas = Quotas {
            by_webstore: ArcSwap::from_pointee(HashMap::new()),
            admission: Admission::new(slots, CONTENTION_WINDOW),
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
    pub fn check(&self, webstore: &Webstore, kind: Kind) -> Result<Checked, OverQuota> {
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
        let rate = match rate {
            None => None,
            Some(rate) => Some((
                quota,
                rate.take().map_err(|wait| {
                    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                    quotas.refuse(quota, secs.max(1))
                })?,
            )),
        };
        Ok(Checked {
            rate,
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

    /// Whether webstores contend for the host now (admission holds requests back).
    pub fn contended(&self) -> bool {
        self.admission.contended()
    }
}

impl WebstoreQuotas {
    fn new(webstore: &Webstore) -> WebstoreQuotas {
        let settings = webstore.quotas;
        let writes = settings
            .writes
            .map(|rate| Rate::new(rate.per_second, rate.burst));
        let reads = settings
            .reads
            .map(|rate| Rate::new(rate.per_second, rate.burst));
        let policies = policy_field(
            writes.as_ref(),
            reads.as_ref(),
            settings.concurrent_requests,
        );
        WebstoreQuotas {
            webstore: webstore.settings.id.clone(),
            settings,
            share: Share::new(webstore.idx.0),
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
    fn refuse(&self, quota: Quota, retry_after_secs: u64) -> OverQuota {
        self.counted.over_quota(quota).inc();
        let minute = crate::clock::unix_now().max(0) as u64 / 60;
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
        OverQuota {
            quota,
            retry_after_secs,
            policies: self.policies.clone(),
        }
    }
}

/// The `RateLimit-Policy` field of a webstore (draft-ietf-httpapi-ratelimit-headers-11): its
/// write and read quotas where it has them (`q` requests in a window of `w` seconds) and its
/// concurrency quota (`qu="concurrent-requests"`), as Structured Fields.
fn policy_field(writes: Option<&Rate>, reads: Option<&Rate>, concurrent: u32) -> String {
    let mut field = String::new();
    for (name, rate) in [("writes", writes), ("reads", reads)] {
        if let Some(rate) = rate {
            let (q, w) = rate.policy();
            field.push_str(&format!("\"{name}\";q={q};w={w}, "));
        }
    }
    field.push_str(&format!(
        "\"concurrency\";q={concurrent};qu=\"concurrent-requests\""
    ));
    field
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
        assert_eq!(first.rate.unwrap().1.requests, 1);
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
        assert_eq!(granted.rate.unwrap().1.requests, 4);
        assert!(granted.policies.starts_with(b"\"writes\";q=5;w=5, "));
    }

    #[tokio::test]
    async fn a_request_dropped_while_it_waits_for_its_turn_gives_everything_back() {
        let catalogue = catalogue(r#"{"concurrent_requests": 2}"#);
        let (a, b) = (
            catalogue.webstores()[0].clone(),
            catalogue.webstores()[1].clone(),
        );
        let quotas = Quotas::new(&catalogue, 2);
        // A and B each have one request in service: they contend, and hold both slots.
        let a_checked = quotas.check(&a, Kind::Write).unwrap();
        let a_slot = a_checked.admit().await;
        let b_checked = quotas.check(&b, Kind::Read).unwrap();
        let b_slot = b_checked.admit().await;
        assert!(quotas.contended());
        assert_eq!(quotas.in_service(), 2);
        // A's second request, past its fair part and the slots, waits, and its future is
        // dropped there.
        let a_again = quotas.check(&a, Kind::Write).unwrap();
        let waiting =
            tokio::time::timeout(std::time::Duration::from_millis(30), a_again.admit()).await;
        assert!(waiting.is_err(), "it had to wait");
        drop(a_again);
        drop((a_slot, a_checked, b_slot, b_checked));
        assert_eq!(quotas.in_service(), 0);
        // A's concurrency quota is whole again, and so are the slots.
        let first = quotas.check(&a, Kind::Write).unwrap();
        let second = quotas.check(&a, Kind::Write).unwrap();
        let slots = (first.admit().await, second.admit().await);
        assert_eq!(quotas.in_service(), 2);
        drop(slots);
        assert_eq!(quotas.in_service(), 0);
    }

    #[tokio::test]
    async fn a_webstore_alone_is_admitted_past_the_slots_and_without_a_rate_quota() {
        let catalogue = catalogue("{}");
        let webstore = catalogue.webstores()[0].clone();
        let quotas = Quotas::new(&catalogue, 2);
        let mut held = Vec::new();
        for _ in 0..300 {
            let checked = quotas.check(&webstore, Kind::Write).unwrap();
            assert!(checked.rate.is_none(), "no write quota by default");
            let slot = tokio::time::timeout(std::time::Duration::from_secs(1), checked.admit())
                .await
                .expect("a webstore alone waited");
            held.push((slot, checked));
        }
        assert_eq!(quotas.in_service(), 300);
        assert!(!quotas.contended());
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
        let field = policy_field(Some(&Rate::new(100, 100)), Some(&Rate::new(200, 400)), 64);
        assert_eq!(
            field,
            "\"writes\";q=100;w=1, \"reads\";q=400;w=2, \
             \"concurrency\";q=64;qu=\"concurrent-requests\""
        );
        assert_eq!(
            policy_field(None, Some(&Rate::new(5, 5)), 1024),
            "\"reads\";q=5;w=1, \"concurrency\";q=1024;qu=\"concurrent-requests\""
        );
        assert_eq!(
            policy_field(None, None, 1024),
            "\"concurrency\";q=1024;qu=\"concurrent-requests\""
        );
    }
}
