//! `boxsub seed`: writes a store of N customers with one order each straight into a data
//! directory, for measuring restart time and memory at scale (and for benchmarks). It goes
//! through the same record encoding and key layout as the server, in large batches, and
//! refuses a directory that already holds customers.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use crate::domain::catalogue::{Catalogue, Webstore};
use crate::domain::customer::{Address, Customer};
use crate::domain::email::Email;
use crate::domain::ids::{CustomerId, IdRange, OrderId};
use crate::domain::order::{Frequency, NewOrder, Order};
use crate::domain::schedule::{Day, Schedule, WeekDays};
use crate::store::disk::Reserve;
use crate::store::{
    add_new_customer, add_order, Durability, Store, StoreError, StoreOptions, WriteBatch,
};

/// What a seeding run wrote.
#[derive(Debug, Clone, Copy)]
pub struct Seeded {
    /// Customers written.
    pub customers: u64,
    /// Orders written.
    pub orders: u64,
    /// Seconds it took.
    pub seconds: f64,
}

/// Writes `customers` customers of the catalogue's first webstore, one order each, with ids
/// from 1, into an empty store in `dir`.
pub fn seed(dir: &Path, catalogue: &Catalogue, customers: u64) -> Result<Seeded, StoreError> {
    let started = Instant::now();
    let store = Store::open(
        dir,
        StoreOptions {
            durability: Durability::Async,
            cache_bytes: 64 * 1024 * 1024,
            reserve: Reserve::Bytes(0),
        },
        Arc::new(|error: &StoreError| eprintln!("boxsub seed: {error}")),
    )?;
    if store.high_water(IdRange::default())?.any_customer_id > 0 {
        return Err(StoreError::Engine {
            context: format!("seeding {}", dir.display()),
            detail: "the store already holds customers; seed an empty directory".into(),
        });
    }
    let webstore = catalogue
        .webstores()
        .first()
        .ok_or_else(|| StoreError::Engine {
            context: "seeding".into(),
            detail: "the catalogue has no webstore".into(),
        })?;
    let created_at = crate::actors::customer::unix_now();
    let plan = Plan::for_webstore(webstore, created_at);
    let mut batch = WriteBatch::default();
    for n in 1..=customers {
        plan.write(&mut batch, webstore, n, created_at);
        if n % 2_000 == 0 {
            store.apply(std::mem::take(&mut batch))?;
        }
    }
    store.apply(batch)?;
    store.reserve_order_ids(customers)?;
    store.close()?;
    Ok(Seeded {
        customers,
        orders: customers,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The catalogue choices every seeded customer and order uses.
struct Plan {
    delivery_service_id: u64,
    box_id: u64,
    /// The service's delivery days; order `n` is delivered weekly on the `n`th of them
    /// (cyclically), so a store's orders spread over the week.
    delivery_days: Vec<u8>,
    /// Every seeded order's start date: the day the store is seeded.
    start: Day,
}

impl Plan {
    fn for_webstore(webstore: &Webstore, created_at: i64) -> Plan {
        let service = webstore.delivery_services.values().next();
        let delivery_days: Vec<u8> = service
            .map(|s| s.week_days().days().collect())
            .unwrap_or_default();
        Plan {
            delivery_service_id: service.map_or(1, |s| s.id),
            box_id: webstore.visible_boxes().next().map_or(1, |b| b.id),
            delivery_days: if delivery_days.is_empty() {
                vec![1]
            } else {
                delivery_days
            },
            start: Day(created_at.div_euclid(86_400) as i32),
        }
    }

    fn write(&self, batch: &mut WriteBatch, webstore: &Webstore, n: u64, created_at: i64) {
        let webstore_id = &webstore.settings.id;
        let mut address = Address::default();
        address.0[0] = Some(format!("{n} Seed Street"));
        address.0[3] = Some("London".into());
        let customer = Customer {
            id: CustomerId(n),
            webstore: webstore.idx,
            number: n,
            first_name: "Seed".into(),
            last_name: Some(format!("Customer{n}")),
            email: Email::from_trusted(format!("seed{n}@example.com")),
            delivery_service_id: self.delivery_service_id,
            address,
            password_hash: None,
        };
        let order = Order {
            id: OrderId(n),
            customer_id: CustomerId(n),
            details: NewOrder {
                box_id: self.box_id,
                frequency: Frequency::Weekly,
                extras_one_off: false,
                extras: Vec::new(),
                exclusions: Vec::new(),
                substitutions: Vec::new(),
                schedule: Schedule {
                    start: self.start,
                    week_days: WeekDays::only(
                        self.delivery_days[(n % self.delivery_days.len() as u64) as usize],
                    ),
                },
            },
            created_at,
        };
        // Seeded emails are distinct by construction and the store is empty, so the email's
        // uniqueness needs no check here.
        let _email = add_new_customer(batch, &customer, webstore_id);
        add_order(batch, &order);
    }
}
