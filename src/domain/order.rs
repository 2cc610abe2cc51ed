//! Orders: one box of quantity 1 for one customer, with exclusions, substitutions and extras
//! that must fit the box's rules (contract section 5). Validation is one pure function of the
//! body's fields ([`OrderBody`]) and the webstore's catalogue, so it can be property-tested
//! and fuzzed on its own.
//!
//! Must not touch: I/O, the clock (the caller passes today), the actors that apply orders.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::catalogue::{BoxDef, Limit, Webstore};
use super::fields::{
    field, integer, positive_id, slot, BodyFields, Field, FieldErrors, BLANK, INVALID,
    NOT_AN_INTEGER, NOT_IN_LIST,
};
use super::ids::CustomerId;
use super::schedule::{
    self, parse_start_date, parse_week_days, Frequency, Schedule, ScheduleRules,
};

/// Most elements accepted in any one array of an order (contract section 6).
pub const MAX_LIST_ITEMS: usize = 100;
/// Largest quantity of one extra on one order.
pub const MAX_EXTRA_QUANTITY: i64 = 1000;

const ONE_BOX_ONLY: &str =
    "must be 1: an order is for one box; post one order per box and per unit";

/// A quantity of one extra.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtraLine {
    /// The extra's id.
    pub id: u64,
    /// At least 1.
    pub quantity: u32,
}

/// An order as validated, before it has an id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewOrder {
    /// A visible box of the webstore.
    pub box_id: u64,
    /// Delivery frequency.
    pub frequency: Frequency,
    /// Whether extras come once rather than with every box.
    pub extras_one_off: bool,
    /// Extras in the order sent.
    pub extras: Vec<ExtraLine>,
    /// Excluded box items in the order sent.
    pub exclusions: Vec<u64>,
    /// Substitute box items in the order sent.
    pub substitutions: Vec<u64>,
    /// When it is delivered, with `frequency`.
    pub schedule: Schedule,
}

/// An order body as the rules read it: each field they know, as sent (absent, `null` or a
/// value). Any other key is skipped when the body is parsed and never held, which spares
/// an order the map of every key it sent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OrderBody {
    customer_id: Option<Value>,
    quantity: Option<Value>,
    box_id: Option<Value>,
    frequency: Option<Value>,
    extras_one_off: Option<Value>,
    exclusions: Option<Value>,
    substitutions: Option<Value>,
    extras: Option<Value>,
    start_date: Option<Value>,
    week_days: Option<Value>,
}

impl BodyFields for OrderBody {
    fn slot(&mut self, key: &str) -> Option<&mut Option<Value>> {
        Some(match key {
            "customer_id" => &mut self.customer_id,
            "quantity" => &mut self.quantity,
            "box_id" => &mut self.box_id,
            "frequency" => &mut self.frequency,
            "extras_one_off" => &mut self.extras_one_off,
            "exclusions" => &mut self.exclusions,
            "substitutions" => &mut self.substitutions,
            "extras" => &mut self.extras,
            "start_date" => &mut self.start_date,
            "week_days" => &mut self.week_days,
            _ => return None,
        })
    }
}

impl OrderBody {
    /// Whether it gives a `start_date` (else the schedule starts at the first delivery date
    /// after the cut-off).
    pub fn has_start_date(&self) -> bool {
        self.start_date
            .as_ref()
            .is_some_and(|value| !value.is_null())
    }

    /// The order fields of a JSON object (already unwrapped from `{"order": …}`).
    pub fn from_object(object: Map<String, Value>) -> OrderBody {
        let mut body = OrderBody::default();
        for (key, value) in object {
            if let Some(slot) = body.slot(&key) {
                *slot = Some(value);
            }
        }
        body
    }
}

/// What an order body says about its customer, before anyone has looked the id up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CustomerRef {
    /// Absent, null or empty.
    Missing,
    /// Not a positive integer, so no customer can have it.
    Malformed,
    /// An id to look up.
    Id(CustomerId),
}

/// Reads `customer_id` from an order body.
pub fn customer_ref(body: &OrderBody) -> CustomerRef {
    match slot(&body.customer_id) {
        Field::Absent | Field::Null => CustomerRef::Missing,
        Field::Present(Value::String(s)) if s.trim().is_empty() => CustomerRef::Missing,
        Field::Present(value) => match positive_id(value) {
            Some(id) => CustomerRef::Id(CustomerId(id)),
            None => CustomerRef::Malformed,
        },
    }
}

