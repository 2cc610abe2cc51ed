//! Events packed into chunks: how a webstore's events are laid out in the snapshot, how
//! waiting events enter it, and how the store reads them back.
//!
//! sled 0.34.7 splits a leaf once it holds more than 16 entries, and events are appended at
//! the end of their webstore's range: with one entry per event, every eighth event or so
//! paid for a split, and a checkpoint's inserts of events cost about a fifth of a durable
//! order's CPU (docs/benchmarks.md). In the snapshot a webstore's events therefore live in
//! chunks of [`CHUNK_EVENTS`] sequence numbers, under `v` + webstore id + 0 + the chunk's
//! first sequence number + 0: the chunk of a sequence number is fixed by the number alone,
//! so a pass finds it with one read, and a chunk is written once per pass however many of
//! its events the pass brings.
//!
//! An event's own key (`v` + webstore id + 0 + sequence number, no 0 after it) is where it
//! waits in the pending layer until a pass packs it; a store written before chunks also
//! holds events under their own keys in the snapshot. Events never change once written,
//! only go (the retention sweep, an import taken back), so reading every copy of an event
//! gives the same record: a read takes each sequence number once (a pass writes a chunk
//! before it drops the waiting puts it packed), and a removal removes every copy.
//!
//! It owns the `v` keys' layout (an event's key, a chunk's key) and the chunks' format: the
//! packing needs them, and `store::kinds::events` above it names them here (nothing is
//! re-exported).
//!
//! Must not touch: when passes run, how puts wait, the event records' own encoding.

use std::collections::BTreeMap;

use super::order_chunks::Packed;
use super::Storage;
use crate::store::codec::{chunk_parts, encode_chunk, CodecError, Kind};
use crate::store::error::{corrupt, StoreError};
use crate::store::keys::{trailing_id, webstore_prefix};
use crate::store::snapshot::{prefix_end, Snapshot};

/// A webstore's events, by sequence number.
pub const EVENT: u8 = b'v';

/// `v` + webstore id + 0 + sequence number: one event of the webstore.
pub fn event_key(webstore: &str, sequence: u64) -> Vec<u8> {
    let mut key = webstore_prefix(EVENT, webstore);
    key.extend_from_slice(&sequence.to_be_bytes());
    key
}

/// `v` + webstore id + 0 + the sequence number of the chunk's first event + 0: a chunk of
/// the webstore's events (see `pending::event_chunks`).
pub fn event_chunk(webstore: &str, first: u64) -> Vec<u8> {
    let mut key = event_key(webstore, first);
    key.push(0);
    key
}

/// Of a `v` key: the length of its webstore's prefix (`v` + webstore id + 0), the sequence
/// number it names and whether it is a chunk's key (the chunk's first sequence number).
pub fn event_key_parts(key: &[u8]) -> Option<(usize, u64, bool)> {
    if key.first() != Some(&EVENT) {
        return None;
    }
    // A webstore id holds no 0 byte: the first one ends it.
    let prefix_len = 1 + key[1..].iter().position(|&byte| byte == 0)? + 1;
    match key.len() - prefix_len {
        8 => Some((prefix_len, trailing_id(key)?, false)),
        9 if key.last() == Some(&0) => {
            Some((prefix_len, trailing_id(&key[..key.len() - 1])?, true))
        }
        _ => None,
    }
}

/// The format version of event chunks.
const EVENT_CHUNK_VERSION: u16 = 1;

/// Events of one webstore as one value, laid out as an order chunk is (see
/// `orders::encode_order_chunk`) under a header of kind [`Kind::EventChunk`]: each event's
/// sequence number, length and `EventRecord` as `codec::encode` wrote it.
pub fn encode_event_chunk<'a>(parts: impl IntoIterator<Item = (u64, &'a [u8])>) -> Vec<u8> {
    encode_chunk(Kind::EventChunk, EVENT_CHUNK_VERSION, parts)
}

/// The events a stored event value holds, as (sequence number, encoded `EventRecord`):
/// the record itself, under the sequence number `key_id` of its key, or each part of an
/// event chunk. The parts' records are not decoded here.
pub fn event_parts(key_id: u64, bytes: &[u8]) -> Result<Vec<(u64, &[u8])>, CodecError> {
    chunk_parts(
        key_id,
        bytes,
        Kind::Event,
        Kind::EventChunk,
        EVENT_CHUNK_VERSION,
    )
}

/// Sequence numbers one chunk covers: about 2 KiB of events whose records are orders. sled
/// keeps values inside its tree's nodes and rewrites a whole node now and then, so chunks of
/// large events (a customer with a long address) must stay small: with 64, a disk filled by
/// such customers met its end before the free-space watch could refuse writes.
pub const CHUNK_EVENTS: u64 = 16;

