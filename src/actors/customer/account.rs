//! A customer's account as its actor changes it: a payment recorded, a payment reversed
//! (once), a balance adjusted. Each posting is one write (the transaction, the payment it
//! records or reverses, the account after it, its event and idempotency record), answered
//! and published with the customer once it is durable.
//!
//! Must not touch: HTTP status codes, the registry's maps, the rules of a posting (the
//! domain's `account`).

use std::sync::Arc;

use super::{ChangeError, CustomerState, Handoff};
use crate::clock::unix_now;
use crate::domain::account::adjustment::NewAdjustment;
use crate::domain::account::payment::{NewPayment, Payment, ALREADY_REVERSED};
use crate::domain::account::settings::AccountSettings;
use crate::domain::account::transaction::{Posting, Transaction, TransactionKind, TransactionOf};
use crate::domain::account::{Account, BEYOND_THE_LEDGER};
use crate::domain::day::Day;
use crate::domain::fields::{FieldErrors, INVALID};
use crate::domain::idempotency::Pending;
use crate::events::NewEvent;
use crate::store::kinds::accounts::AccountWrite;
use crate::store::IdempotencyWrite;

/// What a change of the customer's account posts.
pub enum AccountChange {
    /// A payment received: a `payment` transaction of its amount.
    Pay(NewPayment),
    /// A correction of the balance: an `adjustment` of its signed amount.
    Adjust(NewAdjustment),
    /// A payment reversed (once): a `payment_reversal` of minus its amount.
    Reverse {
        /// The payment.
        payment_id: u64,
        /// The reversal's date (the webstore's today).
        date: Day,
    },
}

/// A change of the customer's account, with its idempotency key if it came with one.
pub struct ChangeAccount {
    /// What to post.
    pub change: AccountChange,
    /// The key and the response to record with the change.
    pub idempotency: Option<Pending<AccountPosted>>,
}

/// An account after a posting: the account, the transaction posted, and the payment it
/// recorded or reversed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountPosted {
    /// The account after it.
    pub account: Account,
    /// The transaction.
    pub transaction: Transaction,
    /// The payment recorded or reversed, for a payment or a reversal.
    pub payment: Option<Payment>,
}

impl CustomerState {
    /// Posts an account change: the transaction (and the payment it records or reverses)
    /// and the account after it, in one write with the idempotency record; answered, and the
    /// customer published with its new account, once the write is durable. A write given up
    /// leaves the account as it was.
    pub(super) async fn change_account(
        &mut self,
        request: ChangeAccount,
        handoff: &Handoff,
    ) -> Result<AccountPosted, ChangeError> {
        let now = unix_now();
        let account = &self.customer.account;
        let customer_id = self.customer.id;
        let (posting, payment) = match request.change {
            AccountChange::Pay(new) => {
                let payment_id = self.order_ids.take()?;
                let posting = Posting {
                    amount: new.amount,
                    kind: TransactionKind::Payment,
                    description: new
                        .description
                        .clone()
                        .unwrap_or_else(|| format!("Payment by {}", new.method.name())),
                    date: new.date,
                    of: TransactionOf::Payment { payment_id },
                };
                let payment = Payment {
                    id: payment_id,
                    customer_id,
                    amount: new.amount,
                    method: new.method,
                    description: new.description,
                    reference: new.reference,
                    date: new.date,
                    transaction_id: 0,
                    reversal_id: None,
                    created_at: now,
                };
                (posting, Some(payment))
            }
            AccountChange::Adjust(new) => (
                Posting {
                    amount: new.amount,
                    kind: TransactionKind::Adjustment,
                    description: new.description,
                    date: new.date,
                    of: TransactionOf::Nothing,
                },
                None,
            ),
            AccountChange::Reverse { payment_id, date } => {
                let payment = self
                    .store
                    .payment_record(customer_id, payment_id)?
                    .and_then(|record| record.into_payment())
                    .ok_or(ChangeError::NoSuchPayment)?;
                if payment.reversed() {
                    return Err(ChangeError::Invalid(FieldErrors::single(
                        "payment",
                        ALREADY_REVERSED,
                    )));
                }
                let amount = payment
                    .amount
                    .checked_neg()
                    .ok_or(ChangeError::Invalid(FieldErrors::single("amount", INVALID)))?;
                let posting = Posting {
                    amount,
                    kind: TransactionKind::PaymentReversal,
                    description: format!("Payment {payment_id} reversed"),
                    date,
                    of: TransactionOf::Payment { payment_id },
                };
                (posting, Some(payment))
            }
        };
        let transaction_id = self.order_ids.take()?;
        let (next, transaction) = account
            .post(
                posting,
                transaction_id,
                now,
                self.webstore.balance_threshold,
            )
            .map_err(|_| ChangeError::Invalid(FieldErrors::single("amount", BEYOND_THE_LEDGER)))?;
        let payment = payment.map(|mut payment| {
            match transaction.kind {
                TransactionKind::PaymentReversal => payment.reversal_id = Some(transaction.id),
                _ => payment.transaction_id = transaction.id,
            }
            payment
        });
        let posted = AccountPosted {
            account: next,
            transaction,
            payment,
        };
        let idempotency = request.idempotency.map(|pending| {
            IdempotencyWrite::rendered(&self.webstore.settings.id, pending, &posted, now)
        });
        let event = match &posted.payment {
            Some(payment) => self.events.payment_event(&self.webstore, payment)?,
            None => self
                .events
                .transaction_created(&self.webstore, &posted.transaction)?,
        };
        let write = AccountWrite {
            account: &posted.account,
            transactions: std::slice::from_ref(&posted.transaction),
            payment: posted.payment.as_ref(),
            delivery: None,
            customer: None,
        };
        self.write_posting(write, Some(event), idempotency, handoff)
            .await?;
        Ok(posted)
    }

