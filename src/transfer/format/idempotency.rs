//! Idempotency records as exported: [`IdempotencyLine`], with the webstore and key the
//! stored record has in its key, the body's digest as hex and the body as text; to and from
//! the store's `IdempotencyRecord`. Must not touch: the store but its record, files, the
//! other kinds' lines.

use serde::{Deserialize, Serialize};

use super::BadLine;
use crate::domain::idempotency::Resource;
use crate::store::kinds::idempotency::IdempotencyRecord;

/// An idempotency record as exported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdempotencyLine {
    /// Its webstore.
    pub webstore_id: String,
    /// The client's key.
    pub key: String,
    /// SHA-256 of the first request's body, hex.
    pub body_sha256: String,
    /// The first response's status.
    pub status: u16,
    /// Its `Location`.
    pub location: Option<String>,
    /// Its body (JSON text).
    pub body: String,
    /// Unix seconds when it was stored.
    pub created_at: i64,
}

impl IdempotencyLine {
    /// The line of a stored idempotency record; `None` for a body that is not text (boxsub
    /// only ever stores JSON it rendered).
    pub fn from_record(webstore_id: &str, key: &str, record: IdempotencyRecord) -> Option<Self> {
        Some(IdempotencyLine {
            webstore_id: webstore_id.to_owned(),
            key: key.to_owned(),
            body_sha256: hex::encode(&record.body_sha256),
            status: record.status,
            location: record.location,
            body: String::from_utf8(record.body).ok()?,
            created_at: record.created_at,
        })
    }

    /// The record to store.
    pub fn into_record(self) -> Result<IdempotencyRecord, BadLine> {
        let body_sha256 = hex::decode(&self.body_sha256)
            .ok()
            .filter(|digest| digest.len() == 32)
            .ok_or_else(|| BadLine(format!("idempotency key {:?}: body_sha256", self.key)))?;
        Ok(IdempotencyRecord {
            body_sha256,
            status: self.status,
            location: self.location,
            body: self.body.into_bytes(),
            created_at: self.created_at,
        })
    }

    /// The customer or order the recorded response names, from its `Location`.
    pub fn names(&self) -> Option<Resource> {
        self.location.as_deref().and_then(Resource::from_location)
    }
}
