//! The store's own tests: no write lands after `close`, records and indexes survive a
//! reopening, an unreadable record is an error naming its key, a data directory that is a
//! file is refused with its path, a range of events reads the same across its windows.

use super::*;
use crate::domain::catalogue::WebstoreIdx;
use crate::domain::customer::{Address, Customer};
use crate::domain::email::Email;
use crate::domain::ids::{CustomerId, OrderId};
use crate::store::kinds::{customers, events, orders};
use crate::store::pending::order_chunks;
use events::EventRecord;
use kinds::sessions::SessionRecord;
use kinds::webhook_positions::WebhookPosition;

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
        halts: crate::domain::halts::Halts::none(),
        account: crate::domain::account::Account::opened(CustomerId(id), 0),
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
    let after_close = store.create_customer(
        &customer(9, "late@b.c"),
        "shop",
        None,
        None,
        Box::new(|| {}),
    );
    assert!(matches!(after_close, Err(StoreError::Closed)));
    assert!(matches!(
        store.reserve_order_ids(0, 10),
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
        drop(
            store
                .create_customer(&customer(7, "a@b.c"), "shop", None, None, Box::new(|| {}))
                .unwrap(),
        );
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
fn a_record_the_store_could_not_read_back_is_refused_at_the_write_and_all_else_reads() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    drop(
        store
            .create_customer(&customer(3, "x@y.z"), "shop", None, None, Box::new(|| {}))
            .unwrap(),
    );
    let fine = order(30, 3);
    drop(
        store
            .create_order(&fine, "shop", None, None, Box::new(|| ()))
            .unwrap(),
    );
    // An order whose lists claim more of the decoder's memory than it reads: 200,000
    // exclusions (far past what the rules let through) make a record under a megabyte that
    // the decoder, counting eight bytes an id, would refuse.
    let mut huge = order(31, 3);
    let mut versions = huge.history.contents().to_vec();
    versions[0].content.exclusions = (1..=200_000).collect();
    huge.history = crate::domain::order::history::OrderHistory::from_parts(
        versions,
        Vec::new(),
        crate::domain::order::history::NEVER_CHANGED,
        0,
    )
    .unwrap();
    let refused = store
        .create_order(&huge, "shop", None, None, Box::new(|| ()))
        .err()
        .expect("refused");
    assert!(
        matches!(refused, StoreError::RecordTooLarge { kind: "order", .. }),
        "{refused}"
    );
    assert!(refused.wrote_nothing());
    assert_eq!(store.load_order(CustomerId(3), OrderId(31)).unwrap(), None);
    assert_eq!(
        store.load_order(CustomerId(3), OrderId(30)).unwrap(),
        Some(fine)
    );
    assert_eq!(store.verify().unwrap().orders, 1);
}

/// The bound `codec::encode_readable` leaves unchecked holds only while no element of a
/// record's lists is larger than 256 bytes in memory.
#[test]
fn no_element_of_a_record_s_lists_is_larger_than_256_bytes() {
    use crate::store::kinds::{deliveries, orders};
    for (name, size) in [
        (
            "ContentRecord",
            std::mem::size_of::<orders::ContentRecord>(),
        ),
        (
            "LifecycleRecord",
            std::mem::size_of::<orders::LifecycleRecord>(),
        ),
        ("ExtraRecord", std::mem::size_of::<orders::ExtraRecord>()),
        ("HaltRecord", std::mem::size_of::<customers::HaltRecord>()),
        ("Option<String>", std::mem::size_of::<Option<String>>()),
        (
            "DeliveryRecord",
            std::mem::size_of::<deliveries::DeliveryRecord>(),
        ),
        ("u64", 8),
    ] {
        assert!(size <= 256, "{name}: {size} bytes");
    }
}

#[test]
fn an_unreadable_record_is_an_error_naming_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    drop(
        store
            .create_customer(&customer(3, "x@y.z"), "shop", None, None, Box::new(|| {}))
            .unwrap(),
    );
    let mut damage = WriteBatch::default();
    damage.put(
        customers::customer_key(3),
        b"BXS\x01\x00\x01garbage".to_vec(),
    );
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

/// A snapshot that keeps in memory what it was told and, on disk, only what it held at its
/// last flush: a crash ([`LossySnapshot::after_crash`]) loses every write since. sled after
/// a `kill -9` or a power cut keeps a prefix of its writes; this keeps the shortest one, so
/// that everything acknowledged must come back from the write-ahead log. The store's own
/// pending layer runs over it, so what waits there is lost at a crash too.
#[derive(Default)]
pub(crate) struct LossySnapshot {
    live: std::sync::Mutex<std::collections::BTreeMap<Vec<u8>, Vec<u8>>>,
    on_disk: std::sync::Mutex<std::collections::BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl LossySnapshot {
    /// What a process starting after a crash finds: the state of the last flush.
    pub(crate) fn after_crash(&self) -> Arc<LossySnapshot> {
        let on_disk = self.on_disk.lock().unwrap().clone();
        Arc::new(LossySnapshot {
            live: std::sync::Mutex::new(on_disk.clone()),
            on_disk: std::sync::Mutex::new(on_disk),
        })
    }

    fn live(&self) -> std::sync::MutexGuard<'_, std::collections::BTreeMap<Vec<u8>, Vec<u8>>> {
        self.live.lock().unwrap()
    }

    /// Every entry it holds now (in memory), in key order.
    pub(crate) fn entries(&self) -> Vec<Entry> {
        self.live()
            .iter()
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect()
    }
}

impl Snapshot for LossySnapshot {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.live().get(key).cloned())
    }
    fn apply(&self, batch: WriteBatch) -> Result<(), StoreError> {
        let mut live = self.live();
        for (key, value) in batch.ops {
            match value {
                Some(value) => live.insert(key, value),
                None => live.remove(&key),
            };
        }
        Ok(())
    }
    fn put(&self, key: &[u8], value: Vec<u8>) -> Result<(), StoreError> {
        self.live().insert(key.to_vec(), value);
        Ok(())
    }
    fn remove(&self, key: &[u8]) -> Result<(), StoreError> {
        self.live().remove(key);
        Ok(())
    }
    fn remove_if(&self, key: &[u8], expected: &[u8]) -> Result<bool, StoreError> {
        let mut live = self.live();
        let holds = live.get(key).is_some_and(|value| value == expected);
        if holds {
            live.remove(key);
        }
        Ok(holds)
    }
    fn for_each_between(
        &self,
        from: &[u8],
        to: Option<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError> {
        let entries: Vec<Entry> = self
            .live()
            .range(from.to_vec()..)
            .take_while(|(key, _)| to.is_none_or(|to| key.as_slice() < to))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        for (key, value) in entries {
            if !visit(&key, &value) {
                break;
            }
        }
        Ok(())
    }
    fn last_between(&self, from: &[u8], to: Option<&[u8]>) -> Result<Option<Entry>, StoreError> {
        Ok(self
            .live()
            .range(from.to_vec()..)
            .take_while(|(key, _)| to.is_none_or(|to| key.as_slice() < to))
            .last()
            .map(|(key, value)| (key.clone(), value.clone())))
    }
    fn flush(&self) -> Result<(), StoreError> {
        let live = self.live().clone();
        *self.on_disk.lock().unwrap() = live;
        Ok(())
    }
}

