//! Changing an order (`PATCH /v1/orders/{id}` with `{"order": {...}}`): the body parsed once
//! into a typed change ([`OrderChange::parse`], which records every malformed or unknown
//! field), then applied purely to the order's history ([`OrderChange::apply`]) against the
//! catalogue, the cut-off and "now", every failing field named at once. A refused change
//! leaves the history as it was, since a new one is returned only on success.
//!
//! What a change means:
//!
//! - Everything takes effect from the first open date (`cutoff`) or later, so the deliveries
//!   of a locked date never change. One rule says when a change's wording reaches a locked
//!   date ([`reaches_locked`]): what it says of the locked dates (a pause or a cancellation
//!   starting on one, a locked date skipped, an `effective_date` on one) differs from what
//!   they got; it is refused naming the field, with the earliest date it could take effect.
//! - `box_id`, `extras`, `exclusions`, substitutions, `extras_one_off`, `frequency`,
//!   `week_days`: the latest content with these fields replaced, checked by the content rule
//!   a create goes through (`body::check_content`), in force from `effective_date`
//!   (default: the first delivery date after the cut-off). Versions planned from that date
//!   or later give way to it; earlier ones stay. A new `frequency` or `week_days` starts the
//!   schedule on the effective date (a fortnight counts from its week), checked by the
//!   schedule's rules; an unchanged schedule is kept as it is.
//! - `pause_date`, `resume_date`: the pause (`"pause_date": null` ends it from the first open
//!   date); `skipped_dates`: the whole list; `active: false` with an optional `cancel_date`
//!   (default: the first delivery date after the cut-off); `active: true`: delivered again
//!   from the first open date. These are the order's lifecycle from the first open date on.
//! - `null` means "not given" for every field without a "none" (`box_id`, `frequency`,
//!   `extras_one_off`, `week_days`, `effective_date`, `cancel_date`), and "none" for those
//!   with one: the lists (`extras`, `exclusions`, `substitutions`, `skipped_dates`: empty),
//!   `pause_date` (no pause), `resume_date` (no end to the pause). `active` is a boolean
//!   with neither: `null` is refused, as the customer's `halted`.
//! - Any other field is refused by name: the server's own (`id`, `customer_id`,
//!   `created_at`, `updated_at`) as read-only, the rest as unknown.
//!
//! Must not touch: the history's representation and the delivery of a date (`history`), the
//! content rule itself (`body`), the customer's halts (`halts`).

use serde_json::{Map, Value};

use super::body::{check_content, ContentFields, ContentSource, Sent};
use super::history::{
    ContentVersion, Lifecycle, LifecycleVersion, OrderHistory, Pause, EXTRAS_SENT,
    MAX_PLANNED_VERSIONS, MAX_SKIPPED_DATES,
};
use super::schedule::{parse_week_days, resolve, Frequency, ScheduleRules};
use crate::domain::catalogue::Webstore;
use crate::domain::day::WeekDays;
use crate::domain::day::{parse_iso_date, parse_optional_date, Day};
use crate::domain::fields::{boolean, field, Field, FieldErrors, INVALID};

/// Fields of an order that only the server sets.
pub const READ_ONLY_FIELDS: [&str; 4] = ["id", "customer_id", "created_at", "updated_at"];

/// The fields a change may set.
const CHANGE_FIELDS: [&str; 13] = [
    "box_id",
    "extras",
    "exclusions",
    "substitutions",
    "extras_one_off",
    "frequency",
    "week_days",
    "effective_date",
    "pause_date",
    "resume_date",
    "skipped_dates",
    "active",
    "cancel_date",
];

const READ_ONLY: &str = "is read-only";
const UNKNOWN: &str = "is not a field of an order that can be changed";
const NOT_A_BOOLEAN: &str = "must be true or false";
const CONTENT_FIELDS: &str =
    "box_id, extras, exclusions, substitutions, extras_one_off, frequency or week_days";

/// The message for a change that would reach a locked date.
pub fn locked(open: Day) -> String {
    format!(
        "would change the deliveries of a date already locked for packing: the earliest date \
         it can take effect is {}",
        open.date()
    )
}

/// A change of an order, parsed: each field it sets, typed, and what was refused while
/// reading it (malformed values, fields that are not an order's to change).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OrderChange {
    content: ContentFields,
    week_days: Sent<WeekDays>,
    effective_date: Sent<Day>,
    active: Sent<bool>,
    cancel_date: Sent<Day>,
    /// `Given(None)`: `null`, no pause.
    pause_date: Sent<Option<Day>>,
    /// `Given(None)`: `null`, no end to the pause.
    resume_date: Sent<Option<Day>>,
    /// The well-formed dates, each with its place in the list sent (`Refused` when the
    /// field is not a list).
    skipped_dates: Sent<Vec<(usize, Day)>>,
    /// Everything refused while reading, in the order found.
    refused: FieldErrors,
}

