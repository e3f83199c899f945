//! Sharded zTensor 2: written as shards plus a root, found again by each resolver (positional
//! names, a content-addressed store, a directory scanned by identity), and refused or limited
//! when a shard is not the file the root's table names.

use std::path::Path;

use ztensor_format::{DType, Version};
use ztensor_io::{Reader, TensorSource, WriteOptions as Zt1Options, Writer};
use ztensor_v2::sharded::{split_by_size, write_sharded};
use ztensor_v2::shards::Resolver;
use ztensor_v2::{DigestCheck, ErrorKind, File, IdAlgorithm, MAX_MANIFEST, Rule, WriteOptions};

fn scratch(what: &str) -> ztensor_testkit::Scratch {
    ztensor_testkit::scratch(&format!("v2-shards-{what}"))
}

/// A 1.2 file of five objects: 4 KiB, 8 KiB, 4 KiB, an empty one and 2 bytes of `bool`, with
/// file attributes.
fn sample() -> Vec<u8> {
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    let bytes = |n: usize, seed: u8| -> Vec<u8> {
        (0..n).map(|i| u8::try_from(i % 256).unwrap().wrapping_mul(31).wrapping_add(seed)).collect()
    };
    let raw = Zt1Options::raw();
    w.add_dense("a.weight", &[1024], DType::F32, &bytes(4096, 1), &raw).unwrap();
    w.add_dense("b.weight", &[2048], DType::F32, &bytes(8192, 2), &raw).unwrap();
    w.add_dense("c.weight", &[1024], DType::F32, &bytes(4096, 3), &raw).unwrap();
    w.add_dense("d.empty", &[0], DType::F16, &[], &raw).unwrap();
    w.add_dense("e.mask", &[2], DType::Bool, &[0, 1], &raw).unwrap();
    let license = ztensor_format::Value::Text("MIT".into());
    let map =
        ztensor_format::Value::Map(vec![(ztensor_format::Value::Text("license".into()), license)]);
    w.set_attributes(ztensor_format::Attributes::try_from(map).unwrap()).unwrap();
    w.finish().unwrap().0
}

fn open(root: &Path, resolvers: &[Resolver]) -> ztensor_v2::Result<File<ztensor_io::FileSource>> {
    File::open_path(root, MAX_MANIFEST, resolvers)
}

