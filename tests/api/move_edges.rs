//! A move's edges, where a request meets the move at its worst moment, behind a real
//! HAProxy:
//!
//! - a cart's create held on its way to the source (a link in front of it) while the move
//!   switches HAProxy to the target and the source releases the webstore: the source answers
//!   it 503 with `Retry-After: 1` (not 421), and the cart's retry with its key lands once, on
//!   the target.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::helpers::*;

/// A keyed create of store B through `base`: the status, `Retry-After` and the body.
async fn create_b(base: &str, email: &str, key: &str) -> (u16, Option<String>, Value) {
    let response = reqwest::Client::new()
        .post(format!("{base}/v1/customers"))
        .header("API-Key", STORE_B_KEY)
        .header("API-Secret", STORE_B_SECRET)
        .header("Idempotency-Key", key)
        .json(&customer_body_b(email))
        .timeout(Duration::from_secs(60))
        .send()
        .await
        .expect("HAProxy answers");
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    (
        status,
        retry_after,
        response.json().await.unwrap_or(Value::Null),
    )
}

/// Waits (bounded) until `link` has held `count` requests.
async fn until_held(link: &Link, count: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while link.requests_held() < count {
        assert!(Instant::now() < deadline, "the link held no request");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_write_held_at_the_source_across_the_switch_is_answered_503_and_lands_once_on_the_target()
{
    let test = "move_edges::a_write_held_at_the_source_across_the_switch_is_answered_503_and_lands_once_on_the_target";
    let Some(mut deployment) = Deployment::start(test).await else {
        return;
    };
    // HAProxy reaches shard one through a link, which lets its health checks through.
    let link = Link::to(deployment.one.api().parse().unwrap()).await;
    deployment.reach_one_at(&link.address().to_string(), test);
    let base = deployment.base();
    seed_customers(&base, &store_b(), "seed", 5).await;

    // Arrange: a cart's create routed to the source, held on its way there.
    link.hold_requests(b"POST /v1/customers");
    let held = tokio::spawn({
        let base = base.clone();
        async move { create_b(&base, "held@example.com", "held-1").await }
    });
    until_held(&link, 1).await;

    // Act: the move runs to its end (HAProxy switched, the source released the webstore),
    // then the held create reaches the source.
    let moved = tokio::task::block_in_place(|| deployment.move_webstore(STORE_B, "two"));
    assert!(
        moved.status.is_some_and(|s| s.success()),
        "{}\n{}",
        moved.stdout,
        moved.stderr
    );
    assert_eq!(deployment.one.held(STORE_B).await["recorded"], "released");
    link.release_requests();
    let (status, retry_after, body) = held.await.expect("the held create");

    // Assert: a 503 a cart retries, and its retry with the same key lands once, on the
    // target.
    assert_eq!(status, 503, "{body}");
    assert_eq!(retry_after.as_deref(), Some("1"));
    assert!(body["message"].as_str().is_some(), "{body}");
    let (status, _, created) = create_b(&base, "held@example.com", "held-1").await;
    assert_eq!(status, 201, "the retry lands on the target: {created}");
    let (again, _, replayed) = create_b(&base, "held@example.com", "held-1").await;
    assert_eq!(
        (again, &replayed["id"]),
        (201, &created["id"]),
        "{replayed}"
    );
    let found = deployment
        .two
        .node()
        .app()
        .lookup_email_as("held@example.com", &store_b())
        .await;
    assert_eq!(found.len(), 1, "once on the target: {found:?}");
    let source = deployment.one.held(STORE_B).await;
    assert_eq!(source["customers"], 0, "nothing on the source: {source}");
}
