//! What an endpoint's task does after an attempt to deliver an event, given what the attempt
//! came to ([`SendOutcome`]), how long the endpoint has been failing this event, the time and the
//! retry settings: settle (move past the event), send it again at a time, give up (disable
//! the endpoint: it kept failing past the give-up time), or stop (disable it: it answered
//! `410 Gone`). A pure function, so that every branch is tested here rather than through a
//! receiver and a clock.
//!
//! Must not touch: HTTP clients, the store, the clock (the task gives it `now`).

use std::time::Duration;

use super::backoff::{wait_after, SendOutcome};

/// How an endpoint stands with the event it is sending: its failures so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Failing {
    /// Failed attempts at the event.
    pub attempts: u32,
    /// When the first of them failed (Unix milliseconds; 0 when none has).
    pub since_ms: i64,
}

/// What comes after an attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Delivered: the position moves past the event, and its failures are forgotten.
    Settle,
    /// The same event again at `at_ms` (Unix milliseconds), `wait` from now.
    RetryAt {
        /// When the next attempt is due.
        at_ms: i64,
        /// How long that is from now.
        wait: Duration,
        /// The failures, this one counted.
        failing: Failing,
    },
    /// The endpoint failed this event for `failing_for`, past the give-up time: it is
    /// disabled until the operator redelivers.
    GiveUp {
        /// The failures, this one counted.
        failing: Failing,
        /// How long it has been failing the event.
        failing_for: Duration,
    },
    /// The endpoint answered `410 Gone`: it is disabled until the operator redelivers.
    Stop,
}

/// The retry settings a decision follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retries {
    /// The wait before the first retry.
    pub first: Duration,
    /// How long an endpoint may keep failing one event before it is disabled.
    pub give_up: Duration,
}

