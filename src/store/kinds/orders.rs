//! Orders: the `o` records under their customer (`OrderRecord`, format version 4: who placed
//! it, when, and its history, each content version nested once; with the reading of versions
//! 1 to 3); their part of `impl Store`: an order's create (its record waits behind the log,
//! in the pending layer) and change, the reads of one order and the walks over every order
//! (each once, `for_each_stored_order`), and the batch builders seeding and imports share. An
//! order is one record under its customer and nothing else: the order → customer index is
//! not stored, but rebuilt in memory from the `o` keys. The `o` keys and the chunks a
//! customer's orders are packed into are the pending layer's (`pending::order_chunks`, which
//! packs them), named from there.
//!
//! Stored and exported: the record keeps the frequency as a code, dates as day numbers and
//! weekdays as bits, compact for the order's every read; its export line
//! (`transfer::format::OrderLine`) names them (`weekly`, `2027-01-04`, `[1, 4]`), so that an
//! export reads without this code.
//!
//! Must not touch: customers' records and index entries, the log itself (an order's writes
//! are recorded in its change's `LogEntry`, which `Store::write_change` hands to the log),
//! HTTP.

use serde::{Deserialize, Serialize};

use super::idempotency::IdempotencyWrite;
use crate::domain::day::Day;
use crate::domain::day::WeekDays;
use crate::domain::ids::{CustomerId, OrderId};
use crate::domain::order::content::{ExtraLine, OrderContent};
use crate::domain::order::history::{
    ContentVersion, Lifecycle, LifecycleVersion, OrderHistory, Pause, NEVER_CHANGED,
};
use crate::domain::order::schedule::{Frequency, Schedule};
use crate::domain::order::Order;
use crate::store::codec::{decode, decode_payload, encode, CodecError, Kind, Record};
use crate::store::entries::EventWrite;
use crate::store::error::{corrupt, readable};
use crate::store::kinds::change::ChangeWrites;
use crate::store::log::wal::LogEntry;
use crate::store::pending::order_chunks::{
    for_each_stored_order, order_key, orders_of, stored_order, StoredOrder, ORDER,
};
use crate::store::snapshot::prefix_end;
use crate::store::{OnDurable, OpenForWrite, Store, StoreError, WriteBatch, Written};

/// An extra line as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtraRecord {
    /// Extra id.
    pub id: u64,
    /// Quantity.
    pub quantity: u32,
}

/// An order as stored (format version 4): who placed it and when, and its history, each
/// content version nested once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderRecord {
    /// Order id.
    pub id: u64,
    /// Customer id.
    pub customer_id: u64,
    /// Unix seconds.
    pub created_at: i64,
    /// The content versions, oldest first; the last is what the order delivers now. Never
    /// empty.
    pub versions: Vec<ContentRecord>,
    /// The lifecycle versions, oldest first.
    pub lifecycles: Vec<LifecycleRecord>,
    /// No date before it may change any more (`i32::MIN` for an order never changed).
    pub settled_before: i32,
    /// Unix seconds of the latest change (its creation until it changes).
    pub updated_at: i64,
}

/// A content version of an order, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContentRecord {
    /// The first date it is in force.
    pub effective_day: i32,
    /// Where its one-off extras count from.
    pub extras_since_day: i32,
    /// Box id.
    pub box_id: u64,
    /// 0 single, 1 weekly, 2 fortnightly.
    pub frequency: u8,
    /// Extras once only.
    pub extras_one_off: bool,
    /// Extras.
    pub extras: Vec<ExtraRecord>,
    /// Excluded box items.
    pub exclusions: Vec<u64>,
    /// Substitute box items.
    pub substitutions: Vec<u64>,
    /// The schedule's start date, as days since 1970-01-01 in the webstore's calendar.
    pub start_day: i32,
    /// The schedule's weekdays, bit 0 being Sunday.
    pub week_days: u8,
}

