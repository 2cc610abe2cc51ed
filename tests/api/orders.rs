//! Orders: create with every rule of contract section 5, read one, list a
//! customer's orders; a failed create stores nothing.

use serde_json::{json, Value};

use crate::helpers::{
    assert_rfc3339_utc, customer_body, id_of, spawn_app, SoftAsserts, TestApp, BLANK, INVALID,
    NOT_IN_LIST,
};

const ORDER_KEYS: [&str; 11] = [
    "id",
    "customer_id",
    "box_id",
    "frequency",
    "start_date",
    "week_days",
    "extras_one_off",
    "extras",
    "exclusions",
    "substitutions",
    "created_at",
];

async fn a_customer(app: &TestApp, email: &str) -> i64 {
    id_of(&app.create_customer_ok(&customer_body(email)).await)
}

#[track_caller]
fn assert_order_shape(order: &Value) {
    let obj = order
        .as_object()
        .unwrap_or_else(|| panic!("order is not an object: {order}"));
    for key in ORDER_KEYS {
        assert!(obj.contains_key(key), "order lacks {key}: {order}");
    }
    assert!(id_of(order) > 0);
    assert_rfc3339_utc(&order["created_at"]);
}

#[tokio::test]
async fn create_returns_201_location_and_the_order_as_sent() {
    // Arrange
    let app = spawn_app().await;
    let customer_id = a_customer(&app, "orderer@example.com").await;
    let body = json!({
        "customer_id": customer_id, "box_id": 217, "frequency": "weekly",
        "extras_one_off": true,
        "extras": [{"id": 29, "quantity": 2}, {"id": 28, "quantity": 1}],
        "exclusions": [242, 240], "substitutions": [244],
    });

    // Act
    let response = app.create_order(&body).await;

    // Assert
    response.assert_status(201);
    let order = response.json();
    assert_order_shape(&order);
    let id = id_of(&order);
    assert_eq!(
        response.header("location").as_deref(),
        Some(format!("/v1/orders/{id}").as_str())
    );
    assert_eq!(order["customer_id"], customer_id);
    assert_eq!(order["box_id"], 217);
    assert_eq!(order["frequency"], "weekly");
    assert_eq!(order["extras_one_off"], true);
    assert_eq!(
        order["extras"],
        json!([{"id": 29, "quantity": 2}, {"id": 28, "quantity": 1}])
    );
    assert_eq!(order["exclusions"], json!([242, 240]));
    assert_eq!(order["substitutions"], json!([244]));
}

#[tokio::test]
async fn defaults_are_single_no_extras_and_not_one_off() {
    // Arrange
    let app = spawn_app().await;
    let customer_id = a_customer(&app, "defaults@example.com").await;

    // Act
    let order = app
        .create_order_ok(&json!({"customer_id": customer_id, "box_id": 218}))
        .await;

    // Assert
    assert_order_shape(&order);
    assert_eq!(order["frequency"], "single");
    assert_eq!(order["extras_one_off"], false);
    assert_eq!(order["extras"], json!([]));
    assert_eq!(order["exclusions"], json!([]));
    assert_eq!(order["substitutions"], json!([]));
}

#[tokio::test]
async fn integers_may_be_digit_strings_and_bodies_may_be_wrapped() {
    // Arrange
    let app = spawn_app().await;
    let customer_id = a_customer(&app, "strings@example.com").await;

    // Act
    let order = app
        .create_order_ok(&json!({"order": {
            "customer_id": customer_id.to_string(), "box_id": "219", "frequency": "fortnightly",
            "quantity": "1", "extras": [{"id": "30", "quantity": "2"}],
        }}))
        .await;

    // Assert
    assert_eq!(order["customer_id"], customer_id);
    assert_eq!(order["box_id"], 219);
    assert_eq!(order["frequency"], "fortnightly");
    assert_eq!(order["extras"], json!([{"id": 30, "quantity": 2}]));
}

#[tokio::test]
async fn quantity_one_and_unknown_fields_are_accepted() {
    // Arrange
    let app = spawn_app().await;
    let customer_id = a_customer(&app, "qty@example.com").await;

    // Act
    let order = app
        .create_order_ok(&json!({
            "customer_id": customer_id, "box_id": 217, "quantity": 1,
            "id": 5, "created_at": "2000-01-01T00:00:00Z", "payment_method": "paid",
            "start_date": "2026-11-30", "week_days": [1],
        }))
        .await;

    // Assert
    assert_ne!(order["id"], 5);
    assert_ne!(order["created_at"], "2000-01-01T00:00:00Z");
    assert_eq!(order["start_date"], "2026-11-30");
    assert_eq!(order["week_days"], json!([1]));
}

