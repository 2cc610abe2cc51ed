//! The service's part in moving a webstore between shards, as the admin listener asks for
//! it (`boxsub move-webstore` drives the steps): what this node holds of a webstore, the
//! copy while its writes go on and the rounds of what they changed, its import into this
//! running node. The changes of what a node records of the webstore (freeze, hand-over,
//! call-off, release, take) are one state machine of their own, [`super::cut_over`]. Each
//! step is safe to repeat, so that a move can be run again after a crash of either node or
//! of the command.
//!
//! On the source:
//! - **Copy** starts tracking what the webstore's writes change, under a new session
//!   ([`crate::store::tracking`]; in memory: a restarted source forgets it, and the move
//!   copies again). Its export is then read while writes go on.
//! - **Changes** hands out what the writes changed since the last round, and forgets it.
//!
//! On the target:
//! - **Import** is refused for a webstore served here; whatever an earlier, interrupted
//!   import left is removed first. Its orders are indexed.
//! - **Apply** writes a round of changes over what it holds (not served here either).
//!
//! The events (and webhook positions) travel in the export and its rounds with their
//! sequence numbers, so a feed's cursor given out by the source goes on here. This node's
//! numbering of a webstore's events is kept in memory ([`crate::events::Events`]), read from
//! the store at first use: an import, a round and a take each forget it, so that the next
//! event here is numbered after the highest one moved, and a release forgets it as it
//! removes the events.
//!
//! Must not touch: HTTP, HAProxy, the placement file.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use super::serving::Served;
use super::{Service, ServiceError};
use crate::domain::ownership::Ownership;
use crate::transfer::{export::Exported, import::Imported, Progress};

/// What this node holds of a webstore.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct WebstoreHeld {
    /// The webstore's id.
    pub webstore: String,
    /// `here`, `frozen` or `elsewhere`.
    pub served: &'static str,
    /// What the store records: `taken`, `released`, `moving`, `handed_over`, or none.
    pub recorded: Option<&'static str>,
    /// Customers its store holds.
    pub customers: u64,
    /// Orders its store holds.
    pub orders: u64,
    /// The highest sequence number of its events its store holds or has pruned (0 for
    /// none): a copy holds every event of the original once this is as high there.
    pub last_event: u64,
    /// Its API keys (not their secrets): what a front end routes by.
    pub api_keys: Vec<String>,
    /// This node's `--id-range`: two shards with one range would give out the same ids.
    pub id_range: u16,
    /// The copy session under which its writes' changes are tracked, if one is.
    pub copy_session: Option<u64>,
}

/// Where a webstore stands on a node, as a step of a move answers.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct WebstoreState {
    /// The webstore's id.
    pub webstore: String,
    /// `here`, `frozen` or `elsewhere`.
    pub served: &'static str,
    /// What the store records: `taken`, `released`, `moving`, `handed_over`, or none.
    pub recorded: Option<&'static str>,
}

fn served_name(served: Served) -> &'static str {
    match served {
        Served::Here => "here",
        Served::Frozen | Served::HandedOver => "frozen",
        Served::Elsewhere | Served::Released => "elsewhere",
    }
}

