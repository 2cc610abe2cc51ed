//! Emails of one webstore: the claims of creates and email changes in progress, and the
//! remembered answers of lookups by email. The store's index (email → customer, counted only
//! while the customer's record holds the email) is the authority at rest; the store writes
//! an email key by key, so the claim is what makes taking one a single step: while a claim is
//! held no other create or change of that email checks the store or writes, so concurrent
//! claimants get "has already been taken" at once and exactly one writes.
//!
//! A claim is an [`EmailClaim`] guard: it is released when the guard is dropped, wherever
//! the guard has travelled (into an actor's mailbox with the update that needs it), so a
//! request that is cut off or times out never leaves an email claimed, and never releases it
//! while its write may still happen. Must not touch: HTTP, actors, the store's writes.

use std::sync::Arc;

use dashmap::mapref::entry::Entry;
use dashmap::DashMap;

use crate::domain::ids::CustomerId;

/// Another customer of the webstore holds (or is taking) the email.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmailTaken;

/// An email claimed by a create or an email change in progress; released on drop.
#[derive(Debug)]
pub struct EmailClaim {
    claims: Arc<DashMap<String, CustomerId>>,
    key: String,
    owner: CustomerId,
}

impl EmailClaim {
    /// The folded email claimed.
    pub fn email_key(&self) -> &str {
        &self.key
    }
}

impl Drop for EmailClaim {
    fn drop(&mut self) {
        let owner = self.owner;
        self.claims
            .remove_if(&self.key, |_, holder| *holder == owner);
    }
}

/// Remembered lookups kept per webstore (about 6 MiB of them at most).
pub const MAX_HINTS: usize = 100_000;

/// The email claims and remembered lookups of one webstore.
#[derive(Default)]
pub struct WebstoreEmails {
    /// Folded emails claimed by creates and email changes still in progress.
    claims: Arc<DashMap<String, CustomerId>>,
    /// Folded email → customer, remembered from earlier lookups so that a repeated lookup
    /// skips the store's index. Only a hint: every answer is checked against the customer's
    /// current email, so a stale entry costs one store read, never a wrong answer.
    hints: DashMap<String, CustomerId>,
}

/// What the claim functions ask of the store: who holds an email there.
pub type StoredOwner<'a, E> = &'a dyn Fn(&str) -> Result<Option<CustomerId>, E>;

impl WebstoreEmails {
    /// Claims a free email for a customer about to be created, whose id `allocate` gives
    /// once the email is known to be free. The claim and the store check are one step under
    /// the claim map's entry lock.
    pub fn claim_new<E, T>(
        &self,
        email_key: String,
        stored_owner: StoredOwner<'_, E>,
        allocate: impl FnOnce() -> (CustomerId, T),
    ) -> Result<Result<(EmailClaim, CustomerId, T), EmailTaken>, E> {
        match self.claims.entry(email_key) {
            Entry::Occupied(_) => Ok(Err(EmailTaken)),
            Entry::Vacant(vacant) => {
                if stored_owner(vacant.key())?.is_some() {
                    return Ok(Err(EmailTaken));
                }
                let (id, extra) = allocate();
                let key = vacant.key().clone();
                vacant.insert(id);
                Ok(Ok((self.claim(key, id), id, extra)))
            }
        }
    }

    /// Claims an email for an existing customer's change: `Some` when claimed now, `None` when
    /// the customer already holds it (in the store or by a claim of its own).
    pub fn claim_for<E>(
        &self,
        email_key: String,
        owner: CustomerId,
        stored_owner: StoredOwner<'_, E>,
    ) -> Result<Result<Option<EmailClaim>, EmailTaken>, E> {
        match self.claims.entry(email_key) {
            Entry::Occupied(held) if *held.get() == owner => Ok(Ok(None)),
            Entry::Occupied(_) => Ok(Err(EmailTaken)),
            Entry::Vacant(vacant) => match stored_owner(vacant.key())? {
                Some(holder) if holder == owner => Ok(Ok(None)),
                Some(_) => Ok(Err(EmailTaken)),
                None => {
                    let key = vacant.key().clone();
                    vacant.insert(owner);
                    Ok(Ok(Some(self.claim(key, owner))))
                }
            },
        }
    }

    fn claim(&self, key: String, owner: CustomerId) -> EmailClaim {
        EmailClaim {
            claims: self.claims.clone(),
            key,
            owner,
        }
    }

    /// Claims in progress (for tests and diagnostics).
    pub fn claims_held(&self) -> usize {
        self.claims.len()
    }

    /// The customer a lookup of `email_key` found last time, if remembered.
    pub fn hint(&self, email_key: &str) -> Option<CustomerId> {
        self.hints.get(email_key).map(|hint| *hint)
    }

    /// Remembers that `email_key` led to `id`. Past [`MAX_HINTS`] the hints start over:
    /// they only spare a store read, so forgetting them all is the cheapest bound.
    pub fn remember(&self, email_key: &str, id: CustomerId) {
        if self.hints.len() >= MAX_HINTS {
            self.hints.clear();
        }
        self.hints.insert(email_key.to_owned(), id);
    }

    /// Forgets a hint that no longer holds.
    pub fn forget_hint(&self, email_key: &str, id: CustomerId) {
        self.hints.remove_if(email_key, |_, hinted| *hinted == id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nobody(_: &str) -> Result<Option<CustomerId>, ()> {
        Ok(None)
    }

    #[test]
    fn a_claim_is_exclusive_until_its_guard_is_dropped() {
        let emails = WebstoreEmails::default();
        let (claim, id, ()) = emails
            .claim_new("a@b.c".into(), &nobody, || (CustomerId(1), ()))
            .unwrap()
            .unwrap();
        assert_eq!(id, CustomerId(1));
        assert_eq!(
            emails
                .claim_for("a@b.c".into(), CustomerId(2), &nobody)
                .unwrap()
                .unwrap_err(),
            EmailTaken
        );
        assert!(
            emails
                .claim_for("a@b.c".into(), CustomerId(1), &nobody)
                .unwrap()
                .unwrap()
                .is_none(),
            "the holder's own second change needs no second claim"
        );
        drop(claim);
        assert_eq!(emails.claims_held(), 0);
        let again = emails
            .claim_for("a@b.c".into(), CustomerId(2), &nobody)
            .unwrap()
            .unwrap();
        assert!(again.is_some());
    }

    #[test]
    fn an_email_held_in_the_store_is_never_claimed_by_another() {
        let emails = WebstoreEmails::default();
        let stored = |_: &str| Ok::<_, ()>(Some(CustomerId(7)));
        assert!(emails
            .claim_new("a@b.c".into(), &stored, || (CustomerId(8), ()))
            .unwrap()
            .is_err());
        assert!(emails
            .claim_for("a@b.c".into(), CustomerId(8), &stored)
            .unwrap()
            .is_err());
        assert!(emails
            .claim_for("a@b.c".into(), CustomerId(7), &stored)
            .unwrap()
            .unwrap()
            .is_none());
        assert_eq!(emails.claims_held(), 0);
    }
}
