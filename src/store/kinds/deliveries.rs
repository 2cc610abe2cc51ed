//! Frozen deliveries: each date's list of deliveries as it was when the date locked for
//! packing, kept so that nothing done later (an order's change, a catalogue's price, a
//! customer's discount) changes what was packed, and so that an order's history may forget
//! the versions only those dates needed (`domain::order::history::OrderHistory::folded`).
//!
//! - `f` + webstore id + 0 + day + order id: one delivery ([`DeliveryRecord`]: the customer
//!   and their delivery service then, the box, the extras that went, exclusions,
//!   substitutions, the price, the delivery's status).
//! - `f` + webstore id + 0 + day: the date, frozen whole ([`FrozenDayRecord`]: the regular
//!   deliveries withheld, by reason), written with the date's last deliveries.
//! - `m frozen/` + webstore id: the first and the last date frozen ([`FreezeMark`]), written
//!   with each date's last deliveries: the dates from the first on are answered from their
//!   lists, the dates before it (before this release froze any) from the orders' histories.
//!
//! - `m charged/` + webstore id: the last date whose deliveries the charging duty has
//!   charged (`service::charging`): the day's key bytes. Below it nothing is pending.
//!
//! A day is its number since 1970-01-01 as a big-endian `u32` with the sign bit flipped, so
//! that byte order is date order. A date is frozen in batches, each a change of its own;
//! written again (a node that stopped half-way), a batch writes the same keys: the date is
//! frozen once, when its own record is in.
//!
//! Stored and exported: as they are, with the date and order in the key; its export lines
//! (`transfer::format::FrozenDeliveryLine`, `FrozenDayLine`) name them.
//!
//! Must not touch: what a date's deliveries are (the service's freezing decides), the log,
//! HTTP.

use serde::{Deserialize, Serialize};

use super::orders::ExtraRecord;
use crate::domain::account::delivery_mark::DeliveryStatus;
use crate::domain::day::Day;
use crate::domain::ids::OrderId;
use crate::domain::money::Amount;
use crate::domain::order::content::ExtraLine;
use crate::domain::order::history::Goods;
use crate::store::codec::{decode, decode_payload, encode, CodecError, Kind, Record};
use crate::store::error::corrupt;
use crate::store::keys::webstore_prefix;
use crate::store::log::wal::LogEntry;
use crate::store::{Store, StoreError, WriteBatch, Written};

/// Frozen deliveries and frozen dates, per webstore.
pub const FROZEN: u8 = b'f';

/// `m frozen/` + webstore id: the first and last date frozen.
pub const FREEZE_MARK: &[u8] = b"mfrozen/";

/// `m charged/` + webstore id: the last date charged.
pub const CHARGE_MARK: &[u8] = b"mcharged/";

/// `m charged/` + webstore id.
pub fn charge_mark_key(webstore: &str) -> Vec<u8> {
    let mut key = CHARGE_MARK.to_vec();
    key.extend_from_slice(webstore.as_bytes());
    key
}

/// The key bytes of a day: its number with the sign bit flipped, big-endian.
pub fn day_bytes(day: Day) -> [u8; 4] {
    ((day.0 as u32) ^ 0x8000_0000).to_be_bytes()
}

/// The day of [`day_bytes`].
pub fn day_of(bytes: [u8; 4]) -> Day {
    Day((u32::from_be_bytes(bytes) ^ 0x8000_0000) as i32)
}

/// `f` + webstore id + 0 + day: where a date's frozen record is, and the prefix of its
/// deliveries.
pub fn frozen_day_key(webstore: &str, day: Day) -> Vec<u8> {
    let mut key = webstore_prefix(FROZEN, webstore);
    key.extend_from_slice(&day_bytes(day));
    key
}

/// `f` + webstore id + 0 + day + order id: one frozen delivery.
pub fn frozen_delivery_key(webstore: &str, day: Day, order: OrderId) -> Vec<u8> {
    let mut key = frozen_day_key(webstore, day);
    key.extend_from_slice(&order.0.to_be_bytes());
    key
}

/// `m frozen/` + webstore id.
pub fn freeze_mark_key(webstore: &str) -> Vec<u8> {
    let mut key = FREEZE_MARK.to_vec();
    key.extend_from_slice(webstore.as_bytes());
    key
}

