//! The producers' web app over plain HTTP, as a browser's requests would reach it (the
//! browser itself is in `app_browser`): signing in (right, wrong, unknown, blank, throttled),
//! the day page against `GET /v1/deliveries` (rows, routes, counts, the CSV), isolation
//! between webstores, signing out, forms from other sites, `Secure` cookies behind an HTTPS
//! public URL, and the headers and redirects of every page.
//!
//! Store A's Courier (91) and Van North (93, in [`producers_catalogue`]) deliver on Mondays
//! and Thursdays, its Market Pickup (92) on Tuesdays and Saturdays; store B's service (95) on
//! Mondays, Wednesdays and Fridays. Monday 2027-01-11 is a day of both stores.

use std::collections::BTreeMap;

use reqwest::header::HeaderMap;
use serde_json::{json, Value};

use crate::helpers::{
    customer_body, id_of, producers_catalogue, serve_to_exit, store_b, DataDir, Launch, Page,
    TestApp, Visitor, PRODUCER_A, PRODUCER_B,
};

const DAY: &str = "2027-01-11";

async fn producers_app(extra_args: &[&str]) -> (DataDir, TestApp) {
    let dir = DataDir::with_catalogue(producers_catalogue());
    let app = Launch::new().on(&dir).args(extra_args).spawn().await;
    (dir, app)
}

async fn customer_a(app: &TestApp, email: &str, service: u64, name: &str) -> i64 {
    let mut body = customer_body(email);
    body["delivery_service_id"] = json!(service);
    body["first_name"] = json!(name);
    body["address"]["delivery_note"] = json!("Behind the <shed> & left");
    id_of(&app.create_customer_ok(&body).await)
}

async fn order_a(app: &TestApp, customer: i64, fields: Value) -> i64 {
    let mut body = json!({"customer_id": customer, "box_id": 217, "frequency": "weekly",
                          "start_date": "2027-01-04", "week_days": [1, 4]});
    for (key, value) in fields.as_object().unwrap() {
        body[key] = value.clone();
    }
    id_of(&app.create_order_ok(&body).await)
}

/// Store A's deliveries on [`DAY`] over two routes, with exclusions, substitutions, extras
/// (one-off ones that went with an earlier delivery) and a name with markup; one store B
/// delivery. Returns store B's order id.
async fn seed_the_day(app: &TestApp) -> i64 {
    let ann = customer_a(app, "ann@example.com", 91, "Ann <b>Bold</b>").await;
    let bea = customer_a(app, "bea@example.com", 93, "Bea").await;
    let cal = customer_a(app, "cal@example.com", 91, "Cal").await;
    order_a(
        app,
        ann,
        json!({"exclusions": [240, 241], "extras": [{"id": 28, "quantity": 2}]}),
    )
    .await;
    order_a(
        app,
        bea,
        json!({"substitutions": [242], "extras": [{"id": 29, "quantity": 3}],
               "extras_one_off": true}),
    )
    .await;
    order_a(app, bea, json!({"box_id": 219, "exclusions": [240]})).await;
    order_a(app, cal, json!({"box_id": 218})).await;
    order_a(app, cal, json!({"extras": [{"id": 28, "quantity": 1}]})).await;
    // Not on the day: a Tuesday service.
    let dan = customer_a(app, "dan@example.com", 92, "Dan").await;
    order_a(
        app,
        dan,
        json!({"start_date": "2027-01-05", "week_days": [2]}),
    )
    .await;

    let b_customer = id_of(&app.create_customer_b_ok("jana@example.com").await);
    let b_order = app
        .post_json_as(
            "/v1/orders",
            &json!({"order": {"customer_id": b_customer, "box_id": 300, "frequency": "weekly",
                              "start_date": DAY, "week_days": [1]}}),
            &store_b(),
        )
        .await;
    b_order.assert_status(201);
    id_of(&b_order.json())
}

/// The API's list of the day, all of it, for store A or B.
async fn api_list(app: &TestApp, store_b_list: bool) -> Vec<Value> {
    let path = format!("/v1/deliveries?date={DAY}&per_page=1000");
    let response = if store_b_list {
        app.get_as(&path, &store_b()).await
    } else {
        app.get(&path).await
    };
    response.assert_status(200);
    response.json().as_array().cloned().unwrap()
}

async fn api_csv(app: &TestApp) -> String {
    let response = app
        .send(
            reqwest::Method::GET,
            &format!("/v1/deliveries?date={DAY}&per_page=1000"),
            Some(&crate::helpers::store_a()),
            None,
            &[("Accept", "text/csv")],
        )
        .await;
    response.assert_status(200);
    response.text()
}

