//! The fuzzer's own random numbers: a seed's cases are the same on every machine.

/// A small, fast, seedable generator (SplitMix64): the cases of a seed are the same on every
/// machine and in every release of this crate that keeps this function.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// The generator of `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// 32 random bits.
    #[allow(clippy::cast_possible_truncation)]
    pub fn u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
}
