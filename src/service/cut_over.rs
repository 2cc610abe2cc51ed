//! What a node records of a webstore in a move, changed as one state machine per webstore:
//! on the source, taking writes → **frozen** (`Moving`, durable) → **handed over**
//! (durable, one-way) → **released**, and frozen → taking writes again when the move is
//! **called off**, by the operator or by the freeze itself at its limit; on the target,
//! **taken**.
//!
//! Each step checks, awaits a durable write, then changes memory. A step holds its
//! webstore's lock from its first check to its last change, so that no two steps interleave
//! (a call-off racing a hand-over ends as one of them, whole, and the other is refused), and
//! it runs in a task of its own, so that a request dropped midway (its client gone, its
//! deadline passed) cannot leave it half made.
//!
//! A freeze may be given a limit (`boxsub move-webstore --max-freeze`): from the moment it
//! begins refusing writes, it waits for those under way at most until the limit, and a timer
//! calls it off at the limit unless the webstore was handed over by then; a hand-over after
//! it is refused, saying why. So a freeze lasts at most its limit, and a durable write. A
//! freeze without a limit (an operator's by hand, or one a restarted source found recorded)
//! lasts until the move goes on or is called off.
//!
//! Must not touch: HTTP, HAProxy, the placement file; the copy and its rounds
//! (`super::move_steps`).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;
use tokio::sync::{Mutex, OwnedMutexGuard};

use super::serving::Served;
use super::{Service, ServiceError};
use crate::domain::ownership::Ownership;

/// How long a freeze without a limit waits for the writes under way.
const DRAIN_WITHIN: Duration = Duration::from_secs(10);

/// A freeze under way here.
#[derive(Debug, Clone, Copy)]
struct Freeze {
    /// Tells this freeze from any later one of the webstore (its limit's timer looks).
    number: u64,
    /// When it began refusing writes.
    began: Instant,
    /// Its limit: at this moment it is called off unless handed over.
    until: Option<Instant>,
}

/// One webstore's move as this node has it, beside what [`super::serving::Serving`] records.
#[derive(Debug, Default)]
struct CutOver {
    /// The freeze under way, if one is.
    freeze: Option<Freeze>,
    /// How many freezes began (numbers them).
    freezes: u64,
    /// Why the last freeze ended without a hand-over, if its limit ended it: what a hand-over
    /// that comes later is told.
    gave_up: Option<String>,
}

/// Every webstore's move as this node has it, each behind a lock of its own.
#[derive(Default)]
pub struct CutOvers(DashMap<String, Arc<Mutex<CutOver>>>);

impl CutOvers {
    fn of(&self, id: &str) -> Arc<Mutex<CutOver>> {
        if let Some(lock) = self.0.get(id) {
            return lock.clone();
        }
        self.0.entry(id.to_owned()).or_default().clone()
    }
}

impl Service {
    /// Runs `step` of webstore `id`'s move (which must be the catalogue's) to its end in a
    /// task of its own, whatever becomes of the caller's future, holding the webstore's lock
    /// from before its first check to after its last change.
    async fn run_step<T, Step, Steps>(
        self: &Arc<Self>,
        id: &str,
        step: Step,
    ) -> Result<T, ServiceError>
    where
        T: Send + 'static,
        Step: FnOnce(Arc<Service>, String, OwnedMutexGuard<CutOver>) -> Steps + Send + 'static,
        Steps: Future<Output = Result<T, ServiceError>> + Send + 'static,
    {
        self.catalogue()
            .webstore_by_id(id)
            .ok_or(ServiceError::NotFound)?;
        let (service, id, lock) = (self.clone(), id.to_owned(), self.cut_overs.of(id));
        tokio::spawn(async move {
            let state = lock.lock_owned().await;
            step(service, id, state).await
        })
        .await
        .map_err(|error| ServiceError::Internal(format!("a step of a move failed: {error}")))?
    }

