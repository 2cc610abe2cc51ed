//! The read lease: until when this process may let anything out as its group's primary (an
//! answer to a read, a webhook delivery), on its own monotonic clock. A single node holds it
//! for ever. A group's node holds none until it takes over ([`Lease::take`]); replication then
//! extends it each time the changelog acknowledges a message (the argument for its length is
//! in `crate::replication`), and **ends** it the moment the node learns it was deposed, gives
//! up a write or stops serving ([`Lease::end`]). An ended lease is not extended again: only
//! the next takeover, after the node has rebuilt its copy from the group, takes a new one. So
//! a node that gave up a write (whose records its own store may still hold) lets nothing out
//! from then until it rebuilds.
//!
//! It is a type of its own, below everything that reads it: the node (which the HTTP layer
//! asks), replication (which extends and ends it) and the webhooks' deliveries.
//!
//! Must not touch: anything but the time it holds until.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// `until` of a lease that is not held (before the first takeover, once ended).
const NONE: u64 = 0;
/// `until` of a single node's lease.
const FOR_EVER: u64 = u64::MAX;

/// The read lease; see the module.
#[derive(Debug)]
pub struct Lease {
    /// Until when it holds, in nanoseconds after `epoch`: [`NONE`] or [`FOR_EVER`] besides.
    until: AtomicU64,
    epoch: Instant,
}

impl Lease {
    /// A single node's: held for ever.
    pub fn for_ever() -> Lease {
        Lease {
            until: AtomicU64::new(FOR_EVER),
            epoch: Instant::now(),
        }
    }

    /// A group's node's: none until it takes over.
    pub fn none() -> Lease {
        Lease {
            until: AtomicU64::new(NONE),
            epoch: Instant::now(),
        }
    }

    /// Whether it holds now.
    pub fn held(&self) -> bool {
        match self.until.load(Ordering::Acquire) {
            FOR_EVER => true,
            NONE => false,
            until => self.nanos_since_epoch(Instant::now()) < until,
        }
    }

    /// Takes a new lease until `until`, whatever held before: a takeover, the one moment a
    /// lease that was ended may hold again.
    pub fn take(&self, until: Instant) {
        let until = self.nanos(until);
        let _ = self
            .until
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |current| {
                (current != FOR_EVER).then_some(until)
            });
    }

    /// Extends the lease to `until` (never shortens it); nothing while it is not held since
    /// its last [`Lease::take`] or once it was ended.
    pub fn extend(&self, until: Instant) {
        let until = self.nanos(until);
        let _ = self
            .until
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |current| {
                (current != NONE && current != FOR_EVER && current < until).then_some(until)
            });
    }

    /// Ends the lease at once, until the next [`Lease::take`] (a single node's holds for
    /// ever). Everything that asks [`Lease::held`] from now on is told no.
    pub fn end(&self) {
        let _ = self
            .until
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |current| {
                (current != FOR_EVER).then_some(NONE)
            });
    }

    /// `at` as `until` holds it: never [`NONE`] or [`FOR_EVER`].
    fn nanos(&self, at: Instant) -> u64 {
        self.nanos_since_epoch(at).clamp(NONE + 1, FOR_EVER - 1)
    }

    fn nanos_since_epoch(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn in_a_minute() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    #[test]
    fn a_group_lease_holds_only_from_a_takeover_until_the_moment_it_was_extended_to() {
        let lease = Lease::none();
        assert!(!lease.held(), "none before the first takeover");
        lease.extend(in_a_minute());
        assert!(!lease.held(), "an extension is no takeover");
        lease.take(Instant::now() + Duration::from_millis(1));
        lease.extend(in_a_minute());
        assert!(lease.held());
        lease.extend(Instant::now());
        assert!(lease.held(), "an earlier moment never shortens it");
        lease.take(Instant::now() - Duration::from_millis(1));
        assert!(!lease.held(), "a lease that ended is no lease");
    }

    #[test]
    fn an_ended_lease_is_not_extended_again_until_the_next_takeover() {
        let lease = Lease::none();
        lease.take(in_a_minute());
        lease.end();
        assert!(!lease.held());
        lease.extend(in_a_minute() + Duration::from_secs(60));
        assert!(
            !lease.held(),
            "a late acknowledgement does not bring it back"
        );
        lease.take(in_a_minute());
        assert!(lease.held(), "a takeover does");
    }

    #[test]
    fn a_single_node_holds_its_lease_for_ever() {
        let lease = Lease::for_ever();
        lease.end();
        lease.take(Instant::now());
        lease.extend(Instant::now());
        assert!(lease.held());
    }

    #[test]
    fn ending_races_no_extension_back_into_a_lease() {
        let lease = std::sync::Arc::new(Lease::none());
        for _ in 0..200 {
            lease.take(in_a_minute());
            let extender = {
                let lease = lease.clone();
                std::thread::spawn(move || {
                    for n in 0..100u64 {
                        lease.extend(in_a_minute() + Duration::from_millis(n));
                    }
                })
            };
            lease.end();
            extender.join().unwrap();
            assert!(!lease.held(), "an extension brought an ended lease back");
        }
    }
}
