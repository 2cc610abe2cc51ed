//! A producer's week as the week page shows it: seven days from a date, and for each
//! delivery day (a weekday its delivery services deliver on, or any day that has
//! deliveries) the number of deliveries and what to pack, boxes by count and extras by
//! quantity, with the week's totals: what a producer picks and buys by. Each day's numbers
//! are the day page's own ([`DayView`]'s counts of the same list). Pure. Must not touch:
//! HTTP, templates, the service.

use std::collections::BTreeMap;

use super::day::{self, Counted, DayView};
use crate::domain::catalogue::Webstore;
use crate::domain::day::Day;
use crate::domain::order::history::WithheldCounts;
use crate::service::DayList;

/// Days on a week page.
pub const DAYS: i32 = 7;

/// The week's delivery days, and what each needs.
#[derive(Debug)]
pub struct WeekView {
    /// The delivery days of the week, in date order.
    pub days: Vec<WeekDay>,
    /// Deliveries over the week.
    pub total: usize,
    /// Regular deliveries withheld over the week, by reason.
    pub withheld: WithheldCounts,
    /// Each box of the week: its name, its count on each of `days` and over the week.
    pub boxes: Vec<PackRow>,
    /// Each extra of the week, by quantity, likewise.
    pub extras: Vec<PackRow>,
}

/// One delivery day of the week.
#[derive(Debug)]
pub struct WeekDay {
    /// `YYYY-MM-DD`: its day page's address.
    pub date: String,
    /// `Thu 26 Nov`.
    pub label: String,
    /// Its deliveries.
    pub total: usize,
    /// Its regular deliveries withheld, by reason.
    pub withheld: WithheldCounts,
}

impl WeekDay {
    /// The day's regular deliveries withheld, as the page says them.
    pub fn withheld_label(&self) -> String {
        day::withheld_label(&self.withheld)
    }
}

impl WeekView {
    /// The week's regular deliveries withheld, as the page says them.
    pub fn withheld_label(&self) -> String {
        day::withheld_label(&self.withheld)
    }
}

/// A thing to pack, and how many on each day of the week and in all.
#[derive(Debug, PartialEq, Eq)]
pub struct PackRow {
    /// Its id in the catalogue.
    pub id: u64,
    /// Its name (an extra's with its unit).
    pub name: String,
    /// How many on each of the week's delivery days, in their order.
    pub by_day: Vec<u64>,
    /// How many over the week.
    pub total: u64,
}

impl WeekView {
    /// The week of `days` (each date of the week from its first, with that day's delivery
    /// list), showing the days `webstore` delivers on and any other that has deliveries or
    /// withheld deliveries.
    pub fn of(days: &[(Day, DayList)], webstore: &Webstore) -> WeekView {
        let delivers = webstore.delivery_week_days();
        let shown: Vec<(Day, DayView)> = days
            .iter()
            .filter(|(date, list)| {
                delivers.contains(date.weekday())
                    || !list.deliveries.is_empty()
                    || list.withheld.total() > 0
            })
            .map(|(date, list)| (*date, DayView::counts_of(list, webstore)))
            .collect();
        let rows = |pick: fn(&DayView) -> &[Counted]| {
            let mut rows = BTreeMap::<u64, PackRow>::new();
            for (column, (_, view)) in shown.iter().enumerate() {
                for counted in pick(view) {
                    let row = rows.entry(counted.id).or_insert_with(|| PackRow {
                        id: counted.id,
                        name: counted.name.clone(),
                        by_day: vec![0; shown.len()],
                        total: 0,
                    });
                    row.by_day[column] += counted.count;
                    row.total += counted.count;
                }
            }
            rows.into_values().collect()
        };
        WeekView {
            boxes: rows(|view| &view.boxes),
            extras: rows(|view| &view.extras),
            total: shown.iter().map(|(_, view)| view.total).sum(),
            withheld: shown
                .iter()
                .fold(WithheldCounts::default(), |sum, (_, view)| {
                    sum.plus(view.withheld)
                }),
            days: shown
                .iter()
                .map(|(date, view)| WeekDay {
                    date: date.date().to_string(),
                    label: day::short_date(*date),
                    total: view.total,
                    withheld: view.withheld,
                })
                .collect(),
        }
    }
}

