//! The placement file: the deployment's shards and which of them serves each webstore.
//!
//! ```json
//! {"frontend": "0.0.0.0:80", "haproxy_socket": "/run/haproxy/admin.sock",
//!  "haproxy_map": "/etc/haproxy/boxsub-shards.map",
//!  "shards": {"s1": {"nodes": ["10.0.0.11:3000"], "admin": ["127.0.0.1:3100"]}},
//!  "webstores": {"fantastic-vege-people": "s1"}}
//! ```
//!
//! Checked whole ([`PlacementFile::check`]): every problem is named, with its place.
//! Rewritten atomically (a temporary file, fsynced, renamed over it).
//!
//! Must not touch: HAProxy, nodes.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::domain::catalogue::Catalogue;

/// One shard: the nodes that serve its webstores (one, or a replicated group's), and their
/// admin listeners.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shard {
    /// `H:P` of each node's API listener.
    pub nodes: Vec<String>,
    /// `H:P` of each node's admin listener (`--admin-addr`).
    #[serde(default)]
    pub admin: Vec<String>,
}

/// The placement file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlacementFile {
    /// `H:P` HAProxy's frontend binds.
    pub frontend: String,
    /// HAProxy's runtime (admin) socket.
    pub haproxy_socket: PathBuf,
    /// The API-key map file HAProxy routes by.
    pub haproxy_map: PathBuf,
    /// The webstore map file HAProxy routes the producers' app by (its routing cookie);
    /// when not given, beside the API-key map: `NAME-webstores.map` for `NAME.map`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub haproxy_webstore_map: Option<PathBuf>,
    /// The shards, by name.
    pub shards: BTreeMap<String, Shard>,
    /// The shard of each webstore, by webstore id.
    pub webstores: BTreeMap<String, String>,
}

impl PlacementFile {
    /// The webstore map's path: as given, or beside the API-key map.
    pub fn webstore_map(&self) -> PathBuf {
        if let Some(given) = &self.haproxy_webstore_map {
            return given.clone();
        }
        let stem = self
            .haproxy_map
            .file_stem()
            .map(|stem| stem.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.haproxy_map
            .with_file_name(format!("{stem}-webstores.map"))
    }

    /// Reads and parses `path` (not checked against a catalogue).
    pub fn read(path: &Path) -> Result<PlacementFile, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| format!("reading {}: {error}", path.display()))?;
        serde_json::from_str(&text).map_err(|error| format!("{}: {error}", path.display()))
    }

    /// Every problem of the file against `catalogue`, with its place; empty when none.
    pub fn check(&self, catalogue: &Catalogue) -> Vec<String> {
        let mut problems = Vec::new();
        if !is_address(&self.frontend) {
            problems.push(format!("frontend: {:?} is not HOST:PORT", self.frontend));
        }
        if self.shards.is_empty() {
            problems.push("shards: there is none".to_owned());
        }
        for (name, shard) in &self.shards {
            if !is_shard_name(name) {
                problems.push(format!(
                    "shards.{name}: a shard name is letters, digits, '-' and '_'"
                ));
            }
            if shard.nodes.is_empty() {
                problems.push(format!("shards.{name}.nodes: there is none"));
            }
            for (i, node) in shard.nodes.iter().chain(&shard.admin).enumerate() {
                if !is_address(node) {
                    problems.push(format!(
                        "shards.{name}: address {i} {node:?} is not HOST:PORT"
                    ));
                }
            }
        }
        for (webstore, shard) in &self.webstores {
            if catalogue.webstore_by_id(webstore).is_none() {
                problems.push(format!(
                    "webstores.{webstore}: the catalogue has no such webstore"
                ));
            }
            if !self.shards.contains_key(shard) {
                problems.push(format!("webstores.{webstore}: no shard is named {shard:?}"));
            }
        }
        for webstore in catalogue.webstores() {
            let id = &webstore.settings.id;
            if !self.webstores.contains_key(id) {
                problems.push(format!(
                    "webstores: {id} is in the catalogue but on no shard"
                ));
            }
            for key in catalogue.api_keys_of(webstore.idx) {
                if key.is_empty() || key.chars().any(|c| c.is_whitespace() || c.is_control()) {
                    problems.push(format!(
                        "the catalogue's webstore {id} has an API key HAProxy's map cannot hold \
                         (empty, or with white space)"
                    ));
                }
            }
        }
        problems
    }

    /// Writes the file to `path` atomically: a temporary file beside it, fsynced, renamed
    /// over it.
    pub fn write(&self, path: &Path) -> Result<(), String> {
        let mut text = serde_json::to_vec_pretty(self).map_err(|error| error.to_string())?;
        text.push(b'\n');
        write_atomically(path, &text)
    }
}