fn recorded_name(ownership: Ownership) -> &'static str {
    match ownership {
        Ownership::Taken => "taken",
        Ownership::Released => "released",
        Ownership::Moving => "moving",
        Ownership::HandedOver => "handed_over",
    }
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

    /// Where webstore `id` stands here (served, recorded), without counting its records.
    pub fn webstore_state(&self, id: &str) -> Result<WebstoreState, ServiceError> {
        self.webstore_of(id)?;
        Ok(WebstoreState {
            webstore: id.to_owned(),
            served: served_name(self.serving.served(id)),
            recorded: self.serving.recorded(id).map(recorded_name),
        })
    }

    /// What this node holds of webstore `id` (its records counted: a read of all of them).
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
            served: served_name(self.serving.served(id)),
            recorded: self.serving.recorded(id).map(recorded_name),
            customers: customers.len() as u64,
            orders,
            last_event: store.last_event_sequence(id)?,
            api_keys,
            id_range: self.id_range.number(),
            copy_session: store.tracking().session(id),
        })
    }

    /// Starts copying webstore `id` while its writes go on: what they change is tracked from
    /// now on, under a new session (an earlier one's is forgotten). Refused unless it is
    /// served here and takes writes. The session ends on its own once unused for `idle` (no
    /// round read, no export of the webstore): its move has gone away (its command killed
    /// and never run again), and nothing else would end it.
    pub fn begin_copy(self: &Arc<Self>, id: &str, idle: Duration) -> Result<u64, ServiceError> {
        self.webstore_of(id)?;
        if self.serving.served(id) != Served::Here {
            return Err(ServiceError::Conflict(format!(
                "{id} is not served here with its writes: only a webstore that takes writes \
                 here can be copied while they go on"
            )));
        }
        let session = crate::random::nonce().max(1);
        self.registry.store().tracking().start(id, session);
        self.end_when_unused(id, session, idle);
        Ok(session)
    }

    /// Ends copy session `session` of webstore `id` once it has gone unused for `idle` (a
    /// timer of its own, which holds no strong handle on the service and ends with the
    /// session).
    fn end_when_unused(self: &Arc<Self>, id: &str, session: u64, idle: Duration) {
        let service = Arc::downgrade(self);
        let id = id.to_owned();
        tokio::spawn(async move {
            let mut wait = idle;
            loop {
                tokio::time::sleep(wait).await;
                let Some(service) = service.upgrade() else {
                    return;
                };
                let tracking = service.registry.store().tracking();
                match tracking.idle_for(&id, session) {
                    None => return,
                    Some(unused) if unused >= idle => {
                        tracking.end(&id, session);
                        tracing::warn!(
                            webstore = %id,
                            session,
                            idle_secs = idle.as_secs_f64(),
                            "a copy session went unused (its move went away): ended, and its \
                             webstore's writes are no longer tracked"
                        );
                        return;
                    }
                    Some(unused) => wait = idle - unused,
                }
            }
        });
    }

    /// Writes what webstore `id`'s writes changed since the last round of copy `session` to
    /// `out`, and forgets it (blocking: run it off the async threads).
    pub fn export_changes(
        &self,
        id: &str,
        session: u64,
        out: &mut dyn std::io::Write,
    ) -> Result<Exported, ServiceError> {
        self.webstore_of(id)?;
        let store = self.registry.store();
        let changed = store.tracking().take(id, session).ok_or_else(|| {
            ServiceError::Conflict(format!(
                "{id} has no copy session {session} here (the node restarted, or another \
                 move began): start the move again"
            ))
        })?;
        crate::transfer::export::export_changed(store, id, &changed, out)
            .map_err(|error| ServiceError::Storage(error.to_string()))
    }

    /// Writes webstore `id`'s export to `out` (blocking: run it off the async threads).
    pub fn export_webstore(
        &self,
        id: &str,
        out: &mut dyn std::io::Write,
    ) -> Result<Exported, ServiceError> {
        self.webstore_of(id)?;
        if self.serving.recorded(id) == Some(Ownership::Released) {
            return Err(ServiceError::Conflict(format!(
                "{id} was released from here"
            )));
        }
        // A copy session's move is reading it: not a session gone unused, however long.
        let store = self.registry.store();
        store.tracking().touch(id);
        let mut progress = Progress::logged();
        let exported = crate::transfer::export::export(store, Some(id), out, &mut progress)
            .map_err(|error| ServiceError::Storage(error.to_string()));
        store.tracking().touch(id);
        exported
    }

    /// Whether this node may be written a copy of webstore `id` (an import, a round of
    /// changes): not one it serves (`overwrite` says what would be lost), nor one it gave
    /// away for good.
    fn may_receive(&self, id: &str, overwrite: &str) -> Result<(), ServiceError> {
        match (self.serving.served(id), self.serving.recorded(id)) {
            (_, Some(Ownership::Released)) => Err(ServiceError::Conflict(format!(
                "{id} was released from here and is never served here again"
            ))),
            (Served::Here | Served::Frozen | Served::HandedOver, _) => Err(ServiceError::Conflict(
                format!("{id} is served here: {overwrite}"),
            )),
            (Served::Elsewhere | Served::Released, _) => Ok(()),
        }
    }

    /// Imports the export at `input` (webstore `id`'s alone) into this running node and takes
    /// its customers and orders into the registry and indexes (blocking: run it off the async
    /// threads, inside the runtime).
    pub fn import_webstore(&self, id: &str, input: &Path) -> Result<Imported, ServiceError> {
        let webstore = self.webstore_of(id)?;
        self.may_receive(id, "an import would overwrite it")?;
        let store = self.registry.store();
        // What an interrupted import left: never served, so nothing of it was acknowledged.
        store.purge_webstore(id)?;
        let runtime = tokio::runtime::Handle::current();
        let durable = |store: &crate::store::Store| runtime.block_on(store.durable());
        let mut progress = Progress::logged();
        let imported = crate::transfer::import::import_live(store, input, &mut progress, &durable);
        // Whatever the outcome, the store now holds other events of it than any numbering
        // read before.
        self.events.forget(id);
        let imported = imported.map_err(|error| ServiceError::Conflict(error.to_string()))?;
        if imported.webstores.iter().any(|other| other != id) {
            return Err(ServiceError::Conflict(format!(
                "the export holds other webstores than {id}: {}",
                imported.webstores.join(", ")
            )));
        }
        self.registry.adopt_webstore(&webstore)?;
        Ok(imported)
    }

    /// Writes a round of webstore `id`'s changes (the file at `input`, from the source's
    /// `export_changes`) over what this node holds of it, and indexes their new orders
    /// (blocking: run it off the async threads, inside the runtime). Refused for a webstore
    /// served here.
    pub fn apply_changes(&self, id: &str, input: &Path) -> Result<Imported, ServiceError> {
        let webstore = self.webstore_of(id)?;
        self.may_receive(id, "changes of a copy would overwrite it")?;
        let store = self.registry.store();
        let runtime = tokio::runtime::Handle::current();
        let durable = |store: &crate::store::Store| runtime.block_on(store.durable());
        let applied = crate::transfer::import::apply_live(store, id, input, &durable);
        self.events.forget(id);
        let (applied, customers) =
            applied.map_err(|error| ServiceError::Conflict(error.to_string()))?;
        self.registry.adopt_customers(&webstore, &customers)?;
        Ok(applied)
    }
}
