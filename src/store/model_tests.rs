//! The model test of the whole store: random runs of customer creates (some keyed), updates,
//! email changes, orders (some keyed), idempotency expiry sweeps, snapshot flushes (sled's
//! flush in the background, also in the middle of a write), clean restarts and crashes, some
//! of them in the middle of a write whose log frames they tear. The store runs over a
//! [`LossySnapshot`] (a crash keeps only what it held at its last flush) and a real log in
//! a temporary directory; after every step it is compared with an in-memory model (reads of
//! every customer, email, order and idempotency key, the walk over all orders, the census,
//! the high-water marks).
//!
//! Every acknowledged write must be readable after any crash. A write the crash caught
//! unacknowledged may be kept or lost, as a whole as far as reads can tell: the model then
//! takes what the store shows. An expiry sweep's removals skip the log, so a crash may bring
//! a swept record back (it is expired, and the next sweep removes it again).
//!
//! `BOXSUB_MODEL_CASES` sets the number of cases (CI runs more than the default); a failure
//! prints the step it failed at, and proptest the shortest run it found that fails.

use crate::store::kinds::customers;
use crate::store::pending::order_chunks;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;

use super::kinds::customers::CustomerRecord;
use super::kinds::idempotency::IdempotencyRecord;
use super::kinds::orders::OrderRecord;
use super::tests::LossySnapshot;
use super::*;
use crate::domain::catalogue::WebstoreIdx;
use crate::domain::customer::{Address, Customer};
use crate::domain::email::Email;
use crate::domain::ids::{CustomerId, OrderId};
use crate::domain::order::Order;

/// The webstores customers are created in: an email is unique within one.
const WEBSTORES: [&str; 2] = ["shop", "farm"];
/// Emails `e0@shop.test` … : few, so that they are taken, released and taken again.
const EMAILS: usize = 6;
const NAMES: [&str; 4] = ["Ann", "Bob", "Cy", "Di"];
/// Order ids reserved ahead of use, per reservation (the service reserves more).
const RESERVE_AHEAD: u64 = 16;
/// Whether a torn crash may find the snapshot flushed after its unacknowledged write began:
/// sled's background flush landing between a write reaching sled and its log frame reaching
/// the disk. The replay of the frames before the torn one then sets the keys they wrote
/// back under the lost write's flushed ones; the store's keys are laid out so that this
/// leaves a consistent store (an email entry per customer, a reservation per key, an
/// idempotency record per version; the tests at the end pin the cases found). False keeps
/// such a crash to the middle of a create, before its record.
const FLUSH_BEFORE_A_TORN_APPEND: bool = true;
/// Cases of a plain `cargo test`.
const DEFAULT_CASES: u32 = 128;

/// The snapshot under test with sled's background flush: armed, it flushes right after its
/// n-th next write, wherever that falls (in the middle of a customer's writes, of a
/// checkpoint's packing, of an unacknowledged write just before a crash).
struct BackgroundFlush {
    lossy: Arc<LossySnapshot>,
    /// Writes left before the flush; 0 when not armed.
    flush_in: AtomicUsize,
}

impl BackgroundFlush {
    fn wrote(&self) -> Result<(), StoreError> {
        let before = self
            .flush_in
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                left.checked_sub(1)
            });
        match before {
            Ok(1) => self.lossy.flush(),
            _ => Ok(()),
        }
    }
}

impl Snapshot for BackgroundFlush {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.lossy.get(key)
    }
    fn put(&self, key: &[u8], value: Vec<u8>) -> Result<(), StoreError> {
        self.lossy.put(key, value)?;
        self.wrote()
    }
    fn remove(&self, key: &[u8]) -> Result<(), StoreError> {
        self.lossy.remove(key)?;
        self.wrote()
    }
    fn remove_if(&self, key: &[u8], expected: &[u8]) -> Result<bool, StoreError> {
        let removed = self.lossy.remove_if(key, expected)?;
        self.wrote()?;
        Ok(removed)
    }
    fn apply(&self, batch: WriteBatch) -> Result<(), StoreError> {
        self.lossy.apply(batch)?;
        self.wrote()
    }
    fn for_each_between(
        &self,
        from: &[u8],
        to: Option<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError> {
        self.lossy.for_each_between(from, to, visit)
    }
    fn last_between(&self, from: &[u8], to: Option<&[u8]>) -> Result<Option<Entry>, StoreError> {
        self.lossy.last_between(from, to)
    }
    fn flush(&self) -> Result<(), StoreError> {
        self.lossy.flush()
    }
}

/// A choice among however many there are when it is made.
#[derive(Debug, Clone, Copy)]
struct Pick(u16);

impl Pick {
    /// The choice among `size` (not 0).
    fn index(self, size: usize) -> usize {
        usize::from(self.0) % size
    }
}

/// Which idempotency key a keyed create uses.
#[derive(Debug, Clone, Copy)]
enum KeyPick {
    /// One never used.
    Fresh,
    /// One used before and free now (swept, or its create lost in a crash), if any.
    Reuse(Pick),
}

/// A write as generated; picks are resolved against the model when it runs.
#[derive(Debug, Clone)]
enum Write {
    Create {
        webstore: usize,
        /// The first free email from this one on; skipped when all are taken.
        email: usize,
        /// `E3@shop.test` rather than `e3@shop.test` (the same folded email).
        shout: bool,
        name: usize,
        key: Option<KeyPick>,
    },
    Update {
        who: Pick,
        name: usize,
        /// A new email (kept as it is when another customer of the webstore holds it).
        email: Option<(usize, bool)>,
    },
    Orders {
        who: Pick,
        count: usize,
        /// The first order's idempotency key.
        key: Option<KeyPick>,
    },
}