#[tokio::test]
async fn limits_are_inclusive_and_unlimited_means_unlimited() {
    // Arrange
    let app = spawn_app().await;
    let customer_id = a_customer(&app, "limits@example.com").await;
    let bodies = [
        // 217: exclusions up to 3, substitutions up to 2, extras unlimited
        json!({"box_id": 217, "exclusions": [240, 241, 242], "substitutions": [243, 244],
               "extras": [{"id": 28, "quantity": 50}, {"id": 29, "quantity": 50}]}),
        // 219: extras up to 2 in total, exclusions and substitutions unlimited
        json!({"box_id": 219, "extras": [{"id": 28, "quantity": 1}, {"id": 30, "quantity": 1}],
               "exclusions": [240, 241, 242, 243], "substitutions": [244]}),
        // empty arrays are always fine, even on a box without likes or dislikes
        json!({"box_id": 218, "exclusions": [], "substitutions": [], "extras": []}),
    ];

    for mut body in bodies {
        body["customer_id"] = json!(customer_id);

        // Act
        let response = app.create_order(&body).await;

        // Assert
        response.assert_status(201);
    }
    assert_eq!(app.orders_of(customer_id).await.len(), 3);
}

/// One invalid variation of a valid order for box 217.
struct Case {
    name: &'static str,
    change: Value,
    keys: &'static [&'static str],
    message: Option<&'static str>,
}

