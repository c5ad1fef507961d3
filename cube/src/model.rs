//! The three dimensions of a cube (metrics, call tree, system tree), how they are built,
//! and the orders in which the file lists them.

use std::collections::HashSet;
use std::fmt;

use crate::error::CubeError;

macro_rules! handle {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub(crate) u32);

        impl $name {
            /// Position in the order of definition, starting at 0. Two cubes with the same
            /// dimensions (see [`Cube::empty_like`](crate::Cube::empty_like)) share their
            /// handles, so this is also how to match them up.
            pub fn index(self) -> usize {
                self.0 as usize
            }

            /// The handle defined at `index` in the order of definition. Whether it belongs to
            /// a given cube is checked where it is used.
            pub fn from_index(index: usize) -> Self {
                Self(u32::try_from(index).unwrap_or(u32::MAX))
            }

            pub(crate) const KIND: &'static str = $kind;
        }
    };
}

handle!(
    /// A metric of a cube.
    MetricId,
    "metric"
);
handle!(
    /// A region (function, API call, kernel, ...) that call-tree nodes call.
    RegionId,
    "region"
);
handle!(
    /// A node of the call tree (a call path).
    CnodeId,
    "cnode"
);
handle!(
    /// A node of the system tree above the location groups (machine, node, ...).
    SystemTreeNodeId,
    "system tree node"
);
handle!(
    /// A location group (a process).
    LocationGroupId,
    "location group"
);
handle!(
    /// A location: a column of every metric's values (a thread, a GPU stream, ...).
    LocationId,
    "location"
);

/// Units of measurement as Score-P and Scalasca spell them.
pub mod units {
    /// Seconds.
    pub const SECONDS: &str = "sec";
    /// Bytes.
    pub const BYTES: &str = "bytes";
    /// Occurrences (visits, counts).
    pub const OCCURRENCES: &str = "occ";
}

/// System-tree node classes as Score-P writes them.
pub mod classes {
    /// The whole machine (cluster).
    pub const MACHINE: &str = "machine";
    /// A compute node (host).
    pub const NODE: &str = "node";
}

/// The type of a metric's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DataType {
    /// IEEE 754 double precision (`DOUBLE` in the file).
    Double,
    /// Unsigned 64-bit integer (`UINT64` in the file). CubeLib reads values above
    /// `0xFFFF_FFFF_FFFF_FBFF` through a double and so not exactly.
    Uint64,
}

impl DataType {
    /// The spelling in the `<dtype>` element of `anchor.xml`.
    pub fn cube_name(self) -> &'static str {
        match self {
            DataType::Double => "DOUBLE",
            DataType::Uint64 => "UINT64",
        }
    }

    /// The data type spelled `name` in a `<dtype>` element, if it is one of these.
    pub fn from_cube_name(name: &str) -> Option<Self> {
        [DataType::Double, DataType::Uint64]
            .into_iter()
            .find(|t| t.cube_name() == name)
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.cube_name())
    }
}

/// How a metric's stored values relate to the call tree, as Cube defines it.
///
/// The values passed to [`Cube::set`](crate::Cube::set) are stored as they are, so they
/// must be of the metric's kind:
///
/// * [`Exclusive`](MetricKind::Exclusive): the value at a call-tree node does not include
///   its child nodes. Cube adds the subtree up when a node is shown collapsed. This is how
///   Score-P stores time and visits.
/// * [`Inclusive`](MetricKind::Inclusive): the value at a call-tree node includes
///   everything below it. Cube subtracts the children to show a node's own share.
///
/// In the metric tree, a parent metric's values always include its child metrics' values
/// (a child metric is a part of its parent; Cube subtracts the children to show the part
/// of the parent that no child explains), whatever the kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MetricKind {
    /// Values exclude the child call-tree nodes (`EXCLUSIVE`).
    Exclusive,
    /// Values include the child call-tree nodes (`INCLUSIVE`).
    Inclusive,
}

impl MetricKind {
    /// The spelling in the `type` attribute of a `<metric>` element.
    pub fn cube_name(self) -> &'static str {
        match self {
            MetricKind::Exclusive => "EXCLUSIVE",
            MetricKind::Inclusive => "INCLUSIVE",
        }
    }

    /// The kind spelled `name` in a `type` attribute, if it is one of these.
    pub fn from_cube_name(name: &str) -> Option<Self> {
        [MetricKind::Exclusive, MetricKind::Inclusive]
            .into_iter()
            .find(|k| k.cube_name() == name)
    }
}

impl fmt::Display for MetricKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.cube_name())
    }
}

/// The type of a location group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LocationGroupType {
    /// An operating-system process, `process` in the file.
    Process,
    /// An accelerator device, `accelerator` in the file (CubeLib 4.7 and later).
    Accelerator,
}

