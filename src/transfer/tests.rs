//! Export and import together, on real stores: a webstore's events, its events-pruned mark
//! and its webhook positions travel with it byte for byte and export again the same
//! (a redelivery asked and not yet taken up as the record it will make);
//! a move's rounds bring new events and remove what the source pruned; an export of
//! version 1 still imports; lines of another webstore, events out of order and a webstore
//! whose events are already here are refused with nothing written; a webstore's empty
//! frozen lists here give way to its import.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::export::{export, export_changed};
use super::import::{apply_live, import_live};
use super::{Progress, TransferError};
use crate::store::kinds::customers::CustomerRecord;
use crate::store::kinds::events::{EventBody, EventRecord};
use crate::store::kinds::webhook_positions::WebhookPosition;
use crate::store::tracking::Changed;
use crate::store::{
    add_customer_record, add_event_record, add_events_pruned, add_webhook_position, Store,
    WriteBatch,
};

fn customer(id: u64, webstore: &str, number: u64) -> CustomerRecord {
    CustomerRecord {
        id,
        webstore_id: webstore.into(),
        number,
        first_name: "Ann".into(),
        last_name: None,
        email: format!("ann{id}@example.com"),
        delivery_service_id: 91,
        address: vec![None; crate::domain::customer::ADDRESS_FIELDS.len()],
        password_hash: None,
        halts: Vec::new(),
    }
}

/// Event `sequence`, its JSON with escapes a JSON value would not keep as they are.
fn event(sequence: u64) -> EventRecord {
    EventRecord {
        event_type: "customer.created".into(),
        created_at_ms: 1_799_056_800_000 + sequence as i64,
        body: EventBody::Json(
            format!(
                r#"{{"id":"evt_{sequence:032x}","type":"customer.created","sequence":{sequence},"created_at":"2027-01-04T10:00:00.000Z","data":{{"note":"caf\u00e9 \/ 1.0"}}}}"#
            )
            .into_bytes(),
        ),
    }
}

fn position(through: u64) -> WebhookPosition {
    WebhookPosition {
        delivered_through: through,
        disabled: None,
        attempts: 1,
        failing_since_ms: 5,
        next_attempt_ms: 6,
    }
}

/// Webstore `webstore` with customer `id`, events `events`, a mark at `pruned` (if not 0)
/// and endpoint `erp` delivered through 2.
fn seed(
    store: &Store,
    webstore: &str,
    id: u64,
    events: std::ops::RangeInclusive<u64>,
    pruned: u64,
) {
    let mut batch = WriteBatch::default();
    add_customer_record(&mut batch, &customer(id, webstore, 1));
    for sequence in events {
        add_event_record(&mut batch, webstore, sequence, &event(sequence));
    }
    if pruned > 0 {
        add_events_pruned(&mut batch, webstore, pruned);
    }
    add_webhook_position(&mut batch, webstore, "erp", &position(2));
    store.apply(batch).unwrap();
}

fn events_of(store: &Store, webstore: &str) -> Vec<(u64, EventRecord)> {
    let mut events = Vec::new();
    store
        .for_each_event(webstore, 0, u64::MAX, &mut |sequence, record| {
            events.push((sequence, record));
            true
        })
        .unwrap();
    events
}

fn exported(store: &Store, webstore: Option<&str>, file: &Path) {
    let mut out = Vec::new();
    export(store, webstore, &mut out, &mut Progress::logged()).unwrap();
    std::fs::write(file, out).unwrap();
}

fn imported(store: &Store, file: &Path) -> Result<super::import::Imported, TransferError> {
    import_live(store, file, &mut Progress::logged(), &|_| Ok(()))
}

struct Stores {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Stores {
    fn new() -> Stores {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_owned();
        Stores { _dir: dir, root }
    }

    fn open(&self, name: &str) -> Store {
        Store::open_for_test(&self.root.join(name))
    }

