//! An order's history, and what goes out on a date. An order that lives changes: its box,
//! extras or schedule from some date on, a pause, skipped dates, a cancellation. Each is kept
//! as a *version* in force from a date, never by overwriting, so that the deliveries of a
//! date are a function of the versions in force on that date, and a date whose list is
//! locked (`cutoff`) keeps its list whatever is done later: every change takes effect from
//! the first open date or later (`order_patch` makes the changes).
//!
//! - [`ContentVersion`]: what is delivered (an [`OrderContent`]: box, extras, exclusions,
//!   substitutions, frequency and schedule), from its `effective` date until the next
//!   version's.
//! - [`LifecycleVersion`]: whether it is delivered ([`Lifecycle`]: cancellation, pause,
//!   skipped dates), from its `effective` date until the next version's; before the first,
//!   the order is active, unpaused, with nothing skipped.
//!
//! [`OrderHistory::on`] answers for one date in O(log versions), plus, for an order whose
//! extras come once, a walk over the blocked dates between the extras' first date and the
//! date asked (skips, pauses, halts, version boundaries: O(versions), never O(dates)).
//!
//! Pure data and functions. Must not touch: the refusal rules of a change (`change`), the
//! cut-off's arithmetic (`cutoff`), the customer's halts (`halts`, passed in), storage.

use super::content::{ExtraLine, OrderContent};
use super::schedule::Frequency;
use crate::domain::day::Day;
use crate::domain::halts::Halts;

/// Most dates an order's `skipped_dates` may hold.
pub const MAX_SKIPPED_DATES: usize = 100;

/// Most content versions an order may plan from the first open date on: a change that
/// would plan more is refused (the versions before are folded away once their dates are
/// frozen, [`OrderHistory::folded`], so these and the one in force bound the record).
pub const MAX_PLANNED_VERSIONS: usize = 32;

/// The `settled_before` of an order never changed: no date is settled by a change.
pub const NEVER_CHANGED: Day = Day(i32::MIN);

/// The `extras_since` of a content version whose one-off extras went out on a date the
/// history no longer holds (the calendar's last day, 9999-12-31, which no delivery reaches
/// and every export writes as a date) (folded into that date's frozen list, [`OrderHistory::folded`]):
/// they never go again with it.
pub const EXTRAS_SENT: Day = Day(2_932_896);

/// What an order delivers from `effective` until the next content version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContentVersion {
    /// The first date it is in force.
    pub effective: Day,
    /// Box, extras, exclusions, substitutions, frequency and schedule.
    pub content: OrderContent,
    /// Where its one-off extras count from: the effective date of the version where
    /// `extras` or `extras_one_off` were last given (an earlier version carried on, or this
    /// one). Extras that come once come with the first delivery from this date, so a change
    /// of box alone does not send them again.
    pub extras_since: Day,
}

/// A pause: no delivery on dates `d` with `from <= d < until`, or from `from` on while
/// `until` is `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pause {
    /// `pause_date`: the first date not delivered.
    pub from: Day,
    /// `resume_date`: the first date delivered again, if given.
    pub until: Option<Day>,
}

impl Pause {
    fn covers(&self, d: Day) -> bool {
        self.from <= d && self.until.is_none_or(|until| d < until)
    }
}

/// Whether an order delivers: the fields `active`, `cancel_date`, `pause_date`,
/// `resume_date` and `skipped_dates` of its answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Lifecycle {
    /// `cancel_date`: the first date not delivered once cancelled; `None` while `active`.
    pub cancel_date: Option<Day>,
    /// The pause, if any.
    pub pause: Option<Pause>,
    /// `skipped_dates`: sorted, distinct, at most [`MAX_SKIPPED_DATES`].
    pub skipped_dates: Vec<Day>,
}

impl Lifecycle {
    /// An active order, neither paused nor skipping: every order's state before its first
    /// lifecycle version.
    pub const ACTIVE: Lifecycle = Lifecycle {
        cancel_date: None,
        pause: None,
        skipped_dates: Vec::new(),
    };

