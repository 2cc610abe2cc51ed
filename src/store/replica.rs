//! A node's copy of a replicated group's store, while it follows the group's changelog: the
//! same pending layer over sled as [`Store`], written only by what the changelog carries.
//! Each changelog message is the payload of one group commit (the single-key writes of
//! whole changes, as the write-ahead log frames them: [`wal::parse_writes`]); a standby
//! applies them in order ([`Replica::apply`]) and, every so often, records durably the
//! sequence number of the last one its snapshot holds ([`Replica::checkpoint`]). Replaying
//! from any earlier point gives the same state ([`wal::replay`]), so a restart resumes after
//! the recorded number.
//!
//! A replica snapshot (for a node that joins empty, or has fallen behind the changelog's
//! trimmed start) is every entry but the node-local ones ([`keys::NODE_LOCAL`]), written as
//! set-writes in the same encoding ([`Replica::snapshot_entries`], [`Replica::load`]).
//!
//! [`Replica::promote`] turns the copy into the [`Store`] of the group's primary: its writes
//! go to a remote [`Log`] (the changelog). From then on the local copy may hold writes the
//! changelog refused (a write is made in the pending layer before it is published), so the
//! copy is marked, durably, before the first write, and a marked copy is never followed
//! again: [`Replica::open`] reports it ([`Replica::was_primary`]) for the caller to wipe it
//! ([`wipe`]) and rebuild it from the group.
//!
//! Must not touch: the network (what a changelog is, how it is read: `crate::replication`),
//! what the writes mean.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::disk::DiskWatch;
use super::error::FatalHandler;
use super::log::commit::Log;
use super::log::remote::RemoteLog;
use super::log::wal::{self, LogEntry};
use super::{keys, Storage, Store, StoreError, StoreOptions};

/// A node's copy of the group's store, following the changelog.
pub struct Replica {
    storage: Arc<dyn Storage>,
    disk: DiskWatch,
}

impl Replica {
    /// Opens (creating when empty) the copy in `dir`.
    pub fn open(dir: &Path, options: StoreOptions) -> Result<Replica, StoreError> {
        let (storage, disk) = Store::open_storage(dir, options)?;
        Ok(Replica { storage, disk })
    }

    /// The sequence number of the last changelog message the copy holds (0: none).
    pub fn applied(&self) -> Result<u64, StoreError> {
        Ok(self
            .storage
            .get(keys::REPLICA_APPLIED)?
            .and_then(|value| keys::trailing_id(&value))
            .unwrap_or(0))
    }

    /// Whether the copy took writes as a primary (it must then be rebuilt before it follows).
    pub fn was_primary(&self) -> Result<bool, StoreError> {
        Ok(self.storage.get(keys::REPLICA_PRIMARY)?.is_some())
    }

    /// Whether the copy holds no data (only node-local keys, if any).
    pub fn is_empty(&self) -> Result<bool, StoreError> {
        let mut empty = true;
        self.storage.for_each(&[], &mut |key, _| {
            empty = keys::NODE_LOCAL.contains(&key);
            empty
        })?;
        Ok(empty)
    }

    /// Applies the writes of one changelog message (a group commit's payload); how many.
    /// Not durable until the next [`Replica::checkpoint`].
    pub fn apply(&self, payload: &[u8]) -> Result<u64, StoreError> {
        let writes = wal::parse_writes(payload).ok_or_else(|| StoreError::Engine {
            context: "applying a changelog message".into(),
            detail: "its writes do not parse (a message boxsub did not write, or damage)".into(),
        })?;
        wal::replay(&*self.storage, writes)
    }

    /// Makes everything applied durable, and records that the copy holds the changelog
    /// through message `applied`.
    pub fn checkpoint(&self, applied: u64) -> Result<(), StoreError> {
        self.storage.apply_pending()?;
        self.storage
            .put(keys::REPLICA_APPLIED, applied.to_be_bytes().to_vec())?;
        self.storage.sync()
    }

    /// Loads one part of a replica snapshot (see [`Replica::snapshot_entries`]); the caller
    /// checkpoints at the snapshot's sequence number once every part is in.
    pub fn load(&self, part: &[u8]) -> Result<u64, StoreError> {
        self.apply(part)
    }

    /// Calls `part` with the copy's entries, node-local ones left out, encoded as set-writes
    /// in parts of at most `part_bytes` each (unless one entry alone is larger), in key
    /// order. Reads the copy as it stands: the
    /// caller applies nothing meanwhile.
    pub fn snapshot_entries(
        &self,
        part_bytes: usize,
        part: &mut dyn FnMut(Vec<u8>) -> Result<(), StoreError>,
    ) -> Result<u64, StoreError> {
        self.storage.apply_pending()?;
        let mut entries = 0;
        let mut current = LogEntry::new();
        let mut current_bytes = 0;
        let mut failed = None;
        self.storage.for_each(&[], &mut |key, value| {
            if keys::NODE_LOCAL.contains(&key) {
                return true;
            }
            let size = LogEntry::encoded_len(key, value);
            if current_bytes > 0 && current_bytes + size > part_bytes {
                current_bytes = 0;
                if let Err(error) = part(std::mem::take(&mut current).into_bytes()) {
                    failed = Some(error);
                    return false;
                }
            }
            current.set(key, value);
            current_bytes += size;
            entries += 1;
            true
        })?;
        if let Some(error) = failed {
            return Err(error);
        }
        if current_bytes > 0 {
            part(current.into_bytes())?;
        }
        Ok(entries)
    }

