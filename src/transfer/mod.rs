//! Moving data in and out of a store: `boxsub export` and `boxsub import` (a whole store,
//! or one webstore moving to another host), and the online backup a running server writes
//! when it gets SIGUSR1 (an export of the live store, restored with `boxsub import`).
//!
//! - [`format`](mod@format): the export format (JSON lines): customers, orders, idempotency
//!   records, and each webstore's events, events-pruned mark and webhook positions.
//! - [`export`]: a store, live or stopped, into that format; always whole.
//! - [`import`]: that format into a store, all or nothing.
//!
//! Must not touch: HTTP, actors, the registry (a running server's data directory is locked
//! by its engine, so the commands refuse it; the backup goes through the server's own store).

pub mod export;
pub mod format;
pub mod import;
#[cfg(test)]
mod tests;

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use crate::store::StoreError;

/// Why an export or import failed.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    /// The store failed, or could not be opened.
    #[error("{0}")]
    Store(#[from] StoreError),
    /// The input could not be read.
    #[error("{context}: {source}")]
    Read {
        /// What was being read.
        context: String,
        /// The error.
        source: std::io::Error,
    },
    /// The output could not be written.
    #[error("writing the export: {0}")]
    Write(std::io::Error),
    /// A line of the input is not an export's.
    #[error("line {number}: {problem}")]
    Line {
        /// Its number, from 1.
        number: u64,
        /// What is wrong.
        problem: String,
    },
    /// The import would collide with what the store holds; nothing was written.
    #[error("{0}")]
    Refused(String),
}

impl TransferError {
    fn write(error: std::io::Error) -> TransferError {
        TransferError::Write(error)
    }

    fn line(number: u64, problem: impl Into<String>) -> TransferError {
        TransferError::Line {
            number,
            problem: problem.into(),
        }
    }
}

/// Progress of a long export or import: a spinner with counts on a terminal, a log line every
/// few seconds otherwise (or nothing, for the server's own backups' callers that ask so).
pub struct Progress {
    bar: Option<indicatif::ProgressBar>,
    lines: bool,
    last_line: Instant,
}

/// Between two progress lines off a terminal.
const LINE_EVERY: Duration = Duration::from_secs(2);

impl Progress {
    /// Progress on stderr: a bar when it is a terminal, lines every few seconds otherwise.
    pub fn on_stderr(what: &str) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.set_prefix(what.to_owned());
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Progress {
            lines: bar.is_none(),
            bar,
            last_line: Instant::now(),
        }
    }

    /// Progress logged every few seconds (the server's backups).
    pub fn logged() -> Progress {
        Progress {
            bar: None,
            lines: true,
            last_line: Instant::now(),
        }
    }

    /// `count` of `what` done so far.
    pub fn step(&mut self, what: &str, count: u64) {
        if let Some(bar) = &self.bar {
            if count.is_multiple_of(1024) {
                bar.set_message(format!("{count} {what}"));
            }
        } else if self.lines && self.last_line.elapsed() >= LINE_EVERY {
            self.last_line = Instant::now();
            tracing::info!(count, "{what} so far");
        }
    }

    /// Done: clears the bar and logs `summary`.
    pub fn finish(&mut self, summary: &str) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        tracing::info!("{summary}");
    }
}
