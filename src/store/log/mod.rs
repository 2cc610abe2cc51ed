//! The log: the top layer of the store, the one that acknowledges. A change is made in the
//! pending layer (where every read sees it at once) and its single-key writes, encoded as a
//! [`wal::LogEntry`], are handed to the log; its writer is answered once the log says they
//! are durable ([`Written::durable`]), or at once with durability off
//! ([`Durability::Background`]: the log still holds them, synced a moment later). Behind the
//! log, checkpoints apply the pending writes to the snapshot and flush it, and then the log
//! may forget what it held ([`checkpoint`]); at open, the log replays into the pending layer
//! what the snapshot does not hold yet ([`open`]).
//!
//! [`ChangeLog`] is all the store asks of a log, so that another log (a replicated one) can
//! stand in without touching the layers below: today [`FileLog`] (a write-ahead log on the
//! local disk with group commit: [`wal`], [`commit`]) or [`NoLog`] (no log: tools that load
//! a store, a standby's replica).
//!
//! Must not touch: what the writes mean (keys and records belong to the repository), how the
//! pending layer packs what it applies.

pub mod checkpoint;
pub mod commit;
pub mod remote;
pub mod saturation;
pub mod wal;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use super::error::StoreError;
use super::pending::Storage;
use commit::{Committer, Pacing};
use wal::WalDir;

use super::error::FatalHandler;

/// What is to happen once a write is on disk, before its writer is answered (publishing
/// what it wrote, releasing what the writer held while it was made). Group commit runs it on
/// its own thread right after the sync, so no task has to be woken for it; without
/// durability it runs at once. It is dropped unrun if the write never reaches the disk, so
/// whatever it holds is released either way.
pub type OnDurable = Box<dyn FnOnce() + Send>;

/// Whether a write is acknowledged only once it is on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Every write goes to the write-ahead log, and is answered once group commit has synced
    /// it (the default); under heavy load a sync may wait up to `commit_interval` for writers
    /// to gather (see [`commit`]).
    Sync {
        /// How long after a busy sync's start the next may wait for writers; zero for never.
        commit_interval: Duration,
    },
    /// Every write goes to the write-ahead log, as with `Sync`, but is answered at once;
    /// the log is synced in the background, at most once every `commit_interval` (`serve
    /// --durability off`). A crash loses the writes of the last sync or so; a graceful stop
    /// loses none.
    Background {
        /// The least time from one sync's start to the next's (sooner once 1,024 writes
        /// wait); zero for a sync as soon as the previous ends.
        commit_interval: Duration,
    },
    /// No log: writes are answered at once and enter the snapshot directly, which flushes
    /// in the background (tools that load a store, a standby's replica). Loses recent
    /// writes on a crash.
    Unlogged,
}

/// A write made in the pending layer, on its way to disk: answer its client only once
/// [`Written::durable`] completes. Dropping it drops nothing but the wait.
#[must_use = "a write may be acknowledged only once it is durable"]
pub struct Written {
    /// Completes once the log holds the write durably; `None` when the write is answered
    /// at once (durability off, or no log).
    on_disk: Option<oneshot::Receiver<()>>,
}

impl Written {
    /// Completes when the write, and every write submitted before it, is on disk (at once
    /// for a write answered at once).
    pub async fn durable(self) -> Result<(), StoreError> {
        match self.on_disk {
            None => Ok(()),
            Some(on_disk) => on_disk.await.map_err(|_| StoreError::NotDurable),
        }
    }
}

/// What a pipelined log calls when one of its syncs under way finishes (it wakes the
/// flusher: see `commit::Log::set_waker`).
pub type SyncWaker = Arc<dyn Fn() + Send + Sync>;

/// The largest change (its encoded writes, a [`wal::LogEntry`]'s bytes) a log takes now:
/// a replicated changelog's messages are at most its servers' `max_payload`, which it reads
/// from the server it is connected to.
pub type EntryLimit = Arc<dyn Fn() -> usize + Send + Sync>;

/// What the store asks of a log.
pub trait ChangeLog: Send + Sync {
    /// Hands the encoded writes of one change (already made in the pending layer; none for
    /// a bare wait) to the log, with what is to run once they are durable.
    fn submit(&self, writes: Vec<u8>, on_durable: Option<OnDurable>)
        -> Result<Written, StoreError>;
    /// Whether the log makes writes durable, so that a write may wait in the pending layer
    /// instead of entering the snapshot at once.
    fn is_durable(&self) -> bool;
    /// Answers every write submitted so far, stops, and leaves the snapshot holding
    /// everything the log held (at close).
    fn close(&mut self, storage: &dyn Storage) -> Result<(), StoreError>;
    /// The largest change it takes, if it has a limit (the local write-ahead log has none:
    /// a frame grows its segment).
    fn max_entry_bytes(&self) -> Option<usize> {
        None
    }
}

