//! Record encoding: plain structs (no serde attributes that bincode mishandles, such as
//! flatten, untagged or skip), encoded with bincode 2 behind a header so that a later release
//! can read today's records or refuse them with a clear message:
//!
//! `b"BXS"` · kind (1 byte) · format version (u16, big-endian) · CRC-32 of the payload
//! (u32, big-endian) · bincode payload.
//!
//! Decoding checks every part of the header and limits the payload's size, so a corrupted or
//! truncated record is an error, never a panic or a silently wrong value. The snapshot types
//! are kept apart from the JSON types; conversions to and from the domain live here.

use serde::{Deserialize, Serialize};

use crate::domain::catalogue::WebstoreIdx;
use crate::domain::customer::{Address, Customer};
use crate::domain::email::Email;
use crate::domain::ids::{CustomerId, OrderId};
use crate::domain::order::{ExtraLine, NewOrder, Order};
use crate::domain::schedule::{Day, Frequency, Schedule, WeekDays};

const MAGIC: &[u8; 3] = b"BXS";
const HEADER_LEN: usize = 3 + 1 + 2 + 4;
/// The format version of records whose kind has not changed since the first release.
pub const FORMAT_VERSION: u16 = 1;
/// Largest payload accepted when decoding.
const MAX_PAYLOAD: usize = 1 << 20;

/// What a record holds; part of the header, so a record read under the wrong key is caught.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// [`CustomerRecord`].
    Customer = 1,
    /// [`OrderRecord`].
    Order = 2,
    /// [`IdempotencyRecord`].
    Idempotency = 3,
    /// Orders of one customer packed under one key (see [`encode_order_chunk`]).
    OrderChunk = 4,
    /// [`EventRecord`].
    Event = 5,
    /// [`WebhookPosition`].
    WebhookPosition = 6,
    /// [`SessionRecord`].
    Session = 7,
    /// Events of one webstore packed under one key (see [`encode_event_chunk`]).
    EventChunk = 8,
}

/// Why a record could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    /// Shorter than a header, or the magic is wrong: not a boxsub record.
    #[error("not a boxsub record (bad or missing header)")]
    NotARecord,
    /// A record of another kind.
    #[error("expected a {expected:?} record, found kind {found}")]
    WrongKind {
        /// What the caller expected.
        expected: Kind,
        /// The kind byte found.
        found: u8,
    },
    /// Written by a newer (or unknown) format.
    #[error("record format version {0} is not supported by this release (it reads version {FORMAT_VERSION})")]
    UnsupportedVersion(u16),
    /// The payload does not match its checksum.
    #[error("record checksum mismatch (the record is corrupted)")]
    Checksum,
    /// The payload does not decode.
    #[error("record payload does not decode: {0}")]
    Payload(String),
}

/// A customer as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CustomerRecord {
    /// Customer id.
    pub id: u64,
    /// The catalogue's webstore id (not its position, which a catalogue edit may change).
    pub webstore_id: String,
    /// Number within the webstore.
    pub number: u64,
    /// First name.
    pub first_name: String,
    /// Last name.
    pub last_name: Option<String>,
    /// Email as given, trimmed.
    pub email: String,
    /// Delivery service id.
    pub delivery_service_id: u64,
    /// Address fields in the contract's order.
    pub address: Vec<Option<String>>,
    /// Argon2id PHC string.
    pub password_hash: Option<String>,
}

/// An extra line as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtraRecord {
    /// Extra id.
    pub id: u64,
    /// Quantity.
    pub quantity: u32,
}

/// An order as stored (format version 2: with its schedule).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderRecord {
    /// Order id.
    pub id: u64,
    /// Customer id.
    pub customer_id: u64,
    /// Box id.
    pub box_id: u64,
    /// 0 single, 1 weekly, 2 fortnightly.
    pub frequency: u8,
    /// Extras once only.
    pub extras_one_off: bool,
    /// Extras.
    pub extras: Vec<ExtraRecord>,
    /// Excluded box items.
    pub exclusions: Vec<u64>,
    /// Substitute box items.
    pub substitutions: Vec<u64>,
    /// Unix seconds.
    pub created_at: i64,
    /// The schedule's start date, as days since 1970-01-01 in the webstore's calendar.
    pub start_day: i32,
    /// The schedule's weekdays, bit 0 being Sunday.
    pub week_days: u8,
}

