//! Order use cases: create and change (`PATCH`), one shape (validated and written by the
//! customer's actor, answered once on disk: [`Service::await_order_write`]), read one, list a
//! customer's, an order's deliveries. An order's idempotency turn travels with it to the
//! actor and is released once the write is refused or on disk. Must not touch: HTTP types.

use std::sync::Arc;

use crate::actors::customer::{ChangeOrder, Durable, OrderWrite, PlaceOrder, Request};
use crate::domain::catalogue::{Webstore, WebstoreIdx};
use crate::domain::fields::{parse_digits, FieldErrors, BLANK, INVALID};
use crate::domain::idempotency::{Pending, Resource, ResourceKind};
use crate::domain::ids::{CustomerId, OrderId};
use crate::domain::order::body::{
    customer_ref, validate_order, CustomerCheck, CustomerRef, OrderBody,
};
use crate::domain::order::change::OrderChange;
use crate::domain::order::Order;

use crate::clock::unix_now;
use crate::domain::account::delivery_mark::DeliveryStatus;
use crate::domain::day::Day;
use crate::domain::money::Amount;
use crate::domain::order::history::{Goods, OrderDelivery};

use super::idempotency::Turn;

/// Most days `GET /v1/orders/{id}/deliveries` covers.
const MAX_DAYS: i64 = 366;
/// The days it covers by default: 8 weeks.
const DEFAULT_DAYS: i32 = 56;
use super::freezing::price_of;
use super::{KeyedWrite, Service, ServiceError};

/// One delivery of an order, with what it costs and where it stands.
#[derive(Debug, Clone)]
pub struct PricedDelivery {
    /// The date, what goes out, whether the date is locked.
    pub delivery: OrderDelivery,
    /// Frozen with a frozen date, else at the catalogue's prices and the customer's
    /// discount now.
    pub price: Amount,
    /// Pending until the date is frozen and charged.
    pub status: DeliveryStatus,
}

impl Service {
    /// Creates an order for a customer of the webstore.
    pub async fn create_order(
        &self,
        webstore: &Arc<Webstore>,
        body: OrderBody,
        idempotency: Option<Pending<Order>>,
    ) -> Result<KeyedWrite<Arc<Order>>, ServiceError> {
        self.writes_allowed()?;
        self.idempotency
            .once(
                self.registry.store(),
                webstore,
                ResourceKind::Order,
                idempotency,
                |named, _| self.resource_exists(webstore, named),
                |keyed| self.place_order(webstore, body, keyed),
            )
            .await
    }

    async fn place_order(
        &self,
        webstore: &Arc<Webstore>,
        body: OrderBody,
        keyed: Option<(Pending<Order>, Turn)>,
    ) -> Result<KeyedWrite<Arc<Order>>, ServiceError> {
        let check = match customer_ref(&body) {
            CustomerRef::Missing => CustomerCheck::Missing,
            CustomerRef::Malformed => CustomerCheck::Unknown,
            CustomerRef::Id(id) => match self.registry.live_actor(webstore.idx, id).await? {
                None => CustomerCheck::Unknown,
                Some(live) => {
                    let (idempotency, turn) = keyed.unzip();
                    let request = Box::new(PlaceOrder { body, idempotency });
                    let written = self
                        .calls
                        .call_live(
                            &self.registry,
                            Some(live),
                            webstore.idx,
                            id,
                            turn,
                            |reply| Request::PlaceOrder(request, reply),
                        )
                        .await??;
                    return Service::await_order_write(written).await;
                }
            },
        };
        match validate_order(&body, webstore, check) {
            Err(errors) => Err(ServiceError::Invalid(errors)),
            Ok(_) => Err(ServiceError::Internal(
                "an order without a customer passed validation".into(),
            )),
        }
    }

    /// Changes an order of one of the webstore's customers (`PATCH`/`PUT /v1/orders/{id}`):
    /// the order as it is after the change (as it was, if the change changes nothing). An
    /// order of another webstore is as absent as none. With an idempotency key, the change
    /// is made at most once: its record counts while the order's `updated_at` is at least
    /// the record's time.
    pub async fn change_order(
        &self,
        webstore: &Arc<Webstore>,
        id: OrderId,
        change: OrderChange,
        idempotency: Option<Pending<Order>>,
    ) -> Result<KeyedWrite<Arc<Order>>, ServiceError> {
        self.writes_allowed()?;
        let owner = self
            .registry
            .order(webstore.idx, id)
            .await?
            .ok_or(ServiceError::NotFound)?
            .customer_id;
        self.idempotency
            .once(
                self.registry.store(),
                webstore,
                ResourceKind::Order,
                idempotency,
                |created, recorded_at| self.change_exists(webstore, created, recorded_at),
                |keyed| async move {
                    let (idempotency, turn) = keyed.unzip();
                    let request = Box::new(ChangeOrder {
                        order: id,
                        change,
                        idempotency,
                    });
                    let written = self
                        .calls
                        .call(&self.registry, webstore.idx, owner, turn, |reply| {
                            Request::ChangeOrder(request, reply)
                        })
                        .await??;
                    Service::await_order_write(written).await
                },
            )
            .await
    }

