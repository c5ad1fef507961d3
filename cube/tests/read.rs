//! Reading `.cubex` files: cubes of every shape this crate writes read back equal, a
//! hand-written file in Score-P's style reads with its derived metrics skipped, and damaged
//! files give typed errors.

mod common;

use common::{archive, assert_read_back, members};
use nccl_scorep_cube::*;

/// A cube with nested metrics of both data types and kinds, two call-tree roots with
/// parameters, two system-tree roots with processes, threads, an accelerator group and GPU
/// streams, attributes and a mirror. Some definitions come out of file order.
fn rich_cube() -> Cube {
    let mut b = CubeBuilder::new();
    b.attribute("creator", "read test")
        .attribute("note", "<quoted> & \"escaped\" 'text'")
        .mirror("https://example.org/doc/");
    let def = |name: &str, dt, kind| {
        MetricDef::new(name, name.to_uppercase(), units::SECONDS, dt, kind)
            .with_description(format!("{name}, described"))
    };
    let time = b
        .metric(None, def("time", DataType::Double, MetricKind::Exclusive))
        .unwrap();
    let visits = b
        .metric(None, def("visits", DataType::Uint64, MetricKind::Exclusive))
        .unwrap();
    let wait = b
        .metric(
            Some(time),
            def("wait", DataType::Double, MetricKind::Exclusive).with_url("@mirror@wait.html"),
        )
        .unwrap();
    let late = b
        .metric(
            Some(wait),
            def("late", DataType::Double, MetricKind::Exclusive),
        )
        .unwrap();
    let bytes = b
        .metric(None, def("bytes", DataType::Uint64, MetricKind::Inclusive))
        .unwrap();
    let incl_time = b
        .metric(
            Some(bytes),
            def("incl_time", DataType::Double, MetricKind::Inclusive),
        )
        .unwrap();
    let unused = b
        .metric(
            Some(visits),
            def("unused", DataType::Uint64, MetricKind::Exclusive),
        )
        .unwrap();

    let main = b
        .region(
            RegionDef::new("main")
                .with_module("main.c")
                .with_lines(3, 40)
                .with_paradigm("user")
                .with_role("function")
                .with_url("https://example.org/main")
                .with_description("the program"),
        )
        .unwrap();
    let send = b
        .region(
            RegionDef::new("ncclSend")
                .with_mangled_name("_Z8ncclSendv")
                .with_paradigm("nccl"),
        )
        .unwrap();
    let kernel = b
        .region(RegionDef::new("kernel").with_role("kernel"))
        .unwrap();
    let idle = b.region(RegionDef::new("idle")).unwrap();

    let root = b.cnode(main, None).unwrap();
    let other_root = b.cnode(idle, None).unwrap();
    let s1 = b.cnode(send, Some(root)).unwrap();
    let k1 = b.cnode(kernel, Some(s1)).unwrap();
    let s2 = b.cnode(send, Some(root)).unwrap();
    let k2 = b.cnode(kernel, Some(s1)).unwrap();
    let k3 = b.cnode(kernel, Some(k1)).unwrap();
    b.cnode_parameter(s1, "bytes", Parameter::Numeric(-1024))
        .unwrap();
    b.cnode_parameter(s1, "comm", Parameter::String("world & <co>".into()))
        .unwrap();
    b.cnode_parameter(s2, "bytes", Parameter::Numeric(i64::MAX))
        .unwrap();
    let cnodes = [root, other_root, s1, k1, s2, k2, k3];

    let cluster = b
        .system_tree_node(None, "cluster", classes::MACHINE)
        .unwrap();
    let other = b
        .system_tree_node(None, "other cluster", classes::MACHINE)
        .unwrap();
    let host1 = b
        .system_tree_node(Some(cluster), "host1", classes::NODE)
        .unwrap();
    let host0 = b
        .system_tree_node(Some(cluster), "host0", classes::NODE)
        .unwrap();
    let r1 = b
        .location_group(host1, "rank 1", 1, LocationGroupType::Process)
        .unwrap();
    let r0 = b
        .location_group(host0, "rank 0", 0, LocationGroupType::Process)
        .unwrap();
    let gpu = b
        .location_group(host0, "GPU 0", 2, LocationGroupType::Accelerator)
        .unwrap();
    let r2 = b
        .location_group(other, "rank 2", 3, LocationGroupType::Process)
        .unwrap();
    let mut locations = vec![
        b.location(r1, "thread 0", 0, LocationType::CpuThread)
            .unwrap(),
        b.location(r0, "thread 0", 0, LocationType::CpuThread)
            .unwrap(),
        b.location(gpu, "stream 7", 7, LocationType::AcceleratorStream)
            .unwrap(),
        b.location(r0, "thread 1", 1, LocationType::CpuThread)
            .unwrap(),
        b.location(r2, "thread 0", 0, LocationType::CpuThread)
            .unwrap(),
    ];
    locations.push(
        b.location(gpu, "stream 8", 8, LocationType::AcceleratorStream)
            .unwrap(),
    );

    let mut cube = b.build().unwrap();
    let mut n = 0u64;
    for (i, &c) in cnodes.iter().enumerate() {
        for (j, &l) in locations.iter().enumerate() {
            n += 1;
            if (i + j) % 3 == 0 {
                continue; // leave some points zero
            }
            cube.set(time, c, l, n as f64 * 0.25).unwrap();
            cube.set(wait, c, l, -(n as f64) / 7.0).unwrap();
            cube.set(visits, c, l, n).unwrap();
            cube.set(bytes, c, l, u64::MAX - n).unwrap();
            if j % 2 == 0 {
                cube.set(incl_time, c, l, 1e300 / n as f64).unwrap();
                cube.set(late, c, l, f64::MIN_POSITIVE).unwrap();
            }
        }
    }
    let _ = unused; // no value at all
    cube
}

