//! The size cap: when the slices of the window would make more events than allowed, a
//! first read (timestamps only, no attributes) finds the time up to which they fit, and the
//! export keeps the slices that begin by then.
//!
//! Every kept slice is two events ("B" and "E"); the slices kept for a window ending at
//! `T` are those open at the window's start and those that begin in `[start, T]`. The read
//! counts the first exactly and the second per 1/16384 of the window, so the cut falls on
//! such a step and holds at most the allowed events.

use std::path::Path;

use otf2_sys::read::{EventContext, EventVisitor};

use super::read::Range;

/// Steps of the window the cut can fall on.
const STEPS: u64 = 1 << 14;

/// Where the cap cuts the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cut {
    /// The last tick whose slices are kept.
    pub end: u64,
    /// Slice events ("B" and "E") of the whole window.
    pub window_events: u64,
    /// Of those, the ones kept.
    pub kept_events: u64,
}

struct Counter {
    range: Range,
    step: u64,
    begins: Vec<u64>,
    open_at_start: u64,
    depth: u64,
    in_window: bool,
}

impl Counter {
    fn arrive(&mut self, time: u64) {
        if !self.in_window && time >= self.range.start {
            self.in_window = true;
            self.open_at_start += self.depth;
        }
    }
}

impl EventVisitor for Counter {
    fn wants_attributes(&self) -> bool {
        false
    }

    fn enter(&mut self, e: &EventContext<'_>, _region: u32) {
        self.arrive(e.time);
        self.depth += 1;
        if e.time >= self.range.start && e.time <= self.range.end {
            let step = ((e.time - self.range.start) / self.step).min(STEPS - 1);
            self.begins[step as usize] += 1;
        }
    }

    fn leave(&mut self, e: &EventContext<'_>, _region: u32) {
        self.arrive(e.time);
        self.depth = self.depth.saturating_sub(1);
    }

    fn other(&mut self, e: &EventContext<'_>, _record: &'static str) {
        self.arrive(e.time);
    }
}

/// Reads `locations` of the archive at `anchor` and returns where to cut `range` so that
/// its slices make at most `max_events` events; None when all of them fit.
pub fn cut(
    anchor: &Path,
    locations: &[u64],
    range: Range,
    max_events: u64,
) -> Result<Option<Cut>, otf2_sys::Error> {
    let span = range.end.saturating_sub(range.start).saturating_add(1);
    let mut counter = Counter {
        range,
        step: span.div_ceil(STEPS).max(1),
        begins: vec![0; STEPS as usize],
        open_at_start: 0,
        depth: 0,
        in_window: false,
    };
    crate::profile::each_location(anchor, locations, |_, events| {
        counter.depth = 0;
        counter.in_window = false;
        events.read_all(&mut counter)?;
        Ok(true)
    })?;
    let mut kept = counter.open_at_start * 2;
    let window_events = kept + counter.begins.iter().sum::<u64>() * 2;
    if window_events <= max_events {
        return Ok(None);
    }
    let mut steps = 0;
    for &begins in &counter.begins {
        if kept + begins * 2 > max_events {
            break;
        }
        kept += begins * 2;
        steps += 1;
    }
    let end = (range.start + steps * counter.step).saturating_sub(1);
    Ok(Some(Cut {
        end,
        window_events,
        kept_events: if kept > max_events { 0 } else { kept },
    }))
}
