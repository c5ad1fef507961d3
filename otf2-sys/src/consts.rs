//! The OTF2 macros bindgen does not translate, written by hand.
//!
//! bindgen skips macros whose value contains a cast, such as
//! `#define OTF2_UNDEFINED_REGION ( ( OTF2_RegionRef )OTF2_UNDEFINED_UINT32 )`. Every constant
//! here is compared by a unit test with the value the C compiler computes from the installed
//! headers (see `HAND_MADE` in `build.rs`), and, except for the two `*_DEFAULT` chunk sizes,
//! its type too (size and signedness). A second test fails if a constant is added here
//! without being added to that list.

use crate::bindings::*;

/// `OTF2_UNDEFINED_UINT8`: all bits set.
pub const OTF2_UNDEFINED_UINT8: u8 = !0;
/// `OTF2_UNDEFINED_INT8`: `~(OTF2_UNDEFINED_UINT8 >> 1)`, i.e. `i8::MIN`.
pub const OTF2_UNDEFINED_INT8: i8 = i8::MIN;
/// `OTF2_UNDEFINED_UINT16`: all bits set.
pub const OTF2_UNDEFINED_UINT16: u16 = !0;
/// `OTF2_UNDEFINED_INT16`: `i16::MIN`.
pub const OTF2_UNDEFINED_INT16: i16 = i16::MIN;
/// `OTF2_UNDEFINED_UINT32`: all bits set.
pub const OTF2_UNDEFINED_UINT32: u32 = !0;
/// `OTF2_UNDEFINED_INT32`: `i32::MIN`.
pub const OTF2_UNDEFINED_INT32: i32 = i32::MIN;
/// `OTF2_UNDEFINED_UINT64`: all bits set. Also accepted as "chunk size set later" by
/// `OTF2_Archive_Open`.
pub const OTF2_UNDEFINED_UINT64: u64 = !0;
/// `OTF2_UNDEFINED_INT64`: `i64::MIN`.
pub const OTF2_UNDEFINED_INT64: i64 = i64::MIN;

/// `OTF2_UNDEFINED_TYPE`: no `OTF2_Type`.
pub const OTF2_UNDEFINED_TYPE: OTF2_Type = OTF2_UNDEFINED_UINT8;
/// `OTF2_UNDEFINED_TIMESTAMP`: e.g. the `realtimeTimestamp` of `WriteClockProperties` when
/// the real time is unknown.
pub const OTF2_UNDEFINED_TIMESTAMP: OTF2_TimeStamp = OTF2_UNDEFINED_UINT64;
/// `OTF2_UNDEFINED_IO_PARADIGM`.
pub const OTF2_UNDEFINED_IO_PARADIGM: OTF2_IoParadigmRef = OTF2_UNDEFINED_UINT8;
/// `OTF2_UNDEFINED_STRING`.
pub const OTF2_UNDEFINED_STRING: OTF2_StringRef = OTF2_UNDEFINED_UINT32;
/// `OTF2_UNDEFINED_ATTRIBUTE`.
pub const OTF2_UNDEFINED_ATTRIBUTE: OTF2_AttributeRef = OTF2_UNDEFINED_UINT32;
/// `OTF2_UNDEFINED_SYSTEM_TREE_NODE`: the parent of a root system-tree node.
pub const OTF2_UNDEFINED_SYSTEM_TREE_NODE: OTF2_SystemTreeNodeRef = OTF2_UNDEFINED_UINT32;
/// `OTF2_UNDEFINED_LOCATION_GROUP`: e.g. the `creatingLocationGroup` of a process.
pub const OTF2_UNDEFINED_LOCATION_GROUP: OTF2_LocationGroupRef = OTF2_UNDEFINED_UINT32;
/// `OTF2_UNDEFINED_LOCATION`: an `EvtWriter` whose location is set later
/// (`OTF2_EvtWriter_SetLocationID`).
pub const OTF2_UNDEFINED_LOCATION: OTF2_LocationRef = OTF2_UNDEFINED_UINT64;
/// `OTF2_UNDEFINED_REGION`.
pub const OTF2_UNDEFINED_REGION: OTF2_RegionRef = OTF2_UNDEFINED_UINT32;
/// `OTF2_UNDEFINED_CALLSITE`.
pub const OTF2_UNDEFINED_CALLSITE: OTF2_CallsiteRef = OTF2_UNDEFINED_UINT32;
/// `OTF2_UNDEFINED_CALLPATH`.
pub const OTF2_UNDEFINED_CALLPATH: OTF2_CallpathRef = OTF2_UNDEFINED_UINT32;
/// `OTF2_UNDEFINED_GROUP`.
pub const OTF2_UNDEFINED_GROUP: OTF2_GroupRef = OTF2_UNDEFINED_UINT32;
/// `OTF2_UNDEFINED_METRIC_MEMBER`.
pub const OTF2_UNDEFINED_METRIC_MEMBER: OTF2_MetricMemberRef = OTF2_UNDEFINED_UINT32;
/// `OTF2_UNDEFINED_METRIC`.
pub const OTF2_UNDEFINED_METRIC: OTF2_MetricRef = OTF2_UNDEFINED_UINT32;
/// `OTF2_UNDEFINED_COMM`: e.g. the parent of a communicator without one.
pub const OTF2_UNDEFINED_COMM: OTF2_CommRef = OTF2_UNDEFINED_UINT32;
/// `OTF2_UNDEFINED_PARAMETER`.
pub const OTF2_UNDEFINED_PARAMETER: OTF2_ParameterRef = OTF2_UNDEFINED_UINT32;
/// `OTF2_UNDEFINED_RMA_WIN`.
pub const OTF2_UNDEFINED_RMA_WIN: OTF2_RmaWinRef = OTF2_UNDEFINED_UINT32;
/// `OTF2_UNDEFINED_CART_DIMENSION`.
pub const OTF2_UNDEFINED_CART_DIMENSION: OTF2_CartDimensionRef = OTF2_UNDEFINED_UINT32;
/// `OTF2_UNDEFINED_CART_TOPOLOGY`.
pub const OTF2_UNDEFINED_CART_TOPOLOGY: OTF2_CartTopologyRef = OTF2_UNDEFINED_UINT32;
/// `OTF2_UNDEFINED_SOURCE_CODE_LOCATION`.
pub const OTF2_UNDEFINED_SOURCE_CODE_LOCATION: OTF2_SourceCodeLocationRef = OTF2_UNDEFINED_UINT32;
/// `OTF2_UNDEFINED_CALLING_CONTEXT`.
pub const OTF2_UNDEFINED_CALLING_CONTEXT: OTF2_CallingContextRef = OTF2_UNDEFINED_UINT32;
/// `OTF2_UNDEFINED_INTERRUPT_GENERATOR`.
pub const OTF2_UNDEFINED_INTERRUPT_GENERATOR: OTF2_InterruptGeneratorRef = OTF2_UNDEFINED_UINT32;
/// `OTF2_UNDEFINED_IO_FILE`.
pub const OTF2_UNDEFINED_IO_FILE: OTF2_IoFileRef = OTF2_UNDEFINED_UINT32;
/// `OTF2_UNDEFINED_IO_HANDLE`.
pub const OTF2_UNDEFINED_IO_HANDLE: OTF2_IoHandleRef = OTF2_UNDEFINED_UINT32;
/// `OTF2_UNDEFINED_MARKER` (from `OTF2_Marker.h`).
pub const OTF2_UNDEFINED_MARKER: OTF2_MarkerRef = OTF2_UNDEFINED_UINT32;

