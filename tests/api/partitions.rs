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
//! Every other outlet of the cut-off primary too: under the same load, with a webhook
//! receiver slow enough that deliveries are pending, the primary cut off answers no sign-in
//! (API or app), no feed page, no app page and no idempotent replay, and sends no delivery,
//! once its lease is gone; healed, it is deposed while alive and rebuilds. Every delivery
//! the receiver got, from either node, is an event the group holds (same sequence, same
//! id) about a resource the group holds, and no sequence came with two ids.
//!
//! [`Link`]: crate::helpers::Link

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

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

/// How long after the cut-off node's `/health` first says it lost its lease an answer it
/// decided just before may still arrive (its bytes on their way, the poll's own lag).
const IN_TRANSIT: Duration = Duration::from_millis(200);

/// The password of the customers the probes sign in as.
const PASSWORD: &str = "probe-Passw0rd";

/// One answer a probe of the cut-off node got.
#[derive(Debug, Clone)]
struct Probed {
    what: &'static str,
    at: Instant,
    status: u16,
}

/// A request of a probe, bounded; its status (0 without an answer).
async fn probe(
    app: &TestApp,
    method: reqwest::Method,
    path: &str,
    body: Option<Vec<u8>>,
    headers: &[(&str, &str)],
) -> u16 {
    let sent = tokio::time::timeout(
        Duration::from_secs(10),
        app.try_send(method, path, Some(&store_a()), body, headers),
    )
    .await;
    match sent {
        Ok(Ok(response)) => response.status,
        _ => 0,
    }
}

