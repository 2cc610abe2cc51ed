//! One function per endpoint: parse what the request carries, call the service, render the
//! answer. No rule about customers or orders is decided here.
//!
//! Must not touch: the rules (the domain's), status codes (`super::error`), the store.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;
use warp::http::{header, HeaderValue, StatusCode};
use warp::reply::Response;

use sha2::{Digest, Sha256};

use crate::domain::catalogue::Webstore;
use crate::domain::customer::Customer;
use crate::domain::day::parse_date_param;
use crate::domain::event_feed;
use crate::domain::fields::{parse_digits, text, FieldErrors, BLANK, INVALID};
use crate::domain::idempotency::{IdempotencyKey, Pending, RecordedResponse, Resource};
use crate::domain::ids::{CustomerId, OrderId};
use crate::domain::order::body::OrderBody;
use crate::domain::order::change::OrderChange;
use crate::domain::order::Order;
use crate::domain::paging::Page;
use crate::quotas::Checked;
use crate::service::KeyedWrite;

use super::body::{json_fields, json_object, Params};
use super::error::ApiError;
use super::views::{
    box_json, csv_response, delivery_service_json, json_response, to_json, webstore_json,
    CustomerView, DeliveryView, Embed, OrderDeliveryView, OrderView, JSON_CONTENT_TYPE,
};
use super::Call;

pub(super) type Answer = Result<Response, ApiError>;

pub(super) async fn list_customers(call: &Call<'_>) -> Answer {
    let embed = Embed::parse(call.params.get("embed"));
    // Checked even for an email lookup, which does not page: a bad value is still an error.
    let page = Page::parse(call.params.get("page"), call.params.get("per_page"))
        .map_err(ApiError::Invalid)?;
    if let Some(email) = call.params.get("email") {
        let found = call.service.customer_by_email(call.webstore, email)?;
        let views: Vec<_> = found
            .iter()
            .map(|customer| CustomerView::new(customer, call.webstore, embed))
            .collect();
        return Ok(json_response(StatusCode::OK, &views));
    }
    let (customers, total) = call.service.customers_page(call.webstore, page).await?;
    let views: Vec<_> = customers
        .iter()
        .map(|customer| CustomerView::new(customer, call.webstore, embed))
        .collect();
    let kept: Vec<(&str, &str)> = call
        .params
        .get("embed")
        .map(|embed| ("embed", embed))
        .into_iter()
        .collect();
    let response = json_response(StatusCode::OK, &views);
    Ok(with_paging(response, "/v1/customers", page, total, &kept))
}

/// Adds `X-Total-Count` and the RFC 8288 `Link` header of a paginated list at `path`; the
/// links keep the query parameters in `kept`.
pub(super) fn with_paging(
    mut response: Response,
    path: &str,
    page: Page,
    total: u64,
    kept: &[(&str, &str)],
) -> Response {
    let headers = response.headers_mut();
    headers.insert("x-total-count", HeaderValue::from(total));
    if let Ok(link) = HeaderValue::from_str(&link_header(path, page, total, kept)) {
        headers.insert(header::LINK, link);
    }
    response
}

/// RFC 8288 links to the neighbouring pages that exist.
fn link_header(path: &str, page: Page, total: u64, kept: &[(&str, &str)]) -> String {
    let last = page.last(total);
    let kept = serde_urlencoded::to_string(kept)
        .ok()
        .filter(|pairs| !pairs.is_empty())
        .map(|pairs| format!("&{pairs}"))
        .unwrap_or_default();
    let link = |number: u64, rel: &str| {
        format!(
            "<{path}?page={number}&per_page={}{kept}>; rel=\"{rel}\"",
            page.per_page
        )
    };
    let mut links = Vec::with_capacity(4);
    if page.number < last {
        links.push(link(page.number + 1, "next"));
    }
    if page.number > 1 {
        links.push(link((page.number - 1).min(last), "prev"));
    }
    links.push(link(1, "first"));
    links.push(link(last, "last"));
    links.join(", ")
}