fn ids(list: &[Value], key: &str) -> Vec<u64> {
    list.iter()
        .map(|entry| entry[key].as_u64().unwrap())
        .collect()
}

/// `(id, count)` of each thing in `list`'s `field`, summing `quantity` when it has one.
fn tally(list: &[Value], field: &str) -> Vec<(u64, u64)> {
    let mut counts = BTreeMap::<u64, u64>::new();
    for entry in list {
        for thing in entry[field].as_array().unwrap() {
            let quantity = thing.get("quantity").map_or(1, |q| q.as_u64().unwrap());
            *counts.entry(thing["id"].as_u64().unwrap()).or_default() += quantity;
        }
    }
    counts.into_iter().collect()
}

#[tokio::test]
async fn the_day_page_shows_exactly_the_apis_list_and_its_counts() {
    let (_dir, app) = producers_app(&[]).await;
    seed_the_day(&app).await;
    let list = api_list(&app, false).await;
    assert_eq!(list.len(), 5, "the seeded day: {list:?}");
    let mut producer = Visitor::signed_in(&app, PRODUCER_A).await;

    let page = producer.get(&format!("/app/deliveries/{DAY}")).await;
    assert_eq!(page.status, 200, "{}", page.body);

    // Rows: the API's, in its order.
    let rows: Vec<u64> = page
        .attributes("data-order-id")
        .iter()
        .map(|id| id.parse().unwrap())
        .collect();
    assert_eq!(rows, ids(&list, "order_id"));
    // Routes: one per delivery service, in the list's order.
    let mut services = ids(&list, "delivery_service_id");
    services.dedup();
    assert_eq!(services, vec![91, 93]);
    let routes: Vec<u64> = page
        .attributes("data-delivery-service-id")
        .iter()
        .map(|id| id.parse().unwrap())
        .collect();
    assert_eq!(routes, services);
    // Prices and statuses: the API's, and the day's total their sum.
    let of_list = |field: &str| -> Vec<String> {
        list.iter()
            .map(|entry| entry[field].as_str().unwrap().to_owned())
            .collect()
    };
    let prices = of_list("price");
    assert_eq!(page.attributes("data-price"), prices);
    assert_eq!(page.attributes("data-status"), of_list("status"));
    let cents: i64 = prices
        .iter()
        .map(|price| {
            let (whole, fraction) = price.split_once('.').unwrap();
            whole.parse::<i64>().unwrap() * 100 + fraction.parse::<i64>().unwrap()
        })
        .sum();
    let total = format!("{}.{:02}", cents / 100, cents % 100);
    assert_eq!(page.attributes("data-total-price"), vec![total.clone()]);
    assert!(
        page.body.contains(&format!("{total} in all")),
        "the day's total is said"
    );
    // Counts: the list's.
    let mut boxes = BTreeMap::<u64, u64>::new();
    for entry in &list {
        *boxes.entry(entry["box_id"].as_u64().unwrap()).or_default() += 1;
    }
    assert_eq!(
        page.pairs("data-box-id", "data-count"),
        boxes.into_iter().collect::<Vec<_>>()
    );
    assert_eq!(
        page.pairs("data-extra-id", "data-quantity"),
        tally(&list, "extras")
    );
    assert_eq!(
        tally(&list, "extras"),
        vec![(28, 3)],
        "Bea's one-off eggs went on the 7th"
    );
    let summary_of = |table: &str| -> Vec<(u64, u64)> {
        let start = page.body.find(&format!("<table id=\"{table}\"")).unwrap();
        let end = start + page.body[start..].find("</table>").unwrap();
        Page {
            status: 200,
            headers: HeaderMap::new(),
            body: page.body[start..end].to_owned(),
        }
        .pairs("data-item-id", "data-count")
    };
    assert_eq!(summary_of("exclusions"), tally(&list, "exclusions"));
    assert_eq!(summary_of("substitutions"), tally(&list, "substitutions"));

    // Every value is escaped by the template engine.
    assert!(
        page.body.contains("Ann &#60;b&#62;Bold&#60;/b&#62;")
            || page.body.contains("Ann &lt;b&gt;Bold&lt;/b&gt;"),
        "the name is escaped"
    );
    assert!(!page.body.contains("<b>Bold</b>"));
    assert!(!page.body.contains("<shed>"));

    // Links: the delivery days around (Tuesday 5th is Market Pickup's, Tuesday 12th too).
    assert_eq!(
        page.attributes("href")
            .into_iter()
            .filter(|href| href.starts_with("/app/deliveries/"))
            .collect::<Vec<_>>(),
        [
            "/app/deliveries/2027-01-09",
            "/app/deliveries/2027-01-12",
            "/app/deliveries/2027-01-11.csv"
        ]
    );

    // The CSV is the API's, byte for byte.
    let csv = producer.get(&format!("/app/deliveries/{DAY}.csv")).await;
    assert_eq!(csv.status, 200);
    assert_eq!(csv.header("content-type"), Some("text/csv; charset=utf-8"));
    assert_eq!(
        csv.header("content-disposition"),
        Some("attachment; filename=\"deliveries-2027-01-11.csv\"")
    );
    assert_eq!(csv.body, api_csv(&app).await);

    // A day without deliveries says so.
    let empty = producer.get("/app/deliveries/2027-01-13").await;
    assert_eq!(empty.status, 200);
    assert!(empty.body.contains("No deliveries on this day."));
    assert!(empty.attributes("data-order-id").is_empty());
}

