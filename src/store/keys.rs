//! The keys of boxsub's store. The layout itself (each key, its value and who writes it) is
//! documented once, in `docs/storage.md` ("## Key layout"), and [`layout`] holds that table
//! to the code: a test below reads the document and compares. Numbers are big-endian so that
//! byte order is numeric order, which the range scans below rely on.
//!
//! A customer is written key by key, not in a batch (see `Snapshot::apply` on what a batch
//! costs in sled 0.34, and docs/design.md, "Why not batches everywhere"): its email's `e`
//! entry, its number's `n` entry, then its `c` record. The record is the commit point: a
//! customer exists when its record does, and an `e` entry counts only while the record it
//! names holds that email. A crash between the writes can leave entries naming no record;
//! the store is then opened without the clean-shutdown marker below, and `store::repair`
//! puts the entries right from the records before anything is served. A keyed create writes
//! its `i` record first, then what it creates; the service counts an `i` record only while
//! the customer or order its `Location` names exists. Only imports and seeding still write
//! batches.
//!
//! The order → customer index is not stored: it is rebuilt in memory from the `o` keys.

/// A customer record.
pub const CUSTOMER: u8 = b'c';
/// An order record, under its customer.
pub const ORDER: u8 = b'o';
/// Folded email → customer id, per webstore.
pub const EMAIL: u8 = b'e';
/// Customer number → customer id, per webstore.
pub const NUMBER: u8 = b'n';
/// Idempotency records, per webstore.
pub const IDEMPOTENCY: u8 = b'i';
/// Store metadata.
pub const META: u8 = b'm';
/// A webstore's ownership on this shard (taken from, or released to, another).
pub const OWNERSHIP: u8 = b'w';
/// A webstore's events, by sequence number.
pub const EVENT: u8 = b'v';
/// Where each webhook endpoint of a webstore stands.
pub const WEBHOOK_POSITION: u8 = b'd';
/// A redelivery the operator asked of a webhook endpoint, not yet taken up.
pub const REDELIVERY: u8 = b'r';
/// A producer's session in the web app, by the SHA-256 of its id.
pub const SESSION: u8 = b's';
/// The highest sequence number of a webstore's events the retention sweep removed.
pub const EVENTS_PRUNED: &[u8] = b"mevents-pruned/";

/// Key of the store's format marker.
pub const FORMAT_KEY: &[u8] = b"mformat";
/// Key of the clean-shutdown marker: written last when the store is closed, removed (and
/// made durable) when it is opened. Its absence at open means the last process stopped
/// without closing the store.
pub const CLEAN_SHUTDOWN_KEY: &[u8] = b"mclean-shutdown";
/// Key of the first write-ahead log segment not yet checkpointed into the snapshot (see
/// `store::log::checkpoint`, which writes it): a start replays the log from there.
pub const WAL_FROM: &[u8] = b"mwal-from";
/// Key of the last replicated changelog message this node's snapshot holds (see
/// `store::replica`): a standby resumes after it.
pub const REPLICA_APPLIED: &[u8] = b"mreplica-applied";
/// Key of the mark a node writes before it takes writes as a group's primary (see
/// `store::replica`): its snapshot may then hold writes the changelog never took, so it is
/// rebuilt from the group before it follows again.
pub const REPLICA_PRIMARY: &[u8] = b"mreplica-primary";
/// Key of the id range this store's node gives out ids in (`--id-range`), recorded at its
/// first start: a later start with another range is refused.
pub const ID_RANGE: &[u8] = b"mid-range";
/// The keys that describe this node's copy rather than the data: never in a replica
/// snapshot, never loaded from one.
pub const NODE_LOCAL: [&[u8]; 6] = [
    FORMAT_KEY,
    CLEAN_SHUTDOWN_KEY,
    WAL_FROM,
    REPLICA_APPLIED,
    REPLICA_PRIMARY,
    ID_RANGE,
];
/// Key of the highest order id reserved (see `store::order_ids`).
pub const ORDER_IDS_RESERVED: &[u8] = b"morder-ids-reserved";

/// [`ORDER_IDS_RESERVED`] + the highest order id reserved: a key per reservation, so that a
/// replay of an older reservation after a crash can never take a newer one back (the highest
/// key wins; see `Store::reserve_order_ids`).
pub fn order_ids_reserved(through: u64) -> Vec<u8> {
    let mut key = ORDER_IDS_RESERVED.to_vec();
    key.extend_from_slice(&through.to_be_bytes());
    key
}

