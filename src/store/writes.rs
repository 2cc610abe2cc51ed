//! The store's writes: which keys a change writes, in which order, each a single-key write
//! (see [`super::keys`] on commit points), under the guard that lets `close` wait for them,
//! and each recorded in the change's log entry, handed to group commit once the change is
//! made ([`super::log::wal`]); and the batch builders that `boxsub-tools seed` and imports share, so
//! that the layout has one author. Must not touch: durability (a writer waits for it through
//! the [`Written`] it gets back), reads.

use super::codec::{
    encode, CustomerRecord, EventRecord, IdempotencyRecord, OrderRecord, SessionRecord,
    WebhookPosition,
};
use super::log::wal::LogEntry;
use super::{keys, OnDurable, Store, StoreError, WriteBatch, Written};
use crate::domain::customer::Customer;
use crate::domain::idempotency::Pending;
use crate::domain::order::Order;
use crate::domain::ownership::Ownership;

/// An event as a change's writer puts it: its sequence number, and its key and value.
type EventEntry = (u64, (Vec<u8>, Vec<u8>));

/// An event to write in the same log entry as the change it tells of (see `crate::events`).
pub struct EventWrite {
    /// The webstore's id.
    pub webstore_id: String,
    /// Its sequence number in the webstore.
    pub sequence: u64,
    /// The event.
    pub record: EventRecord,
}

impl EventWrite {
    /// Its key and encoded record.
    fn entry(&self) -> (Vec<u8>, Vec<u8>) {
        (
            keys::event(&self.webstore_id, self.sequence),
            encode(&self.record),
        )
    }
}

/// Where a keyed create's idempotency record goes (see `Store::plan_idempotency`).
struct IdempotencyPlan {
    /// The client's key.
    name: String,
    key: Vec<u8>,
    record: Vec<u8>,
    /// The version of the key it replaces, removed with it.
    replaced: Option<Vec<u8>>,
}

impl IdempotencyPlan {
    /// What its writes add to the change's log entry.
    fn encoded_len(&self) -> usize {
        LogEntry::encoded_len(&self.key, &self.record)
            + self
                .replaced
                .as_ref()
                .map_or(0, |replaced| LogEntry::encoded_len(replaced, &[]))
    }
}

/// An idempotency record to write in the same batch as the record it answers for.
pub struct IdempotencyWrite {
    /// The webstore's id.
    pub webstore_id: String,
    /// The client's key.
    pub key: String,
    /// What to replay.
    pub record: IdempotencyRecord,
}

impl IdempotencyWrite {
    /// The record of a create that came with an idempotency key: the response rendered from
    /// the created record, to be written just before that record.
    pub fn rendered<T>(webstore_id: &str, pending: Pending<T>, created: &T, now: i64) -> Self {
        let response = (pending.render)(created);
        IdempotencyWrite {
            webstore_id: webstore_id.to_owned(),
            key: pending.key.as_str().to_owned(),
            record: IdempotencyRecord {
                body_sha256: pending.body_sha256.to_vec(),
                status: response.status,
                location: response.location,
                body: response.body,
                created_at: now,
            },
        }
    }
}

impl Store {
    /// Records that order ids up to `through` may be in use (see [`super::order_ids`]),
    /// in place of the reservation up to `previous`. Each reservation is a key of its own
    /// and the highest counts, so that a crash that keeps this write in the snapshot but
    /// loses its log frame cannot have the replay of an older reservation lower it again.
    pub fn reserve_order_ids(&self, previous: u64, through: u64) -> Result<Written, StoreError> {
        let open = self.open_for_writes()?;
        let mut entry = open.entry();
        self.put(&mut entry, &keys::order_ids_reserved(through), Vec::new())?;
        if previous < through {
            self.remove_key(&mut entry, &keys::order_ids_reserved(previous))?;
        }
        open.commit(entry)
    }

