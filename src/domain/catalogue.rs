//! The operator's catalogue: webstores with their settings, API keys, delivery services, box
//! items, extras and boxes (contract section 7). Parsed and checked once at start-up, then
//! shared read-only by every request, so no lock guards it.
//!
//! Also owns API-key authentication, because the key table is part of the catalogue: secrets
//! exist only as SHA-256 digests and are compared in constant time.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use arc_swap::ArcSwap;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::quotas::{QuotaSettings, QuotasFile};
use super::schedule::{Day, WeekDays};
use super::webhooks::{build_webhooks, Webhook, WebhookFile};

/// The catalogue built into the binary, for trying boxsub out.
pub const DEMO_CATALOGUE_JSON: &str = include_str!("demo_catalogue.json");

/// The demo catalogue's credentials, `(webstore id, API key, API secret)`. They are public,
/// so a server running on the demo catalogue says so loudly at start-up.
pub const DEMO_CREDENTIALS: [(&str, &str, &str); 2] = [
    (
        "fantastic-vege-people",
        "demo-key-fantastic-vege-people",
        "demo-secret-fantastic-vege-people-0001",
    ),
    (
        "green-valley-farm",
        "demo-key-green-valley-farm",
        "demo-secret-green-valley-farm-0002",
    ),
];

/// The demo catalogue's producer accounts for the web app, `(webstore id, email, password)`:
/// public like its API credentials.
pub const DEMO_PRODUCERS: [(&str, &str, &str); 2] = [
    (
        "fantastic-vege-people",
        "producer@fantastic-vege-people.example",
        "demo-producer-fantastic-vege-people",
    ),
    (
        "green-valley-farm",
        "producer@green-valley-farm.example",
        "demo-producer-green-valley-farm",
    ),
];

/// A webstore's number within a running process: its position in the first catalogue
/// loaded, kept by its id through reloads (a webstore added later gets the next number, and
/// a number is never given to another webstore). The registry keys its per-webstore state by
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WebstoreIdx(pub u32);

/// One thing wrong with a catalogue, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Where in the catalogue, e.g. `webstores[0] (fantastic-vege-people).boxes[1] (id 218)`.
    pub place: String,
    /// What is wrong there.
    pub problem: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "catalogue {}: {}", self.place, self.problem)
    }
}

/// A catalogue that failed to parse or broke its own rules: every problem found, in order
/// (a document that is not JSON of the right shape stops at its first).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct CatalogueError {
    /// The problems, at least one.
    pub problems: Vec<Problem>,
}

impl fmt::Display for CatalogueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<String> = self.problems.iter().map(Problem::to_string).collect();
        f.write_str(&lines.join("\n"))
    }
}

impl CatalogueError {
    fn one(place: impl Into<String>, problem: impl Into<String>) -> CatalogueError {
        CatalogueError {
            problems: vec![Problem {
                place: place.into(),
                problem: problem.into(),
            }],
        }
    }
}

/// Collects the problems of a catalogue while it is checked.
#[derive(Default)]
struct Problems(Vec<Problem>);

impl Problems {
    fn add(&mut self, place: impl Into<String>, problem: impl Into<String>) {
        self.0.push(Problem {
            place: place.into(),
            problem: problem.into(),
        });
    }

    fn count(&self) -> usize {
        self.0.len()
    }
}

/// An amount of money in hundredths, shown with two decimal places.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Money(u64);

impl Money {
    /// Parses a non-negative decimal with at most two places: `5`, `7.5`, `30.00`.
    pub fn parse(text: &str) -> Option<Money> {
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        let (units, fraction) = match text.split_once('.') {
            Some((units, fraction)) if digits(fraction) && fraction.len() <= 2 => (units, fraction),
            Some(_) => return None,
            None => (text, ""),
        };
        if !digits(units) {
            return None;
        }
        let units: u64 = units.parse().ok()?;
        let hundredths: u64 = format!("{fraction:0<2}").parse().ok()?;
        units.checked_mul(100)?.checked_add(hundredths).map(Money)
    }
}

impl fmt::Display for Money {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:02}", self.0 / 100, self.0 % 100)
    }
}

/// A per-box limit on a list's length or on a total quantity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// `-1` in the catalogue.
    Unlimited,
    /// At most this many.
    AtMost(u32),
}

impl Limit {
    /// The contract's wire form: `-1` for unlimited.
    pub fn as_wire(self) -> i64 {
        match self {
            Limit::Unlimited => -1,
            Limit::AtMost(n) => i64::from(n),
        }
    }

    /// True when `count` is within the limit.
    pub fn allows(self, count: u64) -> bool {
        match self {
            Limit::Unlimited => true,
            Limit::AtMost(n) => count <= u64::from(n),
        }
    }
}

/// Which address fields a webstore requires of its customers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddressRequirements {
    /// At least one of the three phone numbers.
    pub phone: bool,
    /// `address_1`.
    pub address_1: bool,
    /// `address_2`.
    pub address_2: bool,
    /// `suburb`.
    pub suburb: bool,
    /// `city`.
    pub city: bool,
    /// `postcode`.
    pub postcode: bool,
    /// `delivery_note`.
    pub delivery_note: bool,
}

