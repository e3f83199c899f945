//! Sharded output: one process and unit-by-unit runs agree byte for byte, plans are
//! deterministic, and indexes that disagree with their shards are refused.

use std::path::{Path, PathBuf};

use ztensor_format::{DType, Options, Version};
use ztensor_io::{FileWriter, Reader, TensorSource, WriteOptions};
use ztensor_par::ParOptions;
use ztensor_shard::{ShardIndex, ShardedZtensor};
use ztensor_shard_write::{Directory, ErrorKind, Outcome, Plan, PlanOptions, Seen, Split};

fn scratch(name: &str) -> ztensor_testkit::Scratch {
    ztensor_testkit::scratch(&format!("shard-{name}"))
}

/// A zTensor file of `n` tensors of 1-4 KiB (sizes vary), and its path.
fn input(dir: &Path, n: usize) -> PathBuf {
    let path = dir.join("model.zt");
    let mut w = FileWriter::create(&path, Version::V1_2).unwrap();
    w.set_attributes(
        ztensor_format::Attributes::try_from(ztensor_format::Value::Map(vec![(
            ztensor_format::Value::Text("format".into()),
            ztensor_format::Value::Text("pt".into()),
        )]))
        .unwrap(),
    )
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

/// The plan of `path`, open as `reader`, into `out`: shards of at most `size` bytes, every
/// object kept, the options of [`options`].
fn planned(path: &Path, reader: &dyn TensorSource, out: &Path, size: u64) -> Plan {
    ztensor_shard_write::plan(path, reader, out, options(), Split::Size(size), &|_| false).unwrap()
}

/// The local directory `plan` writes into.
fn dir(plan: &Plan) -> Directory {
    Directory::new(&plan.output)
}

/// The same, a failed or interrupted write taken back.
fn whole(plan: &Plan) -> Directory {
    dir(plan).all_or_nothing()
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
    let one = planned(&path, &reader, &d.join("one"), 6 << 10);
    assert!(one.units.len() >= 3, "{}", one.units.len());
    ztensor_shard_write::write_all(&one, &reader, &par, &(), &whole(&one)).unwrap();

    let plan = planned(&path, &reader, &d.join("many"), 6 << 10);
    // Nothing written yet: finalize names every unit.
    let e = ztensor_shard_write::finalize(&plan, false, &dir(&plan)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Incomplete);
    // Units in reverse order, one of them twice (the second is verified and skipped).
    for unit in (0..plan.units.len()).rev() {
        let outcome =
            ztensor_shard_write::run_unit(&plan, unit, &reader, &par, &(), &dir(&plan)).unwrap();
        assert!(matches!(outcome, Outcome::Written(_)));
    }
    let again = ztensor_shard_write::run_unit(
        &plan,
        0,
        &reader,
        &ParOptions::with_threads(1),
        &(),
        &dir(&plan),
    )
    .unwrap();
    assert!(matches!(again, Outcome::AlreadyDone(_)));
    ztensor_shard_write::finalize(&plan, true, &dir(&plan)).unwrap();
    assert_eq!(files(&d.join("one")), files(&d.join("many")));

    // The result reads back as one source, with every object and the file attributes.
    let index = d.join("many").join(&plan.index);
    let sharded = ShardedZtensor::open(&index, &Options::default()).unwrap();
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
    let a = planned(&path, &reader, &d.join("out/"), 4 << 10);
    let b = planned(&path, &reader, &d.join("out"), 4 << 10);
    assert_eq!(a.to_json(), b.to_json());
    // Sizes 1, 2, 3, 4 KiB repeating: greedy shards of at most 4 KiB.
    let sizes: Vec<u64> = a.units.iter().map(|u| u.bytes).collect();
    assert!(sizes.iter().all(|&s| s <= 4 << 10), "{sizes:?}");
    assert_eq!(sizes.iter().sum::<u64>(), (1 + 2 + 3 + 4 + 1 + 2 + 3 + 4 + 1) << 10);
    assert_eq!(a.units[0].shard, format!("model-00001-of-{:05}.zt", a.units.len()));
    assert_eq!(a.index, "model.zt.index.json");
    // One shard per input shard, and exclusions.
    let whole = ztensor_shard_write::plan(
        &path,
        &reader,
        &d.join("out"),
        options(),
        Split::LikeInput,
        &|n| n.starts_with("layer.00"),
    )
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
    let plan = planned(&path, &reader, &d.join("out"), 2 << 10);
    ztensor_shard_write::run_unit(&plan, 0, &reader, &par, &(), &dir(&plan)).unwrap();
    // Another plan (another compression) finds unit 0's receipt foreign and runs it again.
    let mut other = plan.clone();
    other.options.compression = "zstd-1".into();
    assert_ne!(other.digest(), plan.digest());
    let outcome =
        ztensor_shard_write::run_unit(&other, 0, &reader, &par, &(), &dir(&other)).unwrap();
    assert!(matches!(outcome, Outcome::Written(_)));
    // Unit 0's shard now belongs to the other plan: the first plan's finalize refuses it.
    for u in 1..plan.units.len() {
        ztensor_shard_write::run_unit(&plan, u, &reader, &par, &(), &dir(&plan)).unwrap();
    }
    let e = ztensor_shard_write::finalize(&plan, false, &dir(&plan)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Incomplete);
    assert!(e.message().contains(": 0"), "{e}");
    // The input grows: units refuse to run.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(&[0; 8]);
    std::fs::write(&path, bytes).unwrap();
    std::fs::remove_file(plan.receipt_path(1)).unwrap();
    let e = ztensor_shard_write::run_unit(&plan, 1, &reader, &par, &(), &dir(&plan)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Stale);
    // A unit past the end is named.
    let e = ztensor_shard_write::run_unit(&plan, 99, &reader, &par, &(), &dir(&plan)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoSuchUnit);
    assert!(e.message().contains("no unit 99"), "{e}");
}

fn sharded_checkpoint(d: &Path) -> PathBuf {
    let path = input(d, 6);
    let reader = open(&path);
    let plan = planned(&path, &reader, &d.join("ckpt"), 3 << 10);
    ztensor_shard_write::write_all(
        &plan,
        &reader,
        &ParOptions::with_threads(1),
        &(),
        &whole(&plan),
    )
    .unwrap();
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
        let e = ShardedZtensor::open(&index_path, &Options::default()).unwrap_err();
        assert_eq!(e.kind(), kind, "{what}: {e}");
    }
    // A shard changed in place, same size: only the digest tells.
    std::fs::write(&index_path, &good).unwrap();
    let shard = index_path.parent().unwrap().join(&first);
    let mut bytes = std::fs::read(&shard).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 1;
    std::fs::write(&shard, bytes).unwrap();
    let opened = ShardedZtensor::open(&index_path, &Options::default());
    let e = match opened {
        Ok(c) => c.verify_digests().unwrap_err(),
        Err(e) => e,
    };
    assert!(matches!(e.kind(), ErrorKind::IndexMismatch | ErrorKind::ZTensor), "{e}");
    // A missing shard is named.
    std::fs::remove_file(&shard).unwrap();
    let e = ShardedZtensor::open(&index_path, &Options::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io);
    assert!(e.to_string().contains(&first), "{e}");
}

