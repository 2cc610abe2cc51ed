//! The waiting puts: the write-ahead log already makes a new order durable, so its record
//! need not enter the snapshot on the request path. A put waits in a lock-free ordered map
//! that every read consults first, and is applied to the snapshot in key order, in one pass,
//! by the next checkpoint (before it marks the log's new start) or by a flush; the puts of
//! one group (a customer's orders) are handed over together, for [`super::order_chunks`] to
//! fold into chunks. Applied in a batch and away from the request, the snapshot's inserts do
//! not crowd the request's own work out of the cores' caches, which makes a durable order
//! cheaper in CPU than inserting its record on the request path.
//!
//! The rules that keep reads and writes right while puts wait:
//!
//! - A read looks here before it looks in the snapshot, and a pass removes an entry only
//!   after writing it to the snapshot, so a read never misses a put in between.
//! - A scan takes its copy of the waiting puts before it walks the snapshot, for the same
//!   reason; where both hold a key, the waiting value is the newer.
//! - A direct write of a key that waits applies the waiting put first, under the lock a pass
//!   holds, so that an older value never lands after a newer one.
//! - At most [`CAPACITY`] puts wait: past that a put is written to the snapshot at once, so memory
//!   stays bounded should checkpoints fall behind.
//!
//! Must not touch: what the keys mean (the store's writers choose which puts may wait), the
//! log, checkpoints' timing.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Mutex;

use crossbeam_skiplist::SkipMap;
use sled::IVec;

/// How many puts may wait at most: two log segments' worth (one being checkpointed, one
/// filling) of orders and their events, at about 250 bytes of log an order and two waiting
/// puts (the order's record, its event); about 64 MiB.
pub const CAPACITY: usize = 1 << 18;

/// Puts waiting to be applied to the engine, readable in key order.
pub struct WaitingPuts {
    waiting: SkipMap<IVec, IVec>,
    /// Held while waiting puts are applied, by a pass or before a direct write.
    applying: Mutex<()>,
    capacity: usize,
}

impl Default for WaitingPuts {
    fn default() -> Self {
        WaitingPuts::with_capacity(CAPACITY)
    }
}

impl WaitingPuts {
    /// Room for at most `capacity` waiting puts.
    pub fn with_capacity(capacity: usize) -> Self {
        WaitingPuts {
            waiting: SkipMap::new(),
            applying: Mutex::new(()),
            capacity,
        }
    }

    /// Lets `key` = `value` wait, replacing a put of the same key that still waits; gives
    /// the value back when too many wait (the caller writes it at once).
    ///
    /// The caller is the key's only writer meanwhile (the store's writers of one key take
    /// turns).
    pub fn wait(&self, key: &[u8], value: IVec) -> Result<(), IVec> {
        if self.waiting.len() >= self.capacity && !self.waiting.contains_key(key) {
            return Err(value);
        }
        self.waiting.insert(IVec::from(key), value);
        Ok(())
    }

    /// The value of a put of `key` that still waits.
    pub fn get(&self, key: &[u8]) -> Option<IVec> {
        self.waiting.get(key).map(|entry| entry.value().clone())
    }

    /// How many puts wait.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    /// The waiting puts from key `from` up to, not including, `to` (to the end without one),
    /// in key order: a snapshot to take before reading the same range from the engine.
    pub fn between(&self, from: &[u8], to: Option<&[u8]>) -> Vec<(IVec, IVec)> {
        if self.waiting.is_empty() {
            return Vec::new();
        }
        let end = to.map_or(Bound::Unbounded, Bound::Excluded);
        self.waiting
            .range::<[u8], _>((Bound::Included(from), end))
            .map(|entry| (entry.key().clone(), entry.value().clone()))
            .collect()
    }

