//! `nccl-scorep export --format chrome`: a job's merged trace as Chrome trace-event JSON
//! for Perfetto UI and chrome://tracing (docs/export.md): a Chrome process per process of
//! the job, a Chrome thread per location, a slice per interval with its attributes as
//! args, flows for point-to-point messages and PXN links; a time window and a cap on the
//! events keep big traces openable.
//!
//! The output is written as the trace is read ([`read`]), in three reads of the archive,
//! each one location at a time, as `nccl-scorep profile` reads (OTF2 holds one location's
//! event chunk and files at a time): the PXN proxy locations, the ops streams (messages are
//! matched there), then every other location.

mod budget;
mod json;
mod layout;
mod processes;
mod read;
mod window;

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use otf2_sys::read::Reader;

use budget::Cut;
use json::TraceJson;
use layout::Layout;
pub use processes::Processes;
use read::{Clock, Exporter, Phase, Range, Stats};
pub use window::Window;

/// The default of `--max-events`: about 100 MB of JSON (docs/export.md).
pub const DEFAULT_MAX_EVENTS: u64 = 1_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Chrome's trace-event JSON (Perfetto UI, chrome://tracing).
    Chrome,
}

/// The options of `nccl-scorep export`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The run directory (its merged traces.otf2), or an archive's anchor file.
    path: PathBuf,
    /// The output format.
    #[arg(long, value_enum, default_value_t = Format::Chrome)]
    format: Format,
    /// Where to write the JSON (default: trace.json beside the trace; `-`: stdout).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Keep only the intervals that overlap this time window, relative to the trace's
    /// start: START:END, each a number with a unit s, ms, us or ns (seconds without one);
    /// either may be left out (`2s:`, `:500ms`).
    #[arg(long, value_name = "START:END", value_parser = Window::parse)]
    window: Option<Window>,
    /// The most slice events ("B" and "E", two per interval) to write: a bigger trace (or
    /// window) is cut at the time where they run out, and a message says where.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_EVENTS)]
    max_events: u64,
    /// Only these processes, by launcher (MPI) rank: `0-7,42` (the rank in their name
    /// `process <rank> (pid …)`; processes without one, by pid). Messages to the others get
    /// no flow.
    #[arg(long, value_name = "RANKS", value_parser = Processes::parse)]
    processes: Option<Processes>,
}

/// What an export wrote.
#[derive(Debug)]
pub struct Outcome {
    pub bytes: u64,
    pub slice_events: u64,
    pub flow_events: u64,
    pub stats: Stats,
    /// Set when the cap cut the window.
    pub cut: Option<Cut>,
    /// The kept window in nanoseconds since the trace's start (end: the trace's end).
    pub window_ns: (i64, i64),
}

