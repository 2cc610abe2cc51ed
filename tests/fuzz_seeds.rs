//! Replays every committed fuzz seed (`fuzz/seeds/<target>/*`, crashes found by fuzzing
//! included) through its target's entry point in `boxsub::fuzzing`, so `cargo test` checks
//! what the fuzzers check without a nightly toolchain or libFuzzer. A seed named `valid-…`
//! must be accepted by the server's parser and one named `near-…` refused, so the seeds stay
//! what they claim to be as the rules change.

use std::fs;
use std::path::{Path, PathBuf};

use boxsub::fuzzing::TARGETS;

fn seeds_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds")
}

#[test]
fn every_seed_passes_its_target() {
    let mut replayed = 0;
    for (name, target) in TARGETS {
        let dir = seeds_dir().join(name);
        let mut files: Vec<_> = fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.expect("a directory entry").path())
            .collect();
        files.sort();
        assert!(
            files.len() >= 5,
            "{name}: {} seeds; every target keeps valid and near-valid seeds",
            files.len()
        );
        for file in files {
            let data = fs::read(&file).expect("a seed reads");
            let accepted = std::panic::catch_unwind(|| target(&data))
                .unwrap_or_else(|_| panic!("{name}: {} fails", file.display()));
            let seed = file.file_name().unwrap_or_default().to_string_lossy();
            if seed.starts_with("valid-") {
                assert!(accepted, "{name}: {seed} should be accepted");
            }
            if seed.starts_with("near-") {
                assert!(!accepted, "{name}: {seed} should be refused");
            }
            replayed += 1;
        }
    }
    println!("replayed {replayed} seeds");
}

#[test]
fn every_target_has_a_seed_directory_and_a_fuzz_binary() {
    let manifest =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/Cargo.toml"))
            .expect("fuzz/Cargo.toml");
    for (name, _) in TARGETS {
        assert!(seeds_dir().join(name).is_dir(), "fuzz/seeds/{name}");
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "fuzz/Cargo.toml has no target {name}"
        );
    }
}

/// The seeds of the `records` target are encoded records, so they are written from the
/// codec rather than by hand. Refresh them after a record format change with
/// `cargo test --test fuzz_seeds -- --ignored write_record_seeds`.
#[test]
#[ignore = "writes fuzz/seeds/records; run by hand after a record format change"]
fn write_record_seeds() {
    use boxsub::store::codec;
    use boxsub::store::kinds::customers::CustomerRecord;
    use boxsub::store::kinds::events::{EventBody, EventRecord};
    use boxsub::store::kinds::idempotency::IdempotencyRecord;
    use boxsub::store::kinds::webhook_positions::WebhookPosition;
    use boxsub::transfer::format::{
        to_text, CustomerLine, EventLine, EventsPrunedLine, IdempotencyLine, Line, OrderLine,
        WebhookPositionLine,
    };

    let dir = seeds_dir().join("records");
    fs::create_dir_all(&dir).expect("the seed directory");
    let customer: CustomerRecord = serde_json::from_value(serde_json::json!({
        "id": 3, "webstore_id": "fantastic-vege-people", "number": 1, "first_name": "Joe",
        "last_name": "Dalton", "email": "joe@example.com", "delivery_service_id": 91,
        "address": ["1 My Street", null, null, "London", "XXX123", null, "007", null, null],
        "password_hash": null
    }))
    .expect("a customer record");
    let line = CustomerLine::from_record(customer.clone());
    let order = OrderLine::from_record(
        serde_json::from_str::<OrderLine>(
            r#"{"id":7,"customer_id":3,"box_id":217,"frequency":"weekly","extras_one_off":false,
                "extras":[{"id":28,"quantity":2}],"exclusions":[240],"substitutions":[241],
                "start_date":"2026-11-24","week_days":[2,4],"created_at":1700000000}"#,
        )
        .expect("an order line")
        .into_record()
        .expect("an order record"),
    );
    let order_record = order.clone().into_record().expect("an order record");
    let idempotency = IdempotencyRecord {
        body_sha256: vec![7; 32],
        status: 201,
        location: Some("/v1/customers/3".into()),
        body: br#"{"id":3}"#.to_vec(),
        created_at: 1_700_000_000,
    };
    let write = |name: &str, bytes: &[u8]| fs::write(dir.join(name), bytes).expect("write");
    let encoded = [
        ("customer", 0u8, codec::encode(&customer)),
        ("order", 1, codec::encode(&order_record)),
        ("idempotency", 2, codec::encode(&idempotency)),
    ];
    for (name, kind, bytes) in &encoded {
        write(&format!("valid-record-{name}"), bytes);
        // Kind and version bytes, then the payload: the target writes the header itself.
        let mut framed = vec![*kind, bytes[5]];
        framed.extend_from_slice(&bytes[10..]);
        write(&format!("valid-framed-{name}"), &framed);
        let mut truncated = framed.clone();
        truncated.truncate(framed.len() / 2);
        write(&format!("near-framed-{name}-truncated"), &truncated);
    }
    let idempotency_line =
        IdempotencyLine::from_record("fantastic-vege-people", "key-1", idempotency)
            .expect("an idempotency line");
    // An event's JSON is kept byte for byte: the seed's holds an escape a JSON value would
    // rewrite.
    let event = EventRecord {
        event_type: "order.created".into(),
        created_at_ms: 1_799_056_800_123,
        body: EventBody::Json(
            concat!(
                r#"{"id":"evt_0123456789abcdef0123456789abcdef","type":"order.created","#,
                r#""sequence":7,"created_at":"2027-01-04T10:00:00.123Z","#,
                r#""data":{"id":9,"customer_id":3,"note":"caf\u00e9"}}"#
            )
            .as_bytes()
            .to_vec(),
        ),
    };
    let event_line =
        EventLine::from_record("fantastic-vege-people", 7, event).expect("an event line");
    let delivery_line = WebhookPositionLine::from_record(
        "fantastic-vege-people",
        "erp",
        WebhookPosition {
            delivered_through: 6,
            disabled: None,
            attempts: 2,
            failing_since_ms: 1_799_056_800_000,
            next_attempt_ms: 1_799_056_830_000,
        },
    );
    for (name, line) in [
        ("valid-line-customer", Line::Customer(line)),
        ("valid-line-order", Line::Order(order)),
        (
            "valid-line-idempotency",
            Line::Idempotency(idempotency_line),
        ),
        ("valid-line-event", Line::Event(event_line)),
        ("valid-line-delivery", Line::WebhookPosition(delivery_line)),
        (
            "valid-line-events-pruned",
            Line::EventsPruned(EventsPrunedLine {
                webstore_id: "fantastic-vege-people".into(),
                through: 3,
            }),
        ),
        (
            "valid-line-header",
            Line::Header {
                format: "boxsub-export".into(),
                version: 1,
                webstore: None,
            },
        ),
    ] {
        write(name, &to_text(&line));
    }
}
