//! The producers' web app under `/app`: server-rendered pages for a producer's delivery day
//! (the packing summary and the delivery list by route, printable one route per A4 page),
//! behind a sign-in with the producer accounts of the catalogue. It is a front end of its
//! own beside the API: the HTTP front end hands it every `/app` request, and it reaches the
//! rest only through [`crate::service::Service`], like the API. It decides its pages' status
//! codes; every page carries a `Content-Security-Policy` without scripts and may not be
//! framed. No page needs JavaScript, and none has any.
//!
//! Must not touch: the registry, actors or store; the API's JSON and its errors.

mod day;
mod guard;
mod pages;
mod spreadsheet;
mod week;

use std::sync::Arc;
use std::time::Duration;

use askama::Template;
use bytes::Bytes;
use warp::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use warp::reply::Response;

use crate::domain::catalogue::Webstore;
use crate::domain::routing::{route_key, ROUTING_COOKIE};
use crate::domain::schedule::{delivery_day_from, delivery_days_around, parse_iso_date, Day};
use crate::service::producers::{ProducerSession, SignInRefused};
use crate::service::{Delivery, Service, ServiceError};

pub use day::DayView;
pub use guard::PublicOrigin;
use guard::{cookie, cookie_text, tokens_match, FORM_COOKIE, SESSION_COOKIE};
use pages::{DayPage, MessagePage, SignInPage, WeekPage};
pub use spreadsheet::spreadsheet_safe;

/// The app's stylesheet, served at `/app/app.css`.
const STYLESHEET: &str = include_str!("app.css");

/// No script, style and images from the app alone, forms posted to the app alone, and never
/// inside a frame.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; img-src 'self'; \
     form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The app's routes: what logs and metrics name an `/app` request by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppRoute {
    /// `/app`: leads to the next delivery day.
    Home,
    /// `/app/sign_in`.
    SignIn,
    /// `/app/sign_out`.
    SignOut,
    /// `/app/deliveries/:date`.
    Day,
    /// `/app/deliveries/:date.csv`.
    DayCsv,
    /// `/app/weeks/:date`.
    Week,
    /// `/app/app.css`.
    Stylesheet,
    /// Any other path under `/app`.
    Unmatched,
}

impl AppRoute {
    /// The template, as logs and metrics name it.
    pub fn template(self) -> &'static str {
        match self {
            AppRoute::Home => "/app",
            AppRoute::SignIn => "/app/sign_in",
            AppRoute::SignOut => "/app/sign_out",
            AppRoute::Day => "/app/deliveries/:date",
            AppRoute::DayCsv => "/app/deliveries/:date.csv",
            AppRoute::Week => "/app/weeks/:date",
            AppRoute::Stylesheet => "/app/app.css",
            AppRoute::Unmatched => "/app/*",
        }
    }
}

/// Whether `path` is the app's.
pub fn owns(path: &str) -> bool {
    path == "/app" || path.starts_with("/app/")
}

/// The route of an app path, and the date it names (for a day and its CSV).
pub fn route(path: &str) -> (AppRoute, Option<Day>) {
    let path = path.strip_suffix('/').unwrap_or(path);
    match path {
        "/app" => return (AppRoute::Home, None),
        "/app/sign_in" => return (AppRoute::SignIn, None),
        "/app/sign_out" => return (AppRoute::SignOut, None),
        "/app/app.css" => return (AppRoute::Stylesheet, None),
        _ => {}
    }
    let (date, route) = if let Some(date) = path.strip_prefix("/app/weeks/") {
        (date, AppRoute::Week)
    } else if let Some(date) = path.strip_prefix("/app/deliveries/") {
        match date.strip_suffix(".csv") {
            Some(date) => (date, AppRoute::DayCsv),
            None => (date, AppRoute::Day),
        }
    } else {
        return (AppRoute::Unmatched, None);
    };
    // `parse_iso_date` trims; a path's date is exactly ten characters.
    match parse_iso_date(date).filter(|_| date.len() == 10) {
        Some(day) => (route, Some(day)),
        None => (AppRoute::Unmatched, None),
    }
}

/// How the app is served.
#[derive(Debug, Clone, Default)]
pub struct AppSettings {
    /// The public URL's origin, if the operator gave one (`--public-url`).
    pub public: PublicOrigin,
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
            let webstore = signed_in(service, request.headers)?.webstore;
            let day = delivery_day_from(webstore.today(), webstore.delivery_week_days());
            see_other(&format!("/app/deliveries/{}", day.date()))
        }
        (route @ (AppRoute::Day | AppRoute::DayCsv), Some(date)) => {
            only_get(method)?;
            return day(service, request, date, route == AppRoute::DayCsv).await;
        }
        (AppRoute::Week, Some(date)) => {
            only_get(method)?;
            return week(service, request, date).await;
        }
        (AppRoute::Day | AppRoute::DayCsv | AppRoute::Week | AppRoute::Unmatched, _) => {
            return Err(AppError::NotFound)
        }
    };
    Ok(AppAnswer::Page(page))
}

