//! Fixtures: the two test webstores (their ids, API keys and secrets), the catalogue the
//! servers are started with (and a relaxed variant), valid customer bodies for each store,
//! and the exact messages the contract fixes (401, 404, 405, 413, 422 bodies and validation
//! messages). Plain data and pure functions only: nothing here starts a process or opens a
//! connection.

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// The address fields of a customer, in the contract's order (section 4).
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

/// Webstore ids of the test catalogue.
pub const STORE_A: &str = "store-a";
/// The second webstore, used to prove tenant isolation.
pub const STORE_B: &str = "store-b";

/// Store A's API key.
pub const STORE_A_KEY: &str = "ak_test_store_a_3f9c2e71b5";
/// Store A's API secret (only its SHA-256 goes into the catalogue).
pub const STORE_A_SECRET: &str = "sk_Qm7vT2xL9pR4wZ8cN1bH6jK3dF5gS0aYe2Uo";
/// Store B's API key.
pub const STORE_B_KEY: &str = "ak_test_store_b_8d41b0c6a2";
/// Store B's API secret.
pub const STORE_B_SECRET: &str = "sk_Xe4nU7yP2qW9rT6mV3zL8kJ1hG5fD0sCi7Ba";

/// The exact 401 bodies of the contract, section 1.
pub const MSG_MISSING_CREDS: &str =
    "Could not authenticate. You must set the API-Key and API-Secret headers.";
/// The 401 message for a wrong key or secret.
pub const MSG_BAD_CREDS: &str = "Could not authenticate. Invalid API-Key or API-Secret headers.";
/// The 404 message.
pub const MSG_NOT_FOUND: &str = "Resource not found";
/// The 405 message.
pub const MSG_METHOD_NOT_ALLOWED: &str = "Method not allowed";
/// The 413 message.
pub const MSG_TOO_LARGE: &str = "Request body too large";
/// The 422 message for a body that is not JSON.
pub const MSG_INVALID_JSON: &str = "Invalid JSON";

/// Validation messages fixed by the contract.
pub const BLANK: &str = "can't be blank";
/// See [`BLANK`].
pub const INVALID: &str = "is invalid";
/// See [`BLANK`].
pub const TAKEN: &str = "has already been taken";
/// See [`BLANK`].
pub const NOT_IN_LIST: &str = "is not included in the list";
/// See [`BLANK`].
pub const TOO_LONG_255: &str = "is too long (maximum is 255 characters)";

/// An API key pair.
#[derive(Clone, Debug)]
pub struct Creds {
    /// The `API-Key` header value.
    pub key: String,
    /// The `API-Secret` header value.
    pub secret: String,
}

impl Creds {
    /// A key pair from two strings.
    pub fn new(key: &str, secret: &str) -> Self {
        Self {
            key: key.to_string(),
            secret: secret.to_string(),
        }
    }
}

/// Store A's credentials (the default of every helper).
pub fn store_a() -> Creds {
    Creds::new(STORE_A_KEY, STORE_A_SECRET)
}

/// Store B's credentials.
pub fn store_b() -> Creds {
    Creds::new(STORE_B_KEY, STORE_B_SECRET)
}

