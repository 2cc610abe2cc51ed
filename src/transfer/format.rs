//! The export format: JSON lines, one record per line, in a fixed order (a header; customers
//! by id, orders by customer and id, idempotency records by webstore and key; then, webstore
//! by webstore, its events by sequence number, how far the retention sweep removed them, and
//! its webhook endpoints' positions by endpoint, and its producers' sessions in the
//! web app by digest) and with a fixed field order, so that exporting what was imported gives
//! the same bytes.
//!
//! ```text
//! {"type":"header","format":"boxsub-export","version":4,"webstore":null}
//! {"type":"customer","id":1,"webstore_id":"shop","number":1,"first_name":"Joe",…}
//! {"type":"order","id":7,"customer_id":1,"created_at":…,"versions":[{"box_id":217,…}]}
//! {"type":"idempotency","webstore_id":"shop","key":"k-1","body_sha256":"…","status":201,…}
//! {"type":"event","webstore_id":"shop","sequence":1,"event_type":"customer.created",…}
//! {"type":"events_pruned","webstore_id":"shop","through":0}
//! {"type":"delivery","webstore_id":"shop","endpoint":"erp","delivered_through":1,…}
//! {"type":"session","webstore_id":"shop","digest":"…","email":"pat@shop.example",…}
//! ```
//!
//! Customers carry their password hashes (a moved webstore's customers keep signing in).
//! Events keep their sequence numbers and their JSON byte for byte (a feed's cursor and a
//! webhook's delivered position are sequence numbers, and an event's id and body must be the
//! ones already given out). Sessions are under the SHA-256 of their id, as stored: the ids
//! themselves are only ever in the producers' cookies. Orders carry their history (every
//! content and lifecycle version) and customers their halts, from version 3 on; from version
//! 4 an order's content versions are all alike, nested in its line as the store nests them.
//! Versions 1 (no event, delivery, events-pruned or session lines), 2 (orders without
//! history, read as never changed; customers without halts) and 3 (an order's latest content
//! at the top of its line) are still read. Must not touch: the store, files.

use serde::{Deserialize, Serialize};

use crate::domain::customer::ADDRESS_FIELDS;
use crate::domain::day::WeekDays;
use crate::domain::day::{parse_iso_date, Day};
use crate::domain::idempotency::Resource;
use crate::domain::ids::OrderId;
use crate::domain::order::history::NEVER_CHANGED;
use crate::domain::order::schedule::Frequency;
use crate::events::json::render_event;
use crate::store::codec::CodecError;
use crate::store::kinds::customers::{CustomerRecord, HaltRecord};
use crate::store::kinds::deliveries::{
    DeliveryRecord, DeliveryStatus, FreezeMark, FrozenDayRecord,
};
use crate::store::kinds::events::{EventBody, EventRecord};
use crate::store::kinds::idempotency::IdempotencyRecord;
use crate::store::kinds::orders::{ContentRecord, ExtraRecord, LifecycleRecord, OrderRecord};
use crate::store::kinds::sessions::SessionRecord;
use crate::store::kinds::webhook_positions::WebhookPosition;

/// The name in every export's header.
pub const FORMAT: &str = "boxsub-export";
/// The version this release writes.
pub const VERSION: u32 = 4;
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
}

/// A line of an export of format `version`, as this release writes it.
pub fn parse_line(text: &str, version: u32) -> Result<Line, String> {
    if version >= 4 {
        return serde_json::from_str(text).map_err(|error| error.to_string());
    }
    let line: Line<OrderLineV3> = serde_json::from_str(text).map_err(|error| error.to_string())?;
    Ok(match line {
        Line::Header {
            format,
            version,
            webstore,
        } => Line::Header {
            format,
            version,
            webstore,
        },
        Line::Customer(line) => Line::Customer(line),
        Line::Order(line) => Line::Order(line.upgrade().map_err(|bad| bad.0)?),
        Line::Idempotency(line) => Line::Idempotency(line),
        Line::Event(line) => Line::Event(line),
        Line::EventsPruned(line) => Line::EventsPruned(line),
        Line::WebhookPosition(line) => Line::WebhookPosition(line),
        Line::Session(line) => Line::Session(line),
        Line::FrozenDelivery(line) => Line::FrozenDelivery(line),
        Line::FrozenDay(line) => Line::FrozenDay(line),
        Line::FrozenThrough(line) => Line::FrozenThrough(line),
    })
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
        }
    }
}

/// A customer as exported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomerLine {
    /// Id.
    pub id: u64,
    /// Its webstore's id.
    pub webstore_id: String,
    /// Number within the webstore.
    pub number: u64,
    /// First name.
    pub first_name: String,
    /// Last name.
    pub last_name: Option<String>,
    /// Email as given.
    pub email: String,
    /// Delivery service.
    pub delivery_service_id: u64,
    /// The address fields.
    pub address: AddressLine,
    /// Argon2id PHC string.
    pub password_hash: Option<String>,
    /// Its halts, oldest first (version 3 on; left out when it has none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub halts: Vec<HaltLine>,
}

/// An address as exported: every field, `null` where absent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddressLine {
    address_1: Option<String>,
    address_2: Option<String>,
    suburb: Option<String>,
    city: Option<String>,
    postcode: Option<String>,
    delivery_note: Option<String>,
    home_phone: Option<String>,
    mobile_phone: Option<String>,
    work_phone: Option<String>,
}

