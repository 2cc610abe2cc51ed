//! A webstore's quotas as the catalogue states them: how many writes and reads per second it
//! may make (each with a burst) and how many requests it may have in progress at once, for
//! all its API keys together. The catalogue's top-level `quotas` gives the defaults of every
//! webstore that names none (field by field); a webstore's own `quotas` overrides them; a
//! field given nowhere takes the built-in default below.
//!
//! Must not touch: enforcement (`crate::quotas` holds the limiters and the admission queues).

use serde::Deserialize;

/// Largest rate, burst or concurrency a catalogue may give: far above what one host serves,
/// so that "unlimited" is expressible, and small enough that the limiters' arithmetic
/// (nanoseconds per request) cannot overflow or round to zero.
pub const MAX_QUOTA: u32 = 1_000_000;

/// What one webstore may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QuotaSettings {
    /// Writes (creates and changes) per second, sustained.
    pub writes_per_second: u32,
    /// Writes that may come at once after a quiet spell.
    pub write_burst: u32,
    /// Reads (every other authenticated request) per second, sustained.
    pub reads_per_second: u32,
    /// Reads that may come at once after a quiet spell.
    pub read_burst: u32,
    /// Requests in progress at once (waiting for admission included).
    pub concurrent_requests: u32,
}

impl QuotaSettings {
    /// What a webstore gets when the catalogue names no quota: a busy cart's steady rate
    /// with room for a burst, far below what one host serves, so that no single webstore can
    /// take the host by default.
    pub const DEFAULT: QuotaSettings = QuotaSettings {
        writes_per_second: 100,
        write_burst: 100,
        reads_per_second: 200,
        read_burst: 200,
        concurrent_requests: 64,
    };
}

impl Default for QuotaSettings {
    fn default() -> QuotaSettings {
        QuotaSettings::DEFAULT
    }
}

/// `quotas` as a catalogue writes it, at the top level or in a webstore: every field
/// optional.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotasFile {
    writes_per_second: Option<u32>,
    write_burst: Option<u32>,
    reads_per_second: Option<u32>,
    read_burst: Option<u32>,
    concurrent_requests: Option<u32>,
}

impl QuotasFile {
    /// These quotas over `defaults`, field by field, or every field out of range (each named).
    pub fn over(&self, defaults: QuotaSettings) -> Result<QuotaSettings, Vec<String>> {
        let mut problems = Vec::new();
        let mut field = |name: &str, given: Option<u32>, default: u32| {
            let value = given.unwrap_or(default);
            if !(1..=MAX_QUOTA).contains(&value) {
                problems.push(format!("{name} must be from 1 to {MAX_QUOTA}"));
            }
            value
        };
        let settings = QuotaSettings {
            writes_per_second: field(
                "writes_per_second",
                self.writes_per_second,
                defaults.writes_per_second,
            ),
            write_burst: field("write_burst", self.write_burst, defaults.write_burst),
            reads_per_second: field(
                "reads_per_second",
                self.reads_per_second,
                defaults.reads_per_second,
            ),
            read_burst: field("read_burst", self.read_burst, defaults.read_burst),
            concurrent_requests: field(
                "concurrent_requests",
                self.concurrent_requests,
                defaults.concurrent_requests,
            ),
        };
        if problems.is_empty() {
            Ok(settings)
        } else {
            Err(problems)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(json: &str) -> QuotasFile {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn fields_given_override_the_defaults_one_by_one() {
        let defaults = QuotaSettings::DEFAULT;
        let settings = file(r#"{"writes_per_second": 5}"#).over(defaults).unwrap();
        assert_eq!(
            settings,
            QuotaSettings {
                writes_per_second: 5,
                ..defaults
            }
        );
        assert_eq!(file("{}").over(defaults).unwrap(), defaults);
    }

    #[test]
    fn every_field_out_of_range_is_named() {
        let problems = file(r#"{"write_burst": 0, "concurrent_requests": 2000000}"#)
            .over(QuotaSettings::DEFAULT)
            .unwrap_err();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].starts_with("write_burst"));
        assert!(problems[1].starts_with("concurrent_requests"));
    }

    #[test]
    fn an_unknown_field_is_refused() {
        assert!(serde_json::from_str::<QuotasFile>(r#"{"writes": 1}"#).is_err());
    }
}
