//! Fair admission, work-conserving: a webstore alone on the host is never held back, and
//! while two or more webstores contend for it, at most `slots` requests are in service (handed
//! to the actors and the log); past that, requests wait in one queue per webstore, and each
//! slot that frees goes to the next webstore in turn (round robin over the webstores that have
//! requests waiting, first come first served within one: `fair_queue`). A webstore with fewer than its
//! fair part of the slots in service (half of them) is admitted at once even then, so that a
//! webstore sending a request now and then never waits for the flood of another to drain.
//!
//! Webstores *contend* from the moment requests of two different webstores are admitted one
//! after the other until [`Admission::new`]'s `window` has passed without that happening
//! again. The window outlasts the gaps between one cart's requests, so that a webstore
//! sending one order every few milliseconds beside a flood keeps the flood capped: without
//! it, the flood would fill the pipeline again between two of its requests, and each would
//! wait behind all of it.
//!
//! While one webstore alone sends, admission is a load and a compare of the last webstore
//! admitted, and two atomic additions; the queues (behind one mutex) are touched only while
//! webstores contend and the slots are taken. A slot is a guard: dropping it (answered,
//! failed, or its request's future dropped at any await) passes it to the next waiter or
//! frees it, and a waiter whose future is dropped leaves nothing held: a slot sent to it comes
//! back through the slot's own `Drop`.
//!
//! Must not touch: quotas (they refuse before a request queues), the requests themselves.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::fair_queue::FairQueue;

/// How long webstores count as contending after requests of two of them were admitted one
/// after the other.
pub const CONTENTION_WINDOW: Duration = Duration::from_secs(1);

/// One webstore's slot in admission: which queue its requests wait in, and how many of
/// them are in service.
#[derive(Debug)]
pub struct Share {
    id: u32,
    in_service: AtomicUsize,
}

impl Share {
    /// The share of the webstore numbered `id` (its index in the catalogue).
    pub fn new(id: u32) -> Arc<Share> {
        Arc::new(Share {
            id,
            in_service: AtomicUsize::new(0),
        })
    }

    /// This webstore's requests in service now.
    pub fn in_service(&self) -> usize {
        self.in_service.load(Ordering::SeqCst)
    }
}

/// The admission slots and the queues of those waiting for one.
pub struct Admission {
    slots: usize,
    window: Duration,
    /// When this admission began: times below are nanoseconds since.
    began: Instant,
    in_service: AtomicUsize,
    /// Senders in the queues (some may belong to waiters that gave up).
    waiting: AtomicUsize,
    /// The share of the last request admitted (`u32::MAX` before the first).
    last_share: AtomicU32,
    /// Until when webstores contend (nanoseconds since `began`; 0: they do not).
    contended_until: AtomicU64,
    queues: Mutex<Queues>,
}

/// The waiters, by webstore: each with its share (which a reloaded catalogue may have made
/// anew) and where its slot goes.
type Queues = FairQueue<u32, (Arc<Share>, oneshot::Sender<Slot>)>;

/// One request's slot in service; freed (or passed on) when dropped.
pub struct Slot {
    held: Option<(Arc<Admission>, Arc<Share>)>,
}

/// How a request was admitted.
pub struct Admitted {
    /// Its slot.
    pub slot: Slot,
    /// Whether it had to wait for its turn.
    pub waited: bool,
}

impl Admission {
    /// Admission that holds at most `slots` requests in service (at least 2) while
    /// webstores contend, counting them as contending for `window` after requests of two of
    /// them were admitted one after the other.
    pub fn new(slots: usize, window: Duration) -> Arc<Admission> {
        Arc::new(Admission {
            slots: slots.max(2),
            window,
            began: Instant::now(),
            in_service: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            last_share: AtomicU32::new(u32::MAX),
            contended_until: AtomicU64::new(0),
            queues: Mutex::new(FairQueue::default()),
        })
    }

    /// Requests in service now.
    pub fn in_service(&self) -> usize {
        self.in_service.load(Ordering::SeqCst)
    }

    /// Whether webstores contend for the host now.
    pub fn contended(&self) -> bool {
        let until = self.contended_until.load(Ordering::Relaxed);
        until != 0 && self.now() < until
    }