/// A day's CSV (`csv`, the API's CSV of the day's whole list) as a download named after the
/// date, with the headers of every app response.
pub fn csv_download(mut csv: Response, date: Day) -> Response {
    let disposition = format!("attachment; filename=\"deliveries-{}.csv\"", date.date());
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        csv.headers_mut().insert(header::CONTENT_DISPOSITION, value);
    }
    csv.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    secured(csv)
}

/// The page of a standby or a node catching up: the app is not served here now.
pub fn unavailable() -> Response {
    secured(error_page(AppError::Service(ServiceError::Busy)))
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

/// The session the request's cookie names.
fn signed_in(service: &Service, headers: &HeaderMap) -> Result<ProducerSession, AppError> {
    cookie(headers, SESSION_COOKIE)
        .and_then(|id| service.producer_session(id))
        .ok_or(AppError::NotSignedIn)
}

/// `GET /app/sign_in`: the form (or, signed in already, the app).
fn sign_in_form(service: &Service, settings: &AppSettings, request: &AppRequest<'_>) -> Response {
    if signed_in(service, request.headers).is_ok() {
        return see_other("/app");
    }
    sign_in_page(settings, request.headers, StatusCode::OK, &[], "")
}

/// The sign-in form with `alerts`, keeping the form cookie the browser has (or setting a new
/// one), so that the form's token and the cookie agree.
fn sign_in_page(
    settings: &AppSettings,
    headers: &HeaderMap,
    status: StatusCode,
    alerts: &[String],
    email: &str,
) -> Response {
    let (token, new_token) = match cookie(headers, FORM_COOKIE) {
        Some(token) => (token.to_owned(), false),
        None => match crate::service::producers::random_token() {
            Ok(token) => (token, true),
            Err(error) => return error_page(AppError::Service(error)),
        },
    };
    let page = SignInPage {
        alerts,
        email,
        form_token: &token,
    };
    let mut response = html(status, page.render());
    if new_token {
        response.headers_mut().append(
            header::SET_COOKIE,
            settings.public.set_cookie(FORM_COOKIE, &token, "Strict"),
        );
    }
    response
}

/// The sign-in form's fields.
#[derive(serde::Deserialize, Default)]
struct SignInForm {
    #[serde(default)]
    email: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    form_token: String,
}

/// The sign-out form's field.
#[derive(serde::Deserialize, Default)]
struct TokenForm {
    #[serde(default)]
    form_token: String,
}

/// `POST /app/sign_in`.
async fn sign_in(
    service: &Service,
    settings: &AppSettings,
    request: &AppRequest<'_>,
) -> Result<Response, AppError> {
    let headers = request.headers;
    let form: SignInForm = parse_form(request.form.as_ref());
    let form_cookie = cookie(headers, FORM_COOKIE);
    let genuine = settings.public.same_origin(headers)
        && form_cookie.is_some_and(|expected| tokens_match(Some(&form.form_token), expected));
    if !genuine {
        let alert = "This form expired or came from another site: please sign in again.";
        return Ok(sign_in_page(
            settings,
            headers,
            StatusCode::FORBIDDEN,
            &[alert.to_owned()],
            "",
        ));
    }
    let mut blank = Vec::new();
    if form.email.trim().is_empty() {
        blank.push("Email can't be blank.".to_owned());
    }
    if form.password.is_empty() {
        blank.push("Password can't be blank.".to_owned());
    }
    if !blank.is_empty() {
        return Ok(sign_in_page(
            settings,
            headers,
            StatusCode::UNPROCESSABLE_ENTITY,
            &blank,
            form.email.trim(),
        ));
    }
    match service.producer_sign_in(&form.email, form.password).await {
        Ok(signed_in) => {
            let mut response = see_other("/app");
            response.headers_mut().append(
                header::SET_COOKIE,
                settings
                    .public
                    .set_cookie(SESSION_COOKIE, &signed_in.session_id, "Lax"),
            );
            // The deployment's front end routes this browser's app to the webstore's shard.
            let route = route_key(&signed_in.webstore_id);
            response.headers_mut().append(
                header::SET_COOKIE,
                settings.public.set_cookie(ROUTING_COOKIE, &route, "Lax"),
            );
            Ok(response)
        }
        Err(SignInRefused::ServedElsewhere(webstore_id)) => {
            // The deployment's front end routes the app by the routing cookie: set it and
            // send the form back (307 keeps the method and the body), unless it named this
            // webstore already and still reached a shard that does not serve it.
            let route = route_key(&webstore_id);
            if cookie_text(headers, ROUTING_COOKIE) == Some(route.as_str()) {
                return Err(AppError::Misdirected);
            }
            let mut response = with_headers(
                with_status(
                    Response::new(Bytes::new().into()),
                    StatusCode::TEMPORARY_REDIRECT,
                ),
                &[
                    (header::CACHE_CONTROL, "no-store"),
                    (header::LOCATION, "/app/sign_in"),
                ],
            );
            response.headers_mut().append(
                header::SET_COOKIE,
                settings.public.set_cookie(ROUTING_COOKIE, &route, "Lax"),
            );
            Ok(response)
        }
        Err(SignInRefused::Wrong) => Ok(sign_in_page(
            settings,
            headers,
            StatusCode::UNAUTHORIZED,
            &["Wrong email or password.".to_owned()],
            form.email.trim(),
        )),
        Err(SignInRefused::Throttled(retry_after)) => {
            let minutes = retry_after.as_secs().div_ceil(60).max(1);
            let alert = format!(
                "Too many failed sign-ins for this email: try again in {minutes} minute{}.",
                if minutes == 1 { "" } else { "s" }
            );
            let mut response = sign_in_page(
                settings,
                headers,
                StatusCode::TOO_MANY_REQUESTS,
                &[alert],
                form.email.trim(),
            );
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, retry_after_value(retry_after));
            Ok(response)
        }
        Err(SignInRefused::Failed(error)) => Err(AppError::Service(error)),
    }
}

