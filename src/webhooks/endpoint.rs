//! One webhook endpoint's deliveries: a task of its own that sends the webstore's events of
//! the types the endpoint wants, one at a time and in sequence order, each once its write is
//! durable (never past the webstore's watermark), and records where it stands in the store
//! ([`WebhookPosition`]), so that a restart or a failover goes on from there and a retry's
//! backoff survives them. An endpoint's failures delay only its own deliveries: each has
//! its own task, its own HTTP client and connections, and no request of the API waits for
//! any of it.
//!
//! Each delivery is sent only if the node still holds its read lease once the event is read
//! ([`crate::lease`]): otherwise the task waits, its position where it was, until the lease
//! holds again (a stall that ends) or the task is stopped (the node steps down).
//!
//! The task ends when the endpoint leaves the catalogue or its webstore stops being served
//! here (moved away, frozen for a move); the supervisor ([`super`]) starts it again when it
//! comes back. What follows an attempt is [`super::decision`]'s to say; this task carries it
//! out (the position, the metrics, the log).
//!
//! Must not touch: the events themselves (it reads them), other endpoints, the rest of the
//! service (it is given its [`Sources`]: the store, the events' numbering, what is served
//! here, the catalogue).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::backoff::Outcome;
use super::decision::{decide, Decision, Failing, Retries};
use super::destination;
use super::read_ahead::{ReadAhead, Ready};
use super::signing::signature_header;
use super::{Sources, WebhookSettings};
use crate::domain::catalogue::Catalogue;
use crate::domain::webhooks::Webhook;
use crate::events::sequence::Sequencer;
use crate::lease::Lease;
use crate::metrics::METRICS;
use crate::service::serving::Served;
use crate::store::kinds::webhook_positions::WebhookPosition;
use crate::store::{Store, StoreError};

/// How often a waiting task looks again at what may have changed without waking it: an
/// operator's redelivery, the catalogue, whether this node serves the webstore.
const LOOK_AGAIN: Duration = Duration::from_secs(1);
/// The longest a run of successful deliveries goes without recording where it stands (a
/// restart redelivers at most this much: deliveries are at least once).
const RECORD_EVERY: Duration = Duration::from_millis(200);
/// How often a task that is delivering looks for an operator's redelivery and the
/// retention's mark (a waiting one looks each time it wakes).
const LOOK_EVERY: Duration = Duration::from_millis(100);
/// How often a task whose node does not hold its read lease looks at it again.
const LEASE_LOOK_EVERY: Duration = Duration::from_millis(50);

/// Where a task stands, and whether the store has heard of it.
struct Position {
    record: WebhookPosition,
    unsaved: bool,
    saved_at: Instant,
}

/// Runs the deliveries of endpoint `endpoint_id` of webstore `webstore_id` until it leaves
/// the catalogue or the webstore is not served here.
pub async fn run(
    sources: Sources,
    lease: Arc<Lease>,
    settings: WebhookSettings,
    webstore_id: String,
    endpoint_id: String,
) {
    let labels = [webstore_id.as_str(), endpoint_id.as_str()];
    match deliver_until_gone(&sources, &lease, settings, &webstore_id, &endpoint_id).await {
        Ok(()) => {}
        // Frozen for a move: its position as the move's last round carried it stands.
        Err(StoreError::Frozen) => {}
        Err(error) => tracing::warn!(
            webstore = %webstore_id,
            endpoint = %endpoint_id,
            %error,
            "webhook deliveries stopped by a store failure; they start again within seconds"
        ),
    }
    let _ = METRICS
        .webhook_oldest_undelivered
        .remove_label_values(&labels);
    let _ = METRICS.webhook_disabled.remove_label_values(&labels);
}

/// The endpoint as the catalogue in force has it, looked up again only when a reload puts
/// another catalogue in force (each delivery asks).
#[derive(Default)]
struct CurrentEndpoint {
    seen: Option<(Arc<Catalogue>, Option<Arc<Webhook>>)>,
}

impl CurrentEndpoint {
    /// The endpoint, while it is in the catalogue in force and its webstore is served here.
    fn get(
        &mut self,
        sources: &Sources,
        webstore_id: &str,
        endpoint_id: &str,
    ) -> Option<Arc<Webhook>> {
        if sources.serving.served(webstore_id) != Served::Here {
            return None;
        }
        let catalogue = sources.catalogue.get();
        match &self.seen {
            Some((seen, webhook)) if Arc::ptr_eq(seen, &catalogue) => webhook.clone(),
            _ => {
                let webhook = catalogue
                    .webstore_by_id(webstore_id)
                    .and_then(|webstore| {
                        webstore
                            .webhooks
                            .iter()
                            .find(|webhook| webhook.id == endpoint_id)
                    })
                    .cloned()
                    .map(Arc::new);
                self.seen = Some((catalogue, webhook.clone()));
                webhook
            }
        }
    }

