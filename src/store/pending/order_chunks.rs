//! Orders packed into chunks: how a customer's order records are laid out in the snapshot,
//! how waiting orders enter it, and how the store reads them back.
//!
//! sled 0.34.7 splits a leaf once it holds more than 16 entries, whatever their size, and
//! each split rewrites the leaf and its parent into sled's log: with one entry per order,
//! every eighth order or so would pay for a split, and the checkpoint's inserts would cost
//! about 4.5 µs an order. In the snapshot a customer's orders therefore live in chunks: an
//! `o` entry holding up to [`CHUNK_ORDERS`] orders (see [`encode_order_chunk`]), under
//! `o` + customer id + the id of the chunk's first order + 0 (docs/benchmarks.md has the
//! figures).
//!
//! **Each order is stored once.** A customer's chunks hold ascending, disjoint runs of ids,
//! and a chunk's key names its first id: the chunk that holds an id, or must take it, is
//! the last one whose first id is at most that id. [`pack`] reads the customer's chunks
//! from that one on, merges the new orders in (an order a chunk holds already, as a replay
//! of the log brings back, changes nothing), cuts the result into chunks again, and checks
//! the invariant on what it is about to write before anything is written. An order's own
//! key (`o` + customer id + order id, no 0) is never in the snapshot: it is where a new
//! order's record waits in the pending layer until a pass packs it, and the trailing 0
//! keeps a chunk apart from it (a waiting put wins over the snapshot's value of its key).
//!
//! Reads merge the waiting records over the chunks, so for a moment (a pass writes a chunk
//! before it drops the records it packed) an order can be met twice: every walk goes
//! through [`for_each_stored_order`], which hands on each customer's orders once, by id.
//!
//! It owns the `o` keys' layout (an order's key, a chunk's key) and the chunks' format: the
//! packing needs them, and `store::kinds::orders` above it names them here (nothing is
//! re-exported).
//!
//! Must not touch: when passes run, how puts wait, the order records' own encoding.

use std::collections::BTreeMap;

use super::Storage;
use crate::store::codec::{chunk_parts, encode_chunk, CodecError, Kind};
use crate::store::error::{corrupt, StoreError};
use crate::store::keys::{self, trailing_id, with_id};
use crate::store::snapshot::{prefix_end, Entry, Snapshot};

/// The most orders one chunk holds: about 2 KiB of value, small enough that rewriting a
/// customer's last chunk at each checkpoint stays cheap.
pub const CHUNK_ORDERS: usize = 32;

/// Length of an `o` key's customer prefix: `o` and the customer id.
const CUSTOMER_PREFIX_LEN: usize = 1 + 8;

/// An order record, under its customer.
pub const ORDER: u8 = b'o';

/// `o` + customer id: the prefix of a customer's orders.
pub fn orders_of(customer: u64) -> Vec<u8> {
    with_id(ORDER, customer)
}

/// `o` + customer id + order id.
pub fn order_key(customer: u64, order: u64) -> Vec<u8> {
    let mut key = orders_of(customer);
    key.extend_from_slice(&order.to_be_bytes());
    key
}

/// `o` + customer id + the id of its first order + 0: a chunk of a customer's orders (see
/// `store::pending::order_chunks`). The last byte keeps the chunk's key apart from its first
/// order's own key, under which that order's record may still wait to be packed.
pub fn order_chunk(customer: u64, first_order: u64) -> Vec<u8> {
    let mut key = order_key(customer, first_order);
    key.push(0);
    key
}

/// The customer id and order id of an `o` key of one order (not of a chunk).
pub fn order_ids(key: &[u8]) -> Option<(u64, u64)> {
    match key {
        [ORDER, customer @ .., _, _, _, _, _, _, _, _] if customer.len() == 8 => {
            Some((trailing_id(customer)?, trailing_id(key)?))
        }
        _ => None,
    }
}

/// The customer id and order id of an `o` key of one order, or the customer id and first
/// order id of a chunk's key, with whether it is a chunk's.
pub fn order_or_chunk_ids(key: &[u8]) -> Option<(u64, u64, bool)> {
    match key.split_last() {
        Some((0, order_key)) if key.len() == 18 => {
            order_ids(order_key).map(|(customer, first)| (customer, first, true))
        }
        _ => order_ids(key).map(|(customer, order)| (customer, order, false)),
    }
}

