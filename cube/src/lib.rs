//! CUBE4 profiles (`.cubex` files), the format that Cube, Scalasca and Score-P's profiling
//! use, in pure Rust: written, read back, and subtracted.
//!
//! A cube has three dimensions: a tree of metrics, a call tree (call-tree nodes, "cnodes",
//! each calling a region) and a system tree (machine → node → location groups, such as
//! processes → locations, such as threads and GPU streams). It holds one value per metric,
//! cnode and location.
//!
//! * **Writing**: [`CubeBuilder`] defines the dimensions; [`CubeBuilder::build`] checks
//!   them and returns a [`Cube`], whose values are set with [`Cube::set`] (or summed with
//!   [`Cube::add`]); [`Cube::write`] writes the file atomically.
//! * **Reading**: [`Cube::read`] (or [`Cube::read_from`] for a stream) reads a `.cubex`
//!   file, this crate's or Score-P's and CubeLib's, as far as the model holds it: derived
//!   metrics and metrics of other data types are left out and named by
//!   [`Cube::skipped_metrics`]; compressed files are refused. See [`Cube::read`].
//! * **Difference**: [`difference`] makes what `cube_diff` makes of two runs: the union of
//!   both cubes' dimensions with the values of one minus the other.
//!
//! # Values: exclusive and inclusive
//!
//! Values are stored exactly as given, so they must be what Cube expects for the metric's
//! [`MetricKind`]: for an exclusive metric (as Score-P writes time and visits) the value
//! of a cnode without its child cnodes; for an inclusive metric the value including them.
//! Along the metric tree, a parent metric's value includes its children's values.
//! Values that are never set are zero.
//!
//! # Example
//!
//! ```
//! use nccl_scorep_cube::*;
//!
//! # fn main() -> Result<(), CubeError> {
//! let mut b = CubeBuilder::new();
//! b.attribute("creator", "example");
//! let time = b.metric(
//!     None,
//!     MetricDef::new("time", "Time", units::SECONDS, DataType::Double, MetricKind::Exclusive)
//!         .with_description("Time spent in the call path"),
//! )?;
//! let main = b.region(RegionDef::new("main").with_paradigm("user").with_role("function"))?;
//! let root = b.cnode(main, None)?;
//! let machine = b.system_tree_node(None, "cluster", classes::MACHINE)?;
//! let node = b.system_tree_node(Some(machine), "host0", classes::NODE)?;
//! let process = b.location_group(node, "rank 0", 0, LocationGroupType::Process)?;
//! let thread = b.location(process, "thread 0", 0, LocationType::CpuThread)?;
//!
//! let mut cube = b.build()?;
//! cube.set(time, root, thread, 1.25)?;
//! let dir = tempfile::tempdir().unwrap();
//! cube.write(dir.path().join("profile.cubex"))?;
//!
//! let back = Cube::read(dir.path().join("profile.cubex"))?;
//! assert_eq!(back.get(time, root, thread)?, Value::Double(1.25));
//! # Ok(())
//! # }
//! ```

mod archive;
mod difference;
mod error;
mod format;
mod model;
mod read;
mod values;
mod xml;

use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;

pub use difference::{difference, DIFFERENCE_ATTRIBUTE};
pub use error::{CubeError, ReadError};
pub use model::{
    classes, units, Cnode, CnodeId, CubeBuilder, DataType, Dimensions, Location, LocationGroup,
    LocationGroupId, LocationGroupType, LocationId, LocationType, Metric, MetricDef, MetricId,
    MetricKind, Parameter, RegionDef, RegionId, SystemTreeNode, SystemTreeNodeId,
};
pub use values::Value;

use values::MetricValues;

/// A cube: its dimensions and its values. Made by [`CubeBuilder::build`].
#[derive(Clone, Debug)]
pub struct Cube {
    dims: Arc<Dimensions>,
    values: Vec<MetricValues>,
    /// Unique names of the metrics that [`Cube::read`] left out.
    skipped_metrics: Vec<String>,
}

impl Cube {
    pub(crate) fn new(dims: Dimensions) -> Self {
        let values = vec![MetricValues::default(); dims.metrics.len()];
        Self {
            dims: Arc::new(dims),
            values,
            skipped_metrics: Vec::new(),
        }
    }

    /// The dimensions.
    pub fn dimensions(&self) -> &Dimensions {
        &self.dims
    }

    /// A cube with the same dimensions (and so the same handles) and no values, for
    /// example for the difference of two runs.
    pub fn empty_like(&self) -> Cube {
        Cube {
            dims: Arc::clone(&self.dims),
            values: vec![MetricValues::default(); self.values.len()],
            skipped_metrics: self.skipped_metrics.clone(),
        }
    }

