//! The fair queue both shared pools of the host wait in (fair admission of requests,
//! `admission`, and the password hashers, `service::passwords`): waiters queued per *share*
//! (whose turn it is: a webstore, the app), served one share's turn after another (round
//! robin over the shares that have waiters), first come first served within a share. A
//! share's flood queues behind itself; another share's waiter waits for one waiter per busy
//! share at most.
//!
//! Plain data, behind its user's own lock; what a waiter is and when one may be served are
//! the user's. Must not touch: counts of what is in service, clocks, async.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

/// Waiters `W` per share `S`, and the order the shares' turns come in.
#[derive(Debug)]
pub struct FairQueue<S, W> {
    /// Shares with someone waiting, in the order their turns come.
    turns: VecDeque<S>,
    /// Each share's waiters, first come first. A share that waited once keeps its (then
    /// empty) queue and its capacity: the shares are a bounded set (the catalogue's
    /// webstores and the app).
    queues: HashMap<S, VecDeque<W>>,
}

impl<S, W> Default for FairQueue<S, W> {
    fn default() -> Self {
        FairQueue {
            turns: VecDeque::new(),
            queues: HashMap::new(),
        }
    }
}

impl<S: Copy + Eq + Hash, W> FairQueue<S, W> {
    /// Queues `waiter` last of `share`'s; `share` takes its turn after the others' if none of
    /// its waited.
    pub fn push(&mut self, share: S, waiter: W) {
        let queue = self.queues.entry(share).or_default();
        if queue.is_empty() {
            self.turns.push_back(share);
        }
        queue.push_back(waiter);
    }

    /// The first waiter of the first share in turn whose first waiter `may_go`, with its
    /// share; that share goes to the back of the turns if more of it wait. Shares passed
    /// over keep their place.
    pub fn next(&mut self, may_go: impl Fn(&W) -> bool) -> Option<(S, W)> {
        let position = self.turns.iter().position(|share| {
            self.queues
                .get(share)
                .and_then(VecDeque::front)
                .is_some_and(&may_go)
        })?;
        let share = self.turns.remove(position)?;
        let queue = self.queues.get_mut(&share)?;
        let waiter = queue.pop_front()?;
        if !queue.is_empty() {
            self.turns.push_back(share);
        }
        Some((share, waiter))
    }

    /// Takes `share`'s newest waiter out (its place given to another share).
    pub fn pop_newest(&mut self, share: S) -> Option<W> {
        let queue = self.queues.get_mut(&share)?;
        let waiter = queue.pop_back()?;
        if queue.is_empty() {
            self.turns.retain(|turn| *turn != share);
        }
        Some(waiter)
    }

    /// Takes out `share`'s waiters that `leaves` (a waiter that gave up).
    pub fn remove(&mut self, share: S, leaves: impl Fn(&W) -> bool) {
        if let Some(queue) = self.queues.get_mut(&share) {
            queue.retain(|waiter| !leaves(waiter));
            if queue.is_empty() {
                self.turns.retain(|turn| *turn != share);
            }
        }
    }

    /// How many of `share`'s wait.
    pub fn waiting(&self, share: S) -> usize {
        self.queues.get(&share).map_or(0, VecDeque::len)
    }

    /// Whether no one waits.
    pub fn is_empty(&self) -> bool {
        self.turns.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn shares_take_turns_and_each_is_served_in_order() {
        let mut queue = FairQueue::default();
        for n in 0..3 {
            queue.push('a', ('a', n));
        }
        queue.push('b', ('b', 0));
        queue.push('c', ('c', 0));
        queue.push('b', ('b', 1));
        let served: Vec<(char, i32)> =
            std::iter::from_fn(|| queue.next(|_| true).map(|(_, w)| w)).collect();
        assert_eq!(
            served,
            [('a', 0), ('b', 0), ('c', 0), ('a', 1), ('b', 1), ('a', 2)]
        );
        assert!(queue.is_empty());
    }

    #[test]
    fn a_share_passed_over_keeps_its_turn() {
        let mut queue = FairQueue::default();
        queue.push('a', 1);
        queue.push('b', 2);
        assert_eq!(queue.next(|waiter| *waiter != 1), Some(('b', 2)));
        assert_eq!(queue.next(|_| true), Some(('a', 1)));
        assert_eq!(queue.next(|_| true), None);
    }

    #[test]
    fn the_newest_and_the_leavers_are_taken_out() {
        let mut queue = FairQueue::default();
        for n in 0..3 {
            queue.push('a', n);
        }
        queue.push('b', 9);
        assert_eq!(queue.pop_newest('a'), Some(2));
        queue.remove('a', |waiter| *waiter == 0);
        assert_eq!(queue.waiting('a'), 1);
        queue.remove('b', |_| true);
        assert_eq!(queue.next(|_| true), Some(('a', 1)));
        assert!(queue.is_empty());
    }

    proptest! {
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

        /// Every waiter is served once, in its share's order; and a share is served twice
        /// in a row only if no other share that had waiters at the first of the two still
        /// has them at the second (its turn came first).
        #[test]
        fn every_waiter_is_served_once_in_turn(ops in prop::collection::vec((0u8..4, any::<bool>()), 1..200)) {
            let mut queue = FairQueue::default();
            let mut pushed: HashMap<u8, VecDeque<usize>> = HashMap::new();
            let mut last: Option<(u8, Vec<u8>)> = None;
            for (n, (share, push)) in ops.into_iter().enumerate() {
                if push {
                    queue.push(share, n);
                    pushed.entry(share).or_default().push_back(n);
                } else if let Some((served, waiter)) = queue.next(|_| true) {
                    prop_assert_eq!(pushed.get_mut(&served).and_then(VecDeque::pop_front), Some(waiter));
                    let still_waiting = |s: &u8| pushed.get(s).is_some_and(|q| !q.is_empty());
                    if let Some((previous, others)) = &last {
                        if *previous == served {
                            prop_assert!(!others.iter().any(still_waiting), "{} served again before {:?}", served, others);
                        }
                    }
                    let others = pushed.keys().copied().filter(|s| *s != served && still_waiting(s)).collect();
                    last = Some((served, others));
                } else {
                    prop_assert!(pushed.values().all(VecDeque::is_empty));
                }
                let waiting: usize = pushed.values().map(VecDeque::len).sum();
                prop_assert_eq!(waiting == 0, queue.is_empty());
                for (share, expected) in &pushed {
                    prop_assert_eq!(queue.waiting(*share), expected.len());
                }
            }
        }
    }
}
