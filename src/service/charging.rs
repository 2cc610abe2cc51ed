//! Charging frozen deliveries: each delivery of a frozen date still pending when the date's
//! `delivered_at` passes (`domain::account::charging`) is delivered and charged its frozen
//! price, once, by its customer's actor; and the producer's marks
//! (`PUT /v1/orders/{id}/deliveries/{date}`), which charge a delivery, or reverse its charge,
//! as its status changes. The freezing duty asks [`Service::charge_delivered_dates`] after
//! freezing, on the node that takes writes.
//!
//! Exactly once: a charge is written with the delivery's new status in one change, and the
//! actor charges only a delivery it finds pending; the webstore's mark (`m charged/`) says
//! which dates are done, written only once every delivery of the date is charged. A node
//! that stops half-way, or a group's new primary, goes on from the mark, and what was
//! charged before is found delivered and left as it is. A store that never charged (made
//! by a release before charges) starts at the latest date due: dates before it were
//! delivered without money, and are not charged after the fact.
//!
//! Must not touch: HTTP, what a charge posts (`domain::account::delivery_mark`), which
//! dates are frozen (`service::freezing`).

use std::sync::Arc;

use futures_util::stream::{self, StreamExt};

use crate::actors::customer::{DeliveryMarked, MarkDelivery, Request};
use crate::clock::unix_now;
use crate::domain::account::delivery_mark::{DeliveryMark, DeliveryStatus};
use crate::domain::catalogue::Webstore;
use crate::domain::day::Day;
use crate::domain::fields::FieldErrors;
use crate::domain::ids::{CustomerId, OrderId};

use super::{Service, ServiceError};

/// Charges in flight at once: enough to share the log's group commits, few beside the
/// actors' call cap.
const IN_FLIGHT: usize = 16;
/// The most dates one call charges (a node back after a long stop catches up over a few).
const MOST_DATES: usize = 31;

/// The message for a mark on a date not locked or not frozen yet.
pub const NOT_LOCKED: &str = "is not locked yet: a delivery is marked from its date's cut-off on";

impl Service {
    /// Charges the pending deliveries of `webstore`'s frozen dates whose `delivered_at` has
    /// passed, date by date from the mark, at most `MOST_DATES`; how many deliveries it
    /// charged. Nothing while the webstore is not served here for writes or is being copied
    /// to another shard.
    pub async fn charge_delivered_dates(
        &self,
        webstore: &Arc<Webstore>,
    ) -> Result<usize, ServiceError> {
        self.charge_delivered_dates_at(webstore, unix_now()).await
    }

    /// [`Service::charge_delivered_dates`] as of `now` (Unix seconds): what the duty runs,
    /// and what a test moving the clock through `delivered_at` calls.
    pub(crate) async fn charge_delivered_dates_at(
        &self,
        webstore: &Arc<Webstore>,
        now: i64,
    ) -> Result<usize, ServiceError> {
        let id = &webstore.settings.id;
        let store = self.registry.store();
        if !self.duties_may_write(id) {
            return Ok(0);
        }
        let Some(frozen) = self.freeze_mark(webstore)? else {
            return Ok(0);
        };
        let due = webstore
            .delivered_at
            .last_charged_day(&webstore.zone, webstore.cutoff, now);
        let last = due.min(frozen.through);
        let mut day = match store.charge_mark(id)? {
            Some(charged) => charged.plus(1),
            None => due,
        };
        let mut charged = 0;
        let mut dates = 0;
        while day <= last && dates < MOST_DATES {
            if frozen.holds(day) {
                charged += self.charge_date(webstore, day).await?;
            }
            store.write_charge_mark(id, day)?.durable().await?;
            dates += 1;
            day = day.plus(1);
        }
        Ok(charged)
    }

    /// Charges every pending delivery of frozen date `day`; how many. An error leaves the
    /// date to the next call (what was charged stays charged, and is not charged again).
    async fn charge_date(&self, webstore: &Arc<Webstore>, day: Day) -> Result<usize, ServiceError> {
        let mut pending = Vec::new();
        self.registry.store().for_each_frozen_delivery(
            &webstore.settings.id,
            day,
            &mut |order, record| {
                if record.status() == DeliveryStatus::Pending {
                    pending.push((order, CustomerId(record.customer_id)));
                }
            },
        )?;
        let results: Vec<Result<DeliveryMarked, ServiceError>> = stream::iter(pending)
            .map(|(order, customer)| {
                let mark = MarkDelivery {
                    order_id: order,
                    date: day,
                    mark: DeliveryMark {
                        status: DeliveryStatus::Delivered,
                        note: None,
                    },
                    only_pending: true,
                };
                self.mark_with_actor(webstore, customer, mark)
            })
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await;
        let mut charged = 0;
        for result in results {
            if result?.changed {
                charged += 1;
            }
        }
        Ok(charged)
    }

    /// Marks order `order_id`'s delivery on `date` (`PUT /v1/orders/{id}/deliveries/{date}`):
    /// delivered (charged) or not delivered (a charge reversed), from the date's lock on. An
    /// order of another webstore is as absent as none; a date not frozen yet, or one the
    /// order has no delivery on, is refused naming `date`.
    pub async fn mark_delivery(
        &self,
        webstore: &Arc<Webstore>,
        order_id: OrderId,
        date: Day,
        mark: DeliveryMark,
    ) -> Result<DeliveryMarked, ServiceError> {
        self.writes_allowed()?;
        let owner = self
            .registry
            .order(webstore.idx, order_id)
            .await?
            .ok_or(ServiceError::NotFound)?
            .customer_id;
        if !self.is_frozen(webstore, date)? {
            return Err(ServiceError::Invalid(FieldErrors::single(
                "date", NOT_LOCKED,
            )));
        }
        let request = MarkDelivery {
            order_id,
            date,
            mark,
            only_pending: false,
        };
        self.mark_with_actor(webstore, owner, request).await
    }

    async fn mark_with_actor(
        &self,
        webstore: &Arc<Webstore>,
        customer: CustomerId,
        request: MarkDelivery,
    ) -> Result<DeliveryMarked, ServiceError> {
        let request = Box::new(request);
        Ok(self
            .calls
            .call(
                &self.registry,
                webstore.idx,
                customer,
                None::<()>,
                |reply| Request::MarkDelivery(request, reply),
            )
            .await??)
    }
}
