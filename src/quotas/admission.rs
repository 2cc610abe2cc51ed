//! Fair admission: at most `slots` API requests are in service at once (handed to the
//! actors and the log); past that, requests wait in one queue per webstore, and each slot
//! that frees goes to the next webstore in turn (round robin over the webstores that have
//! requests waiting, first come first served within one). A webstore that floods the host
//! queues behind itself: another webstore's request waits for one slot to free, not for the
//! flood ahead of it.
//!
//! While a slot is free and nobody waits, admission is two atomic operations and no lock;
//! the queues (behind one mutex) are touched only while the host is saturated. A slot is a
//! guard: dropping it (answered, failed, or its request's future dropped at any await) passes
//! it to the next waiter or frees it, and a waiter whose future is dropped leaves nothing
//! held: a slot sent to it comes back through the slot's own `Drop`.
//!
//! Must not touch: quotas (they refuse before a request queues), the requests themselves.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

/// Which queue a request waits in: its webstore's index.
pub type Lane = u32;

/// The admission slots and the queues of those waiting for one.
pub struct Admission {
    slots: usize,
    in_service: AtomicUsize,
    /// Senders in the queues (some may belong to waiters that gave up).
    waiting: AtomicUsize,
    queues: Mutex<Queues>,
}

#[derive(Default)]
struct Queues {
    /// Lanes with someone waiting, in the order their turns come.
    turns: VecDeque<Lane>,
    /// Each lane's waiters, first come first; a lane that waited once keeps its (then empty)
    /// queue.
    lanes: HashMap<Lane, VecDeque<oneshot::Sender<Slot>>>,
}

/// One request's place in service; freed (or passed on) when dropped.
pub struct Slot {
    admission: Option<Arc<Admission>>,
}

/// How a request was admitted.
pub struct Admitted {
    /// Its slot.
    pub slot: Slot,
    /// Whether it had to wait for its turn.
    pub waited: bool,
}

impl Admission {
    /// Admission with `slots` requests in service at once (at least 1).
    pub fn new(slots: usize) -> Arc<Admission> {
        Arc::new(Admission {
            slots: slots.max(1),
            in_service: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            queues: Mutex::new(Queues::default()),
        })
    }

    /// Requests in service now.
    pub fn in_service(&self) -> usize {
        self.in_service.load(Ordering::SeqCst)
    }

    /// A slot for a request of `lane`: at once if one is free and nobody waits, else when
    /// `lane`'s turn comes. Dropping the future gives up the place in the queue.
    pub async fn admit(self: &Arc<Self>, lane: Lane) -> Admitted {
        if self.waiting.load(Ordering::SeqCst) == 0 && self.try_take() {
            return Admitted {
                slot: self.slot(),
                waited: false,
            };
        }
        let receiver = {
            let mut queues = self.lock();
            let (sender, receiver) = oneshot::channel();
            let Queues { turns, lanes } = &mut *queues;
            let lane_queue = lanes.entry(lane).or_default();
            if lane_queue.is_empty() {
                turns.push_back(lane);
            }
            lane_queue.push_back(sender);
            self.waiting.fetch_add(1, Ordering::SeqCst);
            // A slot may have freed between the first look and the push: hand out what is
            // free (to whoever's turn it is, which may be this request).
            self.dispatch(&mut queues);
            receiver
        };
        match receiver.await {
            Ok(slot) => Admitted { slot, waited: true },
            // The sender is dropped unsent only with the queues, that is never while an
            // `Arc` to them is held here; a fresh slot keeps the count right regardless.
            Err(_) => {
                self.in_service.fetch_add(1, Ordering::SeqCst);
                Admitted {
                    slot: self.slot(),
                    waited: true,
                }
            }
        }
    }

    fn slot(self: &Arc<Self>) -> Slot {
        crate::metrics::METRICS.admission_in_service.inc();
        Slot {
            admission: Some(self.clone()),
        }
    }

    /// Counts one more request in service if there is room.
    fn try_take(&self) -> bool {
        let mut current = self.in_service.load(Ordering::SeqCst);
        while current < self.slots {
            match self.in_service.compare_exchange_weak(
                current,
                current + 1,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => return true,
                Err(now) => current = now,
            }
        }
        false
    }

