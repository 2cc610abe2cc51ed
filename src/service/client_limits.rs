//! How much of the app's sign-in one client may ask for, by its address. A sign-in of the
//! app is no webstore's until it succeeds, so no webstore's quota can hold it (a stranger
//! would spend the webstore's quota); instead each client address gets a rate of attempts (a
//! burst of [`BURST`], then one every [`EVERY`]: GCRA, one instant per address) and at most
//! [`IN_PROGRESS`] attempts at once. What is past either is refused with the time to wait,
//! before any password check: one address's flood costs the password pool at most its rate.
//!
//! A client is an IPv4 address, or an IPv6 /64 (a network one host usually holds whole, so
//! that walking through its addresses buys nothing). At most [`MAX_CLIENTS`] are remembered
//! (about 100 bytes each, with their place in the order of due times); an address is
//! forgotten once its rate is whole again and it has no attempt in progress (pruned when the
//! table is full, and now and then). While the table is full of addresses seen lately (one
//! IPv6 /48 holds 65,536 /64s), a newcomer takes the place of the address with the fewest
//! attempts (the earliest due time) and no attempt in progress: a spread of addresses never
//! shuts a producer out, and each address is still held to its own rate.
//!
//! An attempt in progress is a guard ([`ClientAttempt`]), released when dropped, wherever
//! that is (its request's future dropped, or its password check ended).
//!
//! Must not touch: passwords, the throttles per email, HTTP (the caller says the address).

use std::collections::{BTreeSet, HashMap};
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Attempts one client may make at once after a quiet spell.
pub const BURST: u32 = 20;
/// One more attempt per this long, sustained (20 a minute).
pub const EVERY: Duration = Duration::from_secs(3);
/// Attempts of one client in progress at once.
pub const IN_PROGRESS: u32 = 2;
/// Clients remembered at once.
pub const MAX_CLIENTS: usize = 65_536;

/// A client as its attempts are counted: an IPv4 address or an IPv6 /64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Client(u128);

impl Client {
    fn of(address: IpAddr) -> Client {
        match address {
            IpAddr::V4(v4) => Client(v4.to_ipv6_mapped().to_bits()),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Client::of(IpAddr::V4(v4)),
                None => Client(v6.to_bits() & !u128::from(u64::MAX)),
            },
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// The theoretical arrival time of GCRA: an attempt is allowed while it is at most the
    /// tolerance past now.
    due: Instant,
    in_progress: u32,
}

/// The clients remembered, and their order of due times (the fewest attempts first).
#[derive(Default)]
struct Table {
    entries: HashMap<Client, Entry>,
    by_due: BTreeSet<(Instant, Client)>,
}

impl Table {
    fn len(&self) -> usize {
        self.entries.len()
    }

    /// Sets `client`'s due time.
    fn set_due(&mut self, client: Client, due: Instant) {
        if let Some(entry) = self.entries.get_mut(&client) {
            self.by_due.remove(&(entry.due, client));
            entry.due = due;
            self.by_due.insert((due, client));
        }
    }

    fn remove(&mut self, client: Client) {
        if let Some(entry) = self.entries.remove(&client) {
            self.by_due.remove(&(entry.due, client));
        }
    }

    /// Forgets the clients whose rate is whole again at `now` and that have nothing in
    /// progress.
    fn forget_idle(&mut self, now: Instant) {
        let idle: Vec<Client> = self
            .by_due
            .iter()
            .take_while(|(due, _)| *due <= now)
            .map(|(_, client)| *client)
            .filter(|client| self.entries.get(client).is_some_and(|e| e.in_progress == 0))
            .collect();
        for client in idle {
            self.remove(client);
        }
    }

