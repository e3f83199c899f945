//! Append, cut at every byte: an interrupted append never loses an earlier object, and repair
//! brings the file back without truncating it.

use ztensor_format::{DType, DigestAlgorithm, Options, Version};
use ztensor_io::{FileWriter, Reader, Recovered, Repair, WriteOptions, append, recover, repair};

fn dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("ztensor-io-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

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
        let d = dir(&format!("append-{version}"));
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
        assert_eq!(r.read_as::<f32>("c", "data").unwrap(), [1.0, 2.0]);
        assert_eq!(r.read_as::<u16>("a", "data").unwrap(), [1, 2, 3]);
        assert_eq!(
            r.manifest().manifest().version_string.as_deref(),
            version.default_version_string()
        );
        std::fs::remove_dir_all(&d).unwrap();
    }
}

#[test]
fn every_cut_of_an_append_keeps_the_earlier_objects() {
    let d = dir("cuts");
    let path = d.join("m.zt");
    base_file(&path, Version::V1_2);
    let base = std::fs::read(&path).unwrap();
    let mut a = append(&path, &Options::default()).unwrap();
    a.add_dense("c", &[300], DType::U8, &[7; 300], &WriteOptions::zstd(1)).unwrap();
    a.add_dense("d", &[5], DType::U8, &[1, 2, 3, 4, 5], &WriteOptions::raw()).unwrap();
    a.finish().unwrap();
    let full = std::fs::read(&path).unwrap();
    assert!(full.len() > base.len() + 64);

    for cut in base.len()..=full.len() {
        let torn = &full[..cut];
        let (reader, recovered) =
            recover(torn, &Options::default()).unwrap_or_else(|e| panic!("cut {cut}: {e}"));
        let got = names(&reader);
        if cut == full.len() {
            assert_eq!(got, ["a", "b", "c", "d"]);
            assert_eq!(recovered, Recovered { end: full.len() as u64, discarded: 0 });
        } else {
            assert_eq!(got, ["a", "b"], "cut {cut}");
            assert_eq!(
                recovered,
                Recovered { end: base.len() as u64, discarded: (cut - base.len()) as u64 },
                "cut {cut}"
            );
            assert_eq!(reader.read_as::<u8>("b", "data").unwrap(), [9; 100]);
            assert!(Reader::new(torn, &Options::default()).is_err() || cut == base.len());
        }
    }

    // Repair a file cut in the middle of the new manifest: it opens again, and was not shrunk.
    let cut = full.len() - 20;
    std::fs::write(&path, &full[..cut]).unwrap();
    assert!(Reader::open(&path).is_err());
    let outcome = repair(&path, &Options::default()).unwrap();
    assert_eq!(
        outcome,
        Repair::Restored(Recovered {
            end: base.len() as u64,
            discarded: (cut - base.len()) as u64
        })
    );
    let repaired = std::fs::read(&path).unwrap();
    assert_eq!(&repaired[..cut], &full[..cut]);
    let r = Reader::open(&path).unwrap();
    assert_eq!(names(&r), ["a", "b"]);
    r.verify_digest("b", "data").unwrap();
    assert_eq!(repair(&path, &Options::default()).unwrap(), Repair::Sound);
    // And the repaired file can be appended to again.
    let mut a = append(&path, &Options::default()).unwrap();
    a.add_dense("e", &[1], DType::U8, &[1], &WriteOptions::raw()).unwrap();
    a.finish().unwrap();
    assert_eq!(names(&Reader::open(&path).unwrap()), ["a", "b", "e"]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn v0_1_files_cannot_be_appended_to() {
    let d = dir("append-v0");
    let path = d.join("m.zt");
    base_file(&path, Version::V0_1);
    let err = append(&path, &Options::default()).unwrap_err();
    assert_eq!(err.rule(), Some(ztensor_format::ErrorKind::Unrepresentable));
    std::fs::remove_dir_all(&d).unwrap();
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
