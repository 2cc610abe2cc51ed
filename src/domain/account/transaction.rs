//! The ledger's entries: each transaction moves the balance by its signed amount and says
//! what it is of (a delivery's charge, a payment, a correction). Append-only: a charge or a
//! payment is undone by a reversal of its own, never by changing it.
//!
//! Pure. Must not touch: how an account applies one (`account`), storage.

use crate::domain::day::Day;
use crate::domain::ids::{CustomerId, OrderId};
use crate::domain::money::Amount;

/// What a transaction is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransactionKind {
    /// A delivery, delivered: minus its price.
    Charge,
    /// A charged delivery marked not delivered after all: plus its price.
    ChargeReversal,
    /// A payment: plus its amount.
    Payment,
    /// A payment reversed: minus its amount.
    PaymentReversal,
    /// A correction by the producer, either way.
    Adjustment,
}

impl TransactionKind {
    /// Every kind, in code order.
    pub const ALL: [TransactionKind; 5] = [
        TransactionKind::Charge,
        TransactionKind::ChargeReversal,
        TransactionKind::Payment,
        TransactionKind::PaymentReversal,
        TransactionKind::Adjustment,
    ];

    /// Its name in the API.
    pub fn name(self) -> &'static str {
        match self {
            TransactionKind::Charge => "charge",
            TransactionKind::ChargeReversal => "charge_reversal",
            TransactionKind::Payment => "payment",
            TransactionKind::PaymentReversal => "payment_reversal",
            TransactionKind::Adjustment => "adjustment",
        }
    }

    /// Its code in the store.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The kind of a stored code.
    pub fn of_code(code: u8) -> Option<TransactionKind> {
        TransactionKind::ALL.get(usize::from(code)).copied()
    }
}

/// What a transaction is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransactionOf {
    /// An order's delivery on a date (a charge, a charge's reversal).
    Delivery {
        /// The order.
        order_id: OrderId,
    },
    /// A payment (the payment, its reversal).
    Payment {
        /// The payment.
        payment_id: u64,
    },
    /// Nothing but itself (an adjustment).
    Nothing,
}

/// A transaction to post: everything but what the account gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Posting {
    /// Signed: what it adds to the balance.
    pub amount: Amount,
    /// What it is.
    pub kind: TransactionKind,
    /// What the producer or the customer reads of it.
    pub description: String,
    /// The delivery's date, or the payment's.
    pub date: Day,
    /// What it is of.
    pub of: TransactionOf,
}

/// One entry of an account's ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transaction {
    /// Unique across the service.
    pub id: u64,
    /// The customer whose account it is in.
    pub customer_id: CustomerId,
    /// Its place in the account's ledger, from 1.
    pub number: u64,
    /// Signed: what it added to the balance.
    pub amount: Amount,
    /// The balance after it.
    pub balance: Amount,
    /// What it is.
    pub kind: TransactionKind,
    /// What the producer or the customer reads of it.
    pub description: String,
    /// The delivery's date, or the payment's.
    pub date: Day,
    /// Unix seconds of its posting.
    pub created_at: i64,
    /// What it is of.
    pub of: TransactionOf,
}
