//! The HTTP answers' renderings: JSON and CSV responses, the delivery list's rows and the
//! books' (transactions by date), the catalogue's boxes, delivery services and webstore. Customers and orders are rendered by
//! [`crate::views`], shared with the events, so that an event's data is what `GET` answers.
//! These shapes borrow from the domain types rather than being them, so the wire format
//! can't leak a field by accident (a password hash, an API key) and the domain stays free of
//! serde renames.
//!
//! Must not touch: the services (it renders what they return), statuses beyond the
//! response it is asked for.

use serde::Serialize;
use serde_json::Value;
use warp::http::{header, HeaderValue, StatusCode};
use warp::reply::Response;

use crate::domain::account::transaction::{Transaction, TransactionOf};
use crate::domain::catalogue::{BoxDef, DeliveryService, Webstore};
use crate::domain::customer::ADDRESS_FIELDS;
use crate::service::Delivery;
use crate::views::accounts::AmountView;
use crate::views::{render, AddressView};

pub use crate::views::{to_json, CustomerView, Embed, OrderDeliveryView, OrderView};

/// The content type of every JSON response.
pub const JSON_CONTENT_TYPE: &str = "application/json; charset=utf-8";

/// A JSON response with the contract's content type.
pub fn json_response(status: StatusCode, body: &impl Serialize) -> Response {
    match render(body) {
        Ok(bytes) => {
            let mut response = Response::new(bytes.into());
            *response.status_mut() = status;
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(JSON_CONTENT_TYPE),
            );
            response
        }
        Err(error) => {
            tracing::error!(%error, "rendering a response");
            let mut response = Response::new(r#"{"message":"Internal server error"}"#.into());
            *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(JSON_CONTENT_TYPE),
            );
            response
        }
    }
}

/// One delivery of the delivery list.
#[derive(Serialize)]
pub struct DeliveryView<'a> {
    date: String,
    order_id: u64,
    customer_id: u64,
    customer_number: String,
    customer_name: String,
    delivery_service_id: u64,
    box_id: u64,
    box_name: &'a str,
    exclusions: Vec<ItemView<'a>>,
    substitutions: Vec<ItemView<'a>>,
    extras: Vec<DeliveredExtra<'a>>,
    price: AmountView,
    status: &'static str,
    address: AddressView<'a>,
}

/// A box item named.
#[derive(Serialize)]
struct ItemView<'a> {
    id: u64,
    name: &'a str,
}

/// An extra delivered, named.
#[derive(Serialize)]
struct DeliveredExtra<'a> {
    id: u64,
    name: &'a str,
    unit: &'a str,
    quantity: u32,
}

impl<'a> DeliveryView<'a> {
    /// The view of `delivery`, naming its box, items and extras from the catalogue (an id the
    /// catalogue no longer has is named by its id).
    pub fn new(delivery: &'a Delivery, webstore: &'a Webstore) -> Self {
        let details = &delivery.goods;
        let items = |ids: &'a [u64]| -> Vec<ItemView<'a>> {
            ids.iter()
                .map(|id| ItemView {
                    id: *id,
                    name: webstore
                        .box_items
                        .get(id)
                        .map_or("", |item| item.name.as_str()),
                })
                .collect()
        };
        let extras = details
            .extras
            .iter()
            .map(|line| {
                let extra = webstore.extras.get(&line.id);
                DeliveredExtra {
                    id: line.id,
                    name: extra.map_or("", |e| e.name.as_str()),
                    unit: extra.map_or("", |e| e.unit.as_str()),
                    quantity: line.quantity,
                }
            })
            .collect();
        DeliveryView {
            date: delivery.date.date().to_string(),
            order_id: delivery.order_id.0,
            customer_id: delivery.customer.id.0,
            customer_number: delivery.customer.number_label(),
            customer_name: delivery.customer.name(),
            delivery_service_id: delivery.delivery_service_id,
            box_id: details.box_id,
            box_name: webstore
                .boxes
                .get(&details.box_id)
                .map_or("", |b| b.name.as_str()),
            exclusions: items(&details.exclusions),
            substitutions: items(&details.substitutions),
            extras,
            price: AmountView(delivery.price),
            status: delivery.status.name(),
            address: AddressView(&delivery.customer.address),
        }
    }