/// An order as exported (version 4 on): who placed it and when, and its history, each content
/// version a [`ContentLine`], as the store's record nests them. The fields of a change are
/// left out for an order never changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrderLine {
    /// Id.
    pub id: u64,
    /// Customer.
    pub customer_id: u64,
    /// Unix seconds.
    pub created_at: i64,
    /// The content versions, oldest first; the last is what the order delivers now.
    pub versions: Vec<ContentLine>,
    /// The lifecycle versions, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lifecycles: Vec<LifecycleLine>,
    /// `YYYY-MM-DD`: no date before it may change any more; absent for an order never
    /// changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled_before: Option<String>,
    /// Unix seconds of its latest change; absent for an order never changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<i64>,
}

/// A content version of an order, as exported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContentLine {
    /// `YYYY-MM-DD`: the first date it is in force.
    pub effective_date: String,
    /// `YYYY-MM-DD`: where its one-off extras count from.
    pub extras_since: String,
    /// Box.
    pub box_id: u64,
    /// `single`, `weekly` or `fortnightly`.
    pub frequency: String,
    /// `YYYY-MM-DD`.
    pub start_date: String,
    /// Weekdays, Sunday = 0.
    pub week_days: Vec<u8>,
    /// Extras once only.
    pub extras_one_off: bool,
    /// Extras.
    pub extras: Vec<ExtraQuantity>,
    /// Excluded box items.
    pub exclusions: Vec<u64>,
    /// Substitute box items.
    pub substitutions: Vec<u64>,
}

/// An order as versions 1 to 3 exported it: its latest content at the top, without its
/// `effective_date` and `extras_since` (then its start date), and the rest of its history
/// beside it (version 3). Read only: it becomes an [`OrderLine`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrderLineV3 {
    id: u64,
    customer_id: u64,
    box_id: u64,
    frequency: String,
    start_date: String,
    week_days: Vec<u8>,
    extras_one_off: bool,
    extras: Vec<ExtraQuantity>,
    exclusions: Vec<u64>,
    substitutions: Vec<u64>,
    created_at: i64,
    #[serde(default)]
    effective_date: Option<String>,
    #[serde(default)]
    extras_since: Option<String>,
    #[serde(default)]
    earlier: Vec<ContentLine>,
    #[serde(default)]
    lifecycles: Vec<LifecycleLine>,
    #[serde(default)]
    settled_before: Option<String>,
    #[serde(default)]
    updated_at: Option<i64>,
}

impl OrderLineV3 {
    /// The same order as version 4 writes it.
    pub fn upgrade(self) -> Result<OrderLine, BadLine> {
        let changed = self.settled_before.is_some();
        let any_history = !self.earlier.is_empty()
            || !self.lifecycles.is_empty()
            || self.effective_date.is_some()
            || self.extras_since.is_some()
            || self.updated_at.is_some();
        if !changed && any_history {
            return Err(BadLine(format!(
                "order {}: a history without settled_before",
                self.id
            )));
        }
        let mut versions = self.earlier;
        versions.push(ContentLine {
            effective_date: self
                .effective_date
                .unwrap_or_else(|| self.start_date.clone()),
            extras_since: self.extras_since.unwrap_or_else(|| self.start_date.clone()),
            box_id: self.box_id,
            frequency: self.frequency,
            start_date: self.start_date,
            week_days: self.week_days,
            extras_one_off: self.extras_one_off,
            extras: self.extras,
            exclusions: self.exclusions,
            substitutions: self.substitutions,
        });
        Ok(OrderLine {
            id: self.id,
            customer_id: self.customer_id,
            created_at: self.created_at,
            versions,
            lifecycles: self.lifecycles,
            updated_at: changed.then(|| self.updated_at.unwrap_or(self.created_at)),
            settled_before: self.settled_before,
        })
    }
}

/// A lifecycle version of an order, as exported: the answer's fields, in force from
/// `effective_date`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LifecycleLine {
    /// `YYYY-MM-DD`: the first date it is in force.
    pub effective_date: String,
    /// `YYYY-MM-DD` or `null`.
    pub cancel_date: Option<String>,
    /// `YYYY-MM-DD` or `null`.
    pub pause_date: Option<String>,
    /// `YYYY-MM-DD` or `null`.
    pub resume_date: Option<String>,
    /// `YYYY-MM-DD` each, sorted.
    pub skipped_dates: Vec<String>,
}

/// A customer's halt, as exported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HaltLine {
    /// `YYYY-MM-DD`: the first date not delivered.
    pub from: String,
    /// `YYYY-MM-DD`: the first date delivered again, or `null` while it is on.
    pub until: Option<String>,
}

/// An extra and its quantity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtraQuantity {
    /// Extra id.
    pub id: u64,
    /// Quantity.
    pub quantity: u32,
}

/// An idempotency record as exported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdempotencyLine {
    /// Its webstore.
    pub webstore_id: String,
    /// The client's key.
    pub key: String,
    /// SHA-256 of the first request's body, hex.
    pub body_sha256: String,
    /// The first response's status.
    pub status: u16,
    /// Its `Location`.
    pub location: Option<String>,
    /// Its body (JSON text).
    pub body: String,
    /// Unix seconds when it was stored.
    pub created_at: i64,
}

/// An event as exported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventLine {
    /// Its webstore.
    pub webstore_id: String,
    /// Its sequence number in the webstore (from 1).
    pub sequence: u64,
    /// `customer.created`, `customer.updated`, `order.created`.
    pub event_type: String,
    /// Unix milliseconds when its change was made.
    pub created_at_ms: i64,
    /// The event as the feed and the webhooks give it, as JSON text in a string: a JSON value
    /// here would be parsed and written again on import, and could come back with other
    /// escapes or number forms; a string gives back the very bytes.
    pub json: String,
}

/// How far the retention sweep removed a webstore's events, as exported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsPrunedLine {
    /// Its webstore.
    pub webstore_id: String,
    /// The highest sequence number removed (0 for none).
    pub through: u64,
}

