//! Any bytes into the reader: open, then decode, verify and check every object. Errors are fine;
//! panics, hangs and allocations beyond the malloc limit are findings.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ztensor_format::Options;
use ztensor_io::Reader;

fuzz_target!(|data: &[u8]| {
    let mut options = Options::default();
    // Keep the decoded-size bound below the fuzzer's malloc limit.
    options.limits.max_decoded_len = 64 << 20;
    let Ok(reader) = Reader::new(data, &options) else { return };
    for object in reader.manifest().objects() {
        let name = object.name();
        for role in object.object().components.keys() {
            let _ = reader.verify_digest(name, role);
            let _ = reader.decoded(name, role);
        }
        let _ = reader.read_object(name);
        let _ = reader.check_data(name, true);
    }
});
