//! The store by kind of record: one module per kind, each owning its key prefixes and key
//! builders, its record type and its encoding (behind the envelope of `store::codec`), its
//! part of `impl Store` (the writes of a change and the reads), the batch builders seeding
//! and imports share, and why its exported form (its line of `transfer::format`) differs
//! from the stored one. [`layout`] gives the key table of `docs/storage.md` as the code has
//! it, row by row (the key as its builder makes it, the record type and version stored under
//! it, every function that writes or removes it), and its test holds the document's every
//! column to that.
//!
//! - `change`: the keyed write every kind's change takes (idempotency record, event, the
//!   kind's own writes, in one log entry).
//! - [`accounts`]: `a` records (a customer's account), `t` records (its ledger), `p`
//!   records (its payments) and `q` entries (a payment's customer).
//! - [`books`]: `b` entries (each webstore's transactions by date).
//! - [`customers`]: `c` records, `e` (email) and `n` (number) index entries.
//! - [`deliveries`]: `f` records (each frozen date's deliveries and the date itself) and
//!   the `m frozen/` mark.
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

pub mod accounts;
pub mod books;
pub(crate) mod change;
pub mod customers;
pub mod deliveries;
pub mod events;
pub mod idempotency;
pub mod orders;
pub mod ownership;
pub mod sessions;
pub mod webhook_positions;

use super::codec::Record;
use super::entries::EventWrite;
use super::error::FatalHandler;
use super::keys::{
    order_ids_reserved, ANSWERED_BEFORE_SYNC, CLEAN_SHUTDOWN_KEY, FORMAT_KEY, ID_RANGE,
    REPLICA_APPLIED, REPLICA_PRIMARY, WAL_FROM,
};
use super::log::checkpoint;
use super::log::wal::{LogEntry, LogWriter};
use super::pending::event_chunks::{self, event_chunk, event_key};
use super::pending::order_chunks::{self, order_chunk, order_key};
use super::pending::{self, PendingWrites, Storage};
use super::replica::Replica;
use super::{OnDurable, OpenForWrite, Store, StoreError, Written};
use crate::domain::day::Day;
use crate::domain::ids::OrderId;
use accounts::{
    account_key, add_account_record, add_payment_record, add_transaction_record, payment_key,
    payment_owner_key, transaction_key, AccountRecord, PaymentRecord, TransactionRecord,
};
use books::books_key;
use change::ChangeWrites;
use customers::{
    add_customer_record, add_new_customer, customer_key, email_holder_key, number_key,
    CustomerRecord,
};
use deliveries::{
    add_freeze_mark, add_frozen_day, add_frozen_delivery, charge_mark_key, freeze_mark_key,
    frozen_day_key, frozen_delivery_key, DeliveryRecord, FrozenDayRecord,
};
use events::{add_event_record, add_events_pruned, events_pruned, EventRecord};
use idempotency::{
    add_idempotency_record, idempotency_version, IdempotencyRecord, IdempotencyWrite,
};
use orders::{add_order, add_order_record, OrderRecord};
use ownership::ownership_key;
use sessions::{add_session_record, session_key, SessionRecord};
use std::time::Duration;
use webhook_positions::{
    add_webhook_position, redelivery_key, webhook_position_key, WebhookPosition,
};

/// One row of the key layout: the key as `docs/storage.md` writes it in the first column
/// (without its backticks), an example key built as the store builds it, what the key holds
/// (the second column names it), and the functions that write or remove it (the third
/// column names these and nothing else in backticks).
pub struct KeyRow {
    /// The key, as the table's first column spells it.
    pub key: &'static str,
    /// A key of this layout, built by the code's own key builder.
    pub example: Vec<u8>,
    /// What the code stores under it.
    pub holds: Holds,
    /// Every function that writes or removes keys of this layout, as the table names them
    /// (each path checked by the compiler to name a function).
    pub writers: Vec<String>,
}

