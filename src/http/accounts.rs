//! The endpoints of a customer's account: the account and its settings, its ledger page by
//! page, its payments; a payment recorded or reversed and a balance adjusted, each only with an
//! `Idempotency-Key` (428 without one, nothing changed), its body read with each field's text
//! kept so that money is read exactly. One function per endpoint, as `super::handlers`.
//!
//! Must not touch: the rules (the domain's), status codes (`super::error`), the store.

use sha2::{Digest, Sha256};
use warp::http::StatusCode;

use crate::actors::customer::{AccountChange, AccountPosted};
use crate::domain::account::adjustment::parse_adjustment;
use crate::domain::account::delivery_mark::parse_mark;
use crate::domain::account::payment::{parse_payment, UNKNOWN_FIELD};
use crate::domain::account::settings::parse_settings;
use crate::domain::day::{parse_date_param, Day};
use crate::domain::fields::{parse_digits, FieldErrors, INVALID};
use crate::domain::idempotency::{IdempotencyKey, Pending, RecordedResponse, Resource};
use crate::domain::ids::{CustomerId, OrderId};
use crate::domain::paging::Page;
use crate::domain::raw_fields::RawFields;
use crate::service::accounts::MAX_TRANSACTIONS_PAGE;
use crate::views::accounts::{AccountView, MarkedDeliveryView, PaymentView, TransactionView};

use super::error::ApiError;
use super::handlers::{idempotency_key, keyed_response, wants_csv, with_paging, Answer};
use super::views::{json_response, to_json, transactions_csv};
use super::Call;

/// The key a write that moves money must carry: without one, 428 (nothing changed).
fn money_key(call: &Call<'_>) -> Result<IdempotencyKey, ApiError> {
    idempotency_key(call)?.ok_or(ApiError::IdempotencyKeyRequired)
}

/// A money write's request is its path and its body: the same key and body sent for another
/// customer or payment is another request, refused, not replayed.
fn money_request_digest(path: &str, raw_body: &[u8]) -> [u8; 32] {
    Sha256::new()
        .chain_update(path)
        .chain_update(b"\n")
        .chain_update(raw_body)
        .finalize()
        .into()
}

/// A body's fields read with their text kept (money is read exactly from it).
fn raw_fields(raw_body: &[u8], envelope: &str) -> Result<RawFields, ApiError> {
    RawFields::read(raw_body, envelope).map_err(|_| ApiError::InvalidJson)
}

/// `GET /v1/customers/:id/account`.
pub(super) fn get_account(call: &Call<'_>, id: CustomerId) -> Answer {
    let account = call.service.account(call.webstore, id)?;
    Ok(json_response(
        StatusCode::OK,
        &AccountView::new(&account, &call.webstore.settings.currency),
    ))
}

/// `PATCH /v1/customers/:id/account`: the discount and the spend limit (`null`: the
/// webstore's); every failing field named at once. Setting the same values twice is
/// harmless, so no key is needed.
pub(super) async fn set_account(call: &Call<'_>, id: CustomerId, raw_body: &[u8]) -> Answer {
    let settings = parse_settings(&raw_fields(raw_body, "account")?).map_err(ApiError::Invalid)?;
    let account = call
        .service
        .set_account(call.webstore, id, settings)
        .await?;
    Ok(json_response(
        StatusCode::OK,
        &AccountView::new(&account, &call.webstore.settings.currency),
    ))
}

