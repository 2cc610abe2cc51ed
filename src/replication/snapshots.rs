//! Replica snapshots: how a standby writes one, and how a node loads the latest.
//!
//! - **Writing.** A caught-up standby writes a snapshot every `--changelog-snapshot-every`
//!   messages. It first spools its copy, as it stands at the last message applied, into a
//!   file of its data directory ([`SPOOL_FILE`]), in parts that fit the server's messages;
//!   applying waits for that, which reads the local disk only. Then an [`Upload`] task
//!   publishes the parts beside the follower, which goes on applying messages and watching
//!   the lease meanwhile: a primary that dies during a long upload is replaced as fast as
//!   any other, and a standby that takes over abandons its upload.
//! - **Many writers.** Two standbys may snapshot the same position. Each attempt publishes
//!   its parts under a subject of its own (`…part.SEQ.WRITER`, the node and a random number)
//!   and completes with a `done` message that names its writer and expects the latest
//!   `done` it read: the first to complete wins, the other's completion is refused and it
//!   removes its own parts. The winner then removes the parts no snapshot can use any more
//!   and trims the changelog behind the snapshot before its own, so a node up to one
//!   interval behind still catches up from the changelog.
//! - **Loading.** A node whose copy the changelog alone cannot bring up (it is empty and
//!   the changelog trimmed, or it fell behind the changelog's start) loads the latest
//!   snapshot's parts, checks their CRC-32, and follows on from its position.
//!
//! Must not touch: roles and the lease (the follower decides), what the writes mean.

use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;

use super::changelog::{Changelog, SnapshotInfo};
use super::{GroupSettings, ReplicationError};
use crate::metrics::METRICS;
use crate::store::replica::Replica;

/// The largest part of a replica snapshot (smaller where the server's messages are).
pub const SNAPSHOT_PART_BYTES: usize = 512 * 1024;

/// The file in the data directory a snapshot is spooled into before its upload.
pub const SPOOL_FILE: &str = "replica-snapshot.spool";

/// How often a standby looks at whether a snapshot is due.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// How long a part of a snapshot being loaded may take to arrive.
const PART_TIMEOUT: Duration = Duration::from_secs(30);

/// A standby's snapshots: the latest it knows of, and its upload under way.
#[derive(Default)]
pub struct Snapshots {
    latest: Option<SnapshotInfo>,
    looked: Option<Instant>,
    upload: Option<Upload>,
}

impl Snapshots {
    /// Starts a snapshot of `replica` (which holds the changelog through `applied`) if the
    /// latest is `snapshot_every` messages old and none of this node's is under way.
    /// Failures are logged and tried again later: a snapshot is an optimisation of joining.
    pub async fn maybe_start(
        &mut self,
        changelog: &Changelog,
        settings: &GroupSettings,
        replica: &Arc<Replica>,
        data_dir: &Path,
        applied: u64,
    ) {
        if let Some(upload) = &mut self.upload {
            match upload.outcome() {
                None => return,
                Some(Ok(Some(written))) => self.latest = Some(written),
                // Another node's completed first, or this one failed: look again before
                // deciding anything.
                Some(Ok(None)) => self.looked = None,
                Some(Err(error)) => {
                    tracing::warn!(%error, "uploading a replica snapshot failed");
                    self.looked = None;
                }
            }
            self.upload = None;
        }
        // The latest snapshot is looked up at most every second; whether one is due is
        // judged at every message against what was seen last, so that every standby starts
        // its snapshot at the same position (the one `snapshot_every` past the latest), and
        // the first to complete it wins.
        if self
            .looked
            .is_none_or(|looked| looked.elapsed() >= LOOK_EVERY)
        {
            self.looked = Some(Instant::now());
            match changelog.latest_snapshot().await {
                Ok(latest) => self.latest = latest,
                Err(error) => {
                    tracing::warn!(%error, "could not read the group's latest snapshot");
                    return;
                }
            }
        }
        let since = self.latest.as_ref().map_or(0, |latest| latest.seq);
        if applied < since + settings.snapshot_every {
            return;
        }
        match Upload::start(
            changelog,
            settings,
            replica,
            data_dir,
            applied,
            self.latest.clone(),
        )
        .await
        {
            Ok(upload) => self.upload = Some(upload),
            Err(error) => tracing::warn!(%error, "spooling a replica snapshot failed"),
        }
    }
}

/// One attempt at a snapshot, uploading beside the follower. Dropped before it ends (the
/// standby takes over, stops, or follows again from scratch), it is abandoned: its task is
/// cut off and its parts removed, unless it had begun to complete.
pub struct Upload {
    task: tokio::task::JoinHandle<Result<Option<SnapshotInfo>, ReplicationError>>,
    changelog: Changelog,
    seq: u64,
    writer: String,
    spool: PathBuf,
    /// Set once the task asks the stream to complete the snapshot: its parts may then be
    /// the latest snapshot's, and only a later snapshot may remove them.
    completing: Arc<AtomicBool>,
}

