//! Appends cut at every byte, by a death or a full disk, with appended data that ends in a valid
//! manifest and trailer of its own: the file is always exactly its old self or exactly the new
//! one, never a third file.

use std::path::{Path, PathBuf};

use ztensor_format::{DType, DigestAlgorithm, Options, Value, Version};

use super::*;
use crate::{FileWriter, WriteOptions};

fn base_file(path: &Path) -> Vec<u8> {
    let mut w = FileWriter::create(path, Version::V1_2).unwrap();
    w.set_attributes(
        ztensor_format::Attributes::try_from(Value::Map(vec![(
            Value::Text("owner".into()),
            Value::Text("us".into()),
        )]))
        .unwrap(),
    )
    .unwrap();
    w.add_dense("a", &[3], DType::U16, &[1, 0, 2, 0, 3, 0], &WriteOptions::raw()).unwrap();
    let zstd = WriteOptions::zstd(3).with_digest(DigestAlgorithm::Crc32c);
    w.add_dense("b", &[100], DType::U8, &[9; 100], &zstd).unwrap();
    w.finish().unwrap();
    std::fs::read(path).unwrap()
}

/// A manifest and trailer that, ending a file whose first bytes are `base`, make a valid file:
/// the old blobs under an attacker's names and attributes.
fn forged_tail(base: &[u8]) -> Vec<u8> {
    let reader = Reader::new(base, &Options::default()).unwrap();
    let mut manifest = reader.manifest().manifest().clone();
    for object in &mut manifest.objects {
        object.name = format!("evil.{}", object.name);
    }
    manifest.attributes = Some(
        ztensor_format::Attributes::try_from(Value::Map(vec![(
            Value::Text("owner".into()),
            Value::Text("attacker".into()),
        )]))
        .unwrap(),
    );
    let mut tail = manifest.encode().unwrap();
    tail.extend(Container::V1.encode_trailer(tail.len() as u64));
    tail
}

fn names<S: ReadAt>(r: &Reader<S>) -> Vec<String> {
    let mut v: Vec<String> = r.manifest().objects().map(|o| o.name().to_owned()).collect();
    v.sort();
    v
}

fn owner<S: ReadAt>(r: &Reader<S>) -> Option<Value> {
    r.manifest().manifest().attributes.as_ref()?.get("owner").map(|v| v.to_value())
}

/// Runs the append of "c" (zstd) and "payload" (raw, ending in a forged manifest) with `fault`.
fn run_append(path: &Path, payload: &[u8], fault: Option<Fault>) -> Result<u64> {
    let mut a = Appender::open(path, &Options::default(), true, fault)?;
    a.add_dense("c", &[300], DType::U8, &[7; 300], &WriteOptions::zstd(1))?;
    a.add_dense("payload", &[payload.len() as u64], DType::U8, payload, &WriteOptions::raw())?;
    a.finish()
}

fn journal_of(path: &Path) -> PathBuf {
    Journal::path_for(path).unwrap()
}

fn assert_old(path: &Path, base: &[u8], context: &str) {
    let r = Reader::open(path).unwrap_or_else(|e| panic!("{context}: {e}"));
    assert_eq!(names(&r), ["a", "b"], "{context}");
    assert_eq!(owner(&r), Some(Value::Text("us".into())), "{context}");
    assert_eq!(r.source().len(), base.len() as u64, "{context}");
    r.component("b", "data").and_then(|c| c.verify()).unwrap();
}

#[test]
fn the_forged_payload_would_be_adopted_without_the_journal() {
    // The honest check that the payload is dangerous: the torn file that ends with it opens,
    // as someone else's file, when nothing says where the append began.
    let d = ztensor_testkit::scratch("io-unit-forged");
    let path = d.join("m.zt");
    let base = base_file(&path);
    let payload = forged_tail(&base);
    run_append(&path, &payload, None).unwrap();
    let full = std::fs::read(&path).unwrap();
    let at = full.windows(payload.len()).position(|w| w == payload).unwrap();
    let torn = &full[..at + payload.len()];
    let r = Reader::new(torn, &Options::default()).unwrap();
    assert_eq!(names(&r), ["evil.a", "evil.b"]);
    assert_eq!(owner(&r), Some(Value::Text("attacker".into())));
}