/// An order as format version 1 stored it, before orders had schedules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct OrderRecordV1 {
    id: u64,
    customer_id: u64,
    box_id: u64,
    frequency: u8,
    extras_one_off: bool,
    extras: Vec<ExtraRecord>,
    exclusions: Vec<u64>,
    substitutions: Vec<u64>,
    created_at: i64,
}

impl OrderRecordV1 {
    /// The order with the schedule it kept in practice: delivered from the day it was
    /// created (UTC), on that weekday.
    fn upgrade(self) -> OrderRecord {
        let start = Day(self.created_at.div_euclid(86_400) as i32);
        OrderRecord {
            id: self.id,
            customer_id: self.customer_id,
            box_id: self.box_id,
            frequency: self.frequency,
            extras_one_off: self.extras_one_off,
            extras: self.extras,
            exclusions: self.exclusions,
            substitutions: self.substitutions,
            created_at: self.created_at,
            start_day: start.0,
            week_days: WeekDays::only(start.weekday()).bits(),
        }
    }
}

/// The first response to a request with an `Idempotency-Key`, replayed for repeats.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdempotencyRecord {
    /// SHA-256 of the request body.
    pub body_sha256: Vec<u8>,
    /// HTTP status of the first response.
    pub status: u16,
    /// Its `Location` header.
    pub location: Option<String>,
    /// Its body.
    pub body: Vec<u8>,
    /// Unix seconds when it was stored.
    pub created_at: i64,
}

/// One event of a webstore (see `crate::events`): its type and time apart, so that a feed
/// filters and a retention sweep ages events without reading the rest, and what it tells
/// of, compactly (format version 2): rendered as JSON only when it is read
/// (`crate::events::json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventRecord {
    /// `customer.created`, `customer.updated`, `order.created`.
    pub event_type: String,
    /// Unix milliseconds when its change was made.
    pub created_at_ms: i64,
    /// What it tells of.
    pub body: EventBody,
}

/// What an event holds besides its type and time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum EventBody {
    /// The whole event as JSON (id, type, sequence, created_at, data), exactly as it is
    /// delivered: events written by format version 1, and events imported (an export carries
    /// events as their JSON, which an import keeps byte for byte).
    Json(Vec<u8>),
    /// An order's event: its id and the order as stored when the change was made.
    Order {
        /// The event's id (`evt_` and these bytes in hex).
        id: [u8; 16],
        /// The order.
        order: OrderRecord,
    },
    /// A customer's event: its id, the customer as stored when the change was made (without
    /// its password hash, which an event never shows) and its webstore's name then.
    Customer {
        /// The event's id (`evt_` and these bytes in hex).
        id: [u8; 16],
        /// The customer, `password_hash` always `None`.
        customer: CustomerRecord,
        /// The webstore's name in the catalogue then (the customer's JSON shows it).
        webstore_name: String,
    },
}

/// An event as format version 1 stored it: the whole event as JSON, rendered when written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct EventRecordV1 {
    event_type: String,
    created_at_ms: i64,
    json: Vec<u8>,
}

impl EventRecordV1 {
    fn upgrade(self) -> EventRecord {
        EventRecord {
            event_type: self.event_type,
            created_at_ms: self.created_at_ms,
            body: EventBody::Json(self.json),
        }
    }
}

/// Where one webhook endpoint of a webstore stands (see `crate::webhooks`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookPosition {
    /// Every event of the webstore up to this sequence number has been delivered (or was
    /// not of a type the endpoint wants).
    pub delivered_through: u64,
    /// Why the endpoint was disabled, if it is (a 410, or retries given up).
    pub disabled: Option<String>,
    /// Failed attempts at the event after `delivered_through`.
    pub attempts: u32,
    /// When the first of those attempts failed (Unix milliseconds; 0 when none has).
    pub failing_since_ms: i64,
    /// When the next attempt is due (Unix milliseconds; 0 for at once).
    pub next_attempt_ms: i64,
}

