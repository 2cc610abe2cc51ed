//! Moves that cannot lose, whatever happens and whatever the operator does, behind a real
//! HAProxy:
//!
//! - the command killed with SIGKILL at each of its steps in turn, the source node killed
//!   during the catch-up, the target node killed during it: run again, the move completes,
//!   every acknowledged write of the cart that wrote all along is on the target once, and
//!   the source released it;
//! - a freeze called off and written to, then the move run: every write is copied;
//! - a call-off refused once the webstore was handed over, and a release refused before;
//! - a freeze with `--max-freeze` 0.001 s called off by the source at its limit: a cart
//!   writing beside it sees its writes stop for a moment only, and everything is as before;
//! - a producer's sign-in and sign-out refused (503, nothing changed) while the webstore is
//!   frozen, and its sessions on the target exactly as they were at the freeze;
//! - a missing or unreadable map or placement file stops the move naming the file, and
//!   nothing is changed.

use std::io::BufRead;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::helpers::*;

/// The lines of the command's steps, in order, as it says them.
const STEPS: [&str; 9] = [
    "tracking ",
    "copied ",
    "caught up, round",
    "froze ",
    "shipped the last changes",
    " handed ",
    " took ",
    "switched ",
    " released ",
];

/// Starts `boxsub move-webstore` and waits until it says a line containing `step`; then
/// `then` runs (while the command may go on), and the command is killed with SIGKILL if it
/// still runs. Everything it said.
fn move_until(
    deployment: &Deployment,
    webstore: &str,
    to: &str,
    step: &str,
    then: &mut dyn FnMut(),
) -> String {
    let mut cmd = deployment.move_command(webstore, to);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("the move starts");
    let stdout = child.stdout.take().expect("piped");
    let (lines, said) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut output = Vec::new();
    let mut seen = false;
    while !seen && Instant::now() < deadline {
        match said.recv_timeout(Duration::from_millis(50)) {
            Ok(line) => {
                seen = line.contains(step);
                output.push(line);
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    assert!(seen, "the move never said {step:?}:\n{}", output.join("\n"));
    then();
    let _ = child.kill();
    let _ = child.wait();
    let _ = reader.join();
    output.extend(said.try_iter());
    output.join("\n")
}

/// After a move of webstore `(id, creds)` to shard two: the cart's writes are all there once,
/// the target takes new ones, the source released it.
async fn assert_moved(
    deployment: &Deployment,
    id: &str,
    creds: &Creds,
    tag: &str,
    log: &[(Duration, u16, Option<i64>)],
) {
    let base = deployment.base();
    // 503 while frozen, and, where a node was killed mid-request, HAProxy's 502 or no answer.
    assert!(
        log.iter()
            .all(|(_, status, _)| matches!(status, 201 | 502 | 503 | 0)),
        "{tag}: {:?}",
        log.iter()
            .filter(|(_, s, _)| !matches!(s, 201 | 502 | 503 | 0))
            .collect::<Vec<_>>()
    );
    assert_each_once(&base, creds, tag, log).await;
    assert_eq!(
        create(&base, creds, "after-", 0).await.0,
        201,
        "{id} takes writes"
    );
    let held = deployment.one.held(id).await;
    assert_eq!(held["recorded"], "released", "{id} on shard one: {held}");
    assert_eq!(held["customers"], 0, "{held}");
}

/// Runs the move of `id` to two to its end, asserting it succeeds.
fn move_to_the_end(deployment: &Deployment, id: &str) -> String {
    let moved = deployment.move_webstore(id, "two");
    assert!(
        moved.status.is_some_and(|s| s.success()),
        "{}\n{}",
        moved.stdout,
        moved.stderr
    );
    moved.stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_move_killed_at_each_of_its_steps_or_with_either_node_completes_when_run_again() {
    let test = "move_safety::a_move_killed_at_each_of_its_steps_or_with_either_node_completes_when_run_again";
    let Some(mut deployment) = Deployment::start_moving(test, STEPS.len() + 2).await else {
        return;
    };
    for k in 0..STEPS.len() + 2 {
        let base = deployment.base();
        let (id, creds) = moving_webstore(k);
        let tag = format!("k{k}-");
        seed_customers(&base, &creds, &format!("seed{k}-"), 20).await;
        let stop = Arc::new(AtomicBool::new(false));
        let writing = tokio::spawn(cart(base.clone(), creds.clone(), tag.clone(), stop.clone()));
        tokio::time::sleep(Duration::from_millis(300)).await;
        // The command at step k; then the source, then the target, once the copy is done
        // and the catch-up begins.
        let (step, node_pid) = match k {
            k if k < STEPS.len() => (STEPS[k], None),
            k if k == STEPS.len() => ("copied ", Some(deployment.one.app().pid())),
            _ => ("copied ", Some(deployment.two.node().app().pid())),
        };
        let said = tokio::task::block_in_place(|| {
            move_until(&deployment, &id, "two", step, &mut || {
                if let Some(pid) = node_pid {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid as i32),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
            })
        });
        eprintln!(
            "killed {} at {step:?}; it had said:\n{said}",
            match k {
                k if k < STEPS.len() => "the command",
                k if k == STEPS.len() => "the source",
                _ => "the target",
            }
        );
        if node_pid.is_some() {
            // The node comes back with its command line, on new ports.
            if k == STEPS.len() {
                if let Some(mut app) = deployment.one.app.take() {
                    app.crash();
                }
                deployment.one.restart().await;
            } else {
                let two = deployment.two.node_mut();
                if let Some(mut app) = two.app.take() {
                    app.crash();
                }
                two.restart().await;
            }
            deployment.refresh_placement();
            assert!(deployment.start_haproxy(test));
        }
        let again = tokio::task::block_in_place(|| move_to_the_end(&deployment, &id));
        eprintln!("run again:\n{again}");
        tokio::time::sleep(Duration::from_millis(300)).await;
        stop.store(true, Ordering::Relaxed);
        let log = writing.await.expect("the cart");
        assert!(
            log.iter().filter(|(_, s, _)| *s == 201).count() > 5,
            "the cart wrote little: {}",
            log.len()
        );
        assert_moved(&deployment, &id, &creds, &tag, &log).await;
        assert_each_once(&deployment.base(), &creds, &format!("seed{k}-"), &[]).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_freeze_called_off_and_written_to_is_copied_whole_when_the_move_runs_again() {
    let test =
        "move_safety::a_freeze_called_off_and_written_to_is_copied_whole_when_the_move_runs_again";
    let Some(deployment) = Deployment::start(test).await else {
        return;
    };
    let base = deployment.base();
    let mut log = Vec::new();
    for n in 0..10 {
        let (status, id) = create(&base, &store_b(), "w", n).await;
        log.push((Duration::ZERO, status, id));
    }
    // An operator freezes it, calls the move off, and carts write on.
    for step in ["freeze", "call-off"] {
        let (status, body) = deployment.one.move_step(STORE_B, step).await;
        assert_eq!(status, 200, "{step}: {body}");
    }
    for n in 10..30 {
        let (status, id) = create(&base, &store_b(), "w", n).await;
        assert_eq!(status, 201, "writes are taken again after the call-off");
        log.push((Duration::ZERO, status, id));
    }
    let said = tokio::task::block_in_place(|| move_to_the_end(&deployment, STORE_B));
    assert!(said.contains("copied store-b"), "a full copy:\n{said}");
    let (customers, _) = deployment
        .two
        .node()
        .app()
        .all_customers_as(&store_b())
        .await;
    assert_eq!(
        customers.len(),
        30,
        "every write, before and after the call-off"
    );
    assert_moved(&deployment, STORE_B, &store_b(), "w", &log).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_call_off_is_refused_once_handed_over_and_a_release_before_it() {
    let test = "move_safety::a_call_off_is_refused_once_handed_over_and_a_release_before_it";
    let Some(deployment) = Deployment::start(test).await else {
        return;
    };
    let base = deployment.base();
    let mut log = Vec::new();
    for n in 0..10 {
        let (status, id) = create(&base, &store_b(), "h", n).await;
        log.push((Duration::ZERO, status, id));
    }
    let post = |step: &'static str| deployment.one.move_step(STORE_B, step);
    // A release of a webstore that takes writes, or is only frozen: refused, nothing removed.
    let (status, body) = post("release").await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("handed over"),
        "{body}"
    );
    assert_eq!(post("freeze").await.0, 200);
    let (status, _) = post("release").await;
    assert_eq!(status, 409, "frozen is not handed over");
    let (status, body) = post("hand-over").await;
    assert_eq!(status, 200, "{body}");
    // Handed over: no call-off, and it says what to run.
    let (status, body) = post("call-off").await;
    assert_eq!(status, 409, "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(message.contains("move-webstore"), "{message}");
    assert_eq!(
        create(&base, &store_b(), "h", 99).await.0,
        503,
        "still frozen"
    );
    // The move, run, finishes it: the target gets a whole copy of the frozen source.
    tokio::task::block_in_place(|| move_to_the_end(&deployment, STORE_B));
    assert_moved(&deployment, STORE_B, &store_b(), "h", &log).await;
    let (customers, _) = deployment
        .two
        .node()
        .app()
        .all_customers_as(&store_b())
        .await;
    assert_eq!(
        customers.len(),
        11,
        "the ten, and the one made after the move"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_missing_or_unreadable_map_or_placement_stops_the_move_and_changes_nothing() {
    let test =
        "move_safety::a_missing_or_unreadable_map_or_placement_stops_the_move_and_changes_nothing";
    let Some(deployment) = Deployment::start(test).await else {
        return;
    };
    let base = deployment.base();
    assert_eq!(create(&base, &store_b(), "f", 0).await.0, 201);
    let placement = deployment.path("placement.json");
    let map = deployment.path("shards.map");
    let placement_text = std::fs::read(&placement).unwrap();
    let map_text = std::fs::read(&map).unwrap();
    let broken: [(&std::path::Path, &[u8], &str); 4] = [
        (&map, b"", "shards.map"),
        (&map, b"ak_key_alone\n", "line 1"),
        (&placement, b"", "placement.json"),
        (&placement, b"{not json", "placement.json"),
    ];
    for (file, text, says) in broken {
        if text.is_empty() {
            std::fs::remove_file(file).unwrap();
        } else {
            std::fs::write(file, text).unwrap();
        }
        let refused = tokio::task::block_in_place(|| deployment.move_webstore(STORE_B, "two"));
        assert!(
            !refused.status.is_some_and(|s| s.success()),
            "{}",
            refused.stdout
        );
        assert!(refused.stderr.contains(says), "{says}: {}", refused.stderr);
        // Nothing changed: the other file as it was, the webstore served and not copying.
        if file == map.as_path() {
            assert_eq!(std::fs::read(&placement).unwrap(), placement_text);
        } else {
            assert_eq!(std::fs::read(&map).unwrap(), map_text);
        }
        let held = deployment.one.held(STORE_B).await;
        assert_eq!(held["served"], "here", "{held}");
        assert!(held["copy_session"].is_null(), "{held}");
        std::fs::write(&placement, &placement_text).unwrap();
        std::fs::write(&map, &map_text).unwrap();
    }
    assert_eq!(create(&base, &store_b(), "f", 1).await.0, 201);
    tokio::task::block_in_place(|| move_to_the_end(&deployment, STORE_B));
    let (customers, _) = deployment
        .two
        .node()
        .app()
        .all_customers_as(&store_b())
        .await;
    assert_eq!(customers.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cut_over_longer_than_max_freeze_is_called_off_and_everything_is_as_before() {
    let test =
        "move_safety::a_cut_over_longer_than_max_freeze_is_called_off_and_everything_is_as_before";
    let Some(deployment) = Deployment::start(test).await else {
        return;
    };
    let base = deployment.base();
    let mut log = Vec::new();
    for n in 0..10 {
        let (status, id) = create(&base, &store_b(), "x", n).await;
        log.push((Duration::ZERO, status, id));
    }
    // A cart writes all along: how long its writes stop is how long the freeze lasted.
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let writing = tokio::spawn(cart_since(
        started,
        base.clone(),
        store_b(),
        "xc".into(),
        stop.clone(),
    ));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut cmd = deployment.move_command(STORE_B, "two");
    cmd.args(["--max-freeze", "0.001"]);
    let move_began = started.elapsed();
    let refused = tokio::task::block_in_place(|| run_to_exit(cmd, Duration::from_secs(120)));
    // The freeze was called off before the command said so and exited.
    let called_off_by = started.elapsed();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    stop.store(true, Ordering::Relaxed);
    let cart_log = writing.await.expect("the cart");
    assert!(
        !refused.status.is_some_and(|s| s.success()),
        "{}",
        refused.stdout
    );
    assert!(
        refused.stderr.contains("--max-freeze") && refused.stderr.contains("called off"),
        "{}",
        refused.stderr
    );
    // The source ended the freeze at its limit: the cart's writes stopped for a moment only.
    let acked: Vec<Duration> = cart_log
        .iter()
        .filter(|(_, status, _)| *status == 201)
        .map(|(at, _, _)| *at)
        .collect();
    let stopped = acked
        .windows(2)
        .filter(|pair| pair[1] >= move_began)
        .map(|pair| pair[1] - pair[0])
        .max()
        .expect("writes before and after the attempt");
    let refusals = cart_log.iter().filter(|(_, s, _)| *s == 503).count();
    eprintln!(
        "with --max-freeze 0.001 the cart's writes stopped for at most {} ms ({refusals} \
         refused)",
        stopped.as_millis()
    );
    assert!(
        cart_log.iter().all(|(_, s, _)| matches!(s, 201 | 503)),
        "{cart_log:?}"
    );
    assert!(
        stopped <= Duration::from_secs(1),
        "writes were refused for {stopped:?} with --max-freeze 0.001"
    );
    // How long writes were refused, as the cart saw it: only within the attempt (none before
    // the move began, none answered later than a generous second after the command said the
    // freeze was called off), and in one window no longer than that second.
    let refused_at: Vec<Duration> = cart_log
        .iter()
        .filter(|(_, status, _)| *status == 503)
        .map(|(at, _, _)| *at)
        .collect();
    let grace = Duration::from_secs(1);
    assert!(
        refused_at
            .iter()
            .all(|at| *at >= move_began && *at <= called_off_by + grace),
        "writes refused outside the attempt ({move_began:?} to {called_off_by:?} and a \
         second): {refused_at:?}"
    );
    if let (Some(first), Some(last)) = (refused_at.first(), refused_at.last()) {
        assert!(
            *last - *first <= grace,
            "writes refused from {first:?} to {last:?} with --max-freeze 0.001"
        );
    }
    let after_the_call_off = cart_log
        .iter()
        .filter(|(at, status, _)| *at > called_off_by + grace && *status == 201)
        .count();
    assert!(
        after_the_call_off > 0,
        "the cart wrote again after the call-off: {cart_log:?}"
    );
    // As before the freeze: the source takes the writes, the target has not taken it, the
    // files are as they were.
    let (status, id) = create(&base, &store_b(), "x", 10).await;
    assert_eq!(status, 201, "the source takes its writes again");
    log.push((Duration::ZERO, status, id));
    let held = deployment.one.held(STORE_B).await;
    assert_eq!(held["served"], "here", "{held}");
    assert!(held["recorded"].is_null(), "{held}");
    let target = deployment.two.node().held(STORE_B).await;
    assert_eq!(target["served"], "elsewhere", "{target}");
    let placement = std::fs::read_to_string(deployment.path("placement.json")).unwrap();
    assert!(
        placement.contains(&format!("\"{STORE_B}\": \"one\"")),
        "{placement}"
    );
    // Run with the default bound, the move completes with every write.
    tokio::task::block_in_place(|| move_to_the_end(&deployment, STORE_B));
    assert_moved(&deployment, STORE_B, &store_b(), "x", &log).await;
    assert_each_once(&deployment.base(), &store_b(), "xc", &cart_log).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sign_ins_and_sign_outs_wait_out_a_freeze_and_the_sessions_move_as_they_were() {
    let test =
        "move_safety::sign_ins_and_sign_outs_wait_out_a_freeze_and_the_sessions_move_as_they_were";
    let Some(deployment) = Deployment::start(test).await else {
        return;
    };
    let one = deployment.one.app();
    let day = "/app/deliveries/2027-01-11";
    let mut staying = Visitor::signed_in(one, PRODUCER_A).await;
    let mut leaving = Visitor::signed_in(one, PRODUCER_A).await;
    let leaving_token = leaving.get(day).await.form_token();
    let (status, body) = deployment.one.move_step(STORE_A, "freeze").await;
    assert_eq!(status, 200, "{body}");

    // Frozen: a sign-in and a sign-out are refused for a moment, and say so; pages are read.
    let mut late = Visitor::new(one);
    let refused = late.sign_in(PRODUCER_A).await;
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert_eq!(refused.header("retry-after"), Some("1"));
    assert!(refused.body.contains("being moved"), "{}", refused.body);
    assert!(!late.cookies.contains_key("boxsub_session"));
    let refused = leaving
        .post("/app/sign_out", &[("form_token", &leaving_token)])
        .await;
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert_eq!(leaving.get(day).await.status, 200, "still signed in");
    assert_eq!(staying.get(day).await.status, 200);

    // Act: the move runs from the freeze to its end.
    tokio::task::block_in_place(|| move_to_the_end(&deployment, STORE_A));

    // Assert: on the target, both sessions open the day, and a sign-out there holds.
    let two = deployment.two.node().app();
    for visitor in [&mut staying, &mut leaving] {
        visitor.visit(two);
        assert_eq!(visitor.get(day).await.status, 200, "the session moved");
    }
    let token = leaving.get(day).await.form_token();
    let out = leaving
        .post("/app/sign_out", &[("form_token", &token)])
        .await;
    assert_eq!(out.status, 303);
    assert_eq!(leaving.get(day).await.location(), Some("/app/sign_in"));
    assert_eq!(staying.get(day).await.status, 200);
    late.visit(two);
    let signed_in = late.sign_in(PRODUCER_A).await;
    assert_eq!(
        signed_in.status, 303,
        "the target signs in: {}",
        signed_in.body
    );
}
