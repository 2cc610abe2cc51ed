//! The registry: the directory of customer actors and the secondary indexes that find them —
//! email → customer per webstore (case-folded) and order → customer — plus the id sequences.
//!
//! Invariants: an email key maps to the customer whose current email folds to it, or to a
//! customer whose create or email change is in progress; every order id in the order index
//! belongs to the customer it maps to. Claims use the entry API, so "is it free?" and "take it"
//! are one step and exactly one of many concurrent claimants wins.
//!
//! Methods are synchronous and never hold a map guard beyond their own body, so no guard can
//! live across an `.await` or an actor call. Must not touch: HTTP, actor messages, storage.

use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};

use dashmap::mapref::entry::Entry;
use dashmap::DashMap;
use ractor::ActorRef;

use crate::actors::customer::CustomerMsg;
use crate::domain::catalogue::WebstoreIdx;
use crate::domain::ids::{CustomerId, IdSequence, OrderId};

/// Another customer of the webstore holds the email.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmailTaken;

/// A customer's actor and webstore.
#[derive(Clone)]
struct CustomerEntry {
    webstore: WebstoreIdx,
    actor: ActorRef<CustomerMsg>,
}

/// One webstore's indexes.
struct WebstoreIndex {
    /// Folded email → customer.
    emails: DashMap<String, CustomerId>,
    /// Customer ids in order, for paginated lists. Held only to insert one id or to copy one
    /// page of ids out; order creation never touches it.
    members: RwLock<BTreeSet<CustomerId>>,
    /// Customer numbers within the webstore.
    numbers: IdSequence,
}

/// The directory of customer actors and its indexes.
pub struct Registry {
    customers: DashMap<CustomerId, CustomerEntry>,
    orders: DashMap<OrderId, CustomerId>,
    webstores: Vec<WebstoreIndex>,
    customer_ids: IdSequence,
    order_ids: Arc<IdSequence>,
}

impl Registry {
    /// An empty registry for `webstore_count` webstores.
    pub fn new(webstore_count: usize) -> Registry {
        Registry {
            customers: DashMap::new(),
            orders: DashMap::new(),
            webstores: (0..webstore_count)
                .map(|_| WebstoreIndex {
                    emails: DashMap::new(),
                    members: RwLock::new(BTreeSet::new()),
                    numbers: IdSequence::starting_at(1),
                })
                .collect(),
            customer_ids: IdSequence::starting_at(1),
            order_ids: Arc::new(IdSequence::starting_at(1)),
        }
    }

    /// The sequence order ids come from; customer actors take from it.
    pub fn order_ids(&self) -> Arc<IdSequence> {
        self.order_ids.clone()
    }

    fn index(&self, webstore: WebstoreIdx) -> &WebstoreIndex {
        &self.webstores[webstore.0 as usize]
    }

    /// Claims a free email for a new customer and gives it an id and a customer number.
    pub fn claim_email_for_new_customer(
        &self,
        webstore: WebstoreIdx,
        email_key: String,
    ) -> Result<(CustomerId, u64), EmailTaken> {
        let index = self.index(webstore);
        match index.emails.entry(email_key) {
            Entry::Occupied(_) => Err(EmailTaken),
            Entry::Vacant(vacant) => {
                let id = CustomerId(self.customer_ids.take());
                vacant.insert(id);
                Ok((id, index.numbers.take()))
            }
        }
    }

    /// Claims an email for an existing customer: `Ok(true)` when newly claimed, `Ok(false)`
    /// when the customer already holds it.
    pub fn claim_email(
        &self,
        webstore: WebstoreIdx,
        email_key: String,
        owner: CustomerId,
    ) -> Result<bool, EmailTaken> {
        match self.index(webstore).emails.entry(email_key) {
            Entry::Occupied(held) if *held.get() == owner => Ok(false),
            Entry::Occupied(_) => Err(EmailTaken),
            Entry::Vacant(vacant) => {
                vacant.insert(owner);
                Ok(true)
            }
        }
    }

    /// Frees an email, but only if `owner` holds it.
    pub fn release_email(&self, webstore: WebstoreIdx, email_key: &str, owner: CustomerId) {
        self.index(webstore)
            .emails
            .remove_if(email_key, |_, holder| *holder == owner);
    }

    /// The customer holding a folded email, if any.
    pub fn email_owner(&self, webstore: WebstoreIdx, email_key: &str) -> Option<CustomerId> {
        self.index(webstore)
            .emails
            .get(email_key)
            .map(|holder| *holder)
    }

    /// Makes a new customer's actor findable.
    pub fn register_customer(
        &self,
        id: CustomerId,
        webstore: WebstoreIdx,
        actor: ActorRef<CustomerMsg>,
    ) {
        self.customers.insert(id, CustomerEntry { webstore, actor });
        self.index(webstore)
            .members
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(id);
    }

    /// The actor of customer `id` if it belongs to `webstore`; another webstore's customer is
    /// as absent as one that never existed.
    pub fn customer(&self, webstore: WebstoreIdx, id: CustomerId) -> Option<ActorRef<CustomerMsg>> {
        self.customers
            .get(&id)
            .filter(|entry| entry.webstore == webstore)
            .map(|entry| entry.actor.clone())
    }

    /// Records which customer owns a new order.
    pub fn record_order(&self, order: OrderId, owner: CustomerId) {
        self.orders.insert(order, owner);
    }

    /// The customer owning an order, in any webstore.
    pub fn order_owner(&self, order: OrderId) -> Option<CustomerId> {
        self.orders.get(&order).map(|owner| *owner)
    }

    /// Up to `limit` customer ids of a webstore from position `offset`, and how many it has.
    pub fn page_of_customers(
        &self,
        webstore: WebstoreIdx,
        offset: u64,
        limit: u64,
    ) -> (Vec<CustomerId>, u64) {
        let members = self
            .index(webstore)
            .members
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let total = members.len() as u64;
        let page = members
            .iter()
            .skip(usize::try_from(offset).unwrap_or(usize::MAX))
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .copied()
            .collect();
        (page, total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_claim_of_an_email_wins_across_threads() {
        let registry = Arc::new(Registry::new(2));
        let winners: usize = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..16)
                .map(|_| {
                    let registry = registry.clone();
                    scope.spawn(move || {
                        registry
                            .claim_email_for_new_customer(WebstoreIdx(0), "a@b.c".into())
                            .is_ok() as usize
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(winners, 1);
        assert!(
            registry
                .claim_email_for_new_customer(WebstoreIdx(1), "a@b.c".into())
                .is_ok(),
            "webstores have separate email spaces"
        );
    }

    #[test]
    fn release_only_frees_the_owners_claim() {
        let registry = Registry::new(1);
        let (owner, _) = registry
            .claim_email_for_new_customer(WebstoreIdx(0), "x@y.z".into())
            .unwrap();
        registry.release_email(WebstoreIdx(0), "x@y.z", CustomerId(owner.0 + 1));
        assert_eq!(registry.email_owner(WebstoreIdx(0), "x@y.z"), Some(owner));
        assert_eq!(
            registry.claim_email(WebstoreIdx(0), "x@y.z".into(), owner),
            Ok(false)
        );
        registry.release_email(WebstoreIdx(0), "x@y.z", owner);
        assert_eq!(registry.email_owner(WebstoreIdx(0), "x@y.z"), None);
    }
}
