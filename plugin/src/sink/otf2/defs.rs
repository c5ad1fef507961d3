//! The definitions of one process's archive: strings, regions, locations, communicators and
//! attributes, with dense local ids in first-use order (location groups are numbered in the
//! order they are written). They are written when the archive closes (see `writer.rs`),
//! locations in a readable order, and described for users in `docs/trace-schema.md`.

use otf2_sys::*;
use rustc_hash::FxHashMap as HashMap;
use std::collections::BTreeMap;
use std::ffi::CString;
use std::sync::atomic::{AtomicU64, Ordering};

/// The paradigm of every NCCL region and communicator. OTF2 has no NCCL paradigm; NONE is
/// named "NCCL" by a Paradigm definition (Score-P never defines NONE's name).
pub const PARADIGM: OTF2_Paradigm = OTF2_PARADIGM_NONE as OTF2_Paradigm;

/// Generates the attribute table: an enum whose values are the attribute ids, and the
/// (name, description, type) of each.
macro_rules! attributes {
    ($( $variant:ident = $name:literal, $ty:ident, $description:literal; )*) => {
        /// The `nccl.*` attributes, ids 0.. in this order.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u32)]
        pub enum Attr { $( $variant, )* }

        /// (name, description, OTF2 type) of each [`Attr`], in id order.
        pub const ATTRIBUTES: &[(&str, &str, u32)] = &[
            $( ($name, $description, $ty), )*
        ];
    };
}

