//! The application service: the one entry point the HTTP layer calls. It checks requests with
//! the domain rules, keeps the registry's indexes in step with the customer actors, runs
//! password hashing on bounded blocking threads, and throttles sign-in.
//!
//! Owns `ServiceError`; the HTTP layer alone turns it into status codes. Must not touch: HTTP
//! types, or a registry guard across an `.await` (the registry's methods don't hand any out).

use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;
use futures_util::future::join_all;
use ractor::rpc::CallResult;
use ractor::{Actor, ActorRef, RpcReplyPort};
use serde_json::{Map, Value};
use tokio::sync::Semaphore;

use crate::actors::customer::{CustomerActor, CustomerArgs, CustomerMsg};
use crate::domain::catalogue::{Catalogue, Webstore, WebstoreIdx};
use crate::domain::customer::{parse_customer, Customer, CustomerChanges, Mode};
use crate::domain::email::{fold, Email};
use crate::domain::fields::{parse_digits, FieldErrors, BLANK, INVALID, TAKEN};
use crate::domain::ids::{CustomerId, OrderId};
use crate::domain::order::{customer_ref, validate_order, CustomerCheck, CustomerRef, Order};
use crate::domain::paging::Page;
use crate::domain::password::{hash_password, verify_password};
use crate::domain::throttle::SignInThrottle;
use crate::registry::{EmailTaken, Registry};

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
    /// A customer actor did not answer within the deadline.
    #[error("the customer's actor did not answer in time")]
    Busy,
    /// A bug or a broken invariant; the detail is for the log only.
    #[error("internal error: {0}")]
    Internal(String),
}

/// Tunables of the service.
#[derive(Debug, Clone)]
pub struct ServiceSettings {
    /// Deadline of every call to a customer actor.
    pub call_timeout: Duration,
    /// How many password hashes may run at once.
    pub password_hashers: usize,
}

/// The application service over one catalogue.
pub struct Service {
    catalogue: Arc<Catalogue>,
    registry: Registry,
    settings: ServiceSettings,
    password_work: Semaphore,
    throttles: DashMap<(WebstoreIdx, String), SignInThrottle>,
    /// Verified against when the customer has no password, so that every failed sign-in
    /// costs one real argon2 check.
    stand_in_hash: String,
}

impl Service {
    /// A service with no customers yet.
    pub fn new(
        catalogue: Arc<Catalogue>,
        settings: ServiceSettings,
    ) -> Result<Service, ServiceError> {
        let stand_in_hash =
            hash_password("no password is set", &random_salt()?).map_err(ServiceError::Internal)?;
        Ok(Service {
            registry: Registry::new(catalogue.webstores().len()),
            password_work: Semaphore::new(settings.password_hashers.max(1)),
            catalogue,
            settings,
            throttles: DashMap::new(),
            stand_in_hash,
        })
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
    ) -> Result<Arc<Customer>, ServiceError> {
        let mut changes = parse_customer(body, webstore, Mode::Create)
            .map_err(|errors| self.with_taken_email(webstore.idx, body, None, errors))?;
        let email_key = changes
            .email
            .as_ref()
            .map(Email::index_key)
            .unwrap_or_default();
        if self
            .registry
            .email_owner(webstore.idx, &email_key)
            .is_some()
        {
            return Err(email_taken());
        }
        self.hash_new_password(&mut changes).await?;
        let (id, number) = self
            .registry
            .claim_email_for_new_customer(webstore.idx, email_key.clone())
            .map_err(|EmailTaken| email_taken())?;
        let customer = Customer::create(id, webstore.idx, number, changes);
        let args = CustomerArgs {
            customer: customer.clone(),
            orders: Vec::new(),
            webstore: webstore.clone(),
            order_ids: self.registry.order_ids(),
        };
        match CustomerActor::spawn(None, CustomerActor, args).await {
            Ok((actor, _)) => {
                self.registry.register_customer(id, webstore.idx, actor);
                tracing::info!(customer_id = %id, webstore = %webstore.settings.id, "customer created");
                Ok(Arc::new(customer))
            }
            Err(error) => {
                self.registry.release_email(webstore.idx, &email_key, id);
                Err(ServiceError::Internal(format!(
                    "spawning a customer actor: {error}"
                )))
            }
        }
    }

