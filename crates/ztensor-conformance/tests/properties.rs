use proptest::prelude::*;
use ztensor_conformance::model::{Expect, Kind, Model, ObjectSpec, check, check_bytes};
use ztensor_format::{DType, DigestAlgorithm, Options, Version};
use ztensor_io::{
    Chunked, Compression, CopyOptions, DigestChoice, Reader, WriteOptions, Writer, copy_all,
};
use ztensor_par::{ParOptions, repack};

fn model() -> impl Strategy<Value = Model> {
    proptest::collection::vec(any::<u8>(), 0..160).prop_map(|b| Model::from_bytes(&b))
}

fn written(model: &Model) -> (Vec<u8>, Vec<Expect>) {
    model.write().unwrap_or_else(|e| panic!("the writer refused {model:?}: {e}"))
}

/// Through a byte slice, a one-byte-at-a-time source, a file and a memory map.
fn every_source(file: &[u8], expect: &[Expect]) -> Result<(), TestCaseError> {
    check_bytes(file, expect).map_err(TestCaseError::fail)?;
    check_bytes(Chunked::new(file, 1), expect).map_err(TestCaseError::fail)?;
    // One directory for every case (files named by content), kept while the binary runs.
    static DIR: std::sync::OnceLock<ztensor_testkit::Scratch> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| ztensor_testkit::scratch("conformance"));
    let path = dir.join(format!("{}.zt", &ztensor_io::codec::sha256_hex(file)[..16]));
    std::fs::write(&path, file).unwrap();
    let strict = Options::strict();
    check(&Reader::open_with(&path, &strict).unwrap(), expect).map_err(TestCaseError::fail)?;
    // SAFETY: the test owns the file and does not change it while it is mapped.
    let mapped = unsafe { Reader::open_mmap(&path, &strict) }.unwrap();
    check(&mapped, expect).map_err(TestCaseError::fail)?;
    drop(mapped);
    std::fs::remove_file(&path).unwrap();
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Write → read identity for every version, through every kind of source.
    #[test]
    fn write_then_read_gives_back_the_model(model in model()) {
        let (file, expect) = written(&model);
        every_source(&file, &expect)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Repacking a generated file on 1–4 threads writes the bytes of the sequential copy,
    /// whatever the objects' kinds (sparse and quantized ones included) and target version.
    #[test]
    fn parallel_repack_equals_sequential_copy(
        model in model(),
        to in proptest::sample::select(vec![Version::V0_1, Version::V1_1, Version::V1_2]),
        zstd in any::<bool>(),
    ) {
        // Only what the target version can represent.
        let mut model = model;
        let logical = ztensor_conformance::model::logical_types(to);
        model.objects.retain(|o| match &o.kind {
            Kind::Quantized => to != Version::V0_1,
            Kind::Logical(t) => logical.contains(t),
            _ => true,
        });
        let (file, _) = written(&model);
        let reader = Reader::new(&file[..], &Options::default()).unwrap();
        let copy = CopyOptions {
            compression: zstd.then_some(Compression::Zstd(3)),
            digest: if zstd { DigestChoice::Set(DigestAlgorithm::Blake3) } else { DigestChoice::Keep },
            chunk_size: Some(100),
            drop_attributes: false,
            raw_if_not_smaller: zstd,
        };
        let mut sequential = Writer::new(Vec::new(), to).unwrap();
        copy_all(&reader, &mut sequential, &copy).unwrap();
        let expected = sequential.finish().unwrap().0;
        for threads in 1..=4 {
            let mut parallel = Writer::new(Vec::new(), to).unwrap();
            let par = ParOptions { threads, memory_budget: 256 };
            repack(&reader, &mut parallel, &copy, &par, &()).unwrap();
            prop_assert_eq!(&parallel.finish().unwrap().0, &expected, "threads {}", threads);
        }
    }
}

/// Every version × dtype × encoding × digest × object format, exhaustively (the properties
/// above sample the same space with random shapes and mixes).
#[test]
fn every_version_dtype_encoding_digest_and_format() {
    let digests = [
        None,
        Some(DigestAlgorithm::Crc32c),
        Some(DigestAlgorithm::Sha256),
        Some(DigestAlgorithm::Blake3),
    ];
    let mut combinations = 0;
    for version in [Version::V0_1, Version::V1_1, Version::V1_2] {
        for compression in [Compression::Raw, Compression::Zstd(1)] {
            for digest in &digests {
                // A 16-byte chunk splits most components into several frames.
                let options = WriteOptions {
                    compression,
                    digest: digest.clone(),
                    chunk_size: Some(16),
                    raw_if_not_smaller: false,
                };
                let object = |kind, shape: &[u64], seed| ObjectSpec {
                    kind,
                    shape: shape.to_vec(),
                    seed,
                    options: options.clone(),
                };
                let mut objects = Vec::new();
                for (i, dtype) in DType::ALL.into_iter().enumerate() {
                    let seed = i as u64;
                    objects.push(object(Kind::Dense(dtype), &[2, 3], seed));
                    objects.push(object(Kind::Csr(dtype), &[3, 4], seed));
                    objects.push(object(Kind::Coo(dtype), &[3, 2], seed + 1));
                }
                if version != Version::V0_1 {
                    objects.push(object(Kind::Quantized, &[], 7));
                    for t in ztensor_conformance::model::logical_types(version) {
                        objects.push(object(Kind::Logical(t.clone()), &[2, 2], 3));
                    }
                }
                combinations += objects.len();
                let (file, expect) = written(&Model { version, objects });
                check_bytes(&file[..], &expect).unwrap();
            }
        }
    }
    // 3 versions × 2 encodings × 4 digests × (13 dtypes × 3 formats), plus quantized and the
    // logical types of 1.1 (4) and 1.2 (6).
    assert_eq!(combinations, 3 * 2 * 4 * 39 + 2 * 4 * (1 + 4) + 2 * 4 * (1 + 6));
}
