//! Catalogue reads: boxes (with `embed`), delivery services and the
//! webstore settings, each as section 4 of the contract shapes them.

use serde_json::{json, Value};

use crate::helpers::{
    default_catalogue, sha256_hex, spawn_app, store_b, STORE_A_KEY, STORE_A_SECRET, STORE_B_KEY,
    STORE_B_SECRET,
};

fn ids(list: &Value) -> Vec<i64> {
    list.as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"))
        .iter()
        .map(|v| v["id"].as_i64().unwrap_or_else(|| panic!("no id: {v}")))
        .collect()
}

fn sorted(mut v: Vec<i64>) -> Vec<i64> {
    v.sort();
    v
}

#[tokio::test]
async fn box_list_leaves_out_hidden_boxes() {
    // Arrange
    let app = spawn_app().await;

    // Act
    let response = app.get("/v1/boxes").await;

    // Assert
    response.assert_status(200);
    assert_eq!(sorted(ids(&response.json())), vec![217, 218, 219]);
}

#[tokio::test]
async fn a_box_has_the_section_4_shape() {
    // Arrange
    let app = spawn_app().await;

    // Act
    let response = app.get("/v1/boxes/217").await;

    // Assert
    response.assert_status(200);
    let b = response.json();
    assert_eq!(b["id"], 217);
    assert_eq!(b["name"], "5kg Box");
    assert_eq!(b["description"], "The 5kg Box");
    assert_eq!(b["price"], "30.00");
    assert_eq!(b["likes"], true);
    assert_eq!(b["dislikes"], true);
    assert_eq!(b["customizable"], true);
    assert_eq!(b["extras_allowed"], true);
    assert_eq!(b["extras_limit"], -1);
    assert_eq!(b["extras_unlimited"], true);
    assert_eq!(b["exclusions_limit"], 3);
    assert_eq!(b["exclusions_unlimited"], false);
    assert_eq!(b["substitutions_limit"], 2);
    assert_eq!(b["substitutions_unlimited"], false);
    assert!(b["updated_at"].is_i64(), "updated_at is an integer: {b}");
    for child in ["extras", "box_items", "images"] {
        assert!(b.get(child).is_none(), "{child} only when embedded: {b}");
    }
}

#[tokio::test]
async fn unlimited_and_customizable_follow_the_limits_and_flags() {
    // Arrange
    let app = spawn_app().await;

    // Act
    let fixed = app.get("/v1/boxes/218").await.json();
    let flexi = app.get("/v1/boxes/219").await.json();

    // Assert
    assert_eq!(fixed["customizable"], false);
    assert_eq!(fixed["likes"], false);
    assert_eq!(fixed["extras_allowed"], false);
    assert_eq!(fixed["price"], "18.00");
    assert_eq!(fixed["extras_unlimited"], false);
    assert_eq!(flexi["customizable"], true);
    assert_eq!(flexi["price"], "22.50");
    assert_eq!(flexi["extras_limit"], 2);
    assert_eq!(flexi["extras_unlimited"], false);
    assert_eq!(flexi["exclusions_limit"], -1);
    assert_eq!(flexi["exclusions_unlimited"], true);
    assert_eq!(flexi["substitutions_limit"], -1);
    assert_eq!(flexi["substitutions_unlimited"], true);
}

#[tokio::test]
async fn hidden_unknown_and_foreign_boxes_are_404() {
    // Arrange
    let app = spawn_app().await;

    for path in ["/v1/boxes/220", "/v1/boxes/999", "/v1/boxes/300"] {
        // Act
        let response = app.get(path).await;

        // Assert
        response.assert_not_found();
    }
}

