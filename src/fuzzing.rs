//! Entry points of the fuzz targets in `fuzz/` and of the test that replays their committed
//! seeds (`tests/fuzz_seeds.rs`). Each takes arbitrary bytes, feeds them to the functions the
//! server itself uses on untrusted input, and asserts what must hold for every input: no
//! panic, and for anything accepted, the invariants the rest of the service relies on (an
//! accepted order names only what the catalogue has, a record survives its encoding, a route
//! names its own template).
//!
//! Must not touch: I/O of any kind, global state beyond the demo catalogue read once. It only
//! calls inward (http parsing, domain rules, record codecs, the export format).

use crate::store::pending::order_chunks;
use std::sync::LazyLock;

use serde_json::Value;
use warp::http::Method;

use crate::domain::catalogue::{Catalogue, Webstore, WebstoreIdx};
use crate::domain::customer::{parse_customer, Customer, Mode};
use crate::domain::day::WeekDays;
use crate::domain::day::{parse_date_param, Day};
use crate::domain::email::{fold, Email};
use crate::domain::halts::Halts;
use crate::domain::ids::{CustomerId, OrderId};
use crate::domain::order::body::{customer_ref, validate_order, CustomerCheck, OrderBody};
use crate::domain::order::change::{ChangeContext, OrderChange};
use crate::domain::order::history::{OrderHistory, MAX_PLANNED_VERSIONS};
use crate::domain::order::schedule::ScheduleRules;
use crate::domain::order::Order;
use crate::domain::paging::Page;
use crate::http::{
    json_fields, json_object, needs_credentials, resolve, route, sign_in_params, CustomerView,
    Embed, OrderView, Params,
};
use crate::store::codec::{self, Kind, Record};
use crate::store::kinds::customers::CustomerRecord;
use crate::store::kinds::idempotency::IdempotencyRecord;
use crate::store::kinds::orders::OrderRecord;
use crate::store::log::wal::{self, LogEntry, LoggedWrite};
use crate::transfer::format::Line;

/// A fuzz target: arbitrary bytes in, whether the server would accept them out.
pub type Target = fn(&[u8]) -> bool;

/// Every target by name: the directory names under `fuzz/seeds/` and the binaries in `fuzz/`.
/// Each returns whether the server would accept the input, so the seed replay can check that
/// its valid seeds are valid and its near-valid ones are refused.
pub const TARGETS: &[(&str, Target)] = &[
    ("order_body", order_body),
    ("order_change", order_change),
    ("customer_body", customer_body),
    ("sign_in", sign_in),
    ("catalogue", catalogue),
    ("records", records),
    ("routes", routes),
    ("email", email),
    ("log_segment", log_segment),
];

/// Parsed once: parsing it for every input would be most of a run's time.
static DEMO: LazyLock<Catalogue> = LazyLock::new(|| Catalogue::demo(1_700_000_000));

/// A fixed "today" (a Monday) and the days around it, so schedules are exercised on every
/// weekday without depending on the clock.
fn todays() -> impl Iterator<Item = Day> {
    let monday = Day::of(jiff::civil::date(2026, 11, 23));
    (0..7).map(move |n| monday.plus(n))
}

/// An order body, as `POST /v1/orders` reads it (bare or under `order`), checked against
/// every demo webstore for every kind of customer lookup. An accepted order names only a
/// visible box, its extras and the webstore's box items; its schedule has a delivery; and it
/// survives the store's encoding, the export format and rendering.
pub fn order_body(data: &[u8]) -> bool {
    let Ok(body) = json_fields::<OrderBody>(data, "order") else {
        return false;
    };
    let mut accepted = false;
    let _ = customer_ref(&body);
    for webstore in DEMO.webstores() {
        let _ = validate_order(&body, webstore, CustomerCheck::Missing)
            .expect_err("an order without a customer is refused");
        let _ = validate_order(&body, webstore, CustomerCheck::Unknown)
            .expect_err("an order of an unknown customer is refused");
        for service in webstore.delivery_services.values() {
            for today in todays() {
                let rules = ScheduleRules {
                    delivery_days: service.week_days(),
                    today,
                };
                if let Ok(details) = validate_order(&body, webstore, CustomerCheck::Found(rules)) {
                    check_accepted_order(webstore, rules, details);
                    accepted = true;
                }
            }
        }
    }
    accepted
}

