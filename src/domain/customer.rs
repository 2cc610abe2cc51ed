//! Customers and their addresses: the fields a create or update may set, the rules each field
//! must keep (contract section 5, including the webstore's `require_*` settings), and how a
//! validated change is applied. Email uniqueness is the registry's business, not this file's.
//!
//! Must not touch: I/O, the registry's email index, HTTP.

use serde_json::{Map, Value};

use super::account::Account;
use super::catalogue::{AddressRequirements, Webstore, WebstoreIdx};
use super::day::Day;
use super::email::Email;
use super::fields::{field, positive_id, text, too_long, Field, FieldErrors, BLANK, INVALID};
use super::halts::{parse_halted, Halts};
use super::ids::CustomerId;

/// The address fields, in the contract's order.
pub const ADDRESS_FIELDS: [&str; 9] = [
    "address_1",
    "address_2",
    "suburb",
    "city",
    "postcode",
    "delivery_note",
    "home_phone",
    "mobile_phone",
    "work_phone",
];

const DELIVERY_NOTE: usize = 5;
const PHONES: [usize; 3] = [6, 7, 8];
const MAX_DELIVERY_NOTE_CHARS: usize = 1000;
const PASSWORD_CHARS: std::ops::RangeInclusive<usize> = 8..=128;

/// A customer's address: each field of [`ADDRESS_FIELDS`], by position, absent or non-blank.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Address(pub [Option<String>; 9]);

impl Address {
    /// `(field name, value)` pairs in the contract's order.
    pub fn fields(&self) -> impl Iterator<Item = (&'static str, Option<&str>)> {
        ADDRESS_FIELDS
            .iter()
            .zip(&self.0)
            .map(|(name, value)| (*name, value.as_deref()))
    }

    fn has_phone(&self) -> bool {
        PHONES.iter().any(|&i| self.0[i].is_some())
    }
}

/// A customer of one webstore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Customer {
    /// Server-assigned id.
    pub id: CustomerId,
    /// The webstore the customer belongs to.
    pub webstore: WebstoreIdx,
    /// The customer's number within its webstore, from 1.
    pub number: u64,
    /// Trimmed, non-blank.
    pub first_name: String,
    /// Trimmed, non-blank when present.
    pub last_name: Option<String>,
    /// Unique within the webstore, ignoring case.
    pub email: Email,
    /// A delivery service of the webstore.
    pub delivery_service_id: u64,
    /// The delivery address.
    pub address: Address,
    /// Argon2id PHC string; `None` means the customer cannot sign in.
    pub password_hash: Option<String>,
    /// When none of its orders is delivered (`halted?` says whether a halt is on).
    pub halts: Halts,
    /// Its account (`account_balance` and `discount` in its answers), kept in a record of
    /// its own (`store::kinds::accounts`) and read with the customer.
    pub account: Account,
}

impl Customer {
    /// First and last name joined by one space.
    pub fn name(&self) -> String {
        match &self.last_name {
            Some(last) => format!("{} {last}", self.first_name),
            None => self.first_name.clone(),
        }
    }

    /// The customer number zero-padded to at least four digits.
    pub fn number_label(&self) -> String {
        format!("{:04}", self.number)
    }

    /// A new customer from changes checked in [`Mode::Create`], which guarantees the required
    /// fields; `password_hash` replaces the plain password.
    pub fn create(
        id: CustomerId,
        webstore: WebstoreIdx,
        number: u64,
        changes: CustomerChanges,
    ) -> Customer {
        let mut address = Address::default();
        for (slot, change) in address.0.iter_mut().zip(changes.address) {
            if let Some(value) = change {
                *slot = value;
            }
        }
        Customer {
            id,
            webstore,
            number,
            first_name: changes.first_name.unwrap_or_default(),
            last_name: changes.last_name.flatten(),
            email: changes
                .email
                .unwrap_or_else(|| Email::from_trusted(String::new())),
            delivery_service_id: changes.delivery_service_id.unwrap_or_default(),
            address,
            password_hash: changes.password_hash,
            halts: Halts::none(),
            account: Account::opened(id, 0),
        }
    }

