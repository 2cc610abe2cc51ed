//! The producers' app at the one address of a sharded deployment: two shards behind a real
//! HAProxy configured by `boxsub haproxy-config` (stores A and B on shard one, store C on
//! shard two), a real browser (Chromium) signing in at HAProxy's address. A sign-in that
//! reaches a shard not serving the producer's webstore is sent on unchecked: the shard sets
//! the routing cookie and sends the form back (307), right password or wrong, and HAProxy
//! routes the browser's app by that cookie through the webstore map to the shard that checks
//! it, whose throttle alone counts the account's guesses; `boxsub move-webstore` switches the
//! cookie's route with the API keys', and the producers' sessions travel with the webstore.

use crate::helpers::{
    sample, scrape, Browser, Deployment, Page, Visitor, PRODUCER_A, PRODUCER_C, STORE_C,
};

/// Signs in at `base` through the form, as a person would, and says where the browser ended
/// and the webstore the page names.
async fn sign_in_at(
    browser: &Browser,
    base: &str,
    (email, password): (&str, &str),
) -> (String, String) {
    browser.goto(&format!("{base}/app/sign_in")).await;
    browser.fill("input[name=email]", email).await;
    browser.fill("input[name=password]", password).await;
    browser
        .click("form[action='/app/sign_in'] button[type=submit]")
        .await;
    let path = browser.current_path().await;
    let webstore = if browser.count(".webstore").await > 0 {
        browser.text(".webstore").await
    } else {
        String::new()
    };
    (path, webstore)
}

#[tokio::test]
async fn producers_of_either_shard_sign_in_at_one_address_and_still_do_after_a_move() {
    let test = "producers_of_either_shard_sign_in_at_one_address_and_still_do_after_a_move";
    let Some(deployment) = Deployment::start(test).await else {
        return;
    };
    let base = deployment.base();

    // Store A's producer: shard one, HAProxy's default for a browser without the cookie.
    {
        let Some(browser) = Browser::start(test).await else {
            return;
        };
        let (path, webstore) = sign_in_at(&browser, &base, PRODUCER_A).await;
        assert!(path.starts_with("/app/deliveries/"), "{path}");
        assert_eq!(webstore, "Store A Organics");
        let cookie = browser.cookie("boxsub_webstore").await.expect("routed");
        assert_eq!(cookie.value(), "store-a");
    }

    // Store C's producer: the default shard checks the password, sets the routing cookie and
    // sends the form on to shard two, which signs them in.
    let Some(browser) = Browser::start(test).await else {
        return;
    };
    let (path, webstore) = sign_in_at(&browser, &base, PRODUCER_C).await;
    assert!(path.starts_with("/app/deliveries/"), "{path}");
    assert_eq!(webstore, "Store C");
    assert_eq!(
        browser
            .cookie("boxsub_webstore")
            .await
            .expect("routed")
            .value(),
        STORE_C
    );
    browser.goto(&format!("{base}/app")).await;
    assert_eq!(browser.text(".webstore").await, "Store C", "still routed");
    // A wrong password is sent on like the right one, and refused by the shard that checks
    // it.
    let Some(stranger) = Browser::start(test).await else {
        return;
    };
    let (path, _) = sign_in_at(&stranger, &base, (PRODUCER_C.0, "not the password")).await;
    assert_eq!(path, "/app/sign_in");
    assert!(stranger
        .text("[role=alert]")
        .await
        .contains("Wrong email or password"));
    drop(stranger);

    // Store C moves to shard one: the webstore map follows, and so does the session (it
    // travels with the webstore's data): the producer, still signed in, reaches their day at
    // the same address.
    let moved = deployment.move_webstore(STORE_C, "one");
    assert!(
        moved.status.is_some_and(|s| s.success()),
        "{}",
        moved.stderr
    );
    let map = std::fs::read_to_string(deployment.path("shards-webstores.map")).unwrap();
    assert!(map.contains("store-c shard_one"), "{map}");
    browser.goto(&format!("{base}/app")).await;
    assert!(
        browser.current_path().await.starts_with("/app/deliveries/"),
        "still signed in after the move"
    );
    assert_eq!(browser.text(".webstore").await, "Store C");
    // Signed out there, for good.
    browser
        .click("form[action='/app/sign_out'] button[type=submit]")
        .await;
    browser.goto(&format!("{base}/app")).await;
    assert_eq!(browser.current_path().await, "/app/sign_in");
}

