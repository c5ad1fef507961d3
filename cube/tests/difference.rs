//! The difference of two cubes: the union of their dimensions, DOUBLE values minuend −
//! subtrahend at each point, and a difference that survives writing and reading.

mod common;

use common::assert_read_back;
use nccl_scorep_cube::*;

/// Handles of a test cube, by name.
struct Run {
    cube: Cube,
    time: MetricId,
    visits: MetricId,
    bytes: MetricId,
}

fn metric(
    b: &mut CubeBuilder,
    parent: Option<MetricId>,
    name: &str,
    dt: DataType,
    kind: MetricKind,
) -> MetricId {
    b.metric(
        parent,
        MetricDef::new(name, name.to_uppercase(), units::SECONDS, dt, kind),
    )
    .unwrap()
}

/// Cube A: main{a=1, b=x} → f{n=1} → k, main → g; cluster → host0 → rank 0 → thread 0,
/// stream 0.
/// Cube B: main{b=x, a=1} → f{n=1}, main → f{n=2}, main → h; cluster → host0 → rank 0 →
/// thread 0, cluster → host1 → rank 1 → thread 0; and a metric `sends` under visits.
fn run(which: char) -> Run {
    let mut b = CubeBuilder::new();
    b.attribute("creator", format!("run {which}"));
    let time = metric(
        &mut b,
        None,
        "time",
        DataType::Double,
        MetricKind::Exclusive,
    );
    let visits = metric(
        &mut b,
        None,
        "visits",
        DataType::Uint64,
        MetricKind::Exclusive,
    );
    let bytes = metric(
        &mut b,
        None,
        "bytes",
        DataType::Uint64,
        MetricKind::Inclusive,
    );
    if which == 'B' {
        metric(
            &mut b,
            Some(visits),
            "sends",
            DataType::Uint64,
            MetricKind::Exclusive,
        );
    }
    let main_r = b
        .region(RegionDef::new("main").with_module("main.c"))
        .unwrap();
    let f_r = b.region(RegionDef::new("f")).unwrap();
    let main = b.cnode(main_r, None).unwrap();
    let f1 = b.cnode(f_r, Some(main)).unwrap();
    b.cnode_parameter(f1, "n", Parameter::Numeric(1)).unwrap();
    let (a, bx) = (
        ("a".to_string(), Parameter::Numeric(1)),
        ("b".to_string(), Parameter::String("x".into())),
    );
    let params = if which == 'A' { [a, bx] } else { [bx, a] };
    for (k, v) in params {
        b.cnode_parameter(main, k, v).unwrap();
    }
    if which == 'A' {
        let k_r = b.region(RegionDef::new("k")).unwrap();
        let g_r = b.region(RegionDef::new("g")).unwrap();
        b.cnode(k_r, Some(f1)).unwrap();
        b.cnode(g_r, Some(main)).unwrap();
    } else {
        let f2 = b.cnode(f_r, Some(main)).unwrap();
        b.cnode_parameter(f2, "n", Parameter::Numeric(2)).unwrap();
        let h_r = b.region(RegionDef::new("h")).unwrap();
        b.cnode(h_r, Some(main)).unwrap();
    }
    let cluster = b
        .system_tree_node(None, "cluster", classes::MACHINE)
        .unwrap();
    let host0 = b
        .system_tree_node(Some(cluster), "host0", classes::NODE)
        .unwrap();
    let r0 = b
        .location_group(host0, "rank 0", 0, LocationGroupType::Process)
        .unwrap();
    b.location(r0, "thread 0", 0, LocationType::CpuThread)
        .unwrap();
    if which == 'A' {
        b.location(r0, "stream 0", 1, LocationType::AcceleratorStream)
            .unwrap();
    } else {
        let host1 = b
            .system_tree_node(Some(cluster), "host1", classes::NODE)
            .unwrap();
        let r1 = b
            .location_group(host1, "rank 1", 1, LocationGroupType::Process)
            .unwrap();
        b.location(r1, "thread 0", 0, LocationType::CpuThread)
            .unwrap();
    }
    Run {
        cube: b.build().unwrap(),
        time,
        visits,
        bytes,
    }
}

/// The cnode at a path of (region name, parameters) from the root.
fn cnode_at(d: &Dimensions, path: &[(&str, Option<i64>)]) -> Option<CnodeId> {
    let mut found: Option<CnodeId> = None;
    for &(name, n) in path {
        let candidates: Vec<CnodeId> = match found {
            None => d
                .cnode_ids()
                .filter(|&c| d.cnode(c).parent().is_none())
                .collect(),
            Some(p) => d.cnode(p).children().to_vec(),
        };
        found = candidates.into_iter().find(|&c| {
            let node = d.cnode(c);
            d.region(node.region()).name() == name
                && n.is_none_or(|n| {
                    node.parameters()
                        .contains(&("n".to_string(), Parameter::Numeric(n)))
                })
        });
        found?;
    }
    found
}