/// The webstore, day and (for a delivery) order of an `f` key.
pub fn frozen_key_parts(key: &[u8]) -> Option<(&str, Day, Option<OrderId>)> {
    let rest = key.strip_prefix(&[FROZEN])?;
    let split = rest.iter().position(|b| *b == 0)?;
    let webstore = std::str::from_utf8(&rest[..split]).ok()?;
    let tail = &rest[split + 1..];
    let day = day_of(tail.get(..4)?.try_into().ok()?);
    match tail.len() {
        4 => Some((webstore, day, None)),
        12 => Some((
            webstore,
            day,
            Some(OrderId(u64::from_be_bytes(tail[4..].try_into().ok()?))),
        )),
        _ => None,
    }
}

/// One delivery of a frozen date, as it was when the date locked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryRecord {
    /// The customer.
    pub customer_id: u64,
    /// Their delivery service then.
    pub delivery_service_id: u64,
    /// The box.
    pub box_id: u64,
    /// The extras that went with it.
    pub extras: Vec<ExtraRecord>,
    /// Excluded box items.
    pub exclusions: Vec<u64>,
    /// Substitute box items.
    pub substitutions: Vec<u64>,
    /// What it costs, in minor units.
    pub price: i64,
    /// [`DeliveryStatus`]'s code.
    pub status: u8,
    /// What the driver or the producer noted when marking it (version 2 on).
    pub note: Option<String>,
}

impl Record for DeliveryRecord {
    const KIND: Kind = Kind::FrozenDelivery;
    const VERSION: u16 = 2;
    fn decode_older(version: u16, payload: &[u8]) -> Result<Self, CodecError> {
        match version {
            1 => decode_payload::<DeliveryRecordV1>(payload).map(DeliveryRecordV1::upgrade),
            other => Err(CodecError::UnsupportedVersion(other)),
        }
    }
}

/// A frozen delivery as version 1 wrote it: without a note.
#[derive(Deserialize)]
struct DeliveryRecordV1 {
    customer_id: u64,
    delivery_service_id: u64,
    box_id: u64,
    extras: Vec<ExtraRecord>,
    exclusions: Vec<u64>,
    substitutions: Vec<u64>,
    price: i64,
    status: u8,
}

impl DeliveryRecordV1 {
    fn upgrade(self) -> DeliveryRecord {
        DeliveryRecord {
            customer_id: self.customer_id,
            delivery_service_id: self.delivery_service_id,
            box_id: self.box_id,
            extras: self.extras,
            exclusions: self.exclusions,
            substitutions: self.substitutions,
            price: self.price,
            status: self.status,
            note: None,
        }
    }
}

impl DeliveryRecord {
    /// The record of `goods` delivered to customer `customer_id` with
    /// `delivery_service_id`, at `price`, not marked yet.
    pub fn pending(
        customer_id: u64,
        delivery_service_id: u64,
        goods: Goods,
        price: Amount,
    ) -> DeliveryRecord {
        DeliveryRecord {
            customer_id,
            delivery_service_id,
            box_id: goods.box_id,
            extras: goods
                .extras
                .iter()
                .map(|line| ExtraRecord {
                    id: line.id,
                    quantity: line.quantity,
                })
                .collect(),
            exclusions: goods.exclusions,
            substitutions: goods.substitutions,
            price: price.0,
            status: DeliveryStatus::Pending.code(),
            note: None,
        }
    }

    /// Its status (a code this release does not know reads as pending: never charged).
    pub fn status(&self) -> DeliveryStatus {
        DeliveryStatus::of_code(self.status).unwrap_or(DeliveryStatus::Pending)
    }

    /// What went out.
    pub fn into_goods(self) -> Goods {
        Goods {
            box_id: self.box_id,
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
        }
    }
}

/// A date frozen whole: how many of its regular deliveries were withheld, by reason.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrozenDayRecord {
    /// Within a pause.
    pub paused: u64,
    /// On a skipped date.
    pub skipped: u64,
    /// From the cancel date on.
    pub cancelled: u64,
    /// While the customer was halted.
    pub halted: u64,
}

impl Record for FrozenDayRecord {
    const KIND: Kind = Kind::FrozenDay;
}

/// The dates of a webstore frozen: every date from `since` to `through`, both included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FreezeMark {
    /// The first date frozen.
    pub since: Day,
    /// The last date frozen.
    pub through: Day,
}

impl FreezeMark {
    /// As stored: both days' key bytes.
    pub fn bytes(self) -> Vec<u8> {
        let mut bytes = day_bytes(self.since).to_vec();
        bytes.extend_from_slice(&day_bytes(self.through));
        bytes
    }

