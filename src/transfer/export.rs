//! Writing a store (or one webstore of it) as the export format. It reads a live store as
//! well as a stopped one: it goes through customers, then orders, then idempotency records,
//! and leaves out what was written meanwhile and would stand without its parent (an order
//! whose customer came after the customers were read, an idempotency record whose record
//! did), so an export is always whole. Every record stored before it began is in it. Then,
//! webstore by webstore, its events (each stands alone: its JSON holds the resource as it
//! was), how far the retention sweep removed them, read after the events so that it covers
//! any the sweep removed meanwhile, its webhook endpoints' positions (where the
//! operator asked a redelivery not yet taken up, the record it will make: the request does
//! not stay behind) and its producers' sessions.
//!
//! [`export_changed`] writes, in the same format, only what a webstore's writes changed
//! since a move's last round ([`crate::store::tracking`]): each changed customer with all its
//! orders, each idempotency record and each event written; and, every round, the webstore's
//! events-pruned mark and all its webhook positions (the webhooks' deliveries are not tracked,
//! and these are few and small, so a round always carries the latest). The target
//! overwrites what it holds of them.
//!
//! Must not touch: anything but reading the store.

use std::collections::BTreeMap;
use std::io::Write;

use super::format::{
    to_text, AccountLine, CustomerLine, EventLine, EventsPrunedLine, FrozenDayLine,
    FrozenDeliveryLine, FrozenThroughLine, IdempotencyLine, Line, OrderLine, PaymentLine,
    SessionLine, TransactionLine, WebhookPositionLine, FORMAT, VERSION,
};
use super::{Progress, TransferError};
use crate::domain::idempotency::Resource;
use crate::domain::ids::CustomerId;
use crate::store::kinds::events::EventRecord;
use crate::store::kinds::webhook_positions::WebhookPosition;
use crate::store::tracking::Changed;
use crate::store::{Store, StoreError};

/// What an export wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Exported {
    /// Customers.
    pub customers: u64,
    /// Orders.
    pub orders: u64,
    /// Idempotency records.
    pub idempotency_records: u64,
    /// Events.
    pub events: u64,
    /// Webhook endpoints' positions.
    pub webhook_positions: u64,
    /// Producers' sessions in the web app.
    pub sessions: u64,
    /// Frozen deliveries and frozen dates.
    pub frozen_deliveries: u64,
    /// Customers' accounts, their transactions and payments.
    pub account_records: u64,
    /// Orders and idempotency records written while the export ran, left out because what
    /// they belong to was read before they were.
    pub left_out: u64,
}

/// Writes the export of `store` (only `webstore`'s records, if given) to `out`.
pub fn export(
    store: &Store,
    webstore: Option<&str>,
    out: &mut dyn Write,
    progress: &mut Progress,
) -> Result<Exported, TransferError> {
    let mut exported = Exported::default();
    let mut failed = None;
    let write = |line: &Line, out: &mut dyn Write| {
        let mut text = to_text(line);
        text.push(b'\n');
        out.write_all(&text)
    };
    write(
        &Line::Header {
            format: FORMAT.to_owned(),
            version: VERSION,
            webstore: webstore.map(str::to_owned),
        },
        out,
    )
    .map_err(TransferError::write)?;

    // Customers come in id order, so the ids kept are sorted.
    let mut customers: Vec<u64> = Vec::new();
    store.for_each_customer(&mut |record| {
        if webstore.is_some_and(|only| only != record.webstore_id) {
            return true;
        }
        customers.push(record.id);
        let line = Line::Customer(CustomerLine::from_record(record));
        if let Err(error) = write(&line, out) {
            failed = Some(error);
            return false;
        }
        exported.customers += 1;
        progress.step("customers", exported.customers);
        true
    })?;
    if let Some(error) = failed.take() {
        return Err(TransferError::write(error));
    }

    let mut orders: Vec<u64> = Vec::new();
    store.for_each_order(&mut |record| {
        if customers.binary_search(&record.customer_id).is_err() {
            // Another webstore's, or written after its customer was read.
            if webstore.is_none() {
                exported.left_out += 1;
            }
            return true;
        }
        orders.push(record.id);
        let line = Line::Order(OrderLine::from_record(record));
        if let Err(error) = write(&line, out) {
            failed = Some(error);
            return false;
        }
        exported.orders += 1;
        progress.step("orders", exported.orders);
        true
    })?;
    if let Some(error) = failed.take() {
        return Err(TransferError::write(error));
    }
    orders.sort_unstable();
    exported.account_records += accounts(store, &customers, &mut |line| {
        write(line, out).map_err(TransferError::write)
    })?;

    store.for_each_idempotency(&mut |webstore_id, key, record| {
        if webstore.is_some_and(|only| only != webstore_id) {
            return true;
        }
        let Some(line) = IdempotencyLine::from_record(webstore_id, key, record) else {
            return true;
        };
        let whole = match line.names() {
            Some(Resource::Customer(id)) => customers.binary_search(&id.0).is_ok(),
            Some(Resource::Order(id)) => orders.binary_search(&id.0).is_ok(),
            Some(Resource::Account(id)) => customers.binary_search(&id.0).is_ok(),
            Some(Resource::Payment(id)) => store
                .payment_owner(id)
                .ok()
                .flatten()
                .is_some_and(|owner| customers.binary_search(&owner.0).is_ok()),
            None => false,
        };
        if !whole {
            exported.left_out += 1;
            return true;
        }
        if let Err(error) = write(&Line::Idempotency(line), out) {
            failed = Some(error);
            return false;
        }
        exported.idempotency_records += 1;
        progress.step("idempotency records", exported.idempotency_records);
        true
    })?;
    if let Some(error) = failed.take() {
        return Err(TransferError::write(error));
    }

    let webstores = match webstore {
        Some(only) => vec![only.to_owned()],
        None => store.webstores_with_events()?,
    };
    let mut write_line = |line: &Line| write(line, out).map_err(TransferError::write);
    for id in &webstores {
        let mut failure = None;
        let pruned = store.events_pruned_through(id)?;
        store.for_each_event(id, pruned, u64::MAX, &mut |sequence, record| {
            let written = event_line(id, sequence, record)
                .map_err(TransferError::from)
                .and_then(|line| write_line(&Line::Event(line)));
            if let Err(error) = written {
                failure = Some(error);
                return false;
            }
            exported.events += 1;
            progress.step("events", exported.events);
            true
        })?;
        if let Some(error) = failure {
            return Err(error);
        }
        exported.webhook_positions += mark_and_webhook_positions(store, id, &mut write_line)?;
        exported.sessions += sessions(store, id, &mut write_line)?;
        exported.frozen_deliveries += frozen(store, id, &mut write_line)?;
    }
    out.flush().map_err(TransferError::write)?;
    progress.finish(&format!(
        "exported {} customers, {} orders, {} idempotency records, {} events, {} delivery \
         records, {} sessions",
        exported.customers,
        exported.orders,
        exported.idempotency_records,
        exported.events,
        exported.webhook_positions,
        exported.sessions
    ));
    Ok(exported)
}

