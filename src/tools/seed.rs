//! `boxsub-tools seed`: writes a store of N customers with K orders each (one by default) straight
//! into a data directory, for measuring restart time and memory at scale (and for
//! benchmarks). It goes through the same record encoding and key layout as the server, in
//! large batches, and refuses a directory that already holds customers. It owns `seed`'s
//! settings ([`SeedConfig`]). Must not touch: the command line that parses them and prints
//! what was seeded ([`crate::tools`]), nor the store's key layout and encoding, which it only
//! uses.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use clap::Args;

use crate::domain::catalogue::{Catalogue, Webstore};
use crate::domain::customer::{Address, Customer};
use crate::domain::day::Day;
use crate::domain::day::WeekDays;
use crate::domain::email::Email;
use crate::domain::ids::{CustomerId, IdRange, OrderId};
use crate::domain::order::content::OrderContent;
use crate::domain::order::schedule::{Frequency, Schedule};
use crate::domain::order::Order;
use crate::store::disk::Reserve;
use crate::store::{
    add_new_customer, add_order, Durability, Store, StoreError, StoreOptions, WriteBatch,
};

/// Records (customers and orders) written per batch. Small on purpose: sled 0.34 keeps
/// large batches in memory far past its cache capacity (batches of 20,000 records took
/// 9.7 GB of memory to seed 2M orders, and 10M orders were killed for want of memory;
/// batches of 500 take 0.3 GB for 2M and 0.5 GB for 10M, and seed twice as fast).
const BATCH_RECORDS: u64 = 500;

/// Settings of `boxsub-tools seed`.
#[derive(Debug, Clone, Args)]
pub struct SeedConfig {
    /// How many customers.
    #[arg(long, default_value_t = 1_000_000)]
    pub customers: u64,
    /// Orders of each customer: weekly, on the delivery service's days in turn. Customer n's
    /// orders get ids (n-1)*K+1 to n*K.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub orders_per_customer: u64,
    /// An empty data directory to fill.
    #[arg(long)]
    pub data_dir: PathBuf,
    /// Catalogue whose first webstore the customers belong to (default: the demo catalogue).
    #[arg(long)]
    pub catalogue: Option<PathBuf>,
}

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

/// The id of the last order [`seed_orders`] writes: customer `n`'s orders are numbered
/// `(n - 1) * K + 1` to `n * K`, so the last customer holds the last order.
pub fn last_order_id(customers: u64, orders_per_customer: u64) -> u64 {
    customers * orders_per_customer
}

/// `boxsub-tools seed` as the command line asks: the catalogue file (or the demo catalogue), then
/// [`seed_orders`].
pub fn run(config: &SeedConfig) -> Result<Seeded, String> {
    let loaded_at = crate::clock::unix_now();
    let catalogue = match &config.catalogue {
        None => Catalogue::demo(loaded_at),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("reading {}: {e}", path.display()))?;
            Catalogue::parse(&text, loaded_at).map_err(|e| format!("{}: {e}", path.display()))?
        }
    };
    seed_orders(
        &config.data_dir,
        &catalogue,
        config.customers,
        config.orders_per_customer,
    )
    .map_err(|e| format!("data directory {}: {e}", config.data_dir.display()))
}

/// Writes `customers` customers of the catalogue's first webstore, one order each, with ids
/// from 1, into an empty store in `dir`.
pub fn seed(dir: &Path, catalogue: &Catalogue, customers: u64) -> Result<Seeded, StoreError> {
    seed_orders(dir, catalogue, customers, 1)
}

