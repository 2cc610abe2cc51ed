//! Listing a webstore's customers: its customer ids in id order, in memory (8 bytes a
//! customer), so that any page costs the same: a page is a slice of the list and the
//! records it names, never a walk of the store from its start.
//!
//! An id joins the list when it is allocated (under the webstore's allocation lock, so the
//! list grows at its end in id order and a page never shifts under a client paging
//! through it), and leaves it only if its create fails or is never made durable ([`Listed`]
//! is the guard that takes it back). Until its create is durable it is not counted in the
//! list's total, and the registry leaves its customer out of pages (read committed: see
//! `super::uncommitted`). Customers stored before the start are added by a scan of the store's customer
//! number index on a thread of its own; until that ends, a page waits for it.
//!
//! Must not touch: actors, emails, HTTP, the store's writes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use tokio::sync::watch;

use crate::domain::ids::CustomerId;
use crate::store::StoreError;

/// Where the scan of the customers stored before the start is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Fill {
    Running,
    Done,
    Failed(String),
}

/// A webstore's customer ids in id order.
pub struct CustomerList {
    /// Sorted once the fill is done; until then, ids allocated since the start (in order).
    ids: RwLock<Vec<CustomerId>>,
    /// Listed ids whose create is not durable yet: not counted in the total.
    unsettled: AtomicU64,
    fill: watch::Sender<Fill>,
}

impl CustomerList {
    /// An empty list whose stored customers are still to be added by [`CustomerList::fill`].
    pub fn filling() -> Arc<CustomerList> {
        Arc::new(CustomerList {
            ids: RwLock::new(Vec::new()),
            unsettled: AtomicU64::new(0),
            fill: watch::Sender::new(Fill::Running),
        })
    }

    /// Adds the customers found in the store (any order, duplicates of ids allocated
    /// meanwhile allowed) and opens the list to readers; or, on `Err`, makes every page
    /// fail with the reason.
    pub fn fill(&self, stored: Result<Vec<CustomerId>, StoreError>) {
        match stored {
            Ok(stored) => {
                let mut ids = self.write();
                ids.extend(stored);
                ids.sort_unstable();
                ids.dedup();
                drop(ids);
                self.fill.send_replace(Fill::Done);
            }
            Err(error) => {
                tracing::error!(%error, "listing the stored customers failed");
                self.fill.send_replace(Fill::Failed(error.to_string()));
            }
        }
    }

    /// Lists a newly allocated id; call under the allocation lock, so ids arrive in order.
    /// The id leaves the list again when the returned guard is dropped unkept, and counts
    /// in the total once it is kept.
    pub fn allocated(self: &Arc<Self>, id: CustomerId) -> Listed {
        self.unsettled.fetch_add(1, Ordering::AcqRel);
        {
            let mut ids = self.write();
            match ids.last() {
                Some(last) if *last > id => {
                    // Only an id from before an import could be lower; keep the order.
                    let at = ids.partition_point(|listed| *listed < id);
                    ids.insert(at, id);
                }
                _ => ids.push(id),
            }
        }
        Listed {
            list: Some(self.clone()),
            id,
        }
    }

    fn settle(&self) {
        self.unsettled.fetch_sub(1, Ordering::AcqRel);
    }

    fn withdraw(&self, id: CustomerId) {
        self.settle();
        let mut ids = self.write();
        // A failed create is recent: look from the end.
        if let Some(at) = ids.iter().rposition(|listed| *listed == id) {
            ids.remove(at);
        }
    }

    /// Up to `limit` ids from position `offset` (some may be of creates not durable yet,
    /// which the caller leaves out), and how many customers there are in all (without
    /// those). Waits for the fill.
    pub async fn page(
        &self,
        offset: u64,
        limit: u64,
    ) -> Result<(Vec<CustomerId>, u64), StoreError> {
        let mut fill = self.fill.subscribe();
        let filled = fill
            .wait_for(|state| *state != Fill::Running)
            .await
            .map(|state| state.clone())
            .unwrap_or(Fill::Failed("the customer list was dropped".into()));
        if let Fill::Failed(detail) = filled {
            return Err(StoreError::Engine {
                context: "listing the stored customers".into(),
                detail,
            });
        }
        let ids = self.read();
        let total = (ids.len() as u64).saturating_sub(self.unsettled.load(Ordering::Acquire));
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(ids.len());
        let end = start
            .saturating_add(usize::try_from(limit).unwrap_or(usize::MAX))
            .min(ids.len());
        Ok((ids[start..end].to_vec(), total))
    }