fn invalid_order_cases() -> Vec<Case> {
    let hundred_and_one: Vec<i64> = (0..101).map(|i| 240 + (i % 5)).collect();
    let c = |name, change, keys, message| Case {
        name,
        change,
        keys,
        message,
    };
    vec![
        c(
            "missing customer_id",
            json!({"customer_id": null}),
            &["customer_id"],
            Some(BLANK),
        ),
        c(
            "unknown customer_id",
            json!({"customer_id": 987654}),
            &["customer_id"],
            Some(INVALID),
        ),
        c(
            "non-numeric customer_id",
            json!({"customer_id": "abc"}),
            &["customer_id"],
            Some(INVALID),
        ),
        c(
            "zero customer_id",
            json!({"customer_id": 0}),
            &["customer_id"],
            None,
        ),
        c(
            "negative customer_id",
            json!({"customer_id": -1}),
            &["customer_id"],
            None,
        ),
        c(
            "fractional customer_id",
            json!({"customer_id": 1.5}),
            &["customer_id"],
            None,
        ),
        c(
            "boolean customer_id",
            json!({"customer_id": true}),
            &["customer_id"],
            None,
        ),
        c(
            "missing box_id",
            json!({"box_id": null}),
            &["box_id"],
            Some(BLANK),
        ),
        c(
            "unknown box_id",
            json!({"box_id": 999}),
            &["box_id"],
            Some(INVALID),
        ),
        c(
            "hidden box",
            json!({"box_id": 220}),
            &["box_id"],
            Some(INVALID),
        ),
        c(
            "other store's box",
            json!({"box_id": 300}),
            &["box_id"],
            Some(INVALID),
        ),
        c(
            "non-numeric box_id",
            json!({"box_id": "abc"}),
            &["box_id"],
            None,
        ),
        c(
            "fractional box_id",
            json!({"box_id": 217.5}),
            &["box_id"],
            None,
        ),
        c(
            "negative box_id",
            json!({"box_id": -217}),
            &["box_id"],
            None,
        ),
        c(
            "daily frequency",
            json!({"frequency": "daily"}),
            &["frequency"],
            Some(NOT_IN_LIST),
        ),
        c(
            "capitalised frequency",
            json!({"frequency": "Weekly"}),
            &["frequency"],
            Some(NOT_IN_LIST),
        ),
        c(
            "numeric frequency",
            json!({"frequency": 7}),
            &["frequency"],
            None,
        ),
        c("quantity 2", json!({"quantity": 2}), &["quantity"], None),
        c(
            "quantity \"3\"",
            json!({"quantity": "3"}),
            &["quantity"],
            None,
        ),
        c("quantity 0", json!({"quantity": 0}), &["quantity"], None),
        c(
            "unknown exclusion",
            json!({"exclusions": [999]}),
            &["exclusions"],
            None,
        ),
        c(
            "other store's exclusion",
            json!({"exclusions": [400]}),
            &["exclusions"],
            None,
        ),
        c(
            "duplicate exclusion",
            json!({"exclusions": [240, 240]}),
            &["exclusions"],
            None,
        ),
        c(
            "too many exclusions",
            json!({"exclusions": [240, 241, 242, 243]}),
            &["exclusions"],
            None,
        ),
        c(
            "exclusions over 100 elements",
            json!({"exclusions": hundred_and_one}),
            &["exclusions"],
            None,
        ),
        c(
            "non-integer exclusion",
            json!({"exclusions": ["x"]}),
            &["exclusions"],
            None,
        ),
        c(
            "exclusions not an array",
            json!({"exclusions": 240}),
            &["exclusions"],
            None,
        ),
        c(
            "unknown substitution",
            json!({"substitutions": [999]}),
            &["substitutions"],
            None,
        ),
        c(
            "duplicate substitution",
            json!({"substitutions": [241, 241]}),
            &["substitutions"],
            None,
        ),
        c(
            "too many substitutions",
            json!({"substitutions": [240, 241, 242]}),
            &["substitutions"],
            None,
        ),
        c(
            "substitutions over 100 elements",
            json!({"substitutions": hundred_and_one}),
            &["substitutions"],
            None,
        ),
        c(
            "non-integer substitution",
            json!({"substitutions": [{}]}),
            &["substitutions"],
            None,
        ),
        c(
            "substituted and excluded",
            json!({"exclusions": [240], "substitutions": [240]}),
            &["substitutions"],
            None,
        ),
        c(
            "extra not offered",
            json!({"extras": [{"id": 30, "quantity": 1}]}),
            &["extras[0].id"],
            None,
        ),
        c(
            "unknown extra",
            json!({"extras": [{"id": 28, "quantity": 1}, {"id": 999, "quantity": 1}]}),
            &["extras[1].id"],
            None,
        ),
        c(
            "extra listed twice",
            json!({"extras": [{"id": 28, "quantity": 1}, {"id": 28, "quantity": 1}]}),
            &["extras[1].id"],
            None,
        ),
        c(
            "extra quantity 0",
            json!({"extras": [{"id": 28, "quantity": 0}]}),
            &["extras[0].quantity"],
            None,
        ),
        c(
            "extra quantity -1",
            json!({"extras": [{"id": 28, "quantity": -1}]}),
            &["extras[0].quantity"],
            None,
        ),
        c(
            "extra quantity \"x\"",
            json!({"extras": [{"id": 28, "quantity": "x"}]}),
            &["extras[0].quantity"],
            None,
        ),
        c(
            "extra quantity 2.5",
            json!({"extras": [{"id": 29, "quantity": 2.5}]}),
            &["extras[0].quantity"],
            None,
        ),
        c(
            "second extra quantity 0",
            json!({"extras": [{"id": 28, "quantity": 1}, {"id": 29, "quantity": 0}]}),
            &["extras[1].quantity"],
            None,
        ),
        c(
            "extras_one_off \"maybe\"",
            json!({"extras_one_off": "maybe"}),
            &["extras_one_off"],
            None,
        ),
        c(
            "extras_one_off 1",
            json!({"extras_one_off": 1}),
            &["extras_one_off"],
            None,
        ),
        c(
            "several bad fields",
            json!({"box_id": 999, "frequency": "daily", "quantity": 3}),
            &["box_id", "frequency", "quantity"],
            None,
        ),
        c(
            "everything missing",
            json!({"customer_id": null, "box_id": null, "frequency": "monthly"}),
            &["customer_id", "box_id", "frequency"],
            None,
        ),
    ]
}

fn apply(mut body: Value, change: &Value) -> Value {
    for (key, value) in change.as_object().unwrap() {
        if value.is_null() {
            body.as_object_mut().unwrap().remove(key);
        } else {
            body[key] = value.clone();
        }
    }
    body
}

#[tokio::test]
async fn invalid_orders_are_rejected_naming_every_field_and_store_nothing() {
    // Arrange
    let app = spawn_app().await;
    let customer_id = a_customer(&app, "invalid-orders@example.com").await;
    let valid = json!({"customer_id": customer_id, "box_id": 217});
    let mut soft = SoftAsserts::default();

    for case in invalid_order_cases() {
        let body = apply(valid.clone(), &case.change);

        // Act
        let response = app.create_order(&body).await;

        // Assert
        soft.check(case.name, || {
            assert_eq!(
                response.status,
                422,
                "case {:?} ({body}): {}",
                case.name,
                response.text()
            );
            response.assert_error_keys(case.keys);
            if let Some(message) = case.message {
                response.assert_field_error(case.keys[0], message);
            }
        });
    }
    let stored = app.orders_of(customer_id).await;
    soft.check("no order stored by a failed create", || {
        assert_eq!(stored, Vec::<Value>::new());
    });
    soft.finish();
}

