//! The registry: where the service finds customers and their actors. It composes
//!
//! - [`directory`]: the live customer actors (activated on first change or order read,
//!   passivated when idle; reading a customer never starts one), with each actor's count of
//!   calls to answer;
//! - [`emails`]: per webstore, the email claims of changes in progress and remembered
//!   lookups; the store's email index is the authority at rest;
//! - [`listing`]: per webstore, the customer count and pages of ids;
//! - [`uncommitted`]: the new customers whose create is not durable yet, hidden from every
//!   reader until it is (read committed: no reader sees a write the log or the group may
//!   still lose);
//! - the id sequences (customer ids and per-webstore customer numbers, allocated together so
//!   that number order is id order), and the in-memory order indexes ([`Indexes`]), to
//!   which each order is published once durable and which a background scan of the store
//!   fills at start.
//!
//! Every acquisition it hands out (an email claim, a call permit) is a guard released on
//! drop. No map guard is held across an `.await` or an actor call. Must not touch: HTTP,
//! actor message handling.

pub mod directory;
pub mod emails;
pub mod listing;
pub mod uncommitted;

use std::sync::{Arc, Mutex};

use dashmap::DashMap;
use std::time::{Duration, Instant};

use crate::actors::customer::{CustomerArgs, Published};
use crate::domain::catalogue::{Catalogue, CurrentCatalogue, Webstore, WebstoreIdx};
use crate::domain::customer::Customer;
use crate::domain::day::Day;
use crate::domain::ids::{CustomerId, IdRange, IdSequence, OrderId};
use crate::domain::order::Order;
use crate::events::Events;
use crate::index::deliveries::{Lifecycles, Scheduled};
use crate::index::Indexes;
use crate::metrics::METRICS;
use crate::store::order_ids::OrderIds;
use crate::store::{IdempotencyWrite, Store, StoreError, Written};

pub use directory::{CallPermit, LiveActor, Refused};
pub use emails::{EmailClaim, EmailTaken, Settling};

use directory::{Activated, Directory};
use emails::WebstoreEmails;
use listing::{CustomerList, Listed};
use uncommitted::{Hidden, Uncommitted};

/// Why the registry could not answer.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A customer actor could not be started.
    #[error("starting the actor of customer {0}: {1}")]
    Spawn(CustomerId, String),
}

/// What the registry keeps per webstore.
struct WebstoreState {
    emails: WebstoreEmails,
    /// Customer numbers; allocated together with ids under `allocation`.
    numbers: IdSequence,
    allocation: Mutex<()>,
    customers: Arc<CustomerList>,
}

/// A new customer's id and number, with the claim on its email, its place in the listing
/// and its id hidden from readers: [`Registry::create_customer`] hands them to the work
/// group commit runs once the create is durable; dropped before, they give everything back.
pub struct NewCustomer {
    /// The id.
    pub id: CustomerId,
    /// The number within its webstore.
    pub number: u64,
    claim: EmailClaim,
    listed: Listed,
    hidden: Hidden,
}

/// How many guards the registry has handed out and not yet had back (for tests).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RegistryHeld {
    /// Email claims in progress, over all webstores.
    pub email_claims: usize,
    /// Calls counted against customers' actors.
    pub actor_calls: u64,
    /// Actor activations under way.
    pub activations: usize,
}

/// The directory of customer actors and its indexes.
pub struct Registry {
    catalogue: Arc<CurrentCatalogue>,
    store: Store,
    directory: Directory,
    /// Per webstore, by index; a webstore added by a reload gets its entry then.
    webstores: DashMap<WebstoreIdx, Arc<WebstoreState>>,
    customer_ids: IdSequence,
    order_ids: Arc<OrderIds>,
    indexes: Arc<Indexes>,
    /// New customers whose create is not durable yet: no reader sees them.
    uncommitted: Arc<Uncommitted>,
    /// Where each write's event comes from.
    events: Arc<Events>,
}

