//! The store's format, named in one place. A data directory holds a `FORMAT` file naming
//! the layout its records and keys follow (and the snapshot holds the same name under
//! `m format`). Opening reads the file before the snapshot is opened, so that a store of
//! another format is refused before anything in it is written (opening sled after a crash
//! writes), with a message naming both formats and the way across: export with the build
//! that wrote the store, import with this one.
//!
//! Formats so far:
//! - `boxsub-store-v1`: stores written before this file existed (no `FORMAT` file; orders
//!   under their own keys, in chunks, and an older order → customer index).
//! - `boxsub-store-v2`: orders only in chunks in the snapshot, each once (see
//!   `pending::order_chunks`); no order → customer index (`r`).
//!
//! Must not touch: anything inside the snapshot but its marker.

use std::io::Write;
use std::path::Path;

use super::error::StoreError;

/// The format this build writes and reads.
pub const CURRENT: &str = "boxsub-store-v2";

/// The name of stores written before the `FORMAT` file existed.
pub const BEFORE_FORMAT_FILES: &str = "boxsub-store-v1";

/// The file in the data directory that names its format.
pub const FILE_NAME: &str = "FORMAT";

/// What opening may do with the data directory `dir`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// A store of this build's format.
    Current,
    /// No store yet: this build's format has just been recorded.
    Created,
}

/// Reads the format of the store in `dir` before anything opens it: this build's, none yet
/// (then it is recorded, durably), or another, refused with the way across.
pub fn check_or_create(dir: &Path) -> Result<Found, StoreError> {
    let file = dir.join(FILE_NAME);
    match std::fs::read_to_string(&file) {
        Ok(text) if text.trim() == CURRENT => return Ok(Found::Current),
        Ok(text) => return Err(refused(dir, text.trim())),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(StoreError::Io {
                context: format!("reading {}", file.display()),
                source,
            })
        }
    }
    if dir.join("db").exists() {
        return Err(refused(dir, BEFORE_FORMAT_FILES));
    }
    write_durably(dir, &file)?;
    Ok(Found::Created)
}

/// Records this build's format in `dir` if nothing is recorded yet (a store created over a
/// snapshot that was opened without [`check_or_create`], as tests do).
pub fn record_if_missing(dir: &Path) -> Result<(), StoreError> {
    let file = dir.join(FILE_NAME);
    if file.exists() {
        return Ok(());
    }
    write_durably(dir, &file)
}

/// The refusal of a store of format `found` in `dir`.
pub fn refused(dir: &Path, found: &str) -> StoreError {
    StoreError::Format {
        path: dir.display().to_string(),
        found: found.to_owned(),
        expected: CURRENT.to_owned(),
    }
}

/// Writes this build's format to `file`, then makes the file and its name durable.
fn write_durably(dir: &Path, file: &Path) -> Result<(), StoreError> {
    let io = |context: String| move |source| StoreError::Io { context, source };
    let mut out =
        std::fs::File::create(file).map_err(io(format!("creating {}", file.display())))?;
    out.write_all(format!("{CURRENT}\n").as_bytes())
        .and_then(|()| out.sync_all())
        .map_err(io(format!("writing {}", file.display())))?;
    std::fs::File::open(dir)
        .and_then(|dir| dir.sync_all())
        .map_err(io(format!("syncing {}", dir.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_directory_gets_this_builds_format_and_keeps_it() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(check_or_create(dir.path()).unwrap(), Found::Created);
        assert_eq!(
            std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap(),
            format!("{CURRENT}\n")
        );
        assert_eq!(check_or_create(dir.path()).unwrap(), Found::Current);
    }

    #[test]
    fn a_store_of_another_format_is_refused_with_both_names_and_the_way_across() {
        let before = tempfile::tempdir().unwrap();
        std::fs::write(before.path().join("db"), b"sled").unwrap();
        let later = tempfile::tempdir().unwrap();
        std::fs::write(later.path().join(FILE_NAME), "boxsub-store-v3\n").unwrap();
        for (dir, found) in [
            (before.path(), BEFORE_FORMAT_FILES),
            (later.path(), "boxsub-store-v3"),
        ] {
            let message = check_or_create(dir).unwrap_err().to_string();
            for part in [found, CURRENT, "export", "import"] {
                assert!(message.contains(part), "{part} missing from: {message}");
            }
        }
        assert!(
            !before.path().join(FILE_NAME).exists(),
            "nothing is written"
        );
    }
}
