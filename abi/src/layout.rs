//! The layout contract with NCCL: the size of every descriptor and state-argument union
//! and the absolute offset of every descriptor field, from NCCL's
//! headers (x86_64). Each entry is checked at compile time and
//! listed in [`FIELDS`] so a test can print the whole table.

use super::v1::*;
use super::v2::*;
use super::v3::*;
use super::v4::*;
use super::v5::*;
use super::v6::*;
use super::v7::*;
use super::*;
use std::mem::{offset_of, size_of};

/// One checked fact: what it is, its value in our types, and the spec's value.
#[derive(Debug, Clone, Copy)]
pub struct LayoutFact {
    pub what: &'static str,
    pub actual: usize,
    pub expected: usize,
}

macro_rules! layout_facts {
    ($( $what:literal => $actual:expr, $expected:expr; )*) => {
        $( const _: () = assert!($actual == $expected, $what); )*
        /// Every size and offset checked at compile time, for printing.
        pub const FIELDS: &[LayoutFact] = &[
            $( LayoutFact { what: $what, actual: $actual, expected: $expected }, )*
        ];
    };
}

/// Absolute offset of `field` of union member type `$m` inside descriptor `$d`.
macro_rules! at {
    ($d:ty, $m:ty, $f:ident) => {
        offset_of!($d, u) + offset_of!($m, $f)
    };
}

type D1 = ncclProfilerEventDescr_v1_t;
type D2 = ncclProfilerEventDescr_v2_t;
type D3 = ncclProfilerEventDescr_v3_t;
type D4 = ncclProfilerEventDescr_v4_t;
type D5 = ncclProfilerEventDescr_v5_t;
type D6 = ncclProfilerEventDescr_v6_t;
type D7 = ncclProfilerEventDescr_v7_t;

