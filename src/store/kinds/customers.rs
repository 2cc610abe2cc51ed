//! Customers: the `c` record (`CustomerRecord`, format version 2 with the customer's halts,
//! reading version 1) under the customer's id, and the two index
//! entries that find it, `e` (folded email → customer id, one entry for each customer that
//! has held the email) and `n` (customer number → customer id), per webstore; their part of
//! `impl Store`: a customer's create and change, the reads by id, email and number, and the
//! batch builders seeding and imports share.
//!
//! A customer is written key by key, not in a batch (see `Snapshot::apply` on what a batch
//! costs in sled 0.34, and docs/design.md, "Why not batches everywhere"): its email's `e`
//! entry, its number's `n` entry, then its `c` record. The record is the commit point: a
//! customer exists when its record does, and an `e` entry counts only while the record it
//! names holds that email. A crash between the writes can leave entries naming no record;
//! the store is then opened without the clean-shutdown marker, and `store::repair` puts the
//! entries right from the records before anything is served.
//!
//! Stored and exported: the record is bincode behind the `BXS` header, its address a list of
//! the contract's nine fields in order; its export line (`transfer::format::CustomerLine`)
//! names each address field, so that an export reads without this code and a field added to
//! the contract later does not shift the others. Both carry the password hash.
//!
//! Must not touch: orders beyond reading a customer's (`kinds::orders`), the log itself (its writes
//! go into the change's `LogEntry`, which the store's entries hand to the log), HTTP.

use crate::store::pending::order_chunks;
use serde::{Deserialize, Serialize};

use super::idempotency::IdempotencyWrite;
use super::orders::{decode_order, OrderRecord};
use crate::domain::catalogue::WebstoreIdx;
use crate::domain::customer::{Address, Customer};
use crate::domain::day::Day;
use crate::domain::email::Email;
use crate::domain::halts::{HaltSpan, Halts};
use crate::domain::ids::CustomerId;
use crate::domain::order::Order;
use crate::store::codec::{decode, decode_payload, encode, CodecError, Kind, Record};
use crate::store::entries::{EventWrite, RecordWrite};
use crate::store::error::{corrupt, readable};
use crate::store::keys::{trailing_id, webstore_prefix, with_id};
use crate::store::kinds::change::ChangeWrites;
use crate::store::log::wal::LogEntry;
use crate::store::{OnDurable, OpenForWrite, Store, StoreError, WriteBatch, Written};

/// A customer record.
pub const CUSTOMER: u8 = b'c';

/// Folded email → customer id, per webstore.
pub const EMAIL: u8 = b'e';

/// Customer number → customer id, per webstore.
pub const NUMBER: u8 = b'n';

/// `c` + customer id.
pub fn customer_key(id: u64) -> Vec<u8> {
    with_id(CUSTOMER, id)
}

/// `e` + webstore id + 0 + folded email + 0: where the entries of one email are, one for
/// each customer that has held it. An email is printable text, so the 0 ends it.
pub fn email_prefix(webstore: &str, email_key: &str) -> Vec<u8> {
    let mut key = webstore_prefix(EMAIL, webstore);
    key.extend_from_slice(email_key.as_bytes());
    key.push(0);
    key
}

/// [`email_prefix`] + customer id: the entry of one customer that holds or held the email. An
/// entry counts only while its customer's record holds the email; a customer's entry is
/// never overwritten by another's, so the replay of an older create after a crash cannot
/// take an email from the customer that holds it now (see `Store::email_owner`).
pub fn email_holder_key(webstore: &str, email_key: &str, customer: u64) -> Vec<u8> {
    let mut key = email_prefix(webstore, email_key);
    key.extend_from_slice(&customer.to_be_bytes());
    key
}

/// `n` + webstore id + 0 + customer number.
pub fn number_key(webstore: &str, number: u64) -> Vec<u8> {
    let mut key = webstore_prefix(NUMBER, webstore);
    key.extend_from_slice(&number.to_be_bytes());
    key
}

