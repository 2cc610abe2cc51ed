//! A producer's delivery day as the page shows it: the packing summary (boxes by count,
//! extras by quantity, exclusions and substitutions by item) and the delivery list grouped
//! into routes (one per delivery service), each delivery with its price and status, each
//! route's and the day's total, and the balance of a customer at or below their spend
//! limit, computed from the service's list of that day's deliveries, which is the API's
//! list. Pure: names come from the catalogue given, nothing
//! is read here. Must not touch: HTTP, templates (the page renders this), the service.

use std::collections::BTreeMap;

use crate::domain::account::delivery_mark::DeliveryStatus;
use crate::domain::account::halted_by_balance;
use crate::domain::catalogue::Webstore;
use crate::domain::day::Day;
use crate::domain::money::Amount;
use crate::domain::order::history::WithheldCounts;
use crate::service::{DayList, Delivery};

/// The day's deliveries, summed and grouped.
#[derive(Debug, Default)]
pub struct DayView {
    /// How many deliveries in all.
    pub total: usize,
    /// Each box delivered, with how many, by box id.
    pub boxes: Vec<Counted>,
    /// Each extra delivered, with the sum of its quantities, by extra id.
    pub extras: Vec<Counted>,
    /// Each item excluded, with how many boxes exclude it, by item id.
    pub exclusions: Vec<Counted>,
    /// Each item substituted, with how many boxes substitute it, by item id.
    pub substitutions: Vec<Counted>,
    /// The routes, in the list's order (by delivery service id).
    pub routes: Vec<RouteView>,
    /// What the day's deliveries cost, together.
    pub total_price: Amount,
    /// The regular deliveries not made that day, by reason (paused, skipped, cancelled,
    /// halted).
    pub withheld: WithheldCounts,
}

/// A thing of the catalogue and how many of it.
#[derive(Debug, PartialEq, Eq)]
pub struct Counted {
    /// Its id in the catalogue.
    pub id: u64,
    /// Its name (with the unit, for an extra), or its id when the catalogue no longer has it.
    pub name: String,
    /// How many.
    pub count: u64,
}

/// One delivery service's deliveries of the day.
#[derive(Debug)]
pub struct RouteView {
    /// The delivery service's id.
    pub id: u64,
    /// Its name.
    pub name: String,
    /// Its deliveries, in the list's order.
    pub rows: Vec<DeliveryRow>,
    /// What they cost, together.
    pub total_price: Amount,
}

/// One delivery, as the list's row shows it.
#[derive(Debug)]
pub struct DeliveryRow {
    /// The order delivered.
    pub order_id: u64,
    /// The customer's number, zero-padded.
    pub customer_number: String,
    /// The customer's name.
    pub customer_name: String,
    /// The address lines present (address 1 and 2, suburb, city, postcode).
    pub address: Vec<String>,
    /// The delivery note, if any.
    pub delivery_note: Option<String>,
    /// The phones present, labelled (`mobile 021 …`).
    pub phones: Vec<String>,
    /// The box's name.
    pub box_name: String,
    /// The items excluded, by name.
    pub exclusions: Vec<String>,
    /// The items substituted, by name.
    pub substitutions: Vec<String>,
    /// The extras delivered this time (`2 × Eggs (dozen)`); one-off extras only on the
    /// order's first delivery, as the API.
    pub extras: Vec<String>,
    /// What it costs (frozen with its date).
    pub price: Amount,
    /// Pending, delivered or not delivered.
    pub status: DeliveryStatus,
    /// The customer's balance, shown where it is at or below the spend limit in force.
    pub low_balance: Option<Amount>,
}

/// Address fields shown as the address, by position in the customer's address.
const ADDRESS_LINES: std::ops::Range<usize> = 0..5;
/// The delivery note's position.
const DELIVERY_NOTE: usize = 5;
/// The phones' positions and labels.
const PHONES: [(usize, &str); 3] = [(7, "mobile"), (6, "home"), (8, "work")];

impl DayView {
    /// The regular deliveries withheld, as the page says them.
    pub fn withheld_label(&self) -> String {
        withheld_label(&self.withheld)
    }

