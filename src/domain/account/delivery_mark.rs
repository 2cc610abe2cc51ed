//! Marking a frozen delivery (`PUT /v1/orders/{id}/deliveries/{date}`): `delivered` or
//! `not_delivered`, with an optional note. A delivery marked not delivered after its charge
//! has the charge reversed; marked delivered again, it is charged again.
//!
//! A delivery is charged when it becomes delivered (by a mark, or by the charging duty at
//! `delivered_at`: [`super::charging`]) and the charge reversed when a delivered one is
//! marked not delivered: [`DeliveryStatus::posting_to`] says which, so that a delivery's
//! charges always add up to its price once while delivered and to nothing otherwise.
//!
//! Pure. Must not touch: the frozen delivery itself (the store's), the account.

use super::payment::UNKNOWN_FIELD;
use super::transaction::{Posting, Transaction, TransactionKind, TransactionOf};
use crate::domain::day::Day;
use crate::domain::fields::{FieldErrors, BLANK, NOT_IN_LIST};
use crate::domain::ids::{CustomerId, OrderId};
use crate::domain::money::Amount;
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

    /// What going from this status to `to` posts for a delivery of `price` on `date` of
    /// `order_id`: a charge when it becomes delivered, a charge's reversal when a delivered
    /// one becomes not delivered, nothing otherwise.
    pub fn posting_to(
        self,
        to: DeliveryStatus,
        price: Amount,
        date: Day,
        order_id: OrderId,
    ) -> Option<Posting> {
        let of = TransactionOf::Delivery { order_id };
        let on = date.date();
        match (self, to) {
            (DeliveryStatus::Delivered, DeliveryStatus::Delivered) => None,
            (_, DeliveryStatus::Delivered) => Some(Posting {
                amount: Amount(-price.0),
                kind: TransactionKind::Charge,
                description: format!("Delivery on {on}"),
                date,
                of,
            }),
            (DeliveryStatus::Delivered, DeliveryStatus::NotDelivered) => Some(Posting {
                amount: price,
                kind: TransactionKind::ChargeReversal,
                description: format!("Delivery on {on} not delivered"),
                date,
                of,
            }),
            _ => None,
        }
    }
}

/// A frozen delivery after a mark: what it is now, and the transaction the mark posted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkedDelivery {
    /// The order delivered.
    pub order_id: OrderId,
    /// Its customer.
    pub customer_id: CustomerId,
    /// The date.
    pub date: Day,
    /// Its status now.
    pub status: DeliveryStatus,
    /// Its price, frozen with the date.
    pub price: Amount,
    /// What was noted.
    pub note: Option<String>,
    /// The charge or the reversal the mark posted, if it posted one.
    pub transaction: Option<Transaction>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use DeliveryStatus::{Delivered, NotDelivered, Pending};

    #[test]
    fn a_delivery_is_charged_once_while_delivered_and_never_otherwise() {
        let price = Amount(1_250);
        let all = [Pending, Delivered, NotDelivered];
        // Any path through the statuses: the charges sum to minus the price while
        // delivered, to nothing otherwise.
        for a in all {
            for b in all {
                for c in all {
                    let mut status = Pending;
                    let mut sum = 0;
                    for to in [a, b, c] {
                        if to == Pending {
                            continue;
                        }
                        if let Some(posting) = status.posting_to(to, price, Day(20_000), OrderId(1))
                        {
                            sum += posting.amount.0;
                        }
                        status = to;
                    }
                    let expected = if status == Delivered { -price.0 } else { 0 };
                    assert_eq!(sum, expected, "{a:?} {b:?} {c:?}");
                }
            }
        }
    }

    #[test]
    fn a_mark_names_every_failing_field() {
        let errors = parse_mark(&RawFields::of(&[
            ("status", r#""lost""#),
            ("note", "7"),
            ("x", "1"),
        ]));
        let errors = errors.unwrap_err();
        for field in ["status", "x"] {
            assert!(errors.has(field), "{field}");
        }
        let mark = parse_mark(&RawFields::of(&[
            ("status", r#""not_delivered""#),
            ("note", r#""gate shut""#),
        ]));
        assert_eq!(
            mark.unwrap(),
            DeliveryMark {
                status: NotDelivered,
                note: Some("gate shut".into())
            }
        );
    }
}
