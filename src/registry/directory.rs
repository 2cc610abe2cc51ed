//! The directory of live customer actors: at most one per customer, activated from the store
//! on first use, passivated when idle, and a count of the calls each one has to answer.
//!
//! Every acquisition here is a guard. A [`CallPermit`] counts one call against its actor's
//! limit until it is dropped, wherever it travels (into the actor's mailbox with its
//! message). An activation that its caller abandons half-way leaves no empty entry behind.
//! No map guard is held across an `.await`. Must not touch: HTTP, the store's writes, actor
//! message handling.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;
use ractor::{Actor, ActorRef};
use tokio::sync::OnceCell;

use crate::actors::customer::{CustomerActor, CustomerArgs, CustomerMsg, OrdersWriting, Published};
use crate::domain::catalogue::WebstoreIdx;
use crate::domain::customer::Customer;
use crate::domain::ids::CustomerId;

use super::RegistryError;
use crate::metrics::METRICS;

/// A live customer actor and what the registry knows about its use.
pub struct LiveActor {
    /// The customer's webstore.
    pub webstore: WebstoreIdx,
    /// The actor.
    pub actor: ActorRef<CustomerMsg>,
    published: Published,
    /// The actor's order writes not on disk yet.
    writing: OrdersWriting,
    last_used: AtomicU64,
    /// Calls counted in and not yet out; [`RETIRED`] and above once passivated.
    calls: Arc<AtomicU32>,
    epoch: Instant,
}

/// One call counted against a customer's limit, until dropped.
pub struct CallPermit(Arc<AtomicU32>);

impl Drop for CallPermit {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Why a call could not enter a live actor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Too many calls are waiting for this customer.
    Busy,
    /// The actor is being passivated; activate it again.
    Retired,
}

/// `calls` of a retired live actor: far above any limit, and still above it after every call that
/// tries to enter adds one.
const RETIRED: u32 = u32::MAX / 2;

impl LiveActor {
    /// The customer as its actor last stored it.
    pub fn customer(&self) -> Arc<Customer> {
        self.published
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Whether some of the customer's order writes are not on disk yet.
    pub fn writing_orders(&self) -> bool {
        self.writing.load(Ordering::Acquire) > 0
    }

    fn touch(&self) {
        let now = self.epoch.elapsed().as_secs();
        self.last_used.store(now, Ordering::Relaxed);
    }

    /// Counts a call in, for as long as the permit lives. Refused when `limit` calls are
    /// already counted, or when the live actor was retired for passivation (the caller then asks
    /// the registry for a fresh live actor).
    pub fn enter(&self, limit: u32) -> Result<CallPermit, Refused> {
        let before = self.calls.fetch_add(1, Ordering::AcqRel);
        // From here the permit owns the increment, whatever is returned.
        let permit = CallPermit(self.calls.clone());
        if before >= RETIRED {
            return Err(Refused::Retired);
        }
        if before >= limit {
            return Err(Refused::Busy);
        }
        Ok(permit)
    }

    /// Calls counted in now (for tests and diagnostics).
    pub fn calls(&self) -> u32 {
        self.calls.load(Ordering::Acquire)
    }

    /// Marks an unused live actor as retired, so that no call can enter it any more.
    fn retire(&self) -> bool {
        self.calls
            .compare_exchange(0, RETIRED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    fn idle_for(&self) -> Duration {
        let now = self.epoch.elapsed().as_secs();
        Duration::from_secs(now.saturating_sub(self.last_used.load(Ordering::Relaxed)))
    }
}

type Activation = Arc<OnceCell<Arc<LiveActor>>>;

/// Why an activation produced no live actor.
pub enum Activated {
    /// No such customer (or one of a webstore the catalogue no longer has).
    Missing,
    /// The store or the actor failed.
    Failed(RegistryError),
}

/// What activating a customer needs: its actor's arguments, read from the store.
pub type Loaded = Result<CustomerArgs, Activated>;

/// The live actors, by customer id.
pub struct Directory {
    active: DashMap<CustomerId, Activation>,
    epoch: Instant,
}

/// Removes an activation entry its callers abandoned before it produced a live actor, so that an
/// id whose activation was cut off (a dropped request) leaves nothing behind.
struct PendingActivation<'a> {
    active: &'a DashMap<CustomerId, Activation>,
    id: CustomerId,
    cell: Activation,
}

impl Drop for PendingActivation<'_> {
    fn drop(&mut self) {
        // Other callers waiting on the same activation hold clones of the cell; only the last
        // one out removes it, and only if nothing was activated.
        self.active.remove_if(&self.id, |_, held| {
            Arc::ptr_eq(held, &self.cell) && held.get().is_none() && Arc::strong_count(held) == 2
        });
    }
}

impl Directory {
    /// An empty directory.
    pub fn new() -> Directory {
        Directory {
            active: DashMap::new(),
            epoch: Instant::now(),
        }
    }

