//! Which webstores this node serves, and the gate every write of a webstore passes: the
//! node's `--webstores` and its store's ownership records decide what it serves
//! ([`crate::domain::ownership::serves`]); a webstore being moved to another shard is
//! frozen (its writes refused while reads go on) until the move releases it.
//!
//! A write holds a [`WriteTicket`] for as long as it runs, and a freeze waits until none is
//! held: once [`Serving::freeze`] returns, every write of the webstore that was admitted
//! has finished, and no other will be, so an export then holds all of them. The ticket is
//! counted before the frozen flag is read, and the freeze sets the flag before it reads the
//! count (both sequentially consistent), so no write slips between them. The ticket is given
//! back by its `Drop`, wherever its request's future is dropped.
//!
//! Must not touch: HTTP (the front end turns a refusal into 421 or 503: 421 only for a
//! webstore this node never moved away), the store's records
//! (read at start, written by the service's owner of a move).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;

use crate::domain::ownership::{serves, Ownership};

/// Where a webstore stands on this node: whether its requests may go on here, and if not,
/// why not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// Served here.
    Here,
    /// Served here, but its writes are frozen (it is moving to another shard): its reads go
    /// on.
    Frozen,
    /// Handed over to the shard it is moving to, which may have taken it: nothing of it is
    /// answered here any more, until the move releases it.
    HandedOver,
    /// Released to the shard it moved to: never served here again. A request for it that
    /// reaches this node was routed here before the front end switched.
    Released,
    /// Not served here, and never moved away from here: another shard has it.
    Elsewhere,
}

/// Why a write of a webstore is not taken here ([`Serving::begin_write`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotWritable {
    /// Its writes are frozen: it is moving to another shard.
    Frozen,
    /// It moved away from here (handed over or released): the front end sends the request
    /// again to where it moved.
    MovedAway,
    /// Another shard has it, and it never moved away from here.
    Elsewhere,
}

impl Served {
    /// Whether it moved away from this node (handed over or released): a request for it
    /// was routed before the switch, and is answered where it moved once sent again.
    pub fn moved_away(self) -> bool {
        matches!(self, Served::HandedOver | Served::Released)
    }
}

/// One served webstore's write gate.
#[derive(Debug, Default)]
struct Gate {
    frozen: AtomicBool,
    writes: AtomicUsize,
}

/// The webstores this node serves.
#[derive(Debug)]
pub struct Serving {
    /// `--webstores`, or `None` for every webstore of the catalogue.
    named: Option<Vec<String>>,
    /// What the store records, by webstore id.
    recorded: DashMap<String, Ownership>,
    /// The write gates of webstores served here, made on first use.
    gates: DashMap<String, Arc<Gate>>,
}

/// A write of one webstore, under way: a freeze waits for it. Given back on drop.
#[must_use = "the write is admitted only while the ticket is held"]
pub struct WriteTicket(Arc<Gate>);

