//! Listing a webstore's customers: how many it has, and a page of their ids in id order.
//! Must not touch: actors, emails, HTTP.

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::OnceCell;

use crate::domain::ids::CustomerId;
use crate::store::{Store, StoreError};

/// How many customers a webstore has: those found in the store at start (counted on first
/// need, since counting a large store takes a while) plus those created since.
pub struct Totals {
    at_start: OnceCell<u64>,
    last_number_at_start: u64,
    created: AtomicU64,
}

impl Totals {
    /// Totals of a webstore whose highest stored customer number is `last_number_at_start`.
    pub fn new(last_number_at_start: u64) -> Totals {
        Totals {
            at_start: OnceCell::new(),
            last_number_at_start,
            created: AtomicU64::new(0),
        }
    }

    /// Counts one customer created since the start.
    pub fn created_one(&self) {
        self.created.fetch_add(1, Ordering::Relaxed);
    }

    /// Up to `limit` customer ids of the webstore from position `offset` (by id), and how
    /// many it has in all.
    pub async fn page(
        &self,
        store: &Store,
        webstore_id: &str,
        offset: u64,
        limit: u64,
    ) -> Result<(Vec<CustomerId>, u64), StoreError> {
        let at_start = *self
            .at_start
            .get_or_try_init(|| {
                let store = store.clone();
                let webstore_id = webstore_id.to_owned();
                let up_to = self.last_number_at_start;
                off_workers(move || store.count_customers(&webstore_id, up_to))
            })
            .await?;
        let total = at_start + self.created.load(Ordering::Relaxed);
        let store = store.clone();
        let webstore_id = webstore_id.to_owned();
        // Deep pages walk the index from its start; keep that off the async workers.
        let ids = off_workers(move || store.customer_ids_page(&webstore_id, offset, limit)).await?;
        Ok((ids, total))
    }
}

/// Runs a store scan on a blocking thread.
pub(super) async fn off_workers<T: Send + 'static>(
    scan: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(scan)
        .await
        .map_err(|error| StoreError::Engine {
            context: "scanning the store".into(),
            detail: error.to_string(),
        })?
}
