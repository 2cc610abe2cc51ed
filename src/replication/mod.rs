//! A replicated group (`serve --changelog`): nodes that share one changelog on NATS
//! JetStream, one of them the primary that takes writes, the others standbys that apply the
//! changelog into their own data directories and take over when the primary is gone.
//! docs/operations.md ("A replicated group") tells operators how to run one; docs/storage.md
//! ("A replicated group") tells the write path.
//!
//! - [`changelog`]: the streams on NATS (the only code that speaks to it).
//! - [`publisher`]: the primary's group commit into the changelog, fenced by the sequence
//!   each publish expects last, and its heartbeats.
//! - [`follower`]: the standby's apply and takeover.
//! - [`snapshots`]: replica snapshots, uploaded beside the follower by any standby, and
//!   loaded by a node the changelog alone cannot bring up; trimming behind them.
//! - [`run`] (here): the node's life, from standby to primary and back.
//!
//! **The lease.** There is no lease object: the changelog is the lease. The primary holds
//! it as long as it publishes (a write or a heartbeat every [`publisher::HEARTBEAT_EVERY`]
//! while idle); a standby that has seen no message for [`LEASE`] and holds the whole
//! changelog publishes a takeover expecting the last message it applied. Safety of writes
//! does not depend on these timings or on clocks: every publish names the message it must
//! follow, so after a takeover the stream refuses every publish of the node it replaced,
//! and a write is acknowledged only after its publish was taken. The timings decide how
//! soon a dead primary is replaced (about [`LEASE`] plus a poll) and how long a paused one
//! may stall before it is (a pause shorter than [`LEASE`] costs nothing).
//!
//! **The read lease.** Reads are another matter: a primary cut off from the changelog
//! cannot publish, yet could go on answering reads from a state the group has left behind
//! once a standby took over. So the primary answers (`/v1` and `/app`) only while it holds
//! a read lease on its own monotonic clock ([`crate::node::Node::extend_lease`]): each
//! message the stream acknowledges extends it to [`READ_LEASE`] after the moment that
//! message's first attempt was **sent**. The argument: a standby takes over only with a
//! takeover that expects the last message it applied, so only after it has seen every
//! message the stream holds, the acknowledged one included; it saw that message after the
//! stream stored it, which is after the primary sent it; and it then waits [`LEASE`] of
//! quiet on its own clock. So no takeover is stored before `sent + LEASE`, while the
//! primary's lease ends at `sent + READ_LEASE`: a quarter of [`LEASE`] earlier, a margin
//! for the two clocks' rates (NTP keeps them within a fraction of a per mille) and for the
//! moment between the primary's last look at its lease and its answer leaving the
//! process. A read is answered only if the lease still holds once it is made (the HTTP
//! layer looks again after the read), so what it read was the group's state. A pause of the
//! primary longer than that margin between its last look and its answer's bytes is the one
//! thing no lease can rule out; the margin is sized to it.
//!
//! **Writes given up.** A primary that learns it was deposed, or whose changelog does not
//! take a write within [`publisher::GIVE_UP_AFTER`], gives up the writes under way: their
//! records are in its own store and may not be in the group's. It ends its lease on the
//! thread that learns it, before those writes are let go ([`crate::lease`]), so from that
//! moment it answers no read, sends no webhook, and shows no event of theirs (their numbers
//! are never settled: see `crate::events::sequence`) until it has rebuilt its copy from the
//! group and taken over again.
//!
//! Must not touch: what the writes mean (the store's), HTTP (the node's state is read by
//! the HTTP layer through [`crate::node::Node`]).

pub mod changelog;
pub mod follower;
pub mod publisher;
pub mod snapshots;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{watch, Notify};

use crate::node::{Node, State};
use crate::service::Service;
use crate::store::replica::{self, Replica};
use crate::store::{Store, StoreError, StoreOptions};
use changelog::Changelog;
use follower::Followed;
use publisher::{Chain, Publisher};

/// How long the changelog must be quiet before a standby takes over.
pub const LEASE: Duration = Duration::from_secs(2);

/// How long after sending a message that the stream then acknowledged the primary may still
/// answer (the module explains why this is three quarters of [`LEASE`]).
pub const READ_LEASE: Duration = Duration::from_millis(1_500);

