use super::*;
use half::f16;
use ztensor_foreign::npy::{self, fp8_to_f32};

#[test]
fn e5m2_is_the_high_byte_of_f16() {
    for b in 0..=255u8 {
        let ours = fp8_to_f32(b, &LogicalType::F8E5M2).unwrap();
        let theirs = f16::from_bits(u16::from(b) << 8).to_f32();
        assert!(ours == theirs || (ours.is_nan() && theirs.is_nan()), "{b:#04x}: {ours} {theirs}");
    }
}

#[test]
fn e4m3fn_and_fnuz_values_from_their_definitions() {
    let e4 = |b| fp8_to_f32(b, &LogicalType::F8E4M3Fn).unwrap();
    // OCP FP8: max normal 448 = 1.75 × 2^8, min subnormal 2^-9, NaN at S.1111.111, no inf.
    assert_eq!(e4(0x7e), 448.0);
    assert_eq!(e4(0x01), 2f32.powi(-9));
    assert_eq!(e4(0x38), 1.0);
    assert_eq!(e4(0xb8), -1.0);
    assert_eq!(e4(0x78), 256.0);
    assert!(e4(0x7f).is_nan() && e4(0xff).is_nan());
    // FNUZ: bias one more, single NaN at 0x80, no negative zero.
    let nuz = |b| fp8_to_f32(b, &LogicalType::F8E4M3Fnuz).unwrap();
    assert_eq!(nuz(0x40), 1.0);
    assert_eq!(nuz(0x7f), 240.0);
    assert!(nuz(0x80).is_nan());
    let e5nuz = |b| fp8_to_f32(b, &LogicalType::F8E5M2Fnuz).unwrap();
    assert_eq!(e5nuz(0x40), 1.0);
    assert_eq!(e5nuz(0x7f), 57344.0);
    assert!(e5nuz(0x80).is_nan());
}

fn one(dtype: DType, logical: Option<LogicalType>, shape: &[u64], data: &[u8]) -> npy::Array {
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    let spec =
        ztensor_io::ComponentSpec { role: "data", dtype, logical_type: logical.as_ref(), data };
    w.add_object("x", shape, ztensor_format::Format::Dense, None, &[spec], &WriteOptions::zstd(1))
        .unwrap();
    let zt = w.finish().unwrap().0;
    npy::array(&Reader::new(&zt[..], &Options::default()).unwrap(), "x", 1 << 20).unwrap()
}

#[test]
fn npy_bytes_follow_the_format_description() {
    let data: Vec<u8> = [1.5f32, -2.0, 0.25].iter().flat_map(|v| v.to_le_bytes()).collect();
    let array = one(DType::F32, None, &[3], &data);
    let mut out = Vec::new();
    npy::write(&mut out, &array).unwrap();
    // Magic, version 1.0, header length (little-endian u16), the dict padded with spaces and
    // ended by a newline so the data starts at a multiple of 64.
    let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
    let mut expected = b"\x93NUMPY\x01\x00".to_vec();
    let header_len = (10 + dict.len() + 1).next_multiple_of(64) - 10;
    expected.extend_from_slice(&(header_len as u16).to_le_bytes());
    expected.extend_from_slice(dict.as_bytes());
    expected.extend(std::iter::repeat_n(b' ', header_len - dict.len() - 1));
    expected.push(b'\n');
    expected.extend_from_slice(&data);
    assert_eq!(out, expected);
    // Scalars and matrices spell their shapes as Python tuples.
    let scalar = one(DType::I64, None, &[], &7i64.to_le_bytes());
    let mut out = Vec::new();
    npy::write(&mut out, &scalar).unwrap();
    assert!(
        String::from_utf8_lossy(&out)
            .contains("'descr': '<i8', 'fortran_order': False, 'shape': (), }")
    );
    assert_eq!(out.len(), 128 + 8);
}

