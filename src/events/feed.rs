//! Reading pages of a webstore's events for `GET /v1/events`: the events after a position,
//! oldest first, up to the webstore's watermark (see [`super::sequence`]), of the types
//! asked for, each page looking at a bounded number of events ([`SCAN_BUDGET`]). A position
//! the retention sweep has passed is refused: the events right after it are gone. What a
//! request asks, and the cursors, are parsed by [`crate::domain::event_feed`], which is pure;
//! the front end asks the service for the page, never this module.
//!
//! Must not touch: HTTP (the front end renders a page and decides statuses), cursors' text.

use super::EventType;
use crate::domain::event_feed::{CursorError, MAX_LIMIT};
use crate::store::{Store, StoreError};

/// The most events a page looks at, of any type: a page whose `type` matches few of them
/// ends there, with the position it reached, rather than read the whole retention window
/// while it holds its admission slot. Twice a full page, so that an unfiltered page is
/// never cut short by it.
pub const SCAN_BUDGET: usize = 2 * MAX_LIMIT;

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
    let mut looked_at = 0;
    let mut more = false;
    store.for_each_event_passing_over(webstore_id, from, watermark, &mut |sequence, record| {
        // One event past a full page or the budget: it says there are more, and is left
        // for the next page.
        if events.len() >= limit || looked_at >= SCAN_BUDGET {
            more = true;
            return false;
        }
        looked_at += 1;
        next = sequence;
        // An event that cannot be read is passed over (the store named it).
        let Some(record) = record else {
            return true;
        };
        let wanted = types.is_empty()
            || EventType::parse(&record.event_type).is_some_and(|kind| types.contains(&kind));
        if wanted {
            match super::json::render_event(sequence, &record) {
                Ok(json) => events.push(json),
                Err(source) => drop(store.unreadable().note(StoreError::Corrupt {
                    key: format!("event {sequence} of webstore {webstore_id}"),
                    source,
                })),
            }
        }
        true
    })?;
    Ok(Ok(Page { events, next, more }))
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn an_event_that_cannot_be_read_is_passed_over_named_and_swept_away_with_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_of_orders(dir.path(), 5);
        let damaged = crate::store::pending::event_chunks::event_key("shop", 3);
        store
            .put_raw(&damaged, b"BXS\x01\x00\x01garbage".to_vec())
            .unwrap();
        let read = page(&store, "shop", None, 5, &[], MAX_LIMIT)
            .unwrap()
            .unwrap();
        let numbers: Vec<_> = read
            .events
            .iter()
            .map(|json| {
                serde_json::from_slice::<serde_json::Value>(json).unwrap()["sequence"].clone()
            })
            .collect();
        assert_eq!(numbers, [1, 2, 4, 5].map(serde_json::Value::from));
        assert_eq!((read.next, read.more), (5, false));
        let named = store.unreadable().keys();
        assert_eq!(named.len(), 1, "{named:?}");
        // Reading it again names it no second time.
        page(&store, "shop", None, 5, &[], MAX_LIMIT)
            .unwrap()
            .unwrap();
        assert_eq!(store.unreadable().keys(), named);
        // The retention sweep removes it with the events around it instead of stopping.
        let mut removed = 0;
        for _ in 0..10 {
            match store.prune_events("shop", i64::MAX, 1_024).unwrap() {
                0 => break,
                count => removed += count,
            }
        }
        assert_eq!(removed, 5);
        assert_eq!(store.events_pruned_through("shop").unwrap(), 5);
    }
}
