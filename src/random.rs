//! Random bytes and numbers, the one place that asks the kernel for them (as [`crate::clock`]
//! is for the wall clock). Two kinds, never mixed up:
//!
//! - [`secret`]: for what must stay unguessable (API keys and secrets, password salts,
//!   session tokens, webhook secrets). Without the kernel's randomness it is an error: a
//!   secret is never made up from anything predictable.
//! - [`unique`], [`nonce`], [`unit_interval`]: for what must only differ from one use to the
//!   next (message ids, terms, copy sessions, temporary file names, the event ids' key, a
//!   retry's jitter). Without the kernel's randomness they fall back on the clock's
//!   nanoseconds and the process id, which still tell attempts and processes apart.
//!
//! Must not touch: anything but the kernel's randomness and, as the fallback, the clock; the
//! domain, which is pure, is given what it needs instead of drawing it.

use std::time::{SystemTime, UNIX_EPOCH};

pub use getrandom::Error;

/// `N` bytes of the kernel's randomness, or why there are none.
pub fn secret<const N: usize>() -> Result<[u8; N], Error> {
    let mut bytes = [0u8; N];
    getrandom::getrandom(&mut bytes)?;
    Ok(bytes)
}

/// `N` bytes that differ from every other call's: random, or without the kernel's
/// randomness, the clock's nanoseconds and the process id (repeated to fill them). Never for
/// secrets.
pub fn unique<const N: usize>() -> [u8; N] {
    secret().unwrap_or_else(|_| fallback())
}

/// A number that differs from every other call's (see [`unique`]).
pub fn nonce() -> u64 {
    u64::from_le_bytes(unique())
}

/// A number in 0..=1, about uniform (see [`unique`]), for jitter.
pub fn unit_interval() -> f64 {
    f64::from(u32::from_le_bytes(unique())) / f64::from(u32::MAX)
}

/// The clock's nanoseconds, then the process id, repeated to fill `N` bytes.
fn fallback<const N: usize>() -> [u8; N] {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    let mut material = [0u8; 20];
    material[..16].copy_from_slice(&nanos.to_le_bytes());
    material[16..].copy_from_slice(&std::process::id().to_le_bytes());
    let mut bytes = [0u8; N];
    for (byte, from) in bytes.iter_mut().zip(material.iter().cycle()) {
        *byte = *from;
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn nonces_and_secrets_differ_from_call_to_call() {
        let nonces: HashSet<u64> = (0..1_000).map(|_| nonce()).collect();
        assert_eq!(nonces.len(), 1_000);
        assert_ne!(secret::<32>().unwrap(), secret::<32>().unwrap());
    }

    #[test]
    fn the_fallback_fills_every_byte_with_the_clock_and_the_process() {
        let short: [u8; 8] = fallback();
        let long: [u8; 40] = fallback();
        assert_ne!(short, [0; 8]);
        let pid = std::process::id().to_le_bytes();
        assert_eq!(&long[16..20], &pid);
        assert_eq!(&long[36..40], &pid);
    }

    #[test]
    fn the_unit_interval_stays_within_it() {
        for _ in 0..1_000 {
            let x = unit_interval();
            assert!((0.0..=1.0).contains(&x), "{x}");
        }
    }
}
