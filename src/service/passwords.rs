//! Password work: argon2id hashing and checking on blocking threads, `hashers` at a time,
//! shared fairly between those who ask for it. A job holds a *place* while it waits or runs,
//! and there are `places` in all; a job refused a place is [`ServiceError::Busy`], never a
//! wait without end. Places belong to *lanes*: each webstore is one (its customers' creates,
//! changes and sign-ins through the API), and the app's sign-ins, which are no webstore's
//! until they succeed, are one more ([`Lane::App`]; each client address is bounded within it
//! before it gets here, by `service::client_limits`).
//!
//! - While places are free, any lane takes them: a lone webstore has the whole pool.
//! - When none is free, a lane holding fewer places than the fullest lane by two or more
//!   takes the place of the fullest lane's newest waiting job, whose caller is answered
//!   `Busy` (as it would have been had it come last); any other newcomer is refused. So under
//!   contention the places tend to an equal share per busy lane, a lane below its share is
//!   not refused, and what a flood is refused stays with the flood.
//! - A hasher that frees goes to the lanes with jobs waiting in turn (round robin over the
//!   lanes, first come first served within one), so a lane's flood queues behind itself and
//!   another lane's job waits for one job per busy lane at most.
//!
//! A job whose caller is gone before it starts never runs, so a flood of abandoned requests
//! costs no hashing; a job that started runs to its end, and whatever it settles (a sign-in
//! attempt) is settled inside it. A place is a guard (`Place`): dropped while it waits,
//! while it runs, or once pushed out, it leaves the counts as if it had never been. The
//! state is one small map behind a mutex, locked for a few operations per job: a job costs
//! tens of milliseconds of hashing, beside which the lock is nothing.
//!
//! Must not touch: customers, throttles, client addresses, HTTP.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

use crate::domain::catalogue::WebstoreIdx;
use crate::domain::password::{hash_password, verify_password};
use crate::metrics::{refused, Refusal, METRICS};

use super::ServiceError;

/// Whose work a job is: the share of the pool it draws on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lane {
    /// A webstore's, through the API.
    Webstore(WebstoreIdx),
    /// The app's sign-ins, no webstore's until they succeed.
    App,
}