    /// Marks the copy as a primary's, durably, and turns it into the [`Store`] whose writes
    /// are acknowledged once `log` holds them.
    pub fn promote(
        self,
        log: impl Log,
        on_fatal: FatalHandler,
        commit_interval: Duration,
    ) -> Result<Store, StoreError> {
        self.storage.put(keys::REPLICA_PRIMARY, b"1".to_vec())?;
        self.storage.sync()?;
        let log = RemoteLog::start(self.storage.clone(), log, on_fatal.clone(), commit_interval)?;
        Ok(Store::with_log(
            self.storage,
            Box::new(log),
            on_fatal,
            Some(self.disk),
        ))
    }

    /// Makes everything applied durable, before the copy is dropped.
    pub fn close(&self) -> Result<(), StoreError> {
        self.storage.sync()
    }
}

/// The files of a store in a data directory: sled's, the format file, the write-ahead log.
/// Backups and anything else an operator keeps there are not touched.
const STORE_FILES: [&str; 5] = [
    "db",
    "conf",
    "blobs",
    super::format::FILE_NAME,
    wal::DIR_NAME,
];

/// Removes the store in `dir` (which no process may have open), so that the node rebuilds it
/// from its group; what is removed is logged.
pub fn wipe(dir: &Path) -> Result<(), StoreError> {
    for entry in super::opening::entries_of(dir)? {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !(STORE_FILES.contains(&name.as_str()) || name.starts_with("snap.")) {
            continue;
        }
        let path = entry.path();
        let removed = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        removed.map_err(|source| StoreError::Io {
            context: format!("removing {} to rebuild the store", path.display()),
            source,
        })?;
    }
    tracing::warn!(data_dir = %dir.display(), "removed this node's copy of the store, to rebuild it from the group");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::disk::Reserve;
    use crate::store::Durability;

    fn options() -> StoreOptions {
        StoreOptions {
            durability: Durability::Unlogged,
            cache_bytes: 1 << 20,
            reserve: Reserve::Bytes(0),
        }
    }

    fn writes(pairs: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut entry = LogEntry::new();
        for (key, value) in pairs {
            entry.set(key, value);
        }
        entry.into_bytes()
    }

    #[test]
    fn a_copy_resumes_after_its_checkpoint_and_a_snapshot_rebuilds_it_elsewhere() {
        let dir = tempfile::tempdir().unwrap();
        {
            let replica = Replica::open(dir.path(), options()).unwrap();
            assert!(replica.is_empty().unwrap());
            assert_eq!(replica.applied().unwrap(), 0);
            replica.apply(&writes(&[(b"c1", b"one")])).unwrap();
            replica.apply(&writes(&[(b"c2", b"two")])).unwrap();
            replica.checkpoint(2).unwrap();
            replica.close().unwrap();
        }
        let replica = reopen(dir.path());
        assert_eq!(replica.applied().unwrap(), 2);
        assert!(!replica.is_empty().unwrap());
        let mut parts = Vec::new();
        let entries = replica
            .snapshot_entries(1, &mut |part| {
                parts.push(part);
                Ok(())
            })
            .unwrap();
        assert_eq!(entries, 2, "node-local keys stay out");
        assert_eq!(parts.len(), 2);
        let elsewhere = tempfile::tempdir().unwrap();
        let copy = Replica::open(elsewhere.path(), options()).unwrap();
        for part in &parts {
            copy.load(part).unwrap();
        }
        copy.checkpoint(2).unwrap();
        assert_eq!(
            copy.storage.get(b"c2").unwrap().as_deref(),
            Some(&b"two"[..])
        );
        assert_eq!(copy.applied().unwrap(), 2);
    }

    #[test]
    fn a_promoted_copy_is_marked_and_a_wiped_one_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("backups")).unwrap();
        {
            let replica = Replica::open(dir.path(), options()).unwrap();
            replica.apply(&writes(&[(b"c1", b"one")])).unwrap();
            replica.checkpoint(1).unwrap();
            replica
                .storage
                .put(keys::REPLICA_PRIMARY, b"1".to_vec())
                .unwrap();
            replica.close().unwrap();
        }
        let replica = reopen(dir.path());
        assert!(replica.was_primary().unwrap());
        drop(replica);
        std::thread::sleep(Duration::from_millis(100));
        wipe(dir.path()).unwrap();
        assert!(dir.path().join("backups").exists(), "backups are kept");
        let replica = reopen(dir.path());
        assert!(replica.is_empty().unwrap());
        assert!(!replica.was_primary().unwrap());
        assert_eq!(replica.applied().unwrap(), 0);
    }

    #[test]
    fn a_message_that_does_not_parse_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let replica = Replica::open(dir.path(), options()).unwrap();
        assert!(replica.apply(&[9, 0, 0]).is_err());
    }

    /// sled lets go of its lock a moment after the last handle is dropped.
    fn reopen(dir: &Path) -> Replica {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            match Replica::open(dir, options()) {
                Ok(replica) => return replica,
                Err(_) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Err(error) => panic!("reopening: {error}"),
            }
        }
    }
}
