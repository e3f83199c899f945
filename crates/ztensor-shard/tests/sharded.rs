//! Sharded output: one process and unit-by-unit runs agree byte for byte, plans are
//! deterministic, and indexes that disagree with their shards are refused.

use std::path::{Path, PathBuf};

use ztensor_format::{DType, Options, Version};
use ztensor_io::{FileWriter, Reader, TensorSource, WriteOptions};
use ztensor_par::ParOptions;
use ztensor_shard::{ErrorKind, Outcome, Plan, PlanOptions, ShardIndex, ShardedZt, Split};

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ztensor-shard-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A zTensor file of `n` tensors of 1-4 KiB (sizes vary), and its path.
fn input(dir: &Path, n: usize) -> PathBuf {
    let path = dir.join("model.zt");
    let mut w = FileWriter::create(&path, Version::V1_2).unwrap();
    w.set_attributes(ztensor_format::Value::Map(vec![(
        ztensor_format::Value::Text("format".into()),
        ztensor_format::Value::Text("pt".into()),
    )]))
    .unwrap();
    for i in 0..n {
        let len = 256 * (1 + i % 4);
        let data: Vec<u8> = (0..len * 4).map(|b| (b * 31 + i * 7) as u8).collect();
        w.add_dense(
            &format!("layer.{i:02}.weight"),
            &[len as u64],
            DType::F32,
            &data,
            &WriteOptions::raw(),
        )
        .unwrap();
    }
    w.finish().unwrap();
    path
}

fn options() -> PlanOptions {
    PlanOptions::new(
        Version::V1_2,
        &WriteOptions::zstd(3).with_digest(ztensor_format::DigestAlgorithm::Sha256),
    )
}

fn open(path: &Path) -> Reader<ztensor_io::FileSource> {
    Reader::open(path).unwrap()
}

fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap())
        })
        .collect();
    v.sort();
    v
}

#[test]
fn units_run_in_any_order_equal_one_process() {
    let d = scratch("units");
    let path = input(&d, 12);
    let reader = open(&path);
    let par = ParOptions::with_threads(2);
    let one = ztensor_shard::plan(
        &path,
        &reader,
        &d.join("one"),
        options(),
        Split::Size(6 << 10),
        &|_| false,
    )
    .unwrap();
    assert!(one.units.len() >= 3, "{}", one.units.len());
    ztensor_shard::write_all(&one, &reader, &par, &()).unwrap();

    let plan = ztensor_shard::plan(
        &path,
        &reader,
        &d.join("many"),
        options(),
        Split::Size(6 << 10),
        &|_| false,
    )
    .unwrap();
    // Nothing written yet: finalize names every unit.
    let e = ztensor_shard::finalize(&plan, false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Incomplete);
    // Units in reverse order, one of them twice (the second is verified and skipped).
    for unit in (0..plan.units.len()).rev() {
        let outcome = ztensor_shard::run_unit(&plan, unit, &reader, &par, &()).unwrap();
        assert!(matches!(outcome, Outcome::Written(_)));
    }
    let again =
        ztensor_shard::run_unit(&plan, 0, &reader, &ParOptions::with_threads(1), &()).unwrap();
    assert!(matches!(again, Outcome::AlreadyDone(_)));
    ztensor_shard::finalize(&plan, true).unwrap();
    assert_eq!(files(&d.join("one")), files(&d.join("many")));

    // The result reads back as one source, with every object and the file attributes.
    let index = d.join("many").join(&plan.index);
    let sharded = ShardedZt::open(&index, &Options::default()).unwrap();
    assert_eq!(sharded.len(), 12);
    assert_eq!(sharded.attributes(), reader.attributes());
    sharded.verify_digests().unwrap();
    for i in 0..reader.len() {
        let name = reader.name(i).unwrap();
        let j = sharded.find(&name).unwrap();
        assert_eq!(sharded.read(j).unwrap().components, reader.read(i).unwrap().components);
    }
}

#[test]
fn plans_are_deterministic_and_split_as_asked() {
    let d = scratch("plans");
    let path = input(&d, 9);
    let reader = open(&path);
    let a = ztensor_shard::plan(
        &path,
        &reader,
        &d.join("out/"),
        options(),
        Split::Size(4 << 10),
        &|_| false,
    )
    .unwrap();
    let b = ztensor_shard::plan(
        &path,
        &reader,
        &d.join("out"),
        options(),
        Split::Size(4 << 10),
        &|_| false,
    )
    .unwrap();
    assert_eq!(a.to_json(), b.to_json());
    // Sizes 1, 2, 3, 4 KiB repeating: greedy shards of at most 4 KiB.
    let sizes: Vec<u64> = a.units.iter().map(|u| u.bytes).collect();
    assert!(sizes.iter().all(|&s| s <= 4 << 10), "{sizes:?}");
    assert_eq!(sizes.iter().sum::<u64>(), (1 + 2 + 3 + 4 + 1 + 2 + 3 + 4 + 1) << 10);
    assert_eq!(a.units[0].shard, format!("model-00001-of-{:05}.zt", a.units.len()));
    assert_eq!(a.index, "model.zt.index.json");
    // One shard per input shard, and exclusions.
    let whole =
        ztensor_shard::plan(&path, &reader, &d.join("out"), options(), Split::LikeInput, &|n| {
            n.starts_with("layer.00")
        })
        .unwrap();
    assert_eq!(whole.units.len(), 1);
    assert_eq!(whole.units[0].shard, "model.zt");
    assert_eq!(whole.units[0].objects.len(), 8);
    // The plan file round-trips, and its digest ties receipts to it.
    let file = d.join("plan.json");
    std::fs::write(&file, a.to_json()).unwrap();
    let read = Plan::read(&file).unwrap();
    assert_eq!(read, a);
    assert_eq!(read.digest(), a.digest());
}

