//! The parallel writer writes exactly the bytes of the sequential one, whatever the thread
//! count: generated tensors (larger than the chunk size, zero-length, scalars, logical types),
//! every source encoding, every target version.

use proptest::prelude::*;
use ztensor_format::{DType, DigestAlgorithm, LogicalType, Options, Version};
use ztensor_io::{
    Compression, Coo, CopyOptions, Csr, DigestChoice, Reader, WriteOptions, Writer, copy_all,
};
use ztensor_par::{ParOptions, Tensor, repack, write_tensors};

fn bytes(n: usize, seed: u64) -> Vec<u8> {
    // Compressible but not trivial: a slow ramp with noise.
    (0..n)
        .map(|i| {
            ((i as u64 / 7).wrapping_mul(31)
                ^ seed.wrapping_mul(2654435761).rotate_left(i as u32 % 64)) as u8
                & 0x3f
        })
        .collect()
}

#[derive(Debug, Clone)]
struct Spec {
    shape: Vec<u64>,
    dtype: DType,
    logical: Option<LogicalType>,
    seed: u64,
}

fn spec() -> impl Strategy<Value = Spec> {
    let dtype =
        proptest::sample::select(vec![DType::F32, DType::BF16, DType::U8, DType::I64, DType::F64]);
    let shape = prop_oneof![
        Just(vec![]),
        Just(vec![0]),
        Just(vec![3, 0]),
        (1u64..300).prop_map(|n| vec![n]),
        (1u64..40, 1u64..40).prop_map(|(a, b)| vec![a, b]),
    ];
    (shape, dtype, any::<u64>(), any::<bool>()).prop_map(|(shape, dtype, seed, complex)| {
        let logical = (complex && dtype == DType::F32).then_some(LogicalType::Complex64);
        let shape = if logical.is_some() {
            shape.into_iter().map(|d| d.div_ceil(2)).collect()
        } else {
            shape
        };
        Spec { shape, dtype, logical, seed }
    })
}

fn options() -> impl Strategy<Value = WriteOptions> {
    let compression = prop_oneof![Just(Compression::Raw), (1i32..4).prop_map(Compression::Zstd)];
    let digest = proptest::option::of(proptest::sample::select(vec![
        DigestAlgorithm::Crc32c,
        DigestAlgorithm::Sha256,
        DigestAlgorithm::Blake3,
    ]));
    let chunk = proptest::sample::select(vec![None, Some(64u64), Some(256), Some(1 << 20)]);
    (compression, digest, chunk, any::<bool>()).prop_map(
        |(compression, digest, chunk_size, raw_if_not_smaller)| WriteOptions {
            compression,
            digest,
            chunk_size,
            raw_if_not_smaller,
        },
    )
}