impl LocationGroupType {
    /// The spelling in the `<type>` element of a `<locationgroup>`.
    pub fn cube_name(self) -> &'static str {
        match self {
            LocationGroupType::Process => "process",
            LocationGroupType::Accelerator => "accelerator",
        }
    }

    /// The type spelled `name` in a `<type>` element, if it is one of these.
    pub fn from_cube_name(name: &str) -> Option<Self> {
        [LocationGroupType::Process, LocationGroupType::Accelerator]
            .into_iter()
            .find(|t| t.cube_name() == name)
    }
}

/// The type of a location.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LocationType {
    /// A CPU thread (Cube's `CUBE_LOCATION_TYPE_CPU_THREAD`), `thread` in the file.
    CpuThread,
    /// A stream of an accelerator such as a GPU (Cube's
    /// `CUBE_LOCATION_TYPE_ACCELERATOR_STREAM`), `accelerator stream` in the file
    /// (CubeLib 4.7 and later).
    AcceleratorStream,
}

impl LocationType {
    /// The spelling in the `<type>` element of a `<location>`.
    pub fn cube_name(self) -> &'static str {
        match self {
            LocationType::CpuThread => "thread",
            LocationType::AcceleratorStream => "accelerator stream",
        }
    }

    /// The type spelled `name` in a `<type>` element, if it is one of these.
    pub fn from_cube_name(name: &str) -> Option<Self> {
        [LocationType::CpuThread, LocationType::AcceleratorStream]
            .into_iter()
            .find(|t| t.cube_name() == name)
    }
}

/// A metric's definition. Unique name, display name, unit, data type and kind are
/// required; description and URL are optional.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricDef {
    unique_name: String,
    display_name: String,
    unit: String,
    data_type: DataType,
    kind: MetricKind,
    description: String,
    url: String,
}

impl MetricDef {
    /// A metric named `unique_name` (unique within the cube), shown as `display_name`,
    /// measured in `unit` (see [`units`]).
    pub fn new(
        unique_name: impl Into<String>,
        display_name: impl Into<String>,
        unit: impl Into<String>,
        data_type: DataType,
        kind: MetricKind,
    ) -> Self {
        Self {
            unique_name: unique_name.into(),
            display_name: display_name.into(),
            unit: unit.into(),
            data_type,
            kind,
            description: String::new(),
            url: String::new(),
        }
    }

    /// Sets the description Cube shows for the metric.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// Sets the URL of the metric's documentation.
    pub fn with_url(mut self, url: impl Into<String>) -> Self {
        self.url = url.into();
        self
    }

    /// The unique name.
    pub fn unique_name(&self) -> &str {
        &self.unique_name
    }
    /// The display name.
    pub fn display_name(&self) -> &str {
        &self.display_name
    }
    /// The unit of measurement.
    pub fn unit(&self) -> &str {
        &self.unit
    }
    /// The type of the values.
    pub fn data_type(&self) -> DataType {
        self.data_type
    }
    /// Exclusive or inclusive along the call tree.
    pub fn kind(&self) -> MetricKind {
        self.kind
    }
    /// The description (empty if none).
    pub fn description(&self) -> &str {
        &self.description
    }
    /// The documentation URL (empty if none).
    pub fn url(&self) -> &str {
        &self.url
    }
}

/// A region's definition: what a call-tree node calls.
#[derive(Clone, Debug, PartialEq)]
pub struct RegionDef {
    name: String,
    mangled_name: Option<String>,
    module: String,
    begin_line: Option<u32>,
    end_line: Option<u32>,
    paradigm: String,
    role: String,
    url: String,
    description: String,
}

impl RegionDef {
    /// A region named `name`, of paradigm and role `unknown`, without source location.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            mangled_name: None,
            module: String::new(),
            begin_line: None,
            end_line: None,
            paradigm: "unknown".into(),
            role: "unknown".into(),
            url: String::new(),
            description: String::new(),
        }
    }

    /// The mangled name (defaults to the name).
    pub fn with_mangled_name(mut self, mangled_name: impl Into<String>) -> Self {
        self.mangled_name = Some(mangled_name.into());
        self
    }

    /// The module or source file (Cube's `mod`).
    pub fn with_module(mut self, module: impl Into<String>) -> Self {
        self.module = module.into();
        self
    }

    /// The first and last source line.
    pub fn with_lines(mut self, begin: u32, end: u32) -> Self {
        self.begin_line = Some(begin);
        self.end_line = Some(end);
        self
    }

    /// The paradigm as Score-P names it: `user`, `compiler`, `mpi`, `cuda`, `measurement`, ...
    pub fn with_paradigm(mut self, paradigm: impl Into<String>) -> Self {
        self.paradigm = paradigm.into();
        self
    }

    /// The role as Score-P names it: `function`, `wrapper`, `kernel`, `artificial`, ...
    pub fn with_role(mut self, role: impl Into<String>) -> Self {
        self.role = role.into();
        self
    }

    /// A documentation URL.
    pub fn with_url(mut self, url: impl Into<String>) -> Self {
        self.url = url.into();
        self
    }

    /// A description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The mangled name (the name unless set).
    pub fn mangled_name(&self) -> &str {
        self.mangled_name.as_deref().unwrap_or(&self.name)
    }
    /// The module or source file (empty if none).
    pub fn module(&self) -> &str {
        &self.module
    }
    /// The first and last source line, if known.
    pub fn lines(&self) -> (Option<u32>, Option<u32>) {
        (self.begin_line, self.end_line)
    }
    /// The paradigm.
    pub fn paradigm(&self) -> &str {
        &self.paradigm
    }
    /// The role.
    pub fn role(&self) -> &str {
        &self.role
    }
    /// The documentation URL (empty if none).
    pub fn url(&self) -> &str {
        &self.url
    }
    /// The description (empty if none).
    pub fn description(&self) -> &str {
        &self.description
    }
}

