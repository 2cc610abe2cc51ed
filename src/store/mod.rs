//! Persistence: the repository ([`Store`]) over three layers, each in its own module, with
//! arrows one way (docs/storage.md tells the write and read paths end to end):
//!
//! - [`log`]: the log that acknowledges. A change's writes are handed to it encoded, and its
//!   writer is answered once the log holds them durably (today a write-ahead log with group
//!   commit on the local disk; [`log::ChangeLog`] is all the store asks of a log).
//! - [`pending`]: the writes the log holds and the snapshot does not yet (a new order's
//!   record, until a checkpoint packs it into its customer's chunk), merged over the
//!   snapshot on every read: the one read path.
//! - [`snapshot`]: sled as a plain ordered key-value map, flushed behind the log at
//!   checkpoints; it knows nothing of records, chunks or the log.
//!
//! [`Store`] is what the registry and the customer actors use: it knows which keys a change
//! writes and which of them must be unique. Its reads and writes are split by kind of record
//! ([`kinds`]: customers, orders, idempotency records, events, webhook positions, sessions,
//! ownership), each kind owning its keys, its record and its part of `impl Store`, over a
//! small shared core: the key building blocks and metadata keys ([`keys`]), the record
//! envelope ([`codec`]), the single-key writes and record walks every kind goes through
//! (`entries`). This file opens the store (its [`mod@format`] first) and runs its life
//! (admitting writes, durability, close); what spans every kind of one webstore is in
//! `webstores`, the census in `census`, the repair after an unclean stop in [`repair`].
//! [`StoreError`] is this layer's one error type.
//!
//! Must not touch: actors, the registry's maps, HTTP.

mod census;
pub mod codec;
pub mod disk;
mod entries;
mod error;
pub mod expiry;
pub mod format;
pub mod frozen;
pub mod keys;
pub mod kinds;
pub mod log;
#[cfg(test)]
mod model_tests;
mod opening;
pub mod order_ids;
pub mod pending;
pub mod repair;
pub mod replica;
pub mod snapshot;
#[cfg(test)]
mod tests;
pub mod tracking;
pub mod unreadable;
mod webstores;

use crate::store::pending::order_chunks;
use std::path::Path;
use std::sync::{Arc, RwLock, RwLockReadGuard};

use disk::{DiskState, DiskWatch, Reserve};
use error::FatalHandler;
use kinds::customers;
use log::wal::LogEntry;
use log::ChangeLog;

pub use census::Census;
pub use entries::{EventWrite, RecordWrite};
pub use error::StoreError;
pub use kinds::customers::{add_customer_record, add_new_customer, LoadedCustomer};
pub use kinds::events::{add_event_record, add_events_pruned, event_write};
pub use kinds::idempotency::{add_idempotency_record, IdempotencyWrite};
pub use kinds::orders::{add_order, add_order_record};
pub use kinds::sessions::add_session_record;
pub use kinds::webhook_positions::add_webhook_position;
pub use log::{Durability, OnDurable, Written};
pub use pending::{PendingWrites, Storage};
pub use snapshot::{Entry, SledSnapshot, Snapshot, WriteBatch};

use crate::domain::ids::IdRange;

/// What `open` found.
#[derive(Debug, Clone, Copy)]
pub struct HighWater {
    /// Highest customer id stored in this host's id range, or one below the range's first.
    pub customer_id: u64,
    /// Highest order id reserved in this host's id range (every order id this host gave out
    /// is at most this), or one below the range's first.
    pub order_id: u64,
    /// Highest customer id stored, from any range (imported customers included), or 0.
    pub any_customer_id: u64,
    /// Whether the store holds any order.
    pub has_orders: bool,
}

/// boxsub's persistent state, shared by the registry and the customer actors.
#[derive(Clone)]
pub struct Store {
    inner: Arc<StoreInner>,
}

/// How a store is opened.
#[derive(Debug, Clone, Copy)]
pub struct StoreOptions {
    /// When writes are acknowledged.
    pub durability: Durability,
    /// Memory for the engine's page cache.
    pub cache_bytes: u64,
    /// Free space the data directory's filesystem must keep; writes are refused below it.
    pub reserve: Reserve,
}

