//! The test harness: starts the real `boxsub` binary on an ephemeral port of
//! 127.0.0.1 with a catalogue and data directory of its own, and offers typed
//! request helpers and assertions on the contract's response shapes.
//!
//! It is split by concern, and every name is re-exported here, so that tests use
//! `crate::helpers::NAME` whichever file it lives in:
//!
//! - [`server`]: starting the server process with a [`Launch`] (its catalogue, data
//!   directory, flags, environment, limits and log), signalling and stopping it, data
//!   directories, and running the binary's other commands;
//! - [`client`]: the HTTP client wrappers of [`TestApp`], raw TCP exchanges, URLs;
//! - [`contract`]: the OpenAPI check every answer of [`TestApp::send`] goes through;
//! - [`assertions`]: assertions on answers and resources;
//! - [`fixtures`]: the test webstores' credentials, catalogue, bodies and messages;
//! - [`skip`]: what a test does when the host lacks something it needs;
//! - [`browser`]: Debian's headless Chromium driven through chromedriver, for the
//!   producers' web app (with printing to PDF and axe-core);
//! - [`nats`] and [`haproxy`]: a real three-node NATS JetStream cluster and a real
//!   HAProxy on loopback, for the replicated group's tests;
//! - [`group`]: a replicated group of boxsub nodes on such a cluster, and what its tests
//!   share (keyed creates, and the checks that nothing acknowledged is lost or doubled);
//! - [`shards`]: two shards by webstore behind a real HAProxy, for moves between them (the
//!   second may be a replicated group), and carts that write through it;
//! - [`metrics`]: `/metrics` parsed;
//! - [`receiver`]: a webhook receiver on loopback whose answers a test sets (and that can
//!   go down and come back on its port);
//! - [`links`]: TCP proxies on loopback that a test cuts (every byte stalls, nothing is
//!   closed) and heals, between a group's nodes and their NATS servers;
//! - [`ledger`]: the crash tests' marked write requests and the [`Ledger`] of what the
//!   store must hold after a restart, with its checks (its other names, `Answer` and
//!   `Store` among them, are used as `helpers::ledger::NAME`, since they would clash here).
//!
//! Every process started here is owned by a value whose `Drop` kills and reaps
//! it; every wait is bounded in count and time.

mod assertions;
mod browser;
mod client;
pub mod contract;
mod fixtures;
mod group;
mod haproxy;
pub mod ledger;
mod links;
mod metrics;
mod nats;
mod receiver;
mod server;
mod shards;
mod skip;
mod visitor;

pub use assertions::{assert_rfc3339_utc, id_of, SoftAsserts};
pub use browser::{axe_core_source, Browser, BrowserOptions, Viewport};
pub use client::{
    enc, parse_link_header, path_and_query, query_param, read_raw_response, read_until_closed,
    Closed, RawResponse, TestResponse,
};
pub use fixtures::{
    customer_body, customer_body_b, default_catalogue, producers_catalogue, relaxed_catalogue,
    sha256_hex, store_a, store_b, Creds, ADDRESS_FIELDS, BLANK, INVALID, MSG_BAD_CREDS,
    MSG_INVALID_JSON, MSG_METHOD_NOT_ALLOWED, MSG_MISSING_CREDS, MSG_NOT_FOUND, MSG_TOO_LARGE,
    NOT_IN_LIST, PRODUCER_A, PRODUCER_B, STORE_A, STORE_A_KEY, STORE_A_SECRET, STORE_B,
    STORE_B_KEY, STORE_B_SECRET, TAKEN, TOO_LONG_255,
};
pub use group::{
    assert_every_read_held, assert_nothing_lost_or_doubled, group_stream, health, keyed_create,
    read_until, seeded_dirs, until_serving, wait_caught_up, write_to_group_showing,
    write_to_group_until, write_until, Group, Outcome, Read, FAILOVER_BOUND,
};
pub use haproxy::Haproxy;
pub use ledger::Ledger;
pub use links::Link;
pub use metrics::{sample, scrape};
pub use nats::{NatsCluster, NatsOptions, NatsSecurity};
pub use receiver::{Answer, Delivery, Receiver};
pub use server::{
    boxsub_command, run_to_exit, serve_to_exit, spawn_app, DataDir, Finished, Launch, TestApp,
};
pub use shards::{
    admin, admin_at, admin_of, assert_each_once, cart, cart_since, create, moving_webstore,
    seed_customers, store_c, Deployment, LivedOrders, Shard, PRODUCER_C, STORE_C, TOKEN,
};
pub use skip::{host_program, skip_or_fail, skipped_so_far};
pub use visitor::{Page, Visitor};
