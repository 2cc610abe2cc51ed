//! Signing in and out: the sign-in form (with its form cookie and token), a sign-in checked
//! by the service (its cookies: the session's, and the routing cookie that takes the browser
//! to its webstore's shard), a sign-out, and the session a request's cookie names.
//!
//! Must not touch: passwords and sessions themselves (the service's), the delivery pages.

use std::time::Duration;

use askama::Template;
use bytes::Bytes;
use warp::http::{header, HeaderMap, StatusCode};
use warp::reply::Response;

use crate::domain::routing::{route_key, ROUTING_COOKIE, ROUTING_COOKIE_MAX_AGE_SECS};
use crate::service::client_limits::UNKNOWN_CLIENT;
use crate::service::producers::{ProducerSession, SignInRefused, SignedIn};
use crate::service::Service;

use super::guard::{cookie, cookie_text, tokens_match, FORM_COOKIE, SESSION_COOKIE};
use super::pages::SignInPage;
use super::responses::{error_page, html, retry_after_value, see_other, with_headers, with_status};
use super::{AppError, AppRequest, AppSettings};

/// The session the request's cookie names.
fn signed_in(service: &Service, headers: &HeaderMap) -> Result<ProducerSession, AppError> {
    cookie(headers, SESSION_COOKIE)
        .and_then(|id| service.producer_session(id))
        .ok_or(AppError::NotSignedIn)
}

/// The producer's session for a page of their webstore: `Misdirected` (a 421 page, "served
/// elsewhere") when the routing cookie names a webstore of the catalogue this node does not
/// serve, before any session is looked for. The browser was sent to the wrong shard (the
/// front end's map not yet current after a move): its session, if it has one, is on the
/// webstore's shard, so sending it to sign in here would only lose it; in a moment the map
/// sends it where its webstore is.
pub(super) fn signed_in_here(
    service: &Service,
    headers: &HeaderMap,
) -> Result<ProducerSession, AppError> {
    if let Some(route) = cookie_text(headers, ROUTING_COOKIE) {
        let named = service
            .catalogue()
            .webstores()
            .iter()
            .find(|webstore| route_key(&webstore.settings.id) == route)
            .map(|webstore| webstore.settings.id.clone());
        if named.is_some_and(|id| !service.serving().serves(&id)) {
            return Err(AppError::Misdirected);
        }
    }
    let session = signed_in(service, headers)?;
    if !service.serving().serves(&session.webstore.settings.id) {
        return Err(AppError::Misdirected);
    }
    Ok(session)
}

/// `GET /app/sign_in`: the form (or, signed in already, the app).
pub(super) fn sign_in_form(
    service: &Service,
    settings: &AppSettings,
    request: &AppRequest<'_>,
) -> Response {
    if signed_in(service, request.headers).is_ok() {
        return see_other("/app");
    }
    sign_in_page(settings, request.headers, StatusCode::OK, &[], "")
}

/// The sign-in form with `alerts`, keeping the form cookie the browser has (or setting a new
/// one), so that the form's token and the cookie agree.
/// The sign-in form again, 429 with `Retry-After`, saying why and how long to wait.
fn wait_page(
    settings: &AppSettings,
    headers: &HeaderMap,
    alert: String,
    email: &str,
    retry_after: Duration,
) -> Response {
    let mut response = sign_in_page(
        settings,
        headers,
        StatusCode::TOO_MANY_REQUESTS,
        &[alert],
        email,
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, retry_after_value(retry_after));
    response
}

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

/// `POST /app/sign_in`: the form checked (genuine, nothing blank), the sign-in asked of the
/// service, and its answer rendered ([`answer`]).
pub(super) async fn sign_in(
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
    let email = form.email.trim();
    let blank: Vec<String> = [
        (email.is_empty(), "Email can't be blank."),
        (form.password.is_empty(), "Password can't be blank."),
    ]
    .into_iter()
    .filter(|(is_blank, _)| *is_blank)
    .map(|(_, alert)| alert.to_owned())
    .collect();
    if !blank.is_empty() {
        let status = StatusCode::UNPROCESSABLE_ENTITY;
        return Ok(sign_in_page(settings, headers, status, &blank, email));
    }
    let client = request.client.unwrap_or(UNKNOWN_CLIENT);
    let outcome = service
        .producer_sign_in(&form.email, form.password, client)
        .await;
    let route = service.sign_in_route(&form.email).map(|id| route_key(&id));
    answer(settings, headers, email, outcome, route)
}

