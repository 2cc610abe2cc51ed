//! Idempotent creates (contract section 6): the key a client sends, and the first response
//! that repeats of the same request get back. The bookkeeping of which requests are in
//! progress and where records are kept belongs to the service and the store.
//!
//! Must not touch: the turns of keys in progress (`crate::service::idempotency`), the
//! records' storage, I/O.

use super::fields::{too_long, FieldErrors, BLANK, INVALID};
use super::ids::{CustomerId, OrderId};

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

/// What a create made, and so what its idempotency record names. The record's `Location` is
/// written from this and read back into it, so a record always says which kind of resource
/// it names: a key first used for an order is judged against orders, whichever endpoint it
/// comes back on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// `POST /v1/customers` made this customer.
    Customer(CustomerId),
    /// `POST /v1/orders` made this order.
    Order(OrderId),
    /// `POST /v1/customers/{id}/payments` recorded this payment, or
    /// `POST /v1/payments/{id}/reversal` reversed it.
    Payment(u64),
    /// `POST /v1/customers/{id}/adjustments` posted to this customer's account.
    Account(CustomerId),
}

/// The kind of resource an endpoint creates, without its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceKind {
    /// `POST /v1/customers`.
    Customer,
    /// `POST /v1/orders`.
    Order,
    /// A payment's record or reversal.
    Payment,
    /// An adjustment of an account.
    Account,
}

const CUSTOMERS_PATH: &str = "/v1/customers/";
const ORDERS_PATH: &str = "/v1/orders/";
const PAYMENTS_PATH: &str = "/v1/payments/";
const ACCOUNT_SUFFIX: &str = "/account";

impl Resource {
    /// The `Location` of the created resource.
    pub fn location(self) -> String {
        match self {
            Resource::Customer(id) => format!("{CUSTOMERS_PATH}{id}"),
            Resource::Order(id) => format!("{ORDERS_PATH}{id}"),
            Resource::Payment(id) => format!("{PAYMENTS_PATH}{id}"),
            Resource::Account(id) => format!("{CUSTOMERS_PATH}{id}{ACCOUNT_SUFFIX}"),
        }
    }

    /// What a recorded `Location` names; `None` for anything [`Resource::location`] does not
    /// write.
    pub fn from_location(location: &str) -> Option<Resource> {
        let id = |digits: &str| -> Option<u64> {
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            digits.parse().ok()
        };
        if let Some(account) = location
            .strip_prefix(CUSTOMERS_PATH)
            .and_then(|rest| rest.strip_suffix(ACCOUNT_SUFFIX))
        {
            id(account).map(|id| Resource::Account(CustomerId(id)))
        } else if let Some(digits) = location.strip_prefix(CUSTOMERS_PATH) {
            id(digits).map(|id| Resource::Customer(CustomerId(id)))
        } else if let Some(digits) = location.strip_prefix(PAYMENTS_PATH) {
            id(digits).map(Resource::Payment)
        } else if let Some(digits) = location.strip_prefix(ORDERS_PATH) {
            id(digits).map(|id| Resource::Order(OrderId(id)))
        } else {
            None
        }
    }

    /// The kind of resource this is.
    pub fn kind(self) -> ResourceKind {
        match self {
            Resource::Customer(_) => ResourceKind::Customer,
            Resource::Order(_) => ResourceKind::Order,
            Resource::Payment(_) => ResourceKind::Payment,
            Resource::Account(_) => ResourceKind::Account,
        }
    }
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
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]
        #[test]
        fn a_location_names_what_it_was_written_from(id in 1u64.., kind in 0..4u8) {
            let created = match kind {
                0 => Resource::Order(OrderId(id)),
                1 => Resource::Customer(CustomerId(id)),
                2 => Resource::Payment(id),
                _ => Resource::Account(CustomerId(id)),
            };
            prop_assert_eq!(Resource::from_location(&created.location()), Some(created));
        }
    }

    #[test]
    fn a_location_of_anything_else_names_nothing() {
        for location in [
            "",
            "/v1/customers/",
            "/v1/orders/",
            "/v1/customers/x",
            "/v1/orders/+1",
            "/v1/orders/1/",
            "/v1/sign_in/1",
            "/v2/orders/1",
            "/v1/customers/99999999999999999999999",
        ] {
            assert_eq!(Resource::from_location(location), None, "{location:?}");
        }
    }

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
