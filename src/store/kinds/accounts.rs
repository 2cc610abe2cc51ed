//! Accounts: each customer's account, the `a` record (`AccountRecord`) under the customer's
//! id; its ledger, one `t` record (`TransactionRecord`) per transaction under the customer's
//! id and the transaction's number in the ledger (from 1, so a customer's ledger reads in
//! order with one range scan); its payments, one `p` record (`PaymentRecord`) under the
//! customer's id and the payment's id, and its owner, a `q` entry (the customer's id) under
//! the payment's id. Their part of `impl Store`: an account's write (its
//! new state, the transactions it posted and the payment it recorded or reversed, in one log
//! entry, the account last), the reads, and the batch builders imports use.
//!
//! The account is the commit point: it counts its transactions, and a reader takes the
//! ledger only up to that count, so a ledger read while a write is being applied never
//! shows a transaction the balance does not hold. Every record is small and of a fixed
//! shape (a description and a reference are bounded by the domain's body rules): the
//! ledger grows by records, never by one record growing, so no account can become too large
//! to read back.
//!
//! Stored and exported: amounts are signed minor units, dates day numbers, kinds and methods
//! codes, stored; decimal strings, `YYYY-MM-DD` and names, exported
//! (`transfer::format::accounts`). A customer's account travels with the customer (its
//! export lines follow the customer's, a move ships them with the customer's record).
//!
//! Must not touch: the rules that decide a posting (`domain::account`), the log itself (its
//! writes go into the change's `LogEntry`, which the store's entries hand to the log), HTTP.

use serde::{Deserialize, Serialize};

use super::books::{add_books_entry, books_key, books_value, BooksEntry};
use super::customers::{customer_key, CustomerRecord};
use super::deliveries::{frozen_delivery_key, DeliveryRecord};
use super::idempotency::IdempotencyWrite;
use crate::domain::account::payment::{Payment, PaymentMethod};
use crate::domain::account::transaction::{Transaction, TransactionKind, TransactionOf};
use crate::domain::account::Account;
use crate::domain::customer::Customer;
use crate::domain::day::Day;
use crate::domain::ids::{CustomerId, OrderId};
use crate::domain::money::{Amount, Discount};
use crate::store::codec::{decode, decode_payload, encode, CodecError, Kind, Record};
use crate::store::entries::{EventWrite, RecordWrite};
use crate::store::error::{corrupt, readable};
use crate::store::keys::{trailing_id, with_id};
use crate::store::kinds::change::ChangeWrites;
use crate::store::log::wal::LogEntry;
use crate::store::{OnDurable, OpenForWrite, Store, StoreError, WriteBatch, Written};

/// A customer's account.
pub const ACCOUNT: u8 = b'a';

/// One transaction of a customer's ledger.
pub const TRANSACTION: u8 = b't';

/// One payment of a customer.
pub const PAYMENT: u8 = b'p';

/// A payment's customer, by the payment's id (`GET /v1/payments/{id}` and its reversal find
/// the payment's owner through it).
pub const PAYMENT_OWNER: u8 = b'q';

/// `q` + payment id.
pub fn payment_owner_key(payment: u64) -> Vec<u8> {
    with_id(PAYMENT_OWNER, payment)
}

/// `a` + customer id.
pub fn account_key(customer: u64) -> Vec<u8> {
    with_id(ACCOUNT, customer)
}

/// `t` + customer id: where a customer's ledger is.
pub fn ledger_prefix(customer: u64) -> Vec<u8> {
    with_id(TRANSACTION, customer)
}

/// `t` + customer id + the transaction's number in the ledger.
pub fn transaction_key(customer: u64, number: u64) -> Vec<u8> {
    let mut key = ledger_prefix(customer);
    key.extend_from_slice(&number.to_be_bytes());
    key
}

/// `p` + customer id: where a customer's payments are.
pub fn payments_prefix(customer: u64) -> Vec<u8> {
    with_id(PAYMENT, customer)
}

