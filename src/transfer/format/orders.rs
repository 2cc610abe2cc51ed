//! Orders as exported (version 4 on): [`OrderLine`], its history nested as the store's
//! record nests it, each content version a [`ContentLine`] (its extras [`ExtraQuantity`]s,
//! shared with frozen deliveries), each lifecycle version a [`LifecycleLine`]; to and from
//! the store's `OrderRecord`, a history that breaks the order's rules refused. Must not touch:
//! the store but its record, files, the older versions' line (`orders_v3.rs` upgrades it).

use serde::{Deserialize, Serialize};

use super::{date_text, BadLine};
use crate::domain::day::{parse_iso_date, WeekDays};
use crate::domain::order::history::NEVER_CHANGED;
use crate::domain::order::schedule::Frequency;
use crate::store::kinds::orders::{ContentRecord, ExtraRecord, LifecycleRecord, OrderRecord};

/// An order as exported (version 4 on): who placed it and when, and its history, each content
/// version a [`ContentLine`], as the store's record nests them. The fields of a change are
/// left out for an order never changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrderLine {
    /// Id.
    pub id: u64,
    /// Customer.
    pub customer_id: u64,
    /// Unix seconds.
    pub created_at: i64,
    /// The content versions, oldest first; the last is what the order delivers now.
    pub versions: Vec<ContentLine>,
    /// The lifecycle versions, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lifecycles: Vec<LifecycleLine>,
    /// `YYYY-MM-DD`: no date before it may change any more; absent for an order never
    /// changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled_before: Option<String>,
    /// Unix seconds of its latest change; absent for an order never changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<i64>,
}

/// A content version of an order, as exported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContentLine {
    /// `YYYY-MM-DD`: the first date it is in force.
    pub effective_date: String,
    /// `YYYY-MM-DD`: where its one-off extras count from.
    pub extras_since: String,
    /// Box.
    pub box_id: u64,
    /// `single`, `weekly` or `fortnightly`.
    pub frequency: String,
    /// `YYYY-MM-DD`.
    pub start_date: String,
    /// Weekdays, Sunday = 0.
    pub week_days: Vec<u8>,
    /// Extras once only.
    pub extras_one_off: bool,
    /// Extras.
    pub extras: Vec<ExtraQuantity>,
    /// Excluded box items.
    pub exclusions: Vec<u64>,
    /// Substitute box items.
    pub substitutions: Vec<u64>,
}

/// A lifecycle version of an order, as exported: the answer's fields, in force from
/// `effective_date`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LifecycleLine {
    /// `YYYY-MM-DD`: the first date it is in force.
    pub effective_date: String,
    /// `YYYY-MM-DD` or `null`.
    pub cancel_date: Option<String>,
    /// `YYYY-MM-DD` or `null`.
    pub pause_date: Option<String>,
    /// `YYYY-MM-DD` or `null`.
    pub resume_date: Option<String>,
    /// `YYYY-MM-DD` each, sorted.
    pub skipped_dates: Vec<String>,
}

/// An extra and its quantity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtraQuantity {
    /// Extra id.
    pub id: u64,
    /// Quantity.
    pub quantity: u32,
}

fn frequency_code(name: &str) -> Option<u8> {
    match name {
        "single" => Some(0),
        "weekly" => Some(1),
        "fortnightly" => Some(2),
        _ => None,
    }
}

fn frequency_name(code: u8) -> &'static str {
    match code {
        1 => Frequency::Weekly.as_str(),
        2 => Frequency::Fortnightly.as_str(),
        _ => Frequency::Single.as_str(),
    }
}

impl ContentLine {
    fn from_record(version: ContentRecord) -> ContentLine {
        ContentLine {
            effective_date: date_text(version.effective_day),
            extras_since: date_text(version.extras_since_day),
            box_id: version.box_id,
            frequency: frequency_name(version.frequency).to_owned(),
            start_date: date_text(version.start_day),
            week_days: WeekDays::from_bits(version.week_days).days().collect(),
            extras_one_off: version.extras_one_off,
            extras: extra_quantities(version.extras),
            exclusions: version.exclusions,
            substitutions: version.substitutions,
        }
    }

