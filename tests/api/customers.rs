//! Customers: create, read, list with pagination, email lookup and update
//! (contract sections 4 and 5), including every validation rule.

use serde_json::{json, Value};

use crate::helpers::{
    customer_body, customer_body_b, id_of, parse_link_header, path_and_query, query_param,
    relaxed_catalogue, spawn_app, store_b, Launch, SoftAsserts, TestApp, ADDRESS_FIELDS, BLANK,
    INVALID, MSG_NOT_FOUND, TAKEN, TOO_LONG_255,
};

const CUSTOMER_KEYS: [&str; 13] = [
    "id",
    "first_name",
    "last_name",
    "name",
    "email",
    "delivery_service_id",
    "halted?",
    "discount?",
    "discount",
    "number",
    "account_balance",
    "webstore_id",
    "webstore_name",
];

#[track_caller]
fn assert_customer_shape(customer: &Value) {
    let obj = customer
        .as_object()
        .unwrap_or_else(|| panic!("customer is not an object: {customer}"));
    for key in CUSTOMER_KEYS {
        assert!(obj.contains_key(key), "customer lacks {key}: {customer}");
    }
    for key in obj.keys() {
        assert!(
            !key.contains("password"),
            "customer exposes {key}: {customer}"
        );
    }
}

/// Creates a customer with this email and a few variations; returns it.
async fn create(app: &TestApp, email: &str) -> Value {
    app.create_customer_ok(&customer_body(email)).await
}

#[tokio::test]
async fn create_returns_201_location_and_the_customer() {
    // Arrange
    let app = spawn_app().await;

    // Act
    let response = app.create_customer(&customer_body("joe@example.com")).await;

    // Assert
    response.assert_status(201);
    let customer = response.json();
    assert_customer_shape(&customer);
    let id = id_of(&customer);
    assert!(id > 0);
    assert_eq!(
        response.header("location").as_deref(),
        Some(format!("/v1/customers/{id}").as_str())
    );
    assert_eq!(customer["first_name"], "Joe");
    assert_eq!(customer["last_name"], "Dalton");
    assert_eq!(customer["name"], "Joe Dalton");
    assert_eq!(customer["email"], "joe@example.com");
    assert_eq!(customer["delivery_service_id"], 91);
    assert_eq!(customer["halted?"], false);
    assert_eq!(customer["discount?"], false);
    assert_eq!(customer["discount"], json!(0.0));
    assert_eq!(customer["number"], "0001");
    assert_eq!(customer["account_balance"], "0.00");
    assert_eq!(customer["webstore_id"], "store-a");
    assert_eq!(customer["webstore_name"], "Store A Organics");
    assert!(
        customer.get("address").is_none(),
        "address only with embed=address: {customer}"
    );
}

#[tokio::test]
async fn numbers_count_per_webstore_and_ids_increase() {
    // Arrange
    let app = spawn_app().await;

    // Act
    let first = create(&app, "n1@example.com").await;
    let second = create(&app, "n2@example.com").await;
    let third = create(&app, "n3@example.com").await;
    let in_b = app.create_customer_b_ok("n1@example.com").await;

    // Assert
    assert_eq!(first["number"], "0001");
    assert_eq!(second["number"], "0002");
    assert_eq!(third["number"], "0003");
    assert_eq!(in_b["number"], "0001", "numbers are per webstore");
    assert!(id_of(&first) < id_of(&second) && id_of(&second) < id_of(&third));
    assert!(id_of(&third) < id_of(&in_b));
}

#[tokio::test]
async fn name_is_just_the_first_name_without_a_last_name() {
    // Arrange
    let app = spawn_app().await;
    let mut body = customer_body("solo@example.com");
    body.as_object_mut().unwrap().remove("last_name");

    // Act
    let customer = app.create_customer_ok(&body).await;

    // Assert
    assert_eq!(customer["name"], "Joe");
}

#[tokio::test]
async fn a_wrapped_body_means_the_same_as_a_bare_one() {
    // Arrange
    let app = spawn_app().await;

    // Act
    let customer = app
        .create_customer_ok(&json!({"customer": customer_body("wrapped@example.com")}))
        .await;

    // Assert
    assert_eq!(customer["email"], "wrapped@example.com");
    assert_eq!(customer["name"], "Joe Dalton");
}