/// Where a webhook endpoint of a webstore stands, as exported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookPositionLine {
    /// Its webstore.
    pub webstore_id: String,
    /// The endpoint's id in the catalogue.
    pub endpoint: String,
    /// Every event up to this sequence number has been delivered (or was not wanted).
    pub delivered_through: u64,
    /// Why the endpoint was disabled, if it is.
    pub disabled: Option<String>,
    /// Failed attempts at the event after `delivered_through`.
    pub attempts: u32,
    /// When the first of those attempts failed (Unix milliseconds; 0 when none has).
    pub failing_since_ms: i64,
    /// When the next attempt is due (Unix milliseconds; 0 for at once).
    pub next_attempt_ms: i64,
}

/// A producer's session, as exported (see `store::kinds::sessions::SessionRecord`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionLine {
    /// Its webstore.
    pub webstore_id: String,
    /// The SHA-256 of the session id, hex.
    pub digest: String,
    /// The account (folded email).
    pub email: String,
    /// The SHA-256 of the account's password hash at sign-in, hex.
    pub account: String,
    /// The forms' token.
    pub form_token: String,
    /// When it was opened (Unix milliseconds).
    pub signed_in_ms: i64,
    /// When it was last used, as last written (Unix milliseconds).
    pub last_used_ms: i64,
}

impl SessionLine {
    /// The line of stored session `digest`.
    pub fn from_record(digest: &[u8; 32], record: SessionRecord) -> SessionLine {
        SessionLine {
            webstore_id: record.webstore_id,
            digest: hex::encode(digest),
            email: record.email,
            account: hex::encode(record.account),
            form_token: record.form_token,
            signed_in_ms: record.signed_in_ms,
            last_used_ms: record.last_used_ms,
        }
    }

    /// The digest and the record to store.
    pub fn into_record(self) -> Result<([u8; 32], SessionRecord), BadLine> {
        let sha256 = |text: &str| -> Option<[u8; 32]> { hex::decode(text).ok()?.try_into().ok() };
        match (sha256(&self.digest), sha256(&self.account)) {
            (Some(digest), Some(account)) if !self.webstore_id.is_empty() => Ok((
                digest,
                SessionRecord {
                    webstore_id: self.webstore_id,
                    email: self.email,
                    account,
                    form_token: self.form_token,
                    signed_in_ms: self.signed_in_ms,
                    last_used_ms: self.last_used_ms,
                },
            )),
            _ => Err(BadLine(
                "session: the webstore_id must be set, and digest and account must be 64 \
                 hexadecimal digits"
                    .into(),
            )),
        }
    }
}

/// A delivery of a frozen date, as exported (`store::kinds::deliveries::DeliveryRecord`,
/// with its webstore, date and order from the key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrozenDeliveryLine {
    /// Its webstore.
    pub webstore_id: String,
    /// `YYYY-MM-DD`.
    pub date: String,
    /// The order delivered.
    pub order_id: u64,
    /// Its customer.
    pub customer_id: u64,
    /// Their delivery service then.
    pub delivery_service_id: u64,
    /// The box.
    pub box_id: u64,
    /// The extras that went.
    pub extras: Vec<ExtraQuantity>,
    /// Excluded box items.
    pub exclusions: Vec<u64>,
    /// Substitute box items.
    pub substitutions: Vec<u64>,
    /// What it costs, in minor units.
    pub price_cents: i64,
    /// `pending`, `delivered` or `not_delivered`.
    pub status: String,
}

/// A date frozen whole, as exported: its withheld deliveries by reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrozenDayLine {
    /// Its webstore.
    pub webstore_id: String,
    /// `YYYY-MM-DD`.
    pub date: String,
    /// Within a pause.
    pub paused: u64,
    /// On a skipped date.
    pub skipped: u64,
    /// Cancelled.
    pub cancelled: u64,
    /// The customer halted.
    pub halted: u64,
}

/// A webstore's frozen dates, as exported: from `since` to `through`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrozenThroughLine {
    /// Its webstore.
    pub webstore_id: String,
    /// `YYYY-MM-DD`: the first date frozen.
    pub since: String,
    /// `YYYY-MM-DD`: the last date frozen.
    pub through: String,
}

impl FrozenDeliveryLine {
    /// The line of a stored frozen delivery.
    pub fn from_record(
        webstore_id: &str,
        day: Day,
        order: OrderId,
        record: DeliveryRecord,
    ) -> FrozenDeliveryLine {
        FrozenDeliveryLine {
            webstore_id: webstore_id.to_owned(),
            date: date_text(day.0),
            order_id: order.0,
            customer_id: record.customer_id,
            delivery_service_id: record.delivery_service_id,
            box_id: record.box_id,
            extras: extra_quantities(record.extras),
            exclusions: record.exclusions,
            substitutions: record.substitutions,
            price_cents: record.price,
            status: DeliveryStatus::of_code(record.status)
                .unwrap_or(DeliveryStatus::Pending)
                .name()
                .to_owned(),
        }
    }

    /// The webstore, date, order and record to store.
    pub fn into_record(self) -> Result<(String, Day, OrderId, DeliveryRecord), BadLine> {
        let bad = |what: &str| {
            BadLine(format!(
                "frozen delivery of order {}: {what}",
                self.order_id
            ))
        };
        let day = parse_iso_date(&self.date).ok_or_else(|| bad("the date is not a date"))?;
        let status = [
            DeliveryStatus::Pending,
            DeliveryStatus::Delivered,
            DeliveryStatus::NotDelivered,
        ]
        .into_iter()
        .find(|status| status.name() == self.status)
        .ok_or_else(|| bad("unknown status"))?;
        if self.webstore_id.is_empty() || self.order_id == 0 || self.customer_id == 0 {
            return Err(bad("the webstore_id, order_id and customer_id must be set"));
        }
        Ok((
            self.webstore_id,
            day,
            OrderId(self.order_id),
            DeliveryRecord {
                customer_id: self.customer_id,
                delivery_service_id: self.delivery_service_id,
                box_id: self.box_id,
                extras: extra_records(self.extras),
                exclusions: self.exclusions,
                substitutions: self.substitutions,
                price: self.price_cents,
                status: status.code(),
            },
        ))
    }
}

