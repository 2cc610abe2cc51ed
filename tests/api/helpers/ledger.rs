//! The ledger of the crash tests: the write requests a load sends (customers, orders,
//! updates that move customers to new emails, and changes that pause orders, of the test
//! catalogue's two webstores), how
//! each was answered, and the bookkeeping of what the store must hold. After every restart it
//! checks that each acknowledged write is there, identical, and each write that got no answer
//! is there wholly or not at all, with the email index and order lists agreeing; it can send
//! the unanswered creates again with their idempotency keys and check their replay.
//!
//! Each request carries a unique marker, so a record found after a restart can be matched with
//! the request that made it even when that request got no answer: a customer by its email, an
//! order by the quantities of its extras.

use std::collections::{BTreeMap, BTreeSet};

use futures_util::StreamExt;
use reqwest::Method;
use serde_json::{json, Value};

use super::{
    customer_body, customer_body_b, enc, store_a, store_b, Creds, TestApp, TestResponse,
    ADDRESS_FIELDS, STORE_A, STORE_B,
};

/// The server caps an extra's quantity at 1000 (the contract names no cap);
/// store B's marker is one quantity, so its markers must stay within that.
const MAX_QUANTITY: u64 = 1000;
/// Reads in flight at once while verifying.
const READ_CONCURRENCY: usize = 16;
/// Errors shown when a verification fails.
const SHOW_ERRORS: usize = 40;

/// The two webstores of the test catalogue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Store {
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

    /// 0 for store A, 1 for store B.
    pub fn index(self) -> usize {
        match self {
            Store::A => 0,
            Store::B => 1,
        }
    }
}

/// What a request was meant to do.
#[derive(Clone, Debug)]
pub enum What {
    /// Create a customer with this email.
    Customer { email: String },
    /// Create an order carrying this marker.
    Order { marker: u64 },
    /// PATCH customer `id`: a new email, last name and city.
    Update { id: i64, old_email: String },
    /// PATCH order `id`: a pause of a week from a date that carries the marker.
    Change { id: i64 },
}

/// One write request as sent.
#[derive(Clone, Debug)]
pub struct Sent {
    /// The webstore it is sent as.
    pub store: Store,
    /// What it is meant to do.
    pub what: What,
    /// The JSON body (`bytes` are what is sent).
    pub body: Value,
    bytes: Vec<u8>,
    key: String,
}