/// A parameter of a call-tree node (Score-P's parameter-based profiling: the node is
/// the call with this parameter value).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Parameter {
    /// An integer parameter (`partype="numeric"`).
    Numeric(i64),
    /// A string parameter (`partype="string"`).
    String(String),
}

/// A metric as defined in a cube.
#[derive(Clone, Debug)]
pub struct Metric {
    def: MetricDef,
    parent: Option<MetricId>,
    children: Vec<MetricId>,
}

impl Metric {
    /// Its definition.
    pub fn def(&self) -> &MetricDef {
        &self.def
    }
    /// The parent metric, if any.
    pub fn parent(&self) -> Option<MetricId> {
        self.parent
    }
    /// The child metrics, in the order of definition.
    pub fn children(&self) -> &[MetricId] {
        &self.children
    }
}

/// A call-tree node as defined in a cube.
#[derive(Clone, Debug)]
pub struct Cnode {
    region: RegionId,
    parent: Option<CnodeId>,
    children: Vec<CnodeId>,
    parameters: Vec<(String, Parameter)>,
}

impl Cnode {
    /// The region it calls.
    pub fn region(&self) -> RegionId {
        self.region
    }
    /// The calling node, if any.
    pub fn parent(&self) -> Option<CnodeId> {
        self.parent
    }
    /// The called nodes, in the order of definition.
    pub fn children(&self) -> &[CnodeId] {
        &self.children
    }
    /// The parameters, in the order of definition.
    pub fn parameters(&self) -> &[(String, Parameter)] {
        &self.parameters
    }
}

/// A system-tree node as defined in a cube.
#[derive(Clone, Debug)]
pub struct SystemTreeNode {
    name: String,
    class: String,
    parent: Option<SystemTreeNodeId>,
    children: Vec<SystemTreeNodeId>,
    groups: Vec<LocationGroupId>,
}

impl SystemTreeNode {
    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The class (`machine`, `node`, ...).
    pub fn class(&self) -> &str {
        &self.class
    }
    /// The parent node, if any.
    pub fn parent(&self) -> Option<SystemTreeNodeId> {
        self.parent
    }
    /// The child nodes, in the order of definition.
    pub fn children(&self) -> &[SystemTreeNodeId] {
        &self.children
    }
    /// The location groups directly below, in the order of definition.
    pub fn location_groups(&self) -> &[LocationGroupId] {
        &self.groups
    }
}

/// A location group as defined in a cube.
#[derive(Clone, Debug)]
pub struct LocationGroup {
    name: String,
    rank: u32,
    group_type: LocationGroupType,
    parent: SystemTreeNodeId,
    locations: Vec<LocationId>,
}

impl LocationGroup {
    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The rank (for a process: its rank in the job).
    pub fn rank(&self) -> u32 {
        self.rank
    }
    /// The type.
    pub fn group_type(&self) -> LocationGroupType {
        self.group_type
    }
    /// The system-tree node it belongs to.
    pub fn parent(&self) -> SystemTreeNodeId {
        self.parent
    }
    /// Its locations, in the order of definition.
    pub fn locations(&self) -> &[LocationId] {
        &self.locations
    }
}

/// A location as defined in a cube.
#[derive(Clone, Debug)]
pub struct Location {
    name: String,
    rank: u32,
    location_type: LocationType,
    group: LocationGroupId,
}

impl Location {
    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The rank within its group (thread number, stream number, ...).
    pub fn rank(&self) -> u32 {
        self.rank
    }
    /// The type.
    pub fn location_type(&self) -> LocationType {
        self.location_type
    }
    /// The group it belongs to.
    pub fn group(&self) -> LocationGroupId {
        self.group
    }
}