    /// Freezes webstore `id`'s writes for a move, durably, and waits until the writes under
    /// way are done. With `limit`, the freeze lasts at most that long: if the writes under
    /// way are not done by then, it is called off here and refused; otherwise it is called
    /// off at the limit unless handed over.
    pub async fn freeze_for_move(
        self: &Arc<Self>,
        id: &str,
        limit: Option<Duration>,
    ) -> Result<(), ServiceError> {
        self.run_step(id, move |service, id, mut state| async move {
            service.freeze_locked(&id, limit, &mut state).await
        })
        .await
    }

    /// Hands webstore `id` over to the shard it moves to: once it is frozen and its writes
    /// under way are done, records `HandedOver` durably. The target may take it from then
    /// on, so the move can no longer be called off here; nothing of it is answered here
    /// any more, and it is released later. Refused once its freeze was called off (at its
    /// limit, or by the operator).
    pub async fn hand_over(self: &Arc<Self>, id: &str) -> Result<(), ServiceError> {
        self.run_step(id, |service, id, mut state| async move {
            service.hand_over_locked(&id, &mut state).await
        })
        .await
    }

    /// Calls a move of webstore `id` off: its writes are taken again here, and its changes
    /// no longer tracked (nothing to do for a webstore that takes its writes here).
    /// Refused once it has been handed over, since the target may have taken it.
    pub async fn call_off_move(self: &Arc<Self>, id: &str) -> Result<(), ServiceError> {
        self.run_step(id, |service, id, mut state| async move {
            service.call_off_locked(&id, &mut state).await
        })
        .await
    }

    /// Takes webstore `id`: served here from now on, durably, whatever `--webstores` says,
    /// with its state read afresh from the store.
    pub async fn take_webstore(self: &Arc<Self>, id: &str) -> Result<(), ServiceError> {
        self.run_step(id, |service, id, _state| async move {
            service.take_locked(&id).await
        })
        .await
    }

    /// Releases webstore `id`: never served here again, durably; then everything of it is
    /// removed from the store. Refused unless it was handed over (frozen, its writes drained,
    /// and its last changes shipped). How many keys were removed.
    pub async fn release_webstore(self: &Arc<Self>, id: &str) -> Result<u64, ServiceError> {
        self.run_step(id, |service, id, mut state| async move {
            service.release_locked(&id, &mut state).await
        })
        .await
    }

    async fn freeze_locked(
        self: &Arc<Self>,
        id: &str,
        limit: Option<Duration>,
        state: &mut CutOver,
    ) -> Result<(), ServiceError> {
        match self.serving.recorded(id) {
            Some(Ownership::HandedOver) => return Ok(()),
            Some(Ownership::Released) => {
                return Err(ServiceError::Conflict(format!(
                    "{id} was released from here"
                )))
            }
            _ if self.serving.served(id) == Served::Elsewhere => {
                return Err(ServiceError::Conflict(format!("{id} is not served here")))
            }
            Some(Ownership::Moving) => {}
            _ => {
                self.registry
                    .store()
                    .set_ownership(id, Ownership::Moving)?
                    .durable()
                    .await?;
            }
        }
        // A freeze goes on as it began; one that this node found recorded (a restart, a
        // takeover) begins here.
        let freeze = match state.freeze {
            Some(freeze) => freeze,
            None => {
                state.freezes += 1;
                let began = Instant::now();
                let freeze = Freeze {
                    number: state.freezes,
                    began,
                    until: limit.map(|limit| began + limit),
                };
                state.freeze = Some(freeze);
                state.gave_up = None;
                self.arm_limit(id, freeze);
                freeze
            }
        };
        self.serving.record(id, Some(Ownership::Moving));
        self.drain_locked(id, freeze, state).await
    }

