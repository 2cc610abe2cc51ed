//! The order, in one wing: an [`Order`] is one box for one customer, with its history of
//! versions ([`history::OrderHistory`]), each version's content ([`content::OrderContent`]:
//! box, extras, exclusions, substitutions, frequency and schedule) in force from a date.
//!
//! - [`content`]: what one version delivers, and the limits of every content;
//! - [`body`]: a create's body, read for its shape, and the one content rule (catalogue and
//!   box) a create and a change both go through;
//! - [`schedule`]: when a content delivers (start, weekdays, frequency) and its defaults;
//! - [`history`]: the versions, and what goes out on a date;
//! - [`change`]: a change (`PATCH /v1/orders/{id}`) parsed once into a typed value and
//!   applied purely to the history.
//!
//! The calendar (`day`: dates, sets of weekdays) and the cut-off (`cutoff`: when a date locks
//! for packing) sit beside the wing, not in it: the catalogue, which the wing checks orders
//! against, holds a webstore's cut-off and its delivery services' weekdays.
//!
//! Pure data and rules. Must not touch: I/O, the clock (callers pass "now"), storage, the
//! actors that apply orders, the customer's other fields (`halts` are passed in).

pub mod body;
#[cfg(test)]
mod builder;
pub mod change;
pub mod content;
pub mod history;
#[cfg(test)]
mod model_tests;
pub mod schedule;

use content::OrderContent;
use history::{Lifecycle, OrderHistory};

use super::ids::{CustomerId, OrderId};

/// A stored order: who placed it, when, and its history (whose latest content is what its
/// answer shows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Order {
    /// Server-assigned id.
    pub id: OrderId,
    /// The customer who placed it.
    pub customer_id: CustomerId,
    /// Unix time, seconds.
    pub created_at: i64,
    /// Its versions: one, from its start, until it changes.
    pub history: OrderHistory,
}

impl Order {
    /// A new order of `content`, made at `created_at`.
    pub fn new(
        id: OrderId,
        customer_id: CustomerId,
        content: OrderContent,
        created_at: i64,
    ) -> Order {
        Order {
            id,
            customer_id,
            created_at,
            history: OrderHistory::new(content, created_at),
        }
    }

    /// What it delivers now: its latest content.
    pub fn content(&self) -> &OrderContent {
        &self.history.latest().content
    }

    /// The latest lifecycle: what its answer shows.
    pub fn lifecycle(&self) -> &Lifecycle {
        self.history.lifecycle()
    }

    /// `updated_at`: Unix seconds of its latest change, its creation until it changes.
    pub fn updated_at(&self) -> i64 {
        self.history.updated_at()
    }

    /// The order with `history` (its change).
    pub fn changed(&self, history: OrderHistory) -> Order {
        Order {
            id: self.id,
            customer_id: self.customer_id,
            created_at: self.created_at,
            history,
        }
    }
}
