//! Sharding by webstore, as operators run it: the placement file that says which shard
//! serves each webstore (the one source of truth for routing: [`placement`]), and the
//! HAProxy configuration and API-key map made from it ([`haproxy`]). What a node serves is
//! the service's to enforce (`service::placement`); this module only reads and writes the
//! operator's files.
//!
//! Must not touch: a running node's state, the store.

pub mod haproxy;
pub mod placement;