    /// The day of `list` (its deliveries in delivery order) in `webstore`.
    pub fn of(list: &DayList, webstore: &Webstore) -> DayView {
        DayView::build(list, webstore, true)
    }

    /// The day's counts alone (the packing summary, no routes): what the week page shows of
    /// each day.
    pub fn counts_of(list: &DayList, webstore: &Webstore) -> DayView {
        DayView::build(list, webstore, false)
    }

    fn build(list: &DayList, webstore: &Webstore, with_routes: bool) -> DayView {
        let deliveries = &list.deliveries;
        let mut boxes = BTreeMap::<u64, u64>::new();
        let mut extras = BTreeMap::<u64, u64>::new();
        let mut exclusions = BTreeMap::<u64, u64>::new();
        let mut substitutions = BTreeMap::<u64, u64>::new();
        let mut routes: Vec<RouteView> = Vec::new();
        for delivery in deliveries {
            let details = &delivery.goods;
            *boxes.entry(details.box_id).or_default() += 1;
            for id in &details.exclusions {
                *exclusions.entry(*id).or_default() += 1;
            }
            for id in &details.substitutions {
                *substitutions.entry(*id).or_default() += 1;
            }
            for line in &details.extras {
                *extras.entry(line.id).or_default() += u64::from(line.quantity);
            }
            if !with_routes {
                continue;
            }
            let service_id = delivery.delivery_service_id;
            if routes.last().is_none_or(|route| route.id != service_id) {
                routes.push(RouteView {
                    id: service_id,
                    name: webstore.delivery_services.get(&service_id).map_or_else(
                        || format!("Delivery service {service_id}"),
                        |ds| ds.name.clone(),
                    ),
                    rows: Vec::new(),
                    total_price: Amount::ZERO,
                });
            }
            if let Some(route) = routes.last_mut() {
                route.total_price = sum(route.total_price, delivery.price);
                route.rows.push(DeliveryRow::of(delivery, webstore));
            }
        }
        let counted = |counts: BTreeMap<u64, u64>, name: &dyn Fn(u64) -> String| {
            counts
                .into_iter()
                .map(|(id, count)| Counted {
                    id,
                    name: name(id),
                    count,
                })
                .collect()
        };
        DayView {
            total: deliveries.len(),
            boxes: counted(boxes, &|id| box_name(webstore, id)),
            extras: counted(extras, &|id| extra_name(webstore, id)),
            exclusions: counted(exclusions, &|id| item_name(webstore, id)),
            substitutions: counted(substitutions, &|id| item_name(webstore, id)),
            routes,
            total_price: deliveries
                .iter()
                .fold(Amount::ZERO, |total, delivery| sum(total, delivery.price)),
            withheld: list.withheld,
        }
    }
}

impl DeliveryRow {
    fn of(delivery: &Delivery, webstore: &Webstore) -> DeliveryRow {
        let details = &delivery.goods;
        let customer = &delivery.customer;
        let field = |i: usize| customer.address.0.get(i).cloned().flatten();
        let extras = details
            .extras
            .iter()
            .map(|line| format!("{} × {}", line.quantity, extra_name(webstore, line.id)))
            .collect();
        DeliveryRow {
            order_id: delivery.order_id.0,
            customer_number: customer.number_label(),
            customer_name: customer.name(),
            address: ADDRESS_LINES.filter_map(field).collect(),
            delivery_note: field(DELIVERY_NOTE),
            phones: PHONES
                .iter()
                .filter_map(|(i, label)| field(*i).map(|phone| format!("{label} {phone}")))
                .collect(),
            box_name: box_name(webstore, details.box_id),
            exclusions: details
                .exclusions
                .iter()
                .map(|id| item_name(webstore, *id))
                .collect(),
            substitutions: details
                .substitutions
                .iter()
                .map(|id| item_name(webstore, *id))
                .collect(),
            extras,
            price: delivery.price,
            status: delivery.status,
            low_balance: {
                let account = &customer.account;
                let threshold = account.threshold_in_force(webstore.balance_threshold);
                halted_by_balance(account.balance, threshold).then_some(account.balance)
            },
        }
    }

