//! `nccl-scorep validate <archive>`: reads an OTF2 archive with the OTF2 C reader and checks
//! what `otf2-print` lets through (see `docs/validate.md`):
//! references that do not resolve, time going back, unbalanced Enter/Leave, unpaired
//! MpiCollectiveBegin/End, event counts that differ from the Location definitions, events
//! outside the ClockProperties range, communicator members with different numbers of
//! collective records, and sends without receives.
//!
//! This file is the checks and the report. The archive is read through `otf2_sys::read`
//! (child module `read`: failures and OTF2's reports become problems); the definitions are
//! its model, `GlobalDefs`, which the child module `defs` adds the checks' lookups to.

use std::collections::{BTreeMap, HashMap};
use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};

use otf2_sys::read::{Def, GlobalDefs, Group, Reader};
use otf2_sys::{
    OTF2_GROUP_TYPE_COMM_GROUP, OTF2_GROUP_TYPE_COMM_LOCATIONS, OTF2_GROUP_TYPE_COMM_SELF,
    OTF2_GROUP_TYPE_LOCATIONS, OTF2_GROUP_TYPE_REGIONS, OTF2_UNDEFINED_COMM, OTF2_UNDEFINED_GROUP,
    OTF2_UNDEFINED_LOCATION_GROUP, OTF2_UNDEFINED_STRING, OTF2_UNDEFINED_SYSTEM_TREE_NODE,
    OTF2_UNDEFINED_UINT32,
};
use serde::Serialize;

mod defs;
mod read;

use defs::{duplicate_message, Lookup};

/// Findings printed per check and severity in the text report.
const PRINTED_PER_CHECK: usize = 20;
/// Findings kept per check and severity (the JSON lists them); later ones are only counted.
const KEPT_PER_CHECK: usize = 1000;
/// Locations read per opening of the archive unless `--batch` says otherwise.
pub const DEFAULT_BATCH: u32 = crate::profile::LOCATIONS_PER_OPENING as u32;

// ---------------------------------------------------------------------------------------
// The report
// ---------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// The check a finding comes from, in report order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Check {
    /// Errors and warnings OTF2 reported, and OTF2 calls that failed.
    Otf2,
    /// Duplicate definitions, the anchor's location count, ClockProperties present.
    Definitions,
    /// Every reference resolves (check 1).
    References,
    /// Timestamps never decrease on a location (check 2).
    TimeOrder,
    /// Enter/Leave nest properly (check 3).
    Nesting,
    /// MpiCollectiveBegin/End alternate, inside a region (check 4).
    Collectives,
    /// Every location's events can be read, as many as its definition says (check 5).
    Events,
    /// Events lie within the ClockProperties range (check 6).
    ClockRange,
    /// Every member of a communicator has the same number of collective records (check 7).
    CollectiveCounts,
    /// As many sends as receives per (comm, sender, receiver, tag) (check 8).
    Messages,
}

impl Check {
    fn name(self) -> &'static str {
        match self {
            Check::Otf2 => "otf2",
            Check::Definitions => "definitions",
            Check::References => "references",
            Check::TimeOrder => "time-order",
            Check::Nesting => "nesting",
            Check::Collectives => "collectives",
            Check::Events => "events",
            Check::ClockRange => "clock-range",
            Check::CollectiveCounts => "collective-counts",
            Check::Messages => "messages",
        }
    }

    fn title(self) -> &'static str {
        match self {
            Check::Otf2 => "OTF2 reports and failed OTF2 calls",
            Check::Definitions => "definitions",
            Check::References => "references resolve",
            Check::TimeOrder => "timestamps never decrease",
            Check::Nesting => "Enter/Leave nesting",
            Check::Collectives => "MpiCollectiveBegin/End pairing",
            Check::Events => "events readable, as many as defined",
            Check::ClockRange => "events inside the ClockProperties range",
            Check::CollectiveCounts => "collective records per communicator member",
            Check::Messages => "sends matched by receives",
        }
    }
}

/// One problem found in the archive.
#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    pub severity: Severity,
    pub check: Check,
    /// The location (OTF2 id) the finding is about, if any.
    pub location: Option<u64>,
    /// That location's name from its definition.
    pub location_name: Option<String>,
    /// The event time (clock ticks, after OTF2's clock corrections) the finding is about.
    pub time: Option<u64>,
    pub message: String,
}

/// How many findings one check made.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct CheckTotals {
    pub errors: usize,
    pub warnings: usize,
}

/// What was read: definitions by kind, and events by record type.
#[derive(Debug, Default, Serialize)]
pub struct Counts {
    pub locations: usize,
    pub location_groups: usize,
    pub system_tree_nodes: usize,
    pub regions: usize,
    pub groups: usize,
    pub comms: usize,
    pub strings: usize,
    pub attributes: usize,
    pub paradigms: usize,
    /// Events read, all locations together.
    pub events: u64,
    /// Events by OTF2 record name ("Enter", "MpiCollectiveEnd", …); "Unknown" counts records
    /// this OTF2 version does not know.
    pub events_by_type: BTreeMap<&'static str, u64>,
}

/// The outcome of `nccl-scorep validate`.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The anchor file that was read.
    pub archive: String,
    /// No errors (warnings allowed).
    pub valid: bool,
    pub errors: usize,
    pub warnings: usize,
    pub counts: Counts,
    /// Totals per check (only checks with findings).
    pub checks: BTreeMap<&'static str, CheckTotals>,
    /// The findings, errors first, grouped by check; at most 1000 per check and severity.
    pub findings: Vec<Finding>,
}

/// The archive could not be found or opened at all (exit status 2).
#[derive(Debug)]
pub struct OpenError(pub String);

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for OpenError {}

/// Reads and checks the archive at `path`: its `traces.otf2` anchor file, or a directory
/// holding one. The events are read location after location, the archive opened again for
/// every `batch` locations: OTF2 keeps what it read of a location (its mapping tables and
/// clock offsets) until the archive closes. The report is the same whatever `batch` is.
pub fn validate(path: &Path, batch: usize) -> Result<Report, OpenError> {
    let anchor = find_anchor(path)?;
    // OTF2 reports problems through a process-wide callback; collect them instead of letting
    // OTF2 print them, and start from an empty list.
    otf2_sys::install_error_handler(otf2_sys::error::ignore);
    drop(otf2_sys::error::drain_thread_error_reports());

    let reader = Reader::open(&anchor)
        .map_err(|why| OpenError(format!("cannot open {}: {why}", anchor.display())))?;
    let anchor_locations = read::number_of_locations(&reader);
    let mut problems = Vec::new();
    let defs = read::global_definitions(&reader, &mut problems);
    let mut findings = Findings::default();
    let Some(defs) = defs else {
        read::close(reader, &mut problems);
        findings.add_problems(&GlobalDefs::default(), problems);
        return Ok(findings.into_report(&anchor, Counts::default()));
    };

    read::close(reader, &mut problems);
    findings.add_problems(&defs, std::mem::take(&mut problems));

    check_definitions(&defs, anchor_locations, &mut findings);
    let comms = comm_members(&defs);
    let mut checker = EventChecker::new(&defs, &comms, &mut findings);
    let locations: Vec<u64> = defs.locations.keys().collect();
    read::events(&anchor, &locations, batch, &mut checker);
    let events = checker.finish();

    let mut counts = defs.counts();
    counts.events = events.values().sum();
    counts.events_by_type = events;
    Ok(findings.into_report(&anchor, counts))
}

