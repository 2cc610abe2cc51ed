//! Persistence: boxsub's state in one sled tree (layout in [`keys`]), records encoded as in
//! [`codec`], writes made durable by group commit ([`commit`]) appending them to a
//! write-ahead log ([`wal`]), with sled flushed behind the log (`checkpoint`) and the log's
//! tail replayed into it at open. [`Store`] is the repository
//! the registry and the customer actors use: it knows which keys a change writes and which of
//! them must be unique. The engine sits behind the small [`Storage`] trait (`storage`,
//! implemented by [`SledStorage`]) so that tests can inject faults; [`StoreError`] is this
//! layer's one error type (`error`). This file opens the store and runs its life (admitting
//! writes, durability, close); what it reads is in `reads`, what it writes in `writes`.
//!
//! Must not touch: actors, the registry's maps, HTTP.

mod checkpoint;
pub mod codec;
pub mod commit;
mod deferred;
pub mod disk;
mod error;
pub mod expiry;
pub mod keys;
mod opening;
mod order_chunks;
pub mod order_ids;
mod reads;
pub mod repair;
mod sled_engine;
mod storage;
#[cfg(test)]
mod tests;
pub mod wal;
mod writes;

use std::path::Path;
use std::sync::{Arc, RwLock, RwLockReadGuard};
use std::time::Duration;

use commit::{Committer, FatalHandler};
use disk::{DiskState, DiskWatch, Reserve};
use tokio::sync::oneshot;
use wal::{LogEntry, WalDir};

pub use error::StoreError;
pub use order_chunks::OrderPacking;
pub use reads::{Census, LoadedCustomer};
pub use sled_engine::SledStorage;
pub use storage::{Entry, Storage, WriteBatch};
pub use writes::{
    add_customer_record, add_idempotency_record, add_new_customer, add_order, add_order_record,
    IdempotencyWrite,
};

use crate::domain::ids::IdRange;

/// Whether a write is acknowledged only once it is on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Every write goes to the write-ahead log, and is answered once group commit has synced
    /// it (the default); under heavy load a sync may wait up to `commit_interval` for writers
    /// to gather (see [`commit`]).
    Sync {
        /// How long after a busy sync's start the next may wait for writers; zero for never.
        commit_interval: Duration,
    },
    /// Answer at once, with no log; sled flushes in the background. Loses recent writes on a
    /// crash.
    Async,
}

/// What is to happen once a write is on disk, before its writer is answered (publishing
/// what it wrote, releasing what the writer held while it was made). Group commit runs it on
/// its own thread right after the sync, so no task has to be woken for it; without
/// durability it runs at once. It is dropped unrun if the write never reaches the disk, so
/// whatever it holds is released either way.
pub type OnDurable = Box<dyn FnOnce() + Send>;

/// A write made in the engine, on its way to disk: answer its client only once
/// [`Written::durable`] completes. Dropping it drops nothing but the wait.
#[must_use = "a write may be acknowledged only once it is durable"]
pub struct Written {
    /// Completes once group commit has synced the write; `None` without durability.
    on_disk: Option<oneshot::Receiver<()>>,
}

impl Written {
    /// Completes when the write, and every write submitted before it, is on disk (at once
    /// without durability).
    pub async fn durable(self) -> Result<(), StoreError> {
        match self.on_disk {
            None => Ok(()),
            Some(on_disk) => on_disk.await.map_err(|_| StoreError::NotDurable),
        }
    }
}

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
    /// How writes reach the disk; `None` once closed. Read-locked by every write method
    /// (shared, never contended); write-locked only by `close`.
    writes: RwLock<Option<Writes>>,
}

/// How the store's writes reach the disk while it is open.
enum Writes {
    /// Through the write-ahead log: answered once group commit has synced them.
    Logged(Committer),
    /// Answered at once, with no log (durability off; log entries are dropped unread);
    /// sled flushes in the background.
    AtOnce,
}

impl Writes {
    /// Hands `writes` (a log entry's bytes; none for a bare wait) to group commit, with what
    /// is to run once they are on disk (at once without a log).
    fn submit(
        &self,
        writes: Vec<u8>,
        on_durable: Option<OnDurable>,
    ) -> Result<Written, StoreError> {
        let on_disk = match self {
            Writes::Logged(committer) => Some(committer.submit(writes, on_durable)?),
            Writes::AtOnce => {
                if let Some(on_durable) = on_durable {
                    on_durable();
                }
                None
            }
        };
        Ok(Written { on_disk })
    }
}

