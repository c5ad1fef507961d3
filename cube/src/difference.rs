//! The difference of two cubes, as Cube's `cube_diff` makes it: the union of both cubes'
//! dimensions, and at each point the minuend's value minus the subtrahend's.

use std::collections::HashMap;

use crate::error::CubeError;
use crate::model::{
    CnodeId, CubeBuilder, DataType, LocationGroupId, LocationGroupType, LocationId, LocationType,
    MetricDef, MetricId, MetricKind, Parameter, RegionId, SystemTreeNodeId,
};
use crate::values::{bits_are_zero, Value};
use crate::Cube;

/// The attribute that marks a cube as a difference.
pub const DIFFERENCE_ATTRIBUTE: &str = "nccl-scorep.difference";

/// Where each input's definitions went in the union, by handle index.
#[derive(Default)]
struct Mapping {
    metrics: Vec<MetricId>,
    regions: Vec<RegionId>,
    cnodes: Vec<CnodeId>,
    locations: Vec<LocationId>,
}

type CnodeKey = (Option<CnodeId>, RegionId, Vec<(String, Parameter)>);

/// The union of the dimensions, built one input after the other.
#[derive(Default)]
struct Union {
    builder: CubeBuilder,
    metrics: HashMap<String, (MetricId, MetricKind)>,
    regions: HashMap<(String, String), RegionId>,
    cnodes: HashMap<CnodeKey, CnodeId>,
    /// By parent, class and position among the parent's children of that class.
    system_nodes: HashMap<(Option<SystemTreeNodeId>, String, usize), SystemTreeNodeId>,
    /// By system-tree node and rank.
    groups: HashMap<(SystemTreeNodeId, u32, LocationGroupType), LocationGroupId>,
    /// By location group, rank and type.
    locations: HashMap<(LocationGroupId, u32, LocationType), LocationId>,
}

impl Union {
    /// Adds what `cube` defines that the union lacks, and returns where each of its
    /// definitions is in the union. Handles are visited in the order of definition, in
    /// which a parent always comes before its children.
    fn add(&mut self, cube: &Cube) -> Result<Mapping, CubeError> {
        let d = cube.dimensions();
        let b = &mut self.builder;
        let mut map = Mapping::default();

        for m in d.metric_ids() {
            let metric = d.metric(m);
            let def = metric.def();
            let id = match self.metrics.get(def.unique_name()) {
                Some(&(id, kind)) if kind == def.kind() => id,
                Some(&(_, kind)) => {
                    return Err(CubeError::KindMismatch {
                        metric: def.unique_name().to_string(),
                        minuend: kind,
                        subtrahend: def.kind(),
                    })
                }
                None => {
                    // Every metric is DOUBLE: a difference of counts can be negative.
                    let union_def = MetricDef::new(
                        def.unique_name(),
                        def.display_name(),
                        def.unit(),
                        DataType::Double,
                        def.kind(),
                    )
                    .with_description(def.description())
                    .with_url(def.url());
                    let parent = metric.parent().map(|p| map.metrics[p.index()]);
                    let id = b.metric(parent, union_def)?;
                    self.metrics
                        .insert(def.unique_name().to_string(), (id, def.kind()));
                    id
                }
            };
            map.metrics.push(id);
        }

        for r in d.region_ids() {
            let region = d.region(r);
            let key = (region.name().to_string(), region.module().to_string());
            let id = match self.regions.get(&key) {
                Some(&id) => id,
                None => {
                    let id = b.region(region.clone())?;
                    self.regions.insert(key, id);
                    id
                }
            };
            map.regions.push(id);
        }

        for c in d.cnode_ids() {
            let cnode = d.cnode(c);
            let parent = cnode.parent().map(|p| map.cnodes[p.index()]);
            let region = map.regions[cnode.region().index()];
            // Parameters match as a set.
            let mut parameters = cnode.parameters().to_vec();
            parameters.sort();
            let key = (parent, region, parameters);
            let id = match self.cnodes.get(&key) {
                Some(&id) => id,
                None => {
                    let id = b.cnode(region, parent)?;
                    for (k, v) in cnode.parameters() {
                        b.cnode_parameter(id, k.clone(), v.clone())?;
                    }
                    self.cnodes.insert(key, id);
                    id
                }
            };
            map.cnodes.push(id);
        }

        // The system tree is matched by its shape, not by names: host names, process and
        // thread names differ from run to run of one job, its ranks do not.
        let mut system_nodes = Vec::with_capacity(d.stns.len());
        let mut siblings: HashMap<(Option<SystemTreeNodeId>, &str), usize> = HashMap::new();
        for s in d.system_tree_node_ids() {
            let node = d.system_tree_node(s);
            let parent = node.parent().map(|p| system_nodes[p.index()]);
            let position = siblings.entry((parent, node.class())).or_default();
            let key = (parent, node.class().to_string(), *position);
            *position += 1;
            let id = match self.system_nodes.get(&key) {
                Some(&id) => id,
                None => {
                    let id = b.system_tree_node(parent, node.name(), node.class())?;
                    self.system_nodes.insert(key, id);
                    id
                }
            };
            system_nodes.push(id);
        }

        let mut groups = Vec::with_capacity(d.groups.len());
        for g in d.location_group_ids() {
            let group = d.location_group(g);
            let parent = system_nodes[group.parent().index()];
            let key = (parent, group.rank(), group.group_type());
            let id = match self.groups.get(&key) {
                Some(&id) => id,
                None => {
                    let id =
                        b.location_group(parent, group.name(), group.rank(), group.group_type())?;
                    self.groups.insert(key, id);
                    id
                }
            };
            groups.push(id);
        }

        for l in d.location_ids() {
            let location = d.location(l);
            let group = groups[location.group().index()];
            let key = (group, location.rank(), location.location_type());
            let id = match self.locations.get(&key) {
                Some(&id) => id,
                None => {
                    let id = b.location(
                        group,
                        location.name(),
                        location.rank(),
                        location.location_type(),
                    )?;
                    self.locations.insert(key, id);
                    id
                }
            };
            map.locations.push(id);
        }
        Ok(map)
    }
}