/// A durable store over `snapshot`, with the store's own pending layer between.
fn over(snapshot: &Arc<LossySnapshot>, dir: &Path) -> Store {
    Store::with_storage(
        Arc::new(PendingWrites::over(snapshot.clone())),
        dir,
        Durability::Sync {
            commit_interval: std::time::Duration::ZERO,
        },
        Arc::new(|error: &StoreError| panic!("fatal: {error}")),
        None,
    )
    .unwrap()
}

fn order(id: u64, customer: u64) -> crate::domain::order::Order {
    use crate::domain::day::Day;
    use crate::domain::day::WeekDays;
    use crate::domain::order::content::OrderContent;
    OrderContent::weekly_for_test(217)
        .with_schedule(Day(20_000 + id as i32), WeekDays::only(1))
        .placed(id, customer, 0)
}

/// Acknowledged changes of four writers (creates, orders, email changes), made on `store`;
/// returns what each customer should hold.
fn acknowledged_changes(store: &Store) -> Vec<(Customer, Vec<u64>)> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let writers: Vec<_> = (0..4u64)
        .map(|writer| {
            let store = store.clone();
            runtime.spawn(async move {
                let mut made = Vec::new();
                for n in 0..25u64 {
                    let id = 1 + writer * 100 + n;
                    let mut customer = customer(id, &format!("c{id}@shop.test"));
                    let created = store
                        .create_customer(&customer, "shop", None, None, Box::new(|| {}))
                        .unwrap();
                    created.durable().await.unwrap();
                    let mut orders = Vec::new();
                    for k in 0..3 {
                        let order = order(id * 10 + k, id);
                        store
                            .create_order(&order, "shop", None, None, Box::new(|| ()))
                            .unwrap()
                            .durable()
                            .await
                            .unwrap();
                        orders.push(order.id.0);
                    }
                    if n % 3 == 0 {
                        let previous = customer.clone();
                        customer.email = Email::from_trusted(format!("moved{id}@shop.test"));
                        let moved = store
                            .update_customer(
                                &customer,
                                &previous,
                                "shop",
                                None,
                                None,
                                Box::new(|| {}),
                            )
                            .unwrap();
                        moved.durable().await.unwrap();
                    }
                    made.push((customer, orders));
                }
                made
            })
        })
        .collect();
    runtime.block_on(async {
        let mut all = Vec::new();
        for writer in writers {
            all.extend(writer.await.unwrap());
        }
        all
    })
}

