//! Where each version's descriptor keeps its strings and its handles of other events:
//! what a recording must copy besides the descriptor's bytes, and what a replay must
//! point at its own copies or translate to the handles of the plugin it drives.

use crate::event_type as t;
use crate::{v1, v2, v3, v4, v5, v6, v7};
use std::mem::offset_of;

/// The largest descriptor of any version (v7), in bytes.
pub const MAX_DESCR_BYTES: usize = 136;
/// The largest state-argument union of any version (v1–v3), in bytes.
pub const MAX_STATE_ARGS_BYTES: usize = 16;
/// The most string fields one descriptor has.
pub const MAX_STRINGS: usize = 5;
/// Offset of `parentObj`, the same in every version.
pub const PARENT_OFFSET: usize = 8;

/// The size of version `version`'s descriptor (0 for an unknown version).
pub const fn descr_size(version: u8) -> usize {
    match version {
        1 => size_of::<v1::ncclProfilerEventDescr_v1_t>(),
        2 => size_of::<v2::ncclProfilerEventDescr_v2_t>(),
        3 => size_of::<v3::ncclProfilerEventDescr_v3_t>(),
        4 => size_of::<v4::ncclProfilerEventDescr_v4_t>(),
        5 => size_of::<v5::ncclProfilerEventDescr_v5_t>(),
        6 => size_of::<v6::ncclProfilerEventDescr_v6_t>(),
        7 => size_of::<v7::ncclProfilerEventDescr_v7_t>(),
        _ => 0,
    }
}

/// The size of version `version`'s state arguments (0 for an unknown version).
pub const fn state_args_size(version: u8) -> usize {
    match version {
        1..=3 => size_of::<crate::StateArgsV1>(),
        4..=7 => size_of::<crate::StateArgsV4>(),
        _ => 0,
    }
}

/// The union starts at the same offset in every version.
pub const UNION_OFFSET: usize = offset_of!(v7::ncclProfilerEventDescr_v7_t, u);
/// Offset of a ProxyOp's `pid`, the same in every version.
pub const PROXY_OP_PID_OFFSET: usize = UNION_OFFSET + offset_of!(crate::ProxyOpDescr, pid);
const U: usize = UNION_OFFSET;

macro_rules! at {
    ($ty:ty: $($field:ident),*) => {
        &[$(U + offset_of!($ty, $field)),*]
    };
}

/// Offsets, from the descriptor's start, of the `const char *` fields of an event of type
/// bit `type_bit` in version `version`.
pub fn string_offsets(version: u8, type_bit: u64) -> &'static [usize] {
    match (version, type_bit) {
        (1, t::COLL) => at!(v1::CollV1: name),
        (1, t::P2P) => at!(v1::P2pV1: name),
        (2, t::COLL) => at!(v2::CollV2: name, func, datatype, algo, proto),
        (2 | 3, t::P2P) => at!(v2::P2pV2: name, func, datatype),
        (3, t::COLL) => at!(v3::CollV3: name, func, datatype, algo, proto),
        (4, t::COLL) => at!(v4::CollV4: func, datatype, algo, proto),
        (4, t::P2P) => at!(v4::P2pV4: func, datatype),
        (5 | 6, t::COLL_API) => at!(v5::CollApiV5: func, datatype),
        (5 | 6, t::P2P_API) => at!(v5::P2pApiV5: func, datatype),
        (5 | 6, t::COLL) => at!(v5::CollV5: func, datatype, algo, proto),
        (5 | 6, t::P2P) => at!(v5::P2pV5: func, datatype),
        (6, t::CE_COLL) => at!(v6::CeCollV6: func, datatype, syncStrategy),
        (7, t::COLL_API) => at!(v7::CollApiV7: func, datatype),
        (7, t::P2P_API) => at!(v7::P2pApiV7: func, datatype),
        (7, t::COLL) => at!(v7::CollV7: func, datatype, algo, proto, kernelVariant),
        (7, t::P2P) => at!(v7::P2pV7: func, datatype),
        (7, t::CE_COLL) => at!(v7::CeCollV7: func, datatype, syncStrategy),
        (7, t::KERNEL_PHASE) => at!(v7::KernelPhaseV7: phaseName),
        _ => &[],
    }
}

/// Offsets of the fields besides `parentObj` that hold a handle the plugin returned for
/// another event (v5+: a task's `parentGroup`).
pub fn handle_offsets(version: u8, type_bit: u64) -> &'static [usize] {
    match (version, type_bit) {
        (5..=6, t::COLL) => at!(v5::CollV5: parentGroup),
        (5..=6, t::P2P) => at!(v5::P2pV5: parentGroup),
        (7, t::COLL) => at!(v7::CollV7: parentGroup),
        (7, t::P2P) => at!(v7::P2pV7: parentGroup),
        _ => &[],
    }
}

/// The event type bit of a descriptor's bytes (v1–v4 keep it in a byte, v5+ in a u64).
pub fn type_bit(version: u8, bytes: &[u8]) -> u64 {
    if version <= 4 {
        bytes.first().map_or(0, |&b| u64::from(b))
    } else {
        bytes
            .get(..8)
            .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_string_and_handle_field_lies_inside_its_descriptor() {
        let bits = (0..16).map(|bit| 1u64 << bit);
        for version in 1..=7u8 {
            assert!(descr_size(version) <= MAX_DESCR_BYTES);
            assert!(state_args_size(version) <= MAX_STATE_ARGS_BYTES);
            for bit in bits.clone() {
                let strings = string_offsets(version, bit);
                assert!(strings.len() <= MAX_STRINGS);
                for &offset in strings.iter().chain(handle_offsets(version, bit)) {
                    assert!(
                        offset + 8 <= descr_size(version),
                        "v{version} type {bit:#x}"
                    );
                    assert_eq!(offset % 8, 0);
                }
            }
        }
        assert_eq!(U, 24);
        assert_eq!(string_offsets(7, t::COLL).len(), 5);
        assert_eq!(string_offsets(2, t::COLL)[0], 24);
    }
}
