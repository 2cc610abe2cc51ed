//! `StoreError`: every way the store can fail, for the layers above to map, and the
//! [`FatalHandler`] told of the failures after which the process must stop. Owns nothing
//! else; the HTTP layer decides what a client is told.

use super::codec::CodecError;
use super::disk::Refusal;

/// Called when a write fails where the store's state can no longer be trusted (the log's
/// append or sync, a checkpoint, the pending layer's own writes): the process must stop
/// rather than acknowledge more.
pub type FatalHandler = std::sync::Arc<dyn Fn(&StoreError) + Send + Sync>;

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file-system operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The error.
        source: std::io::Error,
    },
    /// sled reported an error.
    #[error("{context}: {detail}")]
    Engine {
        /// What was being done.
        context: String,
        /// sled's message.
        detail: String,
    },
    /// A stored record does not decode.
    #[error("record {key} is unreadable: {source}")]
    Corrupt {
        /// The record's key, printable.
        key: String,
        /// Why.
        source: CodecError,
    },
    /// The store was written by an incompatible release.
    #[error(
        "the store at {path} has format {found}, and this build reads format {expected} only; \
         nothing in it was changed. To carry it across: export it with the build that wrote \
         it (`boxsub export --data-dir {path} --output FILE`), then import that file with \
         this build into an empty directory (`boxsub import --data-dir NEW_DIR --input FILE`)"
    )]
    Format {
        /// The directory.
        path: String,
        /// Marker found.
        found: String,
        /// Marker expected.
        expected: String,
    },
    /// Writes are refused while the disk is nearly full or the directory is unwritable;
    /// nothing was written.
    #[error("writes are refused: {0:?}")]
    Refused(Refusal),
    /// The data directory could not be opened; the message says why and what to do.
    #[error("{reason}; {remedy}")]
    CannotOpen {
        /// The directory.
        path: String,
        /// What is wrong.
        reason: String,
        /// What the operator can do.
        remedy: String,
    },
    /// The store is closed (the server is shutting down); nothing was written.
    #[error("the store is closed for shutdown")]
    Closed,
    /// Durability could not be confirmed; the write must not be acknowledged.
    #[error("the store could not confirm the write is on disk")]
    NotDurable,
    /// The webstore's writes are frozen for a move to another shard; nothing was written.
    #[error("the webstore's writes are frozen for a move")]
    Frozen,
    /// The change is larger than the log takes (a replicated changelog's messages are at
    /// most its servers' `max_payload`); nothing was written.
    #[error("a change of {bytes} bytes is larger than the log takes ({max} bytes at most)")]
    TooLarge {
        /// The change's encoded size.
        bytes: usize,
        /// The most the log takes.
        max: usize,
    },
    /// A record of the change would be larger than the store reads back; nothing was
    /// written.
    #[error("a {kind} record of {bytes} bytes is larger than the store reads back")]
    RecordTooLarge {
        /// What it is a record of (`order`, `customer`, `event`, `idempotency`).
        kind: &'static str,
        /// Its encoded size.
        bytes: usize,
    },
}

impl StoreError {
    /// Whether a write that failed with this error was refused before any of its writes was
    /// made (the store closed, the disk refusing writes, the webstore frozen, the change too
    /// large): nothing of it is in the store, and no reader can ever meet it. Any other
    /// failure of a write may leave its writes in the store, not durable.
    pub fn wrote_nothing(&self) -> bool {
        matches!(
            self,
            StoreError::Closed
                | StoreError::Refused(_)
                | StoreError::Frozen
                | StoreError::TooLarge { .. }
                | StoreError::RecordTooLarge { .. }
        )
    }
}

/// Maps a sled error, saying what was being done.
pub(super) fn engine(context: &str) -> impl Fn(sled::Error) -> StoreError + '_ {
    move |error| StoreError::Engine {
        context: context.to_owned(),
        detail: error.to_string(),
    }
}

/// A record of `kind` encoded so that the store reads it back, or the refusal of one too
/// large.
pub(super) fn readable<R: super::codec::Record>(
    kind: &'static str,
    record: &R,
) -> Result<Vec<u8>, StoreError> {
    super::codec::encode_readable(record).map_err(|error| match error {
        CodecError::TooLarge(bytes) => StoreError::RecordTooLarge { kind, bytes },
        other => StoreError::Corrupt {
            key: kind.to_owned(),
            source: other,
        },
    })
}

/// A record under `key` that does not decode.
pub(super) fn corrupt(key: &[u8], source: CodecError) -> StoreError {
    StoreError::Corrupt {
        key: String::from_utf8_lossy(key).escape_debug().to_string(),
        source,
    }
}