#[tokio::test]
async fn the_quantity_error_says_to_post_one_order_per_box() {
    // Arrange
    let app = spawn_app().await;
    let customer_id = a_customer(&app, "many@example.com").await;

    // Act
    let response = app
        .create_order(&json!({"customer_id": customer_id, "box_id": 217, "quantity": 2}))
        .await;

    // Assert
    let messages = response.messages_for("quantity").join(" ").to_lowercase();
    assert!(
        messages.contains("one order per box"),
        "quantity message must say to post one order per box: {messages:?}"
    );
}

#[tokio::test]
async fn box_rules_for_likes_dislikes_and_extras() {
    // Arrange
    let app = spawn_app().await;
    let customer_id = a_customer(&app, "rules@example.com").await;
    let cases: [(&str, Value, &str); 3] = [
        (
            "exclusions on a box without dislikes",
            json!({"box_id": 218, "exclusions": [240]}),
            "exclusions",
        ),
        (
            "substitutions on a box without likes",
            json!({"box_id": 218, "substitutions": [240]}),
            "substitutions",
        ),
        (
            "extras on a box without extras",
            json!({"box_id": 218, "extras": [{"id": 28, "quantity": 1}]}),
            "extras",
        ),
    ];

    for (case, mut body, key) in cases {
        body["customer_id"] = json!(customer_id);

        // Act
        let response = app.create_order(&body).await;

        // Assert
        assert_eq!(response.status, 422, "{case}: {}", response.text());
        response.assert_has_error(key);
    }

    // Act: box 219 allows 2 extras in total
    let over = app
        .create_order(&json!({"customer_id": customer_id, "box_id": 219,
            "extras": [{"id": 28, "quantity": 2}, {"id": 29, "quantity": 1}]}))
        .await;

    // Assert
    over.assert_error_keys(&["extras"]);
    assert!(app.orders_of(customer_id).await.is_empty());
}

#[tokio::test]
async fn get_by_id_returns_the_created_order_or_404() {
    // Arrange
    let app = spawn_app().await;
    let customer_id = a_customer(&app, "getorder@example.com").await;
    let created = app
        .create_order_ok(&json!({"customer_id": customer_id, "box_id": 217,
                                 "extras": [{"id": 28, "quantity": 1}]}))
        .await;

    // Act
    let found = app.get(&format!("/v1/orders/{}", created["id"])).await;
    let missing = app.get("/v1/orders/987654").await;

    // Assert
    found.assert_status(200);
    assert_eq!(found.json(), created);
    missing.assert_not_found();
}

#[tokio::test]
async fn list_returns_a_customers_orders_by_id() {
    // Arrange
    let app = spawn_app().await;
    let alice = a_customer(&app, "alice@example.com").await;
    let bob = a_customer(&app, "bob@example.com").await;
    let mut alices = Vec::new();
    for box_id in [217, 218, 219] {
        alices.push(
            app.create_order_ok(&json!({"customer_id": alice, "box_id": box_id}))
                .await,
        );
        app.create_order_ok(&json!({"customer_id": bob, "box_id": box_id}))
            .await;
    }

    // Act
    let listed = app.orders_of(alice).await;
    let as_string = app.get(&format!("/v1/orders?customer_id={alice}")).await;

    // Assert
    assert_eq!(listed, alices);
    let ids: Vec<i64> = listed.iter().map(id_of).collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted);
    assert_eq!(as_string.json(), json!(alices));
    assert_eq!(app.orders_of(bob).await.len(), 3);
    let fresh = a_customer(&app, "fresh@example.com").await;
    assert!(app.orders_of(fresh).await.is_empty());
}

#[tokio::test]
async fn list_needs_a_valid_customer_id() {
    // Arrange
    let app = spawn_app().await;
    a_customer(&app, "someone@example.com").await;
    let cases = [
        ("/v1/orders", "customer_id", BLANK),
        ("/v1/orders?customer_id=987654", "customer_id", INVALID),
        ("/v1/orders?customer_id=abc", "customer_id", INVALID),
        ("/v1/orders?customer_id=0", "customer_id", INVALID),
        ("/v1/orders?customer_id=-1", "customer_id", INVALID),
    ];

    for (path, key, message) in cases {
        // Act
        let response = app.get(path).await;

        // Assert
        response.assert_status(422);
        assert_eq!(
            response.json(),
            json!({"errors": {key: [message]}}),
            "{path}"
        );
    }
}
