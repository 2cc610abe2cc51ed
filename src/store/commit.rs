//! Group commit: writers that need their changes on disk register and wait; one flusher
//! thread takes every waiter that has arrived, makes the store durable once for all of them,
//! and only then answers them. Durability then costs one flush per batch, not per write.
//!
//! Under load the flusher also keeps a minimum interval between the starts of two syncs
//! (`--commit-interval-us`, 1 ms by default). A sync costs about the same CPU however many
//! writes it covers: sled seals a log buffer and writes it on its I/O threads, the kernel
//! journals and kicks the disk, and every thread involved is woken. Without the interval a
//! sync under 64 connections covered about 13 writes and the syncs took a fifth of the
//! server's CPU; with it they cover 40 and more. The wait applies only while writers share
//! syncs: the first write after a quiet spell, and the next write of a lone client, are synced
//! at once. So the interval bounds the latency it adds, and adds none without concurrency.
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
    /// Starts the flusher thread over `storage`, starting syncs at least `interval` apart.
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
        let wait = wait_before_sync(last_sync, Instant::now(), interval);
        if !wait.is_zero() {
            // Writers arriving meanwhile join this batch instead of paying for a sync of
            // their own.
            std::thread::sleep(wait);
        }
        let mut batch = vec![first];
        batch.extend(queue.try_iter());
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

/// When the last sync started, and how many writers it answered.
#[derive(Debug, Clone, Copy)]
struct LastSync {
    started: Instant,
    writers: usize,
}

/// How long a writer arriving at `now` waits for its sync: what is left of `interval` since
/// the last sync started. Nothing before the first sync, after a quiet spell, or when the
/// last sync answered a single writer: a lone client writing one request after another
/// would only be slowed down, as no one else is coming to share the sync.
fn wait_before_sync(last_sync: Option<LastSync>, now: Instant, interval: Duration) -> Duration {
    last_sync
        .filter(|last| last.writers > 1)
        .and_then(|last| interval.checked_sub(now.saturating_duration_since(last.started)))
        .unwrap_or(Duration::ZERO)
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
    fn a_writer_waits_only_for_what_is_left_of_the_interval_after_a_shared_sync() {
        let interval = Duration::from_millis(1);
        let start = Instant::now();
        assert_eq!(wait_before_sync(None, start, interval), Duration::ZERO);
        let at = |micros| start + Duration::from_micros(micros);
        let shared = Some(LastSync {
            started: start,
            writers: 2,
        });
        assert_eq!(
            wait_before_sync(shared, at(300), interval),
            Duration::from_micros(700)
        );
        assert_eq!(wait_before_sync(shared, at(1000), interval), Duration::ZERO);
        assert_eq!(wait_before_sync(shared, at(5000), interval), Duration::ZERO);
        assert_eq!(
            wait_before_sync(shared, at(300), Duration::ZERO),
            Duration::ZERO
        );
        let lone = Some(LastSync {
            started: start,
            writers: 1,
        });
        assert_eq!(wait_before_sync(lone, at(300), interval), Duration::ZERO);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn syncs_under_load_are_an_interval_apart() {
        // Syncs take 5 ms here; without the interval a steady stream of writers would get
        // one about every 5 ms.
        let interval = Duration::from_millis(30);
        let storage = Arc::new(FaultySync::default());
        let committer = Arc::new(
            Committer::start(storage.clone(), Arc::new(|_: &StoreError| {}), interval).unwrap(),
        );
        let started = Instant::now();
        let writers: Vec<_> = (0..8)
            .map(|_| {
                let committer = committer.clone();
                tokio::spawn(async move {
                    let mut writes = 0;
                    while writes < 1_000 && started.elapsed() < Duration::from_millis(300) {
                        committer.register().unwrap().await.unwrap();
                        writes += 1;
                    }
                    writes
                })
            })
            .collect();
        let mut writes = 0;
        for writer in writers {
            writes += writer.await.unwrap();
        }
        let elapsed = started.elapsed();
        let syncs = storage.syncs.load(Ordering::SeqCst) as u128;
        let most = elapsed.as_millis() / interval.as_millis() + 2;
        assert!(
            syncs <= most,
            "{syncs} syncs in {elapsed:?} ({writes} writes), at most {most} expected"
        );
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
