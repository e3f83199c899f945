//! Conversion between versions: everything the target can express survives with the same
//! decoded bytes; what it cannot express is refused, naming the object.

use ztensor_format::{
    DType, DigestAlgorithm, ErrorKind as Rule, Format, LogicalType, MxType, Options, Version,
    text_map,
};
use ztensor_io::{
    ComponentSpec, Coo, CopyOptions, Csr, DigestChoice, Reader, WriteOptions, Writer, copy_all,
    remove_objects, rewrite,
};

fn sample(version: Version) -> Vec<u8> {
    let mut w = Writer::new(Vec::new(), version).unwrap();
    let f32s: Vec<u8> = [1.0f32, -2.0, 0.5, 8.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    w.add_dense(
        "dense",
        &[2, 2],
        DType::F32,
        &f32s,
        &WriteOptions::zstd(3).with_digest(DigestAlgorithm::Crc32c),
    )
    .unwrap();
    w.add_dense("bool", &[3], DType::Bool, &[1, 0, 1], &WriteOptions::raw()).unwrap();
    let values: Vec<u8> = [5i32, 6, 7].iter().flat_map(|v| v.to_le_bytes()).collect();
    w.add_csr(
        "csr",
        &[2, 3],
        Csr { dtype: DType::I32, values: &values, indices: &[0, 2, 1], indptr: &[0, 2, 3] },
        &WriteOptions::raw(),
    )
    .unwrap();
    w.add_coo(
        "coo",
        &[4],
        Coo { dtype: DType::U8, values: &[3, 4], coords: &[1, 3] },
        &WriteOptions::zstd(1),
    )
    .unwrap();
    w.finish().unwrap().0
}

fn convert(file: &[u8], to: Version, options: &CopyOptions) -> ztensor_io::Result<Vec<u8>> {
    let reader = Reader::new(file, &Options::default())?;
    let mut w = Writer::new(Vec::new(), to)?;
    copy_all(&reader, &mut w, options)?;
    Ok(w.finish()?.0)
}

/// Each object's name and its decoded components (role, dtype, bytes), sorted by name.
type Decoded = Vec<(String, Vec<(String, DType, Vec<u8>)>)>;

fn decoded(file: &[u8]) -> Decoded {
    let reader = Reader::new(file, &Options::strict()).unwrap();
    let mut out: Vec<_> = reader
        .manifest()
        .objects()
        .map(|o| {
            let data = reader.read_object(o.name()).unwrap();
            let parts = data
                .components
                .iter()
                .map(|(r, c)| (r.clone(), c.dtype, c.bytes.to_vec()))
                .collect();
            (o.name().to_owned(), parts)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn every_version_converts_to_every_version() {
    let versions = [Version::V0_1, Version::V1_1, Version::V1_2];
    let reencode = CopyOptions {
        compression: Some(ztensor_io::Compression::Zstd(1)),
        digest: DigestChoice::Set(DigestAlgorithm::Blake3),
        chunk_size: Some(8),
        drop_attributes: false,
        raw_if_not_smaller: false,
    };
    for from in versions {
        let source = sample(from);
        let expected = decoded(&source);
        for to in versions {
            for options in [CopyOptions::default(), reencode.clone()] {
                let out = convert(&source, to, &options)
                    .unwrap_or_else(|e| panic!("{from} -> {to}: {e}"));
                assert_eq!(Reader::new(&out[..], &Options::default()).unwrap().version(), to);
                assert_eq!(decoded(&out), expected, "{from} -> {to}");
                let reader = Reader::new(&out[..], &Options::default()).unwrap();
                for o in reader.manifest().objects() {
                    for role in o.object().components.keys() {
                        reader.component(o.name(), role).and_then(|c| c.verify()).unwrap();
                    }
                }
            }
        }
    }
}

#[test]
fn unrepresentable_content_is_refused_by_name() {
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    let t = LogicalType::F8E4M3Fnuz;
    let spec =
        ComponentSpec { role: "data", dtype: DType::U8, logical_type: Some(&t), data: &[1, 2] };
    w.add_object("amd_fp8", &[2], Format::Dense, None, &[spec], &WriteOptions::raw()).unwrap();
    let file = w.finish().unwrap().0;
    let err = convert(&file, Version::V1_1, &CopyOptions::default()).unwrap_err();
    assert_eq!(err.rule(), Some(Rule::Unrepresentable));
    assert!(err.to_string().contains("amd_fp8"), "{err}");
    assert_eq!(
        convert(&file, Version::V0_1, &CopyOptions::default()).unwrap_err().rule(),
        Some(Rule::Unrepresentable)
    );

    let mut w = Writer::new(Vec::new(), Version::V1_1).unwrap();
    w.set_attributes(
        ztensor_format::Attributes::try_from(text_map([("license", "MIT".into())])).unwrap(),
    )
    .unwrap();
    let file = w.finish().unwrap().0;
    assert_eq!(
        convert(&file, Version::V0_1, &CopyOptions::default()).unwrap_err().rule(),
        Some(Rule::Unrepresentable)
    );
    assert!(convert(&file, Version::V1_2, &CopyOptions::default()).is_ok());
}

#[test]
fn remove_writes_a_new_file_without_the_named_objects() {
    let d = ztensor_testkit::scratch("io-remove");
    let input = d.join("in.zt");
    std::fs::write(&input, sample(Version::V1_2)).unwrap();
    let output = d.join("out.zt");
    remove_objects(&input, &output, &["csr", "bool"], &Options::default()).unwrap();
    let names: Vec<_> =
        decoded(&std::fs::read(&output).unwrap()).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["coo", "dense"]);
    let err = remove_objects(&input, &output, &["nope"], &Options::default()).unwrap_err();
    assert!(matches!(err.kind(), ztensor_io::ErrorKind::NotFound { .. }));
}

#[test]
fn replace_an_object_in_place() {
    let d = ztensor_testkit::scratch("io-replace");
    let path = d.join("m.zt");
    std::fs::write(&path, sample(Version::V1_2)).unwrap();
    // SAFETY: the file is replaced by rename, never modified, while this map is alive.
    let old = unsafe { Reader::open_mmap(&path, &Options::default()) }.unwrap();
    let new: Vec<u8> = [9.0f32, 8.0, 7.0, 6.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    rewrite(&path, &path, &["dense"], &Options::default(), |w| {
        w.add_dense("dense", &[4], DType::F32, &new, &WriteOptions::raw())
    })
    .unwrap();
    let reader = Reader::open(&path).unwrap();
    assert_eq!(
        reader.component("dense", "data").and_then(|c| c.read_as::<f32>()).unwrap(),
        [9.0, 8.0, 7.0, 6.0]
    );
    assert_eq!(reader.object("dense").unwrap().model().shape, [4]);
    assert_eq!(reader.manifest().len(), 4);
    // The old mapping still sees the old object.
    assert_eq!(
        old.component("dense", "data").and_then(|c| c.read_as::<f32>()).unwrap(),
        [1.0, -2.0, 0.5, 8.0]
    );
    // A failing edit leaves the file as it was.
    let before = std::fs::read(&path).unwrap();
    let err = rewrite(&path, &path, &["bool"], &Options::default(), |w| {
        w.add_dense("dense", &[1], DType::U8, &[1], &WriteOptions::raw())
    })
    .unwrap_err();
    assert_eq!(err.rule(), Some(Rule::DuplicateName));
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn sparse_objects_keep_their_attributes_through_every_conversion() {
    let attrs = text_map([("note", "kept".into())]);
    let values: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    for from in [Version::V0_1, Version::V1_1, Version::V1_2] {
        let mut w = Writer::new(Vec::new(), from).unwrap();
        let csr = Csr { dtype: DType::F32, values: &values, indices: &[0, 1], indptr: &[0, 1, 2] };
        w.add_csr_object(
            "csr",
            &[2, 2],
            csr,
            Some(ztensor_format::Attributes::try_from(attrs.clone()).unwrap()),
            &WriteOptions::raw(),
        )
        .unwrap();
        let coo = Coo { dtype: DType::F32, values: &values, coords: &[0, 3] };
        w.add_coo_object(
            "coo",
            &[4],
            coo,
            Some(ztensor_format::Attributes::try_from(attrs.clone()).unwrap()),
            &WriteOptions::raw(),
        )
        .unwrap();
        let file = w.finish().unwrap().0;
        for to in [Version::V0_1, Version::V1_1, Version::V1_2] {
            for options in [
                CopyOptions::default(),
                CopyOptions {
                    compression: Some(ztensor_io::Compression::Zstd(1)),
                    ..CopyOptions::default()
                },
            ] {
                let out = convert(&file, to, &options).unwrap();
                let reader = Reader::new(&out[..], &Options::default()).unwrap();
                for name in ["csr", "coo"] {
                    assert_eq!(
                        reader.object(name).unwrap().model().attributes().map(|a| a.to_value()),
                        Some(attrs.clone()),
                        "{from} -> {to} {name}"
                    );
                }
            }
        }
    }
}

/// A source that is not in memory: it records the longest read made of it, and fails reads
/// that reach into `bad`.
struct Longest<'a> {
    bytes: &'a [u8],
    longest: std::sync::atomic::AtomicUsize,
    bad: std::ops::Range<u64>,
}

impl<'a> Longest<'a> {
    fn new(bytes: &'a [u8], bad: std::ops::Range<u64>) -> Longest<'a> {
        Longest { bytes, longest: Default::default(), bad }
    }
}

impl ztensor_io::ReadAt for Longest<'_> {
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.longest.fetch_max(buf.len(), std::sync::atomic::Ordering::Relaxed);
        if offset < self.bad.end && self.bad.start < offset + buf.len() as u64 {
            return Err(std::io::Error::other("a bad sector"));
        }
        ztensor_io::ReadAt::read_exact_at(&self.bytes, offset, buf)
    }
}

#[test]
fn stored_bytes_of_a_source_not_in_memory_are_copied_a_piece_at_a_time() {
    // A 9 MiB raw tensor, a zstd one with a digest, and a small one.
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    let big: Vec<u8> = (0..9u32 << 20).map(|i| (i % 251) as u8).collect();
    w.add_dense("big", &[9 << 20], DType::U8, &big, &WriteOptions::raw()).unwrap();
    let digested = WriteOptions::zstd(1).with_digest(DigestAlgorithm::Sha256);
    w.add_dense("packed", &[9 << 20], DType::U8, &big, &digested).unwrap();
    w.add_dense("small", &[3], DType::U8, &[1, 2, 3], &WriteOptions::raw()).unwrap();
    let file = w.finish().unwrap().0;
    let copy = CopyOptions::default();
    // The same bytes as the copy from memory.
    let mut expected = Writer::new(Vec::new(), Version::V1_2).unwrap();
    copy_all(&Reader::new(&file[..], &Options::default()).unwrap(), &mut expected, &copy).unwrap();
    let expected = expected.finish().unwrap().0;
    let source = Longest::new(&file, 0..0);
    let reader = Reader::new(&source as &dyn ztensor_io::ReadAt, &Options::default()).unwrap();
    let mut out = Writer::new(Vec::new(), Version::V1_2).unwrap();
    copy_all(&reader, &mut out, &copy).unwrap();
    assert!(out.finish().unwrap().0 == expected, "differs from the copy from memory");
    // No read was of a whole tensor: 4 MiB pieces.
    let longest = source.longest.load(std::sync::atomic::Ordering::Relaxed);
    assert!(longest <= 4 << 20, "a read of {longest} bytes");
    // Into a file (pieces written at their offsets): the same bytes.
    let dir = std::env::temp_dir().join(format!("zt-io-pieces-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let target = dir.join("copy.zt");
    let mut file_out = ztensor_io::FileWriter::create(&target, Version::V1_2).unwrap();
    copy_all(&reader, file_out.writer_mut(), &copy).unwrap();
    file_out.finish().unwrap();
    let written = std::fs::read(&target).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(written == expected, "the file differs from the copy from memory");
    // A read failing in the middle of a tensor fails the copy, naming where.
    let at = reader.object("big").unwrap().model().components["data"].offset + (5 << 20);
    let failing = Longest::new(&file, at..at + 1);
    let reader = Reader::new(&failing as &dyn ztensor_io::ReadAt, &Options::default()).unwrap();
    let mut out = Writer::new(Vec::new(), Version::V1_2).unwrap();
    let e = copy_all(&reader, &mut out, &copy).unwrap_err();
    assert!(e.to_string().contains("a bad sector"), "{e}");
    assert!(e.to_string().contains("reading byte"), "{e}");
}

/// What `read_each_at` handed on: the bytes, and the slices' lengths.
fn handed(
    source: &dyn ztensor_io::ReadAt,
    offset: u64,
    len: u64,
    scratch: usize,
) -> std::io::Result<(Vec<u8>, Vec<usize>)> {
    let (mut bytes, mut lens) = (Vec::new(), Vec::new());
    let mut scratch = vec![0u8; scratch];
    source.read_each_at(offset, len, &mut scratch, &mut |slice| {
        bytes.extend_from_slice(slice);
        lens.push(slice.len());
        Ok(())
    })?;
    Ok((bytes, lens))
}

#[test]
fn read_each_at_hands_on_the_bytes_in_order_a_piece_at_a_time() {
    use ztensor_io::ReadAt;
    let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 253) as u8).collect();
    // A source not in memory: read through the scratch, at most its length at a time.
    let source = Longest::new(&data, 0..0);
    let (bytes, lens) = handed(&source, 123, 5_000, 1_024).unwrap();
    assert!(bytes == data[123..5_123]);
    assert_eq!(lens, [1_024, 1_024, 1_024, 1_024, 904]);
    assert!(source.longest.load(std::sync::atomic::Ordering::Relaxed) <= 1_024);
    // A source in memory: its own bytes, uncopied, in pieces as long as the scratch.
    let slice: &[u8] = &data;
    let mut scratch = [0u8; 4_096];
    let mut inside = 0;
    slice
        .read_each_at(1_000, 9_000, &mut scratch, &mut |piece| {
            let ours = data.as_ptr_range();
            assert!(ours.contains(&piece.as_ptr()), "a copy was handed on");
            assert!(piece.len() <= 4_096);
            inside += piece.len();
            Ok(())
        })
        .unwrap();
    assert_eq!(inside, 9_000);
    // Nothing at all: no call.
    assert_eq!(handed(&source, 10_000, 0, 16).unwrap().1.len(), 0);
    // Past the end, or overflowing: UnexpectedEof, nothing handed on.
    for (offset, len) in [(9_999, 2), (u64::MAX, 2), (0, 10_001)] {
        for s in [&source as &dyn ztensor_io::ReadAt, &slice] {
            let mut calls = 0;
            let e = s
                .read_each_at(offset, len, &mut [0u8; 64], &mut |_| {
                    calls += 1;
                    Ok(())
                })
                .unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof, "{offset} {len}");
            assert_eq!(calls, 0);
        }
    }
    // An empty scratch is refused for a read that needs one.
    let e = handed(&source, 0, 10, 0).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    // The first error `each` returns comes back as it is, and nothing is handed on after it.
    for s in [&source as &dyn ztensor_io::ReadAt, &slice] {
        let mut calls = 0;
        let e = s
            .read_each_at(0, 10_000, &mut [0u8; 1_000], &mut |_| {
                calls += 1;
                if calls == 3 { Err(std::io::Error::other("the disk is full")) } else { Ok(()) }
            })
            .unwrap_err();
        assert_eq!(e.to_string(), "the disk is full");
        assert_eq!(calls, 3);
    }
    // A read failing part-way stops there: what came before was handed on.
    let failing = Longest::new(&data, 2_500..2_501);
    let mut got = Vec::new();
    let e = failing
        .read_each_at(0, 10_000, &mut [0u8; 1_000], &mut |piece| {
            got.extend_from_slice(piece);
            Ok(())
        })
        .unwrap_err();
    assert!(e.to_string().contains("a bad sector"), "{e}");
    assert!(got == data[..2_000]);
}

/// A 1.x writer takes a microscaling logical type as any unknown one, one byte an element (the
/// 1.2 file it writes is valid); the same type's packed form (zTensor 2's FP4: five values in
/// three bytes) has no 1.x form, and is refused naming zTensor 2 rather than as a size error.
#[test]
fn microscaling_types_one_byte_an_element_are_written_and_packed_ones_refused() {
    for mx in MxType::ALL {
        let t = mx.logical_type();
        let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
        let spec =
            ComponentSpec { role: "data", dtype: DType::U8, logical_type: Some(&t), data: &[1; 5] };
        w.add_object("one_a_byte", &[5], Format::Dense, None, &[spec], &WriteOptions::raw())
            .unwrap();
        let file = w.finish().unwrap().0;
        let back = Reader::new(&file[..], &Options::default()).unwrap();
        let o = back.manifest().objects().next().unwrap();
        assert_eq!(o.object().components["data"].logical_type, Some(t.clone()));
        if mx.bits() == 8 {
            continue;
        }
        let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
        let packed = vec![0u8; usize::try_from(mx.stored_len(5).unwrap()).unwrap()];
        let spec =
            ComponentSpec { role: "data", dtype: DType::U8, logical_type: Some(&t), data: &packed };
        let err = w
            .add_object("packed", &[5], Format::Dense, None, &[spec], &WriteOptions::raw())
            .unwrap_err();
        assert_eq!(err.rule(), Some(Rule::Unrepresentable), "{err}");
        assert!(err.to_string().contains("write zTensor 2"), "{err}");
    }
}