attributes! {
    CommHash = "nccl.comm_hash", OTF2_TYPE_UINT64, "NCCL communicator hash (commHash), equal on every rank";
    Rank = "nccl.rank", OTF2_TYPE_INT64, "rank in the NCCL communicator";
    NRanks = "nccl.nranks", OTF2_TYPE_INT64, "number of ranks of the NCCL communicator";
    Seq = "nccl.seq", OTF2_TYPE_UINT64, "NCCL sequence number of the operation (per communicator and function)";
    Func = "nccl.func", OTF2_TYPE_STRING, "NCCL function (AllReduce, Send, ...)";
    Count = "nccl.count", OTF2_TYPE_UINT64, "element count as NCCL reports it";
    Datatype = "nccl.datatype", OTF2_TYPE_STRING, "NCCL data type";
    Bytes = "nccl.bytes", OTF2_TYPE_UINT64, "payload bytes of the operation (count x type size)";
    Algo = "nccl.algo", OTF2_TYPE_STRING, "algorithm NCCL chose";
    Proto = "nccl.proto", OTF2_TYPE_STRING, "protocol NCCL chose";
    NChannels = "nccl.nchannels", OTF2_TYPE_UINT64, "channels the operation uses";
    Root = "nccl.root", OTF2_TYPE_INT64, "root rank of a rooted collective";
    Peer = "nccl.peer", OTF2_TYPE_INT64, "peer rank of a point-to-point or proxy operation";
    Channel = "nccl.channel", OTF2_TYPE_UINT64, "NCCL channel";
    Step = "nccl.step", OTF2_TYPE_UINT64, "proxy step number";
    TransSize = "nccl.trans_size", OTF2_TYPE_UINT64, "bytes transferred by the step";
    NSteps = "nccl.nsteps", OTF2_TYPE_UINT64, "steps of the proxy operation";
    ChunkSize = "nccl.chunk_size", OTF2_TYPE_UINT64, "bytes per step of the proxy operation";
    StepsDone = "nccl.steps_done", OTF2_TYPE_UINT64, "proxy steps summed up on the operation (NCCL_SCOREP_STEP_DETAIL=summary)";
    StepsBytes = "nccl.steps_bytes", OTF2_TYPE_UINT64, "bytes the summed-up steps transferred (the sum of their nccl.trans_size)";
    StepsTime = "nccl.steps_ns", OTF2_TYPE_UINT64, "the summed-up steps' durations added up (ns)";
    StepMaxTime = "nccl.step_max_ns", OTF2_TYPE_UINT64, "the longest summed-up step (ns)";
    GpuWait = "nccl.gpu_wait_ns", OTF2_TYPE_UINT64, "time the summed-up steps spent in send: GPU wait and recv: GPU wait (ns)";
    PeerWait = "nccl.peer_wait_ns", OTF2_TYPE_UINT64, "time the summed-up steps spent in send: peer wait (ns)";
    NetworkWait = "nccl.network_wait_ns", OTF2_TYPE_UINT64, "time the summed-up steps spent in send: network wait and recv: network wait (ns)";
    FlushTime = "nccl.flush_ns", OTF2_TYPE_UINT64, "time the summed-up steps spent in recv: flush (ns)";
    Pid = "nccl.pid", OTF2_TYPE_INT64, "process that created the operation (for a proxy operation: PXN when not this one)";
    ParentValue = "nccl.pxn_parent", OTF2_TYPE_UINT64, "the originating process's task handle of a PXN proxy operation";
    Task = "nccl.task", OTF2_TYPE_UINT64, "this process's handle of the operation's task: a PXN proxy operation of another process names it in nccl.pxn_parent, with this process's nccl.pid";
    EnqueueTime = "nccl.enqueue_ns", OTF2_TYPE_UINT64, "when the operation was enqueued (trace clock, before clock offsets)";
    CompleteTime = "nccl.complete_ns", OTF2_TYPE_UINT64, "when its last kernel channel or proxy operation finished (trace clock, before clock offsets)";
    GpuClockError = "nccl.gpu_clock_error_ns", OTF2_TYPE_UINT64, "bound of the GPU-to-host clock conversion error";
    GpuTimeRejected = "nccl.gpu_time_rejected", OTF2_TYPE_STRING, "why NCCL's GPU times were rejected (end_before_start, beyond_host_bounds, clock_jump): the times shown are host-side";
    Closed = "nccl.closed", OTF2_TYPE_STRING, "why the interval ended when NCCL did not stop it";
    Appended = "nccl.appended_ops", OTF2_TYPE_INT64, "proxy operations appended";
    Lost = "nccl.lost_records", OTF2_TYPE_UINT64, "records this thread dropped so far (full ring)";
    GraphCaptured = "nccl.graph_captured", OTF2_TYPE_UINT64, "1 when recorded during CUDA graph capture";
    GroupDepth = "nccl.group_depth", OTF2_TYPE_INT64, "ncclGroup nesting depth";
    Phase = "nccl.phase", OTF2_TYPE_STRING, "kernel phase";
    NetInfo = "nccl.net", OTF2_TYPE_STRING, "net plugin event details";
    HeldBack = "nccl.held_back_ns", OTF2_TYPE_UINT64, "how long this NCCL thread waited for room in its full buffer: the time the plugin held NCCL back (ns)";
}

/// The longest string written (bytes): every definition record must fit in one
/// definition chunk (see `writer::DEFINITION_CHUNK_BYTES`).
pub const MAX_STRING_BYTES: usize = 64 * 1024;

/// `text`, cut at a character boundary to at most [`MAX_STRING_BYTES`].
fn truncated(text: &str) -> &str {
    if text.len() <= MAX_STRING_BYTES {
        return text;
    }
    let mut end = MAX_STRING_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// What a location shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocationKind {
    CpuThread,
    /// Device-side activity (ops stream, kernel channels).
    AcceleratorStream,
}

/// Where a location goes in the order of the definitions: by process (its threads), then
/// by communicator rank (its ops stream, kernel channels, proxy lanes), then the proxy lanes
/// this process progressed for others (PXN). Readers list locations in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LocationOrder {
    Thread,
    OpsStream,
    Channel,
    ProxyLane,
    /// Proxy lanes of another process's communicator rank (or of an unknown one).
    ForeignProxyLane,
}

/// What a region is, for viewers to colour by: each kind is an OTF2 `REGIONS` group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum RegionGroup {
    /// The NCCL API calls of application threads (`ncclAllReduce`, `ncclGroup`, …).
    ApiCalls,
    /// NCCL's enqueueing and launching of work on the host.
    Enqueue,
    /// GPU time: operations on the ops streams, kernel channels and their phases.
    GpuKernels,
    /// Proxy operations, their steps, network-plugin requests, the proxy taking work.
    ProxyOperations,
    /// Waiting: a proxy step's wait states, the proxy thread idle or asleep.
    WaitStates,
}

