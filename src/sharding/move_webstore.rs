//! `boxsub move-webstore ID --placement FILE --to SHARD --admin-token-file FILE
//! [--max-freeze SECONDS]`: moves a webstore between running shards, through their admin
//! listeners (`super::admin_client`) and HAProxy's runtime socket (`super::map`), saying
//! each step as it is done.
//!
//! 1. **Check the files**: the placement file and HAProxy's map are read whole first; one
//!    that is missing or unreadable stops the move, naming it, before anything changes.
//! 2. **Copy while writing**: the source starts tracking what the webstore's writes change
//!    (a copy session), its export is read while they go on and imported into the target.
//! 3. **Catch up**: what the writes changed since is shipped and written over the target's
//!    copy, round after round, until a round is small ([`TAIL_CUSTOMERS`]).
//! 4. **Cut over**: the source freezes the webstore's writes (durable) and waits for those
//!    under way; the last changes are shipped; the source **hands it over** (durable: no
//!    call-off after this); the target **takes** it (durable); HAProxy's map **switches** its
//!    API keys to the target. Only this step refuses the webstore's writes. The source is
//!    given `--max-freeze` with the freeze: if the hand-over has not come by then, from the
//!    moment the freeze began, the source calls the move off by itself (whatever became of
//!    the command) and refuses the hand-over, and the source takes the writes again, as
//!    before the freeze.
//! 5. **Release** it on the source (durable; its records removed), once the target holds at
//!    least what the source holds.
//! 6. **Rewrite** the placement file and the map file.
//!
//! Every run looks first at what the nodes hold. A source that handed the webstore over is
//! frozen since, so a run after it only finishes (take, switch, release); anything earlier
//! is copied again from the start (an earlier run's freeze is called off first), since the
//! changes tracked before are gone with the run that tracked them. No write is taken on both
//! shards: the source takes none from the freeze on, the target none before it takes.
//!
//! Must not touch: a node's store (only its admin listener), the catalogue.

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::Value;

use super::admin_client::AdminClient;
use super::haproxy::backend;
use super::map::{switch_key, MapFile};
use super::placement::PlacementFile;
use crate::domain::routing::route_key;

/// A catch-up round that ships at most this many customers is the last before the freeze.
pub const TAIL_CUSTOMERS: u64 = 100;

/// The most catch-up rounds before the freeze (writes faster than rounds ship them still
/// end in a freeze, whose length `--max-freeze` bounds).
pub const MAX_ROUNDS: usize = 10;

/// The two shards of a move, as found.
struct Ends<'a> {
    client: &'a AdminClient,
    id: &'a str,
    base: String,
    from: String,
    to: String,
    source: String,
    target: String,
}

impl Ends<'_> {
    async fn on_source(&self, method: &str, step: &str) -> Result<Value, String> {
        let path = format!("{}{step}", self.base);
        self.client
            .step(&self.source, method, &path, Bytes::new())
            .await
    }

    async fn on_target(&self, method: &str, step: &str, body: Bytes) -> Result<Value, String> {
        let path = format!("{}{step}", self.base);
        self.client.step(&self.target, method, &path, body).await
    }

    /// What the source exports at `path` (its export, or a round of changes).
    async fn exported(&self, path: &str) -> Result<Bytes, String> {
        let answer = self
            .client
            .request(
                &self.source,
                "GET",
                &format!("{}{path}", self.base),
                Bytes::new(),
            )
            .await?;
        if answer.status != 200 {
            return Err(format!(
                "reading {} of {} from {}: {} {}",
                path.trim_start_matches('/'),
                self.id,
                self.from,
                answer.status,
                String::from_utf8_lossy(&answer.body)
            ));
        }
        Ok(answer.body)
    }

    /// Calls the move off on the source (its writes taken again), best effort: `failure`
    /// is what is reported, with whether the call-off worked.
    async fn call_off(&self, failure: String) -> String {
        match self.on_source("POST", "/call-off").await {
            Ok(_) => format!(
                "{failure}; the move was called off: {} takes {}'s writes again, as before",
                self.from, self.id
            ),
            Err(error) => {
                format!("{failure}; calling the move off failed too ({error}): run the move again")
            }
        }
    }
}