/// `POST /app/sign_out`: ends the session on the server and forgets its cookie.
async fn sign_out(
    service: &Service,
    settings: &AppSettings,
    request: &AppRequest<'_>,
) -> Result<Response, AppError> {
    let form: TokenForm = parse_form(request.form.as_ref());
    let Some(id) = cookie(request.headers, SESSION_COOKIE) else {
        return Ok(see_other("/app/sign_in"));
    };
    let Some(session) = service.producer_session(id) else {
        return Ok(see_other("/app/sign_in"));
    };
    if !settings.public.same_origin(request.headers)
        || !tokens_match(Some(&form.form_token), &session.form_token)
    {
        return Err(AppError::ForgedForm);
    }
    service.producer_sign_out(id).await?;
    let mut response = see_other("/app/sign_in");
    response.headers_mut().append(
        header::SET_COOKIE,
        settings.public.clear_cookie(SESSION_COOKIE, "Lax"),
    );
    Ok(response)
}

/// `GET /app/deliveries/:date` and its CSV.
async fn day(
    service: &Service,
    request: &AppRequest<'_>,
    date: Day,
    csv: bool,
) -> Result<AppAnswer, AppError> {
    let session = signed_in(service, request.headers)?;
    let webstore = session.webstore;
    if !service.placement().serves(&webstore.settings.id) {
        return Err(AppError::Misdirected);
    }
    let deliveries = service.all_deliveries(&webstore, date).await?;
    if csv {
        return Ok(AppAnswer::DeliveriesCsv {
            date,
            webstore,
            deliveries,
        });
    }
    let view = DayView::of(&deliveries, &webstore);
    let (prev, next) = delivery_days_around(date, webstore.delivery_week_days());
    let page = DayPage {
        webstore: &webstore.settings.name,
        date: date.date().to_string(),
        date_label: day::long_date(date),
        prev: prev.date().to_string(),
        prev_label: day::short_date(prev),
        next: next.date().to_string(),
        next_label: day::short_date(next),
        week: date.week_start().date().to_string(),
        form_token: &session.form_token,
        day: &view,
    };
    Ok(AppAnswer::Page(html(StatusCode::OK, page.render())))
}

/// `GET /app/weeks/:date`: the seven days from `date`.
async fn week(
    service: &Service,
    request: &AppRequest<'_>,
    first: Day,
) -> Result<AppAnswer, AppError> {
    let session = signed_in(service, request.headers)?;
    let webstore = session.webstore;
    if !service.placement().serves(&webstore.settings.id) {
        return Err(AppError::Misdirected);
    }
    let mut days = Vec::with_capacity(week::DAYS as usize);
    for offset in 0..week::DAYS {
        let date = first.plus(offset);
        days.push((date, service.all_deliveries(&webstore, date).await?));
    }
    let view = week::WeekView::of(&days, &webstore);
    let (prev, next) = (first.plus(-week::DAYS), first.plus(week::DAYS));
    let page = WeekPage {
        webstore: &webstore.settings.name,
        first: first.date().to_string(),
        range_label: week::range_label(first),
        prev: prev.date().to_string(),
        prev_label: day::short_date(prev),
        next: next.date().to_string(),
        next_label: day::short_date(next),
        form_token: &session.form_token,
        week: &view,
    };
    Ok(AppAnswer::Page(html(StatusCode::OK, page.render())))
}