/// The anchor file for `path`: the file itself, `<dir>/traces.otf2`, or the only `*.otf2`
/// file in the directory.
pub(crate) fn find_anchor(path: &Path) -> Result<PathBuf, OpenError> {
    let metadata = std::fs::metadata(path)
        .map_err(|error| OpenError(format!("{}: {error}", path.display())))?;
    if !metadata.is_dir() {
        return Ok(path.to_path_buf());
    }
    let traces = nccl_scorep_common::RunDir::new(path).archive();
    if traces.is_file() {
        return Ok(traces);
    }
    let entries = std::fs::read_dir(path)
        .map_err(|error| OpenError(format!("{}: {error}", path.display())))?;
    let mut anchors: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "otf2") && p.is_file())
        .collect();
    anchors.sort();
    match anchors.len() {
        1 => Ok(anchors.remove(0)),
        0 => Err(OpenError(format!(
            "no OTF2 archive in {}: it holds no traces.otf2 anchor file",
            path.display()
        ))),
        _ => Err(OpenError(format!(
            "{} holds several OTF2 anchor files ({}): name one",
            path.display(),
            anchors
                .iter()
                .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The findings so far: at most [`KEPT_PER_CHECK`] kept per check and severity, all counted.
#[derive(Debug, Default)]
struct Findings {
    kept: Vec<Finding>,
    totals: BTreeMap<(Severity, Check), usize>,
}

impl Findings {
    fn add(
        &mut self,
        defs: &GlobalDefs,
        severity: Severity,
        check: Check,
        location: Option<u64>,
        time: Option<u64>,
        message: String,
    ) {
        let total = self.totals.entry((severity, check)).or_default();
        *total += 1;
        if *total > KEPT_PER_CHECK {
            return;
        }
        self.kept.push(Finding {
            severity,
            check,
            location,
            location_name: location.and_then(|l| defs.location_name(l)),
            time,
            message,
        });
    }

    fn error(&mut self, defs: &GlobalDefs, check: Check, at: At, message: String) {
        self.add(defs, Severity::Error, check, at.0, at.1, message);
    }

    fn warning(&mut self, defs: &GlobalDefs, check: Check, at: At, message: String) {
        self.add(defs, Severity::Warning, check, at.0, at.1, message);
    }

    fn add_problems(&mut self, defs: &GlobalDefs, problems: Vec<Problem>) {
        for p in problems {
            self.add(defs, p.severity, p.check, p.location, None, p.message);
        }
    }

    fn into_report(mut self, anchor: &Path, counts: Counts) -> Report {
        // Stable: within a check, the order the findings were made in.
        self.kept.sort_by_key(|f| (f.severity, f.check));
        let mut checks: BTreeMap<&'static str, CheckTotals> = BTreeMap::new();
        let (mut errors, mut warnings) = (0, 0);
        for (&(severity, check), &n) in &self.totals {
            let totals = checks.entry(check.name()).or_default();
            match severity {
                Severity::Error => {
                    totals.errors += n;
                    errors += n;
                }
                Severity::Warning => {
                    totals.warnings += n;
                    warnings += n;
                }
            }
        }
        Report {
            archive: anchor.display().to_string(),
            valid: errors == 0,
            errors,
            warnings,
            counts,
            checks,
            findings: self.kept,
        }
    }
}

/// Where a finding is: location and time, each if known.
#[derive(Clone, Copy, Debug)]
struct At(Option<u64>, Option<u64>);

impl At {
    const NOWHERE: At = At(None, None);

    fn location(location: u64) -> At {
        At(Some(location), None)
    }

    fn event(location: u64, time: u64) -> At {
        At(Some(location), Some(time))
    }
}

/// A problem met by the reader (`mod read`): a failed OTF2 step or an OTF2 report.
#[derive(Debug)]
pub(crate) struct Problem {
    pub(crate) severity: Severity,
    pub(crate) check: Check,
    pub(crate) location: Option<u64>,
    pub(crate) message: String,
}

/// The text report.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let c = &report.counts;
    let _ = writeln!(out, "archive: {}", report.archive);
    let _ = writeln!(
        out,
        "definitions: {} locations, {} location groups, {} system tree nodes, {} regions, \
         {} groups, {} comms, {} strings",
        c.locations,
        c.location_groups,
        c.system_tree_nodes,
        c.regions,
        c.groups,
        c.comms,
        c.strings
    );
    let mut by_type: Vec<(&str, u64)> = c.events_by_type.iter().map(|(k, v)| (*k, *v)).collect();
    // Most frequent first; equal counts by name.
    by_type.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let by_type: Vec<String> = by_type.iter().map(|(k, v)| format!("{k} {v}")).collect();
    if by_type.is_empty() {
        let _ = writeln!(out, "events: {}", c.events);
    } else {
        let _ = writeln!(out, "events: {} ({})", c.events, by_type.join(", "));
    }
    for (severity, heading, total) in [
        (Severity::Error, "errors", report.errors),
        (Severity::Warning, "warnings", report.warnings),
    ] {
        if total == 0 {
            continue;
        }
        let _ = writeln!(out, "\n{heading} ({total}):");
        let mut checks: Vec<Check> = report
            .findings
            .iter()
            .filter(|f| f.severity == severity)
            .map(|f| f.check)
            .collect();
        checks.dedup();
        for check in checks {
            let totals = report.checks.get(check.name()).copied().unwrap_or_default();
            let n = match severity {
                Severity::Error => totals.errors,
                Severity::Warning => totals.warnings,
            };
            let _ = writeln!(out, "  {} — {} ({n}):", check.name(), check.title());
            let listed = report
                .findings
                .iter()
                .filter(|f| f.severity == severity && f.check == check);
            let mut printed = 0;
            for f in listed.take(PRINTED_PER_CHECK) {
                let _ = writeln!(out, "    {}", render_finding(f));
                printed += 1;
            }
            if n > printed {
                let _ = writeln!(out, "    ... and {} more", n - printed);
            }
        }
    }
    out.push('\n');
    if report.valid {
        out.push_str("valid");
    } else {
        let _ = write!(
            out,
            "INVALID: {} errors, {} warnings",
            report.errors, report.warnings
        );
    }
    out
}

fn render_finding(f: &Finding) -> String {
    let mut place = String::new();
    if let Some(location) = f.location {
        place = location_label(location, f.location_name.as_deref());
    }
    if let Some(time) = f.time {
        if !place.is_empty() {
            place.push(' ');
        }
        let _ = write!(place, "at t={time}");
    }
    if place.is_empty() {
        f.message.clone()
    } else {
        format!("{place}: {}", f.message)
    }
}

fn location_label(location: u64, name: Option<&str>) -> String {
    match name {
        Some(name) => format!("location {location} {name:?}"),
        None => format!("location {location} (not defined)"),
    }
}

// ---------------------------------------------------------------------------------------
// Checks on the definitions (check 1, and the "definitions" check)
// ---------------------------------------------------------------------------------------

/// Reports the references of one definition (the subject) to others.
struct Refs<'a> {
    defs: &'a GlobalDefs,
    out: &'a mut Findings,
    /// The subject, as messages name it: `Region 3 "compute"`.
    owner: String,
    /// Its position among the definition records.
    seq: u64,
    at: At,
}

impl Refs<'_> {
    fn subject(&mut self, owner: String, seq: u64, at: At) {
        self.owner = owner;
        self.seq = seq;
        self.at = at;
    }

    fn error(&mut self, message: String) {
        let message = format!("{}: {message}", self.owner);
        self.out
            .error(self.defs, Check::References, self.at, message);
    }

    /// A reference to the definition `kind id`, found at position `found` or not at all.
    fn target(&mut self, field: &str, kind: &str, id: u64, found: Option<u64>) {
        match found {
            None => self.error(format!("its {field} is {kind} {id}, which is not defined")),
            Some(target) if target > self.seq => {
                let message = format!(
                    "{}: its {field} is {kind} {id}, which is defined only after it (forward \
                     reference)",
                    self.owner
                );
                self.out
                    .warning(self.defs, Check::References, self.at, message);
            }
            Some(_) => {}
        }
    }

    /// A reference that may be UNDEFINED (`undefined`) when `optional`.
    fn reference(&mut self, field: &str, kind: &str, id: u64, undefined: u64, optional: bool) {
        if id != undefined {
            let found = self.defs.seq_of(kind, id);
            self.target(field, kind, id, found);
        } else if !optional {
            self.error(format!("its {field} is UNDEFINED"));
        }
    }

    /// A string reference; OTF2_UNDEFINED_STRING means "none" and is accepted.
    fn string(&mut self, field: &str, id: u32) {
        let undefined = u64::from(OTF2_UNDEFINED_STRING);
        self.reference(field, "String", u64::from(id), undefined, true);
    }
}

fn check_definitions(defs: &GlobalDefs, anchor_locations: Option<u64>, out: &mut Findings) {
    for duplicate in &defs.duplicates {
        let message = duplicate_message(duplicate);
        out.warning(defs, Check::Definitions, At::NOWHERE, message);
    }
    if defs.clock.is_none() {
        out.warning(
            defs,
            Check::Definitions,
            At::NOWHERE,
            "no ClockProperties definition: event times are not checked against the trace's \
             time range"
                .to_owned(),
        );
    }
    if defs.locations.is_empty() {
        out.warning(
            defs,
            Check::Definitions,
            At::NOWHERE,
            "the archive defines no locations: the trace is empty".to_owned(),
        );
    }
    if let Some(n) = anchor_locations {
        if n != defs.locations.len() as u64 {
            out.error(
                defs,
                Check::Definitions,
                At::NOWHERE,
                format!(
                    "the anchor file announces {n} locations, the definitions have {}",
                    defs.locations.len()
                ),
            );
        }
    }

    let mut refs = Refs {
        defs,
        out,
        owner: String::new(),
        seq: 0,
        at: At::NOWHERE,
    };
    let node_undefined = u64::from(OTF2_UNDEFINED_SYSTEM_TREE_NODE);
    let group_undefined = u64::from(OTF2_UNDEFINED_LOCATION_GROUP);
    for (id, d) in defs.system_tree_nodes.by_id() {
        let v = &d.value;
        refs.subject(defs.owner("SystemTreeNode", id, v.name), d.seq, At::NOWHERE);
        refs.string("name", v.name);
        refs.string("class name", v.class_name);
        let parent = u64::from(v.parent);
        refs.reference("parent", "SystemTreeNode", parent, node_undefined, true);
    }
    for (id, d) in defs.location_groups.by_id() {
        let v = &d.value;
        refs.subject(defs.owner("LocationGroup", id, v.name), d.seq, At::NOWHERE);
        refs.string("name", v.name);
        let parent = u64::from(v.system_tree_parent);
        let field = "system tree parent";
        refs.reference(field, "SystemTreeNode", parent, node_undefined, false);
        let creator = u64::from(v.creating_location_group);
        let field = "creating location group";
        refs.reference(field, "LocationGroup", creator, group_undefined, true);
    }
    for (id, d) in defs.locations.by_id() {
        let v = &d.value;
        refs.subject(defs.owner("Location", id, v.name), d.seq, At::location(id));
        refs.string("name", v.name);
        let group = u64::from(v.location_group);
        refs.reference(
            "location group",
            "LocationGroup",
            group,
            group_undefined,
            false,
        );
    }
    for (id, d) in defs.regions.by_id() {
        let v = &d.value;
        refs.subject(defs.owner("Region", id, v.name), d.seq, At::NOWHERE);
        refs.string("name", v.name);
        refs.string("canonical name", v.canonical_name);
        refs.string("description", v.description);
        refs.string("source file", v.source_file);
    }
    for (id, d) in defs.attributes.by_id() {
        let v = &d.value;
        refs.subject(defs.owner("Attribute", id, v.name), d.seq, At::NOWHERE);
        refs.string("name", v.name);
        refs.string("description", v.description);
    }
    for (id, d) in defs.paradigms.by_id() {
        refs.subject(defs.owner("Paradigm", id, d.value.name), d.seq, At::NOWHERE);
        refs.string("name", d.value.name);
    }
    for (id, d) in defs.groups.by_id() {
        check_group(&mut refs, id, d);
    }
    for (id, d) in defs.comms.by_id() {
        let v = &d.value;
        refs.subject(defs.owner("Comm", id, v.name), d.seq, At::NOWHERE);
        refs.string("name", v.name);
        let undefined = u64::from(OTF2_UNDEFINED_COMM);
        refs.reference("parent", "Comm", u64::from(v.parent), undefined, true);
        let undefined = u64::from(OTF2_UNDEFINED_GROUP);
        refs.reference("group", "Group", u64::from(v.group), undefined, false);
        if let Some(group) = defs.groups.get(&v.group) {
            let t = u32::from(group.group_type);
            if t != OTF2_GROUP_TYPE_COMM_GROUP && t != OTF2_GROUP_TYPE_COMM_SELF {
                refs.error(format!(
                    "its group {} is of type {}, not COMM_GROUP or COMM_SELF",
                    v.group,
                    group_type_name(group.group_type)
                ));
            }
        }
    }
}

fn group_type_name(group_type: u8) -> String {
    match u32::from(group_type) {
        OTF2_GROUP_TYPE_LOCATIONS => "LOCATIONS".to_owned(),
        OTF2_GROUP_TYPE_REGIONS => "REGIONS".to_owned(),
        OTF2_GROUP_TYPE_COMM_LOCATIONS => "COMM_LOCATIONS".to_owned(),
        OTF2_GROUP_TYPE_COMM_GROUP => "COMM_GROUP".to_owned(),
        OTF2_GROUP_TYPE_COMM_SELF => "COMM_SELF".to_owned(),
        other => format!("{other}"),
    }
}

/// `5, 6, 7 and 2 more`.
fn short_list<T: fmt::Display>(items: &[T]) -> String {
    const SHOWN: usize = 8;
    let mut text: Vec<String> = items.iter().take(SHOWN).map(|i| i.to_string()).collect();
    if items.len() > SHOWN {
        text.push(format!("and {} more", items.len() - SHOWN));
    }
    text.join(", ")
}

fn check_group(refs: &mut Refs<'_>, id: u32, d: &Def<Group>) {
    let defs = refs.defs;
    let v = &d.value;
    let owner = format!(
        "{} ({})",
        defs.owner("Group", id, v.name),
        group_type_name(v.group_type)
    );
    refs.subject(owner, d.seq, At::NOWHERE);
    refs.string("name", v.name);
    let (kind, missing): (&str, Vec<u64>) = match u32::from(v.group_type) {
        OTF2_GROUP_TYPE_LOCATIONS | OTF2_GROUP_TYPE_COMM_LOCATIONS => {
            let missing = v.members.iter().copied();
            let missing = missing.filter(|m| !defs.locations.contains_key(m));
            ("Locations", missing.collect())
        }
        OTF2_GROUP_TYPE_REGIONS => {
            let missing = v.members.iter().copied();
            let missing = missing.filter(|m| defs.seq_of("Region", *m).is_none());
            ("Regions", missing.collect())
        }
        OTF2_GROUP_TYPE_COMM_GROUP => {
            match defs.comm_locations(v.paradigm) {
                None => refs.error(format!(
                    "no COMM_LOCATIONS group of paradigm {} is defined, so its ranks name no \
                     location",
                    defs.paradigm_label(v.paradigm)
                )),
                Some((locations_id, locations)) => {
                    let size = locations.members.len() as u64;
                    let beyond: Vec<u64> =
                        v.members.iter().copied().filter(|r| *r >= size).collect();
                    if !beyond.is_empty() {
                        refs.error(format!(
                            "ranks {} are beyond the {size} members of its COMM_LOCATIONS \
                             group {locations_id}",
                            short_list(&beyond)
                        ));
                    }
                }
            }
            return;
        }
        _ => return,
    };
    if !missing.is_empty() {
        refs.error(format!(
            "members {} are not defined {kind}",
            short_list(&missing)
        ));
    }
}

/// Who is in a communicator, by rank.
#[derive(Debug, Default)]
struct CommMembers {
    /// A COMM_SELF communicator: every location is rank 0 of its own.
    self_comm: bool,
    /// The location of each rank (None where the rank names no location).
    by_rank: Vec<Option<u64>>,
    rank_of: HashMap<u64, u32>,
}

impl CommMembers {
    fn size(&self) -> u32 {
        if self.self_comm {
            1
        } else {
            self.by_rank.len() as u32
        }
    }

    fn rank(&self, location: u64) -> Option<u32> {
        if self.self_comm {
            Some(0)
        } else {
            self.rank_of.get(&location).copied()
        }
    }
}

/// The members of every communicator whose group resolves (problems were reported by
/// [`check_definitions`]).
fn comm_members(defs: &GlobalDefs) -> BTreeMap<u32, CommMembers> {
    let mut comms = BTreeMap::new();
    for (id, comm) in defs.comms.by_id() {
        let Some(group) = defs.groups.get(&comm.value.group) else {
            continue;
        };
        let mut members = CommMembers::default();
        match u32::from(group.group_type) {
            OTF2_GROUP_TYPE_COMM_SELF => members.self_comm = true,
            OTF2_GROUP_TYPE_COMM_GROUP => {
                let Some((_, locations)) = defs.comm_locations(group.paradigm) else {
                    continue;
                };
                for (rank, &index) in group.members.iter().enumerate() {
                    let location = usize::try_from(index)
                        .ok()
                        .and_then(|i| locations.members.get(i))
                        .copied();
                    members.by_rank.push(location);
                    if let Some(location) = location {
                        members.rank_of.entry(location).or_insert(rank as u32);
                    }
                }
            }
            _ => continue,
        }
        comms.insert(id, members);
    }
    comms
}

// ---------------------------------------------------------------------------------------
// Checks on the events (checks 1–8)
// ---------------------------------------------------------------------------------------

/// An event as the checks see it: the fields they use.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Event {
    Enter {
        region: u32,
    },
    Leave {
        region: u32,
    },
    CollectiveBegin,
    CollectiveEnd {
        comm: u32,
        root: u32,
    },
    NonBlockingCollectiveComplete {
        comm: u32,
        root: u32,
    },
    Send {
        blocking: bool,
        receiver: u32,
        comm: u32,
        tag: u32,
    },
    Recv {
        blocking: bool,
        sender: u32,
        comm: u32,
        tag: u32,
    },
    MeasurementOnOff,
    /// A record type this OTF2 version does not know.
    Unknown,
    /// Any other record, by its OTF2 name: counted, not checked.
    Other(&'static str),
}

impl Event {
    fn record_name(&self) -> &'static str {
        match self {
            Event::Enter { .. } => "Enter",
            Event::Leave { .. } => "Leave",
            Event::CollectiveBegin => "MpiCollectiveBegin",
            Event::CollectiveEnd { .. } => "MpiCollectiveEnd",
            Event::NonBlockingCollectiveComplete { .. } => "NonBlockingCollectiveComplete",
            Event::Send { blocking: true, .. } => "MpiSend",
            Event::Send {
                blocking: false, ..
            } => "MpiIsend",
            Event::Recv { blocking: true, .. } => "MpiRecv",
            Event::Recv {
                blocking: false, ..
            } => "MpiIrecv",
            Event::MeasurementOnOff => "MeasurementOnOff",
            Event::Unknown => "Unknown",
            Event::Other(name) => name,
        }
    }
}

