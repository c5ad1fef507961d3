//! Writes a small cube and reads it back with readers written by others: pycubexr (always;
//! installed with pip when missing) and CubeLib's command-line tools (when on PATH).

use std::collections::HashMap;
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

use nccl_scorep_cube::*;
use serde_json::{json, Value as Json};

/// The cube, and what the readers must find in it.
struct Written {
    cube: Cube,
    expected: Json,
    /// Path of region names of every cnode.
    paths: HashMap<CnodeId, String>,
}

/// 4 metrics (time with its child wait, visits, and an inclusive bytes metric), a call
/// tree of three levels with parameters, and two processes on two nodes with a CPU thread
/// and a GPU stream each. Some definitions come out of order on purpose: the file's order
/// differs from the order of definition.
fn small_cube() -> Written {
    let mut b = CubeBuilder::new();
    b.attribute("creator", "nccl-scorep-cube test")
        .attribute("version", "0.1.0 <test> & \"quotes\"");

    let def = |name: &str, disp: &str, unit: &str, dt, kind| {
        MetricDef::new(name, disp, unit, dt, kind).with_description(format!("{disp} of the test"))
    };
    let time = b
        .metric(
            None,
            def(
                "time",
                "Time",
                units::SECONDS,
                DataType::Double,
                MetricKind::Exclusive,
            )
            .with_url("https://example.org/metrics#time"),
        )
        .unwrap();
    let visits = b
        .metric(
            None,
            def(
                "visits",
                "Visits",
                units::OCCURRENCES,
                DataType::Uint64,
                MetricKind::Exclusive,
            ),
        )
        .unwrap();
    let wait = b
        .metric(
            Some(time),
            def(
                "wait_nxn",
                "Wait for the last rank",
                units::SECONDS,
                DataType::Double,
                MetricKind::Exclusive,
            ),
        )
        .unwrap();
    let bytes = b
        .metric(
            None,
            def(
                "bytes",
                "Bytes",
                units::BYTES,
                DataType::Uint64,
                MetricKind::Inclusive,
            ),
        )
        .unwrap();
    let metric_order = [
        (time, None),
        (wait, Some("time")),
        (visits, None),
        (bytes, None),
    ];

    let region = |b: &mut CubeBuilder, name: &str, paradigm: &str, role: &str| {
        b.region(
            RegionDef::new(name)
                .with_paradigm(paradigm)
                .with_role(role)
                .with_module("nccl"),
        )
        .unwrap()
    };
    let r_main = region(&mut b, "main", "user", "function");
    let r_group = region(&mut b, "ncclGroup", "nccl", "wrapper");
    let r_allreduce = region(&mut b, "ncclAllReduce", "nccl", "wrapper");
    let r_bcast = region(&mut b, "ncclBroadcast", "nccl", "wrapper");
    let r_kernel = region(&mut b, "ncclDevKernel_AllReduce", "cuda", "kernel");
    let main = b.cnode(r_main, None).unwrap();
    let group = b.cnode(r_group, Some(main)).unwrap();
    let kernel = b.cnode(r_kernel, Some(main)).unwrap();
    let allreduce = b.cnode(r_allreduce, Some(group)).unwrap();
    let bcast = b.cnode(r_bcast, Some(group)).unwrap();
    b.cnode_parameter(group, "depth", Parameter::Numeric(1))
        .unwrap();
    b.cnode_parameter(allreduce, "comm", Parameter::String("world".into()))
        .unwrap();
    b.cnode_parameter(allreduce, "bytes", Parameter::Numeric(1 << 20))
        .unwrap();
    // Depth-first: main, ncclGroup, ncclAllReduce, ncclBroadcast, kernel.
    let cnode_order = [
        (main, "main", r_main),
        (group, "main/ncclGroup", r_group),
        (allreduce, "main/ncclGroup/ncclAllReduce", r_allreduce),
        (bcast, "main/ncclGroup/ncclBroadcast", r_bcast),
        (kernel, "main/ncclDevKernel_AllReduce", r_kernel),
    ];

    let cluster = b
        .system_tree_node(None, "cluster", classes::MACHINE)
        .unwrap();
    let host0 = b
        .system_tree_node(Some(cluster), "host0", classes::NODE)
        .unwrap();
    let host1 = b
        .system_tree_node(Some(cluster), "host1", classes::NODE)
        .unwrap();
    // Rank 1 is defined first, and its GPU stream before its thread.
    let p1 = b
        .location_group(host1, "rank 1", 1, LocationGroupType::Process)
        .unwrap();
    let p0 = b
        .location_group(host0, "rank 0", 0, LocationGroupType::Process)
        .unwrap();
    let gpu1 = b
        .location(p1, "rank 1 GPU stream", 1, LocationType::AcceleratorStream)
        .unwrap();
    let t1 = b
        .location(p1, "rank 1 thread", 0, LocationType::CpuThread)
        .unwrap();
    let t0 = b
        .location(p0, "rank 0 thread", 0, LocationType::CpuThread)
        .unwrap();
    let gpu0 = b
        .location(p0, "rank 0 GPU stream", 1, LocationType::AcceleratorStream)
        .unwrap();
    let location_order = [
        (t0, "rank 0", 0, "thread"),
        (gpu0, "rank 0", 0, "accelerator stream"),
        (gpu1, "rank 1", 1, "accelerator stream"),
        (t1, "rank 1", 1, "thread"),
    ];

    let mut cube = b.build().unwrap();
    let d = cube.dimensions().clone();
    let mut values = Vec::new();
    let paths: HashMap<CnodeId, String> = cnode_order
        .iter()
        .map(|&(c, p, _)| (c, p.to_string()))
        .collect();
    let mut set = |cube: &mut Cube, m: MetricId, c: CnodeId, l: LocationId, v: Value| {
        cube.set(m, c, l, v).unwrap();
        let value = match v {
            Value::Double(x) => json!(x),
            Value::Uint64(x) => json!(x),
        };
        values.push(json!({
            "metric": d.metric(m).def().unique_name(),
            "path": paths[&c],
            "location": d.location(l).name(),
            "value": value,
        }));
    };
    for (i, &(t, _, _, _)) in location_order.iter().enumerate() {
        let i = i as f64;
        let host = t == t0 || t == t1;
        if host {
            set(&mut cube, time, main, t, Value::Double(0.5 + i));
            set(&mut cube, time, group, t, Value::Double(0.125 * (i + 1.0)));
            set(&mut cube, time, allreduce, t, Value::Double(2.25 + i));
            set(&mut cube, time, bcast, t, Value::Double(1.0 / 3.0 + i));
            set(&mut cube, wait, allreduce, t, Value::Double(0.75 * i));
            set(&mut cube, visits, main, t, Value::Uint64(1));
            set(&mut cube, visits, group, t, Value::Uint64(10));
            set(&mut cube, visits, allreduce, t, Value::Uint64(10));
            set(&mut cube, visits, bcast, t, Value::Uint64(3 + i as u64));
            // Inclusive: each node holds its subtree.
            set(&mut cube, bytes, allreduce, t, Value::Uint64(1 << 20));
            set(&mut cube, bytes, bcast, t, Value::Uint64(4096));
            set(
                &mut cube,
                bytes,
                group,
                t,
                Value::Uint64((1 << 20) + 4096 + 7),
            );
            set(
                &mut cube,
                bytes,
                main,
                t,
                Value::Uint64((1 << 20) + 4096 + 7),
            );
        } else {
            set(&mut cube, time, kernel, t, Value::Double(1e-3 * (i + 1.0)));
            set(&mut cube, visits, kernel, t, Value::Uint64(10));
            set(&mut cube, bytes, kernel, t, Value::Uint64(u64::MAX >> 12));
            set(&mut cube, bytes, main, t, Value::Uint64(u64::MAX >> 12));
        }
    }

    let expected = json!({
        "attributes": {
            "creator": "nccl-scorep-cube test",
            "version": "0.1.0 <test> & \"quotes\"",
            "Cube anchor.xml syntax version": "4.7",
        },
        "metrics": metric_order.iter().map(|&(m, parent)| {
            let def = d.metric(m).def();
            json!({
                "name": def.unique_name(),
                "display": def.display_name(),
                "unit": def.unit(),
                "dtype": def.data_type().cube_name(),
                "kind": def.kind().cube_name(),
                "description": def.description(),
                "url": def.url(),
                "parent": parent,
            })
        }).collect::<Vec<_>>(),
        "cnodes": cnode_order.iter().map(|&(c, path, r)| {
            let region = d.region(r);
            let params: serde_json::Map<String, Json> = d.cnode(c).parameters().iter().map(|(k, v)| {
                let v = match v {
                    Parameter::Numeric(n) => json!(n),
                    Parameter::String(s) => json!(s),
                };
                (k.clone(), v)
            }).collect();
            json!({
                "path": path,
                "region": region.name(),
                "paradigm": region.paradigm(),
                "role": region.role(),
                "parameters": params,
            })
        }).collect::<Vec<_>>(),
        "system_tree_nodes": [
            {"name": "cluster", "class": "machine", "parent": null},
            {"name": "host0", "class": "node", "parent": "cluster"},
            {"name": "host1", "class": "node", "parent": "cluster"},
        ],
        "locations": location_order.iter().map(|&(l, group, group_rank, ty)| {
            let loc = d.location(l);
            json!({
                "name": loc.name(),
                "type": ty,
                "rank": loc.rank(),
                "group": group,
                "group_type": "process",
                "group_rank": group_rank,
            })
        }).collect::<Vec<_>>(),
        "values": values,
    });
    for (column, &(l, ..)) in location_order.iter().enumerate() {
        assert_eq!(d.location_file_id(l) as usize, column);
    }
    Written {
        cube,
        expected,
        paths,
    }
}