    fn check(
        &self,
        metric: MetricId,
        cnode: CnodeId,
        location: LocationId,
    ) -> Result<DataType, CubeError> {
        let d = &self.dims;
        let unknown = |kind, index| Err(CubeError::UnknownHandle { kind, index });
        if metric.index() >= d.metrics.len() {
            return unknown(MetricId::KIND, metric.0);
        }
        if cnode.index() >= d.cnodes.len() {
            return unknown(CnodeId::KIND, cnode.0);
        }
        if location.index() >= d.locations.len() {
            return unknown(LocationId::KIND, location.0);
        }
        Ok(d.metrics[metric.index()].def().data_type())
    }

    fn type_error(&self, metric: MetricId, expected: DataType, given: DataType) -> CubeError {
        CubeError::ValueType {
            metric: self.dims.metric(metric).def().unique_name().to_string(),
            expected,
            given,
        }
    }

    /// Whether `rows` call-tree nodes with values of `metric` fit the CUBE4 format, to be
    /// asked before adding them: every row holds a value for each location, in memory as
    /// in the file.
    pub fn check_rows(&self, metric: MetricId, rows: usize) -> Result<(), CubeError> {
        let name = self.dims.metric(metric).def().unique_name();
        archive::check_data_size(name, rows, self.dims.location_order.len()).map(drop)
    }

    /// Sets the value of `metric` at `cnode` on `location`, replacing any earlier one.
    /// The value's type must be the metric's data type, and its meaning the metric's kind
    /// (see [`MetricKind`]).
    pub fn set(
        &mut self,
        metric: MetricId,
        cnode: CnodeId,
        location: LocationId,
        value: impl Into<Value>,
    ) -> Result<(), CubeError> {
        let value = value.into();
        let data_type = self.check(metric, cnode, location)?;
        if value.data_type() != data_type {
            return Err(self.type_error(metric, data_type, value.data_type()));
        }
        let bits = value.to_bits();
        let locations = self.dims.locations.len();
        let values = &mut self.values[metric.index()];
        if values::bits_are_zero(data_type, bits) && !values.rows.contains_key(&cnode.0) {
            return Ok(());
        }
        *values.slot(cnode.0, location.index(), locations) = bits;
        Ok(())
    }

    /// Adds `value` to the value of `metric` at `cnode` on `location`.
    pub fn add(
        &mut self,
        metric: MetricId,
        cnode: CnodeId,
        location: LocationId,
        value: impl Into<Value>,
    ) -> Result<(), CubeError> {
        let value = value.into();
        let data_type = self.check(metric, cnode, location)?;
        if value.data_type() != data_type {
            return Err(self.type_error(metric, data_type, value.data_type()));
        }
        if values::bits_are_zero(data_type, value.to_bits()) {
            return Ok(());
        }
        let locations = self.dims.locations.len();
        let slot = self.values[metric.index()].slot(cnode.0, location.index(), locations);
        *slot = match value {
            Value::Double(v) => (f64::from_bits(*slot) + v).to_bits(),
            Value::Uint64(v) => match slot.checked_add(v) {
                Some(sum) => sum,
                None => {
                    let name = self.dims.metric(metric).def().unique_name().to_string();
                    return Err(CubeError::Overflow(name));
                }
            },
        };
        Ok(())
    }

    /// The value of `metric` at `cnode` on `location` (zero if never set).
    pub fn get(
        &self,
        metric: MetricId,
        cnode: CnodeId,
        location: LocationId,
    ) -> Result<Value, CubeError> {
        let data_type = self.check(metric, cnode, location)?;
        let bits = self.values[metric.index()].get(cnode.0, location.index());
        Ok(Value::from_bits(data_type, bits))
    }

    /// The number of call-tree nodes that have a row of values for `metric` (a row holds
    /// one value per location).
    pub fn rows_stored(&self, metric: MetricId) -> usize {
        self.values.get(metric.index()).map_or(0, |v| v.rows.len())
    }

    /// Per location (by handle index), the sum of `metric`'s values over every call-tree
    /// node: for an exclusive metric, its total on that location (a flat profile).
    pub fn location_sums(&self, metric: MetricId) -> Result<Vec<f64>, CubeError> {
        if metric.index() >= self.dims.metrics.len() {
            return Err(CubeError::UnknownHandle {
                kind: MetricId::KIND,
                index: metric.0,
            });
        }
        let data_type = self.dims.metrics[metric.index()].def().data_type();
        let mut sums = vec![0.0; self.dims.locations.len()];
        for (_, row) in self.rows(metric) {
            for (sum, &bits) in sums.iter_mut().zip(row) {
                *sum += match Value::from_bits(data_type, bits) {
                    Value::Double(v) => v,
                    Value::Uint64(v) => v as f64,
                };
            }
        }
        Ok(sums)
    }

