//! The property test of an order's life against a reference model small enough to be
//! obviously right: the model keeps, for every date of a window, what holds on that date
//! (the content in force, paused, skipped, cancelled, halted) in plain arrays, and applies
//! each accepted change by rewriting every date from where it takes effect. Random orders
//! go through random changes, pauses, skips, cancellations, halts and clock advances under
//! random cut-offs and time zones; after every step, every date of the window must deliver
//! what the model says, and every date that was locked when the change was made must
//! deliver exactly what it delivered before it.
//!
//! Test-only. Must not touch: the rules themselves (it calls `change` and `halts` as the
//! service will).

use std::sync::Arc;

use jiff::tz::TimeZone;
use proptest::prelude::*;
use serde_json::{json, Map, Value};

use super::change::{ChangeContext, OrderChange};
use super::content::{ExtraLine, OrderContent};
use super::history::{OrderHistory, Withheld};
use super::schedule::{Frequency, Schedule};
use crate::domain::catalogue::{Catalogue, Webstore};
use crate::domain::cutoff::Cutoff;
use crate::domain::day::Day;
use crate::domain::day::WeekDays;
use crate::domain::halts::Halts;

/// The window of dates compared: 2026-11-01 (a Sunday) and the 160 days after it.
const WINDOW: usize = 160;

fn first_day() -> Day {
    Day::of(jiff::civil::Date::constant(2026, 11, 1))
}

/// Monday to Friday: the customer's delivery service (the demo's courier).
fn weekdays() -> WeekDays {
    WeekDays::from_bits(0b011_1110)
}

/// A delivery as compared: box, extras, exclusions, substitutions; or why there is none.
type Owned = Result<(u64, Vec<ExtraLine>, Vec<u64>, Vec<u64>), Withheld>;

#[derive(Debug, Clone)]
enum Op {
    /// The clock moves on by this many minutes.
    Advance(u32),
    /// A change of content; dates are days after the first open date (negative: locked).
    Content {
        box_id: Option<u64>,
        extras: Option<Vec<(u64, u32)>>,
        one_off: Option<bool>,
        exclusions: Option<Vec<u64>>,
        fortnightly: Option<bool>,
        week_days: Option<u8>,
        effective: Option<i32>,
    },
    Pause(i32, Option<i32>),
    EndPause,
    Skip(Vec<i32>),
    Cancel(Option<i32>),
    Reactivate,
    Halt(bool),
}

/// Everything the model keeps: what holds on each date of the window.
#[derive(Debug, Clone)]
struct Model {
    /// Per date: the content in force and its one-off extras' group, if the order has begun.
    content: Vec<Option<(OrderContent, u32)>>,
    paused: Vec<bool>,
    skipped: Vec<bool>,
    cancelled: Vec<bool>,
    halted: Vec<bool>,
    /// What the order's answer shows.
    latest: OrderContent,
    latest_group: u32,
    groups: u32,
    cancel_date: Option<Day>,
    pause: Option<(Day, Option<Day>)>,
    skipped_list: Vec<Day>,
}

fn index(d: Day) -> Option<usize> {
    usize::try_from(d.0 - first_day().0)
        .ok()
        .filter(|i| *i < WINDOW)
}

fn day(i: usize) -> Day {
    first_day().plus(i as i32)
}

impl Model {
    fn new(order: &OrderContent) -> Model {
        let content = (0..WINDOW)
            .map(|i| (day(i) >= order.schedule.start).then(|| (order.clone(), 0)))
            .collect();
        Model {
            content,
            paused: vec![false; WINDOW],
            skipped: vec![false; WINDOW],
            cancelled: vec![false; WINDOW],
            halted: vec![false; WINDOW],
            latest: order.clone(),
            latest_group: 0,
            groups: 1,
            cancel_date: None,
            pause: None,
            skipped_list: Vec::new(),
        }
    }

    fn scheduled(&self, d: Day) -> bool {
        index(d)
            .and_then(|i| self.content[i].as_ref())
            .is_some_and(|(c, _)| c.schedule.occurs_on(c.frequency, d))
    }

    fn first_scheduled_from(&self, from: Day) -> Day {
        (0..WINDOW)
            .map(day)
            .find(|d| *d >= from && self.scheduled(*d))
            .unwrap_or(from)
    }

    /// Whether the order delivers on date `i`, extras aside.
    fn withheld(&self, i: usize) -> Option<Withheld> {
        if !self.scheduled(day(i)) {
            Some(Withheld::NotScheduled)
        } else if self.cancelled[i] {
            Some(Withheld::Cancelled)
        } else if self.halted[i] {
            Some(Withheld::Halted)
        } else if self.paused[i] {
            Some(Withheld::Paused)
        } else if self.skipped[i] {
            Some(Withheld::Skipped)
        } else {
            None
        }
    }