/// A write method's admission ([`Store::open_for_writes`]): while it is held, `close` waits.
struct Admitted<'a>(RwLockReadGuard<'a, Option<Writes>>);

impl Admitted<'_> {
    fn writes(&self) -> &Writes {
        self.0.as_ref().expect("admitted only while open")
    }

    /// An entry to record a change's writes in.
    fn entry(&self) -> LogEntry {
        LogEntry::new()
    }

    /// Whether writes go through the log (durability on): the one place that knows.
    fn is_logged(&self) -> bool {
        matches!(self.writes(), Writes::Logged(_))
    }

    /// Hands the log entry of writes just made in the engine to group commit.
    fn commit(&self, entry: LogEntry) -> Result<Written, StoreError> {
        self.writes().submit(entry.into_bytes(), None)
    }

    /// [`Admitted::commit`], with `on_durable` to run once the writes are on disk.
    fn commit_then(&self, entry: LogEntry, on_durable: OnDurable) -> Result<Written, StoreError> {
        self.writes().submit(entry.into_bytes(), Some(on_durable))
    }
}

const FORMAT_MARKER: &str = "boxsub-store-v1";

/// Replays into the engine what the write-ahead log in `dir` holds beyond the last
/// checkpoint, makes that durable, and, with durability on, starts group commit on a fresh
/// segment (see [`wal`]).
fn open_log(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    durability: Durability,
    on_fatal: &FatalHandler,
) -> Result<Writes, StoreError> {
    let wal = WalDir::open(dir)?;
    let started = std::time::Instant::now();
    let recovered = wal::recover(&wal, checkpoint::log_start(&**storage)?, &**storage)?;
    // The replayed writes are durable, and the log starts afresh, before any segment is
    // written again.
    checkpoint::mark_log_start(&**storage, recovered.next_seq)?;
    if recovered.frames > 0 {
        tracing::info!(
            frames = recovered.frames,
            writes = recovered.writes,
            millis = started.elapsed().as_millis() as u64,
            "replayed the write-ahead log's writes that the store did not hold yet"
        );
    }
    let Durability::Sync { commit_interval } = durability else {
        return Ok(Writes::AtOnce);
    };
    let mut reusable = recovered.reusable;
    let seq = recovered.next_seq;
    let segment = if reusable.is_empty() {
        wal.create(seq)?
    } else {
        wal.recycle(reusable.remove(0), seq)?
    };
    let segments = checkpoint::Segments {
        reusable,
        next_seq: seq + 1,
    };
    Committer::start(
        storage.clone(),
        wal,
        segment,
        segments,
        on_fatal.clone(),
        commit_interval,
    )
    .map(Writes::Logged)
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
        std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
            context: format!("creating data directory {}", dir.display()),
            source,
        })?;
        opening::remove_snapshot_leftovers(dir)?;
        let disk = DiskWatch::start(dir, options.reserve).map_err(|source| StoreError::Io {
            context: "starting the disk watch thread".into(),
            source,
        })?;
        let storage = match SledStorage::open(dir, options.cache_bytes) {
            Ok(storage) => storage.with_packing(Arc::new(OrderPacking)),
            Err(error) => {
                let _ = opening::remove_snapshot_leftovers(dir);
                return Err(opening::explain(dir, error, disk.state()));
            }
        };
        let disk_at_open = disk.state();
        Store::with_storage(
            Arc::new(storage),
            dir,
            options.durability,
            on_fatal,
            Some(disk),
        )
        .map_err(|error| opening::explain_start(dir, error, disk_at_open))
    }

    /// A store over any [`Storage`] (tests inject faults this way), with an optional watch
    /// over its directory's filesystem.
    pub fn with_storage(
        storage: Arc<dyn Storage>,
        dir: &Path,
        durability: Durability,
        on_fatal: FatalHandler,
        disk: Option<DiskWatch>,
    ) -> Result<Store, StoreError> {
        let format = storage.get(keys::FORMAT_KEY)?;
        let fresh = format.is_none();
        match format {
            Some(found) if found == FORMAT_MARKER.as_bytes() => {}
            Some(found) => {
                return Err(StoreError::Format {
                    path: dir.display().to_string(),
                    found: String::from_utf8_lossy(&found).into_owned(),
                    expected: FORMAT_MARKER.into(),
                })
            }
            None => {
                // A single write, not a batch: see `Storage::apply` on what a batch costs.
                storage.put(keys::FORMAT_KEY, FORMAT_MARKER.as_bytes().to_vec())?;
                storage.sync()?;
            }
        }
        // The marker goes before anything else is written, durably: a crash from here on
        // must find it gone.
        let closed_cleanly = match storage.get(keys::CLEAN_SHUTDOWN_KEY)? {
            Some(marker) => storage.remove_if(keys::CLEAN_SHUTDOWN_KEY, &marker)?,
            None => false,
        };
        storage.sync()?;
        let writes = open_log(&storage, dir, durability, &on_fatal)?;
        let store = Store {
            inner: Arc::new(StoreInner {
                storage,
                on_fatal,
                disk,
                writes: RwLock::new(Some(writes)),
            }),
        };
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
    fn open_for_writes(&self) -> Result<Admitted<'_>, StoreError> {
        let open = self.open_even_if_refused()?;
        self.writable()?;
        Ok(open)
    }

    /// [`Store::open_for_writes`] for removals, which give space back and so go on while
    /// the disk refuses writes.
    fn open_even_if_refused(&self) -> Result<Admitted<'_>, StoreError> {
        let writes = self.writes();
        if writes.is_none() {
            return Err(StoreError::Closed);
        }
        Ok(Admitted(writes))
    }

    /// `Err(Refused)` while the disk is nearly full or the directory does not take writes.
    /// Every write checks this first; callers may check it early to spare work.
    pub fn writable(&self) -> Result<(), StoreError> {
        match &self.inner.disk {
            Some(disk) => disk.writable().map_err(StoreError::Refused),
            None => Ok(()),
        }
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
        match self.writes().as_ref() {
            None => Err(StoreError::NotDurable),
            Some(writes) => writes.submit(Vec::new(), None),
        }
    }

    /// How writes reach the disk, `None` once closed. Read-locked, shared and never
    /// contended but by `close`.
    fn writes(&self) -> RwLockReadGuard<'_, Option<Writes>> {
        self.inner
            .writes
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Makes everything durable and stops group commit and checkpoints (at shutdown). Waits
    /// for the write methods under way; every write after it is refused with
    /// [`StoreError::Closed`].
    pub fn close(&self) -> Result<(), StoreError> {
        let writes = self
            .inner
            .writes
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        let last_segment = match writes {
            Some(Writes::Logged(mut committer)) => committer.stop(),
            Some(Writes::AtOnce) | None => None,
        };
        // Everything logged is in sled: once sled is on disk, no segment needs replaying.
        match last_segment {
            Some(seq) => checkpoint::mark_log_start(&*self.inner.storage, seq + 1)?,
            None => self.inner.storage.sync()?,
        }
        // Last, once everything else is on disk (see `keys::CLEAN_SHUTDOWN_KEY`).
        self.inner
            .storage
            .put(keys::CLEAN_SHUTDOWN_KEY, b"1".to_vec())?;
        self.inner.storage.sync()
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
                &keys::customer(range.first()),
                Some(&keys::customer(range.end())),
            )?
            .and_then(|(key, _)| keys::trailing_id(&key))
            .unwrap_or(range.first() - 1);
        // Stores written before reservations kept an order → customer index instead.
        let reserved = storage
            .get(keys::ORDER_IDS_RESERVED)?
            .and_then(|value| keys::trailing_id(&value))
            .unwrap_or(0)
            .max(last_id(keys::LEGACY_ORDER_OWNER)?);
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
        Ok(HighWater {
            customer_id: last_customer_in_range,
            order_id: reserved.max(range.first() - 1),
            any_customer_id: last_id(keys::CUSTOMER)?,
            has_orders: storage.last(&[keys::ORDER])?.is_some(),
        })
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
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            match Store::open(dir, options, Arc::new(|_: &StoreError| {})) {
                Ok(store) => return store,
                Err(StoreError::CannotOpen { reason, .. })
                    if reason.contains("another process")
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(error) => panic!("the store opens: {error}"),
            }
        }
    }
}
