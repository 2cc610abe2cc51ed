//! When a frozen delivery is charged: at the webstore's `delivered_at` (a local `HH:MM` in
//! its catalogue entry, 23:00 unless it gives one, as the nightly run of the system the
//! contract follows) on the delivery's date, or when the date locks if that is later (a
//! cut-off on the day itself after `delivered_at`). From then on the delivery counts as
//! delivered and its price is taken from the customer's account, once.
//!
//! This file owns the rule and the catalogue's `delivered_at` field. Pure: "now" is the
//! caller's. Must not touch: the charge itself (the customer's actor posts it), the store.

use jiff::civil::Time;
use jiff::tz::TimeZone;

use crate::domain::cutoff::{parse_hh_mm, Cutoff};
use crate::domain::day::Day;

/// The local time of day a webstore's deliveries are charged on their date.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeliveredAt {
    hour: u8,
    minute: u8,
}

impl DeliveredAt {
    /// 23:00, the original's nightly run.
    pub const DEFAULT: DeliveredAt = DeliveredAt {
        hour: 23,
        minute: 0,
    };

    /// The catalogue's `delivered_at` (`HH:MM`, 00:00 to 23:59); `None` for anything else.
    pub fn parse(text: &str) -> Option<DeliveredAt> {
        parse_hh_mm(text).map(|(hour, minute)| DeliveredAt { hour, minute })
    }

    /// `HH:MM`.
    pub fn time(self) -> String {
        format!("{:02}:{:02}", self.hour, self.minute)
    }

    /// Unix seconds from which date `day`'s deliveries are charged in `zone` with `cutoff`:
    /// `delivered_at` on the day, or the day's lock if later. `None` for a date outside the
    /// calendar's range (never charged).
    pub fn charged_from(self, day: Day, zone: &TimeZone, cutoff: Cutoff) -> Option<i64> {
        let locks = cutoff.locks_at(day, zone)?.as_second();
        let local =
            day.date()
                .to_datetime(Time::constant(self.hour as i8, self.minute as i8, 0, 0));
        let at = local.to_zoned_datetime(zone.clone()).ok()?.timestamp();
        Some(at.as_second().max(locks))
    }

    /// The last date whose deliveries are charged at `now` (Unix seconds) in `zone`: every
    /// date up to it is, every later one is not yet.
    pub fn last_charged_day(self, zone: &TimeZone, cutoff: Cutoff, now: i64) -> Day {
        let now_at = jiff::Timestamp::from_second(now).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        let today = Day::of(now_at.to_zoned_datetime(zone.clone()).date());
        // Today's or an earlier date: a date is charged on its own day at the earliest, and
        // by the day after it at the latest (a cut-off on the day itself, up to 23:59).
        let due = |d: Day| {
            self.charged_from(d, zone, cutoff)
                .is_some_and(|at| at <= now)
        };
        let mut day = today;
        for _ in 0..3 {
            if due(day) {
                return day;
            }
            day = day.plus(-1);
        }
        day
    }
}

impl Default for DeliveredAt {
    fn default() -> DeliveredAt {
        DeliveredAt::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn unix(local: &str, zone: &TimeZone) -> i64 {
        local
            .parse::<jiff::civil::DateTime>()
            .unwrap()
            .to_zoned_datetime(zone.clone())
            .unwrap()
            .timestamp()
            .as_second()
    }

    #[test]
    fn a_date_is_charged_at_delivered_at_or_at_its_lock_if_later() {
        let london = TimeZone::get("Europe/London").unwrap();
        let friday = Day::of("2026-11-27".parse().unwrap());
        let at = DeliveredAt::DEFAULT;
        assert_eq!(
            at.charged_from(friday, &london, Cutoff::DEFAULT),
            Some(unix("2026-11-27T23:00:00", &london))
        );
        // A cut-off on the day itself at 23:30 locks after 23:00: charged at the lock.
        let late = Cutoff::new(0, 23, 30).unwrap();
        assert_eq!(
            at.charged_from(friday, &london, late),
            Some(unix("2026-11-27T23:30:00", &london))
        );
        let before = unix("2026-11-27T22:59:59", &london);
        assert_eq!(
            at.last_charged_day(&london, Cutoff::DEFAULT, before),
            friday.plus(-1)
        );
        assert_eq!(
            at.last_charged_day(&london, Cutoff::DEFAULT, before + 1),
            friday
        );
        assert_eq!(DeliveredAt::parse("06:15").unwrap().time(), "06:15");
        for bad in ["6:15", "24:00", "", "23:00:00"] {
            assert_eq!(DeliveredAt::parse(bad), None, "{bad}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn the_last_charged_day_splits_charged_from_not_yet(
            hour in 0u8..24, minute in 0u8..60, days_before in 0u8..3, cut_hour in 0u8..24,
            now in 1_700_000_000i64..1_900_000_000, which in 0usize..3,
        ) {
            let zone = TimeZone::get(["UTC", "Europe/London", "Pacific/Auckland"][which]).unwrap();
            let at = DeliveredAt { hour, minute };
            let cutoff = Cutoff::new(days_before, cut_hour, 0).unwrap();
            let last = at.last_charged_day(&zone, cutoff, now);
            for n in 0..5 {
                prop_assert!(at.charged_from(last.plus(-n), &zone, cutoff).unwrap() <= now);
                prop_assert!(at.charged_from(last.plus(n + 1), &zone, cutoff).unwrap() > now);
            }
        }
    }
}
