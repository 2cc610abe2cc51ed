//! `ApiError`: every way a request can fail, and the one place that decides each failure's
//! status code and body (contract section 3). Internal details are logged, never returned.
//!
//! Must not touch: the decisions behind a failure (the service's and the domain's), logging
//! anything secret.

use std::convert::Infallible;
use std::time::Duration;

use warp::http::{header, HeaderValue, StatusCode};
use warp::reply::Response;
use warp::Rejection;

use crate::domain::fields::FieldErrors;
use crate::quotas::{OverQuota, Quota};
use crate::service::serving::{NotWritable, Served};
use crate::service::{Refusal, ServiceError};

use super::router::RouteError;
use super::views::json_response;

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// `API-Key` or `API-Secret` missing or empty.
    #[error("credentials missing")]
    MissingCredentials,
    /// Unknown key or wrong secret.
    #[error("credentials invalid")]
    BadCredentials,
    /// Unknown route or record.
    #[error("not found")]
    NotFound,
    /// Known path, other method; carries the `Allow` value.
    #[error("method not allowed")]
    MethodNotAllowed(&'static str),
    /// Body over the size limit.
    #[error("body too large")]
    PayloadTooLarge,
    /// The change the request makes is larger than the replicated group's changelog takes;
    /// nothing was changed.
    #[error("change too large for the changelog")]
    ChangeTooLarge,
    /// The body could not be read off the connection.
    #[error("unreadable body")]
    UnreadableBody,
    /// The body did not arrive within its deadline.
    #[error("body too slow")]
    BodyTimeout,
    /// The body is not a JSON object.
    #[error("invalid JSON")]
    InvalidJson,
    /// Validation failed.
    #[error("validation failed: {0}")]
    Invalid(FieldErrors),
    /// Too many failed sign-ins for one email.
    #[error("sign-in throttled")]
    SignInThrottled(Duration),
    /// The caller's webstore went past one of its quotas; nothing was changed.
    #[error("over its {} quota", .0.quota.name())]
    OverQuota(OverQuota),
    /// Overloaded or shutting down; nothing was changed.
    #[error("unavailable")]
    Unavailable,
    /// An admin step the node's state does not allow (the detail is for the operator).
    #[error("conflict: {0}")]
    Conflict(String),
    /// The caller's webstore is not served by this node (another shard has it).
    #[error("misdirected")]
    Misdirected,
    /// The caller's webstore is moving to another shard: its writes wait a moment.
    #[error("moving")]
    Moving,
    /// The caller's webstore moved from this node to another shard during a move (handed
    /// over or released): the request was routed here before the front end switched, and
    /// sent again it reaches the other shard.
    #[error("moved away")]
    MovedAway,
    /// This node of a replicated group does not take requests now (a standby, or a node
    /// catching up or stepping down); nothing was changed.
    #[error("not the primary")]
    NotPrimary,
    /// The request ran past its deadline and was cut off before it began a write; nothing
    /// was changed.
    #[error("deadline exceeded")]
    DeadlineExceeded,
    /// The request handed a write to the store and cannot say whether it is stored: it
    /// failed, was cut off at its deadline, or its answer could not go out (the lease
    /// lapsed) before the write was acknowledged.
    #[error("outcome unknown")]
    OutcomeUnknown,
    /// A write that moves money came without an `Idempotency-Key`.
    #[error("idempotency key required")]
    IdempotencyKeyRequired,
    /// The events feed's cursor is past the retention (`true`) or another webstore's.
    #[error("events cursor gone")]
    CursorGone(bool),
    /// Writes are refused (disk nearly full, or the data directory unwritable).
    #[error("writes refused: {0:?}")]
    WritesRefused(Refusal),
    /// The store failed; the detail goes to the log only.
    #[error("storage failure: {0}")]
    Storage(String),
    /// A bug; the detail goes to the log only.
    #[error("internal error: {0}")]
    Internal(String),
}

