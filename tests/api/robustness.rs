//! Hostile input never yields a 5xx and never takes the service down: wrong
//! types in every field, huge numbers, deep nesting, invalid UTF-8, long
//! headers and query strings, percent-encoded junk, random bodies. Heads over
//! the 64 KiB limit get exactly the documented 431 and a closed connection.

use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use reqwest::Method;
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::helpers::{
    customer_body, id_of, read_until_closed, spawn_app, store_a, Closed, RawResponse, TestApp,
    MSG_BAD_CREDS, MSG_MISSING_CREDS,
};

/// Raw JSON literals of the wrong type or out of range for any field.
const WRONG_VALUES: [&str; 14] = [
    "{}",
    "[]",
    "[1, \"a\", null]",
    "true",
    "false",
    "null",
    "1e400",
    "-1e400",
    "99999999999999999999999",
    "-99999999999999999999999",
    "-1",
    "0",
    "2.5",
    "\"\\u0000\\ud800\"",
];

/// Serialises `template` with the value at `pointer` replaced by a raw literal.
fn with_raw_value(template: &Value, pointer: &str, literal: &str) -> Vec<u8> {
    const MARK: &str = "__RAW_VALUE_MARK__";
    let mut body = template.clone();
    *body
        .pointer_mut(pointer)
        .unwrap_or_else(|| panic!("no {pointer} in {template}")) = json!(MARK);
    serde_json::to_string(&body)
        .unwrap()
        .replace(&format!("\"{MARK}\""), literal)
        .into_bytes()
}

async fn assert_no_5xx_for_each_field(
    app: &TestApp,
    method: Method,
    path: &str,
    template: &Value,
    pointers: &[&str],
) {
    for pointer in pointers {
        for literal in WRONG_VALUES {
            let body = with_raw_value(template, pointer, literal);
            let response = app
                .send(method.clone(), path, Some(&store_a()), Some(body), &[])
                .await;
            assert!(
                response.status < 500,
                "{method} {path} with {pointer} = {literal}: {} {}",
                response.status,
                response.text()
            );
            assert!(
                (200..500).contains(&response.status),
                "{method} {path} with {pointer} = {literal}: {}",
                response.status
            );
        }
    }
}

#[tokio::test]
async fn wrong_types_in_every_customer_field_never_cause_a_server_error() {
    // Arrange
    let app = spawn_app().await;
    let mut template = customer_body("types@example.com");
    template["address"]["delivery_note"] = json!("Leave by the door");
    let pointers = [
        "/first_name",
        "/last_name",
        "/email",
        "/delivery_service_id",
        "/address",
        "/address/address_1",
        "/address/city",
        "/address/postcode",
        "/address/delivery_note",
        "/address/home_phone",
    ];
    let mut with_password = template.clone();
    with_password["password"] = json!("long enough password");

    // Act + Assert
    assert_no_5xx_for_each_field(&app, Method::POST, "/v1/customers", &template, &pointers).await;
    assert_no_5xx_for_each_field(
        &app,
        Method::POST,
        "/v1/customers",
        &with_password,
        &["/password"],
    )
    .await;
    let target = app
        .create_customer_ok(&customer_body("patch-target@example.com"))
        .await;
    let path = format!("/v1/customers/{}", target["id"]);
    assert_no_5xx_for_each_field(&app, Method::PATCH, &path, &template, &pointers).await;
    assert_no_5xx_for_each_field(
        &app,
        Method::POST,
        "/v1/customers",
        &json!({"customer": template}),
        &["/customer"],
    )
    .await;
    app.assert_alive().await;
}

#[tokio::test]
async fn wrong_types_in_every_order_field_never_cause_a_server_error() {
    // Arrange
    let app = spawn_app().await;
    let customer_id = id_of(
        &app.create_customer_ok(&customer_body("ordertypes@example.com"))
            .await,
    );
    let template = json!({
        "customer_id": customer_id, "box_id": 217, "frequency": "weekly",
        "extras_one_off": false, "quantity": 1,
        "extras": [{"id": 28, "quantity": 1}], "exclusions": [240], "substitutions": [241],
    });
    let pointers = [
        "/customer_id",
        "/box_id",
        "/frequency",
        "/extras_one_off",
        "/quantity",
        "/extras",
        "/extras/0",
        "/extras/0/id",
        "/extras/0/quantity",
        "/exclusions",
        "/exclusions/0",
        "/substitutions",
        "/substitutions/0",
    ];

    // Act + Assert
    assert_no_5xx_for_each_field(&app, Method::POST, "/v1/orders", &template, &pointers).await;
    assert_no_5xx_for_each_field(
        &app,
        Method::POST,
        "/v1/orders",
        &json!({"order": template}),
        &["/order"],
    )
    .await;
    app.assert_alive().await;
}