#[derive(Debug, Clone)]
enum Op {
    /// An acknowledged write.
    Write(Write),
    /// The clock moves on by `advance` seconds, and a full sweep runs in steps of `batch`.
    Sweep {
        ttl: u64,
        advance: i64,
        batch: usize,
    },
    /// `Storage::sync`: the pending puts applied and the snapshot flushed.
    Flush,
    /// The snapshot flushes after its n-th next write.
    FlushAfter(usize),
    /// Close, then open on what the disk holds.
    Restart,
    /// The store dropped without closing (what `unacked` wrote and what its log frame holds
    /// may reach the log meanwhile, as in a crash mid-append), reopened over what the
    /// snapshot held at its last flush. `flush`: the snapshot flushed in the middle of
    /// `unacked` or after it (sled's background flush, before the log's append). `torn`:
    /// the log cut at `at` within `unacked`'s frames (zeroed from there, or the file
    /// `truncate`d), as when their append had not reached the disk.
    Crash {
        unacked: Option<Write>,
        flush: Option<FlushAt>,
        torn: bool,
        truncate: bool,
        at: Pick,
    },
}

/// When the snapshot flushes around an unacknowledged write.
#[derive(Debug, Clone, Copy)]
enum FlushAt {
    /// After the write's n-th single-key write into the snapshot (if it makes that many).
    During(usize),
    /// After the write (`Storage::sync`, its pending puts applied).
    After,
}

/// A write resolved against the model: what it writes.
#[derive(Debug, Clone)]
enum Prepared {
    Create {
        webstore: usize,
        customer: Box<Customer>,
        key: Option<(IdemKey, IdempotencyRecord)>,
    },
    Update {
        webstore: usize,
        customer: Box<Customer>,
        previous: Box<Customer>,
    },
    Orders {
        orders: Vec<Order>,
        key: Option<(IdemKey, IdempotencyRecord)>,
    },
}

impl Prepared {
    /// A key the write's log frame holds (the last one it writes).
    fn logged_key(&self) -> Vec<u8> {
        match self {
            Prepared::Create { customer, .. } | Prepared::Update { customer, .. } => {
                customers::customer_key(customer.id.0)
            }
            Prepared::Orders { orders, .. } => {
                let last = orders.last().expect("at least one order");
                order_chunks::order_key(last.customer_id.0, last.id.0)
            }
        }
    }
}

/// An idempotency key: webstore and client key.
type IdemKey = (usize, String);

/// What the store must hold.
#[derive(Debug, Default)]
struct Model {
    /// Customers by id, with their webstore.
    customers: BTreeMap<u64, (usize, Customer)>,
    /// Orders by id: customer id, created at.
    orders: BTreeMap<u64, (u64, i64)>,
    idempotency: BTreeMap<IdemKey, IdempotencyRecord>,
    /// Records swept since the log last started afresh: a crash may bring them back.
    may_return: BTreeMap<IdemKey, IdempotencyRecord>,
    /// Every idempotency key ever written.
    keys_used: BTreeSet<IdemKey>,
    /// Every customer id and (customer, order) written, kept or not.
    tried_customers: BTreeSet<u64>,
    tried_orders: BTreeSet<(u64, u64)>,
    /// Order ids reserved by acknowledged writes, and by any write.
    reserved_acked: u64,
    reserved_issued: u64,
    next_customer: u64,
    next_order: u64,
    next_key: u64,
    /// The clock, in Unix seconds.
    now: i64,
}

impl Model {
    fn new() -> Model {
        Model {
            next_customer: 1,
            next_order: 1,
            now: 1_000,
            ..Model::default()
        }
    }

    /// The customer holding folded email `key` in `webstore`.
    fn owner(&self, webstore: usize, key: &str) -> Option<u64> {
        self.customers
            .iter()
            .find(|(_, (ws, customer))| *ws == webstore && customer.email.index_key() == key)
            .map(|(id, _)| *id)
    }

    fn pick_customer(&self, who: Pick) -> Option<(usize, Customer)> {
        if self.customers.is_empty() {
            return None;
        }
        self.customers
            .values()
            .nth(who.index(self.customers.len()))
            .cloned()
    }

    fn pick_key(&mut self, webstore: usize, pick: KeyPick) -> IdemKey {
        if let KeyPick::Reuse(index) = pick {
            let free: Vec<&IdemKey> = self
                .keys_used
                .iter()
                .filter(|key| key.0 == webstore && !self.idempotency.contains_key(*key))
                .collect();
            if !free.is_empty() {
                return free[index.index(free.len())].clone();
            }
        }
        self.next_key += 1;
        (webstore, format!("k{}", self.next_key))
    }

