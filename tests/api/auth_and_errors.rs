//! Authentication, routing and the error shapes of contract sections 1 to 3:
//! 401 before anything else, 404 and 405 with `Allow`, non-JSON bodies, 413.

use reqwest::Method;
use serde_json::json;

use crate::helpers::{
    customer_body, spawn_app, store_a, store_b, Creds, SoftAsserts, MSG_BAD_CREDS,
    MSG_INVALID_JSON, MSG_METHOD_NOT_ALLOWED, MSG_MISSING_CREDS, MSG_NOT_FOUND, MSG_TOO_LARGE,
    STORE_A_KEY, STORE_A_SECRET, STORE_B_SECRET,
};

#[tokio::test]
async fn ping_needs_no_credentials_and_answers_204_without_body() {
    // Arrange
    let app = spawn_app().await;

    // Act
    let anonymous = app.get_without_auth("/v1/ping").await;
    let authenticated = app.get("/v1/ping").await;

    // Assert
    for response in [anonymous, authenticated] {
        response.assert_status(204);
        assert!(response.body.is_empty(), "204 must have no body");
    }
}

#[tokio::test]
async fn missing_or_empty_credentials_are_401_with_the_must_set_message() {
    // Arrange
    let app = spawn_app().await;
    let cases: Vec<(&str, Vec<(&str, &str)>)> = vec![
        ("no headers", vec![]),
        ("only API-Key", vec![("API-Key", STORE_A_KEY)]),
        ("only API-Secret", vec![("API-Secret", STORE_A_SECRET)]),
        (
            "empty API-Key",
            vec![("API-Key", ""), ("API-Secret", STORE_A_SECRET)],
        ),
        (
            "empty API-Secret",
            vec![("API-Key", STORE_A_KEY), ("API-Secret", "")],
        ),
        ("both empty", vec![("API-Key", ""), ("API-Secret", "")]),
    ];

    for (case, headers) in cases {
        // Act
        let response = app
            .send(Method::GET, "/v1/customers", None, None, &headers)
            .await;

        // Assert
        assert_eq!(response.status, 401, "case {case}: {}", response.text());
        response.assert_message(401, MSG_MISSING_CREDS);
    }
}

#[tokio::test]
async fn wrong_key_or_secret_is_401_with_the_invalid_message() {
    // Arrange
    let app = spawn_app().await;
    let cases = [
        ("unknown key", Creds::new("nope", STORE_A_SECRET)),
        ("wrong secret", Creds::new(STORE_A_KEY, "wrong-secret")),
        (
            "other store's secret",
            Creds::new(STORE_A_KEY, STORE_B_SECRET),
        ),
        (
            "secret with a trailing character",
            Creds::new(STORE_A_KEY, &format!("{STORE_A_SECRET}x")),
        ),
        (
            "the secret's hash instead of the secret",
            Creds::new(STORE_A_KEY, &crate::helpers::sha256_hex(STORE_A_SECRET)),
        ),
    ];

    for (case, creds) in cases {
        // Act
        let response = app.get_as("/v1/webstore", &creds).await;

        // Assert
        assert_eq!(response.status, 401, "case {case}: {}", response.text());
        response.assert_message(401, MSG_BAD_CREDS);
    }
}

#[tokio::test]
async fn credentials_are_checked_before_anything_else() {
    // Arrange
    let app = spawn_app().await;
    let bad = Creds::new(STORE_A_KEY, "wrong");
    let requests: Vec<(Method, &str, Option<Vec<u8>>)> = vec![
        (Method::GET, "/v1/customers/999999", None),
        (Method::GET, "/v1/customers/abc", None),
        (Method::GET, "/v1/no_such_route", None),
        (Method::DELETE, "/v1/customers", None),
        (Method::POST, "/v1/ping", None),
        (Method::POST, "/v1/customers", Some(b"{not json".to_vec())),
        (Method::POST, "/v1/orders", Some(b"{}".to_vec())),
        (Method::GET, "/v1/orders?customer_id=abc", None),
    ];

    for (method, path, body) in requests {
        // Act
        let anonymous = app
            .send(method.clone(), path, None, body.clone(), &[])
            .await;
        let wrong = app.send(method, path, Some(&bad), body, &[]).await;

        // Assert
        anonymous.assert_message(401, MSG_MISSING_CREDS);
        wrong.assert_message(401, MSG_BAD_CREDS);
    }
}

