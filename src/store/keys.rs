//! The building blocks of the store's keys, and the store's own metadata keys (`m`). Each
//! kind of record owns its keys (`store::kinds`); the whole layout (each key, its value and
//! who writes it) is documented once, in `docs/storage.md` ("## Key layout"), and
//! `kinds::layout` holds that table to the code. Numbers are big-endian so that byte order
//! is numeric order, which the range scans rely on; a webstore id holds no 0 byte, so the 0
//! after it ends it.
//!
//! Must not touch: any kind's records; values (the metadata's are written where they are
//! kept: `store`, `store::log::checkpoint`, `store::replica`, `store::order_ids`).

/// Store metadata.
pub const META: u8 = b'm';

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

/// Once the store has run with durability off (writes answered before they are synced): how
/// many times it was opened after a stop without a close since (`u64`, big-endian), its ids
/// and numbers continuing past what each such stop may have lost (`Store::lost_answers`).
/// Never removed: a later run that writes nothing durable leaves the stored ids below the
/// ones an earlier run gave.
pub const ANSWERED_BEFORE_SYNC: &[u8] = b"manswered-before-sync";
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

/// `prefix` + a big-endian id.
pub(super) fn with_id(prefix: u8, id: u64) -> Vec<u8> {
    let mut key = Vec::with_capacity(9);
    key.push(prefix);
    key.extend_from_slice(&id.to_be_bytes());
    key
}

/// `prefix` + webstore id + 0: the start of a webstore's part of an index.
pub fn webstore_prefix(prefix: u8, webstore: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(2 + webstore.len() + 32);
    key.push(prefix);
    key.extend_from_slice(webstore.as_bytes());
    key.push(0);
    key
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
        assert!(with_id(b'c', 255) < with_id(b'c', 256));
        assert!(webstore_prefix(b'n', "a") < webstore_prefix(b'n', "a\u{1}"));
        assert_eq!(trailing_id(&with_id(b'c', 42)), Some(42));
        assert_eq!(trailing_id(b"short"), None);
        assert!(order_ids_reserved(255) < order_ids_reserved(256));
        assert_eq!(reserved_through(&order_ids_reserved(17)), Some(17));
        assert_eq!(reserved_through(ORDER_IDS_RESERVED), None);
    }
}