/// A record type, its header kind and format version, and how it reads older versions.
pub trait Record: Serialize + for<'de> Deserialize<'de> {
    /// The header kind.
    const KIND: Kind;
    /// The format version this release writes.
    const VERSION: u16 = FORMAT_VERSION;
    /// Decodes the payload of an older format `version`.
    fn decode_older(version: u16, _payload: &[u8]) -> Result<Self, CodecError> {
        Err(CodecError::UnsupportedVersion(version))
    }
}

impl Record for CustomerRecord {
    const KIND: Kind = Kind::Customer;
}
impl Record for OrderRecord {
    const KIND: Kind = Kind::Order;
    const VERSION: u16 = 2;
    fn decode_older(version: u16, payload: &[u8]) -> Result<Self, CodecError> {
        match version {
            1 => decode_payload::<OrderRecordV1>(payload).map(OrderRecordV1::upgrade),
            other => Err(CodecError::UnsupportedVersion(other)),
        }
    }
}
impl Record for IdempotencyRecord {
    const KIND: Kind = Kind::Idempotency;
}
impl Record for EventRecord {
    const KIND: Kind = Kind::Event;
    const VERSION: u16 = 2;
    fn decode_older(version: u16, payload: &[u8]) -> Result<Self, CodecError> {
        match version {
            1 => decode_payload::<EventRecordV1>(payload).map(EventRecordV1::upgrade),
            other => Err(CodecError::UnsupportedVersion(other)),
        }
    }
}
impl Record for WebhookPosition {
    const KIND: Kind = Kind::WebhookPosition;
}

/// A producer's session in the web app (see `service::producers`), under the SHA-256 of its
/// id: the id itself is only ever in the producer's cookie.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// The producer's webstore.
    pub webstore_id: String,
    /// The account signed in with (its folded email).
    pub email: String,
    /// The SHA-256 of the account's password hash at sign-in: a catalogue without the
    /// account, or with another password, ends the session.
    pub account: [u8; 32],
    /// The token the app's forms carry.
    pub form_token: String,
    /// When it was opened (Unix milliseconds).
    pub signed_in_ms: i64,
    /// When it was last used, as last written (Unix milliseconds; written again when a use
    /// finds it older than a few minutes, so that a session in use is not idle for long).
    pub last_used_ms: i64,
}

impl Record for SessionRecord {
    const KIND: Kind = Kind::Session;
}

fn config() -> bincode::config::Configuration<
    bincode::config::LittleEndian,
    bincode::config::Varint,
    bincode::config::Limit<MAX_PAYLOAD>,
> {
    bincode::config::standard().with_limit::<MAX_PAYLOAD>()
}

/// Encodes a record with its header.
pub fn encode<R: Record>(record: &R) -> Vec<u8> {
    // The payload is encoded straight after room left for the header, which is filled in
    // once the payload's checksum is known: one buffer, no copy.
    let mut bytes = Vec::with_capacity(ENCODE_CAPACITY);
    bytes.extend_from_slice(MAGIC);
    bytes.push(R::KIND as u8);
    bytes.extend_from_slice(&R::VERSION.to_be_bytes());
    bytes.extend_from_slice(&[0; 4]);
    // Encoding plain structs of strings, integers and vectors into a Vec cannot fail; were it
    // to, the record would be cut short, and refused by its checksum or size when read.
    let _ = bincode::serde::encode_into_std_write(record, &mut bytes, config());
    let checksum = crc32fast::hash(&bytes[HEADER_LEN..]);
    bytes[HEADER_LEN - 4..HEADER_LEN].copy_from_slice(&checksum.to_be_bytes());
    bytes
}

/// Room reserved for an encoded record: an order, an event or a customer fits.
const ENCODE_CAPACITY: usize = 256;

/// Decodes a record, checking magic, kind, version, checksum and size.
pub fn decode<R: Record>(bytes: &[u8]) -> Result<R, CodecError> {
    let (version, payload) = checked_payload(bytes, R::KIND, R::VERSION)?;
    if version < R::VERSION {
        return R::decode_older(version, payload);
    }
    decode_payload(payload)
}

