//! This process's place in its deployment, as the HTTP layer sees it: the service it serves
//! (none while it is a standby) and what `GET /health` says. A single node serves its
//! service from start to stop; a node of a replicated group (`crate::replication`) is a
//! standby until it takes the primary's place, and again after it steps down. The service
//! is swapped in and out whole, so a request is served by the node's service of the moment
//! it arrived, or answered 503 by the HTTP layer when there is none.
//!
//! A group's primary serves only while it holds its **read lease** ([`crate::lease`]):
//! replication extends it each time the changelog acknowledges a message, up to a moment
//! before any standby may take over (the argument is in `crate::replication`), and ends it
//! the moment the node is deposed or gives up a write. Once it lapses, [`Node::service`]
//! answers `None` (the HTTP layer says 503) until the next acknowledgement (after an end:
//! the next takeover), so that a primary cut off from its group never answers from a state
//! the group may already have left behind. A single node holds a lease for ever.
//!
//! Must not touch: how a role is won or lost (replication), what the service does.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwapOption;
use serde::Serialize;

use crate::lease::Lease;
use crate::metrics::METRICS;
use crate::service::Service;

/// What the node is doing, as `/health` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// A single node, serving (no group).
    Standalone,
    /// The group's primary, serving.
    Serving,
    /// Connecting to the group's changelog.
    Connecting,
    /// Loading a replica snapshot (an empty or rebuilt copy).
    Loading,
    /// Applying the changelog, behind its end.
    CatchingUp,
    /// A standby, applying the changelog as it grows.
    Following,
    /// The group's primary, waiting for the changelog to acknowledge (a NATS server lost,
    /// the stream electing a leader, the network cut), or whose read lease has lapsed: it
    /// takes no new requests until the changelog acknowledges again, or steps down.
    Stalled,
    /// A primary that learnt another node took its place: it acknowledges nothing more and
    /// is rebuilding its copy to follow again.
    Deposed,
    /// Shutting down.
    Stopping,
}

/// Every state, in the enum's order (a state is stored as its index).
const STATES: [State; 9] = [
    State::Standalone,
    State::Serving,
    State::Connecting,
    State::Loading,
    State::CatchingUp,
    State::Following,
    State::Stalled,
    State::Deposed,
    State::Stopping,
];

/// The node's role: whether it takes writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// It serves the API.
    Primary,
    /// It follows the group and answers the API with 503.
    Standby,
}

/// What `GET /health` answers.
#[derive(Debug, Clone, Serialize)]
pub struct Health {
    /// Primary or standby.
    pub role: Role,
    /// The node's name (`--node-name`), empty for a single node.
    pub node: String,
    /// What it is doing.
    pub state: State,
    /// In a group: the sequence number of the last changelog message applied (a primary:
    /// published).
    pub applied: u64,
    /// In a group: how many changelog messages it has yet to apply (at its last look).
    pub lag: u64,
    /// The keys of the stored records found unreadable since the start (left out when none):
    /// each passed over where it can be, and to be restored from a backup.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unreadable_records: Vec<String>,
}

impl Health {
    /// Whether the node takes requests (`/health` answers 200): a primary that is not
    /// stalled.
    pub fn is_serving(&self) -> bool {
        self.role == Role::Primary && self.state != State::Stalled
    }
}

/// The node: its service of the moment, its read lease and its state.
pub struct Node {
    name: String,
    service: ArcSwapOption<Service>,
    /// Until when the node may answer as the primary.
    lease: Arc<Lease>,
    state: AtomicU8,
    applied: AtomicU64,
    lag: AtomicU64,
}

impl Node {
    /// A single node serving `service` from the start.
    pub fn standalone(service: Arc<Service>) -> Node {
        METRICS.group_serving.set(1);
        Node {
            name: String::new(),
            service: ArcSwapOption::from(Some(service)),
            lease: Arc::new(Lease::for_ever()),
            state: AtomicU8::new(State::Standalone as u8),
            applied: AtomicU64::new(0),
            lag: AtomicU64::new(0),
        }
    }

    /// A node of a replicated group named `name`, a standby until it takes over.
    pub fn in_group(name: &str) -> Node {
        Node {
            name: name.to_owned(),
            service: ArcSwapOption::empty(),
            lease: Arc::new(Lease::none()),
            state: AtomicU8::new(State::Connecting as u8),
            applied: AtomicU64::new(0),
            lag: AtomicU64::new(0),
        }
    }

    /// The service requests go to: none while the node does not take them, or while its
    /// read lease has lapsed.
    pub fn service(&self) -> Option<Arc<Service>> {
        if !self.leased() {
            return None;
        }
        self.service.load_full()
    }

    /// The service the node runs, lease or not (its own background work: backups, reloads).
    pub fn running_service(&self) -> Option<Arc<Service>> {
        self.service.load_full()
    }

    /// Whether the node holds its read lease now: a single node always; a group's primary
    /// from its takeover until the moment replication last extended it to, unless it was
    /// ended.
    pub fn leased(&self) -> bool {
        self.lease.held()
    }

