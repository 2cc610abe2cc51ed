//! In-memory indexes of the stored orders, which spare every order extra writes to the
//! store: which customer owns an order ([`order_owners`]), which orders are delivered on a
//! date ([`deliveries`]), and which dates' lists are frozen ([`frozen`]).
//!
//! Each order is published here once it is durable (by group commit, with the work its
//! customer's actor handed over with the write), so a reader that finds an order through an
//! index never sees one a crash could still take back. Orders stored before
//! the start are added by one background scan of the store (one thread per core, each over a
//! range of customers); until it ends, a question about orders from before the start waits
//! for it rather than answer wrongly, and if it fails, such questions fail too.
//!
//! Must not touch: the store's writes, actor state, HTTP.

pub mod deliveries;
pub mod frozen;
pub mod order_owners;

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::watch;

use crate::domain::catalogue::WebstoreIdx;
use crate::domain::day::Day;
use crate::domain::ids::{CustomerId, OrderId};
use crate::domain::order::Order;
use crate::store::{Store, StoreError};

use deliveries::{DeliveryIndex, Lifecycles, Scheduled};
use order_owners::OrderOwners;

/// Where the scan of orders stored before the start is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Fill {
    Running,
    Done,
    Failed(String),
}

/// What a fill of the indexes found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Filled {
    /// Orders indexed.
    pub orders: u64,
    /// Orders whose record did not decode: their owner is known, their schedule is not.
    pub unreadable: u64,
}

/// The order indexes, as one.
pub struct Indexes {
    owners: OrderOwners,
    deliveries: DeliveryIndex,
    fill: watch::Sender<Fill>,
    /// Each webstore's frozen dates.
    pub frozen: frozen::FrozenDates,
}

impl Indexes {
    /// Empty indexes for a store that holds orders already (`stored_orders`: they are still
    /// to be filled in by [`Indexes::fill_from`]) or none. Order ids this host gives out
    /// start above `base`, which keeps them in the dense part of the owner index.
    pub fn new(stored_orders: bool, base: u64) -> Indexes {
        let state = if stored_orders {
            Fill::Running
        } else {
            Fill::Done
        };
        Indexes {
            owners: OrderOwners::with_base(base),
            deliveries: DeliveryIndex::default(),
            fill: watch::Sender::new(state),
            frozen: frozen::FrozenDates::default(),
        }
    }

    /// Records a durable order of a customer of `webstore`.
    pub fn publish(&self, webstore: WebstoreIdx, order: &Order) {
        self.owners.publish(order.id, order.customer_id);
        self.deliveries.publish(
            webstore,
            Scheduled {
                order: order.id,
                customer: order.customer_id,
                frequency: order.content().frequency,
                schedule: order.content().schedule,
                from: Day(i32::MIN),
                until: None,
            },
        );
    }

    /// Records a durable change of an order of a customer of `webstore`: its schedules in
    /// the delivery lists become the changed order's.
    pub fn order_changed(&self, webstore: WebstoreIdx, order: &Order) {
        self.deliveries.keep_lifecycles(order);
        self.deliveries
            .replace(webstore, order.id, &Scheduled::of(order));
    }

    /// The lifecycle versions of an order in the delivery lists, if it has some.
    pub fn order_lifecycles(&self, order: OrderId) -> Option<Lifecycles> {
        self.deliveries.lifecycles(order)
    }

    /// Marks the delivery lists of `webstore` as changed by a customer moving to another
    /// delivery service.
    pub fn customer_moved(&self, webstore: WebstoreIdx) {
        self.deliveries.touch(webstore);
    }

    /// The generation of the delivery lists of `webstore` (see [`DeliveryIndex`]).
    pub fn deliveries_generation(&self, webstore: WebstoreIdx) -> u64 {
        self.deliveries.generation(webstore)
    }