    fn outcome(&self, i: usize) -> Owned {
        if let Some(reason) = self.withheld(i) {
            return Err(reason);
        }
        let (content, group) = self.content[i].as_ref().unwrap();
        let first_of_group = (0..WINDOW).find(|&j| {
            self.content[j].as_ref().is_some_and(|(_, g)| g == group) && self.withheld(j).is_none()
        });
        let extras = if !content.extras_one_off || first_of_group == Some(i) {
            content.extras.clone()
        } else {
            Vec::new()
        };
        Ok((
            content.box_id,
            extras,
            content.exclusions.clone(),
            content.substitutions.clone(),
        ))
    }

    fn from(open: Day) -> impl Iterator<Item = usize> {
        (0..WINDOW).filter(move |i| day(*i) >= open)
    }
}

fn owned(history: &OrderHistory, halts: &Halts, i: usize) -> Owned {
    history.on(day(i), halts).map(|delivery| {
        (
            delivery.box_id,
            delivery.extras.to_vec(),
            delivery.exclusions.to_vec(),
            delivery.substitutions.to_vec(),
        )
    })
}

fn text(d: Day) -> Value {
    json!(d.date().to_string())
}

fn days_json(days: WeekDays) -> Value {
    json!(days.days().collect::<Vec<u8>>())
}

/// The body of an operation that patches the order, and what the model expects of it:
/// `Some(true)` must be accepted, `Some(false)` refused, `None` either.
fn body(op: &Op, model: &Model, open: Day) -> Option<(Map<String, Value>, Option<bool>)> {
    let mut body = Map::new();
    let at = |offset: i32| open.plus(offset);
    let expect = match op {
        Op::Advance(_) | Op::Halt(_) => return None,
        Op::Content {
            box_id,
            extras,
            one_off,
            exclusions,
            fortnightly,
            week_days,
            effective,
        } => {
            if let Some(id) = box_id {
                body.insert("box_id".into(), json!(id));
            }
            if let Some(extras) = extras {
                let lines: Vec<Value> = extras
                    .iter()
                    .map(|(id, q)| json!({"id": id, "quantity": q}))
                    .collect();
                body.insert("extras".into(), json!(lines));
            }
            if let Some(flag) = one_off {
                body.insert("extras_one_off".into(), json!(flag));
            }
            if let Some(items) = exclusions {
                body.insert("exclusions".into(), json!(items));
            }
            if let Some(fortnightly) = fortnightly {
                let name = if *fortnightly {
                    "fortnightly"
                } else {
                    "weekly"
                };
                body.insert("frequency".into(), json!(name));
            }
            if let Some(bits) = week_days {
                let days = WeekDays::from_bits(*bits).and(weekdays());
                let days = if days.is_empty() {
                    WeekDays::only(1)
                } else {
                    days
                };
                body.insert("week_days".into(), days_json(days));
            }
            if body.is_empty() {
                body.insert("box_id".into(), json!(model.latest.box_id));
            }
            if let Some(offset) = effective {
                body.insert("effective_date".into(), text(at(*offset)));
            }
            Some(effective.is_none_or(|offset| offset >= 0))
        }
        Op::Pause(from, until) => {
            body.insert("pause_date".into(), text(at(*from)));
            body.insert(
                "resume_date".into(),
                until.map_or(Value::Null, |u| text(at(u))),
            );
            if until.is_some_and(|until| until <= *from) {
                Some(false)
            } else if *from >= 0 && until.is_none_or(|until| until >= 0) {
                Some(true)
            } else {
                None
            }
        }
        Op::EndPause => {
            body.insert("pause_date".into(), Value::Null);
            Some(true)
        }
        Op::Skip(offsets) => {
            let dates: Vec<Day> = offsets.iter().map(|offset| at(*offset)).collect();
            body.insert(
                "skipped_dates".into(),
                json!(dates.iter().map(|d| text(*d)).collect::<Vec<_>>()),
            );
            let distinct = dates
                .iter()
                .enumerate()
                .all(|(i, d)| !dates[..i].contains(d));
            let each_allowed = dates.iter().all(|d| {
                if *d >= open {
                    model.scheduled(*d)
                } else {
                    index(*d).is_some_and(|i| model.skipped[i])
                }
            });
            Some(distinct && each_allowed)
        }
        Op::Cancel(date) => {
            body.insert("active".into(), json!(false));
            if let Some(offset) = date {
                body.insert("cancel_date".into(), text(at(*offset)));
            }
            if model.cancel_date.is_none() && date.is_none_or(|offset| offset >= 0) {
                Some(true)
            } else {
                None
            }
        }
        Op::Reactivate => {
            body.insert("active".into(), json!(true));
            Some(true)
        }
    };
    Some((body, expect))
}

