//! Group commit: a writer hands the single-key writes it has just made (in the pending
//! layer) to the flusher thread, encoded for the write-ahead log ([`super::wal`]), and
//! waits. The flusher
//! takes every submission that has arrived, appends them to the log as one frame,
//! `fdatasync`s it once for all of them, and only then answers them. Durability then costs
//! one append and one sync per batch, not per write; sled itself is flushed behind the log,
//! a segment at a time (`checkpoint`). Submissions are answered in the order they
//! arrived, so a writer answered knows every write submitted before its own is durable too.
//!
//! Under load the flusher also gathers writers before a sync, since a sync costs about the
//! same CPU however many writes it covers (the kernel writes and flushes, and every thread
//! involved is woken). While the runtime's workers have no time to spare
//! ([`super::saturation`]: busy nine tenths of the time), a sync starts at most once every
//! `--commit-interval-us` (1 ms by default): the CPU a sync would take is the requests'.
//! Otherwise, after a sync that answered 24 writers or more, it waits, at most that interval
//! from that sync's start, until three quarters as many (and at least 24) are waiting.
//! Fewer concurrent writers on workers with time to spare never wait, nor does the first
//! write after a quiet spell: a sync at once serves them best. Writers leave their
//! submissions in a `Queue` that wakes the flusher only once as many are in as it waits
//! for, so that writers arriving while it gathers or syncs wake no one.
//!
//! With durability off, writers hand their writes over the same way but do not wait
//! ([`Committer::submit_in_background`]): the flusher paces its syncs to one an interval
//! whatever the load ([`Pacing::Always`]), and a writer waits for a sync as a durable one
//! does only while [`BACKGROUND_BACKLOG`] writes are already waiting for the flusher.
//!
//! A remote log (a replicated group's changelog: `crate::replication::publisher`) differs in
//! two ways. Its sync is a round trip that outlasts the writers' return, so after one the
//! flusher waits for the writers it answered to come back (`gathering`). And it may keep
//! several syncs under way ([`Log::pipeline`]): while one is, the flusher starts another
//! once enough writers wait for it (`PIPELINE_FROM_WRITERS`), and answers each batch when
//! it and those before it are durable, in order.
//!
//! A failed append or fsync is fatal: the process must stop rather than acknowledge writes it
//! may have lost (retrying an fsync after a failure can report success over lost data).

use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::checkpoint::{self, Segments};
use super::saturation::Saturation;
use super::wal::{Frame, LogWriter, Segment, SpareSlot, WalDir};
use super::OnDurable;
use crate::metrics::METRICS;
use crate::store::error::FatalHandler;
use crate::store::error::StoreError;
use crate::store::pending::Storage;

/// Where the flusher appends: the write-ahead log ([`LogWriter`]), or a stand-in in tests.
pub trait Log: Send + 'static {
    /// Appends a frame (not yet durable).
    fn append(&mut self, frame: &mut Frame) -> std::io::Result<()>;
    /// Makes every appended frame durable.
    fn sync(&mut self) -> std::io::Result<()>;
    /// The sequence number of the segment being written.
    fn seq(&self) -> u64;
    /// The largest change it takes, if it has a limit (asked once, before the log moves to
    /// the flusher's thread).
    fn entry_limit(&self) -> Option<super::EntryLimit> {
        None
    }
    /// Whether a sync is a round trip to other machines, which takes longer than an answered
    /// writer takes to come back with its next write (a replicated changelog): under load the
    /// flusher then also waits for the writers its last sync answered (see `gathering`).
    fn is_remote(&self) -> bool {
        false
    }
    /// How many syncs may be under way at once: 1 for a log whose sync waits for the disk
    /// (the local write-ahead log); more for a remote log that pipelines its messages
    /// ([`Log::start_sync`]).
    fn pipeline(&self) -> usize {
        1
    }
    /// Sets every frame appended since the last start on its way to durability; with a
    /// pipeline of 1 that is the whole sync. [`Log::finish_sync`] then waits for the oldest
    /// sync started.
    fn start_sync(&mut self) -> std::io::Result<()> {
        self.sync()
    }
    /// Waits until the oldest sync started (and every one before it) is durable.
    fn finish_sync(&mut self) -> std::io::Result<()> {
        Ok(())
    }
    /// Whether the oldest sync started has finished, so that [`Log::finish_sync`] would not
    /// wait (a log with a pipeline of 1 finishes each sync as it starts it).
    fn sync_finished(&mut self) -> bool {
        true
    }
    /// Gives a pipelined log what to call when a sync under way finishes, so that the
    /// flusher, asleep until writers come, wakes to answer that sync's writers.
    fn set_waker(&mut self, _wake: super::SyncWaker) {}
}

impl Log for LogWriter {
    fn append(&mut self, frame: &mut Frame) -> std::io::Result<()> {
        LogWriter::append(self, frame)
    }
    fn sync(&mut self) -> std::io::Result<()> {
        LogWriter::sync(self)
    }
    fn seq(&self) -> u64 {
        LogWriter::seq(self)
    }
}

/// One writer's part of a group commit: its encoded writes (none for a bare wait) and who to
/// answer once they are durable (no one for a write answered at once:
/// [`Committer::submit_in_background`]).
struct Submission {
    writes: Vec<u8>,
    on_durable: Option<OnDurable>,
    done: Option<oneshot::Sender<()>>,
}