impl Registry {
    /// A registry over `store`, continuing its id sequences. Starts a thread that indexes
    /// the stored orders.
    pub fn open(
        catalogue: Arc<CurrentCatalogue>,
        store: Store,
        range: IdRange,
        events: Arc<Events>,
    ) -> Result<Registry, StoreError> {
        store.claim_id_range(range)?;
        let high_water = store.high_water(range)?;
        let indexes = Arc::new(Indexes::new(high_water.has_orders, range.first() - 1));
        if !indexes.is_complete() {
            let (indexes, store, catalogue) = (indexes.clone(), store.clone(), catalogue.get());
            std::thread::Builder::new()
                .name("order-index".into())
                .spawn(move || {
                    let started = Instant::now();
                    let webstore_of = |id: &str| catalogue.webstore_by_id(id).map(|w| w.idx);
                    match indexes.fill_from(&store, high_water.any_customer_id, &webstore_of) {
                        Ok(filled) => tracing::info!(
                            orders = filled.orders,
                            unreadable = filled.unreadable,
                            elapsed_ms = started.elapsed().as_millis() as u64,
                            "indexed the stored orders"
                        ),
                        Err(error) => tracing::error!(
                            %error,
                            "indexing the stored orders failed: looking up orders stored \
                             before this start and delivery lists answer 503 until a restart"
                        ),
                    }
                })
                .map_err(|source| StoreError::Io {
                    context: "starting the order indexing thread".into(),
                    source,
                })?;
        }
        let order_ids = Arc::new(OrderIds::continuing(store.clone(), high_water.order_id));
        let registry = Registry {
            catalogue,
            store,
            directory: Directory::new(),
            webstores: DashMap::new(),
            customer_ids: IdSequence::starting_at(high_water.customer_id + 1),
            order_ids,
            indexes,
            uncommitted: Arc::default(),
            events,
        };
        registry.add_webstores(&registry.catalogue.get())?;
        Ok(registry)
    }

    /// Gives every webstore of `catalogue` that has none yet its state, continuing its
    /// customer numbers from the store (a reload calls this before putting the catalogue in
    /// force).
    pub fn add_webstores(&self, catalogue: &Catalogue) -> Result<(), StoreError> {
        for webstore in catalogue.webstores() {
            if self.webstores.contains_key(&webstore.idx) {
                continue;
            }
            let state = self.new_state(&webstore.settings.id)?;
            self.webstores.entry(webstore.idx).or_insert(state);
        }
        Ok(())
    }

    /// Whether the store holds customers of the webstore with this id.
    pub fn has_customers(&self, webstore_id: &str) -> Result<bool, StoreError> {
        Ok(self.store.last_number(webstore_id)? > 0)
    }

    /// The catalogue in force.
    pub fn catalogue(&self) -> &Arc<CurrentCatalogue> {
        &self.catalogue
    }

    /// The store, for the service's reads of idempotency records.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The registry's state for `webstore` (made now if a catalogue reload added the
    /// webstore between its `add_webstores` and this request, which cannot happen, but costs
    /// nothing to allow).
    fn state(&self, webstore: &Webstore) -> Result<Arc<WebstoreState>, StoreError> {
        if let Some(state) = self.webstores.get(&webstore.idx) {
            return Ok(state.clone());
        }
        let state = self.new_state(&webstore.settings.id)?;
        Ok(self.webstores.entry(webstore.idx).or_insert(state).clone())
    }

    /// Takes in `webstore` as the store now holds it (just imported into this running node,
    /// which did not serve it before): its state read afresh, its orders indexed; how many
    /// orders.
    pub fn adopt_webstore(&self, webstore: &Webstore) -> Result<u64, StoreError> {
        let state = self.new_state(&webstore.settings.id)?;
        self.webstores.insert(webstore.idx, state);
        let customers = self.store.customer_ids(&webstore.settings.id)?;
        self.indexes.adopt(&self.store, webstore.idx, &customers)
    }

    /// Takes in what a move's round wrote of `customers` of `webstore` (not served here yet):
    /// their orders not indexed yet are indexed; how many.
    pub fn adopt_customers(
        &self,
        webstore: &Webstore,
        customers: &[CustomerId],
    ) -> Result<u64, StoreError> {
        self.indexes.adopt(&self.store, webstore.idx, customers)
    }

    /// Reads `webstore`'s state afresh from the store (its customer numbers and listing),
    /// as a node does that takes a webstore a move has copied into it.
    pub fn refresh_webstore(&self, webstore: &Webstore) -> Result<(), StoreError> {
        let state = self.new_state(&webstore.settings.id)?;
        self.webstores.insert(webstore.idx, state);
        Ok(())
    }

