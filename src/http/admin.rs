//! The admin listener (`--admin-addr`, with `--admin-token-file`): what moving a webstore
//! between shards and operating its webhooks need from a running node, never on the public
//! port. Every request
//! carries `Authorization: Bearer TOKEN`; the token's SHA-256 is compared with the file's in
//! constant time, and neither is ever logged.
//!
//! | request | does |
//! |---|---|
//! | `GET /admin/webstores/ID` | what this node holds of the webstore (served, recorded, counts, copy session) |
//! | `POST /admin/webstores/ID/copy` | starts tracking what its writes change, under a new copy session (`{"session": N}`), which ends on its own once unused for `--copy-session-idle-secs` |
//! | `GET /admin/webstores/ID/export` | its export (JSON lines), read while its writes go on |
//! | `GET /admin/webstores/ID/changes/SESSION` | what its writes changed since the session's last round (JSON lines), forgotten here |
//! | `POST /admin/webstores/ID/freeze[?max_freeze_ms=N]` | refuses its writes (503), durably, once those under way are done; with a limit, for at most N ms unless handed over by then (called off at the limit, and refused if those under way are not done by then) |
//! | `POST /admin/webstores/ID/hand-over` | frozen and drained: hands it over for good (no call-off after it); refused once its freeze was called off |
//! | `POST /admin/webstores/ID/call-off` | takes its writes again (a move called off before its hand-over; nothing to do for a webstore that takes them) |
//! | `POST /admin/webstores/ID/import` | imports an export of it into this running node (not served here yet) |
//! | `POST /admin/webstores/ID/apply` | writes a round of its changes over what this node holds of it (not served here yet) |
//! | `POST /admin/webstores/ID/take` | serves it from now on, durably |
//! | `POST /admin/webstores/ID/release` | once handed over: never serves it again, durably, and removes it from the store |
//! | `GET /admin/webstores/ID/webhooks` | where each of its webhook endpoints stands |
//! | `POST /admin/webstores/ID/webhooks/ENDPOINT/redeliver?after=CURSOR` | delivers again the events after the feed's cursor (from the oldest kept without one) to that endpoint, enabling it |
//!
//! A node of a replicated group answers 503 here unless it is the primary.
//!
//! Must not touch: what the steps do (the service's `moves`), HAProxy, the placement file.

use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Buf;
use futures_util::{Stream, StreamExt};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use warp::filters::path::FullPath;
use warp::http::{header, HeaderMap, Method, StatusCode};
use warp::reply::Response;
use warp::Filter;

use super::error::ApiError;
use super::views::json_response;
use crate::node::Node;
use crate::service::Service;

/// The largest import body: an export of a large webstore.
const MAX_IMPORT_BYTES: u64 = 4 << 30;

/// What the admin listener is started with.
#[derive(Debug, Clone, Copy)]
pub struct AdminSettings {
    /// The SHA-256 of its bearer token.
    pub token_sha256: [u8; 32],
    /// How long a copy session may go unused before it ends (`--copy-session-idle-secs`).
    pub copy_session_idle: std::time::Duration,
}

/// The admin listener's routes: every request authenticated by the token of `settings`.
pub fn admin_routes(
    node: Arc<Node>,
    settings: AdminSettings,
) -> impl Filter<Extract = (Response,), Error = Infallible> + Clone + Send + Sync + 'static {
    let node = warp::any().map(move || node.clone());
    node.and(warp::any().map(move || settings))
        .and(warp::method())
        .and(warp::path::full())
        .and(
            warp::query::raw()
                .map(Some)
                .or(warp::any().map(|| None))
                .unify(),
        )
        .and(warp::header::headers_cloned())
        .and(warp::body::stream())
        .then(handle)
        .recover(super::error::recover)
        .unify()
}

