//! Every global definition record of OTF2 3.0 as a Rust value ([`GlobalDefinition`]): read
//! through OTF2's callbacks, and written again as it was read (what `merge --scorep` does
//! with Score-P's definitions). One table below gives each kind's fields in OTF2's order,
//! its reader callback and its writer function.
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

use std::ffi::{c_char, c_void, CString};

use crate::callbacks::{first_failure, guarded, text, CallbackState};
use crate::read::model::{
    Attribute, ClockProperties, Comm, Group, Location, LocationGroup, Paradigm, Region,
    SystemTreeNode,
};
use crate::read::values::AttributeValue;
use crate::reading::copy_array;
use crate::*;

/// A String definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StringDef {
    pub id: u32,
    pub text: String,
}

/// A MetricClass definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetricClassDef {
    pub id: OTF2_MetricRef,
    pub members: Vec<OTF2_MetricMemberRef>,
    pub occurrence: OTF2_MetricOccurrence,
    pub recorder_kind: OTF2_RecorderKind,
}

/// A CartTopology definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CartTopologyDef {
    pub id: OTF2_CartTopologyRef,
    pub name: OTF2_StringRef,
    pub comm: OTF2_CommRef,
    pub dimensions: Vec<OTF2_CartDimensionRef>,
}

/// A CartCoordinate definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CartCoordinateDef {
    pub topology: OTF2_CartTopologyRef,
    pub rank: u32,
    pub coordinates: Vec<u32>,
}

/// An IoParadigm definition.
#[derive(Clone, Debug, PartialEq)]
pub struct IoParadigmDef {
    pub id: OTF2_IoParadigmRef,
    pub identification: OTF2_StringRef,
    pub name: OTF2_StringRef,
    pub class: OTF2_IoParadigmClass,
    pub flags: OTF2_IoParadigmFlag,
    pub properties: Vec<(OTF2_IoParadigmProperty, AttributeValue)>,
}

