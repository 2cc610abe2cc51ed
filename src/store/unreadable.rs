//! The records the store could not read back (a store written by a bug, a disk fault): the
//! first [`KEPT`] distinct ones each named once in the log, counted
//! (`boxsub_unreadable_records`) and kept by key for `GET /health`, so that one damaged record
//! is loud and harms only itself: the feed, the webhooks, the retention sweep and the delivery
//! lists pass over it, never stop at it; the customer it belongs to answers 503;
//! `--verify-store` and an export refuse the store, naming it.
//!
//! Must not touch: the records themselves, HTTP.

use std::collections::BTreeSet;
use std::sync::Mutex;

use super::error::StoreError;
use crate::metrics::METRICS;

/// Keys kept for `/health`, at most.
pub const KEPT: usize = 64;

/// The unreadable records found since the start.
#[derive(Default)]
pub struct UnreadableRecords {
    keys: Mutex<BTreeSet<String>>,
}

impl UnreadableRecords {
    /// Notes `error` if it is a record that did not decode (a first sighting is logged and
    /// counted); passes it on either way.
    pub fn note(&self, error: StoreError) -> StoreError {
        if let StoreError::Corrupt { key, source } = &error {
            let mut keys = self
                .keys
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if keys.len() < KEPT && keys.insert(key.clone()) {
                METRICS.unreadable_records.inc();
                tracing::error!(
                    key = %key,
                    %source,
                    "a stored record cannot be read: it is passed over where it can be and \
                     named by /health; restore it from a backup"
                );
            }
        }
        error
    }

    /// The keys noted, in order.
    pub fn keys(&self) -> Vec<String> {
        self.keys
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .iter()
            .cloned()
            .collect()
    }
}
