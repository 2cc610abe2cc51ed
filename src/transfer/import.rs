//! Reading an export into a store: the whole of it, or nothing. A first pass checks every
//! line and every way the import could collide with what the store holds (a customer id, an
//! order id, an idempotency key, or a webstore that already has customers), and refuses the
//! import, writing nothing, if any does. A second pass writes it in batches; should a write
//! fail part-way (a full disk), what was written is removed again.
//! Must not touch: anything but the store's writes of imported records.

use std::collections::BTreeSet;
use std::io::BufRead;
use std::path::Path;

use super::format::{Line, FORMAT, VERSION};
use super::{Progress, TransferError};
use crate::domain::ids::{CustomerId, OrderId};
use crate::store::codec::{CustomerRecord, IdempotencyRecord, OrderRecord};
use crate::store::{
    add_customer_record, add_idempotency_record, add_order_record, keys, Store, WriteBatch,
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
    Customer(CustomerRecord),
    Order(OrderRecord),
    Idempotency(String, String, IdempotencyRecord),
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
    let mut next_line = |number: &mut u64| -> Result<Option<Line>, TransferError> {
        let Some(text) = lines.next() else {
            return Ok(None);
        };
        *number += 1;
        let text = text.map_err(|source| TransferError::Read {
            context: format!("reading {}", input.display()),
            source,
        })?;
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|error| TransferError::line(*number, error.to_string()))
    };
    match next_line(&mut number)? {
        Some(Line::Header {
            format, version, ..
        }) if format == FORMAT && version == VERSION => {}
        Some(Line::Header { format, version, .. }) => {
            return Err(TransferError::line(
                1,
                format!("a {format} export of version {version}; this release reads {FORMAT} version {VERSION}"),
            ))
        }
        _ => {
            return Err(TransferError::line(
                1,
                "the first line must be the export's header",
            ))
        }
    }
    while let Some(line) = next_line(&mut number)? {
        let record = match line {
            Line::Header { .. } => return Err(TransferError::line(number, "a second header")),
            Line::Customer(line) => line.into_record().map(Record::Customer),
            Line::Order(line) => line.into_record().map(Record::Order),
            Line::Idempotency(line) => {
                let (webstore, key) = (line.webstore_id.clone(), line.key.clone());
                line.into_record()
                    .map(|record| Record::Idempotency(webstore, key, record))
            }
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
    read_records(input, &mut |number, record| {
        match record {
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
            Record::Idempotency(webstore, key, _) => {
                if store.has_idempotency(&webstore, &key)? {
                    return Err(TransferError::Refused(format!(
                        "idempotency key {key:?} of webstore {webstore} is already in this store"
                    )));
                }
                imported.idempotency_records += 1;
            }
        }
        progress.step("lines checked", number);
        Ok(true)
    })?;
    for webstore in &webstores {
        if store.last_number(webstore)? > 0 {
            return Err(TransferError::Refused(format!(
                "webstore {webstore} already has customers in this store: an import adds \
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
    let mut written_through = 0u64;
    let outcome = read_records(input, &mut |number, record| {
        let mut writes = WriteBatch::default();
        match &record {
            Record::Customer(customer) => add_customer_record(&mut writes, customer),
            Record::Order(order) => add_order_record(&mut writes, order),
            Record::Idempotency(webstore, key, record) => {
                add_idempotency_record(&mut writes, webstore, key, record)
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
        "imported {} customers, {} orders, {} idempotency records of {}",
        imported.customers,
        imported.orders,
        imported.idempotency_records,
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
            Record::Customer(customer) => {
                batch.delete(keys::customer(customer.id));
                let email_key = crate::domain::email::fold(&customer.email);
                batch.delete(keys::email_holder(
                    &customer.webstore_id,
                    &email_key,
                    customer.id,
                ));
                batch.delete(keys::number(&customer.webstore_id, customer.number));
            }
            Record::Order(order) => batch.delete(keys::order(order.customer_id, order.id)),
            Record::Idempotency(webstore, key, _) => {
                batch.delete(keys::idempotency_version(&webstore, &key, 1))
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
/// record overwrites its keys, in batches within the log's limit, and `durable` makes them
/// durable. Every record must be `webstore`'s, and every order's customer in the file. What
/// it wrote, and the customers it wrote.
pub fn apply_live(
    store: &Store,
    webstore: &str,
    input: &Path,
    durable: &dyn Fn(&Store) -> Result<(), crate::store::StoreError>,
) -> Result<(Imported, Vec<CustomerId>), TransferError> {
    let mut applied = Imported::default();
    let mut customers: BTreeSet<u64> = BTreeSet::new();
    let mut batches = Batches::new(store);
    let not_its = |number: u64, what: &str| {
        TransferError::line(number, format!("{what} is not webstore {webstore}'s"))
    };
    read_records(input, &mut |number, record| {
        let mut writes = WriteBatch::default();
        match &record {
            Record::Customer(customer) => {
                if customer.webstore_id != webstore {
                    return Err(not_its(number, &format!("customer {}", customer.id)));
                }
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
            Record::Idempotency(owner, key, record) => {
                if owner != webstore {
                    return Err(not_its(number, &format!("idempotency key {key:?}")));
                }
                applied.idempotency_records += 1;
                add_idempotency_record(&mut writes, owner, key, record);
            }
        }
        batches.add(writes, Store::apply)?;
        Ok(true)
    })?;
    batches.flush(Store::apply)?;
    durable(store)?;
    applied.webstores = vec![webstore.to_owned()];
    Ok((applied, customers.into_iter().map(CustomerId).collect()))
}