/// Defines, from one table: the record structs not in the model, [`GlobalDefinition`] with
/// a variant per kind, a reader callback per kind (module `cb`), `set_callbacks`, and
/// `GlobalDefinition::write_raw`. A `model` line names a struct of `model.rs`, a `plain`
/// line defines its struct, a `valued` line ends with OTF2's (type, value) pair, held as
/// one `value: AttributeValue`. The compiler checks every line against OTF2's callback and
/// writer types. The kinds with arrays or a string are written out by hand below.
macro_rules! definitions {
    ($(
        $how:ident $variant:ident($record:ident { $($field:ident: $ty:ty),* $(,)? })
            via $set:ident, $write:ident;
    )*) => {
        $(definitions!(@struct $how $record { $($field: $ty),* });)*

        /// One global definition record, with the ids as written.
        #[derive(Clone, Debug, PartialEq)]
        pub enum GlobalDefinition {
            $($variant($record),)*
            String(StringDef),
            Group(Group),
            MetricClass(MetricClassDef),
            CartTopology(CartTopologyDef),
            CartCoordinate(CartCoordinateDef),
            IoParadigm(IoParadigmDef),
        }

        impl GlobalDefinition {
            /// The record's OTF2 name ("Region").
            pub fn kind(&self) -> &'static str {
                match self {
                    $(GlobalDefinition::$variant(_) => stringify!($variant),)*
                    GlobalDefinition::String(_) => "String",
                    GlobalDefinition::Group(_) => "Group",
                    GlobalDefinition::MetricClass(_) => "MetricClass",
                    GlobalDefinition::CartTopology(_) => "CartTopology",
                    GlobalDefinition::CartCoordinate(_) => "CartCoordinate",
                    GlobalDefinition::IoParadigm(_) => "IoParadigm",
                }
            }

            /// Writes the record with `writer`.
            ///
            /// # Safety
            /// `writer` is an open global definition writer.
            pub(crate) unsafe fn write_raw(
                &self,
                writer: *mut OTF2_GlobalDefWriter,
            ) -> Result<OTF2_ErrorCode, Step> {
                match self {
                    $(GlobalDefinition::$variant(r) => {
                        definitions!(@write $how r, writer, $write($($field),*))
                    })*
                    // SAFETY: per the caller.
                    other => unsafe { write_by_hand(other, writer) },
                }
            }
        }

        mod cb {
            //! The reader callbacks of the kinds in the table, named after the kind.
            #![allow(non_snake_case, clippy::too_many_arguments)]
            use super::*;
            $(definitions!(@callback $how $variant $record ($($field: $ty),*));)*
        }

        /// Sets a callback for every kind of global definition in `c`; they take a
        /// [`DefinitionState`] as their user data.
        ///
        /// # Safety
        /// `c` is a live callbacks table.
        pub(crate) unsafe fn set_callbacks(c: *mut OTF2_GlobalDefReaderCallbacks) -> OTF2_ErrorCode {
            // SAFETY: `c` is live (caller); each function has the type its setter takes
            // (the compiler checks it).
            unsafe {
                first_failure(&[
                    $($set(c, Some(cb::$variant)),)*
                    OTF2_GlobalDefReaderCallbacks_SetStringCallback(c, Some(read_string)),
                    OTF2_GlobalDefReaderCallbacks_SetGroupCallback(c, Some(read_group)),
                    OTF2_GlobalDefReaderCallbacks_SetMetricClassCallback(c, Some(read_metric_class)),
                    OTF2_GlobalDefReaderCallbacks_SetCartTopologyCallback(c, Some(read_cart_topology)),
                    OTF2_GlobalDefReaderCallbacks_SetCartCoordinateCallback(
                        c,
                        Some(read_cart_coordinate),
                    ),
                    OTF2_GlobalDefReaderCallbacks_SetIoParadigmCallback(c, Some(read_io_paradigm)),
                    OTF2_GlobalDefReaderCallbacks_SetUnknownCallback(c, Some(read_unknown)),
                ])
            }
        }
    };

    (@struct model $record:ident { $($field:ident: $ty:ty),* }) => {};
    (@struct plain $record:ident { $($field:ident: $ty:ty),* }) => {
        #[doc = concat!("A `", stringify!($record), "` record (see OTF2's definition of it).")]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct $record { $(pub $field: $ty),* }
    };
    (@struct valued $record:ident { $($field:ident: $ty:ty),* }) => {
        #[doc = concat!("A `", stringify!($record), "` record with its typed value.")]
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub struct $record { $(pub $field: $ty,)* pub value: AttributeValue }
    };

    (@callback valued $variant:ident $record:ident ($($field:ident: $ty:ty),*)) => {
        pub(super) unsafe extern "C" fn $variant(
            user_data: *mut c_void,
            $($field: $ty,)*
            value_type: OTF2_Type,
            value: OTF2_AttributeValue,
        ) -> OTF2_CallbackCode {
            let record = $record { $($field,)* value: AttributeValue::from_raw(value_type, value) };
            // SAFETY: OTF2 passes back the user data `read_global_definitions` registered.
            unsafe { deliver(user_data, GlobalDefinition::$variant(record)) }
        }
    };
    (@callback $how:ident $variant:ident $record:ident ($($field:ident: $ty:ty),*)) => {
        pub(super) unsafe extern "C" fn $variant(
            user_data: *mut c_void,
            $($field: $ty),*
        ) -> OTF2_CallbackCode {
            let record = $record { $($field),* };
            // SAFETY: OTF2 passes back the user data `read_global_definitions` registered.
            unsafe { deliver(user_data, GlobalDefinition::$variant(record)) }
        }
    };

    (@write valued $r:ident, $writer:ident, $write:ident($($field:ident),*)) => {{
        let (value_type, value) = $r.value.to_raw();
        // SAFETY: `writer` is open (caller); the arguments are plain values.
        Ok(unsafe { $write($writer, $($r.$field,)* value_type, value) })
    }};
    (@write $how:ident $r:ident, $writer:ident, $write:ident($($field:ident),*)) => {{
        // SAFETY: `writer` is open (caller); the arguments are plain values.
        Ok(unsafe { $write($writer, $($r.$field),*) })
    }};
}