    fn file(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }
}

#[test]
fn events_marks_and_webhook_positions_travel_byte_for_byte_and_export_again_the_same() {
    let stores = Stores::new();
    let source = stores.open("source");
    seed(&source, "shop", 1, 4..=9, 3);
    seed(&source, "other", 2, 1..=2, 0);
    let (first, second) = (stores.file("first.jsonl"), stores.file("second.jsonl"));
    exported(&source, None, &first);
    let text = std::fs::read_to_string(&first).unwrap();
    assert!(text.starts_with(r#"{"type":"header","format":"boxsub-export","version":7,"#));
    assert_eq!(text.matches(r#""type":"event""#).count(), 8, "{text}");
    assert_eq!(text.matches(r#""type":"delivery""#).count(), 2, "{text}");

    let target = stores.open("target");
    let counts = imported(&target, &first).unwrap();
    assert_eq!((counts.events, counts.webhook_positions), (8, 2));
    assert_eq!(counts.webstores, ["other", "shop"]);
    assert_eq!(events_of(&target, "shop"), events_of(&source, "shop"));
    assert_eq!(events_of(&target, "other"), events_of(&source, "other"));
    assert_eq!(target.events_pruned_through("shop").unwrap(), 3);
    assert_eq!(target.last_event_sequence("shop").unwrap(), 9);
    assert_eq!(
        target.webhook_position("shop", "erp").unwrap(),
        Some(position(2))
    );
    exported(&target, None, &second);
    assert_eq!(
        std::fs::read(&first).unwrap(),
        std::fs::read(&second).unwrap()
    );

    // One webstore alone: its lines only.
    let shop = stores.file("shop.jsonl");
    exported(&source, Some("shop"), &shop);
    let text = std::fs::read_to_string(&shop).unwrap();
    assert!(!text.contains(r#""webstore_id":"other""#), "{text}");
    assert_eq!(text.matches(r#""type":"event""#).count(), 6);
    let alone = stores.open("alone");
    imported(&alone, &shop).unwrap();
    assert_eq!(events_of(&alone, "shop"), events_of(&source, "shop"));
    assert!(events_of(&alone, "other").is_empty());
}

#[test]
fn a_redelivery_not_yet_taken_up_travels_as_the_record_it_will_make() {
    let stores = Stores::new();
    let source = stores.open("source");
    seed(&source, "shop", 1, 1..=9, 0);
    seed(&source, "other", 2, 1..=2, 0);
    // A move's first copy, made before the operator asks.
    let copy_before = stores.file("before.jsonl");
    exported(&source, Some("shop"), &copy_before);
    // Endpoint `erp` (delivered through 2, failing) is asked to go again from 7; `crm`,
    // which never had a webhook position, from 4; `other`'s endpoint from 1; and an endpoint
    // of `new`, a webstore with nothing else yet, from 0.
    let asks = [
        ("shop", "erp", 7),
        ("shop", "crm", 4),
        ("other", "erp", 1),
        ("new", "erp", 0),
    ];
    for (webstore, endpoint, after) in asks {
        drop(
            source
                .request_redelivery(webstore, endpoint, after)
                .unwrap(),
        );
    }
    let asked = |after| WebhookPosition {
        delivered_through: after,
        ..WebhookPosition::default()
    };

    // In a whole export and in a move's round alike.
    let whole = stores.file("whole.jsonl");
    exported(&source, None, &whole);
    let target = stores.open("target");
    imported(&target, &whole).unwrap();
    assert_eq!(
        target.webhook_position("shop", "erp").unwrap(),
        Some(asked(7))
    );
    assert_eq!(
        target.webhook_position("shop", "crm").unwrap(),
        Some(asked(4))
    );
    assert_eq!(
        target.webhook_position("other", "erp").unwrap(),
        Some(asked(1))
    );
    assert_eq!(
        target.webhook_position("new", "erp").unwrap(),
        Some(asked(0))
    );

    let mut round = Vec::new();
    let shipped = export_changed(&source, "shop", &Changed::default(), &mut round).unwrap();
    assert_eq!(shipped.webhook_positions, 2);
    let round_file = stores.file("round.jsonl");
    std::fs::write(&round_file, round).unwrap();
    let moved = stores.open("moved");
    imported(&moved, &copy_before).unwrap();
    apply_live(&moved, "shop", &round_file, &|_| Ok(())).unwrap();
    assert_eq!(
        moved.webhook_position("shop", "erp").unwrap(),
        Some(asked(7))
    );
    assert_eq!(
        moved.webhook_position("shop", "crm").unwrap(),
        Some(asked(4))
    );

    // Once taken up (the request cleared, the record written), the record travels as it is.
    drop(source.clear_redelivery("shop", "erp").unwrap());
    let mut batch = WriteBatch::default();
    add_webhook_position(&mut batch, "shop", "erp", &position(8));
    source.apply(batch).unwrap();
    let later = stores.file("later.jsonl");
    exported(&source, Some("shop"), &later);
    let again = stores.open("again");
    imported(&again, &later).unwrap();
    assert_eq!(
        again.webhook_position("shop", "erp").unwrap(),
        Some(position(8))
    );
    assert_eq!(
        again.webhook_position("shop", "crm").unwrap(),
        Some(asked(4))
    );
}

#[test]
fn rounds_bring_new_events_and_the_latest_mark_and_webhook_positions() {
    let stores = Stores::new();
    let source = stores.open("source");
    seed(&source, "shop", 1, 1..=5, 0);
    let copy = stores.file("copy.jsonl");
    exported(&source, Some("shop"), &copy);
    let target = stores.open("target");
    imported(&target, &copy).unwrap();

    // Meanwhile on the source: events 6 and 7 written, the sweep removes 1 to 3 and the
    // endpoint delivers further. Event 2 is named again (a round may repeat one) though
    // pruned: it is left out, the mark covers it.
    let mut batch = WriteBatch::default();
    for sequence in [6, 7] {
        add_event_record(&mut batch, "shop", sequence, &event(sequence));
    }
    add_webhook_position(&mut batch, "shop", "erp", &position(6));
    source.apply(batch).unwrap();
    assert_eq!(source.prune_events("shop", i64::MAX, 3).unwrap(), 3);
    let changed = Changed {
        events: BTreeSet::from([2, 6, 7]),
        ..Changed::default()
    };
    let mut round = Vec::new();
    let shipped = export_changed(&source, "shop", &changed, &mut round).unwrap();
    assert_eq!((shipped.events, shipped.webhook_positions), (2, 1));
    let round_file = stores.file("round.jsonl");
    std::fs::write(&round_file, round).unwrap();

    let (applied, _) = apply_live(&target, "shop", &round_file, &|_| Ok(())).unwrap();
    assert_eq!((applied.events, applied.webhook_positions), (2, 1));
    assert_eq!(events_of(&target, "shop"), events_of(&source, "shop"));
    assert_eq!(
        events_of(&target, "shop")
            .first()
            .map(|(sequence, _)| *sequence),
        Some(4),
        "the events the source pruned are gone here too"
    );
    assert_eq!(target.events_pruned_through("shop").unwrap(), 3);
    assert_eq!(target.last_event_sequence("shop").unwrap(), 7);
    assert_eq!(
        target.webhook_position("shop", "erp").unwrap(),
        Some(position(6))
    );

    // A round of another webstore's lines is refused, naming the line.
    let stray = stores.file("stray.jsonl");
    std::fs::write(
        &stray,
        format!(
            "{}\n{}\n",
            r#"{"type":"header","format":"boxsub-export","version":2,"webstore":"shop"}"#,
            r#"{"type":"events_pruned","webstore_id":"other","through":1}"#
        ),
    )
    .unwrap();
    match apply_live(&target, "shop", &stray, &|_| Ok(())) {
        Err(TransferError::Line { number: 2, problem }) => {
            assert!(problem.contains("not webstore shop's"), "{problem}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_export_of_version_1_still_imports() {
    let stores = Stores::new();
    let file = stores.file("v1.jsonl");
    std::fs::write(
        &file,
        concat!(
            r#"{"type":"header","format":"boxsub-export","version":1,"webstore":"shop"}"#,
            "\n",
            r#"{"type":"customer","id":3,"webstore_id":"shop","number":1,"first_name":"Joe","last_name":null,"email":"joe@example.com","delivery_service_id":91,"address":{"address_1":"1 Road","address_2":null,"suburb":null,"city":"York","postcode":null,"delivery_note":null,"home_phone":null,"mobile_phone":null,"work_phone":null},"password_hash":null}"#,
            "\n",
            r#"{"type":"order","id":9,"customer_id":3,"box_id":217,"frequency":"weekly","start_date":"2027-01-04","week_days":[1],"extras_one_off":false,"extras":[],"exclusions":[],"substitutions":[],"created_at":1795428000}"#,
            "\n",
        ),
    )
    .unwrap();
    let store = stores.open("store");
    let counts = imported(&store, &file).unwrap();
    assert_eq!((counts.customers, counts.orders, counts.events), (1, 1, 0));
    assert!(store
        .has_customer(crate::domain::ids::CustomerId(3))
        .unwrap());
    assert_eq!(store.last_event_sequence("shop").unwrap(), 0);

    // Version 1 has no events: an event line in one is refused, naming it.
    let with_event = stores.file("v1-event.jsonl");
    std::fs::write(
        &with_event,
        concat!(
            r#"{"type":"header","format":"boxsub-export","version":1,"webstore":null}"#,
            "\n",
            r#"{"type":"events_pruned","webstore_id":"new","through":0}"#,
            "\n",
        ),
    )
    .unwrap();
    match imported(&stores.open("empty"), &with_event) {
        Err(TransferError::Line { number: 2, problem }) => {
            assert!(problem.contains("version 1"), "{problem}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn stray_disordered_or_colliding_events_are_refused_and_nothing_is_written() {
    let stores = Stores::new();
    let line = |sequence: u64, webstore: &str| {
        let record = event(sequence);
        format!(
            r#"{{"type":"event","webstore_id":"{webstore}","sequence":{sequence},"event_type":"customer.created","created_at_ms":0,"json":{}}}"#,
            serde_json::to_string(
                &String::from_utf8(crate::events::json::render_event(sequence, &record).unwrap())
                    .unwrap()
            )
            .unwrap()
        )
    };
    let header = r#"{"type":"header","format":"boxsub-export","version":2,"webstore":"shop"}"#;
    for (case, (lines, number, says)) in [
        (
            vec![line(1, "shop"), line(2, "other")],
            3,
            "webstore other's",
        ),
        (
            vec![line(2, "shop"), line(2, "shop")],
            3,
            "out of sequence order",
        ),
        (
            vec![line(3, "shop"), line(1, "shop")],
            3,
            "out of sequence order",
        ),
        (vec![line(1, "shop"), "{\"type\":\"event\"}".into()], 3, ""),
    ]
    .into_iter()
    .enumerate()
    {
        let file = stores.file("bad.jsonl");
        std::fs::write(&file, format!("{header}\n{}\n", lines.join("\n"))).unwrap();
        let store = stores.open(&format!("bad-{case}"));
        match imported(&store, &file) {
            Err(TransferError::Line { number: n, problem }) => {
                assert_eq!(n, number, "{problem}");
                assert!(problem.contains(says), "{problem}");
            }
            other => panic!("{lines:?}: {other:?}"),
        }
        assert!(events_of(&store, "shop").is_empty(), "{lines:?}: written");
    }

    // A store that holds events of the webstore refuses it whole.
    let file = stores.file("good.jsonl");
    std::fs::write(&file, format!("{header}\n{}\n", line(1, "shop"))).unwrap();
    let store = stores.open("has-events");
    let mut batch = WriteBatch::default();
    add_event_record(&mut batch, "shop", 40, &event(40));
    store.apply(batch).unwrap();
    match imported(&store, &file) {
        Err(TransferError::Refused(message)) => {
            assert!(message.contains("already has events"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(events_of(&store, "shop").len(), 1);
}

/// A log that keeps the writes of every frame it is handed, in order.
struct RecordingLog(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl crate::store::log::commit::Log for RecordingLog {
    fn append(&mut self, frame: &mut crate::store::log::wal::Frame) -> std::io::Result<()> {
        let mut logged = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        logged.extend_from_slice(frame.payload());
        Ok(())
    }

    fn sync(&mut self) -> std::io::Result<()> {
        Ok(())
    }

    fn seq(&self) -> u64 {
        0
    }
}

/// `key` as text where it is printable, its other bytes as `\xNN`; an idempotency key's
/// version (the clock's nanoseconds when it was written) as `<version>`.
fn shown_key(key: &[u8]) -> String {
    let (key, version) = match crate::store::kinds::idempotency::idempotency_parts(key) {
        Some(_) => (&key[..key.len() - 8], "<version>"),
        None => (key, ""),
    };
    let mut shown: String = key
        .iter()
        .map(|&byte| match byte {
            b' '..=b'~' if byte != b'\\' => (byte as char).to_string(),
            _ => format!("\\x{byte:02x}"),
        })
        .collect();
    shown.push_str(version);
    shown
}

/// Every change of every kind of record, made once through the store's own write paths:
/// what the log was handed, what the snapshot holds after a clean close and what an export
/// writes are pinned byte for byte in `tests/fixtures/one-of-each-kind.txt`, so that
/// reorganising the code that writes them cannot change them unseen. Refresh the file (after a
/// deliberate format change only) with `BOXSUB_PIN_BYTES=write`.
#[test]
fn one_record_of_each_kind_keeps_its_logged_stored_and_exported_bytes() {
    use crate::domain::catalogue::WebstoreIdx;
    use crate::domain::customer::{Address, Customer};
    use crate::domain::day::Day;
    use crate::domain::day::WeekDays;
    use crate::domain::email::Email;
    use crate::domain::ids::CustomerId;
    use crate::domain::order::content::OrderContent;
    use crate::domain::order::history::{
        ContentVersion, Lifecycle, LifecycleVersion, OrderHistory, Pause,
    };
    use crate::domain::ownership::Ownership;
    use crate::store::kinds::customers::HaltRecord;
    use crate::store::kinds::idempotency::IdempotencyRecord;
    use crate::store::kinds::orders::OrderRecord;
    use crate::store::kinds::sessions::SessionRecord;
    use crate::store::log::wal::{parse_writes, LoggedWrite};
    use crate::store::{
        add_idempotency_record, add_new_customer, add_order, add_order_record, add_session_record,
        event_write, IdempotencyWrite, OnDurable, Snapshot,
    };

    let dir = tempfile::tempdir().unwrap();
    let logged = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let store = Store::over_log_for_test(dir.path(), RecordingLog(logged.clone()));
    let nothing = || -> OnDurable { Box::new(|| {}) };
    let event_id = [0xab; 16];

    drop(store.reserve_order_ids(0, 100).unwrap());
    let mut address = Address::default();
    address.0[0] = Some("1 Farm Road".into());
    address.0[3] = Some("York".into());
    let ann = Customer {
        id: CustomerId(1),
        webstore: WebstoreIdx(0),
        number: 1,
        first_name: "Ann".into(),
        last_name: Some("Lee".into()),
        email: Email::from_trusted("Ann@Example.com".into()),
        delivery_service_id: 91,
        address,
        password_hash: Some("$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA".into()),
        halts: crate::domain::halts::Halts::none(),
        account: crate::domain::account::Account::opened(CustomerId(1), 0),
    };
    let idempotency = |key: &str, location: &str| IdempotencyWrite {
        webstore_id: "shop".into(),
        key: key.into(),
        record: IdempotencyRecord {
            body_sha256: vec![7; 32],
            status: 201,
            location: Some(location.into()),
            body: br#"{"id":1}"#.to_vec(),
            created_at: 1_799_056_800,
        },
    };
    let customer_event = |sequence: u64, event_type: &str, customer: &Customer| {
        event_write(
            "shop",
            sequence,
            &EventRecord {
                event_type: event_type.into(),
                created_at_ms: 1_799_056_800_000 + sequence as i64,
                body: EventBody::Customer {
                    id: event_id,
                    customer: CustomerRecord {
                        password_hash: None,
                        ..CustomerRecord::from_customer(customer, "shop")
                    },
                    webstore_name: "The Shop".into(),
                    account: None,
                },
            },
        )
        .unwrap()
    };
    drop(
        store
            .create_customer(
                &ann,
                "shop",
                Some(idempotency("k-customer", "/v1/customers/1")),
                Some(customer_event(1, "customer.created", &ann)),
                nothing(),
            )
            .unwrap(),
    );
    let moved = Customer {
        email: Email::from_trusted("ann.lee@example.com".into()),
        ..ann.clone()
    };
    drop(
        store
            .update_customer(
                &moved,
                &ann,
                "shop",
                Some(customer_event(2, "customer.updated", &moved)),
                None,
                nothing(),
            )
            .unwrap(),
    );
    let order = OrderContent::weekly_for_test(217)
        .with_extras(&[(28, 2)])
        .with_exclusions(&[240])
        .with_substitutions(&[241])
        .with_schedule(Day(20_826), WeekDays::only(1).with(4))
        .placed(7, 1, 1_799_056_800);
    drop(
        store
            .create_order(
                &order,
                "shop",
                Some(idempotency("k-order", "/v1/orders/7")),
                Some(
                    event_write(
                        "shop",
                        3,
                        &EventRecord {
                            event_type: "order.created".into(),
                            created_at_ms: 1_799_056_800_003,
                            body: EventBody::Order {
                                id: event_id,
                                order: OrderRecord::from_order(&order),
                            },
                        },
                    )
                    .unwrap(),
                ),
                nothing(),
            )
            .unwrap(),
    );
    drop(
        store
            .set_webhook_position("shop", "erp", &position(3))
            .unwrap(),
    );
    drop(store.request_redelivery("shop", "crm", 2).unwrap());
    drop(store.request_redelivery("shop", "old", 1).unwrap());
    drop(store.clear_redelivery("shop", "old").unwrap());
    let session = |email: &str| SessionRecord {
        webstore_id: "shop".into(),
        email: email.into(),
        account: [9; 32],
        form_token: "f".repeat(8),
        signed_in_ms: 1_799_056_800_000,
        last_used_ms: 1_799_056_900_000,
    };
    drop(
        store
            .put_session(&[5; 32], &session("pat@shop.example"))
            .unwrap(),
    );
    drop(
        store
            .put_session(&[6; 32], &session("sam@shop.example"))
            .unwrap(),
    );
    drop(store.remove_session("shop", &[6; 32]).unwrap());
    drop(store.set_ownership("moved", Ownership::Taken).unwrap());
    drop(store.set_ownership("gone", Ownership::Released).unwrap());
    drop(store.clear_ownership("gone").unwrap());

    // What seeding and imports write, in batches, for another webstore.
    let mut batch = WriteBatch::default();
    let bob = Customer {
        id: CustomerId(2),
        number: 1,
        email: Email::from_trusted("bob@example.com".into()),
        ..moved.clone()
    };
    add_new_customer(&mut batch, &bob, "farm");
    add_order(
        &mut batch,
        &order.content().clone().placed(8, 2, 1_799_056_801),
    );
    // A halted customer, and an order that changed: a pause, a skip, a later box.
    add_customer_record(
        &mut batch,
        &CustomerRecord {
            halts: vec![HaltRecord {
                from_day: 20_830,
                until_day: None,
            }],
            ..customer(3, "farm", 2)
        },
    );
    add_order_record(
        &mut batch,
        &OrderRecord::from_order(&order.content().clone().placed(9, 3, 1_799_056_802)),
    );
    let first = order.content().clone();
    let history = OrderHistory::from_parts(
        vec![
            ContentVersion {
                effective: Day(20_826),
                content: first.clone(),
                extras_since: Day(20_826),
            },
            ContentVersion {
                effective: Day(20_840),
                content: OrderContent {
                    box_id: 218,
                    ..first.clone()
                },
                extras_since: Day(20_826),
            },
        ],
        vec![LifecycleVersion {
            effective: Day(20_830),
            lifecycle: Lifecycle {
                cancel_date: None,
                pause: Some(Pause {
                    from: Day(20_833),
                    until: Some(Day(20_847)),
                }),
                skipped_dates: vec![Day(20_854)],
            },
        }],
        Day(20_830),
        1_799_056_900,
    )
    .unwrap();
    add_order_record(
        &mut batch,
        &OrderRecord::from_order(&first.placed(10, 3, 1_799_056_803).changed(history)),
    );
    add_idempotency_record(
        &mut batch,
        "farm",
        "k-farm",
        &idempotency("k-farm", "/v1/customers/3").record,
    );
    for sequence in 1..=3 {
        add_event_record(&mut batch, "farm", sequence, &event(sequence));
    }
    add_events_pruned(&mut batch, "farm", 1);
    add_webhook_position(&mut batch, "farm", "erp", &position(2));
    add_session_record(
        &mut batch,
        &[8; 32],
        &SessionRecord {
            webstore_id: "farm".into(),
            ..session("kim@farm.example")
        },
    );
    store.apply(batch).unwrap();
    assert_eq!(
        store.prune_events("farm", 1_799_056_800_003, 10).unwrap(),
        1
    );

    let mut pinned = String::from("# exported\n");
    let mut exported = Vec::new();
    export(&store, None, &mut exported, &mut Progress::logged()).unwrap();
    pinned.push_str(&String::from_utf8(exported).unwrap());
    store.close().unwrap();
    drop(store);

    pinned.push_str("# logged\n");
    let logged = logged.lock().unwrap().clone();
    for write in parse_writes(&logged).expect("the log's writes parse") {
        let line = match write {
            LoggedWrite::Set { key, value } => {
                format!("set {} {}\n", shown_key(key), hex::encode(value))
            }
            LoggedWrite::RemoveIf { key, expected } => {
                format!("remove_if {} {}\n", shown_key(key), hex::encode(expected))
            }
            LoggedWrite::Remove { key } => format!("remove {}\n", shown_key(key)),
        };
        pinned.push_str(&line);
    }
    pinned.push_str("# stored\n");
    let snapshot = crate::store::SledSnapshot::open(dir.path(), 1 << 20).unwrap();
    snapshot
        .for_each_between(&[], None, &mut |key, value| {
            pinned.push_str(&format!("{} {}\n", shown_key(key), hex::encode(value)));
            true
        })
        .unwrap();

    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/one-of-each-kind.txt");
    if std::env::var("BOXSUB_PIN_BYTES").as_deref() == Ok("write") {
        std::fs::write(&path, &pinned).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    for (number, (found, wanted)) in pinned.lines().zip(expected.lines()).enumerate() {
        assert_eq!(found, wanted, "line {} of {}", number + 1, path.display());
    }
    assert_eq!(
        pinned.lines().count(),
        expected.lines().count(),
        "{}",
        path.display()
    );
}

/// The records of `tests/fixtures/one-of-each-kind-v3.txt`, written by the release before
/// orders nested their content (order records and events of format version 3, an export of
/// version 3), still read: each logged and stored order or event value decodes to the record
/// the current fixture's value at the same key decodes to, and the old export imports to a
/// store that exports the current fixture's export, byte for byte.
#[test]
fn the_previous_format_s_records_and_export_still_read_as_today_s() {
    use crate::store::codec::{decode, Kind};
    use crate::store::kinds::orders::OrderRecord;
    use crate::store::pending::event_chunks::event_parts;
    use crate::store::pending::order_chunks::order_parts;

    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let read = |name: &str| std::fs::read_to_string(fixtures.join(name)).unwrap();
    let (old, new) = (
        read("one-of-each-kind-v3.txt"),
        read("one-of-each-kind.txt"),
    );
    let section = |text: &str, name: &str| -> Vec<String> {
        text.lines()
            .skip_while(|line| *line != format!("# {name}"))
            .skip(1)
            .take_while(|line| !line.starts_with("# "))
            .map(str::to_owned)
            .collect()
    };
    // The records a value holds (a lone one, or a chunk's), decoded, as text to compare.
    let records = |value: &str| -> Vec<String> {
        let bytes = hex::decode(value).unwrap();
        let order = |bytes: &[u8]| format!("{:?}", decode::<OrderRecord>(bytes).unwrap());
        let event = |bytes: &[u8]| format!("{:?}", decode::<EventRecord>(bytes).unwrap());
        match bytes.get(3).copied() {
            Some(kind) if kind == Kind::Order as u8 => vec![order(&bytes)],
            Some(kind) if kind == Kind::Event as u8 => vec![event(&bytes)],
            Some(kind) if kind == Kind::OrderChunk as u8 => order_parts(0, &bytes)
                .unwrap()
                .into_iter()
                .map(|(_, part)| order(part))
                .collect(),
            Some(kind) if kind == Kind::EventChunk as u8 => event_parts(0, &bytes)
                .unwrap()
                .into_iter()
                .map(|(_, part)| event(part))
                .collect(),
            _ => Vec::new(),
        }
    };
    let mut compared = 0;
    for name in ["logged", "stored"] {
        let values = |text: &str| -> Vec<(String, String)> {
            section(text, name)
                .iter()
                .filter_map(|line| {
                    let line = match name {
                        "logged" => line.strip_prefix("set ")?,
                        _ => line,
                    };
                    let (key, value) = line.rsplit_once(' ')?;
                    Some((key.to_owned(), value.to_owned()))
                })
                .collect()
        };
        let (old_values, new_values) = (values(&old), values(&new));
        assert_eq!(old_values.len(), new_values.len(), "{name}");
        for ((old_key, old_value), (new_key, new_value)) in old_values.iter().zip(&new_values) {
            assert_eq!(old_key, new_key, "{name}");
            let (was, is) = (records(old_value), records(new_value));
            assert_eq!(was, is, "{name} {old_key}");
            compared += was.len();
        }
    }
    assert!(compared >= 10, "orders and events compared: {compared}");

    let stores = Stores::new();
    let old_export = stores.file("v3.jsonl");
    std::fs::write(&old_export, section(&old, "exported").join("\n") + "\n").unwrap();
    let store = stores.open("store");
    imported(&store, &old_export).unwrap();
    let again = stores.file("again.jsonl");
    exported(&store, None, &again);
    let exported_now = std::fs::read_to_string(&again).unwrap();
    assert_eq!(
        exported_now.lines().collect::<Vec<_>>(),
        section(&new, "exported"),
        "the old export imports to today's records"
    );
}

/// A node that served a webstore without customers past a cut-off holds its empty frozen
/// lists: the webstore's import is taken all the same, and its own lists and mark replace
/// them (none of the empty ones is left).
#[test]
fn a_webstore_s_empty_frozen_lists_here_give_way_to_its_import() {
    use crate::domain::day::Day;
    use crate::store::kinds::deliveries::{
        add_freeze_mark, add_frozen_day, FreezeMark, FrozenDayRecord,
    };

    // Arrange
    let stores = Stores::new();
    let source = stores.open("source");
    seed(&source, "shop", 1, 1..=2, 0);
    let mut batch = WriteBatch::default();
    let empty = FrozenDayRecord {
        paused: 0,
        skipped: 0,
        cancelled: 0,
        halted: 0,
    };
    add_frozen_day(
        &mut batch,
        "shop",
        Day(20_010),
        &FrozenDayRecord {
            paused: 1,
            ..empty.clone()
        },
    );
    add_freeze_mark(
        &mut batch,
        "shop",
        FreezeMark {
            since: Day(20_010),
            through: Day(20_010),
        },
        None,
    );
    source.apply(batch).unwrap();
    let file = stores.file("shop.jsonl");
    exported(&source, Some("shop"), &file);
    let target = stores.open("target");
    let mut batch = WriteBatch::default();
    for day in 20_005..=20_012 {
        add_frozen_day(&mut batch, "shop", Day(day), &empty);
    }
    add_freeze_mark(
        &mut batch,
        "shop",
        FreezeMark {
            since: Day(20_005),
            through: Day(20_012),
        },
        None,
    );
    target.apply(batch).unwrap();

    // Act
    let outcome = imported(&target, &file);

    // Assert
    assert!(outcome.is_ok(), "{outcome:?}");
    assert_eq!(
        target.freeze_mark("shop").unwrap(),
        Some(FreezeMark {
            since: Day(20_010),
            through: Day(20_010)
        })
    );
    for day in 20_005..=20_012 {
        let expected = (day == 20_010).then(|| FrozenDayRecord {
            paused: 1,
            ..empty.clone()
        });
        assert_eq!(
            target.frozen_day("shop", Day(day)).unwrap(),
            expected,
            "day {day}"
        );
    }
}

/// A customer's account, ledger and payments travel with the customer: exported after the
/// orders, imported as they were, exported again the same; a move's round carries them too.
#[test]
fn accounts_ledgers_and_payments_travel_with_their_customer_and_export_again_the_same() {
    use crate::domain::account::payment::{Payment, PaymentMethod};
    use crate::domain::account::transaction::{Posting, TransactionKind, TransactionOf};
    use crate::domain::account::Account;
    use crate::domain::day::Day;
    use crate::domain::ids::CustomerId;
    use crate::domain::money::Amount;
    use crate::store::kinds::accounts::AccountWrite;

    // Arrange
    let stores = Stores::new();
    let source = stores.open("source");
    seed(&source, "shop", 1, 1..=1, 0);
    let (account, transaction) = Account::opened(CustomerId(1), 10)
        .post(
            Posting {
                amount: Amount(1_999),
                kind: TransactionKind::Payment,
                description: "Cash at the door".into(),
                date: Day(20_400),
                of: TransactionOf::Payment { payment_id: 5 },
            },
            6,
            11,
            None,
        )
        .unwrap();
    let payment = Payment {
        id: 5,
        customer_id: CustomerId(1),
        amount: Amount(1_999),
        method: PaymentMethod::Cash,
        description: Some("door".into()),
        reference: None,
        date: Day(20_400),
        transaction_id: 6,
        reversal_id: None,
        created_at: 11,
    };
    let write = AccountWrite {
        account: &account,
        transactions: std::slice::from_ref(&transaction),
        payment: Some(&payment),
        delivery: None,
        customer: None,
    };
    drop(
        source
            .write_account("shop", write, None, None, Box::new(|| ()))
            .unwrap(),
    );
    let file = stores.file("shop.jsonl");
    exported(&source, Some("shop"), &file);

    // Act
    let target = stores.open("target");
    let outcome = imported(&target, &file);

    // Assert
    let imported = outcome.unwrap();
    assert_eq!(
        imported.account_records, 3,
        "the account, its transaction, its payment"
    );
    assert_eq!(
        target.account_record(CustomerId(1)).unwrap(),
        source.account_record(CustomerId(1)).unwrap()
    );
    assert_eq!(
        target.transaction_records(CustomerId(1), 0, 1, 10).unwrap(),
        source.transaction_records(CustomerId(1), 0, 1, 10).unwrap()
    );
    assert_eq!(
        target.payment_records(CustomerId(1)).unwrap(),
        source.payment_records(CustomerId(1)).unwrap()
    );
    let again = stores.file("again.jsonl");
    exported(&target, Some("shop"), &again);
    assert_eq!(
        std::fs::read(&file).unwrap(),
        std::fs::read(&again).unwrap()
    );
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains(r#""type":"payment""#) && text.contains(r#""method":"cash""#),
        "{text}"
    );

    // A move's round: the changed customer is shipped with its account.
    let changed = Changed {
        customers: BTreeSet::from([1]),
        ..Changed::default()
    };
    let mut out = Vec::new();
    export_changed(&source, "shop", &changed, &mut out).unwrap();
    let round = stores.file("round.jsonl");
    std::fs::write(&round, out).unwrap();
    let moved = stores.open("moved");
    let (applied, _) = apply_live(&moved, "shop", &round, &|_| Ok(())).unwrap();
    assert_eq!(applied.account_records, 3);
    assert_eq!(
        moved.account_record(CustomerId(1)).unwrap(),
        source.account_record(CustomerId(1)).unwrap()
    );
}