#[test]
fn a_written_cube_reads_back_equal() {
    let cube = rich_cube();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rich.cubex");
    cube.write(&path).unwrap();
    let read = Cube::read(&path).unwrap();
    assert_read_back(&cube, &read);
    assert_eq!(
        read.dimensions().metric_ids().count(),
        cube.dimensions().metric_ids().count()
    );

    // Through a stream, and written and read once more.
    let again = Cube::read_from(&cube.write_to(Vec::new()).unwrap()[..]).unwrap();
    assert_read_back(&cube, &again);
    let twice = Cube::read_from(&again.write_to(Vec::new()).unwrap()[..]).unwrap();
    assert_read_back(&again, &twice);
}

#[test]
fn a_cube_defined_in_file_order_reads_back_with_the_same_handles() {
    let mut b = CubeBuilder::new();
    let t = b
        .metric(
            None,
            MetricDef::new(
                "t",
                "T",
                units::SECONDS,
                DataType::Double,
                MetricKind::Inclusive,
            ),
        )
        .unwrap();
    let r = b.region(RegionDef::new("r")).unwrap();
    let root = b.cnode(r, None).unwrap();
    let a = b.cnode(r, Some(root)).unwrap();
    let a1 = b.cnode(r, Some(a)).unwrap();
    let c = b.cnode(r, Some(root)).unwrap();
    let s = b.system_tree_node(None, "m", classes::MACHINE).unwrap();
    let g = b
        .location_group(s, "p", 0, LocationGroupType::Process)
        .unwrap();
    let l = b.location(g, "t", 0, LocationType::CpuThread).unwrap();
    let mut cube = b.build().unwrap();
    // Depth-first and breadth-wise numbers differ for a1 and c.
    cube.set(t, a1, l, 1.0).unwrap();
    cube.set(t, c, l, 2.0).unwrap();
    let read = Cube::read_from(&cube.write_to(Vec::new()).unwrap()[..]).unwrap();
    assert_eq!(read.get(t, a1, l).unwrap(), Value::Double(1.0));
    assert_eq!(read.get(t, c, l).unwrap(), Value::Double(2.0));
    assert_eq!(read.get(t, a, l).unwrap(), Value::Double(0.0));
    assert_eq!(read.rows_stored(t), 2);
}

