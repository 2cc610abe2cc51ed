//! The primary's side of the changelog: group commit's [`Log`] that publishes each batch as
//! one changelog message and returns only once the stream has acknowledged it (a quorum of
//! its replicas holds it), and a heartbeat while no batch comes.
//!
//! Every message the primary publishes states the sequence number it expects last: the one
//! its previous message got (the first: its takeover's). Once another node has published
//! (a takeover), the stream refuses every later publish of this node, so a primary that was
//! paused, cut off or simply slow acknowledges nothing more: its writers get an error, the
//! node learns it is deposed ([`Chain::deposed`]) and steps down. A publish whose
//! acknowledgement never came is retried with the same message id (the stream's duplicate
//! window recognises it) for up to [`GIVE_UP_AFTER`]; if a retry is refused because the
//! first attempt landed after all, the message at the expected place is read back and
//! recognised by its id.
//!
//! Must not touch: the store's writes (the payload is opaque), roles (the supervisor acts on
//! a deposition).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::runtime::Handle;

use super::changelog::{AppendError, Changelog, Kind};
use crate::metrics::METRICS;
use crate::store::log::commit::Log;
use crate::store::log::wal::Frame;

/// How often an idle primary publishes a heartbeat. Standbys take over after
/// [`super::LEASE`] without any message, so several heartbeats fit in a lease.
pub const HEARTBEAT_EVERY: Duration = Duration::from_millis(500);

/// How long a publish is retried while its acknowledgement does not come (no quorum, a
/// NATS server restarting) before the primary gives up its place. A stream whose leader
/// died elects another in about 5 to 7 s (measured with `kill -9` of the leader's server):
/// the primary rides that out, reporting itself stalled meanwhile (see [`Chain::stalled`]).
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(15);

/// How long a publish may wait for its acknowledgement before the primary reports itself
/// stalled (`/health` answers 503, so a load balancer stops sending it requests), as long as
/// a standby would wait before taking over.
pub const STALLED_AFTER: Duration = super::LEASE;

/// What the primary has published: where its chain of messages stands.
pub struct Chain {
    changelog: Changelog,
    runtime: Handle,
    node: String,
    state: Mutex<ChainState>,
    /// Called once, when the node learns it is no longer the primary.
    on_deposed: Box<dyn Fn() + Send + Sync>,
    /// Called with each message's sequence number once it is in the stream, and the moment
    /// its first attempt was sent (what the read lease counts from).
    on_published: Box<dyn Fn(u64, Instant) + Send + Sync>,
    /// Called when a publish has waited [`STALLED_AFTER`] (true) and when the stall ends.
    on_stalled: Box<dyn Fn(bool) + Send + Sync>,
    /// When the publish under way started, in milliseconds after `created`; 0 for none.
    publishing_since: AtomicU64,
    created: Instant,
    /// Set once the node learns it is no longer the primary (read without the lock).
    deposed: AtomicBool,
    stopped: AtomicBool,
}

struct ChainState {
    /// The sequence number of the last message this primary published (its takeover's at
    /// first).
    last: u64,
    /// The takeover's sequence number and a random number: with a counter, they make
    /// message ids unique.
    term: String,
    published: u64,
    last_publish: Instant,
}

impl Chain {
    /// The chain of a primary whose takeover is message `takeover`.
    pub fn new(
        changelog: Changelog,
        runtime: Handle,
        node: String,
        takeover: u64,
        on_deposed: Box<dyn Fn() + Send + Sync>,
        on_published: Box<dyn Fn(u64, Instant) + Send + Sync>,
        on_stalled: Box<dyn Fn(bool) + Send + Sync>,
    ) -> Arc<Chain> {
        Arc::new(Chain {
            changelog,
            runtime,
            node,
            state: Mutex::new(ChainState {
                last: takeover,
                term: format!("{takeover}-{:016x}", super::follower::nonce()),
                published: 0,
                last_publish: Instant::now(),
            }),
            on_deposed,
            on_published,
            on_stalled,
            publishing_since: AtomicU64::new(0),
            created: Instant::now(),
            deposed: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
        })
    }

    fn state(&self) -> MutexGuard<'_, ChainState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether the node has learnt it is no longer the primary.
    pub fn deposed(&self) -> bool {
        self.deposed.load(Ordering::Relaxed)
    }

    /// The sequence number of the last message published.
    pub fn last(&self) -> u64 {
        self.state().last
    }