pub(super) async fn get_customer(call: &Call<'_>, id: CustomerId) -> Answer {
    let customer = call.service.customer(call.webstore, id)?;
    let embed = Embed::parse(call.params.get("embed"));
    Ok(json_response(
        StatusCode::OK,
        &CustomerView::new(&customer, call.webstore, embed),
    ))
}

pub(super) async fn create_customer(call: &Call<'_>, raw_body: &[u8]) -> Answer {
    let idempotency_key = idempotency_key(call)?;
    let body = json_object(raw_body, "customer")?;
    let embed = Embed::parse(call.params.get("embed"));
    let webstore = call.webstore.clone();
    let pending = idempotency_key.map(|key| Pending {
        key,
        body_sha256: Sha256::digest(raw_body).into(),
        render: Box::new(move |customer: &Customer| customer_created(customer, &webstore, embed)),
    });
    let outcome = call
        .service
        .create_customer(call.webstore, &body, pending)
        .await?;
    Ok(keyed_response(call, outcome, |customer| {
        customer_created(customer, call.webstore, embed)
    }))
}

/// The answer to a keyed write: `render`ed from what it made or left as it was, or the first
/// answer replayed. Only a write made now is acknowledged ([`Call::acknowledged`]: it goes
/// out even if the lease lapsed meanwhile); a change that changed nothing and a replay are
/// answered as reads are.
pub(super) fn keyed_response<T>(
    call: &Call<'_>,
    outcome: KeyedWrite<Arc<T>>,
    render: impl FnOnce(&T) -> RecordedResponse,
) -> Response {
    match outcome {
        KeyedWrite::Made(made) => {
            call.acknowledged.mark();
            recorded_response(render(&made), false)
        }
        KeyedWrite::Unchanged(unchanged) => recorded_response(render(&unchanged), false),
        KeyedWrite::Replayed(first) => recorded_response(first, true),
    }
}

fn customer_created(customer: &Customer, webstore: &Webstore, embed: Embed) -> RecordedResponse {
    RecordedResponse {
        status: StatusCode::CREATED.as_u16(),
        location: Some(Resource::Customer(customer.id).location()),
        body: to_json(&CustomerView::new(customer, webstore, embed)),
    }
}

/// The `Idempotency-Key` header, checked; absent is fine.
pub(super) fn idempotency_key(call: &Call<'_>) -> Result<Option<IdempotencyKey>, ApiError> {
    let Some(value) = call.headers.get("idempotency-key") else {
        return Ok(None);
    };
    let text = value
        .to_str()
        .map_err(|_| ApiError::Invalid(FieldErrors::single("idempotency_key", INVALID)))?;
    IdempotencyKey::parse(text)
        .map(Some)
        .map_err(ApiError::Invalid)
}

/// A create's response, first sent or replayed.
fn recorded_response(recorded: RecordedResponse, replayed: bool) -> Response {
    let mut response = Response::new(recorded.body.into());
    *response.status_mut() = StatusCode::from_u16(recorded.status).unwrap_or(StatusCode::CREATED);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(JSON_CONTENT_TYPE),
    );
    if let Some(location) = recorded
        .location
        .and_then(|l| HeaderValue::from_str(&l).ok())
    {
        headers.insert(header::LOCATION, location);
    }
    if replayed {
        headers.insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    response
}

pub(super) async fn update_customer(call: &Call<'_>, id: CustomerId, body: &[u8]) -> Answer {
    let body = json_object(body, "customer")?;
    let customer = call
        .service
        .update_customer(call.webstore, id, &body)
        .await?;
    let embed = Embed::parse(call.params.get("embed"));
    let response = json_response(
        StatusCode::OK,
        &CustomerView::new(&customer, call.webstore, embed),
    );
    call.acknowledged.mark();
    Ok(with_location(response, "customers", customer.id.0))
}

