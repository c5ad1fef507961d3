//! Records the cycle's part in the run directory's merge ledger: that it began (so a merge
//! by hand knows which job it belongs to, even when its process is killed) and, with the
//! automatic merge, that it is finished, so that the last process of the job merges it
//! (see [`crate::job_end`]). Listed after every sink that writes into the part: when the
//! ledger names a part finished, the part is complete.

use super::{CycleEnd, Sink, SinkContext};
use crate::model::FinishedEvent;
use nccl_scorep_common::{PartDir, RunDir};

pub struct PartLedger {
    run_dir: RunDir,
    part: PartDir,
    auto_merge: bool,
}

/// The ledger entries when a trace part is written.
pub fn open(context: &SinkContext) -> Option<Box<dyn Sink>> {
    if !context.config.writes_otf2() || !context.part.path().is_dir() {
        return None;
    }
    crate::job_end::part_begun(context.run_dir, context.part);
    Some(Box::new(PartLedger {
        run_dir: context.run_dir.clone(),
        part: context.part.clone(),
        auto_merge: context.config.auto_merge,
    }))
}

impl Sink for PartLedger {
    fn event(&mut self, _event: &FinishedEvent) {}

    fn finish(&mut self, _end: &CycleEnd) {
        // A part the trace sink could not finish is not offered to the merge.
        if self.auto_merge && self.part.anchor().exists() {
            crate::job_end::part_finished(&self.run_dir, &self.part.anchor());
        }
    }
}
