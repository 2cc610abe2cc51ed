//! The keyed write every change of a record takes (`Store::write_change`): a customer's or an
//! order's create, an order's change. In one log entry, in this order: the idempotency record
//! if the write carries a key (before what it names: a record of nothing is stale), the
//! change's event, then the kind's own writes; the change noted for a webstore's move; then
//! handed to the log, with what is to run once it is durable. Admission (closed, a disk that
//! refuses writes, a frozen webstore) and the log's largest entry are checked before anything
//! is written, so a refused write leaves nothing behind.
//!
//! Must not touch: what a kind writes (each kind's file hands its own writes in), HTTP.

use crate::store::entries::EventWrite;
use crate::store::kinds::idempotency::{IdempotencyPlan, IdempotencyWrite};
use crate::store::log::wal::LogEntry;
use crate::store::{OnDurable, OpenForWrite, Store, StoreError, Written};

/// What a change writes of its own (a customer's or an order's create, an order's update):
/// the size of its part of the log entry, and how to write it there once the idempotency
/// record and the event are in.
pub(crate) struct ChangeWrites<W> {
    /// The customer the change is of (an order's customer), for `tracking`.
    pub(crate) customer: u64,
    /// Its own writes' size in the log entry.
    pub(crate) bytes: usize,
    /// Its own writes.
    pub(crate) write: W,
}

impl Store {
    /// A keyed write (a customer's or an order's create, an order's change), made the same
    /// way for each: the webstore open for writes; the idempotency record planned (read
    /// before anything is written, so the change's size is known) and checked with the event
    /// and the kind's own writes against the log's largest entry; then written in that order
    /// (the idempotency record before what it names: see [`Store::put_idempotency`]); the
    /// change noted for a move (`tracking`, after the writes) and committed. `on_durable`
    /// runs once it is durable.
    pub(crate) fn write_change(
        &self,
        webstore_id: &str,
        idempotency: Option<IdempotencyWrite>,
        event: Option<EventWrite>,
        on_durable: OnDurable,
        own: ChangeWrites<
            impl FnOnce(&Store, &OpenForWrite<'_>, &mut LogEntry) -> Result<(), StoreError>,
        >,
    ) -> Result<Written, StoreError> {
        let open = self.open_for_webstore(webstore_id)?;
        let idempotency = self.plan_idempotency(idempotency)?;
        open.fits(
            own.bytes
                + event.as_ref().map_or(0, EventWrite::encoded_len)
                + idempotency.as_ref().map_or(0, IdempotencyPlan::encoded_len),
        )?;
        let mut entry = open.entry();
        let key = idempotency.as_ref().map(|plan| plan.name.clone());
        self.put_idempotency(&mut entry, idempotency)?;
        let sequence = self.put_event(&open, &mut entry, event)?;
        (own.write)(self, &open, &mut entry)?;
        // After the writes: see `tracking`.
        self.inner
            .tracking
            .note(webstore_id, Some(own.customer), key.as_deref(), sequence);
        open.commit_then(entry, on_durable)
    }
}