/// anchor.xml as Score-P 8 writes it, in essence: a version 4.8 cube with attributes of
/// its own, a derived metric with a CubePL expression and a child, a metric of a data type
/// this crate does not hold, unknown elements and attributes, region ids out of order and
/// cnode ids that are not positions.
const SCOREP_ANCHOR: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<cube version="4.8">
<attr key="CUBE_CT_AGGR" value="SUM"/>
<attr key="Cube anchor.xml syntax version" value="4.8"/>
<attr key="Score-P::Version" value="8.4"/>
<attr key="creator" value="Score-P 8.4"/>
<doc>
<mirrors>
<murl>https://perftools.pages.jsc.fz-juelich.de/cicd/scorep/tags/scorep-8.4/html/</murl>
</mirrors>
</doc>
<metrics title="Metric tree">
<metric id="0" type="EXCLUSIVE" viztype="NORMAL" convertible="true" cacheable="true">
<disp_name>Visits</disp_name>
<uniq_name>visits</uniq_name>
<dtype>UINT64</dtype>
<uom>occ</uom>
<url>@mirror@scorep_metrics.html#visits</url>
<descr>Number of visits</descr>
<attr key="origin" value="scorep"/>
</metric>
<metric id="1" type="INCLUSIVE">
<disp_name>Time</disp_name>
<uniq_name>time</uniq_name>
<dtype>DOUBLE</dtype>
<uom>sec</uom>
<url>@mirror@scorep_metrics.html#time</url>
<descr>Total CPU allocation time</descr>
<metric id="2" type="INCLUSIVE">
<disp_name>Execution</disp_name>
<uniq_name>execution</uniq_name>
<dtype>DOUBLE</dtype>
<uom>sec</uom>
<url></url>
<descr>Execution time</descr>
</metric>
</metric>
<metric id="3" type="EXCLUSIVE">
<disp_name>Minimum Inclusive Time</disp_name>
<uniq_name>min_time</uniq_name>
<dtype>MINDOUBLE</dtype>
<uom>sec</uom>
<url></url>
<descr>Minimum inclusive CPU allocation time</descr>
</metric>
<metric id="4" type="POSTDERIVED" viztype="GHOST">
<disp_name>Time per visit</disp_name>
<uniq_name>time_per_visit</uniq_name>
<dtype>DOUBLE</dtype>
<uom>sec</uom>
<url></url>
<descr>Time divided by visits</descr>
<cubepl>
{ return ( metric::time(i) / metric::visits(e) ); }
</cubepl>
<cubeplinit>{ ${x} = 0; return 0; }</cubeplinit>
<metric id="5" type="PREDERIVED_EXCLUSIVE">
<disp_name>Part</disp_name>
<uniq_name>part</uniq_name>
<dtype>DOUBLE</dtype>
<uom>sec</uom>
<url></url>
<descr></descr>
<cubepl>{ return 1; }</cubepl>
</metric>
</metric>
<metric id="6" type="EXCLUSIVE">
<disp_name>Bytes sent</disp_name>
<uniq_name>bytes_sent</uniq_name>
<dtype>UINT64</dtype>
<uom>bytes</uom>
<url></url>
<descr>Bytes sent</descr>
</metric>
</metrics>
<program title="Call tree">
<region id="5" mod="/src/main.c" begin="10" end="40">
<name>main</name>
<mangled_name>main</mangled_name>
<paradigm>user</paradigm>
<role>function</role>
<url></url>
<descr></descr>
<attr key="x" value="y"/>
</region>
<region id="2" mod="" begin="-1" end="-1">
<name>MPI_Send</name>
<mangled_name>MPI_Send</mangled_name>
<paradigm>mpi</paradigm>
<role>function</role>
<url>@mirror@mpi.html</url>
<descr>Send</descr>
</region>
<region id="7" mod="/src/main.c" begin="50" end="-1">
<name>compute</name>
<mangled_name>_Z7computev</mangled_name>
<paradigm>compiler</paradigm>
<role>function</role>
<url></url>
<descr></descr>
</region>
<cnode id="10" calleeId="5">
<parameter partype="numeric" parkey="iteration" parvalue="3"/>
<cnode id="11" calleeId="7">
<cnode id="12" calleeId="2">
<parameter partype="string" parkey="comm" parvalue="WORLD"/>
</cnode>
</cnode>
<cnode id="13" calleeId="2">
</cnode>
</cnode>
<tau_atomic id="0" calleeId="5"><name>atomic</name></tau_atomic>
</program>
<system title="System tree">
<systemtreenode Id="0">
<name>machine Linux</name>
<class>machine</class>
<attr key="k" value="v"/>
<systemtreenode Id="1">
<name>node01</name>
<class>node</class>
<locationgroup Id="0">
<name>MPI Rank 0</name>
<rank>0</rank>
<type>process</type>
<location Id="0">
<name>Master thread</name>
<rank>0</rank>
<type>thread</type>
</location>
<location Id="1">
<name>CUDA[0:7]</name>
<rank>1</rank>
<type>accelerator stream</type>
</location>
</locationgroup>
<locationgroup Id="1">
<name>MPI Rank 1</name>
<rank>1</rank>
<type>process</type>
<location Id="2">
<name>Master thread</name>
<rank>0</rank>
<type>thread</type>
</location>
</locationgroup>
</systemtreenode>
</systemtreenode>
</system>
</cube>
"#;

