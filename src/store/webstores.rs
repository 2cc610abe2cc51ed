//! Every kind of record of one webstore at once: which webstores hold the records an export
//! carries webstore by webstore (events, the events-pruned mark, webhook positions and
//! redelivery requests, sessions), and the removal of all of a webstore's records (its
//! customers' accounts, ledgers and payments among them) once it is released to another
//! shard. Must not touch: any one record's layout (each kind's).

use super::keys::webstore_prefix;
use super::kinds::{
    books, customers, deliveries, events, idempotency, sessions, webhook_positions,
};
use super::log::wal::LogEntry;
use super::snapshot::prefix_end;
use super::{Store, StoreError, WriteBatch};
use crate::store::pending::event_chunks;
use crate::store::pending::order_chunks;

impl Store {
    /// Removes everything of webstore `id` (its customers, their orders and accounts, its email, number
    /// and idempotency entries, its events and their events-pruned mark, its webhook
    /// webhook positions and redelivery requests) in logged batches of removals, each within
    /// the log's limit:
    /// what a shard does once it has released a webstore to another, so that nothing of it
    /// can be served or exported here by mistake. How many keys it removed.
    pub fn purge_webstore(&self, id: &str) -> Result<u64, StoreError> {
        let mut doomed: Vec<Vec<u8>> = Vec::new();
        let storage = &self.inner.storage;
        for customer in self.customer_ids(id)? {
            doomed.push(customers::customer_key(customer.0));
            storage.for_each(&order_chunks::orders_of(customer.0), &mut |key, _| {
                doomed.push(key.to_vec());
                true
            })?;
            doomed.extend(self.account_keys(customer.0)?);
        }
        for prefix in [
            customers::EMAIL,
            customers::NUMBER,
            idempotency::IDEMPOTENCY,
            event_chunks::EVENT,
            webhook_positions::WEBHOOK_POSITION,
            webhook_positions::REDELIVERY,
            deliveries::FROZEN,
            books::BOOKS,
        ] {
            storage.for_each(&webstore_prefix(prefix, id), &mut |key, _| {
                doomed.push(key.to_vec());
                true
            })?;
        }
        // Its producers' sessions (keyed by digest alone: found by the webstore they name).
        self.for_each_session(&mut |digest, record| {
            if record.webstore_id == id {
                doomed.push(sessions::session_key(&digest));
            }
            true
        })?;
        // The mark too (it lives among the meta keys, not under the webstore's prefixes):
        // it counts in where the webstore's numbering continues, and an import brings its
        // own.
        if storage.get(&events::events_pruned(id))?.is_some() {
            doomed.push(events::events_pruned(id));
        }
        for key in [
            deliveries::freeze_mark_key(id),
            deliveries::charge_mark_key(id),
        ] {
            if storage.get(&key)?.is_some() {
                doomed.push(key);
            }
        }
        let removed = doomed.len() as u64;
        let max_bytes = self.max_entry_bytes().unwrap_or(usize::MAX);
        let mut batch = WriteBatch::default();
        let mut bytes = 0;
        for key in doomed {
            let size = LogEntry::encoded_len(&key, &[]);
            if !batch.is_empty() && (batch.len() >= 1_000 || bytes + size > max_bytes) {
                self.remove(std::mem::take(&mut batch))?;
                bytes = 0;
            }
            bytes += size;
            batch.delete(key);
        }
        if !batch.is_empty() {
            self.remove(batch)?;
        }
        Ok(removed)
    }

    /// The ids of the webstores that have events, an events-pruned mark, webhook delivery
    /// records, redelivery requests or producer sessions in the store, in order (a
    /// whole-store export carries these webstore by webstore). One seek per webstore and
    /// prefix, not a read of every event.
    pub fn webstores_with_events(&self) -> Result<Vec<String>, StoreError> {
        let mut found = std::collections::BTreeSet::new();
        for prefix in [
            event_chunks::EVENT,
            webhook_positions::WEBHOOK_POSITION,
            webhook_positions::REDELIVERY,
            deliveries::FROZEN,
        ] {
            let end = prefix_end(&[prefix]);
            let mut from = vec![prefix];
            loop {
                let mut first = None;
                self.inner
                    .storage
                    .for_each_between(&from, end.as_deref(), &mut |key, _| {
                        first = Some(key.to_vec());
                        false
                    })?;
                let Some(key) = first else {
                    break;
                };
                // `prefix` + webstore id + 0 + the rest: a webstore id holds no 0 byte, so
                // the next webstore's keys start past `prefix` + id + 1.
                let Some(length) = key[1..].iter().position(|&byte| byte == 0) else {
                    // Not a key of this layout: go on right after it.
                    from = [key.as_slice(), &[0]].concat();
                    continue;
                };
                if let Ok(id) = std::str::from_utf8(&key[1..1 + length]) {
                    found.insert(id.to_owned());
                }
                match prefix_end(&key[..1 + length + 1]) {
                    Some(next) => from = next,
                    None => break,
                }
            }
        }
        self.inner
            .storage
            .for_each(events::EVENTS_PRUNED, &mut |key, _| {
                if let Ok(id) = std::str::from_utf8(&key[events::EVENTS_PRUNED.len()..]) {
                    found.insert(id.to_owned());
                }
                true
            })?;
        self.for_each_session(&mut |_, record| {
            found.insert(record.webstore_id);
            true
        })?;
        Ok(found.into_iter().collect())
    }
}
