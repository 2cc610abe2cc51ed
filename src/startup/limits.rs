//! The process's limits on connections: the open-files limit raised to the hard one at
//! start, and the default cap on connections held at once that follows from it (each
//! connection is a file descriptor and a buffered head). Owns only the arithmetic and the
//! `setrlimit` call; the limits are put in force by the HTTP accept loop, which this must not
//! touch, and the flags that override them are `config`'s.

/// Connections allowed at once by default, when the open-files limit leaves room for them.
/// Every connection may hold up to [`crate::http::server::MAX_HEAD_BYTES`] of buffered head, so this bounds that
/// memory at about 256 MiB; thousands of stalled connections fit below it while their head
/// deadline runs out.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;

/// File descriptors kept back from connections for the store, the listener and the runtime.
const RESERVED_FILES: u64 = 64;

/// The open-files limits after raising the soft one.
#[derive(Debug, Clone, Copy)]
pub struct OpenFiles {
    /// The soft limit now in force.
    pub soft: u64,
    /// The hard limit.
    pub hard: u64,
}

/// Raises the soft open-files limit to the hard one (each connection is a file descriptor,
/// and the usual soft limit of 1,024 is far below what a server needs) and logs both.
pub fn raise_open_files_limit() -> OpenFiles {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        tracing::warn!("could not read the open-files limit; assuming 1024");
        return OpenFiles {
            soft: 1024,
            hard: 1024,
        };
    };
    if soft >= hard {
        tracing::info!(soft, hard, "open-files limit");
        return OpenFiles { soft, hard };
    }
    match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
        Ok(()) => {
            tracing::info!(
                was = soft,
                now = hard,
                hard,
                "raised the soft open-files limit to the hard limit"
            );
            OpenFiles { soft: hard, hard }
        }
        Err(error) => {
            tracing::warn!(%error, soft, hard, "could not raise the soft open-files limit");
            OpenFiles { soft, hard }
        }
    }
}

/// [`DEFAULT_MAX_CONNECTIONS`], or fewer when the open-files limit leaves less room.
pub fn default_max_connections(files: OpenFiles) -> usize {
    let room = files
        .soft
        .saturating_sub(RESERVED_FILES)
        .max(files.soft / 2)
        .max(1);
    usize::try_from(room).map_or(DEFAULT_MAX_CONNECTIONS, |room| {
        room.min(DEFAULT_MAX_CONNECTIONS)
    })
}