/// Names the tool chooses inside an output directory are never written or read through a
/// link someone planted there: the link is refused, naming it, and its target is untouched.
#[cfg(unix)]
#[test]
fn planted_links_in_the_output_directory_are_refused() {
    use std::os::unix::fs::symlink;
    let d = scratch("planted");
    let path = input(&d, 4);
    let reader = open(&path);
    let par = ParOptions::with_threads(1);
    let victim = d.join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let elsewhere = d.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let plan_in = |out: &str| planned(&path, &reader, &d.join(out), 3 << 10);
    let refused = |e: ztensor_shard_write::Error, name: &str| {
        let text = e.to_string();
        assert!(text.contains("symbolic link") && text.contains(name), "{text}");
    };

    // A shard's name.
    let plan = plan_in("a");
    std::fs::create_dir_all(&plan.output).unwrap();
    let shard = plan.units[0].shard.clone();
    symlink(&victim, plan.output.join(&shard)).unwrap();
    refused(
        ztensor_shard_write::write_all(&plan, &reader, &par, &(), &whole(&plan)).unwrap_err(),
        &shard,
    );
    refused(
        ztensor_shard_write::run_unit(&plan, 0, &reader, &par, &(), &dir(&plan)).unwrap_err(),
        &shard,
    );

    // The receipts directory.
    let plan = plan_in("b");
    std::fs::create_dir_all(&plan.output).unwrap();
    symlink(&elsewhere, plan.output.join(ztensor_shard_write::RECEIPTS_DIR)).unwrap();
    refused(
        ztensor_shard_write::run_unit(&plan, 0, &reader, &par, &(), &dir(&plan)).unwrap_err(),
        ztensor_shard_write::RECEIPTS_DIR,
    );
    refused(
        ztensor_shard_write::finalize(&plan, false, &dir(&plan)).unwrap_err(),
        ztensor_shard_write::RECEIPTS_DIR,
    );

    // A receipt.
    let plan = plan_in("c");
    let receipt = plan.receipt_path(1);
    std::fs::create_dir_all(receipt.parent().unwrap()).unwrap();
    symlink(&victim, &receipt).unwrap();
    ztensor_shard_write::run_unit(&plan, 0, &reader, &par, &(), &dir(&plan)).unwrap();
    refused(
        ztensor_shard_write::run_unit(&plan, 1, &reader, &par, &(), &dir(&plan)).unwrap_err(),
        "unit-00001",
    );
    refused(ztensor_shard_write::finalize(&plan, false, &dir(&plan)).unwrap_err(), "unit-00001");

    // The index.
    let plan = plan_in("e");
    symlink(&victim, plan.output.join(&plan.index)).unwrap_or_else(|_| {
        std::fs::create_dir_all(&plan.output).unwrap();
        symlink(&victim, plan.output.join(&plan.index)).unwrap();
    });
    refused(
        ztensor_shard_write::write_all(&plan, &reader, &par, &(), &whole(&plan)).unwrap_err(),
        &plan.index,
    );

    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
}

