//! Order schedules (start date, weekdays, frequency) and the delivery list a producer packs
//! from. Store A's Courier (91) delivers on Mondays and Thursdays, its Market Pickup (92) on
//! Tuesdays and Saturdays; store A's time zone is London. Dates are fixed (2027) so that the
//! answers do not depend on today, except where the defaults are the point.

use serde_json::{json, Value};

use crate::helpers::{
    customer_body, id_of, spawn_app, store_b, DataDir, Launch, SoftAsserts, TestApp, BLANK, INVALID,
};

const NOT_A_DELIVERY_DAY: &str = "is not a delivery day of the delivery service";

async fn customer(app: &TestApp, email: &str, delivery_service_id: u64) -> i64 {
    let mut body = customer_body(email);
    body["delivery_service_id"] = json!(delivery_service_id);
    id_of(&app.create_customer_ok(&body).await)
}

fn order(customer_id: i64, extra: Value) -> Value {
    let mut body = json!({"customer_id": customer_id, "box_id": 217});
    for (key, value) in extra.as_object().unwrap() {
        body[key] = value.clone();
    }
    body
}

#[tokio::test]
async fn every_schedule_rule_is_a_422_naming_its_field() {
    // Arrange
    let app = spawn_app().await;
    let courier = customer(&app, "rules@example.com", 91).await;
    let cases: Vec<(Value, Vec<(&str, &str)>)> = vec![
        (
            json!({"start_date": "2027-02-30"}),
            vec![("start_date", INVALID)],
        ),
        (
            json!({"start_date": "next thursday"}),
            vec![("start_date", INVALID)],
        ),
        (
            json!({"start_date": 20270104}),
            vec![("start_date", INVALID)],
        ),
        (
            json!({"start_date": "2027-1-4"}),
            vec![("start_date", INVALID)],
        ),
        (
            json!({"week_days": [7], "frequency": "weekly"}),
            vec![("week_days", INVALID)],
        ),
        (
            json!({"week_days": ["x"], "frequency": "weekly"}),
            vec![("week_days", INVALID)],
        ),
        (
            json!({"week_days": 1, "frequency": "weekly"}),
            vec![("week_days", INVALID)],
        ),
        (
            json!({"week_days": [1, 1], "frequency": "weekly"}),
            vec![("week_days", INVALID)],
        ),
        // single: the day itself must be a delivery day, and the days just its weekday.
        (
            json!({"start_date": "2027-01-05"}),
            vec![("start_date", NOT_A_DELIVERY_DAY)],
        ),
        (
            json!({"start_date": "2027-01-07", "week_days": [1]}),
            vec![("week_days", INVALID)],
        ),
        (
            json!({"start_date": "2027-01-07", "week_days": []}),
            vec![("week_days", INVALID)],
        ),
        // weekly and fortnightly: the days must be there, and delivery days.
        (
            json!({"frequency": "weekly", "week_days": []}),
            vec![("week_days", BLANK)],
        ),
        (
            json!({"frequency": "fortnightly", "week_days": [1, 2]}),
            vec![("week_days", NOT_A_DELIVERY_DAY)],
        ),
        (
            json!({"frequency": "weekly", "start_date": "2027-01-05"}),
            vec![("start_date", NOT_A_DELIVERY_DAY)],
        ),
        // Every failing field at once.
        (
            json!({"box_id": 999, "start_date": "soon", "week_days": [9], "frequency": "weekly"}),
            vec![
                ("box_id", INVALID),
                ("start_date", INVALID),
                ("week_days", INVALID),
            ],
        ),
    ];
    let mut soft = SoftAsserts::default();

    for (fields, expected) in cases {
        // Act
        let response = app.create_order(&order(courier, fields.clone())).await;

        // Assert
        soft.check(&fields.to_string(), || {
            let want: Vec<&str> = expected.iter().map(|(field, _)| *field).collect();
            response.assert_error_keys(&want);
            for (field, message) in &expected {
                response.assert_field_error(field, message);
            }
        });
    }
    soft.finish();
    assert!(
        app.orders_of(courier).await.is_empty(),
        "nothing was stored"
    );
}

