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
    /// Order id `base + n` is at position `n` of the dense array.
    base: u64,
    dense: Dense,
    /// Orders whose ids are outside the dense array (imported from another id range).
    beyond: DashMap<OrderId, CustomerId>,
}

impl Default for Dense {
    fn default() -> Self {
        Dense::new()
    }
}

impl OrderOwners {
    /// An empty index whose dense array starts above `base` (the ids of this host's range).
    pub fn with_base(base: u64) -> OrderOwners {
        OrderOwners {
            base,
            ..OrderOwners::default()
        }
    }

    /// The position of `order` in the dense array, if it has one.
    fn dense_position(&self, order: OrderId) -> Option<OrderId> {
        order
            .0
            .checked_sub(self.base)
            .map(OrderId)
            .filter(|position| Dense::holds(*position))
    }

    /// Records an order's owner.
    pub fn publish(&self, order: OrderId, customer: CustomerId) {
        match self.dense_position(order) {
            Some(position) => self.dense.set(position, customer),
            None => {
                self.beyond.insert(order, customer);
            }
        }
    }

    /// The owner of `order`, if the index holds it.
    pub fn get(&self, order: OrderId) -> Option<CustomerId> {
        match self.dense_position(order) {
            Some(position) => self.dense.get(position),
            None => self.beyond.get(&order).map(|owner| *owner),
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

    #[test]
    fn a_base_keeps_a_higher_id_range_dense() {
        let base = 5 << 40;
        let owners = OrderOwners::with_base(base);
        owners.publish(OrderId(base + 1), CustomerId(1));
        owners.publish(OrderId(3), CustomerId(2));
        assert_eq!(owners.get(OrderId(base + 1)), Some(CustomerId(1)));
        assert_eq!(owners.get(OrderId(3)), Some(CustomerId(2)));
        assert_eq!(
            owners.beyond.len(),
            1,
            "only the other range's order is in the map"
        );
    }
}
