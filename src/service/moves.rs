//! The service's part in moving a webstore between shards, as the admin listener asks for
//! it (`boxsub move-webstore` drives the steps): what this node holds of a webstore, a
//! durable freeze of its writes, its export, its import into this running node, taking it,
//! releasing it. Each step is safe to repeat, so that a move can be run again after a crash
//! of either node or of the command.
//!
//! - **Freeze** records `Moving` durably before it waits for the writes under way, so a
//!   source restarted midway still refuses the webstore's writes.
//! - **Import** is refused for a webstore served here; whatever an earlier, interrupted
//!   import left is removed first. The node then takes the webstore's customers and orders
//!   into its registry and indexes.
//! - **Take** records `Taken` durably; refused for a webstore this node released.
//! - **Release** records `Released` durably, then removes everything of the webstore from
//!   the store (purged at once, not later).
//!
//! Must not touch: HTTP, HAProxy, the placement file.

use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use super::placement::Served;
use super::{Service, ServiceError};
use crate::domain::placement::Ownership;
use crate::transfer::{export::Exported, import::Imported, Progress};

/// How long a freeze waits for the writes under way.
const DRAIN_WITHIN: Duration = Duration::from_secs(10);

/// What this node holds of a webstore.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct WebstoreHeld {
    /// The webstore's id.
    pub webstore: String,
    /// `here`, `frozen` or `elsewhere`.
    pub served: &'static str,
    /// What the store records: `taken`, `released`, `moving`, or none.
    pub recorded: Option<&'static str>,
    /// Customers its store holds.
    pub customers: u64,
    /// Orders its store holds.
    pub orders: u64,
    /// Its API keys (not their secrets): what a front end routes by.
    pub api_keys: Vec<String>,
    /// This node's `--id-range`: two shards with one range would give out the same ids.
    pub id_range: u16,
}

impl Service {
    fn webstore_of(
        &self,
        id: &str,
    ) -> Result<std::sync::Arc<crate::domain::catalogue::Webstore>, ServiceError> {
        self.catalogue()
            .webstore_by_id(id)
            .cloned()
            .ok_or(ServiceError::NotFound)
    }

    /// What this node holds of webstore `id`.
    pub fn webstore_held(&self, id: &str) -> Result<WebstoreHeld, ServiceError> {
        let webstore = self.webstore_of(id)?;
        let api_keys = self
            .catalogue()
            .api_keys_of(webstore.idx)
            .into_iter()
            .map(str::to_owned)
            .collect();
        let store = self.registry.store();
        let customers = store.customer_ids(id)?;
        let mut orders = 0;
        for customer in &customers {
            orders += store.order_count(*customer)?;
        }
        Ok(WebstoreHeld {
            webstore: id.to_owned(),
            served: match self.placement.served(id) {
                Served::Here => "here",
                Served::Frozen => "frozen",
                Served::Elsewhere => "elsewhere",
            },
            recorded: self
                .placement
                .recorded(id)
                .map(|ownership| match ownership {
                    Ownership::Taken => "taken",
                    Ownership::Released => "released",
                    Ownership::Moving => "moving",
                }),
            customers: customers.len() as u64,
            orders,
            api_keys,
            id_range: self.id_range.number(),
        })
    }

    /// Freezes webstore `id`'s writes for a move, durably, and waits until the writes under
    /// way are done.
    pub async fn freeze_for_move(&self, id: &str) -> Result<(), ServiceError> {
        self.webstore_of(id)?;
        if self.placement.served(id) == Served::Elsewhere {
            return Err(ServiceError::Conflict(format!("{id} is not served here")));
        }
        if self.placement.recorded(id) != Some(Ownership::Moving) {
            self.registry
                .store()
                .set_ownership(id, Ownership::Moving)?
                .durable()
                .await?;
            self.placement.record(id, Some(Ownership::Moving));
        }
        if self.placement.freeze(id, DRAIN_WITHIN).await {
            Ok(())
        } else {
            Err(ServiceError::Busy)
        }
    }

