//! A customer's halts: while a customer is halted, none of their orders is delivered. A
//! halt starts on the first date not locked when the producer (or a cart) halts the
//! customer, and ends on the first date not locked when the halt is lifted; the dates are
//! kept as intervals, never a flag, so that the lists of locked dates never change whatever
//! is done later.
//!
//! This file owns the intervals and the `halted` field of a customer change. Pure: the first
//! open date is given (`cutoff::Cutoff::first_open_day`). Must not touch: orders (their
//! histories ask [`Halts::on`] for a date), the customer's other fields.

use super::day::Day;
use super::fields::{boolean, Field};

/// The message for a `halted` that is not a boolean.
pub const NOT_A_BOOLEAN: &str = "must be true or false";

/// One halt: from `from` (included) until `until` (excluded), or on while `until` is `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HaltSpan {
    /// The first date not delivered.
    pub from: Day,
    /// The first date delivered again, if the halt has ended.
    pub until: Option<Day>,
}

impl HaltSpan {
    fn covers(&self, d: Day) -> bool {
        self.from <= d && self.until.is_none_or(|until| d < until)
    }
}

/// A customer's halts, oldest first: disjoint, non-empty, none touching the next, only the
/// last one possibly on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Halts(Vec<HaltSpan>);

impl Halts {
    /// Never halted.
    pub fn none() -> Halts {
        Halts::default()
    }

    /// Halts as stored, checked: `Err` names the broken rule.
    pub fn from_spans(spans: Vec<HaltSpan>) -> Result<Halts, &'static str> {
        for (i, span) in spans.iter().enumerate() {
            match (span.until, spans.get(i + 1)) {
                (Some(until), _) if until <= span.from => {
                    return Err("a halt ends before it starts")
                }
                (Some(until), Some(next)) if next.from <= until => {
                    return Err("halts overlap, touch or are out of order")
                }
                (None, Some(_)) => return Err("only the last halt may be on"),
                _ => {}
            }
        }
        Ok(Halts(spans))
    }

    /// The spans, oldest first (what the store keeps).
    pub fn spans(&self) -> &[HaltSpan] {
        &self.0
    }

    /// Whether the customer is halted now: `halted?` in the API (the halt may start on a
    /// date still to come, the first open date when it was asked for).
    pub fn is_halted(&self) -> bool {
        self.0.last().is_some_and(|span| span.until.is_none())
    }

    /// The halt covering date `d`, if any. O(log halts).
    pub fn on(&self, d: Day) -> Option<&HaltSpan> {
        let after = self.0.partition_point(|span| span.from <= d);
        after
            .checked_sub(1)
            .map(|at| &self.0[at])
            .filter(|span| span.covers(d))
    }

    /// The halts without those that only dates in `[since, before)` need (dates whose lists
    /// are frozen): a halt that began on or after `since` and ended by `before`. Every date
    /// from `before` on is halted as before, so a customer halted and let go again and again
    /// keeps only the halts its open dates and the dates before `since` need.
    pub fn folded(&self, since: Day, before: Day) -> Halts {
        Halts(
            self.0
                .iter()
                .filter(|span| !(span.from >= since && span.until.is_some_and(|u| u <= before)))
                .copied()
                .collect(),
        )
    }

    /// The halts after halting (`true`) or lifting the halt (`false`) from `open`, the first
    /// date not locked. A date before `open`, or before the latest start or end already
    /// kept, never changes: the change takes effect from the latest of them. Asking for
    /// what already holds changes nothing.
    pub fn set(&self, halted: bool, open: Day) -> Halts {
        let mut spans = self.0.clone();
        let settled = spans.last().map_or(open, |span| {
            let boundary = span.until.unwrap_or(span.from);
            open.max(boundary)
        });
        match (halted, spans.last_mut()) {
            (true, Some(last)) if last.until.is_none() => {}
            // Halted again from the very date the last halt ended: one halt, on again.
            (true, Some(last)) if last.until == Some(settled) => last.until = None,
            (true, _) => spans.push(HaltSpan {
                from: settled,
                until: None,
            }),
            (false, Some(last)) if last.until.is_none() => {
                if last.from >= settled {
                    // It has not started on any locked date: as if never asked for.
                    spans.pop();
                } else {
                    last.until = Some(settled);
                }
            }
            (false, _) => {}
        }
        Halts(spans)
    }
}

