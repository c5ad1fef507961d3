//! The typed error of the safe layers ([`crate::read`], [`crate::writing`]): the step that
//! failed, OTF2's error code, and the reports OTF2 made about it on the calling thread.

use std::fmt;
use std::path::PathBuf;

use crate::callbacks::code_name;
use crate::error::{drain_thread_error_reports, ErrorReport};
use crate::OTF2_ErrorCode;

/// A step of reading or writing an archive. Its `Display` is how an error names it
/// ("cannot open the event files"); callers with their own wording match on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    // ---- reading
    /// `OTF2_Reader_Open`.
    Open,
    /// A path for OTF2 that contains a NUL byte.
    NulInPath,
    /// `OTF2_Reader_SetSerialCollectiveCallbacks`.
    CollectiveCallbacks,
    ChunkSizes,
    NumberOfGlobalDefinitions,
    NumberOfLocations,
    FileSubstrate,
    Compression,
    /// Reading the archive's trace file properties.
    Properties,
    /// OTF2 gave no global definition reader (`traces.def` cannot be read).
    GlobalDefinitionReader,
    /// The global definitions stopped after `records` records.
    ReadGlobalDefinitions {
        records: u64,
    },
    SelectLocation(u64),
    OpenEventFiles,
    OpenDefinitionFiles,
    /// OTF2 gave no event reader for the location (is its `.evt` file missing?).
    EventReader(u64),
    /// The location's local definitions could not be read.
    ReadLocalDefinitions(u64),
    /// Switching the location's clock corrections on or off.
    ApplyClockOffsets(u64),
    GlobalEventReader,
    /// Registering a table of callbacks.
    RegisterCallbacks,
    /// The time-ordered read of all selected locations stopped after `events` events.
    ReadEvents {
        events: u64,
    },
    /// One location's events stopped after `events` events.
    ReadLocationEvents {
        location: u64,
        events: u64,
    },
    /// A callback of a running read asked the same reader for another read.
    Busy,
    /// `OTF2_Reader_Close` or `OTF2_Archive_Close`.
    Close,
    // ---- writing
    /// `OTF2_Archive_Open` and its setup (the directory names the archive).
    CreateArchive(PathBuf),
    /// Setting one of the archive's properties ("creator", "description", "machine name").
    ArchiveProperty(&'static str),
    GlobalDefinitionWriter,
    DefinitionWriter(u64),
    EventWriter(u64),
    /// Writing a definition record of the kind named ("Region", "MappingTable").
    WriteDefinition(&'static str),
    /// Writing an event record of the kind named ("Enter").
    WriteEvent(&'static str),
    CloseDefinitionWriter(u64),
    CloseEventWriter(u64),
    CloseDefinitionFiles,
    CloseEventFiles,
    /// Building a mapping table (`OTF2_IdMap`).
    IdMap,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Open => f.write_str("not a readable OTF2 anchor file"),
            Step::NulInPath => f.write_str("the path contains a NUL byte"),
            Step::CollectiveCallbacks => {
                f.write_str("OTF2_Reader_SetSerialCollectiveCallbacks failed")
            }
            Step::ChunkSizes => f.write_str("cannot read the chunk sizes"),
            Step::NumberOfGlobalDefinitions => {
                f.write_str("cannot read the number of global definitions")
            }
            Step::NumberOfLocations => f.write_str("cannot read the number of locations"),
            Step::FileSubstrate => f.write_str("cannot read the file substrate"),
            Step::Compression => f.write_str("cannot read the compression"),
            Step::Properties => f.write_str("cannot read the trace file properties"),
            Step::GlobalDefinitionReader => {
                f.write_str("cannot read the global definitions (traces.def)")
            }
            Step::ReadGlobalDefinitions { records } => write!(
                f,
                "reading the global definitions failed after {records} records"
            ),
            Step::SelectLocation(id) => write!(f, "cannot select location {id}"),
            Step::OpenEventFiles => f.write_str("cannot open the event files"),
            Step::OpenDefinitionFiles => f.write_str("cannot open the local definition files"),
            Step::EventReader(id) => write!(f, "cannot read the events of location {id}"),
            Step::ReadLocalDefinitions(id) => {
                write!(f, "reading the local definitions of location {id} failed")
            }
            Step::ApplyClockOffsets(id) => {
                write!(f, "cannot switch the clock offsets of location {id}")
            }
            Step::GlobalEventReader => {
                f.write_str("cannot read the events (creating the global event reader failed)")
            }
            Step::RegisterCallbacks => f.write_str("cannot register the callbacks"),
            Step::ReadEvents { events } => {
                write!(f, "reading the events stopped after {events} events")
            }
            Step::ReadLocationEvents { location, events } => write!(
                f,
                "reading the events of location {location} failed after {events} events"
            ),
            Step::Busy => f.write_str("the reader is busy with a read that called back"),
            Step::Close => f.write_str("closing the archive failed"),
            Step::CreateArchive(dir) => {
                write!(f, "OTF2 cannot create an archive in {}", dir.display())
            }
            Step::ArchiveProperty(what) => write!(f, "cannot set the archive's {what}"),
            Step::GlobalDefinitionWriter => f.write_str("cannot create the global definitions"),
            Step::DefinitionWriter(id) => {
                write!(f, "cannot create the local definitions of location {id}")
            }
            Step::EventWriter(id) => write!(f, "cannot create the events of location {id}"),
            Step::WriteDefinition(kind) => write!(f, "writing a {kind} definition"),
            Step::WriteEvent(kind) => write!(f, "writing a {kind} event"),
            Step::CloseDefinitionWriter(id) => {
                write!(f, "closing the local definitions of location {id} failed")
            }
            Step::CloseEventWriter(id) => write!(f, "closing the events of location {id} failed"),
            Step::CloseDefinitionFiles => f.write_str("cannot close the local definition files"),
            Step::CloseEventFiles => f.write_str("cannot close the event files"),
            Step::IdMap => f.write_str("cannot build a mapping table"),
        }
    }
}