/// A lifecycle version, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LifecycleRecord {
    /// The first date it is in force.
    pub effective_day: i32,
    /// `cancel_date`, if cancelled.
    pub cancel_day: Option<i32>,
    /// `pause_date`, if paused.
    pub pause_day: Option<i32>,
    /// `resume_date`, if the pause has one.
    pub resume_day: Option<i32>,
    /// `skipped_dates`, sorted.
    pub skipped_days: Vec<i32>,
}

/// An order as format version 3 stored it: its latest content at the top, the rest of its
/// history beside it once it had changed (events of format version 3 hold it too).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(in crate::store) struct OrderRecordV3 {
    id: u64,
    customer_id: u64,
    box_id: u64,
    frequency: u8,
    extras_one_off: bool,
    extras: Vec<ExtraRecord>,
    exclusions: Vec<u64>,
    substitutions: Vec<u64>,
    created_at: i64,
    start_day: i32,
    week_days: u8,
    history: Option<HistoryRecordV3>,
}

/// What a version 3 record held of a changed order's history beside its latest content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct HistoryRecordV3 {
    effective_day: i32,
    extras_since_day: i32,
    earlier: Vec<ContentRecord>,
    lifecycles: Vec<LifecycleRecord>,
    settled_before: i32,
    updated_at: i64,
}

impl OrderRecordV3 {
    /// The same order with its latest content as its last version.
    pub(in crate::store) fn upgrade(self) -> OrderRecord {
        let (effective_day, extras_since_day) = self
            .history
            .as_ref()
            .map_or((self.start_day, self.start_day), |history| {
                (history.effective_day, history.extras_since_day)
            });
        let latest = ContentRecord {
            effective_day,
            extras_since_day,
            box_id: self.box_id,
            frequency: self.frequency,
            extras_one_off: self.extras_one_off,
            extras: self.extras,
            exclusions: self.exclusions,
            substitutions: self.substitutions,
            start_day: self.start_day,
            week_days: self.week_days,
        };
        match self.history {
            None => OrderRecord {
                id: self.id,
                customer_id: self.customer_id,
                created_at: self.created_at,
                versions: vec![latest],
                lifecycles: Vec::new(),
                settled_before: NEVER_CHANGED.0,
                updated_at: self.created_at,
            },
            Some(history) => {
                let mut versions = history.earlier;
                versions.push(latest);
                OrderRecord {
                    id: self.id,
                    customer_id: self.customer_id,
                    created_at: self.created_at,
                    versions,
                    lifecycles: history.lifecycles,
                    settled_before: history.settled_before,
                    updated_at: history.updated_at,
                }
            }
        }
    }
}

/// An order as format version 2 stored it, before orders had histories (events of format
/// version 2 hold it too).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(in crate::store) struct OrderRecordV2 {
    id: u64,
    customer_id: u64,
    box_id: u64,
    frequency: u8,
    extras_one_off: bool,
    extras: Vec<ExtraRecord>,
    exclusions: Vec<u64>,
    substitutions: Vec<u64>,
    created_at: i64,
    start_day: i32,
    week_days: u8,
}

impl OrderRecordV2 {
    /// The order as it was: one version from its start, active, never paused or skipped.
    pub(in crate::store) fn upgrade(self) -> OrderRecord {
        OrderRecordV3 {
            id: self.id,
            customer_id: self.customer_id,
            box_id: self.box_id,
            frequency: self.frequency,
            extras_one_off: self.extras_one_off,
            extras: self.extras,
            exclusions: self.exclusions,
            substitutions: self.substitutions,
            created_at: self.created_at,
            start_day: self.start_day,
            week_days: self.week_days,
            history: None,
        }
        .upgrade()
    }
}

/// An order as format version 1 stored it, before orders had schedules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct OrderRecordV1 {
    id: u64,
    customer_id: u64,
    box_id: u64,
    frequency: u8,
    extras_one_off: bool,
    extras: Vec<ExtraRecord>,
    exclusions: Vec<u64>,
    substitutions: Vec<u64>,
    created_at: i64,
}

