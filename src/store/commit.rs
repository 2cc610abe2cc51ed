//! Group commit: writers that need their changes on disk register and wait; one flusher
//! thread takes every waiter that has arrived, makes the store durable once for all of them,
//! and only then answers them. Durability then costs one flush per batch, not per write.
//!
//! Under load the flusher also gathers writers before a sync: after a sync that answered
//! 24 writers or more it waits, at most `--commit-interval-us` (1 ms by default) from that
//! sync's start, until three quarters as many (and at least 24) are waiting. A sync costs
//! about the same CPU however many writes it covers: sled seals and writes a log buffer on
//! its I/O threads, the kernel journals and kicks the disk, and every thread involved is
//! woken. Under 64 connections a sync covered about 12 writes without gathering and about 25
//! with it. Fewer concurrent writers never wait, nor does the first write after a quiet
//! spell: a sync at once serves them best.
//!
//! A failed flush or fsync is fatal: the process must stop rather than acknowledge writes it
//! may have lost (retrying an fsync after a failure can report success over lost data).

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::{Storage, StoreError};
use crate::metrics::METRICS;

/// Called when the store could not be made durable. In the server it ends the process.
pub type FatalHandler = Arc<dyn Fn(&StoreError) + Send + Sync>;

/// The handle writers wait on.
pub struct Committer {
    waiters: Option<mpsc::Sender<oneshot::Sender<()>>>,
    flusher: Option<std::thread::JoinHandle<()>>,
}

impl Committer {
    /// Starts the flusher thread over `storage`; under heavy load a sync may wait up to
    /// `interval` from the previous one's start for writers to gather (see the module).
    pub fn start(
        storage: Arc<dyn Storage>,
        on_fatal: FatalHandler,
        interval: Duration,
    ) -> Result<Committer, StoreError> {
        let (waiters, queue) = mpsc::channel::<oneshot::Sender<()>>();
        let flusher = std::thread::Builder::new()
            .name("boxsub-flusher".into())
            .spawn(move || flush_loop(storage, queue, on_fatal, interval))
            .map_err(|source| StoreError::Io {
                context: "starting the flusher thread".into(),
                source,
            })?;
        Ok(Committer {
            waiters: Some(waiters),
            flusher: Some(flusher),
        })
    }

    /// Registers a waiter: the receiver completes once everything written before the call is
    /// on disk, and fails if that can't be confirmed.
    pub fn register(&self) -> Result<oneshot::Receiver<()>, StoreError> {
        let (done, wait) = oneshot::channel();
        self.waiters
            .as_ref()
            .ok_or(StoreError::NotDurable)?
            .send(done)
            .map_err(|_| StoreError::NotDurable)?;
        Ok(wait)
    }

    /// Stops the flusher after it has answered every waiter.
    pub fn stop(&mut self) {
        self.waiters = None;
        if let Some(flusher) = self.flusher.take() {
            let _ = flusher.join();
        }
    }
}

impl Drop for Committer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn flush_loop(
    storage: Arc<dyn Storage>,
    queue: mpsc::Receiver<oneshot::Sender<()>>,
    on_fatal: FatalHandler,
    interval: Duration,
) {
    let mut last_sync: Option<LastSync> = None;
    // Each waiter registered after its write reached the store, so one sync after taking a
    // batch covers every write of that batch.
    while let Ok(first) = queue.recv() {
        let mut batch = vec![first];
        batch.extend(queue.try_iter());
        if let Some(plan) = gathering(last_sync, interval) {
            gather(&queue, &mut batch, plan, GATHER_SLICE);
        }
        let started = Instant::now();
        last_sync = Some(LastSync {
            started,
            writers: batch.len(),
        });
        match storage.sync() {
            Ok(()) => {
                let took = started.elapsed();
                METRICS.commit_batches.inc();
                METRICS.commit_batch_size.observe(batch.len() as f64);
                METRICS.commit_duration.observe(took.as_secs_f64());
                tracing::trace!(
                    writers = batch.len(),
                    micros = took.as_micros() as u64,
                    "group commit"
                );
                for waiter in batch {
                    let _ = waiter.send(());
                }
            }
            Err(error) => {
                on_fatal(&error);
                // Never answer these waiters, nor any later one: dropping them fails their
                // writes instead of acknowledging data that may be lost.
                drop(batch);
                for waiter in queue.iter() {
                    drop(waiter);
                }
                return;
            }
        }
    }
}

/// How often the flusher looks for new writers while it gathers a batch. It sleeps rather
/// than blocking on the queue, so that writers registering meanwhile wake no one.
const GATHER_SLICE: Duration = Duration::from_micros(100);

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