    /// Resolves `write`'s picks, taking ids; `None` when it has nothing to do.
    fn prepare(&mut self, write: &Write) -> Option<Prepared> {
        match write {
            Write::Create {
                webstore,
                email,
                shout,
                name,
                key,
            } => {
                let free = (0..EMAILS)
                    .map(|n| (email + n) % EMAILS)
                    .find(|n| self.owner(*webstore, &email_key(*n)).is_none())?;
                let id = self.next_customer;
                self.next_customer += 1;
                let customer = customer(id, *webstore, &email_address(free, *shout), *name);
                let key = key.map(|pick| {
                    let key = self.pick_key(*webstore, pick);
                    let record = self.idempotency_record(&format!("/customers/{id}"));
                    (key, record)
                });
                Some(Prepared::Create {
                    webstore: *webstore,
                    customer: Box::new(customer),
                    key,
                })
            }
            Write::Update { who, name, email } => {
                let (webstore, previous) = self.pick_customer(*who)?;
                let mut customer = previous.clone();
                customer.first_name = NAMES[*name].into();
                if let Some((email, shout)) = email {
                    let taken = self
                        .owner(webstore, &email_key(*email))
                        .is_some_and(|owner| owner != previous.id.0);
                    if !taken {
                        customer.email = Email::from_trusted(email_address(*email, *shout));
                    }
                }
                Some(Prepared::Update {
                    webstore,
                    customer: Box::new(customer),
                    previous: Box::new(previous),
                })
            }
            Write::Orders { who, count, key } => {
                let (webstore, customer) = self.pick_customer(*who)?;
                let orders: Vec<Order> = (0..*count as u64)
                    .map(|n| order(self.next_order + n, customer.id.0, self.now))
                    .collect();
                self.next_order += *count as u64;
                let key = key.map(|pick| {
                    let key = self.pick_key(webstore, pick);
                    let location = format!("/orders/{}", orders[0].id.0);
                    (key, self.idempotency_record(&location))
                });
                Some(Prepared::Orders { orders, key })
            }
        }
    }

    fn idempotency_record(&self, location: &str) -> IdempotencyRecord {
        IdempotencyRecord {
            body_sha256: vec![self.next_key as u8; 32],
            status: 201,
            location: Some(location.into()),
            body: format!("{{\"location\":\"{location}\"}}").into_bytes(),
            created_at: self.now,
        }
    }

    /// `prepared`, acknowledged.
    fn acknowledge(&mut self, prepared: Prepared) {
        match prepared {
            Prepared::Create {
                webstore,
                customer,
                key,
            } => {
                self.tried_customers.insert(customer.id.0);
                self.customers.insert(customer.id.0, (webstore, *customer));
                if let Some((key, record)) = key {
                    self.set_idempotency(key, record);
                }
            }
            Prepared::Update {
                webstore, customer, ..
            } => {
                self.customers.insert(customer.id.0, (webstore, *customer));
            }
            Prepared::Orders { orders, key } => {
                for order in orders {
                    self.tried_orders.insert((order.customer_id.0, order.id.0));
                    self.orders
                        .insert(order.id.0, (order.customer_id.0, order.created_at));
                }
                if let Some((key, record)) = key {
                    self.set_idempotency(key, record);
                }
            }
        }
    }

    fn set_idempotency(&mut self, key: IdemKey, record: IdempotencyRecord) {
        // Logged after the swept record's own write, it is what a replay leaves.
        self.may_return.remove(&key);
        self.keys_used.insert(key.clone());
        self.idempotency.insert(key, record);
    }
}

fn email_key(n: usize) -> String {
    format!("e{n}@shop.test")
}

fn email_address(n: usize, shout: bool) -> String {
    format!("{}{n}@shop.test", if shout { "E" } else { "e" })
}

fn customer(id: u64, webstore: usize, email: &str, name: usize) -> Customer {
    Customer {
        id: CustomerId(id),
        webstore: WebstoreIdx(webstore as u32),
        number: id,
        first_name: NAMES[name].into(),
        last_name: None,
        email: Email::from_trusted(email.into()),
        delivery_service_id: 91,
        address: Address::default(),
        password_hash: None,
        halts: crate::domain::halts::Halts::none(),
        account: crate::domain::account::Account::opened(CustomerId(id), 0),
    }
}

fn order(id: u64, customer: u64, created_at: i64) -> Order {
    use crate::domain::day::Day;
    use crate::domain::day::WeekDays;
    use crate::domain::order::content::OrderContent;
    use crate::domain::order::schedule::Frequency;
    let frequency = if id.is_multiple_of(2) {
        Frequency::Weekly
    } else {
        Frequency::Fortnightly
    };
    OrderContent::weekly_for_test(200 + id % 7)
        .with_frequency(frequency)
        .with_schedule(Day(20_000 + id as i32), WeekDays::only(1 + (id % 5) as u8))
        .placed(id, customer, created_at)
}

/// The store under test, its snapshot and its log's directory.
struct Harness {
    dir: tempfile::TempDir,
    lossy: Arc<LossySnapshot>,
    snapshot: Arc<BackgroundFlush>,
    storage: Arc<PendingWrites>,
    store: Option<Store>,
    /// Room in the pending layer: small, so that orders overflow it into the snapshot.
    pending_capacity: Option<usize>,
    runtime: tokio::runtime::Runtime,
    fatal: Arc<Mutex<Vec<String>>>,
    /// See [`FLUSH_BEFORE_A_TORN_APPEND`].
    flush_before_torn_append: bool,
}

