//! Crash safety (contract section 6): under concurrent writes (customer and
//! order creates, and updates that move customers to new emails) the server is
//! killed (SIGKILL, or SIGTERM for the graceful case) at an unpredictable
//! moment; a new server on the same data directory must hold every write that
//! was acknowledged, identical, and every write that got no answer either
//! wholly or not at all.
//!
//! Each request carries a unique marker, so a record found after a restart can
//! be matched with the request that made it even when that request got no
//! answer: a customer by its email, an order by the quantities of its
//! extras. State accumulates over several crash rounds on one data directory.
//! Kill points come from a xorshift generator seeded from the clock; the seed
//! and each round's kill delay are printed to go with a failure report.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::future::join_all;
use futures_util::StreamExt;
use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{
    customer_body, customer_body_b, enc, store_a, store_b, Creds, DataDir, Launch, TestApp,
    TestResponse, ADDRESS_FIELDS, STORE_A, STORE_B,
};

/// Concurrent client tasks during a round.
const TASKS: u64 = 8;
/// Requests per task and round, at most.
const MAX_OPS: u64 = 100;
/// Of the [`TASKS`], those below this number write to store A, the rest to B.
const TASKS_A: u64 = 6;
/// The server caps an extra's quantity at 1000 (the contract names no cap);
/// store B's marker is one quantity, so its markers must stay within that.
const MAX_QUANTITY: u64 = 1000;
/// How long a round's load may run, at most.
const LOAD_TIME: Duration = Duration::from_millis(1500);
/// The kill comes this many milliseconds after the load starts...
const KILL_MIN_MS: u64 = 50;
/// ...plus up to this many.
const KILL_SPREAD_MS: u64 = 650;
/// Reads in flight at once while verifying.
const READ_CONCURRENCY: usize = 16;
/// Errors shown when a verification fails.
const SHOW_ERRORS: usize = 40;

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

/// The two webstores of the test catalogue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Store {
    A,
    B,
}

impl Store {
    fn creds(self) -> Creds {
        match self {
            Store::A => store_a(),
            Store::B => store_b(),
        }
    }

    fn id(self) -> &'static str {
        match self {
            Store::A => STORE_A,
            Store::B => STORE_B,
        }
    }

    fn index(self) -> usize {
        match self {
            Store::A => 0,
            Store::B => 1,
        }
    }
}

/// What a request was meant to do.
#[derive(Clone, Debug)]
enum What {
    /// Create a customer with this email.
    Customer { email: String },
    /// Create an order carrying this marker.
    Order { marker: u64 },
    /// PATCH customer `id`: a new email, last name and city.
    Update { id: i64, old_email: String },
}

/// One write request as sent.
#[derive(Clone, Debug)]
struct Sent {
    store: Store,
    what: What,
    body: Value,
    bytes: Vec<u8>,
    key: String,
}

impl Sent {
    fn customer(store: Store, marker: u64) -> Self {
        let (email, mut body) = match store {
            Store::A => {
                let email = format!("crash-{marker}@example.com");
                let body = customer_body(&email);
                (email, body)
            }
            Store::B => {
                let email = format!("crash-{marker}@example.de");
                let body = customer_body_b(&email);
                (email, body)
            }
        };
        body["first_name"] = json!(format!("Crash {marker}"));
        body["last_name"] = json!(format!("Marker{}", marker * 7));
        if marker.is_multiple_of(2) {
            body["address"]["delivery_note"] = json!(format!("note {marker}"));
        }
        if marker.is_multiple_of(3) {
            body["address"]["work_phone"] = json!(format!("{marker}"));
        }
        Self::new(store, What::Customer { email }, body, marker)
    }

