//! An order's body and its rules (contract section 5): the fields a create sends
//! ([`OrderBody`]), read for their shape into typed values ([`ContentFields`], shared with a
//! change), then checked against the webstore's catalogue and the box's rules
//! ([`check_content`], the one content rule a create and a change both go through), every
//! failing field named at once. Pure functions of the body, the catalogue and the schedule's
//! rules, so that they can be property-tested and fuzzed on their own.
//!
//! Must not touch: I/O, the clock (the caller passes today), the actors that apply orders,
//! an order's history (`history`, `change`).

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::content::{ExtraLine, OrderContent, MAX_EXTRA_QUANTITY, MAX_LIST_ITEMS};
use super::schedule::{self, parse_week_days, Frequency, Schedule, ScheduleRules};
use crate::domain::catalogue::{BoxDef, Limit, Webstore};
use crate::domain::day::parse_optional_date;
use crate::domain::fields::{
    field, integer, positive_id, slot, BodyFields, Field, FieldErrors, BLANK, INVALID,
    NOT_AN_INTEGER, NOT_IN_LIST,
};
use crate::domain::ids::CustomerId;

const ONE_BOX_ONLY: &str =
    "must be 1: an order is for one box; post one order per box and per unit";

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

/// A field of a body as read for its shape: not given (absent, or `null` where `null` means
/// "not given"), a value, or refused (its errors recorded where it was read).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Sent<T> {
    /// Not given: a create takes the default, a change keeps what the order has.
    #[default]
    Absent,
    /// A well-formed value.
    Given(T),
    /// Malformed; its errors are recorded.
    Refused,
}

impl<T> Sent<T> {
    /// Whether the field was sent at all (well-formed or not).
    pub fn is_sent(&self) -> bool {
        !matches!(self, Sent::Absent)
    }

    /// The value given, if any.
    pub fn given(&self) -> Option<&T> {
        match self {
            Sent::Given(value) => Some(value),
            _ => None,
        }
    }
}

/// The content fields of a body (a create's or a change's), read for their shape: ids are
/// positive integers, lists are lists of distinct ids, extras are lines with quantities in
/// range. Whether the catalogue has them is [`check_content`]'s.
///
/// `null` means "not given" for `box_id`, `frequency` and `extras_one_off` (none of them
/// has a "none") and "none" for the lists: `"exclusions": null` is `[]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContentFields {
    /// `box_id`.
    pub box_id: Sent<u64>,
    /// `frequency`.
    pub frequency: Sent<Frequency>,
    /// `extras_one_off`.
    pub extras_one_off: Sent<bool>,
    /// `extras`, in the order sent.
    pub extras: Sent<Vec<ExtraLine>>,
    /// `exclusions`, in the order sent.
    pub exclusions: Sent<Vec<u64>>,
    /// `substitutions`, in the order sent.
    pub substitutions: Sent<Vec<u64>>,
}

impl ContentFields {
    /// Reads the six content fields as sent, recording each malformed one in `errors`.
    pub fn read(
        box_id: Field<'_>,
        frequency: Field<'_>,
        extras_one_off: Field<'_>,
        extras: Field<'_>,
        exclusions: Field<'_>,
        substitutions: Field<'_>,
        errors: &mut FieldErrors,
    ) -> ContentFields {
        ContentFields {
            box_id: match box_id {
                Field::Absent | Field::Null => Sent::Absent,
                Field::Present(value) => match positive_id(value) {
                    Some(id) => Sent::Given(id),
                    None => {
                        errors.add("box_id", INVALID);
                        Sent::Refused
                    }
                },
            },
            frequency: match frequency {
                Field::Absent | Field::Null => Sent::Absent,
                Field::Present(value) => match value.as_str().and_then(Frequency::parse) {
                    Some(frequency) => Sent::Given(frequency),
                    None => {
                        errors.add("frequency", NOT_IN_LIST);
                        Sent::Refused
                    }
                },
            },
            extras_one_off: match extras_one_off {
                Field::Absent | Field::Null => Sent::Absent,
                Field::Present(Value::Bool(flag)) => Sent::Given(*flag),
                Field::Present(Value::String(s)) if s == "true" => Sent::Given(true),
                Field::Present(Value::String(s)) if s == "false" => Sent::Given(false),
                Field::Present(_) => {
                    errors.add("extras_one_off", INVALID);
                    Sent::Refused
                }
            },
            exclusions: read_item_list(exclusions, "exclusions", errors),
            substitutions: read_item_list(substitutions, "substitutions", errors),
            extras: read_extras(extras, errors),
        }
    }

