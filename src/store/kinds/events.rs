//! Events: each webstore's `v` records by sequence number (`EventRecord`, format version 5,
//! with the reading of versions 1 to 4; their keys and the chunks the pending layer packs
//! them into are `store::pending::event_chunks`', named from there), and the `m
//! events-pruned/` mark of how far the retention sweep removed them; their part of `impl
//! Store`: the event a change writes in its own log entry (made here, encoded, by
//! [`event_write`]; the kinds that write one put it without knowing what it holds), the
//! retention sweep, the reads in order, and the batch builders imports use.
//!
//! Stored and exported: the record keeps what an event tells of compactly (the order's or
//! the customer's record and account as the change left them, and the event's id) and is rendered as JSON
//! only when read (`crate::events::json`); its export line (`transfer::format::EventLine`)
//! carries that JSON as text, byte for byte, which an import keeps as it is
//! (`EventBody::Json`): an event's id and body must stay the ones already given out.
//!
//! Must not touch: rendering an event (the events layer's), the log itself (its writes
//! go into the change's `LogEntry`, which the store's entries hand to the log), HTTP.

use serde::{Deserialize, Serialize};

use super::accounts::AccountRecord;
use super::customers::{CustomerRecord, CustomerRecordV1};
use super::orders::{OrderRecord, OrderRecordV2, OrderRecordV3};
use crate::store::codec::{decode, decode_payload, encode, CodecError, Kind, Record};
use crate::store::entries::EventWrite;
use crate::store::error::{corrupt, readable};
use crate::store::keys::{trailing_id, webstore_prefix};
use crate::store::log::wal::LogEntry;
use crate::store::pending::event_chunks::{self, event_key};
use crate::store::{Store, StoreError, WriteBatch};

/// The highest sequence number of a webstore's events the retention sweep removed.
pub const EVENTS_PRUNED: &[u8] = b"mevents-pruned/";

/// `m events-pruned/` + webstore id: the highest sequence number of its events removed by
/// the retention sweep (`u64`, big-endian).
pub fn events_pruned(webstore: &str) -> Vec<u8> {
    let mut key = EVENTS_PRUNED.to_vec();
    key.extend_from_slice(webstore.as_bytes());
    key
}

/// One event of a webstore (see `crate::events`): its type and time apart, so that a feed
/// filters and a retention sweep ages events without reading the rest, and what it tells
/// of, compactly (format version 4; versions 2 and 3 held the order and customer records of
/// their formats then): rendered as JSON only when it is read (`crate::events::json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventRecord {
    /// `customer.created`, `customer.updated`, `order.created`.
    pub event_type: String,
    /// Unix milliseconds when its change was made.
    pub created_at_ms: i64,
    /// What it tells of.
    pub body: EventBody,
}

/// What an event holds besides its type and time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum EventBody {
    /// The whole event as JSON (id, type, sequence, created_at, data), exactly as it is
    /// delivered: events written by format version 1, and events imported (an export carries
    /// events as their JSON, which an import keeps byte for byte).
    Json(Vec<u8>),
    /// An order's event: its id and the order as stored when the change was made.
    Order {
        /// The event's id (`evt_` and these bytes in hex).
        id: [u8; 16],
        /// The order.
        order: OrderRecord,
    },
    /// A customer's event: its id, the customer as stored when the change was made (without
    /// its password hash, which an event never shows) and its webstore's name then.
    Customer {
        /// The event's id (`evt_` and these bytes in hex).
        id: [u8; 16],
        /// The customer, `password_hash` always `None`.
        customer: CustomerRecord,
        /// The webstore's name in the catalogue then (the customer's JSON shows it).
        webstore_name: String,
        /// Its account then (`account_balance`, `discount`, `halted?` by balance), if it
        /// had one (format version 5 on).
        account: Option<Box<AccountRecord>>,
    },
}

/// An event as format version 4 stored it: as version 5, a customer's without its account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct EventRecordV4 {
    event_type: String,
    created_at_ms: i64,
    body: EventBodyV4,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
enum EventBodyV4 {
    Json(Vec<u8>),
    Order {
        id: [u8; 16],
        order: OrderRecord,
    },
    Customer {
        id: [u8; 16],
        customer: CustomerRecord,
        webstore_name: String,
    },
}

impl EventRecordV4 {
    fn upgrade(self) -> EventRecord {
        EventRecord {
            event_type: self.event_type,
            created_at_ms: self.created_at_ms,
            body: match self.body {
                EventBodyV4::Json(json) => EventBody::Json(json),
                EventBodyV4::Order { id, order } => EventBody::Order { id, order },
                EventBodyV4::Customer {
                    id,
                    customer,
                    webstore_name,
                } => EventBody::Customer {
                    id,
                    customer,
                    webstore_name,
                    account: None,
                },
            },
        }
    }
}

