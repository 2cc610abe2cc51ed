//! Ownership: the `w` entry of a webstore this shard took from another, released to one, froze
//! for a move or handed over (one byte, `Ownership::to_byte`); its part of `impl Store`. Never
//! exported: a shard's ownership is its own, and a move sets it on each side.
//!
//! Must not touch: the webstore's records, the log itself (its writes
//! go into the change's `LogEntry`, which the store's entries hand to the log), HTTP.

use crate::domain::ownership::Ownership;
use crate::store::{Store, StoreError, Written};

/// A webstore's ownership on this shard (taken from, or released to, another).
pub const OWNERSHIP: u8 = b'w';

/// `w` + webstore id: what this shard records of the webstore's ownership.
pub fn ownership_key(webstore: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(1 + webstore.len());
    key.push(OWNERSHIP);
    key.extend_from_slice(webstore.as_bytes());
    key
}

impl Store {
    /// Records, durably once the answer completes, what this shard holds of webstore `id`'s
    /// ownership.
    pub fn set_ownership(&self, id: &str, ownership: Ownership) -> Result<Written, StoreError> {
        let open = self.open_for_writes()?;
        let mut entry = open.entry();
        self.put(&mut entry, &ownership_key(id), vec![ownership.to_byte()])?;
        open.commit(entry)
    }

    /// Forgets what this shard records of webstore `id`'s ownership (a move called off).
    pub fn clear_ownership(&self, id: &str) -> Result<Written, StoreError> {
        let open = self.open_even_if_refused()?;
        let mut entry = open.entry();
        self.remove_key(&mut entry, &ownership_key(id))?;
        open.commit(entry)
    }

    /// Every webstore whose ownership this shard records, with what it records.
    pub fn ownership_records(&self) -> Result<Vec<(String, Ownership)>, StoreError> {
        let mut records = Vec::new();
        self.inner
            .storage
            .for_each(&[OWNERSHIP], &mut |key, value| {
                let id = String::from_utf8_lossy(&key[1..]).into_owned();
                if let Some(ownership) = value.first().copied().and_then(Ownership::from_byte) {
                    records.push((id, ownership));
                }
                true
            })?;
        Ok(records)
    }
}