/// The write-ahead log on the local disk, with group commit and checkpoints.
pub struct FileLog {
    committer: Committer,
    answers: Answers,
}

/// When a [`FileLog`] answers a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answers {
    /// Once it is on disk ([`Durability::Sync`]).
    OnceDurable,
    /// At once, the log syncing it in the background ([`Durability::Background`]).
    AtOnce,
}

impl Committer {
    /// [`Committer::submit`], as the [`Written`] a [`ChangeLog`] answers with.
    fn written(
        &self,
        writes: Vec<u8>,
        on_durable: Option<OnDurable>,
    ) -> Result<Written, StoreError> {
        Ok(Written {
            on_disk: Some(self.submit(writes, on_durable)?),
        })
    }
}

impl ChangeLog for FileLog {
    fn submit(
        &self,
        writes: Vec<u8>,
        on_durable: Option<OnDurable>,
    ) -> Result<Written, StoreError> {
        // A bare wait (a barrier: a move, a backup) waits for the disk either way.
        if self.answers == Answers::OnceDurable || writes.is_empty() {
            return self.committer.written(writes, on_durable);
        }
        Ok(Written {
            on_disk: self.committer.submit_in_background(writes, on_durable)?,
        })
    }

    fn is_durable(&self) -> bool {
        true
    }

    fn close(&mut self, storage: &dyn Storage) -> Result<(), StoreError> {
        match self.committer.stop() {
            // Everything logged is in the snapshot once it is flushed: no segment needs
            // replaying.
            Some(last_segment) => checkpoint::mark_log_start(storage, last_segment + 1),
            None => storage.sync(),
        }
    }
}

/// No log ([`Durability::Unlogged`]): writes are answered at once and enter the snapshot
/// directly.
pub struct NoLog;

impl ChangeLog for NoLog {
    fn submit(
        &self,
        _writes: Vec<u8>,
        on_durable: Option<OnDurable>,
    ) -> Result<Written, StoreError> {
        if let Some(on_durable) = on_durable {
            on_durable();
        }
        Ok(Written { on_disk: None })
    }

    fn is_durable(&self) -> bool {
        false
    }

    fn close(&mut self, storage: &dyn Storage) -> Result<(), StoreError> {
        storage.sync()
    }
}

/// Replays into `storage` what the write-ahead log in `dir` holds beyond the last
/// checkpoint, makes that durable, and, with a log ([`Durability::Sync`] or
/// [`Durability::Background`]), starts group commit on a fresh segment (see [`wal`]).
pub fn open(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    durability: Durability,
    on_fatal: &FatalHandler,
) -> Result<Box<dyn ChangeLog>, StoreError> {
    let wal = WalDir::open(dir)?;
    let started = std::time::Instant::now();
    let recovered = wal::recover(&wal, checkpoint::log_start(&**storage)?, &**storage)?;
    // The replayed writes are durable, and the log starts afresh, before any segment is
    // written again.
    checkpoint::mark_log_start(&**storage, recovered.next_seq)?;
    if recovered.frames > 0 {
        tracing::info!(
            frames = recovered.frames,
            writes = recovered.writes,
            millis = started.elapsed().as_millis() as u64,
            "replayed the write-ahead log's writes that the store did not hold yet"
        );
    }
    let (commit_interval, answers, pacing) = match durability {
        Durability::Unlogged => return Ok(Box::new(NoLog)),
        Durability::Sync { commit_interval } => (
            commit_interval,
            Answers::OnceDurable,
            Pacing::WhileSaturated,
        ),
        Durability::Background { commit_interval } => {
            (commit_interval, Answers::AtOnce, Pacing::Always)
        }
    };
    let mut reusable = recovered.reusable;
    let seq = recovered.next_seq;
    let segment = if reusable.is_empty() {
        wal.create(seq)?
    } else {
        wal.recycle(reusable.remove(0), seq)?
    };
    let segments = checkpoint::Segments {
        reusable,
        next_seq: seq + 1,
    };
    let committer = Committer::start(
        storage.clone(),
        wal,
        segment,
        segments,
        on_fatal.clone(),
        commit_interval,
        pacing,
    )?;
    Ok(Box::new(FileLog { committer, answers }))
}