    /// `active` in the answer.
    pub fn active(&self) -> bool {
        self.cancel_date.is_none()
    }

    /// Why a scheduled date `d` is not delivered under this state, if it is not (without
    /// the customer's halts).
    fn withholds(&self, d: Day) -> Option<Withheld> {
        if self.cancel_date.is_some_and(|cancel| cancel <= d) {
            Some(Withheld::Cancelled)
        } else if self.pause.is_some_and(|pause| pause.covers(d)) {
            Some(Withheld::Paused)
        } else if self.skipped_dates.binary_search(&d).is_ok() {
            Some(Withheld::Skipped)
        } else {
            None
        }
    }
}

static ACTIVE: Lifecycle = Lifecycle::ACTIVE;

/// The lifecycle in force on `d` among `lifecycles` (sorted by their effective dates).
fn lifecycle_on(lifecycles: &[LifecycleVersion], d: Day) -> &Lifecycle {
    let after = lifecycles.partition_point(|v| v.effective <= d);
    after
        .checked_sub(1)
        .map_or(&ACTIVE, |at| &lifecycles[at].lifecycle)
}

/// Why an order is not delivered on `d`, a date its schedule in force then delivers on, from
/// its lifecycle versions (an order's [`OrderHistory::lifecycles`]) and its customer's
/// `halts` alone: what [`OrderHistory::on`] answers for such a date, without reading the
/// order's content. O(log versions). The delivery lists sort by this, their index knowing
/// the schedules.
pub fn withheld_on_scheduled(
    lifecycles: &[LifecycleVersion],
    d: Day,
    halts: &Halts,
) -> Option<Withheld> {
    match lifecycle_on(lifecycles, d).withholds(d) {
        Some(Withheld::Cancelled) => Some(Withheld::Cancelled),
        _ if halts.on(d).is_some() => Some(Withheld::Halted),
        other => other,
    }
}

/// Whether an order delivers from `effective` until the next lifecycle version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LifecycleVersion {
    /// The first date it is in force: the first open date when it was made.
    pub effective: Day,
    /// The state.
    pub lifecycle: Lifecycle,
}

/// Why an order delivers nothing on a date. The app counts the regular deliveries of a day
/// withheld for each reason but the first ([`WithheldCounts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Withheld {
    /// The order's schedule (in force that date) has no delivery on it.
    NotScheduled,
    /// Cancelled from `cancel_date` (reported before any other reason).
    Cancelled,
    /// The customer is halted (reported before a pause or a skip).
    Halted,
    /// Within the pause (reported before a skip).
    Paused,
    /// One of the skipped dates.
    Skipped,
}

/// How many of a day's regular deliveries are withheld, by reason: what the producers'
/// day and week pages show beside the deliveries. A date outside an order's schedule is no
/// regular delivery and counts nowhere.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WithheldCounts {
    /// Within a pause.
    pub paused: u64,
    /// On a skipped date.
    pub skipped: u64,
    /// From the cancel date on.
    pub cancelled: u64,
    /// While the customer is halted.
    pub halted: u64,
}

impl WithheldCounts {
    /// Counts one delivery withheld for `reason`.
    pub fn count(&mut self, reason: Withheld) {
        match reason {
            Withheld::NotScheduled => {}
            Withheld::Cancelled => self.cancelled += 1,
            Withheld::Halted => self.halted += 1,
            Withheld::Paused => self.paused += 1,
            Withheld::Skipped => self.skipped += 1,
        }
    }

    /// The deliveries withheld for any reason.
    pub fn total(&self) -> u64 {
        self.paused + self.skipped + self.cancelled + self.halted
    }

    /// Both days' counts together.
    pub fn plus(self, other: WithheldCounts) -> WithheldCounts {
        WithheldCounts {
            paused: self.paused + other.paused,
            skipped: self.skipped + other.skipped,
            cancelled: self.cancelled + other.cancelled,
            halted: self.halted + other.halted,
        }
    }
}