#[derive(Debug)]
struct Frame {
    /// Unique per location, to tell two visits of one region apart.
    id: u64,
    region: u32,
    time: u64,
}

#[derive(Debug)]
struct OpenCollective {
    time: u64,
    /// The innermost open region at the Begin (None: outside every region).
    frame: Option<u64>,
    region: Option<u32>,
}

#[derive(Debug, Default)]
struct LocationState {
    /// Unresolved references per message: (first time, how many).
    unresolved: BTreeMap<String, (u64, u64)>,
    events: u64,
    last_time: Option<u64>,
    stack: Vec<Frame>,
    frames: u64,
    collective: Option<OpenCollective>,
    outside_clock: u64,
    first_outside_clock: Option<u64>,
}

/// How much of a location's events was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Not even opened: nothing of it is judged.
    Unreadable,
    /// The read stopped early: what is left open and the count are not judged.
    Partly,
    Complete,
}

/// The event checks, fed one location's events at a time in the order of the trace, then
/// [`EventChecker::end_location`]. What a location's own checks need is dropped at its end;
/// what is kept across locations is counts (checks 7 and 8).
struct EventChecker<'a> {
    defs: &'a GlobalDefs,
    comms: &'a BTreeMap<u32, CommMembers>,
    findings: &'a mut Findings,
    /// The ClockProperties range, inclusive.
    clock: Option<(u64, u64)>,
    by_type: BTreeMap<&'static str, u64>,
    /// The locations being read (one, when read from an archive).
    locations: BTreeMap<u64, LocationState>,
    /// Collective records per communicator and location.
    collectives: BTreeMap<u32, BTreeMap<u64, u64>>,
    /// (sends, receives) per (comm, sender rank, receiver rank, tag).
    messages: BTreeMap<(u32, u32, u32, u32), (u64, u64)>,
    /// Locations whose events were read in part.
    partly_read: u64,
}

