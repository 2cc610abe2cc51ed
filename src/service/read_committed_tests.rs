//! Read committed, through the service: a store whose log holds its syncs at a gate (as a
//! disk that stalls, or a group's changelog that does not acknowledge) shows no reader a
//! new customer before its create is durable, and a create the log never makes durable
//! leaves no trace: its id is never shown, its email stays free, its event is never in the
//! feed and no later event is either (its number is given up: the watermark stays below it),
//! while a create refused before anything was stored leaves a gap the feed reads past.
//!
//! Must not touch: the service's code (a test module only).

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::*;
use crate::domain::paging::Page;
use crate::store::log::commit::Log;
use crate::store::log::wal::Frame;

/// What the gated log's syncs do.
#[derive(Default)]
struct GateState {
    closed: bool,
    failing: bool,
    waiting: usize,
}

/// Holds a log's syncs while closed, and fails them once failing.
#[derive(Clone, Default)]
struct LogGate(Arc<(Mutex<GateState>, Condvar)>);

impl LogGate {
    fn set(&self, change: impl FnOnce(&mut GateState)) {
        change(&mut self.0 .0.lock().unwrap());
        self.0 .1.notify_all();
    }

    /// Waits (bounded) until `n` syncs wait at the closed gate.
    fn wait_for_syncs(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut state = self.0 .0.lock().unwrap();
        while state.waiting < n {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "{n} syncs never reached the gate");
            state = self.0 .1.wait_timeout(state, left).unwrap().0;
        }
    }
}

/// Fails the gate's log when dropped, so that a test ending (or failing) with syncs held at
/// the gate lets its process exit.
struct FailOnDrop(LogGate);

impl Drop for FailOnDrop {
    fn drop(&mut self) {
        self.0.set(|state| state.failing = true);
    }
}

/// A log that keeps nothing and syncs when its gate lets it.
struct GatedLog(LogGate);

impl Log for GatedLog {
    fn append(&mut self, _frame: &mut Frame) -> std::io::Result<()> {
        Ok(())
    }

    fn sync(&mut self) -> std::io::Result<()> {
        let (lock, changed) = &*self.0 .0;
        let mut state = lock.lock().unwrap();
        state.waiting += 1;
        changed.notify_all();
        while state.closed && !state.failing {
            state = changed.wait(state).unwrap();
        }
        state.waiting -= 1;
        if state.failing {
            return Err(std::io::Error::other("the log is gone"));
        }
        Ok(())
    }

    fn seq(&self) -> u64 {
        0
    }
}

fn service_over(dir: &Path, gate: &LogGate) -> (Arc<Service>, Arc<Webstore>) {
    let store = Store::over_log_for_test(dir, GatedLog(gate.clone()));
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
    let catalogue = Catalogue::demo(0);
    let webstore = catalogue.webstores()[0].clone();
    let service = Service::new(catalogue, store, settings).unwrap();
    (Arc::new(service), webstore)
}

fn ann() -> Map<String, Value> {
    json!({"first_name": "Ann", "email": "ann@example.com", "delivery_service_id": 91,
           "address": {"address_1": "1 Road", "city": "York"}})
    .as_object()
    .cloned()
    .unwrap()
}