    fn order(store: Store, customer_id: i64, marker: u64) -> Self {
        let frequency = ["single", "weekly", "fortnightly"][(marker % 3) as usize];
        let body = match store {
            Store::A => {
                let exclusions: Vec<i64> = [240, 241, 242]
                    .into_iter()
                    .enumerate()
                    .filter(|(i, _)| (marker >> i) & 1 == 1)
                    .map(|(_, id)| id)
                    .collect();
                let substitutions: Vec<i64> = match marker % 3 {
                    0 => vec![],
                    1 => vec![243],
                    _ => vec![243, 244],
                };
                json!({
                    "customer_id": customer_id, "box_id": 217, "frequency": frequency,
                    "extras_one_off": !marker.is_multiple_of(2),
                    "extras": [{"id": 28, "quantity": 1 + marker % MAX_QUANTITY},
                               {"id": 29, "quantity": 1 + marker / MAX_QUANTITY}],
                    "exclusions": exclusions, "substitutions": substitutions,
                })
            }
            Store::B => {
                assert!(
                    marker <= MAX_QUANTITY,
                    "store B's markers ran out: fewer rounds or MAX_OPS"
                );
                let (exclusions, substitutions) = if marker.is_multiple_of(2) {
                    (vec![400], vec![])
                } else {
                    (vec![], vec![400])
                };
                json!({
                    "customer_id": customer_id, "box_id": 300, "frequency": frequency,
                    "extras_one_off": marker.is_multiple_of(2),
                    "extras": [{"id": 50, "quantity": marker}],
                    "exclusions": exclusions, "substitutions": substitutions,
                })
            }
        };
        Self::new(store, What::Order { marker }, body, marker)
    }

    /// Moves a customer to a new email (freeing the old one), last name and city.
    fn update(store: Store, id: i64, old_email: &str, marker: u64) -> Self {
        let domain = old_email.rsplit('@').next().unwrap_or("example.com");
        let body = json!({
            "email": format!("moved-{marker}@{domain}"),
            "last_name": format!("Moved{marker}"),
            "address": {"city": format!("City {marker}")},
        });
        let what = What::Update {
            id,
            old_email: old_email.to_string(),
        };
        Self::new(store, what, body, marker)
    }

    /// The customer `known` with this update applied.
    fn applied_to(&self, known: &Value) -> Value {
        let mut customer = known.clone();
        customer["email"] = self.body["email"].clone();
        customer["last_name"] = self.body["last_name"].clone();
        customer["name"] = json!(format!(
            "{} {}",
            known["first_name"].as_str().unwrap_or_default(),
            self.body["last_name"].as_str().unwrap_or_default()
        ));
        customer["address"]["city"] = self.body["address"]["city"].clone();
        customer
    }

    fn new(store: Store, what: What, body: Value, marker: u64) -> Self {
        let bytes = serde_json::to_vec(&body).unwrap();
        Self {
            store,
            what,
            body,
            bytes,
            key: format!("crash-key-{marker}"),
        }
    }

    fn method(&self) -> Method {
        match self.what {
            What::Update { .. } => Method::PATCH,
            _ => Method::POST,
        }
    }

    fn path(&self) -> String {
        match &self.what {
            What::Customer { .. } => "/v1/customers?embed=address".to_string(),
            What::Order { .. } => "/v1/orders".to_string(),
            What::Update { id, .. } => format!("/v1/customers/{id}?embed=address"),
        }
    }

    /// The status of success: 201 for a create, 200 for an update.
    fn success(&self) -> u16 {
        match self.what {
            What::Update { .. } => 200,
            _ => 201,
        }
    }

    async fn send(&self, app: &TestApp) -> Result<TestResponse, String> {
        let key = [("Idempotency-Key", self.key.as_str())];
        let headers: &[(&str, &str)] = match self.what {
            What::Update { .. } => &[],
            _ => &key,
        };
        app.try_send(
            self.method(),
            &self.path(),
            Some(&self.store.creds()),
            Some(self.bytes.clone()),
            headers,
        )
        .await
    }

    fn describe(&self) -> String {
        format!(
            "{:?} {} {} {}",
            self.store,
            self.method(),
            self.path(),
            String::from_utf8_lossy(&self.bytes)
        )
    }
}

/// How a request ended.
enum Answer {
    /// 201 (200 for an update) with this body.
    Done(Value),
    /// No (complete) answer, or a 503: the write may or may not have happened.
    Unknown,
    /// Any other answer: a bug during the load.
    Wrong(String),
}

/// Everything known to be in the store, and the writes still undecided.
#[derive(Default)]
struct Ledger {
    /// Customers (as shown with `embed=address`) by id.
    customers: BTreeMap<i64, (Store, Value)>,
    /// Orders by id.
    orders: BTreeMap<i64, (Store, Value)>,
    /// Writes that got no answer and have not been looked for yet.
    pending: Vec<Sent>,
    /// Emails that no customer may hold: the old emails of applied updates and
    /// the new emails of updates that were lost.
    freed_emails: Vec<(Store, String)>,
    /// The next unused marker of store A and of store B (markers are unique
    /// per store).
    next_marker: [u64; 2],
    /// Acknowledged and found-present writes over all rounds, for the log.
    acknowledged: usize,
    /// Unanswered writes found present / absent after a restart.
    found_present: usize,
    /// See `found_present`.
    found_absent: usize,
}