impl ApiError {
    /// The status code of this failure.
    pub fn status_code(&self) -> StatusCode {
        match self {
            ApiError::MissingCredentials | ApiError::BadCredentials => StatusCode::UNAUTHORIZED,
            ApiError::NotFound => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::PayloadTooLarge | ApiError::ChangeTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnreadableBody => StatusCode::BAD_REQUEST,
            ApiError::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
            ApiError::InvalidJson | ApiError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::SignInThrottled(_) | ApiError::OverQuota(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Misdirected => StatusCode::MISDIRECTED_REQUEST,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::CursorGone(_) => StatusCode::GONE,
            ApiError::IdempotencyKeyRequired => StatusCode::PRECONDITION_REQUIRED,
            ApiError::Unavailable
            | ApiError::Moving
            | ApiError::MovedAway
            | ApiError::NotPrimary
            | ApiError::DeadlineExceeded
            | ApiError::WritesRefused(_)
            | ApiError::Storage(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            // Not a 503, which always means nothing was changed (and which the front end's
            // `retry-on` resends): the origin's own gateway timeout, its log not answering.
            ApiError::OutcomeUnknown => StatusCode::GATEWAY_TIMEOUT,
        }
    }

    /// This failure as its client must hear it given whether the request had handed a write
    /// to the store (`begun`): a server-side failure (5xx) after that is
    /// [`ApiError::OutcomeUnknown`], since the write may be stored; anything else, and
    /// anything before, stands.
    pub fn after_write(self, begun: bool) -> ApiError {
        if !begun || !self.status_code().is_server_error() {
            return self;
        }
        match &self {
            ApiError::Storage(detail) | ApiError::Internal(detail) => {
                tracing::error!(%detail, "a write's outcome is unknown")
            }
            ApiError::OutcomeUnknown => {}
            other => tracing::warn!(failure = %other, "a write's outcome is unknown"),
        }
        ApiError::OutcomeUnknown
    }

    /// What a failure says of the request's write, for a client to tell them apart without
    /// reading the message: `nothing_changed` for a 503, `unknown` when it may be stored.
    fn outcome(&self) -> Option<&'static str> {
        match self {
            ApiError::OutcomeUnknown => Some("unknown"),
            other if other.status_code() == StatusCode::SERVICE_UNAVAILABLE => {
                Some("nothing_changed")
            }
            _ => None,
        }
    }

    fn message(&self) -> &'static str {
        match self {
            ApiError::MissingCredentials => {
                "Could not authenticate. You must set the API-Key and API-Secret headers."
            }
            ApiError::BadCredentials => {
                "Could not authenticate. Invalid API-Key or API-Secret headers."
            }
            ApiError::NotFound => "Resource not found",
            ApiError::MethodNotAllowed(_) => "Method not allowed",
            ApiError::PayloadTooLarge => "Request body too large",
            ApiError::ChangeTooLarge => {
                "This change is larger than the service's replicated changelog takes in one \
                 message. Nothing was changed; send a smaller one."
            }
            ApiError::UnreadableBody => "Could not read the request body",
            ApiError::BodyTimeout => "The request body did not arrive in time",
            ApiError::InvalidJson => "Invalid JSON",
            ApiError::Invalid(_) => "Validation failed",
            ApiError::SignInThrottled(_) => {
                "Too many failed sign-in attempts for this email. Try again later."
            }
            ApiError::OverQuota(refusal) => match refusal.quota {
                Quota::Writes => {
                    "This webstore has made more writes than its quota allows. Nothing was \
                     changed; try again after Retry-After seconds (RateLimit-Policy states \
                     the quota)."
                }
                Quota::Reads => {
                    "This webstore has made more reads than its quota allows. Try again after \
                     Retry-After seconds (RateLimit-Policy states the quota)."
                }
                Quota::Concurrency => {
                    "This webstore has as many requests in progress as its quota allows. \
                     Nothing was changed; try again when one has been answered."
                }
            },
            ApiError::Unavailable => "Service temporarily unavailable. Try again shortly.",
            ApiError::Conflict(_) => "Conflict",
            ApiError::IdempotencyKeyRequired => {
                "A write that moves money needs an Idempotency-Key header, so that a retry \
                 after a lost answer is made once. Nothing was changed; send it again with a \
                 key of your own (the same key for each retry of the same request)."
            }
            ApiError::CursorGone(true) => {
                "The events after this cursor are older than the feed keeps and are gone. \
                 Start again without `after` (from the oldest event kept) and reconcile \
                 with the customer and order lists."
            }
            ApiError::CursorGone(false) => {
                "This cursor was not given to this webstore. Start again without `after`."
            }
            ApiError::Misdirected => {
                "This webstore is not served here. Nothing was changed; send the request \
                 through the deployment's front end."
            }
            ApiError::Moving => {
                "This webstore is moving between hosts: writes are paused for a moment. \
                 Nothing was changed; try again shortly (reads still work)."
            }
            ApiError::MovedAway => {
                "This webstore has just moved to another host. Nothing was changed; try \
                 again shortly (through the deployment's front end, which sends it there)."
            }
            ApiError::NotPrimary => {
                "This node does not serve its group now (a standby, or a primary that has lost \
                 touch with its group) and takes no requests. Nothing was changed; try again \
                 shortly (through the group's front end)."
            }
            ApiError::DeadlineExceeded => {
                "The request took too long and was cut off. Nothing was changed; try again \
                 shortly."
            }
            ApiError::OutcomeUnknown => {
                "The change was begun and this node cannot tell whether it was stored. Send \
                 it again with the same Idempotency-Key (it is made once, or its first answer \
                 is replayed, on any node), or read the record to find out."
            }
            ApiError::WritesRefused(Refusal::NearlyFull) => {
                "The disk of the service is nearly full, so writes are refused until space is \
                 freed. Nothing was changed; reads still work."
            }
            ApiError::WritesRefused(Refusal::NotWritable) => {
                "The storage of the service is read-only, so writes are refused. Nothing was \
                 changed; reads still work."
            }
            ApiError::Storage(_) => {
                "The storage of the service failed. Nothing was changed; try again later."
            }
            ApiError::Internal(_) => "Internal server error",
        }
    }

