//! What every app answer is made of: HTML pages with their status, redirects, the
//! stylesheet, the page of each error, a day's CSV as a download, and the headers every
//! answer carries (a `Content-Security-Policy` without scripts, no framing, no sniffing).
//!
//! Must not touch: the service, sessions, routes.

use std::time::Duration;

use askama::Template;
use bytes::Bytes;
use warp::http::{header, HeaderName, HeaderValue, StatusCode};
use warp::reply::Response;

use crate::domain::day::Day;
use crate::service::ServiceError;

use super::pages::MessagePage;
use super::AppError;

/// The app's stylesheet, served at `/app/app.css`.
const STYLESHEET: &str = include_str!("app.css");

/// No script, style and images from the app alone, forms posted to the app alone, and never
/// inside a frame.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; img-src 'self'; \
     form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

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

pub(super) fn stylesheet() -> Response {
    with_headers(
        Response::new(STYLESHEET.into()),
        &[
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
    )
}

/// `response` with these headers set.
pub(super) fn with_headers(
    mut response: Response,
    headers: &[(HeaderName, &'static str)],
) -> Response {
    for (name, value) in headers {
        response
            .headers_mut()
            .insert(name.clone(), HeaderValue::from_static(value));
    }
    response
}

pub(super) fn html(status: StatusCode, rendered: askama::Result<String>) -> Response {
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

pub(super) fn see_other(location: &str) -> Response {
    let mut response = with_headers(
        with_status(Response::new(Bytes::new().into()), StatusCode::SEE_OTHER),
        &[(header::CACHE_CONTROL, "no-store")],
    );
    if let Ok(value) = HeaderValue::from_str(location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

pub(super) fn with_status(mut response: Response, status: StatusCode) -> Response {
    *response.status_mut() = status;
    response
}

pub(super) fn retry_after_value(after: Duration) -> HeaderValue {
    HeaderValue::from(after.as_secs().max(1))
}

/// The page of an error, with its status.
pub(super) fn error_page(error: AppError) -> Response {
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
        AppError::OverQuota(refusal) => {
            let mut response = message(
                StatusCode::TOO_MANY_REQUESTS,
                "Too many requests",
                "Your webstore has asked for more than its quota allows just now: try again in \
                 a few seconds.",
            );
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from(refusal.retry_after_secs.max(1)),
            );
            response
        }
        AppError::Service(ServiceError::Moving) => {
            let mut response = message(
                StatusCode::SERVICE_UNAVAILABLE,
                "Moving",
                "Your webstore is being moved to another node: try again in a few seconds.",
            );
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            response
        }
        AppError::Service(error) => {
            let (status, detail) = match &error {
                ServiceError::Busy | ServiceError::SignInThrottled { .. } => (
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
pub(super) fn secured(response: Response) -> Response {
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