impl OrderRecordV1 {
    /// The order with the schedule it kept in practice: delivered from the day it was
    /// created (UTC), on that weekday.
    fn upgrade(self) -> OrderRecord {
        let start = Day(self.created_at.div_euclid(86_400) as i32);
        OrderRecordV2 {
            id: self.id,
            customer_id: self.customer_id,
            box_id: self.box_id,
            frequency: self.frequency,
            extras_one_off: self.extras_one_off,
            extras: self.extras,
            exclusions: self.exclusions,
            substitutions: self.substitutions,
            created_at: self.created_at,
            start_day: start.0,
            week_days: WeekDays::only(start.weekday()).bits(),
        }
        .upgrade()
    }
}

impl Record for OrderRecord {
    const KIND: Kind = Kind::Order;
    const VERSION: u16 = 4;
    fn decode_older(version: u16, payload: &[u8]) -> Result<Self, CodecError> {
        match version {
            1 => decode_payload::<OrderRecordV1>(payload).map(OrderRecordV1::upgrade),
            2 => decode_payload::<OrderRecordV2>(payload).map(OrderRecordV2::upgrade),
            3 => decode_payload::<OrderRecordV3>(payload).map(OrderRecordV3::upgrade),
            other => Err(CodecError::UnsupportedVersion(other)),
        }
    }
}

fn frequency_code(frequency: Frequency) -> u8 {
    match frequency {
        Frequency::Single => 0,
        Frequency::Weekly => 1,
        Frequency::Fortnightly => 2,
    }
}

fn frequency_of(code: u8) -> Result<Frequency, CodecError> {
    match code {
        0 => Ok(Frequency::Single),
        1 => Ok(Frequency::Weekly),
        2 => Ok(Frequency::Fortnightly),
        other => Err(CodecError::Payload(format!(
            "unknown frequency code {other}"
        ))),
    }
}

impl ContentRecord {
    fn from_version(version: &ContentVersion) -> ContentRecord {
        let content = &version.content;
        ContentRecord {
            effective_day: version.effective.0,
            extras_since_day: version.extras_since.0,
            box_id: content.box_id,
            frequency: frequency_code(content.frequency),
            extras_one_off: content.extras_one_off,
            extras: content
                .extras
                .iter()
                .map(|line| ExtraRecord {
                    id: line.id,
                    quantity: line.quantity,
                })
                .collect(),
            exclusions: content.exclusions.clone(),
            substitutions: content.substitutions.clone(),
            start_day: content.schedule.start.0,
            week_days: content.schedule.week_days.bits(),
        }
    }

    fn into_version(self) -> Result<ContentVersion, CodecError> {
        Ok(ContentVersion {
            effective: Day(self.effective_day),
            extras_since: Day(self.extras_since_day),
            content: OrderContent {
                box_id: self.box_id,
                frequency: frequency_of(self.frequency)?,
                extras_one_off: self.extras_one_off,
                extras: self
                    .extras
                    .into_iter()
                    .map(|line| ExtraLine {
                        id: line.id,
                        quantity: line.quantity,
                    })
                    .collect(),
                exclusions: self.exclusions,
                substitutions: self.substitutions,
                schedule: Schedule {
                    start: Day(self.start_day),
                    week_days: WeekDays::from_bits(self.week_days),
                },
            },
        })
    }
}

impl LifecycleRecord {
    fn from_version(version: &LifecycleVersion) -> LifecycleRecord {
        let lifecycle = &version.lifecycle;
        LifecycleRecord {
            effective_day: version.effective.0,
            cancel_day: lifecycle.cancel_date.map(|d| d.0),
            pause_day: lifecycle.pause.map(|pause| pause.from.0),
            resume_day: lifecycle.pause.and_then(|pause| pause.until).map(|d| d.0),
            skipped_days: lifecycle.skipped_dates.iter().map(|d| d.0).collect(),
        }
    }

    fn into_version(self) -> Result<LifecycleVersion, CodecError> {
        let pause = match (self.pause_day, self.resume_day) {
            (Some(from), until) => Some(Pause {
                from: Day(from),
                until: until.map(Day),
            }),
            (None, None) => None,
            (None, Some(_)) => {
                return Err(CodecError::Payload(
                    "a lifecycle resumes without a pause".into(),
                ))
            }
        };
        Ok(LifecycleVersion {
            effective: Day(self.effective_day),
            lifecycle: Lifecycle {
                cancel_date: self.cancel_day.map(Day),
                pause,
                skipped_dates: self.skipped_days.into_iter().map(Day).collect(),
            },
        })
    }
}

