//! API-key authentication: the key table is part of the catalogue, and its secrets exist only
//! as SHA-256 digests (`secret_sha256` in the file), compared in constant time; an unknown
//! key costs the same work as a wrong secret. Also the keys a front end routes a webstore by.
//!
//! Must not touch: producers' passwords (argon2id, `domain::password`), the file's other
//! checks.

use std::sync::Arc;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::{Catalogue, Webstore, WebstoreIdx};

/// Compared against when a key is unknown, so that an unknown key costs the same work as a
/// wrong secret.
const NO_SECRET_DIGEST: [u8; 32] = [0xA5; 32];

impl Catalogue {
    /// The API keys (not their secrets) of the webstore at `idx`, sorted: what a front end
    /// routes by.
    pub fn api_keys_of(&self, idx: WebstoreIdx) -> Vec<&str> {
        let mut keys: Vec<&str> = self
            .api_keys
            .iter()
            .filter(|(_, (owner, _))| *owner == idx)
            .map(|(key, _)| key.as_str())
            .collect();
        keys.sort_unstable();
        keys
    }

    /// The webstore whose key pair this is, or `None`. The secret's digest is compared in
    /// constant time, and an unknown key does the same work as a known one.
    pub fn authenticate(&self, key: &str, secret: &str) -> Option<&Arc<Webstore>> {
        let digest: [u8; 32] = Sha256::digest(secret.as_bytes()).into();
        let (idx, expected) = match self.api_keys.get(key) {
            Some((idx, expected)) => (Some(*idx), expected),
            None => (None, &NO_SECRET_DIGEST),
        };
        let secret_matches: bool = digest.ct_eq(expected).into();
        match idx {
            Some(idx) if secret_matches => self.webstore(idx),
            _ => None,
        }
    }
}

/// Lower-case hex SHA-256 of a secret: the `secret_sha256` a catalogue stores.
pub fn secret_sha256(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// The digest a catalogue's `secret_sha256` spells: 64 hexadecimal digits.
pub(super) fn parse_sha256(text: &str) -> Option<[u8; 32]> {
    let mut digest = [0u8; 32];
    hex::decode_to_slice(text, &mut digest).ok()?;
    Some(digest)
}
