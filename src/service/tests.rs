//! The service over a real sled store behind a fault-injecting [`Storage`]: full disks,
//! writes held at a gate, and requests cut off at every await point.
//!
//! Must not touch: the service's code (a test module only).

use std::future::{poll_fn, Future};
use std::path::Path;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::*;
use crate::domain::idempotency::{IdempotencyKey, Pending};
use crate::domain::order::body::OrderBody;
use crate::domain::order::Order;
use crate::registry::Registry;
use crate::store::disk::Reserve;
use crate::store::{
    Durability, Entry, PendingWrites, SledSnapshot, Storage, StoreOptions, WriteBatch,
};

/// The store's own pending layer over sled, except that writes fail while `full` is set (like a full disk) and wait while the
/// gate is closed (like a stalled disk), and the scans that list each webstore's stored
/// customers at start wait while `listing_held` is set (like a start over a large store).
struct TestDisk {
    inner: PendingWrites,
    full: AtomicBool,
    gate: Mutex<Gate>,
    gate_changed: Condvar,
    listing_held: Mutex<bool>,
    listing_changed: Condvar,
}

/// The name of the registry's threads that list the stored customers at start
/// (`Registry::new_state`).
const LISTING_THREAD: &str = "boxsub-list";

#[derive(Default)]
struct Gate {
    closed: bool,
    waiting: usize,
}

impl TestDisk {
    fn before_write(&self) -> Result<(), StoreError> {
        let mut gate = self.gate.lock().unwrap();
        gate.waiting += 1;
        self.gate_changed.notify_all();
        while gate.closed {
            gate = self.gate_changed.wait(gate).unwrap();
        }
        gate.waiting -= 1;
        drop(gate);
        if self.full.load(Ordering::SeqCst) {
            return Err(StoreError::Io {
                context: "writing to the store".into(),
                source: std::io::Error::from_raw_os_error(28),
            });
        }
        Ok(())
    }

    fn close_gate(&self) {
        self.gate.lock().unwrap().closed = true;
    }

    fn open_gate(&self) {
        self.gate.lock().unwrap().closed = false;
        self.gate_changed.notify_all();
    }

    /// Lets the held scans listing the stored customers go on.
    fn release_listing(&self) {
        *self.listing_held.lock().unwrap() = false;
        self.listing_changed.notify_all();
    }

    /// Waits while the listing is held, if this is a thread listing the stored customers.
    fn before_listing_scan(&self) {
        if std::thread::current().name() != Some(LISTING_THREAD) {
            return;
        }
        let mut held = self.listing_held.lock().unwrap();
        while *held {
            held = self.listing_changed.wait(held).unwrap();
        }
    }

    /// Waits (bounded) until `n` writes wait at the closed gate.
    fn wait_for_writers(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut gate = self.gate.lock().unwrap();
        while gate.waiting < n {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "{n} writes never reached the gate");
            gate = self.gate_changed.wait_timeout(gate, left).unwrap().0;
        }
    }
}

impl Storage for TestDisk {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.get(key)
    }
    fn apply(&self, batch: WriteBatch) -> Result<(), StoreError> {
        self.before_write()?;
        self.inner.apply(batch)
    }
    fn put(&self, key: &[u8], value: Vec<u8>) -> Result<(), StoreError> {
        self.before_write()?;
        self.inner.put(key, value)
    }
    fn put_pending(&self, key: &[u8], value: Vec<u8>) -> Result<(), StoreError> {
        self.before_write()?;
        self.inner.put_pending(key, value)
    }
    fn apply_pending(&self) -> Result<(), StoreError> {
        self.inner.apply_pending()
    }
    fn remove(&self, key: &[u8]) -> Result<(), StoreError> {
        self.before_write()?;
        self.inner.remove(key)
    }
    fn remove_if(&self, key: &[u8], expected: &[u8]) -> Result<bool, StoreError> {
        self.before_write()?;
        self.inner.remove_if(key, expected)
    }
    fn scan(&self, prefix: &[u8], skip: usize, limit: usize) -> Result<Vec<Entry>, StoreError> {
        self.inner.scan(prefix, skip, limit)
    }
    fn for_each_between(
        &self,
        from: &[u8],
        to: Option<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError> {
        self.before_listing_scan();
        self.inner.for_each_between(from, to, visit)
    }
    fn last_between(&self, from: &[u8], to: Option<&[u8]>) -> Result<Option<Entry>, StoreError> {
        self.inner.last_between(from, to)
    }
    fn sync(&self) -> Result<(), StoreError> {
        self.inner.sync()
    }
    fn size_on_disk(&self) -> Result<u64, StoreError> {
        self.inner.size_on_disk()
    }
}