impl OrderChange {
    /// Reads a change's JSON object (already unwrapped from `{"order": …}`). Never fails:
    /// what it cannot take is recorded, and refuses the change when it is applied.
    pub fn parse(object: &Map<String, Value>) -> OrderChange {
        let mut refused = FieldErrors::new();
        for key in object.keys() {
            if !CHANGE_FIELDS.contains(&key.as_str()) {
                let message = if READ_ONLY_FIELDS.contains(&key.as_str()) {
                    READ_ONLY
                } else {
                    UNKNOWN
                };
                refused.add(key.clone(), message);
            }
        }
        let get = |key: &str| field(object, key);
        let content = ContentFields::read(
            get("box_id"),
            get("frequency"),
            get("extras_one_off"),
            get("extras"),
            get("exclusions"),
            get("substitutions"),
            &mut refused,
        );
        let week_days = match parse_week_days(get("week_days")) {
            Ok(Some(days)) => Sent::Given(days),
            Ok(None) => Sent::Absent,
            Err(message) => {
                refused.add("week_days", message);
                Sent::Refused
            }
        };
        let mut date = |name: &str| match parse_optional_date(get(name)) {
            Ok(Some(day)) => Sent::Given(day),
            Ok(None) => Sent::Absent,
            Err(message) => {
                refused.add(name, message);
                Sent::Refused
            }
        };
        let effective_date = date("effective_date");
        let cancel_date = date("cancel_date");
        let mut clearable = |name: &str| match (get(name), parse_optional_date(get(name))) {
            (Field::Absent, _) => Sent::Absent,
            (_, Ok(day)) => Sent::Given(day),
            (_, Err(message)) => {
                refused.add(name, message);
                Sent::Refused
            }
        };
        let pause_date = clearable("pause_date");
        let resume_date = clearable("resume_date");
        let active = match get("active") {
            Field::Absent => Sent::Absent,
            Field::Present(value) if boolean(value).is_some() => {
                Sent::Given(boolean(value).unwrap_or_default())
            }
            Field::Null | Field::Present(_) => {
                refused.add("active", NOT_A_BOOLEAN);
                Sent::Refused
            }
        };
        let skipped_dates = read_skipped_dates(get("skipped_dates"), &mut refused);
        OrderChange {
            content,
            week_days,
            effective_date,
            active,
            cancel_date,
            pause_date,
            resume_date,
            skipped_dates,
            refused,
        }
    }

    /// Whether it sets any field of the order's content.
    fn changes_content(&self) -> bool {
        self.content.any_sent() || self.week_days.is_sent()
    }

    /// The history after this change, or every failing field. A change that changes nothing
    /// (an empty body, or the values the order has) returns the history as it was,
    /// `updated_at` included, so the caller can tell (`==`) that there is nothing to store.
    pub fn apply(
        &self,
        history: &OrderHistory,
        context: &ChangeContext<'_>,
    ) -> Result<OrderHistory, FieldErrors> {
        let mut errors = self.refused.clone();
        let webstore = context.webstore;
        let open = webstore
            .cutoff
            .first_open_day(&webstore.zone, context.now)
            .max(history.settled_before());

        let contents = self.content_versions(history, context, open, &mut errors);
        // The schedule that skipped dates and default dates follow: the changed one, if any.
        let changed_schedule = contents.as_ref().map(|contents| {
            OrderHistory::from_checked(
                contents.clone(),
                Vec::new(),
                history.settled_before(),
                history.updated_at(),
            )
        });
        let scheduled = changed_schedule.as_ref().unwrap_or(history);
        let lifecycle = self.lifecycle(history, scheduled, open, &mut errors);
        if !errors.is_empty() {
            return Err(errors);
        }

        let mut lifecycles = history.lifecycles().to_vec();
        let lifecycle_changed = lifecycle != *history.lifecycle();
        if lifecycle_changed {
            // Versions are made at the first open date, which never goes back
            // (`settled_before`), so only the last can be at `open`: replaced, never followed.
            lifecycles.retain(|version| version.effective < open);
            lifecycles.push(LifecycleVersion {
                effective: open,
                lifecycle,
            });
        }
        let contents_changed = contents.as_deref().is_some_and(|c| c != history.contents());
        if !contents_changed && !lifecycle_changed {
            return Ok(history.clone());
        }
        Ok(OrderHistory::from_checked(
            contents.unwrap_or_else(|| history.contents().to_vec()),
            lifecycles,
            open,
            context.now,
        ))
    }