/// Where writers leave their submissions for the flusher.
#[derive(Default)]
struct Queue {
    state: Mutex<Waiting>,
    /// Signalled when as many submissions are in as the flusher waits for, or at close.
    enough: Condvar,
}

#[derive(Default)]
struct Waiting {
    submissions: Vec<Submission>,
    /// How many submissions the flusher sleeps until; 0 while it is not sleeping.
    wanted: usize,
    /// No submission is taken any more; those in are still handed out.
    closed: bool,
    /// A sync under way has finished since the flusher last looked (see [`Queue::wake`]).
    woken: bool,
}

impl Queue {
    fn waiting(&self) -> MutexGuard<'_, Waiting> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Leaves `submission` for the flusher, waking it if it waits for this many; refused
    /// once closed.
    #[cfg(test)]
    fn submit(&self, submission: Submission) -> Result<(), StoreError> {
        self.submit_with(|_| submission)
    }

    /// Leaves the submission `make` makes for the flusher, told how many are in already,
    /// waking the flusher if it waits for this many; refused once closed, without calling
    /// `make`.
    fn submit_with(&self, make: impl FnOnce(usize) -> Submission) -> Result<(), StoreError> {
        let mut waiting = self.waiting();
        if waiting.closed {
            return Err(StoreError::NotDurable);
        }
        let submission = make(waiting.submissions.len());
        waiting.submissions.push(submission);
        let enough = waiting.wanted != 0 && waiting.submissions.len() >= waiting.wanted;
        if enough {
            waiting.wanted = 0;
        }
        // Woken after the lock is released, the flusher does not wait for it again.
        drop(waiting);
        if enough {
            self.enough.notify_one();
        }
        Ok(())
    }

    /// Wakes the flusher from [`Queue::take_or_woken`]: a sync under way has finished.
    fn wake(&self) {
        self.waiting().woken = true;
        self.enough.notify_one();
    }

    /// The flusher's take while syncs are under way: sleeps until `writers` submissions
    /// are in, a sync under way has finished ([`Queue::wake`]) or the queue is closed, then
    /// takes the submissions if there are `writers` of them (none otherwise: they wait for
    /// the next take).
    fn take_or_woken(&self, batch: &mut Vec<Submission>, writers: usize) {
        let mut waiting = self.waiting();
        while waiting.submissions.len() < writers && !waiting.woken && !waiting.closed {
            waiting.wanted = writers;
            waiting = self
                .enough
                .wait(waiting)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        waiting.wanted = 0;
        waiting.woken = false;
        if waiting.submissions.len() >= writers || waiting.closed {
            std::mem::swap(&mut waiting.submissions, batch);
        }
    }

    /// Takes no more submissions (those in are still handed to the flusher).
    fn close(&self) {
        self.waiting().closed = true;
        self.enough.notify_one();
    }

    /// Refuses every later submission and drops those waiting, so that their writers learn
    /// their writes are not durable.
    fn abandon(&self) {
        let mut waiting = self.waiting();
        waiting.closed = true;
        waiting.submissions.clear();
    }

    /// The next batch, swapped into `batch` (which must be empty): sleeps until a submission
    /// is in, then, with a `plan`, until as many are in as it wants or its time is up.
    /// `false` once the queue is closed and empty.
    fn take(&self, batch: &mut Vec<Submission>, plan: Option<Gathering>) -> bool {
        let mut waiting = self.waiting();
        while waiting.submissions.is_empty() {
            if waiting.closed {
                return false;
            }
            waiting.wanted = 1;
            waiting = self
                .enough
                .wait(waiting)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        if let Some(plan) = plan {
            let wanted = match plan.beyond_waiting {
                true => waiting.submissions.len() + plan.writers,
                false => plan.writers,
            };
            while waiting.submissions.len() < wanted && !waiting.closed {
                let left = plan.until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                waiting.wanted = wanted;
                waiting = self
                    .enough
                    .wait_timeout(waiting, left)
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .0;
            }
        }
        waiting.wanted = 0;
        std::mem::swap(&mut waiting.submissions, batch);
        true
    }
}

/// When the flusher paces its syncs to one an interval (see the module).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pacing {
    /// While the runtime's workers are saturated (writers wait for each sync).
    WhileSaturated,
    /// Always (no writer waits for a sync: [`Committer::submit_in_background`]).
    Always,
}

/// How many writes answered at once may wait for the flusher at most: past that, a write
/// submitted [in the background](Committer::submit_in_background) waits for its sync as a
/// durable one does, so that a disk slower than the writers holds them back instead of
/// the queue growing without bound (4,096 orders are about 1 MiB of log).
pub const BACKGROUND_BACKLOG: usize = 4096;

/// The most writes answered at once that a crash can find not yet synced: the backlog
/// waiting for the flusher, and as many again in the sync under way (the flusher takes a
/// sync's writes from the queue, then syncs; one sync at a time). A store that ran with
/// durability off and stopped uncleanly continues its ids and numbers past as many
/// (`Store::lost_answers`), so that none answered before the crash is given again.
pub const MOST_ANSWERED_UNSYNCED: u64 = 2 * BACKGROUND_BACKLOG as u64;

/// The handle writers submit to and wait on: the flusher, and the checkpointer behind it.
pub struct Committer {
    queue: Arc<Queue>,
    /// Returns the sequence number of the last segment written, `None` after a failure.
    flusher: Option<std::thread::JoinHandle<Option<u64>>>,
    checkpointer: Option<std::thread::JoinHandle<()>>,
}

impl Committer {
    /// Starts the flusher appending to the log in `wal` from `segment`, and the checkpointer
    /// that flushes `storage` behind it and reuses `segments`; under heavy load (or always,
    /// as `pacing` says) a sync may wait up to `interval` from the previous one's start for
    /// writers to gather (see the module).
    pub fn start(
        storage: Arc<dyn Storage>,
        wal: WalDir,
        segment: Segment,
        segments: Segments,
        on_fatal: FatalHandler,
        interval: Duration,
        pacing: Pacing,
    ) -> Result<Committer, StoreError> {
        let spare = Arc::new(SpareSlot::default());
        let (finished, to_checkpoint) = mpsc::channel();
        let writer = LogWriter::new(segment, spare.clone(), finished);
        let checkpointer = {
            let on_fatal = on_fatal.clone();
            std::thread::Builder::new()
                .name("boxsub-checkpoint".into())
                .spawn(move || {
                    checkpoint::run(storage, wal, spare, to_checkpoint, segments, on_fatal)
                })
                .map_err(|source| StoreError::Io {
                    context: "starting the checkpoint thread".into(),
                    source,
                })?
        };
        let mut committer = Committer::with_pacing(writer, on_fatal, interval, pacing)?;
        committer.checkpointer = Some(checkpointer);
        Ok(committer)
    }