    /// Writes a new customer: its idempotency record if it has one, its email's index
    /// entry, its number's, then its record, one single-key write each (see [`keys`] on why
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
        let open = self.open_for_webstore(webstore_id)?;
        let idempotency = self.plan_idempotency(idempotency)?;
        let entries = new_customer_entries(customer, webstore_id);
        let event = event.map(|event| (event.sequence, event.entry()));
        let bytes = entries
            .iter()
            .chain(event.as_ref().map(|(_, entry)| entry))
            .map(|(key, value)| LogEntry::encoded_len(key, value))
            .sum::<usize>()
            + idempotency.as_ref().map_or(0, IdempotencyPlan::encoded_len);
        open.fits(bytes)?;
        let mut entry = open.entry();
        let key = idempotency.as_ref().map(|plan| plan.name.clone());
        self.put_idempotency(&mut entry, idempotency)?;
        let sequence = self.put_event(&open, &mut entry, event)?;
        for (key, value) in entries {
            self.put(&mut entry, &key, value)?;
        }
        // After the writes: see `tracking`.
        self.inner
            .tracking
            .note(webstore_id, Some(customer.id.0), key.as_deref(), sequence);
        open.commit_then(entry, on_durable)
    }

    /// Writes a changed customer, its record alone when the email stays. An email change
    /// writes the customer's entry under the new email, then the record (the commit point),
    /// and leaves its entry under the old email: it names nobody once the record holds the
    /// new email (an entry counts only while its record holds that email), and a customer
    /// that takes the old email writes an entry of its own. Removing it would break a crash:
    /// the snapshot may keep a change whose log frame was lost while the replay of an earlier
    /// frame puts the old record back, and that record needs its entry. The caller holds the
    /// new email's claim.
    pub fn update_customer(
        &self,
        customer: &Customer,
        previous: &Customer,
        webstore_id: &str,
        event: Option<EventWrite>,
        on_durable: OnDurable,
    ) -> Result<Written, StoreError> {
        let open = self.open_for_webstore(webstore_id)?;
        let record = encode(&CustomerRecord::from_customer(customer, webstore_id));
        let (new_key, old_key) = (customer.email.index_key(), previous.email.index_key());
        let record_key = keys::customer(customer.id.0);
        let holder_key = keys::email_holder(webstore_id, &new_key, customer.id.0);
        let event = event.map(|event| (event.sequence, event.entry()));
        open.fits(
            LogEntry::encoded_len(&record_key, &record)
                + LogEntry::encoded_len(&holder_key, &customer.id.0.to_be_bytes())
                + event
                    .as_ref()
                    .map_or(0, |(_, (key, value))| LogEntry::encoded_len(key, value)),
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
        self.inner
            .tracking
            .note(webstore_id, Some(customer.id.0), None, sequence);
        open.commit_then(entry, on_durable)
    }

    /// Writes a new order of a customer of webstore `webstore_id`: its idempotency record if
    /// it has one, then its record (the commit point), each a single-key write (see
    /// [`keys`]); the record may reach sled after the log, behind which it is already
    /// durable. `on_durable` runs once both are on disk (see [`OnDurable`]).
    ///
    /// An order is one record under its customer and nothing else: the order → customer
    /// index is kept in memory and rebuilt from these keys at start.
    pub fn create_order(
        &self,
        order: &Order,
        webstore_id: &str,
        idempotency: Option<IdempotencyWrite>,
        event: Option<EventWrite>,
        on_durable: OnDurable,
    ) -> Result<Written, StoreError> {
        let open = self.open_for_webstore(webstore_id)?;
        let idempotency = self.plan_idempotency(idempotency)?;
        let record = encode(&OrderRecord::from_order(order));
        let key = keys::order(order.customer_id.0, order.id.0);
        let event = event.map(|event| (event.sequence, event.entry()));
        open.fits(
            LogEntry::encoded_len(&key, &record)
                + idempotency.as_ref().map_or(0, IdempotencyPlan::encoded_len)
                + event
                    .as_ref()
                    .map_or(0, |(_, (key, value))| LogEntry::encoded_len(key, value)),
        )?;
        let mut entry = open.entry();
        let idempotency_key = idempotency.as_ref().map(|plan| plan.name.clone());
        self.put_idempotency(&mut entry, idempotency)?;
        let sequence = self.put_event(&open, &mut entry, event)?;
        if open.is_logged() {
            self.put_behind_log(&mut entry, &key, record)?;
        } else {
            self.put(&mut entry, &key, record)?;
        }
        self.inner.tracking.note(
            webstore_id,
            Some(order.customer_id.0),
            idempotency_key.as_deref(),
            sequence,
        );
        open.commit_then(entry, on_durable)
    }

    /// Where the idempotency record of a keyed create goes, and which version of its key it
    /// replaces: read before anything of the change is written, so that its size is known.
    /// A key is written only when its record no longer counts, and then under the next
    /// version, the one it replaces removed: a crash that keeps this write in the snapshot
    /// but loses its log frame cannot have the replay of the earlier version take it back
    /// (the last version counts).
    fn plan_idempotency(
        &self,
        idempotency: Option<IdempotencyWrite>,
    ) -> Result<Option<IdempotencyPlan>, StoreError> {
        let Some(write) = idempotency else {
            return Ok(None);
        };
        let replaced = self
            .inner
            .storage
            .last(&keys::idempotency(&write.webstore_id, &write.key))?;
        // Above the version it replaces, and above any an expiry sweep removed (those are
        // older than the clock's nanoseconds now), so that no earlier version of the key
        // comes back above this one.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| {
                u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
            });
        let version = replaced
            .as_ref()
            .and_then(|(key, _)| keys::idempotency_parts(key))
            .map_or(now, |(_, _, version)| now.max(version.saturating_add(1)));
        Ok(Some(IdempotencyPlan {
            name: write.key.clone(),
            key: keys::idempotency_version(&write.webstore_id, &write.key, version),
            record: encode(&write.record),
            replaced: replaced.map(|(key, _)| key),
        }))
    }

    /// Writes the idempotency record of a keyed create, before what it creates: a record
    /// whose customer or order was never written (a crash in between) is stale, and the
    /// service treats its key as free (`IdempotencyGate::once`).
    fn put_idempotency(
        &self,
        entry: &mut LogEntry,
        plan: Option<IdempotencyPlan>,
    ) -> Result<(), StoreError> {
        let Some(plan) = plan else {
            return Ok(());
        };
        self.put(entry, &plan.key, plan.record)?;
        if let Some(replaced) = plan.replaced {
            self.remove_key(entry, &replaced)?;
        }
        Ok(())
    }

    /// Writes a change's event (behind the log where there is one: an event is written once
    /// and then only read); its sequence number.
    fn put_event(
        &self,
        open: &super::Admitted<'_>,
        entry: &mut LogEntry,
        event: Option<EventEntry>,
    ) -> Result<Option<u64>, StoreError> {
        let Some((sequence, (key, value))) = event else {
            return Ok(None);
        };
        if open.is_logged() {
            self.put_behind_log(entry, &key, value)?;
        } else {
            self.put(entry, &key, value)?;
        }
        Ok(Some(sequence))
    }

    /// Sets `key` in the engine and records it in `entry`.
    fn put(&self, entry: &mut LogEntry, key: &[u8], value: Vec<u8>) -> Result<(), StoreError> {
        entry.set(key, &value);
        self.written(self.inner.storage.put(key, value))
    }

    /// Removes `key` in the engine and records it in `entry`.
    fn remove_key(&self, entry: &mut LogEntry, key: &[u8]) -> Result<(), StoreError> {
        entry.remove(key);
        self.written(self.inner.storage.remove(key))
    }

    /// Sets `key` and records it in `entry`, letting the engine apply it later, since the
    /// log makes it durable (see `Storage::put_pending`): an order record, written once by
    /// its customer's actor and then only read. Only for writes that go through the log.
    fn put_behind_log(
        &self,
        entry: &mut LogEntry,
        key: &[u8],
        value: Vec<u8>,
    ) -> Result<(), StoreError> {
        entry.set(key, &value);
        self.written(self.inner.storage.put_pending(key, value))
    }

    /// Records where webhook endpoint `endpoint` of `webstore_id` stands, durably once the
    /// answer completes (even while the disk refuses writes: the record only replaces its
    /// earlier self; not while the webstore is frozen, as its move's last round may have
    /// carried the record already).
    pub fn set_webhook_position(
        &self,
        webstore_id: &str,
        endpoint: &str,
        record: &WebhookPosition,
    ) -> Result<Written, StoreError> {
        let open = self.open_for_webstore_even_if_refused(webstore_id)?;
        let mut entry = open.entry();
        self.put(
            &mut entry,
            &keys::webhook_position(webstore_id, endpoint),
            encode(record),
        )?;
        open.commit(entry)
    }

    /// Stores producer session `digest` (see [`keys::session`]); durable once the answer
    /// completes. Not while its webstore is frozen.
    pub fn put_session(
        &self,
        digest: &[u8; 32],
        record: &SessionRecord,
    ) -> Result<Written, StoreError> {
        let open = self.open_for_webstore(&record.webstore_id)?;
        let mut entry = open.entry();
        self.put(&mut entry, &keys::session(digest), encode(record))?;
        open.commit(entry)
    }

    /// Removes producer session `digest` of webstore `webstore_id` (even while the disk
    /// refuses writes: it ends a session and frees space; not while the webstore is frozen,
    /// as its move's last round may have carried the session already); durable once the
    /// answer completes.
    pub fn remove_session(
        &self,
        webstore_id: &str,
        digest: &[u8; 32],
    ) -> Result<Written, StoreError> {
        let open = self.open_for_webstore_even_if_refused(webstore_id)?;
        let mut entry = open.entry();
        self.remove_key(&mut entry, &keys::session(digest))?;
        open.commit(entry)
    }

    /// Records the operator's request that endpoint `endpoint` of `webstore_id` deliver again
    /// the events after sequence number `after` (see [`Store::redelivery`]); durable once the
    /// answer completes. Not while the webstore is frozen.
    pub fn request_redelivery(
        &self,
        webstore_id: &str,
        endpoint: &str,
        after: u64,
    ) -> Result<Written, StoreError> {
        let open = self.open_for_webstore(webstore_id)?;
        let mut entry = open.entry();
        let key = keys::redelivery(webstore_id, endpoint);
        self.put(&mut entry, &key, after.to_be_bytes().to_vec())?;
        open.commit(entry)
    }

    /// Forgets a redelivery request, taken up by the endpoint's deliveries (not while the
    /// webstore is frozen).
    pub fn clear_redelivery(
        &self,
        webstore_id: &str,
        endpoint: &str,
    ) -> Result<Written, StoreError> {
        let open = self.open_for_webstore_even_if_refused(webstore_id)?;
        let mut entry = open.entry();
        self.remove_key(&mut entry, &keys::redelivery(webstore_id, endpoint))?;
        open.commit(entry)
    }

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
        let marker_key = keys::events_pruned(webstore_id);
        let max_bytes = self.max_entry_bytes().unwrap_or(usize::MAX);
        let mut bytes = LogEntry::encoded_len(&marker_key, &u64::MAX.to_be_bytes());
        let mut doomed = Vec::new();
        let mut through = pruned;
        self.for_each_event(webstore_id, pruned, u64::MAX, &mut |sequence, record| {
            if record.created_at_ms >= before_ms {
                return false;
            }
            let key = keys::event(webstore_id, sequence);
            let size = LogEntry::encoded_len(&key, &[]);
            if bytes + size > max_bytes {
                return false;
            }
            bytes += size;
            doomed.push(key);
            through = sequence;
            doomed.len() < max
        })?;
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

    /// Records, durably once the answer completes, what this shard holds of webstore `id`'s
    /// ownership.
    pub fn set_ownership(&self, id: &str, ownership: Ownership) -> Result<Written, StoreError> {
        let open = self.open_for_writes()?;
        let mut entry = open.entry();
        self.put(&mut entry, &keys::ownership(id), vec![ownership.to_byte()])?;
        open.commit(entry)
    }

    /// Forgets what this shard records of webstore `id`'s ownership (a move called off).
    pub fn clear_ownership(&self, id: &str) -> Result<Written, StoreError> {
        let open = self.open_even_if_refused()?;
        let mut entry = open.entry();
        self.remove_key(&mut entry, &keys::ownership(id))?;
        open.commit(entry)
    }

    /// Removes everything of webstore `id` (its customers, their orders, its email, number
    /// and idempotency entries, its events and their events-pruned mark, its webhook
    /// webhook positions and redelivery requests) in logged batches of removals, each within
    /// the log's limit:
    /// what a shard does once it has released a webstore to another, so that nothing of it
    /// can be served or exported here by mistake. How many keys it removed.
    pub fn purge_webstore(&self, id: &str) -> Result<u64, StoreError> {
        let mut doomed: Vec<Vec<u8>> = Vec::new();
        let storage = &self.inner.storage;
        for customer in self.customer_ids(id)? {
            doomed.push(keys::customer(customer.0));
            storage.for_each(&keys::orders_of(customer.0), &mut |key, _| {
                doomed.push(key.to_vec());
                true
            })?;
        }
        for prefix in [
            keys::EMAIL,
            keys::NUMBER,
            keys::IDEMPOTENCY,
            keys::EVENT,
            keys::WEBHOOK_POSITION,
            keys::REDELIVERY,
        ] {
            storage.for_each(&keys::webstore_prefix(prefix, id), &mut |key, _| {
                doomed.push(key.to_vec());
                true
            })?;
        }
        // Its producers' sessions (keyed by digest alone: found by the webstore they name).
        self.for_each_session(&mut |digest, record| {
            if record.webstore_id == id {
                doomed.push(keys::session(&digest));
            }
            true
        })?;
        // The mark too (it lives among the meta keys, not under the webstore's prefixes):
        // it counts in where the webstore's numbering continues, and an import brings its
        // own.
        if storage.get(&keys::events_pruned(id))?.is_some() {
            doomed.push(keys::events_pruned(id));
        }
        let removed = doomed.len() as u64;
        let max_bytes = self.max_entry_bytes().unwrap_or(usize::MAX);
        let mut batch = WriteBatch::default();
        let mut bytes = 0;
        for key in doomed {
            let size = LogEntry::encoded_len(&key, &[]);
            if !batch.is_empty() && (batch.len() >= 1_000 || bytes + size > max_bytes) {
                self.remove(std::mem::take(&mut batch))?;
                bytes = 0;
            }
            bytes += size;
            batch.delete(key);
        }
        if !batch.is_empty() {
            self.remove(batch)?;
        }
        Ok(removed)
    }

    /// Writes a batch of removals, even while writes are refused: removing gives space back
    /// (an import that stopped part-way takes back what it wrote). Tools run it on a stopped
    /// server's store and close the store to make it durable.
    pub fn remove(&self, batch: WriteBatch) -> Result<(), StoreError> {
        if batch.ops().any(|(_, value)| value.is_some()) {
            return Err(StoreError::Engine {
                context: "removing records".into(),
                detail: "a batch of removals holds a write".into(),
            });
        }
        let open = self.open_even_if_refused()?;
        let mut entry = open.entry();
        for (key, _) in batch.ops() {
            entry.remove(key);
        }
        open.fits(entry.len())?;
        self.written(self.inner.storage.apply(batch))?;
        drop(open.commit(entry)?);
        Ok(())
    }

    /// Sets one raw entry (tests that build a store's state key by key, as a crash can
    /// leave it).
    pub fn put_raw(&self, key: &[u8], value: Vec<u8>) -> Result<(), StoreError> {
        let open = self.open_for_writes()?;
        let mut entry = open.entry();
        self.put(&mut entry, key, value)?;
        drop(open.commit(entry)?);
        Ok(())
    }

    /// Writes raw entries in one batch (test generators and tools, which close the store to
    /// make them durable).
    pub fn apply(&self, batch: WriteBatch) -> Result<(), StoreError> {
        let open = self.open_for_writes()?;
        let mut entry = open.entry();
        for (key, value) in batch.ops() {
            match value {
                Some(value) => entry.set(key, value),
                None => entry.remove(key),
            }
        }
        open.fits(entry.len())?;
        self.written(self.inner.storage.apply(batch))?;
        drop(open.commit(entry)?);
        Ok(())
    }
}

