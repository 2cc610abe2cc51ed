//! The application service: the one entry point the HTTP layer calls. It checks requests with
//! the domain rules, keeps the registry's email claims in step with the customer actors, makes
//! creates idempotent, runs password hashing on bounded blocking threads, throttles sign-in,
//! and bounds the work in flight so that overload is a 503, not an unbounded queue.
//!
//! Owns `ServiceError`; the HTTP layer alone turns it into status codes. Must not touch: HTTP
//! types, or a map guard across an `.await`.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;
use ractor::rpc::CallResult;
use ractor::RpcReplyPort;
use serde_json::{Map, Value};
use tokio::sync::Semaphore;

use crate::actors::customer::{unix_now, ChangeError, CustomerMsg, PlaceOrder};
use crate::domain::catalogue::{Catalogue, Webstore, WebstoreIdx};
use crate::domain::customer::{parse_customer, Customer, CustomerChanges, Mode};
use crate::domain::email::{fold, Email};
use crate::domain::fields::{parse_digits, FieldErrors, BLANK, INVALID, TAKEN};
use crate::domain::idempotency::{Pending, RecordedResponse, KEY_REUSED};
use crate::domain::ids::{CustomerId, OrderId};
use crate::domain::order::{customer_ref, validate_order, CustomerCheck, CustomerRef, Order};
use crate::domain::paging::Page;
use crate::domain::password::{hash_password, verify_password};
use crate::domain::throttle::SignInThrottle;
use crate::registry::{EmailTaken, Refused, Registry, RegistryError};
use crate::store::{IdempotencyWrite, Store, StoreError};

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
    Throttled {
        /// How long until an attempt is allowed again.
        retry_after: Duration,
    },
    /// Too much work in flight, or an actor did not answer within the deadline.
    #[error("busy")]
    Busy,
    /// The store failed; nothing was acknowledged.
    #[error("storage failure: {0}")]
    Storage(String),
    /// A bug or a broken invariant; the detail is for the log only.
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<StoreError> for ServiceError {
    fn from(error: StoreError) -> Self {
        ServiceError::Storage(error.to_string())
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
            ChangeError::Store(error) => error.into(),
        }
    }
}

/// A create's outcome: a new record, or the recorded first response to the same request.
#[derive(Debug)]
pub enum Created<T> {
    /// Created now.
    Fresh(T),
    /// A repeat of an earlier request with the same idempotency key and body.
    Replayed(RecordedResponse),
}

/// Tunables of the service.
#[derive(Debug, Clone)]
pub struct ServiceSettings {
    /// Deadline of every call to a customer actor.
    pub call_timeout: Duration,
    /// How many password hashes may run at once.
    pub password_hashers: usize,
    /// Calls that may wait on one customer's actor before more are refused.
    pub max_calls_per_customer: u32,
    /// Actor calls that may be in flight in all before more are refused.
    pub max_calls_in_flight: usize,
}

/// The application service over one catalogue and one store.
pub struct Service {
    catalogue: Arc<Catalogue>,
    registry: Registry,
    settings: ServiceSettings,
    password_work: Semaphore,
    throttles: DashMap<(WebstoreIdx, String), SignInThrottle>,
    idempotency_locks: DashMap<(WebstoreIdx, String), Arc<tokio::sync::Mutex<()>>>,
    calls_in_flight: AtomicUsize,
    /// Verified against when the customer has no password, so that every failed sign-in
    /// costs one real argon2 check.
    stand_in_hash: String,
}

