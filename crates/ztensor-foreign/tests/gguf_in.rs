//! GGUF files written by llama.cpp's own Python writer (`fixtures/external/gguf`, made by
//! its `make.py`): every tensor reads as llama.cpp's reader sees it, quantized blocks byte
//! for byte; hostile headers are refused cleanly.

use std::path::PathBuf;

use ztensor_foreign::ErrorKind;
use ztensor_foreign::gguf::{GgufFile, SHAPE_KEY, TYPE_KEY, TYPES};
use ztensor_format::{DigestAlgorithm, Value};
use ztensor_io::TensorSource;
use ztensor_io::codec::Hasher;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/external/gguf")
}

fn expected() -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir().join("expected.json")).unwrap()).unwrap()
}

fn attribute<'a>(map: &'a Value, key: &str) -> &'a Value {
    map.as_map()
        .unwrap()
        .iter()
        .find(|(k, _)| k.as_text() == Some(key))
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no attribute {key}"))
}

fn same(value: &Value, json: &serde_json::Value) -> bool {
    match (value, json) {
        (Value::Integer(i), serde_json::Value::Number(n)) => {
            n.as_i64().map(i128::from).or(n.as_u64().map(i128::from)) == Some(*i)
        }
        (Value::Float(f), serde_json::Value::Number(n)) => n.as_f64() == Some(*f),
        (Value::Bool(b), serde_json::Value::Bool(j)) => b == j,
        (Value::Text(t), serde_json::Value::String(s)) => t == s,
        (Value::Array(items), serde_json::Value::Array(js)) => {
            items.len() == js.len() && items.iter().zip(js).all(|(v, j)| same(v, j))
        }
        _ => false,
    }
}

#[test]
fn the_type_table_is_llama_cpps() {
    let sizes = expected()["sizes"].clone();
    for t in TYPES {
        let theirs = &sizes[t.name];
        assert_eq!(theirs[0].as_u64(), Some(t.block), "{}", t.name);
        assert_eq!(theirs[1].as_u64(), Some(t.size), "{}", t.name);
    }
    assert_eq!(sizes.as_object().unwrap().len(), TYPES.len(), "a type llama.cpp has is missing");
}

#[test]
fn every_tensor_llama_cpp_wrote_reads_as_its_reader_sees_it() {
    let expected = expected();
    for (file, tensors) in expected["files"].as_object().unwrap() {
        let gguf = GgufFile::open(dir().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(gguf.version(), 3);
        let attributes = gguf.attributes().unwrap().to_value();
        for (key, value) in expected["metadata"].as_object().unwrap() {
            assert!(
                same(attribute(&attributes, key), value),
                "{file} {key}: {:?}",
                attribute(&attributes, key)
            );
        }
        assert_eq!(gguf.len(), tensors.as_object().unwrap().len());
        for (name, want) in tensors.as_object().unwrap() {
            let i = gguf.find(name).unwrap();
            let info = gguf.info(i).unwrap();
            let mut shape: Vec<u64> = want["ggml_shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap())
                .collect();
            shape.reverse();
            let ty = want["type"].as_str().unwrap();
            let dtype = info.components[0].dtype.to_string();
            match TYPES.iter().find(|t| t.name == ty).unwrap().dtype {
                Some(d) => {
                    assert_eq!(dtype, d.name(), "{name}");
                    assert_eq!(info.shape.as_ref(), shape.as_slice(), "{name}");
                    assert!(info.attributes.is_none());
                }
                None => {
                    assert_eq!(dtype, "u8", "{name}");
                    assert_eq!(info.shape.as_ref(), [want["bytes"].as_u64().unwrap()], "{name}");
                    let a = &info.attributes.as_deref().unwrap().to_value();
                    assert_eq!(attribute(a, TYPE_KEY).as_text(), Some(ty));
                    let logical: Vec<u64> = attribute(a, SHAPE_KEY)
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_u64().unwrap())
                        .collect();
                    assert_eq!(logical, shape, "{name}");
                }
            }
            let data = gguf.read(i).unwrap();
            let mut h = Hasher::new(&DigestAlgorithm::Sha256).unwrap();
            h.update(&data.components["data"].bytes);
            assert_eq!(
                h.finish().to_string(),
                format!("sha256:{}", want["sha256"].as_str().unwrap()),
                "{file} {name}"
            );
            assert!(gguf.raw(i).is_some());
        }
    }
    // The custom alignment was read.
    assert_eq!(GgufFile::open(dir().join("quantized.gguf")).unwrap().alignment(), 64);
}

/// A GGUF header: version, tensor and key counts, then `rest`.
fn gguf(version: u32, tensors: u64, kvs: u64, rest: &[u8]) -> Vec<u8> {
    let mut out = b"GGUF".to_vec();
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&tensors.to_le_bytes());
    out.extend_from_slice(&kvs.to_le_bytes());
    out.extend_from_slice(rest);
    out.resize(out.len() + 256, 0);
    out
}

