//! The census of `--verify-store` and of the check after start-up: every customer, order and
//! idempotency record read and decoded, and counted. Must not touch: writes.

use super::codec::{decode, CodecError};
use super::error::corrupt;
use super::kinds::customers::{self, CustomerRecord};
use super::kinds::orders::decode_order;
use super::{Store, StoreError};
use crate::store::pending::order_chunks;

/// What [`Store::verify`] counted.
#[derive(Debug, Clone, Copy, Default)]
pub struct Census {
    /// Customer records.
    pub customers: u64,
    /// Order records.
    pub orders: u64,
    /// Idempotency records.
    pub idempotency_records: u64,
}

impl Store {
    /// Reads and decodes every customer, order and idempotency record, counting them; the
    /// first record that does not decode is an error naming its key.
    pub fn verify(&self) -> Result<Census, StoreError> {
        let mut census = Census::default();
        let mut failure = None;
        let mut check =
            |prefix: u8, count: &mut u64, decodes: fn(&[u8]) -> Result<(), CodecError>| {
                self.inner
                    .storage
                    .for_each(&[prefix], &mut |key, value| match decodes(value) {
                        Ok(()) => {
                            *count += 1;
                            true
                        }
                        Err(source) => {
                            failure = Some(corrupt(key, source));
                            false
                        }
                    })
            };
        check(customers::CUSTOMER, &mut census.customers, |v| {
            decode::<CustomerRecord>(v).map(drop)
        })?;
        if failure.is_none() {
            // Every version decodes; the census counts keys (their last versions).
            self.for_each_idempotency(&mut |_, _, _| {
                census.idempotency_records += 1;
                true
            })?;
        }
        if failure.is_none() {
            self.for_each_order_of(&[order_chunks::ORDER], &mut |stored| {
                match stored.record.and_then(decode_order) {
                    Ok(_) => census.orders += 1,
                    Err(source) => failure = Some(corrupt(stored.key, source)),
                }
                failure.is_none()
            })?;
        }
        match failure {
            Some(error) => Err(error),
            None => Ok(census),
        }
    }
}
