//! Pages of a webstore's events for `GET /v1/events`: the events after an opaque cursor,
//! oldest first, up to the webstore's watermark (see [`super::sequence`]), of the types
//! asked for, each page looking at a bounded number of events ([`SCAN_BUDGET`]). A cursor names its webstore and a position, so that one webstore's cursor is
//! refused by another's feed, and a position the retention sweep has passed is refused too:
//! the events right after it are gone. Positions are sequence numbers, which a restart, a
//! failover or a move keeps, so a cursor stays good across them.
//!
//! Must not touch: HTTP (the front end renders a page and decides statuses).

use base64::Engine;

use super::EventType;
use crate::domain::fields::{parse_digits, FieldErrors, INVALID, NOT_AN_INTEGER, NOT_IN_LIST};
use crate::store::{Store, StoreError};

/// The most events a page holds.
pub const MAX_LIMIT: usize = 1_000;
/// The events a page holds when the request does not say.
pub const DEFAULT_LIMIT: usize = 100;
/// The most events a page looks at, of any type: a page whose `type` matches few of them
/// ends there, with the position it reached, rather than read the whole retention window
/// while it holds its admission slot. Twice a full page, so that an unfiltered page is
/// never cut short by it.
pub const SCAN_BUDGET: usize = 2 * MAX_LIMIT;

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

/// One page of events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The events, each its JSON object as delivered, oldest first.
    pub events: Vec<Vec<u8>>,
    /// Where the next page starts: the last position this page looked at (past events of
    /// other types too), or the position it was asked from.
    pub next: u64,
    /// Whether the feed holds events after `next` now: the page ended because it was full
    /// or had looked at [`SCAN_BUDGET`] events, not because it reached the newest.
    pub more: bool,
}

/// The events of `webstore_id` after position `after` (from the oldest kept without one)
/// and up to `watermark`, of `types` (every type when empty), at most `limit`, looking at
/// no more than [`SCAN_BUDGET`] events of any type.
pub fn page(
    store: &Store,
    webstore_id: &str,
    after: Option<u64>,
    watermark: u64,
    types: &[EventType],
    limit: usize,
) -> Result<Result<Page, CursorError>, StoreError> {
    let pruned = store.events_pruned_through(webstore_id)?;
    let from = match after {
        Some(after) if after < pruned => {
            return Ok(Err(CursorError::Expired { oldest: pruned }));
        }
        Some(after) => after,
        None => pruned,
    };
    let limit = limit.clamp(1, MAX_LIMIT);
    let mut events = Vec::new();
    let mut next = from;
    let mut damaged = None;
    let mut looked_at = 0;
    let mut more = false;
    store.for_each_event(webstore_id, from, watermark, &mut |sequence, record| {
        // One event past a full page or the budget: it says there are more, and is left
        // for the next page.
        if events.len() >= limit || looked_at >= SCAN_BUDGET {
            more = true;
            return false;
        }
        looked_at += 1;
        next = sequence;
        let wanted = types.is_empty()
            || EventType::parse(&record.event_type).is_some_and(|kind| types.contains(&kind));
        if wanted {
            match super::json::render_event(sequence, &record) {
                Ok(json) => events.push(json),
                Err(source) => {
                    damaged = Some(StoreError::Corrupt {
                        key: format!("event {sequence} of webstore {webstore_id}"),
                        source,
                    });
                    return false;
                }
            }
        }
        true
    })?;
    if let Some(error) = damaged {
        return Err(error);
    }
    Ok(Ok(Page { events, next, more }))
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

    /// A store holding `count` `order.created` events of `shop`, numbered from 1.
    fn store_of_orders(dir: &std::path::Path, count: u64) -> Store {
        let store = Store::open_for_test(dir);
        for first in (1..=count).step_by(500) {
            let mut batch = crate::store::WriteBatch::default();
            for sequence in first..(first + 500).min(count + 1) {
                let record = crate::store::kinds::events::EventRecord {
                    event_type: EventType::OrderCreated.name().to_owned(),
                    created_at_ms: 0,
                    body: crate::store::kinds::events::EventBody::Json(
                        format!("{{\"sequence\":{sequence}}}").into_bytes(),
                    ),
                };
                crate::store::add_event_record(&mut batch, "shop", sequence, &record);
            }
            store.apply(batch).unwrap();
        }
        store
    }

    #[test]
    fn a_page_whose_type_matches_nothing_ends_once_it_has_looked_at_its_budget() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_of_orders(dir.path(), 2_500);
        let wanted = [EventType::CustomerCreated];
        let first = page(&store, "shop", None, 2_500, &wanted, MAX_LIMIT)
            .unwrap()
            .unwrap();
        assert_eq!(
            (first.events.len(), first.next, first.more),
            (0, SCAN_BUDGET as u64, true),
            "an empty page that says where it stopped"
        );
        let second = page(&store, "shop", Some(first.next), 2_500, &wanted, MAX_LIMIT)
            .unwrap()
            .unwrap();
        assert_eq!(
            (second.events.len(), second.next, second.more),
            (0, 2_500, false)
        );
        let at_the_end = page(&store, "shop", Some(2_500), 2_500, &wanted, 1)
            .unwrap()
            .unwrap();
        assert_eq!((at_the_end.next, at_the_end.more), (2_500, false));
    }

    #[test]
    fn a_full_page_says_there_are_more_and_the_last_page_that_there_are_none() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_of_orders(dir.path(), 2_500);
        let full = page(&store, "shop", None, 2_500, &[], MAX_LIMIT)
            .unwrap()
            .unwrap();
        assert_eq!(
            (full.events.len(), full.next, full.more),
            (MAX_LIMIT, 1_000, true)
        );
        let last = page(&store, "shop", Some(2_000), 2_500, &[], MAX_LIMIT)
            .unwrap()
            .unwrap();
        assert_eq!(
            (last.events.len(), last.next, last.more),
            (500, 2_500, false)
        );
        let below_the_watermark = page(&store, "shop", Some(2_000), 2_100, &[], 100)
            .unwrap()
            .unwrap();
        assert_eq!(
            (below_the_watermark.next, below_the_watermark.more),
            (2_100, false),
            "events past the watermark are not there yet"
        );
    }

    proptest! {
        #[test]
        fn cursors_read_back(webstore in "[a-z0-9-]{1,20}", sequence in any::<u64>()) {
            prop_assert_eq!(position(&webstore, &cursor(&webstore, sequence)), Ok(sequence));
        }
    }
}
