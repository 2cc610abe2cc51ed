//! The application service: the one entry point the HTTP layer calls. [`Service`] composes
//! one type per concern and applies the domain rules with them:
//!
//! - [`calls`]: calls to customer actors under the call cap, a cap per customer and a
//!   deadline;
//! - [`idempotency`]: turns per `Idempotency-Key`, so one key creates one record;
//! - [`sign_in_throttles`]: sign-in throttling per email (customers' and producers'; the
//!   sign-ins themselves are [`Service::sign_in`] and `producers`);
//! - [`client_limits`]: the app's sign-ins per client address;
//! - [`passwords`]: argon2 work on bounded blocking threads, shared fairly between the
//!   webstores and the app;
//! - `delivery_lists`: sorted delivery lists kept between pages while they are current;
//! - `customers`, `orders` and `deliveries`: the use cases, written with the above; [`accounts`]:
//!   a customer's account, ledger and payments, and the postings to it;
//! - [`producers`]: producers' sign-in to the web app, their sessions (store records) and
//!   sign-out;
//! - [`serving`]: which webstores this node serves, and each one's write gate (the freeze of
//!   a move);
//! - [`move_steps`]: a node's steps of a move between shards, as the admin listener asks
//!   them;
//! - [`cut_over`]: what a node records of a webstore in a move, one state machine per
//!   webstore;
//! - [`webhooks`]: the operator's view of webhook deliveries, and redelivery;
//! - [`write_outcome`]: whether a request's write may have reached the log (what tells "nothing
//!   was changed" from "outcome unknown");
//! - `tests`, `money_model_tests` and `read_committed_tests` (tests only): the service over a
//!   store that fails or stalls, requests cut off at every await point, money against a
//!   reference ledger through the clock and restarts, and read committed.
//!
//! Any request may be dropped at any `.await` (its client resets, a deadline passes,
//! shutdown's grace period ends). So everything acquired here is a guard released by its
//! `Drop`, never by a call after an `.await`, and [`Service::held`] shows that nothing is left.
//!
//! Owns `ServiceError`; the HTTP layer alone turns it into status codes. Must not touch: HTTP
//! types, or a map guard across an `.await`.

pub mod accounts;
pub mod books;
pub mod calls;
pub mod charging;
pub mod client_limits;
mod customers;
pub mod cut_over;
mod deliveries;
mod delivery_lists;
pub mod freezing;
pub mod idempotency;
pub mod move_steps;
mod orders;
pub mod passwords;
pub mod producers;
pub mod serving;
pub mod sign_in_throttles;
pub mod webhooks;
pub mod write_outcome;

use std::sync::Arc;
use std::time::Duration;

use crate::actors::customer::ChangeError;
use crate::domain::catalogue::{Catalogue, CatalogueError, CurrentCatalogue, Webstore};
use crate::domain::customer::Customer;
use crate::domain::email::fold;
use crate::domain::event_feed::{self, CursorError};
use crate::domain::fields::{FieldErrors, TAKEN};
use crate::domain::idempotency::{RecordedResponse, Resource};
use crate::domain::ids::{CustomerId, IdRange};
use crate::domain::ownership::Ownership;
use crate::domain::paging::Page;
use crate::events::Events;
use crate::metrics::METRICS;
use crate::quotas::Quotas;
use crate::registry::{Registry, RegistryError};
use crate::store::{Store, StoreError};

pub use crate::store::disk::Refusal;
pub use deliveries::{DayList, Delivery};
pub use orders::PricedDelivery;

use calls::ActorCalls;
use client_limits::ClientLimits;
use delivery_lists::DeliveryLists;
use idempotency::IdempotencyGate;
use passwords::{PasswordWork, Share};
use serving::Serving;
use sign_in_throttles::SignInThrottles;