impl OrderRecord {
    /// The stored form of an order.
    pub fn from_order(order: &Order) -> Self {
        let history = &order.history;
        OrderRecord {
            id: order.id.0,
            customer_id: order.customer_id.0,
            created_at: order.created_at,
            versions: history
                .contents()
                .iter()
                .map(ContentRecord::from_version)
                .collect(),
            lifecycles: history
                .lifecycles()
                .iter()
                .map(LifecycleRecord::from_version)
                .collect(),
            settled_before: history.settled_before().0,
            updated_at: history.updated_at(),
        }
    }

    /// The order; an unknown frequency code or a history that breaks its rules is a
    /// decoding error.
    pub fn into_order(self) -> Result<Order, CodecError> {
        let contents = self
            .versions
            .into_iter()
            .map(ContentRecord::into_version)
            .collect::<Result<Vec<_>, _>>()?;
        let lifecycles = self
            .lifecycles
            .into_iter()
            .map(LifecycleRecord::into_version)
            .collect::<Result<Vec<_>, _>>()?;
        let history = OrderHistory::from_parts(
            contents,
            lifecycles,
            Day(self.settled_before),
            self.updated_at,
        )
        .map_err(|broken| CodecError::Payload(broken.to_owned()))?;
        Ok(Order {
            id: OrderId(self.id),
            customer_id: CustomerId(self.customer_id),
            created_at: self.created_at,
            history,
        })
    }
}

/// How an order's record is written with its change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OrderWrite {
    /// A new order: its record waits behind the log (when there is one) until a pass packs
    /// it into its customer's chunk.
    BehindTheLog,
    /// A changed order: written through to its chunk, so that a walk over a customer's
    /// orders never takes the chunk's older copy for a newer waiting one.
    Through,
}

impl Store {
    /// Writes a new order of a customer of webstore `webstore_id`: its idempotency record if
    /// it has one, then its record (the commit point: an idempotency record counts only while
    /// the order it names exists), each a single-key write; the record may reach sled after
    /// the log, behind which it is already
    /// durable. `on_durable` runs once both are on disk (see [`OnDurable`]).
    ///
    /// An order is one record under its customer and nothing else: the order → customer
    /// index is kept in memory and rebuilt from these keys at start.
    pub fn create_order(
        &self,
        order: &Order,
        webstore_id: &str,
        idempotency: Option<IdempotencyWrite>,
        event: Option<EventWrite>,
        on_durable: OnDurable,
    ) -> Result<Written, StoreError> {
        let how = OrderWrite::BehindTheLog;
        self.write_order(order, webstore_id, idempotency, event, on_durable, how)
    }

    /// Writes a changed order of a customer of webstore `webstore_id` (its record replaces the
    /// one stored): its idempotency record if the change has one, its event, then its
    /// record, in one log entry. The record is written through to the customer's chunk, not
    /// left waiting behind the log as a new order's is: a walk over a customer's orders takes
    /// each id once, and a chunk's copy could otherwise be taken for a newer waiting one. An
    /// idempotency record of a change counts only while the order's `updated_at` is at least
    /// its own time (the service checks), so a record whose change was lost names nothing.
    /// `on_durable` runs once the writes are on disk.
    pub fn update_order(
        &self,
        order: &Order,
        webstore_id: &str,
        idempotency: Option<IdempotencyWrite>,
        event: Option<EventWrite>,
        on_durable: OnDurable,
    ) -> Result<Written, StoreError> {
        let how = OrderWrite::Through;
        self.write_order(order, webstore_id, idempotency, event, on_durable, how)
    }

