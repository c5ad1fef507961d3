//! Where each version's descriptor keeps its fields, its strings and its handles of other
//! events: what a recording copies (the fields, not the padding between them), and what a
//! replay must point at its own copies or translate to the handles of the plugin it drives.

use crate::event_type as t;
use crate::state as s;
use crate::{v1, v2, v3, v4, v5, v6, v7};
use crate::{StateArgsProxyCtrl, StateArgsV1, StateArgsV1ProxyOp, StateArgsV4};
use std::mem::{offset_of, size_of};

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

/// Where one field lies in its struct: the bytes a C caller sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub offset: usize,
    pub len: usize,
}

/// Where the fields of one of NCCL's structs lie, in declaration order.
pub trait Fields {
    const SPANS: &'static [Span];
}

const fn span(offset: usize, len: usize) -> Span {
    Span { offset, len }
}

/// The fields before the union, from the descriptor's start: `type` (a byte in v1–v4, a
/// `u64` from v5), `parentObj` and `rank`.
pub fn header_spans(version: u8) -> &'static [Span] {
    type D1 = v1::ncclProfilerEventDescr_v1_t;
    type D5 = v5::ncclProfilerEventDescr_v5_t;
    const BYTE_TYPE: &[Span] = &[
        span(offset_of!(D1, type_), size_of::<u8>()),
        span(offset_of!(D1, parentObj), size_of::<usize>()),
        span(offset_of!(D1, rank), size_of::<i32>()),
    ];
    const WORD_TYPE: &[Span] = &[
        span(offset_of!(D5, type_), size_of::<u64>()),
        span(offset_of!(D5, parentObj), size_of::<usize>()),
        span(offset_of!(D5, rank), size_of::<i32>()),
    ];
    match version {
        1..=4 => BYTE_TYPE,
        5..=7 => WORD_TYPE,
        _ => &[],
    }
}

/// The fields of the union member an event of type bit `type_bit` uses in version
/// `version`, from the union's start ([`UNION_OFFSET`]). Empty for the types without a
/// member (Group, ProxyCtrl) and for a type the version does not have.
pub fn member_spans(version: u8, type_bit: u64) -> &'static [Span] {
    fn of<T: Fields>() -> &'static [Span] {
        T::SPANS
    }
    match (version, type_bit) {
        (1, t::COLL) => of::<v1::CollV1>(),
        (1, t::P2P) => of::<v1::P2pV1>(),
        (2, t::COLL) => of::<v2::CollV2>(),
        (2 | 3, t::P2P) => of::<v2::P2pV2>(),
        (3, t::COLL) => of::<v3::CollV3>(),
        (4, t::COLL) => of::<v4::CollV4>(),
        (4, t::P2P) => of::<v4::P2pV4>(),
        (1..=7, t::PROXY_OP) => of::<crate::ProxyOpDescr>(),
        (1..=7, t::PROXY_STEP) => of::<crate::ProxyStepDescr>(),
        (3, t::KERNEL_CH) => of::<crate::KernelChDescrV3>(),
        (4..=7, t::KERNEL_CH) => of::<crate::KernelChDescrV4>(),
        (3..=7, t::NET_PLUGIN) => of::<crate::NetPluginDescr>(),
        (5..=7, t::GROUP_API) => of::<v5::GroupApiV5>(),
        (5..=7, t::KERNEL_LAUNCH) => of::<v5::KernelLaunchV5>(),
        (5 | 6, t::COLL_API) => of::<v5::CollApiV5>(),
        (5 | 6, t::P2P_API) => of::<v5::P2pApiV5>(),
        (5 | 6, t::COLL) => of::<v5::CollV5>(),
        (5 | 6, t::P2P) => of::<v5::P2pV5>(),
        (6, t::CE_COLL) => of::<v6::CeCollV6>(),
        (6 | 7, t::CE_SYNC) => of::<v6::CeSyncV6>(),
        (6 | 7, t::CE_BATCH) => of::<v6::CeBatchV6>(),
        (7, t::COLL_API) => of::<v7::CollApiV7>(),
        (7, t::P2P_API) => of::<v7::P2pApiV7>(),
        (7, t::COLL) => of::<v7::CollV7>(),
        (7, t::P2P) => of::<v7::P2pV7>(),
        (7, t::CE_COLL) => of::<v7::CeCollV7>(),
        (7, t::KERNEL_PHASE) => of::<v7::KernelPhaseV7>(),
        _ => &[],
    }
}

