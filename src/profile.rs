//! `nccl-scorep profile`: a CUBE4 profile (`profile.cubex`) of a job's merged trace, for
//! Cube and Scalasca users: metrics × call paths × locations, with the time split into
//! host, stream execution, GPU kernel and proxy time, the wait for the last rank of each
//! collective, visits and bytes. What each metric and call path means is in
//! `docs/profile.md`.
//!
//! The trace is read one location at a time ([`read`]), the ops streams twice: first for
//! each collective's latest arrival and end across its ranks, then, with every other
//! location, for the metrics; a large trace by several threads, each a shard of the
//! locations. What it gives is kept in a [`Profile`] whose size grows with
//! locations × call paths and with the collectives, not with events, and written with
//! `nccl-scorep-cube` ([`to_cube`]).

mod read;
mod to_cube;

use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;

use nccl_scorep_common::RunDir;

pub use read::read_trace;
// How locations are told apart and ordered, shared with `nccl-scorep export`.
pub(crate) use read::{
    each_location, location_kind, natural_key, process_of_group, without_lane,
    LOCATIONS_PER_OPENING,
};
pub use to_cube::to_cube;

/// The profile's metrics. Child metrics are parts of their parent (Cube's metric tree).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Metric {
    /// Time in NCCL intervals, exclusive of the call paths inside them.
    Time,
    /// On CPU threads: API calls, enqueues, launches, the proxy thread's states.
    HostTime,
    /// On the communicator ranks' ops streams: operations from the start of their
    /// execution to their completion.
    ExecutionTime,
    /// Of the execution, the part before the communicator's last rank arrived.
    WaitLastRank,
    /// On GPU channels: kernel time.
    KernelTime,
    /// On proxy locations: proxy operations and steps.
    ProxyTime,
    ProxyGpuWait,
    ProxyPeerWait,
    ProxyNetworkWait,
    ProxyFlush,
    Visits,
    BytesSent,
    BytesReceived,
    /// Bytes × the bus-bandwidth factor of NCCL's tests: ÷ execution time = bus bandwidth.
    BusBytes,
    /// Records the plugin's buffers dropped (the trace's gaps).
    LostRecords,
}

impl Metric {
    pub const ALL: [Metric; 15] = [
        Metric::Time,
        Metric::HostTime,
        Metric::ExecutionTime,
        Metric::WaitLastRank,
        Metric::KernelTime,
        Metric::ProxyTime,
        Metric::ProxyGpuWait,
        Metric::ProxyPeerWait,
        Metric::ProxyNetworkWait,
        Metric::ProxyFlush,
        Metric::Visits,
        Metric::BytesSent,
        Metric::BytesReceived,
        Metric::BusBytes,
        Metric::LostRecords,
    ];

    /// The metric's position in [`Metric::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The metric whose part this one is.
    pub fn parent(self) -> Option<Metric> {
        Some(match self {
            Metric::HostTime | Metric::ExecutionTime | Metric::KernelTime | Metric::ProxyTime => {
                Metric::Time
            }
            Metric::WaitLastRank => Metric::ExecutionTime,
            Metric::ProxyGpuWait
            | Metric::ProxyPeerWait
            | Metric::ProxyNetworkWait
            | Metric::ProxyFlush => Metric::ProxyTime,
            _ => return None,
        })
    }

    /// The unique name in the cube.
    pub fn unique_name(self) -> &'static str {
        match self {
            Metric::Time => "time",
            Metric::HostTime => "host_time",
            Metric::ExecutionTime => "execution_time",
            Metric::WaitLastRank => "wait_for_last_rank",
            Metric::KernelTime => "kernel_time",
            Metric::ProxyTime => "proxy_time",
            Metric::ProxyGpuWait => "proxy_gpu_wait",
            Metric::ProxyPeerWait => "proxy_peer_wait",
            Metric::ProxyNetworkWait => "proxy_network_wait",
            Metric::ProxyFlush => "proxy_flush",
            Metric::Visits => "visits",
            Metric::BytesSent => "bytes_sent",
            Metric::BytesReceived => "bytes_received",
            Metric::BusBytes => "bus_bytes",
            Metric::LostRecords => "lost_records",
        }
    }
}

/// What a location of the trace is. Within a process, the profile lists locations in
/// this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LocationKind {
    /// An OS thread that called NCCL (`thread <tid>`).
    Thread,
    /// A communicator rank's ops stream (`<comm> rank <r> ops`).
    OpsStream,
    /// A GPU channel of a communicator rank (`<comm> rank <r> channel <c>`).
    Channel,
    /// A communicator rank's proxy operations and steps (`… proxy lane N`).
    Proxy,
}