/// `OTF2_CHUNK_SIZE_MIN`: the smallest event or definition chunk size `OTF2_Archive_Open`
/// accepts (256 KiB).
pub const OTF2_CHUNK_SIZE_MIN: u64 = 256 * 1024;
/// `OTF2_CHUNK_SIZE_MAX`: the largest chunk size (16 MiB).
pub const OTF2_CHUNK_SIZE_MAX: u64 = 16 * 1024 * 1024;
/// `OTF2_CHUNK_SIZE_EVENTS_DEFAULT` (1 MiB), as the `u64` that `OTF2_Archive_Open` takes
/// (bindgen's own translation of this macro is a `u32`; this one shadows it).
pub const OTF2_CHUNK_SIZE_EVENTS_DEFAULT: u64 = 1024 * 1024;
/// `OTF2_CHUNK_SIZE_DEFINITIONS_DEFAULT` (4 MiB), as a `u64` like
/// [`OTF2_CHUNK_SIZE_EVENTS_DEFAULT`].
pub const OTF2_CHUNK_SIZE_DEFINITIONS_DEFAULT: u64 = 4 * 1024 * 1024;

#[cfg(test)]
mod tests {
    /// One hand-made constant next to the value the C compiler computed from the header.
    #[derive(Debug)]
    struct HeaderValue {
        name: &'static str,
        /// Whether the types must agree too, not only the values.
        typed: bool,
        rust_bits: u64,
        rust_size: usize,
        rust_signed: bool,
        c_bits: u64,
        c_size: usize,
        c_signed: bool,
    }

    trait Signedness {
        const SIGNED: bool;
    }
    macro_rules! signedness {
        ($($t:ty => $s:expr),*) => { $(impl Signedness for $t { const SIGNED: bool = $s; })* };
    }
    signedness!(u8 => false, u16 => false, u32 => false, u64 => false,
                i8 => true, i16 => true, i32 => true, i64 => true);

    fn signed_of<T: Signedness>(_: T) -> bool {
        T::SIGNED
    }

    // Generated by build.rs: the extern C variables and `header_values()`.
    // Generated code: its unsafe blocks read the header's values and are not ours.
    #[allow(clippy::unnecessary_cast, clippy::undocumented_unsafe_blocks)]
    mod generated {
        use super::{signed_of, HeaderValue};
        include!(concat!(env!("OUT_DIR"), "/header_values.rs"));
    }

    #[test]
    fn hand_made_constants_match_the_c_headers() {
        let values = generated::header_values();
        assert!(!values.is_empty());
        for v in &values {
            // Sign-extended on both sides, so negative values compare too.
            assert_eq!(
                v.rust_bits, v.c_bits,
                "{}: Rust value {:#x} but the C header gives {:#x}",
                v.name, v.rust_bits, v.c_bits
            );
            if v.typed {
                assert_eq!(
                    (v.rust_size, v.rust_signed),
                    (v.c_size, v.c_signed),
                    "{}: Rust type (size, signed) differs from the C expression's",
                    v.name
                );
            }
        }
    }

    #[test]
    fn every_hand_made_constant_is_checked() {
        let checked: Vec<&str> = generated::header_values().iter().map(|v| v.name).collect();
        let source = include_str!("consts.rs");
        let declared: Vec<&str> = source
            .lines()
            .filter_map(|line| line.strip_prefix("pub const "))
            .filter_map(|rest| rest.split(':').next())
            .collect();
        assert_eq!(
            declared.len(),
            checked.len(),
            "declared {declared:?}, checked {checked:?}"
        );
        for name in declared {
            assert!(
                checked.contains(&name),
                "{name} is declared in consts.rs but missing from HAND_MADE in build.rs"
            );
        }
    }
}