    /// Whether any of them was sent.
    pub fn any_sent(&self) -> bool {
        self.box_id.is_sent()
            || self.frequency.is_sent()
            || self.extras_one_off.is_sent()
            || self.extras.is_sent()
            || self.exclusions.is_sent()
            || self.substitutions.is_sent()
    }
}

/// Reads a list of distinct box-item ids; problems are named by `name`.
fn read_item_list(list: Field<'_>, name: &str, errors: &mut FieldErrors) -> Sent<Vec<u64>> {
    let items = match list {
        Field::Absent => return Sent::Absent,
        Field::Null => return Sent::Given(Vec::new()),
        Field::Present(Value::Array(items)) => items,
        Field::Present(_) => {
            errors.add(name, INVALID);
            return Sent::Refused;
        }
    };
    if items.len() > MAX_LIST_ITEMS {
        errors.add(name, too_many(MAX_LIST_ITEMS as u64));
        return Sent::Refused;
    }
    let mut ids = Vec::with_capacity(items.len());
    let mut seen = HashSet::with_capacity(items.len());
    let mut refused = false;
    for item in items {
        match positive_id(item) {
            None => {
                errors.add(name, "must contain only box item ids");
                refused = true;
            }
            Some(id) if !seen.insert(id) => {
                errors.add(name, format!("contains box item {id} more than once"));
                refused = true;
            }
            Some(id) => ids.push(id),
        }
    }
    if refused {
        Sent::Refused
    } else {
        Sent::Given(ids)
    }
}

/// Reads the `extras` array: each an object with an extra's id, listed once, and a quantity
/// from 1 to [`MAX_EXTRA_QUANTITY`].
fn read_extras(list: Field<'_>, errors: &mut FieldErrors) -> Sent<Vec<ExtraLine>> {
    let items = match list {
        Field::Absent => return Sent::Absent,
        Field::Null => return Sent::Given(Vec::new()),
        Field::Present(Value::Array(items)) => items,
        Field::Present(_) => {
            errors.add("extras", INVALID);
            return Sent::Refused;
        }
    };
    if items.len() > MAX_LIST_ITEMS {
        errors.add("extras", too_many(MAX_LIST_ITEMS as u64));
        return Sent::Refused;
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
            Field::Present(value) => match positive_id(value) {
                None => {
                    errors.add(format!("extras[{i}].id"), NOT_OFFERED);
                    None
                }
                Some(id) if !seen.insert(id) => {
                    errors.add(format!("extras[{i}].id"), "is listed more than once");
                    None
                }
                Some(id) => Some(id),
            },
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
    if lines.len() == items.len() {
        Sent::Given(lines)
    } else {
        Sent::Refused
    }
}

const NOT_OFFERED: &str = "is not an extra offered by this box";

/// What an order's content is checked from: the fields sent, over what the order has (a
/// change) or the defaults (a create: `None`).
pub struct ContentSource<'a> {
    /// The fields sent.
    pub sent: &'a ContentFields,
    /// The content they change, if they change one.
    pub base: Option<&'a OrderContent>,
}

/// A content's fields once checked against the catalogue, all but its schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedContent {
    /// A visible box of the webstore.
    pub box_id: u64,
    /// Delivery frequency.
    pub frequency: Frequency,
    /// Extras once only.
    pub extras_one_off: bool,
    /// Extras.
    pub extras: Vec<ExtraLine>,
    /// Excluded box items.
    pub exclusions: Vec<u64>,
    /// Substitute box items.
    pub substitutions: Vec<u64>,
}

impl CheckedContent {
    /// The content with `schedule`.
    pub fn scheduled(self, schedule: Schedule) -> OrderContent {
        OrderContent {
            box_id: self.box_id,
            frequency: self.frequency,
            extras_one_off: self.extras_one_off,
            extras: self.extras,
            exclusions: self.exclusions,
            substitutions: self.substitutions,
            schedule,
        }
    }
}

