//! The primary's side of the changelog: group commit's [`Log`] that publishes each batch as
//! changelog messages and answers its writers only once the stream has acknowledged them (a
//! quorum of its replicas holds them), and a heartbeat while no batch comes.
//!
//! Every message the primary publishes states the sequence number it expects last: the one
//! its previous message got or will get (the first: its takeover's). Once another node has
//! published (a takeover), the stream refuses every later publish of this node, so a
//! primary that was paused, cut off or simply slow acknowledges nothing more: its writers
//! get an error, the node learns it is deposed ([`Chain::deposed`]) and steps down.
//!
//! Up to [`PIPELINE`] batches are under way at once, each message expecting the one sent
//! before it: the NATS servers then fsync several messages together (with
//! `sync_interval: always`, one message at a time takes a full round of fsyncs on a quorum
//! each). They are settled in order. A message whose acknowledgement never came, or that was
//! refused because one sent before it had not landed yet, is sent again with the same message
//! id and expectation (the stream's duplicate window recognises one it took) for up to
//! [`GIVE_UP_AFTER`] after its first attempt; one refused again is read back at its expected
//! place and recognised by its id, or else another node has taken over.
//!
//! Must not touch: the store's writes (the payload is opaque), roles (the supervisor acts on
//! a deposition).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::runtime::Handle;

use super::changelog::{AppendError, Appended, Changelog, Kind};
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

/// How many batches the primary has under way at once.
pub const PIPELINE: usize = 4;

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
    /// Called when an answer to a message under way comes (wakes group commit's flusher).
    waker: Mutex<Option<crate::store::log::SyncWaker>>,
}

struct ChainState {
    /// The sequence number of the last message the stream acknowledged (its takeover's at
    /// first).
    last: u64,
    /// The takeover's sequence number and a random number: with a counter, they make
    /// message ids unique.
    term: String,
    published: u64,
    last_publish: Instant,
    /// Messages sent and not yet acknowledged, oldest first; each expects the one before it.
    under_way: VecDeque<UnderWay>,
}

/// A message sent, waiting for the stream's answer.
struct UnderWay {
    kind: Kind,
    payload: Bytes,
    id: String,
    expected: u64,
    /// When its first attempt was sent (what the read lease and the give-up count from).
    started: Instant,
    answer: Answer,
}

/// The stream's answer to a message, as a task on the runtime waits for it.
enum Answer {
    Waiting(tokio::sync::oneshot::Receiver<Result<Appended, AppendError>>),
    Came(Result<Appended, AppendError>),
}

impl Answer {
    /// Whether it has come (without waiting).
    fn came(&mut self) -> bool {
        if let Answer::Waiting(receiver) = self {
            match receiver.try_recv() {
                Ok(answer) => *self = Answer::Came(answer),
                Err(tokio::sync::oneshot::error::TryRecvError::Empty) => return false,
                Err(tokio::sync::oneshot::error::TryRecvError::Closed) => {
                    *self = Answer::Came(Err(AppendError::Unconfirmed(
                        "the answer's task ended".into(),
                    )))
                }
            }
        }
        true
    }