/// Defines the dimensions of a cube; [`build`](CubeBuilder::build) turns it into a
/// [`Cube`](crate::Cube) that takes values.
///
/// Every definition may come in any order (a child after its parent): the file's ids and
/// orders are computed when the cube is built.
#[derive(Clone, Debug, Default)]
pub struct CubeBuilder {
    attrs: Vec<(String, String)>,
    mirrors: Vec<String>,
    metrics: Vec<Metric>,
    metric_names: HashSet<String>,
    regions: Vec<RegionDef>,
    cnodes: Vec<Cnode>,
    stns: Vec<SystemTreeNode>,
    groups: Vec<LocationGroup>,
    locations: Vec<Location>,
}

fn next_handle(len: usize, what: &str) -> Result<u32, CubeError> {
    // Cube's index entries and ranks are 32-bit; i32::MAX keeps every id a valid `int` too.
    match i32::try_from(len) {
        Ok(n) => Ok(n as u32),
        Err(_) => Err(CubeError::TooLarge(format!("the number of {what}s"))),
    }
}

fn check<H: Copy>(index: u32, len: usize, kind: &'static str, handle: H) -> Result<H, CubeError> {
    if (index as usize) < len {
        Ok(handle)
    } else {
        Err(CubeError::UnknownHandle { kind, index })
    }
}

fn check_rank(rank: u32) -> Result<u32, CubeError> {
    if i32::try_from(rank).is_ok() {
        Ok(rank)
    } else {
        Err(CubeError::TooLarge(format!("rank {rank}")))
    }
}

impl CubeBuilder {
    /// An empty cube definition.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an attribute of the whole cube (`<attr key=... value=.../>`), for example the
    /// program that wrote it.
    pub fn attribute(&mut self, key: impl Into<String>, value: impl Into<String>) -> &mut Self {
        self.attrs.push((key.into(), value.into()));
        self
    }

    /// Adds a documentation mirror: Cube replaces `@mirror@` at the start of metric and
    /// region URLs by the first mirror it can reach.
    pub fn mirror(&mut self, url: impl Into<String>) -> &mut Self {
        self.mirrors.push(url.into());
        self
    }

    /// Defines a metric below `parent` (a root metric if `None`).
    pub fn metric(
        &mut self,
        parent: Option<MetricId>,
        def: MetricDef,
    ) -> Result<MetricId, CubeError> {
        if let Some(p) = parent {
            check(p.0, self.metrics.len(), MetricId::KIND, p)?;
        }
        if def.unique_name.is_empty() {
            return Err(CubeError::EmptyMetricName);
        }
        if self.metric_names.contains(&def.unique_name) {
            return Err(CubeError::DuplicateMetric(def.unique_name));
        }
        let id = MetricId(next_handle(self.metrics.len(), "metric")?);
        self.metric_names.insert(def.unique_name.clone());
        self.metrics.push(Metric {
            def,
            parent,
            children: Vec::new(),
        });
        if let Some(p) = parent {
            self.metrics[p.index()].children.push(id);
        }
        Ok(id)
    }

    /// Defines a region.
    pub fn region(&mut self, def: RegionDef) -> Result<RegionId, CubeError> {
        for line in [def.begin_line, def.end_line].into_iter().flatten() {
            if i32::try_from(line).is_err() {
                return Err(CubeError::TooLarge(format!("source line {line}")));
            }
        }
        let id = RegionId(next_handle(self.regions.len(), "region")?);
        self.regions.push(def);
        Ok(id)
    }

    /// Defines a call-tree node that calls `region` from `parent` (a root if `None`).
    pub fn cnode(
        &mut self,
        region: RegionId,
        parent: Option<CnodeId>,
    ) -> Result<CnodeId, CubeError> {
        check(region.0, self.regions.len(), RegionId::KIND, region)?;
        if let Some(p) = parent {
            check(p.0, self.cnodes.len(), CnodeId::KIND, p)?;
        }
        let id = CnodeId(next_handle(self.cnodes.len(), "cnode")?);
        self.cnodes.push(Cnode {
            region,
            parent,
            children: Vec::new(),
            parameters: Vec::new(),
        });
        if let Some(p) = parent {
            self.cnodes[p.index()].children.push(id);
        }
        Ok(id)
    }

    /// Adds a parameter to a call-tree node.
    pub fn cnode_parameter(
        &mut self,
        cnode: CnodeId,
        key: impl Into<String>,
        value: Parameter,
    ) -> Result<&mut Self, CubeError> {
        check(cnode.0, self.cnodes.len(), CnodeId::KIND, cnode)?;
        self.cnodes[cnode.index()]
            .parameters
            .push((key.into(), value));
        Ok(self)
    }

