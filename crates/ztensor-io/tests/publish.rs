//! Files are published atomically: an unfinished or failed writer leaves the target as it was.

use ztensor_format::{DType, Version};
use ztensor_io::{FileWriter, Reader, WriteOptions};
use ztensor_testkit::scratch;

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
    let d = scratch("io-publish");
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
}

#[test]
fn a_failed_finish_leaves_the_target() {
    let d = scratch("io-failed");
    let target = d.join("model.zt");
    std::fs::write(&target, b"previous content").unwrap();
    let mut w = FileWriter::create(&target, Version::V1_2).unwrap();
    // A name longer than the default limit is refused when it is added.
    let long = "n".repeat(70_000);
    let err = w.add_dense(&long, &[1], DType::U8, &[1], &WriteOptions::raw()).unwrap_err();
    assert_eq!(err.rule(), Some(ztensor_format::ErrorKind::NameTooLong));
    w.add_dense("kept", &[1], DType::U8, &[1], &WriteOptions::raw()).unwrap();
    // File attributes that repeat a key are refused before they reach the writer.
    let twice = ztensor_format::Value::Map(vec![
        ("k".into(), ztensor_format::Value::from(1u64)),
        ("k".into(), ztensor_format::Value::from(2u64)),
    ]);
    let err = ztensor_format::Attributes::try_from(twice).unwrap_err();
    assert_eq!(err.kind(), ztensor_format::ErrorKind::CborDuplicateKey);
    // A temporary file that someone removes makes the publish fail, at finish.
    for entry in std::fs::read_dir(&d).unwrap() {
        let path = entry.unwrap().path();
        if path != target {
            std::fs::remove_file(path).unwrap();
        }
    }
    let err = w.finish().unwrap_err();
    assert!(err.to_string().contains("model.zt"), "{err}");
    assert_eq!(std::fs::read(&target).unwrap(), b"previous content");
    assert_eq!(entries(&d), ["model.zt"]);
}

#[test]
fn duplicate_names_are_refused() {
    let d = scratch("io-dup");
    let mut w = FileWriter::create(d.join("x.zt"), Version::V1_1).unwrap();
    w.add_dense("w", &[1], DType::U8, &[1], &WriteOptions::raw()).unwrap();
    let err = w.add_dense("w", &[1], DType::U8, &[1], &WriteOptions::raw()).unwrap_err();
    assert_eq!(err.rule(), Some(ztensor_format::ErrorKind::DuplicateName));
    drop(w);
}

#[test]
fn file_output_equals_memory_output_with_padding_left_as_holes() {
    // A file writer skips over the padding between blobs (a new file reads as zeros there)
    // instead of writing it: the bytes must be those an in-memory writer produces, zeros
    // included, over an existing file's old contents too.
    let d = scratch("io-holes");
    let target = d.join("padded.zt");
    std::fs::write(&target, vec![0xff; 4096]).unwrap();
    for version in [Version::V0_1, Version::V1_1, Version::V1_2] {
        let mut memory = ztensor_io::Writer::new(Vec::new(), version).unwrap();
        let mut file = FileWriter::create(&target, version).unwrap();
        for (i, len) in [1usize, 63, 65, 200, 7].into_iter().enumerate() {
            let data: Vec<u8> = (0..len).map(|b| (b * 7 + i) as u8 | 1).collect();
            let name = format!("t{i}");
            let options = if i % 2 == 0 { WriteOptions::raw() } else { WriteOptions::zstd(3) };
            memory.add_dense(&name, &[len as u64], DType::U8, &data, &options).unwrap();
            file.add_dense(&name, &[len as u64], DType::U8, &data, &options).unwrap();
        }
        let (expected, _) = memory.finish().unwrap();
        file.finish().unwrap();
        let written = std::fs::read(&target).unwrap();
        assert_eq!(written, expected, "{version:?}");
        // The padding really was there to skip.
        assert!(written.windows(8).any(|w| w == [0; 8]), "{version:?}");
    }
}

/// Anyone who can read a file can lock it: a reader waits at most `READER_PATIENCE` for a
/// lock held without a journal, then reads the file as it stands and lists it as read without
/// the lock. Only writers wait.
#[test]
fn a_reader_is_never_held_hostage_by_a_lock() {
    let d = scratch("io-hostage");
    let target = d.join("model.zt");
    let mut w = FileWriter::create(&target, Version::V1_2).unwrap();
    w.add_dense("w", &[4], DType::U8, &[1, 2, 3, 4], &WriteOptions::raw()).unwrap();
    w.finish().unwrap();
    // Another open file description holds the lock, as another user's `flock -x` would.
    let holder = std::fs::File::open(&target).unwrap();
    holder.lock().unwrap();
    let _ = ztensor_io::read_without_lock();
    let started = std::time::Instant::now();
    let reader = Reader::open(&target).unwrap();
    let waited = started.elapsed();
    assert!(waited >= ztensor_io::READER_PATIENCE, "{waited:?}");
    assert!(waited < ztensor_io::READER_PATIENCE * 5, "{waited:?}");
    let data = reader.object("w").unwrap().component(ztensor_io::role::DATA).unwrap();
    assert_eq!(&*data.decoded().unwrap(), &[1, 2, 3, 4]);
    assert_eq!(ztensor_io::read_without_lock(), std::slice::from_ref(&target));
    // Unlocked, nothing is waited for or listed.
    holder.unlock().unwrap();
    Reader::open(&target).unwrap();
    assert!(ztensor_io::read_without_lock().is_empty());
}
