//! Events as exported (version 2 on): [`EventLine`], an event's sequence number and its JSON
//! byte for byte (a feed's cursor and a webhook's delivered position are sequence numbers, and
//! an event's id and body must be the ones already given out), refused unless the JSON's
//! `type` and `sequence` are the line's; [`EventsPrunedLine`], how far the retention sweep
//! removed a webstore's events. Must not touch: the store but its record, files, other lines.

use serde::{Deserialize, Serialize};

use super::BadLine;
use crate::events::json::render_event;
use crate::store::codec::CodecError;
use crate::store::kinds::events::{EventBody, EventRecord};

/// An event as exported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventLine {
    /// Its webstore.
    pub webstore_id: String,
    /// Its sequence number in the webstore (from 1).
    pub sequence: u64,
    /// `customer.created`, `customer.updated`, `order.created`.
    pub event_type: String,
    /// Unix milliseconds when its change was made.
    pub created_at_ms: i64,
    /// The event as the feed and the webhooks give it, as JSON text in a string: a JSON value
    /// here would be parsed and written again on import, and could come back with other
    /// escapes or number forms; a string gives back the very bytes.
    pub json: String,
}

/// How far the retention sweep removed a webstore's events, as exported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsPrunedLine {
    /// Its webstore.
    pub webstore_id: String,
    /// The highest sequence number removed (0 for none).
    pub through: u64,
}

/// The fields of an event's JSON that its line repeats, read back to check that they agree.
#[derive(Deserialize)]
struct EventHead {
    #[serde(rename = "type")]
    event_type: String,
    sequence: u64,
}

impl EventLine {
    /// The line of stored event `sequence` of `webstore_id`, the event rendered as it is fed
    /// and delivered; an error for a record that renders no JSON text (boxsub only ever
    /// stores events it can render, so the record is damaged).
    pub fn from_record(
        webstore_id: &str,
        sequence: u64,
        record: EventRecord,
    ) -> Result<Self, CodecError> {
        let json = render_event(sequence, &record)?;
        Ok(EventLine {
            webstore_id: webstore_id.to_owned(),
            sequence,
            event_type: record.event_type,
            created_at_ms: record.created_at_ms,
            json: String::from_utf8(json)
                .map_err(|_| CodecError::Payload("its JSON is not UTF-8 text".into()))?,
        })
    }

    /// The record to store. The JSON must be an event object whose `type` and `sequence`
    /// are the line's: the feed pages by the sequence in the key and clients read the one in
    /// the JSON, so the two must never disagree.
    pub fn into_record(self) -> Result<EventRecord, BadLine> {
        let bad = |what: &str| {
            BadLine(format!(
                "event {} of webstore {:?}: {what}",
                self.sequence, self.webstore_id
            ))
        };
        if self.webstore_id.is_empty() || self.sequence == 0 || self.event_type.is_empty() {
            return Err(bad("the webstore_id, sequence and event_type must be set"));
        }
        let head: EventHead = serde_json::from_str(&self.json)
            .map_err(|error| bad(&format!("json is not an event object ({error})")))?;
        if head.event_type != self.event_type || head.sequence != self.sequence {
            return Err(bad(&format!(
                "json is event {} of type {:?}, not the line's",
                head.sequence, head.event_type
            )));
        }
        Ok(EventRecord {
            event_type: self.event_type,
            created_at_ms: self.created_at_ms,
            body: EventBody::Json(self.json.into_bytes()),
        })
    }
}

impl EventsPrunedLine {
    /// The line, checked: the webstore it names and how far.
    pub fn into_parts(self) -> Result<(String, u64), BadLine> {
        if self.webstore_id.is_empty() {
            return Err(BadLine("events_pruned: the webstore_id must be set".into()));
        }
        Ok((self.webstore_id, self.through))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transfer::format::{tests::reads_back, Line};

    #[test]
    fn an_event_comes_back_byte_for_byte() {
        // Escapes, a non-ASCII character both escaped and not, numbers in forms a JSON value
        // would rewrite, and spacing: none of it may change.
        let json = concat!(
            r#"{"id":"evt_00ff","type":"order.created","sequence":42,"#,
            r#""created_at":"2027-01-04T10:00:00.000Z","data":{"note":"caf\u00e9 \"b\" é","#,
            r#""price":1.0,"big":1e3, "tab":"\t"}}"#
        );
        let record = EventRecord {
            event_type: "order.created".into(),
            created_at_ms: 1_799_056_800_000,
            body: EventBody::Json(json.as_bytes().to_vec()),
        };
        let line = EventLine::from_record("shop", 42, record.clone()).unwrap();
        let Line::Event(back) = reads_back(Line::Event(line)) else {
            panic!("an event line reads back as another kind")
        };
        let stored = back.into_record().unwrap();
        assert_eq!(
            stored.body,
            EventBody::Json(json.as_bytes().to_vec()),
            "the event's bytes changed"
        );
        assert_eq!(stored, record);
        assert!(
            EventLine::from_record(
                "shop",
                1,
                EventRecord {
                    body: EventBody::Json(vec![0xff]),
                    ..record
                }
            )
            .is_err(),
            "JSON that is not text is no event"
        );
    }
}
