//! The JSON shapes of contract section 4 for customers and orders, built from domain values:
//! what the API answers for them, and what an event carries as its `data` (`crate::events`
//! renders events with these when they are read), so that the two never drift. They borrow
//! from the domain types rather than being them, so the wire format can't leak a field by
//! accident (a password hash) and the domain stays free of serde renames.
//!
//! Must not touch: HTTP (responses and statuses are `crate::http`'s), the store.

pub mod accounts;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use crate::domain::account::delivery_mark::DeliveryStatus;
use crate::domain::catalogue::Webstore;
use crate::domain::customer::{Address, Customer};
use crate::domain::day::Day;
use crate::domain::money::Amount;
use crate::domain::order::content::ExtraLine;
use crate::domain::order::history::OrderDelivery;
use crate::domain::order::Order;
use accounts::AmountView;

/// Room reserved for a rendered body: an order or a customer fits, where growing from
/// empty took seven reallocations and copies.
const BODY_CAPACITY: usize = 512;

/// `value` as JSON.
pub(crate) fn render(value: &impl Serialize) -> serde_json::Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(BODY_CAPACITY);
    serde_json::to_writer(&mut bytes, value)?;
    Ok(bytes)
}

/// A value as JSON bytes (an empty object should serialisation ever fail).
pub fn to_json(value: &impl Serialize) -> Vec<u8> {
    render(value).unwrap_or_else(|error| {
        tracing::error!(%error, "rendering a response");
        b"{}".to_vec()
    })
}

/// Which children a request asked for with `embed=`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Embed {
    /// `address` (customers).
    pub address: bool,
    /// `extras` (boxes).
    pub extras: bool,
    /// `box_items` (boxes).
    pub box_items: bool,
    /// `images` (boxes).
    pub images: bool,
}

impl Embed {
    /// Reads a comma-separated list; unknown names are ignored.
    pub fn parse(raw: Option<&str>) -> Embed {
        let mut embed = Embed::default();
        for name in raw.unwrap_or_default().split(',').map(str::trim) {
            match name {
                "address" => embed.address = true,
                "extras" => embed.extras = true,
                "box_items" => embed.box_items = true,
                "images" => embed.images = true,
                _ => {}
            }
        }
        embed
    }
}

/// A customer as returned.
#[derive(Serialize)]
pub struct CustomerView<'a> {
    id: u64,
    first_name: &'a str,
    last_name: Option<&'a str>,
    name: String,
    email: &'a str,
    delivery_service_id: u64,
    #[serde(rename = "halted?")]
    halted: bool,
    #[serde(rename = "discount?")]
    has_discount: bool,
    discount: f64,
    number: String,
    account_balance: String,
    webstore_id: &'a str,
    webstore_name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    address: Option<AddressView<'a>>,
}

impl<'a> CustomerView<'a> {
    /// The view of `customer` of `webstore`, with its address when asked for.
    pub fn new(customer: &'a Customer, webstore: &'a Webstore, embed: Embed) -> Self {
        CustomerView::of(
            customer,
            &webstore.settings.id,
            &webstore.settings.name,
            embed,
        )
    }

    /// The view of `customer` of the webstore with this id and name.
    pub fn of(
        customer: &'a Customer,
        webstore_id: &'a str,
        webstore_name: &'a str,
        embed: Embed,
    ) -> Self {
        CustomerView {
            id: customer.id.0,
            first_name: &customer.first_name,
            last_name: customer.last_name.as_deref(),
            name: customer.name(),
            email: customer.email.as_str(),
            delivery_service_id: customer.delivery_service_id,
            halted: customer.halts.is_halted(),
            has_discount: customer.account.discount != crate::domain::money::Discount::NONE,
            discount: accounts::discount_fraction(customer.account.discount),
            number: customer.number_label(),
            account_balance: customer.account.balance.to_string(),
            webstore_id,
            webstore_name,
            address: embed.address.then_some(AddressView(&customer.address)),
        }
    }
}

/// Every address field, `null` where absent.
pub struct AddressView<'a>(pub(crate) &'a Address);

impl Serialize for AddressView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(9))?;
        for (name, value) in self.0.fields() {
            map.serialize_entry(name, &value)?;
        }
        map.end()
    }
}