impl RegionGroup {
    /// The group's name in the trace.
    pub fn name(self) -> &'static str {
        match self {
            RegionGroup::ApiCalls => "NCCL API calls",
            RegionGroup::Enqueue => "NCCL enqueue",
            RegionGroup::GpuKernels => "NCCL GPU kernels",
            RegionGroup::ProxyOperations => "NCCL proxy operations",
            RegionGroup::WaitStates => "NCCL wait states",
        }
    }
}

/// Roles of regions, named after what they are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    Function,
    CollOne2All,
    CollAll2One,
    CollAll2All,
    CollOther,
    Point2Point,
    DataTransfer,
    Code,
    Artificial,
}

impl Role {
    fn otf2(self) -> OTF2_RegionRole {
        (match self {
            Role::Function => OTF2_REGION_ROLE_FUNCTION,
            Role::CollOne2All => OTF2_REGION_ROLE_COLL_ONE2ALL,
            Role::CollAll2One => OTF2_REGION_ROLE_COLL_ALL2ONE,
            Role::CollAll2All => OTF2_REGION_ROLE_COLL_ALL2ALL,
            Role::CollOther => OTF2_REGION_ROLE_COLL_OTHER,
            Role::Point2Point => OTF2_REGION_ROLE_POINT2POINT,
            Role::DataTransfer => OTF2_REGION_ROLE_DATA_TRANSFER,
            Role::Code => OTF2_REGION_ROLE_CODE,
            Role::Artificial => OTF2_REGION_ROLE_ARTIFICIAL,
        }) as OTF2_RegionRole
    }
}

struct RegionDef {
    name: u32,
    description: u32,
    role: Role,
}

struct LocationGroupDef {
    name: u32,
    accelerator: bool,
}

struct LocationDef {
    id: u64,
    name: u32,
    kind: LocationKind,
    group: u32,
    order: LocationOrder,
}

struct CommDef {
    name: u32,
    /// NCCL rank → the location that writes this rank's operations.
    members: BTreeMap<i32, u64>,
}

/// Ids of static texts (NCCL's names, the plugin's region names) by the text's address
/// and length, looked up for nearly every event: a small table indexed by the address
/// answers most lookups without hashing, the map the rest.
struct StaticIds {
    recent: [(usize, usize, u32); STATIC_IDS_RECENT],
    all: HashMap<(usize, usize), u32>,
}

/// Entries of [`StaticIds`]'s table; a power of two.
const STATIC_IDS_RECENT: usize = 64;

impl Default for StaticIds {
    fn default() -> Self {
        StaticIds {
            // No text is at address 0.
            recent: [(0, 0, 0); STATIC_IDS_RECENT],
            all: HashMap::default(),
        }
    }
}

impl StaticIds {
    /// The table entry of a text: its address's low bits above the alignment most texts
    /// have (texts that share the bits take turns).
    fn slot(text: &'static str) -> usize {
        (text.as_ptr() as usize >> 3) & (STATIC_IDS_RECENT - 1)
    }

    #[inline]
    fn get(&mut self, text: &'static str) -> Option<u32> {
        let key = (text.as_ptr() as usize, text.len());
        let slot = Self::slot(text);
        let (address, len, id) = self.recent[slot];
        if (address, len) == key {
            return Some(id);
        }
        let id = *self.all.get(&key)?;
        self.recent[slot] = (key.0, key.1, id);
        Some(id)
    }

    fn insert(&mut self, text: &'static str, id: u32) {
        let key = (text.as_ptr() as usize, text.len());
        self.all.insert(key, id);
        self.recent[Self::slot(text)] = (key.0, key.1, id);
    }
}

