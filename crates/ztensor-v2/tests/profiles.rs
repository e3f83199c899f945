//! The registered profiles' metadata rules (`zt.sparse_coo/1`, `zt.mx/1`, `gguf.<type>/1`,
//! `zt.quant_group/1`): an object that follows its profile opens; each rule broken alone is
//! `layout_rule`. COO's data rule (each coordinate tuple once) on reading and writing.

use ztensor_io::TensorSource;
use ztensor_v2::cbor::{Value, encode};
use ztensor_v2::{File, MAX_MANIFEST, Rule};

fn text(s: &str) -> Value {
    Value::Text(s.to_owned())
}

/// A part of `dtype` (and logical `type`) of `len` bytes; placed by [`file`].
struct P {
    name: &'static str,
    dtype: &'static str,
    logical: Option<&'static str>,
    len: u64,
}

fn p(name: &'static str, dtype: &'static str, logical: Option<&'static str>, len: u64) -> P {
    P { name, dtype, logical, len }
}

/// A file of one object `layout` of `shape` with `parts` (each in a 64 KiB region of its own,
/// filled by `fill`) and `attributes`.
fn file_with(
    layout: &str,
    shape: &[u64],
    parts: &[P],
    attributes: Vec<(&str, Value)>,
    fill: &dyn Fn(&str) -> Vec<u8>,
) -> Vec<u8> {
    let mut bytes = ztensor_v2::MAGIC.to_vec();
    let mut entries = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        let at = 65536 * (i as u64 + 1);
        bytes.resize(usize::try_from(at).unwrap(), 0);
        let mut data = fill(part.name);
        data.resize(usize::try_from(part.len).unwrap(), 0);
        bytes.extend(&data);
        let mut fields = vec![
            (text("dtype"), text(part.dtype)),
            (text("blob"), Value::Array(vec![Value::Uint(at), Value::Uint(part.len)])),
        ];
        if let Some(t) = part.logical {
            fields.push((text("type"), text(t)));
        }
        entries.push((text(part.name), Value::Map(fields)));
    }
    let mut object = vec![
        (text("shape"), Value::Array(shape.iter().map(|&d| Value::Uint(d)).collect())),
        (text("layout"), text(layout)),
        (text("parts"), Value::Map(entries)),
    ];
    if !attributes.is_empty() {
        let map = attributes.into_iter().map(|(k, v)| (text(k), v)).collect();
        object.push((text("attributes"), Value::Map(map)));
    }
    let manifest =
        Value::Map(vec![(text("objects"), Value::Map(vec![(text("t"), Value::Map(object))]))]);
    let at = bytes.len().div_ceil(65536) * 65536;
    bytes.resize(at, 0);
    let manifest = encode(&manifest);
    bytes.extend(&manifest);
    bytes.extend((at as u64).to_le_bytes());
    bytes.extend((manifest.len() as u64).to_le_bytes());
    bytes.extend(xxhash_rust::xxh3::xxh3_64(&manifest).to_le_bytes());
    bytes.extend(2u32.to_le_bytes());
    bytes.extend(0u32.to_le_bytes());
    bytes.extend(ztensor_v2::MAGIC);
    bytes
}

fn file(layout: &str, shape: &[u64], parts: &[P], attributes: Vec<(&str, Value)>) -> Vec<u8> {
    file_with(layout, shape, parts, attributes, &|_| Vec::new())
}

fn opens(bytes: Vec<u8>) -> Result<(), Rule> {
    File::open(bytes, MAX_MANIFEST)
        .map(drop)
        .map_err(|e| e.broken().unwrap_or_else(|| panic!("{e}")))
}

fn map(entries: Vec<(&str, Value)>) -> Value {
    Value::Map(entries.into_iter().map(|(k, v)| (text(k), v)).collect())
}