/// A customer as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CustomerRecord {
    /// Customer id.
    pub id: u64,
    /// The catalogue's webstore id (not its position, which a catalogue edit may change).
    pub webstore_id: String,
    /// Number within the webstore.
    pub number: u64,
    /// First name.
    pub first_name: String,
    /// Last name.
    pub last_name: Option<String>,
    /// Email as given, trimmed.
    pub email: String,
    /// Delivery service id.
    pub delivery_service_id: u64,
    /// Address fields in the contract's order.
    pub address: Vec<Option<String>>,
    /// Argon2id PHC string.
    pub password_hash: Option<String>,
    /// Its halts, oldest first (format version 2 on).
    pub halts: Vec<HaltRecord>,
}

/// One halt of a customer, as stored: from `from_day` until `until_day` (excluded), or on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HaltRecord {
    /// The first date not delivered.
    pub from_day: i32,
    /// The first date delivered again, once the halt has ended.
    pub until_day: Option<i32>,
}

/// A customer as format version 1 stored it, before customers could be halted (events of
/// format version 2 hold it too).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(in crate::store) struct CustomerRecordV1 {
    id: u64,
    webstore_id: String,
    number: u64,
    first_name: String,
    last_name: Option<String>,
    email: String,
    delivery_service_id: u64,
    address: Vec<Option<String>>,
    password_hash: Option<String>,
}

impl CustomerRecordV1 {
    /// The customer as it was: never halted.
    pub(in crate::store) fn upgrade(self) -> CustomerRecord {
        CustomerRecord {
            id: self.id,
            webstore_id: self.webstore_id,
            number: self.number,
            first_name: self.first_name,
            last_name: self.last_name,
            email: self.email,
            delivery_service_id: self.delivery_service_id,
            address: self.address,
            password_hash: self.password_hash,
            halts: Vec::new(),
        }
    }
}

impl Record for CustomerRecord {
    const KIND: Kind = Kind::Customer;
    const VERSION: u16 = 2;
    fn decode_older(version: u16, payload: &[u8]) -> Result<Self, CodecError> {
        match version {
            1 => decode_payload::<CustomerRecordV1>(payload).map(CustomerRecordV1::upgrade),
            other => Err(CodecError::UnsupportedVersion(other)),
        }
    }
}

impl CustomerRecord {
    /// The stored form of a customer of webstore `webstore_id`.
    pub fn from_customer(customer: &Customer, webstore_id: &str) -> Self {
        CustomerRecord {
            id: customer.id.0,
            webstore_id: webstore_id.to_owned(),
            number: customer.number,
            first_name: customer.first_name.clone(),
            last_name: customer.last_name.clone(),
            email: customer.email.as_str().to_owned(),
            delivery_service_id: customer.delivery_service_id,
            address: customer.address.0.to_vec(),
            password_hash: customer.password_hash.clone(),
            halts: customer
                .halts
                .spans()
                .iter()
                .map(|span| HaltRecord {
                    from_day: span.from.0,
                    until_day: span.until.map(|d| d.0),
                })
                .collect(),
        }
    }

    /// The customer's halts; `Err` names the rule stored spans break.
    pub fn halts(&self) -> Result<Halts, CodecError> {
        let spans = self
            .halts
            .iter()
            .map(|halt| HaltSpan {
                from: Day(halt.from_day),
                until: halt.until_day.map(Day),
            })
            .collect();
        Halts::from_spans(spans).map_err(|broken| CodecError::Payload(broken.to_owned()))
    }

    /// The customer read from the store, placed in the webstore at `webstore`: halts that
    /// break their rules are a corrupt record under the customer's key.
    pub fn into_stored_customer(self, webstore: WebstoreIdx) -> Result<Customer, StoreError> {
        let key = customer_key(self.id);
        self.into_customer(webstore)
            .map_err(|source| corrupt(&key, source))
    }

    /// The customer, placed in the webstore at `webstore`; halts that break their rules are a
    /// decoding error.
    pub fn into_customer(self, webstore: WebstoreIdx) -> Result<Customer, CodecError> {
        let halts = self.halts()?;
        let mut address = Address::default();
        for (slot, value) in address.0.iter_mut().zip(self.address) {
            *slot = value;
        }
        Ok(Customer {
            id: CustomerId(self.id),
            webstore,
            number: self.number,
            first_name: self.first_name,
            last_name: self.last_name,
            email: Email::from_trusted(self.email),
            delivery_service_id: self.delivery_service_id,
            address,
            password_hash: self.password_hash,
            halts,
            // Its own record: the caller reads it (`Store::account`).
            account: crate::domain::account::Account::opened(CustomerId(self.id), 0),
        })
    }
}

