//! The order → customer index. Order ids are handed out in sequence, so the index is a dense
//! array of owners indexed by order id, allocated a chunk at a time: 8 bytes an order, no
//! hashing, and lock-free reads and writes. Ids past its capacity (2^32) go to a map.
//!
//! Must not touch: the store, actor state, HTTP.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use dashmap::DashMap;

use crate::domain::ids::{CustomerId, OrderId};

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
#[derive(Default)]
pub struct OrderOwners {
    dense: Dense,
    /// Orders whose ids are past the dense array.
    beyond: DashMap<OrderId, CustomerId>,
}

impl Default for Dense {
    fn default() -> Self {
        Dense::new()
    }
}

impl OrderOwners {
    /// Records an order's owner.
    pub fn publish(&self, order: OrderId, customer: CustomerId) {
        if Dense::holds(order) {
            self.dense.set(order, customer);
        } else {
            self.beyond.insert(order, customer);
        }
    }

    /// The owner of `order`, if the index holds it.
    pub fn get(&self, order: OrderId) -> Option<CustomerId> {
        if Dense::holds(order) {
            self.dense.get(order)
        } else {
            self.beyond.get(&order).map(|owner| *owner)
        }
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

    #[test]
    fn owners_are_kept_across_chunks_and_past_the_dense_array() {
        let owners = OrderOwners::default();
        let far = OrderId((CHUNKS as u64) << CHUNK_BITS);
        for (order, customer) in [(1, 7), (CHUNK_LEN as u64, 8), (far.0 - 1, 9), (far.0, 10)] {
            owners.publish(OrderId(order), CustomerId(customer));
            assert_eq!(owners.get(OrderId(order)), Some(CustomerId(customer)));
        }
        assert_eq!(owners.get(OrderId(2)), None);
        assert_eq!(owners.get(OrderId(far.0 + 1)), None);
        owners.publish(OrderId(1), CustomerId(7));
        assert_eq!(owners.len(), 4);
    }
}