async fn handle<S, B>(
    node: Arc<Node>,
    settings: AdminSettings,
    method: Method,
    path: FullPath,
    query: Option<String>,
    headers: HeaderMap,
    body: S,
) -> Response
where
    S: Stream<Item = Result<B, warp::Error>> + Send,
    B: Buf + Send,
{
    if !authorized(&headers, &settings.token_sha256) {
        return ApiError::BadCredentials.into_response();
    }
    let Some(service) = node.service() else {
        return ApiError::NotPrimary.into_response();
    };
    let segments: Vec<&str> = path.as_str().trim_matches('/').split('/').collect();
    let answer = match (&method, segments.as_slice()) {
        (&Method::GET, ["admin", "webstores", id]) => held(&service, id),
        (&Method::POST, ["admin", "webstores", id, "freeze"]) => {
            match freeze_limit(query.as_deref()) {
                Ok(limit) => then_held(&service, id, service.freeze_for_move(id, limit).await),
                Err(error) => Err(error),
            }
        }
        (&Method::POST, ["admin", "webstores", id, "call-off"]) => {
            then_held(&service, id, service.call_off_move(id).await)
        }
        (&Method::POST, ["admin", "webstores", id, "hand-over"]) => {
            then_held(&service, id, service.hand_over(id).await)
        }
        (&Method::POST, ["admin", "webstores", id, "copy"]) => {
            match service.begin_copy(id, settings.copy_session_idle) {
                Ok(session) => Ok(json_response(
                    StatusCode::OK,
                    &serde_json::json!({"webstore": id, "session": session}),
                )),
                Err(error) => Err(error.into()),
            }
        }
        (&Method::GET, ["admin", "webstores", id, "export"]) => {
            export(service.clone(), id, None).await
        }
        (&Method::GET, ["admin", "webstores", id, "changes", session]) => {
            match session.parse::<u64>() {
                Ok(session) => export(service.clone(), id, Some(session)).await,
                Err(_) => Err(ApiError::NotFound),
            }
        }
        (&Method::POST, ["admin", "webstores", id, "import"]) => {
            import(service.clone(), id, body, Receive::Import).await
        }
        (&Method::POST, ["admin", "webstores", id, "apply"]) => {
            import(service.clone(), id, body, Receive::Changes).await
        }
        (&Method::GET, ["admin", "webstores", id, "webhooks"]) => service
            .webhooks_status(id)
            .map(|status| json_response(StatusCode::OK, &status))
            .map_err(ApiError::from),
        (&Method::POST, ["admin", "webstores", id, "webhooks", endpoint, "redeliver"]) => {
            let after = query_value(query.as_deref(), "after");
            match service.redeliver(id, endpoint, after.as_deref()).await {
                Ok(after) => Ok(json_response(
                    StatusCode::ACCEPTED,
                    &serde_json::json!({
                        "webstore": id,
                        "endpoint": endpoint,
                        "redeliver_after": after,
                    }),
                )),
                Err(error) => Err(error.into()),
            }
        }
        (&Method::POST, ["admin", "webstores", id, "take"]) => {
            then_held(&service, id, service.take_webstore(id).await)
        }
        (&Method::POST, ["admin", "webstores", id, "release"]) => {
            match service.release_webstore(id).await {
                Ok(removed) => Ok(json_response(
                    StatusCode::OK,
                    &serde_json::json!({"webstore": id, "released": true, "keys_removed": removed}),
                )),
                Err(error) => Err(error.into()),
            }
        }
        _ => Err(ApiError::NotFound),
    };
    answer.unwrap_or_else(ApiError::into_response)
}

/// Whether `headers` carry `Authorization: Bearer TOKEN` with the token whose SHA-256 is
/// `expected` (compared in constant time).
fn authorized(headers: &HeaderMap, expected: &[u8; 32]) -> bool {
    let Some(token) = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
    else {
        return false;
    };
    let digest: [u8; 32] = Sha256::digest(token.trim().as_bytes()).into();
    digest.ct_eq(expected).into()
}

/// What the node holds of `id` once a step has succeeded, without the counts (which read
/// every record of the webstore: a step of the cut-over must not wait for that), or why
/// the step did not succeed.
fn then_held(
    service: &Service,
    id: &str,
    step: Result<(), crate::service::ServiceError>,
) -> Result<Response, ApiError> {
    step?;
    let held = service.webstore_state(id)?;
    Ok(json_response(StatusCode::OK, &held))
}

