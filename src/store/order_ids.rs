//! Order ids, handed out in blocks reserved in the store. Orders are written with a single
//! record each and no id index, so the highest id in use can't be read back cheaply at
//! start; instead the store keeps the highest id ever *reserved*, raised one block ahead of
//! use. After a restart the sequence continues above it, leaving at most one block unused.
//!
//! The reservation is written before any id of its block goes out, and handed to the log
//! (`store::log`) ahead of the orders that use those ids: the log answers in order, so an
//! order that is acknowledged implies its reservation is durable too, and a replay brings
//! both back. Must not touch: anything but the reservation keys (`keys::order_ids_reserved`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::keys::order_ids_reserved;
use super::{Store, StoreError, Written};

/// Ids reserved per store write: one extra write per this many orders.
pub const BLOCK: u64 = 4096;

/// The order id sequence of a store.
pub struct OrderIds {
    store: Store,
    next: AtomicU64,
    reserved: AtomicU64,
    reserving: Mutex<()>,
}

impl OrderIds {
    /// Continues after `highest_reserved`, the store's reservation at start.
    pub fn continuing(store: Store, highest_reserved: u64) -> OrderIds {
        OrderIds {
            store,
            next: AtomicU64::new(highest_reserved + 1),
            reserved: AtomicU64::new(highest_reserved),
            reserving: Mutex::new(()),
        }
    }

    /// Takes the next id, first reserving a new block in the store when the id is past the
    /// last reservation. An id whose reservation failed is never used (a gap, not a reuse).
    pub fn take(&self) -> Result<u64, StoreError> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        if id <= self.reserved.load(Ordering::Acquire) {
            return Ok(id);
        }
        let _reserving = self
            .reserving
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if id > self.reserved.load(Ordering::Acquire) {
            let through = id.saturating_add(BLOCK);
            // Not waited for: group commit answers in order, so the reservation is on disk
            // before any order with an id of the block is acknowledged.
            let previous = self.reserved.load(Ordering::Acquire);
            drop(self.store.reserve_order_ids(previous, through)?);
            self.reserved.store(through, Ordering::Release);
        }
        Ok(id)
    }
}

impl Store {
    /// Records that order ids up to `through` may be in use (see the module),
    /// in place of the reservation up to `previous`. Each reservation is a key of its own
    /// and the highest counts, so that a crash that keeps this write in the snapshot but
    /// loses its log frame cannot have the replay of an older reservation lower it again.
    pub fn reserve_order_ids(&self, previous: u64, through: u64) -> Result<Written, StoreError> {
        let open = self.open_for_writes()?;
        let mut entry = open.entry();
        self.put(&mut entry, &order_ids_reserved(through), Vec::new())?;
        if previous < through {
            self.remove_key(&mut entry, &order_ids_reserved(previous))?;
        }
        open.commit(entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Durability;

    fn open(dir: &std::path::Path) -> Store {
        Store::open_for_test_with(dir, Durability::Unlogged)
    }

    #[test]
    fn ids_continue_above_every_reservation_after_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let ids = OrderIds::continuing(
            store.clone(),
            store.high_water(Default::default()).unwrap().order_id,
        );
        let taken: Vec<u64> = (0..BLOCK + 10).map(|_| ids.take().unwrap()).collect();
        assert_eq!(taken[0], 1);
        assert!(taken.windows(2).all(|pair| pair[1] == pair[0] + 1));
        store.close().unwrap();
        drop((ids, store));

        let store = open(dir.path());
        let reserved = store.high_water(Default::default()).unwrap().order_id;
        assert!(reserved >= BLOCK + 10, "reserved {reserved}");
        let ids = OrderIds::continuing(store.clone(), reserved);
        assert!(ids.take().unwrap() > *taken.last().unwrap());
    }
}