/// Reads a customer change's `halted`: `true` or `false` (also as the strings), `None`
/// when absent; anything else, `null` included, is refused with [`NOT_A_BOOLEAN`].
pub fn parse_halted(value: Field<'_>) -> Result<Option<bool>, &'static str> {
    match value {
        Field::Absent => Ok(None),
        Field::Null => Err(NOT_A_BOOLEAN),
        Field::Present(value) => boolean(value).map(Some).ok_or(NOT_A_BOOLEAN),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn folding_keeps_every_date_from_the_fold_on() {
        let mut halts = Halts::none();
        for n in 0..50 {
            halts = halts.set(n % 2 == 0, Day(10 * n));
        }
        let folded = halts.folded(Day(0), Day(305));
        assert!(folded.spans().len() < halts.spans().len());
        for d in 305..600 {
            assert_eq!(folded.on(Day(d)), halts.on(Day(d)), "{d}");
        }
        assert_eq!(folded.is_halted(), halts.is_halted());
        assert_eq!(
            halts.folded(Day(1000), Day(2000)),
            halts,
            "nothing before since"
        );
    }

    #[test]
    fn halting_and_lifting_keep_every_locked_date_as_it_was() {
        let halts = Halts::none().set(true, Day(10));
        assert!(halts.is_halted());
        assert_eq!(halts.on(Day(9)), None);
        assert!(halts.on(Day(10)).is_some() && halts.on(Day(1000)).is_some());
        // Lifted once days 10..14 are locked: they stay halted.
        let lifted = halts.set(false, Day(15));
        assert!(!lifted.is_halted());
        assert!(lifted.on(Day(14)).is_some());
        assert_eq!(lifted.on(Day(15)), None);
        // Halted again: a second span. Halted again from the day it ended: the same span.
        let again = lifted.set(true, Day(20));
        assert_eq!(again.spans().len(), 2);
        assert_eq!(lifted.set(true, Day(15)).spans().len(), 1);
        // Lifted before it started on any locked date: gone.
        assert_eq!(
            Halts::none().set(true, Day(10)).set(false, Day(10)),
            Halts::none()
        );
        // Asking for what holds changes nothing.
        assert_eq!(halts.set(true, Day(30)), halts);
        assert_eq!(lifted.set(false, Day(30)), lifted);
    }

    #[test]
    fn a_clock_set_back_cannot_reach_before_a_kept_boundary() {
        let halts = Halts::none().set(true, Day(10)).set(false, Day(15));
        let again = halts.set(true, Day(12));
        assert!(again.on(Day(12)).is_some() && again.on(Day(9)).is_none());
        assert!(
            again.on(Day(15)).is_some(),
            "from the boundary kept, not from day 12"
        );
        assert_eq!(again.spans().len(), 1);
        let on = Halts::none().set(true, Day(10));
        assert_eq!(
            on.set(false, Day(5)),
            Halts::none(),
            "not on any locked date yet"
        );
    }

    #[test]
    fn stored_spans_are_checked() {
        let span = |from, until: Option<i32>| HaltSpan {
            from: Day(from),
            until: until.map(Day),
        };
        assert!(Halts::from_spans(vec![span(1, Some(3)), span(4, None)]).is_ok());
        for bad in [
            vec![span(3, Some(3))],
            vec![span(1, Some(3)), span(3, None)],
            vec![span(1, None), span(5, None)],
            vec![span(5, Some(6)), span(1, Some(2))],
        ] {
            assert!(Halts::from_spans(bad.clone()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn halted_takes_booleans_only() {
        assert_eq!(parse_halted(Field::Absent), Ok(None));
        assert_eq!(parse_halted(Field::Present(&json!(true))), Ok(Some(true)));
        assert_eq!(
            parse_halted(Field::Present(&json!("false"))),
            Ok(Some(false))
        );
        for bad in [json!(1), json!("yes"), json!([]), json!({})] {
            assert_eq!(
                parse_halted(Field::Present(&bad)),
                Err(NOT_A_BOOLEAN),
                "{bad}"
            );
        }
        assert_eq!(parse_halted(Field::Null), Err(NOT_A_BOOLEAN));
    }
}
