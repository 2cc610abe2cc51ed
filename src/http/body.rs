//! Request bodies and query strings: reading a body under the size limit whether its length
//! is announced or chunked, and turning bytes into the JSON object or parameters a handler
//! needs. `content_length_limit` is not used because it answers 411 to chunked bodies, which
//! the contract accepts up to the limit.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures_util::{Stream, StreamExt};
use serde_json::{Map, Value};

use super::error::ApiError;

/// Largest accepted body (contract section 6).
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Reads the whole body, refusing it as soon as it is known to exceed [`MAX_BODY_BYTES`].
pub async fn read_limited<S, B>(body: S, content_length: Option<u64>) -> Result<Bytes, ApiError>
where
    S: Stream<Item = Result<B, warp::Error>>,
    B: Buf,
{
    let announced = content_length.unwrap_or(0);
    if announced > MAX_BODY_BYTES as u64 {
        return Err(ApiError::PayloadTooLarge);
    }
    let mut collected = BytesMut::with_capacity(announced as usize);
    let mut body = std::pin::pin!(body);
    while let Some(chunk) = body.next().await {
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
        assert_eq!(
            read_limited(chunks(64), None).await.unwrap().len(),
            MAX_BODY_BYTES
        );
        assert!(matches!(
            read_limited(chunks(65), None).await,
            Err(ApiError::PayloadTooLarge)
        ));
        assert!(matches!(
            read_limited(chunks(0), Some(MAX_BODY_BYTES as u64 + 1)).await,
            Err(ApiError::PayloadTooLarge)
        ));
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