/// Applies an accepted patch to the model: every date from where it takes effect.
fn apply(op: &Op, model: &mut Model, open: Day) {
    let at = |offset: i32| open.plus(offset);
    match op {
        Op::Advance(_) | Op::Halt(_) => {}
        Op::Content {
            box_id,
            extras,
            one_off,
            exclusions,
            fortnightly,
            week_days,
            effective,
        } => {
            let effective = effective.map_or_else(|| model.first_scheduled_from(open), at);
            let latest = model.latest.clone();
            let mut content = latest.clone();
            if let Some(id) = box_id {
                content.box_id = *id;
            }
            if let Some(extras) = extras {
                content.extras = extras
                    .iter()
                    .map(|&(id, quantity)| ExtraLine { id, quantity })
                    .collect();
            }
            if let Some(flag) = one_off {
                content.extras_one_off = *flag;
            }
            if let Some(items) = exclusions {
                content.exclusions = items.clone();
            }
            let frequency = match fortnightly {
                Some(true) => Frequency::Fortnightly,
                Some(false) => Frequency::Weekly,
                None => latest.frequency,
            };
            let days = week_days.map_or(latest.schedule.week_days, |bits| {
                let days = WeekDays::from_bits(bits).and(weekdays());
                if days.is_empty() {
                    WeekDays::only(1)
                } else {
                    days
                }
            });
            if frequency != latest.frequency || days != latest.schedule.week_days {
                content.frequency = frequency;
                content.schedule = Schedule {
                    start: effective,
                    week_days: days,
                };
            }
            let group = if content.extras != latest.extras
                || content.extras_one_off != latest.extras_one_off
            {
                model.groups += 1;
                model.groups - 1
            } else {
                model.latest_group
            };
            for i in Model::from(effective) {
                model.content[i] = Some((content.clone(), group));
            }
            model.latest = content;
            model.latest_group = group;
        }
        Op::Pause(from, until) => {
            let (from, until) = (at(*from), until.map(at));
            for i in Model::from(open) {
                model.paused[i] = from <= day(i) && until.is_none_or(|u| day(i) < u);
            }
            model.pause = Some((from, until));
        }
        Op::EndPause => {
            for i in Model::from(open) {
                model.paused[i] = false;
            }
            model.pause = None;
        }
        Op::Skip(offsets) => {
            let mut dates: Vec<Day> = offsets.iter().map(|offset| at(*offset)).collect();
            dates.sort_unstable();
            for i in Model::from(open) {
                model.skipped[i] = dates.contains(&day(i));
            }
            model.skipped_list = dates;
        }
        Op::Cancel(date) => {
            let cancel = date
                .map(at)
                .or(model.cancel_date)
                .unwrap_or_else(|| model.first_scheduled_from(open));
            for i in Model::from(open) {
                model.cancelled[i] = day(i) >= cancel;
            }
            model.cancel_date = Some(cancel);
        }
        Op::Reactivate => {
            for i in Model::from(open) {
                model.cancelled[i] = false;
            }
            model.cancel_date = None;
        }
    }
}

fn op() -> impl Strategy<Value = Op> {
    let offset = -6i32..30;
    prop_oneof![
        3 => (0u32..3600).prop_map(Op::Advance),
        3 => (
            proptest::option::of(prop_oneof![Just(217u64), Just(218)]),
            proptest::option::of(prop_oneof![
                Just(vec![]),
                Just(vec![(28u64, 1u32)]),
                Just(vec![(28, 2)])
            ]),
            proptest::option::of(any::<bool>()),
            proptest::option::of(prop_oneof![Just(vec![]), Just(vec![240u64])]),
            proptest::option::of(any::<bool>()),
            proptest::option::of(any::<u8>()),
            proptest::option::weighted(0.5, offset.clone()),
        )
            .prop_map(
                |(box_id, extras, one_off, exclusions, fortnightly, week_days, effective)| {
                    Op::Content {
                        box_id,
                        extras,
                        one_off,
                        exclusions,
                        fortnightly,
                        week_days,
                        effective,
                    }
                }
            ),
        2 => (offset.clone(), proptest::option::of(offset.clone()))
            .prop_map(|(from, until)| Op::Pause(from, until)),
        1 => Just(Op::EndPause),
        3 => prop::collection::vec(offset.clone(), 0..6).prop_map(Op::Skip),
        1 => proptest::option::of(offset).prop_map(Op::Cancel),
        1 => Just(Op::Reactivate),
        1 => any::<bool>().prop_map(Op::Halt),
    ]
}