#[tokio::test]
async fn header_names_are_case_insensitive() {
    // Arrange
    let app = spawn_app().await;
    let request = format!(
        "GET /v1/webstore HTTP/1.1\r\nHost: 127.0.0.1:{}\r\naPi-KeY: {STORE_A_KEY}\r\n\
         api-secret: {STORE_A_SECRET}\r\nConnection: close\r\n\r\n",
        app.port
    );

    // Act
    let response = app
        .raw_exchange(request.into_bytes())
        .await
        .expect("a response");

    // Assert
    assert_eq!(response.status, 200, "{response:?}");
    assert_eq!(response.json()["id"], "store-a");
}

#[tokio::test]
async fn paths_outside_v1_are_404_without_credentials() {
    // Arrange
    let app = spawn_app().await;

    for path in [
        "/",
        "/customers",
        "/v2/customers",
        "/v1x/ping",
        "/favicon.ico",
    ] {
        // Act
        let response = app.get_without_auth(path).await;

        // Assert
        response.assert_not_found();
    }
}

#[tokio::test]
async fn unknown_routes_with_valid_credentials_are_404() {
    // Arrange
    let app = spawn_app().await;

    for path in [
        "/v1",
        "/v1/",
        "/v1/nothing",
        "/v1/customer",
        "/v1/customers/1/orders",
        "/v1/boxes/217/extras",
        "/v1/webstore/1",
    ] {
        // Act
        let response = app.get(path).await;

        // Assert
        response.assert_not_found();
    }
}

#[tokio::test]
async fn non_numeric_or_zero_ids_are_404() {
    // Arrange
    let app = spawn_app().await;
    let created = app
        .create_customer_ok(&customer_body("ids@example.com"))
        .await;
    assert!(created["id"].as_i64().unwrap() > 0);

    for path in [
        "/v1/customers/abc",
        "/v1/customers/0",
        "/v1/customers/-1",
        "/v1/customers/1.5",
        "/v1/customers/1e3",
        "/v1/customers/99999999999999999999999999",
        "/v1/orders/0",
        "/v1/orders/abc",
        "/v1/boxes/abc",
        "/v1/boxes/0",
        "/v1/delivery_services/0",
        "/v1/delivery_services/x91",
    ] {
        // Act
        let response = app.get(path).await;

        // Assert
        response.assert_not_found();
    }

    // Act: writes to such paths are 404 as well
    let patch = app
        .patch_json("/v1/customers/abc", &json!({"first_name": "X"}))
        .await;
    let put = app
        .put_json("/v1/customers/0", &json!({"first_name": "X"}))
        .await;

    // Assert
    patch.assert_not_found();
    put.assert_not_found();
}

#[tokio::test]
async fn other_methods_on_known_paths_are_405_with_allow() {
    // Arrange
    let app = spawn_app().await;
    let cases: Vec<(Method, &str, &str)> = vec![
        (Method::DELETE, "/v1/customers", "GET, POST"),
        (Method::PUT, "/v1/customers", "GET, POST"),
        (Method::PATCH, "/v1/customers", "GET, POST"),
        (Method::POST, "/v1/customers/1", "GET, PATCH, PUT"),
        (Method::DELETE, "/v1/customers/1", "GET, PATCH, PUT"),
        (Method::GET, "/v1/customers/sign_in", "POST"),
        (Method::DELETE, "/v1/customers/sign_in", "POST"),
        (Method::DELETE, "/v1/orders", "GET, POST"),
        (Method::PUT, "/v1/orders", "GET, POST"),
        (Method::POST, "/v1/orders/1", "GET, PATCH, PUT"),
        (Method::DELETE, "/v1/orders/1", "GET, PATCH, PUT"),
        (Method::POST, "/v1/orders/1/deliveries", "GET"),
        (Method::POST, "/v1/boxes", "GET"),
        (Method::DELETE, "/v1/boxes/217", "GET"),
        (Method::POST, "/v1/delivery_services", "GET"),
        (Method::PUT, "/v1/delivery_services/91", "GET"),
        (Method::POST, "/v1/webstore", "GET"),
        (Method::PATCH, "/v1/webstore", "GET"),
        (Method::POST, "/v1/ping", "GET"),
    ];

    let normalise = |s: &str| {
        let mut v: Vec<String> = s.split(',').map(|m| m.trim().to_string()).collect();
        v.sort();
        v
    };
    let mut soft = SoftAsserts::default();
    for (method, path, allow) in cases {
        // Act
        let response = app
            .send(method.clone(), path, Some(&store_a()), None, &[])
            .await;

        // Assert
        soft.check(&format!("{method} {path}"), || {
            response.assert_message(405, MSG_METHOD_NOT_ALLOWED);
            let got = response
                .header("allow")
                .unwrap_or_else(|| panic!("{method} {path}: no Allow header"));
            assert_eq!(
                normalise(&got),
                normalise(allow),
                "{method} {path}: Allow header {got:?}"
            );
        });
    }
    soft.finish();
}