impl Harness {
    fn new(pending_capacity: Option<usize>, flush_before_torn_append: bool) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let lossy = Arc::new(LossySnapshot::default());
        let fatal = Arc::new(Mutex::new(Vec::new()));
        let (snapshot, storage, store) = open(&lossy, dir.path(), pending_capacity, &fatal);
        Harness {
            dir,
            lossy,
            snapshot,
            storage,
            store: Some(store),
            pending_capacity,
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
            fatal,
            flush_before_torn_append,
        }
    }

    fn store(&self) -> &Store {
        self.store.as_ref().expect("open")
    }

    /// Opens the store again over `lossy`, what the disk holds.
    fn reopen(&mut self, lossy: Arc<LossySnapshot>, model: &mut Model) {
        assert!(self.store.is_none());
        let (snapshot, storage, store) =
            open(&lossy, self.dir.path(), self.pending_capacity, &self.fatal);
        (self.lossy, self.snapshot, self.storage) = (lossy, snapshot, storage);
        // The service's id sequences continue from what the store holds.
        let high = store.high_water(IdRange::default()).unwrap();
        model.next_customer = high.customer_id + 1;
        model.next_order = high.order_id + 1;
        self.store = Some(store);
    }

    /// Makes `prepared`'s writes, reserving order ids first (not waited for, as the
    /// service's `OrderIds` does); the waits for them.
    fn issue(&self, model: &mut Model, prepared: &Prepared) -> Vec<Written> {
        let store = self.store();
        match prepared {
            Prepared::Create {
                webstore,
                customer,
                key,
            } => {
                let key = key.as_ref().map(|((ws, key), record)| IdempotencyWrite {
                    webstore_id: WEBSTORES[*ws].into(),
                    key: key.clone(),
                    record: record.clone(),
                });
                vec![store
                    .create_customer(customer, WEBSTORES[*webstore], key, None, Box::new(|| {}))
                    .unwrap()]
            }
            Prepared::Update {
                webstore,
                customer,
                previous,
            } => vec![store
                .update_customer(
                    customer,
                    previous,
                    WEBSTORES[*webstore],
                    None,
                    None,
                    Box::new(|| {}),
                )
                .unwrap()],
            Prepared::Orders { orders, key } => {
                let mut written = Vec::new();
                let last = orders.last().unwrap().id.0;
                if last > model.reserved_issued {
                    let through = last + RESERVE_AHEAD;
                    drop(
                        store
                            .reserve_order_ids(model.reserved_issued, through)
                            .unwrap(),
                    );
                    model.reserved_issued = through;
                }
                let mut key = key.as_ref().map(|((ws, key), record)| IdempotencyWrite {
                    webstore_id: WEBSTORES[*ws].into(),
                    key: key.clone(),
                    record: record.clone(),
                });
                for order in orders {
                    written.push(
                        store
                            .create_order(order, "shop", key.take(), None, Box::new(|| ()))
                            .unwrap(),
                    );
                }
                written
            }
        }
    }

    fn acknowledged(&mut self, model: &mut Model, write: &Write) {
        let Some(prepared) = model.prepare(write) else {
            return;
        };
        let written = self.issue(model, &prepared);
        self.runtime.block_on(async {
            for written in written {
                written.durable().await.expect("acknowledged");
            }
        });
        // The log answers in order: the reservation before the orders is durable too.
        model.reserved_acked = model.reserved_issued;
        model.acknowledge(prepared);
    }

    fn run(&mut self, model: &mut Model, op: &Op) {
        match op {
            Op::Write(write) => self.acknowledged(model, write),
            Op::Sweep {
                ttl,
                advance,
                batch,
            } => {
                model.now += advance;
                let mut cursor: Option<Vec<u8>> = None;
                let mut removed = 0;
                for _ in 0..1_000 {
                    let step = self
                        .store()
                        .sweep_idempotency(cursor.as_deref(), *batch, *ttl, model.now)
                        .unwrap();
                    removed += step.removed;
                    cursor = step.next;
                    if cursor.is_none() {
                        break;
                    }
                }
                assert!(cursor.is_none(), "a sweep that does not end");
                let expired: Vec<IdemKey> = model
                    .idempotency
                    .iter()
                    .filter(|(_, record)| model.now - record.created_at >= *ttl as i64)
                    .map(|(key, _)| key.clone())
                    .collect();
                // An earlier version of a key that a crash's replay put back below the
                // current one is removed too once expired, so a sweep may remove more
                // entries than the model has records; what stays is checked after the step.
                assert!(
                    removed >= expired.len(),
                    "records the sweep removed: {removed}, expired: {}",
                    expired.len()
                );
                for key in expired {
                    let record = model.idempotency.remove(&key).unwrap();
                    model.may_return.insert(key, record);
                }
            }
            Op::Flush => self.storage.sync().unwrap(),
            Op::FlushAfter(writes) => self.snapshot.flush_in.store(*writes, Ordering::SeqCst),
            Op::Restart => {
                let store = self.store.take().unwrap();
                store.close().unwrap();
                drop(store);
                // Closed, everything is on disk, and the log starts after it.
                model.may_return.clear();
                let on_disk = self.lossy.after_crash();
                self.reopen(on_disk, model);
            }
            Op::Crash {
                unacked,
                flush,
                torn,
                truncate,
                at,
            } => {
                let unacked = unacked.as_ref().and_then(|write| model.prepare(write));
                let flush = match (&unacked, torn, self.flush_before_torn_append) {
                    (Some(prepared), true, false) => {
                        self.snapshot.flush_in.store(0, Ordering::SeqCst);
                        match (prepared, flush) {
                            // Before a create's record, its commit point: none of what the
                            // flush keeps counts (see `FLUSH_BEFORE_A_TORN_APPEND`).
                            (Prepared::Create { key, .. }, Some(FlushAt::During(writes)))
                                if *writes < 3 + usize::from(key.is_some()) =>
                            {
                                flush
                            }
                            _ => &None,
                        }
                    }
                    _ => flush,
                };
                if let (Some(_), Some(FlushAt::During(writes))) = (&unacked, flush) {
                    self.snapshot.flush_in.store(*writes, Ordering::SeqCst);
                }
                let acknowledged = if *torn {
                    log_end(self.dir.path())
                } else {
                    None
                };
                let waits = unacked
                    .as_ref()
                    .map(|prepared| self.issue(model, prepared))
                    .unwrap_or_default();
                if let (Some(_), Some(FlushAt::After)) = (&unacked, flush) {
                    self.storage.sync().unwrap();
                }
                let on_disk = self.lossy.after_crash();
                // Its threads stop; group commit appends what was submitted (the crash
                // came after the append), which a torn crash then cuts.
                drop(self.store.take());
                drop(waits);
                if let (Some(prepared), true) = (&unacked, *torn) {
                    tear_unacknowledged(
                        self.dir.path(),
                        acknowledged,
                        &prepared.logged_key(),
                        *at,
                        *truncate,
                    );
                }
                self.reopen(on_disk, model);
                if let Some(prepared) = unacked {
                    resolve(self.store(), model, prepared);
                }
                // The log now starts after everything replayed: a swept record is back for
                // good, or gone for good.
                for (key, swept) in std::mem::take(&mut model.may_return) {
                    let found = self.store().idempotency(WEBSTORES[key.0], &key.1).unwrap();
                    if let Some(found) = found {
                        assert_eq!(found, swept, "a swept record came back changed: {key:?}");
                        model.idempotency.insert(key, found);
                    }
                }
                // The reservations are what the store holds now, durably.
                let reserved = self
                    .store()
                    .high_water(IdRange::default())
                    .unwrap()
                    .order_id;
                assert!(
                    (model.reserved_acked..=model.reserved_issued.max(model.reserved_acked))
                        .contains(&reserved),
                    "reserved order ids {reserved}, acknowledged {}, issued {}",
                    model.reserved_acked,
                    model.reserved_issued
                );
                (model.reserved_acked, model.reserved_issued) = (reserved, reserved);
            }
        }
    }
}

