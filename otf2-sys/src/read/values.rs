//! Typed values of OTF2's `OTF2_Type` + `OTF2_AttributeValue` pairs (event attributes,
//! property definitions), and the decoding of an event's attribute list.
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

use crate::*;

/// One value with its OTF2 type. References are the ids as written in the archive.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AttributeValue {
    /// `OTF2_TYPE_NONE`.
    None,
    Uint8(u8),
    Uint16(u16),
    Uint32(u32),
    Uint64(u64),
    Int8(i8),
    Int16(i16),
    Int32(i32),
    Int64(i64),
    Float(f32),
    Double(f64),
    /// A string definition's id.
    String(u32),
    Attribute(u32),
    Location(u64),
    Region(u32),
    Group(u32),
    Metric(u32),
    Comm(u32),
    Parameter(u32),
    RmaWin(u32),
    SourceCodeLocation(u32),
    CallingContext(u32),
    InterruptGenerator(u32),
    IoFile(u32),
    IoHandle(u32),
    LocationGroup(u32),
    /// A type this OTF2 version does not know; its value is not read.
    Other(OTF2_Type),
}

impl AttributeValue {
    /// An unsigned integer (`UINT8` … `UINT64`).
    pub fn unsigned(self) -> Option<u64> {
        match self {
            AttributeValue::Uint8(v) => Some(u64::from(v)),
            AttributeValue::Uint16(v) => Some(u64::from(v)),
            AttributeValue::Uint32(v) => Some(u64::from(v)),
            AttributeValue::Uint64(v) => Some(v),
            _ => None,
        }
    }

    /// A signed integer (`INT8` … `INT64`).
    pub fn signed(self) -> Option<i64> {
        match self {
            AttributeValue::Int8(v) => Some(i64::from(v)),
            AttributeValue::Int16(v) => Some(i64::from(v)),
            AttributeValue::Int32(v) => Some(i64::from(v)),
            AttributeValue::Int64(v) => Some(v),
            _ => None,
        }
    }

    /// A string reference.
    pub fn string(self) -> Option<u32> {
        match self {
            AttributeValue::String(id) => Some(id),
            _ => None,
        }
    }

    /// The value OTF2 handed over as `value_type` and `value`.
    pub fn from_raw(value_type: OTF2_Type, value: OTF2_AttributeValue) -> AttributeValue {
        use AttributeValue as V;
        // SAFETY: each arm reads the union member that `value_type` names, which is the
        // one OTF2 wrote; an unknown type reads nothing.
        unsafe {
            match u32::from(value_type) {
                OTF2_TYPE_NONE => V::None,
                OTF2_TYPE_UINT8 => V::Uint8(value.uint8),
                OTF2_TYPE_UINT16 => V::Uint16(value.uint16),
                OTF2_TYPE_UINT32 => V::Uint32(value.uint32),
                OTF2_TYPE_UINT64 => V::Uint64(value.uint64),
                OTF2_TYPE_INT8 => V::Int8(value.int8),
                OTF2_TYPE_INT16 => V::Int16(value.int16),
                OTF2_TYPE_INT32 => V::Int32(value.int32),
                OTF2_TYPE_INT64 => V::Int64(value.int64),
                OTF2_TYPE_FLOAT => V::Float(value.float32),
                OTF2_TYPE_DOUBLE => V::Double(value.float64),
                OTF2_TYPE_STRING => V::String(value.stringRef),
                OTF2_TYPE_ATTRIBUTE => V::Attribute(value.attributeRef),
                OTF2_TYPE_LOCATION => V::Location(value.locationRef),
                OTF2_TYPE_REGION => V::Region(value.regionRef),
                OTF2_TYPE_GROUP => V::Group(value.groupRef),
                OTF2_TYPE_METRIC => V::Metric(value.metricRef),
                OTF2_TYPE_COMM => V::Comm(value.commRef),
                OTF2_TYPE_PARAMETER => V::Parameter(value.parameterRef),
                OTF2_TYPE_RMA_WIN => V::RmaWin(value.rmaWinRef),
                OTF2_TYPE_SOURCE_CODE_LOCATION => {
                    V::SourceCodeLocation(value.sourceCodeLocationRef)
                }
                OTF2_TYPE_CALLING_CONTEXT => V::CallingContext(value.callingContextRef),
                OTF2_TYPE_INTERRUPT_GENERATOR => V::InterruptGenerator(value.interruptGeneratorRef),
                OTF2_TYPE_IO_FILE => V::IoFile(value.ioFileRef),
                OTF2_TYPE_IO_HANDLE => V::IoHandle(value.ioHandleRef),
                OTF2_TYPE_LOCATION_GROUP => V::LocationGroup(value.locationGroupRef),
                _ => V::Other(value_type),
            }
        }
    }