/// Why the service refused or failed a request.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The request broke domain rules; every failing field is named.
    #[error("validation failed: {0}")]
    Invalid(FieldErrors),
    /// No such record in the caller's webstore.
    #[error("not found")]
    NotFound,
    /// Too many failed sign-ins for one email.
    #[error("sign-in throttled for {retry_after:?}")]
    SignInThrottled {
        /// How long until an attempt is allowed again.
        retry_after: Duration,
    },
    /// Too much work in flight, or an actor did not begin a request within the deadline;
    /// nothing was changed.
    #[error("busy")]
    Busy,
    /// Writes are refused while the disk is nearly full or unwritable; nothing was changed.
    #[error("writes refused: {0:?}")]
    WritesRefused(Refusal),
    /// The store failed; nothing was acknowledged.
    #[error("storage failure: {0}")]
    Storage(String),
    /// The change is larger than the store's log takes (a replicated group's message
    /// limit); nothing was changed.
    #[error("a change of {bytes} bytes is larger than the log takes ({max} at most)")]
    ChangeTooLarge {
        /// The change's encoded size.
        bytes: usize,
        /// The most the log takes.
        max: usize,
    },
    /// The webstore's writes are frozen for a move to another shard; nothing was changed.
    #[error("moving")]
    Moving,
    /// A step of a move between shards that this node's state does not allow (taking a
    /// webstore it released, importing one it serves); nothing was changed.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The events feed's cursor is past the retention, or another webstore's: its events
    /// cannot be given.
    #[error("events cursor gone (expired: {expired})")]
    CursorGone {
        /// True when it is past the retention, false when it is another webstore's.
        expired: bool,
    },
    /// A bug or a broken invariant; the detail is for the log only.
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<StoreError> for ServiceError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Refused(refusal) => ServiceError::WritesRefused(refusal),
            // Shutting down: the client may retry against the next process.
            StoreError::Closed => ServiceError::Busy,
            StoreError::TooLarge { bytes, max } => ServiceError::ChangeTooLarge { bytes, max },
            StoreError::Frozen => ServiceError::Moving,
            // A refusal of the change, named by what would not fit: nothing was written.
            StoreError::RecordTooLarge { kind, bytes } => {
                tracing::warn!(
                    kind,
                    bytes,
                    "a change whose record would be too large to read back was refused"
                );
                ServiceError::Invalid(FieldErrors::single(
                    kind,
                    format!(
                        "would be too large to store ({bytes} bytes): send shorter lists, or \
                         fewer changes planned ahead"
                    ),
                ))
            }
            other => ServiceError::Storage(other.to_string()),
        }
    }
}

impl From<RegistryError> for ServiceError {
    fn from(error: RegistryError) -> Self {
        match error {
            RegistryError::Store(error) => error.into(),
            RegistryError::Spawn(..) => ServiceError::Internal(error.to_string()),
        }
    }
}

impl From<ChangeError> for ServiceError {
    fn from(error: ChangeError) -> Self {
        match error {
            ChangeError::Invalid(errors) => ServiceError::Invalid(errors),
            ChangeError::NoSuchOrder | ChangeError::NoSuchPayment => ServiceError::NotFound,
            ChangeError::Store(error) => error.into(),
        }
    }
}

/// Why a catalogue reload was refused.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The new catalogue does not parse or breaks its rules.
    #[error("{0}")]
    Invalid(#[from] CatalogueError),
    /// It leaves out a webstore whose customers are in the store.
    #[error("webstore {0} still has customers: keep it in the catalogue")]
    WebstoreInUse(String),
    /// The store could not be asked.
    #[error("{0}")]
    Store(#[from] StoreError),
}

/// How a write that may carry an `Idempotency-Key` (a create, a change) was answered: made
/// now (durably), a change that changed nothing (no write: answered as a read is), or the
/// recorded first response to the same request.
#[derive(Debug)]
pub enum KeyedWrite<T> {
    /// Written now, and durable.
    Made(T),
    /// Nothing to write: the resource as it is (already durable).
    Unchanged(T),
    /// A repeat of an earlier request with the same idempotency key and body.
    Replayed(RecordedResponse),
}

/// A page of a webstore's events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventsPage {
    /// Each event's JSON, oldest first.
    pub events: Vec<Vec<u8>>,
    /// The cursor of the next page.
    pub next: String,
    /// Whether there are events after it now (the page was full or its scan ended).
    pub more: bool,
}

fn cursor_error(error: CursorError) -> ServiceError {
    match error {
        CursorError::Malformed => {
            ServiceError::Invalid(FieldErrors::single("after", crate::domain::fields::INVALID))
        }
        CursorError::OtherWebstore => ServiceError::CursorGone { expired: false },
        CursorError::Expired { .. } => ServiceError::CursorGone { expired: true },
    }
}