/// How a node joins its group.
#[derive(Debug, Clone)]
pub struct GroupSettings {
    /// NATS server URLs (`nats://H:P`).
    pub servers: Vec<String>,
    /// The changelog stream's name; nodes with the same one form a group.
    pub stream: String,
    /// This node's name, unique in the group.
    pub node: String,
    /// Replicas of the changelog's streams (3 in production; 1 against a single server).
    pub replicas: usize,
    /// How many changelog messages a standby lets pass between replica snapshots.
    pub snapshot_every: u64,
    /// The NATS user credentials (a `.creds` file) or nkey seed file the node connects with
    /// (`--changelog-creds`), if the servers require one.
    pub credentials: Option<PathBuf>,
    /// The CA certificate (PEM) the servers' TLS certificates are checked against
    /// (`--changelog-tls-ca`): with it, the node speaks to its servers over TLS only.
    pub tls_ca: Option<PathBuf>,
}

/// This layer's one error type.
#[derive(Debug, thiserror::Error)]
pub enum ReplicationError {
    /// NATS refused or failed an operation.
    #[error("{context}: {detail}")]
    Nats {
        /// What was being done.
        context: String,
        /// What went wrong.
        detail: String,
    },
    /// The changelog holds something this node cannot use.
    #[error("{0}")]
    Malformed(String),
    /// The node's copy of the store failed.
    #[error("the store: {0}")]
    Store(#[from] StoreError),
}

impl ReplicationError {
    fn nats(context: impl Into<String>, error: impl std::fmt::Display) -> ReplicationError {
        ReplicationError::Nats {
            context: context.into(),
            detail: error.to_string(),
        }
    }
}

/// What the node runs while it is the primary: the service and its background duties
/// (which stop when this is dropped).
pub struct Primary {
    /// The service the node serves.
    pub service: Arc<Service>,
    /// Dropped when the node stops being the primary.
    pub duties: Box<dyn Send>,
}

/// Builds the primary's service on the promoted store.
pub type StartPrimary = Box<dyn Fn(Store) -> Result<Primary, String> + Send + Sync>;

/// How long a deposed primary waits for requests in flight and actors to let go of its
/// store before it gives up and exits (status 75) to be started again.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(40);

/// The process exit status of a node that could not rebuild in place.
pub const EXIT_REBUILD: i32 = 75;

/// Runs the node in its group until `shutdown` turns true: a standby following the
/// changelog; the primary once it takes over; a standby again (its copy rebuilt) if it is
/// deposed.
pub async fn run(
    settings: GroupSettings,
    data_dir: PathBuf,
    options: StoreOptions,
    commit_interval: Duration,
    node: Arc<Node>,
    start_primary: StartPrimary,
    mut shutdown: watch::Receiver<bool>,
) {
    let stopping = |shutdown: &watch::Receiver<bool>| *shutdown.borrow();
    while !stopping(&shutdown) {
        node.set_state(State::Connecting);
        let changelog = match Changelog::connect(&settings).await {
            Ok(changelog) => changelog,
            Err(error) => {
                tracing::warn!(%error, "cannot reach the group's changelog; trying again");
                pause(&mut shutdown, Duration::from_secs(1)).await;
                continue;
            }
        };
        let replica = match open_copy(&data_dir, options).await {
            Ok(replica) => replica,
            Err(error) => fatal(&error),
        };
        let Some((replica, takeover, sent)) = follow_until_primary(
            &changelog,
            &settings,
            replica,
            &data_dir,
            options,
            &node,
            &mut shutdown,
        )
        .await
        else {
            return;
        };
        let deposed = Arc::new(Notify::new());
        // Taken before the chain can publish: a deposition or a write given up from its
        // first message on ends it, and nothing after that brings it back.
        node.lease().take(sent + READ_LEASE);
        let primary = match promote(
            (&changelog, &settings),
            replica,
            takeover,
            commit_interval,
            &deposed,
            &node,
            &start_primary,
        ) {
            Ok(primary) => primary,
            Err(error) => fatal(&error),
        };
        let store = primary.service.registry().store().clone();
        node.set_progress(takeover, 0);
        node.serve(primary.service.clone());
        tracing::info!(
            node = %settings.node,
            takeover,
            "this node is the group's primary"
        );
        let Primary { service, duties } = primary;
        let stop = tokio::select! {
            () = deposed.notified() => false,
            _ = shutdown.wait_for(|stop| *stop) => true,
        };
        node.withdraw(if stop {
            State::Stopping
        } else {
            State::Deposed
        });
        drop(duties);
        service.registry().stop_all();
        drop(service);
        if stop {
            match store.close() {
                Ok(()) => tracing::info!("store flushed and closed"),
                Err(error) => tracing::error!(%error, "closing the store failed"),
            }
            return;
        }
        tracing::warn!("deposed: rebuilding this node's copy of the store to follow again");
        let _ = store.close();
        if !released(store).await {
            tracing::error!(
                "the store is still held after {} s; exiting to be started again",
                RELEASE_TIMEOUT.as_secs()
            );
            std::process::exit(EXIT_REBUILD);
        }
    }
}

/// Follows the changelog (rebuilding the copy from a snapshot when the changelog alone
/// cannot bring it up) until this node takes over; `None` on shutdown.
async fn follow_until_primary(
    changelog: &Changelog,
    settings: &GroupSettings,
    mut replica: Arc<Replica>,
    data_dir: &Path,
    options: StoreOptions,
    node: &Node,
    shutdown: &mut watch::Receiver<bool>,
) -> Option<(Arc<Replica>, u64, Instant)> {
    loop {
        let followed = tokio::select! {
            followed = follower::follow(changelog, settings, &replica, data_dir, node) => followed,
            _ = shutdown.wait_for(|stop| *stop) => {
                node.set_state(State::Stopping);
                if let Err(error) = replica.close() {
                    tracing::error!(%error, "closing this node's copy failed");
                }
                return None;
            }
        };
        match followed {
            Ok(Followed::TookOver { seq, sent }) => return Some((replica, seq, sent)),
            Ok(Followed::NeedsSnapshot) => {
                node.set_state(State::Loading);
                replica = match rebuild(changelog, replica, data_dir, options).await {
                    Ok(replica) => replica,
                    Err(ReplicationError::Store(error)) => fatal(&error),
                    Err(error) => {
                        tracing::warn!(%error, "loading the group's snapshot failed; trying again");
                        pause(shutdown, Duration::from_secs(1)).await;
                        match open_copy(data_dir, options).await {
                            Ok(replica) => replica,
                            Err(error) => fatal(&error),
                        }
                    }
                };
            }
            Err(ReplicationError::Store(error)) => fatal(&error),
            Err(error) => {
                tracing::warn!(%error, "following the changelog failed; starting again");
                pause(shutdown, Duration::from_millis(500)).await;
            }
        }
        if *shutdown.borrow() {
            let _ = replica.close();
            return None;
        }
    }
}

/// Empties the copy and loads the group's latest snapshot into it.
async fn rebuild(
    changelog: &Changelog,
    replica: Arc<Replica>,
    data_dir: &Path,
    options: StoreOptions,
) -> Result<Arc<Replica>, ReplicationError> {
    let empty = {
        let replica = replica.clone();
        tokio::task::spawn_blocking(move || replica.is_empty())
            .await
            .map_err(|error| ReplicationError::Malformed(error.to_string()))??
    };
    let replica = if empty {
        replica
    } else {
        drop(replica);
        wipe_and_open(data_dir, options).await?
    };
    snapshots::load_snapshot(changelog, &replica).await?;
    Ok(replica)
}

/// Opens the node's copy; a copy that was a primary's is rebuilt from empty.
async fn open_copy(data_dir: &Path, options: StoreOptions) -> Result<Arc<Replica>, StoreError> {
    let replica = reopen(data_dir, options).await?;
    if !replica.was_primary()? {
        return Ok(replica);
    }
    tracing::warn!("this copy took writes as a primary: rebuilding it from the group");
    drop(replica);
    match wipe_and_open(data_dir, options).await {
        Ok(replica) => Ok(replica),
        Err(ReplicationError::Store(error)) => Err(error),
        Err(error) => Err(StoreError::Engine {
            context: "rebuilding the copy".into(),
            detail: error.to_string(),
        }),
    }
}

async fn wipe_and_open(
    data_dir: &Path,
    options: StoreOptions,
) -> Result<Arc<Replica>, ReplicationError> {
    // sled lets go of its files a moment after the last handle is dropped: reopening
    // first (and dropping) tells when it has.
    drop(reopen(data_dir, options).await?);
    replica::wipe(data_dir)?;
    Ok(reopen(data_dir, options).await?)
}

/// Opens the copy in `data_dir`, trying again for a while if the previous handle's lock is
/// not released yet.
async fn reopen(data_dir: &Path, options: StoreOptions) -> Result<Arc<Replica>, StoreError> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let dir = data_dir.to_owned();
        let opened = tokio::task::spawn_blocking(move || Replica::open(&dir, options))
            .await
            .map_err(|error| StoreError::Engine {
                context: "opening the copy".into(),
                detail: error.to_string(),
            })?;
        match opened {
            Ok(replica) => return Ok(Arc::new(replica)),
            Err(StoreError::CannotOpen { reason, .. })
                if reason.contains("another process") && Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(error) => return Err(error),
        }
    }
}