impl Lane {
    fn label(self) -> &'static str {
        match self {
            Lane::Webstore(_) => "api",
            Lane::App => "app",
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
    /// At most `hashers` jobs at once, and at most `places` waiting or running.
    pub fn new(hashers: usize, places: usize) -> Result<PasswordWork, ServiceError> {
        let stand_in_hash =
            hash_password("no password is set", &random_salt()?).map_err(ServiceError::Internal)?;
        let hashers = hashers.max(1);
        Ok(PasswordWork {
            pool: Arc::new(Pool {
                hashers,
                places: places.max(hashers),
                state: Mutex::new(State::default()),
            }),
            stand_in_hash,
        })
    }

    /// The argon2id PHC string of a new password, hashed in `lane`'s share.
    pub async fn hash(&self, lane: Lane, password: String) -> Result<String, ServiceError> {
        let salt = random_salt()?;
        self.run(lane, move || hash_password(&password, &salt))
            .await?
            .map_err(ServiceError::Internal)
    }

    /// Checks `password` against `stored` (a PHC string) in `lane`'s share, or against a
    /// stand-in when there is none so that the answer takes as long either way, then hands
    /// the outcome to `settle` on the worker thread: it runs if and only if the check ran,
    /// whether or not the caller still waits (dropped unrun otherwise). True only for a
    /// stored hash that matches.
    pub async fn check(
        &self,
        lane: Lane,
        password: String,
        stored: Option<String>,
        settle: impl FnOnce(bool) + Send + 'static,
    ) -> Result<bool, ServiceError> {
        let has_password = stored.is_some();
        let hash = stored.unwrap_or_else(|| self.stand_in_hash.clone());
        self.run(lane, move || {
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

    /// Places held by `lane`'s jobs, waiting or running (for tests and diagnostics).
    pub fn places_of(&self, lane: Lane) -> usize {
        self.pool
            .lock()
            .lanes
            .get(&lane)
            .map_or(0, |held| held.held)
    }

    async fn run<T: Send + 'static>(
        &self,
        lane: Lane,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, ServiceError> {
        let mut place = self.pool.enter(lane).inspect_err(|_| {
            refused(Refusal::PasswordQueue);
        })?;
        place.started().await?;
        let abandoned = Arc::new(AtomicBool::new(false));
        let _abandon = Abandon(abandoned.clone());
        let ran = tokio::task::spawn_blocking(move || {
            // The place is given back when the job ends, not when its caller stops waiting,
            // so the places running bound the threads actually busy.
            let _place = place;
            if abandoned.load(Ordering::Acquire) {
                return None;
            }
            METRICS
                .password_jobs
                .with_label_values(&[lane.label()])
                .inc();
            Some(job())
        })
        .await
        .map_err(|error| ServiceError::Internal(format!("password work failed: {error}")))?;
        ran.ok_or_else(|| ServiceError::Internal("password work skipped for a live caller".into()))
    }
}

/// The places, the hashers, and who waits for them.
struct Pool {
    hashers: usize,
    places: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Places held, waiting or running.
    held: usize,
    /// Jobs running (at most `hashers`).
    running: usize,
    /// The lanes holding places; a lane is removed when it holds none, so this never holds
    /// more than the catalogue's webstores and the app.
    lanes: HashMap<Lane, LaneState>,
    /// Lanes with jobs waiting, in the order their turns come.
    turns: VecDeque<Lane>,
}

#[derive(Default)]
struct LaneState {
    held: usize,
    /// Its jobs waiting for a hasher, first come first.
    waiting: VecDeque<Waiter>,
}

/// A job waiting for a hasher.
struct Waiter {
    stage: Arc<AtomicU8>,
    go: oneshot::Sender<()>,
}

/// Where a place is; changed only under the pool's lock.
const WAITING: u8 = 0;
const RUNNING: u8 = 1;
/// Taken by a lane below its share: it counts for nothing any more.
const PUSHED_OUT: u8 = 2;

/// A job's place in the pool, given back (or its hasher passed on) when dropped.
struct Place {
    pool: Arc<Pool>,
    lane: Lane,
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

    /// A place for a job of `lane`, waiting for a hasher; `Busy` when there is none to take.
    fn enter(self: &Arc<Self>, lane: Lane) -> Result<Place, ServiceError> {
        let mut state = self.lock();
        if state.held < self.places {
            state.held += 1;
        } else {
            state.push_out_for(lane)?;
        }
        let stage = Arc::new(AtomicU8::new(WAITING));
        let (go, started) = oneshot::channel();
        let State { lanes, turns, .. } = &mut *state;
        let entry = lanes.entry(lane).or_default();
        entry.held += 1;
        if entry.waiting.is_empty() {
            turns.push_back(lane);
        }
        entry.waiting.push_back(Waiter {
            stage: stage.clone(),
            go,
        });
        self.dispatch(&mut state);
        Ok(Place {
            pool: self.clone(),
            lane,
            stage,
            go: Some(started),
        })
    }

    /// Hands free hashers to the waiting jobs, one lane's turn after another.
    fn dispatch(&self, state: &mut State) {
        while state.running < self.hashers {
            let Some(lane) = state.turns.pop_front() else {
                return;
            };
            let Some(entry) = state.lanes.get_mut(&lane) else {
                continue;
            };
            let Some(waiter) = entry.waiting.pop_front() else {
                continue;
            };
            if !entry.waiting.is_empty() {
                state.turns.push_back(lane);
            }
            waiter.stage.store(RUNNING, Ordering::Relaxed);
            state.running += 1;
            // A caller gone already has its place's `Drop` still to come (it needs this
            // lock): seeing the place running, it frees the hasher.
            let _ = waiter.go.send(());
        }
    }

    /// Gives back a place in `stage`.
    fn leave(&self, lane: Lane, stage: &Arc<AtomicU8>) {
        let mut state = self.lock();
        match stage.load(Ordering::Relaxed) {
            PUSHED_OUT => return,
            RUNNING => state.running -= 1,
            _ => {
                if let Some(entry) = state.lanes.get_mut(&lane) {
                    entry
                        .waiting
                        .retain(|waiter| !Arc::ptr_eq(&waiter.stage, stage));
                    if entry.waiting.is_empty() {
                        state.turns.retain(|turn| *turn != lane);
                    }
                }
            }
        }
        state.held -= 1;
        if let Some(entry) = state.lanes.get_mut(&lane) {
            entry.held -= 1;
            if entry.held == 0 {
                state.lanes.remove(&lane);
            }
        }
        self.dispatch(&mut state);
    }
}

impl State {
    /// Makes room for a job of `lane` in a full pool: the newest waiting job of the lane
    /// holding the most places gives up its place, if that lane holds two or more places
    /// more than `lane` (so the shares converge and never swap back and forth).
    fn push_out_for(&mut self, lane: Lane) -> Result<(), ServiceError> {
        let own = self.lanes.get(&lane).map_or(0, |entry| entry.held);
        let fullest = self
            .lanes
            .iter()
            .filter(|(other, entry)| {
                **other != lane && !entry.waiting.is_empty() && entry.held >= own + 2
            })
            .max_by_key(|(_, entry)| entry.held)
            .map(|(other, _)| *other);
        let Some(fullest) = fullest else {
            return Err(ServiceError::Busy);
        };
        let Some(entry) = self.lanes.get_mut(&fullest) else {
            return Err(ServiceError::Busy);
        };
        let Some(newest) = entry.waiting.pop_back() else {
            return Err(ServiceError::Busy);
        };
        newest.stage.store(PUSHED_OUT, Ordering::Relaxed);
        // Dropping its sender tells its caller.
        drop(newest.go);
        refused(Refusal::PasswordShare);
        entry.held -= 1;
        if entry.waiting.is_empty() {
            self.turns.retain(|turn| *turn != fullest);
        }
        Ok(())
    }
}

impl Place {
    /// Waits for a hasher; `Busy` when the place was taken by a lane below its share.
    async fn started(&mut self) -> Result<(), ServiceError> {
        match self.go.take() {
            Some(go) => go.await.map_err(|_| ServiceError::Busy),
            None => Ok(()),
        }
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.pool.leave(self.lane, &self.stage);
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

    const A: Lane = Lane::Webstore(WebstoreIdx(0));
    const B: Lane = Lane::Webstore(WebstoreIdx(1));

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

    /// Waits (bounded) until the pool holds no place.
    async fn drained(work: &PasswordWork) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while work.jobs_in_flight() > 0 {
            assert!(std::time::Instant::now() < deadline, "jobs never drained");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let state = work.pool.lock();
        assert_eq!(state.running, 0);
        assert!(state.lanes.is_empty() && state.turns.is_empty());
    }

    /// A job of `lane` that says when it starts and runs until `release` is dropped or
    /// sent to; its outcome is its name.
    fn blocker(
        work: &Arc<PasswordWork>,
        lane: Lane,
        name: &'static str,
        started: mpsc::Sender<&'static str>,
        release: Arc<Mutex<mpsc::Receiver<()>>>,
    ) -> tokio::task::JoinHandle<Result<&'static str, ServiceError>> {
        let work = work.clone();
        tokio::spawn(async move {
            work.run(lane, move || {
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
        while work.places_of(A) < 6 {
            assert!(std::time::Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        // A seventh of A's is refused: the pool is full and A the fullest.
        let refused = work.run(A, || "a").await;
        assert!(matches!(refused, Err(ServiceError::Busy)));
        // B takes places from A's newest waiting jobs until the two are within one.
        let b_jobs: Vec<_> = (0..3)
            .map(|_| blocker(&work, B, "b", started.clone(), released.clone()))
            .collect();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while work.places_of(B) < 3 {
            assert!(std::time::Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        assert_eq!(work.places_of(A), 3);
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
        // The hasher goes round the lanes: A's next (its turn came before B queued), then
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
        for (lane, name) in [
            (A, "a"),
            (A, "a"),
            (A, "a"),
            (A, "a"),
            (B, "b"),
            (Lane::App, "app"),
        ] {
            jobs.push(blocker(
                &work,
                lane,
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
            // Waiters of both lanes, some pushing others out, cancelled while they wait,
            // while they are handed the hasher, or after they started.
            let lanes = [A, A, B, Lane::App, B, A];
            let waiters: Vec<_> = lanes
                .iter()
                .map(|lane| {
                    let work = work.clone();
                    let lane = *lane;
                    tokio::spawn(async move { work.run(lane, || ()).await })
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
        // And every place is there to take.
        assert!(work.run(B, || ()).await.is_ok());
    }
}
