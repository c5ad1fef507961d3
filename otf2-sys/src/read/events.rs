//! Events as Rust calls: the [`EventVisitor`] trait (a method per record kind the readers
//! here look at, every other kind by name), and the reader callbacks that turn OTF2's
//! records into those calls, for the time-ordered reader of all selected locations and
//! for one location's reader alike.
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

use std::ffi::c_void;

use crate::callbacks::{first_failure, guarded, CallbackState};
use crate::read::values::{decode_attribute_list, find_attribute, AttributeValue};
use crate::reading::copy_array;
use crate::*;

/// Where and when an event happened, and its attributes.
#[derive(Clone, Copy, Debug)]
pub struct EventContext<'a> {
    pub location: u64,
    /// Ticks, after the location's clock offsets unless they were switched off.
    pub time: u64,
    /// The event's number in its location (from 1); only a one-location read knows it.
    pub position: Option<u64>,
    /// The (attribute id, value) pairs of its attribute list; empty when the visitor does
    /// not want them decoded ([`EventVisitor::wants_attributes`]): [`Self::attribute`]
    /// then finds the one asked for in the record's list.
    pub attributes: &'a [(u32, AttributeValue)],
    /// The record's attribute list when it was not decoded (else NULL), live while the
    /// visitor's method runs: a context is only lent to it, for `'a`.
    undecoded: *const OTF2_AttributeList,
}

impl EventContext<'_> {
    /// The value of attribute `id`, if the event has it.
    pub fn attribute(&self, id: u32) -> Option<AttributeValue> {
        if self.undecoded.is_null() {
            return self
                .attributes
                .iter()
                .find(|(a, _)| *a == id)
                .map(|(_, v)| *v);
        }
        // SAFETY: `undecoded` is the list OTF2 handed to the callback that lends this
        // context to the visitor, live for as long as the context (see the field).
        unsafe { find_attribute(self.undecoded, id) }
    }
}

/// The fields of MpiCollectiveEnd and NonBlockingCollectiveComplete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CollectiveEnd {
    pub op: OTF2_CollectiveOp,
    pub comm: u32,
    /// The root rank, or `OTF2_UNDEFINED_UINT32`.
    pub root: u32,
    pub sent: u64,
    pub received: u64,
}

/// The fields of MpiSend, MpiIsend, MpiRecv and MpiIrecv.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MpiMessage {
    /// The receiver's rank for a send, the sender's for a receive.
    pub peer: u32,
    pub comm: u32,
    pub tag: u32,
    pub length: u64,
}

/// What a reader calls for each event. Every method does nothing by default; a record
/// without a method of its own, or whose method is not implemented, goes to
/// [`EventVisitor::other`] with its OTF2 name, so a visitor that counts records by kind
/// implements `other` and sees every event.
pub trait EventVisitor {
    /// Whether to decode each event's attribute list (a cost per event). A visitor that
    /// does not can still ask an event for an attribute ([`EventContext::attribute`]),
    /// at a cost only for the events it asks.
    fn wants_attributes(&self) -> bool {
        true
    }

    /// Asked after each event: false stops the read there (reported as interrupted).
    fn keep_reading(&self) -> bool {
        true
    }

    fn enter(&mut self, event: &EventContext<'_>, region: u32) {
        let _ = region;
        self.other(event, "Enter");
    }

    fn leave(&mut self, event: &EventContext<'_>, region: u32) {
        let _ = region;
        self.other(event, "Leave");
    }

    fn mpi_collective_begin(&mut self, event: &EventContext<'_>) {
        self.other(event, "MpiCollectiveBegin");
    }

    fn mpi_collective_end(&mut self, event: &EventContext<'_>, end: &CollectiveEnd) {
        let _ = end;
        self.other(event, "MpiCollectiveEnd");
    }

    fn non_blocking_collective_complete(
        &mut self,
        event: &EventContext<'_>,
        end: &CollectiveEnd,
        request: u64,
    ) {
        let _ = (end, request);
        self.other(event, "NonBlockingCollectiveComplete");
    }

    fn mpi_send(&mut self, event: &EventContext<'_>, message: &MpiMessage) {
        let _ = message;
        self.other(event, "MpiSend");
    }

    fn mpi_isend(&mut self, event: &EventContext<'_>, message: &MpiMessage, request: u64) {
        let _ = (message, request);
        self.other(event, "MpiIsend");
    }

    fn mpi_recv(&mut self, event: &EventContext<'_>, message: &MpiMessage) {
        let _ = message;
        self.other(event, "MpiRecv");
    }