fn data_of(spec: &Spec) -> Vec<u8> {
    let n: u64 = spec.shape.iter().product::<u64>()
        * spec.dtype.size()
        * spec.logical.as_ref().map_or(1, LogicalType::ratio);
    bytes(n as usize, spec.seed)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn write_tensors_matches_add_object(
        specs in proptest::collection::vec(spec(), 0..8),
        options in options(),
        version in proptest::sample::select(vec![Version::V0_1, Version::V1_1, Version::V1_2]),
        budget in prop_oneof![Just(1u64), Just(4096u64), Just(1u64 << 30)],
    ) {
        let specs: Vec<Spec> = specs.into_iter().filter(|s| version == Version::V1_2 || s.logical.is_none()).collect();
        let datas: Vec<Vec<u8>> = specs.iter().map(data_of).collect();
        let names: Vec<String> = (0..specs.len()).map(|i| format!("t{i}")).collect();
        let mut sequential = Writer::new(Vec::new(), version).unwrap();
        for ((s, d), n) in specs.iter().zip(&datas).zip(&names) {
            let spec = ztensor_io::ComponentSpec { role: "data", dtype: s.dtype, logical_type: s.logical.as_ref(), data: d };
            sequential.add_object(n, &s.shape, ztensor_format::Format::Dense, None, &[spec], &options).unwrap();
        }
        let expected = sequential.finish().unwrap().0;
        let tensors: Vec<Tensor<'_>> = specs
            .iter()
            .zip(&datas)
            .zip(&names)
            .map(|((s, d), n)| Tensor { name: n, shape: &s.shape, dtype: s.dtype, logical_type: s.logical.clone(), data: d, attributes: None })
            .collect();
        for threads in 1..=8 {
            let mut parallel = Writer::new(Vec::new(), version).unwrap();
            let par = ParOptions { threads, memory_budget: budget };
            write_tensors(&tensors, &mut parallel, &options, &par, &()).unwrap();
            prop_assert_eq!(&parallel.finish().unwrap().0, &expected, "threads {}", threads);
        }
    }

    #[test]
    fn repack_matches_copy_all(
        specs in proptest::collection::vec(spec(), 1..6),
        source_options in options(),
        target_options in options(),
        from in proptest::sample::select(vec![Version::V0_1, Version::V1_1, Version::V1_2]),
        to in proptest::sample::select(vec![Version::V0_1, Version::V1_1, Version::V1_2]),
        keep in any::<bool>(),
    ) {
        // A source file with dense tensors and, in between, sparse ones (written sequentially).
        let specs: Vec<Spec> = specs.into_iter().map(|mut s| { s.logical = None; s }).collect();
        let mut source = Writer::new(Vec::new(), from).unwrap();
        for (i, s) in specs.iter().enumerate() {
            source.add_dense(&format!("d{i}"), &s.shape, s.dtype, &data_of(s), &source_options).unwrap();
            if i == 1 {
                let values: Vec<u8> = [1.5f32, -2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
                source.add_csr("csr", &[2, 2], Csr { dtype: DType::F32, values: &values, indices: &[1, 0], indptr: &[0, 1, 2] }, &source_options).unwrap();
                source.add_coo("coo", &[5], Coo { dtype: DType::U8, values: &[9], coords: &[4] }, &source_options).unwrap();
            }
        }
        let file = source.finish().unwrap().0;
        let reader = Reader::new(&file[..], &Options::default()).unwrap();
        let copy = CopyOptions {
            compression: if keep { None } else { Some(target_options.compression) },
            digest: match &target_options.digest { None => DigestChoice::Drop, Some(a) if !keep => DigestChoice::Set(a.clone()), _ => DigestChoice::Keep },
            chunk_size: target_options.chunk_size,
            drop_attributes: false,
            raw_if_not_smaller: target_options.raw_if_not_smaller,
        };
        let mut sequential = Writer::new(Vec::new(), to).unwrap();
        copy_all(&reader, &mut sequential, &copy).unwrap();
        let expected = sequential.finish().unwrap().0;
        for threads in [1, 2, 3, 8] {
            let mut parallel = Writer::new(Vec::new(), to).unwrap();
            repack(&reader, &mut parallel, &copy, &ParOptions { threads, memory_budget: 1000 }, &()).unwrap();
            prop_assert_eq!(&parallel.finish().unwrap().0, &expected, "threads {}", threads);
        }
        // To a file, the workers write the pieces at their slots (positioned writes) while
        // the calling thread writes everything else: the same bytes.
        for threads in [1, 3] {
            let dir = ztensor_testkit::scratch("identical");
            let path = dir.join("out.zt");
            let mut file = ztensor_io::FileWriter::create(&path, to).unwrap();
            repack(&reader, file.writer_mut(), &copy, &ParOptions { threads, memory_budget: 1000 }, &()).unwrap();
            file.finish().unwrap();
            let written = std::fs::read(&path).unwrap();
            prop_assert_eq!(&written, &expected, "to a file, threads {}", threads);
        }
        // The zTensor sink, copying, carries a zTensor source exactly as repack does, and a
        // view of some of its objects as copying those one by one does.
        use ztensor_io::TensorSink;
        let par = ParOptions { threads: 3, memory_budget: 1000 };
        let mut sunk = Writer::new(Vec::new(), to).unwrap();
        let n = ztensor_par::ZtSink::new(&mut sunk, WriteOptions::raw(), &par, &())
            .copying(copy.clone())
            .write_all(&reader)
            .unwrap();
        prop_assert_eq!(n, reader.manifest().len());
        prop_assert_eq!(&sunk.finish().unwrap().0, &expected, "the sink, copying");
        let without_d0 = ztensor_io::Excluding::new(&reader, |name| name == "d0");
        let mut sunk = Writer::new(Vec::new(), to).unwrap();
        let n = ztensor_par::ZtSink::new(&mut sunk, WriteOptions::raw(), &par, &())
            .copying(copy.clone())
            .write_all(&without_d0)
            .unwrap();
        prop_assert_eq!(n, reader.manifest().len() - 1);
        let mut one_by_one = Writer::new(Vec::new(), to).unwrap();
        for object in reader.objects().filter(|o| o.name() != "d0") {
            ztensor_io::copy_object(object, &mut one_by_one, &copy).unwrap();
        }
        prop_assert_eq!(&sunk.finish().unwrap().0, &one_by_one.finish().unwrap().0, "a view, copying");
    }
}

#[test]
fn big_endian_v0_1_sources_repack_identically() {
    use ztensor_format::{ByteOrder, Component, Format, Object};
    let values: Vec<u8> = (0..100u32).flat_map(|v| (v as f32).to_be_bytes()).collect();
    let mut c = Component::new(DType::F32, 0, values.len() as u64);
    c.set_byte_order(ByteOrder::Big);
    let mut w = Writer::new(Vec::new(), Version::V0_1).unwrap();
    w.add_stored(
        Object::new("be", vec![100], Format::Dense),
        &[ztensor_io::StoredComponent { role: "data", component: c, bytes: &values }],
    )
    .unwrap();
    let file = w.finish().unwrap().0;
    let reader = Reader::new(&file[..], &Options::default()).unwrap();
    let copy = CopyOptions {
        compression: Some(Compression::Zstd(1)),
        digest: DigestChoice::Set(DigestAlgorithm::Sha256),
        chunk_size: Some(64),
        drop_attributes: false,
        raw_if_not_smaller: false,
    };
    let mut sequential = Writer::new(Vec::new(), Version::V1_2).unwrap();
    copy_all(&reader, &mut sequential, &copy).unwrap();
    let mut parallel = Writer::new(Vec::new(), Version::V1_2).unwrap();
    repack(&reader, &mut parallel, &copy, &ParOptions::with_threads(2), &()).unwrap();
    let (a, b) = (sequential.finish().unwrap().0, parallel.finish().unwrap().0);
    assert_eq!(a, b);
    let out = Reader::new(&b[..], &Options::default()).unwrap();
    assert_eq!(out.component("be", "data").and_then(|c| c.read_as::<f32>()).unwrap()[99], 99.0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// Tensors whose raw bytes lie in a source (a file's slice, and a one-byte-at-a-time
    /// source that cannot be borrowed from), written through the zTensor sink, are written
    /// exactly as the same tensors in memory.
    #[test]
    fn raw_tensors_of_a_source_match_write_tensors(
        specs in proptest::collection::vec(spec(), 0..6),
        options in options(),
        threads in 1usize..4,
    ) {
        let datas: Vec<Vec<u8>> = specs.iter().map(data_of).collect();
        let names: Vec<String> = (0..specs.len()).map(|i| format!("t{i}")).collect();
        let par = ParOptions { threads, memory_budget: 300 };
        let tensors: Vec<Tensor<'_>> = specs.iter().zip(&datas).zip(&names)
            .map(|((s, d), n)| Tensor { name: n, shape: &s.shape, dtype: s.dtype, logical_type: s.logical.clone(), data: d, attributes: None })
            .collect();
        let mut expected = Writer::new(Vec::new(), Version::V1_2).unwrap();
        write_tensors(&tensors, &mut expected, &options, &par, &()).unwrap();
        let expected = expected.finish().unwrap().0;
        // The same tensors raw in a file: the source.
        let mut file = Writer::new(Vec::new(), Version::V1_2).unwrap();
        write_tensors(&tensors, &mut file, &WriteOptions::raw(), &par, &()).unwrap();
        let file = file.finish().unwrap().0;
        let borrowed = Reader::new(&file[..], &Options::default()).unwrap();
        prop_assert_eq!(&sunk(&borrowed, &options, &par).unwrap(), &expected);
        let chunked = Reader::new(ztensor_io::Chunked::new(&file[..], 1), &Options::default()).unwrap();
        prop_assert_eq!(&sunk(&chunked, &options, &par).unwrap(), &expected);
    }
}

/// Every object of `source` through the zTensor sink into a new 1.2 file.
fn sunk(
    source: &dyn ztensor_io::TensorSource,
    options: &WriteOptions,
    par: &ParOptions,
) -> Result<Vec<u8>, ztensor_io::Error> {
    use ztensor_io::TensorSink;
    let mut w = Writer::new(Vec::new(), Version::V1_2)?;
    ztensor_par::ZtSink::new(&mut w, options.clone(), par, &()).write_all(source)?;
    Ok(w.finish()?.0)
}

/// A source whose bytes in `failing` cannot be read (a disk error, a file cut short under us).
struct Failing<'a> {
    bytes: &'a [u8],
    failing: std::ops::Range<u64>,
}

impl ztensor_io::ReadAt for Failing<'_> {
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let end = offset + buf.len() as u64;
        if offset < self.failing.end && end > self.failing.start {
            return Err(std::io::Error::other("the disk refuses"));
        }
        ztensor_io::ReadAt::read_exact_at(&self.bytes, offset, buf)
    }
}

