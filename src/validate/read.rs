//! How `validate` reads an archive through `otf2_sys::read`: every step's failure and
//! every report OTF2 makes on the way becomes a [`Problem`] of the report, and the events
//! reach the checks as [`Event`]s.

use otf2_sys::error::{drain_thread_error_reports, ErrorReport};
use otf2_sys::read::{
    CollectiveEnd, During, EventContext, EventVisitor, EventsRead, GlobalDefs, Issue, MpiMessage,
    Reader,
};
use otf2_sys::{reports_line, Error, OTF2_MeasurementMode, Step};

use super::{Check, Event, Problem, Severity};

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

/// Reads the local definitions and all events of `locations`, handing each event to
/// `sink` (location, time, event).
pub(super) fn events(
    reader: &mut Reader,
    locations: &[u64],
    sink: &mut dyn FnMut(u64, u64, Event),
    problems: &mut Vec<Problem>,
) -> EventsRead {
    let read = reader.read_events(locations, &mut Checks(sink));
    for issue in &read.issues {
        match issue {
            Issue::Failed(error) => read_failure(problems, error),
            Issue::Reported {
                during,
                location,
                reports,
            } => {
                let doing = match during {
                    During::LocalDefinitions => "reading the local definitions of this location",
                    During::Events => "reading the events",
                };
                reported(problems, reports.clone(), *location, doing);
            }
        }
    }
    read
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
struct Checks<'s>(&'s mut dyn FnMut(u64, u64, Event));

impl Checks<'_> {
    fn send(&mut self, e: &EventContext<'_>, event: Event) {
        (self.0)(e.location, e.time, event)
    }
}

impl EventVisitor for Checks<'_> {
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
