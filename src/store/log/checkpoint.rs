//! Checkpoints: the snapshot made durable behind the write-ahead log ([`super::wal`]), a
//! segment at a time, on a thread of its own. When group commit moves on from a segment,
//! every write that segment holds is already in the pending layer or the snapshot's memory (a
//! writer hands its writes to group commit only after making them), so one pass applying the
//! pending writes, then one sled flush and fsync, puts them all on disk. The same flush
//! records that the log now starts at the next segment (`m wal-from`, written just before
//! it: sled recovers a prefix of its own log, so the mark is never on disk without the
//! writes before it). The segment is then renamed to become the writer's next spare. The
//! thread also keeps a spare ready from the start, reusing an old segment or creating one,
//! and tries again every [`RETRY_SPARE`] while it cannot (the writer meanwhile grows its
//! segment).
//!
//! A failed flush or fsync is fatal, as in group commit: sled's state can no longer be
//! trusted to reach the disk.
//!
//! Must not touch: the log's format, group commit, what the writes mean.

use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use super::wal::{Segment, SpareSlot, WalDir};
use crate::metrics::METRICS;
use crate::store::error::FatalHandler;
use crate::store::error::StoreError;
use crate::store::keys;
use crate::store::pending::Storage;

/// How long the checkpointer waits before trying again to make a spare segment it could not.
pub const RETRY_SPARE: Duration = Duration::from_secs(1);

/// The segments the log may reuse, and the number the next spare takes.
pub struct Segments {
    /// Segments whose writes are all in the snapshot on disk, oldest first.
    pub reusable: Vec<u64>,
    /// The sequence number of the next spare.
    pub next_seq: u64,
}

/// The key under which the snapshot records where the log starts (`m wal-from`).
const LOG_START_KEY: &[u8] = keys::WAL_FROM;

/// Records in `storage`, durably, that the log starts at segment `from`.
pub fn mark_log_start(storage: &dyn Storage, from: u64) -> Result<(), StoreError> {
    // The writes the log holds before `from` reach sled's log ahead of the mark: sled
    // recovers a prefix of its log, so the mark must never be on disk without them.
    storage.apply_pending()?;
    storage.put(LOG_START_KEY, from.to_be_bytes().to_vec())?;
    storage.sync()
}

/// Where the log starts, as the last checkpoint recorded it (0 for a store that has none).
pub fn log_start(storage: &dyn Storage) -> Result<u64, StoreError> {
    Ok(storage
        .get(LOG_START_KEY)?
        .and_then(|value| value.try_into().ok().map(u64::from_be_bytes))
        .unwrap_or(0))
}

/// Runs checkpoints until the log writer (the sender of `finished`) is gone.
pub fn run(
    storage: Arc<dyn Storage>,
    wal: WalDir,
    spare: Arc<SpareSlot>,
    finished: Receiver<Segment>,
    mut segments: Segments,
    on_fatal: FatalHandler,
) {
    // One spare is all the writer uses; older segments beyond it are not needed.
    while segments.reusable.len() > 1 {
        let extra = segments.reusable.remove(0);
        if let Err(error) = wal.remove(extra) {
            tracing::warn!(%error, "could not remove a log segment left over");
        }
    }
    let mut warned = false;
    loop {
        if !spare.is_full() {
            match prepare_spare(&wal, &mut segments) {
                Ok(segment) => {
                    spare.put(segment);
                    warned = false;
                }
                Err(error) if !warned => {
                    tracing::warn!(
                        %error,
                        "could not make the next log segment ready; the current one grows \
                         until it can"
                    );
                    warned = true;
                }
                Err(_) => {}
            }
        }
        match finished.recv_timeout(RETRY_SPARE) {
            Ok(segment) => {
                let seq = segment.seq();
                drop(segment);
                if let Err(error) = mark_log_start(&*storage, seq + 1) {
                    on_fatal(&error);
                    return;
                }
                METRICS.wal_checkpoints.inc();
                segments.reusable.push(seq);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// The next spare: an old segment renamed, or a new one. A number or an old segment that
/// failed is not tried again (gaps between numbers are harmless), so that a half-done rename
/// never blocks the next attempt.
fn prepare_spare(wal: &WalDir, segments: &mut Segments) -> Result<Segment, StoreError> {
    let seq = segments.next_seq;
    segments.next_seq += 1;
    if segments.reusable.is_empty() {
        wal.create(seq)
    } else {
        let old = segments.reusable.remove(0);
        wal.recycle(old, seq)
    }
}
