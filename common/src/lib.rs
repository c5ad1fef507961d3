//! What the plugin, the command-line tool, the merge and the NCCL stand-in `nccl-sim`
//! share, and nothing else: the job as its launcher describes it ([`job`]), the system
//! clocks ([`clock`]), the layout of a run directory ([`run_dir`]) and the ledger in which
//! a job's processes record their parts ([`ledger`]), the size buckets of payloads
//! ([`sizes`]), what a trace records of how it was made ([`provenance`]), and how output files are
//! opened without following planted links ([`safe_file`]), the flight recorder's
//! file ([`flight`]), and the list of a part's event files ([`event_files`]).

pub mod clock;
pub mod event_files;
pub mod flight;
pub mod flock;
pub mod job;
pub mod ledger;
pub mod natural;
pub mod provenance;
pub mod rank_ranges;
pub mod read_ahead;
pub mod recording;
pub mod run_dir;
pub mod safe_file;
pub mod sizes;

pub use run_dir::{PartDir, RunDir};
