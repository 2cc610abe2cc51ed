//! Marking a frozen delivery (`PUT /v1/orders/{id}/deliveries/{date}`): `delivered` or
//! `not_delivered`, with an optional note. A delivery marked not delivered after its charge
//! has the charge reversed; marked delivered again, it is charged again.
//!
//! Pure. Must not touch: the frozen delivery itself (the store's), the account.

use super::payment::UNKNOWN_FIELD;
use crate::domain::fields::{FieldErrors, BLANK, NOT_IN_LIST};
use crate::domain::raw_fields::RawFields;

/// The fields of a mark's body.
pub const MARK_FIELDS: [&str; 2] = ["status", "note"];

/// A frozen delivery's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryStatus {
    /// Not yet delivered (nor charged).
    Pending,
    /// Delivered, and charged.
    Delivered,
    /// Not delivered: not charged, or its charge reversed.
    NotDelivered,
}

impl DeliveryStatus {
    /// Its code in a record.
    pub fn code(self) -> u8 {
        match self {
            DeliveryStatus::Pending => 0,
            DeliveryStatus::Delivered => 1,
            DeliveryStatus::NotDelivered => 2,
        }
    }

    /// The status of a record's code.
    pub fn of_code(code: u8) -> Option<DeliveryStatus> {
        match code {
            0 => Some(DeliveryStatus::Pending),
            1 => Some(DeliveryStatus::Delivered),
            2 => Some(DeliveryStatus::NotDelivered),
            _ => None,
        }
    }

    /// Its name in the API.
    pub fn name(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::NotDelivered => "not_delivered",
        }
    }
}

/// A mark to set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryMark {
    /// `Delivered` or `NotDelivered`.
    pub status: DeliveryStatus,
    /// What the driver or the producer noted.
    pub note: Option<String>,
}

/// Reads a mark's body.
pub fn parse_mark(fields: &RawFields) -> Result<DeliveryMark, FieldErrors> {
    let mut errors = FieldErrors::new();
    fields.refuse_unknown(&MARK_FIELDS, &mut errors, UNKNOWN_FIELD);
    let status = match fields.value("status") {
        None | Some(serde_json::Value::Null) => {
            errors.add("status", BLANK);
            None
        }
        Some(serde_json::Value::String(name)) if name == "delivered" => {
            Some(DeliveryStatus::Delivered)
        }
        Some(serde_json::Value::String(name)) if name == "not_delivered" => {
            Some(DeliveryStatus::NotDelivered)
        }
        Some(_) => {
            errors.add("status", NOT_IN_LIST);
            None
        }
    };
    let note = fields.string("note", &mut errors);
    match status {
        Some(status) if errors.is_empty() => Ok(DeliveryMark { status, note }),
        _ => Err(errors),
    }
}
