//! What a request for a page of a webstore's events asks (`GET /v1/events`: `after`, `type`,
//! `limit`), and the feed's cursors: opaque to clients, each names its webstore and a
//! position (a sequence number, which a restart, a failover or a move keeps), so that one
//! webstore's cursor is refused by another's feed. Pure, so that the front end may parse a
//! request before it asks the service for the page (`crate::events::feed` reads it).
//!
//! Must not touch: the store, HTTP (the front end decides statuses).

use base64::Engine;

use super::event_types::EventType;
use super::fields::{parse_digits, FieldErrors, INVALID, NOT_AN_INTEGER, NOT_IN_LIST};

/// The most events a page holds.
pub const MAX_LIMIT: usize = 1_000;
/// The events a page holds when the request does not say.
pub const DEFAULT_LIMIT: usize = 100;
/// Why a cursor is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CursorError {
    /// It is not a cursor this service gave out.
    Malformed,
    /// It is another webstore's.
    OtherWebstore,
    /// The events right after it are past the retention and removed.
    Expired {
        /// The first position a cursor may have now.
        oldest: u64,
    },
}

/// The cursor of position `sequence` in `webstore_id`'s events: opaque to clients.
pub fn cursor(webstore_id: &str, sequence: u64) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{webstore_id}\n{sequence}"))
}

/// The position a cursor names in `webstore_id`'s events.
pub fn position(webstore_id: &str, cursor: &str) -> Result<u64, CursorError> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor.trim())
        .map_err(|_| CursorError::Malformed)?;
    let text = String::from_utf8(bytes).map_err(|_| CursorError::Malformed)?;
    let (webstore, sequence) = text.split_once('\n').ok_or(CursorError::Malformed)?;
    let sequence: u64 = sequence.parse().map_err(|_| CursorError::Malformed)?;
    if webstore != webstore_id {
        return Err(CursorError::OtherWebstore);
    }
    Ok(sequence)
}

/// What a request for a page asks, read from its parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// The position after which the page starts (`None`: from the oldest kept), or the
    /// cursor's refusal.
    pub after: Result<Option<u64>, CursorError>,
    /// The types wanted; every type when empty.
    pub types: Vec<EventType>,
    /// The most events the page holds.
    pub limit: usize,
}

impl Query {
    /// Reads `after` (a cursor), `type` (names, comma-separated) and `limit` (1 to
    /// [`MAX_LIMIT`]) for `webstore_id`'s feed; every malformed one is named. A cursor of
    /// another webstore is not malformed: it is refused afterwards, with its own answer.
    pub fn parse(
        webstore_id: &str,
        after: Option<&str>,
        types: Option<&str>,
        limit: Option<&str>,
    ) -> Result<Query, FieldErrors> {
        let mut errors = FieldErrors::new();
        let after = match after.map(|text| position(webstore_id, text)).transpose() {
            Err(CursorError::Malformed) => {
                errors.add("after", INVALID);
                Ok(None)
            }
            other => other,
        };
        let mut wanted = Vec::new();
        for name in types.unwrap_or_default().split(',').map(str::trim) {
            match EventType::parse(name) {
                Some(kind) if !wanted.contains(&kind) => wanted.push(kind),
                Some(_) => {}
                None if name.is_empty() => {}
                None => errors.add("type", NOT_IN_LIST),
            }
        }
        let limit = match limit {
            None => DEFAULT_LIMIT,
            Some(text) => match parse_digits(text) {
                Some(n) if (1..=MAX_LIMIT as u64).contains(&n) => n as usize,
                Some(_) => {
                    errors.add("limit", format!("must be between 1 and {MAX_LIMIT}"));
                    DEFAULT_LIMIT
                }
                // Digits too many for a number are still a number out of range.
                None if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) => {
                    errors.add("limit", format!("must be between 1 and {MAX_LIMIT}"));
                    DEFAULT_LIMIT
                }
                None => {
                    errors.add("limit", NOT_AN_INTEGER);
                    DEFAULT_LIMIT
                }
            },
        };
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Query {
            after,
            types: wanted,
            limit,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_cursor_is_refused_by_another_webstore_and_when_it_is_not_one() {
        let given = cursor("shop", 42);
        assert_eq!(position("shop", &given), Ok(42));
        assert_eq!(position("other", &given), Err(CursorError::OtherWebstore));
        for wrong in ["", "!!", "c2hvcA", "c2hvcAp4"] {
            assert_eq!(
                position("shop", wrong),
                Err(CursorError::Malformed),
                "{wrong}"
            );
        }
    }

    #[test]
    fn every_malformed_parameter_is_named() {
        let errors =
            Query::parse("shop", Some("!!"), Some("order.created,nope"), Some("0")).unwrap_err();
        assert!(errors.has("after") && errors.has("type") && errors.has("limit"));
        let errors = Query::parse("shop", None, None, Some("ten")).unwrap_err();
        assert!(errors.has("limit") && !errors.has("after"));
        let huge = Query::parse("shop", None, None, Some("99999999999999999999999")).unwrap_err();
        assert_eq!(
            huge,
            FieldErrors::single("limit", "must be between 1 and 1000")
        );
        let query = Query::parse(
            "shop",
            Some(&cursor("other", 3)),
            Some("order.created, customer.created,order.created"),
            Some("1000"),
        )
        .unwrap();
        assert_eq!(query.after, Err(CursorError::OtherWebstore));
        assert_eq!(
            query.types,
            vec![EventType::OrderCreated, EventType::CustomerCreated]
        );
        assert_eq!(query.limit, 1000);
        let query = Query::parse("shop", None, None, None).unwrap();
        assert_eq!(
            (query.after, query.types.len(), query.limit),
            (Ok(None), 0, DEFAULT_LIMIT)
        );
    }

    proptest! {
        #[test]
        fn cursors_read_back(webstore in "[a-z0-9-]{1,20}", sequence in any::<u64>()) {
            prop_assert_eq!(position(&webstore, &cursor(&webstore, sequence)), Ok(sequence));
        }
    }
}