fn check_accepted_order(
    webstore: &Webstore,
    rules: ScheduleRules,
    details: crate::domain::order::content::OrderContent,
) {
    let the_box = webstore
        .visible_box(details.box_id)
        .expect("an accepted box is visible");
    assert!(details
        .extras
        .iter()
        .all(|line| the_box.offers_extra(line.id)));
    for id in details.exclusions.iter().chain(&details.substitutions) {
        assert!(webstore.box_items.contains_key(id), "unknown box item {id}");
    }
    let schedule = details.schedule;
    assert!(!schedule.week_days.is_empty());
    assert!(schedule.week_days.within(rules.delivery_days));
    assert!(schedule.first_delivery(details.frequency).is_some());

    let order = Order::new(OrderId(7), CustomerId(3), details, 1_700_000_000);
    serde_json::to_vec(&OrderView::new(&order)).expect("an order renders");
    let record = OrderRecord::from_order(&order);
    let stored: OrderRecord = codec::decode(&codec::encode(&record)).expect("decodes");
    assert_eq!(stored, record);
    assert_eq!(stored.into_order().expect("converts back"), order);
    let line = Line::Order(crate::transfer::format::OrderLine::from_record(
        record.clone(),
    ));
    let back: Line = serde_json::from_slice(&crate::transfer::format::to_text(&line))
        .expect("an exported line reads back");
    let Line::Order(back) = back else {
        panic!("an order line reads back as another kind")
    };
    assert_eq!(back.into_record().expect("imports"), record);
}

/// The order every change is tried on: weekly on Thursdays from Thursday 2026-11-05, box 217
/// with two apple juices, one exclusion and one substitution, as `POST /v1/orders` makes it.
static CHANGED: LazyLock<(OrderHistory, WeekDays)> = LazyLock::new(|| {
    let webstore = &DEMO.webstores()[0];
    let service = webstore
        .delivery_services
        .values()
        .find(|service| service.week_days().contains(4))
        .expect("a demo delivery service delivers on Thursdays");
    let body = json_fields::<OrderBody>(
        br#"{"box_id": 217, "frequency": "weekly", "start_date": "2026-11-05",
             "extras": [{"id": 28, "quantity": 2}], "exclusions": [240], "substitutions": [243]}"#,
        "order",
    )
    .expect("the base order reads");
    let rules = ScheduleRules {
        delivery_days: service.week_days(),
        today: Day::of(jiff::civil::date(2026, 11, 2)),
    };
    let content =
        validate_order(&body, webstore, CustomerCheck::Found(rules)).expect("the base order");
    (
        OrderHistory::new(content, 1_700_000_000),
        service.week_days(),
    )
});

/// A change's body, as `PATCH /v1/orders/{id}` reads it (bare or under `order`), applied to
/// a weekly order of the first demo webstore at moments through a week (so the cut-off falls
/// on every side of its dates). An accepted change never alters what a locked date delivers,
/// plans no more than [`MAX_PLANNED_VERSIONS`] versions, and makes an order that survives the
/// store's encoding and the export format.
pub fn order_change(data: &[u8]) -> bool {
    let Ok(object) = json_object(data, "order") else {
        return false;
    };
    let change = OrderChange::parse(&object);
    let (history, delivery_days) = &*CHANGED;
    let webstore = &DEMO.webstores()[0];
    let monday_noon = 1_795_435_200; // 2026-11-23T12:00:00Z
    let mut accepted = false;
    for hours in [0, 30, 53, 77, 101, 150] {
        let context = ChangeContext {
            webstore,
            delivery_days: *delivery_days,
            now: monday_noon + hours * 3_600,
        };
        let Ok(changed) = change.apply(history, &context) else {
            continue;
        };
        accepted = true;
        let open = webstore.cutoff.first_open_day(&webstore.zone, context.now);
        let halts = Halts::none();
        for locked in (1..=28).map(|back| open.plus(-back)) {
            assert_eq!(
                changed.on(locked, &halts).map(|delivery| delivery.goods()),
                history.on(locked, &halts).map(|delivery| delivery.goods()),
                "an accepted change altered the locked date {}",
                locked.date()
            );
        }
        let planned = changed
            .contents()
            .iter()
            .filter(|version| version.effective >= open)
            .count();
        assert!(
            planned <= MAX_PLANNED_VERSIONS,
            "{planned} versions planned"
        );
        if changed == *history {
            continue;
        }
        let order = Order::new(
            OrderId(7),
            CustomerId(3),
            history.latest().content.clone(),
            0,
        )
        .changed(changed);
        serde_json::to_vec(&OrderView::new(&order)).expect("a changed order renders");
        let record = OrderRecord::from_order(&order);
        let stored: OrderRecord = codec::decode(&codec::encode(&record)).expect("decodes");
        assert_eq!(stored.into_order().expect("converts back"), order);
        let line = Line::Order(crate::transfer::format::OrderLine::from_record(record));
        serde_json::from_slice::<Line>(&crate::transfer::format::to_text(&line))
            .expect("an exported line reads back");
    }
    accepted
}

