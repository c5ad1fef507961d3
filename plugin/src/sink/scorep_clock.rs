//! Score-P mode, on the collector's side: clock pairs between our clock and Score-P's now
//! and then, the metric plugin's samples after every pass, and at the end the part's
//! `scorep-clock.json`, with which the merge puts the sidecar trace on Score-P's clock.

use super::{CycleEnd, Sink, SinkContext};
use crate::model::{FinishedEvent, HeldTasks, OpenView};
use crate::scorep_mode;
use nccl_scorep_common::PartDir;
use std::sync::atomic::Ordering;

pub struct ScorepClock {
    pid: i32,
    host: String,
    part: PartDir,
}

/// The clock file when Score-P mode is on.
pub fn open(context: &SinkContext) -> Option<Box<dyn Sink>> {
    scorep_mode::FORWARDING.load(Ordering::Relaxed).then(|| {
        Box::new(ScorepClock {
            pid: context.pid,
            host: context.host.to_owned(),
            part: context.part.clone(),
        }) as Box<dyn Sink>
    })
}

impl Sink for ScorepClock {
    fn event(&mut self, _event: &FinishedEvent) {}

    fn end_of_pass(
        &mut self,
        _open: &mut dyn Iterator<Item = OpenView<'_>>,
        _held_tasks: &HeldTasks,
        _until: u64,
    ) {
        scorep_mode::on_collector_pass();
    }

    fn finish(&mut self, _end: &CycleEnd) {
        // Only a part with a trace needs aligning.
        if self.part.anchor().exists() {
            scorep_mode::part_finished(self.pid, &self.host, self.part.path());
        }
    }
}
