//! The request scenarios: which server each targets (durable, durable without gathering,
//! durable with a webhook endpoint, durability off, a webstore past its read quota), the request of each sequence number, and the status it must get.
//! Must not touch: running them (`super::run`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::load::{self, request};
use super::servers::credentials;
use super::SEEDED;

/// Which server a scenario drives.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Target {
    Durable,
    /// Durable, each sync started as soon as the previous one ends (`--commit-interval-us
    /// 0`): what gathering writers saves, measured in the same run.
    DurableSyncingAtOnce,
    NotDurable,
    /// Durable, with one webhook endpoint sent every event (the bench's receiver).
    DurableWithWebhook,
    /// Durable, the driven webstore allowed one read a second: what a 429 of a quota costs.
    OverQuota,
}

pub(super) struct Scenario {
    pub(super) name: &'static str,
    pub(super) target: Target,
    pub(super) request: load::RequestFn,
    pub(super) expect: load::ExpectFn,
}

pub(super) fn scenarios() -> Vec<Scenario> {
    let credentials = credentials();
    let customer = |n: u64| n % SEEDED + 1;
    let order_body = move |n: u64| {
        format!(
            r#"{{"customer_id":{},"box_id":217,"frequency":"weekly","exclusions":[241],"extras":[{{"id":28,"quantity":1}}]}}"#,
            customer(n)
        )
    };
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let fresh = Arc::new(AtomicU64::new(0));
    let post_order: load::RequestFn =
        Arc::new(move |n| request("POST", "/v1/orders", credentials, Some(&order_body(n))));
    let created = load::expect_status(201);
    let ok = load::expect_status(200);
    let by_email = move |n: u64| {
        request(
            "GET",
            &format!("/v1/customers?email=seed{}@example.com", customer(n)),
            credentials,
            None,
        )
    };
    let order_by_id = move |n: u64| {
        request(
            "GET",
            &format!("/v1/orders/{}", customer(n)),
            credentials,
            None,
        )
    };
    vec![
        Scenario {
            name: "orders_create",
            target: Target::Durable,
            request: post_order.clone(),
            expect: created.clone(),
        },
        Scenario {
            name: "orders_create_webhook",
            target: Target::DurableWithWebhook,
            request: post_order.clone(),
            expect: created.clone(),
        },
        Scenario {
            name: "orders_create_commit_interval_0",
            target: Target::DurableSyncingAtOnce,
            request: post_order.clone(),
            expect: created.clone(),
        },
        Scenario {
            name: "customers_create",
            target: Target::Durable,
            request: Arc::new(move |_| {
                let n = fresh.fetch_add(1, Ordering::Relaxed);
                let body = format!(
                    r#"{{"first_name":"Bench","last_name":"Load","email":"bench-{run}-{n}@example.com","delivery_service_id":91,"address":{{"address_1":"1 Load Street","city":"London"}}}}"#
                );
                request("POST", "/v1/customers", credentials, Some(&body))
            }),
            expect: created.clone(),
        },
        Scenario {
            name: "customers_by_email",
            target: Target::Durable,
            request: Arc::new(by_email),
            expect: ok.clone(),
        },
        Scenario {
            name: "order_by_id",
            target: Target::Durable,
            request: Arc::new(order_by_id),
            expect: ok.clone(),
        },
        Scenario {
            name: "mix_80_read_20_order_create",
            target: Target::Durable,
            request: Arc::new(move |n| match n % 5 {
                0 => post_order(n),
                1 | 3 => by_email(n),
                _ => order_by_id(n),
            }),
            expect: Arc::new(move |n, status| status == if n % 5 == 0 { 201 } else { 200 }),
        },
        Scenario {
            name: "reads_past_quota_429",
            target: Target::OverQuota,
            request: Arc::new(move |_| request("GET", "/v1/boxes", credentials, None)),
            // The quota lets one request a second through.
            expect: Arc::new(|_, status| status == 429 || status == 200),
        },
        Scenario {
            name: "orders_create_durability_off",
            target: Target::NotDurable,
            request: Arc::new(move |n| {
                request("POST", "/v1/orders", credentials, Some(&order_body(n)))
            }),
            expect: created.clone(),
        },
    ]
}
