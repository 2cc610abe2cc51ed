//! The webstore's books: its transactions by date (`GET /v1/transactions?from=&to=`), read
//! from the store's `b` entries in date order, a page at a time, each transaction only once
//! its customer's account, as last durably written, counts it (as a customer's own ledger).
//!
//! Must not touch: HTTP types, the postings (the customers' actors make them), the rules of
//! a transaction (`domain::account`).

use std::collections::HashMap;

use crate::clock::unix_now;
use crate::domain::account::transaction::Transaction;
use crate::domain::catalogue::Webstore;
use crate::domain::day::Day;
use crate::domain::fields::FieldErrors;
use crate::domain::paging::Page;
use crate::store::kinds::books::BooksEntry;

use super::{Service, ServiceError};

/// The widest range of dates one request reads, in days.
pub const MAX_BOOKS_DAYS: i64 = 366;

/// A page of the books.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BooksPage {
    /// The transactions, by date and then id.
    pub transactions: Vec<Transaction>,
    /// How many the dates hold.
    pub total: u64,
}

impl Service {
    /// The webstore's transactions dated from `from` to `to` (both default today in the
    /// webstore's zone; at most [`MAX_BOOKS_DAYS`] days), page `page` of them.
    pub fn books(
        &self,
        webstore: &Webstore,
        from: Option<Day>,
        to: Option<Day>,
        page: Page,
    ) -> Result<BooksPage, ServiceError> {
        let from = from.unwrap_or_else(|| webstore.today(unix_now()));
        let to = to.unwrap_or(from);
        if to < from {
            return Err(ServiceError::Invalid(FieldErrors::single(
                "to",
                "must not be before from",
            )));
        }
        if i64::from(to.0) - i64::from(from.0) >= MAX_BOOKS_DAYS {
            return Err(ServiceError::Invalid(FieldErrors::single(
                "to",
                format!("must be at most {MAX_BOOKS_DAYS} days from from"),
            )));
        }
        let store = self.registry.store();
        let (skip, take) = (page.offset(), page.per_page);
        let mut entries: Vec<BooksEntry> = Vec::with_capacity(take.min(256) as usize);
        let mut total = 0u64;
        store.books_between(&webstore.settings.id, from, to, &mut |entry| {
            if total >= skip && (entries.len() as u64) < take {
                entries.push(entry);
            }
            total += 1;
            true
        })?;
        // Each customer's durable count, read once per page.
        let mut counted: HashMap<u64, u64> = HashMap::new();
        let mut transactions = Vec::with_capacity(entries.len());
        for entry in entries {
            let count = match counted.get(&entry.customer.0) {
                Some(count) => *count,
                None => {
                    let count = self
                        .registry
                        .customer(webstore.idx, entry.customer)?
                        .map_or(0, |customer| customer.account.transactions);
                    counted.insert(entry.customer.0, count);
                    count
                }
            };
            if entry.number > count {
                continue;
            }
            let record = store
                .transaction_records(
                    entry.customer,
                    entry.number.saturating_sub(1),
                    entry.number,
                    1,
                )?
                .pop();
            if let Some(transaction) = record.and_then(|record| record.into_transaction()) {
                transactions.push(transaction);
            }
        }
        Ok(BooksPage {
            transactions,
            total,
        })
    }
}
