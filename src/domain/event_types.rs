//! The types of events a webstore's writes make (`customer.created`, ...): their names in
//! events, in the feed's `type` filter and in the catalogue's webhook subscriptions.
//!
//! Must not touch: what an event holds or how it is stored (`crate::events`).

/// What an event tells of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventType {
    /// A customer was created.
    CustomerCreated,
    /// A customer was changed.
    CustomerUpdated,
    /// An order was created.
    OrderCreated,
    /// An order was changed (`PATCH`/`PUT /v1/orders/{id}`).
    OrderUpdated,
    /// A payment was recorded to a customer's account.
    PaymentCreated,
    /// A payment was reversed.
    PaymentReversed,
    /// A transaction was posted to an account by an adjustment.
    TransactionCreated,
    /// A frozen delivery's status changed: delivered (and charged) or not delivered.
    DeliveryUpdated,
}

impl EventType {
    /// Every type, in the order the documents list them.
    pub const ALL: [EventType; 8] = [
        EventType::CustomerCreated,
        EventType::CustomerUpdated,
        EventType::OrderCreated,
        EventType::OrderUpdated,
        EventType::PaymentCreated,
        EventType::PaymentReversed,
        EventType::TransactionCreated,
        EventType::DeliveryUpdated,
    ];

    /// Its name in events, feeds and the catalogue.
    pub fn name(self) -> &'static str {
        match self {
            EventType::CustomerCreated => "customer.created",
            EventType::CustomerUpdated => "customer.updated",
            EventType::OrderCreated => "order.created",
            EventType::OrderUpdated => "order.updated",
            EventType::PaymentCreated => "payment.created",
            EventType::PaymentReversed => "payment.reversed",
            EventType::TransactionCreated => "transaction.created",
            EventType::DeliveryUpdated => "delivery.updated",
        }
    }

    /// The type named `name`.
    pub fn parse(name: &str) -> Option<EventType> {
        EventType::ALL.into_iter().find(|kind| kind.name() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_is_named_and_read_back() {
        for kind in EventType::ALL {
            assert_eq!(EventType::parse(kind.name()), Some(kind));
        }
        assert_eq!(EventType::parse("order.deleted"), None);
    }
}