    /// The content versions after the change, `None` when it changes no content field (or a
    /// field failed: its errors are in `errors`).
    fn content_versions(
        &self,
        history: &OrderHistory,
        context: &ChangeContext<'_>,
        open: Day,
        errors: &mut FieldErrors,
    ) -> Option<Vec<ContentVersion>> {
        let effective = match self.effective_date {
            Sent::Given(day) => Some(day),
            Sent::Absent => None,
            Sent::Refused => return None,
        };
        if !self.changes_content() {
            if effective.is_some() {
                errors.add(
                    "effective_date",
                    format!("can only be given with a change of {CONTENT_FIELDS}"),
                );
            }
            return None;
        }
        if effective.is_some_and(|date| date < open) {
            errors.add("effective_date", locked(open));
        }
        let effective = effective.unwrap_or_else(|| history.next_scheduled(open).unwrap_or(open));

        let latest = history.latest();
        let current = &latest.content;
        let checked = check_content(
            ContentSource {
                sent: &self.content,
                base: Some(current),
            },
            context.webstore,
            errors,
        );
        let frequency = match self.content.frequency {
            Sent::Given(frequency) => frequency,
            Sent::Absent => current.frequency,
            Sent::Refused => return None,
        };
        let days = match self.week_days {
            Sent::Given(days) => Some(days),
            Sent::Absent => None,
            Sent::Refused => return None,
        };
        let schedule_changes =
            frequency != current.frequency || days.is_some_and(|d| d != current.schedule.week_days);
        let schedule = if schedule_changes {
            // A new schedule starts on the effective date, on the days given, else on the
            // order's days (a single delivery on the effective date's weekday).
            let days = match days {
                None if frequency != Frequency::Single => Some(current.schedule.week_days),
                days => days,
            };
            let rules = ScheduleRules {
                delivery_days: context.delivery_days,
                today: effective.plus(-1),
            };
            resolve(
                frequency,
                Some(effective),
                days,
                rules,
                "effective_date",
                errors,
            )
        } else {
            Some(current.schedule)
        };
        let content = checked?.scheduled(schedule?);
        if !errors.is_empty() {
            return None;
        }

        // One-off extras count afresh only when they change, so that a cart sending the whole
        // order back with a new box does not send them twice.
        let extras_changed =
            content.extras != current.extras || content.extras_one_off != current.extras_one_off;
        let extras_since = if extras_changed {
            effective
        } else if latest.extras_since == EXTRAS_SENT {
            // Sent on a date folded away: they do not come again with a new box.
            EXTRAS_SENT
        } else {
            latest.extras_since.min(effective)
        };
        let mut contents: Vec<ContentVersion> = history
            .contents()
            .iter()
            .filter(|version| version.effective < effective)
            .cloned()
            .collect();
        let unchanged = contents.last().is_some_and(|version| {
            version.content == content
                && version.extras_since == extras_since
                && history.contents().len() == contents.len()
        });
        if !unchanged {
            contents.push(ContentVersion {
                effective,
                content,
                extras_since,
            });
        }
        let planned = contents.iter().filter(|v| v.effective >= open).count();
        if planned > MAX_PLANNED_VERSIONS {
            errors.add(
                "effective_date",
                format!(
                    "would plan more than {MAX_PLANNED_VERSIONS} changes of the order from {} \
                     on: change it from one of the dates already planned, or from the first \
                     delivery after the cut-off (without effective_date)",
                    open.date()
                ),
            );
            return None;
        }
        Some(contents)
    }

    /// The lifecycle after the change (the latest one when it changes none of its fields).
    /// `scheduled` is the history with the change's content, whose schedule skipped dates and
    /// default dates follow.
    fn lifecycle(
        &self,
        history: &OrderHistory,
        scheduled: &OrderHistory,
        open: Day,
        errors: &mut FieldErrors,
    ) -> Lifecycle {
        let current = history.lifecycle();
        let mut next = current.clone();
        let first_delivery = || scheduled.next_scheduled(open).unwrap_or(open);

        // Cancellation.
        let active = self.active.given().copied();
        let cancel_date = self.cancel_date.given().copied();
        let cancelling =
            active == Some(false) || (active.is_none() && current.cancel_date.is_some());
        match active {
            Some(true) => next.cancel_date = None,
            Some(false) => {
                next.cancel_date = cancel_date
                    .or(current.cancel_date)
                    .or_else(|| Some(first_delivery()));
            }
            None if current.cancel_date.is_some() => {
                next.cancel_date = cancel_date.or(current.cancel_date);
            }
            None => {}
        }
        if cancel_date.is_some() && !cancelling && self.active != Sent::Refused {
            errors.add("cancel_date", "can only be given with \"active\": false");
        }
        let cancelled = |lifecycle: &Lifecycle| lifecycle.cancel_date.map(|from| (from, None));
        if reaches_locked(cancelled(&next), cancelled(current), open) {
            errors.add("cancel_date", locked(open));
        }

        // The pause.
        if self.pause_date != Sent::Refused && self.resume_date != Sent::Refused {
            let from = match self.pause_date {
                Sent::Given(from) => from,
                _ => current.pause.map(|pause| pause.from),
            };
            let until = match self.resume_date {
                Sent::Given(until) => until,
                _ => current.pause.and_then(|pause| pause.until),
            };
            match from {
                None if matches!(self.resume_date, Sent::Given(Some(_))) => {
                    errors.add("resume_date", "can only be given with a pause_date");
                }
                None => next.pause = None,
                Some(from) => {
                    if until.is_some_and(|until| until <= from) {
                        errors.add("resume_date", "must be after pause_date");
                    }
                    // An end before the start is refused above; the start alone is checked
                    // here.
                    let pause = Pause {
                        from,
                        until: until.filter(|until| *until > from),
                    };
                    let span = |pause: Option<Pause>| pause.map(|p| (p.from, p.until));
                    // A pause that reaches a locked date must cover it as the current one
                    // does; one that starts on an open date replaces the current one from
                    // there.
                    if reaches_locked(span(Some(pause)), span(current.pause), open) {
                        let old = current.pause;
                        let from_changed =
                            self.pause_date.is_sent() && old.map(|p| p.from) != Some(from);
                        let until_changed =
                            self.resume_date.is_sent() && old.and_then(|p| p.until) != until;
                        if from_changed {
                            errors.add("pause_date", locked(open));
                        }
                        if until_changed || !from_changed {
                            errors.add("resume_date", locked(open));
                        }
                    }
                    next.pause = Some(pause);
                }
            }
        }

        // Skipped dates: each a delivery date of the order; a locked one may stay in the list
        // (it was skipped), not join it.
        if let Sent::Given(dates) = &self.skipped_dates {
            for &(i, date) in dates {
                let name = || format!("skipped_dates[{i}]");
                if date < open {
                    // In the list the order shows (a locked date joins it only when it was
                    // skipped already), or skipped in force on it (a list that left it out
                    // since). The first holds when the history no longer holds the date's
                    // versions (folded into its frozen list).
                    let listed = |lifecycle: &Lifecycle| {
                        lifecycle.skipped_dates.binary_search(&date).is_ok()
                    };
                    let skipped = listed(current) || listed(history.lifecycle_on(date));
                    let day = |held: bool| held.then_some((date, Some(date.plus(1))));
                    if reaches_locked(day(true), day(skipped), open) {
                        errors.add(name(), locked(open));
                    }
                } else if !scheduled.is_scheduled(date) {
                    errors.add(name(), "is not a delivery date of the order");
                }
            }
            let mut dates: Vec<Day> = dates.iter().map(|&(_, date)| date).collect();
            dates.sort_unstable();
            next.skipped_dates = dates;
        }
        next
    }
}

