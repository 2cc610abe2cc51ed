//! Changing an order (`PATCH /v1/orders/{id}` with `{"order": {...}}`): the body's fields
//! checked against the order's history, the catalogue, the cut-off and "now", every failing
//! field named at once, and the new history made. Pure: a refused change leaves the history
//! as it was, since a new one is returned only on success.
//!
//! What a change means:
//!
//! - Everything takes effect from the first open date (`cutoff`) or later, so the deliveries
//!   of a locked date never change; a change whose wording would reach a locked date (a pause
//!   starting on one, a locked date added to `skipped_dates`, an `effective_date` or a
//!   `cancel_date` on one) is refused naming the field, with the earliest date it could take
//!   effect.
//! - `box_id`, `extras`, `exclusions`, `substitutions`, `extras_one_off`, `frequency`,
//!   `week_days`: the order as its answer shows it (the latest content) with these fields
//!   replaced, checked by the create rules (`order::validate_order`), in force from
//!   `effective_date` (default: the first delivery date after the cut-off). Versions planned
//!   from that date or later give way to it; earlier ones stay. A new `frequency` or
//!   `week_days` starts the schedule on the effective date (a fortnight counts from its week).
//! - `pause_date`, `resume_date`: the pause (`"pause_date": null` ends it from the first open
//!   date); `skipped_dates`: the whole list; `active: false` with an optional `cancel_date`
//!   (default: the first delivery date after the cut-off); `active: true`: delivered again
//!   from the first open date. These are the order's lifecycle from the first open date on.
//! - Any other field is refused by name: the server's own (`id`, `customer_id`,
//!   `created_at`, `updated_at`) as read-only, the rest as unknown.
//!
//! Must not touch: the history's representation and the delivery of a date (`lifecycle`), the
//! create rules themselves (`order`), the customer's halts (`halts`).

use serde_json::{json, Map, Value};

use super::catalogue::Webstore;
use super::fields::{boolean, slot, BodyFields, Field, FieldErrors, INVALID};
use super::lifecycle::{
    ContentVersion, Lifecycle, LifecycleVersion, OrderHistory, Pause, MAX_SKIPPED_DATES,
};
use super::order::{validate_order, CustomerCheck, NewOrder, OrderBody};
use super::schedule::{parse_iso_date, parse_start_date, Day, Frequency, ScheduleRules, WeekDays};

/// Fields of an order that only the server sets.
pub const READ_ONLY_FIELDS: [&str; 4] = ["id", "customer_id", "created_at", "updated_at"];

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

/// An order change's body as the rules read it: each field they know, as sent (absent,
/// `null` or a value), and the names of the other keys, which are refused.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OrderPatch {
    box_id: Option<Value>,
    extras: Option<Value>,
    exclusions: Option<Value>,
    substitutions: Option<Value>,
    extras_one_off: Option<Value>,
    frequency: Option<Value>,
    week_days: Option<Value>,
    effective_date: Option<Value>,
    pause_date: Option<Value>,
    resume_date: Option<Value>,
    skipped_dates: Option<Value>,
    active: Option<Value>,
    cancel_date: Option<Value>,
    /// Keys that are not fields a change may set, in the order sent.
    refused: Vec<String>,
}

impl BodyFields for OrderPatch {
    fn slot(&mut self, key: &str) -> Option<&mut Option<Value>> {
        Some(match key {
            "box_id" => &mut self.box_id,
            "extras" => &mut self.extras,
            "exclusions" => &mut self.exclusions,
            "substitutions" => &mut self.substitutions,
            "extras_one_off" => &mut self.extras_one_off,
            "frequency" => &mut self.frequency,
            "week_days" => &mut self.week_days,
            "effective_date" => &mut self.effective_date,
            "pause_date" => &mut self.pause_date,
            "resume_date" => &mut self.resume_date,
            "skipped_dates" => &mut self.skipped_dates,
            "active" => &mut self.active,
            "cancel_date" => &mut self.cancel_date,
            _ => return None,
        })
    }
}

impl OrderPatch {
    /// The change of a JSON object (already unwrapped from `{"order": …}`).
    pub fn from_object(object: Map<String, Value>) -> OrderPatch {
        let mut patch = OrderPatch::default();
        for (key, value) in object {
            match patch.slot(&key) {
                Some(slot) => *slot = Some(value),
                None => patch.refused.push(key),
            }
        }
        patch
    }

