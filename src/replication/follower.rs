//! The standby's side of the changelog: apply it, in order, into the node's copy of the
//! store, and take the primary's place once the stream has been quiet for a lease.
//!
//! - **Applying.** Messages are applied from the one after the copy's last
//!   ([`Replica::applied`]); every [`CHECKPOINT_EVERY`] messages or [`CHECKPOINT_AFTER`]
//!   (and whenever the stream goes quiet) the copy is made durable with its position, so a
//!   restart resumes there.
//! - **Catching up from a snapshot.** An empty copy whose stream was trimmed, or a copy that
//!   fell behind the stream's first message, cannot be brought up by the stream alone: the
//!   follower says so ([`Followed::NeedsSnapshot`]) and the supervisor rebuilds the copy
//!   from the latest replica snapshot ([`load_snapshot`]).
//! - **Taking over.** When no message has come for [`super::LEASE`] and the copy holds the
//!   whole stream, the follower publishes a takeover expecting the last message it applied.
//!   The stream takes it only if nothing came after that message, so two standbys never
//!   both take over, and a primary that was alive (its heartbeat came first) keeps its
//!   place. From the takeover on, the old primary's publishes are refused (see
//!   [`super::publisher`]).
//! - **Snapshots and trimming.** A caught-up standby writes a replica snapshot every
//!   `--changelog-snapshot-every` messages ([`write_snapshot`]) and then trims the stream
//!   below the previous snapshot's position: a node up to one snapshot interval behind
//!   still catches up from the stream; anything further back loads the latest snapshot.
//!
//! Must not touch: the service (the supervisor promotes), what the writes mean.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;

use super::changelog::{AppendError, Changelog, Kind, SnapshotInfo};
use super::{GroupSettings, ReplicationError, LEASE};
use crate::metrics::METRICS;
use crate::node::{Node, State};
use crate::store::replica::Replica;

/// How many applied messages a checkpoint may leave behind it.
pub const CHECKPOINT_EVERY: u64 = 1_000;
/// How long applied messages may wait for a checkpoint while they keep coming (one sled
/// flush a second at most; a quiet stream is checkpointed at once).
pub const CHECKPOINT_AFTER: Duration = Duration::from_secs(1);
/// How long the follower waits for a message before it looks at the lease.
const POLL: Duration = Duration::from_millis(200);
/// How long the consumer may deliver nothing while the changelog holds messages after the
/// copy's before the follower starts a new one: a consumer on a NATS server that died can
/// stop delivering without an error (seen with `kill -9` of a server under load).
const STUCK_AFTER: Duration = Duration::from_secs(2);
/// How often the follower asks the stream how far behind it is while messages flow.
const MEASURE_LAG_EVERY: Duration = Duration::from_secs(1);
/// The size of a replica snapshot's parts (a NATS message is at most 1 MiB by default).
pub const SNAPSHOT_PART_BYTES: usize = 512 * 1024;

/// How following ended.
pub enum Followed {
    /// This node published the takeover at this sequence number: it is the primary.
    TookOver(u64),
    /// The copy is behind the stream's first message: it must be rebuilt from a snapshot.
    NeedsSnapshot,
}

