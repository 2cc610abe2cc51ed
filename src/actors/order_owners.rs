//! The order → customer index, in memory. Customer actors publish each order here once it
//! is durable, so a reader that finds an order through the index never sees one a crash
//! could still take back. Orders stored before the start are added by a background scan of
//! the store's order keys (one thread per core, each over a range of customers); until it
//! ends, a lookup of an order id from before the start waits for it rather than answer a
//! wrong 404.
//!
//! Order ids are handed out in sequence, so the index is a dense array of owners indexed by
//! order id, allocated a chunk at a time: 8 bytes an order, no hashing, and lock-free reads
//! and writes. Ids past its capacity (2^32) go to a map.
//!
//! Must not touch: the store's writes, actor state, HTTP.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use dashmap::DashMap;
use tokio::sync::watch;

use crate::domain::ids::{CustomerId, OrderId};
use crate::store::{Store, StoreError};

/// Where the scan of orders stored before the start is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Fill {
    Running,
    Done,
    Failed(String),
}

const CHUNK_BITS: u32 = 16;
const CHUNK_LEN: usize = 1 << CHUNK_BITS;
const CHUNKS: usize = 1 << 16;

/// Order id → customer id (0: none), dense.
struct Dense {
    chunks: Box<[OnceLock<Box<[AtomicU64]>>]>,
    /// Orders known, counted as they are added.
    len: AtomicU64,
}

impl Dense {
    fn new() -> Dense {
        Dense {
            chunks: (0..CHUNKS).map(|_| OnceLock::new()).collect(),
            len: AtomicU64::new(0),
        }
    }

    fn split(order: OrderId) -> Option<(usize, usize)> {
        let chunk = usize::try_from(order.0 >> CHUNK_BITS).ok()?;
        (chunk < CHUNKS).then_some((chunk, order.0 as usize & (CHUNK_LEN - 1)))
    }

    /// Whether `order` fits the array.
    fn holds(order: OrderId) -> bool {
        Dense::split(order).is_some()
    }

    fn get(&self, order: OrderId) -> Option<CustomerId> {
        let (chunk, at) = Dense::split(order)?;
        let owner = self.chunks[chunk].get()?[at].load(Ordering::Acquire);
        (owner != 0).then_some(CustomerId(owner))
    }

