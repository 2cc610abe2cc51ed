//! A correction of a balance (`POST /v1/customers/{id}/adjustments`): a signed, non-zero
//! amount and the reason for it, posted as an `adjustment` transaction, as the original's
//! "change balance" did (by a transaction, never by setting the balance).
//!
//! Pure. Must not touch: the account's balance (`account` posts), storage.

use super::payment::UNKNOWN_FIELD;
use crate::domain::day::Day;
use crate::domain::fields::{FieldErrors, BLANK};
use crate::domain::money::Amount;
use crate::domain::raw_fields::RawFields;

/// The fields of an adjustment's body.
pub const ADJUSTMENT_FIELDS: [&str; 3] = ["amount", "description", "date"];

/// The message for an amount of zero.
pub const ZERO: &str = "must not be 0";

/// An adjustment to post.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAdjustment {
    /// Signed, not zero.
    pub amount: Amount,
    /// Why (required).
    pub description: String,
    /// Its date (default today).
    pub date: Day,
}

/// Reads an adjustment's body.
pub fn parse_adjustment(fields: &RawFields, today: Day) -> Result<NewAdjustment, FieldErrors> {
    let mut errors = FieldErrors::new();
    fields.refuse_unknown(&ADJUSTMENT_FIELDS, &mut errors, UNKNOWN_FIELD);
    let amount = fields.amount("amount", &mut errors);
    match amount {
        None if !errors.has("amount") => errors.add("amount", BLANK),
        Some(Amount::ZERO) => errors.add("amount", ZERO),
        _ => {}
    }
    let description = fields.string("description", &mut errors);
    if description.is_none() && !errors.has("description") {
        errors.add("description", BLANK);
    }
    let date = fields.date("date", &mut errors).unwrap_or(today);
    match (amount, description) {
        (Some(amount), Some(description)) if errors.is_empty() => Ok(NewAdjustment {
            amount,
            description,
            date,
        }),
        _ => Err(errors),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_adjustment_is_signed_non_zero_and_says_why() {
        let today = Day::of(jiff::civil::date(2026, 12, 2));
        let fields = RawFields::of(&[("amount", "-3.20"), ("description", r#""Bruised kale""#)]);
        let adjustment = parse_adjustment(&fields, today).unwrap();
        assert_eq!(adjustment.amount, Amount(-320));
        let errors = parse_adjustment(&RawFields::of(&[("amount", "0.00")]), today).unwrap_err();
        assert!(errors.has("amount") && errors.has("description"));
    }
}