layout_facts! {
    "function table size" => size_of::<ncclProfiler_v7_t>(), 48;
    "v1 function table size" => size_of::<ncclProfiler_v1_t>(), 48;
    "v4 function table size" => size_of::<ncclProfiler_v4_t>(), 48;

    // ---- v1 ----
    "v1 size" => size_of::<D1>(), 120;
    "v1 type" => offset_of!(D1, type_), 0;
    "v1 parentObj" => offset_of!(D1, parentObj), 8;
    "v1 rank" => offset_of!(D1, rank), 16;
    "v1 union" => offset_of!(D1, u), 24;
    "v1 coll size" => size_of::<CollV1>(), 96;
    "v1 coll.name" => at!(D1, CollV1, name), 24;
    "v1 coll.commHash" => at!(D1, CollV1, commHash), 32;
    "v1 coll.seqNumber" => at!(D1, CollV1, seqNumber), 40;
    "v1 coll.func" => at!(D1, CollV1, func), 48;
    "v1 coll.sendBuff" => at!(D1, CollV1, sendBuff), 56;
    "v1 coll.recvBuff" => at!(D1, CollV1, recvBuff), 64;
    "v1 coll.count" => at!(D1, CollV1, count), 72;
    "v1 coll.root" => at!(D1, CollV1, root), 80;
    "v1 coll.datatype" => at!(D1, CollV1, datatype), 84;
    "v1 coll.op" => at!(D1, CollV1, op), 88;
    "v1 coll.trafficBytes" => at!(D1, CollV1, trafficBytes), 96;
    "v1 coll.nMaxChannels" => at!(D1, CollV1, nMaxChannels), 104;
    "v1 coll.nWarps" => at!(D1, CollV1, nWarps), 105;
    "v1 coll.algo" => at!(D1, CollV1, algo), 106;
    "v1 coll.proto" => at!(D1, CollV1, proto), 107;
    "v1 coll.isCollnet" => at!(D1, CollV1, isCollnet), 108;
    "v1 coll.isNvls" => at!(D1, CollV1, isNvls), 112;
    "v1 p2p size" => size_of::<P2pV1>(), 56;
    "v1 p2p.name" => at!(D1, P2pV1, name), 24;
    "v1 p2p.commHash" => at!(D1, P2pV1, commHash), 32;
    "v1 p2p.func" => at!(D1, P2pV1, func), 40;
    "v1 p2p.buff" => at!(D1, P2pV1, buff), 48;
    "v1 p2p.datatype" => at!(D1, P2pV1, datatype), 56;
    "v1 p2p.count" => at!(D1, P2pV1, count), 64;
    "v1 p2p.peer" => at!(D1, P2pV1, peer), 72;

    // ---- shared members (same absolute offsets in every version) ----
    "proxyOp size" => size_of::<ProxyOpDescr>(), 24;
    "proxyOp.pid" => at!(D1, ProxyOpDescr, pid), 24;
    "proxyOp.channelId" => at!(D1, ProxyOpDescr, channelId), 28;
    "proxyOp.peer" => at!(D1, ProxyOpDescr, peer), 32;
    "proxyOp.nSteps" => at!(D1, ProxyOpDescr, nSteps), 36;
    "proxyOp.chunkSize" => at!(D1, ProxyOpDescr, chunkSize), 40;
    "proxyOp.isSend" => at!(D1, ProxyOpDescr, isSend), 44;
    "v7 proxyOp.isSend" => at!(D7, ProxyOpDescr, isSend), 44;
    "proxyStep.step" => at!(D1, ProxyStepDescr, step), 24;
    "v3 kernelCh.channelId" => at!(D3, KernelChDescrV3, channelId), 24;
    "v4 kernelCh.channelId" => at!(D4, KernelChDescrV4, channelId), 24;
    "v4 kernelCh.pTimer" => at!(D4, KernelChDescrV4, pTimer), 32;
    "netPlugin.id" => at!(D3, NetPluginDescr, id), 24;
    "netPlugin.data" => at!(D3, NetPluginDescr, data), 32;

    // ---- v2 ----
    "v2 size" => size_of::<D2>(), 128;
    "v2 union" => offset_of!(D2, u), 24;
    "v2 coll size" => size_of::<CollV2>(), 104;
    "v2 coll.name" => at!(D2, CollV2, name), 24;
    "v2 coll.commHash" => at!(D2, CollV2, commHash), 32;
    "v2 coll.seqNumber" => at!(D2, CollV2, seqNumber), 40;
    "v2 coll.func" => at!(D2, CollV2, func), 48;
    "v2 coll.sendBuff" => at!(D2, CollV2, sendBuff), 56;
    "v2 coll.recvBuff" => at!(D2, CollV2, recvBuff), 64;
    "v2 coll.count" => at!(D2, CollV2, count), 72;
    "v2 coll.root" => at!(D2, CollV2, root), 80;
    "v2 coll.datatype" => at!(D2, CollV2, datatype), 88;
    "v2 coll.trafficBytes" => at!(D2, CollV2, trafficBytes), 96;
    "v2 coll.nMaxChannels" => at!(D2, CollV2, nMaxChannels), 104;
    "v2 coll.nWarps" => at!(D2, CollV2, nWarps), 105;
    "v2 coll.algo" => at!(D2, CollV2, algo), 112;
    "v2 coll.proto" => at!(D2, CollV2, proto), 120;
    "v2 p2p size" => size_of::<P2pV2>(), 56;
    "v2 p2p.name" => at!(D2, P2pV2, name), 24;
    "v2 p2p.commHash" => at!(D2, P2pV2, commHash), 32;
    "v2 p2p.func" => at!(D2, P2pV2, func), 40;
    "v2 p2p.buff" => at!(D2, P2pV2, buff), 48;
    "v2 p2p.datatype" => at!(D2, P2pV2, datatype), 56;
    "v2 p2p.count" => at!(D2, P2pV2, count), 64;
    "v2 p2p.peer" => at!(D2, P2pV2, peer), 72;

    // ---- v3 ----
    "v3 size" => size_of::<D3>(), 120;
    "v3 coll size" => size_of::<CollV3>(), 96;
    "v3 coll.name" => at!(D3, CollV3, name), 24;
    "v3 coll.commHash" => at!(D3, CollV3, commHash), 32;
    "v3 coll.seqNumber" => at!(D3, CollV3, seqNumber), 40;
    "v3 coll.func" => at!(D3, CollV3, func), 48;
    "v3 coll.sendBuff" => at!(D3, CollV3, sendBuff), 56;
    "v3 coll.recvBuff" => at!(D3, CollV3, recvBuff), 64;
    "v3 coll.count" => at!(D3, CollV3, count), 72;
    "v3 coll.root" => at!(D3, CollV3, root), 80;
    "v3 coll.datatype" => at!(D3, CollV3, datatype), 88;
    "v3 coll.nMaxChannels" => at!(D3, CollV3, nMaxChannels), 96;
    "v3 coll.nWarps" => at!(D3, CollV3, nWarps), 97;
    "v3 coll.algo" => at!(D3, CollV3, algo), 104;
    "v3 coll.proto" => at!(D3, CollV3, proto), 112;
    "v3 p2p.peer" => at!(D3, P2pV2, peer), 72;

    // ---- v4 ----
    "v4 size" => size_of::<D4>(), 104;
    "v4 type" => offset_of!(D4, type_), 0;
    "v4 parentObj" => offset_of!(D4, parentObj), 8;
    "v4 rank" => offset_of!(D4, rank), 16;
    "v4 coll size" => size_of::<CollV4>(), 80;
    "v4 coll.seqNumber" => at!(D4, CollV4, seqNumber), 24;
    "v4 coll.func" => at!(D4, CollV4, func), 32;
    "v4 coll.sendBuff" => at!(D4, CollV4, sendBuff), 40;
    "v4 coll.recvBuff" => at!(D4, CollV4, recvBuff), 48;
    "v4 coll.count" => at!(D4, CollV4, count), 56;
    "v4 coll.root" => at!(D4, CollV4, root), 64;
    "v4 coll.datatype" => at!(D4, CollV4, datatype), 72;
    "v4 coll.nChannels" => at!(D4, CollV4, nChannels), 80;
    "v4 coll.nWarps" => at!(D4, CollV4, nWarps), 81;
    "v4 coll.algo" => at!(D4, CollV4, algo), 88;
    "v4 coll.proto" => at!(D4, CollV4, proto), 96;
    "v4 p2p size" => size_of::<P2pV4>(), 40;
    "v4 p2p.func" => at!(D4, P2pV4, func), 24;
    "v4 p2p.buff" => at!(D4, P2pV4, buff), 32;
    "v4 p2p.datatype" => at!(D4, P2pV4, datatype), 40;
    "v4 p2p.count" => at!(D4, P2pV4, count), 48;
    "v4 p2p.peer" => at!(D4, P2pV4, peer), 56;
    "v4 p2p.nChannels" => at!(D4, P2pV4, nChannels), 60;

    // ---- v5 ----
    "v5 size" => size_of::<D5>(), 112;
    "v5 type" => offset_of!(D5, type_), 0;
    "v5 parentObj" => offset_of!(D5, parentObj), 8;
    "v5 rank" => offset_of!(D5, rank), 16;
    "v5 union" => offset_of!(D5, u), 24;
    "v5 groupApi size" => size_of::<GroupApiV5>(), 8;
    "v5 groupApi.graphCaptured" => at!(D5, GroupApiV5, graphCaptured), 24;
    "v5 groupApi.groupDepth" => at!(D5, GroupApiV5, groupDepth), 28;
    "v5 collApi size" => size_of::<CollApiV5>(), 48;
    "v5 collApi.func" => at!(D5, CollApiV5, func), 24;
    "v5 collApi.count" => at!(D5, CollApiV5, count), 32;
    "v5 collApi.datatype" => at!(D5, CollApiV5, datatype), 40;
    "v5 collApi.root" => at!(D5, CollApiV5, root), 48;
    "v5 collApi.stream" => at!(D5, CollApiV5, stream), 56;
    "v5 collApi.graphCaptured" => at!(D5, CollApiV5, graphCaptured), 64;
    "v5 p2pApi size" => size_of::<P2pApiV5>(), 40;
    "v5 p2pApi.func" => at!(D5, P2pApiV5, func), 24;
    "v5 p2pApi.count" => at!(D5, P2pApiV5, count), 32;
    "v5 p2pApi.datatype" => at!(D5, P2pApiV5, datatype), 40;
    "v5 p2pApi.stream" => at!(D5, P2pApiV5, stream), 48;
    "v5 p2pApi.graphCaptured" => at!(D5, P2pApiV5, graphCaptured), 56;
    "v5 kernelLaunch.stream" => at!(D5, KernelLaunchV5, stream), 24;
    "v5 coll size" => size_of::<CollV5>(), 88;
    "v5 coll.seqNumber" => at!(D5, CollV5, seqNumber), 24;
    "v5 coll.func" => at!(D5, CollV5, func), 32;
    "v5 coll.sendBuff" => at!(D5, CollV5, sendBuff), 40;
    "v5 coll.recvBuff" => at!(D5, CollV5, recvBuff), 48;
    "v5 coll.count" => at!(D5, CollV5, count), 56;
    "v5 coll.root" => at!(D5, CollV5, root), 64;
    "v5 coll.datatype" => at!(D5, CollV5, datatype), 72;
    "v5 coll.nChannels" => at!(D5, CollV5, nChannels), 80;
    "v5 coll.nWarps" => at!(D5, CollV5, nWarps), 81;
    "v5 coll.algo" => at!(D5, CollV5, algo), 88;
    "v5 coll.proto" => at!(D5, CollV5, proto), 96;
    "v5 coll.parentGroup" => at!(D5, CollV5, parentGroup), 104;
    "v5 p2p size" => size_of::<P2pV5>(), 48;
    "v5 p2p.func" => at!(D5, P2pV5, func), 24;
    "v5 p2p.buff" => at!(D5, P2pV5, buff), 32;
    "v5 p2p.datatype" => at!(D5, P2pV5, datatype), 40;
    "v5 p2p.count" => at!(D5, P2pV5, count), 48;
    "v5 p2p.peer" => at!(D5, P2pV5, peer), 56;
    "v5 p2p.nChannels" => at!(D5, P2pV5, nChannels), 60;
    "v5 p2p.parentGroup" => at!(D5, P2pV5, parentGroup), 64;
    "v5 kernelCh.pTimer" => at!(D5, KernelChDescrV4, pTimer), 32;

    // ---- v6 ----
    "v6 size" => size_of::<D6>(), 112;
    "v6 union" => offset_of!(D6, u), 24;
    "v6 ceColl size" => size_of::<CeCollV6>(), 88;
    "v6 ceColl.seqNumber" => at!(D6, CeCollV6, seqNumber), 24;
    "v6 ceColl.func" => at!(D6, CeCollV6, func), 32;
    "v6 ceColl.sendBuff" => at!(D6, CeCollV6, sendBuff), 40;
    "v6 ceColl.recvBuff" => at!(D6, CeCollV6, recvBuff), 48;
    "v6 ceColl.count" => at!(D6, CeCollV6, count), 56;
    "v6 ceColl.root" => at!(D6, CeCollV6, root), 64;
    "v6 ceColl.datatype" => at!(D6, CeCollV6, datatype), 72;
    "v6 ceColl.syncStrategy" => at!(D6, CeCollV6, syncStrategy), 80;
    "v6 ceColl.intraBatchSync" => at!(D6, CeCollV6, intraBatchSync), 88;
    "v6 ceColl.batchSize" => at!(D6, CeCollV6, batchSize), 92;
    "v6 ceColl.numBatches" => at!(D6, CeCollV6, numBatches), 96;
    "v6 ceColl.ceSeqNum" => at!(D6, CeCollV6, ceSeqNum), 100;
    "v6 ceColl.stream" => at!(D6, CeCollV6, stream), 104;
    "v6 ceCollSync size" => size_of::<CeSyncV6>(), 8;
    "v6 ceCollSync.isComplete" => at!(D6, CeSyncV6, isComplete), 24;
    "v6 ceCollSync.nRanks" => at!(D6, CeSyncV6, nRanks), 28;
    "v6 ceCollBatch size" => size_of::<CeBatchV6>(), 24;
    "v6 ceCollBatch.numOps" => at!(D6, CeBatchV6, numOps), 24;
    "v6 ceCollBatch.totalBytes" => at!(D6, CeBatchV6, totalBytes), 32;
    "v6 ceCollBatch.useIntraSync" => at!(D6, CeBatchV6, useIntraSync), 40;

    // ---- v7 ----
    "v7 size" => size_of::<D7>(), 136;
    "v7 union" => offset_of!(D7, u), 24;
    "v7 collApi size" => size_of::<CollApiV7>(), 56;
    "v7 collApi.graphCaptured" => at!(D7, CollApiV7, graphCaptured), 64;
    "v7 collApi.userTag" => at!(D7, CollApiV7, userTag), 72;
    "v7 p2pApi.graphCaptured" => at!(D7, P2pApiV7, graphCaptured), 56;
    "v7 p2pApi.userTag" => at!(D7, P2pApiV7, userTag), 64;
    "v7 coll size" => size_of::<CollV7>(), 112;
    "v7 coll.parentGroup" => at!(D7, CollV7, parentGroup), 104;
    "v7 coll.kernelVariant" => at!(D7, CollV7, kernelVariant), 112;
    "v7 coll.isSymColl" => at!(D7, CollV7, isSymColl), 120;
    "v7 coll.userTag" => at!(D7, CollV7, userTag), 128;
    "v7 p2p.parentGroup" => at!(D7, P2pV7, parentGroup), 64;
    "v7 p2p.userTag" => at!(D7, P2pV7, userTag), 72;
    "v7 ceColl.stream" => at!(D7, CeCollV7, stream), 104;
    "v7 ceColl.userTag" => at!(D7, CeCollV7, userTag), 112;
    "v7 kernelPhase.channelId" => at!(D7, KernelPhaseV7, channelId), 24;
    "v7 kernelPhase.phaseId" => at!(D7, KernelPhaseV7, phaseId), 25;
    "v7 kernelPhase.phaseName" => at!(D7, KernelPhaseV7, phaseName), 32;
    "v7 kernelPhase.pTimer" => at!(D7, KernelPhaseV7, pTimer), 40;

    // ---- state arguments ----
    "v1-v3 state args size" => size_of::<StateArgsV1>(), 16;
    "v1 args proxyOp.transSize" => offset_of!(StateArgsV1ProxyOp, transSize), 0;
    "v1 args proxyOp.steps" => offset_of!(StateArgsV1ProxyOp, steps), 8;
    "v4-v7 state args size" => size_of::<StateArgsV4>(), 8;

    // ---- net-plugin payloads ----
    "IB v1 qp.device" => offset_of!(NetIbDescrV1, qp) + offset_of!(NetIbQpV1, device), 8;
    "IB v1 qp.wr_id" => offset_of!(NetIbDescrV1, qp) + offset_of!(NetIbQpV1, wr_id), 16;
    "IB v1 qp.opcode" => offset_of!(NetIbDescrV1, qp) + offset_of!(NetIbQpV1, opcode), 24;
    "IB v1 qp.qpNum" => offset_of!(NetIbDescrV1, qp) + offset_of!(NetIbQpV1, qpNum), 28;
    "IB v1 qp.length" => offset_of!(NetIbDescrV1, qp) + offset_of!(NetIbQpV1, length), 32;
    "socket v1 sock.fd" => offset_of!(NetSockDescrV1, sock) + offset_of!(NetSockV1, fd), 8;
    "socket v1 sock.op" => offset_of!(NetSockDescrV1, sock) + offset_of!(NetSockV1, op), 12;
    "socket v1 sock.length" => offset_of!(NetSockDescrV1, sock) + offset_of!(NetSockV1, length), 16;
}

#[cfg(test)]
mod tests {
    use super::FIELDS;

    #[test]
    fn every_size_and_offset_matches_the_spec() {
        let mut wrong = Vec::new();
        for fact in FIELDS {
            println!(
                "{:<32} {:>4} (spec {:>4})",
                fact.what, fact.actual, fact.expected
            );
            if fact.actual != fact.expected {
                wrong.push(fact.what);
            }
        }
        assert!(wrong.is_empty(), "layout differs from the spec: {wrong:?}");
        assert!(
            FIELDS.len() > 200,
            "the table lost entries: {}",
            FIELDS.len()
        );
    }
}