/// Reads `skipped_dates`: `null` is none; a list of at most [`MAX_SKIPPED_DATES`] distinct
/// `YYYY-MM-DD` dates, each kept with its place in the list.
fn read_skipped_dates(value: Field<'_>, refused: &mut FieldErrors) -> Sent<Vec<(usize, Day)>> {
    match value {
        Field::Absent => Sent::Absent,
        Field::Null => Sent::Given(Vec::new()),
        Field::Present(Value::Array(items)) if items.len() > MAX_SKIPPED_DATES => {
            refused.add(
                "skipped_dates",
                format!("has too many dates (maximum is {MAX_SKIPPED_DATES})"),
            );
            Sent::Refused
        }
        Field::Present(Value::Array(items)) => {
            let mut dates: Vec<(usize, Day)> = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let name = format!("skipped_dates[{i}]");
                match item.as_str().and_then(parse_iso_date) {
                    None => refused.add(name, INVALID),
                    Some(date) if dates.iter().any(|&(_, d)| d == date) => {
                        refused.add(name, "is listed more than once")
                    }
                    Some(date) => dates.push((i, date)),
                }
            }
            Sent::Given(dates)
        }
        Field::Present(_) => {
            refused.add("skipped_dates", INVALID);
            Sent::Refused
        }
    }
}

/// What a change is checked against besides the order.
#[derive(Debug, Clone, Copy)]
pub struct ChangeContext<'a> {
    /// The order's webstore: its boxes, time zone and cut-off.
    pub webstore: &'a Webstore,
    /// The days the customer's delivery service delivers on.
    pub delivery_days: WeekDays,
    /// Now, Unix seconds (the clock's reading, passed in).
    pub now: i64,
}