impl Step {
    /// What was being done, for a panic that stopped it ("reading the events").
    pub fn doing(&self) -> String {
        match self {
            Step::ReadGlobalDefinitions { .. } => "reading the definitions".to_owned(),
            Step::ReadLocalDefinitions(id) => {
                format!("reading the local definitions of location {id}")
            }
            Step::ReadEvents { .. } => "reading the events".to_owned(),
            Step::ReadLocationEvents { location, .. } => {
                format!("reading the events of location {location}")
            }
            other => other.to_string(),
        }
    }

    /// The location the step is about, if any.
    pub fn location(&self) -> Option<u64> {
        match self {
            Step::SelectLocation(id)
            | Step::EventReader(id)
            | Step::ReadLocalDefinitions(id)
            | Step::ApplyClockOffsets(id)
            | Step::DefinitionWriter(id)
            | Step::EventWriter(id)
            | Step::CloseDefinitionWriter(id)
            | Step::CloseEventWriter(id)
            | Step::ReadLocationEvents { location: id, .. } => Some(*id),
            _ => None,
        }
    }
}

/// A step that failed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Error {
    /// An OTF2 call failed: the step, OTF2's error code where the call returns one (a NULL
    /// handle has none), and every report OTF2 made on this thread since the last drain.
    #[error("{}", message(step, *code, reports))]
    Otf2 {
        step: Step,
        code: Option<OTF2_ErrorCode>,
        reports: Vec<ErrorReport>,
    },
    /// A callback panicked; the panic was caught at the C boundary and stopped the step.
    #[error("internal error while {}: {message}", step.doing())]
    Panic { step: Step, message: String },
}

impl Error {
    /// The failure of `step` (with `code`, if the call returned one), taking the reports OTF2
    /// made on this thread since the last drain.
    pub fn otf2(step: Step, code: Option<OTF2_ErrorCode>) -> Error {
        Error::Otf2 {
            step,
            code,
            reports: drain_thread_error_reports(),
        }
    }