/// A webstore's public settings (`GET /v1/webstore`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebstoreSettings {
    /// The operator's id for the webstore, e.g. `fantastic-vege-people`.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Locale code.
    pub locale: String,
    /// ISO currency code.
    pub currency: String,
    /// Time zone name.
    pub time_zone: String,
    /// Home city.
    pub city: String,
    /// Contact email.
    pub email: String,
    /// Contact phone.
    pub phone: String,
    /// Text for the shop's sidebar.
    pub sidebar_description: String,
    /// Whether the webstore takes orders.
    pub active: bool,
    /// Accepted payment options.
    pub payment_options: Vec<String>,
    /// Address fields customers must give.
    pub require: AddressRequirements,
    /// Whether the shop asks for a phone number.
    pub collect_phone: bool,
    /// Whether the shop asks for a delivery note.
    pub collect_delivery_note: bool,
}

/// A way of getting boxes to customers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryService {
    /// Operator's id.
    pub id: u64,
    /// Display name.
    pub name: String,
    /// Instructions for customers.
    pub instructions: String,
    /// Fee per delivery.
    pub fee: Money,
    /// Whether customers collect from a pickup point.
    pub pickup_point: bool,
    /// Delivery days, Monday first.
    pub days: [bool; 7],
}

impl DeliveryService {
    /// The delivery days as a set of weekdays (Sunday = 0).
    pub fn week_days(&self) -> WeekDays {
        // `days` runs Monday … Sunday; weekday numbers run Sunday = 0 … Saturday = 6.
        self.days
            .iter()
            .zip([1u8, 2, 3, 4, 5, 6, 0])
            .filter(|(on, _)| **on)
            .fold(WeekDays::NONE, |set, (_, day)| set.with(day))
    }
}

const DAY_NAMES: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];

impl DeliveryService {
    /// `name - Mon, Thu - £5.00`: name, delivery days in week order, fee with the currency's
    /// symbol (contract section 4); an empty day list is left out.
    pub fn name_days_and_fee(&self, currency: &str) -> String {
        let days: Vec<&str> = DAY_NAMES
            .iter()
            .zip(self.days)
            .filter_map(|(name, on)| on.then_some(*name))
            .collect();
        let fee = match currency_symbol(currency) {
            Some(symbol) => format!("{symbol}{}", self.fee),
            None => format!("{currency} {}", self.fee),
        };
        let mut parts = vec![self.name.clone()];
        if !days.is_empty() {
            parts.push(days.join(", "));
        }
        parts.push(fee);
        parts.join(" - ")
    }
}

fn currency_symbol(currency: &str) -> Option<&'static str> {
    match currency.to_ascii_uppercase().as_str() {
        "GBP" => Some("£"),
        "EUR" => Some("€"),
        "USD" | "AUD" | "NZD" | "CAD" | "SGD" | "HKD" => Some("$"),
        _ => None,
    }
}

/// Something a box may contain; exclusions and substitutions name these.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoxItem {
    /// Operator's id.
    pub id: u64,
    /// Display name.
    pub name: String,
}

/// An item sold alongside a box.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extra {
    /// Operator's id.
    pub id: u64,
    /// Display name.
    pub name: String,
    /// Unit of sale, e.g. `4 litres`.
    pub unit: String,
    /// Price per unit.
    pub price: Money,
}

/// A box on offer, with the rules its orders must keep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoxDef {
    /// Operator's id.
    pub id: u64,
    /// Display name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Price of one box.
    pub price: Money,
    /// Whether substitutions may be given.
    pub likes: bool,
    /// Whether exclusions may be given.
    pub dislikes: bool,
    /// Whether extras may be ordered with it.
    pub extras_allowed: bool,
    /// Limit on the total quantity of extras.
    pub extras_limit: Limit,
    /// Limit on the number of exclusions.
    pub exclusions_limit: Limit,
    /// Limit on the number of substitutions.
    pub substitutions_limit: Limit,
    /// Hidden boxes are neither listed nor orderable.
    pub hidden: bool,
    /// The extras this box offers, in catalogue order.
    pub extra_ids: Vec<u64>,
    /// Image URLs by size name.
    pub images: BTreeMap<String, String>,
    /// Unix time of the box's last change.
    pub updated_at: i64,
}

impl BoxDef {
    /// `likes || dislikes || extras_allowed`.
    pub fn customizable(&self) -> bool {
        self.likes || self.dislikes || self.extras_allowed
    }

    /// True when the box offers extra `id`.
    pub fn offers_extra(&self, id: u64) -> bool {
        self.extra_ids.contains(&id)
    }
}

/// One tenant's whole catalogue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webstore {
    /// Position in the catalogue.
    pub idx: WebstoreIdx,
    /// Public settings.
    pub settings: WebstoreSettings,
    /// Delivery services by id.
    pub delivery_services: BTreeMap<u64, DeliveryService>,
    /// Box items by id.
    pub box_items: BTreeMap<u64, BoxItem>,
    /// Extras by id.
    pub extras: BTreeMap<u64, Extra>,
    /// Boxes by id, hidden ones included.
    pub boxes: BTreeMap<u64, BoxDef>,
    /// The zone of `settings.time_zone`: its dates are the webstore's dates.
    pub zone: jiff::tz::TimeZone,
    /// Its producers' accounts for the web app, by folded email.
    pub producers: BTreeMap<String, Producer>,
    /// Its webhook endpoints.
    pub webhooks: Vec<Webhook>,
    /// What it may do (its own `quotas` over the catalogue's).
    pub quotas: QuotaSettings,
}