impl FrozenDayLine {
    /// The line of a stored frozen date.
    pub fn from_record(webstore_id: &str, day: Day, record: FrozenDayRecord) -> FrozenDayLine {
        FrozenDayLine {
            webstore_id: webstore_id.to_owned(),
            date: date_text(day.0),
            paused: record.paused,
            skipped: record.skipped,
            cancelled: record.cancelled,
            halted: record.halted,
        }
    }

    /// The webstore, date and record to store.
    pub fn into_record(self) -> Result<(String, Day, FrozenDayRecord), BadLine> {
        let day = parse_iso_date(&self.date)
            .ok_or_else(|| BadLine(format!("frozen day {:?}: not a date", self.date)))?;
        if self.webstore_id.is_empty() {
            return Err(BadLine("frozen day: the webstore_id must be set".into()));
        }
        Ok((
            self.webstore_id,
            day,
            FrozenDayRecord {
                paused: self.paused,
                skipped: self.skipped,
                cancelled: self.cancelled,
                halted: self.halted,
            },
        ))
    }
}

impl FrozenThroughLine {
    /// The line of a webstore's mark.
    pub fn of_mark(webstore_id: &str, mark: FreezeMark) -> FrozenThroughLine {
        FrozenThroughLine {
            webstore_id: webstore_id.to_owned(),
            since: date_text(mark.since.0),
            through: date_text(mark.through.0),
        }
    }

    /// The webstore and mark to store.
    pub fn into_mark(self) -> Result<(String, FreezeMark), BadLine> {
        let day = |text: &str| {
            parse_iso_date(text)
                .ok_or_else(|| BadLine(format!("frozen_through: {text:?} is not a date")))
        };
        let mark = FreezeMark {
            since: day(&self.since)?,
            through: day(&self.through)?,
        };
        if self.webstore_id.is_empty() || mark.through < mark.since {
            return Err(BadLine(
                "frozen_through: the webstore_id must be set, and through not before since".into(),
            ));
        }
        Ok((self.webstore_id, mark))
    }
}

/// A line that does not make a record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadLine(pub String);

impl CustomerLine {
    /// The line of a stored customer.
    pub fn from_record(record: CustomerRecord) -> CustomerLine {
        let field = |i: usize| record.address.get(i).cloned().flatten();
        let address = AddressLine {
            address_1: field(0),
            address_2: field(1),
            suburb: field(2),
            city: field(3),
            postcode: field(4),
            delivery_note: field(5),
            home_phone: field(6),
            mobile_phone: field(7),
            work_phone: field(8),
        };
        CustomerLine {
            id: record.id,
            webstore_id: record.webstore_id,
            number: record.number,
            first_name: record.first_name,
            last_name: record.last_name,
            email: record.email,
            delivery_service_id: record.delivery_service_id,
            address,
            password_hash: record.password_hash,
            halts: record
                .halts
                .iter()
                .map(|halt| HaltLine {
                    from: date_text(halt.from_day),
                    until: halt.until_day.map(date_text),
                })
                .collect(),
        }
    }

    /// The record to store.
    pub fn into_record(self) -> Result<CustomerRecord, BadLine> {
        if self.id == 0 || self.number == 0 || self.webstore_id.is_empty() {
            return Err(BadLine(format!(
                "customer {}: the id, number and webstore_id must be set",
                self.id
            )));
        }
        let a = self.address;
        let address = vec![
            a.address_1,
            a.address_2,
            a.suburb,
            a.city,
            a.postcode,
            a.delivery_note,
            a.home_phone,
            a.mobile_phone,
            a.work_phone,
        ];
        debug_assert_eq!(address.len(), ADDRESS_FIELDS.len());
        let id = self.id;
        let day = |text: &str| {
            parse_iso_date(text)
                .map(|d| d.0)
                .ok_or_else(|| BadLine(format!("customer {id}: a halt's date is not a date")))
        };
        let mut halts = Vec::with_capacity(self.halts.len());
        for halt in &self.halts {
            halts.push(HaltRecord {
                from_day: day(&halt.from)?,
                until_day: halt.until.as_deref().map(day).transpose()?,
            });
        }
        let record = CustomerRecord {
            id: self.id,
            webstore_id: self.webstore_id,
            number: self.number,
            first_name: self.first_name,
            last_name: self.last_name,
            email: self.email,
            delivery_service_id: self.delivery_service_id,
            address,
            password_hash: self.password_hash,
            halts,
        };
        record
            .halts()
            .map_err(|broken| BadLine(format!("customer {id}: {broken}")))?;
        Ok(record)
    }
}

/// Day number `day` as `YYYY-MM-DD`.
fn date_text(day: i32) -> String {
    Day(day).date().to_string()
}

fn frequency_code(name: &str) -> Option<u8> {
    match name {
        "single" => Some(0),
        "weekly" => Some(1),
        "fortnightly" => Some(2),
        _ => None,
    }
}

fn frequency_name(code: u8) -> &'static str {
    match code {
        1 => Frequency::Weekly.as_str(),
        2 => Frequency::Fortnightly.as_str(),
        _ => Frequency::Single.as_str(),
    }
}