/// Sequence numbers one step of a read covers: eight chunks.
const WINDOW: u64 = 8 * CHUNK_EVENTS;

/// Visits one event in a walk: its sequence number, the key it was read under and its
/// encoded record; whether to go on.
pub type EventVisitor<'a> = dyn FnMut(u64, &[u8], &[u8]) -> bool + 'a;

/// The first sequence number of the chunk that holds `sequence`.
pub fn chunk_first(sequence: u64) -> u64 {
    sequence - sequence % CHUNK_EVENTS
}

/// For a waiting put: the length of its group prefix (`v` + webstore id + 0) if it is an
/// event's own key, which a pass packs with the webstore's other events.
pub fn webstore_group_len(key: &[u8]) -> Option<usize> {
    event_key_parts(key)
        .filter(|(_, _, chunk)| !chunk)
        .map(|(len, _, _)| len)
}

/// The own key of event `sequence` of the webstore `group`.
fn own_key(group: &[u8], sequence: u64) -> Vec<u8> {
    let mut key = Vec::with_capacity(group.len() + 9);
    key.extend_from_slice(group);
    key.extend_from_slice(&sequence.to_be_bytes());
    key
}

/// The key of the chunk of the webstore `group` whose first sequence number is `first`.
fn chunk_key(group: &[u8], first: u64) -> Vec<u8> {
    let mut key = own_key(group, first);
    key.push(0);
    key
}

/// What to write so that the webstore `group` (`v` + webstore id + 0) holds `changes`, in
/// ascending order of sequence number: `Some(record)` to hold it, `None` to hold it no more.
/// Each chunk touched is read once and written once; an event a chunk holds already with
/// the same record changes nothing, so a replay of the log writes nothing twice.
pub fn pack(
    snapshot: &dyn Snapshot,
    group: &[u8],
    changes: &[(u64, Option<&[u8]>)],
) -> Result<Packed, StoreError> {
    let mut packed = Packed::default();
    let mut start = 0;
    while start < changes.len() {
        let first = chunk_first(changes[start].0);
        let end = changes[start..]
            .iter()
            .position(|(sequence, _)| chunk_first(*sequence) != first)
            .map_or(changes.len(), |n| start + n);
        let key = chunk_key(group, first);
        let held = snapshot.get(&key)?;
        let mut events: BTreeMap<u64, &[u8]> = BTreeMap::new();
        if let Some(value) = &held {
            events.extend(event_parts(first, value).map_err(|source| corrupt(&key, source))?);
        }
        let mut changed = false;
        for (sequence, change) in &changes[start..end] {
            match change {
                Some(record) => {
                    if events.get(sequence) != Some(record) {
                        events.insert(*sequence, record);
                        changed = true;
                    }
                }
                None => {
                    changed |= events.remove(sequence).is_some();
                    // A store written before chunks held events under their own keys.
                    let own = own_key(group, *sequence);
                    if snapshot.get(&own)?.is_some() {
                        packed.removed.push(own);
                    }
                }
            }
        }
        if changed {
            if let Some(stray) = events
                .keys()
                .find(|sequence| chunk_first(**sequence) != first)
            {
                return Err(StoreError::Engine {
                    context: "packing events".into(),
                    detail: format!(
                        "event {stray} does not belong in the chunk from {first} of {}",
                        String::from_utf8_lossy(group).escape_debug()
                    ),
                });
            }
            if events.is_empty() {
                packed.removed.push(key);
            } else {
                let chunk = encode_event_chunk(events.iter().map(|(id, record)| (*id, *record)));
                packed.written.push((key, chunk));
            }
        }
        start = end;
    }
    Ok(packed)
}

