//! The store's reads: single records, the scans that rebuild the in-memory indexes at start,
//! the exports' walks over every record, and the census of `--verify-store`. A record that
//! does not decode is an error naming its key. Must not touch: writes (`writes`), the
//! store's life (`super`).

use super::codec::{
    decode, CodecError, CustomerRecord, EventRecord, IdempotencyRecord, OrderRecord, SessionRecord,
    WebhookPosition,
};
use super::error::corrupt;
use super::pending::event_chunks;
use super::pending::order_chunks::{for_each_stored_order, stored_order, StoredOrder};
use super::snapshot::prefix_end;
use super::{keys, Store, StoreError};
use crate::domain::ids::{CustomerId, OrderId};
use crate::domain::order::Order;
use crate::domain::ownership::Ownership;
use crate::domain::schedule::{Frequency, Schedule};

/// Visits one stored record (key, value): whether to go on, or why it does not decode.
type RecordVisitor<'a> = dyn FnMut(&[u8], &[u8]) -> Result<bool, CodecError> + 'a;

/// A customer as loaded: its record and its orders by id.
pub struct LoadedCustomer {
    /// The customer record (the caller places it in a webstore by the record's id).
    pub record: CustomerRecord,
    /// Its orders, by id.
    pub orders: Vec<Order>,
}

/// What [`Store::verify`] counted.
#[derive(Debug, Clone, Copy, Default)]
pub struct Census {
    /// Customer records.
    pub customers: u64,
    /// Order records.
    pub orders: u64,
    /// Idempotency records.
    pub idempotency_records: u64,
}

impl Store {
    /// The highest customer number of a webstore, or 0.
    pub fn last_number(&self, webstore_id: &str) -> Result<u64, StoreError> {
        let prefix = keys::webstore_prefix(keys::NUMBER, webstore_id);
        Ok(self
            .inner
            .storage
            .last(&prefix)?
            .and_then(|(key, _)| keys::trailing_id(&key))
            .unwrap_or(0))
    }

    /// Reads and decodes every customer, order and idempotency record, counting them; the
    /// first record that does not decode is an error naming its key.
    pub fn verify(&self) -> Result<Census, StoreError> {
        let mut census = Census::default();
        let mut failure = None;
        let mut check =
            |prefix: u8, count: &mut u64, decodes: fn(&[u8]) -> Result<(), CodecError>| {
                self.inner
                    .storage
                    .for_each(&[prefix], &mut |key, value| match decodes(value) {
                        Ok(()) => {
                            *count += 1;
                            true
                        }
                        Err(source) => {
                            failure = Some(corrupt(key, source));
                            false
                        }
                    })
            };
        check(keys::CUSTOMER, &mut census.customers, |v| {
            decode::<CustomerRecord>(v).map(drop)
        })?;
        if failure.is_none() {
            // Every version decodes; the census counts keys (their last versions).
            self.for_each_idempotency(&mut |_, _, _| {
                census.idempotency_records += 1;
                true
            })?;
        }
        if failure.is_none() {
            self.for_each_order_of(&[keys::ORDER], &mut |stored| {
                match stored.record.and_then(decode_order) {
                    Ok(_) => census.orders += 1,
                    Err(source) => failure = Some(corrupt(stored.key, source)),
                }
                failure.is_none()
            })?;
        }
        match failure {
            Some(error) => Err(error),
            None => Ok(census),
        }
    }

    /// The ids of every customer of a webstore, in number order (id order for the
    /// customers of one host), read from the customer number index.
    pub fn customer_ids(&self, webstore_id: &str) -> Result<Vec<CustomerId>, StoreError> {
        let prefix = keys::webstore_prefix(keys::NUMBER, webstore_id);
        let mut ids = Vec::new();
        self.inner.storage.for_each(&prefix, &mut |_, value| {
            ids.extend(keys::trailing_id(value).map(CustomerId));
            true
        })?;
        Ok(ids)
    }

