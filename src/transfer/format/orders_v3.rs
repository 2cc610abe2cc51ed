//! The order line of versions 1 to 3 ([`OrderLineV3`]), read only: `parse_line` reads those
//! versions' order lines through it and upgrades each to today's [`OrderLine`] at once (an
//! order never changed stays so; a history without `settled_before` is refused). Must not
//! touch: the store, files, anything written (no release writes this line any more).

use serde::Deserialize;

use super::{BadLine, ContentLine, ExtraQuantity, LifecycleLine, OrderLine};

/// An order as versions 1 to 3 exported it: its latest content at the top, without its
/// `effective_date` and `extras_since` (then its start date), and the rest of its history
/// beside it (version 3). Read only: it becomes an [`OrderLine`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrderLineV3 {
    id: u64,
    customer_id: u64,
    box_id: u64,
    frequency: String,
    start_date: String,
    week_days: Vec<u8>,
    extras_one_off: bool,
    extras: Vec<ExtraQuantity>,
    exclusions: Vec<u64>,
    substitutions: Vec<u64>,
    created_at: i64,
    #[serde(default)]
    effective_date: Option<String>,
    #[serde(default)]
    extras_since: Option<String>,
    #[serde(default)]
    earlier: Vec<ContentLine>,
    #[serde(default)]
    lifecycles: Vec<LifecycleLine>,
    #[serde(default)]
    settled_before: Option<String>,
    #[serde(default)]
    updated_at: Option<i64>,
}

impl OrderLineV3 {
    /// The same order as version 4 writes it.
    pub fn upgrade(self) -> Result<OrderLine, BadLine> {
        let changed = self.settled_before.is_some();
        let any_history = !self.earlier.is_empty()
            || !self.lifecycles.is_empty()
            || self.effective_date.is_some()
            || self.extras_since.is_some()
            || self.updated_at.is_some();
        if !changed && any_history {
            return Err(BadLine(format!(
                "order {}: a history without settled_before",
                self.id
            )));
        }
        let mut versions = self.earlier;
        versions.push(ContentLine {
            effective_date: self
                .effective_date
                .unwrap_or_else(|| self.start_date.clone()),
            extras_since: self.extras_since.unwrap_or_else(|| self.start_date.clone()),
            box_id: self.box_id,
            frequency: self.frequency,
            start_date: self.start_date,
            week_days: self.week_days,
            extras_one_off: self.extras_one_off,
            extras: self.extras,
            exclusions: self.exclusions,
            substitutions: self.substitutions,
        });
        Ok(OrderLine {
            id: self.id,
            customer_id: self.customer_id,
            created_at: self.created_at,
            versions,
            lifecycles: self.lifecycles,
            updated_at: changed.then(|| self.updated_at.unwrap_or(self.created_at)),
            settled_before: self.settled_before,
        })
    }
}
