//! Concurrent writes: of any number of creates and updates claiming one email
//! exactly one wins, and concurrent creates get distinct ids and numbers.

use std::collections::BTreeSet;

use futures_util::future::join_all;
use serde_json::json;

use crate::helpers::{customer_body, id_of, spawn_app, TAKEN};

/// The email with the letters at `i`'s set bits upper-cased.
fn case_variant(email: &str, i: usize) -> String {
    email
        .chars()
        .enumerate()
        .map(|(pos, c)| {
            if (i >> (pos % 8)) & 1 == 1 {
                c.to_ascii_uppercase()
            } else {
                c
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_concurrent_creates_of_one_email_yield_exactly_one_customer() {
    // Arrange
    let app = spawn_app().await;
    let app = &app;
    let bodies: Vec<_> = (0..20)
        .map(|i| customer_body(&case_variant("race@example.com", i)))
        .collect();

    // Act
    let responses = join_all(
        bodies
            .iter()
            .map(|body| async move { app.create_customer(body).await }),
    )
    .await;

    // Assert
    let created: Vec<_> = responses.iter().filter(|r| r.status == 201).collect();
    assert_eq!(
        created.len(),
        1,
        "statuses: {:?}",
        responses.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    for response in responses.iter().filter(|r| r.status != 201) {
        response.assert_error_keys(&["email"]);
        response.assert_field_error("email", TAKEN);
    }
    let found = app.lookup_email("race@example.com").await;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["id"], created[0].json()["id"]);
    let all = app.get("/v1/customers").await.json();
    assert_eq!(all.as_array().map(Vec::len), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_update_racing_creates_for_one_email_leaves_one_holder() {
    // Arrange
    let app = spawn_app().await;
    let app = &app;

    for round in 0..3 {
        let old_email = format!("mover{round}@example.com");
        let target = format!("contested{round}@example.com");
        let mover = app.create_customer_ok(&customer_body(&old_email)).await;
        let mover_path = format!("/v1/customers/{}", mover["id"]);

        // Act
        let patch = async {
            app.patch_json(&mover_path, &json!({"email": target.to_uppercase()}))
                .await
        };
        let creates = join_all((0..10).map(|i| {
            let body = customer_body(&case_variant(&target, i * 7 + round));
            async move { app.create_customer(&body).await }
        }));
        let (patch, creates) = tokio::join!(patch, creates);

        // Assert
        let patch_won = patch.status == 200;
        if !patch_won {
            patch.assert_error_keys(&["email"]);
            patch.assert_field_error("email", TAKEN);
        }
        let create_wins = creates.iter().filter(|r| r.status == 201).count();
        for response in creates.iter().filter(|r| r.status != 201) {
            response.assert_field_error("email", TAKEN);
        }
        assert_eq!(
            usize::from(patch_won) + create_wins,
            1,
            "round {round}: patch {} and creates {:?}",
            patch.status,
            creates.iter().map(|r| r.status).collect::<Vec<_>>()
        );
        let holders = app.lookup_email(&target).await;
        assert_eq!(holders.len(), 1, "round {round}: {holders:?}");
        let old_holders = app.lookup_email(&old_email).await;
        if patch_won {
            assert_eq!(holders[0]["id"], mover["id"]);
            assert!(old_holders.is_empty(), "old email must be freed");
        } else {
            assert_ne!(holders[0]["id"], mover["id"]);
            assert_eq!(old_holders.len(), 1);
            assert_eq!(old_holders[0]["id"], mover["id"]);
            assert_eq!(app.get(&mover_path).await.json(), mover);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_creates_get_distinct_ids_and_numbers() {
    // Arrange
    let app = spawn_app().await;
    let app = &app;

    // Act
    let responses = join_all((0..30).map(|i| {
        let body = customer_body(&format!("crowd{i}@example.com"));
        async move { app.create_customer(&body).await }
    }))
    .await;

    // Assert
    let customers: Vec<_> = responses
        .iter()
        .map(|r| {
            r.assert_status(201);
            r.json()
        })
        .collect();
    let ids: BTreeSet<i64> = customers.iter().map(id_of).collect();
    let numbers: BTreeSet<String> = customers
        .iter()
        .map(|c| c["number"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 30);
    let expected: BTreeSet<String> = (1..=30).map(|n| format!("{n:04}")).collect();
    assert_eq!(numbers, expected);
    let listed = app.get("/v1/customers").await;
    assert_eq!(listed.header("x-total-count").as_deref(), Some("30"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_orders_for_one_customer_are_all_kept() {
    // Arrange
    let app = spawn_app().await;
    let app = &app;
    let customer = app
        .create_customer_ok(&customer_body("busy@example.com"))
        .await;
    let customer_id = id_of(&customer);

    // Act
    let responses = join_all((0..20).map(|i| {
        let body = json!({"customer_id": customer_id, "box_id": 217 + (i % 3)});
        async move { app.create_order(&body).await }
    }))
    .await;

    // Assert
    let mut ids: Vec<i64> = responses
        .iter()
        .map(|r| {
            r.assert_status(201);
            id_of(&r.json())
        })
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 20);
    let listed: Vec<i64> = app.orders_of(customer_id).await.iter().map(id_of).collect();
    assert_eq!(listed, ids);
}