definitions! {
    model ClockProperties(ClockProperties {
        timer_resolution: u64, global_offset: u64, trace_length: u64, realtime_timestamp: u64,
    }) via OTF2_GlobalDefReaderCallbacks_SetClockPropertiesCallback,
        OTF2_GlobalDefWriter_WriteClockProperties;
    model Paradigm(Paradigm {
        paradigm: OTF2_Paradigm, name: OTF2_StringRef, class: OTF2_ParadigmClass,
    }) via OTF2_GlobalDefReaderCallbacks_SetParadigmCallback, OTF2_GlobalDefWriter_WriteParadigm;
    valued ParadigmProperty(ParadigmPropertyDef {
        paradigm: OTF2_Paradigm, property: OTF2_ParadigmProperty,
    }) via OTF2_GlobalDefReaderCallbacks_SetParadigmPropertyCallback,
        OTF2_GlobalDefWriter_WriteParadigmProperty;
    model Attribute(Attribute {
        id: OTF2_AttributeRef, name: OTF2_StringRef, description: OTF2_StringRef,
        attribute_type: OTF2_Type,
    }) via OTF2_GlobalDefReaderCallbacks_SetAttributeCallback, OTF2_GlobalDefWriter_WriteAttribute;
    model SystemTreeNode(SystemTreeNode {
        id: OTF2_SystemTreeNodeRef, name: OTF2_StringRef, class_name: OTF2_StringRef,
        parent: OTF2_SystemTreeNodeRef,
    }) via OTF2_GlobalDefReaderCallbacks_SetSystemTreeNodeCallback,
        OTF2_GlobalDefWriter_WriteSystemTreeNode;
    model LocationGroup(LocationGroup {
        id: OTF2_LocationGroupRef, name: OTF2_StringRef, group_type: OTF2_LocationGroupType,
        system_tree_parent: OTF2_SystemTreeNodeRef, creating_location_group: OTF2_LocationGroupRef,
    }) via OTF2_GlobalDefReaderCallbacks_SetLocationGroupCallback,
        OTF2_GlobalDefWriter_WriteLocationGroup;
    model Location(Location {
        id: OTF2_LocationRef, name: OTF2_StringRef, location_type: OTF2_LocationType,
        number_of_events: u64, location_group: OTF2_LocationGroupRef,
    }) via OTF2_GlobalDefReaderCallbacks_SetLocationCallback, OTF2_GlobalDefWriter_WriteLocation;
    model Region(Region {
        id: OTF2_RegionRef, name: OTF2_StringRef, canonical_name: OTF2_StringRef,
        description: OTF2_StringRef, role: OTF2_RegionRole, paradigm: OTF2_Paradigm,
        flags: OTF2_RegionFlag, source_file: OTF2_StringRef, begin_line: u32, end_line: u32,
    }) via OTF2_GlobalDefReaderCallbacks_SetRegionCallback, OTF2_GlobalDefWriter_WriteRegion;
    plain Callsite(CallsiteDef {
        id: OTF2_CallsiteRef, source_file: OTF2_StringRef, line: u32, entered: OTF2_RegionRef,
        left: OTF2_RegionRef,
    }) via OTF2_GlobalDefReaderCallbacks_SetCallsiteCallback, OTF2_GlobalDefWriter_WriteCallsite;
    plain Callpath(CallpathDef {
        id: OTF2_CallpathRef, parent: OTF2_CallpathRef, region: OTF2_RegionRef,
    }) via OTF2_GlobalDefReaderCallbacks_SetCallpathCallback, OTF2_GlobalDefWriter_WriteCallpath;
    plain MetricMember(MetricMemberDef {
        id: OTF2_MetricMemberRef, name: OTF2_StringRef, description: OTF2_StringRef,
        metric_type: OTF2_MetricType, mode: OTF2_MetricMode, value_type: OTF2_Type,
        base: OTF2_Base, exponent: i64, unit: OTF2_StringRef,
    }) via OTF2_GlobalDefReaderCallbacks_SetMetricMemberCallback,
        OTF2_GlobalDefWriter_WriteMetricMember;
    plain MetricInstance(MetricInstanceDef {
        id: OTF2_MetricRef, class: OTF2_MetricRef, recorder: OTF2_LocationRef,
        scope_type: OTF2_MetricScope, scope: u64,
    }) via OTF2_GlobalDefReaderCallbacks_SetMetricInstanceCallback,
        OTF2_GlobalDefWriter_WriteMetricInstance;
    model Comm(Comm {
        id: OTF2_CommRef, name: OTF2_StringRef, group: OTF2_GroupRef, parent: OTF2_CommRef,
        flags: OTF2_CommFlag,
    }) via OTF2_GlobalDefReaderCallbacks_SetCommCallback, OTF2_GlobalDefWriter_WriteComm;
    plain Parameter(ParameterDef {
        id: OTF2_ParameterRef, name: OTF2_StringRef, parameter_type: OTF2_ParameterType,
    }) via OTF2_GlobalDefReaderCallbacks_SetParameterCallback, OTF2_GlobalDefWriter_WriteParameter;
    plain RmaWin(RmaWinDef {
        id: OTF2_RmaWinRef, name: OTF2_StringRef, comm: OTF2_CommRef, flags: OTF2_RmaWinFlag,
    }) via OTF2_GlobalDefReaderCallbacks_SetRmaWinCallback, OTF2_GlobalDefWriter_WriteRmaWin;
    plain MetricClassRecorder(MetricClassRecorderDef {
        metric: OTF2_MetricRef, recorder: OTF2_LocationRef,
    }) via OTF2_GlobalDefReaderCallbacks_SetMetricClassRecorderCallback,
        OTF2_GlobalDefWriter_WriteMetricClassRecorder;
    valued SystemTreeNodeProperty(SystemTreeNodePropertyDef {
        node: OTF2_SystemTreeNodeRef, name: OTF2_StringRef,
    }) via OTF2_GlobalDefReaderCallbacks_SetSystemTreeNodePropertyCallback,
        OTF2_GlobalDefWriter_WriteSystemTreeNodeProperty;
    plain SystemTreeNodeDomain(SystemTreeNodeDomainDef {
        node: OTF2_SystemTreeNodeRef, domain: OTF2_SystemTreeDomain,
    }) via OTF2_GlobalDefReaderCallbacks_SetSystemTreeNodeDomainCallback,
        OTF2_GlobalDefWriter_WriteSystemTreeNodeDomain;
    valued LocationGroupProperty(LocationGroupPropertyDef {
        group: OTF2_LocationGroupRef, name: OTF2_StringRef,
    }) via OTF2_GlobalDefReaderCallbacks_SetLocationGroupPropertyCallback,
        OTF2_GlobalDefWriter_WriteLocationGroupProperty;
    valued LocationProperty(LocationPropertyDef {
        location: OTF2_LocationRef, name: OTF2_StringRef,
    }) via OTF2_GlobalDefReaderCallbacks_SetLocationPropertyCallback,
        OTF2_GlobalDefWriter_WriteLocationProperty;
    plain CartDimension(CartDimensionDef {
        id: OTF2_CartDimensionRef, name: OTF2_StringRef, size: u32,
        periodicity: OTF2_CartPeriodicity,
    }) via OTF2_GlobalDefReaderCallbacks_SetCartDimensionCallback,
        OTF2_GlobalDefWriter_WriteCartDimension;
    plain SourceCodeLocation(SourceCodeLocationDef {
        id: OTF2_SourceCodeLocationRef, file: OTF2_StringRef, line: u32,
    }) via OTF2_GlobalDefReaderCallbacks_SetSourceCodeLocationCallback,
        OTF2_GlobalDefWriter_WriteSourceCodeLocation;
    plain CallingContext(CallingContextDef {
        id: OTF2_CallingContextRef, region: OTF2_RegionRef,
        location: OTF2_SourceCodeLocationRef, parent: OTF2_CallingContextRef,
    }) via OTF2_GlobalDefReaderCallbacks_SetCallingContextCallback,
        OTF2_GlobalDefWriter_WriteCallingContext;
    valued CallingContextProperty(CallingContextPropertyDef {
        context: OTF2_CallingContextRef, name: OTF2_StringRef,
    }) via OTF2_GlobalDefReaderCallbacks_SetCallingContextPropertyCallback,
        OTF2_GlobalDefWriter_WriteCallingContextProperty;
    plain InterruptGenerator(InterruptGeneratorDef {
        id: OTF2_InterruptGeneratorRef, name: OTF2_StringRef,
        mode: OTF2_InterruptGeneratorMode, base: OTF2_Base, exponent: i64, period: u64,
    }) via OTF2_GlobalDefReaderCallbacks_SetInterruptGeneratorCallback,
        OTF2_GlobalDefWriter_WriteInterruptGenerator;
    valued IoFileProperty(IoFilePropertyDef {
        file: OTF2_IoFileRef, name: OTF2_StringRef,
    }) via OTF2_GlobalDefReaderCallbacks_SetIoFilePropertyCallback,
        OTF2_GlobalDefWriter_WriteIoFileProperty;
    plain IoRegularFile(IoRegularFileDef {
        id: OTF2_IoFileRef, name: OTF2_StringRef, scope: OTF2_SystemTreeNodeRef,
    }) via OTF2_GlobalDefReaderCallbacks_SetIoRegularFileCallback,
        OTF2_GlobalDefWriter_WriteIoRegularFile;
    plain IoDirectory(IoDirectoryDef {
        id: OTF2_IoFileRef, name: OTF2_StringRef, scope: OTF2_SystemTreeNodeRef,
    }) via OTF2_GlobalDefReaderCallbacks_SetIoDirectoryCallback,
        OTF2_GlobalDefWriter_WriteIoDirectory;
    plain IoHandle(IoHandleDef {
        id: OTF2_IoHandleRef, name: OTF2_StringRef, file: OTF2_IoFileRef,
        paradigm: OTF2_IoParadigmRef, flags: OTF2_IoHandleFlag, comm: OTF2_CommRef,
        parent: OTF2_IoHandleRef,
    }) via OTF2_GlobalDefReaderCallbacks_SetIoHandleCallback, OTF2_GlobalDefWriter_WriteIoHandle;
    plain IoPreCreatedHandleState(IoPreCreatedHandleStateDef {
        handle: OTF2_IoHandleRef, mode: OTF2_IoAccessMode, flags: OTF2_IoStatusFlag,
    }) via OTF2_GlobalDefReaderCallbacks_SetIoPreCreatedHandleStateCallback,
        OTF2_GlobalDefWriter_WriteIoPreCreatedHandleState;
    valued CallpathParameter(CallpathParameterDef {
        callpath: OTF2_CallpathRef, parameter: OTF2_ParameterRef,
    }) via OTF2_GlobalDefReaderCallbacks_SetCallpathParameterCallback,
        OTF2_GlobalDefWriter_WriteCallpathParameter;
    plain InterComm(InterCommDef {
        id: OTF2_CommRef, name: OTF2_StringRef, group_a: OTF2_GroupRef, group_b: OTF2_GroupRef,
        common: OTF2_CommRef, flags: OTF2_CommFlag,
    }) via OTF2_GlobalDefReaderCallbacks_SetInterCommCallback, OTF2_GlobalDefWriter_WriteInterComm;
}

