//! `boxsub keygen`: a new random API key pair for the operator's catalogue. Only the secret's
//! SHA-256 goes into the catalogue; the secret itself is shown once and never stored.
//!
//! Must not touch: the catalogue file (the operator edits it), storing the secret anywhere.

use crate::domain::catalogue::secret_sha256;

/// A freshly generated key pair.
pub struct KeyPair {
    /// The public key, sent as `API-Key`.
    pub key: String,
    /// The secret, sent as `API-Secret`.
    pub secret: String,
    /// What the catalogue stores.
    pub secret_sha256: String,
}

/// Generates a key (16 random bytes) and a secret (32 random bytes), hex-encoded.
pub fn generate() -> Result<KeyPair, crate::random::Error> {
    let key: [u8; 16] = crate::random::secret()?;
    let secret: [u8; 32] = crate::random::secret()?;
    let secret = hex::encode(secret);
    Ok(KeyPair {
        key: format!("bx_{}", hex::encode(key)),
        secret_sha256: secret_sha256(&secret),
        secret,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn pairs_are_fresh_and_consistent() {
        let a = super::generate().unwrap();
        let b = super::generate().unwrap();
        assert_ne!(a.secret, b.secret);
        assert_eq!(
            a.secret_sha256,
            crate::domain::catalogue::secret_sha256(&a.secret)
        );
        assert_eq!(a.secret_sha256.len(), 64);
    }
}
