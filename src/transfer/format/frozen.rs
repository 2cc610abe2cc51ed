//! Frozen delivery lists as exported (version 4 on), after a webstore's sessions, date by date:
//! [`FrozenDayLine`] (a date frozen whole: its withheld deliveries by reason), its
//! [`FrozenDeliveryLine`]s by order (each as it went, priced, its status by name), and last
//! [`FrozenThroughLine`] (how far they go); to and from the store's records and mark. Must not
//! touch: the store but its records, files, other kinds' lines (it shares the orders' extras).

use serde::{Deserialize, Serialize};

use super::orders::{extra_quantities, extra_records, ExtraQuantity};
use super::{date_text, BadLine};
use crate::domain::account::delivery_mark::DeliveryStatus;
use crate::domain::day::{parse_iso_date, Day};
use crate::domain::ids::OrderId;
use crate::store::kinds::deliveries::{DeliveryRecord, FreezeMark, FrozenDayRecord};

/// A delivery of a frozen date, as exported (`store::kinds::deliveries::DeliveryRecord`,
/// with its webstore, date and order from the key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrozenDeliveryLine {
    /// Its webstore.
    pub webstore_id: String,
    /// `YYYY-MM-DD`.
    pub date: String,
    /// The order delivered.
    pub order_id: u64,
    /// Its customer.
    pub customer_id: u64,
    /// Their delivery service then.
    pub delivery_service_id: u64,
    /// The box.
    pub box_id: u64,
    /// The extras that went.
    pub extras: Vec<ExtraQuantity>,
    /// Excluded box items.
    pub exclusions: Vec<u64>,
    /// Substitute box items.
    pub substitutions: Vec<u64>,
    /// What it costs, in minor units.
    pub price_cents: i64,
    /// `pending`, `delivered` or `not_delivered`.
    pub status: String,
    /// What was noted when it was marked (version 6 on; absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A date frozen whole, as exported: its withheld deliveries by reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrozenDayLine {
    /// Its webstore.
    pub webstore_id: String,
    /// `YYYY-MM-DD`.
    pub date: String,
    /// Within a pause.
    pub paused: u64,
    /// On a skipped date.
    pub skipped: u64,
    /// Cancelled.
    pub cancelled: u64,
    /// The customer halted.
    pub halted: u64,
}

/// A webstore's frozen dates, as exported: from `since` to `through`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrozenThroughLine {
    /// Its webstore.
    pub webstore_id: String,
    /// `YYYY-MM-DD`: the first date frozen.
    pub since: String,
    /// `YYYY-MM-DD`: the last date frozen.
    pub through: String,
    /// `YYYY-MM-DD`: the last date whose deliveries were charged (version 6 on; absent:
    /// none yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub charged_through: Option<String>,
}

impl FrozenDeliveryLine {
    /// The line of a stored frozen delivery.
    pub fn from_record(
        webstore_id: &str,
        day: Day,
        order: OrderId,
        record: DeliveryRecord,
    ) -> FrozenDeliveryLine {
        let status = record.status().name().to_owned();
        FrozenDeliveryLine {
            webstore_id: webstore_id.to_owned(),
            date: date_text(day.0),
            order_id: order.0,
            customer_id: record.customer_id,
            delivery_service_id: record.delivery_service_id,
            box_id: record.box_id,
            extras: extra_quantities(record.extras),
            exclusions: record.exclusions,
            substitutions: record.substitutions,
            price_cents: record.price,
            status,
            note: record.note,
        }
    }

    /// The webstore, date, order and record to store.
    pub fn into_record(self) -> Result<(String, Day, OrderId, DeliveryRecord), BadLine> {
        let id = self.order_id;
        let bad = |what: &str| BadLine(format!("frozen delivery of order {id}: {what}"));
        let day = parse_iso_date(&self.date).ok_or_else(|| bad("the date is not a date"))?;
        let status = [
            DeliveryStatus::Pending,
            DeliveryStatus::Delivered,
            DeliveryStatus::NotDelivered,
        ]
        .into_iter()
        .find(|status| status.name() == self.status)
        .ok_or_else(|| bad("unknown status"))?;
        if self.webstore_id.is_empty() || self.order_id == 0 || self.customer_id == 0 {
            return Err(bad("the webstore_id, order_id and customer_id must be set"));
        }
        Ok((
            self.webstore_id,
            day,
            OrderId(self.order_id),
            DeliveryRecord {
                customer_id: self.customer_id,
                delivery_service_id: self.delivery_service_id,
                box_id: self.box_id,
                extras: extra_records(self.extras),
                exclusions: self.exclusions,
                substitutions: self.substitutions,
                price: self.price_cents,
                status: status.code(),
                note: self.note,
            },
        ))
    }
}

impl FrozenDayLine {
    /// The line of a stored frozen date.
    pub fn from_record(webstore_id: &str, day: Day, record: FrozenDayRecord) -> FrozenDayLine {
        FrozenDayLine {
            webstore_id: webstore_id.to_owned(),
            date: date_text(day.0),
            paused: record.paused,
            skipped: record.skipped,
            cancelled: record.cancelled,
            halted: record.halted,
        }
    }

    /// The webstore, date and record to store.
    pub fn into_record(self) -> Result<(String, Day, FrozenDayRecord), BadLine> {
        let day = parse_iso_date(&self.date)
            .ok_or_else(|| BadLine(format!("frozen day {:?}: not a date", self.date)))?;
        if self.webstore_id.is_empty() {
            return Err(BadLine("frozen day: the webstore_id must be set".into()));
        }
        Ok((
            self.webstore_id,
            day,
            FrozenDayRecord {
                paused: self.paused,
                skipped: self.skipped,
                cancelled: self.cancelled,
                halted: self.halted,
            },
        ))
    }
}

impl FrozenThroughLine {
    /// The line of a webstore's mark.
    pub fn of_mark(
        webstore_id: &str,
        mark: FreezeMark,
        charged_through: Option<Day>,
    ) -> FrozenThroughLine {
        FrozenThroughLine {
            webstore_id: webstore_id.to_owned(),
            since: date_text(mark.since.0),
            through: date_text(mark.through.0),
            charged_through: charged_through.map(|day| date_text(day.0)),
        }
    }

    /// The webstore and mark to store.
    pub fn into_mark(self) -> Result<(String, FreezeMark, Option<Day>), BadLine> {
        let day = |text: &str| {
            parse_iso_date(text)
                .ok_or_else(|| BadLine(format!("frozen_through: {text:?} is not a date")))
        };
        let mark = FreezeMark {
            since: day(&self.since)?,
            through: day(&self.through)?,
        };
        if self.webstore_id.is_empty() || mark.through < mark.since {
            return Err(BadLine(
                "frozen_through: the webstore_id must be set, and through not before since".into(),
            ));
        }
        let charged = self.charged_through.as_deref().map(day).transpose()?;
        Ok((self.webstore_id, mark, charged))
    }
}
