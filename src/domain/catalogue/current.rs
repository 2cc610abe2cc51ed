//! The catalogue in force: one [`Catalogue`] behind an `ArcSwap`, read without a lock and
//! replaced whole when the operator reloads it.
//!
//! Must not touch: parsing or checking a catalogue (the caller hands it a built one).

use std::sync::Arc;

use arc_swap::ArcSwap;

use super::{Catalogue, Webstore, WebstoreIdx};

/// The catalogue in force, replaced whole when the operator reloads it. Readers take the
/// current one without a lock; a request keeps the webstore it authenticated against.
pub struct CurrentCatalogue(ArcSwap<Catalogue>);

impl CurrentCatalogue {
    /// The first catalogue.
    pub fn new(catalogue: Catalogue) -> CurrentCatalogue {
        CurrentCatalogue(ArcSwap::from_pointee(catalogue))
    }

    /// The catalogue in force now.
    pub fn get(&self) -> Arc<Catalogue> {
        self.0.load_full()
    }

    /// The webstore whose key pair this is, in the catalogue in force.
    pub fn authenticate(&self, key: &str, secret: &str) -> Option<Arc<Webstore>> {
        self.0.load().authenticate(key, secret).cloned()
    }

    /// The webstore at `idx` in the catalogue in force.
    pub fn webstore(&self, idx: WebstoreIdx) -> Option<Arc<Webstore>> {
        self.0.load().webstore(idx).cloned()
    }

    /// The webstore with this id in the catalogue in force.
    pub fn webstore_by_id(&self, id: &str) -> Option<Arc<Webstore>> {
        self.0.load().webstore_by_id(id).cloned()
    }

    /// Puts `catalogue` in force.
    pub fn replace(&self, catalogue: Catalogue) {
        self.0.store(Arc::new(catalogue));
    }
}