#[tokio::test]
async fn schedules_are_echoed_on_create_get_and_list_and_after_a_restart() {
    // Arrange
    let dir = DataDir::new();
    let app = Launch::new().on(&dir).spawn().await;
    let courier = customer(&app, "echo@example.com", 91).await;
    let sent = [
        (
            json!({"frequency": "single", "start_date": "2027-01-07"}),
            "2027-01-07",
            json!([4]),
        ),
        (
            json!({"frequency": "weekly", "start_date": "2027-01-05", "week_days": ["1", 4]}),
            "2027-01-05",
            json!([1, 4]),
        ),
        (
            json!({"frequency": "fortnightly", "start_date": "2027-01-04"}),
            "2027-01-04",
            json!([1]),
        ),
        // History: carts replay old orders.
        (
            json!({"start_date": "2020-01-02", "week_days": [4]}),
            "2020-01-02",
            json!([4]),
        ),
    ];

    // Act + Assert: create and get
    let mut ids = Vec::new();
    for (fields, start_date, week_days) in &sent {
        let created = app.create_order_ok(&order(courier, fields.clone())).await;
        assert_eq!(created["start_date"], *start_date, "{fields}");
        assert_eq!(created["week_days"], *week_days, "{fields}");
        let id = id_of(&created);
        let fetched = app.get(&format!("/v1/orders/{id}")).await.json();
        assert_eq!(fetched, created);
        ids.push((id, start_date.to_string(), week_days.clone()));
    }
    let check_list = |listed: Vec<Value>| {
        assert_eq!(listed.len(), ids.len());
        for (order, (id, start_date, week_days)) in listed.iter().zip(&ids) {
            assert_eq!(id_of(order), *id);
            assert_eq!(order["start_date"], *start_date);
            assert_eq!(order["week_days"], *week_days);
        }
    };
    check_list(app.orders_of(courier).await);
    drop(app);

    // After a restart.
    let app = Launch::new().on(&dir).spawn().await;
    check_list(app.orders_of(courier).await);
}

/// The first date after today in London that is a Monday or a Thursday (or, across a
/// midnight between the test and the server, the one after that).
fn next_courier_days() -> [String; 2] {
    let today = jiff::Timestamp::now()
        .to_zoned_datetime(jiff::tz::TimeZone::get("Europe/London").unwrap())
        .date();
    let mut found = Vec::new();
    let mut day = today;
    while found.len() < 2 {
        day = day.tomorrow().unwrap();
        let weekday = day.weekday().to_sunday_zero_offset();
        if weekday == 1 || weekday == 4 {
            found.push(day.to_string());
        }
    }
    [found[0].clone(), found[1].clone()]
}

#[tokio::test]
async fn without_a_schedule_an_order_starts_on_the_next_delivery_day_after_today() {
    // Arrange
    let app = spawn_app().await;
    let courier = customer(&app, "defaults@example.com", 91).await;

    // Act
    let plain = app.create_order_ok(&order(courier, json!({}))).await;
    let weekly = app
        .create_order_ok(&order(courier, json!({"frequency": "weekly"})))
        .await;

    // Assert
    let expected = next_courier_days();
    for created in [&plain, &weekly] {
        let start = created["start_date"].as_str().unwrap().to_string();
        assert!(
            expected.contains(&start),
            "{start} is not one of {expected:?}"
        );
        let weekday = start
            .parse::<jiff::civil::Date>()
            .unwrap()
            .weekday()
            .to_sunday_zero_offset();
        assert_eq!(created["week_days"], json!([weekday]));
    }
}

#[tokio::test]
async fn the_ruby_clients_order_gets_a_201_and_its_schedule_back() {
    // Arrange: the order as the original system's Ruby client posts it.
    let app = spawn_app().await;
    let courier = customer(&app, "ruby@example.com", 91).await;
    let body = json!({"order": {
        "customer_id": courier.to_string(), "box_id": "217", "frequency": "weekly",
        "start_date": "2027-01-04", "week_days": ["1", "4"],
        "payment_method": "cash_on_delivery", "extras_one_off": "false",
        "exclusions": [], "substitutions": [], "extras": [],
    }});

    // Act
    let created = app.create_order(&body).await;

    // Assert
    created.assert_status(201);
    let created = created.json();
    assert_eq!(created["start_date"], "2027-01-04");
    assert_eq!(created["week_days"], json!([1, 4]));
    assert_eq!(created["frequency"], "weekly");
}

async fn deliveries(app: &TestApp, date: &str) -> Vec<Value> {
    let response = app
        .get(&format!("/v1/deliveries?date={date}&per_page=1000"))
        .await;
    response.assert_status(200);
    response.json().as_array().cloned().unwrap()
}

fn order_ids(list: &[Value]) -> Vec<i64> {
    list.iter()
        .map(|entry| entry["order_id"].as_i64().unwrap())
        .collect()
}