pub(super) struct Harness {
    pub(super) service: Service,
    disk: Arc<TestDisk>,
    pub(super) store: Store,
    pub(super) webstore: Arc<Webstore>,
}

/// The harness's store under a new service, as after a restart: the old service's actors
/// stopped, nothing of its memory kept.
pub(super) fn restarted(h: Harness, call_timeout: Duration) -> Harness {
    h.service.registry.stop_all();
    let Harness { disk, store, .. } = h;
    let catalogue = Arc::new(Catalogue::demo(0));
    let service =
        Service::new((*catalogue).clone(), store.clone(), settings(call_timeout)).unwrap();
    Harness {
        service,
        disk,
        store,
        webstore: catalogue.webstores()[0].clone(),
    }
}

fn settings(call_timeout: Duration) -> ServiceSettings {
    ServiceSettings {
        call_timeout,
        password_hashers: 1,
        password_queue: 4,
        max_calls_per_customer: 8,
        max_calls_in_flight: 64,
        id_range: Default::default(),
        idempotency_ttl_secs: 86_400,
        webstores: None,
        admission_slots: 64,
    }
}

pub(super) fn harness(dir: &Path, call_timeout: Duration) -> Harness {
    harness_with(dir, call_timeout, false)
}

/// [`harness`], with the start-up listing of stored customers held until
/// [`TestDisk::release_listing`] if `listing_held`: until then, a page of customers waits.
fn harness_with(dir: &Path, call_timeout: Duration, listing_held: bool) -> Harness {
    let disk = Arc::new(TestDisk {
        inner: PendingWrites::over(Arc::new(SledSnapshot::open(dir, 1 << 20).unwrap())),
        full: AtomicBool::new(false),
        gate: Mutex::new(Gate::default()),
        gate_changed: Condvar::new(),
        listing_held: Mutex::new(listing_held),
        listing_changed: Condvar::new(),
    });
    let store = Store::with_storage(
        disk.clone(),
        dir,
        Durability::Sync {
            commit_interval: std::time::Duration::ZERO,
        },
        Arc::new(|_: &StoreError| {}),
        None,
    )
    .unwrap();
    let catalogue = Arc::new(Catalogue::demo(0));
    let service =
        Service::new((*catalogue).clone(), store.clone(), settings(call_timeout)).unwrap();
    Harness {
        service,
        disk,
        store,
        webstore: catalogue.webstores()[0].clone(),
    }
}

fn body(value: Value) -> Map<String, Value> {
    value.as_object().cloned().unwrap()
}

pub(super) fn order_body(value: Value) -> OrderBody {
    OrderBody::from_object(body(value))
}

pub(super) fn customer_body(email: &str) -> Map<String, Value> {
    body(
        json!({"first_name": "Ann", "email": email, "delivery_service_id": 91,
        "address": {"address_1": "1 Road", "city": "York"}, "password": "correct horse"}),
    )
}

fn keyed<T>(key: &str) -> Option<Pending<T>> {
    Some(Pending {
        key: IdempotencyKey::parse(key).unwrap(),
        body_sha256: [7; 32],
        render: Box::new(|_: &T| RecordedResponse {
            status: 201,
            location: None,
            body: b"{}".to_vec(),
        }),
    })
}

async fn create(h: &Harness, email: &str) -> Arc<Customer> {
    match h
        .service
        .create_customer(&h.webstore, &customer_body(email), None)
        .await
        .unwrap()
    {
        KeyedWrite::Made(customer) => customer,
        other => panic!("a create without a key is made: {other:?}"),
    }
}

