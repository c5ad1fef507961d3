//! The one error type of the crate.

use std::io;
use std::path::PathBuf;

use crate::model::{DataType, MetricKind};

/// Everything that can go wrong while a cube is defined, filled, written, read or
/// subtracted.
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

    /// Reading a `.cubex` file failed: the file could not be read, or it is damaged or
    /// holds something this crate does not read.
    #[error("cannot read the cube{}: {problem}", path.as_ref().map(|p| format!(" {}", p.display())).unwrap_or_default())]
    Read {
        /// The file, when read with [`Cube::read`](crate::Cube::read); `None` for a stream.
        path: Option<PathBuf>,
        /// What is wrong, and where in the archive.
        problem: ReadError,
    },

    /// A metric is exclusive in one cube and inclusive in the other, so the two cannot be
    /// subtracted.
    #[error("metric `{metric}` is {minuend} in the minuend but {subtrahend} in the subtrahend")]
    KindMismatch {
        /// The metric's unique name.
        metric: String,
        /// Its kind in the minuend.
        minuend: MetricKind,
        /// Its kind in the subtrahend.
        subtrahend: MetricKind,
    },
}

/// What is wrong with a `.cubex` file that [`Cube::read`](crate::Cube::read) refuses.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The file could not be opened or read.
    #[error("{0}")]
    Io(#[source] io::Error),

    /// The file is not a tar archive, or the archive is damaged.
    #[error("not a readable tar archive: {0}")]
    Archive(#[source] io::Error),

    /// The archive has no `anchor.xml`.
    #[error("the archive has no anchor.xml (not a CUBE4 file?)")]
    NoAnchor,

    /// `anchor.xml` is not well-formed XML (or not UTF-8).
    #[error("anchor.xml is not well-formed XML: {0}")]
    Xml(String),

    /// `anchor.xml` is XML but does not describe a cube this crate reads: a missing or
    /// malformed element or attribute, an unknown reference, an unsupported type.
    #[error("anchor.xml: {0}")]
    Anchor(String),

    /// The definitions in `anchor.xml` do not make a valid cube (for example two metrics
    /// with one unique name, or no metric left after skipping the unsupported ones).
    #[error("anchor.xml defines no valid cube: {0}")]
    Invalid(#[source] Box<CubeError>),

    /// A metric's index or data file is damaged: a wrong marker, a size that does not match
    /// its rows, a row outside the call tree, or one of the two files missing.
    #[error("{member}: {message}")]
    Values {
        /// The archive member (`<metric id>.index` or `<metric id>.data`).
        member: String,
        /// What is wrong with it.
        message: String,
    },

    /// A data file is compressed (CubeLib's `ZCUBEX.DATA`), which this crate does not read.
    #[error("{member}: compressed CUBE data is not supported")]
    Compressed {
        /// The archive member.
        member: String,
    },
}
