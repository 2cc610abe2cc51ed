//! Persistence: boxsub's state in one sled tree (layout in [`keys`]), records encoded as in
//! [`codec`], writes made durable by group commit ([`commit`]). [`Store`] is the repository
//! the registry and the customer actors use: it knows which keys a change writes and which of
//! them must be unique. The engine sits behind the small [`Storage`] trait ([`storage`],
//! implemented by [`sled_engine`]) so that tests can inject faults; [`StoreError`] is this
//! layer's one error type ([`error`]).
//!
//! Must not touch: actors, the registry's maps, HTTP.

pub mod codec;
pub mod commit;
pub mod disk;
mod error;
pub mod expiry;
pub mod keys;
mod opening;
pub mod order_ids;
pub mod repair;
mod sled_engine;
mod storage;

use std::path::Path;
use std::sync::{Arc, RwLock, RwLockReadGuard};
use std::time::Duration;

use codec::{decode, encode, CodecError, CustomerRecord, IdempotencyRecord, OrderRecord};
use commit::{Committer, FatalHandler};
use disk::{DiskState, DiskWatch, Reserve};
use error::corrupt;

pub use error::StoreError;
pub use sled_engine::SledStorage;
pub use storage::{Entry, Storage, WriteBatch};

use crate::domain::customer::Customer;
use crate::domain::idempotency::Pending;
use crate::domain::ids::{CustomerId, IdRange, OrderId};
use crate::domain::order::{Frequency, Order};
use crate::domain::schedule::Schedule;

/// Whether a write is acknowledged only once it is on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Wait for group commit before answering (the default); under heavy load a sync may
    /// wait up to `commit_interval` for writers to gather (see [`commit`]).
    Sync {
        /// How long after a busy sync's start the next may wait for writers; zero for never.
        commit_interval: Duration,
    },
    /// Answer at once; sled flushes in the background. Loses recent writes on a crash.
    Async,
}

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