/// What goes out for one order on one date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivery<'a> {
    /// The box.
    pub box_id: u64,
    /// The extras: every time, or with the first delivery only when they come once (empty
    /// otherwise).
    pub extras: &'a [ExtraLine],
    /// Excluded box items.
    pub exclusions: &'a [u64],
    /// Substitute box items.
    pub substitutions: &'a [u64],
}

impl Delivery<'_> {
    /// What goes out, owned.
    pub fn goods(&self) -> Goods {
        Goods {
            box_id: self.box_id,
            extras: self.extras.to_vec(),
            exclusions: self.exclusions.to_vec(),
            substitutions: self.substitutions.to_vec(),
        }
    }
}

/// What goes out for one order on one date, owned: the box, its exclusions and
/// substitutions, and of its extras those that go that day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Goods {
    /// The box.
    pub box_id: u64,
    /// The extras that go that day (none when they come once and went already).
    pub extras: Vec<ExtraLine>,
    /// Excluded box items.
    pub exclusions: Vec<u64>,
    /// Substitute box items.
    pub substitutions: Vec<u64>,
}

/// One delivery of an order, owned (what `GET /v1/orders/{id}/deliveries` lists).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderDelivery {
    /// The date.
    pub date: Day,
    /// What goes out.
    pub goods: Goods,
    /// Whether the date's list is locked for packing.
    pub locked: bool,
}

impl OrderHistory {
    /// The deliveries from `from` to `to` (both included), with `halts`; `locked` says of
    /// each date whether it is locked. One `on` per date: O(dates × log versions).
    pub fn deliveries(
        &self,
        from: Day,
        to: Day,
        halts: &Halts,
        locked: impl Fn(Day) -> bool,
    ) -> Vec<OrderDelivery> {
        let mut out = Vec::new();
        let mut d = from;
        while d <= to {
            if let Ok(delivery) = self.on(d, halts) {
                out.push(OrderDelivery {
                    date: d,
                    goods: delivery.goods(),
                    locked: locked(d),
                });
            }
            d = d.plus(1);
        }
        out
    }
}

/// An order's content and lifecycle versions, and when it last changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderHistory {
    /// Non-empty; `effective` strictly increasing.
    contents: Vec<ContentVersion>,
    /// `effective` strictly increasing.
    lifecycles: Vec<LifecycleVersion>,
    /// No date before it may change: the first open date of the latest change, kept so
    /// that a clock set back cannot reach a date once locked; [`NEVER_CHANGED`] until the
    /// first change.
    settled_before: Day,
    /// Unix seconds of the latest change (its creation until it changes).
    updated_at: i64,
}

impl OrderHistory {
    /// The history of a new order made at `created_at` (Unix seconds): its content from its
    /// start date, active.
    pub fn new(content: OrderContent, created_at: i64) -> OrderHistory {
        let start = content.schedule.start;
        OrderHistory {
            contents: vec![ContentVersion {
                effective: start,
                content,
                extras_since: start,
            }],
            lifecycles: Vec::new(),
            settled_before: NEVER_CHANGED,
            updated_at: created_at,
        }
    }

    /// Whether the order has never changed: one version from its start, active, never
    /// paused or skipped (a change always settles the dates before its first open one).
    pub fn is_unchanged(&self) -> bool {
        self.settled_before == NEVER_CHANGED
    }

