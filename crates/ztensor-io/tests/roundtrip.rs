//! Round trips for every version × dtype × encoding × digest × object format, through a byte
//! slice, a file, a memory map and a one-byte-at-a-time source; and many threads on one reader.

use std::collections::BTreeMap;

use proptest::prelude::*;
use ztensor_format::{DType, DigestAlgorithm, Format, LogicalType, Options, Version};
use ztensor_io::{
    Chunked, ComponentSpec, Compression, Coo, Csr, DigestCheck, FileSource, ReadAt, Reader,
    WriteOptions, Writer,
};

/// What one generated object should read back as: format, shape, and role → (dtype, logical, bytes).
#[derive(Debug, Clone)]
struct Expect {
    name: String,
    format: Format,
    shape: Vec<u64>,
    components: BTreeMap<String, (DType, Option<LogicalType>, Vec<u8>)>,
    options: WriteOptions,
}

#[derive(Debug, Clone)]
enum Kind {
    Dense(DType),
    Csr(DType),
    Coo(DType),
    Quantized,
    Logical(LogicalType),
}

fn kind(version: Version) -> BoxedStrategy<Kind> {
    let dtype = proptest::sample::select(DType::ALL.to_vec());
    let base = prop_oneof![
        4 => dtype.clone().prop_map(Kind::Dense),
        1 => dtype.clone().prop_map(Kind::Csr),
        1 => dtype.prop_map(Kind::Coo),
    ];
    let logical = match version {
        Version::V0_1 => return base.boxed(),
        Version::V1_1 => vec![
            LogicalType::F8E4M3Fn,
            LogicalType::F8E5M2,
            LogicalType::Complex64,
            LogicalType::Complex128,
        ],
        Version::V1_2 => vec![
            LogicalType::F8E4M3Fn,
            LogicalType::F8E5M2,
            LogicalType::F8E4M3Fnuz,
            LogicalType::F8E5M2Fnuz,
            LogicalType::Complex64,
            LogicalType::Complex128,
        ],
    };
    prop_oneof![6 => base, 1 => Just(Kind::Quantized), 1 => proptest::sample::select(logical).prop_map(Kind::Logical)].boxed()
}

fn options() -> impl Strategy<Value = WriteOptions> {
    let compression = prop_oneof![Just(Compression::Raw), (1i32..4).prop_map(Compression::Zstd)];
    let digest = proptest::option::of(proptest::sample::select(vec![
        DigestAlgorithm::Crc32c,
        DigestAlgorithm::Sha256,
        DigestAlgorithm::Blake3,
    ]));
    let chunk = proptest::sample::select(vec![None, Some(16u64), Some(1000)]);
    (compression, digest, chunk).prop_map(|(compression, digest, chunk_size)| WriteOptions {
        compression,
        digest,
        chunk_size,
    })
}

/// Bytes of `n` elements of `dtype`; bools are 0 or 1 so the data checks pass.
fn elements(dtype: DType, n: usize, seed: u64) -> Vec<u8> {
    let size = dtype.size() as usize;
    (0..n * size)
        .map(|i| {
            let x = (seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add((i as u64).wrapping_mul(1442695040888963407))
                >> 33) as u8;
            if dtype == DType::Bool { x & 1 } else { x }
        })
        .collect()
}