impl LocationKind {
    /// The part of the time its intervals are.
    pub fn time_metric(self) -> Metric {
        match self {
            LocationKind::Thread => Metric::HostTime,
            LocationKind::OpsStream => Metric::ExecutionTime,
            LocationKind::Channel => Metric::KernelTime,
            LocationKind::Proxy => Metric::ProxyTime,
        }
    }

    pub fn on_accelerator(self) -> bool {
        matches!(self, LocationKind::OpsStream | LocationKind::Channel)
    }
}

/// One process of the job.
#[derive(Clone, Debug)]
pub struct Process {
    pub name: String,
    pub host: String,
    /// The launcher rank the trace numbers the process by (processes without one: their
    /// position in the order of their pids).
    pub index: u64,
}

/// One location of the profile: a location of the trace, its lanes joined.
#[derive(Clone, Debug)]
pub struct ProfileLocation {
    pub name: String,
    pub process: usize,
    pub kind: LocationKind,
}

/// A call path: a region under its parent, with the parameters that split the region's
/// visits (an operation's algorithm and protocol, its size bucket).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CallPath {
    pub region: usize,
    pub parent: Option<usize>,
    pub parameters: Vec<(String, String)>,
}

/// A region of the call tree.
#[derive(Clone, Debug)]
pub struct ProfileRegion {
    pub name: String,
    pub description: String,
    pub role: String,
}

/// Everything the cube is made of.
#[derive(Debug, Default)]
pub struct Profile {
    pub machine: String,
    pub processes: Vec<Process>,
    pub locations: Vec<ProfileLocation>,
    pub regions: Vec<ProfileRegion>,
    /// Call paths; the first is the root ("NCCL").
    pub call_paths: Vec<CallPath>,
    call_path_index: FxHashMap<CallPath, usize>,
    region_index: FxHashMap<String, usize>,
    /// (call path, location) → each metric's value (seconds for times), by
    /// [`Metric::index`]: one lookup for the several metrics an interval adds to.
    values: FxHashMap<(usize, usize), [f64; Metric::ALL.len()]>,
    /// Collectives whose every rank was found (the wait is exact for them).
    pub complete_collectives: u64,
    /// Collectives some rank's part of which the trace lacks.
    pub incomplete_collectives: u64,
    /// What was read, for the cube's attributes.
    pub source: PathBuf,
    /// One per operation, when asked for (see [`read_trace`]).
    pub samples: Vec<Sample>,
}

/// One operation of the job, for comparing runs: a collective with all its ranks' parts,
/// or one rank's send or receive.
#[derive(Clone, Debug)]
pub struct Sample {
    /// The communicator's name as the trace has it (`comm 0x…` when it has none).
    pub comm: String,
    pub nranks: i64,
    pub func: String,
    /// The size bucket of its bytes.
    pub bucket: String,
    /// A collective's time from its last rank's arrival to its last completion (as the
    /// summary counts it); a send's or receive's execution.
    pub time_ns: f64,
    /// Of that, the wait for the last rank, mean over the ranks.
    pub wait_ns: f64,
    /// Bus bytes per rank (see [`Metric::BusBytes`]).
    pub bus_bytes: f64,
}

impl Profile {
    /// The region named `name`, defined on first use.
    pub fn region(&mut self, name: &str, description: &str, role: &str) -> usize {
        if let Some(&index) = self.region_index.get(name) {
            return index;
        }
        let index = self.regions.len();
        self.regions.push(ProfileRegion {
            name: name.to_owned(),
            description: description.to_owned(),
            role: role.to_owned(),
        });
        self.region_index.insert(name.to_owned(), index);
        index
    }

    /// The call path of `region` under `parent` with `parameters`, defined on first use.
    pub fn call_path(
        &mut self,
        region: usize,
        parent: Option<usize>,
        parameters: Vec<(String, String)>,
    ) -> usize {
        let path = CallPath {
            region,
            parent,
            parameters,
        };
        if let Some(&index) = self.call_path_index.get(&path) {
            return index;
        }
        let index = self.call_paths.len();
        self.call_paths.push(path.clone());
        self.call_path_index.insert(path, index);
        index
    }

    /// Adds `value` to a metric at a call path and location.
    pub fn add(&mut self, metric: Metric, call_path: usize, location: usize, value: f64) {
        if value != 0.0 {
            self.values
                .entry((call_path, location))
                .or_insert([0.0; Metric::ALL.len()])[metric.index()] += value;
        }
    }

    /// An empty profile of the same job (machine, processes, locations, source) for one
    /// reading thread, to be [absorbed](Profile::absorb) into this one.
    fn for_a_reader(&self) -> Profile {
        Profile {
            machine: self.machine.clone(),
            processes: self.processes.clone(),
            locations: self.locations.clone(),
            source: self.source.clone(),
            ..Profile::default()
        }
    }

