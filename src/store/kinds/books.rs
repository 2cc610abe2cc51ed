//! The books: each webstore's transactions by date, one `b` entry per transaction under the
//! webstore, the transaction's date and its id, holding its customer's id and its number in
//! that customer's ledger, so that `GET /v1/transactions?from=&to=` reads a webstore's
//! dates with one range scan, never its customers' ledgers one by one. An entry is written
//! in the same log entry as its transaction (`Store::write_account`), by imports with
//! theirs (`accounts::add_transaction_record`), and removed with its webstore.
//!
//! Must not touch: the transactions themselves (`kinds::accounts`, which reads them by
//! customer and number), the durability of what is listed (the service lists only what its
//! customer's account counts), HTTP.

use super::deliveries::{day_bytes, day_of};
use crate::domain::day::Day;
use crate::domain::ids::CustomerId;
use crate::store::error::corrupt;
use crate::store::keys::webstore_prefix;
use crate::store::{Store, StoreError, WriteBatch};

/// A webstore's transactions by date.
pub const BOOKS: u8 = b'b';

/// `b` + webstore id + 0 + day: where a date's entries start.
fn books_day_key(webstore: &str, day: Day) -> Vec<u8> {
    let mut key = webstore_prefix(BOOKS, webstore);
    key.extend_from_slice(&day_bytes(day));
    key
}

/// `b` + webstore id + 0 + day + transaction id: one transaction's entry.
pub fn books_key(webstore: &str, day: Day, transaction: u64) -> Vec<u8> {
    let mut key = books_day_key(webstore, day);
    key.extend_from_slice(&transaction.to_be_bytes());
    key
}

/// An entry's value: the customer's id and the transaction's number, big-endian.
pub fn books_value(customer: CustomerId, number: u64) -> Vec<u8> {
    let mut value = Vec::with_capacity(16);
    value.extend_from_slice(&customer.0.to_be_bytes());
    value.extend_from_slice(&number.to_be_bytes());
    value
}

/// One transaction of a webstore's books.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BooksEntry {
    /// The transaction's date.
    pub date: Day,
    /// The transaction's id.
    pub transaction_id: u64,
    /// Its customer.
    pub customer: CustomerId,
    /// Its number in the customer's ledger.
    pub number: u64,
}

fn entry_of(prefix_len: usize, key: &[u8], value: &[u8]) -> Option<BooksEntry> {
    let tail = key.get(prefix_len..)?;
    if tail.len() != 12 || value.len() != 16 {
        return None;
    }
    Some(BooksEntry {
        date: day_of(tail[..4].try_into().ok()?),
        transaction_id: u64::from_be_bytes(tail[4..].try_into().ok()?),
        customer: CustomerId(u64::from_be_bytes(value[..8].try_into().ok()?)),
        number: u64::from_be_bytes(value[8..].try_into().ok()?),
    })
}

impl Store {
    /// Calls `visit` with each of `webstore`'s entries dated from `from` to `to` (both
    /// included), by date and then id, until it returns false; an entry that does not read
    /// is an error naming its key.
    pub fn books_between(
        &self,
        webstore: &str,
        from: Day,
        to: Day,
        visit: &mut dyn FnMut(BooksEntry) -> bool,
    ) -> Result<(), StoreError> {
        let prefix_len = webstore_prefix(BOOKS, webstore).len();
        let start = books_day_key(webstore, from);
        let end = books_day_key(webstore, Day(to.0.saturating_add(1)));
        let mut failure = None;
        self.inner.storage.for_each_between(
            &start,
            Some(&end),
            &mut |key, value| match entry_of(prefix_len, key, value) {
                Some(entry) => visit(entry),
                None => {
                    failure = Some(corrupt(
                        key,
                        crate::store::codec::CodecError::Payload(
                            "a books entry is not a customer and a number".into(),
                        ),
                    ));
                    false
                }
            },
        )?;
        failure.map_or(Ok(()), Err)
    }
}

/// Adds an imported transaction's entry to `batch` (`accounts::add_transaction_record`).
pub(super) fn add_books_entry(batch: &mut WriteBatch, webstore: &str, entry: BooksEntry) {
    batch.put(
        books_key(webstore, entry.date, entry.transaction_id),
        books_value(entry.customer, entry.number),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_reads_back_from_its_key_and_value_and_dates_order_its_keys() {
        let entry = BooksEntry {
            date: Day(-3),
            transaction_id: 1 << 40,
            customer: CustomerId(7),
            number: 12,
        };
        let key = books_key("shop", entry.date, entry.transaction_id);
        let prefix_len = webstore_prefix(BOOKS, "shop").len();
        assert_eq!(
            entry_of(prefix_len, &key, &books_value(entry.customer, entry.number)),
            Some(entry)
        );
        assert!(books_key("shop", Day(-3), u64::MAX) < books_key("shop", Day(2), 0));
        assert!(books_key("shop", Day(20_000), 5) < books_key("shop", Day(20_001), 1));
        assert_eq!(entry_of(prefix_len, &key, b"short"), None);
    }
}
