//! What a webstore's writes changed since its copy to another shard began: the customers
//! (a customer's record and orders travel together), the idempotency keys, the events
//! written and the frozen deliveries marked. A move copies the webstore while its writes go on, then ships what changed,
//! round after round, and freezes its writes only for the last, short round
//! (`crate::service::move_steps`).
//!
//! A write notes what it changed **after** it has made its writes in the store: a round
//! that takes the set and then reads what it names sees every write noted in it, and a
//! write noted after the take is in the next round's set (perhaps shipped twice; shipping
//! is an overwrite). Tracking is in memory only: a node that restarts forgets it, and the
//! move starts its copy again. A session knows when it was last used (started, read in a
//! round, or its webstore exported), so that one whose move went away can be ended
//! ([`ChangeTracking::idle_for`], [`ChangeTracking::end`]).
//!
//! Must not touch: what is shipped, or how (the transfer module reads the store).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dashmap::DashMap;

use crate::domain::day::Day;
use crate::domain::ids::OrderId;

/// What one webstore's writes changed since the last take.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Changed {
    /// Customer ids whose record or orders were written.
    pub customers: BTreeSet<u64>,
    /// Idempotency keys written.
    pub idempotency_keys: BTreeSet<String>,
    /// Sequence numbers of the events written.
    pub events: BTreeSet<u64>,
    /// Frozen deliveries marked (a charge, its reversal), by date and order.
    pub deliveries: BTreeSet<(Day, OrderId)>,
}

impl Changed {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.customers.is_empty()
            && self.idempotency_keys.is_empty()
            && self.events.is_empty()
            && self.deliveries.is_empty()
    }
}

/// One webstore's copy session: its number, what changed, and when it was last used.
struct Session {
    number: u64,
    changed: Arc<Mutex<Changed>>,
    used: Mutex<Instant>,
}

impl Session {
    fn touch(&self) {
        *self
            .used
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Instant::now();
    }
}

/// The webstores whose changes are tracked (each under a session: the move that started
/// it), and what changed of each.
#[derive(Default)]
pub struct ChangeTracking {
    /// How many webstores are tracked: a write looks no further while none is.
    tracked: AtomicUsize,
    webstores: DashMap<String, Session>,
}