/// The member of the v1–v3 state arguments a state sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateArgMemberV1 {
    ProxyOp,
    ProxyCtrl,
}

impl StateArgMemberV1 {
    /// None: the state comes with no arguments.
    pub fn of(state: i32) -> Option<StateArgMemberV1> {
        match state {
            s::PROXY_OP_SEND_POSTED..=s::PROXY_OP_RECV_DONE => Some(StateArgMemberV1::ProxyOp),
            s::PROXY_CTRL_IDLE..=s::PROXY_CTRL_APPEND_END => Some(StateArgMemberV1::ProxyCtrl),
            _ => None,
        }
    }
}

/// The member of the v4+ state arguments a state sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateArgMemberV4 {
    TransSize,
    AppendedProxyOps,
    NetPluginData,
    KernelChPTimer,
}

impl StateArgMemberV4 {
    /// None: the state comes with no arguments, or with arguments NCCL leaves unset
    /// (states 19, 23 and 24).
    pub fn of(state: i32) -> Option<StateArgMemberV4> {
        match state {
            s::PROXY_STEP_SEND_GPU_WAIT..=s::PROXY_STEP_RECV_GPU_WAIT
            | s::PROXY_STEP_SEND_PEER_WAIT_V4 => Some(StateArgMemberV4::TransSize),
            s::PROXY_CTRL_IDLE..=s::PROXY_CTRL_APPEND_END => {
                Some(StateArgMemberV4::AppendedProxyOps)
            }
            s::NET_PLUGIN_UPDATE => Some(StateArgMemberV4::NetPluginData),
            s::KERNEL_CH_STOP | s::KERNEL_PHASE_STOP => Some(StateArgMemberV4::KernelChPTimer),
            _ => None,
        }
    }
}

/// The fields of a version's state arguments that a state sets: those of the member
/// its meaning names ([`StateArgMemberV1`], [`StateArgMemberV4`]).
pub trait StateArgFields {
    fn spans_for(state: i32) -> &'static [Span];
}

impl StateArgFields for StateArgsV1 {
    fn spans_for(state: i32) -> &'static [Span] {
        match StateArgMemberV1::of(state) {
            Some(StateArgMemberV1::ProxyOp) => StateArgsV1ProxyOp::SPANS,
            Some(StateArgMemberV1::ProxyCtrl) => StateArgsProxyCtrl::SPANS,
            None => &[],
        }
    }
}

