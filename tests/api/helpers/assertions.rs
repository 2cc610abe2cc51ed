//! Assertions on answers and resources: the status and body shapes the contract fixes for
//! a [`TestResponse`] (`{"message": …}`, 404, 422's `{"errors": …}`), integer ids, RFC 3339
//! timestamps, and [`SoftAsserts`] for table-driven checks that report every failing row.

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};

use super::client::TestResponse;
use super::fixtures::MSG_NOT_FOUND;

impl TestResponse {
    /// Asserts the status code.
    #[track_caller]
    pub fn assert_status(&self, status: u16) -> &Self {
        assert_eq!(self.status, status, "{}", self.describe());
        self
    }

    /// Asserts the JSON content type and parses the body.
    #[track_caller]
    pub fn json(&self) -> Value {
        assert_eq!(
            self.header("content-type").as_deref(),
            Some("application/json; charset=utf-8"),
            "{}",
            self.describe()
        );
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.describe()))
    }

    /// Asserts status and a `{"message": ...}` body exactly.
    #[track_caller]
    pub fn assert_message(&self, status: u16, message: &str) {
        self.assert_status(status);
        assert_eq!(
            self.json(),
            json!({ "message": message }),
            "{}",
            self.describe()
        );
    }

    /// Asserts the contract's 404.
    #[track_caller]
    pub fn assert_not_found(&self) {
        self.assert_message(404, MSG_NOT_FOUND);
    }

    /// Asserts a 422 `{"errors": {...}}` body and returns the errors.
    #[track_caller]
    pub fn field_errors(&self) -> Map<String, Value> {
        self.assert_status(422);
        let body = self.json();
        let obj = body.as_object().cloned().unwrap_or_default();
        assert_eq!(
            obj.keys().collect::<Vec<_>>(),
            vec!["errors"],
            "422 body must be {{\"errors\": ...}}: {}",
            self.describe()
        );
        let errors = obj["errors"]
            .as_object()
            .cloned()
            .unwrap_or_else(|| panic!("errors is not an object: {}", self.describe()));
        for (key, messages) in &errors {
            let ok = messages
                .as_array()
                .is_some_and(|m| !m.is_empty() && m.iter().all(Value::is_string));
            assert!(
                ok,
                "errors.{key} must be a non-empty array of strings: {}",
                self.describe()
            );
        }
        errors
    }

    /// Asserts a 422 naming exactly these fields.
    #[track_caller]
    pub fn assert_error_keys(&self, keys: &[&str]) {
        let errors = self.field_errors();
        let got: BTreeSet<&str> = errors.keys().map(String::as_str).collect();
        let want: BTreeSet<&str> = keys.iter().copied().collect();
        assert_eq!(got, want, "wrong error fields: {}", self.describe());
    }

    /// Asserts a 422 naming at least this field.
    #[track_caller]
    pub fn assert_has_error(&self, key: &str) {
        let errors = self.field_errors();
        assert!(
            errors.contains_key(key),
            "expected an error on {key}: {}",
            self.describe()
        );
    }

    /// Asserts a 422 whose errors for `key` include `message`.
    #[track_caller]
    pub fn assert_field_error(&self, key: &str, message: &str) {
        let messages = self.messages_for(key);
        assert!(
            messages.iter().any(|m| m == message),
            "expected {key}: {message:?}: {}",
            self.describe()
        );
    }

    /// The messages for one field of a 422 (asserting the field is there).
    #[track_caller]
    pub fn messages_for(&self, key: &str) -> Vec<String> {
        let errors = self.field_errors();
        let messages = errors
            .get(key)
            .unwrap_or_else(|| panic!("expected an error on {key}: {}", self.describe()));
        messages
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    }

    /// Asserts the status is not a server error.
    #[track_caller]
    pub fn assert_no_server_error(&self) {
        assert!(self.status < 500, "server error: {}", self.describe());
    }
}

/// Asserts a string is an RFC 3339 UTC timestamp ending in `Z`.
#[track_caller]
pub fn assert_rfc3339_utc(value: &Value) {
    let s = value
        .as_str()
        .unwrap_or_else(|| panic!("timestamp is not a string: {value}"));
    let b = s.as_bytes();
    let digits =
        |mut r: std::ops::Range<usize>| r.all(|i| b.get(i).is_some_and(u8::is_ascii_digit));
    let shape = b.len() >= 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && (b[10] == b'T' || b[10] == b't')
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && s.ends_with('Z')
        && (b.len() == 20 || (b[19] == b'.' && digits(20..b.len() - 1) && b.len() > 21));
    assert!(shape, "not an RFC 3339 UTC timestamp ending in Z: {s:?}");
}

/// The integer `id` of a resource.
#[track_caller]
pub fn id_of(resource: &Value) -> i64 {
    resource["id"]
        .as_i64()
        .unwrap_or_else(|| panic!("resource has no integer id: {resource}"))
}

/// Collects failures of table-driven checks so one run reports every failing
/// row, then fails the test listing them.
#[derive(Default)]
pub struct SoftAsserts {
    failures: Vec<String>,
}

impl SoftAsserts {
    /// Runs one row's assertions, recording a panic instead of unwinding.
    pub fn check(&mut self, row: &str, assertions: impl FnOnce()) {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(assertions));
        if let Err(panic) = outcome {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            self.failures.push(format!("{row}: {message}"));
        }
    }

    /// Fails the test if any row failed.
    #[track_caller]
    pub fn finish(self) {
        assert!(
            self.failures.is_empty(),
            "{} row(s) failed:\n{}",
            self.failures.len(),
            self.failures.join("\n\n")
        );
    }
}
