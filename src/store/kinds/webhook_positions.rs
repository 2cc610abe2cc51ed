//! Webhook positions: where each webhook endpoint of a webstore stands, the `d` record
//! (`WebhookPosition`: the sequence number delivered through, why it is disabled, the
//! failing attempts and when the next is due), written by the endpoint's own task alone; and
//! the `r` entry of a redelivery the operator asked and the endpoint has not taken up yet (the
//! sequence number to deliver after); their part of `impl Store`, and the batch builder
//! imports use.
//!
//! Stored and exported: the record holds no webstore or endpoint (they are in its key); its
//! export line (`transfer::format::WebhookPositionLine`, of type `delivery`) carries both. A
//! redelivery request is exported as the position it will make, not as a line of its own.
//!
//! Must not touch: the events, the deliveries themselves (`crate::webhooks`), the log itself (its writes
//! go into the change's `LogEntry`, which the store's entries hand to the log), HTTP.

use serde::{Deserialize, Serialize};

use crate::store::codec::{decode, encode, CodecError, Kind, Record};
use crate::store::error::corrupt;
use crate::store::keys::{trailing_id, webstore_prefix};
use crate::store::{Store, StoreError, WriteBatch, Written};

/// Where each webhook endpoint of a webstore stands.
pub const WEBHOOK_POSITION: u8 = b'd';

/// A redelivery the operator asked of a webhook endpoint, not yet taken up.
pub const REDELIVERY: u8 = b'r';

/// `d` + webstore id + 0 + endpoint id: where that webhook endpoint stands.
pub fn webhook_position_key(webstore: &str, endpoint: &str) -> Vec<u8> {
    let mut key = webstore_prefix(WEBHOOK_POSITION, webstore);
    key.extend_from_slice(endpoint.as_bytes());
    key
}

/// `r` + webstore id + 0 + endpoint id: the sequence number after which the operator asked
/// that endpoint's deliveries to start again (`u64`, big-endian).
pub fn redelivery_key(webstore: &str, endpoint: &str) -> Vec<u8> {
    let mut key = webstore_prefix(REDELIVERY, webstore);
    key.extend_from_slice(endpoint.as_bytes());
    key
}

/// Where one webhook endpoint of a webstore stands (see `crate::webhooks`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookPosition {
    /// Every event of the webstore up to this sequence number has been delivered (or was
    /// not of a type the endpoint wants).
    pub delivered_through: u64,
    /// Why the endpoint was disabled, if it is (a 410, or retries given up).
    pub disabled: Option<String>,
    /// Failed attempts at the event after `delivered_through`.
    pub attempts: u32,
    /// When the first of those attempts failed (Unix milliseconds; 0 when none has).
    pub failing_since_ms: i64,
    /// When the next attempt is due (Unix milliseconds; 0 for at once).
    pub next_attempt_ms: i64,
}

impl Record for WebhookPosition {
    const KIND: Kind = Kind::WebhookPosition;
}

impl Store {
    /// Records where webhook endpoint `endpoint` of `webstore_id` stands, durably once the
    /// answer completes (even while the disk refuses writes: the record only replaces its
    /// earlier self; not while the webstore is frozen, as its move's last round may have
    /// carried the record already).
    pub fn set_webhook_position(
        &self,
        webstore_id: &str,
        endpoint: &str,
        record: &WebhookPosition,
    ) -> Result<Written, StoreError> {
        let open = self.open_for_webstore_even_if_refused(webstore_id)?;
        let mut entry = open.entry();
        self.put(
            &mut entry,
            &webhook_position_key(webstore_id, endpoint),
            encode(record),
        )?;
        open.commit(entry)
    }

    /// Records the operator's request that endpoint `endpoint` of `webstore_id` deliver again
    /// the events after sequence number `after` (see [`Store::redelivery`]); durable once the
    /// answer completes. Not while the webstore is frozen.
    pub fn request_redelivery(
        &self,
        webstore_id: &str,
        endpoint: &str,
        after: u64,
    ) -> Result<Written, StoreError> {
        let open = self.open_for_webstore(webstore_id)?;
        let mut entry = open.entry();
        let key = redelivery_key(webstore_id, endpoint);
        self.put(&mut entry, &key, after.to_be_bytes().to_vec())?;
        open.commit(entry)
    }

