//! Counters of everything the plugin refused, dropped or repaired. Nothing is lost
//! silently: every counter is reported at the last finalize (log and event-log summary).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($( $(#[doc = $doc:literal])* $name:ident, )*) => {
        /// Process-wide counters; incremented with relaxed atomics off the common path.
        #[derive(Debug, Default)]
        pub struct Counters {
            $( $(#[doc = $doc])* pub $name: AtomicU64, )*
        }

        impl Counters {
            /// Every counter by name, zeros included.
            pub fn snapshot(&self) -> BTreeMap<&'static str, u64> {
                let mut map = BTreeMap::new();
                $( map.insert(stringify!($name), self.$name.load(Ordering::Relaxed)); )*
                map
            }

            /// Sets every counter back to zero (a new init/finalize cycle).
            pub fn reset(&self) {
                $( self.$name.store(0, Ordering::Relaxed); )*
            }
        }
    };
}

counters! {
    /// startEvent called with a NULL `eHandle` pointer.
    null_handle_out,
    /// startEvent called with a NULL descriptor.
    null_descriptor,
    /// A descriptor type that is not exactly one bit this API version knows.
    unknown_type,
    /// A state value unknown, or not one of the event's kind.
    unknown_state,
    /// startEvent with a NULL context.
    null_context,
    /// startEvent with a context this process never issued.
    foreign_context,
    /// startEvent with a context of an earlier init/finalize cycle.
    stale_context,
    /// Events refused because their context is disabled.
    disabled_context,
    /// ProxyOps progressed here for another process (PXN).
    pxn_foreign_ops,
    /// Events refused because every slab slot was in use.
    slab_full,
    /// Events refused because the plugin's heap was above its limit's high-water mark
    /// (NCCL_SCOREP_MEMORY_LIMIT).
    memory_limit_events,
    /// State records of recorded events dropped for the same reason.
    memory_limit_states,
    /// Records dropped because a thread's ring was full: `lost_starts + lost_stops +
    /// lost_states`.
    ring_full,
    /// Events whose start record a full ring dropped: NCCL got a NULL handle, and the
    /// event is not in the trace.
    lost_starts,
    /// Stops whose record was dropped (the event is closed at finalize).
    lost_stops,
    /// States whose record a full ring dropped: their event is in the trace without them.
    lost_states,
    /// stopEvent(NULL): legal for NetPlugin, otherwise a caller bug.
    stop_null,
    /// stopEvent on a value never issued by this process.
    stop_never_issued,
    /// stopEvent on an event already stopped.
    stop_double,
    /// stopEvent on a handle whose slot was reused since.
    stop_stale,
    /// recordEventState with a NULL handle.
    record_null,
    /// recordEventState on a value never issued by this process.
    record_never_issued,
    /// recordEventState on an event already stopped.
    record_after_stop,
    /// recordEventState on a handle whose slot was reused since.
    record_stale,
    /// finalize of an unknown, foreign or already finalized context.
    bad_finalize,
    /// init calls that returned a disabled context.
    disabled_inits,
    /// Panics caught at the boundary (the plugin turns itself off after the first).
    panics,
    /// Events written by the collector.
    events_written,
    /// Times an NCCL thread waited for room in its full ring (`NCCL_SCOREP_ON_FULL=wait`,
    /// or an init or finalize record): the plugin held NCCL back.
    held_back,
    /// Nanoseconds NCCL's threads waited so, together, and the longest wait.
    held_back_ns,
    held_back_longest_ns,
    /// Receive steps started again for the same step and never stopped.
    restarted_steps,
    /// Events still open at finalize, closed there.
    closed_at_finalize,
    /// Events closed because their ProxyOp stopped first.
    closed_with_parent,
    /// ProxyOps NCCL never stopped (non-network transports), closed to bound memory.
    abandoned_proxy_ops,
    /// Stop or state records whose start never arrived.
    orphan_records,
    /// Parents that were neither NULL, ours and known, nor foreign.
    unresolved_parents,
    /// KernelCh GPU intervals whose stop timestamp was before their start (NCCL PR
    /// #2368): their operations keep host-side times.
    gpu_end_before_start,
    /// KernelCh GPU intervals longer than the host's span from their operation's enqueue
    /// to their stop callback (3–6 s broadcast kernels, NCCL PR #2368).
    gpu_beyond_host_bounds,
    /// KernelCh GPU intervals shifted by more than the clock estimate allows (a timestamp
    /// jump): before their enqueue, or after the host saw them end.
    gpu_clock_jumps,
    /// KernelPhase GPU intervals rejected by the same checks (left out of the trace).
    gpu_phases_rejected,
    /// Score-P mode: regions entered in Score-P.
    scorep_regions_entered,
    /// Score-P mode: stops ending a region out of order on its thread; the region was
    /// ended right after the regions entered after it (a tally, nothing is lost).
    scorep_ends_deferred,
    /// Score-P mode: stops on a thread other than the one that entered the region; never
    /// sent to Score-P (it aborts on that), the event is in the sidecar trace.
    scorep_cross_thread_stops,
    /// Score-P mode: tasks of a plan (Coll, P2p) ended when the next task of the plan
    /// started, so that they are siblings inside the plan (a tally, nothing is lost).
    scorep_tasks_ended_at_next,
    /// Score-P mode: regions whose stop came on another thread, ended on their own thread
    /// at its next NCCL callback or with the region around them (their end is late).
    scorep_closed_late,
    /// Score-P mode: regions still running when the API call around them ended, ended
    /// there (cut short).
    scorep_truncated,
    /// Score-P mode: regions of the finalizing thread still open at the last finalize.
    scorep_closed_at_finalize,
    /// Score-P mode: regions of other threads still open at the last finalize.
    scorep_left_open,
    /// Score-P mode: events not forwarded (region stack too deep, thread exiting, or no
    /// region handle from Score-P).
    scorep_not_forwarded,
    /// Score-P mode: metric samples dropped because the sample buffer was full.
    scorep_metric_samples_dropped,
}

impl Counters {
    #[inline]
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters that mean data was lost or refused (everything but the tallies).
    pub fn losses(&self) -> BTreeMap<&'static str, u64> {
        let mut map = self.snapshot();
        map.retain(|name, value| *value > 0 && is_loss(name));
        map
    }
}

/// Whether the counter `name` counts data lost or refused (not a tally).
pub fn is_loss(name: &str) -> bool {
    !matches!(
        name,
        "events_written"
            | "held_back"
            | "held_back_ns"
            | "held_back_longest_ns"
            | "pxn_foreign_ops"
            | "stop_null"
            | "scorep_regions_entered"
            | "scorep_ends_deferred"
            | "scorep_tasks_ended_at_next"
    )
}