    /// A webstore's state, continuing its customer numbers from the store; a thread lists
    /// its stored customers.
    fn new_state(&self, webstore_id: &str) -> Result<Arc<WebstoreState>, StoreError> {
        let last_number = self.store.last_number(webstore_id)?;
        let customers = CustomerList::filling();
        let (list, store, id) = (
            customers.clone(),
            self.store.clone(),
            webstore_id.to_owned(),
        );
        std::thread::Builder::new()
            .name("boxsub-list".into())
            .spawn(move || list.fill(store.customer_ids(&id)))
            .map_err(|error| StoreError::Engine {
                context: "starting the customer listing".into(),
                detail: error.to_string(),
            })?;
        Ok(Arc::new(WebstoreState {
            emails: WebstoreEmails::default(),
            // Past the numbers a crash may have lost, answered before they were synced.
            numbers: IdSequence::starting_at(last_number + 1 + self.store.lost_answers()),
            allocation: Mutex::new(()),
            customers,
        }))
    }

    /// Claims a free email for a new customer and gives it an id (hidden from readers until
    /// its create is durable) and a customer number. `Err` with the claim's [`Settling`]
    /// when a change still in progress holds the email.
    pub fn claim_email_for_new_customer(
        &self,
        webstore: &Webstore,
        email_key: String,
    ) -> Result<Result<NewCustomer, EmailTaken>, StoreError> {
        let state = self.state(webstore)?;
        let stored_owner = |key: &str| self.email_owner(webstore, key);
        let claimed = state.emails.claim_new(email_key, &stored_owner, || {
            let _allocating = state
                .allocation
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let id = CustomerId(self.customer_ids.take());
            let hidden = self.uncommitted.hide(id);
            (
                id,
                (state.numbers.take(), state.customers.allocated(id), hidden),
            )
        })?;
        Ok(
            claimed.map(|(claim, id, (number, listed, hidden))| NewCustomer {
                id,
                number,
                claim,
                listed,
                hidden,
            }),
        )
    }

    /// Claims an email for an existing customer while its change is applied: `Some(claim)`
    /// when claimed now (it is released when dropped), `None` when the customer already
    /// holds it.
    pub fn claim_email(
        &self,
        webstore: &Webstore,
        email_key: String,
        owner: CustomerId,
    ) -> Result<Result<Option<EmailClaim>, EmailTaken>, StoreError> {
        let stored_owner = |key: &str| self.email_owner(webstore, key);
        self.state(webstore)?
            .emails
            .claim_for(email_key, owner, &stored_owner)
    }

    /// The customer holding a folded email, if one has been created with it durably: the
    /// customer as readers see it (its live actor's, or its record, never one whose create or
    /// change is not durable) holds the email.
    pub fn email_owner(
        &self,
        webstore: &Webstore,
        email_key: &str,
    ) -> Result<Option<CustomerId>, StoreError> {
        for id in self.store.email_entries(&webstore.settings.id, email_key)? {
            let holds = self
                .customer(webstore.idx, id)?
                .is_some_and(|customer| customer.email.index_key() == email_key);
            if holds {
                return Ok(Some(id));
            }
        }
        Ok(None)
    }

    /// The customer of `webstore` whose email folds to `email_key`, as it is now.
    pub fn customer_by_email(
        &self,
        webstore: &Webstore,
        email_key: &str,
    ) -> Result<Option<Arc<Customer>>, StoreError> {
        let state = self.state(webstore)?;
        let emails = &state.emails;
        if let Some(id) = emails.hint(email_key) {
            match self.customer(webstore.idx, id)? {
                Some(customer) if customer.email.index_key() == email_key => {
                    return Ok(Some(customer))
                }
                _ => emails.forget_hint(email_key, id),
            }
        }
        // Each customer is read anyway, so its email is checked on it (as it is now, live or
        // stored) rather than on a second read of its record.
        for id in self.store.email_entries(&webstore.settings.id, email_key)? {
            let found = self
                .customer(webstore.idx, id)?
                .filter(|customer| customer.email.index_key() == email_key);
            if found.is_some() {
                emails.remember(email_key, id);
                return Ok(found);
            }
        }
        Ok(None)
    }

