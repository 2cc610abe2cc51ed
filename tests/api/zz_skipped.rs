//! The suite's last word on what it did not run: a report, not a test of the service. A test
//! that cannot run on this host (no haproxy, nats-server, browser or root) says `SKIPPED` as
//! it ends, amid the other tests' lines, and cargo's summary counts it as passed. So this
//! report, a `#[test]` named to start last (`zz_`) and named a report (it asserts nothing and
//! cannot fail, so it is counted among the passed without testing anything), waits until
//! every other test of the run has finished and then lists every skip in a block that ends
//! just above cargo's summary line, where a person reads. Under
//! `BOXSUB_REQUIRE_ALL_TESTS=1` a skip is a failure instead, and there is nothing to list.
//!
//! It knows the other tests by the names the binary lists (`--list`), which the test harness
//! gives their threads (cut to the 15 bytes Linux keeps), and waits, within a bound, until no
//! thread of the process bears one.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::helpers::skipped_so_far;

/// The longest it waits for the other tests (the whole suite takes about ten minutes).
const AT_MOST: Duration = Duration::from_secs(3_600);
/// How often it looks.
const EVERY: Duration = Duration::from_millis(200);
/// Linux keeps a thread's name in 15 bytes.
const NAME_BYTES: usize = 15;

/// The names the harness gives the threads of this binary's tests, but this one's.
fn test_thread_names() -> BTreeSet<String> {
    let exe = std::env::current_exe().expect("the test binary");
    let listed = std::process::Command::new(exe)
        .args(["--list", "--format", "terse"])
        .output()
        .expect("the test binary lists its tests");
    String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter_map(|line| line.strip_suffix(": test"))
        .filter(|name| !name.starts_with("zz_skipped::"))
        .map(|name| {
            let mut end = name.len().min(NAME_BYTES);
            while !name.is_char_boundary(end) {
                end -= 1;
            }
            name[..end].to_owned()
        })
        .collect()
}

/// The names of this process's threads now.
fn thread_names() -> BTreeSet<String> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return BTreeSet::new();
    };
    tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim_end().to_owned())
        .collect()
}

#[test]
fn zz_report_of_the_run_s_skips_asserts_nothing() {
    let tests = test_thread_names();
    let began = Instant::now();
    while began.elapsed() < AT_MOST && thread_names().iter().any(|name| tests.contains(name)) {
        std::thread::sleep(EVERY);
    }
    let skipped = skipped_so_far();
    if skipped.is_empty() {
        return;
    }
    let rule = "=".repeat(88);
    let mut block = format!(
        "\n{rule}\nSKIPPED: {} test{} of this run did not run and count as passed below \
         (BOXSUB_REQUIRE_ALL_TESTS=1 fails them instead):\n",
        skipped.len(),
        if skipped.len() == 1 { "" } else { "s" }
    );
    for line in &skipped {
        block.push_str(&format!("  {line}\n"));
    }
    block.push_str(&format!("{rule}\n"));
    use std::io::Write;
    let _ = std::io::stderr().lock().write_all(block.as_bytes());
}