#[tokio::test]
async fn the_delivery_list_follows_each_frequency_and_sends_one_off_extras_once() {
    // Arrange: Monday 2027-01-04 is the start of everything.
    let app = spawn_app().await;
    let ann = customer(&app, "ann@example.com", 91).await;
    let extras = json!([{"id": 28, "quantity": 2}]);
    let single = id_of(
        &app.create_order_ok(&order(ann, json!({"start_date": "2027-01-07"})))
            .await,
    );
    let weekly = id_of(
        &app.create_order_ok(&order(
            ann,
            json!({"frequency": "weekly", "start_date": "2027-01-04", "week_days": [1, 4],
                   "extras": extras, "extras_one_off": true, "exclusions": [240]}),
        ))
        .await,
    );
    let fortnightly = id_of(
        &app.create_order_ok(&order(
            ann,
            json!({"frequency": "fortnightly", "start_date": "2027-01-04", "week_days": [1],
                   "extras": extras}),
        ))
        .await,
    );

    // Act + Assert: two weeks of dates.
    let expected: [(&str, Vec<i64>); 7] = [
        ("2027-01-03", vec![]),
        ("2027-01-04", vec![weekly, fortnightly]),
        ("2027-01-05", vec![]),
        ("2027-01-07", vec![single, weekly]),
        ("2027-01-11", vec![weekly]),
        ("2027-01-14", vec![weekly]),
        ("2027-01-18", vec![weekly, fortnightly]),
    ];
    for (date, orders) in &expected {
        let list = deliveries(&app, date).await;
        assert_eq!(order_ids(&list), *orders, "{date}");
        for entry in &list {
            assert_eq!(entry["date"], *date);
        }
    }

    // One-off extras come with the first delivery only; others with every delivery.
    let first = deliveries(&app, "2027-01-04").await;
    let entry =
        |list: &[Value], id: i64| list.iter().find(|e| e["order_id"] == id).cloned().unwrap();
    let weekly_first = entry(&first, weekly);
    assert_eq!(
        weekly_first["extras"],
        json!([{"id": 28, "name": "Apple Juice", "unit": "4 litres", "quantity": 2}])
    );
    assert_eq!(
        weekly_first["exclusions"],
        json!([{"id": 240, "name": "Apple (Red)"}])
    );
    assert_eq!(entry(&first, fortnightly)["extras"][0]["quantity"], 2);
    let later = deliveries(&app, "2027-01-18").await;
    assert_eq!(entry(&later, weekly)["extras"], json!([]));
    assert_eq!(entry(&later, fortnightly)["extras"][0]["quantity"], 2);

    // The entry's other fields.
    let keys: Vec<&str> = weekly_first
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "date",
            "order_id",
            "customer_id",
            "customer_number",
            "customer_name",
            "delivery_service_id",
            "box_id",
            "box_name",
            "exclusions",
            "substitutions",
            "extras",
            "price",
            "status",
            "address"
        ]
    );
    assert_eq!(weekly_first["customer_id"], ann);
    assert_eq!(weekly_first["customer_number"], "0001");
    assert_eq!(weekly_first["customer_name"], "Joe Dalton");
    assert_eq!(weekly_first["delivery_service_id"], 91);
    assert_eq!(weekly_first["box_name"], "5kg Box");
    assert_eq!(weekly_first["address"]["address_1"], "1 My Street");
    assert!(weekly_first["address"]
        .as_object()
        .unwrap()
        .contains_key("delivery_note"));
}

