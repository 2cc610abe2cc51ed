//! The account's settings (`PATCH /v1/customers/{id}/account`): the customer's `discount`
//! (a fraction from 0 to 1, at most four decimals) and `balance_threshold` (an amount, or
//! `null` for the webstore's). Absent fields keep their value.
//!
//! Pure. Must not touch: the balance (only transactions move it), storage.

use super::payment::UNKNOWN_FIELD;
use crate::domain::fields::{FieldErrors, BLANK, INVALID};
use crate::domain::money::{Amount, Discount};
use crate::domain::raw_fields::RawFields;

/// The fields of the settings' body.
pub const SETTINGS_FIELDS: [&str; 2] = ["discount", "balance_threshold"];

/// The message for a field only the ledger sets.
pub const LEDGER_ONLY: &str = "is the sum of the account's transactions: post a payment or an \
                               adjustment";

/// What a settings change sets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AccountSettings {
    /// The discount, if sent.
    pub discount: Option<Discount>,
    /// The threshold, if sent (`Some(None)`: back to the webstore's).
    pub threshold: Option<Option<Amount>>,
}

/// Reads a settings change.
pub fn parse_settings(fields: &RawFields) -> Result<AccountSettings, FieldErrors> {
    let mut errors = FieldErrors::new();
    for name in fields.unknown(&SETTINGS_FIELDS) {
        let message = if name == "balance" {
            LEDGER_ONLY
        } else {
            UNKNOWN_FIELD
        };
        errors.add(name, message);
    }
    let discount = match fields.text("discount") {
        None => None,
        Some(_) if fields.is_null("discount") => {
            errors.add("discount", BLANK);
            None
        }
        Some(raw) => {
            let discount = Discount::from_json_text(raw);
            if discount.is_none() {
                errors.add("discount", INVALID);
            }
            discount
        }
    };
    let threshold = match fields.text("balance_threshold") {
        None => None,
        Some(_) if fields.is_null("balance_threshold") => Some(None),
        Some(_) => fields.amount("balance_threshold", &mut errors).map(Some),
    };
    errors.into_result(AccountSettings {
        discount,
        threshold,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_read_exactly_and_null_means_the_webstore_s_threshold() {
        let fields = RawFields::of(&[("discount", "0.125"), ("balance_threshold", r#""-20.00""#)]);
        let settings = parse_settings(&fields).unwrap();
        assert_eq!(settings.discount, Discount::of(1250));
        assert_eq!(settings.threshold, Some(Some(Amount(-2000))));
        let settings = parse_settings(&RawFields::of(&[("balance_threshold", "null")])).unwrap();
        assert_eq!(
            settings,
            AccountSettings {
                discount: None,
                threshold: Some(None)
            }
        );
        let errors = parse_settings(&RawFields::of(&[
            ("discount", "1.5"),
            ("balance_threshold", "1.001"),
            ("balance", "100"),
        ]))
        .unwrap_err();
        for field in ["discount", "balance_threshold", "balance"] {
            assert!(errors.has(field), "{field}");
        }
    }
}