/// Counts one actor call against the service-wide limit while alive.
struct Admission<'a>(&'a AtomicUsize);

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Service {
    /// A service over the customers and orders in `store`.
    pub fn new(
        catalogue: Arc<Catalogue>,
        store: Store,
        settings: ServiceSettings,
    ) -> Result<Service, ServiceError> {
        let stand_in_hash =
            hash_password("no password is set", &random_salt()?).map_err(ServiceError::Internal)?;
        Ok(Service {
            registry: Registry::open(catalogue.clone(), store)?,
            password_work: Semaphore::new(settings.password_hashers.max(1)),
            catalogue,
            settings,
            throttles: DashMap::new(),
            idempotency_locks: DashMap::new(),
            calls_in_flight: AtomicUsize::new(0),
            stand_in_hash,
        })
    }

    /// The registry (start-up and shutdown use it).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The webstore whose API key pair this is.
    pub fn authenticate(&self, key: &str, secret: &str) -> Option<Arc<Webstore>> {
        self.catalogue.authenticate(key, secret).cloned()
    }

    /// Creates a customer; exactly one of any number of concurrent creates of one email wins.
    pub async fn create_customer(
        &self,
        webstore: &Arc<Webstore>,
        body: &Map<String, Value>,
        idempotency: Option<Pending<Customer>>,
    ) -> Result<Created<Arc<Customer>>, ServiceError> {
        self.idempotently(webstore, idempotency, |pending| {
            self.insert_customer(webstore, body, pending)
        })
        .await
    }

    async fn insert_customer(
        &self,
        webstore: &Arc<Webstore>,
        body: &Map<String, Value>,
        idempotency: Option<Pending<Customer>>,
    ) -> Result<Arc<Customer>, ServiceError> {
        let mut changes = parse_customer(body, webstore, Mode::Create)
            .map_err(|errors| self.with_taken_email(webstore, body, None, errors))?;
        let email_key = changes
            .email
            .as_ref()
            .map(Email::index_key)
            .unwrap_or_default();
        if self.registry.email_owner(webstore, &email_key)?.is_some() {
            return Err(email_taken());
        }
        self.hash_new_password(&mut changes).await?;
        let (id, number) = self
            .registry
            .claim_email_for_new_customer(webstore, email_key.clone())?
            .map_err(|EmailTaken| email_taken())?;
        let customer = Customer::create(id, webstore.idx, number, changes);
        let record = idempotency.map(|pending| {
            IdempotencyWrite::rendered(&webstore.settings.id, pending, &customer, unix_now())
        });
        let stored = self.registry.create_customer(webstore, &customer, record);
        // From here the store's email index answers for the email.
        self.registry.release_claim(webstore.idx, &email_key, id);
        stored?;
        self.registry.durable().await?;
        tracing::info!(customer_id = %id, webstore = %webstore.settings.id, "customer created");
        Ok(Arc::new(customer))
    }

    /// Applies the fields present in `body` to a customer, keeping the email index exact.
    pub async fn update_customer(
        &self,
        webstore: &Arc<Webstore>,
        id: CustomerId,
        body: &Map<String, Value>,
    ) -> Result<Arc<Customer>, ServiceError> {
        // Look the customer up first: an unknown id is a 404 whatever the body says.
        self.registry
            .slot(webstore.idx, id)
            .await?
            .ok_or(ServiceError::NotFound)?;
        let mut changes = parse_customer(body, webstore, Mode::Update)
            .map_err(|errors| self.with_taken_email(webstore, body, Some(id), errors))?;
        self.hash_new_password(&mut changes).await?;
        let new_email_key = changes.email.as_ref().map(Email::index_key);
        let mut claimed = false;
        if let Some(key) = &new_email_key {
            claimed = self
                .registry
                .claim_email(webstore, key.clone(), id)?
                .map_err(|EmailTaken| email_taken())?;
        }
        let outcome = self
            .call(webstore.idx, id, |reply| {
                CustomerMsg::Update(Box::new(changes), reply)
            })
            .await;
        if let (true, Some(key)) = (claimed, &new_email_key) {
            // Whether the update was stored (its batch moved the index entry) or refused,
            // the claim has done its job. After a timeout the update may still be applied
            // later; its own batch keeps the store's index exact either way.
            self.registry.release_claim(webstore.idx, key, id);
        }
        Ok(outcome??.customer)
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
    pub async fn customer_by_email(
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
        let customers = ids
            .into_iter()
            .map(|id| self.customer(webstore, id))
            .collect::<Result<_, _>>()?;
        Ok((customers, total))
    }

    /// Signs a customer in: `Some` only for the right password. Every failure costs one
    /// argon2 check, whether or not the email belongs to a customer with a password.
    pub async fn sign_in(
        &self,
        webstore: &Webstore,
        email: &str,
        password: &str,
    ) -> Result<Option<Arc<Customer>>, ServiceError> {
        let throttle_key = (webstore.idx, fold(email));
        self.throttles
            .entry(throttle_key.clone())
            .or_default()
            .begin(Instant::now())
            .map_err(|retry_after| ServiceError::Throttled { retry_after })?;
        let outcome = self.check_password(webstore, email, password).await;
        if let Some(mut throttle) = self.throttles.get_mut(&throttle_key) {
            match &outcome {
                Ok(found) => throttle.finish(found.is_some(), Instant::now()),
                Err(_) => throttle.cancel(),
            }
        }
        outcome
    }

    async fn check_password(
        &self,
        webstore: &Webstore,
        email: &str,
        password: &str,
    ) -> Result<Option<Arc<Customer>>, ServiceError> {
        let customer = self.customer_by_email(webstore, email).await?;
        let stored = customer.as_ref().and_then(|c| c.password_hash.clone());
        let has_password = stored.is_some();
        let hash = stored.unwrap_or_else(|| self.stand_in_hash.clone());
        let password = password.to_owned();
        let matches = self
            .password_work(move || verify_password(&password, &hash))
            .await?;
        Ok(customer.filter(|_| matches && has_password))
    }

    /// Forgets throttling state that has expired; run now and then.
    pub fn prune_throttles(&self) {
        let now = Instant::now();
        self.throttles.retain(|_, throttle| !throttle.is_idle(now));
    }

    /// Creates an order for a customer of the webstore.
    pub async fn create_order(
        &self,
        webstore: &Arc<Webstore>,
        body: Map<String, Value>,
        idempotency: Option<Pending<Order>>,
    ) -> Result<Created<Arc<Order>>, ServiceError> {
        self.idempotently(webstore, idempotency, |pending| {
            self.place_order(webstore, body, pending)
        })
        .await
    }

    async fn place_order(
        &self,
        webstore: &Arc<Webstore>,
        body: Map<String, Value>,
        idempotency: Option<Pending<Order>>,
    ) -> Result<Arc<Order>, ServiceError> {
        let check = match customer_ref(&body) {
            CustomerRef::Missing => CustomerCheck::Missing,
            CustomerRef::Malformed => CustomerCheck::Unknown,
            CustomerRef::Id(id) => match self.registry.slot(webstore.idx, id).await? {
                None => CustomerCheck::Unknown,
                Some(_) => {
                    let request = Box::new(PlaceOrder { body, idempotency });
                    return Ok(self
                        .call(webstore.idx, id, |reply| {
                            CustomerMsg::PlaceOrder(request, reply)
                        })
                        .await??);
                }
            },
        };
        match validate_order(&body, webstore, check) {
            Err(errors) => Err(ServiceError::Invalid(errors)),
            Ok(_) => Err(ServiceError::Internal(
                "an order without a customer passed validation".into(),
            )),
        }
    }

    /// An order of one of the webstore's customers.
    pub async fn order(
        &self,
        webstore: &Webstore,
        id: OrderId,
    ) -> Result<Arc<Order>, ServiceError> {
        self.registry
            .order(webstore.idx, id)
            .await?
            .map(Arc::new)
            .ok_or(ServiceError::NotFound)
    }

    /// The orders of a customer given by the raw `customer_id` query parameter.
    pub async fn orders_of(
        &self,
        webstore: &Webstore,
        customer_id: Option<&str>,
    ) -> Result<Vec<Arc<Order>>, ServiceError> {
        let raw = customer_id.map(str::trim).unwrap_or_default();
        if raw.is_empty() {
            return Err(ServiceError::Invalid(FieldErrors::single(
                "customer_id",
                BLANK,
            )));
        }
        let invalid = || ServiceError::Invalid(FieldErrors::single("customer_id", INVALID));
        let id = parse_digits(raw).filter(|id| *id > 0).ok_or_else(invalid)?;
        match self
            .call(webstore.idx, CustomerId(id), CustomerMsg::ListOrders)
            .await
        {
            Err(ServiceError::NotFound) => Err(invalid()),
            other => other,
        }
    }

    /// Calls a customer's actor (activating it if needed) with the service's deadline and
    /// its limits on work in flight. `NotFound` when the webstore has no such customer.
    async fn call<T: Send + 'static>(
        &self,
        webstore: WebstoreIdx,
        id: CustomerId,
        message: impl FnOnce(RpcReplyPort<T>) -> CustomerMsg,
    ) -> Result<T, ServiceError> {
        let _admitted = self.admit()?;
        let mut message = Some(message);
        // A slot retired for passivation between lookup and entry is replaced by a fresh
        // activation; two retries are more than any real interleaving needs.
        for _ in 0..3 {
            let slot = self
                .registry
                .slot(webstore, id)
                .await?
                .ok_or(ServiceError::NotFound)?;
            match slot.enter(self.settings.max_calls_per_customer) {
                Err(Refused::Busy) => return Err(ServiceError::Busy),
                Err(Refused::Retired) => {
                    self.registry.forget(id, &slot);
                    continue;
                }
                Ok(()) => {}
            }
            let Some(message) = message.take() else {
                break;
            };
            let answer = slot
                .actor
                .call(message, Some(self.settings.call_timeout))
                .await;
            slot.leave();
            return match answer {
                Ok(CallResult::Success(answer)) => Ok(answer),
                Ok(CallResult::Timeout) => Err(ServiceError::Busy),
                Ok(CallResult::SenderError) | Err(_) => {
                    self.registry.forget(id, &slot);
                    Err(ServiceError::Internal(format!(
                        "the actor of customer {id} stopped"
                    )))
                }
            };
        }
        Err(ServiceError::Busy)
    }

    fn admit(&self) -> Result<Admission<'_>, ServiceError> {
        let before = self.calls_in_flight.fetch_add(1, Ordering::AcqRel);
        let admission = Admission(&self.calls_in_flight);
        if before >= self.settings.max_calls_in_flight {
            return Err(ServiceError::Busy);
        }
        Ok(admission)
    }

    /// Runs a create at most once per idempotency key: requests with a key wait for any
    /// earlier one with the same key, then replay its recorded response or create.
    async fn idempotently<T, F, Fut>(
        &self,
        webstore: &Webstore,
        idempotency: Option<Pending<T>>,
        create: F,
    ) -> Result<Created<Arc<T>>, ServiceError>
    where
        F: FnOnce(Option<Pending<T>>) -> Fut,
        Fut: Future<Output = Result<Arc<T>, ServiceError>>,
    {
        let Some(pending) = idempotency else {
            return create(None).await.map(Created::Fresh);
        };
        let lock_key = (webstore.idx, pending.key.as_str().to_owned());
        let lock = self
            .idempotency_locks
            .entry(lock_key.clone())
            .or_default()
            .clone();
        let outcome = {
            let _turn = lock.lock().await;
            match self
                .registry
                .store()
                .idempotency(&webstore.settings.id, pending.key.as_str())?
            {
                Some(record) if record.body_sha256 == pending.body_sha256 => {
                    Ok(Created::Replayed(RecordedResponse {
                        status: record.status,
                        location: record.location,
                        body: record.body,
                    }))
                }
                Some(_) => Err(ServiceError::Invalid(FieldErrors::single(
                    "idempotency_key",
                    KEY_REUSED,
                ))),
                None => create(Some(pending)).await.map(Created::Fresh),
            }
        };
        // Whoever finds the lock unused drops it; a later request with the key takes a new
        // one and finds the stored record.
        self.idempotency_locks.remove_if(&lock_key, |_, held| {
            Arc::ptr_eq(held, &lock) && Arc::strong_count(held) == 2
        });
        outcome
    }

    /// Runs CPU-heavy password work on a blocking thread, a bounded number at a time.
    async fn password_work<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, ServiceError> {
        let _permit = self
            .password_work
            .acquire()
            .await
            .map_err(|_| ServiceError::Internal("password hashing is shut down".into()))?;
        tokio::task::spawn_blocking(work)
            .await
            .map_err(|error| ServiceError::Internal(format!("password hashing failed: {error}")))
    }

    async fn hash_new_password(&self, changes: &mut CustomerChanges) -> Result<(), ServiceError> {
        if let Some(password) = changes.password.take() {
            let salt = random_salt()?;
            let hash = self
                .password_work(move || hash_password(&password, &salt))
                .await?
                .map_err(ServiceError::Internal)?;
            changes.password_hash = Some(hash);
        }
        Ok(())
    }

    /// Adds "has already been taken" to a failed validation when the body's email is
    /// plausible and held by another customer, so that every failing field is reported at once.
    fn with_taken_email(
        &self,
        webstore: &Webstore,
        body: &Map<String, Value>,
        me: Option<CustomerId>,
        mut errors: FieldErrors,
    ) -> ServiceError {
        if !errors.has("email") {
            let email = body.get("email").and_then(Value::as_str).map(Email::parse);
            if let Some(Ok(email)) = email {
                let holder = self.registry.email_owner(webstore, &email.index_key());
                if let Ok(Some(holder)) = holder {
                    if Some(holder) != me {
                        errors.add("email", TAKEN);
                    }
                }
            }
        }
        ServiceError::Invalid(errors)
    }
}