/// A producer's account: who may sign in to the web app and see their webstore's day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Producer {
    /// The email they sign in with, as the catalogue gives it.
    pub email: String,
    /// The argon2id PHC string of their password (`boxsub hash-password`).
    pub password_hash: String,
}

impl Webstore {
    /// Today in the webstore's time zone.
    pub fn today(&self) -> Day {
        Day::of(
            jiff::Timestamp::now()
                .to_zoned_datetime(self.zone.clone())
                .date(),
        )
    }

    /// The weekdays on which any of its delivery services delivers.
    pub fn delivery_week_days(&self) -> WeekDays {
        self.delivery_services
            .values()
            .fold(WeekDays::NONE, |days, ds| {
                WeekDays::from_bits(days.bits() | ds.week_days().bits())
            })
    }

    /// A box that customers may see and order.
    pub fn visible_box(&self, id: u64) -> Option<&BoxDef> {
        self.boxes.get(&id).filter(|b| !b.hidden)
    }

    /// Visible boxes by id.
    pub fn visible_boxes(&self) -> impl Iterator<Item = &BoxDef> {
        self.boxes.values().filter(|b| !b.hidden)
    }
}

/// Every webstore, and the API-key table that selects one.
#[derive(Debug, Clone)]
pub struct Catalogue {
    /// In catalogue order.
    webstores: Vec<Arc<Webstore>>,
    by_idx: HashMap<WebstoreIdx, Arc<Webstore>>,
    api_keys: HashMap<String, (WebstoreIdx, [u8; 32])>,
    /// One past the highest index ever given in this process (so none is given twice).
    next_idx: u32,
}

/// The catalogue in force, replaced whole when the operator reloads it. Readers take the
/// current one without a lock; a request keeps the webstore it authenticated against.
pub struct CurrentCatalogue(ArcSwap<Catalogue>);

impl CurrentCatalogue {
    /// The first catalogue.
    pub fn new(catalogue: Catalogue) -> CurrentCatalogue {
        CurrentCatalogue(ArcSwap::from_pointee(catalogue))
    }

    /// The catalogue in force now.
    pub fn get(&self) -> Arc<Catalogue> {
        self.0.load_full()
    }

    /// The webstore whose key pair this is, in the catalogue in force.
    pub fn authenticate(&self, key: &str, secret: &str) -> Option<Arc<Webstore>> {
        self.0.load().authenticate(key, secret).cloned()
    }

    /// The webstore at `idx` in the catalogue in force.
    pub fn webstore(&self, idx: WebstoreIdx) -> Option<Arc<Webstore>> {
        self.0.load().webstore(idx).cloned()
    }

    /// The webstore with this id in the catalogue in force.
    pub fn webstore_by_id(&self, id: &str) -> Option<Arc<Webstore>> {
        self.0.load().webstore_by_id(id).cloned()
    }

    /// Puts `catalogue` in force.
    pub fn replace(&self, catalogue: Catalogue) {
        self.0.store(Arc::new(catalogue));
    }
}

/// Compared against when a key is unknown, so that an unknown key costs the same work as a
/// wrong secret.
const NO_SECRET_DIGEST: [u8; 32] = [0xA5; 32];

impl Catalogue {
    /// Parses and checks a catalogue document. `loaded_at` (Unix time) stands in for a box's
    /// `updated_at` where the catalogue gives none.
    pub fn parse(json: &str, loaded_at: i64) -> Result<Catalogue, CatalogueError> {
        Catalogue::parse_after(None, json, loaded_at)
    }

    /// Parses a catalogue that replaces `previous` in a running process: a webstore that
    /// `previous` has keeps its index, a new one gets the next unused index.
    pub fn parse_after(
        previous: Option<&Catalogue>,
        json: &str,
        loaded_at: i64,
    ) -> Result<Catalogue, CatalogueError> {
        let file: CatalogueFile = serde_json::from_str(json).map_err(|e| {
            CatalogueError::one(
                format!("line {} column {}", e.line(), e.column()),
                e.to_string(),
            )
        })?;
        build(file, loaded_at, previous)
    }

    /// The built-in demo catalogue.
    pub fn demo(loaded_at: i64) -> Catalogue {
        Catalogue::parse(DEMO_CATALOGUE_JSON, loaded_at).expect("the demo catalogue is valid")
    }

    /// Every webstore in catalogue order.
    pub fn webstores(&self) -> &[Arc<Webstore>] {
        &self.webstores
    }

    /// The webstore whose producer signs in with `email` (any case, trimmed), and the
    /// producer's account.
    pub fn producer(&self, email: &str) -> Option<(&Arc<Webstore>, &Producer)> {
        let key = super::email::fold(email);
        self.webstores
            .iter()
            .find_map(|webstore| webstore.producers.get(&key).map(|p| (webstore, p)))
    }

