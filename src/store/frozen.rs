//! The webstores whose writes the store refuses: those frozen for a move to another shard
//! (and those handed over or released). The service freezes a webstore's writes at its
//! front (`crate::service::serving`: requests are refused, and those under way waited
//! for); this is the store's own fence behind it, for a change that an actor had begun
//! before its request went away: its request's ticket is gone, but its write still reaches
//! the store, where it is refused once the webstore is frozen. A freeze waits for the writes
//! already inside the store ([`super::Store::barrier_after_visible_writes`]), so once it
//! returns nothing of the webstore is written until it is thawed.
//!
//! Must not touch: what a webstore's state is (the service records it durably).

use std::sync::atomic::{AtomicUsize, Ordering};

use dashmap::DashSet;

/// The webstores whose writes are refused.
#[derive(Default)]
pub struct FrozenWebstores {
    /// How many: a write looks no further while none is.
    count: AtomicUsize,
    ids: DashSet<String>,
}

impl FrozenWebstores {
    /// Refuses `webstore`'s writes from now on.
    pub fn freeze(&self, webstore: &str) {
        if self.ids.insert(webstore.to_owned()) {
            self.count.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Takes `webstore`'s writes again.
    pub fn thaw(&self, webstore: &str) {
        if self.ids.remove(webstore).is_some() {
            self.count.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Whether `webstore`'s writes are refused.
    pub fn holds(&self, webstore: &str) -> bool {
        self.count.load(Ordering::Acquire) != 0 && self.ids.contains(webstore)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frozen_webstore_is_refused_until_thawed_and_others_never() {
        let frozen = FrozenWebstores::default();
        assert!(!frozen.holds("a"));
        frozen.freeze("a");
        frozen.freeze("a");
        assert!(frozen.holds("a") && !frozen.holds("b"));
        frozen.thaw("a");
        assert!(!frozen.holds("a"));
        frozen.thaw("a");
        assert_eq!(frozen.count.load(Ordering::Acquire), 0);
    }
}
