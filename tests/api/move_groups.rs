//! Moves into and out of a replicated group, under load, behind a real HAProxy: shard two
//! is a group of two nodes on a NATS cluster whose messages are at most 64 KiB (so the
//! copy's batches must be cut to fit). Store B moves into the group and store C out of it
//! while carts write to both; every acknowledged write is found once, and the group still
//! holds store B after its primary is killed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::helpers::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_webstore_moves_into_a_replicated_group_and_another_out_of_it_under_load() {
    let test =
        "move_groups::a_webstore_moves_into_a_replicated_group_and_another_out_of_it_under_load";
    let nats = NatsOptions {
        max_payload: Some(64 * 1024),
        ..Default::default()
    };
    let Some(mut deployment) = Deployment::start_with_group(test, nats).await else {
        return;
    };
    let base = deployment.base();
    // Enough that a batch of a thousand records would be far over a message.
    seed_customers(&base, &store_b(), "seed-b", 150).await;
    seed_customers(&base, &store_c(), "seed-c", 150).await;
    let stop = Arc::new(AtomicBool::new(false));
    let carts: Vec<_> = [(store_b(), "b"), (store_c(), "c")]
        .into_iter()
        .map(|(creds, tag)| tokio::spawn(cart(base.clone(), creds, tag.to_owned(), stop.clone())))
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    for (webstore, to) in [(STORE_B, "two"), (STORE_C, "one")] {
        let moved = tokio::task::block_in_place(|| deployment.move_webstore(webstore, to));
        assert!(
            moved.status.is_some_and(|s| s.success()),
            "moving {webstore} to {to}:\n{}\n{}",
            moved.stdout,
            moved.stderr
        );
        eprintln!("{webstore} to {to}:\n{}", moved.stdout);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let mut logs = Vec::new();
    for cart in carts {
        logs.push(cart.await.expect("a cart"));
    }
    for (log, (creds, tag)) in logs.iter().zip([(store_b(), "b"), (store_c(), "c")]) {
        assert!(
            log.iter().all(|(_, s, _)| matches!(s, 201 | 503)),
            "{tag}: {:?}",
            log.iter()
                .filter(|(_, s, _)| !matches!(s, 201 | 503))
                .collect::<Vec<_>>()
        );
        assert!(log.iter().filter(|(_, s, _)| *s == 201).count() > 10);
        assert_each_once(&base, &creds, tag, log).await;
    }
    assert_each_once(&base, &store_b(), "seed-b", &[]).await;
    assert_each_once(&base, &store_c(), "seed-c", &[]).await;
    // The group keeps store B through a failover.
    let Shard::Group(group) = &mut deployment.two else {
        unreachable!("shard two is a group")
    };
    let primary = group.primary(Duration::from_secs(20)).await;
    group.kill_and_wipe(primary);
    let standby = 1 - primary;
    until_serving(group.app(standby), Duration::from_secs(20))
        .await
        .unwrap_or_else(|| panic!("no takeover in the group:\n{}", group.logs()));
    let (customers, _) = group.app(standby).all_customers_as(&store_b()).await;
    let b_written = 150 + logs[0].len();
    assert_eq!(
        customers.len(),
        b_written,
        "store B whole after the failover"
    );
}
