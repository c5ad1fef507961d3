//! The plugin's modules form no cycle: no top-level module uses, through `crate::` or
//! `super::` paths or the submodules it declares, a module that uses it back (the
//! collector does not know the runtime, the sinks do not know the collector). A module
//! counts with its submodules: `sink` registers each sink, and each sink implements
//! `sink::Sink`. Read from the sources, test modules left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module path (`sink::otf2`) → the source text of its file, without its tests and comments.
fn modules(src: &Path) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(src).unwrap().with_extension("");
            let mut name = relative.to_string_lossy().replace('/', "::");
            if name == "lib" {
                continue;
            }
            if let Some(parent) = name.strip_suffix("::mod") {
                name = parent.to_owned();
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = match text.find("#[cfg(test)]\nmod tests") {
                Some(at) => &text[..at],
                None => &text[..],
            };
            let code: String = code
                .lines()
                .map(|line| line.split("//").next().unwrap_or(""))
                .collect::<Vec<_>>()
                .join("\n");
            found.insert(name, code);
        }
    }
    found
}

/// The modules `code` (of module `name`) refers to, among `known`.
fn uses(name: &str, code: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
    let parent = name.rsplit_once("::").map_or("", |(parent, _)| parent);
    let mut paths = Vec::new();
    for (prefix, base) in [("crate::", String::new()), ("super::", parent.to_owned())] {
        let mut rest = code;
        while let Some(at) = rest.find(prefix) {
            rest = &rest[at + prefix.len()..];
            let end = rest
                .find(|c: char| {
                    !(c.is_ascii_alphanumeric()
                        || c == '_'
                        || c == ':'
                        || c == '{'
                        || c == ','
                        || c == ' ')
                })
                .unwrap_or(rest.len());
            let path = &rest[..end];
            // `crate::{a, b::c}` names several.
            let items: Vec<&str> = match path.split_once('{') {
                Some(("", list)) => list.split(',').collect(),
                _ => vec![path],
            };
            for item in items {
                let item = item.trim().trim_end_matches(':');
                if item.is_empty() {
                    continue;
                }
                paths.push(if base.is_empty() {
                    item.to_owned()
                } else {
                    format!("{base}::{item}")
                });
            }
        }
    }
    // A module uses the submodules it declares (the sink list names each sink).
    for line in code.lines() {
        let line = line.trim();
        let declared = line
            .strip_prefix("pub mod ")
            .or_else(|| line.strip_prefix("mod "))
            .and_then(|rest| rest.strip_suffix(';'));
        if let Some(child) = declared {
            paths.push(format!("{name}::{child}"));
        }
    }
    paths
        .iter()
        .filter_map(|path| {
            // The longest known module the path starts with.
            let parts: Vec<&str> = path.split("::").collect();
            (1..=parts.len())
                .rev()
                .map(|n| parts[..n].join("::"))
                .find(|candidate| known.contains(candidate))
        })
        .filter(|module| module != name)
        .collect()
}

#[test]
fn no_module_uses_a_module_that_uses_it_back() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = modules(&src);
    let known: BTreeSet<String> = modules.keys().cloned().collect();
    let top = |module: &str| module.split("::").next().unwrap_or(module).to_owned();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (name, code) in &modules {
        let entry = graph.entry(top(name)).or_default();
        for used in uses(name, code, &known) {
            if top(&used) != top(name) {
                entry.insert(top(&used));
            }
        }
    }
    assert!(graph["collector"].contains("sink"), "the reader sees uses");
    assert!(graph["sink"].contains("job_end"), "of submodules too");
    assert!(!graph["collector"].contains("runtime"));
    // Every module, and what it reaches: a module that reaches itself is on a cycle.
    for start in graph.keys() {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<&String> = graph[start].iter().collect();
        while let Some(next) = todo.pop() {
            assert_ne!(next, start, "{start} reaches itself: {graph:#?}");
            if seen.insert(next) {
                todo.extend(graph[next].iter());
            }
        }
    }
}
