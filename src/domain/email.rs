//! Customer email addresses: what counts as plausible, and the folded form under which the
//! registry indexes them so that lookups and uniqueness ignore case and surrounding spaces.
//!
//! Must not touch: the index itself (the registry's), I/O.

use super::fields::{too_long, INVALID, MAX_STRING_CHARS};

/// A plausible email address, trimmed but otherwise kept as the customer wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Email(String);

impl Email {
    /// Trims `raw` and checks it: one `@` with something on both sides, no white space or
    /// control characters, at most 255 characters. The error is the contract's message.
    pub fn parse(raw: &str) -> Result<Email, String> {
        let trimmed = raw.trim();
        if trimmed.chars().count() > MAX_STRING_CHARS {
            return Err(too_long(MAX_STRING_CHARS));
        }
        let mut parts = trimmed.split('@');
        let plausible = match (parts.next(), parts.next(), parts.next()) {
            (Some(local), Some(domain), None) => {
                !local.is_empty()
                    && !domain.is_empty()
                    && !trimmed.chars().any(|c| c.is_whitespace() || c.is_control())
            }
            _ => false,
        };
        if plausible {
            Ok(Email(trimmed.to_owned()))
        } else {
            Err(INVALID.to_owned())
        }
    }

    /// Rebuilds an address that was checked before (a stored record).
    pub fn from_trusted(address: String) -> Email {
        Email(address)
    }

    /// The address as the customer gave it, trimmed.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The folded form the email index is keyed by.
    pub fn index_key(&self) -> String {
        fold(&self.0)
    }
}

/// Trims and case-folds an address for matching; folding a folded address changes nothing.
pub fn fold(raw: &str) -> String {
    raw.trim().to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn accepts_plausible_and_refuses_the_rest() {
        assert_eq!(
            Email::parse("  Joe@Example.com ").unwrap().as_str(),
            "Joe@Example.com"
        );
        for bad in [
            "",
            "joe",
            "@example.com",
            "joe@",
            "a@b@c",
            "jo e@example.com",
            "joe@exa\tmple",
        ] {
            assert!(Email::parse(bad).is_err(), "{bad:?}");
        }
        let long = format!("{}@example.com", "a".repeat(250));
        assert_eq!(Email::parse(&long).unwrap_err(), too_long(255));
    }

    #[test]
    fn index_key_ignores_case_and_spaces() {
        let a = Email::parse(" JOE@example.COM").unwrap();
        let b = Email::parse("joe@EXAMPLE.com ").unwrap();
        assert_eq!(a.index_key(), b.index_key());
    }

    proptest! {
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn folding_is_idempotent(raw in any::<String>()) {
            let once = fold(&raw);
            prop_assert_eq!(fold(&once), once);
        }

        #[test]
        fn parsed_addresses_reparse_to_themselves(raw in "[ ]{0,2}[a-zA-Z0-9._%+-]{1,20}@[a-zA-Z0-9.-]{1,20}[ ]{0,2}") {
            let email = Email::parse(&raw).unwrap();
            prop_assert_eq!(Email::parse(email.as_str()).unwrap(), email.clone());
            prop_assert_eq!(fold(&email.index_key()), email.index_key());
        }

        #[test]
        fn parse_never_panics(raw in any::<String>()) {
            let _ = Email::parse(&raw);
        }
    }
}