#[tokio::test]
async fn wrong_types_in_sign_in_never_cause_a_server_error() {
    // Arrange
    let app = spawn_app().await;
    let template = json!({"email": "who@example.com", "password": "whatever-123"});

    // Act + Assert
    assert_no_5xx_for_each_field(
        &app,
        Method::POST,
        "/v1/customers/sign_in",
        &template,
        &["/email", "/password"],
    )
    .await;
    app.assert_alive().await;
}

#[tokio::test]
async fn deep_nesting_inside_a_field_is_rejected() {
    // Arrange
    let app = spawn_app().await;
    let deep = format!("{}{}", "[".repeat(5_000), "]".repeat(5_000));
    let body = with_raw_value(&customer_body("deep@example.com"), "/first_name", &deep);
    let order = with_raw_value(&json!({"box_id": 217, "extras": []}), "/extras", &deep);

    // Act
    let customer = app.post_raw("/v1/customers", body).await;
    let order = app.post_raw("/v1/orders", order).await;

    // Assert
    customer.assert_status(422);
    order.assert_status(422);
    app.assert_alive().await;
}

#[tokio::test]
async fn huge_arrays_in_an_order_are_rejected() {
    // Arrange
    let app = spawn_app().await;
    let customer_id = id_of(
        &app.create_customer_ok(&customer_body("huge@example.com"))
            .await,
    );
    let many: Vec<i64> = (0..5_000).collect();
    let extras: Vec<Value> = (0..2_000)
        .map(|_| json!({"id": 28, "quantity": 1}))
        .collect();

    for body in [
        json!({"customer_id": customer_id, "box_id": 219, "exclusions": many}),
        json!({"customer_id": customer_id, "box_id": 219, "substitutions": many}),
        json!({"customer_id": customer_id, "box_id": 217, "extras": extras}),
    ] {
        // Act
        let response = app.create_order(&body).await;

        // Assert
        assert!(
            response.status == 422 || response.status == 413,
            "{} {}",
            response.status,
            response.text()
        );
    }
    assert!(app.orders_of(customer_id).await.is_empty());
}

/// The largest request head (request line and headers) the server takes: docs/api.md
/// ("Limits": keep it under 64 KiB; 431 and a closed connection past it).
const HEAD_LIMIT: usize = 64 * 1024;

/// Asserts the answer docs/api.md documents for a head over the limit: 431, an empty body,
/// `Connection: close`.
#[track_caller]
fn assert_head_too_large(response: &RawResponse, what: &str) {
    assert_eq!(response.status, 431, "{what}: {}", response.describe());
    assert!(
        response.body.is_empty(),
        "{what}: a 431 has no body: {}",
        response.describe()
    );
    assert_eq!(
        response
            .header("connection")
            .map(str::to_ascii_lowercase)
            .as_deref(),
        Some("close"),
        "{what}: {}",
        response.describe()
    );
}

#[tokio::test]
async fn long_header_values_get_exactly_the_documented_answers() {
    // Arrange
    let app = spawn_app().await;

    // Heads from 1 KB to 1 MB: under the limit, the answer is the 401 of the credentials
    // sent; over it, the documented 431. None is within 1 KiB of the limit either way.
    for size in [1_000, 8_000, 64_000, 70_000, 1_000_000] {
        let long = "k".repeat(size);
        let cases = [
            (
                format!("API-Key: {long}\r\nAPI-Secret: x\r\n"),
                MSG_BAD_CREDS,
            ),
            (
                format!("API-Key: {}\r\nAPI-Secret: {long}\r\n", store_a().key),
                MSG_BAD_CREDS,
            ),
            (format!("X-Junk: {long}\r\n"), MSG_MISSING_CREDS),
            (format!("User-Agent: {long}\r\n"), MSG_MISSING_CREDS),
        ];
        for (headers, message) in cases {
            let request = format!(
                "GET /v1/webstore HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\
                 {headers}\r\n",
                app.port
            );
            let head = request.len();
            assert!(head.abs_diff(HEAD_LIMIT) > 1024, "a head of {head} bytes");
            let what = format!("a head of {head} bytes ({})", &headers[..12]);

            // Act
            let response = app.raw_exchange(request.into_bytes()).await;

            // Assert
            let response = response.unwrap_or_else(|| panic!("{what}: no answer"));
            if head < HEAD_LIMIT {
                assert_eq!(response.status, 401, "{what}: {}", response.describe());
                assert_eq!(response.json(), json!({ "message": message }), "{what}");
            } else {
                assert_head_too_large(&response, &what);
            }
        }
    }
    app.assert_alive().await;
}