    fn lock(&self) -> MutexGuard<'_, Queues> {
        // The queues hold no invariant a panic elsewhere could break half-way.
        self.queues
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Hands free slots to waiters, one webstore's turn after another, while both last.
    fn dispatch(self: &Arc<Self>, queues: &mut Queues) {
        while self.waiting.load(Ordering::SeqCst) > 0 && self.try_take() {
            let Some(sender) = queues.next() else {
                // Counted waiters are always queued; give the slot back if not.
                self.in_service.fetch_sub(1, Ordering::SeqCst);
                return;
            };
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            crate::metrics::METRICS.admission_in_service.inc();
            let slot = Slot {
                admission: Some(self.clone()),
            };
            if let Err(mut unwanted) = sender.send(slot) {
                // Its waiter gave up: take the slot back without its `Drop` (which would
                // lock the queues again) and offer it to the next.
                unwanted.admission = None;
                crate::metrics::METRICS.admission_in_service.dec();
                self.in_service.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }

    fn release(self: &Arc<Self>) {
        crate::metrics::METRICS.admission_in_service.dec();
        self.in_service.fetch_sub(1, Ordering::SeqCst);
        // Seen after the decrement: either a waiter counted itself before it (and is served
        // here), or it counts itself after and finds the slot free when it looks under the
        // lock.
        if self.waiting.load(Ordering::SeqCst) > 0 {
            let mut queues = self.lock();
            self.dispatch(&mut queues);
        }
    }
}

impl Queues {
    /// The first waiter of the lane whose turn it is; the lane goes to the back of the turns
    /// if more of it wait.
    fn next(&mut self) -> Option<oneshot::Sender<Slot>> {
        let lane = self.turns.pop_front()?;
        let queue = self.lanes.get_mut(&lane)?;
        let sender = queue.pop_front();
        // An empty lane keeps its queue (and its capacity) for the next time it waits: lanes
        // are webstores of the catalogue, a bounded set.
        if !queue.is_empty() {
            self.turns.push_back(lane);
        }
        sender
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(admission) = self.admission.take() {
            admission.release();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn admitted_within(admission: &Arc<Admission>, lane: Lane, ms: u64) -> Option<Slot> {
        tokio::time::timeout(Duration::from_millis(ms), admission.admit(lane))
            .await
            .ok()
            .map(|admitted| admitted.slot)
    }

    #[tokio::test]
    async fn free_slots_admit_at_once_and_a_full_house_waits_for_a_release() {
        let admission = Admission::new(2);
        let a = admitted_within(&admission, 1, 100).await.unwrap();
        let _b = admitted_within(&admission, 1, 100).await.unwrap();
        assert_eq!(admission.in_service(), 2);
        assert!(admitted_within(&admission, 1, 50).await.is_none());
        let waiting = tokio::spawn({
            let admission = admission.clone();
            async move { admission.admit(2).await.waited }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(a);
        assert!(waiting.await.unwrap());
        // The slot went from `a` to the waiter, whose slot was dropped with its task.
        assert_eq!(admission.in_service(), 1);
    }

    #[tokio::test]
    async fn turns_go_round_the_webstores_that_wait() {
        let admission = Admission::new(1);
        let held = admitted_within(&admission, 0, 100).await.unwrap();
        let (order_tx, mut order_rx) = tokio::sync::mpsc::unbounded_channel();
        let mut tasks = Vec::new();
        // Webstore 1 queues five requests before webstore 2 queues one.
        for (i, lane) in [1, 1, 1, 1, 1, 2].into_iter().enumerate() {
            let admission = admission.clone();
            let order_tx = order_tx.clone();
            tasks.push(tokio::spawn(async move {
                let admitted = admission.admit(lane).await;
                order_tx.send((i, lane)).unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
                drop(admitted);
            }));
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(held);
        for task in tasks {
            task.await.unwrap();
        }
        let mut lanes = Vec::new();
        while let Ok((_, lane)) = order_rx.try_recv() {
            lanes.push(lane);
        }
        // Webstore 2's one request is served second, not after webstore 1's five.
        assert_eq!(lanes, vec![1, 2, 1, 1, 1, 1]);
        assert_eq!(admission.in_service(), 0);
    }

    #[tokio::test]
    async fn a_waiter_dropped_at_any_point_leaves_no_slot_held() {
        let admission = Admission::new(1);
        for round in 0..50u64 {
            let held = admitted_within(&admission, 0, 100).await.unwrap();
            let waiters: Vec<_> = (0..4)
                .map(|lane| {
                    let admission = admission.clone();
                    tokio::spawn(async move { admission.admit(lane).await })
                })
                .collect();
            tokio::time::sleep(Duration::from_millis(1)).await;
            // Release while the waiters are being cancelled, in an order that varies.
            if round % 2 == 0 {
                drop(held);
                waiters.iter().for_each(|w| w.abort());
            } else {
                waiters.iter().for_each(|w| w.abort());
                drop(held);
            }
            for waiter in waiters {
                let _ = waiter.await;
            }
            assert_eq!(admission.in_service(), 0, "round {round}");
        }
        // And the slots are all there to take.
        assert!(admitted_within(&admission, 9, 100).await.is_some());
    }
}
