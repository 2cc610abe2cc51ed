//! Sessions: a producer's session in the web app, the `s` record (`SessionRecord`) under the
//! SHA-256 of the session's id (the id itself is only ever in the producer's cookie); their
//! part of `impl Store`: a sign-in's write, a sign-out's removal, the reads, and the batch
//! builder imports use.
//!
//! Stored and exported: the record holds the webstore it belongs to (its key is the digest
//! alone) and the account's fingerprint as bytes; its export line
//! (`transfer::format::SessionLine`) carries the digest and the fingerprint as hex.
//!
//! Must not touch: cookies, passwords, the log itself (its writes
//! go into the change's `LogEntry`, which the store's entries hand to the log), HTTP.

use serde::{Deserialize, Serialize};

use crate::store::codec::{decode, encode, Kind, Record};
use crate::store::error::corrupt;
use crate::store::{Store, StoreError, WriteBatch, Written};

/// A producer's session in the web app, by the SHA-256 of its id.
pub const SESSION: u8 = b's';

/// `s` + the SHA-256 of a session id: a producer's session.
pub fn session_key(digest: &[u8; 32]) -> Vec<u8> {
    let mut key = Vec::with_capacity(33);
    key.push(SESSION);
    key.extend_from_slice(digest);
    key
}

/// A producer's session in the web app (see `service::producers`), under the SHA-256 of its
/// id: the id itself is only ever in the producer's cookie.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// The producer's webstore.
    pub webstore_id: String,
    /// The account signed in with (its folded email).
    pub email: String,
    /// The SHA-256 of the account's password hash at sign-in: a catalogue without the
    /// account, or with another password, ends the session.
    pub account: [u8; 32],
    /// The token the app's forms carry.
    pub form_token: String,
    /// When it was opened (Unix milliseconds).
    pub signed_in_ms: i64,
    /// When it was last used, as last written (Unix milliseconds; written again when a use
    /// finds it older than a few minutes, so that a session in use is not idle for long).
    pub last_used_ms: i64,
}

impl Record for SessionRecord {
    const KIND: Kind = Kind::Session;
}

impl Store {
    /// Stores producer session `digest` (see [`session_key`]); durable once the answer
    /// completes. Not while its webstore is frozen.
    pub fn put_session(
        &self,
        digest: &[u8; 32],
        record: &SessionRecord,
    ) -> Result<Written, StoreError> {
        let open = self.open_for_webstore(&record.webstore_id)?;
        let mut entry = open.entry();
        self.put(&mut entry, &session_key(digest), encode(record))?;
        open.commit(entry)
    }

    /// Removes producer session `digest` of webstore `webstore_id` (even while the disk
    /// refuses writes: it ends a session and frees space; not while the webstore is frozen,
    /// as its move's last round may have carried the session already); durable once the
    /// answer completes.
    pub fn remove_session(
        &self,
        webstore_id: &str,
        digest: &[u8; 32],
    ) -> Result<Written, StoreError> {
        let open = self.open_for_webstore_even_if_refused(webstore_id)?;
        let mut entry = open.entry();
        self.remove_key(&mut entry, &session_key(digest))?;
        open.commit(entry)
    }

    /// Producer session `digest`, if stored.
    pub fn session(&self, digest: &[u8; 32]) -> Result<Option<SessionRecord>, StoreError> {
        let key = session_key(digest);
        self.inner
            .storage
            .get(&key)?
            .map(|bytes| decode(&bytes).map_err(|source| corrupt(&key, source)))
            .transpose()
    }

    /// Calls `visit` with every stored producer session (its digest and record) until it
    /// returns false; the first that does not decode is an error naming its key.
    pub fn for_each_session(
        &self,
        visit: &mut dyn FnMut([u8; 32], SessionRecord) -> bool,
    ) -> Result<(), StoreError> {
        let mut failure = None;
        self.inner.storage.for_each(&[SESSION], &mut |key, value| {
            let digest: Option<[u8; 32]> = key.get(1..).and_then(|d| d.try_into().ok());
            let Some(digest) = digest else {
                return true;
            };
            match decode(value) {
                Ok(record) => visit(digest, record),
                Err(source) => {
                    failure = Some(corrupt(key, source));
                    false
                }
            }
        })?;
        failure.map_or(Ok(()), Err)
    }
}

/// Adds an imported producer session to `batch`.
pub fn add_session_record(batch: &mut WriteBatch, digest: &[u8; 32], record: &SessionRecord) {
    batch.put(session_key(digest), encode(record));
}