/// Sends `bytes` on a new connection (writing on a task of its own, as the server may stop
/// reading) and reads until the server closes it, for at most 10 s.
async fn send_and_read_until_closed(port: u16, bytes: Vec<u8>) -> (Vec<u8>, Closed) {
    let stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let (mut reader, mut writer) = stream.into_split();
    // The write fails once the server has closed with bytes of it unread; that is expected.
    let write = tokio::spawn(async move {
        let _ = writer.write_all(&bytes).await;
        writer
    });
    let read = read_until_closed(&mut reader, Duration::from_secs(10)).await;
    write.abort();
    read
}

#[tokio::test]
async fn a_head_over_the_limit_gets_431_and_a_close_and_the_next_client_is_served() {
    // Arrange: keep-alive requests (no `Connection: close`) with valid credentials whose
    // heads are over the 64 KiB limit: complete, far over it, and one never finished.
    let app = spawn_app().await;
    let head = |padding: usize, end: &str| {
        format!(
            "GET /v1/webstore HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAPI-Key: {}\r\nAPI-Secret: {}\r\n\
             X-Padding: {}{end}",
            app.port,
            store_a().key,
            store_a().secret,
            "p".repeat(padding)
        )
        .into_bytes()
    };
    let over = [
        ("a complete head of 80 KiB", head(80 * 1024, "\r\n\r\n")),
        ("a complete head of 1 MiB", head(1 << 20, "\r\n\r\n")),
        ("an unfinished head of 70 KiB", head(70 * 1024, "")),
    ];

    for (what, bytes) in over {
        // Act
        let (answer, closed) = send_and_read_until_closed(app.port, bytes).await;

        // Assert: the 431, then the connection is closed (not left to a deadline).
        let text = String::from_utf8_lossy(&answer);
        assert_ne!(closed, Closed::StillOpen, "{what}: not closed: {text:?}");
        let response = RawResponse::parse(&answer)
            .unwrap_or_else(|| panic!("{what}: no 431 before the close ({closed:?}): {text:?}"));
        assert_head_too_large(&response, what);

        // The next client, and a head just under the limit, are served.
        app.get("/v1/webstore").await.assert_status(200);
    }
    let (answer, _) = send_and_read_until_closed(
        app.port,
        [
            head(HEAD_LIMIT - 1024, "\r\n"),
            b"Connection: close\r\n\r\n".to_vec(),
        ]
        .concat(),
    )
    .await;
    let response = RawResponse::parse(&answer).expect("an answer under the limit");
    assert_eq!(
        response.status,
        200,
        "a head just under the limit: {}",
        response.describe()
    );
    app.assert_alive().await;
}

#[tokio::test]
async fn long_query_strings_never_cause_a_server_error() {
    // Arrange
    let app = spawn_app().await;

    for size in [1_000, 10_000, 60_000, 500_000] {
        let long = "q".repeat(size);
        for target in [
            format!("/v1/customers?email={long}%40example.com"),
            format!("/v1/customers?page={long}"),
            format!("/v1/customers?per_page=1{}", "0".repeat(size)),
            format!("/v1/orders?customer_id={}", "9".repeat(size)),
            format!("/v1/boxes?embed={}", "extras,".repeat(size / 7)),
            format!("/v1/customers/{}", "1".repeat(size)),
        ] {
            let mut request = app.raw_head("GET", &target, Some(&store_a()));
            request.push_str("\r\n");

            // Act
            let response = app.raw_exchange(request.into_bytes()).await;

            // Assert
            if let Some(response) = response {
                assert!(
                    response.status < 500,
                    "query of {size} bytes to {}: {response:?}",
                    &target[..30.min(target.len())]
                );
            }
        }
    }
    app.assert_alive().await;
}

