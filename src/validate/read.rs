//! How `validate` reads an archive through `otf2_sys::read`, one location at a time in
//! batches: every step's failure and every report OTF2 makes on the way becomes a
//! [`Problem`] of the report, and the events reach the checks as [`Event`]s.

use std::collections::BTreeSet;
use std::path::Path;

use otf2_sys::error::{drain_thread_error_reports, ErrorReport};
use otf2_sys::read::{CollectiveEnd, EventContext, EventVisitor, GlobalDefs, MpiMessage, Reader};
use otf2_sys::{reports_line, Error, OTF2_MeasurementMode, Step};

use super::{Check, Event, EventChecker, Outcome, Problem, Severity};

/// The number of locations the anchor file announces, if it can be read.
pub(super) fn number_of_locations(reader: &Reader) -> Option<u64> {
    let n = reader.number_of_locations().ok();
    drop(drain_thread_error_reports());
    n
}

/// OTF2's reports as problems, errors and warnings apart.
fn reported(
    problems: &mut Vec<Problem>,
    reports: Vec<ErrorReport>,
    location: Option<u64>,
    doing: &str,
) {
    let (warnings, errors): (Vec<_>, Vec<_>) =
        reports.into_iter().partition(ErrorReport::is_warning);
    for (severity, kind, reports) in [
        (Severity::Error, "error", errors),
        (Severity::Warning, "warning", warnings),
    ] {
        if !reports.is_empty() {
            problems.push(Problem {
                severity,
                check: Check::Otf2,
                location,
                message: format!("OTF2 {kind} while {doing}: {}", reports_line(&reports)),
            });
        }
    }
}

/// The OTF2 reports made on this thread since the last drain, as problems.
fn drain(problems: &mut Vec<Problem>, location: Option<u64>, doing: &str) {
    reported(problems, drain_thread_error_reports(), location, doing);
}

/// A failed step as a problem of `check`, in `what`'s words with OTF2's code and reports.
fn failed(
    problems: &mut Vec<Problem>,
    check: Check,
    location: Option<u64>,
    what: &str,
    error: &Error,
) {
    problems.push(Problem {
        severity: Severity::Error,
        check,
        location,
        message: error.describe(what),
    });
}

/// Reads the global definitions; None (with problems) when they cannot be read.
pub(super) fn global_definitions(
    reader: &Reader,
    problems: &mut Vec<Problem>,
) -> Option<GlobalDefs> {
    match reader.global_definitions() {
        Ok(defs) => {
            drain(problems, None, "reading the global definitions");
            Some(defs)
        }
        Err(error) => {
            failed(
                problems,
                Check::Otf2,
                None,
                &error.step().to_string(),
                &error,
            );
            None
        }
    }
}

/// Reads the local definitions and the events of `locations` into `checker`, one location
/// after the other, opening the archive again for every `batch` of them. One location's
/// files and event buffer are open at a time, and what OTF2 keeps of the locations read
/// (mapping tables, clock offsets) lasts one batch. A location that cannot be read, or
/// stops early, leaves the others as they are: the report does not depend on `batch`.
pub(super) fn events(
    anchor: &Path,
    locations: &[u64],
    batch: usize,
    checker: &mut EventChecker<'_>,
) {
    // A failure of the archive as a whole is met by every batch: reported once.
    let mut reported_once = BTreeSet::new();
    for locations in locations.chunks(batch.max(1)) {
        let mut archive_problems = Vec::new();
        read_batch(anchor, locations, checker, &mut archive_problems);
        let new: Vec<Problem> = archive_problems
            .into_iter()
            .filter(|p| reported_once.insert((p.severity, p.check, p.message.clone())))
            .collect();
        checker.problems(new);
    }
}

/// One batch of [`events`]: problems of no one location go to `archive_problems`.
fn read_batch(
    anchor: &Path,
    locations: &[u64],
    checker: &mut EventChecker<'_>,
    archive_problems: &mut Vec<Problem>,
) {
    let unreadable = |checker: &mut EventChecker<'_>, locations: &[u64]| {
        for &location in locations {
            checker.end_location(location, Outcome::Unreadable);
        }
    };
    let reader = match Reader::open(anchor) {
        Ok(reader) => reader,
        Err(error) => {
            read_failure(archive_problems, &error);
            drain(archive_problems, None, "opening the archive again");
            return unreadable(checker, locations);
        }
    };
    let mut selected = Vec::with_capacity(locations.len());
    for &location in locations {
        match reader.select_locations(&[location]) {
            Ok(()) => selected.push(location),
            Err(error) => {
                let mut problems = Vec::new();
                read_failure(&mut problems, &error);
                drain(&mut problems, Some(location), "selecting the location");
                checker.problems(problems);
                checker.end_location(location, Outcome::Unreadable);
            }
        }
    }
    let files = match reader.open_event_files() {
        Ok(files) => files,
        Err(error) => {
            read_failure(archive_problems, &error);
            drain(archive_problems, None, "opening the event files");
            return unreadable(checker, &selected);
        }
    };
    let definitions = match reader.open_definition_files() {
        Ok(definitions) => Some(definitions),
        Err(error) => {
            read_failure(archive_problems, &error);
            None
        }
    };
    drain(archive_problems, None, "opening the definition files");
    for location in selected {
        let mut problems = Vec::new();
        let events = files.location(location);
        if let Err(error) = &events {
            read_failure(&mut problems, error);
        }
        if let Some(definitions) = &definitions {
            // OTF2 applies the mapping tables and clock offsets to the events itself. A
            // location without a local definition file has none: OTF2 reports that (kept
            // below), it is not fatal.
            if let Err(error) = definitions.apply(location) {
                read_failure(&mut problems, &error);
            }
        }
        drain(
            &mut problems,
            Some(location),
            "reading the local definitions of this location",
        );
        let outcome = match events {
            Err(_) => Outcome::Unreadable,
            Ok(events) => {
                let outcome = match events.read_all(&mut Checks(&mut *checker)) {
                    Ok(read) if !read.interrupted => Outcome::Complete,
                    Ok(_) => Outcome::Partly,
                    Err(error) => {
                        read_failure(&mut problems, &error);
                        Outcome::Partly
                    }
                };
                drop(events);
                drain(&mut problems, Some(location), "reading the events");
                outcome
            }
        };
        checker.problems(problems);
        checker.end_location(location, outcome);
    }
    drop(definitions);
    drop(files);
    close(reader, archive_problems);
}