    /// The customer with `changes` (checked in [`Mode::Update`]) applied, a halt from `open`,
    /// the first date not locked (`cutoff`). Refuses, changing nothing, when the merged
    /// address would break the webstore's phone requirement.
    pub fn updated(
        &self,
        changes: &CustomerChanges,
        require: &AddressRequirements,
        open: Day,
    ) -> Result<Customer, FieldErrors> {
        let mut next = self.clone();
        if let Some(first_name) = &changes.first_name {
            next.first_name = first_name.clone();
        }
        if let Some(last_name) = &changes.last_name {
            next.last_name = last_name.clone();
        }
        if let Some(email) = &changes.email {
            next.email = email.clone();
        }
        if let Some(id) = changes.delivery_service_id {
            next.delivery_service_id = id;
        }
        for (slot, change) in next.address.0.iter_mut().zip(&changes.address) {
            if let Some(value) = change {
                *slot = value.clone();
            }
        }
        if let Some(hash) = &changes.password_hash {
            next.password_hash = Some(hash.clone());
        }
        if let Some(halted) = changes.halted {
            // The halts hold either reason: a halt by hand lifted while the balance halts
            // the customer leaves them halted.
            next.account.halted_by_hand = halted;
            next.halts = next.halts.set(next.account.halted(), open);
        }
        let touches_phone = PHONES.iter().any(|&i| changes.address[i].is_some());
        if require.phone && touches_phone && !next.address.has_phone() {
            return Err(FieldErrors::single("address.phone", PHONE_REQUIRED));
        }
        Ok(next)
    }
}

const PHONE_REQUIRED: &str = "at least one of home_phone, mobile_phone or work_phone must be given";

/// Whether a body creates a customer (required fields must be there) or updates one (only
/// the fields present are checked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `POST /v1/customers`.
    Create,
    /// `PATCH`/`PUT /v1/customers/:id`.
    Update,
}

/// The fields a create or update body sets, each already checked on its own.
/// `None` means "not in the body"; `Some(None)` clears an optional field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CustomerChanges {
    /// New first name.
    pub first_name: Option<String>,
    /// New last name, or clear it.
    pub last_name: Option<Option<String>>,
    /// New email.
    pub email: Option<Email>,
    /// New delivery service.
    pub delivery_service_id: Option<u64>,
    /// Per address field (see [`ADDRESS_FIELDS`]): a new value, or clear it.
    pub address: [Option<Option<String>>; 9],
    /// The plain password, write-only; hashed before the change is applied, then dropped.
    pub password: Option<String>,
    /// The argon2id hash of `password`, set by whoever hashes it.
    pub password_hash: Option<String>,
    /// Halt the customer (`true`) or end the halt (`false`), from the first open date.
    pub halted: Option<bool>,
}

