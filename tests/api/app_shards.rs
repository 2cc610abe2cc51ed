//! The producers' app at the one address of a sharded deployment: two shards behind a real
//! HAProxy configured by `boxsub haproxy-config` (stores A and B on shard one, store C on
//! shard two), a real browser (Chromium) signing in at HAProxy's address. A sign-in that
//! reaches a shard not serving the producer's webstore checks the password, sets the routing
//! cookie and sends the form back (307), and HAProxy routes the browser's app by that cookie
//! through the webstore map; `boxsub move-webstore` switches the cookie's route with the API
//! keys', and the producers' sessions travel with the webstore.

use crate::helpers::{Browser, Deployment, PRODUCER_A, PRODUCER_C, STORE_C};

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
    // A wrong password learns nothing of where the account lives: no cookie, no redirect.
    let Some(stranger) = Browser::start(test).await else {
        return;
    };
    let (path, _) = sign_in_at(&stranger, &base, (PRODUCER_C.0, "not the password")).await;
    assert_eq!(path, "/app/sign_in");
    assert!(stranger.cookie("boxsub_webstore").await.is_none());
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
