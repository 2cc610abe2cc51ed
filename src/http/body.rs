//! Request bodies and query strings: reading a body under the size limit whether its length
//! is announced or chunked, and within its deadline, and turning bytes into the JSON object or parameters a handler
//! needs. `content_length_limit` is not used because it answers 411 to chunked bodies, which
//! the contract accepts up to the limit.

use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures_util::{Stream, StreamExt};
use serde_json::{Map, Value};

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
    use super::*;

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
        }
    }
}
