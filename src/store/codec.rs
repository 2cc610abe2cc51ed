//! Record encoding: plain structs (no serde attributes that bincode mishandles, such as
//! flatten, untagged or skip), encoded with bincode 2 behind a header so that a later release
//! can read today's records or refuse them with a clear message:
//!
//! `b"BXS"` · kind (1 byte) · format version (u16, big-endian) · CRC-32 of the payload
//! (u32, big-endian) · bincode payload.
//!
//! Decoding checks every part of the header and limits the payload's size, so a corrupted or
//! truncated record is an error, never a panic or a silently wrong value. A chunk (orders of
//! one customer, events of one webstore) carries its parts' records as they are, behind a
//! header of its own.
//!
//! This is the envelope every record shares; the records themselves (their types, their
//! format versions and how each reads its older ones, their conversions to and from the
//! domain) are each kind's (`store::kinds`). Must not touch: keys, the layers.

use serde::{Deserialize, Serialize};

pub(super) const MAGIC: &[u8; 3] = b"BXS";
const HEADER_LEN: usize = 3 + 1 + 2 + 4;
/// The format version of records whose kind has not changed since the first release.
pub const FORMAT_VERSION: u16 = 1;
/// Largest payload accepted when decoding.
const MAX_PAYLOAD: usize = 1 << 20;

/// What a record holds; part of the header, so a record read under the wrong key is caught.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// `kinds::customers::CustomerRecord`.
    Customer = 1,
    /// `kinds::orders::OrderRecord`.
    Order = 2,
    /// `kinds::idempotency::IdempotencyRecord`.
    Idempotency = 3,
    /// Orders of one customer packed under one key (`pending::order_chunks::encode_order_chunk`).
    OrderChunk = 4,
    /// `kinds::events::EventRecord`.
    Event = 5,
    /// `kinds::webhook_positions::WebhookPosition`.
    WebhookPosition = 6,
    /// `kinds::sessions::SessionRecord`.
    Session = 7,
    /// Events of one webstore packed under one key (`pending::event_chunks::encode_event_chunk`).
    EventChunk = 8,
    /// `kinds::deliveries::DeliveryRecord`.
    FrozenDelivery = 9,
    /// `kinds::deliveries::FrozenDayRecord`.
    FrozenDay = 10,
    /// `kinds::accounts::AccountRecord`.
    Account = 11,
    /// `kinds::accounts::TransactionRecord`.
    Transaction = 12,
    /// `kinds::accounts::PaymentRecord`.
    Payment = 13,
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
    /// A record of this many bytes would be larger than its decoder reads (refused when
    /// written: see [`encode_readable`]).
    #[error("a record of {0} bytes is larger than the store reads back")]
    TooLarge(usize),
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

pub(super) fn config() -> bincode::config::Configuration<
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

/// Records of at most this many bytes always decode: the decoder's limit counts what a
/// payload claims in memory as it reads it (each element of a list at its size in memory, at
/// most 256 bytes for every record of the store, a test says), and each element takes a byte
/// of the payload at least, so such a payload claims at most `MAX_PAYLOAD`.
const ALWAYS_READABLE: usize = MAX_PAYLOAD / 256;

/// Encodes a record that its decoder will read back: a larger record than
/// `ALWAYS_READABLE` bytes is decoded once, counted the way every later read counts it,
/// and refused ([`CodecError::TooLarge`]) if that fails. The writers of records that can grow
/// (orders, their events and idempotency records, customers) write through this, so that
/// no write is acknowledged whose record the store could not read back.
pub fn encode_readable<R: Record>(record: &R) -> Result<Vec<u8>, CodecError> {
    let bytes = encode(record);
    if bytes.len() > ALWAYS_READABLE {
        decode::<R>(&bytes).map_err(|_| CodecError::TooLarge(bytes.len()))?;
    }
    Ok(bytes)
}

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

/// Bytes before each part of a chunk: its id (u64) and the length of its record (u32).
const PART_HEADER_LEN: usize = 8 + 4;

pub(super) fn encode_chunk<'a>(
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

pub(super) fn chunk_parts(
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
pub(crate) fn decode_payload<T: for<'de> Deserialize<'de>>(
    payload: &[u8],
) -> Result<T, CodecError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::kinds::customers::CustomerRecord;
    use crate::store::kinds::idempotency::IdempotencyRecord;
    use crate::store::kinds::orders::OrderRecord;
    use crate::store::pending::order_chunks::order_parts;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode::<CustomerRecord>(&bytes);
            let _ = decode::<OrderRecord>(&bytes);
            let _ = decode::<IdempotencyRecord>(&bytes);
            let _ = order_parts(1, &bytes);
        }
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
