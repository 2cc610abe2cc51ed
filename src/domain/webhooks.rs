//! A webstore's webhook endpoints as the catalogue gives them (`webhooks`): where events
//! are sent, which types, the secrets they are signed with, and whether the destination
//! may be on a private network. Checked in full when the catalogue is read: every problem of
//! every endpoint is named.
//!
//! A signing secret must sign, so it is kept as the catalogue holds it (the catalogue is the
//! one place it lives); it never shows in `Debug` output or logs.
//!
//! Must not touch: delivering (`crate::webhooks`), events (`crate::events`).

use base64::Engine;
use serde::Deserialize;

use super::event_types::EventType;

/// The prefix of a signing secret (Standard Webhooks).
pub const SECRET_PREFIX: &str = "whsec_";
/// The fewest random bytes a signing secret holds.
pub const SECRET_MIN_BYTES: usize = 24;
/// The most random bytes a signing secret holds.
pub const SECRET_MAX_BYTES: usize = 64;
/// The most secrets an endpoint signs with at once (two during a rotation).
pub const MAX_SECRETS: usize = 2;

/// A webhook endpoint as the catalogue file gives it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookFile {
    id: String,
    url: String,
    events: Vec<String>,
    secrets: Vec<String>,
    #[serde(default)]
    allow_private_network: bool,
}

/// A webhook endpoint of a webstore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    /// Its id, unique in the webstore: names it in metrics, logs and admin requests.
    pub id: String,
    /// Where events are sent (`http` or `https`, no credentials in it).
    pub url: url::Url,
    /// The types of events it is sent.
    pub events: Vec<EventType>,
    /// The secrets each delivery is signed with, one signature each.
    pub secrets: Vec<SigningSecret>,
    /// Whether its destination may be on loopback, a private or a link-local network.
    pub allow_private_network: bool,
}

impl Webhook {
    /// Whether it is sent events of type `kind`.
    pub fn wants(&self, kind: EventType) -> bool {
        self.events.contains(&kind)
    }
}

/// A signing secret's key bytes (the base64 after `whsec_`).
#[derive(Clone, PartialEq, Eq)]
pub struct SigningSecret(Vec<u8>);

impl SigningSecret {
    /// Reads `whsec_` + base64 of 24 to 64 bytes.
    pub fn parse(text: &str) -> Result<SigningSecret, String> {
        let encoded = text
            .strip_prefix(SECRET_PREFIX)
            .ok_or_else(|| format!("must begin with {SECRET_PREFIX}"))?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|_| format!("must be {SECRET_PREFIX} followed by standard base64"))?;
        if !(SECRET_MIN_BYTES..=SECRET_MAX_BYTES).contains(&bytes.len()) {
            return Err(format!(
                "must hold {SECRET_MIN_BYTES} to {SECRET_MAX_BYTES} random bytes (it holds {}): \
                 make one with `boxsub webhook-secret`",
                bytes.len()
            ));
        }
        Ok(SigningSecret(bytes))
    }

    /// The key bytes.
    pub fn key(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningSecret(redacted)")
    }
}