impl Drop for WriteTicket {
    fn drop(&mut self) {
        self.0.writes.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Serving {
    /// What a node started with `named` (`--webstores`), whose store records
    /// `recorded`.
    pub fn new(named: Option<Vec<String>>, recorded: Vec<(String, Ownership)>) -> Serving {
        Serving {
            named,
            recorded: recorded.into_iter().collect(),
            gates: DashMap::new(),
        }
    }

    /// Whether webstore `id` is served here.
    pub fn served(&self, id: &str) -> Served {
        match self.owned(id) {
            Served::Here => match self.gates.get(id) {
                Some(gate) if gate.frozen.load(Ordering::SeqCst) => Served::Frozen,
                _ => Served::Here,
            },
            refused => refused,
        }
    }

    /// Where webstore `id` stands as its records and `--webstores` say (a durable freeze
    /// included; the in-memory freeze is its write gate's, which [`Serving::served`] reads
    /// too): what a request asks first.
    pub fn owned(&self, id: &str) -> Served {
        let recorded = self.recorded(id);
        match recorded {
            Some(Ownership::Released) => Served::Released,
            Some(Ownership::HandedOver) => Served::HandedOver,
            Some(Ownership::Moving) => Served::Frozen,
            _ if serves(self.named.as_deref(), recorded, id) => Served::Here,
            _ => Served::Elsewhere,
        }
    }

    /// Whether webstore `id`'s data is held here for reads (also while it is frozen, or
    /// handed over and not yet released).
    pub fn serves(&self, id: &str) -> bool {
        matches!(
            self.owned(id),
            Served::Here | Served::Frozen | Served::HandedOver
        )
    }

    /// Admits a write of webstore `id`, or says why not.
    pub fn begin_write(&self, id: &str) -> Result<WriteTicket, NotWritable> {
        match self.owned(id) {
            Served::Here => {}
            Served::Frozen => return Err(NotWritable::Frozen),
            Served::HandedOver | Served::Released => return Err(NotWritable::MovedAway),
            Served::Elsewhere => return Err(NotWritable::Elsewhere),
        }
        let gate = self.gate(id);
        // Counted first, then the flag read: see the module.
        gate.writes.fetch_add(1, Ordering::SeqCst);
        let ticket = WriteTicket(gate);
        if ticket.0.frozen.load(Ordering::SeqCst) {
            return Err(NotWritable::Frozen);
        }
        Ok(ticket)
    }

    fn gate(&self, id: &str) -> Arc<Gate> {
        if let Some(gate) = self.gates.get(id) {
            return gate.clone();
        }
        self.gates.entry(id.to_owned()).or_default().clone()
    }

    /// Freezes webstore `id`'s writes and waits, at most `within`, until the writes under
    /// way have finished; whether they have (the webstore stays frozen either way).
    pub async fn freeze(&self, id: &str, within: Duration) -> bool {
        let gate = self.gate(id);
        gate.frozen.store(true, Ordering::SeqCst);
        self.drained(&gate, within).await
    }

    /// Waits, at most `within`, until no write of `gate`'s webstore is under way.
    async fn drained(&self, gate: &Gate, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while gate.writes.load(Ordering::SeqCst) > 0 {
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        true
    }

    /// Lets webstore `id`'s writes in again.
    pub fn unfreeze(&self, id: &str) {
        self.gate(id).frozen.store(false, Ordering::SeqCst);
    }

    /// Records (in memory; the caller made it durable) what this shard holds of `id`; `None`
    /// forgets the record (a move called off).
    pub fn record(&self, id: &str, ownership: Option<Ownership>) {
        match ownership {
            Some(ownership) => {
                self.recorded.insert(id.to_owned(), ownership);
            }
            None => {
                self.recorded.remove(id);
            }
        }
    }

    /// What the store records of `id`.
    pub fn recorded(&self, id: &str) -> Option<Ownership> {
        self.recorded.get(id).map(|entry| *entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(ids: &[&str]) -> Option<Vec<String>> {
        Some(ids.iter().map(|id| id.to_string()).collect())
    }

    #[test]
    fn only_named_or_taken_webstores_are_served_and_released_ones_never() {
        let serving = Serving::new(
            named(&["a", "b"]),
            vec![
                ("b".into(), Ownership::Released),
                ("c".into(), Ownership::Taken),
            ],
        );
        assert_eq!(serving.served("a"), Served::Here);
        assert_eq!(serving.served("b"), Served::Released);
        assert_eq!(serving.served("c"), Served::Here);
        assert_eq!(serving.served("d"), Served::Elsewhere);
        assert!(matches!(
            serving.begin_write("b"),
            Err(NotWritable::MovedAway)
        ));
        assert!(matches!(
            serving.begin_write("d"),
            Err(NotWritable::Elsewhere)
        ));
        let served: Vec<&str> = ["a", "b", "c", "d"]
            .into_iter()
            .filter(|id| serving.serves(id))
            .collect();
        assert_eq!(served, ["a", "c"]);
    }

    #[test]
    fn a_webstore_moving_away_is_frozen_then_moved_away_and_never_elsewhere() {
        let serving = Serving::new(named(&["a"]), Vec::new());
        let stands = |serving: &Serving| (serving.served("a"), serving.serves("a"));
        serving.record("a", Some(Ownership::Moving));
        assert_eq!(
            stands(&serving),
            (Served::Frozen, true),
            "read while frozen"
        );
        serving.record("a", Some(Ownership::HandedOver));
        assert_eq!(stands(&serving), (Served::HandedOver, true));
        serving.record("a", Some(Ownership::Released));
        assert_eq!(stands(&serving), (Served::Released, false));
        for moved_away in [Served::HandedOver, Served::Released] {
            assert!(moved_away.moved_away());
        }
        for stays in [Served::Here, Served::Frozen, Served::Elsewhere] {
            assert!(!stays.moved_away());
        }
        assert!(matches!(
            serving.begin_write("a"),
            Err(NotWritable::MovedAway)
        ));
    }

    #[tokio::test]
    async fn a_freeze_waits_for_the_writes_under_way_and_refuses_new_ones() {
        let serving = Arc::new(Serving::new(None, Vec::new()));
        let ticket = serving.begin_write("a").expect("admitted");
        let freezing = {
            let serving = serving.clone();
            tokio::spawn(async move { serving.freeze("a", Duration::from_secs(10)).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !freezing.is_finished(),
            "the freeze waits for the write under way"
        );
        assert!(matches!(serving.begin_write("a"), Err(NotWritable::Frozen)));
        assert_eq!(serving.served("a"), Served::Frozen);
        assert!(serving.begin_write("b").is_ok(), "other webstores write on");
        drop(ticket);
        assert!(
            freezing.await.unwrap(),
            "the freeze completes once the write is done"
        );
        serving.unfreeze("a");
        assert!(serving.begin_write("a").is_ok());
    }

    #[tokio::test]
    async fn a_freeze_gives_up_waiting_at_its_deadline_but_stays() {
        let serving = Serving::new(None, Vec::new());
        let _ticket = serving.begin_write("a").expect("admitted");
        assert!(!serving.freeze("a", Duration::from_millis(20)).await);
        assert_eq!(serving.served("a"), Served::Frozen);
    }

    #[test]
    fn a_ticket_dropped_anywhere_is_given_back() {
        let serving = Serving::new(None, Vec::new());
        for _ in 0..100 {
            let ticket = serving.begin_write("a").expect("admitted");
            drop(ticket);
        }
        assert_eq!(serving.gate("a").writes.load(Ordering::SeqCst), 0);
    }
}
