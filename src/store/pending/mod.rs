//! The pending layer: the writes the log already holds and the snapshot does not yet, over
//! the snapshot. A new order's record and a new event wait here (`waiting`) instead of
//! entering the snapshot on the request path; a checkpoint applies every waiting put in one
//! pass, a customer's orders packed into chunks ([`order_chunks`]), a webstore's events
//! likewise ([`event_chunks`]). Every read of the store comes
//! through here and sees the waiting puts over the snapshot's entries (the one read path);
//! every direct write applies the waiting put of its key first, so an older value never
//! lands after a newer one.
//!
//! [`Storage`] is what the repository (`Store`) and the log use: [`PendingWrites`] over a
//! [`Snapshot`] in production; tests wrap it to stall or fail writes on the request path.
//!
//! Must not touch: the log (when passes run is the checkpoint's to decide), record fields
//! (packing moves encoded records without decoding them).

pub mod event_chunks;
pub mod order_chunks;
mod waiting;

use std::collections::BTreeMap;
use std::sync::Arc;

use sled::IVec;

use super::error::{FatalHandler, StoreError};
use super::snapshot::{prefix_end, Entry, Snapshot, WriteBatch};
use waiting::{visit_merged, WaitingPuts};

/// The store's state as the repository and the log read and write it: pending writes over
/// the snapshot.
pub trait Storage: Send + Sync + 'static {
    /// The value at `key`.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;
    /// Applies every write of `batch`, or none (tools; see [`Snapshot::apply`]).
    fn apply(&self, batch: WriteBatch) -> Result<(), StoreError>;
    /// Sets one key in the snapshot.
    fn put(&self, key: &[u8], value: Vec<u8>) -> Result<(), StoreError>;
    /// Sets one key that waits to enter the snapshot until [`Storage::apply_pending`]: every
    /// read sees it at once. Only for writes the log makes durable.
    fn put_pending(&self, key: &[u8], value: Vec<u8>) -> Result<(), StoreError>;
    /// Applies the puts still waiting, before a checkpoint marks where the log starts.
    fn apply_pending(&self) -> Result<(), StoreError>;
    /// Removes `key` (whatever it holds, if anything).
    fn remove(&self, key: &[u8]) -> Result<(), StoreError>;
    /// Removes `key` if it still holds `expected`, atomically; whether it did.
    fn remove_if(&self, key: &[u8], expected: &[u8]) -> Result<bool, StoreError>;
    /// Calls `visit` with every entry from key `from` up to, not including, key `to` (to the
    /// end without one), in order, until it returns false.
    fn for_each_between(
        &self,
        from: &[u8],
        to: Option<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError>;
    /// The last entry from key `from` up to, not including, key `to` (to the end without
    /// one).
    fn last_between(&self, from: &[u8], to: Option<&[u8]>) -> Result<Option<Entry>, StoreError>;
    /// Makes every write durable in the snapshot, pending puts included.
    fn sync(&self) -> Result<(), StoreError>;
    /// Bytes the snapshot's files take on disk (0 where unknown).
    fn size_on_disk(&self) -> Result<u64, StoreError>;
    /// Has `handler` called with any failure of the snapshot to reach its disk from here on
    /// (see [`Snapshot::on_io_failure`]).
    fn on_io_failure(&self, _handler: FatalHandler) {}

    /// Calls `visit` with every entry whose key starts with `prefix`, in order, until it
    /// returns false.
    fn for_each(
        &self,
        prefix: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError> {
        self.for_each_between(prefix, prefix_end(prefix).as_deref(), visit)
    }
    /// The last entry whose key starts with `prefix`.
    fn last(&self, prefix: &[u8]) -> Result<Option<Entry>, StoreError> {
        self.last_between(prefix, prefix_end(prefix).as_deref())
    }
    /// Up to `limit` entries whose key starts with `prefix`, after skipping `skip` of them.
    fn scan(&self, prefix: &[u8], skip: usize, limit: usize) -> Result<Vec<Entry>, StoreError> {
        let mut entries = Vec::new();
        let mut skipped = 0;
        if limit == 0 {
            return Ok(entries);
        }
        self.for_each(prefix, &mut |key, value| {
            if skipped < skip {
                skipped += 1;
                return true;
            }
            entries.push((key.to_vec(), value.to_vec()));
            entries.len() < limit
        })?;
        Ok(entries)
    }
}

/// Waiting puts over a snapshot: the [`Storage`] the store runs on.
pub struct PendingWrites {
    snapshot: Arc<dyn Snapshot>,
    waiting: WaitingPuts,
}

impl PendingWrites {
    /// Nothing waiting yet, over `snapshot`.
    pub fn over(snapshot: Arc<dyn Snapshot>) -> PendingWrites {
        PendingWrites {
            snapshot,
            waiting: WaitingPuts::default(),
        }
    }

    /// [`PendingWrites::over`] with room for at most `capacity` waiting puts (tests).
    #[cfg(test)]
    pub(crate) fn with_capacity(snapshot: Arc<dyn Snapshot>, capacity: usize) -> PendingWrites {
        PendingWrites {
            snapshot,
            waiting: WaitingPuts::with_capacity(capacity),
        }
    }

    /// How many puts wait to enter the snapshot.
    #[cfg(test)]
    pub(crate) fn waiting_puts(&self) -> usize {
        self.waiting.len()
    }

    /// The snapshot underneath (tests that look past the waiting puts).
    #[cfg(test)]
    pub(crate) fn snapshot(&self) -> &dyn Snapshot {
        &*self.snapshot
    }

    /// Writes one run of waiting puts (see [`WaitingPuts::apply_all`]): a customer's orders
    /// (the run of its group, `o` + customer id) or a webstore's events (`v` + webstore id +
    /// 0) packed into their chunks, anything else as it is.
    fn write_run(&self, group: Option<&[u8]>, run: &[(&[u8], &[u8])]) -> Result<(), StoreError> {
        match group {
            Some(events) if events.first() == Some(&event_chunks::EVENT) => {
                let changes: Vec<(u64, Option<&[u8]>)> = run
                    .iter()
                    .filter_map(|(key, value)| {
                        event_chunks::event_key_parts(key)
                            .map(|(_, sequence, _)| (sequence, Some(*value)))
                    })
                    .collect();
                self.write_packed(event_chunks::pack(&*self.snapshot, events, &changes)?)
            }
            Some(customer) => {
                self.write_packed(order_chunks::pack(&*self.snapshot, customer, run)?)
            }
            None => run
                .iter()
                .try_for_each(|(key, value)| self.snapshot.put(key, value.to_vec())),
        }
    }

    /// Writes what packing decided: the chunks first, then the keys they emptied, so that a
    /// crash in between leaves an order in two chunks for a moment rather than in none (the
    /// next pass over the customer folds them again, and reads take each id once).
    fn write_packed(&self, packed: order_chunks::Packed) -> Result<(), StoreError> {
        for (key, value) in packed.written {
            self.snapshot.put(&key, value)?;
        }
        packed
            .removed
            .iter()
            .try_for_each(|key| self.snapshot.remove(key))
    }

    /// Before a direct write of `key`: its waiting put, if any, goes first.
    fn apply_waiting(&self, key: &[u8]) -> Result<(), StoreError> {
        self.waiting.apply_key(key, |key, value| {
            self.write_run(group(key), &[(key, value)])
        })
    }

    /// Removes events `sequences` (ascending) of the webstore `events` from wherever they
    /// are held.
    fn remove_events(&self, events: &[u8], sequences: &[u64]) -> Result<(), StoreError> {
        let changes: Vec<(u64, Option<&[u8]>)> = sequences.iter().map(|id| (*id, None)).collect();
        self.write_packed(event_chunks::pack(&*self.snapshot, events, &changes)?)
    }

    /// Removes order `key`'s record from the chunk that holds it.
    fn remove_order(&self, customer: &[u8], key: &[u8]) -> Result<(), StoreError> {
        let Some((_, id)) = order_chunks::order_ids(key) else {
            return Ok(());
        };
        self.write_packed(order_chunks::unpack(&*self.snapshot, customer, id)?)
    }
}

impl Storage for PendingWrites {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        if let Some(value) = self.waiting.get(key) {
            return Ok(Some(value.to_vec()));
        }
        self.snapshot.get(key)
    }

    /// Orders' records and events in `batch` go into their chunks after the rest of the batch
    /// (which stays atomic), orders one at a time, each webstore's events together: neither
    /// is ever stored under its own key.
    fn apply(&self, batch: WriteBatch) -> Result<(), StoreError> {
        self.apply_pending()?;
        let (grouped, rest): (Vec<_>, Vec<_>) = batch
            .ops
            .into_iter()
            .partition(|(key, _)| group(key).is_some());
        self.snapshot.apply(WriteBatch { ops: rest })?;
        let mut events: BTreeMap<Vec<u8>, BTreeMap<u64, Option<Vec<u8>>>> = BTreeMap::new();
        for (key, value) in grouped {
            if let Some((len, sequence, _)) = event_chunks::event_key_parts(&key) {
                events
                    .entry(key[..len].to_vec())
                    .or_default()
                    .insert(sequence, value);
                continue;
            }
            match value {
                Some(value) => self.put(&key, value)?,
                None => self.remove(&key)?,
            }
        }
        for (webstore, changes) in &events {
            let changes: Vec<(u64, Option<&[u8]>)> = changes
                .iter()
                .map(|(sequence, value)| (*sequence, value.as_deref()))
                .collect();
            self.write_packed(event_chunks::pack(&*self.snapshot, webstore, &changes)?)?;
        }
        Ok(())
    }

    fn put(&self, key: &[u8], value: Vec<u8>) -> Result<(), StoreError> {
        self.apply_waiting(key)?;
        match group(key) {
            Some(group) => self.write_run(Some(group), &[(key, &value)]),
            None => self.snapshot.put(key, value),
        }
    }

    fn put_pending(&self, key: &[u8], value: Vec<u8>) -> Result<(), StoreError> {
        match self.waiting.wait(key, IVec::from(value)) {
            Ok(()) => Ok(()),
            // Too many wait already: it goes in as the pass would write it.
            Err(value) => self.write_run(group(key), &[(key, &value)]),
        }
    }

    fn apply_pending(&self) -> Result<(), StoreError> {
        self.waiting
            .apply_all(group_len, |group, run| self.write_run(group, run))
            .map(drop)
    }

    fn remove(&self, key: &[u8]) -> Result<(), StoreError> {
        self.apply_waiting(key)?;
        if let Some((len, sequence, false)) = event_chunks::event_key_parts(key) {
            return self.remove_events(&key[..len], &[sequence]);
        }
        match order_chunks::customer_group(key) {
            Some(customer) => self.remove_order(customer, key),
            None => self.snapshot.remove(key),
        }
    }

    fn remove_if(&self, key: &[u8], expected: &[u8]) -> Result<bool, StoreError> {
        self.apply_waiting(key)?;
        if let Some((len, sequence, false)) = event_chunks::event_key_parts(key) {
            // Events never change once written: reading one and then removing it is no race.
            let holds = event_chunks::stored_event(self, &key[..len], sequence)?
                .is_some_and(|record| record == expected);
            if holds {
                self.remove_events(&key[..len], &[sequence])?;
            }
            return Ok(holds);
        }
        let Some(customer) = order_chunks::customer_group(key) else {
            return self.snapshot.remove_if(key, expected);
        };
        // An order's record is replaced by each change of the order, but only ever by its
        // customer's actor, and a conditional removal of one comes only from a replay (at
        // open, or a standby's apply), where no actor writes: reading it and then removing it
        // is no race.
        let (customer_id, id) = order_chunks::order_ids(key).unwrap_or_default();
        let holds = order_chunks::stored_order(self, customer_id, id)?
            .is_some_and(|record| record == expected);
        if holds {
            self.remove_order(customer, key)?;
        }
        Ok(holds)
    }

    fn for_each_between(
        &self,
        from: &[u8],
        to: Option<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError> {
        // The waiting puts first: one applied meanwhile is then in the snapshot.
        let waiting = self.waiting.between(from, to);
        visit_merged(
            waiting,
            |callback| self.snapshot.for_each_between(from, to, callback),
            visit,
        )
    }

    fn last_between(&self, from: &[u8], to: Option<&[u8]>) -> Result<Option<Entry>, StoreError> {
        let waiting = self.waiting.last_between(from, to);
        let stored = self.snapshot.last_between(from, to)?;
        Ok(match (waiting, stored) {
            (Some(waiting), Some(stored)) if stored.0.as_slice() > waiting.0.as_ref() => {
                Some(stored)
            }
            (Some((key, value)), _) => Some((key.to_vec(), value.to_vec())),
            (None, stored) => stored,
        })
    }

    fn sync(&self) -> Result<(), StoreError> {
        self.apply_pending()?;
        self.snapshot.flush()
    }

    fn size_on_disk(&self) -> Result<u64, StoreError> {
        self.snapshot.size_on_disk()
    }

    fn on_io_failure(&self, handler: FatalHandler) {
        self.snapshot.on_io_failure(handler);
    }
}

/// For a waiting put: the length of its group's prefix if it is packed into chunks with the
/// rest of its group (an order with its customer's, an event with its webstore's).
fn group_len(key: &[u8]) -> Option<usize> {
    order_chunks::customer_group_len(key).or_else(|| event_chunks::webstore_group_len(key))
}

/// [`group_len`] as the prefix itself.
fn group(key: &[u8]) -> Option<&[u8]> {
    group_len(key).map(|len| &key[..len])
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::store::snapshot::SledSnapshot;

    /// Opens the snapshot in `dir`. sled's flusher thread can hold a dropped instance's file
    /// lock for a moment longer, so a reopening refused for the lock is tried again, for up
    /// to 10 s.
    fn open(dir: &Path) -> PendingWrites {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match SledSnapshot::open(dir, 1 << 22) {
                Ok(snapshot) => return PendingWrites::over(Arc::new(snapshot)),
                Err(error)
                    if error.to_string().contains("could not acquire lock")
                        && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(error) => panic!("opening {}: {error}", dir.display()),
            }
        }
    }

    fn entries(storage: &PendingWrites, from: &[u8], to: Option<&[u8]>) -> Vec<Entry> {
        let mut seen = Vec::new();
        storage
            .for_each_between(from, to, &mut |key, value| {
                seen.push((key.to_vec(), value.to_vec()));
                true
            })
            .unwrap();
        seen
    }

    fn entry(key: &[u8], value: &[u8]) -> Entry {
        (key.to_vec(), value.to_vec())
    }

    #[test]
    fn every_read_sees_a_pending_put_before_and_after_it_is_applied() {
        let dir = tempfile::tempdir().unwrap();
        let storage = open(dir.path());
        storage.put(b"o1", b"stored".to_vec()).unwrap();
        storage.put(b"o3", b"stored".to_vec()).unwrap();
        storage.put_pending(b"o2", b"waiting".to_vec()).unwrap();
        storage.put_pending(b"o3", b"newer".to_vec()).unwrap();
        storage.put_pending(b"o4", b"waiting".to_vec()).unwrap();
        let expected = vec![
            entry(b"o1", b"stored"),
            entry(b"o2", b"waiting"),
            entry(b"o3", b"newer"),
            entry(b"o4", b"waiting"),
        ];
        for applied in [false, true] {
            assert_eq!(storage.get(b"o3").unwrap(), Some(b"newer".to_vec()));
            assert_eq!(
                entries(&storage, b"o", None),
                expected,
                "applied: {applied}"
            );
            assert_eq!(storage.scan(b"o", 1, 2).unwrap(), expected[1..3].to_vec());
            assert_eq!(storage.last(b"o").unwrap(), Some(expected[3].clone()));
            assert_eq!(
                storage.last_between(b"o", Some(b"o4")).unwrap(),
                Some(expected[2].clone())
            );
            storage.apply_pending().unwrap();
        }
        assert_eq!(storage.waiting_puts(), 0);
    }

    #[test]
    fn a_sync_applies_the_waiting_puts_and_makes_them_durable() {
        let dir = tempfile::tempdir().unwrap();
        {
            let storage = open(dir.path());
            storage.put_pending(b"o1", b"waiting".to_vec()).unwrap();
            storage.sync().unwrap();
            assert_eq!(storage.waiting_puts(), 0);
        }
        assert_eq!(
            open(dir.path()).get(b"o1").unwrap(),
            Some(b"waiting".to_vec())
        );
    }

    #[test]
    fn a_direct_write_of_a_waiting_key_is_not_undone_by_the_next_pass() {
        let dir = tempfile::tempdir().unwrap();
        let storage = open(dir.path());
        storage.put_pending(b"a", b"old".to_vec()).unwrap();
        storage.put(b"a", b"direct".to_vec()).unwrap();
        storage.put_pending(b"b", b"old".to_vec()).unwrap();
        assert!(storage.remove_if(b"b", b"old").unwrap());
        storage.put_pending(b"c", b"old".to_vec()).unwrap();
        storage.remove(b"c").unwrap();
        storage.put_pending(b"d", b"old".to_vec()).unwrap();
        let mut batch = WriteBatch::default();
        batch.put(b"d".to_vec(), b"batch".to_vec());
        storage.apply(batch).unwrap();
        storage.apply_pending().unwrap();
        assert_eq!(storage.get(b"a").unwrap(), Some(b"direct".to_vec()));
        assert_eq!(storage.get(b"b").unwrap(), None);
        assert_eq!(storage.get(b"c").unwrap(), None);
        assert_eq!(storage.get(b"d").unwrap(), Some(b"batch".to_vec()));
    }

    #[test]
    fn past_its_capacity_a_put_goes_straight_to_the_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let snapshot = Arc::new(SledSnapshot::open(dir.path(), 1 << 22).unwrap());
        let storage = PendingWrites::with_capacity(snapshot, 1);
        storage.put_pending(b"a", b"1".to_vec()).unwrap();
        storage.put_pending(b"b", b"2".to_vec()).unwrap();
        assert_eq!(storage.waiting_puts(), 1);
        assert_eq!(storage.snapshot().get(b"b").unwrap(), Some(b"2".to_vec()));
        assert_eq!(storage.get(b"a").unwrap(), Some(b"1".to_vec()));
    }

    /// A writer defers keys while passes apply them: a reader that knows a key was put
    /// finds it by `get` and by a scan whatever the pass is doing.
    #[test]
    fn no_read_misses_a_put_while_passes_apply_it() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Arc::new(open(dir.path()));
        let put = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let key = |n: u64| [b"o".as_slice(), &n.to_be_bytes()].concat();
        let writer = {
            let (storage, put, done) = (storage.clone(), put.clone(), done.clone());
            std::thread::spawn(move || {
                for n in 1..=20_000u64 {
                    storage
                        .put_pending(&key(n), n.to_be_bytes().to_vec())
                        .unwrap();
                    put.store(n, Ordering::Release);
                }
                done.store(true, Ordering::Release);
            })
        };
        let applier = {
            let (storage, done) = (storage.clone(), done.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::Acquire) {
                    storage.apply_pending().unwrap();
                }
            })
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut checks = 0;
        while !done.load(Ordering::Acquire) && Instant::now() < deadline {
            let n = put.load(Ordering::Acquire);
            if n == 0 {
                continue;
            }
            assert_eq!(
                storage.get(&key(n)).unwrap(),
                Some(n.to_be_bytes().to_vec())
            );
            let (from, to) = (key(n.saturating_sub(50).max(1)), key(n + 1));
            let seen = entries(&storage, &from, Some(&to));
            let expected: Vec<u64> = (n.saturating_sub(50).max(1)..=n).collect();
            let seen: Vec<u64> = seen
                .iter()
                .map(|(_, value)| u64::from_be_bytes(value[..8].try_into().unwrap()))
                .collect();
            assert_eq!(seen, expected);
            checks += 1;
        }
        writer.join().unwrap();
        applier.join().unwrap();
        storage.apply_pending().unwrap();
        assert_eq!(entries(&storage, b"o", None).len(), 20_000);
        assert!(checks > 0);
    }
}
