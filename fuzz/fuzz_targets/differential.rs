//! Fuzz target: see `ztensor_conformance::fuzz::differential`. Its inputs are recipes, and its
//! mutator changes them as recipes (`Recipe::mutate_fuzz_bytes`), so coverage guides a
//! structure-aware search.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ztensor_conformance::fuzz::differential(data));

libfuzzer_sys::fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    let mut bytes = data[..size].to_vec();
    let len = ztensor_conformance::difffuzz::Recipe::mutate_fuzz_bytes(&mut bytes, max_size, seed);
    data[..len].copy_from_slice(&bytes[..len]);
    len
});