/// What `open` found.
#[derive(Debug, Clone, Copy)]
pub struct HighWater {
    /// Highest customer id stored in this host's id range, or one below the range's first.
    pub customer_id: u64,
    /// Highest order id reserved in this host's id range (every order id this host gave out
    /// is at most this), or one below the range's first.
    pub order_id: u64,
    /// Highest customer id stored, from any range (imported customers included), or 0.
    pub any_customer_id: u64,
    /// Whether the store holds any order.
    pub has_orders: bool,
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

/// boxsub's persistent state, shared by the registry and the customer actors.
#[derive(Clone)]
pub struct Store {
    inner: Arc<StoreInner>,
}

/// How a store is opened.
#[derive(Debug, Clone, Copy)]
pub struct StoreOptions {
    /// When writes are acknowledged.
    pub durability: Durability,
    /// Memory for the engine's page cache.
    pub cache_bytes: u64,
    /// Free space the data directory's filesystem must keep; writes are refused below it.
    pub reserve: Reserve,
}

struct StoreInner {
    storage: Arc<dyn Storage>,
    /// Called when a write fails inside the engine: its state can no longer be trusted.
    on_fatal: FatalHandler,
    /// The data directory's filesystem, when the store has one (tests may not).
    disk: Option<DiskWatch>,
    // Read-locked by every durable write (shared, never contended); written only at close.
    committer: RwLock<Option<Committer>>,
    durability: Durability,
}

const FORMAT_MARKER: &str = "boxsub-store-v1";

impl Store {
    /// Opens the store in `dir`, creating it when empty, and starts group commit and the
    /// watch over the directory's filesystem. Leftovers of an unfinished engine snapshot are
    /// removed first (and again if opening fails), so no failed start makes the next one
    /// fail; a failure says why and what to do.
    pub fn open(
        dir: &Path,
        options: StoreOptions,
        on_fatal: FatalHandler,
    ) -> Result<Store, StoreError> {
        std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
            context: format!("creating data directory {}", dir.display()),
            source,
        })?;
        opening::remove_snapshot_leftovers(dir)?;
        let disk = DiskWatch::start(dir, options.reserve).map_err(|source| StoreError::Io {
            context: "starting the disk watch thread".into(),
            source,
        })?;
        let storage = match SledStorage::open(dir, options.cache_bytes) {
            Ok(storage) => storage,
            Err(error) => {
                let _ = opening::remove_snapshot_leftovers(dir);
                return Err(opening::explain(dir, error, disk.state()));
            }
        };
        Store::with_storage(
            Arc::new(storage),
            dir,
            options.durability,
            on_fatal,
            Some(disk),
        )
    }

    /// A store over any [`Storage`] (tests inject faults this way), with an optional watch
    /// over its directory's filesystem.
    pub fn with_storage(
        storage: Arc<dyn Storage>,
        dir: &Path,
        durability: Durability,
        on_fatal: FatalHandler,
        disk: Option<DiskWatch>,
    ) -> Result<Store, StoreError> {
        let format = storage.get(keys::FORMAT_KEY)?;
        let fresh = format.is_none();
        match format {
            Some(found) if found == FORMAT_MARKER.as_bytes() => {}
            Some(found) => {
                return Err(StoreError::Format {
                    path: dir.display().to_string(),
                    found: String::from_utf8_lossy(&found).into_owned(),
                    expected: FORMAT_MARKER.into(),
                })
            }
            None => {
                // A single write, not a batch: see `Storage::apply` on what a batch costs.
                storage.put(keys::FORMAT_KEY, FORMAT_MARKER.as_bytes().to_vec())?;
                storage.sync()?;
            }
        }
        // The marker goes before anything else is written, durably: a crash from here on
        // must find it gone.
        let closed_cleanly = match storage.get(keys::CLEAN_SHUTDOWN_KEY)? {
            Some(marker) => storage.remove_if(keys::CLEAN_SHUTDOWN_KEY, &marker)?,
            None => false,
        };
        storage.sync()?;
        let commit_interval = match durability {
            Durability::Sync { commit_interval } => commit_interval,
            Durability::Async => Duration::ZERO,
        };
        let committer = Committer::start(storage.clone(), on_fatal.clone(), commit_interval)?;
        let store = Store {
            inner: Arc::new(StoreInner {
                storage,
                on_fatal,
                disk,
                committer: RwLock::new(Some(committer)),
                durability,
            }),
        };
        if !closed_cleanly && !fresh {
            let started = std::time::Instant::now();
            let repaired = store.repair_customer_indexes()?;
            tracing::info!(
                customers = repaired.customers,
                removed = repaired.removed,
                millis = started.elapsed().as_millis() as u64,
                "the store was not closed cleanly: number entries of unwritten customers removed"
            );
        }
        Ok(store)
    }

    /// `outcome` of a write, reporting an engine or I/O failure as fatal: after a write
    /// failed in sled (a full disk, an I/O error), sled refuses every later write and its
    /// memory may hold what never reached the disk, so the process must stop rather than go
    /// on answering from it. A refusal or a lost unique key is no such failure.
    fn written(&self, outcome: Result<(), StoreError>) -> Result<(), StoreError> {
        if let Err(error @ (StoreError::Engine { .. } | StoreError::Io { .. })) = &outcome {
            (self.inner.on_fatal)(error);
        }
        outcome
    }

    /// [`Store::written`] for a write that says whether it changed anything.
    fn written_bool(&self, outcome: Result<bool, StoreError>) -> Result<bool, StoreError> {
        match outcome {
            Ok(changed) => Ok(changed),
            Err(error) => self.written(Err(error)).map(|()| false),
        }
    }

    /// Admits one write method: refused once the store is closed, or (see
    /// [`Store::writable`]) while the disk does not take writes. The write holds the guard
    /// across its single-key writes, so that `close` waits for writes under way and no write
    /// lands after the clean-shutdown marker: a store with the marker must hold no half-made
    /// customer, as a start after it skips the repair.
    fn open_for_writes(&self) -> Result<RwLockReadGuard<'_, Option<Committer>>, StoreError> {
        let committer = self.committer();
        if committer.is_none() {
            return Err(StoreError::Closed);
        }
        self.writable()?;
        Ok(committer)
    }

    /// `Err(Refused)` while the disk is nearly full or the directory does not take writes.
    /// Every write checks this first; callers may check it early to spare work.
    pub fn writable(&self) -> Result<(), StoreError> {
        match &self.inner.disk {
            Some(disk) => disk.writable().map_err(StoreError::Refused),
            None => Ok(()),
        }
    }

    /// Bytes the store's files take on disk.
    pub fn size_on_disk(&self) -> Result<u64, StoreError> {
        self.inner.storage.size_on_disk()
    }

    /// The last check of the data directory's filesystem, if it is watched.
    pub fn disk(&self) -> Option<DiskState> {
        self.inner.disk.as_ref().map(DiskWatch::state)
    }

    /// Completes when every write made before the call is durable (at once without
    /// durability).
    pub async fn durable(&self) -> Result<(), StoreError> {
        if self.inner.durability == Durability::Async {
            return Ok(());
        }
        // Register with the flusher under the lock, then wait without it.
        let registered = match self.committer().as_ref() {
            Some(committer) => committer.register(),
            None => Err(StoreError::NotDurable),
        };
        registered?.await.map_err(|_| StoreError::NotDurable)
    }

    /// The group commit, `None` once the store is closed. Read-locked, shared and never
    /// contended but by `close`.
    fn committer(&self) -> RwLockReadGuard<'_, Option<Committer>> {
        self.inner
            .committer
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Makes everything durable and stops group commit (at shutdown). Waits for the write
    /// methods under way; every write after it is refused with [`StoreError::Closed`].
    pub fn close(&self) -> Result<(), StoreError> {
        let committer = self
            .inner
            .committer
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(mut committer) = committer {
            committer.stop();
        }
        self.inner.storage.sync()?;
        // Last, once everything else is on disk (see `keys::CLEAN_SHUTDOWN_KEY`).
        self.inner
            .storage
            .put(keys::CLEAN_SHUTDOWN_KEY, b"1".to_vec())?;
        self.inner.storage.sync()
    }

    /// The highest ids in use, so that the sequences of this host's id `range` continue
    /// without reuse. Refused when the store has given out ids above the range (it ran with a
    /// higher `--id-range`): ids must keep increasing.
    pub fn high_water(&self, range: IdRange) -> Result<HighWater, StoreError> {
        let storage = &self.inner.storage;
        let last_id = |prefix: u8| -> Result<u64, StoreError> {
            Ok(storage
                .last(&[prefix])?
                .and_then(|(key, _)| keys::trailing_id(&key))
                .unwrap_or(0))
        };
        let last_customer_in_range = storage
            .last_between(
                &keys::customer(range.first()),
                Some(&keys::customer(range.end())),
            )?
            .and_then(|(key, _)| keys::trailing_id(&key))
            .unwrap_or(range.first() - 1);
        // Stores written before reservations kept an order → customer index instead.
        let reserved = storage
            .get(keys::ORDER_IDS_RESERVED)?
            .and_then(|value| keys::trailing_id(&value))
            .unwrap_or(0)
            .max(last_id(keys::LEGACY_ORDER_OWNER)?);
        if reserved >= range.end() {
            return Err(StoreError::CannotOpen {
                path: String::new(),
                reason: format!(
                    "this store has given out order ids up to {reserved}, above id range {} \
                     (ids {} to {})",
                    range.number(),
                    range.first(),
                    range.end() - 1
                ),
                remedy: format!(
                    "start it with the --id-range it ran with before (at least {})",
                    reserved / IdRange::SPAN
                ),
            });
        }
        Ok(HighWater {
            customer_id: last_customer_in_range,
            order_id: reserved.max(range.first() - 1),
            any_customer_id: last_id(keys::CUSTOMER)?,
            has_orders: storage.last(&[keys::ORDER])?.is_some(),
        })
    }

    /// Records that order ids up to `through` may be in use (see [`order_ids`]).
    pub fn reserve_order_ids(&self, through: u64) -> Result<(), StoreError> {
        let _open = self.open_for_writes()?;
        let reserved = self
            .inner
            .storage
            .put(keys::ORDER_IDS_RESERVED, through.to_be_bytes().to_vec());
        self.written(reserved)
    }

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
        check(keys::ORDER, &mut census.orders, |v| {
            decode::<OrderRecord>(v)
                .and_then(OrderRecord::into_order)
                .map(drop)
        })?;
        check(keys::IDEMPOTENCY, &mut census.idempotency_records, |v| {
            decode::<IdempotencyRecord>(v).map(drop)
        })?;
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

    /// The customer a folded email's index entry names, unchecked: the entry may be left by
    /// a write a crash cut short, or by an email change. A caller that reads the customer
    /// anyway checks its email itself; [`Store::email_owner`] checks the record.
    pub fn email_entry(
        &self,
        webstore_id: &str,
        email_key: &str,
    ) -> Result<Option<CustomerId>, StoreError> {
        Ok(self
            .inner
            .storage
            .get(&keys::email(webstore_id, email_key))?
            .and_then(|value| keys::trailing_id(&value))
            .map(CustomerId))
    }

    /// The customer holding a folded email in a webstore: the one its index entry names, if
    /// that customer's record still holds the email. An entry whose record was never written
    /// (a crash between the two) or has moved on to another email names nobody.
    pub fn email_owner(
        &self,
        webstore_id: &str,
        email_key: &str,
    ) -> Result<Option<CustomerId>, StoreError> {
        let Some(id) = self.email_entry(webstore_id, email_key)? else {
            return Ok(None);
        };
        let holds = self.load_customer_record(id)?.is_some_and(|record| {
            record.webstore_id == webstore_id
                && crate::domain::email::fold(&record.email) == email_key
        });
        Ok(holds.then_some(id))
    }

    /// One stored order of a customer.
    pub fn load_order(
        &self,
        customer: CustomerId,
        order: OrderId,
    ) -> Result<Option<Order>, StoreError> {
        let key = keys::order(customer.0, order.0);
        self.inner
            .storage
            .get(&key)?
            .map(|bytes| {
                decode::<OrderRecord>(&bytes)
                    .and_then(OrderRecord::into_order)
                    .map_err(|source| corrupt(&key, source))
            })
            .transpose()
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
        self.inner
            .storage
            .for_each_between(&from, Some(&to), &mut |key, value| {
                if let Some((customer, order)) = keys::order_ids(key) {
                    let schedule = decode::<OrderRecord>(value)
                        .and_then(OrderRecord::into_order)
                        .map(|order| (order.details.frequency, order.details.schedule))
                        .map_err(|source| corrupt(key, source));
                    visit(OrderId(order), CustomerId(customer), schedule);
                }
                true
            })
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
        self.for_each_record(keys::ORDER, &mut |_, bytes: &[u8]| {
            decode::<OrderRecord>(bytes).map(&mut *visit)
        })
    }

    /// Calls `visit` with the webstore id, client key and record of every stored
    /// idempotency record, in key order, until it returns false.
    pub fn for_each_idempotency(
        &self,
        visit: &mut dyn FnMut(&str, &str, IdempotencyRecord) -> bool,
    ) -> Result<(), StoreError> {
        self.for_each_record(keys::IDEMPOTENCY, &mut |key, bytes: &[u8]| {
            let record = decode::<IdempotencyRecord>(bytes)?;
            match keys::idempotency_parts(key) {
                Some((webstore_id, client_key)) => Ok(visit(webstore_id, client_key, record)),
                None => Err(CodecError::NotARecord),
            }
        })
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
        self.inner.storage.for_each(&[keys::ORDER], &mut |key, _| {
            if let Some((_, order)) = keys::order_ids(key) {
                visit(OrderId(order));
            }
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
            .get(&keys::idempotency(webstore_id, key))?
            .is_some())
    }

    /// A stored idempotency record.
    pub fn idempotency(
        &self,
        webstore_id: &str,
        key: &str,
    ) -> Result<Option<IdempotencyRecord>, StoreError> {
        let store_key = keys::idempotency(webstore_id, key);
        self.inner
            .storage
            .get(&store_key)?
            .map(|bytes| decode(&bytes).map_err(|source| corrupt(&store_key, source)))
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
        let prefix = keys::orders_of(id.0);
        let mut orders = Vec::new();
        for (order_key, bytes) in self.inner.storage.scan(&prefix, 0, usize::MAX)? {
            let order = decode::<OrderRecord>(&bytes)
                .and_then(OrderRecord::into_order)
                .map_err(|source| corrupt(&order_key, source))?;
            orders.push(order);
        }
        Ok(Some(LoadedCustomer { record, orders }))
    }

    /// Writes a new customer: its idempotency record if it has one, its email's index
    /// entry, its number's, then its record, one single-key write each (see [`keys`] on why
    /// the record is the commit point). The caller holds the email's claim, so no other
    /// writer touches that email meanwhile, and the key's turn, so no other request with the
    /// key reads the idempotency record before the customer is written.
    pub fn create_customer(
        &self,
        customer: &Customer,
        webstore_id: &str,
        idempotency: Option<IdempotencyWrite>,
    ) -> Result<(), StoreError> {
        let _open = self.open_for_writes()?;
        self.put_idempotency(idempotency)?;
        let mut batch = WriteBatch::default();
        add_new_customer(&mut batch, customer, webstore_id);
        for (key, value) in batch.ops {
            let value = value.unwrap_or_default();
            self.written(self.inner.storage.put(&key, value))?;
        }
        Ok(())
    }

    /// Writes a changed customer, its record alone when the email stays. An email change
    /// writes the new email's index entry, then the record (the commit point), then removes
    /// the old entry if it still names this customer: a create may have taken the old email
    /// as soon as the record stopped holding it. The caller holds the new email's claim.
    pub fn update_customer(
        &self,
        customer: &Customer,
        previous: &Customer,
        webstore_id: &str,
    ) -> Result<(), StoreError> {
        let _open = self.open_for_writes()?;
        let storage = &self.inner.storage;
        let record = encode(&CustomerRecord::from_customer(customer, webstore_id));
        let (new_key, old_key) = (customer.email.index_key(), previous.email.index_key());
        if new_key == old_key {
            return self.written(storage.put(&keys::customer(customer.id.0), record));
        }
        let holder = customer.id.0.to_be_bytes().to_vec();
        self.written(storage.put(&keys::email(webstore_id, &new_key), holder.clone()))?;
        self.written(storage.put(&keys::customer(customer.id.0), record))?;
        self.written_bool(storage.remove_if(&keys::email(webstore_id, &old_key), &holder))?;
        Ok(())
    }

    /// Writes a new order: its idempotency record if it has one, then its record (the
    /// commit point), each a single-key write (see [`keys`]).
    ///
    /// An order is one record under its customer and nothing else: the order → customer
    /// index is kept in memory and rebuilt from these keys at start.
    pub fn create_order(
        &self,
        order: &Order,
        idempotency: Option<IdempotencyWrite>,
    ) -> Result<(), StoreError> {
        let _open = self.open_for_writes()?;
        self.put_idempotency(idempotency)?;
        let record = encode(&OrderRecord::from_order(order));
        let key = keys::order(order.customer_id.0, order.id.0);
        self.written(self.inner.storage.put(&key, record))
    }

    /// Writes the idempotency record of a keyed create, before what it creates: a record
    /// whose customer or order was never written (a crash in between) is stale, and the
    /// service treats its key as free (`IdempotencyGate::once`).
    fn put_idempotency(&self, idempotency: Option<IdempotencyWrite>) -> Result<(), StoreError> {
        let Some(write) = idempotency else {
            return Ok(());
        };
        let key = keys::idempotency(&write.webstore_id, &write.key);
        self.written(self.inner.storage.put(&key, encode(&write.record)))
    }

    /// Writes a batch of removals, even while writes are refused: removing gives space back
    /// (an import that stopped part-way takes back what it wrote).
    pub fn remove(&self, batch: WriteBatch) -> Result<(), StoreError> {
        if batch.ops().any(|(_, value)| value.is_some()) {
            return Err(StoreError::Engine {
                context: "removing records".into(),
                detail: "a batch of removals holds a write".into(),
            });
        }
        self.written(self.inner.storage.apply(batch))
    }

    /// A durable store in `dir` with a small cache, no free-space reserve and no fatal
    /// handler (unit tests).
    #[cfg(test)]
    pub(crate) fn open_for_test(dir: &Path) -> Store {
        let options = StoreOptions {
            durability: Durability::Sync {
                commit_interval: std::time::Duration::ZERO,
            },
            cache_bytes: 1 << 20,
            reserve: Reserve::Bytes(0),
        };
        Store::open(dir, options, Arc::new(|_: &StoreError| {})).expect("the store opens")
    }

    /// Sets one raw entry (tests that build a store's state key by key, as a crash can
    /// leave it).
    pub fn put_raw(&self, key: &[u8], value: Vec<u8>) -> Result<(), StoreError> {
        let _open = self.open_for_writes()?;
        self.written(self.inner.storage.put(key, value))
    }

    /// Writes raw entries in one batch (test generators and tools).
    pub fn apply(&self, batch: WriteBatch) -> Result<(), StoreError> {
        let _open = self.open_for_writes()?;
        self.written(self.inner.storage.apply(batch))
    }
}