    /// The status as the page says it.
    pub fn status_label(&self) -> &'static str {
        match self.status {
            DeliveryStatus::Pending => "Pending",
            DeliveryStatus::Delivered => "Delivered",
            DeliveryStatus::NotDelivered => "Not delivered",
        }
    }
}

/// Prices summed; a day's prices are far below where an amount could overflow.
fn sum(total: Amount, price: Amount) -> Amount {
    total.checked_add(price).unwrap_or(total)
}

fn box_name(webstore: &Webstore, id: u64) -> String {
    webstore
        .boxes
        .get(&id)
        .map_or_else(|| format!("Box {id}"), |b| b.name.clone())
}

fn item_name(webstore: &Webstore, id: u64) -> String {
    webstore
        .box_items
        .get(&id)
        .map_or_else(|| format!("Item {id}"), |item| item.name.clone())
}

fn extra_name(webstore: &Webstore, id: u64) -> String {
    webstore.extras.get(&id).map_or_else(
        || format!("Extra {id}"),
        |extra| format!("{} ({})", extra.name, extra.unit),
    )
}

/// `2 paused, 1 skipped, 1 halted`: the regular deliveries withheld, by reason, those with
/// none left out (empty when nothing is withheld).
pub fn withheld_label(withheld: &WithheldCounts) -> String {
    [
        (withheld.paused, "paused"),
        (withheld.skipped, "skipped"),
        (withheld.cancelled, "cancelled"),
        (withheld.halted, "halted"),
    ]
    .iter()
    .filter(|(count, _)| *count > 0)
    .map(|(count, reason)| format!("{count} {reason}"))
    .collect::<Vec<_>>()
    .join(", ")
}

/// `Thursday 26 November 2026`.
pub fn long_date(day: Day) -> String {
    day.date().strftime("%A %-d %B %Y").to_string()
}