/// A raw tensor whose bytes cannot be read is an error naming the read, not a file.
#[test]
fn a_source_that_fails_to_read_is_an_error() {
    let data = [7u8; 256];
    let tensors = [Tensor {
        name: "t",
        shape: &[64],
        dtype: DType::F32,
        logical_type: None,
        data: &data,
        attributes: None,
    }];
    let par = ParOptions::with_threads(2);
    let mut file = Writer::new(Vec::new(), Version::V1_2).unwrap();
    write_tensors(&tensors, &mut file, &WriteOptions::raw(), &par, &()).unwrap();
    let file = file.finish().unwrap().0;
    let reader = Reader::new(&file[..], &Options::default()).unwrap();
    let at = reader.component("t", "data").unwrap().model().offset;
    let failing = Failing { bytes: &file, failing: at + 100..at + 101 };
    let reader = Reader::new(failing, &Options::default()).unwrap();
    let e = sunk(&reader, &WriteOptions::zstd(1), &par).unwrap_err();
    assert!(e.os_error().is_some(), "{e}");
    assert!(e.to_string().contains("the disk refuses"), "{e}");
}

/// Objects of a 1.x file may share a blob. The engine leaves them to `copy_object`, which
/// writes the blob once (stored, or encoded again for dense aliases): the same bytes as the
/// sequential copy, whatever the thread count, and about the size of the input.
#[test]
fn shared_blobs_are_copied_once_identically() {
    use ztensor_format::{Container, DType};
    use ztensor_io::TensorSink;
    const COUNT: usize = 300;
    let data = bytes(256 << 10, 7);
    let mut w = Writer::new(Vec::new(), Version::V1_1).unwrap();
    w.add_dense("a.0", &[256 << 10], DType::U8, &data, &WriteOptions::raw()).unwrap();
    w.add_dense("own", &[64 << 10], DType::U8, &bytes(64 << 10, 9), &WriteOptions::raw()).unwrap();
    let shared = w.manifest().object(0).unwrap();
    let mut manifest = w.manifest().to_manifest().unwrap();
    for i in 1..COUNT {
        let mut o = shared.clone();
        o.name = format!("a.{i}");
        manifest.objects.push(o);
    }
    let mut file = w.finish().unwrap().0;
    let old = Reader::new(&file[..], &Options::default()).unwrap().manifest().location();
    file.truncate(usize::try_from(old.offset).unwrap());
    let cbor = manifest.encode().unwrap();
    file.extend(&cbor);
    file.extend(Container::V1.encode_trailer(cbor.len() as u64));
    let reader = Reader::new(&file[..], &Options::default()).unwrap();

    let encoded = CopyOptions {
        compression: Some(Compression::Zstd(1)),
        digest: DigestChoice::Set(DigestAlgorithm::Crc32c),
        chunk_size: Some(64 << 10),
        ..CopyOptions::default()
    };
    for copy in [CopyOptions::default(), encoded] {
        for to in [Version::V1_1, Version::V1_2] {
            let mut sequential = Writer::new(Vec::new(), to).unwrap();
            copy_all(&reader, &mut sequential, &copy).unwrap();
            let expected = sequential.finish().unwrap().0;
            assert!(expected.len() < file.len() + file.len() / 4, "{}", expected.len());
            for threads in [1, 3] {
                let par = ParOptions::with_threads(threads);
                let mut parallel = Writer::new(Vec::new(), to).unwrap();
                repack(&reader, &mut parallel, &copy, &par, &()).unwrap();
                assert_eq!(parallel.finish().unwrap().0, expected, "threads {threads}");
                let dir = ztensor_testkit::scratch("identical");
                let path = dir.join("out.zt");
                let mut out = ztensor_io::FileWriter::create(&path, to).unwrap();
                repack(&reader, out.writer_mut(), &copy, &par, &()).unwrap();
                out.finish().unwrap();
                let written = std::fs::read(&path).unwrap();
                assert_eq!(written, expected, "to a file, threads {threads}");
            }
            // Without the object the others alias, the next one carries the blob.
            let without = ztensor_io::Excluding::new(&reader, |name| name == "a.0");
            let mut sunk = Writer::new(Vec::new(), to).unwrap();
            ztensor_par::ZtSink::new(
                &mut sunk,
                WriteOptions::raw(),
                &ParOptions::with_threads(3),
                &(),
            )
            .copying(copy.clone())
            .write_all(&without)
            .unwrap();
            let mut one_by_one = Writer::new(Vec::new(), to).unwrap();
            for object in reader.objects().filter(|o| o.name() != "a.0") {
                ztensor_io::copy_object(object, &mut one_by_one, &copy).unwrap();
            }
            let one_by_one = one_by_one.finish().unwrap().0;
            assert_eq!(sunk.finish().unwrap().0, one_by_one);
            let back = Reader::new(&one_by_one[..], &Options::default()).unwrap();
            assert_eq!(back.component("a.1", "data").unwrap().decoded_verified().unwrap(), data);
            assert!(one_by_one.len() < file.len() + file.len() / 4);
        }
    }
}
