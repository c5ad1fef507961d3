//! Writes a small OTF2 archive laid out as Score-P 8 lays out its traces: ClockProperties in TSC-like ticks, machine "Linux" → node "<host>", one
//! "MPI Rank N" process group per rank with a "Master thread" location `(0 << 32) | rank`,
//! MPI and user regions, an MPI COMM_LOCATIONS group + COMM_GROUP + "MPI_COMM_WORLD",
//! ProgramBegin with a "ProcessId" attribute, Enter/Leave and MpiCollectiveBegin/End
//! events written with local region ids, and local definitions with a region mapping
//! table and two ClockOffset records per location. Used by `tests/merge_scorep.rs`.
#![deny(clippy::undocumented_unsafe_blocks)]

use std::ffi::CString;
use std::path::Path;
use std::ptr;

use otf2_sys::*;

/// One rank of the Score-P-shaped trace. Times are raw ticks (before the clock offsets).
pub struct Rank {
    pub rank: u32,
    pub pid: u64,
    pub program_begin: u64,
    pub program_end: u64,
    /// The Enter times of "NCCL clock sync" regions (each lasts 50 ticks).
    pub sync_enters: Vec<u64>,
    /// An MPI_Allreduce of 1000 ticks starting here.
    pub allreduce: u64,
    /// Score-P's two ClockOffset records (raw time, offset).
    pub clock_offsets: [(u64, i64); 2],
}

pub struct Shape {
    pub host: String,
    pub resolution: u64,
    pub global_offset: u64,
    pub trace_length: u64,
    pub ranks: Vec<Rank>,
}

pub const REGIONS: [&str; 5] = [
    "main",
    "MPI_Init",
    "MPI_Allreduce",
    "NCCL clock sync",
    "compute",
];
const MAIN: u32 = 0;
const MPI_INIT: u32 = 1;
const MPI_ALLREDUCE: u32 = 2;
const SYNC: u32 = 3;
const COMPUTE: u32 = 4;

/// Events use local region ids: local = 4 − global, mapped back by a mapping table.
fn local_region(global: u32) -> u32 {
    4 - global
}

pub fn master_thread(rank: u32) -> u64 {
    u64::from(rank)
}

fn ok(code: OTF2_ErrorCode, what: &str) {
    assert_eq!(code, OTF2_SUCCESS, "{what}");
}

enum Ev {
    Enter(u32),
    Leave(u32),
    CollBegin,
    CollEnd,
}

