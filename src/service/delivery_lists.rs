//! Sorted delivery lists kept between pages. Sorting a date's deliveries takes a read of
//! every customer on it, so a producer paging through a list of n deliveries would pay
//! n log n for each of its n / per_page pages. A list sorted once is kept with the
//! generation of the webstore's delivery lists it was computed at, and serves every later
//! page while that generation stands (no new or changed order, no customer moved to another
//! delivery service or halted). The lists hold index entries only (40 bytes each) and the
//! date's withheld deliveries counted by reason: customers and orders are read for the page
//! itself. At most [`MAX_LISTS`] lists and [`MAX_ENTRIES`] entries are kept, the oldest
//! going first. Must not touch: the store, HTTP types.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use crate::domain::catalogue::WebstoreIdx;
use crate::domain::day::Day;
use crate::domain::order::history::WithheldCounts;
use crate::index::deliveries::Scheduled;

/// Lists kept at most.
pub const MAX_LISTS: usize = 16;
/// Entries kept at most over all lists (about 160 MiB); a longer list is not kept.
pub const MAX_ENTRIES: usize = 1 << 22;

/// Which list: a webstore's deliveries on a date, of one delivery service or all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListKey {
    /// The webstore.
    pub webstore: WebstoreIdx,
    /// The date.
    pub date: Day,
    /// The delivery service asked for, if any.
    pub delivery_service: Option<u64>,
}

/// A sorted list and the generation it is current at.
#[derive(Debug)]
pub struct SortedList {
    /// The generation of the webstore's lists when the entries were read.
    pub generation: u64,
    /// The entries in delivery order.
    pub entries: Vec<Scheduled>,
    /// The regular deliveries of the date left out of `entries`, by reason.
    pub withheld: WithheldCounts,
}

/// The kept lists, oldest first.
pub struct DeliveryLists {
    kept: Mutex<VecDeque<(ListKey, Arc<SortedList>)>>,
    max_lists: usize,
    max_entries: usize,
}

impl Default for DeliveryLists {
    fn default() -> Self {
        DeliveryLists::with_bounds(MAX_LISTS, MAX_ENTRIES)
    }
}

impl DeliveryLists {
    /// Keeps at most `max_lists` lists and `max_entries` entries.
    pub fn with_bounds(max_lists: usize, max_entries: usize) -> DeliveryLists {
        DeliveryLists {
            kept: Mutex::default(),
            max_lists,
            max_entries,
        }
    }

    /// The list kept for `key`, if it is current at `generation`.
    pub fn current(&self, key: ListKey, generation: u64) -> Option<Arc<SortedList>> {
        self.locked()
            .iter()
            .find(|(kept, list)| *kept == key && list.generation == generation)
            .map(|(_, list)| list.clone())
    }

    /// Keeps `list` for `key`, in place of any older one, within the bounds.
    pub fn keep(&self, key: ListKey, list: Arc<SortedList>) {
        if list.entries.len() > self.max_entries {
            return;
        }
        let mut kept = self.locked();
        kept.retain(|(other, _)| *other != key);
        kept.push_back((key, list));
        let mut entries: usize = kept.iter().map(|(_, list)| list.entries.len()).sum();
        while kept.len() > self.max_lists || entries > self.max_entries {
            let Some((_, oldest)) = kept.pop_front() else {
                break;
            };
            entries -= oldest.entries.len();
        }
    }

    /// Lists kept now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.locked().len()
    }

    fn locked(&self) -> std::sync::MutexGuard<'_, VecDeque<(ListKey, Arc<SortedList>)>> {
        // The lock guards no invariant a panic could break half-way.
        self.kept
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::day::WeekDays;
    use crate::domain::ids::{CustomerId, OrderId};
    use crate::domain::order::schedule::{Frequency, Schedule};

    fn key(webstore: u16, date: i32) -> ListKey {
        ListKey {
            webstore: WebstoreIdx(webstore.into()),
            date: Day(date),
            delivery_service: None,
        }
    }

    fn list(generation: u64, entries: usize) -> Arc<SortedList> {
        let entry = Scheduled {
            order: OrderId(1),
            customer: CustomerId(1),
            frequency: Frequency::Weekly,
            schedule: Schedule {
                start: Day(0),
                week_days: WeekDays::NONE.with(1),
            },
            from: Day(i32::MIN),
            until: None,
        };
        Arc::new(SortedList {
            generation,
            entries: vec![entry; entries],
            withheld: Default::default(),
        })
    }

    #[test]
    fn a_list_serves_only_its_own_key_at_its_own_generation() {
        let lists = DeliveryLists::default();
        lists.keep(key(0, 10), list(5, 3));
        assert!(lists.current(key(0, 10), 5).is_some());
        assert!(
            lists.current(key(0, 10), 6).is_none(),
            "the webstore changed"
        );
        assert!(lists.current(key(0, 11), 5).is_none(), "another date");
        assert!(lists.current(key(1, 10), 5).is_none(), "another webstore");
        let filtered = ListKey {
            delivery_service: Some(91),
            ..key(0, 10)
        };
        assert!(lists.current(filtered, 5).is_none(), "another filter");
        lists.keep(key(0, 10), list(6, 4));
        assert_eq!(lists.len(), 1, "a newer list replaces the older one");
        assert_eq!(lists.current(key(0, 10), 6).unwrap().entries.len(), 4);
    }

    #[test]
    fn the_oldest_lists_go_first_past_either_bound() {
        let lists = DeliveryLists::with_bounds(4, 100);
        for date in 0..7 {
            lists.keep(key(0, date), list(1, 1));
        }
        assert_eq!(lists.len(), 4);
        assert!(lists.current(key(0, 2), 1).is_none());
        assert!(lists.current(key(0, 3), 1).is_some());

        let lists = DeliveryLists::with_bounds(4, 100);
        lists.keep(key(0, 1), list(1, 50));
        lists.keep(key(0, 2), list(1, 50));
        lists.keep(key(0, 3), list(1, 1));
        assert!(
            lists.current(key(0, 1), 1).is_none(),
            "over the entry bound"
        );
        assert_eq!(lists.len(), 2);
        lists.keep(key(0, 4), list(1, 101));
        assert!(
            lists.current(key(0, 4), 1).is_none(),
            "too long to keep at all"
        );
        assert_eq!(lists.len(), 2);
    }
}