/// What comes after an attempt that came to `outcome`, the endpoint `failing` as it was
/// before it, at `now_ms`; `jitter` (in 0..=1) spreads the retries of endpoints failing
/// together.
pub fn decide(
    outcome: SendOutcome,
    failing: Failing,
    now_ms: i64,
    retries: Retries,
    jitter: f64,
) -> Decision {
    match outcome {
        SendOutcome::Accepted => Decision::Settle,
        SendOutcome::Gone => Decision::Stop,
        failed => {
            let failing = Failing {
                attempts: failing.attempts.saturating_add(1),
                since_ms: if failing.since_ms == 0 {
                    now_ms
                } else {
                    failing.since_ms
                },
            };
            let failing_for =
                Duration::from_millis(now_ms.saturating_sub(failing.since_ms).max(0) as u64);
            if failing_for >= retries.give_up {
                return Decision::GiveUp {
                    failing,
                    failing_for,
                };
            }
            let wait = wait_after(failed, retries.first, failing.attempts, jitter);
            Decision::RetryAt {
                at_ms: now_ms.saturating_add(i64::try_from(wait.as_millis()).unwrap_or(i64::MAX)),
                wait,
                failing,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhooks::backoff::{MAX_DELAY, MAX_RETRY_AFTER, MIN_RETRY_AFTER};
    use proptest::prelude::*;

    const RETRIES: Retries = Retries {
        first: Duration::from_secs(5),
        give_up: Duration::from_secs(3 * 86_400),
    };
    const NOW: i64 = 1_800_000_000_000;

    #[test]
    fn a_2xx_settles_and_a_410_stops_whatever_came_before() {
        let failing = Failing {
            attempts: 7,
            since_ms: NOW - 1_000,
        };
        assert_eq!(
            decide(SendOutcome::Accepted, failing, NOW, RETRIES, 0.5),
            Decision::Settle
        );
        assert_eq!(
            decide(SendOutcome::Gone, failing, NOW, RETRIES, 0.5),
            Decision::Stop
        );
    }

    #[test]
    fn a_first_failure_starts_the_count_and_retries_after_the_first_wait() {
        let decided = decide(
            SendOutcome::Failed(500),
            Failing::default(),
            NOW,
            RETRIES,
            0.5,
        );
        assert_eq!(
            decided,
            Decision::RetryAt {
                at_ms: NOW + 5_000,
                wait: Duration::from_secs(5),
                failing: Failing {
                    attempts: 1,
                    since_ms: NOW
                },
            }
        );
    }

    #[test]
    fn a_receiver_asking_to_wait_is_retried_when_it_says() {
        let decided = decide(
            SendOutcome::AskedToWait(Some(Duration::from_secs(120))),
            Failing {
                attempts: 3,
                since_ms: NOW - 60_000,
            },
            NOW,
            RETRIES,
            0.0,
        );
        assert_eq!(
            decided,
            Decision::RetryAt {
                at_ms: NOW + 120_000,
                wait: Duration::from_secs(120),
                failing: Failing {
                    attempts: 4,
                    since_ms: NOW - 60_000
                },
            }
        );
    }

    #[test]
    fn failing_past_the_give_up_time_gives_up() {
        let since_ms = NOW - RETRIES.give_up.as_millis() as i64;
        let decided = decide(
            SendOutcome::Timeout,
            Failing {
                attempts: 20,
                since_ms,
            },
            NOW,
            RETRIES,
            0.5,
        );
        assert_eq!(
            decided,
            Decision::GiveUp {
                failing: Failing {
                    attempts: 21,
                    since_ms
                },
                failing_for: RETRIES.give_up,
            }
        );
    }

    fn any_failure() -> impl Strategy<Value = SendOutcome> {
        prop_oneof![
            (300u16..600)
                .prop_filter("not a 410", |status| *status != 410)
                .prop_map(SendOutcome::Failed),
            Just(SendOutcome::Timeout),
            Just(SendOutcome::Unreachable),
            Just(SendOutcome::Refused),
            proptest::option::of((0u64..100_000).prop_map(Duration::from_secs)).prop_map(|wait| {
                SendOutcome::AskedToWait(wait.map(|w| w.clamp(MIN_RETRY_AFTER, MAX_RETRY_AFTER)))
            }),
        ]
    }

    proptest! {
        #[test]
        fn a_failure_counts_keeps_its_start_and_either_retries_later_or_gives_up_past_the_time(
            failed in any_failure(),
            attempts in 0u32..1_000,
            failing_ms in proptest::option::of(0i64..10 * 86_400_000),
            give_up_secs in 0u64..10 * 86_400,
            first_ms in 10u64..600_000,
            jitter in 0.0f64..=1.0,
        ) {
            let failing = Failing {
                attempts,
                since_ms: failing_ms.map_or(0, |ms| NOW - ms),
            };
            let retries = Retries {
                first: Duration::from_millis(first_ms),
                give_up: Duration::from_secs(give_up_secs),
            };
            let counted = Failing {
                attempts: attempts + 1,
                since_ms: failing_ms.map_or(NOW, |ms| NOW - ms),
            };
            let failing_for = Duration::from_millis(failing_ms.unwrap_or(0) as u64);
            match decide(failed, failing, NOW, retries, jitter) {
                Decision::RetryAt { at_ms, wait, failing } => {
                    prop_assert_eq!(failing, counted);
                    prop_assert!(failing_for < retries.give_up);
                    prop_assert_eq!(at_ms, NOW + wait.as_millis() as i64);
                    prop_assert!(at_ms > NOW, "a retry is never at once");
                    prop_assert!(wait <= MAX_RETRY_AFTER.max(MAX_DELAY.mul_f64(1.2)));
                }
                Decision::GiveUp { failing, failing_for: given } => {
                    prop_assert_eq!(failing, counted);
                    prop_assert_eq!(given, failing_for);
                    prop_assert!(failing_for >= retries.give_up);
                }
                other => prop_assert!(false, "a failure settled or stopped: {other:?}"),
            }
        }
    }
}