    /// Applies the fields present in `body` to a customer, keeping the email index exact.
    pub async fn update_customer(
        &self,
        webstore: &Arc<Webstore>,
        id: CustomerId,
        body: &Map<String, Value>,
    ) -> Result<Arc<Customer>, ServiceError> {
        let actor = self
            .registry
            .customer(webstore.idx, id)
            .ok_or(ServiceError::NotFound)?;
        let mut changes = parse_customer(body, webstore, Mode::Update)
            .map_err(|errors| self.with_taken_email(webstore.idx, body, Some(id), errors))?;
        let new_email_key = changes.email.as_ref().map(Email::index_key);
        let mut newly_claimed = false;
        if let Some(key) = &new_email_key {
            newly_claimed = self
                .registry
                .claim_email(webstore.idx, key.clone(), id)
                .map_err(|EmailTaken| email_taken())?;
        }
        let release_claim = |service: &Service| {
            if let (true, Some(key)) = (newly_claimed, &new_email_key) {
                service.registry.release_email(webstore.idx, key, id);
            }
        };
        if let Err(error) = self.hash_new_password(&mut changes).await {
            release_claim(self);
            return Err(error);
        }
        let outcome = self
            .ask(&actor, |reply| {
                CustomerMsg::Update(Box::new(changes), reply)
            })
            .await;
        match outcome {
            Ok(Ok(updated)) => {
                let old_key = updated.previous.email.index_key();
                if new_email_key.as_ref().is_some_and(|new| *new != old_key) {
                    self.registry.release_email(webstore.idx, &old_key, id);
                }
                Ok(updated.customer)
            }
            Ok(Err(errors)) => {
                release_claim(self);
                Err(ServiceError::Invalid(errors))
            }
            // The actor may still apply the change after the deadline: keep the claim, so the
            // new email can't go to anyone else in the meantime.
            Err(error) => Err(error),
        }
    }

    /// A customer of the webstore.
    pub async fn customer(
        &self,
        webstore: &Webstore,
        id: CustomerId,
    ) -> Result<Arc<Customer>, ServiceError> {
        let actor = self
            .registry
            .customer(webstore.idx, id)
            .ok_or(ServiceError::NotFound)?;
        self.ask(&actor, CustomerMsg::Get).await
    }

    /// The webstore's customer with this email (trimmed, any case), if there is one.
    pub async fn customer_by_email(
        &self,
        webstore: &Webstore,
        email: &str,
    ) -> Result<Option<Arc<Customer>>, ServiceError> {
        let Some(id) = self.registry.email_owner(webstore.idx, &fold(email)) else {
            return Ok(None);
        };
        match self.customer(webstore, id).await {
            Ok(customer) => Ok(Some(customer)),
            // Claimed by a create that has not finished: not a customer yet.
            Err(ServiceError::NotFound) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// One page of the webstore's customers by id, and how many it has in all.
    pub async fn customers_page(
        &self,
        webstore: &Webstore,
        page: Page,
    ) -> Result<(Vec<Arc<Customer>>, u64), ServiceError> {
        let (ids, total) =
            self.registry
                .page_of_customers(webstore.idx, page.offset(), page.per_page);
        let customers = join_all(ids.into_iter().map(|id| self.customer(webstore, id))).await;
        Ok((customers.into_iter().collect::<Result<_, _>>()?, total))
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
    ) -> Result<Arc<Order>, ServiceError> {
        let check = match customer_ref(&body) {
            CustomerRef::Missing => CustomerCheck::Missing,
            CustomerRef::Malformed => CustomerCheck::Unknown,
            CustomerRef::Id(id) => match self.registry.customer(webstore.idx, id) {
                None => CustomerCheck::Unknown,
                Some(actor) => {
                    let order = self
                        .ask(&actor, |reply| CustomerMsg::PlaceOrder(body, reply))
                        .await?
                        .map_err(ServiceError::Invalid)?;
                    self.registry.record_order(order.id, id);
                    return Ok(order);
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
        let owner = self
            .registry
            .order_owner(id)
            .ok_or(ServiceError::NotFound)?;
        let actor = self
            .registry
            .customer(webstore.idx, owner)
            .ok_or(ServiceError::NotFound)?;
        self.ask(&actor, |reply| CustomerMsg::GetOrder(id, reply))
            .await?
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
        let actor = parse_digits(raw)
            .and_then(|id| self.registry.customer(webstore.idx, CustomerId(id)))
            .ok_or_else(|| ServiceError::Invalid(FieldErrors::single("customer_id", INVALID)))?;
        self.ask(&actor, CustomerMsg::ListOrders).await
    }

    /// Calls a customer actor with the service's deadline.
    async fn ask<T: Send + 'static>(
        &self,
        actor: &ActorRef<CustomerMsg>,
        message: impl FnOnce(RpcReplyPort<T>) -> CustomerMsg,
    ) -> Result<T, ServiceError> {
        match actor.call(message, Some(self.settings.call_timeout)).await {
            Ok(CallResult::Success(answer)) => Ok(answer),
            Ok(CallResult::Timeout) => Err(ServiceError::Busy),
            Ok(CallResult::SenderError) | Err(_) => Err(ServiceError::Internal(format!(
                "customer actor {} stopped",
                actor.get_id()
            ))),
        }
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
        webstore: WebstoreIdx,
        body: &Map<String, Value>,
        me: Option<CustomerId>,
        mut errors: FieldErrors,
    ) -> ServiceError {
        if !errors.has("email") {
            let email = body.get("email").and_then(Value::as_str).map(Email::parse);
            if let Some(Ok(email)) = email {
                let holder = self.registry.email_owner(webstore, &email.index_key());
                if holder.is_some() && holder != me {
                    errors.add("email", TAKEN);
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