/// Writes `bytes` to `path` atomically: a temporary file beside it, fsynced, renamed over it,
/// the directory fsynced.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let partial = path.with_extension("partial");
    let failed = |what: &str, error: std::io::Error| format!("{what} {}: {error}", path.display());
    let mut file =
        std::fs::File::create(&partial).map_err(|error| failed("creating a file beside", error))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|error| failed("writing", error))?;
    std::fs::rename(&partial, path).map_err(|error| failed("replacing", error))?;
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        if let Ok(dir) = std::fs::File::open(dir) {
            let _ = dir.sync_all();
        }
    }
    Ok(())
}

fn is_address(text: &str) -> bool {
    text.rsplit_once(':').is_some_and(|(host, port)| {
        !host.is_empty() && !host.contains(char::is_whitespace) && port.parse::<u16>().is_ok()
    })
}

/// Shard names become HAProxy backend names.
pub fn is_shard_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalogue() -> Catalogue {
        Catalogue::parse(include_str!("../domain/demo_catalogue.json"), 0).expect("the demo")
    }

    fn placement(webstores: &[(&str, &str)]) -> PlacementFile {
        PlacementFile {
            frontend: "127.0.0.1:8080".into(),
            haproxy_socket: "/run/haproxy.sock".into(),
            haproxy_map: "/etc/haproxy/shards.map".into(),
            haproxy_webstore_map: None,
            shards: [
                (
                    "s1".to_owned(),
                    Shard {
                        nodes: vec!["127.0.0.1:3001".into()],
                        admin: vec![],
                    },
                ),
                (
                    "s2".to_owned(),
                    Shard {
                        nodes: vec!["127.0.0.1:3002".into()],
                        admin: vec![],
                    },
                ),
            ]
            .into(),
            webstores: webstores
                .iter()
                .map(|(w, s)| (w.to_string(), s.to_string()))
                .collect(),
        }
    }

    #[test]
    fn every_webstore_must_be_on_a_known_shard_and_every_problem_is_named() {
        let catalogue = catalogue();
        let ids: Vec<String> = catalogue
            .webstores()
            .iter()
            .map(|w| w.settings.id.clone())
            .collect();
        let good: Vec<(&str, &str)> = ids.iter().map(|id| (id.as_str(), "s1")).collect();
        assert_eq!(placement(&good).check(&catalogue), Vec::<String>::new());
        let bad = placement(&[(ids[0].as_str(), "s9"), ("ghost", "s1")]);
        let problems = bad.check(&catalogue);
        assert!(
            problems
                .iter()
                .any(|p| p.contains("no shard is named \"s9\"")),
            "{problems:?}"
        );
        assert!(
            problems.iter().any(|p| p.contains("webstores.ghost")),
            "{problems:?}"
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains(&format!("{} is in the catalogue but on no shard", ids[1]))),
            "{problems:?}"
        );
    }

    #[test]
    fn the_file_round_trips_through_an_atomic_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("placement.json");
        let file = placement(&[("a", "s1")]);
        file.write(&path).unwrap();
        assert_eq!(PlacementFile::read(&path).unwrap(), file);
        assert!(!dir.path().join("placement.partial").exists());
    }
}