impl Upload {
    /// Spools the copy at `applied` (applying waits meanwhile) and starts uploading it.
    async fn start(
        changelog: &Changelog,
        settings: &GroupSettings,
        replica: &Arc<Replica>,
        data_dir: &Path,
        applied: u64,
        previous: Option<SnapshotInfo>,
    ) -> Result<Upload, ReplicationError> {
        let started = Instant::now();
        let spool = data_dir.join(SPOOL_FILE);
        let part_bytes = SNAPSHOT_PART_BYTES.min(changelog.message_limit());
        let spooled = {
            let (replica, spool) = (replica.clone(), spool.clone());
            tokio::task::spawn_blocking(move || {
                spool_snapshot(&replica, applied, &spool, part_bytes)
            })
            .await
            .map_err(|error| ReplicationError::Malformed(format!("snapshot task: {error}")))??
        };
        tracing::info!(
            seq = applied,
            parts = spooled.parts,
            entries = spooled.entries,
            millis = started.elapsed().as_millis() as u64,
            "spooled a replica snapshot; uploading it beside the changelog"
        );
        let writer = format!(
            "{}-{:016x}",
            subject_token(&settings.node),
            crate::random::nonce()
        );
        let completing = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(upload(
            changelog.clone(),
            spool.clone(),
            (applied, writer.clone()),
            spooled,
            previous,
            completing.clone(),
        ));
        Ok(Upload {
            task,
            changelog: changelog.clone(),
            seq: applied,
            writer,
            spool,
            completing,
        })
    }

    /// The task's outcome once it has ended: the snapshot it completed, if it won.
    fn outcome(&mut self) -> Option<Result<Option<SnapshotInfo>, ReplicationError>> {
        if !self.task.is_finished() {
            return None;
        }
        let outcome = futures_util::FutureExt::now_or_never(&mut self.task)?;
        Some(outcome.unwrap_or_else(|error| {
            Err(ReplicationError::Malformed(format!(
                "snapshot upload: {error}"
            )))
        }))
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        if self.task.is_finished() {
            return;
        }
        self.task.abort();
        let _ = std::fs::remove_file(&self.spool);
        if self.completing.load(Ordering::Acquire) {
            return;
        }
        tracing::info!(
            seq = self.seq,
            "abandoning this node's replica snapshot upload"
        );
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (changelog, seq, writer) = (self.changelog.clone(), self.seq, self.writer.clone());
            runtime.spawn(async move {
                if let Err(error) = changelog.remove_snapshot_parts(seq, &writer).await {
                    tracing::warn!(%error, "removing an abandoned snapshot's parts failed");
                }
            });
        }
    }
}

/// A snapshot spooled to a file: how many parts, entries, and their checksum.
#[derive(Debug, Clone, Copy)]
struct Spooled {
    parts: u64,
    entries: u64,
    crc32: u32,
}

/// A NATS subject token naming `node` (a node name may hold `.`, a subject's separator).
fn subject_token(node: &str) -> String {
    node.replace('.', "_")
}

/// Writes the copy, checkpointed at `applied`, into `spool` as parts of at most
/// `part_bytes` (each a little-endian u32 length and the part).
fn spool_snapshot(
    replica: &Replica,
    applied: u64,
    spool: &Path,
    part_bytes: usize,
) -> Result<Spooled, ReplicationError> {
    replica.checkpoint(applied)?;
    let file = std::fs::File::create(spool).map_err(|error| {
        ReplicationError::Malformed(format!("creating {}: {error}", spool.display()))
    })?;
    let mut out = BufWriter::new(file);
    let mut crc = crc32fast::Hasher::new();
    let mut parts = 0;
    let mut failed = None;
    let entries = replica.snapshot_entries(part_bytes, &mut |part| {
        crc.update(&part);
        parts += 1;
        let length = u32::try_from(part.len()).unwrap_or(u32::MAX).to_le_bytes();
        if let Err(error) = out.write_all(&length).and_then(|()| out.write_all(&part)) {
            failed = Some(error);
            return Err(crate::store::StoreError::NotDurable);
        }
        Ok(())
    });
    let written = match failed {
        Some(error) => Err(error),
        None => out.flush(),
    };
    written.map_err(|error| {
        ReplicationError::Malformed(format!("writing {}: {error}", spool.display()))
    })?;
    Ok(Spooled {
        parts,
        entries: entries?,
        crc32: crc.finalize(),
    })
}

/// Reads the next part of a spool.
fn read_part(spool: &mut BufReader<std::fs::File>) -> std::io::Result<Bytes> {
    let mut length = [0; 4];
    spool.read_exact(&mut length)?;
    let mut part = vec![0; u32::from_le_bytes(length) as usize];
    spool.read_exact(&mut part)?;
    Ok(Bytes::from(part))
}

