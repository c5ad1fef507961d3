//! Where finished events go. Today: the JSON-lines event log.

pub mod jsonl;