    /// An order's record written with its change (see [`Store::write_change`]), `how` the
    /// two callers above say.
    fn write_order(
        &self,
        order: &Order,
        webstore_id: &str,
        idempotency: Option<IdempotencyWrite>,
        event: Option<EventWrite>,
        on_durable: OnDurable,
        how: OrderWrite,
    ) -> Result<Written, StoreError> {
        let record = readable("order", &OrderRecord::from_order(order))?;
        let key = order_key(order.customer_id.0, order.id.0);
        self.write_change(
            webstore_id,
            idempotency,
            event,
            on_durable,
            ChangeWrites {
                customer: order.customer_id.0,
                bytes: LogEntry::encoded_len(&key, &record),
                write: |store: &Store, open: &OpenForWrite<'_>, entry: &mut LogEntry| {
                    if how == OrderWrite::BehindTheLog && open.is_logged() {
                        store.put_behind_log(entry, &key, record)
                    } else {
                        store.put(entry, &key, record)
                    }
                },
            },
        )
    }

    /// One stored order of a customer.
    pub fn load_order(
        &self,
        customer: CustomerId,
        order: OrderId,
    ) -> Result<Option<Order>, StoreError> {
        let key = order_key(customer.0, order.0);
        stored_order(&*self.inner.storage, customer.0, order.0)?
            .map(|bytes| decode_order(&bytes).map_err(|source| corrupt(&key, source)))
            .transpose()
    }

    /// Calls `visit` with each order stored under keys starting with `prefix` (see
    /// [`for_each_stored_order`]) until it returns false.
    pub(in crate::store) fn for_each_order_of(
        &self,
        prefix: &[u8],
        visit: &mut dyn FnMut(StoredOrder<'_>) -> bool,
    ) -> Result<(), StoreError> {
        let end = prefix_end(prefix);
        for_each_stored_order(&*self.inner.storage, prefix, end.as_deref(), visit)
    }

    /// Calls `visit` with the id, owner and order of every stored order of the customers
    /// with ids in `customers`, in key order (how the in-memory order indexes are rebuilt at
    /// start; disjoint ranges can be scanned at once). An order whose record does not decode
    /// comes with its error instead.
    pub fn for_each_order_schedule(
        &self,
        customers: std::ops::Range<u64>,
        visit: &mut dyn FnMut(OrderId, CustomerId, Result<Order, StoreError>),
    ) -> Result<(), StoreError> {
        let from = orders_of(customers.start);
        let to = orders_of(customers.end);
        for_each_stored_order(&*self.inner.storage, &from, Some(&to), &mut |stored| {
            let order = stored
                .record
                .and_then(decode_order)
                .map_err(|source| self.inner.unreadable.note(corrupt(stored.key, source)));
            visit(OrderId(stored.id), CustomerId(stored.customer), order);
            true
        })
    }

    /// How many orders customer `customer` has stored.
    pub fn order_count(&self, customer: CustomerId) -> Result<u64, StoreError> {
        let from = orders_of(customer.0);
        let to = orders_of(customer.0 + 1);
        let mut count = 0;
        for_each_stored_order(&*self.inner.storage, &from, Some(&to), &mut |_| {
            count += 1;
            true
        })?;
        Ok(count)
    }

    /// Calls `visit` with every stored order, by customer id then order id, until it returns
    /// false; the first record that does not decode is an error naming its key.
    pub fn for_each_order(
        &self,
        visit: &mut dyn FnMut(OrderRecord) -> bool,
    ) -> Result<(), StoreError> {
        let mut failure = None;
        self.for_each_order_of(&[ORDER], &mut |stored| match stored
            .record
            .and_then(decode::<OrderRecord>)
        {
            Ok(record) => visit(record),
            Err(source) => {
                failure = Some(corrupt(stored.key, source));
                false
            }
        })?;
        failure.map_or(Ok(()), Err)
    }

    /// Calls `visit` with the id of every stored order (imports check theirs against these).
    pub fn for_each_order_id(&self, visit: &mut dyn FnMut(OrderId)) -> Result<(), StoreError> {
        self.for_each_order_of(&[ORDER], &mut |stored| {
            visit(OrderId(stored.id));
            true
        })
    }
}