#[tokio::test]
async fn unknown_and_server_owned_fields_are_ignored() {
    // Arrange
    let app = spawn_app().await;
    let mut body = customer_body("owned@example.com");
    for (key, value) in [
        ("id", json!(987654)),
        ("number", json!("9999")),
        ("account_balance", json!("1000.00")),
        ("halted?", json!(true)),
        ("discount?", json!(true)),
        ("discount", json!(0.5)),
        ("created_at", json!("2001-01-01T00:00:00Z")),
        ("webstore_id", json!("store-b")),
        ("webstore_name", json!("Other")),
        ("name", json!("Somebody Else")),
        ("payment_method", json!("paypal")),
        ("start_date", json!("2026-01-01")),
        ("week_days", json!([1, 3])),
        ("via_webstore", json!(true)),
    ] {
        body[key] = value;
    }

    // Act
    let customer = app.create_customer_ok(&body).await;

    // Assert
    assert_ne!(customer["id"], 987654);
    assert_eq!(customer["number"], "0001");
    assert_eq!(customer["account_balance"], "0.00");
    assert_eq!(customer["halted?"], false);
    assert_eq!(customer["discount?"], false);
    assert_eq!(customer["discount"], json!(0.0));
    assert_eq!(customer["webstore_id"], "store-a");
    assert_eq!(customer["webstore_name"], "Store A Organics");
    assert_eq!(customer["name"], "Joe Dalton");
    let fetched = app.get(&format!("/v1/customers/{}", customer["id"])).await;
    fetched.assert_status(200);
    assert_eq!(fetched.json(), customer);
}

#[tokio::test]
async fn get_by_id_returns_the_customer_and_address_only_when_embedded() {
    // Arrange
    let app = spawn_app().await;
    let created = create(&app, "get@example.com").await;
    let path = format!("/v1/customers/{}", created["id"]);

    // Act
    let plain = app.get(&path).await;
    let embedded = app.get(&format!("{path}?embed=address")).await;
    let unknown_embed = app.get(&format!("{path}?embed=orders,bogus")).await;

    // Assert
    plain.assert_status(200);
    assert_eq!(plain.json(), created);
    embedded.assert_status(200);
    let customer = embedded.json();
    assert_customer_shape(&customer);
    let address = customer["address"]
        .as_object()
        .unwrap_or_else(|| panic!("no address object: {customer}"));
    for key in ADDRESS_FIELDS {
        assert!(address.contains_key(key), "address lacks {key}: {customer}");
    }
    assert_eq!(address["address_1"], "1 My Street");
    assert_eq!(address["city"], "London");
    assert_eq!(address["postcode"], "XXX123");
    assert_eq!(address["home_phone"], "007");
    for key in [
        "address_2",
        "suburb",
        "delivery_note",
        "mobile_phone",
        "work_phone",
    ] {
        assert_eq!(address[key], Value::Null, "absent {key} must be null");
    }
    unknown_embed.assert_status(200);
    assert_eq!(unknown_embed.json(), created);
}

#[tokio::test]
async fn get_of_an_unknown_id_is_404() {
    // Arrange
    let app = spawn_app().await;
    create(&app, "someone@example.com").await;

    // Act
    let response = app.get("/v1/customers/987654321").await;

    // Assert
    response.assert_not_found();
}

#[tokio::test]
async fn password_is_never_returned() {
    // Arrange
    let app = spawn_app().await;
    let mut body = customer_body("secretive@example.com");
    body["password"] = json!("correct horse battery");

    // Act
    let created = app.create_customer(&body).await;
    let id = created.json()["id"].clone();
    let fetched = app.get(&format!("/v1/customers/{id}?embed=address")).await;
    let listed = app.get("/v1/customers?embed=address").await;
    let looked_up = app
        .get("/v1/customers?email=secretive%40example.com&embed=address")
        .await;

    // Assert
    created.assert_status(201);
    for response in [created, fetched, listed, looked_up] {
        assert!(
            response.status == 200 || response.status == 201,
            "{}: {}",
            response.request,
            response.status
        );
        let text = response.text();
        assert!(!text.contains("password"), "{text}");
        assert!(!text.contains("correct horse battery"), "{text}");
        assert!(!text.contains("argon2"), "{text}");
    }
}

#[tokio::test]
async fn email_lookup_trims_and_ignores_case() {
    // Arrange
    let app = spawn_app().await;
    let created = create(&app, "lookup@example.com").await;
    create(&app, "other@example.com").await;

    for query in [
        "lookup@example.com",
        "LOOKUP@Example.COM",
        "  lookup@example.com ",
    ] {
        // Act
        let found = app.lookup_email(query).await;

        // Assert
        assert_eq!(found, vec![created.clone()], "lookup of {query:?}");
    }
    assert!(app.lookup_email("nobody@example.com").await.is_empty());
    assert!(app.lookup_email("lookup@example.co").await.is_empty());
}

