//! NCCL's names resolved by their address: the same names come out before and after the
//! collector entered their addresses, and a name in writable memory is read at every
//! call, so that a change of its bytes is seen.

mod support;

use nccl_profiler_abi::event_type as t;
use std::collections::BTreeMap;
use std::ffi::c_char;
use std::time::Duration;
use support::*;

/// Collectives of each round; the collector looks at the rings every 2 ms, so the pause
/// between rounds gives it many passes.
const PER_ROUND: u64 = 50;
const PAUSE: Duration = Duration::from_millis(50);

#[test]
fn names_are_the_same_before_and_after_their_addresses_are_known() {
    let plugin = Plugin::load(&[("NCCL_SCOREP_EVENTS", "all")]);
    let (ctx, _) = plugin.init_v7(0xabc, Some(c"names"), 0, 2);
    let group = plugin.start7(ctx, &mut plain7(t::GROUP, Handle(std::ptr::null_mut())));
    // A type name in a heap buffer (writable memory), rewritten between rounds.
    let mut buffer = b"ncclInt32\0\0\0\0\0\0\0".to_vec();
    let mut seq = 0;
    let mut expected: BTreeMap<u64, (&str, &str)> = BTreeMap::new();
    for round in 0..3 {
        if round == 2 {
            buffer[..12].copy_from_slice(b"ncclFloat64\0");
        }
        for _ in 0..PER_ROUND {
            seq += 1;
            // NCCL's literals: AllReduce on ncclFloat32, and its "Unknown" for ncclUint8.
            let (func, dtype, names) = match seq % 3 {
                0 => (c"AllReduce", c"ncclFloat32", ("AllReduce", "ncclFloat32")),
                1 => (c"AllGather", c"Unknown", ("AllGather", "ncclUint8")),
                _ => (c"Broadcast", c"ncclFloat32", ("Broadcast", "")),
            };
            let mut descr = coll7(group, group, 0, seq, func, 1024, dtype, 2);
            if seq % 3 == 2 {
                // The buffer outlives the call.
                descr.u.coll.datatype = buffer.as_ptr().cast::<c_char>();
            }
            let coll = plugin.start7(ctx, &mut descr);
            assert!(!coll.is_null());
            plugin.stop7(coll);
            let heap_name = if round == 2 {
                "ncclFloat64"
            } else {
                "ncclInt32"
            };
            let (func, dtype) = names;
            expected.insert(
                seq,
                (func, if dtype.is_empty() { heap_name } else { dtype }),
            );
        }
        std::thread::sleep(PAUSE);
    }
    plugin.stop7(group);
    plugin.finalize7(ctx);

    let colls: BTreeMap<u64, serde_json::Value> = plugin
        .events()
        .into_iter()
        .filter(|e| e["kind"] == "Coll")
        .map(|e| (e["seq"].as_u64().expect("a seq"), e))
        .collect();
    assert_eq!(colls.len(), expected.len());
    for (seq, (func, dtype)) in expected {
        let coll = &colls[&seq];
        assert_eq!(coll["func"], func, "seq {seq}");
        assert_eq!(coll["datatype"], dtype, "seq {seq}");
        assert_eq!(coll["algo"], "RING", "seq {seq}");
        assert_eq!(coll["proto"], "SIMPLE", "seq {seq}");
    }
}
