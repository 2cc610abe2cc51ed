//! Request bodies and query strings: reading a body under the size limit whether its length
//! is announced or chunked, and within its deadline, and turning bytes into the JSON object,
//! the fields (an order's, read without building the object) or the parameters a handler
//! needs. `content_length_limit` is not used because it answers 411 to chunked bodies, which
//! the contract accepts up to the limit.
//!
//! Must not touch: the rules of what a body may hold (the domain's), status codes
//! (`super::error`).

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures_util::{Stream, StreamExt};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::domain::fields::BodyFields;

use super::error::ApiError;

/// Largest accepted body (contract section 6).
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Reads the whole body within `deadline`, refusing it as soon as it is known to exceed
/// [`MAX_BODY_BYTES`].
pub async fn read_limited<S, B>(
    body: S,
    content_length: Option<u64>,
    deadline: Duration,
) -> Result<Bytes, ApiError>
where
    S: Stream<Item = Result<B, warp::Error>>,
    B: Buf,
{
    let announced = content_length.unwrap_or(0);
    if announced > MAX_BODY_BYTES as u64 {
        return Err(ApiError::PayloadTooLarge);
    }
    let due = tokio::time::Instant::now() + deadline;
    let mut collected = BytesMut::with_capacity(announced as usize);
    let mut body = std::pin::pin!(body);
    while let Some(chunk) = tokio::time::timeout_at(due, body.next())
        .await
        .map_err(|_| ApiError::BodyTimeout)?
    {
        let chunk = chunk.map_err(|_| ApiError::UnreadableBody)?;
        if collected.len() + chunk.remaining() > MAX_BODY_BYTES {
            return Err(ApiError::PayloadTooLarge);
        }
        collected.put(chunk);
    }
    Ok(collected.freeze())
}

/// A JSON object body, unwrapped from `{"<envelope>": {...}}` when sent that way.
pub fn json_object(bytes: &[u8], envelope: &str) -> Result<Map<String, Value>, ApiError> {
    match serde_json::from_slice(bytes) {
        Ok(Value::Object(mut object)) => match object.get(envelope) {
            Some(Value::Object(_)) => match object.remove(envelope) {
                Some(Value::Object(inner)) => Ok(inner),
                _ => Err(ApiError::InvalidJson),
            },
            _ => Ok(object),
        },
        _ => Err(ApiError::InvalidJson),
    }
}

/// A JSON object body read straight into the fields of `T` (every other key is skipped, not
/// held), unwrapped from `{"<envelope>": {...}}` when sent that way: the same answer as
/// [`json_object`] followed by picking `T`'s fields, in one pass and without building the
/// map. As in a map, a key sent twice keeps its last value.
pub fn json_fields<T: BodyFields>(bytes: &[u8], envelope: &str) -> Result<T, ApiError> {
    let mut reader = serde_json::Deserializer::from_slice(bytes);
    let fields = Fields::<T> {
        envelope: Some(envelope),
        kind: PhantomData,
    }
    .deserialize(&mut reader)
    .map_err(|_| ApiError::InvalidJson)?;
    reader.end().map_err(|_| ApiError::InvalidJson)?;
    Ok(fields)
}

/// Reads an object into `T`'s fields; at the top level (`envelope` given) also the envelope.
struct Fields<'e, T> {
    envelope: Option<&'e str>,
    kind: PhantomData<T>,
}

impl<'de, T: BodyFields> DeserializeSeed<'de> for Fields<'_, T> {
    type Value = T;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<T, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, T: BodyFields> Visitor<'de> for Fields<'_, T> {
    type Value = T;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        let mut fields = T::default();
        let mut enveloped = None;
        while let Some(Key(key)) = map.next_key()? {
            if self.envelope == Some(key.as_ref()) {
                enveloped = map.next_value_seed(FieldsIfObject(PhantomData))?;
            } else if let Some(slot) = fields.slot(&key) {
                *slot = Some(map.next_value()?);
            } else {
                map.next_value::<Skip>()?;
            }
        }
        Ok(enveloped.unwrap_or(fields))
    }
}

/// A value read as `T`'s fields if it is an object, else checked and dropped (`None`): the
/// envelope's value (not an object: the body is read bare), and with [`NoFields`] any value
/// that is skipped.
struct FieldsIfObject<T>(PhantomData<T>);

impl<'de, T: BodyFields> DeserializeSeed<'de> for FieldsIfObject<T> {
    type Value = Option<T>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<T>, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de, T: BodyFields> Visitor<'de> for FieldsIfObject<T> {
    type Value = Option<T>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Option<T>, A::Error> {
        let inner = Fields {
            envelope: None,
            kind: PhantomData,
        };
        inner.visit_map(map).map(Some)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<T>, A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(None)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Option<T>, E> {
        Ok(None)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Option<T>, E> {
        Ok(None)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Option<T>, E> {
        Ok(None)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Option<T>, E> {
        Ok(None)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Option<T>, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Option<T>, E> {
        Ok(None)
    }
}

/// No fields at all: an object read into it has every value skipped.
#[derive(Default)]
struct NoFields;

impl BodyFields for NoFields {
    fn slot(&mut self, _: &str) -> Option<&mut Option<Value>> {
        None
    }
}

/// A value read and dropped, checked as strictly as a kept one: `serde`'s `IgnoredAny`
/// would let serde_json skip it unchecked (invalid UTF-8, nesting past its depth limit),
/// and the contract answers such a body as invalid JSON whichever key holds it.
struct Skip;

impl<'de> de::Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Skip, D::Error> {
        FieldsIfObject::<NoFields>(PhantomData)
            .deserialize(deserializer)
            .map(|_| Skip)
    }
}

/// An object key, borrowed from the body unless it has escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Key<'de>, D::Error> {
        deserializer.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an object key")
    }

    fn visit_borrowed_str<E: de::Error>(self, key: &'de str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Borrowed(key)))
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(key.to_owned())))
    }

    fn visit_string<E: de::Error>(self, key: String) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(key)))
    }
}

