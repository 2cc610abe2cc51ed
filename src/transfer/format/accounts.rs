//! Customers' accounts as exported (version 5 on), after the orders: for each customer that
//! has an account, its [`AccountLine`], then its ledger's [`TransactionLine`]s by number,
//! then its [`PaymentLine`]s by id; to and from the store's records. Amounts are minor units
//! (`_cents`, as the frozen deliveries' prices), dates `YYYY-MM-DD`, kinds and methods by
//! name, so that the lines read without this code. Must not touch: the store but its
//! records, files, other kinds' lines.

use serde::{Deserialize, Serialize};

use super::{date_text, BadLine};
use crate::domain::account::payment::PaymentMethod;
use crate::domain::account::transaction::TransactionKind;
use crate::domain::day::parse_iso_date;
use crate::domain::money::Discount;
use crate::store::kinds::accounts::{AccountRecord, PaymentRecord, TransactionRecord};

/// A customer's account, as exported (`store::kinds::accounts::AccountRecord`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccountLine {
    /// The customer.
    pub customer_id: u64,
    /// Its webstore.
    pub webstore_id: String,
    /// The balance, in minor units.
    pub balance_cents: i64,
    /// The discount, in ten-thousandths.
    pub discount_ten_thousandths: u16,
    /// The customer's own spend limit, in minor units.
    pub threshold_cents: Option<i64>,
    /// Whether the balance halts the customer.
    pub halted_by_balance: bool,
    /// How many transactions its ledger holds.
    pub transactions: u64,
    /// Unix seconds of its last change.
    pub updated_at: i64,
    /// Whether the customer is halted by hand (version 7 on; absent: every halt of the
    /// customer that is on is by hand, as before a balance could halt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub halted_by_hand: Option<bool>,
}

/// One transaction of a ledger, as exported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransactionLine {
    /// Unique across the service.
    pub id: u64,
    /// The customer.
    pub customer_id: u64,
    /// Its number in the ledger, from 1.
    pub number: u64,
    /// Signed, in minor units.
    pub amount_cents: i64,
    /// The balance after it, in minor units.
    pub balance_cents: i64,
    /// `charge`, `charge_reversal`, `payment`, `payment_reversal` or `adjustment`.
    pub kind: String,
    /// What it says.
    pub description: String,
    /// `YYYY-MM-DD`.
    pub date: String,
    /// Unix seconds of its posting.
    pub created_at: i64,
    /// The order whose delivery it is of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_id: Option<u64>,
    /// The payment it is of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payment_id: Option<u64>,
}

/// One payment, as exported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaymentLine {
    /// Unique across the service.
    pub id: u64,
    /// The customer.
    pub customer_id: u64,
    /// In minor units, above zero.
    pub amount_cents: i64,
    /// `bank_transfer`, `credit_card`, `cash`, `delivery` or `unspecified`.
    pub method: String,
    /// What the producer wrote of it.
    pub description: Option<String>,
    /// A reference.
    pub reference: Option<String>,
    /// `YYYY-MM-DD`.
    pub date: String,
    /// Its transaction.
    pub transaction_id: u64,
    /// Its reversal's transaction, once reversed.
    pub reversal_id: Option<u64>,
    /// Unix seconds of its recording.
    pub created_at: i64,
}

impl AccountLine {
    /// The line of a stored account.
    pub fn from_record(record: AccountRecord) -> AccountLine {
        AccountLine {
            customer_id: record.customer_id,
            webstore_id: record.webstore_id,
            balance_cents: record.balance,
            discount_ten_thousandths: record.discount,
            threshold_cents: record.threshold,
            halted_by_balance: record.halted_by_balance,
            transactions: record.transactions,
            updated_at: record.updated_at,
            halted_by_hand: record.halted_by_hand,
        }
    }

    /// The record to store.
    pub fn into_record(self) -> Result<AccountRecord, BadLine> {
        if Discount::of(self.discount_ten_thousandths).is_none() || self.webstore_id.is_empty() {
            return Err(BadLine(format!(
                "the account of customer {} has a discount above the whole or no webstore",
                self.customer_id
            )));
        }
        Ok(AccountRecord {
            customer_id: self.customer_id,
            webstore_id: self.webstore_id,
            balance: self.balance_cents,
            discount: self.discount_ten_thousandths,
            threshold: self.threshold_cents,
            halted_by_balance: self.halted_by_balance,
            transactions: self.transactions,
            updated_at: self.updated_at,
            halted_by_hand: self.halted_by_hand,
        })
    }
}

impl TransactionLine {
    /// The line of a stored transaction; `None` for a kind this release does not know.
    pub fn from_record(record: TransactionRecord) -> Option<TransactionLine> {
        Some(TransactionLine {
            id: record.id,
            customer_id: record.customer_id,
            number: record.number,
            amount_cents: record.amount,
            balance_cents: record.balance,
            kind: TransactionKind::of_code(record.kind)?.name().to_owned(),
            description: record.description,
            date: date_text(record.date),
            created_at: record.created_at,
            order_id: record.order_id,
            payment_id: record.payment_id,
        })
    }

    /// The record to store.
    pub fn into_record(self) -> Result<TransactionRecord, BadLine> {
        let kind = TransactionKind::ALL
            .into_iter()
            .find(|kind| kind.name() == self.kind);
        let date = parse_iso_date(&self.date);
        match (kind, date) {
            (Some(kind), Some(date)) if self.number > 0 => Ok(TransactionRecord {
                id: self.id,
                customer_id: self.customer_id,
                number: self.number,
                amount: self.amount_cents,
                balance: self.balance_cents,
                kind: kind.code(),
                description: self.description,
                date: date.0,
                created_at: self.created_at,
                order_id: self.order_id,
                payment_id: self.payment_id,
            }),
            _ => Err(BadLine(format!(
                "transaction {} of customer {}: an unknown kind {:?}, a date that is not \
                 YYYY-MM-DD or the number 0",
                self.id, self.customer_id, self.kind
            ))),
        }
    }
}

impl PaymentLine {
    /// The line of a stored payment; `None` for a method this release does not know.
    pub fn from_record(record: PaymentRecord) -> Option<PaymentLine> {
        Some(PaymentLine {
            id: record.id,
            customer_id: record.customer_id,
            amount_cents: record.amount,
            method: PaymentMethod::of_code(record.method)?.name().to_owned(),
            description: record.description,
            reference: record.reference,
            date: date_text(record.date),
            transaction_id: record.transaction_id,
            reversal_id: record.reversal_id,
            created_at: record.created_at,
        })
    }

    /// The record to store.
    pub fn into_record(self) -> Result<PaymentRecord, BadLine> {
        match (
            PaymentMethod::parse(&self.method),
            parse_iso_date(&self.date),
        ) {
            (Some(method), Some(date)) if self.amount_cents > 0 => Ok(PaymentRecord {
                id: self.id,
                customer_id: self.customer_id,
                amount: self.amount_cents,
                method: method.code(),
                description: self.description,
                reference: self.reference,
                date: date.0,
                transaction_id: self.transaction_id,
                reversal_id: self.reversal_id,
                created_at: self.created_at,
            }),
            _ => Err(BadLine(format!(
                "payment {} of customer {}: an unknown method {:?}, a date that is not \
                 YYYY-MM-DD or an amount not above 0",
                self.id, self.customer_id, self.method
            ))),
        }
    }
}
