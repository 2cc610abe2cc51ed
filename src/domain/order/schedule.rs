//! Order schedules: when each delivery of an order happens, and the defaults an order gets
//! when it does not say. A schedule is a start date and the weekdays of delivery; with the
//! order's frequency it decides the dates:
//!
//! - `single`: on the start date;
//! - `weekly`: on every date from the start date whose weekday is one of the days;
//! - `fortnightly`: as weekly, in the weeks an even number of weeks after the start date's
//!   week (weeks start on Sunday).
//!
//! Dates are civil dates of the webstore (`day::Day`), so the rules are integer arithmetic.
//! Pure: "today" is passed in. Must not touch: clocks, I/O.

use crate::domain::day::{Day, WeekDays};
use crate::domain::fields::{integer, Field, FieldErrors, BLANK, INVALID};

/// Message when a day is not one the customer's delivery service delivers on.
pub const NOT_A_DELIVERY_DAY: &str = "is not a delivery day of the delivery service";

/// How often a box is delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frequency {
    /// Once.
    Single,
    /// Every week.
    Weekly,
    /// Every other week.
    Fortnightly,
}

impl Frequency {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Frequency::Single => "single",
            Frequency::Weekly => "weekly",
            Frequency::Fortnightly => "fortnightly",
        }
    }

    /// The frequency of a wire name.
    pub(super) fn parse(text: &str) -> Option<Frequency> {
        match text {
            "single" => Some(Frequency::Single),
            "weekly" => Some(Frequency::Weekly),
            "fortnightly" => Some(Frequency::Fortnightly),
            _ => None,
        }
    }
}

/// When an order's deliveries happen, with its frequency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    /// The first date a delivery may happen on.
    pub start: Day,
    /// The weekdays of delivery.
    pub week_days: WeekDays,
}

impl Schedule {
    /// Whether an order of `frequency` on this schedule has a delivery on `date`.
    pub fn occurs_on(&self, frequency: Frequency, date: Day) -> bool {
        match frequency {
            Frequency::Single => date == self.start,
            Frequency::Weekly => date >= self.start && self.week_days.contains(date.weekday()),
            Frequency::Fortnightly => {
                let weeks_apart = (date.week_start().0 - self.start.week_start().0) / 7;
                date >= self.start
                    && self.week_days.contains(date.weekday())
                    && weeks_apart % 2 == 0
            }
        }
    }

    /// The date of the first delivery, if there is one.
    pub fn first_delivery(&self, frequency: Frequency) -> Option<Day> {
        // Every weekday of the start's week and the next two comes up within 21 days.
        (0..21)
            .map(|n| self.start.plus(n))
            .find(|date| self.occurs_on(frequency, *date))
    }

    /// The deliveries from `from` to `to`, both included.
    pub fn deliveries(&self, frequency: Frequency, from: Day, to: Day) -> Vec<Day> {
        (from.0..=to.0)
            .map(Day)
            .filter(|date| self.occurs_on(frequency, *date))
            .collect()
    }
}

/// What the defaults and checks of a schedule depend on besides the order itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduleRules {
    /// The days the customer's delivery service delivers on.
    pub delivery_days: WeekDays,
    /// Today in the webstore's time zone.
    pub today: Day,
}