/// `p` + customer id + payment id.
pub fn payment_key(customer: u64, payment: u64) -> Vec<u8> {
    let mut key = payments_prefix(customer);
    key.extend_from_slice(&payment.to_be_bytes());
    key
}

/// A customer's account as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountRecord {
    /// The customer.
    pub customer_id: u64,
    /// The customer's webstore (what a move or an export of it carries).
    pub webstore_id: String,
    /// The balance in minor units: the sum of the transactions.
    pub balance: i64,
    /// The discount in ten-thousandths.
    pub discount: u16,
    /// The customer's own spend limit in minor units; `None`: the webstore's.
    pub threshold: Option<i64>,
    /// Whether the customer is halted by balance.
    pub halted_by_balance: bool,
    /// How many transactions the ledger holds.
    pub transactions: u64,
    /// Unix seconds of its last change.
    pub updated_at: i64,
    /// Whether the customer is halted by hand (version 2 on; `None` in a version 1 record,
    /// written before a balance could halt: then every halt on is by hand).
    pub halted_by_hand: Option<bool>,
}

impl Record for AccountRecord {
    const KIND: Kind = Kind::Account;
    const VERSION: u16 = 2;
    fn decode_older(version: u16, payload: &[u8]) -> Result<Self, CodecError> {
        match version {
            1 => decode_payload::<AccountRecordV1>(payload).map(AccountRecordV1::upgrade),
            other => Err(CodecError::UnsupportedVersion(other)),
        }
    }
}

/// An account as version 1 wrote it: without the halt by hand.
#[derive(Deserialize)]
struct AccountRecordV1 {
    customer_id: u64,
    webstore_id: String,
    balance: i64,
    discount: u16,
    threshold: Option<i64>,
    halted_by_balance: bool,
    transactions: u64,
    updated_at: i64,
}

impl AccountRecordV1 {
    fn upgrade(self) -> AccountRecord {
        AccountRecord {
            customer_id: self.customer_id,
            webstore_id: self.webstore_id,
            balance: self.balance,
            discount: self.discount,
            threshold: self.threshold,
            halted_by_balance: self.halted_by_balance,
            transactions: self.transactions,
            updated_at: self.updated_at,
            halted_by_hand: None,
        }
    }
}

impl AccountRecord {
    /// The record of `account`, of webstore `webstore_id`.
    pub fn from_account(account: &Account, webstore_id: &str) -> AccountRecord {
        AccountRecord {
            customer_id: account.customer_id.0,
            webstore_id: webstore_id.to_owned(),
            balance: account.balance.0,
            discount: account.discount.ten_thousandths(),
            threshold: account.threshold.map(|threshold| threshold.0),
            halted_by_balance: account.halted_by_balance,
            transactions: account.transactions,
            updated_at: account.updated_at,
            halted_by_hand: Some(account.halted_by_hand),
        }
    }

    /// The account it holds; `halted_on` is whether the customer's halts are on, what a
    /// version 1 record's halt by hand is. `None` for a discount beyond the whole, which no
    /// writer stores.
    pub fn into_account(self, halted_on: bool) -> Option<Account> {
        Some(Account {
            customer_id: CustomerId(self.customer_id),
            balance: Amount(self.balance),
            discount: Discount::of(self.discount)?,
            threshold: self.threshold.map(Amount),
            halted_by_balance: self.halted_by_balance,
            halted_by_hand: self.halted_by_hand.unwrap_or(halted_on),
            transactions: self.transactions,
            updated_at: self.updated_at,
        })
    }
}

