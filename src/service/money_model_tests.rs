//! The service's money against a small reference ledger, with the clock moved by hand
//! through cut-offs and `delivered_at` (`freeze_locked_dates_at`, `charge_delivered_dates_at`):
//! random payments (some retried with their key), reversals (some twice), adjustments,
//! discounts and spend limits, delivery marks, and restarts that drop the service without a
//! shutdown. After every step, for each customer: the balance is the sum of its ledger and
//! the model's (payments less reversals, plus adjustments, less the frozen price of each
//! delivery delivered); the ledger's running balances and numbers hold; the halt by balance
//! is exactly "at or below the threshold"; each frozen delivery keeps its frozen price, is
//! charged once `delivered_at` has passed unless marked not delivered, and is never pending
//! again once marked.
//!
//! Tests only. Must not touch: HTTP, the duties' timers (nothing here runs on its own).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use proptest::prelude::*;
use serde_json::json;

use super::tests::{customer_body, harness, order_body, restarted, Harness};
use super::{KeyedWrite, ServiceError};
use crate::actors::customer::{AccountChange, AccountPosted};
use crate::clock::unix_now;
use crate::domain::account::adjustment::NewAdjustment;
use crate::domain::account::delivery_mark::{DeliveryMark, DeliveryStatus};
use crate::domain::account::payment::{NewPayment, PaymentMethod};
use crate::domain::account::settings::AccountSettings;
use crate::domain::day::Day;
use crate::domain::idempotency::{IdempotencyKey, Pending, RecordedResponse};
use crate::domain::ids::{CustomerId, OrderId};
use crate::domain::money::{Amount, Discount};

const CUSTOMERS: usize = 3;

#[derive(Debug, Clone)]
enum Step {
    Pay {
        customer: usize,
        cents: i64,
        retried: bool,
    },
    Reverse {
        customer: usize,
        which: usize,
    },
    Adjust {
        customer: usize,
        cents: i64,
    },
    Discount {
        customer: usize,
        ten_thousandths: u16,
    },
    Threshold {
        customer: usize,
        cents: Option<i64>,
    },
    Mark {
        customer: usize,
        delivered: bool,
    },
    Advance {
        hours: i64,
    },
    Restart,
}

fn step() -> impl Strategy<Value = Step> {
    let customer = 0..CUSTOMERS;
    prop_oneof![
        3 => (customer.clone(), 1i64..8_000, any::<bool>())
            .prop_map(|(customer, cents, retried)| Step::Pay { customer, cents, retried }),
        1 => (customer.clone(), 0usize..4).prop_map(|(customer, which)| Step::Reverse { customer, which }),
        2 => (customer.clone(), -5_000i64..5_000)
            .prop_filter("not zero", |(_, cents)| *cents != 0)
            .prop_map(|(customer, cents)| Step::Adjust { customer, cents }),
        1 => (customer.clone(), 0u16..=2_500)
            .prop_map(|(customer, ten_thousandths)| Step::Discount { customer, ten_thousandths }),
        1 => (customer.clone(), proptest::option::of(-6_000i64..2_000))
            .prop_map(|(customer, cents)| Step::Threshold { customer, cents }),
        2 => (customer, any::<bool>()).prop_map(|(customer, delivered)| Step::Mark { customer, delivered }),
        4 => (6i64..40).prop_map(|hours| Step::Advance { hours }),
        1 => Just(Step::Restart),
    ]
}

/// What the model knows of one customer.
#[derive(Debug, Default)]
struct Modelled {
    id: u64,
    order: u64,
    /// Payments and adjustments, less reversals.
    credited: i64,
    /// Each payment's id, amount and whether it is reversed.
    payments: Vec<(u64, i64, bool)>,
    threshold: Option<i64>,
    /// The deliveries marked by hand: date → delivered.
    marked: BTreeMap<i32, bool>,
}

/// A frozen delivery as first seen: its price, and its status last seen.
#[derive(Debug, Clone, Copy)]
struct Seen {
    price: i64,
    status: DeliveryStatus,
}

fn keyed(key: String) -> Pending<AccountPosted> {
    Pending {
        key: IdempotencyKey::parse(&key).unwrap(),
        body_sha256: [3; 32],
        render: Box::new(|_: &AccountPosted| RecordedResponse {
            status: 201,
            location: None,
            body: b"{}".to_vec(),
        }),
    }
}

fn open(dir: &Path) -> Harness {
    harness(dir, Duration::from_secs(10))
}