impl<'a> EventChecker<'a> {
    fn new(
        defs: &'a GlobalDefs,
        comms: &'a BTreeMap<u32, CommMembers>,
        findings: &'a mut Findings,
    ) -> Self {
        EventChecker {
            defs,
            comms,
            findings,
            clock: defs.clock.map(|c| {
                (
                    c.global_offset,
                    c.global_offset.saturating_add(c.trace_length),
                )
            }),
            by_type: BTreeMap::new(),
            locations: BTreeMap::new(),
            collectives: BTreeMap::new(),
            messages: BTreeMap::new(),
            partly_read: 0,
        }
    }

    /// What the reader met (failed steps, OTF2's reports).
    fn problems(&mut self, problems: Vec<Problem>) {
        self.findings.add_problems(self.defs, problems);
    }

    /// A reference that does not resolve; reported once per location and message, with a
    /// count.
    fn unresolved(&mut self, location: u64, time: u64, message: String) {
        let entry = self
            .locations
            .entry(location)
            .or_default()
            .unresolved
            .entry(message)
            .or_insert((time, 0));
        entry.1 += 1;
    }

    /// Check 1 for an event's region.
    fn region_ref(&mut self, location: u64, time: u64, record: &str, region: u32) {
        if !self.defs.regions.contains_key(&region) {
            self.unresolved(
                location,
                time,
                format!("{record} refers to region {region}, which is not defined"),
            );
        }
    }