    /// The last waiting put from key `from` up to, not including, `to` (to the end without
    /// one), found without copying the range.
    pub fn last_between(&self, from: &[u8], to: Option<&[u8]>) -> Option<(IVec, IVec)> {
        let end = to.map_or(Bound::Unbounded, Bound::Excluded);
        self.waiting
            .upper_bound::<[u8]>(end)
            .filter(|entry| entry.key().as_ref() >= from)
            .map(|entry| (entry.key().clone(), entry.value().clone()))
    }

    /// Writes every waiting put with `write`, in key order, a run at a time, removing the
    /// run's puts once written; how many it wrote. A run is the puts whose keys share the
    /// prefix of the length `group_len` gives for its first key (alone, for a key with
    /// none); `write` gets that prefix with the run. Puts made meanwhile may wait for the
    /// next pass. On an error the puts not yet written still wait.
    pub fn apply_all<E>(
        &self,
        group_len: impl Fn(&[u8]) -> Option<usize>,
        mut write: impl FnMut(Option<&[u8]>, &[(&[u8], &[u8])]) -> Result<(), E>,
    ) -> Result<usize, E> {
        if self.waiting.is_empty() {
            return Ok(0);
        }
        let _applying = self
            .applying
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut written = 0;
        let mut run = Vec::new();
        let mut entries = self.waiting.iter().peekable();
        while let Some(first) = entries.next() {
            let group =
                group_len(first.key()).map(|len| &first.key()[..len.min(first.key().len())]);
            run.push(first.clone());
            if let Some(group) = group {
                while let Some(next) = entries.next_if(|next| next.key().starts_with(group)) {
                    run.push(next);
                }
            }
            let puts: Vec<(&[u8], &[u8])> = run
                .iter()
                .map(|entry| (entry.key().as_ref(), entry.value().as_ref()))
                .collect();
            write(group, &puts)?;
            // Removes these entries only: a newer put of one of their keys replaced it and
            // still waits.
            for entry in run.drain(..) {
                entry.remove();
                written += 1;
            }
        }
        Ok(written)
    }

    /// Before a direct write of `key`: writes the put of `key` that still waits, if any, so
    /// that the direct write comes after it.
    pub fn apply_key<E>(
        &self,
        key: &[u8],
        write: impl FnOnce(&[u8], &IVec) -> Result<(), E>,
    ) -> Result<(), E> {
        if self.waiting.is_empty() || !self.waiting.contains_key(key) {
            // Not waiting, or already removed by a pass, which wrote it first.
            return Ok(());
        }
        let _applying = self
            .applying
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(entry) = self.waiting.get(key) {
            write(entry.key(), entry.value())?;
            entry.remove();
        }
        Ok(())
    }
}

