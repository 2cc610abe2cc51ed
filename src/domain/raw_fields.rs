//! A JSON object read with each field's text kept (`{"payment": {...}}` or the fields bare),
//! so that money is read exactly from what the client wrote: `12.50` and `"12.50"` are 1,250
//! minor units, and `2.675` is refused rather than rounded through a float. The other fields
//! are read from the same text as values.
//!
//! Must not touch: what the fields mean (the rules that read them), status codes.

use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::Value;

use super::day::{parse_iso_date, Day};
use super::fields::{text, too_long, FieldErrors, INVALID, MAX_STRING_CHARS};
use super::money::Amount;

/// A request body's fields, each as it was written, and the names sent beside an envelope
/// (`{"payment": {...}, "amount": 1}`): those are no field of the request, whatever their
/// name, and [`RawFields::unknown`] names them.
#[derive(Debug, Default)]
pub struct RawFields(BTreeMap<String, Box<RawValue>>, Vec<String>);

/// What a body read as raw fields could not be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotAnObject;

impl RawFields {
    /// Reads `bytes` as a JSON object, unwrapped from `{"<envelope>": {...}}` when sent so.
    /// A key sent twice keeps its last value, as in a map.
    pub fn read(bytes: &[u8], envelope: &str) -> Result<RawFields, NotAnObject> {
        let outer: BTreeMap<String, Box<RawValue>> =
            serde_json::from_slice(bytes).map_err(|_| NotAnObject)?;
        if let Some(inner) = outer.get(envelope) {
            if inner.get().trim_start().starts_with('{') {
                let fields = serde_json::from_str(inner.get()).map_err(|_| NotAnObject)?;
                let beside = outer.keys().filter(|name| *name != envelope).cloned();
                return Ok(RawFields(fields, beside.collect()));
            }
        }
        Ok(RawFields(outer, Vec::new()))
    }

    /// The fields, for tests and fuzzing: built from `(name, JSON text)` pairs.
    pub fn of(pairs: &[(&str, &str)]) -> RawFields {
        RawFields(
            pairs
                .iter()
                .filter_map(|(name, text)| {
                    RawValue::from_string((*text).to_owned())
                        .ok()
                        .map(|raw| ((*name).to_owned(), raw))
                })
                .collect(),
            Vec::new(),
        )
    }

    /// The JSON text of `name`, if sent (`null` included).
    pub fn text(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(|raw| raw.get())
    }

    /// The value of `name`: absent, `null`, or the value.
    pub fn value(&self, name: &str) -> Option<Value> {
        self.text(name)
            .and_then(|text| serde_json::from_str(text).ok())
    }

    /// Whether `name` was sent as `null`.
    pub fn is_null(&self, name: &str) -> bool {
        self.text(name).is_some_and(|text| text.trim() == "null")
    }

    /// A text field (a string, or a number taken as its text) of at most 255 characters:
    /// `None` when absent, `null` or empty; anything else is named in `errors`.
    pub fn string(&self, name: &str, errors: &mut FieldErrors) -> Option<String> {
        match self.value(name) {
            None | Some(Value::Null) => None,
            Some(value) => match text(&value) {
                Some(text) if text.trim().is_empty() => None,
                Some(text) if text.chars().count() > MAX_STRING_CHARS => {
                    errors.add(name, too_long(MAX_STRING_CHARS));
                    None
                }
                Some(text) => Some(text),
                None => {
                    errors.add(name, INVALID);
                    None
                }
            },
        }
    }

    /// A `YYYY-MM-DD` date: `None` when absent or `null`; anything else is named.
    pub fn date(&self, name: &str, errors: &mut FieldErrors) -> Option<Day> {
        match self.value(name) {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) if parse_iso_date(&text).is_some() => parse_iso_date(&text),
            Some(_) => {
                errors.add(name, INVALID);
                None
            }
        }
    }

    /// An amount, read exactly from its text ([`Amount::from_json_text`]): `None` when
    /// absent or `null`; anything else is named.
    pub fn amount(&self, name: &str, errors: &mut FieldErrors) -> Option<Amount> {
        match self.text(name) {
            None => None,
            Some(_) if self.is_null(name) => None,
            Some(raw) => {
                let amount = Amount::from_json_text(raw);
                if amount.is_none() {
                    errors.add(name, INVALID);
                }
                amount
            }
        }
    }

    /// Names in `errors` every field sent that is not among `known`.
    pub fn refuse_unknown(&self, known: &[&str], errors: &mut FieldErrors, message: &str) {
        for name in self.unknown(known) {
            errors.add(name, message);
        }
    }

    /// The names sent that are not among `known`, and those sent beside the envelope.
    pub fn unknown<'a>(&'a self, known: &'a [&str]) -> impl Iterator<Item = &'a str> + 'a {
        self.0
            .keys()
            .map(String::as_str)
            .filter(move |name| !known.contains(name))
            .chain(self.1.iter().map(String::as_str))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_keep_their_text_bare_or_in_their_envelope() {
        for body in [
            r#"{"payment": {"amount": 12.50, "method": "cash"}}"#,
            r#"{"amount": 12.50, "method": "cash"}"#,
        ] {
            let fields = RawFields::read(body.as_bytes(), "payment").unwrap();
            assert_eq!(fields.text("amount"), Some("12.50"));
            assert_eq!(fields.value("method"), Some(Value::from("cash")));
            assert_eq!(fields.unknown(&["amount"]).collect::<Vec<_>>(), ["method"]);
        }
        assert_eq!(RawFields::read(b"[1]", "payment").unwrap_err(), NotAnObject);
        assert_eq!(RawFields::read(b"{", "payment").unwrap_err(), NotAnObject);
        let null = RawFields::read(br#"{"discount": null}"#, "account").unwrap();
        assert!(null.is_null("discount"));
        assert_eq!(null.value("discount"), Some(Value::Null));
    }

    #[test]
    fn a_field_beside_the_envelope_is_no_field_of_the_request() {
        let body = br#"{"account": {"discount": 0.1}, "balance_threshold": {}, "x": 1}"#;
        let fields = RawFields::read(body, "account").unwrap();
        assert_eq!(fields.text("balance_threshold"), None);
        let known = ["discount", "balance_threshold"];
        assert_eq!(
            fields.unknown(&known).collect::<Vec<_>>(),
            ["balance_threshold", "x"]
        );
    }
}