    /// A history as stored, checked: `Err` names the broken rule.
    pub fn from_parts(
        contents: Vec<ContentVersion>,
        lifecycles: Vec<LifecycleVersion>,
        settled_before: Day,
        updated_at: i64,
    ) -> Result<OrderHistory, &'static str> {
        if contents.is_empty() {
            return Err("an order has at least one content version");
        }
        if !contents.windows(2).all(|w| w[0].effective < w[1].effective) {
            return Err("content versions are not in date order");
        }
        if !lifecycles
            .windows(2)
            .all(|w| w[0].effective < w[1].effective)
        {
            return Err("lifecycle versions are not in date order");
        }
        for version in &lifecycles {
            let skipped = &version.lifecycle.skipped_dates;
            if skipped.len() > MAX_SKIPPED_DATES || !skipped.windows(2).all(|w| w[0] < w[1]) {
                return Err("skipped dates are not sorted and distinct, or too many");
            }
            if version
                .lifecycle
                .pause
                .is_some_and(|p| p.until.is_some_and(|until| until <= p.from))
            {
                return Err("a pause ends before it starts");
            }
        }
        Ok(OrderHistory {
            contents,
            lifecycles,
            settled_before,
            updated_at,
        })
    }

    /// Builds a history whose invariants the caller (`change`) has kept.
    pub(super) fn from_checked(
        contents: Vec<ContentVersion>,
        lifecycles: Vec<LifecycleVersion>,
        settled_before: Day,
        updated_at: i64,
    ) -> OrderHistory {
        debug_assert!(
            OrderHistory::from_parts(
                contents.clone(),
                lifecycles.clone(),
                settled_before,
                updated_at
            )
            .is_ok(),
            "a change broke its history's rules"
        );
        OrderHistory {
            contents,
            lifecycles,
            settled_before,
            updated_at,
        }
    }

    /// The history without the versions that only dates in `[since, before)` need: dates
    /// whose lists are frozen (each date's deliveries kept as they were delivered), which
    /// this history no longer has to answer for. A version in force on `before` or later
    /// stays, and so does one that dates before `since` need; every date from `before` on
    /// delivers exactly as before (one-off extras that went out in the folded dates are kept
    /// as sent, [`EXTRAS_SENT`]). So an order changed every day stays as small as what it
    /// plans from `before` on, and what it had before `since`.
    pub fn folded(&self, since: Day, before: Day, halts: &Halts) -> OrderHistory {
        let inside = |effective: Day, next: Option<Day>| {
            effective >= since && next.is_some_and(|next| next <= before)
        };
        let mut contents: Vec<ContentVersion> = self
            .contents
            .iter()
            .enumerate()
            .filter(|(at, version)| {
                !inside(
                    version.effective,
                    self.contents.get(at + 1).map(|v| v.effective),
                )
            })
            .map(|(_, version)| version.clone())
            .collect();
        // One-off extras counted from a date before `before`: the walk to their first
        // delivery would cross versions no longer held, so it is taken now.
        for version in &mut contents {
            let since_extras = version.extras_since;
            if since_extras < before && since_extras != EXTRAS_SENT {
                version.extras_since =
                    match self.first_delivered(since_extras, before.plus(-1), halts) {
                        Some(_) => EXTRAS_SENT,
                        None => before,
                    };
            }
        }
        let lifecycles: Vec<LifecycleVersion> = self
            .lifecycles
            .iter()
            .enumerate()
            .filter(|(at, version)| {
                !inside(
                    version.effective,
                    self.lifecycles.get(at + 1).map(|v| v.effective),
                )
            })
            .map(|(_, version)| version.clone())
            .collect();
        OrderHistory {
            contents,
            lifecycles,
            settled_before: self.settled_before,
            updated_at: self.updated_at,
        }
    }

    /// The content versions, oldest first.
    pub fn contents(&self) -> &[ContentVersion] {
        &self.contents
    }

    /// The lifecycle versions, oldest first.
    pub fn lifecycles(&self) -> &[LifecycleVersion] {
        &self.lifecycles
    }

    /// No date before it may change any more.
    pub fn settled_before(&self) -> Day {
        self.settled_before
    }

    /// `updated_at`: Unix seconds of the latest change.
    pub fn updated_at(&self) -> i64 {
        self.updated_at
    }

    /// The latest content version: what the order's answer shows.
    pub fn latest(&self) -> &ContentVersion {
        // Never empty: `new` makes one and `from_parts` refuses none.
        &self.contents[self.contents.len() - 1]
    }

    /// The latest lifecycle: what the order's answer shows (`active`, `cancel_date`,
    /// `pause_date`, `resume_date`, `skipped_dates`).
    pub fn lifecycle(&self) -> &Lifecycle {
        self.lifecycles.last().map_or(&ACTIVE, |v| &v.lifecycle)
    }

    /// The content version in force on `d` and its position, if the order has begun.
    pub fn content_on(&self, d: Day) -> Option<(usize, &ContentVersion)> {
        let after = self.contents.partition_point(|v| v.effective <= d);
        let at = after.checked_sub(1)?;
        Some((at, &self.contents[at]))
    }

    /// The content in force on `d`, taken out of the history rather than copied (what a
    /// delivery list shows of an order on that date).
    pub fn into_content_on(self, d: Day) -> Option<OrderContent> {
        let after = self.contents.partition_point(|v| v.effective <= d);
        let at = after.checked_sub(1)?;
        self.contents
            .into_iter()
            .nth(at)
            .map(|version| version.content)
    }

    /// The lifecycle in force on `d`.
    pub fn lifecycle_on(&self, d: Day) -> &Lifecycle {
        lifecycle_on(&self.lifecycles, d)
    }

    /// Whether the schedule in force on `d` has a delivery on it (before pauses, skips,
    /// cancellation and halts).
    pub fn is_scheduled(&self, d: Day) -> bool {
        self.content_on(d)
            .is_some_and(|(_, v)| v.content.schedule.occurs_on(v.content.frequency, d))
    }

    /// The first scheduled date on or after `from`, over every content version: the "first
    /// delivery date after the cut-off" when `from` is the first open date.
    pub fn next_scheduled(&self, from: Day) -> Option<Day> {
        let first = match self.content_on(from) {
            Some((at, _)) => at,
            None => 0,
        };
        for (at, version) in self.contents.iter().enumerate().skip(first) {
            let start = from.max(version.effective);
            let end = self.contents.get(at + 1).map(|next| next.effective);
            if let Some(d) = next_occurrence(&version.content, start) {
                if end.is_none_or(|end| d < end) {
                    return Some(d);
                }
            }
        }
        None
    }

    /// What goes out for this order on `d`, with the customer's `halts`: the delivery of the
    /// versions in force that date, or why there is none.
    pub fn on<'a>(&'a self, d: Day, halts: &Halts) -> Result<Delivery<'a>, Withheld> {
        let Some((_, version)) = self.content_on(d) else {
            return Err(Withheld::NotScheduled);
        };
        let content = &version.content;
        if !content.schedule.occurs_on(content.frequency, d) {
            return Err(Withheld::NotScheduled);
        }
        if let Some(reason) = self.withheld_on_scheduled(d, halts) {
            return Err(reason);
        }
        let extras_go = !content.extras_one_off
            || content.extras.is_empty()
            || self.first_delivered(version.extras_since, d, halts) == Some(d);
        Ok(Delivery {
            box_id: content.box_id,
            extras: if extras_go { &content.extras } else { &[] },
            exclusions: &content.exclusions,
            substitutions: &content.substitutions,
        })
    }

    /// Why a scheduled date is withheld, if it is.
    fn withheld_on_scheduled(&self, d: Day, halts: &Halts) -> Option<Withheld> {
        withheld_on_scheduled(&self.lifecycles, d, halts)
    }

    /// The first date from `from` to `until` (both included) that delivers, jumping over
    /// what withholds: each step passes a skip, a pause, a cancellation, a halt or a version
    /// boundary, so the walk is bounded by the history's size, not by the dates between.
    fn first_delivered(&self, from: Day, until: Day, halts: &Halts) -> Option<Day> {
        let mut x = from;
        while x <= until {
            let d = self.next_scheduled(x).filter(|d| *d <= until)?;
            let Some(reason) = self.withheld_on_scheduled(d, halts) else {
                return Some(d);
            };
            let next = match reason {
                Withheld::Skipped | Withheld::NotScheduled => Some(d.plus(1)),
                Withheld::Halted => halts.on(d).and_then(|span| span.until),
                Withheld::Paused => self
                    .lifecycle_on(d)
                    .pause
                    .and_then(|pause| pause.until)
                    .into_iter()
                    .chain(self.next_lifecycle_after(d))
                    .min(),
                Withheld::Cancelled => self.next_lifecycle_after(d),
            };
            x = next?.max(d.plus(1));
        }
        None
    }

    /// The effective date of the first lifecycle version after `d`.
    fn next_lifecycle_after(&self, d: Day) -> Option<Day> {
        let after = self.lifecycles.partition_point(|v| v.effective <= d);
        self.lifecycles.get(after).map(|v| v.effective)
    }
}

