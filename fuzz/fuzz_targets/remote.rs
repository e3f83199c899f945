//! Fuzz target: see `ztensor_conformance::fuzz::remote`. The bytes are answers served in the
//! place of an object store's.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ztensor_conformance::fuzz::remote(data));