/// Waits (bounded) until nothing is held by requests, and fails naming what still is.
async fn assert_settles(service: &Service, after: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let held = service.held();
        if held == Held::default() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "still held 10 s after {after}: {held:?}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Where a cut landed in the future it dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    /// Before its first poll: none of it ran.
    Unstarted,
    /// While it was pending at an await point.
    Inside,
    /// After it had finished: nothing was cut off.
    Finished,
}

/// Polls `future` up to `polls` times, letting every other task run between polls, and
/// drops it if it has not finished: a client that resets after that many steps. Tells where
/// the cut landed.
async fn cut_after_polls<F: Future>(future: F, polls: usize) -> Cut {
    let mut future = pin!(future);
    for _ in 0..polls {
        let step = poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx))).await;
        if step.is_ready() {
            return Cut::Finished;
        }
        tokio::task::yield_now().await;
    }
    if polls == 0 {
        Cut::Unstarted
    } else {
        Cut::Inside
    }
}

/// The operations the test below cuts off, by number.
const CUT_OPERATIONS: [&str; 10] = [
    "keyed customer create",
    "customer update",
    "keyed order create",
    "failed sign-in",
    "orders of a customer",
    "orders of a customer that does not exist",
    "unkeyed order create",
    "unkeyed customer create",
    "delivery list",
    "page of customers",
];

/// The one operation with no await point to cut it at: the actor of a customer that does not
/// exist fails to activate at once (its record is read synchronously), so the request ends
/// on its first poll.
const WITHOUT_AWAIT_POINT: usize = 5;

