//! How a browser names its webstore to a sharded deployment's front end. API requests carry
//! an `API-Key`, which HAProxy maps to a shard; a browser opening the producers' app carries
//! none, so the app gives it a routing cookie naming the producer's webstore, and HAProxy maps
//! the cookie's value to the shard through a second map (webstore to backend) that
//! `boxsub haproxy-config` writes and `boxsub move-webstore` keeps current. This file owns
//! the cookie's name and how a webstore id is written as its value and as the map's key (the
//! same text, so that HAProxy's lookup is a plain string match).
//!
//! Must not touch: cookies' attributes (the app's), maps and HAProxy (sharding's).

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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