#[tokio::test]
async fn bodies_that_are_not_json_are_422_invalid_json() {
    // Arrange
    let app = spawn_app().await;
    let deep_array = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let deep_object = format!("{}1{}", "{\"a\":".repeat(10_000), "}".repeat(10_000));
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("garbage", b"this is not json".to_vec()),
        ("empty body", Vec::new()),
        ("invalid UTF-8", vec![0xff, 0xfe, 0xfd, 0x00, 0x80]),
        (
            "invalid UTF-8 inside a string",
            b"{\"first_name\": \"\xff\xfe\", \"email\": \"u@example.com\"}".to_vec(),
        ),
        (
            "truncated",
            b"{\"first_name\": \"Joe\", \"email\": ".to_vec(),
        ),
        (
            "trailing garbage",
            b"{\"first_name\": \"Joe\"} xyz".to_vec(),
        ),
        ("nested 10,000 deep (arrays)", deep_array.into_bytes()),
        ("nested 10,000 deep (objects)", deep_object.into_bytes()),
        ("top-level array", b"[]".to_vec()),
        (
            "top-level array of objects",
            b"[{\"first_name\": \"Joe\"}]".to_vec(),
        ),
        ("top-level number", b"42".to_vec()),
        ("single quotes", b"{'first_name': 'Joe'}".to_vec()),
    ];

    let mut soft = SoftAsserts::default();
    for path in ["/v1/customers", "/v1/orders"] {
        for (case, body) in &cases {
            // Act
            let response = app.post_raw(path, body.clone()).await;

            // Assert
            soft.check(&format!("POST {path} with {case}"), || {
                response.assert_message(422, MSG_INVALID_JSON);
            });
        }
    }

    // Act: an update with a body that is not JSON
    let customer = app
        .create_customer_ok(&customer_body("json@example.com"))
        .await;
    let path = format!("/v1/customers/{}", customer["id"]);
    for (case, body) in &cases {
        let response = app
            .send(
                Method::PATCH,
                &path,
                Some(&store_a()),
                Some(body.clone()),
                &[],
            )
            .await;

        // Assert
        soft.check(&format!("PATCH with {case}"), || {
            response.assert_message(422, MSG_INVALID_JSON);
        });
    }
    soft.finish();
    app.assert_alive().await;
}

#[tokio::test]
async fn json_is_parsed_whatever_the_content_type_says() {
    // Arrange
    let app = spawn_app().await;
    let body = serde_json::to_vec(&customer_body("ctype@example.com")).unwrap();

    // Act
    let response = app
        .send(
            Method::POST,
            "/v1/customers",
            Some(&store_a()),
            Some(body),
            &[("Content-Type", "text/plain")],
        )
        .await;

    // Assert
    response.assert_status(201);
}

#[tokio::test]
async fn a_body_over_64_kib_with_content_length_is_413() {
    // Arrange
    let app = spawn_app().await;
    let cases: Vec<(&str, usize, usize)> = vec![
        // (case, announced Content-Length, bytes actually sent)
        ("65537 bytes", 65_537, 65_537),
        ("70000 bytes", 70_000, 70_000),
        ("announced 10 MB, 70000 sent", 10_000_000, 70_000),
    ];

    for (case, announced, sent) in cases {
        let mut request = app.raw_head("POST", "/v1/customers", Some(&store_a()));
        request.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {announced}\r\n\r\n"
        ));
        let mut bytes = request.into_bytes();
        bytes.extend(std::iter::repeat_n(b' ', sent));

        // Act
        let response = app
            .raw_exchange(bytes)
            .await
            .unwrap_or_else(|| panic!("{case}: connection closed without a response"));

        // Assert
        assert_eq!(response.status, 413, "{case}: {response:?}");
        assert_eq!(
            response.header("content-type"),
            Some("application/json; charset=utf-8"),
            "{case}"
        );
        assert_eq!(response.json(), json!({"message": MSG_TOO_LARGE}), "{case}");
    }
    app.assert_alive().await;
}