/// The highest order id a key of [`order_ids_reserved`] reserves (`None` for any other key).
pub fn reserved_through(key: &[u8]) -> Option<u64> {
    let through = key.strip_prefix(ORDER_IDS_RESERVED)?;
    Some(u64::from_be_bytes(through.try_into().ok()?))
}

fn with_id(prefix: u8, id: u64) -> Vec<u8> {
    let mut key = Vec::with_capacity(9);
    key.push(prefix);
    key.extend_from_slice(&id.to_be_bytes());
    key
}

/// `c` + customer id.
pub fn customer(id: u64) -> Vec<u8> {
    with_id(CUSTOMER, id)
}

/// `o` + customer id: the prefix of a customer's orders.
pub fn orders_of(customer: u64) -> Vec<u8> {
    with_id(ORDER, customer)
}

/// `o` + customer id + order id.
pub fn order(customer: u64, order: u64) -> Vec<u8> {
    let mut key = orders_of(customer);
    key.extend_from_slice(&order.to_be_bytes());
    key
}

/// `o` + customer id + the id of its first order + 0: a chunk of a customer's orders (see
/// `store::pending::order_chunks`). The last byte keeps the chunk's key apart from its first
/// order's own key, under which that order's record may still wait to be packed.
pub fn order_chunk(customer: u64, first_order: u64) -> Vec<u8> {
    let mut key = order(customer, first_order);
    key.push(0);
    key
}

/// The customer id and order id of an `o` key of one order (not of a chunk).
pub fn order_ids(key: &[u8]) -> Option<(u64, u64)> {
    match key {
        [ORDER, customer @ .., _, _, _, _, _, _, _, _] if customer.len() == 8 => {
            Some((trailing_id(customer)?, trailing_id(key)?))
        }
        _ => None,
    }
}

/// The customer id and order id of an `o` key of one order, or the customer id and first
/// order id of a chunk's key, with whether it is a chunk's.
pub fn order_or_chunk_ids(key: &[u8]) -> Option<(u64, u64, bool)> {
    match key.split_last() {
        Some((0, order_key)) if key.len() == 18 => {
            order_ids(order_key).map(|(customer, first)| (customer, first, true))
        }
        _ => order_ids(key).map(|(customer, order)| (customer, order, false)),
    }
}

/// `prefix` + webstore id + 0: the start of a webstore's part of an index.
pub fn webstore_prefix(prefix: u8, webstore: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(2 + webstore.len() + 32);
    key.push(prefix);
    key.extend_from_slice(webstore.as_bytes());
    key.push(0);
    key
}

/// `e` + webstore id + 0 + folded email + 0: where the entries of one email are, one for
/// each customer that has held it. An email is printable text, so the 0 ends it.
pub fn email(webstore: &str, email_key: &str) -> Vec<u8> {
    let mut key = webstore_prefix(EMAIL, webstore);
    key.extend_from_slice(email_key.as_bytes());
    key.push(0);
    key
}

/// [`email`] + customer id: the entry of one customer that holds or held the email. An
/// entry counts only while its customer's record holds the email; a customer's entry is
/// never overwritten by another's, so the replay of an older create after a crash cannot
/// take an email from the customer that holds it now (see `Store::email_owner`).
pub fn email_holder(webstore: &str, email_key: &str, customer: u64) -> Vec<u8> {
    let mut key = email(webstore, email_key);
    key.extend_from_slice(&customer.to_be_bytes());
    key
}
/// `n` + webstore id + 0 + customer number.
pub fn number(webstore: &str, number: u64) -> Vec<u8> {
    let mut key = webstore_prefix(NUMBER, webstore);
    key.extend_from_slice(&number.to_be_bytes());
    key
}

/// `i` + webstore id + 0 + idempotency key + 0: where the versions of one key's record are.
/// A client key is printable ASCII, so the 0 ends it.
pub fn idempotency(webstore: &str, idempotency_key: &str) -> Vec<u8> {
    let mut key = webstore_prefix(IDEMPOTENCY, webstore);
    key.extend_from_slice(idempotency_key.as_bytes());
    key.push(0);
    key
}

/// [`idempotency`] + version (big-endian): one version of a key's record. A key is written
/// again only once its record no longer counts (expired, or naming nothing), under a higher
/// version (the clock's nanoseconds, above the version it replaces), and the highest version
/// is the record: so the replay of an earlier version after a crash can never take a later
/// one back (see `Store::create_customer`). Imports write version 1.
pub fn idempotency_version(webstore: &str, idempotency_key: &str, version: u64) -> Vec<u8> {
    let mut key = idempotency(webstore, idempotency_key);
    key.extend_from_slice(&version.to_be_bytes());
    key
}

