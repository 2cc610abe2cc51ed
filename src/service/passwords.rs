//! Password work: argon2id hashing and checking on blocking threads, `hashers` at a time,
//! shared fairly between those who ask for it. A job holds a *slot* while it waits or runs,
//! and there are `slots` in all; a job refused a slot is [`ServiceError::Busy`], never a
//! wait without end. Slots belong to *shares*: each webstore is one (its customers' creates,
//! changes and sign-ins through the API), and the app's sign-ins, which are no webstore's
//! until they succeed, are one more ([`Share::App`]; each client address is bounded within it
//! before it gets here, by `service::client_limits`).
//!
//! - While slots are free, any share takes them: a lone webstore has the whole pool.
//! - When none is free, a share holding fewer slots than the fullest share by two or more
//!   takes the slot of the fullest share's newest waiting job, whose caller is answered
//!   `Busy` (as it would have been had it come last); any other newcomer is refused. So under
//!   contention the slots tend to an equal part per busy share, a share below its part is
//!   not refused, and what a flood is refused stays with the flood.
//! - A hasher that frees goes to the shares with jobs waiting in turn (round robin over the
//!   shares, first come first served within one: the fair queue fair admission waits in too,
//!   `quotas::fair_queue`), so a share's flood queues behind itself and another share's job
//!   waits for one job per busy share at most. What fair admission has and this has not (a
//!   lock-free path for a webstore alone, contention over a window) and what this has and it
//!   has not (a bound past which a job is refused, pushing out a fuller share's newest job)
//!   keep them two pools over one queue.
//!
//! A job whose caller is gone before it starts never runs, so a flood of abandoned requests
//! costs no hashing; a job that started runs to its end, and whatever it settles (a sign-in
//! attempt) is settled inside it. A slot is a guard (`Slot`): dropped while it waits,
//! while it runs, or once pushed out, it leaves the counts as if it had never been. The
//! state is one small map behind a mutex, locked for a few operations per job: a job costs
//! tens of milliseconds of hashing, beside which the lock is nothing.
//!
//! Must not touch: customers, throttles, client addresses, HTTP.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

use crate::domain::catalogue::WebstoreIdx;
use crate::domain::password::{hash_password, verify_password};
use crate::metrics::{refused, Refusal, METRICS};
use crate::quotas::fair_queue::FairQueue;

use super::ServiceError;

/// Whose work a job is: the share of the pool it draws on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Share {
    /// A webstore's, through the API.
    Webstore(WebstoreIdx),
    /// The app's sign-ins, no webstore's until they succeed.
    App,
}

impl Share {
    fn label(self) -> &'static str {
        match self {
            Share::Webstore(_) => "api",
            Share::App => "app",
        }
    }
}

/// The pool of password work.
pub struct PasswordWork {
    pool: Arc<Pool>,
    /// Verified against when the customer has no password, so that every failed sign-in
    /// costs one real argon2 check.
    stand_in_hash: String,
}

/// Sets its flag when dropped: tells a job that its caller is gone.
struct Abandon(Arc<AtomicBool>);

impl Drop for Abandon {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

impl PasswordWork {
    /// At most `hashers` jobs at once, and at most `slots` waiting or running.
    pub fn new(hashers: usize, slots: usize) -> Result<PasswordWork, ServiceError> {
        let stand_in_hash =
            hash_password("no password is set", &random_salt()?).map_err(ServiceError::Internal)?;
        let hashers = hashers.max(1);
        Ok(PasswordWork {
            pool: Arc::new(Pool {
                hashers,
                slots: slots.max(hashers),
                state: Mutex::new(State::default()),
            }),
            stand_in_hash,
        })
    }

    /// The argon2id PHC string of a new password, hashed within `share`.
    pub async fn hash(&self, share: Share, password: String) -> Result<String, ServiceError> {
        let salt = random_salt()?;
        self.run(share, move || hash_password(&password, &salt))
            .await?
            .map_err(ServiceError::Internal)
    }

    /// Checks `password` against `stored` (a PHC string) within `share`, or against a
    /// stand-in when there is none so that the answer takes as long either way, then hands
    /// the outcome to `settle` on the worker thread: it runs if and only if the check ran,
    /// whether or not the caller still waits (dropped unrun otherwise). True only for a
    /// stored hash that matches.
    pub async fn check(
        &self,
        share: Share,
        password: String,
        stored: Option<String>,
        settle: impl FnOnce(bool) + Send + 'static,
    ) -> Result<bool, ServiceError> {
        let has_password = stored.is_some();
        let hash = stored.unwrap_or_else(|| self.stand_in_hash.clone());
        self.run(share, move || {
            let matches = verify_password(&password, &hash) && has_password;
            settle(matches);
            matches
        })
        .await
    }