    /// The read lease itself, for what lets things out beside the HTTP layer (webhook
    /// deliveries) and for replication, which takes, extends and ends it.
    pub fn lease(&self) -> &Arc<Lease> {
        &self.lease
    }

    /// Extends the read lease to `until` (never shortens it, and brings back no lease that
    /// was ended).
    pub fn extend_lease(&self, until: Instant) {
        self.lease.extend(until);
    }

    /// Starts serving `service` as the group's primary (within the read lease it took).
    pub fn serve(&self, service: Arc<Service>) {
        self.service.store(Some(service));
        self.set_state(State::Serving);
    }

    /// Stops serving (requests from now on get 503) and ends the read lease, returning the
    /// service that served, and says why.
    pub fn withdraw(&self, state: State) -> Option<Arc<Service>> {
        self.lease.end();
        let service = self.service.swap(None);
        self.set_state(state);
        service
    }

    /// Records what the node is doing.
    pub fn set_state(&self, state: State) {
        self.state.store(state as u8, Ordering::Relaxed);
        self.count_serving();
    }

    /// Sets `boxsub_group_serving` to what `/health` says now (at each change of state, and
    /// when the metrics are read, since a lease lapses without a change of state).
    pub fn count_serving(&self) {
        METRICS
            .group_serving
            .set(i64::from(self.health().is_serving()));
    }

    /// Records that the primary's changelog stalls (or no longer does).
    pub fn set_stalled(&self, stalled: bool) {
        let (from, to) = if stalled {
            (State::Serving, State::Stalled)
        } else {
            (State::Stalled, State::Serving)
        };
        let _ =
            self.state
                .compare_exchange(from as u8, to as u8, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// Records how far the node has applied the changelog, and how far behind its end it is.
    pub fn set_progress(&self, applied: u64, lag: u64) {
        self.applied.store(applied, Ordering::Relaxed);
        self.lag.store(lag, Ordering::Relaxed);
        METRICS
            .changelog_applied
            .set(i64::try_from(applied).unwrap_or(i64::MAX));
        METRICS
            .changelog_lag
            .set(i64::try_from(lag).unwrap_or(i64::MAX));
    }

    /// What the node is doing.
    pub fn state(&self) -> State {
        STATES
            .get(usize::from(self.state.load(Ordering::Relaxed)))
            .copied()
            .unwrap_or(State::Stopping)
    }

    /// What `GET /health` answers: a primary whose read lease has lapsed says it is stalled.
    pub fn health(&self) -> Health {
        let mut state = self.state();
        if state == State::Serving && !self.leased() {
            state = State::Stalled;
        }
        let serving =
            matches!(state, State::Standalone | State::Serving) && self.service.load().is_some();
        Health {
            role: if serving {
                Role::Primary
            } else {
                Role::Standby
            },
            node: self.name.clone(),
            state,
            applied: self.applied.load(Ordering::Relaxed),
            lag: self.lag.load(Ordering::Relaxed),
            unreadable_records: self
                .service
                .load()
                .as_ref()
                .map(|service| service.registry().store().unreadable().keys())
                .unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_is_read_back_as_stored() {
        let node = Node::in_group("a");
        for (index, state) in STATES.into_iter().enumerate() {
            assert_eq!(state as usize, index);
            node.set_state(state);
            assert_eq!(node.state(), state);
            assert_eq!(
                node.health().role,
                Role::Standby,
                "no service: never primary"
            );
        }
    }

    #[test]
    fn a_stall_is_only_a_serving_primary_s() {
        let node = Node::in_group("a");
        node.set_state(State::Following);
        node.set_stalled(true);
        assert_eq!(node.state(), State::Following);
        node.set_state(State::Serving);
        node.set_stalled(true);
        assert_eq!(node.state(), State::Stalled);
        node.set_stalled(false);
        assert_eq!(node.state(), State::Serving);
    }

    #[test]
    fn a_stalled_primary_is_a_primary_that_takes_no_requests() {
        let node = Node::in_group("a");
        node.set_state(State::Stalled);
        let health = node.health();
        assert_eq!(health.role, Role::Standby, "no service yet");
        assert!(!health.is_serving());
    }

    #[test]
    fn a_group_node_holds_its_lease_from_its_takeover_until_it_stops_serving() {
        let node = Node::in_group("a");
        assert!(!node.leased(), "no lease before the takeover");
        node.lease()
            .take(Instant::now() + std::time::Duration::from_secs(60));
        assert!(node.leased());
        node.withdraw(State::Deposed);
        assert!(
            !node.leased(),
            "a node that stops serving gives its lease up"
        );
        node.extend_lease(Instant::now() + std::time::Duration::from_secs(60));
        assert!(
            !node.leased(),
            "a late acknowledgement brings back no lease"
        );
    }

    #[test]
    fn a_serving_primary_whose_lease_lapsed_reports_itself_stalled() {
        let node = Node::in_group("a");
        node.set_state(State::Serving);
        assert_eq!(node.health().state, State::Stalled, "no lease yet");
        node.lease()
            .take(Instant::now() + std::time::Duration::from_secs(60));
        assert_eq!(node.health().state, State::Serving);
    }
}
