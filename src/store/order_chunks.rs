//! Orders packed into chunks: how new order records enter sled at a checkpoint, and how the
//! store reads a customer's orders back whichever way they were written.
//!
//! sled 0.34.7 splits a leaf once it holds more than 16 entries, whatever their size, and
//! each split rewrites the leaf and its parent into sled's log: with one entry per order,
//! every eighth order or so paid for a split, and the checkpoint's inserts cost about 4.5 µs
//! an order. A checkpoint now packs a customer's waiting orders into the customer's last
//! chunk (an `o` entry holding up to [`CHUNK_ORDERS`] orders, see
//! `codec::encode_order_chunk`), which replaces a value instead of adding an entry; a new
//! entry is made only when a chunk is full (docs/benchmarks.md, "2026-11-25: orders packed
//! into chunks").
//!
//! An `o` key is `o` + customer id + order id, holding that order's record (written by a
//! request before the checkpoint packs it, by a replay of the log, an import, or an earlier
//! release), or `o` + customer id + the id of the chunk's first order + 0, holding a chunk.
//! The last byte keeps the two apart: a chunk under the very key of a record that still
//! waits would be hidden by it, since a waiting put wins over the tree's value of its key.
//!
//! The same order can be read twice for a moment: a pass writes the chunk before it drops
//! the waiting record, and a replay after a crash may write a record a chunk already holds.
//! Every read therefore goes through [`for_each_stored_order`], which hands on each
//! customer's orders once, by id.
//!
//! Must not touch: when checkpoints run, how the engine keeps waiting puts, the order
//! records' own encoding.

use super::codec::{encode_order_chunk, order_parts, CodecError};
use super::error::corrupt;
use super::storage::{prefix_end, Entry, Packing, Storage};
use super::{keys, StoreError};

/// The most orders one chunk holds: about 2 KiB of value, small enough that rewriting a
/// customer's last chunk at each checkpoint stays cheap.
pub const CHUNK_ORDERS: usize = 32;

/// Length of an `o` key's customer prefix: `o` and the customer id.
const CUSTOMER_PREFIX_LEN: usize = 1 + 8;

/// Packs waiting order records into their customer's chunks (see the module's text).
#[derive(Debug, Default)]
pub struct OrderPacking;

impl Packing for OrderPacking {
    fn group_len(&self, key: &[u8]) -> Option<usize> {
        keys::order_ids(key).map(|_| CUSTOMER_PREFIX_LEN)
    }

    fn pack(
        &self,
        last: Option<(&[u8], &[u8])>,
        waiting: &[(&[u8], &[u8])],
    ) -> Result<Vec<Entry>, StoreError> {
        Ok(pack_orders(last, waiting))
    }
}

/// The entries that hold the `waiting` orders of one customer, each once, in id order: its
/// last chunk `last` rewritten with them while it has room, then new chunks under the key of
/// their first order. Orders `last` holds already are skipped. A `last` that is a lone
/// record, or does not read as a chunk, is left as it is (the census names an unreadable
/// one), and new chunks start after it.
fn pack_orders(last: Option<(&[u8], &[u8])>, waiting: &[(&[u8], &[u8])]) -> Vec<Entry> {
    let Some((customer, _)) = waiting.first().and_then(|(key, _)| keys::order_ids(key)) else {
        return Vec::new();
    };
    let last_chunk = last.and_then(|(key, value)| {
        let (_, first, true) = keys::order_or_chunk_ids(key)? else {
            return None;
        };
        Some((key, order_parts(first, value).ok()?))
    });
    let (mut parts, rewrite_key, known) = match last_chunk {
        Some((key, held)) if held.len() < CHUNK_ORDERS => (held, Some(key), Vec::new()),
        Some((_, full)) => (Vec::new(), None, full),
        None => (Vec::new(), None, Vec::new()),
    };
    let before = parts.len();
    for (key, value) in waiting {
        let Some((_, id)) = keys::order_ids(key) else {
            continue;
        };
        let held = |parts: &[(u64, &[u8])]| parts.iter().any(|(other, _)| *other == id);
        if !held(&known) && !held(&parts) {
            parts.push((id, value));
        }
    }
    if parts.len() == before {
        // Every waiting order is held already (a replay wrote what a chunk holds).
        return Vec::new();
    }
    parts.sort_by_key(|(id, _)| *id);
    parts
        .chunks(CHUNK_ORDERS)
        .enumerate()
        .map(|(nth, chunk)| {
            let key = match (nth, rewrite_key) {
                (0, Some(key)) => key.to_vec(),
                _ => keys::order_chunk(customer, chunk[0].0),
            };
            (key, encode_order_chunk(chunk.iter().copied()))
        })
        .collect()
}

