//! The background work of a served service, its duties: upkeep (passivating idle customers,
//! pruning sign-in throttles), the idempotency records' expiry, the events' retention, the
//! freezing of each date's delivery list once it locks, webhook sends and the census of the
//! store after start-up. [`PrimaryDuties`] starts
//! them together and aborts them together when dropped, so that a node runs them exactly
//! while it serves as the writer (alone from start to stop, or as a group's primary). Each
//! sweep works in small batches off the async threads and rests between them so that it
//! never crowds out requests. Must not touch: signals, listeners, what the sweeps remove
//! (the store decides that).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::clock::unix_now;
use crate::lease::Lease;
use crate::service::serving::Served;
use crate::service::Service;
use crate::store::Store;
use crate::webhooks::{Sources, WebhookSettings, Webhooks};

/// What the background work of a served service is given.
#[derive(Debug, Clone, Copy)]
pub(super) struct DutySettings {
    /// How long a customer's actor may stay idle.
    pub(super) idle: Duration,
    /// Whether to read every record after start-up (not when `--verify-store` did).
    pub(super) census: bool,
    /// How long events are kept.
    pub(super) events_retention: Duration,
    /// How webhooks are delivered.
    pub(super) webhooks: WebhookSettings,
}

/// The background work of the service a node serves: upkeep, idempotency expiry, the
/// events' retention, webhook deliveries and the census after start-up. Stopped (aborted)
/// when dropped, as when a group's primary steps down.
pub(super) struct PrimaryDuties {
    tasks: Vec<tokio::task::JoinHandle<()>>,
    _webhooks: Webhooks,
}

impl PrimaryDuties {
    /// Starts them for `service`, its deliveries sent only while `lease` holds.
    pub(super) fn start(
        service: Arc<Service>,
        lease: Arc<Lease>,
        settings: DutySettings,
    ) -> PrimaryDuties {
        let mut tasks = vec![
            spawn_housekeeping(service.clone(), settings.idle),
            spawn_idempotency_expiry(service.clone()),
            spawn_events_retention(service.clone(), settings.events_retention),
            spawn_freezer(service.clone()),
        ];
        if settings.census {
            tasks.push(spawn_census(service.clone()));
        }
        PrimaryDuties {
            tasks,
            _webhooks: Webhooks::start(Sources::of(&service), lease, settings.webhooks),
        }
    }
}

impl Drop for PrimaryDuties {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Freezes each webstore's dates once they lock (see `service::freezing`), then charges
/// the deliveries whose `delivered_at` has passed (`service::charging`): at start, then
/// every few seconds, a date's list frozen within seconds of its cut-off.
fn spawn_freezer(service: Arc<Service>) -> tokio::task::JoinHandle<()> {
    const EVERY: Duration = Duration::from_secs(5);
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(EVERY);
        loop {
            ticks.tick().await;
            let catalogue = service.catalogue();
            for webstore in catalogue.webstores() {
                match service.freeze_locked_dates(webstore).await {
                    Ok(0) => {}
                    Ok(dates) => tracing::info!(
                        webstore = %webstore.settings.id,
                        dates,
                        "delivery lists frozen"
                    ),
                    // A full disk, a move's freeze, a failing store: again next time.
                    Err(error) => tracing::debug!(
                        webstore = %webstore.settings.id,
                        %error,
                        "freezing delivery lists paused"
                    ),
                }
                // After freezing, in the same task: a date is charged once frozen.
                match service.charge_delivered_dates(webstore).await {
                    Ok(0) => {}
                    Ok(deliveries) => tracing::info!(
                        webstore = %webstore.settings.id,
                        deliveries,
                        "deliveries charged"
                    ),
                    Err(error) => tracing::debug!(
                        webstore = %webstore.settings.id,
                        %error,
                        "charging deliveries paused"
                    ),
                }
            }
        }
    })
}

/// Periodic upkeep: expire sign-in throttles, passivate idle customers.
fn spawn_housekeeping(service: Arc<Service>, idle: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let period = (idle / 4).clamp(Duration::from_secs(1), Duration::from_secs(60));
        let mut ticks = tokio::time::interval(period);
        let mut last_prune = Instant::now();
        loop {
            ticks.tick().await;
            let stopped = service.registry().passivate_idle(idle);
            if stopped > 0 {
                tracing::debug!(
                    stopped,
                    live = service.registry().active_count(),
                    "passivated idle customers"
                );
            }
            if last_prune.elapsed() >= Duration::from_secs(60) {
                service.prune_throttles();
                last_prune = Instant::now();
            }
        }
    })
}