impl ContentLine {
    fn from_record(version: ContentRecord) -> ContentLine {
        ContentLine {
            effective_date: date_text(version.effective_day),
            extras_since: date_text(version.extras_since_day),
            box_id: version.box_id,
            frequency: frequency_name(version.frequency).to_owned(),
            start_date: date_text(version.start_day),
            week_days: WeekDays::from_bits(version.week_days).days().collect(),
            extras_one_off: version.extras_one_off,
            extras: extra_quantities(version.extras),
            exclusions: version.exclusions,
            substitutions: version.substitutions,
        }
    }

    /// The record of this version of order `id`.
    fn into_record(self, id: u64) -> Result<ContentRecord, BadLine> {
        let bad = |what: &str| BadLine(format!("order {id}: {what}"));
        Ok(ContentRecord {
            effective_day: day_number(&self.effective_date, "effective_date", id)?,
            extras_since_day: day_number(&self.extras_since, "extras_since", id)?,
            box_id: self.box_id,
            frequency: frequency_code(&self.frequency).ok_or_else(|| bad("unknown frequency"))?,
            extras_one_off: self.extras_one_off,
            extras: extra_records(self.extras),
            exclusions: self.exclusions,
            substitutions: self.substitutions,
            start_day: day_number(&self.start_date, "start_date", id)?,
            week_days: week_day_bits(&self.week_days)
                .ok_or_else(|| bad("week_days must be 0 to 6"))?,
        })
    }
}

/// The day number of a date field of order `id`.
fn day_number(text: &str, field: &str, id: u64) -> Result<i32, BadLine> {
    parse_iso_date(text)
        .map(|d| d.0)
        .ok_or_else(|| BadLine(format!("order {id}: {field} is not a date")))
}

impl OrderLine {
    /// The line of a stored order.
    pub fn from_record(record: OrderRecord) -> OrderLine {
        let changed = record.settled_before != NEVER_CHANGED.0;
        OrderLine {
            id: record.id,
            customer_id: record.customer_id,
            created_at: record.created_at,
            versions: record
                .versions
                .into_iter()
                .map(ContentLine::from_record)
                .collect(),
            lifecycles: record
                .lifecycles
                .into_iter()
                .map(|version| LifecycleLine {
                    effective_date: date_text(version.effective_day),
                    cancel_date: version.cancel_day.map(date_text),
                    pause_date: version.pause_day.map(date_text),
                    resume_date: version.resume_day.map(date_text),
                    skipped_dates: version.skipped_days.into_iter().map(date_text).collect(),
                })
                .collect(),
            settled_before: changed.then(|| date_text(record.settled_before)),
            updated_at: changed.then_some(record.updated_at),
        }
    }

    /// The record to store; a history that breaks its rules is refused.
    pub fn into_record(self) -> Result<OrderRecord, BadLine> {
        let id = self.id;
        let bad = |what: &str| BadLine(format!("order {id}: {what}"));
        if self.id == 0 || self.customer_id == 0 {
            return Err(bad("the id and customer_id must be set"));
        }
        if self.settled_before.is_none()
            && (self.updated_at.is_some() || !self.lifecycles.is_empty())
        {
            return Err(bad("a history without settled_before"));
        }
        let versions = self
            .versions
            .into_iter()
            .map(|version| version.into_record(id))
            .collect::<Result<Vec<_>, _>>()?;
        let mut lifecycles = Vec::with_capacity(self.lifecycles.len());
        for version in self.lifecycles {
            let optional = |text: &Option<String>, field: &str| {
                text.as_deref()
                    .map(|text| day_number(text, field, id))
                    .transpose()
            };
            lifecycles.push(LifecycleRecord {
                effective_day: day_number(&version.effective_date, "effective_date", id)?,
                cancel_day: optional(&version.cancel_date, "cancel_date")?,
                pause_day: optional(&version.pause_date, "pause_date")?,
                resume_day: optional(&version.resume_date, "resume_date")?,
                skipped_days: version
                    .skipped_dates
                    .iter()
                    .map(|text| day_number(text, "skipped_dates", id))
                    .collect::<Result<_, _>>()?,
            });
        }
        let record = OrderRecord {
            id: self.id,
            customer_id: self.customer_id,
            created_at: self.created_at,
            versions,
            lifecycles,
            settled_before: match &self.settled_before {
                Some(settled) => day_number(settled, "settled_before", id)?,
                None => NEVER_CHANGED.0,
            },
            updated_at: self.updated_at.unwrap_or(self.created_at),
        };
        record
            .clone()
            .into_order()
            .map_err(|error| bad(&error.to_string()))?;
        Ok(record)
    }
}

fn extra_quantities(extras: Vec<ExtraRecord>) -> Vec<ExtraQuantity> {
    extras
        .into_iter()
        .map(|line| ExtraQuantity {
            id: line.id,
            quantity: line.quantity,
        })
        .collect()
}

fn extra_records(extras: Vec<ExtraQuantity>) -> Vec<ExtraRecord> {
    extras
        .into_iter()
        .map(|line| ExtraRecord {
            id: line.id,
            quantity: line.quantity,
        })
        .collect()
}

/// Weekdays 0 to 6 as bits; `None` for a number out of range.
fn week_day_bits(days: &[u8]) -> Option<u8> {
    let mut week_days = WeekDays::NONE;
    for day in days {
        if *day > 6 {
            return None;
        }
        week_days = week_days.with(*day);
    }
    Some(week_days.bits())
}

impl IdempotencyLine {
    /// The line of a stored idempotency record; `None` for a body that is not text (boxsub
    /// only ever stores JSON it rendered).
    pub fn from_record(webstore_id: &str, key: &str, record: IdempotencyRecord) -> Option<Self> {
        Some(IdempotencyLine {
            webstore_id: webstore_id.to_owned(),
            key: key.to_owned(),
            body_sha256: hex::encode(&record.body_sha256),
            status: record.status,
            location: record.location,
            body: String::from_utf8(record.body).ok()?,
            created_at: record.created_at,
        })
    }