/// Adds writers from `queue` to `batch` until it holds `plan.writers` or `plan.until` has
/// passed, looking every `slice`.
fn gather(
    queue: &mpsc::Receiver<oneshot::Sender<()>>,
    batch: &mut Vec<oneshot::Sender<()>>,
    plan: Gathering,
    slice: Duration,
) {
    while batch.len() < plan.writers {
        let left = plan.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(slice));
        batch.extend(queue.try_iter());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Entry, WriteBatch};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// A storage whose sync can be made to fail, counting how often it is asked to sync.
    #[derive(Default)]
    struct FaultySync {
        fail: AtomicBool,
        syncs: AtomicUsize,
    }

    impl Storage for FaultySync {
        fn get(&self, _: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
            Ok(None)
        }
        fn apply(&self, _: WriteBatch) -> Result<(), StoreError> {
            Ok(())
        }
        fn put(&self, _: &[u8], _: Vec<u8>) -> Result<(), StoreError> {
            Ok(())
        }
        fn remove_if(&self, _: &[u8], _: &[u8]) -> Result<bool, StoreError> {
            Ok(false)
        }
        fn scan(&self, _: &[u8], _: usize, _: usize) -> Result<Vec<Entry>, StoreError> {
            Ok(Vec::new())
        }
        fn for_each_between(
            &self,
            _: &[u8],
            _: Option<&[u8]>,
            _: &mut dyn FnMut(&[u8], &[u8]) -> bool,
        ) -> Result<(), StoreError> {
            Ok(())
        }
        fn last_between(&self, _: &[u8], _: Option<&[u8]>) -> Result<Option<Entry>, StoreError> {
            Ok(None)
        }
        fn sync(&self) -> Result<(), StoreError> {
            self.syncs.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(5));
            if self.fail.load(Ordering::SeqCst) {
                Err(StoreError::Io {
                    context: "fsync of the store's data file".into(),
                    source: std::io::Error::other("injected EIO"),
                })
            } else {
                Ok(())
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_writers_share_few_syncs() {
        let storage = Arc::new(FaultySync::default());
        let committer = Arc::new(
            Committer::start(
                storage.clone(),
                Arc::new(|_: &StoreError| {}),
                Duration::ZERO,
            )
            .unwrap(),
        );
        let waits: Vec<_> = (0..200)
            .map(|_| {
                let committer = committer.clone();
                tokio::spawn(async move { committer.register().unwrap().await })
            })
            .collect();
        for wait in waits {
            assert!(wait.await.unwrap().is_ok());
        }
        let syncs = storage.syncs.load(Ordering::SeqCst);
        assert!((1..200).contains(&syncs), "200 writers took {syncs} syncs");
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

    #[test]
    fn gathering_ends_once_enough_writers_are_in() {
        let (register, queue) = mpsc::channel();
        let plan = Gathering {
            writers: 3,
            until: Instant::now() + Duration::from_secs(20),
        };
        let gatherer = std::thread::spawn(move || {
            let mut batch = Vec::new();
            gather(&queue, &mut batch, plan, Duration::from_millis(1));
            batch.len()
        });
        let started = Instant::now();
        let mut receivers = Vec::new();
        for _ in 0..3 {
            std::thread::sleep(Duration::from_millis(10));
            let (done, wait) = oneshot::channel::<()>();
            register.send(done).unwrap();
            receivers.push(wait);
        }
        assert_eq!(gatherer.join().unwrap(), 3);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "gathering waited for the interval although every writer was in"
        );
    }

    #[test]
    fn gathering_ends_with_the_interval_when_fewer_writers_come() {
        let (register, queue) = mpsc::channel();
        let (done, _wait) = oneshot::channel::<()>();
        register.send(done).unwrap();
        let started = Instant::now();
        let plan = Gathering {
            writers: 5,
            until: started + Duration::from_millis(50),
        };
        let mut batch = Vec::new();
        gather(&queue, &mut batch, plan, Duration::from_millis(1));
        assert_eq!(batch.len(), 1);
        assert!(started.elapsed() >= Duration::from_millis(50));
    }

    #[tokio::test]
    async fn a_first_write_is_synced_without_waiting_for_the_interval() {
        let storage = Arc::new(FaultySync::default());
        let committer = Committer::start(
            storage.clone(),
            Arc::new(|_: &StoreError| {}),
            Duration::from_secs(20),
        )
        .unwrap();
        let wait = committer.register().unwrap();
        let answered = tokio::time::timeout(Duration::from_secs(10), wait).await;
        assert!(
            matches!(answered, Ok(Ok(()))),
            "the first write waited for the interval"
        );
    }

    #[tokio::test]
    async fn a_failed_sync_is_fatal_and_acknowledges_nothing() {
        let storage = Arc::new(FaultySync::default());
        storage.fail.store(true, Ordering::SeqCst);
        let fatal_calls = Arc::new(AtomicUsize::new(0));
        let seen = fatal_calls.clone();
        let committer = Committer::start(
            storage.clone(),
            Arc::new(move |_: &StoreError| {
                seen.fetch_add(1, Ordering::SeqCst);
            }),
            Duration::ZERO,
        )
        .unwrap();
        assert!(
            committer.register().unwrap().await.is_err(),
            "the write must not be acknowledged"
        );
        // Later writers are refused too: the flusher never retries a failed fsync.
        storage.fail.store(false, Ordering::SeqCst);
        let later = committer.register();
        let refused = match later {
            Err(_) => true,
            Ok(wait) => tokio::time::timeout(std::time::Duration::from_secs(5), wait)
                .await
                .map_or(true, |answer| answer.is_err()),
        };
        assert!(refused);
        assert_eq!(fatal_calls.load(Ordering::SeqCst), 1);
        assert_eq!(storage.syncs.load(Ordering::SeqCst), 1);
    }
}