/// The webstore id, client key and version of an `i` key.
pub fn idempotency_parts(key: &[u8]) -> Option<(&str, &str, u64)> {
    let rest = key.strip_prefix(&[IDEMPOTENCY])?;
    let split = rest.iter().position(|b| *b == 0)?;
    let webstore = std::str::from_utf8(&rest[..split]).ok()?;
    let tail = &rest[split + 1..];
    let (client_key, version) = tail.split_at_checked(tail.len().checked_sub(9)?)?;
    let [0, version @ ..] = version else {
        return None;
    };
    let client_key = std::str::from_utf8(client_key).ok()?;
    Some((
        webstore,
        client_key,
        u64::from_be_bytes(version.try_into().ok()?),
    ))
}

/// `w` + webstore id: what this shard records of the webstore's ownership.
pub fn ownership(webstore: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(1 + webstore.len());
    key.push(OWNERSHIP);
    key.extend_from_slice(webstore.as_bytes());
    key
}

/// `v` + webstore id + 0 + sequence number: one event of the webstore.
pub fn event(webstore: &str, sequence: u64) -> Vec<u8> {
    let mut key = webstore_prefix(EVENT, webstore);
    key.extend_from_slice(&sequence.to_be_bytes());
    key
}

/// `v` + webstore id + 0 + the sequence number of the chunk's first event + 0: a chunk of
/// the webstore's events (see `pending::event_chunks`).
pub fn event_chunk(webstore: &str, first: u64) -> Vec<u8> {
    let mut key = event(webstore, first);
    key.push(0);
    key
}

/// Of a `v` key: the length of its webstore's prefix (`v` + webstore id + 0), the sequence
/// number it names and whether it is a chunk's key (the chunk's first sequence number).
pub fn event_key_parts(key: &[u8]) -> Option<(usize, u64, bool)> {
    if key.first() != Some(&EVENT) {
        return None;
    }
    // A webstore id holds no 0 byte: the first one ends it.
    let prefix_len = 1 + key[1..].iter().position(|&byte| byte == 0)? + 1;
    match key.len() - prefix_len {
        8 => Some((prefix_len, trailing_id(key)?, false)),
        9 if key.last() == Some(&0) => {
            Some((prefix_len, trailing_id(&key[..key.len() - 1])?, true))
        }
        _ => None,
    }
}

/// `d` + webstore id + 0 + endpoint id: where that webhook endpoint stands.
pub fn webhook_position(webstore: &str, endpoint: &str) -> Vec<u8> {
    let mut key = webstore_prefix(WEBHOOK_POSITION, webstore);
    key.extend_from_slice(endpoint.as_bytes());
    key
}

/// `r` + webstore id + 0 + endpoint id: the sequence number after which the operator asked
/// that endpoint's deliveries to start again (`u64`, big-endian).
pub fn redelivery(webstore: &str, endpoint: &str) -> Vec<u8> {
    let mut key = webstore_prefix(REDELIVERY, webstore);
    key.extend_from_slice(endpoint.as_bytes());
    key
}

/// `s` + the SHA-256 of a session id: a producer's session.
pub fn session(digest: &[u8; 32]) -> Vec<u8> {
    let mut key = Vec::with_capacity(33);
    key.push(SESSION);
    key.extend_from_slice(digest);
    key
}

/// `m events-pruned/` + webstore id: the highest sequence number of its events removed by
/// the retention sweep (`u64`, big-endian).
pub fn events_pruned(webstore: &str) -> Vec<u8> {
    let mut key = EVENTS_PRUNED.to_vec();
    key.extend_from_slice(webstore.as_bytes());
    key
}

/// The big-endian id at the end of a key or in a value.
pub fn trailing_id(bytes: &[u8]) -> Option<u64> {
    let tail: [u8; 8] = bytes.get(bytes.len().checked_sub(8)?..)?.try_into().ok()?;
    Some(u64::from_be_bytes(tail))
}

