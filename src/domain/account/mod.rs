//! A customer's account, as the system the contract follows kept it: a balance that is the
//! sum of its transactions and is never set directly, the customer's discount, and a spend
//! limit (`balance_threshold`, the customer's or else the webstore's): a customer whose
//! balance is at or below it is halted by balance until a transaction lifts it above.
//!
//! - [`transaction`]: the ledger's entries and how one is posted;
//! - [`payment`]: payments (and a payment's body), reversed at most once;
//! - [`adjustment`]: a correction's body;
//! - [`settings`]: the body that sets the discount and the threshold;
//! - [`delivery_mark`]: the body that marks a frozen delivery delivered or not;
//! - [`charging`]: when a frozen delivery is charged (the catalogue's `delivered_at`).
//!
//! Pure. Must not touch: storage, the clock (callers pass "now" and today), HTTP.

pub mod adjustment;
pub mod charging;
pub mod delivery_mark;
pub mod payment;
pub mod settings;
pub mod transaction;

#[cfg(test)]
mod ledger_tests;

use super::ids::CustomerId;
use super::money::{Amount, Discount};
use transaction::{Posting, Transaction};

/// A customer's account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// The customer.
    pub customer_id: CustomerId,
    /// The sum of its transactions.
    pub balance: Amount,
    /// The customer's discount on box and extras.
    pub discount: Discount,
    /// The customer's own spend limit; `None`: the webstore's.
    pub threshold: Option<Amount>,
    /// Whether the customer is halted by balance (see [`halted_by_balance`]).
    pub halted_by_balance: bool,
    /// Whether the customer is halted by hand (`halted: true` by a cart or the producer).
    pub halted_by_hand: bool,
    /// How many transactions it has had (the next one's number in the ledger).
    pub transactions: u64,
    /// Unix seconds of its last change.
    pub updated_at: i64,
}

/// A posting that would take the balance past what the ledger holds.
pub const BEYOND_THE_LEDGER: &str = "would take the balance beyond what an account holds";

/// What a transaction could not be posted for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AccountError {
    /// The balance would leave what the ledger holds (far beyond any real balance).
    #[error("the balance would overflow")]
    Overflow,
}

impl Account {
    /// The account of a customer that has had no transaction.
    pub fn opened(customer_id: CustomerId, created_at: i64) -> Account {
        Account {
            customer_id,
            balance: Amount::ZERO,
            discount: Discount::NONE,
            threshold: None,
            halted_by_balance: false,
            halted_by_hand: false,
            transactions: 0,
            updated_at: created_at,
        }
    }

    /// The spend limit in force: the customer's, else the webstore's `default`.
    pub fn threshold_in_force(&self, default: Option<Amount>) -> Option<Amount> {
        self.threshold.or(default)
    }

    /// Whether the customer is halted, for either reason.
    pub fn halted(&self) -> bool {
        self.halted_by_hand || self.halted_by_balance
    }

    /// The account after posting `posting` as transaction `id` at `now`, with the
    /// transaction; the halt by balance follows the new balance against the threshold in
    /// force (`default` the webstore's).
    pub fn post(
        &self,
        posting: Posting,
        id: u64,
        now: i64,
        default: Option<Amount>,
    ) -> Result<(Account, Transaction), AccountError> {
        let balance = self
            .balance
            .checked_add(posting.amount)
            .ok_or(AccountError::Overflow)?;
        let mut next = self.clone();
        next.balance = balance;
        next.transactions += 1;
        next.updated_at = now;
        next.halted_by_balance = halted_by_balance(balance, next.threshold_in_force(default));
        let transaction = Transaction {
            id,
            customer_id: self.customer_id,
            number: self.transactions + 1,
            amount: posting.amount,
            balance,
            kind: posting.kind,
            description: posting.description,
            date: posting.date,
            created_at: now,
            of: posting.of,
        };
        Ok((next, transaction))
    }

    /// The account with new settings: the halt by balance follows the threshold now in
    /// force.
    pub fn with_settings(
        &self,
        discount: Discount,
        threshold: Option<Amount>,
        now: i64,
        default: Option<Amount>,
    ) -> Account {
        let mut next = self.clone();
        next.discount = discount;
        next.threshold = threshold;
        next.updated_at = now;
        next.halted_by_balance = halted_by_balance(next.balance, next.threshold_in_force(default));
        next
    }
}

/// Whether a balance halts its customer: at or below the threshold in force (none: never).
pub fn halted_by_balance(balance: Amount, threshold: Option<Amount>) -> bool {
    threshold.is_some_and(|threshold| balance <= threshold)
}
