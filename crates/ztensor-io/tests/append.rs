//! Append through the public API: old bytes never change, a dropped appender undoes itself,
//! rewrites in place keep committed appends. (Appends cut at every byte are unit tests of the
//! append module, which can inject faults.)

use ztensor_format::{DType, DigestAlgorithm, Options, Version};
use ztensor_io::{FileWriter, Reader, Repair, WriteOptions, append, recover, repair};
use ztensor_testkit::scratch;

fn base_file(path: &std::path::Path, version: Version) {
    let mut w = FileWriter::create(path, version).unwrap();
    w.add_dense("a", &[3], DType::U16, &[1, 0, 2, 0, 3, 0], &WriteOptions::raw()).unwrap();
    w.add_dense(
        "b",
        &[100],
        DType::U8,
        &[9; 100],
        &WriteOptions::zstd(3).with_digest(DigestAlgorithm::Crc32c),
    )
    .unwrap();
    w.finish().unwrap();
}

fn names<S: ztensor_io::ReadAt>(r: &Reader<S>) -> Vec<String> {
    let mut v: Vec<String> = r.manifest().objects().map(|o| o.name().to_owned()).collect();
    v.sort();
    v
}

#[test]
fn append_adds_objects_and_keeps_old_blobs_in_place() {
    for version in [Version::V1_1, Version::V1_2] {
        let d = scratch(&format!("io-append-{version}"));
        let path = d.join("m.zt");
        base_file(&path, version);
        let before = std::fs::read(&path).unwrap();
        let mut a = append(&path, &Options::default()).unwrap();
        a.add_dense("c", &[2], DType::F32, &[0, 0, 128, 63, 0, 0, 0, 64], &WriteOptions::raw())
            .unwrap();
        let err = a.add_dense("a", &[1], DType::U8, &[1], &WriteOptions::raw()).unwrap_err();
        assert_eq!(err.rule(), Some(ztensor_format::ErrorKind::DuplicateName));
        a.finish().unwrap();
        let after = std::fs::read(&path).unwrap();
        assert_eq!(&after[..before.len()], &before[..], "old bytes must not change");
        let r = Reader::open(&path).unwrap();
        assert_eq!(names(&r), ["a", "b", "c"]);
        assert_eq!(r.component("c", "data").and_then(|c| c.read_as::<f32>()).unwrap(), [1.0, 2.0]);
        assert_eq!(r.component("a", "data").and_then(|c| c.read_as::<u16>()).unwrap(), [1, 2, 3]);
        assert_eq!(
            r.manifest().manifest().version_string.as_deref(),
            version.default_version_string()
        );
    }
}

#[test]
fn a_dropped_appender_leaves_exactly_the_old_bytes_and_no_sidecar() {
    let d = scratch("io-dropped");
    let path = d.join("m.zt");
    base_file(&path, Version::V1_2);
    let before = std::fs::read(&path).unwrap();
    let mut a = append(&path, &Options::default()).unwrap();
    a.add_dense("c", &[3_000_000], DType::U8, &vec![5; 3_000_000], &WriteOptions::raw()).unwrap();
    assert!(std::fs::metadata(&path).unwrap().len() > before.len() as u64);
    // While it runs, a reader sees the old file.
    assert_eq!(names(&Reader::open(&path).unwrap()), ["a", "b"]);
    drop(a);
    assert_eq!(std::fs::read(&path).unwrap(), before);
    let leftovers: Vec<_> =
        std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers, [std::ffi::OsString::from("m.zt")]);
    assert_eq!(repair(&path, &Options::default()).unwrap(), Repair::Sound);
}

#[test]
fn a_rewrite_in_place_keeps_what_an_append_committed() {
    let d = scratch("io-rewrite");
    let path = d.join("m.zt");
    base_file(&path, Version::V1_2);
    let mut a = append(&path, &Options::default()).unwrap();
    a.add_dense("c", &[1], DType::U8, &[1], &WriteOptions::raw()).unwrap();
    a.finish().unwrap();
    ztensor_io::remove_objects(&path, &path, &["a"], &Options::default()).unwrap();
    assert_eq!(names(&Reader::open(&path).unwrap()), ["b", "c"]);
}

#[test]
fn v0_1_files_cannot_be_appended_to() {
    let d = scratch("io-append-v0");
    let path = d.join("m.zt");
    base_file(&path, Version::V0_1);
    let err = append(&path, &Options::default()).unwrap_err();
    assert_eq!(err.rule(), Some(ztensor_format::ErrorKind::Unrepresentable));
}

#[test]
fn recovery_gives_up_on_a_file_of_magic_strings() {
    // Header, then 100,000 footer magics and nothing valid: recovery must fail, and quickly.
    let mut file = b"ZTEN1000".to_vec();
    for _ in 0..100_000 {
        file.extend_from_slice(b"ZTEN1000");
    }
    let started = std::time::Instant::now();
    let err = recover(&file[..], &Options::default()).unwrap_err();
    assert!(err.rule().is_some(), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}
