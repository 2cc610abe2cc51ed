//! What an order delivers: [`OrderContent`], the content of one version of an order (its box,
//! extras, exclusions, substitutions, frequency and schedule), and the limits every content
//! keeps. A new order has one version; a change adds versions in force from later dates
//! (`history`). Plain data.
//!
//! Must not touch: the rules that make a content (`body`, `change`), dates' outcomes
//! (`history`).

use super::schedule::{Frequency, Schedule};

/// Most elements accepted in any one array of an order (contract section 6).
pub const MAX_LIST_ITEMS: usize = 100;
/// Largest quantity of one extra on one order.
pub const MAX_EXTRA_QUANTITY: i64 = 1000;

/// A quantity of one extra.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtraLine {
    /// The extra's id.
    pub id: u64,
    /// At least 1.
    pub quantity: u32,
}

/// The content of one version of an order: what it delivers, and when, from the date the
/// version is in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderContent {
    /// A visible box of the webstore (when the content was made).
    pub box_id: u64,
    /// Delivery frequency.
    pub frequency: Frequency,
    /// Whether extras come once rather than with every box.
    pub extras_one_off: bool,
    /// Extras in the order sent.
    pub extras: Vec<ExtraLine>,
    /// Excluded box items in the order sent.
    pub exclusions: Vec<u64>,
    /// Substitute box items in the order sent.
    pub substitutions: Vec<u64>,
    /// When it is delivered, with `frequency`.
    pub schedule: Schedule,
}