/// Where the cuts of one operation landed.
#[derive(Debug, Default, Clone, Copy)]
struct Landed {
    unstarted: usize,
    /// Cut by poll count while pending.
    inside_by_polls: usize,
    /// Cut by time while pending.
    inside_by_time: usize,
    finished: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_cut_off_at_any_await_point_leave_nothing_held() {
    const POLL_STEPS: usize = 16;
    let dir = tempfile::tempdir().unwrap();
    // The start-up listing of the stored customers is held through the cuts by poll count,
    // so that a page of customers (which waits for it) has an await point to be cut at.
    let h = harness_with(dir.path(), Duration::from_secs(5), true);
    let ann = create(&h, "ann@example.com").await.id;
    let ann_id = ann.0.to_string();
    let ann_key = ann_id.as_str();
    // A weekly order is due every 7 days from its start, and each delivery list cut below is
    // of a date of its own: it is sorted afresh (which yields), never found kept.
    let weekly = order_body(json!({"customer_id": ann.0, "box_id": 217, "frequency": "weekly"}));
    let KeyedWrite::Made(weekly) = h
        .service
        .create_order(&h.webstore, weekly, None)
        .await
        .unwrap()
    else {
        panic!("an order without a key is never a replay");
    };
    let first_delivery = weekly.content().schedule.start;
    let page = Page::parse(None, None).unwrap();
    let mut n = 0;
    let mut cuts = 0;
    let mut landed = [Landed::default(); CUT_OPERATIONS.len()];
    // The emails of the customers the cut creates were for.
    let mut new_emails = Vec::new();
    // Cut each request after 0, 1, 2, … polls, then after a few lengths of time that land
    // inside password hashing, actor calls and group commits.
    let polls = (0..POLL_STEPS).map(Some).chain([None; 6]);
    let times = [1, 2, 4, 8, 16, 32].map(Duration::from_millis);
    for (step, cut_polls) in polls.enumerate() {
        if step == POLL_STEPS {
            h.disk.release_listing();
        }
        let time = times[step.saturating_sub(POLL_STEPS).min(times.len() - 1)];
        for (op, landed) in landed.iter_mut().enumerate() {
            n += 1;
            let ws = &h.webstore;
            let s = &h.service;
            let email = format!("cut{n}@example.com");
            if op == 0 || op == 7 {
                new_emails.push(email.clone());
            }
            let future: std::pin::Pin<Box<dyn Future<Output = ()> + Send + '_>> = match op {
                0 => Box::pin(async move {
                    let key = format!("customer-{n}");
                    let _ = s
                        .create_customer(ws, &customer_body(&email), keyed(&key))
                        .await;
                }),
                1 => Box::pin(async move {
                    let change = body(json!({"email": format!("ann{n}@example.com"),
                        "password": "another horse"}));
                    let _ = s.update_customer(ws, ann, &change).await;
                }),
                2 => Box::pin(async move {
                    let order = order_body(json!({"customer_id": ann.0, "box_id": 217}));
                    let _ = s
                        .create_order(ws, order, keyed::<Order>(&format!("order-{n}")))
                        .await;
                }),
                3 => Box::pin(async move {
                    let current = s.customer(ws, ann).unwrap();
                    let _ = s.sign_in(ws, current.email.as_str(), "wrong horse").await;
                }),
                4 => Box::pin(async move {
                    let _ = s.orders_of(ws, Some(ann_key)).await;
                }),
                5 => Box::pin(async move {
                    // A customer that does not exist: its activation must not linger.
                    let _ = s.orders_of(ws, Some(&(1_000_000 + n).to_string())).await;
                }),
                6 => Box::pin(async move {
                    let order = order_body(json!({"customer_id": ann.0, "box_id": 217}));
                    let _ = s.create_order(ws, order, None).await;
                }),
                7 => Box::pin(async move {
                    let _ = s.create_customer(ws, &customer_body(&email), None).await;
                }),
                8 => Box::pin(async move {
                    let date = first_delivery.plus(7 * n);
                    let _ = s.deliveries(ws, date, None, page).await;
                }),
                _ => Box::pin(async move {
                    let _ = s.customers_page(ws, page).await;
                }),
            };
            let cut = async {
                match cut_polls {
                    Some(polls) => cut_after_polls(future, polls).await,
                    None => match tokio::time::timeout(time, future).await {
                        Ok(()) => Cut::Finished,
                        // `timeout` polls the future before its timer: it was pending.
                        Err(_) => Cut::Inside,
                    },
                }
            };
            let cut = tokio::time::timeout(Duration::from_secs(10), cut)
                .await
                .unwrap_or_else(|_| {
                    panic!(
                        "cut {} ({}) did not end in 10 s",
                        cuts + 1,
                        CUT_OPERATIONS[op]
                    )
                });
            match (cut, cut_polls) {
                (Cut::Unstarted, _) => landed.unstarted += 1,
                (Cut::Inside, Some(_)) => landed.inside_by_polls += 1,
                (Cut::Inside, None) => landed.inside_by_time += 1,
                (Cut::Finished, _) => landed.finished += 1,
            }
            cuts += 1;
            assert_settles(&h.service, &format!("cut {cuts} ({})", CUT_OPERATIONS[op])).await;
        }
    }
    // Every operation that has an await point was cut off at one at least: the sweep of poll
    // counts reached inside it, rather than only before it started or after it finished.
    for (op, name) in CUT_OPERATIONS.iter().enumerate() {
        if op != WITHOUT_AWAIT_POINT {
            assert!(
                landed[op].inside_by_polls > 0,
                "no cut landed inside a {name}: {:?}",
                landed[op]
            );
        }
    }

    // A cut create either stored its customer (and listed it) or gave back the id it took:
    // the customer list holds exactly Ann and the customers the cut creates stored, each
    // once (Ann, created while the start-up listing was held, is both allocated and found by
    // it).
    let created = new_emails
        .iter()
        .filter(|email| {
            let found = h.service.customer_by_email(&h.webstore, email).unwrap();
            found.is_some()
        })
        .count();
    let (_, total) = h.service.customers_page(&h.webstore, page).await.unwrap();
    assert_eq!(
        total,
        1 + created as u64,
        "the customer list holds Ann and the {created} customers the cut creates stored"
    );
    // Only Ann has an actor. The customers the cut creates stored are real but have none:
    // creates, sign-ins, delivery lists and pages read customers without starting one, and
    // only Ann is changed or has her orders read. The lookups of a customer that does not
    // exist leave none. Nothing passivates or stops actors here (the server's housekeeping
    // does), so cutting requests off did not take Ann's away either.
    assert_eq!(
        h.service.registry().active_count(),
        1,
        "only Ann's actor is live ({created} cut creates stored a customer, which starts none)"
    );

