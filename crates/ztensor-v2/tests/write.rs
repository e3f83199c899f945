//! Writing canonical zTensor 2: byte for byte what the published corpus holds, back through
//! every reader of this workspace, from every zTensor 1.x fixture and back again.

use std::io::Cursor;
use std::path::PathBuf;

use ztensor_io::{TensorSink, TensorSource};
use ztensor_v2::{File, Zt2Sink};

fn corpus(dir: &str, name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../ztensor-conformance/fixtures/external/ztensor2")
        .join(dir)
        .join(format!("{name}.zt"));
    std::fs::read(path).unwrap()
}

fn to_v2(source: &dyn TensorSource) -> Vec<u8> {
    let mut sink = Zt2Sink::to_output(Cursor::new(Vec::new()));
    sink.write_all(source).unwrap_or_else(|e| panic!("{e}"));
    sink.into_inner().unwrap().into_inner()
}

/// `canonical-basic.zt` was written by the reference implementation's canonical writer (its
/// checker calls it canonical): the same content written here gives the same bytes, shared
/// blob, placement, manifest and footer included.
#[test]
fn the_corpus_canonical_file_is_reproduced_byte_for_byte() {
    let published = corpus("valid", "canonical-basic");
    let file = File::open(published.clone(), ztensor_v2::MAX_MANIFEST).unwrap();
    let written = to_v2(&file);
    assert_eq!(written.len(), published.len());
    assert!(written == published, "the bytes differ");
}

/// The empty model: magic, zeros to 65536, the 10-byte manifest, the footer (65586 bytes), its
/// manifest hash the one the spec gives.
#[test]
fn the_empty_model() {
    let empty = ztensor_io::Reader::new(
        ztensor_io::Writer::new(Vec::new(), ztensor_format::Version::V1_2)
            .unwrap()
            .finish()
            .unwrap()
            .0,
        &Default::default(),
    )
    .unwrap();
    let bytes = to_v2(&empty);
    assert_eq!(bytes.len(), 65586);
    assert_eq!(&bytes[65536..65546], b"\xa1\x67objects\xa0");
    assert_eq!(bytes[65546 + 16..65546 + 24], 0x8f8b_3a7e_746e_7c7du64.to_le_bytes());
    assert!(bytes[8..65536].iter().all(|&b| b == 0));
}

/// The content digests the reference documentation and its `zt id` give for two corpus files.
#[test]
fn content_digests_known_answers() {
    use ztensor_v2::{IdAlgorithm, manifest_digest};
    let id = |name: &str, algorithm| {
        let f = File::open(corpus("valid", name), ztensor_v2::MAX_MANIFEST).unwrap();
        manifest_digest(f.manifest().unwrap(), algorithm).unwrap()
    };
    assert_eq!(
        id("canonical-basic", IdAlgorithm::Sha256),
        "sha256:4811d499a49d509f70874bb87b0f71f9d8895873acca2d29581e17bff2be8a9c"
    );
    assert_eq!(id("canonical-basic", IdAlgorithm::Xxh3), "xxh3:faa8ab77fff0086c");
    assert_eq!(
        id("verify-ok", IdAlgorithm::Sha256),
        "sha256:de56f9f8d1dbc181d52dd53b1ddf097b496c8e152a8333939c26f34a678f2cc5"
    );
    // A file whose parts carry no digest has no identity.
    let minimal = File::open(corpus("valid", "minimal"), ztensor_v2::MAX_MANIFEST).unwrap();
    assert!(manifest_digest(minimal.manifest().unwrap(), IdAlgorithm::Sha256).is_err());
    // Computed from the content instead, the canonical file's identity is the same.
    let basic = File::open(corpus("valid", "canonical-basic"), ztensor_v2::MAX_MANIFEST).unwrap();
    assert_eq!(
        ztensor_v2::content_digest(&basic, IdAlgorithm::Sha256).unwrap(),
        id("canonical-basic", IdAlgorithm::Sha256)
    );
}

/// Every `.zt` under `dir`, recursively.
fn zt_files(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            zt_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "zt") {
            out.push(path);
        }
    }
}

