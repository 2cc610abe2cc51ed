//! Replica snapshots in a replicated group, with real processes on loopback:
//!
//! - three nodes with frequent snapshots, where both standbys snapshot the same position:
//!   the snapshot that wins is loadable, and an empty node joins from it (the changelog
//!   no longer holds everything) and then holds every acknowledged write;
//! - a primary killed while a standby uploads a long snapshot (its links carry what it sends
//!   at 64 KiB/s): the standby takes over as fast as after any other death, and abandons the
//!   upload.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::helpers::*;

/// The positions of the snapshots a node's log says it spooled.
fn spooled_positions(log: &str) -> BTreeSet<u64> {
    positions(log, "spooled a replica snapshot")
}

/// The positions (`seq=`) of the lines of `log` that say `what`.
fn positions(log: &str, what: &str) -> BTreeSet<u64> {
    log.lines()
        .filter(|line| line.contains(what))
        .filter_map(|line| {
            line.split("seq=")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn both_standbys_snapshotting_one_position_leave_a_snapshot_an_empty_node_loads() {
    let test =
        "group_snapshots::both_standbys_snapshotting_one_position_leave_a_snapshot_an_empty_node_loads";
    let Some(mut group) = Group::start(test, 3, &["--changelog-snapshot-every", "20"]).await else {
        return;
    };
    let primary = group.primary(Duration::from_secs(20)).await;
    let standbys: Vec<usize> = (0..3).filter(|&i| i != primary).collect();
    // Writes until both standbys have spooled a snapshot of one position, and the changelog
    // has been trimmed behind a snapshot (bounded).
    let mut outcomes = BTreeMap::new();
    let mut both = BTreeSet::new();
    let mut n = 0;
    loop {
        for _ in 0..10 {
            outcomes.insert(n, keyed_create(group.app(primary), "s", n).await);
            n += 1;
        }
        let positions: Vec<BTreeSet<u64>> = standbys
            .iter()
            .map(|&i| spooled_positions(&group.app(i).stderr_tail()))
            .collect();
        both.extend(positions[0].intersection(&positions[1]).copied());
        if !both.is_empty() && group.stream_bounds().await.0 > 1 {
            break;
        }
        assert!(
            n < 2_000,
            "the standbys never snapshotted one position, or the changelog was never \
             trimmed:\n{}",
            group.logs()
        );
    }
    eprintln!("both standbys snapshotted positions {both:?}");
    // Both spooled that position, so both upload it and one loses; the loser says so once
    // its upload ends, which on a loaded machine can be well after the spooling (bounded).
    let lost_the_race = || {
        standbys.iter().any(|&i| {
            group
                .app(i)
                .stderr_tail()
                .contains("another node completed a snapshot first")
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !lost_the_race() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        lost_the_race(),
        "one of the two lost the race:\n{}",
        group.logs()
    );
    // An empty node joins: the changelog no longer starts at 1, so it must load the
    // snapshot the race left.
    let joined = group.add(DataDir::new()).await;
    wait_caught_up(group.app(joined)).await;
    let loaded = group
        .app(joined)
        .wait_for_stderr_line(Duration::from_secs(10), |line| {
            line.contains("loaded the group's replica snapshot")
        });
    assert!(
        loaded.is_some(),
        "the empty node started from the snapshot:\n{}",
        group.app(joined).stderr_tail()
    );
    // The others die: the joined node takes over with everything.
    for i in 0..3 {
        if let Some(mut app) = group.members[i].app.take() {
            app.crash();
        }
    }
    until_serving(group.app(joined), Duration::from_secs(20))
        .await
        .unwrap_or_else(|| panic!("the joined node did not take over:\n{}", group.logs()));
    assert!(outcomes.values().all(|o| matches!(o, Outcome::Acked(_))));
    assert_nothing_lost_or_doubled(group.app(joined), "s", &outcomes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_primary_killed_during_a_standbys_long_upload_is_replaced_as_fast_as_any_other() {
    let test = "group_snapshots::a_primary_killed_during_a_standbys_long_upload_is_replaced_as_fast_as_any_other";
    // Both nodes start from one store of 2,000 customers; messages are at most 64 KiB, so a
    // snapshot travels in many parts.
    let nats = NatsOptions {
        max_payload: Some(64 * 1024),
        ..Default::default()
    };
    let dirs = seeded_dirs(2, 2_000);
    let Some(mut group) =
        Group::start_from(test, dirs, &["--changelog-snapshot-every", "10"], nats).await
    else {
        return;
    };
    let primary = group.primary(Duration::from_secs(20)).await;
    let standby = 1 - primary;
    // What the standby sends goes at 64 KiB/s: its snapshot takes seconds to upload, while
    // what it receives (the changelog, the primary's heartbeats) comes at full speed.
    for link in &group.members[standby].links {
        link.limit_upload(64 * 1024);
    }
    // Writes until the standby spools a snapshot it must upload slowly.
    let before = spooled_positions(&group.app(standby).stderr_tail())
        .last()
        .copied()
        .unwrap_or(0);
    let mut outcomes = BTreeMap::new();
    let mut n = 0;
    let uploading = loop {
        outcomes.insert(n, keyed_create(group.app(primary), "u", n).await);
        n += 1;
        let spooled = spooled_positions(&group.app(standby).stderr_tail());
        if let Some(&position) = spooled.iter().find(|&&position| position > before) {
            break position;
        }
        assert!(
            n < 200,
            "the standby never began a snapshot:\n{}",
            group.logs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    let uploaded = positions(
        &group.app(standby).stderr_tail(),
        "uploaded a replica snapshot",
    );
    assert!(
        !uploaded.contains(&uploading),
        "the upload of {uploading} is still under way when the primary dies:\n{}",
        group.app(standby).stderr_tail()
    );
    let killed_at = Instant::now();
    group.kill_and_wipe(primary);
    let took = until_serving(group.app(standby), Duration::from_secs(30))
        .await
        .unwrap_or_else(|| panic!("no takeover during the upload:\n{}", group.logs()));
    eprintln!(
        "the uploading standby took over {} ms after the primary's kill -9",
        took.as_millis()
    );
    assert!(
        killed_at.elapsed() <= FAILOVER_BOUND,
        "the takeover waited for the upload: {took:?}"
    );
    assert!(
        group
            .app(standby)
            .stderr_tail()
            .contains("abandoning this node's replica snapshot upload"),
        "the new primary abandoned its upload:\n{}",
        group.app(standby).stderr_tail()
    );
    assert!(outcomes.values().all(|o| matches!(o, Outcome::Acked(_))));
    assert_nothing_lost_or_doubled(group.app(standby), "u", &outcomes).await;
}
