//! The store's on-disk format is `boxsub-store-v2`; a data directory written by the build
//! before it (`boxsub-store-v1`) is refused, and refused before anything is written. For
//! each fixture of `tests/fixtures/` (a v1 store closed cleanly, and one killed with its last
//! orders only in the write-ahead log; see the README there), both `boxsub serve` and
//! `boxsub export` must exit non-zero without serving or exporting, say on stderr that the
//! store is `boxsub-store-v1` and this build reads `boxsub-store-v2`, point to the way
//! across (`export` with the old build, `import` with this one), and leave every file and
//! directory of the data directory as it was: none created, removed or changed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use sha2::{Digest, Sha256};
use tempfile::TempDir;

use crate::helpers::{boxsub_command, run_to_exit, Finished};

/// The format of the fixtures, and the one this build writes.
const OLD_FORMAT: &str = "boxsub-store-v1";
const NEW_FORMAT: &str = "boxsub-store-v2";

/// How long a refusal may take.
const RUN_TIMEOUT: Duration = Duration::from_secs(30);

/// At most this many entries in a data directory (the fixtures hold eight).
const MAX_ENTRIES: usize = 10_000;

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// What a data directory holds at one path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Dir,
    File { size: u64, sha256: String },
    Symlink(PathBuf),
    Other,
}

/// Every entry under `dir`, by its path relative to `dir`.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Entry> {
    let mut entries = BTreeMap::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(relative) = pending.pop() {
        let listing = std::fs::read_dir(dir.join(&relative))
            .unwrap_or_else(|error| panic!("listing {}: {error}", dir.join(&relative).display()));
        for item in listing {
            let item = item.unwrap_or_else(|error| panic!("listing {}: {error}", dir.display()));
            let path = relative.join(item.file_name());
            let full = dir.join(&path);
            let meta = std::fs::symlink_metadata(&full)
                .unwrap_or_else(|error| panic!("stat {}: {error}", full.display()));
            let entry = if meta.is_dir() {
                pending.push(path.clone());
                Entry::Dir
            } else if meta.is_file() {
                let bytes = std::fs::read(&full)
                    .unwrap_or_else(|error| panic!("reading {}: {error}", full.display()));
                Entry::File {
                    size: meta.len(),
                    sha256: hex::encode(Sha256::digest(&bytes)),
                }
            } else if meta.file_type().is_symlink() {
                Entry::Symlink(std::fs::read_link(&full).unwrap_or_default())
            } else {
                Entry::Other
            };
            entries.insert(path, entry);
            assert!(
                entries.len() <= MAX_ENTRIES,
                "{} holds more than {MAX_ENTRIES} entries",
                dir.display()
            );
        }
    }
    entries
}

/// What differs between two snapshots, one line per path.
fn differences(before: &BTreeMap<PathBuf, Entry>, after: &BTreeMap<PathBuf, Entry>) -> Vec<String> {
    let mut lines = Vec::new();
    for (path, was) in before {
        match after.get(path) {
            None => lines.push(format!("removed {}", path.display())),
            Some(now) if now != was => {
                lines.push(format!("changed {}: {was:?} -> {now:?}", path.display()))
            }
            Some(_) => {}
        }
    }
    for (path, now) in after {
        if !before.contains_key(path) {
            lines.push(format!("created {}: {now:?}", path.display()));
        }
    }
    lines
}

/// Extracts fixture `name` into a fresh temp dir; the temp dir and the data directory in it.
fn extract(name: &str) -> (TempDir, PathBuf) {
    let tarball = fixtures_dir().join(format!("{name}.tar.gz"));
    assert!(tarball.is_file(), "missing fixture {}", tarball.display());
    let root = tempfile::tempdir().expect("failed to create a temp dir");
    let data = root.path().join("data");
    std::fs::create_dir(&data).expect("failed to create the data dir");
    let mut tar = Command::new("tar");
    tar.arg("-xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(&data)
        .stdin(Stdio::null());
    let untarred = run_to_exit(tar, RUN_TIMEOUT);
    assert!(
        untarred.status.is_some_and(|status| status.success()),
        "tar -xzf {} exited {:?}: {}",
        tarball.display(),
        untarred.status,
        untarred.stderr
    );
    (root, data)
}

/// Asserts that the extracted fixture holds exactly the files `store-v1.json` lists for it,
/// so that the refusal below is tested on the store the manifest describes.
fn assert_matches_manifest(name: &str, files: &BTreeMap<PathBuf, Entry>) {
    let path = fixtures_dir().join("store-v1.json");
    let manifest: Value = serde_json::from_slice(
        &std::fs::read(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display())),
    )
    .unwrap_or_else(|error| panic!("{} is not JSON: {error}", path.display()));
    assert_eq!(manifest["format"], OLD_FORMAT, "{}", path.display());
    let listed = manifest["fixtures"][name]["files"]
        .as_array()
        .unwrap_or_else(|| panic!("{} lists no files for {name}", path.display()));
    let expected: BTreeMap<PathBuf, Entry> = listed
        .iter()
        .map(|file| {
            let entry = Entry::File {
                size: file["size"].as_u64().expect("a file's size"),
                sha256: file["sha256"].as_str().expect("a file's sha256").into(),
            };
            (
                PathBuf::from(file["path"].as_str().expect("a file's path")),
                entry,
            )
        })
        .collect();
    let extracted: BTreeMap<PathBuf, Entry> = files
        .iter()
        .filter(|(_, entry)| !matches!(entry, Entry::Dir))
        .map(|(path, entry)| (path.clone(), entry.clone()))
        .collect();
    let differ = differences(&expected, &extracted);
    assert!(
        differ.is_empty(),
        "fixture {name} is not what {} says it is:\n{}",
        path.display(),
        differ.join("\n")
    );
    assert!(
        extracted.contains_key(Path::new("db")),
        "{name} holds no sled `db`"
    );
}