fn index_le(rows: &[u32]) -> Vec<u8> {
    let mut out = b"CUBEX.INDEX".to_vec();
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.push(1);
    out.extend_from_slice(&(rows.len() as u32).to_le_bytes());
    for r in rows {
        out.extend_from_slice(&r.to_le_bytes());
    }
    out
}

fn data_le(values: &[u64]) -> Vec<u8> {
    let mut out = b"CUBEX.DATA".to_vec();
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

fn scorep_archive() -> Vec<u8> {
    // time: inclusive, a dense big-endian index; the value at wide row r, column k is
    // 10 r + k + 0.5.
    let mut dense_be = b"CUBEX.INDEX".to_vec();
    dense_be.extend_from_slice(&1u32.to_be_bytes());
    dense_be.extend_from_slice(&0u16.to_be_bytes());
    dense_be.push(3);
    let mut time_data = b"CUBEX.DATA".to_vec();
    for row in 0..4 {
        for col in 0..3 {
            let v = 10.0 * row as f64 + col as f64 + 0.5;
            time_data.extend_from_slice(&v.to_bits().to_be_bytes());
        }
    }
    let files = vec![
        ("anchor.xml".to_string(), SCOREP_ANCHOR.as_bytes().to_vec()),
        // visits: rows 3 and 0 (not sorted), little-endian.
        ("0.index".to_string(), index_le(&[3, 0])),
        ("0.data".to_string(), data_le(&[1, 2, 3, 4, 5, 6])),
        ("1.index".to_string(), dense_be),
        ("1.data".to_string(), time_data),
        // 2 (execution) has no files; 3 (skipped) has files that are never looked at.
        ("3.index".to_string(), b"garbage".to_vec()),
        ("3.data".to_string(), b"ZCUBEX.DATA".to_vec()),
        ("6.index".to_string(), index_le(&[2])),
        ("6.data".to_string(), data_le(&[0, 0, 512])),
        (
            "README".to_string(),
            b"not a member the reader wants".to_vec(),
        ),
    ];
    archive(&files)
}

#[test]
fn a_scorep_style_file_reads_with_derived_metrics_skipped() {
    let cube = Cube::read_from(&scorep_archive()[..]).unwrap();
    let d = cube.dimensions();
    assert_eq!(
        cube.skipped_metrics(),
        ["min_time", "time_per_visit", "part"]
    );
    let names: Vec<&str> = d
        .metric_ids()
        .map(|m| d.metric(m).def().unique_name())
        .collect();
    assert_eq!(names, ["visits", "time", "execution", "bytes_sent"]);
    let visits = d.metric_by_name("visits").unwrap();
    let time = d.metric_by_name("time").unwrap();
    let execution = d.metric_by_name("execution").unwrap();
    let bytes = d.metric_by_name("bytes_sent").unwrap();
    assert_eq!(d.metric(execution).parent(), Some(time));
    let def = d.metric(time).def();
    assert_eq!(
        (def.display_name(), def.unit(), def.kind(), def.data_type()),
        ("Time", "sec", MetricKind::Inclusive, DataType::Double)
    );
    assert_eq!(def.url(), "@mirror@scorep_metrics.html#time");
    assert_eq!(d.metric(visits).def().data_type(), DataType::Uint64);
    assert_eq!(
        d.attributes(),
        [
            ("CUBE_CT_AGGR".to_string(), "SUM".to_string()),
            ("Score-P::Version".to_string(), "8.4".to_string()),
            ("creator".to_string(), "Score-P 8.4".to_string()),
        ]
    );
    assert_eq!(d.mirrors().len(), 1);

    // Regions in document order; calleeId names them by id.
    let regions: Vec<&str> = d.region_ids().map(|r| d.region(r).name()).collect();
    assert_eq!(regions, ["main", "MPI_Send", "compute"]);
    let main = d.region(RegionId::from_index(0));
    assert_eq!(main.module(), "/src/main.c");
    assert_eq!(main.lines(), (Some(10), Some(40)));
    let compute = d.region(RegionId::from_index(2));
    assert_eq!(compute.mangled_name(), "_Z7computev");
    assert_eq!(compute.paradigm(), "compiler");
    assert_eq!(compute.lines(), (None, None), "only one line is known");

    // Cnodes depth-first: main, compute, MPI_Send in compute, MPI_Send.
    let cnode_regions: Vec<&str> = d
        .cnode_ids()
        .map(|c| d.region(d.cnode(c).region()).name())
        .collect();
    assert_eq!(cnode_regions, ["main", "compute", "MPI_Send", "MPI_Send"]);
    let c = |i| CnodeId::from_index(i);
    assert_eq!(
        d.cnode(c(0)).parameters(),
        [("iteration".to_string(), Parameter::Numeric(3))]
    );
    assert_eq!(
        d.cnode(c(2)).parameters(),
        [("comm".to_string(), Parameter::String("WORLD".into()))]
    );
    assert_eq!(d.cnode(c(3)).parent(), Some(c(0)));

    let l = |i| LocationId::from_index(i);
    let loc = d.location(l(1));
    assert_eq!(
        (loc.name(), loc.rank(), loc.location_type()),
        ("CUDA[0:7]", 1, LocationType::AcceleratorStream)
    );
    assert_eq!(d.location_group(d.location(l(2)).group()).rank(), 1);
    assert_eq!(d.system_tree_node_ids().count(), 2);

    // visits: exclusive, depth-first rows 3 and 0.
    assert_eq!(cube.get(visits, c(3), l(0)).unwrap(), Value::Uint64(1));
    assert_eq!(cube.get(visits, c(3), l(2)).unwrap(), Value::Uint64(3));
    assert_eq!(cube.get(visits, c(0), l(1)).unwrap(), Value::Uint64(5));
    assert_eq!(cube.get(visits, c(1), l(1)).unwrap(), Value::Uint64(0));
    // time: inclusive, wide rows main 0, compute 1, MPI_Send 2, MPI_Send in compute 3.
    for (cnode, row) in [(0, 0), (1, 1), (3, 2), (2, 3)] {
        for col in 0..3 {
            assert_eq!(
                cube.get(time, c(cnode), l(col)).unwrap(),
                Value::Double(10.0 * row as f64 + col as f64 + 0.5),
                "cnode {cnode}, location {col}"
            );
        }
    }
    assert_eq!(cube.rows_stored(execution), 0);
    assert_eq!(cube.get(bytes, c(2), l(2)).unwrap(), Value::Uint64(512));
    assert_eq!(cube.rows_stored(bytes), 1);

    // What this crate writes from it reads back the same.
    let again = Cube::read_from(&cube.write_to(Vec::new()).unwrap()[..]).unwrap();
    assert_read_back(&cube, &again);
}

/// The members of a small written cube, for damaging.
fn small_members() -> Vec<(String, Vec<u8>)> {
    let mut b = CubeBuilder::new();
    let t = b
        .metric(
            None,
            MetricDef::new(
                "time",
                "Time",
                units::SECONDS,
                DataType::Double,
                MetricKind::Exclusive,
            ),
        )
        .unwrap();
    let r = b.region(RegionDef::new("main")).unwrap();
    let root = b.cnode(r, None).unwrap();
    let child = b.cnode(r, Some(root)).unwrap();
    let s = b.system_tree_node(None, "m", classes::MACHINE).unwrap();
    let g = b
        .location_group(s, "p", 0, LocationGroupType::Process)
        .unwrap();
    let l0 = b.location(g, "t0", 0, LocationType::CpuThread).unwrap();
    let l1 = b.location(g, "t1", 1, LocationType::CpuThread).unwrap();
    let mut cube = b.build().unwrap();
    cube.set(t, root, l0, 1.0).unwrap();
    cube.set(t, child, l1, 2.0).unwrap();
    let m = members(&cube.write_to(Vec::new()).unwrap());
    let names: Vec<&str> = m.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["anchor.xml", "0.index", "0.data"]);
    m
}

