//! Blobs that several objects share (the same offset and length, which 1.x allows): a copy
//! writes each once, and what it cannot keep shared is counted against the expansion limit
//! before anything is written.

use std::sync::atomic::{AtomicU64, Ordering};

use ztensor_format::{
    Container, DType, DigestAlgorithm, ErrorKind as Rule, Manifest, Options, Version,
};
use ztensor_io::{
    Compression, CopyOptions, Csr, DigestChoice, ReadAt, Reader, WriteOptions, Writer, copy_all,
    copy_object, remove_objects,
};

/// A file of `version` whose first object is what `first` writes and whose `count - 1` others
/// (`a.1`, `a.2`, …) are described exactly as it is: every component of every object points at
/// the first object's blobs.
fn aliases(version: Version, count: usize, first: impl FnOnce(&mut Writer<Vec<u8>>)) -> Vec<u8> {
    let mut w = Writer::new(Vec::new(), version).unwrap();
    first(&mut w);
    let object = w.manifest().object(0).unwrap();
    let mut manifest: Manifest = w.manifest().to_manifest().unwrap();
    for i in 1..count {
        let mut o = object.clone();
        o.name = format!("a.{i}");
        manifest.objects.push(o);
    }
    let mut file = w.finish().unwrap().0;
    let old = Reader::new(&file[..], &Options::default()).unwrap().manifest().location();
    file.truncate(usize::try_from(old.offset).unwrap());
    let cbor = manifest.encode().unwrap();
    file.extend(&cbor);
    file.extend(Container::V1.encode_trailer(cbor.len() as u64));
    file
}

/// 1 MiB of bytes that compress, but not to nothing.
fn blob() -> Vec<u8> {
    (0..1u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8 & 0x0f).collect()
}

fn dense_aliases(version: Version, count: usize, options: &WriteOptions) -> (Vec<u8>, Vec<u8>) {
    let data = blob();
    let file = aliases(version, count, |w| {
        w.add_dense("a.0", &[1 << 20], DType::U8, &data, options).unwrap();
    });
    (file, data)
}

/// Every object of `file` reads as `data`, and all of them lie in one blob.
fn all_read_as(file: &[u8], count: usize, data: &[u8]) {
    let reader = Reader::new(file, &Options::default()).unwrap();
    assert_eq!(reader.manifest().len(), count);
    let mut offsets = std::collections::BTreeSet::new();
    for o in reader.objects() {
        let c = o.component("data").unwrap();
        offsets.insert(c.offset());
        assert_eq!(c.decoded_verified().unwrap().as_ref(), data, "{}", o.name());
    }
    assert_eq!(offsets.len(), 1, "the copy holds one blob, not one per object");
}

fn copied(file: &[u8], target: Version, copy: &CopyOptions) -> ztensor_io::Result<Vec<u8>> {
    let reader = Reader::new(file, &Options::default())?;
    let mut w = Writer::new(Vec::new(), target)?;
    copy_all(&reader, &mut w, copy)?;
    Ok(w.finish()?.0)
}

#[test]
fn a_stored_copy_writes_a_shared_blob_once() {
    const COUNT: usize = 2_000;
    for (from, to) in [(Version::V1_1, Version::V1_2), (Version::V1_2, Version::V1_2)] {
        let options = WriteOptions::zstd(3).with_digest(DigestAlgorithm::Crc32c);
        let (file, data) = dense_aliases(from, COUNT, &options);
        let reader = Reader::new(&file[..], &Options::default()).unwrap();
        let mut w = Writer::new(Vec::new(), to).unwrap();
        copy_all(&reader, &mut w, &CopyOptions::default()).unwrap();
        let stored = reader.object_at(0).unwrap().stored_len();
        assert_eq!(w.tally().stored, stored, "what was written: one blob");
        let copy = w.finish().unwrap().0;
        // About the input's size (the manifest grows by a field on 1.2), not 2,000 blobs.
        assert!(copy.len() < file.len() + file.len() / 2, "{} -> {}", file.len(), copy.len());
        all_read_as(&copy, COUNT, &data);
    }
}

