//! The export format: JSON lines, one record per line, in a fixed order (a header; customers
//! by id, orders by customer and id, customers' accounts by customer (each account, its
//! ledger by number, its payments by id), idempotency records by webstore and key; then, webstore
//! by webstore, its events by sequence number, how far the retention sweep removed them, its
//! webhook endpoints' positions by endpoint, its producers' sessions in the web app by digest,
//! and its frozen dates, each date's record then its deliveries by order, then how far they
//! go) and with a fixed field order, so that exporting what was imported gives the same bytes.
//!
//! ```text
//! {"type":"header","format":"boxsub-export","version":6,"webstore":null}
//! {"type":"customer","id":1,"webstore_id":"shop","number":1,"first_name":"Joe",…}
//! {"type":"order","id":7,"customer_id":1,"created_at":…,"versions":[{"box_id":217,…}]}
//! {"type":"account","customer_id":1,"webstore_id":"shop","balance_cents":-1250,…}
//! {"type":"transaction","id":12,"customer_id":1,"number":1,"amount_cents":2500,…}
//! {"type":"payment","id":11,"customer_id":1,"amount_cents":2500,"method":"cash",…}
//! {"type":"idempotency","webstore_id":"shop","key":"k-1","body_sha256":"…","status":201,…}
//! {"type":"event","webstore_id":"shop","sequence":1,"event_type":"customer.created",…}
//! {"type":"events_pruned","webstore_id":"shop","through":0}
//! {"type":"delivery","webstore_id":"shop","endpoint":"erp","delivered_through":1,…}
//! {"type":"session","webstore_id":"shop","digest":"…","email":"pat@shop.example",…}
//! ```
//!
//! Here: the line ([`Line`]), the versions read, [`BadLine`]; each kind's line and its
//! conversions to and from the store's record are in a room of their own. Versions 1 (no
//! event, delivery, events-pruned or session lines), 2 (orders without history, read as never
//! changed; customers without halts), 3 (an order's latest content at the top of its
//! line) 4 (no account, transaction or payment lines) and 5 (no notes on frozen deliveries) are still
//! read. Must not touch: the store, files.

use serde::{Deserialize, Serialize};

use crate::domain::day::Day;

mod accounts;
mod customers;
mod events;
mod frozen;
mod idempotency;
mod orders;
mod orders_v3;
mod sessions;
#[cfg(test)]
mod tests;
mod webhook_positions;

pub use accounts::{AccountLine, PaymentLine, TransactionLine};
pub use customers::{AddressLine, CustomerLine, HaltLine};
pub use events::{EventLine, EventsPrunedLine};
pub use frozen::{FrozenDayLine, FrozenDeliveryLine, FrozenThroughLine};
pub use idempotency::IdempotencyLine;
pub use orders::{ContentLine, ExtraQuantity, LifecycleLine, OrderLine};
pub use orders_v3::OrderLineV3;
pub use sessions::SessionLine;
pub use webhook_positions::WebhookPositionLine;

/// The name in every export's header.
pub const FORMAT: &str = "boxsub-export";
/// The version this release writes.
pub const VERSION: u32 = 7;
/// The oldest version this release reads (every version from it to [`VERSION`]).
pub const OLDEST_READ: u32 = 1;

/// Whether this release reads exports of `version`.
pub fn reads_version(version: u32) -> bool {
    (OLDEST_READ..=VERSION).contains(&version)
}

/// One line of an export; `O` is the order line's shape (versions 1 to 3 wrote
/// [`OrderLineV3`]s: [`parse_line`] reads either).
// A line is read, turned into a record and dropped, one at a time: never kept in numbers.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Line<O = OrderLine> {
    /// The first line.
    Header {
        /// Always [`FORMAT`].
        format: String,
        /// [`VERSION`].
        version: u32,
        /// The one webstore exported, or `null` for the whole store.
        webstore: Option<String>,
    },
    /// A customer.
    Customer(CustomerLine),
    /// An order.
    Order(O),
    /// An idempotency record.
    Idempotency(IdempotencyLine),
    /// An event (version 2 on).
    Event(EventLine),
    /// How far the retention sweep removed a webstore's events (version 2 on).
    EventsPruned(EventsPrunedLine),
    /// Where a webhook endpoint of a webstore stands (version 2 on). Its lines keep the
    /// type `delivery` they had before the record was called a webhook position: the format
    /// is unchanged, so exports of every release still read.
    #[serde(rename = "delivery")]
    WebhookPosition(WebhookPositionLine),
    /// A producer's session in the web app (version 2 on).
    Session(SessionLine),
    /// A frozen delivery (version 4 on).
    FrozenDelivery(FrozenDeliveryLine),
    /// A date frozen whole (version 4 on).
    FrozenDay(FrozenDayLine),
    /// A webstore's frozen dates, after its frozen days (version 4 on).
    FrozenThrough(FrozenThroughLine),
    /// A customer's account, after the orders (version 5 on).
    Account(AccountLine),
    /// A transaction of an account's ledger, after its account (version 5 on).
    Transaction(TransactionLine),
    /// A payment of a customer, after its account's transactions (version 5 on).
    Payment(PaymentLine),
}

/// A line of an export of format `version`, as this release writes it: before version 4,
/// an order line is read as an [`OrderLineV3`] and upgraded; every other line is the same.
pub fn parse_line(text: &str, version: u32) -> Result<Line, String> {
    if version < 4 {
        let line: Line<OrderLineV3> = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if let Line::Order(line) = line {
            return line.upgrade().map(Line::Order).map_err(|bad| bad.0);
        }
    }
    serde_json::from_str(text).map_err(|error| error.to_string())
}

impl<O> Line<O> {
    /// The first version of the format that has lines of this type.
    pub fn since_version(&self) -> u32 {
        match self {
            Line::Header { .. } | Line::Customer(_) | Line::Order(_) | Line::Idempotency(_) => 1,
            Line::Event(_)
            | Line::EventsPruned(_)
            | Line::WebhookPosition(_)
            | Line::Session(_) => 2,
            Line::FrozenDelivery(_) | Line::FrozenDay(_) | Line::FrozenThrough(_) => 4,
            Line::Account(_) | Line::Transaction(_) | Line::Payment(_) => 5,
        }
    }
}

/// One line's text (no newline).
pub fn to_text(line: &Line) -> Vec<u8> {
    // Plain structs of strings and numbers serialise without fail.
    serde_json::to_vec(line).unwrap_or_default()
}

/// A line that does not make a record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadLine(pub String);

/// Day number `day` as `YYYY-MM-DD`.
fn date_text(day: i32) -> String {
    Day(day).date().to_string()
}
