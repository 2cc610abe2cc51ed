//! Payments: money a customer paid the producer (by bank transfer, card, cash, on delivery),
//! credited to the account as a `payment` transaction, and reversed at most once (a
//! `payment_reversal`). The body of `POST /v1/customers/{id}/payments`, every failing field
//! named at once.
//!
//! Pure. Must not touch: the account's balance (`account` posts), storage.

use crate::domain::day::Day;
use crate::domain::fields::{FieldErrors, BLANK, NOT_IN_LIST};
use crate::domain::ids::CustomerId;
use crate::domain::money::Amount;
use crate::domain::raw_fields::RawFields;

/// The fields of a payment's body.
pub const PAYMENT_FIELDS: [&str; 5] = ["amount", "method", "description", "reference", "date"];

/// The message for a field a body does not have.
pub const UNKNOWN_FIELD: &str = "is not a field of this request";
/// The message for an amount that must be above zero.
pub const NOT_POSITIVE: &str = "must be greater than 0";
/// A reversal of a payment already reversed.
pub const ALREADY_REVERSED: &str = "has already been reversed";

/// How a payment was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PaymentMethod {
    /// A bank transfer.
    BankTransfer,
    /// A credit or debit card.
    CreditCard,
    /// Cash.
    Cash,
    /// Paid to the driver on delivery.
    Delivery,
    /// Not said.
    Unspecified,
}

impl PaymentMethod {
    /// Every method, in code order.
    pub const ALL: [PaymentMethod; 5] = [
        PaymentMethod::BankTransfer,
        PaymentMethod::CreditCard,
        PaymentMethod::Cash,
        PaymentMethod::Delivery,
        PaymentMethod::Unspecified,
    ];

    /// Its name in the API.
    pub fn name(self) -> &'static str {
        match self {
            PaymentMethod::BankTransfer => "bank_transfer",
            PaymentMethod::CreditCard => "credit_card",
            PaymentMethod::Cash => "cash",
            PaymentMethod::Delivery => "delivery",
            PaymentMethod::Unspecified => "unspecified",
        }
    }

    /// The method of a name.
    pub fn parse(name: &str) -> Option<PaymentMethod> {
        PaymentMethod::ALL
            .into_iter()
            .find(|method| method.name() == name)
    }

    /// Its code in the store.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The method of a stored code.
    pub fn of_code(code: u8) -> Option<PaymentMethod> {
        PaymentMethod::ALL.get(usize::from(code)).copied()
    }
}

/// A payment, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payment {
    /// Unique across the service.
    pub id: u64,
    /// Whose account it was credited to.
    pub customer_id: CustomerId,
    /// Above zero.
    pub amount: Amount,
    /// How it was made.
    pub method: PaymentMethod,
    /// What the producer wrote of it.
    pub description: Option<String>,
    /// The bank's or the card processor's reference.
    pub reference: Option<String>,
    /// The date it was paid.
    pub date: Day,
    /// Its transaction.
    pub transaction_id: u64,
    /// Its reversal's transaction, once reversed.
    pub reversal_id: Option<u64>,
    /// Unix seconds of its recording.
    pub created_at: i64,
}

impl Payment {
    /// Whether it was reversed.
    pub fn reversed(&self) -> bool {
        self.reversal_id.is_some()
    }
}

/// A payment to record, as its body says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPayment {
    /// Above zero.
    pub amount: Amount,
    /// How it was made (`unspecified` when not said).
    pub method: PaymentMethod,
    /// What the producer wrote of it.
    pub description: Option<String>,
    /// A reference.
    pub reference: Option<String>,
    /// When it was paid (default `today`).
    pub date: Day,
}

/// Reads a payment's body, `today` being the webstore's date now.
pub fn parse_payment(fields: &RawFields, today: Day) -> Result<NewPayment, FieldErrors> {
    let mut errors = FieldErrors::new();
    fields.refuse_unknown(&PAYMENT_FIELDS, &mut errors, UNKNOWN_FIELD);
    let amount = fields.amount("amount", &mut errors);
    match amount {
        None if !errors.has("amount") => errors.add("amount", BLANK),
        Some(amount) if amount <= Amount::ZERO => errors.add("amount", NOT_POSITIVE),
        _ => {}
    }
    let method = match fields.value("method") {
        None | Some(serde_json::Value::Null) => Some(PaymentMethod::Unspecified),
        Some(serde_json::Value::String(name)) => PaymentMethod::parse(&name),
        Some(_) => None,
    };
    if method.is_none() {
        errors.add("method", NOT_IN_LIST);
    }
    let description = fields.string("description", &mut errors);
    let reference = fields.string("reference", &mut errors);
    let date = fields.date("date", &mut errors).unwrap_or(today);
    match (amount, method) {
        (Some(amount), Some(method)) if errors.is_empty() => Ok(NewPayment {
            amount,
            method,
            description,
            reference,
            date,
        }),
        _ => Err(errors),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn today() -> Day {
        Day::of(jiff::civil::date(2026, 12, 2))
    }

    #[test]
    fn a_payment_reads_exactly_and_defaults_what_is_not_sent() {
        let fields = RawFields::of(&[("amount", "12.50")]);
        let payment = parse_payment(&fields, today()).unwrap();
        assert_eq!(payment.amount, Amount(1250));
        assert_eq!(payment.method, PaymentMethod::Unspecified);
        assert_eq!(payment.date, today());
        let fields = RawFields::of(&[
            ("amount", r#""0.01""#),
            ("method", r#""bank_transfer""#),
            ("reference", r#""INV-7""#),
            ("date", r#""2026-11-30""#),
        ]);
        let payment = parse_payment(&fields, today()).unwrap();
        assert_eq!(
            (payment.amount, payment.method),
            (Amount(1), PaymentMethod::BankTransfer)
        );
        assert_eq!(payment.reference.as_deref(), Some("INV-7"));
    }

    #[test]
    fn every_failing_field_is_named_at_once() {
        let fields = RawFields::of(&[
            ("amount", "2.675"),
            ("method", r#""cheque""#),
            ("date", r#""30/11/2026""#),
            ("id", "3"),
        ]);
        let errors = parse_payment(&fields, today()).unwrap_err();
        let named: Vec<&str> = errors.fields().collect();
        for field in ["amount", "method", "date", "id"] {
            assert!(named.contains(&field), "{field}: {named:?}");
        }
        for (amount, message) in [("0", NOT_POSITIVE), ("-5", NOT_POSITIVE), ("null", BLANK)] {
            let errors = parse_payment(&RawFields::of(&[("amount", amount)]), today()).unwrap_err();
            assert!(errors
                .iter()
                .any(|(f, m)| f == "amount" && m.contains(&message.to_owned())));
        }
        let errors = parse_payment(&RawFields::of(&[]), today()).unwrap_err();
        assert!(errors.has("amount"));
    }
}