/// An event as format version 1 stored it: the whole event as JSON, rendered when written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct EventRecordV1 {
    event_type: String,
    created_at_ms: i64,
    json: Vec<u8>,
}

impl EventRecordV1 {
    fn upgrade(self) -> EventRecord {
        EventRecord {
            event_type: self.event_type,
            created_at_ms: self.created_at_ms,
            body: EventBody::Json(self.json),
        }
    }
}

/// An event as format version 3 stored it: as version 4 (so as version 5 without accounts), with the order record of its format
/// then (its latest content at the top).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct EventRecordV3 {
    event_type: String,
    created_at_ms: i64,
    body: EventBodyV3,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
enum EventBodyV3 {
    Json(Vec<u8>),
    Order {
        id: [u8; 16],
        order: OrderRecordV3,
    },
    Customer {
        id: [u8; 16],
        customer: CustomerRecord,
        webstore_name: String,
    },
}

impl EventRecordV3 {
    fn upgrade(self) -> EventRecord {
        EventRecord {
            event_type: self.event_type,
            created_at_ms: self.created_at_ms,
            body: match self.body {
                EventBodyV3::Json(json) => EventBody::Json(json),
                EventBodyV3::Order { id, order } => EventBody::Order {
                    id,
                    order: order.upgrade(),
                },
                EventBodyV3::Customer {
                    id,
                    customer,
                    webstore_name,
                } => EventBody::Customer {
                    id,
                    customer,
                    webstore_name,
                    account: None,
                },
            },
        }
    }
}

/// An event as format version 2 stored it: as version 3, with the order and customer
/// records of their formats before orders had histories and customers halts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct EventRecordV2 {
    event_type: String,
    created_at_ms: i64,
    body: EventBodyV2,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
enum EventBodyV2 {
    Json(Vec<u8>),
    Order {
        id: [u8; 16],
        order: OrderRecordV2,
    },
    Customer {
        id: [u8; 16],
        customer: CustomerRecordV1,
        webstore_name: String,
    },
}

impl EventRecordV2 {
    fn upgrade(self) -> EventRecord {
        EventRecord {
            event_type: self.event_type,
            created_at_ms: self.created_at_ms,
            body: match self.body {
                EventBodyV2::Json(json) => EventBody::Json(json),
                EventBodyV2::Order { id, order } => EventBody::Order {
                    id,
                    order: order.upgrade(),
                },
                EventBodyV2::Customer {
                    id,
                    customer,
                    webstore_name,
                } => EventBody::Customer {
                    id,
                    customer: customer.upgrade(),
                    webstore_name,
                    account: None,
                },
            },
        }
    }
}

impl Record for EventRecord {
    const KIND: Kind = Kind::Event;
    const VERSION: u16 = 5;
    fn decode_older(version: u16, payload: &[u8]) -> Result<Self, CodecError> {
        match version {
            1 => decode_payload::<EventRecordV1>(payload).map(EventRecordV1::upgrade),
            2 => decode_payload::<EventRecordV2>(payload).map(EventRecordV2::upgrade),
            3 => decode_payload::<EventRecordV3>(payload).map(EventRecordV3::upgrade),
            4 => decode_payload::<EventRecordV4>(payload).map(EventRecordV4::upgrade),
            other => Err(CodecError::UnsupportedVersion(other)),
        }
    }
}

/// `record`, the event of sequence number `sequence` in `webstore_id`, encoded to be written
/// with the change it tells of.
pub fn event_write(
    webstore_id: &str,
    sequence: u64,
    record: &EventRecord,
) -> Result<EventWrite, StoreError> {
    Ok(EventWrite::new(
        sequence,
        event_key(webstore_id, sequence),
        readable("event", record)?,
    ))
}