    /// Sets the account's discount and spend limit (absent fields keep theirs): the account
    /// in one write with the customer's `customer.updated` event (its answers show the
    /// discount), the halt by balance following the threshold now in force. Settings that
    /// change nothing write nothing.
    pub(super) async fn set_account(
        &mut self,
        settings: AccountSettings,
        handoff: &Handoff,
    ) -> Result<Account, ChangeError> {
        let account = &self.customer.account;
        let next = account.with_settings(
            settings.discount.unwrap_or(account.discount),
            settings.threshold.unwrap_or(account.threshold),
            unix_now(),
            self.webstore.balance_threshold,
        );
        let unchanged = next.discount == account.discount
            && next.threshold == account.threshold
            && next.halted_by_balance == account.halted_by_balance;
        if unchanged {
            return Ok(account.clone());
        }
        let write = AccountWrite {
            account: &next,
            transactions: &[],
            payment: None,
            delivery: None,
            customer: None,
        };
        self.write_posting(write, None, None, handoff).await?;
        Ok(next)
    }

    /// Writes a change of the account (`write`, told by `event`; `None`: by the customer's
    /// own `customer.updated`), and publishes the customer with the account it leaves once
    /// durable. When the change moves `halted?` (the balance crossed the spend limit,
    /// either way), the customer's halts follow from the first open date as a halt by
    /// hand's do, and the customer and its `customer.updated` event go in the same entry: a
    /// balance never halts without the halts saying so.
    pub(super) async fn write_posting(
        &mut self,
        write: AccountWrite<'_>,
        event: Option<NewEvent>,
        idempotency: Option<IdempotencyWrite>,
        handoff: &Handoff,
    ) -> Result<(), ChangeError> {
        let mut next = (*self.customer).clone();
        next.account = write.account.clone();
        let halt_moved = next.account.halted() != self.customer.account.halted();
        if halt_moved {
            next.halts = next.halts.set(next.account.halted(), self.open_day());
            // The halts only frozen dates needed go, as a halt by hand's.
            if let Some((since, before)) = self.indexes.frozen.foldable(self.webstore.idx) {
                next.halts = next.halts.folded(since, before);
            }
        }
        let next = Arc::new(next);
        let webstore_id = &self.webstore.settings.id;
        // The events' numbers stay unsettled until the posting is durable (or given up).
        let written = match (event, halt_moved) {
            (Some(event), false) => event.written(|event, on_durable| {
                self.store
                    .write_account(webstore_id, write, idempotency, Some(event), on_durable)
            })?,
            // The customer's own change: its one event tells the halt too.
            (None, _) => {
                let event = self.events.customer_updated(&self.webstore, &next)?;
                let write = AccountWrite {
                    customer: halt_moved.then_some((&*next, None)),
                    ..write
                };
                event.written(|event, on_durable| {
                    self.store.write_account(
                        webstore_id,
                        write,
                        idempotency,
                        Some(event),
                        on_durable,
                    )
                })?
            }
            (Some(event), true) => {
                let halted = self.events.customer_updated(&self.webstore, &next)?;
                event.written_before(halted, |event, halted, on_durable| {
                    let write = AccountWrite {
                        customer: Some((&next, Some(halted))),
                        ..write
                    };
                    self.store.write_account(
                        webstore_id,
                        write,
                        idempotency,
                        Some(event),
                        on_durable,
                    )
                })?
            }
        };
        handoff.began_writing();
        written.durable().await?;
        self.customer = next.clone();
        *self
            .published
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = next;
        if halt_moved {
            // The delivery lists leave out the orders of a halted customer.
            self.indexes.customer_moved(self.webstore.idx);
        }
        Ok(())
    }
}