    /// A failure that OTF2 was not asked about (no code, no reports).
    pub(crate) fn plain(step: Step) -> Error {
        Error::Otf2 {
            step,
            code: None,
            reports: Vec::new(),
        }
    }

    pub fn step(&self) -> &Step {
        match self {
            Error::Otf2 { step, .. } | Error::Panic { step, .. } => step,
        }
    }

    /// OTF2's error code, where the failed call returned one.
    pub fn code(&self) -> Option<OTF2_ErrorCode> {
        match self {
            Error::Otf2 { code, .. } => *code,
            Error::Panic { .. } => None,
        }
    }

    /// OTF2's reports about the failure.
    pub fn reports(&self) -> &[ErrorReport] {
        match self {
            Error::Otf2 { reports, .. } => reports,
            Error::Panic { .. } => &[],
        }
    }

    /// The message with `what` instead of the step's own wording: `what: CODE (OTF2: …)`.
    /// A panic keeps its own message.
    pub fn describe(&self, what: &str) -> String {
        match self {
            Error::Otf2 { code, reports, .. } => describe(what, *code, reports),
            Error::Panic { .. } => self.to_string(),
        }
    }
}

/// The message of a failed step: `what: CODE (OTF2: …)`; an anchor file OTF2 cannot open
/// says why in parentheses, as `validate` and `summary` have always put it.
fn message(step: &Step, code: Option<OTF2_ErrorCode>, reports: &[ErrorReport]) -> String {
    if *step == Step::Open && code.is_none() {
        let why = if reports.is_empty() {
            "OTF2_Reader_Open failed".to_owned()
        } else {
            reports_line(reports)
        };
        return format!("{step} ({why})");
    }
    describe(&step.to_string(), code, reports)
}

/// `what: CODE (OTF2: …)`, each part only where there is one.
fn describe(what: &str, code: Option<OTF2_ErrorCode>, reports: &[ErrorReport]) -> String {
    let mut message = what.to_owned();
    if let Some(code) = code {
        message = format!("{message}: {}", code_name(code));
    }
    if !reports.is_empty() {
        message = format!("{message} (OTF2: {})", reports_line(reports));
    }
    message
}

/// OTF2's reports about one failure as one line, innermost first as OTF2 makes them:
/// `CODE: message; CODE: message`.
pub fn reports_line(reports: &[ErrorReport]) -> String {
    let texts: Vec<String> = reports
        .iter()
        .map(|r| {
            // Failed system calls come with an errno-like code that has no name.
            if r.code_name.is_empty() || r.code_name.bytes().all(|b| b.is_ascii_digit()) {
                r.message.clone()
            } else {
                format!("{}: {}", r.code_name, r.message)
            }
        })
        .collect();
    texts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(code_name: &str, message: &str) -> ErrorReport {
        ErrorReport {
            code: 1,
            code_name: code_name.into(),
            file: String::new(),
            line: 0,
            function: String::new(),
            message: message.into(),
            thread: std::thread::current().id(),
        }
    }

    #[test]
    fn messages_name_the_step_the_code_and_the_reports() {
        let error = Error::Otf2 {
            step: Step::OpenEventFiles,
            code: None,
            reports: vec![report("POSIX", "no file"), report("17", "exists")],
        };
        assert_eq!(
            error.to_string(),
            "cannot open the event files (OTF2: POSIX: no file; exists)"
        );
        assert_eq!(
            error.describe("no events"),
            "no events (OTF2: POSIX: no file; exists)"
        );
        let panic = Error::Panic {
            step: Step::ReadEvents { events: 3 },
            message: "boom".into(),
        };
        assert_eq!(
            panic.to_string(),
            "internal error while reading the events: boom"
        );
        assert_eq!(Step::EventReader(7).location(), Some(7));
        let open = Error::Otf2 {
            step: Step::Open,
            code: None,
            reports: vec![report("INVALID_DATA", "no chunk header")],
        };
        assert_eq!(
            open.to_string(),
            "not a readable OTF2 anchor file (INVALID_DATA: no chunk header)"
        );
    }
}