/// Tunables of the service.
#[derive(Debug, Clone)]
pub struct ServiceSettings {
    /// Deadline for a customer's actor to begin a call.
    pub call_timeout: Duration,
    /// How many password hashes may run at once.
    pub password_hashers: usize,
    /// How many password jobs may wait or run, shared fairly between the webstores and the
    /// app's sign-ins (see [`passwords`]).
    pub password_queue: usize,
    /// Calls that may wait on one customer's actor before more are refused.
    pub max_calls_per_customer: u32,
    /// Actor calls that may be in flight in all before more are refused (the call cap).
    pub max_calls_in_flight: usize,
    /// The ids this host gives out.
    pub id_range: IdRange,
    /// How long idempotency records count, in seconds.
    pub idempotency_ttl_secs: u64,
    /// The webstores this node serves (`--webstores`), `None` for every one of the
    /// catalogue; the store's ownership records override it (see [`serving`]).
    pub webstores: Option<Vec<String>>,
    /// API requests in service at once before more wait their webstore's turn
    /// (`--admission-slots`).
    pub admission_slots: usize,
}

/// How many guards the service has handed out and not yet had back. All zero when no request
/// is in progress, whatever happened to the requests before.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held {
    /// Actor calls holding a permit of the call cap.
    pub capped_calls: usize,
    /// Calls counted against customers' actors.
    pub actor_calls: u64,
    /// Email claims of creates and changes.
    pub email_claims: usize,
    /// Customer actors being activated.
    pub activations: usize,
    /// Idempotency keys with a request in progress.
    pub idempotency_keys: usize,
    /// Sign-in attempts begun and not settled (customers' and producers').
    pub sign_in_attempts: usize,
    /// App sign-ins counted in progress against their client address.
    pub client_attempts: usize,
    /// Password jobs waiting or running.
    pub password_jobs: usize,
}

/// The application service over one catalogue and one store.
pub struct Service {
    catalogue: Arc<CurrentCatalogue>,
    registry: Registry,
    calls: ActorCalls,
    idempotency: IdempotencyGate,
    throttles: SignInThrottles,
    passwords: PasswordWork,
    delivery_lists: DeliveryLists,
    serving: Arc<Serving>,
    /// The ids this node gives out (`--id-range`).
    id_range: IdRange,
    /// Producers' sign-in throttles, apart from customers'.
    producer_throttles: SignInThrottles,
    /// The app's sign-ins per client address.
    client_limits: ClientLimits,
    /// The webstores' events.
    events: Arc<Events>,
    /// The webstores' quotas and fair admission.
    quotas: Quotas,
    /// The webstores' moves as this node has them (see `cut_over`).
    cut_overs: cut_over::CutOvers,
}

impl Service {
    /// A service over the customers and orders in `store`.
    pub fn new(
        catalogue: Catalogue,
        store: Store,
        settings: ServiceSettings,
    ) -> Result<Service, ServiceError> {
        let catalogue = Arc::new(CurrentCatalogue::new(catalogue));
        let recorded = store.ownership_records()?;
        for (id, ownership) in &recorded {
            // A webstore frozen for a move stays frozen in the store too (see `moves`).
            if matches!(ownership, Ownership::Moving | Ownership::HandedOver) {
                store.frozen().freeze(id);
            }
        }
        let serving = Arc::new(Serving::new(settings.webstores.clone(), recorded));
        let events = Arc::new(Events::new(store.clone()));
        let quotas = Quotas::new(&catalogue.get(), settings.admission_slots);
        Ok(Service {
            quotas,
            serving,
            id_range: settings.id_range,
            producer_throttles: SignInThrottles::default(),
            client_limits: ClientLimits::default(),
            registry: Registry::open(catalogue.clone(), store, settings.id_range, events.clone())?,
            events,
            calls: ActorCalls::new(
                settings.max_calls_in_flight,
                settings.max_calls_per_customer,
                settings.call_timeout,
            ),
            idempotency: IdempotencyGate::new(settings.idempotency_ttl_secs),
            throttles: SignInThrottles::default(),
            passwords: PasswordWork::new(settings.password_hashers, settings.password_queue)?,
            delivery_lists: DeliveryLists::default(),
            cut_overs: cut_over::CutOvers::default(),
            catalogue,
        })
    }