#[tokio::test]
async fn the_list_is_ordered_by_service_then_customer_number_then_order_and_paginated() {
    // Arrange: customers of both services, created out of service order.
    let app = spawn_app().await;
    let pickup_1 = customer(&app, "p1@example.com", 92).await;
    let courier_1 = customer(&app, "c1@example.com", 91).await;
    let courier_2 = customer(&app, "c2@example.com", 91).await;
    // Saturday 2027-01-09 is a pickup day; Thursday 2027-01-07 a courier day. A weekly
    // order on both days of each service's customers.
    let mut by_customer = Vec::new();
    for (who, days) in [(courier_2, [1, 4]), (pickup_1, [2, 6]), (courier_1, [1, 4])] {
        for _ in 0..2 {
            let created = app
                .create_order_ok(&order(
                    who,
                    json!({"frequency": "weekly", "start_date": "2027-01-01", "week_days": days}),
                ))
                .await;
            by_customer.push((who, id_of(&created)));
        }
    }

    // Act
    let thursday = deliveries(&app, "2027-01-07").await;
    let saturday = deliveries(&app, "2027-01-09").await;

    // Assert: courier customers by number, each one's orders by id.
    let of = |who: i64| -> Vec<i64> {
        by_customer
            .iter()
            .filter(|(c, _)| *c == who)
            .map(|(_, o)| *o)
            .collect()
    };
    assert_eq!(
        order_ids(&thursday),
        [of(courier_1), of(courier_2)].concat()
    );
    assert_eq!(order_ids(&saturday), of(pickup_1));

    // The filter by delivery service, and its refusal of another webstore's service.
    let only_92 = app
        .get("/v1/deliveries?date=2027-01-07&delivery_service_id=92")
        .await
        .json();
    assert_eq!(only_92, json!([]));
    let response = app
        .get("/v1/deliveries?date=2027-01-07&delivery_service_id=95")
        .await;
    response.assert_error_keys(&["delivery_service_id"]);

    // Pages: X-Total-Count, Link, and [] past the end.
    let page = app
        .get("/v1/deliveries?date=2027-01-07&per_page=3&page=1&delivery_service_id=91")
        .await;
    page.assert_status(200);
    assert_eq!(page.header("x-total-count").as_deref(), Some("4"));
    let link = page.header("link").unwrap();
    assert!(
        link.contains("</v1/deliveries?page=2&per_page=3&date=2027-01-07&delivery_service_id=91>; rel=\"next\""),
        "{link}"
    );
    assert_eq!(order_ids(page.json().as_array().unwrap()).len(), 3);
    let second = app
        .get("/v1/deliveries?date=2027-01-07&per_page=3&page=2")
        .await
        .json();
    assert_eq!(
        order_ids(second.as_array().unwrap()),
        order_ids(&thursday)[3..]
    );
    let past = app
        .get("/v1/deliveries?date=2027-01-07&per_page=3&page=9")
        .await
        .json();
    assert_eq!(past, json!([]));
}

#[tokio::test]
async fn later_pages_follow_every_change_made_since_the_first() {
    // Arrange: three courier customers with a Thursday order each, and the first page read
    // (which sorts the list once and keeps it).
    let app = spawn_app().await;
    let mut who = Vec::new();
    let mut placed = Vec::new();
    for n in 0..3 {
        let customer_id = customer(&app, &format!("kept{n}@example.com"), 91).await;
        let body = order(customer_id, json!({"start_date": "2027-01-07"}));
        placed.push(id_of(&app.create_order_ok(&body).await));
        who.push(customer_id);
    }
    let page = |n: u32| format!("/v1/deliveries?date=2027-01-07&per_page=2&page={n}");
    let first = app.get(&page(1)).await;
    assert_eq!(first.header("x-total-count").as_deref(), Some("3"));
    assert_eq!(order_ids(first.json().as_array().unwrap()), placed[..2]);

    // Act + Assert: a new order shows on the next page and in the count.
    let body = order(who[0], json!({"start_date": "2027-01-07"}));
    let late = id_of(&app.create_order_ok(&body).await);
    let all = deliveries(&app, "2027-01-07").await;
    assert_eq!(order_ids(&all), [placed[0], late, placed[1], placed[2]]);
    let second = app.get(&page(2)).await;
    assert_eq!(second.header("x-total-count").as_deref(), Some("4"));
    assert_eq!(order_ids(second.json().as_array().unwrap()), placed[1..]);

    // A customer moving to the pickup service moves to the end and out of the courier list.
    let moved = app
        .patch_json(
            &format!("/v1/customers/{}", who[0]),
            &json!({"delivery_service_id": 92}),
        )
        .await;
    moved.assert_status(200);
    let all = deliveries(&app, "2027-01-07").await;
    assert_eq!(order_ids(&all), [placed[1], placed[2], placed[0], late]);
    let couriers = app
        .get("/v1/deliveries?date=2027-01-07&delivery_service_id=91")
        .await
        .json();
    assert_eq!(order_ids(couriers.as_array().unwrap()), placed[1..]);

    // A new address shows at once (customers are read for each page).
    let renamed = app
        .patch_json(
            &format!("/v1/customers/{}", who[1]),
            &json!({"address": {"address_1": "2 New Road", "city": "London"}}),
        )
        .await;
    renamed.assert_status(200);
    let first = app.get(&page(1)).await.json();
    assert_eq!(first[0]["address"]["address_1"], "2 New Road");
}

#[tokio::test]
async fn the_date_is_required_and_checked() {
    let app = spawn_app().await;
    let cases = [
        ("/v1/deliveries", vec![("date", BLANK)]),
        ("/v1/deliveries?date=", vec![("date", BLANK)]),
        ("/v1/deliveries?date=2027-13-01", vec![("date", INVALID)]),
        ("/v1/deliveries?date=tomorrow", vec![("date", INVALID)]),
        (
            "/v1/deliveries?date=x&per_page=0&delivery_service_id=abc",
            vec![
                ("date", INVALID),
                ("per_page", ""),
                ("delivery_service_id", INVALID),
            ],
        ),
    ];
    for (path, expected) in cases {
        let response = app.get(path).await;
        let want: Vec<&str> = expected.iter().map(|(field, _)| *field).collect();
        response.assert_error_keys(&want);
        for (field, message) in expected {
            if !message.is_empty() {
                response.assert_field_error(field, message);
            }
        }
    }
}

