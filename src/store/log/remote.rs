//! A log kept by another system: group commit hands each batch to a [`Log`] that makes it
//! durable elsewhere (a replicated changelog on NATS JetStream: `crate::replication`), and
//! the local data directory is only a cache of it. Nothing here decides what "durable
//! elsewhere" means; that is the [`Log`]'s `sync`.
//!
//! Because the remote log, not the local snapshot, is what a restart replays from, a
//! checkpoint here only bounds memory: a thread applies the pending layer's waiting puts
//! into the snapshot every [`APPLY_EVERY`], without marking any position (where the
//! snapshot stands against the remote log is the replica's to record:
//! [`crate::store::replica`]).
//!
//! Must not touch: the network, what the writes mean.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use super::commit::{Committer, Log};
use super::{ChangeLog, EntryLimit, OnDurable, Written};
use crate::store::error::FatalHandler;
use crate::store::error::StoreError;
use crate::store::pending::Storage;

/// How often the waiting puts are applied to the snapshot.
pub const APPLY_EVERY: Duration = Duration::from_secs(1);

/// Group commit into a remote [`Log`], with the waiting puts applied locally behind it.
pub struct RemoteLog {
    committer: Committer,
    /// The largest change the remote log takes, if it says.
    limit: Option<EntryLimit>,
    /// Dropping it stops the apply thread.
    stop_applying: Option<mpsc::Sender<()>>,
    applier: Option<std::thread::JoinHandle<()>>,
}

impl RemoteLog {
    /// Starts group commit into `log` and the thread that applies `storage`'s waiting puts.
    pub fn start(
        storage: Arc<dyn Storage>,
        log: impl Log,
        on_fatal: FatalHandler,
        interval: Duration,
    ) -> Result<RemoteLog, StoreError> {
        let limit = log.entry_limit();
        let committer = Committer::with_log(log, on_fatal.clone(), interval)?;
        let (stop_applying, stopped) = mpsc::channel::<()>();
        let applier = std::thread::Builder::new()
            .name("boxsub-apply".into())
            .spawn(move || loop {
                match stopped.recv_timeout(APPLY_EVERY) {
                    Err(RecvTimeoutError::Timeout) => {
                        if let Err(error) = storage.apply_pending() {
                            on_fatal(&error);
                            return;
                        }
                    }
                    _ => return,
                }
            })
            .map_err(|source| StoreError::Io {
                context: "starting the apply thread".into(),
                source,
            })?;
        Ok(RemoteLog {
            committer,
            limit,
            stop_applying: Some(stop_applying),
            applier: Some(applier),
        })
    }

    fn stop_applier(&mut self) {
        self.stop_applying.take();
        if let Some(applier) = self.applier.take() {
            let _ = applier.join();
        }
    }
}

impl ChangeLog for RemoteLog {
    fn submit(
        &self,
        writes: Vec<u8>,
        on_durable: Option<OnDurable>,
    ) -> Result<Written, StoreError> {
        self.committer.written(writes, on_durable)
    }

    fn is_durable(&self) -> bool {
        true
    }

    fn close(&mut self, storage: &dyn Storage) -> Result<(), StoreError> {
        self.committer.stop();
        self.stop_applier();
        storage.sync()
    }

    fn max_entry_bytes(&self) -> Option<usize> {
        self.limit.as_ref().map(|limit| limit())
    }
}

impl Drop for RemoteLog {
    fn drop(&mut self) {
        self.stop_applier();
    }
}
