//! A valid header and trailer around fuzzed manifest bytes, for both containers, so the fuzzer
//! spends its time inside the CBOR decoder, the schemas and validation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ztensor_format::{Container, Options, parse_file};

fuzz_target!(|data: &[u8]| {
    // The first byte picks the container and how much zeroed data area precedes the manifest.
    let Some((&selector, manifest)) = data.split_first() else { return };
    let container = if selector & 1 == 0 { Container::V0_1 } else { Container::V1 };
    let data_area = usize::from(selector >> 1) * 64;
    let mut file = container.magic().to_vec();
    file.resize(8 + data_area, 0);
    file.extend_from_slice(manifest);
    file.extend_from_slice(&container.encode_trailer(manifest.len() as u64));
    let _ = parse_file(&file, &Options::default());
    let _ = parse_file(&file, &Options::strict());
});