#[tokio::test]
async fn a_chunked_body_over_64_kib_is_413() {
    // Arrange
    let app = spawn_app().await;
    let cases: Vec<(&str, usize, usize)> = vec![
        // (case, total body bytes, chunk size)
        ("65537 bytes in 4 KiB chunks", 65_537, 4096),
        ("70000 bytes in 8 KiB chunks", 70_000, 8192),
        ("70000 bytes in one chunk", 70_000, 70_000),
    ];

    for (case, total, chunk_size) in cases {
        let mut body = serde_json::to_vec(&customer_body("chunky@example.com")).unwrap();
        body.resize(total, b' ');
        let request = app.chunked_request("/v1/customers", &body, chunk_size);

        // Act
        let response = app
            .raw_exchange(request)
            .await
            .unwrap_or_else(|| panic!("{case}: connection closed without a response"));

        // Assert
        assert_eq!(response.status, 413, "{case}: {response:?}");
        assert_eq!(response.json(), json!({"message": MSG_TOO_LARGE}), "{case}");
    }
    app.assert_alive().await;
    // Nothing was created by the rejected bodies.
    assert!(app.lookup_email("chunky@example.com").await.is_empty());
}

#[tokio::test]
async fn a_chunked_body_within_the_limit_is_accepted() {
    // Arrange
    let app = spawn_app().await;
    let small = serde_json::to_vec(&customer_body("chunk1@example.com")).unwrap();
    let mut padded = serde_json::to_vec(&customer_body("chunk2@example.com")).unwrap();
    padded.resize(60_000, b' ');

    for (body, chunk_size) in [(small, 7), (padded, 4096)] {
        let request = app.chunked_request("/v1/customers", &body, chunk_size);

        // Act
        let response = app.raw_exchange(request).await.expect("a response");

        // Assert
        assert_eq!(response.status, 201, "{response:?}");
        assert_eq!(response.json()["first_name"], "Joe");
    }
    assert_eq!(app.lookup_email("chunk2@example.com").await.len(), 1);
}

#[tokio::test]
async fn a_body_of_exactly_64_kib_is_not_413() {
    // Arrange
    let app = spawn_app().await;
    let mut body = serde_json::to_vec(&customer_body("exact@example.com")).unwrap();
    body.resize(65_536, b' ');

    // Act
    let response = app.post_raw("/v1/customers", body).await;

    // Assert
    assert!(
        response.status == 201 || response.status == 422,
        "a 65536-byte body must be read: {} {}",
        response.status,
        response.text()
    );
}

#[tokio::test]
async fn json_responses_carry_the_utf8_json_content_type() {
    // Arrange
    let app = spawn_app().await;
    let customer = app
        .create_customer_ok(&customer_body("ct@example.com"))
        .await;

    for path in [
        "/v1/customers".to_string(),
        format!("/v1/customers/{}", customer["id"]),
        "/v1/customers?email=ct%40example.com".to_string(),
        "/v1/boxes".to_string(),
        "/v1/boxes/217".to_string(),
        "/v1/delivery_services".to_string(),
        "/v1/delivery_services/91".to_string(),
        "/v1/webstore".to_string(),
        format!("/v1/orders?customer_id={}", customer["id"]),
        "/v1/orders".to_string(),
        "/v1/nowhere".to_string(),
    ] {
        // Act
        let response = app.get(&path).await;

        // Assert (json() checks the Content-Type)
        response.assert_no_server_error();
        let _ = response.json();
    }

    // Act: an error of each kind also carries it
    let unauthorised = app.get_as("/v1/webstore", &store_b_wrong()).await;
    let _ = unauthorised.json();
}

fn store_b_wrong() -> Creds {
    Creds::new(&store_b().key, STORE_A_SECRET)
}

#[tokio::test]
async fn a_404_says_nothing_more_than_resource_not_found() {
    // Arrange
    let app = spawn_app().await;

    // Act
    let response = app.get("/v1/orders/424242").await;

    // Assert
    response.assert_message(404, MSG_NOT_FOUND);
}