/// A customer body, as `POST /v1/customers` and `PATCH /v1/customers/:id` read it, for every
/// demo webstore (accepted: a create or an update in some webstore). An accepted create makes a customer that renders and survives the store's
/// encoding; an accepted update applies to it or is refused, never half-applied.
pub fn customer_body(data: &[u8]) -> bool {
    let Ok(body) = json_object(data, "customer") else {
        return false;
    };
    let mut accepted = false;
    for webstore in DEMO.webstores() {
        let created = parse_customer(&body, webstore, Mode::Create)
            .ok()
            .map(|changes| {
                assert!(changes.email.is_some(), "a created customer has an email");
                let mut changes = changes;
                // The service replaces the password by its hash before creating.
                changes.password_hash = changes.password.take().map(|_| "hash".to_owned());
                Customer::create(CustomerId(3), webstore.idx, 1, changes)
            });
        if let Some(customer) = &created {
            check_customer(customer, webstore);
            accepted = true;
        }
        if let Ok(changes) = parse_customer(&body, webstore, Mode::Update) {
            let base = created
                .clone()
                .unwrap_or_else(|| sample_customer(webstore.idx));
            let before = base.clone();
            if let Ok(updated) = base.updated(&changes, &webstore.settings.require, Day(20_000)) {
                check_customer(&updated, webstore);
                accepted = true;
            }
            assert_eq!(base, before, "an update never changes the original");
        }
    }
    accepted
}

fn sample_customer(webstore: WebstoreIdx) -> Customer {
    let body = serde_json::json!({
        "first_name": "Ada", "last_name": "Lovelace", "email": "ada@example.com",
        "delivery_service_id": 1,
        "address": {"address_1": "1 Way", "city": "Town", "mobile_phone": "021 555"}
    });
    let mut changes = crate::domain::customer::CustomerChanges {
        first_name: Some("Ada".into()),
        email: Email::parse("ada@example.com").ok(),
        ..Default::default()
    };
    if let Value::Object(body) = body {
        if let Some(webstore) = DEMO.webstore(webstore) {
            if let Ok(parsed) = parse_customer(&body, webstore, Mode::Create) {
                changes = parsed;
            }
        }
    }
    Customer::create(CustomerId(3), webstore, 1, changes)
}

fn check_customer(customer: &Customer, webstore: &Webstore) {
    for embed in [Embed::default(), Embed::parse(Some("address"))] {
        serde_json::to_vec(&CustomerView::new(customer, webstore, embed))
            .expect("a customer renders");
    }
    let record = CustomerRecord::from_customer(customer, &webstore.settings.id);
    let stored: CustomerRecord = codec::decode(&codec::encode(&record)).expect("decodes");
    assert_eq!(
        &stored.into_customer(webstore.idx).expect("converts back"),
        customer
    );
}

/// Sign-in parameters: byte 0 says whether the body came as a form; the rest is the body, a
/// NUL byte, then the query string. Accepted parameters are never blank.
pub fn sign_in(data: &[u8]) -> bool {
    let Some((flags, rest)) = data.split_first() else {
        return false;
    };
    let (body, query) = match rest.iter().position(|byte| *byte == 0) {
        Some(at) => (&rest[..at], &rest[at + 1..]),
        None => (rest, &[][..]),
    };
    let query = Params::parse(query);
    if let Ok(params) = sign_in_params(body, flags & 1 == 1, &query) {
        assert!(!params.email.is_empty() && !params.password.is_empty());
        let _ = Email::parse(&params.email).map(|email| email.index_key());
        let _ = Embed::parse(params.embed.as_deref());
        return true;
    }
    false
}

/// A catalogue file, as `--catalogue`, SIGHUP reloads and `check-catalogue` read it, alone
/// and as a reload of the demo catalogue. An accepted catalogue finds each of its webstores
/// by id and each visible box by id.
pub fn catalogue(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let parsed = Catalogue::parse(text, 0);
    if let Ok(catalogue) = &parsed {
        for webstore in catalogue.webstores() {
            let found = catalogue
                .webstore_by_id(&webstore.settings.id)
                .expect("a webstore is found by its id");
            assert_eq!(found.idx, webstore.idx);
            for visible in webstore.visible_boxes() {
                assert!(webstore.visible_box(visible.id).is_some());
            }
        }
    }
    if let Ok(reloaded) = Catalogue::parse_after(Some(&DEMO), text, 0) {
        // A webstore kept across a reload keeps its position.
        for webstore in reloaded.webstores() {
            if let Some(before) = DEMO.webstore_by_id(&webstore.settings.id) {
                assert_eq!(before.idx, webstore.idx);
            }
        }
    }
    parsed.is_ok()
}