    /// How many ids are listed now (the fill included once it is done).
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether no id is listed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn read(&self) -> RwLockReadGuard<'_, Vec<CustomerId>> {
        self.ids
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Vec<CustomerId>> {
        self.ids
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A newly allocated id's place in its webstore's list: taken back when dropped, unless
/// [`Listed::keep`] says the customer was stored.
pub struct Listed {
    list: Option<Arc<CustomerList>>,
    id: CustomerId,
}

impl Listed {
    /// The customer is stored durably: its id stays listed, and counts.
    pub fn keep(mut self) {
        if let Some(list) = self.list.take() {
            list.settle();
        }
    }
}

impl Drop for Listed {
    fn drop(&mut self) {
        if let Some(list) = self.list.take() {
            list.withdraw(self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ids(list: &[u64]) -> Vec<CustomerId> {
        list.iter().copied().map(CustomerId).collect()
    }

    fn page(list: &CustomerList, offset: u64, limit: u64) -> (Vec<CustomerId>, u64) {
        futures_util::FutureExt::now_or_never(list.page(offset, limit))
            .expect("a filled list answers at once")
            .unwrap()
    }

    #[test]
    fn pages_are_slices_and_past_the_end_is_empty() {
        let list = CustomerList::filling();
        list.fill(Ok(ids(&[5, 1, 3])));
        assert_eq!(page(&list, 0, 2), (ids(&[1, 3]), 3));
        assert_eq!(page(&list, 2, 2), (ids(&[5]), 3));
        assert_eq!(page(&list, 3, 2), (vec![], 3));
        assert_eq!(page(&list, u64::MAX, u64::MAX), (vec![], 3));
    }

    #[test]
    fn ids_allocated_during_the_fill_are_listed_once() {
        let list = CustomerList::filling();
        assert!(
            futures_util::FutureExt::now_or_never(list.page(0, 10)).is_none(),
            "a page waits for the fill"
        );
        list.allocated(CustomerId(7)).keep();
        list.allocated(CustomerId(8)).keep();
        // The scan saw 7 already; 8 came after it.
        list.fill(Ok(ids(&[2, 7, 4])));
        assert_eq!(page(&list, 0, 10), (ids(&[2, 4, 7, 8]), 4));
    }

    #[test]
    fn a_failed_create_takes_its_id_back() {
        let list = CustomerList::filling();
        list.fill(Ok(ids(&[1])));
        let failed = list.allocated(CustomerId(2));
        list.allocated(CustomerId(3)).keep();
        let writing = list.allocated(CustomerId(4));
        assert_eq!(
            page(&list, 0, 10),
            (ids(&[1, 2, 3, 4]), 2),
            "creates not durable yet are not counted"
        );
        drop(failed);
        assert_eq!(page(&list, 0, 10), (ids(&[1, 3, 4]), 2));
        writing.keep();
        assert_eq!(page(&list, 0, 10), (ids(&[1, 3, 4]), 3));
    }

    #[test]
    fn a_failed_fill_fails_every_page() {
        let list = CustomerList::filling();
        list.fill(Err(StoreError::Engine {
            context: "test".into(),
            detail: "disk on fire".into(),
        }));
        let outcome = futures_util::FutureExt::now_or_never(list.page(0, 10)).unwrap();
        assert!(outcome.is_err());
    }

    proptest! {
        /// A client paging through a webstore while customers are created (and some creates
        /// fail) sees every customer that existed when it began exactly once, in id order,
        /// and never a customer twice.
        #[test]
        fn paging_sees_everyone_once_in_order(
            stored in 0usize..300,
            per_page in 1u64..40,
            creates in proptest::collection::vec(any::<bool>(), 0..200),
        ) {
            let list = CustomerList::filling();
            list.fill(Ok((1..=stored as u64).rev().map(CustomerId).collect()));
            let mut next_id = stored as u64 + 1;
            let mut creates = creates.into_iter();
            let mut seen = Vec::new();
            let mut number = 0;
            loop {
                let (got, _) = page(&list, number * per_page, per_page);
                // Between two pages, a create lands (kept) or fails (taken back).
                if let Some(kept) = creates.next() {
                    let listed = list.allocated(CustomerId(next_id));
                    next_id += 1;
                    if kept { listed.keep() }
                }
                if got.is_empty() { break; }
                seen.extend(got);
                number += 1;
                prop_assert!(number < 10_000);
            }
            let mut sorted = seen.clone();
            sorted.sort_unstable();
            sorted.dedup();
            prop_assert_eq!(&sorted, &seen, "in order, and nobody twice");
            let first: Vec<_> = (1..=stored as u64).map(CustomerId).collect();
            prop_assert!(seen.starts_with(&first), "everyone stored before is seen");
        }
    }
}