/// An answer as a client sees it, less what differs between any two answers (the date, the
/// request id).
fn seen(page: &Page) -> (u16, Vec<(String, String)>, String) {
    let mut headers: Vec<(String, String)> = page
        .headers
        .iter()
        .filter(|(name, _)| !matches!(name.as_str(), "date" | "x-request-id"))
        .map(|(name, value)| (name.to_string(), value.to_str().unwrap_or("").to_owned()))
        .collect();
    headers.sort();
    (page.status, headers, page.body.clone())
}

/// Posts the sign-in form with `password` for producer C, from a visitor whose routing
/// cookie (if any) is `route`, and follows a 307 as a browser would; the answer, and whether
/// it was sent on.
async fn guess(visitor: &mut Visitor, route: Option<&str>, password: &str) -> (Page, bool) {
    match route {
        Some(route) => visitor
            .cookies
            .insert("boxsub_webstore".into(), route.into()),
        None => visitor.cookies.remove("boxsub_webstore"),
    };
    let token = visitor.get("/app/sign_in").await.form_token();
    let form = [
        ("email", PRODUCER_C.0),
        ("password", password),
        ("form_token", token.as_str()),
    ];
    let first = visitor.post("/app/sign_in", &form).await;
    if first.status != 307 {
        return (first, false);
    }
    assert_eq!(first.location(), Some("/app/sign_in"));
    (visitor.post("/app/sign_in", &form).await, true)
}

#[tokio::test]
async fn a_shard_without_the_webstore_sends_sign_ins_on_unchecked_so_answers_and_guesses_are_as_on_one_shard(
) {
    let test = "a_shard_without_the_webstore_sends_sign_ins_on_unchecked_so_answers_and_guesses_are_as_on_one_shard";
    let Some(deployment) = Deployment::start(test).await else {
        return;
    };
    let base = deployment.base();
    let checks_on_one = || async {
        let metrics = scrape(deployment.one.app()).await;
        sample(&metrics, "boxsub_password_jobs_total", &[("share", "app")])
    };

    // Without the routing cookie, HAProxy sends the browser to shard one, which does not
    // serve store C: the right and the wrong password get the same answer, and neither is
    // checked there.
    let checked_before = checks_on_one().await;
    let mut answers = Vec::new();
    for password in [PRODUCER_C.1, "not the password"] {
        let mut visitor = Visitor::at(&base);
        let token = visitor.get("/app/sign_in").await.form_token();
        let form = [
            ("email", PRODUCER_C.0),
            ("password", password),
            ("form_token", token.as_str()),
        ];
        let sent_on = visitor.post("/app/sign_in", &form).await;
        assert_eq!(sent_on.status, 307, "{}", sent_on.body);
        answers.push(seen(&sent_on));
        // The browser posts again, now routed to shard two, which checks.
        let checked = visitor.post("/app/sign_in", &form).await;
        let expected = if password == PRODUCER_C.1 { 303 } else { 401 };
        assert_eq!(checked.status, expected, "{}", checked.body);
    }
    assert_eq!(
        answers[0], answers[1],
        "a right and a wrong password through a shard without the webstore"
    );
    assert_eq!(
        checks_on_one().await,
        checked_before,
        "nothing checked on shard one"
    );

    // An attacker points the routing cookie at each shard in turn: the account's guesses are
    // counted by shard two alone, so they are the ten of one shard (tests/api/app.rs), not
    // ten a shard.
    let mut attacker = Visitor::at(&base);
    // The wrong password above was the first.
    let mut wrong = 1;
    let mut sent_on = 0;
    for attempt in 0..30 {
        let route = if attempt % 2 == 0 { "store-a" } else { STORE_C };
        let (answer, was_sent_on) = guess(&mut attacker, Some(route), "a guess").await;
        sent_on += usize::from(was_sent_on);
        match answer.status {
            401 => wrong += 1,
            429 => {
                assert!(
                    answer
                        .body
                        .contains("Too many failed sign-ins for this email"),
                    "{}",
                    answer.body
                );
                break;
            }
            other => panic!("attempt {attempt}: {other} {}", answer.body),
        }
    }
    assert_eq!(
        wrong, 10,
        "guesses allowed for one account across two shards"
    );
    assert!(
        sent_on >= 5,
        "the guesses through shard one were sent on: {sent_on}"
    );
    assert_eq!(
        checks_on_one().await,
        checked_before,
        "still nothing checked on shard one"
    );
    // Even the right password waits now, wherever it is sent.
    let (answer, _) = guess(&mut attacker, None, PRODUCER_C.1).await;
    assert_eq!(answer.status, 429, "{}", answer.body);
    // Producer A, whose webstore shard one serves, is not held back by any of it.
    let mut producer_a = Visitor::at(&base);
    assert_eq!(producer_a.sign_in(PRODUCER_A).await.status, 303);
}

