//! The one error type of the crate.

use std::io;
use std::path::PathBuf;

use crate::model::DataType;

/// Everything that can go wrong while a cube is defined, filled or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CubeError {
    /// A dimension that Cube requires is empty (`what` names it).
    #[error("a cube needs at least one {0}")]
    Missing(&'static str),

    /// Two metrics were given the same unique name.
    #[error("metric unique name `{0}` is defined twice")]
    DuplicateMetric(String),

    /// A metric was given an empty unique name.
    #[error("a metric's unique name must not be empty")]
    EmptyMetricName,

    /// A handle that was not made by this cube (or its builder) was passed in.
    #[error("{kind} #{index} does not belong to this cube")]
    UnknownHandle {
        /// What the handle is for: "metric", "cnode", ...
        kind: &'static str,
        /// The handle's index.
        index: u32,
    },

    /// A location group without locations: Cube's anchor syntax requires at least one.
    #[error("location group `{0}` has no location (Cube requires at least one)")]
    EmptyLocationGroup(String),

    /// A value of the wrong type for its metric.
    #[error("metric `{metric}` holds {expected} values, not {given}")]
    ValueType {
        /// The metric's unique name.
        metric: String,
        /// The metric's data type.
        expected: DataType,
        /// The type of the value that was passed.
        given: DataType,
    },

    /// Adding to an unsigned integer value went past `u64::MAX`.
    #[error("adding to metric `{0}` overflows its UINT64 value")]
    Overflow(String),

    /// A number or a size that the format cannot hold.
    #[error("{0} is too large for the CUBE4 format")]
    TooLarge(String),

    /// Writing the archive to a stream failed.
    #[error("cannot write the cube archive: {0}")]
    Write(#[source] io::Error),

    /// Creating, writing or renaming a file failed.
    #[error("cannot write {}: {source}", path.display())]
    Io {
        /// The file that could not be written.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: io::Error,
    },
}
