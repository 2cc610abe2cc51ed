//! A builder of order contents for unit tests: [`OrderContent::weekly_for_test`] is a weekly
//! order of one box with no extras, exclusions or substitutions, delivered on the weekday of
//! its start; setters change one field each, and [`OrderContent::placed`] makes the stored
//! [`Order`] of it. Only test builds have it, so that a test names just the fields it cares
//! about.
//!
//! Must not touch: the rules themselves (`body`, `change`), non-test builds.

use super::content::{ExtraLine, OrderContent};
use super::schedule::{Frequency, Schedule};
use super::Order;
use crate::domain::day::Day;
use crate::domain::day::WeekDays;
use crate::domain::ids::{CustomerId, OrderId};

impl OrderContent {
    /// A weekly order of `box_id`, extras with every box, no extras, exclusions or
    /// substitutions, delivered on Thursdays from day 0 (Thursday 1970-01-01).
    pub fn weekly_for_test(box_id: u64) -> OrderContent {
        let start = Day(0);
        OrderContent {
            box_id,
            frequency: Frequency::Weekly,
            extras_one_off: false,
            extras: Vec::new(),
            exclusions: Vec::new(),
            substitutions: Vec::new(),
            schedule: Schedule {
                start,
                week_days: WeekDays::only(start.weekday()),
            },
        }
    }

    /// The order delivered at this frequency.
    pub fn with_frequency(mut self, frequency: Frequency) -> OrderContent {
        self.frequency = frequency;
        self
    }

    /// The order with its extras once rather than with every box, or not.
    pub fn with_extras_one_off(mut self, one_off: bool) -> OrderContent {
        self.extras_one_off = one_off;
        self
    }

    /// The order with these extras, as `(id, quantity)`, in this order.
    pub fn with_extras(mut self, extras: &[(u64, u32)]) -> OrderContent {
        self.extras = extras
            .iter()
            .map(|&(id, quantity)| ExtraLine { id, quantity })
            .collect();
        self
    }

    /// The order with these box items excluded, in this order.
    pub fn with_exclusions(mut self, exclusions: &[u64]) -> OrderContent {
        self.exclusions = exclusions.to_vec();
        self
    }

    /// The order with these substitute box items, in this order.
    pub fn with_substitutions(mut self, substitutions: &[u64]) -> OrderContent {
        self.substitutions = substitutions.to_vec();
        self
    }

    /// The order delivered on `week_days` from `start`.
    pub fn with_schedule(mut self, start: Day, week_days: WeekDays) -> OrderContent {
        self.schedule = Schedule { start, week_days };
        self
    }

    /// The stored order `id` of customer `customer`, created at `created_at` (Unix seconds).
    pub fn placed(self, id: u64, customer: u64, created_at: i64) -> Order {
        Order::new(OrderId(id), CustomerId(customer), self, created_at)
    }
}
