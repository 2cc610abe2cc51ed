//! The operator's catalogue: webstores with their settings, API keys, delivery services, box
//! items, extras and boxes (contract section 7). Parsed and checked once at start-up, then
//! shared read-only by every request, so no lock guards it.
//!
//! Also owns API-key authentication, because the key table is part of the catalogue: secrets
//! exist only as SHA-256 digests and are compared in constant time.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::schedule::WeekDays;

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

/// Position of a webstore in the catalogue; the registry keys its per-webstore indexes by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WebstoreIdx(pub u32);

/// A catalogue that failed to parse or broke one of its own rules; `place` says where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("catalogue {place}: {problem}")]
pub struct CatalogueError {
    /// Where in the catalogue, e.g. `webstores[0] (fantastic-vege-people).boxes[1] (id 218)`.
    pub place: String,
    /// What is wrong there.
    pub problem: String,
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
}

impl Webstore {
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
    webstores: Vec<Arc<Webstore>>,
    api_keys: HashMap<String, (WebstoreIdx, [u8; 32])>,
}

/// Compared against when a key is unknown, so that an unknown key costs the same work as a
/// wrong secret.
const NO_SECRET_DIGEST: [u8; 32] = [0xA5; 32];

impl Catalogue {
    /// Parses and checks a catalogue document. `loaded_at` (Unix time) stands in for a box's
    /// `updated_at` where the catalogue gives none.
    pub fn parse(json: &str, loaded_at: i64) -> Result<Catalogue, CatalogueError> {
        let file: CatalogueFile = serde_json::from_str(json).map_err(|e| CatalogueError {
            place: format!("line {} column {}", e.line(), e.column()),
            problem: e.to_string(),
        })?;
        build(file, loaded_at)
    }

    /// The built-in demo catalogue.
    pub fn demo(loaded_at: i64) -> Catalogue {
        Catalogue::parse(DEMO_CATALOGUE_JSON, loaded_at).expect("the demo catalogue is valid")
    }

    /// Every webstore in catalogue order.
    pub fn webstores(&self) -> &[Arc<Webstore>] {
        &self.webstores
    }

    /// The webstore at `idx`.
    pub fn webstore(&self, idx: WebstoreIdx) -> Option<&Arc<Webstore>> {
        self.webstores.get(idx.0 as usize)
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

fn fail<T>(place: String, problem: impl Into<String>) -> Result<T, CatalogueError> {
    Err(CatalogueError {
        place,
        problem: problem.into(),
    })
}

fn build(file: CatalogueFile, loaded_at: i64) -> Result<Catalogue, CatalogueError> {
    let mut webstores = Vec::with_capacity(file.webstores.len());
    let mut api_keys = HashMap::new();
    let mut webstore_ids = HashSet::new();
    for (position, raw) in file.webstores.into_iter().enumerate() {
        let place = format!("webstores[{position}] ({})", raw.id);
        if raw.id.trim().is_empty() {
            return fail(format!("webstores[{position}]"), "id is blank");
        }
        if raw.id.chars().any(char::is_control) {
            return fail(place, "id must not contain control characters");
        }
        if !webstore_ids.insert(raw.id.clone()) {
            return fail(place, "duplicate webstore id");
        }
        if raw.currency.trim().is_empty() {
            return fail(place, "currency is blank");
        }
        let idx = WebstoreIdx(u32::try_from(position).map_err(|_| CatalogueError {
            place: place.clone(),
            problem: "too many webstores".into(),
        })?);
        for (k, key) in raw.api_keys.iter().enumerate() {
            let key_place = format!("{place}.api_keys[{k}]");
            if key.key.trim().is_empty() {
                return fail(key_place, "key is blank");
            }
            let digest = parse_sha256(&key.secret_sha256).ok_or_else(|| CatalogueError {
                place: key_place.clone(),
                problem: "secret_sha256 must be 64 hexadecimal digits".into(),
            })?;
            if api_keys.insert(key.key.clone(), (idx, digest)).is_some() {
                return fail(key_place, "this API key is used twice in the catalogue");
            }
        }
        let Some(zone) = super::time_zones::resolve(&raw.time_zone) else {
            return fail(
                place,
                format!(
                    "time_zone {:?} is not a time zone: give a tz database name such as \
                     \"Europe/London\" or a Rails name such as \"London\"",
                    raw.time_zone
                ),
            );
        };
        let delivery_services = build_delivery_services(&place, raw.delivery_services)?;
        let box_items = unique_by_id(&place, "box_items", raw.box_items, |i| i.id)?;
        let extras = build_extras(&place, raw.extras)?;
        let boxes = build_boxes(&place, raw.boxes, &extras, loaded_at)?;
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
        }));
    }
    Ok(Catalogue {
        webstores,
        api_keys,
    })
}

fn parse_sha256(text: &str) -> Option<[u8; 32]> {
    let mut digest = [0u8; 32];
    hex::decode_to_slice(text, &mut digest).ok()?;
    Some(digest)
}

fn unique_by_id<T>(
    place: &str,
    list: &str,
    items: Vec<T>,
    id_of: impl Fn(&T) -> u64,
) -> Result<BTreeMap<u64, T>, CatalogueError> {
    let mut by_id = BTreeMap::new();
    for (position, item) in items.into_iter().enumerate() {
        let id = id_of(&item);
        let item_place = format!("{place}.{list}[{position}] (id {id})");
        if id == 0 {
            return fail(item_place, "ids must be positive");
        }
        if by_id.insert(id, item).is_some() {
            return fail(item_place, format!("duplicate id {id} in {list}"));
        }
    }
    Ok(by_id)
}

