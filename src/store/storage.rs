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

/// A condition of a checked batch: `key` must be absent or already hold `holder`. This is how
/// a unique key (an email) is taken: the check and the write are one atomic step in the
/// engine, so two writers can never both take it.
#[derive(Debug, Clone)]
pub struct UniqueKey {
    /// The key.
    pub key: Vec<u8>,
    /// The value the writer puts there (its own id).
    pub holder: Vec<u8>,
}

/// The storage engine as boxsub uses it.
pub trait Storage: Send + Sync + 'static {
    /// The value at `key`.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;
    /// Applies every write of `batch`, or none.
    fn apply(&self, batch: WriteBatch) -> Result<(), StoreError>;
    /// Applies every write of `batch` if every key of `unique` is free or already held by
    /// its holder, checked atomically with the write; otherwise writes nothing and fails
    /// with [`StoreError::Taken`].
    fn apply_checked(&self, batch: WriteBatch, unique: &[UniqueKey]) -> Result<(), StoreError>;
    /// Sets one key. Cheaper than a batch: sled 0.34 applies batches under a process-wide
    /// write lock that also stops every reader, while single writes share it.
    fn put(&self, key: &[u8], value: Vec<u8>) -> Result<(), StoreError>;
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
    /// Makes every applied batch durable.
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
