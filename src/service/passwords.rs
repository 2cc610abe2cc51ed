//! Password work: argon2id hashing and checking on blocking threads, a bounded number at a
//! time with a bounded queue in front (a full queue is [`ServiceError::Busy`], not a wait
//! without end). A job whose caller is gone before it starts never runs, so a flood of
//! abandoned requests costs no hashing; a job that started runs to its end, and whatever it
//! settles (a sign-in attempt) is settled inside it. Must not touch: customers, throttles,
//! HTTP.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::domain::password::{hash_password, verify_password};
use crate::metrics::{refused, Refusal};

use super::ServiceError;

/// The bounded pool of password work.
pub struct PasswordWork {
    workers: Arc<Semaphore>,
    queue: Arc<Semaphore>,
    queue_size: usize,
    /// Verified against when the customer has no password, so that every failed sign-in
    /// costs one real argon2 check.
    stand_in_hash: String,
}

/// Sets its flag when dropped: tells a queued job that its caller is gone.
struct Abandon(Arc<AtomicBool>);

impl Drop for Abandon {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

impl PasswordWork {
    /// At most `workers` jobs at once, and at most `queue` waiting or running.
    pub fn new(workers: usize, queue: usize) -> Result<PasswordWork, ServiceError> {
        let stand_in_hash =
            hash_password("no password is set", &random_salt()?).map_err(ServiceError::Internal)?;
        let queue_size = queue.max(workers).max(1);
        Ok(PasswordWork {
            workers: Arc::new(Semaphore::new(workers.max(1))),
            queue: Arc::new(Semaphore::new(queue_size)),
            queue_size,
            stand_in_hash,
        })
    }

    /// The argon2id PHC string of a new password.
    pub async fn hash(&self, password: String) -> Result<String, ServiceError> {
        let salt = random_salt()?;
        self.run(move || hash_password(&password, &salt))
            .await?
            .map_err(ServiceError::Internal)
    }

    /// Checks `password` against `stored` (a PHC string), or against a stand-in when there is
    /// none so that the answer takes as long either way, then hands the outcome to `settle`
    /// on the worker thread: it runs if and only if the check ran, whether or not the caller
    /// still waits. True only for a stored hash that matches.
    pub async fn check(
        &self,
        password: String,
        stored: Option<String>,
        settle: impl FnOnce(bool) + Send + 'static,
    ) -> Result<bool, ServiceError> {
        let has_password = stored.is_some();
        let hash = stored.unwrap_or_else(|| self.stand_in_hash.clone());
        self.run(move || {
            let matches = verify_password(&password, &hash) && has_password;
            settle(matches);
            matches
        })
        .await
    }

    /// Jobs waiting or running (for tests and diagnostics).
    pub fn jobs_in_flight(&self) -> usize {
        self.queue_size - self.queue.available_permits()
    }

    async fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, ServiceError> {
        let queued = self.queue.clone().try_acquire_owned().map_err(|_| {
            refused(Refusal::PasswordQueue);
            ServiceError::Busy
        })?;
        let worker = self
            .workers
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| ServiceError::Internal("password work is shut down".into()))?;
        let abandoned = Arc::new(AtomicBool::new(false));
        let _abandon = Abandon(abandoned.clone());
        let ran = tokio::task::spawn_blocking(move || {
            // Both permits are released when the job ends, not when its caller stops
            // waiting, so they bound the threads actually busy.
            let _held = (queued, worker);
            if abandoned.load(Ordering::Acquire) {
                return None;
            }
            Some(job())
        })
        .await
        .map_err(|error| ServiceError::Internal(format!("password work failed: {error}")))?;
        ran.ok_or_else(|| ServiceError::Internal("password work skipped for a live caller".into()))
    }
}

fn random_salt() -> Result<[u8; 16], ServiceError> {
    let mut salt = [0u8; 16];
    getrandom::getrandom(&mut salt)
        .map_err(|error| ServiceError::Internal(format!("no randomness for a salt: {error}")))?;
    Ok(salt)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// Waits (bounded, off the async workers) for one message.
    async fn wait<T: Send + 'static>(
        receiver: mpsc::Receiver<T>,
    ) -> (Result<T, mpsc::RecvTimeoutError>, mpsc::Receiver<T>) {
        tokio::task::spawn_blocking(move || {
            let got = receiver.recv_timeout(Duration::from_secs(10));
            (got, receiver)
        })
        .await
        .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_started_job_runs_to_its_end_and_a_queued_one_abandoned_never_runs() {
        let work = Arc::new(PasswordWork::new(1, 4).unwrap());
        let (started, has_started) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        let (done, finished) = mpsc::channel();

        // The first job occupies the one worker until released; its caller goes away after
        // it has started.
        let first = {
            let (work, done) = (work.clone(), done.clone());
            tokio::spawn(async move {
                work.run(move || {
                    started.send(()).unwrap();
                    released.recv_timeout(Duration::from_secs(10)).unwrap();
                    done.send("first").unwrap();
                })
                .await
            })
        };
        let (got, _) = wait(has_started).await;
        got.unwrap();
        first.abort();
        // The second waits for the worker, and its caller goes away before it starts.
        let second = work.run(move || done.send("second").unwrap());
        assert!(tokio::time::timeout(Duration::from_millis(20), second)
            .await
            .is_err());
        release.send(()).unwrap();

        let (got, finished) = wait(finished).await;
        assert_eq!(got, Ok("first"), "a started job runs to its end");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while work.jobs_in_flight() > 0 {
            assert!(std::time::Instant::now() < deadline, "jobs never drained");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(finished.try_recv().is_err(), "the abandoned job never ran");
    }

    #[tokio::test]
    async fn a_full_queue_is_busy_not_a_wait() {
        let work = PasswordWork::new(1, 1).unwrap();
        let first = work.check("a".into(), None, |_| {});
        let mut first = std::pin::pin!(first);
        assert!(futures_util::poll!(first.as_mut()).is_pending());
        let second = work.check("b".into(), None, |_| {}).await;
        assert!(matches!(second, Err(ServiceError::Busy)), "{second:?}");
    }
}
