//! One webstore's event numbering. Numbers are taken in the order writes are made, but
//! writes become durable in group commit's order, and a write may be refused or given up; so
//! the sequencer keeps the numbers taken and not settled, and its **watermark** is the
//! highest number below which every event is settled. Readers (the feed, the deliveries)
//! read only up to the watermark: they never see an event that is not durable, and no event
//! ever appears below a position a reader has passed.
//!
//! A number settles in one of two ways. Its write is durable ([`InFlight::durable`]), or its
//! write was refused before the store held any of it ([`IfRefused::refused`]): a gap, whose
//! number no reader can meet. A number whose in-flight mark is dropped otherwise was **given
//! up**: its write was made in this node's store but never made durable (the log failed; a
//! group's primary was deposed or its changelog did not acknowledge), so its event may be in
//! the local store and not in the group's. A given-up number never settles: the watermark
//! stays below it for as long as this numbering lives, so nothing past it is shown (the node
//! stops, or rebuilds its copy from the group and numbers afresh).
//!
//! So every number a reader was ever shown, on any node, is durable: held by the store that
//! numbers next (a single node's) or by the group, whose next primary holds every message
//! the group acknowledged before it takes over. A process continues after the highest
//! number its store holds or pruned, so no number shown is ever given to another event; the
//! numbers it may take again are gaps and given-up numbers, which no reader saw.
//!
//! Must not touch: the store, what an event holds.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};

/// The numbers taken, those not settled yet, and those given up.
struct Numbers {
    next: u64,
    unsettled: BTreeSet<u64>,
    /// Taken, written in the store, and neither made durable nor refused: the watermark
    /// stays below the lowest.
    given_up: BTreeSet<u64>,
}

impl Numbers {
    /// Just below the lowest number unsettled or given up; the last taken if there is none.
    fn watermark(&self) -> u64 {
        let lowest_unsettled = self.unsettled.first().copied().unwrap_or(u64::MAX);
        let lowest_given_up = self.given_up.first().copied().unwrap_or(u64::MAX);
        match lowest_unsettled.min(lowest_given_up) {
            u64::MAX => self.next - 1,
            lowest => lowest - 1,
        }
    }
}

/// A wait for the watermark to move, owned by its waiter ([`Sequencer::moved`]).
pub type Moved = tokio::sync::futures::OwnedNotified;

/// A webstore's event numbering.
pub struct Sequencer {
    numbers: Mutex<Numbers>,
    /// Woken whenever the watermark moves (the webhooks' senders wait on it).
    moved: Arc<tokio::sync::Notify>,
}

impl Sequencer {
    /// Numbering after `last`, the highest number the store holds (0 for none).
    pub fn after(last: u64) -> Sequencer {
        Sequencer {
            numbers: Mutex::new(Numbers {
                next: last + 1,
                unsettled: BTreeSet::new(),
                given_up: BTreeSet::new(),
            }),
            moved: Arc::new(tokio::sync::Notify::new()),
        }
    }

    fn numbers(&self) -> MutexGuard<'_, Numbers> {
        self.numbers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes the next number, unsettled until the returned mark says how its write ended.
    pub fn allocate(self: &Arc<Self>) -> InFlight {
        let mut numbers = self.numbers();
        let sequence = numbers.next;
        numbers.next += 1;
        numbers.unsettled.insert(sequence);
        InFlight {
            sequencer: self.clone(),
            sequence,
            settled: false,
        }
    }

    /// The highest number below which every number taken is settled: below the lowest
    /// number unsettled or given up.
    pub fn watermark(&self) -> u64 {
        self.numbers().watermark()
    }

    /// Whether a number was given up (the watermark is held below it for good).
    pub fn gave_up(&self) -> bool {
        !self.numbers().given_up.is_empty()
    }

    /// Completes once the watermark moves after this call (create it before reading the
    /// watermark, so that no move between the two is missed).
    pub fn moved(&self) -> Moved {
        self.moved.clone().notified_owned()
    }

    /// Settles `sequence` (its write is durable, or was refused before anything of it was
    /// stored), waking the readers if the watermark moved.
    fn settle(&self, sequence: u64) {
        let moved = {
            let mut numbers = self.numbers();
            let before = numbers.watermark();
            numbers.unsettled.remove(&sequence);
            numbers.given_up.remove(&sequence);
            numbers.watermark() != before
        };
        if moved {
            self.moved.notify_waiters();
        }
    }

    /// Gives `sequence` up: it stays below the watermark's reach.
    fn give_up(&self, sequence: u64) {
        let mut numbers = self.numbers();
        if numbers.unsettled.remove(&sequence) {
            numbers.given_up.insert(sequence);
        }
    }
}

/// A number taken for an event whose write is not settled yet. [`InFlight::durable`] settles
/// it once the write is durable; dropped otherwise, it gives the number up (see the module),
/// unless [`IfRefused::refused`] says afterwards that nothing of the write was stored.
pub struct InFlight {
    sequencer: Arc<Sequencer>,
    sequence: u64,
    settled: bool,
}

impl InFlight {
    /// The number.
    pub fn sequence(&self) -> u64 {
        self.sequence
    }

    /// The write is durable: the number is settled, and readers may read up to it.
    pub fn durable(mut self) {
        self.settled = true;
        self.sequencer.settle(self.sequence);
    }