    /// The record to store.
    pub fn into_record(self) -> Result<IdempotencyRecord, BadLine> {
        let body_sha256 = hex::decode(&self.body_sha256)
            .ok()
            .filter(|digest| digest.len() == 32)
            .ok_or_else(|| BadLine(format!("idempotency key {:?}: body_sha256", self.key)))?;
        Ok(IdempotencyRecord {
            body_sha256,
            status: self.status,
            location: self.location,
            body: self.body.into_bytes(),
            created_at: self.created_at,
        })
    }

    /// The customer or order the recorded response names, from its `Location`.
    pub fn names(&self) -> Option<Resource> {
        self.location.as_deref().and_then(Resource::from_location)
    }
}

/// The fields of an event's JSON that its line repeats, read back to check that they agree.
#[derive(Deserialize)]
struct EventHead {
    #[serde(rename = "type")]
    event_type: String,
    sequence: u64,
}

impl EventLine {
    /// The line of stored event `sequence` of `webstore_id`, the event rendered as it is fed
    /// and delivered; an error for a record that renders no JSON text (boxsub only ever
    /// stores events it can render, so the record is damaged).
    pub fn from_record(
        webstore_id: &str,
        sequence: u64,
        record: EventRecord,
    ) -> Result<Self, CodecError> {
        let json = render_event(sequence, &record)?;
        Ok(EventLine {
            webstore_id: webstore_id.to_owned(),
            sequence,
            event_type: record.event_type,
            created_at_ms: record.created_at_ms,
            json: String::from_utf8(json)
                .map_err(|_| CodecError::Payload("its JSON is not UTF-8 text".into()))?,
        })
    }

    /// The record to store. The JSON must be an event object whose `type` and `sequence`
    /// are the line's: the feed pages by the sequence in the key and clients read the one in
    /// the JSON, so the two must never disagree.
    pub fn into_record(self) -> Result<EventRecord, BadLine> {
        let bad = |what: &str| {
            BadLine(format!(
                "event {} of webstore {:?}: {what}",
                self.sequence, self.webstore_id
            ))
        };
        if self.webstore_id.is_empty() || self.sequence == 0 || self.event_type.is_empty() {
            return Err(bad("the webstore_id, sequence and event_type must be set"));
        }
        let head: EventHead = serde_json::from_str(&self.json)
            .map_err(|error| bad(&format!("json is not an event object ({error})")))?;
        if head.event_type != self.event_type || head.sequence != self.sequence {
            return Err(bad(&format!(
                "json is event {} of type {:?}, not the line's",
                head.sequence, head.event_type
            )));
        }
        Ok(EventRecord {
            event_type: self.event_type,
            created_at_ms: self.created_at_ms,
            body: EventBody::Json(self.json.into_bytes()),
        })
    }
}

impl EventsPrunedLine {
    /// The line, checked: the webstore it names and how far.
    pub fn into_parts(self) -> Result<(String, u64), BadLine> {
        if self.webstore_id.is_empty() {
            return Err(BadLine("events_pruned: the webstore_id must be set".into()));
        }
        Ok((self.webstore_id, self.through))
    }
}

impl WebhookPositionLine {
    /// The line of endpoint `endpoint` of `webstore_id`'s stored webhook position.
    pub fn from_record(webstore_id: &str, endpoint: &str, record: WebhookPosition) -> Self {
        WebhookPositionLine {
            webstore_id: webstore_id.to_owned(),
            endpoint: endpoint.to_owned(),
            delivered_through: record.delivered_through,
            disabled: record.disabled,
            attempts: record.attempts,
            failing_since_ms: record.failing_since_ms,
            next_attempt_ms: record.next_attempt_ms,
        }
    }

    /// The record to store.
    pub fn into_record(self) -> Result<WebhookPosition, BadLine> {
        if self.webstore_id.is_empty() || self.endpoint.is_empty() {
            return Err(BadLine(format!(
                "delivery of endpoint {:?}: the webstore_id and endpoint must be set",
                self.endpoint
            )));
        }
        Ok(WebhookPosition {
            delivered_through: self.delivered_through,
            disabled: self.disabled,
            attempts: self.attempts,
            failing_since_ms: self.failing_since_ms,
            next_attempt_ms: self.next_attempt_ms,
        })
    }
}