#[tokio::test]
async fn the_app_opens_on_the_next_delivery_day() {
    let (_dir, app) = producers_app(&[]).await;
    let mut producer = Visitor::signed_in(&app, PRODUCER_A).await;
    let home = producer.get("/app").await;
    assert_eq!(home.status, 303);
    // Store A delivers Monday, Tuesday, Thursday and Saturday; its dates are London's.
    let mut day = jiff::Timestamp::now()
        .to_zoned_datetime(jiff::tz::TimeZone::get("Europe/London").unwrap())
        .date();
    use jiff::civil::Weekday::*;
    while !matches!(day.weekday(), Monday | Tuesday | Thursday | Saturday) {
        day = day.tomorrow().unwrap();
    }
    let expected = format!("/app/deliveries/{day}");
    // Around midnight in London the day may turn between the two readings.
    let tomorrow_too = format!("/app/deliveries/{}", day.tomorrow().unwrap());
    let location = home.location().unwrap();
    assert!(
        location == expected || location == tomorrow_too,
        "{location}"
    );
    assert_eq!(producer.get(location).await.status, 200);
}

#[tokio::test]
async fn a_producer_sees_only_their_own_webstore() {
    let (_dir, app) = producers_app(&[]).await;
    let b_order = seed_the_day(&app).await;
    let a_orders = ids(&api_list(&app, false).await, "order_id");
    let b_list = api_list(&app, true).await;
    assert_eq!(ids(&b_list, "order_id"), vec![b_order as u64]);

    let mut producer_b = Visitor::signed_in(&app, PRODUCER_B).await;
    let page = producer_b.get(&format!("/app/deliveries/{DAY}")).await;
    assert_eq!(page.status, 200);
    assert_eq!(page.attributes("data-order-id"), vec![b_order.to_string()]);
    assert_eq!(page.attributes("data-delivery-service-id"), vec!["95"]);
    let csv = producer_b.get(&format!("/app/deliveries/{DAY}.csv")).await;
    for a_order in &a_orders {
        assert!(
            !page.body.contains(&format!("data-order-id=\"{a_order}\"")),
            "store A's order {a_order} on store B's page"
        );
        assert!(!csv
            .body
            .lines()
            .any(|line| line.split(',').nth(1) == Some(a_order.to_string().as_str())));
    }
    assert!(
        !page.body.contains("Ann"),
        "store A's customer on store B's page"
    );
    assert_eq!(
        csv.body.lines().count(),
        2,
        "a header and store B's delivery"
    );
}