    /// The CSV columns, in order: the JSON fields with the address flattened.
    const CSV_HEADER: [&'static str; 13] = [
        "date",
        "order_id",
        "customer_id",
        "customer_number",
        "customer_name",
        "delivery_service_id",
        "box_id",
        "box_name",
        "exclusions",
        "substitutions",
        "extras",
        "price",
        "status",
    ];

    /// The CSV row: lists as names joined by `; ` (extras as `name (unit) x quantity`), then
    /// every address field.
    fn csv_row(&self) -> Vec<String> {
        let names = |items: &[ItemView<'_>]| {
            items
                .iter()
                .map(|item| item.name.to_owned())
                .collect::<Vec<_>>()
                .join("; ")
        };
        let extras = self
            .extras
            .iter()
            .map(|extra| format!("{} ({}) x {}", extra.name, extra.unit, extra.quantity))
            .collect::<Vec<_>>()
            .join("; ");
        let mut row = vec![
            self.date.clone(),
            self.order_id.to_string(),
            self.customer_id.to_string(),
            self.customer_number.clone(),
            self.customer_name.clone(),
            self.delivery_service_id.to_string(),
            self.box_id.to_string(),
            self.box_name.to_owned(),
            names(&self.exclusions),
            names(&self.substitutions),
            extras,
            self.price.0.to_string(),
            self.status.to_owned(),
        ];
        row.extend(
            self.address
                .0
                .fields()
                .map(|(_, value)| value.unwrap_or_default().to_owned()),
        );
        row
    }
}

/// The content type of CSV responses.
pub const CSV_CONTENT_TYPE: &str = "text/csv; charset=utf-8";

/// The delivery list as CSV with a header row, ready to print as a packing list, each cell
/// written through `cell` (the API's keeps them exact; the app's download makes them safe
/// for spreadsheets).
pub fn csv_response(
    deliveries: &[DeliveryView<'_>],
    cell: impl Fn(&str) -> std::borrow::Cow<'_, str>,
) -> Response {
    let header = DeliveryView::CSV_HEADER
        .iter()
        .copied()
        .chain(ADDRESS_FIELDS.iter().copied());
    csv_table(header, deliveries.iter().map(DeliveryView::csv_row), cell)
}

/// The webstore's books as CSV with a header row, for a spreadsheet or an accounting
/// package: one row per transaction, amounts as the JSON writes them, cells as they are.
pub fn transactions_csv(transactions: &[Transaction]) -> Response {
    const HEADER: [&str; 11] = [
        "date",
        "id",
        "customer_id",
        "number",
        "kind",
        "amount",
        "balance",
        "description",
        "order_id",
        "payment_id",
        "created_at",
    ];
    let rows = transactions.iter().map(|transaction| {
        let (order_id, payment_id) = match transaction.of {
            TransactionOf::Delivery { order_id } => (order_id.0.to_string(), String::new()),
            TransactionOf::Payment { payment_id } => (String::new(), payment_id.to_string()),
            TransactionOf::Nothing => (String::new(), String::new()),
        };
        vec![
            transaction.date.date().to_string(),
            transaction.id.to_string(),
            transaction.customer_id.0.to_string(),
            transaction.number.to_string(),
            transaction.kind.name().to_owned(),
            transaction.amount.to_string(),
            transaction.balance.to_string(),
            transaction.description.clone(),
            order_id,
            payment_id,
            crate::views::rfc3339(transaction.created_at),
        ]
    });
    csv_table(HEADER, rows, |cell: &str| std::borrow::Cow::Borrowed(cell))
}

/// A CSV response: `header`, then each row, each cell written through `cell`.
fn csv_table<'h>(
    header: impl IntoIterator<Item = &'h str>,
    rows: impl Iterator<Item = Vec<String>>,
    cell: impl Fn(&str) -> std::borrow::Cow<'_, str>,
) -> Response {
    let mut writer = csv::Writer::from_writer(Vec::new());
    // Writing to a Vec cannot fail; a failure would only shorten the body.
    let _ = writer.write_record(header);
    for row in rows {
        let cells: Vec<std::borrow::Cow<'_, str>> = row.iter().map(|value| cell(value)).collect();
        let _ = writer.write_record(cells.iter().map(|value| value.as_bytes()));
    }
    let body = writer.into_inner().unwrap_or_default();
    let mut response = Response::new(body.into());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(CSV_CONTENT_TYPE),
    );
    response
}

