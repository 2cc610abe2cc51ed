//! The OpenAPI document (`docs/openapi.json`) checked against real answers: every response a
//! black-box test receives through [`crate::helpers::TestApp::send`] is matched to its
//! operation, and its status must be documented for it, its content type listed, its JSON
//! body valid against the documented schema (closed schemas: a field the server adds or
//! drops fails) and its required headers present. So the document cannot drift from the
//! server without `cargo test` failing. The check itself is
//! [`crate::helpers::contract::check`]; these are the tests of the document and of the check.

use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::helpers::contract::{check, escape, validator, DOCUMENT};

#[tokio::test]
async fn the_server_serves_the_document_without_credentials() {
    let app = crate::helpers::spawn_app().await;
    let served = app.get_without_auth("/v1/openapi.json").await;
    served.assert_status(200);
    assert_eq!(served.json(), *DOCUMENT);
    assert_eq!(DOCUMENT["openapi"], "3.1.0");
}

#[test]
fn every_operation_has_an_id_and_the_document_compiles() {
    let paths = DOCUMENT["paths"].as_object().unwrap();
    let mut ids = std::collections::HashSet::new();
    for (template, item) in paths {
        for (method, operation) in item.as_object().unwrap() {
            if !["get", "put", "post", "patch", "delete", "head", "options"]
                .contains(&method.as_str())
            {
                continue;
            }
            let id = operation["operationId"]
                .as_str()
                .unwrap_or_else(|| panic!("{method} {template} has no operationId"));
            assert!(ids.insert(id.to_owned()), "operationId {id} twice");
        }
    }
    // Every component schema compiles.
    for name in DOCUMENT["components"]["schemas"]
        .as_object()
        .unwrap()
        .keys()
    {
        validator(&format!("/components/schemas/{}", escape(name)));
    }
}

#[test]
fn a_field_the_document_does_not_have_fails_the_check() {
    let mut headers = HeaderMap::new();
    headers.insert(
        "content-type",
        "application/json; charset=utf-8".parse().unwrap(),
    );
    headers.insert("x-request-id", "abc".parse().unwrap());
    let webstore = |extra: Option<(&str, Value)>| {
        let mut body = serde_json::json!({
            "id": "s", "name": "S", "locale": "en", "currency": "GBP", "time_zone": "London",
            "city": "", "email": "", "phone": "", "sidebar_description": "", "active": true,
            "payment_options": [], "require_phone": false, "require_address_1": false,
            "require_address_2": false, "require_suburb": false, "require_city": false,
            "require_postcode": false, "require_delivery_note": false, "collect_phone": false,
            "collect_delivery_note": false
        });
        if let Some((key, value)) = extra {
            body[key] = value;
        }
        serde_json::to_vec(&body).unwrap()
    };
    check("GET", "/v1/webstore", 200, &headers, &webstore(None)).unwrap();
    let added = check(
        "GET",
        "/v1/webstore",
        200,
        &headers,
        &webstore(Some(("api_keys", serde_json::json!([])))),
    );
    assert!(added.is_err(), "an undocumented field must fail");
    let undocumented_status = check("GET", "/v1/webstore", 418, &headers, b"{}");
    assert!(undocumented_status.is_err());
}
