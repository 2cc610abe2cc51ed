//! HAProxy's API-key map, the file and the running copy: read strictly (a map that is
//! missing, unreadable or not `KEY BACKEND` lines stops a move before anything is changed,
//! naming the file: a guessed map would send every other webstore elsewhere at HAProxy's
//! next reload), rewritten atomically with a moved webstore's keys, and switched at run time
//! through HAProxy's socket (`set map`, or `add map` for a key it does not have yet).
//!
//! Must not touch: nodes, the placement file.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use super::placement::write_atomically;

/// The map file: each API key's backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapFile {
    entries: BTreeMap<String, String>,
}

impl MapFile {
    /// Reads the map at `path`; an error names the file, and the line at fault.
    pub fn read(path: &Path) -> Result<MapFile, String> {
        let text = std::fs::read_to_string(path).map_err(|error| {
            format!(
                "reading HAProxy's map {}: {error} (nothing was changed; `boxsub \
                 haproxy-config` writes it)",
                path.display()
            )
        })?;
        MapFile::parse(&text).map_err(|problem| {
            format!(
                "HAProxy's map {}: {problem} (nothing was changed)",
                path.display()
            )
        })
    }

    /// Parses a map's text: `KEY BACKEND` lines, blank lines and `#` comments allowed.
    fn parse(text: &str) -> Result<MapFile, String> {
        let mut entries = BTreeMap::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            let [key, backend] = words[..] else {
                return Err(format!("line {} is not `API-KEY BACKEND`", number + 1));
            };
            entries.insert(key.to_owned(), backend.to_owned());
        }
        Ok(MapFile { entries })
    }

    /// Points `keys` at `backend`.
    pub fn point(&mut self, keys: &[String], backend: &str) {
        for key in keys {
            self.entries.insert(key.clone(), backend.to_owned());
        }
    }

    /// Writes the map to `path` atomically, sorted by key.
    pub fn write(&self, path: &Path) -> Result<(), String> {
        let text: String = self
            .entries
            .iter()
            .map(|(key, backend)| format!("{key} {backend}\n"))
            .collect();
        write_atomically(path, text.as_bytes())
    }
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

/// Points `key` at `backend` in HAProxy's running map `map`.
pub fn switch_key(socket: &Path, map: &Path, key: &str, backend: &str) -> Result<(), String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_is_key_and_backend_lines_and_nothing_else() {
        let map = MapFile::parse("k1 shard_one\n\n# comment\nk2   shard_two\n").unwrap();
        assert_eq!(map.entries.len(), 2);
        assert!(MapFile::parse("k1 shard_one extra\n")
            .unwrap_err()
            .contains("line 1"));
        assert!(MapFile::parse("k1 shard_one\nlonely\n")
            .unwrap_err()
            .contains("line 2"));
    }

    #[test]
    fn a_missing_map_is_an_error_naming_it_and_a_rewrite_keeps_every_other_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shards.map");
        let missing = MapFile::read(&path).unwrap_err();
        assert!(missing.contains("shards.map"), "{missing}");
        std::fs::write(&path, "a1 shard_one\nb1 shard_one\nc1 shard_two\n").unwrap();
        let mut map = MapFile::read(&path).unwrap();
        map.point(&["b1".to_owned(), "b2".to_owned()], "shard_two");
        map.write(&path).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "a1 shard_one\nb1 shard_two\nb2 shard_two\nc1 shard_two\n"
        );
    }
}