/// Applies the changelog into `replica` until this node takes over or the copy needs a
/// snapshot. Errors of the connection end it too (the supervisor starts again).
pub async fn follow(
    changelog: &Changelog,
    settings: &GroupSettings,
    replica: &Arc<Replica>,
    node: &Node,
) -> Result<Followed, ReplicationError> {
    let mut applied = blocking(replica, |replica| replica.applied()).await?;
    let (first, last) = changelog.bounds().await?;
    if applied + 1 < first {
        return Ok(Followed::NeedsSnapshot);
    }
    tracing::info!(
        applied,
        stream_last = last,
        "following the changelog from the message after this copy's last"
    );
    node.set_progress(applied, last.saturating_sub(applied));
    node.set_state(if last > applied {
        State::CatchingUp
    } else {
        State::Following
    });
    let mut messages = Box::pin(changelog.follow(applied + 1).await?);
    let mut last_seen = Instant::now();
    let mut checkpointed = applied;
    let mut checkpointed_at = Instant::now();
    let mut lag_measured = Instant::now();
    let mut stream_last = last;
    let mut snapshots = SnapshotSchedule::default();
    // The id of this node's last takeover whose acknowledgement did not come.
    let mut takeover_sent: Option<String> = None;
    loop {
        match tokio::time::timeout(POLL, messages.next()).await {
            Ok(Some(entry)) => {
                let entry = entry?;
                if entry.seq <= applied {
                    continue;
                }
                if entry.seq != applied + 1 {
                    tracing::warn!(
                        applied,
                        next = entry.seq,
                        "the changelog no longer holds the messages after this copy's"
                    );
                    return Ok(Followed::NeedsSnapshot);
                }
                if entry.kind == Kind::Writes {
                    let payload = entry.payload.clone();
                    blocking(replica, move |replica| replica.apply(&payload)).await?;
                }
                applied = entry.seq;
                last_seen = Instant::now();
                stream_last = stream_last.max(applied);
                if entry.kind == Kind::Takeover && takeover_sent.as_deref() == Some(&entry.id) {
                    // Our own takeover, whose acknowledgement was lost: it stands.
                    blocking(replica, move |replica| replica.checkpoint(applied)).await?;
                    return Ok(Followed::TookOver(applied));
                }
                if applied - checkpointed >= CHECKPOINT_EVERY
                    || checkpointed_at.elapsed() >= CHECKPOINT_AFTER
                {
                    blocking(replica, move |replica| replica.checkpoint(applied)).await?;
                    checkpointed = applied;
                    checkpointed_at = Instant::now();
                }
                if lag_measured.elapsed() >= MEASURE_LAG_EVERY {
                    stream_last = changelog.bounds().await?.1.max(applied);
                    lag_measured = Instant::now();
                }
                let lag = stream_last - applied;
                node.set_progress(applied, lag);
                node.set_state(if lag > 0 {
                    State::CatchingUp
                } else {
                    State::Following
                });
                // Under a steady flow the stream is never quiet: snapshots are written
                // between messages too, when the copy is close to the stream's end.
                if lag < CHECKPOINT_EVERY {
                    snapshots
                        .maybe_write(changelog, settings, replica, applied)
                        .await;
                }
            }
            Ok(None) => {
                return Err(ReplicationError::Malformed(
                    "the changelog's consumer ended".into(),
                ))
            }
            Err(_quiet) => {
                if checkpointed != applied {
                    blocking(replica, move |replica| replica.checkpoint(applied)).await?;
                    checkpointed = applied;
                    checkpointed_at = Instant::now();
                }
                stream_last = changelog.bounds().await?.1;
                lag_measured = Instant::now();
                let lag = stream_last.saturating_sub(applied);
                node.set_progress(applied, lag);
                node.set_state(if lag > 0 {
                    State::CatchingUp
                } else {
                    State::Following
                });
                if lag > 0 && last_seen.elapsed() >= STUCK_AFTER {
                    return Err(ReplicationError::Malformed(format!(
                        "the changelog's consumer delivered nothing for {} s while {lag} \
                         messages wait",
                        STUCK_AFTER.as_secs()
                    )));
                }
                if lag == 0 && last_seen.elapsed() >= LEASE {
                    // Unique to this attempt: the stream's duplicate detection would answer a
                    // takeover id it has seen (an earlier life of this node's) with that
                    // takeover's sequence instead of judging this one.
                    let id = format!("{}:takeover:{applied}:{:016x}", settings.node, nonce());
                    match changelog
                        .append(Kind::Takeover, Bytes::new(), applied, &id)
                        .await
                    {
                        Ok(appended) if !appended.duplicate => {
                            METRICS.changelog_takeovers.inc();
                            let seq = appended.seq;
                            blocking(replica, move |replica| replica.checkpoint(seq)).await?;
                            return Ok(Followed::TookOver(seq));
                        }
                        // A fresh id the stream claims to know: not ours to build on.
                        Ok(_) => tracing::error!(%id, "a takeover id was taken for a duplicate"),
                        // Someone published first: follow on.
                        Err(AppendError::Fenced) => {}
                        // It may have landed: if so, it arrives as the next message.
                        Err(AppendError::Unconfirmed(reason)) => {
                            tracing::warn!(%reason, "takeover unconfirmed");
                            takeover_sent = Some(id);
                        }
                    }
                }
                if lag == 0 {
                    snapshots
                        .maybe_write(changelog, settings, replica, applied)
                        .await;
                }
            }
        }
    }
}

/// When the standby last looked at the group's snapshots.
#[derive(Default)]
struct SnapshotSchedule {
    latest: Option<SnapshotInfo>,
    looked: Option<Instant>,
}