#[test]
fn a_death_at_every_byte_leaves_the_old_file_and_repair_restores_its_bytes() {
    let d = ztensor_testkit::scratch("io-unit-death");
    let path = d.join("m.zt");
    let base = base_file(&path);
    let payload = forged_tail(&base);
    run_append(&path, &payload, None).unwrap();
    let full = std::fs::read(&path).unwrap();
    assert!(!journal_of(&path).exists());

    for cut in base.len() as u64..=full.len() as u64 {
        let context = format!("death at byte {cut} of {}", full.len());
        std::fs::write(&path, &base).unwrap();
        let err = run_append(&path, &payload, Some(Fault::Death(cut))).unwrap_err();
        assert!(matches!(err.kind(), crate::ErrorKind::Io { .. }), "{context}: {err}");
        // What a killed process leaves: the bytes it wrote, and its journal.
        let left = std::fs::read(&path).unwrap();
        assert_eq!(left[..], full[..usize::try_from(cut).unwrap()], "{context}");
        assert!(journal_of(&path).exists(), "{context}");
        // Read directly, the file is its old self.
        assert_old(&path, &base, &context);
        // Repair truncates it back to exactly its old bytes, and says what it dropped.
        let outcome = repair(&path, &Options::default()).unwrap();
        assert_eq!(
            outcome,
            Repair::Restored(Recovered {
                end: base.len() as u64,
                discarded: cut - base.len() as u64,
                pid: Some(std::process::id()),
            }),
            "{context}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), base, "{context}");
        assert!(!journal_of(&path).exists(), "{context}");
        assert_eq!(repair(&path, &Options::default()).unwrap(), Repair::Sound, "{context}");
    }

    eprintln!("deaths: {} cut points, every one old-or-new", full.len() - base.len() + 1);
    // A death between the trailer and the commit also leaves the old file; the next append
    // undoes it before doing its own work.
    std::fs::write(&path, &base).unwrap();
    run_append(&path, &payload, Some(Fault::Death(full.len() as u64))).unwrap_err();
    assert_eq!(std::fs::read(&path).unwrap(), full);
    assert_old(&path, &base, "after the trailer");
    run_append(&path, &payload, None).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), full);
    let r = Reader::open(&path).unwrap();
    assert_eq!(names(&r), ["a", "b", "c", "payload"]);
    assert_eq!(owner(&r), Some(Value::Text("us".into())));
}

#[test]
fn a_full_disk_at_every_byte_leaves_exactly_the_old_bytes() {
    let d = ztensor_testkit::scratch("io-unit-nospace");
    let path = d.join("m.zt");
    let base = base_file(&path);
    let payload = forged_tail(&base);
    run_append(&path, &payload, None).unwrap();
    let full_len = std::fs::metadata(&path).unwrap().len();

    for at in base.len() as u64..full_len {
        let context = format!("disk full at byte {at} of {full_len}");
        std::fs::write(&path, &base).unwrap();
        let err = run_append(&path, &payload, Some(Fault::NoSpace(at))).unwrap_err();
        let crate::ErrorKind::Io { source, .. } = err.kind() else { panic!("{context}: {err}") };
        assert_eq!(source.raw_os_error(), Some(28), "{context}: {err}");
        // Undone at once, by truncation: no journal, no byte more or less than before.
        assert_eq!(std::fs::read(&path).unwrap(), base, "{context}");
        assert!(!journal_of(&path).exists(), "{context}");
        assert_old(&path, &base, &context);
    }
    eprintln!("full disk: {} cut points, every one old", full_len - base.len() as u64);
}

#[test]
fn a_large_append_cut_at_every_page_boundary() {
    // Full disks and deaths come at block boundaries too: a 40 KiB payload, every 4 KiB.
    let d = ztensor_testkit::scratch("io-unit-pages");
    let path = d.join("m.zt");
    let base = base_file(&path);
    let mut payload: Vec<u8> = (0..40_000u32).map(|i| (i * 7 % 251) as u8).collect();
    payload.extend(forged_tail(&base));
    run_append(&path, &payload, None).unwrap();
    let full = std::fs::read(&path).unwrap();
    let first_page = base.len() as u64 / 4096 + 1;
    let pages: Vec<u64> =
        (first_page..).map(|p| p * 4096).take_while(|&o| o < full.len() as u64).collect();
    assert!(pages.len() >= 9, "{}", pages.len());
    eprintln!("pages: {} page boundaries x 2 faults", pages.len());
    for &at in &pages {
        for fault in [Fault::NoSpace(at), Fault::Death(at)] {
            let context = format!("{fault:?}");
            std::fs::write(&path, &base).unwrap();
            run_append(&path, &payload, Some(fault)).unwrap_err();
            assert_old(&path, &base, &context);
            repair(&path, &Options::default()).unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), base, "{context}");
        }
    }
}