#[test]
fn types_numpy_lacks_are_widened_exactly() {
    let bf: Vec<u8> =
        [1.0f32, -3.5].iter().flat_map(|v| half::bf16::from_f32(*v).to_le_bytes()).collect();
    let a = one(DType::BF16, None, &[2], &bf);
    assert_eq!((a.descr, npy::values(&a, 10)), ("<f4", vec!["1".to_owned(), "-3.5".to_owned()]));
    assert_eq!(a.note.as_deref(), Some("bf16 widened to f32 (exact)"));
    let a = one(DType::U8, Some(LogicalType::F8E4M3Fn), &[2], &[0x38, 0x7e]);
    assert_eq!(npy::values(&a, 10), ["1", "448"]);
    let c: Vec<u8> = [1.0f32, -2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let a = one(DType::F32, Some(LogicalType::Complex64), &[1], &c);
    assert_eq!((a.descr, npy::values(&a, 10)), ("<c8", vec!["1-2i".to_owned()]));
}

#[test]
fn sparse_objects_are_densified_and_quantized_refused() {
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    let values: Vec<u8> = [5i32, 6, 7].iter().flat_map(|v| v.to_le_bytes()).collect();
    w.add_csr(
        "csr",
        &[2, 3],
        ztensor_io::Csr {
            dtype: DType::I32,
            values: &values,
            indices: &[2, 0, 1],
            indptr: &[0, 1, 3],
        },
        &WriteOptions::raw(),
    )
    .unwrap();
    w.add_coo(
        "coo",
        &[2, 2],
        ztensor_io::Coo { dtype: DType::I32, values: &values[..8], coords: &[0, 1, 1, 0] },
        &WriteOptions::raw(),
    )
    .unwrap();
    let zt = w.finish().unwrap().0;
    let r = Reader::new(&zt[..], &Options::default()).unwrap();
    let csr = npy::array(&r, "csr", 1 << 20).unwrap();
    assert_eq!(npy::values(&csr, 100), ["0", "0", "5", "6", "7", "0"]);
    let coo = npy::array(&r, "coo", 1 << 20).unwrap();
    assert_eq!(npy::values(&coo, 100), ["0", "5", "6", "0"]);
    let e = npy::array(&r, "csr", 10).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unrepresentable);
    let e = npy::array(&r, "nope", 10).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
}

/// Sparse indices may be any integer dtype in v1.1 (here i32 and u16), and a digest that no longer
/// matches the stored bytes stops the export.
#[test]
fn sparse_indices_of_any_integer_dtype_and_digests_checked() {
    let le = |v: &[i32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let (values, indices, indptr) = (le(&[5, 6, 7]), le(&[2, 0, 1]), le(&[0, 1, 3]));
    let coords: Vec<u8> = [0u16, 1, 1, 0].iter().flat_map(|x| x.to_le_bytes()).collect();
    let spec =
        |role, dtype, data| ztensor_io::ComponentSpec { role, dtype, logical_type: None, data };
    let options = WriteOptions::raw().with_digest(ztensor_format::DigestAlgorithm::Sha256);
    let mut w = Writer::new(Vec::new(), Version::V1_1).unwrap();
    let csr = [
        spec("values", DType::I32, &values[..]),
        spec("indices", DType::I32, &indices[..]),
        spec("indptr", DType::I32, &indptr[..]),
    ];
    w.add_object("csr", &[2, 3], ztensor_format::Format::SparseCsr, None, &csr, &options).unwrap();
    let coo = [spec("values", DType::I32, &values[..8]), spec("coords", DType::U16, &coords)];
    w.add_object("coo", &[2, 2], ztensor_format::Format::SparseCoo, None, &coo, &options).unwrap();
    let mut zt = w.finish().unwrap().0;
    let r = Reader::new(&zt[..], &Options::strict()).unwrap();
    let csr = r.object("csr").unwrap();
    csr.check(&csr.read().unwrap()).unwrap();
    let a = npy::array(&r, "csr", 1 << 20).unwrap();
    assert_eq!(npy::values(&a, 100), ["0", "0", "5", "6", "7", "0"]);
    let a = npy::array(&r, "coo", 1 << 20).unwrap();
    assert_eq!(npy::values(&a, 100), ["0", "5", "6", "0"]);
    // One stored value byte changed: the digest says no.
    let at = r.object("csr").unwrap().model().components["values"].offset as usize;
    drop(r);
    zt[at] ^= 1;
    let r = Reader::new(&zt[..], &Options::default()).unwrap();
    let e = npy::array(&r, "csr", 1 << 20).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ZTensor);
    assert!(e.to_string().contains("digest_mismatch"), "{e}");
}

#[test]
fn values_stop_at_the_limit() {
    let data: Vec<u8> = (0..10u16).flat_map(|v| v.to_le_bytes()).collect();
    let a = one(DType::U16, None, &[10], &data);
    assert_eq!(npy::values(&a, 3), ["0", "1", "2"]);
    assert_eq!(npy::len(&a), 10);
}