    /// The API keys (not their secrets) of the webstore at `idx`, sorted: what a front end
    /// routes by.
    pub fn api_keys_of(&self, idx: WebstoreIdx) -> Vec<&str> {
        let mut keys: Vec<&str> = self
            .api_keys
            .iter()
            .filter(|(_, (owner, _))| *owner == idx)
            .map(|(key, _)| key.as_str())
            .collect();
        keys.sort_unstable();
        keys
    }

    /// The webstore at `idx`.
    pub fn webstore(&self, idx: WebstoreIdx) -> Option<&Arc<Webstore>> {
        self.by_idx.get(&idx)
    }

    /// The webstore with this id.
    pub fn webstore_by_id(&self, id: &str) -> Option<&Arc<Webstore>> {
        self.webstores.iter().find(|w| w.settings.id == id)
    }

    /// The webstore whose key pair this is, or `None`. The secret's digest is compared in
    /// constant time, and an unknown key does the same work as a known one.
    pub fn authenticate(&self, key: &str, secret: &str) -> Option<&Arc<Webstore>> {
        let digest: [u8; 32] = Sha256::digest(secret.as_bytes()).into();
        let (idx, expected) = match self.api_keys.get(key) {
            Some((idx, expected)) => (Some(*idx), expected),
            None => (None, &NO_SECRET_DIGEST),
        };
        let secret_matches: bool = digest.ct_eq(expected).into();
        match idx {
            Some(idx) if secret_matches => self.webstore(idx),
            _ => None,
        }
    }
}