/// One transaction as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransactionRecord {
    /// Unique across the service.
    pub id: u64,
    /// The customer.
    pub customer_id: u64,
    /// Its number in the ledger, from 1.
    pub number: u64,
    /// Signed minor units.
    pub amount: i64,
    /// The balance after it, in minor units.
    pub balance: i64,
    /// [`TransactionKind`]'s code.
    pub kind: u8,
    /// What the producer or the customer reads of it.
    pub description: String,
    /// The delivery's or the payment's date, a day number.
    pub date: i32,
    /// Unix seconds of its posting.
    pub created_at: i64,
    /// The order whose delivery it is of (a charge, a charge's reversal).
    pub order_id: Option<u64>,
    /// The payment it is of (a payment, its reversal).
    pub payment_id: Option<u64>,
}

impl Record for TransactionRecord {
    const KIND: Kind = Kind::Transaction;
}

impl TransactionRecord {
    /// The record of `transaction`.
    pub fn from_transaction(transaction: &Transaction) -> TransactionRecord {
        let (order_id, payment_id) = match transaction.of {
            TransactionOf::Delivery { order_id } => (Some(order_id.0), None),
            TransactionOf::Payment { payment_id } => (None, Some(payment_id)),
            TransactionOf::Nothing => (None, None),
        };
        TransactionRecord {
            id: transaction.id,
            customer_id: transaction.customer_id.0,
            number: transaction.number,
            amount: transaction.amount.0,
            balance: transaction.balance.0,
            kind: transaction.kind.code(),
            description: transaction.description.clone(),
            date: transaction.date.0,
            created_at: transaction.created_at,
            order_id,
            payment_id,
        }
    }

    /// The transaction it holds; `None` for a kind this release does not know.
    pub fn into_transaction(self) -> Option<Transaction> {
        let of = match (self.order_id, self.payment_id) {
            (Some(order_id), None) => TransactionOf::Delivery {
                order_id: OrderId(order_id),
            },
            (None, Some(payment_id)) => TransactionOf::Payment { payment_id },
            (None, None) => TransactionOf::Nothing,
            (Some(_), Some(_)) => return None,
        };
        Some(Transaction {
            id: self.id,
            customer_id: CustomerId(self.customer_id),
            number: self.number,
            amount: Amount(self.amount),
            balance: Amount(self.balance),
            kind: TransactionKind::of_code(self.kind)?,
            description: self.description,
            date: Day(self.date),
            created_at: self.created_at,
            of,
        })
    }
}

/// One payment as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaymentRecord {
    /// Unique across the service.
    pub id: u64,
    /// The customer.
    pub customer_id: u64,
    /// Minor units, above zero.
    pub amount: i64,
    /// [`PaymentMethod`]'s code.
    pub method: u8,
    /// What the producer wrote of it.
    pub description: Option<String>,
    /// A reference.
    pub reference: Option<String>,
    /// The date it was paid, a day number.
    pub date: i32,
    /// Its transaction's id.
    pub transaction_id: u64,
    /// Its reversal's transaction id, once reversed.
    pub reversal_id: Option<u64>,
    /// Unix seconds of its recording.
    pub created_at: i64,
}

impl Record for PaymentRecord {
    const KIND: Kind = Kind::Payment;
}

impl PaymentRecord {
    /// The record of `payment`.
    pub fn from_payment(payment: &Payment) -> PaymentRecord {
        PaymentRecord {
            id: payment.id,
            customer_id: payment.customer_id.0,
            amount: payment.amount.0,
            method: payment.method.code(),
            description: payment.description.clone(),
            reference: payment.reference.clone(),
            date: payment.date.0,
            transaction_id: payment.transaction_id,
            reversal_id: payment.reversal_id,
            created_at: payment.created_at,
        }
    }

    /// The payment it holds; `None` for a method this release does not know.
    pub fn into_payment(self) -> Option<Payment> {
        Some(Payment {
            id: self.id,
            customer_id: CustomerId(self.customer_id),
            amount: Amount(self.amount),
            method: PaymentMethod::of_code(self.method)?,
            description: self.description,
            reference: self.reference,
            date: Day(self.date),
            transaction_id: self.transaction_id,
            reversal_id: self.reversal_id,
            created_at: self.created_at,
        })
    }
}