/// The answer to a sign-in: the app with a session, the form sent on to the shard that checks
/// it, or the form again saying why not. Every answer of a sign-in that reached its check
/// (or was sent on to it) sets the routing cookie of the email's webstore (`route`), so that
/// right and wrong passwords, known and unknown emails, answer alike on every shard but for
/// the session a right password opens.
fn answer(
    settings: &AppSettings,
    headers: &HeaderMap,
    email: &str,
    outcome: Result<SignedIn, SignInRefused>,
    route: Option<String>,
) -> Result<Response, AppError> {
    let mut response = match outcome {
        Ok(signed_in) => {
            let mut response = see_other("/app");
            response.headers_mut().append(
                header::SET_COOKIE,
                settings
                    .public
                    .set_cookie(SESSION_COOKIE, &signed_in.session_id, "Lax"),
            );
            response
        }
        Err(SignInRefused::ServedElsewhere) => {
            // The front end routes the app by the routing cookie: set it and send the form
            // back (307 keeps the method and the body) for the shard that serves the webstore
            // to check, unless it named this webstore already and still reached a shard that
            // does not serve it. Nothing was checked here.
            if route.is_some() && cookie_text(headers, ROUTING_COOKIE) == route.as_deref() {
                return Err(AppError::Misdirected);
            }
            with_headers(
                with_status(
                    Response::new(Bytes::new().into()),
                    StatusCode::TEMPORARY_REDIRECT,
                ),
                &[
                    (header::CACHE_CONTROL, "no-store"),
                    (header::LOCATION, "/app/sign_in"),
                ],
            )
        }
        Err(SignInRefused::Wrong) => sign_in_page(
            settings,
            headers,
            StatusCode::UNAUTHORIZED,
            &["Wrong email or password.".to_owned()],
            email,
        ),
        Err(SignInRefused::Throttled(retry_after)) => {
            let minutes = retry_after.as_secs().div_ceil(60).max(1);
            let alert = format!(
                "Too many failed sign-ins for this email: try again in {minutes} minute{}.",
                if minutes == 1 { "" } else { "s" }
            );
            wait_page(settings, headers, alert, email, retry_after)
        }
        // Refused before anything of the email was looked at: nothing to route by.
        Err(SignInRefused::ClientLimited(retry_after)) => {
            let seconds = retry_after.as_secs().max(1);
            let alert = format!(
                "Too many sign-ins from your network: try again in {seconds} second{}.",
                if seconds == 1 { "" } else { "s" }
            );
            return Ok(wait_page(settings, headers, alert, email, retry_after));
        }
        Err(SignInRefused::Failed(error)) => return Err(AppError::Service(error)),
    };
    if let Some(route) = route {
        response.headers_mut().append(
            header::SET_COOKIE,
            settings.public.set_lasting_cookie(
                ROUTING_COOKIE,
                &route,
                "Lax",
                ROUTING_COOKIE_MAX_AGE_SECS,
            ),
        );
    }
    Ok(response)
}

/// `POST /app/sign_out`: ends the session on the server and forgets its cookie.
pub(super) async fn sign_out(
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
    service.producer_sign_out(&session).await?;
    let mut response = see_other("/app/sign_in");
    response.headers_mut().append(
        header::SET_COOKIE,
        settings.public.clear_cookie(SESSION_COOKIE, "Lax"),
    );
    Ok(response)
}

fn parse_form<T: serde::de::DeserializeOwned + Default>(body: Option<&Bytes>) -> T {
    // A malformed form is a form with no fields: the checks that follow name what is missing.
    body.and_then(|body| serde_urlencoded::from_bytes(body).ok())
        .unwrap_or_default()
}