    /// Check 1 for an event's communicator, and this location's rank in it.
    fn comm_rank(
        &mut self,
        location: u64,
        time: u64,
        record: &str,
        comm: u32,
    ) -> Option<(u32, u32)> {
        let Some(members) = self.comms.get(&comm) else {
            let why = if self.defs.comms.contains_key(&comm) {
                "whose group does not resolve"
            } else {
                "which is not defined"
            };
            self.unresolved(location, time, format!("{record} on comm {comm}, {why}"));
            return None;
        };
        let size = members.size();
        match members.rank(location) {
            Some(rank) => Some((rank, size)),
            None => {
                let comm = self.defs.comm_label(comm);
                self.unresolved(
                    location,
                    time,
                    format!("{record} on {comm}, which this location is not a member of"),
                );
                None
            }
        }
    }

    /// Check 1 for a rank argument (`role`: "with root", "to rank", "from rank").
    #[allow(clippy::too_many_arguments)]
    fn rank_ref(
        &mut self,
        location: u64,
        time: u64,
        record: &str,
        role: &str,
        comm: u32,
        rank: u32,
        size: u32,
    ) {
        if rank >= size {
            let comm = self.defs.comm_label(comm);
            let message = format!("{record} {role} {rank} of {comm}, which has {size} ranks");
            self.unresolved(location, time, message);
        }
    }

    fn event(&mut self, location: u64, time: u64, event: Event) {
        *self.by_type.entry(event.record_name()).or_default() += 1;

        // Check 1: references, and what the aggregate checks 7 and 8 count.
        match event {
            Event::Enter { region } => self.region_ref(location, time, "Enter", region),
            Event::Leave { region } => self.region_ref(location, time, "Leave", region),
            Event::CollectiveEnd { comm, root }
            | Event::NonBlockingCollectiveComplete { comm, root } => {
                let record = event.record_name();
                if let Some((_, size)) = self.comm_rank(location, time, record, comm) {
                    if root != OTF2_UNDEFINED_UINT32 {
                        self.rank_ref(location, time, record, "with root", comm, root, size);
                    }
                    *self
                        .collectives
                        .entry(comm)
                        .or_default()
                        .entry(location)
                        .or_default() += 1;
                }
            }
            Event::Send {
                receiver,
                comm,
                tag,
                ..
            } => {
                let record = event.record_name();
                if let Some((rank, size)) = self.comm_rank(location, time, record, comm) {
                    self.rank_ref(location, time, record, "to rank", comm, receiver, size);
                    self.messages
                        .entry((comm, rank, receiver, tag))
                        .or_default()
                        .0 += 1;
                }
            }
            Event::Recv {
                sender, comm, tag, ..
            } => {
                let record = event.record_name();
                if let Some((rank, size)) = self.comm_rank(location, time, record, comm) {
                    self.rank_ref(location, time, record, "from rank", comm, sender, size);
                    self.messages
                        .entry((comm, sender, rank, tag))
                        .or_default()
                        .1 += 1;
                }
            }
            _ => {}
        }

        let defs = self.defs;
        let out = &mut *self.findings;
        let state = self.locations.entry(location).or_default();
        state.events += 1;
        let at = At::event(location, time);

        // Check 2: time order.
        if let Some(last) = state.last_time {
            if time < last {
                out.error(
                    defs,
                    Check::TimeOrder,
                    at,
                    format!("the timestamp goes back: {time} follows {last}"),
                );
            }
        }
        state.last_time = Some(time);

        // Check 6: the ClockProperties range (summarised per location at the end).
        if let Some((first, last)) = self.clock {
            if time < first || time > last {
                state.outside_clock += 1;
                state.first_outside_clock.get_or_insert(time);
            }
        }

        // Checks 3 and 4: nesting and collective pairing.
        match event {
            Event::Enter { region } => {
                state.frames += 1;
                state.stack.push(Frame {
                    id: state.frames,
                    region,
                    time,
                });
            }
            Event::Leave { region } => leave(defs, out, state, at, region),
            Event::CollectiveBegin => {
                if let Some(open) = &state.collective {
                    out.error(
                        defs,
                        Check::Collectives,
                        at,
                        format!(
                            "MpiCollectiveBegin while the MpiCollectiveBegin at t={} has not \
                             ended",
                            open.time
                        ),
                    );
                }
                let top = state.stack.last();
                if top.is_none() {
                    out.error(
                        defs,
                        Check::Collectives,
                        at,
                        "MpiCollectiveBegin outside any region (no Enter is open)".to_owned(),
                    );
                }
                state.collective = Some(OpenCollective {
                    time,
                    frame: top.map(|f| f.id),
                    region: top.map(|f| f.region),
                });
            }
            Event::CollectiveEnd { comm, .. } => {
                let top = state.stack.last();
                match state.collective.take() {
                    None => out.error(
                        defs,
                        Check::Collectives,
                        at,
                        format!(
                            "MpiCollectiveEnd on {} without a MpiCollectiveBegin before it",
                            defs.comm_label(comm)
                        ),
                    ),
                    Some(open) if open.frame.is_some() && open.frame != top.map(|f| f.id) => {
                        let here = top.map_or("outside any region".to_owned(), |f| {
                            format!("in {}", defs.region_label(f.region))
                        });
                        let there = open.region.map_or(String::new(), |r| defs.region_label(r));
                        out.error(
                            defs,
                            Check::Collectives,
                            at,
                            format!(
                                "MpiCollectiveEnd {here}, but its MpiCollectiveBegin at t={} \
                                 was in another visit of {there}",
                                open.time
                            ),
                        );
                    }
                    Some(_) => {}
                }
                if top.is_none() {
                    out.error(
                        defs,
                        Check::Collectives,
                        at,
                        "MpiCollectiveEnd outside any region (no Enter is open)".to_owned(),
                    );
                }
            }
            _ => {}
        }
    }