    /// Stores a new customer (with its email's index entry, number and idempotency record;
    /// see `Store::create_customer`). Once the create is durable, group commit shows the
    /// customer to readers, lists it, counts it and releases the email's claim and `held`
    /// (the request's idempotency turn), in that order, before the returned wait completes;
    /// a create never made durable keeps its customer hidden and releases the rest.
    pub fn create_customer(
        &self,
        webstore: &Webstore,
        customer: &Customer,
        idempotency: Option<IdempotencyWrite>,
        new: NewCustomer,
        held: Box<dyn Send>,
    ) -> Result<Written, StoreError> {
        let NewCustomer {
            claim,
            listed,
            hidden,
            ..
        } = new;
        let created = METRICS
            .customers_created
            .with_label_values(&[webstore.settings.id.as_str()]);
        let uncommitted = self.uncommitted.clone();
        let event = self.events.customer_created(webstore, customer)?;
        let in_flight = event.in_flight;
        let if_refused = in_flight.if_refused();
        let on_durable: crate::store::OnDurable = Box::new(move || {
            hidden.reveal();
            listed.keep();
            created.inc();
            in_flight.durable();
            drop((claim, held));
        });
        match self.store.create_customer(
            customer,
            &webstore.settings.id,
            idempotency,
            Some(event.write),
            on_durable,
        ) {
            Err(error) if error.wrote_nothing() => {
                // Refused before anything was written: there is nothing to hide, and its
                // event's number is a gap.
                uncommitted.unwritten(customer.id);
                if_refused.refused();
                Err(error)
            }
            outcome => outcome,
        }
    }

    /// How many new customers are hidden from readers (creates not durable, or given up).
    pub fn uncommitted_customers(&self) -> usize {
        self.uncommitted.len()
    }

    /// The live actor of customer `id`, activating it from its record when needed. `None`
    /// when there is no such customer in `webstore`: another webstore's customer is as
    /// absent as one that never existed.
    pub async fn live_actor(
        &self,
        webstore: WebstoreIdx,
        id: CustomerId,
    ) -> Result<Option<Arc<LiveActor>>, RegistryError> {
        let live = self.directory.activate(id, || self.actor_args(id)).await?;
        Ok(live.filter(|live| live.webstore == webstore))
    }

    /// What a customer's actor starts from, read from the store.
    fn actor_args(&self, id: CustomerId) -> Result<CustomerArgs, Activated> {
        if self.uncommitted.hides(id) {
            // No one may act on a customer whose create is not durable.
            return Err(Activated::Missing);
        }
        let loaded = self
            .store
            .load_customer(id)
            .map_err(|error| Activated::Failed(error.into()))?
            .ok_or(Activated::Missing)?;
        let Some(webstore) = self.webstore(&loaded.record.webstore_id) else {
            tracing::warn!(customer_id = %id, webstore = %loaded.record.webstore_id,
                "customer belongs to a webstore the catalogue no longer has");
            return Err(Activated::Missing);
        };
        let mut customer = loaded
            .record
            .into_stored_customer(webstore.idx)
            .map_err(|error| Activated::Failed(error.into()))?;
        customer.account = self
            .store
            .account(id, customer.halts.is_halted())
            .map_err(|error| Activated::Failed(error.into()))?;
        let published: Published = Arc::new(std::sync::RwLock::new(Arc::new(customer.clone())));
        Ok(CustomerArgs {
            customer,
            published,
            writing: Default::default(),
            orders: loaded.orders,
            webstore,
            catalogue: self.catalogue.clone(),
            order_ids: self.order_ids.clone(),
            store: self.store.clone(),
            indexes: self.indexes.clone(),
            events: self.events.clone(),
        })
    }

    /// A customer of `webstore` as it is now, for reading: from its live actor's published
    /// snapshot, or straight from the store when it has no live actor. Reads never activate
    /// an actor, so listing many customers does not fill memory with actors.
    pub fn customer(
        &self,
        webstore: WebstoreIdx,
        id: CustomerId,
    ) -> Result<Option<Arc<Customer>>, StoreError> {
        if let Some(live) = self.directory.live(id) {
            return Ok((live.webstore == webstore).then(|| live.customer()));
        }
        if self.uncommitted.hides(id) {
            return Ok(None);
        }
        let Some(record) = self.store.load_customer_record(id)? else {
            return Ok(None);
        };
        let owner = self.webstore(&record.webstore_id).map(|w| w.idx);
        if owner != Some(webstore) {
            return Ok(None);
        }
        let mut customer = record.into_stored_customer(webstore)?;
        customer.account = self.store.account(id, customer.halts.is_halted())?;
        Ok(Some(Arc::new(customer)))
    }

