//! Webhooks: each webstore's endpoints (the catalogue's `webhooks`) are sent its events,
//! signed per Standard Webhooks, at least once and in order, after each write is durable.
//! Runs on the node that serves the webstore (the primary of a group), from the same
//! durable state wherever it runs, so a restart, a failover or a move goes on where the
//! last left off. A delivery is sent only while the node holds its read lease
//! ([`crate::lease`]), looked at after its event was read: a group's primary cut off from
//! the group stops delivering when its lease lapses, and one deposed or that gave up a
//! write at once.
//!
//! - [`endpoint`]: one endpoint's deliveries, in a task of its own.
//! - [`decision`]: what comes after an attempt (settle, retry at a time, give up, stop).
//! - `read_ahead`: the events an endpoint's task has read ahead of its position.
//! - [`backoff`]: what an answer means and when to retry.
//! - [`signing`]: the signatures, and new secrets.
//! - [`destination`]: the check that keeps deliveries off private networks.
//!
//! This file owns the supervisor: it starts a task for each endpoint of each webstore
//! served here, and stops those whose endpoint or webstore went away (a catalogue reload, a
//! move). They all run on a thread of their own, `boxsub-webhooks`, with a runtime of its
//! own, at a lower scheduling priority than the API's threads ([`DELIVERY_NICENESS`] nicer):
//! a delivery is a request and an answer between two processes, and when the host's CPU is
//! saturated the kernel favours the API's threads; an endpoint behind a flood catches up
//! when it eases (`boxsub_webhook_oldest_unsent_seconds` shows how far behind).
//!
//! Must not touch: the API's requests (nothing here delays one), the events' numbering.

pub mod backoff;
pub mod decision;
pub mod destination;
pub mod endpoint;
mod read_ahead;
pub mod signing;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::domain::catalogue::CurrentCatalogue;
use crate::events::Events;
use crate::lease::Lease;
use crate::service::serving::{Served, Serving};
use crate::service::Service;
use crate::store::Store;

/// How often the supervisor compares the tasks with the catalogue and what this node serves.
const SUPERVISE_EVERY: Duration = Duration::from_millis(500);

/// How much nicer than the process the deliveries thread is (capped at 19, the nicest):
/// under contention the kernel gives it about a tenth of what a thread of the API gets
/// (weight 110 against 1024), and all it wants when the CPU is otherwise idle. Relative, so
/// that a process started under `nice` keeps its deliveries below its API.
pub const DELIVERY_NICENESS: i32 = 10;

/// The sending thread's name (as `/proc/PID/task/TID/comm` shows it).
pub const SENDS_THREAD: &str = "boxsub-webhooks";

/// How deliveries are made and retried.
#[derive(Debug, Clone, Copy)]
pub struct WebhookSettings {
    /// How long one attempt may take, connection included.
    pub timeout: Duration,
    /// The wait before the first retry (see [`backoff`]).
    pub first_retry: Duration,
    /// How long an endpoint may keep failing one event before it is disabled.
    pub give_up: Duration,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        WebhookSettings {
            timeout: Duration::from_secs(10),
            first_retry: Duration::from_secs(5),
            give_up: Duration::from_secs(3 * 86_400),
        }
    }
}

/// What the deliveries use of the node, and nothing more of its service: the store (their
/// positions, the events), the events' numbering (each webstore's watermark), which
/// webstores are served here, and the catalogue in force (the endpoints).
#[derive(Clone)]
pub struct Sources {
    /// The store the events and the positions are in.
    pub store: Store,
    /// The webstores' events (their watermarks).
    pub events: Arc<Events>,
    /// Which webstores this node serves.
    pub serving: Arc<Serving>,
    /// The catalogue in force, followed across reloads.
    pub catalogue: Arc<CurrentCatalogue>,
}

impl Sources {
    /// What the deliveries use of `service`.
    pub fn of(service: &Service) -> Sources {
        Sources {
            store: service.registry().store().clone(),
            events: service.events().clone(),
            serving: service.shared_serving(),
            catalogue: service.current_catalogue(),
        }
    }
}