/// A store with the pending layer over a [`BackgroundFlush`] over `lossy`, its log in `dir`.
fn open(
    lossy: &Arc<LossySnapshot>,
    dir: &Path,
    pending_capacity: Option<usize>,
    fatal: &Arc<Mutex<Vec<String>>>,
) -> (Arc<BackgroundFlush>, Arc<PendingWrites>, Store) {
    let snapshot = Arc::new(BackgroundFlush {
        lossy: lossy.clone(),
        flush_in: AtomicUsize::new(0),
    });
    let under: Arc<dyn Snapshot> = snapshot.clone();
    let storage = Arc::new(match pending_capacity {
        Some(capacity) => PendingWrites::with_capacity(under, capacity),
        None => PendingWrites::over(under),
    });
    let fatal = fatal.clone();
    let store = Store::with_storage(
        storage.clone(),
        dir,
        Durability::Sync {
            commit_interval: Duration::ZERO,
        },
        Arc::new(move |error: &StoreError| fatal.lock().unwrap().push(error.to_string())),
        None,
    )
    .expect("the store opens");
    (snapshot, storage, store)
}

/// The (start, end) of each whole frame at the start of segment `seq` (see `wal`'s format).
fn whole_frames(seq: u64, bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut frames = Vec::new();
    let mut at = 0;
    while let Some(header) = bytes.get(at..at + log::wal::FRAME_HEADER) {
        let length = u32::from_le_bytes(header[..4].try_into().unwrap()) as usize;
        let stored = u32::from_le_bytes(header[4..].try_into().unwrap());
        let end = at + log::wal::FRAME_HEADER + length;
        let Some(payload) = bytes.get(at + log::wal::FRAME_HEADER..end) else {
            break;
        };
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&seq.to_le_bytes());
        hasher.update(payload);
        if length == 0 || hasher.finalize() != stored {
            break;
        }
        frames.push((at, end));
        at = end;
    }
    frames
}

/// The log's newest whole frames.
struct Frames {
    seq: u64,
    path: PathBuf,
    bytes: Vec<u8>,
    /// Where each frame starts and ends.
    frames: Vec<(usize, usize)>,
}

/// The log's newest whole frames: the last segment that has any.
fn newest_frames(dir: &Path) -> Option<Frames> {
    let wal = log::wal::WalDir::open(dir).unwrap();
    let mut newest = None;
    for seq in wal.segments().unwrap() {
        let path = dir.join(log::wal::DIR_NAME).join(format!("{seq:016x}"));
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            // Recycled or removed meanwhile by the checkpointer: an old segment.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
            Err(error) => panic!("reading {}: {error}", path.display()),
        };
        let frames = whole_frames(seq, &bytes);
        assert_eq!(
            frames.len(),
            log::wal::read_segment(seq, &bytes).unwrap().len(),
            "frames of segment {seq}"
        );
        if !frames.is_empty() {
            newest = Some(Frames {
                seq,
                path,
                bytes,
                frames,
            });
        }
    }
    newest
}

/// Where the log's whole frames end: segment and offset.
fn log_end(dir: &Path) -> Option<(u64, usize)> {
    newest_frames(dir).map(|newest| (newest.seq, newest.frames.last().unwrap().1))
}

