//! Emails of one webstore: the claims of creates and email changes in progress, and the
//! remembered answers of lookups by email. The store's index (email → customer, counted only
//! while the customer's record holds the email) is the authority at rest; the store writes
//! an email key by key, so the claim is what makes taking one a single step: while a claim is
//! held no other create or change of that email checks the store or writes, so concurrent
//! claimants get "has already been taken" at once and exactly one writes.
//!
//! A claim is an [`EmailClaim`] guard: it is released when the guard is dropped, wherever
//! the guard has travelled (into an actor's mailbox with the update that needs it, into the
//! work group commit runs once a create is durable), so a request that is cut off or times
//! out never leaves an email claimed, and never releases it while its write may still
//! happen or become durable. A create that finds the email claimed by a change still in
//! progress is told so with the claim's [`Settling`]: it may wait for that change to be
//! durable or given up and ask again, so that it never answers "taken" because of a write
//! that the store then does not hold. Must not touch: HTTP, actors, the store's writes.

use std::sync::Arc;

use dashmap::mapref::entry::Entry;
use dashmap::DashMap;
use tokio::sync::watch;

use crate::domain::ids::CustomerId;

/// Another customer of the webstore holds the email, or a change in progress is taking it.
#[derive(Debug)]
pub struct EmailTaken {
    /// Set when a change still in progress holds the email's claim: completes once that
    /// change is durable or given up, when the email may be asked for again.
    pub settling: Option<Settling>,
}

impl EmailTaken {
    fn held_in_store() -> EmailTaken {
        EmailTaken { settling: None }
    }
}

/// Completes when an email's claim is released.
#[derive(Debug)]
pub struct Settling(watch::Receiver<()>);

impl Settling {
    /// Waits until the claim is released (its change durable or given up).
    pub async fn settled(mut self) {
        // Nothing is ever sent: the wait ends when the claim's sender is dropped.
        while self.0.changed().await.is_ok() {}
    }
}

/// Who holds a claim, and how a create that finds it held learns of its release.
#[derive(Debug)]
struct Claimant {
    owner: CustomerId,
    released: watch::Receiver<()>,
}

/// An email claimed by a create or an email change in progress; released on drop.
#[derive(Debug)]
pub struct EmailClaim {
    claims: Arc<DashMap<String, Claimant>>,
    key: String,
    owner: CustomerId,
    /// Dropped with the claim, which wakes whoever waits for it ([`Settling`]).
    _release: watch::Sender<()>,
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
            .remove_if(&self.key, |_, holder| holder.owner == owner);
    }
}

/// Remembered lookups kept per webstore (about 6 MiB of them at most).
pub const MAX_HINTS: usize = 100_000;

/// The email claims and remembered lookups of one webstore.
#[derive(Default)]
pub struct WebstoreEmails {
    /// Folded emails claimed by creates and email changes still in progress.
    claims: Arc<DashMap<String, Claimant>>,
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
            Entry::Occupied(held) => Ok(Err(EmailTaken {
                settling: Some(Settling(held.get().released.clone())),
            })),
            Entry::Vacant(vacant) => {
                if stored_owner(vacant.key())?.is_some() {
                    return Ok(Err(EmailTaken::held_in_store()));
                }
                let (id, extra) = allocate();
                let key = vacant.key().clone();
                let (claim, claimant) = self.claim(key, id);
                vacant.insert(claimant);
                Ok(Ok((claim, id, extra)))
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
            Entry::Occupied(held) if held.get().owner == owner => Ok(Ok(None)),
            Entry::Occupied(held) => Ok(Err(EmailTaken {
                settling: Some(Settling(held.get().released.clone())),
            })),
            Entry::Vacant(vacant) => match stored_owner(vacant.key())? {
                Some(holder) if holder == owner => Ok(Ok(None)),
                Some(_) => Ok(Err(EmailTaken::held_in_store())),
                None => {
                    let key = vacant.key().clone();
                    let (claim, claimant) = self.claim(key, owner);
                    vacant.insert(claimant);
                    Ok(Ok(Some(claim)))
                }
            },
        }
    }

    fn claim(&self, key: String, owner: CustomerId) -> (EmailClaim, Claimant) {
        let (release, released) = watch::channel(());
        let claim = EmailClaim {
            claims: self.claims.clone(),
            key,
            owner,
            _release: release,
        };
        (claim, Claimant { owner, released })
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
        assert!(
            emails
                .claim_for("a@b.c".into(), CustomerId(2), &nobody)
                .unwrap()
                .unwrap_err()
                .settling
                .is_some(),
            "taken by a change in progress"
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

    #[tokio::test]
    async fn a_create_that_finds_a_claim_in_progress_learns_when_it_is_released() {
        let emails = WebstoreEmails::default();
        let (claim, _, ()) = emails
            .claim_new("a@b.c".into(), &nobody, || (CustomerId(1), ()))
            .unwrap()
            .unwrap();
        let taken = emails
            .claim_new("a@b.c".into(), &nobody, || (CustomerId(2), ()))
            .unwrap()
            .unwrap_err();
        let mut settled = Box::pin(taken.settling.expect("a change in progress").settled());
        assert!(
            futures_util::FutureExt::now_or_never(&mut settled).is_none(),
            "the claim is still held"
        );
        drop(claim);
        assert!(
            futures_util::FutureExt::now_or_never(&mut settled).is_some(),
            "released: the waiter may ask again"
        );
        let again = emails
            .claim_new("a@b.c".into(), &nobody, || (CustomerId(2), ()))
            .unwrap();
        assert!(again.is_ok(), "the email was never written: it is free");
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
