//! Payload sizes in buckets: powers of four, named by their bounds, so that a job's
//! sizes become a few values whatever they are (Score-P's region parameter, the profile's
//! call-tree nodes, the comparison of runs).

use std::ffi::CStr;

/// Power-of-four size buckets, `[lower, 4 × lower)`, named by their bounds.
const BUCKETS: [&CStr; 21] = [
    c"1-4 B",
    c"4-16 B",
    c"16-64 B",
    c"64-256 B",
    c"256 B-1 KiB",
    c"1-4 KiB",
    c"4-16 KiB",
    c"16-64 KiB",
    c"64-256 KiB",
    c"256 KiB-1 MiB",
    c"1-4 MiB",
    c"4-16 MiB",
    c"16-64 MiB",
    c"64-256 MiB",
    c"256 MiB-1 GiB",
    c"1-4 GiB",
    c"4-16 GiB",
    c"16-64 GiB",
    c"64-256 GiB",
    c"256 GiB-1 TiB",
    c">= 1 TiB",
];

/// The bucket of a payload size: one of 23 values whatever the sizes a job uses.
pub fn size_bucket(bytes: Option<u64>) -> &'static CStr {
    match bytes {
        None => c"unknown",
        Some(0) => c"0 B",
        Some(n) => {
            let index = (63 - n.leading_zeros()) as usize / 2;
            BUCKETS[index.min(BUCKETS.len() - 1)]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn sizes_fall_into_their_power_of_four_bucket() {
        assert_eq!(size_bucket(None), c"unknown");
        assert_eq!(size_bucket(Some(0)), c"0 B");
        assert_eq!(size_bucket(Some(1)), c"1-4 B");
        assert_eq!(size_bucket(Some(3)), c"1-4 B");
        assert_eq!(size_bucket(Some(4)), c"4-16 B");
        assert_eq!(size_bucket(Some(1023)), c"256 B-1 KiB");
        assert_eq!(size_bucket(Some(1024)), c"1-4 KiB");
        assert_eq!(size_bucket(Some(4095)), c"1-4 KiB");
        assert_eq!(size_bucket(Some(4096)), c"4-16 KiB");
        assert_eq!(size_bucket(Some(1 << 20)), c"1-4 MiB");
        assert_eq!(size_bucket(Some(1 << 40)), c">= 1 TiB");
        assert_eq!(size_bucket(Some(u64::MAX)), c">= 1 TiB");
    }

    #[test]
    fn every_size_gives_one_of_few_values() {
        let mut seen = BTreeSet::new();
        for shift in 0..64 {
            for n in [
                1u64 << shift,
                (1u64 << shift) | 1,
                (1u64 << shift).wrapping_sub(1),
            ] {
                seen.insert(size_bucket(Some(n)));
            }
        }
        assert!(seen.len() <= 23, "{seen:?}");
    }
}
