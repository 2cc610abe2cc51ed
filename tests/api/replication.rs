//! A replicated group (`serve --changelog`), with real processes on loopback: three
//! `nats-server` nodes clustered with JetStream, two boxsub nodes, HAProxy in front where a
//! test needs it. The primary is killed with its data directory deleted (its orders'
//! histories and halts held on the node that takes over), frozen past its
//! lease, and the changelog stream's leader (a NATS server) is killed under load; every
//! acknowledged write must be on the node that takes over, and keyed retries must create
//! nothing twice.
//!
//! Without `nats-server` (or `haproxy`) each test says SKIPPED (and fails under
//! `BOXSUB_REQUIRE_ALL_TESTS=1`, which `.ci/run` sets). The tests hold one lock so that only
//! one group runs at a time on the two cores: their timings are the group's, not the
//! machine's contention.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::Value;

use crate::helpers::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_standby_answers_503_with_retry_after_and_health_says_what_it_is() {
    let test = "a_standby_answers_503_with_retry_after_and_health_says_what_it_is";
    let Some(group) = Group::start(test, 2, &[]).await else {
        return;
    };
    let primary = group.primary(Duration::from_secs(20)).await;
    let standby = 1 - primary;
    let (status, body) = health(group.app(primary)).await;
    assert_eq!(status, 200);
    assert_eq!(body["role"], "primary");
    assert_eq!(body["state"], "serving");
    let created = group
        .app(primary)
        .create_customer_ok(&customer_body("ann@example.com"))
        .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let standby_app = group.app(standby);
    loop {
        let (status, body) = health(standby_app).await;
        assert_eq!(status, 503, "a standby's health: {body}");
        assert_eq!(body["role"], "standby");
        if body["state"] == "following" && body["lag"] == 0 && body["applied"].as_u64() > Some(1) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the standby did not catch up: {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for (method, path) in [
        (Method::GET, "/v1/customers".to_owned()),
        (Method::GET, format!("/v1/customers/{}", created["id"])),
        (Method::POST, "/v1/customers".to_owned()),
    ] {
        let body = (method == Method::POST)
            .then(|| serde_json::to_vec(&customer_body("bob@example.com")).unwrap());
        let response = standby_app
            .send(
                method.clone(),
                &path,
                Some(&store_a()),
                body,
                &[("Content-Type", "application/json")],
            )
            .await;
        assert_eq!(response.status, 503, "{method} {path} on a standby");
        assert_eq!(response.header("Retry-After").as_deref(), Some("1"));
    }
    // The producers' app is not served by a standby either: a page that says so.
    let page = reqwest::get(standby_app.url("/app/sign_in")).await.unwrap();
    assert_eq!(page.status(), 503, "the app on a standby");
    assert_eq!(page.headers()["retry-after"], "1");
    assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    assert!(page.headers().contains_key("content-security-policy"));
    // The metrics say the same, on both.
    for (app, serving) in [(standby_app, 0.0), (group.app(primary), 1.0)] {
        let metrics = app.send(Method::GET, "/metrics", None, None, &[]).await;
        assert_eq!(metrics.status, 200);
        let text = metrics.text();
        let value = |name: &str| {
            text.lines()
                .find_map(|line| {
                    line.strip_prefix(name)?
                        .strip_prefix(' ')?
                        .trim()
                        .parse::<f64>()
                        .ok()
                })
                .unwrap_or_else(|| panic!("{name} missing from /metrics"))
        };
        assert_eq!(value("boxsub_group_serving"), serving);
        assert!(value("boxsub_changelog_applied") > 1.0);
        assert_eq!(value("boxsub_changelog_lag"), 0.0);
    }
    assert!(
        group
            .app(primary)
            .lookup_email("bob@example.com")
            .await
            .is_empty(),
        "a write refused by the standby was not made anywhere"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_primary_killed_with_its_data_deleted_mid_writes_loses_no_acknowledged_write() {
    let test = "the_primary_killed_with_its_data_deleted_mid_writes_loses_no_acknowledged_write";
    let Some(mut group) = Group::start(test, 2, &[]).await else {
        return;
    };
    let primary = group.primary(Duration::from_secs(20)).await;
    let standby = 1 - primary;
    // Subscriptions that lived (pauses, skips, a new schedule, a cancellation, a halt): the
    // changelog carries each change to the node that takes over.
    let lived = LivedOrders::make(&group.app(primary).url(""), &store_b()).await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Four carts write to the primary.
    let primary_app = Arc::new(group.members[primary].app.take().expect("the primary runs"));
    let tasks: Vec<_> = (0..4)
        .map(|w| {
            tokio::spawn(write_until(
                primary_app.clone(),
                format!("w{w}-"),
                stop.clone(),
                10_000,
            ))
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // kill -9 in the middle of the writes, and the disk is gone.
    let killed_at = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(primary_app.pid() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("SIGKILL");
    std::fs::remove_dir_all(&group.members[primary].dir.data).expect("deleting its data");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.expect("a writer"));
    }
    // The first acknowledged write on the new primary.
    let standby_app = group.app(standby);
    let mut first_write = None;
    while killed_at.elapsed() < Duration::from_secs(20) {
        if let Outcome::Acked(_) = keyed_create(standby_app, "after-", 0).await {
            first_write = Some(killed_at.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let first_write = first_write
        .unwrap_or_else(|| panic!("no write acknowledged after the kill:\n{}", group.logs()));
    eprintln!(
        "failover: first acknowledged write {} ms after kill -9",
        first_write.as_millis()
    );
    assert!(
        first_write <= FAILOVER_BOUND,
        "the first write after the kill took {first_write:?}"
    );
    let total_acked: usize = outcomes
        .iter()
        .flat_map(|o| o.values())
        .filter(|o| matches!(o, Outcome::Acked(_)))
        .count();
    assert!(
        total_acked > 20,
        "the writers got few writes through: {total_acked}"
    );
    for (w, outcome) in outcomes.iter().enumerate() {
        assert_nothing_lost_or_doubled(standby_app, &format!("w{w}-"), outcome).await;
    }
    let what = "on the node that took over from a primary killed with its data deleted";
    lived
        .assert_kept(&standby_app.url(""), &store_b(), what)
        .await;
    drop(primary_app);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_rejoining_empty_catches_up_under_writes_and_takes_over_holding_everything() {
    let test = "a_node_rejoining_empty_catches_up_under_writes_and_takes_over_holding_everything";
    // Snapshots every 40 messages, so the changelog is trimmed while the test runs and the
    // node that returns empty must start from a snapshot.
    let Some(mut group) = Group::start(test, 2, &["--changelog-snapshot-every", "40"]).await else {
        return;
    };
    let primary = group.primary(Duration::from_secs(20)).await;
    let standby = 1 - primary;
    // Writes until the changelog has been trimmed behind a snapshot (bounded).
    let mut outcomes = BTreeMap::new();
    let mut n = 0;
    loop {
        outcomes.insert(n, keyed_create(group.app(primary), "r", n).await);
        n += 1;
        if n % 20 == 0 && group.stream_bounds().await.0 > 1 {
            break;
        }
        assert!(
            n < 2_000,
            "the changelog was never trimmed:\n{}",
            group.logs()
        );
    }
    // The standby dies and loses its disk; writes go on without it.
    group.kill_and_wipe(standby);
    for _ in 0..100 {
        outcomes.insert(n, keyed_create(group.app(primary), "r", n).await);
        n += 1;
    }
    // It returns empty and catches up while writes go on.
    group.restart(standby).await;
    let rejoined_at = n;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        outcomes.insert(n, keyed_create(group.app(primary), "r", n).await);
        n += 1;
        let (_, body) = health(group.app(standby)).await;
        if n >= rejoined_at + 50 && body["state"] == "following" && body["lag"] == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the rejoining node did not catch up: {body}, stream {:?} after {n} writes\n{}",
            group.stream_bounds().await,
            group.logs()
        );
    }
    assert!(
        group
            .app(standby)
            .stderr_tail()
            .contains("loaded the group's replica snapshot"),
        "the empty node started from a snapshot:\n{}",
        group.app(standby).stderr_tail()
    );
    eprintln!(
        "{} writes, changelog {:?} (first, last)",
        outcomes.len(),
        group.stream_bounds().await
    );
    // Now the primary dies; the rejoined node takes over with everything.
    let killed_at = Instant::now();
    group.kill_and_wipe(primary);
    let took = until_serving(group.app(standby), Duration::from_secs(20))
        .await
        .unwrap_or_else(|| panic!("the rejoined node did not take over:\n{}", group.logs()));
    eprintln!(
        "rejoined node took over {} ms after the kill",
        took.as_millis()
    );
    assert!(killed_at.elapsed() <= FAILOVER_BOUND + Duration::from_secs(1));
    assert!(
        outcomes.values().all(|o| matches!(o, Outcome::Acked(_))),
        "every write before the kill was acknowledged"
    );
    assert_nothing_lost_or_doubled(group.app(standby), "r", &outcomes).await;
    let (customers, _) = group.app(standby).all_customers_as(&store_a()).await;
    assert_eq!(
        customers.len(),
        outcomes.len(),
        "no customer more, none less"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nodes_killed_and_restarted_on_their_own_directories_resume_and_lose_nothing() {
    let test = "nodes_killed_and_restarted_on_their_own_directories_resume_and_lose_nothing";
    let Some(mut group) = Group::start(test, 2, &[]).await else {
        return;
    };
    let primary = group.primary(Duration::from_secs(20)).await;
    let standby = 1 - primary;
    let mut outcomes = BTreeMap::new();
    for n in 0..60 {
        outcomes.insert(n, keyed_create(group.app(primary), "k", n).await);
    }
    // The standby is killed mid-apply and comes back on its own directory: it resumes after
    // the last message its copy made durable, not from the start.
    wait_caught_up(group.app(standby)).await;
    // A copy is made durable at least every second (see the follower).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    if let Some(mut app) = group.members[standby].app.take() {
        app.crash();
    }
    for n in 60..120 {
        outcomes.insert(n, keyed_create(group.app(primary), "k", n).await);
    }
    group.restart(standby).await;
    wait_caught_up(group.app(standby)).await;
    let line = group
        .app(standby)
        .wait_for_stderr_line(Duration::from_secs(10), |line| {
            line.contains("following the changelog from the message after")
        })
        .unwrap_or_else(|| panic!("no resume line:\n{}", group.app(standby).stderr_tail()));
    let applied: u64 = line
        .split("applied=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no position in {line}"));
    assert!(
        applied >= 60,
        "the restarted standby resumed from {applied}, not where it stopped"
    );
    let resumed = group.app(standby).stderr_tail();
    assert!(
        !resumed.contains("rebuilding"),
        "a standby's copy is kept:\n{resumed}"
    );
    // The primary is killed and restarted on its own directory: the other node takes over,
    // and the old primary, whose copy may hold writes the changelog refused, rebuilds it
    // from the group and follows.
    if let Some(mut app) = group.members[primary].app.take() {
        app.crash();
    }
    until_serving(group.app(standby), Duration::from_secs(20))
        .await
        .unwrap_or_else(|| panic!("no takeover:\n{}", group.logs()));
    for n in 120..150 {
        outcomes.insert(n, keyed_create(group.app(standby), "k", n).await);
    }
    group.restart(primary).await;
    wait_caught_up(group.app(primary)).await;
    assert!(
        group
            .app(primary)
            .stderr_tail()
            .contains("rebuilding it from the group"),
        "the old primary rebuilt its copy:\n{}",
        group.app(primary).stderr_tail()
    );
    assert!(outcomes.values().all(|o| matches!(o, Outcome::Acked(_))));
    // Back the other way: the rebuilt node takes over holding everything.
    if let Some(mut app) = group.members[standby].app.take() {
        app.crash();
    }
    until_serving(group.app(primary), Duration::from_secs(20))
        .await
        .unwrap_or_else(|| panic!("no takeover by the rebuilt node:\n{}", group.logs()));
    assert_nothing_lost_or_doubled(group.app(primary), "k", &outcomes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_primary_frozen_past_its_lease_acknowledges_nothing_and_turns_standby() {
    let test = "a_primary_frozen_past_its_lease_acknowledges_nothing_and_turns_standby";
    let Some(group) = Group::start(test, 2, &[]).await else {
        return;
    };
    let old = group.primary(Duration::from_secs(20)).await;
    let new = 1 - old;
    for n in 0..5 {
        assert!(matches!(
            keyed_create(group.app(old), "f", n).await,
            Outcome::Acked(_)
        ));
    }
    group.app(old).signal("STOP");
    // A write sent to the frozen primary waits in its socket.
    let frozen_write = {
        let address = group.app(old).address.clone();
        let client = reqwest::Client::new();
        tokio::spawn(async move {
            let body = serde_json::to_vec(&customer_body("frozen@example.com")).unwrap();
            let creds = store_a();
            client
                .post(format!("{address}/v1/customers"))
                .header("API-Key", creds.key.as_str())
                .header("API-Secret", creds.secret.as_str())
                .header("Content-Type", "application/json")
                .body(body)
                .timeout(Duration::from_secs(30))
                .send()
                .await
                .map(|response| response.status().as_u16())
        })
    };
    let took = until_serving(group.app(new), Duration::from_secs(20)).await;
    let took = took.unwrap_or_else(|| {
        group.app(old).signal("CONT");
        panic!(
            "no takeover while the primary was frozen:\n{}",
            group.logs()
        )
    });
    eprintln!(
        "the standby took over {} ms after the freeze",
        took.as_millis()
    );
    for n in 5..10 {
        assert!(matches!(
            keyed_create(group.app(new), "f", n).await,
            Outcome::Acked(_)
        ));
    }
    group.app(old).signal("CONT");
    let answer = tokio::time::timeout(Duration::from_secs(30), frozen_write)
        .await
        .expect("the frozen write is answered")
        .expect("the task");
    assert!(
        !matches!(answer, Ok(201)),
        "the deposed primary acknowledged a write: {answer:?}"
    );
    // It reports standby, and never serves while the new primary does.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = health(group.app(old)).await;
        if status == 503 && body["role"] == "standby" && body["state"] == "following" {
            break;
        }
        assert_ne!(status, 200, "the thawed primary serves again: {body}");
        assert!(
            Instant::now() < deadline,
            "the thawed primary never became a following standby: {body}\n{}",
            group.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(group.primary(Duration::from_secs(5)).await, new);
    assert!(
        group
            .app(new)
            .lookup_email("frozen@example.com")
            .await
            .is_empty(),
        "the unacknowledged write is nowhere"
    );
    for n in 0..10 {
        let found = group
            .app(new)
            .lookup_email(&format!("f{n}@example.com"))
            .await;
        assert_eq!(found.len(), 1, "f{n} on the new primary");
    }
    let response = group.app(old).get("/v1/customers").await;
    assert_eq!(response.status, 503, "the old primary refuses requests");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_nats_server_killed_mid_load_loses_nothing_and_writes_go_on() {
    let test = "one_nats_server_killed_mid_load_loses_nothing_and_writes_go_on";
    let Some(mut group) = Group::start(test, 2, &[]).await else {
        return;
    };
    group.primary(Duration::from_secs(20)).await;
    let apps: Vec<Arc<TestApp>> = group
        .members
        .iter_mut()
        .map(|member| Arc::new(member.app.take().expect("runs")))
        .collect();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let tasks: Vec<_> = (0..4)
        .map(|w| {
            tokio::spawn(write_to_group_until(
                apps.clone(),
                format!("n{w}-"),
                stop.clone(),
            ))
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    // The server that leads the changelog stream: its loss makes the stream elect another
    // leader, the longest wait a single server's death can cause.
    let leader = group.nats.stream_leader(&group.stream).await;
    eprintln!("killing n{}, the changelog stream's leader", leader + 1);
    group.nats.kill(leader);
    let killed_at = Instant::now();
    // Writes go on for a while after the kill, then stop.
    tokio::time::sleep(Duration::from_millis(12_000)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    // The loss was the leader's: the stream has elected another.
    let now_leading = group.nats.stream_leader_now(&group.stream).await;
    assert!(
        now_leading.is_some_and(|now| now != leader),
        "the changelog stream is led by {:?}, not by another than n{}\n{}",
        now_leading.map(|i| format!("n{}", i + 1)),
        leader + 1,
        group.nats.all_logs()
    );
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.expect("a writer"));
    }
    let unknown: usize = outcomes
        .iter()
        .flat_map(|o| o.values())
        .filter(|o| matches!(o, Outcome::Unknown(_)))
        .count();
    let acked: usize = outcomes.iter().map(BTreeMap::len).sum::<usize>() - unknown;
    eprintln!("{acked} creates acknowledged, {unknown} unanswered, while the stream's leader died");
    for group_member in &mut group.members {
        group_member.app = None;
    }
    let mut apps = apps
        .into_iter()
        .map(|app| Arc::into_inner(app).expect("writers are done"));
    group.members[0].app = apps.next();
    group.members[1].app = apps.next();
    // Writes went on: a write is acknowledged by the group, and everything is there.
    let primary = group.primary(Duration::from_secs(20)).await;
    let after = keyed_create(group.app(primary), "after-", 0).await;
    assert!(
        matches!(after, Outcome::Acked(_)),
        "writes stopped after a NATS server died: {after:?} ({} ms after)\n{}",
        killed_at.elapsed().as_millis(),
        group.logs()
    );
    let acked_after_kill = outcomes
        .iter()
        .map(|o| {
            o.values()
                .rev()
                .take(5)
                .filter(|o| matches!(o, Outcome::Acked(_)))
                .count()
        })
        .sum::<usize>();
    assert!(
        acked_after_kill > 0,
        "no writer got a write through at the end"
    );
    for (w, outcome) in outcomes.iter().enumerate() {
        assert_nothing_lost_or_doubled(group.app(primary), &format!("n{w}-"), outcome).await;
    }
    // The other node holds them too, once it has taken over.
    let standby = 1 - primary;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, body) = health(group.app(standby)).await;
        if body["lag"] == 0 && body["state"] == "following" {
            break;
        }
        assert!(Instant::now() < deadline, "the standby fell behind: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let killed_at = Instant::now();
    group.kill_and_wipe(primary);
    until_serving(group.app(standby), Duration::from_secs(20))
        .await
        .unwrap_or_else(|| panic!("no takeover with one NATS server down:\n{}", group.logs()));
    eprintln!(
        "takeover with one NATS server down: {} ms",
        killed_at.elapsed().as_millis()
    );
    for (w, outcome) in outcomes.iter().enumerate() {
        let acked: BTreeMap<usize, Outcome> = outcome
            .iter()
            .filter(|(_, o)| matches!(o, Outcome::Acked(_)))
            .map(|(n, o)| (*n, o.clone()))
            .collect();
        assert_nothing_lost_or_doubled(group.app(standby), &format!("n{w}-"), &acked).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_a_quorum_the_primary_stalls_acknowledges_nothing_and_resumes_after() {
    let test = "without_a_quorum_the_primary_stalls_acknowledges_nothing_and_resumes_after";
    let Some(mut group) = Group::start(test, 2, &[]).await else {
        return;
    };
    let primary = group.primary(Duration::from_secs(20)).await;
    assert!(matches!(
        keyed_create(group.app(primary), "q", 0).await,
        Outcome::Acked(_)
    ));
    // Two of the three NATS servers die: no quorum, so nothing can be acknowledged.
    group.nats.kill(1);
    group.nats.kill(2);
    let app = Arc::new(group.members[primary].app.take().expect("runs"));
    let task = {
        let writer = app.clone();
        tokio::spawn(async move { keyed_create(&writer, "q", 1).await })
    };
    // The primary says it is stalled, so a front end stops sending it requests.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, body) = health(&app).await;
        if status == 503 && body["state"] == "stalled" {
            break;
        }
        assert!(!task.is_finished(), "a write was answered without a quorum");
        assert!(
            Instant::now() < deadline,
            "the primary never reported a stall: {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!task.is_finished(), "a write was answered without a quorum");
    // A second server returns within the primary's patience: the write goes through.
    group.nats.restart(1).await;
    let outcome = tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("the write is answered")
        .expect("the writer");
    group.members[primary].app = Arc::into_inner(app);
    let now_primary = group.primary(Duration::from_secs(20)).await;
    let found = group.app(now_primary).lookup_email("q1@example.com").await;
    // The quorum came back before the primary gave up its place: the write that waited for
    // it is acknowledged, and is there once.
    let Outcome::Acked(id) = outcome else {
        panic!(
            "the write that waited for a quorum was not acknowledged once it returned: \
             {outcome:?}\n{}",
            group.logs()
        );
    };
    let ids: Vec<i64> = found.iter().filter_map(|c| c["id"].as_i64()).collect();
    assert_eq!(ids, vec![id], "the acknowledged write is there, once");
    let mut outcomes = BTreeMap::new();
    outcomes.insert(0, Outcome::Unknown("checked again".into()));
    outcomes.insert(1, outcome);
    assert_nothing_lost_or_doubled(group.app(now_primary), "q", &outcomes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_through_haproxy_during_a_failover_see_only_503_or_refusals_for_at_most_5_s() {
    let test = "writes_through_haproxy_during_a_failover_see_only_503_or_refusals_for_at_most_5_s";
    let Some(mut group) = Group::start(test, 2, &[]).await else {
        return;
    };
    let primary = group.primary(Duration::from_secs(20)).await;
    let backends: Vec<std::net::SocketAddr> = (0..2)
        .map(|i| format!("127.0.0.1:{}", group.app(i).port).parse().unwrap())
        .collect();
    let Some(haproxy) = Haproxy::start(test, &backends) else {
        return;
    };
    let front = front_of(&haproxy);
    // Wait until HAProxy has found the primary.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !matches!(keyed_create_at(&front, "h", 100_000).await, (201, _)) {
        assert!(
            Instant::now() < deadline,
            "HAProxy never reached the primary"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut log: Vec<(Duration, u16)> = Vec::new();
    let started = Instant::now();
    let mut killed_at = None;
    let mut n = 0;
    while started.elapsed() < Duration::from_secs(12) {
        if killed_at.is_none() && started.elapsed() >= Duration::from_secs(1) {
            group.kill_and_wipe(primary);
            killed_at = Some(started.elapsed());
        }
        let (status, _) = keyed_create_at(&front, "h", n).await;
        log.push((started.elapsed(), status));
        n += 1;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let killed_at = killed_at.expect("killed");
    for (at, status) in &log {
        assert!(
            matches!(status, 201 | 503 | 0),
            "a write at {at:?} got {status} through HAProxy"
        );
    }
    let last_before = log
        .iter()
        .filter(|(at, s)| *s == 201 && *at <= killed_at)
        .map(|(at, _)| *at)
        .next_back()
        .unwrap_or(killed_at);
    let first_after = log
        .iter()
        .find(|(at, s)| *s == 201 && *at > killed_at)
        .map(|(at, _)| *at)
        .unwrap_or_else(|| panic!("no write got through after the failover:\n{}", group.logs()));
    let gap = first_after - last_before;
    let refused = log.iter().filter(|(_, s)| *s != 201).count();
    eprintln!(
        "through HAProxy: {refused} writes refused, writes stopped for {} ms",
        gap.as_millis()
    );
    assert!(
        gap <= FAILOVER_BOUND,
        "writes through HAProxy stopped for {gap:?}"
    );
    drop(haproxy);
}

/// A client for HAProxy's front end, and its base URL.
fn front_of(haproxy: &Haproxy) -> (reqwest::Client, String) {
    (
        reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .expect("a client"),
        haproxy.base_url(),
    )
}

/// A keyed create through `front`: the status (0 without an answer) and the body.
async fn keyed_create_at(front: &(reqwest::Client, String), tag: &str, n: usize) -> (u16, Value) {
    let (client, base) = front;
    let creds = store_a();
    let sent = client
        .post(format!("{base}/v1/customers"))
        .header("API-Key", creds.key.as_str())
        .header("API-Secret", creds.secret.as_str())
        .header("Content-Type", "application/json")
        .header("Idempotency-Key", format!("{tag}-{n}"))
        .body(serde_json::to_vec(&customer_body(&format!("{tag}{n}@example.com"))).unwrap())
        .send()
        .await;
    match sent {
        Ok(response) => {
            let status = response.status().as_u16();
            let body = response.json().await.unwrap_or(Value::Null);
            (status, body)
        }
        Err(_) => (0, Value::Null),
    }
}

#[test]
fn a_group_needs_a_node_name_and_durability() {
    let dir = DataDir::new();
    for (args, says) in [
        (vec!["--changelog", "nats://127.0.0.1:4222"], "--node-name"),
        (
            vec![
                "--changelog",
                "nats://127.0.0.1:4222",
                "--node-name",
                "a",
                "--durability",
                "off",
            ],
            "--durability off",
        ),
        (
            vec!["--changelog", "http://127.0.0.1:4222", "--node-name", "a"],
            "not a NATS URL",
        ),
        (
            vec!["--changelog", "nats://127.0.0.1:4222", "--node-name", "a b"],
            "not a node name",
        ),
    ] {
        let finished = serve_to_exit(&dir, &args);
        assert!(
            !finished.status.is_some_and(|s| s.success()),
            "{args:?} was accepted"
        );
        assert!(
            finished.stderr.contains(says),
            "{args:?}: {}",
            finished.stderr
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_whole_group_killed_at_once_under_writes_and_restarted_loses_no_acknowledged_write() {
    let test =
        "replication::the_whole_group_killed_at_once_under_writes_and_restarted_loses_no_acknowledged_write";
    let Some(mut group) = Group::start(test, 2, &[]).await else {
        return;
    };
    group.primary(Duration::from_secs(20)).await;
    let apps: Vec<Arc<TestApp>> = group
        .members
        .iter_mut()
        .map(|member| Arc::new(member.app.take().expect("runs")))
        .collect();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let tasks: Vec<_> = (0..4)
        .map(|w| {
            tokio::spawn(write_to_group_until(
                apps.clone(),
                format!("all{w}-"),
                stop.clone(),
            ))
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // kill -9 of every process of the group, NATS servers included, at once.
    for app in &apps {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(app.pid() as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .expect("SIGKILL");
    }
    for i in 0..3 {
        group.nats.kill(i);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.expect("a writer"));
    }
    drop(apps);
    group.nats.restart_all().await;
    for i in 0..2 {
        group.restart(i).await;
    }
    let primary = group.primary(Duration::from_secs(60)).await;
    let acked: usize = outcomes
        .iter()
        .flat_map(|o| o.values())
        .filter(|o| matches!(o, Outcome::Acked(_)))
        .count();
    eprintln!("{acked} creates acknowledged before the whole group was killed");
    assert!(acked > 20, "the writers got few writes through: {acked}");
    for (w, outcome) in outcomes.iter().enumerate() {
        assert_nothing_lost_or_doubled(group.app(primary), &format!("all{w}-"), outcome).await;
    }
}

#[test]
fn changelog_user_writes_a_seed_only_its_owner_reads_and_a_node_refuses_any_other_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = DataDir::new();
    let seed_file = dir.sibling("node-a.nk");
    let mut cmd = boxsub_command();
    cmd.args(["changelog-user", "--output"]).arg(&seed_file);
    let finished = run_to_exit(cmd, Duration::from_secs(20));
    assert!(
        finished.status.is_some_and(|s| s.success()),
        "{}",
        finished.stderr
    );
    let public_key = finished.stdout.trim();
    assert!(
        public_key.starts_with('U') && public_key.len() == 56,
        "a user's public key: {public_key}"
    );
    let seed = std::fs::read_to_string(&seed_file).unwrap();
    assert!(seed.trim().starts_with("SU"), "a user's seed");
    assert!(
        !finished.stdout.contains(seed.trim()),
        "the seed is never printed"
    );
    let mode = std::fs::metadata(&seed_file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "readable by its owner only");
    // Never over an existing file.
    let mut again = boxsub_command();
    again.args(["changelog-user", "--output"]).arg(&seed_file);
    let refused = run_to_exit(again, Duration::from_secs(20));
    assert!(!refused.status.is_some_and(|s| s.success()));
    assert_eq!(std::fs::read_to_string(&seed_file).unwrap(), seed);
    // A node refuses at start a credentials file that holds no user, and a CA file that
    // holds no certificate, naming the flag.
    let not_creds = dir.sibling("not-creds");
    std::fs::write(&not_creds, "hello\n").unwrap();
    let base = ["--changelog", "nats://127.0.0.1:4222", "--node-name", "a"];
    for (flag, file, says) in [
        ("--changelog-creds", &not_creds, "holds neither"),
        ("--changelog-tls-ca", &not_creds, "holds no PEM certificate"),
    ] {
        let file = file.display().to_string();
        let mut args = base.to_vec();
        args.extend([flag, file.as_str()]);
        let finished = serve_to_exit(&dir, &args);
        assert!(!finished.status.is_some_and(|s| s.success()), "{args:?}");
        assert!(
            finished.stderr.contains(flag) && finished.stderr.contains(says),
            "{args:?}: {}",
            finished.stderr
        );
        assert!(
            !finished.stderr.contains("hello"),
            "a secret file's text is never shown"
        );
    }
}
