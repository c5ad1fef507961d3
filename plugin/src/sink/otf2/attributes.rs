//! What the trace says about an event: the attributes written before its Enter, and the
//! names and roles of the regions of host-side events and operations.

use super::defs::{Attr, Definitions, RegionGroup, Role};
use super::event_file::{AttributeValue, EncodedAttribute};
use crate::event::{DataType, Event, Func, Kind, NetPayload};
use crate::model::FinishedEvent;
use rustc_hash::FxHashMap as HashMap;
use std::fmt::Write as _;

/// An attribute value.
#[derive(Clone, Copy, Debug)]
pub(super) enum Val {
    U(u64),
    I(i64),
    /// A string definition's id (see [`Definitions::static_string`]).
    Str(u32),
}

/// A static string's value (NCCL's names), defined on first use.
pub(super) fn static_text(defs: &mut Definitions, text: &'static str) -> Val {
    Val::Str(defs.static_string(text))
}

/// The trace writer's attributes go into the event files as they are.
impl EncodedAttribute for (Attr, Val) {
    #[inline(always)]
    fn id_and_value(&self) -> (u32, AttributeValue) {
        let value = match self.1 {
            Val::U(v) => AttributeValue::Uint64(v),
            Val::I(v) => AttributeValue::Int64(v),
            Val::Str(id) => AttributeValue::StringRef(id),
        };
        (self.0 as u32, value)
    }
}

/// The regions and attributes of host-side events: what is defined once is kept here.
#[derive(Default)]
pub(super) struct Attributes {
    /// Region ids of host-side events by (kind, function).
    thread_regions: HashMap<(Kind, Func), u32>,
    /// A buffer for attribute texts built per event.
    text: String,
}

impl Attributes {
    /// The region of a host-side event, defined on its first use.
    pub(super) fn thread_region_id(&mut self, defs: &mut Definitions, e: &FinishedEvent) -> u32 {
        let key = (e.kind, func_of(&e.event));
        match self.thread_regions.get(&key) {
            Some(&region) => region,
            None => {
                let (name, role) = thread_region(e);
                let region = defs.region(&name, role, e.kind.facts().description);
                if let Some(group) = thread_region_group(e.kind) {
                    defs.group_region(region, group);
                }
                self.thread_regions.insert(key, region);
                region
            }
        }
    }

    /// Adds the attributes describing an event's operation and communicator.
    pub(super) fn push_event_attrs(
        &mut self,
        defs: &mut Definitions,
        attrs: &mut Vec<(Attr, Val)>,
        e: &FinishedEvent,
    ) {
        if let Some(comm) = &e.comm {
            attrs.push((Attr::CommHash, Val::U(comm.comm_hash)));
            attrs.push((Attr::Rank, Val::I(i64::from(e.rank))));
            attrs.push((Attr::NRanks, Val::I(i64::from(comm.n_ranks))));
        }
        match e.event {
            Event::Coll(_) | Event::P2p(_) => push_op_identity(defs, attrs, &e.event),
            Event::CollApi(c) => {
                push_payload(defs, attrs, c.func, c.count, c.datatype);
                if is_rooted(c.func) {
                    attrs.push((Attr::Root, Val::I(i64::from(c.root))));
                }
                attrs.push((Attr::GraphCaptured, Val::U(u64::from(c.graph_captured))));
            }
            Event::P2pApi(p) => {
                push_payload(defs, attrs, p.func, p.count, p.datatype);
                attrs.push((Attr::GraphCaptured, Val::U(u64::from(p.graph_captured))));
            }
            Event::GroupApi {
                graph_captured,
                depth,
            } => {
                attrs.push((Attr::GroupDepth, Val::I(i64::from(depth))));
                attrs.push((Attr::GraphCaptured, Val::U(u64::from(graph_captured))));
            }
            Event::CeColl(c) => {
                attrs.push((Attr::Seq, Val::U(c.seq)));
                push_payload(defs, attrs, c.func, c.count, c.datatype);
            }
            Event::NetPlugin(n) => {
                // Formatted into a reused buffer; the string is interned once per text.
                let text = &mut self.text;
                text.clear();
                let _ = match n.payload {
                    NetPayload::IbQp {
                        device,
                        qp_num,
                        opcode,
                        length,
                        ..
                    } => write!(
                        text,
                        "ib dev {device} qp {qp_num} opcode {opcode} {length} B"
                    ),
                    NetPayload::Socket { fd, op, length } => {
                        write!(text, "socket fd {fd} op {op} {length} B")
                    }
                    NetPayload::Unknown => write!(text, "net plugin id {:#x}", n.id),
                };
                attrs.push((Attr::NetInfo, Val::Str(defs.string(text))));
            }
            _ => {}
        }
    }
}