#[tokio::test]
async fn email_lookup_embeds_the_address_on_request() {
    // Arrange
    let app = spawn_app().await;
    create(&app, "embed@example.com").await;

    // Act
    let response = app
        .get("/v1/customers?email=embed%40example.com&embed=address")
        .await;

    // Assert
    response.assert_status(200);
    let found = response.json();
    assert_eq!(found.as_array().map(Vec::len), Some(1), "{found}");
    assert_eq!(found[0]["address"]["city"], "London");
}

#[tokio::test]
async fn list_is_ordered_by_id_and_paginated_with_link_and_total() {
    // Arrange
    let app = spawn_app().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(id_of(&create(&app, &format!("page{i}@example.com")).await));
    }

    // Act
    let page1 = app.get("/v1/customers?per_page=2").await;
    let page2 = app.get("/v1/customers?per_page=2&page=2").await;
    let page3 = app.get("/v1/customers?per_page=2&page=3").await;
    let past = app.get("/v1/customers?per_page=2&page=4").await;

    // Assert
    let ids_of = |v: &Value| -> Vec<i64> {
        v.as_array()
            .unwrap_or_else(|| panic!("not an array: {v}"))
            .iter()
            .map(id_of)
            .collect()
    };
    for response in [&page1, &page2, &page3, &past] {
        response.assert_status(200);
        assert_eq!(
            response.header("x-total-count").as_deref(),
            Some("5"),
            "{}",
            response.request
        );
    }
    assert_eq!(ids_of(&page1.json()), ids[0..2]);
    assert_eq!(ids_of(&page2.json()), ids[2..4]);
    assert_eq!(ids_of(&page3.json()), ids[4..5]);
    assert_eq!(past.json(), json!([]));

    let rels = |response: &crate::helpers::TestResponse| -> Vec<(String, Option<String>)> {
        let link = response
            .header("link")
            .unwrap_or_else(|| panic!("{}: no Link header", response.request));
        let mut rels: Vec<(String, Option<String>)> = parse_link_header(&link)
            .into_iter()
            .map(|(rel, url)| (rel, query_param(&url, "page")))
            .collect();
        rels.sort();
        rels
    };
    let some = |s: &str| Some(s.to_string());
    assert_eq!(
        rels(&page1),
        vec![
            ("first".to_string(), some("1")),
            ("last".to_string(), some("3")),
            ("next".to_string(), some("2")),
        ]
    );
    assert_eq!(
        rels(&page2),
        vec![
            ("first".to_string(), some("1")),
            ("last".to_string(), some("3")),
            ("next".to_string(), some("3")),
            ("prev".to_string(), some("1")),
        ]
    );
    assert_eq!(
        rels(&page3),
        vec![
            ("first".to_string(), some("1")),
            ("last".to_string(), some("3")),
            ("prev".to_string(), some("2")),
        ]
    );
}

#[tokio::test]
async fn following_next_links_visits_every_customer_once() {
    // Arrange
    let app = spawn_app().await;
    let mut ids = Vec::new();
    for i in 0..7 {
        ids.push(id_of(&create(&app, &format!("walk{i}@example.com")).await));
    }

    // Act
    let mut seen = Vec::new();
    let mut next = Some("/v1/customers?per_page=3".to_string());
    for _ in 0..10 {
        let Some(path) = next.take() else { break };
        let response = app.get(&path).await;
        response.assert_status(200);
        seen.extend(response.json().as_array().unwrap().iter().map(id_of));
        next = response.header("link").and_then(|link| {
            parse_link_header(&link)
                .into_iter()
                .find(|(rel, _)| rel == "next")
                .map(|(_, url)| path_and_query(&url))
        });
    }

    // Assert
    assert_eq!(seen, ids);
}

#[tokio::test]
async fn list_defaults_to_100_per_page() {
    // Arrange
    let app = spawn_app().await;
    let mut ids = Vec::new();
    let app_ref = &app;
    for batch in 0..11 {
        let creates = (0..10).filter(|i| batch * 10 + i < 101).map(|i| {
            let body = customer_body(&format!("bulk{batch}-{i}@example.com"));
            async move { app_ref.create_customer(&body).await }
        });
        for response in futures_util::future::join_all(creates).await {
            response.assert_status(201);
            ids.push(id_of(&response.json()));
        }
    }
    ids.sort();
    assert_eq!(ids.len(), 101);

    // Act
    let first = app.get("/v1/customers").await;
    let second = app.get("/v1/customers?page=2").await;
    let big = app.get("/v1/customers?per_page=1000").await;

    // Assert
    first.assert_status(200);
    assert_eq!(first.header("x-total-count").as_deref(), Some("101"));
    let first_ids: Vec<i64> = first.json().as_array().unwrap().iter().map(id_of).collect();
    assert_eq!(first_ids, ids[..100]);
    let link = first.header("link").expect("a Link header");
    let next = parse_link_header(&link)
        .into_iter()
        .find(|(rel, _)| rel == "next")
        .expect("a next link");
    assert_eq!(query_param(&next.1, "page").as_deref(), Some("2"));
    second.assert_status(200);
    let second_ids: Vec<i64> = second
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(id_of)
        .collect();
    assert_eq!(second_ids, ids[100..]);
    big.assert_status(200);
    assert_eq!(big.json().as_array().map(Vec::len), Some(101));
}