/// A step of the event read that failed, as the report words it.
fn read_failure(problems: &mut Vec<Problem>, error: &Error) {
    let step = error.step();
    let (check, location, what) = match (error, step) {
        (Error::Panic { .. }, _) => (Check::Otf2, None, error.to_string()),
        (_, Step::SelectLocation(l)) => (
            Check::Events,
            Some(*l),
            "cannot select the location for reading".to_owned(),
        ),
        (_, Step::EventReader(l)) => (
            Check::Events,
            Some(*l),
            "its events cannot be read (no event reader: is its .evt file missing?)".to_owned(),
        ),
        (_, Step::ReadLocalDefinitions(l)) => (
            Check::Otf2,
            Some(*l),
            "reading its local definitions failed".to_owned(),
        ),
        (_, Step::Open) => {
            let what = format!("cannot open the archive again: {error}");
            problems.push(Problem {
                severity: Severity::Error,
                check: Check::Events,
                location: None,
                message: what,
            });
            return;
        }
        (_, Step::OpenDefinitionFiles) => (Check::Otf2, None, step.to_string()),
        (_, step) => (Check::Events, step.location(), step.to_string()),
    };
    failed(problems, check, location, &what, error);
}

/// Closes the reader, keeping what OTF2 reports on the way.
pub(super) fn close(reader: Reader, problems: &mut Vec<Problem>) {
    if let Err(error) = reader.close() {
        failed(
            problems,
            Check::Otf2,
            None,
            &error.step().to_string(),
            &error,
        );
    }
    drain(problems, None, "closing the archive");
}

/// The checks' side of the event reader: each record as an [`Event`].
struct Checks<'c, 'd>(&'c mut EventChecker<'d>);

impl Checks<'_, '_> {
    fn send(&mut self, e: &EventContext<'_>, event: Event) {
        self.0.event(e.location, e.time, event)
    }
}

impl EventVisitor for Checks<'_, '_> {
    fn wants_attributes(&self) -> bool {
        false
    }

    fn enter(&mut self, e: &EventContext<'_>, region: u32) {
        self.send(e, Event::Enter { region });
    }

    fn leave(&mut self, e: &EventContext<'_>, region: u32) {
        self.send(e, Event::Leave { region });
    }

    fn mpi_collective_begin(&mut self, e: &EventContext<'_>) {
        self.send(e, Event::CollectiveBegin);
    }

    fn mpi_collective_end(&mut self, e: &EventContext<'_>, end: &CollectiveEnd) {
        let (comm, root) = (end.comm, end.root);
        self.send(e, Event::CollectiveEnd { comm, root });
    }

    fn non_blocking_collective_complete(
        &mut self,
        e: &EventContext<'_>,
        end: &CollectiveEnd,
        _request: u64,
    ) {
        let (comm, root) = (end.comm, end.root);
        self.send(e, Event::NonBlockingCollectiveComplete { comm, root });
    }

    fn mpi_send(&mut self, e: &EventContext<'_>, m: &MpiMessage) {
        self.send(e, send(true, m));
    }

    fn mpi_isend(&mut self, e: &EventContext<'_>, m: &MpiMessage, _request: u64) {
        self.send(e, send(false, m));
    }

    fn mpi_recv(&mut self, e: &EventContext<'_>, m: &MpiMessage) {
        self.send(e, recv(true, m));
    }

    fn mpi_irecv(&mut self, e: &EventContext<'_>, m: &MpiMessage, _request: u64) {
        self.send(e, recv(false, m));
    }

    fn measurement_on_off(&mut self, e: &EventContext<'_>, _mode: OTF2_MeasurementMode) {
        self.send(e, Event::MeasurementOnOff);
    }

    fn unknown(&mut self, e: &EventContext<'_>) {
        self.send(e, Event::Unknown);
    }

    fn other(&mut self, e: &EventContext<'_>, record: &'static str) {
        self.send(e, Event::Other(record));
    }
}

fn send(blocking: bool, m: &MpiMessage) -> Event {
    Event::Send {
        blocking,
        receiver: m.peer,
        comm: m.comm,
        tag: m.tag,
    }
}

fn recv(blocking: bool, m: &MpiMessage) -> Event {
    Event::Recv {
        blocking,
        sender: m.peer,
        comm: m.comm,
        tag: m.tag,
    }
}