fn python_imports(module: &str) -> bool {
    Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Installs pycubexr with pip when it is missing, as scripts/install-deps.sh does for the
/// Debian packages: check first, install only what is missing.
fn ensure_pycubexr() {
    assert!(
        Command::new("python3").arg("--version").output().is_ok(),
        "python3 is needed to read the cube with pycubexr, and it is not installed"
    );
    if python_imports("pycubexr") {
        return;
    }
    let attempts: [&[&str]; 3] = [
        &["python3", "-m", "pip", "install", "--user", "pycubexr"],
        // Debian's own Python refuses user installs without this (PEP 668).
        &[
            "python3",
            "-m",
            "pip",
            "install",
            "--user",
            "--break-system-packages",
            "pycubexr",
        ],
        &["pip3", "install", "--user", "pycubexr"],
    ];
    let mut tried = Vec::new();
    for cmd in attempts {
        eprintln!("pycubexr is missing; running {}", cmd.join(" "));
        let out = Command::new(cmd[0]).args(&cmd[1..]).output();
        let outcome = match &out {
            Ok(o) => format!(
                "{}: {}",
                o.status,
                String::from_utf8_lossy(&o.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
            ),
            Err(e) => e.to_string(),
        };
        tried.push(format!("`{}` ({outcome})", cmd.join(" ")));
        if python_imports("pycubexr") {
            return;
        }
    }
    panic!(
        "pycubexr (PyPI) is needed to check the written cube and could not be installed; tried {}. \
         Install it with `python3 -m pip install --user pycubexr`.",
        tried.join(", ")
    );
}

fn tool(name: &str) -> Option<PathBuf> {
    env::split_paths(&env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

#[test]
fn pycubexr_reads_back_every_definition_and_value() {
    let written = small_cube();
    let dir = tempfile::tempdir().unwrap();
    let cubex = dir.path().join("profile.cubex");
    let expected = dir.path().join("expected.json");
    written.cube.write(&cubex).unwrap();
    std::fs::write(
        &expected,
        serde_json::to_vec_pretty(&written.expected).unwrap(),
    )
    .unwrap();

    ensure_pycubexr();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/read_cube.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(&cubex)
        .arg(&expected)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "pycubexr disagrees with what was written:\n{stdout}\n{stderr}"
    );
    // 4 metrics × 5 cnodes × 4 locations.
    assert!(
        stdout.contains("4 metrics, 5 cnodes, 4 locations and checked 80 values"),
        "{stdout}"
    );
    println!("{stdout}");
}

/// One line of `cube_dump -s csv2`: cnode file id, location file id, one field per metric.
type Csv2Row = (u32, u32, Vec<String>);

/// Parses `cube_dump -s csv2` output: "Cnode ID, Thread ID,<metric>,..." then one line per
/// cnode and location.
fn parse_csv2(text: &str) -> (Vec<String>, Vec<Csv2Row>) {
    let mut lines = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .skip_while(|l| !l.starts_with("Cnode ID"));
    let header: Vec<String> = lines
        .next()
        .unwrap_or_else(|| panic!("no CSV header in cube_dump output:\n{text}"))
        .split(',')
        .map(|s| s.trim().to_string())
        .collect();
    let rows = lines
        .map(|l| {
            let f: Vec<String> = l.split(',').map(|s| s.trim().to_string()).collect();
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2..].to_vec(),
            )
        })
        .collect();
    (header[2..].to_vec(), rows)
}

/// cube_dump prints 6 significant digits.
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-5 * a.abs().max(b.abs()).max(1e-9)
}