/// A FIFO or device where a receipt, plan or index is read is refused without waiting on it
/// or reading it.
#[cfg(unix)]
#[test]
fn special_files_where_plans_indexes_and_receipts_are_read_are_refused() {
    let d = scratch("special");
    let path = input(&d, 4);
    let reader = open(&path);
    let plan = planned(&path, &reader, &d.join("out"), 3 << 10);
    let receipt = plan.receipt_path(0);
    std::fs::create_dir_all(receipt.parent().unwrap()).unwrap();
    let made = std::process::Command::new("mkfifo").arg(&receipt).status().unwrap();
    assert!(made.success());
    let e = ztensor_shard_write::finalize(&plan, false, &dir(&plan)).unwrap_err().to_string();
    assert!(e.contains("unit-00000") && e.contains("FIFO"), "{e}");
    let fifo = d.join("plan.json");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    assert!(Plan::read(&fifo).unwrap_err().to_string().contains("a FIFO"));
    assert!(Plan::read(Path::new("/dev/zero")).unwrap_err().to_string().contains("a device"));
    assert!(ShardIndex::read(Path::new("/dev/zero")).unwrap_err().to_string().contains("a device"));
}

/// `finalize` trusts nothing in the plan it reads: an object in two units, sizes past 2^63 or
/// adding up past u64 are refused as a malformed plan.
#[test]
fn plans_that_disagree_with_themselves_are_refused() {
    let d = scratch("selfcheck");
    let path = input(&d, 4);
    let reader = open(&path);
    let plan = planned(&path, &reader, &d.join("out"), 3 << 10);
    assert!(plan.units.len() >= 2);
    let file = d.join("plan.json");
    let read_back = |p: &Plan| {
        std::fs::write(&file, p.to_json()).unwrap();
        Plan::read(&file)
    };
    assert_eq!(read_back(&plan).unwrap(), plan);

    let mut twice = plan.clone();
    let first = twice.units[0].objects[0].clone();
    twice.units[1].objects.push(first.clone());
    let e = read_back(&twice).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Malformed);
    assert!(e.to_string().contains(&format!("{first:?} is listed in unit 0 and unit 1")), "{e}");

    let mut huge = plan.clone();
    huge.units[0].bytes = 1 << 63;
    assert_eq!(read_back(&huge).unwrap_err().kind(), ErrorKind::Malformed);
    let mut wraps = plan.clone();
    wraps.units[0].bytes = u64::MAX;
    wraps.units[1].bytes = u64::MAX;
    let e = read_back(&wraps).unwrap_err();
    assert!(e.to_string().contains("past 2^63"), "{e}");

    let mut same_shard = plan.clone();
    same_shard.units[1].shard = same_shard.units[0].shard.clone();
    assert_eq!(read_back(&same_shard).unwrap_err().kind(), ErrorKind::Malformed);
}

