//! A replicated group under a failing network, with real processes on loopback: three
//! clustered `nats-server` processes, two boxsub nodes, each reaching the NATS servers only
//! through links of its own ([`Link`]) that a test cuts (every byte stalls, nothing is
//! closed) and heals. Under keyed creates from carts that retry on the other node, and
//! readers that look up the customers being created on both nodes:
//!
//! - the primary cut off from all three NATS servers: the standby takes over within 5 s;
//!   the cut-off node acknowledges nothing it cannot make durable, answers no read once its
//!   read lease is gone (before the standby could take over), and follows after the heal;
//! - cut off from two of three: writes go on;
//! - its links flapping every 0.75 s for 15 s.
//!
//! After each: every acknowledged write is readable once, every unanswered keyed write,
//! retried, exists once, and no reader was ever shown a customer that the group then did
//! not hold (with the id it was shown).
//!
//! [`Link`]: crate::helpers::Link

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::helpers::*;

/// How long a standby waits for a quiet changelog before it takes over (the node's
/// `replication::LEASE`): no primary's read may be answered later than this after it was
/// cut off.
const LEASE: Duration = Duration::from_secs(2);

/// Carts and readers on a running group.
struct Load {
    apps: Vec<Arc<TestApp>>,
    stop: Arc<AtomicBool>,
    writers: Vec<tokio::task::JoinHandle<BTreeMap<usize, Outcome>>>,
    readers: tokio::task::JoinHandle<Vec<Read>>,
    tags: Vec<String>,
}

impl Load {
    /// Three carts writing keyed creates tagged `{tag}{w}-` to the group, and a reader
    /// looking them up on every node; the nodes' processes move into the load until
    /// [`Load::finish`].
    fn start(group: &mut Group, tag: &str) -> Load {
        let apps: Vec<Arc<TestApp>> = group
            .members
            .iter_mut()
            .map(|member| Arc::new(member.app.take().expect("the node runs")))
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let mut writers = Vec::new();
        let mut watched = Vec::new();
        let mut tags = Vec::new();
        for w in 0..3 {
            let tag = format!("{tag}{w}-");
            let progress = Arc::new(AtomicUsize::new(0));
            watched.push((tag.clone(), progress.clone()));
            tags.push(tag.clone());
            writers.push(tokio::spawn(write_to_group_showing(
                apps.clone(),
                tag,
                stop.clone(),
                progress,
            )));
        }
        let readers = tokio::spawn(read_until(apps.clone(), watched, stop.clone()));
        Load {
            apps,
            stop,
            writers,
            readers,
            tags,
        }
    }

    /// Stops the carts and the reader and gives the processes back to `group`: what became
    /// of each cart's creates, and every read.
    async fn finish(self, group: &mut Group) -> (Vec<BTreeMap<usize, Outcome>>, Vec<Read>) {
        self.stop.store(true, Ordering::Relaxed);
        let mut outcomes = Vec::new();
        for writer in self.writers {
            outcomes.push(writer.await.expect("a cart"));
        }
        let reads = self.readers.await.expect("the reader");
        for (member, app) in group.members.iter_mut().zip(self.apps) {
            member.app = Some(Arc::into_inner(app).expect("the load is done with it"));
        }
        (outcomes, reads)
    }
}

/// Everything the group must hold after a fault: each cart's acknowledged creates with their
/// ids, each unanswered one once after its retry, and every customer a reader was shown.
async fn assert_group_holds(
    group: &Group,
    tags: &[String],
    outcomes: &[BTreeMap<usize, Outcome>],
    reads: &[Read],
) {
    let primary = group.primary(Duration::from_secs(30)).await;
    for (tag, outcome) in tags.iter().zip(outcomes) {
        assert_nothing_lost_or_doubled(group.app(primary), tag, outcome).await;
    }
    let shown = assert_every_read_held(group.app(primary), reads).await;
    let acked: usize = outcomes
        .iter()
        .flat_map(|o| o.values())
        .filter(|o| matches!(o, Outcome::Acked(_)))
        .count();
    eprintln!(
        "{acked} creates acknowledged, {} reads, {shown} customers shown to readers: all held",
        reads.len()
    );
    assert!(acked > 20, "the carts got few writes through: {acked}");
}

