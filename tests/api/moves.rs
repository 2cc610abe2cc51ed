//! Moving a webstore between running shards behind a real HAProxy (`boxsub move-webstore`):
//! carts write to three webstores through HAProxy while one of them moves; the webstores
//! that stay see no error, the moving one only 503s for a moment, nothing is lost or doubled
//! (its orders' histories, paused, skipped, rescheduled and cancelled, and its halts included),
//! and every process restarted with its original command line (HAProxy from a freshly
//! generated configuration) serves each webstore from its new shard only. Interrupted moves
//! (the command, the source or the target stopped midway) are run again to completion.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::helpers::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_webstore_moves_between_running_shards_while_carts_write_to_three() {
    let test = "a_webstore_moves_between_running_shards_while_carts_write_to_three";
    let Some(mut deployment) = Deployment::start(test).await else {
        return;
    };
    // Orders of the moving webstore that were paused, skipped, rescheduled and cancelled,
    // and a halted customer: their histories move with them.
    let lived = LivedOrders::make(&deployment.base(), &store_b()).await;
    let stop = Arc::new(AtomicBool::new(false));
    // One clock for the carts' writes and the move.
    let started = Instant::now();
    let carts: Vec<_> = [(store_a(), "a"), (store_b(), "b"), (store_c(), "c")]
        .into_iter()
        .map(|(creds, tag)| {
            tokio::spawn(cart_since(
                started,
                deployment.base(),
                creds,
                tag.to_owned(),
                stop.clone(),
            ))
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let move_began = started.elapsed();
    let moved = {
        let deployment = &deployment;
        tokio::task::block_in_place(|| deployment.move_webstore(STORE_B, "two"))
    };
    let move_ended = started.elapsed();
    assert!(
        moved.status.is_some_and(|s| s.success()),
        "{}\n{}",
        moved.stdout,
        moved.stderr
    );
    eprintln!("move-webstore said:\n{}", moved.stdout);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    stop.store(true, Ordering::Relaxed);
    let mut logs = BTreeMap::new();
    for (tag, cart) in ["a", "b", "c"].into_iter().zip(carts) {
        logs.insert(tag, cart.await.expect("a cart"));
    }
    // The webstores that stayed saw no error at all, and wrote while the move went on.
    for tag in ["a", "c"] {
        let errors: Vec<_> = logs[tag].iter().filter(|(_, s, _)| *s != 201).collect();
        assert!(
            errors.is_empty(),
            "store {tag} saw errors during the move: {errors:?}"
        );
        let during = logs[tag]
            .iter()
            .filter(|(at, s, _)| *s == 201 && (move_began..=move_ended).contains(at))
            .count();
        eprintln!(
            "store {tag}: {during} writes acknowledged during the move's {} ms",
            (move_ended - move_began).as_millis()
        );
        assert!(
            during > 0,
            "store {tag} wrote nothing while store b moved ({move_began:?} to {move_ended:?})"
        );
    }
    // The moving one saw only 503s, for a moment.
    let b = &logs["b"];
    assert!(
        b.iter().all(|(_, s, _)| matches!(s, 201 | 503)),
        "{:?}",
        b.iter()
            .filter(|(_, s, _)| !matches!(s, 201 | 503))
            .collect::<Vec<_>>()
    );
    // Its writes stopped only for a moment, whether the freeze refused them (503) or held
    // them until the target took over: the longest time between two of its acknowledged
    // writes, which were acknowledged before the move began and after it ended.
    let acked: Vec<Duration> = b
        .iter()
        .filter(|(_, s, _)| *s == 201)
        .map(|(at, _, _)| *at)
        .collect();
    assert!(
        acked.first().is_some_and(|at| *at < move_began),
        "store b wrote nothing before the move"
    );
    assert!(
        acked.last().is_some_and(|at| *at > move_ended),
        "store b's writes did not resume after the move"
    );
    let stopped = acked
        .windows(2)
        .map(|pair| pair[1] - pair[0])
        .max()
        .expect("two acknowledged writes");
    let refused = b.iter().filter(|(_, s, _)| *s == 503).count();
    eprintln!(
        "store b: {refused} writes refused; its writes stopped for at most {} ms",
        stopped.as_millis()
    );
    assert!(
        stopped <= Duration::from_secs(2),
        "store b's writes stopped for {stopped:?}"
    );
    let base = deployment.base();
    lived.assert_kept(&base, &store_b(), "after the move").await;
    assert_each_once(&base, &store_a(), "a", &logs["a"]).await;
    assert_each_once(&base, &store_b(), "b", &logs["b"]).await;
    assert_each_once(&base, &store_c(), "c", &logs["c"]).await;
    // The source holds nothing of it, and refuses it with a 503 that a client sends again
    // (to where it moved), not a 421.
    assert_eq!(deployment.one.store_b_listing().await, 503);
    let held = deployment.one.held(STORE_B).await;
    assert_eq!(
        (held["customers"].as_u64(), held["orders"].as_u64()),
        (Some(0), Some(0)),
        "{held}"
    );
    assert_eq!(held["recorded"], "released");
    let placement: Value =
        serde_json::from_str(&std::fs::read_to_string(deployment.path("placement.json")).unwrap())
            .unwrap();
    assert_eq!(placement["webstores"][STORE_B], "two");
    let map = std::fs::read_to_string(deployment.path("shards.map")).unwrap();
    assert!(map.contains(&format!("{STORE_B_KEY} shard_two")), "{map}");
    // Every process restarted with its original command line, HAProxy from a fresh config.
    let b_customers = logs["b"].len() + lived.customers();
    deployment.haproxy = None;
    deployment.one.app = None;
    deployment.two.node_mut().app = None;
    deployment.one.restart().await;
    deployment.two.node_mut().restart().await;
    deployment.refresh_placement();
    assert!(deployment.start_haproxy(test));
    let base = deployment.base();
    assert_eq!(
        deployment.one.store_b_listing().await,
        503,
        "released for good"
    );
    let (b_now, _) = deployment
        .two
        .node()
        .app()
        .all_customers_as(&store_b())
        .await;
    assert_eq!(
        b_now.len(),
        b_customers,
        "store b on shard two after the restarts"
    );
    lived
        .assert_kept(&base, &store_b(), "after the move and the restarts")
        .await;
    assert_eq!(create(&base, &store_b(), "after", 0).await.0, 201);
    assert_eq!(create(&base, &store_a(), "after", 0).await.0, 201);
    // Moving it again is a no-op that says so.
    let again = deployment.move_webstore(STORE_B, "two");
    assert!(
        again.status.is_some_and(|s| s.success()),
        "{}",
        again.stderr
    );
    assert!(again.stdout.contains("nothing to do"), "{}", again.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_move_interrupted_on_either_side_or_in_the_command_completes_when_run_again() {
    let test = "a_move_interrupted_on_either_side_or_in_the_command_completes_when_run_again";
    let Some(mut deployment) = Deployment::start(test).await else {
        return;
    };
    let base = deployment.base();
    for n in 0..20 {
        assert_eq!(create(&base, &store_b(), "m", n).await.0, 201);
    }
    let path = format!("/admin/webstores/{STORE_B}");
    // The command stopped after the freeze: the source refuses the webstore's writes...
    let (status, _) = deployment.one.move_step(STORE_B, "freeze").await;
    assert_eq!(status, 200);
    assert_eq!(create(&base, &store_b(), "m", 99).await.0, 503);
    // ...and the source crashed and came back with its command line: still frozen (durable).
    if let Some(mut app) = deployment.one.app.take() {
        app.crash();
    }
    deployment.one.restart().await;
    deployment.refresh_placement();
    assert!(deployment.start_haproxy(test));
    let base = deployment.base();
    assert_eq!(
        create(&base, &store_b(), "m", 99).await.0,
        503,
        "a restarted source stays frozen"
    );
    assert_eq!(deployment.one.store_b_listing().await, 200, "reads go on");
    // The target took an import and crashed before taking the webstore.
    let export = reqwest::Client::new()
        .get(format!("http://{}{path}/export", deployment.one.admin()))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .to_vec();
    let (status, imported) = admin(
        deployment.two.node(),
        reqwest::Method::POST,
        &format!("{path}/import"),
        export,
    )
    .await;
    assert_eq!(status, 200, "{imported}");
    if let Some(mut app) = deployment.two.node_mut().app.take() {
        app.crash();
    }
    deployment.two.node_mut().restart().await;
    assert_eq!(
        deployment.two.node().store_b_listing().await,
        421,
        "not taken yet"
    );
    deployment.refresh_placement();
    assert!(deployment.start_haproxy(test));
    // Run again, the move completes: nothing lost, nothing twice.
    let moved = deployment.move_webstore(STORE_B, "two");
    assert!(
        moved.status.is_some_and(|s| s.success()),
        "{}\n{}",
        moved.stdout,
        moved.stderr
    );
    let base = deployment.base();
    let (customers, _) = deployment
        .two
        .node()
        .app()
        .all_customers_as(&store_b())
        .await;
    assert_eq!(customers.len(), 20, "{}", moved.stdout);
    assert_eq!(
        create(&base, &store_b(), "m", 99).await.0,
        201,
        "writes resume on the target"
    );
    for n in 0..20 {
        assert_eq!(
            create(&base, &store_b(), "m", n).await.0,
            201,
            "a keyed retry replays"
        );
    }
    let (customers, _) = deployment
        .two
        .node()
        .app()
        .all_customers_as(&store_b())
        .await;
    assert_eq!(customers.len(), 21);
    // The admin listener wants its token.
    let response = reqwest::Client::new()
        .get(format!("http://{}{path}", deployment.two.node().admin()))
        .bearer_auth("wrong-token-wrong-token")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    // A shard never takes back a webstore it released.
    let (status, body) = deployment.one.move_step(STORE_B, "take").await;
    assert_eq!(status, 409, "{body}");
}