/// Whether the order's customer was found in the caller's webstore.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CustomerCheck {
    /// It was; its delivery service and the webstore's today decide the schedule.
    Found(ScheduleRules),
    /// No `customer_id` was given.
    Missing,
    /// Given, but not a customer of this webstore.
    Unknown,
}

/// Checks an order body (already unwrapped from `{"order": …}`) against every rule of the
/// contract, reporting all failing fields at once.
pub fn validate_order(
    body: &OrderBody,
    webstore: &Webstore,
    customer: CustomerCheck,
) -> Result<NewOrder, FieldErrors> {
    let mut errors = FieldErrors::new();
    let rules = match customer {
        CustomerCheck::Found(rules) => Some(rules),
        CustomerCheck::Missing => {
            errors.add("customer_id", BLANK);
            None
        }
        CustomerCheck::Unknown => {
            errors.add("customer_id", INVALID);
            None
        }
    };

    if let Field::Present(quantity) = slot(&body.quantity) {
        if integer(quantity) != Some(1) {
            errors.add("quantity", ONE_BOX_ONLY);
        }
    }

    let order_box = match slot(&body.box_id) {
        Field::Absent | Field::Null => {
            errors.add("box_id", BLANK);
            None
        }
        Field::Present(value) => {
            let found = positive_id(value).and_then(|id| webstore.visible_box(id));
            if found.is_none() {
                errors.add("box_id", INVALID);
            }
            found
        }
    };

    let frequency = match slot(&body.frequency) {
        Field::Absent | Field::Null => Frequency::Single,
        Field::Present(value) => match value.as_str().and_then(Frequency::parse) {
            Some(frequency) => frequency,
            None => {
                errors.add("frequency", NOT_IN_LIST);
                Frequency::Single
            }
        },
    };

    let extras_one_off = match slot(&body.extras_one_off) {
        Field::Absent | Field::Null => false,
        Field::Present(Value::Bool(flag)) => *flag,
        Field::Present(Value::String(s)) if s == "true" => true,
        Field::Present(Value::String(s)) if s == "false" => false,
        Field::Present(_) => {
            errors.add("extras_one_off", INVALID);
            false
        }
    };

    let exclusions = box_item_list(slot(&body.exclusions), "exclusions", webstore, &mut errors);
    let substitutions = box_item_list(
        slot(&body.substitutions),
        "substitutions",
        webstore,
        &mut errors,
    );
    if let Some(b) = order_box {
        check_item_list(
            &exclusions,
            "exclusions",
            b.dislikes,
            b.exclusions_limit,
            &mut errors,
        );
        check_item_list(
            &substitutions,
            "substitutions",
            b.likes,
            b.substitutions_limit,
            &mut errors,
        );
    }
    if !errors.has("exclusions") && !errors.has("substitutions") {
        let excluded: HashSet<u64> = exclusions.iter().copied().collect();
        if substitutions.iter().any(|id| excluded.contains(id)) {
            errors.add("substitutions", "must not include an excluded item");
        }
    }

    let extras = extra_lines(body, webstore, order_box, &mut errors);

    let start = parse_start_date(slot(&body.start_date)).unwrap_or_else(|message| {
        errors.add("start_date", message);
        None
    });
    let week_days = parse_week_days(slot(&body.week_days)).unwrap_or_else(|message| {
        errors.add("week_days", message);
        None
    });
    let schedule = match rules {
        // The delivery-day rules need a customer, a known frequency and well-formed fields.
        Some(rules)
            if !errors.has("frequency")
                && !errors.has("start_date")
                && !errors.has("week_days") =>
        {
            schedule::resolve(frequency, start, week_days, rules, &mut errors)
        }
        _ => None,
    };

    match schedule {
        Some(schedule) => errors.into_result(NewOrder {
            box_id: order_box.map_or(0, |b| b.id),
            frequency,
            extras_one_off,
            extras,
            exclusions,
            substitutions,
            schedule,
        }),
        // Without a schedule there is an error already (no customer, or a broken rule).
        None if !errors.is_empty() => Err(errors),
        None => Err(FieldErrors::single("start_date", INVALID)),
    }
}