/// Waits (bounded) until node `i` follows the group again, holding the whole changelog.
async fn wait_following(group: &Group, i: usize, within: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let (_, body) = health(group.app(i)).await;
        if body["state"] == "following" && body["lag"] == 0 {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "node {i} does not follow again: {body}\n{}",
            group.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_primary_cut_off_from_every_nats_server_shows_nothing_the_group_lacks_and_follows_after_the_heal(
) {
    let test = "partitions::a_primary_cut_off_from_every_nats_server_shows_nothing_the_group_lacks_and_follows_after_the_heal";
    let Some(mut group) = Group::start(test, 2, &[]).await else {
        return;
    };
    let primary = group.primary(Duration::from_secs(20)).await;
    let standby = 1 - primary;
    let load = Load::start(&mut group, "cut");
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let cut_at = Instant::now();
    group.cut(primary, &[0, 1, 2]);
    let took = until_serving(&load.apps[standby], Duration::from_secs(20))
        .await
        .unwrap_or_else(|| panic!("no takeover while the primary was cut off"));
    eprintln!(
        "the standby took over {} ms after the primary was cut off",
        took.as_millis()
    );
    assert!(took <= FAILOVER_BOUND, "the takeover took {took:?}");
    // The carts and the reader go on against both nodes while the old primary stays cut off.
    tokio::time::sleep((cut_at + Duration::from_secs(8)).saturating_duration_since(Instant::now()))
        .await;
    group.heal(primary);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let tags = load.tags.clone();
    let (outcomes, reads) = load.finish(&mut group).await;

    // No read of the cut-off node was answered once a standby could have taken over.
    let late: Vec<&Read> = reads
        .iter()
        .filter(|read| read.node == primary && read.status == 200 && read.at > cut_at + LEASE)
        .collect();
    assert!(
        late.is_empty(),
        "the cut-off primary answered {} reads more than {LEASE:?} after the cut: {:?}",
        late.len(),
        late.first()
    );
    let refused = reads
        .iter()
        .filter(|read| {
            read.node == primary
                && read.at > cut_at + LEASE
                && read.at < cut_at + Duration::from_secs(8)
        })
        .count();
    assert!(refused > 0, "the reader asked the cut-off node nothing");
    let last_answer = reads
        .iter()
        .filter(|read| read.node == primary && read.status == 200 && read.at > cut_at)
        .map(|read| read.at - cut_at)
        .max();
    eprintln!("the cut-off primary's last read answered {last_answer:?} after the cut");
    let rejoined = wait_following(&group, primary, Duration::from_secs(40)).await;
    eprintln!(
        "the old primary followed again {} ms after the heal settled",
        rejoined.as_millis()
    );
    assert_eq!(group.primary(Duration::from_secs(5)).await, standby);
    assert_group_holds(&group, &tags, &outcomes, &reads).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_primary_cut_off_from_two_of_three_nats_servers_leaves_the_group_writing() {
    let test =
        "partitions::a_primary_cut_off_from_two_of_three_nats_servers_leaves_the_group_writing";
    let Some(mut group) = Group::start(test, 2, &[]).await else {
        return;
    };
    let primary = group.primary(Duration::from_secs(20)).await;
    let load = Load::start(&mut group, "two");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // The servers the primary is connected to (a connection for the changelog, one for
    // snapshot parts) are among the two cut off, so that its client must find the third.
    let links = &group.members[primary].links;
    let mut cut: Vec<usize> = (0..3)
        .filter(|&i| links[i].open_connections() > 0)
        .collect();
    assert!(
        !cut.is_empty(),
        "the primary is connected through its links"
    );
    let mut other = 0;
    while cut.len() < 2 {
        if !cut.contains(&other) {
            cut.push(other);
        }
        other += 1;
    }
    eprintln!("the primary is connected through {cut:?} of its links; cutting those");
    group.cut(primary, &cut);
    // However the group settles (the primary moves to its third server, or the standby takes
    // over), a cart's write goes through while the links stay cut.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let probe_started = Instant::now();
    let mut through = None;
    while probe_started.elapsed() < FAILOVER_BOUND {
        for app in &load.apps {
            if let Outcome::Acked(_) = keyed_create(app, "probe", 0).await {
                through = Some(probe_started.elapsed());
                break;
            }
        }
        if through.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let through = through.unwrap_or_else(|| panic!("no write went through with two links cut"));
    eprintln!(
        "6 s after two of three links were cut, a write went through in {} ms",
        through.as_millis()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    group.heal(primary);
    let tags = load.tags.clone();
    let (outcomes, reads) = load.finish(&mut group).await;
    assert_group_holds(&group, &tags, &outcomes, &reads).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn links_flapping_every_three_quarters_of_a_second_lose_and_double_nothing() {
    let test =
        "partitions::links_flapping_every_three_quarters_of_a_second_lose_and_double_nothing";
    let Some(mut group) = Group::start(test, 2, &[]).await else {
        return;
    };
    let primary = group.primary(Duration::from_secs(20)).await;
    let load = Load::start(&mut group, "flap");
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let started = Instant::now();
    let mut cut = false;
    while started.elapsed() < Duration::from_secs(15) {
        cut = !cut;
        if cut {
            group.cut(primary, &[0, 1, 2]);
        } else {
            group.heal(primary);
        }
        tokio::time::sleep(Duration::from_millis(750)).await;
    }
    group.heal(primary);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let tags = load.tags.clone();
    let (outcomes, reads) = load.finish(&mut group).await;
    let now_primary = group.primary(Duration::from_secs(30)).await;
    eprintln!(
        "after 15 s of flapping, node {} is the primary (it was {})",
        group.members[now_primary].name, group.members[primary].name
    );
    assert_group_holds(&group, &tags, &outcomes, &reads).await;
}
