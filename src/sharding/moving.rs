//! `boxsub move-webstore ID --placement FILE --to SHARD --admin-token-file FILE`: moves a
//! webstore between running shards, through their admin listeners and HAProxy's runtime
//! socket, and says what it did.
//!
//! 1. **Freeze** the webstore on the source (durable: a source restarted midway still
//!    refuses its writes); writes get 503 with `Retry-After`, reads go on.
//! 2. **Copy** it: the source's export, imported into the running target (which removes
//!    whatever an interrupted import left first), and the counts compared.
//! 3. **Take** it on the target (durable).
//! 4. **Switch** HAProxy's map for each of its API keys to the target's backend (`set map`,
//!    `add map` where the key is new), without a reload.
//! 5. **Release** it on the source (durable; its records removed).
//! 6. **Rewrite** the placement file and the map file.
//!
//! Every step looks first at what the nodes hold and skips what is done, so the command is
//! safe to run again after any failure (its own crash, or either node's). Between 1 and 4
//! the webstore's writes are refused; no write is taken on both shards: the source takes
//! none from the freeze on, the target none before it takes the webstore.
//!
//! Must not touch: a node's store (only its admin listener), the catalogue.

use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::Value;

use super::haproxy::backend;
use super::placement::{write_atomically, PlacementFile};

/// One admin request's answer: the status and the body.
struct Answer {
    status: u16,
    body: Bytes,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

/// One request to an admin listener at `addr`.
async fn admin(
    addr: &str,
    token: &str,
    method: &str,
    path: &str,
    body: Bytes,
) -> Result<Answer, String> {
    let failed = |error: &dyn std::fmt::Display| format!("{method} http://{addr}{path}: {error}");
    let stream = tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(addr))
        .await
        .map_err(|_| failed(&"connecting timed out"))?
        .map_err(|error| failed(&error))?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|error| failed(&error))?;
    let driver = tokio::spawn(connection);
    let request = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr)
        .header("authorization", format!("Bearer {token}"))
        .body(Full::new(body))
        .map_err(|error| failed(&error))?;
    let response = tokio::time::timeout(Duration::from_secs(600), sender.send_request(request))
        .await
        .map_err(|_| failed(&"no answer in 600 s"))?
        .map_err(|error| failed(&error))?;
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|error| failed(&error))?
        .to_bytes();
    driver.abort();
    Ok(Answer { status, body })
}

/// The admin address of `addrs` that answers for webstore `id` (a replicated shard's
/// primary; standbys answer 503), and what it holds.
async fn reachable(addrs: &[String], token: &str, id: &str) -> Result<(String, Value), String> {
    let mut tried = Vec::new();
    for addr in addrs {
        match admin(
            addr,
            token,
            "GET",
            &format!("/admin/webstores/{id}"),
            Bytes::new(),
        )
        .await
        {
            Ok(answer) if answer.status == 200 => return Ok((addr.clone(), answer.json())),
            Ok(answer) => tried.push(format!("{addr}: {}", answer.status)),
            Err(error) => tried.push(error),
        }
    }
    Err(format!("no admin listener answered ({})", tried.join("; ")))
}

/// A step that must succeed: its answer's JSON, or why not.
async fn step(
    addr: &str,
    token: &str,
    method: &str,
    path: &str,
    body: Bytes,
) -> Result<Value, String> {
    let answer = admin(addr, token, method, path, body).await?;
    if answer.status != 200 {
        return Err(format!(
            "{method} {path} on {addr}: {} {}",
            answer.status,
            String::from_utf8_lossy(&answer.body)
        ));
    }
    Ok(answer.json())
}

/// Runs one command on HAProxy's runtime socket; its answer.
fn haproxy_command(socket: &Path, command: &str) -> Result<String, String> {
    let mut stream = std::os::unix::net::UnixStream::connect(socket)
        .map_err(|error| format!("HAProxy's socket {}: {error}", socket.display()))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|error| error.to_string())?;
    stream
        .write_all(format!("{command}\n").as_bytes())
        .map_err(|error| format!("HAProxy's socket: {error}"))?;
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .map_err(|error| format!("HAProxy's socket: {error}"))?;
    Ok(answer)
}

/// Points `key` at `backend` in HAProxy's map `map` (at run time).
fn switch_key(socket: &Path, map: &Path, key: &str, backend: &str) -> Result<(), String> {
    let map = map.display();
    let set = haproxy_command(socket, &format!("set map {map} {key} {backend}"))?;
    if set.trim().is_empty() {
        return Ok(());
    }
    let add = haproxy_command(socket, &format!("add map {map} {key} {backend}"))?;
    if add.trim().is_empty() {
        return Ok(());
    }
    Err(format!(
        "HAProxy refused to map a key: {} / {}",
        set.trim(),
        add.trim()
    ))
}