fn assert_all_there(store: &Store, expected: &[(Customer, Vec<u64>)]) {
    for (customer, orders) in expected {
        let loaded = store.load_customer(customer.id).unwrap().expect("customer");
        assert_eq!(loaded.record.email, customer.email.as_str());
        let key = customer.email.index_key();
        assert_eq!(store.email_owner("shop", &key).unwrap(), Some(customer.id));
        let stored: Vec<u64> = loaded.orders.iter().map(|order| order.id.0).collect();
        assert_eq!(&stored, orders, "orders of customer {}", customer.id.0);
    }
}

#[test]
fn every_acknowledged_write_comes_back_from_the_log_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Arc::new(LossySnapshot::default());
    let store = over(&engine, dir.path());
    let expected = acknowledged_changes(&store);
    // The crash: the engine keeps only what it held at its last sync, which is at open,
    // since no segment filled up.
    // (Dropped, not closed: its threads stop, and what it does meanwhile reaches only the
    // engine the crash left behind.)
    let after = engine.after_crash();
    drop(store);
    assert!(
        after.live().get(&customers::customer_key(1)).is_none(),
        "a weak test"
    );

    let store = over(&after, dir.path());
    assert_all_there(&store, &expected);
    // The replay was made durable: a second crash right away loses nothing.
    let again = after.after_crash();
    drop(store);
    assert_all_there(&over(&again, dir.path()), &expected);
}

#[test]
fn a_torn_last_frame_is_dropped_whole_and_what_came_before_it_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Arc::new(LossySnapshot::default());
    let store = over(&engine, dir.path());
    let expected = acknowledged_changes(&store);
    // One more create, its frame then cut short as a crash in mid-append leaves it.
    let late = customer(999, "late@shop.test");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime
        .block_on(
            store
                .create_customer(&late, "shop", None, None, Box::new(|| {}))
                .unwrap()
                .durable(),
        )
        .unwrap();
    let after = engine.after_crash();
    drop(store);
    let wal = log::wal::WalDir::open(dir.path()).unwrap();
    let last = *wal.segments().unwrap().first().unwrap();
    let path = dir
        .path()
        .join(log::wal::DIR_NAME)
        .join(format!("{last:016x}"));
    let bytes = std::fs::read(&path).unwrap();
    let end = bytes.iter().rposition(|byte| *byte != 0).unwrap() + 1;
    for cut in [end - 1, end - 20, end - 60] {
        let mut torn = bytes.clone();
        torn[cut..end].fill(0);
        std::fs::write(&path, &torn).unwrap();
        let store = over(&after.after_crash(), dir.path());
        assert_all_there(&store, &expected);
        assert!(store.load_customer(CustomerId(999)).unwrap().is_none());
        assert!(store
            .email_entries("shop", "late@shop.test")
            .unwrap()
            .is_empty());
    }
}