/// Writes the account of each of `customers` that has one: the account, its ledger by
/// number (up to the account's count), its payments by id; how many lines. A transaction or
/// a payment this release cannot name is a damaged record, and the export stops.
fn accounts(
    store: &Store,
    customers: &[u64],
    write: &mut dyn FnMut(&Line) -> Result<(), TransferError>,
) -> Result<u64, TransferError> {
    let mut count = 0;
    for &id in customers {
        let Some(account) = store.account_record(CustomerId(id))? else {
            continue;
        };
        let through = account.transactions;
        write(&Line::Account(AccountLine::from_record(account)))?;
        count += 1;
        let damaged = |what: String| StoreError::Corrupt {
            key: what,
            source: crate::store::codec::CodecError::Payload(
                "a kind or method this release does not name".into(),
            ),
        };
        for record in store.transaction_records(CustomerId(id), 0, through, usize::MAX)? {
            let number = record.number;
            let line = TransactionLine::from_record(record)
                .ok_or_else(|| damaged(format!("transaction {number} of customer {id}")))?;
            write(&Line::Transaction(line))?;
            count += 1;
        }
        for record in store.payment_records(CustomerId(id))? {
            let payment = record.id;
            let line = PaymentLine::from_record(record)
                .ok_or_else(|| damaged(format!("payment {payment} of customer {id}")))?;
            write(&Line::Payment(line))?;
            count += 1;
        }
    }
    Ok(count)
}

/// The line of stored event `sequence` of `webstore`; an event whose JSON is not text is a
/// damaged record, and the export stops rather than leave it out (a move must lose none).
fn event_line(webstore: &str, sequence: u64, record: EventRecord) -> Result<EventLine, StoreError> {
    EventLine::from_record(webstore, sequence, record).map_err(|source| StoreError::Corrupt {
        key: format!("event {sequence} of webstore {webstore}"),
        source,
    })
}

/// Writes `webstore`'s events-pruned mark as it stands now (after its events were read, so
/// that it covers any the retention sweep removed meanwhile), then the webhook position of
/// each of its webhook endpoints: how many webhook positions.
fn mark_and_webhook_positions(
    store: &Store,
    webstore: &str,
    write: &mut dyn FnMut(&Line) -> Result<(), TransferError>,
) -> Result<u64, TransferError> {
    write(&Line::EventsPruned(EventsPrunedLine {
        webstore_id: webstore.to_owned(),
        through: store.events_pruned_through(webstore)?,
    }))?;
    let mut positions = BTreeMap::new();
    store.for_each_webhook_position(webstore, &mut |endpoint, record| {
        positions.insert(endpoint.to_owned(), record);
        true
    })?;
    // A redelivery the operator asked and the endpoint's deliveries have not taken up yet
    // travels as the record they would make of it (delivered through the cursor, enabled,
    // no failure counted), so that it is not left behind on the source.
    store.for_each_redelivery(webstore, &mut |endpoint, after| {
        let asked = WebhookPosition {
            delivered_through: after,
            ..WebhookPosition::default()
        };
        positions.insert(endpoint.to_owned(), asked);
        true
    })?;
    let count = positions.len() as u64;
    for (endpoint, record) in positions {
        let line = WebhookPositionLine::from_record(webstore, &endpoint, record);
        write(&Line::WebhookPosition(line))?;
    }
    Ok(count)
}

