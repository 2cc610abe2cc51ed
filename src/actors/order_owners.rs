//! The order → customer index, in memory. Customer actors publish each order here once it
//! is durable, so a reader that finds an order through the index never sees one a crash
//! could still take back. Orders stored before the start are added by one background scan
//! of the store's order keys; until it ends, a lookup of an order id from before the start
//! waits for it rather than answer a wrong 404.
//!
//! Must not touch: the store's writes, actor state, HTTP.

use dashmap::DashMap;
use tokio::sync::watch;

use crate::domain::ids::{CustomerId, OrderId};
use crate::store::{Store, StoreError};

/// Where the scan of orders stored before the start is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Fill {
    Running,
    Done,
    Failed(String),
}

/// Order id → owning customer, for every durable order.
pub struct OrderOwners {
    owners: DashMap<OrderId, CustomerId>,
    /// Every order stored before the start has an id up to this.
    stored_before_start: u64,
    fill: watch::Sender<Fill>,
}

impl OrderOwners {
    /// An index whose orders up to `stored_before_start` are still to be filled in by
    /// [`OrderOwners::fill_from`].
    pub fn new(stored_before_start: u64) -> OrderOwners {
        let state = if stored_before_start == 0 {
            Fill::Done
        } else {
            Fill::Running
        };
        OrderOwners {
            owners: DashMap::new(),
            stored_before_start,
            fill: watch::Sender::new(state),
        }
    }

    /// Adds every order stored before the start, reading the store's order keys. Blocking:
    /// run it on a thread of its own.
    pub fn fill_from(&self, store: &Store) {
        let outcome = store.for_each_order_owner(&mut |order, customer| {
            self.owners.insert(order, customer);
        });
        self.fill.send_replace(match outcome {
            Ok(()) => Fill::Done,
            Err(error) => Fill::Failed(error.to_string()),
        });
    }

    /// Records a durable order.
    pub fn publish(&self, order: OrderId, customer: CustomerId) {
        self.owners.insert(order, customer);
    }

    /// The customer owning a durable order, in any webstore.
    pub async fn owner(&self, order: OrderId) -> Result<Option<CustomerId>, StoreError> {
        if let Some(owner) = self.owners.get(&order) {
            return Ok(Some(*owner));
        }
        if order.0 > self.stored_before_start {
            return Ok(None);
        }
        let mut fill = self.fill.subscribe();
        let state = fill
            .wait_for(|state| *state != Fill::Running)
            .await
            .map(|state| state.clone())
            .unwrap_or_else(|_| Fill::Failed("the index was dropped".into()));
        match state {
            Fill::Failed(detail) => Err(StoreError::Engine {
                context: "indexing the stored orders".into(),
                detail,
            }),
            _ => Ok(self.owners.get(&order).map(|owner| *owner)),
        }
    }

    /// Whether the orders stored before the start are all in (or failed to come in).
    pub fn is_complete(&self) -> bool {
        *self.fill.borrow() != Fill::Running
    }

    /// How many orders the index holds.
    pub fn len(&self) -> usize {
        self.owners.len()
    }

    /// Whether the index holds no order.
    pub fn is_empty(&self) -> bool {
        self.owners.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lookups_of_orders_from_before_the_start_wait_for_the_fill() {
        let owners = std::sync::Arc::new(OrderOwners::new(10));
        owners.publish(OrderId(11), CustomerId(3));
        assert_eq!(
            owners.owner(OrderId(11)).await.unwrap(),
            Some(CustomerId(3))
        );
        assert_eq!(owners.owner(OrderId(12)).await.unwrap(), None);

        let waiting = tokio::spawn({
            let owners = owners.clone();
            async move { owners.owner(OrderId(5)).await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "answered before the fill ended");
        owners.owners.insert(OrderId(5), CustomerId(2));
        owners.fill.send_replace(Fill::Done);
        let answer = tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(answer.unwrap(), Some(CustomerId(2)));
        assert_eq!(owners.owner(OrderId(6)).await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_failed_fill_is_an_error_for_old_orders_only() {
        let owners = OrderOwners::new(10);
        owners.fill.send_replace(Fill::Failed("disk".into()));
        assert!(owners.owner(OrderId(5)).await.is_err());
        assert_eq!(owners.owner(OrderId(50)).await.unwrap(), None);
    }
}