fn string(s: &str) -> Vec<u8> {
    let mut out = (s.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(s.as_bytes());
    out
}

/// One tensor entry: name, dims (GGML order), type, offset.
fn tensor(name: &str, dims: &[u64], ty: u32, offset: u64) -> Vec<u8> {
    let mut out = string(name);
    out.extend_from_slice(&(dims.len() as u32).to_le_bytes());
    for d in dims {
        out.extend_from_slice(&d.to_le_bytes());
    }
    out.extend_from_slice(&ty.to_le_bytes());
    out.extend_from_slice(&offset.to_le_bytes());
    out
}

#[test]
fn hostile_headers_are_refused_cleanly() {
    assert!(GgufFile::new(gguf(3, 1, 0, &tensor("w", &[4], 0, 0))).is_ok());
    let kv = |key: &str, ty: u32, value: &[u8]| {
        [string(key), ty.to_le_bytes().to_vec(), value.to_vec()].concat()
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("a tensor count past the file", gguf(3, u64::MAX, 0, &[])),
        ("a key count past the file", gguf(3, 0, 1 << 40, &[])),
        ("a string past the file", gguf(3, 0, 1, &u64::MAX.to_le_bytes())),
        (
            "an array past the file",
            gguf(3, 0, 1, &kv("a", 9, &[4, 0, 0, 0, 255, 255, 255, 255, 255, 255, 255, 255])),
        ),
        ("an unknown value type", gguf(3, 0, 1, &kv("a", 99, &[]))),
        ("an alignment of 3", gguf(3, 0, 1, &kv("general.alignment", 4, &3u32.to_le_bytes()))),
        ("a misaligned tensor", gguf(3, 1, 0, &tensor("w", &[4], 0, 3))),
        ("a tensor past the data", gguf(3, 1, 0, &tensor("w", &[1 << 20], 0, 0))),
        ("an overflowing shape", gguf(3, 1, 0, &tensor("w", &[u64::MAX, 4], 0, 0))),
        ("partial blocks", gguf(3, 1, 0, &tensor("q", &[33], 8, 0))),
        ("too many dimensions", gguf(3, 1, 0, &tensor("w", &[1; 9], 0, 0))),
        (
            "a name twice",
            gguf(3, 2, 0, &[tensor("w", &[1], 0, 0), tensor("w", &[1], 0, 32)].concat()),
        ),
        ("a big-endian file", gguf(3u32.swap_bytes(), 0, 0, &[])),
        ("version 1", gguf(1, 0, 0, &[])),
        ("a key twice", gguf(3, 0, 2, &[kv("k", 7, &[1]), kv("k", 7, &[0])].concat())),
    ];
    for (what, bytes) in cases {
        let e = GgufFile::new(bytes).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Malformed, "{what}: {e}");
    }
    // An unknown type is an object that cannot be decoded, not a broken file.
    let file = GgufFile::new(gguf(3, 1, 0, &tensor("w", &[4], 77, 0))).unwrap();
    assert!(file.info(0).unwrap().unsupported.is_some());
    assert!(matches!(file.read(0).unwrap_err().kind(), ztensor_io::ErrorKind::Unsupported(_)));
}

fn kv(key: &str, ty: u32, value: &[u8]) -> Vec<u8> {
    [string(key), ty.to_le_bytes().to_vec(), value.to_vec()].concat()
}