/// An array's length as the `u8` or `u32` OTF2 takes; too long an array cannot be written.
fn count<N: TryFrom<usize>>(len: usize, kind: &'static str) -> Result<N, Step> {
    N::try_from(len).map_err(|_| Step::WriteDefinition(kind))
}

/// Writes a String definition (a NUL in `text` becomes `?`: OTF2 takes C strings).
///
/// # Safety
/// `writer` is an open global definition writer.
pub(crate) unsafe fn write_string(
    writer: *mut OTF2_GlobalDefWriter,
    id: u32,
    text: &str,
) -> OTF2_ErrorCode {
    let text = CString::new(text.replace('\0', "?")).unwrap_or_default();
    // SAFETY: `writer` is open (caller); `text` outlives the call and OTF2 copies it.
    unsafe { OTF2_GlobalDefWriter_WriteString(writer, id, text.as_ptr()) }
}

/// Writes a Group definition.
///
/// # Safety
/// `writer` is an open global definition writer.
pub(crate) unsafe fn write_group(
    writer: *mut OTF2_GlobalDefWriter,
    g: &Group,
) -> Result<OTF2_ErrorCode, Step> {
    let n = count::<u32>(g.members.len(), "Group")?;
    // SAFETY: `writer` is open (caller); `members` holds `n` values and outlives the call;
    // OTF2 copies them.
    Ok(unsafe {
        OTF2_GlobalDefWriter_WriteGroup(
            writer,
            g.id,
            g.name,
            g.group_type,
            g.paradigm,
            g.flags,
            n,
            g.members.as_ptr(),
        )
    })
}