    /// The end of a location's events: its unresolved references, its events outside the
    /// clock range and, when all of them were read, what is left open and the count.
    fn end_location(&mut self, location: u64, outcome: Outcome) {
        let defs = self.defs;
        let findings = &mut *self.findings;
        let state = self.locations.remove(&location).unwrap_or_default();
        for (message, (first, count)) in state.unresolved {
            let message = if count > 1 {
                format!("{message} ({count} records, the first shown)")
            } else {
                message
            };
            findings.error(defs, Check::References, At::event(location, first), message);
        }
        // Check 6.
        if let (Some((lo, hi)), Some(first)) = (self.clock, state.first_outside_clock) {
            findings.warning(
                defs,
                Check::ClockRange,
                At::event(location, first),
                format!(
                    "{} of {} events lie outside the ClockProperties range [{lo}, {hi}] \
                     (the first shown)",
                    state.outside_clock, state.events
                ),
            );
        }
        match outcome {
            // Not counted, and not judged on what is missing.
            Outcome::Unreadable => return,
            Outcome::Partly => {
                self.partly_read += 1;
                return;
            }
            Outcome::Complete => {}
        }
        // Check 3: regions never left, innermost first.
        for frame in state.stack.iter().rev() {
            findings.error(
                defs,
                Check::Nesting,
                At::event(location, frame.time),
                format!(
                    "{} is entered at t={} and never left",
                    defs.region_label(frame.region),
                    frame.time
                ),
            );
        }
        // Check 4.
        if let Some(open) = &state.collective {
            findings.error(
                defs,
                Check::Collectives,
                At::event(location, open.time),
                format!(
                    "the MpiCollectiveBegin at t={} has no MpiCollectiveEnd",
                    open.time
                ),
            );
        }
        // Check 5: as many events as its Location definition says.
        if let Some(def) = defs.locations.get(&location) {
            let expected = def.number_of_events;
            if expected != 0 && state.events != expected {
                findings.error(
                    defs,
                    Check::Events,
                    At::location(location),
                    format!(
                        "its Location definition says {expected} events, {} were read",
                        state.events
                    ),
                );
            }
        }
    }

    /// The end of the trace: the locations not ended yet end here, and the checks across
    /// locations run when every location that could be read was read to its end (the
    /// unreadable ones are not counted). Returns the event counts by record type.
    fn finish(mut self) -> BTreeMap<&'static str, u64> {
        let left: Vec<u64> = self.locations.keys().copied().collect();
        for location in left {
            self.end_location(location, Outcome::Complete);
        }
        let defs = self.defs;
        let findings = &mut *self.findings;
        if self.partly_read > 0 {
            // What is left open, and the counts, say nothing about a trace read in part.
            findings.warning(
                defs,
                Check::Events,
                At::NOWHERE,
                format!(
                    "the events were not read to the end on {} locations: their regions and \
                     collectives left open and their event counts, the collective counts and \
                     sends without receives are not checked",
                    self.partly_read
                ),
            );
            return self.by_type;
        }

        // Check 7: the same number of collective records on every member.
        for (&comm, members) in self.comms {
            let Some(counted) = self.collectives.get(&comm) else {
                continue;
            };
            if members.self_comm {
                continue;
            }
            let mut locations: Vec<u64> = members.by_rank.iter().flatten().copied().collect();
            locations.sort_unstable();
            locations.dedup();
            let per_member: Vec<(u64, u64)> = locations
                .iter()
                .map(|l| (*l, counted.get(l).copied().unwrap_or(0)))
                .collect();
            let mut frequency: BTreeMap<u64, usize> = BTreeMap::new();
            for (_, n) in &per_member {
                *frequency.entry(*n).or_default() += 1;
            }
            if frequency.len() <= 1 {
                continue;
            }
            // The most common count (the larger one on a tie) is the reference.
            let (usual, with_usual) = frequency
                .iter()
                .max_by_key(|(n, members)| (**members, **n))
                .map(|(n, m)| (*n, *m))
                .unwrap_or_default();
            let differing: Vec<String> = per_member
                .iter()
                .filter(|(_, n)| *n != usual)
                .map(|(l, n)| format!("{} has {n}", defs.location_label(*l)))
                .collect();
            findings.warning(
                defs,
                Check::CollectiveCounts,
                At::NOWHERE,
                format!(
                    "{}: members have different numbers of collective records: {with_usual} of \
                     {} have {usual}; {}",
                    defs.comm_label(comm),
                    per_member.len(),
                    short_list(&differing)
                ),
            );
        }

        // Check 8: as many receives as sends.
        for (&(comm, sender, receiver, tag), &(sends, receives)) in &self.messages {
            if sends == receives {
                continue;
            }
            let members = self.comms.get(&comm);
            let who = |rank: u32| -> String {
                match members.and_then(|m| m.by_rank.get(rank as usize).copied().flatten()) {
                    Some(location) => format!("rank {rank} ({})", defs.location_label(location)),
                    None => format!("rank {rank}"),
                }
            };
            findings.warning(
                defs,
                Check::Messages,
                At::NOWHERE,
                format!(
                    "{}: {} → {}, tag {tag}: {sends} sends but {receives} receives",
                    defs.comm_label(comm),
                    who(sender),
                    who(receiver)
                ),
            );
        }