#[tokio::test]
async fn invalid_page_parameters_are_422_naming_them() {
    // Arrange
    let app = spawn_app().await;
    create(&app, "pager@example.com").await;
    let cases: [(&str, &[&str]); 9] = [
        ("page=0", &["page"]),
        ("page=abc", &["page"]),
        ("page=-1", &["page"]),
        ("page=1.5", &["page"]),
        ("per_page=0", &["per_page"]),
        ("per_page=1001", &["per_page"]),
        ("per_page=abc", &["per_page"]),
        ("page=0&per_page=0", &["page", "per_page"]),
        ("page=x&per_page=5000", &["page", "per_page"]),
    ];

    for (query, keys) in cases {
        // Act
        let response = app.get(&format!("/v1/customers?{query}")).await;
        // An email lookup does not page, but bad paging is still bad input.
        let lookup = app
            .get(&format!("/v1/customers?email=pager%40example.com&{query}"))
            .await;

        // Assert
        response.assert_error_keys(keys);
        lookup.assert_error_keys(keys);
    }
    app.get("/v1/customers?email=pager%40example.com&page=7")
        .await
        .assert_status(200);
    app.get("/v1/customers?per_page=1000")
        .await
        .assert_status(200);
    app.get("/v1/customers?page=1&per_page=1")
        .await
        .assert_status(200);
}

#[tokio::test]
async fn numbers_in_string_fields_are_kept_as_text() {
    // Carts built on form parameters send a postcode or a phone number as a JSON number;
    // like the system the contract follows, boxsub keeps it as text rather than refuse it.
    let app = spawn_app().await;
    let mut body = customer_body("digits@example.com");
    body["first_name"] = json!(42);
    body["address"]["city"] = json!(5);
    body["address"]["postcode"] = json!(12345);
    let response = app.post_json("/v1/customers?embed=address", &body).await;
    assert_eq!(response.status, 201, "{}", response.text());
    let customer = response.json();
    assert_eq!(customer["first_name"], "42");
    assert_eq!(customer["address"]["city"], "5");
    assert_eq!(customer["address"]["postcode"], "12345");
}

#[tokio::test]
async fn delivery_service_id_may_be_a_digit_string() {
    // Arrange
    let app = spawn_app().await;
    let mut body = customer_body("digits@example.com");
    body["delivery_service_id"] = json!("92");

    // Act
    let customer = app.create_customer_ok(&body).await;

    // Assert
    assert_eq!(customer["delivery_service_id"], 92);
}

#[tokio::test]
async fn empty_body_names_first_name_email_and_delivery_service() {
    // Arrange: a webstore without address requirements
    let app = Launch::new().catalogue(relaxed_catalogue()).spawn().await;

    // Act
    let response = app.create_customer(&json!({})).await;

    // Assert
    response.assert_error_keys(&["first_name", "email", "delivery_service_id"]);
    response.assert_field_error("first_name", BLANK);
    response.assert_field_error("email", BLANK);
    response.assert_field_error("delivery_service_id", BLANK);
}

#[tokio::test]
async fn empty_body_in_a_store_requiring_an_address_names_those_too() {
    // Arrange
    let app = spawn_app().await;

    // Act
    let response = app.create_customer(&json!({})).await;
    let wrapped = app.create_customer(&json!({"customer": {}})).await;

    // Assert
    for response in [response, wrapped] {
        response.assert_error_keys(&[
            "first_name",
            "email",
            "delivery_service_id",
            "address.address_1",
            "address.city",
        ]);
        response.assert_field_error("address.address_1", BLANK);
        response.assert_field_error("address.city", BLANK);
    }
}