fn webstore(cutoff: Cutoff, zone: &str) -> Webstore {
    let demo: Arc<Webstore> = Catalogue::demo(0).webstores()[0].clone();
    let mut webstore = (*demo).clone();
    webstore.cutoff = cutoff;
    webstore.zone = TimeZone::get(zone).unwrap();
    webstore
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_date_delivers_what_the_model_says_and_locked_dates_never_change(
        days_before in 0u8..=5, hour in 0u8..24, minute in prop_oneof![Just(0u8), Just(30)],
        zone in prop_oneof![Just("UTC"), Just("Europe/London"), Just("Pacific/Auckland")],
        start_offset in 0i32..10, start_minutes in 0i64..(24 * 60),
        bits in 1u8..32, fortnightly in any::<bool>(), one_off in any::<bool>(),
        ops in prop::collection::vec(op(), 1..30),
    ) {
        let webstore = webstore(Cutoff::new(days_before, hour, minute).unwrap(), zone);
        let days = WeekDays::from_bits(bits << 1).and(weekdays());
        let days = if days.is_empty() { WeekDays::only(3) } else { days };
        let start = first_day().plus(3 + start_offset);
        let order = OrderContent::weekly_for_test(217)
            .with_schedule(start, days)
            .with_frequency(if fortnightly { Frequency::Fortnightly } else { Frequency::Weekly })
            .with_extras(&[(28, 1)])
            .with_extras_one_off(one_off)
            .placed(1, 1, 0);
        let mut history = order.history.clone();
        let mut halts = Halts::none();
        let mut model = Model::new(order.content());
        let mut now = first_day().plus(5).date().to_zoned_datetime(TimeZone::UTC).unwrap().timestamp().as_second()
            + start_minutes * 60;

        // Dates before it are frozen (the history folded up to it) and answered no more.
        let mut folded_to = first_day();
        for op in &ops {
            let open = webstore.cutoff.first_open_day(&webstore.zone, now);
            let before: Vec<Owned> = (0..WINDOW).map(|i| owned(&history, &halts, i)).collect();
            match op {
                Op::Advance(minutes) => {
                    // As a date is frozen once it locks: the history goes on folded.
                    history = history.folded(first_day(), open, &halts);
                    folded_to = open;
                    now += i64::from(*minutes) * 60
                }
                Op::Halt(flag) => {
                    halts = halts.set(*flag, open);
                    for i in Model::from(open) {
                        model.halted[i] = *flag;
                    }
                    prop_assert_eq!(halts.is_halted(), *flag);
                }
                _ => {
                    let (body, expect) = body(op, &model, open).unwrap();
                    let context = ChangeContext { webstore: &webstore, delivery_days: weekdays(), now };
                    let result = OrderChange::parse(&body).apply(&history, &context);
                    if let Some(expect) = expect {
                        prop_assert_eq!(result.is_ok(), expect, "{:?} at open {:?}: {:?}", body, open.date(), result);
                    }
                    if let Ok(next) = result {
                        apply(op, &mut model, open);
                        if next != history {
                            prop_assert_eq!(next.updated_at(), now);
                        }
                        history = next;
                    }
                }
            }
            let lifecycle = history.lifecycle();
            prop_assert_eq!(lifecycle.cancel_date, model.cancel_date);
            prop_assert_eq!(lifecycle.pause.map(|p| (p.from, p.until)), model.pause);
            prop_assert_eq!(&lifecycle.skipped_dates, &model.skipped_list);
            prop_assert_eq!(&history.latest().content, &model.latest);
            for (i, was) in before.iter().enumerate() {
                if day(i) < folded_to {
                    continue;
                }
                let got = owned(&history, &halts, i);
                if day(i) < open {
                    prop_assert_eq!(&got, was, "locked {:?} changed after {:?}", day(i).date(), op);
                }
                prop_assert_eq!(&got, &model.outcome(i), "{:?} after {:?}", day(i).date(), op);
            }
            // Folded up to the first open date (every date before it frozen), the history
            // answers every later date as before and keeps no version only folded dates need
            // (and the run goes on with it folded at every advance of the clock).
            let folded = history.folded(first_day(), open, &halts);
            for i in Model::from(open) {
                prop_assert_eq!(owned(&folded, &halts, i), owned(&history, &halts, i), "folded, {:?}", day(i).date());
            }
            let contents = folded.contents();
            for (at, version) in contents.iter().enumerate() {
                let next = contents.get(at + 1).map(|v| v.effective);
                prop_assert!(version.effective < first_day() || next.is_none_or(|n| n > open));
            }
            prop_assert_eq!(folded.lifecycle(), history.lifecycle());
            prop_assert_eq!(&folded.latest().content, &history.latest().content);
        }
    }
}
