//! Where finished events go: the OTF2 trace (standalone mode) and the JSON-lines event
//! log (debugging view, and what `nccl-scorep summary` reads).

pub mod jsonl;
pub mod otf2;