    /// Starts a flusher appending to `log`, without checkpoints (a remote log, whose
    /// checkpoints are its own: [`super::remote`]; tests).
    pub fn with_log(
        log: impl Log,
        on_fatal: FatalHandler,
        interval: Duration,
    ) -> Result<Committer, StoreError> {
        Committer::with_pacing(log, on_fatal, interval, Pacing::WhileSaturated)
    }

    fn with_pacing(
        log: impl Log,
        on_fatal: FatalHandler,
        interval: Duration,
        pacing: Pacing,
    ) -> Result<Committer, StoreError> {
        let queue = Arc::new(Queue::default());
        let saturation = Saturation::of_current_runtime();
        let flusher = {
            let queue = queue.clone();
            std::thread::Builder::new()
                .name("boxsub-flusher".into())
                .spawn(move || flush_loop(log, queue, on_fatal, interval, saturation, pacing))
                .map_err(|source| StoreError::Io {
                    context: "starting the flusher thread".into(),
                    source,
                })?
        };
        Ok(Committer {
            queue,
            flusher: Some(flusher),
            checkpointer: None,
        })
    }

    /// Hands `writes` (a [`super::wal::LogEntry`]'s bytes, already made in the engine) to the
    /// log: the receiver completes once they, and everything submitted before them, are on
    /// disk, and fails if that can't be confirmed. With no writes, it waits for what was
    /// submitted before.
    ///
    /// `on_durable` runs on the flusher's thread once the writes are on disk, before the
    /// receiver completes; it is dropped unrun if they never get there.
    pub fn submit(
        &self,
        writes: Vec<u8>,
        on_durable: Option<OnDurable>,
    ) -> Result<oneshot::Receiver<()>, StoreError> {
        let (done, wait) = oneshot::channel();
        self.queue.submit_with(|_| Submission {
            writes,
            on_durable,
            done: Some(done),
        })?;
        Ok(wait)
    }

    /// Hands `writes` (not a bare wait) to the log without waiting for them: `None` when
    /// they are queued for a sync in the background, `on_durable` having run at once (the
    /// writer is answered at once, and what its answer makes visible must be too);
    /// `Some(wait)`, as [`Committer::submit`] would answer, when [`BACKGROUND_BACKLOG`]
    /// writes already wait for the flusher. Refused, `on_durable` dropped unrun, once the
    /// log is closed or has failed.
    pub fn submit_in_background(
        &self,
        writes: Vec<u8>,
        on_durable: Option<OnDurable>,
    ) -> Result<Option<oneshot::Receiver<()>>, StoreError> {
        let mut wait = None;
        let mut run_now = None;
        self.queue.submit_with(|queued| {
            if queued < BACKGROUND_BACKLOG {
                run_now = on_durable;
                return Submission {
                    writes,
                    on_durable: None,
                    done: None,
                };
            }
            let (done, answer) = oneshot::channel();
            wait = Some(answer);
            Submission {
                writes,
                on_durable,
                done: Some(done),
            }
        })?;
        // Outside the queue's lock: it is the writer's code.
        if let Some(on_durable) = run_now {
            on_durable();
        }
        Ok(wait)
    }

