//! Records the cycle's finished part in the run directory's merge ledger, so that the
//! last process of the job merges it (see [`crate::job_end`]). Listed after every sink
//! that writes into the part: when the ledger names a part, the part is complete.

use super::{CycleEnd, Sink, SinkContext};
use crate::model::FinishedEvent;
use nccl_scorep_common::{PartDir, RunDir};

pub struct PartLedger {
    run_dir: RunDir,
    part: PartDir,
}

/// The ledger entry when the job merges automatically and a trace part is written.
pub fn open(context: &SinkContext) -> Option<Box<dyn Sink>> {
    (context.config.auto_merge && context.config.writes_otf2()).then(|| {
        Box::new(PartLedger {
            run_dir: context.run_dir.clone(),
            part: context.part.clone(),
        }) as Box<dyn Sink>
    })
}

impl Sink for PartLedger {
    fn event(&mut self, _event: &FinishedEvent) {}

    fn finish(&mut self, _end: &CycleEnd) {
        // A part the trace sink could not finish is not offered to the merge.
        if self.part.anchor().exists() {
            crate::job_end::part_finished(&self.run_dir, &self.part.anchor());
        }
    }
}