/// The endpoints of `raw`, and the problems of those refused, each with the endpoint's
/// position in the list.
pub fn build_webhooks(raw: Vec<WebhookFile>) -> (Vec<Webhook>, Vec<(usize, String)>) {
    let mut webhooks: Vec<Webhook> = Vec::new();
    let mut problems = Vec::new();
    for (i, file) in raw.into_iter().enumerate() {
        let before = problems.len();
        let mut problem = |text: String| problems.push((i, text));
        let id_ok = !file.id.is_empty()
            && file.id.len() <= 64
            && file
                .id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !id_ok {
            problem("id must be 1 to 64 letters, digits, '-' or '_'".to_owned());
        } else if webhooks.iter().any(|webhook| webhook.id == file.id) {
            problem(format!("id {:?} is used twice in this webstore", file.id));
        }
        let url = match url::Url::parse(&file.url) {
            Ok(url) => Some(url),
            Err(error) => {
                problem(format!("url is not a URL: {error}"));
                None
            }
        };
        if let Some(url) = &url {
            if !matches!(url.scheme(), "http" | "https") {
                problem("url must be http or https".to_owned());
            }
            if url.host().is_none() {
                problem("url must name a host".to_owned());
            }
            if !url.username().is_empty() || url.password().is_some() {
                problem("url must not hold credentials (they would show in logs)".to_owned());
            }
            if url.fragment().is_some() {
                problem("url must not have a fragment".to_owned());
            }
        }
        let mut events = Vec::new();
        for name in &file.events {
            match EventType::parse(name) {
                Some(kind) if !events.contains(&kind) => events.push(kind),
                Some(_) => {}
                None => problem(format!(
                    "events: {name:?} is not an event type ({})",
                    EventType::ALL.map(EventType::name).join(", ")
                )),
            }
        }
        if file.events.is_empty() {
            problem("events must name at least one event type".to_owned());
        }
        if file.secrets.is_empty() || file.secrets.len() > MAX_SECRETS {
            problem(format!(
                "secrets must hold 1 or {MAX_SECRETS} secrets (two while one is rotated out)"
            ));
        }
        let mut secrets = Vec::new();
        for (n, text) in file.secrets.iter().enumerate() {
            match SigningSecret::parse(text) {
                Ok(secret) => secrets.push(secret),
                Err(why) => problem(format!("secrets[{n}] {why}")),
            }
        }
        if problems.len() > before {
            continue;
        }
        if let Some(url) = url {
            webhooks.push(Webhook {
                id: file.id,
                url,
                events,
                secrets,
                allow_private_network: file.allow_private_network,
            });
        }
    }
    (webhooks, problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    fn file(value: serde_json::Value) -> WebhookFile {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_good_endpoint_is_read() {
        let (webhooks, problems) = build_webhooks(vec![file(serde_json::json!({
            "id": "erp",
            "url": "https://erp.example.com/hooks/boxsub",
            "events": ["order.created", "customer.created", "order.created"],
            "secrets": [SECRET],
        }))]);
        assert!(problems.is_empty(), "{problems:?}");
        let webhook = &webhooks[0];
        assert_eq!(webhook.events.len(), 2);
        assert!(webhook.wants(EventType::OrderCreated));
        assert!(!webhook.wants(EventType::CustomerUpdated));
        assert!(!webhook.allow_private_network);
        assert_eq!(webhook.secrets[0].key().len(), 24);
        assert!(
            !format!("{webhook:?}").contains("MfKQ9r8"),
            "a secret in Debug output"
        );
    }

    #[test]
    fn every_problem_of_every_endpoint_is_named() {
        let (webhooks, problems) = build_webhooks(vec![
            file(serde_json::json!({
                "id": "bad id!",
                "url": "ftp://user:pw@example.com/#x",
                "events": ["order.deleted"],
                "secrets": ["whsec_AAAA", "nope", SECRET],
            })),
            file(serde_json::json!({
                "id": "ok", "url": "not a url", "events": [], "secrets": [],
            })),
        ]);
        assert!(webhooks.is_empty());
        let of = |i: usize| -> Vec<&str> {
            problems
                .iter()
                .filter(|(n, _)| *n == i)
                .map(|(_, p)| p.as_str())
                .collect()
        };
        let first = of(0).join("\n");
        for expected in [
            "id must be",
            "http or https",
            "credentials",
            "fragment",
            "order.deleted",
            "1 or 2 secrets",
            "secrets[0] must hold 24 to 64",
            "secrets[1] must begin with whsec_",
        ] {
            assert!(first.contains(expected), "{expected} missing from {first}");
        }
        let second = of(1).join("\n");
        for expected in ["not a URL", "at least one event type", "1 or 2 secrets"] {
            assert!(
                second.contains(expected),
                "{expected} missing from {second}"
            );
        }
    }

    #[test]
    fn ids_are_unique_in_a_webstore() {
        let endpoint = serde_json::json!({
            "id": "erp", "url": "http://127.0.0.1:9/", "events": ["order.created"],
            "secrets": [SECRET], "allow_private_network": true,
        });
        let (webhooks, problems) = build_webhooks(vec![file(endpoint.clone()), file(endpoint)]);
        assert_eq!(webhooks.len(), 1);
        assert_eq!(problems.len(), 1);
        assert!(problems[0].1.contains("used twice"));
    }
}
