//! Every reject case of the facts document's §7, each a tested error with its kind.

use flatbuffers::FlatBufferBuilder;
use ztensor_tensorbuffers::{ErrorKind, ReadOptions, TbFile, TbWriter};

fn sample() -> Vec<u8> {
    std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/external/tensorbuffers-sample.tb"
    ))
    .expect("the shared sample")
}

fn kind(file: &[u8]) -> ErrorKind {
    TbFile::new(file, &ReadOptions::default()).map(|_| ()).unwrap_err().kind()
}

fn patched(at: usize, bytes: &[u8]) -> Vec<u8> {
    let mut f = sample();
    f[at..at + bytes.len()].copy_from_slice(bytes);
    f
}

/// Frames hand-built metadata around `data`.
fn frame(data: &[u8], metadata: &[u8]) -> Vec<u8> {
    [b"TBS1", data, metadata, &(metadata.len() as u32).to_le_bytes(), b"TBS1"].concat()
}

/// Metadata with one tensor table whose fields are chosen by the flags.
fn crafted(name: bool, shape: bool, version: bool, name_bytes: &str) -> Vec<u8> {
    let mut fbb = FlatBufferBuilder::new();
    let shape_v = fbb.create_vector(&[2u32]);
    let name_s = fbb.create_string(name_bytes);
    let start = fbb.start_table();
    fbb.push_slot::<u32>(14, 2, 0);
    fbb.push_slot::<u32>(12, 4, 0);
    if shape {
        fbb.push_slot_always(8, shape_v);
    }
    if name {
        fbb.push_slot_always(6, name_s);
    }
    fbb.push_slot::<i8>(10, 7, 0);
    let t = fbb.end_table(start);
    let version_s = fbb.create_string("1.0.0");
    let tensors = fbb.create_vector(&[t]);
    let start = fbb.start_table();
    fbb.push_slot_always(8, tensors);
    if version {
        fbb.push_slot_always(4, version_s);
    }
    let root = fbb.end_table(start);
    fbb.finish_minimal(root);
    fbb.finished_data().to_vec()
}

#[test]
fn crafted_metadata_is_accepted_when_complete() {
    let file = frame(&[1, 2], &crafted(true, true, true, "t"));
    let r = TbFile::new(&file[..], &ReadOptions::default()).unwrap();
    assert_eq!(r.data("t").unwrap().as_ref(), &[1, 2]);
}

#[test]
fn container_faults() {
    assert_eq!(kind(&sample()[..11]), ErrorKind::FileTooSmall);
    assert_eq!(kind(&patched(0, b"X")), ErrorKind::HeaderMagic);
    assert_eq!(kind(&patched(275, b"X")), ErrorKind::FooterMagic);
    // M + 12 > L.
    assert_eq!(kind(&patched(268, &265u32.to_le_bytes())), ErrorKind::MetadataOutOfBounds);
    // The pre-release layout: no magic, data at 0, a trailing start offset.
    let old = [&[1u8, 2, 3, 4][..], &crafted(true, true, true, "t"), &4u32.to_le_bytes()].concat();
    assert_eq!(kind(&old), ErrorKind::HeaderMagic);
}

#[test]
fn flatbuffer_faults() {
    // A metadata size that points the FlatBuffer at the wrong bytes.
    assert_eq!(kind(&patched(268, &200u32.to_le_bytes())), ErrorKind::Flatbuffer);
    // Required fields missing.
    assert_eq!(kind(&frame(&[1, 2], &crafted(false, true, true, "t"))), ErrorKind::Flatbuffer);
    assert_eq!(kind(&frame(&[1, 2], &crafted(true, true, false, "t"))), ErrorKind::Flatbuffer);
    // A name that is not NUL-terminated ("weight\0" -> "weightx").
    assert_eq!(kind(&patched(0xfe, b"x")), ErrorKind::Flatbuffer);
    // A name that is not UTF-8.
    assert_eq!(kind(&patched(0xf8, &[0xff])), ErrorKind::Flatbuffer);
    // A root offset past the end.
    assert_eq!(kind(&patched(0x3c, &0xffffu32.to_le_bytes())), ErrorKind::Flatbuffer);
}