    /// Defines a system-tree node of class `class` (see [`classes`]) below `parent` (a root
    /// if `None`).
    pub fn system_tree_node(
        &mut self,
        parent: Option<SystemTreeNodeId>,
        name: impl Into<String>,
        class: impl Into<String>,
    ) -> Result<SystemTreeNodeId, CubeError> {
        if let Some(p) = parent {
            check(p.0, self.stns.len(), SystemTreeNodeId::KIND, p)?;
        }
        let id = SystemTreeNodeId(next_handle(self.stns.len(), "system tree node")?);
        self.stns.push(SystemTreeNode {
            name: name.into(),
            class: class.into(),
            parent,
            children: Vec::new(),
            groups: Vec::new(),
        });
        if let Some(p) = parent {
            self.stns[p.index()].children.push(id);
        }
        Ok(id)
    }

    /// Defines a location group (a process of rank `rank`) below a system-tree node.
    pub fn location_group(
        &mut self,
        parent: SystemTreeNodeId,
        name: impl Into<String>,
        rank: u32,
        group_type: LocationGroupType,
    ) -> Result<LocationGroupId, CubeError> {
        check(parent.0, self.stns.len(), SystemTreeNodeId::KIND, parent)?;
        let rank = check_rank(rank)?;
        let id = LocationGroupId(next_handle(self.groups.len(), "location group")?);
        self.groups.push(LocationGroup {
            name: name.into(),
            rank,
            group_type,
            parent,
            locations: Vec::new(),
        });
        self.stns[parent.index()].groups.push(id);
        Ok(id)
    }

    /// Defines a location (a thread, a GPU stream, ...) of rank `rank` within its group.
    pub fn location(
        &mut self,
        group: LocationGroupId,
        name: impl Into<String>,
        rank: u32,
        location_type: LocationType,
    ) -> Result<LocationId, CubeError> {
        check(group.0, self.groups.len(), LocationGroupId::KIND, group)?;
        let rank = check_rank(rank)?;
        let id = LocationId(next_handle(self.locations.len(), "location")?);
        self.locations.push(Location {
            name: name.into(),
            rank,
            location_type,
            group,
        });
        self.groups[group.index()].locations.push(id);
        Ok(id)
    }

    /// Checks what Cube requires of the dimensions, fixes the file's orders and returns a
    /// cube without values.
    pub fn build(self) -> Result<crate::Cube, CubeError> {
        Dimensions::new(self).map(crate::Cube::new)
    }
}

/// The dimensions of a built cube, with the orders the file lists them in.
#[derive(Clone, Debug)]
pub struct Dimensions {
    pub(crate) attrs: Vec<(String, String)>,
    pub(crate) mirrors: Vec<String>,
    pub(crate) metrics: Vec<Metric>,
    pub(crate) regions: Vec<RegionDef>,
    pub(crate) cnodes: Vec<Cnode>,
    pub(crate) stns: Vec<SystemTreeNode>,
    pub(crate) groups: Vec<LocationGroup>,
    pub(crate) locations: Vec<Location>,
    /// Metrics in depth-first order; a metric's file id is its position here.
    pub(crate) metric_order: Vec<MetricId>,
    pub(crate) metric_file_id: Vec<u32>,
    /// A cnode's file id: its position in depth-first order.
    pub(crate) cnode_file_id: Vec<u32>,
    /// A cnode's row number for inclusive metrics (Cube's breadth-wise enumeration).
    pub(crate) cnode_wide_pos: Vec<u32>,
    /// File ids of system-tree nodes, location groups and locations: their positions in
    /// document order. A location's file id is also its column in the data files.
    pub(crate) stn_file_id: Vec<u32>,
    pub(crate) group_file_id: Vec<u32>,
    pub(crate) location_order: Vec<LocationId>,
    pub(crate) location_file_id: Vec<u32>,
}

/// Positions of `order`'s elements, indexed by handle.
fn positions(order: &[u32], len: usize) -> Vec<u32> {
    let mut pos = vec![0; len];
    for (i, &h) in order.iter().enumerate() {
        pos[h as usize] = i as u32;
    }
    pos
}

/// Depth-first (pre-order) enumeration of a forest: a node, then each child's subtree.
/// This is Cube's enumeration of the call tree for exclusive metrics.
pub(crate) fn depth_first(roots: &[u32], children: impl Fn(u32) -> Vec<u32>) -> Vec<u32> {
    let mut out = Vec::new();
    let mut stack: Vec<u32> = roots.iter().rev().copied().collect();
    while let Some(n) = stack.pop() {
        out.push(n);
        stack.extend(children(n).into_iter().rev());
    }
    out
}

