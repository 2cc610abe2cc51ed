//! A webstore's events: what each write of the API changed (`customer.created`,
//! `customer.updated`, `order.created`), numbered per webstore and written **in the same log
//! entry as the change** (so in a group it travels in the changelog), then read by pollers
//! ([`feed`]) and delivered to webhooks (`crate::webhooks`).
//!
//! An event's `data` is the resource exactly as `GET` returns it when the change is made,
//! rendered by the front end's own views ([`EventViews`], which the HTTP layer implements),
//! so the two never drift.
//!
//! - [`sequence`]: each webstore's numbering, and the watermark below which every event is
//!   durable (readers see nothing above it: read committed, and no event appears later
//!   below a position a reader has passed).
//! - [`feed`]: pages of events after an opaque cursor, for `GET /v1/events`.
//!
//! Must not touch: HTTP (statuses are the front end's), deliveries (the webhooks'), how the
//! store writes the events (the change's writer puts them in its log entry).

pub mod feed;
pub mod sequence;

use std::sync::Arc;

use dashmap::DashMap;

use crate::domain::catalogue::Webstore;
use crate::domain::customer::Customer;
use crate::domain::order::Order;
use crate::store::codec::EventRecord;
use crate::store::{EventWrite, Store, StoreError};
use sequence::{InFlight, Sequencer};

pub use crate::domain::event_types::EventType;

/// The resources as `GET` renders them: implemented by the front end, so that an event's
/// `data` is exactly what a read of the resource answers.
pub trait EventViews: Send + Sync {
    /// A customer as JSON, as `GET /v1/customers/{id}?embed=address` answers it.
    fn customer(&self, customer: &Customer, webstore: &Webstore) -> Vec<u8>;
    /// An order as JSON, as `GET /v1/orders/{id}` answers it.
    fn order(&self, order: &Order) -> Vec<u8>;
}

/// An event numbered and built: `write` goes into its change's log entry; `in_flight` is
/// held until the change is durable (or given up), and keeps readers below its number
/// meanwhile.
pub struct NewEvent {
    /// What the store writes.
    pub write: EventWrite,
    /// Dropped once the change is durable or given up.
    pub in_flight: InFlight,
}

/// The events of every webstore this node serves.
pub struct Events {
    store: Store,
    views: Arc<dyn EventViews>,
    sequences: DashMap<String, Arc<Sequencer>>,
}

impl Events {
    /// Events written into `store`, their data rendered by `views`.
    pub fn new(store: Store, views: Arc<dyn EventViews>) -> Events {
        Events {
            store,
            views,
            sequences: DashMap::new(),
        }
    }

    /// The `customer.created` event of `customer`.
    pub fn customer_created(
        &self,
        webstore: &Webstore,
        customer: &Customer,
    ) -> Result<NewEvent, StoreError> {
        let data = self.views.customer(customer, webstore);
        self.numbered(webstore, EventType::CustomerCreated, data)
    }

    /// The `customer.updated` event of `customer` as it is now.
    pub fn customer_updated(
        &self,
        webstore: &Webstore,
        customer: &Customer,
    ) -> Result<NewEvent, StoreError> {
        let data = self.views.customer(customer, webstore);
        self.numbered(webstore, EventType::CustomerUpdated, data)
    }

    /// The `order.created` event of `order`.
    pub fn order_created(
        &self,
        webstore: &Webstore,
        order: &Order,
    ) -> Result<NewEvent, StoreError> {
        let data = self.views.order(order);
        self.numbered(webstore, EventType::OrderCreated, data)
    }

    fn numbered(
        &self,
        webstore: &Webstore,
        kind: EventType,
        data: Vec<u8>,
    ) -> Result<NewEvent, StoreError> {
        let webstore_id = &webstore.settings.id;
        let in_flight = self.sequencer(webstore_id)?.allocate();
        let sequence = in_flight.sequence();
        let now = jiff::Timestamp::now();
        let json = event_json(&event_id(), kind, sequence, now, &data);
        Ok(NewEvent {
            write: EventWrite {
                webstore_id: webstore_id.clone(),
                sequence,
                record: EventRecord {
                    event_type: kind.name().to_owned(),
                    created_at_ms: now.as_millisecond(),
                    json,
                },
            },
            in_flight,
        })
    }

    /// The numbering of `webstore_id`'s events, continuing from the store's last at first
    /// use.
    pub fn sequencer(&self, webstore_id: &str) -> Result<Arc<Sequencer>, StoreError> {
        if let Some(sequencer) = self.sequences.get(webstore_id) {
            return Ok(sequencer.clone());
        }
        let last = self.store.last_event_sequence(webstore_id)?;
        Ok(self
            .sequences
            .entry(webstore_id.to_owned())
            .or_insert_with(|| Arc::new(Sequencer::after(last)))
            .clone())
    }

    /// Forgets `webstore_id`'s numbering (its events were just written here by a move):
    /// the next use reads it afresh from the store.
    pub fn forget(&self, webstore_id: &str) {
        self.sequences.remove(webstore_id);
    }

    /// A page of `webstore_id`'s events after position `after` (see [`feed::page`]), up to
    /// its watermark.
    pub fn page(
        &self,
        webstore_id: &str,
        after: Option<u64>,
        types: &[EventType],
        limit: usize,
    ) -> Result<Result<feed::Page, feed::CursorError>, StoreError> {
        let watermark = self.sequencer(webstore_id)?.watermark();
        feed::page(&self.store, webstore_id, after, watermark, types, limit)
    }

    /// The store the events are in.
    pub fn store(&self) -> &Store {
        &self.store
    }
}

/// An event as delivered and fed: its fields are written by hand around `data`, already
/// JSON, rather than parsed back into a value and rendered again on every write.
fn event_json(
    id: &str,
    kind: EventType,
    sequence: u64,
    at: jiff::Timestamp,
    data: &[u8],
) -> Vec<u8> {
    use std::io::Write;
    let mut json = Vec::with_capacity(data.len() + 128);
    // Every field but `data` is ASCII with nothing to escape: a hex id, a fixed type name,
    // a number and a timestamp.
    let _ = write!(
        json,
        r#"{{"id":"{id}","type":"{}","sequence":{sequence},"created_at":"{}","data":"#,
        kind.name(),
        at.strftime("%Y-%m-%dT%H:%M:%S%.3fZ"),
    );
    json.extend_from_slice(data);
    json.push(b'}');
    json
}

/// A new event's id: `evt_` and 16 random bytes in hex, unique across webstores, nodes and
/// moves.
fn event_id() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::getrandom(&mut bytes).is_err() {
        // Without randomness, the clock still tells events apart.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos());
        bytes = nanos.to_be_bytes();
    }
    format!("evt_{}", hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_json_around_its_data() {
        let at = jiff::Timestamp::from_millisecond(1_700_000_000_123).unwrap();
        let json = event_json(
            "evt_1",
            EventType::OrderCreated,
            7,
            at,
            br#"{"id":3,"n":"\u00e9"}"#,
        );
        let value: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(
            value,
            serde_json::json!({
                "id": "evt_1",
                "type": "order.created",
                "sequence": 7,
                "created_at": "2023-11-14T22:13:20.123Z",
                "data": {"id": 3, "n": "\u{e9}"},
            })
        );
    }

    #[test]
    fn event_ids_are_unique() {
        let ids: std::collections::BTreeSet<String> = (0..1000).map(|_| event_id()).collect();
        assert_eq!(ids.len(), 1000);
        assert!(ids
            .iter()
            .all(|id| id.starts_with("evt_") && id.len() == 36));
    }
}