    /// The customers a folded email's index entries name, unchecked: one entry for each
    /// customer that has held the email (see [`keys::email_holder`]), including entries left
    /// by a write a crash cut short. A caller that reads the customer anyway checks its email
    /// Every webstore whose ownership this shard records, with what it records.
    pub fn ownership_records(&self) -> Result<Vec<(String, Ownership)>, StoreError> {
        let mut records = Vec::new();
        self.inner
            .storage
            .for_each(&[keys::OWNERSHIP], &mut |key, value| {
                let id = String::from_utf8_lossy(&key[1..]).into_owned();
                if let Some(ownership) = value.first().copied().and_then(Ownership::from_byte) {
                    records.push((id, ownership));
                }
                true
            })?;
        Ok(records)
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
            .for_each(&keys::email(webstore_id, email_key), &mut |key, _| {
                ids.extend(keys::trailing_id(key).map(CustomerId));
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

    /// One stored order of a customer.
    pub fn load_order(
        &self,
        customer: CustomerId,
        order: OrderId,
    ) -> Result<Option<Order>, StoreError> {
        let key = keys::order(customer.0, order.0);
        stored_order(&*self.inner.storage, customer.0, order.0)?
            .map(|bytes| decode_order(&bytes).map_err(|source| corrupt(&key, source)))
            .transpose()
    }

    /// Calls `visit` with each order stored under keys starting with `prefix` (see
    /// [`for_each_stored_order`]) until it returns false.
    fn for_each_order_of(
        &self,
        prefix: &[u8],
        visit: &mut dyn FnMut(StoredOrder<'_>) -> bool,
    ) -> Result<(), StoreError> {
        let end = prefix_end(prefix);
        for_each_stored_order(&*self.inner.storage, prefix, end.as_deref(), visit)
    }

    /// Calls `visit` with the id, owner and schedule of every stored order of the customers
    /// with ids in `customers`, in key order (how the in-memory order indexes are rebuilt at
    /// start; disjoint ranges can be scanned at once). An order whose record does not decode
    /// comes with its error instead of its schedule.
    pub fn for_each_order_schedule(
        &self,
        customers: std::ops::Range<u64>,
        visit: &mut dyn FnMut(OrderId, CustomerId, Result<(Frequency, Schedule), StoreError>),
    ) -> Result<(), StoreError> {
        let from = keys::orders_of(customers.start);
        let to = keys::orders_of(customers.end);
        for_each_stored_order(&*self.inner.storage, &from, Some(&to), &mut |stored| {
            let schedule = stored
                .record
                .and_then(decode_order)
                .map(|order| (order.details.frequency, order.details.schedule))
                .map_err(|source| corrupt(stored.key, source));
            visit(OrderId(stored.id), CustomerId(stored.customer), schedule);
            true
        })
    }

    /// How many orders customer `customer` has stored.
    pub fn order_count(&self, customer: CustomerId) -> Result<u64, StoreError> {
        let from = keys::orders_of(customer.0);
        let to = keys::orders_of(customer.0 + 1);
        let mut count = 0;
        for_each_stored_order(&*self.inner.storage, &from, Some(&to), &mut |_| {
            count += 1;
            true
        })?;
        Ok(count)
    }

    /// Calls `visit` with the id and webstore id of every stored customer with an id in
    /// `customers`, in id order; a record that does not decode is skipped (the census reports
    /// it).
    pub fn for_each_customer_webstore(
        &self,
        customers: std::ops::Range<u64>,
        visit: &mut dyn FnMut(CustomerId, &str),
    ) -> Result<(), StoreError> {
        let from = keys::customer(customers.start);
        let to = keys::customer(customers.end);
        self.inner
            .storage
            .for_each_between(&from, Some(&to), &mut |key, value| {
                if let (Some(id), Ok(record)) =
                    (keys::trailing_id(key), decode::<CustomerRecord>(value))
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
        self.for_each_record(keys::CUSTOMER, &mut |_, bytes: &[u8]| {
            decode::<CustomerRecord>(bytes).map(&mut *visit)
        })
    }

    /// Calls `visit` with every stored order, by customer id then order id, until it returns
    /// false; the first record that does not decode is an error naming its key.
    pub fn for_each_order(
        &self,
        visit: &mut dyn FnMut(OrderRecord) -> bool,
    ) -> Result<(), StoreError> {
        let mut failure = None;
        self.for_each_order_of(&[keys::ORDER], &mut |stored| match stored
            .record
            .and_then(decode::<OrderRecord>)
        {
            Ok(record) => visit(record),
            Err(source) => {
                failure = Some(corrupt(stored.key, source));
                false
            }
        })?;
        failure.map_or(Ok(()), Err)
    }

    /// Calls `visit` with the webstore id, client key and record of every stored
    /// idempotency record (the last version of each key, see [`keys::idempotency_version`]),
    /// in key order, until it returns false.
    pub fn for_each_idempotency(
        &self,
        visit: &mut dyn FnMut(&str, &str, IdempotencyRecord) -> bool,
    ) -> Result<(), StoreError> {
        // A key's versions come together, lowest first: each is handed on once the next
        // entry shows it was the key's last.
        let mut held: Option<(String, String, IdempotencyRecord)> = None;
        let mut more = true;
        self.for_each_record(keys::IDEMPOTENCY, &mut |key, bytes: &[u8]| {
            let record = decode::<IdempotencyRecord>(bytes)?;
            let Some((webstore_id, client_key, _)) = keys::idempotency_parts(key) else {
                return Err(CodecError::NotARecord);
            };
            if let Some((held_webstore, held_key, held_record)) = held.take() {
                if (held_webstore.as_str(), held_key.as_str()) != (webstore_id, client_key) {
                    more = visit(&held_webstore, &held_key, held_record);
                }
            }
            held = Some((webstore_id.to_owned(), client_key.to_owned(), record));
            Ok(more)
        })?;
        if let (true, Some((webstore_id, client_key, record))) = (more, held) {
            visit(&webstore_id, &client_key, record);
        }
        Ok(())
    }

    fn for_each_record(&self, prefix: u8, visit: &mut RecordVisitor<'_>) -> Result<(), StoreError> {
        let mut failure = None;
        self.inner
            .storage
            .for_each(&[prefix], &mut |key, value| match visit(key, value) {
                Ok(more) => more,
                Err(source) => {
                    failure = Some(corrupt(key, source));
                    false
                }
            })?;
        failure.map_or(Ok(()), Err)
    }

    /// Calls `visit` with the id of every stored order (imports check theirs against these).
    pub fn for_each_order_id(&self, visit: &mut dyn FnMut(OrderId)) -> Result<(), StoreError> {
        self.for_each_order_of(&[keys::ORDER], &mut |stored| {
            visit(OrderId(stored.id));
            true
        })
    }

    /// Whether a customer with this id is stored.
    pub fn has_customer(&self, id: CustomerId) -> Result<bool, StoreError> {
        Ok(self.inner.storage.get(&keys::customer(id.0))?.is_some())
    }

    /// Whether an idempotency record is stored under this webstore and key.
    pub fn has_idempotency(&self, webstore_id: &str, key: &str) -> Result<bool, StoreError> {
        Ok(self
            .inner
            .storage
            .last(&keys::idempotency(webstore_id, key))?
            .is_some())
    }

    /// A stored idempotency record: the last version of the key's (see
    /// [`keys::idempotency_version`]).
    pub fn idempotency(
        &self,
        webstore_id: &str,
        key: &str,
    ) -> Result<Option<IdempotencyRecord>, StoreError> {
        self.inner
            .storage
            .last(&keys::idempotency(webstore_id, key))?
            .map(|(store_key, bytes)| decode(&bytes).map_err(|source| corrupt(&store_key, source)))
            .transpose()
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
        self.for_each_order_of(&keys::orders_of(id.0), &mut |stored| {
            match stored.record.and_then(decode::<OrderRecord>) {
                Ok(record) => orders.push(record),
                Err(source) => failure = Some(corrupt(stored.key, source)),
            }
            failure.is_none()
        })?;
        failure.map_or(Ok(Some((customer, orders))), Err)
    }

    /// The highest sequence number of `webstore_id`'s events the store holds or has pruned
    /// (0 for none): where their numbering continues.
    pub fn last_event_sequence(&self, webstore_id: &str) -> Result<u64, StoreError> {
        let stored = event_chunks::last_stored_event(
            &*self.inner.storage,
            &keys::webstore_prefix(keys::EVENT, webstore_id),
        )?;
        Ok(stored.max(self.events_pruned_through(webstore_id)?))
    }

    /// The highest sequence number of `webstore_id`'s events the retention sweep removed.
    pub fn events_pruned_through(&self, webstore_id: &str) -> Result<u64, StoreError> {
        Ok(self
            .inner
            .storage
            .get(&keys::events_pruned(webstore_id))?
            .and_then(|value| keys::trailing_id(&value))
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
        let group = keys::webstore_prefix(keys::EVENT, webstore_id);
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

    /// The sequence number after which the operator asked endpoint `endpoint` of
    /// `webstore_id` to deliver again, if that request is not taken up yet.
    pub fn redelivery(&self, webstore_id: &str, endpoint: &str) -> Result<Option<u64>, StoreError> {
        Ok(self
            .inner
            .storage
            .get(&keys::redelivery(webstore_id, endpoint))?
            .and_then(|value| keys::trailing_id(&value)))
    }

    /// Producer session `digest`, if stored.
    pub fn session(&self, digest: &[u8; 32]) -> Result<Option<SessionRecord>, StoreError> {
        let key = keys::session(digest);
        self.inner
            .storage
            .get(&key)?
            .map(|bytes| decode(&bytes).map_err(|source| corrupt(&key, source)))
            .transpose()
    }

    /// Calls `visit` with every stored producer session (its digest and record) until it
    /// returns false; the first that does not decode is an error naming its key.
    pub fn for_each_session(
        &self,
        visit: &mut dyn FnMut([u8; 32], SessionRecord) -> bool,
    ) -> Result<(), StoreError> {
        let mut failure = None;
        self.inner
            .storage
            .for_each(&[keys::SESSION], &mut |key, value| {
                let digest: Option<[u8; 32]> = key.get(1..).and_then(|d| d.try_into().ok());
                let Some(digest) = digest else {
                    return true;
                };
                match decode(value) {
                    Ok(record) => visit(digest, record),
                    Err(source) => {
                        failure = Some(corrupt(key, source));
                        false
                    }
                }
            })?;
        failure.map_or(Ok(()), Err)
    }

    /// Where webhook endpoint `endpoint` of `webstore_id` stands, if it has delivered or
    /// failed anything yet.
    pub fn webhook_position(
        &self,
        webstore_id: &str,
        endpoint: &str,
    ) -> Result<Option<WebhookPosition>, StoreError> {
        let key = keys::webhook_position(webstore_id, endpoint);
        self.inner
            .storage
            .get(&key)?
            .map(|bytes| decode(&bytes).map_err(|source| corrupt(&key, source)))
            .transpose()
    }

    /// A customer's record alone, if stored (reads that need no actor).
    pub fn load_customer_record(
        &self,
        id: CustomerId,
    ) -> Result<Option<CustomerRecord>, StoreError> {
        let key = keys::customer(id.0);
        self.inner
            .storage
            .get(&key)?
            .map(|bytes| decode(&bytes).map_err(|source| corrupt(&key, source)))
            .transpose()
    }

    /// A customer with its orders, if stored.
    pub fn load_customer(&self, id: CustomerId) -> Result<Option<LoadedCustomer>, StoreError> {
        let key = keys::customer(id.0);
        let Some(bytes) = self.inner.storage.get(&key)? else {
            return Ok(None);
        };
        let record: CustomerRecord = decode(&bytes).map_err(|source| corrupt(&key, source))?;
        let mut orders = Vec::new();
        let mut failure = None;
        self.for_each_order_of(&keys::orders_of(id.0), &mut |stored| {
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

    /// The ids of the webstores that have events, an events-pruned mark, webhook delivery
    /// records, redelivery requests or producer sessions in the store, in order (a
    /// whole-store export carries these webstore by webstore). One seek per webstore and
    /// prefix, not a read of every event.
    pub fn webstores_with_events(&self) -> Result<Vec<String>, StoreError> {
        let mut found = std::collections::BTreeSet::new();
        for prefix in [keys::EVENT, keys::WEBHOOK_POSITION, keys::REDELIVERY] {
            let end = prefix_end(&[prefix]);
            let mut from = vec![prefix];
            loop {
                let mut first = None;
                self.inner
                    .storage
                    .for_each_between(&from, end.as_deref(), &mut |key, _| {
                        first = Some(key.to_vec());
                        false
                    })?;
                let Some(key) = first else {
                    break;
                };
                // `prefix` + webstore id + 0 + the rest: a webstore id holds no 0 byte, so
                // the next webstore's keys start past `prefix` + id + 1.
                let Some(length) = key[1..].iter().position(|&byte| byte == 0) else {
                    // Not a key of this layout: go on right after it.
                    from = [key.as_slice(), &[0]].concat();
                    continue;
                };
                if let Ok(id) = std::str::from_utf8(&key[1..1 + length]) {
                    found.insert(id.to_owned());
                }
                match prefix_end(&key[..1 + length + 1]) {
                    Some(next) => from = next,
                    None => break,
                }
            }
        }
        self.inner
            .storage
            .for_each(keys::EVENTS_PRUNED, &mut |key, _| {
                if let Ok(id) = std::str::from_utf8(&key[keys::EVENTS_PRUNED.len()..]) {
                    found.insert(id.to_owned());
                }
                true
            })?;
        self.for_each_session(&mut |_, record| {
            found.insert(record.webstore_id);
            true
        })?;
        Ok(found.into_iter().collect())
    }

    /// Calls `visit` with each webhook endpoint of `webstore_id` that has a webhook position,
    /// and that record, in endpoint order, until it returns false; the first that does not
    /// decode is an error naming its key.
    pub fn for_each_webhook_position(
        &self,
        webstore_id: &str,
        visit: &mut dyn FnMut(&str, WebhookPosition) -> bool,
    ) -> Result<(), StoreError> {
        self.for_each_of_endpoint(keys::WEBHOOK_POSITION, webstore_id, decode, visit)
    }

    /// Calls `visit` with each webhook endpoint of `webstore_id` that has a redelivery asked
    /// and not yet taken up, and the sequence number to deliver after, in endpoint order,
    /// until it returns false; the first that does not decode is an error naming its key.
    pub fn for_each_redelivery(
        &self,
        webstore_id: &str,
        visit: &mut dyn FnMut(&str, u64) -> bool,
    ) -> Result<(), StoreError> {
        let after = |value: &[u8]| {
            keys::trailing_id(value)
                .ok_or_else(|| CodecError::Payload("not a big-endian sequence number".into()))
        };
        self.for_each_of_endpoint(keys::REDELIVERY, webstore_id, after, visit)
    }

    /// Calls `visit` with each endpoint id under `kind`'s keys of `webstore_id` and its value
    /// as `read` makes it, in endpoint order, until it returns false; the first key or value
    /// that does not decode is an error naming its key.
    fn for_each_of_endpoint<T>(
        &self,
        kind: u8,
        webstore_id: &str,
        read: impl Fn(&[u8]) -> Result<T, CodecError>,
        visit: &mut dyn FnMut(&str, T) -> bool,
    ) -> Result<(), StoreError> {
        let prefix = keys::webstore_prefix(kind, webstore_id);
        let mut failure = None;
        self.inner.storage.for_each(&prefix, &mut |key, value| {
            let endpoint = std::str::from_utf8(&key[prefix.len()..])
                .map_err(|_| CodecError::Payload("the endpoint id in its key is not text".into()));
            match endpoint.and_then(|endpoint| Ok((endpoint, read(value)?))) {
                Ok((endpoint, found)) => visit(endpoint, found),
                Err(source) => {
                    failure = Some(corrupt(key, source));
                    false
                }
            }
        })?;
        failure.map_or(Ok(()), Err)
    }
}

/// An order from its encoded record.
fn decode_order(bytes: &[u8]) -> Result<Order, CodecError> {
    decode::<OrderRecord>(bytes).and_then(OrderRecord::into_order)
}