/// Everything defined so far, with local ids.
pub struct Definitions {
    strings: Vec<CString>,
    string_ids: HashMap<String, u32>,
    /// Ids of static strings by address and length: no hashing of the text per use.
    static_string_ids: StaticIds,
    regions: Vec<RegionDef>,
    region_ids: HashMap<String, u32>,
    /// Ids of regions with a static name, by the name's address and length.
    static_region_ids: StaticIds,
    /// The members of each region group, in the order they were put there.
    region_groups: BTreeMap<RegionGroup, Vec<u32>>,
    groups: Vec<LocationGroupDef>,
    locations: Vec<LocationDef>,
    comms: Vec<CommDef>,
    comm_ids: HashMap<u64, u32>,
    /// The low 32 bits of every location id (the process's index in the job, or its pid).
    process_index: u32,
    machine: u32,
    node: u32,
    /// Counts every definition added: the writer compares it with the count its last
    /// snapshot of the definitions held.
    version: u64,
}

impl Definitions {
    /// `process` names the process's location group; `node` is the host name.
    pub fn new(process_index: u32, process: &str, node: &str) -> Definitions {
        let mut defs = Definitions {
            strings: Vec::new(),
            string_ids: HashMap::default(),
            static_string_ids: StaticIds::default(),
            regions: Vec::new(),
            region_ids: HashMap::default(),
            static_region_ids: StaticIds::default(),
            region_groups: BTreeMap::new(),
            groups: Vec::new(),
            locations: Vec::new(),
            comms: Vec::new(),
            comm_ids: HashMap::default(),
            process_index,
            machine: 0,
            node: 0,
            version: 0,
        };
        defs.string("");
        defs.intern_fixed();
        defs.machine = defs.string("machine");
        defs.node = defs.string(node);
        let name = defs.string(process);
        defs.groups.push(LocationGroupDef {
            name,
            accelerator: false,
        });
        defs
    }

    fn added(&mut self) {
        self.version += 1;
    }

    /// The count of definitions added so far: it changes whenever one is added.
    pub fn version(&self) -> u64 {
        self.version
    }

    pub fn string(&mut self, text: &str) -> u32 {
        let text = truncated(text);
        if let Some(&id) = self.string_ids.get(text) {
            return id;
        }
        let id = self.strings.len() as u32;
        self.strings
            .push(CString::new(text.replace('\0', "?")).unwrap_or_default());
        self.added();
        self.string_ids.insert(text.to_owned(), id);
        id
    }

    /// [`Definitions::string`] for a static string, found by its address after first use.
    pub fn static_string(&mut self, text: &'static str) -> u32 {
        if let Some(id) = self.static_string_ids.get(text) {
            return id;
        }
        let id = self.string(text);
        self.static_string_ids.insert(text, id);
        id
    }

    /// [`Definitions::region`] for a static name, found by its address after first use.
    pub fn static_region(&mut self, name: &'static str, role: Role, description: &str) -> u32 {
        if let Some(id) = self.static_region_ids.get(name) {
            return id;
        }
        let id = self.region(name, role, description);
        self.static_region_ids.insert(name, id);
        id
    }

    /// [`Definitions::static_region`], put in `group` when it is defined.
    pub fn static_region_in(
        &mut self,
        name: &'static str,
        role: Role,
        description: &str,
        group: RegionGroup,
    ) -> u32 {
        if let Some(id) = self.static_region_ids.get(name) {
            return id;
        }
        let id = self.static_region(name, role, description);
        self.group_region(id, group)
    }

    /// Puts `region` in `group` (once; a region is in one group).
    pub fn group_region(&mut self, region: u32, group: RegionGroup) -> u32 {
        let members = self.region_groups.entry(group).or_default();
        if !members.contains(&region) {
            members.push(region);
            self.string(group.name());
            self.added();
        }
        region
    }

    /// The region named `name` (names are unique within the archive).
    pub fn region(&mut self, name: &str, role: Role, description: &str) -> u32 {
        if let Some(&id) = self.region_ids.get(name) {
            return id;
        }
        let id = self.regions.len() as u32;
        let name_id = self.string(name);
        let description = self.string(description);
        self.regions.push(RegionDef {
            name: name_id,
            description,
            role,
        });
        self.added();
        self.region_ids.insert(name.to_owned(), id);
        id
    }