/// What a key of the layout holds.
pub enum Holds {
    /// A record of the store's envelope (`store::codec`): its type's path below `store::`
    /// and the format version this build writes.
    Record {
        /// `kinds::…::Type`.
        path: &'static str,
        /// `Record::VERSION`.
        version: u16,
    },
    /// A chunk of records, packed by the pending layer: the function that encodes it and
    /// the record type of the records it holds.
    Chunk {
        /// `pending::…::encode_…`.
        encoder: &'static str,
        /// `kinds::…::Type`.
        record: &'static str,
    },
    /// Bytes of no record type: an id, a byte, a number, a name, nothing.
    Bytes,
}

impl Holds {
    /// The record type it names, if any.
    pub fn record_path(&self) -> Option<&'static str> {
        match self {
            Holds::Record { path, .. } => Some(path),
            Holds::Chunk { record, .. } => Some(record),
            Holds::Bytes => None,
        }
    }
}

/// Record type `R` as the table names it: its path below `store::`, and its version.
fn record<R: Record>() -> Holds {
    Holds::Record {
        path: below_store(std::any::type_name::<R>()),
        version: R::VERSION,
    }
}

/// `boxsub::store::kinds::orders::OrderRecord` → `kinds::orders::OrderRecord`.
fn below_store(path: &'static str) -> &'static str {
    path.split_once("::store::")
        .map_or(path, |(_, below)| below)
}

/// The functions named, each checked by the compiler to be one, as the table spells them (a
/// generic one given the type of its instance: `Store::write_change: WriteChange`).
macro_rules! writers {
    ($($($segment:ident)::+ $(: $instance:ty)?),+ $(,)?) => {{
        $(let _ $(: $instance)? = $($segment)::+;)+
        vec![$(stringify!($($segment)::+).replace(' ', "")),+]
    }};
}

/// A chunk's encoder, given its records as a list.
type ChunkEncoder = fn(Vec<(u64, &'static [u8])>) -> Vec<u8>;

/// `Replica::promote` over a write-ahead log.
type PromoteOverTheLog =
    fn(Replica, LogWriter, FatalHandler, Duration) -> Result<Store, StoreError>;

/// `Store::write_change` for a kind's own writes given as a function.
type WriteChange = fn(
    &Store,
    &str,
    Option<IdempotencyWrite>,
    Option<EventWrite>,
    OnDurable,
    ChangeWrites<fn(&Store, &OpenForWrite<'_>, &mut LogEntry) -> Result<(), StoreError>>,
) -> Result<Written, StoreError>;

/// The key layout as `docs/storage.md` tables it ("## Key layout"), in its order, row by row:
/// the key, an example built as the store builds it, what it holds, and who writes it. The
/// test below holds the document's table to this list, column by column.
pub fn layout() -> Vec<KeyRow> {
    let row = |key, example, holds, writers| KeyRow {
        key,
        example,
        holds,
        writers,
    };
    let chunk_encoders: [ChunkEncoder; 2] = [
        pending::order_chunks::encode_order_chunk,
        pending::event_chunks::encode_event_chunk,
    ];
    let _ = chunk_encoders;
    vec![
        row(
            "c + customer id",
            customer_key(7),
            record::<CustomerRecord>(),
            writers![
                Store::create_customer,
                Store::update_customer,
                Store::write_account,
                add_new_customer,
                add_customer_record,
                Store::purge_webstore,
            ],
        ),
        row(
            "a + customer id",
            account_key(7),
            record::<AccountRecord>(),
            writers![
                Store::write_account,
                Store::update_customer,
                add_account_record,
                Store::purge_webstore
            ],
        ),
        row(
            "t + customer id + transaction number",
            transaction_key(7, 1),
            record::<TransactionRecord>(),
            writers![
                Store::write_account,
                add_transaction_record,
                Store::purge_webstore
            ],
        ),
        row(
            "b + webstore id + 0 + day + transaction id",
            books_key("shop", Day(20_000), 11),
            Holds::Bytes,
            writers![
                Store::write_account,
                add_transaction_record,
                Store::purge_webstore
            ],
        ),
        row(
            "p + customer id + payment id",
            payment_key(7, 11),
            record::<PaymentRecord>(),
            writers![
                Store::write_account,
                add_payment_record,
                Store::purge_webstore
            ],
        ),
        row(
            "q + payment id",
            payment_owner_key(11),
            Holds::Bytes,
            writers![
                Store::write_account,
                add_payment_record,
                Store::purge_webstore
            ],
        ),
        row(
            "o + customer id + order id",
            order_key(7, 9),
            record::<OrderRecord>(),
            writers![
                Store::create_order,
                Store::update_order,
                PendingWrites::put_pending,
                add_order_record,
                add_order,
                Store::purge_webstore,
            ],
        ),
        row(
            "o + customer id + first order id + 0",
            order_chunk(7, 9),
            Holds::Chunk {
                encoder: "pending::order_chunks::encode_order_chunk",
                record: below_store(std::any::type_name::<OrderRecord>()),
            },
            writers![order_chunks::pack, order_chunks::unpack],
        ),
        row(
            "e + webstore id + 0 + folded email + 0 + customer id",
            email_holder_key("shop", "ann@example.com", 7),
            Holds::Bytes,
            writers![
                Store::create_customer,
                Store::update_customer,
                add_new_customer,
                add_customer_record,
                Store::purge_webstore,
            ],
        ),
        row(
            "n + webstore id + 0 + customer number",
            number_key("shop", 3),
            Holds::Bytes,
            writers![
                Store::create_customer,
                add_new_customer,
                add_customer_record,
                Store::repair_customer_indexes,
                Store::purge_webstore,
            ],
        ),
        row(
            "i + webstore id + 0 + idempotency key + 0 + version",
            idempotency_version("shop", "k1", 1),
            record::<IdempotencyRecord>(),
            writers![
                Store::write_change: WriteChange,
                Store::create_customer,
                Store::create_order,
                Store::update_order,
                Store::write_account,
                add_idempotency_record,
                Store::sweep_idempotency,
                Store::purge_webstore,
            ],
        ),
        row(
            "w + webstore id",
            ownership_key("shop"),
            Holds::Bytes,
            writers![Store::set_ownership, Store::clear_ownership],
        ),
        row(
            "v + webstore id + 0 + sequence number",
            event_key("shop", 5),
            record::<EventRecord>(),
            writers![
                Store::write_change: WriteChange,
                Store::create_customer,
                Store::update_customer,
                Store::create_order,
                Store::update_order,
                Store::write_account,
                add_event_record,
                Store::prune_events,
                Store::purge_webstore,
            ],
        ),
        row(
            "v + webstore id + 0 + first sequence number + 0",
            event_chunk("shop", 64),
            Holds::Chunk {
                encoder: "pending::event_chunks::encode_event_chunk",
                record: below_store(std::any::type_name::<EventRecord>()),
            },
            writers![event_chunks::pack],
        ),
        row(
            "d + webstore id + 0 + endpoint id",
            webhook_position_key("shop", "erp"),
            record::<WebhookPosition>(),
            writers![
                Store::set_webhook_position,
                add_webhook_position,
                Store::purge_webstore,
            ],
        ),
        row(
            "r + webstore id + 0 + endpoint id",
            redelivery_key("shop", "erp"),
            Holds::Bytes,
            writers![
                Store::request_redelivery,
                Store::clear_redelivery,
                Store::purge_webstore,
            ],
        ),
        row(
            "s + session digest",
            session_key(&[7; 32]),
            record::<SessionRecord>(),
            writers![
                Store::put_session,
                Store::remove_session,
                add_session_record,
                Store::purge_webstore,
            ],
        ),
        row(
            "m format",
            FORMAT_KEY.to_vec(),
            Holds::Bytes,
            writers![Store::check_format],
        ),
        row(
            "m clean-shutdown",
            CLEAN_SHUTDOWN_KEY.to_vec(),
            Holds::Bytes,
            writers![Store::close, Store::with_storage],
        ),
        row(
            "m answered-before-sync",
            ANSWERED_BEFORE_SYNC.to_vec(),
            Holds::Bytes,
            writers![Store::with_storage],
        ),
        row(
            "m wal-from",
            WAL_FROM.to_vec(),
            Holds::Bytes,
            writers![checkpoint::mark_log_start],
        ),
        row(
            "m id-range",
            ID_RANGE.to_vec(),
            Holds::Bytes,
            writers![Store::claim_id_range],
        ),
        row(
            "m replica-applied",
            REPLICA_APPLIED.to_vec(),
            Holds::Bytes,
            writers![Replica::checkpoint],
        ),
        row(
            "m replica-primary",
            REPLICA_PRIMARY.to_vec(),
            Holds::Bytes,
            writers![Replica::promote: PromoteOverTheLog],
        ),
        row(
            "m order-ids-reserved + highest order id reserved",
            order_ids_reserved(17),
            Holds::Bytes,
            writers![Store::reserve_order_ids],
        ),
        row(
            "m events-pruned/ + webstore id",
            events_pruned("shop"),
            Holds::Bytes,
            writers![
                Store::prune_events,
                add_events_pruned,
                Store::purge_webstore,
            ],
        ),
        row(
            "f + webstore id + 0 + day + order id",
            frozen_delivery_key("shop", Day(20_000), OrderId(9)),
            record::<DeliveryRecord>(),
            writers![
                Store::freeze_deliveries,
                Store::write_account,
                add_frozen_delivery,
                Store::add_frozen_lists_removal,
                Store::purge_webstore,
            ],
        ),
        row(
            "f + webstore id + 0 + day",
            frozen_day_key("shop", Day(20_000)),
            record::<FrozenDayRecord>(),
            writers![
                Store::freeze_deliveries,
                add_frozen_day,
                Store::add_frozen_lists_removal,
                Store::purge_webstore
            ],
        ),
        row(
            "m frozen/ + webstore id",
            freeze_mark_key("shop"),
            Holds::Bytes,
            writers![
                Store::freeze_deliveries,
                add_freeze_mark,
                Store::add_frozen_lists_removal,
                Store::purge_webstore
            ],
        ),
        row(
            "m charged/ + webstore id",
            charge_mark_key("shop"),
            Holds::Bytes,
            writers![
                Store::write_charge_mark,
                add_freeze_mark,
                Store::add_frozen_lists_removal,
                Store::purge_webstore
            ],
        ),
    ]
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::store::keys::META;

    /// The cells of the table under `## Key layout` in `markdown`, row by row (the header
    /// row and the separator row skipped): each row's three cells as written.
    fn key_table(markdown: &str) -> Vec<[String; 3]> {
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
                let cells: Vec<&str> = row.trim().trim_matches('|').split('|').collect();
                assert_eq!(cells.len(), 3, "three cells: {row}");
                [0, 1, 2].map(|i| cells[i].trim().to_owned())
            })
            .collect()
    }

    /// What a cell sets in backticks, each span once.
    fn spans(cell: &str) -> BTreeSet<&str> {
        cell.split('`').skip(1).step_by(2).collect()
    }

    /// Each row of `documented` against the code's: the key as the code builds it, the
    /// value naming the record type the code stores under it (with the version it writes)
    /// and no other, the writers naming exactly the functions that write it. Every mismatch,
    /// one a line.
    fn differences(documented: &[[String; 3]], layout: &[KeyRow]) -> Vec<String> {
        let mut found = Vec::new();
        let keys: Vec<String> = documented
            .iter()
            .map(|[key, _, _]| key.replace('`', ""))
            .collect();
        let names: Vec<&str> = layout.iter().map(|row| row.key).collect();
        if keys != names {
            found.push(format!(
                "the keys: the table has {keys:?}, the code {names:?}"
            ));
            return found;
        }
        let records: BTreeSet<&str> = layout
            .iter()
            .filter_map(|row| row.holds.record_path())
            .collect();
        for ([_, value, written_by], row) in documented.iter().zip(layout) {
            let name = row.key;
            let named = spans(value);
            match &row.holds {
                Holds::Record { path, version } => {
                    let wanted = format!("`{path}`, version {version}");
                    if !value.contains(&wanted) {
                        found.push(format!("{name}: the value does not say {wanted}"));
                    }
                }
                Holds::Chunk { encoder, record } => {
                    for wanted in [encoder, record] {
                        if !named.contains(wanted) {
                            found.push(format!("{name}: the value does not name `{wanted}`"));
                        }
                    }
                }
                Holds::Bytes => {}
            }
            for other in named.intersection(&records) {
                if Some(*other) != row.holds.record_path() {
                    found.push(format!(
                        "{name}: the value names `{other}`, which the code does not store there"
                    ));
                }
            }
            let writers: BTreeSet<&str> = row.writers.iter().map(String::as_str).collect();
            let cited = spans(written_by);
            for missing in writers.difference(&cited) {
                found.push(format!("{name}: the writers leave out `{missing}`"));
            }
            for extra in cited.difference(&writers) {
                found.push(format!(
                    "{name}: the writers name `{extra}`, which kinds::layout() does not give \
                     as writing it"
                ));
            }
        }
        found
    }

    #[test]
    fn the_key_table_in_docs_storage_md_is_the_code_s() {
        let documented = key_table(include_str!("../../../docs/storage.md"));
        let layout = layout();
        let found = differences(&documented, &layout);
        assert!(
            found.is_empty(),
            "docs/storage.md's key table and kinds::layout() differ:\n{}",
            found.join("\n")
        );
        for row in &layout {
            let (name, key) = (row.key, &row.example);
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

    /// The check above fails on a table that says what the code does not: each kind of
    /// mistake, made to the real table.
    #[test]
    fn a_key_table_that_differs_from_the_code_is_found_out() {
        let documented = key_table(include_str!("../../../docs/storage.md"));
        let layout = layout();
        let row_of = |key: &str| {
            documented
                .iter()
                .position(|[name, _, _]| name.replace('`', "") == key)
                .expect("the row")
        };
        let broken = |change: &dyn Fn(&mut Vec<[String; 3]>)| {
            let mut table = documented.clone();
            change(&mut table);
            differences(&table, &layout)
        };
        let event = row_of("v + webstore id + 0 + sequence number");
        let order = row_of("o + customer id + order id");
        let session = row_of("s + session digest");
        let email = row_of("e + webstore id + 0 + folded email + 0 + customer id");
        // A version the code does not write.
        let written = format!(", version {}", EventRecord::VERSION);
        let older = format!(", version {}", EventRecord::VERSION - 1);
        assert!(
            !broken(&|table| table[event][1] = table[event][1].replace(&written, &older))
                .is_empty()
        );
        // Another kind's record.
        assert!(!broken(&|table| {
            table[email][1].push_str(" (`kinds::customers::CustomerRecord`, version 2)")
        })
        .is_empty());
        // A writer left out, and one that does not write the key.
        assert!(!broken(&|table| {
            table[order][2] = table[order][2].replace("`Store::update_order`", "an update")
        })
        .is_empty());
        assert!(!broken(&|table| table[session][2].push_str("; `Store::create_order`")).is_empty());
        // Rows swapped.
        assert!(!broken(&|table| table.swap(order, event)).is_empty());
    }
}
