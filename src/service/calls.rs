//! Calls to customer actors, with the service's limits: at most so many calls in all (the
//! call cap) and per customer, each answered within a deadline or refused as busy. (The call
//! cap is not fair admission, `crate::quotas`, which orders whole requests by webstore.)
//!
//! Everything a call acquires travels with its message as guards. The call cap's permit and
//! the customer's call permit are released when the actor is done with the message (for an
//! order, once it is on disk), not when the caller stops waiting, so the limits bound the
//! work really queued. A caller that stops waiting (its client reset, a deadline passed)
//! withdraws its request if the actor has not begun it, so a 503 for a call past its
//! deadline means nothing was changed; what the change needs to itself (an email claim, an
//! idempotency key's turn) is released then, or once the change is finished (for an order,
//! on disk), never while it may still be written. Must not touch: HTTP, the store.

use std::sync::Arc;
use std::time::Duration;

use ractor::concurrency::OneshotReceiver;
use ractor::RpcReplyPort;
use tokio::sync::Semaphore;

use crate::actors::customer::{CustomerMsg, Handoff, Request};
use crate::domain::catalogue::WebstoreIdx;
use crate::domain::ids::CustomerId;
use crate::metrics::{refused, Refusal};
use crate::registry::{LiveActor, Refused, Registry};

use super::ServiceError;

/// The limits and deadline of actor calls.
pub struct ActorCalls {
    call_cap: Arc<Semaphore>,
    call_cap_size: usize,
    per_customer: u32,
    deadline: Duration,
}

/// Withdraws the request when dropped, unless its actor has already begun it; and tells the
/// request's [`super::write_outcome`] if the actor has begun writing it, whether the call
/// ends in an answer, a failure or the caller's going away.
struct Withdraw(Arc<Handoff>);

impl Drop for Withdraw {
    fn drop(&mut self) {
        self.0.withdraw();
        if self.0.has_written() {
            super::write_outcome::begun();
        }
    }
}

impl ActorCalls {
    /// At most `in_flight` calls in all and `per_customer` per customer, each answered within
    /// `deadline`.
    pub fn new(in_flight: usize, per_customer: u32, deadline: Duration) -> ActorCalls {
        let call_cap_size = in_flight.max(1);
        ActorCalls {
            call_cap: Arc::new(Semaphore::new(call_cap_size)),
            call_cap_size,
            per_customer: per_customer.max(1),
            deadline,
        }
    }

    /// Calls customer `id`'s actor (activating it if needed). `exclusive` is what the
    /// request's change needs to itself (an email claim, an idempotency key's turn): it is
    /// released when the request is withdrawn or, once started, finished (see [`Handoff`]).
    /// `NotFound` when the webstore has no such customer.
    pub async fn call<T: Send + 'static, E: Send + 'static>(
        &self,
        registry: &Registry,
        webstore: WebstoreIdx,
        id: CustomerId,
        exclusive: Option<E>,
        request: impl FnOnce(RpcReplyPort<T>) -> Request,
    ) -> Result<T, ServiceError> {
        self.call_live(registry, None, webstore, id, exclusive, request)
            .await
    }

    /// [`ActorCalls::call`], given the live actor of customer `id` if the caller has just looked
    /// it up (which spares a second lookup; a live actor retired since is looked up again).
    pub async fn call_live<T: Send + 'static, E: Send + 'static>(
        &self,
        registry: &Registry,
        mut found: Option<Arc<LiveActor>>,
        webstore: WebstoreIdx,
        id: CustomerId,
        exclusive: Option<E>,
        request: impl FnOnce(RpcReplyPort<T>) -> Request,
    ) -> Result<T, ServiceError> {
        let capped = self.call_cap.clone().try_acquire_owned().map_err(|_| {
            refused(Refusal::CallCap);
            ServiceError::Busy
        })?;
        let mut unsent = Some((request, exclusive, capped));
        // A live actor retired for passivation between lookup and entry is replaced by a fresh
        // activation; two retries are more than any real interleaving needs.
        for _ in 0..3 {
            let live = match found.take() {
                Some(live) => live,
                None => registry
                    .live_actor(webstore, id)
                    .await?
                    .ok_or(ServiceError::NotFound)?,
            };
            let permit = match live.enter(self.per_customer) {
                Ok(permit) => permit,
                Err(Refused::Busy) => {
                    refused(Refusal::CustomerBusy);
                    return Err(ServiceError::Busy);
                }
                Err(Refused::Retired) => {
                    registry.forget(id, &live);
                    continue;
                }
            };
            let Some((request, exclusive, capped)) = unsent.take() else {
                break;
            };
            let exclusive = exclusive.map(|held| Box::new(held) as Box<dyn Send>);
            let handoff = Arc::new(Handoff::new(exclusive));
            let withdraw = Withdraw(handoff.clone());
            let (reply, answer) = ractor::concurrency::oneshot();
            let message = CustomerMsg {
                request: request(reply.into()),
                handoff,
                permits: Box::new((capped, permit)),
            };
            if live.actor.send_message(message).is_err() {
                registry.forget(id, &live);
                return Err(stopped(id));
            }
            return self.answer(registry, id, &live, answer, withdraw).await;
        }
        Err(ServiceError::Busy)
    }

    async fn answer<T>(
        &self,
        registry: &Registry,
        id: CustomerId,
        live: &Arc<LiveActor>,
        mut answer: OneshotReceiver<T>,
        withdraw: Withdraw,
    ) -> Result<T, ServiceError> {
        let outcome = match tokio::time::timeout(self.deadline, &mut answer).await {
            Ok(outcome) => outcome,
            // Past the deadline: give up unless the actor has begun, in which case its
            // outcome stands and is the answer (the request's own deadline bounds the wait).
            Err(_) if withdraw.0.withdraw() => {
                refused(Refusal::CallDeadline);
                return Err(ServiceError::Busy);
            }
            Err(_) => answer.await,
        };
        outcome.map_err(|_| {
            // The reply port was dropped unanswered: the actor stopped.
            registry.forget(id, live);
            stopped(id)
        })
    }

    /// Calls holding a permit of the call cap, not yet done with (for tests and diagnostics).
    pub fn in_flight(&self) -> usize {
        self.call_cap_size - self.call_cap.available_permits()
    }
}

fn stopped(id: CustomerId) -> ServiceError {
    ServiceError::Internal(format!("the actor of customer {id} stopped"))
}