    /// The process's own location group.
    pub const PROCESS_GROUP: u32 = 0;

    /// A location group for one communicator rank's device activity.
    pub fn accelerator_group(&mut self, name: &str) -> u32 {
        let name = self.string(name);
        self.groups.push(LocationGroupDef {
            name,
            accelerator: true,
        });
        self.added();
        self.groups.len() as u32 - 1
    }

    /// Adds a location; returns its 64-bit id, `(index << 32) | process index` as Score-P
    /// does, so ids of different processes never collide.
    pub fn add_location(
        &mut self,
        name: &str,
        kind: LocationKind,
        group: u32,
        order: LocationOrder,
    ) -> u64 {
        // Counted per process, not per part: a second part of the process (a new
        // init/finalize cycle) continues the numbering, so ids never repeat in a job.
        static NEXT_INDEX: AtomicU64 = AtomicU64::new(0);
        let index = NEXT_INDEX.fetch_add(1, Ordering::Relaxed);
        let id = (index << 32) | u64::from(self.process_index);
        let name = self.string(name);
        self.locations.push(LocationDef {
            id,
            name,
            kind,
            group,
            order,
        });
        self.added();
        id
    }

    /// Gives the location added `index`-th a new name (a thread's role is known only once
    /// its events are all seen).
    pub fn rename_location(&mut self, index: usize, name: &str) {
        let name = self.string(name);
        if let Some(location) = self.locations.get_mut(index) {
            location.name = name;
            self.added();
        }
    }

    pub fn location_ids(&self) -> Vec<u64> {
        self.locations.iter().map(|l| l.id).collect()
    }

    /// The communicator for `key` (the comm hash, or a per-context key when NCCL gave no
    /// hash); created with `name` on first use.
    pub fn comm(&mut self, key: u64, name: &str) -> u32 {
        if let Some(&id) = self.comm_ids.get(&key) {
            return id;
        }
        let id = self.comms.len() as u32;
        let name = self.string(name);
        self.comms.push(CommDef {
            name,
            members: BTreeMap::new(),
        });
        self.added();
        self.comm_ids.insert(key, id);
        id
    }

    /// Records that `location` writes the operations of `rank` in `comm`.
    pub fn comm_member(&mut self, comm: u32, rank: i32, location: u64) {
        if let Some(def) = self.comms.get_mut(comm as usize) {
            if let std::collections::btree_map::Entry::Vacant(member) = def.members.entry(rank) {
                member.insert(location);
                self.version += 1;
            }
        }
    }

