//! The delivery list: every delivery of a webstore on a date, as a producer packs them,
//! ordered by delivery service, customer number and order id, a page at a time. Sorting the
//! list costs in proportion to the orders of that webstore that can fall on that weekday (the
//! delivery index holds them); the sorted list is then kept (see [`super::delivery_lists`])
//! and later pages cost in proportion to the page, reading only its own customers and
//! orders. Must not touch: HTTP types.

use std::sync::Arc;

use crate::domain::catalogue::Webstore;
use crate::domain::customer::Customer;
use crate::domain::day::Day;
use crate::domain::ids::OrderId;
use crate::domain::order::content::OrderContent;
use crate::domain::order::history::{withheld_on_scheduled, Withheld, WithheldCounts};
use crate::domain::order::Order;
use crate::domain::paging::Page;

use crate::index::deliveries::Scheduled;

use super::delivery_lists::{ListKey, SortedList};
use super::{Service, ServiceError};

/// One delivery on the list.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The date.
    pub date: Day,
    /// The order delivered.
    pub order_id: OrderId,
    /// What it delivers that date: the content in force then (the order's history is not
    /// carried: a delivery shows what goes out, not the order's answer).
    pub content: OrderContent,
    /// Its customer as they are now (the address and delivery service in force).
    pub customer: Arc<Customer>,
    /// Whether the order's extras go with this delivery: always, unless they are one-off and
    /// this is not the order's first delivery.
    pub with_extras: bool,
}

/// A day's whole list: its deliveries in delivery order, and how many regular deliveries
/// are withheld that day, by reason (what a producer's day and week pages show).
#[derive(Debug, Clone, Default)]
pub struct DayList {
    /// The deliveries, in delivery order.
    pub deliveries: Vec<Delivery>,
    /// The regular deliveries withheld, by reason.
    pub withheld: WithheldCounts,
}

/// The order's content as delivered on `date` (the one in force then) and whether its extras
/// go with it; `None` when it is withheld that date.
fn delivered_on(
    order: Order,
    customer: &Customer,
    entry: &Scheduled,
    date: Day,
) -> Option<(OrderContent, bool)> {
    let history = order.history;
    if history.is_unchanged() && customer.halts.spans().is_empty() {
        let first_delivery = entry.schedule.first_delivery(entry.frequency);
        let content = history.into_content_on(date)?;
        let with_extras = !content.extras_one_off || first_delivery == Some(date);
        return Some((content, with_extras));
    }
    let delivery = history.on(date, &customer.halts).ok()?;
    let with_extras = !delivery.extras.is_empty()
        || history
            .content_on(date)
            .is_some_and(|(_, version)| !version.content.extras_one_off);
    // The delivery needs the content of its date alone: the history is not carried on.
    Some((history.into_content_on(date)?, with_extras))
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
        let list = self.delivery_list(webstore, date, delivery_service).await?;
        let total = list.entries.len() as u64;
        let first = usize::try_from(page.offset()).unwrap_or(usize::MAX);
        let take = usize::try_from(page.per_page).unwrap_or(usize::MAX);
        let deliveries = self.read_deliveries(webstore, date, &list, first, take)?;
        Ok((deliveries, total))
    }

    /// Every delivery of `webstore` on `date`, in delivery order: the API's list with all
    /// its pages in one, read from one sorted list, with the day's withheld deliveries
    /// counted (what a producer's day page and its CSV show).
    pub async fn day_list(&self, webstore: &Webstore, date: Day) -> Result<DayList, ServiceError> {
        let list = self.delivery_list(webstore, date, None).await?;
        Ok(DayList {
            deliveries: self.read_deliveries(webstore, date, &list, 0, usize::MAX)?,
            withheld: list.withheld,
        })
    }

    /// The sorted list of `webstore`'s deliveries on `date`: the one kept, if it is current,
    /// or a new one, kept for the next pages.
    async fn delivery_list(
        &self,
        webstore: &Webstore,
        date: Day,
        delivery_service: Option<u64>,
    ) -> Result<Arc<SortedList>, ServiceError> {
        let key = ListKey {
            webstore: webstore.idx,
            date,
            delivery_service,
        };
        let generation = self.registry.deliveries_generation(webstore.idx);
        if let Some(list) = self.delivery_lists.current(key, generation) {
            return Ok(list);
        }
        let list = Arc::new(self.sorted_deliveries(key).await?);
        self.delivery_lists.keep(key, list.clone());
        Ok(list)
    }

    /// The deliveries of entries `first..first + take` of `list`, with their customers and
    /// orders as they are now.
    fn read_deliveries(
        &self,
        webstore: &Webstore,
        date: Day,
        list: &SortedList,
        first: usize,
        take: usize,
    ) -> Result<Vec<Delivery>, ServiceError> {
        let on_page = list.entries.iter().skip(first).take(take);
        let mut deliveries = Vec::with_capacity(on_page.len());
        for entry in on_page {
            // Customers as they are now: their address may have changed since the sort,
            // their delivery service not (that moves the generation).
            let Some(customer) = self.registry.customer(webstore.idx, entry.customer)? else {
                continue;
            };
            let Some(order) = self
                .registry
                .store()
                .load_order(entry.customer, entry.order)?
            else {
                continue;
            };
            let Some((content, with_extras)) = delivered_on(order, &customer, entry, date) else {
                // Withheld on this date (a change since the sort, on a date not locked).
                continue;
            };
            deliveries.push(Delivery {
                date,
                order_id: entry.order,
                content,
                with_extras,
                customer,
            });
        }
        Ok(deliveries)
    }

    /// Why the order of `entry`, whose schedule falls on `date`, is not delivered then, if
    /// it is not: its customer is halted, or one of its lifecycle versions (a cancellation,
    /// a pause, a skipped date) withholds it, as `OrderHistory::on` would say. The index
    /// holds the lifecycle versions, so nothing is read from the store and the cost is
    /// O(log versions) an order: a date's list stays a function of that day's orders.
    fn withheld(&self, customer: &Customer, entry: &Scheduled, date: Day) -> Option<Withheld> {
        // An order never changed has no lifecycle versions: no need to ask the index.
        let lifecycles = entry
            .has_history()
            .then(|| self.registry.order_lifecycles(entry.order))
            .flatten();
        match lifecycles {
            Some(lifecycles) => withheld_on_scheduled(&lifecycles, date, &customer.halts),
            None => customer.halts.on(date).map(|_| Withheld::Halted),
        }
    }

    /// Every delivery for `key` in delivery order: by delivery service, customer number and
    /// order id.
    async fn sorted_deliveries(&self, key: ListKey) -> Result<SortedList, ServiceError> {
        let (generation, due) = self.registry.deliveries_on(key.webstore, key.date).await?;
        let mut sortable = Vec::with_capacity(due.len());
        let mut withheld = WithheldCounts::default();
        for chunk in due.chunks(CHUNK) {
            for entry in chunk {
                let Some(customer) = self.registry.customer(key.webstore, entry.customer)? else {
                    continue;
                };
                if key
                    .delivery_service
                    .is_some_and(|id| id != customer.delivery_service_id)
                {
                    continue;
                }
                if let Some(reason) = self.withheld(&customer, entry, key.date) {
                    withheld.count(reason);
                    continue;
                }
                let order_by = (customer.delivery_service_id, customer.number, entry.order);
                sortable.push((order_by, *entry));
            }
            tokio::task::yield_now().await;
        }
        sortable.sort_unstable_by_key(|(order_by, _)| *order_by);
        Ok(SortedList {
            generation,
            withheld,
            entries: sortable.into_iter().map(|(_, entry)| entry).collect(),
        })
    }
}
