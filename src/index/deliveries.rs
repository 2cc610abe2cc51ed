//! The delivery index: per webstore and weekday, the orders that can be delivered on that
//! weekday, with what it takes to tell whether one is delivered on a given date (its start,
//! frequency and weekdays, and the dates its version is in force: 40 bytes an order and
//! weekday). A day's list then costs in proportion to that weekday's orders of that
//! webstore, not to every order of every webstore, and a change of an order in proportion
//! to a bucket of 4,096 order ids. Each webstore's lists also carry a generation, bumped
//! after every change that can move an entry of a day's list (a new order, a customer
//! moving to another delivery service), so that a list computed at one generation is known
//! to be current while the generation has not moved.
//!
//! An order with lifecycle versions (a pause, skipped dates, a cancellation) also has them
//! here, shared (`Arc`), so that a day's list can leave out what they withhold without
//! reading the order's record: the list's cost stays a function of that day's orders
//! whatever their histories hold (an order never paused, skipped or cancelled has none).
//!
//! Must not touch: the store, customers, HTTP.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use dashmap::DashMap;

use crate::domain::catalogue::WebstoreIdx;
use crate::domain::ids::{CustomerId, OrderId};
use crate::domain::order::content::OrderContent;
use crate::domain::order::history::LifecycleVersion;
use crate::domain::order::Order;

use crate::domain::day::Day;
use crate::domain::order::schedule::{Frequency, Schedule};

/// An order's schedule as the delivery index keeps it: one entry for an order never
/// changed, one for each content version of an order that changed (each in force from
/// `from` until `until`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scheduled {
    /// The order.
    pub order: OrderId,
    /// Its customer.
    pub customer: CustomerId,
    /// How often.
    pub frequency: Frequency,
    /// When.
    pub schedule: Schedule,
    /// The first date this schedule is in force.
    pub from: Day,
    /// The first date it is no more, if another follows.
    pub until: Option<Day>,
}

impl Scheduled {
    /// The entries of `order`: its schedule, or each of its versions'.
    pub fn of(order: &Order) -> Vec<Scheduled> {
        let entry = |content: &OrderContent, from: Day, until: Option<Day>| Scheduled {
            order: order.id,
            customer: order.customer_id,
            frequency: content.frequency,
            schedule: content.schedule,
            from,
            until,
        };
        if order.history.is_unchanged() {
            return vec![entry(order.content(), Day(i32::MIN), None)];
        }
        let versions = order.history.contents();
        versions
            .iter()
            .enumerate()
            .map(|(at, version)| {
                let until = versions.get(at + 1).map(|next| next.effective);
                entry(&version.content, version.effective, until)
            })
            .collect()
    }

    /// Whether its order has a history (pauses, skips, cancellation or later versions may
    /// withhold a date): an order never changed has one entry from the start of time.
    pub fn has_history(&self) -> bool {
        self.from != Day(i32::MIN)
    }

    /// Whether it delivers on `date` (before pauses, skips, cancellation and halts).
    pub fn occurs_on(&self, date: Day) -> bool {
        self.from <= date
            && self.until.is_none_or(|until| date < until)
            && self.schedule.occurs_on(self.frequency, date)
    }
}

/// Order ids per bucket of a weekday's list: a change of an order scans its bucket alone.
const BUCKET_IDS: u32 = 12;

/// One weekday's entries, in buckets of [`BUCKET_IDS`] bits of consecutive order ids (a
/// host gives its ids out densely, so buckets are full): replacing an order's entries costs
/// a pass over 4,096 ids at most, not over the webstore's orders, and the entries cost no
/// more memory than in one list.
#[derive(Default)]
struct DayEntries {
    buckets: BTreeMap<u64, Vec<Scheduled>>,
}

impl DayEntries {
    fn bucket(order: OrderId) -> u64 {
        order.0 >> BUCKET_IDS
    }

    fn push(&mut self, entry: Scheduled) {
        self.buckets
            .entry(DayEntries::bucket(entry.order))
            .or_default()
            .push(entry);
    }

    fn remove(&mut self, order: OrderId) {
        if let Some(bucket) = self.buckets.get_mut(&DayEntries::bucket(order)) {
            bucket.retain(|entry| entry.order != order);
        }
    }

    fn iter(&self) -> impl Iterator<Item = &Scheduled> {
        self.buckets.values().flatten()
    }

    fn len(&self) -> usize {
        self.buckets.values().map(Vec::len).sum()
    }
}

