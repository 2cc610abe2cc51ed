//! The cut-off: when a delivery date's list stops changing because the producer packs by it.
//! A webstore's catalogue entry may give `cutoff: {"days_before": N, "time": "HH:MM"}`; a
//! delivery date `d` is *locked* from `time`, in the webstore's time zone, on the day `N` days
//! before `d`. Every change to an order or a customer takes effect from the first date that
//! is not locked ([`Cutoff::first_open_day`]), so a locked date's list never changes again.
//!
//! The moment a date locks is an instant (the local time resolved in the zone as `jiff` does
//! by default: a time that a clock change skips is moved on by the length of the gap, a time
//! it repeats is the first of the two), so that a date once locked stays locked as time
//! passes, through daylight saving changes too.
//!
//! This file owns the rule and the catalogue's `cutoff` field (its shape and checks, which
//! `catalogue::file` calls). Pure: "now" is passed in as Unix seconds. Must not touch: the
//! clock, orders' histories (`order::change`, `halts`, the actor and the service ask which
//! dates are open).

use jiff::civil::Time;
use jiff::tz::TimeZone;
use jiff::Timestamp;
use serde::Deserialize;

use super::day::Day;

/// Most days before a delivery date its cut-off may be: two weeks, as the system the
/// contract follows allowed.
pub const MAX_DAYS_BEFORE: u8 = 14;

/// Days from 1970-01-01 beyond which a date is out of the calendar's range (the years -9999
/// to 9999) for certain.
const CALENDAR_DAYS: u32 = 3_600_000;

/// When a webstore's delivery dates lock: at `hour:minute`, local time, `days_before` days
/// before each date.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cutoff {
    days_before: u8,
    hour: u8,
    minute: u8,
}

impl Cutoff {
    /// The cut-off of a webstore whose catalogue entry names none: 18:00 three days before
    /// the date. It is what the system the contract follows did by default (each date's
    /// packing list was made at 18:00 local time, three days ahead), so the carts and
    /// producers that come from it find the window they know; and three days leave a
    /// producer a working day or two to order and pack after a date's list is final.
    pub const DEFAULT: Cutoff = Cutoff {
        days_before: 3,
        hour: 18,
        minute: 0,
    };

    /// A cut-off of `hour:minute`, `days_before` days before each date; `None` when a value
    /// is out of range (days over [`MAX_DAYS_BEFORE`], hour over 23, minute over 59).
    pub fn new(days_before: u8, hour: u8, minute: u8) -> Option<Cutoff> {
        (days_before <= MAX_DAYS_BEFORE && hour < 24 && minute < 60).then_some(Cutoff {
            days_before,
            hour,
            minute,
        })
    }

    /// Days before the date.
    pub fn days_before(self) -> u8 {
        self.days_before
    }

    /// The local time of day, `HH:MM`.
    pub fn time(self) -> String {
        format!("{:02}:{:02}", self.hour, self.minute)
    }

    /// The instant date `d` locks in `zone`; `None` when it lies outside the calendar's
    /// range (dates near the years -9999 and 9999).
    pub fn locks_at(self, d: Day, zone: &TimeZone) -> Option<Timestamp> {
        if d.0.unsigned_abs() > CALENDAR_DAYS {
            return None;
        }
        let day = d.plus(-i32::from(self.days_before)).date();
        let local = day.to_datetime(Time::constant(self.hour as i8, self.minute as i8, 0, 0));
        local
            .to_zoned_datetime(zone.clone())
            .ok()
            .map(|zoned| zoned.timestamp())
    }

    /// Whether date `d`'s deliveries are locked at `now` (Unix seconds) in `zone`.
    pub fn is_locked(self, d: Day, zone: &TimeZone, now: i64) -> bool {
        let now = instant(now);
        match self.locks_at(d, zone) {
            Some(at) => now >= at,
            // Out of the calendar's range: the far past is locked, the far future is not.
            None => d.0 < 0,
        }
    }

    /// The first date that is not locked at `now` (Unix seconds) in `zone`: the first date
    /// a change made now can take effect on. Every date before it is locked, and every date
    /// from it on is open, since later dates lock later.
    pub fn first_open_day(self, zone: &TimeZone, now: i64) -> Day {
        let today = Day::of(instant(now).to_zoned_datetime(zone.clone()).date());
        // The date whose cut-off falls today, then a step or two to the exact boundary (a
        // clock change can move the lock of a date across midnight). Bounded: the boundary is
        // within a day of the guess.
        let mut day = today.plus(i32::from(self.days_before));
        for _ in 0..3 {
            if !self.is_locked(day, zone, now) {
                break;
            }
            day = day.plus(1);
        }
        for _ in 0..3 {
            if self.is_locked(day.plus(-1), zone, now) {
                break;
            }
            day = day.plus(-1);
        }
        day
    }
}