#[test]
fn microscaling() {
    let good = || vec![("block_size", Value::Uint(32)), ("scale_form", text("e8m0_exponent"))];
    let parts = |data: u64, scales: u64| {
        vec![p("data", "u8", Some("f8_e4m3fn"), data), p("scales", "u8", Some("f8_e8m0"), scales)]
    };
    assert_eq!(opens(file("zt.mx/1", &[2, 64], &parts(128, 4), good())), Ok(()));
    // MXFP4: two values a byte; MXINT8: i8 with no type.
    let fp4 = vec![p("data", "u8", Some("f4_e2m1"), 64), p("scales", "u8", Some("f8_e8m0"), 4)];
    assert_eq!(opens(file("zt.mx/1", &[2, 64], &fp4, good())), Ok(()));
    let int8 = vec![p("data", "i8", None, 128), p("scales", "u8", Some("f8_e8m0"), 4)];
    assert_eq!(opens(file("zt.mx/1", &[2, 64], &int8, good())), Ok(()));
    let broken = |parts: &[P], attributes| opens(file("zt.mx/1", &[2, 64], parts, attributes));
    assert_eq!(broken(&parts(128, 5), good()), Err(Rule::LayoutRule));
    assert_eq!(broken(&parts(127, 4), good()), Err(Rule::LayoutRule));
    let mut odd = good();
    odd[0].1 = Value::Uint(3);
    assert_eq!(broken(&parts(128, 4), odd), Err(Rule::LayoutRule));
    assert_eq!(
        broken(&parts(128, 4), vec![("block_size", Value::Uint(32))]),
        Err(Rule::LayoutRule)
    );
    let mut axis = good();
    axis.push(("axis", Value::Uint(2)));
    assert_eq!(broken(&parts(128, 4), axis), Err(Rule::LayoutRule));
    let bf16 = vec![p("data", "bf16", None, 256), p("scales", "u8", Some("f8_e8m0"), 4)];
    assert_eq!(broken(&bf16, good()), Err(Rule::LayoutRule));
    let plain_scales = vec![p("data", "i8", None, 128), p("scales", "u8", None, 4)];
    assert_eq!(broken(&plain_scales, good()), Err(Rule::LayoutRule));
}

#[test]
fn ggml_blocks() {
    let attributes = |per_block: u64, bytes: u64| {
        vec![("elems_per_block", Value::Uint(per_block)), ("block_bytes", Value::Uint(bytes))]
    };
    // q4_0: 32 elements in 18 bytes; 128 elements are 4 blocks.
    let data = |len| vec![p("data", "u8", None, len)];
    assert_eq!(opens(file("gguf.q4_0/1", &[2, 64], &data(72), attributes(32, 18))), Ok(()));
    assert_eq!(
        opens(file("gguf.q4_0/1", &[2, 64], &data(71), attributes(32, 18))),
        Err(Rule::LayoutRule)
    );
    // 96 elements divide into blocks of 32, a last dimension of 48 does not.
    assert_eq!(
        opens(file("gguf.q4_0/1", &[2, 48], &data(54), attributes(32, 18))),
        Err(Rule::LayoutRule)
    );
    assert_eq!(opens(file("gguf.q4_0/1", &[2, 64], &data(72), vec![])), Err(Rule::LayoutRule));
    let typed = vec![p("data", "u8", Some("f8_e4m3fn"), 72)];
    assert_eq!(
        opens(file("gguf.q4_0/1", &[2, 64], &typed, attributes(32, 18))),
        Err(Rule::LayoutRule)
    );
    // A ggml type the registry does not name is a layout like any unknown one: structural.
    assert_eq!(opens(file("gguf.q9_9/1", &[2, 64], &data(1), vec![])), Ok(()));
}

#[test]
fn coordinates() {
    let parts = |coords: u64, values: u64| {
        vec![p("coords", "u64", None, coords), p("values", "f32", None, values)]
    };
    assert_eq!(opens(file("zt.sparse_coo/1", &[3, 4], &parts(32, 8), vec![])), Ok(()));
    assert_eq!(
        opens(file("zt.sparse_coo/1", &[3, 4], &parts(24, 8), vec![])),
        Err(Rule::LayoutRule)
    );
    assert_eq!(
        opens(file("zt.sparse_coo/1", &[3, 4], &parts(32, 12), vec![])),
        Err(Rule::LayoutRule)
    );
    let signed = vec![p("coords", "i64", None, 32), p("values", "f32", None, 8)];
    assert_eq!(opens(file("zt.sparse_coo/1", &[3, 4], &signed, vec![])), Err(Rule::LayoutRule));
    assert_eq!(opens(file("zt.sparse_coo/1", &[], &parts(0, 0), vec![])), Err(Rule::LayoutRule));

    // Each tuple once: (0, 1) twice is refused when read, and the values read otherwise.
    let coords = |rows: [u64; 2], cols: [u64; 2]| {
        let mut b = Vec::new();
        for n in rows.iter().chain(&cols) {
            b.extend(n.to_le_bytes());
        }
        b
    };
    let read = |rows, cols| {
        let bytes = file_with("zt.sparse_coo/1", &[3, 4], &parts(32, 8), vec![], &|part| {
            if part == "coords" { coords(rows, cols) } else { Vec::new() }
        });
        let f = File::open(bytes, MAX_MANIFEST).unwrap();
        TensorSource::read(&f, 0).map(|d| d.components.len())
    };
    assert_eq!(read([0, 2], [1, 3]).unwrap(), 2);
    let e = read([0, 0], [1, 1]).unwrap_err();
    assert!(e.to_string().contains("given twice"), "{e}");
    let e = read([0, 3], [1, 1]).unwrap_err();
    assert!(e.to_string().contains("sparse_index_out_of_bounds"), "{e}");

    // With 32-bit coordinates (read as an object of its own layout), the same rule.
    let narrow = vec![p("coords", "u32", None, 16), p("values", "f32", None, 8)];
    let bytes = file_with("zt.sparse_coo/1", &[3, 4], &narrow, vec![], &|part| {
        if part == "coords" {
            [0u32, 0, 1, 1].iter().flat_map(|n| n.to_le_bytes()).collect()
        } else {
            Vec::new()
        }
    });
    let f = File::open(bytes, MAX_MANIFEST).unwrap();
    let e = TensorSource::read(&f, 0).unwrap_err();
    assert!(e.to_string().contains("given twice"), "{e}");
    assert!(TensorSource::verify(&f, 0).is_err());

    // A 1.x COO tensor holding a tuple twice (1.x allows it) is refused, not merged.
    let mut w = ztensor_io::Writer::new(Vec::new(), ztensor_format::Version::V1_2).unwrap();
    let coo = ztensor_io::Coo {
        dtype: ztensor_format::DType::F32,
        values: &[0, 0, 128, 63, 0, 0, 0, 64],
        coords: &[0, 0, 1, 1],
    };
    w.add_coo("twice", &[3, 4], coo, &ztensor_io::WriteOptions::raw()).unwrap();
    let one = ztensor_io::Reader::new(w.finish().unwrap().0, &Default::default()).unwrap();
    let mut sink = ztensor_v2::Zt2Sink::to_output(std::io::Cursor::new(Vec::new()));
    let e = ztensor_io::TensorSink::write_all(&mut sink, &one).unwrap_err();
    assert!(e.to_string().contains("given twice"), "{e}");
    assert!(matches!(e.kind(), ztensor_v2::ErrorKind::Unrepresentable), "{e}");
}

