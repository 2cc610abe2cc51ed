//! The backoff of webhook deliveries (not an order's schedule, which is the domain's): what
//! a delivery attempt's answer means, and when the next attempt is due: a 2xx is
//! delivered; `410 Gone` disables the endpoint; `429` and `503` wait as `Retry-After` says
//! (when it says); anything else, a timeout and an unreachable destination are retried
//! after a delay that grows four times per failure from the first retry's (at most six
//! hours), with 20% jitter either way so that endpoints failing together do not retry
//! together. An endpoint failing one event for longer than the give-up time is disabled.
//!
//! Must not touch: HTTP clients, the store (pure functions of what happened).

use std::time::Duration;

/// The longest wait between two attempts.
pub const MAX_DELAY: Duration = Duration::from_secs(6 * 3600);
/// The longest `Retry-After` honoured (longer ones wait this long).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(6 * 3600);
/// The shortest wait a `Retry-After` gets (a `0` or a date past would retry at once, again
/// and again).
pub const MIN_RETRY_AFTER: Duration = Duration::from_secs(1);

/// What became of one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOutcome {
    /// A 2xx: the receiver accepted the event.
    Accepted,
    /// `410 Gone`: the receiver wants nothing more.
    Gone,
    /// `429` or `503`: the receiver asked to wait, as long as its `Retry-After` says if it
    /// gave one.
    AskedToWait(Option<Duration>),
    /// Another status (redirects included: they are not followed).
    Failed(u16),
    /// No answer within the timeout.
    Timeout,
    /// No connection (refused, reset, DNS failure, TLS failure).
    Unreachable,
    /// The destination is on a network the catalogue does not allow.
    Refused,
}

impl SendOutcome {
    /// The outcome of an answer with `status` and `retry_after` (the header's text).
    pub fn of_status(status: u16, retry_after: Option<&str>) -> SendOutcome {
        match status {
            200..=299 => SendOutcome::Accepted,
            410 => SendOutcome::Gone,
            429 | 503 => SendOutcome::AskedToWait(retry_after.and_then(parse_retry_after)),
            other => SendOutcome::Failed(other),
        }
    }

    /// Its label in `boxsub_webhook_sends_total`.
    pub fn label(self) -> &'static str {
        match self {
            SendOutcome::Accepted => "accepted",
            SendOutcome::Gone => "gone",
            SendOutcome::AskedToWait(_) => "asked_to_wait",
            SendOutcome::Failed(_) => "failed",
            SendOutcome::Timeout => "timeout",
            SendOutcome::Unreachable => "unreachable",
            SendOutcome::Refused => "refused",
        }
    }
}

/// `Retry-After` in seconds (an HTTP date is read as well), at least [`MIN_RETRY_AFTER`]
/// and at most [`MAX_RETRY_AFTER`].
pub fn parse_retry_after(text: &str) -> Option<Duration> {
    let text = text.trim();
    let wait = match text.parse::<u64>() {
        Ok(seconds) => Duration::from_secs(seconds),
        Err(_) => {
            let at = httpdate::parse_http_date(text).ok()?;
            at.duration_since(std::time::SystemTime::now())
                .unwrap_or_default()
        }
    };
    Some(wait.clamp(MIN_RETRY_AFTER, MAX_RETRY_AFTER))
}

/// The wait before the attempt after the `failures`-th failure (1 for the first), from
/// `first` and `jitter` (uniform in 0..1): `first` × 4^(failures - 1), at most
/// [`MAX_DELAY`], then scaled by 0.8 to 1.2.
pub fn retry_delay(first: Duration, failures: u32, jitter: f64) -> Duration {
    let growth = 4f64.powi(failures.saturating_sub(1).min(30) as i32);
    let base = (first.as_secs_f64() * growth).min(MAX_DELAY.as_secs_f64());
    Duration::from_secs_f64(base * (0.8 + 0.4 * jitter.clamp(0.0, 1.0)))
}

/// The wait after a failed attempt: `Retry-After` when the answer gave one, else the
/// backoff's.
pub fn wait_after(outcome: SendOutcome, first: Duration, failures: u32, jitter: f64) -> Duration {
    match outcome {
        SendOutcome::AskedToWait(Some(wait)) => wait,
        _ => retry_delay(first, failures, jitter),
    }
}

/// The backoff's waits with no jitter, from the first failure, until their sum passes
/// `give_up` (for the documents and the tests).
pub fn plain_waits(first: Duration, give_up: Duration) -> Vec<Duration> {
    let mut waits = Vec::new();
    let mut total = Duration::ZERO;
    let mut failures = 1;
    while total < give_up && waits.len() < 1_000 {
        let wait = retry_delay(first, failures, 0.5);
        total += wait;
        waits.push(wait);
        failures += 1;
    }
    waits
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn statuses_are_read_as_the_documents_say() {
        assert_eq!(SendOutcome::of_status(204, None), SendOutcome::Accepted);
        assert_eq!(SendOutcome::of_status(410, Some("5")), SendOutcome::Gone);
        assert_eq!(
            SendOutcome::of_status(429, Some("7")),
            SendOutcome::AskedToWait(Some(Duration::from_secs(7)))
        );
        assert_eq!(
            SendOutcome::of_status(503, Some("soon")),
            SendOutcome::AskedToWait(None)
        );
        assert_eq!(SendOutcome::of_status(301, None), SendOutcome::Failed(301));
        assert_eq!(
            SendOutcome::of_status(500, Some("1")),
            SendOutcome::Failed(500)
        );
    }

    #[test]
    fn retry_after_is_read_in_seconds_or_as_a_date_and_capped() {
        assert_eq!(parse_retry_after(" 120 "), Some(Duration::from_secs(120)));
        assert_eq!(parse_retry_after("99999999"), Some(MAX_RETRY_AFTER));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(MIN_RETRY_AFTER)
        );
        assert_eq!(parse_retry_after("0"), Some(MIN_RETRY_AFTER));
        assert_eq!(parse_retry_after("-3"), None);
    }

    #[test]
    fn the_default_backoff_retries_for_three_days() {
        let waits = plain_waits(Duration::from_secs(5), Duration::from_secs(3 * 86_400));
        let secs: Vec<u64> = waits.iter().take(5).map(Duration::as_secs).collect();
        assert_eq!(secs, vec![5, 20, 80, 320, 1280]);
        assert!(waits.iter().all(|wait| *wait <= MAX_DELAY));
        let total: Duration = waits.iter().sum();
        assert!(total >= Duration::from_secs(3 * 86_400));
        assert!(waits.len() < 25, "{} attempts", waits.len());
    }

    proptest! {
        #[test]
        fn a_wait_grows_with_failures_stays_capped_and_jitters_by_a_fifth(
            first_ms in 1u64..60_000, failures in 1u32..100, jitter in 0.0f64..1.0
        ) {
            let first = Duration::from_millis(first_ms);
            let wait = retry_delay(first, failures, jitter);
            let plain = retry_delay(first, failures, 0.5);
            prop_assert!(wait.as_secs_f64() >= plain.as_secs_f64() * 0.8 - 1e-6);
            prop_assert!(wait.as_secs_f64() <= plain.as_secs_f64() * 1.2 + 1e-6);
            prop_assert!(plain <= MAX_DELAY);
            prop_assert!(retry_delay(first, failures + 1, 0.5) >= plain);
        }
    }
}