/// Calls `visit` with each event of the webstore `group` after sequence number `after` and
/// up to `through`, in order, each once (its sequence number, the key it was read under and
/// its encoded record), until `visit` returns false. Reads `WINDOW` sequence numbers at a
/// time, so that a reader from far behind a flood does not copy all of its waiting events
/// for each step, and skips ahead to the next event held past a window that had none.
pub fn for_each_stored_event(
    storage: &dyn Storage,
    group: &[u8],
    after: u64,
    through: u64,
    visit: &mut EventVisitor<'_>,
) -> Result<(), StoreError> {
    let group_end = prefix_end(group);
    let Some(mut start) = after.checked_add(1) else {
        return Ok(());
    };
    while start <= through {
        let window_first = chunk_first(start);
        let window_last = window_first.saturating_add(WINDOW - 1).min(through);
        let from = own_key(group, window_first);
        let to = window_last
            .checked_add(1)
            .map(|next| own_key(group, next))
            .or_else(|| group_end.clone());
        let mut found: Vec<(u64, Vec<u8>, Vec<u8>)> = Vec::new();
        let mut failed = None;
        storage.for_each_between(&from, to.as_deref(), &mut |key, value| {
            let Some((_, key_id, _)) = event_key_parts(key) else {
                return true;
            };
            match event_parts(key_id, value) {
                Ok(parts) => {
                    for (sequence, record) in parts {
                        if (start..=window_last).contains(&sequence) {
                            found.push((sequence, key.to_vec(), record.to_vec()));
                        }
                    }
                    true
                }
                Err(source) => {
                    failed = Some(corrupt(key, source));
                    false
                }
            }
        })?;
        if let Some(error) = failed {
            return Err(error);
        }
        // Every copy of an event holds the same record: keep one of each.
        found.sort_by_key(|(sequence, _, _)| *sequence);
        found.dedup_by_key(|(sequence, _, _)| *sequence);
        let none_found = found.is_empty();
        for (sequence, key, record) in &found {
            if !visit(*sequence, key, record) {
                return Ok(());
            }
        }
        if window_last >= through {
            break;
        }
        start = window_last + 1;
        if none_found {
            // A gap (the retention's, or numbers given up): on from the next key held.
            let mut next = None;
            storage.for_each_between(
                &own_key(group, start),
                group_end.as_deref(),
                &mut |key, _| {
                    next = event_key_parts(key).map(|(_, sequence, _)| sequence);
                    false
                },
            )?;
            match next {
                Some(sequence) => start = start.max(sequence),
                None => break,
            }
        }
    }
    Ok(())
}

/// The highest sequence number of the webstore `group`'s events the store holds (0 for
/// none).
pub fn last_stored_event(storage: &dyn Storage, group: &[u8]) -> Result<u64, StoreError> {
    let end = prefix_end(group);
    let Some((key, value)) = storage.last_between(group, end.as_deref())? else {
        return Ok(0);
    };
    let Some((_, key_id, chunk)) = event_key_parts(&key) else {
        return Ok(0);
    };
    let highest_of = |key: &[u8], value: &[u8], key_id: u64| {
        event_parts(key_id, value)
            .map(|parts| parts.iter().map(|(id, _)| *id).max().unwrap_or(0))
            .map_err(|source| corrupt(key, source))
    };
    let mut highest = highest_of(&key, &value, key_id)?;
    if !chunk {
        // The last key is an event's own: its chunk, which sorts before it, may hold later
        // ones.
        let covering = chunk_key(group, chunk_first(key_id));
        if let Some(value) = storage.get(&covering)? {
            highest = highest.max(highest_of(&covering, &value, chunk_first(key_id))?);
        }
    }
    Ok(highest)
}

