//! How a browser names its webstore to a sharded deployment's front end. API requests carry
//! an `API-Key`, which HAProxy maps to a shard; a browser opening the producers' app carries
//! none, so the app gives it a routing cookie naming the producer's webstore, and HAProxy maps
//! the cookie's value to the shard through a second map (webstore to backend) that
//! `boxsub haproxy-config` writes and `boxsub move-webstore` keeps current. This file owns
//! the cookie's name and how a webstore id is written as its value and as the map's key (the
//! same text, so that HAProxy's lookup is a plain string match), and which webstore's shard
//! checks a sign-in ([`sign_in_webstore`]).
//!
//! Must not touch: cookies' attributes (the app's), maps and HAProxy (sharding's).

use std::sync::Arc;

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use super::catalogue::{Catalogue, Webstore};
use super::email::fold;

/// The routing cookie.
pub const ROUTING_COOKIE: &str = "boxsub_webstore";

/// How long a browser keeps the routing cookie: 400 days, the most browsers keep any cookie
/// (RFC 6265bis caps `Max-Age` there). It names a webstore, no secret, and the map follows
/// the webstore through moves, so a lasting cookie only spares a producer's browser, after
/// it restarts, the detour of a sign-in through a shard that does not serve the webstore.
pub const ROUTING_COOKIE_MAX_AGE_SECS: u64 = 400 * 24 * 60 * 60;

/// `webstore_id` as the routing cookie's value and the webstore map's key: the id itself when
/// every byte is a letter, a digit or one of `-._~`, each other byte as `%XX` (a cookie value
/// and a map key may hold neither spaces, `;`, `,`, quotes nor control characters).
pub fn route_key(webstore_id: &str) -> String {
    let mut key = String::with_capacity(webstore_id.len());
    for byte in webstore_id.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            key.push(char::from(byte));
        } else {
            key.push_str(&format!("%{byte:02X}"));
        }
    }
    key
}

/// The webstore whose shard checks a sign-in with `email`, `None` only for a catalogue
/// without webstores. A producer's email is its webstore's. Any other email is given one of
/// the catalogue's webstores, picked by HMAC-SHA256 of the folded email under a key made
/// from every producer's password hash (secret, and the same on every shard, which all read
/// one catalogue): a shard that does not serve the webstore sends the sign-in on to the one
/// that does without checking anything, and being sent on then tells nothing of whether the
/// email is an account's, to anyone who cannot tell which webstore an account would be of.
pub fn sign_in_webstore<'c>(catalogue: &'c Catalogue, email: &str) -> Option<&'c Arc<Webstore>> {
    if let Some((webstore, _)) = catalogue.producer(email) {
        return Some(webstore);
    }
    let webstores = catalogue.webstores();
    if webstores.is_empty() {
        return None;
    }
    let mut key = Sha256::new();
    key.update(b"boxsub sign-in routing\0");
    for webstore in webstores {
        for producer in webstore.producers.values() {
            key.update(producer.password_hash.as_bytes());
            key.update(b"\0");
        }
    }
    let mut mac =
        Hmac::<Sha256>::new_from_slice(&key.finalize()).expect("HMAC takes a key of any length");
    mac.update(fold(email).as_bytes());
    let digest = mac.finalize().into_bytes();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    let picked = u64::from_be_bytes(first) % webstores.len() as u64;
    webstores.get(picked as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::catalogue::DEMO_CATALOGUE_JSON;
    use proptest::prelude::*;

    fn catalogue_with_producer(hash: &str) -> Catalogue {
        let mut demo: serde_json::Value = serde_json::from_str(DEMO_CATALOGUE_JSON).unwrap();
        demo["webstores"][1]["producers"] =
            serde_json::json!([{"email": "pat@farm.example", "password_hash": hash}]);
        Catalogue::parse(&demo.to_string(), 0).unwrap()
    }

    #[test]
    fn a_producer_signs_in_at_its_webstore_and_other_emails_are_spread_by_a_secret_key() {
        let hash = crate::domain::password::hash_password("shed key", &[5; 16]).unwrap();
        let catalogue = catalogue_with_producer(&hash);
        let webstores = catalogue.webstores();
        let producers = &webstores[1];
        for email in ["pat@farm.example", " PAT@Farm.example "] {
            let picked = sign_in_webstore(&catalogue, email).unwrap();
            assert_eq!(picked.settings.id, producers.settings.id);
        }
        // Every webstore is some unknown email's, and an email's stays put.
        let picks: Vec<String> = (0..64)
            .map(|n| {
                sign_in_webstore(&catalogue, &format!("nobody{n}@example.com"))
                    .unwrap()
                    .settings
                    .id
                    .clone()
            })
            .collect();
        for webstore in webstores {
            assert!(picks.contains(&webstore.settings.id), "{picks:?}");
        }
        let again = sign_in_webstore(&catalogue, " NOBODY0@example.com").unwrap();
        assert_eq!(again.settings.id, picks[0]);
        // Another key (another password hash): another spread.
        let other_hash = crate::domain::password::hash_password("shed key", &[6; 16]).unwrap();
        let other = catalogue_with_producer(&other_hash);
        let moved = (0..64).any(|n| {
            let email = format!("nobody{n}@example.com");
            sign_in_webstore(&other, &email).unwrap().settings.id != picks[n]
        });
        assert!(moved, "the spread depends on the secret key");
    }

    #[test]
    fn plain_ids_are_kept_and_others_escaped() {
        assert_eq!(route_key("fantastic-vege-people"), "fantastic-vege-people");
        assert_eq!(route_key("shop 1;x"), "shop%201%3Bx");
        assert_eq!(route_key("café"), "caf%C3%A9");
    }

    proptest! {
        #[test]
        fn a_key_is_cookie_and_map_safe_and_tells_ids_apart(a in ".{1,20}", b in ".{1,20}") {
            let key = route_key(&a);
            prop_assert!(key.bytes().all(|byte| byte.is_ascii_alphanumeric() || b"-._~%".contains(&byte)));
            prop_assert_eq!(a == b, key == route_key(&b));
        }
    }
}