impl Default for Cutoff {
    fn default() -> Cutoff {
        Cutoff::DEFAULT
    }
}

/// `now` as an instant, clamped to the calendar's range.
fn instant(now: i64) -> Timestamp {
    let clamped = now.clamp(Timestamp::MIN.as_second(), Timestamp::MAX.as_second());
    Timestamp::from_second(clamped).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// A webstore's `cutoff` as its catalogue entry writes it: each field optional, a missing
/// one taking [`Cutoff::DEFAULT`]'s.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CutoffFile {
    days_before: Option<i64>,
    time: Option<String>,
}

impl CutoffFile {
    /// The cut-off it gives, or every problem with it (for the catalogue to report at the
    /// webstore's `cutoff`).
    pub fn build(&self) -> Result<Cutoff, Vec<String>> {
        let mut problems = Vec::new();
        let days_before = match self.days_before {
            None => Cutoff::DEFAULT.days_before,
            Some(n) => match u8::try_from(n) {
                Ok(n) if n <= MAX_DAYS_BEFORE => n,
                _ => {
                    problems.push(format!(
                        "days_before must be a whole number of days from 0 to {MAX_DAYS_BEFORE}, \
                         not {n}"
                    ));
                    0
                }
            },
        };
        let (hour, minute) = match &self.time {
            None => (Cutoff::DEFAULT.hour, Cutoff::DEFAULT.minute),
            Some(text) => parse_hh_mm(text).unwrap_or_else(|| {
                problems.push(format!(
                    "time must be a local time of day as \"HH:MM\" (00:00 to 23:59), not {text:?}"
                ));
                (0, 0)
            }),
        };
        match Cutoff::new(days_before, hour, minute) {
            Some(cutoff) if problems.is_empty() => Ok(cutoff),
            _ => Err(problems),
        }
    }
}

