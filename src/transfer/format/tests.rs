//! The format's own tests and those that cross its rooms: lines of several kinds round trip
//! through their records (an order's history, and the same order as version 3 wrote it),
//! webhook positions and the events-pruned mark, version 1 and what it lacks, broken lines
//! refused; and [`reads_back`], the check the rooms' tests share.

use super::*;
use crate::domain::day::WeekDays;
use crate::domain::order::history::NEVER_CHANGED;
use crate::store::kinds::customers::{CustomerRecord, HaltRecord};
use crate::store::kinds::orders::{ContentRecord, ExtraRecord, LifecycleRecord, OrderRecord};
use crate::store::kinds::webhook_positions::WebhookPosition;

#[test]
fn lines_round_trip_through_records() {
    let customer = CustomerRecord {
        id: 3,
        webstore_id: "shop".into(),
        number: 1,
        first_name: "Ann".into(),
        last_name: None,
        email: "Ann@Example.com".into(),
        delivery_service_id: 91,
        address: vec![
            Some("1 Road".into()),
            None,
            None,
            Some("York".into()),
            None,
            None,
            None,
            None,
            None,
        ],
        password_hash: Some("$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA".into()),
        halts: vec![
            HaltRecord {
                from_day: 20_000,
                until_day: Some(20_010),
            },
            HaltRecord {
                from_day: 20_100,
                until_day: None,
            },
        ],
    };
    let line = CustomerLine::from_record(customer.clone());
    assert_eq!(line.clone().into_record().unwrap(), customer);
    let text = to_text(&Line::Customer(line));
    let back: Line = serde_json::from_slice(&text).unwrap();
    assert_eq!(to_text(&back), text);

    let monday = Day::of("2027-01-04".parse().unwrap()).0;
    let content = |effective_day: i32, box_id: u64| ContentRecord {
        effective_day,
        extras_since_day: monday,
        box_id,
        frequency: 2,
        extras_one_off: true,
        extras: vec![ExtraRecord {
            id: 28,
            quantity: 2,
        }],
        exclusions: vec![240],
        substitutions: vec![],
        start_day: monday,
        week_days: WeekDays::only(1).with(4).bits(),
    };
    let order = OrderRecord {
        id: 9,
        customer_id: 3,
        created_at: 1_795_428_000,
        versions: vec![content(monday, 217)],
        lifecycles: vec![],
        settled_before: NEVER_CHANGED.0,
        updated_at: 1_795_428_000,
    };
    let line = OrderLine::from_record(order.clone());
    assert_eq!(line.versions[0].start_date, "2027-01-04");
    assert_eq!(line.versions[0].week_days, [1, 4]);
    assert_eq!((&line.settled_before, line.updated_at), (&None, None));
    assert_eq!(line.into_record().unwrap(), order);

    // A changed order: a box from a later date on, a pause and a cancellation.
    let changed = OrderRecord {
        versions: vec![content(monday, 217), content(monday + 14, 218)],
        lifecycles: vec![LifecycleRecord {
            effective_day: monday + 7,
            cancel_day: Some(monday + 60),
            pause_day: Some(monday + 21),
            resume_day: Some(monday + 28),
            skipped_days: vec![monday + 35],
        }],
        settled_before: monday + 7,
        updated_at: 1_795_500_000,
        ..order
    };
    let line = OrderLine::from_record(changed.clone());
    assert_eq!(line.lifecycles[0].pause_date.as_deref(), Some("2027-01-25"));
    let Line::Order(back) = reads_back(Line::Order(line)) else {
        panic!("an order line reads back as another kind")
    };
    assert_eq!(back.into_record().unwrap(), changed);

    // The same order as version 3 exported it: its latest content at the top.
    let v3 = concat!(
        r#"{"type":"order","id":9,"customer_id":3,"box_id":218,"frequency":"fortnightly","#,
        r#""start_date":"2027-01-04","week_days":[1,4],"extras_one_off":true,"#,
        r#""extras":[{"id":28,"quantity":2}],"exclusions":[240],"substitutions":[],"#,
        r#""created_at":1795428000,"effective_date":"2027-01-18","#,
        r#""extras_since":"2027-01-04","earlier":[{"effective_date":"2027-01-04","#,
        r#""extras_since":"2027-01-04","box_id":217,"frequency":"fortnightly","#,
        r#""start_date":"2027-01-04","week_days":[1,4],"extras_one_off":true,"#,
        r#""extras":[{"id":28,"quantity":2}],"exclusions":[240],"substitutions":[]}],"#,
        r#""lifecycles":[{"effective_date":"2027-01-11","cancel_date":"2027-03-05","#,
        r#""pause_date":"2027-01-25","resume_date":"2027-02-01","#,
        r#""skipped_dates":["2027-02-08"]}],"settled_before":"2027-01-11","#,
        r#""updated_at":1795500000}"#
    );
    let Ok(Line::Order(old)) = parse_line(v3, 3) else {
        panic!("a version 3 order line reads")
    };
    assert_eq!(old.into_record().unwrap(), changed);
    assert!(parse_line(v3, 4).is_err(), "version 4 nests the content");
}

/// A line's text read back is the same line, and writes the same text again.
pub(super) fn reads_back(line: Line) -> Line {
    let text = to_text(&line);
    let back: Line = serde_json::from_slice(&text).unwrap();
    assert_eq!(back, line);
    assert_eq!(to_text(&back), text);
    back
}