/// Writes the kinds with arrays or a string.
///
/// # Safety
/// `writer` is an open global definition writer.
unsafe fn write_by_hand(
    record: &GlobalDefinition,
    writer: *mut OTF2_GlobalDefWriter,
) -> Result<OTF2_ErrorCode, Step> {
    // SAFETY (every call below): `writer` is open (caller); each pointer points into
    // `record` or a local that outlives the call, with the count passed; OTF2 copies them.
    let code = match record {
        // SAFETY: see above.
        GlobalDefinition::String(s) => unsafe { write_string(writer, s.id, &s.text) },
        // SAFETY: see above.
        GlobalDefinition::Group(g) => unsafe { write_group(writer, g) }?,
        GlobalDefinition::MetricClass(m) => {
            let n = count::<u8>(m.members.len(), "MetricClass")?;
            // SAFETY: see above.
            unsafe {
                OTF2_GlobalDefWriter_WriteMetricClass(
                    writer,
                    m.id,
                    n,
                    m.members.as_ptr(),
                    m.occurrence,
                    m.recorder_kind,
                )
            }
        }
        GlobalDefinition::CartTopology(t) => {
            let n = count::<u8>(t.dimensions.len(), "CartTopology")?;
            // SAFETY: see above.
            unsafe {
                OTF2_GlobalDefWriter_WriteCartTopology(
                    writer,
                    t.id,
                    t.name,
                    t.comm,
                    n,
                    t.dimensions.as_ptr(),
                )
            }
        }
        GlobalDefinition::CartCoordinate(c) => {
            let n = count::<u8>(c.coordinates.len(), "CartCoordinate")?;
            // SAFETY: see above.
            unsafe {
                OTF2_GlobalDefWriter_WriteCartCoordinate(
                    writer,
                    c.topology,
                    c.rank,
                    n,
                    c.coordinates.as_ptr(),
                )
            }
        }
        GlobalDefinition::IoParadigm(p) => {
            let n = count::<u8>(p.properties.len(), "IoParadigm")?;
            let properties: Vec<OTF2_IoParadigmProperty> =
                p.properties.iter().map(|(property, _)| *property).collect();
            let (types, values): (Vec<OTF2_Type>, Vec<OTF2_AttributeValue>) =
                p.properties.iter().map(|(_, value)| value.to_raw()).unzip();
            // SAFETY: see above.
            unsafe {
                OTF2_GlobalDefWriter_WriteIoParadigm(
                    writer,
                    p.id,
                    p.identification,
                    p.name,
                    p.class,
                    p.flags,
                    n,
                    properties.as_ptr(),
                    types.as_ptr(),
                    values.as_ptr(),
                )
            }
        }
        other => unreachable!("{} is written from the table", other.kind()),
    };
    Ok(code)
}