impl SnapshotSchedule {
    /// Writes a replica snapshot if the latest is `snapshot_every` messages old; failures
    /// are logged and tried again later (a snapshot is an optimisation of joining).
    async fn maybe_write(
        &mut self,
        changelog: &Changelog,
        settings: &GroupSettings,
        replica: &Arc<Replica>,
        applied: u64,
    ) {
        if self
            .looked
            .is_some_and(|looked| looked.elapsed() < Duration::from_secs(1))
        {
            return;
        }
        self.looked = Some(Instant::now());
        match changelog.latest_snapshot().await {
            Ok(latest) => self.latest = latest,
            Err(error) => {
                tracing::warn!(%error, "could not read the group's latest snapshot");
                return;
            }
        }
        let since = self.latest.map_or(0, |latest| latest.seq);
        if applied < since + settings.snapshot_every {
            return;
        }
        match write_snapshot(changelog, replica, applied, self.latest).await {
            Ok(Some(written)) => self.latest = Some(written),
            Ok(None) => {}
            Err(error) => tracing::warn!(%error, "writing a replica snapshot failed"),
        }
    }
}

/// Writes a replica snapshot of `replica` (which holds the changelog through `applied`),
/// unless another node completed one since `previous`; then removes older snapshots' parts
/// and trims the changelog below `previous`'s position. The snapshot written, if any.
pub async fn write_snapshot(
    changelog: &Changelog,
    replica: &Arc<Replica>,
    applied: u64,
    previous: Option<SnapshotInfo>,
) -> Result<Option<SnapshotInfo>, ReplicationError> {
    let started = Instant::now();
    let (parts, crc32, entries) = {
        let replica = replica.clone();
        let changelog = changelog.clone();
        let runtime = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || -> Result<(u64, u32, u64), ReplicationError> {
            replica.checkpoint(applied)?;
            let mut crc = crc32fast::Hasher::new();
            let mut parts = 0;
            let mut failed = None;
            let entries = replica.snapshot_entries(SNAPSHOT_PART_BYTES, &mut |part| {
                crc.update(&part);
                parts += 1;
                if let Err(error) = runtime.block_on(changelog.put_snapshot_part(applied, part)) {
                    failed = Some(error);
                    return Err(crate::store::StoreError::NotDurable);
                }
                Ok(())
            });
            if let Some(error) = failed {
                return Err(error);
            }
            Ok((parts, crc.finalize(), entries?))
        })
        .await
        .map_err(|error| ReplicationError::Malformed(format!("snapshot task: {error}")))??
    };
    let previous_done = previous.map_or(0, |previous| previous.done_at);
    if !changelog
        .finish_snapshot(applied, parts, crc32, previous_done)
        .await?
    {
        tracing::info!("another node completed a snapshot first; this one is dropped");
        return Ok(None);
    }
    METRICS.changelog_snapshots.inc();
    changelog.remove_snapshot_parts_except(applied).await?;
    let mut trimmed = 0;
    if let Some(previous) = previous {
        trimmed = changelog.trim_below(previous.seq + 1).await?;
    }
    tracing::info!(
        seq = applied,
        parts,
        entries,
        trimmed,
        millis = started.elapsed().as_millis() as u64,
        "wrote a replica snapshot and trimmed the changelog behind the previous one"
    );
    changelog.latest_snapshot().await
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
    let mut parts = Box::pin(changelog.snapshot_parts(snapshot.seq).await?);
    let mut crc = crc32fast::Hasher::new();
    for _ in 0..snapshot.parts {
        let part = tokio::time::timeout(Duration::from_secs(30), parts.next())
            .await
            .map_err(|_| ReplicationError::Malformed("a snapshot part did not come".into()))?
            .ok_or_else(|| ReplicationError::Malformed("a snapshot ended early".into()))??;
        crc.update(&part);
        blocking(replica, move |replica| replica.load(&part).map(|_| ())).await?;
    }
    if crc.finalize() != snapshot.crc32 {
        return Err(ReplicationError::Malformed(format!(
            "snapshot {} does not match its checksum",
            snapshot.seq
        )));
    }
    let seq = snapshot.seq;
    blocking(replica, move |replica| replica.checkpoint(seq)).await?;
    tracing::info!(
        seq,
        parts = snapshot.parts,
        millis = started.elapsed().as_millis() as u64,
        "loaded the group's replica snapshot"
    );
    Ok(seq)
}

/// A random number, to make a message id unique.
pub fn nonce() -> u64 {
    let mut bytes = [0; 8];
    // Without randomness, the time still tells attempts apart.
    if getrandom::getrandom(&mut bytes).is_err() {
        return std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos() as u64);
    }
    u64::from_le_bytes(bytes)
}

/// Runs `work` on the replica off the async threads (sled's writes and syncs block).
async fn blocking<T: Send + 'static>(
    replica: &Arc<Replica>,
    work: impl FnOnce(&Replica) -> Result<T, crate::store::StoreError> + Send + 'static,
) -> Result<T, ReplicationError> {
    let replica = replica.clone();
    tokio::task::spawn_blocking(move || work(&replica))
        .await
        .map_err(|error| ReplicationError::Malformed(format!("replica task: {error}")))?
        .map_err(ReplicationError::Store)
}
