//! Files are published atomically: an unfinished or failed writer leaves the target as it was.

use ztensor_format::{DType, Version};
use ztensor_io::{FileWriter, Reader, WriteOptions};

fn dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("ztensor-io-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn entries(d: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn finish_publishes_and_drop_leaves_nothing() {
    let d = dir("publish");
    let target = d.join("model.zt");
    std::fs::write(&target, b"previous content").unwrap();

    let mut w = FileWriter::create(&target, Version::V1_2).unwrap();
    w.add_dense("w", &[4], DType::U8, &[1, 2, 3, 4], &WriteOptions::raw()).unwrap();
    drop(w);
    assert_eq!(std::fs::read(&target).unwrap(), b"previous content");
    assert_eq!(entries(&d), ["model.zt"]);

    let mut w = FileWriter::create(&target, Version::V1_2).unwrap();
    w.add_dense("w", &[4], DType::U8, &[1, 2, 3, 4], &WriteOptions::raw()).unwrap();
    let len = w.finish().unwrap();
    assert_eq!(std::fs::metadata(&target).unwrap().len(), len);
    assert_eq!(
        Reader::open(&target)
            .unwrap()
            .component("w", "data")
            .and_then(|c| c.read_as::<u8>())
            .unwrap(),
        [1, 2, 3, 4]
    );
    assert_eq!(entries(&d), ["model.zt"]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_failed_finish_leaves_the_target() {
    let d = dir("failed");
    let target = d.join("model.zt");
    std::fs::write(&target, b"previous content").unwrap();
    let mut w = FileWriter::create(&target, Version::V1_2).unwrap();
    // A name longer than the default limit passes add_dense but fails validation at finish.
    let long = "n".repeat(70_000);
    w.add_dense(&long, &[1], DType::U8, &[1], &WriteOptions::raw()).unwrap();
    let err = w.finish().unwrap_err();
    assert_eq!(err.rule(), Some(ztensor_format::ErrorKind::NameTooLong));
    assert_eq!(std::fs::read(&target).unwrap(), b"previous content");
    assert_eq!(entries(&d), ["model.zt"]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn duplicate_names_are_refused() {
    let d = dir("dup");
    let mut w = FileWriter::create(d.join("x.zt"), Version::V1_1).unwrap();
    w.add_dense("w", &[1], DType::U8, &[1], &WriteOptions::raw()).unwrap();
    let err = w.add_dense("w", &[1], DType::U8, &[1], &WriteOptions::raw()).unwrap_err();
    assert_eq!(err.rule(), Some(ztensor_format::ErrorKind::DuplicateName));
    drop(w);
    std::fs::remove_dir_all(&d).unwrap();
}
