//! Idempotency records: the `i` records (`IdempotencyRecord`: the first response to a
//! request with an `Idempotency-Key`, replayed for repeats), one key's versions under
//! `i` + webstore id + 0 + key + 0, the highest version counting; their part of `impl Store`:
//! where a keyed write's record goes and which version it replaces (written first in the
//! write's log entry, before what it names: `kinds::change` makes every keyed write the same
//! way around its own writes), the reads of a key's record and the walk over them, and the
//! batch builder imports use. Their expiry and sweep are `store::expiry`'s.
//!
//! Stored and exported: the record keeps the body's SHA-256 and the response's body as
//! bytes, and no key or webstore (they are in its key); its export line
//! (`transfer::format::IdempotencyLine`) carries the webstore and key, the digest as hex and
//! the body as JSON text, and always version 1 of the key (an import writes version 1).
//!
//! Must not touch: what a record's `Location` names (the service decides whether a record
//! counts), the log itself (a record's writes are recorded in its change's `LogEntry`, which
//! `Store::write_change` hands to the log), HTTP.

use serde::{Deserialize, Serialize};

use crate::domain::idempotency::Pending;
use crate::store::codec::{decode, encode, CodecError, Kind, Record};
use crate::store::error::{corrupt, readable};
use crate::store::keys::webstore_prefix;
use crate::store::log::wal::LogEntry;
use crate::store::{Store, StoreError, WriteBatch};

/// Idempotency records, per webstore.
pub const IDEMPOTENCY: u8 = b'i';

/// `i` + webstore id + 0 + idempotency key + 0: where the versions of one key's record are.
/// A client key is printable ASCII, so the 0 ends it.
pub fn idempotency_prefix(webstore: &str, idempotency_key: &str) -> Vec<u8> {
    let mut key = webstore_prefix(IDEMPOTENCY, webstore);
    key.extend_from_slice(idempotency_key.as_bytes());
    key.push(0);
    key
}

/// [`idempotency_prefix`] + version (big-endian): one version of a key's record. A key is written
/// again only once its record no longer counts (expired, or naming nothing), under a higher
/// version (the clock's nanoseconds, above the version it replaces), and the highest version
/// is the record: so the replay of an earlier version after a crash can never take a later
/// one back (see `Store::create_customer`). Imports write version 1.
pub fn idempotency_version(webstore: &str, idempotency_key: &str, version: u64) -> Vec<u8> {
    let mut key = idempotency_prefix(webstore, idempotency_key);
    key.extend_from_slice(&version.to_be_bytes());
    key
}

/// The webstore id, client key and version of an `i` key.
pub fn idempotency_parts(key: &[u8]) -> Option<(&str, &str, u64)> {
    let rest = key.strip_prefix(&[IDEMPOTENCY])?;
    let split = rest.iter().position(|b| *b == 0)?;
    let webstore = std::str::from_utf8(&rest[..split]).ok()?;
    let tail = &rest[split + 1..];
    let (client_key, version) = tail.split_at_checked(tail.len().checked_sub(9)?)?;
    let [0, version @ ..] = version else {
        return None;
    };
    let client_key = std::str::from_utf8(client_key).ok()?;
    Some((
        webstore,
        client_key,
        u64::from_be_bytes(version.try_into().ok()?),
    ))
}

/// The first response to a request with an `Idempotency-Key`, replayed for repeats.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdempotencyRecord {
    /// SHA-256 of the request body.
    pub body_sha256: Vec<u8>,
    /// HTTP status of the first response.
    pub status: u16,
    /// Its `Location` header.
    pub location: Option<String>,
    /// Its body.
    pub body: Vec<u8>,
    /// Unix seconds when it was stored.
    pub created_at: i64,
}

impl Record for IdempotencyRecord {
    const KIND: Kind = Kind::Idempotency;
}

/// An idempotency record to write in the same batch as the record it answers for.
pub struct IdempotencyWrite {
    /// The webstore's id.
    pub webstore_id: String,
    /// The client's key.
    pub key: String,
    /// What to replay.
    pub record: IdempotencyRecord,
}

impl IdempotencyWrite {
    /// The record of a create that came with an idempotency key: the response rendered from
    /// the created record, to be written just before that record.
    pub fn rendered<T>(webstore_id: &str, pending: Pending<T>, created: &T, now: i64) -> Self {
        let response = (pending.render)(created);
        IdempotencyWrite {
            webstore_id: webstore_id.to_owned(),
            key: pending.key.as_str().to_owned(),
            record: IdempotencyRecord {
                body_sha256: pending.body_sha256.to_vec(),
                status: response.status,
                location: response.location,
                body: response.body,
                created_at: now,
            },
        }
    }
}

/// Where a keyed create's idempotency record goes (see `Store::plan_idempotency`).
pub(in crate::store) struct IdempotencyPlan {
    /// The client's key.
    pub(in crate::store) name: String,
    key: Vec<u8>,
    record: Vec<u8>,
    /// The version of the key it replaces, removed with it.
    replaced: Option<Vec<u8>>,
}