impl Ledger {
    fn max_customer_id(&self) -> i64 {
        self.customers.keys().next_back().copied().unwrap_or(0)
    }

    fn max_order_id(&self) -> i64 {
        self.orders.keys().next_back().copied().unwrap_or(0)
    }

    fn customers_of(&self, store: Store) -> Vec<i64> {
        self.customers
            .iter()
            .filter(|(_, (s, _))| *s == store)
            .map(|(id, _)| *id)
            .collect()
    }
}

/// One client task: creates customers of `store`, orders for them, and moves
/// its own customers to new emails, until its requests fail (the server is
/// gone), `deadline` passes, or its markers run out. Only this task writes to
/// the customers it creates, so their updates are ordered.
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
                            What::Order { .. } => {}
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
                if let What::Update { id, .. } = &sent.what {
                    mine.retain(|(mine_id, _)| mine_id != id);
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

/// Files the answers of a round in the ledger; returns the problems found.
fn record_answers(ledger: &mut Ledger, results: Vec<(Sent, Answer)>) -> Vec<String> {
    let mut errors = Vec::new();
    let floor_customer = ledger.max_customer_id();
    let floor_order = ledger.max_order_id();
    for (sent, answer) in results {
        match answer {
            Answer::Done(body) => {
                let Some(id) = body["id"].as_i64() else {
                    errors.push(format!(
                        "{} answered without an id: {body}",
                        sent.describe()
                    ));
                    continue;
                };
                let (map, floor) = match &sent.what {
                    What::Customer { .. } => (&mut ledger.customers, floor_customer),
                    What::Order { .. } => (&mut ledger.orders, floor_order),
                    What::Update {
                        id: target,
                        old_email,
                    } => {
                        match ledger.customers.get(target) {
                            Some((_, known)) if *target == id => {
                                let expected = sent.applied_to(known);
                                if body != expected {
                                    errors.push(format!(
                                        "{} answered {body}, expected {expected}",
                                        sent.describe()
                                    ));
                                }
                            }
                            _ => errors.push(format!(
                                "{} answered for customer {id}: {body}",
                                sent.describe()
                            )),
                        }
                        ledger.customers.insert(*target, (sent.store, body));
                        ledger.freed_emails.push((sent.store, old_email.clone()));
                        ledger.acknowledged += 1;
                        continue;
                    }
                };
                if id <= floor {
                    errors.push(format!(
                        "id {id} is not above {floor}, the largest id stored before this \
                         run: {body}"
                    ));
                }
                if let Some((_, earlier)) = map.insert(id, (sent.store, body.clone())) {
                    errors.push(format!("id {id} given twice: {earlier} and {body}"));
                }
                ledger.acknowledged += 1;
            }
            Answer::Unknown => ledger.pending.push(sent),
            Answer::Wrong(why) => errors.push(format!("{} answered {why}", sent.describe())),
        }
    }
    errors
}

/// GETs many paths with bounded concurrency, in order.
async fn get_many(app: &TestApp, requests: Vec<(String, Creds)>) -> Vec<(String, TestResponse)> {
    futures_util::stream::iter(requests)
        .map(|(path, creds)| async move {
            let response = app.get_as(&path, &creds).await;
            (path, response)
        })
        .buffered(READ_CONCURRENCY)
        .collect()
        .await
}

/// The JSON of a 200, or an error.
fn ok_json(path: &str, response: &TestResponse) -> Result<Value, String> {
    if response.status != 200 {
        return Err(format!(
            "GET {path}: {} {}",
            response.status,
            response.text()
        ));
    }
    serde_json::from_slice(&response.body).map_err(|e| format!("GET {path}: not JSON ({e})"))
}

/// Whether a stored customer is exactly what `sent` asked for.
fn customer_matches(sent: &Sent, store: Store, stored: &Value) -> Result<(), String> {
    let body = &sent.body;
    let mut wrong = Vec::new();
    for field in ["first_name", "last_name", "email", "delivery_service_id"] {
        if stored[field] != body[field] {
            wrong.push(field.to_string());
        }
    }
    if stored["webstore_id"] != store.id() {
        wrong.push("webstore_id".to_string());
    }
    for field in ADDRESS_FIELDS {
        let want = body["address"].get(field).cloned().unwrap_or(Value::Null);
        if stored["address"][field] != want {
            wrong.push(format!("address.{field}"));
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "a customer that got no answer is there but not as sent (differs in {wrong:?}):\n  \
             sent:   {}\n  stored: {stored}",
            sent.describe()
        ))
    }
}