/// Removes expired idempotency records: every quarter of their time to live (at least every
/// second, at most every five minutes) a pass goes through them in batches of 1,024, resting
/// a few milliseconds between batches so that the sweep never crowds out requests. The rest
/// caps how fast a pass removes records: with batches of 256 that was about 33,000 a
/// second, below what keyed creates reach once they stopped waiting for sled's flush, so
/// under a flood of keyed creates with a short time to live the records held kept growing.
fn spawn_idempotency_expiry(service: Arc<Service>) -> tokio::task::JoinHandle<()> {
    const BATCH: usize = 1024;
    tokio::spawn(async move {
        let ttl = service.idempotency_ttl_secs();
        let period =
            Duration::from_secs(ttl / 4).clamp(Duration::from_secs(1), Duration::from_secs(300));
        let mut ticks = tokio::time::interval(period);
        loop {
            ticks.tick().await;
            let mut cursor: Option<Vec<u8>> = None;
            let mut removed = 0;
            let mut kept = 0;
            loop {
                let store = service.registry().store().clone();
                let from = cursor.take();
                let now = unix_now();
                let step = tokio::task::spawn_blocking(move || {
                    store.sweep_idempotency(from.as_deref(), BATCH, ttl, now)
                })
                .await;
                match step {
                    Ok(Ok(step)) => {
                        removed += step.removed;
                        kept += step.examined - step.removed;
                        crate::metrics::METRICS
                            .idempotency_expired
                            .inc_by(step.removed as u64);
                        match step.next {
                            Some(next) => cursor = Some(next),
                            None => {
                                crate::metrics::METRICS
                                    .idempotency_records
                                    .set(i64::try_from(kept).unwrap_or(i64::MAX));
                                break;
                            }
                        }
                    }
                    // A full disk or a failing store: try again next period.
                    Ok(Err(error)) => {
                        tracing::debug!(%error, "idempotency expiry paused");
                        break;
                    }
                    Err(_) => break,
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            if removed > 0 {
                tracing::debug!(removed, "expired idempotency records removed");
            }
        }
    })
}

/// Removes the events older than `retention` of every webstore served here: every quarter
/// of the retention (at least every second, at most every five minutes), in batches of
/// 1,024 (fewer when they would not fit one log entry) with a rest between them, as the
/// idempotency expiry does.
fn spawn_events_retention(
    service: Arc<Service>,
    retention: Duration,
) -> tokio::task::JoinHandle<()> {
    const BATCH: usize = 1024;
    tokio::spawn(async move {
        let period = (retention / 4).clamp(Duration::from_secs(1), Duration::from_secs(300));
        let mut ticks = tokio::time::interval(period);
        loop {
            ticks.tick().await;
            let before_ms = jiff::Timestamp::now().as_millisecond()
                - i64::try_from(retention.as_millis()).unwrap_or(i64::MAX);
            let served: Vec<String> = service
                .catalogue()
                .webstores()
                .iter()
                .map(|webstore| webstore.settings.id.clone())
                .filter(|id| service.serving().served(id) == Served::Here)
                .collect();
            for webstore in served {
                loop {
                    let store = service.registry().store().clone();
                    let id = webstore.clone();
                    let step = tokio::task::spawn_blocking(move || {
                        store.prune_events(&id, before_ms, BATCH)
                    })
                    .await;
                    match step {
                        Ok(Ok(removed)) => {
                            crate::metrics::METRICS.events_pruned.inc_by(removed as u64);
                            // A step removes fewer than a batch when no more fit a log
                            // entry: the next step goes on from there.
                            if removed == 0 {
                                break;
                            }
                        }
                        Ok(Err(error)) => {
                            tracing::debug!(%error, "events retention paused");
                            break;
                        }
                        Err(_) => break,
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        }
    })
}

/// Reads every record of the store, logging what it holds and any record it cannot read.
/// Runs after start-up, so that a large store is served at once, and after the stored orders
/// are indexed, so that it does not slow down what order lookups wait for.
fn spawn_census(service: Arc<Service>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        service.registry().orders_indexed().await;
        let store = service.registry().store().clone();
        let _ = tokio::task::spawn_blocking(move || census(&store)).await;
    })
}

fn census(store: &Store) {
    let started = Instant::now();
    match store.verify() {
        Ok(census) => tracing::info!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            "store holds {} customers and {} orders, every record readable",
            census.customers,
            census.orders
        ),
        Err(error) => {
            let error = store.unreadable().note(error);
            tracing::error!(
                %error,
                "the store holds an unreadable record: the customer it belongs to answers 503; \
                 restart with --verify-store to refuse to serve a damaged store"
            )
        }
    }
}
