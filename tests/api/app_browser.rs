//! The producers' web app (`/app`) in a real browser: Debian's headless Chromium, driven
//! through chromedriver (`helpers/browser.rs`), against the real binary. Signing in (right,
//! wrong, unknown, throttled), the day page against `GET /v1/deliveries` (rows and routes in
//! the API's order, the packing summary's counts, the CSV link's bytes), isolation between
//! the webstores' producers, a week whose orders were paused, skipped, cancelled and halted
//! (each day's withheld deliveries counted per reason), signing out, a phone's width,
//! printing (print media and the PDF Chromium makes, through the DevTools protocol),
//! axe-core on every page, and all of it without JavaScript. `tests/api/app.rs` checks the same app over plain HTTP; here the point
//! is what a browser does with it: its cookies, forms, redirects, layout and print.
//!
//! Store A's Courier (91) and Van North (93) deliver on Mondays and Thursdays, its Market
//! Pickup (92) on Tuesdays and Saturdays; store B's Bike Courier (95) on Mondays, Wednesdays
//! and Fridays ([`producers_catalogue`]). Monday [`DAY`] has deliveries of both stores, on
//! two routes of store A; Saturday [`EMPTY_DAY`] none.
//!
//! Without Chromium, chromedriver or axe-core (`.ci/axe-core`) each test says SKIPPED, and
//! fails under `BOXSUB_REQUIRE_ALL_TESTS=1` (which `.ci/run` sets). With
//! `BOXSUB_SCREENSHOTS=1`, the day and phone tests write `docs/app-day-desktop.png` and
//! `docs/app-day-phone.png`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use fantoccini::cookies::Cookie;
use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{
    axe_core_source, customer_body, customer_body_b, enc, id_of, producers_catalogue, store_a,
    store_b, Browser, BrowserOptions, Creds, DataDir, Launch, TestApp, Viewport, PRODUCER_A,
    PRODUCER_B,
};

/// A Monday with deliveries of both stores (store A's on two routes).
const DAY: &str = "2027-01-11";
/// Store A's delivery days around [`DAY`]: the Saturday before, the Tuesday after.
const DAY_AROUND_A: (&str, &str) = ("2027-01-09", "2027-01-12");
/// Store B's: the Friday before, the Wednesday after.
const DAY_AROUND_B: (&str, &str) = ("2027-01-08", "2027-01-13");
/// A Saturday (store A's Market Pickup) that nobody ordered for.
const EMPTY_DAY: &str = "2027-01-16";
/// The week of [`DAY`] (from its Sunday).
const WEEK: &str = "2027-01-10";
/// The session cookie.
const SESSION: &str = "boxsub_session";
/// The environment variable that makes the tests write the documentation's screenshots.
const SCREENSHOTS: &str = "BOXSUB_SCREENSHOTS";

/// A server with the producers' catalogue (its data directory lives as long as it).
async fn producers_app() -> (DataDir, TestApp) {
    let dir = DataDir::with_catalogue(producers_catalogue());
    let app = Launch::new().on(&dir).spawn().await;
    (dir, app)
}

/// A store-A customer on `service`, with a name and an address of its own.
async fn customer_a(app: &TestApp, service: u64, name: (&str, &str), address: Value) -> i64 {
    let email = format!("{}@example.com", name.0.to_lowercase());
    let mut body = customer_body(&email);
    body["first_name"] = json!(name.0);
    body["last_name"] = json!(name.1);
    body["delivery_service_id"] = json!(service);
    body["address"] = address;
    id_of(&app.create_customer_ok(&body).await)
}

/// A store-A order; `fields` are added to a box id.
async fn order_a(app: &TestApp, customer: i64, box_id: u64, fields: Value) -> i64 {
    let mut body = json!({"customer_id": customer, "box_id": box_id});
    for (key, value) in fields.as_object().expect("fields are an object") {
        body[key] = value.clone();
    }
    id_of(&app.create_order_ok(&body).await)
}

/// Weekly on Mondays (and `more` weekdays) from the Monday before [`DAY`].
fn weekly(more: &[u8]) -> Value {
    let days: Vec<u8> = std::iter::once(1).chain(more.iter().copied()).collect();
    json!({"frequency": "weekly", "start_date": "2027-01-04", "week_days": days})
}

/// The names the seeded customers of each store have, to look for in the other's pages.
struct Seeded {
    names_a: Vec<&'static str>,
    names_b: Vec<&'static str>,
}