fn email_taken() -> ServiceError {
    ServiceError::Invalid(FieldErrors::single("email", TAKEN))
}

fn random_salt() -> Result<[u8; 16], ServiceError> {
    let mut salt = [0u8; 16];
    getrandom::getrandom(&mut salt)
        .map_err(|error| ServiceError::Internal(format!("no randomness for a salt: {error}")))?;
    Ok(salt)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Durability, Entry, SledStorage, Storage, WriteBatch};
    use std::path::Path;
    use std::sync::atomic::AtomicBool;

    /// sled, except that writes fail while `full` is set, like a full disk.
    struct FullDisk {
        inner: SledStorage,
        full: AtomicBool,
    }

    impl FullDisk {
        fn refuse(&self) -> Result<(), StoreError> {
            if self.full.load(Ordering::SeqCst) {
                return Err(StoreError::Io {
                    context: "writing to the store".into(),
                    source: std::io::Error::from_raw_os_error(28),
                });
            }
            Ok(())
        }
    }

    impl Storage for FullDisk {
        fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
            self.inner.get(key)
        }
        fn apply(&self, batch: WriteBatch) -> Result<(), StoreError> {
            self.refuse()?;
            self.inner.apply(batch)
        }
        fn put(&self, key: &[u8], value: Vec<u8>) -> Result<(), StoreError> {
            self.refuse()?;
            self.inner.put(key, value)
        }
        fn scan(&self, prefix: &[u8], skip: usize, limit: usize) -> Result<Vec<Entry>, StoreError> {
            self.inner.scan(prefix, skip, limit)
        }
        fn for_each_between(
            &self,
            from: &[u8],
            to: Option<&[u8]>,
            visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
        ) -> Result<(), StoreError> {
            self.inner.for_each_between(from, to, visit)
        }
        fn last(&self, prefix: &[u8]) -> Result<Option<Entry>, StoreError> {
            self.inner.last(prefix)
        }
        fn sync(&self) -> Result<(), StoreError> {
            self.inner.sync()
        }
    }

    fn service(dir: &Path) -> (Service, Arc<FullDisk>) {
        let disk = Arc::new(FullDisk {
            inner: SledStorage::open(dir, 1 << 20).unwrap(),
            full: AtomicBool::new(false),
        });
        let store = Store::with_storage(
            disk.clone(),
            dir,
            Durability::Sync,
            Arc::new(|_: &StoreError| {}),
        )
        .unwrap();
        let settings = ServiceSettings {
            call_timeout: Duration::from_secs(5),
            password_hashers: 1,
            max_calls_per_customer: 8,
            max_calls_in_flight: 64,
        };
        (
            Service::new(Arc::new(Catalogue::demo(0)), store, settings).unwrap(),
            disk,
        )
    }

    fn body(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    #[tokio::test]
    async fn a_full_disk_fails_the_write_and_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let (service, disk) = service(dir.path());
        let webstore = service.catalogue.webstores()[0].clone();
        let customer = body(
            serde_json::json!({"first_name": "Ann", "email": "ann@example.com",
            "delivery_service_id": 91, "address": {"address_1": "1 Road", "city": "York"}}),
        );

        disk.full.store(true, Ordering::SeqCst);
        let refused = service.create_customer(&webstore, &customer, None).await;
        assert!(
            matches!(refused, Err(ServiceError::Storage(_))),
            "{refused:?}"
        );
        assert!(service
            .customer_by_email(&webstore, "ann@example.com")
            .await
            .unwrap()
            .is_none());

        disk.full.store(false, Ordering::SeqCst);
        let Created::Fresh(ann) = service
            .create_customer(&webstore, &customer, None)
            .await
            .unwrap()
        else {
            panic!("a first create is never a replay");
        };
        disk.full.store(true, Ordering::SeqCst);
        let order = body(serde_json::json!({"customer_id": ann.id.0, "box_id": 217}));
        let refused = service.create_order(&webstore, order, None).await;
        assert!(
            matches!(refused, Err(ServiceError::Storage(_))),
            "{refused:?}"
        );
        let orders = service
            .orders_of(&webstore, Some(&ann.id.0.to_string()))
            .await
            .unwrap();
        assert!(orders.is_empty(), "a refused order must not be kept");
    }

    #[tokio::test]
    async fn reading_customers_starts_no_actors_and_orders_start_one() {
        let dir = tempfile::tempdir().unwrap();
        let (service, _) = service(dir.path());
        let webstore = service.catalogue.webstores()[0].clone();
        for n in 0..5 {
            let customer = body(
                serde_json::json!({"first_name": "Ann", "email": format!("ann{n}@example.com"),
                "delivery_service_id": 91, "address": {"address_1": "1 Road", "city": "York"}}),
            );
            service
                .create_customer(&webstore, &customer, None)
                .await
                .unwrap();
        }
        let page = Page::parse(None, None).unwrap();
        let (listed, total) = service.customers_page(&webstore, page).await.unwrap();
        assert_eq!((listed.len(), total), (5, 5));
        assert!(service
            .customer_by_email(&webstore, "ANN3@example.com")
            .await
            .unwrap()
            .is_some());
        assert_eq!(
            service.registry().active_count(),
            0,
            "reads must not activate actors"
        );

        let order = body(serde_json::json!({"customer_id": listed[0].id.0, "box_id": 217}));
        service.create_order(&webstore, order, None).await.unwrap();
        assert_eq!(service.registry().active_count(), 1);
        assert_eq!(service.registry().passivate_idle(Duration::ZERO), 1);
        assert_eq!(service.registry().active_count(), 0);
        let orders = service
            .orders_of(&webstore, Some(&listed[0].id.0.to_string()))
            .await
            .unwrap();
        assert_eq!(
            orders.len(),
            1,
            "a passivated customer comes back from the store"
        );
    }

    #[tokio::test]
    async fn a_remembered_email_that_changed_hands_is_never_answered() {
        let dir = tempfile::tempdir().unwrap();
        let (service, _) = service(dir.path());
        let webstore = service.catalogue.webstores()[0].clone();
        let create = |email: &str| {
            let fields = body(serde_json::json!({"first_name": "Ann", "email": email,
                "delivery_service_id": 91, "address": {"address_1": "1 Road", "city": "York"}}));
            let service = &service;
            let webstore = &webstore;
            async move {
                match service
                    .create_customer(webstore, &fields, None)
                    .await
                    .unwrap()
                {
                    Created::Fresh(customer) => customer,
                    Created::Replayed(_) => panic!("a create without a key is never a replay"),
                }
            }
        };
        let ann = create("x@example.com").await;
        let found = service.customer_by_email(&webstore, "X@example.com").await;
        assert_eq!(found.unwrap().map(|c| c.id), Some(ann.id));

        // Ann moves to y; the remembered x → Ann must not answer any more.
        let change = body(serde_json::json!({"email": "y@example.com"}));
        service
            .update_customer(&webstore, ann.id, &change)
            .await
            .unwrap();
        let found = service.customer_by_email(&webstore, "x@example.com").await;
        assert!(found.unwrap().is_none());
        let found = service.customer_by_email(&webstore, "y@example.com").await;
        assert_eq!(found.unwrap().map(|c| c.id), Some(ann.id));

        // x is free again, and a new customer holding it is the answer.
        let bob = create("x@example.com").await;
        let found = service.customer_by_email(&webstore, "x@example.com").await;
        assert_eq!(found.unwrap().map(|c| c.id), Some(bob.id));
        // Back to Ann's first hint after Bob moves on: still only the current holder.
        service
            .update_customer(
                &webstore,
                bob.id,
                &body(serde_json::json!({"email": "z@example.com"})),
            )
            .await
            .unwrap();
        let found = service.customer_by_email(&webstore, "x@example.com").await;
        assert!(found.unwrap().is_none());
    }
}
