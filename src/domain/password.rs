//! Customer passwords: argon2id with OWASP's parameters (m = 19456 KiB, t = 2, p = 1), stored
//! as PHC strings. Pure but slow (tens of milliseconds): callers run it on a blocking thread,
//! never inside an actor handler or on the async workers.
//!
//! Must not touch: the blocking threads and the pool that run it
//! (`crate::service::passwords`), salts' randomness (the caller's, `crate::random`).

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};

fn hasher() -> Argon2<'static> {
    let params = Params::new(19_456, 2, 1, None).expect("OWASP argon2 parameters are valid");
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

/// The PHC string of `password` hashed with `salt` (16 random bytes from the caller).
pub fn hash_password(password: &str, salt: &[u8; 16]) -> Result<String, String> {
    let salt = SaltString::encode_b64(salt).map_err(|e| e.to_string())?;
    hasher()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|e| e.to_string())
}

/// True when `password` matches the PHC string `hash`; the comparison is constant-time.
/// A malformed hash never matches.
pub fn verify_password(password: &str, hash: &str) -> bool {
    match PasswordHash::new(hash) {
        Ok(parsed) => hasher()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok(),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_verifies_its_password_only() {
        let hash = hash_password("correct horse", &[7; 16]).unwrap();
        assert!(hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"));
        assert!(!hash.contains("correct horse"));
        assert!(verify_password("correct horse", &hash));
        assert!(!verify_password("wrong horse", &hash));
        assert!(!verify_password("correct horse", "not a hash"));
    }
}
