//! The operator's catalogue: webstores with their settings, API keys, delivery services, box
//! items, extras and boxes (contract section 7). Parsed and checked once at start-up, then
//! shared read-only by every request, so no lock guards it.
//!
//! - `file`: the JSON document and its checks, which build the model.
//! - `keys`: API-key authentication; secrets exist only as SHA-256 digests.
//! - `current`: the catalogue in force, replaced whole on a reload.
//! - `demo`: the catalogue built into the binary, and its public credentials.
//!
//! This file owns the model: the types a checked catalogue is made of and what they answer
//! (prices, limits, delivery days, a webstore's boxes, a producer by email). Everything the
//! submodules make public is re-exported here, so `crate::domain::catalogue::X` names it.
//!
//! Must not touch: the file format's checks, secrets and their digests.

mod current;
mod demo;
mod file;
mod keys;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use serde::Deserialize;

use super::account::charging::DeliveredAt;
use super::cutoff::Cutoff;
use super::day::Day;
use super::day::WeekDays;
use super::money::Amount;
use super::quotas::QuotaSettings;
use super::webhooks::Webhook;

pub use current::CurrentCatalogue;
pub use demo::{DEMO_CATALOGUE_JSON, DEMO_CREDENTIALS, DEMO_PRODUCERS};
pub use file::{CatalogueError, Problem};
pub use keys::secret_sha256;

/// A webstore's number within a running process: its position in the first catalogue
/// loaded, kept by its id through reloads (a webstore added later gets the next number, and
/// a number is never given to another webstore). The registry keys its per-webstore state by
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WebstoreIdx(pub u32);

/// An amount of money in hundredths, shown with two decimal places.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Money(u64);

impl Money {
    /// The amount in hundredths.
    pub fn cents(self) -> u64 {
        self.0
    }

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
    /// When its delivery dates lock ([`Cutoff::DEFAULT`] unless its entry gives `cutoff`).
    pub cutoff: Cutoff,
    /// When its frozen deliveries are charged on their date ([`DeliveredAt::DEFAULT`]
    /// unless its entry gives `delivered_at`).
    pub delivered_at: DeliveredAt,
    /// Its customers' spend limit, where a customer has none of their own (`None`: no
    /// limit, unless its entry gives `balance_threshold`).
    pub balance_threshold: Option<Amount>,
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
    /// The day it is in the webstore's time zone at `now` (Unix seconds: the caller reads the
    /// clock, `crate::clock::unix_now`).
    pub fn today(&self, now: i64) -> Day {
        let now = jiff::Timestamp::from_second(now).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        Day::of(now.to_zoned_datetime(self.zone.clone()).date())
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

impl Catalogue {
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

    /// The webstore at `idx`.
    pub fn webstore(&self, idx: WebstoreIdx) -> Option<&Arc<Webstore>> {
        self.by_idx.get(&idx)
    }

    /// The webstore with this id.
    pub fn webstore_by_id(&self, id: &str) -> Option<&Arc<Webstore>> {
        self.webstores.iter().find(|w| w.settings.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
