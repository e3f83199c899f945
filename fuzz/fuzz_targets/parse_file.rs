//! Any bytes as a whole file: parse and validate must return, never panic; an accepted manifest
//! must re-encode, and its encoding must be a fixed point.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ztensor_format::{Manifest, Options, parse_file};

fuzz_target!(|data: &[u8]| {
    for options in [Options::default(), Options::strict()] {
        if let Ok(validated) = parse_file(data, &options) {
            let manifest = validated.manifest();
            let bytes = manifest.encode().expect("an accepted manifest re-encodes");
            let again = Manifest::decode(manifest.version.container(), &bytes, &options.limits)
                .expect("our own encoding decodes");
            assert_eq!(again.encode().expect("re-encodes"), bytes, "encoding is a fixed point");
        }
    }
});
