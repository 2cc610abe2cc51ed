//! The HTTP front end: one warp filter that takes every request, authenticates it, finds its
//! endpoint with the pure route table, and hands it to a handler; one `recover` renders
//! anything warp itself rejects. The HTTP layer alone decides status codes and bodies.
//!
//! Must not touch: domain rules beyond parsing inputs, the registry's maps, actor messages or
//! storage; everything goes through [`crate::service::Service`].

mod accounts;
pub mod admin;
mod body;
pub mod client;
mod error;
mod handlers;
mod observe;
mod ratelimit;
mod router;
pub mod server;
mod views;
pub mod watch;

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes};
use futures_util::future::{BoxFuture, FutureExt};
use futures_util::Stream;
use warp::filters::path::FullPath;
use warp::http::{header, HeaderMap, Method, StatusCode};
use warp::reply::Response;
use warp::Filter;

use crate::app::{AppAnswer, AppRequest, AppSettings};
use crate::domain::catalogue::Webstore;
use crate::node::Node;
use crate::quotas::{Checked, Kind};
use crate::service::write_outcome::{self, WriteBegun};
use crate::service::Service;

pub use body::{json_fields, json_object, Params, MAX_BODY_BYTES};
pub use error::ApiError;
pub use handlers::{sign_in_params, SignInParams};
pub use router::{needs_credentials, resolve, route, Endpoint, Route, RouteError};
pub use views::{CustomerView, DeliveryView, Embed, OrderView};

use body::read_limited;
use client::{client_address, PeerAddress};
use observe::RequestRecord;

/// Deadlines of one request, from the moment its head has been read.
#[derive(Debug, Clone, Copy)]
pub struct RequestLimits {
    /// Longest the body may take to arrive (408 and a closed connection past it).
    pub body_timeout: Duration,
    /// Longest the whole request may take (503 past it).
    pub request_timeout: Duration,
}

/// What the front end serves besides the API.
#[derive(Debug, Clone)]
pub struct RouteSettings {
    /// Deadlines of each request.
    pub limits: RequestLimits,
    /// Whether `GET /metrics` is served here (it may be on another address, or off).
    pub metrics: bool,
    /// How the producers' web app (`/app`) is served.
    pub app: Arc<AppSettings>,
}

/// Every route of the API, as one filter that never rejects.
pub fn routes(
    node: Arc<Node>,
    settings: RouteSettings,
) -> impl Filter<Extract = (Response,), Error = Infallible> + Clone + Send + Sync + 'static {
    let node = warp::any().map(move || node.clone());
    let limits = warp::any().map(move || settings.clone());
    let query = warp::query::raw().or(warp::any().map(String::new)).unify();
    node.and(limits)
        .and(warp::method())
        .and(warp::path::full())
        .and(query)
        .and(
            warp::header::headers_cloned()
                .and(warp::ext::optional::<PeerAddress>())
                .map(|headers, peer| Sent { headers, peer }),
        )
        .and(warp::body::stream())
        .then(handle)
        .recover(error::recover)
        .unify()
}

/// A request's headers, and the peer it came from (told to the app's requests only).
struct Sent {
    headers: HeaderMap,
    peer: Option<PeerAddress>,
}

/// What every handler gets: the service, the caller's webstore and the query parameters,
/// and where to say that its answer acknowledges a write.
pub(crate) struct Call<'a> {
    service: &'a Service,
    webstore: &'a Arc<Webstore>,
    params: Params,
    headers: &'a HeaderMap,
    acknowledged: &'a WriteAcknowledged,
}

