//! The storage engine as boxsub uses it: a sorted byte map with atomic batches, checked
//! batches, scans and a sync. sled implements it ([`super::sled_engine`]); tests implement it
//! to inject faults. Must not touch: record encoding or key layout (the repository in
//! [`super`] owns both).

use super::StoreError;

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

    /// The writes, in order: a value to set, or `None` to remove.
    pub fn ops(&self) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        self.ops
            .iter()
            .map(|(key, value)| (key.as_slice(), value.as_deref()))
    }
}

/// How the puts waiting for a checkpoint (see [`Storage::put_deferred`]) enter the engine:
/// the puts whose keys share a group prefix are packed, together with the engine's last
/// entry under that prefix, into the entries this returns. The store chooses it (the keys
/// and values are its own); an engine without one writes each put as it is.
pub trait Packing: Send + Sync {
    /// The length of the group prefix of `key`, or `None` when a waiting put of `key` is
    /// written as it is.
    fn group_len(&self, key: &[u8]) -> Option<usize>;
    /// The entries to write for one group: `last` is the engine's last entry under the
    /// prefix (not a waiting put), `waiting` the group's waiting puts in key order. Writing
    /// them may overwrite `last` but must keep every value `last` and `waiting` hold.
    fn pack(
        &self,
        last: Option<(&[u8], &[u8])>,
        waiting: &[(&[u8], &[u8])],
    ) -> Result<Vec<Entry>, StoreError>;
}

/// The storage engine as boxsub uses it.
pub trait Storage: Send + Sync + 'static {
    /// The value at `key`.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;
    /// Applies every write of `batch`, or none. Costly in sled 0.34, so kept for tools
    /// (imports, seeding, tests) and off the request path: each batch
    /// seals sled's current log buffer and hands it to an I/O thread, and the first batch
    /// switches the process for good from lock-free single-key writes to a process-wide
    /// reader-writer lock that every later read and write takes.
    fn apply(&self, batch: WriteBatch) -> Result<(), StoreError>;
    /// Sets one key. Much cheaper than a batch (see [`Storage::apply`]).
    fn put(&self, key: &[u8], value: Vec<u8>) -> Result<(), StoreError>;
    /// Sets one key that the engine may apply later, by [`Storage::apply_deferred`]: every
    /// read sees it at once, and [`Storage::sync`] applies it first. For writes that are
    /// durable without the engine (logged by the write-ahead log); an engine that cannot
    /// wait writes it at once.
    fn put_deferred(&self, key: &[u8], value: Vec<u8>) -> Result<(), StoreError> {
        self.put(key, value)
    }
    /// Applies the puts still waiting (see [`Storage::put_deferred`]), before a checkpoint
    /// marks where the log starts.
    fn apply_deferred(&self) -> Result<(), StoreError> {
        Ok(())
    }
    /// Removes `key` (whatever it holds, if anything).
    fn remove(&self, key: &[u8]) -> Result<(), StoreError>;
    /// Removes `key` if it still holds `expected`, atomically; whether it did.
    fn remove_if(&self, key: &[u8], expected: &[u8]) -> Result<bool, StoreError>;
    /// Up to `limit` entries whose key starts with `prefix`, after skipping `skip` of them.
    fn scan(&self, prefix: &[u8], skip: usize, limit: usize) -> Result<Vec<Entry>, StoreError>;
    /// Calls `visit` with every entry whose key starts with `prefix`, in order, until it
    /// returns false.
    fn for_each(
        &self,
        prefix: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError> {
        self.for_each_between(prefix, prefix_end(prefix).as_deref(), visit)
    }
    /// Calls `visit` with every entry from key `from` up to, not including, key `to` (to the
    /// end without one), in order, until it returns false.
    fn for_each_between(
        &self,
        from: &[u8],
        to: Option<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError>;
    /// The last entry whose key starts with `prefix`.
    fn last(&self, prefix: &[u8]) -> Result<Option<Entry>, StoreError> {
        self.last_between(prefix, prefix_end(prefix).as_deref())
    }
    /// The last entry from key `from` up to, not including, key `to` (to the end without
    /// one).
    fn last_between(&self, from: &[u8], to: Option<&[u8]>) -> Result<Option<Entry>, StoreError>;
    /// Makes every write durable, deferred puts included.
    fn sync(&self) -> Result<(), StoreError>;
    /// Bytes the engine's files take on disk (0 where unknown).
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
