//! sled 0.34.7 as a [`Storage`]: one tree, single-key writes, batches through `apply_batch`,
//! and a sync that ends in our own fsync. Must not touch: record encoding, key layout, group
//! commit.

use std::fs::File;
use std::path::Path;
use std::sync::Mutex;

use super::error::engine;
use super::storage::{Entry, Storage, WriteBatch};
use super::StoreError;

/// sled 0.34.7 as a [`Storage`].
pub struct SledStorage {
    db: sled::Db,
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
            data_file: Mutex::new(data_file),
        })
    }
}

impl Storage for SledStorage {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .db
            .get(key)
            .map_err(engine("reading the store"))?
            .map(|value| value.to_vec()))
    }

    fn apply(&self, batch: WriteBatch) -> Result<(), StoreError> {
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
        self.db
            .insert(key, value)
            .map(drop)
            .map_err(engine("writing to the store"))
    }

    fn remove(&self, key: &[u8]) -> Result<(), StoreError> {
        self.db
            .remove(key)
            .map(drop)
            .map_err(engine("removing from the store"))
    }

    fn remove_if(&self, key: &[u8], expected: &[u8]) -> Result<bool, StoreError> {
        self.db
            .compare_and_swap(key, Some(expected), None::<&[u8]>)
            .map(|swapped| swapped.is_ok())
            .map_err(engine("removing from the store"))
    }

    fn scan(&self, prefix: &[u8], skip: usize, limit: usize) -> Result<Vec<Entry>, StoreError> {
        self.db
            .scan_prefix(prefix)
            .skip(skip)
            .take(limit)
            .map(|entry| {
                entry
                    .map(|(key, value)| (key.to_vec(), value.to_vec()))
                    .map_err(engine("scanning the store"))
            })
            .collect()
    }

    fn for_each_between(
        &self,
        from: &[u8],
        to: Option<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError> {
        let entries = match to {
            Some(to) => self.db.range(from..to),
            None => self.db.range(from..),
        };
        for entry in entries {
            let (key, value) = entry.map_err(engine("scanning the store"))?;
            if !visit(&key, &value) {
                break;
            }
        }
        Ok(())
    }

    fn last_between(&self, from: &[u8], to: Option<&[u8]>) -> Result<Option<Entry>, StoreError> {
        let last = match to {
            Some(to) => self.db.range(from..to).next_back(),
            None => self.db.range(from..).next_back(),
        };
        last.transpose()
            .map(|entry| entry.map(|(key, value)| (key.to_vec(), value.to_vec())))
            .map_err(engine("reading the store"))
    }

    fn size_on_disk(&self) -> Result<u64, StoreError> {
        self.db
            .size_on_disk()
            .map_err(engine("measuring the store's size"))
    }

    fn sync(&self) -> Result<(), StoreError> {
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