/// Outputs are compared with inputs by file identity: an index or shard that would replace
/// a file the plan reads is refused at planning, however it is spelled.
#[test]
fn outputs_never_replace_inputs() {
    let d = scratch("overinput");
    let path = input(&d, 6);
    let reader = open(&path);
    let par = ParOptions::with_threads(1);
    // A sharded checkpoint in `src`, converted into its own directory without a tensor: the
    // index would be written over the input index.
    let src = d.join("src");
    let plan = planned(&path, &reader, &src, 3 << 10);
    let index =
        ztensor_shard_write::write_all(&plan, &reader, &par, &(), &whole(&plan)).unwrap().index;
    let index = PathBuf::from(index);
    let before = std::fs::read(&index).unwrap();
    let sharded = ShardedZtensor::open(&index, &Options::default()).unwrap();
    let spelled = src.join(".").join("..").join("src");
    let e = ztensor_shard_write::plan(
        &index,
        &sharded,
        &spelled,
        options(),
        Split::Size(1 << 30),
        &|n| n.starts_with("layer.00"),
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Malformed);
    assert!(e.to_string().contains("is also the input"), "{e}");
    assert_eq!(std::fs::read(&index).unwrap(), before);
}

/// What an output directory holds of checkpoints is found (indexes, the shards they list,
/// receipts and their shards, the plan's own names) and cleared without touching other files;
/// a `write_all` that fails part of the way takes back the shards and directories it made.
#[test]
fn occupied_directories_are_found_cleared_and_failed_writes_taken_back() {
    let d = scratch("occupied");
    let path = input(&d, 12);
    let reader = open(&path);
    let par = ParOptions::with_threads(1);
    let out = d.join("made").join("out");
    let plan_of = |size: u64| planned(&path, &reader, &out, size);
    let first = plan_of(6 << 10);
    assert!(first.occupied().unwrap().is_empty(), "no directory yet");
    ztensor_shard_write::write_all(&first, &reader, &par, &(), &whole(&first)).unwrap();
    std::fs::write(out.join("notes.txt"), b"mine").unwrap();
    // Another split: the first checkpoint is found through its index.
    let second = plan_of(9 << 10);
    let found = second.occupied().unwrap();
    assert_eq!(found.indexes, std::slice::from_ref(&first.index));
    let mut shards: Vec<String> = first.units.iter().map(|u| u.shard.clone()).collect();
    shards.sort();
    assert_eq!(found.shards, shards);
    assert!(found.receipts.is_empty());
    second.clear(&found).unwrap();
    assert_eq!(files(&out), [("notes.txt".to_owned(), b"mine".to_vec())]);

    // A unit run by `run`: its receipt and the shard it names.
    ztensor_shard_write::run_unit(&first, 0, &reader, &par, &(), &dir(&first)).unwrap();
    let found = second.occupied().unwrap();
    assert_eq!(found.receipts, ["unit-00000.json"]);
    assert_eq!(found.shards, std::slice::from_ref(&first.units[0].shard));
    assert!(found.names().contains(&".ztensor-receipts/unit-00000.json".to_owned()));
    second.clear(&found).unwrap();
    assert_eq!(files(&out), [("notes.txt".to_owned(), b"mine".to_vec())]);
    assert!(!out.join(ztensor_shard_write::RECEIPTS_DIR).exists());

    // A source that lacks the last unit's objects: the write fails at that unit, after the
    // others were written, and takes back what it made, directories included.
    std::fs::remove_dir_all(d.join("made")).unwrap();
    let failing = plan_of(6 << 10);
    assert!(failing.units.len() >= 3);
    let last = failing.units.last().unwrap().objects.clone();
    let short = ztensor_io::Excluding::new(&reader, |n| last.iter().any(|o| o == n));
    let e =
        ztensor_shard_write::write_all(&failing, &short, &par, &(), &whole(&failing)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Stale);
    assert!(!d.join("made").exists(), "the directories it made are removed");
    // Into a directory that was there: it holds what it held.
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("notes.txt"), b"mine").unwrap();
    ztensor_shard_write::write_all(&failing, &short, &par, &(), &whole(&failing)).unwrap_err();
    assert_eq!(files(&out), [("notes.txt".to_owned(), b"mine".to_vec())]);
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 1);
}