#[test]
fn group_quantization() {
    // AWQ's set: 4 bits, groups of 32 along axis 0, u32 words of 8 codes, f16 scales, a zero
    // point per group packed as the data.
    let attributes = |per_word: u64, zero: Value| {
        vec![
            ("bits", Value::Uint(4)),
            ("group_size", Value::Uint(32)),
            ("axis", Value::Uint(0)),
            (
                "packing",
                map(vec![
                    ("word", text("u32")),
                    ("order", text("lsb_first")),
                    ("per_word", Value::Uint(per_word)),
                ]),
            ),
            ("scale_form", text("f16_factors")),
            ("zero_point", zero),
        ]
    };
    let tensor = || map(vec![("form", text("tensor")), ("packing", text("same_as_data"))]);
    // 128 x 8 codes: 128 words of data (512 bytes); 4 groups x 8 lanes = 32 scales (64 bytes)
    // and 32 zeros in 4 words (16 bytes).
    let parts = |data: u64, scales: u64, zeros: u64| {
        vec![
            p("data", "i32", None, data),
            p("scales", "f16", None, scales),
            p("zeros", "u32", None, zeros),
        ]
    };
    let qg =
        |parts: &[P], attributes| opens(file("zt.quant_group/1", &[128, 8], parts, attributes));
    assert_eq!(qg(&parts(512, 64, 16), attributes(8, tensor())), Ok(()));
    assert_eq!(qg(&parts(508, 64, 16), attributes(8, tensor())), Err(Rule::LayoutRule));
    assert_eq!(qg(&parts(512, 62, 16), attributes(8, tensor())), Err(Rule::LayoutRule));
    assert_eq!(qg(&parts(512, 64, 12), attributes(8, tensor())), Err(Rule::LayoutRule));
    assert_eq!(qg(&parts(512, 64, 16), attributes(7, tensor())), Err(Rule::LayoutRule));
    // No zero-point tensor: no `zeros` part; an implied one needs its value.
    let two = vec![p("data", "u32", None, 512), p("scales", "f16", None, 64)];
    let none = map(vec![("form", text("none"))]);
    assert_eq!(qg(&two, attributes(8, none.clone())), Ok(()));
    assert_eq!(qg(&parts(512, 64, 16), attributes(8, none)), Err(Rule::LayoutRule));
    let implied = map(vec![("form", text("implied")), ("value", Value::Uint(8))]);
    assert_eq!(qg(&two, attributes(8, implied)), Ok(()));
    let no_value = map(vec![("form", text("implied"))]);
    assert_eq!(qg(&two, attributes(8, no_value)), Err(Rule::LayoutRule));
    // 3 bits do not divide a 32-bit word (the rule the profile states).
    let mut three = attributes(10, map(vec![("form", text("none"))]));
    three[0].1 = Value::Uint(3);
    assert_eq!(qg(&two, three), Err(Rule::LayoutRule));
}