/// Adds `sign` × each value of `cube` to `out` at the mapped points.
fn accumulate(out: &mut Cube, cube: &Cube, map: &Mapping, sign: f64) -> Result<(), CubeError> {
    let d = cube.dimensions();
    for m in d.metric_ids() {
        let data_type = d.metric(m).def().data_type();
        let metric = map.metrics[m.index()];
        for (cnode, row) in cube.rows(m) {
            let cnode = map.cnodes[cnode as usize];
            for (location, &bits) in row.iter().enumerate() {
                if bits_are_zero(data_type, bits) {
                    continue;
                }
                let value = Value::from_bits(data_type, bits).as_f64();
                out.add(metric, cnode, map.locations[location], sign * value)?;
            }
        }
    }
    Ok(())
}

/// The difference `minuend − subtrahend`, as `cube_diff minuend subtrahend` makes it.
///
/// * **Dimensions** are the union of both cubes'. Metrics match by unique name and keep
///   the minuend's place in the metric tree; a metric only in the subtrahend goes under
///   its parent's match. Regions match by name and module, call-tree nodes by region,
///   parameters (as a set) and matched parent. The system tree matches by its shape, not
///   by names (host, process and thread names change from run to run of one job, its
///   ranks do not): system-tree nodes by class and position among their parent's children
///   of that class, location groups by rank and type under the matched node, locations by
///   rank and type under the matched group. What does not match is added after the minuend's
///   definitions; definitions (display names, units, classes, types, ...) come from the
///   minuend where both have them.
/// * **Values**: every metric of the difference is `DOUBLE` (a difference of counts can be
///   negative); at each metric, call-tree node and location the minuend's value minus the
///   subtrahend's, a missing value counting as zero. `UINT64` values above 2^53 lose
///   precision as doubles. Inclusive metrics are subtracted as stored, so the difference
///   of two inclusive metrics is inclusive too; a metric that is exclusive in one cube and
///   inclusive in the other is a [`CubeError::KindMismatch`]. If one cube has two nodes
///   that match each other (such as two calls of one region with the same parameters),
///   their values are summed.
/// * **Attributes**: `creator` = `nccl-scorep-cube difference`, [`DIFFERENCE_ATTRIBUTE`]
///   = `minuend − subtrahend`, and `nccl-scorep.minuend.creator` and
///   `nccl-scorep.subtrahend.creator` with the inputs' `creator` attributes where they
///   have one. Mirrors are the union of both cubes'.
pub fn difference(minuend: &Cube, subtrahend: &Cube) -> Result<Cube, CubeError> {
    let mut union = Union::default();
    let b = &mut union.builder;
    b.attribute("creator", "nccl-scorep-cube difference");
    b.attribute(DIFFERENCE_ATTRIBUTE, "minuend − subtrahend");
    for (role, cube) in [("minuend", minuend), ("subtrahend", subtrahend)] {
        let creator = cube
            .dimensions()
            .attributes()
            .iter()
            .find(|(k, _)| k == "creator");
        if let Some((_, value)) = creator {
            b.attribute(format!("nccl-scorep.{role}.creator"), value.clone());
        }
    }
    let mut mirrors: Vec<String> = Vec::new();
    for m in minuend
        .dimensions()
        .mirrors()
        .iter()
        .chain(subtrahend.dimensions().mirrors())
    {
        if !mirrors.contains(m) {
            mirrors.push(m.clone());
        }
    }
    for m in mirrors {
        b.mirror(m);
    }

    let minuend_map = union.add(minuend)?;
    let subtrahend_map = union.add(subtrahend)?;
    let mut out = union.builder.build()?;
    accumulate(&mut out, minuend, &minuend_map, 1.0)?;
    accumulate(&mut out, subtrahend, &subtrahend_map, -1.0)?;
    Ok(out)
}