/// A freeze's limit: `max_freeze_ms`, milliseconds (none without it).
fn freeze_limit(query: Option<&str>) -> Result<Option<std::time::Duration>, ApiError> {
    query_value(query, "max_freeze_ms")
        .map(|text| {
            text.trim()
                .parse::<u64>()
                .map(std::time::Duration::from_millis)
                .map_err(|_| {
                    ApiError::Invalid(crate::domain::fields::FieldErrors::single(
                        "max_freeze_ms",
                        crate::domain::fields::INVALID,
                    ))
                })
        })
        .transpose()
}

/// The value of parameter `name` in a query string, decoded.
fn query_value(query: Option<&str>, name: &str) -> Option<String> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query?).ok()?;
    pairs
        .into_iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value)
}

fn held(service: &Service, id: &str) -> Result<Response, ApiError> {
    let held = service.webstore_held(id)?;
    Ok(json_response(StatusCode::OK, &held))
}

/// The webstore's export, or with a copy session what its writes changed since its last
/// round.
async fn export(
    service: Arc<Service>,
    id: &str,
    session: Option<u64>,
) -> Result<Response, ApiError> {
    let id = id.to_owned();
    let bytes = tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        match session {
            None => service.export_webstore(&id, &mut out),
            Some(session) => service.export_changes(&id, session, &mut out),
        }
        .map(|_| out)
    })
    .await
    .map_err(|error| ApiError::Internal(error.to_string()))??;
    let mut response = Response::new(bytes.into());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        warp::http::HeaderValue::from_static("application/x-ndjson"),
    );
    Ok(response)
}

/// A temporary file removed when dropped (the import's body on disk, for its two passes).
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// What an admin request's body brings into this node.
#[derive(Debug, Clone, Copy)]
enum Receive {
    /// A webstore's export, imported whole.
    Import,
    /// A round of its changes, written over what the node holds of it.
    Changes,
}

async fn import<S, B>(
    service: Arc<Service>,
    id: &str,
    body: S,
    receive: Receive,
) -> Result<Response, ApiError>
where
    S: Stream<Item = Result<B, warp::Error>> + Send,
    B: Buf + Send,
{
    use std::io::Write;
    let mut body = std::pin::pin!(body);
    let name: [u8; 8] = crate::random::unique();
    let file =
        TempFile(std::env::temp_dir().join(format!("boxsub-import-{}.jsonl", hex::encode(name))));
    let mut out = std::io::BufWriter::new(
        std::fs::File::create(&file.0).map_err(|error| ApiError::Internal(error.to_string()))?,
    );
    let mut written = 0u64;
    while let Some(chunk) = body.next().await {
        let mut chunk = chunk.map_err(|_| ApiError::UnreadableBody)?;
        written += chunk.remaining() as u64;
        if written > MAX_IMPORT_BYTES {
            return Err(ApiError::PayloadTooLarge);
        }
        while chunk.has_remaining() {
            let part = chunk.chunk();
            out.write_all(part)
                .map_err(|error| ApiError::Internal(error.to_string()))?;
            let n = part.len();
            chunk.advance(n);
        }
    }
    out.flush()
        .map_err(|error| ApiError::Internal(error.to_string()))?;
    drop(out);
    let id = id.to_owned();
    let imported = tokio::task::spawn_blocking(move || {
        let imported = match receive {
            Receive::Import => service.import_webstore(&id, &file.0),
            Receive::Changes => service.apply_changes(&id, &file.0),
        };
        drop(file);
        imported
    })
    .await
    .map_err(|error| ApiError::Internal(error.to_string()))??;
    Ok(json_response(
        StatusCode::OK,
        &serde_json::json!({
            "webstores": imported.webstores,
            "customers": imported.customers,
            "orders": imported.orders,
            "idempotency_records": imported.idempotency_records,
            "events": imported.events,
            "webhook_positions": imported.webhook_positions,
            "sessions": imported.sessions,
        }),
    ))
}
