//! The store by kind of record: one module per kind, each owning its key prefixes and key
//! builders, its record type and its encoding (behind the envelope of `store::codec`), its
//! part of `impl Store` (the writes of a change and the reads), the batch builders seeding
//! and imports share, and why its exported form (its line of `transfer::format`) differs
//! from the stored one. [`layout`] holds the key table of `docs/storage.md` to the code.
//!
//! - `change`: the keyed write every kind's change takes (idempotency record, event, the
//!   kind's own writes, in one log entry).
//! - [`customers`]: `c` records, `e` (email) and `n` (number) index entries.
//! - [`orders`]: `o` records.
//! - [`idempotency`]: `i` records, by key and version.
//! - [`events`]: `v` records, the `m events-pruned/` mark.
//! - [`webhook_positions`]: `d` records (where a webhook endpoint stands) and `r` entries
//!   (redeliveries asked).
//! - [`sessions`]: `s` records.
//! - [`ownership`]: `w` entries.
//!
//! Where a key layout lives: a kind's own file, but for the two kinds the pending layer packs
//! into chunks (orders, events), whose keys and chunk formats are the pending layer's
//! (`pending::order_chunks`, `pending::event_chunks`), since a layer below may not read
//! them from here; the kinds and everything else name them from there. Must not touch: the
//! layers' own state (the log, the waiting puts, sled).

pub(crate) mod change;
pub mod customers;
pub mod events;
pub mod idempotency;
pub mod orders;
pub mod ownership;
pub mod sessions;
pub mod webhook_positions;

use super::keys::{
    order_ids_reserved, CLEAN_SHUTDOWN_KEY, FORMAT_KEY, ID_RANGE, REPLICA_APPLIED, REPLICA_PRIMARY,
    WAL_FROM,
};
use crate::store::pending::event_chunks::{event_chunk, event_key};
use crate::store::pending::order_chunks::{order_chunk, order_key};
use customers::{customer_key, email_holder_key, number_key};
use events::events_pruned;
use idempotency::idempotency_version;
use ownership::ownership_key;
use sessions::session_key;
use webhook_positions::{redelivery_key, webhook_position_key};

/// The key layout as `docs/storage.md` tables it ("## Key layout"), in its order: each row's
/// first column without its backticks, and an example key built as the store builds it. The
/// test below holds the document's table to this list.
pub fn layout() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("c + customer id", customer_key(7)),
        ("o + customer id + order id", order_key(7, 9)),
        ("o + customer id + first order id + 0", order_chunk(7, 9)),
        (
            "e + webstore id + 0 + folded email + 0 + customer id",
            email_holder_key("shop", "ann@example.com", 7),
        ),
        (
            "n + webstore id + 0 + customer number",
            number_key("shop", 3),
        ),
        (
            "i + webstore id + 0 + idempotency key + 0 + version",
            idempotency_version("shop", "k1", 1),
        ),
        ("w + webstore id", ownership_key("shop")),
        (
            "v + webstore id + 0 + sequence number",
            event_key("shop", 5),
        ),
        (
            "v + webstore id + 0 + first sequence number + 0",
            event_chunk("shop", 64),
        ),
        (
            "d + webstore id + 0 + endpoint id",
            webhook_position_key("shop", "erp"),
        ),
        (
            "r + webstore id + 0 + endpoint id",
            redelivery_key("shop", "erp"),
        ),
        ("s + session digest", session_key(&[7; 32])),
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
    use crate::store::keys::META;

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
        let documented = key_table(include_str!("../../../docs/storage.md"));
        let layout = layout();
        let names: Vec<&str> = layout.iter().map(|(name, _)| *name).collect();
        assert_eq!(
            documented, names,
            "docs/storage.md's key table and kinds::layout() differ"
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
