//! The registry: the directory of customer actors and the secondary indexes that find them —
//! email → customer per webstore (case-folded) and order → customer — plus the id sequences.
//!
//! The email index lives in the store, written together with the customer it points at (see
//! `Store::create_customer`), so it is exact after a restart without a rebuild. The order
//! index is in memory ([`OrderOwners`]): actors publish each order to it once durable, and at
//! start one background scan of the stored order keys fills in the rest, which spares every
//! order a second write. Otherwise the registry keeps in memory only what is live: the actors of
//! customers in use (activated from their snapshot by the first change or order read,
//! passivated when idle; reading a customer never starts one) and the email claims of
//! creates and email changes in progress. A claim is taken with the entry API and checked
//! against the store inside it, so "is it free?" and "take it" are one step and exactly one
//! of many concurrent claimants wins.
//!
//! No map guard is held across an `.await` or an actor call: guards live only inside the
//! synchronous parts of these methods. Must not touch: HTTP, actor message handling.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dashmap::mapref::entry::Entry;
use dashmap::DashMap;
use ractor::{Actor, ActorRef};
use tokio::sync::OnceCell;

use crate::actors::customer::{CustomerActor, CustomerArgs, CustomerMsg, Published};
use crate::actors::order_owners::OrderOwners;
use crate::domain::catalogue::{Catalogue, Webstore, WebstoreIdx};
use crate::domain::customer::Customer;
use crate::domain::ids::{CustomerId, IdSequence, OrderId};
use crate::domain::order::Order;
use crate::store::order_ids::OrderIds;
use crate::store::{IdempotencyWrite, Store, StoreError};

/// Another customer of the webstore holds the email.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmailTaken;

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

/// A live customer actor and what the registry knows about its use.
pub struct Slot {
    /// The customer's webstore.
    pub webstore: WebstoreIdx,
    /// The actor.
    pub actor: ActorRef<CustomerMsg>,
    published: Published,
    last_used: AtomicU64,
    in_flight: AtomicU32,
    epoch: Instant,
}