    /// Forgets the client with the earliest due time (the fewest attempts) that has nothing
    /// in progress; whether there was one.
    fn evict_one(&mut self) -> bool {
        let evicted = self
            .by_due
            .iter()
            .map(|(_, client)| *client)
            .find(|client| self.entries.get(client).is_some_and(|e| e.in_progress == 0));
        match evicted {
            Some(client) => {
                self.remove(client);
                true
            }
            None => false,
        }
    }
}

/// Every client's attempts.
#[derive(Default)]
pub struct ClientLimits {
    clients: Arc<Mutex<Table>>,
}

/// An attempt in progress, counted against its client until dropped.
pub struct ClientAttempt {
    clients: Arc<Mutex<Table>>,
    client: Client,
}

/// How far past now the next due time may be: the burst, less the attempt itself.
fn tolerance() -> Duration {
    EVERY * (BURST - 1)
}

fn lock(clients: &Mutex<Table>) -> MutexGuard<'_, Table> {
    // The map holds no invariant a panic elsewhere could break half-way.
    clients
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ClientLimits {
    /// Starts an attempt of the client at `address`, or says how long until one is allowed.
    pub fn begin(&self, address: IpAddr) -> Result<ClientAttempt, Duration> {
        self.begin_at(address, Instant::now())
    }

    fn begin_at(&self, address: IpAddr, now: Instant) -> Result<ClientAttempt, Duration> {
        let client = Client::of(address);
        let mut table = lock(&self.clients);
        if !table.entries.contains_key(&client) {
            if table.len() >= MAX_CLIENTS {
                table.forget_idle(now);
            }
            // Every address remembered has an attempt in progress: the password pool bounds
            // those, so this holds only while as many attempts are in flight.
            if table.len() >= MAX_CLIENTS && !table.evict_one() {
                return Err(Duration::from_secs(1));
            }
            table.entries.insert(
                client,
                Entry {
                    due: now,
                    in_progress: 0,
                },
            );
            table.by_due.insert((now, client));
        }
        let Some(entry) = table.entries.get_mut(&client) else {
            return Err(Duration::from_secs(1));
        };
        if entry.in_progress >= IN_PROGRESS {
            return Err(Duration::from_secs(1));
        }
        let due = entry.due.max(now);
        let allowed_until = now + tolerance();
        if due > allowed_until {
            return Err(whole_seconds(due - allowed_until));
        }
        entry.in_progress += 1;
        table.set_due(client, due + EVERY);
        Ok(ClientAttempt {
            clients: self.clients.clone(),
            client,
        })
    }

    /// Forgets the clients whose rate is whole again and that have nothing in progress; run
    /// now and then.
    pub fn prune(&self) {
        lock(&self.clients).forget_idle(Instant::now());
    }

    /// Clients remembered (for tests and diagnostics).
    pub fn clients(&self) -> usize {
        lock(&self.clients).len()
    }

    /// Attempts in progress over every client (for tests and diagnostics).
    pub fn attempts_in_progress(&self) -> usize {
        lock(&self.clients)
            .entries
            .values()
            .map(|entry| entry.in_progress as usize)
            .sum()
    }
}

/// `wait` rounded up to whole seconds, at least one (what `Retry-After` says).
fn whole_seconds(wait: Duration) -> Duration {
    Duration::from_secs((wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1))
}

impl Drop for ClientAttempt {
    fn drop(&mut self) {
        if let Some(entry) = lock(&self.clients).entries.get_mut(&self.client) {
            entry.in_progress = entry.in_progress.saturating_sub(1);
        }
    }
}

/// The unspecified address, for callers that know no client (tests, tools): they all count
/// as one client.
pub const UNKNOWN_CLIENT: IpAddr = IpAddr::V6(Ipv6Addr::UNSPECIFIED);

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v4(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn a_burst_then_one_every_three_seconds_and_other_clients_are_their_own() {
        let limits = ClientLimits::default();
        let start = Instant::now();
        for _ in 0..BURST {
            drop(limits.begin_at(v4("192.0.2.1"), start).unwrap());
        }
        let refused = limits.begin_at(v4("192.0.2.1"), start).err().unwrap();
        assert_eq!(refused, EVERY);
        assert!(limits.begin_at(v4("192.0.2.2"), start).is_ok());
        let later = start + EVERY;
        drop(limits.begin_at(v4("192.0.2.1"), later).unwrap());
        assert!(limits.begin_at(v4("192.0.2.1"), later).is_err());
        // Whole again after a quiet spell, and forgotten.
        let quiet = later + EVERY * BURST;
        lock(&limits.clients).forget_idle(quiet);
        assert_eq!(limits.clients(), 0);
    }

    #[test]
    fn attempts_in_progress_are_bounded_and_given_back_when_dropped() {
        let limits = ClientLimits::default();
        let now = Instant::now();
        let held: Vec<_> = (0..IN_PROGRESS)
            .map(|_| limits.begin_at(v4("192.0.2.1"), now).unwrap())
            .collect();
        assert_eq!(
            limits.begin_at(v4("192.0.2.1"), now).err(),
            Some(Duration::from_secs(1))
        );
        assert_eq!(limits.attempts_in_progress(), IN_PROGRESS as usize);
        drop(held);
        assert_eq!(limits.attempts_in_progress(), 0);
        assert!(limits.begin_at(v4("192.0.2.1"), now).is_ok());
        // An entry with an attempt in progress is never forgotten.
        let attempt = limits.begin_at(v4("192.0.2.9"), now).unwrap();
        lock(&limits.clients).forget_idle(now + Duration::from_secs(3600));
        assert_eq!(limits.clients(), 1);
        drop(attempt);
    }

    #[test]
    fn an_ipv6_network_is_one_client_and_a_mapped_ipv4_address_its_own() {
        let a = v4("2001:db8:1:2:aaaa::1");
        let b = v4("2001:db8:1:2:bbbb::2");
        let c = v4("2001:db8:1:3::1");
        assert_eq!(Client::of(a), Client::of(b));
        assert_ne!(Client::of(a), Client::of(c));
        assert_eq!(
            Client::of(v4("::ffff:192.0.2.1")),
            Client::of(v4("192.0.2.1"))
        );
        assert_ne!(Client::of(v4("192.0.2.1")), Client::of(v4("192.0.2.2")));
    }

    #[test]
    fn a_full_table_forgets_idle_clients_first_then_the_one_with_the_fewest_attempts() {
        let limits = ClientLimits::default();
        let now = Instant::now();
        // A /48's worth of /64s, each seen once (one of them long ago), and one of them with
        // an attempt in progress.
        let network = |n: u128| (0x2001_0db8_0001_u128 << 80) | (n << 64);
        let held = {
            for n in 0..MAX_CLIENTS as u128 {
                let at = if n == 0 { now - EVERY * BURST } else { now };
                drop(
                    limits
                        .begin_at(IpAddr::V6(Ipv6Addr::from_bits(network(n))), at)
                        .unwrap(),
                );
            }
            limits
                .begin_at(IpAddr::V6(Ipv6Addr::from_bits(network(1))), now)
                .unwrap()
        };
        assert_eq!(limits.clients(), MAX_CLIENTS);
        // The idle one is forgotten first to make room.
        assert!(limits.begin_at(v4("192.0.2.1"), now).is_ok());
        assert_eq!(limits.clients(), MAX_CLIENTS);
        assert!(!lock(&limits.clients)
            .entries
            .contains_key(&Client::of(IpAddr::V6(Ipv6Addr::from_bits(network(0))))));
        // Then newcomers take the places of those with the fewest attempts, never of one
        // with an attempt in progress, nor of one with more attempts.
        assert!(limits.begin_at(v4("192.0.2.1"), now).is_ok(), "its second");
        for n in 2..20 {
            assert!(
                limits.begin_at(v4(&format!("192.0.2.{n}")), now).is_ok(),
                "{n}"
            );
        }
        assert_eq!(limits.clients(), MAX_CLIENTS);
        let table = lock(&limits.clients);
        assert!(table
            .entries
            .contains_key(&Client::of(IpAddr::V6(Ipv6Addr::from_bits(network(1))))));
        assert!(table.entries.contains_key(&Client::of(v4("192.0.2.1"))));
        drop(table);
        drop(held);
        // A client it remembers still gets its attempts, and no more than its rate.
        for _ in 2..BURST {
            assert!(limits.begin_at(v4("192.0.2.1"), now).is_ok());
        }
        assert!(limits.begin_at(v4("192.0.2.1"), now).is_err());
    }

    proptest! {
        #[test]
        fn no_client_gets_more_than_its_burst_and_rate(
            gaps_ms in proptest::collection::vec(0u64..4_000, 1..200)
        ) {
            let limits = ClientLimits::default();
            let start = Instant::now();
            let mut now = start;
            let mut allowed = 0u64;
            for gap in gaps_ms {
                now += Duration::from_millis(gap);
                if limits.begin_at(v4("192.0.2.1"), now).is_ok() {
                    allowed += 1;
                }
            }
            let elapsed = now - start;
            let most = u64::from(BURST) + (elapsed.as_millis() / EVERY.as_millis()) as u64;
            prop_assert!(allowed <= most, "{allowed} allowed in {elapsed:?}");
        }
    }
}
