//! The tests that hold the crate's layout to its documents. The arrows, as `src/lib.rs`
//! states them: each top-level module has a floor ([`FLOORS`]), and code under `src/` may
//! name (`crate::…`) only modules on lower floors; the store's three layers name only those
//! below them ([`STORE_LAYERS`]); and the children of no folder name each other in a circle
//! of any length, wherever they are (store and transfer included). These read the sources, skipping comments and each
//! file's unit tests (`#[cfg(test)] mod tests`, and files that are test modules whole), which
//! may reach anywhere. The map: every file under `src/` is named in docs/design.md's table
//! of layers, and every file's opening `//!` paragraph says what it must not touch. The
//! store's and transfer's files are held to docs/storage.md instead, by their own room
//! ([`DOCUMENTED_ELSEWHERE`]).
//!
//! Must not touch: anything but reading `src/` and `docs/` (tests only).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every top-level module and its floor: a module may use those on lower floors only. The
/// domain uses nothing; the clock, randomness, metrics and the read lease are leaves every
/// other layer may use; then the chain of `src/lib.rs`, with the modules beside it.
const FLOORS: &[(&str, u8)] = &[
    ("domain", 0),
    ("clock", 1),
    ("random", 1),
    ("metrics", 1),
    ("lease", 1),
    ("views", 2),
    ("quotas", 2),
    ("sharding", 2),
    ("keygen", 2),
    ("store", 3),
    ("index", 4),
    ("events", 5),
    ("actors", 6),
    ("transfer", 6),
    ("registry", 7),
    ("service", 8),
    ("node", 9),
    ("webhooks", 9),
    ("replication", 10),
    ("app", 10),
    ("http", 11),
    ("config", 12),
    ("startup", 13),
    ("commands", 14),
    ("tools", 15),
    ("fuzzing", 15),
];

/// Circles among a folder's children (`a -> b -> …`, sorted), each with why it is let be:
/// none today.
const KNOWN_CIRCLES: &[(&str, &str)] = &[];

/// Directories whose files docs/storage.md lists, and whose `//!` lines its room keeps.
const DOCUMENTED_ELSEWHERE: &[&str] = &["store/", "transfer/"];