#[test]
fn a_re_encoded_copy_encodes_a_shared_dense_blob_once() {
    const COUNT: usize = 2_000;
    let (file, data) = dense_aliases(Version::V1_1, COUNT, &WriteOptions::raw());
    assert!(file.len() < 2 << 20);
    let copy = CopyOptions {
        compression: Some(Compression::Zstd(1)),
        digest: DigestChoice::Set(DigestAlgorithm::Sha256),
        ..CopyOptions::default()
    };
    let out = copied(&file, Version::V1_2, &copy).unwrap();
    assert!(out.len() < file.len(), "{} -> {}", file.len(), out.len());
    all_read_as(&out, COUNT, &data);
    // Object by object (as an append copies), the same bytes.
    let reader = Reader::new(&file[..], &Options::default()).unwrap();
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    for o in reader.objects() {
        copy_object(o, &mut w, &copy).unwrap();
    }
    assert_eq!(w.finish().unwrap().0, out);
}

#[test]
fn the_same_bytes_described_otherwise_are_not_taken_for_an_alias() {
    // Read as u16, the blob is another tensor: encoded again, it is written again.
    let data = blob();
    let mut file = aliases(Version::V1_2, 3, |w| {
        w.add_dense("a.0", &[1 << 20], DType::U8, &data, &WriteOptions::raw()).unwrap();
    });
    let reader = Reader::new(&file[..], &Options::default()).unwrap();
    let mut manifest = reader.manifest().manifest().clone();
    let old = reader.manifest().location();
    let o = &mut manifest.objects[2];
    o.shape = vec![1 << 19];
    o.components.get_mut("data").unwrap().dtype = DType::U16.into();
    drop(reader);
    file.truncate(usize::try_from(old.offset).unwrap());
    let cbor = manifest.encode().unwrap();
    file.extend(&cbor);
    file.extend(Container::V1.encode_trailer(cbor.len() as u64));
    let copy = CopyOptions { compression: Some(Compression::Raw), ..CopyOptions::default() };
    // Raw to raw is a stored copy: one blob. Asked to re-encode (a digest), two.
    let stored = copied(&file, Version::V1_2, &copy).unwrap();
    let digest = CopyOptions { digest: DigestChoice::Set(DigestAlgorithm::Crc32c), ..copy };
    let encoded = copied(&file, Version::V1_2, &digest).unwrap();
    let blobs = |f: &[u8]| {
        let r = Reader::new(f, &Options::default()).unwrap();
        let offsets: std::collections::BTreeSet<u64> =
            r.objects().map(|o| o.component("data").unwrap().offset()).collect();
        for o in r.objects() {
            o.verify().unwrap();
        }
        offsets.len()
    };
    assert_eq!(blobs(&encoded), 2);
    assert!(blobs(&stored) <= 2);
}

#[test]
fn remove_keeps_the_blob_shared_and_drops_it_with_its_last_object() {
    const COUNT: usize = 2_000;
    let (file, data) = dense_aliases(Version::V1_2, COUNT, &WriteOptions::zstd(3));
    let d = ztensor_testkit::scratch("io-shared");
    let input = d.join("in.zt");
    let output = d.join("out.zt");
    std::fs::write(&input, &file).unwrap();
    // The first object, whose copy the others would have pointed at, is gone: the next one
    // carries the blob.
    remove_objects(&input, &output, &["a.0"], &Options::default()).unwrap();
    let out = std::fs::read(&output).unwrap();
    assert!(out.len() <= file.len(), "{} -> {}", file.len(), out.len());
    all_read_as(&out, COUNT - 1, &data);
}

