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

use super::backoff::SendOutcome;
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
    match send_until_gone(&sources, &lease, settings, &webstore_id, &endpoint_id).await {
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
    let _ = METRICS.webhook_oldest_unsent.remove_label_values(&labels);
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

/// One endpoint's sending, between its start and its end: where it stands and what it
/// keeps from one event to the next.
struct Sender<'a> {
    sources: &'a Sources,
    lease: &'a Lease,
    settings: WebhookSettings,
    webstore_id: &'a str,
    endpoint_id: &'a str,
    sequencer: Arc<Sequencer>,
    position: Position,
    client: Option<(bool, reqwest::Client)>,
    endpoint: CurrentEndpoint,
    ahead: ReadAhead,
    disabled_gauge: prometheus::IntGauge,
    oldest_gauge: prometheus::IntGauge,
    /// When the operator's redelivery and the retention's mark were last looked at.
    looked_at: Option<Instant>,
}

/// What a sender does next.
enum Next {
    /// The endpoint left the catalogue or its webstore is not served here.
    Gone,
    /// Nothing to send now: look again after this wait.
    Wait(Wait),
    /// Send this event to this endpoint with this client.
    Send(Box<(Ready, Arc<Webhook>, reqwest::Client)>),
}

/// Why a sender waits, and for how long at most.
enum Wait {
    /// The endpoint is disabled, or an event's retry is not due yet.
    For(Duration),
    /// Every event up to the watermark is sent: until a new one comes (or a while passes).
    ForEvents(crate::events::sequence::Moved),
}

/// Sends endpoint `endpoint_id`'s events until it leaves the catalogue or its webstore is
/// not served here: a loop over what to do next ([`Sender::next`]) and, after each attempt,
/// [`super::decision::decide`]'s word carried out ([`Sender::carry_out`]).
async fn send_until_gone(
    sources: &Sources,
    lease: &Lease,
    settings: WebhookSettings,
    webstore_id: &str,
    endpoint_id: &str,
) -> Result<(), StoreError> {
    let mut sender = Sender::start(sources, lease, settings, webstore_id, endpoint_id)?;
    loop {
        match sender.next()? {
            Next::Gone => return sender.save(),
            Next::Wait(Wait::For(wait)) => {
                sender.looked_at = None;
                tokio::time::sleep(wait).await;
            }
            Next::Wait(Wait::ForEvents(moved)) => {
                sender.looked_at = None;
                let _ = tokio::time::timeout(LOOK_AGAIN, moved).await;
            }
            Next::Send(send) => {
                let (event, webhook, client) = *send;
                let outcome = attempt(&client, &webhook, &event).await;
                sender.carry_out(outcome, &event)?;
            }
        }
    }
}

