//! A webstore's events: what each write of the API changed (`customer.created`,
//! `customer.updated`, `order.created`, `order.updated`), numbered per webstore and written **in the same log
//! entry as the change** (so in a group it travels in the changelog), then read by pollers
//! ([`feed`]) and delivered to webhooks (`crate::webhooks`).
//!
//! An event is stored compactly, as the record of what it tells of when the change was made
//! (the order, or the customer without its password hash), and rendered as JSON only when it
//! is read ([`json`]), with the API's own views (`crate::views`): its `data` is the resource
//! exactly as `GET` returned it then, and a write pays for no second rendering.
//!
//! - [`sequence`]: each webstore's numbering, and the watermark below which every event is
//!   durable (readers see nothing above it: read committed, and no event appears later
//!   below a position a reader has passed).
//! - [`feed`]: reading pages of events after a position, for `GET /v1/events` (the
//!   request and its cursor are parsed by the pure `crate::domain::event_feed`).
//! - [`json`]: an event as it is fed and delivered.
//! - [`ids`]: events' ids.
//!
//! Must not touch: HTTP (statuses are the front end's), deliveries (the webhooks'), how the
//! store writes the events (the change's writer puts them in its log entry).

pub mod feed;
pub mod ids;
pub mod json;
pub mod sequence;

use std::sync::Arc;

use dashmap::DashMap;

use crate::domain::account::delivery_mark::MarkedDelivery;
use crate::domain::account::payment::Payment;
use crate::domain::account::transaction::Transaction;
use crate::domain::catalogue::Webstore;
use crate::domain::customer::Customer;
use crate::domain::order::Order;
use crate::store::codec::CodecError;
use crate::store::kinds::accounts::AccountRecord;
use crate::store::kinds::customers::CustomerRecord;
use crate::store::kinds::events::{EventBody, EventRecord};
use crate::store::kinds::orders::OrderRecord;
use crate::store::{event_write, EventWrite, OnDurable, Store, StoreError, Written};
use crate::views::accounts::{MarkedDeliveryView, PaymentView, TransactionView};
use ids::EventIds;
use sequence::{InFlight, Sequencer};

pub use crate::domain::event_types::EventType;

/// An event numbered and built: `write` goes into its change's log entry; `in_flight` is
/// held until the change is durable (or given up), and keeps readers below its number
/// meanwhile.
pub struct NewEvent {
    /// What the store writes.
    pub write: EventWrite,
    /// Dropped once the change is durable or given up.
    pub in_flight: InFlight,
}

impl NewEvent {
    /// Writes the event with its change: `write` is given the event's write and what runs
    /// once the change is durable (made by `on_durable` from the event's mark, which it must
    /// settle then). A write the store refused before holding any of it settles the event's
    /// number at once, so readers do not wait for an event that will never be.
    pub fn written_with(
        self,
        on_durable: impl FnOnce(InFlight) -> OnDurable,
        write: impl FnOnce(EventWrite, OnDurable) -> Result<Written, StoreError>,
    ) -> Result<Written, StoreError> {
        let if_refused = self.in_flight.if_refused();
        write(self.write, on_durable(self.in_flight)).inspect_err(|error| {
            if error.wrote_nothing() {
                if_refused.refused();
            }
        })
    }

    /// [`NewEvent::written_with`] for a change with nothing else to do once durable.
    pub fn written(
        self,
        write: impl FnOnce(EventWrite, OnDurable) -> Result<Written, StoreError>,
    ) -> Result<Written, StoreError> {
        self.written_with(|in_flight| Box::new(move || in_flight.durable()), write)
    }

    /// [`NewEvent::written`] for a change told by two events in its one log entry (a
    /// posting that also halts its customer, or ends the halt): `self` first, `then` after
    /// it; both settle once the change is durable, or at once if the store refused it.
    pub fn written_before(
        self,
        then: NewEvent,
        write: impl FnOnce(EventWrite, EventWrite, OnDurable) -> Result<Written, StoreError>,
    ) -> Result<Written, StoreError> {
        self.written(|first, first_durable| {
            then.written_with(
                move |in_flight| {
                    Box::new(move || {
                        first_durable();
                        in_flight.durable();
                    })
                },
                |second, on_durable| write(first, second, on_durable),
            )
        })
    }
}

/// The events of every webstore this node serves.
pub struct Events {
    store: Store,
    ids: EventIds,
    sequences: DashMap<String, Arc<Sequencer>>,
}

impl Events {
    /// Events written into `store`.
    pub fn new(store: Store) -> Events {
        Events {
            store,
            ids: EventIds::new(),
            sequences: DashMap::new(),
        }
    }

    /// The `customer.created` event of `customer`.
    pub fn customer_created(
        &self,
        webstore: &Webstore,
        customer: &Customer,
    ) -> Result<NewEvent, StoreError> {
        self.numbered(webstore, EventType::CustomerCreated, |id| {
            customer_body(id, webstore, customer)
        })
    }

    /// The `customer.updated` event of `customer` as it is now.
    pub fn customer_updated(
        &self,
        webstore: &Webstore,
        customer: &Customer,
    ) -> Result<NewEvent, StoreError> {
        self.numbered(webstore, EventType::CustomerUpdated, |id| {
            customer_body(id, webstore, customer)
        })
    }