struct StoreInner {
    storage: Arc<dyn Storage>,
    /// Called when a write fails inside the engine: its state can no longer be trusted.
    on_fatal: FatalHandler,
    /// The data directory's filesystem, when the store has one (tests may not).
    disk: Option<DiskWatch>,
    /// The log that acknowledges writes; `None` once closed. Read-locked by every write
    /// method (shared, never contended); write-locked only by `close`.
    log: RwLock<Option<Box<dyn ChangeLog>>>,
    /// What the writes of webstores being copied to another shard change.
    tracking: tracking::ChangeTracking,
    /// Webstores whose writes are refused (frozen for a move).
    frozen: frozen::FrozenWebstores,
    /// How many answered writes the last run's crash may have lost (see
    /// [`Store::lost_answers`]).
    lost_answers: u64,
    /// The records found unreadable since the start.
    unreadable: unreadable::UnreadableRecords,
}

/// A write method's admission ([`Store::open_for_writes`]): while it is held, `close` waits.
pub(crate) struct OpenForWrite<'a>(RwLockReadGuard<'a, Option<Box<dyn ChangeLog>>>);

impl OpenForWrite<'_> {
    fn log(&self) -> &dyn ChangeLog {
        &**self.0.as_ref().expect("admitted only while open")
    }

    /// An entry to record a change's writes in.
    fn entry(&self) -> LogEntry {
        LogEntry::new()
    }

    /// Whether the log makes writes durable (durability on), so that a new record may wait
    /// in the pending layer.
    fn is_logged(&self) -> bool {
        self.log().is_durable()
    }

    /// Refuses a change of `bytes` encoded bytes that the log can never take, before any of
    /// its writes is made (a replicated changelog's message limit).
    fn fits(&self, bytes: usize) -> Result<(), StoreError> {
        match self.log().max_entry_bytes() {
            Some(max) if bytes > max => Err(StoreError::TooLarge { bytes, max }),
            _ => Ok(()),
        }
    }

    /// Hands the log entry of writes just made to the log.
    fn commit(&self, entry: LogEntry) -> Result<Written, StoreError> {
        self.log().submit(entry.into_bytes(), None)
    }

    /// [`OpenForWrite::commit`], with `on_durable` to run once the writes are durable.
    fn commit_then(&self, entry: LogEntry, on_durable: OnDurable) -> Result<Written, StoreError> {
        self.log().submit(entry.into_bytes(), Some(on_durable))
    }
}

impl Store {
    /// Opens the store in `dir`, creating it when empty, and starts group commit and the
    /// watch over the directory's filesystem. Leftovers of an unfinished engine snapshot are
    /// removed first (and again if opening fails), so no failed start makes the next one
    /// fail; a failure says why and what to do.
    pub fn open(
        dir: &Path,
        options: StoreOptions,
        on_fatal: FatalHandler,
    ) -> Result<Store, StoreError> {
        let (storage, disk) = Store::open_storage(dir, options)?;
        let disk_at_open = disk.state();
        Store::with_storage(storage, dir, options.durability, on_fatal, Some(disk))
            .map_err(|error| opening::explain_start(dir, error, disk_at_open))
    }