/// The location of this host and name.
fn location_at(d: &Dimensions, host: &str, name: &str) -> Option<LocationId> {
    d.location_ids().find(|&l| {
        let loc = d.location(l);
        let group = d.location_group(loc.group());
        loc.name() == name && d.system_tree_node(group.parent()).name() == host
    })
}

const MAIN: (&str, Option<i64>) = ("main", None);
const F1: (&str, Option<i64>) = ("f", Some(1));

#[test]
fn the_difference_has_the_union_and_values_a_minus_b() {
    let mut a = run('A');
    let mut b = run('B');
    {
        let d = a.cube.dimensions();
        let (main, f1) = (
            cnode_at(d, &[MAIN]).unwrap(),
            cnode_at(d, &[MAIN, F1]).unwrap(),
        );
        let k = cnode_at(d, &[MAIN, F1, ("k", None)]).unwrap();
        let g = cnode_at(d, &[MAIN, ("g", None)]).unwrap();
        let t0 = location_at(d, "host0", "thread 0").unwrap();
        let s0 = location_at(d, "host0", "stream 0").unwrap();
        let c = &mut a.cube;
        c.set(a.time, main, t0, 5.0).unwrap();
        c.set(a.time, f1, s0, 2.5).unwrap();
        c.set(a.time, k, t0, 1.0).unwrap();
        c.set(a.visits, main, t0, 3u64).unwrap();
        c.set(a.visits, g, t0, 4u64).unwrap();
        c.set(a.bytes, main, t0, 100u64).unwrap();
    }
    {
        let d = b.cube.dimensions();
        let (main, f1) = (
            cnode_at(d, &[MAIN]).unwrap(),
            cnode_at(d, &[MAIN, F1]).unwrap(),
        );
        let f2 = cnode_at(d, &[MAIN, ("f", Some(2))]).unwrap();
        let h = cnode_at(d, &[MAIN, ("h", None)]).unwrap();
        let t0 = location_at(d, "host0", "thread 0").unwrap();
        let t1 = location_at(d, "host1", "thread 0").unwrap();
        let sends = d.metric_by_name("sends").unwrap();
        let c = &mut b.cube;
        c.set(b.time, main, t0, 2.0).unwrap();
        c.set(b.time, f2, t1, 0.5).unwrap();
        c.set(b.visits, main, t0, 10u64).unwrap();
        c.set(b.visits, h, t0, 1u64).unwrap();
        c.set(b.bytes, main, t1, 7u64).unwrap();
        c.set(b.bytes, f1, t0, 1u64).unwrap();
        c.set(sends, main, t0, 6u64).unwrap();
    }

    let diff = difference(&a.cube, &b.cube).unwrap();
    let d = diff.dimensions();

    // Metrics: A's tree, B's extra metric under its parent, all DOUBLE, kinds kept.
    let names: Vec<&str> = d
        .metric_ids()
        .map(|m| d.metric(m).def().unique_name())
        .collect();
    assert_eq!(names, ["time", "visits", "bytes", "sends"]);
    let metric = |name: &str| d.metric_by_name(name).unwrap();
    assert_eq!(d.metric(metric("sends")).parent(), Some(metric("visits")));
    assert!(d
        .metric_ids()
        .all(|m| d.metric(m).def().data_type() == DataType::Double));
    assert_eq!(
        d.metric(metric("bytes")).def().kind(),
        MetricKind::Inclusive
    );
    assert_eq!(d.metric(metric("visits")).def().display_name(), "VISITS");

    // Call tree: main (parameters matched as a set), f{n=1}, k, g, f{n=2}, h.
    assert_eq!(d.cnode_ids().count(), 6);
    assert_eq!(
        d.cnode_ids()
            .filter(|&c| d.cnode(c).parent().is_none())
            .count(),
        1
    );
    let main = cnode_at(d, &[MAIN]).unwrap();
    let f1 = cnode_at(d, &[MAIN, F1]).unwrap();
    let f2 = cnode_at(d, &[MAIN, ("f", Some(2))]).unwrap();
    let k = cnode_at(d, &[MAIN, F1, ("k", None)]).unwrap();
    let g = cnode_at(d, &[MAIN, ("g", None)]).unwrap();
    let h = cnode_at(d, &[MAIN, ("h", None)]).unwrap();
    assert_eq!(d.region_ids().count(), 5, "main, f, k, g, h");

    // System tree: one machine with host0 (rank 0: thread, stream) and host1 (rank 1).
    assert_eq!(d.system_tree_node_ids().count(), 3);
    assert_eq!(d.location_group_ids().count(), 2);
    assert_eq!(d.location_ids().count(), 3);
    let t0 = location_at(d, "host0", "thread 0").unwrap();
    let s0 = location_at(d, "host0", "stream 0").unwrap();
    let t1 = location_at(d, "host1", "thread 0").unwrap();
    assert_eq!(
        d.location(s0).location_type(),
        LocationType::AcceleratorStream
    );

    let value = |m: &str, c, l| match diff.get(metric(m), c, l).unwrap() {
        Value::Double(v) => v,
        other => panic!("{other:?}"),
    };
    assert_eq!(value("time", main, t0), 3.0);
    assert_eq!(value("time", f1, s0), 2.5, "only in A");
    assert_eq!(value("time", k, t0), 1.0, "a node only in A");
    assert_eq!(
        value("time", f2, t1),
        -0.5,
        "a node and a location only in B"
    );
    assert_eq!(value("visits", main, t0), -7.0, "a count that went down");
    assert_eq!(value("visits", g, t0), 4.0);
    assert_eq!(value("visits", h, t0), -1.0);
    assert_eq!(value("bytes", main, t0), 100.0);
    assert_eq!(value("bytes", main, t1), -7.0);
    assert_eq!(value("bytes", f1, t0), -1.0);
    assert_eq!(value("sends", main, t0), -6.0, "a metric only in B");
    assert_eq!(value("time", h, s0), 0.0);

    // Every other point is zero: 13 values were set, at 11 points (two in both cubes).
    let nonzero = common::every_value(&diff)
        .into_iter()
        .filter(|(_, _, _, v)| v.as_f64() != 0.0)
        .count();
    assert_eq!(nonzero, 11);

    let attrs = d.attributes();
    let attr = |key: &str| {
        attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(attr(DIFFERENCE_ATTRIBUTE), Some("minuend − subtrahend"));
    assert_eq!(attr("nccl-scorep.minuend.creator"), Some("run A"));
    assert_eq!(attr("nccl-scorep.subtrahend.creator"), Some("run B"));

    // Written and read back, the same values.
    let read = Cube::read_from(&diff.write_to(Vec::new()).unwrap()[..]).unwrap();
    assert_read_back(&diff, &read);
}

#[test]
fn a_cube_minus_itself_is_zero() {
    let mut a = run('A');
    let d = a.cube.dimensions().clone();
    for (i, c) in d.cnode_ids().enumerate() {
        for l in d.location_ids() {
            a.cube.set(a.time, c, l, i as f64 + 0.125).unwrap();
            a.cube.set(a.visits, c, l, u64::MAX).unwrap();
            a.cube.set(a.bytes, c, l, i as u64).unwrap();
        }
    }
    let diff = difference(&a.cube, &a.cube).unwrap();
    let dd = diff.dimensions();
    assert_eq!(dd.metric_ids().count(), d.metric_ids().count());
    assert_eq!(dd.cnode_ids().count(), d.cnode_ids().count());
    assert_eq!(dd.location_ids().count(), d.location_ids().count());
    for (_, _, _, v) in common::every_value(&diff) {
        assert_eq!(v, Value::Double(0.0));
    }
}

#[test]
fn a_metric_of_different_kinds_cannot_be_subtracted() {
    let a = run('A');
    let mut b = CubeBuilder::new();
    metric(
        &mut b,
        None,
        "bytes",
        DataType::Uint64,
        MetricKind::Exclusive,
    );
    let r = b.region(RegionDef::new("main")).unwrap();
    b.cnode(r, None).unwrap();
    let s = b
        .system_tree_node(None, "cluster", classes::MACHINE)
        .unwrap();
    let g = b
        .location_group(s, "rank 0", 0, LocationGroupType::Process)
        .unwrap();
    b.location(g, "thread 0", 0, LocationType::CpuThread)
        .unwrap();
    let other = b.build().unwrap();
    let err = difference(&a.cube, &other).unwrap_err();
    assert!(
        matches!(
            &err,
            CubeError::KindMismatch {
                metric,
                minuend: MetricKind::Inclusive,
                subtrahend: MetricKind::Exclusive
            } if metric == "bytes"
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "metric `bytes` is INCLUSIVE in the minuend but EXCLUSIVE in the subtrahend"
    );
}