    /// A stored mark; `None` for bytes that are not one.
    pub fn of_bytes(bytes: &[u8]) -> Option<FreezeMark> {
        let (since, through) = bytes.split_at_checked(4)?;
        Some(FreezeMark {
            since: day_of(since.try_into().ok()?),
            through: day_of(through.try_into().ok()?),
        })
    }

    /// Whether `day` is frozen.
    pub fn holds(self, day: Day) -> bool {
        self.since <= day && day <= self.through
    }
}

/// The last batch of a date: its record and the mark through it.
pub struct DayFrozen {
    /// The date's withheld deliveries.
    pub record: FrozenDayRecord,
    /// The mark through the date.
    pub mark: FreezeMark,
}

impl Store {
    /// Where webstore `webstore_id`'s frozen dates stand, if it froze any.
    pub fn freeze_mark(&self, webstore_id: &str) -> Result<Option<FreezeMark>, StoreError> {
        let key = freeze_mark_key(webstore_id);
        match self.inner.storage.get(&key)? {
            None => Ok(None),
            Some(bytes) => FreezeMark::of_bytes(&bytes)
                .map(Some)
                .ok_or_else(|| corrupt(&key, crate::store::codec::CodecError::NotARecord)),
        }
    }

    /// Writes a batch of date `day`'s frozen deliveries of `webstore_id`, with, for its last,
    /// the date's record and the mark through it, in one change (refused while the webstore
    /// is frozen for a move). Durable once the answer completes.
    pub fn freeze_deliveries(
        &self,
        webstore_id: &str,
        day: Day,
        batch: &[(OrderId, DeliveryRecord)],
        last: Option<&DayFrozen>,
    ) -> Result<Written, StoreError> {
        let open = self.open_for_webstore(webstore_id)?;
        let records: Vec<(Vec<u8>, Vec<u8>)> = batch
            .iter()
            .map(|(order, record)| {
                (
                    frozen_delivery_key(webstore_id, day, *order),
                    encode(record),
                )
            })
            .collect();
        let day_write = last.map(|last| {
            (
                frozen_day_key(webstore_id, day),
                encode(&last.record),
                freeze_mark_key(webstore_id),
                last.mark.bytes(),
            )
        });
        let bytes = records
            .iter()
            .map(|(key, value)| LogEntry::encoded_len(key, value))
            .sum::<usize>()
            + day_write.as_ref().map_or(0, |(key, value, mark, bytes)| {
                LogEntry::encoded_len(key, value) + LogEntry::encoded_len(mark, bytes)
            });
        open.fits(bytes)?;
        let mut entry = open.entry();
        for (key, value) in records {
            self.put(&mut entry, &key, value)?;
        }
        if let Some((key, value, mark, bytes)) = day_write {
            self.put(&mut entry, &key, value)?;
            self.put(&mut entry, &mark, bytes)?;
        }
        open.commit(entry)
    }

    /// The last date of webstore `webstore_id` whose deliveries were all charged, if any.
    pub fn charge_mark(&self, webstore_id: &str) -> Result<Option<Day>, StoreError> {
        let key = charge_mark_key(webstore_id);
        match self.inner.storage.get(&key)? {
            None => Ok(None),
            Some(bytes) => <[u8; 4]>::try_from(bytes.as_ref())
                .map(|bytes| Some(day_of(bytes)))
                .map_err(|_| corrupt(&key, crate::store::codec::CodecError::NotARecord)),
        }
    }

    /// Writes that every delivery of webstore `webstore_id` up to `day` is charged (or
    /// marked by hand). Durable once the answer completes.
    pub fn write_charge_mark(&self, webstore_id: &str, day: Day) -> Result<Written, StoreError> {
        let open = self.open_for_webstore(webstore_id)?;
        let key = charge_mark_key(webstore_id);
        let value = day_bytes(day).to_vec();
        open.fits(LogEntry::encoded_len(&key, &value))?;
        let mut entry = open.entry();
        self.put(&mut entry, &key, value)?;
        open.commit(entry)
    }

    /// Date `day`'s frozen record, if the date is frozen whole.
    pub fn frozen_day(
        &self,
        webstore_id: &str,
        day: Day,
    ) -> Result<Option<FrozenDayRecord>, StoreError> {
        let key = frozen_day_key(webstore_id, day);
        self.inner
            .storage
            .get(&key)?
            .map(|bytes| decode(&bytes).map_err(|source| corrupt(&key, source)))
            .transpose()
    }