/// `GET /v1/transactions?from=…&to=…[&page=…&per_page=…]`: the webstore's books, by date,
/// as JSON or, asked for with `Accept: text/csv`, as CSV; every bad parameter named at once.
pub(super) fn list_books(call: &Call<'_>) -> Answer {
    let mut errors = FieldErrors::new();
    let mut optional = |name: &str| match call.params.get(name).map(str::trim) {
        None | Some("") => None,
        raw => parse_date_param(raw)
            .map_err(|message| errors.add(name, message))
            .ok(),
    };
    let (from, to) = (optional("from"), optional("to"));
    let page = Page::parse(call.params.get("page"), call.params.get("per_page"));
    if let Err(page_errors) = &page {
        errors.merge(page_errors.clone());
    }
    let (Ok(page), true) = (page, errors.is_empty()) else {
        return Err(ApiError::Invalid(errors));
    };
    let books = call.service.books(call.webstore, from, to, page)?;
    let response = if wants_csv(call.headers) {
        transactions_csv(&books.transactions)
    } else {
        let views: Vec<_> = books
            .transactions
            .iter()
            .map(TransactionView::new)
            .collect();
        json_response(StatusCode::OK, &views)
    };
    let mut kept = Vec::new();
    for name in ["from", "to"] {
        if let Some(raw) = call.params.get(name) {
            kept.push((name, raw));
        }
    }
    Ok(with_paging(
        response,
        "/v1/transactions",
        page,
        books.total,
        &kept,
    ))
}

/// `GET /v1/customers/:id/transactions?after=N&limit=M`: the ledger oldest first, a page
/// at a time (`next` the number to pass as `after` for the next page).
pub(super) fn list_transactions(call: &Call<'_>, id: CustomerId) -> Answer {
    let mut errors = FieldErrors::new();
    // Given, a parameter is a number: an empty or spaced one is refused, not the default.
    let mut number = |name: &str, default: u64| match call.params.get(name) {
        None => default,
        Some(text) => parse_digits(text).unwrap_or_else(|| {
            errors.add(name, INVALID);
            default
        }),
    };
    let after = number("after", 0);
    let limit = number("limit", 100);
    if limit == 0 || limit > MAX_TRANSACTIONS_PAGE as u64 {
        errors.add("limit", INVALID);
    }
    if !errors.is_empty() {
        return Err(ApiError::Invalid(errors));
    }
    let page = call
        .service
        .ledger(call.webstore, id, after, limit as usize)?;
    let next = page.transactions.last().map_or(after, |last| last.number);
    let views: Vec<_> = page.transactions.iter().map(TransactionView::new).collect();
    Ok(json_response(
        StatusCode::OK,
        &serde_json::json!({ "transactions": views, "next": next, "has_more": page.has_more }),
    ))
}

/// `GET /v1/customers/:id/payments`.
pub(super) async fn list_payments(call: &Call<'_>, id: CustomerId) -> Answer {
    let payments = call.service.payments(call.webstore, id).await?;
    let views: Vec<_> = payments.iter().map(PaymentView::new).collect();
    Ok(json_response(StatusCode::OK, &views))
}

/// `GET /v1/payments/:id`.
pub(super) async fn get_payment(call: &Call<'_>, id: u64) -> Answer {
    let payment = call.service.payment(call.webstore, id).await?;
    Ok(json_response(StatusCode::OK, &PaymentView::new(&payment)))
}

/// `POST /v1/customers/:id/payments` with `{"payment": {...}}`: 201 with the payment and its
/// `Location`; the first answer again for a retry with the same key and body.
pub(super) async fn create_payment(call: &Call<'_>, id: CustomerId, raw_body: &[u8]) -> Answer {
    let key = money_key(call)?;
    let fields = raw_fields(raw_body, "payment")?;
    let today = call.webstore.today(crate::clock::unix_now());
    let payment = parse_payment(&fields, today).map_err(ApiError::Invalid)?;
    let pending = Pending {
        key,
        body_sha256: money_request_digest(&format!("/v1/customers/{id}/payments"), raw_body),
        render: Box::new(payment_recorded),
    };
    let outcome = call
        .service
        .post_to_account(call.webstore, id, AccountChange::Pay(payment), pending)
        .await?;
    Ok(keyed_response(call, outcome, payment_recorded))
}

