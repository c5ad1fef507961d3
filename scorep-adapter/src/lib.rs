//! Everything about a running Score-P that the NCCL profiler plugin needs:
//!
//! - [`user`]: Score-P's user API (`SCOREP_User_*`), found at run time in the process's
//!   global symbol scope. Score-P is never linked: when the process is not measured by a
//!   shared Score-P built with `--user`, the symbols are absent and the plugin stays
//!   standalone.
//! - [`region`]: user regions created once per name and put in a region group, string
//!   parameters, and the size buckets that keep parameter values few.
//! - [`metric`]: the types of Score-P's metric-plugin interface (version 1), through which
//!   Score-P hands over its own clock.
//! - [`clock_file`]: `scorep-clock.json`, which pairs our trace's timestamps with Score-P's
//!   clock so the sidecar trace can be merged into Score-P's.
//!
//! The signatures and rules come from Score-P 8.4's public headers as observed with a real
//! Score-P 8.4 (docs/scorep.md); no Score-P header or code is part of this crate.

pub mod clock_file;
pub mod metric;
pub mod region;
pub mod user;

pub use clock_file::{ClockFile, ClockPair, ClockSource};
pub use nccl_scorep_common::sizes::size_bucket;
pub use region::{Parameter, Region};
pub use user::{Missing, RegionHandle, UserApi};