    /// Stops the flusher after it has answered every submission, then the checkpointer after
    /// its last checkpoint; the sequence number of the last segment written, `None` if the
    /// log failed.
    pub fn stop(&mut self) -> Option<u64> {
        self.queue.close();
        let last = self.flusher.take().and_then(|flusher| flusher.join().ok()?);
        // The log writer, gone with the flusher, held the checkpointer's only sender.
        if let Some(checkpointer) = self.checkpointer.take() {
            let _ = checkpointer.join();
        }
        last
    }
}

impl Drop for Committer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A batch whose sync has started: its writers are answered once it is durable.
struct Syncing {
    submissions: Vec<Submission>,
    /// Whether it wrote anything (a batch of bare waits only waits for those before it).
    sent: bool,
    bytes: usize,
    started: Instant,
}

fn flush_loop(
    mut log: impl Log,
    queue: Arc<Queue>,
    on_fatal: FatalHandler,
    interval: Duration,
    mut saturation: Saturation,
    pacing: Pacing,
) -> Option<u64> {
    {
        let queue = queue.clone();
        log.set_waker(Arc::new(move || queue.wake()));
    }
    let queue = &*queue;
    let _fail_on_panic = FailOnPanic {
        queue,
        on_fatal: &on_fatal,
    };
    let mut last_sync: Option<LastSync> = None;
    let mut frame = Frame::default();
    let mut batch = Vec::new();
    let remote = log.is_remote();
    let pipeline = log.pipeline().max(1);
    // Batches whose sync has started, oldest first: each is answered once it and those before
    // it are durable, so writers are answered in the order they submitted.
    let mut syncing: std::collections::VecDeque<Syncing> = std::collections::VecDeque::new();
    loop {
        // With nothing under way, wait for writers (gathering them under load). With syncs
        // under way and room for another, wait for enough writers to fill another batch
        // ([`PIPELINE_FROM_WRITERS`]) or for the oldest sync to finish, whichever comes
        // first: fewer writers wait to join those the oldest sync will answer, since every
        // sync costs the log's servers about as much however few writes it carries. With no
        // room, finish the oldest.
        if syncing.is_empty() {
            let paced =
                !remote && (pacing == Pacing::Always || saturation.saturated(Instant::now()));
            if !queue.take(&mut batch, gathering(last_sync, interval, remote, paced)) {
                break;
            }
        } else if syncing.len() < pipeline && !log.sync_finished() {
            queue.take_or_woken(&mut batch, PIPELINE_FROM_WRITERS);
        }
        if !batch.is_empty() {
            let started = Instant::now();
            frame.clear();
            for submission in &batch {
                frame.push(&submission.writes);
            }
            // Each writer submitted after its writes reached the engine, so one append and
            // sync after taking a batch covers every write of that batch. A batch of bare
            // waits has nothing to write: it only waits for the batches before it.
            let sent = !frame.is_empty();
            if sent {
                if let Err(source) = log.append(&mut frame).and_then(|()| log.start_sync()) {
                    return fail(queue, &on_fatal, source);
                }
            }
            syncing.push_back(Syncing {
                submissions: std::mem::take(&mut batch),
                sent,
                bytes: frame.len(),
                started,
            });
            continue;
        }
        let Some(oldest) = syncing.pop_front() else {
            continue;
        };
        if oldest.sent {
            if let Err(source) = log.finish_sync() {
                return fail(queue, &on_fatal, source);
            }
        }
        let took = oldest.started.elapsed();
        last_sync = Some(LastSync {
            started: oldest.started,
            ended: oldest.started + took,
            writers: oldest.submissions.len(),
        });
        METRICS.commit_batches.inc();
        METRICS
            .commit_batch_size
            .observe(oldest.submissions.len() as f64);
        METRICS.commit_duration.observe(took.as_secs_f64());
        METRICS.wal_bytes.inc_by(oldest.bytes as u64);
        tracing::trace!(
            writers = oldest.submissions.len(),
            bytes = oldest.bytes,
            micros = took.as_micros() as u64,
            "group commit"
        );
        for submission in oldest.submissions {
            if let Some(on_durable) = submission.on_durable {
                on_durable();
            }
            if let Some(done) = submission.done {
                let _ = done.send(());
            }
        }
    }
    Some(log.seq())
}

/// A failed append or sync: fatal, and no writer under way or to come is ever answered
/// (dropping them fails their writes instead of acknowledging data that may be lost).
fn fail(queue: &Queue, on_fatal: &FatalHandler, source: std::io::Error) -> Option<u64> {
    on_fatal(&StoreError::Io {
        context: "appending to the write-ahead log".into(),
        source,
    });
    queue.abandon();
    None
}

/// Ends group commit as a failed sync would if the flusher unwinds (the work run after a
/// sync, [`OnDurable`], is the writers' code): the writers of the batch under way, those
/// waiting and any later one fail instead of waiting for a thread that is gone.
struct FailOnPanic<'a> {
    queue: &'a Queue,
    on_fatal: &'a FatalHandler,
}

impl Drop for FailOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            (self.on_fatal)(&StoreError::Engine {
                context: "group commit".into(),
                detail: "the flusher thread panicked".into(),
            });
            self.queue.abandon();
        }
    }
}

/// When the last sync started and ended, and how many writers it answered.
#[derive(Debug, Clone, Copy)]
struct LastSync {
    started: Instant,
    ended: Instant,
    writers: usize,
}

/// What the flusher waits for before its next sync: `writers` waiting (or, with
/// `beyond_waiting`, `writers` more than were waiting when it began), or `until`, whichever
/// comes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Gathering {
    writers: usize,
    until: Instant,
    beyond_waiting: bool,
}

/// The fewest writers a sync must have answered for the flusher to gather the next batch,
/// and the fewest it then waits for. Fewer concurrent writers leave the server with CPU to
/// spare, and a sync started at once serves them best (16 connections measured the same
/// with and without gathering at 24).
const GATHER_FROM_WRITERS: usize = 24;

/// The most writers a paced sync waits for (while the workers are saturated): a flood's
/// thousands of writers are synced at once rather than wait for the interval to end.
const PACED_WRITERS: usize = 1024;

/// The fewest writers a batch must have to start its sync while another is under way.
const PIPELINE_FROM_WRITERS: usize = GATHER_FROM_WRITERS;