    /// The live actor of `id`, if its actor is running.
    pub fn live(&self, id: CustomerId) -> Option<Arc<LiveActor>> {
        let live = self.active.get(&id).and_then(|cell| cell.get().cloned())?;
        live.touch();
        Some(live)
    }

    /// The live actor of `id`, starting its actor from `load` when it has none. `Ok(None)` when
    /// there is no such customer.
    pub async fn activate(
        &self,
        id: CustomerId,
        load: impl FnOnce() -> Loaded,
    ) -> Result<Option<Arc<LiveActor>>, RegistryError> {
        if let Some(live) = self.live(id) {
            return Ok(Some(live));
        }
        let pending = PendingActivation {
            active: &self.active,
            id,
            cell: self.active.entry(id).or_default().clone(),
        };
        // Boxed: starting an actor is a future of kilobytes, and inline it would be part of
        // every call's future (copied whole as it moves), though nearly every call finds
        // its actor live above.
        let outcome = Box::pin(pending.cell.get_or_try_init(|| self.start(load)))
            .await
            .cloned();
        drop(pending);
        match outcome {
            Ok(live) => {
                live.touch();
                Ok(Some(live))
            }
            Err(Activated::Missing) => Ok(None),
            Err(Activated::Failed(error)) => Err(error),
        }
    }

    async fn start(&self, load: impl FnOnce() -> Loaded) -> Result<Arc<LiveActor>, Activated> {
        let args = load()?;
        let webstore = args.webstore.idx;
        let published = args.published.clone();
        let writing = args.writing.clone();
        let id = args.customer.id;
        // Spawning runs `pre_start` inside this future and starts the actor's loop only at its
        // end, so a caller dropped here leaves no actor running.
        let (actor, _) = CustomerActor::spawn(None, CustomerActor, args)
            .await
            .map_err(|error| Activated::Failed(RegistryError::Spawn(id, error.to_string())))?;
        METRICS.actors_activated.inc();
        let live = LiveActor {
            webstore,
            actor,
            published,
            writing,
            last_used: AtomicU64::new(0),
            calls: Arc::new(AtomicU32::new(0)),
            epoch: self.epoch,
        };
        live.touch();
        Ok(Arc::new(live))
    }

    /// Forgets a live actor whose actor has stopped, so the next use activates a new one.
    pub fn forget(&self, id: CustomerId, live: &Arc<LiveActor>) {
        self.active.remove_if(&id, |_, held| {
            held.get().is_some_and(|current| Arc::ptr_eq(current, live))
        });
    }

    /// Stops the actors of customers unused for `idle` and with no call counted in (none
    /// waiting, none in their mailbox); their state is in the store, and the next use
    /// activates them again.
    pub fn passivate_idle(&self, idle: Duration) -> usize {
        let mut stopped = 0;
        self.active.retain(|_, cell| match cell.get() {
            // Not while its writes are on their way to disk: the next actor would read them
            // from the store as if they were there.
            Some(live) if live.idle_for() >= idle && !live.writing_orders() && live.retire() => {
                live.actor.stop(None);
                stopped += 1;
                false
            }
            _ => true,
        });
        stopped
    }

    /// How many entries the directory holds (live actors and activations under way).
    pub fn len(&self) -> usize {
        self.active.len()
    }

    /// True when no actor is live or starting.
    pub fn is_empty(&self) -> bool {
        self.active.is_empty()
    }

    /// Activations under way: entries without a live actor yet (for tests and diagnostics).
    pub fn activations_pending(&self) -> usize {
        self.active
            .iter()
            .filter(|cell| cell.get().is_none())
            .count()
    }

    /// Calls counted in across every live actor (for tests and diagnostics).
    pub fn calls_in_flight(&self) -> u64 {
        self.active
            .iter()
            .filter_map(|cell| cell.get().map(|live| u64::from(live.calls())))
            .sum()
    }

    /// Stops every live actor (at shutdown, after requests have drained).
    pub fn stop_all(&self) {
        self.active.retain(|_, cell| {
            if let Some(live) = cell.get() {
                live.actor.stop(None);
            }
            false
        });
    }
}

impl Default for Directory {
    fn default() -> Self {
        Directory::new()
    }
}