    /// How long idempotency records count, in seconds.
    pub fn idempotency_ttl_secs(&self) -> u64 {
        self.idempotency.ttl_secs()
    }

    /// Which webstores this node serves, and their write gates.
    pub fn serving(&self) -> &Serving {
        &self.serving
    }

    /// [`Service::serving`], for a task that outlives the borrow (the webhooks').
    pub fn shared_serving(&self) -> Arc<Serving> {
        self.serving.clone()
    }

    /// The catalogue in force as it changes, for a task that follows its reloads (the
    /// webhooks').
    pub fn current_catalogue(&self) -> Arc<CurrentCatalogue> {
        self.catalogue.clone()
    }

    /// The webstores' quotas, and the admission of requests while the host is saturated.
    pub fn quotas(&self) -> &Quotas {
        &self.quotas
    }

    /// The webstores' events (the feed and the webhooks read them).
    pub fn events(&self) -> &Arc<Events> {
        &self.events
    }

    /// A page of the webstore's events as `query` asks.
    pub fn events_page(
        &self,
        webstore: &Webstore,
        query: &event_feed::Query,
    ) -> Result<EventsPage, ServiceError> {
        let id = &webstore.settings.id;
        let after = query.after.clone().map_err(cursor_error)?;
        let page = self
            .events
            .page(id, after, &query.types, query.limit)?
            .map_err(cursor_error)?;
        Ok(EventsPage {
            next: event_feed::cursor(id, page.next),
            events: page.events,
            more: page.more,
        })
    }

    /// The registry (start-up and shutdown use it).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The webstore whose API key pair this is.
    pub fn authenticate(&self, key: &str, secret: &str) -> Option<Arc<Webstore>> {
        self.catalogue.authenticate(key, secret)
    }

    /// The catalogue in force.
    pub fn catalogue(&self) -> Arc<Catalogue> {
        self.catalogue.get()
    }

    /// Puts a new catalogue in force for the requests that start from now on, parsed from
    /// `json` against the one in force. Refused, changing nothing, when it does not parse or
    /// breaks its rules, or when it drops a webstore that still has customers.
    pub fn reload_catalogue(&self, json: &str, loaded_at: i64) -> Result<Catalogue, ReloadError> {
        let current = self.catalogue.get();
        let next = Catalogue::parse_after(Some(&current), json, loaded_at)?;
        for webstore in current.webstores() {
            let id = &webstore.settings.id;
            if next.webstore_by_id(id).is_none() && self.registry.has_customers(id)? {
                return Err(ReloadError::WebstoreInUse(id.clone()));
            }
        }
        self.registry.add_webstores(&next)?;
        self.quotas.reload(&next);
        self.catalogue.replace(next.clone());
        Ok(next)
    }

    /// A customer of the webstore as it is now; reads need no message to its actor.
    pub fn customer(
        &self,
        webstore: &Webstore,
        id: CustomerId,
    ) -> Result<Arc<Customer>, ServiceError> {
        self.registry
            .customer(webstore.idx, id)?
            .ok_or(ServiceError::NotFound)
    }

    /// The webstore's customer with this email (trimmed, any case), if there is one.
    pub fn customer_by_email(
        &self,
        webstore: &Webstore,
        email: &str,
    ) -> Result<Option<Arc<Customer>>, ServiceError> {
        Ok(self.registry.customer_by_email(webstore, &fold(email))?)
    }

    /// One page of the webstore's customers by id, and how many it has in all.
    pub async fn customers_page(
        &self,
        webstore: &Webstore,
        page: Page,
    ) -> Result<(Vec<Arc<Customer>>, u64), ServiceError> {
        let (ids, total) = self
            .registry
            .page_of_customers(webstore, page.offset(), page.per_page)
            .await?;
        // An id is listed from its allocation; one whose create is still being written (or
        // has just failed) has no record yet and is left out of this answer.
        let mut customers = Vec::with_capacity(ids.len());
        for id in ids {
            customers.extend(self.registry.customer(webstore.idx, id)?);
        }
        Ok((customers, total))
    }

