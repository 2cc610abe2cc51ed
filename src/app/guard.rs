//! What keeps the app's pages to their producer and its forms to the app: reading the
//! session and form cookies from a request, writing them (`HttpOnly`, `SameSite`, `Path=/app`,
//! and `Secure` when the app is served over HTTPS), and telling a form posted from the app's
//! own pages from one posted by another site (the `Sec-Fetch-Site`, `Origin` and `Referer`
//! headers the browser sets, and a form token compared in constant time). Pure. Must not touch: the
//! service (sessions themselves are the service's), templates.

use subtle::ConstantTimeEq;
use warp::http::{header, HeaderMap, HeaderValue};

/// The session cookie: the id of a producer's session.
pub const SESSION_COOKIE: &str = "boxsub_session";
/// The sign-in form's cookie: the token its form must carry back (before there is a
/// session, the form token lives here).
pub const FORM_COOKIE: &str = "boxsub_form";

/// Where the app is served from, as its operator said (`--public-url`), which decides
/// whether cookies are `Secure` and which origin a form must come from.
#[derive(Debug, Clone, Default)]
pub struct PublicOrigin {
    /// `https://shop.example` (scheme, host and port, no path); `None` when not given, and
    /// then a form's origin must name the host the request was sent to.
    origin: Option<String>,
    /// Whether the app is served over HTTPS (cookies are then `Secure`).
    https: bool,
}

impl PublicOrigin {
    /// From `--public-url`: an `http://` or `https://` URL of a host (and port), nothing
    /// after it but an optional `/`; `None` for no URL. The origin is written as browsers
    /// send it in `Origin`: lower-case, without the scheme's default port.
    pub fn parse(url: Option<&str>) -> Result<PublicOrigin, String> {
        let Some(given) = url.map(str::trim).filter(|url| !url.is_empty()) else {
            return Ok(PublicOrigin::default());
        };
        let refuse = |why: &str| Err(format!("--public-url {given:?} {why}"));
        let Ok(url) = url::Url::parse(given) else {
            return refuse("is not an http:// or https:// URL");
        };
        if url.scheme() != "http" && url.scheme() != "https" {
            return refuse("is not an http:// or https:// URL");
        }
        if url.host_str().is_none_or(str::is_empty) {
            return refuse("names no host");
        }
        if !url.username().is_empty() || url.password().is_some() {
            return refuse("must not carry a user name or password");
        }
        if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
            return refuse(
                "must be the address the app is served at, scheme, host and port only \
                 (such as https://boxes.example.com): the app is always under /app, and a \
                 path, query or fragment has no place in the origin browsers send",
            );
        }
        Ok(PublicOrigin {
            origin: Some(url.origin().ascii_serialization()),
            https: url.scheme() == "https",
        })
    }

    /// Whether cookies carry `Secure`.
    pub fn https(&self) -> bool {
        self.https
    }

    /// Whether a form posted with these headers comes from the app's own pages, as OWASP's
    /// CSRF cheat sheet advises for requests made before there is a session: a browser that
    /// says where the request comes from (`Sec-Fetch-Site`) must say the same origin (or
    /// `none`, a user's own navigation); then the `Origin` header, or without it the
    /// `Referer`'s origin, must be the app's (the public URL's, or the request's host); a
    /// request with neither is refused unless its browser said `same-origin`.
    pub fn same_origin(&self, headers: &HeaderMap) -> bool {
        let text = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
        let site = text("sec-fetch-site");
        if let Some(site) = site {
            if !site.eq_ignore_ascii_case("same-origin") && !site.eq_ignore_ascii_case("none") {
                return false;
            }
        }
        if let Some(origin) = text(header::ORIGIN.as_str()) {
            return self.is_ours(&origin.trim().to_ascii_lowercase(), headers);
        }
        if let Some(referer) = text(header::REFERER.as_str()) {
            return url::Url::parse(referer.trim()).is_ok_and(|url| {
                let origin = url.origin();
                origin.is_tuple() && self.is_ours(&origin.ascii_serialization(), headers)
            });
        }
        // Neither header: only a browser's own word vouches for the form.
        site.is_some_and(|site| site.eq_ignore_ascii_case("same-origin"))
    }

    /// Whether `origin` (lower-case, as browsers write it) is the app's.
    fn is_ours(&self, origin: &str, headers: &HeaderMap) -> bool {
        match &self.origin {
            Some(expected) => origin == expected,
            None => {
                let host = headers
                    .get(header::HOST)
                    .and_then(|value| value.to_str().ok())
                    .map(str::to_ascii_lowercase);
                let origin_host = origin.split_once("://").map(|(_, host)| host);
                host.is_some() && origin_host == host.as_deref()
            }
        }
    }

    /// A `Set-Cookie` value giving `name` the value `value` for the app's paths, until the
    /// browser closes.
    pub fn set_cookie(&self, name: &str, value: &str, same_site: &str) -> HeaderValue {
        self.cookie_value(name, value, None, same_site)
    }

    /// [`Self::set_cookie`] for a cookie the browser keeps `max_age_secs` seconds, past its
    /// restarts, rather than until it closes.
    pub fn set_lasting_cookie(
        &self,
        name: &str,
        value: &str,
        same_site: &str,
        max_age_secs: u64,
    ) -> HeaderValue {
        self.cookie_value(name, value, Some(max_age_secs), same_site)
    }

    /// A `Set-Cookie` value that removes cookie `name`.
    pub fn clear_cookie(&self, name: &str, same_site: &str) -> HeaderValue {
        self.cookie_value(name, "", Some(0), same_site)
    }

    /// The one shape of the app's `Set-Cookie` values.
    fn cookie_value(
        &self,
        name: &str,
        value: &str,
        max_age_secs: Option<u64>,
        same_site: &str,
    ) -> HeaderValue {
        let max_age = max_age_secs.map_or(String::new(), |secs| format!("; Max-Age={secs}"));
        let secure = if self.https { "; Secure" } else { "" };
        cookie_header(&format!(
            "{name}={value}; Path=/app{max_age}; HttpOnly; SameSite={same_site}{secure}"
        ))
    }
}