/// Checks a customer body (already unwrapped from `{"customer": …}`) against the contract's
/// rules and the webstore's settings, reporting every failing field at once.
pub fn parse_customer(
    body: &Map<String, Value>,
    webstore: &Webstore,
    mode: Mode,
) -> Result<CustomerChanges, FieldErrors> {
    let creating = mode == Mode::Create;
    let mut errors = FieldErrors::new();
    let mut changes = CustomerChanges::default();

    match field(body, "first_name") {
        Field::Absent if !creating => {}
        Field::Absent | Field::Null => errors.add("first_name", BLANK),
        Field::Present(value) => match short_text(value, crate::domain::fields::MAX_STRING_CHARS) {
            Ok(Some(name)) => changes.first_name = Some(name),
            Ok(None) => errors.add("first_name", BLANK),
            Err(message) => errors.add("first_name", message),
        },
    }

    match field(body, "last_name") {
        Field::Absent => {}
        Field::Null => changes.last_name = Some(None),
        Field::Present(value) => match short_text(value, crate::domain::fields::MAX_STRING_CHARS) {
            Ok(name) => changes.last_name = Some(name),
            Err(message) => errors.add("last_name", message),
        },
    }

    match field(body, "email") {
        Field::Absent if !creating => {}
        Field::Absent | Field::Null => errors.add("email", BLANK),
        Field::Present(value) => match text(value) {
            Some(raw) if raw.trim().is_empty() => errors.add("email", BLANK),
            Some(raw) => match Email::parse(&raw) {
                Ok(email) => changes.email = Some(email),
                Err(message) => errors.add("email", message),
            },
            None => errors.add("email", INVALID),
        },
    }

    match field(body, "delivery_service_id") {
        Field::Absent if !creating => {}
        Field::Absent | Field::Null => errors.add("delivery_service_id", BLANK),
        Field::Present(value) => match positive_id(value) {
            Some(id) if webstore.delivery_services.contains_key(&id) => {
                changes.delivery_service_id = Some(id)
            }
            _ => errors.add("delivery_service_id", INVALID),
        },
    }

    match field(body, "address") {
        Field::Absent | Field::Null => {}
        Field::Present(Value::Object(address)) => {
            for (i, name) in ADDRESS_FIELDS.iter().enumerate() {
                let max = if i == DELIVERY_NOTE {
                    MAX_DELIVERY_NOTE_CHARS
                } else {
                    crate::domain::fields::MAX_STRING_CHARS
                };
                match field(address, name) {
                    Field::Absent => {}
                    Field::Null => changes.address[i] = Some(None),
                    Field::Present(value) => match short_text(value, max) {
                        Ok(value) => changes.address[i] = Some(value),
                        Err(message) => errors.add(format!("address.{name}"), message),
                    },
                }
            }
        }
        Field::Present(_) => errors.add("address", INVALID),
    }
    check_required_address(&changes, &webstore.settings.require, mode, &mut errors);

    match field(body, "password") {
        Field::Absent | Field::Null => {}
        Field::Present(Value::String(password)) => {
            let chars = password.chars().count();
            if chars < *PASSWORD_CHARS.start() {
                errors.add("password", "is too short (minimum is 8 characters)");
            } else if chars > *PASSWORD_CHARS.end() {
                errors.add("password", too_long(*PASSWORD_CHARS.end()));
            } else {
                changes.password = Some(password.clone());
            }
        }
        Field::Present(_) => errors.add("password", INVALID),
    }

    // A create's `halted` is not read: a new customer is never halted.
    if !creating {
        match parse_halted(field(body, "halted")) {
            Ok(halted) => changes.halted = halted,
            Err(message) => errors.add("halted", message),
        }
    }

    errors.into_result(changes)
}

/// Required address fields must be non-blank: on create whether sent or not, on update when
/// sent. The phone rule on update needs the stored address, so [`Customer::updated`] checks it.
fn check_required_address(
    changes: &CustomerChanges,
    require: &AddressRequirements,
    mode: Mode,
    errors: &mut FieldErrors,
) {
    let required = [
        require.address_1,
        require.address_2,
        require.suburb,
        require.city,
        require.postcode,
        require.delivery_note,
    ];
    for (i, needed) in required.into_iter().enumerate() {
        let name = ADDRESS_FIELDS[i];
        if !needed || errors.has(&format!("address.{name}")) {
            continue;
        }
        let blank = match (&changes.address[i], mode) {
            (Some(value), _) => value.is_none(),
            (None, Mode::Create) => true,
            (None, Mode::Update) => false,
        };
        if blank {
            errors.add(format!("address.{name}"), BLANK);
        }
    }
    let phone_given = PHONES
        .iter()
        .any(|&i| matches!(&changes.address[i], Some(Some(_))));
    if mode == Mode::Create && require.phone && !phone_given {
        errors.add("address.phone", PHONE_REQUIRED);
    }
}