    /// What to call if the store refuses the write before holding any of it, kept by the
    /// writer while the mark itself travels with the write (and is dropped if the store
    /// refuses it).
    pub fn if_refused(&self) -> IfRefused {
        IfRefused {
            sequencer: self.sequencer.clone(),
            sequence: self.sequence,
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if !self.settled {
            self.sequencer.give_up(self.sequence);
        }
    }
}

/// The writer's handle on a number whose write the store may refuse: see
/// [`InFlight::if_refused`]. Dropping it does nothing.
pub struct IfRefused {
    sequencer: Arc<Sequencer>,
    sequence: u64,
}

impl IfRefused {
    /// The store refused the write before holding any of it (`StoreError::wrote_nothing`):
    /// its number, given up when its mark was dropped, is a gap that no reader can meet, and
    /// settles.
    pub fn refused(self) {
        self.sequencer.settle(self.sequence);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_watermark_waits_for_the_lowest_unsettled_number() {
        let sequencer = Arc::new(Sequencer::after(4));
        assert_eq!(sequencer.watermark(), 4);
        let five = sequencer.allocate();
        let six = sequencer.allocate();
        assert_eq!((five.sequence(), six.sequence()), (5, 6));
        assert_eq!(sequencer.watermark(), 4);
        six.durable();
        assert_eq!(sequencer.watermark(), 4, "six is settled, five is not");
        five.durable();
        assert_eq!(sequencer.watermark(), 6);
    }

    #[test]
    fn a_number_given_up_holds_the_watermark_below_it_for_good() {
        let sequencer = Arc::new(Sequencer::after(0));
        let one = sequencer.allocate();
        let two = sequencer.allocate();
        let three = sequencer.allocate();
        one.durable();
        drop(two);
        three.durable();
        assert_eq!(
            sequencer.watermark(),
            1,
            "two's write was stored here and never made durable: nothing from it on is shown"
        );
        assert!(sequencer.gave_up());
        let four = sequencer.allocate();
        four.durable();
        assert_eq!(sequencer.watermark(), 1, "not even what comes later");
    }

    #[test]
    fn a_number_whose_write_was_refused_before_it_was_stored_is_a_gap() {
        let sequencer = Arc::new(Sequencer::after(0));
        let one = sequencer.allocate();
        let two = sequencer.allocate();
        let if_refused = one.if_refused();
        // The store drops the write's mark, then says it refused the write.
        drop(one);
        two.durable();
        assert_eq!(
            sequencer.watermark(),
            0,
            "given up until the refusal is known"
        );
        if_refused.refused();
        assert_eq!(sequencer.watermark(), 2);
        assert!(!sequencer.gave_up());
    }

    #[tokio::test]
    async fn a_waiter_is_woken_when_the_watermark_moves_and_not_before() {
        let sequencer = Arc::new(Sequencer::after(0));
        let one = sequencer.allocate();
        let two = sequencer.allocate();
        let moved = sequencer.moved();
        tokio::pin!(moved);
        two.durable();
        let early = tokio::time::timeout(std::time::Duration::from_millis(20), &mut moved).await;
        assert!(early.is_err(), "woken while one is unsettled");
        one.durable();
        tokio::time::timeout(std::time::Duration::from_secs(5), moved)
            .await
            .expect("not woken when the watermark moved");
        assert_eq!(sequencer.watermark(), 2);
    }

    /// How a write ended, for the property below.
    #[derive(Debug, Clone, Copy)]
    enum Ending {
        Durable,
        Refused,
        GivenUp,
    }

    fn ending() -> impl Strategy<Value = Ending> {
        prop_oneof![
            6 => Just(Ending::Durable),
            1 => Just(Ending::Refused),
            1 => Just(Ending::GivenUp),
        ]
    }

    proptest! {
        /// Whatever order writes end in, and however (durable, refused, given up), the
        /// watermark never goes back, never passes a number unsettled or given up, and ends
        /// at the last number taken unless one was given up, or just below the lowest given
        /// up.
        #[test]
        fn the_watermark_only_moves_forward_over_settled_numbers(
            order in proptest::collection::vec((any::<prop::sample::Index>(), ending()), 1..40)
        ) {
            let sequencer = Arc::new(Sequencer::after(0));
            let mut open: Vec<InFlight> = (0..order.len()).map(|_| sequencer.allocate()).collect();
            let mut given_up: Vec<u64> = Vec::new();
            let mut last = sequencer.watermark();
            for (index, how) in order {
                let taken = open.remove(index.index(open.len()));
                match how {
                    Ending::Durable => taken.durable(),
                    Ending::Refused => {
                        let if_refused = taken.if_refused();
                        drop(taken);
                        if_refused.refused();
                    }
                    Ending::GivenUp => {
                        given_up.push(taken.sequence());
                        drop(taken);
                    }
                }
                let now = sequencer.watermark();
                prop_assert!(now >= last);
                prop_assert!(open.iter().all(|left| left.sequence() > now));
                prop_assert!(given_up.iter().all(|&up| up > now));
                last = now;
                if open.is_empty() { break; }
            }
            for left in open {
                left.durable();
            }
            let expected = given_up
                .iter()
                .min()
                .map_or(sequencer.numbers().next - 1, |lowest| lowest - 1);
            prop_assert_eq!(sequencer.watermark(), expected);
        }
    }
}
