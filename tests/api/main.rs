//! Black-box HTTP acceptance tests for boxsub.
//!
//! Every test starts the real `boxsub` binary (`spawn_app()` in `helpers`) on
//! an ephemeral port of 127.0.0.1, with a catalogue and data directory of its
//! own, and talks to it over HTTP as a client of the contract would.

mod accounts;
mod app;
mod app_browser;
mod app_shards;
mod auth_and_errors;
mod catalogue_reads;
mod catalogue_reload;
mod charges;
mod cli;
mod concurrency;
mod contract;
mod crash;
mod customers;
mod cut_writes;
mod durability;
mod events;
mod fair_passwords;
mod frozen_lists;
mod group_events;
mod group_harness;
mod group_messages;
mod group_security;
mod group_sessions;
mod group_snapshots;
mod helpers;
mod host_faults;
mod hostile;
mod idempotency;
mod isolation;
mod lifecycle;
mod long_histories;
mod move_edges;
mod move_events;
mod move_groups;
mod move_safety;
mod moves;
mod operations;
mod orders;
mod partitions;
mod quotas;
mod replication;
mod robustness;
mod schedules;
mod sharding;
mod sign_in;
mod store_format;
mod transfer;
mod verify;
mod webhook_snippets;
mod webhooks;
mod zz_skipped;