impl<'a> Sender<'a> {
    /// The endpoint's sender, from the position the store holds; a new endpoint starts
    /// from the events that happen from now on (the operator redelivers older ones if it
    /// wants them).
    fn start(
        sources: &'a Sources,
        lease: &'a Lease,
        settings: WebhookSettings,
        webstore_id: &'a str,
        endpoint_id: &'a str,
    ) -> Result<Sender<'a>, StoreError> {
        let store = &sources.store;
        let sequencer = sources.events.sequencer(webstore_id)?;
        let labels = [webstore_id, endpoint_id];
        let (record, unsaved) = match store.webhook_position(webstore_id, endpoint_id)? {
            Some(record) => (record, false),
            // Not past the last event stored: the watermark may stand on a gap (a write
            // refused after its number was taken), which a restart may give out again.
            None => (
                WebhookPosition {
                    delivered_through: sequencer
                        .watermark()
                        .min(store.last_event_sequence(webstore_id)?),
                    ..WebhookPosition::default()
                },
                true,
            ),
        };
        let mut sender = Sender {
            sources,
            lease,
            settings,
            webstore_id,
            endpoint_id,
            sequencer,
            position: Position {
                record,
                unsaved,
                saved_at: Instant::now(),
            },
            client: None,
            endpoint: CurrentEndpoint::default(),
            ahead: ReadAhead::default(),
            disabled_gauge: METRICS.webhook_disabled.with_label_values(&labels),
            oldest_gauge: METRICS.webhook_oldest_unsent.with_label_values(&labels),
            looked_at: None,
        };
        sender.save()?;
        Ok(sender)
    }

    /// Records the position if it changed since it was last recorded (see [`save`]).
    fn save(&mut self) -> Result<(), StoreError> {
        save(
            &self.sources.store,
            self.webstore_id,
            self.endpoint_id,
            &mut self.position,
        )
    }

    /// Whether to look at the operator's redelivery and the retention's mark now: every
    /// `LOOK_EVERY` while sending (two reads of the store), and on every wake.
    fn look(&mut self) -> bool {
        let look = self.looked_at.is_none_or(|at| at.elapsed() >= LOOK_EVERY);
        if look {
            self.looked_at = Some(Instant::now());
        }
        look
    }

    /// What to do next: the operator's redelivery taken up, the endpoint looked up, the
    /// retention's removals passed over, the next event wanted read, and it sent only once
    /// due, with a catalogue still current and the read lease held.
    fn next(&mut self) -> Result<Next, StoreError> {
        let store = &self.sources.store;
        let (webstore_id, endpoint_id) = (self.webstore_id, self.endpoint_id);
        let look = self.look();
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
            self.settle(WebhookPosition {
                delivered_through: after,
                ..WebhookPosition::default()
            })?;
            drop(store.clear_redelivery(webstore_id, endpoint_id)?);
        }
        let Some(webhook) = self.endpoint.get(self.sources, webstore_id, endpoint_id) else {
            return Ok(Next::Gone);
        };
        self.disabled_gauge
            .set(i64::from(self.position.record.disabled.is_some()));
        if self.position.record.disabled.is_some() {
            self.oldest_gauge.set(0);
            return Ok(Next::Wait(Wait::For(LOOK_AGAIN)));
        }
        // Made before the watermark is read, so that a move in between still wakes it.
        let moved = self.sequencer.moved();
        let pruned = if look {
            store.events_pruned_through(webstore_id)?
        } else {
            0
        };
        let record = &mut self.position.record;
        if record.delivered_through < pruned {
            tracing::warn!(
                webstore = %webstore_id,
                endpoint = %endpoint_id,
                from = record.delivered_through + 1,
                through = pruned,
                "events the endpoint had not had were removed by the retention: they are skipped"
            );
            record.delivered_through = pruned;
            self.position.unsaved = true;
        }
        let Some(event) = next_wanted(
            store,
            &self.sequencer,
            webstore_id,
            &webhook,
            &mut self.position,
            &mut self.ahead,
        )?
        else {
            self.oldest_gauge.set(0);
            self.save()?;
            return Ok(Next::Wait(Wait::ForEvents(moved)));
        };
        let now_ms = jiff::Timestamp::now().as_millisecond();
        self.oldest_gauge
            .set((now_ms - event.created_at_ms).max(0) / 1000);
        let due_ms = self.position.record.next_attempt_ms;
        if due_ms > now_ms {
            self.save()?;
            let due = Duration::from_millis((due_ms - now_ms) as u64);
            return Ok(Next::Wait(Wait::For(due.min(LOOK_AGAIN))));
        }
        let client = self.client_for(&webhook);
        // Looked at after the event was read: a reload between the endpoint's look-up and
        // the read put another catalogue in force, perhaps without the secret this would be
        // signed with, before the event was written. Looked up again at once.
        if self.endpoint.is_stale(self.sources) {
            return Ok(Next::Wait(Wait::For(Duration::ZERO)));
        }
        // Looked at after the event was read, and just before it leaves: a node that no
        // longer holds its lease (cut off, deposed, or it gave up a write) sends nothing.
        if !self.lease.held() {
            return Ok(Next::Wait(Wait::For(LEASE_LOOK_EVERY)));
        }
        Ok(Next::Send(Box::new((event, webhook, client))))
    }

    /// The client for `webhook`: built again only when whether it may reach private
    /// networks changes.
    fn client_for(&mut self, webhook: &Webhook) -> reqwest::Client {
        let allowed = webhook.allow_private_network;
        match &self.client {
            Some((built_for, client)) if *built_for == allowed => client.clone(),
            _ => {
                let built = build_client(&self.settings, allowed);
                self.client = Some((allowed, built.clone()));
                built
            }
        }
    }

    /// The position moved to `record`, recorded at once.
    fn settle(&mut self, record: WebhookPosition) -> Result<(), StoreError> {
        self.position.record = record;
        self.position.unsaved = true;
        self.save()
    }

    /// Counts an attempt's `outcome` at `event` and carries out what the decision says of
    /// it: the position past the event, the endpoint disabled, or a retry at a time.
    fn carry_out(&mut self, outcome: SendOutcome, event: &Ready) -> Result<(), StoreError> {
        let (webstore_id, endpoint_id) = (self.webstore_id, self.endpoint_id);
        METRICS
            .webhook_sends
            .with_label_values(&[webstore_id, endpoint_id, outcome.label()])
            .inc();
        let now_ms = jiff::Timestamp::now().as_millisecond();
        let record = &self.position.record;
        let failing = Failing {
            attempts: record.attempts,
            since_ms: record.failing_since_ms,
        };
        let retries = Retries {
            first: self.settings.first_retry,
            give_up: self.settings.give_up,
        };
        let sequence = event.sequence;
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
                self.position.record = WebhookPosition {
                    delivered_through: sequence,
                    ..WebhookPosition::default()
                };
                self.position.unsaved = true;
                if self.position.saved_at.elapsed() >= RECORD_EVERY {
                    self.save()?;
                }
                Ok(())
            }
            Decision::Stop => {
                tracing::error!(
                    webstore = %webstore_id,
                    endpoint = %endpoint_id,
                    sequence,
                    "the webhook endpoint answered 410 Gone: it is disabled until redelivered"
                );
                self.settle(WebhookPosition {
                    disabled: Some("it answered 410 Gone".to_owned()),
                    ..self.position.record.clone()
                })
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
                self.settle(WebhookPosition {
                    attempts: failing.attempts,
                    failing_since_ms: failing.since_ms,
                    disabled: Some(format!(
                        "its retries were given up after {} attempts over {} s (last: {})",
                        failing.attempts,
                        failing_for.as_secs(),
                        outcome.label()
                    )),
                    ..self.position.record.clone()
                })
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
                    "a webhook send failed; it is retried"
                );
                self.settle(WebhookPosition {
                    attempts: failing.attempts,
                    failing_since_ms: failing.since_ms,
                    next_attempt_ms: at_ms,
                    ..self.position.record.clone()
                })
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
async fn attempt(client: &reqwest::Client, webhook: &Webhook, event: &Ready) -> SendOutcome {
    if destination::refused_literal(&webhook.url, webhook.allow_private_network) {
        return SendOutcome::Refused;
    }
    let Some(id) = event_id(&event.json) else {
        // An event is written by this service and always has its id; a broken one is
        // reported as a failure rather than sent unsigned.
        return SendOutcome::Failed(0);
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
            let outcome =
                SendOutcome::of_status(response.status().as_u16(), retry_after.as_deref());
            // The body is not wanted; dropping the response lets the connection go back
            // to the pool when it is complete, or closes it.
            drop(response);
            outcome
        }
        Err(error) if error.is_timeout() => SendOutcome::Timeout,
        Err(error) if is_refused_by_resolver(&error) => SendOutcome::Refused,
        Err(_) => SendOutcome::Unreachable,
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