/// Merges `waiting` (a copy from [`WaitingPuts::between`], in key order) into the entries
/// that `walk` hands its callback (the snapshot's entries of the same range, in key order,
/// for as long as the callback returns true), calling `visit` with each key once until it
/// returns false; a waiting value wins over the snapshot's.
pub fn visit_merged<E>(
    waiting: Vec<(IVec, IVec)>,
    walk: impl FnOnce(&mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<(), E>,
    visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
) -> Result<(), E> {
    let mut waiting = waiting.into_iter().peekable();
    let mut stopped = false;
    walk(&mut |key, value| {
        let mut shadowed = false;
        while let Some((next, _)) = waiting.peek() {
            let order = next.as_ref().cmp(key);
            if order == Ordering::Greater {
                break;
            }
            let (next, waiting_value) = waiting.next().expect("peeked");
            if !visit(&next, &waiting_value) {
                stopped = true;
                return false;
            }
            if order == Ordering::Equal {
                shadowed = true;
                break;
            }
        }
        if !shadowed && !visit(key, value) {
            stopped = true;
            return false;
        }
        true
    })?;
    if !stopped {
        for (key, value) in waiting {
            if !visit(&key, &value) {
                break;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    fn iv(bytes: &[u8]) -> IVec {
        IVec::from(bytes)
    }

    fn waiting_of(map: &BTreeMap<Vec<u8>, Vec<u8>>) -> Vec<(IVec, IVec)> {
        map.iter().map(|(k, v)| (iv(k), iv(v))).collect()
    }

    fn visited(
        waiting: &BTreeMap<Vec<u8>, Vec<u8>>,
        engine: &BTreeMap<Vec<u8>, Vec<u8>>,
        stop_after: usize,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut seen = Vec::new();
        let walk = |callback: &mut dyn FnMut(&[u8], &[u8]) -> bool| {
            for (key, value) in engine {
                if !callback(key, value) {
                    break;
                }
            }
            Ok::<_, ()>(())
        };
        visit_merged(waiting_of(waiting), walk, &mut |key, value| {
            seen.push((key.to_vec(), value.to_vec()));
            seen.len() < stop_after
        })
        .unwrap();
        seen
    }

    fn keys() -> impl Strategy<Value = BTreeMap<Vec<u8>, Vec<u8>>> {
        prop::collection::btree_map(
            prop::collection::vec(0u8..4, 0..4),
            prop::collection::vec(any::<u8>(), 0..3),
            0..12,
        )
    }

    proptest! {
        /// A merged walk is the engine's entries with the waiting puts written over them, in
        /// key order, each key once, and stops where the visitor says.
        #[test]
        fn a_merged_walk_is_the_engine_overwritten_by_the_waiting_puts(
            waiting in keys(),
            engine in keys(),
            stop_after in 1usize..30,
        ) {
            let mut expected = engine.clone();
            expected.extend(waiting.clone());
            let expected: Vec<_> = expected.into_iter().take(stop_after).collect();
            prop_assert_eq!(visited(&waiting, &engine, stop_after), expected);
        }
    }

    #[test]
    fn an_engine_error_ends_the_walk_with_it() {
        let mut seen = 0;
        let walk = |callback: &mut dyn FnMut(&[u8], &[u8]) -> bool| {
            callback(b"a", b"1");
            Err("broken")
        };
        let result = visit_merged(vec![(iv(b"b"), iv(b"2"))], walk, &mut |_, _| {
            seen += 1;
            true
        });
        assert_eq!(result, Err("broken"));
        assert_eq!(seen, 1);
    }

    #[test]
    fn waiting_puts_are_read_in_key_order_until_applied() {
        let puts = WaitingPuts::default();
        puts.wait(b"b", iv(b"2")).unwrap();
        puts.wait(b"a", iv(b"1")).unwrap();
        puts.wait(b"c", iv(b"3")).unwrap();
        puts.wait(b"a", iv(b"1 again")).unwrap();
        assert_eq!(puts.get(b"a"), Some(iv(b"1 again")));
        assert_eq!(puts.get(b"d"), None);
        let range: Vec<_> = puts.between(b"a", Some(b"c"));
        assert_eq!(
            range,
            vec![(iv(b"a"), iv(b"1 again")), (iv(b"b"), iv(b"2"))]
        );
        assert_eq!(puts.between(b"b", None).len(), 2);
        assert_eq!(
            puts.last_between(b"a", Some(b"c")),
            Some((iv(b"b"), iv(b"2")))
        );
        assert_eq!(puts.last_between(b"a", None), Some((iv(b"c"), iv(b"3"))));
        assert_eq!(puts.last_between(b"d", None), None);
        assert_eq!(puts.last_between(b"a", Some(b"a")), None);

        let mut written = Vec::new();
        let count = puts
            .apply_all(no_groups, |_, run| {
                assert_eq!(run.len(), 1);
                written.push((run[0].0.to_vec(), run[0].1.to_vec()));
                Ok::<_, ()>(())
            })
            .unwrap();
        assert_eq!(count, 3);
        assert_eq!(
            written,
            vec![
                (b"a".to_vec(), b"1 again".to_vec()),
                (b"b".to_vec(), b"2".to_vec()),
                (b"c".to_vec(), b"3".to_vec()),
            ]
        );
        assert_eq!(puts.len(), 0);
        assert_eq!(puts.get(b"a"), None);
    }

    fn no_groups(_: &[u8]) -> Option<usize> {
        None
    }

    #[test]
    fn puts_sharing_a_group_prefix_are_written_as_one_run() {
        let puts = WaitingPuts::default();
        for key in [&b"a1"[..], b"a2", b"b1", b"c", b"c1", b"c2"] {
            puts.wait(key, iv(key)).unwrap();
        }
        let mut runs = Vec::new();
        let count = puts
            .apply_all(
                |key| (key.len() == 2 && key[0] != b'b').then_some(1),
                |group, run| {
                    assert!(run
                        .iter()
                        .all(|(key, _)| key.starts_with(group.unwrap_or(key))));
                    runs.push(run.iter().map(|(key, _)| key.to_vec()).collect::<Vec<_>>());
                    Ok::<_, ()>(())
                },
            )
            .unwrap();
        assert_eq!(count, 6);
        assert_eq!(
            runs,
            vec![
                vec![b"a1".to_vec(), b"a2".to_vec()],
                vec![b"b1".to_vec()],
                // "c" has no group of its own, so "c1" and "c2" begin the next run.
                vec![b"c".to_vec()],
                vec![b"c1".to_vec(), b"c2".to_vec()],
            ]
        );
        assert_eq!(puts.len(), 0);
    }

    #[test]
    fn a_put_made_while_its_older_value_is_applied_still_waits() {
        let puts = WaitingPuts::default();
        puts.wait(b"k", iv(b"old")).unwrap();
        puts.apply_all(no_groups, |_, run| {
            // The key's writer puts again between the pass's read and its removal.
            puts.wait(run[0].0, iv(b"new")).unwrap();
            Ok::<_, ()>(())
        })
        .unwrap();
        assert_eq!(puts.get(b"k"), Some(iv(b"new")));
        assert_eq!(puts.len(), 1);
    }

    #[test]
    fn a_failed_pass_leaves_what_it_did_not_write_waiting() {
        let puts = WaitingPuts::default();
        for key in [b"a", b"b", b"c"] {
            puts.wait(key, iv(key)).unwrap();
        }
        let result = puts.apply_all(no_groups, |_, run| {
            if run[0].0 == b"b" {
                Err("full")
            } else {
                Ok(())
            }
        });
        assert_eq!(result, Err("full"));
        assert_eq!(puts.get(b"a"), None);
        assert_eq!(puts.get(b"b"), Some(iv(b"b")));
        assert_eq!(puts.get(b"c"), Some(iv(b"c")));
    }

    #[test]
    fn a_direct_write_applies_its_keys_waiting_put_first() {
        let puts = WaitingPuts::default();
        puts.wait(b"a", iv(b"1")).unwrap();
        puts.wait(b"b", iv(b"2")).unwrap();
        let mut written = Vec::new();
        puts.apply_key(b"a", |key, value| {
            written.push((key.to_vec(), value.to_vec()));
            Ok::<_, ()>(())
        })
        .unwrap();
        puts.apply_key(b"z", |_, _| -> Result<(), ()> { panic!("z never waited") })
            .unwrap();
        assert_eq!(written, vec![(b"a".to_vec(), b"1".to_vec())]);
        assert_eq!(puts.get(b"a"), None);
        assert_eq!(puts.get(b"b"), Some(iv(b"2")));
    }

    #[test]
    fn past_its_capacity_a_new_key_is_given_back_and_a_waiting_one_replaced() {
        let puts = WaitingPuts::with_capacity(2);
        puts.wait(b"a", iv(b"1")).unwrap();
        puts.wait(b"b", iv(b"2")).unwrap();
        assert_eq!(puts.wait(b"c", iv(b"3")), Err(iv(b"3")));
        puts.wait(b"a", iv(b"1 again")).unwrap();
        assert_eq!(puts.len(), 2);
        assert_eq!(puts.get(b"a"), Some(iv(b"1 again")));
    }
}