#[tokio::test]
async fn wrong_and_unknown_sign_ins_fail_alike_and_are_throttled() {
    let (_dir, app) = producers_app(&[]).await;
    let (email, password) = PRODUCER_A;

    let mut visitor = Visitor::new(&app);
    let wrong = visitor.sign_in((email, "not the password")).await;
    let unknown = visitor.sign_in(("nobody@store-a.example", password)).await;
    for answer in [&wrong, &unknown] {
        assert_eq!(answer.status, 401);
        assert!(answer
            .body
            .contains("role=\"alert\">Wrong email or password.</p>"));
        assert!(!visitor.cookies.contains_key("boxsub_session"));
    }
    assert_eq!(visitor.get("/app").await.location(), Some("/app/sign_in"));

    // Blank fields: both named.
    let token = visitor.get("/app/sign_in").await.form_token();
    let blank = visitor
        .post("/app/sign_in", &[("email", " "), ("form_token", &token)])
        .await;
    assert_eq!(blank.status, 422);
    assert!(
        blank.body.contains("Email can&#39;t be blank.")
            || blank.body.contains("Email can&#x27;t be blank."),
        "{}",
        blank.body
    );
    assert!(blank.body.contains("Password can"));

    // Ten failures for one email (two above), then even the right password waits.
    for _ in 0..9 {
        assert_eq!(visitor.sign_in((email, "guess")).await.status, 401);
    }
    let throttled = visitor.sign_in((email, password)).await;
    assert_eq!(throttled.status, 429, "{}", throttled.body);
    assert!(throttled.body.contains("Too many failed sign-ins"));
    let retry_after: u64 = throttled.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=15 * 60).contains(&retry_after));
    assert!(!visitor.cookies.contains_key("boxsub_session"));
    // Another producer is not held back by it.
    Visitor::signed_in(&app, PRODUCER_B).await;
}

#[tokio::test]
async fn signing_out_ends_the_session_on_the_server() {
    let (_dir, app) = producers_app(&[]).await;
    let mut producer = Visitor::signed_in(&app, PRODUCER_A).await;
    let session = producer.cookies["boxsub_session"].clone();
    let page = producer.get(&format!("/app/deliveries/{DAY}")).await;
    assert_eq!(page.status, 200);
    let token = page.form_token();

    // A sign-out with another token does nothing.
    let forged = producer
        .post("/app/sign_out", &[("form_token", &"0".repeat(64))])
        .await;
    assert_eq!(forged.status, 403);
    assert_eq!(
        producer.get(&format!("/app/deliveries/{DAY}")).await.status,
        200
    );

    let out = producer
        .post("/app/sign_out", &[("form_token", &token)])
        .await;
    assert_eq!(out.status, 303);
    assert_eq!(out.location(), Some("/app/sign_in"));
    assert!(out.header("set-cookie").is_some_and(
        |cookie| cookie.starts_with("boxsub_session=;") && cookie.contains("Max-Age=0")
    ));

    // The old cookie, kept by someone, opens nothing.
    let mut thief = Visitor::new(&app);
    thief.cookies.insert("boxsub_session".into(), session);
    for path in [
        "/app",
        "/app/deliveries/2027-01-11",
        "/app/deliveries/2027-01-11.csv",
    ] {
        let answer = thief.get(path).await;
        assert_eq!(answer.status, 303, "{path}");
        assert_eq!(answer.location(), Some("/app/sign_in"), "{path}");
    }
}

#[tokio::test]
async fn forms_posted_from_another_site_are_refused() {
    let (_dir, app) = producers_app(&[]).await;
    /// Producer A's sign-in form with `token`.
    fn fields(token: &str) -> [(&str, &str); 3] {
        let (email, password) = PRODUCER_A;
        [
            ("email", email),
            ("password", password),
            ("form_token", token),
        ]
    }

    // No form cookie: a page of another site cannot have one.
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let token = "a".repeat(64);
    let bare = client
        .post(app.url("/app/sign_in"))
        .form(&fields(&token))
        .send()
        .await
        .unwrap();
    assert_eq!(bare.status(), 403);

    let mut visitor = Visitor::new(&app);
    let token = visitor.get("/app/sign_in").await.form_token();
    // The cookie but another token.
    let wrong_token = "b".repeat(64);
    assert_eq!(
        visitor
            .post("/app/sign_in", &fields(&wrong_token))
            .await
            .status,
        403
    );
    // The right token, from another origin or a cross-site request.
    let right = fields(&token);
    visitor.origin = "http://evil.example".into();
    assert_eq!(visitor.post("/app/sign_in", &right).await.status, 403);
    visitor.origin = app.url("");
    let cross_site = client
        .post(app.url("/app/sign_in"))
        .header("Cookie", visitor.cookie_header())
        .header("Sec-Fetch-Site", "cross-site")
        .form(&right)
        .send()
        .await
        .unwrap();
    assert_eq!(cross_site.status(), 403);
    // The right cookie and token, but nothing that says where the form comes from (no
    // Origin, no Referer, no Sec-Fetch-Site): refused, as OWASP's CSRF cheat sheet advises.
    let unsourced = client
        .post(app.url("/app/sign_in"))
        .header("Cookie", visitor.cookie_header())
        .form(&right)
        .send()
        .await
        .unwrap();
    assert_eq!(unsourced.status(), 403);
    assert!(!visitor.cookies.contains_key("boxsub_session"));
    // A browser that sends only the Referer of the app's own page is believed.
    let referred = client
        .post(app.url("/app/sign_in"))
        .header("Cookie", visitor.cookie_header())
        .header("Referer", app.url("/app/sign_in"))
        .form(&right)
        .send()
        .await
        .unwrap();
    assert_eq!(referred.status(), 303);
    // And from the app's own page it works.
    assert_eq!(visitor.post("/app/sign_in", &right).await.status, 303);
    assert!(visitor.cookies.contains_key("boxsub_session"));
}