/// Handles one request within its deadline, and records it (request id, log line,
/// metrics). Dropping the request's future there (or when its client goes away) is safe:
/// everything it holds is released by guards.
async fn handle<S, B>(
    node: Arc<Node>,
    settings: RouteSettings,
    method: Method,
    path: FullPath,
    query: String,
    sent: Sent,
    body: S,
) -> Response
where
    S: Stream<Item = Result<B, warp::Error>> + Send,
    B: Buf + Send,
{
    let Sent { headers, peer } = sent;
    let path = path.as_str();
    let mut record = RequestRecord::begin(&method, router::route(&method, path), &headers);
    let acknowledged = WriteAcknowledged::default();
    let request = Request {
        method: &method,
        path,
        query: &query,
        headers: &headers,
        body_timeout: settings.limits.body_timeout,
        acknowledged: &acknowledged,
    };
    let deadline = settings.limits.request_timeout;
    let mut response = if path == "/metrics" {
        metrics(&node, &method, settings.metrics)
    } else if path == "/health" {
        health(&node, &method)
    } else if crate::app::owns(path) {
        // The producers' app: its own pages, also for a standby or a passed deadline. Every
        // page (a sign-in's and a sign-out's too) shows what this node read: none goes out
        // once the lease is gone.
        match node.service() {
            Some(service) => {
                let client = client_address(peer, &headers, &settings.app.trusted_proxies);
                let page = within(
                    deadline,
                    Box::pin(app_page(&service, &settings.app, request, client, body)),
                )
                .await
                .unwrap_or_else(crate::app::unavailable);
                if node.leased() {
                    page
                } else {
                    crate::app::unavailable()
                }
            }
            None => crate::app::unavailable(),
        }
    } else if let Some(service) = node.service() {
        // Whether the request handed a write to the store decides what a failure says:
        // nothing was changed, or the outcome is unknown (`write_outcome`).
        let begun = WriteBegun::default();
        let dispatched = write_outcome::tracked(&begun, async {
            dispatch(&service, request, body, &mut record)
                .await
                .map_err(|error| error.after_write(begun.get()))
        });
        let answer = within(deadline, dispatched).await.unwrap_or_else(|| {
            ApiError::DeadlineExceeded
                .after_write(begun.get())
                .into_response()
        });
        if may_go_out(&node, &acknowledged) {
            answer
        } else {
            ApiError::NotPrimary
                .after_write(begun.get())
                .into_response()
        }
    } else {
        ApiError::NotPrimary.into_response()
    };
    record.finish(&mut response);
    response
}

/// Whether an API answer may go out: only while the node still holds its read lease once
/// the answer is made, since what it read is the group's state only if no standby could
/// have taken over by then, and the node has given up no write meanwhile. That holds for
/// every answer made from what the node read, whatever the method: a read, a sign-in, an
/// idempotent replay, a refusal (a 503 in its place changes nothing). The one answer that
/// goes out without the lease is a write's acknowledgement ([`WriteAcknowledged`]): the
/// group holds the write, and the client must hear so.
fn may_go_out(node: &Node, acknowledged: &WriteAcknowledged) -> bool {
    node.leased() || acknowledged.0.load(std::sync::atomic::Ordering::Relaxed)
}

/// Whether a request's answer acknowledges a write the group (or a single node's log) holds
/// durably: a create's 201, an update's 200. Marked by the handlers; never for a replay.
#[derive(Debug, Default)]
pub(crate) struct WriteAcknowledged(std::sync::atomic::AtomicBool);

impl WriteAcknowledged {
    /// The answer being made acknowledges a durable write: it goes out even if the lease
    /// lapsed meanwhile.
    fn mark(&self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// `answer` rendered, or `None` (counted) when it is not ready within `deadline`.
async fn within(
    deadline: Duration,
    answer: impl Future<Output = Result<Response, ApiError>>,
) -> Option<Response> {
    match tokio::time::timeout(deadline, answer).await {
        Ok(answer) => Some(answer.unwrap_or_else(ApiError::into_response)),
        Err(_) => {
            crate::metrics::refused(crate::metrics::Refusal::RequestDeadline);
            None
        }
    }
}

/// The routes of a listener of its own for the metrics: `GET /metrics`, and 404 for
/// anything else.
pub fn metrics_routes(
    node: Arc<Node>,
) -> impl Filter<Extract = (Response,), Error = Infallible> + Clone + Send + Sync + 'static {
    warp::any().and(warp::method()).and(warp::path::full()).map(
        move |method: Method, path: FullPath| {
            let route = router::route(&method, path.as_str());
            let record = RequestRecord::begin(&method, route, &HeaderMap::new());
            let mut response = if path.as_str() == "/metrics" {
                metrics(&node, &method, true)
            } else {
                ApiError::NotFound.into_response()
            };
            record.finish(&mut response);
            response
        },
    )
}

/// `GET /metrics`: the Prometheus text exposition, without credentials.
fn metrics(node: &Node, method: &Method, served_here: bool) -> Response {
    if !served_here {
        return ApiError::NotFound.into_response();
    }
    if method != Method::GET {
        return ApiError::MethodNotAllowed("GET").into_response();
    }
    if let Some(service) = node.running_service() {
        service.observe();
    }
    node.count_serving();
    metrics_response()
}

/// `GET /health`, without credentials: 200 while the node takes requests (a single node, or
/// a group's primary), 503 otherwise (a standby, or a node catching up or stepping down),
/// with what the node is doing. What a load balancer's health check asks.
fn health(node: &Node, method: &Method) -> Response {
    if method != Method::GET && method != Method::HEAD {
        return ApiError::MethodNotAllowed("GET").into_response();
    }
    let health = node.health();
    let status = if health.is_serving() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    use warp::Reply;
    let mut response = warp::reply::with_status(warp::reply::json(&health), status).into_response();
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        warp::http::HeaderValue::from_static("no-store"),
    );
    if !health.is_serving() {
        response.headers_mut().insert(
            header::RETRY_AFTER,
            warp::http::HeaderValue::from_static("1"),
        );
    }
    response
}