impl StateArgFields for StateArgsV4 {
    fn spans_for(state: i32) -> &'static [Span] {
        // Every member sits at offset 0; only their sizes differ.
        const WORD: &[Span] = &[span(0, size_of::<u64>())];
        const INT: &[Span] = &[span(0, size_of::<i32>())];
        match StateArgMemberV4::of(state) {
            Some(StateArgMemberV4::AppendedProxyOps) => INT,
            Some(_) => WORD,
            None => &[],
        }
    }
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

    /// The bytes of a struct its spans leave out: its padding.
    fn padding(spans: &[Span], size: usize) -> Vec<usize> {
        (0..size)
            .filter(|&byte| {
                !spans
                    .iter()
                    .any(|s| (s.offset..s.offset + s.len).contains(&byte))
            })
            .collect()
    }

    #[test]
    fn the_fields_of_every_member_are_in_order_inside_the_union_and_hold_its_strings() {
        let bits = (0..16).map(|bit| 1u64 << bit);
        for version in 1..=7u8 {
            let union_bytes = descr_size(version) - U;
            let header = header_spans(version);
            assert_eq!(header.len(), 3, "v{version}");
            assert!(header.iter().all(|s| s.offset + s.len <= U));
            for bit in bits.clone() {
                let member = member_spans(version, bit);
                for pair in member.windows(2) {
                    assert!(
                        pair[0].offset + pair[0].len <= pair[1].offset,
                        "v{version} {bit:#x}"
                    );
                }
                if let Some(last) = member.last() {
                    assert!(last.offset + last.len <= union_bytes, "v{version} {bit:#x}");
                }
                // Every string and handle the recording follows is a whole field.
                for &offset in string_offsets(version, bit)
                    .iter()
                    .chain(handle_offsets(version, bit))
                {
                    assert!(
                        member.contains(&Span {
                            offset: offset - U,
                            len: 8
                        }),
                        "v{version} type {bit:#x} offset {offset}"
                    );
                }
            }
        }
        assert!(member_spans(7, t::GROUP).is_empty());
        assert!(member_spans(7, t::PROXY_CTRL).is_empty());
        assert!(member_spans(4, t::COLL_API).is_empty());
        assert!(member_spans(9, t::COLL).is_empty());
        assert!(header_spans(0).is_empty());
    }

    #[test]
    fn padding_is_the_bytes_between_and_after_the_fields() {
        // v7 coll: 4 bytes after `root`, 6 after `nWarps`, 7 after `isSymColl`.
        let coll = member_spans(7, t::COLL);
        assert_eq!(coll.len(), 15);
        let gaps = padding(coll, size_of::<v7::CollV7>());
        assert_eq!(
            gaps,
            [44..48, 58..64, 97..104]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
        );
        // proxyOp: 3 bytes after `channelId`.
        assert_eq!(padding(member_spans(1, t::PROXY_OP), 24), [5, 6, 7]);
        // The header: 7 bytes after a v1-v4 `type`, 4 after `rank` in every version.
        assert_eq!(
            padding(header_spans(4), U),
            [1, 2, 3, 4, 5, 6, 7, 20, 21, 22, 23]
        );
        assert_eq!(padding(header_spans(5), U), [20, 21, 22, 23]);
    }

    #[test]
    fn a_state_names_the_argument_member_it_sets() {
        let v1_progress = StateArgsV1::spans_for(s::PROXY_OP_SEND_POSTED);
        assert_eq!(v1_progress, [span(0, 8), span(8, 4)]);
        assert_eq!(StateArgsV1::spans_for(s::PROXY_CTRL_APPEND), [span(0, 4)]);
        assert!(StateArgsV1::spans_for(s::PROXY_STEP_SEND_WAIT).is_empty());
        assert_eq!(
            StateArgsV4::spans_for(s::PROXY_STEP_SEND_WAIT),
            [span(0, 8)]
        );
        assert_eq!(StateArgsV4::spans_for(s::PROXY_CTRL_SLEEP), [span(0, 4)]);
        assert_eq!(StateArgsV4::spans_for(s::KERNEL_CH_STOP), [span(0, 8)]);
        // States NCCL sends with unset arguments.
        for state in [
            s::PROXY_OP_IN_PROGRESS_V4,
            s::GROUP_START_API_STOP,
            s::GROUP_END_API_START,
        ] {
            assert!(StateArgsV4::spans_for(state).is_empty());
        }
        for state in -1..40 {
            let spans = StateArgsV4::spans_for(state);
            assert!(spans
                .iter()
                .all(|s| s.offset + s.len <= size_of::<StateArgsV4>()));
            let spans = StateArgsV1::spans_for(state);
            assert!(spans
                .iter()
                .all(|s| s.offset + s.len <= size_of::<StateArgsV1>()));
        }
    }
}
