//! Account use cases: a customer's account, its ledger page by page, its payments; a
//! payment recorded, reversed, a balance adjusted; the discount and spend limit set. Every posting is made by the customer's
//! actor and answered once on disk, with its idempotency record in the same write; a money
//! write without an `Idempotency-Key` never reaches here (the HTTP layer refuses it, 428).
//! A payment is found by id through its owner entry, and only in its customer's webstore.
//!
//! Must not touch: HTTP types, the rules of a posting (`domain::account`).

use std::sync::Arc;

use crate::actors::customer::{AccountChange, AccountPosted, ChangeAccount, Request};
use crate::domain::account::payment::Payment;
use crate::domain::account::settings::AccountSettings;
use crate::domain::account::transaction::Transaction;
use crate::domain::account::Account;
use crate::domain::catalogue::Webstore;
use crate::domain::idempotency::{Pending, Resource, ResourceKind};
use crate::domain::ids::CustomerId;

use super::idempotency::REPLAY_WAIT;
use super::{KeyedWrite, Service, ServiceError};

/// Most transactions a page of a ledger holds.
pub const MAX_TRANSACTIONS_PAGE: usize = 500;

/// A page of a customer's ledger, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerPage {
    /// The transactions.
    pub transactions: Vec<Transaction>,
    /// Whether later transactions follow.
    pub has_more: bool,
}

impl Service {
    /// Customer `id`'s account, as last durably written.
    pub fn account(&self, webstore: &Webstore, id: CustomerId) -> Result<Account, ServiceError> {
        let customer = self
            .registry
            .customer(webstore.idx, id)?
            .ok_or(ServiceError::NotFound)?;
        Ok(customer.account.clone())
    }

    /// Sets customer `id`'s discount and spend limit (`PATCH /v1/customers/{id}/account`),
    /// by its actor; the account as it is then.
    pub async fn set_account(
        &self,
        webstore: &Arc<Webstore>,
        id: CustomerId,
        settings: AccountSettings,
    ) -> Result<Account, ServiceError> {
        self.writes_allowed()?;
        self.account(webstore, id)?;
        Ok(self
            .calls
            .call(&self.registry, webstore.idx, id, None::<()>, |reply| {
                Request::SetAccount(settings, reply)
            })
            .await??)
    }

    /// Up to `limit` of customer `id`'s transactions numbered after `after`, oldest first:
    /// only those its account, as last durably written, counts.
    pub fn ledger(
        &self,
        webstore: &Webstore,
        id: CustomerId,
        after: u64,
        limit: usize,
    ) -> Result<LedgerPage, ServiceError> {
        let account = self.account(webstore, id)?;
        let limit = limit.clamp(1, MAX_TRANSACTIONS_PAGE);
        let mut transactions = Vec::with_capacity(limit.min(64));
        for record in
            self.registry
                .store()
                .transaction_records(id, after, account.transactions, limit + 1)?
        {
            let number = record.number;
            let transaction = record.into_transaction().ok_or_else(|| {
                ServiceError::Internal(format!(
                    "transaction {number} of customer {id} is of a kind this release does not name"
                ))
            })?;
            transactions.push(transaction);
        }
        let has_more = transactions.len() > limit;
        transactions.truncate(limit);
        Ok(LedgerPage {
            transactions,
            has_more,
        })
    }

    /// Customer `id`'s payments, in id order.
    pub async fn payments(
        &self,
        webstore: &Webstore,
        id: CustomerId,
    ) -> Result<Vec<Payment>, ServiceError> {
        self.account(webstore, id)?;
        let mut payments = Vec::new();
        for record in self.registry.store().payment_records(id)? {
            payments.push(payment_of(record)?);
        }
        self.once_durable().await?;
        Ok(payments)
    }

