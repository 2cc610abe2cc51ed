//! The calendar: a civil date of a webstore as a day number ([`Day`]: days since
//! 1970-01-01, converted from and to `jiff` dates at the edges), so that every date rule
//! (schedules, cut-offs, halts, pauses) is integer arithmetic; a set of weekdays
//! ([`WeekDays`]: a delivery service's, a schedule's); and the one reading of a date as the
//! API writes it (`YYYY-MM-DD`, in a body or a query).
//!
//! Pure. Must not touch: clocks, time zones (a webstore's "today" is `catalogue`'s), I/O.

use jiff::civil::Date;

use super::fields::{Field, BLANK, INVALID};

/// A civil date as days since 1970-01-01 (a Thursday).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Day(pub i32);

impl Day {
    /// The day of a civil date.
    pub fn of(date: Date) -> Day {
        let epoch = Date::constant(1970, 1, 1);
        // Dates are within jiff's range (years -9999..=9999), so days fit an i32.
        let days = epoch
            .until((jiff::Unit::Day, date))
            .map(|span| span.get_days())
            .unwrap_or(0);
        Day(days)
    }

    /// The civil date of this day (clamped to jiff's range, the years -9999 to 9999).
    pub fn date(self) -> Date {
        let clamped = jiff::Span::new().try_days(i64::from(self.0)).ok();
        match clamped.and_then(|span| Date::constant(1970, 1, 1).checked_add(span).ok()) {
            Some(date) => date,
            None if self.0 < 0 => Date::MIN,
            None => Date::MAX,
        }
    }

    /// Its weekday, Sunday = 0 … Saturday = 6.
    pub fn weekday(self) -> u8 {
        (self.0 + 4).rem_euclid(7) as u8
    }

    /// The Sunday on or before it: the start of its week.
    pub fn week_start(self) -> Day {
        Day(self.0 - i32::from(self.weekday()))
    }

    /// `n` days later.
    pub fn plus(self, n: i32) -> Day {
        Day(self.0.saturating_add(n))
    }
}

/// A set of weekdays, Sunday = 0 … Saturday = 6.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct WeekDays(u8);

impl WeekDays {
    /// No day.
    pub const NONE: WeekDays = WeekDays(0);

    /// The days whose bits are set (bit 0 is Sunday); higher bits are ignored.
    pub fn from_bits(bits: u8) -> WeekDays {
        WeekDays(bits & 0x7f)
    }

    /// One day.
    pub fn only(day: u8) -> WeekDays {
        WeekDays::NONE.with(day)
    }

    /// These days and `day` (0–6; anything else is ignored).
    pub fn with(self, day: u8) -> WeekDays {
        if day < 7 {
            WeekDays(self.0 | 1 << day)
        } else {
            self
        }
    }

    /// The bits, bit 0 being Sunday.
    pub fn bits(self) -> u8 {
        self.0
    }

    /// Whether `day` is one of them.
    pub fn contains(self, day: u8) -> bool {
        day < 7 && self.0 & (1 << day) != 0
    }

    /// Whether there is no day.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether every day of these is one of `other`.
    pub fn within(self, other: WeekDays) -> bool {
        self.0 & !other.0 == 0
    }

    /// The days in both.
    pub fn and(self, other: WeekDays) -> WeekDays {
        WeekDays(self.0 & other.0)
    }

    /// The days, Sunday first.
    pub fn days(self) -> impl Iterator<Item = u8> {
        (0..7).filter(move |day| self.contains(*day))
    }
}

/// Reads an optional date field (`start_date`, `effective_date`, `pause_date` and the
/// rest): absent, null or blank is `None`; a real `YYYY-MM-DD` date is its day; anything
/// else is an error (its message).
pub fn parse_optional_date(value: Field<'_>) -> Result<Option<Day>, &'static str> {
    match value {
        Field::Absent | Field::Null => Ok(None),
        Field::Present(serde_json::Value::String(text)) if text.trim().is_empty() => Ok(None),
        Field::Present(serde_json::Value::String(text)) => {
            parse_iso_date(text).map(Some).ok_or(INVALID)
        }
        Field::Present(_) => Err(INVALID),
    }
}

/// A date given as exactly `YYYY-MM-DD` (surrounding spaces aside) that exists.
pub fn parse_iso_date(text: &str) -> Option<Day> {
    let text = text.trim();
    let shaped = text.len() == 10
        && text.bytes().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                b == b'-'
            } else {
                b.is_ascii_digit()
            }
        });
    if !shaped {
        return None;
    }
    text.parse::<Date>().ok().map(Day::of)
}

/// Reads a required date query parameter: `can't be blank` when missing or blank, `is
/// invalid` when it is not a real `YYYY-MM-DD` date.
pub fn parse_date_param(raw: Option<&str>) -> Result<Day, &'static str> {
    match raw.map(str::trim) {
        None | Some("") => Err(BLANK),
        Some(text) => parse_iso_date(text).ok_or(INVALID),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn day(text: &str) -> Day {
        Day::of(text.parse().unwrap())
    }

    #[test]
    fn days_agree_with_the_calendar() {
        assert_eq!(day("1970-01-01"), Day(0));
        assert_eq!(day("1970-01-01").weekday(), 4, "a Thursday");
        assert_eq!(day("2026-11-23").weekday(), 1, "a Monday");
        assert_eq!(
            day("2026-11-29").week_start(),
            day("2026-11-29"),
            "a Sunday"
        );
        assert_eq!(day("2026-11-28").week_start(), day("2026-11-22"));
        assert_eq!(day("1969-12-31").weekday(), 3);
        assert_eq!(day("2026-11-23").date().to_string(), "2026-11-23");
    }

    fn any_day() -> impl Strategy<Value = Day> {
        // 1900 to 2200.
        (-25_567i32..84_000).prop_map(Day)
    }

    #[test]
    fn any_day_has_a_date_the_far_ones_clamped() {
        assert_eq!(Day(i32::MAX).date(), Date::MAX);
        assert_eq!(Day(i32::MIN).date(), Date::MIN);
        assert_eq!(Day(2_932_896).date(), Date::constant(9999, 12, 31));
    }

    proptest! {
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn weekdays_match_jiff(d in any_day()) {
            let date = d.date();
            prop_assert_eq!(i8::try_from(d.weekday()).unwrap(), date.weekday().to_sunday_zero_offset());
            prop_assert_eq!(Day::of(date), d);
        }
    }
}
