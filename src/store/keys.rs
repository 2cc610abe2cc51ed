//! The key layout of boxsub's one sled tree. Numbers are big-endian so that byte order is
//! numeric order, which the range scans below rely on.
//!
//! A customer is written key by key, not in a batch (sled 0.34's batches cost about three
//! times a customer create's CPU; see `Storage::apply`): its email's `e` entry, its number's
//! `n` entry, then its `c` record. The record is the commit point: a customer exists when its
//! record does, and an `e` entry counts only while the record it names holds that email. A
//! crash between the writes can leave entries naming no record; the store is then opened
//! without the clean-shutdown marker below, and `store::repair` puts the entries right from
//! the records before anything is served. A keyed create writes its `i` record first, then
//! what it creates; the service counts an `i` record only while the customer or order its
//! `Location` names exists. Only imports still write batches.
//!
//! | prefix | key                                   | value                          |
//! |--------|---------------------------------------|--------------------------------|
//! | `c`    | customer id                           | customer record                |
//! | `o`    | customer id, order id                 | order record                   |
//! | `r`    | order id                              | customer id (no longer written) |
//! | `e`    | webstore id, 0, folded email          | customer id                    |
//! | `n`    | webstore id, 0, customer number       | customer id                    |
//! | `i`    | webstore id, 0, idempotency key       | idempotency record             |
//! | `m`    | name                                  | store metadata                 |
//!
//! The order → customer index is not stored: it is rebuilt in memory from the `o` keys.
//! Stores written before that change still hold `r` entries; only their highest id is read,
//! so that order ids continue above it.

/// A customer record.
pub const CUSTOMER: u8 = b'c';
/// An order record, under its customer.
pub const ORDER: u8 = b'o';
/// Order id → customer id, written by earlier releases (see the table above).
pub const LEGACY_ORDER_OWNER: u8 = b'r';
/// Folded email → customer id, per webstore.
pub const EMAIL: u8 = b'e';
/// Customer number → customer id, per webstore.
pub const NUMBER: u8 = b'n';
/// Idempotency records, per webstore.
pub const IDEMPOTENCY: u8 = b'i';
/// Store metadata.
pub const META: u8 = b'm';

/// Key of the store's format marker.
pub const FORMAT_KEY: &[u8] = b"mformat";
/// Key of the clean-shutdown marker: written last when the store is closed, removed (and
/// made durable) when it is opened. Its absence at open means the last process stopped
/// without closing the store.
pub const CLEAN_SHUTDOWN_KEY: &[u8] = b"mclean-shutdown";
/// Key of the first write-ahead log segment not yet checkpointed into the store (see
/// `store::checkpoint`): a start replays the log from there.
pub const WAL_FROM: &[u8] = b"mwal-from";
/// Key of the highest order id reserved (see `store::order_ids`).
pub const ORDER_IDS_RESERVED: &[u8] = b"morder-ids-reserved";

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
/// `store::order_chunks`). The last byte keeps the chunk's key apart from its first order's
/// own key, under which that order's record may still wait to be packed.
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

/// `e` + webstore id + 0 + folded email.
pub fn email(webstore: &str, email_key: &str) -> Vec<u8> {
    let mut key = webstore_prefix(EMAIL, webstore);
    key.extend_from_slice(email_key.as_bytes());
    key
}

/// `n` + webstore id + 0 + customer number.
pub fn number(webstore: &str, number: u64) -> Vec<u8> {
    let mut key = webstore_prefix(NUMBER, webstore);
    key.extend_from_slice(&number.to_be_bytes());
    key
}

/// `i` + webstore id + 0 + idempotency key.
pub fn idempotency(webstore: &str, idempotency_key: &str) -> Vec<u8> {
    let mut key = webstore_prefix(IDEMPOTENCY, webstore);
    key.extend_from_slice(idempotency_key.as_bytes());
    key
}

/// The webstore id and client key of an `i` key.
pub fn idempotency_parts(key: &[u8]) -> Option<(&str, &str)> {
    let rest = key.strip_prefix(&[IDEMPOTENCY])?;
    let split = rest.iter().position(|b| *b == 0)?;
    let webstore = std::str::from_utf8(&rest[..split]).ok()?;
    let client_key = std::str::from_utf8(&rest[split + 1..]).ok()?;
    Some((webstore, client_key))
}

/// The big-endian id at the end of a key or in a value.
pub fn trailing_id(bytes: &[u8]) -> Option<u64> {
    let tail: [u8; 8] = bytes.get(bytes.len().checked_sub(8)?..)?.try_into().ok()?;
    Some(u64::from_be_bytes(tail))
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
        assert_eq!(
            idempotency_parts(&idempotency("shop", "key-1")),
            Some(("shop", "key-1"))
        );
    }
}