/// An array value: item type, count, then the items' bytes.
fn array(item: u32, count: u64, items: &[u8]) -> Vec<u8> {
    [item.to_le_bytes().to_vec(), count.to_le_bytes().to_vec(), items.to_vec()].concat()
}

#[test]
fn large_metadata_arrays_read_back_whole() {
    // 2,000,000 u8 items (read as one run past the header buffer) and 100,000 strings
    // (their lengths and bytes straddling the buffer's refills), then a scalar after them.
    const N: usize = 2_000_000;
    let bytes: Vec<u8> = (0..N).map(|i| (i % 251) as u8).collect();
    let words: Vec<String> = (0..100_000).map(|i| format!("t{i}")).collect();
    let strings: Vec<u8> = words.iter().flat_map(|w| string(w)).collect();
    let rest = [
        kv("big.u8", 9, &array(0, N as u64, &bytes)),
        kv("big.words", 9, &array(8, words.len() as u64, &strings)),
        kv("after", 4, &7u32.to_le_bytes()),
        tensor("w", &[4], 0, 0),
    ]
    .concat();
    let file = GgufFile::new(gguf(3, 1, 3, &rest)).unwrap();
    let attributes = &file.try_attributes().unwrap().unwrap().to_value();
    let big = attribute(attributes, "big.u8").as_array().unwrap();
    assert_eq!(big.len(), N);
    assert_eq!(big[0].as_u64(), Some(0));
    assert_eq!(big[250].as_u64(), Some(250));
    assert_eq!(big[N - 1].as_u64(), Some(((N - 1) % 251) as u64));
    assert!(big.iter().zip(&bytes).all(|(v, &b)| v.as_u64() == Some(u64::from(b))));
    let read: Vec<&str> = attribute(attributes, "big.words")
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_text().unwrap())
        .collect();
    assert_eq!(read, words);
    assert_eq!(attribute(attributes, "after").as_u64(), Some(7));
    // The tensor table after them was read in the same pass.
    assert_eq!(file.find("w"), Some(0));
    // The trait's view is the same map, built once.
    let built = file.try_attributes().unwrap().unwrap();
    assert!(std::ptr::eq(file.attributes().unwrap().as_ref(), built));
}

#[test]
fn every_metadata_array_type_reads_back() {
    let f32s: Vec<u8> = [0.5f32, -2.0].iter().flat_map(|f| f.to_le_bytes()).collect();
    let i64s: Vec<u8> = [i64::MIN, 3].iter().flat_map(|i| i.to_le_bytes()).collect();
    let nested =
        [array(5, 2, &[1, 0, 0, 0, 254, 255, 255, 255]), array(8, 1, &string("x"))].concat();
    let rest = [
        kv("i8", 9, &array(1, 2, &[0x80, 0x7f])),
        kv("u16", 9, &array(2, 1, &60000u16.to_le_bytes())),
        kv("f32", 9, &array(6, 2, &f32s)),
        kv("bool", 9, &array(7, 2, &[1, 0])),
        kv("i64", 9, &array(11, 2, &i64s)),
        kv("nested", 9, &array(9, 2, &nested)),
        kv("empty", 9, &array(99, 0, &[])),
    ]
    .concat();
    let file = GgufFile::new(gguf(3, 0, 7, &rest)).unwrap();
    let a = &file.try_attributes().unwrap().unwrap().to_value();
    let ints = |key| -> Vec<i128> {
        let items = attribute(a, key).as_array().unwrap();
        items.iter().map(|v| if let Value::Integer(i) = v { *i } else { panic!("{v:?}") }).collect()
    };
    assert_eq!(ints("i8"), [-128, 127]);
    assert_eq!(ints("u16"), [60000]);
    assert_eq!(ints("i64"), [i128::from(i64::MIN), 3]);
    assert_eq!(attribute(a, "f32").as_array().unwrap(), &[Value::Float(0.5), Value::Float(-2.0)]);
    assert_eq!(attribute(a, "bool").as_array().unwrap(), &[Value::Bool(true), Value::Bool(false)]);
    assert_eq!(
        attribute(a, "nested"),
        &Value::Array(vec![
            Value::Array(vec![Value::Integer(1), Value::Integer(-2)]),
            Value::Array(vec![Value::Text("x".into())]),
        ])
    );
    assert_eq!(attribute(a, "empty"), &Value::Array(vec![]));
    // Arrays that claim more than the file holds, or hold what their type cannot, are refused.
    for (what, bytes) in [
        ("u32 items past the file", gguf(3, 0, 1, &kv("a", 9, &array(4, 100, &[])))),
        ("strings past the file", gguf(3, 0, 1, &kv("a", 9, &array(8, 40, &[])))),
        ("a bool of 2", gguf(3, 0, 1, &kv("a", 9, &array(7, 2, &[1, 2])))),
        (
            "a string not UTF-8",
            gguf(3, 0, 1, &kv("a", 9, &array(8, 1, &[1, 0, 0, 0, 0, 0, 0, 0, 0xff]))),
        ),
        ("an unknown item type", gguf(3, 0, 1, &kv("a", 9, &array(99, 1, &[0])))),
    ] {
        let e = GgufFile::new(bytes).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Malformed, "{what}: {e}");
    }
}