/// Reads an array of distinct box-item ids of the webstore; problems are named by `name`.
fn box_item_list(
    list: Field<'_>,
    name: &str,
    webstore: &Webstore,
    errors: &mut FieldErrors,
) -> Vec<u64> {
    let items = match list {
        Field::Absent | Field::Null => return Vec::new(),
        Field::Present(Value::Array(items)) => items,
        Field::Present(_) => {
            errors.add(name, INVALID);
            return Vec::new();
        }
    };
    if items.len() > MAX_LIST_ITEMS {
        errors.add(name, too_many(MAX_LIST_ITEMS as u64));
        return Vec::new();
    }
    let mut ids = Vec::with_capacity(items.len());
    let mut seen = HashSet::with_capacity(items.len());
    for item in items {
        match positive_id(item) {
            None => errors.add(name, "must contain only box item ids"),
            Some(id) if !webstore.box_items.contains_key(&id) => {
                errors.add(name, format!("contains an unknown box item ({id})"))
            }
            Some(id) if !seen.insert(id) => {
                errors.add(name, format!("contains box item {id} more than once"))
            }
            Some(id) => ids.push(id),
        }
    }
    ids
}

/// The box's rules for a list of box items: whether it may be non-empty, and its length.
fn check_item_list(ids: &[u64], name: &str, allowed: bool, limit: Limit, errors: &mut FieldErrors) {
    if ids.is_empty() || errors.has(name) {
        return;
    }
    if !allowed {
        errors.add(name, "are not allowed for this box");
    } else if !limit.allows(ids.len() as u64) {
        errors.add(name, too_many(limit.as_wire() as u64));
    }
}

fn too_many(max: u64) -> String {
    format!("has too many items (maximum is {max})")
}

