//! Handles through the loaded library over hundreds of thousands of events: a handle value
//! is never issued twice. (Kept out of the valgrind run of the hostile tests: it is long.)

mod support;

use support::*;

const HASH: u64 = 0x0bad_cafe_0000_0002;

/// The slot of a handle (bits 0..20).
fn slot_of(h: Handle) -> u64 {
    h.value() & ((1 << 20) - 1)
}

/// One slot reused far more often than a handle's generation bits of earlier versions could
/// count (2^18): a handle value is never issued twice, so a stale one can never stop a
/// newer, live event.
#[test]
fn a_handle_value_is_never_issued_twice() {
    // Waiting for room: a dropped start record would give a NULL handle instead.
    let plugin = Plugin::load(&[
        ("NCCL_SCOREP_MODE", "jsonl"),
        ("NCCL_SCOREP_ON_FULL", "wait"),
    ]);
    let (ctx, _) = plugin.init_v7(HASH, Some(c"reuse"), 0, 1);
    let first = plugin.start7(ctx, &mut group_api7(1));
    plugin.stop7(first);
    let mut issued = std::collections::HashSet::new();
    issued.insert(first.value());
    let mut same_slot = 0;
    for _ in 0..300_000 {
        let h = plugin.start7(ctx, &mut group_api7(1));
        assert!(issued.insert(h.value()), "{:#x} issued twice", h.value());
        same_slot += usize::from(slot_of(h) == slot_of(first));
        plugin.stop7(h);
    }
    assert!(same_slot > 262_144, "the slot was reused {same_slot} times");
    // The first handle is stale: stopping it again ends nothing.
    let live = plugin.start7(ctx, &mut group_api7(1));
    plugin.stop7(first);
    plugin.stop7(live);
    plugin.finalize7(ctx);
    let counters = plugin.counters();
    assert_eq!(counters["stop_stale"], 1, "{counters:?}");
}