#[tokio::test]
async fn cookies_are_secure_behind_an_https_public_url() {
    // The default port, as an operator may write it: browsers leave it out of `Origin`.
    let (_dir, app) = producers_app(&["--public-url", "https://shop.example:443"]).await;
    let mut visitor = Visitor::new(&app);
    let form = visitor.get("/app/sign_in").await;
    let form_cookie = form.header("set-cookie").unwrap();
    for part in [
        "boxsub_form=",
        "HttpOnly",
        "SameSite=Strict",
        "Secure",
        "Path=/app",
    ] {
        assert!(form_cookie.contains(part), "{form_cookie}");
    }
    // Forms must come from the public origin now, not from the address boxsub listens on.
    let refused = visitor.sign_in(PRODUCER_A).await;
    assert_eq!(refused.status, 403);
    visitor.origin = "https://shop.example:443".into();
    assert_eq!(
        visitor.sign_in(PRODUCER_A).await.status,
        403,
        "no browser sends this"
    );
    visitor.origin = "https://shop.example".into();
    let signed_in = visitor.sign_in(PRODUCER_A).await;
    assert_eq!(signed_in.status, 303);
    let session_cookie = signed_in.header("set-cookie").unwrap();
    for part in [
        "boxsub_session=",
        "HttpOnly",
        "SameSite=Lax",
        "Secure",
        "Path=/app",
    ] {
        assert!(session_cookie.contains(part), "{session_cookie}");
    }
}

#[tokio::test]
async fn every_app_answer_forbids_scripts_and_frames_and_pages_need_a_session() {
    let (_dir, app) = producers_app(&[]).await;
    let mut stranger = Visitor::new(&app);
    for path in [
        "/app",
        "/app/",
        "/app/deliveries/2027-01-11",
        "/app/deliveries/2027-01-11.csv",
    ] {
        let answer = stranger.get(path).await;
        assert_eq!(
            (answer.status, answer.location()),
            (303, Some("/app/sign_in")),
            "{path}"
        );
    }
    let mut producer = Visitor::signed_in(&app, PRODUCER_A).await;
    let answers = [
        ("/app/sign_in", stranger.get("/app/sign_in").await, 200),
        ("day", producer.get("/app/deliveries/2027-01-11").await, 200),
        (
            "csv",
            producer.get("/app/deliveries/2027-01-11.csv").await,
            200,
        ),
        ("css", producer.get("/app/app.css").await, 200),
        (
            "bad date",
            producer.get("/app/deliveries/2027-02-30").await,
            404,
        ),
        ("unknown", producer.get("/app/nothing").await, 404),
        ("GET sign_out", producer.get("/app/sign_out").await, 405),
        (
            "POST day",
            producer.post("/app/deliveries/2027-01-11", &[]).await,
            405,
        ),
    ];
    for (what, answer, status) in &answers {
        assert_eq!(answer.status, *status, "{what}: {}", answer.body);
        let policy = answer.header("content-security-policy").expect(what);
        assert!(policy.contains("default-src 'none'"), "{what}: {policy}");
        assert!(
            policy.contains("frame-ancestors 'none'"),
            "{what}: {policy}"
        );
        assert!(
            !policy.contains("unsafe-inline") && !policy.contains("script-src"),
            "{what}: {policy}"
        );
        assert_eq!(answer.header("x-frame-options"), Some("DENY"), "{what}");
        assert_eq!(
            answer.header("x-content-type-options"),
            Some("nosniff"),
            "{what}"
        );
        assert!(!answer.body.contains("<script"), "{what}");
        if answer.header("content-type") == Some("text/html; charset=utf-8") {
            assert!(answer
                .body
                .contains("<link rel=\"stylesheet\" href=\"/app/app.css\">"));
            assert!(!answer.body.contains(" style="), "{what}: inline styles");
        }
    }
    assert_eq!(answers[6].1.header("allow"), Some("POST"));
    assert_eq!(answers[7].1.header("allow"), Some("GET"));
    assert_eq!(
        answers[3].1.header("content-type"),
        Some("text/css; charset=utf-8")
    );
}

