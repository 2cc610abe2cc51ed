//! Webhooks: each webstore's endpoints (the catalogue's `webhooks`) are sent its events,
//! signed per Standard Webhooks, at least once and in order, after each write is durable.
//! Runs on the node that serves the webstore (the primary of a group), from the same
//! durable state wherever it runs, so a restart, a failover or a move goes on where the
//! last left off.
//!
//! - [`endpoint`]: one endpoint's deliveries, in a task of its own.
//! - [`schedule`]: what an answer means and when to retry.
//! - [`signing`]: the signatures, and new secrets.
//! - [`destination`]: the check that keeps deliveries off private networks.
//!
//! This file owns the supervisor: it starts a task for each endpoint of each webstore
//! served here, and stops those whose endpoint or webstore went away (a catalogue reload, a
//! move).
//!
//! Must not touch: the API's requests (nothing here delays one), the events' numbering.

pub mod destination;
pub mod endpoint;
pub mod schedule;
pub mod signing;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::service::serving::Served;
use crate::service::Service;

/// How often the supervisor compares the tasks with the catalogue and what this node serves.
const SUPERVISE_EVERY: Duration = Duration::from_millis(500);

/// How deliveries are made and retried.
#[derive(Debug, Clone, Copy)]
pub struct WebhookSettings {
    /// How long one attempt may take, connection included.
    pub timeout: Duration,
    /// The wait before the first retry (see [`schedule`]).
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

/// The deliveries of every endpoint served here; stopped when dropped.
pub struct Webhooks {
    supervisor: tokio::task::JoinHandle<()>,
}

impl Webhooks {
    /// Starts the deliveries of `service`'s webstores.
    pub fn start(service: Arc<Service>, settings: WebhookSettings) -> Webhooks {
        Webhooks {
            supervisor: tokio::spawn(supervise(service, settings)),
        }
    }
}

impl Drop for Webhooks {
    fn drop(&mut self) {
        // Aborting the supervisor drops its task set, which aborts every endpoint's task.
        self.supervisor.abort();
    }
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

async fn supervise(service: Arc<Service>, settings: WebhookSettings) {
    let mut tasks = Tasks::default();
    let mut ticks = tokio::time::interval(SUPERVISE_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let catalogue = service.catalogue();
        let serving = service.serving();
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
                service.clone(),
                settings,
                key.0.clone(),
                key.1.clone(),
            ));
            tasks.0.insert(key, task);
        }
    }
}