/// A CSR object of 128 Ki f64 values (1 MiB of values, 1 MiB of indices) and `count` aliases.
fn sparse_aliases(version: Version, count: usize, options: &WriteOptions) -> Vec<u8> {
    const NNZ: u64 = 1 << 17;
    let values: Vec<u8> = (0..NNZ).flat_map(|i| (i as f64).to_le_bytes()).collect();
    let indices: Vec<u64> = (0..NNZ).collect();
    aliases(version, count, |w| {
        let csr = Csr { dtype: DType::F64, values: &values, indices: &indices, indptr: &[0, NNZ] };
        w.add_csr("a.0", &[1, NNZ], csr, options).unwrap();
    })
}

#[test]
fn a_copy_that_cannot_keep_sharing_is_refused_before_it_writes() {
    const COUNT: usize = 1_000;
    let file = sparse_aliases(Version::V1_2, COUNT, &WriteOptions::raw());
    // Stored as it is, every component stays shared.
    let stored = copied(&file, Version::V1_1, &CopyOptions::default()).unwrap();
    assert!(stored.len() <= file.len() + file.len() / 4, "{} -> {}", file.len(), stored.len());
    let reader = Reader::new(&stored[..], &Options::default()).unwrap();
    let first = reader.read_object_verified("a.0").unwrap();
    let last = reader.read_object_verified(&format!("a.{}", COUNT - 1)).unwrap();
    assert_eq!(first.components, last.components);

    // Encoded again, sparse objects are written one by one: 2 GiB from a 2 MiB file is over
    // the limit (1 GiB here, the least it ever is), and refused before a byte of data.
    let mut options = Options::default();
    options.limits.max_expansion = 16;
    let reader = Reader::new(&file[..], &options).unwrap();
    let copy = CopyOptions { compression: Some(Compression::Zstd(1)), ..CopyOptions::default() };
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    let err = copy_all(&reader, &mut w, &copy).unwrap_err();
    assert_eq!(err.format_error().map(|e| e.kind()), Some(Rule::DecodedTooLarge), "{err}");
    assert!(err.to_string().contains("max_expansion"), "{err}");
    assert_eq!(w.tally().objects, 0);
    // Object by object, the first copy checks the whole file just the same.
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    let err = copy_object(reader.object_at(0).unwrap(), &mut w, &copy).unwrap_err();
    assert_eq!(err.format_error().map(|e| e.kind()), Some(Rule::DecodedTooLarge), "{err}");
    assert_eq!(w.tally().objects, 0);
    // Raised, the same copy goes through.
    options.limits.max_expansion = 4096;
    let reader = Reader::new(&file[..], &options).unwrap();
    let mut w = Writer::new(std::io::sink(), Version::V1_2).unwrap();
    for o in reader.objects().take(2) {
        copy_object(o, &mut w, &copy).unwrap();
    }
}

/// A source counting the bytes read from it.
struct Counting<'a> {
    bytes: &'a [u8],
    read: AtomicU64,
}

impl ReadAt for Counting<'_> {
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.read.fetch_add(buf.len() as u64, Ordering::Relaxed);
        self.bytes.read_exact_at(offset, buf)
    }
}

#[test]
fn a_shared_zstd_blob_is_read_once_to_learn_its_length() {
    // 1.1 has no `uncompressed_length`; 1.2 requires it, and sparse values do not get it from
    // the shape: the copy decodes the blob to learn it, once for all its aliases.
    const COUNT: usize = 500;
    let file = sparse_aliases(Version::V1_1, COUNT, &WriteOptions::zstd(3));
    let source = Counting { bytes: &file, read: AtomicU64::new(0) };
    let reader = Reader::new(source, &Options::default()).unwrap();
    let before = reader.source().read.load(Ordering::Relaxed);
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    copy_all(&reader, &mut w, &CopyOptions::default()).unwrap();
    let read = reader.source().read.load(Ordering::Relaxed) - before;
    assert!(read <= 3 * file.len() as u64, "read {read} bytes of a {}-byte file", file.len());
    let out = w.finish().unwrap().0;
    let reader = Reader::new(&out[..], &Options::default()).unwrap();
    for o in reader.objects() {
        o.verify().unwrap();
    }
}