    fn mpi_irecv(&mut self, event: &EventContext<'_>, message: &MpiMessage, request: u64) {
        let _ = (message, request);
        self.other(event, "MpiIrecv");
    }

    fn measurement_on_off(&mut self, event: &EventContext<'_>, mode: OTF2_MeasurementMode) {
        let _ = mode;
        self.other(event, "MeasurementOnOff");
    }

    /// `name` and `arguments` are string ids.
    fn program_begin(&mut self, event: &EventContext<'_>, name: u32, arguments: &[u32]) {
        let _ = (name, arguments);
        self.other(event, "ProgramBegin");
    }

    /// A record of a kind this OTF2 version does not know.
    fn unknown(&mut self, event: &EventContext<'_>) {
        self.other(event, "Unknown");
    }

    /// Any other record, by its OTF2 name ("ThreadFork").
    fn other(&mut self, event: &EventContext<'_>, record: &'static str) {
        let _ = (event, record);
    }
}

/// What the event callbacks work on.
pub(crate) struct EventState<'v, V: ?Sized> {
    visitor: &'v mut V,
    wants_attributes: bool,
    attributes: Vec<(u32, AttributeValue)>,
    pub(crate) panic: Option<String>,
}

impl<'v, V: EventVisitor + ?Sized> EventState<'v, V> {
    pub(crate) fn new(visitor: &'v mut V) -> Self {
        EventState {
            wants_attributes: visitor.wants_attributes(),
            visitor,
            attributes: Vec::new(),
            panic: None,
        }
    }
}

impl<V: ?Sized> CallbackState for EventState<'_, V> {
    fn record_panic(&mut self, message: String) {
        self.panic.get_or_insert(message);
    }
}

/// Hands one event to the visitor; asks it whether to go on.
///
/// # Safety
/// `user_data` is the live [`EventState`] of `V` the callbacks were registered with;
/// `list` is NULL or the record's attribute list, live for the call.
unsafe fn deliver<V: EventVisitor + ?Sized>(
    user_data: *mut c_void,
    location: u64,
    time: u64,
    position: Option<u64>,
    list: *mut OTF2_AttributeList,
    call: impl FnOnce(&mut V, &EventContext<'_>),
) -> OTF2_CallbackCode {
    let mut stop = false;
    let body = |state: &mut EventState<'_, V>| {
        state.attributes.clear();
        if state.wants_attributes {
            // SAFETY: `list` is NULL or live (caller).
            unsafe { decode_attribute_list(list, &mut state.attributes) };
        }
        let event = EventContext {
            location,
            time,
            position,
            attributes: &state.attributes,
            undecoded: if state.wants_attributes {
                std::ptr::null()
            } else {
                list
            },
        };
        call(&mut *state.visitor, &event);
        stop = !state.visitor.keep_reading();
    };
    // SAFETY: per the caller.
    let code = unsafe { guarded(user_data, body) };
    if stop && code == OTF2_CALLBACK_SUCCESS as OTF2_CallbackCode {
        OTF2_CALLBACK_INTERRUPT as OTF2_CallbackCode
    } else {
        code
    }
}