/// Reads `week_days`: absent or null is `None`; an array of distinct days 0–6 (numbers or
/// strings of digits) is the set; anything else is an error (its message).
pub fn parse_week_days(value: Field<'_>) -> Result<Option<WeekDays>, &'static str> {
    match value {
        Field::Absent | Field::Null => Ok(None),
        Field::Present(serde_json::Value::Array(items)) => {
            let mut days = WeekDays::NONE;
            for item in items {
                match integer(item) {
                    Some(day @ 0..=6) if !days.contains(day as u8) => days = days.with(day as u8),
                    _ => return Err(INVALID),
                }
            }
            Ok(Some(days))
        }
        Field::Present(_) => Err(INVALID),
    }
}

/// The schedule of an order: the given start date and days, checked against the rules, with
/// the defaults filled in. Every broken rule is added to `errors`; `None` when there is
/// none to give.
///
/// - Without a start date: the first date after today that is a delivery day and, where days
///   were given, one of them.
/// - Without days: the start date's weekday.
/// - `single`: the start date must be a delivery day, and days given must be just its
///   weekday.
/// - `weekly`, `fortnightly`: days given must not be empty, and must all be delivery days.
///
/// A broken rule of the start date is named `start_field` (a create's `start_date`, a
/// change's `effective_date`, the date its new schedule starts on).
pub fn resolve(
    frequency: Frequency,
    start: Option<Day>,
    days: Option<WeekDays>,
    rules: ScheduleRules,
    start_field: &str,
    errors: &mut FieldErrors,
) -> Option<Schedule> {
    let allowed = rules.delivery_days;
    let wanted = days
        .filter(|d| !d.is_empty())
        .unwrap_or(allowed)
        .and(allowed);
    let start = match start {
        Some(start) => start,
        None => match next_day_in(rules.today, wanted) {
            Some(day) => day,
            None => {
                // No day can be both wanted and delivered on; name what was given.
                match days {
                    Some(given) if !given.is_empty() => errors.add("week_days", NOT_A_DELIVERY_DAY),
                    _ => errors.add(start_field, NOT_A_DELIVERY_DAY),
                }
                return None;
            }
        },
    };
    let start_day = WeekDays::only(start.weekday());
    let week_days = match frequency {
        Frequency::Single => {
            if !allowed.contains(start.weekday()) {
                errors.add(start_field, NOT_A_DELIVERY_DAY);
            }
            if days.is_some_and(|given| given != start_day) {
                errors.add("week_days", INVALID);
            }
            start_day
        }
        Frequency::Weekly | Frequency::Fortnightly => match days {
            Some(given) if given.is_empty() => {
                errors.add("week_days", BLANK);
                start_day
            }
            Some(given) => {
                if !given.within(allowed) {
                    errors.add("week_days", NOT_A_DELIVERY_DAY);
                }
                given
            }
            None => {
                if !allowed.contains(start.weekday()) {
                    errors.add(start_field, NOT_A_DELIVERY_DAY);
                }
                start_day
            }
        },
    };
    Some(Schedule { start, week_days })
}

/// The delivery day of `days` on or after `from` (within a week); `from` itself when `days`
/// is empty. The day a producer's day page opens on.
pub fn delivery_day_from(from: Day, days: WeekDays) -> Day {
    (0..7)
        .map(|n| from.plus(n))
        .find(|day| days.contains(day.weekday()))
        .unwrap_or(from)
}

/// The delivery days of `days` just before and just after `day` (the day before and after,
/// when `days` is empty): where a producer's day page leads.
pub fn delivery_days_around(day: Day, days: WeekDays) -> (Day, Day) {
    let step = |direction: i32| {
        (1..=7)
            .map(|n| day.plus(direction * n))
            .find(|other| days.contains(other.weekday()))
            .unwrap_or(day.plus(direction))
    };
    (step(-1), step(1))
}

fn next_day_in(today: Day, days: WeekDays) -> Option<Day> {
    (1..=7)
        .map(|n| today.plus(n))
        .find(|day| days.contains(day.weekday()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::day::parse_optional_date;
    use proptest::prelude::*;

    fn day(text: &str) -> Day {
        Day::of(text.parse().unwrap())
    }

    fn schedule(start: &str, days: &[u8]) -> Schedule {
        Schedule {
            start: day(start),
            week_days: days.iter().fold(WeekDays::NONE, |set, d| set.with(*d)),
        }
    }

    fn days(list: &[u8]) -> WeekDays {
        list.iter().fold(WeekDays::NONE, |set, d| set.with(*d))
    }

    #[test]
    fn fortnightly_deliveries_skip_every_other_week_from_the_start() {
        // Start on a Wednesday; deliveries on Mondays and Thursdays of even weeks.
        let s = schedule("2026-11-25", &[1, 4]);
        let got: Vec<String> = s
            .deliveries(Frequency::Fortnightly, day("2026-11-22"), day("2026-12-20"))
            .into_iter()
            .map(|d| d.date().to_string())
            .collect();
        assert_eq!(got, ["2026-11-26", "2026-12-07", "2026-12-10"]);
        assert_eq!(
            s.first_delivery(Frequency::Fortnightly),
            Some(day("2026-11-26"))
        );
        assert_eq!(s.first_delivery(Frequency::Weekly), Some(day("2026-11-26")));
    }

    #[test]
    fn parsing_takes_real_iso_dates_and_days_as_numbers_or_digits() {
        use serde_json::json;
        let present = |v: &serde_json::Value| parse_optional_date(Field::Present(v));
        assert_eq!(present(&json!("2026-11-23")), Ok(Some(day("2026-11-23"))));
        assert_eq!(present(&json!("")), Ok(None));
        for bad in [
            json!("2026-02-30"),
            json!("2026-2-3"),
            json!("23/11/2026"),
            json!(20261123),
            json!("2026-11-23T00:00:00Z"),
            json!("20261123"),
        ] {
            assert_eq!(present(&bad), Err(INVALID), "{bad}");
        }
        let days_of = |v: &serde_json::Value| parse_week_days(Field::Present(v));
        assert_eq!(days_of(&json!([1, "4"])), Ok(Some(days(&[1, 4]))));
        assert_eq!(days_of(&json!([])), Ok(Some(WeekDays::NONE)));
        for bad in [
            json!([7]),
            json!([-1]),
            json!([1, 1]),
            json!(["x"]),
            json!(1),
            json!([1.5]),
        ] {
            assert_eq!(days_of(&bad), Err(INVALID), "{bad}");
        }
    }

    fn rules(today: &str, delivery: &[u8]) -> ScheduleRules {
        ScheduleRules {
            delivery_days: days(delivery),
            today: day(today),
        }
    }

    fn resolved(
        frequency: Frequency,
        start: Option<&str>,
        given: Option<&[u8]>,
        rules: ScheduleRules,
    ) -> Result<Schedule, Vec<String>> {
        let mut errors = FieldErrors::new();
        let schedule = resolve(
            frequency,
            start.map(day),
            given.map(days),
            rules,
            "start_date",
            &mut errors,
        );
        match errors.into_result(()) {
            Ok(()) => Ok(schedule.unwrap()),
            Err(errors) => Err(errors
                .iter()
                .flat_map(|(field, messages)| messages.iter().map(move |m| format!("{field}: {m}")))
                .collect()),
        }
    }

    #[test]
    fn defaults_pick_the_next_delivery_day_after_today() {
        // Today is Monday 2026-11-23; the service delivers on Mondays and Thursdays.
        let r = rules("2026-11-23", &[1, 4]);
        assert_eq!(
            resolved(Frequency::Weekly, None, None, r),
            Ok(schedule("2026-11-26", &[4])),
            "not today: the next delivery day after it"
        );
        assert_eq!(
            resolved(Frequency::Weekly, None, Some(&[1]), r),
            Ok(schedule("2026-11-30", &[1]))
        );
        assert_eq!(
            resolved(Frequency::Single, None, Some(&[1]), r),
            Ok(schedule("2026-11-30", &[1]))
        );
        assert_eq!(
            resolved(Frequency::Fortnightly, Some("2026-11-24"), Some(&[1, 4]), r),
            Ok(schedule("2026-11-24", &[1, 4])),
            "a weekly start date need not be a delivery day itself"
        );
        assert_eq!(
            resolved(Frequency::Single, Some("2020-01-02"), None, r),
            Ok(schedule("2020-01-02", &[4])),
            "a date in the past is history, not an error"
        );
    }

    #[test]
    fn each_rule_names_its_field() {
        let r = rules("2026-11-23", &[1, 4]);
        type Case<'a> = (Frequency, Option<&'a str>, Option<&'a [u8]>, &'a str);
        let cases: [Case<'_>; 7] = [
            (
                Frequency::Single,
                Some("2026-11-24"),
                None,
                "start_date: is not a delivery day of the delivery service",
            ),
            (
                Frequency::Single,
                Some("2026-11-26"),
                Some(&[1]),
                "week_days: is invalid",
            ),
            (
                Frequency::Single,
                Some("2026-11-26"),
                Some(&[]),
                "week_days: is invalid",
            ),
            (
                Frequency::Weekly,
                None,
                Some(&[]),
                "week_days: can't be blank",
            ),
            (
                Frequency::Weekly,
                None,
                Some(&[1, 2]),
                "week_days: is not a delivery day of the delivery service",
            ),
            (
                Frequency::Fortnightly,
                Some("2026-11-24"),
                None,
                "start_date: is not a delivery day of the delivery service",
            ),
            (
                Frequency::Weekly,
                None,
                Some(&[0, 6]),
                "week_days: is not a delivery day of the delivery service",
            ),
        ];
        for (frequency, start, given, want) in cases {
            assert_eq!(
                resolved(frequency, start, given, r),
                Err(vec![want.to_owned()]),
                "{frequency:?} {start:?} {given:?}"
            );
        }
    }

    #[test]
    fn the_day_page_opens_on_the_next_delivery_day_and_leads_to_its_neighbours() {
        let mon_thu = WeekDays::only(1).with(4);
        // 2026-11-25 is a Wednesday.
        assert_eq!(
            delivery_day_from(day("2026-11-25"), mon_thu),
            day("2026-11-26")
        );
        assert_eq!(
            delivery_day_from(day("2026-11-26"), mon_thu),
            day("2026-11-26")
        );
        assert_eq!(
            delivery_days_around(day("2026-11-26"), mon_thu),
            (day("2026-11-23"), day("2026-11-30"))
        );
        assert_eq!(
            delivery_days_around(day("2026-11-25"), mon_thu),
            (day("2026-11-23"), day("2026-11-26")),
            "a day off the schedule still leads to the delivery days beside it"
        );
        assert_eq!(
            delivery_day_from(day("2026-11-25"), WeekDays::NONE),
            day("2026-11-25")
        );
        assert_eq!(
            delivery_days_around(day("2026-11-25"), WeekDays::NONE),
            (day("2026-11-24"), day("2026-11-26"))
        );
    }

    #[test]
    fn today_depends_on_the_side_of_the_date_line() {
        // Monday 2026-11-23 at 12:00 UTC: already Tuesday 01:00 in Wellington (NZDT).
        let noon: jiff::Timestamp = "2026-11-23T12:00:00Z".parse().unwrap();
        let today_in = |zone: &str| {
            Day::of(
                noon.to_zoned_datetime(jiff::tz::TimeZone::get(zone).unwrap())
                    .date(),
            )
        };
        let london = today_in("Europe/London");
        let wellington = today_in("Pacific/Auckland");
        assert_eq!(london, day("2026-11-23"));
        assert_eq!(wellington, day("2026-11-24"));
        // A Tuesday-and-Thursday service: London's next delivery day is Tuesday the 24th,
        // Wellington's (whose today is that Tuesday) is Thursday the 26th.
        let next = |today| {
            resolved(
                Frequency::Single,
                None,
                None,
                ScheduleRules {
                    delivery_days: days(&[2, 4]),
                    today,
                },
            )
        };
        assert_eq!(next(london).unwrap().start, day("2026-11-24"));
        assert_eq!(next(wellington).unwrap().start, day("2026-11-26"));
    }

    fn any_day() -> impl Strategy<Value = Day> {
        // 1900 to 2200.
        (-25_567i32..84_000).prop_map(Day)
    }

    fn any_days() -> impl Strategy<Value = WeekDays> {
        (1u8..128).prop_map(WeekDays::from_bits)
    }

    proptest! {
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn fortnightly_dates_are_weekly_dates(start in any_day(), days in any_days(), from in 0i32..60) {
            let s = Schedule { start, week_days: days };
            let (a, b) = (start.plus(from - 20), start.plus(from + 60));
            let weekly = s.deliveries(Frequency::Weekly, a, b);
            for date in s.deliveries(Frequency::Fortnightly, a, b) {
                prop_assert!(weekly.contains(&date));
            }
        }

        #[test]
        fn nothing_comes_before_the_start(start in any_day(), days in any_days(), back in 1i32..400) {
            let s = Schedule { start, week_days: days };
            for frequency in [Frequency::Single, Frequency::Weekly, Frequency::Fortnightly] {
                prop_assert!(!s.occurs_on(frequency, start.plus(-back)));
            }
        }

        #[test]
        fn a_single_order_occurs_exactly_once(start in any_day(), days in any_days()) {
            let s = Schedule { start, week_days: days };
            let all = s.deliveries(Frequency::Single, start.plus(-30), start.plus(30));
            prop_assert_eq!(all, vec![start]);
        }

        #[test]
        fn weekly_orders_come_every_week_and_fortnightly_every_other(
            start in any_day(), days in any_days(), week in 0i32..50,
        ) {
            let s = Schedule { start, week_days: days };
            let first = s.first_delivery(Frequency::Weekly).unwrap();
            prop_assert!(s.occurs_on(Frequency::Weekly, first.plus(7 * week)));
            let first = s.first_delivery(Frequency::Fortnightly).unwrap();
            prop_assert!(s.occurs_on(Frequency::Fortnightly, first.plus(14 * week)));
            prop_assert!(!s.occurs_on(Frequency::Fortnightly, first.plus(14 * week + 7)));
        }

        #[test]
        fn defaults_land_on_a_delivery_day_after_today(
            today in any_day(), delivery in any_days(), wanted in proptest::option::of(any_days()),
            frequency in prop_oneof![Just(Frequency::Single), Just(Frequency::Weekly), Just(Frequency::Fortnightly)],
        ) {
            let mut errors = FieldErrors::new();
            let rules = ScheduleRules { delivery_days: delivery, today };
            let schedule = resolve(frequency, None, wanted, rules, "start_date", &mut errors);
            if errors.is_empty() {
                let schedule = schedule.unwrap();
                prop_assert!(schedule.start > today && schedule.start <= today.plus(7));
                prop_assert!(delivery.contains(schedule.start.weekday()));
                prop_assert!(schedule.week_days.within(delivery));
                prop_assert!(schedule.first_delivery(frequency) == Some(schedule.start)
                    || frequency != Frequency::Single);
            } else {
                // Only when no wanted day is a delivery day.
                prop_assert!(wanted.unwrap_or(delivery).and(delivery).is_empty()
                    || wanted.is_some_and(|w| !w.within(delivery))
                    || frequency == Frequency::Single && wanted.is_some_and(|w| w.days().count() > 1));
            }
        }
    }
}
