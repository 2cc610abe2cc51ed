//! The quota fields of draft-ietf-httpapi-ratelimit-headers-11 on the API's answers:
//! `RateLimit-Policy` (the webstore's quotas: `"writes";q=100;w=1, "reads";q=200;w=1,
//! "concurrency";q=64;qu="concurrent-requests"`, the rate quotas only where the catalogue
//! sets them) and `RateLimit` (what is left of the rate quota the request took from, and the
//! seconds until it is whole: `"writes";r=42;t=1`; absent when no rate quota applies to it),
//! both Structured Fields lists. A refusal says `r=0` and `t` (and `Retry-After`) the seconds
//! until a request would be let through.
//!
//! Must not touch: the quotas' arithmetic, or the `RateLimit-Policy` value, which
//! `crate::quotas` writes once per webstore when its quotas come into force (this module
//! puts it on answers).

use bytes::Bytes;
use warp::http::{header, HeaderMap, HeaderName, HeaderValue};

use crate::quotas::{Checked, OverQuota, Quota};

/// `RateLimit-Policy` (made once: from a `&str`, each use would parse it again).
pub static RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `RateLimit`.
pub static RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// Stamps an answer to a request its quotas let through.
pub fn stamp(headers: &mut HeaderMap, checked: &Checked) {
    insert_policies(headers, &checked.policies);
    if let Some((quota, remaining)) = checked.rate {
        headers.insert(
            RATELIMIT.clone(),
            state_field(quota, remaining.requests, remaining.full_in_secs),
        );
    }
}

/// Stamps a 429 of a quota.
pub fn stamp_refusal(headers: &mut HeaderMap, refusal: &OverQuota) {
    insert_policies(headers, &refusal.policies);
    headers.insert(
        RATELIMIT.clone(),
        state_field(refusal.quota, 0, refusal.retry_after_secs),
    );
    headers.insert(
        header::RETRY_AFTER,
        HeaderValue::from(refusal.retry_after_secs.max(1)),
    );
}

fn insert_policies(headers: &mut HeaderMap, policies: &Bytes) {
    if let Ok(value) = HeaderValue::from_maybe_shared(policies.clone()) {
        headers.insert(RATELIMIT_POLICY.clone(), value);
    }
}

/// `"{policy}";r={remaining};t={reset}`, written into a buffer on the stack.
fn state_field(quota: Quota, remaining: u32, reset_secs: u64) -> HeaderValue {
    use std::io::Write;
    let mut buffer = [0u8; 64];
    let mut cursor = std::io::Cursor::new(&mut buffer[..]);
    // 64 bytes hold the longest name and two 20-digit numbers.
    let _ = write!(cursor, "\"{}\";r={remaining};t={reset_secs}", quota.name());
    let written = cursor.position() as usize;
    HeaderValue::from_bytes(&buffer[..written]).unwrap_or_else(|_| HeaderValue::from_static(""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_field_is_a_structured_fields_item_with_r_and_t() {
        assert_eq!(state_field(Quota::Writes, 42, 1), "\"writes\";r=42;t=1");
        assert_eq!(
            state_field(Quota::Concurrency, 0, u64::MAX),
            "\"concurrency\";r=0;t=18446744073709551615"
        );
    }
}
