//! Record identifiers and the sequence that hands them out: positive, never reused, and
//! increasing over time (contract section 2).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// A customer's id, unique across all webstores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CustomerId(pub u64);

/// An order's id, unique across all webstores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OrderId(pub u64);

impl fmt::Display for CustomerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for OrderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A lock-free source of ids. Ids are taken, never returned: a create that fails after
/// taking one leaves a gap rather than risk handing the same id out twice.
#[derive(Debug)]
pub struct IdSequence(AtomicU64);

impl IdSequence {
    /// A sequence whose first id is `first` (at least 1).
    pub fn starting_at(first: u64) -> Self {
        IdSequence(AtomicU64::new(first.max(1)))
    }

    /// Takes the next id.
    pub fn take(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_positive_and_increase() {
        let ids = IdSequence::starting_at(0);
        let a = ids.take();
        let b = ids.take();
        assert!(a >= 1 && b > a);
        assert_eq!(ids.take(), b + 1);
    }
}