    /// Waits for it (on the flusher's or the heartbeat's thread, never the runtime's).
    fn wait(self) -> Result<Appended, AppendError> {
        match self {
            Answer::Came(answer) => answer,
            Answer::Waiting(receiver) => receiver.blocking_recv().unwrap_or_else(|_| {
                Err(AppendError::Unconfirmed("the answer's task ended".into()))
            }),
        }
    }
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
                term: format!("{takeover}-{:016x}", crate::random::nonce()),
                published: 0,
                last_publish: Instant::now(),
                under_way: VecDeque::new(),
            }),
            on_deposed,
            on_published,
            on_stalled,
            publishing_since: AtomicU64::new(0),
            created: Instant::now(),
            deposed: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            waker: Mutex::new(None),
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

    /// The sequence number of the last message the stream acknowledged.
    pub fn last(&self) -> u64 {
        self.state().last
    }

    /// Publishes `payload` as the next message of the chain, blocking until the stream has
    /// acknowledged it and every message sent before it; its sequence number.
    fn publish(&self, state: &mut ChainState, kind: Kind, payload: Bytes) -> Result<u64, String> {
        self.send(state, kind, payload)?;
        let mut seq = state.last;
        while !state.under_way.is_empty() {
            seq = self.settle_oldest(state)?;
        }
        Ok(seq)
    }

    /// Sends `payload` as the next message of the chain, expecting the one sent before it,
    /// without waiting for its acknowledgement ([`Chain::settle_oldest`] does).
    fn send(&self, state: &mut ChainState, kind: Kind, payload: Bytes) -> Result<(), String> {
        if self.deposed() {
            return Err("this node is no longer the primary".into());
        }
        state.published += 1;
        // Never reused: a reused id would be answered as a duplicate of another message.
        let id = format!("{}:{}:{}", self.node, state.term, state.published);
        let expected = state
            .under_way
            .back()
            .map_or(state.last, |before| before.expected + 1);
        // Before the first attempt goes out: whichever attempt the stream took, it was sent
        // no earlier than this, so a read lease counted from here is never too long.
        let started = Instant::now();
        let pending =
            self.runtime.block_on(
                self.changelog
                    .send_append(kind, payload.clone(), expected, &id),
            );
        let (came, answer) = tokio::sync::oneshot::channel();
        let waker = self
            .waker
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        self.runtime.spawn(async move {
            let _ = came.send(pending.wait().await);
            if let Some(wake) = waker {
                wake();
            }
        });
        let answer = Answer::Waiting(answer);
        if state.under_way.is_empty() {
            let since = u64::try_from(self.created.elapsed().as_millis()).unwrap_or(u64::MAX);
            self.publishing_since.store(since.max(1), Ordering::Relaxed);
        }
        state.under_way.push_back(UnderWay {
            kind,
            payload,
            id,
            expected,
            started,
            answer,
        });
        Ok(())
    }

    /// Waits for the stream's answer to the oldest message under way, sending it again while
    /// it is unconfirmed (see the module); its sequence number. Deposes the node if it cannot
    /// be made to land.
    fn settle_oldest(&self, state: &mut ChainState) -> Result<u64, String> {
        if self.deposed() {
            // Whatever was under way will never be acknowledged by this node.
            return Err("this node is no longer the primary".into());
        }
        let Some(message) = state.under_way.pop_front() else {
            return Ok(state.last);
        };
        let UnderWay {
            kind,
            payload,
            id,
            expected,
            started,
            answer,
        } = message;
        let outcome = match answer.wait() {
            Ok(appended) if appended.duplicate => Err(format!(
                "the stream answered a new message {id} as a duplicate"
            )),
            Ok(appended) => Ok(appended.seq),
            // Refused or unconfirmed: perhaps a message sent before it had not landed when
            // it arrived, or its acknowledgement was lost. Again, as a retry.
            Err(_) => self.retry(kind, &payload, expected, &id, started),
        };
        self.publishing_since.store(
            state.under_way.front().map_or(0, |next| {
                let since = next.started.saturating_duration_since(self.created);
                u64::try_from(since.as_millis()).unwrap_or(u64::MAX).max(1)
            }),
            Ordering::Relaxed,
        );
        match outcome {
            Ok(seq) => {
                state.last = seq;
                state.last_publish = Instant::now();
                (self.on_published)(seq, started);
                Ok(seq)
            }
            Err(reason) => {
                self.deposed.store(true, Ordering::Relaxed);
                state.under_way.clear();
                self.publishing_since.store(0, Ordering::Relaxed);
                tracing::error!(%reason, "stepping down: this node acknowledges no more writes");
                (self.on_deposed)();
                Err(reason)
            }
        }
    }

    /// Sends a message again with its id and expectation until the stream takes it (or did
    /// already), for up to [`GIVE_UP_AFTER`] after its first attempt.
    fn retry(
        &self,
        kind: Kind,
        payload: &Bytes,
        expected: u64,
        id: &str,
        started: Instant,
    ) -> Result<u64, String> {
        let mut attempts = 1;
        loop {
            attempts += 1;
            let appended =
                self.runtime
                    .block_on(self.changelog.append(kind, payload.clone(), expected, id));
            match appended {
                // A retry may be answered as a duplicate: the first attempt landed.
                Ok(appended) => return Ok(appended.seq),
                Err(AppendError::Fenced) => {
                    // Our own earlier attempt may be what is in the way.
                    let ours = self
                        .runtime
                        .block_on(self.changelog.entry(expected + 1))
                        .ok()
                        .flatten()
                        .is_some_and(|entry| entry.id == id);
                    if ours {
                        return Ok(expected + 1);
                    }
                    return Err("another node has taken the primary's place".to_owned());
                }
                Err(AppendError::Unconfirmed(reason)) => {
                    if started.elapsed() >= GIVE_UP_AFTER {
                        return Err(format!(
                            "the changelog did not acknowledge a publish for {} s: {reason}",
                            GIVE_UP_AFTER.as_secs()
                        ));
                    }
                    tracing::warn!(%reason, attempts, "changelog publish unconfirmed; retrying");
                    METRICS.changelog_publish_retries.inc();
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    }

    /// Whether the stream has answered the first `messages` messages under way.
    fn answered(&self, state: &mut ChainState, messages: usize) -> bool {
        state
            .under_way
            .iter_mut()
            .take(messages)
            .all(|message| message.answer.came())
    }

    /// Whether the publish under way has waited [`STALLED_AFTER`] for its acknowledgement.
    pub fn stalled(&self) -> bool {
        let since = self.publishing_since.load(Ordering::Relaxed);
        since != 0 && self.created.elapsed() >= Duration::from_millis(since) + STALLED_AFTER
    }

    /// Publishes a heartbeat if nothing was published for [`HEARTBEAT_EVERY`] and nothing is
    /// under way.
    fn beat(&self) {
        // Under the lock throughout: no batch can be sent between the look and the beat.
        let mut state = self.state();
        let idle = !self.deposed()
            && state.under_way.is_empty()
            && state.last_publish.elapsed() >= HEARTBEAT_EVERY;
        if idle {
            let _ = self.publish(&mut state, Kind::Heartbeat, Bytes::new());
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

/// Group commit's log on a primary: each batch becomes one changelog message (several if it
/// is larger than a message may be), with up to [`PIPELINE`] batches under way.
pub struct Publisher {
    chain: Arc<Chain>,
    /// The batch being published, cut between whole changes to fit messages.
    parts: Vec<Bytes>,
    /// How many messages each batch under way was sent as, oldest first.
    batches: VecDeque<usize>,
}

impl Publisher {
    /// A log that publishes into `chain`.
    pub fn new(chain: Arc<Chain>) -> Publisher {
        Publisher {
            chain,
            parts: Vec::new(),
            batches: VecDeque::new(),
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

    /// Publishes every batch appended, waiting for all of it (and for the batches under way
    /// before it).
    fn sync(&mut self) -> std::io::Result<()> {
        self.start_sync()?;
        while !self.batches.is_empty() {
            self.finish_sync()?;
        }
        Ok(())
    }

    fn pipeline(&self) -> usize {
        PIPELINE
    }

    fn sync_finished(&mut self) -> bool {
        let Some(&messages) = self.batches.front() else {
            return true;
        };
        let mut state = self.chain.state();
        self.chain.answered(&mut state, messages)
    }

    fn set_waker(&mut self, wake: crate::store::log::SyncWaker) {
        *self
            .chain
            .waker
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(wake);
    }

    /// Sends the batch's messages, in order, without waiting for their acknowledgement.
    fn start_sync(&mut self) -> std::io::Result<()> {
        let mut state = self.chain.state();
        let messages = self.parts.len();
        for part in self.parts.drain(..) {
            self.chain
                .send(&mut state, Kind::Writes, part)
                .map_err(std::io::Error::other)?;
        }
        self.batches.push_back(messages);
        Ok(())
    }

    /// Waits for the oldest batch's messages. If a later one of them fails, the earlier ones
    /// are in the changelog (whole changes) while their writers hear of a failure, as when an
    /// acknowledgement is lost: a keyed retry finds them.
    fn finish_sync(&mut self) -> std::io::Result<()> {
        let Some(messages) = self.batches.pop_front() else {
            return Ok(());
        };
        let mut state = self.chain.state();
        for _ in 0..messages {
            self.chain
                .settle_oldest(&mut state)
                .map_err(std::io::Error::other)?;
        }
        Ok(())
    }

    fn seq(&self) -> u64 {
        self.chain.last()
    }

    fn is_remote(&self) -> bool {
        true
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