fn cookie_header(text: &str) -> HeaderValue {
    // Names are constants and values hex tokens or route keys (`domain::routing`), so the
    // header is always valid.
    HeaderValue::from_str(text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// The value of cookie `name` in the request's `Cookie` headers, if it is a token (hex
/// digits only, as boxsub writes them): anything else is as good as no cookie.
pub fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    cookie_text(headers, name).filter(|value| is_token(value))
}

/// The value of cookie `name`, whatever it holds (the routing cookie: a webstore's route
/// key, compared, never trusted).
pub fn cookie_text<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.trim())
}

/// Whether `text` looks like a token boxsub made: 64 hex digits.
pub fn is_token(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether the token a form carried is the one expected, compared in constant time.
pub fn tokens_match(carried: Option<&str>, expected: &str) -> bool {
    carried.is_some_and(|carried| bool::from(carried.as_bytes().ct_eq(expected.as_bytes())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    const TOKEN: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

    #[test]
    fn a_public_url_decides_secure_cookies_and_the_forms_origin() {
        let https = PublicOrigin::parse(Some("https://Shop.Example:8443/")).unwrap();
        assert!(https.https());
        let cookie = https.set_cookie(SESSION_COOKIE, TOKEN, "Lax");
        let cookie = cookie.to_str().unwrap();
        for part in ["HttpOnly", "SameSite=Lax", "Secure", "Path=/app"] {
            assert!(cookie.contains(part), "{cookie}");
        }
        assert!(https.same_origin(&headers(&[("origin", "https://shop.example:8443")])));
        assert!(!https.same_origin(&headers(&[("origin", "http://shop.example:8443")])));
        assert!(!https.same_origin(&headers(&[("origin", "https://evil.example")])));
        assert!(https.same_origin(&headers(&[(
            "referer",
            "https://shop.example:8443/app/sign_in"
        )])));
        assert!(!https.same_origin(&headers(&[("referer", "https://shop.example/app/sign_in")])));

        let plain = PublicOrigin::parse(None).unwrap();
        assert!(!plain.https());
        assert!(!plain
            .set_cookie(SESSION_COOKIE, TOKEN, "Lax")
            .to_str()
            .unwrap()
            .contains("Secure"));
        assert!(plain.same_origin(&headers(&[
            ("host", "127.0.0.1:3000"),
            ("origin", "http://127.0.0.1:3000")
        ])));
        assert!(!plain.same_origin(&headers(&[
            ("host", "127.0.0.1:3000"),
            ("origin", "http://evil.example")
        ])));
        assert!(!plain.same_origin(&headers(&[("host", "a"), ("origin", "null")])));
        assert!(!plain.same_origin(&headers(&[("sec-fetch-site", "cross-site")])));
        assert!(!plain.same_origin(&headers(&[("sec-fetch-site", "same-site")])));
        assert!(
            !plain.same_origin(&headers(&[("host", "127.0.0.1:3000")])),
            "neither Origin nor Referer nor a browser's word: refused"
        );
        assert!(!plain.same_origin(&headers(&[
            ("host", "127.0.0.1:3000"),
            ("sec-fetch-site", "none")
        ])));
        assert!(plain.same_origin(&headers(&[
            ("host", "127.0.0.1:3000"),
            ("sec-fetch-site", "same-origin")
        ])));
        // Without Origin, the Referer's origin decides.
        assert!(plain.same_origin(&headers(&[
            ("host", "127.0.0.1:3000"),
            ("referer", "http://127.0.0.1:3000/app/sign_in")
        ])));
        for other in [
            "http://127.0.0.1:3000.evil.example/app/sign_in",
            "http://evil.example/http://127.0.0.1:3000/",
            "not a url",
            "data:text/html,x",
        ] {
            assert!(
                !plain.same_origin(&headers(&[("host", "127.0.0.1:3000"), ("referer", other)])),
                "{other}"
            );
        }
        // An Origin that is not ours is not saved by a Referer that is.
        assert!(!plain.same_origin(&headers(&[
            ("host", "127.0.0.1:3000"),
            ("origin", "http://evil.example"),
            ("referer", "http://127.0.0.1:3000/app/sign_in")
        ])));

        for bad in [
            "ftp://x",
            "shop.example",
            "https://",
            "https://u@evil",
            "https://shop.example/app/",
            "https://shop.example/?x=1",
            "https://shop.example#top",
        ] {
            assert!(PublicOrigin::parse(Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_default_port_is_dropped_from_the_origin_as_browsers_drop_it() {
        let https = PublicOrigin::parse(Some("https://shop.example:443")).unwrap();
        assert!(https.same_origin(&headers(&[("origin", "https://shop.example")])));
        assert!(!https.same_origin(&headers(&[("origin", "https://shop.example:443")])));
        let http = PublicOrigin::parse(Some("HTTP://Shop.Example:80/")).unwrap();
        assert!(http.same_origin(&headers(&[("origin", "http://shop.example")])));
        let other_port = PublicOrigin::parse(Some("https://shop.example:8443")).unwrap();
        assert!(other_port.same_origin(&headers(&[("origin", "https://shop.example:8443")])));
    }

    #[test]
    fn cookies_are_read_by_name_and_only_as_tokens() {
        let map = headers(&[
            ("cookie", "a=1; boxsub_session=nothex"),
            ("cookie", &format!("boxsub_form={TOKEN}")),
        ]);
        assert_eq!(cookie(&map, SESSION_COOKIE), None);
        assert_eq!(cookie(&map, FORM_COOKIE), Some(TOKEN));
        assert!(tokens_match(Some(TOKEN), TOKEN));
        assert!(!tokens_match(Some(&TOKEN[1..]), TOKEN));
        assert!(!tokens_match(None, TOKEN));
    }

    proptest! {
        #[test]
        fn no_cookie_header_makes_a_token_of_something_else(raw in "[ -~]{0,200}") {
            let mut map = HeaderMap::new();
            if let Ok(value) = HeaderValue::from_str(&raw) {
                map.insert(header::COOKIE, value);
            }
            if let Some(found) = cookie(&map, SESSION_COOKIE) {
                prop_assert!(is_token(found));
            }
        }
    }
}