/// `26 November – 2 December 2026`: the week's dates as a heading says them.
pub fn range_label(first: Day) -> String {
    let last = first.plus(DAYS - 1);
    let (from, to) = (first.date(), last.date());
    if from.year() != to.year() {
        format!(
            "{} – {}",
            from.strftime("%-d %B %Y"),
            to.strftime("%-d %B %Y")
        )
    } else if from.month() != to.month() {
        format!("{} – {}", from.strftime("%-d %B"), to.strftime("%-d %B %Y"))
    } else {
        format!("{} – {}", from.strftime("%-d"), to.strftime("%-d %B %Y"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::day::tests::delivery_on;
    use crate::domain::catalogue::{Catalogue, DEMO_CATALOGUE_JSON};

    #[test]
    fn the_week_shows_its_delivery_days_and_any_day_with_deliveries_or_withheld_ones() {
        let catalogue = Catalogue::parse(DEMO_CATALOGUE_JSON, 0).unwrap();
        let webstore = catalogue.webstores()[0].clone();
        let first = Day::of(jiff::civil::Date::constant(2026, 11, 23)); // a Monday
        let delivers = webstore.delivery_week_days();
        let boxes: Vec<u64> = webstore.boxes.keys().copied().collect();
        let service = *webstore.delivery_services.keys().next().unwrap();
        // One delivery on a day the webstore does not deliver on (an order of a delivery
        // service whose days have changed since).
        let odd = (0..DAYS)
            .map(|i| first.plus(i))
            .find(|d| !delivers.contains(d.weekday()))
            .expect("the demo webstore does not deliver every day");
        let week_with = |on_odd: DayList| {
            let days: Vec<(Day, DayList)> = (0..DAYS)
                .map(|i| first.plus(i))
                .map(|d| {
                    (
                        d,
                        if d == odd {
                            on_odd.clone()
                        } else {
                            DayList::default()
                        },
                    )
                })
                .collect();
            WeekView::of(&days, &webstore)
        };
        let expected: Vec<String> = (0..DAYS)
            .map(|i| first.plus(i))
            .filter(|d| delivers.contains(d.weekday()) || *d == odd)
            .map(|d| d.date().to_string())
            .collect();
        let week = week_with(DayList {
            deliveries: vec![delivery_on(odd, 1, service, boxes[0], &[], true)],
            withheld: WithheldCounts::default(),
        });
        let shown: Vec<String> = week.days.iter().map(|d| d.date.clone()).collect();
        assert_eq!(shown, expected);
        assert_eq!(week.total, 1);
        assert_eq!(week.boxes.len(), 1);
        assert_eq!(week.boxes[0].total, 1);
        // The same day whose only delivery is paused is shown too, with nothing to pack.
        let paused = WithheldCounts {
            paused: 1,
            ..WithheldCounts::default()
        };
        let week = week_with(DayList {
            deliveries: Vec::new(),
            withheld: paused,
        });
        let shown: Vec<String> = week.days.iter().map(|d| d.date.clone()).collect();
        assert_eq!(shown, expected);
        assert_eq!((week.total, week.withheld), (0, paused));
        let odd_day = week
            .days
            .iter()
            .find(|d| d.date == odd.date().to_string())
            .expect("shown");
        assert_eq!((odd_day.total, odd_day.withheld), (0, paused));
        assert!(week.boxes.is_empty());
        assert_eq!(range_label(first), "23 – 29 November 2026");
        assert_eq!(
            range_label(Day::of(jiff::civil::Date::constant(2026, 12, 28))),
            "28 December 2026 – 3 January 2027"
        );
        assert_eq!(
            range_label(Day::of(jiff::civil::Date::constant(2026, 11, 30))),
            "30 November – 6 December 2026"
        );
    }

    proptest::proptest! {
        #[test]
        fn each_days_numbers_are_its_day_pages_and_the_totals_add_them_up(
            orders in proptest::collection::vec(
                (0i32..DAYS, 0usize..2, 0usize..2, 0u32..4, proptest::bool::ANY),
                0..80,
            ),
            withheld in proptest::collection::vec((0u64..3, 0u64..3, 0u64..3, 0u64..3), DAYS as usize),
        ) {
            let catalogue = Catalogue::parse(DEMO_CATALOGUE_JSON, 0).unwrap();
            let webstore = catalogue.webstores()[0].clone();
            let first = Day::of(jiff::civil::Date::constant(2026, 11, 23));
            let services: Vec<u64> = webstore.delivery_services.keys().copied().collect();
            let boxes: Vec<u64> = webstore.boxes.keys().copied().collect();
            let extra = *webstore.extras.keys().next().unwrap();
            let mut days: Vec<(Day, DayList)> = (0..DAYS)
                .map(|i| {
                    let (paused, skipped, cancelled, halted) = withheld[i as usize];
                    let withheld = WithheldCounts { paused, skipped, cancelled, halted };
                    (first.plus(i), DayList { deliveries: Vec::new(), withheld })
                })
                .collect();
            let mut sorted = orders;
            sorted.sort_by_key(|(day, service, ..)| (*day, *service));
            for (n, (day, service, b, quantity, with_extras)) in sorted.iter().enumerate() {
                let extras: Vec<(u64, u32)> =
                    if *quantity > 0 { vec![(extra, *quantity)] } else { vec![] };
                days[*day as usize].1.deliveries.push(delivery_on(
                    first.plus(*day),
                    n as u64 + 1,
                    services[*service],
                    boxes[*b],
                    &extras,
                    *with_extras,
                ));
            }
            let week = WeekView::of(&days, &webstore);
            // Each shown day's numbers are exactly what its day page counts.
            for (column, shown) in week.days.iter().enumerate() {
                let (_, list) = days
                    .iter()
                    .find(|(d, _)| d.date().to_string() == shown.date)
                    .expect("a shown day is a day of the week");
                let page = DayView::of(list, &webstore);
                proptest::prop_assert_eq!(shown.total, page.total);
                proptest::prop_assert_eq!(shown.withheld, page.withheld);
                for (rows, counted) in [(&week.boxes, &page.boxes), (&week.extras, &page.extras)] {
                    let on_page: Vec<(u64, u64)> =
                        counted.iter().map(|c| (c.id, c.count)).collect();
                    let in_week: Vec<(u64, u64)> = rows
                        .iter()
                        .filter(|row| row.by_day[column] > 0)
                        .map(|row| (row.id, row.by_day[column]))
                        .collect();
                    proptest::prop_assert_eq!(in_week, on_page);
                }
            }
            // No delivery of the week is missing, and the totals add the days up.
            let all: usize = days.iter().map(|(_, list)| list.deliveries.len()).sum();
            proptest::prop_assert_eq!(week.total, all);
            // Every day with a delivery or a withheld one is shown, so the week's withheld
            // deliveries are every day's.
            let withheld_all = days
                .iter()
                .fold(WithheldCounts::default(), |sum, (_, list)| sum.plus(list.withheld));
            proptest::prop_assert_eq!(week.withheld, withheld_all);
            proptest::prop_assert_eq!(
                week.days.iter().map(|d| d.total).sum::<usize>(),
                week.total
            );
            for row in week.boxes.iter().chain(&week.extras) {
                proptest::prop_assert_eq!(row.by_day.iter().sum::<u64>(), row.total);
            }
            proptest::prop_assert_eq!(
                week.boxes.iter().map(|row| row.total).sum::<u64>(),
                all as u64
            );
        }
    }
}