    /// Forgets a live actor that has stopped, so the next use activates a new one.
    pub fn forget(&self, id: CustomerId, live: &Arc<LiveActor>) {
        self.directory.forget(id, live);
    }

    /// Stops the actors of customers unused for `idle` with no call to answer.
    pub fn passivate_idle(&self, idle: Duration) -> usize {
        self.directory.passivate_idle(idle)
    }

    /// How many customer actors are live (or starting).
    pub fn active_count(&self) -> usize {
        self.directory.len()
    }

    /// Stops every live actor (at shutdown, after requests have drained).
    pub fn stop_all(&self) {
        self.directory.stop_all();
    }

    /// What the registry has handed out and not yet had back.
    pub fn held(&self) -> RegistryHeld {
        RegistryHeld {
            email_claims: self
                .webstores
                .iter()
                .map(|state| state.emails.claims_held())
                .sum(),
            actor_calls: self.directory.calls_in_flight(),
            activations: self.directory.activations_pending(),
        }
    }

    /// The in-memory indexes of the stored orders (and of the frozen dates).
    pub fn indexes(&self) -> &Indexes {
        &self.indexes
    }

    /// Completes once the orders stored before the start are indexed.
    pub async fn orders_indexed(&self) {
        self.indexes.filled().await;
    }

    /// The durable orders of `webstore` delivered on `date`, and the generation of the
    /// webstore's delivery lists they were read at.
    pub async fn deliveries_on(
        &self,
        webstore: WebstoreIdx,
        date: Day,
    ) -> Result<(u64, Vec<Scheduled>), StoreError> {
        self.indexes.deliveries_on(webstore, date).await
    }

    /// The lifecycle versions (pauses, skipped dates, cancellation) of a durable order in
    /// the delivery lists, if it has some: what withholds its deliveries, without a read of
    /// its record.
    pub fn order_lifecycles(&self, order: OrderId) -> Option<Lifecycles> {
        self.indexes.order_lifecycles(order)
    }

    /// The generation of the delivery lists of `webstore`: a list read at this generation is
    /// still current.
    pub fn deliveries_generation(&self, webstore: WebstoreIdx) -> u64 {
        self.indexes.deliveries_generation(webstore)
    }

    /// An order of one of the webstore's customers, once durable. Read from the store
    /// without an actor: the index only holds durable orders. A change of an order is in
    /// the store from its write, a moment before it is durable (its actor waits for that
    /// before it answers), so a read in that moment may see it.
    pub async fn order(
        &self,
        webstore: WebstoreIdx,
        id: OrderId,
    ) -> Result<Option<Order>, StoreError> {
        let Some(owner) = self.indexes.owner(id).await? else {
            return Ok(None);
        };
        // Another webstore's order is as absent as one that never existed.
        if self.customer(webstore, owner)?.is_none() {
            return Ok(None);
        }
        let order = self.store.load_order(owner, id)?;
        // The store shows a write before it is on disk: while the owner has order writes on
        // their way there, what was read waits for them, so that no one reads a change a
        // crash or a lost changelog could still take back. A write the read saw was counted
        // before it showed, and may not be handed to the log yet: the wait goes behind every
        // visible write.
        if self
            .directory
            .live(owner)
            .is_some_and(|live| live.writing_orders())
        {
            self.store.barrier_after_visible_writes()?.durable().await?;
        }
        Ok(order)
    }

    fn webstore(&self, webstore_id: &str) -> Option<Arc<Webstore>> {
        self.catalogue.webstore_by_id(webstore_id)
    }

    /// Up to `limit` customer ids of a webstore from position `offset` (by id), and how many
    /// it has in all.
    pub async fn page_of_customers(
        &self,
        webstore: &Webstore,
        offset: u64,
        limit: u64,
    ) -> Result<(Vec<CustomerId>, u64), StoreError> {
        let list = self.state(webstore)?.customers.clone();
        list.page(offset, limit).await
    }
}