/// The format version and payload of a record of `kind`, after checking its magic, kind,
/// version (at most `newest`) and checksum.
fn checked_payload(bytes: &[u8], kind: Kind, newest: u16) -> Result<(u16, &[u8]), CodecError> {
    if bytes.len() < HEADER_LEN || &bytes[..3] != MAGIC {
        return Err(CodecError::NotARecord);
    }
    if bytes[3] != kind as u8 {
        return Err(CodecError::WrongKind {
            expected: kind,
            found: bytes[3],
        });
    }
    let version = u16::from_be_bytes([bytes[4], bytes[5]]);
    if version == 0 || version > newest {
        return Err(CodecError::UnsupportedVersion(version));
    }
    let checksum = u32::from_be_bytes([bytes[6], bytes[7], bytes[8], bytes[9]]);
    let payload = &bytes[HEADER_LEN..];
    if crc32fast::hash(payload) != checksum {
        return Err(CodecError::Checksum);
    }
    Ok((version, payload))
}

/// The format version of order chunks.
const ORDER_CHUNK_VERSION: u16 = 1;
/// The format version of event chunks.
const EVENT_CHUNK_VERSION: u16 = 1;
/// Bytes before each part of a chunk: its id (u64) and the length of its record (u32).
const PART_HEADER_LEN: usize = 8 + 4;

/// Orders of one customer as one value: a header of kind [`Kind::OrderChunk`] whose payload
/// is, for each order, its id (u64, big-endian), the length of its encoded [`OrderRecord`]
/// (u32, big-endian) and that record as [`encode`] wrote it, header included. The records are
/// carried as they are, so packing orders costs no decoding and each keeps its own format
/// version and checksum.
pub fn encode_order_chunk<'a>(parts: impl IntoIterator<Item = (u64, &'a [u8])>) -> Vec<u8> {
    encode_chunk(Kind::OrderChunk, ORDER_CHUNK_VERSION, parts)
}

/// Events of one webstore as one value, laid out as an order chunk is (see
/// [`encode_order_chunk`]) under a header of kind [`Kind::EventChunk`]: each event's
/// sequence number, length and [`EventRecord`] as [`encode`] wrote it.
pub fn encode_event_chunk<'a>(parts: impl IntoIterator<Item = (u64, &'a [u8])>) -> Vec<u8> {
    encode_chunk(Kind::EventChunk, EVENT_CHUNK_VERSION, parts)
}

fn encode_chunk<'a>(
    kind: Kind,
    version: u16,
    parts: impl IntoIterator<Item = (u64, &'a [u8])>,
) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(256);
    bytes.extend_from_slice(MAGIC);
    bytes.push(kind as u8);
    bytes.extend_from_slice(&version.to_be_bytes());
    bytes.extend_from_slice(&[0; 4]);
    for (id, record) in parts {
        bytes.extend_from_slice(&id.to_be_bytes());
        // A record is far below 4 GiB: `encode` writes one order's or event's fields.
        bytes.extend_from_slice(&(record.len() as u32).to_be_bytes());
        bytes.extend_from_slice(record);
    }
    let checksum = crc32fast::hash(&bytes[HEADER_LEN..]);
    bytes[6..HEADER_LEN].copy_from_slice(&checksum.to_be_bytes());
    bytes
}

/// The orders a stored order value holds, as (id, encoded [`OrderRecord`]) in the order
/// stored: the record itself, under the id `key_id` of its key, or each part of an order
/// chunk. The parts' records are not decoded here.
pub fn order_parts(key_id: u64, bytes: &[u8]) -> Result<Vec<(u64, &[u8])>, CodecError> {
    chunk_parts(
        key_id,
        bytes,
        Kind::Order,
        Kind::OrderChunk,
        ORDER_CHUNK_VERSION,
    )
}

/// The events a stored event value holds, as (sequence number, encoded [`EventRecord`]):
/// the record itself, under the sequence number `key_id` of its key, or each part of an
/// event chunk. The parts' records are not decoded here.
pub fn event_parts(key_id: u64, bytes: &[u8]) -> Result<Vec<(u64, &[u8])>, CodecError> {
    chunk_parts(
        key_id,
        bytes,
        Kind::Event,
        Kind::EventChunk,
        EVENT_CHUNK_VERSION,
    )
}

