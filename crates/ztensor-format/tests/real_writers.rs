//! Manifests in the byte-level style the public reference writers produce (see the project's
//! research notes): v0.1 indefinite-length maps in declaration order; v1.1 and v1.2 definite
//! maps in struct declaration order (not sorted), uppercase `crc32c:0x` digests. The v1 bytes
//! come from an independent encoder (`ciborium`); the v0.1 bytes are written out by hand.

use ciborium::value::Value as C;
use ztensor_format::{
    Attributes, ByteOrder, Container, DType, Digest, Encoding, Format, LogicalType, Options,
    Packing, StorageType, Value, Version, parse_file,
};

use crate::support::frame;

fn t(s: &str) -> Vec<u8> {
    assert!(s.len() < 24);
    let mut b = vec![0x60 | s.len() as u8];
    b.extend_from_slice(s.as_bytes());
    b
}

fn u(v: u64) -> Vec<u8> {
    match v {
        0..=23 => vec![v as u8],
        24..=255 => vec![0x18, v as u8],
        _ => {
            let mut b = vec![0x19];
            b.extend_from_slice(&(v as u16).to_be_bytes());
            b
        }
    }
}

/// An indefinite-length map in the given key order, as serde_cbor emits for flattened structs.
fn indefinite_map(entries: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut b = vec![0xbf];
    for (k, v) in entries {
        b.extend(t(k));
        b.extend_from_slice(v);
    }
    b.push(0xff);
    b
}

fn array(items: &[Vec<u8>]) -> Vec<u8> {
    let mut b = vec![0x80 | items.len() as u8];
    for item in items {
        b.extend_from_slice(item);
    }
    b
}

#[test]
fn v0_1_reference_style_dense_big_endian_and_custom_fields() {
    let dense = indefinite_map(&[
        ("name", t("w")),
        ("offset", u(64)),
        ("size", u(16)),
        ("dtype", t("float32")),
        ("layout", t("dense")),
        ("shape", array(&[u(2), u(2)])),
        ("encoding", t("raw")),
        ("data_endianness", t("big")),
        ("checksum", t("crc32c:0x1234ABCD")),
        ("author", t("someone")),
    ]);
    let coo = indefinite_map(&[
        ("name", t("s")),
        ("offset", u(128)),
        ("size", u(34)),
        ("dtype", t("uint8")),
        ("layout", t("sparsecoo")),
        ("shape", array(&[u(4), u(4)])),
        ("encoding", t("raw")),
    ]);
    let manifest = array(&[dense, coo]);
    let file = frame(Container::V0_1, &[], Some(192), &manifest);
    let parsed = parse_file(&file, &Options::strict()).expect("reference-style v0.1 file");
    assert_eq!(parsed.version(), Version::V0_1);

    let w = parsed.get("w").unwrap().object();
    assert_eq!(
        (w.format.clone(), w.packing, w.shape.clone()),
        (Format::Dense, Packing::Split, vec![2, 2])
    );
    let data = &w.components["data"];
    assert_eq!(data.dtype, StorageType::Known(DType::F32));
    assert_eq!(*data.byte_order(), ByteOrder::Big);
    assert_eq!(data.digest, Some(Digest::Crc32c(0x1234_abcd)));
    assert_eq!(
        w.attributes().map(Attributes::to_value),
        Some(Value::Map(vec![(Value::from("author"), Value::from("someone"))]))
    );

    let s = parsed.get("s").unwrap().object();
    assert_eq!((s.format.clone(), s.packing), (Format::SparseCoo, Packing::V0Single));
    // 2 records of 2 coordinates (16 bytes) and one u8 value: 17 bytes each.
    assert_eq!(s.components["data"].length, 34);
}

#[test]
fn v0_1_seed_variants_without_layout_and_with_sparse_format() {
    // Seed 000 has no `layout`; seed 003 spells sparse tensors with `sparse_format`.
    let seed000 = indefinite_map(&[
        ("name", t("a")),
        ("offset", u(64)),
        ("size", u(4)),
        ("dtype", t("int32")),
        ("shape", array(&[])),
        ("encoding", t("raw")),
    ]);
    let seed003 = indefinite_map(&[
        ("name", t("b")),
        ("offset", u(128)),
        ("size", u(24 + 2 * 9)),
        ("dtype", t("int8")),
        ("shape", array(&[u(2), u(3)])),
        ("encoding", t("raw")),
        ("layout", t("sparse")),
        ("sparse_format", t("CSR")),
    ]);
    let file = frame(Container::V0_1, &[], Some(192), &array(&[seed000, seed003]));
    let parsed = parse_file(&file, &Options::strict()).unwrap();
    assert_eq!(parsed.get("a").unwrap().object().format, Format::Dense);
    let b = parsed.get("b").unwrap().object();
    assert_eq!(
        (b.format.clone(), b.packing, b.attributes.clone()),
        (Format::SparseCsr, Packing::V0Single, None)
    );
}

fn cmap(entries: Vec<(&str, C)>) -> C {
    C::Map(entries.into_iter().map(|(k, v)| (C::Text(k.into()), v)).collect())
}

fn cint(v: u64) -> C {
    C::Integer(v.into())
}

fn ciborium_bytes(value: &C) -> Vec<u8> {
    let mut out = Vec::new();
    ciborium::into_writer(value, &mut out).unwrap();
    out
}

