//! Group commit: a writer hands the single-key writes it has just made (in the pending
//! layer) to the flusher thread, encoded for the write-ahead log ([`super::wal`]), and
//! waits. The flusher
//! takes every submission that has arrived, appends them to the log as one frame,
//! `fdatasync`s it once for all of them, and only then answers them. Durability then costs
//! one append and one sync per batch, not per write; sled itself is flushed behind the log,
//! a segment at a time (`checkpoint`). Submissions are answered in the order they
//! arrived, so a writer answered knows every write submitted before its own is durable too.
//!
//! Under load the flusher also gathers writers before a sync: after a sync that answered
//! 24 writers or more it waits, at most `--commit-interval-us` (1 ms by default) from that
//! sync's start, until three quarters as many (and at least 24) are waiting. A sync costs
//! about the same CPU however many writes it covers (the kernel writes and flushes, and
//! every thread involved is woken). Fewer concurrent writers never wait, nor does the first
//! write after a quiet spell: a sync at once serves them best. Writers leave their
//! submissions in a `Queue` that wakes the flusher only once as many are in as it waits
//! for, so that writers arriving while it gathers or syncs wake no one.
//!
//! A failed append or fsync is fatal: the process must stop rather than acknowledge writes it
//! may have lost (retrying an fsync after a failure can report success over lost data).

use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::checkpoint::{self, Segments};
use super::wal::{Frame, LogWriter, Segment, SpareSlot, WalDir};
use super::{FatalHandler, OnDurable};
use crate::metrics::METRICS;
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
/// answer once they are durable.
struct Submission {
    writes: Vec<u8>,
    on_durable: Option<OnDurable>,
    done: oneshot::Sender<()>,
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
}

impl Queue {
    fn waiting(&self) -> MutexGuard<'_, Waiting> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Leaves `submission` for the flusher, waking it if it waits for this many; refused
    /// once closed.
    fn submit(&self, submission: Submission) -> Result<(), StoreError> {
        let mut waiting = self.waiting();
        if waiting.closed {
            return Err(StoreError::NotDurable);
        }
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
            while waiting.submissions.len() < plan.writers && !waiting.closed {
                let left = plan.until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                waiting.wanted = plan.writers;
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

/// The handle writers submit to and wait on: the flusher, and the checkpointer behind it.
pub struct Committer {
    queue: Arc<Queue>,
    /// Returns the sequence number of the last segment written, `None` after a failure.
    flusher: Option<std::thread::JoinHandle<Option<u64>>>,
    checkpointer: Option<std::thread::JoinHandle<()>>,
}

impl Committer {
    /// Starts the flusher appending to the log in `wal` from `segment`, and the checkpointer
    /// that flushes `storage` behind it and reuses `segments`; under heavy load a sync may
    /// wait up to `interval` from the previous one's start for writers to gather (see the
    /// module).
    pub fn start(
        storage: Arc<dyn Storage>,
        wal: WalDir,
        segment: Segment,
        segments: Segments,
        on_fatal: FatalHandler,
        interval: Duration,
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
        let mut committer = Committer::with_log(writer, on_fatal, interval)?;
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
        let queue = Arc::new(Queue::default());
        let flusher = {
            let queue = queue.clone();
            std::thread::Builder::new()
                .name("boxsub-flusher".into())
                .spawn(move || flush_loop(log, &queue, on_fatal, interval))
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
        self.queue.submit(Submission {
            writes,
            on_durable,
            done,
        })?;
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

fn flush_loop(
    mut log: impl Log,
    queue: &Queue,
    on_fatal: FatalHandler,
    interval: Duration,
) -> Option<u64> {
    let _fail_on_panic = FailOnPanic {
        queue,
        on_fatal: &on_fatal,
    };
    let mut last_sync: Option<LastSync> = None;
    let mut frame = Frame::default();
    let mut batch = Vec::new();
    // Each writer submitted after its writes reached the engine, so one append and sync
    // after taking a batch covers every write of that batch.
    while queue.take(&mut batch, gathering(last_sync, interval)) {
        let started = Instant::now();
        last_sync = Some(LastSync {
            started,
            writers: batch.len(),
        });
        frame.clear();
        for submission in &batch {
            frame.push(&submission.writes);
        }
        // A batch of bare waits has nothing to write: what they wait for is on disk already.
        let written = if frame.is_empty() {
            Ok(())
        } else {
            log.append(&mut frame).and_then(|()| log.sync())
        };
        if let Err(source) = written {
            on_fatal(&StoreError::Io {
                context: "appending to the write-ahead log".into(),
                source,
            });
            // Never answer these writers, nor any later one: dropping them fails their
            // writes instead of acknowledging data that may be lost.
            queue.abandon();
            return None;
        }
        let took = started.elapsed();
        METRICS.commit_batches.inc();
        METRICS.commit_batch_size.observe(batch.len() as f64);
        METRICS.commit_duration.observe(took.as_secs_f64());
        METRICS.wal_bytes.inc_by(frame.len() as u64);
        tracing::trace!(
            writers = batch.len(),
            bytes = frame.len(),
            micros = took.as_micros() as u64,
            "group commit"
        );
        // Emptied, the batch keeps its memory for the next one.
        for submission in batch.drain(..) {
            if let Some(on_durable) = submission.on_durable {
                on_durable();
            }
            let _ = submission.done.send(());
        }
    }
    Some(log.seq())
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

/// When the last sync started, and how many writers it answered.
#[derive(Debug, Clone, Copy)]
struct LastSync {
    started: Instant,
    writers: usize,
}

/// What the flusher waits for before its next sync: `writers` waiting, or `until`,
/// whichever comes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Gathering {
    writers: usize,
    until: Instant,
}

/// The fewest writers a sync must have answered for the flusher to gather the next batch,
/// and the fewest it then waits for. Fewer concurrent writers leave the server with CPU to
/// spare, and a sync started at once serves them best (16 connections measured the same
/// with and without gathering at 24).
const GATHER_FROM_WRITERS: usize = 24;

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
fn gathering(last_sync: Option<LastSync>, interval: Duration) -> Option<Gathering> {
    last_sync
        .filter(|last| last.writers >= GATHER_FROM_WRITERS && !interval.is_zero())
        .map(|last| Gathering {
            writers: (last.writers * 3 / 4).max(GATHER_FROM_WRITERS),
            until: last.started + interval,
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
        let last = |writers| Some(LastSync { started, writers });
        assert_eq!(gathering(None, interval), None);
        assert_eq!(
            gathering(last(1), interval),
            None,
            "a lone writer waits for no one"
        );
        assert_eq!(gathering(last(GATHER_FROM_WRITERS - 1), interval), None);
        assert!(gathering(last(GATHER_FROM_WRITERS), interval).is_some());
        assert_eq!(gathering(last(46), Duration::ZERO), None);
        assert_eq!(
            gathering(last(46), interval),
            Some(Gathering {
                writers: 34,
                until: started + interval
            })
        );
    }

    fn submission() -> (Submission, oneshot::Receiver<()>) {
        let (done, wait) = oneshot::channel();
        (
            Submission {
                writes: Vec::new(),
                on_durable: None,
                done,
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
