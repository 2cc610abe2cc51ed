//! Turns per idempotency key: requests that carry the same key (in one webstore) take turns,
//! so the first creates and the rest find its record and replay it. A [`Turn`] is a guard:
//! the next request's turn comes when it is dropped, wherever it has travelled (into a
//! customer actor's mailbox with the order it guards), and a request dropped while waiting
//! for its turn leaves nothing behind. A key's record is the store's to find and to judge
//! (its time to live included): this module asks for the live one and reads nothing else of
//! the store. Must not touch: the store's records and keys, HTTP.

use std::future::Future;
use std::sync::Arc;

use dashmap::DashMap;
use tokio::sync::{Mutex, OwnedMutexGuard};

use crate::clock::unix_now;
use crate::domain::catalogue::Webstore;
use crate::domain::catalogue::WebstoreIdx;
use crate::domain::fields::FieldErrors;
use crate::domain::idempotency::{Pending, RecordedResponse, Resource, ResourceKind, KEY_REUSED};
use crate::store::Store;

use super::{KeyedWrite, ServiceError};

type Key = (WebstoreIdx, String);

/// The longest an idempotent replay waits for the store's durability: below a group
/// primary's read lease (1.5 s), so that a replay at a cut is answered as reads are.
pub const REPLAY_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// The lock of one key, and how many requests hold or wait for it. `users` only changes
/// under the map's entry lock, so the entry goes exactly when its last user does.
#[derive(Default)]
struct KeyLock {
    mutex: Arc<Mutex<()>>,
    users: usize,
}

/// The keys with a request in progress, and how long a record counts.
pub struct IdempotencyGate {
    keys: Arc<DashMap<Key, KeyLock>>,
    ttl_secs: u64,
}

/// One request's use of a key; the entry is removed when its last user goes.
struct KeyUser {
    keys: Arc<DashMap<Key, KeyLock>>,
    key: Key,
}

impl Drop for KeyUser {
    fn drop(&mut self) {
        self.keys.remove_if_mut(&self.key, |_, lock| {
            lock.users -= 1;
            lock.users == 0
        });
    }
}

/// A request's turn with its idempotency key: no other request with the key proceeds until
/// this is dropped.
pub struct Turn {
    // Field order is drop order: the lock is released before the entry is given up.
    _locked: OwnedMutexGuard<()>,
    _user: KeyUser,
}

impl IdempotencyGate {
    /// A gate under which records count for `ttl_secs` after they were written.
    pub fn new(ttl_secs: u64) -> IdempotencyGate {
        IdempotencyGate {
            keys: Arc::default(),
            ttl_secs,
        }
    }

    /// How long records count, in seconds.
    pub fn ttl_secs(&self) -> u64 {
        self.ttl_secs
    }

    /// Waits for the turn of `key` in `webstore`.
    pub async fn turn(&self, webstore: WebstoreIdx, key: &str) -> Turn {
        let key = (webstore, key.to_owned());
        let mutex = {
            let mut lock = self.keys.entry(key.clone()).or_default();
            lock.users += 1;
            lock.mutex.clone()
        };
        // From here the user is counted; if this future is dropped while waiting, the
        // guard's drop counts it out.
        let user = KeyUser {
            keys: self.keys.clone(),
            key,
        };
        let locked = mutex.lock_owned().await;
        Turn {
            _locked: locked,
            _user: user,
        }
    }

    /// Runs a keyed write (a create, a change) at most once per idempotency key: a request
    /// with a key waits for its turn, then replays the recorded response of an earlier
    /// request with the same key and body, refuses another body, or writes, holding its turn
    /// (which `write` may pass on to whoever writes the record) until the record is written.
    ///
    /// A record is judged by what it names, not by the endpoint the key came back on: the
    /// store writes a record just before what it created, so a crash between the two leaves
    /// a record of nothing. `exists` is asked whether the resource the record's `Location`
    /// names exists (given the record's time, for a change: whether the change it records
    /// is there), and a record of nothing counts as no record. A record of a resource of
    /// another kind than `kind` (a key first used for an order, now on a customer create, or
    /// the other way round) is another request's, refused like another body.
    pub async fn once<T, F, Fut, E, EFut>(
        &self,
        store: &Store,
        webstore: &Webstore,
        kind: ResourceKind,
        idempotency: Option<Pending<T>>,
        exists: E,
        write: F,
    ) -> Result<KeyedWrite<Arc<T>>, ServiceError>
    where
        F: FnOnce(Option<(Pending<T>, Turn)>) -> Fut,
        Fut: Future<Output = Result<KeyedWrite<Arc<T>>, ServiceError>>,
        E: FnOnce(Resource, i64) -> EFut,
        EFut: Future<Output = Result<bool, ServiceError>>,
    {
        let Some(pending) = idempotency else {
            return write(None).await;
        };
        let turn = self.turn(webstore.idx, pending.key.as_str()).await;
        let mut record = store.live_idempotency(
            &webstore.settings.id,
            pending.key.as_str(),
            self.ttl_secs,
            unix_now(),
        )?;
        let names = record
            .as_ref()
            .and_then(|r| r.location.as_deref())
            .and_then(Resource::from_location);
        if let (Some(created), Some(recorded_at)) = (names, record.as_ref().map(|r| r.created_at)) {
            if !exists(created, recorded_at).await? {
                record = None;
            }
        }
        let same_kind = names.is_none_or(|created| created.kind() == kind);
        match record {
            Some(record) if same_kind && record.body_sha256 == pending.body_sha256 => {
                // The first request may have been cut off after its write and before its
                // durability; never acknowledge what a crash could still take back. A replay
                // changes nothing and waits no longer than a read may: a log that does not
                // answer within REPLAY_WAIT (a stalled disk, a changelog cut off) is a 503,
                // nothing changed, within the read lease, not at the write's give-up.
                match tokio::time::timeout(REPLAY_WAIT, store.durable()).await {
                    Ok(durable) => durable?,
                    Err(_) => return Err(ServiceError::Busy),
                }
                Ok(KeyedWrite::Replayed(RecordedResponse {
                    status: record.status,
                    location: record.location,
                    body: record.body,
                }))
            }
            Some(_) => Err(ServiceError::Invalid(FieldErrors::single(
                "idempotency_key",
                KEY_REUSED,
            ))),
            None => write(Some((pending, turn))).await,
        }
    }

    /// Keys with a request in progress (for tests and diagnostics).
    pub fn keys_in_use(&self) -> usize {
        self.keys.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    #[tokio::test]
    async fn turns_come_in_order_and_leave_nothing_behind() {
        let gate = IdempotencyGate::new(86_400);
        let first = gate.turn(WebstoreIdx(0), "k").await;
        // A second request waits; dropped while waiting, it leaves the first alone.
        let mut waiting = Box::pin(gate.turn(WebstoreIdx(0), "k"));
        assert!((&mut waiting).now_or_never().is_none());
        drop(waiting);
        assert_eq!(gate.keys_in_use(), 1);
        // Another webstore's key of the same name is another key.
        let other = gate.turn(WebstoreIdx(1), "k").now_or_never();
        assert!(other.is_some());
        drop(other);
        drop(first);
        assert_eq!(gate.keys_in_use(), 0);
        let again = gate.turn(WebstoreIdx(0), "k").now_or_never();
        assert!(again.is_some(), "the key is free once its holder is gone");
        drop(again);
        assert_eq!(gate.keys_in_use(), 0);
    }
}