/// `POST /v1/customers/sign_in`, its parameters from a JSON body, a form body or the query
/// string; its turn in service (`checked`) is taken once its password check is done.
pub(super) async fn sign_in(
    call: &Call<'_>,
    checked: &Checked,
    body: &[u8],
    form_body: bool,
) -> Answer {
    let SignInParams {
        email,
        password,
        embed,
    } = sign_in_params(body, form_body, &call.params)?;
    let embed = Embed::parse(embed.as_deref());
    let customer = call
        .service
        .sign_in(call.webstore, &email, &password)
        .await?;
    let _slot = checked.admit().await;
    let views: Vec<_> = customer
        .iter()
        .map(|customer| CustomerView::new(customer, call.webstore, embed))
        .collect();
    Ok(json_response(StatusCode::OK, &views))
}

/// What a sign-in request asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignInParams {
    /// The email, as given.
    pub email: String,
    /// The password.
    pub password: String,
    /// `embed`, if given.
    pub embed: Option<String>,
}

/// The parameters of a sign-in: from the body (JSON, bare or under `customer`, or a form),
/// else from the query string. Both missing or empty are reported together.
pub fn sign_in_params(
    body: &[u8],
    form_body: bool,
    query: &Params,
) -> Result<SignInParams, ApiError> {
    let from_body = sign_in_body(body, form_body)?;
    let param = |name: &str| {
        from_body
            .get(name)
            .cloned()
            .or_else(|| query.get(name).map(str::to_owned))
            .filter(|value| !value.is_empty())
    };
    let (email, password) = (param("email"), param("password"));
    let mut errors = FieldErrors::new();
    if email.is_none() {
        errors.add("email", BLANK);
    }
    if password.is_none() {
        errors.add("password", BLANK);
    }
    match (email, password) {
        (Some(email), Some(password)) => Ok(SignInParams {
            email,
            password,
            embed: param("embed"),
        }),
        _ => Err(ApiError::Invalid(errors)),
    }
}

/// The sign-in parameters a body carries: JSON (bare or under `customer`) unless it is a form.
fn sign_in_body(body: &[u8], form_body: bool) -> Result<HashMap<String, String>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(HashMap::new());
    }
    let from_form = |body: &[u8]| {
        let params = Params::parse(body);
        ["email", "password", "embed"]
            .into_iter()
            .filter_map(|name| {
                params
                    .get(name)
                    .or_else(|| params.get(&format!("customer[{name}]")))
                    .map(|value| (name.to_owned(), value.to_owned()))
            })
            .collect::<HashMap<String, String>>()
    };
    // Bodies are JSON whatever their content type says (contract): a form content type
    // on a JSON object (curl's `-d` sends one) is still JSON.
    let json_object_text = body
        .iter()
        .find(|byte| !byte.is_ascii_whitespace())
        .is_some_and(|first| *first == b'{');
    if form_body && !json_object_text {
        return Ok(from_form(body));
    }
    match json_object(body, "customer") {
        Ok(object) => {
            // Strings and numbers are read as text, null as missing; anything else is an
            // error rather than a silent fall-back to the query string.
            let mut errors = FieldErrors::new();
            let mut params = HashMap::new();
            for name in ["email", "password", "embed"] {
                match object.get(name) {
                    None | Some(Value::Null) => {}
                    Some(value) => match text(value) {
                        Some(value) => {
                            params.insert(name.to_owned(), value);
                        }
                        None => errors.add(name, INVALID),
                    },
                }
            }
            errors.into_result(params).map_err(ApiError::Invalid)
        }
        Err(error) if body.contains(&b'=') && !body.starts_with(b"{") => {
            let params = from_form(body);
            if params.is_empty() {
                Err(error)
            } else {
                Ok(params)
            }
        }
        Err(error) => Err(error),
    }
}