/// Decoded `name=value` pairs of a query string or form body; undecodable input yields none.
#[derive(Debug, Default)]
pub struct Params(Vec<(String, String)>);

impl Params {
    /// Decodes `application/x-www-form-urlencoded` text.
    pub fn parse(raw: &[u8]) -> Params {
        Params(serde_urlencoded::from_bytes(raw).unwrap_or_default())
    }

    /// The first value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::domain::order::body::OrderBody;

    #[tokio::test]
    async fn chunked_bodies_are_limited_while_read() {
        let chunks = |n: usize| {
            futures_util::stream::iter(
                (0..n).map(|_| Ok::<_, warp::Error>(Bytes::from(vec![b'x'; 1024]))),
            )
        };
        let deadline = Duration::from_secs(5);
        assert_eq!(
            read_limited(chunks(64), None, deadline)
                .await
                .unwrap()
                .len(),
            MAX_BODY_BYTES
        );
        assert!(matches!(
            read_limited(chunks(65), None, deadline).await,
            Err(ApiError::PayloadTooLarge)
        ));
        assert!(matches!(
            read_limited(chunks(0), Some(MAX_BODY_BYTES as u64 + 1), deadline).await,
            Err(ApiError::PayloadTooLarge)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stops_arriving_times_out() {
        let first = futures_util::stream::iter([Ok::<_, warp::Error>(Bytes::from_static(b"{"))]);
        let stalled = first.chain(futures_util::stream::pending());
        let read = read_limited(stalled, Some(10), Duration::from_secs(20)).await;
        assert!(matches!(read, Err(ApiError::BodyTimeout)), "{read:?}");
    }

    #[test]
    fn envelopes_are_optional() {
        let bare = json_object(br#"{"first_name":"Jo"}"#, "customer").unwrap();
        let wrapped = json_object(br#"{"customer":{"first_name":"Jo"}}"#, "customer").unwrap();
        assert_eq!(bare, wrapped);
        for bad in [&b""[..], b"[]", b"5", b"{", b"\xff\xfe", b"nul"] {
            assert!(matches!(
                json_object(bad, "customer"),
                Err(ApiError::InvalidJson)
            ));
            assert!(matches!(
                json_fields::<OrderBody>(bad, "order"),
                Err(ApiError::InvalidJson)
            ));
        }
    }

    /// What `json_fields` must equal: the whole object, unwrapped, then its order fields.
    fn through_the_map(bytes: &[u8]) -> Option<OrderBody> {
        json_object(bytes, "order").ok().map(OrderBody::from_object)
    }

    #[test]
    fn order_fields_are_read_as_from_the_whole_object() {
        let deep = format!("{{\"skipped\":{}1{}}}", "[".repeat(200), "]".repeat(200));
        let deep_objects = format!("{}1{}", "{\"a\":".repeat(200), "}".repeat(200));
        let cases: [&[u8]; 13] = [
            deep.as_bytes(),
            deep_objects.as_bytes(),
            b"{\"skipped\":\"\xff\xfe\",\"box_id\":1}",
            b"{\"order\":[\"\xff\"],\"box_id\":1}",
            br#"{"box_id":217,"box_id":218}"#,
            br#"{"order":{"box_id":217},"order":5,"box_id":1}"#,
            br#"{"order":5,"order":{"box_id":217},"box_id":1}"#,
            br#"{"order":{"order":{"box_id":3},"box_id":2}}"#,
            br#"{"box\u005fid":217,"frequency":null}"#,
            br#"{"order":[{"box_id":1}],"box_id":2}"#,
            br#"{"skipped":{"deep":[[[[{"box_id":1}]]]]},"extras":[{"id":1,"quantity":2}]}"#,
            br#"{"order":{"box_id":1}} trailing"#,
            br#"{"order":{"box_id":1}"#,
        ];
        for case in cases {
            assert_eq!(
                json_fields::<OrderBody>(case, "order").ok(),
                through_the_map(case),
                "{}",
                String::from_utf8_lossy(case)
            );
        }
    }

    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "[a-z0-9 ]{0,6}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec((any_key(), inner), 0..5)
                    .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
            ]
        })
    }

    fn any_key() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("order".to_owned()),
            Just("customer_id".to_owned()),
            Just("box_id".to_owned()),
            Just("extras".to_owned()),
            Just("week_days".to_owned()),
            "[a-z_]{1,6}",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn order_fields_of_any_json_are_those_of_its_object(value in any_json()) {
            let bytes = serde_json::to_vec(&value).unwrap();
            prop_assert_eq!(json_fields::<OrderBody>(&bytes, "order").ok(), through_the_map(&bytes));
        }
    }
}
