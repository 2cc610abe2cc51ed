//! Tests that need something of the host beyond the binary under test: root and loop
//! devices today (`host_faults`), perhaps `nats-server`, `haproxy` or a browser tomorrow.
//! Where it is missing, such a test does not pass silently: it calls [`skip_or_fail`],
//! the one place that decides between a loud skip (a developer's machine) and a failure
//! (CI, which sets [`REQUIRE_ALL_TESTS`]`=1` so that no test can be skipped there unseen).
//! Every skip is also kept, and the suite's last test (`zz_skipped`) lists them all once the
//! other tests are done, just above cargo's summary line.

use std::io::Write;
use std::sync::Mutex;

/// Every skip of this run, as its `SKIPPED:` line, for [`skipped_so_far`] (the suite's last
/// test lists them at the end of the run, where a person reads).
static SKIPPED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The `SKIPPED:` lines of this run so far.
pub fn skipped_so_far() -> Vec<String> {
    SKIPPED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .clone()
}

/// The environment variable that turns every skip into a failure when set to `1`.
pub const REQUIRE_ALL_TESTS: &str = "BOXSUB_REQUIRE_ALL_TESTS";

/// Whether [`REQUIRE_ALL_TESTS`] is set to `1`.
fn all_tests_required() -> bool {
    std::env::var(REQUIRE_ALL_TESTS).is_ok_and(|value| value.trim() == "1")
}

/// Test `test` cannot run here, because of `reason`: panics (failing the test) when
/// [`REQUIRE_ALL_TESTS`] is `1`; otherwise writes `SKIPPED: <test>: <reason>` to stderr and
/// returns, for the caller to return at once without checking anything:
///
/// ```ignore
/// if !Path::new("/dev/loop-control").exists() {
///     skip_or_fail("my_test", "no loop devices");
///     return;
/// }
/// ```
///
/// The line goes straight to the process's stderr, not through the test harness's output
/// capture, so that it shows in a plain `cargo test` run and not only for a failing test.
#[track_caller]
pub fn skip_or_fail(test: &str, reason: &str) {
    if all_tests_required() {
        panic!("{test} cannot run here ({reason}), and {REQUIRE_ALL_TESTS}=1 forbids skipping it");
    }
    let line = format!(
        "SKIPPED: {test}: {reason} (set {REQUIRE_ALL_TESTS}=1 to fail instead of skipping)\n"
    );
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
    SKIPPED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push(line.trim_end().to_owned());
}

/// A program of the host (`nats-server`, `haproxy`): Debian's in `/usr/sbin`, or the first on
/// `PATH`; `None` where it is not installed (the caller then calls [`skip_or_fail`]).
pub fn host_program(name: &str) -> Option<std::path::PathBuf> {
    let debian = std::path::Path::new("/usr/sbin").join(name);
    if debian.is_file() {
        return Some(debian);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}