    /// Waits until the writes of `id` under way are done (within `freeze`'s limit), with the
    /// store's own fence up first: a change an actor began for a request that has gone (its
    /// ticket with it) is refused there, and the barrier then waits for those already inside
    /// the store. Past the limit, the freeze is called off.
    async fn drain_locked(
        &self,
        id: &str,
        freeze: Freeze,
        state: &mut CutOver,
    ) -> Result<(), ServiceError> {
        let store = self.registry.store();
        store.frozen().freeze(id);
        let within = freeze.until.map_or(DRAIN_WITHIN, |until| {
            until.saturating_duration_since(Instant::now())
        });
        if !self.serving.freeze(id, within).await {
            return match freeze.until {
                Some(until) => Err(self.give_up_locked(id, freeze, until, state).await),
                None => Err(ServiceError::Busy),
            };
        }
        store.barrier_after_visible_writes()?.durable().await?;
        Ok(())
    }

    async fn hand_over_locked(&self, id: &str, state: &mut CutOver) -> Result<(), ServiceError> {
        match self.serving.recorded(id) {
            Some(Ownership::HandedOver) => return Ok(()),
            Some(Ownership::Moving) => {}
            _ => {
                return Err(ServiceError::Conflict(
                    state.gave_up.clone().unwrap_or_else(|| {
                        format!("{id} is not frozen for a move: freeze it first")
                    }),
                ))
            }
        }
        let freeze = match state.freeze {
            Some(freeze) => freeze,
            // Recorded frozen before this node started: a freeze without a limit.
            None => {
                state.freezes += 1;
                let freeze = Freeze {
                    number: state.freezes,
                    began: Instant::now(),
                    until: None,
                };
                state.freeze = Some(freeze);
                freeze
            }
        };
        if let Some(until) = freeze.until.filter(|until| Instant::now() >= *until) {
            return Err(self.give_up_locked(id, freeze, until, state).await);
        }
        self.drain_locked(id, freeze, state).await?;
        let store = self.registry.store();
        store
            .set_ownership(id, Ownership::HandedOver)?
            .durable()
            .await?;
        self.serving.record(id, Some(Ownership::HandedOver));
        store.tracking().stop(id);
        state.freeze = None;
        Ok(())
    }

    async fn call_off_locked(&self, id: &str, state: &mut CutOver) -> Result<(), ServiceError> {
        match self.serving.recorded(id) {
            Some(Ownership::Moving) => self.thaw_locked(id, state).await?,
            Some(Ownership::HandedOver) => {
                return Err(ServiceError::Conflict(format!(
                    "{id} has been handed over: the other shard may have taken it, so its \
                     writes can never be taken here again. Run `boxsub move-webstore` again \
                     to finish the move"
                )))
            }
            Some(Ownership::Released) => {
                return Err(ServiceError::Conflict(format!(
                    "{id} was released from here"
                )))
            }
            _ if self.serving.served(id) == Served::Elsewhere => {
                return Err(ServiceError::Conflict(format!("{id} is not served here")))
            }
            // Takes its writes here already: only a copy session, if any, ends.
            _ => {}
        }
        self.registry.store().tracking().stop(id);
        Ok(())
    }

    /// Takes webstore `id`'s writes again (a freeze called off): durably, then in memory.
    /// Its copy session, if any, goes on: a freeze called off at its limit leaves its move
    /// to say so when it asks for the hand-over (and to end the session, or to go away and
    /// leave it to end unused).
    async fn thaw_locked(&self, id: &str, state: &mut CutOver) -> Result<(), ServiceError> {
        let store = self.registry.store();
        store.clear_ownership(id)?.durable().await?;
        self.serving.record(id, None);
        store.frozen().thaw(id);
        self.serving.unfreeze(id);
        state.freeze = None;
        Ok(())
    }

    /// Calls `freeze` off at its limit `until` (reached): what to answer the step that
    /// found it so, and what a later hand-over is told.
    async fn give_up_locked(
        &self,
        id: &str,
        freeze: Freeze,
        until: Instant,
        state: &mut CutOver,
    ) -> ServiceError {
        let limit = (until - freeze.began).as_millis();
        if let Err(error) = self.thaw_locked(id, state).await {
            tracing::error!(webstore = %id, %error, "a freeze past its limit could not be called off");
            return error;
        }
        tracing::warn!(
            webstore = %id,
            limit_ms = limit as u64,
            "a move's freeze reached its limit before the hand-over: called off"
        );
        let why = format!(
            "{id}'s freeze reached its limit of {limit} ms (--max-freeze) before its hand-over \
             and was called off: {id} takes its writes here again, as before the freeze"
        );
        state.gave_up = Some(why.clone());
        ServiceError::Conflict(why)
    }

