//! The delivery list: every delivery of a webstore on a date, as a producer packs them,
//! ordered by delivery service, customer number and order id, a page at a time. A frozen
//! date (`service::freezing`) is answered from its list as it was when it locked; any other
//! from the orders' histories. Sorting the
//! list costs in proportion to the orders of that webstore that can fall on that weekday (the
//! delivery index holds them); the sorted list is then kept (see [`super::delivery_lists`])
//! and later pages cost in proportion to the page, reading only its own customers and
//! orders. Must not touch: HTTP types.

use std::sync::Arc;

use crate::domain::account::delivery_mark::DeliveryStatus;
use crate::domain::catalogue::Webstore;
use crate::domain::customer::Customer;
use crate::domain::day::Day;
use crate::domain::ids::{CustomerId, OrderId};
use crate::domain::money::Amount;
use crate::domain::order::history::{withheld_on_scheduled, Goods, Withheld, WithheldCounts};
use crate::domain::order::Order;
use crate::domain::paging::Page;

use crate::index::deliveries::Scheduled;
use crate::store::kinds::deliveries::FreezeMark;

use super::delivery_lists::{ListKey, SortedList};
use super::freezing::price_of;
use super::{Service, ServiceError};

/// One delivery on the list.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The date.
    pub date: Day,
    /// The order delivered.
    pub order_id: OrderId,
    /// What goes out (the order's history is not carried: a delivery shows what goes out,
    /// not the order's answer).
    pub goods: Goods,
    /// Its customer as they are now (the address in force).
    pub customer: Arc<Customer>,
    /// The delivery service it goes with (the customer's, as it was when a frozen date
    /// locked).
    pub delivery_service_id: u64,
    /// What it costs: frozen with a frozen date, else what it would cost at the
    /// catalogue's prices and the customer's discount now.
    pub price: Amount,
    /// Pending, delivered (charged) or not delivered; pending until its date is frozen.
    pub status: DeliveryStatus,
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

/// What goes out for `order` on `date`; `None` when it is withheld that date. An order never
/// changed, of a customer never halted, delivers its content as it is (its one-off extras
/// with its first delivery alone), taken out of it rather than copied.
fn delivered_on(order: Order, customer: &Customer, entry: &Scheduled, date: Day) -> Option<Goods> {
    let history = order.history;
    if history.is_unchanged() && customer.halts.spans().is_empty() {
        let first_delivery = entry.schedule.first_delivery(entry.frequency);
        let content = history.into_content_on(date)?;
        let with_extras = !content.extras_one_off || first_delivery == Some(date);
        return Some(Goods {
            box_id: content.box_id,
            extras: if with_extras {
                content.extras
            } else {
                Vec::new()
            },
            exclusions: content.exclusions,
            substitutions: content.substitutions,
        });
    }
    history
        .on(date, &customer.halts)
        .ok()
        .map(|delivery| delivery.goods())
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
        let first = usize::try_from(page.offset()).unwrap_or(usize::MAX);
        let take = usize::try_from(page.per_page).unwrap_or(usize::MAX);
        if self.is_frozen(webstore, date)? {
            let (all, _) = self.frozen_list(webstore, date, delivery_service)?;
            let total = all.len() as u64;
            return Ok((all.into_iter().skip(first).take(take).collect(), total));
        }
        let list = self.delivery_list(webstore, date, delivery_service).await?;
        let total = list.entries.len() as u64;
        let deliveries = self.read_deliveries(webstore, date, &list, first, take)?;
        Ok((deliveries, total))
    }

    /// Whether `date`'s list of `webstore` is frozen (kept as it was when it locked).
    pub(super) fn is_frozen(&self, webstore: &Webstore, date: Day) -> Result<bool, ServiceError> {
        Ok(self
            .freeze_mark(webstore)?
            .is_some_and(|mark| mark.holds(date)))
    }

    /// The dates of `webstore` frozen, if any.
    pub(super) fn freeze_mark(
        &self,
        webstore: &Webstore,
    ) -> Result<Option<FreezeMark>, ServiceError> {
        let store = self.registry.store();
        Ok(self
            .registry
            .indexes()
            .frozen
            .mark(webstore.idx, || store.freeze_mark(&webstore.settings.id))?)
    }

    /// Frozen date `date`'s deliveries (of one delivery service, if given), in delivery
    /// order, each as it was when the date locked and with its customer as they are now;
    /// and the regular deliveries withheld that day. One read of the date's records: a
    /// frozen list costs in proportion to that date's deliveries alone.
    fn frozen_list(
        &self,
        webstore: &Webstore,
        date: Day,
        delivery_service: Option<u64>,
    ) -> Result<(Vec<Delivery>, WithheldCounts), ServiceError> {
        let store = self.registry.store();
        let id = &webstore.settings.id;
        let mut records = Vec::new();
        store.for_each_frozen_delivery(id, date, &mut |order, record| {
            if delivery_service.is_none_or(|service| service == record.delivery_service_id) {
                records.push((order, record));
            }
        })?;
        let mut deliveries = Vec::with_capacity(records.len());
        for (order, record) in records {
            let Some(customer) = self
                .registry
                .customer(webstore.idx, CustomerId(record.customer_id))?
            else {
                continue;
            };
            let (price, status) = (Amount(record.price), record.status());
            deliveries.push(Delivery {
                date,
                order_id: order,
                delivery_service_id: record.delivery_service_id,
                goods: record.into_goods(),
                customer,
                price,
                status,
            });
        }
        deliveries.sort_unstable_by_key(|d| (d.delivery_service_id, d.customer.number, d.order_id));
        let withheld = store
            .frozen_day(id, date)?
            .map(|day| WithheldCounts {
                paused: day.paused,
                skipped: day.skipped,
                cancelled: day.cancelled,
                halted: day.halted,
            })
            .unwrap_or_default();
        Ok((deliveries, withheld))
    }

    /// Every delivery of `webstore` on `date`, in delivery order: the API's list with all
    /// its pages in one, read from one sorted list, with the day's withheld deliveries
    /// counted (what a producer's day page and its CSV show).
    pub async fn day_list(&self, webstore: &Webstore, date: Day) -> Result<DayList, ServiceError> {
        if self.is_frozen(webstore, date)? {
            let (deliveries, withheld) = self.frozen_list(webstore, date, None)?;
            return Ok(DayList {
                deliveries,
                withheld,
            });
        }
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
            let Some(goods) = delivered_on(order, &customer, entry, date) else {
                // Withheld on this date (a change since the sort, on a date not locked).
                continue;
            };
            let service = customer.delivery_service_id;
            deliveries.push(Delivery {
                date,
                order_id: entry.order,
                price: price_of(webstore, &goods, customer.account.discount, service),
                status: DeliveryStatus::Pending,
                goods,
                delivery_service_id: service,
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
