//! Producers' sessions in a replicated group: a producer signed in on the primary stays
//! signed in when it dies and the standby takes over; a sign-out there holds on every node,
//! the old primary too once it has rejoined and taken over in turn.

use std::time::Duration;

use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};

use crate::helpers::*;

/// A browser of the app reduced to its cookies, sent to whichever node serves.
#[derive(Default)]
struct Cookies(Vec<(String, String)>);

impl Cookies {
    fn header(&self) -> String {
        self.0
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn keep(&mut self, response: &reqwest::Response) {
        for set in response.headers().get_all(SET_COOKIE) {
            let pair = set.to_str().unwrap().split(';').next().unwrap();
            let (name, value) = pair.split_once('=').unwrap();
            self.0.retain(|(kept, _)| kept != name);
            self.0.push((name.to_owned(), value.to_owned()));
        }
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// `GET path` on `app` with `cookies`: the status, the `Location` and the body.
async fn get(app: &TestApp, cookies: &mut Cookies, path: &str) -> (u16, Option<String>, String) {
    let response = client()
        .get(app.url(path))
        .header(COOKIE, cookies.header())
        .send()
        .await
        .unwrap();
    cookies.keep(&response);
    let location = response
        .headers()
        .get(LOCATION)
        .map(|value| value.to_str().unwrap().to_owned());
    (
        response.status().as_u16(),
        location,
        response.text().await.unwrap(),
    )
}

/// A form posted from the app's own page on `app`.
async fn post(app: &TestApp, cookies: &mut Cookies, path: &str, form: &[(&str, &str)]) -> u16 {
    let response = client()
        .post(app.url(path))
        .header(COOKIE, cookies.header())
        .header("Origin", app.url("").trim_end_matches('/'))
        .header("Sec-Fetch-Site", "same-origin")
        .form(form)
        .send()
        .await
        .unwrap();
    cookies.keep(&response);
    response.status().as_u16()
}

fn form_token(page: &str) -> String {
    let needle = "name=\"form_token\" value=\"";
    let start = page.find(needle).expect("a form token") + needle.len();
    page[start..start + 64].to_owned()
}

const DAY: &str = "/app/deliveries/2027-01-11";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_session_survives_a_failover_and_its_sign_out_holds_on_every_node() {
    let test = "a_session_survives_a_failover_and_its_sign_out_holds_on_every_node";
    let dirs = (0..2)
        .map(|_| DataDir::with_catalogue(producers_catalogue()))
        .collect();
    let Some(mut group) = Group::start_from(test, dirs, &[], NatsOptions::default()).await else {
        return;
    };
    let first = group.primary(Duration::from_secs(20)).await;
    let app = group.app(first);
    let mut browser = Cookies::default();
    let (status, _, form) = get(app, &mut browser, "/app/sign_in").await;
    assert_eq!(status, 200);
    let token = form_token(&form);
    let (email, password) = PRODUCER_A;
    let signed_in = post(
        app,
        &mut browser,
        "/app/sign_in",
        &[
            ("email", email),
            ("password", password),
            ("form_token", &token),
        ],
    )
    .await;
    assert_eq!(signed_in, 303);
    assert_eq!(get(app, &mut browser, DAY).await.0, 200);

    // Act: the primary dies; the standby takes over.
    group.members[first]
        .app
        .take()
        .expect("the primary")
        .crash();
    let second = group.primary(Duration::from_secs(20)).await;
    assert_ne!(second, first);
    let app = group.app(second);
    let (status, _, page) = get(app, &mut browser, DAY).await;

    // Assert: still signed in; then signed out on the new primary, for good.
    assert_eq!(status, 200, "the session came over with the changelog");
    let token = form_token(&page);
    assert_eq!(
        post(
            app,
            &mut browser,
            "/app/sign_out",
            &[("form_token", &token)]
        )
        .await,
        303
    );
    let (status, location, _) = get(app, &mut browser, DAY).await;
    assert_eq!((status, location.as_deref()), (303, Some("/app/sign_in")));
    // The old primary rejoins, catches up, and takes over in turn: the cookie opens
    // nothing there either.
    group.restart(first).await;
    wait_caught_up(group.app(first)).await;
    group.members[second]
        .app
        .take()
        .expect("the primary")
        .crash();
    let third = group.primary(Duration::from_secs(30)).await;
    assert_eq!(third, first);
    let (status, location, _) = get(group.app(third), &mut browser, DAY).await;
    assert_eq!((status, location.as_deref()), (303, Some("/app/sign_in")));
}