    /// Order `order`'s frozen delivery on `day`, if it has one.
    pub fn frozen_delivery(
        &self,
        webstore_id: &str,
        day: Day,
        order: OrderId,
    ) -> Result<Option<DeliveryRecord>, StoreError> {
        let key = frozen_delivery_key(webstore_id, day, order);
        self.inner
            .storage
            .get(&key)?
            .map(|bytes| decode(&bytes).map_err(|source| corrupt(&key, source)))
            .transpose()
    }

    /// Calls `visit` with every frozen delivery of `day`, by order id; the first that does
    /// not decode is an error naming its key.
    pub fn for_each_frozen_delivery(
        &self,
        webstore_id: &str,
        day: Day,
        visit: &mut dyn FnMut(OrderId, DeliveryRecord),
    ) -> Result<(), StoreError> {
        let prefix = frozen_day_key(webstore_id, day);
        let mut failure = None;
        self.inner.storage.for_each(&prefix, &mut |key, bytes| {
            let Some((_, _, Some(order))) = frozen_key_parts(key) else {
                return true;
            };
            match decode::<DeliveryRecord>(bytes) {
                Ok(record) => {
                    visit(order, record);
                    true
                }
                Err(source) => {
                    failure = Some(corrupt(key, source));
                    false
                }
            }
        })?;
        failure.map_or(Ok(()), Err)
    }
}

/// Adds an imported frozen delivery to `batch`.
pub fn add_frozen_delivery(
    batch: &mut WriteBatch,
    webstore_id: &str,
    day: Day,
    order: OrderId,
    record: &DeliveryRecord,
) {
    batch.put(frozen_delivery_key(webstore_id, day, order), encode(record));
}

impl Store {
    /// Adds to `batch` the removal of every frozen list of webstore `webstore_id` and of its
    /// mark: what an import does before it brings the webstore's own, where this store holds
    /// the webstore without a customer (a node that served it past a cut-off froze its empty
    /// dates). Those lists are empty, so nothing is lost; were the import taken back, the
    /// freezing duty freezes the dates again, as empty as they were.
    pub fn add_frozen_lists_removal(
        &self,
        batch: &mut WriteBatch,
        webstore_id: &str,
    ) -> Result<(), StoreError> {
        self.inner
            .storage
            .for_each(&webstore_prefix(FROZEN, webstore_id), &mut |key, _| {
                batch.delete(key.to_vec());
                true
            })?;
        for key in [freeze_mark_key(webstore_id), charge_mark_key(webstore_id)] {
            if self.inner.storage.get(&key)?.is_some() {
                batch.delete(key);
            }
        }
        Ok(())
    }
}

/// Adds an imported webstore's frozen dates, and the last date it charged, to `batch`.
pub fn add_freeze_mark(
    batch: &mut WriteBatch,
    webstore_id: &str,
    mark: FreezeMark,
    charged_through: Option<Day>,
) {
    batch.put(freeze_mark_key(webstore_id), mark.bytes());
    if let Some(day) = charged_through {
        batch.put(charge_mark_key(webstore_id), day_bytes(day).to_vec());
    }
}

/// Adds an imported frozen date's record to `batch`.
pub fn add_frozen_day(
    batch: &mut WriteBatch,
    webstore_id: &str,
    day: Day,
    record: &FrozenDayRecord,
) {
    batch.put(frozen_day_key(webstore_id, day), encode(record));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn day_keys_sort_by_date_and_read_back() {
        for (a, b) in [
            (-5, -4),
            (-1, 0),
            (0, 1),
            (20_000, 20_001),
            (i32::MIN, i32::MAX),
        ] {
            assert!(day_bytes(Day(a)) < day_bytes(Day(b)), "{a} {b}");
            assert_eq!(day_of(day_bytes(Day(a))), Day(a));
        }
        let key = frozen_delivery_key("shop", Day(20_000), OrderId(7));
        assert_eq!(
            frozen_key_parts(&key),
            Some(("shop", Day(20_000), Some(OrderId(7))))
        );
        assert_eq!(
            frozen_key_parts(&frozen_day_key("shop", Day(-3))),
            Some(("shop", Day(-3), None))
        );
        assert!(frozen_day_key("shop", Day(20_000)) < key);
        assert!(key < frozen_day_key("shop", Day(20_001)));
        let mark = FreezeMark {
            since: Day(19_990),
            through: Day(20_010),
        };
        assert_eq!(FreezeMark::of_bytes(&mark.bytes()), Some(mark));
        assert!(mark.holds(Day(20_000)) && !mark.holds(Day(20_011)));
    }
}