/// One webstore's orders by weekday, and its generation.
#[derive(Default)]
struct Week {
    days: [RwLock<DayEntries>; 7],
    generation: AtomicU64,
}

/// An order's lifecycle versions, as the index shares them.
pub type Lifecycles = Arc<[LifecycleVersion]>;

/// Orders by webstore and weekday, and the lifecycle versions of those that have some.
#[derive(Default)]
pub struct DeliveryIndex {
    webstores: DashMap<WebstoreIdx, Arc<Week>>,
    lifecycles: DashMap<OrderId, Lifecycles>,
}

impl DeliveryIndex {
    /// Keeps `order`'s lifecycle versions (or forgets them: an order without any). Call it
    /// before the entries that go with it are published or replaced, which moves the
    /// generation after both.
    pub fn keep_lifecycles(&self, order: &Order) {
        let versions = order.history.lifecycles();
        if versions.is_empty() {
            self.lifecycles.remove(&order.id);
        } else {
            self.lifecycles.insert(order.id, Arc::from(versions));
        }
    }

    /// The lifecycle versions of `order`, if it has some.
    pub fn lifecycles(&self, order: OrderId) -> Option<Lifecycles> {
        self.lifecycles.get(&order).map(|versions| versions.clone())
    }

    /// Adds an order of `webstore` under each of its weekdays.
    pub fn publish(&self, webstore: WebstoreIdx, scheduled: Scheduled) {
        let week = self.webstores.entry(webstore).or_default().clone();
        for day in scheduled.schedule.week_days.days() {
            week.days[usize::from(day)]
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push(scheduled);
        }
        // After the entry is in: a reader that saw the old generation recomputes.
        week.generation.fetch_add(1, Ordering::Release);
    }

    /// Puts `entries` (all of one order's, [`Scheduled::of`]) in place of that order's.
    /// Costs a pass over the order's bucket of each weekday (of 4,096 order ids).
    pub fn replace(&self, webstore: WebstoreIdx, order: OrderId, entries: &[Scheduled]) {
        let week = self.webstores.entry(webstore).or_default().clone();
        for (day, list) in week.days.iter().enumerate() {
            let mut list = list
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            list.remove(order);
            for entry in entries {
                if entry.schedule.week_days.contains(day as u8) {
                    list.push(*entry);
                }
            }
        }
        week.generation.fetch_add(1, Ordering::Release);
    }

    /// Marks the lists of `webstore` as changed by something other than a new order (a
    /// customer's delivery service, which orders and filters them). Call it once the change
    /// is visible to readers.
    pub fn touch(&self, webstore: WebstoreIdx) {
        let week = self.webstores.entry(webstore).or_default().clone();
        week.generation.fetch_add(1, Ordering::Release);
    }

    /// The generation of the lists of `webstore`: read it before computing a list, and the
    /// list is current for as long as the generation stays the same.
    pub fn generation(&self, webstore: WebstoreIdx) -> u64 {
        self.webstores
            .get(&webstore)
            .map_or(0, |week| week.generation.load(Ordering::Acquire))
    }

    /// The orders of `webstore` delivered on `date`, by bucket of ids, each in the order
    /// they were added.
    pub fn on(&self, webstore: WebstoreIdx, date: Day) -> Vec<Scheduled> {
        let Some(week) = self.webstores.get(&webstore).map(|week| week.clone()) else {
            return Vec::new();
        };
        let due = week.days[usize::from(date.weekday())]
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .iter()
            .filter(|entry| entry.occurs_on(date))
            .copied()
            .collect();
        due
    }

    /// Entries held, over every webstore and weekday.
    pub fn len(&self) -> usize {
        self.webstores
            .iter()
            .map(|week| {
                week.days
                    .iter()
                    .map(|day| day.read().map_or(0, |list| list.len()))
                    .sum::<usize>()
            })
            .sum()
    }

    /// Whether no entry is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::day::WeekDays;

    fn scheduled(order: u64, frequency: Frequency, start: i32, days: &[u8]) -> Scheduled {
        Scheduled {
            order: OrderId(order),
            customer: CustomerId(order * 10),
            frequency,
            schedule: Schedule {
                start: Day(start),
                week_days: days.iter().fold(WeekDays::NONE, |set, d| set.with(*d)),
            },
            from: Day(i32::MIN),
            until: None,
        }
    }

