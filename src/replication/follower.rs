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
//!   from the latest replica snapshot ([`super::snapshots::load_snapshot`]).
//! - **Taking over.** When no message has come for [`super::LEASE`] and the copy holds the
//!   whole stream, the follower publishes a takeover expecting the last message it applied.
//!   The stream takes it only if nothing came after that message, so two standbys never
//!   both take over, and a primary that was alive (its heartbeat came first) keeps its
//!   place. From the takeover on, the old primary's publishes are refused (see
//!   [`super::publisher`]).
//! - **Snapshots and trimming.** A caught-up standby writes a replica snapshot every
//!   `--changelog-snapshot-every` messages, uploaded beside this loop
//!   ([`super::snapshots`]), which keeps applying and watching the lease meanwhile; the
//!   upload is abandoned when this node takes over.
//!
//! Must not touch: the service (the supervisor promotes), what the writes mean.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;

use super::changelog::{AppendError, Changelog, Kind};
use super::snapshots::Snapshots;
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

/// How following ended.
pub enum Followed {
    /// This node published the takeover at sequence number `seq`, sent at `sent`: it is the
    /// primary (and holds the read lease from `sent`).
    TookOver {
        /// The takeover's sequence number.
        seq: u64,
        /// When the takeover was sent.
        sent: Instant,
    },
    /// The copy is behind the stream's first message: it must be rebuilt from a snapshot.
    NeedsSnapshot,
}

/// Applies the changelog into `replica` until this node takes over or the copy needs a
/// snapshot. Errors of the connection end it too (the supervisor starts again).
pub async fn follow(
    changelog: &Changelog,
    settings: &GroupSettings,
    replica: &Arc<Replica>,
    data_dir: &std::path::Path,
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
    // Dropped when this returns: an upload under way is abandoned (the node takes over,
    // or follows again from scratch).
    let mut snapshots = Snapshots::default();
    // The id of this node's last takeover whose acknowledgement did not come, and when it
    // was sent.
    let mut takeover_sent: Option<(String, Instant)> = None;
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
                if let Some((id, sent)) = &takeover_sent {
                    if entry.kind == Kind::Takeover && *id == entry.id {
                        // Our own takeover, whose acknowledgement was lost: it stands.
                        let sent = *sent;
                        blocking(replica, move |replica| replica.checkpoint(applied)).await?;
                        return Ok(Followed::TookOver { seq: applied, sent });
                    }
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
                        .maybe_start(changelog, settings, replica, data_dir, applied)
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
                    let id = format!(
                        "{}:takeover:{applied}:{:016x}",
                        settings.node,
                        crate::random::nonce()
                    );
                    let sent = Instant::now();
                    match changelog
                        .append(Kind::Takeover, Bytes::new(), applied, &id)
                        .await
                    {
                        Ok(appended) if !appended.duplicate => {
                            METRICS.changelog_takeovers.inc();
                            let seq = appended.seq;
                            blocking(replica, move |replica| replica.checkpoint(seq)).await?;
                            return Ok(Followed::TookOver { seq, sent });
                        }
                        // A fresh id the stream claims to know: not ours to build on.
                        Ok(_) => tracing::error!(%id, "a takeover id was taken for a duplicate"),
                        // Someone published first: follow on.
                        Err(AppendError::Fenced) => {}
                        // It may have landed: if so, it arrives as the next message.
                        Err(AppendError::Unconfirmed(reason)) => {
                            tracing::warn!(%reason, "takeover unconfirmed");
                            takeover_sent = Some((id, sent));
                        }
                    }
                }
                if lag == 0 {
                    snapshots
                        .maybe_start(changelog, settings, replica, data_dir, applied)
                        .await;
                }
            }
        }
    }
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