#[tokio::test]
async fn every_failing_field_is_reported_at_once() {
    // Arrange
    let app = spawn_app().await;
    let body = json!({
        "first_name": "  ", "email": "not-an-email", "delivery_service_id": 999,
        "address": {"postcode": "X"}, "password": "short",
    });

    // Act
    let response = app.create_customer(&body).await;

    // Assert
    response.assert_error_keys(&[
        "first_name",
        "email",
        "delivery_service_id",
        "address.address_1",
        "address.city",
        "password",
    ]);
    response.assert_field_error("first_name", BLANK);
    response.assert_field_error("email", INVALID);
    response.assert_field_error("delivery_service_id", INVALID);
    assert_eq!(app.get("/v1/customers").await.json(), json!([]));
}

/// One invalid variation of a valid store-A customer body.
struct Case {
    name: &'static str,
    /// A JSON merge applied to the valid body: `null` removes a key.
    change: Value,
    key: &'static str,
    message: Option<&'static str>,
}

fn apply(mut body: Value, change: &Value) -> Value {
    for (key, value) in change.as_object().unwrap() {
        match (key.as_str(), value) {
            ("address", Value::Object(fields)) => {
                for (k, v) in fields {
                    if v.is_null() {
                        body["address"].as_object_mut().unwrap().remove(k);
                    } else {
                        body["address"][k] = v.clone();
                    }
                }
            }
            (_, Value::Null) => {
                body.as_object_mut().unwrap().remove(key);
            }
            (_, _) => body[key] = value.clone(),
        }
    }
    body
}

fn invalid_customer_cases() -> Vec<Case> {
    let long = "x".repeat(256);
    let c = |name, change, key, message| Case {
        name,
        change,
        key,
        message,
    };
    vec![
        c(
            "missing first_name",
            json!({"first_name": null}),
            "first_name",
            Some(BLANK),
        ),
        c(
            "empty first_name",
            json!({"first_name": ""}),
            "first_name",
            Some(BLANK),
        ),
        c(
            "blank first_name",
            json!({"first_name": " \t "}),
            "first_name",
            Some(BLANK),
        ),
        c(
            "object first_name",
            json!({"first_name": {}}),
            "first_name",
            Some(INVALID),
        ),
        c(
            "array first_name",
            json!({"first_name": ["Joe"]}),
            "first_name",
            Some(INVALID),
        ),
        c(
            "boolean last_name",
            json!({"last_name": true}),
            "last_name",
            Some(INVALID),
        ),
        c(
            "long first_name",
            json!({"first_name": long}),
            "first_name",
            Some(TOO_LONG_255),
        ),
        c(
            "long last_name",
            json!({"last_name": long}),
            "last_name",
            Some(TOO_LONG_255),
        ),
        c(
            "missing email",
            json!({"email": null}),
            "email",
            Some(BLANK),
        ),
        c(
            "email without @",
            json!({"email": "joe.example.com"}),
            "email",
            Some(INVALID),
        ),
        c(
            "email with two @",
            json!({"email": "joe@@example.com"}),
            "email",
            Some(INVALID),
        ),
        c(
            "email a@b@c",
            json!({"email": "a@b@example.com"}),
            "email",
            Some(INVALID),
        ),
        c(
            "email with a space",
            json!({"email": "jo e@example.com"}),
            "email",
            Some(INVALID),
        ),
        c(
            "email empty local part",
            json!({"email": "@example.com"}),
            "email",
            Some(INVALID),
        ),
        c(
            "email empty domain",
            json!({"email": "joe@"}),
            "email",
            Some(INVALID),
        ),
        c(
            "email array",
            json!({"email": ["joe@example.com"]}),
            "email",
            None,
        ),
        c(
            "email too long",
            json!({"email": format!("{}@example.com", "e".repeat(250))}),
            "email",
            None,
        ),
        c(
            "missing delivery_service_id",
            json!({"delivery_service_id": null}),
            "delivery_service_id",
            Some(BLANK),
        ),
        c(
            "unknown delivery_service_id",
            json!({"delivery_service_id": 999}),
            "delivery_service_id",
            Some(INVALID),
        ),
        c(
            "other store's delivery_service_id",
            json!({"delivery_service_id": 95}),
            "delivery_service_id",
            Some(INVALID),
        ),
        c(
            "non-numeric delivery_service_id",
            json!({"delivery_service_id": "abc"}),
            "delivery_service_id",
            Some(INVALID),
        ),
        c(
            "negative delivery_service_id",
            json!({"delivery_service_id": -91}),
            "delivery_service_id",
            None,
        ),
        c(
            "fractional delivery_service_id",
            json!({"delivery_service_id": 91.5}),
            "delivery_service_id",
            None,
        ),
        c(
            "boolean delivery_service_id",
            json!({"delivery_service_id": true}),
            "delivery_service_id",
            None,
        ),
        c(
            "missing address_1",
            json!({"address": {"address_1": null}}),
            "address.address_1",
            Some(BLANK),
        ),
        c(
            "blank address_1",
            json!({"address": {"address_1": "  "}}),
            "address.address_1",
            Some(BLANK),
        ),
        c(
            "missing city",
            json!({"address": {"city": null}}),
            "address.city",
            Some(BLANK),
        ),
        c(
            "long address_2",
            json!({"address": {"address_2": long}}),
            "address.address_2",
            Some(TOO_LONG_255),
        ),
        c(
            "long postcode",
            json!({"address": {"postcode": long}}),
            "address.postcode",
            Some(TOO_LONG_255),
        ),
        c(
            "long home_phone",
            json!({"address": {"home_phone": long}}),
            "address.home_phone",
            Some(TOO_LONG_255),
        ),
        c(
            "long delivery_note",
            json!({"address": {"delivery_note": "n".repeat(1001)}}),
            "address.delivery_note",
            Some("is too long (maximum is 1000 characters)"),
        ),
        c(
            "password of 7",
            json!({"password": "1234567"}),
            "password",
            None,
        ),
        c(
            "password of 129",
            json!({"password": "p".repeat(129)}),
            "password",
            None,
        ),
        c(
            "number password",
            json!({"password": 12345678}),
            "password",
            None,
        ),
    ]
}