/// One stored order as [`for_each_stored_order`] hands it on.
pub struct StoredOrder<'a> {
    /// The customer's id.
    pub customer: u64,
    /// The order's id.
    pub id: u64,
    /// The key it is stored under (for errors).
    pub key: &'a [u8],
    /// Its encoded record, or why the value under `key` does not read as orders (then `id`
    /// is the key's).
    pub record: Result<&'a [u8], CodecError>,
}

/// Calls `visit` with every order stored under `o` keys from `from` up to, not including,
/// `to`: a customer at a time, each order once, by id, until `visit` returns false.
pub fn for_each_stored_order(
    storage: &dyn Storage,
    from: &[u8],
    to: Option<&[u8]>,
    visit: &mut dyn FnMut(StoredOrder<'_>) -> bool,
) -> Result<(), StoreError> {
    let mut customer = CustomerOrders::default();
    let mut more = true;
    storage.for_each_between(from, to, &mut |key, value| {
        let Some((owner, key_id, _)) = keys::order_or_chunk_ids(key) else {
            return true;
        };

        if customer.id != Some(owner) {
            more = customer.hand_on(visit);
            customer.id = Some(owner);
        }
        if more {
            customer.add(key, key_id, value);
        }
        more
    })?;
    if more {
        customer.hand_on(visit);
    }
    Ok(())
}

/// The orders of one customer met so far in a walk, and the keys they were read under.
#[derive(Default)]
struct CustomerOrders {
    id: Option<u64>,
    keys: Vec<Vec<u8>>,
    orders: Vec<HeldOrder>,
}

/// An order met in a walk: its id, the index of its key, its record or why it is unreadable.
struct HeldOrder {
    id: u64,
    key: usize,
    record: Result<Vec<u8>, CodecError>,
}

impl CustomerOrders {
    fn add(&mut self, key: &[u8], key_id: u64, value: &[u8]) {
        let key_index = self.keys.len();
        self.keys.push(key.to_vec());
        match order_parts(key_id, value) {
            Ok(parts) => self
                .orders
                .extend(parts.into_iter().map(|(id, record)| HeldOrder {
                    id,
                    key: key_index,
                    record: Ok(record.to_vec()),
                })),
            Err(error) => self.orders.push(HeldOrder {
                id: key_id,
                key: key_index,
                record: Err(error),
            }),
        }
    }

    /// Hands on the customer's orders, each id once, and forgets them; whether to go on.
    fn hand_on(&mut self, visit: &mut dyn FnMut(StoredOrder<'_>) -> bool) -> bool {
        let Some(customer) = self.id else {
            return true;
        };
        // A stable sort keeps a readable copy before an unreadable value of the same id.
        self.orders
            .sort_by_key(|order| (order.id, order.record.is_err()));
        self.orders.dedup_by_key(|order| order.id);
        let mut more = true;
        for order in self.orders.drain(..) {
            if more {
                more = visit(StoredOrder {
                    customer,
                    id: order.id,
                    key: &self.keys[order.key],
                    record: order.record.as_deref().map_err(Clone::clone),
                });
            }
        }
        self.keys.clear();
        more
    }
}

/// The record of one order of `customer`, if stored: its own entry, or the chunk just
/// before where its own key would be (chunks hold ascending runs of ids), or else found by
/// walking the customer's orders.
pub fn stored_order(
    storage: &dyn Storage,
    customer: u64,
    order: u64,
) -> Result<Option<Vec<u8>>, StoreError> {
    let own_key = keys::order(customer, order);
    if let Some(record) = storage.get(&own_key)? {
        return Ok(Some(record));
    }
    let from = keys::orders_of(customer);
    let beyond = prefix_end(&own_key);
    if let Some((key, value)) = storage.last_between(&from, beyond.as_deref())? {
        if let Some((_, first, true)) = keys::order_or_chunk_ids(&key) {
            let parts = order_parts(first, &value).map_err(|source| corrupt(&key, source))?;
            if let Some((_, record)) = parts.iter().find(|(id, _)| *id == order) {
                return Ok(Some(record.to_vec()));
            }
        }
    }
    let to = prefix_end(&from);
    let mut found = None;
    for_each_stored_order(storage, &from, to.as_deref(), &mut |stored| {
        if stored.id != order {
            return true;
        }
        found = Some(
            stored
                .record
                .map(<[u8]>::to_vec)
                .map_err(|source| corrupt(stored.key, source)),
        );
        false
    })?;
    found.transpose()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use super::*;
    use crate::store::codec::{decode, encode, OrderRecord};
    use crate::store::SledStorage;

    fn record(customer: u64, id: u64) -> Vec<u8> {
        encode(&OrderRecord {
            id,
            customer_id: customer,
            box_id: 217,
            frequency: 1,
            extras_one_off: false,
            extras: Vec::new(),
            exclusions: Vec::new(),
            substitutions: Vec::new(),
            created_at: 0,
            start_day: 20_000,
            week_days: 2,
        })
    }

    fn waiting(customer: u64, ids: &[u64]) -> Vec<(Vec<u8>, Vec<u8>)> {
        ids.iter()
            .map(|id| (keys::order(customer, *id), record(customer, *id)))
            .collect()
    }

    fn pack(last: Option<&(Vec<u8>, Vec<u8>)>, puts: &[(Vec<u8>, Vec<u8>)]) -> Vec<Entry> {
        let puts: Vec<(&[u8], &[u8])> = puts.iter().map(|(k, v)| (&k[..], &v[..])).collect();
        pack_orders(last.map(|(k, v)| (&k[..], &v[..])), &puts)
    }

    /// (key, ids held) of packed entries.
    fn held(entries: &[Entry]) -> Vec<(Vec<u8>, Vec<u64>)> {
        entries
            .iter()
            .map(|(key, value)| {
                let (_, first, _) = keys::order_or_chunk_ids(key).unwrap();
                let ids = order_parts(first, value)
                    .unwrap()
                    .into_iter()
                    .map(|(id, record)| {
                        assert_eq!(decode::<OrderRecord>(record).unwrap().id, id);
                        id
                    })
                    .collect();
                (key.clone(), ids)
            })
            .collect()
    }

    #[test]
    fn a_customers_waiting_orders_fill_its_last_chunk_then_new_ones() {
        // Nothing stored: one chunk under the first order's key.
        let first = pack(None, &waiting(7, &[10, 11, 12]));
        assert_eq!(
            held(&first),
            vec![(keys::order_chunk(7, 10), vec![10, 11, 12])]
        );

        // Room left: the chunk is rewritten under its key; what overflows starts the next.
        let more: Vec<u64> = (13..13 + CHUNK_ORDERS as u64).collect();
        let next = pack(Some(&first[0]), &waiting(7, &more));
        let expected_first: Vec<u64> = (10..10 + CHUNK_ORDERS as u64).collect();
        assert_eq!(
            held(&next),
            vec![
                (keys::order_chunk(7, 10), expected_first),
                (keys::order_chunk(7, 42), vec![42, 43, 44])
            ]
        );

        // A full chunk is left as it is.
        let after_full = pack(Some(&next[0]), &waiting(7, &[50]));
        assert_eq!(
            held(&after_full),
            vec![(keys::order_chunk(7, 50), vec![50])]
        );

        // A lone record (an earlier release, an import, a replay) is left as it is.
        let lone = (keys::order(7, 5), record(7, 5));
        let packed = pack(Some(&lone), &waiting(7, &[60, 61]));
        assert_eq!(
            held(&packed),
            vec![(keys::order_chunk(7, 60), vec![60, 61])]
        );
    }

    #[test]
    fn orders_a_chunk_holds_already_are_not_packed_twice() {
        let stored = pack(None, &waiting(3, &[1, 2, 3]));
        assert!(pack(Some(&stored[0]), &waiting(3, &[2, 3])).is_empty());
        let packed = pack(Some(&stored[0]), &waiting(3, &[3, 4]));
        assert_eq!(
            held(&packed),
            vec![(keys::order_chunk(3, 1), vec![1, 2, 3, 4])]
        );

        let full: Vec<u64> = (100..100 + CHUNK_ORDERS as u64).collect();
        let stored = pack(None, &waiting(3, &full));
        assert!(pack(Some(&stored[0]), &waiting(3, &[100, 131])).is_empty());
    }

    #[test]
    fn an_unreadable_last_entry_is_left_alone() {
        let broken = (keys::order_chunk(4, 1), b"not a record".to_vec());
        let packed = pack(Some(&broken), &waiting(4, &[2, 3]));
        assert_eq!(held(&packed), vec![(keys::order_chunk(4, 2), vec![2, 3])]);
    }

    fn storage(dir: &std::path::Path) -> SledStorage {
        SledStorage::open(dir, 1 << 22)
            .unwrap()
            .with_packing(Arc::new(OrderPacking))
    }

    /// Every order of `customers` as the store reads them: (customer, id) in walk order,
    /// checking each record.
    fn read_all(storage: &dyn Storage) -> Vec<(u64, u64)> {
        let mut seen = Vec::new();
        for_each_stored_order(
            storage,
            &[keys::ORDER],
            Some(&[keys::ORDER + 1]),
            &mut |stored| {
                let decoded = decode::<OrderRecord>(stored.record.unwrap()).unwrap();
                assert_eq!(
                    (decoded.customer_id, decoded.id),
                    (stored.customer, stored.id)
                );
                seen.push((stored.customer, stored.id));
                true
            },
        )
        .unwrap();
        seen
    }

    #[test]
    fn every_order_is_read_once_before_during_and_after_packing() {
        let dir = tempfile::tempdir().unwrap();
        let storage = storage(dir.path());
        // An earlier release's lone record, then waiting orders of three customers.
        storage.put(&keys::order(2, 1), record(2, 1)).unwrap();
        let mut expected = vec![(2, 1)];
        let mut next_id = 2;
        for pass in 0..3 {
            for customer in [1u64, 2, 3] {
                for _ in 0..(customer * 15 + pass) {
                    storage
                        .put_deferred(&keys::order(customer, next_id), record(customer, next_id))
                        .unwrap();
                    expected.push((customer, next_id));
                    next_id += 1;
                }
            }
            expected.sort();
            assert_eq!(read_all(&storage), expected);
            storage.apply_deferred().unwrap();
            assert_eq!(storage.waiting_puts(), 0);
            assert_eq!(read_all(&storage), expected);
        }
        // Far fewer entries than orders.
        let mut entries = 0;
        storage
            .for_each(&[keys::ORDER], &mut |_, _| {
                entries += 1;
                true
            })
            .unwrap();
        assert!(entries * 8 < expected.len(), "{entries} entries");

        // A replay after a crash writes lone records a chunk holds already: still once.
        for (customer, id) in &expected[5..9] {
            storage
                .put(&keys::order(*customer, *id), record(*customer, *id))
                .unwrap();
        }
        assert_eq!(read_all(&storage), expected);
        let (customer, id) = expected[20];
        assert_eq!(
            stored_order(&storage, customer, id).unwrap(),
            Some(record(customer, id))
        );
        assert_eq!(stored_order(&storage, customer, 999_999).unwrap(), None);
        assert_eq!(stored_order(&storage, u64::MAX, 1).unwrap(), None);
    }

    #[test]
    fn a_reader_never_misses_nor_repeats_an_order_while_passes_pack_them() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Arc::new(storage(dir.path()));
        let done = Arc::new(AtomicBool::new(false));
        let packer = {
            let (storage, done) = (storage.clone(), done.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::SeqCst) {
                    storage.apply_deferred().unwrap();
                    std::thread::yield_now();
                }
            })
        };
        // Orders of 20 customers in turn; after each, the customer's orders read back whole.
        let mut per_customer = vec![Vec::new(); 20];
        for id in 1..=10_000u64 {
            let customer = id % 20;
            storage
                .put_deferred(&keys::order(customer, id), record(customer, id))
                .unwrap();
            per_customer[customer as usize].push(id);
            let from = keys::orders_of(customer);
            let to = keys::orders_of(customer + 1);
            let mut seen = Vec::new();
            for_each_stored_order(&*storage, &from, Some(&to), &mut |stored| {
                seen.push(stored.id);
                true
            })
            .unwrap();
            assert_eq!(seen, per_customer[customer as usize], "customer {customer}");
        }
        done.store(true, Ordering::SeqCst);
        packer.join().unwrap();
    }
}