/// Lower-case hex SHA-256 of a secret: the `secret_sha256` a catalogue stores.
pub fn secret_sha256(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

// ---- the file format -------------------------------------------------------------------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogueFile {
    /// The quotas of every webstore that names none (field by field).
    #[serde(default)]
    quotas: QuotasFile,
    webstores: Vec<WebstoreFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WebstoreFile {
    id: String,
    name: String,
    #[serde(default = "default_locale")]
    locale: String,
    currency: String,
    #[serde(default = "utc")]
    time_zone: String,
    #[serde(default)]
    city: String,
    #[serde(default)]
    email: String,
    #[serde(default)]
    phone: String,
    #[serde(default)]
    sidebar_description: String,
    #[serde(default = "yes")]
    active: bool,
    #[serde(default)]
    payment_options: Vec<String>,
    #[serde(default)]
    require_phone: bool,
    #[serde(default)]
    require_address_1: bool,
    #[serde(default)]
    require_address_2: bool,
    #[serde(default)]
    require_suburb: bool,
    #[serde(default)]
    require_city: bool,
    #[serde(default)]
    require_postcode: bool,
    #[serde(default)]
    require_delivery_note: bool,
    #[serde(default)]
    collect_phone: bool,
    #[serde(default)]
    collect_delivery_note: bool,
    #[serde(default)]
    api_keys: Vec<ApiKeyFile>,
    #[serde(default)]
    producers: Vec<ProducerFile>,
    #[serde(default)]
    webhooks: Vec<WebhookFile>,
    #[serde(default)]
    quotas: QuotasFile,
    #[serde(default)]
    delivery_services: Vec<DeliveryServiceFile>,
    #[serde(default)]
    box_items: Vec<BoxItem>,
    #[serde(default)]
    extras: Vec<ExtraFile>,
    #[serde(default)]
    boxes: Vec<BoxFile>,
}

fn default_locale() -> String {
    "en".to_owned()
}

fn utc() -> String {
    "UTC".to_owned()
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ApiKeyFile {
    key: String,
    secret_sha256: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProducerFile {
    email: String,
    password_hash: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DeliveryServiceFile {
    id: u64,
    name: String,
    #[serde(default)]
    instructions: String,
    fee: String,
    #[serde(default)]
    pickup_point: bool,
    #[serde(default)]
    mon: bool,
    #[serde(default)]
    tue: bool,
    #[serde(default)]
    wed: bool,
    #[serde(default)]
    thu: bool,
    #[serde(default)]
    fri: bool,
    #[serde(default)]
    sat: bool,
    #[serde(default)]
    sun: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExtraFile {
    id: u64,
    name: String,
    #[serde(default)]
    unit: String,
    price: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BoxFile {
    id: u64,
    name: String,
    #[serde(default)]
    description: String,
    price: String,
    #[serde(default)]
    likes: bool,
    #[serde(default)]
    dislikes: bool,
    #[serde(default)]
    extras_allowed: bool,
    #[serde(default)]
    extras_limit: i64,
    #[serde(default)]
    exclusions_limit: i64,
    #[serde(default)]
    substitutions_limit: i64,
    #[serde(default)]
    hidden: bool,
    #[serde(default)]
    extra_ids: Vec<u64>,
    #[serde(default)]
    images: BTreeMap<String, String>,
    updated_at: Option<i64>,
}

fn build(
    file: CatalogueFile,
    loaded_at: i64,
    previous: Option<&Catalogue>,
) -> Result<Catalogue, CatalogueError> {
    let mut problems = Problems::default();
    let mut webstores = Vec::with_capacity(file.webstores.len());
    let mut api_keys = HashMap::new();
    let mut webstore_ids = HashSet::new();
    let mut producer_emails = HashSet::new();
    let mut next_idx = previous.map_or(0, |p| p.next_idx);
    let default_quotas = match file.quotas.over(QuotaSettings::DEFAULT) {
        Ok(quotas) => quotas,
        Err(quota_problems) => {
            for problem in quota_problems {
                problems.add("quotas", problem);
            }
            QuotaSettings::DEFAULT
        }
    };
    for (position, raw) in file.webstores.into_iter().enumerate() {
        let before = problems.count();
        let place = format!("webstores[{position}] ({})", raw.id);
        if raw.id.trim().is_empty() {
            problems.add(format!("webstores[{position}]"), "id is blank");
        } else if raw.id.chars().any(char::is_control) {
            problems.add(&place, "id must not contain control characters");
        } else if !webstore_ids.insert(raw.id.clone()) {
            problems.add(&place, "duplicate webstore id");
        }
        if raw.currency.trim().is_empty() {
            problems.add(&place, "currency is blank");
        }
        let idx = match previous.and_then(|p| p.webstore_by_id(&raw.id)) {
            Some(known) => known.idx,
            None => {
                next_idx += 1;
                WebstoreIdx(next_idx - 1)
            }
        };
        for (k, key) in raw.api_keys.iter().enumerate() {
            let key_place = format!("{place}.api_keys[{k}]");
            if key.key.trim().is_empty() {
                problems.add(&key_place, "key is blank");
                continue;
            }
            let Some(digest) = parse_sha256(&key.secret_sha256) else {
                problems.add(&key_place, "secret_sha256 must be 64 hexadecimal digits");
                continue;
            };
            if api_keys.insert(key.key.clone(), (idx, digest)).is_some() {
                problems.add(&key_place, "this API key is used twice in the catalogue");
            }
        }
        let producers = build_producers(&place, raw.producers, &mut producer_emails, &mut problems);
        let (webhooks, webhook_problems) = build_webhooks(raw.webhooks);
        for (i, problem) in webhook_problems {
            problems.add(format!("{place}.webhooks[{i}]"), problem);
        }
        let quotas = raw
            .quotas
            .over(default_quotas)
            .unwrap_or_else(|quota_problems| {
                for problem in quota_problems {
                    problems.add(format!("{place}.quotas"), problem);
                }
                default_quotas
            });
        let zone = super::time_zones::resolve(&raw.time_zone);
        if zone.is_none() {
            problems.add(
                &place,
                format!(
                    "time_zone {:?} is not a time zone: give a tz database name such as \
                     \"Europe/London\" or a Rails name such as \"London\"",
                    raw.time_zone
                ),
            );
        }
        let delivery_services =
            build_delivery_services(&place, raw.delivery_services, &mut problems);
        let box_items = unique_by_id(
            &place,
            "box_items",
            raw.box_items.into_iter().enumerate().collect(),
            |i| i.id,
            &mut problems,
        );
        let extras = build_extras(&place, raw.extras, &mut problems);
        let boxes = build_boxes(&place, raw.boxes, &extras, loaded_at, &mut problems);
        let Some(zone) = zone.filter(|_| problems.count() == before) else {
            continue;
        };
        webstores.push(Arc::new(Webstore {
            idx,
            settings: WebstoreSettings {
                id: raw.id,
                name: raw.name,
                locale: raw.locale,
                currency: raw.currency,
                time_zone: raw.time_zone,
                city: raw.city,
                email: raw.email,
                phone: raw.phone,
                sidebar_description: raw.sidebar_description,
                active: raw.active,
                payment_options: raw.payment_options,
                require: AddressRequirements {
                    phone: raw.require_phone,
                    address_1: raw.require_address_1,
                    address_2: raw.require_address_2,
                    suburb: raw.require_suburb,
                    city: raw.require_city,
                    postcode: raw.require_postcode,
                    delivery_note: raw.require_delivery_note,
                },
                collect_phone: raw.collect_phone,
                collect_delivery_note: raw.collect_delivery_note,
            },
            delivery_services,
            box_items,
            extras,
            boxes,
            zone,
            producers,
            webhooks,
            quotas,
        }));
    }
    if !problems.0.is_empty() {
        return Err(CatalogueError {
            problems: problems.0,
        });
    }
    let by_idx = webstores.iter().map(|w| (w.idx, w.clone())).collect();
    Ok(Catalogue {
        webstores,
        by_idx,
        api_keys,
        next_idx,
    })
}

/// A webstore's producer accounts by folded email. An email must be a valid address, used
/// once in the whole catalogue (a producer signs in with it alone), and the hash an argon2id
/// PHC string (`boxsub hash-password`).
fn build_producers(
    place: &str,
    raw: Vec<ProducerFile>,
    emails: &mut HashSet<String>,
    problems: &mut Problems,
) -> BTreeMap<String, Producer> {
    let mut producers = BTreeMap::new();
    for (i, producer) in raw.into_iter().enumerate() {
        let producer_place = format!("{place}.producers[{i}]");
        let email = match super::email::Email::parse(&producer.email) {
            Ok(email) => email,
            Err(message) => {
                problems.add(&producer_place, format!("email {message}"));
                continue;
            }
        };
        let key = email.index_key();
        if !emails.insert(key.clone()) {
            problems.add(
                &producer_place,
                "this producer email is used twice in the catalogue (a producer signs in with \
                 their email alone)",
            );
            continue;
        }
        let is_argon2id = argon2::password_hash::PasswordHash::new(&producer.password_hash)
            .is_ok_and(|hash| hash.algorithm.as_str() == "argon2id");
        if !is_argon2id {
            problems.add(
                &producer_place,
                "password_hash must be an argon2id PHC string ($argon2id$...): make it with \
                 `boxsub hash-password`",
            );
            continue;
        }
        producers.insert(
            key,
            Producer {
                email: email.as_str().to_owned(),
                password_hash: producer.password_hash,
            },
        );
    }
    producers
}

fn parse_sha256(text: &str) -> Option<[u8; 32]> {
    let mut digest = [0u8; 32];
    hex::decode_to_slice(text, &mut digest).ok()?;
    Some(digest)
}

/// The items (with their positions in the file) by id; an id of 0 or one given twice is a
/// problem (the first keeps it).
fn unique_by_id<T>(
    place: &str,
    list: &str,
    items: Vec<(usize, T)>,
    id_of: impl Fn(&T) -> u64,
    problems: &mut Problems,
) -> BTreeMap<u64, T> {
    let mut by_id = BTreeMap::new();
    for (position, item) in items {
        let id = id_of(&item);
        let item_place = format!("{place}.{list}[{position}] (id {id})");
        if id == 0 {
            problems.add(item_place, "ids must be positive");
            continue;
        }
        match by_id.entry(id) {
            std::collections::btree_map::Entry::Occupied(_) => {
                problems.add(item_place, format!("duplicate id {id} in {list}"));
            }
            std::collections::btree_map::Entry::Vacant(vacant) => {
                vacant.insert(item);
            }
        }
    }
    by_id
}

fn money(place: &str, field: &str, text: &str, problems: &mut Problems) -> Option<Money> {
    let parsed = Money::parse(text);
    if parsed.is_none() {
        problems.add(
            place,
            format!("{field} {text:?} is not an amount like \"5.00\""),
        );
    }
    parsed
}

fn build_delivery_services(
    place: &str,
    raw: Vec<DeliveryServiceFile>,
    problems: &mut Problems,
) -> BTreeMap<u64, DeliveryService> {
    let mut services = Vec::with_capacity(raw.len());
    for (position, ds) in raw.into_iter().enumerate() {
        let ds_place = format!("{place}.delivery_services[{position}] (id {})", ds.id);
        // A bad fee is reported, and the service kept (at no fee) so that what refers to it
        // is not reported as well; the catalogue is refused either way.
        let fee = money(&ds_place, "fee", &ds.fee, problems).unwrap_or(Money(0));
        services.push((
            position,
            DeliveryService {
                id: ds.id,
                fee,
                name: ds.name,
                instructions: ds.instructions,
                pickup_point: ds.pickup_point,
                days: [ds.mon, ds.tue, ds.wed, ds.thu, ds.fri, ds.sat, ds.sun],
            },
        ));
    }
    unique_by_id(place, "delivery_services", services, |d| d.id, problems)
}

fn build_extras(place: &str, raw: Vec<ExtraFile>, problems: &mut Problems) -> BTreeMap<u64, Extra> {
    let mut extras = Vec::with_capacity(raw.len());
    for (position, extra) in raw.into_iter().enumerate() {
        let extra_place = format!("{place}.extras[{position}] (id {})", extra.id);
        // As for fees: reported, and kept so that boxes offering it are not reported too.
        let price = money(&extra_place, "price", &extra.price, problems).unwrap_or(Money(0));
        extras.push((
            position,
            Extra {
                id: extra.id,
                price,
                name: extra.name,
                unit: extra.unit,
            },
        ));
    }
    unique_by_id(place, "extras", extras, |e| e.id, problems)
}

fn limit(place: &str, field: &str, value: i64, problems: &mut Problems) -> Option<Limit> {
    let parsed = match value {
        -1 => Some(Limit::Unlimited),
        n => u32::try_from(n).ok().map(Limit::AtMost),
    };
    if parsed.is_none() {
        problems.add(
            place,
            format!("{field} must be -1 (unlimited) or a count from 0, not {value}"),
        );
    }
    parsed
}

fn build_boxes(
    place: &str,
    raw: Vec<BoxFile>,
    extras: &BTreeMap<u64, Extra>,
    loaded_at: i64,
    problems: &mut Problems,
) -> BTreeMap<u64, BoxDef> {
    let mut boxes = Vec::with_capacity(raw.len());
    for (position, b) in raw.into_iter().enumerate() {
        let box_place = format!("{place}.boxes[{position}] (id {})", b.id);
        let before = problems.count();
        let mut seen = HashSet::new();
        for extra_id in &b.extra_ids {
            if !extras.contains_key(extra_id) {
                problems.add(
                    &box_place,
                    format!("extra_ids names unknown extra {extra_id}"),
                );
            }
            if !seen.insert(*extra_id) {
                problems.add(
                    &box_place,
                    format!("extra_ids lists extra {extra_id} twice"),
                );
            }
        }
        let price = money(&box_place, "price", &b.price, problems);
        let extras_limit = limit(&box_place, "extras_limit", b.extras_limit, problems);
        let exclusions_limit = limit(&box_place, "exclusions_limit", b.exclusions_limit, problems);
        let substitutions_limit = limit(
            &box_place,
            "substitutions_limit",
            b.substitutions_limit,
            problems,
        );
        let (Some(price), Some(extras_limit), Some(exclusions_limit), Some(substitutions_limit)) =
            (price, extras_limit, exclusions_limit, substitutions_limit)
        else {
            continue;
        };
        if problems.count() > before {
            continue;
        }
        boxes.push((
            position,
            BoxDef {
                id: b.id,
                price,
                extras_limit,
                exclusions_limit,
                substitutions_limit,
                name: b.name,
                description: b.description,
                likes: b.likes,
                dislikes: b.dislikes,
                extras_allowed: b.extras_allowed,
                hidden: b.hidden,
                extra_ids: b.extra_ids,
                images: b.images,
                updated_at: b.updated_at.unwrap_or(loaded_at),
            },
        ));
    }
    unique_by_id(place, "boxes", boxes, |b| b.id, problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The demo catalogue with `producers` given to its first and second webstores.
    fn with_producers(first: serde_json::Value, second: serde_json::Value) -> String {
        let mut demo: serde_json::Value = serde_json::from_str(DEMO_CATALOGUE_JSON).unwrap();
        demo["webstores"][0]["producers"] = first;
        demo["webstores"][1]["producers"] = second;
        demo.to_string()
    }

    #[test]
    fn producers_sign_in_with_a_unique_email_and_an_argon2id_hash() {
        let hash = super::super::password::hash_password("shed key", &[3; 16]).unwrap();
        let text = with_producers(
            serde_json::json!([{"email": " Pat@Farm.example ", "password_hash": hash}]),
            serde_json::json!([]),
        );
        let catalogue = Catalogue::parse(&text, 0).expect("a valid catalogue");
        let (webstore, producer) = catalogue.producer("pat@farm.EXAMPLE").expect("found");
        assert_eq!(webstore.idx, catalogue.webstores()[0].idx);
        assert_eq!(producer.email, "Pat@Farm.example");
        assert!(catalogue.producer("nobody@farm.example").is_none());
        let bad = with_producers(
            serde_json::json!([
                {"email": "not-an-email", "password_hash": hash},
                {"email": "pat@farm.example", "password_hash": "$2b$12$bcrypt-is-not-it"},
                {"email": "sam@farm.example", "password_hash": hash}
            ]),
            serde_json::json!([{"email": "SAM@farm.example", "password_hash": hash}]),
        );
        let problems = Catalogue::parse(&bad, 0).unwrap_err().to_string();
        assert!(
            problems.contains("producers[0]") && problems.contains("email"),
            "{problems}"
        );
        assert!(
            problems.contains("producers[1]") && problems.contains("argon2id"),
            "{problems}"
        );
        assert!(
            problems.contains("used twice in the catalogue"),
            "{problems}"
        );
    }

    #[test]
    fn demo_catalogue_is_valid_and_its_credentials_work() {
        let catalogue = Catalogue::demo(0);
        for (webstore_id, key, secret) in DEMO_CREDENTIALS {
            let webstore = catalogue.authenticate(key, secret).expect("demo key works");
            assert_eq!(webstore.settings.id, webstore_id);
            assert!(catalogue.authenticate(key, "wrong").is_none());
        }
        assert!(catalogue.authenticate("nobody", "x").is_none());
        for (webstore_id, email, password) in DEMO_PRODUCERS {
            let (webstore, producer) = catalogue.producer(email).expect("a demo producer");
            assert_eq!(webstore.settings.id, webstore_id);
            assert!(super::super::password::verify_password(
                password,
                &producer.password_hash
            ));
        }
    }

    #[test]
    fn money_parses_and_prints_two_places() {
        assert_eq!(Money::parse("5").unwrap().to_string(), "5.00");
        assert_eq!(Money::parse("7.5").unwrap().to_string(), "7.50");
        assert_eq!(Money::parse("30.00").unwrap().to_string(), "30.00");
        for bad in ["", "-1", "1.234", "a", "1.", ".5", "1e3"] {
            assert!(Money::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn name_days_and_fee_follows_the_contract() {
        let catalogue = Catalogue::demo(0);
        let store = &catalogue.webstores()[0];
        assert_eq!(
            store.delivery_services[&91].name_days_and_fee("GBP"),
            "Courier (All Regions) - Mon, Tue, Wed, Thu, Fri - £5.00"
        );
        assert_eq!(
            store.delivery_services[&92].name_days_and_fee("NOK"),
            "Market Pickup - Sat - NOK 0.00"
        );
    }

    fn with_box(box_json: &str) -> String {
        format!(
            r#"{{"webstores":[{{"id":"s","name":"S","currency":"GBP","api_keys":[],
               "extras":[{{"id":1,"name":"E","price":"1.00"}}],"boxes":[{box_json}]}}]}}"#
        )
    }

    #[test]
    fn a_bad_entry_neither_moves_later_places_nor_cascades() {
        let text = r#"{"webstores":[{"id":"s","name":"S","currency":"GBP",
            "delivery_services":[{"id":1,"name":"A","fee":"five"},{"id":2,"name":"B","fee":"1.00"},
                                 {"id":2,"name":"C","fee":"1.00"}],
            "extras":[{"id":5,"name":"E","price":"lots"}],
            "boxes":[{"id":7,"name":"B","price":"1.00","extra_ids":[5]}]}]}"#;
        let err = Catalogue::parse(text, 0).unwrap_err();
        let places: Vec<_> = err.problems.iter().map(|p| p.place.as_str()).collect();
        assert_eq!(
            places,
            [
                "webstores[0] (s).delivery_services[0] (id 1)",
                "webstores[0] (s).delivery_services[2] (id 2)",
                "webstores[0] (s).extras[0] (id 5)",
            ],
            "{err}"
        );
    }

    #[test]
    fn broken_catalogues_name_the_place() {
        let unknown_extra = with_box(r#"{"id":7,"name":"B","price":"1.00","extra_ids":[9]}"#);
        let err = Catalogue::parse(&unknown_extra, 0).unwrap_err();
        assert_eq!(err.problems[0].place, "webstores[0] (s).boxes[0] (id 7)");
        assert!(err.problems[0].problem.contains("unknown extra 9"));

        let duplicate = format!(
            r#"{{"webstores":[{{"id":"s","name":"S","currency":"GBP",
               "boxes":[{b},{b}]}}]}}"#,
            b = r#"{"id":7,"name":"B","price":"1.00"}"#
        );
        let err = Catalogue::parse(&duplicate, 0).unwrap_err();
        assert!(err.problems[0].place.contains("boxes[1] (id 7)"), "{err}");

        let bad_hash = r#"{"webstores":[{"id":"s","name":"S","currency":"GBP",
            "api_keys":[{"key":"k","secret_sha256":"abc"}]}]}"#;
        let err = Catalogue::parse(bad_hash, 0).unwrap_err();
        assert_eq!(err.problems[0].place, "webstores[0] (s).api_keys[0]");

        let typo = r#"{"webstores":[{"id":"s","name":"S","currency":"GBP","boxs":[]}]}"#;
        let err = Catalogue::parse(typo, 0).unwrap_err();
        assert!(err.to_string().contains("boxs"), "{err}");

        let bad_limit = with_box(r#"{"id":7,"name":"B","price":"1.00","extras_limit":-2}"#);
        assert!(Catalogue::parse(&bad_limit, 0).is_err());
    }

    #[test]
    fn every_problem_is_reported_not_only_the_first() {
        let broken = r#"{"webstores":[
            {"id":"a","name":"A","currency":"","time_zone":"Atlantis",
             "api_keys":[{"key":"k","secret_sha256":"abc"}],
             "delivery_services":[{"id":1,"name":"D","fee":"x"}],
             "boxes":[{"id":7,"name":"B","price":"1.00","extra_ids":[9]}]},
            {"id":"a","name":"A2","currency":"GBP"}]}"#;
        let err = Catalogue::parse(broken, 0).unwrap_err();
        let problems: Vec<String> = err.problems.iter().map(|p| p.problem.clone()).collect();
        for expected in [
            "currency is blank",
            "secret_sha256",
            "time_zone",
            "fee",
            "unknown extra 9",
            "duplicate webstore id",
        ] {
            assert!(
                problems.iter().any(|p| p.contains(expected)),
                "{expected} missing from {problems:#?}"
            );
        }
    }

    #[test]
    fn a_reloaded_catalogue_keeps_each_webstores_index_and_never_reuses_one() {
        let store = |id: &str| format!(r#"{{"id":"{id}","name":"{id}","currency":"GBP"}}"#);
        let first = Catalogue::parse(
            &format!(r#"{{"webstores":[{},{}]}}"#, store("a"), store("b")),
            0,
        )
        .unwrap();
        let idx = |catalogue: &Catalogue, id: &str| catalogue.webstore_by_id(id).map(|w| w.idx);
        assert_eq!(idx(&first, "a"), Some(WebstoreIdx(0)));
        assert_eq!(idx(&first, "b"), Some(WebstoreIdx(1)));
        // b removed, c added in front: a keeps 0, c gets 2 (not b's 1).
        let second = Catalogue::parse_after(
            Some(&first),
            &format!(r#"{{"webstores":[{},{}]}}"#, store("c"), store("a")),
            0,
        )
        .unwrap();
        assert_eq!(idx(&second, "a"), Some(WebstoreIdx(0)));
        assert_eq!(idx(&second, "c"), Some(WebstoreIdx(2)));
        assert!(second.webstore(WebstoreIdx(1)).is_none());
        let third = Catalogue::parse_after(
            Some(&second),
            &format!(r#"{{"webstores":[{},{}]}}"#, store("b"), store("a")),
            0,
        )
        .unwrap();
        assert_eq!(idx(&third, "b"), Some(WebstoreIdx(3)));
    }
}
