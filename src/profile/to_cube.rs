//! A [`Profile`] as a CUBE4 cube: the metric tree with units and descriptions, the
//! regions and call paths, and the system tree machine → node → process → locations.

use std::collections::BTreeMap;

use nccl_scorep_cube::{
    classes, units, CnodeId, Cube, CubeBuilder, CubeError, DataType, LocationGroupType, LocationId,
    LocationType, MetricDef, MetricId, MetricKind, Parameter, RegionDef,
};

use super::{Metric, Profile};

/// How each metric is described in the cube.
fn definition(metric: Metric) -> MetricDef {
    let (display, unit, data_type, description) = match metric {
        Metric::Time => (
            "Time",
            units::SECONDS,
            DataType::Double,
            "Time in NCCL intervals on every location: host threads, operations on the \
             streams, GPU kernels and proxy activity",
        ),
        Metric::HostTime => (
            "Host time",
            units::SECONDS,
            DataType::Double,
            "On CPU threads: NCCL API calls, enqueues, kernel launches, and the proxy \
             thread's idle, sleep and append states",
        ),
        Metric::ExecutionTime => (
            "Execution on the stream",
            units::SECONDS,
            DataType::Double,
            "On each communicator rank's ops stream: operations from the start of their \
             execution (first kernel channel, else the enqueue) to their completion",
        ),
        Metric::WaitLastRank => (
            "Waiting for the last rank",
            units::SECONDS,
            DataType::Double,
            "The part of a collective's execution before the last rank of the \
             communicator arrived (called it); collectives matched by comm hash, sequence \
             number and function",
        ),
        Metric::KernelTime => (
            "GPU kernel time",
            units::SECONDS,
            DataType::Double,
            "On GPU channels: NCCL kernel time per channel (GPU clock on the host clock)",
        ),
        Metric::ProxyTime => (
            "Proxy time",
            units::SECONDS,
            DataType::Double,
            "On proxy locations: proxy operations and their steps",
        ),
        Metric::ProxyGpuWait => (
            "Proxy: GPU wait",
            units::SECONDS,
            DataType::Double,
            "Proxy steps waiting for the GPU to fill (send) or consume (receive) a buffer",
        ),
        Metric::ProxyPeerWait => (
            "Proxy: peer wait",
            units::SECONDS,
            DataType::Double,
            "Send steps with their data ready, waiting for the receiver's credit",
        ),
        Metric::ProxyNetworkWait => (
            "Proxy: network wait",
            units::SECONDS,
            DataType::Double,
            "Steps posted to the network, waiting for it to complete them or for data",
        ),
        Metric::ProxyFlush => (
            "Proxy: flush",
            units::SECONDS,
            DataType::Double,
            "Receive steps flushing received data to the GPU",
        ),
        Metric::Visits => (
            "Visits",
            units::OCCURRENCES,
            DataType::Uint64,
            "Number of intervals",
        ),
        Metric::BytesSent => (
            "Bytes sent",
            units::BYTES,
            DataType::Uint64,
            "Bytes an operation sent, as the trace's collective and message records count \
             them",
        ),
        Metric::BytesReceived => (
            "Bytes received",
            units::BYTES,
            DataType::Uint64,
            "Bytes an operation received, as the trace's collective and message records \
             count them",
        ),
        Metric::BusBytes => (
            "Bus bytes",
            units::BYTES,
            DataType::Double,
            "The size NCCL's tests count for an operation times their bus-bandwidth \
             factor; divided by the execution time: the bus bandwidth",
        ),
        Metric::LostRecords => (
            "Lost records",
            units::OCCURRENCES,
            DataType::Uint64,
            "Records the plugin's buffers dropped (the trace's gaps)",
        ),
    };
    MetricDef::new(
        metric.unique_name(),
        display,
        unit,
        data_type,
        MetricKind::Exclusive,
    )
    .with_description(description)
}

/// The cube of `profile`.
pub fn to_cube(profile: &Profile) -> Result<Cube, CubeError> {
    let mut b = CubeBuilder::new();
    b.attribute(
        "creator",
        format!("nccl-scorep {}", env!("CARGO_PKG_VERSION")),
    );
    b.attribute("nccl-scorep.trace", profile.source.display().to_string());
    b.attribute(
        "nccl-scorep.collectives",
        (profile.complete_collectives + profile.incomplete_collectives).to_string(),
    );
    b.attribute(
        "nccl-scorep.incomplete_collectives",
        profile.incomplete_collectives.to_string(),
    );

    let mut metrics: BTreeMap<Metric, MetricId> = BTreeMap::new();
    for metric in Metric::ALL {
        let parent = metric.parent().map(|p| metrics[&p]);
        metrics.insert(metric, b.metric(parent, definition(metric))?);
    }

    let regions = profile
        .regions
        .iter()
        .map(|r| {
            b.region(
                RegionDef::new(&r.name)
                    .with_description(&r.description)
                    .with_role(&r.role)
                    .with_paradigm("nccl"),
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut cnodes: Vec<CnodeId> = Vec::with_capacity(profile.call_paths.len());
    // Call paths are defined after their parents (a parent is always read first).
    for path in &profile.call_paths {
        let parent = path.parent.map(|p| cnodes[p]);
        let cnode = b.cnode(regions[path.region], parent)?;
        for (key, value) in &path.parameters {
            b.cnode_parameter(cnode, key, Parameter::String(value.clone()))?;
        }
        cnodes.push(cnode);
    }

    let machine = b.system_tree_node(None, &profile.machine, classes::MACHINE)?;
    let mut nodes = BTreeMap::new();
    let mut groups = Vec::with_capacity(profile.processes.len());
    for process in &profile.processes {
        let host = if process.host.is_empty() {
            "node"
        } else {
            &process.host
        };
        let node = match nodes.get(host) {
            Some(&node) => node,
            None => {
                let node = b.system_tree_node(Some(machine), host, classes::NODE)?;
                nodes.insert(host.to_owned(), node);
                node
            }
        };
        let rank = u32::try_from(process.index).unwrap_or(u32::MAX >> 1);
        groups.push(b.location_group(node, &process.name, rank, LocationGroupType::Process)?);
    }
    let mut next_rank = vec![0u32; profile.processes.len()];
    let mut locations: Vec<LocationId> = Vec::with_capacity(profile.locations.len());
    for location in &profile.locations {
        let rank = &mut next_rank[location.process];
        let kind = if location.kind.on_accelerator() {
            LocationType::AcceleratorStream
        } else {
            LocationType::CpuThread
        };
        locations.push(b.location(groups[location.process], &location.name, *rank, kind)?);
        *rank += 1;
    }

    let mut cube = b.build()?;
    // A row per call path and metric, a value per location in it: refused before it is
    // built when the file could not hold it (thousands of call paths times tens of
    // thousands of locations would take gigabytes first).
    let mut rows: BTreeMap<Metric, std::collections::HashSet<usize>> = BTreeMap::new();
    for ((metric, call_path, _), value) in profile.values() {
        if value != 0.0 {
            rows.entry(metric).or_default().insert(call_path);
        }
    }
    for (metric, call_paths) in &rows {
        cube.check_rows(metrics[metric], call_paths.len())?;
    }
    for ((metric, call_path, location), value) in profile.values() {
        let (id, cnode, location) = (metrics[&metric], cnodes[call_path], locations[location]);
        if definition(metric).data_type() == DataType::Uint64 {
            cube.add(id, cnode, location, value.round().max(0.0) as u64)?;
        } else {
            cube.add(id, cnode, location, value)?;
        }
    }
    Ok(cube)
}