/// The first date on or after `from` on which `content`'s schedule delivers.
fn next_occurrence(content: &OrderContent, from: Day) -> Option<Day> {
    let schedule = &content.schedule;
    let from = from.max(schedule.start);
    match content.frequency {
        Frequency::Single => (from == schedule.start).then_some(from),
        // Every weekday of the schedule comes up within two weeks, in an even one too.
        Frequency::Weekly | Frequency::Fortnightly => (0..14)
            .map(|n| from.plus(n))
            .find(|d| schedule.occurs_on(content.frequency, *d)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::day::WeekDays;

    const THURSDAY: Day = Day(0);

    fn history() -> OrderHistory {
        let order = OrderContent::weekly_for_test(217)
            .with_extras(&[(28, 2)])
            .with_exclusions(&[240])
            .placed(1, 1, 0);
        order.history
    }

    fn with_lifecycle(
        history: &OrderHistory,
        effective: Day,
        lifecycle: Lifecycle,
    ) -> OrderHistory {
        let mut lifecycles = history.lifecycles().to_vec();
        lifecycles.push(LifecycleVersion {
            effective,
            lifecycle,
        });
        OrderHistory::from_parts(
            history.contents().to_vec(),
            lifecycles,
            effective,
            history.updated_at(),
        )
        .unwrap()
    }

    #[test]
    fn a_new_order_delivers_on_its_schedule_from_its_start() {
        let h = history();
        let none = Halts::none();
        assert_eq!(h.on(THURSDAY.plus(-7), &none), Err(Withheld::NotScheduled));
        assert_eq!(h.on(THURSDAY.plus(1), &none), Err(Withheld::NotScheduled));
        let delivery = h.on(THURSDAY.plus(7), &none).unwrap();
        assert_eq!(delivery.box_id, 217);
        assert_eq!(
            delivery.extras,
            &[ExtraLine {
                id: 28,
                quantity: 2
            }]
        );
        assert_eq!(delivery.exclusions, &[240]);
        assert_eq!(h.next_scheduled(THURSDAY.plus(1)), Some(THURSDAY.plus(7)));
        assert!(h.lifecycle().active());
    }

    #[test]
    fn each_reason_is_reported_and_cancellation_first() {
        let h = with_lifecycle(
            &history(),
            Day(7),
            Lifecycle {
                cancel_date: Some(Day(70)),
                pause: Some(Pause {
                    from: Day(14),
                    until: Some(Day(28)),
                }),
                skipped_dates: vec![Day(35), Day(70)],
            },
        );
        let none = Halts::none();
        assert!(h.on(Day(7), &none).is_ok());
        assert_eq!(h.on(Day(14), &none), Err(Withheld::Paused));
        assert_eq!(h.on(Day(21), &none), Err(Withheld::Paused));
        assert!(h.on(Day(28), &none).is_ok(), "resume_date delivers");
        assert_eq!(h.on(Day(35), &none), Err(Withheld::Skipped));
        assert_eq!(h.on(Day(70), &none), Err(Withheld::Cancelled));
        assert_eq!(h.on(Day(77), &none), Err(Withheld::Cancelled));
        let halted = Halts::none().set(true, Day(30));
        assert_eq!(h.on(Day(35), &halted), Err(Withheld::Halted));
        assert_eq!(h.on(Day(42), &halted), Err(Withheld::Halted));
        assert_eq!(h.on(Day(70), &halted), Err(Withheld::Cancelled));
        assert_eq!(h.on(Day(71), &halted), Err(Withheld::NotScheduled));
    }

    #[test]
    fn one_off_extras_come_with_the_first_delivery_that_goes_out() {
        let order = OrderContent::weekly_for_test(217)
            .with_extras(&[(28, 1)])
            .with_extras_one_off(true)
            .placed(1, 1, 0);
        let h = with_lifecycle(
            &order.history,
            Day(-100),
            Lifecycle {
                cancel_date: None,
                pause: Some(Pause {
                    from: Day(0),
                    until: Some(Day(14)),
                }),
                skipped_dates: vec![Day(14)],
            },
        );
        let halts = Halts::none().set(true, Day(15)).set(false, Day(22));
        let extras = |d: i32| h.on(Day(d), &halts).map(|delivery| delivery.extras.len());
        assert_eq!(extras(0), Err(Withheld::Paused));
        assert_eq!(extras(14), Err(Withheld::Skipped));
        assert_eq!(extras(21), Err(Withheld::Halted));
        assert_eq!(extras(28), Ok(1), "the first delivery that goes out");
        assert_eq!(extras(35), Ok(0));
    }

    #[test]
    fn the_versions_in_force_decide_a_date() {
        let first = OrderContent::weekly_for_test(217);
        let second = OrderContent::weekly_for_test(218)
            .with_schedule(Day(30), WeekDays::only(Day(30).weekday()))
            .with_frequency(Frequency::Fortnightly);
        let h = OrderHistory::from_parts(
            vec![
                ContentVersion {
                    effective: Day(0),
                    content: first,
                    extras_since: Day(0),
                },
                ContentVersion {
                    effective: Day(30),
                    content: second,
                    extras_since: Day(0),
                },
            ],
            Vec::new(),
            Day(20),
            5,
        )
        .unwrap();
        let none = Halts::none();
        assert_eq!(h.on(Day(28), &none).unwrap().box_id, 217);
        assert_eq!(
            h.on(Day(35), &none),
            Err(Withheld::NotScheduled),
            "Thursdays no more"
        );
        assert_eq!(h.on(Day(30), &none).unwrap().box_id, 218);
        assert_eq!(
            h.on(Day(37), &none),
            Err(Withheld::NotScheduled),
            "fortnightly"
        );
        assert_eq!(h.on(Day(44), &none).unwrap().box_id, 218);
        assert_eq!(h.next_scheduled(Day(29)), Some(Day(30)));
        assert_eq!(h.latest().content.box_id, 218);
    }

    #[test]
    fn stored_histories_are_checked() {
        let version = |effective| ContentVersion {
            effective: Day(effective),
            content: OrderContent::weekly_for_test(217),
            extras_since: Day(effective),
        };
        let lifecycle = |effective, skipped: Vec<Day>| LifecycleVersion {
            effective: Day(effective),
            lifecycle: Lifecycle {
                skipped_dates: skipped,
                ..Lifecycle::ACTIVE
            },
        };
        assert!(OrderHistory::from_parts(vec![], vec![], Day(0), 0).is_err());
        assert!(OrderHistory::from_parts(vec![version(3), version(3)], vec![], Day(0), 0).is_err());
        assert!(OrderHistory::from_parts(
            vec![version(0)],
            vec![lifecycle(1, vec![Day(5), Day(4)])],
            Day(0),
            0
        )
        .is_err());
        assert!(OrderHistory::from_parts(
            vec![version(0)],
            vec![lifecycle(2, vec![]), lifecycle(1, vec![])],
            Day(0),
            0
        )
        .is_err());
        assert!(OrderHistory::from_parts(
            vec![version(0), version(7)],
            vec![lifecycle(1, vec![Day(4), Day(5)])],
            Day(0),
            0
        )
        .is_ok());
    }
}