/// What names a proxy operation's or kernel channel's operation: `nccl.seq` and
/// `nccl.func` of a collective, `nccl.func` and (unless the child has its own) `nccl.peer`
/// of a point-to-point operation. The rest of the operation's identity (count, type, bytes,
/// algorithm, protocol, channels, root) is on the operation itself (ops stream and
/// enqueue): written once per rank, not again on each of its children.
pub(super) fn push_op_key(
    defs: &mut Definitions,
    attrs: &mut Vec<(Attr, Val)>,
    event: &Event,
    with_peer: bool,
) {
    match event {
        Event::Coll(c) => {
            attrs.push((Attr::Seq, Val::U(c.seq)));
            attrs.push((Attr::Func, static_text(defs, c.func.as_str())));
        }
        Event::P2p(p) => {
            attrs.push((Attr::Func, static_text(defs, p.func.as_str())));
            if with_peer {
                attrs.push((Attr::Peer, Val::I(i64::from(p.peer))));
            }
        }
        _ => {}
    }
}

/// `(nccl.seq, nccl.func)` and the rest of an operation's identity.
pub(super) fn push_op_identity(
    defs: &mut Definitions,
    attrs: &mut Vec<(Attr, Val)>,
    event: &Event,
) {
    match event {
        Event::Coll(c) => {
            attrs.push((Attr::Seq, Val::U(c.seq)));
            push_payload(defs, attrs, c.func, c.count, c.datatype);
            attrs.push((Attr::Algo, static_text(defs, c.algo.as_str())));
            attrs.push((Attr::Proto, static_text(defs, c.proto.as_str())));
            attrs.push((Attr::NChannels, Val::U(u64::from(c.n_channels))));
            if is_rooted(c.func) {
                attrs.push((Attr::Root, Val::I(i64::from(c.root))));
            }
        }
        Event::P2p(p) => {
            push_payload(defs, attrs, p.func, p.count, p.datatype);
            attrs.push((Attr::Peer, Val::I(i64::from(p.peer))));
            if let Some(n) = p.n_channels {
                attrs.push((Attr::NChannels, Val::U(u64::from(n))));
            }
        }
        _ => {}
    }
}

/// `nccl.func`, `nccl.count`, `nccl.datatype` and `nccl.bytes`.
fn push_payload(
    defs: &mut Definitions,
    attrs: &mut Vec<(Attr, Val)>,
    func: Func,
    count: u64,
    datatype: DataType,
) {
    attrs.push((Attr::Func, static_text(defs, func.as_str())));
    attrs.push((Attr::Count, Val::U(count)));
    attrs.push((Attr::Datatype, static_text(defs, datatype.as_str())));
    attrs.push((Attr::Bytes, Val::U(bytes_of(count, datatype))));
}

pub(super) fn func_of(event: &Event) -> Func {
    match event {
        Event::Coll(c) => c.func,
        Event::P2p(p) => p.func,
        Event::CollApi(c) => c.func,
        Event::P2pApi(p) => p.func,
        Event::CeColl(c) => c.func,
        _ => Func::Unknown,
    }
}

pub(super) fn bytes_of(count: u64, datatype: DataType) -> u64 {
    count.saturating_mul(datatype.size().unwrap_or(1))
}

pub(super) fn is_rooted(func: Func) -> bool {
    matches!(
        func,
        Func::Broadcast | Func::Reduce | Func::Gather | Func::Scatter
    )
}

pub(super) fn op_role(func: Func) -> Role {
    match func {
        Func::Broadcast | Func::Scatter => Role::CollOne2All,
        Func::Reduce | Func::Gather => Role::CollAll2One,
        Func::AllReduce | Func::AllGather | Func::ReduceScatter | Func::AlltoAll => {
            Role::CollAll2All
        }
        Func::Send | Func::Recv | Func::SendRecv => Role::Point2Point,
        _ => Role::CollOther,
    }
}

/// The kind of a host-side event's region.
fn thread_region_group(kind: Kind) -> Option<RegionGroup> {
    match kind {
        Kind::GroupApi | Kind::CollApi | Kind::P2pApi => Some(RegionGroup::ApiCalls),
        Kind::KernelLaunch
        | Kind::Group
        | Kind::Coll
        | Kind::P2p
        | Kind::CeColl
        | Kind::CeSync
        | Kind::CeBatch => Some(RegionGroup::Enqueue),
        Kind::NetPlugin => Some(RegionGroup::ProxyOperations),
        _ => None,
    }
}

/// The region of a host-side event, named after the NCCL API or what the thread does.
fn thread_region(e: &FinishedEvent) -> (String, Role) {
    match e.event {
        Event::GroupApi { .. } => ("ncclGroup".into(), Role::Function),
        Event::CollApi(c) => (format!("nccl{}", c.func.as_str()), op_role(c.func)),
        Event::P2pApi(p) => (format!("nccl{}", p.func.as_str()), Role::Point2Point),
        Event::KernelLaunch => ("NCCL kernel launch".into(), Role::Function),
        Event::Group => ("NCCL plan enqueue".into(), Role::Function),
        Event::Coll(c) => (format!("{} enqueue", c.func.as_str()), Role::Function),
        Event::P2p(p) => (format!("{} enqueue", p.func.as_str()), Role::Function),
        Event::CeColl(c) => (
            format!("{} copy-engine enqueue", c.func.as_str()),
            Role::Function,
        ),
        Event::CeSync { .. } => ("NCCL copy-engine sync".into(), Role::Function),
        Event::CeBatch { .. } => ("NCCL copy-engine batch".into(), Role::Function),
        Event::NetPlugin(_) => ("net plugin request".into(), Role::DataTransfer),
        _ => (e.kind.name().into(), Role::Function),
    }
}