/// One line's text (no newline).
pub fn to_text(line: &Line) -> Vec<u8> {
    // Plain structs of strings and numbers serialise without fail.
    serde_json::to_vec(line).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_line_round_trips_and_refuses_a_bad_digest() {
        let record = SessionRecord {
            webstore_id: "shop".into(),
            email: "pat@shop.example".into(),
            account: [9; 32],
            form_token: "f".repeat(64),
            signed_in_ms: 1,
            last_used_ms: 2,
        };
        let line = SessionLine::from_record(&[7; 32], record.clone());
        let text = to_text(&Line::Session(line.clone()));
        assert!(text.starts_with(br#"{"type":"session","webstore_id":"shop","digest":"0707"#));
        let Ok(Line::Session(back)) = serde_json::from_slice::<Line>(&text) else {
            panic!("a session line reads back as another kind")
        };
        assert_eq!(back.into_record().unwrap(), ([7; 32], record));
        let bad = SessionLine {
            digest: "07".into(),
            ..line
        };
        assert!(bad.into_record().is_err());
    }

    #[test]
    fn lines_round_trip_through_records() {
        let customer = CustomerRecord {
            id: 3,
            webstore_id: "shop".into(),
            number: 1,
            first_name: "Ann".into(),
            last_name: None,
            email: "Ann@Example.com".into(),
            delivery_service_id: 91,
            address: vec![
                Some("1 Road".into()),
                None,
                None,
                Some("York".into()),
                None,
                None,
                None,
                None,
                None,
            ],
            password_hash: Some("$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA".into()),
            halts: vec![
                HaltRecord {
                    from_day: 20_000,
                    until_day: Some(20_010),
                },
                HaltRecord {
                    from_day: 20_100,
                    until_day: None,
                },
            ],
        };
        let line = CustomerLine::from_record(customer.clone());
        assert_eq!(line.clone().into_record().unwrap(), customer);
        let text = to_text(&Line::Customer(line));
        let back: Line = serde_json::from_slice(&text).unwrap();
        assert_eq!(to_text(&back), text);

        let monday = Day::of("2027-01-04".parse().unwrap()).0;
        let content = |effective_day: i32, box_id: u64| ContentRecord {
            effective_day,
            extras_since_day: monday,
            box_id,
            frequency: 2,
            extras_one_off: true,
            extras: vec![ExtraRecord {
                id: 28,
                quantity: 2,
            }],
            exclusions: vec![240],
            substitutions: vec![],
            start_day: monday,
            week_days: WeekDays::only(1).with(4).bits(),
        };
        let order = OrderRecord {
            id: 9,
            customer_id: 3,
            created_at: 1_795_428_000,
            versions: vec![content(monday, 217)],
            lifecycles: vec![],
            settled_before: NEVER_CHANGED.0,
            updated_at: 1_795_428_000,
        };
        let line = OrderLine::from_record(order.clone());
        assert_eq!(line.versions[0].start_date, "2027-01-04");
        assert_eq!(line.versions[0].week_days, [1, 4]);
        assert_eq!((&line.settled_before, line.updated_at), (&None, None));
        assert_eq!(line.into_record().unwrap(), order);

        // A changed order: a box from a later date on, a pause and a cancellation.
        let changed = OrderRecord {
            versions: vec![content(monday, 217), content(monday + 14, 218)],
            lifecycles: vec![LifecycleRecord {
                effective_day: monday + 7,
                cancel_day: Some(monday + 60),
                pause_day: Some(monday + 21),
                resume_day: Some(monday + 28),
                skipped_days: vec![monday + 35],
            }],
            settled_before: monday + 7,
            updated_at: 1_795_500_000,
            ..order
        };
        let line = OrderLine::from_record(changed.clone());
        assert_eq!(line.lifecycles[0].pause_date.as_deref(), Some("2027-01-25"));
        let Line::Order(back) = reads_back(Line::Order(line)) else {
            panic!("an order line reads back as another kind")
        };
        assert_eq!(back.into_record().unwrap(), changed);

        // The same order as version 3 exported it: its latest content at the top.
        let v3 = concat!(
            r#"{"type":"order","id":9,"customer_id":3,"box_id":218,"frequency":"fortnightly","#,
            r#""start_date":"2027-01-04","week_days":[1,4],"extras_one_off":true,"#,
            r#""extras":[{"id":28,"quantity":2}],"exclusions":[240],"substitutions":[],"#,
            r#""created_at":1795428000,"effective_date":"2027-01-18","#,
            r#""extras_since":"2027-01-04","earlier":[{"effective_date":"2027-01-04","#,
            r#""extras_since":"2027-01-04","box_id":217,"frequency":"fortnightly","#,
            r#""start_date":"2027-01-04","week_days":[1,4],"extras_one_off":true,"#,
            r#""extras":[{"id":28,"quantity":2}],"exclusions":[240],"substitutions":[]}],"#,
            r#""lifecycles":[{"effective_date":"2027-01-11","cancel_date":"2027-03-05","#,
            r#""pause_date":"2027-01-25","resume_date":"2027-02-01","#,
            r#""skipped_dates":["2027-02-08"]}],"settled_before":"2027-01-11","#,
            r#""updated_at":1795500000}"#
        );
        let Ok(Line::Order(old)) = parse_line(v3, 3) else {
            panic!("a version 3 order line reads")
        };
        assert_eq!(old.into_record().unwrap(), changed);
        assert!(parse_line(v3, 4).is_err(), "version 4 nests the content");
    }

    /// A line's text read back is the same line, and writes the same text again.
    fn reads_back(line: Line) -> Line {
        let text = to_text(&line);
        let back: Line = serde_json::from_slice(&text).unwrap();
        assert_eq!(back, line);
        assert_eq!(to_text(&back), text);
        back
    }

    #[test]
    fn an_event_comes_back_byte_for_byte() {
        // Escapes, a non-ASCII character both escaped and not, numbers in forms a JSON value
        // would rewrite, and spacing: none of it may change.
        let json = concat!(
            r#"{"id":"evt_00ff","type":"order.created","sequence":42,"#,
            r#""created_at":"2027-01-04T10:00:00.000Z","data":{"note":"caf\u00e9 \"b\" é","#,
            r#""price":1.0,"big":1e3, "tab":"\t"}}"#
        );
        let record = EventRecord {
            event_type: "order.created".into(),
            created_at_ms: 1_799_056_800_000,
            body: EventBody::Json(json.as_bytes().to_vec()),
        };
        let line = EventLine::from_record("shop", 42, record.clone()).unwrap();
        let Line::Event(back) = reads_back(Line::Event(line)) else {
            panic!("an event line reads back as another kind")
        };
        let stored = back.into_record().unwrap();
        assert_eq!(
            stored.body,
            EventBody::Json(json.as_bytes().to_vec()),
            "the event's bytes changed"
        );
        assert_eq!(stored, record);
        assert!(
            EventLine::from_record(
                "shop",
                1,
                EventRecord {
                    body: EventBody::Json(vec![0xff]),
                    ..record
                }
            )
            .is_err(),
            "JSON that is not text is no event"
        );
    }

    #[test]
    fn webhook_positions_and_the_events_pruned_mark_round_trip() {
        let record = WebhookPosition {
            delivered_through: 17,
            disabled: Some("410 Gone".into()),
            attempts: 3,
            failing_since_ms: 1_799_056_800_000,
            next_attempt_ms: 1_799_056_860_000,
        };
        let line = WebhookPositionLine::from_record("shop", "erp", record.clone());
        let Line::WebhookPosition(back) = reads_back(Line::WebhookPosition(line)) else {
            panic!("a webhook position line reads back as another kind")
        };
        assert_eq!(
            (back.webstore_id.as_str(), back.endpoint.as_str()),
            ("shop", "erp")
        );
        assert_eq!(back.into_record().unwrap(), record);

        let line = EventsPrunedLine {
            webstore_id: "shop".into(),
            through: 9,
        };
        let Line::EventsPruned(back) = reads_back(Line::EventsPruned(line)) else {
            panic!("an events_pruned line reads back as another kind")
        };
        assert_eq!(back.into_parts().unwrap(), ("shop".to_owned(), 9));
    }

    #[test]
    fn version_1_is_read_and_has_none_of_the_new_lines() {
        assert!(reads_version(1) && reads_version(VERSION));
        assert!(!reads_version(0) && !reads_version(VERSION + 1));
        let header: Line = serde_json::from_str(
            r#"{"type":"header","format":"boxsub-export","version":1,"webstore":"shop"}"#,
        )
        .unwrap();
        assert_eq!(header.since_version(), 1);
        let event: Line = serde_json::from_str(concat!(
            r#"{"type":"event","webstore_id":"shop","sequence":1,"#,
            r#""event_type":"customer.created","created_at_ms":0,"#,
            r#""json":"{\"type\":\"customer.created\",\"sequence\":1}"}"#
        ))
        .unwrap();
        assert_eq!(event.since_version(), 2);
        let pruned: Line =
            serde_json::from_str(r#"{"type":"events_pruned","webstore_id":"s","through":0}"#)
                .unwrap();
        assert_eq!(pruned.since_version(), 2);
    }

    #[test]
    fn broken_lines_are_refused() {
        for bad in [
            r#"{"type":"order","id":1}"#,
            r#"{"type":"customer","id":1,"extra":true}"#,
            r#"{"type":"nonsense"}"#,
            r#"{"type":"event","webstore_id":"s","sequence":1}"#,
            r#"{"type":"events_pruned","webstore_id":"s","through":1,"extra":1}"#,
            r#"{"type":"delivery","webstore_id":"s","endpoint":"e"}"#,
        ] {
            assert!(serde_json::from_str::<Line>(bad).is_err(), "{bad}");
        }
        let version = ContentLine {
            effective_date: "2027-01-04".into(),
            extras_since: "2027-01-04".into(),
            box_id: 1,
            frequency: "daily".into(),
            start_date: "2027-01-04".into(),
            week_days: vec![1],
            extras_one_off: false,
            extras: vec![],
            exclusions: vec![],
            substitutions: vec![],
        };
        let order = OrderLine {
            id: 1,
            customer_id: 1,
            created_at: 0,
            versions: vec![version.clone()],
            lifecycles: vec![],
            settled_before: None,
            updated_at: None,
        };
        assert!(order.clone().into_record().is_err(), "an unknown frequency");
        let weekly = ContentLine {
            frequency: "weekly".into(),
            ..version
        };
        let broken_history = OrderLine {
            versions: vec![weekly.clone()],
            lifecycles: vec![LifecycleLine {
                effective_date: "2027-01-04".into(),
                cancel_date: None,
                pause_date: Some("2027-02-01".into()),
                resume_date: Some("2027-01-25".into()),
                skipped_dates: vec![],
            }],
            settled_before: Some("2027-01-04".into()),
            ..order.clone()
        };
        assert!(
            broken_history.into_record().is_err(),
            "a pause ending before it starts"
        );
        let no_version = OrderLine {
            versions: vec![],
            ..order.clone()
        };
        assert!(no_version.into_record().is_err(), "an order has a content");
        let unsettled = OrderLine {
            versions: vec![weekly],
            updated_at: Some(5),
            ..order
        };
        assert!(
            unsettled.into_record().is_err(),
            "a history without settled_before"
        );

        let event = |sequence: u64, event_type: &str, json: &str| EventLine {
            webstore_id: "shop".into(),
            sequence,
            event_type: event_type.into(),
            created_at_ms: 0,
            json: json.into(),
        };
        let good = r#"{"type":"order.created","sequence":3,"data":{}}"#;
        assert!(event(3, "order.created", good).into_record().is_ok());
        for (sequence, event_type, json) in [
            (
                0,
                "order.created",
                r#"{"type":"order.created","sequence":0}"#,
            ),
            (3, "", good),
            (4, "order.created", good),
            (3, "customer.created", good),
            (3, "order.created", "not json"),
            (3, "order.created", "[3]"),
            (3, "order.created", r#"{"type":"order.created"}"#),
        ] {
            let refused = event(sequence, event_type, json).into_record();
            assert!(refused.is_err(), "{sequence} {event_type:?} {json}");
        }
        let delivery = WebhookPositionLine::from_record("shop", "", WebhookPosition::default());
        assert!(
            delivery.into_record().is_err(),
            "an endpoint without a name"
        );
        let pruned = EventsPrunedLine {
            webstore_id: String::new(),
            through: 1,
        };
        assert!(pruned.into_parts().is_err());
    }
}
