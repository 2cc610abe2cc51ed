//! Webhook positions as exported, version 2 on: [`WebhookPositionLine`], where each webhook
//! endpoint of a webstore stands, with the webstore and endpoint the stored record has in
//! its key; its lines keep the type `delivery` (see [`Line`](super::Line)). Must not touch:
//! the store but its record, files, the other kinds' lines.

use serde::{Deserialize, Serialize};

use super::BadLine;
use crate::store::kinds::webhook_positions::WebhookPosition;

/// Where a webhook endpoint of a webstore stands, as exported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookPositionLine {
    /// Its webstore.
    pub webstore_id: String,
    /// The endpoint's id in the catalogue.
    pub endpoint: String,
    /// Every event up to this sequence number has been delivered (or was not wanted).
    pub delivered_through: u64,
    /// Why the endpoint was disabled, if it is.
    pub disabled: Option<String>,
    /// Failed attempts at the event after `delivered_through`.
    pub attempts: u32,
    /// When the first of those attempts failed (Unix milliseconds; 0 when none has).
    pub failing_since_ms: i64,
    /// When the next attempt is due (Unix milliseconds; 0 for at once).
    pub next_attempt_ms: i64,
}

impl WebhookPositionLine {
    /// The line of endpoint `endpoint` of `webstore_id`'s stored webhook position.
    pub fn from_record(webstore_id: &str, endpoint: &str, record: WebhookPosition) -> Self {
        WebhookPositionLine {
            webstore_id: webstore_id.to_owned(),
            endpoint: endpoint.to_owned(),
            delivered_through: record.delivered_through,
            disabled: record.disabled,
            attempts: record.attempts,
            failing_since_ms: record.failing_since_ms,
            next_attempt_ms: record.next_attempt_ms,
        }
    }

    /// The record to store.
    pub fn into_record(self) -> Result<WebhookPosition, BadLine> {
        if self.webstore_id.is_empty() || self.endpoint.is_empty() {
            return Err(BadLine(format!(
                "delivery of endpoint {:?}: the webstore_id and endpoint must be set",
                self.endpoint
            )));
        }
        Ok(WebhookPosition {
            delivered_through: self.delivered_through,
            disabled: self.disabled,
            attempts: self.attempts,
            failing_since_ms: self.failing_since_ms,
            next_attempt_ms: self.next_attempt_ms,
        })
    }
}