    /// Calls `freeze` of webstore `id` off at its limit, unless it was handed over or called
    /// off by then (a timer of its own, which holds no strong handle on the service).
    fn arm_limit(self: &Arc<Self>, id: &str, freeze: Freeze) {
        let Some(until) = freeze.until else {
            return;
        };
        let service = Arc::downgrade(self);
        let id = id.to_owned();
        tokio::spawn(async move {
            tokio::time::sleep_until(until.into()).await;
            let Some(service) = service.upgrade() else {
                return;
            };
            let lock = service.cut_overs.of(&id);
            let mut state = lock.lock().await;
            let still = state
                .freeze
                .is_some_and(|under_way| under_way.number == freeze.number);
            if still && service.serving.recorded(&id) == Some(Ownership::Moving) {
                // Logged there; nobody waits for the answer.
                let _ = service.give_up_locked(&id, freeze, until, &mut state).await;
            }
        });
    }

    async fn take_locked(&self, id: &str) -> Result<(), ServiceError> {
        let webstore = self
            .catalogue()
            .webstore_by_id(id)
            .cloned()
            .ok_or(ServiceError::NotFound)?;
        match self.serving.recorded(id) {
            Some(Ownership::Released) => {
                return Err(ServiceError::Conflict(format!(
                    "{id} was released from here and is never served here again"
                )))
            }
            Some(Ownership::Taken) => return Ok(()),
            _ => {}
        }
        if self.serving.served(id) != Served::Elsewhere {
            return Err(ServiceError::Conflict(format!(
                "{id} is served here already"
            )));
        }
        self.registry.refresh_webstore(&webstore)?;
        // Before it is served: its first event here is numbered after the highest one the
        // store holds now, every round applied.
        self.events.forget(id);
        self.registry
            .store()
            .set_ownership(id, Ownership::Taken)?
            .durable()
            .await?;
        self.serving.record(id, Some(Ownership::Taken));
        self.serving.unfreeze(id);
        Ok(())
    }