fn read_damaged(change: impl FnOnce(&mut Vec<(String, Vec<u8>)>)) -> ReadError {
    let mut m = small_members();
    change(&mut m);
    match Cube::read_from(&archive(&m)[..]) {
        Err(CubeError::Read {
            path: None,
            problem,
        }) => problem,
        other => panic!("expected a read error, got {other:?}"),
    }
}

fn replace_in_anchor(m: &mut [(String, Vec<u8>)], from: &str, to: &str) {
    let text = String::from_utf8(m[0].1.clone()).unwrap();
    assert!(text.contains(from), "{from}");
    m[0].1 = text.replacen(from, to, 1).into_bytes();
}

#[test]
fn the_undamaged_members_read() {
    let m = small_members();
    let cube = Cube::read_from(&archive(&m)[..]).unwrap();
    assert_eq!(cube.rows_stored(MetricId::from_index(0)), 2);
}

/// CubeW pads some members with an extra block of zeros, which must not end the archive.
#[test]
fn blocks_of_zeros_between_members_are_skipped() {
    let m = small_members();
    let mut bytes = archive(&m[..1]);
    bytes.extend_from_slice(&[0; 512]);
    bytes.extend_from_slice(&archive(&m[1..]));
    let cube = Cube::read_from(&bytes[..]).unwrap();
    assert_eq!(cube.rows_stored(MetricId::from_index(0)), 2);
}