fn source_files(dir: &Path, found: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            source_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

/// The module path of a file under `src/` (`store/log/mod.rs` → `["store", "log"]`).
fn module_of(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .with_extension("")
        .iter()
        .map(|part| part.to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|last| last == "mod") {
        parts.pop();
    }
    parts
}

/// Whether the file is a test module whole (`tests.rs`, `*_tests.rs`).
fn is_test_file(relative: &Path) -> bool {
    let name = relative.file_stem().unwrap().to_string_lossy();
    name == "tests" || name.ends_with("_tests")
}

/// The file's code outside its unit tests, without comments and string literals.
fn code_of(text: &str) -> Vec<String> {
    let body = text
        .find("#[cfg(test)]\nmod tests")
        .map_or(text, |at| &text[..at]);
    body.lines()
        .map(str::trim)
        .filter(|line| !line.starts_with("//"))
        .map(|line| {
            let mut kept = String::new();
            let mut in_string = false;
            let mut escaped = false;
            let mut previous = ' ';
            for c in line.chars() {
                if in_string {
                    if escaped {
                        escaped = false;
                    } else if c == '\\' {
                        escaped = true;
                    } else if c == '"' {
                        in_string = false;
                    }
                    continue;
                }
                if c == '"' {
                    in_string = true;
                    continue;
                }
                if c == '/' && previous == '/' {
                    kept.pop();
                    break;
                }
                kept.push(c);
                previous = c;
            }
            kept
        })
        .collect()
}

/// The paths a line names from `crate::` or `super::`, made absolute (`["store", "keys"]`).
fn named_paths(line: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut named = Vec::new();
    let bytes = line.as_bytes();
    for start in ["crate::", "super::"]
        .iter()
        .flat_map(|prefix| line.match_indices(prefix).map(|(at, _)| at))
    {
        let whole_word = start == 0
            || !(bytes[start - 1].is_ascii_alphanumeric()
                || bytes[start - 1] == b'_'
                || bytes[start - 1] == b':');
        if !whole_word {
            continue;
        }
        let segments: Vec<&str> = line[start..]
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .next()
            .unwrap_or("")
            .split("::")
            .filter(|segment| !segment.is_empty())
            .collect();
        let mut path: Vec<String> = Vec::new();
        let mut rest = segments.as_slice();
        if rest.first() == Some(&"crate") {
            rest = &rest[1..];
        } else {
            // `super` of `a/b.rs` and of `a/b/mod.rs` (both module a::b) is `a`.
            path = module.to_vec();
            while rest.first() == Some(&"super") {
                path.pop();
                rest = &rest[1..];
            }
        }
        path.extend(rest.iter().map(|segment| (*segment).to_owned()));
        named.push(path);
    }
    named
}

struct Crate {
    /// Each file's module, and the modules (files) its code names.
    uses: BTreeMap<Vec<String>, (PathBuf, BTreeSet<Vec<String>>)>,
}

fn read_crate() -> Crate {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    source_files(&src, &mut files);
    let modules: BTreeMap<Vec<String>, PathBuf> = files
        .iter()
        .map(|path| {
            let relative = path.strip_prefix(&src).unwrap().to_path_buf();
            (module_of(&relative), relative)
        })
        .collect();
    let mut uses = BTreeMap::new();
    for (module, relative) in &modules {
        let top = relative.components().count() == 1;
        if is_test_file(relative)
            || (top && ["lib", "main"].contains(&module[0].as_str()))
            || module[0] == "bin"
        {
            continue;
        }
        let text = std::fs::read_to_string(src.join(relative)).unwrap();
        let mut named = BTreeSet::new();
        for line in code_of(&text) {
            for path in named_paths(&line, module) {
                // The longest prefix that is a file of the crate.
                if let Some(file) = (1..=path.len())
                    .rev()
                    .map(|len| path[..len].to_vec())
                    .find(|prefix| modules.contains_key(prefix))
                {
                    if &file != module {
                        named.insert(file);
                    }
                }
            }
        }
        uses.insert(module.clone(), (relative.clone(), named));
    }
    Crate { uses }
}

fn floor(module: &str) -> u8 {
    FLOORS
        .iter()
        .find(|(name, _)| *name == module)
        .unwrap_or_else(|| {
            panic!("src/{module} has no floor: add it to FLOORS in src/layout_tests.rs and to src/lib.rs")
        })
        .1
}

#[test]
fn every_module_uses_only_modules_below_it() {
    let mut wrong = Vec::new();
    for (module, (file, named)) in &read_crate().uses {
        let from = &module[0];
        for target in named {
            let to = &target[0];
            if to != from && floor(to) >= floor(from) {
                wrong.push(format!(
                    "src/{} names crate::{} ({from} is on floor {}, {to} on {})",
                    file.display(),
                    target.join("::"),
                    floor(from),
                    floor(to)
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "arrows pointing up or across (see src/lib.rs):\n{}",
        wrong.join("\n")
    );
}

/// The circles among the children of each folder: for every module with children, the
/// graph whose nodes are its children (files and folders) and whose arrows say that some file
/// in one child names something in another; every strongly connected component of more than
/// one child is a circle, however long (Tarjan's algorithm).
fn circles(uses: &BTreeMap<Vec<String>, (PathBuf, BTreeSet<Vec<String>>)>) -> Vec<Vec<String>> {
    let mut folders: BTreeMap<Vec<String>, BTreeSet<String>> = BTreeMap::new();
    for module in uses.keys() {
        for depth in 0..module.len() {
            folders
                .entry(module[..depth].to_vec())
                .or_default()
                .insert(module[depth].clone());
        }
    }
    let mut found = Vec::new();
    for (folder, children) in &folders {
        let children: Vec<&String> = children.iter().collect();
        let index = |module: &[String]| -> Option<usize> {
            (module.len() > folder.len() && module.starts_with(folder))
                .then(|| children.iter().position(|c| **c == module[folder.len()]))
                .flatten()
        };
        let mut arrows = vec![BTreeSet::new(); children.len()];
        for (module, (_, named)) in uses {
            let Some(from) = index(module) else { continue };
            for target in named {
                if let Some(to) = index(target) {
                    if to != from {
                        arrows[from].insert(to);
                    }
                }
            }
        }
        for component in strongly_connected(&arrows) {
            if component.len() > 1 {
                let mut names: Vec<String> = component
                    .iter()
                    .map(|&at| {
                        let mut path = folder.clone();
                        path.push(children[at].clone());
                        path.join("::")
                    })
                    .collect();
                names.sort();
                found.push(names);
            }
        }
    }
    found
}

/// Tarjan's strongly connected components of the graph `arrows[node]`.
fn strongly_connected(arrows: &[BTreeSet<usize>]) -> Vec<Vec<usize>> {
    struct Walk<'a> {
        arrows: &'a [BTreeSet<usize>],
        next: usize,
        order: Vec<Option<usize>>,
        low: Vec<usize>,
        stack: Vec<usize>,
        on_stack: Vec<bool>,
        components: Vec<Vec<usize>>,
    }
    fn visit(walk: &mut Walk<'_>, node: usize) {
        walk.order[node] = Some(walk.next);
        walk.low[node] = walk.next;
        walk.next += 1;
        walk.stack.push(node);
        walk.on_stack[node] = true;
        for &next in walk.arrows[node].iter() {
            match walk.order[next] {
                None => {
                    visit(walk, next);
                    walk.low[node] = walk.low[node].min(walk.low[next]);
                }
                Some(seen) if walk.on_stack[next] => walk.low[node] = walk.low[node].min(seen),
                Some(_) => {}
            }
        }
        if Some(walk.low[node]) == walk.order[node] {
            let mut component = Vec::new();
            while let Some(top) = walk.stack.pop() {
                walk.on_stack[top] = false;
                component.push(top);
                if top == node {
                    break;
                }
            }
            walk.components.push(component);
        }
    }
    let mut walk = Walk {
        arrows,
        next: 0,
        order: vec![None; arrows.len()],
        low: vec![0; arrows.len()],
        stack: Vec::new(),
        on_stack: vec![false; arrows.len()],
        components: Vec::new(),
    };
    for node in 0..arrows.len() {
        if walk.order[node].is_none() {
            visit(&mut walk, node);
        }
    }
    walk.components
}

#[test]
fn no_folder_s_children_name_each_other_in_a_circle() {
    let found: Vec<String> = circles(&read_crate().uses)
        .into_iter()
        .map(|circle| circle.join(" -> "))
        .filter(|circle| !KNOWN_CIRCLES.iter().any(|(names, _)| names == circle))
        .collect();
    assert!(found.is_empty(), "circles:\n{}", found.join("\n"));
}

#[test]
fn circles_of_any_length_are_found() {
    let module = |path: &str| -> Vec<String> { path.split("::").map(str::to_owned).collect() };
    let mut uses = BTreeMap::new();
    for (from, to) in [
        ("store::log::commit", "store::pending"),
        ("store::pending::waiting", "store::snapshot::sled"),
        ("store::snapshot::sled", "store::log"),
        ("store::kinds::orders", "store::pending"),
        ("domain::order::body", "domain::fields"),
    ] {
        uses.entry(module(from))
            .or_insert_with(|| (PathBuf::new(), BTreeSet::new()))
            .1
            .insert(module(to));
    }
    assert_eq!(
        circles(&uses),
        vec![vec![
            "store::log".to_owned(),
            "store::pending".to_owned(),
            "store::snapshot".to_owned()
        ]]
    );
}

/// The store's three layers, each using only those below it: the log, the pending layer,
/// the snapshot (docs/storage.md).
const STORE_LAYERS: [&str; 3] = ["log", "pending", "snapshot"];

#[test]
fn the_store_s_layers_use_only_those_below_them() {
    let mut wrong = Vec::new();
    for (module, (file, named)) in &read_crate().uses {
        let layer_of = |module: &[String]| {
            (module.len() > 1 && module[0] == "store")
                .then(|| STORE_LAYERS.iter().position(|layer| *layer == module[1]))
                .flatten()
        };
        let Some(from) = layer_of(module) else {
            continue;
        };
        for target in named {
            if let Some(to) = layer_of(target) {
                if to < from {
                    wrong.push(format!(
                        "src/{} names crate::{}",
                        file.display(),
                        target.join("::")
                    ));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "the store's layers name a layer above them (log → pending → snapshot):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_reader_sees_what_a_module_names_and_not_its_comments() {
    let module = vec!["service".to_owned(), "calls".to_owned()];
    let code = code_of(
        "//! crate::http here is prose\nuse crate::registry::{LiveActor, Refused}; // crate::http\n\
         let s = \"crate::node\"; super::ServiceError;\n#[cfg(test)]\nmod tests { use crate::http; }",
    );
    let named: Vec<Vec<String>> = code
        .iter()
        .flat_map(|line| named_paths(line, &module))
        .collect();
    assert_eq!(
        named,
        vec![
            vec!["registry".to_owned()],
            vec!["service".to_owned(), "ServiceError".to_owned()]
        ]
    );
}

fn repository() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every file under `src/` (any extension), relative to it, `/`-separated, but those
/// documented elsewhere.
fn files_to_document() -> Vec<String> {
    fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, found);
            } else {
                found.push(path);
            }
        }
    }
    let src = repository().join("src");
    let mut found = Vec::new();
    walk(&src, &mut found);
    let mut files: Vec<String> = found
        .iter()
        .map(|path| {
            let relative = path.strip_prefix(&src).unwrap();
            relative
                .iter()
                .map(|part| part.to_string_lossy())
                .collect::<Vec<_>>()
                .join("/")
        })
        .filter(|file| !DOCUMENTED_ELSEWHERE.iter().any(|dir| file.starts_with(dir)))
        .collect();
    files.sort();
    files
}

/// Whether docs/design.md's table of layers names `file` (relative to `src/`): a row whose
/// first cell names it (`src/clock.rs`), or the row of its top directory naming it by its
/// name (`feed.rs`) or by its path below that directory (`catalogue/`, `templates/`). A
/// directory's `mod.rs` is its row, and test modules (`tests.rs`, `*_tests.rs`) are named by
/// what they test.
fn named_in_design(file: &str, rows: &[&str]) -> bool {
    let name = file.rsplit('/').next().unwrap();
    let stem = name.trim_end_matches(".rs");
    if name == "mod.rs" || ((stem == "tests" || stem.ends_with("_tests")) && file.contains('/')) {
        return true;
    }
    let whole = format!("`src/{file}`");
    if rows.iter().any(|row| {
        row.split('|')
            .nth(1)
            .is_some_and(|first| first.contains(&whole))
    }) {
        return true;
    }
    let Some((top, below)) = file.split_once('/') else {
        return false;
    };
    let Some(row) = rows.iter().find(|row| {
        row.split('|')
            .nth(1)
            .is_some_and(|first| first.contains(&format!("`src/{top}/`")))
    }) else {
        return false;
    };
    let directory = below.rsplit_once('/').map(|(dir, _)| dir);
    row.contains(&format!("`{name}`"))
        || row.contains(&format!("`{below}`"))
        || directory.is_some_and(|dir| {
            let last = dir.rsplit('/').next().unwrap();
            row.contains(&format!("`{last}/`")) && !name.ends_with(".rs")
        })
}

#[test]
fn design_md_names_every_file_under_src() {
    let design = std::fs::read_to_string(repository().join("docs/design.md")).unwrap();
    let table = &design[design.find("## Layers").unwrap()..];
    let table = &table[..table.find("\n## ").unwrap_or(table.len())];
    let rows: Vec<&str> = table
        .lines()
        .filter(|line| line.starts_with("| `src/"))
        .collect();
    let unnamed: Vec<String> = files_to_document()
        .into_iter()
        .filter(|file| !named_in_design(file, &rows))
        .collect();
    assert!(
        unnamed.is_empty(),
        "files docs/design.md's table of layers does not name (add each to its row):\n{}",
        unnamed.join("\n")
    );
}

#[test]
fn every_file_says_what_it_must_not_touch() {
    let src = repository().join("src");
    let silent: Vec<String> = files_to_document()
        .into_iter()
        .filter(|file| file.ends_with(".rs"))
        .filter(|file| {
            let text = std::fs::read_to_string(src.join(file)).unwrap();
            let opening: Vec<&str> = text
                .lines()
                .take_while(|line| line.starts_with("//!"))
                .map(|line| line.trim_start_matches("//!").trim())
                .collect();
            !opening.join(" ").to_lowercase().contains("must not touch")
        })
        .collect();
    assert!(
        silent.is_empty(),
        "files whose opening //! paragraph says nothing of what they must not touch:\n{}",
        silent.join("\n")
    );
}