    /// The type and value to hand to OTF2.
    pub fn to_raw(self) -> (OTF2_Type, OTF2_AttributeValue) {
        use AttributeValue as V;
        let mut value = OTF2_AttributeValue { uint64: 0 };
        let value_type = match self {
            V::None => OTF2_TYPE_NONE,
            V::Uint8(v) => {
                value.uint8 = v;
                OTF2_TYPE_UINT8
            }
            V::Uint16(v) => {
                value.uint16 = v;
                OTF2_TYPE_UINT16
            }
            V::Uint32(v) => {
                value.uint32 = v;
                OTF2_TYPE_UINT32
            }
            V::Uint64(v) => {
                value.uint64 = v;
                OTF2_TYPE_UINT64
            }
            V::Int8(v) => {
                value.int8 = v;
                OTF2_TYPE_INT8
            }
            V::Int16(v) => {
                value.int16 = v;
                OTF2_TYPE_INT16
            }
            V::Int32(v) => {
                value.int32 = v;
                OTF2_TYPE_INT32
            }
            V::Int64(v) => {
                value.int64 = v;
                OTF2_TYPE_INT64
            }
            V::Float(v) => {
                value.float32 = v;
                OTF2_TYPE_FLOAT
            }
            V::Double(v) => {
                value.float64 = v;
                OTF2_TYPE_DOUBLE
            }
            V::String(id) => {
                value.stringRef = id;
                OTF2_TYPE_STRING
            }
            V::Attribute(id) => {
                value.attributeRef = id;
                OTF2_TYPE_ATTRIBUTE
            }
            V::Location(id) => {
                value.locationRef = id;
                OTF2_TYPE_LOCATION
            }
            V::Region(id) => {
                value.regionRef = id;
                OTF2_TYPE_REGION
            }
            V::Group(id) => {
                value.groupRef = id;
                OTF2_TYPE_GROUP
            }
            V::Metric(id) => {
                value.metricRef = id;
                OTF2_TYPE_METRIC
            }
            V::Comm(id) => {
                value.commRef = id;
                OTF2_TYPE_COMM
            }
            V::Parameter(id) => {
                value.parameterRef = id;
                OTF2_TYPE_PARAMETER
            }
            V::RmaWin(id) => {
                value.rmaWinRef = id;
                OTF2_TYPE_RMA_WIN
            }
            V::SourceCodeLocation(id) => {
                value.sourceCodeLocationRef = id;
                OTF2_TYPE_SOURCE_CODE_LOCATION
            }
            V::CallingContext(id) => {
                value.callingContextRef = id;
                OTF2_TYPE_CALLING_CONTEXT
            }
            V::InterruptGenerator(id) => {
                value.interruptGeneratorRef = id;
                OTF2_TYPE_INTERRUPT_GENERATOR
            }
            V::IoFile(id) => {
                value.ioFileRef = id;
                OTF2_TYPE_IO_FILE
            }
            V::IoHandle(id) => {
                value.ioHandleRef = id;
                OTF2_TYPE_IO_HANDLE
            }
            V::LocationGroup(id) => {
                value.locationGroupRef = id;
                OTF2_TYPE_LOCATION_GROUP
            }
            V::Other(value_type) => return (value_type, value),
        };
        (value_type as OTF2_Type, value)
    }
}

/// The value of attribute `id` in `list`, found without decoding the others; an entry
/// OTF2 cannot hand out counts as absent.
///
/// # Safety
/// `list` is NULL or an attribute list that is live for the call (one OTF2 handed to an
/// event callback).
pub(crate) unsafe fn find_attribute(
    list: *const OTF2_AttributeList,
    id: OTF2_AttributeRef,
) -> Option<AttributeValue> {
    // SAFETY: as the caller promises.
    unsafe { attribute_entries(list) }
        .find(|&(found, _, _)| found == id)
        .map(|(_, value_type, value)| AttributeValue::from_raw(value_type, value))
}

/// Appends the (attribute id, value) pairs of `list` to `out`; entries OTF2 cannot hand
/// out are skipped.
///
/// # Safety
/// `list` is NULL or an attribute list that is live for the call (one OTF2 handed to an
/// event callback).
pub(crate) unsafe fn decode_attribute_list(
    list: *const OTF2_AttributeList,
    out: &mut Vec<(u32, AttributeValue)>,
) {
    // SAFETY: as the caller promises.
    let entries = unsafe { attribute_entries(list) };
    out.extend(
        entries.map(|(id, value_type, value)| (id, AttributeValue::from_raw(value_type, value))),
    );
}

/// The entries of `list` as OTF2 hands them out (attribute id, type, raw value), one at a
/// time as they are taken; entries it cannot hand out are skipped.
///
/// # Safety
/// `list` is NULL or an attribute list that stays live while the iterator is used.
unsafe fn attribute_entries(
    list: *const OTF2_AttributeList,
) -> impl Iterator<Item = (OTF2_AttributeRef, OTF2_Type, OTF2_AttributeValue)> {
    let count = if list.is_null() {
        0
    } else {
        // SAFETY: a live list (caller).
        unsafe { OTF2_AttributeList_GetNumberOfElements(list) }
    };
    (0..count).filter_map(move |index| {
        let mut id: OTF2_AttributeRef = 0;
        let mut value_type: OTF2_Type = 0;
        let mut value = OTF2_AttributeValue { uint64: 0 };
        // SAFETY: a live list (caller) and index < count; the out pointers are valid
        // locals.
        let code = unsafe {
            OTF2_AttributeList_GetAttributeByIndex(
                list,
                index,
                &mut id,
                &mut value_type,
                &mut value,
            )
        };
        (code == OTF2_SUCCESS).then_some((id, value_type, value))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_go_to_otf2_and_back_unchanged() {
        let values = [
            AttributeValue::None,
            AttributeValue::Uint8(200),
            AttributeValue::Uint64(u64::MAX - 1),
            AttributeValue::Int16(-300),
            AttributeValue::Int64(i64::MIN),
            AttributeValue::Double(2.5),
            AttributeValue::Float(-1.5),
            AttributeValue::String(7),
            AttributeValue::Location(1 << 40),
            AttributeValue::LocationGroup(3),
        ];
        for value in values {
            let (value_type, raw) = value.to_raw();
            assert_eq!(AttributeValue::from_raw(value_type, raw), value);
        }
        assert_eq!(AttributeValue::Uint16(9).unsigned(), Some(9));
        assert_eq!(AttributeValue::Int8(-2).signed(), Some(-2));
        assert_eq!(AttributeValue::Int8(-2).unsigned(), None);
        assert_eq!(AttributeValue::String(4).string(), Some(4));
    }
}