fn chunk_parts(
    key_id: u64,
    bytes: &[u8],
    single: Kind,
    chunk: Kind,
    chunk_version: u16,
) -> Result<Vec<(u64, &[u8])>, CodecError> {
    if bytes.get(3) == Some(&(single as u8)) {
        return Ok(vec![(key_id, bytes)]);
    }
    let (_, mut payload) = checked_payload(bytes, chunk, chunk_version)?;
    let mut parts = Vec::new();
    while !payload.is_empty() {
        let cut = || CodecError::Payload("a chunk ends inside one of its records".into());
        let head = payload.get(..PART_HEADER_LEN).ok_or_else(cut)?;
        let id = u64::from_be_bytes(head[..8].try_into().map_err(|_| cut())?);
        let len = u32::from_be_bytes(head[8..].try_into().map_err(|_| cut())?) as usize;
        let end = PART_HEADER_LEN.checked_add(len).ok_or_else(cut)?;
        let record = payload.get(PART_HEADER_LEN..end).ok_or_else(cut)?;
        parts.push((id, record));
        payload = &payload[end..];
    }
    Ok(parts)
}

/// Decodes a whole bincode payload (trailing bytes are an error).
fn decode_payload<T: for<'de> Deserialize<'de>>(payload: &[u8]) -> Result<T, CodecError> {
    let (record, used) = bincode::serde::decode_from_slice::<T, _>(payload, config())
        .map_err(|error| CodecError::Payload(error.to_string()))?;
    if used != payload.len() {
        return Err(CodecError::Payload(format!(
            "{} trailing bytes",
            payload.len() - used
        )));
    }
    Ok(record)
}

impl CustomerRecord {
    /// The stored form of a customer of webstore `webstore_id`.
    pub fn from_customer(customer: &Customer, webstore_id: &str) -> Self {
        CustomerRecord {
            id: customer.id.0,
            webstore_id: webstore_id.to_owned(),
            number: customer.number,
            first_name: customer.first_name.clone(),
            last_name: customer.last_name.clone(),
            email: customer.email.as_str().to_owned(),
            delivery_service_id: customer.delivery_service_id,
            address: customer.address.0.to_vec(),
            password_hash: customer.password_hash.clone(),
        }
    }

    /// The customer, placed in the webstore at `webstore`.
    pub fn into_customer(self, webstore: WebstoreIdx) -> Customer {
        let mut address = Address::default();
        for (slot, value) in address.0.iter_mut().zip(self.address) {
            *slot = value;
        }
        Customer {
            id: CustomerId(self.id),
            webstore,
            number: self.number,
            first_name: self.first_name,
            last_name: self.last_name,
            email: Email::from_trusted(self.email),
            delivery_service_id: self.delivery_service_id,
            address,
            password_hash: self.password_hash,
        }
    }
}

impl OrderRecord {
    /// The stored form of an order.
    pub fn from_order(order: &Order) -> Self {
        let details = &order.details;
        OrderRecord {
            id: order.id.0,
            customer_id: order.customer_id.0,
            box_id: details.box_id,
            frequency: match details.frequency {
                Frequency::Single => 0,
                Frequency::Weekly => 1,
                Frequency::Fortnightly => 2,
            },
            extras_one_off: details.extras_one_off,
            extras: details
                .extras
                .iter()
                .map(|line| ExtraRecord {
                    id: line.id,
                    quantity: line.quantity,
                })
                .collect(),
            exclusions: details.exclusions.clone(),
            substitutions: details.substitutions.clone(),
            created_at: order.created_at,
            start_day: details.schedule.start.0,
            week_days: details.schedule.week_days.bits(),
        }
    }

