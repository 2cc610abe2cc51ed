//! A webstore's quotas as the catalogue states them: how many writes and reads per second it
//! may make (each with a burst), if any, and how many requests it may have in progress at
//! once, for all its API keys together. The catalogue's top-level `quotas` gives the defaults
//! of every webstore (field by field); a webstore's own `quotas` overrides them; a field given
//! nowhere takes the built-in default below. By default no rate quota applies, so that a
//! catalogue that names none serves the contract's clients as the contract says (they know no
//! 429): rate quotas are for operators who host other people's webstores.
//!
//! Must not touch: enforcement (`crate::quotas` holds the limiters and the admission queues).

use serde::{Deserialize, Deserializer};

/// Largest rate, burst or concurrency a catalogue may give: far above what one host serves,
/// and small enough that the limiters' arithmetic (nanoseconds per request) cannot overflow
/// or round to zero.
pub const MAX_QUOTA: u32 = 1_000_000;

/// A rate quota: so many requests a second, sustained, and so many at once after a quiet
/// spell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RateSettings {
    /// Requests per second, sustained.
    pub per_second: u32,
    /// Requests that may come at once after a quiet spell.
    pub burst: u32,
}

/// What one webstore may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QuotaSettings {
    /// Writes (creates and changes), if they have a quota.
    pub writes: Option<RateSettings>,
    /// Reads (every other authenticated request), if they have a quota.
    pub reads: Option<RateSettings>,
    /// Requests in progress at once (waiting for admission included).
    pub concurrent_requests: u32,
}

impl QuotaSettings {
    /// What a webstore gets when the catalogue names no quota: no rate quota, and room for
    /// far more requests at once than a cart's connections (a cart pushing orders on 64
    /// connections never meets it), so that only a client holding hundreds of requests open
    /// is refused.
    pub const DEFAULT: QuotaSettings = QuotaSettings {
        writes: None,
        reads: None,
        concurrent_requests: 1024,
    };
}

impl Default for QuotaSettings {
    fn default() -> QuotaSettings {
        QuotaSettings::DEFAULT
    }
}

/// A field that may be absent (inherited), `null` (no quota) or a number.
type Given = Option<Option<u32>>;

/// Reads a present field, `null` included, as `Some`; `#[serde(default)]` makes an absent
/// one `None`.
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Given, D::Error> {
    Option::<u32>::deserialize(deserializer).map(Some)
}

/// `quotas` as a catalogue writes it, at the top level or in a webstore: every field
/// optional; `writes_per_second` or `reads_per_second` set to `null` lifts a rate quota the
/// top level gave.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotasFile {
    #[serde(default, deserialize_with = "present")]
    writes_per_second: Given,
    #[serde(default, deserialize_with = "present")]
    write_burst: Given,
    #[serde(default, deserialize_with = "present")]
    reads_per_second: Given,
    #[serde(default, deserialize_with = "present")]
    read_burst: Given,
    #[serde(default, deserialize_with = "present")]
    concurrent_requests: Given,
}

impl QuotasFile {
    /// These quotas over `defaults`, field by field, or every field out of range (each named).
    pub fn over(&self, defaults: QuotaSettings) -> Result<QuotaSettings, Vec<String>> {
        let mut problems = Vec::new();
        let writes = rate(
            ("writes_per_second", self.writes_per_second),
            ("write_burst", self.write_burst),
            defaults.writes,
            &mut problems,
        );
        let reads = rate(
            ("reads_per_second", self.reads_per_second),
            ("read_burst", self.read_burst),
            defaults.reads,
            &mut problems,
        );
        let concurrent_requests = match self.concurrent_requests {
            None => defaults.concurrent_requests,
            Some(given) => in_range("concurrent_requests", given, &mut problems).unwrap_or(1),
        };
        if problems.is_empty() {
            Ok(QuotaSettings {
                writes,
                reads,
                concurrent_requests,
            })
        } else {
            Err(problems)
        }
    }
}

/// `given`, if it is a number from 1 to [`MAX_QUOTA`]; else a problem naming `name`.
fn in_range(name: &str, given: Option<u32>, problems: &mut Vec<String>) -> Option<u32> {
    match given {
        Some(value) if (1..=MAX_QUOTA).contains(&value) => Some(value),
        _ => {
            problems.push(format!("{name} must be from 1 to {MAX_QUOTA}"));
            None
        }
    }
}