    /// The response the contract prescribes for this failure.
    pub fn into_response(self) -> Response {
        let status = self.status_code();
        let body = match &self {
            ApiError::Invalid(errors) => serde_json::json!({ "errors": errors_object(errors) }),
            // Only the admin listener answers it, to an operator: the detail helps.
            ApiError::Conflict(detail) => serde_json::json!({ "message": detail }),
            other => match other.outcome() {
                Some(outcome) => serde_json::json!({
                    "message": other.message(),
                    "outcome": outcome,
                }),
                None => serde_json::json!({ "message": other.message() }),
            },
        };
        let mut response = json_response(status, &body);
        let headers = response.headers_mut();
        match self {
            ApiError::MethodNotAllowed(allow) => {
                headers.insert(header::ALLOW, HeaderValue::from_static(allow));
            }
            ApiError::SignInThrottled(wait) => {
                let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
            }
            ApiError::OverQuota(refusal) => super::ratelimit::stamp_refusal(headers, &refusal),
            ApiError::Unavailable
            | ApiError::NotPrimary
            | ApiError::Moving
            | ApiError::MovedAway
            | ApiError::DeadlineExceeded
            | ApiError::OutcomeUnknown => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            // Answered before the body was read (or with its reading broken off): the
            // connection can't carry another request, and a keep-alive client must know.
            ApiError::PayloadTooLarge | ApiError::BodyTimeout | ApiError::UnreadableBody => {
                headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            ApiError::Storage(detail) => {
                tracing::error!(%detail, "storage failure");
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
            }
            // The operator has to act; the state is logged once when it begins.
            ApiError::WritesRefused(_) => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("30"));
            }
            ApiError::Internal(detail) => tracing::error!(%detail, "internal error"),
            _ => {}
        }
        response
    }
}

fn errors_object(errors: &FieldErrors) -> serde_json::Map<String, serde_json::Value> {
    errors
        .iter()
        .map(|(field, messages)| (field.to_owned(), serde_json::json!(messages)))
        .collect()
}

impl ApiError {
    /// Why a request of a webstore that stands as `served` on this node is not taken here,
    /// if it is not (a write is refused while frozen later, by
    /// [`crate::service::serving::Serving::begin_write`]): 421 only for a webstore this node
    /// never moved away (a request for one it handed over or released was routed before the
    /// front end switched: a 503 sends it again, to where it moved).
    pub fn not_taken(served: Served) -> Option<ApiError> {
        match served {
            Served::Here | Served::Frozen => None,
            Served::HandedOver | Served::Released => Some(ApiError::MovedAway),
            Served::Elsewhere => Some(ApiError::Misdirected),
        }
    }
}

