//! Field-level validation vocabulary shared by every domain rule: the error collection that
//! names each failing field, the contract's message wording, and lenient readers for the
//! loosely typed JSON that existing clients send (ids as numbers or digit strings, and so on).
//!
//! Pure functions over `serde_json::Value`; nothing here knows about HTTP status codes.
//!
//! Must not touch: status codes (the HTTP layer's), I/O.

use serde_json::{Map, Value};

/// The contract's message for a required field that is missing or blank.
pub const BLANK: &str = "can't be blank";
/// The contract's message for a value of the wrong shape or an unknown reference.
pub const INVALID: &str = "is invalid";
/// The contract's message for a unique value that another record holds.
pub const TAKEN: &str = "has already been taken";
/// The contract's message for a non-integer where an integer belongs.
pub const NOT_AN_INTEGER: &str = "must be an integer";
/// The contract's message for a value outside a fixed list.
pub const NOT_IN_LIST: &str = "is not included in the list";

/// Longest accepted value of an ordinary string field, in characters.
pub const MAX_STRING_CHARS: usize = 255;

/// Every validation failure of one request, by field path, in the order they were found.
///
/// A request is checked completely before it is refused, so that a client learns about every
/// failing field at once (contract section 3).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldErrors(Vec<(String, Vec<String>)>);

impl FieldErrors {
    /// No errors yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// One error for one field.
    pub fn single(field: impl Into<String>, message: impl Into<String>) -> Self {
        let mut errors = Self::new();
        errors.add(field, message);
        errors
    }

    /// Records `message` against `field`; a message already recorded for the field is not repeated.
    pub fn add(&mut self, field: impl Into<String>, message: impl Into<String>) {
        let field = field.into();
        let message = message.into();
        match self.0.iter_mut().find(|(name, _)| *name == field) {
            Some((_, messages)) => {
                if !messages.contains(&message) {
                    messages.push(message);
                }
            }
            None => self.0.push((field, vec![message])),
        }
    }

    /// Records every error of `other`.
    pub fn merge(&mut self, other: FieldErrors) {
        for (field, messages) in other.0 {
            for message in messages {
                self.add(field.clone(), message);
            }
        }
    }

    /// True when nothing failed.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// True when `field` has at least one error.
    pub fn has(&self, field: &str) -> bool {
        self.0.iter().any(|(name, _)| name == field)
    }

    /// The failing field paths, in the order found.
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(name, _)| name.as_str())
    }

    /// Field paths with their messages, in the order found.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[String])> {
        self.0
            .iter()
            .map(|(name, messages)| (name.as_str(), messages.as_slice()))
    }

    /// `Ok(value)` when nothing failed, else these errors.
    pub fn into_result<T>(self, value: T) -> Result<T, FieldErrors> {
        if self.is_empty() {
            Ok(value)
        } else {
            Err(self)
        }
    }
}

impl std::fmt::Display for FieldErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut first = true;
        for (field, messages) in &self.0 {
            for message in messages {
                if !first {
                    f.write_str("; ")?;
                }
                first = false;
                write!(f, "{field} {message}")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for FieldErrors {}

/// What a JSON object holds under one key.
#[derive(Debug, Clone, Copy)]
pub enum Field<'a> {
    /// The key is not there.
    Absent,
    /// The key is there with `null`.
    Null,
    /// The key is there with a value.
    Present(&'a Value),
}

/// Objects with at most this many keys are searched key by key rather than through their
/// hash index.
const SCANNED_KEYS: usize = 16;

/// Looks `key` up in `object`. A body has a handful of keys and a rule looks up a dozen:
/// comparing them is cheaper than hashing each lookup (SipHash, in `serde_json`'s ordered
/// map), which took about 5% of an order's instructions. Large objects (only a hostile
/// client sends them) use the index, so that a lookup never costs more than one hash.
pub fn field<'a>(object: &'a Map<String, Value>, key: &str) -> Field<'a> {
    let found = if object.len() <= SCANNED_KEYS {
        object
            .iter()
            .find_map(|(name, value)| (name == key).then_some(value))
    } else {
        object.get(key)
    };
    match found {
        None => Field::Absent,
        Some(Value::Null) => Field::Null,
        Some(value) => Field::Present(value),
    }
}

