//! Group commit: writers that need their changes on disk register and wait; one flusher
//! thread takes every waiter that has arrived, makes the store durable once for all of them,
//! and only then answers them. Durability then costs one flush per batch, not per write.
//!
//! A failed flush or fsync is fatal: the process must stop rather than acknowledge writes it
//! may have lost (retrying an fsync after a failure can report success over lost data).

use std::sync::mpsc;
use std::sync::Arc;

use tokio::sync::oneshot;

use super::{Storage, StoreError};

/// Called when the store could not be made durable. In the server it ends the process.
pub type FatalHandler = Arc<dyn Fn(&StoreError) + Send + Sync>;

/// The handle writers wait on.
pub struct Committer {
    waiters: Option<mpsc::Sender<oneshot::Sender<()>>>,
    flusher: Option<std::thread::JoinHandle<()>>,
}

impl Committer {
    /// Starts the flusher thread over `storage`.
    pub fn start(
        storage: Arc<dyn Storage>,
        on_fatal: FatalHandler,
    ) -> Result<Committer, StoreError> {
        let (waiters, queue) = mpsc::channel::<oneshot::Sender<()>>();
        let flusher = std::thread::Builder::new()
            .name("boxsub-flusher".into())
            .spawn(move || flush_loop(storage, queue, on_fatal))
            .map_err(|source| StoreError::Io {
                context: "starting the flusher thread".into(),
                source,
            })?;
        Ok(Committer {
            waiters: Some(waiters),
            flusher: Some(flusher),
        })
    }

    /// Registers a waiter: the receiver completes once everything written before the call is
    /// on disk, and fails if that can't be confirmed.
    pub fn register(&self) -> Result<oneshot::Receiver<()>, StoreError> {
        let (done, wait) = oneshot::channel();
        self.waiters
            .as_ref()
            .ok_or(StoreError::NotDurable)?
            .send(done)
            .map_err(|_| StoreError::NotDurable)?;
        Ok(wait)
    }

    /// Stops the flusher after it has answered every waiter.
    pub fn stop(&mut self) {
        self.waiters = None;
        if let Some(flusher) = self.flusher.take() {
            let _ = flusher.join();
        }
    }
}

impl Drop for Committer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn flush_loop(
    storage: Arc<dyn Storage>,
    queue: mpsc::Receiver<oneshot::Sender<()>>,
    on_fatal: FatalHandler,
) {
    // Each waiter registered after its write reached the store, so one sync after taking a
    // batch covers every write of that batch.
    while let Ok(first) = queue.recv() {
        let mut batch = vec![first];
        batch.extend(queue.try_iter());
        match storage.sync() {
            Ok(()) => {
                for waiter in batch {
                    let _ = waiter.send(());
                }
            }
            Err(error) => {
                on_fatal(&error);
                // Never answer these waiters, nor any later one: dropping them fails their
                // writes instead of acknowledging data that may be lost.
                drop(batch);
                for waiter in queue.iter() {
                    drop(waiter);
                }
                return;
            }
        }
    }
}
