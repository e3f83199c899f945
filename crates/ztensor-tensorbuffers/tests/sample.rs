//! The shared sample file decodes to exactly the values its description lists, and writing
//! those tensors again reproduces it byte for byte.

use ztensor_format::{DType, Options, Version};
use ztensor_io::{Reader, WriteOptions, Writer};
use ztensor_tensorbuffers::{
    DataType, Operation, ReadOptions, TbFile, TbWriter, append, tensor_id,
};

fn sample() -> Vec<u8> {
    std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/external/tensorbuffers-sample.tb"
    ))
    .expect("the shared sample")
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn i64s(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn the_sample_decodes_to_its_documented_values() {
    let file = sample();
    assert_eq!(file.len(), 276);
    let r = TbFile::new(&file[..], &ReadOptions::strict()).unwrap();
    let m = r.metadata();
    assert_eq!(
        (m.version.as_str(), m.model.as_deref(), m.operations.as_deref()),
        ("1.0.0", None, Some(&[][..]))
    );
    let names: Vec<&str> = r.tensors().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["weight", "indices"]);
    let w = r.get("weight").unwrap();
    assert_eq!(
        (w.data_type, w.shape.clone(), w.data_offset, w.data_size, w.id),
        (DataType::Float32, vec![2, 3], 4, 24, 0xb149_c76e_f08b_13d2)
    );
    let i = r.get("indices").unwrap();
    assert_eq!(
        (i.data_type, i.shape.clone(), i.data_offset, i.data_size, i.id),
        (DataType::Int64, vec![4], 28, 32, 0x9329_417d_4a8c_9337)
    );
    assert_eq!(r.data("weight").unwrap().as_ref(), &f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])[..]);
    // Offset 28 is not 8-aligned: read through bytes, not a typed view.
    let data = r.data("indices").unwrap();
    let values: Vec<i64> =
        data.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(values, [1, -2, 300, 4_294_967_296]);
    assert_eq!(r.metadata_offset(), 60);
}

#[test]
fn writing_the_same_tensors_reproduces_the_sample() {
    let mut w = TbWriter::new(Vec::new()).unwrap();
    w.add("weight", DataType::Float32, &[2, 3], &f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])).unwrap();
    w.add("indices", DataType::Int64, &[4], &i64s(&[1, -2, 300, 4_294_967_296])).unwrap();
    let (bytes, len) = w.finish().unwrap();
    assert_eq!(len, 276);
    assert_eq!(bytes, sample());
}

#[test]
fn an_empty_file_is_64_bytes() {
    let (bytes, _) = TbWriter::new(Vec::new()).unwrap().finish().unwrap();
    assert_eq!(bytes.len(), 64);
    assert_eq!(u32::from_le_bytes(bytes[56..60].try_into().unwrap()), 52);
    assert!(TbFile::new(&bytes[..], &ReadOptions::default()).unwrap().tensors().is_empty());
}

fn via_ztensor(tb: &[u8], version: Version) -> Vec<u8> {
    let reader = TbFile::new(tb, &ReadOptions::default()).unwrap();
    let mut w = Writer::new(Vec::new(), version).unwrap();
    crate::to_zt(&reader, &mut w, WriteOptions::zstd(3)).unwrap();
    let (zt, _) = w.finish().unwrap();
    let zreader = Reader::new(&zt[..], &Options::strict()).unwrap();
    crate::to_tb(&zreader, false).unwrap()
}

#[test]
fn tensorbuffers_to_ztensor_and_back_is_byte_identical() {
    for version in [Version::V1_2, Version::V1_1] {
        assert_eq!(via_ztensor(&sample(), version), sample(), "{version}");
    }
    assert_eq!(via_ztensor(&sample(), Version::V0_1), sample());

    // Zero-size and scalar tensors, a model name and operations survive too (1.x only).
    let mut w = TbWriter::new(Vec::new()).unwrap();
    w.add("b", DataType::UInt8, &[0], &[]).unwrap();
    w.add("a", DataType::UInt16, &[], &[7, 0]).unwrap();
    w.add("empty", DataType::Float64, &[2, 0], &[]).unwrap();
    w.set_model(Some("tiny".into()));
    w.set_operations(Some(vec![Operation {
        id: 1,
        operation: 15,
        output: tensor_id("a"),
        input_operations: vec![2, 3],
    }]));
    let (file, _) = w.finish().unwrap();
    assert_eq!(via_ztensor(&file, Version::V1_2), file);
    let r = TbFile::new(&file[..], &ReadOptions::default()).unwrap();
    assert_eq!(r.metadata().operations.as_ref().unwrap()[0].input_operations, [2, 3]);
    assert_eq!(r.metadata().model.as_deref(), Some("tiny"));
}

