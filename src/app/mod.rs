//! The producers' web app under `/app`: server-rendered pages for a producer's delivery day
//! (the packing summary and the delivery list by route, printable one route per A4 page),
//! behind a sign-in with the producer accounts of the catalogue. It is a front end of its
//! own beside the API: the HTTP front end hands it every `/app` request, and it reaches the
//! rest only through [`crate::service::Service`], like the API. It decides its pages' status
//! codes; every page carries a `Content-Security-Policy` without scripts and may not be
//! framed. No page needs JavaScript, and none has any.
//!
//! - `routes`: the app's paths, and the route and date each names.
//! - `sign_in`: the sign-in form, signing in and out, the session a request carries.
//! - `deliveries`: the day and week pages, and a day's CSV.
//! - `responses`: the answers' shapes and headers, the stylesheet, the error pages.
//! - `day`, `week`: a day and a week as the pages show them; `pages`: the templates.
//! - `guard`: cookies, the public origin, forms from other sites.
//! - `spreadsheet`: the cells of the day's download a spreadsheet would run.
//!
//! This file owns the entry: the request and answer types the HTTP front end hands over and
//! takes back, why a page cannot be shown, and which handler answers which route and
//! method.
//!
//! Must not touch: the registry, actors or store; the API's JSON and its errors.

mod day;
mod deliveries;
mod guard;
mod pages;
mod responses;
mod routes;
mod sign_in;
mod spreadsheet;
mod week;

use std::sync::Arc;

use bytes::Bytes;
use warp::http::{HeaderMap, Method};
use warp::reply::Response;

use crate::domain::catalogue::Webstore;
use crate::domain::day::Day;
use crate::domain::order::schedule::delivery_day_from;
use crate::service::{Delivery, Service, ServiceError};

use responses::{error_page, secured, see_other, stylesheet};
use sign_in::{sign_in, sign_in_form, sign_out, signed_in_here};

pub use day::DayView;
pub use guard::PublicOrigin;
pub use responses::{csv_download, unavailable};
pub use routes::{owns, route, AppRoute};
pub use spreadsheet::spreadsheet_safe;

/// How the app is served.
#[derive(Debug, Clone, Default)]
pub struct AppSettings {
    /// The public URL's origin, if the operator gave one (`--public-url`).
    pub public: PublicOrigin,
    /// The proxies whose `X-Forwarded-For` names the client (`--trusted-proxies`).
    pub trusted_proxies: Vec<std::net::IpAddr>,
}

/// An `/app` request: its head, and for a POST its form body, already read within the
/// front end's limits.
pub struct AppRequest<'a> {
    /// Its method.
    pub method: &'a Method,
    /// Its path.
    pub path: &'a str,
    /// Its headers.
    pub headers: &'a HeaderMap,
    /// Its body, for a POST.
    pub form: Option<Bytes>,
    /// The client's address, as the front end found it (`None` for a request made
    /// in-process, which counts as one unknown client).
    pub client: Option<std::net::IpAddr>,
}

/// What the app answers: a page, or a day's CSV, which is the API's own CSV and which the
/// API's front end therefore writes.
pub enum AppAnswer {
    /// A response to send as it is.
    Page(Response),
    /// The deliveries of a day, to send as the API's delivery list CSV.
    DeliveriesCsv {
        /// The day.
        date: Day,
        /// The producer's webstore.
        webstore: Arc<Webstore>,
        /// Every delivery of the day, in the list's order.
        deliveries: Vec<Delivery>,
    },
}

/// Why a page cannot be shown.
#[derive(Debug)]
enum AppError {
    /// No session, or one that ended: to the sign-in form.
    NotSignedIn,
    /// No such page.
    NotFound,
    /// The page exists; these methods are allowed on it.
    MethodNotAllowed(&'static str),
    /// A form that did not come from the app's own page, or whose token is wrong.
    ForgedForm,
    /// The producer's webstore is served by another node now.
    Misdirected,
    /// The producer's webstore went past one of its quotas.
    OverQuota(crate::quotas::OverQuota),
    /// The service could not answer.
    Service(ServiceError),
}

impl From<ServiceError> for AppError {
    fn from(error: ServiceError) -> Self {
        AppError::Service(error)
    }
}

/// Answers one `/app` request.
pub async fn handle(
    service: &Service,
    settings: &AppSettings,
    request: AppRequest<'_>,
) -> AppAnswer {
    match respond(service, settings, &request).await {
        Ok(AppAnswer::Page(response)) => AppAnswer::Page(secured(response)),
        Ok(csv) => csv,
        Err(error) => AppAnswer::Page(secured(error_page(error))),
    }
}

/// The answer of the page the request names, before the headers every answer carries.
async fn respond(
    service: &Service,
    settings: &AppSettings,
    request: &AppRequest<'_>,
) -> Result<AppAnswer, AppError> {
    let method = request.method;
    let page = match route(request.path) {
        (AppRoute::Stylesheet, _) => {
            only_get(method)?;
            stylesheet()
        }
        (AppRoute::SignIn, _) if is_get(method) => sign_in_form(service, settings, request),
        (AppRoute::SignIn, _) if method == Method::POST => {
            sign_in(service, settings, request).await?
        }
        (AppRoute::SignIn, _) => return Err(AppError::MethodNotAllowed("GET, POST")),
        (AppRoute::SignOut, _) if method == Method::POST => {
            sign_out(service, settings, request).await?
        }
        (AppRoute::SignOut, _) => return Err(AppError::MethodNotAllowed("POST")),
        (AppRoute::Home, _) => {
            only_get(method)?;
            let webstore = signed_in_here(service, request.headers)?.webstore;
            let day = delivery_day_from(
                webstore.today(crate::clock::unix_now()),
                webstore.delivery_week_days(),
            );
            see_other(&format!("/app/deliveries/{}", day.date()))
        }
        (route @ (AppRoute::Day | AppRoute::DayCsv), Some(date)) => {
            only_get(method)?;
            return deliveries::day(service, request, date, route == AppRoute::DayCsv).await;
        }
        (AppRoute::Week, Some(date)) => {
            only_get(method)?;
            return deliveries::week(service, request, date).await;
        }
        (AppRoute::Day | AppRoute::DayCsv | AppRoute::Week | AppRoute::Unmatched, _) => {
            return Err(AppError::NotFound)
        }
    };
    Ok(AppAnswer::Page(page))
}

fn is_get(method: &Method) -> bool {
    method == Method::GET || method == Method::HEAD
}

fn only_get(method: &Method) -> Result<(), AppError> {
    if is_get(method) {
        Ok(())
    } else {
        Err(AppError::MethodNotAllowed("GET"))
    }
}