/// An order as returned.
#[derive(Serialize)]
pub struct OrderView<'a> {
    id: u64,
    customer_id: u64,
    box_id: u64,
    frequency: &'static str,
    start_date: String,
    week_days: Vec<u8>,
    extras_one_off: bool,
    extras: Vec<ExtraLineView>,
    exclusions: &'a [u64],
    substitutions: &'a [u64],
    created_at: String,
    active: bool,
    pause_date: Option<DateView>,
    resume_date: Option<DateView>,
    skipped_dates: DatesView<'a>,
    cancel_date: Option<DateView>,
    updated_at: Rfc3339,
}

/// A date as `YYYY-MM-DD`, written straight into the output.
#[derive(Debug, Clone, Copy)]
pub struct DateView(pub Day);

impl Serialize for DateView {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&self.0.date())
    }
}

/// Dates as a list of `YYYY-MM-DD`, without a copy.
#[derive(Debug, Clone, Copy)]
pub struct DatesView<'a>(pub &'a [Day]);

impl Serialize for DatesView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|d| DateView(*d)))
    }
}

/// Unix seconds as an RFC 3339 timestamp, written straight into the output (see
/// [`rfc3339`]).
#[derive(Debug, Clone, Copy)]
pub struct Rfc3339(pub i64);

impl Serialize for Rfc3339 {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match jiff::Timestamp::from_second(self.0) {
            Ok(at) => serializer.collect_str(&at),
            Err(_) => serializer.serialize_str(EPOCH),
        }
    }
}

#[derive(Serialize)]
struct ExtraLineView {
    id: u64,
    quantity: u32,
}

impl ExtraLineView {
    /// The views of `lines`, in their order.
    fn all(lines: &[ExtraLine]) -> Vec<ExtraLineView> {
        lines
            .iter()
            .map(|line| ExtraLineView {
                id: line.id,
                quantity: line.quantity,
            })
            .collect()
    }
}

impl<'a> OrderView<'a> {
    /// The view of `order`.
    pub fn new(order: &'a Order) -> Self {
        let details = order.content();
        let lifecycle = order.lifecycle();
        OrderView {
            id: order.id.0,
            customer_id: order.customer_id.0,
            box_id: details.box_id,
            frequency: details.frequency.as_str(),
            start_date: details.schedule.start.date().to_string(),
            week_days: details.schedule.week_days.days().collect(),
            extras_one_off: details.extras_one_off,
            extras: ExtraLineView::all(&details.extras),
            exclusions: &details.exclusions,
            substitutions: &details.substitutions,
            created_at: rfc3339(order.created_at),
            active: lifecycle.active(),
            pause_date: lifecycle.pause.map(|pause| DateView(pause.from)),
            resume_date: lifecycle.pause.and_then(|pause| pause.until).map(DateView),
            skipped_dates: DatesView(&lifecycle.skipped_dates),
            cancel_date: lifecycle.cancel_date.map(DateView),
            updated_at: Rfc3339(order.updated_at()),
        }
    }
}

/// One delivery of one order (`GET /v1/orders/{id}/deliveries`).
#[derive(Serialize)]
pub struct OrderDeliveryView<'a> {
    date: DateView,
    box_id: u64,
    extras: Vec<ExtraLineView>,
    exclusions: &'a [u64],
    substitutions: &'a [u64],
    locked: bool,
    price: AmountView,
    status: &'static str,
}

impl<'a> OrderDeliveryView<'a> {
    /// The view of one delivery of an order, at `price`, with its `status`.
    pub fn new(delivery: &'a OrderDelivery, price: Amount, status: DeliveryStatus) -> Self {
        let goods = &delivery.goods;
        OrderDeliveryView {
            date: DateView(delivery.date),
            box_id: goods.box_id,
            extras: ExtraLineView::all(&goods.extras),
            exclusions: &goods.exclusions,
            substitutions: &goods.substitutions,
            locked: delivery.locked,
            price: AmountView(price),
            status: status.name(),
        }
    }
}

/// What a time out of range is written as.
const EPOCH: &str = "1970-01-01T00:00:00Z";

/// Unix seconds as an RFC 3339 timestamp (UTC, whole seconds).
pub fn rfc3339(unix_seconds: i64) -> String {
    jiff::Timestamp::from_second(unix_seconds)
        .map(|at| at.to_string())
        .unwrap_or_else(|_| EPOCH.to_owned())
}
