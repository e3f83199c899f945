//! Fuzz target: see `ztensor_conformance::fuzz::dcp_shards`. Live heap bytes are counted, so an
//! input that makes the reader hold far more than its length explains is a finding.
#![no_main]
#[global_allocator]
static HEAP: ztensor_conformance::heap::Counting = ztensor_conformance::heap::Counting;
libfuzzer_sys::fuzz_target!(|data: &[u8]| ztensor_conformance::fuzz::dcp_shards(data));
