//! sled 0.34.7 as a [`Storage`]: one tree, single-key writes, puts that wait to be applied
//! in a batch ([`DeferredPuts`], read through before the tree), batches through
//! `apply_batch`, and a sync that ends in our own fsync. Must not touch: record encoding, key
//! layout, group commit.

use std::fs::File;
use std::path::Path;
use std::sync::{Arc, Mutex};

use sled::IVec;

use super::deferred::{visit_merged, DeferredPuts};
use super::error::engine;
use super::storage::{prefix_end, Entry, Packing, Storage, WriteBatch};
use super::StoreError;

/// sled 0.34.7 as a [`Storage`].
pub struct SledStorage {
    db: sled::Db,
    /// Puts not yet in the tree (see [`Storage::put_deferred`]).
    deferred: DeferredPuts,
    /// How waiting puts enter the tree; each as it is without one.
    packing: Option<Arc<dyn Packing>>,
    /// sled's data file. sled's `flush` ends in `sync_file_range` on Linux, which does not
    /// survive power loss (sled issue #1452), so the flusher also fsyncs this file itself.
    data_file: Mutex<File>,
}

impl SledStorage {
    /// Opens (or creates) the sled store in `dir`; the caller explains a failure.
    pub fn open(dir: &Path, cache_bytes: u64) -> Result<SledStorage, sled::Error> {
        let db = sled::Config::new()
            .path(dir)
            .cache_capacity(cache_bytes)
            .open()?;
        let data_file = File::open(dir.join("db"))?;
        Ok(SledStorage {
            db,
            deferred: DeferredPuts::default(),
            packing: None,
            data_file: Mutex::new(data_file),
        })
    }

    /// Waiting puts will enter the tree as `packing` packs them.
    pub fn with_packing(mut self, packing: Arc<dyn Packing>) -> SledStorage {
        self.packing = Some(packing);
        self
    }
}

impl SledStorage {
    fn insert(&self, key: &[u8], value: impl Into<IVec>) -> Result<(), StoreError> {
        self.db
            .insert(key, value)
            .map(drop)
            .map_err(engine("writing to the store"))
    }

    /// The tree's entries from key `from` up to, not including, `to` (to the end without
    /// one), without the waiting puts.
    fn tree_range(&self, from: &[u8], to: Option<&[u8]>) -> sled::Iter {
        match to {
            Some(to) => self.db.range(from..to),
            None => self.db.range(from..),
        }
    }

    /// Writes one run of waiting puts (see [`DeferredPuts::apply_all`]): packed, when the
    /// packing gave their keys the group `prefix`, with the tree's last entry of that group.
    fn write_waiting(
        &self,
        prefix: Option<&[u8]>,
        run: &[(&[u8], &[u8])],
    ) -> Result<(), StoreError> {
        let (Some(packing), Some(prefix)) = (&self.packing, prefix) else {
            return run
                .iter()
                .try_for_each(|(key, value)| self.insert(key, *value));
        };
        let last = self
            .tree_range(prefix, prefix_end(prefix).as_deref())
            .next_back()
            .transpose()
            .map_err(engine("reading the store"))?;
        let packed = packing.pack(
            last.as_ref()
                .map(|(key, value)| (key.as_ref(), value.as_ref())),
            run,
        )?;
        packed
            .into_iter()
            .try_for_each(|(key, value)| self.insert(&key, value))
    }

    /// How many puts wait to enter the tree.
    #[cfg(test)]
    pub(crate) fn waiting_puts(&self) -> usize {
        self.deferred.len()
    }

    /// Before a direct write of `key`: its waiting put, if any, goes first.
    fn apply_waiting(&self, key: &[u8]) -> Result<(), StoreError> {
        self.deferred
            .apply_key(key, |key, value| self.insert(key, value.clone()))
    }
}