    /// Rows of a metric by cnode handle index, values by location handle index.
    pub(crate) fn rows(&self, metric: MetricId) -> impl Iterator<Item = (u32, &[u64])> {
        self.values[metric.index()]
            .rows
            .iter()
            .map(|(&c, row)| (c, &row[..]))
    }

    /// The text of `anchor.xml`, the file's description of the dimensions.
    pub fn anchor_xml(&self) -> String {
        xml::anchor_xml(&self.dims)
    }

    /// Writes the `.cubex` archive to `path`: first to a temporary file in the same
    /// directory, then renamed, so `path` never holds a partial file.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<(), CubeError> {
        archive::write_file(self, path.as_ref())
    }

    /// Writes the `.cubex` archive to a stream and returns the stream.
    pub fn write_to<W: Write>(&self, out: W) -> Result<W, CubeError> {
        archive::write_archive(self, out)
    }

    /// Reads a `.cubex` file.
    ///
    /// The dimensions are defined in the file's order, so a file written by this crate
    /// reads back with the handles (and file ids) of the cube that wrote it. Files of
    /// Score-P and CubeLib 4.x read too, with these limits:
    ///
    /// * metrics of other kinds than `EXCLUSIVE` and `INCLUSIVE` (derived metrics:
    ///   `PREDERIVED_*`, `POSTDERIVED`, any with a `<cubepl>` expression) and of other data
    ///   types than `DOUBLE`, `UINT64` and `INT64` (`MINDOUBLE`, `MAXDOUBLE`, ...) are left
    ///   out together with their child metrics; [`Cube::skipped_metrics`] names them;
    /// * `INT64` metrics (CubeLib's `cube_diff` writes counts so) read as `DOUBLE`;
    /// * locations must be of type `thread` or `accelerator stream`, location groups
    ///   `process` or `accelerator` (a missing type reads as thread or process); other
    ///   types (such as Score-P's `metric` locations) are an error;
    /// * compressed data files (`ZCUBEX.DATA`) are an error;
    /// * a region keeps its source lines only if it has both; line breaks in texts read
    ///   as the spaces the writer writes;
    /// * unknown elements and attributes are ignored; inclusive values are kept as stored;
    /// * `anchor.xml` may nest elements at most 10 000 levels deep (a call tree about as
    ///   deep).
    ///
    /// A metric without index and data files has no values. A damaged file gives a
    /// [`CubeError::Read`] that says what is wrong and where.
    pub fn read(path: impl AsRef<Path>) -> Result<Cube, CubeError> {
        read::read_file(path.as_ref())
    }

    /// Reads a `.cubex` archive from a stream, as [`Cube::read`] reads a file.
    pub fn read_from<R: Read>(input: R) -> Result<Cube, CubeError> {
        read::read_stream(input)
    }

    /// The unique names of the metrics that [`Cube::read`] left out (unsupported kinds or
    /// data types, and their child metrics), in the file's order. Empty for a cube that was
    /// not read from a file.
    pub fn skipped_metrics(&self) -> &[String] {
        &self.skipped_metrics
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The metrics `time` (seconds) and its child `visits`.
    fn time_and_visits(b: &mut CubeBuilder) -> (MetricId, MetricId) {
        let time = MetricDef::new(
            "time",
            "Time",
            units::SECONDS,
            DataType::Double,
            MetricKind::Exclusive,
        );
        let t = b.metric(None, time).unwrap();
        let visits = MetricDef::new(
            "visits",
            "Visits",
            units::OCCURRENCES,
            DataType::Uint64,
            MetricKind::Exclusive,
        );
        (t, b.metric(Some(t), visits).unwrap())
    }

    /// Locations `t0`, `t1`, … of one process on one machine.
    fn threads<const N: usize>(b: &mut CubeBuilder) -> [LocationId; N] {
        let s = b.system_tree_node(None, "m", classes::MACHINE).unwrap();
        let g = b
            .location_group(s, "p", 0, LocationGroupType::Process)
            .unwrap();
        std::array::from_fn(|i| {
            b.location(g, format!("t{i}"), i as u32, LocationType::CpuThread)
                .unwrap()
        })
    }

    fn cube() -> (Cube, MetricId, MetricId, CnodeId, LocationId) {
        let mut b = CubeBuilder::new();
        let (t, v) = time_and_visits(&mut b);
        let r = b.region(RegionDef::new("r")).unwrap();
        let c = b.cnode(r, None).unwrap();
        let [l] = threads(&mut b);
        (b.build().unwrap(), t, v, c, l)
    }

    #[test]
    fn set_add_and_get() {
        let (mut cube, t, v, c, l) = cube();
        assert_eq!(cube.get(t, c, l).unwrap(), Value::Double(0.0));
        cube.set(t, c, l, 0.0).unwrap();
        assert_eq!(cube.rows_stored(t), 0, "a zero allocates no row");
        cube.set(t, c, l, 1.5).unwrap();
        cube.add(t, c, l, 0.25).unwrap();
        assert_eq!(cube.get(t, c, l).unwrap(), Value::Double(1.75));
        cube.add(v, c, l, 2u64).unwrap();
        cube.add(v, c, l, 3u64).unwrap();
        assert_eq!(cube.get(v, c, l).unwrap(), Value::Uint64(5));
        assert_eq!(cube.rows_stored(v), 1);

        let other = cube.empty_like();
        assert_eq!(other.get(v, c, l).unwrap(), Value::Uint64(0));
        assert_eq!(other.dimensions().metric_by_name("visits"), Some(v));
    }

    /// A flat profile: per location, the values of every call path added up, after the
    /// cube went through a file.
    #[test]
    fn location_sums_add_up_every_call_path() {
        let mut b = CubeBuilder::new();
        let (t, v) = time_and_visits(&mut b);
        let r = b.region(RegionDef::new("r")).unwrap();
        let root = b.cnode(r, None).unwrap();
        let child = b.cnode(r, Some(root)).unwrap();
        let [l0, l1] = threads(&mut b);
        let mut cube = b.build().unwrap();
        cube.set(t, root, l0, 1.5).unwrap();
        cube.set(t, child, l0, 0.25).unwrap();
        cube.set(t, child, l1, 2.0).unwrap();
        cube.set(v, child, l1, 7u64).unwrap();
        let dir = tempfile::tempdir().unwrap();
        cube.write(dir.path().join("p.cubex")).unwrap();
        let back = Cube::read(dir.path().join("p.cubex")).unwrap();
        let (t, v) = (
            back.dimensions().metric_by_name("time").unwrap(),
            back.dimensions().metric_by_name("visits").unwrap(),
        );
        assert_eq!(back.location_sums(t).unwrap(), [1.75, 2.0]);
        assert_eq!(back.location_sums(v).unwrap(), [0.0, 7.0]);
        assert!(back.location_sums(MetricId(9)).is_err());
    }

    #[test]
    fn rows_the_format_cannot_hold_are_refused_before_they_are_built() {
        let (cube, t, _, _, _) = cube();
        // One location: a data file of 8 bytes per row after its marker, 8 GiB at most.
        assert!(cube.check_rows(t, 1000).is_ok());
        assert!(cube.check_rows(t, 1 << 29).is_ok());
        let error = cube.check_rows(t, 1 << 30).unwrap_err();
        assert!(matches!(&error, CubeError::TooLarge(_)), "{error:?}");
        assert_eq!(
            error.to_string(),
            format!(
                "the data of metric `time` ({} bytes) is too large for the CUBE4 format",
                format::data_file_len(1 << 30, 1)
            )
        );
        assert_eq!(cube.rows_stored(t), 0, "nothing is built by asking");
    }

    #[test]
    fn wrong_values_are_refused() {
        let (mut cube, t, v, c, l) = cube();
        let err = cube.set(v, c, l, 1.0).unwrap_err();
        assert!(matches!(
            &err,
            CubeError::ValueType { metric, expected: DataType::Uint64, given: DataType::Double }
                if metric == "visits"
        ));
        assert_eq!(
            err.to_string(),
            "metric `visits` holds UINT64 values, not DOUBLE"
        );
        assert!(cube.add(t, c, l, 1u64).is_err());
        cube.set(v, c, l, u64::MAX).unwrap();
        assert!(matches!(cube.add(v, c, l, 1u64), Err(CubeError::Overflow(n)) if n == "visits"));
        assert!(matches!(
            cube.set(MetricId(7), c, l, 1.0),
            Err(CubeError::UnknownHandle {
                kind: "metric",
                index: 7
            })
        ));
        assert!(matches!(
            cube.get(t, CnodeId(3), l),
            Err(CubeError::UnknownHandle {
                kind: "cnode",
                index: 3
            })
        ));
        assert!(matches!(
            cube.add(t, c, LocationId::from_index(5), 1.0),
            Err(CubeError::UnknownHandle {
                kind: "location",
                index: 5
            })
        ));
    }
}
