//! The merged trace's record of how it was made: the parts' OTF2 trace file properties
//! (`NCCL_SCOREP::…`, written by the plugin) joined into the job's, and the same facts in
//! the run directory's `run.json` (under `provenance`).
//!
//! A value all parts agree on is kept as it is; per-process facts are joined: `HOST`
//! becomes `HOSTS` (every host once), the start is the earliest and the end the latest,
//! and any other value that differs between processes lists each distinct value once,
//! separated by ` | `.

use nccl_scorep_common::provenance::{
    counter_of_lost_property, property, variable_of_property, RUN_JSON_FILE, RUN_JSON_SCHEMA,
};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// The job's properties from its parts' (in part order), plus the number of parts.
pub(crate) fn merged_properties(parts: &[&[(String, String)]]) -> Vec<(String, String)> {
    let mut values: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for properties in parts {
        for (name, value) in properties.iter() {
            values
                .entry(name.to_ascii_uppercase())
                .or_default()
                .push(value.clone());
        }
    }
    let host = property("HOST");
    let start = property("START_REALTIME_NS");
    let end = property("END_REALTIME_NS");
    let mut merged = Vec::new();
    for (name, all) in values {
        if counter_of_lost_property(&name).is_some() {
            // What each process lost: the job lost the sum.
            let sum: u64 = all.iter().filter_map(|v| v.parse::<u64>().ok()).sum();
            merged.push((name, sum.to_string()));
            continue;
        }
        let mut distinct: Vec<String> = Vec::new();
        for value in all {
            if !distinct.contains(&value) {
                distinct.push(value);
            }
        }
        let value = if name == host {
            distinct.sort();
            merged.push((property("HOSTS"), distinct.join(",")));
            continue;
        } else if name == start || name == end {
            let numbers = distinct.iter().filter_map(|v| v.parse::<u64>().ok());
            let chosen = if name == start {
                numbers.min()
            } else {
                numbers.max()
            };
            chosen.map(|n| n.to_string()).unwrap_or_default()
        } else {
            distinct.join(" | ")
        };
        merged.push((name, value));
    }
    merged.push((property("PARTS"), parts.len().to_string()));
    merged
}

/// The properties as `run.json`'s `provenance` object: our names without the namespace,
/// in lower case, and the recorded variables under `environment`.
pub fn as_json(properties: &[(String, String)]) -> Value {
    let mut object = Map::new();
    let mut environment = Map::new();
    let prefix = property("");
    for (name, value) in properties {
        if let Some(variable) = variable_of_property(name) {
            environment.insert(variable.to_owned(), Value::String(value.clone()));
        } else if let Some(short) = name.strip_prefix(&prefix) {
            object.insert(short.to_ascii_lowercase(), Value::String(value.clone()));
        }
    }
    object.insert("environment".to_owned(), Value::Object(environment));
    Value::Object(object)
}

/// Puts `provenance` into `<dir>/run.json`, keeping what is there (written by `nccl-scorep
/// run`), or creating it. Replaced whole, so a reader never sees half of it.
pub(crate) fn update_run_json(dir: &Path, provenance: Value) -> std::io::Result<()> {
    let path = dir.join(RUN_JSON_FILE);
    let mut record = std::fs::read_to_string(&path)
        .ok()
        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        .filter(Value::is_object)
        .unwrap_or_else(|| {
            let mut fresh = Map::new();
            fresh.insert(
                "schema".to_owned(),
                Value::String(RUN_JSON_SCHEMA.to_owned()),
            );
            Value::Object(fresh)
        });
    if let Some(object) = record.as_object_mut() {
        object.insert("provenance".to_owned(), provenance);
    }
    let text = serde_json::to_string_pretty(&record).map_err(std::io::Error::from)? + "\n";
    nccl_scorep_common::safe_file::replace(&path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn job_wide_values_stay_and_per_process_ones_are_joined() {
        let a = pairs(&[
            ("NCCL_SCOREP::NCCL_VERSION", "2.32.0"),
            ("NCCL_SCOREP::HOST", "node1"),
            ("NCCL_SCOREP::START_REALTIME_NS", "200"),
            ("NCCL_SCOREP::END_REALTIME_NS", "900"),
            ("NCCL_SCOREP::ENV::NCCL_ALGO", "ring"),
        ]);
        let b = pairs(&[
            ("NCCL_SCOREP::NCCL_VERSION", "2.32.0"),
            ("NCCL_SCOREP::HOST", "node0"),
            ("NCCL_SCOREP::START_REALTIME_NS", "100"),
            ("NCCL_SCOREP::END_REALTIME_NS", "800"),
            ("NCCL_SCOREP::ENV::NCCL_ALGO", "tree"),
        ]);
        let merged: BTreeMap<String, String> = merged_properties(&[&a, &b]).into_iter().collect();
        assert_eq!(merged["NCCL_SCOREP::NCCL_VERSION"], "2.32.0");
        assert_eq!(merged["NCCL_SCOREP::HOSTS"], "node0,node1");
        assert_eq!(merged["NCCL_SCOREP::START_REALTIME_NS"], "100");
        assert_eq!(merged["NCCL_SCOREP::END_REALTIME_NS"], "900");
        assert_eq!(merged["NCCL_SCOREP::ENV::NCCL_ALGO"], "ring | tree");
        assert_eq!(merged["NCCL_SCOREP::PARTS"], "2");
        assert!(!merged.contains_key("NCCL_SCOREP::HOST"));

        let json = as_json(&merged.into_iter().collect::<Vec<_>>());
        assert_eq!(json["nccl_version"], "2.32.0");
        assert_eq!(json["environment"]["NCCL_ALGO"], "ring | tree");
    }
}