    /// Whether the catalogue in force is no longer the one the endpoint was looked up in.
    fn is_stale(&self, sources: &Sources) -> bool {
        let catalogue = sources.catalogue.get();
        !matches!(&self.seen, Some((seen, _)) if Arc::ptr_eq(seen, &catalogue))
    }
}

async fn deliver_until_gone(
    sources: &Sources,
    lease: &Lease,
    settings: WebhookSettings,
    webstore_id: &str,
    endpoint_id: &str,
) -> Result<(), StoreError> {
    let store = &sources.store;
    let sequencer = sources.events.sequencer(webstore_id)?;
    let retries = Retries {
        first: settings.first_retry,
        give_up: settings.give_up,
    };
    let labels = [webstore_id, endpoint_id];
    let mut position = match store.webhook_position(webstore_id, endpoint_id)? {
        Some(record) => Position {
            record,
            unsaved: false,
            saved_at: Instant::now(),
        },
        None => {
            // A new endpoint is sent what happens from now on; the operator redelivers older
            // events if it wants them. Not past the last event stored: the watermark may
            // stand on a gap (a write refused after its number was taken), which a restart
            // may give out again.
            let start = sequencer
                .watermark()
                .min(store.last_event_sequence(webstore_id)?);
            let mut fresh = Position {
                record: WebhookPosition {
                    delivered_through: start,
                    ..WebhookPosition::default()
                },
                unsaved: true,
                saved_at: Instant::now(),
            };
            save(store, webstore_id, endpoint_id, &mut fresh)?;
            fresh
        }
    };
    let mut client: Option<(bool, reqwest::Client)> = None;
    let mut endpoint = CurrentEndpoint::default();
    let mut ahead = ReadAhead::default();
    let disabled_gauge = METRICS.webhook_disabled.with_label_values(&labels);
    let oldest_gauge = METRICS
        .webhook_oldest_undelivered
        .with_label_values(&labels);
    let mut looked_at: Option<Instant> = None;
    loop {
        // The operator's redelivery and the retention's mark are looked at every
        // `LOOK_EVERY`, not before each delivery (two reads of the store).
        let look = looked_at.is_none_or(|at| at.elapsed() >= LOOK_EVERY);
        if look {
            looked_at = Some(Instant::now());
        }
        if let Some(after) = look
            .then(|| store.redelivery(webstore_id, endpoint_id))
            .transpose()?
            .flatten()
        {
            tracing::info!(
                webstore = %webstore_id,
                endpoint = %endpoint_id,
                after,
                "redelivering the events after the operator's cursor"
            );
            position.record = WebhookPosition {
                delivered_through: after,
                ..WebhookPosition::default()
            };
            position.unsaved = true;
            save(store, webstore_id, endpoint_id, &mut position)?;
            drop(store.clear_redelivery(webstore_id, endpoint_id)?);
        }
        let Some(webhook) = endpoint.get(sources, webstore_id, endpoint_id) else {
            save(store, webstore_id, endpoint_id, &mut position)?;
            return Ok(());
        };
        disabled_gauge.set(i64::from(position.record.disabled.is_some()));
        if position.record.disabled.is_some() {
            oldest_gauge.set(0);
            looked_at = None;
            tokio::time::sleep(LOOK_AGAIN).await;
            continue;
        }
        // Made before the watermark is read, so that a move in between still wakes it.
        let moved = sequencer.moved();
        let pruned = if look {
            store.events_pruned_through(webstore_id)?
        } else {
            0
        };
        if position.record.delivered_through < pruned {
            tracing::warn!(
                webstore = %webstore_id,
                endpoint = %endpoint_id,
                from = position.record.delivered_through + 1,
                through = pruned,
                "events the endpoint had not had were removed by the retention: they are skipped"
            );
            position.record.delivered_through = pruned;
            position.unsaved = true;
        }
        let Some(event) = next_wanted(
            store,
            &sequencer,
            webstore_id,
            &webhook,
            &mut position,
            &mut ahead,
        )?
        else {
            oldest_gauge.set(0);
            save(store, webstore_id, endpoint_id, &mut position)?;
            looked_at = None;
            let _ = tokio::time::timeout(LOOK_AGAIN, moved).await;
            continue;
        };
        let sequence = event.sequence;
        let now_ms = jiff::Timestamp::now().as_millisecond();
        oldest_gauge.set((now_ms - event.created_at_ms).max(0) / 1000);
        if position.record.next_attempt_ms > now_ms {
            save(store, webstore_id, endpoint_id, &mut position)?;
            let due = Duration::from_millis((position.record.next_attempt_ms - now_ms) as u64);
            looked_at = None;
            tokio::time::sleep(due.min(LOOK_AGAIN)).await;
            continue;
        }
        let client = match &client {
            Some((allowed, client)) if *allowed == webhook.allow_private_network => client.clone(),
            _ => {
                let built = build_client(&settings, webhook.allow_private_network);
                client = Some((webhook.allow_private_network, built.clone()));
                built
            }
        };
        // Looked at after the event was read: a reload between the endpoint's look-up and
        // the read put another catalogue in force, perhaps without the secret this would be
        // signed with, before the event was written. Looked up again.
        if endpoint.is_stale(sources) {
            continue;
        }
        // Looked at after the event was read, and just before it leaves: a node that no
        // longer holds its lease (cut off, deposed, or it gave up a write) sends nothing.
        if !lease.held() {
            looked_at = None;
            tokio::time::sleep(LEASE_LOOK_EVERY).await;
            continue;
        }
        let outcome = attempt(&client, &webhook, &event).await;
        METRICS
            .webhook_deliveries
            .with_label_values(&[webstore_id, endpoint_id, outcome.label()])
            .inc();
        let now_ms = jiff::Timestamp::now().as_millisecond();
        let record = &mut position.record;
        let failing = Failing {
            attempts: record.attempts,
            since_ms: record.failing_since_ms,
        };
        match decide(
            outcome,
            failing,
            now_ms,
            retries,
            crate::random::unit_interval(),
        ) {
            Decision::Settle => {
                if record.attempts == 0 {
                    let waited = now_ms - event.created_at_ms;
                    METRICS
                        .webhook_latency
                        .observe(waited.max(0) as f64 / 1000.0);
                }
                *record = WebhookPosition {
                    delivered_through: sequence,
                    ..WebhookPosition::default()
                };
                position.unsaved = true;
                if position.saved_at.elapsed() >= RECORD_EVERY {
                    save(store, webstore_id, endpoint_id, &mut position)?;
                }
            }
            Decision::Stop => {
                tracing::error!(
                    webstore = %webstore_id,
                    endpoint = %endpoint_id,
                    sequence,
                    "the webhook endpoint answered 410 Gone: it is disabled until redelivered"
                );
                record.disabled = Some("it answered 410 Gone".to_owned());
                position.unsaved = true;
                save(store, webstore_id, endpoint_id, &mut position)?;
            }
            Decision::GiveUp {
                failing,
                failing_for,
            } => {
                tracing::error!(
                    webstore = %webstore_id,
                    endpoint = %endpoint_id,
                    sequence,
                    attempts = failing.attempts,
                    failing_secs = failing_for.as_secs(),
                    outcome = outcome.label(),
                    "a webhook endpoint kept failing past the give-up time: it is disabled \
                     until redelivered"
                );
                record.attempts = failing.attempts;
                record.failing_since_ms = failing.since_ms;
                record.disabled = Some(format!(
                    "its retries were given up after {} attempts over {} s (last: {})",
                    failing.attempts,
                    failing_for.as_secs(),
                    outcome.label()
                ));
                position.unsaved = true;
                save(store, webstore_id, endpoint_id, &mut position)?;
            }
            Decision::RetryAt {
                at_ms,
                wait,
                failing,
            } => {
                tracing::warn!(
                    webstore = %webstore_id,
                    endpoint = %endpoint_id,
                    sequence,
                    attempts = failing.attempts,
                    outcome = outcome.label(),
                    retry_in_ms = wait.as_millis() as u64,
                    "a webhook delivery failed; it is retried"
                );
                record.attempts = failing.attempts;
                record.failing_since_ms = failing.since_ms;
                record.next_attempt_ms = at_ms;
                position.unsaved = true;
                save(store, webstore_id, endpoint_id, &mut position)?;
            }
        }
    }
}