/// Defines, from one table, a callback per event record for the global event reader (module
/// `global_cb`) and for a location's event reader (module `local_cb`), and the functions
/// that register them all. Each line gives the record's arguments after the attribute
/// list in OTF2's order (the compiler checks them against both setters' callback types)
/// and the visitor call; the `other` lines go to [`EventVisitor::other`] by name. Every
/// record kind has a callback, so that a reader's event counts include all of them.
macro_rules! event_callbacks {
    (
        handled { $(
            $name:ident($($arg:ident: $ty:ty),*) => |$v:ident, $e:ident| $call:expr,
                via $global:ident, $local:ident;
        )* }
        other { $( $oname:ident($($oarg:ident: $oty:ty),*) via $oglobal:ident, $olocal:ident; )* }
    ) => {
        mod global_cb {
            //! Callbacks of the global event reader, named after the record.
            #![allow(non_snake_case, clippy::too_many_arguments, unused_variables)]
            use super::*;
            $(
                pub(super) unsafe extern "C" fn $name<V: EventVisitor + ?Sized>(
                    location: OTF2_LocationRef,
                    time: OTF2_TimeStamp,
                    user_data: *mut c_void,
                    attributes: *mut OTF2_AttributeList,
                    $($arg: $ty),*
                ) -> OTF2_CallbackCode {
                    let call = |$v: &mut V, $e: &EventContext<'_>| $call;
                    // SAFETY: OTF2 passes back the registered user data and the record's
                    // attribute list.
                    unsafe { deliver(user_data, location, time, None, attributes, call) }
                }
            )*
            $(
                pub(super) unsafe extern "C" fn $oname<V: EventVisitor + ?Sized>(
                    location: OTF2_LocationRef,
                    time: OTF2_TimeStamp,
                    user_data: *mut c_void,
                    attributes: *mut OTF2_AttributeList,
                    $($oarg: $oty),*
                ) -> OTF2_CallbackCode {
                    let call = |v: &mut V, e: &EventContext<'_>| v.other(e, stringify!($oname));
                    // SAFETY: as above.
                    unsafe { deliver(user_data, location, time, None, attributes, call) }
                }
            )*
        }

        mod local_cb {
            //! Callbacks of a location's event reader, named after the record.
            #![allow(non_snake_case, clippy::too_many_arguments, unused_variables)]
            use super::*;
            $(
                pub(super) unsafe extern "C" fn $name<V: EventVisitor + ?Sized>(
                    location: OTF2_LocationRef,
                    time: OTF2_TimeStamp,
                    position: u64,
                    user_data: *mut c_void,
                    attributes: *mut OTF2_AttributeList,
                    $($arg: $ty),*
                ) -> OTF2_CallbackCode {
                    let call = |$v: &mut V, $e: &EventContext<'_>| $call;
                    // SAFETY: OTF2 passes back the registered user data and the record's
                    // attribute list.
                    unsafe { deliver(user_data, location, time, Some(position), attributes, call) }
                }
            )*
            $(
                pub(super) unsafe extern "C" fn $oname<V: EventVisitor + ?Sized>(
                    location: OTF2_LocationRef,
                    time: OTF2_TimeStamp,
                    position: u64,
                    user_data: *mut c_void,
                    attributes: *mut OTF2_AttributeList,
                    $($oarg: $oty),*
                ) -> OTF2_CallbackCode {
                    let call = |v: &mut V, e: &EventContext<'_>| v.other(e, stringify!($oname));
                    // SAFETY: as above.
                    unsafe { deliver(user_data, location, time, Some(position), attributes, call) }
                }
            )*
        }

        /// Sets every callback of the global event reader in `c`, for an
        /// [`EventState`] of `V`.
        ///
        /// # Safety
        /// `c` is a live callbacks table.
        pub(crate) unsafe fn set_global_callbacks<V: EventVisitor + ?Sized>(
            c: *mut OTF2_GlobalEvtReaderCallbacks,
        ) -> OTF2_ErrorCode {
            // SAFETY: `c` is live (caller); each function has the type its setter takes.
            unsafe {
                first_failure(&[
                    $($global(c, Some(global_cb::$name::<V>)),)*
                    $($oglobal(c, Some(global_cb::$oname::<V>)),)*
                ])
            }
        }

        /// Sets every callback of a location's event reader in `c`, for an
        /// [`EventState`] of `V`.
        ///
        /// # Safety
        /// `c` is a live callbacks table.
        pub(crate) unsafe fn set_local_callbacks<V: EventVisitor + ?Sized>(
            c: *mut OTF2_EvtReaderCallbacks,
        ) -> OTF2_ErrorCode {
            // SAFETY: `c` is live (caller); each function has the type its setter takes.
            unsafe {
                first_failure(&[
                    $($local(c, Some(local_cb::$name::<V>)),)*
                    $($olocal(c, Some(local_cb::$oname::<V>)),)*
                ])
            }
        }
    };
}

fn collective_end(op: u8, comm: u32, root: u32, sent: u64, received: u64) -> CollectiveEnd {
    CollectiveEnd {
        op,
        comm,
        root,
        sent,
        received,
    }
}

fn message(peer: u32, comm: u32, tag: u32, length: u64) -> MpiMessage {
    MpiMessage {
        peer,
        comm,
        tag,
        length,
    }
}

/// The string ids of ProgramBegin's arguments.
///
/// # Safety
/// `arguments` points to `count` ids live for the call, or `count` is 0.
unsafe fn program_arguments(count: u32, arguments: *const OTF2_StringRef) -> Vec<u32> {
    // SAFETY: per the caller.
    unsafe { copy_array(arguments, count as usize) }
}