    /// The answer to an order's create or change once its actor has written it: the order,
    /// once it is on disk (and for a change that changed nothing, once the earlier writes it
    /// may show are).
    async fn await_order_write(
        written: OrderWrite,
    ) -> Result<KeyedWrite<Arc<Order>>, ServiceError> {
        match written.durable {
            Durable::Written(durable) => {
                durable.durable().await?;
                Ok(KeyedWrite::Made(written.order))
            }
            Durable::Unchanged(earlier) => {
                if let Some(earlier) = earlier {
                    earlier.durable().await?;
                }
                Ok(KeyedWrite::Unchanged(written.order))
            }
        }
    }

    /// Whether the change an idempotency record of `recorded_at` names is stored: its order
    /// exists and changed then or later (or, for a record of a customer's create, the
    /// customer exists).
    async fn change_exists(
        &self,
        webstore: &Webstore,
        created: Resource,
        recorded_at: i64,
    ) -> Result<bool, ServiceError> {
        Ok(match created {
            Resource::Order(id) => self
                .registry
                .order(webstore.idx, id)
                .await?
                .is_some_and(|order| order.updated_at() >= recorded_at),
            // A key a customer's create or a money write used is that request's: refused,
            // not taken as free.
            Resource::Customer(_) | Resource::Payment(_) | Resource::Account(_) => {
                self.resource_exists(webstore, created).await?
            }
        })
    }

    /// The deliveries of an order of one of the webstore's customers from `from` (default
    /// today in the webstore's zone) to `to` (default 8 weeks on), at most 366 days, with its
    /// customer's halts, each with whether its date is locked.
    pub async fn order_deliveries(
        &self,
        webstore: &Webstore,
        id: OrderId,
        from: Option<Day>,
        to: Option<Day>,
    ) -> Result<Vec<PricedDelivery>, ServiceError> {
        let now = unix_now();
        let from = from.unwrap_or_else(|| webstore.today(now));
        let to = to.unwrap_or_else(|| from.plus(DEFAULT_DAYS - 1));
        if to < from {
            return Err(ServiceError::Invalid(FieldErrors::single(
                "to",
                "must not be before from",
            )));
        }
        if i64::from(to.0) - i64::from(from.0) >= MAX_DAYS {
            return Err(ServiceError::Invalid(FieldErrors::single(
                "to",
                format!("must be at most {MAX_DAYS} days from from"),
            )));
        }
        let order = self.order(webstore, id).await?;
        let customer = self.registry.customer(webstore.idx, order.customer_id)?;
        let halts = customer
            .as_ref()
            .map(|customer| customer.halts.clone())
            .unwrap_or_default();
        let price = |goods: &Goods| {
            customer.as_ref().map_or(Amount::ZERO, |customer| {
                price_of(
                    webstore,
                    goods,
                    customer.account.discount,
                    customer.delivery_service_id,
                )
            })
        };
        let cutoff = webstore.cutoff;
        let mark = self.freeze_mark(webstore)?;
        let frozen = |d: Day| mark.is_some_and(|mark| mark.holds(d));
        // Frozen dates from their lists, the others from the order's history.
        let mut deliveries: Vec<PricedDelivery> = order
            .history
            .deliveries(from, to, &halts, |d| {
                cutoff.is_locked(d, &webstore.zone, now)
            })
            .into_iter()
            .filter(|delivery| !frozen(delivery.date))
            .map(|delivery| PricedDelivery {
                price: price(&delivery.goods),
                status: DeliveryStatus::Pending,
                delivery,
            })
            .collect();
        if let Some(mark) = mark {
            let store = self.registry.store();
            let mut d = from.max(mark.since);
            while d <= to.min(mark.through) {
                if let Some(record) = store.frozen_delivery(&webstore.settings.id, d, id)? {
                    deliveries.push(PricedDelivery {
                        price: Amount(record.price),
                        status: record.status(),
                        delivery: OrderDelivery {
                            date: d,
                            goods: record.into_goods(),
                            locked: true,
                        },
                    });
                }
                d = d.plus(1);
            }
            deliveries.sort_unstable_by_key(|priced| priced.delivery.date);
        }
        Ok(deliveries)
    }

    /// An order of one of the webstore's customers.
    pub async fn order(
        &self,
        webstore: &Webstore,
        id: OrderId,
    ) -> Result<Arc<Order>, ServiceError> {
        self.registry
            .order(webstore.idx, id)
            .await?
            .map(Arc::new)
            .ok_or(ServiceError::NotFound)
    }

    /// The orders of a customer given by the raw `customer_id` query parameter.
    pub async fn orders_of(
        &self,
        webstore: &Webstore,
        customer_id: Option<&str>,
    ) -> Result<Vec<Arc<Order>>, ServiceError> {
        let raw = customer_id.map(str::trim).unwrap_or_default();
        if raw.is_empty() {
            return Err(ServiceError::Invalid(FieldErrors::single(
                "customer_id",
                BLANK,
            )));
        }
        let invalid = || ServiceError::Invalid(FieldErrors::single("customer_id", INVALID));
        let id = parse_digits(raw).filter(|id| *id > 0).ok_or_else(invalid)?;
        match self.list_orders(webstore.idx, CustomerId(id)).await {
            Err(ServiceError::NotFound) => Err(invalid()),
            other => other,
        }
    }

    async fn list_orders(
        &self,
        webstore: WebstoreIdx,
        id: CustomerId,
    ) -> Result<Vec<Arc<Order>>, ServiceError> {
        let list = self
            .calls
            .call(
                &self.registry,
                webstore,
                id,
                None::<()>,
                Request::ListOrders,
            )
            .await??;
        if let Some(durable) = list.durable {
            durable.durable().await?;
        }
        Ok(list.orders)
    }
}