    /// The record of this version of order `id`.
    fn into_record(self, id: u64) -> Result<ContentRecord, BadLine> {
        let bad = |what: &str| BadLine(format!("order {id}: {what}"));
        Ok(ContentRecord {
            effective_day: day_number(&self.effective_date, "effective_date", id)?,
            extras_since_day: day_number(&self.extras_since, "extras_since", id)?,
            box_id: self.box_id,
            frequency: frequency_code(&self.frequency).ok_or_else(|| bad("unknown frequency"))?,
            extras_one_off: self.extras_one_off,
            extras: extra_records(self.extras),
            exclusions: self.exclusions,
            substitutions: self.substitutions,
            start_day: day_number(&self.start_date, "start_date", id)?,
            week_days: week_day_bits(&self.week_days)
                .ok_or_else(|| bad("week_days must be 0 to 6"))?,
        })
    }
}

/// The day number of a date field of order `id`.
fn day_number(text: &str, field: &str, id: u64) -> Result<i32, BadLine> {
    parse_iso_date(text)
        .map(|d| d.0)
        .ok_or_else(|| BadLine(format!("order {id}: {field} is not a date")))
}

impl OrderLine {
    /// The line of a stored order.
    pub fn from_record(record: OrderRecord) -> OrderLine {
        let changed = record.settled_before != NEVER_CHANGED.0;
        OrderLine {
            id: record.id,
            customer_id: record.customer_id,
            created_at: record.created_at,
            versions: record
                .versions
                .into_iter()
                .map(ContentLine::from_record)
                .collect(),
            lifecycles: record
                .lifecycles
                .into_iter()
                .map(|version| LifecycleLine {
                    effective_date: date_text(version.effective_day),
                    cancel_date: version.cancel_day.map(date_text),
                    pause_date: version.pause_day.map(date_text),
                    resume_date: version.resume_day.map(date_text),
                    skipped_dates: version.skipped_days.into_iter().map(date_text).collect(),
                })
                .collect(),
            settled_before: changed.then(|| date_text(record.settled_before)),
            updated_at: changed.then_some(record.updated_at),
        }
    }

    /// The record to store; a history that breaks its rules is refused.
    pub fn into_record(self) -> Result<OrderRecord, BadLine> {
        let id = self.id;
        let bad = |what: &str| BadLine(format!("order {id}: {what}"));
        if self.id == 0 || self.customer_id == 0 {
            return Err(bad("the id and customer_id must be set"));
        }
        if self.settled_before.is_none()
            && (self.updated_at.is_some() || !self.lifecycles.is_empty())
        {
            return Err(bad("a history without settled_before"));
        }
        let versions = self
            .versions
            .into_iter()
            .map(|version| version.into_record(id))
            .collect::<Result<Vec<_>, _>>()?;
        let mut lifecycles = Vec::with_capacity(self.lifecycles.len());
        for version in self.lifecycles {
            let optional = |text: &Option<String>, field: &str| {
                text.as_deref()
                    .map(|text| day_number(text, field, id))
                    .transpose()
            };
            lifecycles.push(LifecycleRecord {
                effective_day: day_number(&version.effective_date, "effective_date", id)?,
                cancel_day: optional(&version.cancel_date, "cancel_date")?,
                pause_day: optional(&version.pause_date, "pause_date")?,
                resume_day: optional(&version.resume_date, "resume_date")?,
                skipped_days: version
                    .skipped_dates
                    .iter()
                    .map(|text| day_number(text, "skipped_dates", id))
                    .collect::<Result<_, _>>()?,
            });
        }
        let record = OrderRecord {
            id: self.id,
            customer_id: self.customer_id,
            created_at: self.created_at,
            versions,
            lifecycles,
            settled_before: match &self.settled_before {
                Some(settled) => day_number(settled, "settled_before", id)?,
                None => NEVER_CHANGED.0,
            },
            updated_at: self.updated_at.unwrap_or(self.created_at),
        };
        record
            .clone()
            .into_order()
            .map_err(|error| bad(&error.to_string()))?;
        Ok(record)
    }
}

pub(super) fn extra_quantities(extras: Vec<ExtraRecord>) -> Vec<ExtraQuantity> {
    extras
        .into_iter()
        .map(|line| ExtraQuantity {
            id: line.id,
            quantity: line.quantity,
        })
        .collect()
}

pub(super) fn extra_records(extras: Vec<ExtraQuantity>) -> Vec<ExtraRecord> {
    extras
        .into_iter()
        .map(|line| ExtraRecord {
            id: line.id,
            quantity: line.quantity,
        })
        .collect()
}

/// Weekdays 0 to 6 as bits; `None` for a number out of range.
fn week_day_bits(days: &[u8]) -> Option<u8> {
    let mut week_days = WeekDays::NONE;
    for day in days {
        if *day > 6 {
            return None;
        }
        week_days = week_days.with(*day);
    }
    Some(week_days.bits())
}
