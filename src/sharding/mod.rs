//! Sharding by webstore, as operators run it: the placement file that says which shard
//! serves each webstore (the one source of truth for routing: [`placement`]), and the
//! HAProxy configuration and API-key map made from it ([`haproxy`]). What a node serves is
//! the service's to enforce (`service::serving`); this module reads and writes the
//! operator's files (and HAProxy's API-key map: [`map`]), and moves a webstore between
//! running shards through their admin listeners ([`admin_client`]) and HAProxy's runtime
//! socket ([`move_webstore`]).
//!
//! Must not touch: a node's store (only its admin listener), the service.

pub mod admin_client;
pub mod haproxy;
pub mod map;
pub mod move_webstore;
pub mod placement;