#[test]
fn orders_packed_into_chunks_read_back_once_each_after_a_reopening_and_a_replay() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    // Two customers, 45 orders each (more than a chunk holds), in turns.
    let mut expected: Vec<u64> = Vec::new();
    {
        let store = open(dir.path());
        for id in [1, 2] {
            runtime
                .block_on(
                    store
                        .create_customer(
                            &customer(id, &format!("{id}@shop.test")),
                            "shop",
                            None,
                            None,
                            Box::new(|| {}),
                        )
                        .unwrap()
                        .durable(),
                )
                .unwrap();
        }
        for n in 0..90u64 {
            let order = order(100 + n, 1 + n % 2);
            runtime
                .block_on(
                    store
                        .create_order(&order, "shop", None, None, Box::new(|| ()))
                        .unwrap()
                        .durable(),
                )
                .unwrap();
            expected.push(order.id.0);
        }
        store.close().unwrap();
    }
    let store = open(dir.path());
    let check = |store: &Store| {
        for customer in [1u64, 2] {
            let mine: Vec<u64> = expected
                .iter()
                .copied()
                .filter(|id| 1 + (id - 100) % 2 == customer)
                .collect();
            let loaded = store.load_customer(CustomerId(customer)).unwrap().unwrap();
            let ids: Vec<u64> = loaded.orders.iter().map(|order| order.id.0).collect();
            assert_eq!(ids, mine, "customer {customer}");
            for id in [mine[0], mine[31], mine[32], mine[44]] {
                let order = store.load_order(CustomerId(customer), OrderId(id));
                assert_eq!(order.unwrap().unwrap().id.0, id);
            }
            assert!(store
                .load_order(CustomerId(customer), OrderId(99_999))
                .unwrap()
                .is_none());
        }
        assert_eq!(store.verify().unwrap().orders, 90);
        let mut exported = Vec::new();
        store
            .for_each_order(&mut |record| {
                exported.push(record.id);
                true
            })
            .unwrap();
        exported.sort();
        assert_eq!(exported, expected);
        let mut ids = Vec::new();
        store.for_each_order_id(&mut |id| ids.push(id.0)).unwrap();
        assert_eq!(ids.len(), 90);
    };
    check(&store);
    // Packed: far fewer entries than orders.
    let mut entries = 0;
    store
        .inner
        .storage
        .for_each(&[order_chunks::ORDER], &mut |_, _| {
            entries += 1;
            true
        })
        .unwrap();
    assert!(entries <= 4, "{entries} order entries");
    // A replay after a crash in mid-checkpoint writes records a chunk holds already.
    for id in [100u64, 131, 189] {
        let record = orders::OrderRecord::from_order(&order(id, 1 + (id - 100) % 2));
        store
            .put_raw(
                &order_chunks::order_key(record.customer_id, id),
                codec::encode(&record),
            )
            .unwrap();
    }
    check(&store);
}

#[test]
fn a_replay_after_a_crash_in_mid_checkpoint_packs_no_order_twice() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    {
        let store = open(dir.path());
        let ann = customer(1, "ann@shop.test");
        let created = store
            .create_customer(&ann, "shop", None, None, Box::new(|| {}))
            .unwrap();
        runtime.block_on(created.durable()).unwrap();
        for id in 100..140u64 {
            let written = store
                .create_order(&order(id, 1), "shop", None, None, Box::new(|| ()))
                .unwrap();
            runtime.block_on(written.durable()).unwrap();
        }
        // The checkpoint's pass and flush, then the crash before it marks the log's start:
        // the log still holds every order that sled's chunks now hold.
        store.inner.storage.sync().unwrap();
        drop(store);
    }
    let store = open(dir.path());
    let loaded = store.load_customer(CustomerId(1)).unwrap().unwrap();
    let ids: Vec<u64> = loaded.orders.iter().map(|order| order.id.0).collect();
    assert_eq!(ids, (100..140).collect::<Vec<_>>());
    // Only the two chunks: the replayed records were packed, none left on its own.
    let mut entries = Vec::new();
    store
        .inner
        .storage
        .for_each(&[order_chunks::ORDER], &mut |key, _| {
            entries.push(order_chunks::order_or_chunk_ids(key).unwrap());
            true
        })
        .unwrap();
    assert_eq!(entries, vec![(1, 100, true), (1, 132, true)]);
}