/// Cube's breadth-wise enumeration of a forest, used for inclusive metrics: per root, the
/// root, then the list of each node's children, the nodes taken in depth-first order.
pub(crate) fn wide_first(roots: &[u32], children: impl Fn(u32) -> Vec<u32>) -> Vec<u32> {
    let mut out = Vec::new();
    for &root in roots {
        out.push(root);
        let mut stack = vec![root];
        while let Some(n) = stack.pop() {
            let kids = children(n);
            out.extend(kids.iter().copied());
            stack.extend(kids.into_iter().rev());
        }
    }
    out
}

impl Dimensions {
    fn new(b: CubeBuilder) -> Result<Self, CubeError> {
        if b.metrics.is_empty() {
            return Err(CubeError::Missing("metric"));
        }
        if b.cnodes.is_empty() {
            return Err(CubeError::Missing("call-tree node"));
        }
        if b.stns.is_empty() {
            return Err(CubeError::Missing("system tree node"));
        }
        if b.locations.is_empty() {
            return Err(CubeError::Missing("location"));
        }
        if let Some(g) = b.groups.iter().find(|g| g.locations.is_empty()) {
            return Err(CubeError::EmptyLocationGroup(g.name.clone()));
        }

        let metric_roots: Vec<u32> = (0..b.metrics.len() as u32)
            .filter(|&m| b.metrics[m as usize].parent.is_none())
            .collect();
        let metric_order = depth_first(&metric_roots, |m| {
            b.metrics[m as usize].children.iter().map(|c| c.0).collect()
        });

        let cnode_roots: Vec<u32> = (0..b.cnodes.len() as u32)
            .filter(|&c| b.cnodes[c as usize].parent.is_none())
            .collect();
        let cnode_kids =
            |c: u32| -> Vec<u32> { b.cnodes[c as usize].children.iter().map(|k| k.0).collect() };
        let cnode_order = depth_first(&cnode_roots, cnode_kids);
        let cnode_wide = wide_first(&cnode_roots, cnode_kids);

        // Document order of the system tree: a node, its location groups with their
        // locations, then its child nodes. CubeLib numbers them in this order while it
        // parses, and a location's number is its column in the data files.
        let stn_roots: Vec<u32> = (0..b.stns.len() as u32)
            .filter(|&s| b.stns[s as usize].parent.is_none())
            .collect();
        let stn_order = depth_first(&stn_roots, |s| {
            b.stns[s as usize].children.iter().map(|c| c.0).collect()
        });
        let mut group_order = Vec::with_capacity(b.groups.len());
        let mut location_order = Vec::with_capacity(b.locations.len());
        for &s in &stn_order {
            for &g in &b.stns[s as usize].groups {
                group_order.push(g.0);
                location_order.extend(b.groups[g.index()].locations.iter().map(|l| l.0));
            }
        }

        Ok(Self {
            metric_file_id: positions(&metric_order, b.metrics.len()),
            metric_order: metric_order.into_iter().map(MetricId).collect(),
            cnode_file_id: positions(&cnode_order, b.cnodes.len()),
            cnode_wide_pos: positions(&cnode_wide, b.cnodes.len()),
            stn_file_id: positions(&stn_order, b.stns.len()),
            group_file_id: positions(&group_order, b.groups.len()),
            location_file_id: positions(&location_order, b.locations.len()),
            location_order: location_order.into_iter().map(LocationId).collect(),
            attrs: b.attrs,
            mirrors: b.mirrors,
            metrics: b.metrics,
            regions: b.regions,
            cnodes: b.cnodes,
            stns: b.stns,
            groups: b.groups,
            locations: b.locations,
        })
    }

    /// The cube's attributes, in the order of definition.
    pub fn attributes(&self) -> &[(String, String)] {
        &self.attrs
    }

    /// The documentation mirrors, in the order of definition.
    pub fn mirrors(&self) -> &[String] {
        &self.mirrors
    }

