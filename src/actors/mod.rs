//! The actors: one [`customer::CustomerActor`] per customer owns that customer and its orders,
//! applies every change to them one message at a time, and answers reads. Domain failures
//! travel inside the replies; an actor only stops on a bug.
//!
//! Must not touch: HTTP, the service's limits and guards (the callers' own), the registry's
//! maps.

pub mod customer;