/// A string field trimmed: `Ok(None)` when blank, an error message when not text or too long.
fn short_text(value: &Value, max: usize) -> Result<Option<String>, String> {
    let raw = text(value).ok_or_else(|| INVALID.to_owned())?;
    let trimmed = raw.trim();
    if trimmed.chars().count() > max {
        Err(too_long(max))
    } else if trimmed.is_empty() {
        Ok(None)
    } else {
        Ok(Some(trimmed.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::catalogue::Catalogue;
    use serde_json::json;

    fn store(n: usize) -> std::sync::Arc<Webstore> {
        Catalogue::demo(0).webstores()[n].clone()
    }

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    fn failing(body: Value, webstore: &Webstore, mode: Mode) -> Vec<String> {
        parse_customer(&object(body), webstore, mode)
            .unwrap_err()
            .fields()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn empty_create_names_every_required_field() {
        assert_eq!(
            failing(json!({}), &store(0), Mode::Create),
            [
                "first_name",
                "email",
                "delivery_service_id",
                "address.address_1",
                "address.city"
            ]
        );
        assert!(failing(json!({}), &store(1), Mode::Create).contains(&"address.phone".into()));
        assert!(parse_customer(&Map::new(), &store(0), Mode::Update).is_ok());
    }

    #[test]
    fn a_valid_create_is_trimmed_and_kept() {
        let body = json!({"first_name": " Joe ", "last_name": "Dalton", "email": "JOE@example.com",
            "delivery_service_id": "91", "password": "secret123",
            "address": {"address_1": "1 My Street", "city": "London", "postcode": 12345}});
        let changes = parse_customer(&object(body), &store(0), Mode::Create).unwrap();
        let customer = Customer::create(CustomerId(1), WebstoreIdx(0), 7, changes);
        assert_eq!(customer.name(), "Joe Dalton");
        assert_eq!(customer.number_label(), "0007");
        assert_eq!(customer.delivery_service_id, 91);
        assert_eq!(customer.address.0[4].as_deref(), Some("12345"));
    }

    #[test]
    fn each_bad_field_is_named() {
        let cases = [
            (json!({"first_name": {}}), "first_name"),
            (json!({"first_name": "  "}), "first_name"),
            (json!({"last_name": "x".repeat(256)}), "last_name"),
            (json!({"email": "nope"}), "email"),
            (json!({"email": null}), "email"),
            (json!({"delivery_service_id": 501}), "delivery_service_id"),
            (json!({"delivery_service_id": "abc"}), "delivery_service_id"),
            (json!({"address": []}), "address"),
            (json!({"address": {"city": ""}}), "address.city"),
            (
                json!({"address": {"delivery_note": "x".repeat(1001)}}),
                "address.delivery_note",
            ),
            (json!({"password": "short"}), "password"),
            (json!({"password": 12345678}), "password"),
        ];
        for (body, name) in cases {
            assert_eq!(
                failing(body.clone(), &store(0), Mode::Update),
                [name],
                "{body}"
            );
        }
    }

    #[test]
    fn update_keeps_absent_fields_and_checks_the_merged_phone_rule() {
        let webstore = store(1);
        let body = json!({"first_name": "Ann", "email": "ann@example.com", "delivery_service_id": 501,
            "address": {"address_1": "1 Road", "city": "Cork", "postcode": "T12", "home_phone": "1"}});
        let changes = parse_customer(&object(body), &webstore, Mode::Create).unwrap();
        let customer = Customer::create(CustomerId(1), WebstoreIdx(1), 1, changes);

        let rename = parse_customer(
            &object(json!({"last_name": "Lee"})),
            &webstore,
            Mode::Update,
        )
        .unwrap();
        let renamed = customer
            .updated(&rename, &webstore.settings.require, Day(0))
            .unwrap();
        assert_eq!(renamed.name(), "Ann Lee");
        assert_eq!(renamed.address, customer.address);

        let no_phone = parse_customer(
            &object(json!({"address": {"home_phone": ""}})),
            &webstore,
            Mode::Update,
        )
        .unwrap();
        let err = customer
            .updated(&no_phone, &webstore.settings.require, Day(0))
            .unwrap_err();
        assert_eq!(err.fields().collect::<Vec<_>>(), ["address.phone"]);
    }
}