/// Whether to wait for more writers before the next sync, and for how many: three quarters
/// of those the last sync answered, and at least [`GATHER_FROM_WRITERS`], at most until
/// `interval` after it started. Under that load they are coming, and each one that joins
/// saves a sync's worth of CPU. Waiting for all of them would hold every sync until the
/// slowest writer is in, so that processing and syncing take turns instead of overlapping:
/// with 4 connections that cost a fifth of the requests a second. The floor keeps gathering
/// on for as long as the load fills it within the interval (three quarters alone shrank
/// back to no gathering under 64 connections); when the interval ends first, the sync takes
/// what came, and the next waits for fewer or, below the floor, not at all. No waiting
/// before the first sync or without an interval.
///
/// A `remote` log's sync (a replicated changelog's publish, acknowledged by a quorum of
/// servers that fsync it) lasts longer than the writers it answered take to come back. Its
/// writers would then split into two cohorts that take turns, one publishing while the other
/// comes back, each message carrying half of them: measured with 64 connections, 32 writers
/// a message. So after such a sync the flusher waits, until `interval` after the sync
/// *ended*, for as many writers as it answered beyond those already waiting: the cohorts
/// merge, and a message (a round of fsyncs on the servers) carries nearly twice the writes
/// (docs/benchmarks.md has the figures).
///
/// While syncs are `paced` (a local log only: the runtime's workers are saturated, or no
/// writer waits for a sync, [`Pacing`]), the flusher waits until
/// `interval` after the last sync started, for up to [`PACED_WRITERS`]: a sync at most once
/// an interval, whatever the last one answered.
fn gathering(
    last_sync: Option<LastSync>,
    interval: Duration,
    remote: bool,
    paced: bool,
) -> Option<Gathering> {
    if interval.is_zero() {
        return None;
    }
    if paced && !remote {
        return last_sync.map(|last| Gathering {
            writers: PACED_WRITERS,
            until: last.started + interval,
            beyond_waiting: false,
        });
    }
    last_sync
        .filter(|last| last.writers >= GATHER_FROM_WRITERS)
        .map(|last| match remote {
            false => Gathering {
                writers: (last.writers * 3 / 4).max(GATHER_FROM_WRITERS),
                until: last.started + interval,
                beyond_waiting: false,
            },
            true => Gathering {
                writers: last.writers,
                until: last.ended + interval,
                beyond_waiting: true,
            },
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// A log whose sync can be made to fail, counting how often it is asked to sync.
    #[derive(Default)]
    struct FaultyLog {
        fail: AtomicBool,
        syncs: AtomicUsize,
        frames: AtomicUsize,
    }

    impl Log for Arc<FaultyLog> {
        fn append(&mut self, _: &mut Frame) -> std::io::Result<()> {
            self.frames.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
        fn sync(&mut self) -> std::io::Result<()> {
            self.syncs.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(5));
            if self.fail.load(Ordering::SeqCst) {
                Err(std::io::Error::other("injected EIO"))
            } else {
                Ok(())
            }
        }
        fn seq(&self) -> u64 {
            1
        }
    }

    fn started(log: &Arc<FaultyLog>, interval: Duration) -> Committer {
        Committer::with_log(log.clone(), Arc::new(|_: &StoreError| {}), interval).unwrap()
    }

    /// A committer without an interval, and how often it has reported a fatal error.
    fn counting_fatal_calls(log: &Arc<FaultyLog>) -> (Committer, Arc<AtomicUsize>) {
        let fatal_calls = Arc::new(AtomicUsize::new(0));
        let seen = fatal_calls.clone();
        let on_fatal = Arc::new(move |_: &StoreError| {
            seen.fetch_add(1, Ordering::SeqCst);
        });
        let committer = Committer::with_log(log.clone(), on_fatal, Duration::ZERO).unwrap();
        (committer, fatal_calls)
    }

    /// A log whose syncs wait until the test opens its gate, saying when one has begun.
    #[derive(Default)]
    struct GatedLog {
        state: Mutex<Gate>,
        changed: Condvar,
    }

    #[derive(Default)]
    struct Gate {
        open: bool,
        syncing: bool,
        syncs: usize,
    }

    impl GatedLog {
        fn gate(&self) -> MutexGuard<'_, Gate> {
            self.state.lock().unwrap()
        }

        /// Waits (at most 10 s) until a sync has begun and waits at the gate.
        fn wait_for_a_sync(&self) {
            let (gate, _) = self
                .changed
                .wait_timeout_while(self.gate(), Duration::from_secs(10), |gate| !gate.syncing)
                .unwrap();
            assert!(gate.syncing, "no sync began");
        }

        fn open(&self) {
            self.gate().open = true;
            self.changed.notify_all();
        }
    }

    impl Log for Arc<GatedLog> {
        fn append(&mut self, _: &mut Frame) -> std::io::Result<()> {
            Ok(())
        }
        fn sync(&mut self) -> std::io::Result<()> {
            let mut gate = self.gate();
            gate.syncing = true;
            self.changed.notify_all();
            let (mut gate, _) = self
                .changed
                .wait_timeout_while(gate, Duration::from_secs(10), |gate| !gate.open)
                .unwrap();
            gate.syncing = false;
            gate.syncs += 1;
            Ok(())
        }
        fn seq(&self) -> u64 {
            1
        }
    }

    fn in_the_background(log: impl Log) -> Committer {
        Committer::with_pacing(
            log,
            Arc::new(|_: &StoreError| {}),
            Duration::from_millis(1),
            Pacing::Always,
        )
        .unwrap()
    }

    #[tokio::test]
    async fn a_write_in_the_background_is_answered_and_its_work_run_before_its_sync() {
        let log = Arc::new(GatedLog::default());
        let committer = in_the_background(log.clone());
        let tally = Arc::new(Tally::default());
        let first = committer.submit_in_background(vec![1], None).unwrap();
        assert!(first.is_none(), "answered at once");
        log.wait_for_a_sync();
        let second = committer
            .submit_in_background(vec![2], tallied(&tally))
            .unwrap();
        assert!(second.is_none(), "answered while a sync is under way");
        assert_eq!(tally.ran.load(Ordering::SeqCst), 1, "its work ran at once");
        // A bare wait (a barrier) still waits for the disk.
        let mut barrier = committer.submit(Vec::new(), None).unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(barrier.try_recv().is_err(), "a barrier passed a held sync");
        log.open();
        tokio::time::timeout(Duration::from_secs(10), barrier)
            .await
            .expect("the barrier completes once the syncs do")
            .unwrap();
        assert!(log.gate().syncs >= 2, "the second write was synced too");
    }

    #[tokio::test]
    async fn past_the_backlog_a_write_in_the_background_waits_for_its_sync() {
        let log = Arc::new(GatedLog::default());
        let committer = in_the_background(log.clone());
        assert!(committer
            .submit_in_background(vec![1], None)
            .unwrap()
            .is_none());
        log.wait_for_a_sync();
        for n in 0..BACKGROUND_BACKLOG {
            let answer = committer.submit_in_background(vec![1], None).unwrap();
            assert!(answer.is_none(), "write {n} of the backlog waited");
        }
        let tally = Arc::new(Tally::default());
        let wait = committer
            .submit_in_background(vec![1], tallied(&tally))
            .unwrap()
            .expect("a write past the backlog waits for its sync");
        assert_eq!(tally.ran.load(Ordering::SeqCst), 0, "ran before its sync");
        log.open();
        tokio::time::timeout(Duration::from_secs(10), wait)
            .await
            .expect("answered once synced")
            .unwrap();
        assert_eq!(tally.ran.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_closed_log_refuses_a_write_in_the_background_and_drops_its_work_unrun() {
        let log = Arc::new(FaultyLog::default());
        let mut committer = in_the_background(log.clone());
        committer.stop();
        let tally = Arc::new(Tally::default());
        assert!(committer
            .submit_in_background(vec![1], tallied(&tally))
            .is_err());
        assert_eq!(tally.ran.load(Ordering::SeqCst), 0);
        assert_eq!(tally.dropped.load(Ordering::SeqCst), 1, "kept what it held");
    }

    #[test]
    fn writes_in_the_background_are_synced_at_most_once_an_interval() {
        let log = Arc::new(FaultyLog::default());
        let interval = Duration::from_millis(25);
        let committer = Committer::with_pacing(
            log.clone(),
            Arc::new(|_: &StoreError| {}),
            interval,
            Pacing::Always,
        )
        .unwrap();
        let until = Instant::now() + Duration::from_millis(250);
        while Instant::now() < until {
            assert!(committer
                .submit_in_background(vec![1], None)
                .unwrap()
                .is_none());
            std::thread::sleep(Duration::from_millis(1));
        }
        let syncs = log.syncs.load(Ordering::SeqCst);
        // Unpaced, a sync would start as each 5 ms sync ends: about 50.
        assert!(
            (1..=13).contains(&syncs),
            "{syncs} syncs in 250 ms, at most one every 25 ms"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_writers_share_few_syncs() {
        let log = Arc::new(FaultyLog::default());
        let committer = Arc::new(started(&log, Duration::ZERO));
        let waits: Vec<_> = (0..200)
            .map(|_| {
                let committer = committer.clone();
                tokio::spawn(async move { committer.submit(vec![1], None).unwrap().await })
            })
            .collect();
        for wait in waits {
            assert!(wait.await.unwrap().is_ok());
        }
        let syncs = log.syncs.load(Ordering::SeqCst);
        assert!((1..200).contains(&syncs), "200 writers took {syncs} syncs");
        assert_eq!(log.frames.load(Ordering::SeqCst), syncs, "one frame a sync");
    }

    #[tokio::test]
    async fn bare_waits_are_answered_without_a_sync_once_what_they_wait_for_is_on_disk() {
        let log = Arc::new(FaultyLog::default());
        let committer = started(&log, Duration::ZERO);
        committer.submit(vec![1], None).unwrap().await.unwrap();
        committer.submit(Vec::new(), None).unwrap().await.unwrap();
        assert_eq!(log.syncs.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn the_flusher_waits_for_as_many_writers_as_last_time_within_the_interval() {
        let interval = Duration::from_millis(1);
        let started = Instant::now();
        let ended = started + Duration::from_millis(3);
        let last = |writers| {
            Some(LastSync {
                started,
                ended,
                writers,
            })
        };
        for remote in [false, true] {
            assert_eq!(gathering(None, interval, remote, false), None);
            assert_eq!(
                gathering(last(1), interval, remote, false),
                None,
                "a lone writer waits for no one"
            );
            assert_eq!(
                gathering(last(GATHER_FROM_WRITERS - 1), interval, remote, false),
                None
            );
            assert!(gathering(last(GATHER_FROM_WRITERS), interval, remote, false).is_some());
            assert_eq!(gathering(last(46), Duration::ZERO, remote, false), None);
        }
        assert_eq!(
            gathering(last(46), interval, false, false),
            Some(Gathering {
                writers: 34,
                until: started + interval,
                beyond_waiting: false,
            })
        );
        assert_eq!(
            gathering(last(46), interval, true, false),
            Some(Gathering {
                writers: 46,
                until: ended + interval,
                beyond_waiting: true,
            }),
            "after a round trip, the writers it answered are waited for beyond those waiting"
        );
    }

    /// Keeps the runtime's workers busy until `until` with tasks of 20 µs, each spawning
    /// the next, so that no worker parks and tokio counts their busy time as it goes.
    fn keep_busy(until: Instant) {
        tokio::spawn(async move {
            let step = Instant::now() + Duration::from_micros(20);
            while Instant::now() < step {
                std::hint::spin_loop();
            }
            if Instant::now() < until {
                keep_busy(until);
            }
        });
    }

    #[test]
    fn a_lone_writer_is_paced_only_while_the_workers_are_saturated() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let log = Arc::new(FaultyLog::default());
        let interval = Duration::from_millis(25);
        let committer = runtime.block_on(async { started(&log, interval) });
        // One writer at a time for `span`: the syncs its writes took.
        let syncs_over = |span: Duration| {
            let before = log.syncs.load(Ordering::SeqCst);
            let until = Instant::now() + span;
            while Instant::now() < until {
                let durable = committer.submit(vec![1], None).unwrap();
                durable.blocking_recv().unwrap();
            }
            log.syncs.load(Ordering::SeqCst) - before
        };
        // Idle workers: each write is synced at once (a sync takes 5 ms here).
        let idle = syncs_over(Duration::from_millis(250));
        let busy_until = Instant::now() + Duration::from_millis(700);
        runtime.block_on(async { keep_busy(busy_until) });
        std::thread::sleep(Duration::from_millis(60));
        let saturated = syncs_over(Duration::from_millis(250));
        // Unpaced, about 50 syncs; paced, one every 25 ms would be 11 (measured 13 to 16:
        // tokio counts busy time in steps, and a stretch now and then falls short).
        assert!(idle >= 30, "idle workers: {idle} syncs in 250 ms");
        assert!(
            saturated <= 25,
            "saturated workers: {saturated} syncs in 250 ms, about one every 25 ms"
        );
        // Dropping the runtime ends the busy chain between two of its tasks.
    }

    #[test]
    fn saturated_workers_pace_a_local_log_s_syncs_to_one_an_interval() {
        let interval = Duration::from_millis(1);
        let started = Instant::now();
        let last = |writers| {
            Some(LastSync {
                started,
                ended: started + Duration::from_micros(300),
                writers,
            })
        };
        for writers in [1, 5, GATHER_FROM_WRITERS, 200] {
            assert_eq!(
                gathering(last(writers), interval, false, true),
                Some(Gathering {
                    writers: PACED_WRITERS,
                    until: started + interval,
                    beyond_waiting: false,
                }),
                "{writers} writers answered last time"
            );
        }
        assert_eq!(
            gathering(None, interval, false, true),
            None,
            "the first sync waits for no one"
        );
        assert_eq!(gathering(last(5), Duration::ZERO, false, true), None);
        assert_eq!(
            gathering(last(5), interval, true, true),
            None,
            "a remote log gathers by its own rule"
        );
    }

    #[test]
    fn a_remote_log_s_gathering_counts_beyond_the_writers_already_waiting() {
        let queue = Arc::new(Queue::default());
        let mut waits = Vec::new();
        for _ in 0..2 {
            let (submission, wait) = submission();
            queue.submit(submission).unwrap();
            waits.push(wait);
        }
        let plan = Gathering {
            writers: 2,
            until: Instant::now() + Duration::from_secs(20),
            beyond_waiting: true,
        };
        let gatherer = {
            let queue = queue.clone();
            std::thread::spawn(move || {
                let mut batch = Vec::new();
                assert!(queue.take(&mut batch, Some(plan)));
                batch.len()
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !gatherer.is_finished(),
            "two were waiting: it waits for two more"
        );
        for _ in 0..2 {
            let (submission, wait) = submission();
            queue.submit(submission).unwrap();
            waits.push(wait);
        }
        assert_eq!(gatherer.join().unwrap(), 4);
    }

    fn submission() -> (Submission, oneshot::Receiver<()>) {
        let (done, wait) = oneshot::channel();
        (
            Submission {
                writes: Vec::new(),
                on_durable: None,
                done: Some(done),
            },
            wait,
        )
    }

    #[test]
    fn gathering_ends_once_enough_writers_are_in() {
        let queue = Arc::new(Queue::default());
        let plan = Gathering {
            writers: 3,
            until: Instant::now() + Duration::from_secs(20),
            beyond_waiting: false,
        };
        let gatherer = {
            let queue = queue.clone();
            std::thread::spawn(move || {
                let mut batch = Vec::new();
                assert!(queue.take(&mut batch, Some(plan)));
                batch.len()
            })
        };
        let started = Instant::now();
        let mut waits = Vec::new();
        for _ in 0..3 {
            std::thread::sleep(Duration::from_millis(10));
            let (submission, wait) = submission();
            queue.submit(submission).unwrap();
            waits.push(wait);
        }
        assert_eq!(gatherer.join().unwrap(), 3);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "gathering waited for the interval although every writer was in"
        );
    }

    #[test]
    fn gathering_ends_with_the_interval_when_fewer_writers_come() {
        let queue = Queue::default();
        let (first, _wait) = submission();
        queue.submit(first).unwrap();
        let started = Instant::now();
        let plan = Gathering {
            writers: 5,
            until: started + Duration::from_millis(50),
            beyond_waiting: false,
        };
        let mut batch = Vec::new();
        assert!(queue.take(&mut batch, Some(plan)));
        assert_eq!(batch.len(), 1);
        assert!(started.elapsed() >= Duration::from_millis(50));
    }

    #[test]
    fn a_closed_queue_hands_out_what_it_holds_then_ends_and_refuses_more() {
        let queue = Queue::default();
        let (first, _wait) = submission();
        queue.submit(first).unwrap();
        queue.close();
        assert!(queue.submit(submission().0).is_err());
        let mut batch = Vec::new();
        assert!(queue.take(&mut batch, None));
        assert_eq!(batch.len(), 1);
        batch.clear();
        assert!(!queue.take(&mut batch, None));
    }

    #[tokio::test]
    async fn a_first_write_is_synced_without_waiting_for_the_interval() {
        let log = Arc::new(FaultyLog::default());
        let committer = started(&log, Duration::from_secs(20));
        let wait = committer.submit(vec![1], None).unwrap();
        let answered = tokio::time::timeout(Duration::from_secs(10), wait).await;
        assert!(
            matches!(answered, Ok(Ok(()))),
            "the first write waited for the interval"
        );
    }

    /// Counts how often it ran and how often it was dropped.
    #[derive(Default)]
    struct Tally {
        ran: AtomicUsize,
        dropped: AtomicUsize,
    }

    struct Held(Arc<Tally>);

    impl Drop for Held {
        fn drop(&mut self) {
            self.0.dropped.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn tallied(tally: &Arc<Tally>) -> Option<OnDurable> {
        let held = Held(tally.clone());
        Some(Box::new(move || {
            held.0.ran.fetch_add(1, Ordering::SeqCst);
        }))
    }

    #[tokio::test]
    async fn what_waits_for_a_write_runs_once_it_is_on_disk_and_before_its_answer() {
        let log = Arc::new(FaultyLog::default());
        let committer = started(&log, Duration::ZERO);
        let tally = Arc::new(Tally::default());
        let wait = committer.submit(vec![1], tallied(&tally)).unwrap();
        wait.await.unwrap();
        assert_eq!(tally.ran.load(Ordering::SeqCst), 1, "ran before the answer");
        assert_eq!(
            tally.dropped.load(Ordering::SeqCst),
            1,
            "released what it held"
        );
        assert_eq!(log.syncs.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn what_waits_for_a_write_that_never_reaches_disk_is_released_unrun() {
        let log = Arc::new(FaultyLog::default());
        log.fail.store(true, Ordering::SeqCst);
        let committer =
            Committer::with_log(log.clone(), Arc::new(|_: &StoreError| {}), Duration::ZERO)
                .unwrap();
        let tally = Arc::new(Tally::default());
        assert!(committer
            .submit(vec![1], tallied(&tally))
            .unwrap()
            .await
            .is_err());
        assert_eq!(tally.ran.load(Ordering::SeqCst), 0, "ran for a lost write");
        assert_eq!(tally.dropped.load(Ordering::SeqCst), 1, "kept what it held");
    }

    #[tokio::test]
    async fn a_panic_after_a_sync_fails_every_later_writer_instead_of_hanging_them() {
        let log = Arc::new(FaultyLog::default());
        let (committer, fatal_calls) = counting_fatal_calls(&log);
        let panics: OnDurable = Box::new(|| panic!("work after a sync panicked (on purpose)"));
        let first = committer.submit(vec![1], Some(panics)).unwrap();
        let answered = tokio::time::timeout(Duration::from_secs(10), first).await;
        assert!(matches!(answered, Ok(Err(_))), "the writer was not failed");
        let later = committer.submit(vec![1], None);
        let failed = match later {
            Err(_) => true,
            Ok(wait) => matches!(
                tokio::time::timeout(Duration::from_secs(10), wait).await,
                Ok(Err(_))
            ),
        };
        assert!(failed, "a later writer was left waiting or acknowledged");
        assert_eq!(fatal_calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_failed_sync_is_fatal_and_acknowledges_nothing() {
        let log = Arc::new(FaultyLog::default());
        log.fail.store(true, Ordering::SeqCst);
        let (committer, fatal_calls) = counting_fatal_calls(&log);
        assert!(
            committer.submit(vec![1], None).unwrap().await.is_err(),
            "the write must not be acknowledged"
        );
        // Later writers are refused too: the flusher never retries a failed fsync.
        log.fail.store(false, Ordering::SeqCst);
        let later = committer.submit(vec![1], None);
        let refused = match later {
            Err(_) => true,
            Ok(wait) => tokio::time::timeout(std::time::Duration::from_secs(5), wait)
                .await
                .map_or(true, |answer| answer.is_err()),
        };
        assert!(refused);
        assert_eq!(fatal_calls.load(Ordering::SeqCst), 1);
        assert_eq!(log.syncs.load(Ordering::SeqCst), 1);
    }
}
