//! The operator's hold on a webstore's webhook deliveries (through the admin listener):
//! where each endpoint stands, and redelivery from a cursor of the events feed, which also
//! enables a disabled endpoint. A redelivery is a durable request that the endpoint's own
//! deliveries take up (`crate::webhooks::endpoint`), so that one task alone writes where
//! the endpoint stands, and a failover between the request and its taking loses nothing.
//!
//! Must not touch: delivering (`crate::webhooks`), HTTP.

use serde::Serialize;

use super::{cursor_error, Service, ServiceError};
use crate::domain::event_feed;

/// Where one webhook endpoint of a webstore stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EndpointStatus {
    /// The endpoint's id.
    pub endpoint: String,
    /// Every event up to this sequence number has been delivered or was not wanted.
    pub delivered_through: u64,
    /// The feed's cursor at that position (what a redelivery from here takes).
    pub cursor: String,
    /// Why it is disabled, if it is.
    pub disabled: Option<String>,
    /// Failed attempts at the next event.
    pub attempts: u32,
    /// When the next attempt is due (Unix milliseconds; 0 for at once).
    pub next_attempt_ms: i64,
    /// A redelivery asked and not taken up yet: from after this sequence number.
    pub redelivery_after: Option<u64>,
}

/// Where a webstore's endpoints stand, with its latest durable event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WebhooksStatus {
    /// The webstore's id.
    pub webstore: String,
    /// The highest sequence number below which every event is durable.
    pub last_event: u64,
    /// Each endpoint of the catalogue.
    pub endpoints: Vec<EndpointStatus>,
}

impl Service {
    /// Where each webhook endpoint of webstore `id` stands.
    pub fn webhooks_status(&self, id: &str) -> Result<WebhooksStatus, ServiceError> {
        let webstore = self
            .catalogue
            .webstore_by_id(id)
            .filter(|_| self.serving.serves(id))
            .ok_or(ServiceError::NotFound)?;
        let store = self.registry.store();
        let mut endpoints = Vec::new();
        for webhook in &webstore.webhooks {
            let record = store.webhook_position(id, &webhook.id)?.unwrap_or_default();
            endpoints.push(EndpointStatus {
                endpoint: webhook.id.clone(),
                delivered_through: record.delivered_through,
                cursor: event_feed::cursor(id, record.delivered_through),
                disabled: record.disabled,
                attempts: record.attempts,
                next_attempt_ms: record.next_attempt_ms,
                redelivery_after: store.redelivery(id, &webhook.id)?,
            });
        }
        Ok(WebhooksStatus {
            webstore: id.to_owned(),
            last_event: self.events.sequencer(id)?.watermark(),
            endpoints,
        })
    }

    /// Asks endpoint `endpoint` of webstore `id` to deliver again the events after `cursor`
    /// (from the oldest kept without one), enabled if it was disabled; durable when this
    /// returns. The position it starts from. Refused ([`ServiceError::Moving`]) while the
    /// webstore is frozen for a move or moved away.
    pub async fn redeliver(
        &self,
        id: &str,
        endpoint: &str,
        cursor: Option<&str>,
    ) -> Result<u64, ServiceError> {
        let webstore = self
            .catalogue
            .webstore_by_id(id)
            .filter(|_| self.serving.serves(id))
            .ok_or(ServiceError::NotFound)?;
        if !webstore
            .webhooks
            .iter()
            .any(|webhook| webhook.id == endpoint)
        {
            return Err(ServiceError::NotFound);
        }
        // A write of the webstore like any other: a move's freeze waits for it, and refuses
        // it once frozen (its last round may have carried the endpoints' positions already).
        let _write = self
            .serving
            .begin_write(id)
            .map_err(|_| ServiceError::Moving)?;
        let store = self.registry.store();
        let pruned = store.events_pruned_through(id)?;
        let after = match cursor {
            None => pruned,
            Some(cursor) => {
                let after = event_feed::position(id, cursor).map_err(cursor_error)?;
                if after < pruned {
                    return Err(cursor_error(event_feed::CursorError::Expired {
                        oldest: pruned,
                    }));
                }
                after
            }
        };
        store
            .request_redelivery(id, endpoint, after)?
            .durable()
            .await?;
        Ok(after)
    }
}