    /// Every metric handle, in the order of definition.
    pub fn metric_ids(&self) -> impl Iterator<Item = MetricId> + '_ {
        (0..self.metrics.len() as u32).map(MetricId)
    }
    /// A metric (panics on a handle of another cube).
    pub fn metric(&self, id: MetricId) -> &Metric {
        &self.metrics[id.index()]
    }
    /// The metric with this unique name.
    pub fn metric_by_name(&self, unique_name: &str) -> Option<MetricId> {
        self.metric_ids()
            .find(|&m| self.metric(m).def.unique_name == unique_name)
    }

    /// Every region handle, in the order of definition.
    pub fn region_ids(&self) -> impl Iterator<Item = RegionId> + '_ {
        (0..self.regions.len() as u32).map(RegionId)
    }
    /// A region (panics on a handle of another cube).
    pub fn region(&self, id: RegionId) -> &RegionDef {
        &self.regions[id.index()]
    }

    /// Every call-tree node handle, in the order of definition.
    pub fn cnode_ids(&self) -> impl Iterator<Item = CnodeId> + '_ {
        (0..self.cnodes.len() as u32).map(CnodeId)
    }
    /// A call-tree node (panics on a handle of another cube).
    pub fn cnode(&self, id: CnodeId) -> &Cnode {
        &self.cnodes[id.index()]
    }
    /// The id a call-tree node has in the file (`<cnode id=...>`): its position in
    /// depth-first order.
    pub fn cnode_file_id(&self, id: CnodeId) -> u32 {
        self.cnode_file_id[id.index()]
    }

    /// Every system-tree node handle, in the order of definition.
    pub fn system_tree_node_ids(&self) -> impl Iterator<Item = SystemTreeNodeId> + '_ {
        (0..self.stns.len() as u32).map(SystemTreeNodeId)
    }
    /// A system-tree node (panics on a handle of another cube).
    pub fn system_tree_node(&self, id: SystemTreeNodeId) -> &SystemTreeNode {
        &self.stns[id.index()]
    }

    /// Every location group handle, in the order of definition.
    pub fn location_group_ids(&self) -> impl Iterator<Item = LocationGroupId> + '_ {
        (0..self.groups.len() as u32).map(LocationGroupId)
    }
    /// A location group (panics on a handle of another cube).
    pub fn location_group(&self, id: LocationGroupId) -> &LocationGroup {
        &self.groups[id.index()]
    }

    /// Every location handle, in the order of definition.
    pub fn location_ids(&self) -> impl Iterator<Item = LocationId> + '_ {
        (0..self.locations.len() as u32).map(LocationId)
    }
    /// A location (panics on a handle of another cube).
    pub fn location(&self, id: LocationId) -> &Location {
        &self.locations[id.index()]
    }
    /// The id a location has in the file (`<location Id=...>`), which is also its column in
    /// the data files: its position in document order.
    pub fn location_file_id(&self, id: LocationId) -> u32 {
        self.location_file_id[id.index()]
    }

    /// Whether the file needs anchor syntax 4.7 (accelerator locations or groups) or 4.4
    /// suffices, which older Cube versions read too.
    pub fn anchor_version(&self) -> &'static str {
        let accel = self
            .locations
            .iter()
            .any(|l| l.location_type == LocationType::AcceleratorStream)
            || self
                .groups
                .iter()
                .any(|g| g.group_type == LocationGroupType::Accelerator);
        if accel {
            "4.7"
        } else {
            "4.4"
        }
    }

    /// The row number of a call-tree node in the index and data files of a metric of this
    /// kind: Cube enumerates the call tree depth-first for exclusive metrics and
    /// breadth-wise for inclusive ones.
    pub(crate) fn row_id(&self, kind: MetricKind, cnode: u32) -> u32 {
        match kind {
            MetricKind::Exclusive => self.cnode_file_id[cnode as usize],
            MetricKind::Inclusive => self.cnode_wide_pos[cnode as usize],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// r → (a → (a1, a2), b → b1), and a second root s → c.
    fn forest(n: u32) -> Vec<u32> {
        match n {
            0 => vec![1, 2],
            1 => vec![3, 4],
            2 => vec![5],
            6 => vec![7],
            _ => vec![],
        }
    }

    #[test]
    fn cube_enumerations_of_the_call_tree() {
        assert_eq!(depth_first(&[0, 6], forest), [0, 1, 3, 4, 2, 5, 6, 7]);
        assert_eq!(wide_first(&[0, 6], forest), [0, 1, 2, 3, 4, 5, 6, 7]);
        // Where the two differ: a's children come before b's subtree breadth-wise.
        assert_eq!(wide_first(&[1], forest), [1, 3, 4]);
        let deeper = |n: u32| match n {
            0 => vec![1, 2],
            1 => vec![3],
            3 => vec![4],
            2 => vec![5],
            _ => vec![],
        };
        assert_eq!(depth_first(&[0], deeper), [0, 1, 3, 4, 2, 5]);
        assert_eq!(wide_first(&[0], deeper), [0, 1, 2, 3, 4, 5]);
        let deeper2 = |n: u32| match n {
            0 => vec![1, 2],
            1 => vec![3],
            3 => vec![4],
            2 => vec![5],
            5 => vec![6],
            _ => vec![],
        };
        // 0; children of 0: 1 2; children of 1: 3; children of 3: 4; children of 2: 5; of 5: 6.
        assert_eq!(wide_first(&[0], deeper2), [0, 1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn inclusive_rows_use_the_wide_enumeration() {
        let mut b = CubeBuilder::new();
        b.metric(
            None,
            MetricDef::new(
                "m",
                "M",
                units::BYTES,
                DataType::Uint64,
                MetricKind::Inclusive,
            ),
        )
        .unwrap();
        let r = b.region(RegionDef::new("r")).unwrap();
        let root = b.cnode(r, None).unwrap();
        let a = b.cnode(r, Some(root)).unwrap();
        let bb = b.cnode(r, Some(root)).unwrap();
        let a1 = b.cnode(r, Some(a)).unwrap();
        let s = b.system_tree_node(None, "m", classes::MACHINE).unwrap();
        let g = b
            .location_group(s, "p", 0, LocationGroupType::Process)
            .unwrap();
        b.location(g, "t", 0, LocationType::CpuThread).unwrap();
        let cube = b.build().unwrap();
        let d = cube.dimensions();
        let rows = |kind| [root, a, bb, a1].map(|c| d.row_id(kind, c.0));
        assert_eq!(rows(MetricKind::Exclusive), [0, 1, 3, 2]);
        assert_eq!(rows(MetricKind::Inclusive), [0, 1, 2, 3]);
    }

    fn one_location(b: &mut CubeBuilder) -> LocationGroupId {
        let s = b.system_tree_node(None, "m", classes::MACHINE).unwrap();
        b.location_group(s, "p", 0, LocationGroupType::Process)
            .unwrap()
    }

    #[test]
    fn the_builder_refuses_what_cube_cannot_read() {
        let def = || {
            MetricDef::new(
                "t",
                "T",
                units::SECONDS,
                DataType::Double,
                MetricKind::Exclusive,
            )
        };
        let mut b = CubeBuilder::new();
        b.metric(None, def()).unwrap();
        assert!(matches!(
            b.metric(None, def()),
            Err(CubeError::DuplicateMetric(n)) if n == "t"
        ));
        assert!(matches!(
            b.metric(
                None,
                MetricDef::new("", "", "", DataType::Double, MetricKind::Exclusive)
            ),
            Err(CubeError::EmptyMetricName)
        ));
        assert!(matches!(
            b.metric(
                Some(MetricId(9)),
                MetricDef::new("u", "U", "", DataType::Double, MetricKind::Exclusive)
            ),
            Err(CubeError::UnknownHandle {
                kind: "metric",
                index: 9
            })
        ));
        assert!(matches!(
            b.cnode(RegionId(0), None),
            Err(CubeError::UnknownHandle { kind: "region", .. })
        ));
        let r = b.region(RegionDef::new("r")).unwrap();
        assert!(matches!(
            b.region(RegionDef::new("big").with_lines(0, u32::MAX)),
            Err(CubeError::TooLarge(_))
        ));

        // No cnode yet.
        assert!(matches!(
            b.clone().build(),
            Err(CubeError::Missing("call-tree node"))
        ));
        b.cnode(r, None).unwrap();
        assert!(matches!(
            b.clone().build(),
            Err(CubeError::Missing("system tree node"))
        ));
        let g = one_location(&mut b);
        assert!(matches!(
            b.clone().build(),
            Err(CubeError::Missing("location"))
        ));
        assert!(matches!(
            b.location(g, "t", u32::MAX, LocationType::CpuThread),
            Err(CubeError::TooLarge(_))
        ));
        b.location(g, "t", 0, LocationType::CpuThread).unwrap();
        let s = SystemTreeNodeId(0);
        b.location_group(s, "empty", 1, LocationGroupType::Process)
            .unwrap();
        assert!(matches!(
            b.clone().build(),
            Err(CubeError::EmptyLocationGroup(n)) if n == "empty"
        ));

        let mut no_metric = CubeBuilder::new();
        let r = no_metric.region(RegionDef::new("r")).unwrap();
        no_metric.cnode(r, None).unwrap();
        assert!(matches!(
            no_metric.build(),
            Err(CubeError::Missing("metric"))
        ));
    }

    #[test]
    fn anchor_version_is_4_7_only_with_accelerators() {
        let mut b = CubeBuilder::new();
        b.metric(
            None,
            MetricDef::new(
                "t",
                "T",
                units::SECONDS,
                DataType::Double,
                MetricKind::Exclusive,
            ),
        )
        .unwrap();
        let r = b.region(RegionDef::new("r")).unwrap();
        b.cnode(r, None).unwrap();
        let g = one_location(&mut b);
        b.location(g, "t", 0, LocationType::CpuThread).unwrap();
        assert_eq!(
            b.clone().build().unwrap().dimensions().anchor_version(),
            "4.4"
        );
        let mut with_group = b.clone();
        let s = SystemTreeNodeId(0);
        let acc = with_group
            .location_group(s, "gpu", 0, LocationGroupType::Accelerator)
            .unwrap();
        with_group
            .location(acc, "stream", 0, LocationType::CpuThread)
            .unwrap();
        assert_eq!(
            with_group.build().unwrap().dimensions().anchor_version(),
            "4.7"
        );
        b.location(g, "stream", 1, LocationType::AcceleratorStream)
            .unwrap();
        assert_eq!(b.build().unwrap().dimensions().anchor_version(), "4.7");
    }
}
