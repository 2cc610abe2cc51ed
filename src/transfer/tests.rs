//! Export and import together, on real stores: a webstore's events, its events-pruned mark
//! and its webhook delivery records travel with it byte for byte and export again the same
//! (a redelivery asked and not yet taken up as the record it will make);
//! a move's rounds bring new events and remove what the source pruned; an export of
//! version 1 still imports; lines of another webstore, events out of order and a webstore
//! whose events are already here are refused with nothing written.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::export::{export, export_changed};
use super::import::{apply_live, import_live};
use super::{Progress, TransferError};
use crate::store::codec::{CustomerRecord, DeliveryRecord, EventBody, EventRecord};
use crate::store::tracking::Changed;
use crate::store::{
    add_customer_record, add_delivery_record, add_event_record, add_events_pruned, Store,
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

fn delivery(through: u64) -> DeliveryRecord {
    DeliveryRecord {
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
    add_delivery_record(&mut batch, webstore, "erp", &delivery(2));
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
fn events_marks_and_deliveries_travel_byte_for_byte_and_export_again_the_same() {
    let stores = Stores::new();
    let source = stores.open("source");
    seed(&source, "shop", 1, 4..=9, 3);
    seed(&source, "other", 2, 1..=2, 0);
    let (first, second) = (stores.file("first.jsonl"), stores.file("second.jsonl"));
    exported(&source, None, &first);
    let text = std::fs::read_to_string(&first).unwrap();
    assert!(text.starts_with(r#"{"type":"header","format":"boxsub-export","version":2,"#));
    assert_eq!(text.matches(r#""type":"event""#).count(), 8, "{text}");
    assert_eq!(text.matches(r#""type":"delivery""#).count(), 2, "{text}");

    let target = stores.open("target");
    let counts = imported(&target, &first).unwrap();
    assert_eq!((counts.events, counts.deliveries), (8, 2));
    assert_eq!(counts.webstores, ["other", "shop"]);
    assert_eq!(events_of(&target, "shop"), events_of(&source, "shop"));
    assert_eq!(events_of(&target, "other"), events_of(&source, "other"));
    assert_eq!(target.events_pruned_through("shop").unwrap(), 3);
    assert_eq!(target.last_event_sequence("shop").unwrap(), 9);
    assert_eq!(target.delivery("shop", "erp").unwrap(), Some(delivery(2)));
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
    // which never had a delivery record, from 4; `other`'s endpoint from 1; and an endpoint
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
    let asked = |after| DeliveryRecord {
        delivered_through: after,
        ..DeliveryRecord::default()
    };

    // In a whole export and in a move's round alike.
    let whole = stores.file("whole.jsonl");
    exported(&source, None, &whole);
    let target = stores.open("target");
    imported(&target, &whole).unwrap();
    assert_eq!(target.delivery("shop", "erp").unwrap(), Some(asked(7)));
    assert_eq!(target.delivery("shop", "crm").unwrap(), Some(asked(4)));
    assert_eq!(target.delivery("other", "erp").unwrap(), Some(asked(1)));
    assert_eq!(target.delivery("new", "erp").unwrap(), Some(asked(0)));

    let mut round = Vec::new();
    let shipped = export_changed(&source, "shop", &Changed::default(), &mut round).unwrap();
    assert_eq!(shipped.deliveries, 2);
    let round_file = stores.file("round.jsonl");
    std::fs::write(&round_file, round).unwrap();
    let moved = stores.open("moved");
    imported(&moved, &copy_before).unwrap();
    apply_live(&moved, "shop", &round_file, &|_| Ok(())).unwrap();
    assert_eq!(moved.delivery("shop", "erp").unwrap(), Some(asked(7)));
    assert_eq!(moved.delivery("shop", "crm").unwrap(), Some(asked(4)));

    // Once taken up (the request cleared, the record written), the record travels as it is.
    drop(source.clear_redelivery("shop", "erp").unwrap());
    let mut batch = WriteBatch::default();
    add_delivery_record(&mut batch, "shop", "erp", &delivery(8));
    source.apply(batch).unwrap();
    let later = stores.file("later.jsonl");
    exported(&source, Some("shop"), &later);
    let again = stores.open("again");
    imported(&again, &later).unwrap();
    assert_eq!(again.delivery("shop", "erp").unwrap(), Some(delivery(8)));
    assert_eq!(again.delivery("shop", "crm").unwrap(), Some(asked(4)));
}

#[test]
fn rounds_bring_new_events_and_the_latest_mark_and_deliveries() {
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
    add_delivery_record(&mut batch, "shop", "erp", &delivery(6));
    source.apply(batch).unwrap();
    assert_eq!(source.prune_events("shop", i64::MAX, 3).unwrap(), 3);
    let changed = Changed {
        events: BTreeSet::from([2, 6, 7]),
        ..Changed::default()
    };
    let mut round = Vec::new();
    let shipped = export_changed(&source, "shop", &changed, &mut round).unwrap();
    assert_eq!((shipped.events, shipped.deliveries), (2, 1));
    let round_file = stores.file("round.jsonl");
    std::fs::write(&round_file, round).unwrap();

    let (applied, _) = apply_live(&target, "shop", &round_file, &|_| Ok(())).unwrap();
    assert_eq!((applied.events, applied.deliveries), (2, 1));
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
    assert_eq!(target.delivery("shop", "erp").unwrap(), Some(delivery(6)));

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
