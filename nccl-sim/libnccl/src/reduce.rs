//! The arithmetic of the reductions on host memory: element types and operations as
//! `ncclDataType_t` and `ncclRedOp_t` number them.

use half::{bf16, f16};
use nccl_sim::names::DataType;

/// `ncclDataType_t` → the element type; None for numbers this library does not know.
pub fn data_type(value: i32) -> Option<DataType> {
    Some(match value {
        0 => DataType::Int8,
        1 => DataType::Uint8,
        2 => DataType::Int32,
        3 => DataType::Uint32,
        4 => DataType::Int64,
        5 => DataType::Uint64,
        6 => DataType::Float16,
        7 => DataType::Float32,
        8 => DataType::Float64,
        9 => DataType::Bfloat16,
        _ => return None,
    })
}

/// `ncclRedOp_t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedOp {
    Sum,
    Prod,
    Max,
    Min,
    /// The sum divided by the number of ranks (integer division for integer types).
    Avg,
}

impl RedOp {
    pub fn from_c(value: i32) -> Option<RedOp> {
        Some(match value {
            0 => RedOp::Sum,
            1 => RedOp::Prod,
            2 => RedOp::Max,
            3 => RedOp::Min,
            4 => RedOp::Avg,
            _ => return None,
        })
    }
}

/// An element type the reductions compute in.
trait Element: Copy {
    const SIZE: usize;
    fn read(bytes: &[u8]) -> Self;
    fn write(self, bytes: &mut [u8]);
    fn combine(self, other: Self, op: RedOp) -> Self;
    fn divide(self, n: usize) -> Self;
}

macro_rules! integer_element {
    ($($t:ty),*) => {$(
        impl Element for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn read(bytes: &[u8]) -> Self {
                <$t>::from_ne_bytes(bytes.try_into().expect("one element"))
            }
            fn write(self, bytes: &mut [u8]) {
                bytes.copy_from_slice(&self.to_ne_bytes());
            }
            fn combine(self, other: Self, op: RedOp) -> Self {
                // Wrapping, as the GPU's integer arithmetic does.
                match op {
                    RedOp::Sum | RedOp::Avg => self.wrapping_add(other),
                    RedOp::Prod => self.wrapping_mul(other),
                    RedOp::Max => self.max(other),
                    RedOp::Min => self.min(other),
                }
            }
            fn divide(self, n: usize) -> Self {
                self / (n as $t)
            }
        }
    )*};
}
integer_element!(i8, u8, i32, u32, i64, u64);

macro_rules! float_element {
    ($($t:ty),*) => {$(
        impl Element for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn read(bytes: &[u8]) -> Self {
                <$t>::from_ne_bytes(bytes.try_into().expect("one element"))
            }
            fn write(self, bytes: &mut [u8]) {
                bytes.copy_from_slice(&self.to_ne_bytes());
            }
            fn combine(self, other: Self, op: RedOp) -> Self {
                match op {
                    RedOp::Sum | RedOp::Avg => self + other,
                    RedOp::Prod => self * other,
                    RedOp::Max => self.max(other),
                    RedOp::Min => self.min(other),
                }
            }
            fn divide(self, n: usize) -> Self {
                self / (n as f64) as $t
            }
        }
    )*};
}
float_element!(f32, f64);

macro_rules! half_element {
    ($($t:ty),*) => {$(
        impl Element for $t {
            const SIZE: usize = 2;
            fn read(bytes: &[u8]) -> Self {
                <$t>::from_ne_bytes(bytes.try_into().expect("one element"))
            }
            fn write(self, bytes: &mut [u8]) {
                bytes.copy_from_slice(&self.to_ne_bytes());
            }
            fn combine(self, other: Self, op: RedOp) -> Self {
                let (a, b) = (self.to_f32(), other.to_f32());
                <$t>::from_f32(match op {
                    RedOp::Sum | RedOp::Avg => a + b,
                    RedOp::Prod => a * b,
                    RedOp::Max => a.max(b),
                    RedOp::Min => a.min(b),
                })
            }
            fn divide(self, n: usize) -> Self {
                <$t>::from_f32(self.to_f32() / n as f32)
            }
        }
    )*};
}
half_element!(f16, bf16);

fn reduce_as<T: Element>(inputs: &[&[u8]], op: RedOp, out: &mut [u8]) {
    for (index, slot) in out.chunks_exact_mut(T::SIZE).enumerate() {
        let at = index * T::SIZE..(index + 1) * T::SIZE;
        let mut value = T::read(&inputs[0][at.clone()]);
        for input in &inputs[1..] {
            value = value.combine(T::read(&input[at.clone()]), op);
        }
        if op == RedOp::Avg {
            value = value.divide(inputs.len());
        }
        value.write(slot);
    }
}

/// Reduces `inputs` (one per rank, each at least `out.len()` bytes of `datatype`) with
/// `op`, element by element in rank order, into `out`.
pub fn reduce(inputs: &[&[u8]], datatype: DataType, op: RedOp, out: &mut [u8]) {
    if inputs.is_empty() {
        return;
    }
    match datatype {
        DataType::Int8 => reduce_as::<i8>(inputs, op, out),
        DataType::Uint8 => reduce_as::<u8>(inputs, op, out),
        DataType::Int32 => reduce_as::<i32>(inputs, op, out),
        DataType::Uint32 => reduce_as::<u32>(inputs, op, out),
        DataType::Int64 => reduce_as::<i64>(inputs, op, out),
        DataType::Uint64 => reduce_as::<u64>(inputs, op, out),
        DataType::Float16 => reduce_as::<f16>(inputs, op, out),
        DataType::Float32 => reduce_as::<f32>(inputs, op, out),
        DataType::Float64 => reduce_as::<f64>(inputs, op, out),
        DataType::Bfloat16 => reduce_as::<bf16>(inputs, op, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes<T: Element>(values: &[T]) -> Vec<u8> {
        let mut out = vec![0; values.len() * T::SIZE];
        for (v, slot) in values.iter().zip(out.chunks_exact_mut(T::SIZE)) {
            v.write(slot);
        }
        out
    }

    #[test]
    fn reductions_compute_per_element_in_each_type() {
        let (a, b) = (bytes(&[1i32, -5, 7]), bytes(&[2i32, 3, 7]));
        let mut out = vec![0; 12];
        for (op, want) in [
            (RedOp::Sum, [3, -2, 14]),
            (RedOp::Prod, [2, -15, 49]),
            (RedOp::Max, [2, 3, 7]),
            (RedOp::Min, [1, -5, 7]),
            (RedOp::Avg, [1, -1, 7]),
        ] {
            reduce(&[&a, &b], DataType::Int32, op, &mut out);
            assert_eq!(out, bytes(&want), "{op:?}");
        }
        let (x, y) = (bytes(&[1.5f64, 2.0]), bytes(&[2.5f64, -4.0]));
        let mut out = vec![0; 16];
        reduce(&[&x, &y], DataType::Float64, RedOp::Avg, &mut out);
        assert_eq!(out, bytes(&[2.0f64, -1.0]));
        let (h, k) = (
            bytes(&[bf16::from_f32(1.5), bf16::from_f32(3.0)]),
            bytes(&[bf16::from_f32(2.0), bf16::from_f32(-1.0)]),
        );
        let mut out = vec![0; 4];
        reduce(&[&h, &k], DataType::Bfloat16, RedOp::Sum, &mut out);
        assert_eq!(out, bytes(&[bf16::from_f32(3.5), bf16::from_f32(2.0)]));
        assert_eq!(data_type(10), None);
        assert_eq!(RedOp::from_c(5), None);
    }
}