/// The format version of order chunks.
const ORDER_CHUNK_VERSION: u16 = 1;

/// Orders of one customer as one value: a header of kind [`Kind::OrderChunk`] whose payload
/// is, for each order, its id (u64, big-endian), the length of its encoded `OrderRecord`
/// (u32, big-endian) and that record as `codec::encode` wrote it, header included. The records are
/// carried as they are, so packing orders costs no decoding and each keeps its own format
/// version and checksum.
pub fn encode_order_chunk<'a>(parts: impl IntoIterator<Item = (u64, &'a [u8])>) -> Vec<u8> {
    encode_chunk(Kind::OrderChunk, ORDER_CHUNK_VERSION, parts)
}

/// The orders a stored order value holds, as (id, encoded `OrderRecord`) in the order
/// stored: the record itself, under the id `key_id` of its key, or each part of an order
/// chunk. The parts' records are not decoded here.
pub fn order_parts(key_id: u64, bytes: &[u8]) -> Result<Vec<(u64, &[u8])>, CodecError> {
    chunk_parts(
        key_id,
        bytes,
        Kind::Order,
        Kind::OrderChunk,
        ORDER_CHUNK_VERSION,
    )
}

/// For a waiting put: the length of its group prefix (`o` + customer id) if it is an
/// order's record, which a pass packs with the customer's other orders.
pub fn customer_group_len(key: &[u8]) -> Option<usize> {
    order_ids(key).map(|_| CUSTOMER_PREFIX_LEN)
}

/// [`customer_group_len`] as the prefix itself.
pub fn customer_group(key: &[u8]) -> Option<&[u8]> {
    customer_group_len(key).map(|len| &key[..len])
}

/// What packing writes to the snapshot: chunks to put, then keys to remove.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Packed {
    /// Chunks to put (new or rewritten), in key order.
    pub written: Vec<Entry>,
    /// Chunk keys that no longer hold anything (their orders moved to another chunk).
    pub removed: Vec<Vec<u8>>,
}

/// Reads the chunks (key and value) of the customer `prefix` (`o` + customer id) from the
/// one that covers `from_id` (or from the first, if none does) to the last: for new orders,
/// the last chunk alone.
fn held_from(
    snapshot: &dyn Snapshot,
    prefix: &[u8],
    customer: u64,
    from_id: u64,
) -> Result<Vec<Entry>, StoreError> {
    let end = prefix_end(prefix);
    // New orders come after every order held: the customer's last chunk covers them, and
    // one read finds it.
    if let Some((key, value)) = snapshot.last_between(prefix, end.as_deref())? {
        if let Some((_, first, true)) = order_or_chunk_ids(&key) {
            if first <= from_id {
                return Ok(vec![(key, value)]);
            }
        }
    }
    let beyond = prefix_end(&order_key(customer, from_id));
    let start = snapshot
        .last_between(prefix, beyond.as_deref())?
        .map_or_else(|| prefix.to_vec(), |(key, _)| key);
    let mut held = Vec::new();
    let mut failed = None;
    snapshot.for_each_between(&start, end.as_deref(), &mut |key, value| {
        if order_or_chunk_ids(key).is_some_and(|(_, _, chunk)| chunk) {
            held.push((key.to_vec(), value.to_vec()));
            return true;
        }
        failed = Some(StoreError::Engine {
            context: "packing orders".into(),
            detail: format!(
                "{} is under a customer's orders but is no chunk (an order's own key never \
                 reaches the snapshot)",
                String::from_utf8_lossy(key).escape_debug()
            ),
        });
        false
    })?;
    match failed {
        Some(error) => Err(error),
        None => Ok(held),
    }
}