    /// The order; an unknown frequency code is a decoding error.
    pub fn into_order(self) -> Result<Order, CodecError> {
        let frequency = match self.frequency {
            0 => Frequency::Single,
            1 => Frequency::Weekly,
            2 => Frequency::Fortnightly,
            other => {
                return Err(CodecError::Payload(format!(
                    "unknown frequency code {other}"
                )))
            }
        };
        Ok(Order {
            id: OrderId(self.id),
            customer_id: CustomerId(self.customer_id),
            details: NewOrder {
                box_id: self.box_id,
                frequency,
                extras_one_off: self.extras_one_off,
                extras: self
                    .extras
                    .into_iter()
                    .map(|line| ExtraLine {
                        id: line.id,
                        quantity: line.quantity,
                    })
                    .collect(),
                exclusions: self.exclusions,
                substitutions: self.substitutions,
                schedule: Schedule {
                    start: Day(self.start_day),
                    week_days: WeekDays::from_bits(self.week_days),
                },
            },
            created_at: self.created_at,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn customer_record() -> impl Strategy<Value = CustomerRecord> {
        (
            any::<u64>(),
            "[a-z-]{1,20}",
            any::<u64>(),
            any::<String>(),
            proptest::option::of(any::<String>()),
            any::<String>(),
            any::<u64>(),
            proptest::collection::vec(proptest::option::of(any::<String>()), 9),
            proptest::option::of(any::<String>()),
        )
            .prop_map(
                |(
                    id,
                    webstore_id,
                    number,
                    first_name,
                    last_name,
                    email,
                    ds,
                    address,
                    password_hash,
                )| {
                    CustomerRecord {
                        id,
                        webstore_id,
                        number,
                        first_name,
                        last_name,
                        email,
                        delivery_service_id: ds,
                        address,
                        password_hash,
                    }
                },
            )
    }

    fn order_record() -> impl Strategy<Value = OrderRecord> {
        (
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            0u8..3,
            any::<bool>(),
            proptest::collection::vec((any::<u64>(), any::<u32>()), 0..8),
            proptest::collection::vec(any::<u64>(), 0..8),
            proptest::collection::vec(any::<u64>(), 0..8),
            any::<i64>(),
            (any::<i32>(), 0u8..128),
        )
            .prop_map(
                |(
                    id,
                    customer_id,
                    box_id,
                    frequency,
                    one_off,
                    extras,
                    exclusions,
                    substitutions,
                    created_at,
                    (start_day, week_days),
                )| {
                    OrderRecord {
                        id,
                        customer_id,
                        box_id,
                        frequency,
                        extras_one_off: one_off,
                        extras: extras
                            .into_iter()
                            .map(|(id, quantity)| ExtraRecord { id, quantity })
                            .collect(),
                        exclusions,
                        substitutions,
                        created_at,
                        start_day,
                        week_days,
                    }
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn customers_round_trip(record in customer_record()) {
            prop_assert_eq!(decode::<CustomerRecord>(&encode(&record)), Ok(record));
        }

        #[test]
        fn orders_round_trip(record in order_record()) {
            let decoded = decode::<OrderRecord>(&encode(&record));
            prop_assert_eq!(&decoded, &Ok(record.clone()));
            let order = decoded.unwrap().into_order().unwrap();
            prop_assert_eq!(OrderRecord::from_order(&order), record);
        }

        #[test]
        fn corrupted_bytes_are_an_error_not_a_panic(
            record in order_record(),
            at in any::<prop::sample::Index>(),
            mask in 1u8..=255,
        ) {
            // CRC-32 catches every error confined to 32 consecutive bits, so any one
            // corrupted byte, header or payload, must be refused.
            let mut bytes = encode(&record);
            let i = at.index(bytes.len());
            bytes[i] ^= mask;
            prop_assert!(decode::<OrderRecord>(&bytes).is_err());
        }

        #[test]
        fn an_order_chunk_hands_back_each_record_with_its_id(
            records in proptest::collection::vec(order_record(), 1..8),
        ) {
            let encoded: Vec<(u64, Vec<u8>)> =
                records.iter().map(|record| (record.id, encode(record))).collect();
            let chunk = encode_order_chunk(encoded.iter().map(|(id, bytes)| (*id, &bytes[..])));
            let parts = order_parts(0, &chunk).unwrap();
            prop_assert_eq!(parts.len(), records.len());
            for ((id, bytes), record) in parts.into_iter().zip(&records) {
                prop_assert_eq!(id, record.id);
                prop_assert_eq!(decode::<OrderRecord>(bytes), Ok(record.clone()));
            }
            // A lone record is read under its key's id, undecoded.
            let single = encode(&records[0]);
            prop_assert_eq!(order_parts(42, &single), Ok(vec![(42, &single[..])]));
        }

        #[test]
        fn a_corrupted_or_cut_order_chunk_is_an_error_not_a_panic(
            records in proptest::collection::vec(order_record(), 1..4),
            at in any::<prop::sample::Index>(),
            mask in 1u8..=255,
            keep in any::<prop::sample::Index>(),
        ) {
            let encoded: Vec<(u64, Vec<u8>)> =
                records.iter().map(|record| (record.id, encode(record))).collect();
            let chunk = encode_order_chunk(encoded.iter().map(|(id, bytes)| (*id, &bytes[..])));
            let read = |bytes: &[u8]| {
                order_parts(0, bytes).and_then(|parts| {
                    parts
                        .into_iter()
                        .try_for_each(|(_, record)| decode::<OrderRecord>(record).map(drop))
                })
            };
            let i = at.index(chunk.len());
            let mut corrupted = chunk.clone();
            corrupted[i] ^= mask;
            let corrupted_read = read(&corrupted);
            // The kind byte may turn into a lone order's; the rest is under the checksum.
            if i != 3 {
                prop_assert!(corrupted_read.is_err());
            }
            let cut = keep.index(chunk.len());
            prop_assert!(read(&chunk[..cut]).is_err());
        }

        #[test]
        fn truncated_records_are_an_error(record in customer_record(), keep in any::<prop::sample::Index>()) {
            let bytes = encode(&record);
            let cut = keep.index(bytes.len());
            prop_assert!(decode::<CustomerRecord>(&bytes[..cut]).is_err());
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode::<CustomerRecord>(&bytes);
            let _ = decode::<OrderRecord>(&bytes);
            let _ = decode::<IdempotencyRecord>(&bytes);
            let _ = order_parts(1, &bytes);
        }
    }

    #[test]
    fn orders_of_format_1_read_with_the_schedule_they_kept() {
        // An order stored before schedules: created on Monday 2026-11-23 at 10:00 UTC.
        let old = OrderRecordV1 {
            id: 7,
            customer_id: 3,
            box_id: 217,
            frequency: 1,
            extras_one_off: false,
            extras: vec![ExtraRecord {
                id: 28,
                quantity: 1,
            }],
            exclusions: vec![240],
            substitutions: vec![],
            created_at: 1_795_428_000,
        };
        let payload = bincode::serde::encode_to_vec(&old, config()).unwrap();
        let mut bytes = MAGIC.to_vec();
        bytes.push(Kind::Order as u8);
        bytes.extend_from_slice(&1u16.to_be_bytes());
        bytes.extend_from_slice(&crc32fast::hash(&payload).to_be_bytes());
        bytes.extend_from_slice(&payload);

        let order = decode::<OrderRecord>(&bytes).unwrap().into_order().unwrap();
        assert_eq!(order.id, OrderId(7));
        assert_eq!(
            order.details.schedule.start.date().to_string(),
            "2026-11-23"
        );
        assert_eq!(order.details.schedule.week_days, WeekDays::only(1));
        assert_eq!(
            decode::<OrderRecord>(&encode(&OrderRecord::from_order(&order)))
                .unwrap()
                .start_day,
            order.details.schedule.start.0,
            "written back in the current format"
        );
    }

    #[test]
    fn headers_are_checked() {
        let record = IdempotencyRecord {
            body_sha256: vec![1; 32],
            status: 201,
            location: Some("/v1/orders/1".into()),
            body: b"{}".to_vec(),
            created_at: 5,
        };
        let bytes = encode(&record);
        assert!(matches!(
            decode::<OrderRecord>(&bytes),
            Err(CodecError::WrongKind { .. })
        ));
        let mut newer = bytes.clone();
        newer[5] = 9;
        assert_eq!(
            decode::<IdempotencyRecord>(&newer),
            Err(CodecError::UnsupportedVersion(9))
        );
        assert_eq!(
            decode::<IdempotencyRecord>(b"nope"),
            Err(CodecError::NotARecord)
        );
    }
}
