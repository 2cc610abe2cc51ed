//! The JSON shapes of a customer's account, its transactions, its payments and a delivery's
//! mark, built from
//! the domain's values: amounts as decimal strings with two places and a sign where negative
//! (`"-12.50"`), the discount a fraction, dates `YYYY-MM-DD`, times RFC 3339.
//!
//! Must not touch: HTTP (responses and statuses are `crate::http`'s), the store.

use serde::Serialize;

use super::{DateView, Rfc3339};
use crate::domain::account::delivery_mark::MarkedDelivery;
use crate::domain::account::payment::Payment;
use crate::domain::account::transaction::{Transaction, TransactionOf};
use crate::domain::account::Account;
use crate::domain::money::{Amount, Discount};

/// An amount as the API writes it.
#[derive(Debug, Clone, Copy)]
pub struct AmountView(pub Amount);

impl Serialize for AmountView {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&self.0)
    }
}

/// A discount as a fraction (four decimals at most, so its `f64` prints as its decimal).
/// Not an amount: the contract answers `discount` as a JSON number (`0.125`), so the
/// integer ten-thousandths are turned into one only here, to be written; no price is ever
/// computed from this float (prices use `Discount` itself, in minor units).
pub fn discount_fraction(discount: Discount) -> f64 {
    f64::from(discount.ten_thousandths()) / f64::from(Discount::WHOLE)
}

/// `GET /v1/customers/{id}/account`.
#[derive(Serialize)]
pub struct AccountView<'a> {
    customer_id: u64,
    balance: AmountView,
    currency: &'a str,
    discount: f64,
    balance_threshold: Option<AmountView>,
    halted_by_balance: bool,
    updated_at: Rfc3339,
}

impl<'a> AccountView<'a> {
    /// The view of `account`, in its webstore's `currency`.
    pub fn new(account: &Account, currency: &'a str) -> AccountView<'a> {
        AccountView {
            customer_id: account.customer_id.0,
            balance: AmountView(account.balance),
            currency,
            discount: discount_fraction(account.discount),
            balance_threshold: account.threshold.map(AmountView),
            halted_by_balance: account.halted_by_balance,
            updated_at: Rfc3339(account.updated_at),
        }
    }
}

/// One transaction of a ledger.
#[derive(Serialize)]
pub struct TransactionView<'a> {
    id: u64,
    customer_id: u64,
    number: u64,
    amount: AmountView,
    balance: AmountView,
    kind: &'static str,
    description: &'a str,
    date: DateView,
    created_at: Rfc3339,
    #[serde(skip_serializing_if = "Option::is_none")]
    order_id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    payment_id: Option<u64>,
}

impl<'a> TransactionView<'a> {
    /// The view of `transaction`.
    pub fn new(transaction: &'a Transaction) -> TransactionView<'a> {
        let (order_id, payment_id) = match transaction.of {
            TransactionOf::Delivery { order_id } => (Some(order_id.0), None),
            TransactionOf::Payment { payment_id } => (None, Some(payment_id)),
            TransactionOf::Nothing => (None, None),
        };
        TransactionView {
            id: transaction.id,
            customer_id: transaction.customer_id.0,
            number: transaction.number,
            amount: AmountView(transaction.amount),
            balance: AmountView(transaction.balance),
            kind: transaction.kind.name(),
            description: &transaction.description,
            date: DateView(transaction.date),
            created_at: Rfc3339(transaction.created_at),
            order_id,
            payment_id,
        }
    }
}

/// A payment.
#[derive(Serialize)]
pub struct PaymentView<'a> {
    id: u64,
    customer_id: u64,
    amount: AmountView,
    method: &'static str,
    description: Option<&'a str>,
    reference: Option<&'a str>,
    date: DateView,
    reversed: bool,
    transaction_id: u64,
    reversal_transaction_id: Option<u64>,
    created_at: Rfc3339,
}

impl<'a> PaymentView<'a> {
    /// The view of `payment`.
    pub fn new(payment: &'a Payment) -> PaymentView<'a> {
        PaymentView {
            id: payment.id,
            customer_id: payment.customer_id.0,
            amount: AmountView(payment.amount),
            method: payment.method.name(),
            description: payment.description.as_deref(),
            reference: payment.reference.as_deref(),
            date: DateView(payment.date),
            reversed: payment.reversed(),
            transaction_id: payment.transaction_id,
            reversal_transaction_id: payment.reversal_id,
            created_at: Rfc3339(payment.created_at),
        }
    }
}

/// A frozen delivery as marked (`PUT /v1/orders/{id}/deliveries/{date}`, `delivery.updated`).
#[derive(Serialize)]
pub struct MarkedDeliveryView<'a> {
    order_id: u64,
    customer_id: u64,
    date: DateView,
    status: &'static str,
    price: AmountView,
    note: Option<&'a str>,
    transaction: Option<TransactionView<'a>>,
}

impl<'a> MarkedDeliveryView<'a> {
    /// The view of `delivery`.
    pub fn new(delivery: &'a MarkedDelivery) -> MarkedDeliveryView<'a> {
        MarkedDeliveryView {
            order_id: delivery.order_id.0,
            customer_id: delivery.customer_id.0,
            date: DateView(delivery.date),
            status: delivery.status.name(),
            price: AmountView(delivery.price),
            note: delivery.note.as_deref(),
            transaction: delivery.transaction.as_ref().map(TransactionView::new),
        }
    }
}