/// Call trees can be deep: the reader gets the stack the parser needs.
#[test]
fn a_deep_call_tree_reads() {
    let mut b = CubeBuilder::new();
    let t = b
        .metric(
            None,
            MetricDef::new(
                "t",
                "T",
                units::SECONDS,
                DataType::Double,
                MetricKind::Inclusive,
            ),
        )
        .unwrap();
    let r = b.region(RegionDef::new("r")).unwrap();
    let mut c = b.cnode(r, None).unwrap();
    for _ in 0..2_000 {
        c = b.cnode(r, Some(c)).unwrap();
    }
    let s = b.system_tree_node(None, "m", classes::MACHINE).unwrap();
    let g = b
        .location_group(s, "p", 0, LocationGroupType::Process)
        .unwrap();
    let l = b.location(g, "t", 0, LocationType::CpuThread).unwrap();
    let mut cube = b.build().unwrap();
    cube.set(t, c, l, 4.0).unwrap();
    let read = Cube::read_from(&cube.write_to(Vec::new()).unwrap()[..]).unwrap();
    assert_eq!(read.get(t, c, l).unwrap(), Value::Double(4.0));
}

#[test]
fn nesting_beyond_the_limit_is_refused() {
    let mut m = small_members();
    let deep = "<x>".repeat(20_000) + &"</x>".repeat(20_000);
    let text = String::from_utf8(m[0].1.clone()).unwrap();
    m[0].1 = text
        .replacen("<program>", &format!("<program>{deep}"), 1)
        .into_bytes();
    let err = Cube::read_from(&archive(&m)[..]).unwrap_err();
    assert!(
        matches!(&err, CubeError::Read { problem: ReadError::Anchor(msg), .. } if msg.contains("20002 levels")),
        "{err}"
    );
}