/// `nccl-scorep export`: exit status 0 when written, 2 when the trace cannot be found or
/// opened, 1 for other failures.
pub fn main(args: &Args) -> ExitCode {
    let Format::Chrome = args.format;
    let anchor = match crate::profile::archive_of(&args.path) {
        Ok(anchor) => anchor,
        Err(error) => {
            eprintln!("nccl-scorep export: {error}");
            return ExitCode::from(2);
        }
    };
    let window = args.window.unwrap_or_default();
    let to_stdout = args.output.as_deref() == Some(Path::new("-"));
    let target = match &args.output {
        Some(output) => output.clone(),
        None => anchor.with_file_name("trace.json"),
    };
    let written = if to_stdout {
        export(
            &anchor,
            io::stdout().lock(),
            window,
            args.max_events,
            args.processes.as_ref(),
        )
    } else {
        write_file(
            &anchor,
            &target,
            window,
            args.max_events,
            args.processes.as_ref(),
        )
    };
    let outcome = match written {
        Ok(outcome) => outcome,
        Err(Failure::Open(error)) => {
            eprintln!("nccl-scorep export: {error}");
            return ExitCode::from(2);
        }
        Err(Failure::Other(error)) => {
            eprintln!("nccl-scorep export: {error}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(cut) = outcome.cut {
        eprintln!(
            "nccl-scorep export: {}",
            describe_cut(&cut, &outcome, args.max_events)
        );
    }
    let line = describe(&outcome, if to_stdout { None } else { Some(&target) });
    if to_stdout {
        eprintln!("{line}");
    } else {
        println!("{line}");
    }
    ExitCode::SUCCESS
}

/// Why an export failed.
#[derive(Debug)]
pub enum Failure {
    /// The trace could not be opened.
    Open(String),
    Other(String),
}

/// Writes the export into `target` through a temporary file beside it, so that a failed
/// export leaves no half file.
fn write_file(
    anchor: &Path,
    target: &Path,
    window: Window,
    max_events: u64,
    processes: Option<&Processes>,
) -> Result<Outcome, Failure> {
    let mut partial = target.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    let file = std::fs::File::create(&partial)
        .map_err(|e| Failure::Other(format!("cannot write {}: {e}", partial.display())))?;
    let outcome = export(anchor, file, window, max_events, processes);
    match outcome {
        Ok(outcome) => {
            std::fs::rename(&partial, target)
                .map_err(|e| Failure::Other(format!("cannot write {}: {e}", target.display())))?;
            Ok(outcome)
        }
        Err(error) => {
            drop(std::fs::remove_file(&partial));
            Err(error)
        }
    }
}

/// Writes the Chrome trace of the archive at `anchor` to `out`: the `processes` asked for
/// (all without).
pub fn export<W: Write>(
    anchor: &Path,
    out: W,
    window: Window,
    max_events: u64,
    processes: Option<&Processes>,
) -> Result<Outcome, Failure> {
    otf2_sys::install_error_handler(otf2_sys::error::ignore);
    let archive =
        Reader::open(anchor).map_err(|e| Failure::Open(format!("{}: {e}", anchor.display())))?;
    let defs = archive.global_definitions().map_err(|e| {
        Failure::Open(format!(
            "{}: cannot read the definitions: {e}",
            anchor.display()
        ))
    })?;
    // The events are read one location at a time, each opening the archive anew.
    drop(archive.close());
    drop(otf2_sys::error::drain_thread_error_reports());
    let is_nccl = defs
        .attributes
        .iter()
        .any(|a| defs.string(a.name) == Some("nccl.func"));
    if !is_nccl {
        return Err(Failure::Open(format!(
            "{} has no nccl.func attribute: not an NCCL trace of nccl-scorep",
            anchor.display()
        )));
    }
    let clock = Clock::of(&defs);
    let trace_end = defs
        .clock
        .map_or(u64::MAX, |c| c.global_offset.saturating_add(c.trace_length));
    let mut range = Range {
        start: clock.ticks(window.start_ns),
        end: window.end_ns.map_or(u64::MAX, |end| clock.ticks(end)),
    };
    let layout = Layout::of(&defs, processes);
    if let Some(processes) = processes.filter(|_| layout.processes.is_empty()) {
        return Err(Failure::Open(format!(
            "{}: no process of the trace has a rank in --processes {processes} (its processes: {})",
            anchor.display(),
            Processes::of_trace(&defs)
        )));
    }
    let mut locations: Vec<u64> = layout.threads.keys().copied().collect();
    locations.sort_unstable();
    let unreadable = |what: String| {
        Failure::Other(format!(
            "{}: the events could not all be read ({what}); `nccl-scorep validate` says why",
            anchor.display()
        ))
    };
    // A trace with fewer events than the cap cannot exceed it: no counting read then.
    let total: u64 = defs.locations.iter().map(|l| l.number_of_events).sum();
    let cut = if total > max_events {
        let counted = Range {
            start: range.start,
            end: range.end.min(trace_end),
        };
        let cut = budget::cut(anchor, &locations, counted, max_events)
            .map_err(|e| unreadable(e.to_string()))?;
        drop(otf2_sys::error::drain_thread_error_reports());
        if let Some(cut) = cut {
            if cut.kept_events == 0 || cut.end < range.start {
                return Err(Failure::Other(format!(
                    "the first 1/16384 of the window alone holds more than --max-events {max_events} \
                     slice events: choose a shorter window (--window) or raise --max-events"
                )));
            }
            range.end = cut.end;
        }
        cut
    } else {
        None
    };

    let io_error = |e: io::Error| Failure::Other(format!("cannot write the export: {e}"));
    let mut json = TraceJson::start(out).map_err(io_error)?;
    layout.write_metadata(&mut json).map_err(io_error)?;
    let (pxn, rest): (Vec<u64>, Vec<u64>) = locations.iter().partition(|id| layout.threads[id].pxn);
    let (ops, others): (Vec<u64>, Vec<u64>) = rest
        .iter()
        .partition(|id| layout.threads[id].kind == crate::profile::LocationKind::OpsStream);
    let mut exporter = Exporter::new(&defs, &layout, &mut json, range);

    exporter.phase = Phase::Pxn;
    read_one_by_one(anchor, &pxn, &mut exporter).map_err(|e| unreadable(e.to_string()))?;
    exporter.phase = Phase::Ops;
    let read_to_their_ends =
        read_one_by_one(anchor, &ops, &mut exporter).map_err(|e| unreadable(e.to_string()))?;
    drop(otf2_sys::error::drain_thread_error_reports());
    if let Some(error) = exporter.error.take() {
        return Err(io_error(error));
    }
    // A message still waiting has no other end in the trace when every ops stream was
    // read to its end; else that end may lie past the window.
    exporter.finish_messages(read_to_their_ends);
    exporter.link_pxn();
    exporter.phase = Phase::Others;
    read_one_by_one(anchor, &others, &mut exporter).map_err(|e| unreadable(e.to_string()))?;
    drop(otf2_sys::error::drain_thread_error_reports());
    if let Some(error) = exporter.error.take() {
        return Err(io_error(error));
    }
    let stats = exporter.stats;
    let window_ns = (
        clock.ns(range.start.max(clock.offset)),
        clock.ns(range.end.min(trace_end)),
    );
    let other_data = serde_json::json!({
        "generator": format!("nccl-scorep export {}", env!("CARGO_PKG_VERSION")),
        "source": anchor.display().to_string(),
        "time_unit": "ts: microseconds since the trace's start",
        "trace_start_ticks": clock.offset,
        "ticks_per_second": clock.resolution,
        "window_start_us": window_ns.0 as f64 / 1e3,
        "window_end_us": window_ns.1 as f64 / 1e3,
        "max_events": max_events,
        "processes": processes.map(ToString::to_string),
        "cut": cut.map(|c| serde_json::json!({
            "end_us": clock.ns(c.end) as f64 / 1e3,
            "window_slice_events": c.window_events,
            "kept_slice_events": c.kept_events,
        })),
        "slice_events": json.slice_events,
        "p2p_flows": stats.p2p_flows,
        "pxn_flows": stats.pxn_flows,
        "unmatched_messages": stats.unmatched_messages,
        "links_back_in_time": stats.backwards_links,
        "pxn_unlinked": stats.pxn_unlinked,
        "unclosed_intervals": stats.unclosed,
    });
    let (slice_events, flow_events) = (json.slice_events, json.flow_events);
    let bytes = json.finish(&other_data).map_err(io_error)?;
    Ok(Outcome {
        bytes,
        slice_events,
        flow_events,
        stats,
        cut,
        window_ns,
    })
}

/// Reads the events of each of `locations`, one location after the other.
fn read_one_by_one<W: Write>(
    anchor: &Path,
    locations: &[u64],
    exporter: &mut Exporter<'_, W>,
) -> Result<bool, otf2_sys::Error> {
    let mut to_their_ends = true;
    crate::profile::each_location(anchor, locations, |location, events| {
        exporter.restart();
        to_their_ends &= !events.read_all(exporter)?.interrupted;
        exporter.finish_locations(&[location]);
        Ok(exporter.error.is_none())
    })?;
    Ok(to_their_ends)
}

/// Seconds, exact to the nanosecond.
fn seconds(ns: i64) -> String {
    format!("{:.9}", ns as f64 / 1e9)
}

/// The message about a cut: what was kept and how to see the rest.
fn describe_cut(cut: &Cut, outcome: &Outcome, max_events: u64) -> String {
    let (start, end) = outcome.window_ns;
    // The next part of the same length.
    let next_end = end + (end - start).max(1);
    format!(
        "the window holds {} slice events, more than --max-events {max_events}: kept the {} \
         events of the intervals that begin between {} s and {} s after the trace's start; \
         export the next part with --window {}s:{}s, or raise --max-events (docs/export.md \
         says how big a file the viewers open)",
        cut.window_events,
        cut.kept_events,
        seconds(start),
        seconds(end),
        seconds(end + 1),
        seconds(next_end),
    )
}

/// One line about a written export.
fn describe(outcome: &Outcome, target: Option<&Path>) -> String {
    let place = target.map_or_else(|| "stdout".to_owned(), |t| t.display().to_string());
    let stats = &outcome.stats;
    let mut line = format!(
        "Chrome trace written to {place}: {} slice events, {} flows ({} messages, {} PXN \
         links), {:.1} MB; open it in https://ui.perfetto.dev or chrome://tracing",
        outcome.slice_events,
        outcome.flow_events / 2,
        stats.p2p_flows,
        stats.pxn_flows,
        outcome.bytes as f64 / 1e6
    );
    let mut notes = Vec::new();
    if stats.unmatched_messages > 0 {
        notes.push(format!(
            "{} messages without their other end",
            stats.unmatched_messages
        ));
    }
    if stats.backwards_links > 0 {
        notes.push(format!(
            "{} links left out that would go back in time (host clocks)",
            stats.backwards_links
        ));
    }
    if stats.pxn_unlinked > 0 {
        notes.push(format!(
            "{} PXN proxy operations whose operation is not in the export",
            stats.pxn_unlinked
        ));
    }
    if stats.unclosed > 0 {
        notes.push(format!(
            "{} intervals the trace never closed (ended at their location's last event)",
            stats.unclosed
        ));
    }
    if !notes.is_empty() {
        line.push_str(&format!("\n  {}", notes.join("; ")));
    }
    line
}
