//! One webstore's event numbering. Numbers are taken in the order writes are made, but
//! writes become durable in group commit's order, and a write may be given up; so the
//! sequencer keeps the numbers taken and not settled, and its **watermark** is the highest
//! number below which every event is settled. Readers (the feed, the deliveries) read only
//! up to the watermark: they never see an event that is not durable, and no event ever
//! appears below a position a reader has passed. A number whose write was refused or given
//! up is a gap; numbers are never given out twice by one process, and a process continues
//! after the highest number its store holds (a given-up event, which nobody saw, may then
//! have its number taken again).
//!
//! Must not touch: the store, what an event holds.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};

/// The numbers taken, and those not settled yet.
struct Numbers {
    next: u64,
    unsettled: BTreeSet<u64>,
}

/// A webstore's event numbering.
pub struct Sequencer {
    numbers: Mutex<Numbers>,
    /// Woken whenever the watermark moves (the webhooks' deliveries wait on it).
    moved: tokio::sync::Notify,
}

impl Sequencer {
    /// Numbering after `last`, the highest number the store holds (0 for none).
    pub fn after(last: u64) -> Sequencer {
        Sequencer {
            numbers: Mutex::new(Numbers {
                next: last + 1,
                unsettled: BTreeSet::new(),
            }),
            moved: tokio::sync::Notify::new(),
        }
    }

    fn numbers(&self) -> MutexGuard<'_, Numbers> {
        self.numbers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes the next number, unsettled until the returned guard is dropped.
    pub fn allocate(self: &Arc<Self>) -> InFlight {
        let mut numbers = self.numbers();
        let sequence = numbers.next;
        numbers.next += 1;
        numbers.unsettled.insert(sequence);
        InFlight {
            sequencer: self.clone(),
            sequence,
        }
    }

    /// The highest number below which every number taken is settled.
    pub fn watermark(&self) -> u64 {
        let numbers = self.numbers();
        match numbers.unsettled.first() {
            Some(lowest) => lowest - 1,
            None => numbers.next - 1,
        }
    }

    /// Completes once the watermark moves after this call (create it before reading the
    /// watermark, so that no move between the two is missed).
    pub fn moved(&self) -> tokio::sync::futures::Notified<'_> {
        self.moved.notified()
    }

    fn settle(&self, sequence: u64) {
        let moved = {
            let mut numbers = self.numbers();
            let lowest = numbers.unsettled.first().copied();
            numbers.unsettled.remove(&sequence);
            lowest == Some(sequence)
        };
        if moved {
            self.moved.notify_waiters();
        }
    }
}

/// A number taken for an event whose write is not settled yet: dropped once the write is
/// durable or given up.
pub struct InFlight {
    sequencer: Arc<Sequencer>,
    sequence: u64,
}

impl InFlight {
    /// The number.
    pub fn sequence(&self) -> u64 {
        self.sequence
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
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
        drop(six);
        assert_eq!(sequencer.watermark(), 4, "six is settled, five is not");
        drop(five);
        assert_eq!(sequencer.watermark(), 6);
    }

    #[tokio::test]
    async fn a_waiter_is_woken_when_the_watermark_moves_and_not_before() {
        let sequencer = Arc::new(Sequencer::after(0));
        let one = sequencer.allocate();
        let two = sequencer.allocate();
        let moved = sequencer.moved();
        tokio::pin!(moved);
        drop(two);
        let early = tokio::time::timeout(std::time::Duration::from_millis(20), &mut moved).await;
        assert!(early.is_err(), "woken while one is unsettled");
        drop(one);
        tokio::time::timeout(std::time::Duration::from_secs(5), moved)
            .await
            .expect("not woken when the watermark moved");
        assert_eq!(sequencer.watermark(), 2);
    }

    proptest! {
        /// Whatever order writes settle in, the watermark never goes back, never passes an
        /// unsettled number, and ends at the last number taken.
        #[test]
        fn the_watermark_only_moves_forward_over_settled_numbers(
            order in proptest::collection::vec(any::<prop::sample::Index>(), 1..40)
        ) {
            let sequencer = Arc::new(Sequencer::after(0));
            let mut open: Vec<InFlight> = (0..order.len()).map(|_| sequencer.allocate()).collect();
            let mut last = sequencer.watermark();
            for index in order {
                let taken = open.remove(index.index(open.len()));
                drop(taken);
                let now = sequencer.watermark();
                prop_assert!(now >= last);
                prop_assert!(open.iter().all(|left| left.sequence() > now));
                last = now;
                if open.is_empty() { break; }
            }
            drop(open);
            prop_assert_eq!(sequencer.watermark(), sequencer.numbers().next - 1);
        }
    }
}