    fn set(&self, order: OrderId, owner: CustomerId) {
        let Some((chunk, at)) = Dense::split(order) else {
            return;
        };
        let slots =
            self.chunks[chunk].get_or_init(|| (0..CHUNK_LEN).map(|_| AtomicU64::new(0)).collect());
        if slots[at].swap(owner.0, Ordering::AcqRel) == 0 {
            self.len.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Order id → owning customer, for every durable order.
pub struct OrderOwners {
    dense: Dense,
    /// Orders whose ids are past the dense array.
    beyond: DashMap<OrderId, CustomerId>,
    /// Every order stored before the start has an id up to this.
    stored_before_start: u64,
    fill: watch::Sender<Fill>,
}

impl OrderOwners {
    /// An index whose orders up to `stored_before_start` are still to be filled in by
    /// [`OrderOwners::fill_from`].
    pub fn new(stored_before_start: u64) -> OrderOwners {
        let state = if stored_before_start == 0 {
            Fill::Done
        } else {
            Fill::Running
        };
        OrderOwners {
            dense: Dense::new(),
            beyond: DashMap::new(),
            stored_before_start,
            fill: watch::Sender::new(state),
        }
    }

    /// Adds every order stored before the start: those of the customers with ids up to
    /// `last_customer`, read from the store's order keys by one thread per core. Blocking:
    /// run it on a thread of its own. On failure, lookups of those orders fail too.
    pub fn fill_from(&self, store: &Store, last_customer: u64) -> Result<(), StoreError> {
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get()) as u64;
        let per_thread = last_customer / threads + 1;
        let outcome = std::thread::scope(|scope| {
            let scans: Vec<_> = (0..threads)
                .map(|part| {
                    let first = 1 + part * per_thread;
                    let end = (first + per_thread).min(last_customer + 1).max(first);
                    scope.spawn(move || {
                        store.for_each_order_owner(first..end, &mut |order, customer| {
                            self.publish(order, customer);
                        })
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
        outcome.map(drop)
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

    /// Records a durable order.
    pub fn publish(&self, order: OrderId, customer: CustomerId) {
        if Dense::holds(order) {
            self.dense.set(order, customer);
        } else {
            self.beyond.insert(order, customer);
        }
    }

    fn known(&self, order: OrderId) -> Option<CustomerId> {
        if Dense::holds(order) {
            self.dense.get(order)
        } else {
            self.beyond.get(&order).map(|owner| *owner)
        }
    }

    /// The customer owning a durable order, in any webstore.
    pub async fn owner(&self, order: OrderId) -> Result<Option<CustomerId>, StoreError> {
        if let Some(owner) = self.known(order) {
            return Ok(Some(owner));
        }
        if order.0 > self.stored_before_start {
            return Ok(None);
        }
        self.filled().await;
        match &*self.fill.borrow() {
            Fill::Failed(detail) => Err(StoreError::Engine {
                context: "indexing the stored orders".into(),
                detail: detail.clone(),
            }),
            _ => Ok(self.known(order)),
        }
    }

    /// Whether the orders stored before the start are all in (or failed to come in).
    pub fn is_complete(&self) -> bool {
        *self.fill.borrow() != Fill::Running
    }

    /// How many orders the index holds.
    pub fn len(&self) -> u64 {
        self.dense.len.load(Ordering::Relaxed) + self.beyond.len() as u64
    }

    /// Whether the index holds no order.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::disk::Reserve;
    use crate::store::StoreOptions;

    #[tokio::test]
    async fn lookups_of_orders_from_before_the_start_wait_for_the_fill() {
        let owners = std::sync::Arc::new(OrderOwners::new(10));
        owners.publish(OrderId(11), CustomerId(3));
        assert_eq!(
            owners.owner(OrderId(11)).await.unwrap(),
            Some(CustomerId(3))
        );
        assert_eq!(owners.owner(OrderId(12)).await.unwrap(), None);

        let waiting = tokio::spawn({
            let owners = owners.clone();
            async move { owners.owner(OrderId(5)).await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "answered before the fill ended");
        owners.publish(OrderId(5), CustomerId(2));
        owners.fill.send_replace(Fill::Done);
        let answer = tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(answer.unwrap(), Some(CustomerId(2)));
        assert_eq!(owners.owner(OrderId(6)).await.unwrap(), None);
    }

    #[test]
    fn owners_are_kept_across_chunks_and_past_the_dense_array() {
        let owners = OrderOwners::new(0);
        let far = OrderId((CHUNKS as u64) << CHUNK_BITS);
        for (order, customer) in [(1, 7), (CHUNK_LEN as u64, 8), (far.0 - 1, 9), (far.0, 10)] {
            owners.publish(OrderId(order), CustomerId(customer));
            assert_eq!(owners.known(OrderId(order)), Some(CustomerId(customer)));
        }
        assert_eq!(owners.known(OrderId(2)), None);
        assert_eq!(owners.known(OrderId(far.0 + 1)), None);
        owners.publish(OrderId(1), CustomerId(7));
        assert_eq!(owners.len(), 4);
    }

    #[test]
    fn the_fill_finds_every_stored_order_in_every_part() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(
            dir.path(),
            StoreOptions {
                durability: crate::store::Durability::Async,
                cache_bytes: 1 << 20,
                reserve: Reserve::Bytes(0),
            },
            std::sync::Arc::new(|_: &StoreError| {}),
        )
        .unwrap();
        let mut batch = crate::store::WriteBatch::default();
        for customer in 1..=9u64 {
            for n in 0..3 {
                let order = customer * 100 + n;
                batch.put(crate::store::keys::order(customer, order), vec![1]);
            }
        }
        store.apply(batch).unwrap();
        let owners = OrderOwners::new(999);
        owners.fill_from(&store, 9).unwrap();
        assert!(owners.is_complete());
        assert_eq!(owners.len(), 27);
        for customer in 1..=9u64 {
            assert_eq!(
                owners.known(OrderId(customer * 100 + 2)),
                Some(CustomerId(customer))
            );
        }
    }

    #[tokio::test]
    async fn a_failed_fill_is_an_error_for_old_orders_only() {
        let owners = OrderOwners::new(10);
        owners.fill.send_replace(Fill::Failed("disk".into()));
        assert!(owners.owner(OrderId(5)).await.is_err());
        assert_eq!(owners.owner(OrderId(50)).await.unwrap(), None);
    }
}