/// One rate quota over the one inherited: the rate given (`null`: none), else the one
/// inherited; its burst given, else the inherited quota's, else a second's worth.
fn rate(
    (rate_name, rate_given): (&str, Given),
    (burst_name, burst_given): (&str, Given),
    inherited: Option<RateSettings>,
    problems: &mut Vec<String>,
) -> Option<RateSettings> {
    let per_second = match rate_given {
        None => inherited.map(|quota| quota.per_second),
        Some(None) => None,
        Some(given) => in_range(rate_name, given, problems),
    };
    let burst = match burst_given {
        None => None,
        Some(given) => in_range(burst_name, given, problems),
    };
    match (per_second, burst_given) {
        (None, Some(_)) => {
            problems.push(format!("{burst_name} needs {rate_name}"));
            None
        }
        (None, None) => None,
        (Some(per_second), _) => Some(RateSettings {
            per_second,
            burst: burst
                .or(inherited.map(|quota| quota.burst))
                .unwrap_or(per_second),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(json: &str) -> QuotasFile {
        serde_json::from_str(json).unwrap()
    }

    const TEN: RateSettings = RateSettings {
        per_second: 10,
        burst: 20,
    };

    #[test]
    fn no_rate_quota_applies_unless_one_is_given() {
        let settings = file("{}").over(QuotaSettings::DEFAULT).unwrap();
        assert_eq!(settings, QuotaSettings::DEFAULT);
        assert_eq!((settings.writes, settings.reads), (None, None));
    }

    #[test]
    fn fields_given_override_the_defaults_one_by_one() {
        let top = file(r#"{"writes_per_second": 10, "write_burst": 20}"#)
            .over(QuotaSettings::DEFAULT)
            .unwrap();
        assert_eq!(top.writes, Some(TEN));
        assert_eq!(top.reads, None);
        // A webstore's rate keeps the burst it inherits, and a burst alone its rate.
        let rate = file(r#"{"writes_per_second": 5}"#).over(top).unwrap();
        assert_eq!(
            rate.writes,
            Some(RateSettings {
                per_second: 5,
                burst: 20
            })
        );
        let burst = file(r#"{"write_burst": 7}"#).over(top).unwrap();
        assert_eq!(
            burst.writes,
            Some(RateSettings {
                per_second: 10,
                burst: 7
            })
        );
        // A rate given without a burst anywhere allows a second's worth at once.
        let reads = file(r#"{"reads_per_second": 30}"#).over(top).unwrap();
        assert_eq!(
            reads.reads,
            Some(RateSettings {
                per_second: 30,
                burst: 30
            })
        );
        assert_eq!(file("{}").over(top).unwrap(), top);
    }

    #[test]
    fn null_lifts_an_inherited_rate_quota() {
        let top = QuotaSettings {
            writes: Some(TEN),
            reads: Some(TEN),
            concurrent_requests: 64,
        };
        let lifted = file(r#"{"writes_per_second": null}"#).over(top).unwrap();
        assert_eq!((lifted.writes, lifted.reads), (None, Some(TEN)));
    }

    #[test]
    fn every_field_out_of_range_is_named() {
        let problems =
            file(r#"{"write_burst": 0, "reads_per_second": 0, "concurrent_requests": 2000000}"#)
                .over(QuotaSettings::DEFAULT)
                .unwrap_err();
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(problems[0].starts_with("write_burst must be"));
        assert_eq!(problems[1], "write_burst needs writes_per_second");
        assert!(problems[2].starts_with("reads_per_second must be"));
        assert!(problems[3].starts_with("concurrent_requests must be"));
        let null = file(r#"{"concurrent_requests": null}"#)
            .over(QuotaSettings::DEFAULT)
            .unwrap_err();
        assert_eq!(null.len(), 1, "{null:?}");
    }

    #[test]
    fn an_unknown_field_is_refused() {
        assert!(serde_json::from_str::<QuotasFile>(r#"{"writes": 1}"#).is_err());
    }
}
