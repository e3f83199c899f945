//! Conversion between versions: everything the target can express survives with the same
//! decoded bytes; what it cannot express is refused, naming the object.

use ztensor_format::{
    DType, DigestAlgorithm, ErrorKind as Rule, Format, LogicalType, Options, Version, text_map,
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