/// The key layout as `docs/storage.md` tables it ("## Key layout"), in its order: each row's
/// first column without its backticks, and an example key built as the store builds it. The
/// test below holds the document's table to this list.
pub fn layout() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("c + customer id", customer(7)),
        ("o + customer id + order id", order(7, 9)),
        ("o + customer id + first order id + 0", order_chunk(7, 9)),
        (
            "e + webstore id + 0 + folded email + 0 + customer id",
            email_holder("shop", "ann@example.com", 7),
        ),
        ("n + webstore id + 0 + customer number", number("shop", 3)),
        (
            "i + webstore id + 0 + idempotency key + 0 + version",
            idempotency_version("shop", "k1", 1),
        ),
        ("w + webstore id", ownership("shop")),
        ("v + webstore id + 0 + sequence number", event("shop", 5)),
        (
            "v + webstore id + 0 + first sequence number + 0",
            event_chunk("shop", 64),
        ),
        (
            "d + webstore id + 0 + endpoint id",
            webhook_position("shop", "erp"),
        ),
        (
            "r + webstore id + 0 + endpoint id",
            redelivery("shop", "erp"),
        ),
        ("s + session digest", session(&[7; 32])),
        ("m format", FORMAT_KEY.to_vec()),
        ("m clean-shutdown", CLEAN_SHUTDOWN_KEY.to_vec()),
        ("m wal-from", WAL_FROM.to_vec()),
        ("m id-range", ID_RANGE.to_vec()),
        ("m replica-applied", REPLICA_APPLIED.to_vec()),
        ("m replica-primary", REPLICA_PRIMARY.to_vec()),
        (
            "m order-ids-reserved + highest order id reserved",
            order_ids_reserved(17),
        ),
        ("m events-pruned/ + webstore id", events_pruned("shop")),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_order_is_numeric_order() {
        assert!(customer(255) < customer(256));
        assert!(order(1, 9) < order(2, 1));
        assert!(number("a", 2) < number("a", 10));
        assert!(number("a", u64::MAX) < webstore_prefix(NUMBER, "a\u{1}"));
        assert_eq!(trailing_id(&order(7, 42)), Some(42));
        assert_eq!(trailing_id(b"short"), None);
        assert_eq!(order_ids(&order(7, 42)), Some((7, 42)));
        assert_eq!(order_ids(&customer(7)), None);
        assert!(order(7, 42) < order_chunk(7, 42) && order_chunk(7, 42) < order(7, 43));
        assert_eq!(order_ids(&order_chunk(7, 42)), None);
        assert_eq!(order_or_chunk_ids(&order_chunk(7, 42)), Some((7, 42, true)));
        assert_eq!(order_or_chunk_ids(&order(7, 42)), Some((7, 42, false)));
        assert_eq!(order_or_chunk_ids(&customer(7)), None);
        assert!(order_ids_reserved(255) < order_ids_reserved(256));
        assert_eq!(reserved_through(&order_ids_reserved(17)), Some(17));
        assert_eq!(reserved_through(ORDER_IDS_RESERVED), None);
        assert_eq!(
            idempotency_parts(&idempotency_version("shop", "key-1", 3)),
            Some(("shop", "key-1", 3))
        );
        assert_eq!(idempotency_parts(&idempotency("shop", "key-1")), None);
        assert!(idempotency_version("s", "k", 255) < idempotency_version("s", "k", 256));
        assert!(idempotency_version("s", "k", u64::MAX) < idempotency_version("s", "k!", 0));
    }

    /// The first column of the table under `## Key layout` in `markdown`, backticks removed,
    /// row by row (the header row and the separator row skipped).
    fn key_table(markdown: &str) -> Vec<String> {
        let mut lines = markdown
            .lines()
            .skip_while(|line| line.trim() != "## Key layout")
            .skip(1)
            .skip_while(|line| !line.trim_start().starts_with('|'));
        let header = lines.next().expect("a table under ## Key layout");
        assert!(
            header.contains("key") && header.contains("value") && header.contains("written by"),
            "the table's header is `key | value | written by`: {header}"
        );
        let separator = lines.next().unwrap_or_default();
        assert!(
            separator.trim().starts_with("|-") || separator.trim().starts_with("| -"),
            "a separator row after the header: {separator}"
        );
        lines
            .take_while(|line| line.trim_start().starts_with('|'))
            .map(|row| {
                let first = row.split('|').nth(1).unwrap_or_default();
                first.replace('`', "").trim().to_owned()
            })
            .collect()
    }

    #[test]
    fn the_key_table_in_docs_storage_md_is_the_code_s() {
        let documented = key_table(include_str!("../../docs/storage.md"));
        let layout = layout();
        let names: Vec<&str> = layout.iter().map(|(name, _)| *name).collect();
        assert_eq!(
            documented, names,
            "docs/storage.md's key table and keys::layout() differ"
        );
        for (name, key) in &layout {
            let letter = name.as_bytes()[0];
            assert_eq!(key.first(), Some(&letter), "{name}: the key's first byte");
            if letter == META {
                let word = name.split_whitespace().nth(1).expect("`m` and a name");
                let named = [b"m".as_slice(), word.as_bytes()].concat();
                if name.contains(" + ") {
                    assert!(key.starts_with(&named) && key.len() > named.len(), "{name}");
                } else {
                    assert_eq!(key.as_slice(), named, "{name}");
                }
            }
        }
    }
}