#[test]
fn v1_1_reference_style_struct_order_uppercase_crc_and_f8_dtype() {
    // Root, object and component keys in the reference writer's declaration order.
    let component = |dtype: &str, offset: u64, length: u64, digest: Option<&str>| {
        let mut e = vec![
            ("dtype", C::Text(dtype.into())),
            ("offset", cint(offset)),
            ("length", cint(length)),
        ];
        if let Some(d) = digest {
            e.push(("digest", C::Text(d.into())));
        }
        cmap(e)
    };
    let object = |shape: Vec<u64>, c: C| {
        cmap(vec![
            ("shape", C::Array(shape.into_iter().map(cint).collect())),
            ("format", C::Text("dense".into())),
            ("components", cmap(vec![("data", c)])),
        ])
    };
    let manifest = cmap(vec![
        ("version", C::Text("1.1.0".into())),
        ("attributes", cmap(vec![("framework", C::Text("PyTorch".into()))])),
        (
            "objects",
            cmap(vec![
                ("fp8", object(vec![4], component("f8_e4m3", 64, 4, Some("crc32c:0xDEADBEEF")))),
                ("z", object(vec![2], component("complex64", 128, 16, None))),
            ]),
        ),
    ]);
    let file = frame(Container::V1, &[], Some(192), &ciborium_bytes(&manifest));
    let parsed = parse_file(&file, &Options::strict()).unwrap();
    assert_eq!(parsed.version(), Version::V1_1);
    assert_eq!(parsed.manifest().version_string.as_deref(), Some("1.1.0"));
    let fp8 = &parsed.get("fp8").unwrap().object().components["data"];
    assert_eq!(
        (fp8.dtype.clone(), fp8.logical_type.clone()),
        (StorageType::Known(DType::U8), Some(LogicalType::F8E4M3Fn))
    );
    assert_eq!(fp8.digest, Some(Digest::Crc32c(0xdead_beef)));
    let z = &parsed.get("z").unwrap().object().components["data"];
    assert_eq!(
        (z.dtype.clone(), z.logical_type.clone()),
        (StorageType::Known(DType::F32), Some(LogicalType::Complex64))
    );
    // Re-encoding as v1.1 writes `dtype` + `type`, which the reference readers accept.
    let again = parsed.manifest().encode().unwrap();
    let mut reparsed =
        ztensor_format::Manifest::decode(Container::V1, &again, &Default::default()).unwrap();
    let mut original = parsed.manifest().clone();
    // Deterministic encoding reorders the objects map; compare by name.
    reparsed.objects.sort_by(|a, b| a.name.cmp(&b.name));
    original.objects.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(reparsed, original);
    assert!(!again.windows(9).any(|w| w == b"complex64") || again.windows(4).any(|w| w == b"type"));
    assert!(again.windows(9).any(|w| w == b"f8_e4m3fn"));
}

#[test]
fn v1_2_reference_style_component_with_type_and_uncompressed_length() {
    let component = cmap(vec![
        ("dtype", C::Text("u8".into())),
        ("type", C::Text("f8_e5m2".into())),
        ("offset", cint(64)),
        ("length", cint(9)),
        ("uncompressed_length", cint(6)),
        ("encoding", C::Text("zstd".into())),
        ("digest", C::Text("sha256:".to_owned() + &"0A".repeat(32))),
    ]);
    let manifest = cmap(vec![
        ("version", C::Text("1.2.0".into())),
        (
            "objects",
            cmap(vec![(
                "e",
                cmap(vec![
                    ("shape", C::Array(vec![cint(2), cint(3)])),
                    ("format", C::Text("dense".into())),
                    ("attributes", cmap(vec![("scale", C::Float(0.5))])),
                    ("components", cmap(vec![("data", component)])),
                ]),
            )]),
        ),
    ]);
    let file = frame(Container::V1, &[], Some(128), &ciborium_bytes(&manifest));
    let parsed = parse_file(&file, &Options::strict()).unwrap();
    let e = parsed.get("e").unwrap();
    let data = &e.object().components["data"];
    assert_eq!(data.logical_type, Some(LogicalType::F8E5M2));
    assert_eq!((data.encoding.clone(), data.uncompressed_length), (Encoding::Zstd, Some(6)));
    assert_eq!(data.digest, Some(Digest::Sha256(Box::new([0x0a; 32]))));
    assert_eq!(e.decoded_len("data"), Some(6));
    assert_eq!(
        e.object().attributes().map(Attributes::to_value),
        Some(Value::Map(vec![(Value::from("scale"), Value::Float(0.5))]))
    );
}

#[test]
fn v1_1_appended_by_v1_2_writer_keys_off_field_presence() {
    // A v1.2 appender keeps "1.1.0" but adds `type` and `uncompressed_length`.
    let manifest = cmap(vec![
        ("version", C::Text("1.1.0".into())),
        (
            "objects",
            cmap(vec![(
                "c",
                cmap(vec![
                    ("shape", C::Array(vec![cint(2)])),
                    ("format", C::Text("dense".into())),
                    (
                        "components",
                        cmap(vec![(
                            "data",
                            cmap(vec![
                                ("dtype", C::Text("f64".into())),
                                ("type", C::Text("complex128".into())),
                                ("offset", cint(64)),
                                ("length", cint(32)),
                            ]),
                        )]),
                    ),
                ]),
            )]),
        ),
    ]);
    let file = frame(Container::V1, &[], Some(96), &ciborium_bytes(&manifest));
    let parsed = parse_file(&file, &Options::strict()).unwrap();
    assert_eq!(parsed.version(), Version::V1_1);
    assert_eq!(
        parsed.get("c").unwrap().object().components["data"].logical_type,
        Some(LogicalType::Complex128)
    );
}