/// A body type that keeps only the fields its rules read: the slot of a key, `None` for a
/// key it skips. Parsers fill the slots (`Some(Value::Null)` for an explicit `null`) and
/// never hold the other keys.
pub trait BodyFields: Default {
    /// Where the value of `key` goes, if it is one of the type's fields.
    fn slot(&mut self, key: &str) -> Option<&mut Option<Value>>;
}

/// A field as a [`BodyFields`] slot holds it.
pub fn slot(value: &Option<Value>) -> Field<'_> {
    match value {
        None => Field::Absent,
        Some(Value::Null) => Field::Null,
        Some(value) => Field::Present(value),
    }
}

/// A positive integer id sent as a JSON number or as a string of decimal digits.
///
/// Floats, negative numbers, zero, signs, spaces and anything too large for `u64` are refused.
pub fn positive_id(value: &Value) -> Option<u64> {
    let id = match value {
        Value::Number(number) => number.as_u64()?,
        Value::String(text) => parse_digits(text)?,
        _ => return None,
    };
    (id > 0).then_some(id)
}

/// An integer (possibly negative) sent as a JSON number or as a string of decimal digits
/// with an optional leading minus sign.
pub fn integer(value: &Value) -> Option<i64> {
    match value {
        Value::Number(number) => number.as_i64(),
        Value::String(text) => match text.strip_prefix('-') {
            Some(rest) => parse_digits(rest)
                .and_then(|n| i64::try_from(n).ok())
                .map(|n| -n),
            None => parse_digits(text).and_then(|n| i64::try_from(n).ok()),
        },
        _ => None,
    }
}

/// A boolean sent as JSON `true`/`false` or as the strings `"true"`/`"false"` (clients
/// built on form parameters send strings).
pub fn boolean(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(flag) => Some(*flag),
        Value::String(text) if text == "true" => Some(true),
        Value::String(text) if text == "false" => Some(false),
        _ => None,
    }
}

/// A non-empty run of ASCII digits that fits in `u64`.
pub fn parse_digits(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// The text of a string field: JSON strings as they are, numbers in their JSON spelling
/// (clients built on form parameters send a postcode or a phone number as a number).
pub fn text(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        _ => None,
    }
}

/// The contract's wording for a string over `max` characters.
pub fn too_long(max: usize) -> String {
    format!("is too long (maximum is {max} characters)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_accept_numbers_and_digit_strings_only() {
        assert_eq!(positive_id(&json!(217)), Some(217));
        assert_eq!(positive_id(&json!("217")), Some(217));
        for bad in [
            json!(0),
            json!(-1),
            json!(2.5),
            json!("abc"),
            json!(" 1"),
            json!("+1"),
            json!(""),
            json!(true),
            json!([1]),
            json!("99999999999999999999999"),
        ] {
            assert_eq!(positive_id(&bad), None, "{bad}");
        }
    }

    #[test]
    fn integers_accept_signs_in_strings() {
        assert_eq!(integer(&json!("-3")), Some(-3));
        assert_eq!(integer(&json!(4)), Some(4));
        assert_eq!(integer(&json!("--3")), None);
        assert_eq!(integer(&json!(1.0)), None);
    }

    #[test]
    fn a_field_is_found_in_small_and_large_objects_alike() {
        for keys in [0, 1, SCANNED_KEYS, SCANNED_KEYS + 1, 200] {
            let mut object: Map<String, Value> =
                (0..keys).map(|n| (format!("k{n}"), json!(n))).collect();
            object.insert("nothing".into(), Value::Null);
            for n in 0..keys {
                assert!(
                    matches!(field(&object, &format!("k{n}")), Field::Present(v) if *v == json!(n)),
                    "k{n} of {keys}"
                );
            }
            assert!(matches!(field(&object, "nothing"), Field::Null));
            assert!(matches!(field(&object, "absent"), Field::Absent));
            assert!(matches!(field(&object, "k"), Field::Absent));
        }
    }

    #[test]
    fn errors_keep_order_and_skip_repeats() {
        let mut errors = FieldErrors::new();
        errors.add("b", BLANK);
        errors.add("a", INVALID);
        errors.add("b", BLANK);
        assert_eq!(errors.fields().collect::<Vec<_>>(), ["b", "a"]);
        assert_eq!(errors.to_string(), "b can't be blank; a is invalid");
    }
}