/// `Thu 26 Nov`.
pub fn short_date(day: Day) -> String {
    day.date().strftime("%a %-d %b").to_string()
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::domain::catalogue::{Catalogue, WebstoreIdx, DEMO_CATALOGUE_JSON};
    use crate::domain::customer::{Address, Customer};
    use crate::domain::email::Email;
    use crate::domain::ids::{CustomerId, OrderId};
    use crate::domain::order::content::ExtraLine;
    use crate::domain::order::history::Goods;

    fn delivery(
        order: u64,
        service: u64,
        box_id: u64,
        extras: &[(u64, u32)],
        excluded: &[u64],
        with_extras: bool,
    ) -> Delivery {
        delivery_with(
            Day(20_000),
            order,
            service,
            box_id,
            extras,
            excluded,
            with_extras,
        )
    }

    /// A delivery on `date` of a weekly order (`order` is its id and its customer's), by
    /// delivery service `service`, without exclusions.
    pub(crate) fn delivery_on(
        date: Day,
        order: u64,
        service: u64,
        box_id: u64,
        extras: &[(u64, u32)],
        with_extras: bool,
    ) -> Delivery {
        delivery_with(date, order, service, box_id, extras, &[], with_extras)
    }

    fn delivery_with(
        date: Day,
        order: u64,
        service: u64,
        box_id: u64,
        extras: &[(u64, u32)],
        excluded: &[u64],
        with_extras: bool,
    ) -> Delivery {
        let mut address = Address::default();
        address.0[0] = Some(format!("{order} Orchard Road"));
        address.0[5] = Some("Leave by the <gate>".into());
        address.0[7] = Some("021 555 0101".into());
        let customer = Customer {
            id: CustomerId(order),
            number: order,
            first_name: "Ana".into(),
            last_name: Some("Lee".into()),
            webstore: WebstoreIdx(0),
            email: Email::parse(&format!("c{order}@example.com")).unwrap(),
            delivery_service_id: service,
            address,
            password_hash: None,
            halts: crate::domain::halts::Halts::none(),
            account: crate::domain::account::Account::opened(CustomerId(order), 0),
        };
        let extras = if with_extras {
            extras
                .iter()
                .map(|&(id, quantity)| ExtraLine { id, quantity })
                .collect()
        } else {
            Vec::new()
        };
        Delivery {
            date,
            order_id: OrderId(order),
            goods: Goods {
                box_id,
                extras,
                exclusions: excluded.to_vec(),
                substitutions: Vec::new(),
            },
            delivery_service_id: service,
            customer: Arc::new(customer),
            price: crate::domain::money::Amount(2_500),
            status: crate::domain::account::delivery_mark::DeliveryStatus::Pending,
        }
    }

    #[test]
    fn routes_and_the_day_sum_their_prices_and_a_balance_at_the_limit_is_shown() {
        let catalogue = Catalogue::parse(DEMO_CATALOGUE_JSON, 0).unwrap();
        let mut webstore = catalogue.webstores()[0].as_ref().clone();
        webstore.balance_threshold = Some(Amount(-1_000));
        let services: Vec<u64> = webstore.delivery_services.keys().copied().collect();
        let box_id = *webstore.boxes.keys().next().unwrap();
        let mut low = delivery(2, services[0], box_id, &[], &[], false);
        let mut customer = (*low.customer).clone();
        customer.account.balance = Amount(-1_000);
        low.customer = Arc::new(customer);
        low.price = Amount(1_999);
        low.status = DeliveryStatus::Delivered;
        let list = DayList {
            deliveries: vec![
                delivery(1, services[0], box_id, &[], &[], false),
                low,
                delivery(3, services[1], box_id, &[], &[], false),
            ],
            withheld: WithheldCounts::default(),
        };

        let day = DayView::of(&list, &webstore);

        assert_eq!(day.total_price, Amount(2_500 + 1_999 + 2_500));
        let totals: Vec<Amount> = day.routes.iter().map(|r| r.total_price).collect();
        assert_eq!(totals, vec![Amount(4_499), Amount(2_500)]);
        let rows = &day.routes[0].rows;
        assert_eq!(rows[0].low_balance, None, "0.00 is above -10.00");
        assert_eq!(rows[1].low_balance, Some(Amount(-1_000)), "at the limit");
        assert_eq!(rows[1].status_label(), "Delivered");
    }

    #[test]
    fn the_summary_counts_what_the_list_delivers_and_routes_follow_the_list() {
        let catalogue = Catalogue::parse(DEMO_CATALOGUE_JSON, 0).unwrap();
        let webstore = catalogue.webstores()[0].clone();
        let services: Vec<u64> = webstore.delivery_services.keys().copied().collect();
        let boxes: Vec<u64> = webstore.boxes.keys().copied().collect();
        let extra = *webstore.extras.keys().next().unwrap();
        let item = *webstore.box_items.keys().next().unwrap();
        let withheld = WithheldCounts {
            paused: 2,
            skipped: 1,
            cancelled: 0,
            halted: 4,
        };
        let list = DayList {
            deliveries: vec![
                delivery(1, services[0], boxes[0], &[(extra, 2)], &[item], true),
                delivery(2, services[0], boxes[0], &[(extra, 3)], &[], true),
                // A one-off extra on a later delivery: not delivered, not counted.
                delivery(3, services[1], boxes[1], &[(extra, 5)], &[item], false),
            ],
            withheld,
        };
        let day = DayView::of(&list, &webstore);
        assert_eq!(day.total, 3);
        assert_eq!(
            day.withheld, withheld,
            "the day shows what the service withheld"
        );
        let counts = |counted: &[Counted]| -> Vec<(u64, u64)> {
            counted.iter().map(|c| (c.id, c.count)).collect()
        };
        assert_eq!(counts(&day.boxes), vec![(boxes[0], 2), (boxes[1], 1)]);
        assert_eq!(counts(&day.extras), vec![(extra, 5)]);
        assert_eq!(counts(&day.exclusions), vec![(item, 2)]);
        assert!(day.substitutions.is_empty());
        let routes: Vec<(u64, Vec<u64>)> = day
            .routes
            .iter()
            .map(|route| {
                (
                    route.id,
                    route.rows.iter().map(|row| row.order_id).collect(),
                )
            })
            .collect();
        assert_eq!(
            routes,
            vec![(services[0], vec![1, 2]), (services[1], vec![3])]
        );
        let row = &day.routes[1].rows[0];
        assert!(row.extras.is_empty(), "not this delivery's extras");
        assert_eq!(row.address, vec!["3 Orchard Road".to_owned()]);
        assert_eq!(row.delivery_note.as_deref(), Some("Leave by the <gate>"));
        assert_eq!(row.phones, vec!["mobile 021 555 0101".to_owned()]);
        assert_eq!(day.routes[0].rows[0].extras.len(), 1);
    }

    proptest::proptest! {
        #[test]
        fn the_routes_are_the_list_in_order_and_the_summary_adds_up(
            orders in proptest::collection::vec(
                (0usize..2, 0usize..2, 0u32..4, proptest::bool::ANY, 0usize..3),
                0..60,
            )
        ) {
            let catalogue = Catalogue::parse(DEMO_CATALOGUE_JSON, 0).unwrap();
            let webstore = catalogue.webstores()[0].clone();
            let services: Vec<u64> = webstore.delivery_services.keys().copied().collect();
            let boxes: Vec<u64> = webstore.boxes.keys().copied().collect();
            let extra = *webstore.extras.keys().next().unwrap();
            let items: Vec<u64> = webstore.box_items.keys().copied().collect();
            // The list comes sorted by delivery service, as the service gives it.
            let mut orders = orders;
            orders.sort_by_key(|(service, ..)| *service);
            let deliveries: Vec<Delivery> = orders
                .iter()
                .enumerate()
                .map(|(i, (service, b, quantity, with_extras, excluded))| {
                    let extras: Vec<(u64, u32)> =
                        if *quantity > 0 { vec![(extra, *quantity)] } else { vec![] };
                    delivery(
                        i as u64 + 1,
                        services[*service],
                        boxes[*b],
                        &extras,
                        &items[..*excluded],
                        *with_extras,
                    )
                })
                .collect();
            let list = DayList { deliveries, withheld: WithheldCounts::default() };
            let day = DayView::of(&list, &webstore);
            let deliveries = &list.deliveries;
            let rows: Vec<u64> = day
                .routes
                .iter()
                .flat_map(|route| route.rows.iter().map(|row| row.order_id))
                .collect();
            let listed: Vec<u64> = deliveries.iter().map(|d| d.order_id.0).collect();
            proptest::prop_assert_eq!(rows, listed);
            proptest::prop_assert_eq!(day.total, deliveries.len());
            let boxed: u64 = day.boxes.iter().map(|b| b.count).sum();
            proptest::prop_assert_eq!(boxed, deliveries.len() as u64);
            let delivered_extras: u64 = deliveries
                .iter()
                .flat_map(|d| d.goods.extras.iter())
                .map(|line| u64::from(line.quantity))
                .sum();
            proptest::prop_assert_eq!(
                day.extras.iter().map(|e| e.count).sum::<u64>(),
                delivered_extras
            );
            let excluded: u64 = orders.iter().map(|(.., excluded)| *excluded as u64).sum();
            proptest::prop_assert_eq!(day.exclusions.iter().map(|e| e.count).sum::<u64>(), excluded);
            for route in &day.routes {
                proptest::prop_assert!(!route.rows.is_empty());
            }
            let mut route_ids: Vec<u64> = day.routes.iter().map(|route| route.id).collect();
            let before = route_ids.len();
            route_ids.dedup();
            proptest::prop_assert_eq!(route_ids.len(), before, "one section per route");
        }
    }

    #[test]
    fn the_withheld_deliveries_read_by_reason_leaving_out_those_with_none() {
        assert_eq!(withheld_label(&WithheldCounts::default()), "");
        let some = WithheldCounts {
            paused: 2,
            skipped: 0,
            cancelled: 1,
            halted: 3,
        };
        assert_eq!(withheld_label(&some), "2 paused, 1 cancelled, 3 halted");
    }

    #[test]
    fn dates_read_as_a_producer_says_them() {
        let day = Day::of(jiff::civil::Date::constant(2026, 11, 26));
        assert_eq!(long_date(day), "Thursday 26 November 2026");
        assert_eq!(short_date(day), "Thu 26 Nov");
    }
}