impl Store {
    /// Removes `webstore_id`'s oldest events made before `before_ms` (Unix milliseconds), at
    /// most `max` of them and no more than fit the log's largest change (a replicated
    /// changelog's message), in one logged change with the record of how far they go (even
    /// while the disk refuses writes: it gives space back; not while the webstore is
    /// frozen). How many it removed: fewer than `max` when the rest do not fit, so a caller
    /// goes on until it removes none.
    pub fn prune_events(
        &self,
        webstore_id: &str,
        before_ms: i64,
        max: usize,
    ) -> Result<usize, StoreError> {
        let pruned = self.events_pruned_through(webstore_id)?;
        let marker_key = events_pruned(webstore_id);
        let max_bytes = self.max_entry_bytes().unwrap_or(usize::MAX);
        let mut bytes = LogEntry::encoded_len(&marker_key, &u64::MAX.to_be_bytes());
        let mut doomed = Vec::new();
        let mut through = pruned;
        // An event that does not decode is removed with the events around it, once those
        // before it are old enough: nothing could feed it, and the sweep must not stop there.
        self.for_each_event_passing_over(
            webstore_id,
            pruned,
            u64::MAX,
            &mut |sequence, record| {
                if record.is_some_and(|record| record.created_at_ms >= before_ms) {
                    return false;
                }
                let key = event_key(webstore_id, sequence);
                let size = LogEntry::encoded_len(&key, &[]);
                if bytes + size > max_bytes {
                    return false;
                }
                bytes += size;
                doomed.push(key);
                through = sequence;
                doomed.len() < max
            },
        )?;
        if doomed.is_empty() {
            return Ok(0);
        }
        let open = self.open_for_webstore_even_if_refused(webstore_id)?;
        let mut entry = open.entry();
        let mut batch = WriteBatch::default();
        for key in &doomed {
            entry.remove(key);
            batch.delete(key.clone());
        }
        let marker = through.to_be_bytes().to_vec();
        entry.set(&marker_key, &marker);
        batch.put(marker_key, marker);
        open.fits(entry.len())?;
        self.written(self.inner.storage.apply(batch))?;
        drop(open.commit(entry)?);
        Ok(doomed.len())
    }

    /// The highest sequence number of `webstore_id`'s events the store holds or has pruned
    /// (0 for none): where their numbering continues.
    pub fn last_event_sequence(&self, webstore_id: &str) -> Result<u64, StoreError> {
        let stored = event_chunks::last_stored_event(
            &*self.inner.storage,
            &webstore_prefix(event_chunks::EVENT, webstore_id),
        )?;
        Ok(stored.max(self.events_pruned_through(webstore_id)?))
    }

    /// The highest sequence number of `webstore_id`'s events the retention sweep removed.
    pub fn events_pruned_through(&self, webstore_id: &str) -> Result<u64, StoreError> {
        Ok(self
            .inner
            .storage
            .get(&events_pruned(webstore_id))?
            .and_then(|value| trailing_id(&value))
            .unwrap_or(0))
    }

    /// Calls `visit` with each of `webstore_id`'s events after sequence number `after` and up
    /// to `through`, in order, each once, until it returns false; the first that does not
    /// decode is an error naming its key.
    ///
    /// The events are read 128 sequence numbers at a time (`event_chunks`): a range read
    /// copies the waiting puts it covers first (see `pending`), and a reader that wants the
    /// next event or a page of them (a webhook endpoint, the feed) from far behind must not
    /// copy all of a flood's waiting events for each one. `u64::MAX` reads to the last event
    /// (exports and sweeps, which read them all).
    pub fn for_each_event(
        &self,
        webstore_id: &str,
        after: u64,
        through: u64,
        visit: &mut dyn FnMut(u64, EventRecord) -> bool,
    ) -> Result<(), StoreError> {
        let group = webstore_prefix(event_chunks::EVENT, webstore_id);
        let mut failure = None;
        event_chunks::for_each_stored_event(
            &*self.inner.storage,
            &group,
            after,
            through,
            &mut |sequence, key, record| match decode::<EventRecord>(record) {
                Ok(record) => visit(sequence, record),
                Err(source) => {
                    failure = Some(corrupt(key, source));
                    false
                }
            },
        )?;
        failure.map_or(Ok(()), Err)
    }

    /// [`Store::for_each_event`] passing over an event that does not decode: it is noted
    /// ([`crate::store::unreadable`]) and handed to `visit` as `None`, and the walk goes on,
    /// so that one damaged event harms only itself (the feed, the webhooks, the retention
    /// sweep).
    pub fn for_each_event_passing_over(
        &self,
        webstore_id: &str,
        after: u64,
        through: u64,
        visit: &mut dyn FnMut(u64, Option<EventRecord>) -> bool,
    ) -> Result<(), StoreError> {
        let group = webstore_prefix(event_chunks::EVENT, webstore_id);
        event_chunks::for_each_stored_event(
            &*self.inner.storage,
            &group,
            after,
            through,
            &mut |sequence, key, record| match decode::<EventRecord>(record) {
                Ok(record) => visit(sequence, Some(record)),
                Err(source) => {
                    drop(self.inner.unreadable.note(corrupt(key, source)));
                    visit(sequence, None)
                }
            },
        )
    }
}

/// Adds an imported event to `batch`.
pub fn add_event_record(
    batch: &mut WriteBatch,
    webstore_id: &str,
    sequence: u64,
    record: &EventRecord,
) {
    batch.put(event_key(webstore_id, sequence), encode(record));
}

/// Adds an imported events-pruned mark to `batch`: `webstore_id`'s events up to sequence
/// number `through` were removed past the retention (see [`Store::events_pruned_through`]).
pub fn add_events_pruned(batch: &mut WriteBatch, webstore_id: &str, through: u64) {
    batch.put(events_pruned(webstore_id), through.to_be_bytes().to_vec());
}