/// The encoded record of event `sequence` of the webstore `group`, if stored.
pub fn stored_event(
    storage: &dyn Storage,
    group: &[u8],
    sequence: u64,
) -> Result<Option<Vec<u8>>, StoreError> {
    let mut found = None;
    for_each_stored_event(
        storage,
        group,
        sequence.saturating_sub(1),
        sequence,
        &mut |at, _, record| {
            if at == sequence {
                found = Some(record.to_vec());
            }
            false
        },
    )?;
    Ok(found)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Arc;

    use proptest::prelude::*;

    use super::*;
    use crate::store::pending::PendingWrites;
    use crate::store::snapshot::{SledSnapshot, WriteBatch};

    const SHOP: &[u8] = b"vshop\0";

    fn record(sequence: u64) -> Vec<u8> {
        crate::store::codec::encode(&crate::store::kinds::events::EventRecord {
            event_type: "order.created".into(),
            created_at_ms: sequence as i64,
            body: crate::store::kinds::events::EventBody::Json(format!("{sequence}").into_bytes()),
        })
    }

    fn read_all(storage: &dyn Storage, group: &[u8]) -> Vec<u64> {
        let mut seen = Vec::new();
        for_each_stored_event(storage, group, 0, u64::MAX, &mut |sequence, _, bytes| {
            assert_eq!(bytes, record(sequence), "event {sequence}'s own record");
            seen.push(sequence);
            true
        })
        .unwrap();
        seen
    }

    fn open(dir: &std::path::Path) -> (Arc<SledSnapshot>, PendingWrites) {
        let snapshot = Arc::new(SledSnapshot::open(dir, 1 << 22).unwrap());
        (snapshot.clone(), PendingWrites::over(snapshot))
    }

    #[test]
    fn a_pass_puts_a_webstores_events_into_one_chunk_per_16_and_reads_take_each_once() {
        let dir = tempfile::tempdir().unwrap();
        let (snapshot, storage) = open(dir.path());
        for sequence in 1..=200 {
            storage
                .put_pending(&own_key(SHOP, sequence), record(sequence))
                .unwrap();
        }
        // Another webstore's events beside them, never mixed in.
        storage
            .put_pending(&own_key(b"vshop-2\0", 5), record(5))
            .unwrap();
        assert_eq!(read_all(&storage, SHOP), (1..=200).collect::<Vec<_>>());
        storage.apply_pending().unwrap();
        let mut keys = Vec::new();
        snapshot
            .for_each_between(SHOP, prefix_end(SHOP).as_deref(), &mut |key, _| {
                keys.push(event_key_parts(key).unwrap());
                true
            })
            .unwrap();
        let chunks: Vec<(u64, bool)> = keys.iter().map(|(_, id, chunk)| (*id, *chunk)).collect();
        let firsts: Vec<(u64, bool)> = (0..=192).step_by(16).map(|first| (first, true)).collect();
        assert_eq!(chunks, firsts);
        assert_eq!(read_all(&storage, SHOP), (1..=200).collect::<Vec<_>>());
        assert_eq!(read_all(&storage, b"vshop-2\0"), vec![5]);
        assert_eq!(last_stored_event(&storage, SHOP).unwrap(), 200);
        assert_eq!(
            stored_event(&storage, SHOP, 130).unwrap(),
            Some(record(130))
        );
        assert_eq!(stored_event(&storage, SHOP, 201).unwrap(), None);
    }

    #[test]
    fn a_later_event_packed_before_an_earlier_one_is_read_in_order_and_counted_highest() {
        let dir = tempfile::tempdir().unwrap();
        let (_, storage) = open(dir.path());
        storage.put_pending(&own_key(SHOP, 70), record(70)).unwrap();
        storage.apply_pending().unwrap();
        storage.put_pending(&own_key(SHOP, 66), record(66)).unwrap();
        assert_eq!(read_all(&storage, SHOP), vec![66, 70]);
        assert_eq!(last_stored_event(&storage, SHOP).unwrap(), 70);
    }

    #[test]
    fn removals_take_every_copy_of_an_event_and_an_emptied_chunk_goes() {
        let dir = tempfile::tempdir().unwrap();
        let (snapshot, storage) = open(dir.path());
        // Event 3 as a store before chunks kept it, under its own key.
        let mut legacy = WriteBatch::default();
        legacy.put(own_key(SHOP, 3), record(3));
        snapshot.apply(legacy).unwrap();
        for sequence in [1, 2, 3, 65] {
            storage
                .put_pending(&own_key(SHOP, sequence), record(sequence))
                .unwrap();
        }
        storage.apply_pending().unwrap();
        assert_eq!(read_all(&storage, SHOP), vec![1, 2, 3, 65]);
        let mut removal = WriteBatch::default();
        for sequence in [1, 2, 3] {
            removal.delete(own_key(SHOP, sequence));
        }
        storage.apply(removal).unwrap();
        storage.remove(&own_key(SHOP, 65)).unwrap();
        assert_eq!(read_all(&storage, SHOP), Vec::<u64>::new());
        let mut left = 0;
        snapshot
            .for_each_between(SHOP, prefix_end(SHOP).as_deref(), &mut |_, _| {
                left += 1;
                true
            })
            .unwrap();
        assert_eq!(left, 0, "no chunk or own key is left");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]

        /// Whatever events are put, packed by passes at any point, and removed, a read of any
        /// range gives exactly the events held in it, once each and in order.
        #[test]
        fn reads_give_each_event_held_once_in_order(
            steps in proptest::collection::vec((0u8..4, 1u64..400), 1..300),
            after in 0u64..400,
            span in 0u64..400,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let (_, storage) = open(dir.path());
            let mut held = BTreeSet::new();
            for (step, sequence) in steps {
                match step {
                    0 | 1 => {
                        storage.put_pending(&own_key(SHOP, sequence), record(sequence)).unwrap();
                        held.insert(sequence);
                    }
                    2 => storage.apply_pending().unwrap(),
                    _ => {
                        storage.remove(&own_key(SHOP, sequence)).unwrap();
                        held.remove(&sequence);
                    }
                }
            }
            let through = after + span;
            let mut seen = Vec::new();
            for_each_stored_event(&storage, SHOP, after, through, &mut |sequence, _, bytes| {
                assert_eq!(bytes, record(sequence));
                seen.push(sequence);
                true
            }).unwrap();
            // Not `held.range(..)`: an empty range (span 0) is a panic there, and a read of
            // one is a question the store must answer with nothing.
            let expected: Vec<u64> =
                held.iter().copied().filter(|s| (after + 1..=through).contains(s)).collect();
            prop_assert_eq!(seen, expected);
            prop_assert_eq!(
                last_stored_event(&storage, SHOP).unwrap(),
                held.last().copied().unwrap_or(0)
            );
            storage.apply_pending().unwrap();
            prop_assert_eq!(read_all(&storage, SHOP), held.iter().copied().collect::<Vec<_>>());
        }
    }
}