event_callbacks! {
    handled {
        Enter(region: OTF2_RegionRef) => |v, e| v.enter(e, region),
            via OTF2_GlobalEvtReaderCallbacks_SetEnterCallback,
                OTF2_EvtReaderCallbacks_SetEnterCallback;
        Leave(region: OTF2_RegionRef) => |v, e| v.leave(e, region),
            via OTF2_GlobalEvtReaderCallbacks_SetLeaveCallback,
                OTF2_EvtReaderCallbacks_SetLeaveCallback;
        MpiCollectiveBegin() => |v, e| v.mpi_collective_begin(e),
            via OTF2_GlobalEvtReaderCallbacks_SetMpiCollectiveBeginCallback,
                OTF2_EvtReaderCallbacks_SetMpiCollectiveBeginCallback;
        MpiCollectiveEnd(op: OTF2_CollectiveOp, comm: OTF2_CommRef, root: u32, sent: u64,
                received: u64)
            => |v, e| v.mpi_collective_end(e, &collective_end(op, comm, root, sent, received)),
            via OTF2_GlobalEvtReaderCallbacks_SetMpiCollectiveEndCallback,
                OTF2_EvtReaderCallbacks_SetMpiCollectiveEndCallback;
        NonBlockingCollectiveComplete(op: OTF2_CollectiveOp, comm: OTF2_CommRef, root: u32,
                sent: u64, received: u64, request: u64)
            => |v, e| v.non_blocking_collective_complete(
                e, &collective_end(op, comm, root, sent, received), request),
            via OTF2_GlobalEvtReaderCallbacks_SetNonBlockingCollectiveCompleteCallback,
                OTF2_EvtReaderCallbacks_SetNonBlockingCollectiveCompleteCallback;
        MpiSend(receiver: u32, comm: OTF2_CommRef, tag: u32, length: u64)
            => |v, e| v.mpi_send(e, &message(receiver, comm, tag, length)),
            via OTF2_GlobalEvtReaderCallbacks_SetMpiSendCallback,
                OTF2_EvtReaderCallbacks_SetMpiSendCallback;
        MpiIsend(receiver: u32, comm: OTF2_CommRef, tag: u32, length: u64, request: u64)
            => |v, e| v.mpi_isend(e, &message(receiver, comm, tag, length), request),
            via OTF2_GlobalEvtReaderCallbacks_SetMpiIsendCallback,
                OTF2_EvtReaderCallbacks_SetMpiIsendCallback;
        MpiRecv(sender: u32, comm: OTF2_CommRef, tag: u32, length: u64)
            => |v, e| v.mpi_recv(e, &message(sender, comm, tag, length)),
            via OTF2_GlobalEvtReaderCallbacks_SetMpiRecvCallback,
                OTF2_EvtReaderCallbacks_SetMpiRecvCallback;
        MpiIrecv(sender: u32, comm: OTF2_CommRef, tag: u32, length: u64, request: u64)
            => |v, e| v.mpi_irecv(e, &message(sender, comm, tag, length), request),
            via OTF2_GlobalEvtReaderCallbacks_SetMpiIrecvCallback,
                OTF2_EvtReaderCallbacks_SetMpiIrecvCallback;
        MeasurementOnOff(mode: OTF2_MeasurementMode) => |v, e| v.measurement_on_off(e, mode),
            via OTF2_GlobalEvtReaderCallbacks_SetMeasurementOnOffCallback,
                OTF2_EvtReaderCallbacks_SetMeasurementOnOffCallback;
        ProgramBegin(name: OTF2_StringRef, count: u32, arguments: *const OTF2_StringRef)
            // SAFETY: OTF2 passes `count` ids at `arguments`, live during the callback.
            => |v, e| v.program_begin(e, name, &unsafe { program_arguments(count, arguments) }),
            via OTF2_GlobalEvtReaderCallbacks_SetProgramBeginCallback,
                OTF2_EvtReaderCallbacks_SetProgramBeginCallback;
        Unknown() => |v, e| v.unknown(e),
            via OTF2_GlobalEvtReaderCallbacks_SetUnknownCallback,
                OTF2_EvtReaderCallbacks_SetUnknownCallback;
    }
    other {
        BufferFlush(_0: OTF2_TimeStamp)
            via OTF2_GlobalEvtReaderCallbacks_SetBufferFlushCallback,
                OTF2_EvtReaderCallbacks_SetBufferFlushCallback;
        MpiIsendComplete(_0: u64)
            via OTF2_GlobalEvtReaderCallbacks_SetMpiIsendCompleteCallback,
                OTF2_EvtReaderCallbacks_SetMpiIsendCompleteCallback;
        MpiIrecvRequest(_0: u64)
            via OTF2_GlobalEvtReaderCallbacks_SetMpiIrecvRequestCallback,
                OTF2_EvtReaderCallbacks_SetMpiIrecvRequestCallback;
        MpiRequestTest(_0: u64)
            via OTF2_GlobalEvtReaderCallbacks_SetMpiRequestTestCallback,
                OTF2_EvtReaderCallbacks_SetMpiRequestTestCallback;
        MpiRequestCancelled(_0: u64)
            via OTF2_GlobalEvtReaderCallbacks_SetMpiRequestCancelledCallback,
                OTF2_EvtReaderCallbacks_SetMpiRequestCancelledCallback;
        OmpFork(_0: u32)
            via OTF2_GlobalEvtReaderCallbacks_SetOmpForkCallback,
                OTF2_EvtReaderCallbacks_SetOmpForkCallback;
        OmpJoin()
            via OTF2_GlobalEvtReaderCallbacks_SetOmpJoinCallback,
                OTF2_EvtReaderCallbacks_SetOmpJoinCallback;
        OmpAcquireLock(_0: u32, _1: u32)
            via OTF2_GlobalEvtReaderCallbacks_SetOmpAcquireLockCallback,
                OTF2_EvtReaderCallbacks_SetOmpAcquireLockCallback;
        OmpReleaseLock(_0: u32, _1: u32)
            via OTF2_GlobalEvtReaderCallbacks_SetOmpReleaseLockCallback,
                OTF2_EvtReaderCallbacks_SetOmpReleaseLockCallback;
        OmpTaskCreate(_0: u64)
            via OTF2_GlobalEvtReaderCallbacks_SetOmpTaskCreateCallback,
                OTF2_EvtReaderCallbacks_SetOmpTaskCreateCallback;
        OmpTaskSwitch(_0: u64)
            via OTF2_GlobalEvtReaderCallbacks_SetOmpTaskSwitchCallback,
                OTF2_EvtReaderCallbacks_SetOmpTaskSwitchCallback;
        OmpTaskComplete(_0: u64)
            via OTF2_GlobalEvtReaderCallbacks_SetOmpTaskCompleteCallback,
                OTF2_EvtReaderCallbacks_SetOmpTaskCompleteCallback;
        Metric(_0: OTF2_MetricRef, _1: u8, _2: *const OTF2_Type, _3: *const OTF2_MetricValue)
            via OTF2_GlobalEvtReaderCallbacks_SetMetricCallback,
                OTF2_EvtReaderCallbacks_SetMetricCallback;
        ParameterString(_0: OTF2_ParameterRef, _1: OTF2_StringRef)
            via OTF2_GlobalEvtReaderCallbacks_SetParameterStringCallback,
                OTF2_EvtReaderCallbacks_SetParameterStringCallback;
        ParameterInt(_0: OTF2_ParameterRef, _1: i64)
            via OTF2_GlobalEvtReaderCallbacks_SetParameterIntCallback,
                OTF2_EvtReaderCallbacks_SetParameterIntCallback;
        ParameterUnsignedInt(_0: OTF2_ParameterRef, _1: u64)
            via OTF2_GlobalEvtReaderCallbacks_SetParameterUnsignedIntCallback,
                OTF2_EvtReaderCallbacks_SetParameterUnsignedIntCallback;
        RmaWinCreate(_0: OTF2_RmaWinRef)
            via OTF2_GlobalEvtReaderCallbacks_SetRmaWinCreateCallback,
                OTF2_EvtReaderCallbacks_SetRmaWinCreateCallback;
        RmaWinDestroy(_0: OTF2_RmaWinRef)
            via OTF2_GlobalEvtReaderCallbacks_SetRmaWinDestroyCallback,
                OTF2_EvtReaderCallbacks_SetRmaWinDestroyCallback;
        RmaCollectiveBegin()
            via OTF2_GlobalEvtReaderCallbacks_SetRmaCollectiveBeginCallback,
                OTF2_EvtReaderCallbacks_SetRmaCollectiveBeginCallback;
        RmaCollectiveEnd(_0: OTF2_CollectiveOp, _1: OTF2_RmaSyncLevel, _2: OTF2_RmaWinRef,
                _3: u32, _4: u64, _5: u64)
            via OTF2_GlobalEvtReaderCallbacks_SetRmaCollectiveEndCallback,
                OTF2_EvtReaderCallbacks_SetRmaCollectiveEndCallback;
        RmaGroupSync(_0: OTF2_RmaSyncLevel, _1: OTF2_RmaWinRef, _2: OTF2_GroupRef)
            via OTF2_GlobalEvtReaderCallbacks_SetRmaGroupSyncCallback,
                OTF2_EvtReaderCallbacks_SetRmaGroupSyncCallback;
        RmaRequestLock(_0: OTF2_RmaWinRef, _1: u32, _2: u64, _3: OTF2_LockType)
            via OTF2_GlobalEvtReaderCallbacks_SetRmaRequestLockCallback,
                OTF2_EvtReaderCallbacks_SetRmaRequestLockCallback;
        RmaAcquireLock(_0: OTF2_RmaWinRef, _1: u32, _2: u64, _3: OTF2_LockType)
            via OTF2_GlobalEvtReaderCallbacks_SetRmaAcquireLockCallback,
                OTF2_EvtReaderCallbacks_SetRmaAcquireLockCallback;
        RmaTryLock(_0: OTF2_RmaWinRef, _1: u32, _2: u64, _3: OTF2_LockType)
            via OTF2_GlobalEvtReaderCallbacks_SetRmaTryLockCallback,
                OTF2_EvtReaderCallbacks_SetRmaTryLockCallback;
        RmaReleaseLock(_0: OTF2_RmaWinRef, _1: u32, _2: u64)
            via OTF2_GlobalEvtReaderCallbacks_SetRmaReleaseLockCallback,
                OTF2_EvtReaderCallbacks_SetRmaReleaseLockCallback;
        RmaSync(_0: OTF2_RmaWinRef, _1: u32, _2: OTF2_RmaSyncType)
            via OTF2_GlobalEvtReaderCallbacks_SetRmaSyncCallback,
                OTF2_EvtReaderCallbacks_SetRmaSyncCallback;
        RmaWaitChange(_0: OTF2_RmaWinRef)
            via OTF2_GlobalEvtReaderCallbacks_SetRmaWaitChangeCallback,
                OTF2_EvtReaderCallbacks_SetRmaWaitChangeCallback;
        RmaPut(_0: OTF2_RmaWinRef, _1: u32, _2: u64, _3: u64)
            via OTF2_GlobalEvtReaderCallbacks_SetRmaPutCallback,
                OTF2_EvtReaderCallbacks_SetRmaPutCallback;
        RmaGet(_0: OTF2_RmaWinRef, _1: u32, _2: u64, _3: u64)
            via OTF2_GlobalEvtReaderCallbacks_SetRmaGetCallback,
                OTF2_EvtReaderCallbacks_SetRmaGetCallback;
        RmaAtomic(_0: OTF2_RmaWinRef, _1: u32, _2: OTF2_RmaAtomicType, _3: u64, _4: u64,
                _5: u64)
            via OTF2_GlobalEvtReaderCallbacks_SetRmaAtomicCallback,
                OTF2_EvtReaderCallbacks_SetRmaAtomicCallback;
        RmaOpCompleteBlocking(_0: OTF2_RmaWinRef, _1: u64)
            via OTF2_GlobalEvtReaderCallbacks_SetRmaOpCompleteBlockingCallback,
                OTF2_EvtReaderCallbacks_SetRmaOpCompleteBlockingCallback;
        RmaOpCompleteNonBlocking(_0: OTF2_RmaWinRef, _1: u64)
            via OTF2_GlobalEvtReaderCallbacks_SetRmaOpCompleteNonBlockingCallback,
                OTF2_EvtReaderCallbacks_SetRmaOpCompleteNonBlockingCallback;
        RmaOpTest(_0: OTF2_RmaWinRef, _1: u64)
            via OTF2_GlobalEvtReaderCallbacks_SetRmaOpTestCallback,
                OTF2_EvtReaderCallbacks_SetRmaOpTestCallback;
        RmaOpCompleteRemote(_0: OTF2_RmaWinRef, _1: u64)
            via OTF2_GlobalEvtReaderCallbacks_SetRmaOpCompleteRemoteCallback,
                OTF2_EvtReaderCallbacks_SetRmaOpCompleteRemoteCallback;
        ThreadFork(_0: OTF2_Paradigm, _1: u32)
            via OTF2_GlobalEvtReaderCallbacks_SetThreadForkCallback,
                OTF2_EvtReaderCallbacks_SetThreadForkCallback;
        ThreadJoin(_0: OTF2_Paradigm)
            via OTF2_GlobalEvtReaderCallbacks_SetThreadJoinCallback,
                OTF2_EvtReaderCallbacks_SetThreadJoinCallback;
        ThreadTeamBegin(_0: OTF2_CommRef)
            via OTF2_GlobalEvtReaderCallbacks_SetThreadTeamBeginCallback,
                OTF2_EvtReaderCallbacks_SetThreadTeamBeginCallback;
        ThreadTeamEnd(_0: OTF2_CommRef)
            via OTF2_GlobalEvtReaderCallbacks_SetThreadTeamEndCallback,
                OTF2_EvtReaderCallbacks_SetThreadTeamEndCallback;
        ThreadAcquireLock(_0: OTF2_Paradigm, _1: u32, _2: u32)
            via OTF2_GlobalEvtReaderCallbacks_SetThreadAcquireLockCallback,
                OTF2_EvtReaderCallbacks_SetThreadAcquireLockCallback;
        ThreadReleaseLock(_0: OTF2_Paradigm, _1: u32, _2: u32)
            via OTF2_GlobalEvtReaderCallbacks_SetThreadReleaseLockCallback,
                OTF2_EvtReaderCallbacks_SetThreadReleaseLockCallback;
        ThreadTaskCreate(_0: OTF2_CommRef, _1: u32, _2: u32)
            via OTF2_GlobalEvtReaderCallbacks_SetThreadTaskCreateCallback,
                OTF2_EvtReaderCallbacks_SetThreadTaskCreateCallback;
        ThreadTaskSwitch(_0: OTF2_CommRef, _1: u32, _2: u32)
            via OTF2_GlobalEvtReaderCallbacks_SetThreadTaskSwitchCallback,
                OTF2_EvtReaderCallbacks_SetThreadTaskSwitchCallback;
        ThreadTaskComplete(_0: OTF2_CommRef, _1: u32, _2: u32)
            via OTF2_GlobalEvtReaderCallbacks_SetThreadTaskCompleteCallback,
                OTF2_EvtReaderCallbacks_SetThreadTaskCompleteCallback;
        ThreadCreate(_0: OTF2_CommRef, _1: u64)
            via OTF2_GlobalEvtReaderCallbacks_SetThreadCreateCallback,
                OTF2_EvtReaderCallbacks_SetThreadCreateCallback;
        ThreadBegin(_0: OTF2_CommRef, _1: u64)
            via OTF2_GlobalEvtReaderCallbacks_SetThreadBeginCallback,
                OTF2_EvtReaderCallbacks_SetThreadBeginCallback;
        ThreadWait(_0: OTF2_CommRef, _1: u64)
            via OTF2_GlobalEvtReaderCallbacks_SetThreadWaitCallback,
                OTF2_EvtReaderCallbacks_SetThreadWaitCallback;
        ThreadEnd(_0: OTF2_CommRef, _1: u64)
            via OTF2_GlobalEvtReaderCallbacks_SetThreadEndCallback,
                OTF2_EvtReaderCallbacks_SetThreadEndCallback;
        CallingContextEnter(_0: OTF2_CallingContextRef, _1: u32)
            via OTF2_GlobalEvtReaderCallbacks_SetCallingContextEnterCallback,
                OTF2_EvtReaderCallbacks_SetCallingContextEnterCallback;
        CallingContextLeave(_0: OTF2_CallingContextRef)
            via OTF2_GlobalEvtReaderCallbacks_SetCallingContextLeaveCallback,
                OTF2_EvtReaderCallbacks_SetCallingContextLeaveCallback;
        CallingContextSample(_0: OTF2_CallingContextRef, _1: u32,
                _2: OTF2_InterruptGeneratorRef)
            via OTF2_GlobalEvtReaderCallbacks_SetCallingContextSampleCallback,
                OTF2_EvtReaderCallbacks_SetCallingContextSampleCallback;
        IoCreateHandle(_0: OTF2_IoHandleRef, _1: OTF2_IoAccessMode, _2: OTF2_IoCreationFlag,
                _3: OTF2_IoStatusFlag)
            via OTF2_GlobalEvtReaderCallbacks_SetIoCreateHandleCallback,
                OTF2_EvtReaderCallbacks_SetIoCreateHandleCallback;
        IoDestroyHandle(_0: OTF2_IoHandleRef)
            via OTF2_GlobalEvtReaderCallbacks_SetIoDestroyHandleCallback,
                OTF2_EvtReaderCallbacks_SetIoDestroyHandleCallback;
        IoDuplicateHandle(_0: OTF2_IoHandleRef, _1: OTF2_IoHandleRef, _2: OTF2_IoStatusFlag)
            via OTF2_GlobalEvtReaderCallbacks_SetIoDuplicateHandleCallback,
                OTF2_EvtReaderCallbacks_SetIoDuplicateHandleCallback;
        IoSeek(_0: OTF2_IoHandleRef, _1: i64, _2: OTF2_IoSeekOption, _3: u64)
            via OTF2_GlobalEvtReaderCallbacks_SetIoSeekCallback,
                OTF2_EvtReaderCallbacks_SetIoSeekCallback;
        IoChangeStatusFlags(_0: OTF2_IoHandleRef, _1: OTF2_IoStatusFlag)
            via OTF2_GlobalEvtReaderCallbacks_SetIoChangeStatusFlagsCallback,
                OTF2_EvtReaderCallbacks_SetIoChangeStatusFlagsCallback;
        IoDeleteFile(_0: OTF2_IoParadigmRef, _1: OTF2_IoFileRef)
            via OTF2_GlobalEvtReaderCallbacks_SetIoDeleteFileCallback,
                OTF2_EvtReaderCallbacks_SetIoDeleteFileCallback;
        IoOperationBegin(_0: OTF2_IoHandleRef, _1: OTF2_IoOperationMode,
                _2: OTF2_IoOperationFlag, _3: u64, _4: u64)
            via OTF2_GlobalEvtReaderCallbacks_SetIoOperationBeginCallback,
                OTF2_EvtReaderCallbacks_SetIoOperationBeginCallback;
        IoOperationTest(_0: OTF2_IoHandleRef, _1: u64)
            via OTF2_GlobalEvtReaderCallbacks_SetIoOperationTestCallback,
                OTF2_EvtReaderCallbacks_SetIoOperationTestCallback;
        IoOperationIssued(_0: OTF2_IoHandleRef, _1: u64)
            via OTF2_GlobalEvtReaderCallbacks_SetIoOperationIssuedCallback,
                OTF2_EvtReaderCallbacks_SetIoOperationIssuedCallback;
        IoOperationComplete(_0: OTF2_IoHandleRef, _1: u64, _2: u64)
            via OTF2_GlobalEvtReaderCallbacks_SetIoOperationCompleteCallback,
                OTF2_EvtReaderCallbacks_SetIoOperationCompleteCallback;
        IoOperationCancelled(_0: OTF2_IoHandleRef, _1: u64)
            via OTF2_GlobalEvtReaderCallbacks_SetIoOperationCancelledCallback,
                OTF2_EvtReaderCallbacks_SetIoOperationCancelledCallback;
        IoAcquireLock(_0: OTF2_IoHandleRef, _1: OTF2_LockType)
            via OTF2_GlobalEvtReaderCallbacks_SetIoAcquireLockCallback,
                OTF2_EvtReaderCallbacks_SetIoAcquireLockCallback;
        IoReleaseLock(_0: OTF2_IoHandleRef, _1: OTF2_LockType)
            via OTF2_GlobalEvtReaderCallbacks_SetIoReleaseLockCallback,
                OTF2_EvtReaderCallbacks_SetIoReleaseLockCallback;
        IoTryLock(_0: OTF2_IoHandleRef, _1: OTF2_LockType)
            via OTF2_GlobalEvtReaderCallbacks_SetIoTryLockCallback,
                OTF2_EvtReaderCallbacks_SetIoTryLockCallback;
        ProgramEnd(_0: i64)
            via OTF2_GlobalEvtReaderCallbacks_SetProgramEndCallback,
                OTF2_EvtReaderCallbacks_SetProgramEndCallback;
        NonBlockingCollectiveRequest(_0: u64)
            via OTF2_GlobalEvtReaderCallbacks_SetNonBlockingCollectiveRequestCallback,
                OTF2_EvtReaderCallbacks_SetNonBlockingCollectiveRequestCallback;
        CommCreate(_0: OTF2_CommRef)
            via OTF2_GlobalEvtReaderCallbacks_SetCommCreateCallback,
                OTF2_EvtReaderCallbacks_SetCommCreateCallback;
        CommDestroy(_0: OTF2_CommRef)
            via OTF2_GlobalEvtReaderCallbacks_SetCommDestroyCallback,
                OTF2_EvtReaderCallbacks_SetCommDestroyCallback;
    }
}
