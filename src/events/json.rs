//! An event as it is fed (`GET /v1/events`), delivered to webhooks and exported: a JSON
//! object `{"id", "type", "sequence", "created_at", "data"}`, `data` being the resource as
//! `GET` returned it when the change was made. Rendered from the stored record when read,
//! with the API's own views (`crate::views`); an event stored as JSON (written by an
//! earlier format, or imported) is given back byte for byte.
//!
//! Must not touch: how events are stored or numbered.

use std::io::Write;

use crate::domain::catalogue::WebstoreIdx;
use crate::store::codec::CodecError;
use crate::store::kinds::events::{EventBody, EventRecord};
use crate::views::{render, CustomerView, Embed, OrderView};

/// Room reserved for an event's JSON: an order's or a customer's fits.
const EVENT_CAPACITY: usize = 640;

/// Event `sequence` of its webstore, stored as `record`, as JSON; an error if the resource it
/// holds does not make sense (a damaged record).
pub fn render_event(sequence: u64, record: &EventRecord) -> Result<Vec<u8>, CodecError> {
    let (id, data) = match &record.body {
        EventBody::Json(json) => return Ok(json.clone()),
        EventBody::Order { id, order } => {
            let order = order.clone().into_order()?;
            (id, render(&OrderView::new(&order)))
        }
        EventBody::Customer {
            id,
            customer,
            webstore_name,
            account,
        } => {
            let webstore_id = customer.webstore_id.clone();
            // The customer's webstore is named by id in its record; the view shows that id
            // and the name the event kept, never the catalogue's position.
            let mut customer = customer.clone().into_customer(WebstoreIdx(0))?;
            // An event written before accounts were kept with it shows the account a
            // customer without transactions has.
            if let Some(account) = account
                .as_deref()
                .cloned()
                .and_then(|a| a.into_account(false))
            {
                customer.account = account;
            }
            let embed = Embed {
                address: true,
                ..Embed::default()
            };
            (
                id,
                render(&CustomerView::of(
                    &customer,
                    &webstore_id,
                    webstore_name,
                    embed,
                )),
            )
        }
    };
    let data = data.map_err(|error| CodecError::Payload(error.to_string()))?;
    wrap(
        id,
        &record.event_type,
        sequence,
        record.created_at_ms,
        &data,
    )
}

/// The event `{"id", "type", "sequence", "created_at", "data"}` around `data`, the resource's
/// JSON: how a stored record is rendered, and how an event stored as its JSON (a money
/// write's) is made.
pub fn wrap(
    id: &[u8; 16],
    event_type: &str,
    sequence: u64,
    created_at_ms: i64,
    data: &[u8],
) -> Result<Vec<u8>, CodecError> {
    let mut json = Vec::with_capacity(EVENT_CAPACITY.max(data.len() + 128));
    let at = jiff::Timestamp::from_millisecond(created_at_ms)
        .map_err(|error| CodecError::Payload(error.to_string()))?;
    // Every field but `data` is ASCII with nothing to escape: a hex id, a fixed type name
    // (checked), a number and a timestamp.
    if !event_type
        .bytes()
        .all(|byte| byte.is_ascii_lowercase() || byte == b'.' || byte == b'_')
    {
        return Err(CodecError::Payload(format!(
            "the event type {event_type:?} is not a type's name"
        )));
    }
    let _ = write!(
        json,
        r#"{{"id":"evt_{}","type":"{}","sequence":{sequence},"created_at":"{}","data":"#,
        hex::encode(id),
        event_type,
        at.strftime("%Y-%m-%dT%H:%M:%S%.3fZ"),
    );
    json.extend_from_slice(data);
    json.push(b'}');
    Ok(json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::day::Day;
    use crate::domain::day::WeekDays;
    use crate::domain::order::content::OrderContent;
    use crate::store::kinds::customers::CustomerRecord;
    use crate::store::kinds::orders::OrderRecord;

    fn order() -> OrderRecord {
        let order = OrderContent::weekly_for_test(217)
            .with_extras(&[(28, 2)])
            .with_exclusions(&[241])
            .with_schedule(Day(20_420), WeekDays::from_bits(0b10))
            .placed(7, 3, 1_764_000_000);
        OrderRecord::from_order(&order)
    }

    #[test]
    fn an_order_event_is_its_envelope_around_the_order_as_get_renders_it() {
        let record = EventRecord {
            event_type: "order.created".into(),
            created_at_ms: 1_764_000_000_123,
            body: EventBody::Order {
                id: [0xab; 16],
                order: order(),
            },
        };
        let json = render_event(42, &record).unwrap();
        let value: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(value["id"], format!("evt_{}", "ab".repeat(16)));
        assert_eq!(value["type"], "order.created");
        assert_eq!(value["sequence"], 42);
        assert_eq!(value["created_at"], "2025-11-24T16:00:00.123Z");
        let order = order().into_order().unwrap();
        let expected: serde_json::Value =
            serde_json::from_slice(&crate::views::to_json(&OrderView::new(&order))).unwrap();
        assert_eq!(value["data"], expected);
        // The keys in the order clients have always seen them.
        assert!(std::str::from_utf8(&json)
            .unwrap()
            .starts_with("{\"id\":\"evt_abab"));
    }

    #[test]
    fn a_customer_event_shows_the_customer_with_its_address_and_never_a_password() {
        let record = EventRecord {
            event_type: "customer.updated".into(),
            created_at_ms: 0,
            body: EventBody::Customer {
                id: [1; 16],
                customer: CustomerRecord {
                    id: 3,
                    webstore_id: "shop".into(),
                    number: 12,
                    first_name: "Joe".into(),
                    last_name: Some("Dalton".into()),
                    email: "joe@example.com".into(),
                    delivery_service_id: 91,
                    address: vec![Some("1 My Street".into()), None],
                    password_hash: None,
                    halts: vec![],
                },
                webstore_name: "The Shop".into(),
                account: None,
            },
        };
        let value: serde_json::Value =
            serde_json::from_slice(&render_event(1, &record).unwrap()).unwrap();
        let data = &value["data"];
        assert_eq!(data["name"], "Joe Dalton");
        assert_eq!(data["number"], "0012");
        assert_eq!(data["webstore_id"], "shop");
        assert_eq!(data["webstore_name"], "The Shop");
        assert_eq!(data["address"]["address_1"], "1 My Street");
        assert!(
            !String::from_utf8_lossy(&serde_json::to_vec(&value).unwrap()).contains("password")
        );
    }

    #[test]
    fn an_event_stored_as_json_comes_back_byte_for_byte() {
        let json =
            br#"{"id":"evt_1","type":"order.created","sequence":1,"created_at":"x","data":{}}"#;
        let record = EventRecord {
            event_type: "order.created".into(),
            created_at_ms: 5,
            body: EventBody::Json(json.to_vec()),
        };
        assert_eq!(render_event(1, &record).unwrap(), json.to_vec());
    }
}