fn le(values: &[u64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn object(version: Version) -> impl Strategy<Value = (Kind, Vec<u64>, u64, WriteOptions)> {
    (kind(version), proptest::collection::vec(0u64..5, 0..4), any::<u64>(), options())
}

/// Writes the generated objects, returning the file and what each object should read back as.
fn write(
    version: Version,
    objects: Vec<(Kind, Vec<u64>, u64, WriteOptions)>,
) -> (Vec<u8>, Vec<Expect>) {
    let mut writer = Writer::new(Vec::new(), version).unwrap();
    let mut expect = Vec::new();
    for (i, (kind, mut shape, seed, options)) in objects.into_iter().enumerate() {
        let name = format!("object.{i}");
        let mut components = BTreeMap::new();
        let format = match kind {
            Kind::Dense(dtype) => {
                let n: u64 = shape.iter().product();
                let data = elements(dtype, n as usize, seed);
                writer.add_dense(&name, &shape, dtype, &data, &options).unwrap();
                components.insert("data".into(), (dtype, None, data));
                Format::Dense
            }
            Kind::Csr(dtype) => {
                // A rows × cols matrix with a non-zero wherever (r + c + seed) % 3 == 0.
                shape =
                    vec![shape.first().copied().unwrap_or(2), shape.get(1).copied().unwrap_or(3)];
                let (mut indptr, mut indices) = (vec![0u64], Vec::new());
                for r in 0..shape[0] {
                    indices.extend((0..shape[1]).filter(|c| (r + c + seed) % 3 == 0));
                    indptr.push(indices.len() as u64);
                }
                let values = elements(dtype, indices.len(), seed);
                writer
                    .add_csr(
                        &name,
                        &shape,
                        Csr { dtype, values: &values, indices: &indices, indptr: &indptr },
                        &options,
                    )
                    .unwrap();
                components.insert("values".into(), (dtype, None, values));
                components.insert("indices".into(), (DType::U64, None, le(&indices)));
                components.insert("indptr".into(), (DType::U64, None, le(&indptr)));
                Format::SparseCsr
            }
            Kind::Coo(dtype) => {
                if shape.is_empty() {
                    shape = vec![4];
                }
                let nnz = (seed % 4) as usize;
                let mut coords = Vec::new();
                for (d, &dim) in shape.iter().enumerate() {
                    coords.extend((0..nnz).map(|i| (i as u64 + d as u64) % dim.max(1)));
                }
                let coords = if shape.contains(&0) && nnz > 0 { Vec::new() } else { coords };
                let nnz = if coords.is_empty() { 0 } else { nnz };
                let values = elements(dtype, nnz, seed);
                writer
                    .add_coo(
                        &name,
                        &shape,
                        Coo { dtype, values: &values, coords: &coords },
                        &options,
                    )
                    .unwrap();
                components.insert("values".into(), (dtype, None, values));
                components.insert("coords".into(), (DType::U64, None, le(&coords)));
                Format::SparseCoo
            }
            Kind::Quantized => {
                shape = vec![4, 8];
                let parts = [
                    ("packed_weight", DType::I32, 4usize),
                    ("scales", DType::F16, 2),
                    ("zeros", DType::F16, 2),
                ];
                let data: Vec<_> =
                    parts.iter().map(|&(r, d, n)| (r, d, elements(d, n, seed))).collect();
                let specs: Vec<_> = data
                    .iter()
                    .map(|(r, d, b)| ComponentSpec {
                        role: r,
                        dtype: *d,
                        logical_type: None,
                        data: b,
                    })
                    .collect();
                let attrs =
                    ztensor_format::text_map([("bits", 4u64.into()), ("group_size", 4u64.into())]);
                writer
                    .add_object(
                        &name,
                        &shape,
                        Format::QuantizedGroup,
                        Some(attrs),
                        &specs,
                        &options,
                    )
                    .unwrap();
                for (r, d, b) in data {
                    components.insert(r.into(), (d, None, b));
                }
                Format::QuantizedGroup
            }
            Kind::Logical(t) => {
                let dtype = t.storage().unwrap();
                let n: u64 = shape.iter().product::<u64>() * t.ratio();
                let data = elements(dtype, n as usize, seed);
                let spec =
                    ComponentSpec { role: "data", dtype, logical_type: Some(&t), data: &data };
                writer.add_object(&name, &shape, Format::Dense, None, &[spec], &options).unwrap();
                components.insert("data".into(), (dtype, Some(t), data));
                Format::Dense
            }
        };
        expect.push(Expect { name, format, shape, components, options });
    }
    let (file, len) = writer.finish().unwrap();
    assert_eq!(len, file.len() as u64);
    (file, expect)
}

fn check<S: ReadAt>(reader: &Reader<S>, expect: &[Expect]) -> Result<(), TestCaseError> {
    prop_assert_eq!(reader.manifest().len(), expect.len());
    for e in expect {
        let data =
            reader.read_object(&e.name).map_err(|err| TestCaseError::fail(err.to_string()))?;
        prop_assert_eq!(&data.format, &e.format);
        prop_assert_eq!(&data.shape, &e.shape);
        let got: BTreeMap<_, _> = data
            .components
            .iter()
            .map(|(r, c)| (r.clone(), (c.dtype, c.logical_type.clone(), c.bytes.to_vec())))
            .collect();
        prop_assert_eq!(&got, &e.components);
        reader.check_data(&e.name, true).map_err(|err| TestCaseError::fail(err.to_string()))?;
        for role in reader.object(&e.name).unwrap().object().components.keys() {
            let check = reader
                .verify_digest(&e.name, role)
                .map_err(|err| TestCaseError::fail(err.to_string()))?;
            match &e.options.digest {
                None => prop_assert_eq!(check, DigestCheck::Absent),
                Some(a) => prop_assert_eq!(check, DigestCheck::Verified(a.clone())),
            }
        }
    }
    Ok(())
}

fn all_sources(file: &[u8], expect: &[Expect]) -> Result<(), TestCaseError> {
    let strict = Options::strict();
    check(&Reader::new(file, &strict).map_err(|e| TestCaseError::fail(e.to_string()))?, expect)?;
    check(&Reader::new(Chunked::new(file, 1), &strict).unwrap(), expect)?;
    let dir = std::env::temp_dir().join(format!("ztensor-io-rt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{}.zt", rand_name(file)));
    std::fs::write(&path, file).unwrap();
    check(&Reader::open_with(&path, &strict).unwrap(), expect)?;
    // SAFETY: the test owns the file and does not change it while mapped.
    let mapped = unsafe { Reader::open_mmap(&path, &strict) }.unwrap();
    check(&mapped, expect)?;
    std::fs::remove_file(&path).unwrap();
    Ok(())
}

fn rand_name(file: &[u8]) -> String {
    ztensor_io::sha256_hex(file)[..16].to_owned()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn v1_2(objects in proptest::collection::vec(object(Version::V1_2), 0..6)) {
        let (file, expect) = write(Version::V1_2, objects);
        all_sources(&file, &expect)?;
    }

    #[test]
    fn v1_1(objects in proptest::collection::vec(object(Version::V1_1), 0..6)) {
        let (file, expect) = write(Version::V1_1, objects);
        all_sources(&file, &expect)?;
    }

    #[test]
    fn v0_1(objects in proptest::collection::vec(object(Version::V0_1), 0..6)) {
        let (file, expect) = write(Version::V0_1, objects);
        all_sources(&file, &expect)?;
    }
}

#[test]
fn zero_copy_views_on_maps_and_slices() {
    let values = [1.5f32, -2.0, 3.25];
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    w.add_dense("v", &[3], DType::F32, &bytes, &WriteOptions::raw()).unwrap();
    w.add_dense("z", &[3], DType::F32, &bytes, &WriteOptions::zstd(3)).unwrap();
    let (file, _) = w.finish().unwrap();
    // A Vec's buffer is at least 8-aligned in practice, and blobs are 64-aligned within it.
    let reader = Reader::new(file.clone(), &Options::default()).unwrap();
    assert_eq!(reader.view::<f32>("v", "data").unwrap(), values);
    assert_eq!(
        reader.view::<u8>("v", "data").unwrap_err().to_string(),
        "no zero-copy view: f32 data cannot be viewed as u8"
    );
    assert!(matches!(
        reader.view::<f32>("z", "data").unwrap_err().kind(),
        ztensor_io::ErrorKind::View(_)
    ));
    assert_eq!(reader.read_as::<f32>("z", "data").unwrap(), values);
    // A file source has no memory to borrow from.
    let dir = std::env::temp_dir().join(format!("ztensor-io-view-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("v.zt");
    std::fs::write(&path, &file).unwrap();
    let reader = Reader::new(
        FileSource::new(std::fs::File::open(&path).unwrap()).unwrap(),
        &Options::default(),
    )
    .unwrap();
    assert!(matches!(
        reader.view::<f32>("v", "data").unwrap_err().kind(),
        ztensor_io::ErrorKind::View(_)
    ));
    assert_eq!(reader.read_as::<f32>("v", "data").unwrap(), values);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn many_threads_read_one_reader() {
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    let mut expected = Vec::new();
    for i in 0..32u64 {
        let data = elements(DType::U32, 1000 + i as usize, i);
        let options = if i % 2 == 0 { WriteOptions::zstd(1) } else { WriteOptions::raw() };
        w.add_dense(
            &format!("t{i}"),
            &[1000 + i],
            DType::U32,
            &data,
            &options.with_digest(DigestAlgorithm::Crc32c),
        )
        .unwrap();
        expected.push(data);
    }
    let (file, _) = w.finish().unwrap();
    let dir = std::env::temp_dir().join(format!("ztensor-io-threads-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.zt");
    std::fs::write(&path, &file).unwrap();
    let reader = Reader::open(&path).unwrap();
    std::thread::scope(|scope| {
        for t in 0..8 {
            let (reader, expected) = (&reader, &expected);
            scope.spawn(move || {
                for round in 0..4 {
                    for i in (0..32).map(|i| (i + t * 5 + round) % 32) {
                        let name = format!("t{i}");
                        assert_eq!(
                            reader.decoded(&name, "data").unwrap().as_ref(),
                            &expected[i][..]
                        );
                        assert!(matches!(
                            reader.verify_digest(&name, "data").unwrap(),
                            DigestCheck::Verified(_)
                        ));
                    }
                }
            });
        }
    });
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every version × dtype × encoding × digest × object format, exhaustively (the properties above
/// sample the same space with random shapes and mixes).
#[test]
fn exhaustive_version_dtype_encoding_digest_format() {
    let compressions = [Compression::Raw, Compression::Zstd(1)];
    let digests = [
        None,
        Some(DigestAlgorithm::Crc32c),
        Some(DigestAlgorithm::Sha256),
        Some(DigestAlgorithm::Blake3),
    ];
    let mut combinations = 0;
    for version in [Version::V0_1, Version::V1_1, Version::V1_2] {
        for compression in compressions {
            for digest in &digests {
                // A 16-byte chunk splits most components into several frames.
                let options =
                    WriteOptions { compression, digest: digest.clone(), chunk_size: Some(16) };
                let mut objects: Vec<(Kind, Vec<u64>, u64, WriteOptions)> = Vec::new();
                for (i, dtype) in DType::ALL.into_iter().enumerate() {
                    let seed = i as u64;
                    objects.push((Kind::Dense(dtype), vec![2, 3], seed, options.clone()));
                    objects.push((Kind::Csr(dtype), vec![3, 4], seed, options.clone()));
                    objects.push((Kind::Coo(dtype), vec![3, 2], seed + 1, options.clone()));
                }
                if version != Version::V0_1 {
                    objects.push((Kind::Quantized, vec![], 7, options.clone()));
                    let logical: &[LogicalType] = match version {
                        Version::V1_1 => &[
                            LogicalType::F8E4M3Fn,
                            LogicalType::F8E5M2,
                            LogicalType::Complex64,
                            LogicalType::Complex128,
                        ],
                        _ => &[
                            LogicalType::F8E4M3Fn,
                            LogicalType::F8E5M2,
                            LogicalType::F8E4M3Fnuz,
                            LogicalType::F8E5M2Fnuz,
                            LogicalType::Complex64,
                            LogicalType::Complex128,
                        ],
                    };
                    for t in logical {
                        objects.push((Kind::Logical(t.clone()), vec![2, 2], 3, options.clone()));
                    }
                }
                combinations += objects.len();
                let (file, expect) = write(version, objects);
                check(&Reader::new(&file[..], &Options::strict()).unwrap(), &expect).unwrap();
            }
        }
    }
    // 3 versions × 2 encodings × 4 digests × (13 dtypes × 3 formats), plus quantized and the
    // logical types of 1.1 (4) and 1.2 (6).
    assert_eq!(combinations, 3 * 2 * 4 * 39 + 2 * 4 * (1 + 4) + 2 * 4 * (1 + 6));
}