#[test]
fn ztensor_content_tensorbuffers_cannot_hold_is_refused() {
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    w.add_dense("ok", &[2], DType::U8, &[1, 2], &WriteOptions::raw()).unwrap();
    w.add_dense("flags", &[2], DType::Bool, &[1, 0], &WriteOptions::raw()).unwrap();
    let (zt, _) = w.finish().unwrap();
    let reader = Reader::new(&zt[..], &Options::default()).unwrap();
    let err = crate::to_tb(&reader, false).unwrap_err();
    assert_eq!(err.kind(), ztensor_tensorbuffers::ErrorKind::Unrepresentable);
    assert_eq!(err.object(), Some("flags"));

    for (dtype, bytes) in [(DType::F16, vec![0u8; 4]), (DType::BF16, vec![0u8; 4])] {
        let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
        w.add_dense("h", &[2], dtype, &bytes, &WriteOptions::raw()).unwrap();
        let (zt, _) = w.finish().unwrap();
        let reader = Reader::new(&zt[..], &Options::default()).unwrap();
        let err = crate::to_tb(&reader, false).unwrap_err();
        assert_eq!(err.kind(), ztensor_tensorbuffers::ErrorKind::Unrepresentable, "{dtype}");
    }

    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    let csr = ztensor_io::Csr {
        dtype: DType::F32,
        values: &f32s(&[1.0]),
        indices: &[0],
        indptr: &[0, 1],
    };
    w.add_csr("sparse", &[1, 1], csr, &WriteOptions::raw()).unwrap();
    w.set_attributes(ztensor_format::text_map([("license", "MIT".into())]).try_into().unwrap())
        .unwrap();
    let (zt, _) = w.finish().unwrap();
    let reader = Reader::new(&zt[..], &Options::default()).unwrap();
    let err = crate::to_tb(&reader, false).unwrap_err();
    assert!(err.to_string().contains("license"), "{err}");
    assert_eq!(
        ztensor_format::Verdict::refused(&err),
        Some(ztensor_format::Refused::FileAttributes),
        "{err}"
    );
    let err = crate::to_tb(&reader, true).unwrap_err();
    assert_eq!(
        (err.kind(), err.object()),
        (ztensor_tensorbuffers::ErrorKind::Unrepresentable, Some("sparse"))
    );

    let err = TbWriter::new(Vec::new())
        .unwrap()
        .add("big", DataType::UInt8, &[1 << 32, 0], &[])
        .unwrap_err();
    assert_eq!(err.kind(), ztensor_tensorbuffers::ErrorKind::Unrepresentable);
}

#[test]
fn append_makes_one_container_identical_to_writing_everything_at_once() {
    let dir = ztensor_testkit::scratch("tb-append");
    let path = dir.join("s.tb");
    std::fs::write(&path, sample()).unwrap();
    let extra = f32s(&[0.5, 0.25]);
    append(&path, &ReadOptions::default(), |w| w.add("beta", DataType::Float32, &[2], &extra))
        .unwrap();
    let appended = std::fs::read(&path).unwrap();

    let mut w = TbWriter::new(Vec::new()).unwrap();
    w.add("weight", DataType::Float32, &[2, 3], &f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])).unwrap();
    w.add("indices", DataType::Int64, &[4], &i64s(&[1, -2, 300, 4_294_967_296])).unwrap();
    w.add("beta", DataType::Float32, &[2], &extra).unwrap();
    assert_eq!(appended, w.finish().unwrap().0);
    let r = TbFile::new(&appended[..], &ReadOptions::default()).unwrap();
    assert_eq!(r.get("beta").unwrap().data_offset, 60);
    assert_eq!(r.get("indices").unwrap().data_offset, 28);
    // A failing append leaves the file as it was, and no temporary file behind.
    let err =
        append(&path, &ReadOptions::default(), |w| w.add("beta", DataType::UInt8, &[1], &[1]))
            .unwrap_err();
    assert_eq!(err.kind(), ztensor_tensorbuffers::ErrorKind::DuplicateName);
    assert_eq!(std::fs::read(&path).unwrap(), appended);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
}

#[test]
fn the_committed_sample_is_the_documented_file() {
    // SHA-256 as published with the sample.
    assert_eq!(
        ztensor_io::codec::sha256_hex(&sample()),
        "283f4a6a817ca693125fe990257abf1c711628e4d459c6c064d6759cbc339749"
    );
}