#[tokio::test]
async fn hostile_forms_get_a_clear_refusal_and_change_nothing() {
    let (_dir, app) = producers_app(&[]).await;
    let mut visitor = Visitor::new(&app);
    let token = visitor.get("/app/sign_in").await.form_token();
    // Bytes that are no form at all, a huge email, a body over the limit.
    let garbage = visitor
        .client
        .post(app.url("/app/sign_in"))
        .header("Cookie", visitor.cookie_header())
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(vec![0xff, 0x00, b'%', b'=', b'&', 0x80])
        .send()
        .await
        .unwrap();
    assert_eq!(garbage.status(), 403, "no token in it");
    let long_email = format!("{}@store-a.example", "x".repeat(30_000));
    let long = visitor
        .post(
            "/app/sign_in",
            &[
                ("email", &long_email),
                ("password", "p"),
                ("form_token", &token),
            ],
        )
        .await;
    assert_eq!(long.status, 401);
    // Read off a raw connection while the body is still being written: the server refuses
    // on the announced length and may close before taking it all, which an HTTP client
    // reports as a failed send instead of the answer.
    let huge_len = 2 << 20;
    let mut huge = app.raw_head("POST", "/app/sign_in", None);
    huge.push_str(&format!(
        "Cookie: {}\r\nContent-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: {huge_len}\r\n\r\n",
        visitor.cookie_header()
    ));
    let mut huge = huge.into_bytes();
    huge.resize(huge.len() + huge_len, b'a');
    let huge = app
        .raw_exchange(huge)
        .await
        .expect("an answer to a form over the limit");
    assert_eq!(
        huge.status,
        413,
        "{:?}",
        String::from_utf8_lossy(&huge.body)
    );
    // Cookies that are not tokens are no cookies.
    let mut odd = Visitor::new(&app);
    odd.cookies
        .insert("boxsub_session".into(), "../../etc/passwd".into());
    assert_eq!(odd.get("/app").await.location(), Some("/app/sign_in"));
    // The producer can still sign in: nothing was throttled or broken by the above.
    Visitor::signed_in(&app, PRODUCER_A).await;
    app.assert_alive().await;
}

#[tokio::test]
async fn a_producer_of_a_webstore_served_elsewhere_is_sent_on_and_never_shown_an_empty_day() {
    let (_dir, app) = producers_app(&["--webstores", "store-b"]).await;
    let mut producer = Visitor::new(&app);

    // A sign-in of store A's producer on a node that does not serve store A: no session
    // here, the routing cookie that names store A for the deployment's front end, and the
    // form sent back unchecked (307: the same POST again, which the front end routes by the
    // cookie to a node that checks it).
    let sent_on = producer.sign_in(PRODUCER_A).await;
    assert_eq!(sent_on.status, 307, "{}", sent_on.body);
    assert_eq!(sent_on.location(), Some("/app/sign_in"));
    assert_eq!(
        producer.cookies.get("boxsub_webstore").map(String::as_str),
        Some("store-a")
    );
    // It outlives the browser's restart (it names a webstore, no secret), unlike the session.
    let routing = sent_on
        .headers
        .get_all("set-cookie")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find(|value| value.starts_with("boxsub_webstore="))
        .expect("the routing cookie");
    assert!(routing.contains("; Max-Age=34560000;"), "{routing}");
    assert!(!producer.cookies.contains_key("boxsub_session"));
    // The same node again, cookie and all (no front end routed it on): a 421 page.
    let again = producer.sign_in(PRODUCER_A).await;
    assert_eq!(again.status, 421, "{}", again.body);
    assert!(again.body.contains("served by another node"));
    for path in [
        "/app/deliveries/2027-01-11",
        "/app/deliveries/2027-01-11.csv",
    ] {
        // The routing cookie names store A, which this node does not serve: the producer's
        // session (if any) is on store A's node, so the page says "served elsewhere" rather
        // than send them to a sign-in that could only be sent on again.
        let answer = producer.get(path).await;
        assert_eq!(
            answer.status, 421,
            "{path}: routed to a node without store A"
        );
        assert!(answer.body.contains("served by another node"), "{path}");
        assert!(!answer.body.contains("data-order-id"));
    }
    // Nothing was checked here: a wrong password gets the very same answer, and no
    // password job ran on this node.
    let mut stranger = Visitor::new(&app);
    let wrong = stranger.sign_in((PRODUCER_A.0, "not the password")).await;
    let mut right = Visitor::new(&app);
    let right = right.sign_in(PRODUCER_A).await;
    let seen = |page: &Page| {
        let mut headers: Vec<String> = page
            .headers
            .iter()
            .filter(|(name, _)| !matches!(name.as_str(), "date" | "x-request-id"))
            .map(|(name, value)| format!("{name}: {value:?}"))
            .collect();
        headers.sort();
        (page.status, headers, page.body.clone())
    };
    assert_eq!(seen(&wrong), seen(&right));
    assert_eq!(
        stranger.cookies.get("boxsub_webstore").map(String::as_str),
        Some("store-a")
    );
    let metrics = crate::helpers::scrape(&app).await;
    assert_eq!(
        crate::helpers::sample(&metrics, "boxsub_password_jobs_total", &[("share", "app")]),
        0.0,
        "no password of store A's producer checked on a node without store A"
    );
    let mut producer_b = Visitor::signed_in(&app, PRODUCER_B).await;
    assert_eq!(
        producer_b.get("/app/deliveries/2027-01-11").await.status,
        200
    );
}

