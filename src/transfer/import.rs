//! Reading an export into a store: the whole of it, or nothing. A first pass checks every
//! line and every way the import could collide with what the store holds (a customer id, an
//! order id, an idempotency key, or a webstore that already has customers, events or
//! webhook positions), and refuses the import, writing nothing, if any does; when the
//! header names one webstore, a line of another is refused too. A second pass writes it in
//! batches (first removing the frozen lists a webstore imported has here: with no customer
//! here, they are empty); should a write fail part-way (a full disk), what was written is
//! removed again.
//! Events keep their sequence numbers; a webstore's events-pruned mark removes the events up
//! to it that the import (or, for a move's rounds, an earlier round) brought, since the
//! retention sweep starts past the mark and would never reach them. Exports of every version
//! from [`OLDEST_READ`] on are read.
//! Must not touch: anything but the store's writes of imported records.

use crate::store::kinds::{customers, events, idempotency, sessions, webhook_positions};
use crate::store::pending::event_chunks;
use crate::store::pending::order_chunks;
use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::path::Path;

use super::format::{parse_line, reads_version, Line, FORMAT, OLDEST_READ, VERSION};
use super::{Progress, TransferError};
use crate::domain::day::Day;
use crate::domain::ids::{CustomerId, OrderId};
use crate::store::kinds::accounts::{
    self, add_account_record, add_payment_record, add_transaction_record, AccountRecord,
    PaymentRecord, TransactionRecord,
};
use crate::store::kinds::customers::CustomerRecord;
use crate::store::kinds::deliveries::{
    self, add_freeze_mark, add_frozen_day, add_frozen_delivery, DeliveryRecord, FreezeMark,
    FrozenDayRecord,
};
use crate::store::kinds::events::EventRecord;
use crate::store::kinds::idempotency::IdempotencyRecord;
use crate::store::kinds::orders::OrderRecord;
use crate::store::kinds::sessions::SessionRecord;
use crate::store::kinds::webhook_positions::WebhookPosition;
use crate::store::{
    add_customer_record, add_event_record, add_events_pruned, add_idempotency_record,
    add_order_record, add_session_record, add_webhook_position, Store, StoreError, WriteBatch,
};

/// What an import wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Imported {
    /// The webstores whose customers came in.
    pub webstores: Vec<String>,
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
}

/// Records written per store batch at most; fewer where the store's log takes smaller
/// changes (a replicated group's changelog: see [`Batches`]).
const BATCH: usize = 1_000;

/// Store batches of whole records, each written once it holds [`BATCH`] records or the next
/// record would take it past the largest change the store's log takes.
struct Batches<'a> {
    store: &'a Store,
    max_bytes: usize,
    batch: WriteBatch,
    records: usize,
    bytes: usize,
}