    /// Calls a move of webstore `id` off: its writes are taken again here.
    pub async fn call_off_move(&self, id: &str) -> Result<(), ServiceError> {
        self.webstore_of(id)?;
        if self.placement.recorded(id) != Some(Ownership::Moving) {
            return Err(ServiceError::Conflict(format!("{id} is not moving")));
        }
        self.registry.store().clear_ownership(id)?.durable().await?;
        self.placement.record(id, None);
        self.placement.unfreeze(id);
        Ok(())
    }

    /// Writes webstore `id`'s export to `out` (blocking: run it off the async threads).
    pub fn export_webstore(
        &self,
        id: &str,
        out: &mut dyn std::io::Write,
    ) -> Result<Exported, ServiceError> {
        self.webstore_of(id)?;
        if self.placement.recorded(id) == Some(Ownership::Released) {
            return Err(ServiceError::Conflict(format!(
                "{id} was released from here"
            )));
        }
        let mut progress = Progress::logged();
        crate::transfer::export::export(self.registry.store(), Some(id), out, &mut progress)
            .map_err(|error| ServiceError::Storage(error.to_string()))
    }

    /// Imports the export at `input` (webstore `id`'s alone) into this running node and takes
    /// its customers and orders into the registry and indexes (blocking: run it off the async
    /// threads, inside the runtime).
    pub fn import_webstore(&self, id: &str, input: &Path) -> Result<Imported, ServiceError> {
        let webstore = self.webstore_of(id)?;
        match (self.placement.served(id), self.placement.recorded(id)) {
            (_, Some(Ownership::Released)) => {
                return Err(ServiceError::Conflict(format!(
                    "{id} was released from here and is never served here again"
                )))
            }
            (Served::Here | Served::Frozen, _) => {
                return Err(ServiceError::Conflict(format!(
                    "{id} is served here: an import would overwrite it"
                )))
            }
            (Served::Elsewhere, _) => {}
        }
        let store = self.registry.store();
        // What an interrupted import left: never served, so nothing of it was acknowledged.
        store.purge_webstore(id)?;
        let runtime = tokio::runtime::Handle::current();
        let durable = |store: &crate::store::Store| runtime.block_on(store.durable());
        let mut progress = Progress::logged();
        let imported = crate::transfer::import::import_live(store, input, &mut progress, &durable)
            .map_err(|error| ServiceError::Conflict(error.to_string()))?;
        if imported.webstores.iter().any(|other| other != id) {
            return Err(ServiceError::Conflict(format!(
                "the export holds other webstores than {id}: {}",
                imported.webstores.join(", ")
            )));
        }
        self.registry.adopt_webstore(&webstore)?;
        Ok(imported)
    }

    /// Takes webstore `id`: served here from now on, durably, whatever `--webstores` says.
    pub async fn take_webstore(&self, id: &str) -> Result<(), ServiceError> {
        self.webstore_of(id)?;
        match self.placement.recorded(id) {
            Some(Ownership::Released) => {
                return Err(ServiceError::Conflict(format!(
                    "{id} was released from here and is never served here again"
                )))
            }
            Some(Ownership::Taken) => return Ok(()),
            _ => {}
        }
        self.registry
            .store()
            .set_ownership(id, Ownership::Taken)?
            .durable()
            .await?;
        self.placement.record(id, Some(Ownership::Taken));
        self.placement.unfreeze(id);
        Ok(())
    }

    /// Releases webstore `id`: never served here again, durably; then everything of it is
    /// removed from the store. How many keys were removed.
    pub async fn release_webstore(&self, id: &str) -> Result<u64, ServiceError> {
        self.webstore_of(id)?;
        if self.placement.recorded(id) != Some(Ownership::Released) {
            self.registry
                .store()
                .set_ownership(id, Ownership::Released)?
                .durable()
                .await?;
            self.placement.record(id, Some(Ownership::Released));
        }
        let store = self.registry.store().clone();
        let id = id.to_owned();
        let removed = tokio::task::spawn_blocking(move || store.purge_webstore(&id))
            .await
            .map_err(|error| ServiceError::Internal(error.to_string()))??;
        self.registry.store().durable().await?;
        Ok(removed)
    }
}
