//! The catalogue's JSON document and its checks: the shapes serde reads (unknown fields
//! refused), and the build that turns them into the model, collecting every problem with
//! its place (`webstores[0] (id).boxes[1] (id 218)`) instead of stopping at the first. A
//! reloaded catalogue keeps each known webstore's index and gives a new one the next.
//!
//! Must not touch: authentication (it hands the key table's digests to the model), the
//! catalogue in force.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use serde::Deserialize;

use super::keys::parse_sha256;
use super::{
    AddressRequirements, BoxDef, BoxItem, Catalogue, DeliveryService, Extra, Limit, Money,
    Producer, Webstore, WebstoreIdx, WebstoreSettings,
};
use crate::domain::account::charging::DeliveredAt;
use crate::domain::cutoff::{Cutoff, CutoffFile};
use crate::domain::money::Amount;
use crate::domain::quotas::{QuotaSettings, QuotasFile};
use crate::domain::webhooks::{build_webhooks, WebhookFile};

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
}

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
    cutoff: CutoffFile,
    #[serde(default)]
    delivered_at: Option<String>,
    #[serde(default)]
    balance_threshold: Option<String>,
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
        let cutoff = raw.cutoff.build().unwrap_or_else(|cutoff_problems| {
            for problem in cutoff_problems {
                problems.add(format!("{place}.cutoff"), problem);
            }
            Cutoff::DEFAULT
        });
        let delivered_at = match &raw.delivered_at {
            None => DeliveredAt::DEFAULT,
            Some(text) => DeliveredAt::parse(text).unwrap_or_else(|| {
                problems.add(
                    format!("{place}.delivered_at"),
                    format!(
                        "must be a local time of day as \"HH:MM\" (00:00 to 23:59), not {text:?}"
                    ),
                );
                DeliveredAt::DEFAULT
            }),
        };
        let balance_threshold = raw.balance_threshold.as_deref().and_then(|text| {
            let threshold = Amount::from_json_text(text).filter(|_| !text.contains('"'));
            if threshold.is_none() {
                problems.add(
                    format!("{place}.balance_threshold"),
                    format!(
                        "must be an amount with at most two decimals, such as \"-20.00\", not \
                         {text:?}"
                    ),
                );
            }
            threshold
        });
        let zone = crate::domain::time_zones::resolve(&raw.time_zone);
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
            cutoff,
            delivered_at,
            balance_threshold,
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
        let email = match crate::domain::email::Email::parse(&producer.email) {
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

    use crate::domain::catalogue::DEMO_CATALOGUE_JSON;

    /// The demo catalogue with `producers` given to its first and second webstores.
    fn with_producers(first: serde_json::Value, second: serde_json::Value) -> String {
        let mut demo: serde_json::Value = serde_json::from_str(DEMO_CATALOGUE_JSON).unwrap();
        demo["webstores"][0]["producers"] = first;
        demo["webstores"][1]["producers"] = second;
        demo.to_string()
    }

    #[test]
    fn producers_sign_in_with_a_unique_email_and_an_argon2id_hash() {
        let hash = crate::domain::password::hash_password("shed key", &[3; 16]).unwrap();
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
    fn a_cutoff_is_optional_and_a_bad_one_is_named_at_its_place() {
        let store = |cutoff: &str| {
            format!(r#"{{"webstores":[{{"id":"s","name":"S","currency":"GBP"{cutoff}}}]}}"#)
        };
        let plain = Catalogue::parse(&store(""), 0).unwrap();
        assert_eq!(plain.webstores()[0].cutoff, Cutoff::DEFAULT);
        let given =
            Catalogue::parse(&store(r#","cutoff":{"days_before":2,"time":"00:00"}"#), 0).unwrap();
        assert_eq!(given.webstores()[0].cutoff, Cutoff::new(2, 0, 0).unwrap());
        let err = Catalogue::parse(&store(r#","cutoff":{"days_before":30,"time":"6pm"}"#), 0)
            .unwrap_err();
        let places: Vec<_> = err.problems.iter().map(|p| p.place.as_str()).collect();
        assert_eq!(
            places,
            ["webstores[0] (s).cutoff", "webstores[0] (s).cutoff"],
            "{err}"
        );
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
