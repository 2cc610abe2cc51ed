//! Events read ahead for one webhook endpoint: one range read of the store gives the
//! endpoint's task up to [`READ_AHEAD`] events, each read (and copied out of the log's
//! waiting writes) once, instead of a range read for each delivery, which behind a flood
//! copied a window of events to use one. It follows the endpoint's position: delivered
//! events are dropped, and a position moved back (an operator's redelivery) or past what
//! was read (the retention's mark) reads again from there. Events up to the watermark it
//! is given are settled (durable or given up), so what it has read never changes.
//!
//! Must not touch: the position itself (the endpoint's task owns it), the store's layout.

use std::collections::VecDeque;

use bytes::Bytes;

use crate::domain::event_types::EventType;
use crate::events::json::render_event;
use crate::store::codec::CodecError;
use crate::store::kinds::events::EventRecord;
use crate::store::{Store, StoreError};

/// How many events one read ahead takes at most.
const READ_AHEAD: usize = 128;

/// One endpoint's events read ahead: every stored event after `after` up to `through`, in
/// order, less those already delivered.
#[derive(Default)]
pub(super) struct ReadAhead {
    after: u64,
    through: u64,
    events: VecDeque<Ready>,
}

/// An event as its deliveries use it: its type read once, its body shared (not copied) from
/// the read ahead into each attempt's request.
#[derive(Clone)]
pub(super) struct Ready {
    pub(super) sequence: u64,
    pub(super) kind: Option<EventType>,
    pub(super) created_at_ms: i64,
    pub(super) json: Bytes,
}

impl Ready {
    /// The event, rendered once for all of its attempts.
    fn new(sequence: u64, record: EventRecord) -> Result<Ready, CodecError> {
        Ok(Ready {
            sequence,
            kind: EventType::parse(&record.event_type),
            created_at_ms: record.created_at_ms,
            json: Bytes::from(render_event(sequence, &record)?),
        })
    }
}

impl ReadAhead {
    /// Makes it start right after `position`: what it holds up to there is dropped, and all
    /// of it if `position` is outside what it covers (an operator's redelivery moved the
    /// position back, or the retention sweep forward past it).
    pub(super) fn start_after(&mut self, position: u64) {
        if position < self.after || position > self.through {
            *self = ReadAhead {
                after: position,
                through: position,
                events: VecDeque::new(),
            };
            return;
        }
        while self
            .events
            .front()
            .is_some_and(|event| event.sequence <= position)
        {
            self.events.pop_front();
        }
        self.after = position;
    }

    /// Reads up to [`READ_AHEAD`] events after what it covers, up to `watermark`, if it holds
    /// none.
    pub(super) fn fill(
        &mut self,
        store: &Store,
        webstore_id: &str,
        watermark: u64,
    ) -> Result<(), StoreError> {
        if !self.events.is_empty() || self.through >= watermark {
            return Ok(());
        }
        let mut through = watermark;
        let events = &mut self.events;
        // An event that cannot be read (or rendered) is passed over, named by the store: the
        // endpoint gets the rest in order.
        store.for_each_event_passing_over(
            webstore_id,
            self.through,
            watermark,
            &mut |sequence, record| {
                let Some(record) = record else {
                    return true;
                };
                match Ready::new(sequence, record) {
                    Ok(ready) => {
                        events.push_back(ready);
                        if events.len() >= READ_AHEAD {
                            through = sequence;
                            return false;
                        }
                    }
                    Err(source) => drop(store.unreadable().note(StoreError::Corrupt {
                        key: format!("event {sequence} of webstore {webstore_id}"),
                        source,
                    })),
                }
                true
            },
        )?;
        self.through = through;
        Ok(())
    }

    /// The first event it holds: the next after the position it was last started after.
    pub(super) fn front(&self) -> Option<&Ready> {
        self.events.front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{add_event_record, WriteBatch};

    fn event(sequence: u64) -> EventRecord {
        EventRecord {
            event_type: if sequence.is_multiple_of(3) {
                "customer.created".into()
            } else {
                "order.created".into()
            },
            created_at_ms: sequence as i64,
            body: crate::store::kinds::events::EventBody::Json(
                format!(r#"{{"id":"evt_{sequence:032x}","sequence":{sequence}}}"#).into_bytes(),
            ),
        }
    }

    /// A store whose webstore `shop` has events 1 to 300 but for the given-up 50 to 60.
    fn store_with_holes(dir: &std::path::Path) -> Store {
        let store = Store::open_for_test(dir);
        let mut batch = WriteBatch::default();
        for sequence in (1..=300).filter(|s| !(50..=60).contains(s)) {
            add_event_record(&mut batch, "shop", sequence, &event(sequence));
        }
        store.apply(batch).unwrap();
        store
    }

    /// The sequences a reader that delivers everything from `after` gets through a read
    /// ahead, moving its position one delivery at a time.
    fn delivered_from(store: &Store, ahead: &mut ReadAhead, after: u64, upto: u64) -> Vec<u64> {
        let mut position = after;
        let mut seen = Vec::new();
        loop {
            ahead.start_after(position);
            ahead.fill(store, "shop", upto).unwrap();
            let Some(next) = ahead.front() else {
                return seen;
            };
            assert_eq!(
                next.json,
                Bytes::from(render_event(next.sequence, &event(next.sequence)).unwrap())
            );
            seen.push(next.sequence);
            position = next.sequence;
        }
    }

    #[test]
    fn a_read_ahead_gives_every_stored_event_once_in_order_across_holes_and_windows() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_holes(dir.path());
        let all: Vec<u64> = (1..=300).filter(|s| !(50..=60).contains(s)).collect();
        let mut ahead = ReadAhead::default();
        assert_eq!(delivered_from(&store, &mut ahead, 0, 300), all);
        // Up to a lower watermark first, then the rest once it rises.
        let mut ahead = ReadAhead::default();
        let first = delivered_from(&store, &mut ahead, 0, 170);
        assert_eq!(first, all[..all.iter().position(|&s| s > 170).unwrap()]);
        let rest = delivered_from(&store, &mut ahead, 170, 300);
        assert_eq!([first, rest].concat(), all);
    }

    #[test]
    fn a_position_moved_back_or_past_what_was_read_reads_again_from_there() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_holes(dir.path());
        let mut ahead = ReadAhead::default();
        ahead.start_after(100);
        ahead.fill(&store, "shop", 300).unwrap();
        assert_eq!(ahead.front().map(|e| e.sequence), Some(101));
        // An operator's redelivery from 20: everything after it again.
        let again = delivered_from(&store, &mut ahead, 20, 300);
        assert_eq!(again.first(), Some(&21));
        assert_eq!(again.len(), 300 - 20 - 11);
        // The retention sweep's mark far ahead: from there.
        let mut ahead = ReadAhead::default();
        ahead.start_after(0);
        ahead.fill(&store, "shop", 300).unwrap();
        assert_eq!(
            delivered_from(&store, &mut ahead, 290, 300),
            (291..=300).collect::<Vec<_>>()
        );
    }
}