pub(super) async fn list_orders(call: &Call<'_>) -> Answer {
    let orders = call
        .service
        .orders_of(call.webstore, call.params.get("customer_id"))
        .await?;
    let views: Vec<_> = orders.iter().map(|order| OrderView::new(order)).collect();
    Ok(json_response(StatusCode::OK, &views))
}

pub(super) async fn get_order(call: &Call<'_>, id: OrderId) -> Answer {
    let order = call.service.order(call.webstore, id).await?;
    Ok(json_response(StatusCode::OK, &OrderView::new(&order)))
}

pub(super) async fn create_order(call: &Call<'_>, raw_body: &[u8]) -> Answer {
    let idempotency_key = idempotency_key(call)?;
    let body: OrderBody = json_fields(raw_body, "order")?;
    let pending = idempotency_key.map(|key| Pending {
        key,
        body_sha256: Sha256::digest(raw_body).into(),
        render: Box::new(order_created),
    });
    let outcome = call
        .service
        .create_order(call.webstore, body, pending)
        .await?;
    Ok(keyed_response(call, outcome, order_created))
}

/// `PATCH` or `PUT /v1/orders/:id` with `{"order": {...}}`: 200 with the order after the
/// change and its `Location`; with an `Idempotency-Key` used before with the same body, the
/// first answer again.
pub(super) async fn update_order(call: &Call<'_>, id: OrderId, raw_body: &[u8]) -> Answer {
    let idempotency_key = idempotency_key(call)?;
    let change = OrderChange::parse(&json_object(raw_body, "order")?);
    // A change's request is its order and its body: the same key and body sent for another
    // order (or first used on a create) is another request, refused, not replayed.
    let pending = idempotency_key.map(|key| Pending {
        key,
        body_sha256: Sha256::new()
            .chain_update(Resource::Order(id).location())
            .chain_update(b"\n")
            .chain_update(raw_body)
            .finalize()
            .into(),
        render: Box::new(order_changed),
    });
    let outcome = call
        .service
        .change_order(call.webstore, id, change, pending)
        .await?;
    Ok(keyed_response(call, outcome, order_changed))
}

fn order_changed(order: &Order) -> RecordedResponse {
    RecordedResponse {
        status: StatusCode::OK.as_u16(),
        location: Some(Resource::Order(order.id).location()),
        body: to_json(&OrderView::new(order)),
    }
}

/// `GET /v1/orders/:id/deliveries?from=…&to=…`: the order's deliveries in the range (at
/// most 366 days; default the next 8 weeks from today), each with what goes out and whether
/// its list is locked.
pub(super) async fn order_deliveries(call: &Call<'_>, id: OrderId) -> Answer {
    let mut errors = FieldErrors::new();
    let optional = |name: &str| match call.params.get(name).map(str::trim) {
        None | Some("") => Ok(None),
        raw => parse_date_param(raw).map(Some),
    };
    let from = optional("from").unwrap_or_else(|message| {
        errors.add("from", message);
        None
    });
    let to = optional("to").unwrap_or_else(|message| {
        errors.add("to", message);
        None
    });
    if !errors.is_empty() {
        return Err(ApiError::Invalid(errors));
    }
    let deliveries = call
        .service
        .order_deliveries(call.webstore, id, from, to)
        .await?;
    let views: Vec<_> = deliveries
        .iter()
        .map(|priced| OrderDeliveryView::new(&priced.delivery, priced.price, priced.status))
        .collect();
    Ok(json_response(StatusCode::OK, &views))
}

fn order_created(order: &Order) -> RecordedResponse {
    RecordedResponse {
        status: StatusCode::CREATED.as_u16(),
        location: Some(Resource::Order(order.id).location()),
        body: to_json(&OrderView::new(order)),
    }
}