/// The entries that store a new customer, in the order they must reach the store: its
/// email's index entry, its number's, then its record (the commit point; see [`keys`]). A
/// new customer is only ever put, never removed, so each entry is a key and its value.
fn new_customer_entries(customer: &Customer, webstore_id: &str) -> [(Vec<u8>, Vec<u8>); 3] {
    let id = customer.id.0.to_be_bytes().to_vec();
    [
        (
            keys::email_holder(webstore_id, &customer.email.index_key(), customer.id.0),
            id.clone(),
        ),
        (keys::number(webstore_id, customer.number), id),
        (
            keys::customer(customer.id.0),
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

/// Adds an order's record to `batch` (its one write; see [`Store::create_order`]).
pub fn add_order(batch: &mut WriteBatch, order: &Order) {
    batch.put(
        keys::order(order.customer_id.0, order.id.0),
        encode(&OrderRecord::from_order(order)),
    );
}

/// Adds an imported customer record to `batch`, with its email's index entry and number.
pub fn add_customer_record(batch: &mut WriteBatch, record: &CustomerRecord) {
    let id = record.id.to_be_bytes().to_vec();
    batch.put(keys::customer(record.id), encode(record));
    let email_key = crate::domain::email::fold(&record.email);
    batch.put(
        keys::email_holder(&record.webstore_id, &email_key, record.id),
        id.clone(),
    );
    batch.put(keys::number(&record.webstore_id, record.number), id);
}

/// Adds an imported order record to `batch`.
pub fn add_order_record(batch: &mut WriteBatch, record: &OrderRecord) {
    batch.put(keys::order(record.customer_id, record.id), encode(record));
}

/// Adds an imported idempotency record to `batch`.
pub fn add_idempotency_record(
    batch: &mut WriteBatch,
    webstore_id: &str,
    key: &str,
    record: &IdempotencyRecord,
) {
    batch.put(
        keys::idempotency_version(webstore_id, key, 1),
        encode(record),
    );
}

/// Adds an imported event to `batch`.
pub fn add_event_record(
    batch: &mut WriteBatch,
    webstore_id: &str,
    sequence: u64,
    record: &EventRecord,
) {
    batch.put(keys::event(webstore_id, sequence), encode(record));
}

/// Adds an imported webhook position to `batch`.
pub fn add_webhook_position(
    batch: &mut WriteBatch,
    webstore_id: &str,
    endpoint: &str,
    record: &WebhookPosition,
) {
    batch.put(
        keys::webhook_position(webstore_id, endpoint),
        encode(record),
    );
}

/// Adds an imported producer session to `batch`.
pub fn add_session_record(batch: &mut WriteBatch, digest: &[u8; 32], record: &SessionRecord) {
    batch.put(keys::session(digest), encode(record));
}

/// Adds an imported events-pruned mark to `batch`: `webstore_id`'s events up to sequence
/// number `through` were removed past the retention (see [`Store::events_pruned_through`]).
pub fn add_events_pruned(batch: &mut WriteBatch, webstore_id: &str, through: u64) {
    batch.put(
        keys::events_pruned(webstore_id),
        through.to_be_bytes().to_vec(),
    );
}