/// What one write of an account holds: the account as it becomes, the transactions it
/// posted (numbered on from the account's previous count), the payment it recorded or
/// marked reversed.
pub struct AccountWrite<'a> {
    /// The account after the write.
    pub account: &'a Account,
    /// The transactions posted, in order.
    pub transactions: &'a [Transaction],
    /// The payment recorded or reversed.
    pub payment: Option<&'a Payment>,
    /// The frozen delivery marked (charged, or its charge reversed), with its date and
    /// order: written with its charge, so that a delivery is charged once whatever stops.
    pub delivery: Option<(Day, OrderId, &'a DeliveryRecord)>,
    /// The customer, when the write moves its halt (the balance crossed the spend limit),
    /// with its `customer.updated` event when that is not the write's own: in the same
    /// entry, so that a balance never halts without its halts saying so.
    pub customer: Option<(&'a Customer, Option<EventWrite>)>,
}

impl Store {
    /// Writes an account's change (a posting, a payment and its transaction, a reversal, new
    /// settings) of webstore `webstore_id` as a keyed write (`Store::write_change`): the
    /// idempotency record and the event first, then the transactions and the payment, the
    /// account last, in one log entry. `on_durable` runs once it is durable.
    pub fn write_account(
        &self,
        webstore_id: &str,
        write: AccountWrite<'_>,
        idempotency: Option<IdempotencyWrite>,
        event: Option<EventWrite>,
        on_durable: OnDurable,
    ) -> Result<Written, StoreError> {
        let customer = write.account.customer_id.0;
        let mut puts: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(write.transactions.len() + 2);
        for transaction in write.transactions {
            let record = TransactionRecord::from_transaction(transaction);
            puts.push((
                transaction_key(customer, transaction.number),
                readable("transaction", &record)?,
            ));
            puts.push((
                books_key(webstore_id, transaction.date, transaction.id),
                books_value(transaction.customer_id, transaction.number),
            ));
        }
        if let Some(payment) = write.payment {
            let record = PaymentRecord::from_payment(payment);
            puts.push((
                payment_key(customer, payment.id),
                readable("payment", &record)?,
            ));
            // Its owner never changes: written with the payment, not again at its reversal.
            if !payment.reversed() {
                puts.push((
                    payment_owner_key(payment.id),
                    customer.to_be_bytes().to_vec(),
                ));
            }
        }
        let marked = write.delivery.map(|(day, order, _)| (day, order));
        if let Some((day, order, record)) = write.delivery {
            puts.push((
                frozen_delivery_key(webstore_id, day, order),
                readable("delivery", record)?,
            ));
        }
        if let Some((halted, _)) = &write.customer {
            let record = CustomerRecord::from_customer(halted, webstore_id);
            puts.push((customer_key(customer), readable("customer", &record)?));
        }
        let record = AccountRecord::from_account(write.account, webstore_id);
        puts.push((account_key(customer), readable("account", &record)?));
        let customer_event = write.customer.and_then(|(_, event)| event);
        let bytes = puts
            .iter()
            .map(|(key, value)| LogEntry::encoded_len(key, value))
            .sum::<usize>()
            + customer_event.as_ref().map_or(0, EventWrite::encoded_len);
        self.write_change(
            webstore_id,
            idempotency,
            event,
            on_durable,
            ChangeWrites {
                customer,
                bytes,
                write: move |store: &Store, open: &OpenForWrite<'_>, entry: &mut LogEntry| {
                    // The customer's event after the change's own: numbered after it.
                    let sequence = store.put_event(open, entry, customer_event)?;
                    for (key, value) in puts {
                        store.put(entry, &key, value)?;
                    }
                    if let Some((day, order)) = marked {
                        store.inner.tracking.note_delivery(webstore_id, day, order);
                    }
                    if sequence.is_some() {
                        store
                            .inner
                            .tracking
                            .note(webstore_id, Some(customer), None, sequence);
                    }
                    Ok(())
                },
            },
        )
    }

    /// The account's record, to write with a change of another kind (a customer's halt by
    /// hand, which the account remembers: see `Account::halted_by_hand`).
    pub fn account_write(
        &self,
        account: &Account,
        webstore_id: &str,
    ) -> Result<RecordWrite, StoreError> {
        let record = AccountRecord::from_account(account, webstore_id);
        Ok(RecordWrite::new(
            account_key(account.customer_id.0),
            readable("account", &record)?,
        ))
    }

    /// Customer `customer`'s account record, if it has had one written (a customer without
    /// one has the account [`Account::opened`] gives).
    pub fn account_record(
        &self,
        customer: CustomerId,
    ) -> Result<Option<AccountRecord>, StoreError> {
        let key = account_key(customer.0);
        self.inner
            .storage
            .get(&key)?
            .map(|bytes| decode(&bytes).map_err(|source| corrupt(&key, source)))
            .transpose()
    }

    /// Customer `customer`'s account: as its record holds it, or the account of a customer
    /// that has had no transaction (`created_at` 0) when it has none; a record this release
    /// cannot read is an error naming its key. `halted_on`: whether the customer's halts
    /// are on (without a record, or with one written before a balance could halt, a halt
    /// on is by hand).
    pub fn account(&self, customer: CustomerId, halted_on: bool) -> Result<Account, StoreError> {
        match self.account_record(customer)? {
            None => Ok(Account {
                halted_by_hand: halted_on,
                ..Account::opened(customer, 0)
            }),
            Some(record) => record.into_account(halted_on).ok_or_else(|| {
                corrupt(
                    &account_key(customer.0),
                    crate::store::codec::CodecError::Payload("a discount above the whole".into()),
                )
            }),
        }
    }

    /// Up to `limit` of customer `customer`'s transactions numbered after `after`, oldest
    /// first, and no further than `through` (the account's count: see the module's note).
    pub fn transaction_records(
        &self,
        customer: CustomerId,
        after: u64,
        through: u64,
        limit: usize,
    ) -> Result<Vec<TransactionRecord>, StoreError> {
        let mut found = Vec::new();
        if after >= through || limit == 0 {
            return Ok(found);
        }
        let from = transaction_key(customer.0, after.saturating_add(1));
        let to = transaction_key(customer.0, through.saturating_add(1));
        let mut failure = None;
        self.inner
            .storage
            .for_each_between(&from, Some(&to), &mut |key, value| {
                match decode::<TransactionRecord>(value) {
                    Ok(record) => found.push(record),
                    Err(source) => failure = Some(corrupt(key, source)),
                }
                failure.is_none() && found.len() < limit
            })?;
        failure.map_or(Ok(found), Err)
    }

    /// Customer `customer`'s payment `payment`, if recorded.
    pub fn payment_record(
        &self,
        customer: CustomerId,
        payment: u64,
    ) -> Result<Option<PaymentRecord>, StoreError> {
        let key = payment_key(customer.0, payment);
        self.inner
            .storage
            .get(&key)?
            .map(|bytes| decode(&bytes).map_err(|source| corrupt(&key, source)))
            .transpose()
    }

    /// The customer whose payment `payment` is, if it is recorded.
    pub fn payment_owner(&self, payment: u64) -> Result<Option<CustomerId>, StoreError> {
        Ok(self
            .inner
            .storage
            .get(&payment_owner_key(payment))?
            .and_then(|bytes| trailing_id(&bytes))
            .map(CustomerId))
    }

    /// Every payment of customer `customer`, in id order.
    pub fn payment_records(&self, customer: CustomerId) -> Result<Vec<PaymentRecord>, StoreError> {
        let mut found = Vec::new();
        let mut failure = None;
        self.inner
            .storage
            .for_each(&payments_prefix(customer.0), &mut |key, value| {
                match decode::<PaymentRecord>(value) {
                    Ok(record) => found.push(record),
                    Err(source) => failure = Some(corrupt(key, source)),
                }
                failure.is_none()
            })?;
        failure.map_or(Ok(found), Err)
    }

    /// Every key of customer `customer`'s account, ledger and payments: what a purge of its
    /// webstore removes.
    pub(in crate::store) fn account_keys(&self, customer: u64) -> Result<Vec<Vec<u8>>, StoreError> {
        let mut keys = vec![account_key(customer)];
        self.inner
            .storage
            .for_each(&ledger_prefix(customer), &mut |key, _| {
                keys.push(key.to_vec());
                true
            })?;
        self.inner
            .storage
            .for_each(&payments_prefix(customer), &mut |key, _| {
                keys.push(key.to_vec());
                if let Some(payment) = trailing_id(key) {
                    keys.push(payment_owner_key(payment));
                }
                true
            })?;
        Ok(keys)
    }
}

