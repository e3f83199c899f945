//! Fuzz target: see `ztensor_conformance::fuzz::read_any`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ztensor_conformance::fuzz::read_any(data));