/// A box as returned, with the children `embed` asked for.
pub fn box_json(webstore: &Webstore, b: &BoxDef, embed: Embed) -> Value {
    let mut json = serde_json::json!({
        "id": b.id,
        "name": b.name,
        "description": b.description,
        "price": b.price.to_string(),
        "likes": b.likes,
        "dislikes": b.dislikes,
        "customizable": b.customizable(),
        "extras_allowed": b.extras_allowed,
        "extras_limit": b.extras_limit.as_wire(),
        "extras_unlimited": b.extras_limit.as_wire() == -1,
        "exclusions_limit": b.exclusions_limit.as_wire(),
        "exclusions_unlimited": b.exclusions_limit.as_wire() == -1,
        "substitutions_limit": b.substitutions_limit.as_wire(),
        "substitutions_unlimited": b.substitutions_limit.as_wire() == -1,
        "updated_at": b.updated_at,
    });
    let object = json.as_object_mut().expect("a box renders as an object");
    if embed.extras {
        let extras: Vec<Value> = b
            .extra_ids
            .iter()
            .filter_map(|id| webstore.extras.get(id))
            .map(|extra| {
                serde_json::json!({"id": extra.id, "name": extra.name, "unit": extra.unit,
                                   "price": extra.price.to_string()})
            })
            .collect();
        object.insert("extras".into(), Value::Array(extras));
    }
    if embed.box_items {
        let items: Vec<Value> = webstore
            .box_items
            .values()
            .map(|item| serde_json::json!({"id": item.id, "name": item.name}))
            .collect();
        object.insert("box_items".into(), Value::Array(items));
    }
    if embed.images {
        object.insert("images".into(), serde_json::json!(b.images));
    }
    json
}

/// A delivery service as returned.
pub fn delivery_service_json(webstore: &Webstore, ds: &DeliveryService) -> Value {
    let [mon, tue, wed, thu, fri, sat, sun] = ds.days;
    serde_json::json!({
        "id": ds.id,
        "name": ds.name,
        "instructions": ds.instructions,
        "fee": ds.fee.to_string(),
        "pickup_point": ds.pickup_point,
        "mon": mon, "tue": tue, "wed": wed, "thu": thu, "fri": fri, "sat": sat, "sun": sun,
        "name_days_and_fee": ds.name_days_and_fee(&webstore.settings.currency),
    })
}

/// The webstore's public settings; API keys are never part of them.
pub fn webstore_json(webstore: &Webstore) -> Value {
    let s = &webstore.settings;
    serde_json::json!({
        "id": s.id, "name": s.name, "locale": s.locale, "currency": s.currency,
        "time_zone": s.time_zone, "city": s.city, "email": s.email, "phone": s.phone,
        "sidebar_description": s.sidebar_description, "active": s.active,
        "payment_options": s.payment_options,
        "require_phone": s.require.phone, "require_address_1": s.require.address_1,
        "require_address_2": s.require.address_2, "require_suburb": s.require.suburb,
        "require_city": s.require.city, "require_postcode": s.require.postcode,
        "require_delivery_note": s.require.delivery_note,
        "collect_phone": s.collect_phone, "collect_delivery_note": s.collect_delivery_note,
    })
}