/// The first event after the position, up to the watermark, of a type the endpoint wants;
/// the position moves past the events it does not want.
fn next_wanted(
    store: &Store,
    sequencer: &Sequencer,
    webstore_id: &str,
    webhook: &Webhook,
    position: &mut Position,
    ahead: &mut ReadAhead,
) -> Result<Option<Ready>, StoreError> {
    let watermark = sequencer.watermark();
    let mut passed = position.record.delivered_through;
    ahead.start_after(passed);
    let mut found = None;
    loop {
        ahead.fill(store, webstore_id, watermark)?;
        let Some(event) = ahead.front() else {
            break;
        };
        if event.kind.is_some_and(|kind| webhook.wants(kind)) {
            found = Some(event.clone());
            break;
        }
        passed = event.sequence;
        ahead.start_after(passed);
    }
    if passed != position.record.delivered_through {
        position.record.delivered_through = passed;
        position.record.attempts = 0;
        position.record.failing_since_ms = 0;
        position.record.next_attempt_ms = 0;
        position.unsaved = true;
    }
    Ok(found)
}

/// Records the position if it changed since it was last recorded. Not waited for: a
/// position lost to a crash only sends again what was sent.
fn save(
    store: &Store,
    webstore_id: &str,
    endpoint_id: &str,
    position: &mut Position,
) -> Result<(), StoreError> {
    if position.unsaved {
        drop(store.set_webhook_position(webstore_id, endpoint_id, &position.record)?);
        position.unsaved = false;
        position.saved_at = Instant::now();
    }
    Ok(())
}