/// Moves webstore `id` to shard `to`, saying each step to `say` as it is done.
pub async fn move_webstore(
    id: &str,
    placement_path: &Path,
    to: &str,
    token: &str,
    max_freeze: Duration,
    say: &mut dyn FnMut(&str),
) -> Result<(), String> {
    let started = Instant::now();
    let mut placement = PlacementFile::read(placement_path)?;
    let mut map = MapFile::read(&placement.haproxy_map)?;
    let webstore_map_path = placement.webstore_map();
    let mut webstore_map = MapFile::read(&webstore_map_path)?;
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
    let client = AdminClient::new(token);
    let (target_admin, target_held) = client.reachable(&target.admin, id).await?;
    if from == to {
        if target_held["served"] == "here" {
            say(&format!("{id} is on shard {to} already; nothing to do"));
            return Ok(());
        }
        return Err(format!(
            "the placement file puts {id} on {to}, which does not serve it"
        ));
    }
    let (source_admin, source_held) = client.reachable(&source.admin, id).await?;
    if source_held["id_range"] == target_held["id_range"] {
        return Err(format!(
            "shards {from} and {to} run with the same --id-range ({}): the ids {to} gives out \
             would collide with {id}'s; give each shard its own range",
            source_held["id_range"]
        ));
    }
    let ends = Ends {
        client: &client,
        id,
        base: format!("/admin/webstores/{id}"),
        from: from.clone(),
        to: to.to_owned(),
        source: source_admin,
        target: target_admin,
    };
    let recorded = source_held["recorded"].as_str().unwrap_or("");
    let taken = target_held["recorded"] == "taken";
    let mut frozen_at = None;
    match (recorded, taken) {
        ("released", true) => say(&format!("{from} released {id} already (an earlier run)")),
        ("released", false) => {
            return Err(format!(
                "{from} released {id} but {to} has not taken it: restore it from a backup"
            ))
        }
        ("handed_over", true) => say(&format!(
            "{from} handed {id} over and {to} took it already (an earlier run)"
        )),
        ("handed_over", false) => {
            // Frozen since the hand-over, which a move makes once the last round is
            // shipped: what the target holds is checked, and copied again if it differs.
            let source_now = ends.on_source("GET", "").await?;
            let target_now = ends.on_target("GET", "", Bytes::new()).await?;
            let same = ["customers", "orders", "last_event"]
                .iter()
                .all(|count| source_now[*count] == target_now[*count]);
            if !same {
                let export = ends.exported("/export").await?;
                let imported = ends.on_target("POST", "/import", export).await?;
                say(&format!(
                    "copied {id} to {to} from {from}, frozen since its hand-over: {} \
                     customers, {} orders",
                    imported["customers"], imported["orders"]
                ));
            }
            ends.on_target("POST", "/take", Bytes::new()).await?;
            say(&format!(
                "{from} had handed {id} over (an earlier run): {to} took it"
            ));
        }
        (_, true) => {
            return Err(format!(
                "{to} has taken {id}, but {from} has not handed it over ({}): both may \
                 take its writes. Freeze it on {from} (POST {}/freeze on its admin listener) \
                 and compare what each holds before going on",
                if recorded.is_empty() {
                    "served"
                } else {
                    recorded
                },
                ends.base
            ))
        }
        _ => {
            if recorded == "moving" {
                ends.on_source("POST", "/call-off").await?;
                say(&format!(
                    "called off an earlier run's freeze of {id} on {from}: copying again"
                ));
            }
            frozen_at = Some(copy_and_cut_over(&ends, max_freeze, say).await?);
        }
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
    // The producers' app: the webstore's routing cookie to the same shard.
    switch_key(
        &placement.haproxy_socket,
        &webstore_map_path,
        &route_key(id),
        &backend(to),
    )?;
    let switched = Instant::now();
    say(&format!(
        "switched HAProxy's map for {} API keys of {id} to {}",
        keys.len(),
        backend(to)
    ));
    if let Some(frozen_at) = frozen_at {
        say(&format!(
            "{id}'s writes were refused for {} ms (freeze to switch)",
            (switched - frozen_at).as_millis()
        ));
    }
    if recorded != "released" {
        let source_now = ends.on_source("GET", "").await?;
        let target_now = ends.on_target("GET", "", Bytes::new()).await?;
        // Counts of customers and orders; for events, the highest sequence number (the
        // target's own numbering goes on after the source's, so it is never lower), where
        // both nodes say it.
        for count in ["customers", "orders", "last_event"] {
            let (held, copied) = (source_now[count].as_u64(), target_now[count].as_u64());
            let unsaid = count == "last_event" && (held.is_none() || copied.is_none());
            if held > copied && !unsaid {
                return Err(format!(
                    "{from} holds {} {count} of {id} and {to} only {}: {from} keeps it (not \
                     released); compare the two before going on",
                    source_now[count], target_now[count]
                ));
            }
        }
        let released = ends.on_source("POST", "/release").await?;
        say(&format!(
            "{from} released {id} and removed {} keys of it",
            released["keys_removed"]
        ));
    }
    placement.webstores.insert(id.to_owned(), to.to_owned());
    placement.write(placement_path)?;
    map.point(&keys, &backend(to));
    map.write(&placement.haproxy_map)?;
    webstore_map.point(&[route_key(id)], &backend(to));
    webstore_map.write(&webstore_map_path)?;
    say(&format!(
        "rewrote {}, {} and {}; done in {} ms",
        placement_path.display(),
        placement.haproxy_map.display(),
        webstore_map_path.display(),
        started.elapsed().as_millis()
    ));
    Ok(())
}

/// Copies the webstore while its writes go on, catches up, and cuts over (see the module);
/// when its writes began to be refused.
async fn copy_and_cut_over(
    ends: &Ends<'_>,
    max_freeze: Duration,
    say: &mut dyn FnMut(&str),
) -> Result<Instant, String> {
    let (id, from, to) = (ends.id, &ends.from, &ends.to);
    let copy = ends.on_source("POST", "/copy").await?;
    let session = copy["session"]
        .as_u64()
        .ok_or_else(|| format!("{from} gave no copy session: {copy}"))?;
    say(&format!(
        "tracking {id}'s writes on {from} ({}), copy session {session}",
        ends.source
    ));
    let copied = async {
        let copy_started = Instant::now();
        let export = ends.exported("/export").await?;
        let bytes = export.len();
        let imported = ends.on_target("POST", "/import", export).await?;
        say(&format!(
            "copied {id} to {to} ({}) while its writes went on: {} customers, {} orders, {} \
             idempotency records, {bytes} bytes, in {} ms",
            ends.target,
            imported["customers"],
            imported["orders"],
            imported["idempotency_records"],
            copy_started.elapsed().as_millis()
        ));
        for round in 1..=MAX_ROUNDS {
            let shipped = ship_changes(ends, session).await?;
            say(&format!("caught up, round {round}: {shipped}"));
            if shipped.customers <= TAIL_CUSTOMERS {
                break;
            }
        }
        Ok::<(), String>(())
    }
    .await;
    if let Err(failure) = copied {
        return Err(ends.call_off(failure).await);
    }
    let frozen_at = Instant::now();
    let cut_over = async {
        // The source calls the freeze off by itself at the limit, whatever becomes of this
        // command; a hand-over after it is refused.
        let freeze = format!("/freeze?max_freeze_ms={}", max_freeze.as_millis());
        ends.on_source("POST", &freeze).await?;
        say(&format!(
            "froze {id}'s writes on {from} in {} ms",
            frozen_at.elapsed().as_millis()
        ));
        let shipped = ship_changes(ends, session).await?;
        say(&format!("shipped the last changes: {shipped}"));
        if frozen_at.elapsed() > max_freeze {
            return Err(format!(
                "the cut-over took {} ms, longer than --max-freeze ({} ms)",
                frozen_at.elapsed().as_millis(),
                max_freeze.as_millis()
            ));
        }
        ends.on_source("POST", "/hand-over").await?;
        Ok(())
    }
    .await;
    if let Err(failure) = cut_over {
        return Err(ends.call_off(failure).await);
    }
    say(&format!("{from} handed {id} over"));
    ends.on_target("POST", "/take", Bytes::new()).await?;
    say(&format!("{to} took {id}"));
    Ok(frozen_at)
}

/// What a round shipped.
struct Shipped {
    customers: u64,
    orders: u64,
    idempotency_records: u64,
    millis: u128,
}

impl std::fmt::Display for Shipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} customers, {} orders, {} idempotency records in {} ms",
            self.customers, self.orders, self.idempotency_records, self.millis
        )
    }
}

/// Ships one round of the webstore's changes from the source to the target.
async fn ship_changes(ends: &Ends<'_>, session: u64) -> Result<Shipped, String> {
    let started = Instant::now();
    let changes = ends.exported(&format!("/changes/{session}")).await?;
    let applied = ends.on_target("POST", "/apply", changes).await?;
    let count = |name: &str| applied[name].as_u64().unwrap_or(0);
    Ok(Shipped {
        customers: count("customers"),
        orders: count("orders"),
        idempotency_records: count("idempotency_records"),
        millis: started.elapsed().as_millis(),
    })
}
