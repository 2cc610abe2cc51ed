//! The actors: one [`customer::CustomerActor`] per customer owns that customer and its orders,
//! applies every change to them one message at a time, and answers reads. Domain failures
//! travel inside the replies; an actor only stops on a bug.

pub mod customer;