#[tokio::test]
async fn a_public_url_with_a_path_query_or_fragment_stops_the_start_with_a_clear_message() {
    let dir = DataDir::with_catalogue(producers_catalogue());
    for url in [
        "https://shop.example/app",
        "https://shop.example/?a=1",
        "https://shop.example/#top",
    ] {
        let refused = serve_to_exit(&dir, &["--public-url", url]);
        assert!(refused.status.is_some_and(|s| !s.success()), "{url}");
        assert!(
            refused.stderr.contains("--public-url")
                && refused.stderr.contains("scheme, host and port only"),
            "{url}: {}",
            refused.stderr
        );
    }
}

#[tokio::test]
async fn the_week_page_adds_up_its_days_pages() {
    // Arrange: store A's day of 2027-01-11 (orders on Mondays and Thursdays, one Tuesday's).
    let (_dir, app) = producers_app(&[]).await;
    seed_the_day(&app).await;
    let mut producer = Visitor::signed_in(&app, PRODUCER_A).await;

    // Act: the week from Sunday 2027-01-10.
    let week = producer.get("/app/weeks/2027-01-10").await;

    // Assert: store A's delivery days (Mondays, Tuesdays, Thursdays, Saturdays), each with
    // its day page's deliveries, and the week's boxes and extras the sum of the days'.
    assert_eq!(week.status, 200, "{}", week.body);
    let dates = week.attributes("data-date");
    assert_eq!(
        dates,
        ["2027-01-11", "2027-01-12", "2027-01-14", "2027-01-16"]
    );
    let counts: Vec<u64> = week
        .attributes("data-deliveries")
        .iter()
        .map(|count| count.parse().unwrap())
        .collect();
    assert_eq!(counts, [5, 1, 5, 0]);
    let mut boxes = BTreeMap::<u64, u64>::new();
    let mut extras = BTreeMap::<u64, u64>::new();
    for (date, count) in dates.iter().zip(&counts) {
        let day = producer.get(&format!("/app/deliveries/{date}")).await;
        assert_eq!(day.status, 200);
        assert_eq!(
            day.attributes("data-order-id").len() as u64,
            *count,
            "{date}"
        );
        for (id, n) in day.pairs("data-box-id", "data-count") {
            *boxes.entry(id).or_default() += n;
        }
        for (id, n) in day.pairs("data-extra-id", "data-quantity") {
            *extras.entry(id).or_default() += n;
        }
        assert!(
            week.body
                .contains(&format!("href=\"/app/deliveries/{date}\"")),
            "a link to {date}"
        );
    }
    assert_eq!(
        week.pairs("data-box-id", "data-total"),
        boxes.into_iter().collect::<Vec<_>>()
    );
    assert_eq!(
        week.pairs("data-extra-id", "data-total"),
        extras.into_iter().collect::<Vec<_>>()
    );
    for around in ["/app/weeks/2027-01-03", "/app/weeks/2027-01-17"] {
        assert!(
            week.body.contains(&format!("href=\"{around}\"")),
            "{around}"
        );
    }
    let day = producer.get(&format!("/app/deliveries/{DAY}")).await;
    assert!(day.body.contains("href=\"/app/weeks/2027-01-10\""));
    // Store B's producer sees store B's week only: its one delivery on Monday.
    let mut producer_b = Visitor::signed_in(&app, PRODUCER_B).await;
    let week_b = producer_b.get("/app/weeks/2027-01-10").await;
    assert_eq!(week_b.status, 200);
    assert_eq!(week_b.attributes("data-deliveries")[0], "1");
    assert!(!week_b.body.contains("Store A"));
    // Not a date: no page.
    assert_eq!(producer.get("/app/weeks/2027-13-01").await.status, 404);
}

