//! Crash safety (contract section 6): under concurrent writes (customer and
//! order creates, updates that move customers to new emails, and changes that
//! pause orders) the server is
//! killed (SIGKILL, or SIGTERM for the graceful case) at an unpredictable
//! moment; a new server on the same data directory must hold every write that
//! was acknowledged, identical, and every write that got no answer either
//! wholly or not at all.
//!
//! Here are the load, the kills and the rounds; the requests, each carrying a
//! unique marker, and the ledger that checks the store after every restart are
//! in [`crate::helpers::ledger`]. State accumulates over several crash rounds on
//! one data directory. Kill points come from a xorshift generator seeded from
//! the clock; the seed and each round's kill delay are printed to go with a
//! failure report.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::future::join_all;
use serde_json::Value;

use crate::helpers::ledger::{Answer, Sent, Store, What};
use crate::helpers::{DataDir, Launch, Ledger, TestApp};

/// Concurrent client tasks during a round.
const TASKS: u64 = 8;
/// Requests per task and round, at most.
const MAX_OPS: u64 = 100;
/// Of the [`TASKS`], those below this number write to store A, the rest to B.
const TASKS_A: u64 = 6;
/// How long a round's load may run, at most.
const LOAD_TIME: Duration = Duration::from_millis(1500);
/// The kill comes this many milliseconds after the load starts...
const KILL_MIN_MS: u64 = 50;
/// ...plus up to this many.
const KILL_SPREAD_MS: u64 = 650;
/// A xorshift64 generator.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed | 1)
    }

    /// A generator seeded from the clock; the seed is printed.
    fn from_clock(what: &str) -> Self {
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        eprintln!("{what}: seed {seed}");
        Self::new(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// One client task: creates customers of `store`, orders for them, moves its
/// own customers to new emails and pauses its own orders, until its requests
/// fail (the server is gone), `deadline` passes, or its markers run out. Only
/// this task writes to the customers and orders it creates, so their updates
/// and changes are ordered.
async fn client_task(
    app: &TestApp,
    store: Store,
    markers: std::ops::Range<u64>,
    mut rng: Rng,
    deadline: Instant,
    mut customers: Vec<i64>,
) -> Vec<(Sent, Answer)> {
    let mut done = Vec::new();
    // The customers this task created in this round, with their emails.
    let mut mine: Vec<(i64, String)> = Vec::new();
    // The orders this task created in this round.
    let mut my_orders: Vec<i64> = Vec::new();
    for marker in markers {
        if Instant::now() >= deadline {
            break;
        }
        let dice = rng.below(10);
        let sent = if customers.is_empty() || dice < 3 {
            Sent::customer(store, marker)
        } else if dice == 3 && !mine.is_empty() {
            let (id, email) = &mine[rng.below(mine.len() as u64) as usize];
            Sent::update(store, *id, email, marker)
        } else if dice == 4 && !my_orders.is_empty() {
            let id = my_orders[rng.below(my_orders.len() as u64) as usize];
            Sent::change(store, id, marker)
        } else {
            let customer = customers[rng.below(customers.len() as u64) as usize];
            Sent::order(store, customer, marker)
        };
        match sent.send(app).await {
            Ok(response) if response.status == sent.success() => {
                match serde_json::from_slice::<Value>(&response.body) {
                    Ok(body) => {
                        match &sent.what {
                            What::Customer { email } => {
                                if let Some(id) = body["id"].as_i64() {
                                    customers.push(id);
                                    mine.push((id, email.clone()));
                                }
                            }
                            What::Update { id, .. } => {
                                let new_email = sent.body["email"].as_str().unwrap_or_default();
                                for (mine_id, email) in &mut mine {
                                    if mine_id == id {
                                        *email = new_email.to_string();
                                    }
                                }
                            }
                            What::Order { .. } => {
                                if let Some(id) = body["id"].as_i64() {
                                    my_orders.push(id);
                                }
                            }
                            What::Change { .. } => {}
                        }
                        done.push((sent, Answer::Done(body)));
                    }
                    Err(e) => {
                        let why = format!("{} with a body that is not JSON ({e})", response.status);
                        done.push((sent, Answer::Wrong(why)));
                    }
                }
            }
            Ok(response) if response.status == 503 => {
                // An update left undecided: no further updates of that customer,
                // so at most one is pending per customer.
                match &sent.what {
                    What::Update { id, .. } => mine.retain(|(mine_id, _)| mine_id != id),
                    What::Change { id } => my_orders.retain(|mine_id| mine_id != id),
                    _ => {}
                }
                done.push((sent, Answer::Unknown));
            }
            Ok(response) => {
                let why = format!("{} {}", response.status, response.text());
                done.push((sent, Answer::Wrong(why)));
            }
            Err(_) => {
                done.push((sent, Answer::Unknown));
                break;
            }
        }
    }
    done
}

/// Runs one round of load and stops the server with `signal` after a random
/// delay; returns every request and its answer, and the delay.
async fn load_and_stop(
    app: &TestApp,
    ledger: &mut Ledger,
    rng: &mut Rng,
    signal: &str,
) -> (Vec<(Sent, Answer)>, Duration) {
    let delay = Duration::from_millis(KILL_MIN_MS + rng.below(KILL_SPREAD_MS));
    let start = Instant::now();
    let deadline = start + LOAD_TIME;
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let (store, k) = if t < TASKS_A {
                (Store::A, t)
            } else {
                (Store::B, t - TASKS_A)
            };
            let first = ledger.next_marker[store.index()] + k * MAX_OPS;
            let mut earlier = ledger.customers_of(store);
            // A few customers of earlier rounds get orders too.
            let mut picked = Vec::new();
            for _ in 0..3 {
                if !earlier.is_empty() {
                    let i = rng.below(earlier.len() as u64) as usize;
                    picked.push(earlier.swap_remove(i));
                }
            }
            client_task(
                app,
                store,
                first..first + MAX_OPS,
                Rng::new(rng.next()),
                deadline,
                picked,
            )
        })
        .collect();
    ledger.next_marker[0] += TASKS_A * MAX_OPS;
    ledger.next_marker[1] += (TASKS - TASKS_A) * MAX_OPS;
    let killer = async {
        tokio::time::sleep(delay).await;
        app.signal(signal);
    };
    let bounded = tokio::time::timeout(LOAD_TIME + Duration::from_secs(20), async {
        tokio::join!(join_all(tasks), killer).0
    })
    .await;
    let results = bounded.unwrap_or_else(|_| {
        panic!(
            "the load did not end within {:?} of SIGKILL/SIGTERM; stderr:\n{}",
            LOAD_TIME + Duration::from_secs(20),
            app.stderr_tail()
        )
    });
    (results.into_iter().flatten().collect(), delay)
}