/// Adds an imported account to `batch`.
pub fn add_account_record(batch: &mut WriteBatch, record: &AccountRecord) {
    batch.put(account_key(record.customer_id), encode(record));
}

/// Adds an imported transaction of webstore `webstore`, and its entry in the books, to
/// `batch`.
pub fn add_transaction_record(batch: &mut WriteBatch, webstore: &str, record: &TransactionRecord) {
    batch.put(
        transaction_key(record.customer_id, record.number),
        encode(record),
    );
    add_books_entry(
        batch,
        webstore,
        BooksEntry {
            date: Day(record.date),
            transaction_id: record.id,
            customer: CustomerId(record.customer_id),
            number: record.number,
        },
    );
}

/// Adds an imported payment, and its owner entry, to `batch`.
pub fn add_payment_record(batch: &mut WriteBatch, record: &PaymentRecord) {
    batch.put(payment_key(record.customer_id, record.id), encode(record));
    batch.put(
        payment_owner_key(record.id),
        record.customer_id.to_be_bytes().to_vec(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::account::transaction::Posting;

    /// Version 1's shape, written as version 1 wrote it.
    #[derive(Serialize, Deserialize)]
    struct WrittenByVersion1 {
        customer_id: u64,
        webstore_id: String,
        balance: i64,
        discount: u16,
        threshold: Option<i64>,
        halted_by_balance: bool,
        transactions: u64,
        updated_at: i64,
    }

    impl Record for WrittenByVersion1 {
        const KIND: Kind = Kind::Account;
    }

    #[test]
    fn a_version_1_account_reads_with_its_halts_on_as_by_hand() {
        // Arrange
        let bytes = encode(&WrittenByVersion1 {
            customer_id: 7,
            webstore_id: "shop".into(),
            balance: -1_250,
            discount: 500,
            threshold: Some(-1_000),
            halted_by_balance: true,
            transactions: 3,
            updated_at: 1_799_056_800,
        });

        // Act
        let record: AccountRecord = decode(&bytes).unwrap();

        // Assert
        assert_eq!(record.halted_by_hand, None);
        let halted = record.clone().into_account(true).unwrap();
        assert!(halted.halted_by_hand && halted.halted_by_balance);
        assert_eq!(halted.balance, Amount(-1_250));
        assert!(!record.into_account(false).unwrap().halted_by_hand);
        let written = AccountRecord::from_account(&halted, "shop");
        assert_eq!(
            written.halted_by_hand,
            Some(true),
            "version 2 says so itself"
        );
        assert_eq!(decode::<AccountRecord>(&encode(&written)).unwrap(), written);
    }

    fn posting(amount: i64, kind: TransactionKind, of: TransactionOf) -> Posting {
        Posting {
            amount: Amount(amount),
            kind,
            description: "d".into(),
            date: Day(20_400),
            of,
        }
    }

    /// An account's writes read back as written: the ledger in order and only up to the
    /// account's count, a payment as last written (its reversal), and a purge of the
    /// webstore leaves none of them.
    #[test]
    fn an_account_its_ledger_and_payments_read_back_and_go_with_their_webstore() {
        // Arrange
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_for_test(dir.path());
        let mut batch = WriteBatch::default();
        crate::store::add_customer_record(
            &mut batch,
            &crate::store::kinds::customers::CustomerRecord {
                id: 7,
                webstore_id: "shop".into(),
                number: 1,
                first_name: "Ann".into(),
                last_name: None,
                email: "ann@example.com".into(),
                delivery_service_id: 91,
                address: vec![None; crate::domain::customer::ADDRESS_FIELDS.len()],
                password_hash: None,
                halts: Vec::new(),
            },
        );
        store.apply(batch).unwrap();
        let opened = Account::opened(CustomerId(7), 1_000);
        let (paid, payment_tx) = opened
            .post(
                posting(
                    2_500,
                    TransactionKind::Payment,
                    TransactionOf::Payment { payment_id: 11 },
                ),
                101,
                1_001,
                None,
            )
            .unwrap();
        let mut payment = Payment {
            id: 11,
            customer_id: CustomerId(7),
            amount: Amount(2_500),
            method: PaymentMethod::Cash,
            description: None,
            reference: Some("r-1".into()),
            date: Day(20_400),
            transaction_id: 101,
            reversal_id: None,
            created_at: 1_001,
        };
        let (charged, charge) = paid
            .post(
                posting(
                    -1_250,
                    TransactionKind::Charge,
                    TransactionOf::Delivery {
                        order_id: OrderId(9),
                    },
                ),
                102,
                1_002,
                None,
            )
            .unwrap();
        let (reversed, reversal) = charged
            .post(
                posting(
                    -2_500,
                    TransactionKind::PaymentReversal,
                    TransactionOf::Payment { payment_id: 11 },
                ),
                103,
                1_003,
                None,
            )
            .unwrap();

        // Act
        let write = |account: &Account, transactions: &[Transaction], payment: Option<&Payment>| {
            drop(
                store
                    .write_account(
                        "shop",
                        AccountWrite {
                            account,
                            transactions,
                            payment,
                            delivery: None,
                            customer: None,
                        },
                        None,
                        None,
                        Box::new(|| ()),
                    )
                    .unwrap(),
            );
        };
        write(&paid, std::slice::from_ref(&payment_tx), Some(&payment));
        write(&charged, std::slice::from_ref(&charge), None);
        payment.reversal_id = Some(103);
        write(&reversed, std::slice::from_ref(&reversal), Some(&payment));

        // Assert
        let account = store.account_record(CustomerId(7)).unwrap().unwrap();
        assert_eq!(account.into_account(false), Some(reversed.clone()));
        assert_eq!(reversed.balance, Amount(-1_250));
        let ledger: Vec<Transaction> = store
            .transaction_records(CustomerId(7), 0, reversed.transactions, 10)
            .unwrap()
            .into_iter()
            .map(|record| record.into_transaction().unwrap())
            .collect();
        assert_eq!(ledger, vec![payment_tx, charge.clone(), reversal]);
        assert_eq!(
            ledger.iter().map(|t| t.amount.0).sum::<i64>(),
            reversed.balance.0,
            "the balance is the sum of the ledger"
        );
        let page = store.transaction_records(CustomerId(7), 1, 2, 10).unwrap();
        assert_eq!(page.len(), 1, "only up to the count given");
        assert_eq!(page[0].clone().into_transaction(), Some(charge));
        let stored = store.payment_record(CustomerId(7), 11).unwrap().unwrap();
        assert_eq!(stored.into_payment(), Some(payment));
        assert_eq!(store.payment_records(CustomerId(7)).unwrap().len(), 1);

        store.purge_webstore("shop").unwrap();
        assert_eq!(store.account_record(CustomerId(7)).unwrap(), None);
        assert!(store
            .transaction_records(CustomerId(7), 0, 3, 10)
            .unwrap()
            .is_empty());
        assert!(store.payment_records(CustomerId(7)).unwrap().is_empty());
    }
}