/// Stored records and export lines (of this release's export version and of version 3).
/// Byte 0 picks a record kind and byte 1 a format version;
/// the rest is a payload given a correct header, so the fuzzer reaches the decoder past the
/// checksum. The raw bytes are also decoded as they are, and read as an export line.
/// Whatever decodes encodes back to the same record.
pub fn records(data: &[u8]) -> bool {
    let mut accepted = decode_each_kind(data);
    if let [kind, version, payload @ ..] = data {
        let kind = match kind % 4 {
            0 => Kind::Customer,
            1 => Kind::Order,
            2 => Kind::Idempotency,
            _ => Kind::OrderChunk,
        };
        // 0 (never written) to the newest order format, 4.
        let version = u16::from(version % 5);
        let mut bytes = Vec::with_capacity(10 + payload.len());
        bytes.extend_from_slice(b"BXS");
        bytes.push(kind as u8);
        bytes.extend_from_slice(&version.to_be_bytes());
        bytes.extend_from_slice(&crc32fast::hash(payload).to_be_bytes());
        bytes.extend_from_slice(payload);
        accepted |= decode_each_kind(&bytes);
    }
    // An export line as this release writes it, and as versions 1 to 3 did (their order
    // lines are read into today's).
    if let Ok(text) = std::str::from_utf8(data) {
        for version in [crate::transfer::format::VERSION, 3] {
            if let Ok(line) = crate::transfer::format::parse_line(text, version) {
                accepted |= check_line(line);
            }
        }
    }
    accepted
}

/// A write-ahead log segment as a start reads it: as given (random bytes rarely pass a
/// frame's checksum), and as the payload of one frame with a valid checksum, so that the
/// writes inside are parsed. Reading never panics; every frame read holds writes that encode
/// back to exactly its payload; a frame cut short or changed anywhere is not read. Accepted:
/// at least one frame read.
pub fn log_segment(data: &[u8]) -> bool {
    const SEQ: u64 = 7;
    let mut accepted = check_segment(SEQ, data);
    let framed = wal::framed(SEQ, data);
    accepted |= check_segment(SEQ, &framed);
    if framed.len() > wal::FRAME_HEADER + 1 {
        // Cut anywhere inside the frame, or read as another segment's: nothing.
        let cut = wal::FRAME_HEADER + data.len() / 2;
        assert!(wal::read_segment(SEQ, &framed[..cut]).is_ok_and(|f| f.is_empty()));
        assert!(wal::read_segment(SEQ + 1, &framed).is_ok_and(|f| f.is_empty()));
    }
    accepted
}

fn check_segment(seq: u64, bytes: &[u8]) -> bool {
    let Ok(frames) = wal::read_segment(seq, bytes) else {
        return false;
    };
    let mut offset = 0;
    for writes in &frames {
        let mut entry = LogEntry::new();
        for write in writes {
            match *write {
                LoggedWrite::Set { key, value } => entry.set(key, value),
                LoggedWrite::RemoveIf { key, expected } => entry.remove_if(key, expected),
                LoggedWrite::Remove { key } => entry.remove(key),
            }
        }
        let again = wal::framed(seq, &entry.into_bytes());
        assert_eq!(
            &bytes[offset..offset + again.len()],
            again.as_slice(),
            "a frame read back encodes to itself"
        );
        offset += again.len();
    }
    !frames.is_empty()
}

/// Whether `bytes` decode as a record of some kind (an order also converting to an order).
fn decode_each_kind(bytes: &[u8]) -> bool {
    let mut decoded = false;
    if let Ok(record) = codec::decode::<CustomerRecord>(bytes) {
        round_trip(&record);
        let _ = record.into_customer(WebstoreIdx(0));
        decoded = true;
    }
    if let Ok(record) = codec::decode::<OrderRecord>(bytes) {
        round_trip(&record);
        decoded |= record.into_order().is_ok();
    }
    if let Ok(record) = codec::decode::<IdempotencyRecord>(bytes) {
        round_trip(&record);
        decoded = true;
    }
    // An order chunk: each of its records decoded, and the chunk encoded back the same.
    if let Ok(parts) = order_chunks::order_parts(0, bytes) {
        if bytes.get(3) == Some(&(Kind::OrderChunk as u8)) {
            assert_eq!(
                order_chunks::encode_order_chunk(parts.iter().copied()),
                bytes
            );
        }
        for (_, record) in &parts {
            decoded |= codec::decode::<OrderRecord>(record).is_ok_and(|r| r.into_order().is_ok());
        }
    }
    decoded
}