#[test]
fn tensors_whose_data_overlaps_are_refused_naming_both() {
    // 64 bytes of F32 at 0 and 16 bytes at 32 share bytes 32..48.
    let overlapping =
        gguf(3, 2, 0, &[tensor("big", &[16], 0, 0), tensor("inner", &[4], 0, 32)].concat());
    let e = GgufFile::new(overlapping).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Malformed, "{e}");
    assert!(e.message().contains("\"big\"") && e.message().contains("\"inner\""), "{e}");
    assert!(e.message().contains("overlap"), "{e}");
    // Listed in the other order, and the same range twice.
    for rest in [
        [tensor("inner", &[4], 0, 32), tensor("big", &[16], 0, 0)].concat(),
        [tensor("a", &[4], 0, 32), tensor("b", &[4], 0, 32)].concat(),
    ] {
        assert_eq!(GgufFile::new(gguf(3, 2, 0, &rest)).unwrap_err().kind(), ErrorKind::Malformed);
    }
    // A range that reaches past its neighbour into the one after it.
    let three =
        [tensor("a", &[32], 0, 0), tensor("b", &[1], 0, 32), tensor("c", &[1], 0, 96)].concat();
    let e = GgufFile::new(gguf(3, 3, 0, &three)).unwrap_err();
    assert!(e.message().contains("\"a\"") && e.message().contains("\"b\""), "{e}");
    // Adjacent ranges, and tensors of no bytes at any offset, are fine.
    let adjacent = [
        tensor("a", &[8], 0, 0),
        tensor("b", &[4], 0, 32),
        tensor("empty", &[0, 4], 0, 32),
        tensor("also_empty", &[0], 1, 0),
        tensor("unknown", &[4], 77, 32),
    ]
    .concat();
    let file = GgufFile::new(gguf(3, 5, 0, &adjacent)).unwrap();
    assert_eq!(file.len(), 5);
}

/// The value of an E2M1 code (OCP Microscaling, §5.3.3): sign, two exponent bits (bias 1),
/// one mantissa bit; exponent 0 is subnormal (0 or 0.5).
fn e2m1(code: u8) -> f32 {
    let sign = if code & 8 != 0 { -1.0 } else { 1.0 };
    let (exponent, mantissa) = (i32::from((code >> 1) & 3), f32::from(code & 1));
    let magnitude = match exponent {
        0 => mantissa * 0.5,
        e => (1.0 + mantissa * 0.5) * 2f32.powi(e - 1),
    };
    sign * magnitude
}