#[test]
fn abandoning_rolls_back_an_append_and_stops_its_writes() {
    // What `interrupt` does to every append of the process (tested on real signals by the
    // tool's tests; calling it here would reach the appends of tests running beside this one).
    let d = ztensor_testkit::scratch("io-unit-interrupt");
    let path = d.join("m.zt");
    let base = base_file(&path);
    let mut a = append(&path, &Options::default()).unwrap();
    a.add_dense("c", &[2_000_000], DType::U8, &vec![1; 2_000_000], &WriteOptions::raw()).unwrap();
    assert!(std::fs::metadata(&path).unwrap().len() > base.len() as u64);
    a.shared.abandon();
    assert_eq!(std::fs::read(&path).unwrap(), base);
    assert!(!journal_of(&path).exists());
    let err = a.add_dense("d", &[1], DType::U8, &[1], &WriteOptions::raw());
    let finished = err.and_then(|()| a.finish());
    assert!(finished.is_err());
    assert_eq!(std::fs::read(&path).unwrap(), base);
}

#[test]
fn a_reader_in_the_appending_process_sees_the_old_file_until_the_commit() {
    let d = ztensor_testkit::scratch("io-unit-same-process");
    let path = d.join("m.zt");
    let base = base_file(&path);
    let mut a = append(&path, &Options::default()).unwrap();
    a.add_dense("c", &[2_000_000], DType::U8, &vec![1; 2_000_000], &WriteOptions::raw()).unwrap();
    assert_old(&path, &base, "while appending");
    a.finish().unwrap();
    assert_eq!(names(&Reader::open(&path).unwrap()), ["a", "b", "c"]);
}

#[test]
fn a_second_append_in_the_same_process_is_refused_while_the_first_runs() {
    let d = ztensor_testkit::scratch("io-unit-twice");
    let path = d.join("m.zt");
    base_file(&path);
    let a = append(&path, &Options::default()).unwrap();
    let err = try_append(&path, &Options::default()).unwrap_err();
    assert!(matches!(err.kind(), crate::ErrorKind::Busy { .. }), "{err}");
    let err = append(&path, &Options::default()).unwrap_err();
    assert!(matches!(err.kind(), crate::ErrorKind::Busy { .. }), "{err}");
    drop(a);
    append(&path, &Options::default()).unwrap().finish().unwrap();
}

#[test]
fn a_torn_file_without_a_journal_is_refused_and_salvaged_only_on_request() {
    let d = ztensor_testkit::scratch("io-unit-scan");
    let path = d.join("m.zt");
    let base = base_file(&path);
    run_append(&path, b"plain bytes", None).unwrap();
    let full = std::fs::read(&path).unwrap();
    std::fs::write(&path, &full[..full.len() - 3]).unwrap();
    let err = repair(&path, &Options::default()).unwrap_err();
    assert!(err.rule().is_some(), "{err}");
    assert_eq!(std::fs::read(&path).unwrap().len(), full.len() - 3);
    let outcome = repair_by_scan(&path, &Options::default()).unwrap();
    assert!(matches!(outcome, Repair::Restored(Recovered { end, .. }) if end == base.len() as u64));
    assert_eq!(std::fs::read(&path).unwrap(), base);
}

#[test]
fn a_rewrite_in_place_after_a_killed_append_reads_the_old_file_not_the_forged_one() {
    let d = ztensor_testkit::scratch("io-unit-rewrite-after-death");
    let path = d.join("m.zt");
    let base = base_file(&path);
    let payload = forged_tail(&base);
    run_append(&path, &payload, None).unwrap();
    let full = std::fs::read(&path).unwrap();
    let at = full.windows(payload.len()).position(|w| w == payload).unwrap();
    // Killed right after the payload: the file ends with a valid, forged manifest.
    std::fs::write(&path, &base).unwrap();
    let cut = (at + payload.len()) as u64;
    run_append(&path, &payload, Some(Fault::Death(cut))).unwrap_err();
    assert!(journal_of(&path).exists());
    // This process holds the lock for the whole rewrite; its read must still use the journal.
    crate::remove_objects(&path, &path, &["a"], &Options::default()).unwrap();
    let r = Reader::open(&path).unwrap();
    assert_eq!(names(&r), ["b"]);
    assert_eq!(owner(&r), Some(Value::Text("us".into())));
    assert!(!journal_of(&path).exists());
}

#[test]
fn publishing_over_a_file_this_process_appends_to_is_refused() {
    let d = ztensor_testkit::scratch("io-unit-publish-over-append");
    let path = d.join("m.zt");
    let base = base_file(&path);
    let mut a = append(&path, &Options::default()).unwrap();
    a.add_dense("c", &[1], DType::U8, &[1], &WriteOptions::raw()).unwrap();
    let mut w = FileWriter::create(&path, Version::V1_2).unwrap();
    w.add_dense("x", &[1], DType::U8, &[1], &WriteOptions::raw()).unwrap();
    let err = w.finish().unwrap_err();
    assert!(matches!(err.kind(), crate::ErrorKind::Busy { .. }), "{err}");
    assert_eq!(std::fs::read(&path).unwrap()[..base.len()], base[..]);
    a.finish().unwrap();
    assert_eq!(names(&Reader::open(&path).unwrap()), ["a", "b", "c"]);
}