/// Probes `app` until `stop` as every reader of another kind than a lookup does: a sign-in
/// per email in `emails`, each again and again (their password checks queue, so that some
/// are under way whenever the lease lapses), the feed, an idempotent replay, and a producer
/// signing in to the app and opening its page.
fn start_probes(
    app: Arc<TestApp>,
    emails: Vec<String>,
    replayed: Vec<u8>,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinSet<Vec<Probed>> {
    let mut probes = tokio::task::JoinSet::new();
    for email in emails {
        let (app, stop) = (app.clone(), stop.clone());
        probes.spawn(async move {
            let body = serde_json::to_vec(&json!({"email": email, "password": PASSWORD})).unwrap();
            let mut answers = Vec::new();
            for _ in 0..10_000 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let status = probe(
                    &app,
                    reqwest::Method::POST,
                    "/v1/customers/sign_in",
                    Some(body.clone()),
                    &[("Content-Type", "application/json")],
                )
                .await;
                answers.push(Probed {
                    what: "sign-in",
                    at: Instant::now(),
                    status,
                });
            }
            answers
        });
    }
    {
        let (app, stop) = (app.clone(), stop.clone());
        probes.spawn(async move {
            let mut answers = Vec::new();
            for _ in 0..100_000 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let feed = probe(&app, reqwest::Method::GET, "/v1/events?limit=1", None, &[]).await;
                answers.push(Probed {
                    what: "feed",
                    at: Instant::now(),
                    status: feed,
                });
                let replay = probe(
                    &app,
                    reqwest::Method::POST,
                    "/v1/customers",
                    Some(replayed.clone()),
                    &[
                        ("Content-Type", "application/json"),
                        ("Idempotency-Key", "probe-replayed"),
                    ],
                )
                .await;
                answers.push(Probed {
                    what: "replay",
                    at: Instant::now(),
                    status: replay,
                });
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            answers
        });
    }
    probes.spawn(async move {
        let mut answers = Vec::new();
        for _ in 0..10_000 {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let mut visitor = Visitor::new(&app);
            let form = visitor.get_whatever_it_is("/app/sign_in").await;
            answers.push(Probed {
                what: "app sign-in form",
                at: Instant::now(),
                status: form.status,
            });
            if form.status == 200 {
                let token = form.form_token();
                let (email, password) = PRODUCER_A;
                let signed_in = visitor
                    .post_whatever_it_is(
                        "/app/sign_in",
                        &[
                            ("email", email),
                            ("password", password),
                            ("form_token", &token),
                        ],
                    )
                    .await;
                answers.push(Probed {
                    what: "app sign-in",
                    at: Instant::now(),
                    status: signed_in.status,
                });
                if signed_in.status == 303 {
                    let page = visitor.get_whatever_it_is("/app").await;
                    answers.push(Probed {
                        what: "app page",
                        at: Instant::now(),
                        status: page.status,
                    });
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        answers
    });
    probes
}

/// Orders for `customers`, one after another on the node that takes them, until `stop`.
async fn order_until(apps: Vec<Arc<TestApp>>, customers: Vec<i64>, stop: Arc<AtomicBool>) {
    let mut current = 0;
    for n in 0..100_000usize {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let body = json!({"customer_id": customers[n % customers.len()], "box_id": 218});
        let status = probe(
            &apps[current],
            reqwest::Method::POST,
            "/v1/orders",
            Some(serde_json::to_vec(&body).unwrap()),
            &[("Content-Type", "application/json")],
        )
        .await;
        if status != 201 {
            current = (current + 1) % apps.len();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The default catalogue with a producer account per store, and in store A one webhook
/// endpoint, `erp`, for every event type, at `url` (each node is given its own path, so
/// that the receiver tells their deliveries apart).
fn catalogue_with_webhook(url: &str) -> serde_json::Value {
    let mut catalogue = producers_catalogue();
    catalogue["webstores"][0]["webhooks"] = json!([{
        "id": "erp", "url": url,
        "events": ["customer.created", "customer.updated", "order.created"],
        "secrets": ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"], "allow_private_network": true,
    }]);
    catalogue
}

/// Every event of store A the group holds, as `app` (its primary) feeds them: id by
/// sequence.
async fn group_events(app: &TestApp) -> BTreeMap<u64, String> {
    let mut events = BTreeMap::new();
    let mut path = "/v1/events?limit=1000".to_owned();
    for _ in 0..1_000 {
        let page = app.get(&path).await;
        page.assert_status(200);
        let body = page.json();
        for event in body["events"].as_array().unwrap() {
            events.insert(
                event["sequence"].as_u64().unwrap(),
                event["id"].as_str().unwrap().to_owned(),
            );
        }
        if body["has_more"] != true {
            return events;
        }
        path = format!(
            "/v1/events?after={}&limit=1000",
            body["next"].as_str().unwrap()
        );
    }
    panic!("the feed did not end");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_primary_cut_off_with_deliveries_pending_lets_nothing_out_once_its_lease_is_gone_and_every_delivery_is_held(
) {
    let test = "partitions::a_primary_cut_off_with_deliveries_pending_lets_nothing_out_once_its_lease_is_gone_and_every_delivery_is_held";
    let receiver = Receiver::start().await;
    let dirs = ["a", "b"]
        .iter()
        .map(|name| {
            DataDir::with_catalogue(catalogue_with_webhook(&format!(
                "{}/{name}",
                receiver.url()
            )))
        })
        .collect();
    let extra = ["--webhook-first-retry-secs", "0.2"];
    let Some(mut group) = Group::start_from(test, dirs, &extra, NatsOptions::default()).await
    else {
        return;
    };
    let primary = group.primary(Duration::from_secs(20)).await;
    let standby = 1 - primary;
    let cut_off_path = format!("/hooks/{}", group.members[primary].name);
    // Slow enough that deliveries fall behind the carts: some are pending at the cut.
    receiver.answer(Answer::Slow(204, Duration::from_millis(60)));
    let app = group.app(primary);
    let mut emails = Vec::new();
    let mut customers = Vec::new();
    for n in 0..32 {
        let email = format!("probe{n}@example.com");
        let mut body = customer_body(&email);
        body["password"] = json!(PASSWORD);
        customers.push(app.create_customer_ok(&body).await["id"].as_i64().unwrap());
        emails.push(email);
    }
    let replayed = serde_json::to_vec(&customer_body("replayed@example.com")).unwrap();
    let first = app
        .send(
            reqwest::Method::POST,
            "/v1/customers",
            Some(&store_a()),
            Some(replayed.clone()),
            &[
                ("Content-Type", "application/json"),
                ("Idempotency-Key", "probe-replayed"),
            ],
        )
        .await;
    first.assert_status(201);
    receiver.wait_for_requests(1, Duration::from_secs(20)).await;

    let load = Load::start(&mut group, "out");
    let orders_stop = Arc::new(AtomicBool::new(false));
    let orders = tokio::spawn(order_until(
        load.apps.clone(),
        customers,
        orders_stop.clone(),
    ));
    let probes_stop = Arc::new(AtomicBool::new(false));
    let mut probes = start_probes(
        load.apps[primary].clone(),
        emails,
        replayed,
        probes_stop.clone(),
    );
    tokio::time::sleep(Duration::from_millis(2500)).await;

    // Act: cut the primary off from every NATS server while all of it goes on.
    let cut_at = Instant::now();
    group.cut(primary, &[0, 1, 2]);
    let lapsed_at = {
        let deadline = cut_at + Duration::from_secs(10);
        loop {
            if health(&load.apps[primary]).await.0 != 200 {
                break Instant::now();
            }
            assert!(
                Instant::now() < deadline,
                "the cut-off node never lost its lease"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    until_serving(&load.apps[standby], Duration::from_secs(30))
        .await
        .unwrap_or_else(|| panic!("no takeover while the primary was cut off"));
    tokio::time::sleep((cut_at + Duration::from_secs(8)).saturating_duration_since(Instant::now()))
        .await;
    probes_stop.store(true, Ordering::Relaxed);
    let mut probed = Vec::new();
    while let Some(answers) = probes.join_next().await {
        probed.extend(answers.expect("a probe"));
    }
    // Healed, the old primary learns it was deposed, with deliveries pending, while alive.
    group.heal(primary);
    receiver.answer(Answer::Status(204));
    tokio::time::sleep(Duration::from_secs(2)).await;
    orders_stop.store(true, Ordering::Relaxed);
    orders.await.expect("the orders");
    let tags = load.tags.clone();
    let (outcomes, reads) = load.finish(&mut group).await;
    wait_following(&group, primary, Duration::from_secs(60)).await;
    let new_primary = group.primary(Duration::from_secs(5)).await;
    assert_eq!(new_primary, standby);
    let held = group_events(group.app(new_primary)).await;
    let last = *held.keys().last().expect("events");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !receiver
        .delivered()
        .iter()
        .any(|delivery| delivery.sequence() == last)
    {
        assert!(
            Instant::now() < deadline,
            "the new primary did not deliver up to event {last}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Assert: nothing left the cut-off node once its lease was gone.
    let answered_before = probed
        .iter()
        .filter(|answer| answer.at < cut_at && answer.status == 200)
        .count();
    assert!(
        answered_before > 0,
        "the probes got no answer before the cut"
    );
    let late: Vec<&Probed> = probed
        .iter()
        .filter(|answer| {
            answer.status != 503 && answer.status != 0 && answer.at > lapsed_at + IN_TRANSIT
        })
        .collect();
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for answer in &late {
        *kinds.entry(answer.what).or_default() += 1;
    }
    let requests = receiver.requests();
    let from_cut_off: Vec<&Delivery> = requests
        .iter()
        .filter(|delivery| delivery.path == cut_off_path && delivery.at > cut_at)
        .collect();
    let last_delivery = from_cut_off.iter().map(|delivery| delivery.at).max();
    eprintln!(
        "the cut-off primary lost its lease {} ms after the cut; its last delivery came {:?} ms \
         after the cut ({} after the cut in all); {} probes answered before the cut",
        (lapsed_at - cut_at).as_millis(),
        last_delivery.map(|at| (at - cut_at).as_millis()),
        from_cut_off.len(),
        answered_before
    );
    let late_deliveries = from_cut_off
        .iter()
        .filter(|delivery| delivery.at > lapsed_at + IN_TRANSIT)
        .count();
    assert!(
        late.is_empty() && late_deliveries == 0,
        "more than {IN_TRANSIT:?} after the cut-off node lost its lease ({} ms after the \
         cut), it answered {} requests ({kinds:?}; the first {:?} ms after the loss) and \
         delivered {late_deliveries} events",
        (lapsed_at - cut_at).as_millis(),
        late.len(),
        late.first().map(|answer| (
            answer.what,
            answer.status,
            (answer.at - lapsed_at).as_millis()
        ))
    );

    // Every delivery, from either node, is an event the group holds, about a resource it
    // holds; no sequence came with two ids.
    let mut ids_of: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
    for delivery in &requests {
        ids_of
            .entry(delivery.sequence())
            .or_default()
            .insert(delivery.id.clone());
    }
    let doubled: Vec<_> = ids_of.iter().filter(|(_, ids)| ids.len() > 1).collect();
    assert!(
        doubled.is_empty(),
        "sequences delivered with two ids: {doubled:?}"
    );
    let app = group.app(new_primary);
    let mut resources = BTreeSet::new();
    for delivery in &requests {
        let sequence = delivery.sequence();
        assert_eq!(
            held.get(&sequence),
            Some(&delivery.id),
            "event {sequence} was delivered (to {}) as {} but the group holds {:?}",
            delivery.path,
            delivery.id,
            held.get(&sequence)
        );
        let data = &delivery.json["data"];
        let kind = delivery.json["type"].as_str().unwrap().to_owned();
        if !resources.insert((kind.clone(), data["id"].as_i64().unwrap())) {
            continue;
        }
        match kind.as_str() {
            "order.created" => {
                let order = app.get(&format!("/v1/orders/{}", data["id"])).await;
                order.assert_status(200);
                assert_eq!(order.json()["customer_id"], data["customer_id"]);
            }
            _ => {
                let customer = app.get(&format!("/v1/customers/{}", data["id"])).await;
                customer.assert_status(200);
                assert_eq!(customer.json()["email"], data["email"]);
            }
        }
    }
    eprintln!(
        "{} deliveries of {} events, {} resources: all held by the group",
        requests.len(),
        ids_of.len(),
        resources.len()
    );
    assert_group_holds(&group, &tags, &outcomes, &reads).await;
}
