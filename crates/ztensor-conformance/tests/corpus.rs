//! The kept fuzz corpora (`fuzz/corpus/TARGET`, grown by `cargo xtask fuzz-campaign` and
//! replayed by the smoke in CI): one directory per target there is, and within the size the
//! repository keeps for them.

use std::path::PathBuf;

/// What the kept corpora may take in all.
const MAX_CORPORA_BYTES: u64 = 24 << 20;

#[test]
fn the_kept_corpora_are_of_real_targets_and_within_their_size() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        // None kept yet: nothing to hold to its size.
        return;
    };
    let mut total = 0u64;
    for entry in entries {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        assert!(
            ztensor_conformance::fuzz::TARGETS.contains(&name.as_str()),
            "fuzz/corpus/{name} is the corpus of no target"
        );
        for file in std::fs::read_dir(entry.path()).unwrap() {
            let file = file.unwrap();
            assert!(file.file_type().unwrap().is_file(), "{:?}", file.path());
            total += file.metadata().unwrap().len();
        }
    }
    assert!(total <= MAX_CORPORA_BYTES, "the kept corpora take {total} bytes");
}