impl Storage for SledStorage {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        if let Some(value) = self.deferred.get(key) {
            return Ok(Some(value.to_vec()));
        }
        Ok(self
            .db
            .get(key)
            .map_err(engine("reading the store"))?
            .map(|value| value.to_vec()))
    }

    fn apply(&self, batch: WriteBatch) -> Result<(), StoreError> {
        self.apply_deferred()?;
        let mut sled_batch = sled::Batch::default();
        for (key, value) in batch.ops {
            match value {
                Some(value) => sled_batch.insert(key, value),
                None => sled_batch.remove(key),
            }
        }
        self.db
            .apply_batch(sled_batch)
            .map_err(engine("writing to the store"))
    }

    fn put(&self, key: &[u8], value: Vec<u8>) -> Result<(), StoreError> {
        self.apply_waiting(key)?;
        self.insert(key, value)
    }

    fn put_deferred(&self, key: &[u8], value: Vec<u8>) -> Result<(), StoreError> {
        match self.deferred.defer(key, IVec::from(value)) {
            Ok(()) => Ok(()),
            Err(value) => self.insert(key, value),
        }
    }

    fn apply_deferred(&self) -> Result<(), StoreError> {
        self.deferred
            .apply_all(
                |key| self.packing.as_ref()?.group_len(key),
                |prefix, run| self.write_waiting(prefix, run),
            )
            .map(drop)
    }

    fn remove(&self, key: &[u8]) -> Result<(), StoreError> {
        self.apply_waiting(key)?;
        self.db
            .remove(key)
            .map(drop)
            .map_err(engine("removing from the store"))
    }

    fn remove_if(&self, key: &[u8], expected: &[u8]) -> Result<bool, StoreError> {
        self.apply_waiting(key)?;
        self.db
            .compare_and_swap(key, Some(expected), None::<&[u8]>)
            .map(|swapped| swapped.is_ok())
            .map_err(engine("removing from the store"))
    }

    fn scan(&self, prefix: &[u8], skip: usize, limit: usize) -> Result<Vec<Entry>, StoreError> {
        let mut entries = Vec::new();
        let mut skipped = 0;
        if limit == 0 {
            return Ok(entries);
        }
        self.for_each_between(prefix, prefix_end(prefix).as_deref(), &mut |key, value| {
            if skipped < skip {
                skipped += 1;
                return true;
            }
            entries.push((key.to_vec(), value.to_vec()));
            entries.len() < limit
        })?;
        Ok(entries)
    }

    fn for_each_between(
        &self,
        from: &[u8],
        to: Option<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError> {
        // The waiting puts first: one applied meanwhile is then in the tree.
        let waiting = self.deferred.between(from, to);
        visit_merged(waiting, self.tree_range(from, to), visit)
            .map_err(engine("scanning the store"))
    }

    fn last_between(&self, from: &[u8], to: Option<&[u8]>) -> Result<Option<Entry>, StoreError> {
        let waiting = self.deferred.last_between(from, to);
        let stored = self
            .tree_range(from, to)
            .next_back()
            .transpose()
            .map_err(engine("reading the store"))?;
        Ok(match (waiting, stored) {
            (Some(waiting), Some(stored)) if stored.0 > waiting.0 => Some(stored),
            (Some(waiting), _) => Some(waiting),
            (None, stored) => stored,
        }
        .map(|(key, value)| (key.to_vec(), value.to_vec())))
    }

    fn size_on_disk(&self) -> Result<u64, StoreError> {
        self.db
            .size_on_disk()
            .map_err(engine("measuring the store's size"))
    }

    fn sync(&self) -> Result<(), StoreError> {
        self.apply_deferred()?;
        self.db.flush().map_err(engine("flushing the store"))?;
        let file = self
            .data_file
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        file.sync_data().map_err(|source| StoreError::Io {
            context: "fsync of the store's data file".into(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::*;

    fn open(dir: &Path) -> SledStorage {
        SledStorage::open(dir, 1 << 22).unwrap()
    }

    fn entries(storage: &SledStorage, from: &[u8], to: Option<&[u8]>) -> Vec<Entry> {
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
    fn every_read_sees_a_deferred_put_before_and_after_it_is_applied() {
        let dir = tempfile::tempdir().unwrap();
        let storage = open(dir.path());
        storage.put(b"o1", b"stored".to_vec()).unwrap();
        storage.put(b"o3", b"stored".to_vec()).unwrap();
        storage.put_deferred(b"o2", b"waiting".to_vec()).unwrap();
        storage.put_deferred(b"o3", b"newer".to_vec()).unwrap();
        storage.put_deferred(b"o4", b"waiting".to_vec()).unwrap();
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
            storage.apply_deferred().unwrap();
        }
        assert_eq!(storage.deferred.len(), 0);
    }

    #[test]
    fn a_sync_applies_the_waiting_puts_and_makes_them_durable() {
        let dir = tempfile::tempdir().unwrap();
        {
            let storage = open(dir.path());
            storage.put_deferred(b"o1", b"waiting".to_vec()).unwrap();
            storage.sync().unwrap();
            assert_eq!(storage.deferred.len(), 0);
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
        storage.put_deferred(b"a", b"old".to_vec()).unwrap();
        storage.put(b"a", b"direct".to_vec()).unwrap();
        storage.put_deferred(b"b", b"old".to_vec()).unwrap();
        assert!(storage.remove_if(b"b", b"old").unwrap());
        storage.put_deferred(b"c", b"old".to_vec()).unwrap();
        storage.remove(b"c").unwrap();
        storage.put_deferred(b"d", b"old".to_vec()).unwrap();
        let mut batch = WriteBatch::default();
        batch.put(b"d".to_vec(), b"batch".to_vec());
        storage.apply(batch).unwrap();
        storage.apply_deferred().unwrap();
        assert_eq!(storage.get(b"a").unwrap(), Some(b"direct".to_vec()));
        assert_eq!(storage.get(b"b").unwrap(), None);
        assert_eq!(storage.get(b"c").unwrap(), None);
        assert_eq!(storage.get(b"d").unwrap(), Some(b"batch".to_vec()));
    }

    #[test]
    fn past_its_capacity_a_put_goes_straight_to_the_tree() {
        let dir = tempfile::tempdir().unwrap();
        let mut storage = open(dir.path());
        storage.deferred = DeferredPuts::with_capacity(1);
        storage.put_deferred(b"a", b"1".to_vec()).unwrap();
        storage.put_deferred(b"b", b"2".to_vec()).unwrap();
        assert_eq!(storage.deferred.len(), 1);
        assert_eq!(storage.db.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
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
                        .put_deferred(&key(n), n.to_be_bytes().to_vec())
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
                    storage.apply_deferred().unwrap();
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
        storage.apply_deferred().unwrap();
        assert_eq!(entries(&storage, b"o", None).len(), 20_000);
        assert!(checks > 0);
    }
}