/// Cuts the log at `at` inside what was appended after `acknowledged` (where its frames
/// ended once every write before was acknowledged), which must hold `key`: the frame cut
/// there is torn and those after it are gone, as a crash leaves appends that had not reached
/// the disk yet.
fn tear_unacknowledged(
    dir: &Path,
    acknowledged: Option<(u64, usize)>,
    key: &[u8],
    at: Pick,
    truncate: bool,
) {
    let Frames {
        seq,
        path,
        mut bytes,
        frames,
    } = newest_frames(dir).expect("a frame to tear");
    let from = match acknowledged {
        Some((acknowledged_seq, end)) if acknowledged_seq == seq => end,
        _ => 0,
    };
    let unacknowledged: Vec<(usize, usize)> = frames
        .iter()
        .copied()
        .filter(|(start, _)| *start >= from)
        .collect();
    let end = unacknowledged.last().expect("the write was appended").1;
    assert!(
        bytes[from..end]
            .windows(key.len())
            .any(|window| window == key),
        "the frames after the acknowledged ones are not the unacknowledged write's"
    );
    let cut = if truncate {
        let cut = from + at.index(end - from);
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(cut as u64).unwrap();
        bytes.truncate(cut);
        cut
    } else {
        // Within a frame, up to its last byte that is not zero, so that the frame changes.
        let cuts: Vec<usize> = unacknowledged
            .iter()
            .flat_map(|(start, end)| {
                let last_set = (*start..*end).rev().find(|at| bytes[*at] != 0).unwrap();
                *start..=last_set
            })
            .collect();
        let cut = cuts[at.index(cuts.len())];
        bytes[cut..end].fill(0);
        std::fs::write(&path, &bytes).unwrap();
        cut
    };
    assert_eq!(
        whole_frames(seq, &bytes).len(),
        frames.iter().filter(|(_, end)| *end <= cut).count(),
        "the log cut at {cut}"
    );
}

/// Takes into the model what a crash left of an unacknowledged write: all of it or none of
/// it, as far as reads tell (a keyed create's idempotency record may be left alone, as the
/// record is written first).
fn resolve(store: &Store, model: &mut Model, prepared: Prepared) {
    match prepared {
        Prepared::Create {
            webstore,
            customer,
            key,
        } => {
            let id = customer.id.0;
            model.tried_customers.insert(id);
            let found = store.load_customer_record(customer.id).unwrap();
            let made = found.is_some();
            if let Some(found) = found {
                assert_eq!(
                    found,
                    CustomerRecord::from_customer(&customer, WEBSTORES[webstore]),
                    "an unacknowledged create kept"
                );
                model.customers.insert(id, (webstore, *customer));
            }
            if let Some((key, record)) = key {
                resolve_key(store, model, key, record, made);
            }
        }
        Prepared::Update {
            webstore,
            customer,
            previous,
        } => {
            let found = store
                .load_customer_record(customer.id)
                .unwrap()
                .expect("a customer whose update was not acknowledged");
            if found == CustomerRecord::from_customer(&customer, WEBSTORES[webstore]) {
                model.customers.insert(customer.id.0, (webstore, *customer));
            } else {
                assert_eq!(
                    found,
                    CustomerRecord::from_customer(&previous, WEBSTORES[webstore]),
                    "an unacknowledged update, neither kept nor lost"
                );
            }
        }
        Prepared::Orders { orders, key } => {
            let mut first_made = None;
            for order in orders {
                let (customer, id) = (order.customer_id.0, order.id.0);
                model.tried_orders.insert((customer, id));
                let found = store.load_order(order.customer_id, order.id).unwrap();
                if let Some(found) = &found {
                    assert_eq!(
                        OrderRecord::from_order(found),
                        OrderRecord::from_order(&order),
                        "an unacknowledged order kept"
                    );
                    model.orders.insert(id, (customer, order.created_at));
                }
                first_made.get_or_insert(found.is_some());
            }
            if let Some((key, record)) = key {
                resolve_key(store, model, key, record, first_made.unwrap());
            }
        }
    }
}

/// An unacknowledged keyed write's idempotency record: its own if what it answers for was
/// made, maybe there if not; a key used before may then show its swept record, which the
/// replay of its earlier write brought back.
fn resolve_key(
    store: &Store,
    model: &mut Model,
    key: IdemKey,
    record: IdempotencyRecord,
    made: bool,
) {
    let found = store.idempotency(WEBSTORES[key.0], &key.1).unwrap();
    let swept = model.may_return.remove(&key);
    let allowed = match &found {
        None => !made,
        Some(found) => *found == record || (!made && Some(found) == swept.as_ref()),
    };
    assert!(
        allowed,
        "key {key:?} of an unacknowledged write ({}): found {found:?}, written {record:?}, \
         swept {swept:?}",
        if made { "kept" } else { "lost" }
    );
    model.keys_used.insert(key.clone());
    match found {
        Some(found) => model.idempotency.insert(key, found),
        None => model.idempotency.remove(&key),
    };
}

