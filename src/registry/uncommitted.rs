//! Read committed for new customers: the ids of customers whose create is written into the
//! store and not yet durable (the log has not synced it, or the group's changelog has not
//! acknowledged it). The store shows a write to its readers at once, so the registry hides
//! these ids from every reader (a read by id, by email, a listing, an email's owner, an
//! actor's activation) until group commit says the create is durable. A create that is
//! never made durable (its node gives it up and steps down, or stops) stays hidden for as
//! long as the process lives: no reader ever sees its id or its email.
//!
//! An id is hidden from its allocation, by a [`Hidden`] guard that reveals nothing when
//! dropped: [`Hidden::reveal`] is called by the work group commit runs once the create is
//! durable, and [`Uncommitted::unwritten`] for a create refused before anything of it was
//! written.
//!
//! Must not touch: the store, emails, listings (the registry composes them).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use dashmap::DashSet;

use crate::domain::ids::CustomerId;

/// The customers whose create is not durable yet.
#[derive(Default)]
pub struct Uncommitted {
    ids: DashSet<CustomerId>,
    /// How many ids are hidden: a read checks the set only when some are.
    count: AtomicUsize,
}

impl Uncommitted {
    /// Hides `id` until the returned guard says otherwise.
    pub fn hide(self: &Arc<Self>, id: CustomerId) -> Hidden {
        if self.ids.insert(id) {
            self.count.fetch_add(1, Ordering::AcqRel);
        }
        Hidden {
            set: self.clone(),
            id,
        }
    }

    /// Whether `id` is a customer whose create is not durable (or was given up).
    pub fn hides(&self, id: CustomerId) -> bool {
        self.count.load(Ordering::Acquire) != 0 && self.ids.contains(&id)
    }

    /// Shows `id` again: its create was refused before anything of it was written (a full
    /// disk, a store closing), so there is nothing to hide.
    pub fn unwritten(&self, id: CustomerId) {
        self.show(id);
    }

    fn show(&self, id: CustomerId) {
        if self.ids.remove(&id).is_some() {
            self.count.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// How many ids are hidden (tests and diagnostics).
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    /// Whether no id is hidden.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A new customer's id, hidden from readers. Dropped, it keeps the id hidden: whatever was
/// written of a create that did not become durable stays unseen.
pub struct Hidden {
    set: Arc<Uncommitted>,
    id: CustomerId,
}

impl Hidden {
    /// The create is durable: readers see the customer from now on.
    pub fn reveal(self) {
        self.set.show(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_hidden_until_revealed_and_for_good_when_given_up() {
        let set = Arc::new(Uncommitted::default());
        assert!(!set.hides(CustomerId(1)));
        let durable = set.hide(CustomerId(1));
        let given_up = set.hide(CustomerId(2));
        let refused = set.hide(CustomerId(3));
        drop(refused);
        assert!(set.hides(CustomerId(1)) && set.hides(CustomerId(2)) && set.hides(CustomerId(3)));
        durable.reveal();
        set.unwritten(CustomerId(3));
        drop(given_up);
        assert!(!set.hides(CustomerId(1)));
        assert!(!set.hides(CustomerId(3)));
        assert!(
            set.hides(CustomerId(2)),
            "a create never made durable stays unseen"
        );
        assert_eq!(set.len(), 1);
    }
}