/// Whether `text` has `word` as a whole word (so that a log line's `exported` is not
/// `export`).
fn has_word(text: &str, word: &str) -> bool {
    text.split(|c: char| !c.is_alphanumeric())
        .any(|w| w == word)
}

/// Runs `boxsub ARGS --data-dir DIR` on a fresh copy of fixture `name` and asserts that it
/// refuses the store: exits non-zero (not a panic, not killed) within [`RUN_TIMEOUT`]
/// without serving, names both formats and the way across on stderr, and changes nothing
/// in DIR. Every failed check is reported together.
fn assert_refused(name: &str, args: &[&str]) {
    let (_root, data) = extract(name);
    let before = snapshot(&data);
    assert_matches_manifest(name, &before);

    let mut cmd = boxsub_command();
    cmd.args(args).arg("--data-dir").arg(&data);
    let command = format!("boxsub {} --data-dir {}", args.join(" "), data.display());
    let Finished {
        status,
        stdout,
        stderr,
    } = run_to_exit(cmd, RUN_TIMEOUT);
    let after = snapshot(&data);

    let mut failures = Vec::new();
    let served = stdout
        .lines()
        .any(|line| line.starts_with("listening on http://"));
    match status {
        None if served => failures.push(format!(
            "the server started on a {OLD_FORMAT} store instead of refusing it \
             (it printed `listening on`; the test killed it)"
        )),
        None => failures.push(format!(
            "it neither exited nor served within {RUN_TIMEOUT:?} (the test killed it)"
        )),
        Some(status) if status.success() => failures.push(format!(
            "it exited 0: it read a {OLD_FORMAT} store instead of refusing it"
        )),
        Some(status) if status.code().is_none() => failures.push(format!(
            "it was killed by a signal ({status}), not a refusal"
        )),
        Some(_) => {}
    }
    if stderr.contains("panicked") {
        failures.push("it panicked: a refusal is an error message, not a panic".into());
    }
    for format in [OLD_FORMAT, NEW_FORMAT] {
        if !stderr.contains(format) {
            failures.push(format!("stderr does not name the format {format}"));
        }
    }
    for word in ["export", "import"] {
        if !has_word(&stderr, word) {
            failures.push(format!(
                "stderr does not mention `{word}` (the way across: export with the old \
                 build, import with this one)"
            ));
        }
    }
    let changed = differences(&before, &after);
    if !changed.is_empty() {
        failures.push(format!(
            "the data directory changed (a refusal must write nothing):\n  {}",
            changed.join("\n  ")
        ));
    }

    let stdout_head: String = stdout.lines().take(20).collect::<Vec<_>>().join("\n");
    assert!(
        failures.is_empty(),
        "`{command}` on fixture {name} ({OLD_FORMAT}) was not refused:\n- {}\n\
         exit status: {status:?}\nstdout (first 20 lines):\n{stdout_head}\nstderr:\n{stderr}",
        failures.join("\n- ")
    );
}

const SERVE: &[&str] = &["serve", "--addr", "127.0.0.1:0"];
const EXPORT: &[&str] = &["export"];

#[test]
fn serve_refuses_a_v1_store_closed_cleanly() {
    assert_refused("store-v1-clean", SERVE);
}

#[test]
fn serve_refuses_a_v1_store_killed_with_orders_in_its_log() {
    assert_refused("store-v1-kill9", SERVE);
}

#[test]
fn export_refuses_a_v1_store_closed_cleanly() {
    assert_refused("store-v1-clean", EXPORT);
}

#[test]
fn export_refuses_a_v1_store_killed_with_orders_in_its_log() {
    assert_refused("store-v1-kill9", EXPORT);
}