    /// Adds what one reading thread found, made by [`Profile::for_a_reader`]; returns
    /// where each of its call paths is in this profile. Its regions and call paths new
    /// here are defined in the order it found them, so reading the locations in contiguous
    /// shards and absorbing the shards in order gives the order one reader would.
    fn absorb(&mut self, part: Profile) -> Vec<usize> {
        let regions: Vec<usize> = part
            .regions
            .iter()
            .map(|r| self.region(&r.name, &r.description, &r.role))
            .collect();
        let mut call_paths = Vec::with_capacity(part.call_paths.len());
        for path in part.call_paths {
            // A call path's parent is defined before it.
            let parent = path.parent.map(|p| call_paths[p]);
            call_paths.push(self.call_path(regions[path.region], parent, path.parameters));
        }
        // The first shard's call paths are this profile's (it has only the root yet): its
        // values are taken as they are, instead of copied while both are in memory.
        let same_paths = call_paths.iter().enumerate().all(|(i, &path)| i == path);
        if same_paths && self.values.is_empty() {
            self.values = part.values;
        } else {
            self.add_values(part.values, &call_paths);
        }
        self.complete_collectives += part.complete_collectives;
        self.incomplete_collectives += part.incomplete_collectives;
        self.samples.extend(part.samples);
        call_paths
    }

    /// Adds `values` whose call paths are `call_paths` here.
    fn add_values(
        &mut self,
        values: FxHashMap<(usize, usize), [f64; Metric::ALL.len()]>,
        call_paths: &[usize],
    ) {
        for ((call_path, location), row) in values {
            let sums = self
                .values
                .entry((call_paths[call_path], location))
                .or_insert([0.0; Metric::ALL.len()]);
            for (sum, value) in sums.iter_mut().zip(row) {
                *sum += value;
            }
        }
    }

    /// Every non-zero value.
    pub fn values(&self) -> impl Iterator<Item = ((Metric, usize, usize), f64)> + '_ {
        self.values
            .iter()
            .flat_map(|(&(call_path, location), row)| {
                Metric::ALL
                    .into_iter()
                    .zip(row)
                    .filter(|(_, &value)| value != 0.0)
                    .map(move |(metric, &value)| ((metric, call_path, location), value))
            })
    }
}

/// The merged trace to profile: `path` itself when it is an anchor file, else the run
/// directory's (or archive directory's) `traces.otf2`.
pub fn archive_of(path: &Path) -> Result<PathBuf, String> {
    if path.is_file() {
        return Ok(path.to_path_buf());
    }
    if !path.exists() {
        return Err(format!("{} does not exist", path.display()));
    }
    let run = RunDir::new(path);
    let anchor = run.archive();
    if anchor.is_file() {
        return Ok(anchor);
    }
    if run.parts_dir().is_dir() {
        return Err(format!(
            "{} has parts but no merged trace: run `nccl-scorep merge {}` first",
            path.display(),
            path.display()
        ));
    }
    Err(format!(
        "no trace in {} (neither traces.otf2 nor a run directory's parts/)",
        path.display()
    ))
}

/// Reads the trace at `path` (see [`archive_of`]) with `threads` threads (None: as many
/// as [`read::reading_threads`] says) and writes its profile to `output` (default:
/// `profile.cubex` beside the trace). Returns the profile and where it went.
pub fn write_profile(
    path: &Path,
    output: Option<&Path>,
    threads: Option<usize>,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<(Profile, PathBuf), String> {
    let anchor = archive_of(path)?;
    let profile = read_trace(&anchor, false, threads, progress)?;
    let target = match output {
        Some(output) => output.to_path_buf(),
        None => anchor.with_file_name(nccl_scorep_common::run_dir::PROFILE_FILE),
    };
    let cube = to_cube(&profile).map_err(|e| format!("cannot build the profile: {e}"))?;
    cube.write(&target)
        .map_err(|e| format!("cannot write {}: {e}", target.display()))?;
    Ok((profile, target))
}

/// One line about a written profile.
pub fn describe(profile: &Profile, target: &Path) -> String {
    format!(
        "profile written to {}: {} call paths, {} locations of {} processes, {} collectives \
         ({} with a rank missing)",
        target.display(),
        profile.call_paths.len(),
        profile.locations.len(),
        profile.processes.len(),
        profile.complete_collectives + profile.incomplete_collectives,
        profile.incomplete_collectives
    )
}

#[cfg(test)]
mod tests {
    use super::Metric;

    #[test]
    fn a_metric_s_index_is_its_place_in_the_list_of_all() {
        for (place, metric) in Metric::ALL.into_iter().enumerate() {
            assert_eq!(metric.index(), place, "{metric:?}");
        }
    }
}
