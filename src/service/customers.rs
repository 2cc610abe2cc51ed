//! Customer use cases: create (exactly one of any number of concurrent claimants of an email
//! wins) and update (the email index stays exact). Email claims are guards: a create hands
//! its claim (and its idempotency key's turn) to the work group commit runs once the create
//! is durable, so both are held until then; an update hands its claim to the actor with the
//! change, which keeps it until the change is durable or refused. A new customer is seen by
//! no reader before its create is durable (the registry hides it). Must not touch: HTTP
//! types.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::actors::customer::Request;
use crate::clock::unix_now;
use crate::domain::catalogue::Webstore;
use crate::domain::customer::{parse_customer, Customer, CustomerChanges, Mode};
use crate::domain::email::Email;
use crate::domain::fields::{FieldErrors, TAKEN};
use crate::domain::idempotency::{Pending, ResourceKind};
use crate::domain::ids::CustomerId;
use crate::registry::{EmailTaken, NewCustomer};
use crate::store::IdempotencyWrite;

use super::idempotency::Turn;
use super::passwords::Share;
use super::{email_taken, KeyedWrite, Service, ServiceError};

/// How often a create asks for an email that changes in progress keep claiming.
const CLAIM_ATTEMPTS: usize = 4;

impl Service {
    /// Creates a customer; exactly one of any number of concurrent creates of one email wins.
    pub async fn create_customer(
        &self,
        webstore: &Arc<Webstore>,
        body: &Map<String, Value>,
        idempotency: Option<Pending<Customer>>,
    ) -> Result<KeyedWrite<Arc<Customer>>, ServiceError> {
        self.writes_allowed()?;
        self.idempotency
            .once(
                self.registry.store(),
                webstore,
                ResourceKind::Customer,
                idempotency,
                |named, _| self.resource_exists(webstore, named),
                |keyed| async move {
                    self.insert_customer(webstore, body, keyed)
                        .await
                        .map(KeyedWrite::Made)
                },
            )
            .await
    }

    async fn insert_customer(
        &self,
        webstore: &Arc<Webstore>,
        body: &Map<String, Value>,
        keyed: Option<(Pending<Customer>, Turn)>,
    ) -> Result<Arc<Customer>, ServiceError> {
        let mut changes = parse_customer(body, webstore, Mode::Create)
            .map_err(|errors| self.with_taken_email(webstore, body, None, errors))?;
        let email_key = changes
            .email
            .as_ref()
            .map(Email::index_key)
            .unwrap_or_default();
        // Spare the password hash when the email is plainly taken (the claim below checks
        // again in any case, so without a password there is nothing to spare).
        if changes.password.is_some() && self.registry.email_owner(webstore, &email_key)?.is_some()
        {
            return Err(email_taken());
        }
        self.hash_new_password(webstore, &mut changes).await?;
        let new = self.claim_new_email(webstore, email_key).await?;
        let customer = Customer::create(new.id, webstore.idx, new.number, changes);
        let (record, turn) = match keyed {
            Some((pending, turn)) => {
                let record = IdempotencyWrite::rendered(
                    &webstore.settings.id,
                    pending,
                    &customer,
                    unix_now(),
                );
                (Some(record), Some(turn))
            }
            None => (None, None),
        };
        // The claim and the key's turn are held until the create is durable (or given up):
        // until then no other create takes the email, and no retry with the key reads a
        // record of a customer that readers cannot see yet.
        let written =
            self.registry
                .create_customer(webstore, &customer, record, new, Box::new(turn))?;
        super::write_outcome::begun();
        written.durable().await?;
        tracing::info!(customer_id = %customer.id, webstore = %webstore.settings.id, "customer created");
        Ok(Arc::new(customer))
    }

    /// Claims `email_key` for a new customer. A change still in progress that holds the
    /// email is waited for (within the request's deadline) and the email asked for again,
    /// so that a create is told "taken" only by a write the store holds durably.
    async fn claim_new_email(
        &self,
        webstore: &Arc<Webstore>,
        email_key: String,
    ) -> Result<NewCustomer, ServiceError> {
        for _ in 0..CLAIM_ATTEMPTS {
            match self
                .registry
                .claim_email_for_new_customer(webstore, email_key.clone())?
            {
                Ok(new) => return Ok(new),
                Err(EmailTaken {
                    settling: Some(settling),
                }) => settling.settled().await,
                Err(EmailTaken { settling: None }) => return Err(email_taken()),
            }
        }
        // Claimed again and again by changes in progress: it is as good as taken.
        Err(email_taken())
    }

    /// Applies the fields present in `body` to a customer, keeping the email index exact.
    pub async fn update_customer(
        &self,
        webstore: &Arc<Webstore>,
        id: CustomerId,
        body: &Map<String, Value>,
    ) -> Result<Arc<Customer>, ServiceError> {
        self.writes_allowed()?;
        // Look the customer up first: an unknown id is a 404 whatever the body says.
        self.registry
            .live_actor(webstore.idx, id)
            .await?
            .ok_or(ServiceError::NotFound)?;
        let mut changes = parse_customer(body, webstore, Mode::Update)
            .map_err(|errors| self.with_taken_email(webstore, body, Some(id), errors))?;
        self.hash_new_password(webstore, &mut changes).await?;
        let claim = match changes.email.as_ref().map(Email::index_key) {
            Some(key) => self
                .registry
                .claim_email(webstore, key, id)?
                .map_err(|_taken| email_taken())?,
            None => None,
        };
        // The claim travels with the change and is released once the actor has written it
        // (or refused it), even if this caller stops waiting first.
        let updated = self
            .calls
            .call(&self.registry, webstore.idx, id, claim, |reply| {
                Request::Update(Box::new(changes), reply)
            })
            .await??;
        Ok(updated.customer)
    }

    /// Hashes a new password in the webstore's share of the password pool.
    async fn hash_new_password(
        &self,
        webstore: &Webstore,
        changes: &mut CustomerChanges,
    ) -> Result<(), ServiceError> {
        if let Some(password) = changes.password.take() {
            let share = Share::Webstore(webstore.idx);
            changes.password_hash = Some(self.passwords.hash(share, password).await?);
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
