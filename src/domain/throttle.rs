//! Sign-in throttling as a pure state machine over time values the caller passes in: at most
//! [`MAX_FAILURES`] failed attempts per email within [`WINDOW`] (contract section 5). Attempts
//! still being checked count against the limit, so a burst of concurrent guesses cannot slip
//! past it.
//!
//! Must not touch: the clock (the caller passes instants), the map of throttles
//! (`crate::service::sign_in_throttles`).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Failed attempts allowed within the window.
pub const MAX_FAILURES: usize = 10;
/// The sliding window over which failures count.
pub const WINDOW: Duration = Duration::from_secs(15 * 60);

/// The failures and in-flight attempts for one email.
#[derive(Debug, Default, Clone)]
pub struct SignInThrottle {
    failures: VecDeque<Instant>,
    in_flight: usize,
}

impl SignInThrottle {
    /// Starts an attempt, or says how long until one is allowed again.
    pub fn begin(&mut self, now: Instant) -> Result<(), Duration> {
        self.forget_before(now);
        if self.failures.len() + self.in_flight >= MAX_FAILURES {
            let wait = match self.failures.front() {
                Some(oldest) => (*oldest + WINDOW).saturating_duration_since(now),
                None => Duration::from_secs(1),
            };
            return Err(wait.max(Duration::from_secs(1)));
        }
        self.in_flight += 1;
        Ok(())
    }

    /// Ends an attempt begun with [`Self::begin`]: a failure counts, a success clears the count.
    pub fn finish(&mut self, succeeded: bool, now: Instant) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if succeeded {
            self.failures.clear();
        } else {
            self.failures.push_back(now);
        }
    }

    /// Ends an attempt that could not be checked (an internal failure): it counts neither way.
    pub fn cancel(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// Attempts begun and not yet finished or cancelled.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// True when nothing is remembered any more, so the entry can be dropped.
    pub fn is_idle(&mut self, now: Instant) -> bool {
        self.forget_before(now);
        self.failures.is_empty() && self.in_flight == 0
    }

    fn forget_before(&mut self, now: Instant) {
        while let Some(oldest) = self.failures.front() {
            if now.saturating_duration_since(*oldest) >= WINDOW {
                self.failures.pop_front();
            } else {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ten_failures_lock_until_the_window_passes() {
        let start = Instant::now();
        let mut throttle = SignInThrottle::default();
        for i in 0..MAX_FAILURES {
            let now = start + Duration::from_secs(i as u64);
            throttle.begin(now).unwrap();
            throttle.finish(false, now);
        }
        let wait = throttle.begin(start + Duration::from_secs(60)).unwrap_err();
        assert_eq!(wait, WINDOW - Duration::from_secs(60));
        assert!(
            throttle.begin(start + WINDOW).is_ok(),
            "the oldest failure has expired"
        );
    }

    #[test]
    fn success_resets_and_in_flight_attempts_count() {
        let now = Instant::now();
        let mut throttle = SignInThrottle::default();
        for _ in 0..MAX_FAILURES - 1 {
            throttle.begin(now).unwrap();
            throttle.finish(false, now);
        }
        throttle.begin(now).unwrap();
        assert!(
            throttle.begin(now).is_err(),
            "the pending attempt fills the window"
        );
        throttle.finish(true, now);
        assert!(throttle.is_idle(now));
    }
}