/// Writes the sample sharded at 8 KiB into `dir` (root `model.zt`).
fn written(dir: &Path) -> (Vec<u8>, ztensor_v2::sharded::ShardedSummary) {
    let bytes = sample();
    let one = Reader::new(&bytes[..], &Default::default()).unwrap();
    let groups = split_by_size(&one, 8192);
    let summary = write_sharded(&one, &dir.join("model.zt"), &groups, &WriteOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    (bytes, summary)
}

#[test]
fn a_sharded_write_reads_back_by_positional_names() {
    let dir = scratch("positional");
    let (bytes, summary) = written(&dir);
    let one = Reader::new(&bytes[..], &Default::default()).unwrap();
    // By name: a (4 KiB) alone, since a + b pass 8 KiB; b (8 KiB); c, the empty one and the
    // mask together.
    let names: Vec<&str> = summary.shards.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(names, ["00001-of-00003", "00002-of-00003", "00003-of-00003"]);
    let files: Vec<String> = summary
        .shards
        .iter()
        .map(|(_, p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files[0], "model-00001-of-00003.zt");
    assert_eq!((summary.objects, summary.parts), (5, 5));

    let root = dir.join("model.zt");
    let two = open(&root, &Resolver::default_for(&root)).unwrap();
    let manifest = two.manifest().unwrap();
    assert_eq!(manifest.shards.len(), 3);
    assert!(manifest.shards.values().all(|s| s.digest.starts_with("sha256:")));
    assert_eq!(TensorSource::len(&two), 5);
    for i in 0..one.len() {
        let a = one.read(i).unwrap();
        let b = two.read(two.find(&a.name).unwrap()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a.shape, b.shape);
        for (role, c) in &a.components {
            assert!(c.bytes == b.components[role].bytes, "{}: {role}", a.name);
        }
    }
    // Every part's digest and every shard's whole-file digest check out.
    for (o, object) in manifest.objects.iter() {
        for p in object.parts.keys() {
            assert_eq!(two.verify(o, p).unwrap(), DigestCheck::Verified, "{o}/{p}");
        }
    }
    let checks = two.verify_shards().unwrap();
    assert_eq!(checks.len(), 3);
    assert!(checks.iter().all(|(_, c)| *c == DigestCheck::Verified));
    // The file attributes are the root's; each shard is a canonical file of its own objects,
    // with none.
    assert!(manifest.attributes.is_some());
    for (name, path, len) in &summary.shards {
        let shard = File::open(std::fs::read(path).unwrap(), MAX_MANIFEST).unwrap();
        assert_eq!(std::fs::metadata(path).unwrap().len(), *len);
        assert!(shard.manifest().unwrap().attributes.is_none(), "{name}");
        assert!(shard.manifest().unwrap().shards.is_empty(), "{name}");
    }
    // The identity is the model's, whatever the split: that of the file written whole.
    let mut whole = ztensor_v2::Zt2Sink::to_output(std::io::Cursor::new(Vec::new()));
    ztensor_io::TensorSink::write_all(&mut whole, &one).unwrap();
    let whole = File::open(whole.into_inner().unwrap().into_inner(), MAX_MANIFEST).unwrap();
    for algorithm in [IdAlgorithm::Sha256, IdAlgorithm::Xxh3] {
        assert_eq!(
            two.content_digest(algorithm).unwrap(),
            whole.content_digest(algorithm).unwrap()
        );
    }
}

#[test]
fn renamed_shards_are_found_by_identity_and_in_a_store() {
    let dir = scratch("renamed");
    let (_, summary) = written(&dir);
    let root = dir.join("model.zt");
    // Renamed: the positional names miss; the directory scan finds each by size and digest.
    for (i, (_, path, _)) in summary.shards.iter().enumerate() {
        std::fs::rename(path, dir.join(format!("part-{i}.zt"))).unwrap();
    }
    // A decoy of the right size but other bytes is not taken.
    let first = dir.join("part-0.zt");
    let mut decoy = std::fs::read(&first).unwrap();
    decoy[65536] ^= 0xff;
    std::fs::write(dir.join("a-decoy.zt"), &decoy).unwrap();
    let two = open(&root, &Resolver::default_for(&root)).unwrap();
    assert!(two.verify_shards().unwrap().iter().all(|(_, c)| *c == DigestCheck::Verified));
    assert_eq!(two.read(0).unwrap().name, "a.weight");
    // Positional alone finds nothing: every part is unreadable, saying where it looked.
    let positional = open(&root, &[Resolver::positional(&root)]).unwrap();
    let e = positional.read(0).unwrap_err();
    assert!(e.to_string().contains("model-00001-of-00003.zt"), "{e}");

    // A content-addressed store: STORE/blobs/sha256/HEX.
    let store = dir.join("store");
    let manifest = two.manifest().unwrap();
    for (i, shard) in manifest.shards.values().enumerate() {
        let (algorithm, hex) = shard.digest.split_once(':').unwrap();
        let at = store.join("blobs").join(algorithm);
        std::fs::create_dir_all(&at).unwrap();
        std::fs::rename(dir.join(format!("part-{i}.zt")), at.join(hex)).unwrap();
    }
    let stored = open(&root, &[Resolver::content_addressed(&store)]).unwrap();
    assert_eq!(stored.verify_shards().unwrap().len(), 3);
    assert_eq!(stored.read(4).unwrap().components["data"].bytes.as_ref(), [0, 1]);
}

#[test]
fn a_shard_that_is_not_the_one_named_is_refused_or_caught() {
    let dir = scratch("identity");
    let (_, summary) = written(&dir);
    let root = dir.join("model.zt");
    let resolvers = Resolver::default_for(&root);
    let (_, first, _) = &summary.shards[0];
    let original = std::fs::read(first).unwrap();

    // Another size: refused at open.
    let mut longer = original.clone();
    longer.push(0);
    std::fs::write(first, &longer).unwrap();
    let e = open(&root, &resolvers).unwrap_err();
    assert_eq!(e.broken(), Some(Rule::ShardIdentity), "{e}");

    // The right size, not a container: refused at open.
    let mut broken = original.clone();
    let end = broken.len();
    broken[end - 1] ^= 0xff;
    std::fs::write(first, &broken).unwrap();
    let e = open(&root, &resolvers).unwrap_err();
    assert_eq!(e.broken(), Some(Rule::ShardIdentity), "{e}");

    // The right size and a valid container, other bytes in a blob: opened, caught by the
    // whole-file digest and by the part's own.
    let mut changed = original.clone();
    changed[65536] ^= 0xff;
    std::fs::write(first, &changed).unwrap();
    let two = open(&root, &resolvers).unwrap();
    assert_eq!(two.verify_shards().unwrap_err().broken(), Some(Rule::ShardIdentity));
    assert_eq!(two.verify("a.weight", "data").unwrap_err().broken(), Some(Rule::Digest));

    // Missing: the rest of the model reads; its parts and the shard check say it is missing.
    std::fs::remove_file(first).unwrap();
    let two = open(&root, &resolvers).unwrap();
    let e = two.verify("a.weight", "data").unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Unsupported), "{e}");
    assert!(e.to_string().contains("missing"), "{e}");
    assert!(two.verify("b.weight", "data").is_ok());
    assert!(two.verify_shards().is_err());
    // Only the shards found count as the model's bytes (a table can claim any size).
    let present: u64 = summary.shards[1..].iter().map(|(_, _, len)| len).sum();
    assert_eq!(two.shards_len(), present);

    // A FIFO at the positional name is refused, never waited on.
    let fifo = std::process::Command::new("mkfifo").arg(first).status().unwrap();
    assert!(fifo.success());
    let e = open(&root, &resolvers).unwrap_err();
    assert!(e.to_string().contains("FIFO"), "{e}");
}