/// Objects kept in memory, as a bucket keeps them: written, then published (or not); a
/// publish may be made to fail, to see what a failed write leaves.
#[derive(Default)]
struct Bucket {
    objects: std::cell::RefCell<std::collections::BTreeMap<String, Vec<u8>>>,
    /// Publishing the object of this name fails.
    refuse: Option<String>,
    /// When the object of this name is begun, these objects appear first: another writer
    /// finishing meanwhile.
    meanwhile: std::cell::RefCell<Option<(String, Objects)>>,
}

/// Objects by name, with their bytes.
type Objects = Vec<(String, Vec<u8>)>;

/// A bucket's tag of an object's bytes (as an ETag is).
fn tag(bytes: &[u8]) -> String {
    let sum = bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    format!("{}-{sum:016x}", bytes.len())
}

impl ztensor_shard_write::Destination for Bucket {
    type Object = Vec<u8>;

    fn locate(&self, name: &str) -> String {
        format!("mem://bucket/ckpt/{name}")
    }

    fn create(&self, name: &str) -> std::io::Result<Vec<u8>> {
        let arrived = self.meanwhile.borrow_mut().take_if(|(at, _)| at == name);
        if let Some((_, objects)) = arrived {
            self.objects.borrow_mut().extend(objects);
        }
        Ok(Vec::new())
    }

    fn seen(&self, name: &str) -> std::io::Result<Seen> {
        Ok(self.objects.borrow().get(name).map_or(Seen::Nothing, |b| Seen::Object(tag(b))))
    }

    fn publish_if(&self, name: &str, object: Vec<u8>, seen: &Seen) -> std::io::Result<bool> {
        if *seen != self.seen(name)? {
            return Ok(false);
        }
        self.publish(name, object).map(|()| true)
    }

    fn publish(&self, name: &str, object: Vec<u8>) -> std::io::Result<()> {
        if self.refuse.as_deref() == Some(name) {
            return Err(std::io::Error::other("the store said no"));
        }
        self.objects.borrow_mut().insert(name.to_owned(), object);
        Ok(())
    }

    fn remove(&self, name: &str) -> std::io::Result<()> {
        self.objects.borrow_mut().remove(name);
        Ok(())
    }

    fn open(&self, name: &str) -> std::io::Result<Option<Box<dyn ztensor_io::ReadAt>>> {
        let object = self.objects.borrow().get(name).cloned();
        Ok(object.map(|bytes| Box::new(bytes) as Box<dyn ztensor_io::ReadAt>))
    }
}