/// Publishes the spooled parts and completes the snapshot; then removes the parts no
/// snapshot can use and trims the changelog behind `previous`. A refused or failed attempt
/// removes its own parts. The snapshot completed, if this one won.
async fn upload(
    changelog: Changelog,
    spool: PathBuf,
    (seq, writer): (u64, String),
    spooled: Spooled,
    previous: Option<SnapshotInfo>,
    completing: Arc<AtomicBool>,
) -> Result<Option<SnapshotInfo>, ReplicationError> {
    let started = Instant::now();
    let published = async {
        let file = std::fs::File::open(&spool).map_err(|error| {
            ReplicationError::Malformed(format!("opening {}: {error}", spool.display()))
        })?;
        let mut reader = BufReader::new(file);
        for _ in 0..spooled.parts {
            let part = read_part(&mut reader).map_err(|error| {
                ReplicationError::Malformed(format!("reading {}: {error}", spool.display()))
            })?;
            changelog.put_snapshot_part(seq, &writer, part).await?;
        }
        completing.store(true, Ordering::Release);
        let previous_done = previous.as_ref().map_or(0, |previous| previous.done_at);
        changelog
            .finish_snapshot(seq, &writer, (spooled.parts, spooled.crc32), previous_done)
            .await
    }
    .await;
    let _ = std::fs::remove_file(&spool);
    match published {
        Ok(true) => {}
        Ok(false) => {
            tracing::info!(
                seq,
                "another node completed a snapshot first; this one is dropped"
            );
            changelog.remove_snapshot_parts(seq, &writer).await?;
            return Ok(None);
        }
        Err(error) => {
            if let Err(removing) = changelog.remove_snapshot_parts(seq, &writer).await {
                tracing::warn!(error = %removing, "removing a failed snapshot's parts failed");
            }
            return Err(error);
        }
    }
    METRICS.changelog_snapshots.inc();
    let latest = changelog.latest_snapshot().await?;
    let removed = match &latest {
        Some(latest) => changelog.remove_unusable_snapshot_parts(latest).await?,
        None => 0,
    };
    let mut trimmed = 0;
    if let Some(previous) = previous {
        trimmed = changelog.trim_below(previous.seq + 1).await?;
    }
    tracing::info!(
        seq,
        parts = spooled.parts,
        entries = spooled.entries,
        removed_part_sets = removed,
        trimmed,
        millis = started.elapsed().as_millis() as u64,
        "uploaded a replica snapshot and trimmed the changelog behind the previous one"
    );
    Ok(latest)
}

/// Loads the latest replica snapshot into `replica` (which must be empty); its position.
pub async fn load_snapshot(
    changelog: &Changelog,
    replica: &Arc<Replica>,
) -> Result<u64, ReplicationError> {
    let started = Instant::now();
    let Some(snapshot) = changelog.latest_snapshot().await? else {
        return Err(ReplicationError::Malformed(
            "the changelog was trimmed but the group has no snapshot".into(),
        ));
    };
    let mut parts = Box::pin(changelog.snapshot_parts(&snapshot).await?);
    let mut crc = crc32fast::Hasher::new();
    for _ in 0..snapshot.parts {
        let part = tokio::time::timeout(PART_TIMEOUT, parts.next())
            .await
            .map_err(|_| ReplicationError::Malformed("a snapshot part did not come".into()))?
            .ok_or_else(|| ReplicationError::Malformed("a snapshot ended early".into()))??;
        crc.update(&part);
        let replica = replica.clone();
        tokio::task::spawn_blocking(move || replica.load(&part))
            .await
            .map_err(|error| ReplicationError::Malformed(format!("replica task: {error}")))??;
    }
    if crc.finalize() != snapshot.crc32 {
        return Err(ReplicationError::Malformed(format!(
            "snapshot {} does not match its checksum",
            snapshot.seq
        )));
    }
    let seq = snapshot.seq;
    let loaded = replica.clone();
    tokio::task::spawn_blocking(move || loaded.checkpoint(seq))
        .await
        .map_err(|error| ReplicationError::Malformed(format!("replica task: {error}")))??;
    tracing::info!(
        seq,
        writer = %snapshot.writer,
        parts = snapshot.parts,
        millis = started.elapsed().as_millis() as u64,
        "loaded the group's replica snapshot"
    );
    Ok(seq)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_writer_is_one_subject_token() {
        assert_eq!(subject_token("node.a-1_b"), "node_a-1_b");
    }

    #[test]
    fn a_spool_gives_back_its_parts_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spool");
        let mut out = std::fs::File::create(&path).unwrap();
        for part in [&b"first"[..], b"", b"third part"] {
            out.write_all(&(part.len() as u32).to_le_bytes()).unwrap();
            out.write_all(part).unwrap();
        }
        drop(out);
        let mut reader = BufReader::new(std::fs::File::open(&path).unwrap());
        assert_eq!(
            read_part(&mut reader).unwrap(),
            Bytes::from_static(b"first")
        );
        assert_eq!(read_part(&mut reader).unwrap(), Bytes::new());
        assert_eq!(
            read_part(&mut reader).unwrap(),
            Bytes::from_static(b"third part")
        );
        assert!(
            read_part(&mut reader).is_err(),
            "nothing after the last part"
        );
    }
}