    /// Jobs waiting or running (for tests and diagnostics).
    pub fn jobs_in_flight(&self) -> usize {
        self.pool.lock().held
    }

    /// Slots held by `share`'s jobs, waiting or running (for tests and diagnostics).
    pub fn slots_of(&self, share: Share) -> usize {
        self.pool.lock().shares.get(&share).copied().unwrap_or(0)
    }

    async fn run<T: Send + 'static>(
        &self,
        share: Share,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, ServiceError> {
        let mut slot = self.pool.enter(share).inspect_err(|_| {
            refused(Refusal::PasswordQueue);
        })?;
        slot.started().await?;
        let abandoned = Arc::new(AtomicBool::new(false));
        let _abandon = Abandon(abandoned.clone());
        let ran = tokio::task::spawn_blocking(move || {
            // The slot is given back when the job ends, not when its caller stops waiting,
            // so the slots running bound the threads actually busy.
            let _place = slot;
            if abandoned.load(Ordering::Acquire) {
                return None;
            }
            METRICS
                .password_jobs
                .with_label_values(&[share.label()])
                .inc();
            Some(job())
        })
        .await
        .map_err(|error| ServiceError::Internal(format!("password work failed: {error}")))?;
        ran.ok_or_else(|| ServiceError::Internal("password work skipped for a live caller".into()))
    }
}

/// The slots, the hashers, and who waits for them.
struct Pool {
    hashers: usize,
    slots: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Slots held, waiting or running.
    held: usize,
    /// Jobs running (at most `hashers`).
    running: usize,
    /// The slots each share holds; a share is removed when it holds none, so this never holds
    /// more than the catalogue's webstores and the app.
    shares: HashMap<Share, usize>,
    /// The jobs waiting for a hasher, one share's turn after another.
    waiting: FairQueue<Share, Waiter>,
}

/// A job waiting for a hasher.
struct Waiter {
    stage: Arc<AtomicU8>,
    go: oneshot::Sender<()>,
}

/// Where a slot is; changed only under the pool's lock.
const WAITING: u8 = 0;
const RUNNING: u8 = 1;
/// Taken by a share below its part: it counts for nothing any more.
const PUSHED_OUT: u8 = 2;

/// A job's slot in the pool, given back (or its hasher passed on) when dropped.
struct Slot {
    pool: Arc<Pool>,
    share: Share,
    stage: Arc<AtomicU8>,
    go: Option<oneshot::Receiver<()>>,
}

impl Pool {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state holds no invariant a panic elsewhere could break half-way (no code that
        // can panic runs under the lock).
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A slot for a job of `share`, waiting for a hasher; `Busy` when there is none to take.
    fn enter(self: &Arc<Self>, share: Share) -> Result<Slot, ServiceError> {
        let mut state = self.lock();
        if state.held < self.slots {
            state.held += 1;
        } else {
            state.push_out_for(share)?;
        }
        let stage = Arc::new(AtomicU8::new(WAITING));
        let (go, started) = oneshot::channel();
        *state.shares.entry(share).or_default() += 1;
        state.waiting.push(
            share,
            Waiter {
                stage: stage.clone(),
                go,
            },
        );
        self.dispatch(&mut state);
        Ok(Slot {
            pool: self.clone(),
            share,
            stage,
            go: Some(started),
        })
    }

    /// Hands free hashers to the waiting jobs, one share's turn after another.
    fn dispatch(&self, state: &mut State) {
        while state.running < self.hashers {
            let Some((_, waiter)) = state.waiting.next(|_| true) else {
                return;
            };
            waiter.stage.store(RUNNING, Ordering::Relaxed);
            state.running += 1;
            // A caller gone already has its slot's `Drop` still to come (it needs this
            // lock): seeing the slot running, it frees the hasher.
            let _ = waiter.go.send(());
        }
    }

    /// Gives back a slot in `stage`.
    fn leave(&self, share: Share, stage: &Arc<AtomicU8>) {
        let mut state = self.lock();
        match stage.load(Ordering::Relaxed) {
            PUSHED_OUT => return,
            RUNNING => state.running -= 1,
            _ => state
                .waiting
                .remove(share, |waiter| Arc::ptr_eq(&waiter.stage, stage)),
        }
        state.held -= 1;
        if let Some(held) = state.shares.get_mut(&share) {
            *held -= 1;
            if *held == 0 {
                state.shares.remove(&share);
            }
        }
        self.dispatch(&mut state);
    }
}

impl State {
    /// Makes room for a job of `share` in a full pool: the newest waiting job of the share
    /// holding the most slots gives up its slot, if that share holds two or more slots
    /// more than `share` (so the shares converge and never swap back and forth).
    fn push_out_for(&mut self, share: Share) -> Result<(), ServiceError> {
        let own = self.shares.get(&share).copied().unwrap_or(0);
        let fullest = self
            .shares
            .iter()
            .filter(|(other, held)| {
                **other != share && self.waiting.waiting(**other) > 0 && **held >= own + 2
            })
            .max_by_key(|(_, held)| **held)
            .map(|(other, _)| *other)
            .ok_or(ServiceError::Busy)?;
        let newest = self.waiting.pop_newest(fullest).ok_or(ServiceError::Busy)?;
        newest.stage.store(PUSHED_OUT, Ordering::Relaxed);
        // Dropping its sender tells its caller.
        drop(newest.go);
        refused(Refusal::PasswordShare);
        if let Some(held) = self.shares.get_mut(&fullest) {
            *held -= 1;
        }
        Ok(())
    }
}

impl Slot {
    /// Waits for a hasher; `Busy` when the slot was taken by a share below its part.
    async fn started(&mut self) -> Result<(), ServiceError> {
        match self.go.take() {
            Some(go) => go.await.map_err(|_| ServiceError::Busy),
            None => Ok(()),
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.pool.leave(self.share, &self.stage);
    }
}

fn random_salt() -> Result<[u8; 16], ServiceError> {
    crate::random::secret()
        .map_err(|error| ServiceError::Internal(format!("no randomness for a salt: {error}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    const A: Share = Share::Webstore(WebstoreIdx(0));
    const B: Share = Share::Webstore(WebstoreIdx(1));

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

    /// Waits (bounded) until the pool holds no slot.
    async fn drained(work: &PasswordWork) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while work.jobs_in_flight() > 0 {
            assert!(std::time::Instant::now() < deadline, "jobs never drained");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let state = work.pool.lock();
        assert_eq!(state.running, 0);
        assert!(state.shares.is_empty() && state.waiting.is_empty());
    }

    /// A job of `share` that says when it starts and runs until `release` is dropped or
    /// sent to; its outcome is its name.
    fn blocker(
        work: &Arc<PasswordWork>,
        share: Share,
        name: &'static str,
        started: mpsc::Sender<&'static str>,
        release: Arc<Mutex<mpsc::Receiver<()>>>,
    ) -> tokio::task::JoinHandle<Result<&'static str, ServiceError>> {
        let work = work.clone();
        tokio::spawn(async move {
            work.run(share, move || {
                let _ = started.send(name);
                let _ = release
                    .lock()
                    .unwrap()
                    .recv_timeout(Duration::from_secs(10));
                name
            })
            .await
        })
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
                work.run(A, move || {
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
        let second = work.run(A, move || done.send("second").unwrap());
        assert!(tokio::time::timeout(Duration::from_millis(20), second)
            .await
            .is_err());
        release.send(()).unwrap();

        let (got, finished) = wait(finished).await;
        assert_eq!(got, Ok("first"), "a started job runs to its end");
        drained(&work).await;
        assert!(finished.try_recv().is_err(), "the abandoned job never ran");
    }

    #[tokio::test]
    async fn a_full_pool_is_busy_not_a_wait() {
        let work = PasswordWork::new(1, 1).unwrap();
        let first = work.check(A, "a".into(), None, |_| {});
        let mut first = std::pin::pin!(first);
        assert!(futures_util::poll!(first.as_mut()).is_pending());
        let second = work.check(A, "b".into(), None, |_| {}).await;
        assert!(matches!(second, Err(ServiceError::Busy)), "{second:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lone_lane_takes_every_place_and_another_lane_takes_its_share_back() {
        let work = Arc::new(PasswordWork::new(1, 6).unwrap());
        let (started, has_started) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        let released = Arc::new(Mutex::new(released));
        // A alone fills the pool: one running, five waiting.
        let a_jobs: Vec<_> = (0..6)
            .map(|_| blocker(&work, A, "a", started.clone(), released.clone()))
            .collect();
        let (got, has_started) = wait(has_started).await;
        assert_eq!(got, Ok("a"));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while work.slots_of(A) < 6 {
            assert!(std::time::Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        // A seventh of A's is refused: the pool is full and A the fullest.
        let refused = work.run(A, || "a").await;
        assert!(matches!(refused, Err(ServiceError::Busy)));
        // B takes slots from A's newest waiting jobs until the two are within one.
        let b_jobs: Vec<_> = (0..3)
            .map(|_| blocker(&work, B, "b", started.clone(), released.clone()))
            .collect();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while work.slots_of(B) < 3 {
            assert!(std::time::Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        assert_eq!(work.slots_of(A), 3);
        // A fourth of B's would leave B ahead: refused.
        assert!(matches!(work.run(B, || "b").await, Err(ServiceError::Busy)));
        // Three of A's callers were told Busy at once, without waiting for a hasher.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while a_jobs.iter().filter(|job| job.is_finished()).count() < 3 {
            assert!(
                std::time::Instant::now() < deadline,
                "A's callers pushed out"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let mut a_running_or_waiting = Vec::new();
        for job in a_jobs {
            if job.is_finished() {
                assert!(matches!(job.await.unwrap(), Err(ServiceError::Busy)));
            } else {
                a_running_or_waiting.push(job);
            }
        }
        assert_eq!(a_running_or_waiting.len(), 3);
        // The hasher goes round the shares: A's next (its turn came before B queued), then
        // B's, not A's two others first.
        release.send(()).unwrap();
        let (got, has_started) = wait(has_started).await;
        assert_eq!(got, Ok("a"));
        release.send(()).unwrap();
        let (got, _) = wait(has_started).await;
        assert_eq!(got, Ok("b"), "B's turn after one of A's");
        drop(release);
        for job in b_jobs {
            assert_eq!(job.await.unwrap().unwrap(), "b");
        }
        for job in a_running_or_waiting {
            assert_eq!(job.await.unwrap().unwrap(), "a");
        }
        drained(&work).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn turns_go_round_the_lanes_with_jobs_waiting() {
        let work = Arc::new(PasswordWork::new(1, 16).unwrap());
        let (started, has_started) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        let released = Arc::new(Mutex::new(released));
        let held = blocker(&work, A, "held", started.clone(), released.clone());
        let (got, mut has_started) = wait(has_started).await;
        assert_eq!(got, Ok("held"));
        // A queues four before B and the app queue one each.
        let mut jobs = Vec::new();
        for (share, name) in [
            (A, "a"),
            (A, "a"),
            (A, "a"),
            (A, "a"),
            (B, "b"),
            (Share::App, "app"),
        ] {
            jobs.push(blocker(
                &work,
                share,
                name,
                started.clone(),
                released.clone(),
            ));
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while work.jobs_in_flight() < jobs.len() + 1 {
                assert!(std::time::Instant::now() < deadline);
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        let mut order = Vec::new();
        for _ in 0..jobs.len() {
            release.send(()).unwrap();
            let (got, rest) = wait(has_started).await;
            has_started = rest;
            order.push(got.unwrap());
        }
        assert_eq!(order, ["a", "b", "app", "a", "a", "a"]);
        drop(release);
        held.await.unwrap().unwrap();
        for job in jobs {
            job.await.unwrap().unwrap();
        }
        drained(&work).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn places_dropped_at_any_point_leave_nothing_held() {
        let work = Arc::new(PasswordWork::new(1, 4).unwrap());
        for round in 0..40u64 {
            let (started, has_started) = mpsc::channel();
            let (release, released) = mpsc::channel::<()>();
            let released = Arc::new(Mutex::new(released));
            let held = blocker(&work, A, "held", started.clone(), released.clone());
            let (got, _) = wait(has_started).await;
            got.unwrap();
            // Waiters of both shares, some pushing others out, cancelled while they wait,
            // while they are handed the hasher, or after they started.
            let shares = [A, A, B, Share::App, B, A];
            let waiters: Vec<_> = shares
                .iter()
                .map(|share| {
                    let work = work.clone();
                    let share = *share;
                    tokio::spawn(async move { work.run(share, || ()).await })
                })
                .collect();
            tokio::time::sleep(Duration::from_millis(round % 3)).await;
            if round % 2 == 0 {
                drop(release);
                waiters.iter().for_each(|waiter| waiter.abort());
            } else {
                waiters.iter().for_each(|waiter| waiter.abort());
                drop(release);
            }
            for waiter in waiters {
                let _ = waiter.await;
            }
            let _ = held.await;
            drained(&work).await;
        }
        // And every slot is there to take.
        assert!(work.run(B, || ()).await.is_ok());
    }
}