    // Whatever was cut off, the customer works: orders, changes, lists.
    let order = order_body(json!({"customer_id": ann.0, "box_id": 217}));
    h.service
        .create_order(&h.webstore, order, None)
        .await
        .unwrap();
    let change = body(json!({"email": "ann.final@example.com", "password": "final horse 1"}));
    h.service
        .update_customer(&h.webstore, ann, &change)
        .await
        .unwrap();
    let orders = h
        .service
        .orders_of(&h.webstore, Some(ann_key))
        .await
        .unwrap();
    assert!(!orders.is_empty());
    assert_settles(&h.service, "the final requests").await;
    // An order written before its request was cut off is on disk, so readers find it by id,
    // whether or not anyone still waited for its answer.
    for order in &orders {
        let found = h.service.order(&h.webstore, order.id).await;
        assert!(found.is_ok(), "order {} is not published", order.id.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_sign_ins_with_the_right_password_never_lock_the_owner_out() {
    let dir = tempfile::tempdir().unwrap();
    let h = harness(dir.path(), Duration::from_secs(5));
    let ann = create(&h, "ann@example.com").await;
    for polls in 0..300 {
        let attempt = h
            .service
            .sign_in(&h.webstore, "ANN@example.com", "correct horse");
        cut_after_polls(attempt, polls % 4).await;
    }
    assert_settles(&h.service, "the abandoned sign-ins").await;
    let signed_in = h
        .service
        .sign_in(&h.webstore, "ann@example.com", "correct horse")
        .await
        .unwrap();
    assert_eq!(signed_in.map(|c| c.id), Some(ann.id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_email_change_past_its_deadline_keeps_its_claim_until_written() {
    let dir = tempfile::tempdir().unwrap();
    let h = Arc::new(harness(dir.path(), Duration::from_millis(100)));
    let ann = create(&h, "ann@example.com").await.id;

    // Ann's change to taken@ reaches the disk and stalls there, past its call deadline.
    h.disk.close_gate();
    let started = {
        let h = h.clone();
        tokio::spawn(async move {
            let change = body(json!({"email": "taken@example.com"}));
            h.service.update_customer(&h.webstore, ann, &change).await
        })
    };
    h.disk.wait_for_writers(1);
    // A second change, queued behind it, is withdrawn at its deadline: a 503 that changes
    // nothing and gives its email up at once.
    let change = body(json!({"email": "withdrawn@example.com"}));
    let withdrawn = h.service.update_customer(&h.webstore, ann, &change).await;
    assert!(
        matches!(withdrawn, Err(ServiceError::Busy)),
        "{withdrawn:?}"
    );

    // A create of the stalled change's email waits for that change to be durable (it is
    // told "taken" only by a write the store holds), then loses; one of the withdrawn email
    // may proceed (it waits for the disk like everything else).
    let lost = {
        let h = h.clone();
        tokio::spawn(async move {
            let fields = customer_body("TAKEN@example.com");
            h.service.create_customer(&h.webstore, &fields, None).await
        })
    };
    let bob = {
        let h = h.clone();
        tokio::spawn(async move {
            let fields = customer_body("withdrawn@example.com");
            h.service.create_customer(&h.webstore, &fields, None).await
        })
    };
    h.disk.wait_for_writers(2);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !lost.is_finished(),
        "a create is not told taken by a change that is not durable"
    );
    h.disk.open_gate();
    let ann_now = started.await.unwrap().unwrap();
    assert_eq!(ann_now.email.as_str(), "taken@example.com");
    let lost = lost.await.unwrap();
    assert!(
        matches!(&lost, Err(ServiceError::Invalid(errors)) if errors.has("email")),
        "{lost:?}"
    );
    let KeyedWrite::Made(bob) = bob.await.unwrap().unwrap() else {
        panic!("a create without a key is never a replay");
    };
    assert_settles(&h.service, "the race").await;

    // What a restart finds: one holder per email, as answered.
    let current = Arc::new(crate::domain::catalogue::CurrentCatalogue::new(
        Catalogue::demo(0),
    ));
    let events = Arc::new(crate::events::Events::new(h.store.clone()));
    let reopened = Registry::open(current, h.store.clone(), Default::default(), events).unwrap();
    let holder = |email: &str| {
        reopened
            .customer_by_email(&h.webstore, email)
            .unwrap()
            .map(|c| c.id)
    };
    assert_eq!(holder("taken@example.com"), Some(ann));
    assert_eq!(holder("withdrawn@example.com"), Some(bob.id));
    assert_eq!(holder("ann@example.com"), None);
    let stored_ann = reopened.customer(h.webstore.idx, ann).unwrap().unwrap();
    assert_eq!(stored_ann.email.as_str(), "taken@example.com");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_request_dropped_before_its_actor_begins_it_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let h = Arc::new(harness(dir.path(), Duration::from_secs(5)));
    let ann = create(&h, "ann@example.com").await.id;
    let order = || order_body(json!({"customer_id": ann.0, "box_id": 217}));

    h.disk.close_gate();
    let first = {
        let h = h.clone();
        let order = order();
        tokio::spawn(async move { h.service.create_order(&h.webstore, order, None).await })
    };
    h.disk.wait_for_writers(1);
    // Queued behind the stalled one, then its client goes away.
    let queued = tokio::time::timeout(
        Duration::from_millis(50),
        h.service.create_order(&h.webstore, order(), None),
    )
    .await;
    assert!(queued.is_err(), "the second order cannot finish yet");
    h.disk.open_gate();
    let KeyedWrite::Made(first) = first.await.unwrap().unwrap() else {
        panic!("an order without a key is never a replay");
    };
    assert_settles(&h.service, "the dropped order").await;

    let orders = h
        .service
        .orders_of(&h.webstore, Some(&ann.0.to_string()))
        .await
        .unwrap();
    let ids: Vec<_> = orders.iter().map(|order| order.id).collect();
    assert_eq!(
        ids,
        [first.id],
        "only the order whose client waited is kept"
    );
}

#[tokio::test]
async fn below_the_free_space_reserve_writes_are_refused_and_reads_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = dir.path().join("store");
    let ann = {
        let h = harness(&store_dir, Duration::from_secs(5));
        let ann = create(&h, "ann@example.com").await;
        h.store.close().unwrap();
        ann
    };
    // The same store, watched with a reserve no filesystem can keep.
    let options = StoreOptions {
        durability: Durability::Sync {
            commit_interval: std::time::Duration::ZERO,
        },
        cache_bytes: 1 << 20,
        reserve: Reserve::Bytes(u64::MAX),
    };
    let store = Store::open(&store_dir, options, Arc::new(|_: &StoreError| {})).unwrap();
    let settings = ServiceSettings {
        call_timeout: Duration::from_secs(5),
        password_hashers: 1,
        password_queue: 4,
        max_calls_per_customer: 8,
        max_calls_in_flight: 64,
        id_range: Default::default(),
        idempotency_ttl_secs: 86_400,
        webstores: None,
        admission_slots: 64,
    };
    let catalogue = Arc::new(Catalogue::demo(0));
    let service = Service::new((*catalogue).clone(), store.clone(), settings).unwrap();
    let webstore = catalogue.webstores()[0].clone();

    let refused = [
        service
            .create_customer(&webstore, &customer_body("bob@example.com"), None)
            .await
            .map(drop),
        service
            .update_customer(&webstore, ann.id, &body(json!({"first_name": "Anna"})))
            .await
            .map(drop),
        service
            .create_order(
                &webstore,
                order_body(json!({"customer_id": ann.id.0, "box_id": 217})),
                None,
            )
            .await
            .map(drop),
    ];
    for outcome in refused {
        assert!(
            matches!(
                outcome,
                Err(ServiceError::WritesRefused(Refusal::NearlyFull))
            ),
            "{outcome:?}"
        );
    }
    assert_eq!(
        service.customer(&webstore, ann.id).unwrap().first_name,
        "Ann"
    );
    assert!(service
        .customer_by_email(&webstore, "ann@example.com")
        .unwrap()
        .is_some());
    assert!(service
        .orders_of(&webstore, Some(&ann.id.0.to_string()))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        service
            .sign_in(&webstore, "ann@example.com", "correct horse")
            .await
            .unwrap()
            .map(|c| c.id),
        Some(ann.id)
    );
}

#[tokio::test]
async fn a_full_disk_fails_the_write_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let h = harness(dir.path(), Duration::from_secs(5));
    let customer = customer_body("ann@example.com");

    h.disk.full.store(true, Ordering::SeqCst);
    let refused = h
        .service
        .create_customer(&h.webstore, &customer, None)
        .await;
    assert!(
        matches!(refused, Err(ServiceError::Storage(_))),
        "{refused:?}"
    );
    assert!(h
        .service
        .customer_by_email(&h.webstore, "ann@example.com")
        .unwrap()
        .is_none());

    h.disk.full.store(false, Ordering::SeqCst);
    let ann = create(&h, "ann@example.com").await;
    h.disk.full.store(true, Ordering::SeqCst);
    let order = order_body(json!({"customer_id": ann.id.0, "box_id": 217}));
    let refused = h.service.create_order(&h.webstore, order, None).await;
    assert!(
        matches!(refused, Err(ServiceError::Storage(_))),
        "{refused:?}"
    );
    let orders = h
        .service
        .orders_of(&h.webstore, Some(&ann.id.0.to_string()))
        .await
        .unwrap();
    assert!(orders.is_empty(), "a refused order must not be kept");
    assert_settles(&h.service, "the refused writes").await;
}

#[tokio::test]
async fn reading_customers_starts_no_actors_and_orders_start_one() {
    let dir = tempfile::tempdir().unwrap();
    let h = harness(dir.path(), Duration::from_secs(5));
    for n in 0..5 {
        create(&h, &format!("ann{n}@example.com")).await;
    }
    let page = Page::parse(None, None).unwrap();
    let (listed, total) = h.service.customers_page(&h.webstore, page).await.unwrap();
    assert_eq!((listed.len(), total), (5, 5));
    assert!(h
        .service
        .customer_by_email(&h.webstore, "ANN3@example.com")
        .unwrap()
        .is_some());
    assert_eq!(
        h.service.registry().active_count(),
        0,
        "reads must not activate actors"
    );

    let order = order_body(json!({"customer_id": listed[0].id.0, "box_id": 217}));
    h.service
        .create_order(&h.webstore, order, None)
        .await
        .unwrap();
    assert_eq!(h.service.registry().active_count(), 1);
    assert_eq!(h.service.registry().passivate_idle(Duration::ZERO), 1);
    assert_eq!(h.service.registry().active_count(), 0);
    // The order's record and the six events' (five customers created, one order).
    assert_eq!(
        h.disk.inner.waiting_puts(),
        1 + 6,
        "the order's record still waits for a checkpoint, so it is read from the waiting map"
    );
    let orders = h
        .service
        .orders_of(&h.webstore, Some(&listed[0].id.0.to_string()))
        .await
        .unwrap();
    assert_eq!(
        orders.len(),
        1,
        "a passivated customer comes back from the store"
    );
}

#[tokio::test]
async fn a_remembered_email_that_changed_hands_is_never_answered() {
    let dir = tempfile::tempdir().unwrap();
    let h = harness(dir.path(), Duration::from_secs(5));
    let lookup = |email: &str| {
        h.service
            .customer_by_email(&h.webstore, email)
            .unwrap()
            .map(|c| c.id)
    };
    let ann = create(&h, "x@example.com").await;
    assert_eq!(lookup("X@example.com"), Some(ann.id));

    // Ann moves to y; the remembered x → Ann must not answer any more.
    let change = body(json!({"email": "y@example.com"}));
    h.service
        .update_customer(&h.webstore, ann.id, &change)
        .await
        .unwrap();
    assert_eq!(lookup("x@example.com"), None);
    assert_eq!(lookup("y@example.com"), Some(ann.id));

    // x is free again, and a new customer holding it is the answer.
    let bob = create(&h, "x@example.com").await;
    assert_eq!(lookup("x@example.com"), Some(bob.id));
    // Back to Ann's first hint after Bob moves on: still only the current holder.
    let change = body(json!({"email": "z@example.com"}));
    h.service
        .update_customer(&h.webstore, bob.id, &change)
        .await
        .unwrap();
    assert_eq!(lookup("x@example.com"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_customers_order_list_holds_only_orders_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let h = Arc::new(harness(dir.path(), Duration::from_secs(5)));
    let ann = create(&h, "ann@example.com").await.id;
    let ann_id = ann.0.to_string();
    // Creates race lists on one customer: its actor lists while orders it wrote are still
    // on their way to disk. Every order a list shows must be on disk, which the order index
    // (published only then) tells.
    let creating = {
        let h = h.clone();
        tokio::spawn(async move {
            for _ in 0..4 {
                let creates = (0..6).map(|_| {
                    let order = order_body(json!({"customer_id": ann.0, "box_id": 217}));
                    h.service.create_order(&h.webstore, order, None)
                });
                for created in futures_util::future::join_all(creates).await {
                    created.unwrap();
                }
            }
        })
    };
    let mut listed = 0;
    for _ in 0..200 {
        let orders = h
            .service
            .orders_of(&h.webstore, Some(&ann_id))
            .await
            .unwrap();
        for order in &orders {
            assert!(
                h.service.order(&h.webstore, order.id).await.is_ok(),
                "order {} was listed before it was on disk",
                order.id.0
            );
        }
        listed = orders.len();
        if creating.is_finished() {
            break;
        }
    }
    creating.await.unwrap();
    assert!(listed > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_sign_ins_cut_off_at_any_await_point_leave_nothing_held() {
    use crate::domain::catalogue::DEMO_PRODUCERS;
    let dir = tempfile::tempdir().unwrap();
    let h = harness_with(dir.path(), Duration::from_secs(5), false);
    let (_, email, password) = DEMO_PRODUCERS[0];
    let client = |n: u8| std::net::IpAddr::from([192, 0, 2, n]);
    let mut landed = Landed::default();
    // Right and wrong passwords, each from a client of its own, beside a customer's sign-in
    // in the same pool, each cut after a number of polls and by time.
    for cut in 0..24u8 {
        let guess = if cut % 2 == 0 {
            password
        } else {
            "a wrong guess"
        };
        let producer = h
            .service
            .producer_sign_in(email, guess.to_owned(), client(cut));
        let customer = h
            .service
            .sign_in(&h.webstore, "ann@example.com", "wrong horse");
        let (producer_cut, _) = tokio::join!(
            cut_after_polls(producer, usize::from(cut % 8)),
            cut_after_polls(customer, usize::from(cut % 5)),
        );
        match producer_cut {
            Cut::Unstarted => landed.unstarted += 1,
            Cut::Inside => landed.inside_by_polls += 1,
            Cut::Finished => landed.finished += 1,
        }
        let by_time = tokio::time::timeout(
            Duration::from_millis(u64::from(cut)),
            h.service
                .producer_sign_in(email, guess.to_owned(), client(100 + cut)),
        )
        .await;
        if by_time.is_err() {
            landed.inside_by_time += 1;
        }
        assert_settles(&h.service, &format!("producer sign-in cut {cut}")).await;
    }
    assert!(
        landed.inside_by_polls > 0 && landed.inside_by_time > 0,
        "{landed:?}"
    );
    // Nothing is left in the pool or the limits: another producer signs in at once.
    let (_, other, other_password) = DEMO_PRODUCERS[1];
    h.service
        .producer_sign_in(other, other_password.to_owned(), client(250))
        .await
        .expect("another producer signs in");
    assert_settles(&h.service, "the owner's sign-in").await;
}