/// A customer as loaded: its record and its orders by id.
pub struct LoadedCustomer {
    /// The customer record (the caller places it in a webstore by the record's id).
    pub record: CustomerRecord,
    /// Its orders, by id.
    pub orders: Vec<Order>,
}

impl Store {
    /// Writes a new customer: its idempotency record if it has one, its email's index
    /// entry, its number's, then its record, one single-key write each (see the module on why
    /// the record is the commit point). The caller holds the email's claim, so no other
    /// writer touches that email meanwhile, and the key's turn, so no other request with the
    /// key reads the idempotency record before the customer is written. `on_durable` runs
    /// once the writes are durable (see [`OnDurable`]); until then the caller keeps the
    /// customer from its readers.
    pub fn create_customer(
        &self,
        customer: &Customer,
        webstore_id: &str,
        idempotency: Option<IdempotencyWrite>,
        event: Option<EventWrite>,
        on_durable: OnDurable,
    ) -> Result<Written, StoreError> {
        let entries = new_customer_entries(customer, webstore_id);
        let bytes = entries
            .iter()
            .map(|(key, value)| LogEntry::encoded_len(key, value))
            .sum();
        self.write_change(
            webstore_id,
            idempotency,
            event,
            on_durable,
            ChangeWrites {
                customer: customer.id.0,
                bytes,
                write: |store: &Store, _: &OpenForWrite<'_>, entry: &mut LogEntry| {
                    entries
                        .into_iter()
                        .try_for_each(|(key, value)| store.put(entry, &key, value))
                },
            },
        )
    }

    /// Writes a changed customer, its record alone when the email stays. An email change
    /// writes the customer's entry under the new email, then the record (the commit point),
    /// and leaves its entry under the old email: it names nobody once the record holds the
    /// new email (an entry counts only while its record holds that email), and a customer
    /// that takes the old email writes an entry of its own. Removing it would break a crash:
    /// the snapshot may keep a change whose log frame was lost while the replay of an earlier
    /// frame puts the old record back, and that record needs its entry. The caller holds the
    /// new email's claim. `also`, a record of another kind, goes in the same entry (the
    /// account, when a halt by hand is set or lifted).
    pub fn update_customer(
        &self,
        customer: &Customer,
        previous: &Customer,
        webstore_id: &str,
        event: Option<EventWrite>,
        also: Option<RecordWrite>,
        on_durable: OnDurable,
    ) -> Result<Written, StoreError> {
        let open = self.open_for_webstore(webstore_id)?;
        let record = readable(
            "customer",
            &CustomerRecord::from_customer(customer, webstore_id),
        )?;
        let (new_key, old_key) = (customer.email.index_key(), previous.email.index_key());
        let record_key = customer_key(customer.id.0);
        let holder_key = email_holder_key(webstore_id, &new_key, customer.id.0);
        open.fits(
            LogEntry::encoded_len(&record_key, &record)
                + LogEntry::encoded_len(&holder_key, &customer.id.0.to_be_bytes())
                + event.as_ref().map_or(0, EventWrite::encoded_len)
                + also.as_ref().map_or(0, RecordWrite::encoded_len),
        )?;
        let mut entry = open.entry();
        let sequence = self.put_event(&open, &mut entry, event)?;
        if new_key != old_key {
            self.put(
                &mut entry,
                &holder_key,
                customer.id.0.to_be_bytes().to_vec(),
            )?;
        }
        self.put(&mut entry, &record_key, record)?;
        if let Some(also) = also {
            also.put(self, &mut entry)?;
        }
        self.inner
            .tracking
            .note(webstore_id, Some(customer.id.0), None, sequence);
        open.commit_then(entry, on_durable)
    }

    /// The highest customer number of a webstore, or 0.
    pub fn last_number(&self, webstore_id: &str) -> Result<u64, StoreError> {
        let prefix = webstore_prefix(NUMBER, webstore_id);
        Ok(self
            .inner
            .storage
            .last(&prefix)?
            .and_then(|(key, _)| trailing_id(&key))
            .unwrap_or(0))
    }

    /// The ids of every customer of a webstore, in number order (id order for the
    /// customers of one host), read from the customer number index.
    pub fn customer_ids(&self, webstore_id: &str) -> Result<Vec<CustomerId>, StoreError> {
        let prefix = webstore_prefix(NUMBER, webstore_id);
        let mut ids = Vec::new();
        self.inner.storage.for_each(&prefix, &mut |_, value| {
            ids.extend(trailing_id(value).map(CustomerId));
            true
        })?;
        Ok(ids)
    }

    /// itself; [`Store::email_owner`] checks the records.
    pub fn email_entries(
        &self,
        webstore_id: &str,
        email_key: &str,
    ) -> Result<Vec<CustomerId>, StoreError> {
        let mut ids = Vec::new();
        self.inner
            .storage
            .for_each(&email_prefix(webstore_id, email_key), &mut |key, _| {
                ids.extend(trailing_id(key).map(CustomerId));
                true
            })?;
        Ok(ids)
    }

    /// The customer holding a folded email in a webstore: of the customers its entries name,
    /// the one whose record holds the email. An entry whose record was never written (a crash
    /// between the two) or has moved on to another email names nobody.
    pub fn email_owner(
        &self,
        webstore_id: &str,
        email_key: &str,
    ) -> Result<Option<CustomerId>, StoreError> {
        for id in self.email_entries(webstore_id, email_key)? {
            let holds = self.load_customer_record(id)?.is_some_and(|record| {
                record.webstore_id == webstore_id
                    && crate::domain::email::fold(&record.email) == email_key
            });
            if holds {
                return Ok(Some(id));
            }
        }
        Ok(None)
    }

    /// Whether a customer with this id is stored.
    pub fn has_customer(&self, id: CustomerId) -> Result<bool, StoreError> {
        Ok(self.inner.storage.get(&customer_key(id.0))?.is_some())
    }

    /// A customer's record alone, if stored (reads that need no actor).
    pub fn load_customer_record(
        &self,
        id: CustomerId,
    ) -> Result<Option<CustomerRecord>, StoreError> {
        let key = customer_key(id.0);
        self.inner
            .storage
            .get(&key)?
            .map(|bytes| decode(&bytes).map_err(|source| corrupt(&key, source)))
            .transpose()
    }

    /// A customer with its orders, if stored.
    pub fn load_customer(&self, id: CustomerId) -> Result<Option<LoadedCustomer>, StoreError> {
        let key = customer_key(id.0);
        let Some(bytes) = self.inner.storage.get(&key)? else {
            return Ok(None);
        };
        let record: CustomerRecord = decode(&bytes).map_err(|source| corrupt(&key, source))?;
        let mut orders = Vec::new();
        let mut failure = None;
        self.for_each_order_of(&order_chunks::orders_of(id.0), &mut |stored| {
            match stored.record.and_then(decode_order) {
                Ok(order) => orders.push(order),
                Err(source) => failure = Some(corrupt(stored.key, source)),
            }
            failure.is_none()
        })?;
        if let Some(error) = failure {
            return Err(error);
        }
        Ok(Some(LoadedCustomer { record, orders }))
    }

    /// A customer's record and the records of its orders (by id), if the customer is stored:
    /// what a move ships of a changed customer.
    pub fn customer_with_order_records(
        &self,
        id: CustomerId,
    ) -> Result<Option<(CustomerRecord, Vec<OrderRecord>)>, StoreError> {
        let Some(customer) = self.load_customer_record(id)? else {
            return Ok(None);
        };
        let mut orders = Vec::new();
        let mut failure = None;
        self.for_each_order_of(&order_chunks::orders_of(id.0), &mut |stored| {
            match stored.record.and_then(decode::<OrderRecord>) {
                Ok(record) => orders.push(record),
                Err(source) => failure = Some(corrupt(stored.key, source)),
            }
            failure.is_none()
        })?;
        failure.map_or(Ok(Some((customer, orders))), Err)
    }

    /// Calls `visit` with the id and webstore id of every stored customer with an id in
    /// `customers`, in id order; a record that does not decode is skipped (the census reports
    /// it).
    pub fn for_each_customer_webstore(
        &self,
        customers: std::ops::Range<u64>,
        visit: &mut dyn FnMut(CustomerId, &str),
    ) -> Result<(), StoreError> {
        let from = customer_key(customers.start);
        let to = customer_key(customers.end);
        self.inner
            .storage
            .for_each_between(&from, Some(&to), &mut |key, value| {
                if let (Some(id), Ok(record)) = (trailing_id(key), decode::<CustomerRecord>(value))
                {
                    visit(CustomerId(id), &record.webstore_id);
                }
                true
            })
    }

    /// Calls `visit` with every stored customer, in id order, until it returns false; the
    /// first record that does not decode is an error naming its key.
    pub fn for_each_customer(
        &self,
        visit: &mut dyn FnMut(CustomerRecord) -> bool,
    ) -> Result<(), StoreError> {
        self.for_each_record(CUSTOMER, &mut |_, bytes: &[u8]| {
            decode::<CustomerRecord>(bytes).map(&mut *visit)
        })
    }
}