    /// A slot for a request of `share`: at once while `share` is alone on the host, the slots
    /// are not all taken, or it has fewer than its fair part in service; else when `share`'s turn
    /// comes. Dropping the future gives up the slot in the queue.
    pub async fn admit(self: &Arc<Self>, share: &Arc<Share>) -> Admitted {
        self.note(share.id);
        if self.waiting.load(Ordering::SeqCst) == 0 && self.may_enter(share) {
            return Admitted {
                slot: self.enter(share),
                waited: false,
            };
        }
        let receiver = {
            let mut queues = self.lock();
            let (sender, receiver) = oneshot::channel();
            queues.push(share.id, (share.clone(), sender));
            self.waiting.fetch_add(1, Ordering::SeqCst);
            // A slot may have freed between the first look and the push: hand out what is
            // free (to whoever's turn it is, which may be this request).
            self.dispatch(&mut queues);
            receiver
        };
        match receiver.await {
            Ok(slot) => Admitted { slot, waited: true },
            // The sender is dropped unsent only with the queues, that is never while an
            // `Arc` to them is held here; a fresh slot keeps the counts right regardless.
            Err(_) => Admitted {
                slot: self.enter(share),
                waited: true,
            },
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.began.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Notes that a request of `share` came: another webstore's request just before it
    /// starts (or prolongs) a contention. One load while the same webstore keeps coming.
    fn note(&self, share: u32) {
        if self.last_share.load(Ordering::Relaxed) == share {
            return;
        }
        let previous = self.last_share.swap(share, Ordering::Relaxed);
        if previous != share && previous != u32::MAX {
            let until = self
                .now()
                .saturating_add(u64::try_from(self.window.as_nanos()).unwrap_or(u64::MAX));
            self.contended_until.fetch_max(until, Ordering::Relaxed);
        }
    }

    /// A webstore's fair part of the slots while webstores contend.
    fn fair_share(&self) -> usize {
        self.slots / 2
    }

    /// Whether a request of `share` may be in service now.
    fn may_enter(&self, share: &Share) -> bool {
        !self.contended()
            || self.in_service.load(Ordering::SeqCst) < self.slots
            || share.in_service.load(Ordering::SeqCst) < self.fair_share()
    }

    /// Counts a request of `share` in service and hands it its slot.
    fn enter(self: &Arc<Self>, share: &Arc<Share>) -> Slot {
        self.in_service.fetch_add(1, Ordering::SeqCst);
        share.in_service.fetch_add(1, Ordering::SeqCst);
        Slot {
            held: Some((self.clone(), share.clone())),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queues> {
        // The queues hold no invariant a panic elsewhere could break half-way.
        self.queues
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Hands slots to waiters, one webstore's turn after another, while some may enter.
    fn dispatch(self: &Arc<Self>, queues: &mut Queues) {
        while self.waiting.load(Ordering::SeqCst) > 0 {
            let Some((_, (share, sender))) = queues.next(|(share, _)| self.may_enter(share)) else {
                return;
            };
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            if let Err(mut unwanted) = sender.send(self.enter(&share)) {
                // Its waiter gave up: take the slot back without its `Drop` (which would
                // lock the queues again) and offer it to the next.
                if let Some((_, share)) = unwanted.held.take() {
                    self.leave(&share);
                }
            }
        }
    }

    fn leave(&self, share: &Share) {
        share.in_service.fetch_sub(1, Ordering::SeqCst);
        self.in_service.fetch_sub(1, Ordering::SeqCst);
    }

    fn release(self: &Arc<Self>, share: &Share) {
        self.leave(share);
        // Seen after the decrement: either a waiter counted itself before it (and is served
        // here), or it counts itself after and finds the slot free when it looks under the
        // lock.
        if self.waiting.load(Ordering::SeqCst) > 0 {
            let mut queues = self.lock();
            self.dispatch(&mut queues);
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some((admission, share)) = self.held.take() {
            admission.release(&share);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Duration = Duration::from_millis(300);

    async fn admitted_within(
        admission: &Arc<Admission>,
        share: &Arc<Share>,
        ms: u64,
    ) -> Option<Slot> {
        tokio::time::timeout(Duration::from_millis(ms), admission.admit(share))
            .await
            .ok()
            .map(|admitted| admitted.slot)
    }

    /// Makes `a` and `b` contend: a request of each admitted one after the other.
    async fn contend(admission: &Arc<Admission>, a: &Arc<Share>, b: &Arc<Share>) {
        drop(admitted_within(admission, a, 100).await.unwrap());
        drop(admitted_within(admission, b, 100).await.unwrap());
        assert!(admission.contended());
    }

    #[tokio::test]
    async fn a_webstore_alone_is_never_held_back() {
        let admission = Admission::new(2, WINDOW);
        let share = Share::new(1);
        let mut slots = Vec::new();
        for _ in 0..100 {
            slots.push(
                admitted_within(&admission, &share, 100)
                    .await
                    .expect("held back"),
            );
        }
        assert!(!admission.contended());
        assert_eq!((admission.in_service(), share.in_service()), (100, 100));
        drop(slots);
        assert_eq!((admission.in_service(), share.in_service()), (0, 0));
    }

    #[tokio::test]
    async fn contending_webstores_wait_for_a_slot_past_the_slots_and_their_share() {
        let admission = Admission::new(4, WINDOW);
        let (a, b) = (Share::new(1), Share::new(2));
        contend(&admission, &a, &b).await;
        // A takes all four slots: the first two within its fair part, then while slots are free.
        let mut held: Vec<Slot> = Vec::new();
        for _ in 0..4 {
            held.push(admitted_within(&admission, &a, 100).await.unwrap());
        }
        assert!(
            admitted_within(&admission, &a, 50).await.is_none(),
            "A past the slots"
        );
        // B has nothing in service: under its fair part, it is admitted at once all the same.
        let b_first = admitted_within(&admission, &b, 100)
            .await
            .expect("B waited");
        assert_eq!(admission.in_service(), 5);
        // A's next waits for one of A's to finish.
        let waiting = tokio::spawn({
            let (admission, a) = (admission.clone(), a.clone());
            async move { admission.admit(&a).await.waited }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        drop(b_first);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            !waiting.is_finished(),
            "B's slot freed, but the slots are still all taken"
        );
        held.pop();
        assert!(waiting.await.unwrap());
        drop(held);
        assert_eq!(admission.in_service(), 0);
    }

    #[tokio::test]
    async fn the_waiters_go_in_when_the_contention_has_passed() {
        let admission = Admission::new(2, WINDOW);
        let (a, b) = (Share::new(1), Share::new(2));
        contend(&admission, &a, &b).await;
        let held: Vec<Slot> = vec![
            admitted_within(&admission, &a, 100).await.unwrap(),
            admitted_within(&admission, &a, 100).await.unwrap(),
        ];
        let waiters: Vec<_> = (0..5)
            .map(|_| {
                let (admission, a) = (admission.clone(), a.clone());
                tokio::spawn(async move { admission.admit(&a).await })
            })
            .collect();
        tokio::time::sleep(WINDOW + Duration::from_millis(50)).await;
        assert!(!admission.contended());
        // The next release finds no contention and lets every waiter in.
        drop(held);
        let mut slots = Vec::new();
        for waiter in waiters {
            slots.push(
                tokio::time::timeout(Duration::from_secs(1), waiter)
                    .await
                    .expect("still waiting")
                    .unwrap(),
            );
        }
        assert_eq!(admission.in_service(), 5);
        drop(slots);
        assert_eq!(admission.in_service(), 0);
    }

    #[tokio::test]
    async fn turns_go_round_the_webstores_that_wait() {
        let admission = Admission::new(2, Duration::from_secs(30));
        let (zero, one, two) = (Share::new(0), Share::new(1), Share::new(2));
        contend(&admission, &one, &zero).await;
        // Share 0 holds both slots (its fair part and one more).
        let held = vec![
            admitted_within(&admission, &zero, 100).await.unwrap(),
            admitted_within(&admission, &zero, 100).await.unwrap(),
        ];
        let one_held = admitted_within(&admission, &one, 100).await.unwrap();
        let two_held = admitted_within(&admission, &two, 100).await.unwrap();
        let (order_tx, mut order_rx) = tokio::sync::mpsc::unbounded_channel();
        let mut tasks = Vec::new();
        // Webstore 1 queues five requests before webstore 2 queues one (each already has its
        // share in service, so both wait).
        for (i, share) in [&one, &one, &one, &one, &one, &two].into_iter().enumerate() {
            let (admission, share, order_tx) = (admission.clone(), share.clone(), order_tx.clone());
            tasks.push(tokio::spawn(async move {
                let admitted = admission.admit(&share).await;
                order_tx.send((i, share.id)).unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
                drop(admitted);
            }));
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop((one_held, two_held));
        drop(held);
        for task in tasks {
            task.await.unwrap();
        }
        let mut shares = Vec::new();
        while let Ok((_, share)) = order_rx.try_recv() {
            shares.push(share);
        }
        // Webstore 2's one request is served second, not after webstore 1's five.
        assert_eq!(shares, vec![1, 2, 1, 1, 1, 1]);
        assert_eq!(admission.in_service(), 0);
    }

    #[tokio::test]
    async fn a_waiter_dropped_at_any_point_leaves_no_slot_held() {
        let admission = Admission::new(2, Duration::from_secs(30));
        let shares: Vec<Arc<Share>> = (0..5).map(Share::new).collect();
        contend(&admission, &shares[1], &shares[0]).await;
        for round in 0..50u64 {
            let held = vec![
                admitted_within(&admission, &shares[0], 100).await.unwrap(),
                admitted_within(&admission, &shares[0], 100).await.unwrap(),
            ];
            // Shares 1..4 get one each (under their fair part), then their next ones wait.
            let theirs: Vec<Slot> = futures_util::future::join_all(
                shares[1..]
                    .iter()
                    .map(|share| admitted_within(&admission, share, 100)),
            )
            .await
            .into_iter()
            .map(Option::unwrap)
            .collect();
            let waiters: Vec<_> = shares[1..]
                .iter()
                .map(|share| {
                    let (admission, share) = (admission.clone(), share.clone());
                    tokio::spawn(async move { admission.admit(&share).await })
                })
                .collect();
            tokio::time::sleep(Duration::from_millis(1)).await;
            // Release while the waiters are being cancelled, in an order that varies.
            if round % 2 == 0 {
                drop((held, theirs));
                waiters.iter().for_each(|w| w.abort());
            } else {
                waiters.iter().for_each(|w| w.abort());
                drop((held, theirs));
            }
            for waiter in waiters {
                let _ = waiter.await;
            }
            assert_eq!(admission.in_service(), 0, "round {round}");
            assert!(
                shares.iter().all(|share| share.in_service() == 0),
                "round {round}"
            );
        }
        // And the slots are all there to take.
        assert!(admitted_within(&admission, &shares[4], 100).await.is_some());
    }
}