/// Writes `customers` customers of the catalogue's first webstore with `orders_per_customer`
/// orders each, customer ids from 1 and order ids from 1 (see [`last_order_id`]), into an
/// empty store in `dir`.
pub fn seed_orders(
    dir: &Path,
    catalogue: &Catalogue,
    customers: u64,
    orders_per_customer: u64,
) -> Result<Seeded, StoreError> {
    let started = Instant::now();
    let store = Store::open(
        dir,
        StoreOptions {
            durability: Durability::Unlogged,
            cache_bytes: 64 * 1024 * 1024,
            reserve: Reserve::Bytes(0),
        },
        Arc::new(|error: &StoreError| eprintln!("boxsub-tools seed: {error}")),
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
    let created_at = crate::clock::unix_now();
    let plan = Plan::for_webstore(webstore, created_at);
    let mut batch = WriteBatch::default();
    let mut in_batch = 0;
    for n in 1..=customers {
        plan.write(&mut batch, webstore, n, orders_per_customer, created_at);
        in_batch += 1 + orders_per_customer;
        if in_batch >= BATCH_RECORDS {
            store.apply(std::mem::take(&mut batch))?;
            in_batch = 0;
        }
    }
    store.apply(batch)?;
    let orders = last_order_id(customers, orders_per_customer);
    // Made durable by the close.
    drop(store.reserve_order_ids(0, orders)?);
    store.close()?;
    Ok(Seeded {
        customers,
        orders,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The catalogue choices every seeded customer and order uses.
struct Plan {
    delivery_service_id: u64,
    box_id: u64,
    /// The service's delivery days; order id `n` is delivered weekly on the `n`th of them
    /// (cyclically), so a store's orders, and one customer's, spread over the week.
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

    /// Customer `n` and its `orders` orders.
    fn write(
        &self,
        batch: &mut WriteBatch,
        webstore: &Webstore,
        n: u64,
        orders: u64,
        created_at: i64,
    ) {
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
            halts: crate::domain::halts::Halts::none(),
            account: crate::domain::account::Account::opened(CustomerId(n), 0),
        };
        // Seeded emails are distinct by construction and the store is empty, so the email's
        // uniqueness needs no check here.
        add_new_customer(batch, &customer, webstore_id);
        for id in (n - 1) * orders + 1..=n * orders {
            let content = OrderContent {
                box_id: self.box_id,
                frequency: Frequency::Weekly,
                extras_one_off: false,
                extras: Vec::new(),
                exclusions: Vec::new(),
                substitutions: Vec::new(),
                schedule: Schedule {
                    start: self.start,
                    week_days: WeekDays::only(
                        self.delivery_days[(id % self.delivery_days.len() as u64) as usize],
                    ),
                },
            };
            add_order(
                batch,
                &Order::new(OrderId(id), CustomerId(n), content, created_at),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(dir: &Path) -> Store {
        let options = StoreOptions {
            durability: Durability::Unlogged,
            cache_bytes: 1 << 20,
            reserve: Reserve::Bytes(0),
        };
        Store::open(dir, options, Arc::new(|_: &StoreError| {})).unwrap()
    }

    #[test]
    fn customers_get_consecutive_orders_on_the_service_days_in_turn() {
        let dir = tempfile::tempdir().unwrap();
        let catalogue = Catalogue::demo(0);
        let seeded = seed_orders(dir.path(), &catalogue, 4, 3).unwrap();
        assert_eq!((seeded.customers, seeded.orders), (4, 12));
        assert_eq!(last_order_id(4, 3), 12);
        let webstore = &catalogue.webstores()[0];
        let service = webstore.delivery_services.values().next().unwrap();
        let service_days = service.week_days();
        let store = open(dir.path());
        let census = store.verify().unwrap();
        assert_eq!((census.customers, census.orders), (4, 12));
        assert_eq!(store.high_water(IdRange::default()).unwrap().order_id, 12);
        for n in 1..=4 {
            let loaded = store.load_customer(CustomerId(n)).unwrap().unwrap();
            assert_eq!(loaded.record.delivery_service_id, service.id);
            let ids: Vec<u64> = loaded.orders.iter().map(|order| order.id.0).collect();
            assert_eq!(ids, vec![3 * n - 2, 3 * n - 1, 3 * n]);
            let mut days = Vec::new();
            for order in &loaded.orders {
                let week_days = order.content().schedule.week_days;
                let day: Vec<u8> = week_days.days().collect();
                assert_eq!(day.len(), 1, "one delivery day per order");
                assert!(service_days.contains(day[0]), "a day the service delivers");
                days.push(day[0]);
            }
            days.dedup();
            assert_eq!(days.len(), 3.min(service_days.days().count()));
        }
        // A second run into the same directory is refused.
        store.close().unwrap();
        drop(store);
        assert!(seed_orders(dir.path(), &catalogue, 1, 1).is_err());
    }
}
