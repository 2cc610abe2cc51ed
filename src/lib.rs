//! boxsub: a box-subscription ordering service. Shopping carts push customers and orders in
//! over HTTP; producers (webstores) run their deliveries from them.
//!
//! Must not touch: code of its own beyond the modules' declarations.
//!
//! # Layout
//!
//! Dependencies point one way: `http` → `node` → `service` → `registry` → `actors` →
//! `events` → `index` → `store` → `domain`. Beside the chain:
//!
//! - `app` (the producers' pages) is called by `http` and reaches the rest through `service`
//!   (with the quota types of `quotas`);
//! - `replication` (a group's life) uses `node`, `service` and `store`; nothing it uses, and
//!   nothing below it, knows of it (only `config`, `startup` and `commands` name it);
//! - `webhooks` (deliveries) is started beside `service` and given only what it uses of it
//!   (`webhooks::Sources`: the store, the events, what is served here, the catalogue);
//! - `quotas` (each webstore's quotas and the fair admission of requests) is held by
//!   `service` and uses only `domain`, `metrics` and `clock`;
//! - `transfer` (export, import, backups) is used by `service` and uses `events` and `store`;
//! - `views` (the JSON shapes of customers and orders) uses only `domain` and is used by
//!   `http` and by `events` to render an event when it is read;
//! - `clock` (the wall clock), `random` (the kernel's randomness), `metrics` and `lease` (the
//!   read lease: held by `node`, taken, extended and ended by `replication`, asked by
//!   `webhooks` before each delivery) use nothing of the crate and may be used by any layer
//!   but `domain`, which is given "now" and uses nothing;
//! - `sharding` (the operator's files of a sharded deployment) and `keygen` use only
//!   `domain` (and `random`);
//! - `config`, `startup`, `commands`, `tools` and `fuzzing` sit on top and wire the rest.
//!
//! `src/layout_tests.rs` holds these arrows: a test gives each module a floor and fails on any
//! `crate::` path that names a module on its own floor or above, and on any circle of modules
//! naming each other, of any length, within a folder. This is the one statement of the chain; README.md and
//! docs/design.md point here.
//!
//! # Modules
//!
//! - [`domain`]: the rules, as pure functions and plain data (catalogue, customers, orders,
//!   emails, pagination, passwords, sign-in throttling). No I/O, no async.
//! - [`actors`]: one ractor actor per customer owns that customer and its orders and applies
//!   every change to them, one message at a time.
//! - [`registry`]: the directory of customer actors (a `DashMap`) with its secondary
//!   indexes, email → customer per webstore and order → customer.
//! - [`service`]: the entry point the front end calls, one type per concern (actor calls,
//!   idempotency, sign-in throttling, password work); every acquisition is a guard, so a
//!   request dropped at any await point leaves nothing behind.
//! - [`quotas`]: each webstore's quotas in force (GCRA limiters, requests in progress) and
//!   fair admission while the host is saturated (a queue per webstore, served in turn).
//! - [`lease`]: the read lease, until when this process may let anything out as its
//!   group's primary (answers to reads, webhook deliveries); ended for good, until it
//!   rebuilds, by a deposition or a write given up.
//! - [`node`]: what this process serves right now (the service, none while a group's
//!   standby) and what `GET /health` says.
//! - [`replication`]: a replicated group on a NATS JetStream changelog: the primary's fenced
//!   publishes, the standby's apply and takeover, replica snapshots and trimming.
//! - [`http`]: the front end: its own accept loop with connection limits and deadlines, and
//!   one warp filter for authentication, routing, parsing, rendering and errors.
//! - [`views`]: customers and orders as the API renders them, shared by the answers and the
//!   events' JSON.
//! - [`events`]: each webstore's events, written in their change's own log entry, numbered,
//!   and read up to the watermark below which all are durable (the feed's pages).
//! - [`webhooks`]: the catalogue's endpoints sent each webstore's events, signed per
//!   Standard Webhooks, in order, at least once, from a stored position.
//! - [`index`]: in-memory indexes of the stored orders (owner by order id; orders by
//!   webstore and weekday), published to by actors once an order is durable.
//! - [`store`]: persistence in three layers (the log that acknowledges, pending writes, the
//!   sled snapshot) under the repository that knows the key layout and record encoding.
//! - [`transfer`]: export, import and online backups of a store.
//! - [`sharding`]: the operator's files of a deployment sharded by webstore (the placement
//!   file, HAProxy's configuration and API-key map).
//! - [`metrics`]: the Prometheus metric families every layer counts into.
//! - [`clock`]: the wall clock as Unix seconds, read by every layer that stores or renders a
//!   time.
//! - [`random`]: the kernel's randomness: secrets, or numbers that only need to differ.
//! - [`config`], [`commands`], [`startup`], [`keygen`]: the service binary's command line,
//!   its commands, wiring and shutdown, key generation.
//!
//! Behind cargo features, out of the binary operators deploy and out of the default API:
//! `tools` (the `boxsub-tools` binary: `tools`, its command line over `tools::bench` and
//! `tools::seed`: the benchmark, its bare server and large test stores) and `fuzzing`
//! (`fuzzing`: the entry points of the fuzz targets in `fuzz/` and of their seed replay in
//! `cargo test`).

pub mod actors;
pub mod app;
pub mod clock;
pub mod commands;
pub mod config;
pub mod domain;
pub mod events;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod http;
pub mod index;
pub mod keygen;
#[cfg(test)]
mod layout_tests;
pub mod lease;
pub mod metrics;
pub mod node;
pub mod quotas;
pub mod random;
pub mod registry;
pub mod replication;
pub mod service;
pub mod sharding;
pub mod startup;
pub mod store;
#[cfg(feature = "tools")]
pub mod tools;
pub mod transfer;
pub mod views;
pub mod webhooks;