    /// Writes every definition; `events` holds each location's number of events.
    /// Returns the number of calls that failed.
    ///
    /// # Safety
    /// `w` is the archive's open global definition writer.
    pub unsafe fn write(&self, w: *mut OTF2_GlobalDefWriter, events: &[u64]) -> u64 {
        let failed = std::cell::Cell::new(0u64);
        let check = |code: OTF2_ErrorCode| {
            if code != OTF2_SUCCESS {
                failed.set(failed.get() + 1);
            }
        };
        // SAFETY: the whole block: `w` is open (caller); ids are dense and every referenced
        // definition is written before its user: strings, paradigm, system tree, location
        // groups, locations, regions, groups, comms, attributes.
        unsafe {
            for (id, text) in self.strings.iter().enumerate() {
                check(OTF2_GlobalDefWriter_WriteString(
                    w,
                    id as u32,
                    text.as_ptr(),
                ));
            }
            let nccl = self.string_ids.get("NCCL").copied();
            if let Some(nccl) = nccl {
                check(OTF2_GlobalDefWriter_WriteParadigm(
                    w,
                    PARADIGM,
                    nccl,
                    OTF2_PARADIGM_CLASS_PROCESS as OTF2_ParadigmClass,
                ));
            }
            let machine_class = self.string_ids["machine"];
            let node_class = self
                .string_ids
                .get("node")
                .copied()
                .unwrap_or(machine_class);
            check(OTF2_GlobalDefWriter_WriteSystemTreeNode(
                w,
                0,
                self.machine,
                machine_class,
                OTF2_UNDEFINED_SYSTEM_TREE_NODE,
            ));
            check(OTF2_GlobalDefWriter_WriteSystemTreeNode(
                w, 1, self.node, node_class, 0,
            ));
            let (group_order, group_id, location_order) = self.readable_order();
            for (id, &index) in group_order.iter().enumerate() {
                let group = &self.groups[index];
                let (kind, creator) = if group.accelerator {
                    (OTF2_LOCATION_GROUP_TYPE_ACCELERATOR, Self::PROCESS_GROUP)
                } else {
                    (
                        OTF2_LOCATION_GROUP_TYPE_PROCESS,
                        OTF2_UNDEFINED_LOCATION_GROUP,
                    )
                };
                check(OTF2_GlobalDefWriter_WriteLocationGroup(
                    w,
                    id as u32,
                    group.name,
                    kind as OTF2_LocationGroupType,
                    1,
                    creator,
                ));
            }
            for &index in &location_order {
                let location = &self.locations[index];
                let kind = match location.kind {
                    LocationKind::CpuThread => OTF2_LOCATION_TYPE_CPU_THREAD,
                    LocationKind::AcceleratorStream => OTF2_LOCATION_TYPE_ACCELERATOR_STREAM,
                };
                check(OTF2_GlobalDefWriter_WriteLocation(
                    w,
                    location.id,
                    location.name,
                    kind as OTF2_LocationType,
                    events.get(index).copied().unwrap_or(0),
                    group_id[location.group as usize],
                ));
            }
            for (id, region) in self.regions.iter().enumerate() {
                check(OTF2_GlobalDefWriter_WriteRegion(
                    w,
                    id as u32,
                    region.name,
                    region.name,
                    region.description,
                    region.role.otf2(),
                    PARADIGM,
                    OTF2_REGION_FLAG_NONE as OTF2_RegionFlag,
                    0,
                    0,
                    0,
                ));
            }
            if !self.comms.is_empty() {
                // One COMM_LOCATIONS group of every member location; each communicator's
                // COMM_GROUP lists positions in it, in NCCL rank order.
                let mut all: Vec<u64> = Vec::new();
                let mut position: HashMap<u64, u64> = HashMap::default();
                for comm in &self.comms {
                    for &location in comm.members.values() {
                        position.entry(location).or_insert_with(|| {
                            all.push(location);
                            all.len() as u64 - 1
                        });
                    }
                }
                let empty = self.string_ids[""];
                let all_name = self.string_ids.get("NCCL ranks").copied().unwrap_or(empty);
                check(OTF2_GlobalDefWriter_WriteGroup(
                    w,
                    0,
                    all_name,
                    OTF2_GROUP_TYPE_COMM_LOCATIONS as OTF2_GroupType,
                    PARADIGM,
                    OTF2_GROUP_FLAG_NONE as OTF2_GroupFlag,
                    all.len() as u32,
                    all.as_ptr(),
                ));
                for (id, comm) in self.comms.iter().enumerate() {
                    let members: Vec<u64> = comm.members.values().map(|l| position[l]).collect();
                    check(OTF2_GlobalDefWriter_WriteGroup(
                        w,
                        id as u32 + 1,
                        comm.name,
                        OTF2_GROUP_TYPE_COMM_GROUP as OTF2_GroupType,
                        PARADIGM,
                        OTF2_GROUP_FLAG_NONE as OTF2_GroupFlag,
                        members.len() as u32,
                        members.as_ptr(),
                    ));
                }
                for (id, comm) in self.comms.iter().enumerate() {
                    check(OTF2_GlobalDefWriter_WriteComm(
                        w,
                        id as u32,
                        comm.name,
                        id as u32 + 1,
                        OTF2_UNDEFINED_COMM,
                        OTF2_COMM_FLAG_NONE as OTF2_CommFlag,
                    ));
                }
            }
            // The region groups follow the communicator groups (0, then one per comm).
            let first_region_group = if self.comms.is_empty() {
                0
            } else {
                self.comms.len() as u32 + 1
            };
            for (index, (group, members)) in self.region_groups.iter().enumerate() {
                let members: Vec<u64> = members.iter().map(|&r| u64::from(r)).collect();
                check(OTF2_GlobalDefWriter_WriteGroup(
                    w,
                    first_region_group + index as u32,
                    self.string_ids[group.name()],
                    OTF2_GROUP_TYPE_REGIONS as OTF2_GroupType,
                    PARADIGM,
                    OTF2_GROUP_FLAG_NONE as OTF2_GroupFlag,
                    members.len() as u32,
                    members.as_ptr(),
                ));
            }
            for (id, (name, description, ty)) in ATTRIBUTES.iter().enumerate() {
                let (Some(&name), Some(&description)) = (
                    self.string_ids.get(*name),
                    self.string_ids.get(*description),
                ) else {
                    failed.set(failed.get() + 1);
                    continue;
                };
                check(OTF2_GlobalDefWriter_WriteAttribute(
                    w,
                    id as u32,
                    name,
                    description,
                    *ty as OTF2_Type,
                ));
            }
        }
        failed.get()
    }