/// The one rule of a change and the locked dates: whether the dates `[from, until)` (`until`
/// `None`: on and on) that a change's wording withholds reach a locked date (one before
/// `open`) otherwise than the dates the order withholds already for the same reason
/// (`held`). A change may say what a locked date got; it may never say anything else of it.
pub fn reaches_locked(
    wording: Option<(Day, Option<Day>)>,
    held: Option<(Day, Option<Day>)>,
    open: Day,
) -> bool {
    let locked_part = |span: Option<(Day, Option<Day>)>| {
        let (from, until) = span?;
        let end = until.map_or(open, |until| until.min(open));
        (from < end).then_some((from, end))
    };
    let claimed = locked_part(wording);
    claimed.is_some() && claimed != locked_part(held)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::catalogue::Catalogue;
    use crate::domain::halts::Halts;
    use crate::domain::order::content::OrderContent;
    use crate::domain::order::history::Withheld;
    use serde_json::json;
    use std::sync::Arc;

    /// The demo webstore: London, cut-off 18:00 three days before.
    fn webstore() -> Arc<Webstore> {
        Catalogue::demo(0).webstores()[0].clone()
    }

    fn day(text: &str) -> Day {
        Day::of(text.parse().unwrap())
    }

    /// Unix seconds of a London local time.
    fn london(local: &str) -> i64 {
        local
            .parse::<jiff::civil::DateTime>()
            .unwrap()
            .to_zoned_datetime(jiff::tz::TimeZone::get("Europe/London").unwrap())
            .unwrap()
            .timestamp()
            .as_second()
    }

    /// Monday 2026-11-23, noon: Thursday the 26th is the first open date.
    fn now() -> i64 {
        london("2026-11-23T12:00:00")
    }

    /// A weekly order of box 217 on Thursdays since 1970, with two apple juices.
    fn history() -> OrderHistory {
        OrderContent::weekly_for_test(217)
            .with_extras(&[(28, 2)])
            .placed(1, 1, 0)
            .history
    }

    fn patch_at(
        history: &OrderHistory,
        body: Value,
        now: i64,
    ) -> Result<OrderHistory, FieldErrors> {
        let webstore = webstore();
        let context = ChangeContext {
            webstore: &webstore,
            delivery_days: WeekDays::from_bits(0b011_1110),
            now,
        };
        OrderChange::parse(body.as_object().unwrap()).apply(history, &context)
    }

    fn patch(history: &OrderHistory, body: Value) -> Result<OrderHistory, FieldErrors> {
        patch_at(history, body, now())
    }

    /// The refusal's fields and messages, by field: a change names them in the order it
    /// finds them, reading first and checking after.
    fn refused(history: &OrderHistory, body: Value) -> Vec<(String, Vec<String>)> {
        let mut found: Vec<(String, Vec<String>)> = patch(history, body)
            .unwrap_err()
            .iter()
            .map(|(field, messages)| (field.to_owned(), messages.to_vec()))
            .collect();
        found.sort();
        found
    }

    fn fields(history: &OrderHistory, body: Value) -> Vec<String> {
        refused(history, body).into_iter().map(|(f, _)| f).collect()
    }

    fn on(history: &OrderHistory, date: &str) -> Result<u64, Withheld> {
        history
            .on(day(date), &Halts::none())
            .map(|delivery| delivery.box_id)
    }

    const EARLIEST: &str = "the earliest date it can take effect is 2026-11-26";

    #[test]
    fn nothing_to_change_returns_the_history_as_it_was() {
        let h = history();
        assert_eq!(patch(&h, json!({})), Ok(h.clone()));
        assert_eq!(
            patch(&h, json!({"box_id": 217, "extras_one_off": false})),
            Ok(h.clone())
        );
        assert_eq!(
            patch(&h, json!({"skipped_dates": [], "active": true})),
            Ok(h)
        );
    }

    #[test]
    fn read_only_and_unknown_fields_are_named() {
        let found = refused(
            &history(),
            json!({"id": 1, "customer_id": 2, "created_at": "x", "colour": "red", "box_id": 218}),
        );
        let names: Vec<&str> = found.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(names, ["colour", "created_at", "customer_id", "id"]);
        assert_eq!(found[3].1, [READ_ONLY]);
        assert_eq!(found[0].1, [UNKNOWN]);
    }

    #[test]
    fn every_failing_field_is_named_at_once() {
        let body = json!({"box_id": 999, "pause_date": "2026-11-19", "resume_date": "2026-11-01",
                          "skipped_dates": ["x", "2026-11-27"], "active": "maybe"});
        assert_eq!(
            fields(&history(), body),
            [
                "active",
                "box_id",
                "pause_date",
                "resume_date",
                "skipped_dates[0]",
                "skipped_dates[1]"
            ]
        );
    }

    #[test]
    fn a_change_of_box_is_in_force_from_the_first_delivery_after_the_cut_off() {
        let h = patch(&history(), json!({"box_id": 218})).unwrap();
        assert_eq!(on(&h, "2026-11-19"), Ok(217));
        assert_eq!(on(&h, "2026-11-26"), Ok(218));
        assert_eq!(h.latest().effective, day("2026-11-26"));
        assert_eq!(h.updated_at(), now());
        // An effective date later on keeps the box until then.
        let later = patch(
            &history(),
            json!({"box_id": 218, "effective_date": "2026-12-10"}),
        )
        .unwrap();
        assert_eq!(on(&later, "2026-12-03"), Ok(217));
        assert_eq!(on(&later, "2026-12-10"), Ok(218));
        // A second change from an earlier date replaces the planned one.
        let again = patch(&later, json!({"exclusions": [240]})).unwrap();
        assert_eq!(again.contents().len(), 2);
        let delivery = again.on(day("2026-12-10"), &Halts::none()).unwrap();
        assert_eq!((delivery.box_id, delivery.exclusions), (218, &[240][..]));
    }

    #[test]
    fn a_locked_effective_date_is_refused_with_the_earliest_date() {
        let found = refused(
            &history(),
            json!({"box_id": 218, "effective_date": "2026-11-25"}),
        );
        assert_eq!(found[0].0, "effective_date");
        assert!(found[0].1[0].ends_with(EARLIEST), "{found:?}");
        // Just after 18:00, the 26th is locked too.
        let evening = london("2026-11-23T18:00:00");
        let err = patch_at(
            &history(),
            json!({"box_id": 218, "effective_date": "2026-11-26"}),
            evening,
        )
        .unwrap_err();
        assert!(err.to_string().contains("2026-11-27"), "{err}");
        assert_eq!(
            fields(&history(), json!({"effective_date": "2026-12-10"})),
            ["effective_date"],
            "an effective date alone changes nothing"
        );
        assert_eq!(
            fields(
                &history(),
                json!({"box_id": 218, "effective_date": "10/12/2026"})
            ),
            ["effective_date"]
        );
    }

    #[test]
    fn the_create_rules_apply_to_the_changed_order() {
        // Box 218 takes at most two extras in all and no substitutions.
        assert_eq!(
            fields(
                &history(),
                json!({"box_id": 218, "extras": [{"id": 28, "quantity": 3}]})
            ),
            ["extras"]
        );
        assert_eq!(
            fields(
                &history(),
                json!({"substitutions": [240], "exclusions": [240]})
            ),
            ["substitutions"]
        );
        assert_eq!(
            fields(&history(), json!({"frequency": "daily"})),
            ["frequency"]
        );
        assert_eq!(
            fields(&history(), json!({"week_days": [0]})),
            ["week_days"],
            "a Sunday"
        );
        // A single delivery on a Saturday: the customer's service does not deliver then.
        assert_eq!(
            fields(
                &history(),
                json!({"frequency": "single", "effective_date": "2026-11-28"})
            ),
            ["effective_date"]
        );
    }

    #[test]
    fn a_new_schedule_counts_its_fortnights_from_the_effective_date() {
        let h = patch(
            &history(),
            json!({"frequency": "fortnightly", "week_days": [1], "effective_date": "2026-12-07"}),
        )
        .unwrap();
        assert_eq!(on(&h, "2026-12-03"), Ok(217), "weekly Thursdays until then");
        assert_eq!(on(&h, "2026-12-10"), Err(Withheld::NotScheduled));
        assert_eq!(on(&h, "2026-12-07"), Ok(217));
        assert_eq!(on(&h, "2026-12-14"), Err(Withheld::NotScheduled));
        assert_eq!(on(&h, "2026-12-21"), Ok(217));
        // A change of box alone keeps the schedule and its fortnights.
        let boxed = patch(&h, json!({"box_id": 218, "effective_date": "2026-12-21"})).unwrap();
        assert_eq!(boxed.latest().content.schedule, h.latest().content.schedule);
        assert_eq!(on(&boxed, "2026-12-21"), Ok(218));
    }

    #[test]
    fn one_off_extras_go_once_and_not_again_with_a_new_box() {
        let h = patch(&history(), json!({"extras_one_off": true})).unwrap();
        let extras =
            |h: &OrderHistory, date: &str| h.on(day(date), &Halts::none()).unwrap().extras.len();
        assert_eq!(extras(&h, "2026-11-19"), 1, "every week until then");
        assert_eq!(
            extras(&h, "2026-11-26"),
            1,
            "once more, the first time one-off"
        );
        assert_eq!(extras(&h, "2026-12-03"), 0);
        let later = london("2026-12-07T12:00:00");
        let boxed = patch_at(&h, json!({"box_id": 218}), later).unwrap();
        assert_eq!(
            extras(&boxed, "2026-12-10"),
            0,
            "a new box does not bring them back"
        );
        let more = patch_at(&h, json!({"extras": [{"id": 28, "quantity": 1}]}), later).unwrap();
        assert_eq!(extras(&more, "2026-12-10"), 1, "new extras come once");
        assert_eq!(extras(&more, "2026-12-17"), 0);
    }

    #[test]
    fn pauses_take_effect_from_open_dates_only() {
        let h = patch(
            &history(),
            json!({"pause_date": "2026-12-03", "resume_date": "2026-12-17"}),
        )
        .unwrap();
        assert_eq!(on(&h, "2026-11-26"), Ok(217));
        assert_eq!(on(&h, "2026-12-03"), Err(Withheld::Paused));
        assert_eq!(on(&h, "2026-12-10"), Err(Withheld::Paused));
        assert_eq!(on(&h, "2026-12-17"), Ok(217));

        let found = refused(&history(), json!({"pause_date": "2026-11-19"}));
        assert_eq!(found[0].0, "pause_date");
        assert!(found[0].1[0].ends_with(EARLIEST));
        assert_eq!(
            fields(
                &history(),
                json!({"pause_date": "2026-12-03", "resume_date": "2026-12-03"})
            ),
            ["resume_date"]
        );
        assert_eq!(
            fields(&history(), json!({"resume_date": "2026-12-03"})),
            ["resume_date"]
        );
        assert_eq!(
            fields(
                &history(),
                json!({"pause_date": null, "resume_date": "2026-12-03"})
            ),
            ["resume_date"]
        );
    }

    #[test]
    fn a_pause_in_progress_ends_from_the_first_open_date_and_keeps_its_locked_dates() {
        let early = london("2026-11-09T12:00:00");
        let paused = patch_at(&history(), json!({"pause_date": "2026-11-12"}), early).unwrap();
        // Two weeks on, the 12th and the 19th are locked and paused.
        let ended = patch(&paused, json!({"pause_date": null})).unwrap();
        assert_eq!(on(&ended, "2026-11-19"), Err(Withheld::Paused));
        assert_eq!(on(&ended, "2026-11-26"), Ok(217));
        assert_eq!(ended.lifecycle().pause, None);
        // Resuming on a locked date would deliver a date packed as paused.
        let found = refused(&paused, json!({"resume_date": "2026-11-19"}));
        assert_eq!(found[0].0, "resume_date");
        assert!(found[0].1[0].ends_with(EARLIEST));
        let resumed = patch(&paused, json!({"resume_date": "2026-12-03"})).unwrap();
        assert_eq!(on(&resumed, "2026-11-26"), Err(Withheld::Paused));
        assert_eq!(on(&resumed, "2026-12-03"), Ok(217));
        // A pause over, stretched again across locked dates: refused.
        let over = patch_at(&paused, json!({"resume_date": "2026-11-19"}), early).unwrap();
        assert_eq!(
            fields(&over, json!({"resume_date": "2026-12-10"})),
            ["resume_date"]
        );
        // Sent back as it is, it is no change at all.
        assert_eq!(
            patch(
                &over,
                json!({"pause_date": "2026-11-12", "resume_date": "2026-11-19"})
            ),
            Ok(over.clone())
        );
    }

    #[test]
    fn skipped_dates_are_delivery_dates_and_locked_ones_stay_as_they_were() {
        let h = patch(
            &history(),
            json!({"skipped_dates": ["2026-12-10", "2026-12-03"]}),
        )
        .unwrap();
        assert_eq!(
            h.lifecycle().skipped_dates,
            [day("2026-12-03"), day("2026-12-10")]
        );
        assert_eq!(on(&h, "2026-12-03"), Err(Withheld::Skipped));
        assert_eq!(on(&h, "2026-12-17"), Ok(217));

        let found = refused(
            &history(),
            json!({"skipped_dates": ["2026-12-04", "2026-11-19", "2026-12-03", "2026-12-03", 5]}),
        );
        let names: Vec<&str> = found.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            names,
            [
                "skipped_dates[0]",
                "skipped_dates[1]",
                "skipped_dates[3]",
                "skipped_dates[4]"
            ]
        );
        assert_eq!(found[0].1, ["is not a delivery date of the order"]);
        assert!(found[1].1[0].ends_with(EARLIEST));
        let many: Vec<String> = (0..101)
            .map(|w| day("2026-12-03").plus(7 * w).date().to_string())
            .collect();
        assert_eq!(
            fields(&history(), json!({"skipped_dates": many})),
            ["skipped_dates"]
        );
        assert_eq!(
            fields(&history(), json!({"skipped_dates": "2026-12-03"})),
            ["skipped_dates"]
        );

        // Two weeks on, the 3rd is locked: it may stay in the list, and left out it stays
        // skipped; the 10th is open and can be taken out.
        let later = london("2026-12-07T12:00:00");
        let kept = patch_at(&h, json!({"skipped_dates": ["2026-12-03"]}), later).unwrap();
        assert_eq!(on(&kept, "2026-12-10"), Ok(217));
        let dropped = patch_at(&h, json!({"skipped_dates": []}), later).unwrap();
        assert_eq!(on(&dropped, "2026-12-03"), Err(Withheld::Skipped));
        assert!(dropped.lifecycle().skipped_dates.is_empty());
    }

    #[test]
    fn cancelling_and_taking_back() {
        let cancelled = patch(&history(), json!({"active": false})).unwrap();
        assert_eq!(cancelled.lifecycle().cancel_date, Some(day("2026-11-26")));
        assert!(!cancelled.lifecycle().active());
        assert_eq!(on(&cancelled, "2026-11-19"), Ok(217));
        assert_eq!(on(&cancelled, "2026-11-26"), Err(Withheld::Cancelled));
        let later = patch(
            &history(),
            json!({"active": "false", "cancel_date": "2026-12-10"}),
        )
        .unwrap();
        assert_eq!(on(&later, "2026-12-03"), Ok(217));
        assert_eq!(on(&later, "2026-12-10"), Err(Withheld::Cancelled));
        // Moved while still to come; taken back from the first open date.
        let moved = patch(&later, json!({"cancel_date": "2026-12-17"})).unwrap();
        assert_eq!(on(&moved, "2026-12-10"), Ok(217));
        let two_weeks_on = london("2026-12-21T12:00:00");
        let back = patch_at(&moved, json!({"active": true}), two_weeks_on).unwrap();
        assert!(back.lifecycle().active());
        assert_eq!(
            on(&back, "2026-12-17"),
            Err(Withheld::Cancelled),
            "locked: stays cancelled"
        );
        assert_eq!(on(&back, "2026-12-24"), Ok(217));

        let found = refused(
            &history(),
            json!({"active": false, "cancel_date": "2026-11-19"}),
        );
        assert_eq!(found[0].0, "cancel_date");
        assert!(found[0].1[0].ends_with(EARLIEST));
        assert_eq!(
            fields(&history(), json!({"cancel_date": "2026-12-10"})),
            ["cancel_date"]
        );
        assert_eq!(
            fields(
                &history(),
                json!({"active": true, "cancel_date": "2026-12-10"})
            ),
            ["cancel_date"]
        );
        assert_eq!(fields(&history(), json!({"active": null})), ["active"]);
        // Cancelled on a locked date: moving the cancellation before it is refused.
        assert_eq!(
            fields(&cancelled, json!({"cancel_date": "2026-11-19"})),
            ["cancel_date"]
        );
    }

    #[test]
    fn a_clock_set_back_cannot_reach_a_date_locked_by_an_earlier_change() {
        let h = patch(&history(), json!({"skipped_dates": ["2026-12-03"]})).unwrap();
        assert_eq!(h.settled_before(), day("2026-11-26"));
        let a_week_earlier = london("2026-11-16T12:00:00");
        let found = refused(&h, json!({"box_id": 218, "effective_date": "2026-11-19"}));
        assert_eq!(found[0].0, "effective_date");
        let err = patch_at(
            &h,
            json!({"box_id": 218, "effective_date": "2026-11-19"}),
            a_week_earlier,
        )
        .unwrap_err();
        assert!(err.to_string().ends_with(EARLIEST), "{err}");
        let boxed = patch_at(&h, json!({"box_id": 218}), a_week_earlier).unwrap();
        assert_eq!(on(&boxed, "2026-11-19"), Ok(217));
    }

    /// Fields whose `null` is "not given", and those whose `null` is their "none" (and how
    /// else "none" is spelt, where it is).
    const NULL_IS_ABSENT: [&str; 6] = [
        "box_id",
        "frequency",
        "extras_one_off",
        "week_days",
        "effective_date",
        "cancel_date",
    ];
    const NULL_IS_EMPTY: [&str; 4] = ["extras", "exclusions", "substitutions", "skipped_dates"];

    /// A change of any mix of fields, each with a value from a small pool of valid and
    /// invalid ones (so that changes that are refused are covered too).
    fn any_change() -> impl proptest::strategy::Strategy<Value = Map<String, Value>> {
        use proptest::prelude::*;
        let pool: Vec<(&'static str, Vec<Value>)> = vec![
            ("box_id", vec![json!(217), json!(218), json!(219), json!(9)]),
            (
                "extras",
                vec![
                    json!([]),
                    json!([{"id": 28, "quantity": 1}]),
                    json!([{"id": 29, "quantity": 3}, {"id": 30, "quantity": 1}]),
                ],
            ),
            (
                "exclusions",
                vec![json!([]), json!([240]), json!([241, 242])],
            ),
            ("substitutions", vec![json!([]), json!([243])]),
            ("extras_one_off", vec![json!(true), json!(false)]),
            (
                "frequency",
                vec![json!("single"), json!("weekly"), json!("fortnightly")],
            ),
            ("week_days", vec![json!([4]), json!([2, 4]), json!([1])]),
            (
                "effective_date",
                vec![json!("2026-12-03"), json!("2026-11-24")],
            ),
            ("pause_date", vec![json!("2026-12-10"), json!(null)]),
            ("resume_date", vec![json!("2026-12-24"), json!(null)]),
            ("skipped_dates", vec![json!([]), json!(["2026-12-17"])]),
            ("active", vec![json!(true), json!(false)]),
            ("cancel_date", vec![json!("2027-01-07")]),
        ];
        let fields: Vec<_> = pool
            .into_iter()
            .map(|(name, values)| {
                proptest::option::of(proptest::sample::select(values))
                    .prop_map(move |value| value.map(|value| (name, value)))
            })
            .collect();
        fields.prop_map(|chosen| {
            chosen
                .into_iter()
                .flatten()
                .map(|(name, value)| (name.to_owned(), value))
                .collect()
        })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// A cart that sends `null` for every field it does not mean to change changes
        /// nothing else: whatever the change (refused ones too), adding `null` for a field
        /// whose null is "not given" makes the same outcome as leaving it out, and `null` for
        /// a list is the empty list, on a plain order and on a paused one.
        #[test]
        fn nulls_for_fields_not_meant_to_change_change_nothing_else(
            change in any_change(),
            paused in proptest::bool::ANY,
        ) {
            let plain = history();
            let base = if paused {
                patch(&plain, json!({"pause_date": "2026-12-03"})).unwrap()
            } else {
                plain
            };
            let outcome = patch(&base, Value::Object(change.clone()));
            let mut with_nulls = change.clone();
            for name in NULL_IS_ABSENT {
                with_nulls.entry(name).or_insert(Value::Null);
            }
            proptest::prop_assert_eq!(
                patch(&base, Value::Object(with_nulls)),
                outcome.clone(),
                "nulls for the fields not given: {:?}", change
            );
            for name in NULL_IS_EMPTY {
                if change.contains_key(name) {
                    continue;
                }
                let mut null = change.clone();
                null.insert(name.to_owned(), Value::Null);
                let mut empty = change.clone();
                empty.insert(name.to_owned(), json!([]));
                proptest::prop_assert_eq!(
                    patch(&base, Value::Object(null)),
                    patch(&base, Value::Object(empty)),
                    "{} null and empty: {:?}", name, change
                );
            }
        }
    }
}