    /// Adds every order stored before the start: those of the customers with ids up to
    /// `last_customer`, read from the store by one thread per core. `webstore_of` places a
    /// customer's webstore id in the catalogue (`None`: a webstore it no longer has, whose
    /// orders are left out of the delivery lists). Blocking: run it on a thread of its own.
    pub fn fill_from(
        &self,
        store: &Store,
        last_customer: u64,
        webstore_of: &(dyn Fn(&str) -> Option<WebstoreIdx> + Sync),
    ) -> Result<Filled, StoreError> {
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get()) as u64;
        let per_thread = last_customer / threads + 1;
        let orders = AtomicU64::new(0);
        let unreadable = AtomicU64::new(0);
        let outcome = std::thread::scope(|scope| {
            let scans: Vec<_> = (0..threads)
                .map(|part| {
                    let first = 1 + part * per_thread;
                    let end = (first + per_thread).min(last_customer + 1).max(first);
                    let (orders, unreadable) = (&orders, &unreadable);
                    scope.spawn(move || {
                        self.fill_range(store, first..end, webstore_of, orders, unreadable)
                    })
                })
                .collect();
            scans
                .into_iter()
                .map(|scan| {
                    scan.join().unwrap_or_else(|_| {
                        Err(StoreError::Engine {
                            context: "indexing the stored orders".into(),
                            detail: "a scan thread panicked".into(),
                        })
                    })
                })
                .collect::<Result<Vec<()>, StoreError>>()
        });
        self.fill.send_replace(match &outcome {
            Ok(_) => Fill::Done,
            Err(error) => Fill::Failed(error.to_string()),
        });
        outcome.map(|_| Filled {
            orders: orders.into_inner(),
            unreadable: unreadable.into_inner(),
        })
    }

    /// Adds the stored orders of `customers` (of `webstore`, just imported or overwritten by
    /// a move's round into a running node) that are not indexed yet, and puts the schedules
    /// of those indexed already in place of the old (an order may have changed since); how
    /// many were not indexed yet.
    pub fn adopt(
        &self,
        store: &Store,
        webstore: WebstoreIdx,
        customers: &[CustomerId],
    ) -> Result<u64, StoreError> {
        let mut adopted = 0;
        for customer in customers {
            store.for_each_order_schedule(
                customer.0..customer.0 + 1,
                &mut |order, owner, stored| {
                    let known = self.owners.get(order).is_some();
                    if !known {
                        self.owners.publish(order, owner);
                        adopted += 1;
                    }
                    match stored {
                        Ok(stored) if known => {
                            self.deliveries.keep_lifecycles(&stored);
                            self.deliveries
                                .replace(webstore, order, &Scheduled::of(&stored));
                        }
                        Ok(stored) => {
                            self.deliveries.keep_lifecycles(&stored);
                            for entry in Scheduled::of(&stored) {
                                self.deliveries.publish(webstore, entry);
                            }
                        }
                        Err(_) => {}
                    }
                },
            )?;
        }
        self.deliveries.touch(webstore);
        Ok(adopted)
    }

    /// One scan thread's share: the customers in `range` and their orders.
    fn fill_range(
        &self,
        store: &Store,
        range: std::ops::Range<u64>,
        webstore_of: &(dyn Fn(&str) -> Option<WebstoreIdx> + Sync),
        orders: &AtomicU64,
        unreadable: &AtomicU64,
    ) -> Result<(), StoreError> {
        // The webstore of each customer in the range, in id order (ids may be sparse: other
        // hosts' ranges). Orders come in customer id order too, so one cursor walks both.
        let mut webstores: Vec<(CustomerId, Option<WebstoreIdx>)> = Vec::new();
        store.for_each_customer_webstore(range.clone(), &mut |customer, webstore_id| {
            webstores.push((customer, webstore_of(webstore_id)));
        })?;
        let mut cursor = 0;
        store.for_each_order_schedule(range, &mut |order, customer, stored| {
            self.owners.publish(order, customer);
            orders.fetch_add(1, Ordering::Relaxed);
            while webstores.get(cursor).is_some_and(|(id, _)| *id < customer) {
                cursor += 1;
            }
            let webstore = webstores
                .get(cursor)
                .filter(|(id, _)| *id == customer)
                .and_then(|(_, webstore)| *webstore);
            match (stored, webstore) {
                (Ok(stored), Some(webstore)) => {
                    self.deliveries.keep_lifecycles(&stored);
                    for entry in Scheduled::of(&stored) {
                        self.deliveries.publish(webstore, entry);
                    }
                }
                (Err(_), _) => {
                    unreadable.fetch_add(1, Ordering::Relaxed);
                }
                (Ok(_), None) => {}
            }
        })
    }

    /// Completes once the orders stored before the start are all in (or failed to come in).
    pub async fn filled(&self) {
        // The sender lives in `self`, so the wait can't end in a closed channel.
        let _ = self
            .fill
            .subscribe()
            .wait_for(|state| *state != Fill::Running)
            .await;
    }

    /// Waits for the fill and fails if it failed.
    async fn complete(&self) -> Result<(), StoreError> {
        self.filled().await;
        match &*self.fill.borrow() {
            Fill::Failed(detail) => Err(StoreError::Engine {
                context: "indexing the stored orders".into(),
                detail: detail.clone(),
            }),
            _ => Ok(()),
        }
    }

    /// Whether the orders stored before the start are all in (or failed to come in).
    pub fn is_complete(&self) -> bool {
        *self.fill.borrow() != Fill::Running
    }

    /// The customer owning a durable order, in any webstore. An order not indexed yet may
    /// be one stored before the start (any id: imported orders have ids of other ranges),
    /// so the answer waits for the fill then.
    pub async fn owner(&self, order: OrderId) -> Result<Option<CustomerId>, StoreError> {
        if let Some(owner) = self.owners.get(order) {
            return Ok(Some(owner));
        }
        self.complete().await?;
        Ok(self.owners.get(order))
    }

    /// The durable orders of `webstore` delivered on `date`, and the generation of the
    /// webstore's lists they were read at (read first, so that any change the entries miss
    /// moves it).
    pub async fn deliveries_on(
        &self,
        webstore: WebstoreIdx,
        date: Day,
    ) -> Result<(u64, Vec<Scheduled>), StoreError> {
        self.complete().await?;
        let generation = self.deliveries.generation(webstore);
        Ok((generation, self.deliveries.on(webstore, date)))
    }

    /// How many orders the owner index holds.
    pub fn orders(&self) -> u64 {
        self.owners.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::day::WeekDays;
    use crate::domain::order::content::OrderContent;
    use crate::store::disk::Reserve;
    use crate::store::{add_new_customer, add_order, StoreOptions, WriteBatch};

    fn order(id: u64, customer: u64, start: i32, day: u8) -> Order {
        OrderContent::weekly_for_test(217)
            .with_schedule(Day(start), WeekDays::only(day))
            .placed(id, customer, 0)
    }

    #[tokio::test]
    async fn questions_about_orders_from_before_the_start_wait_for_the_fill() {
        let indexes = std::sync::Arc::new(Indexes::new(true, 0));
        indexes.publish(WebstoreIdx(0), &order(11, 3, 0, 1));
        assert_eq!(
            indexes.owner(OrderId(11)).await.unwrap(),
            Some(CustomerId(3))
        );
        let waiting = tokio::spawn({
            let indexes = indexes.clone();
            async move { indexes.owner(OrderId(5)).await }
        });
        let listing = tokio::spawn({
            let indexes = indexes.clone();
            async move {
                indexes
                    .deliveries_on(WebstoreIdx(0), Day(7 * 1000 + 4))
                    .await
                    .map(|(_, due)| due)
            }
        });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "answered before the fill ended");
        assert!(!listing.is_finished(), "listed before the fill ended");
        indexes.publish(WebstoreIdx(0), &order(5, 2, 0, 1));
        indexes.fill.send_replace(Fill::Done);
        let answer = tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(answer.unwrap(), Some(CustomerId(2)));
        assert_eq!(indexes.owner(OrderId(12)).await.unwrap(), None);
        let listed = listing.await.unwrap().unwrap();
        assert_eq!(listed.len(), 2, "both Monday orders: {listed:?}");
    }

    #[tokio::test]
    async fn a_failed_fill_is_an_error_for_orders_not_published_since() {
        let indexes = Indexes::new(true, 0);
        indexes.publish(WebstoreIdx(0), &order(50, 2, 0, 1));
        indexes.fill.send_replace(Fill::Failed("disk".into()));
        assert!(indexes.owner(OrderId(5)).await.is_err());
        assert_eq!(
            indexes.owner(OrderId(50)).await.unwrap(),
            Some(CustomerId(2))
        );
        assert!(indexes.deliveries_on(WebstoreIdx(0), Day(1)).await.is_err());
    }

    #[test]
    fn the_fill_finds_every_stored_order_in_every_part_and_its_webstore() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(
            dir.path(),
            StoreOptions {
                durability: crate::store::Durability::Unlogged,
                cache_bytes: 1 << 20,
                reserve: Reserve::Bytes(0),
            },
            std::sync::Arc::new(|_: &StoreError| {}),
        )
        .unwrap();
        let mut batch = WriteBatch::default();
        for customer in 1..=9u64 {
            let webstore = if customer % 2 == 0 { "even" } else { "odd" };
            let record = crate::domain::customer::Customer {
                id: CustomerId(customer),
                webstore: WebstoreIdx(0),
                number: customer,
                first_name: "Ann".into(),
                last_name: None,
                email: crate::domain::email::Email::from_trusted(format!("{customer}@x.y")),
                delivery_service_id: 1,
                address: Default::default(),
                password_hash: None,
                halts: crate::domain::halts::Halts::none(),
                account: crate::domain::account::Account::opened(CustomerId(customer), 0),
            };
            add_new_customer(&mut batch, &record, webstore);
            for n in 0..3 {
                add_order(&mut batch, &order(customer * 100 + n, customer, 0, 1));
            }
        }
        batch.put(
            crate::store::pending::order_chunks::order_key(9, 999),
            b"not a record".to_vec(),
        );
        store.apply(batch).unwrap();

        let indexes = Indexes::new(true, 0);
        let webstore_of = |id: &str| match id {
            "odd" => Some(WebstoreIdx(0)),
            "even" => Some(WebstoreIdx(1)),
            _ => None,
        };
        let filled = indexes.fill_from(&store, 9, &webstore_of).unwrap();
        assert!(indexes.is_complete());
        assert_eq!(
            filled,
            Filled {
                orders: 28,
                unreadable: 1
            }
        );
        for customer in 1..=9u64 {
            assert_eq!(
                indexes.owners.get(OrderId(customer * 100 + 2)),
                Some(CustomerId(customer))
            );
        }
        // Day 4 is Monday 1970-01-05.
        assert_eq!(indexes.deliveries.on(WebstoreIdx(0), Day(4)).len(), 15);
        assert_eq!(indexes.deliveries.on(WebstoreIdx(1), Day(4)).len(), 12);
    }
}