fn money(place: &str, field: &str, text: &str) -> Result<Money, CatalogueError> {
    Money::parse(text).ok_or_else(|| CatalogueError {
        place: place.to_owned(),
        problem: format!("{field} {text:?} is not an amount like \"5.00\""),
    })
}

fn build_delivery_services(
    place: &str,
    raw: Vec<DeliveryServiceFile>,
) -> Result<BTreeMap<u64, DeliveryService>, CatalogueError> {
    let mut services = Vec::with_capacity(raw.len());
    for (position, ds) in raw.into_iter().enumerate() {
        let ds_place = format!("{place}.delivery_services[{position}] (id {})", ds.id);
        services.push(DeliveryService {
            id: ds.id,
            fee: money(&ds_place, "fee", &ds.fee)?,
            name: ds.name,
            instructions: ds.instructions,
            pickup_point: ds.pickup_point,
            days: [ds.mon, ds.tue, ds.wed, ds.thu, ds.fri, ds.sat, ds.sun],
        });
    }
    unique_by_id(place, "delivery_services", services, |d| d.id)
}

fn build_extras(place: &str, raw: Vec<ExtraFile>) -> Result<BTreeMap<u64, Extra>, CatalogueError> {
    let mut extras = Vec::with_capacity(raw.len());
    for (position, extra) in raw.into_iter().enumerate() {
        let extra_place = format!("{place}.extras[{position}] (id {})", extra.id);
        extras.push(Extra {
            id: extra.id,
            price: money(&extra_place, "price", &extra.price)?,
            name: extra.name,
            unit: extra.unit,
        });
    }
    unique_by_id(place, "extras", extras, |e| e.id)
}

fn limit(place: &str, field: &str, value: i64) -> Result<Limit, CatalogueError> {
    match value {
        -1 => Ok(Limit::Unlimited),
        n => u32::try_from(n)
            .map(Limit::AtMost)
            .map_err(|_| CatalogueError {
                place: place.to_owned(),
                problem: format!("{field} must be -1 (unlimited) or a count from 0, not {n}"),
            }),
    }
}

fn build_boxes(
    place: &str,
    raw: Vec<BoxFile>,
    extras: &BTreeMap<u64, Extra>,
    loaded_at: i64,
) -> Result<BTreeMap<u64, BoxDef>, CatalogueError> {
    let mut boxes = Vec::with_capacity(raw.len());
    for (position, b) in raw.into_iter().enumerate() {
        let box_place = format!("{place}.boxes[{position}] (id {})", b.id);
        let mut seen = HashSet::new();
        for extra_id in &b.extra_ids {
            if !extras.contains_key(extra_id) {
                return fail(
                    box_place,
                    format!("extra_ids names unknown extra {extra_id}"),
                );
            }
            if !seen.insert(*extra_id) {
                return fail(box_place, format!("extra_ids lists extra {extra_id} twice"));
            }
        }
        boxes.push(BoxDef {
            id: b.id,
            price: money(&box_place, "price", &b.price)?,
            extras_limit: limit(&box_place, "extras_limit", b.extras_limit)?,
            exclusions_limit: limit(&box_place, "exclusions_limit", b.exclusions_limit)?,
            substitutions_limit: limit(&box_place, "substitutions_limit", b.substitutions_limit)?,
            name: b.name,
            description: b.description,
            likes: b.likes,
            dislikes: b.dislikes,
            extras_allowed: b.extras_allowed,
            hidden: b.hidden,
            extra_ids: b.extra_ids,
            images: b.images,
            updated_at: b.updated_at.unwrap_or(loaded_at),
        });
    }
    unique_by_id(place, "boxes", boxes, |b| b.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_catalogue_is_valid_and_its_credentials_work() {
        let catalogue = Catalogue::demo(0);
        for (webstore_id, key, secret) in DEMO_CREDENTIALS {
            let webstore = catalogue.authenticate(key, secret).expect("demo key works");
            assert_eq!(webstore.settings.id, webstore_id);
            assert!(catalogue.authenticate(key, "wrong").is_none());
        }
        assert!(catalogue.authenticate("nobody", "x").is_none());
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
    fn broken_catalogues_name_the_place() {
        let unknown_extra = with_box(r#"{"id":7,"name":"B","price":"1.00","extra_ids":[9]}"#);
        let err = Catalogue::parse(&unknown_extra, 0).unwrap_err();
        assert_eq!(err.place, "webstores[0] (s).boxes[0] (id 7)");
        assert!(err.problem.contains("unknown extra 9"));

        let duplicate = format!(
            r#"{{"webstores":[{{"id":"s","name":"S","currency":"GBP",
               "boxes":[{b},{b}]}}]}}"#,
            b = r#"{"id":7,"name":"B","price":"1.00"}"#
        );
        let err = Catalogue::parse(&duplicate, 0).unwrap_err();
        assert!(err.place.contains("boxes[1] (id 7)"), "{err}");

        let bad_hash = r#"{"webstores":[{"id":"s","name":"S","currency":"GBP",
            "api_keys":[{"key":"k","secret_sha256":"abc"}]}]}"#;
        let err = Catalogue::parse(bad_hash, 0).unwrap_err();
        assert_eq!(err.place, "webstores[0] (s).api_keys[0]");

        let typo = r#"{"webstores":[{"id":"s","name":"S","currency":"GBP","boxs":[]}]}"#;
        let err = Catalogue::parse(typo, 0).unwrap_err();
        assert!(err.to_string().contains("boxs"), "{err}");

        let bad_limit = with_box(r#"{"id":7,"name":"B","price":"1.00","extras_limit":-2}"#);
        assert!(Catalogue::parse(&bad_limit, 0).is_err());
    }
}