/// Deliveries on [`DAY`]: store A's on the Courier and Van North with exclusions,
/// substitutions and extras (one-off extras that went with the week before's delivery, which
/// the API leaves out now), a customer with a long name and an unbroken 58-letter town, and
/// orders that do not fall on the day; store B's on its Bike Courier.
async fn seed_the_day(app: &TestApp) -> Seeded {
    let address = |line: &str, city: &str, note: Option<&str>, phone: &str| {
        json!({"address_1": line, "city": city, "postcode": "SE5 9NR",
               "delivery_note": note, "mobile_phone": phone})
    };
    let margaret = customer_a(
        app,
        91,
        ("Margaret", "Oyelaran-Whitfield"),
        address(
            "Flat 4, 27 Coldharbour Lane",
            "London",
            Some("Leave with the florist next door if nobody answers"),
            "07700 900123",
        ),
    )
    .await;
    let tomasz = customer_a(
        app,
        91,
        ("Tomasz", "Wisniewski"),
        address("112 Brixton Hill", "London", None, "07700 900456"),
    )
    .await;
    let wilhelmina = customer_a(
        app,
        93,
        ("Wilhelmina", "Featherstonehaugh-Cholmondeley-Fotheringay"),
        address(
            "The Old Cider Mill and Bottling Works, Unit 7b, Long Ashton Business Park",
            "Llanfairpwllgwyngyllgogerychwyrndrobwllllantysiliogogogoch",
            Some(
                "Ring the bell twice; the side gate code is 4711; boxes go in the cool store \
                 behind the potting shed, never in the sun",
            ),
            "07700 900789",
        ),
    )
    .await;
    let priya = customer_a(
        app,
        93,
        ("Priya", "Raman"),
        address("9 Camberwell Grove", "London", None, "07700 900321"),
    )
    .await;
    let daniel = customer_a(
        app,
        92,
        ("Daniel", "Okafor"),
        address("3 Market Row", "London", None, "07700 900654"),
    )
    .await;

    // On the day.
    let mut courier = weekly(&[4]);
    courier["exclusions"] = json!([240, 241]);
    courier["substitutions"] = json!([242]);
    courier["extras"] = json!([{"id": 28, "quantity": 2}]);
    order_a(app, margaret, 217, courier).await;
    order_a(app, tomasz, 218, json!({"start_date": DAY})).await;
    let mut one_off = weekly(&[]);
    one_off["extras"] = json!([{"id": 29, "quantity": 1}, {"id": 30, "quantity": 1}]);
    one_off["extras_one_off"] = json!(true);
    order_a(app, tomasz, 219, one_off).await;
    order_a(
        app,
        wilhelmina,
        217,
        json!({"frequency": "fortnightly", "start_date": DAY, "week_days": [1],
               "substitutions": [243], "extras": [{"id": 29, "quantity": 1}]}),
    )
    .await;
    let mut flexi = weekly(&[]);
    flexi["exclusions"] = json!([244]);
    flexi["extras"] = json!([{"id": 30, "quantity": 2}]);
    order_a(app, wilhelmina, 219, flexi).await;
    order_a(
        app,
        priya,
        217,
        json!({"start_date": DAY, "exclusions": [240], "extras": [{"id": 28, "quantity": 1}]}),
    )
    .await;
    // Not on the day: a Tuesday service's weekly order, and a Thursday's single one.
    order_a(
        app,
        daniel,
        217,
        json!({"frequency": "weekly", "start_date": "2027-01-05", "week_days": [2]}),
    )
    .await;
    order_a(app, margaret, 218, json!({"start_date": "2027-01-14"})).await;

    // Store B.
    for (email, first, last, fields) in [
        (
            "jana@example.com",
            "Jana",
            "Berg",
            json!({"frequency": "weekly", "start_date": DAY, "week_days": [1],
                   "exclusions": [400], "extras": [{"id": 50, "quantity": 2}]}),
        ),
        (
            "lukas@example.com",
            "Lukas",
            "Schaefer",
            json!({"start_date": DAY}),
        ),
    ] {
        let mut body = customer_body_b(email);
        body["first_name"] = json!(first);
        body["last_name"] = json!(last);
        let customer = app.post_json_as("/v1/customers", &body, &store_b()).await;
        customer.assert_status(201);
        let mut order = json!({"customer_id": id_of(&customer.json()), "box_id": 300});
        for (key, value) in fields.as_object().unwrap() {
            order[key] = value.clone();
        }
        app.post_json_as("/v1/orders", &order, &store_b())
            .await
            .assert_status(201);
    }
    Seeded {
        names_a: vec![
            "Oyelaran-Whitfield",
            "Wisniewski",
            "Featherstonehaugh",
            "Raman",
        ],
        names_b: vec!["Berg", "Schaefer"],
    }
}

/// The API's whole list of `date` for the webstore of `creds`.
async fn api_list(app: &TestApp, date: &str, creds: &Creds) -> Vec<Value> {
    let response = app
        .get_as(&format!("/v1/deliveries?date={date}&per_page=1000"), creds)
        .await;
    response.assert_status(200);
    let total = response.header("x-total-count");
    let list = response.json().as_array().cloned().expect("a list");
    assert_eq!(
        total.as_deref(),
        Some(list.len().to_string().as_str()),
        "one page holds the whole list"
    );
    list
}

/// The API's CSV of `date` for store A, as bytes.
async fn api_csv(app: &TestApp, date: &str) -> Vec<u8> {
    let response = app
        .send(
            Method::GET,
            &format!("/v1/deliveries?date={date}&per_page=1000"),
            Some(&store_a()),
            None,
            &[("Accept", "text/csv")],
        )
        .await;
    response.assert_status(200);
    response.body
}

/// Signs in through the form, as a person would: type, press the button.
async fn sign_in(browser: &Browser, app: &TestApp, (email, password): (&str, &str)) {
    browser.goto(&app.url("/app/sign_in")).await;
    browser.fill("input[name=email]", email).await;
    browser.fill("input[name=password]", password).await;
    browser
        .click("form[action='/app/sign_in'] button[type=submit]")
        .await;
}

/// Presses the sign-out button of the page shown.
async fn sign_out(browser: &Browser) {
    browser
        .click("form[action='/app/sign_out'] button[type=submit]")
        .await;
}

/// A client that keeps no cookies and follows no redirect, for what a browser does not show
/// (a download's bytes, a redirect's target).
fn plain_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .expect("an HTTP client")
}