#[test]
fn of_two_attempts_of_a_unit_racing_the_second_finds_the_first_ones_receipt() {
    let d = scratch("bucket-race");
    let path = input(&d, 12);
    let reader = open(&path);
    let par = ParOptions::with_threads(2);
    let plan = planned(&path, &reader, Path::new("mem://bucket/ckpt"), 6 << 10);
    // The first attempt, alone.
    let first = Bucket::default();
    let outcome = ztensor_shard_write::run_unit(&plan, 0, &reader, &par, &(), &first).unwrap();
    assert!(matches!(outcome, Outcome::Written(_)));
    let theirs: Vec<(String, Vec<u8>)> = first.objects.borrow().clone().into_iter().collect();
    let receipt = ".ztensor-receipts/unit-00000.json".to_owned();
    assert!(theirs.iter().any(|(n, _)| *n == receipt), "{theirs:?}");
    // The second looked before the first finished, and the first publishes its shard and
    // receipt while the second writes: the second's receipt is refused on condition, and it
    // answers with the first's receipt, which it checked against the shard.
    let second = Bucket::default();
    *second.meanwhile.borrow_mut() = Some((receipt.clone(), theirs.clone()));
    let outcome = ztensor_shard_write::run_unit(&plan, 0, &reader, &par, &(), &second).unwrap();
    let Outcome::AlreadyDone(found) = outcome else { panic!("{outcome:?}") };
    assert_eq!(found.unit, 0);
    let held: Vec<(String, Vec<u8>)> = second.objects.borrow().clone().into_iter().collect();
    assert_eq!(held, theirs, "the same shard bytes, and the first attempt's receipt");
    // A receipt of another plan there before: replaced on condition that it is still that one.
    let stale = Bucket::default();
    stale.objects.borrow_mut().insert(receipt.clone(), b"{\"plan\": \"another\"}".to_vec());
    let outcome = ztensor_shard_write::run_unit(&plan, 0, &reader, &par, &(), &stale).unwrap();
    assert!(matches!(outcome, Outcome::Written(_)));
    let held: Vec<(String, Vec<u8>)> = stale.objects.borrow().clone().into_iter().collect();
    assert_eq!(held, theirs);
}

#[test]
fn a_prefix_in_a_bucket_gets_the_bytes_of_a_local_directory_or_nothing() {
    let d = scratch("prefix");
    let path = input(&d, 12);
    let reader = open(&path);
    let par = ParOptions::with_threads(2);
    let local = planned(&path, &reader, &d.join("local"), 6 << 10);
    ztensor_shard_write::write_all(&local, &reader, &par, &(), &whole(&local)).unwrap();
    // The same conversion into objects under a prefix: the URL kept as given in the plan.
    let url = Path::new("mem://bucket/ckpt");
    let remote = planned(&path, &reader, url, 6 << 10);
    assert_eq!(remote.output, url);
    assert_eq!(remote.units.len(), local.units.len());
    let bucket = Bucket::default();
    let done = ztensor_shard_write::write_all(&remote, &reader, &par, &(), &bucket).unwrap();
    assert_eq!(done.index, format!("mem://bucket/ckpt/{}", remote.index));
    assert_eq!(done.shards, remote.units.len());
    let objects: Vec<(String, Vec<u8>)> = bucket.objects.into_inner().into_iter().collect();
    let shard_bytes: usize =
        objects.iter().filter(|(n, _)| *n != remote.index).map(|(_, b)| b.len()).sum();
    assert_eq!(done.bytes, shard_bytes as u64);
    assert_eq!(objects, files(&d.join("local")));
    // A publish that fails part of the way (the third shard): the shards already published
    // are removed, and no index is written.
    let third = remote.units[2].shard.clone();
    let failing = Bucket { refuse: Some(third.clone()), ..Bucket::default() };
    let e = ztensor_shard_write::write_all(&remote, &reader, &par, &(), &failing).unwrap_err();
    assert!(e.to_string().contains(&third) && e.to_string().contains("the store said no"), "{e}");
    assert!(failing.objects.borrow().is_empty(), "{:?}", failing.objects.borrow().keys());
}