/// What a rewrite of a customer's chunks does to its orders.
enum Change<'a> {
    /// Orders to hold, each id with its encoded record.
    Put(Vec<(u64, &'a [u8])>),
    /// An order to hold no more.
    Remove(u64),
}

/// Packs `run`, the waiting order records of the customer `prefix` (`o` + customer id), in
/// key order, into that customer's chunks: what to write so that the snapshot holds each of
/// its orders once. Orders a chunk holds already with the same record are left alone, so
/// a replay of the log writes nothing twice.
pub fn pack(
    snapshot: &dyn Snapshot,
    prefix: &[u8],
    run: &[(&[u8], &[u8])],
) -> Result<Packed, StoreError> {
    let puts = run
        .iter()
        .filter_map(|(key, value)| order_ids(key).map(|(_, id)| (id, *value)))
        .collect();
    rewrite(snapshot, prefix, Change::Put(puts))
}

/// What to write so that the customer `prefix` no longer holds order `id` (an import taken
/// back); nothing if no chunk holds it.
pub fn unpack(snapshot: &dyn Snapshot, prefix: &[u8], id: u64) -> Result<Packed, StoreError> {
    rewrite(snapshot, prefix, Change::Remove(id))
}

/// Reads the customer's chunks from the one covering the least id `change` touches on,
/// applies `change` to their orders, and cuts the result into chunks again: the chunks that
/// differ are written, the keys left empty removed. Records are moved as the bytes they are,
/// borrowed from the chunks read and the puts, never decoded.
fn rewrite(
    snapshot: &dyn Snapshot,
    prefix: &[u8],
    change: Change<'_>,
) -> Result<Packed, StoreError> {
    let min_id = match &change {
        Change::Put(puts) => puts.iter().map(|(id, _)| *id).min(),
        Change::Remove(id) => Some(*id),
    };
    let (Some(customer), Some(min_id)) = (keys::trailing_id(prefix), min_id) else {
        return Ok(Packed::default());
    };
    let raw = held_from(snapshot, prefix, customer, min_id)?;
    let mut held_chunks = Vec::with_capacity(raw.len());
    let mut orders: BTreeMap<u64, &[u8]> = BTreeMap::new();
    for (key, value) in &raw {
        let first = order_or_chunk_ids(key).map_or(0, |(_, first, _)| first);
        let parts = order_parts(first, value).map_err(|source| corrupt(key, source))?;
        held_chunks.push((key, parts.iter().map(|(id, _)| *id).collect::<Vec<u64>>()));
        orders.extend(parts);
    }
    let mut changed = Vec::new();
    match change {
        Change::Put(puts) => {
            for (id, record) in puts {
                if orders.get(&id) != Some(&record) {
                    orders.insert(id, record);
                    changed.push(id);
                }
            }
        }
        Change::Remove(id) => changed.extend(orders.remove(&id).map(|_| id)),
    }
    if changed.is_empty() {
        return Ok(Packed::default());
    }
    let orders: Vec<(u64, &[u8])> = orders.into_iter().collect();
    let mut packed = Packed::default();
    let mut new_chunks = Vec::new();
    for chunk in orders.chunks(CHUNK_ORDERS) {
        let key = order_chunk(customer, chunk[0].0);
        let ids: Vec<u64> = chunk.iter().map(|(id, _)| *id).collect();
        let unchanged = held_chunks
            .iter()
            .any(|(old_key, old_ids)| **old_key == key && *old_ids == ids)
            && !ids.iter().any(|id| changed.contains(id));
        if !unchanged {
            packed
                .written
                .push((key.clone(), encode_order_chunk(chunk.iter().copied())));
        }
        new_chunks.push((key, ids));
    }
    packed.removed = held_chunks
        .iter()
        .map(|(key, _)| *key)
        .filter(|key| !new_chunks.iter().any(|(new, _)| new == *key))
        .cloned()
        .collect();
    check_each_order_once(customer, &new_chunks)?;
    Ok(packed)
}

/// The invariant every write of chunks keeps, checked on the chunks a pass is about to
/// write (with the ones it leaves as they are after them): ids ascending within and across
/// chunks, so no id is held twice; each chunk's key naming its first id; none over
/// [`CHUNK_ORDERS`]. A pass that would break it writes nothing and fails, which stops the
/// process (the checkpoint's failures are fatal) rather than store an order twice.
fn check_each_order_once(customer: u64, chunks: &[(Vec<u8>, Vec<u64>)]) -> Result<(), StoreError> {
    let mut last = None;
    for (key, ids) in chunks {
        let broken = |why: &str| StoreError::Engine {
            context: "packing orders".into(),
            detail: format!(
                "chunk {} of customer {customer}: {why}",
                String::from_utf8_lossy(key).escape_debug()
            ),
        };
        if ids.is_empty() || ids.len() > CHUNK_ORDERS {
            return Err(broken("holds no order or too many"));
        }
        if *key != order_chunk(customer, ids[0]) {
            return Err(broken("its key does not name its first order"));
        }
        for id in ids {
            if last.is_some_and(|last| *id <= last) {
                return Err(broken(&format!("order {id} is held twice or out of order")));
            }
            last = Some(*id);
        }
    }
    Ok(())
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
        let Some((owner, key_id, _)) = order_or_chunk_ids(key) else {
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

/// The record of one order of `customer`, if stored: its own waiting record, else the chunk
/// that begins with it (a point read: the first order of each chunk, which is every order
/// of a customer with one), else the chunk that covers its id (the last whose first id is
/// at most it: a backward step of the store's range, which copies a node of the store),
/// else (when a waiting record of another order sits in between) found by walking the
/// customer's orders.
pub fn stored_order(
    storage: &dyn Storage,
    customer: u64,
    order: u64,
) -> Result<Option<Vec<u8>>, StoreError> {
    let own_key = order_key(customer, order);
    if let Some(record) = storage.get(&own_key)? {
        return Ok(Some(record));
    }
    let own_chunk = order_chunk(customer, order);
    if let Some(value) = storage.get(&own_chunk)? {
        let parts = order_parts(order, &value).map_err(|source| corrupt(&own_chunk, source))?;
        if let Some((_, record)) = parts.into_iter().find(|(id, _)| *id == order) {
            return Ok(Some(record.to_vec()));
        }
    }
    let from = orders_of(customer);
    let beyond = prefix_end(&own_key);
    if let Some((key, value)) = storage.last_between(&from, beyond.as_deref())? {
        if let Some((_, first, true)) = order_or_chunk_ids(&key) {
            let parts = order_parts(first, &value).map_err(|source| corrupt(&key, source))?;
            return Ok(parts
                .into_iter()
                .find(|(id, _)| *id == order)
                .map(|(_, record)| record.to_vec()));
        }
    }
    // Another order's record still waits between the covering chunk and this id's place:
    // walk the customer's orders.
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
    use std::collections::BTreeSet;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use proptest::prelude::*;

    use super::*;
    use crate::store::codec::{decode, encode};
    use crate::store::kinds::orders::OrderRecord;
    use crate::store::pending::PendingWrites;
    use crate::store::snapshot::SledSnapshot;
    use crate::store::tests::LossySnapshot;

    fn record(customer: u64, id: u64, box_id: u64) -> Vec<u8> {
        let order = crate::domain::order::content::OrderContent::weekly_for_test(box_id)
            .placed(id, customer, 0);
        encode(&OrderRecord::from_order(&order))
    }

    /// Every order as the store reads them: (customer, id) in walk order, each record
    /// checked against its place.
    fn read_all(storage: &dyn Storage) -> Vec<(u64, u64)> {
        let mut seen = Vec::new();
        for_each_stored_order(storage, &[ORDER], Some(&[ORDER + 1]), &mut |stored| {
            let decoded = decode::<OrderRecord>(stored.record.unwrap()).unwrap();
            assert_eq!(
                (decoded.customer_id, decoded.id),
                (stored.customer, stored.id)
            );
            seen.push((stored.customer, stored.id));
            true
        })
        .unwrap();
        seen
    }

    /// A chunk's key and the ids it holds.
    type ChunkIds = (Vec<u8>, Vec<u64>);

    /// Checks the snapshot's layout: under `o` only chunks, each order once, each chunk's
    /// key its first order's; gives the (customer, id) it holds.
    fn held_once(snapshot: &LossySnapshot) -> Vec<(u64, u64)> {
        let mut held = Vec::new();
        let mut by_customer: BTreeMap<u64, Vec<ChunkIds>> = BTreeMap::new();
        for (key, value) in snapshot.entries() {
            if key.first() != Some(&ORDER) {
                continue;
            }
            let (customer, first, is_chunk) = order_or_chunk_ids(&key).unwrap();
            assert!(is_chunk, "an order's own key reached the snapshot");
            let ids: Vec<u64> = order_parts(first, &value)
                .unwrap()
                .iter()
                .map(|(id, _)| *id)
                .collect();
            held.extend(ids.iter().map(|id| (customer, *id)));
            by_customer.entry(customer).or_default().push((key, ids));
        }
        for (customer, chunks) in &by_customer {
            check_each_order_once(*customer, chunks).unwrap();
        }
        held
    }

    #[derive(Debug, Clone)]
    enum Step {
        /// A new order waits (the request path).
        New { customer: u64 },
        /// An order already made waits again (a replay of the log after a crash).
        Replay { nth: usize },
        /// A checkpoint's pass.
        Pass,
        /// An order written straight in (an import), with an id below the others.
        Import { customer: u64 },
        /// An order taken out again (an import undone).
        Undo { nth: usize },
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            6 => (0u64..2).prop_map(|customer| Step::New { customer }),
            2 => any::<usize>().prop_map(|nth| Step::Replay { nth }),
            2 => Just(Step::Pass),
            1 => (0u64..2).prop_map(|customer| Step::Import { customer }),
            1 => any::<usize>().prop_map(|nth| Step::Undo { nth }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

        /// Whatever mix of new orders, replays, passes, imports and undone imports: the
        /// snapshot holds each order once, in chunks, and every read gives each order once.
        #[test]
        fn every_order_is_stored_once_and_read_once(steps in prop::collection::vec(step(), 1..400)) {
            let snapshot = Arc::new(LossySnapshot::default());
            let storage = PendingWrites::over(snapshot.clone());
            let mut made: BTreeSet<(u64, u64)> = BTreeSet::new();
            let mut next_id = 1_000u64;
            let mut low_id = 999u64;
            for step in steps {
                match step {
                    Step::New { customer } => {
                        next_id += 1;
                        storage
                            .put_pending(&order_key(customer, next_id), record(customer, next_id, 217))
                            .unwrap();
                        made.insert((customer, next_id));
                    }
                    Step::Replay { nth } if !made.is_empty() => {
                        let (customer, id) = *made.iter().nth(nth % made.len()).unwrap();
                        storage
                            .put_pending(&order_key(customer, id), record(customer, id, 217))
                            .unwrap();
                    }
                    Step::Import { customer } => {
                        low_id -= 1;
                        storage
                            .put(&order_key(customer, low_id), record(customer, low_id, 217))
                            .unwrap();
                        made.insert((customer, low_id));
                    }
                    Step::Undo { nth } if !made.is_empty() => {
                        let (customer, id) = *made.iter().nth(nth % made.len()).unwrap();
                        storage.remove(&order_key(customer, id)).unwrap();
                        made.remove(&(customer, id));
                    }
                    Step::Pass | Step::Replay { .. } | Step::Undo { .. } => {
                        storage.apply_pending().unwrap();
                    }
                }
                let expected: Vec<(u64, u64)> = made.iter().copied().collect();
                prop_assert_eq!(read_all(&storage), expected.clone());
                let held = held_once(&snapshot);
                prop_assert!(held.iter().all(|order| made.contains(order)), "{held:?}");
                for (customer, id) in &expected {
                    prop_assert_eq!(
                        stored_order(&storage, *customer, *id).unwrap(),
                        Some(record(*customer, *id, 217))
                    );
                }
            }
            storage.apply_pending().unwrap();
            let expected: Vec<(u64, u64)> = made.iter().copied().collect();
            prop_assert_eq!(held_once(&snapshot), expected);
        }
    }

    #[test]
    fn new_orders_fill_the_last_chunk_then_start_new_ones() {
        let snapshot = Arc::new(LossySnapshot::default());
        let storage = PendingWrites::over(snapshot.clone());
        for id in 1..=70u64 {
            storage
                .put_pending(&order_key(7, id), record(7, id, 217))
                .unwrap();
            if id % 10 == 0 {
                storage.apply_pending().unwrap();
            }
        }
        let chunks: Vec<Vec<u8>> = snapshot
            .entries()
            .into_iter()
            .filter(|(key, _)| key.first() == Some(&ORDER))
            .map(|(key, _)| key)
            .collect();
        assert_eq!(
            chunks,
            [1, 33, 65].map(|first| order_chunk(7, first)),
            "chunks of 32 under their first order's key"
        );
    }

    #[test]
    fn a_changed_record_rewrites_its_chunk_and_a_replayed_one_writes_nothing() {
        let snapshot = Arc::new(LossySnapshot::default());
        for id in 1..=3 {
            let run = [(order_key(4, id), record(4, id, 217))];
            let run: Vec<(&[u8], &[u8])> = run.iter().map(|(k, v)| (&k[..], &v[..])).collect();
            let packed = pack(&*snapshot, &orders_of(4), &run).unwrap();
            for (key, value) in packed.written {
                snapshot.put(&key, value).unwrap();
            }
        }
        let same = [(order_key(4, 2), record(4, 2, 217))];
        let same: Vec<(&[u8], &[u8])> = same.iter().map(|(k, v)| (&k[..], &v[..])).collect();
        assert_eq!(
            pack(&*snapshot, &orders_of(4), &same).unwrap(),
            Packed::default()
        );
        let other = [(order_key(4, 2), record(4, 2, 218))];
        let other: Vec<(&[u8], &[u8])> = other.iter().map(|(k, v)| (&k[..], &v[..])).collect();
        let packed = pack(&*snapshot, &orders_of(4), &other).unwrap();
        assert_eq!(packed.written.len(), 1);
        assert_eq!(packed.written[0].0, order_chunk(4, 1));
    }

    #[test]
    fn chunks_that_would_hold_an_order_twice_are_refused_before_any_write() {
        let chunk = |first: u64, ids: &[u64]| (order_chunk(1, first), ids.to_vec());
        assert!(check_each_order_once(1, &[chunk(1, &[1, 2]), chunk(3, &[3])]).is_ok());
        for broken in [
            vec![chunk(1, &[1, 2]), chunk(2, &[2, 3])],
            vec![chunk(1, &[1, 1])],
            vec![chunk(2, &[1, 2])],
            vec![chunk(1, &[])],
            vec![chunk(1, &(1..=33).collect::<Vec<_>>())],
        ] {
            assert!(check_each_order_once(1, &broken).is_err(), "{broken:?}");
        }
    }

    #[test]
    fn a_lone_order_in_the_snapshot_is_refused_by_packing() {
        let snapshot = LossySnapshot::default();
        snapshot.put(&order_key(3, 5), record(3, 5, 217)).unwrap();
        let run = [(order_key(3, 6), record(3, 6, 217))];
        let run: Vec<(&[u8], &[u8])> = run.iter().map(|(k, v)| (&k[..], &v[..])).collect();
        assert!(pack(&snapshot, &orders_of(3), &run).is_err());
    }

    #[test]
    fn a_reader_never_misses_nor_repeats_an_order_while_passes_pack_them() {
        let dir = tempfile::tempdir().unwrap();
        let snapshot = SledSnapshot::open(dir.path(), 1 << 22).unwrap();
        let storage = Arc::new(PendingWrites::over(Arc::new(snapshot)));
        let done = Arc::new(AtomicBool::new(false));
        let packer = {
            let (storage, done) = (storage.clone(), done.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::SeqCst) {
                    storage.apply_pending().unwrap();
                    std::thread::yield_now();
                }
            })
        };
        // Orders of 20 customers in turn; after each, the customer's orders read back whole.
        let mut per_customer = vec![Vec::new(); 20];
        for id in 1..=10_000u64 {
            let customer = id % 20;
            storage
                .put_pending(&order_key(customer, id), record(customer, id, 217))
                .unwrap();
            per_customer[customer as usize].push(id);
            let from = orders_of(customer);
            let to = orders_of(customer + 1);
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

    #[test]
    fn byte_order_is_numeric_order() {
        assert!(order_key(1, 9) < order_key(2, 1));
        assert_eq!(trailing_id(&order_key(7, 42)), Some(42));
        assert_eq!(trailing_id(b"short"), None);
        assert_eq!(order_ids(&order_key(7, 42)), Some((7, 42)));
        assert_eq!(order_ids(&with_id(b'c', 7)), None);
        assert!(order_key(7, 42) < order_chunk(7, 42) && order_chunk(7, 42) < order_key(7, 43));
        assert_eq!(order_ids(&order_chunk(7, 42)), None);
        assert_eq!(order_or_chunk_ids(&order_chunk(7, 42)), Some((7, 42, true)));
        assert_eq!(order_or_chunk_ids(&order_key(7, 42)), Some((7, 42, false)));
        assert_eq!(order_or_chunk_ids(&with_id(b'c', 7)), None);
    }
}