impl ChangeTracking {
    /// Starts tracking `webstore`'s changes afresh under `session` (what was noted before is
    /// forgotten, and an earlier session's takes are refused).
    pub fn start(&self, webstore: &str, session: u64) {
        let fresh = Session {
            number: session,
            changed: Arc::new(Mutex::new(Changed::default())),
            used: Mutex::new(Instant::now()),
        };
        if self.webstores.insert(webstore.to_owned(), fresh).is_none() {
            self.tracked.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Stops tracking `webstore`.
    pub fn stop(&self, webstore: &str) {
        if self.webstores.remove(webstore).is_some() {
            self.tracked.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Stops tracking `webstore` if it is tracked under `session` (not under a later one).
    pub fn end(&self, webstore: &str, session: u64) {
        if self
            .webstores
            .remove_if(webstore, |_, tracked| tracked.number == session)
            .is_some()
        {
            self.tracked.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Notes a use of `webstore`'s session, whichever it is (its export is being read).
    pub fn touch(&self, webstore: &str) {
        if let Some(session) = self.webstores.get(webstore) {
            session.touch();
        }
    }

    /// How long `webstore`'s session `session` has gone unused; `None` if it is not tracked
    /// under it.
    pub fn idle_for(&self, webstore: &str, session: u64) -> Option<Duration> {
        let tracked = self
            .webstores
            .get(webstore)
            .filter(|tracked| tracked.number == session)?;
        let used = *tracked
            .used
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        Some(used.elapsed())
    }

    /// Whether `webstore` is tracked.
    pub fn is_tracked(&self, webstore: &str) -> bool {
        self.tracked.load(Ordering::Acquire) != 0 && self.webstores.contains_key(webstore)
    }

    /// The session `webstore` is tracked under, if it is.
    pub fn session(&self, webstore: &str) -> Option<u64> {
        self.webstores.get(webstore).map(|entry| entry.number)
    }

    /// What changed of `webstore` since the last take (emptied), a use of the session;
    /// `None` if it is not tracked under `session`.
    pub fn take(&self, webstore: &str, session: u64) -> Option<Changed> {
        let changed = {
            let tracked = self
                .webstores
                .get(webstore)
                .filter(|entry| entry.number == session)?;
            tracked.touch();
            tracked.changed.clone()
        };
        let mut changed = changed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        Some(std::mem::take(&mut *changed))
    }

    /// Notes that a write of `webstore` changed `customer`, wrote `idempotency_key` and
    /// the event numbered `event`.
    pub fn note(
        &self,
        webstore: &str,
        customer: Option<u64>,
        idempotency_key: Option<&str>,
        event: Option<u64>,
    ) {
        if self.tracked.load(Ordering::Acquire) == 0 {
            return;
        }
        let Some(changed) = self
            .webstores
            .get(webstore)
            .map(|entry| entry.changed.clone())
        else {
            return;
        };
        let mut changed = changed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(customer) = customer {
            changed.customers.insert(customer);
        }
        if let Some(key) = idempotency_key {
            changed.idempotency_keys.insert(key.to_owned());
        }
        if let Some(event) = event {
            changed.events.insert(event);
        }
    }

    /// Notes that a write of `webstore` marked its frozen delivery of `order` on `day`.
    pub fn note_delivery(&self, webstore: &str, day: Day, order: OrderId) {
        if self.tracked.load(Ordering::Acquire) == 0 {
            return;
        }
        if let Some(entry) = self.webstores.get(webstore) {
            entry
                .changed
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .deliveries
                .insert((day, order));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_tracked_webstores_note_and_a_take_empties() {
        let tracking = ChangeTracking::default();
        tracking.note("a", Some(1), Some("k"), None);
        assert_eq!(tracking.take("a", 7), None, "not tracked");
        tracking.start("a", 7);
        tracking.note("a", Some(1), None, None);
        tracking.note("a", Some(1), Some("k"), None);
        tracking.note("b", Some(2), None, None);
        assert_eq!(tracking.take("a", 8), None, "another session's");
        let changed = tracking.take("a", 7).unwrap();
        assert_eq!(changed.customers.into_iter().collect::<Vec<_>>(), vec![1]);
        assert_eq!(changed.idempotency_keys.len(), 1);
        assert!(tracking.take("a", 7).unwrap().is_empty(), "a take empties");
        tracking.note("a", Some(3), None, None);
        tracking.start("a", 9);
        assert_eq!(tracking.take("a", 7), None, "a new session refuses the old");
        assert!(tracking.take("a", 9).unwrap().is_empty(), "a start forgets");
        tracking.stop("a");
        assert!(!tracking.is_tracked("a"));
        assert_eq!(tracking.take("a", 9), None);
    }

    #[test]
    fn a_session_knows_how_long_it_went_unused_and_ends_only_itself() {
        let tracking = ChangeTracking::default();
        assert_eq!(tracking.idle_for("a", 1), None);
        tracking.start("a", 1);
        std::thread::sleep(Duration::from_millis(30));
        let idle = tracking.idle_for("a", 1).unwrap();
        assert!(idle >= Duration::from_millis(30), "{idle:?}");
        tracking.take("a", 1).unwrap();
        assert!(
            tracking.idle_for("a", 1).unwrap() < idle,
            "a round is a use"
        );
        std::thread::sleep(Duration::from_millis(30));
        tracking.touch("a");
        assert!(tracking.idle_for("a", 1).unwrap() < Duration::from_millis(30));
        assert_eq!(tracking.idle_for("a", 2), None, "another session's");
        tracking.start("a", 2);
        tracking.end("a", 1);
        assert!(tracking.is_tracked("a"), "a later session stays");
        tracking.end("a", 2);
        assert!(!tracking.is_tracked("a"));
        assert_eq!(tracking.tracked.load(Ordering::Acquire), 0);
    }
}