fn build_client(settings: &WebhookSettings, allow_private: bool) -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(settings.timeout)
        .connect_timeout(settings.timeout.min(Duration::from_secs(5)))
        .no_proxy()
        .dns_resolver(destination::resolver(allow_private))
        .user_agent(concat!("boxsub-webhooks/", env!("CARGO_PKG_VERSION")))
        .pool_max_idle_per_host(1)
        .build()
        .unwrap_or_else(|error| {
            // Building fails only when TLS cannot start; a plain client still delivers to
            // http endpoints and reports https ones as unreachable.
            tracing::error!(%error, "the webhook client could not be built with its settings");
            reqwest::Client::new()
        })
}

/// The id an event is delivered as (`webhook-id`): its own, the first member of its JSON as
/// this service writes it (`{"id":"evt_…",`), read without parsing the rest; any other
/// shape is parsed whole.
fn event_id(json: &[u8]) -> Option<&str> {
    let written = json.strip_prefix(br#"{"id":""#).and_then(|rest| {
        let end = rest
            .iter()
            .position(|&byte| byte == b'"' || byte == b'\\')?;
        (rest.get(end) == Some(&b'"'))
            .then(|| std::str::from_utf8(&rest[..end]).ok())
            .flatten()
    });
    written.or_else(|| {
        #[derive(Deserialize)]
        struct EventHead<'a> {
            id: &'a str,
        }
        serde_json::from_slice::<EventHead<'_>>(json)
            .ok()
            .map(|head| head.id)
    })
}

/// One attempt to deliver `event` to `webhook`.
async fn attempt(client: &reqwest::Client, webhook: &Webhook, event: &Ready) -> Outcome {
    if destination::refused_literal(&webhook.url, webhook.allow_private_network) {
        return Outcome::Refused;
    }
    let Some(id) = event_id(&event.json) else {
        // An event is written by this service and always has its id; a broken one is
        // reported as a failure rather than sent unsigned.
        return Outcome::Failed(0);
    };
    let timestamp = jiff::Timestamp::now().as_second();
    let signature = signature_header(&webhook.secrets, id, timestamp, &event.json);
    let sent = client
        .post(webhook.url.clone())
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header("webhook-id", id)
        .header("webhook-timestamp", timestamp)
        .header("webhook-signature", signature)
        .body(event.json.clone())
        .send()
        .await;
    match sent {
        Ok(response) => {
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned);
            let outcome = Outcome::of_status(response.status().as_u16(), retry_after.as_deref());
            // The body is not wanted; dropping the response lets the connection go back
            // to the pool when it is complete, or closes it.
            drop(response);
            outcome
        }
        Err(error) if error.is_timeout() => Outcome::Timeout,
        Err(error) if is_refused_by_resolver(&error) => Outcome::Refused,
        Err(_) => Outcome::Unreachable,
    }
}

/// Whether a failed request was stopped by the resolver's check of private addresses.
fn is_refused_by_resolver(error: &reqwest::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if current
            .to_string()
            .contains("has no address a webhook may reach")
        {
            return true;
        }
        source = current.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn an_event_id_is_read_from_the_head_of_its_json_or_parsed_from_any_other_shape() {
        assert_eq!(event_id(br#"{"id":"evt_1","type":"x"}"#), Some("evt_1"));
        assert_eq!(
            event_id(br#"{ "type": "x", "id": "evt_2" }"#),
            Some("evt_2")
        );
        assert_eq!(event_id(br#"{"type":"x"}"#), None);
        assert_eq!(event_id(b"not json"), None);
        // An escape in the head is left to the parser, which cannot borrow it: no id.
        assert_eq!(event_id(br#"{"id":"a\"b"}"#), None);
    }

    proptest! {
        #[test]
        fn the_head_and_the_parser_agree_on_the_services_events(
            id in "evt_[0-9a-f]{1,40}",
            rest in prop::collection::btree_map("[a-z]{1,8}", "[ -~]{0,20}", 0..4),
        ) {
            let mut json = format!(r#"{{"id":{}"#, serde_json::to_string(&id).unwrap());
            for (key, value) in &rest {
                if key != "id" {
                    json.push_str(&format!(r#","{key}":{}"#, serde_json::to_string(value).unwrap()));
                }
            }
            json.push('}');
            let parsed: serde_json::Value = serde_json::from_str(&json).unwrap();
            prop_assert_eq!(event_id(json.as_bytes()), parsed["id"].as_str());
        }
    }
}