/// A value with every map's entries in one order (zTensor 2 sorts them; 1.x keeps the order
/// they were written in), for comparing content.
fn sorted(v: ztensor_format::Value) -> ztensor_format::Value {
    use ztensor_format::Value as V;
    match v {
        V::Array(items) => V::Array(items.into_iter().map(sorted).collect()),
        V::Map(entries) => {
            let mut entries: Vec<(V, V)> =
                entries.into_iter().map(|(k, v)| (sorted(k), sorted(v))).collect();
            entries.sort_by_key(|(k, _)| ztensor_v2::cbor::encode(&value_2(k)));
            V::Map(entries)
        }
        other => other,
    }
}

fn value_2(v: &ztensor_format::Value) -> ztensor_v2::cbor::Value {
    ztensor_v2::model::value_2(v, 0, ztensor_format::Refused::ObjectAttributes).unwrap()
}

/// Attributes as content: an empty map is no attributes (zTensor 2 writers leave it out).
fn content(a: Option<&ztensor_format::Attributes>) -> Option<ztensor_format::Value> {
    a.filter(|a| !a.is_empty()).map(|a| sorted(a.to_value()))
}

/// Every valid zTensor 0.1/1.1/1.2 fixture, the reference implementations' files among them,
/// goes to zTensor 2 and back to 1.2 with the same content: names, shapes, formats, types,
/// bytes and attributes; its identity is the same before, in zTensor 2 and after; and the way
/// back written as zTensor 2 again gives the same bytes (canonical form).
#[test]
fn every_1x_fixture_goes_to_2_and_back() {
    use ztensor_io::{Excluding, Reader, WriteOptions as Zt1Options, Writer};
    use ztensor_v2::{IdAlgorithm, content_digest, manifest_digest};
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../ztensor-conformance/fixtures");
    let mut files = Vec::new();
    for dir in [
        "v0.1/valid",
        "v1.1/valid",
        "v1.2/valid",
        "producers/v0.1",
        "producers/v1.1",
        "producers/v1.2",
        "examples",
    ] {
        zt_files(&root.join(dir), &mut files);
    }
    files.sort();
    assert!(files.len() > 100, "{} fixtures", files.len());
    let (mut objects, mut left_out, mut dropped_attributes) = (0usize, Vec::new(), Vec::new());
    for path in &files {
        let label = path.strip_prefix(&root).unwrap().display().to_string();
        let bytes = std::fs::read(path).unwrap();
        let one = Reader::new(&bytes[..], &Default::default())
            .unwrap_or_else(|e| panic!("{label}: a valid fixture: {e}"));
        // Objects that cannot be read (unknown dtypes or encodings, a broken digest or bool)
        // are not content; a 1.x FP4 tensor (one value a byte) has no zTensor 2 dense form.
        let skip: Vec<String> = (0..one.len())
            .filter(|&i| {
                let info = one.info(i).unwrap();
                let fp4 = info.format == ztensor_format::Format::Dense
                    && info
                        .components
                        .iter()
                        .any(|c| c.logical_type.as_ref().is_some_and(|t| t.name() == "f4_e2m1"));
                info.unsupported.is_some() || one.read(i).is_err() || fp4
            })
            .map(|i| one.name(i).unwrap().into_owned())
            .collect();
        left_out.extend(skip.iter().map(|n| format!("{label}:{n}")));
        let one = Excluding::new(&one, |n| skip.iter().any(|s| s == n));
        // Attributes zTensor 2 cannot hold (a tagged value, `undefined`) are refused, and
        // left out when asked.
        let mut sink = Zt2Sink::to_output(Cursor::new(Vec::new()));
        let mut kept_attributes = true;
        if let Err(e) = sink.write_all(&one) {
            use ztensor_format::{Refused, Verdict};
            let refused = e.refused();
            assert!(
                matches!(refused, Some(Refused::FileAttributes | Refused::ObjectAttributes)),
                "{label}: {e}"
            );
            assert!(e.is_rejection());
            dropped_attributes.push(label.clone());
            kept_attributes = false;
            let options = ztensor_v2::WriteOptions::default().drop_attributes(true);
            sink = Zt2Sink::to_output(Cursor::new(Vec::new())).with_options(options);
            sink.write_all(&one).unwrap_or_else(|e| panic!("{label}: {e}"));
        }
        let two_bytes = sink.into_inner().unwrap().into_inner();
        let two = File::open(two_bytes.clone(), ztensor_v2::MAX_MANIFEST)
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        for (o, p) in two
            .manifest()
            .unwrap()
            .objects
            .iter()
            .flat_map(|(o, obj)| obj.parts.keys().map(move |p| (o.clone(), p.clone())))
        {
            let check = two.verify(&o, &p).unwrap_or_else(|e| panic!("{label}: {e}"));
            assert_eq!(check, ztensor_v2::DigestCheck::Verified, "{label}");
        }
        let mut back = Writer::new(Vec::new(), ztensor_format::Version::V1_2).unwrap();
        let par = ztensor_par::ParOptions::with_threads(1);
        ztensor_par::ZtSink::new(&mut back, Zt1Options::raw(), &par, &())
            .write_all(&two)
            .unwrap_or_else(|e| panic!("{label}: back to 1.2: {e}"));
        let back_bytes = back.finish().unwrap().0;
        let back = Reader::new(&back_bytes[..], &Default::default()).unwrap();
        assert_eq!(TensorSource::len(&back), one.len(), "{label}");
        if kept_attributes {
            assert_eq!(
                content(one.attributes().as_deref()),
                content(back.attributes().as_deref()),
                "{label}: file attributes"
            );
        }
        for i in 0..one.len() {
            let a = one.read(i).unwrap();
            let b = back.read(back.find(&a.name).unwrap()).unwrap();
            let what = format!("{label}: {}", a.name);
            assert_eq!((&a.shape, &a.format), (&b.shape, &b.format), "{what}");
            if kept_attributes {
                let (x, y) = (content(a.attributes.as_deref()), content(b.attributes.as_deref()));
                assert_eq!(x, y, "{what}");
            }
            assert_eq!(a.components.len(), b.components.len(), "{what}");
            for (role, c) in &a.components {
                let d = &b.components[role];
                assert_eq!((c.dtype, &c.logical_type), (d.dtype, &d.logical_type), "{what}");
                if c.dtype == ztensor_format::DType::Bool {
                    // zTensor 0.1 reads any non-zero byte as true.
                    let truth = |b: &[u8]| b.iter().map(|&x| x != 0).collect::<Vec<_>>();
                    assert_eq!(truth(&c.bytes), truth(&d.bytes), "{what}: {role} values differ");
                } else {
                    assert!(c.bytes == d.bytes, "{what}: {role} bytes differ");
                }
            }
            objects += 1;
        }
        let id = manifest_digest(two.manifest().unwrap(), IdAlgorithm::Sha256).unwrap();
        if kept_attributes {
            assert_eq!(content_digest(&one, IdAlgorithm::Sha256).unwrap(), id, "{label}");
        }
        assert_eq!(content_digest(&back, IdAlgorithm::Sha256).unwrap(), id, "{label}");
        assert!(to_v2(&back) == two_bytes, "{label}: the way back written again differs");
    }
    assert!(objects > 300, "{objects} objects");
    // What was left out is what the fixtures mean to be unreadable, and the FP4 tensors.
    assert!(left_out.len() < 40, "{left_out:#?}");
    assert!(dropped_attributes.len() < 5, "{dropped_attributes:#?}");
}