/// `HH:MM` exactly, 00:00 to 23:59.
pub(crate) fn parse_hh_mm(text: &str) -> Option<(u8, u8)> {
    let bytes = text.as_bytes();
    let digit = |b: u8| b.is_ascii_digit().then_some(b - b'0');
    if bytes.len() != 5 || bytes[2] != b':' {
        return None;
    }
    let hour = digit(bytes[0])? * 10 + digit(bytes[1])?;
    let minute = digit(bytes[3])? * 10 + digit(bytes[4])?;
    (hour < 24 && minute < 60).then_some((hour, minute))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn day(text: &str) -> Day {
        Day::of(text.parse().unwrap())
    }

    /// Unix seconds of a local time in `zone`.
    fn at(local: &str, zone: &TimeZone) -> i64 {
        local
            .parse::<jiff::civil::DateTime>()
            .unwrap()
            .to_zoned_datetime(zone.clone())
            .unwrap()
            .timestamp()
            .as_second()
    }

    fn zone(name: &str) -> TimeZone {
        TimeZone::get(name).unwrap()
    }

    #[test]
    fn a_date_locks_at_the_time_days_before_it() {
        let london = zone("Europe/London");
        // Default: 18:00 three days before. Friday 2026-11-27 locks on Tuesday at 18:00.
        let friday = day("2026-11-27");
        let cutoff = Cutoff::DEFAULT;
        assert!(!cutoff.is_locked(friday, &london, at("2026-11-24T17:59:59", &london)));
        assert!(cutoff.is_locked(friday, &london, at("2026-11-24T18:00:00", &london)));
        assert_eq!(
            cutoff.first_open_day(&london, at("2026-11-24T17:59:59", &london)),
            friday
        );
        assert_eq!(
            cutoff.first_open_day(&london, at("2026-11-24T18:00:00", &london)),
            friday.plus(1)
        );
        // Two days before at midnight: Friday locks when Wednesday begins.
        let midnight = Cutoff::new(2, 0, 0).unwrap();
        assert!(!midnight.is_locked(friday, &london, at("2026-11-24T23:59:59", &london)));
        assert!(midnight.is_locked(friday, &london, at("2026-11-25T00:00:00", &london)));
        // The same instant is another local time elsewhere: Auckland is 13 hours ahead.
        let auckland = zone("Pacific/Auckland");
        let now = at("2026-11-24T12:00:00", &london);
        // 01:00 on Wednesday the 25th there: the 27th locked on Tuesday at 18:00.
        assert_eq!(cutoff.first_open_day(&auckland, now), day("2026-11-28"));
        assert_eq!(cutoff.first_open_day(&london, now), day("2026-11-27"));
    }

    #[test]
    fn a_cut_off_in_a_clock_change_locks_once_and_for_good() {
        // London skips 01:00-02:00 on 2026-03-29 and repeats it on 2026-10-25.
        let london = zone("Europe/London");
        let cutoff = Cutoff::new(0, 1, 30).unwrap();
        let spring = day("2026-03-29");
        // 01:30 does not exist that day: it is taken an hour on, at 02:30 BST.
        let half_past_two = at("2026-03-29T02:30:00", &london);
        assert!(!cutoff.is_locked(spring, &london, half_past_two - 1));
        assert!(cutoff.is_locked(spring, &london, half_past_two));
        let autumn = day("2026-10-25");
        let first_half_past_one = at("2026-10-25T01:30:00", &london);
        assert!(cutoff.is_locked(autumn, &london, first_half_past_one));
        // An hour later the wall clock says 01:30 again: still locked.
        assert!(cutoff.is_locked(autumn, &london, first_half_past_one + 3600));
        assert!(!cutoff.is_locked(autumn, &london, first_half_past_one - 1));
    }

    #[test]
    fn the_catalogue_field_takes_defaults_and_names_its_problems() {
        let build = |json: &str| serde_json::from_str::<CutoffFile>(json).unwrap().build();
        assert_eq!(build("{}"), Ok(Cutoff::DEFAULT));
        assert_eq!(
            build(r#"{"days_before": 2, "time": "00:00"}"#),
            Ok(Cutoff::new(2, 0, 0).unwrap())
        );
        assert_eq!(
            build(r#"{"time": "09:30"}"#),
            Ok(Cutoff::new(3, 9, 30).unwrap())
        );
        assert_eq!(build(r#"{"days_before": 0}"#).unwrap().time(), "18:00");
        let problems = build(r#"{"days_before": 15, "time": "24:00"}"#).unwrap_err();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("days_before") && problems[1].contains("time"));
        for bad in ["9:30", "09:60", "0930", "09:30:00", " 09:30", "", "ab:cd"] {
            let json = format!(r#"{{"time": {bad:?}}}"#);
            assert!(build(&json).is_err(), "{bad}");
        }
        assert!(build(r#"{"days_before": -1}"#).is_err());
        assert!(serde_json::from_str::<CutoffFile>(r#"{"hours": 3}"#).is_err());
    }

    #[test]
    fn dates_at_the_ends_of_the_calendar_neither_panic_nor_unlock() {
        let utc = TimeZone::UTC;
        for d in [
            Day(i32::MIN),
            Day(-4_000_000),
            Day(4_000_000),
            Day(i32::MAX),
        ] {
            let _ = Cutoff::DEFAULT.is_locked(d, &utc, 0);
        }
        assert!(Cutoff::DEFAULT.is_locked(Day(-4_000_000), &utc, 0));
        assert!(!Cutoff::DEFAULT.is_locked(Day(4_000_000), &utc, 0));
        for now in [i64::MIN, i64::MAX, 0] {
            let _ = Cutoff::DEFAULT.first_open_day(&utc, now);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn the_first_open_day_splits_locked_from_open_dates(
            days_before in 0u8..=MAX_DAYS_BEFORE, hour in 0u8..24, minute in 0u8..60,
            now in 1_700_000_000i64..1_900_000_000, which in 0usize..4, later in 0i64..200_000,
        ) {
            let zone = zone(["UTC", "Europe/London", "Pacific/Auckland", "America/St_Johns"][which]);
            let cutoff = Cutoff::new(days_before, hour, minute).unwrap();
            let open = cutoff.first_open_day(&zone, now);
            prop_assert!(cutoff.is_locked(open.plus(-1), &zone, now));
            prop_assert!(!cutoff.is_locked(open, &zone, now));
            for n in 1..20 {
                prop_assert!(cutoff.is_locked(open.plus(-n), &zone, now));
                prop_assert!(!cutoff.is_locked(open.plus(n), &zone, now));
            }
            // Locked for good: later, the first open day is never earlier.
            prop_assert!(cutoff.first_open_day(&zone, now + later) >= open);
        }
    }
}
