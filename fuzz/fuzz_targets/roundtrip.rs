//! Fuzz target: see `ztensor_conformance::fuzz::roundtrip`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ztensor_conformance::fuzz::roundtrip(data));
