//! `POST /v1/customers/sign_in`: JSON, form and query transports, the
//! indistinguishable failures, blank parameters and the per-email throttle.

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{
    customer_body, enc, spawn_app, store_a, TestApp, TestResponse, BLANK, INVALID,
};

const PASSWORD: &str = "s3cret-Passw0rd";

async fn customer_with_password(app: &TestApp, email: &str) -> Value {
    let mut body = customer_body(email);
    body["password"] = json!(PASSWORD);
    app.create_customer_ok(&body).await
}

#[track_caller]
fn assert_signed_in(response: &TestResponse, customer: &Value) {
    response.assert_status(200);
    let body = response.json();
    let list = body
        .as_array()
        .unwrap_or_else(|| panic!("sign-in must answer an array: {body}"));
    assert_eq!(list.len(), 1, "{body}");
    assert_eq!(list[0]["id"], customer["id"], "{body}");
    assert_eq!(list[0]["email"], customer["email"], "{body}");
}

#[track_caller]
fn assert_rejected(response: &TestResponse) {
    response.assert_status(200);
    assert_eq!(response.json(), json!([]));
}

async fn sign_in_form(app: &TestApp, email: &str, password: &str) -> TestResponse {
    let body = format!("email={}&password={}", enc(email), enc(password));
    app.send(
        Method::POST,
        "/v1/customers/sign_in",
        Some(&store_a()),
        Some(body.into_bytes()),
        &[("Content-Type", "application/x-www-form-urlencoded")],
    )
    .await
}

async fn sign_in_query(app: &TestApp, email: &str, password: &str) -> TestResponse {
    let path = format!(
        "/v1/customers/sign_in?email={}&password={}",
        enc(email),
        enc(password)
    );
    app.send(Method::POST, &path, Some(&store_a()), None, &[])
        .await
}

#[tokio::test]
async fn the_right_password_signs_in_over_json_form_and_query() {
    // Arrange
    let app = spawn_app().await;
    let customer = customer_with_password(&app, "signin@example.com").await;

    // Act
    let json = app.sign_in("signin@example.com", PASSWORD).await;
    let form = sign_in_form(&app, "signin@example.com", PASSWORD).await;
    let query = sign_in_query(&app, "signin@example.com", PASSWORD).await;

    // Assert
    for response in [&json, &form, &query] {
        assert_signed_in(response, &customer);
        let text = response.text();
        assert!(!text.contains("password"), "{text}");
        assert!(!text.contains(PASSWORD), "{text}");
    }
    assert!(json.json()[0].get("address").is_none());
}

#[tokio::test]
async fn sign_in_embeds_the_address_on_request() {
    // Arrange
    let app = spawn_app().await;
    customer_with_password(&app, "embedded@example.com").await;

    // Act
    let response = app
        .post_json(
            "/v1/customers/sign_in",
            &json!({"email": "embedded@example.com", "password": PASSWORD, "embed": "address"}),
        )
        .await;

    // Assert
    response.assert_status(200);
    assert_eq!(response.json()[0]["address"]["city"], "London");
}

#[tokio::test]
async fn every_failure_is_an_empty_array() {
    // Arrange
    let app = spawn_app().await;
    customer_with_password(&app, "fail@example.com").await;
    app.create_customer_ok(&customer_body("nopassword@example.com"))
        .await;
    let cases = [
        ("wrong password", "fail@example.com", "wrong-password"),
        (
            "password in another case",
            "fail@example.com",
            "S3CRET-PASSW0RD",
        ),
        ("unknown email", "ghost@example.com", PASSWORD),
        (
            "customer without password",
            "nopassword@example.com",
            PASSWORD,
        ),
    ];

    for (case, email, password) in cases {
        // Act
        let response = app.sign_in(email, password).await;

        // Assert
        assert_eq!(response.status, 200, "{case}: {}", response.text());
        assert_rejected(&response);
    }
}