    /// Publishes `payload` as the next message of the chain, blocking until the stream has
    /// acknowledged it; its sequence number.
    fn publish(&self, kind: Kind, payload: Bytes) -> Result<u64, String> {
        let mut state = self.state();
        if self.deposed() {
            return Err("this node is no longer the primary".into());
        }
        state.published += 1;
        // Never reused: a reused id would be answered as a duplicate of another message.
        let id = format!("{}:{}:{}", self.node, state.term, state.published);
        let expected = state.last;
        // Before the first attempt goes out: whichever attempt the stream took, it was sent
        // no earlier than this, so a read lease counted from here is never too long.
        let started = Instant::now();
        let since = u64::try_from(self.created.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.publishing_since.store(since.max(1), Ordering::Relaxed);
        let mut attempts = 0;
        let outcome = loop {
            attempts += 1;
            let appended =
                self.runtime
                    .block_on(self.changelog.append(kind, payload.clone(), expected, &id));
            match appended {
                Ok(appended) if appended.duplicate && attempts == 1 => {
                    break Err(format!(
                        "the stream answered a new message {id} as a duplicate"
                    ))
                }
                Ok(appended) => break Ok(appended.seq),
                Err(AppendError::Fenced) if attempts > 1 => {
                    // Our own earlier attempt may be what is in the way.
                    let ours = self
                        .runtime
                        .block_on(self.changelog.entry(expected + 1))
                        .ok()
                        .flatten()
                        .is_some_and(|entry| entry.id == id);
                    if ours {
                        break Ok(expected + 1);
                    }
                    break Err("another node has taken the primary's place".to_owned());
                }
                Err(AppendError::Fenced) => {
                    break Err("another node has taken the primary's place".to_owned())
                }
                Err(AppendError::Unconfirmed(reason)) => {
                    if started.elapsed() >= GIVE_UP_AFTER {
                        break Err(format!(
                            "the changelog did not acknowledge a publish for {} s: {reason}",
                            GIVE_UP_AFTER.as_secs()
                        ));
                    }
                    tracing::warn!(%reason, attempts, "changelog publish unconfirmed; retrying");
                    METRICS.changelog_publish_retries.inc();
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        };
        self.publishing_since.store(0, Ordering::Relaxed);
        match outcome {
            Ok(seq) => {
                state.last = seq;
                state.last_publish = Instant::now();
                (self.on_published)(seq, started);
                Ok(seq)
            }
            Err(reason) => {
                self.deposed.store(true, Ordering::Relaxed);
                drop(state);
                tracing::error!(%reason, "stepping down: this node acknowledges no more writes");
                (self.on_deposed)();
                Err(reason)
            }
        }
    }

    /// Whether the publish under way has waited [`STALLED_AFTER`] for its acknowledgement.
    pub fn stalled(&self) -> bool {
        let since = self.publishing_since.load(Ordering::Relaxed);
        since != 0 && self.created.elapsed() >= Duration::from_millis(since) + STALLED_AFTER
    }

    /// Publishes a heartbeat if nothing was published for [`HEARTBEAT_EVERY`].
    fn beat(&self) {
        let idle = !self.deposed() && self.state().last_publish.elapsed() >= HEARTBEAT_EVERY;
        if idle {
            let _ = self.publish(Kind::Heartbeat, Bytes::new());
        }
    }

    /// Starts the heartbeat thread, and the thread that reports stalls (apart, since a
    /// heartbeat itself may be what stalls); both end once the chain is stopped or deposed.
    pub fn start_heartbeats(self: &Arc<Chain>) -> std::io::Result<()> {
        let chain = self.clone();
        std::thread::Builder::new()
            .name("boxsub-heartbeat".into())
            .spawn(move || {
                while !chain.stopped.load(Ordering::Relaxed) && !chain.deposed() {
                    if !chain.publishing() {
                        chain.beat();
                    }
                    std::thread::sleep(HEARTBEAT_EVERY / 4);
                }
            })?;
        let chain = self.clone();
        std::thread::Builder::new()
            .name("boxsub-stall-watch".into())
            .spawn(move || {
                let mut was_stalled = false;
                while !chain.stopped.load(Ordering::Relaxed) {
                    let stalled = chain.stalled();
                    if stalled != was_stalled {
                        (chain.on_stalled)(stalled);
                        was_stalled = stalled;
                    }
                    if chain.deposed.load(Ordering::Relaxed) {
                        return;
                    }
                    std::thread::sleep(HEARTBEAT_EVERY / 4);
                }
            })?;
        Ok(())
    }

    /// Whether a publish is under way.
    fn publishing(&self) -> bool {
        self.publishing_since.load(Ordering::Relaxed) != 0
    }

    /// Stops the heartbeats (the primary is closing).
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
    }
}

/// Group commit's log on a primary: each batch becomes one changelog message.
pub struct Publisher {
    chain: Arc<Chain>,
    /// The batch being published, cut between whole changes to fit messages.
    parts: Vec<Bytes>,
}

impl Publisher {
    /// A log that publishes into `chain`.
    pub fn new(chain: Arc<Chain>) -> Publisher {
        Publisher {
            chain,
            parts: Vec::new(),
        }
    }
}

impl Log for Publisher {
    /// Cuts the batch between whole changes into messages the server takes (no change is
    /// larger: the store refuses one before writing it, see [`Log::entry_limit`]).
    fn append(&mut self, frame: &mut Frame) -> std::io::Result<()> {
        self.parts = frame
            .parts(self.chain.changelog.message_limit())
            .into_iter()
            .map(Bytes::copy_from_slice)
            .collect();
        Ok(())
    }

    /// Publishes the batch, a message per part, in order. If a later part fails, the earlier
    /// ones are in the changelog (whole changes) while their writers hear of a failure, as
    /// when an acknowledgement is lost: a keyed retry finds them.
    fn sync(&mut self) -> std::io::Result<()> {
        for part in self.parts.drain(..) {
            self.chain
                .publish(Kind::Writes, part)
                .map_err(std::io::Error::other)?;
        }
        Ok(())
    }

    fn seq(&self) -> u64 {
        self.chain.last()
    }

    fn entry_limit(&self) -> Option<crate::store::log::EntryLimit> {
        let changelog = self.chain.changelog.clone();
        Some(Arc::new(move || changelog.message_limit()))
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.chain.stop();
    }
}