/// The one content rule of a create and a change: the content the fields sent make over
/// `source.base` (a change) or the defaults (a create), checked against the webstore's
/// catalogue and the box's rules: a visible box; box items the webstore has, allowed and
/// within the box's limits; no substitute that is excluded; extras the box offers, within
/// its limit. Every failing field is added to `errors`; `None` when one failed or was
/// refused when read (a refused field is not checked again).
pub fn check_content(
    source: ContentSource<'_>,
    webstore: &Webstore,
    errors: &mut FieldErrors,
) -> Option<CheckedContent> {
    let sent = source.sent;
    let base = source.base;
    let mut failed = false;

    let order_box = match (&sent.box_id, base) {
        (Sent::Given(id), _) => {
            let found = webstore.visible_box(*id);
            if found.is_none() {
                errors.add("box_id", INVALID);
            }
            found
        }
        (Sent::Absent, Some(base)) => {
            let found = webstore.visible_box(base.box_id);
            if found.is_none() {
                errors.add("box_id", INVALID);
            }
            found
        }
        (Sent::Absent, None) => {
            errors.add("box_id", BLANK);
            None
        }
        (Sent::Refused, _) => None,
    };
    failed |= order_box.is_none();

    let frequency = match (&sent.frequency, base) {
        (Sent::Given(frequency), _) => Some(*frequency),
        (Sent::Absent, base) => Some(base.map_or(Frequency::Single, |b| b.frequency)),
        (Sent::Refused, _) => None,
    };
    let extras_one_off = match (&sent.extras_one_off, base) {
        (Sent::Given(flag), _) => Some(*flag),
        (Sent::Absent, base) => Some(base.is_some_and(|b| b.extras_one_off)),
        (Sent::Refused, _) => None,
    };

    let list = |sent: &Sent<Vec<u64>>, kept: fn(&OrderContent) -> &Vec<u64>| match (sent, base) {
        (Sent::Given(ids), _) => Some(ids.clone()),
        (Sent::Absent, base) => Some(base.map_or_else(Vec::new, |b| kept(b).clone())),
        (Sent::Refused, _) => None,
    };
    let exclusions = list(&sent.exclusions, |b| &b.exclusions);
    let substitutions = list(&sent.substitutions, |b| &b.substitutions);
    let exclusions_ok = exclusions.as_deref().is_some_and(|ids| {
        let rules = order_box.map(|b| (b.dislikes, b.exclusions_limit));
        check_item_list(ids, "exclusions", rules, webstore, errors)
    });
    let substitutions_ok = substitutions.as_deref().is_some_and(|ids| {
        let rules = order_box.map(|b| (b.likes, b.substitutions_limit));
        check_item_list(ids, "substitutions", rules, webstore, errors)
    });
    let mut items_ok = exclusions_ok && substitutions_ok;
    if let (true, Some(exclusions), Some(substitutions)) = (items_ok, &exclusions, &substitutions) {
        let excluded: HashSet<u64> = exclusions.iter().copied().collect();
        if substitutions.iter().any(|id| excluded.contains(id)) {
            errors.add("substitutions", "must not include an excluded item");
            items_ok = false;
        }
    }
    failed |= !items_ok;

    let extras = match (&sent.extras, base) {
        (Sent::Given(lines), _) => Some(lines.clone()),
        (Sent::Absent, base) => Some(base.map_or_else(Vec::new, |b| b.extras.clone())),
        (Sent::Refused, _) => None,
    };
    match &extras {
        Some(lines) => failed |= !check_extras(lines, webstore, order_box, errors),
        None => failed = true,
    }

    match (
        failed,
        frequency,
        extras_one_off,
        extras,
        exclusions,
        substitutions,
    ) {
        (
            false,
            Some(frequency),
            Some(extras_one_off),
            Some(extras),
            Some(exclusions),
            Some(substitutions),
        ) => Some(CheckedContent {
            box_id: order_box.map_or(0, |b| b.id),
            frequency,
            extras_one_off,
            extras,
            exclusions,
            substitutions,
        }),
        _ => None,
    }
}

/// A list of box items: each one the webstore has, and, under the box's `rules` (whether
/// the list may be non-empty, its limit; `None` while the box is unknown), its length.
fn check_item_list(
    ids: &[u64],
    name: &str,
    rules: Option<(bool, Limit)>,
    webstore: &Webstore,
    errors: &mut FieldErrors,
) -> bool {
    let mut ok = true;
    for id in ids {
        if !webstore.box_items.contains_key(id) {
            errors.add(name, format!("contains an unknown box item ({id})"));
            ok = false;
        }
    }
    match rules {
        Some(_) if !ok || ids.is_empty() => ok,
        Some((false, _)) => {
            errors.add(name, "are not allowed for this box");
            false
        }
        Some((true, limit)) if !limit.allows(ids.len() as u64) => {
            errors.add(name, too_many(limit.as_wire() as u64));
            false
        }
        _ => ok,
    }
}

