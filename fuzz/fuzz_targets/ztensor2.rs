//! Fuzz target: see `ztensor_conformance::fuzz::ztensor2`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ztensor_conformance::fuzz::ztensor2(data));