    /// The order the location groups and the locations are written in: the process's
    /// group first, then the communicator ranks' groups by name (numbers as numbers); the
    /// locations by [`LocationOrder`]'s section, then group, then kind, then name. Returns
    /// the group indices in that order, each group's id (its position), and the location
    /// indices in order. Events name locations by id, not by position, so only the
    /// definitions move (location ids stay in creation order); group ids are given anew.
    fn readable_order(&self) -> (Vec<usize>, Vec<u32>, Vec<usize>) {
        use nccl_scorep_common::natural::natural_key;
        let name = |id: u32| {
            self.strings
                .get(id as usize)
                .map_or_else(Vec::new, |s| natural_key(&s.to_string_lossy()))
        };
        let mut groups: Vec<usize> = (0..self.groups.len()).collect();
        groups.sort_by_cached_key(|&g| {
            (
                g != Self::PROCESS_GROUP as usize,
                name(self.groups[g].name),
                g,
            )
        });
        let mut position = vec![0u32; self.groups.len()];
        for (at, &g) in groups.iter().enumerate() {
            position[g] = at as u32;
        }
        let mut locations: Vec<usize> = (0..self.locations.len()).collect();
        locations.sort_by_cached_key(|&l| {
            let location = &self.locations[l];
            let section = match location.order {
                LocationOrder::Thread => 0,
                LocationOrder::ForeignProxyLane => 2,
                _ => 1,
            };
            (
                section,
                position.get(location.group as usize).copied(),
                location.order,
                name(location.name),
                l,
            )
        });
        (groups, position, locations)
    }

    /// Strings every archive needs, interned early so that `write` finds them.
    fn intern_fixed(&mut self) {
        for (name, description, _) in ATTRIBUTES {
            self.string(name);
            self.string(description);
        }
        self.string("NCCL");
        self.string("NCCL ranks");
        self.string("node");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Texts that share a table entry take turns in it: each one is still found with its
    /// own id, and a text never added is not found.
    #[test]
    fn static_ids_find_each_text_whatever_shares_its_entry() {
        // Slices of one static text: consecutive addresses, 8 apart, so that many share an
        // entry of the table (and some an address, with another length).
        const TEXT: &str = "0123456789abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ\
                            0123456789abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ\
                            0123456789abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ\
                            0123456789abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ\
                            0123456789abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ\
                            0123456789abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ\
                            0123456789abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ\
                            0123456789abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
        let texts: Vec<&'static str> = (0..70)
            .flat_map(|i| [&TEXT[i * 8..i * 8 + 3], &TEXT[i * 8..i * 8 + 5]])
            .collect();
        let mut ids = StaticIds::default();
        for (id, &text) in texts.iter().enumerate().step_by(2) {
            ids.insert(text, id as u32);
        }
        let mut next = crate::test_random::xorshift(0x1234_5678);
        for _ in 0..2_000 {
            let index = (next() % texts.len() as u64) as usize;
            let expected = (index % 2 == 0).then_some(index as u32);
            assert_eq!(ids.get(texts[index]), expected, "text {index}");
        }
    }
}
