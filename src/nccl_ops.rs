//! What NCCL's performance tests count for a collective, so that the summary, the profile
//! and the comparison of runs give the same bandwidths.

/// Size and bus-bandwidth factor of NCCL's performance tests, from one rank's `bytes`
/// (as the trace's `nccl.bytes` gives it) in a communicator of `nranks`: the algorithm
/// bandwidth is size / time, the bus bandwidth that times the factor.
pub fn size_and_factor(func: &str, bytes: u64, nranks: i64) -> (u64, f64) {
    let n = nranks.max(1) as f64;
    match func {
        "AllReduce" => (bytes, 2.0 * (n - 1.0) / n),
        // Coll AllGather reports each rank's part in bytes; ReduceScatter each rank's
        // result: the whole buffer is nranks of them.
        "AllGather" | "ReduceScatter" => {
            (bytes.saturating_mul(nranks.max(1) as u64), (n - 1.0) / n)
        }
        _ => (bytes, 1.0),
    }
}

/// Whether `func` is a point-to-point operation (not matched across ranks by sequence
/// number).
pub fn is_point_to_point(func: &str) -> bool {
    matches!(func, "Send" | "Recv" | "SendRecv")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_factors_follow_nccl_tests() {
        assert_eq!(size_and_factor("AllReduce", 100, 4), (100, 1.5));
        assert_eq!(size_and_factor("AllGather", 100, 4), (400, 0.75));
        assert_eq!(size_and_factor("ReduceScatter", 100, 4), (400, 0.75));
        assert_eq!(size_and_factor("Broadcast", 100, 4), (100, 1.0));
        assert!(is_point_to_point("Recv") && !is_point_to_point("AllReduce"));
        // A garbage byte count (a count of 2^64-1 elements) saturates instead of
        // overflowing.
        assert_eq!(size_and_factor("AllGather", u64::MAX, 4).0, u64::MAX);
    }
}