#[tokio::test]
async fn the_list_comes_as_csv_for_a_packing_list() {
    // Arrange
    let app = spawn_app().await;
    let mut body = customer_body("csv@example.com");
    body["last_name"] = json!("O'Brien, Jr.");
    body["address"]["delivery_note"] = json!("Leave by the \"blue\" door");
    let who = id_of(&app.create_customer_ok(&body).await);
    let placed = app
        .create_order_ok(&order(
            who,
            json!({"start_date": "2027-01-07", "exclusions": [240, 241],
                   "extras": [{"id": 28, "quantity": 1}]}),
        ))
        .await;

    // Act
    let response = app
        .send(
            reqwest::Method::GET,
            "/v1/deliveries?date=2027-01-07",
            Some(&app.creds),
            None,
            &[("Accept", "text/csv")],
        )
        .await;

    // Assert
    response.assert_status(200);
    assert_eq!(
        response.header("content-type").as_deref(),
        Some("text/csv; charset=utf-8")
    );
    assert_eq!(response.header("x-total-count").as_deref(), Some("1"));
    let mut reader = csv::Reader::from_reader(response.body.as_slice());
    let header: Vec<String> = reader
        .headers()
        .unwrap()
        .iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(
        header,
        [
            "date",
            "order_id",
            "customer_id",
            "customer_number",
            "customer_name",
            "delivery_service_id",
            "box_id",
            "box_name",
            "exclusions",
            "substitutions",
            "extras",
            "price",
            "status",
            "address_1",
            "address_2",
            "suburb",
            "city",
            "postcode",
            "delivery_note",
            "home_phone",
            "mobile_phone",
            "work_phone"
        ]
    );
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 1);
    let row: Vec<&str> = rows[0].iter().collect();
    assert_eq!(row[0], "2027-01-07");
    assert_eq!(row[1], id_of(&placed).to_string());
    assert_eq!(row[4], "Joe O'Brien, Jr.");
    assert_eq!(row[7], "5kg Box");
    assert_eq!(row[8], "Apple (Red); Banana");
    assert_eq!(row[10], "Apple Juice (4 litres) x 1");
    assert_eq!(row[12], "pending");
    assert_eq!(row[13], "1 My Street");
    assert_eq!(row[18], "Leave by the \"blue\" door");
}

#[tokio::test]
async fn another_webstores_orders_never_appear() {
    // Arrange: store B delivers Mondays, Wednesdays and Fridays.
    let app = spawn_app().await;
    let a = customer(&app, "a@example.com", 91).await;
    app.create_order_ok(&order(a, json!({"start_date": "2027-01-04"})))
        .await;
    let b = app.create_customer_b_ok("b@example.com").await;
    let b_order = app
        .post_json_as(
            "/v1/orders",
            &json!({"customer_id": b["id"], "box_id": 300, "start_date": "2027-01-04"}),
            &store_b(),
        )
        .await;
    b_order.assert_status(201);

    // Act
    let seen_by_a = deliveries(&app, "2027-01-04").await;
    let seen_by_b = app
        .get_as("/v1/deliveries?date=2027-01-04", &store_b())
        .await
        .json();

    // Assert
    assert_eq!(seen_by_a.len(), 1);
    assert_eq!(seen_by_a[0]["customer_id"], a);
    assert_eq!(seen_by_b.as_array().map(Vec::len), Some(1));
    assert_eq!(seen_by_b[0]["order_id"], b_order.json()["id"]);
}

#[tokio::test]
async fn the_list_survives_a_restart() {
    // Arrange
    let dir = DataDir::new();
    let app = Launch::new().on(&dir).spawn().await;
    let who = customer(&app, "restart@example.com", 91).await;
    let weekly = id_of(
        &app.create_order_ok(&order(
            who,
            json!({"frequency": "weekly", "start_date": "2027-01-04", "week_days": [1, 4]}),
        ))
        .await,
    );
    drop(app);

    // Act
    let app = Launch::new().on(&dir).spawn().await;

    // Assert
    assert_eq!(order_ids(&deliveries(&app, "2027-01-07").await), [weekly]);
    assert_eq!(order_ids(&deliveries(&app, "2027-03-01").await), [weekly]);
}
