//! The OpenAPI contract check of responses: every answer a black-box test receives through
//! [`super::TestApp::send`] (or `try_send`) is matched to its operation in
//! `docs/openapi.json`, and its status must be documented for it, its content type listed,
//! its JSON body valid against the documented schema (closed schemas: a field the server
//! adds or drops fails) and its required headers present. So the document cannot drift from
//! the server without `cargo test` failing. Requests to paths or methods the document has no
//! operation for (deliberately wrong ones) are not checked. The tests of the check itself
//! are in `tests/api/contract.rs`.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use reqwest::header::HeaderMap;
use serde_json::Value;

/// The document, as the server builds it in.
pub static DOCUMENT: LazyLock<Value> = LazyLock::new(|| {
    serde_json::from_str(include_str!("../../../docs/openapi.json"))
        .expect("docs/openapi.json is JSON")
});

/// Compiled schemas, by JSON pointer into the document.
static VALIDATORS: LazyLock<Mutex<HashMap<String, std::sync::Arc<jsonschema::Validator>>>> =
    LazyLock::new(Mutex::default);

/// The path template of the document that `path` (no query) falls under, preferring literal
/// segments (`/v1/customers/sign_in` over `/v1/customers/{id}`).
fn template_of(path: &str) -> Option<&'static str> {
    let paths = DOCUMENT["paths"].as_object()?;
    let segments: Vec<&str> = path.split('/').collect();
    paths
        .keys()
        .filter_map(|template| {
            let parts: Vec<&str> = template.split('/').collect();
            if parts.len() != segments.len() {
                return None;
            }
            let mut literal = 0;
            for (part, segment) in parts.iter().zip(&segments) {
                if part.starts_with('{') {
                    continue;
                }
                if part != segment {
                    return None;
                }
                literal += 1;
            }
            Some((literal, template.as_str()))
        })
        .max_by_key(|(literal, _)| *literal)
        .map(|(_, template)| template)
}

/// `~` and `/` escaped for a JSON pointer.
pub fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// A JSON pointer as a URI fragment (braces of path templates are not URI characters).
fn fragment(pointer: &str) -> String {
    pointer.replace('{', "%7B").replace('}', "%7D")
}

/// Follows a `$ref` inside the document.
fn resolve(value: &Value) -> &Value {
    match value.get("$ref").and_then(Value::as_str) {
        Some(pointer) => DOCUMENT
            .pointer(pointer.trim_start_matches('#'))
            .unwrap_or(&Value::Null),
        None => value,
    }
}

/// A validator for the schema at `pointer`, compiled with the whole document as its root so
/// that `$ref`s to components resolve.
pub fn validator(pointer: &str) -> std::sync::Arc<jsonschema::Validator> {
    let mut cache = VALIDATORS.lock().unwrap_or_else(|e| e.into_inner());
    cache
        .entry(pointer.to_owned())
        .or_insert_with(|| {
            let mut root = DOCUMENT.clone();
            root["$ref"] = Value::String(format!("#{}", fragment(pointer)));
            let compiled = jsonschema::options()
                .with_draft(jsonschema::Draft::Draft202012)
                .should_validate_formats(true)
                .build(&root)
                .unwrap_or_else(|e| panic!("the schema at {pointer} does not compile: {e}"));
            std::sync::Arc::new(compiled)
        })
        .clone()
}

/// Checks one answer against the document; `Err` says what does not match.
pub fn check(
    method: &str,
    path_and_query: &str,
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(), String> {
    let path = path_and_query.split('?').next().unwrap_or_default();
    let Some(template) = template_of(path) else {
        return Ok(());
    };
    let method = method.to_ascii_lowercase();
    let operation_pointer = format!("/paths/{}/{method}", escape(template));
    let Some(operation) = DOCUMENT.pointer(&operation_pointer) else {
        return Ok(());
    };
    let id = operation["operationId"].as_str().unwrap_or("?");
    let status_key = status.to_string();
    let (key, response) = match operation["responses"].get(&status_key) {
        Some(response) => (status_key, response),
        None => match operation["responses"].get("default") {
            Some(response) => ("default".to_owned(), response),
            None => return Err(format!("{id}: status {status} is not documented")),
        },
    };
    let response = resolve(response);
    for (name, header) in response["headers"].as_object().into_iter().flatten() {
        let header = resolve(header);
        if header["required"] == Value::Bool(true) && !headers.contains_key(name.as_str()) {
            return Err(format!("{id} {status}: required header {name} is missing"));
        }
    }
    let content = response.get("content").and_then(Value::as_object);
    let media_type = headers
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .map(|value| {
            value
                .split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_owned()
        });
    match (content, media_type) {
        (None, None) => Ok(()),
        (None, Some(kind)) if body.is_empty() => Err(format!(
            "{id} {status}: content type {kind} on an empty body"
        )),
        (None, Some(kind)) => Err(format!(
            "{id} {status}: the document has no content, the server sent {kind}"
        )),
        (Some(_), None) if body.is_empty() => Ok(()),
        (Some(_), None) => Err(format!("{id} {status}: a body without a content type")),
        (Some(content), Some(kind)) => {
            if !content.contains_key(&kind) {
                return Err(format!(
                    "{id} {status}: content type {kind} is not documented ({:?})",
                    content.keys().collect::<Vec<_>>()
                ));
            }
            if kind != "application/json" {
                return Ok(());
            }
            let json: Value = serde_json::from_slice(body)
                .map_err(|e| format!("{id} {status}: the body is not JSON: {e}"))?;
            let pointer = format!(
                "/paths/{}/{method}/responses/{key}/content/{}/schema",
                escape(template),
                escape(&kind)
            );
            let pointer = match operation["responses"][&key]
                .get("$ref")
                .and_then(Value::as_str)
            {
                // A response defined in components: its schema is under it.
                Some(reference) => format!(
                    "{}/content/{}/schema",
                    reference.trim_start_matches('#'),
                    escape(&kind)
                ),
                None => pointer,
            };
            let errors: Vec<String> = validator(&pointer)
                .iter_errors(&json)
                .map(|e| format!("{} at {}", e, e.instance_path()))
                .collect();
            if errors.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "{id} {status}: the body does not match the document:\n  {}\nbody: {json}",
                    errors.join("\n  ")
                ))
            }
        }
    }
}