/// The current metrics as a response (also what a separate metrics listener serves).
pub fn metrics_response() -> Response {
    let mut response = Response::new(crate::metrics::METRICS.render().into());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        warp::http::HeaderValue::from_static(crate::metrics::CONTENT_TYPE),
    );
    response
}

/// An `/app` request: its form read within the request limits (a body the limits refuse
/// gets the API's answer for it), then the app's answer. A day's CSV is the API's CSV.
async fn app_page<S, B>(
    service: &Service,
    settings: &AppSettings,
    request: Request<'_>,
    client: Option<std::net::IpAddr>,
    body: S,
) -> Result<Response, ApiError>
where
    S: Stream<Item = Result<B, warp::Error>> + Send,
    B: Buf + Send,
{
    let form = if *request.method == Method::POST {
        Some(read_limited(body, content_length(request.headers), request.body_timeout).await?)
    } else {
        None
    };
    let app_request = AppRequest {
        method: request.method,
        path: request.path,
        headers: request.headers,
        form,
        client,
    };
    Ok(
        match crate::app::handle(service, settings, app_request).await {
            AppAnswer::Page(response) => response,
            AppAnswer::DeliveriesCsv {
                date,
                webstore,
                deliveries,
            } => {
                let views: Vec<_> = deliveries
                    .iter()
                    .map(|delivery| DeliveryView::new(delivery, &webstore))
                    .collect();
                crate::app::csv_download(
                    views::csv_response(&views, crate::app::spreadsheet_safe),
                    date,
                )
            }
        },
    )
}

/// The parts of a request that dispatch reads.
struct Request<'a> {
    method: &'a Method,
    path: &'a str,
    query: &'a str,
    headers: &'a HeaderMap,
    body_timeout: Duration,
    acknowledged: &'a WriteAcknowledged,
}

async fn dispatch<S, B>(
    service: &Service,
    request: Request<'_>,
    body: S,
    record: &mut RequestRecord,
) -> Result<Response, ApiError>
where
    S: Stream<Item = Result<B, warp::Error>> + Send,
    B: Buf + Send,
{
    use Endpoint::*;
    let Request {
        method,
        path,
        query,
        headers,
        body_timeout,
        acknowledged,
    } = request;
    // Credentials come before anything else, so an unauthenticated caller learns nothing.
    if !needs_credentials(method, path) {
        return match router::resolve(method, path)? {
            Ping => Ok(no_content()),
            OpenApi => Ok(handlers::openapi()),
            _ => Err(ApiError::NotFound),
        };
    }
    let webstore = authenticate(service, headers)?;
    record.webstore(&webstore.settings.id);
    // A write of a frozen webstore is refused once its body is read (`answer`).
    if let Some(refused) = ApiError::not_taken(service.serving().owned(&webstore.settings.id)) {
        return Err(refused);
    }
    // Every answer to the webstore from here on counts against its quotas and says so.
    let endpoint = router::resolve(method, path);
    let kind = match endpoint {
        Ok(endpoint) if endpoint.writes() => Kind::Write,
        _ => Kind::Read,
    };
    let checked = service
        .quotas()
        .check(&webstore, kind)
        .map_err(ApiError::OverQuota)?;
    let call = Call {
        service,
        webstore: &webstore,
        params: Params::parse(query.as_bytes()),
        headers,
        acknowledged,
    };
    let mut response = match endpoint {
        Ok(endpoint) => answer(&call, &checked, endpoint, body, body_timeout).await,
        Err(error) => Err(error.into()),
    }
    .unwrap_or_else(ApiError::into_response);
    ratelimit::stamp(response.headers_mut(), &checked);
    Ok(response)
}