/// Writes `<dir>/traces.otf2`, `traces.def` and `traces/`.
pub fn write(dir: &Path, shape: &Shape) {
    let path = CString::new(dir.to_str().unwrap()).unwrap();
    let strings: Vec<String> = [
        "",
        "Linux",
        "machine",
        shape.host.as_str(),
        "node",
        "Master thread",
        "MPI_COMM_WORLD",
        "ProcessId",
        "Process identifier",
        "MPI",
        "app",
        "bytes",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain(REGIONS.iter().map(|s| s.to_string()))
    .chain(shape.ranks.iter().map(|r| format!("MPI Rank {}", r.rank)))
    .collect();
    let sid = |text: &str| strings.iter().position(|s| s == text).unwrap() as u32;

    // SAFETY: the OTF2 write sequence on this thread; every pointer passed points to a
    // live local value; OTF2 copies what it keeps.
    unsafe {
        let archive = otf2_sys::writing::create_archive(
            &path,
            1024 * 1024,
            OTF2_CHUNK_SIZE_DEFINITIONS_DEFAULT,
        )
        .expect("create the archive");
        let creator = CString::new("Score-P-shaped test archive").unwrap();
        ok(
            OTF2_Archive_SetCreator(archive, creator.as_ptr()),
            "creator",
        );

        ok(OTF2_Archive_OpenEvtFiles(archive), "open event files");
        let attributes = OTF2_AttributeList_New();
        let mut counts = Vec::new();
        for rank in &shape.ranks {
            let w = OTF2_Archive_GetEvtWriter(archive, master_thread(rank.rank));
            assert!(!w.is_null());
            let mut events: Vec<(u64, Ev)> = vec![
                (rank.program_begin + 1, Ev::Enter(MAIN)),
                (rank.program_begin + 10, Ev::Enter(MPI_INIT)),
                (rank.program_begin + 100, Ev::Leave(MPI_INIT)),
                (rank.allreduce, Ev::Enter(MPI_ALLREDUCE)),
                (rank.allreduce + 10, Ev::CollBegin),
                (rank.allreduce + 990, Ev::CollEnd),
                (rank.allreduce + 1000, Ev::Leave(MPI_ALLREDUCE)),
                (rank.allreduce + 2000, Ev::Enter(COMPUTE)),
                (rank.allreduce + 5000, Ev::Leave(COMPUTE)),
                (rank.program_end - 1, Ev::Leave(MAIN)),
            ];
            for &t in &rank.sync_enters {
                events.push((t, Ev::Enter(SYNC)));
                events.push((t + 50, Ev::Leave(SYNC)));
            }
            events.sort_by_key(|(t, _)| *t);
            ok(
                OTF2_AttributeList_AddUint64(attributes, 0, rank.pid),
                "ProcessId attribute",
            );
            let program = sid("app");
            ok(
                OTF2_EvtWriter_ProgramBegin(
                    w,
                    attributes,
                    rank.program_begin,
                    program,
                    0,
                    ptr::null(),
                ),
                "ProgramBegin",
            );
            for (time, event) in events {
                let code = match event {
                    Ev::Enter(r) => OTF2_EvtWriter_Enter(w, ptr::null_mut(), time, local_region(r)),
                    Ev::Leave(r) => OTF2_EvtWriter_Leave(w, ptr::null_mut(), time, local_region(r)),
                    Ev::CollBegin => OTF2_EvtWriter_MpiCollectiveBegin(w, ptr::null_mut(), time),
                    Ev::CollEnd => OTF2_EvtWriter_MpiCollectiveEnd(
                        w,
                        ptr::null_mut(),
                        time,
                        OTF2_COLLECTIVE_OP_ALLREDUCE as OTF2_CollectiveOp,
                        0,
                        OTF2_UNDEFINED_UINT32,
                        8 * shape.ranks.len() as u64,
                        8 * shape.ranks.len() as u64,
                    ),
                };
                ok(code, "event");
            }
            ok(
                OTF2_EvtWriter_ProgramEnd(w, ptr::null_mut(), rank.program_end, 0),
                "ProgramEnd",
            );
            let mut n = 0;
            ok(OTF2_EvtWriter_GetNumberOfEvents(w, &mut n), "count");
            counts.push(n);
            ok(
                OTF2_Archive_CloseEvtWriter(archive, w),
                "close event writer",
            );
        }
        OTF2_AttributeList_Delete(attributes);
        ok(OTF2_Archive_CloseEvtFiles(archive), "close event files");

        ok(OTF2_Archive_OpenDefFiles(archive), "open def files");
        for rank in &shape.ranks {
            let w = OTF2_Archive_GetDefWriter(archive, master_thread(rank.rank));
            assert!(!w.is_null());
            let map = OTF2_IdMap_Create(OTF2_ID_MAP_DENSE as OTF2_IdMapMode, REGIONS.len() as u64);
            for local in 0..REGIONS.len() as u32 {
                ok(
                    OTF2_IdMap_AddIdPair(map, u64::from(local), u64::from(local_region(local))),
                    "id pair",
                );
            }
            ok(
                OTF2_DefWriter_WriteMappingTable(w, OTF2_MAPPING_REGION as OTF2_MappingType, map),
                "mapping table",
            );
            OTF2_IdMap_Free(map);
            for (time, offset) in rank.clock_offsets {
                ok(
                    OTF2_DefWriter_WriteClockOffset(w, time, offset, 12.5),
                    "clock offset",
                );
            }
            ok(OTF2_Archive_CloseDefWriter(archive, w), "close def writer");
        }
        ok(OTF2_Archive_CloseDefFiles(archive), "close def files");

        let g = OTF2_Archive_GetGlobalDefWriter(archive);
        assert!(!g.is_null());
        ok(
            OTF2_GlobalDefWriter_WriteClockProperties(
                g,
                shape.resolution,
                shape.global_offset,
                shape.trace_length,
                OTF2_UNDEFINED_TIMESTAMP,
            ),
            "clock properties",
        );
        for (id, text) in strings.iter().enumerate() {
            let text = CString::new(text.as_str()).unwrap();
            ok(
                OTF2_GlobalDefWriter_WriteString(g, id as u32, text.as_ptr()),
                "string",
            );
        }
        ok(
            OTF2_GlobalDefWriter_WriteParadigm(
                g,
                OTF2_PARADIGM_MPI as OTF2_Paradigm,
                sid("MPI"),
                OTF2_PARADIGM_CLASS_PROCESS as OTF2_ParadigmClass,
            ),
            "paradigm",
        );
        ok(
            OTF2_GlobalDefWriter_WriteSystemTreeNode(
                g,
                0,
                sid("Linux"),
                sid("machine"),
                OTF2_UNDEFINED_SYSTEM_TREE_NODE,
            ),
            "machine",
        );
        ok(
            OTF2_GlobalDefWriter_WriteSystemTreeNode(g, 1, sid(&shape.host), sid("node"), 0),
            "node",
        );
        ok(
            OTF2_GlobalDefWriter_WriteSystemTreeNodeDomain(
                g,
                1,
                OTF2_SYSTEM_TREE_DOMAIN_SHARED_MEMORY as OTF2_SystemTreeDomain,
            ),
            "node domain",
        );
        for (index, rank) in shape.ranks.iter().enumerate() {
            ok(
                OTF2_GlobalDefWriter_WriteLocationGroup(
                    g,
                    index as u32,
                    sid(&format!("MPI Rank {}", rank.rank)),
                    OTF2_LOCATION_GROUP_TYPE_PROCESS as OTF2_LocationGroupType,
                    1,
                    OTF2_UNDEFINED_LOCATION_GROUP,
                ),
                "location group",
            );
        }
        for (index, rank) in shape.ranks.iter().enumerate() {
            ok(
                OTF2_GlobalDefWriter_WriteLocation(
                    g,
                    master_thread(rank.rank),
                    sid("Master thread"),
                    OTF2_LOCATION_TYPE_CPU_THREAD as OTF2_LocationType,
                    counts[index],
                    index as u32,
                ),
                "location",
            );
        }
        let mpi_file = sid("MPI");
        for (id, region) in REGIONS.iter().enumerate() {
            let (role, paradigm, file) = match *region {
                "MPI_Init" => (OTF2_REGION_ROLE_FUNCTION, OTF2_PARADIGM_MPI, mpi_file),
                "MPI_Allreduce" => (OTF2_REGION_ROLE_COLL_ALL2ALL, OTF2_PARADIGM_MPI, mpi_file),
                _ => (OTF2_REGION_ROLE_FUNCTION, OTF2_PARADIGM_USER, 0),
            };
            ok(
                OTF2_GlobalDefWriter_WriteRegion(
                    g,
                    id as u32,
                    sid(region),
                    sid(region),
                    0,
                    role as OTF2_RegionRole,
                    paradigm as OTF2_Paradigm,
                    OTF2_REGION_FLAG_NONE as OTF2_RegionFlag,
                    file,
                    0,
                    0,
                ),
                "region",
            );
        }
        let members: Vec<u64> = shape.ranks.iter().map(|r| master_thread(r.rank)).collect();
        ok(
            OTF2_GlobalDefWriter_WriteGroup(
                g,
                0,
                0,
                OTF2_GROUP_TYPE_COMM_LOCATIONS as OTF2_GroupType,
                OTF2_PARADIGM_MPI as OTF2_Paradigm,
                OTF2_GROUP_FLAG_NONE as OTF2_GroupFlag,
                members.len() as u32,
                members.as_ptr(),
            ),
            "comm locations",
        );
        let ranks: Vec<u64> = (0..members.len() as u64).collect();
        ok(
            OTF2_GlobalDefWriter_WriteGroup(
                g,
                1,
                0,
                OTF2_GROUP_TYPE_COMM_GROUP as OTF2_GroupType,
                OTF2_PARADIGM_MPI as OTF2_Paradigm,
                OTF2_GROUP_FLAG_NONE as OTF2_GroupFlag,
                ranks.len() as u32,
                ranks.as_ptr(),
            ),
            "comm group",
        );
        ok(
            OTF2_GlobalDefWriter_WriteComm(
                g,
                0,
                sid("MPI_COMM_WORLD"),
                1,
                OTF2_UNDEFINED_COMM,
                OTF2_COMM_FLAG_NONE as OTF2_CommFlag,
            ),
            "comm",
        );
        ok(
            OTF2_GlobalDefWriter_WriteParameter(
                g,
                0,
                sid("bytes"),
                OTF2_PARAMETER_TYPE_INT64 as OTF2_ParameterType,
            ),
            "parameter",
        );
        ok(
            OTF2_GlobalDefWriter_WriteAttribute(
                g,
                0,
                sid("ProcessId"),
                sid("Process identifier"),
                OTF2_TYPE_UINT64 as OTF2_Type,
            ),
            "attribute",
        );
        ok(OTF2_Archive_Close(archive), "close archive");
    }
}