/// An order from its encoded record.
pub(in crate::store) fn decode_order(bytes: &[u8]) -> Result<Order, CodecError> {
    decode::<OrderRecord>(bytes).and_then(OrderRecord::into_order)
}

/// Adds an order's record to `batch` (its one write; see [`Store::create_order`]).
pub fn add_order(batch: &mut WriteBatch, order: &Order) {
    batch.put(
        order_key(order.customer_id.0, order.id.0),
        encode(&OrderRecord::from_order(order)),
    );
}

/// Adds an imported order record to `batch`.
pub fn add_order_record(batch: &mut WriteBatch, record: &OrderRecord) {
    batch.put(order_key(record.customer_id, record.id), encode(record));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::pending::order_chunks::{encode_order_chunk, order_parts};
    use proptest::prelude::*;

    /// Records of orders never changed: one version from their start.
    fn order_record() -> impl Strategy<Value = OrderRecord> {
        (
            (any::<u64>(), any::<u64>(), any::<i64>()),
            any::<u64>(),
            0u8..3,
            any::<bool>(),
            proptest::collection::vec((any::<u64>(), any::<u32>()), 0..8),
            proptest::collection::vec(any::<u64>(), 0..8),
            proptest::collection::vec(any::<u64>(), 0..8),
            (any::<i32>(), 0u8..128),
        )
            .prop_map(
                |(
                    (id, customer_id, created_at),
                    box_id,
                    frequency,
                    extras_one_off,
                    extras,
                    exclusions,
                    substitutions,
                    (start_day, week_days),
                )| OrderRecord {
                    id,
                    customer_id,
                    created_at,
                    versions: vec![ContentRecord {
                        effective_day: start_day,
                        extras_since_day: start_day,
                        box_id,
                        frequency,
                        extras_one_off,
                        extras: extras
                            .into_iter()
                            .map(|(id, quantity)| ExtraRecord { id, quantity })
                            .collect(),
                        exclusions,
                        substitutions,
                        start_day,
                        week_days,
                    }],
                    lifecycles: Vec::new(),
                    settled_before: NEVER_CHANGED.0,
                    updated_at: created_at,
                },
            )
    }

    /// An order with two content versions and two lifecycle versions.
    fn changed_order() -> Order {
        let first = OrderContent::weekly_for_test(217).with_extras(&[(28, 1)]);
        let second = OrderContent::weekly_for_test(218).with_exclusions(&[240]);
        let history = OrderHistory::from_parts(
            vec![
                ContentVersion {
                    effective: Day(0),
                    content: first.clone(),
                    extras_since: Day(0),
                },
                ContentVersion {
                    effective: Day(14),
                    content: second,
                    extras_since: Day(0),
                },
            ],
            vec![
                LifecycleVersion {
                    effective: Day(7),
                    lifecycle: Lifecycle {
                        cancel_date: None,
                        pause: Some(Pause {
                            from: Day(21),
                            until: Some(Day(35)),
                        }),
                        skipped_dates: vec![Day(42)],
                    },
                },
                LifecycleVersion {
                    effective: Day(10),
                    lifecycle: Lifecycle {
                        cancel_date: Some(Day(70)),
                        pause: Some(Pause {
                            from: Day(21),
                            until: None,
                        }),
                        skipped_dates: vec![],
                    },
                },
            ],
            Day(10),
            1_799_000_000,
        )
        .unwrap();
        first.placed(7, 3, 1_798_000_000).changed(history)
    }

    /// `payload` behind a header of the order kind and format `version`, as an older
    /// release wrote it.
    fn written_as(version: u16, payload: &impl Serialize) -> Vec<u8> {
        let payload =
            bincode::serde::encode_to_vec(payload, crate::store::codec::config()).unwrap();
        let mut bytes = crate::store::codec::MAGIC.to_vec();
        bytes.push(Kind::Order as u8);
        bytes.extend_from_slice(&version.to_be_bytes());
        bytes.extend_from_slice(&crc32fast::hash(&payload).to_be_bytes());
        bytes.extend_from_slice(&payload);
        bytes
    }

    #[test]
    fn a_changed_order_keeps_its_whole_history() {
        let order = changed_order();
        let record = OrderRecord::from_order(&order);
        assert_eq!(record.versions.len(), 2);
        assert_eq!(record.versions[1].box_id, 218, "the latest content last");
        let back = decode::<OrderRecord>(&encode(&record))
            .unwrap()
            .into_order()
            .unwrap();
        assert_eq!(back, order);
        assert_eq!(back.updated_at(), 1_799_000_000);
        assert!(!back.lifecycle().active());
    }

    #[test]
    fn a_new_order_reads_back_unchanged() {
        let order = OrderContent::weekly_for_test(217).placed(7, 3, 5);
        let record = OrderRecord::from_order(&order);
        assert_eq!(record.versions.len(), 1);
        assert_eq!(record.settled_before, NEVER_CHANGED.0);
        let back = record.into_order().unwrap();
        assert!(back.history.is_unchanged());
        assert_eq!(back.updated_at(), 5);
        assert_eq!(back, order);
    }

    #[test]
    fn a_broken_stored_history_is_an_error_not_a_panic() {
        let mut record = OrderRecord::from_order(&changed_order());
        record.versions[0].effective_day = 99;
        assert!(record.into_order().is_err());
        let mut record = OrderRecord::from_order(&changed_order());
        record.lifecycles[0].pause_day = None;
        assert!(record.into_order().is_err());
        let mut record = OrderRecord::from_order(&changed_order());
        record.versions.clear();
        assert!(record.into_order().is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn orders_round_trip(record in order_record()) {
            let decoded = decode::<OrderRecord>(&encode(&record));
            prop_assert_eq!(&decoded, &Ok(record.clone()));
            let order = decoded.unwrap().into_order().unwrap();
            prop_assert_eq!(OrderRecord::from_order(&order), record);
        }

        #[test]
        fn corrupted_bytes_are_an_error_not_a_panic(
            record in order_record(),
            at in any::<prop::sample::Index>(),
            mask in 1u8..=255,
        ) {
            // CRC-32 catches every error confined to 32 consecutive bits, so any one
            // corrupted byte, header or payload, must be refused.
            let mut bytes = encode(&record);
            let i = at.index(bytes.len());
            bytes[i] ^= mask;
            prop_assert!(decode::<OrderRecord>(&bytes).is_err());
        }

        #[test]
        fn an_order_chunk_hands_back_each_record_with_its_id(
            records in proptest::collection::vec(order_record(), 1..8),
        ) {
            let encoded: Vec<(u64, Vec<u8>)> =
                records.iter().map(|record| (record.id, encode(record))).collect();
            let chunk = encode_order_chunk(encoded.iter().map(|(id, bytes)| (*id, &bytes[..])));
            let parts = order_parts(0, &chunk).unwrap();
            prop_assert_eq!(parts.len(), records.len());
            for ((id, bytes), record) in parts.into_iter().zip(&records) {
                prop_assert_eq!(id, record.id);
                prop_assert_eq!(decode::<OrderRecord>(bytes), Ok(record.clone()));
            }
            // A lone record is read under its key's id, undecoded.
            let single = encode(&records[0]);
            prop_assert_eq!(order_parts(42, &single), Ok(vec![(42, &single[..])]));
        }

        #[test]
        fn a_corrupted_or_cut_order_chunk_is_an_error_not_a_panic(
            records in proptest::collection::vec(order_record(), 1..4),
            at in any::<prop::sample::Index>(),
            mask in 1u8..=255,
            keep in any::<prop::sample::Index>(),
        ) {
            let encoded: Vec<(u64, Vec<u8>)> =
                records.iter().map(|record| (record.id, encode(record))).collect();
            let chunk = encode_order_chunk(encoded.iter().map(|(id, bytes)| (*id, &bytes[..])));
            let read = |bytes: &[u8]| {
                order_parts(0, bytes).and_then(|parts| {
                    parts
                        .into_iter()
                        .try_for_each(|(_, record)| decode::<OrderRecord>(record).map(drop))
                })
            };
            let i = at.index(chunk.len());
            let mut corrupted = chunk.clone();
            corrupted[i] ^= mask;
            let corrupted_read = read(&corrupted);
            // The kind byte may turn into a lone order's; the rest is under the checksum.
            if i != 3 {
                prop_assert!(corrupted_read.is_err());
            }
            let cut = keep.index(chunk.len());
            prop_assert!(read(&chunk[..cut]).is_err());
        }
    }

    #[test]
    fn orders_of_format_1_read_with_the_schedule_they_kept() {
        // An order stored before schedules: created on Monday 2026-11-23 at 10:00 UTC.
        let old = OrderRecordV1 {
            id: 7,
            customer_id: 3,
            box_id: 217,
            frequency: 1,
            extras_one_off: false,
            extras: vec![ExtraRecord {
                id: 28,
                quantity: 1,
            }],
            exclusions: vec![240],
            substitutions: vec![],
            created_at: 1_795_428_000,
        };
        let order = decode::<OrderRecord>(&written_as(1, &old))
            .unwrap()
            .into_order()
            .unwrap();
        assert_eq!(order.id, OrderId(7));
        assert_eq!(
            order.content().schedule.start.date().to_string(),
            "2026-11-23"
        );
        assert_eq!(order.content().schedule.week_days, WeekDays::only(1));
        assert!(order.history.is_unchanged());
    }

    #[test]
    fn orders_of_format_2_read_as_never_changed() {
        let order = OrderContent::weekly_for_test(217)
            .with_extras(&[(28, 1)])
            .placed(7, 3, 1_795_428_000);
        let content = order.content();
        let old = OrderRecordV2 {
            id: 7,
            customer_id: 3,
            box_id: content.box_id,
            frequency: 1,
            extras_one_off: false,
            extras: vec![ExtraRecord {
                id: 28,
                quantity: 1,
            }],
            exclusions: vec![],
            substitutions: vec![],
            created_at: order.created_at,
            start_day: content.schedule.start.0,
            week_days: content.schedule.week_days.bits(),
        };
        let read = decode::<OrderRecord>(&written_as(2, &old)).unwrap();
        assert_eq!(read, OrderRecord::from_order(&order));
        assert_eq!(read.into_order().unwrap(), order);
    }

    #[test]
    fn orders_of_format_3_read_with_their_latest_content_last() {
        let order = changed_order();
        let versions = OrderRecord::from_order(&order).versions;
        let (latest, earlier) = versions.split_last().unwrap();
        let old = OrderRecordV3 {
            id: 7,
            customer_id: 3,
            box_id: latest.box_id,
            frequency: latest.frequency,
            extras_one_off: latest.extras_one_off,
            extras: latest.extras.clone(),
            exclusions: latest.exclusions.clone(),
            substitutions: latest.substitutions.clone(),
            created_at: order.created_at,
            start_day: latest.start_day,
            week_days: latest.week_days,
            history: Some(HistoryRecordV3 {
                effective_day: latest.effective_day,
                extras_since_day: latest.extras_since_day,
                earlier: earlier.to_vec(),
                lifecycles: OrderRecord::from_order(&order).lifecycles,
                settled_before: 10,
                updated_at: 1_799_000_000,
            }),
        };
        let read = decode::<OrderRecord>(&written_as(3, &old)).unwrap();
        assert_eq!(read.into_order().unwrap(), order);
        // Never changed, in format 3: no history beside its content.
        let new = OrderContent::weekly_for_test(217).placed(8, 3, 5);
        let latest = &OrderRecord::from_order(&new).versions[0];
        let old = OrderRecordV3 {
            id: 8,
            customer_id: 3,
            box_id: 217,
            frequency: latest.frequency,
            extras_one_off: false,
            extras: vec![],
            exclusions: vec![],
            substitutions: vec![],
            created_at: 5,
            start_day: latest.start_day,
            week_days: latest.week_days,
            history: None,
        };
        let read = decode::<OrderRecord>(&written_as(3, &old)).unwrap();
        assert_eq!(read.into_order().unwrap(), new);
    }
}