/// How a scenario stops the server and what it checks.
struct Scenario {
    name: &'static str,
    rounds: usize,
    signal: &'static str,
    args: &'static [&'static str],
    retry_unanswered: bool,
}

/// Runs `rounds` of load-then-stop on one data directory, verifying after
/// every restart.
async fn run(scenario: Scenario) {
    let dir = DataDir::new();
    let mut rng = Rng::from_clock(scenario.name);
    let mut ledger = Ledger::new();
    let started = Instant::now();
    let mut changes_acknowledged = 0;
    for round in 0..scenario.rounds {
        let mut app = Launch::new().on(&dir).args(scenario.args).spawn().await;
        let resolved = ledger.verify(&app).await;
        if scenario.retry_unanswered {
            ledger.retry_with_keys(&app, resolved).await;
        }

        let (results, delay) = load_and_stop(&app, &mut ledger, &mut rng, scenario.signal).await;
        let status = app.reap();
        if scenario.signal == "TERM" {
            assert!(
                status.is_some_and(|s| s.success()),
                "round {round}: after SIGTERM the server must exit 0 within 10 s; got \
                 {status:?}; stderr:\n{}",
                app.stderr_tail()
            );
        }
        let acknowledged = results
            .iter()
            .filter(|(_, a)| matches!(a, Answer::Done(_)))
            .count();
        let updates = results
            .iter()
            .filter(|(s, a)| matches!((&s.what, a), (What::Update { .. }, Answer::Done(_))))
            .count();
        let changes = results
            .iter()
            .filter(|(s, a)| matches!((&s.what, a), (What::Change { .. }, Answer::Done(_))))
            .count();
        changes_acknowledged += changes;
        eprintln!(
            "{} round {round}: {} requests, {acknowledged} acknowledged ({updates} updates, \
             {changes} order changes), \
             signal {} after {delay:?}",
            scenario.name,
            results.len(),
            scenario.signal
        );
        let errors = ledger.record_answers(results);
        assert!(
            errors.is_empty(),
            "round {round}: {} problem(s) during the load:\n{}\nstderr:\n{}",
            errors.len(),
            errors.join("\n"),
            app.stderr_tail()
        );
        drop(app);
    }
    let app = Launch::new().on(&dir).args(scenario.args).spawn().await;
    let resolved = ledger.verify(&app).await;
    if scenario.retry_unanswered {
        ledger.retry_with_keys(&app, resolved).await;
        ledger.verify(&app).await;
    }
    eprintln!(
        "{}: {} customers, {} orders; {} acknowledged; unanswered: {} present, {} absent; {:?}",
        scenario.name,
        ledger.customers.len(),
        ledger.orders.len(),
        ledger.acknowledged,
        ledger.found_present,
        ledger.found_absent,
        started.elapsed()
    );
    assert!(
        ledger.acknowledged > 0,
        "no write was acknowledged in any round; the test proved nothing"
    );
    assert!(
        changes_acknowledged > 0,
        "no order change was acknowledged in any round: the changes went untested"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_write_survives_repeated_kill_9_under_load() {
    run(Scenario {
        name: "kill -9",
        rounds: 4,
        signal: "KILL",
        args: &[],
        retry_unanswered: false,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unanswered_writes_resolve_by_their_idempotency_keys_after_kill_9() {
    run(Scenario {
        name: "kill -9 then retry",
        rounds: 2,
        signal: "KILL",
        args: &[],
        retry_unanswered: true,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_durability_off_sigterm_under_load_keeps_every_acknowledged_write() {
    run(Scenario {
        name: "durability off, SIGTERM",
        rounds: 2,
        signal: "TERM",
        args: &["--durability", "off"],
        retry_unanswered: false,
    })
    .await;
}
