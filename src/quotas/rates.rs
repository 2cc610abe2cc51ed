//! One rate quota of one webstore (its writes, or its reads): a GCRA limiter from `governor`
//! that lets `burst` requests through at once and then one every `1 / per_second`, and what
//! a client is told about it (the policy's quota and window, what is left and when the
//! bucket is full again).
//!
//! Must not touch: which requests count as writes (the HTTP layer's endpoint says), headers.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};

/// A rate limiter that reports what is left after each request it lets through.
type Limiter = RateLimiter<NotKeyed, InMemoryState, DefaultClock, StateInformationMiddleware>;

/// One rate quota and its state.
pub struct Rate {
    limiter: Limiter,
    per_second: u32,
    burst: u32,
}

/// What a request let through leaves of a quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Remaining {
    /// Requests that may still come at once.
    pub requests: u32,
    /// Whole seconds until the quota is whole again (rounded up).
    pub full_in_secs: u64,
}

impl Rate {
    /// `per_second` sustained, `burst` at once; both at least 1 (the catalogue checks).
    pub fn new(per_second: u32, burst: u32) -> Rate {
        let per_second_nz = NonZeroU32::new(per_second.max(1)).unwrap_or(NonZeroU32::MIN);
        let burst_nz = NonZeroU32::new(burst.max(1)).unwrap_or(NonZeroU32::MIN);
        let quota = Quota::per_second(per_second_nz).allow_burst(burst_nz);
        Rate {
            limiter: RateLimiter::direct(quota).with_middleware::<StateInformationMiddleware>(),
            per_second: per_second_nz.get(),
            burst: burst_nz.get(),
        }
    }

    /// The quota a policy states: `burst` requests in a window of the seconds it takes to
    /// earn a whole burst back (at least 1).
    pub fn policy(&self) -> (u32, u64) {
        (self.burst, self.window_secs())
    }

    fn window_secs(&self) -> u64 {
        u64::from(self.burst)
            .div_ceil(u64::from(self.per_second))
            .max(1)
    }

    /// Takes one request from the quota: what is left, or how long until one is allowed.
    pub fn take(&self) -> Result<Remaining, Duration> {
        match self.limiter.check() {
            Ok(snapshot) => {
                let requests = snapshot.remaining_burst_capacity();
                let missing = u64::from(self.burst.saturating_sub(requests));
                Ok(Remaining {
                    requests,
                    full_in_secs: missing.div_ceil(u64::from(self.per_second)),
                })
            }
            Err(not_until) => Err(not_until.wait_time_from(self.limiter.clock().now())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_goes_through_and_then_the_quota_refuses_with_a_wait() {
        let rate = Rate::new(2, 3);
        let lefts: Vec<u32> = (0..3).map(|_| rate.take().unwrap().requests).collect();
        assert_eq!(lefts, vec![2, 1, 0]);
        let wait = rate.take().unwrap_err();
        assert!(
            wait > Duration::ZERO && wait <= Duration::from_millis(500),
            "{wait:?}"
        );
    }

    #[test]
    fn the_policy_window_is_the_time_to_earn_a_burst_back() {
        assert_eq!(Rate::new(100, 100).policy(), (100, 1));
        assert_eq!(Rate::new(10, 50).policy(), (50, 5));
        assert_eq!(Rate::new(1000, 10).policy(), (10, 1));
    }

    #[test]
    fn the_reset_counts_the_seconds_until_the_burst_is_whole() {
        let rate = Rate::new(1, 4);
        let first = rate.take().unwrap();
        assert_eq!(first.requests, 3);
        assert_eq!(first.full_in_secs, 1);
        rate.take().unwrap();
        assert_eq!(rate.take().unwrap().full_in_secs, 3);
    }
}
