//! Customers as exported: [`CustomerLine`], its address ([`AddressLine`], every field by
//! name) and its halts ([`HaltLine`], version 3 on, left out when there are none), to and
//! from the store's `CustomerRecord`. Customers carry their password hashes (a moved
//! webstore's customers keep signing in). Must not touch: the store but its record, files,
//! the other kinds' lines.

use serde::{Deserialize, Serialize};

use super::{date_text, BadLine};
use crate::domain::customer::ADDRESS_FIELDS;
use crate::domain::day::parse_iso_date;
use crate::store::kinds::customers::{CustomerRecord, HaltRecord};

/// A customer as exported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomerLine {
    /// Id.
    pub id: u64,
    /// Its webstore's id.
    pub webstore_id: String,
    /// Number within the webstore.
    pub number: u64,
    /// First name.
    pub first_name: String,
    /// Last name.
    pub last_name: Option<String>,
    /// Email as given.
    pub email: String,
    /// Delivery service.
    pub delivery_service_id: u64,
    /// The address fields.
    pub address: AddressLine,
    /// Argon2id PHC string.
    pub password_hash: Option<String>,
    /// Its halts, oldest first (version 3 on; left out when it has none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub halts: Vec<HaltLine>,
}

/// An address as exported: every field, `null` where absent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddressLine {
    address_1: Option<String>,
    address_2: Option<String>,
    suburb: Option<String>,
    city: Option<String>,
    postcode: Option<String>,
    delivery_note: Option<String>,
    home_phone: Option<String>,
    mobile_phone: Option<String>,
    work_phone: Option<String>,
}

/// A customer's halt, as exported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HaltLine {
    /// `YYYY-MM-DD`: the first date not delivered.
    pub from: String,
    /// `YYYY-MM-DD`: the first date delivered again, or `null` while it is on.
    pub until: Option<String>,
}

impl CustomerLine {
    /// The line of a stored customer.
    pub fn from_record(record: CustomerRecord) -> CustomerLine {
        let field = |i: usize| record.address.get(i).cloned().flatten();
        let address = AddressLine {
            address_1: field(0),
            address_2: field(1),
            suburb: field(2),
            city: field(3),
            postcode: field(4),
            delivery_note: field(5),
            home_phone: field(6),
            mobile_phone: field(7),
            work_phone: field(8),
        };
        CustomerLine {
            id: record.id,
            webstore_id: record.webstore_id,
            number: record.number,
            first_name: record.first_name,
            last_name: record.last_name,
            email: record.email,
            delivery_service_id: record.delivery_service_id,
            address,
            password_hash: record.password_hash,
            halts: record
                .halts
                .iter()
                .map(|halt| HaltLine {
                    from: date_text(halt.from_day),
                    until: halt.until_day.map(date_text),
                })
                .collect(),
        }
    }

    /// The record to store.
    pub fn into_record(self) -> Result<CustomerRecord, BadLine> {
        if self.id == 0 || self.number == 0 || self.webstore_id.is_empty() {
            return Err(BadLine(format!(
                "customer {}: the id, number and webstore_id must be set",
                self.id
            )));
        }
        let a = self.address;
        let address = vec![
            a.address_1,
            a.address_2,
            a.suburb,
            a.city,
            a.postcode,
            a.delivery_note,
            a.home_phone,
            a.mobile_phone,
            a.work_phone,
        ];
        debug_assert_eq!(address.len(), ADDRESS_FIELDS.len());
        let id = self.id;
        let day = |text: &str| {
            parse_iso_date(text)
                .map(|d| d.0)
                .ok_or_else(|| BadLine(format!("customer {id}: a halt's date is not a date")))
        };
        let mut halts = Vec::with_capacity(self.halts.len());
        for halt in &self.halts {
            halts.push(HaltRecord {
                from_day: day(&halt.from)?,
                until_day: halt.until.as_deref().map(day).transpose()?,
            });
        }
        let record = CustomerRecord {
            id: self.id,
            webstore_id: self.webstore_id,
            number: self.number,
            first_name: self.first_name,
            last_name: self.last_name,
            email: self.email,
            delivery_service_id: self.delivery_service_id,
            address,
            password_hash: self.password_hash,
            halts,
        };
        record
            .halts()
            .map_err(|broken| BadLine(format!("customer {id}: {broken}")))?;
        Ok(record)
    }
}