#[test]
fn damaged_archives_give_typed_errors() {
    let not_tar = b"this is a text file, not a tar archive\n".repeat(40);
    let err = Cube::read_from(&not_tar[..]).unwrap_err();
    assert!(
        matches!(
            &err,
            CubeError::Read {
                problem: ReadError::Archive(_),
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string().starts_with("cannot read the cube: "),
        "{err}"
    );
    let short = Cube::read_from(&b"tiny"[..]).unwrap_err();
    assert!(
        matches!(
            short,
            CubeError::Read {
                problem: ReadError::Archive(_) | ReadError::NoAnchor,
                ..
            }
        ),
        "{short:?}"
    );

    let problem = read_damaged(|m| {
        m.remove(0);
    });
    assert!(matches!(problem, ReadError::NoAnchor), "{problem:?}");

    let problem = read_damaged(|m| {
        let half = m[0].1.len() / 2;
        m[0].1.truncate(half);
    });
    assert!(matches!(problem, ReadError::Xml(_)), "{problem:?}");

    // A member cut short inside the archive.
    let mut whole = archive(&small_members());
    whole.truncate(512 + 100);
    let err = Cube::read_from(&whole[..]).unwrap_err();
    assert!(
        matches!(
            err,
            CubeError::Read {
                problem: ReadError::Archive(_),
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn damaged_anchors_give_typed_errors() {
    let problem = read_damaged(|m| replace_in_anchor(m, r#"calleeId="0""#, r#"calleeId="99""#));
    assert!(
        matches!(&problem, ReadError::Anchor(msg) if msg.contains("calleeId 99 names no region")),
        "{problem}"
    );
    assert!(problem.to_string().contains("<cnode> at line"), "{problem}");

    let problem =
        read_damaged(|m| replace_in_anchor(m, "<type>thread</type>", "<type>metric</type>"));
    assert!(
        matches!(&problem, ReadError::Anchor(msg) if msg.contains("location type `metric`")),
        "{problem}"
    );

    let problem = read_damaged(|m| replace_in_anchor(m, "<rank>1</rank>", "<rank>-1</rank>"));
    assert!(
        matches!(&problem, ReadError::Anchor(msg) if msg.contains("rank `-1`")),
        "{problem}"
    );

    let problem = read_damaged(|m| {
        replace_in_anchor(m, r#"<cube version="4.4">"#, r#"<cube version="3.0">"#)
    });
    assert!(matches!(problem, ReadError::Anchor(_)), "{problem}");

    // Every metric unsupported: no metric left.
    let problem = read_damaged(|m| {
        replace_in_anchor(m, "<dtype>DOUBLE</dtype>", "<dtype>TAU_ATOMIC</dtype>")
    });
    assert!(
        matches!(&problem, ReadError::Invalid(e) if matches!(**e, CubeError::Missing("metric"))),
        "{problem}"
    );

    let problem = read_damaged(|m| {
        replace_in_anchor(m, "<rank>0</rank>\n          <type>thread</type>\n        </location>", "<rank>0</rank>\n          <type>thread</type>\n        </location>\n        <location Id=\"9\"><name>x</name><rank>abc</rank></location>")
    });
    assert!(matches!(problem, ReadError::Anchor(_)), "{problem}");
}

#[test]
fn damaged_values_give_typed_errors() {
    let member = |problem: &ReadError| match problem {
        ReadError::Values { member, .. } | ReadError::Compressed { member } => member.clone(),
        other => panic!("{other:?}"),
    };

    // An index whose row count is larger than the file.
    let problem = read_damaged(|m| m[1].1[18..22].copy_from_slice(&1000u32.to_le_bytes()));
    assert_eq!(member(&problem), "0.index");
    assert!(problem.to_string().contains("lists 1000 rows"), "{problem}");
    // The largest count allocates nothing.
    let problem = read_damaged(|m| m[1].1[18..22].copy_from_slice(&u32::MAX.to_le_bytes()));
    assert_eq!(member(&problem), "0.index");

    let problem = read_damaged(|m| {
        let len = m[2].1.len();
        m[2].1.truncate(len - 8);
    });
    assert_eq!(member(&problem), "0.data");
    assert!(
        problem.to_string().contains("2 rows of 2 locations"),
        "{problem}"
    );

    let problem = read_damaged(|m| m[2].1 = b"ZCUBEX.DATA\x78\x9c\x00\x00".to_vec());
    assert!(
        matches!(problem, ReadError::Compressed { .. }),
        "{problem:?}"
    );
    assert_eq!(
        problem.to_string(),
        "0.data: compressed CUBE data is not supported"
    );

    let problem = read_damaged(|m| m[1].1[11..15].copy_from_slice(&[2, 0, 0, 2]));
    assert!(
        problem.to_string().contains("byte-order marker"),
        "{problem}"
    );

    let problem = read_damaged(|m| m[1].1[22..26].copy_from_slice(&7u32.to_le_bytes()));
    assert!(
        problem.to_string().contains("row 7 is outside"),
        "{problem}"
    );

    let problem = read_damaged(|m| m[1].1[26..30].copy_from_slice(&0u32.to_le_bytes()));
    assert!(
        problem.to_string().contains("row 0 is listed twice"),
        "{problem}"
    );

    let problem = read_damaged(|m| m[1].1[17] = 2);
    assert!(problem.to_string().contains("index format 2"), "{problem}");

    let problem = read_damaged(|m| {
        m.remove(2);
    });
    assert_eq!(member(&problem), "0.data");

    let problem = read_damaged(|m| m[1].1 = b"CUBEX.IND".to_vec());
    assert_eq!(member(&problem), "0.index");
}

/// CubeLib writes the sparse index of a metric without values as its header alone (no row
/// count), with a data file of its marker alone.
#[test]
fn an_index_without_a_row_count_has_no_rows() {
    let mut m = small_members();
    m[1].1.truncate(18);
    m[2].1.truncate(b"CUBEX.DATA".len());
    let cube = Cube::read_from(&archive(&m)[..]).unwrap();
    assert_eq!(cube.rows_stored(MetricId::from_index(0)), 0);
    // Cut inside the row count, it is damaged.
    let problem = read_damaged(|m| m[1].1.truncate(20));
    assert!(
        problem.to_string().contains("row count is cut short"),
        "{problem}"
    );
}

/// CubeLib's `cube_diff` stores counts as signed integers: they read as doubles.
#[test]
fn int64_values_read_as_doubles() {
    let mut m = small_members();
    replace_in_anchor(&mut m, "<dtype>DOUBLE</dtype>", "<dtype>INT64</dtype>");
    // The first row (the root, location t0) holds -3.
    let first = b"CUBEX.DATA".len();
    m[2].1[first..first + 8].copy_from_slice(&(-3i64).to_le_bytes());
    let cube = Cube::read_from(&archive(&m)[..]).unwrap();
    assert!(cube.skipped_metrics().is_empty());
    let d = cube.dimensions();
    let time = d.metric_by_name("time").unwrap();
    assert_eq!(d.metric(time).def().data_type(), DataType::Double);
    let root = d.cnode_ids().next().unwrap();
    let t0 = d.location_ids().next().unwrap();
    assert_eq!(cube.get(time, root, t0).unwrap(), Value::Double(-3.0));
}

#[test]
fn a_missing_file_names_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.cubex");
    let err = Cube::read(&path).unwrap_err();
    assert!(
        matches!(&err, CubeError::Read { path: Some(p), problem: ReadError::Io(_) } if *p == path),
        "{err:?}"
    );
    assert!(err.to_string().contains("absent.cubex"), "{err}");
}