    /// Forgets a redelivery request, taken up by the endpoint's deliveries (not while the
    /// webstore is frozen).
    pub fn clear_redelivery(
        &self,
        webstore_id: &str,
        endpoint: &str,
    ) -> Result<Written, StoreError> {
        let open = self.open_for_webstore_even_if_refused(webstore_id)?;
        let mut entry = open.entry();
        self.remove_key(&mut entry, &redelivery_key(webstore_id, endpoint))?;
        open.commit(entry)
    }

    /// Where webhook endpoint `endpoint` of `webstore_id` stands, if it has delivered or
    /// failed anything yet.
    pub fn webhook_position(
        &self,
        webstore_id: &str,
        endpoint: &str,
    ) -> Result<Option<WebhookPosition>, StoreError> {
        let key = webhook_position_key(webstore_id, endpoint);
        self.inner
            .storage
            .get(&key)?
            .map(|bytes| decode(&bytes).map_err(|source| corrupt(&key, source)))
            .transpose()
    }

    /// The sequence number after which the operator asked endpoint `endpoint` of
    /// `webstore_id` to deliver again, if that request is not taken up yet.
    pub fn redelivery(&self, webstore_id: &str, endpoint: &str) -> Result<Option<u64>, StoreError> {
        Ok(self
            .inner
            .storage
            .get(&redelivery_key(webstore_id, endpoint))?
            .and_then(|value| trailing_id(&value)))
    }

    /// Calls `visit` with each webhook endpoint of `webstore_id` that has a webhook position,
    /// and that record, in endpoint order, until it returns false; the first that does not
    /// decode is an error naming its key.
    pub fn for_each_webhook_position(
        &self,
        webstore_id: &str,
        visit: &mut dyn FnMut(&str, WebhookPosition) -> bool,
    ) -> Result<(), StoreError> {
        self.for_each_of_endpoint(WEBHOOK_POSITION, webstore_id, decode, visit)
    }

    /// Calls `visit` with each webhook endpoint of `webstore_id` that has a redelivery asked
    /// and not yet taken up, and the sequence number to deliver after, in endpoint order,
    /// until it returns false; the first that does not decode is an error naming its key.
    pub fn for_each_redelivery(
        &self,
        webstore_id: &str,
        visit: &mut dyn FnMut(&str, u64) -> bool,
    ) -> Result<(), StoreError> {
        let after = |value: &[u8]| {
            trailing_id(value)
                .ok_or_else(|| CodecError::Payload("not a big-endian sequence number".into()))
        };
        self.for_each_of_endpoint(REDELIVERY, webstore_id, after, visit)
    }

    /// Calls `visit` with each endpoint id under `kind`'s keys of `webstore_id` and its value
    /// as `read` makes it, in endpoint order, until it returns false; the first key or value
    /// that does not decode is an error naming its key.
    fn for_each_of_endpoint<T>(
        &self,
        kind: u8,
        webstore_id: &str,
        read: impl Fn(&[u8]) -> Result<T, CodecError>,
        visit: &mut dyn FnMut(&str, T) -> bool,
    ) -> Result<(), StoreError> {
        let prefix = webstore_prefix(kind, webstore_id);
        let mut failure = None;
        self.inner.storage.for_each(&prefix, &mut |key, value| {
            let endpoint = std::str::from_utf8(&key[prefix.len()..])
                .map_err(|_| CodecError::Payload("the endpoint id in its key is not text".into()));
            match endpoint.and_then(|endpoint| Ok((endpoint, read(value)?))) {
                Ok((endpoint, found)) => visit(endpoint, found),
                Err(source) => {
                    failure = Some(corrupt(key, source));
                    false
                }
            }
        })?;
        failure.map_or(Ok(()), Err)
    }
}

/// Adds an imported webhook position to `batch`.
pub fn add_webhook_position(
    batch: &mut WriteBatch,
    webstore_id: &str,
    endpoint: &str,
    record: &WebhookPosition,
) {
    batch.put(webhook_position_key(webstore_id, endpoint), encode(record));
}