#[test]
fn units_run_into_a_bucket_equal_one_process_and_finalize_checks_them() {
    let d = scratch("bucket-units");
    let path = input(&d, 12);
    let reader = open(&path);
    let par = ParOptions::with_threads(2);
    let local = planned(&path, &reader, &d.join("local"), 6 << 10);
    ztensor_shard_write::write_all(&local, &reader, &par, &(), &whole(&local)).unwrap();
    let plan = planned(&path, &reader, Path::new("mem://bucket/ckpt"), 6 << 10);
    let bucket = Bucket::default();
    // Nothing run: finalize names every unit, and writes nothing.
    let e = ztensor_shard_write::finalize(&plan, false, &bucket).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Incomplete);
    assert!(bucket.objects.borrow().is_empty());
    for unit in (0..plan.units.len()).rev() {
        let outcome =
            ztensor_shard_write::run_unit(&plan, unit, &reader, &par, &(), &bucket).unwrap();
        assert!(matches!(outcome, Outcome::Written(_)));
    }
    // A unit run again is verified and left alone.
    let again = ztensor_shard_write::run_unit(&plan, 0, &reader, &par, &(), &bucket).unwrap();
    assert!(matches!(again, Outcome::AlreadyDone(_)));
    let index = ztensor_shard_write::finalize(&plan, true, &bucket).unwrap();
    assert_eq!(index, format!("mem://bucket/ckpt/{}", plan.index));
    // Shards and index as the one-process local write; receipts beside them.
    let objects = bucket.objects.borrow().clone();
    let (receipts, rest): (Vec<_>, Vec<_>) =
        objects.into_iter().partition(|(n, _)| n.starts_with(ztensor_shard_write::RECEIPTS_DIR));
    assert_eq!(receipts.len(), plan.units.len());
    assert_eq!(rest, files(&d.join("local")));
    // A shard changed behind its receipt's back (same size): finalize names its unit, and
    // running the unit again writes it anew.
    let shard = plan.units[1].shard.clone();
    bucket.objects.borrow_mut().get_mut(&shard).unwrap()[100] ^= 0xff;
    let e = ztensor_shard_write::finalize(&plan, true, &bucket).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Incomplete);
    assert!(e.to_string().ends_with(": 1"), "{e}");
    let redone = ztensor_shard_write::run_unit(&plan, 1, &reader, &par, &(), &bucket).unwrap();
    assert!(matches!(redone, Outcome::Written(_)));
    ztensor_shard_write::finalize(&plan, true, &bucket).unwrap();
}

/// Files written elsewhere first are published in order; when one is refused, those already
/// published are taken back, and a file that cannot be read is named.
#[test]
fn staged_files_are_published_in_order_or_not_at_all() {
    let d = scratch("publish-files");
    let files: Vec<(String, PathBuf)> = ["a.zt", "b.zt", "root.zt"]
        .iter()
        .map(|name| {
            let path = d.join(name);
            std::fs::write(&path, name.repeat(1000)).unwrap();
            ((*name).to_owned(), path)
        })
        .collect();
    let bucket = Bucket::default();
    ztensor_shard_write::publish_files(&bucket, &files).unwrap();
    let held: Vec<(String, Vec<u8>)> = bucket.objects.into_inner().into_iter().collect();
    let expected: Vec<(String, Vec<u8>)> =
        files.iter().map(|(n, p)| (n.clone(), std::fs::read(p).unwrap())).collect();
    assert_eq!(held, expected);

    let failing = Bucket { refuse: Some("root.zt".to_owned()), ..Bucket::default() };
    let e = ztensor_shard_write::publish_files(&failing, &files).unwrap_err();
    assert!(
        e.to_string().contains("root.zt") && e.to_string().contains("the store said no"),
        "{e}"
    );
    assert!(failing.objects.borrow().is_empty(), "{:?}", failing.objects.borrow().keys());

    let missing = vec![("gone.zt".to_owned(), d.join("gone.zt"))];
    let e = ztensor_shard_write::publish_files(&Bucket::default(), &missing).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io);
    assert!(e.to_string().contains("gone.zt"), "{e}");
}

/// An all-or-nothing write that succeeded keeps what it made whatever its directory is used
/// for next; a plan without units finalizes to nothing.
#[test]
fn a_finished_write_is_kept_and_an_empty_plan_makes_nothing() {
    use ztensor_shard_write::Destination;
    let d = scratch("kept");
    let path = input(&d, 6);
    let reader = open(&path);
    let par = ParOptions::with_threads(1);
    let plan = planned(&path, &reader, &d.join("out"), 3 << 10);
    let out = whole(&plan);
    ztensor_shard_write::write_all(&plan, &reader, &par, &(), &out).unwrap();
    let written = files(&plan.output);
    assert_eq!(written.len(), plan.units.len() + 1);
    // A failure reported through the same directory afterwards takes nothing back.
    out.abandon(&[plan.units[0].shard.as_str()]);
    ztensor_shard_write::interrupt();
    assert_eq!(files(&plan.output), written);

    let mut empty = planned(&path, &reader, &d.join("empty"), 3 << 10);
    empty.units.clear();
    let e = ztensor_shard_write::finalize(&empty, false, &dir(&empty)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Incomplete);
    assert!(!empty.output.exists());
}