/// Reads the `extras` array: each an extra the box offers, listed once, with a quantity of at
/// least 1; then the box's rules on extras as a whole.
fn extra_lines(
    body: &OrderBody,
    webstore: &Webstore,
    order_box: Option<&BoxDef>,
    errors: &mut FieldErrors,
) -> Vec<ExtraLine> {
    let items = match slot(&body.extras) {
        Field::Absent | Field::Null => return Vec::new(),
        Field::Present(Value::Array(items)) => items,
        Field::Present(_) => {
            errors.add("extras", INVALID);
            return Vec::new();
        }
    };
    if items.len() > MAX_LIST_ITEMS {
        errors.add("extras", too_many(MAX_LIST_ITEMS as u64));
        return Vec::new();
    }
    let extras_refused = order_box.is_some_and(|b| !b.extras_allowed) && !items.is_empty();
    if extras_refused {
        errors.add("extras", "are not allowed for this box");
    }
    let mut lines = Vec::with_capacity(items.len());
    let mut seen = HashSet::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let Value::Object(item) = item else {
            errors.add(format!("extras[{i}]"), INVALID);
            continue;
        };
        let id = match field(item, "id") {
            Field::Absent | Field::Null => {
                errors.add(format!("extras[{i}].id"), BLANK);
                None
            }
            Field::Present(value) => {
                let id = positive_id(value);
                let known = match (id, order_box) {
                    (Some(_), Some(_)) if extras_refused => true,
                    (Some(id), Some(b)) => b.offers_extra(id),
                    (Some(id), None) => webstore.extras.contains_key(&id),
                    (None, _) => false,
                };
                if !known {
                    errors.add(
                        format!("extras[{i}].id"),
                        "is not an extra offered by this box",
                    );
                    None
                } else if id.is_some_and(|id| !seen.insert(id)) {
                    errors.add(format!("extras[{i}].id"), "is listed more than once");
                    None
                } else {
                    id
                }
            }
        };
        let quantity = match field(item, "quantity") {
            Field::Absent | Field::Null => {
                errors.add(format!("extras[{i}].quantity"), BLANK);
                None
            }
            Field::Present(value) => match integer(value) {
                None => {
                    errors.add(format!("extras[{i}].quantity"), NOT_AN_INTEGER);
                    None
                }
                Some(q) if q < 1 => {
                    errors.add(
                        format!("extras[{i}].quantity"),
                        "must be greater than or equal to 1",
                    );
                    None
                }
                Some(q) if q > MAX_EXTRA_QUANTITY => {
                    errors.add(
                        format!("extras[{i}].quantity"),
                        format!("must be less than or equal to {MAX_EXTRA_QUANTITY}"),
                    );
                    None
                }
                Some(q) => u32::try_from(q).ok(),
            },
        };
        if let (Some(id), Some(quantity)) = (id, quantity) {
            lines.push(ExtraLine { id, quantity });
        }
    }
    if let Some(b) = order_box {
        let total: u64 = lines.iter().map(|line| u64::from(line.quantity)).sum();
        if !extras_refused && !b.extras_limit.allows(total) {
            errors.add(
                "extras",
                format!(
                    "total quantity is more than this box allows (maximum is {})",
                    b.extras_limit.as_wire()
                ),
            );
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::catalogue::Catalogue;
    use crate::domain::schedule::{Day, WeekDays};
    use proptest::prelude::*;
    use serde_json::json;
    use std::sync::Arc;

    fn demo() -> Vec<Arc<Webstore>> {
        Catalogue::demo(0).webstores().to_vec()
    }

    /// A customer found, whose service delivers every day; today is Monday 2026-11-23.
    fn found() -> CustomerCheck {
        CustomerCheck::Found(ScheduleRules {
            delivery_days: WeekDays::from_bits(0x7f),
            today: Day::of(jiff::civil::Date::constant(2026, 11, 23)),
        })
    }

    fn object(value: Value) -> OrderBody {
        OrderBody::from_object(value.as_object().cloned().unwrap())
    }

    fn failing_fields(body: Value, webstore: &Webstore, customer: CustomerCheck) -> Vec<String> {
        validate_order(&object(body), webstore, customer)
            .unwrap_err()
            .fields()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn defaults_apply_to_a_minimal_order() {
        let stores = demo();
        let order = validate_order(&object(json!({"box_id": "217"})), &stores[0], found()).unwrap();
        assert_eq!(order.frequency, Frequency::Single);
        assert!(!order.extras_one_off && order.extras.is_empty());
    }

    #[test]
    fn every_failing_field_is_reported_together() {
        let stores = demo();
        let body = json!({"box_id": 219, "frequency": "daily", "quantity": 2,
                          "exclusions": [9999], "extras": [{"id": 28, "quantity": 0}]});
        assert_eq!(
            failing_fields(body, &stores[0], CustomerCheck::Missing),
            [
                "customer_id",
                "quantity",
                "box_id",
                "frequency",
                "exclusions",
                "extras[0].quantity"
            ]
        );
    }

    #[test]
    fn table_of_single_rule_breaks() {
        let stores = demo();
        let s = &stores[0];
        let cases = [
            (
                json!({"box_id": 217, "exclusions": [240, 240]}),
                "exclusions",
            ),
            (
                json!({"box_id": 217, "exclusions": [240, 241, 242, 243]}),
                "exclusions",
            ),
            (json!({"box_id": 217, "exclusions": ["x"]}), "exclusions"),
            (
                json!({"box_id": 218, "substitutions": [240]}),
                "substitutions",
            ),
            (
                json!({"box_id": 217, "exclusions": [240], "substitutions": [240]}),
                "substitutions",
            ),
            (
                json!({"box_id": 217, "exclusions": (1..=101).collect::<Vec<_>>()}),
                "exclusions",
            ),
            (
                json!({"box_id": 218, "extras": [{"id": 28, "quantity": 3}]}),
                "extras",
            ),
            (
                json!({"box_id": 218, "extras": [{"id": 29, "quantity": 1}]}),
                "extras[0].id",
            ),
            (
                json!({"box_id": 217, "extras": [{"id": 28, "quantity": 1}, {"id": 28, "quantity": 1}]}),
                "extras[1].id",
            ),
            (
                json!({"box_id": 217, "extras": [{"id": 28, "quantity": 2.5}]}),
                "extras[0].quantity",
            ),
            (json!({"box_id": 217, "extras": [7]}), "extras[0]"),
            (json!({"box_id": 217, "extras": {"id": 28}}), "extras"),
            (
                json!({"box_id": 217, "extras_one_off": "maybe"}),
                "extras_one_off",
            ),
            (json!({"box_id": 217, "quantity": "2"}), "quantity"),
            (json!({"box_id": 801}), "box_id"),
            (json!({"box_id": 2.5}), "box_id"),
        ];
        for (body, name) in cases {
            assert_eq!(failing_fields(body.clone(), s, found()), [name], "{body}");
        }
        assert_eq!(
            failing_fields(
                json!({"box_id": 801, "extras": [{"id": 701, "quantity": 1}]}),
                &stores[1],
                CustomerCheck::Unknown
            ),
            ["customer_id"]
        );
    }

    #[test]
    fn customer_refs_are_read_leniently() {
        assert_eq!(
            customer_ref(&object(json!({"customer_id": "12"}))),
            CustomerRef::Id(CustomerId(12))
        );
        assert_eq!(
            customer_ref(&object(json!({"customer_id": 12}))),
            CustomerRef::Id(CustomerId(12))
        );
        assert_eq!(
            customer_ref(&object(json!({"customer_id": ""}))),
            CustomerRef::Missing
        );
        assert_eq!(customer_ref(&object(json!({}))), CustomerRef::Missing);
        assert_eq!(
            customer_ref(&object(json!({"customer_id": "abc"}))),
            CustomerRef::Malformed
        );
        assert_eq!(
            customer_ref(&object(json!({"customer_id": -1}))),
            CustomerRef::Malformed
        );
    }

    /// A valid order for one of the demo catalogue's visible boxes, and the JSON that asks for it.
    fn valid_order() -> impl Strategy<Value = (usize, NewOrder, Value)> {
        let boxes: Vec<(usize, u64)> = demo()
            .iter()
            .enumerate()
            .flat_map(|(s, w)| {
                w.visible_boxes()
                    .map(move |b| (s, b.id))
                    .collect::<Vec<_>>()
            })
            .collect();
        (
            prop::sample::select(boxes),
            any::<u64>(),
            any::<bool>(),
            0..3usize,
            any::<bool>(),
            (19_000i32..22_000, 1u8..128),
        )
            .prop_map(|((store, box_id), seed, one_off, freq, as_strings, (start, days))| {
                let stores = demo();
                let webstore = &stores[store];
                let b = webstore.visible_box(box_id).unwrap();
                let mut rng = seed;
                let mut next = |n: u64| {
                    rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    if n == 0 { 0 } else { (rng >> 33) % n }
                };
                let mut items: Vec<u64> = webstore.box_items.keys().copied().collect();
                for i in (1..items.len()).rev() {
                    items.swap(i, next(i as u64 + 1) as usize);
                }
                let room = |allowed: bool, limit: Limit| match (allowed, limit) {
                    (false, _) => 0,
                    (true, Limit::Unlimited) => 3,
                    (true, Limit::AtMost(n)) => u64::from(n),
                };
                let n_excl = next(room(b.dislikes, b.exclusions_limit) + 1) as usize;
                let n_excl = n_excl.min(items.len());
                let exclusions = items[..n_excl].to_vec();
                let n_subs = (next(room(b.likes, b.substitutions_limit) + 1) as usize).min(items.len() - n_excl);
                let substitutions = items[n_excl..n_excl + n_subs].to_vec();
                let mut extras = Vec::new();
                let mut budget = match (b.extras_allowed, b.extras_limit) {
                    (false, _) => 0,
                    (true, Limit::Unlimited) => 5,
                    (true, Limit::AtMost(n)) => u64::from(n),
                };
                for id in &b.extra_ids {
                    if budget == 0 { break; }
                    let q = next(budget + 1);
                    if q > 0 {
                        budget -= q;
                        extras.push(ExtraLine { id: *id, quantity: q as u32 });
                    }
                }
                let frequency = [Frequency::Single, Frequency::Weekly, Frequency::Fortnightly][freq];
                let id = |v: u64| if as_strings { json!(v.to_string()) } else { json!(v) };
                let start = Day(start);
                let week_days = match frequency {
                    Frequency::Single => WeekDays::only(start.weekday()),
                    _ => WeekDays::from_bits(days),
                };
                let body = json!({
                    "box_id": id(box_id),
                    "frequency": frequency.as_str(),
                    "start_date": start.date().to_string(),
                    "week_days": week_days.days().map(|d| id(u64::from(d))).collect::<Vec<_>>(),
                    "extras_one_off": one_off,
                    "exclusions": exclusions.iter().map(|v| id(*v)).collect::<Vec<_>>(),
                    "substitutions": substitutions.iter().map(|v| id(*v)).collect::<Vec<_>>(),
                    "extras": extras.iter().map(|e| json!({"id": id(e.id), "quantity": e.quantity})).collect::<Vec<_>>(),
                    "payment_method": "cash_on_delivery",
                });
                let schedule = Schedule { start, week_days };
                let order = NewOrder { box_id, frequency, extras_one_off: one_off, extras, exclusions, substitutions, schedule };
                (store, order, body)
            })
    }

    /// Ways of breaking exactly one rule, each with the one field it must be reported under.
    fn break_one_rule(
        order: &NewOrder,
        webstore: &Webstore,
        body: &mut Map<String, Value>,
        which: usize,
    ) -> Option<&'static str> {
        let b = webstore.visible_box(order.box_id).unwrap();
        match which {
            0 => {
                body.insert("frequency".into(), json!("daily"));
                Some("frequency")
            }
            1 => {
                body.insert("quantity".into(), json!(2));
                Some("quantity")
            }
            2 => {
                body.insert("box_id".into(), json!(999_999));
                Some("box_id")
            }
            3 => {
                body.insert("extras_one_off".into(), json!("perhaps"));
                Some("extras_one_off")
            }
            4 => {
                body.insert("exclusions".into(), json!([999_999]));
                Some("exclusions")
            }
            5 => {
                body.insert("substitutions".into(), json!("240"));
                Some("substitutions")
            }
            6 if !order.exclusions.is_empty() && b.likes => {
                let mut subs = order.substitutions.clone();
                subs.push(order.exclusions[0]);
                body.insert("substitutions".into(), json!(subs));
                Some("substitutions")
            }
            7 if !order.extras.is_empty() => {
                let mut extras = body["extras"].as_array().unwrap().clone();
                extras[0]["quantity"] = json!(0);
                body.insert("extras".into(), json!(extras));
                Some("extras[0].quantity")
            }
            8 => match b.extras_limit {
                Limit::AtMost(n) if b.extras_allowed && !b.extra_ids.is_empty() => {
                    body.insert(
                        "extras".into(),
                        json!([{"id": b.extra_ids[0], "quantity": n + 1}]),
                    );
                    Some("extras")
                }
                _ => None,
            },
            10 => {
                body.insert("start_date".into(), json!("2026-02-30"));
                Some("start_date")
            }
            11 => {
                body.insert("week_days".into(), json!([7]));
                Some("week_days")
            }
            9 => match b.exclusions_limit {
                Limit::AtMost(n) if b.dislikes && (n as usize) < webstore.box_items.len() => {
                    let ids: Vec<u64> = webstore
                        .box_items
                        .keys()
                        .copied()
                        .take(n as usize + 1)
                        .collect();
                    body.insert("exclusions".into(), json!(ids));
                    body.remove("substitutions");
                    Some("exclusions")
                }
                _ => None,
            },
            _ => None,
        }
    }

    fn arbitrary_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<f64>().prop_map(|f| json!(f)),
            "[0-9a-z -]{0,12}".prop_map(Value::String),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::btree_map(
                    prop_oneof![
                        Just("id".to_owned()),
                        Just("quantity".to_owned()),
                        Just("box_id".to_owned()),
                        Just("extras".to_owned()),
                        "[a-z_]{1,8}".prop_map(String::from)
                    ],
                    inner,
                    0..6
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn an_order_within_the_box_limits_is_accepted_as_sent((store, order, body) in valid_order()) {
            let stores = demo();
            let accepted = validate_order(&object(body), &stores[store], found());
            prop_assert_eq!(accepted, Ok(order));
        }

        #[test]
        fn breaking_one_rule_names_exactly_that_field((store, order, body) in valid_order(), which in 0..12usize) {
            let stores = demo();
            let mut body = body.as_object().cloned().unwrap();
            if let Some(expected) = break_one_rule(&order, &stores[store], &mut body, which) {
                let errors = validate_order(&OrderBody::from_object(body), &stores[store], found()).unwrap_err();
                prop_assert_eq!(errors.fields().collect::<Vec<_>>(), vec![expected], "{}", errors);
            }
        }

        #[test]
        fn validation_never_panics_on_arbitrary_json(
            fields in prop::collection::btree_map(
                prop_oneof![
                    Just("box_id".to_owned()), Just("customer_id".to_owned()), Just("extras".to_owned()),
                    Just("exclusions".to_owned()), Just("substitutions".to_owned()), Just("frequency".to_owned()),
                    Just("quantity".to_owned()), Just("extras_one_off".to_owned()), "[a-z_]{1,10}".prop_map(String::from)
                ],
                arbitrary_json(),
                0..9,
            ),
            check in prop_oneof![Just(found()), Just(CustomerCheck::Missing), Just(CustomerCheck::Unknown)],
        ) {
            let body = OrderBody::from_object(fields.into_iter().collect());
            for webstore in demo() {
                let _ = validate_order(&body, &webstore, check);
                let _ = customer_ref(&body);
            }
        }
    }
}