/// Whether a stored order is exactly what `sent` asked for.
fn order_matches(sent: &Sent, stored: &Value) -> Result<(), String> {
    let wrong: Vec<&str> = [
        "customer_id",
        "box_id",
        "frequency",
        "extras_one_off",
        "extras",
        "exclusions",
        "substitutions",
    ]
    .into_iter()
    .filter(|field| stored[*field] != sent.body[*field])
    .collect();
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "an order that got no answer is there but not as sent (differs in {wrong:?}):\n  \
             sent:   {}\n  stored: {stored}",
            sent.describe()
        ))
    }
}

/// The marker of a stored order, read back from its extras' quantities.
fn marker_of(store: Store, order: &Value) -> Option<u64> {
    let quantity = |extra: i64| -> Option<u64> {
        order["extras"]
            .as_array()?
            .iter()
            .find(|e| e["id"] == extra)?["quantity"]
            .as_u64()
    };
    match store {
        Store::A => Some(quantity(28)? - 1 + (quantity(29)? - 1) * MAX_QUANTITY),
        Store::B => quantity(50),
    }
}

/// After a restart: every known record must be there and identical, every
/// record there must be known or an unanswered write stored exactly as sent,
/// and the email index and order lists must agree with the records. Moves
/// each pending write to the ledger (found) or drops it (absent) and returns
/// them with the id found, for callers that retry them.
async fn verify(app: &TestApp, ledger: &mut Ledger) -> Vec<(Sent, Option<i64>)> {
    let mut errors = Vec::new();
    let mut resolved = Vec::new();
    let mut pending_customers: BTreeMap<(Store, String), Sent> = BTreeMap::new();
    let mut pending_orders: BTreeMap<(Store, u64), Sent> = BTreeMap::new();
    let mut pending_updates: BTreeMap<i64, Sent> = BTreeMap::new();
    for sent in std::mem::take(&mut ledger.pending) {
        match &sent.what {
            What::Update { id, .. } => {
                pending_updates.insert(*id, sent);
            }
            What::Customer { email } => {
                pending_customers.insert((sent.store, email.clone()), sent);
            }
            What::Order { marker } => {
                pending_orders.insert((sent.store, *marker), sent);
            }
        }
    }

    // Customers, through the list of each webstore.
    let mut listed: BTreeMap<i64, (Store, Value)> = BTreeMap::new();
    for store in [Store::A, Store::B] {
        let (all, total) = app.all_customers_as(&store.creds()).await;
        if total != Some(all.len() as u64) {
            errors.push(format!(
                "{store:?}: X-Total-Count {total:?} but {} customers listed",
                all.len()
            ));
        }
        let mut numbers = BTreeSet::new();
        for customer in all {
            let Some(id) = customer["id"].as_i64() else {
                errors.push(format!("listed customer without id: {customer}"));
                continue;
            };
            if !numbers.insert(customer["number"].to_string()) {
                errors.push(format!("customer number given twice: {customer}"));
            }
            if listed.insert(id, (store, customer)).is_some() {
                errors.push(format!("customer {id} listed twice"));
            }
        }
    }
    let mut updated = Vec::new();
    for (id, (store, known)) in &ledger.customers {
        let update = pending_updates.get(id);
        match listed.get(id) {
            None => errors.push(format!(
                "acknowledged customer {id} of {store:?} is missing: {known}"
            )),
            Some((_, now)) if now == known => {}
            Some((_, now)) if update.is_some_and(|u| *now == u.applied_to(known)) => {
                updated.push((*id, now.clone()));
            }
            Some((_, now)) => errors.push(format!(
                "customer {id} changed:\n  acknowledged: {known}\n  now:          {now}\n  \
                 unanswered update: {}",
                update.map_or("none".to_string(), Sent::describe)
            )),
        }
    }
    // Unanswered updates: applied wholly (the old email is free) or not at
    // all (the new email is free).
    for (id, now) in updated {
        let sent = pending_updates.remove(&id).expect("an update was pending");
        if let What::Update { old_email, .. } = &sent.what {
            ledger.freed_emails.push((sent.store, old_email.clone()));
        }
        ledger.customers.insert(id, (sent.store, now));
        ledger.found_present += 1;
        resolved.push((sent, Some(id)));
    }
    for sent in std::mem::take(&mut pending_updates).into_values() {
        let new_email = sent.body["email"].as_str().unwrap_or_default().to_string();
        ledger.freed_emails.push((sent.store, new_email));
        ledger.found_absent += 1;
        resolved.push((sent, None));
    }
    for (id, (store, customer)) in &listed {
        if ledger.customers.contains_key(id) {
            continue;
        }
        let email = customer["email"].as_str().unwrap_or_default().to_string();
        match pending_customers.remove(&(*store, email)) {
            Some(sent) => {
                if let Err(e) = customer_matches(&sent, *store, customer) {
                    errors.push(e);
                }
                ledger.customers.insert(*id, (*store, customer.clone()));
                ledger.found_present += 1;
                resolved.push((sent, Some(*id)));
            }
            None => errors.push(format!("a customer nobody sent: {customer}")),
        }
    }
    let absent_customers: Vec<Sent> = pending_customers.into_values().collect();

    // Each customer by id and by email, and its orders.
    let mut reads = Vec::new();
    for (id, (store, customer)) in &listed {
        let email = enc(customer["email"].as_str().unwrap_or_default());
        reads.push((format!("/v1/customers/{id}?embed=address"), store.creds()));
        reads.push((
            format!("/v1/customers?email={email}&embed=address"),
            store.creds(),
        ));
        reads.push((format!("/v1/orders?customer_id={id}"), store.creds()));
    }
    for sent in &absent_customers {
        if let What::Customer { email } = &sent.what {
            let path = format!("/v1/customers?email={}", enc(email));
            reads.push((path, sent.store.creds()));
        }
    }
    for (store, email) in &ledger.freed_emails {
        let path = format!("/v1/customers?email={}", enc(email));
        reads.push((path, store.creds()));
    }
    let answers = get_many(app, reads).await;
    let mut answers = answers.into_iter();
    let mut order_lists: BTreeMap<i64, Vec<Value>> = BTreeMap::new();
    for (id, (_, customer)) in &listed {
        let mut next = || answers.next().expect("one answer per read");
        let (path, by_id) = next();
        match ok_json(&path, &by_id) {
            Ok(v) if &v == customer => {}
            Ok(v) => errors.push(format!("{path} differs from the list: {v} vs {customer}")),
            Err(e) => errors.push(e),
        }
        let (path, by_email) = next();
        match ok_json(&path, &by_email) {
            Ok(v) if v == json!([customer]) => {}
            Ok(v) => errors.push(format!("{path} should find {customer}, found {v}")),
            Err(e) => errors.push(e),
        }
        let (path, orders) = next();
        match ok_json(&path, &orders) {
            Ok(Value::Array(orders)) => {
                for order in &orders {
                    if order["customer_id"] != *id {
                        errors.push(format!("{path} lists another customer's order {order}"));
                    }
                }
                order_lists.insert(*id, orders);
            }
            Ok(v) => errors.push(format!("{path}: not an array: {v}")),
            Err(e) => errors.push(e),
        }
    }
    for sent in absent_customers {
        let (path, response) = answers.next().expect("one answer per read");
        match ok_json(&path, &response) {
            Ok(v) if v == json!([]) => {}
            Ok(v) => errors.push(format!(
                "{path}: a customer that is not listed is found by email: {v}"
            )),
            Err(e) => errors.push(e),
        }
        ledger.found_absent += 1;
        resolved.push((sent, None));
    }
    for (path, response) in answers {
        match ok_json(&path, &response) {
            Ok(v) if v == json!([]) => {}
            Ok(v) => errors.push(format!(
                "{path}: an email given up by an update (or never taken) is found: {v}"
            )),
            Err(e) => errors.push(e),
        }
    }

    // Orders: each known one in its customer's list and by id; each listed
    // one known or an unanswered write stored exactly as sent.
    let mut listed_orders: BTreeMap<i64, Value> = BTreeMap::new();
    for (customer_id, orders) in &order_lists {
        let store = listed[customer_id].0;
        for order in orders {
            let Some(id) = order["id"].as_i64() else {
                errors.push(format!("listed order without id: {order}"));
                continue;
            };
            if listed_orders.insert(id, order.clone()).is_some() {
                errors.push(format!("order {id} listed twice"));
            }
            if let Some((known_store, known)) = ledger.orders.get(&id) {
                if known != order || *known_store != store {
                    errors.push(format!(
                        "order {id} changed:\n  acknowledged: {known}\n  now:          {order}"
                    ));
                }
                continue;
            }
            let sent = marker_of(store, order).and_then(|m| pending_orders.remove(&(store, m)));
            match sent {
                Some(sent) => {
                    if let Err(e) = order_matches(&sent, order) {
                        errors.push(e);
                    }
                    ledger.orders.insert(id, (store, order.clone()));
                    ledger.found_present += 1;
                    resolved.push((sent, Some(id)));
                }
                None => errors.push(format!("an order nobody sent: {order}")),
            }
        }
    }
    for (id, (_, known)) in &ledger.orders {
        if !listed_orders.contains_key(id) {
            errors.push(format!(
                "acknowledged order {id} is not in its customer's list: {known}"
            ));
        }
    }
    for sent in pending_orders.into_values() {
        ledger.found_absent += 1;
        resolved.push((sent, None));
    }
    let reads = ledger
        .orders
        .iter()
        .map(|(id, (store, _))| (format!("/v1/orders/{id}"), store.creds()))
        .collect();
    for ((path, response), (_, (_, known))) in get_many(app, reads).await.iter().zip(&ledger.orders)
    {
        match ok_json(path, response) {
            Ok(v) if &v == known => {}
            Ok(v) => errors.push(format!("{path}: {v}, acknowledged as {known}")),
            Err(e) => errors.push(e),
        }
    }

    assert!(
        errors.is_empty(),
        "{} problem(s) after the restart (first {SHOW_ERRORS}):\n{}\nserver stderr:\n{}",
        errors.len(),
        errors
            .iter()
            .take(SHOW_ERRORS)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n"),
        app.stderr_tail()
    );
    resolved
}