/// Checks every rule of the module's note for every customer.
fn check(
    h: &Harness,
    model: &[Modelled],
    seen: &mut BTreeMap<(u64, i32), Seen>,
    now: i64,
) -> Result<(), TestCaseError> {
    let webstore = &h.webstore;
    for customer in model {
        let id = CustomerId(customer.id);
        let account = h.service.account(webstore, id).unwrap();
        let ledger = h.service.ledger(webstore, id, 0, 500).unwrap().transactions;
        let mut running = 0;
        for (n, transaction) in ledger.iter().enumerate() {
            running += transaction.amount.0;
            prop_assert_eq!(transaction.balance.0, running);
            prop_assert_eq!(transaction.number, n as u64 + 1);
        }
        prop_assert_eq!(
            account.balance.0,
            running,
            "the balance is the ledger's sum"
        );
        // The customer's frozen deliveries, as the store holds them.
        let mut charged = 0;
        let frozen_dates: Vec<i32> = seen
            .keys()
            .filter(|(order, _)| *order == customer.order)
            .map(|(_, date)| *date)
            .collect();
        let mut dates = frozen_dates.clone();
        for day in
            Day(now.div_euclid(86_400) as i32 - 40).0..=Day(now.div_euclid(86_400) as i32 + 2).0
        {
            if !dates.contains(&day) {
                dates.push(day);
            }
        }
        for date in dates {
            let record = h
                .store
                .frozen_delivery(&webstore.settings.id, Day(date), OrderId(customer.order))
                .unwrap();
            let Some(record) = record else {
                prop_assert!(
                    !frozen_dates.contains(&date),
                    "a frozen delivery stays frozen"
                );
                continue;
            };
            let status = record.status();
            let entry = seen.entry((customer.order, date)).or_insert(Seen {
                price: record.price,
                status,
            });
            prop_assert_eq!(entry.price, record.price, "a frozen price never changes");
            if entry.status != DeliveryStatus::Pending {
                prop_assert_ne!(status, DeliveryStatus::Pending, "never pending again");
            }
            entry.status = status;
            let due = webstore
                .delivered_at
                .charged_from(Day(date), &webstore.zone, webstore.cutoff)
                .is_some_and(|from| from <= now);
            match customer.marked.get(&date) {
                Some(true) => prop_assert_eq!(status, DeliveryStatus::Delivered),
                Some(false) => prop_assert_eq!(status, DeliveryStatus::NotDelivered),
                None if due => {
                    prop_assert_eq!(status, DeliveryStatus::Delivered, "charged once due")
                }
                None => prop_assert_eq!(status, DeliveryStatus::Pending, "not charged before"),
            }
            if status == DeliveryStatus::Delivered {
                charged += record.price;
            }
        }
        prop_assert_eq!(
            account.balance.0,
            customer.credited - charged,
            "the model's balance"
        );
        let halted = customer.threshold.is_some_and(|t| account.balance.0 <= t);
        prop_assert_eq!(
            account.halted_by_balance,
            halted,
            "the halt follows the threshold"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn money_follows_a_reference_ledger_through_the_clock_and_restarts(
        steps in proptest::collection::vec(step(), 1..40),
    ) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let dir = tempfile::tempdir().unwrap();
            let mut h = open(dir.path());
            let mut model: Vec<Modelled> = Vec::new();
            for n in 0..CUSTOMERS {
                let body = customer_body(&format!("m{n}@example.com"));
                let Ok(KeyedWrite::Made(customer)) =
                    h.service.create_customer(&h.webstore, &body, None).await
                else {
                    panic!("the customer is made");
                };
                let order = order_body(json!({
                    "customer_id": customer.id.0, "box_id": 217 + n as u64 % 2,
                    "frequency": "weekly", "week_days": [1, 2, 3, 4, 5],
                }));
                let Ok(KeyedWrite::Made(order)) = h.service.create_order(&h.webstore, order, None).await
                else {
                    panic!("the order is made");
                };
                model.push(Modelled { id: customer.id.0, order: order.id.0, ..Modelled::default() });
            }
            let mut seen = BTreeMap::new();
            let mut now = unix_now();
            for (n, step) in steps.into_iter().enumerate() {
                match step {
                    Step::Pay { customer, cents, retried } => {
                        let c = &mut model[customer];
                        let payment = NewPayment {
                            amount: Amount(cents),
                            method: PaymentMethod::Cash,
                            description: None,
                            reference: None,
                            date: h.webstore.today(now),
                        };
                        let tries = if retried { 2 } else { 1 };
                        for attempt in 0..tries {
                            let written = h
                                .service
                                .post_to_account(
                                    &h.webstore,
                                    CustomerId(c.id),
                                    AccountChange::Pay(payment.clone()),
                                    keyed(format!("pay-{n}")),
                                )
                                .await
                                .unwrap();
                            match (attempt, written) {
                                (0, KeyedWrite::Made(posted)) => {
                                    let id = posted.payment.as_ref().unwrap().id;
                                    c.payments.push((id, cents, false));
                                    c.credited += cents;
                                }
                                (1, KeyedWrite::Replayed(_)) => {}
                                (attempt, other) => {
                                    prop_assert!(false, "attempt {attempt}: {other:?}")
                                }
                            }
                        }
                    }
                    Step::Reverse { customer, which } => {
                        let c = &mut model[customer];
                        let Some(payment) = c.payments.get_mut(which) else { continue };
                        let change = AccountChange::Reverse { payment_id: payment.0, date: h.webstore.today(now) };
                        let reversed = h
                            .service
                            .post_to_account(&h.webstore, CustomerId(c.id), change, keyed(format!("rev-{n}")))
                            .await;
                        match (payment.2, reversed) {
                            (false, Ok(KeyedWrite::Made(_))) => {
                                payment.2 = true;
                                c.credited -= payment.1;
                            }
                            (true, Err(ServiceError::Invalid(errors))) => {
                                prop_assert!(format!("{errors:?}").contains("payment"), "{errors:?}");
                            }
                            (was, other) => prop_assert!(false, "reversed {was}: {other:?}"),
                        }
                    }
                    Step::Adjust { customer, cents } => {
                        let c = &mut model[customer];
                        let change = AccountChange::Adjust(NewAdjustment {
                            amount: Amount(cents),
                            description: "Model".into(),
                            date: h.webstore.today(now),
                        });
                        let adjusted = h
                            .service
                            .post_to_account(&h.webstore, CustomerId(c.id), change, keyed(format!("adj-{n}")))
                            .await
                            .unwrap();
                        prop_assert!(matches!(adjusted, KeyedWrite::Made(_)));
                        c.credited += cents;
                    }
                    Step::Discount { customer, ten_thousandths } => {
                        let settings = AccountSettings {
                            discount: Discount::of(ten_thousandths),
                            threshold: None,
                        };
                        h.service
                            .set_account(&h.webstore, CustomerId(model[customer].id), settings)
                            .await
                            .unwrap();
                    }
                    Step::Threshold { customer, cents } => {
                        let settings = AccountSettings {
                            discount: None,
                            threshold: Some(cents.map(Amount)),
                        };
                        h.service
                            .set_account(&h.webstore, CustomerId(model[customer].id), settings)
                            .await
                            .unwrap();
                        model[customer].threshold = cents;
                    }
                    Step::Mark { customer, delivered } => {
                        let c = &mut model[customer];
                        let latest = seen.keys().filter(|(order, _)| *order == c.order).map(|(_, d)| *d).max();
                        let status = if delivered { DeliveryStatus::Delivered } else { DeliveryStatus::NotDelivered };
                        let mark = DeliveryMark { status, note: None };
                        match latest {
                            Some(date) => {
                                h.service
                                    .mark_delivery(&h.webstore, OrderId(c.order), Day(date), mark)
                                    .await
                                    .unwrap();
                                c.marked.insert(date, delivered);
                            }
                            None => {
                                // Nothing frozen of it yet: a date far ahead is refused.
                                let refused = h
                                    .service
                                    .mark_delivery(&h.webstore, OrderId(c.order), h.webstore.today(now).plus(30), mark)
                                    .await;
                                prop_assert!(matches!(refused, Err(ServiceError::Invalid(_))), "{refused:?}");
                            }
                        }
                    }
                    Step::Advance { hours } => {
                        now += hours * 3_600;
                        h.service.freeze_locked_dates_at(&h.webstore, now).await.unwrap();
                        // Twice: the second run finds nothing more to charge.
                        h.service.charge_delivered_dates_at(&h.webstore, now).await.unwrap();
                        let again = h.service.charge_delivered_dates_at(&h.webstore, now).await.unwrap();
                        prop_assert_eq!(again, 0, "a run charges nothing twice");
                    }
                    Step::Restart => h = restarted(h, Duration::from_secs(10)),
                }
                check(&h, &model, &mut seen, now)?;
            }
            Ok(())
        })?;
    }
}