/// `GET /v1/deliveries?date=…[&delivery_service_id=…]`, as JSON or, asked for with `Accept:
/// text/csv`, as CSV.
pub(super) async fn list_deliveries(call: &Call<'_>) -> Answer {
    let mut errors = FieldErrors::new();
    let date = parse_date_param(call.params.get("date"));
    if let Err(message) = date {
        errors.add("date", message);
    }
    let raw_service = call.params.get("delivery_service_id");
    let service = match raw_service {
        None | Some("") => None,
        Some(text) => {
            let known =
                parse_digits(text).filter(|id| call.webstore.delivery_services.contains_key(id));
            if known.is_none() {
                errors.add("delivery_service_id", INVALID);
            }
            known
        }
    };
    let page = Page::parse(call.params.get("page"), call.params.get("per_page"));
    if let Err(page_errors) = &page {
        errors.merge(page_errors.clone());
    }
    let (Ok(date), Ok(page), true) = (date, page, errors.is_empty()) else {
        return Err(ApiError::Invalid(errors));
    };
    let (deliveries, total) = call
        .service
        .deliveries(call.webstore, date, service, page)
        .await?;
    let views: Vec<_> = deliveries
        .iter()
        .map(|delivery| DeliveryView::new(delivery, call.webstore))
        .collect();
    let response = if wants_csv(call.headers) {
        csv_response(&views, |cell: &str| std::borrow::Cow::Borrowed(cell))
    } else {
        json_response(StatusCode::OK, &views)
    };
    let date_text = date.date().to_string();
    let mut kept = vec![("date", date_text.as_str())];
    if let Some(raw) = raw_service {
        kept.push(("delivery_service_id", raw));
    }
    Ok(with_paging(response, "/v1/deliveries", page, total, &kept))
}

/// Whether the client asked for CSV.
pub(super) fn wants_csv(headers: &warp::http::HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|kind| {
            kind.split(';')
                .next()
                .is_some_and(|kind| kind.trim().eq_ignore_ascii_case("text/csv"))
        })
}

/// The OpenAPI document of the API (`docs/openapi.json`, built into the binary).
pub(super) fn openapi() -> Response {
    let mut response = Response::new(OPENAPI_JSON.into());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(JSON_CONTENT_TYPE),
    );
    response
}

/// `docs/openapi.json`.
pub const OPENAPI_JSON: &str = include_str!("../../docs/openapi.json");

pub(super) fn list_boxes(call: &Call<'_>) -> Response {
    let embed = Embed::parse(call.params.get("embed"));
    let boxes: Vec<Value> = call
        .webstore
        .visible_boxes()
        .map(|b| box_json(call.webstore, b, embed))
        .collect();
    json_response(StatusCode::OK, &boxes)
}

pub(super) fn get_box(call: &Call<'_>, id: u64) -> Answer {
    let b = call.webstore.visible_box(id).ok_or(ApiError::NotFound)?;
    let embed = Embed::parse(call.params.get("embed"));
    Ok(json_response(
        StatusCode::OK,
        &box_json(call.webstore, b, embed),
    ))
}

pub(super) fn list_delivery_services(call: &Call<'_>) -> Response {
    let services: Vec<Value> = call
        .webstore
        .delivery_services
        .values()
        .map(|ds| delivery_service_json(call.webstore, ds))
        .collect();
    json_response(StatusCode::OK, &services)
}

pub(super) fn get_delivery_service(call: &Call<'_>, id: u64) -> Answer {
    let ds = call
        .webstore
        .delivery_services
        .get(&id)
        .ok_or(ApiError::NotFound)?;
    Ok(json_response(
        StatusCode::OK,
        &delivery_service_json(call.webstore, ds),
    ))
}

pub(super) fn get_webstore(call: &Call<'_>) -> Response {
    json_response(StatusCode::OK, &webstore_json(call.webstore))
}

fn with_location(mut response: Response, resource: &str, id: u64) -> Response {
    if let Ok(location) = HeaderValue::from_str(&format!("/v1/{resource}/{id}")) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}