/// The entries that store a new customer, in the order they must reach the store: its
/// email's index entry, its number's, then its record (the commit point; see the module). A
/// new customer is only ever put, never removed, so each entry is a key and its value.
fn new_customer_entries(customer: &Customer, webstore_id: &str) -> [(Vec<u8>, Vec<u8>); 3] {
    let id = customer.id.0.to_be_bytes().to_vec();
    [
        (
            email_holder_key(webstore_id, &customer.email.index_key(), customer.id.0),
            id.clone(),
        ),
        (number_key(webstore_id, customer.number), id),
        (
            customer_key(customer.id.0),
            encode(&CustomerRecord::from_customer(customer, webstore_id)),
        ),
    ]
}

/// Adds the writes that store a new customer to `batch` (`new_customer_entries`, in their
/// order). `boxsub-tools seed` writes customers through this, so the layout has one author.
pub fn add_new_customer(batch: &mut WriteBatch, customer: &Customer, webstore_id: &str) {
    for (key, value) in new_customer_entries(customer, webstore_id) {
        batch.put(key, value);
    }
}

/// Adds an imported customer record to `batch`, with its email's index entry and number.
pub fn add_customer_record(batch: &mut WriteBatch, record: &CustomerRecord) {
    let id = record.id.to_be_bytes().to_vec();
    batch.put(customer_key(record.id), encode(record));
    let email_key = crate::domain::email::fold(&record.email);
    batch.put(
        email_holder_key(&record.webstore_id, &email_key, record.id),
        id.clone(),
    );
    batch.put(number_key(&record.webstore_id, record.number), id);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn customer_record() -> impl Strategy<Value = CustomerRecord> {
        (
            any::<u64>(),
            "[a-z-]{1,20}",
            any::<u64>(),
            any::<String>(),
            proptest::option::of(any::<String>()),
            any::<String>(),
            any::<u64>(),
            proptest::collection::vec(proptest::option::of(any::<String>()), 9),
            proptest::option::of(any::<String>()),
        )
            .prop_map(
                |(
                    id,
                    webstore_id,
                    number,
                    first_name,
                    last_name,
                    email,
                    ds,
                    address,
                    password_hash,
                )| {
                    CustomerRecord {
                        id,
                        webstore_id,
                        number,
                        first_name,
                        last_name,
                        email,
                        delivery_service_id: ds,
                        address,
                        password_hash,
                        halts: Vec::new(),
                    }
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn customers_round_trip(record in customer_record()) {
            prop_assert_eq!(decode::<CustomerRecord>(&encode(&record)), Ok(record));
        }

        #[test]
        fn truncated_records_are_an_error(record in customer_record(), keep in any::<prop::sample::Index>()) {
            let bytes = encode(&record);
            let cut = keep.index(bytes.len());
            prop_assert!(decode::<CustomerRecord>(&bytes[..cut]).is_err());
        }
    }

    #[test]
    fn byte_order_is_numeric_order() {
        assert!(customer_key(255) < customer_key(256));
        assert!(number_key("a", 2) < number_key("a", 10));
        assert!(number_key("a", u64::MAX) < webstore_prefix(NUMBER, "a\u{1}"));
    }
}