/// Moves webstore `id` to shard `to`; the report of what it did.
pub async fn move_webstore(
    id: &str,
    placement_path: &Path,
    to: &str,
    token: &str,
) -> Result<String, String> {
    let mut placement = PlacementFile::read(placement_path)?;
    let from = placement
        .webstores
        .get(id)
        .cloned()
        .ok_or_else(|| format!("{}: no shard serves {id}", placement_path.display()))?;
    let target = placement
        .shards
        .get(to)
        .cloned()
        .ok_or_else(|| format!("{}: no shard is named {to}", placement_path.display()))?;
    let source = placement
        .shards
        .get(&from)
        .cloned()
        .ok_or_else(|| format!("{}: no shard is named {from}", placement_path.display()))?;
    let mut report = Vec::new();
    let started = Instant::now();
    let (target_admin, target_held) = reachable(&target.admin, token, id).await?;
    if from == to {
        if target_held["served"] == "here" {
            return Ok(format!("{id} is on shard {to} already; nothing to do"));
        }
        return Err(format!(
            "the placement file puts {id} on {to}, which does not serve it"
        ));
    }
    let (source_admin, source_held) = reachable(&source.admin, token, id).await?;
    if source_held["id_range"] == target_held["id_range"] {
        return Err(format!(
            "shards {from} and {to} run with the same --id-range ({}): the ids {to} gives out \
             would collide with {id}'s; give each shard its own range",
            source_held["id_range"]
        ));
    }
    let base = format!("/admin/webstores/{id}");
    let mut frozen_at = None;
    if target_held["recorded"] == "taken" {
        report.push(format!(
            "{to} has taken {id} already (an earlier run): copy skipped"
        ));
    } else {
        if source_held["recorded"] == "released" {
            return Err(format!(
                "{from} released {id} but {to} has not taken it: restore it from a backup"
            ));
        }
        let freeze_started = Instant::now();
        step(
            &source_admin,
            token,
            "POST",
            &format!("{base}/freeze"),
            Bytes::new(),
        )
        .await?;
        frozen_at = Some(freeze_started);
        report.push(format!(
            "froze {id}'s writes on {from} ({source_admin}) in {} ms",
            freeze_started.elapsed().as_millis()
        ));
        let copy_started = Instant::now();
        let export = admin(
            &source_admin,
            token,
            "GET",
            &format!("{base}/export"),
            Bytes::new(),
        )
        .await?;
        if export.status != 200 {
            return Err(format!(
                "exporting {id} from {from}: {} {}",
                export.status,
                String::from_utf8_lossy(&export.body)
            ));
        }
        let bytes = export.body.len();
        let imported = step(
            &target_admin,
            token,
            "POST",
            &format!("{base}/import"),
            export.body,
        )
        .await?;
        let source_now = step(&source_admin, token, "GET", &base, Bytes::new()).await?;
        let target_now = step(&target_admin, token, "GET", &base, Bytes::new()).await?;
        for count in ["customers", "orders"] {
            if source_now[count] != target_now[count] {
                return Err(format!(
                    "after the copy {from} holds {} {count} of {id} and {to} {}: run the move \
                     again",
                    source_now[count], target_now[count]
                ));
            }
        }
        report.push(format!(
            "copied {id} to {to} ({target_admin}): {} customers, {} orders, {} idempotency \
             records, {bytes} bytes, in {} ms",
            imported["customers"],
            imported["orders"],
            imported["idempotency_records"],
            copy_started.elapsed().as_millis()
        ));
        step(
            &target_admin,
            token,
            "POST",
            &format!("{base}/take"),
            Bytes::new(),
        )
        .await?;
        report.push(format!("{to} took {id}"));
    }
    let keys: Vec<String> = source_held["api_keys"]
        .as_array()
        .or(target_held["api_keys"].as_array())
        .map(|keys| {
            keys.iter()
                .filter_map(|key| key.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    for key in &keys {
        switch_key(
            &placement.haproxy_socket,
            &placement.haproxy_map,
            key,
            &backend(to),
        )?;
    }
    let switched = Instant::now();
    report.push(format!(
        "switched HAProxy's map for {} API keys of {id} to {}",
        keys.len(),
        backend(to)
    ));
    if let Some(frozen_at) = frozen_at {
        report.push(format!(
            "{id}'s writes were refused for {} ms (freeze to switch)",
            (switched - frozen_at).as_millis()
        ));
    }
    if source_held["recorded"] != "released" {
        let released = step(
            &source_admin,
            token,
            "POST",
            &format!("{base}/release"),
            Bytes::new(),
        )
        .await?;
        report.push(format!(
            "{from} released {id} and removed {} keys of it",
            released["keys_removed"]
        ));
    }
    placement.webstores.insert(id.to_owned(), to.to_owned());
    placement.write(placement_path)?;
    rewrite_map(&placement.haproxy_map, &keys, &backend(to))?;
    report.push(format!(
        "rewrote {} and {}; done in {} ms",
        placement_path.display(),
        placement.haproxy_map.display(),
        started.elapsed().as_millis()
    ));
    Ok(report.join("\n"))
}

/// Points `keys` at `backend` in the map file on disk, as the runtime map now does.
fn rewrite_map(map: &Path, keys: &[String], backend: &str) -> Result<(), String> {
    let text = std::fs::read_to_string(map).unwrap_or_default();
    let mut lines: Vec<String> = text
        .lines()
        .filter(|line| {
            let key = line.split_whitespace().next().unwrap_or_default();
            !keys.iter().any(|moved| moved == key)
        })
        .map(str::to_owned)
        .collect();
    lines.extend(keys.iter().map(|key| format!("{key} {backend}")));
    lines.sort();
    let mut text = lines.join("\n");
    text.push('\n');
    write_atomically(map, text.as_bytes())
}