/// Everything the store shows, against the model.
fn check(store: &Store, model: &Model) {
    for (id, (webstore, customer)) in &model.customers {
        let loaded = store
            .load_customer(CustomerId(*id))
            .unwrap()
            .unwrap_or_else(|| panic!("customer {id} is gone"));
        assert_eq!(
            loaded.record,
            CustomerRecord::from_customer(customer, WEBSTORES[*webstore]),
            "customer {id}"
        );
        let orders: Vec<u64> = loaded.orders.iter().map(|order| order.id.0).collect();
        let expected: Vec<u64> = model
            .orders
            .iter()
            .filter(|(_, (owner, _))| owner == id)
            .map(|(order, _)| *order)
            .collect();
        assert_eq!(orders, expected, "orders of customer {id}");
    }
    for id in &model.tried_customers {
        if !model.customers.contains_key(id) {
            assert_eq!(
                store.load_customer_record(CustomerId(*id)).unwrap(),
                None,
                "customer {id} was lost, or never made"
            );
        }
    }
    for (webstore, name) in WEBSTORES.iter().enumerate() {
        for email in 0..EMAILS {
            let key = email_key(email);
            assert_eq!(
                store.email_owner(name, &key).unwrap().map(|id| id.0),
                model.owner(webstore, &key),
                "owner of {key} in {name}"
            );
        }
        let ids: Vec<u64> = model
            .customers
            .iter()
            .filter(|(_, (ws, _))| *ws == webstore)
            .map(|(id, _)| *id)
            .collect();
        let listed: Vec<u64> = store
            .customer_ids(name)
            .unwrap()
            .iter()
            .map(|id| id.0)
            .collect();
        assert_eq!(listed, ids, "customers of {name} by number");
        assert_eq!(
            store.last_number(name).unwrap(),
            ids.last().copied().unwrap_or(0),
            "last number of {name}"
        );
    }
    for (id, (customer, created_at)) in &model.orders {
        let loaded = store
            .load_order(CustomerId(*customer), OrderId(*id))
            .unwrap()
            .unwrap_or_else(|| panic!("order {id} of customer {customer} is gone"));
        assert_eq!(
            OrderRecord::from_order(&loaded),
            OrderRecord::from_order(&order(*id, *customer, *created_at)),
            "order {id}"
        );
    }
    for (customer, id) in &model.tried_orders {
        if model.orders.get(id).map(|(owner, _)| owner) != Some(customer) {
            assert!(
                store
                    .load_order(CustomerId(*customer), OrderId(*id))
                    .unwrap()
                    .is_none(),
                "order {id} of customer {customer} was lost"
            );
        }
    }
    let mut walked = Vec::new();
    store
        .for_each_order(&mut |record| {
            walked.push((record.id, record.customer_id));
            true
        })
        .unwrap();
    walked.sort_unstable();
    let expected: Vec<(u64, u64)> = model
        .orders
        .iter()
        .map(|(id, (customer, _))| (*id, *customer))
        .collect();
    assert_eq!(walked, expected, "every order walked once");
    for key in &model.keys_used {
        assert_eq!(
            store
                .idempotency(WEBSTORES[key.0], &key.1)
                .unwrap()
                .as_ref(),
            model.idempotency.get(key),
            "idempotency record {key:?}"
        );
    }
    let census = store.verify().expect("a clean census");
    assert_eq!(
        (census.customers, census.orders, census.idempotency_records),
        (
            model.customers.len() as u64,
            model.orders.len() as u64,
            model.idempotency.len() as u64
        ),
        "census (customers, orders, idempotency records)"
    );
    let high = store.high_water(IdRange::default()).unwrap();
    let last_customer = model.customers.keys().last().copied().unwrap_or(0);
    assert_eq!(high.customer_id, last_customer, "highest customer id");
    assert_eq!(
        high.any_customer_id, last_customer,
        "highest customer id, any range"
    );
    assert_eq!(high.has_orders, !model.orders.is_empty(), "has orders");
    assert!(
        high.order_id >= model.reserved_acked && high.order_id <= model.reserved_issued,
        "reserved order ids {}, acknowledged {}, issued {}",
        high.order_id,
        model.reserved_acked,
        model.reserved_issued
    );
    let last_order = model.orders.keys().last().copied().unwrap_or(0);
    assert!(
        high.order_id >= last_order,
        "order {last_order} above the reservation, {}",
        high.order_id
    );
}

fn run(ops: &[Op], pending_capacity: Option<usize>, flush_before_torn_append: bool) {
    let mut harness = Harness::new(pending_capacity, flush_before_torn_append);
    let mut model = Model::new();
    check(harness.store(), &model);
    for (step, op) in ops.iter().enumerate() {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            harness.run(&mut model, op);
            let fatal = harness.fatal.lock().unwrap().clone();
            assert!(fatal.is_empty(), "fatal errors: {fatal:?}");
            check(harness.store(), &model);
        }));
        if let Err(panic) = outcome {
            eprintln!("model test failed at step {step} of {}: {op:?}", ops.len());
            std::panic::resume_unwind(panic);
        }
    }
    harness.store().close().unwrap();
}

fn write(max_orders: usize) -> impl Strategy<Value = Write> {
    let key = prop_oneof![
        2 => Just(None),
        2 => Just(Some(KeyPick::Fresh)),
        1 => any::<u16>().prop_map(Pick).prop_map(|index| Some(KeyPick::Reuse(index))),
    ];
    let count = prop_oneof![4 => 1..=max_orders.min(3), 1 => 1..=max_orders];
    prop_oneof![
        3 => (0..WEBSTORES.len(), 0..EMAILS, any::<bool>(), 0..NAMES.len(), key.clone())
            .prop_map(|(webstore, email, shout, name, key)| Write::Create {
                webstore,
                email,
                shout,
                name,
                key,
            }),
        3 => (
            any::<u16>().prop_map(Pick),
            0..NAMES.len(),
            prop::option::weighted(0.6, (0..EMAILS, any::<bool>())),
        )
            .prop_map(|(who, name, email)| Write::Update { who, name, email }),
        3 => (any::<u16>().prop_map(Pick), count, key)
            .prop_map(|(who, count, key)| Write::Orders { who, count, key }),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => write(40).prop_map(Op::Write),
        2 => (0..60u64, 0..30i64, 1..6usize)
            .prop_map(|(ttl, advance, batch)| Op::Sweep { ttl, advance, batch }),
        2 => Just(Op::Flush),
        2 => (1..12usize).prop_map(Op::FlushAfter),
        1 => Just(Op::Restart),
        3 => (
            prop::option::weighted(0.8, write(3)),
            prop_oneof![
                2 => Just(None),
                1 => (1..6usize).prop_map(|writes| Some(FlushAt::During(writes))),
                1 => Just(Some(FlushAt::After)),
            ],
            any::<bool>(),
            any::<bool>(),
            any::<u16>().prop_map(Pick),
        )
            .prop_map(|(unacked, flush, torn, truncate, at)| Op::Crash {
                unacked,
                flush,
                torn,
                truncate,
                at,
            }),
    ]
}