    #[test]
    fn a_date_finds_its_webstores_orders_of_that_weekday_only() {
        let index = DeliveryIndex::default();
        // Day 20_416 is Monday 2025-11-24.
        let monday = Day(20_416);
        assert_eq!(monday.weekday(), 1);
        index.publish(
            WebstoreIdx(0),
            scheduled(1, Frequency::Weekly, 20_400, &[1, 4]),
        );
        index.publish(
            WebstoreIdx(0),
            scheduled(2, Frequency::Single, 20_416, &[1]),
        );
        index.publish(
            WebstoreIdx(0),
            scheduled(3, Frequency::Fortnightly, 20_409, &[1]),
        );
        index.publish(
            WebstoreIdx(0),
            scheduled(4, Frequency::Weekly, 20_417, &[1]),
        );
        index.publish(
            WebstoreIdx(1),
            scheduled(5, Frequency::Weekly, 20_400, &[1]),
        );
        let orders = |date| -> Vec<u64> {
            index
                .on(WebstoreIdx(0), date)
                .iter()
                .map(|entry| entry.order.0)
                .collect()
        };
        assert_eq!(
            orders(monday),
            [1, 2],
            "3 is in its off week, 4 starts later"
        );
        assert_eq!(orders(monday.plus(7)), [1, 3, 4]);
        assert_eq!(orders(monday.plus(3)), [1], "Thursday");
        assert_eq!(index.len(), 6);
    }

    #[test]
    fn an_entry_is_40_bytes() {
        // What the index costs an order and weekday (the module's paragraph says it).
        assert_eq!(std::mem::size_of::<Scheduled>(), 40);
    }

    proptest::proptest! {
        /// Publishing and replacing orders (ids spread over several buckets) leaves each
        /// weekday's list holding exactly the latest entries of each order, as a plain list
        /// of every order's latest entries says.
        #[test]
        fn replacing_an_order_keeps_exactly_its_latest_entries(
            steps in proptest::collection::vec(
                (0u64..6, 0u64..3, proptest::collection::vec(0u8..7, 1..3), proptest::bool::ANY),
                1..60,
            )
        ) {
            let index = DeliveryIndex::default();
            let mut latest: BTreeMap<u64, Vec<Scheduled>> = BTreeMap::new();
            for (slot, spread, days, versions) in steps {
                // Ids 1..=6 in buckets 0, 1 and far beyond.
                let order = 1 + slot + spread * (1 << BUCKET_IDS) * 1000;
                let mut entries = vec![scheduled(order, Frequency::Weekly, 20_400, &days)];
                if versions {
                    entries[0].from = Day(20_400);
                    entries[0].until = Some(Day(20_500));
                    let mut next = scheduled(order, Frequency::Weekly, 20_500, &[days[0]]);
                    next.from = Day(20_500);
                    entries.push(next);
                }
                if latest.contains_key(&order) {
                    index.replace(WebstoreIdx(0), OrderId(order), &entries);
                } else {
                    for entry in &entries {
                        index.publish(WebstoreIdx(0), *entry);
                    }
                }
                latest.insert(order, entries);
            }
            for date in (0..14).map(|i| Day(20_416 + i)) {
                let mut listed: Vec<(u64, i32)> = index
                    .on(WebstoreIdx(0), date)
                    .iter()
                    .map(|entry| (entry.order.0, entry.from.0))
                    .collect();
                listed.sort_unstable();
                let expected: Vec<(u64, i32)> = latest
                    .values()
                    .flatten()
                    .filter(|entry| entry.occurs_on(date))
                    .map(|entry| (entry.order.0, entry.from.0))
                    .collect();
                proptest::prop_assert_eq!(listed, expected);
            }
            let held: usize = latest
                .values()
                .flatten()
                .map(|entry| entry.schedule.week_days.days().count())
                .sum();
            proptest::prop_assert_eq!(index.len(), held);
        }
    }

    #[test]
    fn the_generation_moves_after_every_change_of_a_webstore_only() {
        let index = DeliveryIndex::default();
        let before = index.generation(WebstoreIdx(0));
        index.publish(
            WebstoreIdx(0),
            scheduled(1, Frequency::Weekly, 20_400, &[1, 4]),
        );
        let published = index.generation(WebstoreIdx(0));
        assert_ne!(published, before);
        index.touch(WebstoreIdx(0));
        assert_ne!(index.generation(WebstoreIdx(0)), published);
        let other = index.generation(WebstoreIdx(0));
        index.publish(
            WebstoreIdx(1),
            scheduled(2, Frequency::Weekly, 20_400, &[1]),
        );
        index.touch(WebstoreIdx(1));
        assert_eq!(index.generation(WebstoreIdx(0)), other);
    }
}