    /// Whether it sets any field of the order's content.
    fn changes_content(&self) -> bool {
        [
            &self.box_id,
            &self.extras,
            &self.exclusions,
            &self.substitutions,
            &self.extras_one_off,
            &self.frequency,
            &self.week_days,
        ]
        .iter()
        .any(|field| field.is_some())
    }
}

/// What a change is checked against besides the order.
#[derive(Debug, Clone, Copy)]
pub struct PatchContext<'a> {
    /// The order's webstore: its boxes, time zone and cut-off.
    pub webstore: &'a Webstore,
    /// The days the customer's delivery service delivers on.
    pub delivery_days: WeekDays,
    /// Now, Unix seconds (the clock's reading, passed in).
    pub now: i64,
}

/// The history after `patch`, or every failing field. A change that changes nothing (an
/// empty body, or the values the order has) returns the history as it was, `updated_at`
/// included, so the caller can tell (`==`) that there is nothing to store.
pub fn patch_order(
    history: &OrderHistory,
    patch: &OrderPatch,
    context: &PatchContext<'_>,
) -> Result<OrderHistory, FieldErrors> {
    let mut errors = FieldErrors::new();
    for key in &patch.refused {
        let message = if READ_ONLY_FIELDS.contains(&key.as_str()) {
            READ_ONLY
        } else {
            UNKNOWN
        };
        errors.add(key.clone(), message);
    }
    let webstore = context.webstore;
    let open = webstore
        .cutoff
        .first_open_day(&webstore.zone, context.now)
        .max(history.settled_before());

    let contents = patch_content(history, patch, context, open, &mut errors);
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
    let lifecycle = patch_lifecycle(history, scheduled, patch, open, &mut errors);
    if !errors.is_empty() {
        return Err(errors);
    }

    let mut lifecycles = history.lifecycles().to_vec();
    let lifecycle_changed = lifecycle != *history.lifecycle();
    if lifecycle_changed {
        // Versions are made at the first open date, which never goes back (`settled_before`),
        // so only the last can be at `open`: replaced, never followed.
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

/// The content versions after the change, `None` when it changes no content field.
fn patch_content(
    history: &OrderHistory,
    patch: &OrderPatch,
    context: &PatchContext<'_>,
    open: Day,
    errors: &mut FieldErrors,
) -> Option<Vec<ContentVersion>> {
    let effective = match parse_start_date(slot(&patch.effective_date)) {
        Ok(date) => date,
        Err(message) => {
            errors.add("effective_date", message);
            return None;
        }
    };
    if !patch.changes_content() {
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
    let mut body = content_json(current);
    for (key, value) in [
        ("box_id", &patch.box_id),
        ("extras", &patch.extras),
        ("exclusions", &patch.exclusions),
        ("substitutions", &patch.substitutions),
        ("extras_one_off", &patch.extras_one_off),
        ("frequency", &patch.frequency),
    ] {
        if let Some(value) = value {
            body.insert(key.to_owned(), value.clone());
        }
    }
    let frequency = match slot(&patch.frequency) {
        Field::Present(Value::String(text)) => Frequency::parse(text).unwrap_or(current.frequency),
        _ => current.frequency,
    };
    let week_days = match slot(&patch.week_days) {
        Field::Present(value) => Some(value.clone()),
        Field::Absent | Field::Null => None,
    };
    let same_days = week_days.as_ref().is_none_or(|days| {
        super::schedule::parse_week_days(Field::Present(days))
            .is_ok_and(|days| days == Some(current.schedule.week_days))
    });
    let schedule_changes = frequency != current.frequency || !same_days;
    let delivery_days = if schedule_changes {
        body.insert("start_date".into(), json!(effective.date().to_string()));
        match week_days {
            Some(days) => {
                body.insert("week_days".into(), days);
            }
            // A single delivery is on its start date's weekday.
            None if frequency == Frequency::Single => {
                body.remove("week_days");
            }
            None => {}
        }
        context.delivery_days
    } else {
        // The schedule stays as it is: it met the rules when it was set.
        WeekDays::from_bits(0x7f)
    };
    let rules = ScheduleRules {
        delivery_days,
        today: effective.plus(-1),
    };
    let content = match validate_order(
        &OrderBody::from_object(body),
        context.webstore,
        CustomerCheck::Found(rules),
    ) {
        Ok(mut content) => {
            if !schedule_changes {
                content.schedule = current.schedule;
            }
            content
        }
        Err(failed) => {
            for (field, messages) in failed.iter() {
                let field = if field == "start_date" {
                    "effective_date"
                } else {
                    field
                };
                for message in messages {
                    errors.add(field, message.clone());
                }
            }
            return None;
        }
    };
    if !errors.is_empty() {
        return None;
    }

    // One-off extras count afresh only when they change, so that a cart sending the whole
    // order back with a new box does not send them twice.
    let extras_changed =
        content.extras != current.extras || content.extras_one_off != current.extras_one_off;
    let extras_since = if extras_changed || latest.extras_since >= effective {
        effective
    } else {
        latest.extras_since
    };
    let mut contents: Vec<ContentVersion> = history
        .contents()
        .iter()
        .filter(|version| version.effective < effective)
        .cloned()
        .collect();
    let in_force = contents.last();
    let unchanged = in_force.is_some_and(|version| {
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
    Some(contents)
}

/// The order's content as a body of the create rules.
fn content_json(content: &NewOrder) -> Map<String, Value> {
    let extras: Vec<Value> = content
        .extras
        .iter()
        .map(|line| json!({"id": line.id, "quantity": line.quantity}))
        .collect();
    let week_days: Vec<u8> = content.schedule.week_days.days().collect();
    let body = json!({
        "box_id": content.box_id,
        "frequency": content.frequency.as_str(),
        "extras_one_off": content.extras_one_off,
        "extras": extras,
        "exclusions": content.exclusions,
        "substitutions": content.substitutions,
        "start_date": content.schedule.start.date().to_string(),
        "week_days": week_days,
    });
    match body {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// The lifecycle after the change (the latest one when it changes none of its fields).
/// `scheduled` is the history with the change's content, whose schedule skipped dates and
/// default dates follow.
fn patch_lifecycle(
    history: &OrderHistory,
    scheduled: &OrderHistory,
    patch: &OrderPatch,
    open: Day,
    errors: &mut FieldErrors,
) -> Lifecycle {
    let current = history.lifecycle();
    let mut next = current.clone();
    let first_delivery = || scheduled.next_scheduled(open).unwrap_or(open);

    // Cancellation.
    let active = match slot(&patch.active) {
        Field::Absent => None,
        Field::Null => {
            errors.add("active", NOT_A_BOOLEAN);
            None
        }
        Field::Present(value) => {
            let flag = boolean(value);
            if flag.is_none() {
                errors.add("active", NOT_A_BOOLEAN);
            }
            flag
        }
    };
    let cancel_date = match parse_start_date(slot(&patch.cancel_date)) {
        Ok(date) => date,
        Err(message) => {
            errors.add("cancel_date", message);
            None
        }
    };
    let cancelling = active == Some(false) || (active.is_none() && current.cancel_date.is_some());
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
    if cancel_date.is_some() && !cancelling && !errors.has("active") {
        errors.add("cancel_date", "can only be given with \"active\": false");
    }
    let cancelled_span = |cancel: Option<Day>| cancel.map(|from| (from, None));
    let cancelled_locked = locked_part(cancelled_span(next.cancel_date), open);
    if cancelled_locked.is_some()
        && cancelled_locked != locked_part(cancelled_span(current.cancel_date), open)
    {
        errors.add("cancel_date", locked(open));
    }

    // The pause.
    let pause_date = parse_start_date(slot(&patch.pause_date));
    let resume_date = parse_start_date(slot(&patch.resume_date));
    if let Err(message) = pause_date {
        errors.add("pause_date", message);
    }
    if let Err(message) = resume_date {
        errors.add("resume_date", message);
    }
    if let (Ok(pause_date), Ok(resume_date)) = (pause_date, resume_date) {
        let pause_given = patch.pause_date.is_some();
        let resume_given = patch.resume_date.is_some();
        let from = if pause_given {
            pause_date
        } else {
            current.pause.map(|pause| pause.from)
        };
        let until = if resume_given {
            resume_date
        } else {
            current.pause.and_then(|pause| pause.until)
        };
        match from {
            None if resume_date.is_some() => {
                errors.add("resume_date", "can only be given with a pause_date");
            }
            None => next.pause = None,
            Some(from) => {
                if until.is_some_and(|until| until <= from) {
                    errors.add("resume_date", "must be after pause_date");
                }
                // An end before the start is refused above; the start alone is checked here.
                let pause = Pause {
                    from,
                    until: until.filter(|until| *until > from),
                };
                let as_span = |pause: Option<Pause>| pause.map(|p| (p.from, p.until));
                // A pause that reaches a locked date must cover it as the current one does; one
                // that starts on an open date replaces the current one from there.
                let pause_locked = locked_part(as_span(Some(pause)), open);
                if pause_locked.is_some()
                    && pause_locked != locked_part(as_span(current.pause), open)
                {
                    let old = current.pause;
                    let from_changed = pause_given && old.map(|p| p.from) != Some(from);
                    let until_changed = resume_given && old.and_then(|p| p.until) != until;
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

    // Skipped dates.
    match slot(&patch.skipped_dates) {
        Field::Absent => {}
        Field::Null => next.skipped_dates = Vec::new(),
        Field::Present(Value::Array(items)) if items.len() > MAX_SKIPPED_DATES => {
            errors.add(
                "skipped_dates",
                format!("has too many dates (maximum is {MAX_SKIPPED_DATES})"),
            );
        }
        Field::Present(Value::Array(items)) => {
            let mut dates = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let name = format!("skipped_dates[{i}]");
                let Some(date) = item.as_str().and_then(parse_iso_date) else {
                    errors.add(name, INVALID);
                    continue;
                };
                if dates.contains(&date) {
                    errors.add(name, "is listed more than once");
                    continue;
                }
                if date < open {
                    // A locked date may stay in the list, not join it.
                    let skipped = history
                        .lifecycle_on(date)
                        .skipped_dates
                        .binary_search(&date)
                        .is_ok();
                    if !skipped {
                        errors.add(name, locked(open));
                    }
                } else if !scheduled.is_scheduled(date) {
                    errors.add(name, "is not a delivery date of the order");
                }
                dates.push(date);
            }
            dates.sort_unstable();
            next.skipped_dates = dates;
        }
        Field::Present(_) => errors.add("skipped_dates", INVALID),
    }
    next
}

/// The part of `[from, until)` before `open` (the locked dates it covers), `None` when it
/// covers none.
fn locked_part(span: Option<(Day, Option<Day>)>, open: Day) -> Option<(Day, Day)> {
    let (from, until) = span?;
    let end = until.map_or(open, |until| until.min(open));
    (from < end).then_some((from, end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::catalogue::Catalogue;
    use crate::domain::halts::Halts;
    use crate::domain::lifecycle::Withheld;
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
        let order = NewOrder::weekly_for_test(217)
            .with_extras(&[(28, 2)])
            .placed(1, 1, 0);
        OrderHistory::new(&order)
    }

    fn patch_at(
        history: &OrderHistory,
        body: Value,
        now: i64,
    ) -> Result<OrderHistory, FieldErrors> {
        let webstore = webstore();
        let context = PatchContext {
            webstore: &webstore,
            delivery_days: WeekDays::from_bits(0b011_1110),
            now,
        };
        patch_order(
            history,
            &OrderPatch::from_object(body.as_object().cloned().unwrap()),
            &context,
        )
    }

    fn patch(history: &OrderHistory, body: Value) -> Result<OrderHistory, FieldErrors> {
        patch_at(history, body, now())
    }

    fn refused(history: &OrderHistory, body: Value) -> Vec<(String, Vec<String>)> {
        patch(history, body)
            .unwrap_err()
            .iter()
            .map(|(field, messages)| (field.to_owned(), messages.to_vec()))
            .collect()
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
        assert_eq!(names, ["id", "customer_id", "created_at", "colour"]);
        assert_eq!(found[0].1, [READ_ONLY]);
        assert_eq!(found[3].1, [UNKNOWN]);
    }

    #[test]
    fn every_failing_field_is_named_at_once() {
        let body = json!({"box_id": 999, "pause_date": "2026-11-19", "resume_date": "2026-11-01",
                          "skipped_dates": ["x", "2026-11-27"], "active": "maybe"});
        assert_eq!(
            fields(&history(), body),
            [
                "box_id",
                "active",
                "resume_date",
                "pause_date",
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
}