/// The deliveries of every endpoint served here; stopped when dropped.
pub struct Webhooks {
    /// Dropped to stop the deliveries thread's runtime, and with it every task on it.
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Webhooks {
    /// Starts the deliveries of the webstores served here on their own thread, each sent
    /// only while `lease` holds. Without a thread (the host out of threads) none are made
    /// here until the next start: their positions are stored, so nothing is lost, only later.
    pub fn start(sources: Sources, lease: Arc<Lease>, settings: WebhookSettings) -> Webhooks {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let spawned = std::thread::Builder::new()
            .name(SENDS_THREAD.to_owned())
            .spawn(move || sends_thread(sources, lease, settings, stopped));
        if let Err(error) = spawned {
            tracing::error!(%error, "no thread for webhook deliveries: none are made until a restart");
        }
        Webhooks { _stop: stop }
    }
}

/// The deliveries thread: lowers its own priority, runs the supervisor on a runtime of its
/// own until `stopped` (the `Webhooks` dropped), then drops the runtime and every task on
/// it, without waiting for one.
fn sends_thread(
    sources: Sources,
    lease: Arc<Lease>,
    settings: WebhookSettings,
    stopped: tokio::sync::oneshot::Receiver<()>,
) {
    if let Err(error) = lower_priority() {
        tracing::warn!(
            ?error,
            "the webhook deliveries thread keeps the API's priority"
        );
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(%error, "no runtime for webhook deliveries: none are made here");
            return;
        }
    };
    runtime.spawn(supervise(sources, lease, settings));
    runtime.block_on(async {
        let _ = stopped.await;
    });
    runtime.shutdown_background();
}

/// Makes the calling thread [`DELIVERY_NICENESS`] nicer than it is (threads it starts
/// after inherit it).
pub fn lower_priority() -> Result<(), thread_priority::Error> {
    use thread_priority::{ThreadPriority, ThreadPriorityValue};
    let wanted = (own_niceness() + DELIVERY_NICENESS).min(19);
    // The crate sets a niceness through its 0..=99 scale, which it maps onto 19..=-20
    // rounding down: the value that maps onto the niceness wanted.
    let value = (*ThreadPriorityValue::MIN..=*ThreadPriorityValue::MAX)
        .find(|value| crate_niceness(*value) == wanted)
        .and_then(|value| ThreadPriorityValue::try_from(value).ok())
        .ok_or(thread_priority::Error::Priority(
            "no value maps onto that niceness",
        ))?;
    thread_priority::set_current_thread_priority(ThreadPriority::Crossplatform(value))
}

/// The niceness the thread-priority crate sets for its cross-platform `value` on Linux
/// (its own arithmetic; the test below and the deliveries test read it back from /proc).
fn crate_niceness(value: u8) -> i32 {
    let max = *thread_priority::ThreadPriorityValue::MAX;
    let ratio = 1f32 - (f32::from(value) / f32::from(max));
    i32::from((39f32 * ratio) as i8) - 20
}

/// The calling thread's niceness, as /proc says (field 19 of its `stat`), or 0 where it
/// cannot be read.
fn own_niceness() -> i32 {
    std::fs::read_to_string("/proc/thread-self/stat")
        .ok()
        .and_then(|stat| {
            let (_, fields) = stat.rsplit_once(')')?;
            fields.split_whitespace().nth(16)?.parse().ok()
        })
        .unwrap_or(0)
}

/// Endpoint tasks by webstore and endpoint id; aborted when dropped.
#[derive(Default)]
struct Tasks(HashMap<(String, String), tokio::task::JoinHandle<()>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for task in self.0.values() {
            task.abort();
        }
    }
}

async fn supervise(sources: Sources, lease: Arc<Lease>, settings: WebhookSettings) {
    let mut tasks = Tasks::default();
    let mut ticks = tokio::time::interval(SUPERVISE_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let catalogue = sources.catalogue.get();
        let serving = &sources.serving;
        let mut wanted = Vec::new();
        for webstore in catalogue.webstores() {
            let id = &webstore.settings.id;
            if serving.served(id) != Served::Here {
                continue;
            }
            for webhook in &webstore.webhooks {
                wanted.push((id.clone(), webhook.id.clone()));
            }
        }
        // A task ends by itself when its endpoint goes; one that has ended is started again
        // if its endpoint is still wanted (a store failure ended it).
        tasks.0.retain(|key, task| {
            let keep = !task.is_finished() && wanted.contains(key);
            if !keep {
                task.abort();
            }
            keep
        });
        for key in wanted {
            if tasks.0.contains_key(&key) {
                continue;
            }
            let task = tokio::spawn(endpoint::run(
                sources.clone(),
                lease.clone(),
                settings,
                key.0.clone(),
                key.1.clone(),
            ));
            tasks.0.insert(key, task);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_niceness_has_a_value_and_the_sends_thread_is_ten_nicer_than_its_parent() {
        for niceness in -20..=19 {
            assert!(
                (0..=99u8).any(|value| crate_niceness(value) == niceness),
                "{niceness}"
            );
        }
        let parent = own_niceness();
        let measured = std::thread::spawn(|| {
            lower_priority().unwrap();
            own_niceness()
        })
        .join()
        .unwrap();
        assert_eq!(measured, (parent + DELIVERY_NICENESS).min(19));
    }
}