fn run_tool(path: &Path, args: &[&str], cubex: &Path) -> String {
    let out = Command::new(path).args(args).arg(cubex).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{} {} failed ({}):\n{stdout}\n{}",
        path.display(),
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn cube_tools_accept_the_file_and_agree_on_the_values() {
    let tools = ["cube_info", "cube_dump", "cube_stat", "cube_calltree"];
    let found: Vec<Option<PathBuf>> = tools.iter().map(|t| tool(t)).collect();
    if found.iter().any(Option::is_none) {
        let missing: Vec<&str> = tools
            .iter()
            .zip(&found)
            .filter(|(_, f)| f.is_none())
            .map(|(t, _)| *t)
            .collect();
        println!(
            "skipped: CubeLib's tools are not on PATH (missing: {}); only pycubexr checked the file",
            missing.join(", ")
        );
        return;
    }
    let [info, dump, stat, calltree] = [0, 1, 2, 3].map(|i| found[i].clone().unwrap());

    let Written { cube, paths, .. } = small_cube();
    let dir = tempfile::tempdir().unwrap();
    let cubex = dir.path().join("profile.cubex");
    cube.write(&cubex).unwrap();
    let d = cube.dimensions();

    run_tool(&info, &[], &cubex);
    run_tool(&stat, &["-p"], &cubex);
    let tree = run_tool(&calltree, &["-m", "time", "-i"], &cubex);
    for path in paths.values() {
        let leaf = path.rsplit('/').next().unwrap();
        assert!(
            tree.contains(leaf),
            "cube_calltree does not show {leaf}:\n{tree}"
        );
    }

    // Call-path parameters, as `cube_dump -w` lists them below their call path.
    let structure = run_tool(&dump, &["-w"], &cubex);
    let lines: Vec<&str> = structure.lines().collect();
    for c in d.cnode_ids() {
        let region = d.region(d.cnode(c).region()).name();
        let at = lines
            .iter()
            .position(|l| {
                let l = l.trim_start_matches([' ', '|', '-']);
                l.starts_with(&format!("{region}  ["))
            })
            .unwrap_or_else(|| panic!("cube_dump -w does not list {region}:\n{structure}"));
        let listed: Vec<&str> = lines[at + 1..]
            .iter()
            .take_while(|l| l.contains("Parameter ("))
            .copied()
            .collect();
        let want: Vec<String> = d
            .cnode(c)
            .parameters()
            .iter()
            .map(|(k, v)| match v {
                Parameter::Numeric(n) => format!("Parameter (num): \"{k}\"->\"{}\"", *n as f64),
                Parameter::String(s) => format!("Parameter (str): \"{k}\"->\"{s}\""),
            })
            .collect();
        assert_eq!(
            listed.len(),
            want.len(),
            "parameters of {region}: {listed:?}"
        );
        for w in &want {
            let w = w.replace("1048576", "1.04858e+06");
            assert!(
                listed
                    .iter()
                    .any(|l| l.trim_start_matches([' ', '|']).trim() == w),
                "{region}: {w} not in {listed:?}"
            );
        }
    }

    let cnode_by_file_id: HashMap<u32, CnodeId> =
        d.cnode_ids().map(|c| (d.cnode_file_id(c), c)).collect();
    let location_by_file_id: HashMap<u32, LocationId> = d
        .location_ids()
        .map(|l| (d.location_file_id(l), l))
        .collect();
    let subtree = |c: CnodeId| -> Vec<CnodeId> {
        let mut out = vec![c];
        let mut i = 0;
        while i < out.len() {
            out.extend_from_slice(d.cnode(out[i]).children());
            i += 1;
        }
        out
    };

    let get = |m: MetricId, c: CnodeId, l: LocationId| cube.get(m, c, l).unwrap().as_f64();
    // Along the call tree, from what is stored for the metric's kind.
    let call_incl = |m: MetricId, c: CnodeId, l: LocationId| match d.metric(m).def().kind() {
        MetricKind::Exclusive => subtree(c).into_iter().map(|s| get(m, s, l)).sum(),
        _ => get(m, c, l),
    };
    let call_excl = |m: MetricId, c: CnodeId, l: LocationId| match d.metric(m).def().kind() {
        MetricKind::Inclusive => {
            get(m, c, l)
                - d.cnode(c)
                    .children()
                    .iter()
                    .map(|&k| get(m, k, l))
                    .sum::<f64>()
        }
        _ => get(m, c, l),
    };
    // Along the metric tree: a metric's own part, without its child metrics.
    let metric_excl = |m: MetricId, c: CnodeId, l: LocationId| {
        call_excl(m, c, l)
            - d.metric(m)
                .children()
                .iter()
                .map(|&k| call_excl(k, c, l))
                .sum::<f64>()
    };

    #[derive(Clone, Copy)]
    enum Flavour {
        Stored,
        CallInclusive,
        BothExclusive,
    }
    let flavours: [(Flavour, &str, &[&str]); 3] = [
        // CubeLib keeps every metric exclusive along the call tree once it has read it
        // (an inclusive metric's rows are turned into exclusive ones), and `-z stored`
        // shows that.
        (
            Flavour::Stored,
            "values as CubeLib keeps them",
            &["-z", "stored"],
        ),
        (
            Flavour::CallInclusive,
            "inclusive along the call tree",
            &["-z", "incl"],
        ),
        (
            Flavour::BothExclusive,
            "exclusive along both trees",
            &["-x", "excl", "-z", "excl"],
        ),
    ];
    for (which, flavour, args) in flavours {
        let mut all = vec!["-m", "all", "-c", "all", "-s", "csv2"];
        all.extend_from_slice(args);
        let text = run_tool(&dump, &all, &cubex);
        let (metrics, rows) = parse_csv2(&text);
        assert_eq!(metrics.len(), d.metric_ids().count(), "{text}");
        assert_eq!(
            rows.len(),
            d.cnode_ids().count() * d.location_ids().count(),
            "{text}"
        );
        for (file_cnode, file_loc, fields) in rows {
            let c = cnode_by_file_id[&file_cnode];
            let l = location_by_file_id[&file_loc];
            for (name, field) in metrics.iter().zip(&fields) {
                let m = d.metric_by_name(name).unwrap();
                let want = match which {
                    Flavour::Stored => call_excl(m, c, l),
                    Flavour::CallInclusive => call_incl(m, c, l),
                    Flavour::BothExclusive => metric_excl(m, c, l),
                };
                let got: f64 = field.parse().unwrap();
                assert!(
                    close(got, want),
                    "cube_dump, {flavour}: {name} at {} on {}: {got} != {want}",
                    paths[&c],
                    d.location(l).name()
                );
            }
        }
    }
    println!("CubeLib's tools accept the file and agree on every value");
}
