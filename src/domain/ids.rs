//! Record identifiers and the sequence that hands them out: positive, never reused, and
//! increasing over time (contract section 2).
//!
//! Must not touch: where the sequences are kept (the registry, the store), I/O.

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

/// The ids one host gives out, so that ids given out on different hosts never collide and a
/// webstore can move between hosts keeping its ids: range `k` is `k·2⁴⁰ + 1` up to, not
/// including, `(k+1)·2⁴⁰`. Every id stays below 2⁵³, so JavaScript clients read them exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IdRange(u16);

impl IdRange {
    /// Ids in one range.
    pub const SPAN: u64 = 1 << 40;
    /// The highest range.
    pub const MAX: u16 = 8191;

    /// Range `k`, if it is one.
    pub fn new(k: u16) -> Option<IdRange> {
        (k <= IdRange::MAX).then_some(IdRange(k))
    }

    /// Its number.
    pub fn number(self) -> u16 {
        self.0
    }

    /// Its first id.
    pub fn first(self) -> u64 {
        u64::from(self.0) * IdRange::SPAN + 1
    }

    /// One past its last id.
    pub fn end(self) -> u64 {
        (u64::from(self.0) + 1) * IdRange::SPAN
    }

    /// Whether `id` is one of its ids.
    pub fn contains(self, id: u64) -> bool {
        (self.first()..self.end()).contains(&id)
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
    fn ranges_are_disjoint_and_below_two_to_the_fifty_three() {
        let zero = IdRange::new(0).unwrap();
        assert_eq!((zero.first(), zero.end()), (1, 1 << 40));
        let last = IdRange::new(IdRange::MAX).unwrap();
        assert!(last.end() <= 1 << 53);
        assert!(IdRange::new(IdRange::MAX + 1).is_none());
        let one = IdRange::new(1).unwrap();
        assert!(!zero.contains(one.first()) && one.contains(one.first()));
        assert!(!one.contains(one.end()));
    }

    #[test]
    fn ids_are_positive_and_increase() {
        let ids = IdSequence::starting_at(0);
        let a = ids.take();
        let b = ids.take();
        assert!(a >= 1 && b > a);
        assert_eq!(ids.take(), b + 1);
    }
}