/// An event record for the window tests (its content does not matter).
fn event_record(sequence: u64) -> events::EventRecord {
    events::EventRecord {
        event_type: "order.created".into(),
        created_at_ms: sequence as i64,
        body: events::EventBody::Json(format!("{{\"sequence\":{sequence}}}").into_bytes()),
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// `for_each_event` reads a bounded range window by window: whatever the range, the gaps
    /// and where the visitor stops, it visits exactly the webstore's events in the range, in
    /// order, as one read of it all would, and never another webstore's.
    #[test]
    fn events_read_window_by_window_are_the_range_in_order(
        present in proptest::collection::btree_set(1u64..700, 0..400),
        after in 0u64..700,
        span in 0u64..700,
        stop_after in 1usize..500,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let mut batch = WriteBatch::default();
        for &sequence in &present {
            add_event_record(&mut batch, "shop", sequence, &event_record(sequence));
            add_event_record(&mut batch, "shop-2", sequence, &event_record(sequence + 1));
        }
        store.apply(batch).unwrap();
        let through = after + span;
        let expected: Vec<u64> = present
            .iter()
            .copied()
            .filter(|&sequence| sequence > after && sequence <= through)
            .take(stop_after)
            .collect();
        let mut visited = Vec::new();
        store
            .for_each_event("shop", after, through, &mut |sequence, record| {
                assert_eq!(record, event_record(sequence), "shop's own event");
                visited.push(sequence);
                visited.len() < stop_after
            })
            .unwrap();
        proptest::prop_assert_eq!(visited, expected);
        let mut all = Vec::new();
        store
            .for_each_event("shop", after, u64::MAX, &mut |sequence, _| {
                all.push(sequence);
                true
            })
            .unwrap();
        let expected_all: Vec<u64> = present.range(after + 1..).copied().collect();
        proptest::prop_assert_eq!(all, expected_all);
    }
}

/// A log that keeps nothing, takes changes of at most `limit` bytes (as a replicated
/// changelog takes messages of at most its servers' `max_payload`), and records the largest
/// change it was handed.
struct LimitedLog {
    limit: usize,
    largest: Arc<std::sync::atomic::AtomicUsize>,
}

impl log::commit::Log for LimitedLog {
    fn append(&mut self, frame: &mut log::wal::Frame) -> std::io::Result<()> {
        for part in frame.parts(self.limit) {
            self.largest
                .fetch_max(part.len(), std::sync::atomic::Ordering::SeqCst);
        }
        Ok(())
    }

    fn sync(&mut self) -> std::io::Result<()> {
        Ok(())
    }

    fn seq(&self) -> u64 {
        0
    }

    fn entry_limit(&self) -> Option<log::EntryLimit> {
        let limit = self.limit;
        Some(Arc::new(move || limit))
    }
}

fn session_record(webstore: &str) -> SessionRecord {
    SessionRecord {
        webstore_id: webstore.into(),
        email: "pat@farm.example".into(),
        account: [7; 32],
        form_token: "token".into(),
        signed_in_ms: 1,
        last_used_ms: 1,
    }
}

/// An event made at Unix millisecond 1.
fn old_event() -> EventRecord {
    EventRecord {
        event_type: "customer.created".into(),
        created_at_ms: 1,
        body: events::EventBody::Json(b"{}".to_vec()),
    }
}

#[test]
fn the_retention_sweep_cuts_its_removals_to_fit_the_log_s_largest_change() {
    const LIMIT: usize = 4_096;
    const EVENTS: u64 = 300;
    let dir = tempfile::tempdir().unwrap();
    let largest = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let store = Store::over_log_for_test(
        dir.path(),
        LimitedLog {
            limit: LIMIT,
            largest: largest.clone(),
        },
    );
    // A long webstore id makes every removal long: 300 of them are about 24 KiB.
    let webstore = "a-webstore-whose-id-is-long-enough-to-make-its-event-keys-long";
    for first in (1..=EVENTS).step_by(20) {
        let mut batch = WriteBatch::default();
        for sequence in first..first + 20 {
            add_event_record(&mut batch, webstore, sequence, &event_record(sequence));
        }
        store.apply(batch).unwrap();
    }
    let mut steps = 0;
    loop {
        let removed = store.prune_events(webstore, i64::MAX, 1_024).unwrap();
        if removed == 0 {
            break;
        }
        steps += 1;
        assert!(steps < 100, "the sweep does not end");
    }
    assert!(
        largest.load(std::sync::atomic::Ordering::SeqCst) <= LIMIT,
        "a change of {} bytes was handed to a log that takes {LIMIT}",
        largest.load(std::sync::atomic::Ordering::SeqCst)
    );
    assert!(steps > 1, "cut into several changes");
    assert_eq!(store.events_pruned_through(webstore).unwrap(), EVENTS);
    let mut left = 0;
    store
        .for_each_event(webstore, 0, u64::MAX, &mut |_, _| {
            left += 1;
            true
        })
        .unwrap();
    assert_eq!(left, 0, "every event is removed");
}

#[test]
fn every_write_of_a_frozen_webstore_is_refused_and_other_webstores_write_on() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let mut batch = WriteBatch::default();
    for sequence in 1..=3 {
        add_event_record(&mut batch, "shop", sequence, &old_event());
        add_event_record(&mut batch, "other", sequence, &old_event());
    }
    store.apply(batch).unwrap();
    drop(
        store
            .put_session(&[1; 32], &session_record("shop"))
            .unwrap(),
    );
    store.frozen().freeze("shop");

    let refused = |outcome: Result<(), StoreError>, what: &str| {
        assert!(
            matches!(outcome, Err(StoreError::Frozen)),
            "{what}: {outcome:?}"
        );
    };
    let written = |outcome: Result<Written, StoreError>| outcome.map(drop);
    refused(
        written(store.create_customer(&customer(5, "a@b.c"), "shop", None, None, Box::new(|| {}))),
        "a new customer",
    );
    refused(
        written(store.put_session(&[2; 32], &session_record("shop"))),
        "a sign-in",
    );
    refused(
        written(store.remove_session("shop", &[1; 32])),
        "a sign-out",
    );
    refused(
        written(store.set_webhook_position("shop", "erp", &WebhookPosition::default())),
        "a webhook position",
    );
    refused(
        written(store.request_redelivery("shop", "erp", 1)),
        "a redelivery request",
    );
    refused(
        written(store.clear_redelivery("shop", "erp")),
        "a redelivery taken up",
    );
    refused(
        store.prune_events("shop", i64::MAX, 10).map(drop),
        "a prune of its events",
    );
    assert!(
        store.session(&[1; 32]).unwrap().is_some(),
        "still signed in"
    );
    assert_eq!(store.events_pruned_through("shop").unwrap(), 0);
    assert_eq!(store.webhook_position("shop", "erp").unwrap(), None);
    assert_eq!(store.redelivery("shop", "erp").unwrap(), None);

    // Another webstore writes on; the frozen one again once thawed.
    assert_eq!(store.prune_events("other", i64::MAX, 10).unwrap(), 3);
    drop(
        store
            .set_webhook_position("other", "erp", &WebhookPosition::default())
            .unwrap(),
    );
    store.frozen().thaw("shop");
    drop(store.remove_session("shop", &[1; 32]).unwrap());
    assert_eq!(store.prune_events("shop", i64::MAX, 10).unwrap(), 3);
}

#[test]
fn a_write_waiting_for_its_admission_while_a_freeze_begins_sees_the_freeze() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    drop(
        store
            .put_session(&[1; 32], &session_record("shop"))
            .unwrap(),
    );
    // A freeze's barrier holds every write out for a moment; a sign-out comes meanwhile.
    let held = store.hold_admissions();
    let signing_out = {
        let store = store.clone();
        std::thread::spawn(move || store.remove_session("shop", &[1; 32]).map(drop))
    };
    std::thread::sleep(std::time::Duration::from_millis(200));
    store.frozen().freeze("shop");
    drop(held);
    let outcome = signing_out.join().unwrap();
    assert!(
        matches!(outcome, Err(StoreError::Frozen)),
        "a write admitted after the freeze began must see it: {outcome:?}"
    );
    assert!(
        store.session(&[1; 32]).unwrap().is_some(),
        "still signed in"
    );
}