impl Slot {
    /// The customer as its actor last stored it.
    pub fn customer(&self) -> Arc<Customer> {
        self.published
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    fn touch(&self) {
        let now = self.epoch.elapsed().as_secs();
        self.last_used.store(now, Ordering::Relaxed);
    }

    /// Counts a call in. Refused when `limit` calls are already waiting, or when the slot was
    /// retired for passivation (the caller then asks the registry for a fresh slot).
    pub fn enter(&self, limit: u32) -> Result<(), Refused> {
        let before = self.in_flight.fetch_add(1, Ordering::AcqRel);
        if before >= RETIRED {
            return Err(Refused::Retired);
        }
        if before >= limit {
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
            return Err(Refused::Busy);
        }
        Ok(())
    }

    /// Marks an unused slot as retired, so that no call can enter it any more.
    fn retire(&self) -> bool {
        self.in_flight
            .compare_exchange(0, RETIRED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Counts a call out.
    pub fn leave(&self) {
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
    }

    fn idle_for(&self) -> Duration {
        let now = self.epoch.elapsed().as_secs();
        Duration::from_secs(now.saturating_sub(self.last_used.load(Ordering::Relaxed)))
    }
}

/// Why a call could not enter a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Too many calls are waiting for this customer.
    Busy,
    /// The actor is being passivated; activate it again.
    Retired,
}

/// `in_flight` of a retired slot: far above any limit, and still above it after every call
/// that tries to enter adds one.
const RETIRED: u32 = u32::MAX / 2;

type Activation = Arc<OnceCell<Arc<Slot>>>;

/// How many customers a webstore has: those found in the store at start (counted on first
/// need, since counting a large store takes a while) plus those created since.
struct Totals {
    at_start: OnceCell<u64>,
    last_number_at_start: u64,
    created: AtomicU64,
}

struct WebstoreIndex {
    /// Emails claimed by creates and email changes still in progress (folded).
    claims: DashMap<String, CustomerId>,
    /// Folded email → customer, remembered from earlier lookups so that a repeated lookup
    /// skips the store's index. Only a hint: every answer is checked against the customer's
    /// current email, so a stale entry costs one store read, never a wrong answer.
    email_hints: DashMap<String, CustomerId>,
    /// Customer numbers; allocated together with ids under `allocation`, so that number
    /// order is id order and the number index lists customers by id.
    numbers: IdSequence,
    allocation: Mutex<()>,
    totals: Totals,
}

/// The directory of customer actors and its indexes.
pub struct Registry {
    catalogue: Arc<Catalogue>,
    store: Store,
    active: DashMap<CustomerId, Activation>,
    webstores: Vec<WebstoreIndex>,
    customer_ids: IdSequence,
    order_ids: Arc<OrderIds>,
    order_owners: Arc<OrderOwners>,
    epoch: Instant,
}

enum Activated {
    Missing,
    Failed(RegistryError),
}

impl Registry {
    /// A registry over `store`, continuing its id sequences. Starts a thread that indexes
    /// the stored orders.
    pub fn open(catalogue: Arc<Catalogue>, store: Store) -> Result<Registry, StoreError> {
        let high_water = store.high_water()?;
        let order_owners = Arc::new(OrderOwners::new(high_water.order_id));
        if !order_owners.is_complete() {
            let (owners, store) = (order_owners.clone(), store.clone());
            std::thread::Builder::new()
                .name("order-index".into())
                .spawn(move || {
                    let started = Instant::now();
                    match owners.fill_from(&store, high_water.customer_id) {
                        Ok(()) => tracing::info!(
                            orders = owners.len(),
                            elapsed_ms = started.elapsed().as_millis() as u64,
                            "indexed the stored orders"
                        ),
                        Err(error) => tracing::error!(
                            %error,
                            "indexing the stored orders failed: looking up orders stored \
                             before this start answers 503 until a restart"
                        ),
                    }
                })
                .map_err(|source| StoreError::Io {
                    context: "starting the order indexing thread".into(),
                    source,
                })?;
        }
        let mut webstores = Vec::with_capacity(catalogue.webstores().len());
        for webstore in catalogue.webstores() {
            let last_number = store.last_number(&webstore.settings.id)?;
            webstores.push(WebstoreIndex {
                claims: DashMap::new(),
                email_hints: DashMap::new(),
                numbers: IdSequence::starting_at(last_number + 1),
                allocation: Mutex::new(()),
                totals: Totals {
                    at_start: OnceCell::new(),
                    last_number_at_start: last_number,
                    created: AtomicU64::new(0),
                },
            });
        }
        let order_ids = Arc::new(OrderIds::continuing(store.clone(), high_water.order_id));
        Ok(Registry {
            catalogue,
            store,
            active: DashMap::new(),
            webstores,
            customer_ids: IdSequence::starting_at(high_water.customer_id + 1),
            order_ids,
            order_owners,
            epoch: Instant::now(),
        })
    }

    /// The store, for the service's reads of idempotency records.
    pub fn store(&self) -> &Store {
        &self.store
    }

    fn index(&self, webstore: WebstoreIdx) -> &WebstoreIndex {
        &self.webstores[webstore.0 as usize]
    }

    /// Claims a free email for a new customer and gives it an id and a customer number.
    pub fn claim_email_for_new_customer(
        &self,
        webstore: &Webstore,
        email_key: String,
    ) -> Result<Result<(CustomerId, u64), EmailTaken>, StoreError> {
        let index = self.index(webstore.idx);
        match index.claims.entry(email_key) {
            Entry::Occupied(_) => Ok(Err(EmailTaken)),
            Entry::Vacant(vacant) => {
                if self
                    .store
                    .email_owner(&webstore.settings.id, vacant.key())?
                    .is_some()
                {
                    return Ok(Err(EmailTaken));
                }
                let (id, number) = {
                    let _allocating = index
                        .allocation
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner());
                    (CustomerId(self.customer_ids.take()), index.numbers.take())
                };
                vacant.insert(id);
                Ok(Ok((id, number)))
            }
        }
    }

    /// Claims an email for an existing customer while its change is applied: `Ok(true)` when
    /// claimed now (release it afterwards), `Ok(false)` when the customer already holds it.
    pub fn claim_email(
        &self,
        webstore: &Webstore,
        email_key: String,
        owner: CustomerId,
    ) -> Result<Result<bool, EmailTaken>, StoreError> {
        match self.index(webstore.idx).claims.entry(email_key) {
            Entry::Occupied(held) if *held.get() == owner => Ok(Ok(false)),
            Entry::Occupied(_) => Ok(Err(EmailTaken)),
            Entry::Vacant(vacant) => {
                match self
                    .store
                    .email_owner(&webstore.settings.id, vacant.key())?
                {
                    Some(holder) if holder == owner => Ok(Ok(false)),
                    Some(_) => Ok(Err(EmailTaken)),
                    None => {
                        vacant.insert(owner);
                        Ok(Ok(true))
                    }
                }
            }
        }
    }

    /// Ends an in-progress claim (the store's index now answers for the email, or the change
    /// failed).
    pub fn release_claim(&self, webstore: WebstoreIdx, email_key: &str, owner: CustomerId) {
        self.index(webstore)
            .claims
            .remove_if(email_key, |_, holder| *holder == owner);
    }

    /// The customer holding a folded email, if one has been created with it.
    pub fn email_owner(
        &self,
        webstore: &Webstore,
        email_key: &str,
    ) -> Result<Option<CustomerId>, StoreError> {
        self.store.email_owner(&webstore.settings.id, email_key)
    }

    /// The customer of `webstore` whose email folds to `email_key`, as it is now.
    pub fn customer_by_email(
        &self,
        webstore: &Webstore,
        email_key: &str,
    ) -> Result<Option<Arc<Customer>>, StoreError> {
        let hints = &self.index(webstore.idx).email_hints;
        if let Some(id) = hints.get(email_key).map(|hint| *hint) {
            match self.customer(webstore.idx, id)? {
                Some(customer) if customer.email.index_key() == email_key => {
                    return Ok(Some(customer))
                }
                _ => {
                    hints.remove_if(email_key, |_, hinted| *hinted == id);
                }
            }
        }
        let Some(id) = self.store.email_owner(&webstore.settings.id, email_key)? else {
            return Ok(None);
        };
        let found = self.customer(webstore.idx, id)?;
        if found.is_some() {
            hints.insert(email_key.to_owned(), id);
        }
        Ok(found)
    }

    /// Stores a new customer (with its email claim, number and idempotency record) in one
    /// batch; the caller then waits for durability and releases its claim.
    pub fn create_customer(
        &self,
        webstore: &Webstore,
        customer: &Customer,
        idempotency: Option<IdempotencyWrite>,
    ) -> Result<(), StoreError> {
        self.store
            .create_customer(customer, &webstore.settings.id, idempotency)?;
        self.index(webstore.idx)
            .totals
            .created
            .fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Waits until everything written so far is durable.
    pub async fn durable(&self) -> Result<(), StoreError> {
        self.store.durable().await
    }

    /// The live actor of customer `id`, activating it from its snapshot when needed. `None`
    /// when there is no such customer in `webstore`: another webstore's customer is as
    /// absent as one that never existed.
    pub async fn slot(
        &self,
        webstore: WebstoreIdx,
        id: CustomerId,
    ) -> Result<Option<Arc<Slot>>, RegistryError> {
        let live = self.active.get(&id).and_then(|cell| cell.get().cloned());
        if let Some(slot) = live {
            if slot.webstore != webstore {
                return Ok(None);
            }
            slot.touch();
            return Ok(Some(slot));
        }
        let cell = self.active.entry(id).or_default().clone();
        let outcome = cell.get_or_try_init(|| self.activate(id)).await;
        match outcome {
            Ok(slot) => {
                if slot.webstore != webstore {
                    return Ok(None);
                }
                slot.touch();
                Ok(Some(slot.clone()))
            }
            Err(failure) => {
                // Nothing is cached for ids without a customer, so misses can't pile up.
                self.active
                    .remove_if(&id, |_, held| Arc::ptr_eq(held, &cell));
                match failure {
                    Activated::Missing => Ok(None),
                    Activated::Failed(error) => Err(error),
                }
            }
        }
    }

    /// A customer of `webstore` as it is now, for reading: from its live actor's published
    /// snapshot, or straight from the store when it has no live actor. Reads never activate
    /// an actor, so listing many customers does not fill memory with actors.
    pub fn customer(
        &self,
        webstore: WebstoreIdx,
        id: CustomerId,
    ) -> Result<Option<Arc<Customer>>, StoreError> {
        if let Some(slot) = self.active.get(&id).and_then(|cell| cell.get().cloned()) {
            slot.touch();
            return Ok((slot.webstore == webstore).then(|| slot.customer()));
        }
        let Some(record) = self.store.load_customer_record(id)? else {
            return Ok(None);
        };
        let owner = self.webstore_idx(&record.webstore_id);
        Ok((owner == Some(webstore)).then(|| Arc::new(record.into_customer(webstore))))
    }

    /// Forgets a slot whose actor has stopped, so the next use activates a new one.
    pub fn forget(&self, id: CustomerId, slot: &Arc<Slot>) {
        self.active.remove_if(&id, |_, held| {
            held.get().is_some_and(|live| Arc::ptr_eq(live, slot))
        });
    }

    async fn activate(&self, id: CustomerId) -> Result<Arc<Slot>, Activated> {
        let loaded = self
            .store
            .load_customer(id)
            .map_err(|error| Activated::Failed(error.into()))?
            .ok_or(Activated::Missing)?;
        let Some(webstore) = self
            .catalogue
            .webstores()
            .iter()
            .find(|w| w.settings.id == loaded.record.webstore_id)
        else {
            tracing::warn!(customer_id = %id, webstore = %loaded.record.webstore_id,
                "customer belongs to a webstore the catalogue no longer has");
            return Err(Activated::Missing);
        };
        let customer = loaded.record.into_customer(webstore.idx);
        let published: Published = Arc::new(std::sync::RwLock::new(Arc::new(customer.clone())));
        let args = CustomerArgs {
            customer,
            published: published.clone(),
            orders: loaded.orders,
            webstore: webstore.clone(),
            order_ids: self.order_ids.clone(),
            store: self.store.clone(),
            order_owners: self.order_owners.clone(),
        };
        let (actor, _) = CustomerActor::spawn(None, CustomerActor, args)
            .await
            .map_err(|error| Activated::Failed(RegistryError::Spawn(id, error.to_string())))?;
        let slot = Slot {
            webstore: webstore.idx,
            actor,
            published,
            last_used: AtomicU64::new(0),
            in_flight: AtomicU32::new(0),
            epoch: self.epoch,
        };
        slot.touch();
        Ok(Arc::new(slot))
    }

    /// Stops the actors of customers unused for `idle` and with nothing in flight; their
    /// state is in the store, and the next use activates them again.
    pub fn passivate_idle(&self, idle: Duration) -> usize {
        let mut stopped = 0;
        self.active.retain(|_, cell| match cell.get() {
            Some(slot) if slot.idle_for() >= idle && slot.retire() => {
                slot.actor.stop(None);
                stopped += 1;
                false
            }
            _ => true,
        });
        stopped
    }

    /// How many customer actors are live.
    pub fn active_count(&self) -> usize {
        self.active.len()
    }

    /// Stops every live actor (at shutdown, after requests have drained).
    pub fn stop_all(&self) {
        self.active.retain(|_, cell| {
            if let Some(slot) = cell.get() {
                slot.actor.stop(None);
            }
            false
        });
    }

    /// Completes once the orders stored before the start are indexed.
    pub async fn orders_indexed(&self) {
        self.order_owners.filled().await;
    }

    /// An order of one of the webstore's customers, once durable. Read from the store
    /// without an actor: the index only holds durable orders, and a stored order never
    /// changes.
    pub async fn order(
        &self,
        webstore: WebstoreIdx,
        id: OrderId,
    ) -> Result<Option<Order>, StoreError> {
        let Some(owner) = self.order_owners.owner(id).await? else {
            return Ok(None);
        };
        // Another webstore's order is as absent as one that never existed.
        if self.customer(webstore, owner)?.is_none() {
            return Ok(None);
        }
        self.store.load_order(owner, id)
    }

    fn webstore_idx(&self, webstore_id: &str) -> Option<WebstoreIdx> {
        self.catalogue
            .webstores()
            .iter()
            .find(|w| w.settings.id == webstore_id)
            .map(|w| w.idx)
    }

    /// Up to `limit` customer ids of a webstore from position `offset` (by id), and how many
    /// it has in all.
    pub async fn page_of_customers(
        &self,
        webstore: &Webstore,
        offset: u64,
        limit: u64,
    ) -> Result<(Vec<CustomerId>, u64), StoreError> {
        let index = self.index(webstore.idx);
        let totals = &index.totals;
        let at_start = *totals
            .at_start
            .get_or_try_init(|| {
                let store = self.store.clone();
                let webstore_id = webstore.settings.id.clone();
                let up_to = totals.last_number_at_start;
                off_workers(move || store.count_customers(&webstore_id, up_to))
            })
            .await?;
        let total = at_start + totals.created.load(Ordering::Relaxed);
        let store = self.store.clone();
        let webstore_id = webstore.settings.id.clone();
        // Deep pages walk the index from its start; keep that off the async workers.
        let ids = off_workers(move || store.customer_ids_page(&webstore_id, offset, limit)).await?;
        Ok((ids, total))
    }
}

/// Runs a store scan on a blocking thread.
async fn off_workers<T: Send + 'static>(
    scan: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(scan)
        .await
        .map_err(|error| StoreError::Engine {
            context: "scanning the store".into(),
            detail: error.to_string(),
        })?
}
