//! Idempotent creates (contract section 6): the key a client sends, and the first response
//! that repeats of the same request get back. The bookkeeping of which requests are in
//! progress and where records are kept belongs to the service and the store.

use super::fields::{too_long, FieldErrors, BLANK, INVALID};

/// Longest accepted key, in characters.
pub const MAX_KEY_CHARS: usize = 255;

/// A client's `Idempotency-Key`: 1 to 255 characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// Checks a header value; the error names `idempotency_key`.
    pub fn parse(raw: &str) -> Result<IdempotencyKey, FieldErrors> {
        let chars = raw.chars().count();
        if chars == 0 {
            Err(FieldErrors::single("idempotency_key", BLANK))
        } else if chars > MAX_KEY_CHARS {
            Err(FieldErrors::single(
                "idempotency_key",
                too_long(MAX_KEY_CHARS),
            ))
        } else if !raw.chars().all(|c| (' '..='~').contains(&c)) {
            // A tab passes as a header value; a key is printable ASCII only.
            Err(FieldErrors::single("idempotency_key", INVALID))
        } else {
            Ok(IdempotencyKey(raw.to_owned()))
        }
    }

    /// The key.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The message for a key reused with another body.
pub const KEY_REUSED: &str = "was already used with a different request body";

/// A response as first sent, to send again for a repeated request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedResponse {
    /// HTTP status.
    pub status: u16,
    /// `Location` header.
    pub location: Option<String>,
    /// Body bytes.
    pub body: Vec<u8>,
}

/// A create that carries an idempotency key: the key, a digest of the request body, and how
/// to render the response once the record exists, so that the response can be stored in the
/// same atomic write as the record itself.
pub struct Pending<T> {
    /// The client's key.
    pub key: IdempotencyKey,
    /// SHA-256 of the request body.
    pub body_sha256: [u8; 32],
    /// Renders the response for the created record.
    pub render: Box<dyn FnOnce(&T) -> RecordedResponse + Send>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_one_to_255_printable_ascii_characters() {
        assert!(IdempotencyKey::parse("k").is_ok());
        assert!(IdempotencyKey::parse("order 42 / cart ~7").is_ok());
        assert!(IdempotencyKey::parse(&"~".repeat(255)).is_ok());
        for bad in [
            String::new(),
            "x".repeat(256),
            "a\tb".into(),
            "é".into(),
            "a\u{7f}".into(),
        ] {
            let errors = IdempotencyKey::parse(&bad).unwrap_err();
            assert_eq!(errors.fields().collect::<Vec<_>>(), ["idempotency_key"]);
        }
    }
}