    /// The `order.created` event of `order`.
    pub fn order_created(
        &self,
        webstore: &Webstore,
        order: &Order,
    ) -> Result<NewEvent, StoreError> {
        self.numbered(webstore, EventType::OrderCreated, |id| EventBody::Order {
            id,
            order: OrderRecord::from_order(order),
        })
    }

    /// The `order.updated` event of `order` as it is after its change.
    pub fn order_updated(
        &self,
        webstore: &Webstore,
        order: &Order,
    ) -> Result<NewEvent, StoreError> {
        self.numbered(webstore, EventType::OrderUpdated, |id| EventBody::Order {
            id,
            order: OrderRecord::from_order(order),
        })
    }

    /// The `payment.created` event of `payment`, or `payment.reversed` once it is reversed.
    pub fn payment_event(
        &self,
        webstore: &Webstore,
        payment: &Payment,
    ) -> Result<NewEvent, StoreError> {
        let kind = if payment.reversed() {
            EventType::PaymentReversed
        } else {
            EventType::PaymentCreated
        };
        self.as_json(webstore, kind, &PaymentView::new(payment))
    }

    /// The `transaction.created` event of `transaction` (an adjustment's).
    pub fn transaction_created(
        &self,
        webstore: &Webstore,
        transaction: &Transaction,
    ) -> Result<NewEvent, StoreError> {
        self.as_json(
            webstore,
            EventType::TransactionCreated,
            &TransactionView::new(transaction),
        )
    }

    /// The `delivery.updated` event of a frozen delivery marked delivered or not (with the
    /// charge or reversal it posted).
    pub fn delivery_updated(
        &self,
        webstore: &Webstore,
        delivery: &MarkedDelivery,
    ) -> Result<NewEvent, StoreError> {
        self.as_json(
            webstore,
            EventType::DeliveryUpdated,
            &MarkedDeliveryView::new(delivery),
        )
    }

    /// An event stored as its JSON, `data` rendered now: a money write's resource has no
    /// record of its own to render it from later.
    fn as_json(
        &self,
        webstore: &Webstore,
        kind: EventType,
        data: &impl serde::Serialize,
    ) -> Result<NewEvent, StoreError> {
        let damaged = |source| StoreError::Corrupt {
            key: format!("a {} event", kind.name()),
            source,
        };
        let data = crate::views::render(data)
            .map_err(|error| damaged(CodecError::Payload(error.to_string())))?;
        self.numbered_with(webstore, kind, |id, sequence, created_at_ms| {
            json::wrap(&id, kind.name(), sequence, created_at_ms, &data)
                .map(EventBody::Json)
                .map_err(damaged)
        })
    }

    fn numbered(
        &self,
        webstore: &Webstore,
        kind: EventType,
        body: impl FnOnce([u8; 16]) -> EventBody,
    ) -> Result<NewEvent, StoreError> {
        self.numbered_with(webstore, kind, |id, _, _| Ok(body(id)))
    }

    /// An event of `kind` numbered next in its webstore, its body made from its id, number
    /// and time.
    fn numbered_with(
        &self,
        webstore: &Webstore,
        kind: EventType,
        body: impl FnOnce([u8; 16], u64, i64) -> Result<EventBody, StoreError>,
    ) -> Result<NewEvent, StoreError> {
        let webstore_id = &webstore.settings.id;
        let in_flight = self.sequencer(webstore_id)?.allocate();
        let created_at_ms = jiff::Timestamp::now().as_millisecond();
        let write = body(self.ids.next(), in_flight.sequence(), created_at_ms).and_then(|body| {
            event_write(
                webstore_id,
                in_flight.sequence(),
                &EventRecord {
                    event_type: kind.name().to_owned(),
                    created_at_ms,
                    body,
                },
            )
        });
        match write {
            Ok(write) => Ok(NewEvent { write, in_flight }),
            // Too large to store, or not made: nothing was written, and its number settles
            // at once.
            Err(error) => {
                let if_refused = in_flight.if_refused();
                drop(in_flight);
                if_refused.refused();
                Err(error)
            }
        }
    }

    /// The numbering of `webstore_id`'s events, continuing from the store's last at first
    /// use.
    pub fn sequencer(&self, webstore_id: &str) -> Result<Arc<Sequencer>, StoreError> {
        if let Some(sequencer) = self.sequences.get(webstore_id) {
            return Ok(sequencer.clone());
        }
        // Past the numbers a crash may have lost, shown before their writes were synced.
        let last = self.store.last_event_sequence(webstore_id)? + self.store.lost_answers();
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
    ) -> Result<Result<feed::Page, crate::domain::event_feed::CursorError>, StoreError> {
        let watermark = self.sequencer(webstore_id)?.watermark();
        feed::page(&self.store, webstore_id, after, watermark, types, limit)
    }

    /// The store the events are in.
    pub fn store(&self) -> &Store {
        &self.store
    }
}

/// A customer's event body: the customer as stored, without its password hash, and its
/// webstore's name now.
fn customer_body(id: [u8; 16], webstore: &Webstore, customer: &Customer) -> EventBody {
    let mut record = CustomerRecord::from_customer(customer, &webstore.settings.id);
    record.password_hash = None;
    EventBody::Customer {
        id,
        customer: record,
        webstore_name: webstore.settings.name.clone(),
        account: Some(Box::new(AccountRecord::from_account(
            &customer.account,
            &webstore.settings.id,
        ))),
    }
}
