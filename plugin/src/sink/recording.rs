//! A sink for the plugin's own tests: it keeps every call it gets. Added to the plugin as
//! any sink is (this file and one line in [`super::SINKS`]), it shows that a new sink
//! receives what the others receive without a change to the collector.

use super::{CycleEnd, Sink, SinkContext};
use crate::context::ContextInfo;
use crate::event::Kind;
use crate::model::{Closed, FinishedEvent, Gap, HeldBack, OpenView};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// One call the sink received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    Comm(u64),
    CommFinalized(u64),
    Gap(i32),
    HeldBack(HeldBack),
    Started {
        handle: u64,
        kind: Kind,
    },
    Event {
        handle: u64,
        kind: Kind,
        start_ns: u64,
        stop_ns: u64,
        closed: Closed,
    },
    Finish,
}

/// Opened only while a test asks for it.
pub static ENABLED: AtomicBool = AtomicBool::new(false);
/// Every call of every recording sink, in order.
pub static CALLS: Mutex<Vec<Call>> = Mutex::new(Vec::new());

pub struct Recording;

pub fn open(_context: &SinkContext) -> Option<Box<dyn Sink>> {
    ENABLED
        .load(Ordering::Acquire)
        .then(|| Box::new(Recording) as Box<dyn Sink>)
}

fn push(call: Call) {
    CALLS.lock().unwrap_or_else(|e| e.into_inner()).push(call);
}

impl Sink for Recording {
    fn comm(&mut self, context: u64, _info: &Arc<ContextInfo>) {
        push(Call::Comm(context));
    }

    fn comm_finalized(&mut self, context: u64) {
        push(Call::CommFinalized(context));
    }

    fn gap(&mut self, gap: &Gap) {
        push(Call::Gap(gap.tid));
    }

    fn held_back(&mut self, held: &HeldBack) {
        push(Call::HeldBack(*held));
    }

    fn started(&mut self, event: &OpenView) {
        push(Call::Started {
            handle: event.handle,
            kind: event.kind,
        });
    }

    fn event(&mut self, event: &FinishedEvent) {
        push(Call::Event {
            handle: event.handle,
            kind: event.kind,
            start_ns: event.start_ns,
            stop_ns: event.stop_ns,
            closed: event.closed,
        });
    }

    fn finish(&mut self, _end: &CycleEnd) {
        push(Call::Finish);
    }
}
