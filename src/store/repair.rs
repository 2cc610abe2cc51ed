//! Puts the customer number entries right after a process stopped without closing the
//! store. A customer is written key by key, its record last (see [`super::keys`]): its email
//! entry, its number entry, then its record. sled recovers a prefix of its log, so a crash
//! can leave the first two without the record, never the record without them. An email entry
//! that names no record (or a record that holds another email) already counts for nothing
//! (`Store::email_owner` checks the records of the email's entries, one per customer that
//! has held it). A number entry naming no record would be listed, and its id given out again; so
//! every number entry whose customer has no record is removed (with a compare-and-swap), from
//! one pass over the record keys and one over the number entries, without decoding anything.
//!
//! Must not touch: orders, idempotency records, email entries.

use super::{keys, Store, StoreError};
use crate::store::kinds::customers;

/// What a repair found and did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Repaired {
    /// Customer records seen.
    pub customers: u64,
    /// Number entries that named no record, removed.
    pub removed: u64,
}

impl Store {
    /// Removes every number entry whose customer has no record.
    pub fn repair_customer_indexes(&self) -> Result<Repaired, StoreError> {
        let storage = &self.inner.storage;
        // Record keys come in id order, so the ids come sorted.
        let mut ids = Vec::new();
        storage.for_each(&[customers::CUSTOMER], &mut |key, _| {
            ids.extend(keys::trailing_id(key));
            true
        })?;
        let mut unneeded = Vec::new();
        storage.for_each(&[customers::NUMBER], &mut |key, value| {
            let named = keys::trailing_id(value);
            if named.is_none_or(|id| ids.binary_search(&id).is_err()) {
                unneeded.push((key.to_vec(), value.to_vec()));
            }
            true
        })?;
        let mut repaired = Repaired {
            customers: ids.len() as u64,
            removed: 0,
        };
        for (key, value) in unneeded {
            repaired.removed += u64::from(self.written_bool(storage.remove_if(&key, &value))?);
        }
        storage.sync()?;
        Ok(repaired)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::catalogue::Catalogue;
    use crate::domain::customer::{parse_customer, Customer, Mode};
    use crate::domain::ids::CustomerId;
    use crate::store::codec::encode;
    use crate::store::kinds::customers::CustomerRecord;
    use crate::store::{add_new_customer, WriteBatch};

    fn open(dir: &std::path::Path) -> Store {
        Store::open_for_test(dir)
    }

    fn customer(id: u64, number: u64, email: &str) -> Customer {
        let catalogue = Catalogue::demo(0);
        let webstore = &catalogue.webstores()[0];
        let body = serde_json::json!({
            "first_name": "Ann", "last_name": "Lee", "email": email,
            "delivery_service_id": 91,
            "address": {"address_1": "1 Road", "city": "London"}
        });
        let changes = parse_customer(body.as_object().unwrap(), webstore, Mode::Create).unwrap();
        Customer::create(CustomerId(id), webstore.idx, number, changes)
    }

    /// The writes of a new customer, in their order.
    fn writes(customer: &Customer) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut batch = WriteBatch::default();
        add_new_customer(&mut batch, customer, "fantastic-vege-people");
        batch
            .ops
            .into_iter()
            .map(|(key, value)| (key, value.unwrap()))
            .collect()
    }

    fn numbers(store: &Store) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut all = Vec::new();
        store
            .inner
            .storage
            .for_each(&[customers::NUMBER], &mut |key, value| {
                all.push((key.to_vec(), value.to_vec()));
                true
            })
            .unwrap();
        all
    }

    #[test]
    fn every_cut_of_a_create_or_an_email_change_is_put_right() {
        let ann = customer(1, 1, "ann@example.com");
        let moved = Customer {
            email: customer(1, 1, "ann.new@example.com").email,
            ..ann.clone()
        };
        let bob = customer(2, 2, "bob@example.com");
        let webstore_id = "fantastic-vege-people";
        let ann_id = 1u64.to_be_bytes().to_vec();
        // An email change as the store writes it: new entry, then record (the old entry
        // stays, naming nobody).
        let change = [
            (
                customers::email_holder_key(webstore_id, &moved.email.index_key(), 1),
                Some(ann_id.clone()),
            ),
            (
                customers::customer_key(1),
                Some(encode(&CustomerRecord::from_customer(&moved, webstore_id))),
            ),
        ];
        // Every prefix of Bob's create after Ann's, and of Ann's change after Bob's create:
        // what a crash can leave.
        let bob_writes = writes(&bob);
        for cut in 0..=bob_writes.len() + change.len() {
            let dir = tempfile::tempdir().unwrap();
            let store = open(dir.path());
            for (key, value) in writes(&ann) {
                store.inner.storage.put(&key, value).unwrap();
            }
            let mut plan: Vec<(Vec<u8>, Option<Vec<u8>>)> = bob_writes
                .iter()
                .map(|(key, value)| (key.clone(), Some(value.clone())))
                .collect();
            plan.extend(change.iter().cloned());
            for (key, value) in plan.into_iter().take(cut) {
                match value {
                    Some(value) => store.inner.storage.put(&key, value).unwrap(),
                    None => drop(store.inner.storage.remove_if(&key, &ann_id).unwrap()),
                }
            }

            let repaired = store.repair_customer_indexes().unwrap();

            // Assert: the entries are exactly those of the records present.
            let bob_created = cut >= bob_writes.len();
            let ann_moved = cut >= bob_writes.len() + 2;
            let mut expected = Vec::new();
            let ann_now = if ann_moved { &moved } else { &ann };
            let mut present = vec![ann_now];
            if bob_created {
                present.push(&bob);
            }
            for who in &present {
                let id = who.id.0.to_be_bytes().to_vec();
                expected.push((customers::number_key(webstore_id, who.number), id));
            }
            let found = numbers(&store);
            assert_eq!(found, expected, "cut after {cut} writes: {repaired:?}");
            let ids: Vec<CustomerId> = present.iter().map(|who| who.id).collect();
            assert_eq!(store.customer_ids(webstore_id).unwrap(), ids);
            // Every email answers for the record that holds it, and for nobody else.
            let owner = |email: &str| store.email_owner(webstore_id, email).unwrap();
            assert_eq!(owner(&ann_now.email.index_key()), Some(CustomerId(1)));
            let ann_then = if ann_moved { &ann } else { &moved };
            assert_eq!(owner(&ann_then.email.index_key()), None);
            assert_eq!(
                owner("bob@example.com"),
                bob_created.then_some(CustomerId(2))
            );
            assert_eq!(
                store.repair_customer_indexes().unwrap(),
                Repaired {
                    customers: repaired.customers,
                    removed: 0,
                },
                "a second repair finds nothing to do"
            );
        }
    }
}
