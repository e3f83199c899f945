use std::path::PathBuf;

#[test]
fn every_committed_finding_still_passes() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions");
    let mut count = 0;
    for target in std::fs::read_dir(&root).unwrap() {
        let target = target.unwrap().path();
        let name = target.file_name().unwrap().to_string_lossy().into_owned();
        let body = ztensor_conformance::fuzz::body(&name)
            .unwrap_or_else(|| panic!("no fuzz target {name}"));
        for file in std::fs::read_dir(&target).unwrap() {
            body(&std::fs::read(file.unwrap().path()).unwrap());
            count += 1;
        }
    }
    assert!(count > 0, "no regressions under {}", root.display());
}

#[test]
fn every_fuzz_target_file_has_a_body_and_every_body_a_file() {
    // `cargo xtask fuzz-smoke` runs the files of fuzz/fuzz_targets; the bodies live here.
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/fuzz_targets");
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".rs").map(str::to_owned))
        .collect();
    files.sort();
    let mut bodies: Vec<&str> = ztensor_conformance::fuzz::TARGETS.to_vec();
    bodies.sort_unstable();
    assert_eq!(files, bodies);
}

#[test]
fn the_fixtures_run_through_every_body() {
    // The fuzz corpora are seeded from the fixtures; every body must accept them all.
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    for entry in ztensor_conformance::index::read(&root).unwrap() {
        let bytes = std::fs::read(root.join(&entry.file)).unwrap();
        for name in ztensor_conformance::fuzz::TARGETS {
            (ztensor_conformance::fuzz::body(name).unwrap())(&bytes);
        }
    }
    // The DCP checkpoints seed the `dcp` target: their `.metadata` reads, within what the
    // oracle allows, and the oracle sees this binary's heap (it counts here too).
    assert!(ztensor_conformance::heap::counting(), "the test binary counts its heap");
    for dir in ["native", "native-zstd"] {
        let bytes = std::fs::read(root.join("external/dcp").join(dir).join(".metadata")).unwrap();
        ztensor_conformance::fuzz::dcp(&bytes);
        assert!(ztensor_foreign::dcp::read_layout(&bytes).is_ok(), "{dir}");
    }
    // DCP's safetensors shards seed the `dcp_shards` target, framed as it reads them (a count
    // byte, the first file after its length): whole, they are the checkpoint's 4 tensors.
    let dir = root.join("external/dcp/hf-shards");
    let shard = |n: u8| {
        let name = format!("shard-0000{n}-model-00001-of-00001.safetensors");
        (name.clone(), std::fs::read(dir.join(name)).unwrap())
    };
    let (first, second) = (shard(1), shard(2));
    let mut both = vec![1u8];
    both.extend(u16::try_from(first.1.len()).unwrap().to_le_bytes());
    both.extend_from_slice(&first.1);
    both.extend_from_slice(&second.1);
    ztensor_conformance::fuzz::dcp_shards(&both);
    let files = [first, second]
        .into_iter()
        .map(|(name, bytes)| {
            (name, ztensor_foreign::safetensors::SafetensorsFile::new(bytes).unwrap())
        })
        .collect();
    let shards = ztensor_foreign::dcp_shards::DcpShards::new(files).unwrap();
    let whole = ztensor_registry::stitch_dcp_shards(shards).unwrap();
    assert_eq!(ztensor_io::TensorSource::len(&whole), 4);
    let (_, held) =
        ztensor_conformance::heap::peak_during(|| std::hint::black_box(vec![1u8; 8 << 20]).len());
    assert!(held >= 8 << 20, "{held}");
    // A flood of empty dicts as large as the oracle's allowance would take is refused by
    // the machine's budget before it holds more.
    let mut flood = vec![0x80, 2];
    flood.resize(4 << 20, b'}');
    flood.push(b'.');
    let (refused, held) = ztensor_conformance::heap::peak_during(|| {
        ztensor_foreign::dcp::read_layout(&flood).is_err()
    });
    assert!(refused && held <= ztensor_conformance::fuzz::dcp_allowed(flood.len()), "{held}");
    // The zTensor 2 corpus seeds the `ztensor2` target.
    for dir in ["valid", "reject"] {
        for entry in std::fs::read_dir(root.join("external/ztensor2").join(dir)).unwrap() {
            let bytes = std::fs::read(entry.unwrap().path()).unwrap();
            ztensor_conformance::fuzz::ztensor2(&bytes);
        }
    }
}
