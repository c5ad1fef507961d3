//! A small, seeded pseudo-random sequence for the unit tests (xorshift64): the same values
//! run after run, without a dependency.

/// The xorshift64 sequence that starts after `seed` (not 0).
pub(crate) fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}