/// Turns the caught-up copy into the primary's store and starts the service on it.
fn promote(
    (changelog, settings): (&Changelog, &GroupSettings),
    replica: Arc<Replica>,
    takeover: u64,
    commit_interval: Duration,
    deposed: &Arc<Notify>,
    node: &Arc<Node>,
    start_primary: &StartPrimary,
) -> Result<Primary, StoreError> {
    // Both end the lease on the thread that learns of it, before the writes it gives up are
    // let go (their records may be in this node's store, not in the group's): from then on
    // nothing leaves this node until it has rebuilt its copy and taken over again.
    let on_deposed = {
        let (deposed, node) = (deposed.clone(), node.clone());
        Box::new(move || {
            node.lease().end();
            deposed.notify_one();
        })
    };
    let on_published = {
        let node = node.clone();
        Box::new(move |seq, sent: Instant| {
            node.set_progress(seq, 0);
            node.extend_lease(sent + READ_LEASE);
        })
    };
    let on_stalled = {
        let node = node.clone();
        Box::new(move |stalled| {
            if stalled {
                tracing::warn!(
                    "the changelog does not acknowledge; reporting this primary stalled"
                );
            }
            node.set_stalled(stalled);
        })
    };
    let chain = Chain::new(
        changelog.clone(),
        tokio::runtime::Handle::current(),
        settings.node.clone(),
        takeover,
        on_deposed,
        on_published,
        on_stalled,
    );
    chain.start_heartbeats().map_err(|source| StoreError::Io {
        context: "starting the heartbeat thread".into(),
        source,
    })?;
    let replica = Arc::try_unwrap(replica).map_err(|_| StoreError::Engine {
        context: "promoting the copy".into(),
        detail: "the copy is still in use".into(),
    })?;
    let on_fatal = {
        let (deposed, node) = (deposed.clone(), node.clone());
        Arc::new(move |error: &StoreError| {
            node.lease().end();
            tracing::error!(%error, "the primary's store failed: stepping down");
            deposed.notify_one();
        })
    };
    let store = replica.promote(Publisher::new(chain), on_fatal, commit_interval)?;
    start_primary(store).map_err(|detail| StoreError::Engine {
        context: "starting the primary's service".into(),
        detail,
    })
}

/// Waits until `store` is the last handle on the store (requests in flight and actors have
/// let go of it), then drops it; whether that happened within [`RELEASE_TIMEOUT`].
async fn released(store: Store) -> bool {
    let deadline = Instant::now() + RELEASE_TIMEOUT;
    while store.handles() > 1 {
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(store);
    true
}

/// Sleeps for `period`, or less if shutdown comes first.
async fn pause(shutdown: &mut watch::Receiver<bool>, period: Duration) {
    tokio::select! {
        () = tokio::time::sleep(period) => {}
        _ = shutdown.wait_for(|stop| *stop) => {}
    }
}

/// A failure of this node's own copy of the store: it cannot be trusted, so the process
/// stops (as a single node does) and is started again.
fn fatal(error: &StoreError) -> ! {
    eprintln!("boxsub: FATAL: this node's copy of the store failed: {error}");
    std::process::exit(70);
}