/// Lowercase hex SHA-256 of a string's bytes.
pub fn sha256_hex(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

fn delivery_service(id: i64, name: &str, fee: &str, days: &[&str], pickup: bool) -> Value {
    let mut ds = json!({
        "id": id, "name": name, "instructions": format!("Instructions for {name}"),
        "fee": fee, "pickup_point": pickup,
    });
    for day in ["mon", "tue", "wed", "thu", "fri", "sat", "sun"] {
        ds[day] = json!(days.contains(&day));
    }
    ds
}

#[allow(clippy::too_many_arguments)]
fn a_box(
    id: i64,
    name: &str,
    price: &str,
    likes: bool,
    dislikes: bool,
    extras_allowed: bool,
    limits: (i64, i64, i64),
    hidden: bool,
    extra_ids: &[i64],
    images: Value,
) -> Value {
    json!({
        "id": id, "name": name, "description": format!("The {name}"), "price": price,
        "likes": likes, "dislikes": dislikes, "extras_allowed": extras_allowed,
        "extras_limit": limits.0, "exclusions_limit": limits.1, "substitutions_limit": limits.2,
        "hidden": hidden, "extra_ids": extra_ids, "images": images,
    })
}

fn store_a_json() -> Value {
    let mut ws = json!({
        "id": STORE_A, "name": "Store A Organics", "locale": "en", "currency": "GBP",
        "time_zone": "London", "city": "London", "email": "hello@store-a.example",
        "phone": "020 7946 0000", "sidebar_description": "Fresh boxes for London",
        "active": true, "payment_options": ["cash_on_delivery"],
        "require_phone": false, "require_address_1": true, "require_address_2": false,
        "require_suburb": false, "require_city": true, "require_postcode": false,
        "require_delivery_note": false, "collect_phone": true, "collect_delivery_note": true,
    });
    ws["api_keys"] = json!([{"key": STORE_A_KEY, "secret_sha256": sha256_hex(STORE_A_SECRET)}]);
    ws["delivery_services"] = json!([
        delivery_service(91, "Courier", "5.00", &["mon", "thu"], false),
        delivery_service(92, "Market Pickup", "2.50", &["tue", "sat"], true),
    ]);
    ws["box_items"] = json!([
        {"id": 240, "name": "Apple (Red)"},
        {"id": 241, "name": "Banana"},
        {"id": 242, "name": "Carrot"},
        {"id": 243, "name": "Date"},
        {"id": 244, "name": "Eggplant"},
    ]);
    ws["extras"] = json!([
        {"id": 28, "name": "Apple Juice", "unit": "4 litres", "price": "7.50"},
        {"id": 29, "name": "Free Range Eggs", "unit": "dozen", "price": "6.00"},
        {"id": 30, "name": "Honey", "unit": "jar", "price": "9.25"},
    ]);
    ws["boxes"] = json!([
        a_box(
            217,
            "5kg Box",
            "30.00",
            true,
            true,
            true,
            (-1, 3, 2),
            false,
            &[28, 29],
            json!({"thumb": "https://example.com/217-thumb.jpg"})
        ),
        a_box(
            218,
            "Fixed Box",
            "18.00",
            false,
            false,
            false,
            (0, 0, 0),
            false,
            &[],
            json!({})
        ),
        a_box(
            219,
            "Flexi Box",
            "22.50",
            true,
            true,
            true,
            (2, -1, -1),
            false,
            &[28, 29, 30],
            json!({})
        ),
        a_box(
            220,
            "Secret Box",
            "99.00",
            true,
            true,
            true,
            (-1, -1, -1),
            true,
            &[28],
            json!({})
        ),
    ]);
    ws
}

fn store_b_json() -> Value {
    let mut ws = json!({
        "id": STORE_B, "name": "Store B Gemuese", "locale": "de", "currency": "EUR",
        "time_zone": "Berlin", "city": "Berlin", "email": "hallo@store-b.example",
        "phone": "", "sidebar_description": "", "active": true,
        "payment_options": ["cash_on_delivery"],
        "require_phone": true, "require_address_1": false, "require_address_2": false,
        "require_suburb": false, "require_city": false, "require_postcode": false,
        "require_delivery_note": false, "collect_phone": true, "collect_delivery_note": true,
    });
    ws["api_keys"] = json!([{"key": STORE_B_KEY, "secret_sha256": sha256_hex(STORE_B_SECRET)}]);
    ws["delivery_services"] = json!([delivery_service(
        95,
        "Bike Courier",
        "3.50",
        &["mon", "wed", "fri"],
        false
    )]);
    ws["box_items"] = json!([{"id": 400, "name": "Kartoffel"}]);
    ws["extras"] = json!([{"id": 50, "name": "Brot", "unit": "loaf", "price": "4.00"}]);
    ws["boxes"] = json!([a_box(
        300,
        "Gemuesekiste",
        "25.00",
        true,
        true,
        true,
        (-1, -1, -1),
        false,
        &[50],
        json!({})
    )]);
    ws
}

/// The catalogue every test uses unless it passes its own: two webstores, with the quotas a
/// catalogue that names none gets (the tests of quotas set their own).
pub fn default_catalogue() -> Value {
    json!({"webstores": [store_a_json(), store_b_json()]})
}

/// Store A's producer account in [`producers_catalogue`]: email and password.
pub const PRODUCER_A: (&str, &str) = ("packer@store-a.example", "shed key for store a");
/// Store B's producer account in [`producers_catalogue`].
pub const PRODUCER_B: (&str, &str) = ("packer@store-b.example", "shed key for store b");

/// The default catalogue with a producer account in each store ([`PRODUCER_A`],
/// [`PRODUCER_B`]), their passwords hashed as `boxsub hash-password` would, and in store A a
/// second delivery service on the Courier's days (93, "Van North", Mondays and Thursdays), so
/// that one day has two routes.
pub fn producers_catalogue() -> Value {
    let mut cat = default_catalogue();
    cat["webstores"][0]["delivery_services"]
        .as_array_mut()
        .expect("store A has delivery services")
        .push(delivery_service(
            93,
            "Van North",
            "4.00",
            &["mon", "thu"],
            false,
        ));
    for (i, (email, password)) in [PRODUCER_A, PRODUCER_B].into_iter().enumerate() {
        let hash = boxsub::domain::password::hash_password(password, &[i as u8 + 1; 16])
            .expect("a password hashes");
        cat["webstores"][i]["producers"] = json!([{"email": email, "password_hash": hash}]);
    }
    cat
}

/// The default catalogue with every `require_*` of store A switched off.
pub fn relaxed_catalogue() -> Value {
    let mut cat = default_catalogue();
    for field in [
        "require_phone",
        "require_address_1",
        "require_address_2",
        "require_suburb",
        "require_city",
        "require_postcode",
        "require_delivery_note",
    ] {
        cat["webstores"][0][field] = json!(false);
    }
    cat
}

/// A valid store-A customer body with this email.
pub fn customer_body(email: &str) -> Value {
    json!({
        "first_name": "Joe", "last_name": "Dalton", "email": email,
        "delivery_service_id": 91,
        "address": {"address_1": "1 My Street", "city": "London", "postcode": "XXX123",
                    "home_phone": "007"},
    })
}

/// A valid store-B customer body with this email (store B requires a phone).
pub fn customer_body_b(email: &str) -> Value {
    json!({
        "first_name": "Jana", "last_name": "Berg", "email": email,
        "delivery_service_id": 95,
        "address": {"mobile_phone": "+49 170 0000000"},
    })
}