/// The answer of `endpoint` to a caller its quotas let through: its body read (a slow
/// client holds only its own webstore's concurrency quota meanwhile), then its turn in
/// service, then, for a write, its webstore's write ticket, then the work.
async fn answer<S, B>(
    call: &Call<'_>,
    checked: &Checked,
    endpoint: Endpoint,
    body: S,
    body_timeout: Duration,
) -> Result<Response, ApiError>
where
    S: Stream<Item = Result<B, warp::Error>> + Send,
    B: Buf + Send,
{
    use Endpoint::*;
    let headers = call.headers;
    let body = if endpoint.has_body() {
        read_limited(body, content_length(headers), body_timeout).await?
    } else {
        Bytes::new()
    };
    // A sign-in waits for its password check in the password pool, whose shares are fair
    // between webstores, and takes its turn in service only for what follows: waiting for
    // argon2 inside a slot, one webstore's flood of sign-ins would hold every slot.
    let _slot = match endpoint {
        SignIn => None,
        _ => Some(checked.admit().await),
    };
    // Once everything is in from the client and the write's turn has come, it takes its
    // webstore's ticket, held until it is answered, so that a move's freeze waits for it
    // (see `service::serving`) and for nothing a client or a queue could drag out.
    let _write = if endpoint.writes() {
        let id = &call.webstore.settings.id;
        Some(call.service.serving().begin_write(id)?)
    } else {
        None
    };
    // Each handler's future is boxed: they differ in size by kilobytes, and inline here the
    // largest would set the size of every request's future, copied whole each time warp and
    // hyper move it (a tenth of a durable order's CPU went to those copies).
    let work: BoxFuture<'_, Result<Response, ApiError>> = match endpoint {
        Ping => return Ok(no_content()),
        ListCustomers => handlers::list_customers(call).boxed(),
        CreateCustomer => handlers::create_customer(call, &body).boxed(),
        SignIn => handlers::sign_in(call, checked, &body, is_form(headers)).boxed(),
        GetCustomer(id) => handlers::get_customer(call, id).boxed(),
        UpdateCustomer(id) => handlers::update_customer(call, id, &body).boxed(),
        ListOrders => handlers::list_orders(call).boxed(),
        CreateOrder => handlers::create_order(call, &body).boxed(),
        GetOrder(id) => handlers::get_order(call, id).boxed(),
        UpdateOrder(id) => handlers::update_order(call, id, &body).boxed(),
        OrderDeliveries(id) => handlers::order_deliveries(call, id).boxed(),
        ListBoxes => return Ok(handlers::list_boxes(call)),
        GetBox(id) => return handlers::get_box(call, id),
        ListDeliveryServices => return Ok(handlers::list_delivery_services(call)),
        GetDeliveryService(id) => return handlers::get_delivery_service(call, id),
        GetWebstore => return Ok(handlers::get_webstore(call)),
        ListDeliveries => handlers::list_deliveries(call).boxed(),
        OpenApi => return Ok(handlers::openapi()),
        ListEvents => return handlers::list_events(call),
        GetAccount(id) => return accounts::get_account(call, id),
        SetAccount(id) => accounts::set_account(call, id, &body).boxed(),
        ListTransactions(id) => return accounts::list_transactions(call, id),
        ListBooks => return accounts::list_books(call),
        ListPayments(id) => accounts::list_payments(call, id).boxed(),
        GetPayment(id) => accounts::get_payment(call, id).boxed(),
        CreatePayment(id) => accounts::create_payment(call, id, &body).boxed(),
        CreateAdjustment(id) => accounts::create_adjustment(call, id, &body).boxed(),
        ReversePayment(id) => accounts::reverse_payment(call, id, &body).boxed(),
        MarkDelivery(id, date) => accounts::mark_delivery(call, id, date, &body).boxed(),
    };
    work.await
}

fn authenticate(service: &Service, headers: &HeaderMap) -> Result<Arc<Webstore>, ApiError> {
    let header_text = |name: &str| {
        headers
            .get(name)
            .map(|value| value.to_str().unwrap_or("\u{0}"))
    };
    match (header_text("api-key"), header_text("api-secret")) {
        (Some(key), Some(secret)) if !key.is_empty() && !secret.is_empty() => service
            .authenticate(key, secret)
            .ok_or(ApiError::BadCredentials),
        _ => Err(ApiError::MissingCredentials),
    }
}

fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|text| text.parse().ok())
}

fn is_form(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|text| text.starts_with("application/x-www-form-urlencoded"))
}

fn no_content() -> Response {
    let mut response = Response::new(Bytes::new().into());
    *response.status_mut() = StatusCode::NO_CONTENT;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn future_size<A, B, C, D, E, F, G, Fut>(_: fn(A, B, C, D, E, F, G) -> Fut) -> usize {
        std::mem::size_of::<Fut>()
    }

    /// Every request's future is moved whole several times on its way through warp and
    /// hyper; with every handler inline it was 16 KiB, and those copies a tenth of a durable
    /// order's CPU. Boxing the handlers keeps it small (about 2 KiB today).
    #[test]
    fn a_request_future_stays_small() {
        type Body = futures_util::stream::Empty<Result<Bytes, warp::Error>>;
        let size = future_size(handle::<Body, Bytes>);
        assert!(size <= 4096, "a request's future is {size} bytes");
    }
}