fn config() -> ProptestConfig {
    let cases = match std::env::var("BOXSUB_MODEL_CASES") {
        Ok(cases) => cases
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("BOXSUB_MODEL_CASES is a number of cases, not {cases:?}")),
        Err(_) => DEFAULT_CASES,
    };
    ProptestConfig {
        cases,
        failure_persistence: None,
        // Bounded: each shrinking run opens stores and syncs logs.
        max_shrink_time: 30_000,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn the_store_matches_its_model_through_restarts_and_crashes(
        ops in prop::collection::vec(op(), 1..48),
        small_pending in any::<bool>(),
    ) {
        run(&ops, small_pending.then_some(3), FLUSH_BEFORE_A_TORN_APPEND);
    }
}

/// A crash of the pinned cases below: `unacked` reached the snapshot, which was flushed, but
/// its log frame is torn.
fn torn_after_a_flush(unacked: Write) -> Op {
    Op::Crash {
        unacked: Some(unacked),
        flush: Some(FlushAt::After),
        torn: true,
        truncate: false,
        at: Pick(0),
    }
}

/// A customer's acknowledged create and (after a restart, so that the log no longer holds
/// the create) an acknowledged update keeping its email; then an email change that reaches
/// the snapshot, which is flushed, but whose log frame is torn by a crash. The replay of the
/// earlier update puts the record back at `e0@shop.test`; the customer must still own that
/// email. (It did not while an email change removed the old email's entry: the flush kept
/// the removal, and the email named nobody, free for another customer to take.)
#[test]
fn an_email_change_lost_in_a_crash_leaves_the_customer_owning_its_email() {
    let ops = [
        Op::Write(Write::Create {
            webstore: 0,
            email: 0,
            shout: false,
            name: 0,
            key: None,
        }),
        Op::Restart,
        Op::Write(Write::Update {
            who: Pick(0),
            name: 1,
            email: None,
        }),
        torn_after_a_flush(Write::Update {
            who: Pick(0),
            name: 2,
            email: Some((1, false)),
        }),
    ];
    run(&ops, None, true);
}

/// A keyed create whose record an expiry sweep removes; then a keyed create reusing the key,
/// unacknowledged, in the snapshot and flushed, its log frame torn by a crash: the customer
/// is kept (the snapshot holds it), but the replay of the first create's frame puts the old,
/// expired record back over the new one, so a retry with the key creates again. (It did
/// while a key had one record; now each write of a key is a version above the last.)
#[test]
fn a_keyed_create_kept_after_a_crash_keeps_its_own_idempotency_record() {
    let ops = [
        Op::Write(Write::Create {
            webstore: 0,
            email: 0,
            shout: false,
            name: 0,
            key: Some(KeyPick::Fresh),
        }),
        Op::Sweep {
            ttl: 0,
            advance: 10,
            batch: 4,
        },
        torn_after_a_flush(Write::Create {
            webstore: 0,
            email: 1,
            shout: false,
            name: 1,
            key: Some(KeyPick::Reuse(Pick(0))),
        }),
    ];
    run(&ops, None, true);
}

/// Orders acknowledged up to the reservation's last id; then an order past it,
/// unacknowledged, with its reservation (not waited for, as `OrderIds` does), both in the
/// snapshot and flushed, their log frame torn by a crash: the order is kept (the snapshot
/// holds it), and the reservation must stay above its id. (It did not while one key held
/// the reservation: the replay of the earlier one put it back below the kept order's id,
/// and the next order took the same id again.)
#[test]
fn an_order_kept_after_a_crash_stays_below_the_reservation() {
    let ops = [
        Op::Write(Write::Create {
            webstore: 0,
            email: 0,
            shout: false,
            name: 0,
            key: None,
        }),
        Op::Write(Write::Orders {
            who: Pick(0),
            count: 1,
            key: None,
        }),
        Op::Write(Write::Orders {
            who: Pick(0),
            count: RESERVE_AHEAD as usize,
            key: None,
        }),
        torn_after_a_flush(Write::Orders {
            who: Pick(0),
            count: 1,
            key: None,
        }),
    ];
    run(&ops, None, true);
}

/// A customer's acknowledged create with `e0@shop.test` in one webstore and an acknowledged
/// change of its email to `e1`; then another customer's create taking `e0`, unacknowledged,
/// in the snapshot and flushed, its log frame torn by a crash. The new customer is kept
/// (the snapshot holds its record), and must own `e0`. (It did not while an email had one
/// entry: the replay of the first create's frame set it back to the first customer, whose
/// record had moved on, so `e0` named nobody.)
#[test]
fn a_create_kept_after_a_crash_owns_the_email_an_earlier_customer_gave_up() {
    let ops = [
        Op::Write(Write::Create {
            webstore: 1,
            email: 0,
            shout: false,
            name: 0,
            key: None,
        }),
        Op::Write(Write::Update {
            who: Pick(0),
            name: 0,
            email: Some((1, false)),
        }),
        torn_after_a_flush(Write::Create {
            webstore: 1,
            email: 0,
            shout: false,
            name: 0,
            key: None,
        }),
    ];
    run(&ops, None, true);
}