fn too_many(max: u64) -> String {
    format!("has too many items (maximum is {max})")
}

/// The box's rules on extras: each offered by the box (by the webstore, while the box is
/// unknown), and their total quantity within its limit.
fn check_extras(
    lines: &[ExtraLine],
    webstore: &Webstore,
    order_box: Option<&BoxDef>,
    errors: &mut FieldErrors,
) -> bool {
    if order_box.is_some_and(|b| !b.extras_allowed) && !lines.is_empty() {
        errors.add("extras", "are not allowed for this box");
        return false;
    }
    let mut ok = true;
    for (i, line) in lines.iter().enumerate() {
        let offered = match order_box {
            Some(b) => b.offers_extra(line.id),
            None => webstore.extras.contains_key(&line.id),
        };
        if !offered {
            errors.add(format!("extras[{i}].id"), NOT_OFFERED);
            ok = false;
        }
    }
    if let Some(b) = order_box {
        let total: u64 = lines.iter().map(|line| u64::from(line.quantity)).sum();
        if !b.extras_limit.allows(total) {
            errors.add(
                "extras",
                format!(
                    "total quantity is more than this box allows (maximum is {})",
                    b.extras_limit.as_wire()
                ),
            );
            ok = false;
        }
    }
    ok
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

/// Checks a create's body (already unwrapped from `{"order": …}`) against every rule of the
/// contract, reporting all failing fields at once: the content of the new order's one
/// version.
pub fn validate_order(
    body: &OrderBody,
    webstore: &Webstore,
    customer: CustomerCheck,
) -> Result<OrderContent, FieldErrors> {
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

    let sent = ContentFields::read(
        slot(&body.box_id),
        slot(&body.frequency),
        slot(&body.extras_one_off),
        slot(&body.extras),
        slot(&body.exclusions),
        slot(&body.substitutions),
        &mut errors,
    );
    let start = parse_optional_date(slot(&body.start_date)).unwrap_or_else(|message| {
        errors.add("start_date", message);
        None
    });
    let week_days = parse_week_days(slot(&body.week_days)).unwrap_or_else(|message| {
        errors.add("week_days", message);
        None
    });
    let content = check_content(
        ContentSource {
            sent: &sent,
            base: None,
        },
        webstore,
        &mut errors,
    );
    let frequency = sent.frequency.given().copied().unwrap_or(Frequency::Single);
    let schedule = match rules {
        // The delivery-day rules need a customer, a known frequency and well-formed fields.
        Some(rules)
            if sent.frequency != Sent::Refused
                && !errors.has("start_date")
                && !errors.has("week_days") =>
        {
            schedule::resolve(
                frequency,
                start,
                week_days,
                rules,
                "start_date",
                &mut errors,
            )
        }
        _ => None,
    };

    match (content, schedule) {
        (Some(content), Some(schedule)) => errors.into_result(content.scheduled(schedule)),
        // Without both there is an error already (no customer, or a broken rule).
        _ if !errors.is_empty() => Err(errors),
        _ => Err(FieldErrors::single("start_date", INVALID)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::catalogue::Catalogue;
    use crate::domain::day::Day;
    use crate::domain::day::WeekDays;
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

    /// The failing fields, sorted: the rules name them in the order they find them.
    fn failing_fields(body: Value, webstore: &Webstore, customer: CustomerCheck) -> Vec<String> {
        let mut fields: Vec<String> = validate_order(&object(body), webstore, customer)
            .unwrap_err()
            .fields()
            .map(str::to_owned)
            .collect();
        fields.sort();
        fields
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
                "box_id",
                "customer_id",
                "exclusions",
                "extras[0].quantity",
                "frequency",
                "quantity"
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
    fn valid_order() -> impl Strategy<Value = (usize, OrderContent, Value)> {
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
                let order = OrderContent { box_id, frequency, extras_one_off: one_off, extras, exclusions, substitutions, schedule };
                (store, order, body)
            })
    }

    /// Ways of breaking exactly one rule, each with the one field it must be reported under.
    fn break_one_rule(
        order: &OrderContent,
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
