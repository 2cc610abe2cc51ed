//! Tenant isolation: another webstore's records are answered exactly like
//! records that do not exist, and one email may live once in each store.

use serde_json::json;

use crate::helpers::{customer_body, customer_body_b, id_of, spawn_app, store_b, INVALID};

#[tokio::test]
async fn store_b_cannot_read_store_a_customers() {
    // Arrange
    let app = spawn_app().await;
    let customer = app
        .create_customer_ok(&customer_body("private@example.com"))
        .await;
    let id = id_of(&customer);
    let b = store_b();

    // Act
    let foreign = app.get_as(&format!("/v1/customers/{id}"), &b).await;
    let foreign_embed = app
        .get_as(&format!("/v1/customers/{id}?embed=address"), &b)
        .await;
    let never = app.get_as("/v1/customers/987654321", &b).await;
    let by_email = app.lookup_email_as("private@example.com", &b).await;
    let list = app.get_as("/v1/customers?per_page=1000", &b).await;

    // Assert
    foreign.assert_not_found();
    foreign_embed.assert_not_found();
    never.assert_not_found();
    assert_eq!(foreign.body, never.body, "indistinguishable bodies");
    assert_eq!(foreign.header("content-type"), never.header("content-type"));
    assert!(by_email.is_empty());
    list.assert_status(200);
    assert_eq!(list.json(), json!([]));
    assert_eq!(list.header("x-total-count").as_deref(), Some("0"));
}

#[tokio::test]
async fn store_b_cannot_update_store_a_customers() {
    // Arrange
    let app = spawn_app().await;
    let customer = app
        .create_customer_ok(&customer_body("untouchable@example.com"))
        .await;
    let path = format!("/v1/customers/{}", customer["id"]);

    // Act
    let patch = app
        .patch_json_as(&path, &json!({"first_name": "Mallory"}), &store_b())
        .await;
    let never = app
        .patch_json_as(
            "/v1/customers/987654321",
            &json!({"first_name": "Mallory"}),
            &store_b(),
        )
        .await;

    // Assert
    patch.assert_not_found();
    assert_eq!(patch.body, never.body);
    assert_eq!(app.get(&path).await.json(), customer);
}

#[tokio::test]
async fn store_b_cannot_see_or_use_store_a_orders() {
    // Arrange
    let app = spawn_app().await;
    let b = store_b();
    let customer_id = id_of(
        &app.create_customer_ok(&customer_body("orders-a@example.com"))
            .await,
    );
    let order = app
        .create_order_ok(&json!({"customer_id": customer_id, "box_id": 217}))
        .await;
    let unknown_customer = 987_654_321;

    // Act
    let list = app
        .get_as(&format!("/v1/orders?customer_id={customer_id}"), &b)
        .await;
    let list_unknown = app
        .get_as(&format!("/v1/orders?customer_id={unknown_customer}"), &b)
        .await;
    let by_id = app.get_as(&format!("/v1/orders/{}", order["id"]), &b).await;
    let never = app.get_as("/v1/orders/987654321", &b).await;
    let create = app
        .post_json_as(
            "/v1/orders",
            &json!({"customer_id": customer_id, "box_id": 300}),
            &b,
        )
        .await;

    // Assert
    list.assert_status(422);
    assert_eq!(list.json(), json!({"errors": {"customer_id": [INVALID]}}));
    assert_eq!(list.body, list_unknown.body);
    by_id.assert_not_found();
    assert_eq!(by_id.body, never.body);
    create.assert_error_keys(&["customer_id"]);
    create.assert_field_error("customer_id", INVALID);
    assert_eq!(app.orders_of(customer_id).await.len(), 1);
}

#[tokio::test]
async fn store_a_catalogue_ids_are_invalid_for_store_b() {
    // Arrange
    let app = spawn_app().await;
    let b = store_b();
    let customer_b = app.create_customer_b_ok("catalogue-b@example.com").await;

    // Act
    let foreign_box = app
        .post_json_as(
            "/v1/orders",
            &json!({"customer_id": customer_b["id"], "box_id": 217}),
            &b,
        )
        .await;
    let foreign_items = app
        .post_json_as(
            "/v1/orders",
            &json!({"customer_id": customer_b["id"], "box_id": 300,
                    "exclusions": [240], "extras": [{"id": 28, "quantity": 1}]}),
            &b,
        )
        .await;
    let foreign_delivery = app
        .post_json_as(
            "/v1/customers",
            &json!({"first_name": "X", "email": "x@example.com", "delivery_service_id": 91,
                    "address": {"mobile_phone": "1"}}),
            &b,
        )
        .await;
    let own = app
        .post_json_as(
            "/v1/orders",
            &json!({"customer_id": customer_b["id"], "box_id": 300,
                    "exclusions": [400], "extras": [{"id": 50, "quantity": 3}]}),
            &b,
        )
        .await;

    // Assert
    foreign_box.assert_error_keys(&["box_id"]);
    foreign_box.assert_field_error("box_id", INVALID);
    foreign_items.assert_error_keys(&["exclusions", "extras[0].id"]);
    foreign_delivery.assert_error_keys(&["delivery_service_id"]);
    foreign_delivery.assert_field_error("delivery_service_id", INVALID);
    own.assert_status(201);
}

#[tokio::test]
async fn store_a_cannot_order_for_store_b_customers() {
    // Arrange
    let app = spawn_app().await;
    let customer_b = app.create_customer_b_ok("their@example.com").await;

    // Act
    let response = app
        .create_order(&json!({"customer_id": customer_b["id"], "box_id": 217}))
        .await;

    // Assert
    response.assert_error_keys(&["customer_id"]);
    response.assert_field_error("customer_id", INVALID);
}

#[tokio::test]
async fn the_same_email_may_exist_once_in_each_store() {
    // Arrange
    let app = spawn_app().await;
    let b = store_b();

    // Act
    let in_a = app
        .create_customer_ok(&customer_body("shared@example.com"))
        .await;
    let in_b = app
        .post_json_as("/v1/customers", &customer_body_b("Shared@Example.com"), &b)
        .await;
    let again_in_b = app
        .post_json_as("/v1/customers", &customer_body_b("shared@example.com"), &b)
        .await;

    // Assert
    in_b.assert_status(201);
    let in_b = in_b.json();
    assert_ne!(in_a["id"], in_b["id"]);
    assert_eq!(in_b["webstore_id"], "store-b");
    again_in_b.assert_error_keys(&["email"]);
    assert_eq!(app.lookup_email("shared@example.com").await, vec![in_a]);
    assert_eq!(
        app.lookup_email_as("shared@example.com", &b).await,
        vec![in_b]
    );
}

#[tokio::test]
async fn lists_hold_only_the_callers_customers() {
    // Arrange
    let app = spawn_app().await;
    let a1 = app
        .create_customer_ok(&customer_body("a1@example.com"))
        .await;
    let b1 = app.create_customer_b_ok("b1@example.com").await;
    let a2 = app
        .create_customer_ok(&customer_body("a2@example.com"))
        .await;

    // Act
    let list_a = app.get("/v1/customers").await;
    let list_b = app.get_as("/v1/customers", &store_b()).await;

    // Assert
    assert_eq!(list_a.json(), json!([a1, a2]));
    assert_eq!(list_a.header("x-total-count").as_deref(), Some("2"));
    assert_eq!(list_b.json(), json!([b1]));
    assert_eq!(list_b.header("x-total-count").as_deref(), Some("1"));
}