fn parse_form<T: serde::de::DeserializeOwned + Default>(body: Option<&Bytes>) -> T {
    // A malformed form is a form with no fields: the checks that follow name what is missing.
    body.and_then(|body| serde_urlencoded::from_bytes(body).ok())
        .unwrap_or_default()
}

fn stylesheet() -> Response {
    with_headers(
        Response::new(STYLESHEET.into()),
        &[
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
    )
}

/// `response` with these headers set.
fn with_headers(mut response: Response, headers: &[(HeaderName, &'static str)]) -> Response {
    for (name, value) in headers {
        response
            .headers_mut()
            .insert(name.clone(), HeaderValue::from_static(value));
    }
    response
}

fn html(status: StatusCode, rendered: askama::Result<String>) -> Response {
    match rendered {
        Ok(body) => with_headers(
            with_status(Response::new(body.into()), status),
            &[
                (header::CONTENT_TYPE, "text/html; charset=utf-8"),
                (header::CACHE_CONTROL, "no-store"),
            ],
        ),
        Err(error) => {
            tracing::error!(%error, "an app page failed to render");
            with_headers(
                with_status(
                    Response::new("The page failed to render.".into()),
                    StatusCode::INTERNAL_SERVER_ERROR,
                ),
                &[(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            )
        }
    }
}

fn see_other(location: &str) -> Response {
    let mut response = with_headers(
        with_status(Response::new(Bytes::new().into()), StatusCode::SEE_OTHER),
        &[(header::CACHE_CONTROL, "no-store")],
    );
    if let Ok(value) = HeaderValue::from_str(location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

fn with_status(mut response: Response, status: StatusCode) -> Response {
    *response.status_mut() = status;
    response
}

fn retry_after_value(after: Duration) -> HeaderValue {
    HeaderValue::from(after.as_secs().max(1))
}

/// The page of an error, with its status.
fn error_page(error: AppError) -> Response {
    let message = |status: StatusCode, title: &str, detail: &str| {
        let page = MessagePage {
            title,
            detail,
            link: "/app",
            link_text: "Back to the delivery days",
        };
        html(status, page.render())
    };
    match error {
        AppError::NotSignedIn => see_other("/app/sign_in"),
        AppError::NotFound => message(
            StatusCode::NOT_FOUND,
            "Page not found",
            "There is no such page. A day's address is /app/deliveries/YYYY-MM-DD.",
        ),
        AppError::MethodNotAllowed(allow) => {
            let mut response = message(
                StatusCode::METHOD_NOT_ALLOWED,
                "Method not allowed",
                "This page cannot be asked for that way.",
            );
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static(allow));
            response
        }
        AppError::ForgedForm => message(
            StatusCode::FORBIDDEN,
            "Form refused",
            "This form expired or came from another site; nothing was done.",
        ),
        AppError::Misdirected => message(
            StatusCode::MISDIRECTED_REQUEST,
            "Served elsewhere",
            "Your webstore is served by another node now: open the app again in a moment.",
        ),
        AppError::Service(error) => {
            let (status, detail) = match &error {
                ServiceError::Busy | ServiceError::Throttled { .. } => (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "The service is busy or not serving here now: try again in a moment.",
                ),
                ServiceError::NotFound => (StatusCode::NOT_FOUND, "There is no such page."),
                other => {
                    tracing::error!(error = %other, "an app page failed");
                    (
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "Something went wrong on our side; nothing was changed.",
                    )
                }
            };
            let mut response = message(status, "Not available", detail);
            if status == StatusCode::SERVICE_UNAVAILABLE {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            response
        }
    }
}

/// Every app response: no scripts, no framing, no sniffing, no referrer beyond the app.
fn secured(response: Response) -> Response {
    with_headers(
        response,
        &[
            (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
            (header::X_FRAME_OPTIONS, "DENY"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "same-origin"),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_paths_resolve_to_routes_and_dates() {
        let day = parse_iso_date("2026-11-26");
        assert_eq!(route("/app"), (AppRoute::Home, None));
        assert_eq!(route("/app/"), (AppRoute::Home, None));
        assert_eq!(route("/app/sign_in"), (AppRoute::SignIn, None));
        assert_eq!(route("/app/deliveries/2026-11-26"), (AppRoute::Day, day));
        assert_eq!(
            route("/app/deliveries/2026-11-26.csv"),
            (AppRoute::DayCsv, day)
        );
        for unmatched in [
            "/app/deliveries/2026-02-30",
            "/app/deliveries/2026-11-26.pdf",
            "/app/deliveries/ 2026-11-26",
            "/app/deliveries/",
            "/app/x",
        ] {
            assert_eq!(route(unmatched), (AppRoute::Unmatched, None), "{unmatched}");
        }
        assert!(owns("/app") && owns("/app/x") && !owns("/apple") && !owns("/v1/app"));
    }
}
