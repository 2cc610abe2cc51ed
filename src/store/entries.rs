//! The `impl Store` core every kind of record goes through (`store::kinds`): a change's
//! single-key writes, each made in the pending layer and recorded in the change's log entry
//! (handed to group commit once the change is made, [`super::log::wal`]), a change's event
//! among them ([`EventWrite`], encoded before it gets here); raw batches
//! (removals, tests' and tools' writes); and the walk that decodes a kind's records, a record
//! that does not decode being an error naming its key. Must not touch: which keys a change
//! writes (each kind's), durability (a writer waits for it through the [`super::Written`] it
//! gets back).

use super::codec::CodecError;
use super::error::corrupt;
use super::log::wal::LogEntry;
use super::{OpenForWrite, Store, StoreError, WriteBatch};

/// An event to write in the same log entry as the change it tells of, already encoded
/// (`kinds::events::event_write` makes it): a change's writer puts it without knowing what
/// an event holds, which is the records of the kinds that write events.
pub struct EventWrite {
    /// Its sequence number in its webstore.
    pub sequence: u64,
    key: Vec<u8>,
    value: Vec<u8>,
}

impl EventWrite {
    /// The event of sequence number `sequence` under `key`, its record encoded in `value`.
    pub(super) fn new(sequence: u64, key: Vec<u8>, value: Vec<u8>) -> EventWrite {
        EventWrite {
            sequence,
            key,
            value,
        }
    }

    /// Its size in a log entry.
    pub(super) fn encoded_len(&self) -> usize {
        LogEntry::encoded_len(&self.key, &self.value)
    }
}

/// A record of another kind to write in the same log entry as a change, already encoded by
/// its own kind (the account a customer's halt by hand changes: `Store::account_write`),
/// so that the change's writer puts it without knowing what it holds.
pub struct RecordWrite {
    key: Vec<u8>,
    value: Vec<u8>,
}

impl RecordWrite {
    /// The record under `key`, encoded in `value`.
    pub(super) fn new(key: Vec<u8>, value: Vec<u8>) -> RecordWrite {
        RecordWrite { key, value }
    }

    /// Its size in a log entry.
    pub(super) fn encoded_len(&self) -> usize {
        LogEntry::encoded_len(&self.key, &self.value)
    }

    /// Puts it into `entry`.
    pub(super) fn put(self, store: &Store, entry: &mut LogEntry) -> Result<(), StoreError> {
        store.put(entry, &self.key, self.value)
    }
}

/// Visits one stored record (key, value): whether to go on, or why it does not decode.
type RecordVisitor<'a> = dyn FnMut(&[u8], &[u8]) -> Result<bool, CodecError> + 'a;

impl Store {
    /// Writes a change's event (behind the log where there is one: an event is written once
    /// and then only read); its sequence number.
    pub(super) fn put_event(
        &self,
        open: &OpenForWrite<'_>,
        entry: &mut LogEntry,
        event: Option<EventWrite>,
    ) -> Result<Option<u64>, StoreError> {
        let Some(EventWrite {
            sequence,
            key,
            value,
        }) = event
        else {
            return Ok(None);
        };
        if open.is_logged() {
            self.put_behind_log(entry, &key, value)?;
        } else {
            self.put(entry, &key, value)?;
        }
        Ok(Some(sequence))
    }

    /// Sets `key` in the engine and records it in `entry`.
    pub(super) fn put(
        &self,
        entry: &mut LogEntry,
        key: &[u8],
        value: Vec<u8>,
    ) -> Result<(), StoreError> {
        entry.set(key, &value);
        self.written(self.inner.storage.put(key, value))
    }

    /// Removes `key` in the engine and records it in `entry`.
    pub(super) fn remove_key(&self, entry: &mut LogEntry, key: &[u8]) -> Result<(), StoreError> {
        entry.remove(key);
        self.written(self.inner.storage.remove(key))
    }

    /// Sets `key` and records it in `entry`, letting the engine apply it later, since the
    /// log makes it durable (see `Storage::put_pending`): a new order's record (a change
    /// replaces it later with `Store::put`, through to its chunk, so that no older copy in a
    /// chunk is read beside a newer one waiting) and a change's event (written once, then
    /// only read). Only for writes that go through the log.
    pub(super) fn put_behind_log(
        &self,
        entry: &mut LogEntry,
        key: &[u8],
        value: Vec<u8>,
    ) -> Result<(), StoreError> {
        entry.set(key, &value);
        self.written(self.inner.storage.put_pending(key, value))
    }

    /// Writes a batch of removals, even while writes are refused: removing gives space back
    /// (an import that stopped part-way takes back what it wrote). Tools run it on a stopped
    /// server's store and close the store to make it durable.
    pub fn remove(&self, batch: WriteBatch) -> Result<(), StoreError> {
        if batch.ops().any(|(_, value)| value.is_some()) {
            return Err(StoreError::Engine {
                context: "removing records".into(),
                detail: "a batch of removals holds a write".into(),
            });
        }
        let open = self.open_even_if_refused()?;
        let mut entry = open.entry();
        for (key, _) in batch.ops() {
            entry.remove(key);
        }
        open.fits(entry.len())?;
        self.written(self.inner.storage.apply(batch))?;
        drop(open.commit(entry)?);
        Ok(())
    }

    /// Sets one raw entry (tests that build a store's state key by key, as a crash can
    /// leave it).
    pub fn put_raw(&self, key: &[u8], value: Vec<u8>) -> Result<(), StoreError> {
        let open = self.open_for_writes()?;
        let mut entry = open.entry();
        self.put(&mut entry, key, value)?;
        drop(open.commit(entry)?);
        Ok(())
    }

    /// Writes raw entries in one batch (test generators and tools, which close the store to
    /// make them durable).
    pub fn apply(&self, batch: WriteBatch) -> Result<(), StoreError> {
        let open = self.open_for_writes()?;
        let mut entry = open.entry();
        for (key, value) in batch.ops() {
            match value {
                Some(value) => entry.set(key, value),
                None => entry.remove(key),
            }
        }
        open.fits(entry.len())?;
        self.written(self.inner.storage.apply(batch))?;
        drop(open.commit(entry)?);
        Ok(())
    }

    pub(super) fn for_each_record(
        &self,
        prefix: u8,
        visit: &mut RecordVisitor<'_>,
    ) -> Result<(), StoreError> {
        let mut failure = None;
        self.inner
            .storage
            .for_each(&[prefix], &mut |key, value| match visit(key, value) {
                Ok(more) => more,
                Err(source) => {
                    failure = Some(corrupt(key, source));
                    false
                }
            })?;
        failure.map_or(Ok(()), Err)
    }
}