#[tokio::test]
async fn invalid_customers_are_rejected_naming_the_field() {
    // Arrange
    let app = spawn_app().await;
    let mut soft = SoftAsserts::default();

    for case in invalid_customer_cases() {
        let body = apply(customer_body("valid@example.com"), &case.change);

        // Act
        let response = app.create_customer(&body).await;

        // Assert
        soft.check(case.name, || {
            assert_eq!(
                response.status,
                422,
                "case {:?} ({body}): {}",
                case.name,
                response.text()
            );
            response.assert_error_keys(&[case.key]);
            if let Some(message) = case.message {
                response.assert_field_error(case.key, message);
            }
        });
        if response.status == 201 {
            // Free the email again so the next rows test what they mean to.
            let id = response.json()["id"].clone();
            app.patch_json(
                &format!("/v1/customers/{id}"),
                &json!({"email": format!("leaked-{id}@example.com")}),
            )
            .await;
        }
    }
    soft.finish();
    // Nothing was created by any of them.
    assert_eq!(app.get("/v1/customers").await.json(), json!([]));
    app.create_customer_ok(&customer_body("valid@example.com"))
        .await;
}

#[tokio::test]
async fn boundary_lengths_are_accepted() {
    // Arrange
    let app = spawn_app().await;
    let mut body = customer_body("bounds@example.com");
    body["first_name"] = json!("f".repeat(255));
    body["last_name"] = json!("é".repeat(255));
    body["address"]["address_1"] = json!("a".repeat(255));
    body["address"]["delivery_note"] = json!("n".repeat(1000));
    body["password"] = json!("p".repeat(128));

    // Act
    let customer = app.create_customer_ok(&body).await;
    let mut short_password = customer_body("bounds2@example.com");
    short_password["password"] = json!("12345678");
    let second = app.create_customer(&short_password).await;

    // Assert
    assert_eq!(customer["first_name"], json!("f".repeat(255)));
    assert_eq!(customer["last_name"], json!("é".repeat(255)));
    second.assert_status(201);
    let fetched = app
        .get(&format!("/v1/customers/{}?embed=address", customer["id"]))
        .await
        .json();
    assert_eq!(fetched["address"]["delivery_note"], json!("n".repeat(1000)));
}