/// `POST /v1/payments/:id/reversal`: 200 with the payment, reversed; a second reversal is a
/// 422.
pub(super) async fn reverse_payment(call: &Call<'_>, id: u64, raw_body: &[u8]) -> Answer {
    let key = money_key(call)?;
    if !raw_body.iter().all(u8::is_ascii_whitespace) {
        let fields = raw_fields(raw_body, "reversal")?;
        let mut errors = FieldErrors::new();
        fields.refuse_unknown(&[], &mut errors, UNKNOWN_FIELD);
        if !errors.is_empty() {
            return Err(ApiError::Invalid(errors));
        }
    }
    let today = call.webstore.today(crate::clock::unix_now());
    let pending = Pending {
        key,
        body_sha256: money_request_digest(&format!("/v1/payments/{id}/reversal"), raw_body),
        render: Box::new(payment_reversed),
    };
    let outcome = call
        .service
        .reverse_payment(call.webstore, id, today, pending)
        .await?;
    Ok(keyed_response(call, outcome, payment_reversed))
}

/// `POST /v1/customers/:id/adjustments` with `{"adjustment": {"amount", "description"}}`:
/// 201 with the transaction posted.
pub(super) async fn create_adjustment(call: &Call<'_>, id: CustomerId, raw_body: &[u8]) -> Answer {
    let key = money_key(call)?;
    let fields = raw_fields(raw_body, "adjustment")?;
    let today = call.webstore.today(crate::clock::unix_now());
    let adjustment = parse_adjustment(&fields, today).map_err(ApiError::Invalid)?;
    let pending = Pending {
        key,
        body_sha256: money_request_digest(&format!("/v1/customers/{id}/adjustments"), raw_body),
        render: Box::new(adjustment_posted),
    };
    let outcome = call
        .service
        .post_to_account(
            call.webstore,
            id,
            AccountChange::Adjust(adjustment),
            pending,
        )
        .await?;
    Ok(keyed_response(call, outcome, adjustment_posted))
}

/// `PUT /v1/orders/:id/deliveries/:date` with `{"delivery": {"status", "note"}}`: 200 with
/// the delivery as marked (and the charge or reversal it posted). Idempotent by itself: the
/// same mark again changes nothing.
pub(super) async fn mark_delivery(
    call: &Call<'_>,
    id: OrderId,
    date: Option<Day>,
    raw_body: &[u8],
) -> Answer {
    let fields = raw_fields(raw_body, "delivery")?;
    let mark = parse_mark(&fields);
    let (mark, date) = match (mark, date) {
        (Ok(mark), Some(date)) => (mark, date),
        (mark, date) => {
            let mut errors = mark.err().unwrap_or_default();
            if date.is_none() {
                errors.add("date", "is not a date (YYYY-MM-DD)");
            }
            return Err(ApiError::Invalid(errors));
        }
    };
    let marked = call
        .service
        .mark_delivery(call.webstore, id, date, mark)
        .await?;
    Ok(json_response(
        StatusCode::OK,
        &MarkedDeliveryView::new(&marked.delivery),
    ))
}

fn payment_recorded(posted: &AccountPosted) -> RecordedResponse {
    payment_answer(posted, StatusCode::CREATED)
}

fn payment_reversed(posted: &AccountPosted) -> RecordedResponse {
    payment_answer(posted, StatusCode::OK)
}

fn payment_answer(posted: &AccountPosted, status: StatusCode) -> RecordedResponse {
    match &posted.payment {
        Some(payment) => RecordedResponse {
            status: status.as_u16(),
            location: Some(Resource::Payment(payment.id).location()),
            body: to_json(&PaymentView::new(payment)),
        },
        // A payment's posting always carries its payment.
        None => adjustment_posted(posted),
    }
}

fn adjustment_posted(posted: &AccountPosted) -> RecordedResponse {
    RecordedResponse {
        status: StatusCode::CREATED.as_u16(),
        location: Some(Resource::Account(posted.account.customer_id).location()),
        body: to_json(&TransactionView::new(&posted.transaction)),
    }
}
