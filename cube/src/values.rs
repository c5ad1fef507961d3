//! Severity values: one compact map of rows per metric.

use std::collections::HashMap;

use crate::model::DataType;

/// One severity value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    /// A value of a `DOUBLE` metric.
    Double(f64),
    /// A value of a `UINT64` metric.
    Uint64(u64),
}

impl Value {
    /// The data type of a metric that holds this value.
    pub fn data_type(self) -> DataType {
        match self {
            Value::Double(_) => DataType::Double,
            Value::Uint64(_) => DataType::Uint64,
        }
    }

    /// The value as a double (exact for integers up to 2^53).
    pub fn as_f64(self) -> f64 {
        match self {
            Value::Double(v) => v,
            Value::Uint64(v) => v as f64,
        }
    }

    /// The zero of a data type.
    pub fn zero(data_type: DataType) -> Self {
        match data_type {
            DataType::Double => Value::Double(0.0),
            DataType::Uint64 => Value::Uint64(0),
        }
    }

    pub(crate) fn to_bits(self) -> u64 {
        match self {
            Value::Double(v) => v.to_bits(),
            Value::Uint64(v) => v,
        }
    }

    pub(crate) fn from_bits(data_type: DataType, bits: u64) -> Self {
        match data_type {
            DataType::Double => Value::Double(f64::from_bits(bits)),
            DataType::Uint64 => Value::Uint64(bits),
        }
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Double(v)
    }
}

impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Value::Uint64(v)
    }
}

/// Whether a stored bit pattern is zero for its type (both zeros of a double count).
pub(crate) fn bits_are_zero(data_type: DataType, bits: u64) -> bool {
    match data_type {
        DataType::Double => f64::from_bits(bits) == 0.0,
        DataType::Uint64 => bits == 0,
    }
}

/// The values of one metric: a row of one value per location for each call-tree node
/// that has a value, allocated on the first non-zero value. Memory is 8 bytes per
/// location per such node, which is also the size of the metric's data file.
#[derive(Clone, Debug, Default)]
pub(crate) struct MetricValues {
    pub(crate) rows: HashMap<u32, Box<[u64]>>,
}

impl MetricValues {
    pub(crate) fn get(&self, cnode: u32, location: usize) -> u64 {
        self.rows.get(&cnode).map_or(0, |r| r[location])
    }

    /// The slot of a value, allocating its row if needed.
    pub(crate) fn slot(&mut self, cnode: u32, location: usize, locations: usize) -> &mut u64 {
        &mut self
            .rows
            .entry(cnode)
            .or_insert_with(|| vec![0; locations].into_boxed_slice())[location]
    }
}