impl Sent {
    /// A customer of `store` whose email, names and address carry `marker`.
    pub fn customer(store: Store, marker: u64) -> Self {
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

    /// An order of `store` for `customer_id` whose extras' quantities carry `marker`.
    pub fn order(store: Store, customer_id: i64, marker: u64) -> Self {
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
    pub fn update(store: Store, id: i64, old_email: &str, marker: u64) -> Self {
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

    /// Pauses order `id` for a week from the `marker`th day of 2027 (a change of its
    /// history: `pause_date` and `resume_date`, and a new `updated_at`).
    pub fn change(store: Store, id: i64, marker: u64) -> Self {
        let from = jiff::civil::date(2027, 1, 1)
            .checked_add(jiff::Span::new().days(i64::try_from(marker % 3000).unwrap_or(0)))
            .expect("a date");
        let until = from.checked_add(jiff::Span::new().days(7)).expect("a date");
        let body = json!({"order": {"pause_date": from.to_string(),
                                    "resume_date": until.to_string()}});
        Self::new(store, What::Change { id }, body, marker)
    }

    /// The order `known` with this change applied, `updated_at` left out (the server's
    /// clock sets it).
    fn changed(&self, known: &Value) -> Value {
        let mut order = without_updated_at(known);
        order["pause_date"] = self.body["order"]["pause_date"].clone();
        order["resume_date"] = self.body["order"]["resume_date"].clone();
        order
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
            What::Update { .. } | What::Change { .. } => Method::PATCH,
            _ => Method::POST,
        }
    }

    fn path(&self) -> String {
        match &self.what {
            What::Customer { .. } => "/v1/customers?embed=address".to_string(),
            What::Order { .. } => "/v1/orders".to_string(),
            What::Update { id, .. } => format!("/v1/customers/{id}?embed=address"),
            What::Change { id } => format!("/v1/orders/{id}"),
        }
    }

    /// The status of success: 201 for a create, 200 for an update or a change.
    pub fn success(&self) -> u16 {
        match self.what {
            What::Update { .. } | What::Change { .. } => 200,
            _ => 201,
        }
    }

    /// Sends it (creates with their idempotency key): the answer, or why there was none.
    pub async fn send(&self, app: &TestApp) -> Result<TestResponse, String> {
        let key = [("Idempotency-Key", self.key.as_str())];
        let headers: &[(&str, &str)] = match self.what {
            What::Update { .. } | What::Change { .. } => &[],
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
pub enum Answer {
    /// 201 (200 for an update) with this body.
    Done(Value),
    /// No (complete) answer, or a 503: the write may or may not have happened.
    Unknown,
    /// Any other answer: a bug during the load.
    Wrong(String),
}

/// Everything known to be in the store, and the writes still undecided.
#[derive(Default)]
pub struct Ledger {
    /// Customers (as shown with `embed=address`) by id.
    pub customers: BTreeMap<i64, (Store, Value)>,
    /// Orders by id.
    pub orders: BTreeMap<i64, (Store, Value)>,
    /// Writes that got no answer and have not been looked for yet.
    pending: Vec<Sent>,
    /// Emails that no customer may hold: the old emails of applied updates and
    /// the new emails of updates that were lost.
    freed_emails: Vec<(Store, String)>,
    /// The next unused marker of store A and of store B (markers are unique
    /// per store).
    pub next_marker: [u64; 2],
    /// Acknowledged and found-present writes over all rounds, for the log.
    pub acknowledged: usize,
    /// Unanswered writes found present / absent after a restart.
    pub found_present: usize,
    /// See `found_present`.
    pub found_absent: usize,
}

impl Ledger {
    /// An empty ledger whose markers start at 1 in both stores.
    pub fn new() -> Self {
        Self {
            next_marker: [1, 1],
            ..Self::default()
        }
    }

    fn max_customer_id(&self) -> i64 {
        self.customers.keys().next_back().copied().unwrap_or(0)
    }

    fn max_order_id(&self) -> i64 {
        self.orders.keys().next_back().copied().unwrap_or(0)
    }

    /// The ids of the known customers of `store`.
    pub fn customers_of(&self, store: Store) -> Vec<i64> {
        self.customers
            .iter()
            .filter(|(_, (s, _))| *s == store)
            .map(|(id, _)| *id)
            .collect()
    }

    /// Files the answers of a round in the ledger; returns the problems found.
    pub fn record_answers(&mut self, results: Vec<(Sent, Answer)>) -> Vec<String> {
        let mut errors = Vec::new();
        let floor_customer = self.max_customer_id();
        let floor_order = self.max_order_id();
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
                        What::Customer { .. } => (&mut self.customers, floor_customer),
                        What::Order { .. } => (&mut self.orders, floor_order),
                        What::Update {
                            id: target,
                            old_email,
                        } => {
                            match self.customers.get(target) {
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
                            self.customers.insert(*target, (sent.store, body));
                            self.freed_emails.push((sent.store, old_email.clone()));
                            self.acknowledged += 1;
                            continue;
                        }
                        What::Change { id: target } => {
                            match self.orders.get(target) {
                                Some((_, known))
                                    if *target == id
                                        && without_updated_at(&body) == sent.changed(known) => {}
                                _ => errors.push(format!(
                                    "{} answered for order {id}: {body}",
                                    sent.describe()
                                )),
                            }
                            self.orders.insert(*target, (sent.store, body));
                            self.acknowledged += 1;
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
                    self.acknowledged += 1;
                }
                Answer::Unknown => self.pending.push(sent),
                Answer::Wrong(why) => errors.push(format!("{} answered {why}", sent.describe())),
            }
        }
        errors
    }

    /// After a restart: every known record must be there and identical, every
    /// record there must be known or an unanswered write stored exactly as sent,
    /// and the email index and order lists must agree with the records. Moves
    /// each pending write to the ledger (found) or drops it (absent) and returns
    /// them with the id found, for callers that retry them.
    pub async fn verify(&mut self, app: &TestApp) -> Vec<(Sent, Option<i64>)> {
        let mut errors = Vec::new();
        let mut resolved = Vec::new();
        let mut pending_customers: BTreeMap<(Store, String), Sent> = BTreeMap::new();
        let mut pending_orders: BTreeMap<(Store, u64), Sent> = BTreeMap::new();
        let mut pending_updates: BTreeMap<i64, Sent> = BTreeMap::new();
        let mut pending_changes: BTreeMap<i64, Sent> = BTreeMap::new();
        for sent in std::mem::take(&mut self.pending) {
            match &sent.what {
                What::Update { id, .. } => {
                    pending_updates.insert(*id, sent);
                }
                What::Change { id } => {
                    pending_changes.insert(*id, sent);
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
        for (id, (store, known)) in &self.customers {
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
                self.freed_emails.push((sent.store, old_email.clone()));
            }
            self.customers.insert(id, (sent.store, now));
            self.found_present += 1;
            resolved.push((sent, Some(id)));
        }
        for sent in std::mem::take(&mut pending_updates).into_values() {
            let new_email = sent.body["email"].as_str().unwrap_or_default().to_string();
            self.freed_emails.push((sent.store, new_email));
            self.found_absent += 1;
            resolved.push((sent, None));
        }
        for (id, (store, customer)) in &listed {
            if self.customers.contains_key(id) {
                continue;
            }
            let email = customer["email"].as_str().unwrap_or_default().to_string();
            match pending_customers.remove(&(*store, email)) {
                Some(sent) => {
                    if let Err(e) = customer_matches(&sent, *store, customer) {
                        errors.push(e);
                    }
                    self.customers.insert(*id, (*store, customer.clone()));
                    self.found_present += 1;
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
        for (store, email) in &self.freed_emails {
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
            self.found_absent += 1;
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
        // Unanswered changes found applied, wholly: the order as the change makes it.
        let mut changed: Vec<(i64, Value)> = Vec::new();
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
                if let Some((known_store, known)) = self.orders.get(&id) {
                    let change = pending_changes.get(&id);
                    if *known_store != store {
                        errors.push(format!("order {id} is listed under another webstore"));
                    } else if known == order {
                    } else if change.is_some_and(|c| without_updated_at(order) == c.changed(known))
                    {
                        changed.push((id, order.clone()));
                    } else {
                        errors.push(format!(
                            "order {id} changed:\n  acknowledged: {known}\n  now:          \
                             {order}\n  unanswered change: {}",
                            change.map_or("none".to_string(), Sent::describe)
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
                        self.orders.insert(id, (store, order.clone()));
                        self.found_present += 1;
                        resolved.push((sent, Some(id)));
                    }
                    None => errors.push(format!("an order nobody sent: {order}")),
                }
            }
        }
        for (id, (_, known)) in &self.orders {
            if !listed_orders.contains_key(id) {
                errors.push(format!(
                    "acknowledged order {id} is not in its customer's list: {known}"
                ));
            }
        }
        for sent in pending_orders.into_values() {
            self.found_absent += 1;
            resolved.push((sent, None));
        }
        for (id, now) in changed {
            let sent = pending_changes.remove(&id).expect("a change was pending");
            self.orders.insert(id, (sent.store, now));
            self.found_present += 1;
            resolved.push((sent, Some(id)));
        }
        for sent in pending_changes.into_values() {
            self.found_absent += 1;
            resolved.push((sent, None));
        }
        let reads = self
            .orders
            .iter()
            .map(|(id, (store, _))| (format!("/v1/orders/{id}"), store.creds()))
            .collect();
        for ((path, response), (_, (_, known))) in
            get_many(app, reads).await.iter().zip(&self.orders)
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
    pub async fn retry_with_keys(&mut self, app: &TestApp, resolved: Vec<(Sent, Option<i64>)>) {
        let mut errors = Vec::new();
        let floor_customer = self.max_customer_id();
        let floor_order = self.max_order_id();
        for (sent, found) in resolved {
            // Updates and changes carry no key; only creates are retried.
            if matches!(sent.what, What::Update { .. } | What::Change { .. }) {
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
                        &mut self.customers
                    } else {
                        &mut self.orders
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
    as_sent("a customer", &wrong, sent, stored)
}

/// Whether a stored order is exactly what `sent` asked for.
/// An order's answer without `updated_at`.
fn without_updated_at(order: &Value) -> Value {
    let mut order = order.clone();
    if let Some(fields) = order.as_object_mut() {
        fields.remove("updated_at");
    }
    order
}

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
    as_sent("an order", &wrong, sent, stored)
}

/// `Ok` if no field of a record that got no answer is `wrong`, else what differs.
fn as_sent<S: std::fmt::Debug>(
    what: &str,
    wrong: &[S],
    sent: &Sent,
    stored: &Value,
) -> Result<(), String> {
    if wrong.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{what} that got no answer is there but not as sent (differs in {wrong:?}):\n  \
         sent:   {}\n  stored: {stored}",
        sent.describe()
    ))
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