/// `GET /v1/events`: a page of the webstore's events and the cursor of the next, in the body
/// and as a `Link` (which keeps `type` and `limit`).
pub(super) fn list_events(call: &Call<'_>) -> Answer {
    let query = event_feed::Query::parse(
        &call.webstore.settings.id,
        call.params.get("after"),
        call.params.get("type"),
        call.params.get("limit"),
    )
    .map_err(ApiError::Invalid)?;
    let page = call.service.events_page(call.webstore, &query)?;
    // Each event is stored as the JSON it is delivered as: the page is put together around
    // them rather than parsed and rendered again.
    let mut body = Vec::with_capacity(page.events.iter().map(Vec::len).sum::<usize>() + 64);
    body.extend_from_slice(b"{\"events\":[");
    for (n, event) in page.events.iter().enumerate() {
        if n > 0 {
            body.push(b',');
        }
        body.extend_from_slice(event);
    }
    body.extend_from_slice(b"],\"next\":");
    body.extend_from_slice(&to_json(&page.next));
    let more: &[u8] = if page.more {
        b",\"has_more\":true}"
    } else {
        b",\"has_more\":false}"
    };
    body.extend_from_slice(more);
    let mut response = Response::new(body.into());
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(JSON_CONTENT_TYPE),
    );
    let mut kept = vec![("after", page.next.as_str())];
    kept.extend(call.params.get("type").map(|types| ("type", types)));
    kept.extend(call.params.get("limit").map(|limit| ("limit", limit)));
    if let Ok(query) = serde_urlencoded::to_string(&kept) {
        if let Ok(link) = HeaderValue::from_str(&format!("</v1/events?{query}>; rel=\"next\"")) {
            headers.insert(header::LINK, link);
        }
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_name_the_pages_that_exist() {
        let page = |number| Page {
            number,
            per_page: 10,
        };
        let first = link_header("/v1/customers", page(1), 25, &[]);
        assert!(first.contains("page=2&per_page=10>; rel=\"next\""));
        assert!(!first.contains("rel=\"prev\""));
        assert!(first.contains("page=3&per_page=10>; rel=\"last\""));
        let last = link_header("/v1/customers", page(3), 25, &[("embed", "address")]);
        assert!(!last.contains("rel=\"next\""));
        assert!(last.contains("page=2&per_page=10&embed=address>; rel=\"prev\""));
    }

    #[test]
    fn sign_in_reads_json_and_forms() {
        let json =
            sign_in_body(br#"{"customer":{"email":"a@b.c","password":"p"}}"#, false).unwrap();
        assert_eq!(json.get("email").map(String::as_str), Some("a@b.c"));
        let form = sign_in_body(b"email=a%40b.c&password=p", false).unwrap();
        assert_eq!(form.get("email").map(String::as_str), Some("a@b.c"));
        let rails = sign_in_body(b"customer%5Bemail%5D=a%40b.c", true).unwrap();
        assert_eq!(rails.get("email").map(String::as_str), Some("a@b.c"));
        let curl = sign_in_body(br#" {"email":"a@b.c","password":"p"}"#, true).unwrap();
        assert_eq!(curl.get("email").map(String::as_str), Some("a@b.c"));
        assert!(sign_in_body(b"{oops", false).is_err());
    }

    #[test]
    fn sign_in_refuses_body_values_that_are_not_text() {
        let query = Params::parse(b"email=a%40b.c&password=p");
        let body = br#"{"email":{},"password":[1],"embed":true}"#;
        let Err(ApiError::Invalid(errors)) = sign_in_params(body, false, &query) else {
            panic!("a non-text body value is an error, not a fall-back to the query");
        };
        assert_eq!(
            errors.fields().collect::<Vec<_>>(),
            ["email", "password", "embed"]
        );
        // null is missing, so the query string answers.
        let body = br#"{"email":null,"password":7}"#;
        let params = sign_in_params(body, false, &query).unwrap();
        assert_eq!(
            (params.email.as_str(), params.password.as_str()),
            ("a@b.c", "7")
        );
    }
}
