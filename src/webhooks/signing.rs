//! Standard Webhooks signatures: `webhook-signature` holds `v1,` and the base64 of
//! HMAC-SHA256 over `{webhook-id}.{webhook-timestamp}.{body}`, keyed by the secret's bytes;
//! one signature per secret, separated by spaces, so that a receiver holding either secret
//! of a rotation accepts the delivery. Also makes new secrets (`boxsub webhook-secret`).
//!
//! Must not touch: HTTP, the catalogue (it is handed the secrets).

use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::domain::webhooks::{SigningSecret, SECRET_PREFIX};

/// The `webhook-signature` header's value for `body`, sent as message `id` at `timestamp`
/// (Unix seconds), with a signature for each of `secrets`.
pub fn signature_header(
    secrets: &[SigningSecret],
    id: &str,
    timestamp: i64,
    body: &[u8],
) -> String {
    let timestamp = timestamp.to_string();
    let mut header = String::with_capacity(secrets.len() * 48);
    for secret in secrets {
        // HMAC takes a key of any length; the error arm cannot happen.
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.key()) else {
            continue;
        };
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.as_bytes());
        mac.update(b".");
        mac.update(body);
        if !header.is_empty() {
            header.push(' ');
        }
        header.push_str("v1,");
        base64::engine::general_purpose::STANDARD
            .encode_string(mac.finalize().into_bytes(), &mut header);
    }
    header
}

/// A new signing secret: `whsec_` and the base64 of 32 random bytes.
pub fn new_secret() -> Result<String, crate::random::Error> {
    let bytes: [u8; 32] = crate::random::secret()?;
    Ok(format!(
        "{SECRET_PREFIX}{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification's reference libraries.
    #[test]
    fn the_specification_test_vector_is_signed_alike() {
        let secret = SigningSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let header = signature_header(
            &[secret],
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1_614_265_330,
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(header, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn a_rotation_signs_with_both_secrets() {
        let old = SigningSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let new = SigningSecret::parse(&new_secret().unwrap()).unwrap();
        let both = signature_header(&[old.clone(), new.clone()], "evt_1", 5, b"{}");
        let parts: Vec<&str> = both.split(' ').collect();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0], signature_header(&[old], "evt_1", 5, b"{}"));
        assert_eq!(parts[1], signature_header(&[new], "evt_1", 5, b"{}"));
    }

    #[test]
    fn new_secrets_are_read_back_and_differ() {
        let first = new_secret().unwrap();
        assert_eq!(SigningSecret::parse(&first).unwrap().key().len(), 32);
        assert_ne!(first, new_secret().unwrap());
    }
}
