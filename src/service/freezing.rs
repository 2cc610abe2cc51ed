//! Freezing each date's deliveries once it locks: the list the producer packs by, kept as it
//! was (`store::kinds::deliveries`) so that nothing done later changes it, and so that the
//! orders' histories may forget what only frozen dates needed. A background duty of the
//! node that takes writes asks [`Service::freeze_locked_dates`] every few seconds for each
//! webstore served here; a node that was down at a lock freezes the date when it is back, and
//! a group's new primary goes on from the mark its predecessor wrote: a date is frozen once,
//! when its record is in.
//!
//! A date's list is every order the delivery index has on it whose content, lifecycle and
//! customer's halts deliver it then (`OrderHistory::on`), made before the date locked; each
//! delivery's price is the catalogue's now (box and the extras that go, less the customer's
//! discount, plus the delivery service's fee). The regular deliveries withheld are counted
//! by reason. Written in batches small enough for any log's largest change, each waited for;
//! the last with the date's record and the webstore's mark.
//!
//! Must not touch: HTTP, the actors (frozen dates are the store's and the index's), what a
//! delivery costs (`domain::money`).

use std::sync::Arc;

use crate::clock::unix_now;
use crate::domain::catalogue::Webstore;
use crate::domain::day::Day;
use crate::domain::money::{delivery_price, Discount};
use crate::domain::order::history::{Goods, Withheld, WithheldCounts};
use crate::store::kinds::deliveries::{DayFrozen, DeliveryRecord, FreezeMark, FrozenDayRecord};

use super::serving::Served;
use super::{Service, ServiceError};

/// Deliveries written per change: small beside any log's largest change.
const BATCH: usize = 256;
/// How long after a date locks it is frozen at the earliest: the writes made just before
/// the lock are durable and indexed by then.
const GRACE_SECS: i64 = 5;
/// The most dates one call freezes (a node back after a long stop catches up over a few).
const MOST_DATES: usize = 31;

impl Service {
    /// Freezes the dates of `webstore` that have locked and are not frozen yet, oldest first,
    /// at most `MOST_DATES`; how many. Nothing while the webstore is not served here for
    /// writes, or is being copied to another shard (the move's target freezes what it
    /// takes over).
    pub async fn freeze_locked_dates(
        &self,
        webstore: &Arc<Webstore>,
    ) -> Result<usize, ServiceError> {
        self.freeze_locked_dates_at(webstore, unix_now()).await
    }

    /// [`Service::freeze_locked_dates`] as of `now` (Unix seconds): what the duty runs, and
    /// what a test moving the clock through cut-offs calls.
    pub(crate) async fn freeze_locked_dates_at(
        &self,
        webstore: &Arc<Webstore>,
        now: i64,
    ) -> Result<usize, ServiceError> {
        let id = &webstore.settings.id;
        let store = self.registry.store();
        if !self.duties_may_write(id) {
            return Ok(0);
        }
        let last_locked = webstore
            .cutoff
            .first_open_day(&webstore.zone, now - GRACE_SECS)
            .plus(-1);
        let mark = self
            .registry
            .indexes()
            .frozen
            .mark(webstore.idx, || store.freeze_mark(id))?;
        // The first freeze starts today: the dates before it keep being answered from the
        // orders' histories.
        let (since, first) = match mark {
            Some(mark) => (mark.since, mark.through.plus(1)),
            None => {
                let today = webstore.today(now);
                (today, today)
            }
        };
        let mut frozen = 0;
        let mut day = first;
        while day <= last_locked && frozen < MOST_DATES {
            self.freeze_date(webstore, day, since).await?;
            frozen += 1;
            day = day.plus(1);
        }
        Ok(frozen)
    }

    /// Whether a duty (freezing, charging) may write for webstore `id` here: served here
    /// for writes and not being copied to another shard (the move's target takes over).
    pub(super) fn duties_may_write(&self, id: &str) -> bool {
        self.serving.owned(id) == Served::Here && !self.registry.store().tracking().is_tracked(id)
    }

    /// Freezes date `day` of `webstore` (its dates frozen from `since`).
    async fn freeze_date(
        &self,
        webstore: &Arc<Webstore>,
        day: Day,
        since: Day,
    ) -> Result<(), ServiceError> {
        let id = &webstore.settings.id;
        let store = self.registry.store();
        // What was written before now is durable, and so in the indexes.
        store.durable().await?;
        let locked_at = webstore
            .cutoff
            .locks_at(day, &webstore.zone)
            .map_or(i64::MIN, |at| at.as_second());
        let (_, mut due) = self.registry.deliveries_on(webstore.idx, day).await?;
        due.sort_unstable_by_key(|entry| entry.order);
        due.dedup_by_key(|entry| entry.order);
        let mut withheld = WithheldCounts::default();
        let mut batch = Vec::with_capacity(BATCH.min(due.len()));
        for entry in &due {
            let Some(customer) = self.registry.customer(webstore.idx, entry.customer)? else {
                continue;
            };
            let Some(order) = store.load_order(entry.customer, entry.order)? else {
                continue;
            };
            // An order made once the date had locked is not on its list.
            if order.created_at >= locked_at {
                continue;
            }
            match order.history.on(day, &customer.halts) {
                Ok(delivery) => {
                    let goods = delivery.goods();
                    let service = customer.delivery_service_id;
                    let price = price_of(webstore, &goods, customer.account.discount, service);
                    let record = DeliveryRecord::pending(entry.customer.0, service, goods, price);
                    batch.push((entry.order, record));
                }
                Err(Withheld::NotScheduled) => {}
                Err(reason) => withheld.count(reason),
            }
            if batch.len() == BATCH {
                store
                    .freeze_deliveries(id, day, &batch, None)?
                    .durable()
                    .await?;
                batch.clear();
                tokio::task::yield_now().await;
            }
        }
        let mark = FreezeMark {
            since,
            through: day,
        };
        let last = DayFrozen {
            record: FrozenDayRecord {
                paused: withheld.paused,
                skipped: withheld.skipped,
                cancelled: withheld.cancelled,
                halted: withheld.halted,
            },
            mark,
        };
        store
            .freeze_deliveries(id, day, &batch, Some(&last))?
            .durable()
            .await?;
        self.registry.indexes().frozen.set(webstore.idx, mark);
        Ok(())
    }
}

/// What `goods` cost, at the catalogue's prices now, less `discount` on box and extras,
/// with the fee of `delivery_service_id` (an item the catalogue no longer has costs
/// nothing).
pub fn price_of(
    webstore: &Webstore,
    goods: &Goods,
    discount: Discount,
    delivery_service_id: u64,
) -> crate::domain::money::Amount {
    let box_cents = webstore
        .boxes
        .get(&goods.box_id)
        .map_or(0, |b| b.price.cents());
    let extras = goods.extras.iter().map(|line| {
        let price = webstore
            .extras
            .get(&line.id)
            .map_or(0, |extra| extra.price.cents());
        (price, line.quantity)
    });
    let fee = webstore
        .delivery_services
        .get(&delivery_service_id)
        .map_or(0, |service| service.fee.cents());
    delivery_price(box_cents, extras, discount, fee)
}