/// With `zstd`, every part is stored under `zt.zstd-seekable/1`: a tensor of several frames
/// and the fixtures read back with the same bytes and the same identity as their canonical
/// form, and identical parts still share one blob.
#[test]
fn parts_under_zstd_seekable() {
    use ztensor_io::{WriteOptions as Zt1Options, Writer};
    use ztensor_v2::{IdAlgorithm, WriteOptions};
    let big: Vec<u8> = (0..5_000_000u32).flat_map(|i| (i / 7).to_le_bytes()).collect();
    let mut w = Writer::new(Vec::new(), ztensor_format::Version::V1_2).unwrap();
    let raw = Zt1Options::raw();
    let f32s = ztensor_format::DType::F32;
    w.add_dense("big", &[5_000_000], f32s, &big, &raw).unwrap();
    w.add_dense("same", &[5_000_000], f32s, &big, &raw).unwrap();
    w.add_dense("empty", &[0], f32s, &[], &raw).unwrap();
    let one = ztensor_io::Reader::new(w.finish().unwrap().0, &Default::default()).unwrap();
    let canonical = File::open(to_v2(&one), ztensor_v2::MAX_MANIFEST).unwrap();
    let mut sink = Zt2Sink::to_output(Cursor::new(Vec::new()))
        .with_options(WriteOptions::default().zstd(Some(3)));
    sink.write_all(&one).unwrap();
    let summary = sink.summary().unwrap().clone();
    let bytes = sink.into_inner().unwrap().into_inner();
    assert!(bytes.len() < big.len() / 2, "{} bytes", bytes.len());
    let encoded = File::open(bytes.clone(), ztensor_v2::MAX_MANIFEST).unwrap();
    let m = encoded.manifest().unwrap();
    let part = &m.objects["big"].parts["data"];
    assert_eq!(part.encoding.as_deref(), Some("zt.zstd-seekable/1"));
    assert_eq!(part.decoded_length, Some(big.len() as u64));
    assert_eq!(part.blob, m.objects["same"].parts["data"].blob, "shared");
    assert_eq!((summary.parts, summary.blobs), (3, 2));
    let (decoded, check) = encoded.verified("big", "data").unwrap();
    assert!(decoded == big);
    assert_eq!(check, ztensor_v2::DigestCheck::Verified);
    let table =
        ztensor_v2::seekable::seek_table(&bytes, part.blob.0, part.blob.1, big.len() as u64)
            .unwrap();
    assert_eq!(table.frames.len(), big.len().div_ceil(1 << 20));
    assert_eq!(
        encoded.content_digest(IdAlgorithm::Sha256).unwrap(),
        canonical.content_digest(IdAlgorithm::Sha256).unwrap()
    );
}