#[test]
fn a_changed_input_or_another_plans_receipt_is_not_trusted() {
    let d = scratch("stale");
    let path = input(&d, 4);
    let reader = open(&path);
    let par = ParOptions::with_threads(1);
    let plan = ztensor_shard::plan(
        &path,
        &reader,
        &d.join("out"),
        options(),
        Split::Size(2 << 10),
        &|_| false,
    )
    .unwrap();
    ztensor_shard::run_unit(&plan, 0, &reader, &par, &()).unwrap();
    // Another plan (another compression) finds unit 0's receipt foreign and runs it again.
    let mut other = plan.clone();
    other.options.compression = "zstd-1".into();
    assert_ne!(other.digest(), plan.digest());
    let outcome = ztensor_shard::run_unit(&other, 0, &reader, &par, &()).unwrap();
    assert!(matches!(outcome, Outcome::Written(_)));
    // Unit 0's shard now belongs to the other plan: the first plan's finalize refuses it.
    for u in 1..plan.units.len() {
        ztensor_shard::run_unit(&plan, u, &reader, &par, &()).unwrap();
    }
    let e = ztensor_shard::finalize(&plan, false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Incomplete);
    assert!(e.message().contains(": 0"), "{e}");
    // The input grows: units refuse to run.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(&[0; 8]);
    std::fs::write(&path, bytes).unwrap();
    std::fs::remove_file(plan.receipt_path(1)).unwrap();
    let e = ztensor_shard::run_unit(&plan, 1, &reader, &par, &()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Stale);
    // A unit past the end is named.
    let e = ztensor_shard::run_unit(&plan, 99, &reader, &par, &()).unwrap_err();
    assert!(e.message().contains("no unit 99"), "{e}");
}

fn sharded_checkpoint(d: &Path) -> PathBuf {
    let path = input(d, 6);
    let reader = open(&path);
    let plan = ztensor_shard::plan(
        &path,
        &reader,
        &d.join("ckpt"),
        options(),
        Split::Size(3 << 10),
        &|_| false,
    )
    .unwrap();
    ztensor_shard::write_all(&plan, &reader, &ParOptions::with_threads(1), &()).unwrap();
    d.join("ckpt").join(plan.index)
}

#[test]
fn indexes_that_disagree_with_their_shards_are_refused() {
    let d = scratch("refuse");
    let index_path = sharded_checkpoint(&d);
    let good = std::fs::read_to_string(&index_path).unwrap();
    let index = ShardIndex::read(&index_path).unwrap();
    let first = index.shards.keys().next().unwrap().clone();
    let second = index.shards.keys().nth(1).unwrap().clone();
    let cases: Vec<(&str, String, ErrorKind)> = vec![
        (
            "a shard with a directory part",
            good.replace(&format!("\"{first}\": {{"), &format!("\"../{first}\": {{")),
            ErrorKind::Malformed,
        ),
        (
            "a tensor listed twice",
            good.replacen(
                "\"weight_map\": {",
                "\"weight_map\": {\n    \"layer.00.weight\": \"X\",",
                1,
            ),
            ErrorKind::Malformed,
        ),
        (
            "a tensor in the wrong shard",
            good.replacen(
                &format!("\"layer.00.weight\": \"{first}\""),
                &format!("\"layer.00.weight\": \"{second}\""),
                1,
            ),
            ErrorKind::IndexMismatch,
        ),
        (
            "a tensor not listed",
            good.replacen(&format!("\"layer.00.weight\": \"{first}\",\n"), "", 1),
            ErrorKind::IndexMismatch,
        ),
        (
            "a shard of another size",
            good.replacen("\"size\": ", "\"size\": 1", 1),
            ErrorKind::IndexMismatch,
        ),
        ("not JSON", "{".into(), ErrorKind::Malformed),
    ];
    for (what, text, kind) in cases {
        assert_ne!(text, good, "{what}: the case changed nothing");
        std::fs::write(&index_path, &text).unwrap();
        let e = ShardedZt::open(&index_path, &Options::default()).unwrap_err();
        assert_eq!(e.kind(), kind, "{what}: {e}");
    }
    // A shard changed in place, same size: only the digest tells.
    std::fs::write(&index_path, &good).unwrap();
    let shard = index_path.parent().unwrap().join(&first);
    let mut bytes = std::fs::read(&shard).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 1;
    std::fs::write(&shard, bytes).unwrap();
    let opened = ShardedZt::open(&index_path, &Options::default());
    let e = match opened {
        Ok(c) => c.verify_digests().unwrap_err(),
        Err(e) => e,
    };
    assert!(matches!(e.kind(), ErrorKind::IndexMismatch | ErrorKind::ZTensor), "{e}");
    // A missing shard is named.
    std::fs::remove_file(&shard).unwrap();
    let e = ShardedZt::open(&index_path, &Options::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io);
    assert!(e.to_string().contains(&first), "{e}");
}
