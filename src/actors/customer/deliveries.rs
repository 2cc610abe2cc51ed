//! A customer's frozen deliveries as its actor marks them: delivered (and charged), or not
//! delivered (a charge reversed), by the producer or, when a date's `delivered_at` passes,
//! by the charging duty for each delivery still pending. The delivery's new status, the
//! charge or reversal it posts and the account after it are one write with its event
//! (`delivery.updated`), so that a delivery is charged once whatever stops when: asked
//! again, the actor finds the status already written and posts nothing.
//!
//! Must not touch: HTTP status codes, which dates are frozen (the service asks only for
//! those), the rules of a posting (the domain's `account` and `delivery_mark`).

use super::{ChangeError, CustomerState, Handoff};
use crate::clock::unix_now;
use crate::domain::account::delivery_mark::{DeliveryMark, DeliveryStatus, MarkedDelivery};
use crate::domain::account::BEYOND_THE_LEDGER;
use crate::domain::day::Day;
use crate::domain::fields::FieldErrors;
use crate::domain::ids::OrderId;
use crate::domain::money::Amount;
use crate::store::kinds::accounts::AccountWrite;

/// The message for a date the order has no frozen delivery on.
pub const NOT_A_DELIVERY: &str = "is not a delivery of this order";

/// A frozen delivery to mark.
pub struct MarkDelivery {
    /// The order.
    pub order_id: OrderId,
    /// The date, frozen.
    pub date: Day,
    /// The status and the note.
    pub mark: DeliveryMark,
    /// The charging duty's mark: only a delivery still pending is marked (one a producer
    /// marked already is left as it is).
    pub only_pending: bool,
}

/// A delivery after its mark, and whether anything was written.
#[derive(Debug, Clone)]
pub struct DeliveryMarked {
    /// The delivery as it is now.
    pub delivery: MarkedDelivery,
    /// Whether the mark changed anything (a mark already in force writes nothing).
    pub changed: bool,
}

impl CustomerState {
    /// Marks one of the customer's frozen deliveries; answered once durable, the customer
    /// published with its account if a charge or reversal moved it.
    pub(super) async fn mark_delivery(
        &mut self,
        request: MarkDelivery,
        handoff: &Handoff,
    ) -> Result<DeliveryMarked, ChangeError> {
        let webstore_id = &self.webstore.settings.id;
        let customer_id = self.customer.id;
        let record = self
            .store
            .frozen_delivery(webstore_id, request.date, request.order_id)?
            .filter(|record| record.customer_id == customer_id.0)
            .ok_or_else(|| ChangeError::Invalid(FieldErrors::single("date", NOT_A_DELIVERY)))?;
        let current = record.status();
        let price = Amount(record.price);
        let to = request.mark.status;
        let note = request.mark.note.or_else(|| record.note.clone());
        let unchanged = (request.only_pending && current != DeliveryStatus::Pending)
            || (current == to && note == record.note);
        if unchanged {
            return Ok(DeliveryMarked {
                delivery: MarkedDelivery {
                    order_id: request.order_id,
                    customer_id,
                    date: request.date,
                    status: current,
                    price,
                    note: record.note,
                    transaction: None,
                },
                changed: false,
            });
        }
        let now = unix_now();
        let posted = match current.posting_to(to, price, request.date, request.order_id) {
            Some(posting) => {
                let id = self.order_ids.take()?;
                let (account, transaction) = self
                    .customer
                    .account
                    .post(posting, id, now, self.webstore.balance_threshold)
                    .map_err(|_| {
                        ChangeError::Invalid(FieldErrors::single("status", BEYOND_THE_LEDGER))
                    })?;
                Some((account, transaction))
            }
            None => None,
        };
        let mut marked = record;
        marked.status = to.code();
        marked.note = note;
        let delivery = MarkedDelivery {
            order_id: request.order_id,
            customer_id,
            date: request.date,
            status: to,
            price,
            note: marked.note.clone(),
            transaction: posted.as_ref().map(|(_, transaction)| transaction.clone()),
        };
        let account = posted
            .as_ref()
            .map_or(&self.customer.account, |(account, _)| account)
            .clone();
        let event = self.events.delivery_updated(&self.webstore, &delivery)?;
        let write = AccountWrite {
            account: &account,
            transactions: delivery.transaction.as_slice(),
            payment: None,
            delivery: Some((request.date, request.order_id, &marked)),
            customer: None,
        };
        self.write_posting(write, Some(event), None, handoff)
            .await?;
        Ok(DeliveryMarked {
            delivery,
            changed: true,
        })
    }
}
