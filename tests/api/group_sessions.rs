//! Producers' sessions in a replicated group: a producer signed in on the primary stays
//! signed in when it dies and the standby takes over; a sign-out there holds on every node,
//! the old primary too once it has rejoined and taken over in turn.

use std::time::Duration;

use crate::helpers::*;

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
    let mut browser = Visitor::signed_in(group.app(first), PRODUCER_A).await;
    assert_eq!(browser.get(DAY).await.status, 200);

    // Act: the primary dies; the standby takes over.
    group.members[first]
        .app
        .take()
        .expect("the primary")
        .crash();
    let second = group.primary(Duration::from_secs(20)).await;
    assert_ne!(second, first);
    browser.visit(group.app(second));
    let page = browser.get(DAY).await;

    // Assert: still signed in; then signed out on the new primary, for good.
    assert_eq!(page.status, 200, "the session came over with the changelog");
    let kept_cookies = browser.cookies.clone();
    let out = browser
        .post("/app/sign_out", &[("form_token", &page.form_token())])
        .await;
    assert_eq!(out.status, 303);
    // The cookie kept by someone else.
    let mut thief = Visitor::new(group.app(second));
    thief.cookies = kept_cookies;
    let old = thief.get(DAY).await;
    assert_eq!((old.status, old.location()), (303, Some("/app/sign_in")));
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
    thief.visit(group.app(third));
    let old = thief.get(DAY).await;
    assert_eq!((old.status, old.location()), (303, Some("/app/sign_in")));
}
