//! Sign-in throttling per webstore and email, for customers' sign-ins and producers' alike
//! (the rules are in [`crate::domain::throttle`]; the sign-ins themselves are
//! `Service::sign_in` and `service::producers`). An attempt is an [`Attempt`] guard: it counts against the
//! limit while its password check is pending, counts as a failure or a success once the check
//! has finished (whether or not its client waited for the answer), and counts as nothing if
//! it is dropped before the check ran. An email is kept by its digest: an entry is the same
//! size whatever a client sends. Must not touch: passwords, customers, HTTP.

use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;
use sha2::{Digest, Sha256};

use crate::domain::catalogue::WebstoreIdx;
use crate::domain::throttle::SignInThrottle;

/// A webstore and the SHA-256 of a folded email: every key the same size, however long the
/// email a client sends.
type Key = (WebstoreIdx, [u8; 32]);

/// The sign-in throttles of every webstore, by folded email.
#[derive(Default)]
pub struct SignInThrottles {
    entries: Arc<DashMap<Key, SignInThrottle>>,
}

/// An attempt in progress; see the module documentation.
pub struct Attempt {
    entries: Arc<DashMap<Key, SignInThrottle>>,
    key: Key,
    settled: bool,
}

impl SignInThrottles {
    /// Starts an attempt for a folded email, or says how long until one is allowed.
    pub fn begin(&self, webstore: WebstoreIdx, folded_email: &str) -> Result<Attempt, Duration> {
        let key = (webstore, Sha256::digest(folded_email.as_bytes()).into());
        self.entries.entry(key).or_default().begin(Instant::now())?;
        Ok(Attempt {
            entries: self.entries.clone(),
            key,
            settled: false,
        })
    }

    /// Forgets throttling state that has expired; run now and then.
    pub fn prune(&self) {
        let now = Instant::now();
        self.entries.retain(|_, throttle| !throttle.is_idle(now));
    }

    /// Attempts begun and not yet settled, over every email (for tests and diagnostics).
    pub fn attempts_in_flight(&self) -> usize {
        self.entries
            .iter()
            .map(|throttle| throttle.in_flight())
            .sum()
    }
}

impl Attempt {
    /// The password check finished: a failure counts, a success clears the count.
    pub fn finish(mut self, succeeded: bool) {
        if let Some(mut throttle) = self.entries.get_mut(&self.key) {
            throttle.finish(succeeded, Instant::now());
        }
        self.settled = true;
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        if !self.settled {
            if let Some(mut throttle) = self.entries.get_mut(&self.key) {
                throttle.cancel();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::throttle::MAX_FAILURES;

    #[test]
    fn attempts_dropped_unchecked_count_as_nothing() {
        let throttles = SignInThrottles::default();
        for _ in 0..10 * MAX_FAILURES {
            let attempt = throttles.begin(WebstoreIdx(0), "a@b.c").unwrap();
            assert_eq!(throttles.attempts_in_flight(), 1);
            drop(attempt);
        }
        assert_eq!(throttles.attempts_in_flight(), 0);
        throttles
            .begin(WebstoreIdx(0), "a@b.c")
            .expect("abandoned attempts never lock the owner out")
            .finish(true);
    }

    #[test]
    fn finished_failures_count_and_pending_ones_hold_places() {
        let throttles = SignInThrottles::default();
        let pending: Vec<_> = (0..MAX_FAILURES)
            .map(|_| throttles.begin(WebstoreIdx(0), "a@b.c").unwrap())
            .collect();
        assert!(
            throttles.begin(WebstoreIdx(0), "a@b.c").is_err(),
            "ten concurrent guesses fill the window"
        );
        assert!(throttles.begin(WebstoreIdx(1), "a@b.c").is_ok());
        for attempt in pending {
            attempt.finish(false);
        }
        assert_eq!(throttles.attempts_in_flight(), 0);
        assert!(throttles.begin(WebstoreIdx(0), "a@b.c").is_err());
    }
}
