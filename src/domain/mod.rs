//! The domain: boxsub's rules as pure functions and plain data, with no I/O, no async and no
//! knowledge of actors, maps, storage or HTTP. Everything that decides whether a customer or an
//! order is acceptable lives here, so it can be unit-tested, property-tested and fuzzed alone.
//!
//! Must not touch: I/O, async, the clock or randomness (callers pass "now"), any other
//! module of the crate.

pub mod account;
pub mod catalogue;
pub mod customer;
pub mod cutoff;
pub mod day;
pub mod email;
pub mod event_feed;
pub mod event_types;
pub mod fields;
pub mod halts;
pub mod idempotency;
pub mod ids;
pub mod money;
pub mod order;
pub mod ownership;
pub mod paging;
pub mod password;
pub mod quotas;
pub mod raw_fields;
pub mod routing;
pub mod throttle;
pub mod time_zones;
pub mod webhooks;