#[tokio::test]
async fn a_page_request_reaching_a_shard_without_its_webstore_is_told_served_elsewhere() {
    let test = "a_page_request_reaching_a_shard_without_its_webstore_is_told_served_elsewhere";
    let Some(deployment) = Deployment::start(test).await else {
        return;
    };
    // Straight to shard one, which does not serve store C, as a front end whose map is not
    // yet current would send it: every page of the app is a 421 "served elsewhere", signed
    // in or not (its session, if any, is on store C's shard), never the sign-in form.
    let shard_one = deployment.one.app().url("");
    let mut misrouted = Visitor::at(&shard_one);
    misrouted
        .cookies
        .insert("boxsub_webstore".into(), STORE_C.into());
    for path in [
        "/app",
        "/app/deliveries/2027-01-11",
        "/app/deliveries/2027-01-11.csv",
        "/app/weeks/2027-01-11",
    ] {
        let page = misrouted.get(path).await;
        assert_eq!(
            page.status,
            421,
            "{path}: {:?} {}",
            page.location(),
            page.body
        );
        assert!(
            page.body.contains("served by another node"),
            "{path}: {}",
            page.body
        );
    }
    // A browser routed to the shard of its cookie's webstore, or without the cookie, and
    // not signed in, is sent to the sign-in form as anywhere.
    for route in [Some("store-a"), None] {
        let mut visitor = Visitor::at(&shard_one);
        if let Some(route) = route {
            visitor
                .cookies
                .insert("boxsub_webstore".into(), route.into());
        }
        let page = visitor.get("/app/deliveries/2027-01-11").await;
        assert_eq!(page.status, 303, "{route:?}");
        assert_eq!(page.location(), Some("/app/sign_in"));
    }
}

/// A sign-in's answer as its shape: the status, the names of the cookies it sets, and its
/// body with the email it echoes and the visitor's own form token taken out.
fn shape(page: &Page, email: &str) -> (u16, Vec<String>, String) {
    let token = page.form_token();
    let mut cookies: Vec<String> = page
        .headers
        .get_all("set-cookie")
        .iter()
        .filter_map(|value| value.to_str().ok()?.split('=').next().map(str::to_owned))
        .collect();
    cookies.sort();
    let body = page.body.replace(email, "EMAIL").replace(&token, "TOKEN");
    (page.status, cookies, body)
}

#[tokio::test]
async fn known_and_unknown_emails_are_refused_alike_through_either_shard() {
    let test = "known_and_unknown_emails_are_refused_alike_through_either_shard";
    let Some(deployment) = Deployment::start(test).await else {
        return;
    };
    let base = deployment.base();
    // Posts the form from a browser without the routing cookie (HAProxy's default shard),
    // following a 307 as a browser would: the answers, and the routing cookie at the end.
    let sign_in = |email: String, password: &'static str| {
        let base = base.clone();
        async move {
            let mut visitor = Visitor::at(&base);
            let token = visitor.get("/app/sign_in").await.form_token();
            let form = [
                ("email", email.as_str()),
                ("password", password),
                ("form_token", token.as_str()),
            ];
            let first = visitor.post("/app/sign_in", &form).await;
            let last = if first.status == 307 {
                visitor.post("/app/sign_in", &form).await
            } else {
                first
            };
            let route = visitor.cookies.get("boxsub_webstore").cloned();
            (last, route)
        }
    };
    let (known, known_route) = sign_in(PRODUCER_C.0.to_owned(), "not the password").await;
    assert_eq!(known.status, 401, "{}", known.body);
    assert_eq!(known_route.as_deref(), Some(STORE_C));
    let known_shape = shape(&known, PRODUCER_C.0);
    assert!(
        known_shape.1.contains(&"boxsub_webstore".to_owned()),
        "{known_shape:?}"
    );
    // Unknown emails, some routed to either shard's webstores: each refused as the
    // producer's wrong password is, routing cookie and all.
    let mut routes = std::collections::BTreeSet::new();
    for n in 0..12 {
        let email = format!("nobody{n}@example.org");
        let (unknown, route) = sign_in(email.clone(), "not the password").await;
        assert_eq!(shape(&unknown, &email), known_shape, "{email}");
        routes.insert(route.expect("an unknown email is routed too"));
    }
    assert!(
        routes.len() > 1,
        "unknown emails spread over webstores: {routes:?}"
    );
    // The right password still signs in.
    let (right, _) = sign_in(PRODUCER_C.0.to_owned(), PRODUCER_C.1).await;
    assert_eq!(right.status, 303, "{}", right.body);
}