#[tokio::test]
async fn a_taken_email_is_rejected_in_any_case_and_with_spaces() {
    // Arrange
    let app = spawn_app().await;
    create(&app, "taken@example.com").await;

    for email in [
        "taken@example.com",
        "TAKEN@example.com",
        "Taken@Example.Com",
        "  taken@example.com  ",
    ] {
        // Act
        let response = app.create_customer(&customer_body(email)).await;

        // Assert
        response.assert_error_keys(&["email"]);
        response.assert_field_error("email", TAKEN);
    }
    assert_eq!(
        app.get("/v1/customers")
            .await
            .json()
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn store_b_requires_a_phone() {
    // Arrange
    let app = spawn_app().await;
    let b = store_b();
    let without_phone = json!({"first_name": "Jana", "email": "nophone@example.com",
                               "delivery_service_id": 95});
    let empty_phones = json!({"first_name": "Jana", "email": "nophone@example.com",
                              "delivery_service_id": 95,
                              "address": {"home_phone": "", "city": "Berlin"}});

    // Act
    let missing = app.post_json_as("/v1/customers", &without_phone, &b).await;
    let empty = app.post_json_as("/v1/customers", &empty_phones, &b).await;
    let mut work_only = without_phone.clone();
    work_only["address"] = json!({"work_phone": "030 1234"});
    let with_work = app.post_json_as("/v1/customers", &work_only, &b).await;
    let with_mobile = app
        .post_json_as("/v1/customers", &customer_body_b("mobile@example.com"), &b)
        .await;

    // Assert
    missing.assert_error_keys(&["address.phone"]);
    empty.assert_error_keys(&["address.phone"]);
    with_work.assert_status(201);
    with_mobile.assert_status(201);
    // Store B does not require address_1 or city.
    assert_eq!(with_mobile.json()["webstore_id"], "store-b");
}

#[tokio::test]
async fn patch_updates_present_fields_and_keeps_the_rest() {
    // Arrange
    let app = spawn_app().await;
    let created = create(&app, "patch@example.com").await;
    let id = id_of(&created);
    let path = format!("/v1/customers/{id}");

    // Act
    let response = app
        .patch_json(&path, &json!({"last_name": "Bloggs", "id": 424242}))
        .await;

    // Assert
    response.assert_status(200);
    assert_eq!(response.header("location").as_deref(), Some(path.as_str()));
    let updated = response.json();
    assert_eq!(updated["id"], id);
    assert_eq!(updated["first_name"], "Joe");
    assert_eq!(updated["last_name"], "Bloggs");
    assert_eq!(updated["name"], "Joe Bloggs");
    assert_eq!(updated["email"], "patch@example.com");
    assert_eq!(updated["number"], created["number"]);
    assert_eq!(app.get(&path).await.json(), updated);
    app.get("/v1/customers/424242").await.assert_not_found();
}

#[tokio::test]
async fn put_behaves_like_patch() {
    // Arrange
    let app = spawn_app().await;
    let created = create(&app, "put@example.com").await;
    let path = format!("/v1/customers/{}", created["id"]);

    // Act
    let response = app
        .put_json(&path, &json!({"customer": {"first_name": "Averell"}}))
        .await;

    // Assert
    response.assert_status(200);
    assert_eq!(response.header("location").as_deref(), Some(path.as_str()));
    let updated = response.json();
    assert_eq!(updated["first_name"], "Averell");
    assert_eq!(updated["last_name"], "Dalton");
    assert_eq!(updated["delivery_service_id"], 91);
}

#[tokio::test]
async fn patch_of_address_fields_replaces_only_those() {
    // Arrange
    let app = spawn_app().await;
    let created = create(&app, "addr@example.com").await;
    let path = format!("/v1/customers/{}", created["id"]);

    // Act
    let response = app
        .patch_json(
            &path,
            &json!({"address": {"postcode": "NEW 1", "suburb": "Hackney"}}),
        )
        .await;

    // Assert
    response.assert_status(200);
    let fetched = app.get(&format!("{path}?embed=address")).await.json();
    let address = &fetched["address"];
    assert_eq!(address["address_1"], "1 My Street");
    assert_eq!(address["city"], "London");
    assert_eq!(address["home_phone"], "007");
    assert_eq!(address["postcode"], "NEW 1");
    assert_eq!(address["suburb"], "Hackney");
}

#[tokio::test]
async fn patch_validates_present_fields_and_changes_nothing_on_failure() {
    // Arrange
    let app = spawn_app().await;
    let created = create(&app, "strict@example.com").await;
    let path = format!("/v1/customers/{}", created["id"]);
    let cases: [(Value, &[&str]); 6] = [
        (json!({"first_name": ""}), &["first_name"]),
        (json!({"email": "nope"}), &["email"]),
        (json!({"delivery_service_id": 95}), &["delivery_service_id"]),
        (json!({"address": {"city": ""}}), &["address.city"]),
        (json!({"last_name": "x".repeat(256)}), &["last_name"]),
        (
            json!({"first_name": "New", "email": "bad@@example.com", "password": "short"}),
            &["email", "password"],
        ),
    ];

    for (body, keys) in cases {
        // Act
        let response = app.patch_json(&path, &body).await;

        // Assert
        response.assert_error_keys(keys);
    }
    let after = app.get(&path).await.json();
    assert_eq!(after, created);
    let address = app.get(&format!("{path}?embed=address")).await.json();
    assert_eq!(address["address"]["city"], "London");
}

#[tokio::test]
async fn patch_of_an_unknown_customer_is_404() {
    // Arrange
    let app = spawn_app().await;
    create(&app, "exists@example.com").await;

    // Act
    let patch = app
        .patch_json("/v1/customers/987654", &json!({"first_name": "X"}))
        .await;
    let put = app
        .put_json("/v1/customers/987654", &json!({"first_name": "X"}))
        .await;

    // Assert
    patch.assert_not_found();
    put.assert_not_found();
}

#[tokio::test]
async fn an_email_change_moves_the_index_entry() {
    // Arrange
    let app = spawn_app().await;
    let created = create(&app, "old@example.com").await;
    let path = format!("/v1/customers/{}", created["id"]);

    // Act
    let response = app
        .patch_json(&path, &json!({"email": "New@Example.com"}))
        .await;

    // Assert
    response.assert_status(200);
    assert!(app.lookup_email("old@example.com").await.is_empty());
    let found = app.lookup_email("new@example.com").await;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["id"], created["id"]);
    // The old email is free for someone else.
    let newcomer = create(&app, "old@example.com").await;
    assert_ne!(newcomer["id"], created["id"]);
    assert_eq!(app.lookup_email("OLD@example.com").await, vec![newcomer]);
}

#[tokio::test]
async fn changing_to_a_taken_email_is_422_and_changes_nothing() {
    // Arrange
    let app = spawn_app().await;
    let first = create(&app, "first@example.com").await;
    let second = create(&app, "second@example.com").await;
    let path = format!("/v1/customers/{}", second["id"]);

    // Act
    let response = app
        .patch_json(
            &path,
            &json!({"email": " FIRST@example.com", "first_name": "Changed"}),
        )
        .await;

    // Assert
    response.assert_error_keys(&["email"]);
    response.assert_field_error("email", TAKEN);
    assert_eq!(app.get(&path).await.json(), second);
    assert_eq!(app.lookup_email("first@example.com").await, vec![first]);
    assert_eq!(app.lookup_email("second@example.com").await, vec![second]);
}

#[tokio::test]
async fn patching_to_its_own_email_in_another_case_is_allowed() {
    // Arrange
    let app = spawn_app().await;
    let created = create(&app, "self@example.com").await;
    let path = format!("/v1/customers/{}", created["id"]);

    // Act
    let same = app
        .patch_json(&path, &json!({"email": "self@example.com"}))
        .await;

    // Assert
    same.assert_status(200);
    assert_eq!(app.lookup_email("self@example.com").await.len(), 1);
}

#[tokio::test]
async fn a_404_for_a_customer_has_the_plain_body() {
    // Arrange
    let app = spawn_app().await;

    // Act
    let response = app.get("/v1/customers/1").await;

    // Assert
    response.assert_message(404, MSG_NOT_FOUND);
}

#[tokio::test]
async fn an_update_may_not_remove_the_last_phone_where_one_is_required() {
    // Arrange
    let app = spawn_app().await;
    let b = store_b();
    let customer = app.create_customer_b_ok("phone-b@example.com").await;
    let path = format!("/v1/customers/{}", customer["id"]);

    // Act
    let removed = app
        .patch_json_as(&path, &json!({"address": {"mobile_phone": ""}}), &b)
        .await;
    let swapped = app
        .patch_json_as(
            &path,
            &json!({"address": {"mobile_phone": "", "home_phone": "030 999"}}),
            &b,
        )
        .await;

    // Assert
    removed.assert_error_keys(&["address.phone"]);
    swapped.assert_status(200);
    let fetched = app
        .get_as(&format!("{path}?embed=address"), &b)
        .await
        .json();
    assert_eq!(fetched["address"]["home_phone"], "030 999");
}

#[tokio::test]
async fn an_update_may_add_an_address_later() {
    // Arrange: a store without address requirements, a customer without one
    let app = Launch::new().catalogue(relaxed_catalogue()).spawn().await;
    let created = app
        .create_customer_ok(&json!({"first_name": "Nomad", "email": "nomad@example.com",
                                    "delivery_service_id": 91}))
        .await;
    let path = format!("/v1/customers/{}", created["id"]);
    let before = app.get(&format!("{path}?embed=address")).await.json();

    // Act
    let response = app
        .patch_json(&path, &json!({"address": {"city": "Leeds"}}))
        .await;

    // Assert
    for key in ADDRESS_FIELDS {
        assert_eq!(
            before["address"][key],
            Value::Null,
            "{key} before: {before}"
        );
    }
    response.assert_status(200);
    let after = app.get(&format!("{path}?embed=address")).await.json();
    assert_eq!(after["address"]["city"], "Leeds");
    assert_eq!(after["address"]["address_1"], Value::Null);
}