impl From<NotWritable> for ApiError {
    fn from(refused: NotWritable) -> Self {
        match refused {
            NotWritable::Frozen => ApiError::Moving,
            NotWritable::MovedAway => ApiError::MovedAway,
            NotWritable::Elsewhere => ApiError::Misdirected,
        }
    }
}

impl From<RouteError> for ApiError {
    fn from(error: RouteError) -> Self {
        match error {
            RouteError::NotFound => ApiError::NotFound,
            RouteError::MethodNotAllowed(allow) => ApiError::MethodNotAllowed(allow),
        }
    }
}

impl From<ServiceError> for ApiError {
    fn from(error: ServiceError) -> Self {
        match error {
            ServiceError::Invalid(errors) => ApiError::Invalid(errors),
            ServiceError::NotFound => ApiError::NotFound,
            ServiceError::SignInThrottled { retry_after } => ApiError::SignInThrottled(retry_after),
            ServiceError::Busy => ApiError::Unavailable,
            ServiceError::WritesRefused(refusal) => ApiError::WritesRefused(refusal),
            ServiceError::Storage(detail) => ApiError::Storage(detail),
            ServiceError::Internal(detail) => ApiError::Internal(detail),
            ServiceError::Conflict(detail) => ApiError::Conflict(detail),
            ServiceError::Moving => ApiError::Moving,
            ServiceError::CursorGone { expired } => ApiError::CursorGone(expired),
            ServiceError::ChangeTooLarge { bytes, max } => {
                tracing::warn!(
                    bytes,
                    max,
                    "a change larger than the changelog takes was refused"
                );
                ApiError::ChangeTooLarge
            }
        }
    }
}

/// The last stop of the filter chain: renders any rejection as the contract says, so that
/// warp never answers with its own bodies or an unexplained 500.
pub async fn recover(rejection: Rejection) -> Result<Response, Infallible> {
    let error = if rejection.is_not_found() {
        ApiError::NotFound
    } else if rejection.find::<warp::reject::PayloadTooLarge>().is_some() {
        ApiError::PayloadTooLarge
    } else if rejection.find::<warp::reject::MethodNotAllowed>().is_some() {
        ApiError::NotFound
    } else {
        ApiError::Internal(format!("unhandled rejection: {rejection:?}"))
    };
    Ok(error.into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body_of(error: ApiError) -> (u16, serde_json::Value) {
        use http_body_util::BodyExt;
        let response = error.into_response();
        let status = response.status().as_u16();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let bytes = runtime
            .block_on(response.into_body().collect())
            .unwrap()
            .to_bytes();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    #[test]
    fn a_failure_after_a_write_began_is_an_unknown_outcome_and_only_then() {
        let server_side = || {
            [
                ApiError::Unavailable,
                ApiError::NotPrimary,
                ApiError::DeadlineExceeded,
                ApiError::Storage("the log failed".into()),
                ApiError::Internal("a bug".into()),
                ApiError::Moving,
            ]
        };
        for error in server_side() {
            let (status, body) = body_of(error.after_write(true));
            assert_eq!(status, 504);
            assert_eq!(body["outcome"], "unknown", "{body}");
        }
        for error in server_side() {
            let (status, body) = body_of(error.after_write(false));
            assert!(status == 503 || status == 500, "{status}");
            if status == 503 {
                assert_eq!(body["outcome"], "nothing_changed", "{body}");
                assert!(
                    body["message"]
                        .as_str()
                        .is_some_and(|m| !m.contains("may have been")),
                    "{body}"
                );
            }
        }
        // A refusal of the client's stands whatever was begun.
        let (status, body) = body_of(ApiError::NotFound.after_write(true));
        assert_eq!((status, body.get("outcome")), (404, None));
        let (status, _) = body_of(ApiError::InvalidJson.after_write(true));
        assert_eq!(status, 422);
    }
}