/// The root's table is what the shards are: the reader's own table checks hold (a shard name
/// in the table, blobs within the shard's size less its footer).
#[test]
fn groups_must_be_a_partition() {
    let dir = scratch("partition");
    let bytes = sample();
    let one = Reader::new(&bytes[..], &Default::default()).unwrap();
    let root = dir.join("model.zt");
    let options = WriteOptions::default();
    assert!(write_sharded(&one, &root, &[vec![0, 1], vec![1, 2, 3, 4]], &options).is_err());
    assert!(write_sharded(&one, &root, &[vec![0, 1, 2, 3]], &options).is_err());
    assert!(write_sharded(&one, &root, &[vec![0, 1, 2, 3, 4, 9]], &options).is_err());
    // Nothing was published.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    // One object a shard.
    let groups: Vec<Vec<usize>> = (0..5).map(|i| vec![i]).collect();
    let summary = write_sharded(&one, &root, &groups, &options).unwrap();
    assert_eq!(summary.shards.len(), 5);
    let two = open(&root, &Resolver::default_for(&root)).unwrap();
    assert_eq!(TensorSource::len(&two), 5);
}

/// A root whose table lists `k` shards, none present, each with the root's own size and a
/// digest algorithm of its own: every shard is a miss, and the root (the one candidate of that
/// size) is never opened again for each. Opened once per algorithm, a table of 4,000 took 13 s
/// and one of 16,000 took 190 s, each look parsing the root's whole table once more.
#[test]
fn many_missing_shards_of_distinct_algorithms_are_each_one_look() {
    use ztensor_v2::cbor::{Value, encode};
    let text = |s: &str| Value::Text(s.to_owned());
    let k = 4000;
    let dir = scratch("many-missing");
    let manifest = |size: u64| {
        let shards = (0..k)
            .map(|i| {
                let entry = vec![
                    (text("size"), Value::Uint(size)),
                    (text("digest"), text(&format!("a{i}:00"))),
                ];
                (text(&format!("s{i:05}")), Value::Map(entry))
            })
            .collect();
        encode(&Value::Map(vec![
            (text("objects"), Value::Map(Vec::new())),
            (text("shards"), Value::Map(shards)),
        ]))
    };
    // The root's size is in its own table: sizes of 65,536 up take five bytes, so one more
    // encoding with the size found has the same length.
    let size = 4096 + manifest(65536).len() as u64 + 40;
    assert!(size >= 65536);
    let m = manifest(size);
    let mut bytes = ztensor_v2::MAGIC.to_vec();
    bytes.resize(4096, 0);
    bytes.extend(&m);
    bytes.extend(4096u64.to_le_bytes());
    bytes.extend((m.len() as u64).to_le_bytes());
    bytes.extend(xxhash_rust::xxh3::xxh3_64(&m).to_le_bytes());
    bytes.extend(2u32.to_le_bytes());
    bytes.extend(0u32.to_le_bytes());
    bytes.extend(ztensor_v2::MAGIC);
    assert_eq!(bytes.len() as u64, size);
    let root = dir.join("model.zt");
    std::fs::write(&root, &bytes).unwrap();

    let started = std::time::Instant::now();
    let two = open(&root, &Resolver::default_for(&root)).unwrap();
    let took = started.elapsed();
    assert_eq!(two.manifest().unwrap().shards.len(), k);
    let e = two.verify_shards().unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Unsupported), "{e}");
    assert!(e.to_string().contains("missing"), "{e}");
    // The directory's answer is about the algorithm, found without a candidate opened.
    assert!(e.to_string().contains("does not compute"), "{e}");
    eprintln!("{k} missing shards opened in {took:?}");
}