/// Writes `webstore`'s frozen dates: each date's record then its deliveries, in date and
/// order order, and the mark of how far they go: how many deliveries and dates.
fn frozen(
    store: &Store,
    webstore: &str,
    write: &mut dyn FnMut(&Line) -> Result<(), TransferError>,
) -> Result<u64, TransferError> {
    let Some(mark) = store.freeze_mark(webstore)? else {
        return Ok(0);
    };
    let mut count = 0;
    let mut day = mark.since;
    while day <= mark.through {
        if let Some(record) = store.frozen_day(webstore, day)? {
            write(&Line::FrozenDay(FrozenDayLine::from_record(
                webstore, day, record,
            )))?;
            count += 1;
        }
        let mut lines = Vec::new();
        store.for_each_frozen_delivery(webstore, day, &mut |order, record| {
            lines.push(FrozenDeliveryLine::from_record(
                webstore, day, order, record,
            ));
        })?;
        for line in lines {
            write(&Line::FrozenDelivery(line))?;
            count += 1;
        }
        day = day.plus(1);
    }
    write(&Line::FrozenThrough(FrozenThroughLine::of_mark(
        webstore,
        mark,
        store.charge_mark(webstore)?,
    )))?;
    Ok(count)
}

/// Writes every producer session of `webstore`, in digest order: how many. A move's every
/// round carries them all (they are few), and the target keeps exactly these, so that a
/// sign-out during the move holds there too.
fn sessions(
    store: &Store,
    webstore: &str,
    write: &mut dyn FnMut(&Line) -> Result<(), TransferError>,
) -> Result<u64, TransferError> {
    let mut lines = Vec::new();
    store.for_each_session(&mut |digest, record| {
        if record.webstore_id == webstore {
            lines.push(SessionLine::from_record(&digest, record));
        }
        true
    })?;
    let count = lines.len() as u64;
    for line in lines {
        write(&Line::Session(line))?;
    }
    Ok(count)
}

/// Writes what `changed` names of webstore `webstore` to `out`: the header, each changed
/// customer of the webstore as it is now with all its orders, then each idempotency record
/// written (its last version), each event written (unless pruned since), the webstore's
/// events-pruned mark and all its webhook positions.
pub fn export_changed(
    store: &Store,
    webstore: &str,
    changed: &Changed,
    out: &mut dyn Write,
) -> Result<Exported, TransferError> {
    let mut exported = Exported::default();
    let mut write = |line: &Line| {
        let mut text = to_text(line);
        text.push(b'\n');
        out.write_all(&text).map_err(TransferError::write)
    };
    write(&Line::Header {
        format: FORMAT.to_owned(),
        version: VERSION,
        webstore: Some(webstore.to_owned()),
    })?;
    let mut orders_of_customers = Vec::new();
    for &id in &changed.customers {
        let Some((customer, orders)) = store.customer_with_order_records(CustomerId(id))? else {
            continue;
        };
        if customer.webstore_id != webstore {
            continue;
        }
        write(&Line::Customer(CustomerLine::from_record(customer)))?;
        exported.customers += 1;
        orders_of_customers.push((id, orders));
    }
    let mut shipped = Vec::new();
    for (id, orders) in orders_of_customers {
        for order in orders {
            write(&Line::Order(OrderLine::from_record(order)))?;
            exported.orders += 1;
        }
        shipped.push(id);
    }
    exported.account_records += accounts(store, &shipped, &mut write)?;
    for key in &changed.idempotency_keys {
        let Some(record) = store.idempotency(webstore, key)? else {
            continue;
        };
        let Some(line) = IdempotencyLine::from_record(webstore, key, record) else {
            continue;
        };
        write(&Line::Idempotency(line))?;
        exported.idempotency_records += 1;
    }
    for &sequence in &changed.events {
        let mut found = None;
        store.for_each_event(
            webstore,
            sequence.saturating_sub(1),
            sequence,
            &mut |_, record| {
                found = Some(record);
                false
            },
        )?;
        // Gone only if the retention sweep removed it since: the mark below covers it.
        if let Some(record) = found {
            write(&Line::Event(event_line(webstore, sequence, record)?))?;
            exported.events += 1;
        }
    }
    for &(day, order) in &changed.deliveries {
        if let Some(record) = store.frozen_delivery(webstore, day, order)? {
            write(&Line::FrozenDelivery(FrozenDeliveryLine::from_record(
                webstore, day, order, record,
            )))?;
            exported.frozen_deliveries += 1;
        }
    }
    exported.webhook_positions += mark_and_webhook_positions(store, webstore, &mut write)?;
    exported.sessions += sessions(store, webstore, &mut write)?;
    Ok(exported)
}