    /// The pending layer over sled in `dir` (created when empty, its format checked and its
    /// snapshot leftovers removed), and the watch over the directory's filesystem: what
    /// [`Store::open`] and a replica ([`replica::Replica::open`]) run on.
    fn open_storage(
        dir: &Path,
        options: StoreOptions,
    ) -> Result<(Arc<dyn Storage>, DiskWatch), StoreError> {
        std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
            context: format!("creating data directory {}", dir.display()),
            source,
        })?;
        // Before anything in the directory is touched: a store of another format is left
        // exactly as it is.
        format::check_or_create(dir)?;
        opening::remove_snapshot_leftovers(dir)?;
        let disk = DiskWatch::start(dir, options.reserve).map_err(|source| StoreError::Io {
            context: "starting the disk watch thread".into(),
            source,
        })?;
        let snapshot = match SledSnapshot::open(dir, options.cache_bytes) {
            Ok(snapshot) => snapshot,
            Err(error) => {
                let _ = opening::remove_snapshot_leftovers(dir);
                return Err(opening::explain(dir, error, disk.state()));
            }
        };
        let storage: Arc<dyn Storage> = Arc::new(PendingWrites::over(Arc::new(snapshot)));
        Store::check_format(&*storage, dir)?;
        Ok((storage, disk))
    }

    /// Refuses a store of another format; records the current one in a new store.
    fn check_format(storage: &dyn Storage, dir: &Path) -> Result<bool, StoreError> {
        match storage.get(keys::FORMAT_KEY)? {
            Some(found) if found == format::CURRENT.as_bytes() => Ok(false),
            Some(found) => Err(format::refused(dir, &String::from_utf8_lossy(&found))),
            None => {
                format::record_if_missing(dir)?;
                // A single write, not a batch: see `Snapshot::apply` on what a batch costs.
                storage.put(keys::FORMAT_KEY, format::CURRENT.as_bytes().to_vec())?;
                storage.sync()?;
                Ok(true)
            }
        }
    }

    /// A store over `storage` that hands its writes to `log` (a replica promoted to take
    /// writes: [`replica::Replica::promote`]).
    fn with_log(
        storage: Arc<dyn Storage>,
        log: Box<dyn ChangeLog>,
        on_fatal: FatalHandler,
        disk: Option<DiskWatch>,
    ) -> Store {
        Store {
            inner: Arc::new(StoreInner {
                storage,
                on_fatal,
                disk,
                log: RwLock::new(Some(log)),
                tracking: tracking::ChangeTracking::default(),
                frozen: frozen::FrozenWebstores::default(),
                lost_answers: 0,
                unreadable: unreadable::UnreadableRecords::default(),
            }),
        }
    }

    /// A store over any [`Storage`] (production: [`PendingWrites`] over a [`SledSnapshot`];
    /// tests inject faults by wrapping it or by putting a [`Snapshot`] of their own under it),
    /// with an optional watch over its directory's filesystem.
    pub fn with_storage(
        storage: Arc<dyn Storage>,
        dir: &Path,
        durability: Durability,
        on_fatal: FatalHandler,
        disk: Option<DiskWatch>,
    ) -> Result<Store, StoreError> {
        let fresh = Store::check_format(&*storage, dir)?;
        // The marker goes before anything else is written, durably: a crash from here on
        // must find it gone.
        let closed_cleanly = match storage.get(keys::CLEAN_SHUTDOWN_KEY)? {
            Some(marker) => storage.remove_if(keys::CLEAN_SHUTDOWN_KEY, &marker)?,
            None => false,
        };
        // Answered before synced: every stop without a close may have lost answered writes
        // (their ids must never be given again), and a run that then wrote nothing durable
        // leaves the stored ids where they were; so the ids continue past as many lost writes
        // as there were such stops, at every open from then on.
        let crashes = match storage.get(keys::ANSWERED_BEFORE_SYNC)? {
            Some(bytes) => {
                let before = <[u8; 8]>::try_from(bytes.as_slice()).map_or(1, u64::from_be_bytes);
                let crashes = before + u64::from(!closed_cleanly);
                if crashes != before {
                    storage.put(keys::ANSWERED_BEFORE_SYNC, crashes.to_be_bytes().to_vec())?;
                }
                crashes
            }
            None if matches!(durability, Durability::Background { .. }) => {
                storage.put(keys::ANSWERED_BEFORE_SYNC, 0u64.to_be_bytes().to_vec())?;
                0
            }
            None => 0,
        };
        let lost_answers = crashes.saturating_mul(log::commit::MOST_ANSWERED_UNSYNCED);
        storage.sync()?;
        let log = log::open(&storage, dir, durability, &on_fatal)?;
        // From here on a failure to reach the disk, even a read's, stops the process: opening
        // reports its own failures (a start on a full disk fails cleanly).
        storage.on_io_failure(on_fatal.clone());
        let mut store = Store::with_log(storage, log, on_fatal, disk);
        if let Some(inner) = Arc::get_mut(&mut store.inner) {
            inner.lost_answers = lost_answers;
        }
        if lost_answers > 0 {
            tracing::warn!(
                skipped = lost_answers,
                crashes,
                "the store ran with durability off and stopped without a close: its ids, \
                 customer numbers and event numbers continue past the writes such stops may \
                 have lost"
            );
        }
        if !closed_cleanly && !fresh {
            let started = std::time::Instant::now();
            let repaired = store.repair_customer_indexes()?;
            tracing::info!(
                customers = repaired.customers,
                removed = repaired.removed,
                millis = started.elapsed().as_millis() as u64,
                "the store was not closed cleanly: number entries of unwritten customers removed"
            );
        }
        Ok(store)
    }

    /// `outcome` of a write, reporting an engine or I/O failure as fatal: after a write
    /// failed in sled (a full disk, an I/O error), sled refuses every later write and its
    /// memory may hold what never reached the disk, so the process must stop rather than go
    /// on answering from it. A refusal or a lost unique key is no such failure.
    fn written(&self, outcome: Result<(), StoreError>) -> Result<(), StoreError> {
        if let Err(error @ (StoreError::Engine { .. } | StoreError::Io { .. })) = &outcome {
            (self.inner.on_fatal)(error);
        }
        outcome
    }

    /// [`Store::written`] for a write that says whether it changed anything.
    fn written_bool(&self, outcome: Result<bool, StoreError>) -> Result<bool, StoreError> {
        match outcome {
            Ok(changed) => Ok(changed),
            Err(error) => self.written(Err(error)).map(|()| false),
        }
    }

    /// Admits one write method: refused once the store is closed, or (see
    /// [`Store::writable`]) while the disk does not take writes. The write holds the guard
    /// across its single-key writes and its submission to group commit, so that `close`
    /// waits for writes under way and no write lands after the clean-shutdown marker: a store
    /// with the marker must hold no half-made customer, as a start after it skips the repair.
    fn open_for_writes(&self) -> Result<OpenForWrite<'_>, StoreError> {
        let open = self.open_even_if_refused()?;
        self.writable()?;
        Ok(open)
    }

    /// [`Store::open_for_writes`] for removals, which give space back and so go on while
    /// the disk refuses writes.
    fn open_even_if_refused(&self) -> Result<OpenForWrite<'_>, StoreError> {
        let log = self.log();
        if log.is_none() {
            return Err(StoreError::Closed);
        }
        Ok(OpenForWrite(log))
    }

    /// `Err(Refused)` while the disk is nearly full or the directory does not take writes.
    /// Every write checks this first; callers may check it early to spare work.
    pub fn writable(&self) -> Result<(), StoreError> {
        match &self.inner.disk {
            Some(disk) => disk.writable().map_err(StoreError::Refused),
            None => Ok(()),
        }
    }

    /// How far past the stored highest its ids and numbers (customer and order ids, each
    /// webstore's customer numbers and event numbers) continue: for a store that ran with
    /// durability off, as many answered writes as its stops without a close may each have
    /// lost (`log::commit::MOST_ANSWERED_UNSYNCED` a stop), so that an id or number answered
    /// to a client, or shown to a reader, is never given to another record; else 0.
    pub fn lost_answers(&self) -> u64 {
        self.inner.lost_answers
    }

    /// The records found unreadable since the start.
    pub fn unreadable(&self) -> &unreadable::UnreadableRecords {
        &self.inner.unreadable
    }

    /// What the writes of webstores being copied to another shard change (a move's
    /// catch-up reads it).
    pub fn tracking(&self) -> &tracking::ChangeTracking {
        &self.inner.tracking
    }

    /// The webstores whose writes the store refuses (frozen for a move).
    pub fn frozen(&self) -> &frozen::FrozenWebstores {
        &self.inner.frozen
    }

    /// Admits a write of webstore `id`'s records ([`Store::open_for_writes`]), refused while
    /// the webstore is frozen ([`StoreError::Frozen`]). The freeze is looked at once the
    /// write is admitted: a freeze sets it and then waits for every admitted write
    /// ([`Store::barrier_after_visible_writes`]), so a write either is waited for or sees
    /// the freeze, never slips past it.
    fn open_for_webstore(&self, id: &str) -> Result<OpenForWrite<'_>, StoreError> {
        let open = self.open_for_writes()?;
        self.not_frozen(id)?;
        Ok(open)
    }

    /// [`Store::open_for_webstore`] for writes that go on while the disk refuses writes
    /// ([`Store::open_even_if_refused`]).
    fn open_for_webstore_even_if_refused(&self, id: &str) -> Result<OpenForWrite<'_>, StoreError> {
        let open = self.open_even_if_refused()?;
        self.not_frozen(id)?;
        Ok(open)
    }

    /// `Err(Frozen)` if webstore `id`'s writes are frozen.
    fn not_frozen(&self, id: &str) -> Result<(), StoreError> {
        if self.inner.frozen.holds(id) {
            return Err(StoreError::Frozen);
        }
        Ok(())
    }

    /// Holds every write out of the store until the guard is dropped, as a freeze's barrier
    /// does for a moment (tests of the fence's order).
    #[cfg(test)]
    pub(crate) fn hold_admissions(
        &self,
    ) -> std::sync::RwLockWriteGuard<'_, Option<Box<dyn ChangeLog>>> {
        self.inner
            .log
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The largest change its log takes, if it has a limit (a replicated group's changelog):
    /// what writers of batches (imports, purges) cut them to.
    pub fn max_entry_bytes(&self) -> Option<usize> {
        self.log().as_ref().and_then(|log| log.max_entry_bytes())
    }

    /// How many handles on the store exist (a deposed primary waits for its own to be the
    /// last before it rebuilds the copy under it).
    pub fn handles(&self) -> usize {
        Arc::strong_count(&self.inner)
    }

    /// Bytes the store's files take on disk.
    pub fn size_on_disk(&self) -> Result<u64, StoreError> {
        self.inner.storage.size_on_disk()
    }

    /// The last check of the data directory's filesystem, if it is watched.
    pub fn disk(&self) -> Option<DiskState> {
        self.inner.disk.as_ref().map(DiskWatch::state)
    }

    /// Completes when every write made before the call is durable (at once without
    /// durability).
    pub async fn durable(&self) -> Result<(), StoreError> {
        self.barrier()?.durable().await
    }

    /// A wait that completes when every write made before the call is durable, submitted
    /// at once (whether or not the disk refuses writes) and awaited later.
    pub fn barrier(&self) -> Result<Written, StoreError> {
        match self.log().as_ref() {
            None => Err(StoreError::NotDurable),
            Some(log) => log.submit(Vec::new(), None),
        }
    }

    /// A wait that completes once every write that readers can see now is durable (what an
    /// online backup waits for before it counts: read committed). A write shows in the
    /// store before it is handed to the log, under its admission; taking the admission lock
    /// for writing waits for the writes under way to be handed over (a moment: none waits
    /// for anything while admitted), then the wait is submitted behind them.
    pub fn barrier_after_visible_writes(&self) -> Result<Written, StoreError> {
        let log = self
            .inner
            .log
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match log.as_ref() {
            None => Err(StoreError::NotDurable),
            Some(log) => log.submit(Vec::new(), None),
        }
    }

    /// The log, `None` once closed. Read-locked, shared and never contended but by
    /// `close` (and, for a moment, by an online backup's last wait).
    fn log(&self) -> RwLockReadGuard<'_, Option<Box<dyn ChangeLog>>> {
        self.inner
            .log
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Makes everything durable and stops group commit and checkpoints (at shutdown). Waits
    /// for the write methods under way; every write after it is refused with
    /// [`StoreError::Closed`].
    pub fn close(&self) -> Result<(), StoreError> {
        let log = self
            .inner
            .log
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        match log {
            Some(mut log) => log.close(&*self.inner.storage)?,
            None => self.inner.storage.sync()?,
        }
        // Last, once everything else is on disk (see `keys::CLEAN_SHUTDOWN_KEY`).
        self.inner
            .storage
            .put(keys::CLEAN_SHUTDOWN_KEY, b"1".to_vec())?;
        self.inner.storage.sync()
    }

    /// Records `range` as the id range this store's node gives out ids in, at its first
    /// start; refuses a later start with another (every shard keeps its own range for good,
    /// so that ids never collide across shards).
    pub fn claim_id_range(&self, range: IdRange) -> Result<(), StoreError> {
        let storage = &self.inner.storage;
        let wanted = range.number().to_be_bytes();
        match storage.get(keys::ID_RANGE)? {
            Some(recorded) if recorded == wanted => Ok(()),
            Some(recorded) => {
                let recorded = <[u8; 2]>::try_from(recorded.as_slice())
                    .map(u16::from_be_bytes)
                    .map_or_else(|_| "an unreadable one".to_owned(), |n| n.to_string());
                Err(StoreError::CannotOpen {
                    path: String::new(),
                    reason: format!(
                        "this store gives out ids in id range {recorded}, and was started with \
                         --id-range {}",
                        range.number()
                    ),
                    remedy: format!(
                        "start it with --id-range {recorded}: a data directory keeps its range \
                         for good, so that ids never collide across hosts"
                    ),
                })
            }
            None => {
                storage.put(keys::ID_RANGE, wanted.to_vec())?;
                storage.sync()
            }
        }
    }

    /// The highest ids in use, so that the sequences of this host's id `range` continue
    /// without reuse. Refused when the store has given out ids above the range (it ran with a
    /// higher `--id-range`): ids must keep increasing.
    pub fn high_water(&self, range: IdRange) -> Result<HighWater, StoreError> {
        let storage = &self.inner.storage;
        let last_id = |prefix: u8| -> Result<u64, StoreError> {
            Ok(storage
                .last(&[prefix])?
                .and_then(|(key, _)| keys::trailing_id(&key))
                .unwrap_or(0))
        };
        let last_customer_in_range = storage
            .last_between(
                &customers::customer_key(range.first()),
                Some(&customers::customer_key(range.end())),
            )?
            .and_then(|(key, _)| keys::trailing_id(&key))
            .unwrap_or(range.first() - 1);
        let reserved = storage
            .last(keys::ORDER_IDS_RESERVED)?
            .and_then(|(key, _)| keys::reserved_through(&key))
            .unwrap_or(0);
        if reserved >= range.end() {
            return Err(StoreError::CannotOpen {
                path: String::new(),
                reason: format!(
                    "this store has given out order ids up to {reserved}, above id range {} \
                     (ids {} to {})",
                    range.number(),
                    range.first(),
                    range.end() - 1
                ),
                remedy: format!(
                    "start it with the --id-range it ran with before (at least {})",
                    reserved / IdRange::SPAN
                ),
            });
        }
        // Past what a crash may have lost, within the range (the order ids of as many orders
        // and a block whose reservation went with them).
        let lost = self.inner.lost_answers;
        let order_lost = if lost > 0 { lost + order_ids::BLOCK } else { 0 };
        let within = |id: u64, skip: u64| id.saturating_add(skip).min(range.end() - 1).max(id);
        Ok(HighWater {
            customer_id: within(last_customer_in_range, lost),
            order_id: within(reserved.max(range.first() - 1), order_lost),
            any_customer_id: last_id(customers::CUSTOMER)?,
            has_orders: storage.last(&[order_chunks::ORDER])?.is_some(),
        })
    }

    /// A store in `dir` whose writes are acknowledged by `log` alone (as a group's primary's
    /// are by the changelog): unit tests that hold or fail the log's syncs.
    #[cfg(test)]
    pub(crate) fn over_log_for_test(dir: &Path, log: impl log::commit::Log) -> Store {
        let options = StoreOptions {
            durability: Durability::Sync {
                commit_interval: std::time::Duration::ZERO,
            },
            cache_bytes: 1 << 20,
            reserve: Reserve::Bytes(0),
        };
        let (storage, disk) = Store::open_storage(dir, options).expect("the store opens");
        let on_fatal: FatalHandler = Arc::new(|_: &StoreError| {});
        let remote = log::remote::RemoteLog::start(
            storage.clone(),
            log,
            on_fatal.clone(),
            std::time::Duration::ZERO,
        )
        .expect("group commit starts");
        Store::with_log(storage, Box::new(remote), on_fatal, Some(disk))
    }

    /// A durable store in `dir` with a small cache, no free-space reserve and no fatal
    /// handler (unit tests).
    #[cfg(test)]
    pub(crate) fn open_for_test(dir: &Path) -> Store {
        Store::open_for_test_with(
            dir,
            Durability::Sync {
                commit_interval: std::time::Duration::ZERO,
            },
        )
    }

    /// [`Store::open_for_test`] with `durability`. sled releases its lock on the directory
    /// when its last I/O task ends, which can come just after a close returns; a test that
    /// reopens at once in the same process tries again for a while.
    #[cfg(test)]
    pub(crate) fn open_for_test_with(dir: &Path, durability: Durability) -> Store {
        let options = StoreOptions {
            durability,
            cache_bytes: 1 << 20,
            reserve: Reserve::Bytes(0),
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            match Store::open(dir, options, Arc::new(|_: &StoreError| {})) {
                Ok(store) => return store,
                Err(StoreError::CannotOpen { reason, .. })
                    if reason.contains("another process")
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(error) => panic!("the store opens: {error}"),
            }
        }
    }
}