/// Parts compressed ahead of their turn (on every core, while earlier parts are written) give
/// the very stream the streaming encoder gives, and the file does not depend on the number of
/// threads.
#[test]
fn parts_compressed_ahead_are_the_streamed_ones() {
    use ztensor_io::{WriteOptions as Zt1Options, Writer};
    use ztensor_v2::WriteOptions;
    let medium: Vec<u8> = (0..800_000u32).flat_map(|i| (i / 3).to_le_bytes()).collect();
    let mut w = Writer::new(Vec::new(), ztensor_format::Version::V1_2).unwrap();
    let raw = Zt1Options::raw();
    let f32s = ztensor_format::DType::F32;
    w.add_dense("a", &[800_000], f32s, &medium, &raw).unwrap();
    w.add_dense("b", &[3], ztensor_format::DType::Bool, &[0, 1, 1], &raw).unwrap();
    for i in 0..20u8 {
        w.add_dense(&format!("s{i:02}"), &[4], ztensor_format::DType::U8, &[i; 4], &raw).unwrap();
    }
    let one = ztensor_io::Reader::new(w.finish().unwrap().0, &Default::default()).unwrap();
    let write = |threads: usize, memory_budget: u64| {
        let par = ztensor_par::ParOptions { threads, memory_budget };
        let mut sink = Zt2Sink::to_output(Cursor::new(Vec::new()))
            .with_options(WriteOptions::default().zstd(Some(3)).par(par));
        sink.write_all(&one).unwrap();
        sink.into_inner().unwrap().into_inner()
    };
    let bytes = write(1, 0);
    assert!(write(3, 0) == bytes, "the file depends on the thread count");
    // A budget of 2 MiB leaves 1 MiB in flight: "a" (3.2 MB) streams through the encoder at
    // its turn while the small parts around it are compressed ahead; 1 byte leaves one frame.
    assert!(write(3, 2 << 20) == bytes, "the file depends on the memory budget");
    assert!(write(2, 1) == bytes, "the file depends on the memory budget");
    let mut expected = Vec::new();
    let mut encoder = ztensor_v2::seekable::Encoder::new(3);
    let mut keep = |b: &[u8]| {
        expected.extend_from_slice(b);
        Ok(())
    };
    encoder.push(&medium, &mut keep).unwrap();
    encoder.finish(&mut keep).unwrap();
    let file = File::open(bytes.clone(), ztensor_v2::MAX_MANIFEST).unwrap();
    let (at, len) = file.manifest().unwrap().objects["a"].parts["data"].blob;
    let stored = &bytes[usize::try_from(at).unwrap()..usize::try_from(at + len).unwrap()];
    assert!(stored == &expected[..], "the stream differs from the encoder's");
    for i in 0..TensorSource::len(&file) {
        TensorSource::verify(&file, i).unwrap();
    }
    assert_eq!(file.verified("b", "data").unwrap().0, [0, 1, 1]);
}