    /// Signs a customer in: `Some` only for the right password. Every failure costs one
    /// argon2 check, whether or not the email belongs to a customer with a password. The
    /// attempt counts once its check has finished, whether or not the caller waits for it.
    pub async fn sign_in(
        &self,
        webstore: &Webstore,
        email: &str,
        password: &str,
    ) -> Result<Option<Arc<Customer>>, ServiceError> {
        let attempt = self
            .throttles
            .begin(webstore.idx, &fold(email))
            .map_err(|retry_after| {
                METRICS.sign_in_throttled.inc();
                ServiceError::SignInThrottled { retry_after }
            })?;
        let customer = self.customer_by_email(webstore, email)?;
        let stored = customer.as_ref().and_then(|c| c.password_hash.clone());
        let matches = self
            .passwords
            .check(
                Share::Webstore(webstore.idx),
                password.to_owned(),
                stored,
                move |matches| {
                    if !matches {
                        METRICS.sign_in_failures.inc();
                    }
                    attempt.finish(matches)
                },
            )
            .await?;
        Ok(customer.filter(|_| matches))
    }

    /// `Err` while the store refuses writes: checked before a write's work begins (parsing
    /// aside), so that a full disk costs no password hashing or actor call.
    fn writes_allowed(&self) -> Result<(), ServiceError> {
        Ok(self.registry.store().writable()?)
    }

    /// Forgets throttling state that has expired, and removes producer sessions idle too
    /// long; run now and then.
    pub fn prune_throttles(&self) {
        self.throttles.prune();
        self.producer_throttles.prune();
        self.client_limits.prune();
        if let Err(error) = self.prune_producer_sessions() {
            tracing::warn!(%error, "idle producer sessions could not be removed");
        }
    }

    /// Sets the metrics that are read rather than counted (live actors, the store's size,
    /// the disk's state); called when the metrics are scraped.
    pub fn observe(&self) {
        let store = self.registry.store();
        METRICS
            .admission_in_service
            .set(i64::try_from(self.quotas.in_service()).unwrap_or(i64::MAX));
        METRICS
            .actors_active
            .set(i64::try_from(self.registry.active_count()).unwrap_or(i64::MAX));
        if let Ok(bytes) = store.size_on_disk() {
            METRICS
                .store_size
                .set(i64::try_from(bytes).unwrap_or(i64::MAX));
        }
        if let Some(disk) = store.disk() {
            METRICS
                .disk_free
                .set(i64::try_from(disk.free).unwrap_or(i64::MAX));
            METRICS
                .disk_writes_refused
                .set(i64::from(disk.refusal.is_some()));
        }
    }

    /// Whether what an idempotency record names (a customer or an order of the webstore)
    /// exists: a record written just before a crash took its resource names nothing.
    async fn resource_exists(
        &self,
        webstore: &Webstore,
        named: Resource,
    ) -> Result<bool, ServiceError> {
        Ok(match named {
            Resource::Customer(id) => self.registry.customer(webstore.idx, id)?.is_some(),
            Resource::Order(id) => self.registry.order(webstore.idx, id).await?.is_some(),
            Resource::Payment(id) => self.payment(webstore, id).await.is_ok(),
            // An adjustment's record: its account has had it (the record and the posting
            // are one log entry).
            Resource::Account(id) => self
                .registry
                .customer(webstore.idx, id)?
                .is_some_and(|customer| customer.account.transactions > 0),
        })
    }

    /// What is held now by requests in progress (see [`Held`]).
    pub fn held(&self) -> Held {
        let registry = self.registry.held();
        Held {
            capped_calls: self.calls.in_flight(),
            actor_calls: registry.actor_calls,
            email_claims: registry.email_claims,
            activations: registry.activations,
            idempotency_keys: self.idempotency.keys_in_use(),
            sign_in_attempts: self.throttles.attempts_in_flight()
                + self.producer_throttles.attempts_in_flight(),
            client_attempts: self.client_limits.attempts_in_progress(),
            password_jobs: self.passwords.jobs_in_flight(),
        }
    }
}

fn email_taken() -> ServiceError {
    ServiceError::Invalid(FieldErrors::single("email", TAKEN))
}
#[cfg(test)]
mod money_model_tests;
#[cfg(test)]
mod read_committed_tests;
#[cfg(test)]
mod tests;