#[tokio::test]
async fn the_days_csv_download_neutralises_formulas_and_the_apis_csv_keeps_them() {
    // Arrange: a customer whose name, note and phone a spreadsheet would run as formulas.
    let (_dir, app) = producers_app(&[]).await;
    let mut body = customer_body("eve@example.com");
    body["first_name"] = json!("=HYPERLINK(\"https://evil.example\",\"Click\")");
    body["address"]["delivery_note"] = json!("@SUM(1+1)");
    body["address"]["home_phone"] = json!("+44 20 7946 0000");
    let eve = id_of(&app.create_customer_ok(&body).await);
    order_a(&app, eve, json!({})).await;
    let mut producer = Visitor::signed_in(&app, PRODUCER_A).await;

    // Act
    let download = producer.get(&format!("/app/deliveries/{DAY}.csv")).await;
    let api = api_csv(&app).await;

    // Assert
    assert_eq!(download.status, 200);
    let cells = |text: &str| -> Vec<Vec<String>> {
        csv::Reader::from_reader(text.as_bytes())
            .records()
            .map(|record| record.unwrap().iter().map(str::to_owned).collect())
            .collect()
    };
    let (safe, exact) = (cells(&download.body), cells(&api));
    assert_eq!(safe.len(), 1);
    assert_eq!(safe[0].len(), exact[0].len());
    for (safe, exact) in safe[0].iter().zip(&exact[0]) {
        if exact.starts_with(['=', '+', '-', '@', '\t', '\r']) {
            assert_eq!(*safe, format!("'{exact}"));
        } else {
            assert_eq!(safe, exact);
        }
    }
    let api_row = exact[0].join("|");
    for formula in ["=HYPERLINK(", "@SUM(1+1)", "+44 20 7946 0000"] {
        assert!(
            exact[0].iter().any(|cell| cell.starts_with(formula)),
            "the API keeps {formula:?} as given: {api_row}"
        );
        assert!(safe[0].iter().any(|cell| *cell
            == format!(
                "'{}",
                exact[0].iter().find(|c| c.starts_with(formula)).unwrap()
            )));
    }
}

#[tokio::test]
async fn a_session_outlives_a_restart_and_a_sign_out_ends_it_for_good() {
    // Arrange: two browsers of one producer, signed in.
    let dir = DataDir::with_catalogue(producers_catalogue());
    let mut app = Launch::new().on(&dir).spawn().await;
    let mut kept = Visitor::signed_in(&app, PRODUCER_A).await;
    let leaving = Visitor::signed_in(&app, PRODUCER_A).await;
    let day = format!("/app/deliveries/{DAY}");
    assert_eq!(kept.get(&day).await.status, 200);
    let (kept_cookies, leaving_cookies) = (kept.cookies.clone(), leaving.cookies.clone());

    // Act: the process restarts; then one browser signs out, and the process restarts again.
    app.terminate_ok(std::time::Duration::from_secs(20));
    drop(app);
    let mut app = Launch::new().on(&dir).spawn().await;
    let mut kept = Visitor::new(&app);
    kept.cookies = kept_cookies.clone();
    let after_restart = kept.get(&day).await;
    let mut leaving = Visitor::new(&app);
    leaving.cookies = leaving_cookies.clone();
    let page = leaving.get(&day).await;
    assert_eq!(page.status, 200, "the other browser too");
    let token = page.form_token();
    let signed_out = leaving
        .post("/app/sign_out", &[("form_token", &token)])
        .await;
    app.terminate_ok(std::time::Duration::from_secs(20));
    drop(app);
    let app = Launch::new().on(&dir).spawn().await;
    let mut kept = Visitor::new(&app);
    kept.cookies = kept_cookies;
    let mut leaving = Visitor::new(&app);
    leaving.cookies = leaving_cookies;

    // Assert
    assert_eq!(after_restart.status, 200, "signed in across the restart");
    assert_eq!(signed_out.status, 303);
    assert_eq!(kept.get(&day).await.status, 200, "and across the next");
    let refused = leaving.get(&day).await;
    assert_eq!(refused.status, 303, "the signed-out cookie opens nothing");
    assert_eq!(refused.location(), Some("/app/sign_in"));
}