impl IdempotencyPlan {
    /// What its writes add to the change's log entry.
    pub(in crate::store) fn encoded_len(&self) -> usize {
        LogEntry::encoded_len(&self.key, &self.record)
            + self
                .replaced
                .as_ref()
                .map_or(0, |replaced| LogEntry::encoded_len(replaced, &[]))
    }
}

impl Store {
    /// Where the idempotency record of a keyed create goes, and which version of its key it
    /// replaces: read before anything of the change is written, so that its size is known.
    /// A key is written only when its record no longer counts, and then under the next
    /// version, the one it replaces removed: a crash that keeps this write in the snapshot
    /// but loses its log frame cannot have the replay of the earlier version take it back
    /// (the last version counts).
    pub(in crate::store) fn plan_idempotency(
        &self,
        idempotency: Option<IdempotencyWrite>,
    ) -> Result<Option<IdempotencyPlan>, StoreError> {
        let Some(write) = idempotency else {
            return Ok(None);
        };
        let replaced = self
            .inner
            .storage
            .last(&idempotency_prefix(&write.webstore_id, &write.key))?;
        // Above the version it replaces, and above any an expiry sweep removed (those are
        // older than the clock's nanoseconds now), so that no earlier version of the key
        // comes back above this one.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| {
                u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
            });
        let version = replaced
            .as_ref()
            .and_then(|(key, _)| idempotency_parts(key))
            .map_or(now, |(_, _, version)| now.max(version.saturating_add(1)));
        Ok(Some(IdempotencyPlan {
            name: write.key.clone(),
            key: idempotency_version(&write.webstore_id, &write.key, version),
            record: readable("idempotency", &write.record)?,
            replaced: replaced.map(|(key, _)| key),
        }))
    }

    /// Writes the idempotency record of a keyed create, before what it creates: a record
    /// whose customer or order was never written (a crash in between) is stale, and the
    /// service treats its key as free (`IdempotencyGate::once`).
    pub(in crate::store) fn put_idempotency(
        &self,
        entry: &mut LogEntry,
        plan: Option<IdempotencyPlan>,
    ) -> Result<(), StoreError> {
        let Some(plan) = plan else {
            return Ok(());
        };
        self.put(entry, &plan.key, plan.record)?;
        if let Some(replaced) = plan.replaced {
            self.remove_key(entry, &replaced)?;
        }
        Ok(())
    }

    /// Whether an idempotency record is stored under this webstore and key.
    pub fn has_idempotency(&self, webstore_id: &str, key: &str) -> Result<bool, StoreError> {
        Ok(self
            .inner
            .storage
            .last(&idempotency_prefix(webstore_id, key))?
            .is_some())
    }

    /// A stored idempotency record: the last version of the key's (see
    /// [`idempotency_version`]).
    pub fn idempotency(
        &self,
        webstore_id: &str,
        key: &str,
    ) -> Result<Option<IdempotencyRecord>, StoreError> {
        self.inner
            .storage
            .last(&idempotency_prefix(webstore_id, key))?
            .map(|(store_key, bytes)| decode(&bytes).map_err(|source| corrupt(&store_key, source)))
            .transpose()
    }

    /// Calls `visit` with the webstore id, client key and record of every stored
    /// idempotency record (the last version of each key, see [`idempotency_version`]),
    /// in key order, until it returns false.
    pub fn for_each_idempotency(
        &self,
        visit: &mut dyn FnMut(&str, &str, IdempotencyRecord) -> bool,
    ) -> Result<(), StoreError> {
        // A key's versions come together, lowest first: each is handed on once the next
        // entry shows it was the key's last.
        let mut held: Option<(String, String, IdempotencyRecord)> = None;
        let mut more = true;
        self.for_each_record(IDEMPOTENCY, &mut |key, bytes: &[u8]| {
            let record = decode::<IdempotencyRecord>(bytes)?;
            let Some((webstore_id, client_key, _)) = idempotency_parts(key) else {
                return Err(CodecError::NotARecord);
            };
            if let Some((held_webstore, held_key, held_record)) = held.take() {
                if (held_webstore.as_str(), held_key.as_str()) != (webstore_id, client_key) {
                    more = visit(&held_webstore, &held_key, held_record);
                }
            }
            held = Some((webstore_id.to_owned(), client_key.to_owned(), record));
            Ok(more)
        })?;
        if let (true, Some((webstore_id, client_key, record))) = (more, held) {
            visit(&webstore_id, &client_key, record);
        }
        Ok(())
    }
}

/// Adds an imported idempotency record to `batch`.
pub fn add_idempotency_record(
    batch: &mut WriteBatch,
    webstore_id: &str,
    key: &str,
    record: &IdempotencyRecord,
) {
    batch.put(idempotency_version(webstore_id, key, 1), encode(record));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_s_versions_sort_by_version_and_before_the_next_key() {
        assert_eq!(
            idempotency_parts(&idempotency_version("shop", "key-1", 3)),
            Some(("shop", "key-1", 3))
        );
        assert_eq!(
            idempotency_parts(&idempotency_prefix("shop", "key-1")),
            None
        );
        assert!(idempotency_version("s", "k", 255) < idempotency_version("s", "k", 256));
        assert!(idempotency_version("s", "k", u64::MAX) < idempotency_version("s", "k!", 0));
    }
}
