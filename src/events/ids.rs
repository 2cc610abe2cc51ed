//! Events' ids: `evt_` and 16 bytes in hex, unique across webstores, nodes and moves, and
//! telling a webstore nothing about anyone else's events.
//!
//! Each id is the first 16 bytes of the SHA-256 of a key drawn at random when the process
//! starts and a count of the ids it made: distinct inputs, so ids collide no more than random
//! ones would, while unpredictable without the key, so that consecutive ids of one webstore
//! do not reveal how many events other webstores made in between (a plain counter would).
//! Drawing 16 random bytes from the kernel for each event cost a system call on the write
//! path.
//!
//! Must not touch: where ids are stored or how they are rendered (`super::json`).

use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

/// Where a process's event ids come from.
pub struct EventIds {
    key: [u8; 32],
    made: AtomicU64,
}

impl EventIds {
    /// Ids under a fresh random key.
    pub fn new() -> EventIds {
        // Without the kernel's randomness, the clock and the process still set this
        // process's ids apart from every other's.
        EventIds {
            key: crate::random::unique(),
            made: AtomicU64::new(0),
        }
    }

    /// The next id.
    pub fn next(&self) -> [u8; 16] {
        let count = self.made.fetch_add(1, Ordering::Relaxed);
        let digest = Sha256::new()
            .chain_update(self.key)
            .chain_update(count.to_be_bytes())
            .finalize();
        let mut id = [0u8; 16];
        id.copy_from_slice(&digest[..16]);
        id
    }
}

impl Default for EventIds {
    fn default() -> EventIds {
        EventIds::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_are_distinct_within_a_process_and_across_processes() {
        let (one, two) = (EventIds::new(), EventIds::new());
        let mut seen = HashSet::new();
        for _ in 0..10_000 {
            assert!(seen.insert(one.next()));
            assert!(seen.insert(two.next()));
        }
    }

    #[test]
    fn consecutive_ids_share_no_visible_count() {
        let ids = EventIds::new();
        let (a, b) = (ids.next(), ids.next());
        // Not a counter: the two differ in most of their bytes, not in the last one.
        let differing = a.iter().zip(b).filter(|(x, y)| *x != y).count();
        assert!(differing > 8, "{a:?} {b:?}");
    }
}