    /// Payment `id` of a customer of the webstore.
    pub async fn payment(&self, webstore: &Webstore, id: u64) -> Result<Payment, ServiceError> {
        let owner = self
            .registry
            .store()
            .payment_owner(id)?
            .ok_or(ServiceError::NotFound)?;
        // Another webstore's payment is as absent as none.
        self.account(webstore, owner)?;
        let record = self
            .registry
            .store()
            .payment_record(owner, id)?
            .ok_or(ServiceError::NotFound)?;
        let payment = payment_of(record)?;
        self.once_durable().await?;
        Ok(payment)
    }

    /// Waits until what was read from the store is durable: a payment, or its reversal, read
    /// while its write is on its way to disk is shown only once a crash can no longer take
    /// it back. As a replay does, it waits no longer than a read may.
    async fn once_durable(&self) -> Result<(), ServiceError> {
        match tokio::time::timeout(REPLAY_WAIT, self.registry.store().durable()).await {
            Ok(durable) => Ok(durable?),
            Err(_) => Err(ServiceError::Busy),
        }
    }

    /// Reverses payment `payment_id` (`POST /v1/payments/{id}/reversal`), once.
    pub async fn reverse_payment(
        &self,
        webstore: &Arc<Webstore>,
        payment_id: u64,
        date: crate::domain::day::Day,
        idempotency: Pending<AccountPosted>,
    ) -> Result<KeyedWrite<Arc<AccountPosted>>, ServiceError> {
        let owner = self
            .registry
            .store()
            .payment_owner(payment_id)?
            .ok_or(ServiceError::NotFound)?;
        let change = AccountChange::Reverse { payment_id, date };
        self.post_to_account(webstore, owner, change, idempotency)
            .await
    }

    /// Posts `change` to customer `id`'s account: a payment (`POST
    /// /v1/customers/{id}/payments`), an adjustment (`POST /v1/customers/{id}/adjustments`)
    /// or a reversal ([`Service::reverse_payment`]); its idempotency record names the payment,
    /// or the account for an adjustment.
    pub async fn post_to_account(
        &self,
        webstore: &Arc<Webstore>,
        id: CustomerId,
        change: AccountChange,
        idempotency: Pending<AccountPosted>,
    ) -> Result<KeyedWrite<Arc<AccountPosted>>, ServiceError> {
        let kind = match change {
            AccountChange::Adjust(_) => ResourceKind::Account,
            AccountChange::Pay(_) | AccountChange::Reverse { .. } => ResourceKind::Payment,
        };
        self.writes_allowed()?;
        // Another webstore's customer (or payment's) is as absent as none, before any key
        // is looked at.
        self.account(webstore, id)?;
        self.idempotency
            .once(
                self.registry.store(),
                webstore,
                kind,
                Some(idempotency),
                |named, recorded_at| self.posting_exists(webstore, named, recorded_at),
                |keyed| async move {
                    let (idempotency, turn) = keyed.unzip();
                    let request = Box::new(ChangeAccount {
                        change,
                        idempotency,
                    });
                    let posted = self
                        .calls
                        .call(&self.registry, webstore.idx, id, turn, |reply| {
                            Request::ChangeAccount(request, reply)
                        })
                        .await??;
                    Ok(KeyedWrite::Made(Arc::new(posted)))
                },
            )
            .await
    }

    /// Whether what a money write's idempotency record names is there: the payment (or its
    /// reversal) is recorded, or the account has changed since the record's time.
    async fn posting_exists(
        &self,
        webstore: &Webstore,
        named: Resource,
        recorded_at: i64,
    ) -> Result<bool, ServiceError> {
        Ok(match named {
            Resource::Account(id) => match self.account(webstore, id) {
                Ok(account) => account.updated_at >= recorded_at,
                Err(ServiceError::NotFound) => false,
                Err(error) => return Err(error),
            },
            other => self.resource_exists(webstore, other).await?,
        })
    }
}

/// The payment a record holds.
fn payment_of(
    record: crate::store::kinds::accounts::PaymentRecord,
) -> Result<Payment, ServiceError> {
    let id = record.id;
    record.into_payment().ok_or_else(|| {
        ServiceError::Internal(format!(
            "payment {id} has a method this release does not name"
        ))
    })
}
