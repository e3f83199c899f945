//! Replays every committed fuzzer finding (`fuzz/regressions/<target>/*`) through the invariant
//! its target checks, so a fixed bug stays fixed without running the fuzzer.

use std::path::PathBuf;

use ztensor_format::{Manifest, Options, parse_file};

/// The `parse_file` target's invariant: parsing returns; an accepted manifest re-encodes, and
/// its encoding decodes and re-encodes to the same bytes.
fn parse_file_invariant(data: &[u8]) {
    for options in [Options::default(), Options::strict()] {
        if let Ok(validated) = parse_file(data, &options) {
            let manifest = validated.manifest();
            let bytes = manifest.encode().expect("an accepted manifest re-encodes");
            let again = Manifest::decode(manifest.version.container(), &bytes, &options.limits)
                .expect("decodes");
            assert_eq!(again.encode().expect("re-encodes"), bytes);
        }
    }
}

#[test]
fn parse_file_regressions() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions/parse_file");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).expect("regressions directory") {
        let path = entry.expect("entry").path();
        parse_file_invariant(&std::fs::read(&path).expect("readable"));
        count += 1;
    }
    assert!(count > 0, "no regressions found in {}", dir.display());
}