#[tokio::test]
async fn missing_or_empty_parameters_are_422_blank() {
    // Arrange
    let app = spawn_app().await;
    customer_with_password(&app, "blank@example.com").await;
    let cases: [(Value, &[&str]); 6] = [
        (json!({"password": PASSWORD}), &["email"]),
        (json!({"email": "", "password": PASSWORD}), &["email"]),
        (json!({"email": "blank@example.com"}), &["password"]),
        (
            json!({"email": "blank@example.com", "password": ""}),
            &["password"],
        ),
        (json!({}), &["email", "password"]),
        (json!({"email": "", "password": ""}), &["email", "password"]),
    ];

    for (body, keys) in cases {
        // Act
        let response = app.post_json("/v1/customers/sign_in", &body).await;

        // Assert
        response.assert_error_keys(keys);
        for key in keys {
            response.assert_field_error(key, BLANK);
        }
    }

    // Act: no parameters at all, in no transport
    let bare = app
        .send(
            Method::POST,
            "/v1/customers/sign_in",
            Some(&store_a()),
            None,
            &[],
        )
        .await;

    // Assert
    bare.assert_status(422);
}

#[tokio::test]
async fn body_values_that_are_not_text_are_422_invalid() {
    // Arrange: the query string carries good parameters, which must not stand in for them.
    let app = spawn_app().await;
    customer_with_password(&app, "typed@example.com").await;
    let path = format!("/v1/customers/sign_in?email=typed%40example.com&password={PASSWORD}");

    // Act
    let response = app
        .post_json(
            &path,
            &json!({"email": {}, "password": ["x"], "embed": true}),
        )
        .await;

    // Assert
    response.assert_error_keys(&["email", "password", "embed"]);
    response.assert_field_error("email", INVALID);
}

#[tokio::test]
async fn the_eleventh_attempt_after_ten_failures_is_throttled() {
    // Arrange
    let app = spawn_app().await;
    let victim = customer_with_password(&app, "victim@example.com").await;
    let bystander = customer_with_password(&app, "bystander@example.com").await;

    // Act
    for attempt in 1..=10 {
        let response = app.sign_in("victim@example.com", "wrong-guess").await;
        assert_eq!(
            response.status,
            200,
            "failed attempt {attempt} must not be throttled yet: {}",
            response.text()
        );
    }
    let throttled = app.sign_in("victim@example.com", PASSWORD).await;
    let throttled_form = sign_in_form(&app, "victim@example.com", PASSWORD).await;
    let other = app.sign_in("bystander@example.com", PASSWORD).await;

    // Assert
    for response in [&throttled, &throttled_form] {
        response.assert_status(429);
        let retry_after = response
            .header("retry-after")
            .expect("a Retry-After header");
        let seconds: u64 = retry_after
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("Retry-After is not integer seconds: {retry_after:?}"));
        assert!(seconds > 0 && seconds <= 15 * 60, "Retry-After {seconds}");
        let body = response.json();
        assert!(body["message"].is_string(), "{body}");
        assert_eq!(body.as_object().map(|o| o.len()), Some(1), "{body}");
    }
    assert_signed_in(&other, &bystander);
    assert_ne!(victim["id"], bystander["id"]);
}

#[tokio::test]
async fn unknown_emails_are_throttled_too() {
    // Arrange
    let app = spawn_app().await;

    // Act
    for _ in 0..10 {
        assert_rejected(&app.sign_in("nobody@example.com", "guess").await);
    }
    let eleventh = app.sign_in("nobody@example.com", "guess").await;

    // Assert
    eleventh.assert_status(429);
    assert!(eleventh.header("retry-after").is_some());
}

#[tokio::test]
async fn a_success_before_the_tenth_failure_resets_the_count() {
    // Arrange
    let app = spawn_app().await;
    let customer = customer_with_password(&app, "reset@example.com").await;

    // Act
    for _ in 0..9 {
        assert_rejected(&app.sign_in("reset@example.com", "nope").await);
    }
    let success = app.sign_in("reset@example.com", PASSWORD).await;
    for _ in 0..9 {
        assert_rejected(&app.sign_in("reset@example.com", "nope").await);
    }
    let after = app.sign_in("reset@example.com", PASSWORD).await;

    // Assert
    assert_signed_in(&success, &customer);
    assert_signed_in(&after, &customer);
}