/// Progress is told every part's decoded bytes once each is written: the sum is what was
/// written, raw or compressed.
#[test]
fn progress_counts_every_decoded_byte() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    let bytes = std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../ztensor-conformance/fixtures/examples/tiny-v1.2.zt"),
    )
    .unwrap();
    let one = ztensor_io::Reader::new(&bytes[..], &Default::default()).unwrap();
    for zstd in [None, Some(3)] {
        let told = Arc::new(AtomicU64::new(0));
        let seen = Arc::clone(&told);
        let options = ztensor_v2::WriteOptions::default().zstd(zstd).progress(Arc::new(move |n| {
            seen.fetch_add(n, Ordering::Relaxed);
        }));
        let mut sink = Zt2Sink::to_output(Cursor::new(Vec::new())).with_options(options);
        sink.write_all(&one).unwrap();
        let decoded = sink.summary().unwrap().decoded;
        assert!(decoded > 0);
        assert_eq!(told.load(Ordering::Relaxed), decoded, "{zstd:?}");
    }
}

/// A part that fails to read while later ones are being compressed ahead (the bytes in flight
/// held to one frame, so the feeder waits on the writer): the write fails with that part's
/// error, and returns instead of waiting for parts nobody will take.
#[test]
fn a_part_failing_ahead_stops_the_write() {
    use ztensor_io::{WriteOptions as Zt1Options, Writer};
    let mut w = Writer::new(Vec::new(), ztensor_format::Version::V1_2).unwrap();
    let piece: Vec<u8> = (0..300_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
    for i in 0..12 {
        w.add_dense(
            &format!("p{i:02}"),
            &[300_000],
            ztensor_format::DType::F32,
            &piece,
            &Zt1Options::zstd(3),
        )
        .unwrap();
    }
    let mut bytes = w.finish().unwrap().0;
    let reader = ztensor_io::Reader::new(&bytes[..], &Default::default()).unwrap();
    let o = reader.manifest().objects().find(|o| o.name() == "p03").unwrap();
    let c = &o.object().components["data"];
    let middle = usize::try_from(c.offset + c.length / 2).unwrap();
    drop(reader);
    bytes[middle..middle + 16].fill(0x55);
    let damaged = ztensor_io::Reader::new(&bytes[..], &Default::default()).unwrap();
    for memory_budget in [0, 1] {
        let par = ztensor_par::ParOptions { memory_budget, ..Default::default() };
        let mut sink = Zt2Sink::to_output(Cursor::new(Vec::new()))
            .with_options(ztensor_v2::WriteOptions::default().zstd(Some(3)).par(par));
        let e = sink.write_all(&damaged).unwrap_err();
        assert!(e.to_string().contains("p03"), "{e}");
    }
}

/// Raw parts of a file read by position (the source's plain dense data, read straight into
/// the part's buffer when compressed ahead) give the bytes the same file gives from memory.
#[test]
fn parts_read_from_a_file_are_the_ones_from_memory() {
    use ztensor_io::{WriteOptions as Zt1Options, Writer};
    let mut w = Writer::new(Vec::new(), ztensor_format::Version::V1_2).unwrap();
    for i in 0..6u32 {
        let data: Vec<u8> = (0..50_000u32 * (i + 1)).flat_map(|x| (x ^ i).to_le_bytes()).collect();
        let n = u64::try_from(data.len() / 4).unwrap();
        w.add_dense(&format!("t{i}"), &[n], ztensor_format::DType::F32, &data, &Zt1Options::raw())
            .unwrap();
    }
    let bytes = w.finish().unwrap().0;
    let dir = ztensor_testkit::scratch("v2-direct");
    let path = dir.join("in.zt");
    std::fs::write(&path, &bytes).unwrap();
    let write = |source: &dyn TensorSource| {
        let mut sink = Zt2Sink::to_output(Cursor::new(Vec::new()))
            .with_options(ztensor_v2::WriteOptions::default().zstd(Some(3)));
        sink.write_all(source).unwrap();
        sink.into_inner().unwrap().into_inner()
    };
    let from_file = write(&ztensor_io::Reader::open(&path).unwrap());
    let from_memory = write(&ztensor_io::Reader::new(&bytes[..], &Default::default()).unwrap());
    assert!(from_file == from_memory, "the file's conversion differs from memory's");
}

/// An output that records the ranges the writer calls final ([`ztensor_v2::Output::written`])
/// and every write and cut after them.
struct Watched {
    inner: Cursor<Vec<u8>>,
    final_ranges: Vec<(u64, u64)>,
    /// Writes or cuts that touched a range already called final.
    broken: Vec<String>,
}

impl Watched {
    fn final_end(&self) -> u64 {
        self.final_ranges.last().map_or(0, |&(at, len)| at + len)
    }
}

impl std::io::Read for Watched {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.inner.read(buf)
    }
}

