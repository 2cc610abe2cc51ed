//! Opening a data directory safely on any disk. Before the engine opens, leftovers of a
//! snapshot the engine did not finish (`snap.<lsn>.generating`, empty or cut short when the
//! disk filled or the process died mid-write) are removed, and each is logged by name: sled
//! takes the last `snap.*` file it finds for its snapshot, so one such file makes every later
//! start fail with "Read corrupted data". If opening fails (a full disk, typically, since
//! opening after a crash writes a new snapshot), whatever the attempt left of the same kind is
//! removed again, so the directory stays exactly as openable as it was, and the error says
//! what is wrong and what the operator can do.
//!
//! Must not touch: records, keys, writes after opening.

use std::path::{Path, PathBuf};

use super::disk::{is_out_of_space, DiskState};
use super::StoreError;

/// Removes the snapshot leftovers in `dir`, logging each; returns their names.
pub fn remove_snapshot_leftovers(dir: &Path) -> Result<Vec<String>, StoreError> {
    let mut removed = Vec::new();
    for entry in entries_of(dir)? {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !is_snapshot_leftover(&name) {
            continue;
        }
        let path: PathBuf = entry.path();
        let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
        std::fs::remove_file(&path).map_err(|source| StoreError::Io {
            context: format!(
                "removing {}, an unfinished snapshot of the store (remove it by hand)",
                path.display()
            ),
            source,
        })?;
        tracing::warn!(
            file = %path.display(),
            bytes = size,
            "removed an unfinished store snapshot left by an interrupted run; the store is \
             recovered from its log instead"
        );
        removed.push(name);
    }
    Ok(removed)
}

/// The entries of data directory `dir` (none if it does not exist).
pub fn entries_of(dir: &Path) -> Result<Vec<std::fs::DirEntry>, StoreError> {
    match std::fs::read_dir(dir) {
        Ok(entries) => Ok(entries.flatten().collect()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(source) => Err(StoreError::Io {
            context: format!("listing data directory {}", dir.display()),
            source,
        }),
    }
}

/// `snap.<16 hex digits>.generating`: what sled writes before renaming a finished snapshot.
fn is_snapshot_leftover(name: &str) -> bool {
    name.strip_prefix("snap.")
        .and_then(|rest| rest.strip_suffix(".generating"))
        .is_some_and(|lsn| !lsn.is_empty() && lsn.chars().all(|c| c.is_ascii_hexdigit()))
}

/// Why sled could not open `dir`, and what to do about it.
pub fn explain(dir: &Path, error: sled::Error, disk: DiskState) -> StoreError {
    let path = dir.display().to_string();
    let (reason, remedy) = match &error {
        sled::Error::Io(io) if is_out_of_space(io) => (
            format!(
                "the disk is full ({} KiB free), and opening the store writes a new snapshot \
                 of it",
                disk.free / 1024
            ),
            "free space on that filesystem (or grow it) and start again; nothing in the \
             directory was changed"
                .to_owned(),
        ),
        sled::Error::Io(io) if matches!(io.raw_os_error(), Some(1) | Some(13) | Some(30)) => (
            format!("the directory does not take writes ({io})"),
            "make it writable by this user (every start writes to it) and start again".to_owned(),
        ),
        sled::Error::Io(io) if io.to_string().contains("could not acquire lock") => (
            "another process has it open".to_owned(),
            "it is a running server's data directory: stop that server (or, for a backup, send \
             it SIGUSR1: it writes one without stopping), or give a different --data-dir"
                .to_owned(),
        ),
        sled::Error::Corruption { .. } => (
            format!("its files are damaged ({error})"),
            "restore the directory from a backup; boxsub never writes to a store it cannot \
             read"
                .to_owned(),
        ),
        other => (
            format!("{other}"),
            "check that it holds a boxsub store written by this release".to_owned(),
        ),
    };
    StoreError::CannotOpen {
        path,
        reason,
        remedy,
    }
}

/// A start that failed after the engine opened (replaying the write-ahead log, making it
/// durable, preparing its segments): a full disk is said as plainly as [`explain`] says it
/// for the engine's own open; any other failure is left as it is.
pub fn explain_start(dir: &Path, error: StoreError, disk: DiskState) -> StoreError {
    let out_of_space = match &error {
        StoreError::Io { source, .. } => is_out_of_space(source),
        StoreError::Engine { detail, .. } => detail.contains("No space left"),
        _ => false,
    };
    if !out_of_space {
        return error;
    }
    StoreError::CannotOpen {
        path: dir.display().to_string(),
        reason: format!(
            "the disk is full ({} KiB free), and opening the store writes to it ({error})",
            disk.free / 1024
        ),
        remedy: "free space on that filesystem (or grow it) and start again; nothing \
                 acknowledged is lost"
            .to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unfinished_snapshots_are_leftovers() {
        assert!(is_snapshot_leftover("snap.00000000001A2B3C.generating"));
        for kept in [
            "snap.00000000001A2B3C",
            "snap..generating",
            "snap.xyz.generating",
            "db",
            "conf",
            "blobs",
        ] {
            assert!(!is_snapshot_leftover(kept), "{kept}");
        }
    }

    #[test]
    fn leftovers_are_removed_and_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("snap.0000000000000001"), b"a finished one").unwrap();
        std::fs::write(dir.path().join("snap.00000000000000FF.generating"), b"").unwrap();
        let removed = remove_snapshot_leftovers(dir.path()).unwrap();
        assert_eq!(removed, ["snap.00000000000000FF.generating"]);
        assert!(dir.path().join("snap.0000000000000001").exists());
        assert!(remove_snapshot_leftovers(&dir.path().join("missing"))
            .unwrap()
            .is_empty());
    }
}
