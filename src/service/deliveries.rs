//! The delivery list: every delivery of a webstore on a date, as a producer packs them,
//! ordered by delivery service, customer number and order id, a page at a time. Its cost is
//! in proportion to the orders of that webstore that can fall on that weekday (the delivery
//! index holds them); only the page's own orders are read from the store. Must not touch:
//! HTTP types.

use std::sync::Arc;

use crate::domain::catalogue::Webstore;
use crate::domain::customer::Customer;
use crate::domain::order::Order;
use crate::domain::paging::Page;
use crate::domain::schedule::Day;

use super::{Service, ServiceError};

/// One delivery on the list.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The date.
    pub date: Day,
    /// The order delivered.
    pub order: Order,
    /// Its customer as they are now (the address and delivery service in force).
    pub customer: Arc<Customer>,
    /// Whether the order's extras go with this delivery: always, unless they are one-off and
    /// this is not the order's first delivery.
    pub with_extras: bool,
}

/// Entries sorted per yield to the runtime, so that a long list does not hold a worker.
const CHUNK: usize = 256;

impl Service {
    /// One page of the deliveries of `webstore` on `date` (of one delivery service, if
    /// given), and how many there are in all.
    pub async fn deliveries(
        &self,
        webstore: &Webstore,
        date: Day,
        delivery_service: Option<u64>,
        page: Page,
    ) -> Result<(Vec<Delivery>, u64), ServiceError> {
        let due = self.registry.deliveries_on(webstore.idx, date).await?;
        let mut listed = Vec::with_capacity(due.len());
        for chunk in due.chunks(CHUNK) {
            for entry in chunk {
                let Some(customer) = self.registry.customer(webstore.idx, entry.customer)? else {
                    continue;
                };
                if delivery_service.is_some_and(|id| id != customer.delivery_service_id) {
                    continue;
                }
                let key = (customer.delivery_service_id, customer.number, entry.order);
                listed.push((key, *entry, customer));
            }
            tokio::task::yield_now().await;
        }
        listed.sort_unstable_by_key(|(key, _, _)| *key);
        let total = listed.len() as u64;
        let first = usize::try_from(page.offset()).unwrap_or(usize::MAX);
        let take = usize::try_from(page.per_page).unwrap_or(usize::MAX);
        let mut deliveries = Vec::with_capacity(take.min(listed.len()));
        for (_, entry, customer) in listed.into_iter().skip(first).take(take) {
            let Some(order) = self
                .registry
                .store()
                .load_order(entry.customer, entry.order)?
            else {
                continue;
            };
            let one_off = order.details.extras_one_off;
            let first_delivery = entry.schedule.first_delivery(entry.frequency);
            deliveries.push(Delivery {
                date,
                with_extras: !one_off || first_delivery == Some(date),
                order,
                customer,
            });
        }
        Ok((deliveries, total))
    }
}