impl std::io::Write for Watched {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let at = self.inner.position();
        if at < self.final_end() && !buf.is_empty() {
            self.broken.push(format!("{} bytes written at {at}", buf.len()));
        }
        self.inner.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl std::io::Seek for Watched {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        self.inner.seek(to)
    }
}

impl ztensor_v2::Output for Watched {
    fn set_len(&mut self, len: u64) -> std::io::Result<()> {
        if len < self.final_end() {
            self.broken.push(format!("cut to {len}"));
        }
        ztensor_v2::Output::set_len(&mut self.inner, len)
    }

    fn written(&mut self, offset: u64, len: u64) {
        self.final_ranges.push((offset, len));
    }
}

/// The ranges the writer starts on their way to the disk are final: nothing is written into
/// them or cut from them afterwards (a blob found twice is cut after them), they follow one
/// another from the start of the file in steps of at least 8 MiB, and reporting them changes no
/// byte of the file.
#[test]
fn ranges_called_final_are_never_written_again() {
    use ztensor_io::{WriteOptions as Zt1Options, Writer};
    use ztensor_v2::WriteOptions;
    let mut w = Writer::new(Vec::new(), ztensor_format::Version::V1_2).unwrap();
    let raw = Zt1Options::raw();
    let f32s = ztensor_format::DType::F32;
    // Bytes zstd cannot shrink much (a multiplicative hash of the index), so that compressed
    // parts reach the step too.
    let tensor = |seed: u32| -> Vec<u8> {
        let mix =
            |i: u32| (u64::from(i) ^ u64::from(seed) << 32).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (0..1_500_000u32).flat_map(|i| mix(i).to_le_bytes()[4..].to_vec()).collect()
    };
    // 6 MB each: a range is called final after every second one. A copy of an earlier tensor
    // is written, found the same and cut; small ones fall between.
    for k in 0..6u8 {
        w.add_dense(&format!("t{k}"), &[1_500_000], f32s, &tensor(u32::from(k) + 3), &raw).unwrap();
        w.add_dense(&format!("t{k}.bias"), &[3], f32s, &[k; 12], &raw).unwrap();
    }
    w.add_dense("t2.copy", &[1_500_000], f32s, &tensor(5), &raw).unwrap();
    let one = ztensor_io::Reader::new(w.finish().unwrap().0, &Default::default()).unwrap();
    for options in [WriteOptions::default(), WriteOptions::default().zstd(Some(1))] {
        let mut plain = Zt2Sink::to_output(Cursor::new(Vec::new())).with_options(options.clone());
        plain.write_all(&one).unwrap();
        let expected = plain.into_inner().unwrap().into_inner();
        let watched = Watched {
            inner: Cursor::new(Vec::new()),
            final_ranges: Vec::new(),
            broken: Vec::new(),
        };
        let mut sink = Zt2Sink::to_output(watched).with_options(options.clone());
        sink.write_all(&one).unwrap();
        let summary = sink.summary().unwrap().clone();
        let watched = sink.into_inner().unwrap();
        assert!(watched.broken.is_empty(), "{:?}", watched.broken);
        assert!(watched.inner.get_ref() == &expected, "the bytes differ");
        assert_eq!(summary.blobs, 12, "the copy shares t2's blob");
        let ranges = &watched.final_ranges;
        assert!(!ranges.is_empty());
        assert_eq!(ranges[0].0, 0);
        for pair in ranges.windows(2) {
            assert_eq!(pair[0].0 + pair[0].1, pair[1].0, "{ranges:?}");
        }
        assert!(ranges.iter().all(|&(_, len)| len >= 8 << 20), "{ranges:?}");
        // Each ends on a 64 KiB boundary: a cut after it never falls inside one of its pages.
        assert!(ranges.iter().all(|&(at, len)| (at + len) % 65536 == 0), "{ranges:?}");
        // Everything before the manifest but the last step is called final.
        let file = File::open(expected, ztensor_v2::MAX_MANIFEST).unwrap();
        let m = file.manifest().unwrap();
        let blobs_end =
            m.objects.values().flat_map(|o| o.parts.values()).map(|p| p.blob.0 + p.blob.1);
        let blobs_end = blobs_end.max().unwrap();
        assert!(watched.final_end() <= blobs_end);
        assert!(blobs_end - watched.final_end() < (8 << 20) + 65536, "{ranges:?} of {blobs_end}");
    }
}