/// Sends every write that got no answer again, with its key and bytes: one
/// found after the restart must be replayed (same id), one absent created anew.
async fn retry_with_keys(app: &TestApp, ledger: &mut Ledger, resolved: Vec<(Sent, Option<i64>)>) {
    let mut errors = Vec::new();
    let floor_customer = ledger.max_customer_id();
    let floor_order = ledger.max_order_id();
    for (sent, found) in resolved {
        // Updates carry no key; only creates are retried.
        if matches!(sent.what, What::Update { .. }) {
            continue;
        }
        let response = match sent.send(app).await {
            Ok(response) => response,
            Err(e) => panic!("retry failed: {e}"),
        };
        if response.status != 201 {
            errors.push(format!(
                "retry of {} answered {} {}",
                sent.describe(),
                response.status,
                response.text()
            ));
            continue;
        }
        let body: Value = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
        let id = body["id"].as_i64().unwrap_or(0);
        let replayed = response.header("idempotent-replayed").as_deref() == Some("true");
        let is_customer = matches!(sent.what, What::Customer { .. });
        match found {
            Some(found) => {
                if id != found || !replayed {
                    errors.push(format!(
                        "retry of a write found after the restart (id {found}) must replay \
                         it; got id {id}, replayed: {replayed}: {}",
                        sent.describe()
                    ));
                }
            }
            None => {
                let floor = if is_customer {
                    floor_customer
                } else {
                    floor_order
                };
                if replayed || id <= floor {
                    errors.push(format!(
                        "retry of a write absent after the restart must create it anew; got \
                         id {id} (floor {floor}), replayed: {replayed}: {}",
                        sent.describe()
                    ));
                }
                let map = if is_customer {
                    &mut ledger.customers
                } else {
                    &mut ledger.orders
                };
                map.insert(id, (sent.store, body));
            }
        }
    }
    assert!(
        errors.is_empty(),
        "{} problem(s) retrying unanswered writes (first {SHOW_ERRORS}):\n{}",
        errors.len(),
        errors
            .iter()
            .take(SHOW_ERRORS)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
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
    let mut ledger = Ledger {
        next_marker: [1, 1],
        ..Ledger::default()
    };
    let started = Instant::now();
    for round in 0..scenario.rounds {
        let mut app = Launch::new().on(&dir).args(scenario.args).spawn().await;
        let resolved = verify(&app, &mut ledger).await;
        if scenario.retry_unanswered {
            retry_with_keys(&app, &mut ledger, resolved).await;
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
        eprintln!(
            "{} round {round}: {} requests, {acknowledged} acknowledged ({updates} updates), \
             signal {} after {delay:?}",
            scenario.name,
            results.len(),
            scenario.signal
        );
        let errors = record_answers(&mut ledger, results);
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
    let resolved = verify(&app, &mut ledger).await;
    if scenario.retry_unanswered {
        retry_with_keys(&app, &mut ledger, resolved).await;
        verify(&app, &mut ledger).await;
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