#[test]
fn tensor_faults() {
    assert_eq!(kind(&frame(&[1, 2], &crafted(true, false, true, "t"))), ErrorKind::ShapeMissing);
    // data_type of "indices" (file 0x93) set to 11, and to 0 (None).
    assert_eq!(kind(&patched(0x93, &[11])), ErrorKind::DataType);
    assert_eq!(kind(&patched(0x93, &[0])), ErrorKind::DataType);
    // data_offset of "indices" (file 0x9c): into the magic, and past the data region.
    assert_eq!(kind(&patched(0x9c, &3u32.to_le_bytes())), ErrorKind::DataOutOfBounds);
    assert_eq!(kind(&patched(0x9c, &40u32.to_le_bytes())), ErrorKind::DataOutOfBounds);
    // data_size of "weight" (file 0xe8) 20 instead of 24: in bounds, but not 2 × 3 × 4.
    assert_eq!(kind(&patched(0xe8, &20u32.to_le_bytes())), ErrorKind::SizeMismatch);
}

#[test]
fn duplicate_names_ids_and_limits() {
    let mut w = TbWriter::new(Vec::new()).unwrap();
    w.add("aa", ztensor_tensorbuffers::DataType::UInt8, &[1], &[1]).unwrap();
    w.add("ab", ztensor_tensorbuffers::DataType::UInt8, &[1], &[2]).unwrap();
    let (mut file, _) = w.finish().unwrap();
    let at = file.windows(3).position(|w| w == b"ab\0").unwrap();
    file[at + 1] = b'a';
    assert_eq!(kind(&file), ErrorKind::DuplicateName);

    // An id that is not the name's hash: accepted, except in strict mode.
    let bad_id = patched(0xec, &[0]);
    assert!(TbFile::new(&bad_id[..], &ReadOptions::default()).is_ok());
    let strict = ReadOptions::strict();
    assert_eq!(TbFile::new(&bad_id[..], &strict).unwrap_err().kind(), ErrorKind::IdMismatch);

    let one = ReadOptions::default().with_max_tensors(1);
    assert_eq!(TbFile::new(&sample()[..], &one).unwrap_err().kind(), ErrorKind::TooManyTensors);
}

#[test]
fn absent_optional_fields_read_as_their_defaults() {
    // A root with only `version`: no tensors vector, no operations (files from before
    // operations existed omit it).
    let mut fbb = FlatBufferBuilder::new();
    let version = fbb.create_string("1.0.0");
    let start = fbb.start_table();
    fbb.push_slot_always(4, version);
    let root = fbb.end_table(start);
    fbb.finish_minimal(root);
    let file = frame(&[], fbb.finished_data());
    let r = TbFile::new(&file[..], &ReadOptions::default()).unwrap();
    assert!(r.tensors().is_empty());
    assert_eq!(r.metadata().operations, None);

    // An absent operations field survives TensorBuffers -> zTensor -> TensorBuffers.
    let mut w = TbWriter::new(Vec::new()).unwrap();
    w.add("x", ztensor_tensorbuffers::DataType::Int8, &[2], &[1, 255]).unwrap();
    w.set_operations(None);
    let (old_style, _) = w.finish().unwrap();
    let reader = TbFile::new(&old_style[..], &ReadOptions::default()).unwrap();
    assert_eq!(reader.metadata().operations, None);
    let mut zt = ztensor_io::Writer::new(Vec::new(), ztensor_format::Version::V1_2).unwrap();
    crate::to_zt(&reader, &mut zt, ztensor_io::WriteOptions::raw()).unwrap();
    let (zt, _) = zt.finish().unwrap();
    let zreader = ztensor_io::Reader::new(&zt[..], &ztensor_format::Options::default()).unwrap();
    assert_eq!(crate::to_tb(&zreader, false).unwrap(), old_style);
}
