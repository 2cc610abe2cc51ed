//! The snapshot: the bottom layer of the store, a plain ordered key-value map on disk (sled,
//! [`SledSnapshot`]) holding every write up to the last checkpoint, and whatever has been
//! applied since. It gets, puts, removes (also compare-and-swap), walks key ranges, applies
//! batches and flushes. It knows nothing of orders, chunks, record encoding or the log: the
//! layers above decide what the bytes mean and when they must be on disk ([`super::pending`]
//! applies the writes waiting for it; [`super::log`] flushes it at checkpoints). Tests put a
//! map of their own here to model crashes and faults.
//!
//! Must not touch: record encoding, key layout, the log, pending writes.

mod sled;

pub use self::sled::SledSnapshot;

use super::error::StoreError;

/// A key and its value.
pub type Entry = (Vec<u8>, Vec<u8>);

/// One atomic group of writes.
#[derive(Debug, Default)]
pub struct WriteBatch {
    pub(super) ops: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl WriteBatch {
    /// Sets `key` to `value`.
    pub fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.ops.push((key, Some(value)));
    }

    /// Removes `key`.
    pub fn delete(&mut self, key: Vec<u8>) {
        self.ops.push((key, None));
    }

    /// Adds `other`'s writes after its own.
    pub fn extend(&mut self, other: WriteBatch) {
        self.ops.extend(other.ops);
    }

    /// How many writes it holds.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether it holds no write.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// What its writes take in a log entry (see `LogEntry::encoded_len`).
    pub fn encoded_len(&self) -> usize {
        self.ops()
            .map(|(key, value)| 9 + key.len() + value.map_or(0, <[u8]>::len))
            .sum()
    }

    /// The writes, in order: a value to set, or `None` to remove.
    pub fn ops(&self) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        self.ops
            .iter()
            .map(|(key, value)| (key.as_slice(), value.as_deref()))
    }
}

/// The snapshot as the layers above use it: an ordered map of byte keys to byte values.
pub trait Snapshot: Send + Sync + 'static {
    /// The value at `key`.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;
    /// Sets one key.
    fn put(&self, key: &[u8], value: Vec<u8>) -> Result<(), StoreError>;
    /// Removes `key` (whatever it holds, if anything).
    fn remove(&self, key: &[u8]) -> Result<(), StoreError>;
    /// Removes `key` if it still holds `expected`, atomically (compare-and-swap); whether it
    /// did.
    fn remove_if(&self, key: &[u8], expected: &[u8]) -> Result<bool, StoreError>;
    /// Applies every write of `batch`, or none. Costly in sled 0.34, so kept for tools
    /// (imports, seeding, tests) and off the request path: each batch seals sled's current
    /// log buffer and hands it to an I/O thread, and the first batch switches the process
    /// for good from lock-free single-key writes to a process-wide reader-writer lock that
    /// every later read and write takes.
    fn apply(&self, batch: WriteBatch) -> Result<(), StoreError>;
    /// Calls `visit` with every entry from key `from` up to, not including, key `to` (to the
    /// end without one), in order, until it returns false.
    fn for_each_between(
        &self,
        from: &[u8],
        to: Option<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError>;
    /// The last entry from key `from` up to, not including, key `to` (to the end without
    /// one).
    fn last_between(&self, from: &[u8], to: Option<&[u8]>) -> Result<Option<Entry>, StoreError>;
    /// Makes every write made so far durable.
    fn flush(&self) -> Result<(), StoreError>;
    /// Has `handler` called with any failure to read or write the disk from here on (reads
    /// included: a store that cannot reach its disk is not one to answer from). Nothing by
    /// default.
    fn on_io_failure(&self, _handler: crate::store::error::FatalHandler) {}
    /// Bytes its files take on disk (0 where unknown).
    fn size_on_disk(&self) -> Result<u64, StoreError> {
        Ok(0)
    }
}

/// The exclusive end of the keys starting with `prefix`, if any key can follow them.
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}