fn round_trip<R: Record + PartialEq + std::fmt::Debug>(record: &R) {
    let again: R = codec::decode(&codec::encode(record)).expect("a record decodes");
    assert_eq!(&again, record);
}

/// Whether an export line would import (as a record, or as the header).
fn check_line(line: Line) -> bool {
    let text = crate::transfer::format::to_text(&line);
    let back: Line = serde_json::from_slice(&text).expect("a line reads back");
    assert_eq!(back, line);
    match line {
        Line::Header { .. } => true,
        Line::Customer(customer) => customer.into_record().inspect(round_trip).is_ok(),
        Line::Order(order) => order
            .into_record()
            .inspect(round_trip)
            .is_ok_and(|record| record.into_order().is_ok()),
        Line::Idempotency(idempotency) => {
            let _ = idempotency.names();
            idempotency.into_record().inspect(round_trip).is_ok()
        }
        Line::Event(event) => {
            let json = event.json.clone();
            event
                .into_record()
                .inspect(round_trip)
                .inspect(|record| {
                    assert_eq!(
                        record.body,
                        crate::store::kinds::events::EventBody::Json(json.into_bytes()),
                        "an event's bytes"
                    )
                })
                .is_ok()
        }
        Line::EventsPruned(pruned) => pruned.into_parts().is_ok(),
        Line::WebhookPosition(delivery) => delivery.into_record().inspect(round_trip).is_ok(),
        Line::Session(session) => session
            .into_record()
            .inspect(|(_, record)| round_trip(record))
            .is_ok(),
        Line::FrozenDelivery(delivery) => delivery
            .into_record()
            .inspect(|(.., record)| round_trip(record))
            .is_ok(),
        Line::FrozenDay(day) => day
            .into_record()
            .inspect(|(.., record)| round_trip(record))
            .is_ok(),
        Line::FrozenThrough(mark) => mark.into_mark().is_ok(),
        Line::Account(account) => account
            .into_record()
            .inspect(round_trip)
            .is_ok_and(|record| record.into_account(false).is_some()),
        Line::Transaction(transaction) => transaction
            .into_record()
            .inspect(round_trip)
            .is_ok_and(|record| record.into_transaction().is_some()),
        Line::Payment(payment) => payment
            .into_record()
            .inspect(round_trip)
            .is_ok_and(|record| record.into_payment().is_some()),
    }
}

/// A request line, `METHOD TARGET`, through the route table and the query parameters every
/// endpoint reads. A route is found only under `/v1/`, and names its own template.
pub fn routes(data: &[u8]) -> bool {
    let text = String::from_utf8_lossy(data);
    let (method, target) = text.split_once(' ').unwrap_or((&text, "/"));
    let Ok(method) = Method::from_bytes(method.as_bytes()) else {
        return false;
    };
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let credentials = needs_credentials(&method, path);
    let routed = match resolve(&method, path) {
        Ok(endpoint) => {
            assert!(path.starts_with("/v1/"));
            assert_eq!(route(&method, path), endpoint.route());
            assert!(credentials || method == Method::GET);
            true
        }
        Err(_) => {
            let _ = route(&method, path);
            false
        }
    };
    let params = Params::parse(query.as_bytes());
    if let Ok(page) = Page::parse(params.get("page"), params.get("per_page")) {
        assert!(page.number >= 1 && page.per_page >= 1);
        for total in [0, 1, page.per_page, u64::MAX] {
            assert!(page.last(total) >= 1);
        }
        let _ = page.offset();
    }
    let _ = Embed::parse(params.get("embed"));
    let _ = parse_date_param(params.get("date"));
    routed
}

/// An email address: parsing is stable on its own output, and folding is idempotent.
pub fn email(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let once = fold(text);
    assert_eq!(fold(&once), once);
    let parsed = Email::parse(text);
    if let Ok(email) = &parsed {
        assert_eq!(Email::parse(email.as_str()).as_ref(), Ok(email));
        let _ = email.index_key();
    }
    parsed.is_ok()
}