#[test]
fn mxfp4_blocks_read_as_zt_mx_whose_values_are_what_llama_cpp_dequantizes() {
    use ztensor_foreign::gguf::Blocks;
    use ztensor_format::Format;
    let gguf = GgufFile::open(dir().join("mxfp4.gguf")).unwrap().with_blocks(Blocks::Layouts);
    let mut checked = 0;
    for name in ["experts.down", "row", "wide"] {
        let index = gguf.find(name).unwrap();
        let info = gguf.info(index).unwrap();
        assert_eq!(info.format, Format::from_name("zt.mx/1"), "{name}");
        let object = gguf.read(index).unwrap();
        let theirs = gguf.read(gguf.find(&format!("{name}.dequantized")).unwrap()).unwrap();
        assert_eq!(object.shape, theirs.shape, "{name}: the logical shape");
        let (data, scales) = (&object.components["data"], &object.components["scales"]);
        assert_eq!(data.logical_type.as_ref().map(|t| t.name()), Some("f4_e2m1"));
        assert_eq!(scales.logical_type.as_ref().map(|t| t.name()), Some("f8_e8m0"));
        let expected: Vec<f32> = theirs.components["data"]
            .bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(data.bytes.len() * 2, expected.len());
        assert_eq!(scales.bytes.len() * 32, expected.len());
        for (i, want) in expected.iter().enumerate() {
            // zTensor 2's packing: element i at bits 4i..4i+4 of the little-endian stream.
            let code = (data.bytes[i / 2] >> (4 * (i % 2))) & 0x0F;
            let scale = 2f32.powi(i32::from(scales.bytes[i / 32]) - 127);
            assert_eq!(scale * e2m1(code), *want, "{name}[{i}]");
            checked += 1;
        }
        // Read in pieces (a run of blocks at a time), the same bytes, data then scales.
        let mut pieces: Vec<(String, Vec<u8>)> = Vec::new();
        gguf.read_pieces(index, 7, &mut |role, bytes| {
            match pieces.last_mut() {
                Some((r, all)) if r == role => all.extend_from_slice(bytes),
                _ => pieces.push((role.to_owned(), bytes.to_vec())),
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(pieces[0], ("data".to_owned(), data.bytes.to_vec()), "{name}");
        assert_eq!(pieces[1], ("scales".to_owned(), scales.bytes.to_vec()), "{name}");
    }
    assert_eq!(checked, 2 * 3 * 64 + 32 + 4 * 96);
    // Other quantized types are their blocks verbatim under gguf.<type>/1, with the logical
    // shape; plain tensors stay dense.
    let q4 = gguf.info(gguf.find("q4_0").unwrap()).unwrap();
    assert_eq!(q4.format, Format::from_name("gguf.q4_0/1"));
    assert_eq!(q4.shape.as_ref(), [2, 64]);
    let attributes = q4.attributes.unwrap().to_value();
    assert!(same(attribute(&attributes, "elems_per_block"), &serde_json::json!(32)));
    assert!(same(attribute(&attributes, "block_bytes"), &serde_json::json!(18)));
    assert_eq!(gguf.info(gguf.find("plain").unwrap()).unwrap().format, Format::Dense);
    // As bytes (the default), the same tensor is u8 of its blocks with gguf.* attributes.
    let bytes = GgufFile::open(dir().join("mxfp4.gguf")).unwrap();
    let row = bytes.info(bytes.find("row").unwrap()).unwrap();
    assert_eq!((row.format, row.shape.as_ref()), (Format::Dense, &[17u64][..]));
}

#[test]
fn an_mxfp4_scale_of_0xff_has_no_zt_mx_form_and_is_refused_by_name() {
    use ztensor_foreign::gguf::Blocks;
    let mut bytes = std::fs::read(dir().join("mxfp4.gguf")).unwrap();
    let at = {
        let gguf = GgufFile::new(bytes.as_slice()).unwrap();
        gguf.raw(gguf.find("row").unwrap()).unwrap().offset as usize
    };
    bytes[at] = 0xFF;
    let gguf = GgufFile::new(bytes.as_slice()).unwrap().with_blocks(Blocks::Layouts);
    let index = gguf.find("row").unwrap();
    let e = gguf.read(index).unwrap_err().to_string();
    assert!(e.contains("0xFF") && e.contains("row") && e.contains("block 0"), "{e}");
    let e = gguf.read_pieces(index, 1 << 20, &mut |_, _| Ok(())).unwrap_err().to_string();
    assert!(e.contains("0xFF"), "{e}");
    // As bytes, it is carried as it is.
    let plain = GgufFile::new(bytes.as_slice()).unwrap();
    assert_eq!(plain.read(index).unwrap().components["data"].bytes[0], 0xFF);
}