/// `GET path` with only the session cookie `session`.
async fn get_with_session(app: &TestApp, path: &str, session: &str) -> reqwest::Response {
    plain_client()
        .get(app.url(path))
        .header("Cookie", format!("{SESSION}={session}"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {path} failed: {e}"))
}

/// The session cookie's value, which the browser must hold.
async fn session_of(browser: &Browser) -> String {
    browser
        .cookie(SESSION)
        .await
        .expect("signed in, the browser holds the session cookie")
        .value()
        .to_string()
}

/// `[key, value]` attribute pairs of the elements `selector` finds, as numbers.
async fn numbers(browser: &Browser, selector: &str, key: &str, value: &str) -> BTreeMap<u64, u64> {
    let keys = browser.attributes(selector, key).await;
    let values = browser.attributes(selector, value).await;
    let number = |text: Option<String>| -> u64 {
        let text = text.unwrap_or_else(|| panic!("{selector} without {key} or {value}"));
        text.parse()
            .unwrap_or_else(|_| panic!("{selector}: {text:?} is not a number"))
    };
    let pairs: Vec<(u64, u64)> = keys
        .into_iter()
        .map(number)
        .zip(values.into_iter().map(number))
        .collect();
    let map: BTreeMap<u64, u64> = pairs.iter().copied().collect();
    assert_eq!(
        map.len(),
        pairs.len(),
        "{selector}: an id twice in {pairs:?}"
    );
    map
}

/// The attributes `names` of the one element `selector` finds, each as a number (`None` when
/// missing or not a number).
async fn number_attributes(browser: &Browser, selector: &str, names: &[&str]) -> Vec<Option<u64>> {
    let mut read = Vec::with_capacity(names.len());
    for name in names {
        let values = browser.attributes(selector, name).await;
        assert_eq!(values.len(), 1, "one element {selector}");
        read.push(values[0].as_deref().and_then(|v| v.parse().ok()));
    }
    read
}

/// Per id, the entries of `list` that have it in `field` (each counted once), or with
/// `quantities`, the sum of their quantities.
fn tally(list: &[Value], field: &str, quantities: bool) -> BTreeMap<u64, u64> {
    let mut counts = BTreeMap::new();
    for entry in list {
        for thing in entry[field].as_array().expect("a list of things") {
            let n = if quantities {
                thing["quantity"].as_u64().expect("a quantity")
            } else {
                1
            };
            *counts
                .entry(thing["id"].as_u64().expect("an id"))
                .or_default() += n;
        }
    }
    counts
}

/// Per box id, how many entries of `list` are that box.
fn box_counts(list: &[Value]) -> BTreeMap<u64, u64> {
    let mut counts = BTreeMap::new();
    for entry in list {
        *counts.entry(entry["box_id"].as_u64().unwrap()).or_default() += 1;
    }
    counts
}

/// The day page's routes in page order: delivery service id and its rows' order ids.
async fn routes_on_page(browser: &Browser) -> Vec<(u64, Vec<u64>)> {
    let routes = browser
        .js(
            "return Array.from(document.querySelectorAll('#delivery-list section.route'), \
             s => [s.getAttribute('data-delivery-service-id'), \
                   Array.from(s.querySelectorAll('tr[data-order-id]'), \
                              r => r.getAttribute('data-order-id'))]);",
            vec![],
        )
        .await;
    let routes: Vec<(String, Vec<String>)> =
        serde_json::from_value(routes).expect("routes and rows");
    routes
        .into_iter()
        .map(|(service, rows)| {
            let service = service.parse().expect("a delivery service id");
            let rows = rows.iter().map(|id| id.parse().expect("an order id"));
            (service, rows.collect())
        })
        .collect()
}

/// The API list grouped as the page must show it: by delivery service, in the list's order.
fn routes_of(list: &[Value]) -> Vec<(u64, Vec<u64>)> {
    let mut routes: Vec<(u64, Vec<u64>)> = Vec::new();
    for entry in list {
        let service = entry["delivery_service_id"].as_u64().unwrap();
        let order = entry["order_id"].as_u64().unwrap();
        match routes.last_mut() {
            Some((last, rows)) if *last == service => rows.push(order),
            _ => routes.push((service, vec![order])),
        }
    }
    routes
}

/// The visible text of the whole page.
async fn page_text(browser: &Browser) -> String {
    browser.text("body").await
}

/// Whether the page has no horizontal scroll: its content no wider than the viewport.
async fn assert_no_sideways_scroll(browser: &Browser, viewport: Viewport, what: &str) {
    let sizes = browser
        .js_after_frames(
            "[document.documentElement.scrollWidth, document.body.scrollWidth, \
              window.innerWidth]",
        )
        .await;
    let [page, body, inner]: [u64; 3] = serde_json::from_value(sizes).expect("three widths");
    assert_eq!(
        inner,
        u64::from(viewport.size().0),
        "{what}: the page is laid out {inner} px wide (is there a <meta name=viewport>?)"
    );
    assert!(
        page <= inner && body <= inner,
        "{what} scrolls sideways at {inner} px: its content is {page} px wide (body {body})"
    );
}

/// Where the documentation's screenshot `name` goes, if [`SCREENSHOTS`] asks for them.
fn screenshot_path(name: &str) -> Option<PathBuf> {
    let wanted = std::env::var(SCREENSHOTS).is_ok_and(|v| v.trim() == "1");
    wanted.then(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("docs")
            .join(name)
    })
}

#[tokio::test]
async fn signing_in_leads_to_the_next_delivery_day_with_an_http_only_lax_session_cookie() {
    let test = "signing_in_leads_to_the_next_delivery_day_with_an_http_only_lax_session_cookie";
    let Some(browser) = Browser::start(test).await else {
        return;
    };
    let (_dir, app) = producers_app().await;

    // Not signed in, every page leads to the form.
    for path in ["/app", &format!("/app/deliveries/{DAY}")] {
        browser.goto(&app.url(path)).await;
        assert_eq!(browser.current_path().await, "/app/sign_in", "{path}");
    }
    assert_eq!(browser.status().await, 200);

    sign_in(&browser, &app, PRODUCER_A).await;

    // The day it opens on is store A's next delivery day (Monday, Tuesday, Thursday or
    // Saturday) from today in London, within a week.
    let path = browser.current_path().await;
    let date = path
        .strip_prefix("/app/deliveries/")
        .unwrap_or_else(|| panic!("signed in, the browser is at {path}, not a day"));
    let date: jiff::civil::Date = date.parse().expect("a date in the path");
    let london = jiff::tz::TimeZone::get("Europe/London").expect("London's time zone");
    let today = jiff::Timestamp::now().to_zoned_datetime(london).date();
    let next_delivery_day = |from: jiff::civil::Date| {
        (0..7)
            .map(|n| from.checked_add(jiff::Span::new().days(n)).unwrap())
            .find(|d| [1, 2, 4, 6].contains(&d.weekday().to_sunday_zero_offset()))
            .unwrap()
    };
    // The day may have turned since the server read it.
    let expected = [today, today.yesterday().unwrap()].map(next_delivery_day);
    assert!(
        expected.contains(&date),
        "the app opened on {date}; the next delivery day from {today} is {}",
        expected[0]
    );
    assert_eq!(browser.status().await, 200);
    assert!(browser.count("h1").await == 1);

    // The cookie: not for scripts, only to the app, and `Lax`: sent with a link followed from
    // another site, never with another site's form posts or embedded requests.
    let cookie = browser.cookie(SESSION).await.expect("a session cookie");
    assert_eq!(cookie.http_only(), Some(true), "{cookie:?}");
    assert_eq!(
        cookie.same_site().map(|s| s.to_string()).as_deref(),
        Some("Lax"),
        "{cookie:?}"
    );
    assert_eq!(cookie.path(), Some("/app"), "{cookie:?}");
    assert_ne!(cookie.secure(), Some(true), "plain HTTP: {cookie:?}");
    // HttpOnly for real: the page's own scripts cannot read it.
    let visible = browser.js("return document.cookie;", vec![]).await;
    assert!(
        !visible.as_str().unwrap_or_default().contains(SESSION),
        "document.cookie shows the session: {visible}"
    );

    // Signed in, the form leads back into the app.
    browser.goto(&app.url("/app/sign_in")).await;
    assert!(browser.current_path().await.starts_with("/app/deliveries/"));
}

#[tokio::test]
async fn a_wrong_password_or_an_unknown_email_stays_on_the_form_with_an_alert() {
    let test = "a_wrong_password_or_an_unknown_email_stays_on_the_form_with_an_alert";
    let Some(browser) = Browser::start(test).await else {
        return;
    };
    let (_dir, app) = producers_app().await;
    let (email, password) = PRODUCER_A;

    let mut alerts = Vec::new();
    for (what, attempt) in [
        ("a wrong password", (email, "not the password")),
        ("an unknown email", ("nobody@store-a.example", password)),
    ] {
        sign_in(&browser, &app, attempt).await;

        assert_eq!(browser.current_path().await, "/app/sign_in", "{what}");
        assert_eq!(browser.status().await, 401, "{what}");
        let alert = browser.text("[role=alert]").await;
        assert!(!alert.trim().is_empty(), "{what}: an empty alert");
        alerts.push(alert);
        assert!(browser.cookie(SESSION).await.is_none(), "{what}");
        // The form is there again, ready for another try.
        assert_eq!(browser.count("input[name=password]").await, 1, "{what}");
        browser.goto(&app.url("/app")).await;
        assert_eq!(browser.current_path().await, "/app/sign_in", "{what}");
    }
    // Both failures read the same: the form tells nobody which emails are producers'.
    assert_eq!(alerts[0], alerts[1]);
}

#[tokio::test]
async fn ten_failures_throttle_the_email_even_for_the_right_password() {
    let test = "ten_failures_throttle_the_email_even_for_the_right_password";
    let Some(browser) = Browser::start(test).await else {
        return;
    };
    let (_dir, app) = producers_app().await;
    let (email, password) = PRODUCER_A;

    for attempt in 1..=10 {
        sign_in(&browser, &app, (email, &format!("guess {attempt}"))).await;
        assert_eq!(browser.status().await, 401, "failure {attempt}");
    }
    sign_in(&browser, &app, (email, password)).await;

    assert_eq!(browser.current_path().await, "/app/sign_in");
    assert_eq!(browser.status().await, 429);
    let alert = browser.text("[role=alert]").await;
    assert!(
        alert.contains("Too many") && alert.contains("try again"),
        "the alert: {alert:?}"
    );
    assert!(browser.cookie(SESSION).await.is_none());
    browser.goto(&app.url("/app")).await;
    assert_eq!(browser.current_path().await, "/app/sign_in");
    // Another producer's email is not held back by it.
    sign_in(&browser, &app, PRODUCER_B).await;
    assert!(browser.current_path().await.starts_with("/app/deliveries/"));
}

#[tokio::test]
async fn the_day_page_shows_the_apis_list_its_counts_and_its_csv() {
    let test = "the_day_page_shows_the_apis_list_its_counts_and_its_csv";
    let Some(browser) = Browser::start(test).await else {
        return;
    };
    let (_dir, app) = producers_app().await;
    seed_the_day(&app).await;
    let list = api_list(&app, DAY, &store_a()).await;
    // The seed is what the test needs: two routes, one-off extras left out.
    assert_eq!(list.len(), 6, "{list:?}");
    assert_eq!(routes_of(&list).len(), 2);

    sign_in(&browser, &app, PRODUCER_A).await;
    browser
        .goto(&app.url(&format!("/app/deliveries/{DAY}")))
        .await;

    // Rows: the API's, in its order, each under its delivery service's route.
    assert_eq!(browser.status().await, 200);
    let heading = browser.text("h1").await;
    assert!(
        heading.contains("11") && heading.contains("2027"),
        "{heading}"
    );
    // The sign-out form carries its token (checked by the server, which test app.rs does).
    let token = "form[action='/app/sign_out'] input[type=hidden][name=form_token]";
    assert_eq!(browser.count(token).await, 1);
    assert_eq!(routes_on_page(&browser).await, routes_of(&list));
    let rows: Vec<u64> = browser
        .attributes("tr[data-order-id]", "data-order-id")
        .await
        .into_iter()
        .map(|id| id.unwrap().parse().unwrap())
        .collect();
    let api_rows: Vec<u64> = list
        .iter()
        .map(|e| e["order_id"].as_u64().unwrap())
        .collect();
    assert_eq!(rows, api_rows, "every row of the page is in a route");

    // Each row shows its customer, box and exactly its extras: a one-off extra that went
    // with last week's delivery is not packed again.
    let extra_names = ["Apple Juice", "Free Range Eggs", "Honey"];
    for entry in &list {
        let row = browser
            .text(&format!("tr[data-order-id='{}']", entry["order_id"]))
            .await;
        for field in ["customer_name", "box_name"] {
            let value = entry[field].as_str().unwrap();
            assert!(row.contains(value), "row {row:?} lacks {field} {value:?}");
        }
        let extras: BTreeSet<&str> = entry["extras"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        for name in extra_names {
            assert_eq!(
                row.contains(name),
                extras.contains(name),
                "row {row:?}, extras in the API {extras:?}"
            );
        }
    }

    // The packing summary: the API's list counted.
    let boxes = numbers(
        &browser,
        "#packing-summary [data-box-id]",
        "data-box-id",
        "data-count",
    )
    .await;
    assert_eq!(boxes, box_counts(&list));
    let extras = numbers(
        &browser,
        "#packing-summary [data-extra-id]",
        "data-extra-id",
        "data-quantity",
    )
    .await;
    assert_eq!(extras, tally(&list, "extras", true));
    let exclusions = numbers(
        &browser,
        "#packing-summary #exclusions [data-item-id]",
        "data-item-id",
        "data-count",
    )
    .await;
    assert_eq!(exclusions, tally(&list, "exclusions", false));
    let substitutions = numbers(
        &browser,
        "#packing-summary #substitutions [data-item-id]",
        "data-item-id",
        "data-count",
    )
    .await;
    assert_eq!(substitutions, tally(&list, "substitutions", false));

    // The days around, and the CSV: the API's bytes, through the session cookie.
    let around = (
        browser.attributes("nav a[rel=prev]", "href").await,
        browser.attributes("nav a[rel=next]", "href").await,
    );
    assert_eq!(
        around,
        (
            vec![Some(format!("/app/deliveries/{}", DAY_AROUND_A.0))],
            vec![Some(format!("/app/deliveries/{}", DAY_AROUND_A.1))]
        )
    );
    let csv_path = format!("/app/deliveries/{DAY}.csv");
    assert_eq!(
        browser.attributes("nav a.csv", "href").await,
        [Some(csv_path.clone())]
    );
    if let Some(path) = screenshot_path("app-day-desktop.png") {
        browser.screenshot_to(&path).await;
    }
    let session = session_of(&browser).await;
    let download = get_with_session(&app, &csv_path, &session).await;
    assert_eq!(download.status(), 200);
    let content_type = download.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(content_type.starts_with("text/csv"), "{content_type}");
    let bytes = download.bytes().await.unwrap();
    assert_eq!(
        String::from_utf8_lossy(&bytes),
        String::from_utf8_lossy(&api_csv(&app, DAY).await)
    );

    // Following the links, as a person would.
    browser.click("nav a[rel=next]").await;
    assert_eq!(
        browser.current_path().await,
        format!("/app/deliveries/{}", DAY_AROUND_A.1)
    );

    // A day without deliveries says so, with no route and no summary to pack.
    browser
        .goto(&app.url(&format!("/app/deliveries/{EMPTY_DAY}")))
        .await;
    assert_eq!(browser.status().await, 200);
    assert!(api_list(&app, EMPTY_DAY, &store_a()).await.is_empty());
    assert_eq!(browser.count("section.route").await, 0);
    assert_eq!(browser.count("tr[data-order-id]").await, 0);
    assert_eq!(browser.count("[data-box-id]").await, 0);
    let text = page_text(&browser).await.to_lowercase();
    assert!(
        text.contains("no deliveries"),
        "the empty day's page: {text}"
    );
}

#[tokio::test]
async fn a_producer_sees_only_their_own_webstore_by_any_url() {
    let test = "a_producer_sees_only_their_own_webstore_by_any_url";
    let Some(browser) = Browser::start(test).await else {
        return;
    };
    let (_dir, app) = producers_app().await;
    let seeded = seed_the_day(&app).await;
    let list_a = api_list(&app, DAY, &store_a()).await;
    let list_b = api_list(&app, DAY, &store_b()).await;
    assert_eq!(list_b.len(), 2);

    sign_in(&browser, &app, PRODUCER_B).await;
    browser
        .goto(&app.url(&format!("/app/deliveries/{DAY}")))
        .await;

    assert_eq!(routes_on_page(&browser).await, routes_of(&list_b));
    let text = page_text(&browser).await;
    for name in &seeded.names_b {
        assert!(text.contains(name), "store B's page lacks {name}");
    }
    let around = (
        browser.attributes("nav a[rel=prev]", "href").await,
        browser.attributes("nav a[rel=next]", "href").await,
    );
    assert_eq!(
        around,
        (
            vec![Some(format!("/app/deliveries/{}", DAY_AROUND_B.0))],
            vec![Some(format!("/app/deliveries/{}", DAY_AROUND_B.1))]
        )
    );

    // No URL leads to store A's data: not the day with another webstore, service or page
    // asked for, not its CSV, not the API with the session cookie.
    let session = session_of(&browser).await;
    let a_ids: BTreeSet<String> = list_a.iter().map(|e| e["order_id"].to_string()).collect();
    let b_ids: BTreeSet<String> = list_b.iter().map(|e| e["order_id"].to_string()).collect();
    let attempts = [
        format!("/app/deliveries/{DAY}?webstore=store-a"),
        format!("/app/deliveries/{DAY}?webstore_id=store-a&delivery_service_id=91"),
        format!("/app/deliveries/{DAY}?page=1&per_page=1000&store=store-a"),
        format!("/app/deliveries/{DAY}.csv"),
        format!("/app/deliveries/{DAY}.csv?webstore=store-a&delivery_service_id=91"),
        format!("/app/store-a/deliveries/{DAY}"),
        format!("/app/deliveries/store-a/{DAY}"),
        format!("/app/webstores/store-a/deliveries/{DAY}"),
        format!("/app/deliveries/{DAY}/../{DAY}"),
        format!("/v1/deliveries?date={DAY}&per_page=1000"),
        format!("/v1/deliveries?date={DAY}&delivery_service_id=91"),
        format!("/v1/orders/{}", list_a[0]["order_id"]),
        format!("/v1/customers/{}", list_a[0]["customer_id"]),
    ];
    for path in &attempts {
        let answer = get_with_session(&app, path, &session).await;
        let status = answer.status();
        let body = answer.text().await.unwrap_or_default();
        for name in &seeded.names_a {
            assert!(
                !body.contains(name),
                "{path} ({status}) shows store A's customer {name} to store B's producer"
            );
        }
        if status == 200 && path.starts_with("/app/deliveries/") {
            // A page of store B's: its rows are store B's orders alone.
            let ids: BTreeSet<String> = body
                .match_indices("data-order-id=\"")
                .map(|(at, _)| {
                    let rest = &body[at + "data-order-id=\"".len()..];
                    rest[..rest.find('"').unwrap()].to_string()
                })
                .collect();
            assert!(
                ids.is_subset(&b_ids),
                "{path}: rows {ids:?}, store B's {b_ids:?}"
            );
            assert!(ids.is_disjoint(&a_ids) || a_ids.is_disjoint(&b_ids));
        }
    }
    // In the browser too, with whatever the browser sends.
    for path in &attempts[..3] {
        browser.goto(&app.url(path)).await;
        let text = page_text(&browser).await;
        for name in &seeded.names_a {
            assert!(!text.contains(name), "{path} shows {name} in the browser");
        }
    }
}

#[tokio::test]
async fn signing_out_ends_the_session_on_the_server() {
    let test = "signing_out_ends_the_session_on_the_server";
    let Some(browser) = Browser::start(test).await else {
        return;
    };
    let (_dir, app) = producers_app().await;
    sign_in(&browser, &app, PRODUCER_A).await;
    let day = app.url(&format!("/app/deliveries/{DAY}"));
    browser.goto(&day).await;
    let session = session_of(&browser).await;

    sign_out(&browser).await;

    assert_eq!(browser.current_path().await, "/app/sign_in");
    assert!(browser.cookie(SESSION).await.is_none(), "the cookie stays");
    // The old cookie, put back into the browser, opens nothing: the session is gone from
    // the server, not only from the browser.
    // Written as the server set it (without a SameSite, fantoccini sends SameSite=None,
    // which Chromium refuses without Secure).
    let old = format!("{SESSION}={session}; Domain=127.0.0.1; Path=/app; HttpOnly; SameSite=Lax");
    let old = Cookie::parse(old).expect("a cookie");
    browser.add_cookie(old).await;
    assert!(
        browser.cookie(SESSION).await.is_some(),
        "the old cookie is back"
    );
    browser.goto(&day).await;
    assert_eq!(browser.current_path().await, "/app/sign_in");
    for path in ["/app", &format!("/app/deliveries/{DAY}.csv")] {
        let answer = get_with_session(&app, path, &session).await;
        assert_eq!(answer.status(), 303, "{path}");
        assert_eq!(
            answer.headers()["location"].to_str().unwrap(),
            "/app/sign_in",
            "{path}"
        );
    }
    // Signing in again works, with a new session.
    sign_in(&browser, &app, PRODUCER_A).await;
    assert!(browser.current_path().await.starts_with("/app/deliveries/"));
    assert_ne!(session_of(&browser).await, session);
}

#[tokio::test]
async fn at_a_phones_width_no_page_scrolls_sideways() {
    let test = "at_a_phones_width_no_page_scrolls_sideways";
    let Some(browser) = Browser::start(test).await else {
        return;
    };
    let (_dir, app) = producers_app().await;
    seed_the_day(&app).await;
    browser.set_viewport(Viewport::Phone).await;

    browser.goto(&app.url("/app/sign_in")).await;
    assert_no_sideways_scroll(&browser, Viewport::Phone, "the sign-in form").await;
    sign_in(&browser, &app, (PRODUCER_A.0, "not the password")).await;
    assert_no_sideways_scroll(&browser, Viewport::Phone, "the sign-in form's alert").await;
    sign_in(&browser, &app, PRODUCER_A).await;
    let signed_in = browser.current_path().await;
    assert!(
        signed_in.starts_with("/app/deliveries/"),
        "signed in at a phone's width, the browser is at {signed_in} (status {}):\n{}",
        browser.status().await,
        browser.source().await
    );
    for date in [DAY, EMPTY_DAY] {
        browser
            .goto(&app.url(&format!("/app/deliveries/{date}")))
            .await;
        assert_no_sideways_scroll(&browser, Viewport::Phone, &format!("the day {date}")).await;
    }
    browser.goto(&app.url(&format!("/app/weeks/{WEEK}"))).await;
    assert_no_sideways_scroll(&browser, Viewport::Phone, "the week").await;

    // The 58-letter town is on the page, wrapped rather than cut off.
    browser
        .goto(&app.url(&format!("/app/deliveries/{DAY}")))
        .await;
    let town = "Llanfairpwllgwyngyllgogerychwyrndrobwllllantysiliogogogoch";
    let page = browser.source().await;
    assert!(
        page.contains(town),
        "the day at {} (status {}) lacks the town:\n{page}",
        browser.current_url().await,
        browser.status().await
    );
    if let Some(path) = screenshot_path("app-day-phone.png") {
        // The delivery list, where a phone shows each delivery as a card.
        let list = "document.getElementById('delivery-list').scrollIntoView();";
        browser.js(list, vec![]).await;
        browser.screenshot_to(&path).await;
    }

    // A week whose seven days all have deliveries, of extras with long names (one a single
    // word of 42 letters), fits a phone too: the tables wrap the names, never the page.
    let (_dir, app) = every_day_app().await;
    sign_in(&browser, &app, PRODUCER_A).await;
    browser.goto(&app.url(&format!("/app/weeks/{WEEK}"))).await;
    assert_eq!(
        browser.count("#days tbody tr").await,
        7,
        "seven delivery days"
    );
    assert_eq!(browser.count("#extras tbody tr").await, 2, "both extras");
    assert_no_sideways_scroll(&browser, Viewport::Phone, "a full week of long extras").await;
}

/// The week of [`WEEK`] after its subscriptions lived: an order paused over Monday (resumed
/// Thursday), one skipping Monday, one cancelled from Thursday, a halted customer's, and a
/// Tuesday order paused with no resume date. The week page and each day page count the
/// deliveries withheld per reason, beside the deliveries the API still lists.
#[tokio::test]
async fn a_week_with_pauses_skips_a_cancellation_and_a_halt_counts_each_reason() {
    let test = "a_week_with_pauses_skips_a_cancellation_and_a_halt_counts_each_reason";
    let Some(browser) = Browser::start(test).await else {
        return;
    };
    let (_dir, app) = producers_app().await;
    let address = |line: &str| json!({"address_1": line, "city": "London", "postcode": "SE5 9NR"});
    let ada = customer_a(&app, 91, ("Ada", "Paused"), address("1 Grove")).await;
    let ben = customer_a(&app, 91, ("Ben", "Cancelled"), address("2 Grove")).await;
    let cleo = customer_a(&app, 91, ("Cleo", "Halted"), address("3 Grove")).await;
    let dev = customer_a(&app, 92, ("Dev", "Tuesday"), address("4 Grove")).await;
    let mondays_and_thursdays = json!({"frequency": "weekly", "start_date": "2027-01-04",
                                      "week_days": [1, 4]});
    let paused = order_a(&app, ada, 217, mondays_and_thursdays.clone()).await;
    let skipping = order_a(&app, ada, 218, weekly(&[])).await;
    let cancelled = order_a(&app, ben, 217, mondays_and_thursdays.clone()).await;
    order_a(&app, ben, 219, weekly(&[])).await;
    order_a(&app, cleo, 217, mondays_and_thursdays).await;
    let tuesdays = order_a(
        &app,
        dev,
        218,
        json!({"frequency": "weekly", "start_date": "2027-01-05", "week_days": [2]}),
    )
    .await;
    for (order, change) in [
        (
            paused,
            json!({"pause_date": DAY, "resume_date": "2027-01-14"}),
        ),
        (skipping, json!({"skipped_dates": [DAY]})),
        (
            cancelled,
            json!({"active": false, "cancel_date": "2027-01-14"}),
        ),
        (tuesdays, json!({"pause_date": "2027-01-12"})),
    ] {
        app.patch_json(&format!("/v1/orders/{order}"), &json!({ "order": change }))
            .await
            .assert_status(200);
    }
    app.patch_json(
        &format!("/v1/customers/{cleo}"),
        &json!({"customer": {"halted": true}}),
    )
    .await
    .assert_status(200);

    // What each day withholds, per reason: (date, delivered, paused, skipped, cancelled,
    // halted).
    let expected: [(&str, usize, u64, u64, u64, u64); 3] = [
        (DAY, 2, 1, 1, 0, 1),
        ("2027-01-12", 0, 1, 0, 0, 0),
        ("2027-01-14", 1, 0, 0, 1, 1),
    ];
    let reasons = [
        "data-paused",
        "data-skipped",
        "data-cancelled",
        "data-halted",
    ];
    sign_in(&browser, &app, PRODUCER_A).await;
    browser.goto(&app.url(&format!("/app/weeks/{WEEK}"))).await;
    assert_eq!(browser.status().await, 200);
    for (date, delivered, paused, skipped, cancelled, halted) in expected {
        // The API lists exactly the deliveries the page counts.
        assert_eq!(
            api_list(&app, date, &store_a()).await.len(),
            delivered,
            "{date}"
        );
        let row = format!("#days tr[data-date='{date}']");
        let mut names = vec!["data-deliveries"];
        names.extend(reasons);
        assert_eq!(
            number_attributes(&browser, &row, &names).await,
            [delivered as u64, paused, skipped, cancelled, halted].map(Some),
            "the week's row for {date}"
        );
    }
    assert_eq!(
        number_attributes(&browser, "main > p.withheld", &reasons).await,
        [2, 1, 1, 2].map(Some),
        "the week's withheld deliveries"
    );
    assert!(
        browser
            .text("main > p.withheld")
            .await
            .contains("2 paused, 1 skipped, 1 cancelled, 2 halted"),
        "{}",
        browser.text("main > p.withheld").await
    );
    assert_no_sideways_scroll(
        &browser,
        Viewport::Desktop,
        "the week with withheld deliveries",
    )
    .await;

    // Each day page says the same of its day, beside its rows.
    for (date, delivered, paused, skipped, cancelled, halted) in expected {
        browser
            .goto(&app.url(&format!("/app/deliveries/{date}")))
            .await;
        assert_eq!(
            browser.count("tr[data-order-id]").await,
            delivered,
            "{date}"
        );
        assert_eq!(
            number_attributes(&browser, "p.withheld", &reasons).await,
            [paused, skipped, cancelled, halted].map(Some),
            "the day page of {date}"
        );
    }
    browser.set_viewport(Viewport::Phone).await;
    browser.goto(&app.url(&format!("/app/weeks/{WEEK}"))).await;
    assert_no_sideways_scroll(
        &browser,
        Viewport::Phone,
        "the week with withheld deliveries",
    )
    .await;
}

/// A server whose store A also has a service delivering every day, and two extras with
/// long names on box 217, ordered by one customer for every day from [`WEEK`].
async fn every_day_app() -> (DataDir, TestApp) {
    let mut catalogue = producers_catalogue();
    let store = &mut catalogue["webstores"][0];
    let mut every_day = json!({"id": 94, "name": "Every Day", "instructions": "Daily round",
                               "fee": "3.00", "pickup_point": false});
    for day in ["mon", "tue", "wed", "thu", "fri", "sat", "sun"] {
        every_day[day] = json!(true);
    }
    store["delivery_services"]
        .as_array_mut()
        .unwrap()
        .push(every_day);
    let extras = store["extras"].as_array_mut().unwrap();
    extras.push(json!({"id": 31, "unit": "jar", "price": "9.50",
                       "name": "Wildflower Honeycomb from the Mendip Hills (unpasteurised)"}));
    extras.push(json!({"id": 32, "unit": "bottle", "price": "5.00",
                       "name": "Elderflowerandgooseberrycordialconcentrate"}));
    for a_box in store["boxes"].as_array_mut().unwrap() {
        if a_box["id"] == 217 {
            a_box["extra_ids"]
                .as_array_mut()
                .unwrap()
                .extend([json!(31), json!(32)]);
        }
    }
    let dir = DataDir::with_catalogue(catalogue);
    let app = Launch::new().on(&dir).spawn().await;
    let daily = customer_a(
        &app,
        94,
        ("Ottoline", "Daily"),
        json!({"address_1": "1 Every Street", "city": "London", "mobile_phone": "07700 900999"}),
    )
    .await;
    order_a(
        &app,
        daily,
        217,
        json!({"frequency": "weekly", "start_date": WEEK, "week_days": [0, 1, 2, 3, 4, 5, 6],
               "extras": [{"id": 31, "quantity": 1}, {"id": 32, "quantity": 2}]}),
    )
    .await;
    (dir, app)
}

#[tokio::test]
async fn the_printed_day_is_a4_with_a_page_per_route_and_no_navigation() {
    let test = "the_printed_day_is_a4_with_a_page_per_route_and_no_navigation";
    let Some(browser) = Browser::start(test).await else {
        return;
    };
    let (_dir, app) = producers_app().await;
    seed_the_day(&app).await;
    let routes = routes_of(&api_list(&app, DAY, &store_a()).await).len();
    sign_in(&browser, &app, PRODUCER_A).await;
    browser
        .goto(&app.url(&format!("/app/deliveries/{DAY}")))
        .await;

    // Laid out for print: no navigation, no sign-out; the summary and every row are there;
    // each route starts a page.
    browser.emulate_media(Some("print")).await;
    let visible = |selector: &str| {
        format!(
            "return Array.from(document.querySelectorAll({selector:?}), \
             e => e.checkVisibility());"
        )
    };
    for hidden in ["nav", "form[action='/app/sign_out']"] {
        let shown = browser.js(&visible(hidden), vec![]).await;
        assert_eq!(shown, json!([false]), "{hidden} in print");
    }
    for kept in ["h1", "#packing-summary", "tr[data-order-id]"] {
        let shown = browser.js(&visible(kept), vec![]).await;
        let shown = shown.as_array().unwrap();
        assert!(
            !shown.is_empty() && shown.iter().all(|v| v == true),
            "{kept} in print: {shown:?}"
        );
    }
    let breaks = browser
        .js(
            "return Array.from(document.querySelectorAll('section.route'), \
             e => getComputedStyle(e).breakBefore);",
            vec![],
        )
        .await;
    assert_eq!(breaks, json!(vec!["page"; routes]));
    browser.emulate_media(None).await;

    // Chromium's PDF: A4 portrait, the summary's page and a page (at least) per route.
    let pdf = browser.print_to_pdf().await;
    assert!(pdf.starts_with(b"%PDF-"), "not a PDF");
    let text = String::from_utf8_lossy(&pdf);
    let boxes: Vec<&str> = text
        .match_indices("/MediaBox [")
        .map(|(at, _)| {
            let rest = &text[at + "/MediaBox [".len()..];
            &rest[..rest.find(']').unwrap()]
        })
        .collect();
    assert!(!boxes.is_empty(), "no page in the PDF");
    for media_box in &boxes {
        let numbers: Vec<f64> = media_box
            .split_whitespace()
            .map(|n| n.parse().unwrap())
            .collect();
        // A4 is 595.28 × 841.89 points; Chromium rounds the page to whole CSS pixels.
        let [0.0, 0.0, width, height] = numbers[..] else {
            panic!("a MediaBox of {media_box}");
        };
        assert!(
            (width - 595.28).abs() < 2.0 && (height - 841.89).abs() < 2.0,
            "a page of {width} × {height} points, not A4"
        );
    }
    let pages = text
        .match_indices("/Type /Page")
        .filter(|(at, _)| !text[at + "/Type /Page".len()..].starts_with('s'))
        .count();
    assert_eq!(pages, boxes.len());
    assert!(
        pages > routes,
        "{pages} pages for the summary and {routes} routes"
    );
}

#[tokio::test]
async fn the_printed_week_is_one_a4_page_without_navigation() {
    let test = "the_printed_week_is_one_a4_page_without_navigation";
    let Some(browser) = Browser::start(test).await else {
        return;
    };
    let (_dir, app) = producers_app().await;
    seed_the_day(&app).await;
    sign_in(&browser, &app, PRODUCER_A).await;
    browser.goto(&app.url(&format!("/app/weeks/{WEEK}"))).await;
    assert!(
        browser.count("#boxes tr[data-box-id]").await > 0,
        "boxes to pack"
    );

    browser.emulate_media(Some("print")).await;
    for (selector, shown) in [
        ("nav", false),
        ("form[action='/app/sign_out']", false),
        ("h1", true),
        ("#days", true),
        ("#boxes", true),
    ] {
        let visible = browser
            .js(
                &format!("return document.querySelector({selector:?}).checkVisibility();"),
                vec![],
            )
            .await;
        assert_eq!(visible, json!(shown), "{selector} in print");
    }
    browser.emulate_media(None).await;

    let pdf = browser.print_to_pdf().await;
    assert!(pdf.starts_with(b"%PDF-"), "not a PDF");
    let text = String::from_utf8_lossy(&pdf);
    let pages = text
        .match_indices("/Type /Page")
        .filter(|(at, _)| !text[at + "/Type /Page".len()..].starts_with('s'))
        .count();
    assert_eq!(pages, 1, "the week on one page");
    let media_box = text
        .split("/MediaBox [")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .expect("a MediaBox");
    let numbers: Vec<f64> = media_box
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    assert!(
        (numbers[2] - 595.28).abs() < 2.0 && (numbers[3] - 841.89).abs() < 2.0,
        "A4: {media_box}"
    );
    if let Some(path) = screenshot_path("app-week-desktop.png") {
        browser.screenshot_to(&path).await;
    }
}

#[tokio::test]
async fn axe_core_finds_nothing_serious_on_any_page() {
    let test = "axe_core_finds_nothing_serious_on_any_page";
    let Some(axe) = axe_core_source(test) else {
        return;
    };
    let Some(browser) = Browser::start(test).await else {
        return;
    };
    let (_dir, app) = producers_app().await;
    seed_the_day(&app).await;
    let mut lesser = Vec::new();

    browser.goto(&app.url("/app/sign_in")).await;
    lesser.push((
        "the sign-in form",
        browser.assert_accessible(&axe, "the sign-in form").await,
    ));
    sign_in(&browser, &app, (PRODUCER_A.0, "not the password")).await;
    assert_eq!(browser.count("[role=alert]").await, 1);
    let what = "the sign-in form with an alert";
    lesser.push((what, browser.assert_accessible(&axe, what).await));
    sign_in(&browser, &app, PRODUCER_A).await;
    for (what, path, viewport) in [
        (
            "the day",
            format!("/app/deliveries/{DAY}"),
            Viewport::Desktop,
        ),
        (
            "the day on a phone",
            format!("/app/deliveries/{DAY}"),
            Viewport::Phone,
        ),
        (
            "an empty day",
            format!("/app/deliveries/{EMPTY_DAY}"),
            Viewport::Desktop,
        ),
        ("the week", format!("/app/weeks/{WEEK}"), Viewport::Desktop),
        (
            "the week on a phone",
            format!("/app/weeks/{WEEK}"),
            Viewport::Phone,
        ),
        (
            "a page that does not exist",
            "/app/nothing-here".to_string(),
            Viewport::Desktop,
        ),
    ] {
        browser.set_viewport(viewport).await;
        browser.goto(&app.url(&path)).await;
        lesser.push((what, browser.assert_accessible(&axe, what).await));
    }
    // Minor and moderate findings do not fail the test; they are shown for a human to weigh.
    for (what, violations) in lesser.iter().filter(|(_, v)| !v.is_empty()) {
        let ids: Vec<&str> = violations.iter().filter_map(|v| v["id"].as_str()).collect();
        eprintln!("axe-core, minor or moderate, on {what}: {ids:?}");
    }
}

#[tokio::test]
async fn signing_in_and_out_needs_no_javascript() {
    let test = "signing_in_and_out_needs_no_javascript";
    let options = BrowserOptions { javascript: false };
    let Some(browser) = Browser::start_with(test, options).await else {
        return;
    };
    // JavaScript is off for real: a page's script does not run.
    let script = "<title>t</title><p id=p>off</p><script>p.textContent='on'</script>";
    browser
        .goto(&format!("data:text/html,{}", enc(script)))
        .await;
    assert_eq!(browser.text("#p").await, "off");
    let (_dir, app) = producers_app().await;
    let day = format!("/app/deliveries/{DAY}");

    sign_in(&browser, &app, PRODUCER_A).await;
    assert!(browser.current_path().await.starts_with("/app/deliveries/"));
    browser.goto(&app.url(&day)).await;
    assert_eq!(browser.status().await, 200);
    let day_source = browser.source().await;
    let session = session_of(&browser).await;

    // No page carries a script, and the policy forbids any.
    for (path, session) in [("/app/sign_in", None), (day.as_str(), Some(&session))] {
        let mut request = plain_client().get(app.url(path));
        if let Some(session) = session {
            request = request.header("Cookie", format!("{SESSION}={session}"));
        }
        let answer = request.send().await.unwrap();
        assert_eq!(answer.status(), 200, "{path}");
        let policy = answer.headers()["content-security-policy"]
            .to_str()
            .unwrap();
        assert!(
            !policy.contains("unsafe-inline") && !policy.contains("unsafe-eval"),
            "{path}: {policy}"
        );
        assert!(
            policy.contains("script-src 'none'")
                || (policy.contains("default-src 'none'") && !policy.contains("script-src")),
            "{path}: {policy}"
        );
        assert_eq!(answer.headers()["x-frame-options"], "DENY", "{path}");
    }

    sign_out(&browser).await;
    assert_eq!(browser.current_path().await, "/app/sign_in");
    browser.goto(&app.url(&day)).await;
    assert_eq!(browser.current_path().await, "/app/sign_in");
    let sign_in_source = browser.source().await;
    for (what, source) in [
        ("the day", day_source),
        ("the sign-in form", sign_in_source),
    ] {
        assert!(
            !source.to_lowercase().contains("<script"),
            "{what} has a script"
        );
    }
}