        self.by_type
    }
}

/// Check 3 (and 4) for a Leave.
fn leave(defs: &GlobalDefs, out: &mut Findings, state: &mut LocationState, at: At, region: u32) {
    let Some(top) = state.stack.last() else {
        out.error(
            defs,
            Check::Nesting,
            at,
            format!(
                "Leave of {} while no region is open",
                defs.region_label(region)
            ),
        );
        return;
    };
    let pop_to = if top.region == region {
        state.stack.len() - 1
    } else {
        out.error(
            defs,
            Check::Nesting,
            at,
            format!(
                "Leave of {}, but the innermost open region is {} (entered at t={})",
                defs.region_label(region),
                defs.region_label(top.region),
                top.time
            ),
        );
        // Leaving an outer region closes the inner ones too; a region that is not open at
        // all changes nothing.
        match state.stack.iter().rposition(|f| f.region == region) {
            Some(position) => position,
            None => return,
        }
    };
    for frame in state.stack.drain(pop_to..).rev() {
        let open_inside = state
            .collective
            .as_ref()
            .is_some_and(|c| c.frame == Some(frame.id));
        if open_inside {
            let begin = state.collective.take().map_or(0, |c| c.time);
            out.error(
                defs,
                Check::Collectives,
                at,
                format!(
                    "Leave of {} while the MpiCollectiveBegin at t={begin} inside it has not \
                     ended",
                    defs.region_label(frame.region)
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use otf2_sys::read::{
        ClockProperties, Comm, GlobalDefinition, Location, LocationGroup, Region, StringDef,
        SystemTreeNode,
    };
    use otf2_sys::{
        OTF2_LOCATION_GROUP_TYPE_PROCESS, OTF2_LOCATION_TYPE_CPU_THREAD, OTF2_PARADIGM_USER,
        OTF2_REGION_ROLE_FUNCTION,
    };

    fn location(
        id: u64,
        name: u32,
        number_of_events: u64,
        location_group: u32,
    ) -> GlobalDefinition {
        GlobalDefinition::Location(Location {
            id,
            name,
            location_type: OTF2_LOCATION_TYPE_CPU_THREAD as u8,
            number_of_events,
            location_group,
        })
    }

    fn region(id: u32, name: u32) -> GlobalDefinition {
        let none = OTF2_UNDEFINED_STRING;
        GlobalDefinition::Region(Region {
            id,
            name,
            canonical_name: name,
            description: none,
            role: OTF2_REGION_ROLE_FUNCTION as u8,
            paradigm: OTF2_PARADIGM_USER as u8,
            flags: 0,
            source_file: none,
            begin_line: 0,
            end_line: 0,
        })
    }

    /// Two locations (0, 1) in one comm (0) of two ranks, regions 0 "main" and 1 "coll",
    /// ClockProperties [0, 1000].
    fn defs() -> GlobalDefs {
        let mut d = GlobalDefs::default();
        let strings = ["", "main", "coll", "node", "p", "rank 0", "rank 1", "world"];
        for (id, s) in strings.iter().enumerate() {
            let text = (*s).to_owned();
            d.add(&GlobalDefinition::String(StringDef {
                id: id as u32,
                text,
            }));
        }
        d.add(&GlobalDefinition::SystemTreeNode(SystemTreeNode {
            id: 0,
            name: 3,
            class_name: 3,
            parent: OTF2_UNDEFINED_SYSTEM_TREE_NODE,
        }));
        d.add(&GlobalDefinition::LocationGroup(LocationGroup {
            id: 0,
            name: 4,
            group_type: OTF2_LOCATION_GROUP_TYPE_PROCESS as u8,
            system_tree_parent: 0,
            creating_location_group: OTF2_UNDEFINED_LOCATION_GROUP,
        }));
        for l in 0..2u64 {
            d.add(&location(l, 5 + l as u32, 0, 0));
        }
        for (id, name) in [(0, 1), (1, 2)] {
            d.add(&region(id, name));
        }
        let mpi = otf2_sys::OTF2_PARADIGM_MPI as u8;
        for (id, group_type) in [
            (0, OTF2_GROUP_TYPE_COMM_LOCATIONS),
            (1, OTF2_GROUP_TYPE_COMM_GROUP),
        ] {
            d.add(&GlobalDefinition::Group(Group {
                id,
                name: 7,
                group_type: group_type as u8,
                paradigm: mpi,
                flags: 0,
                members: vec![0, 1],
            }));
        }
        d.add(&GlobalDefinition::Comm(Comm {
            id: 0,
            name: 7,
            group: 1,
            parent: OTF2_UNDEFINED_COMM,
            flags: 0,
        }));
        d.add(&GlobalDefinition::ClockProperties(ClockProperties {
            timer_resolution: 1_000_000_000,
            global_offset: 0,
            trace_length: 1000,
            realtime_timestamp: 0,
        }));
        d
    }

    fn enter(region: u32) -> Event {
        Event::Enter { region }
    }

    fn leave(region: u32) -> Event {
        Event::Leave { region }
    }

    fn end(root: u32) -> Event {
        Event::CollectiveEnd { comm: 0, root }
    }

    fn send(receiver: u32, tag: u32) -> Event {
        Event::Send {
            blocking: true,
            receiver,
            comm: 0,
            tag,
        }
    }

    fn recv(sender: u32, tag: u32) -> Event {
        Event::Recv {
            blocking: false,
            sender,
            comm: 0,
            tag,
        }
    }

    /// Runs every check on `events`, fed in the order given, as if all were read.
    fn run(defs: &GlobalDefs, events: &[(u64, u64, Event)]) -> Report {
        run_read(defs, events, &[])
    }

    /// As [`run`], with the outcome of some locations' reads (the others are complete).
    fn run_read(
        defs: &GlobalDefs,
        events: &[(u64, u64, Event)],
        outcomes: &[(u64, Outcome)],
    ) -> Report {
        let mut findings = Findings::default();
        check_definitions(defs, Some(2), &mut findings);
        let comms = comm_members(defs);
        let mut checker = EventChecker::new(defs, &comms, &mut findings);
        for &(location, time, event) in events {
            checker.event(location, time, event);
        }
        for location in defs.locations.keys() {
            let outcome = outcomes
                .iter()
                .find(|(l, _)| *l == location)
                .map_or(Outcome::Complete, |(_, o)| *o);
            checker.end_location(location, outcome);
        }
        let by_type = checker.finish();
        let mut counts = defs.counts();
        counts.events = by_type.values().sum();
        counts.events_by_type = by_type;
        findings.into_report(Path::new("t/traces.otf2"), counts)
    }

    /// The rendered findings of one check.
    fn lines(report: &Report, check: Check) -> Vec<String> {
        let findings = report.findings.iter().filter(|f| f.check == check);
        findings.map(render_finding).collect()
    }

    fn has(lines: &[String], text: &str) -> bool {
        lines.iter().any(|line| line.contains(text))
    }

    #[test]
    fn a_balanced_trace_is_valid() {
        let defs = defs();
        let mut events = Vec::new();
        for l in 0..2 {
            let undefined = OTF2_UNDEFINED_UINT32;
            events.extend([
                (l, 10, enter(0)),
                (l, 20, enter(1)),
                (l, 21, Event::CollectiveBegin),
            ]);
            events.extend([
                (l, 30, end(undefined)),
                (l, 40, leave(1)),
                (l, 50, leave(0)),
            ]);
        }
        events.extend([(0, 45, send(1, 3)), (1, 46, recv(0, 3))]);
        // The global event reader's order: by time.
        events.sort_by_key(|&(location, time, _)| (time, location));
        let report = run(&defs, &events);
        let text = render(&report);
        assert_eq!((report.errors, report.warnings), (0, 0), "{text}");
        assert!(report.valid);
        assert_eq!(report.counts.events, 14);
        assert_eq!(report.counts.events_by_type["Enter"], 4);
        assert_eq!(report.counts.events_by_type["MpiIrecv"], 1);
        assert!(text.ends_with("\nvalid"), "{text}");
    }

    #[test]
    fn nesting_pairing_and_reference_errors_say_where() {
        let defs = defs();
        let events = [
            (0, 10, enter(0)),
            (0, 20, enter(1)),
            (0, 21, Event::CollectiveBegin),
            // Leaves "main" while "coll" is innermost, with the collective still open.
            (0, 30, leave(0)),
            (0, 31, end(9)),
            (1, 10, enter(7)),
            (1, 5, leave(7)),
        ];
        let report = run(&defs, &events);
        assert!(!report.valid);
        let nesting = lines(&report, Check::Nesting);
        let wrong_leave = "location 0 \"rank 0\" at t=30: Leave of region 0 \"main\", but the \
                           innermost open region is region 1 \"coll\" (entered at t=20)";
        assert!(has(&nesting, wrong_leave), "{nesting:#?}");
        let collectives = lines(&report, Check::Collectives);
        let open = "while the MpiCollectiveBegin at t=21 inside it has not ended";
        assert!(has(&collectives, open), "{collectives:#?}");
        assert!(
            has(&collectives, "without a MpiCollectiveBegin"),
            "{collectives:#?}"
        );
        let references = lines(&report, Check::References);
        let region = "Enter refers to region 7, which is not defined";
        assert!(has(&references, region), "{references:#?}");
        let root = "root 9 of comm 0 \"world\", which has 2 ranks";
        assert!(has(&references, root), "{references:#?}");
        let time = lines(&report, Check::TimeOrder);
        assert_eq!(
            time,
            ["location 1 \"rank 1\" at t=5: the timestamp goes back: 5 follows 10"]
        );
        let text = render(&report);
        let verdict = format!("INVALID: 8 errors, {} warnings", report.warnings);
        assert!(text.ends_with(&verdict), "{text}");
    }

    #[test]
    fn unequal_collectives_unmatched_sends_and_late_events_are_warnings() {
        let defs = defs();
        let mut events = vec![(0, 10, enter(0)), (1, 10, enter(0))];
        for t in [20, 30] {
            events.extend([(0, t, Event::CollectiveBegin), (0, t + 1, end(0))]);
        }
        events.extend([(1, 20, Event::CollectiveBegin), (1, 21, end(0))]);
        events.extend([(0, 40, send(1, 0)), (0, 50, leave(0)), (1, 50, leave(0))]);
        events.push((1, 2000, Event::Other("Metric")));
        let report = run(&defs, &events);
        assert!(report.valid, "{}", render(&report));
        let counts = lines(&report, Check::CollectiveCounts);
        assert_eq!(counts.len(), 1, "{counts:#?}");
        assert!(
            has(&counts, "1 of 2 have 2; location 1 \"rank 1\" has 1"),
            "{counts:#?}"
        );
        let sends = lines(&report, Check::Messages);
        let unmatched = "rank 0 (location 0 \"rank 0\") → rank 1 (location 1 \"rank 1\"), tag 0: \
                         1 sends but 0 receives";
        assert!(has(&sends, unmatched), "{sends:#?}");
        let clock = lines(&report, Check::ClockRange);
        let outside = "at t=2000: 1 of 5 events lie outside the ClockProperties range [0, 1000]";
        assert!(has(&clock, outside), "{clock:#?}");
        assert_eq!(report.counts.events_by_type["Metric"], 1);
    }

    #[test]
    fn definition_references_and_counts_are_checked() {
        let mut defs = defs();
        defs.add(&location(2, 99, 3, 5));
        defs.add(&region(0, 1));
        let report = run(&defs, &[]);
        let references = lines(&report, Check::References);
        let name = "Location 2: its name is String 99, which is not defined";
        assert!(has(&references, name), "{references:#?}");
        let group = "its location group is LocationGroup 5, which is not defined";
        assert!(has(&references, group), "{references:#?}");
        let definitions = lines(&report, Check::Definitions);
        assert!(
            has(&definitions, "Region 0 is defined more than once"),
            "{definitions:#?}"
        );
        let announced = "the anchor file announces 2 locations, the definitions have 3";
        assert!(has(&definitions, announced), "{definitions:#?}");
        let events = lines(&report, Check::Events);
        let count = "its Location definition says 3 events, 0 were read";
        assert!(has(&events, count), "{events:#?}");
    }

    #[test]
    fn findings_beyond_the_printed_cap_are_counted() {
        let defs = defs();
        let events: Vec<_> = (0..30).map(|t| (0, 100 + t, leave(1))).collect();
        let report = run(&defs, &events);
        assert_eq!(report.errors, 30);
        let text = render(&report);
        assert!(
            text.contains("nesting — Enter/Leave nesting (30):"),
            "{text}"
        );
        assert!(text.contains("    ... and 10 more\n"), "{text}");
    }

    #[test]
    fn a_trace_read_in_part_is_not_judged_on_what_is_missing() {
        let defs = defs();
        let events = [(0, 10, enter(0)), (0, 20, Event::CollectiveBegin)];
        let outcomes = [(0, Outcome::Partly), (1, Outcome::Unreadable)];
        let report = run_read(&defs, &events, &outcomes);
        assert!(report.valid, "{}", render(&report));
        assert_eq!(lines(&report, Check::Nesting), Vec::<String>::new());
        assert_eq!(lines(&report, Check::Collectives), Vec::<String>::new());
        let events = lines(&report, Check::Events);
        assert!(
            has(&events, "the events were not read to the end"),
            "{events:#?}"
        );
    }
}