impl<'a> Batches<'a> {
    fn new(store: &'a Store) -> Batches<'a> {
        Batches {
            store,
            max_bytes: store.max_entry_bytes().unwrap_or(usize::MAX),
            batch: WriteBatch::default(),
            records: 0,
            bytes: 0,
        }
    }

    /// Adds one record's writes, first writing the batch if they would not fit in it:
    /// whether it wrote one. A record larger than the log takes on its own is refused by
    /// the store when its batch is written.
    fn add(
        &mut self,
        record: WriteBatch,
        write: impl Fn(&Store, WriteBatch) -> Result<(), crate::store::StoreError>,
    ) -> Result<bool, crate::store::StoreError> {
        let size = record.encoded_len();
        let full = self.records == BATCH || self.bytes + size > self.max_bytes;
        let wrote = self.records > 0 && full;
        if wrote {
            self.flush(&write)?;
        }
        self.batch.extend(record);
        self.records += 1;
        self.bytes += size;
        Ok(wrote)
    }

    /// Writes what the batch holds.
    fn flush(
        &mut self,
        write: impl Fn(&Store, WriteBatch) -> Result<(), crate::store::StoreError>,
    ) -> Result<(), crate::store::StoreError> {
        self.records = 0;
        self.bytes = 0;
        write(self.store, std::mem::take(&mut self.batch))
    }
}

enum Record {
    /// The header (always visited first): the one webstore it names, if it names one.
    Header(Option<String>),
    Customer(CustomerRecord),
    Order(OrderRecord),
    /// Webstore, client's key, record.
    Idempotency(String, String, IdempotencyRecord),
    /// Webstore, sequence number, record.
    Event(String, u64, EventRecord),
    /// Webstore, the highest sequence number its retention sweep removed.
    EventsPruned(String, u64),
    /// Webstore, endpoint, record.
    WebhookPosition(String, String, WebhookPosition),
    /// The session's digest, record (which names its webstore).
    Session([u8; 32], SessionRecord),
    /// Webstore, date, order, record.
    FrozenDelivery(String, Day, OrderId, DeliveryRecord),
    /// Webstore, date, record.
    FrozenDay(String, Day, FrozenDayRecord),
    /// Webstore, its frozen dates.
    FrozenThrough(String, FreezeMark, Option<Day>),
    Account(AccountRecord),
    Transaction(TransactionRecord),
    Payment(PaymentRecord),
}

impl Record {
    /// The webstore the record belongs to, where it names one, and what it is, for errors.
    fn owner(&self) -> Option<(&str, String)> {
        match self {
            Record::Header(_) | Record::Order(_) | Record::Transaction(_) | Record::Payment(_) => {
                None
            }
            Record::Account(account) => Some((
                &account.webstore_id,
                format!("the account of customer {}", account.customer_id),
            )),
            Record::Customer(customer) => {
                Some((&customer.webstore_id, format!("customer {}", customer.id)))
            }
            Record::Idempotency(webstore, key, _) => {
                Some((webstore, format!("idempotency key {key:?}")))
            }
            Record::Event(webstore, sequence, _) => Some((webstore, format!("event {sequence}"))),
            Record::EventsPruned(webstore, _) => {
                Some((webstore, "the events_pruned line".to_owned()))
            }
            Record::WebhookPosition(webstore, endpoint, _) => Some((
                webstore,
                format!("the delivery record of endpoint {endpoint:?}"),
            )),
            Record::Session(_, record) => {
                Some((&record.webstore_id, "a producer's session".to_owned()))
            }
            Record::FrozenDelivery(webstore, day, order, _) => Some((
                webstore,
                format!("the frozen delivery of order {} on {}", order.0, day.date()),
            )),
            Record::FrozenDay(webstore, day, _) => {
                Some((webstore, format!("the frozen day {}", day.date())))
            }
            Record::FrozenThrough(webstore, ..) => {
                Some((webstore, "the frozen_through line".to_owned()))
            }
        }
    }
}

/// Reads the export at `input` line by line, as records; `visit` returns false to stop.
fn read_records(
    input: &Path,
    visit: &mut dyn FnMut(u64, Record) -> Result<bool, TransferError>,
) -> Result<(), TransferError> {
    let file = std::fs::File::open(input).map_err(|source| TransferError::Read {
        context: format!("opening {}", input.display()),
        source,
    })?;
    let mut lines = std::io::BufReader::new(file).lines();
    let mut number = 0u64;
    // The header reads alike in every version; the lines after it as its version wrote them.
    let mut next_line = |number: &mut u64, version: u32| -> Result<Option<Line>, TransferError> {
        let Some(text) = lines.next() else {
            return Ok(None);
        };
        *number += 1;
        let text = text.map_err(|source| TransferError::Read {
            context: format!("reading {}", input.display()),
            source,
        })?;
        parse_line(&text, version)
            .map(Some)
            .map_err(|error| TransferError::line(*number, error))
    };
    let (version, webstore) = match next_line(&mut number, VERSION)? {
        Some(Line::Header {
            format,
            version,
            webstore,
        }) if format == FORMAT && reads_version(version) => (version, webstore),
        Some(Line::Header {
            format, version, ..
        }) => {
            return Err(TransferError::line(
                1,
                format!(
                    "a {format} export of version {version}; this release reads {FORMAT} \
                     versions {OLDEST_READ} to {VERSION}"
                ),
            ))
        }
        _ => {
            return Err(TransferError::line(
                1,
                "the first line must be the export's header",
            ))
        }
    };
    if !visit(number, Record::Header(webstore))? {
        return Ok(());
    }
    while let Some(line) = next_line(&mut number, version)? {
        if line.since_version() > version {
            return Err(TransferError::line(
                number,
                format!(
                    "a line of a type that version {} of the format brought, in an export of \
                     version {version}",
                    line.since_version()
                ),
            ));
        }
        let record = match line {
            Line::Header { .. } => return Err(TransferError::line(number, "a second header")),
            Line::Customer(line) => line.into_record().map(Record::Customer),
            Line::Account(line) => line.into_record().map(Record::Account),
            Line::Transaction(line) => line.into_record().map(Record::Transaction),
            Line::Payment(line) => line.into_record().map(Record::Payment),
            Line::Order(line) => line.into_record().map(Record::Order),
            Line::Idempotency(line) => {
                let (webstore, key) = (line.webstore_id.clone(), line.key.clone());
                line.into_record()
                    .map(|record| Record::Idempotency(webstore, key, record))
            }
            Line::Event(line) => {
                let (webstore, sequence) = (line.webstore_id.clone(), line.sequence);
                line.into_record()
                    .map(|record| Record::Event(webstore, sequence, record))
            }
            Line::EventsPruned(line) => line
                .into_parts()
                .map(|(webstore, through)| Record::EventsPruned(webstore, through)),
            Line::WebhookPosition(line) => {
                let (webstore, endpoint) = (line.webstore_id.clone(), line.endpoint.clone());
                line.into_record()
                    .map(|record| Record::WebhookPosition(webstore, endpoint, record))
            }
            Line::Session(line) => line
                .into_record()
                .map(|(digest, record)| Record::Session(digest, record)),
            Line::FrozenDelivery(line) => {
                line.into_record().map(|(webstore, day, order, record)| {
                    Record::FrozenDelivery(webstore, day, order, record)
                })
            }
            Line::FrozenDay(line) => line
                .into_record()
                .map(|(webstore, day, record)| Record::FrozenDay(webstore, day, record)),
            Line::FrozenThrough(line) => line
                .into_mark()
                .map(|(webstore, mark, charged)| Record::FrozenThrough(webstore, mark, charged)),
        }
        .map_err(|bad| TransferError::line(number, bad.0))?;
        if !visit(number, record)? {
            break;
        }
    }
    Ok(())
}

/// Checks that the export at `input` can come into `store` whole.
fn check(store: &Store, input: &Path, progress: &mut Progress) -> Result<Imported, TransferError> {
    let mut imported = Imported::default();
    let mut webstores = BTreeSet::new();
    let mut customers: Vec<u64> = Vec::new();
    let mut orders: Vec<u64> = Vec::new();
    let mut only: Option<String> = None;
    let mut last_events: BTreeMap<String, u64> = BTreeMap::new();
    let mut marks: BTreeSet<String> = BTreeSet::new();
    let mut endpoints: BTreeSet<(String, String)> = BTreeSet::new();
    let mut sessions: BTreeSet<[u8; 32]> = BTreeSet::new();
    // The customer whose account's line came last: its transactions and payments follow it.
    let mut ledger: Option<u64> = None;
    read_records(input, &mut |number, record| {
        if let (Some(only), Some((owner, what))) = (&only, record.owner()) {
            if owner != only {
                return Err(TransferError::line(
                    number,
                    format!("{what} is webstore {owner}'s, and the export is webstore {only}'s"),
                ));
            }
        }
        match record {
            Record::Header(webstore) => only = webstore,
            Record::Customer(customer) => {
                if customers.last().is_some_and(|last| *last >= customer.id) {
                    return Err(TransferError::line(
                        number,
                        format!("customer {} is out of id order (or repeated)", customer.id),
                    ));
                }
                if store.has_customer(CustomerId(customer.id))? {
                    return Err(TransferError::Refused(format!(
                        "customer {} is already in this store: the two stores gave out ids \
                         from the same id range (give each host its own --id-range)",
                        customer.id
                    )));
                }
                webstores.insert(customer.webstore_id);
                customers.push(customer.id);
                imported.customers += 1;
            }
            Record::Order(order) => {
                if customers.binary_search(&order.customer_id).is_err() {
                    return Err(TransferError::line(
                        number,
                        format!(
                            "order {} belongs to customer {}, who is not in the export",
                            order.id, order.customer_id
                        ),
                    ));
                }
                orders.push(order.id);
                imported.orders += 1;
            }
            Record::Account(AccountRecord { customer_id, .. })
            | Record::Transaction(TransactionRecord { customer_id, .. })
            | Record::Payment(PaymentRecord { customer_id, .. }) => {
                if let Record::Account(account) = &record {
                    ledger = Some(account.customer_id);
                }
                if ledger != Some(customer_id) {
                    return Err(TransferError::line(
                        number,
                        format!(
                            "a transaction or payment of customer {customer_id} that does not                              follow its account's line"
                        ),
                    ));
                }
                if customers.binary_search(&customer_id).is_err() {
                    return Err(TransferError::line(
                        number,
                        format!(
                            "an account's record of customer {customer_id}, who is not in the \
                             export"
                        ),
                    ));
                }
                imported.account_records += 1;
            }
            Record::Idempotency(webstore, key, _) => {
                if store.has_idempotency(&webstore, &key)? {
                    return Err(TransferError::Refused(format!(
                        "idempotency key {key:?} of webstore {webstore} is already in this store"
                    )));
                }
                imported.idempotency_records += 1;
            }
            Record::Event(webstore, sequence, _) => {
                let last = last_events.entry(webstore.clone()).or_default();
                if *last >= sequence {
                    return Err(TransferError::line(
                        number,
                        format!(
                            "event {sequence} of webstore {webstore} is out of sequence order \
                             (or repeated)"
                        ),
                    ));
                }
                *last = sequence;
                webstores.insert(webstore);
                imported.events += 1;
            }
            Record::EventsPruned(webstore, _) => {
                if !marks.insert(webstore.clone()) {
                    return Err(TransferError::line(
                        number,
                        format!("a second events_pruned line of webstore {webstore}"),
                    ));
                }
                webstores.insert(webstore);
            }
            Record::WebhookPosition(webstore, endpoint, _) => {
                if !endpoints.insert((webstore.clone(), endpoint.clone())) {
                    return Err(TransferError::line(
                        number,
                        format!(
                            "a second delivery record of endpoint {endpoint:?} of webstore \
                             {webstore}"
                        ),
                    ));
                }
                webstores.insert(webstore);
                imported.webhook_positions += 1;
            }
            Record::Session(digest, record) => {
                if !sessions.insert(digest) {
                    return Err(TransferError::line(
                        number,
                        format!(
                            "a second session {} of webstore {}",
                            hex::encode(digest),
                            record.webstore_id
                        ),
                    ));
                }
                webstores.insert(record.webstore_id);
                imported.sessions += 1;
            }
            Record::FrozenDelivery(webstore, ..) | Record::FrozenDay(webstore, ..) => {
                webstores.insert(webstore);
                imported.frozen_deliveries += 1;
            }
            Record::FrozenThrough(webstore, ..) => {
                webstores.insert(webstore);
            }
        }
        progress.step("lines checked", number);
        Ok(true)
    })?;
    for webstore in &webstores {
        let holds = if store.last_number(webstore)? > 0 {
            Some("customers")
        } else if store.last_event_sequence(webstore)? > 0 {
            Some("events")
        } else if has_webhook_positions(store, webstore)? {
            Some("webhook positions")
        } else {
            None
        };
        if let Some(what) = holds {
            return Err(TransferError::Refused(format!(
                "webstore {webstore} already has {what} in this store: an import adds \
                 webstores, it never merges into one"
            )));
        }
    }
    orders.sort_unstable();
    if let Some(pair) = orders.windows(2).find(|pair| pair[0] == pair[1]) {
        return Err(TransferError::Refused(format!(
            "order {} appears twice in the export",
            pair[0]
        )));
    }
    let mut collision = None;
    store.for_each_order_id(&mut |OrderId(id)| {
        if collision.is_none() && orders.binary_search(&id).is_ok() {
            collision = Some(id);
        }
    })?;
    if let Some(id) = collision {
        return Err(TransferError::Refused(format!(
            "order {id} is already in this store: the two stores gave out ids from the same \
             id range (give each host its own --id-range)"
        )));
    }
    imported.webstores = webstores.into_iter().collect();
    Ok(imported)
}

/// Whether `store` holds a webhook position of `webstore`.
fn has_webhook_positions(store: &Store, webstore: &str) -> Result<bool, StoreError> {
    let mut any = false;
    store.for_each_webhook_position(webstore, &mut |_, _| {
        any = true;
        false
    })?;
    Ok(any)
}

/// Adds to `batches` webstore `webstore`'s events-pruned mark `through` (never lowering the
/// one `store` holds) and the removal of each event up to it that `store` holds; the caller
/// has written the batches, so that the events the import brought so far are among those
/// read. Events the source's retention sweep removed while its export read them, or since
/// an earlier round of a move brought them, are removed here too: the sweep here starts
/// past the mark, so nothing else ever would.
fn prune_to(
    store: &Store,
    batches: &mut Batches<'_>,
    webstore: &str,
    through: u64,
) -> Result<(), StoreError> {
    let mut stale = Vec::new();
    store.for_each_event(webstore, 0, through, &mut |sequence, _| {
        stale.push(sequence);
        true
    })?;
    for sequence in stale {
        let mut removal = WriteBatch::default();
        removal.delete(event_chunks::event_key(webstore, sequence));
        batches.add(removal, Store::apply)?;
    }
    if through > store.events_pruned_through(webstore)? {
        let mut mark = WriteBatch::default();
        add_events_pruned(&mut mark, webstore, through);
        batches.add(mark, Store::apply)?;
    }
    Ok(())
}

/// Imports the export at `input` into `store`, all or nothing.
pub fn import(
    store: &Store,
    input: &Path,
    progress: &mut Progress,
) -> Result<Imported, TransferError> {
    import_then(store, input, progress, &|store| store.close())
}

/// [`import`] into a store that stays open (a running node's, through its admin listener):
/// `durable` makes the writes durable instead of the close.
pub fn import_live(
    store: &Store,
    input: &Path,
    progress: &mut Progress,
    durable: &dyn Fn(&Store) -> Result<(), crate::store::StoreError>,
) -> Result<Imported, TransferError> {
    import_then(store, input, progress, durable)
}

fn import_then(
    store: &Store,
    input: &Path,
    progress: &mut Progress,
    finish: &dyn Fn(&Store) -> Result<(), crate::store::StoreError>,
) -> Result<Imported, TransferError> {
    let imported = check(store, input, progress)?;
    let mut batches = Batches::new(store);
    // A webstore imported has no customer here (`check`), so any frozen lists it has here
    // are empty: the import's own take their place.
    for webstore in &imported.webstores {
        let mut removal = WriteBatch::default();
        store.add_frozen_lists_removal(&mut removal, webstore)?;
        batches.add(removal, Store::apply)?;
    }
    let mut written_through = 0u64;
    let mut ledger_webstore = String::new();
    let outcome = read_records(input, &mut |number, record| {
        let mut writes = WriteBatch::default();
        match &record {
            Record::Header(_) => return Ok(true),
            Record::Customer(customer) => add_customer_record(&mut writes, customer),
            Record::Order(order) => add_order_record(&mut writes, order),
            Record::Account(record) => {
                ledger_webstore.clone_from(&record.webstore_id);
                add_account_record(&mut writes, record)
            }
            // Its account's line came just before (checked when the file was read).
            Record::Transaction(record) => {
                add_transaction_record(&mut writes, &ledger_webstore, record)
            }
            Record::Payment(record) => add_payment_record(&mut writes, record),
            Record::Idempotency(webstore, key, record) => {
                add_idempotency_record(&mut writes, webstore, key, record)
            }
            Record::Event(webstore, sequence, record) => {
                add_event_record(&mut writes, webstore, *sequence, record)
            }
            Record::WebhookPosition(webstore, endpoint, record) => {
                add_webhook_position(&mut writes, webstore, endpoint, record)
            }
            Record::Session(digest, record) => add_session_record(&mut writes, digest, record),
            Record::FrozenDelivery(webstore, day, order, record) => {
                add_frozen_delivery(&mut writes, webstore, *day, *order, record)
            }
            Record::FrozenDay(webstore, day, record) => {
                add_frozen_day(&mut writes, webstore, *day, record)
            }
            Record::FrozenThrough(webstore, mark, charged) => {
                add_freeze_mark(&mut writes, webstore, *mark, *charged)
            }
            Record::EventsPruned(webstore, through) => {
                batches.flush(Store::apply)?;
                written_through = number - 1;
                prune_to(store, &mut batches, webstore, *through)?;
                progress.step("lines written", number);
                return Ok(true);
            }
        }
        if batches.add(writes, Store::apply)? {
            // The lines before this one are written.
            written_through = number - 1;
        }
        progress.step("lines written", number);
        Ok(true)
    })
    .and_then(|()| {
        batches.flush(Store::apply)?;
        finish(store)?;
        Ok(())
    });
    if let Err(error) = outcome {
        let undone = undo(store, input, written_through, finish);
        return Err(TransferError::Refused(format!(
            "the import stopped part-way ({error}); {}",
            match undone {
                Ok(()) => "what it had written was removed again".to_owned(),
                Err(undo_error) => format!(
                    "removing what it had written failed too ({undo_error}): restore the data \
                     directory from its backup"
                ),
            }
        )));
    }
    progress.finish(&format!(
        "imported {} customers, {} orders, {} idempotency records, {} events, {} delivery \
         records, {} sessions of {}",
        imported.customers,
        imported.orders,
        imported.idempotency_records,
        imported.events,
        imported.webhook_positions,
        imported.sessions,
        imported.webstores.join(", ")
    ));
    Ok(imported)
}

/// Removes what the lines up to `through` wrote.
fn undo(
    store: &Store,
    input: &Path,
    through: u64,
    finish: &dyn Fn(&Store) -> Result<(), crate::store::StoreError>,
) -> Result<(), TransferError> {
    let mut batches = Batches::new(store);
    read_records(input, &mut |number, record| {
        if number > through {
            return Ok(false);
        }
        let mut batch = WriteBatch::default();
        match record {
            Record::Header(_) => return Ok(true),
            Record::Customer(customer) => {
                batch.delete(customers::customer_key(customer.id));
                let email_key = crate::domain::email::fold(&customer.email);
                batch.delete(customers::email_holder_key(
                    &customer.webstore_id,
                    &email_key,
                    customer.id,
                ));
                batch.delete(customers::number_key(
                    &customer.webstore_id,
                    customer.number,
                ));
            }
            Record::Order(order) => {
                batch.delete(order_chunks::order_key(order.customer_id, order.id))
            }
            Record::Account(record) => batch.delete(accounts::account_key(record.customer_id)),
            Record::Transaction(record) => {
                batch.delete(accounts::transaction_key(record.customer_id, record.number))
            }
            Record::Payment(record) => {
                batch.delete(accounts::payment_key(record.customer_id, record.id));
                batch.delete(accounts::payment_owner_key(record.id));
            }
            Record::Idempotency(webstore, key, _) => {
                batch.delete(idempotency::idempotency_version(&webstore, &key, 1))
            }
            Record::Event(webstore, sequence, _) => {
                batch.delete(event_chunks::event_key(&webstore, sequence))
            }
            // The store held no mark of the webstore before (the check refuses webstores
            // with events), so the import's is removed whole.
            Record::EventsPruned(webstore, _) => batch.delete(events::events_pruned(&webstore)),
            Record::WebhookPosition(webstore, endpoint, _) => batch.delete(
                webhook_positions::webhook_position_key(&webstore, &endpoint),
            ),
            Record::Session(digest, _) => batch.delete(sessions::session_key(&digest)),
            Record::FrozenDelivery(webstore, day, order, _) => {
                batch.delete(deliveries::frozen_delivery_key(&webstore, day, order))
            }
            Record::FrozenDay(webstore, day, _) => {
                batch.delete(deliveries::frozen_day_key(&webstore, day))
            }
            // The store held no frozen dates of the webstore before (the check refuses one
            // that has some).
            Record::FrozenThrough(webstore, ..) => {
                batch.delete(deliveries::freeze_mark_key(&webstore));
                batch.delete(deliveries::charge_mark_key(&webstore));
            }
        }
        batches.add(batch, Store::remove)?;
        Ok(true)
    })?;
    batches.flush(Store::remove)?;
    Ok(finish(store)?)
}

/// Writes the export of one webstore's changes at `input` ([`super::export::export_changed`])
/// over what `store` holds of webstore `webstore`, which this node does not serve yet: each
/// record overwrites its keys, in batches within the log's limit (events keep their
/// sequence numbers; the events-pruned mark removes the events up to it held here), and
/// `durable` makes them durable. Every record must be `webstore`'s, and every order's
/// customer in the file. What it wrote, and the customers it wrote.
pub fn apply_live(
    store: &Store,
    webstore: &str,
    input: &Path,
    durable: &dyn Fn(&Store) -> Result<(), crate::store::StoreError>,
) -> Result<(Imported, Vec<CustomerId>), TransferError> {
    let mut applied = Imported::default();
    let mut customers: BTreeSet<u64> = BTreeSet::new();
    let mut shipped_sessions: BTreeSet<[u8; 32]> = BTreeSet::new();
    let mut batches = Batches::new(store);
    let not_its = |number: u64, what: &str| {
        TransferError::line(number, format!("{what} is not webstore {webstore}'s"))
    };
    read_records(input, &mut |number, record| {
        if let Some((owner, what)) = record.owner() {
            if owner != webstore {
                return Err(not_its(number, &what));
            }
        }
        let mut writes = WriteBatch::default();
        match &record {
            Record::Header(_) => return Ok(true),
            Record::Customer(customer) => {
                customers.insert(customer.id);
                applied.customers += 1;
                add_customer_record(&mut writes, customer);
            }
            Record::Order(order) => {
                if !customers.contains(&order.customer_id) {
                    return Err(TransferError::line(
                        number,
                        format!(
                            "order {} belongs to customer {}, who is not in the changes",
                            order.id, order.customer_id
                        ),
                    ));
                }
                applied.orders += 1;
                add_order_record(&mut writes, order);
            }
            Record::Account(AccountRecord { customer_id, .. })
            | Record::Transaction(TransactionRecord { customer_id, .. })
            | Record::Payment(PaymentRecord { customer_id, .. })
                if !customers.contains(customer_id) =>
            {
                return Err(TransferError::line(
                    number,
                    format!(
                        "an account's record of customer {customer_id}, who is not in the changes"
                    ),
                ));
            }
            Record::Account(record) => {
                applied.account_records += 1;
                add_account_record(&mut writes, record);
            }
            Record::Transaction(record) => {
                applied.account_records += 1;
                add_transaction_record(&mut writes, webstore, record);
            }
            Record::Payment(record) => {
                applied.account_records += 1;
                add_payment_record(&mut writes, record);
            }
            Record::Idempotency(owner, key, record) => {
                applied.idempotency_records += 1;
                add_idempotency_record(&mut writes, owner, key, record);
            }
            Record::Event(owner, sequence, record) => {
                applied.events += 1;
                add_event_record(&mut writes, owner, *sequence, record);
            }
            Record::WebhookPosition(owner, endpoint, record) => {
                applied.webhook_positions += 1;
                add_webhook_position(&mut writes, owner, endpoint, record);
            }
            Record::Session(digest, record) => {
                applied.sessions += 1;
                shipped_sessions.insert(*digest);
                add_session_record(&mut writes, digest, record);
            }
            Record::FrozenDelivery(owner, day, order, record) => {
                applied.frozen_deliveries += 1;
                add_frozen_delivery(&mut writes, owner, *day, *order, record);
            }
            Record::FrozenDay(owner, day, record) => {
                applied.frozen_deliveries += 1;
                add_frozen_day(&mut writes, owner, *day, record);
            }
            Record::FrozenThrough(owner, mark, charged) => {
                add_freeze_mark(&mut writes, owner, *mark, *charged)
            }
            Record::EventsPruned(owner, through) => {
                batches.flush(Store::apply)?;
                prune_to(store, &mut batches, owner, *through)?;
                return Ok(true);
            }
        }
        batches.add(writes, Store::apply)?;
        Ok(true)
    })?;
    batches.flush(Store::apply)?;
    // A round carries all the webstore's sessions: one it does not carry was signed out (or
    // swept) on the source meanwhile, and ends here too.
    let mut ended = WriteBatch::default();
    store.for_each_session(&mut |digest, record| {
        if record.webstore_id == webstore && !shipped_sessions.contains(&digest) {
            ended.delete(sessions::session_key(&digest));
        }
        true
    })?;
    if !ended.is_empty() {
        store.remove(ended)?;
    }
    durable(store)?;
    applied.webstores = vec![webstore.to_owned()];
    Ok((applied, customers.into_iter().map(CustomerId).collect()))
}