#[test]
fn webhook_positions_and_the_events_pruned_mark_round_trip() {
    let record = WebhookPosition {
        delivered_through: 17,
        disabled: Some("410 Gone".into()),
        attempts: 3,
        failing_since_ms: 1_799_056_800_000,
        next_attempt_ms: 1_799_056_860_000,
    };
    let line = WebhookPositionLine::from_record("shop", "erp", record.clone());
    let Line::WebhookPosition(back) = reads_back(Line::WebhookPosition(line)) else {
        panic!("a webhook position line reads back as another kind")
    };
    assert_eq!(
        (back.webstore_id.as_str(), back.endpoint.as_str()),
        ("shop", "erp")
    );
    assert_eq!(back.into_record().unwrap(), record);

    let line = EventsPrunedLine {
        webstore_id: "shop".into(),
        through: 9,
    };
    let Line::EventsPruned(back) = reads_back(Line::EventsPruned(line)) else {
        panic!("an events_pruned line reads back as another kind")
    };
    assert_eq!(back.into_parts().unwrap(), ("shop".to_owned(), 9));
}

#[test]
fn version_1_is_read_and_has_none_of_the_new_lines() {
    assert!(reads_version(1) && reads_version(VERSION));
    assert!(!reads_version(0) && !reads_version(VERSION + 1));
    let header: Line = serde_json::from_str(
        r#"{"type":"header","format":"boxsub-export","version":1,"webstore":"shop"}"#,
    )
    .unwrap();
    assert_eq!(header.since_version(), 1);
    let event: Line = serde_json::from_str(concat!(
        r#"{"type":"event","webstore_id":"shop","sequence":1,"#,
        r#""event_type":"customer.created","created_at_ms":0,"#,
        r#""json":"{\"type\":\"customer.created\",\"sequence\":1}"}"#
    ))
    .unwrap();
    assert_eq!(event.since_version(), 2);
    let pruned: Line =
        serde_json::from_str(r#"{"type":"events_pruned","webstore_id":"s","through":0}"#).unwrap();
    assert_eq!(pruned.since_version(), 2);
}

#[test]
fn broken_lines_are_refused() {
    for bad in [
        r#"{"type":"order","id":1}"#,
        r#"{"type":"customer","id":1,"extra":true}"#,
        r#"{"type":"nonsense"}"#,
        r#"{"type":"event","webstore_id":"s","sequence":1}"#,
        r#"{"type":"events_pruned","webstore_id":"s","through":1,"extra":1}"#,
        r#"{"type":"delivery","webstore_id":"s","endpoint":"e"}"#,
    ] {
        assert!(serde_json::from_str::<Line>(bad).is_err(), "{bad}");
    }
    let version = ContentLine {
        effective_date: "2027-01-04".into(),
        extras_since: "2027-01-04".into(),
        box_id: 1,
        frequency: "daily".into(),
        start_date: "2027-01-04".into(),
        week_days: vec![1],
        extras_one_off: false,
        extras: vec![],
        exclusions: vec![],
        substitutions: vec![],
    };
    let order = OrderLine {
        id: 1,
        customer_id: 1,
        created_at: 0,
        versions: vec![version.clone()],
        lifecycles: vec![],
        settled_before: None,
        updated_at: None,
    };
    assert!(order.clone().into_record().is_err(), "an unknown frequency");
    let weekly = ContentLine {
        frequency: "weekly".into(),
        ..version
    };
    let broken_history = OrderLine {
        versions: vec![weekly.clone()],
        lifecycles: vec![LifecycleLine {
            effective_date: "2027-01-04".into(),
            cancel_date: None,
            pause_date: Some("2027-02-01".into()),
            resume_date: Some("2027-01-25".into()),
            skipped_dates: vec![],
        }],
        settled_before: Some("2027-01-04".into()),
        ..order.clone()
    };
    assert!(
        broken_history.into_record().is_err(),
        "a pause ending before it starts"
    );
    let no_version = OrderLine {
        versions: vec![],
        ..order.clone()
    };
    assert!(no_version.into_record().is_err(), "an order has a content");
    let unsettled = OrderLine {
        versions: vec![weekly],
        updated_at: Some(5),
        ..order
    };
    assert!(
        unsettled.into_record().is_err(),
        "a history without settled_before"
    );

    let event = |sequence: u64, event_type: &str, json: &str| EventLine {
        webstore_id: "shop".into(),
        sequence,
        event_type: event_type.into(),
        created_at_ms: 0,
        json: json.into(),
    };
    let good = r#"{"type":"order.created","sequence":3,"data":{}}"#;
    assert!(event(3, "order.created", good).into_record().is_ok());
    for (sequence, event_type, json) in [
        (
            0,
            "order.created",
            r#"{"type":"order.created","sequence":0}"#,
        ),
        (3, "", good),
        (4, "order.created", good),
        (3, "customer.created", good),
        (3, "order.created", "not json"),
        (3, "order.created", "[3]"),
        (3, "order.created", r#"{"type":"order.created"}"#),
    ] {
        let refused = event(sequence, event_type, json).into_record();
        assert!(refused.is_err(), "{sequence} {event_type:?} {json}");
    }
    let delivery = WebhookPositionLine::from_record("shop", "", WebhookPosition::default());
    assert!(
        delivery.into_record().is_err(),
        "an endpoint without a name"
    );
    let pruned = EventsPrunedLine {
        webstore_id: String::new(),
        through: 1,
    };
    assert!(pruned.into_parts().is_err());
}