/// Adds the writes that store a new customer to `batch`, in the order they must reach the
/// store: its email's index entry, its number's, then its record (the commit point; see
/// [`keys`]). `boxsub seed` writes customers through this too, so the layout has one author.
pub fn add_new_customer(batch: &mut WriteBatch, customer: &Customer, webstore_id: &str) {
    let id = customer.id.0.to_be_bytes().to_vec();
    batch.put(
        keys::email(webstore_id, &customer.email.index_key()),
        id.clone(),
    );
    batch.put(keys::number(webstore_id, customer.number), id);
    batch.put(
        keys::customer(customer.id.0),
        encode(&CustomerRecord::from_customer(customer, webstore_id)),
    );
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
    batch.put(keys::email(&record.webstore_id, &email_key), id.clone());
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
    batch.put(keys::idempotency(webstore_id, key), encode(record));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::catalogue::WebstoreIdx;
    use crate::domain::customer::Address;
    use crate::domain::email::Email;

    fn customer(id: u64, email: &str) -> Customer {
        Customer {
            id: CustomerId(id),
            webstore: WebstoreIdx(0),
            number: id,
            first_name: "Ann".into(),
            last_name: None,
            email: Email::from_trusted(email.into()),
            delivery_service_id: 91,
            address: Address::default(),
            password_hash: None,
        }
    }

    fn open(dir: &Path) -> Store {
        Store::open_for_test(dir)
    }

    #[test]
    fn no_write_lands_after_close() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        // Writers racing the close, writing until they are refused: each write is either in
        // before it (and kept) or refused.
        let writers: Vec<_> = (0..4u8)
            .map(|writer| {
                let store = store.clone();
                std::thread::spawn(move || {
                    let mut kept = Vec::new();
                    for n in 0..2_000_000u32 {
                        let key = [b"x".as_slice(), &[writer], &n.to_be_bytes()].concat();
                        match store.put_raw(&key, vec![1]) {
                            Ok(()) => kept.push(key),
                            Err(StoreError::Closed) => return (kept, true),
                            Err(error) => panic!("{error}"),
                        }
                    }
                    (kept, false)
                })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(20));
        store.close().unwrap();
        let after_close = store.create_customer(&customer(9, "late@b.c"), "shop", None);
        assert!(matches!(after_close, Err(StoreError::Closed)));
        assert!(matches!(
            store.reserve_order_ids(10),
            Err(StoreError::Closed)
        ));
        let mut kept = Vec::new();
        for writer in writers {
            let (written, refused) = writer.join().unwrap();
            assert!(
                refused,
                "a writer finished before the close: nothing raced it"
            );
            kept.extend(written);
        }
        drop(store);
        let reopened = open(dir.path());
        for key in &kept {
            assert!(reopened.inner.storage.get(key).unwrap().is_some());
        }
        assert!(reopened.load_customer(CustomerId(9)).unwrap().is_none());
    }

    #[test]
    fn records_and_indexes_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = open(dir.path());
            store
                .create_customer(&customer(7, "a@b.c"), "shop", None)
                .unwrap();
            store.close().unwrap();
        }
        let store = open(dir.path());
        assert_eq!(
            store.email_owner("shop", "a@b.c").unwrap(),
            Some(CustomerId(7))
        );
        assert_eq!(store.email_owner("other", "a@b.c").unwrap(), None);
        assert_eq!(store.high_water(IdRange::default()).unwrap().customer_id, 7);
        assert_eq!(store.last_number("shop").unwrap(), 7);
        let loaded = store.load_customer(CustomerId(7)).unwrap().unwrap();
        assert_eq!(loaded.record.webstore_id, "shop");
        assert_eq!(store.verify().unwrap().customers, 1);
    }

    #[test]
    fn an_unreadable_record_is_an_error_naming_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        store
            .create_customer(&customer(3, "x@y.z"), "shop", None)
            .unwrap();
        let mut damage = WriteBatch::default();
        damage.put(keys::customer(3), b"BXS\x01\x00\x01garbage".to_vec());
        store.apply(damage).unwrap();
        let error = store.verify().unwrap_err();
        assert!(matches!(error, StoreError::Corrupt { .. }), "{error}");
        assert!(error.to_string().contains("record c"), "{error}");
        assert!(store.load_customer(CustomerId(3)).is_err());
    }

    #[test]
    fn a_data_dir_that_is_a_file_is_refused_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-dir");
        std::fs::write(&file, b"x").unwrap();
        let error = Store::open(
            &file,
            StoreOptions {
                durability: Durability::Sync {
                    commit_interval: std::time::Duration::ZERO,
                },
                cache_bytes: 1 << 20,
                reserve: Reserve::Bytes(0),
            },
            Arc::new(|_: &StoreError| {}),
        )
        .err()
        .unwrap();
        assert!(error.to_string().contains("not-a-dir"), "{error}");
    }
}