#[tokio::test]
async fn embed_adds_extras_box_items_and_images() {
    // Arrange
    let app = spawn_app().await;

    // Act
    let extras = app.get("/v1/boxes/217?embed=extras").await.json();
    let items = app.get("/v1/boxes/217?embed=box_items").await.json();
    let images = app.get("/v1/boxes/217?embed=images").await.json();
    let all = app
        .get("/v1/boxes/217?embed=extras,box_items,images,bogus")
        .await
        .json();

    // Assert
    assert_eq!(sorted(ids(&extras["extras"])), vec![28, 29]);
    let juice = extras["extras"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == 28)
        .unwrap();
    assert_eq!(
        juice,
        &json!({"id": 28, "name": "Apple Juice", "unit": "4 litres", "price": "7.50"})
    );
    assert!(extras.get("box_items").is_none());
    assert_eq!(
        sorted(ids(&items["box_items"])),
        vec![240, 241, 242, 243, 244]
    );
    let apple = items["box_items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == 240)
        .unwrap();
    assert_eq!(apple, &json!({"id": 240, "name": "Apple (Red)"}));
    assert_eq!(
        images["images"],
        json!({"thumb": "https://example.com/217-thumb.jpg"})
    );
    assert_eq!(sorted(ids(&all["extras"])), vec![28, 29]);
    assert_eq!(sorted(ids(&all["box_items"])).len(), 5);
    assert!(all["images"].is_object());
}

#[tokio::test]
async fn embed_works_on_the_list_too() {
    // Arrange
    let app = spawn_app().await;

    // Act
    let list = app.get("/v1/boxes?embed=extras").await.json();

    // Assert
    for b in list.as_array().unwrap() {
        let expected: Vec<i64> = match b["id"].as_i64().unwrap() {
            217 => vec![28, 29],
            218 => vec![],
            219 => vec![28, 29, 30],
            other => panic!("unexpected box {other}"),
        };
        assert_eq!(sorted(ids(&b["extras"])), expected, "box {}", b["id"]);
    }
}

#[tokio::test]
async fn delivery_services_have_days_and_fee_with_the_currency_symbol() {
    // Arrange
    let app = spawn_app().await;

    // Act
    let list = app.get("/v1/delivery_services").await;
    let courier = app.get("/v1/delivery_services/91").await;
    let pickup = app.get("/v1/delivery_services/92").await.json();
    let bike = app.get_as("/v1/delivery_services/95", &store_b()).await;

    // Assert
    list.assert_status(200);
    assert_eq!(sorted(ids(&list.json())), vec![91, 92]);
    courier.assert_status(200);
    let courier = courier.json();
    assert_eq!(
        courier,
        json!({"id": 91, "name": "Courier", "instructions": "Instructions for Courier",
               "fee": "5.00", "pickup_point": false, "mon": true, "tue": false,
               "wed": false, "thu": true, "fri": false, "sat": false, "sun": false,
               "name_days_and_fee": "Courier - Mon, Thu - £5.00"})
    );
    assert_eq!(
        pickup["name_days_and_fee"],
        "Market Pickup - Tue, Sat - £2.50"
    );
    assert_eq!(pickup["pickup_point"], true);
    bike.assert_status(200);
    assert_eq!(
        bike.json()["name_days_and_fee"],
        "Bike Courier - Mon, Wed, Fri - €3.50"
    );
}

#[tokio::test]
async fn foreign_or_unknown_delivery_services_are_404() {
    // Arrange
    let app = spawn_app().await;

    // Act
    let foreign = app.get("/v1/delivery_services/95").await;
    let unknown = app.get("/v1/delivery_services/12345").await;
    let list_b = app.get_as("/v1/delivery_services", &store_b()).await;

    // Assert
    foreign.assert_not_found();
    unknown.assert_not_found();
    assert_eq!(ids(&list_b.json()), vec![95]);
}

#[tokio::test]
async fn webstore_returns_the_callers_settings_without_secrets() {
    // Arrange
    let app = spawn_app().await;
    let catalogue = default_catalogue();

    // Act
    let a = app.get("/v1/webstore").await;
    let b = app.get_as("/v1/webstore", &store_b()).await;

    // Assert
    for (response, index) in [(a, 0), (b, 1)] {
        response.assert_status(200);
        let settings = response.json();
        let mut expected = catalogue["webstores"][index].clone();
        let expected = expected.as_object_mut().unwrap();
        for child in [
            "api_keys",
            "delivery_services",
            "box_items",
            "extras",
            "boxes",
        ] {
            expected.remove(child);
        }
        for (key, value) in expected.iter() {
            assert_eq!(&settings[key], value, "webstore field {key}");
        }
        let text = response.text();
        for secret in [
            STORE_A_KEY,
            STORE_A_SECRET,
            STORE_B_KEY,
            STORE_B_SECRET,
            &sha256_hex(STORE_A_SECRET),
            &sha256_hex(STORE_B_SECRET),
            "api_keys",
            "secret",
        ] {
            assert!(!text.contains(secret), "webstore leaks {secret:?}: {text}");
        }
    }
}

#[tokio::test]
async fn store_b_sees_only_its_own_catalogue() {
    // Arrange
    let app = spawn_app().await;
    let b = store_b();

    // Act
    let boxes = app.get_as("/v1/boxes?embed=extras,box_items", &b).await;
    let store_a_box = app.get_as("/v1/boxes/217", &b).await;

    // Assert
    boxes.assert_status(200);
    let boxes = boxes.json();
    assert_eq!(ids(&boxes), vec![300]);
    assert_eq!(ids(&boxes[0]["extras"]), vec![50]);
    assert_eq!(ids(&boxes[0]["box_items"]), vec![400]);
    assert_eq!(boxes[0]["price"], "25.00");
    store_a_box.assert_not_found();
}
