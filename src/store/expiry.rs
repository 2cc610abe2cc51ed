//! Expiring idempotency records: what counts as a key's live record (one within its time to
//! live, swept or not), and the sweep. One sweep step reads a small batch of records after a
//! cursor and removes those older than the time to live, each with a compare-and-swap, so
//! a record a request has just replaced with a new one is never removed, and no write waits
//! behind a sweep (single-key removals take no batch lock). Removals need not be durable,
//! and skip the write-ahead log: a record a crash brings back (sled had not stored the
//! removal, or a replay of the log set the record again) is expired, so it counts as no
//! record, and the next pass sweeps it again.
//! Must not touch: anything but the `i` records.

use super::codec::decode;
use super::kinds::idempotency::IdempotencyRecord;
use super::snapshot::prefix_end;
use super::{Store, StoreError};
use crate::store::kinds::idempotency;

/// What one sweep step did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepStep {
    /// Records read.
    pub examined: usize,
    /// Records removed.
    pub removed: usize,
    /// Where the next step starts; `None` when this step reached the last record.
    pub next: Option<Vec<u8>>,
}

/// Whether a record created at `created_at` (Unix seconds) has outlived `ttl_secs` at `now`.
fn expired(created_at: i64, ttl_secs: u64, now: i64) -> bool {
    let ttl = i64::try_from(ttl_secs).unwrap_or(i64::MAX);
    now.saturating_sub(created_at) >= ttl
}

impl Store {
    /// The live record of idempotency key `key` in `webstore_id` at `now` (Unix seconds):
    /// its last record, unless that has outlived `ttl_secs`. A record past its time to live
    /// is no record, whether or not a sweep has removed it yet.
    pub fn live_idempotency(
        &self,
        webstore_id: &str,
        key: &str,
        ttl_secs: u64,
        now: i64,
    ) -> Result<Option<IdempotencyRecord>, StoreError> {
        Ok(self
            .idempotency(webstore_id, key)?
            .filter(|record| !expired(record.created_at, ttl_secs, now)))
    }

    /// Reads up to `batch` idempotency records from `from` (the start without one) and
    /// removes those expired at `now`.
    pub fn sweep_idempotency(
        &self,
        from: Option<&[u8]>,
        batch: usize,
        ttl_secs: u64,
        now: i64,
    ) -> Result<SweepStep, StoreError> {
        let prefix = [idempotency::IDEMPOTENCY];
        let end = prefix_end(&prefix);
        let mut step = SweepStep::default();
        let mut doomed = Vec::new();
        let mut last_key = None;
        self.inner.storage.for_each_between(
            from.unwrap_or(&prefix),
            end.as_deref(),
            &mut |key, value| {
                step.examined += 1;
                // An unreadable record is left for `--verify-store` to report.
                if let Ok(record) = decode::<IdempotencyRecord>(value) {
                    if expired(record.created_at, ttl_secs, now) {
                        doomed.push((key.to_vec(), value.to_vec()));
                    }
                }
                last_key = Some(key.to_vec());
                step.examined < batch
            },
        )?;
        for (key, value) in doomed {
            let _open = self.open_for_writes()?;
            let removed = self.written_bool(self.inner.storage.remove_if(&key, &value))?;
            step.removed += usize::from(removed);
        }
        step.next = match last_key {
            Some(mut key) if step.examined >= batch => {
                // The smallest key after the last one read.
                key.push(0);
                Some(key)
            }
            _ => None,
        };
        Ok(step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::codec::encode;
    use crate::store::{add_idempotency_record, WriteBatch};

    fn open(dir: &std::path::Path) -> Store {
        Store::open_for_test(dir)
    }

    fn record(created_at: i64) -> IdempotencyRecord {
        IdempotencyRecord {
            body_sha256: vec![1; 32],
            status: 201,
            location: None,
            body: b"{}".to_vec(),
            created_at,
        }
    }

    #[test]
    fn a_sweep_in_small_batches_removes_exactly_the_expired_records() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let mut batch = WriteBatch::default();
        for n in 0..50 {
            // Even keys are old, odd ones fresh.
            let created_at = if n % 2 == 0 { 1_000 } else { 5_000 };
            add_idempotency_record(&mut batch, "shop", &format!("k{n:02}"), &record(created_at));
        }
        store.apply(batch).unwrap();

        let (mut cursor, mut removed, mut steps) = (None, 0, 0);
        loop {
            let step = store
                .sweep_idempotency(cursor.as_deref(), 7, 3_600, 5_000)
                .unwrap();
            removed += step.removed;
            steps += 1;
            match step.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }

        assert_eq!(removed, 25);
        assert!(steps >= 50 / 7, "went in batches: {steps} steps");
        for n in 0..50 {
            let kept = store.idempotency("shop", &format!("k{n:02}")).unwrap();
            assert_eq!(kept.is_some(), n % 2 == 1, "k{n:02}");
        }
    }

    #[test]
    fn a_record_replaced_since_it_was_read_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let key = idempotency::idempotency_version("shop", "k", 1);
        let old = encode(&record(1_000));
        store.inner.storage.put(&key, old.clone()).unwrap();
        // A new request took the key again after the sweep read the old record.
        store
            .inner
            .storage
            .put(&key, encode(&record(9_000)))
            .unwrap();
        assert!(!store.inner.storage.remove_if(&key, &old).unwrap());
        assert_eq!(store.idempotency("shop", "k").unwrap(), Some(record(9_000)));
    }

    #[test]
    fn a_key_s_live_record_is_its_last_within_the_time_to_live_swept_or_not() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let key = idempotency::idempotency_version("shop", "k", 1);
        store
            .inner
            .storage
            .put(&key, encode(&record(1_000)))
            .unwrap();
        let live = |now| store.live_idempotency("shop", "k", 60, now).unwrap();
        assert_eq!(live(1_059), Some(record(1_000)));
        assert_eq!(live(1_060), None, "expired, though not swept");
        assert!(store.idempotency("shop", "k").unwrap().is_some());
        assert_eq!(
            store.live_idempotency("shop", "other", 60, 1_000).unwrap(),
            None
        );
    }

    #[test]
    fn a_record_expires_once_its_time_to_live_has_passed() {
        assert!(!expired(1_000, 60, 1_059));
        assert!(expired(1_000, 60, 1_060));
        assert!(expired(1_000, 0, 1_000));
        assert!(!expired(1_000, u64::MAX, i64::MAX));
        // A clock that went back keeps the record.
        assert!(!expired(1_000, 60, 900));
    }
}