// ---- Reading -----------------------------------------------------------------------

/// What the reader callbacks work on: where each record goes, and how many records of
/// unknown kinds went by.
pub(crate) struct DefinitionState<'f> {
    pub(crate) each: &'f mut dyn FnMut(GlobalDefinition),
    pub(crate) unknown: u64,
    pub(crate) panic: Option<String>,
}

impl CallbackState for DefinitionState<'_> {
    fn record_panic(&mut self, message: String) {
        self.panic.get_or_insert(message);
    }
}

/// Hands `record` on.
///
/// # Safety
/// `user_data` is the live [`DefinitionState`] the callbacks were registered with.
unsafe fn deliver(user_data: *mut c_void, record: GlobalDefinition) -> OTF2_CallbackCode {
    // SAFETY: per the caller.
    unsafe { guarded(user_data, |s: &mut DefinitionState<'_>| (s.each)(record)) }
}

unsafe extern "C" fn read_unknown(user_data: *mut c_void) -> OTF2_CallbackCode {
    // SAFETY: OTF2 passes back the user data `read_global_definitions` registered.
    unsafe { guarded(user_data, |s: &mut DefinitionState<'_>| s.unknown += 1) }
}

unsafe extern "C" fn read_string(
    user_data: *mut c_void,
    id: OTF2_StringRef,
    string: *const c_char,
) -> OTF2_CallbackCode {
    // SAFETY: OTF2 passes a NUL-terminated string valid during the callback.
    let text = unsafe { text(string) };
    let record = GlobalDefinition::String(StringDef { id, text });
    // SAFETY: OTF2 passes back the user data `read_global_definitions` registered.
    unsafe { deliver(user_data, record) }
}

#[allow(clippy::too_many_arguments)] // OTF2's signature
unsafe extern "C" fn read_group(
    user_data: *mut c_void,
    id: OTF2_GroupRef,
    name: OTF2_StringRef,
    group_type: OTF2_GroupType,
    paradigm: OTF2_Paradigm,
    flags: OTF2_GroupFlag,
    number_of_members: u32,
    members: *const u64,
) -> OTF2_CallbackCode {
    // SAFETY: OTF2 passes `number_of_members` values at `members`, valid during the call.
    let members = unsafe { copy_array(members, number_of_members as usize) };
    let group = Group {
        id,
        name,
        group_type,
        paradigm,
        flags,
        members,
    };
    // SAFETY: OTF2 passes back the user data `read_global_definitions` registered.
    unsafe { deliver(user_data, GlobalDefinition::Group(group)) }
}

unsafe extern "C" fn read_metric_class(
    user_data: *mut c_void,
    id: OTF2_MetricRef,
    number_of_metrics: u8,
    members: *const OTF2_MetricMemberRef,
    occurrence: OTF2_MetricOccurrence,
    recorder_kind: OTF2_RecorderKind,
) -> OTF2_CallbackCode {
    // SAFETY: OTF2 passes `number_of_metrics` values at `members`, valid during the call.
    let members = unsafe { copy_array(members, usize::from(number_of_metrics)) };
    let record = MetricClassDef {
        id,
        members,
        occurrence,
        recorder_kind,
    };
    // SAFETY: OTF2 passes back the user data `read_global_definitions` registered.
    unsafe { deliver(user_data, GlobalDefinition::MetricClass(record)) }
}

unsafe extern "C" fn read_cart_topology(
    user_data: *mut c_void,
    id: OTF2_CartTopologyRef,
    name: OTF2_StringRef,
    comm: OTF2_CommRef,
    number_of_dimensions: u8,
    dimensions: *const OTF2_CartDimensionRef,
) -> OTF2_CallbackCode {
    // SAFETY: OTF2 passes `number_of_dimensions` values at `dimensions`, valid during the
    // call.
    let dimensions = unsafe { copy_array(dimensions, usize::from(number_of_dimensions)) };
    let record = CartTopologyDef {
        id,
        name,
        comm,
        dimensions,
    };
    // SAFETY: OTF2 passes back the user data `read_global_definitions` registered.
    unsafe { deliver(user_data, GlobalDefinition::CartTopology(record)) }
}

unsafe extern "C" fn read_cart_coordinate(
    user_data: *mut c_void,
    topology: OTF2_CartTopologyRef,
    rank: u32,
    number_of_dimensions: u8,
    coordinates: *const u32,
) -> OTF2_CallbackCode {
    // SAFETY: OTF2 passes `number_of_dimensions` values at `coordinates`, valid during the
    // call.
    let coordinates = unsafe { copy_array(coordinates, usize::from(number_of_dimensions)) };
    let record = CartCoordinateDef {
        topology,
        rank,
        coordinates,
    };
    // SAFETY: OTF2 passes back the user data `read_global_definitions` registered.
    unsafe { deliver(user_data, GlobalDefinition::CartCoordinate(record)) }
}

#[allow(clippy::too_many_arguments)] // OTF2's signature
unsafe extern "C" fn read_io_paradigm(
    user_data: *mut c_void,
    id: OTF2_IoParadigmRef,
    identification: OTF2_StringRef,
    name: OTF2_StringRef,
    class: OTF2_IoParadigmClass,
    flags: OTF2_IoParadigmFlag,
    number_of_properties: u8,
    properties: *const OTF2_IoParadigmProperty,
    types: *const OTF2_Type,
    values: *const OTF2_AttributeValue,
) -> OTF2_CallbackCode {
    let n = usize::from(number_of_properties);
    // SAFETY: OTF2 passes `number_of_properties` values in each array, valid during the
    // call.
    let (properties, types, values) = unsafe {
        (
            copy_array(properties, n),
            copy_array(types, n),
            copy_array(values, n),
        )
    };
    let properties = properties
        .into_iter()
        .zip(types.into_iter().zip(values))
        .map(|(property, (value_type, value))| {
            (property, AttributeValue::from_raw(value_type, value))
        })
        .collect();
    let record = IoParadigmDef {
        id,
        identification,
        name,
        class,
        flags,
        properties,
    };
    // SAFETY: OTF2 passes back the user data `read_global_definitions` registered.
    unsafe { deliver(user_data, GlobalDefinition::IoParadigm(record)) }
}