    async fn release_locked(&self, id: &str, state: &mut CutOver) -> Result<u64, ServiceError> {
        match self.serving.recorded(id) {
            Some(Ownership::Released | Ownership::HandedOver) => {}
            _ => {
                return Err(ServiceError::Conflict(format!(
                    "{id} has not been handed over: a release removes it here, so it must \
                     first be frozen, its writes drained and its last changes shipped \
                     (boxsub move-webstore does all of that)"
                )))
            }
        }
        state.freeze = None;
        let store = self.registry.store().clone();
        if self.serving.recorded(id) != Some(Ownership::Released) {
            store
                .set_ownership(id, Ownership::Released)?
                .durable()
                .await?;
            self.serving.record(id, Some(Ownership::Released));
        }
        let purged = {
            let store = store.clone();
            let id = id.to_owned();
            tokio::task::spawn_blocking(move || store.purge_webstore(&id)).await
        };
        // The purge removed its events (a failed one runs again with the next release), and
        // it is never served here again: no numbering of it may linger.
        self.events.forget(id);
        let removed = purged.map_err(|error| ServiceError::Internal(error.to_string()))??;
        store.durable().await?;
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::catalogue::Catalogue;
    use crate::service::ServiceSettings;
    use crate::store::Store;

    fn service(dir: &std::path::Path) -> (Arc<Service>, String) {
        let catalogue = Catalogue::demo(0);
        let id = catalogue.webstores()[0].settings.id.clone();
        let settings = ServiceSettings {
            call_timeout: Duration::from_secs(5),
            password_hashers: 1,
            password_queue: 4,
            max_calls_per_customer: 8,
            max_calls_in_flight: 64,
            id_range: Default::default(),
            idempotency_ttl_secs: 86_400,
            webstores: None,
            admission_slots: 64,
        };
        let service = Service::new(catalogue, Store::open_for_test(dir), settings).unwrap();
        (Arc::new(service), id)
    }

    /// Whether webstore `id` takes writes here, at the front and in the store.
    fn takes_writes(service: &Service, id: &str) -> bool {
        let admitted = service.serving.begin_write(id).is_ok();
        assert_eq!(
            admitted,
            !service.registry.store().frozen().holds(id),
            "the front and the store's fence agree"
        );
        admitted
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_call_off_racing_a_hand_over_ends_as_one_of_them_whole() {
        let dir = tempfile::tempdir().unwrap();
        let (service, id) = service(dir.path());
        for round in 0..20 {
            service.freeze_for_move(&id, None).await.unwrap();
            let (handed, called) = tokio::join!(service.hand_over(&id), service.call_off_move(&id));
            match (handed.is_ok(), called.is_ok()) {
                (true, false) => {
                    assert_eq!(service.serving.recorded(&id), Some(Ownership::HandedOver));
                    assert!(!takes_writes(&service, &id));
                    return;
                }
                (false, true) => {
                    assert_eq!(service.serving.recorded(&id), None);
                    assert!(takes_writes(&service, &id), "round {round}");
                }
                other => panic!("round {round}: {other:?} ({handed:?}, {called:?})"),
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_freeze_calls_itself_off_at_its_limit_and_refuses_a_late_hand_over() {
        let dir = tempfile::tempdir().unwrap();
        let (service, id) = service(dir.path());
        let limit = Duration::from_millis(200);
        let began = Instant::now();
        service.freeze_for_move(&id, Some(limit)).await.unwrap();
        assert!(!takes_writes(&service, &id));
        while !takes_writes(&service, &id) {
            assert!(began.elapsed() < Duration::from_secs(5), "never called off");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let frozen_for = began.elapsed();
        assert!(frozen_for >= limit, "{frozen_for:?}");
        assert_eq!(service.serving.recorded(&id), None);
        let late = service.hand_over(&id).await;
        assert!(
            matches!(&late, Err(ServiceError::Conflict(why)) if why.contains("--max-freeze")),
            "{late:?}"
        );
        // A freeze handed over within its limit stays handed over past it.
        service.freeze_for_move(&id, Some(limit)).await.unwrap();
        service.hand_over(&id).await.unwrap();
        tokio::time::sleep(limit * 2).await;
        assert_eq!(service.serving.recorded(&id), Some(Ownership::HandedOver));
        assert!(!takes_writes(&service, &id));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_freeze_whose_writes_under_way_outlast_its_limit_is_called_off_then() {
        let dir = tempfile::tempdir().unwrap();
        let (service, id) = service(dir.path());
        let ticket = service.serving.begin_write(&id).unwrap();
        let began = Instant::now();
        let refused = service
            .freeze_for_move(&id, Some(Duration::from_millis(100)))
            .await;
        assert!(
            matches!(refused, Err(ServiceError::Conflict(_))),
            "{refused:?}"
        );
        assert!(
            began.elapsed() < Duration::from_secs(5),
            "{:?}",
            began.elapsed()
        );
        drop(ticket);
        assert!(takes_writes(&service, &id), "called off: as before");
        assert_eq!(service.serving.recorded(&id), None);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_step_whose_caller_goes_away_runs_to_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let (service, id) = service(dir.path());
        service.freeze_for_move(&id, None).await.unwrap();
        // Polled once, then dropped: the hand-over goes on in its own task.
        let mut handing_over = Box::pin(service.hand_over(&id));
        assert!(futures_util::poll!(handing_over.as_mut()).is_pending());
        drop(handing_over);
        let deadline = Instant::now() + Duration::from_secs(5);
        while service.serving.recorded(&id) != Some(Ownership::HandedOver) {
            assert!(Instant::now() < deadline, "the hand-over stopped midway");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(service.call_off_move(&id).await.is_err(), "handed over");
        assert!(!takes_writes(&service, &id));
    }
}