#[tokio::test]
async fn percent_encoded_junk_in_paths_and_queries_is_a_4xx_or_empty_answer() {
    // Arrange
    let app = spawn_app().await;
    let targets = [
        "/v1/customers/%00",
        "/v1/customers/%FF%FE",
        "/v1/customers/1%2F2",
        "/v1/customers/%31",
        "/v1/%2e%2e/v1/customers",
        "/v1/customers/..%2F..%2Fetc%2Fpasswd",
        "/v1/customers/%",
        "/v1/customers/%ZZ",
        "/v1/boxes/%C0%AF",
        "/v1/customers?email=%FF%FE%00",
        "/v1/customers?email=%",
        "/v1/customers?email=%ZZ%",
        "/v1/customers?email=a%00b%40example.com",
        "/v1/customers?page=%ZZ&per_page=%FF",
        "/v1/customers?page=1&page=2&page=%00",
        "/v1/customers?embed=%C0%AF",
        "/v1/orders?customer_id=%00",
        "/v1/orders?customer_id=1%00",
        "/v1/orders?customer_id=%2D1",
        "/v1/boxes?embed=%FF,%00,extras",
        "/v1/customers?&&&=&=%=",
        "/v1/customers?email[]=x&email[x]=y",
    ];

    for target in targets {
        let mut request = app.raw_head("GET", target, Some(&store_a()));
        request.push_str("\r\n");

        // Act
        let response = app.raw_exchange(request.into_bytes()).await;

        // Assert
        let response = response.unwrap_or_else(|| panic!("{target}: no response"));
        assert!(response.status < 500, "{target}: {response:?}");
    }

    // Act: junk in sign-in query and form bodies
    for (path, body) in [
        ("/v1/customers/sign_in?email=%FF&password=%00", Vec::new()),
        (
            "/v1/customers/sign_in",
            b"email=%FF%FE&password=%ZZ&&=".to_vec(),
        ),
    ] {
        let response = app
            .send(
                Method::POST,
                path,
                Some(&store_a()),
                Some(body),
                &[("Content-Type", "application/x-www-form-urlencoded")],
            )
            .await;

        // Assert
        response.assert_no_server_error();
    }
    app.assert_alive().await;
}

#[tokio::test]
async fn malformed_requests_on_the_wire_never_take_the_service_down() {
    // Arrange
    let app = spawn_app().await;
    let port = app.port;
    let requests: Vec<Vec<u8>> = vec![
        b"GARBAGE\r\n\r\n".to_vec(),
        b"GET\r\n\r\n".to_vec(),
        format!("GET /v1/ping HTTP/9.9\r\nHost: 127.0.0.1:{port}\r\n\r\n").into_bytes(),
        format!(
            "POST /v1/customers HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
             Content-Length: abc\r\nConnection: close\r\n\r\n{{}}"
        )
        .into_bytes(),
        format!(
            "POST /v1/customers HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
             Transfer-Encoding: chunked\r\nConnection: close\r\n\r\nZZZ\r\nabc\r\n0\r\n\r\n"
        )
        .into_bytes(),
        format!(
            "POST /v1/customers HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
             Content-Length: 5\r\nContent-Length: 7\r\nConnection: close\r\n\r\n{{}}"
        )
        .into_bytes(),
        vec![0xff; 4096],
    ];

    for request in requests {
        // Act
        let response = app.raw_exchange(request.clone()).await;

        // Assert
        if let Some(response) = response {
            assert!(
                response.status < 500,
                "{:?}: {response:?}",
                String::from_utf8_lossy(&request[..request.len().min(80)])
            );
        }
    }
    app.assert_alive().await;
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        ".{0,20}".prop_map(Value::String),
        "[0-9]{1,25}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("first_name".to_string()),
                    Just("email".to_string()),
                    Just("delivery_service_id".to_string()),
                    Just("address".to_string()),
                    Just("customer_id".to_string()),
                    Just("box_id".to_string()),
                    Just("extras".to_string()),
                    Just("exclusions".to_string()),
                    Just("quantity".to_string()),
                    Just("id".to_string()),
                    "[a-z_]{1,10}",
                ],
                inner,
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_json_bodies_never_cause_a_server_error() {
    // Arrange
    let app = spawn_app().await;
    let handle = tokio::runtime::Handle::current();
    let mut runner = TestRunner::new(Config {
        cases: 64,
        failure_persistence: None,
        ..Config::default()
    });
    let paths = ["/v1/customers", "/v1/orders", "/v1/customers/sign_in"];

    // Act + Assert
    let result = tokio::task::block_in_place(|| {
        runner.run(&(json_value(), 0..paths.len()), |(body, which)| {
            let path = paths[which];
            let status = handle.block_on(async { app.post_json(path, &body).await.status });
            prop_assert!(status < 500, "POST {} with {} gave {}", path, body, status);
            Ok(())
        })
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    app.assert_alive().await;
}
