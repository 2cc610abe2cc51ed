//! sled 0.34.7 as the [`Snapshot`]: one tree, single-key writes, batches through
//! `apply_batch`, and a flush that ends in our own fsync. sled also writes its log in the
//! background (its own flush every half second), which keeps the disk's use growing evenly
//! for the free-space watch to see; on a full disk that write fails where nobody hears it,
//! and sled then refuses every later read and write with its error. So any failure of sled to
//! reach the disk, on a read as on a write, goes to the handler the store gives
//! ([`Snapshot::on_io_failure`]), which stops the process rather than answer 503 for ever.
//! Must not touch: record encoding, key layout, pending writes, the log.

use std::fs::File;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

use sled::IVec;

use super::{Entry, Snapshot, WriteBatch};
use crate::store::error::FatalHandler;
use crate::store::error::{engine, StoreError};

/// sled 0.34.7 as the [`Snapshot`].
pub struct SledSnapshot {
    db: sled::Db,
    /// sled's data file. sled's `flush` ends in `sync_file_range` on Linux, which does not
    /// survive power loss (sled issue #1452), so a flush also fsyncs this file itself.
    data_file: Mutex<File>,
    /// Told of every failure to reach the disk, once the store is open.
    io_failure: OnceLock<FatalHandler>,
}

impl SledSnapshot {
    /// Opens (or creates) the sled store in `dir`; the caller explains a failure.
    pub fn open(dir: &Path, cache_bytes: u64) -> Result<SledSnapshot, sled::Error> {
        let db = sled::Config::new()
            .path(dir)
            .cache_capacity(cache_bytes)
            .open()?;
        let data_file = File::open(dir.join("db"))?;
        Ok(SledSnapshot {
            db,
            data_file: Mutex::new(data_file),
            io_failure: OnceLock::new(),
        })
    }

    /// Maps a sled error as [`engine`] does, telling the handler of a failure to reach the
    /// disk.
    fn failed<'a>(&'a self, context: &'a str) -> impl Fn(sled::Error) -> StoreError + 'a {
        move |error| {
            let disk = matches!(error, sled::Error::Io(_));
            let error = engine(context)(error);
            if disk {
                if let Some(handler) = self.io_failure.get() {
                    handler(&error);
                }
            }
            error
        }
    }

    /// The tree's entries from key `from` up to, not including, `to` (to the end without
    /// one).
    fn range(&self, from: &[u8], to: Option<&[u8]>) -> sled::Iter {
        match to {
            Some(to) => self.db.range(from..to),
            None => self.db.range(from..),
        }
    }
}

impl Snapshot for SledSnapshot {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .db
            .get(key)
            .map_err(self.failed("reading the store"))?
            .map(|value| value.to_vec()))
    }

    fn put(&self, key: &[u8], value: Vec<u8>) -> Result<(), StoreError> {
        self.db
            .insert(key, IVec::from(value))
            .map(drop)
            .map_err(self.failed("writing to the store"))
    }

    fn remove(&self, key: &[u8]) -> Result<(), StoreError> {
        self.db
            .remove(key)
            .map(drop)
            .map_err(self.failed("removing from the store"))
    }

    fn remove_if(&self, key: &[u8], expected: &[u8]) -> Result<bool, StoreError> {
        self.db
            .compare_and_swap(key, Some(expected), None::<&[u8]>)
            .map(|swapped| swapped.is_ok())
            .map_err(self.failed("removing from the store"))
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
            .map_err(self.failed("writing to the store"))
    }

    fn for_each_between(
        &self,
        from: &[u8],
        to: Option<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError> {
        for entry in self.range(from, to) {
            let (key, value) = entry.map_err(self.failed("scanning the store"))?;
            if !visit(&key, &value) {
                break;
            }
        }
        Ok(())
    }

    fn last_between(&self, from: &[u8], to: Option<&[u8]>) -> Result<Option<Entry>, StoreError> {
        Ok(self
            .range(from, to)
            .next_back()
            .transpose()
            .map_err(self.failed("reading the store"))?
            .map(|(key, value)| (key.to_vec(), value.to_vec())))
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.db.flush().map_err(self.failed("flushing the store"))?;
        let file = self
            .data_file
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        file.sync_data().map_err(|source| StoreError::Io {
            context: "fsync of the store's data file".into(),
            source,
        })
    }

    fn on_io_failure(&self, handler: FatalHandler) {
        let _ = self.io_failure.set(handler);
    }

    fn size_on_disk(&self) -> Result<u64, StoreError> {
        self.db
            .size_on_disk()
            .map_err(self.failed("measuring the store's size"))
    }
}