/// What every reader of the service says of Ann and of the first ids.
async fn seen_by_readers(service: &Service, webstore: &Webstore) -> (bool, bool, u64) {
    let by_email = service
        .customer_by_email(webstore, "ANN@example.com")
        .unwrap()
        .is_some();
    let by_id = (1..=3).any(|id| service.customer(webstore, CustomerId(id)).is_ok());
    let page = Page {
        number: 1,
        per_page: 50,
    };
    let (customers, total) = service.customers_page(webstore, page).await.unwrap();
    assert_eq!(customers.len() as u64, total, "a page shows what it counts");
    (by_email, by_id, total)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_reader_sees_a_new_customer_before_its_create_is_durable() {
    let dir = tempfile::tempdir().unwrap();
    let gate = LogGate::default();
    let (service, webstore) = service_over(dir.path(), &gate);
    gate.set(|state| state.closed = true);
    let first = {
        let (service, webstore) = (service.clone(), webstore.clone());
        tokio::spawn(async move { service.create_customer(&webstore, &ann(), None).await })
    };
    gate.wait_for_syncs(1);
    assert_eq!(
        seen_by_readers(&service, &webstore).await,
        (false, false, 0),
        "written, not durable: no reader sees it"
    );
    // A second create of the email is not told "taken" by a write that is not durable: it
    // waits for it.
    let second = {
        let (service, webstore) = (service.clone(), webstore.clone());
        tokio::spawn(async move { service.create_customer(&webstore, &ann(), None).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !second.is_finished(),
        "the second create waits for the first"
    );
    gate.set(|state| state.closed = false);
    let KeyedWrite::Made(created) = first.await.unwrap().unwrap() else {
        panic!("a create without a key is never a replay");
    };
    let second = second.await.unwrap();
    assert!(
        matches!(&second, Err(ServiceError::Invalid(errors)) if errors.has("email")),
        "the email is taken once the first create is durable: {second:?}"
    );
    assert_eq!(seen_by_readers(&service, &webstore).await, (true, true, 1));
    assert_eq!(
        service.customer(&webstore, created.id).unwrap().id,
        created.id
    );
    assert_eq!(service.registry().uncommitted_customers(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_the_log_never_makes_durable_leaves_no_trace() {
    let dir = tempfile::tempdir().unwrap();
    let gate = LogGate::default();
    let (service, webstore) = service_over(dir.path(), &gate);
    gate.set(|state| state.closed = true);
    let first = {
        let (service, webstore) = (service.clone(), webstore.clone());
        tokio::spawn(async move { service.create_customer(&webstore, &ann(), None).await })
    };
    gate.wait_for_syncs(1);
    // The log fails: the create is given up.
    gate.set(|state| state.failing = true);
    let first = first.await.unwrap();
    assert!(
        matches!(first, Err(ServiceError::Storage(_))),
        "a create that is not durable is not acknowledged: {first:?}"
    );
    assert_eq!(
        seen_by_readers(&service, &webstore).await,
        (false, false, 0),
        "given up: no reader ever sees it"
    );
    assert_eq!(service.registry().uncommitted_customers(), 1);
    assert_eq!(
        feed_of(&service, &webstore),
        (0, 0),
        "its event is not shown: the watermark stays below its number"
    );
    // Its email is free: a later create is not told "taken" (it fails too: the log is gone).
    let again = service.create_customer(&webstore, &ann(), None).await;
    assert!(
        !matches!(&again, Err(ServiceError::Invalid(_))),
        "the email of a create never made durable is free: {again:?}"
    );
    assert_eq!(
        feed_of(&service, &webstore),
        (0, 0),
        "nor is any later event"
    );
}

/// The watermark of `webstore`'s events, and how many events its feed shows.
fn feed_of(service: &Service, webstore: &Webstore) -> (u64, usize) {
    let watermark = service
        .events()
        .sequencer(&webstore.settings.id)
        .unwrap()
        .watermark();
    let query =
        crate::domain::event_feed::Query::parse(&webstore.settings.id, None, None, None).unwrap();
    let page = service.events_page(webstore, &query).unwrap();
    (watermark, page.events.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_the_log_never_makes_durable_shows_no_event_and_holds_the_feed_below_it() {
    let dir = tempfile::tempdir().unwrap();
    let gate = LogGate::default();
    let (service, webstore) = service_over(dir.path(), &gate);
    let KeyedWrite::Made(ann) = service
        .create_customer(&webstore, &ann(), None)
        .await
        .unwrap()
    else {
        panic!("a create without a key is never a replay");
    };
    assert_eq!(feed_of(&service, &webstore), (1, 1));
    gate.set(|state| state.closed = true);
    let order = {
        let (service, webstore) = (service.clone(), webstore.clone());
        let body = crate::domain::order::body::OrderBody::from_object(
            json!({"customer_id": ann.id.0, "box_id": 217})
                .as_object()
                .cloned()
                .unwrap(),
        );
        tokio::spawn(async move { service.create_order(&webstore, body, None).await })
    };
    gate.wait_for_syncs(1);
    gate.set(|state| state.failing = true);
    let order = order.await.unwrap();
    assert!(order.is_err(), "an order not durable is not acknowledged");
    assert_eq!(
        feed_of(&service, &webstore),
        (1, 1),
        "the order's event, in this node's store only, is never shown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_refused_before_anything_was_stored_leaves_a_gap_the_feed_reads_past() {
    let dir = tempfile::tempdir().unwrap();
    let gate = LogGate::default();
    let (service, webstore) = service_over(dir.path(), &gate);
    let id = &webstore.settings.id;
    let store = service.registry().store().clone();
    store.frozen().freeze(id);
    let refused = service.create_customer(&webstore, &ann(), None).await;
    assert!(
        matches!(refused, Err(ServiceError::Moving)),
        "frozen: {refused:?}"
    );
    store.frozen().thaw(id);
    service
        .create_customer(&webstore, &ann(), None)
        .await
        .unwrap();
    assert_eq!(
        feed_of(&service, &webstore),
        (2, 1),
        "number 1 is a gap: the watermark passes it, and the feed shows number 2"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_reader_sees_an_order_s_change_before_it_is_durable() {
    let dir = tempfile::tempdir().unwrap();
    let gate = LogGate::default();
    let (service, webstore) = service_over(dir.path(), &gate);
    let KeyedWrite::Made(ann) = service
        .create_customer(&webstore, &ann(), None)
        .await
        .unwrap()
    else {
        panic!("a create without a key is never a replay");
    };
    let body = crate::domain::order::body::OrderBody::from_object(
        json!({"customer_id": ann.id.0, "box_id": 217})
            .as_object()
            .cloned()
            .unwrap(),
    );
    let KeyedWrite::Made(order) = service.create_order(&webstore, body, None).await.unwrap() else {
        panic!("a create without a key is never a replay");
    };
    let id = order.id;
    let before = service.order(&webstore, id).await.unwrap();
    gate.set(|state| state.closed = true);
    let change = {
        let (service, webstore) = (service.clone(), webstore.clone());
        let change = crate::domain::order::change::OrderChange::parse(
            json!({"frequency": "weekly"}).as_object().unwrap(),
        );
        tokio::spawn(async move { service.change_order(&webstore, id, change, None).await })
    };
    gate.wait_for_syncs(1);
    // Written, in the store, not durable: a read waits for it rather than show it.
    let read = {
        let (service, webstore) = (service.clone(), webstore.clone());
        tokio::spawn(async move { service.order(&webstore, id).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let read_waited = !read.is_finished();
    // The log fails: the change is given up, and the read never shows it.
    gate.set(|state| state.failing = true);
    assert!(read_waited, "a read showed a change not durable");
    assert!(
        change.await.unwrap().is_err(),
        "not durable, not acknowledged"
    );
    let read = read.await.unwrap();
    assert!(
        read.as_ref()
            .map_or(true, |read| read.history == before.history),
        "a read showed a change given up: {read:?}"
    );
}

/// Runs `request` as the HTTP layer does, tracking whether it began a write, cut off after
/// `cut` (or at its end): whether it had begun one.
async fn began_a_write<F: std::future::Future>(request: F, cut: Duration) -> bool {
    let begun = super::write_outcome::WriteBegun::default();
    let _ = tokio::time::timeout(cut, super::write_outcome::tracked(&begun, request)).await;
    begun.get()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_says_whether_it_began_a_write_when_it_fails_or_is_cut_off() {
    let dir = tempfile::tempdir().unwrap();
    let gate = LogGate::default();
    let (service, webstore) = service_over(dir.path(), &gate);
    // The log fails at the end, or at a failed assertion: its flusher never waits for ever.
    let _fail_at_the_end = FailOnDrop(gate.clone());
    let cut = Duration::from_millis(300);
    let KeyedWrite::Made(anne) = service
        .create_customer(&webstore, &ann(), None)
        .await
        .unwrap()
    else {
        panic!("a create without a key is never a replay");
    };
    let body = crate::domain::order::body::OrderBody::from_object(
        json!({"customer_id": anne.id.0, "box_id": 217})
            .as_object()
            .cloned()
            .unwrap(),
    );
    let KeyedWrite::Made(order) = service.create_order(&webstore, body, None).await.unwrap() else {
        panic!("a create without a key is never a replay");
    };
    let change =
        |body: Value| crate::domain::order::change::OrderChange::parse(body.as_object().unwrap());
    let renamed = json!({"first_name": "Anne"}).as_object().cloned().unwrap();

    // Refused before anything was written: never begun, whatever the log does.
    gate.set(|state| state.closed = true);
    let mut bob = ann();
    bob.remove("email");
    assert!(!began_a_write(service.create_customer(&webstore, &bob, None), cut).await);
    let nothing = change(json!({"box_id": 217}));
    assert!(
        !began_a_write(
            service.change_order(&webstore, order.id, nothing, None),
            cut
        )
        .await,
        "a change that changes nothing writes nothing"
    );
    let refused = change(json!({"frequency": "hourly"}));
    assert!(
        !began_a_write(
            service.change_order(&webstore, order.id, refused, None),
            cut
        )
        .await
    );

    // Handed to a log that does not answer, then cut off: begun, each kind of write.
    let mut cat = ann();
    cat.insert("email".into(), json!("cat@example.com"));
    assert!(began_a_write(service.create_customer(&webstore, &cat, None), cut).await);
    let weekly = change(json!({"frequency": "weekly"}));
    assert!(began_a_write(service.change_order(&webstore, order.id, weekly, None), cut).await);
    assert!(
        began_a_write(service.update_customer(&webstore, anne.id, &renamed), cut).await,
        "an actor's update waiting for the disk"
    );
    // The actor waits for the disk: a change behind it is withdrawn unbegun at the cut.
    let fortnightly = change(json!({"frequency": "fortnightly"}));
    assert!(
        !began_a_write(
            service.change_order(&webstore, order.id, fortnightly, None),
            cut
        )
        .await
    );
}
