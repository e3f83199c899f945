//! Valid files of every version, in the styles the reference writers produce.

use super::build::*;
use anyhow::Result;
use ztensor_format::{
    ByteOrder, CBOR_INT_MIN, Component, Container, DType, Digest, DigestAlgorithm, Encoding,
    ErrorKind as K, Format, LogicalType, MAGIC_V0_1, MAGIC_V1, Object, Packing, StorageType, Value,
    Version, cbor, text_map,
};
use ztensor_io::{ComponentSpec, Coo, Csr, StoredComponent, WriteOptions};

pub(super) fn valid_common(out: &mut Out, v: Version) -> Result<()> {
    for dtype in DType::ALL {
        let mut w = writer(v);
        w.add_dense("t", &[2, 3], dtype, &elements(dtype, 6, 1), &WriteOptions::raw())?;
        out.ok(
            v,
            &format!("dense-{}", dtype.name()),
            &format!("dense {} [2, 3], raw", dtype.name()),
            done(w)?,
        );
    }
    let data = elements(DType::F32, 64, 2);
    for (name, options, covers, defined) in [
        ("zstd", WriteOptions::zstd(3), "zstd, one frame", false),
        (
            "zstd-frames",
            WriteOptions { chunk_size: Some(64), ..WriteOptions::zstd(3) },
            "zstd, four frames and a seek table",
            false,
        ),
        (
            "digest-crc32c",
            WriteOptions::raw().with_digest(DigestAlgorithm::Crc32c),
            "crc32c digest in uppercase hex, as every writer of the format writes it (the \
             specs fix no case)",
            true,
        ),
        (
            "digest-sha256",
            WriteOptions::zstd(1).with_digest(DigestAlgorithm::Sha256),
            "sha256 digest over zstd bytes",
            false,
        ),
        (
            "digest-blake3",
            WriteOptions::raw().with_digest(DigestAlgorithm::Blake3),
            "blake3 digest: an algorithm the specs do not name",
            true,
        ),
    ] {
        let mut w = writer(v);
        w.add_dense("w", &[64], DType::F32, &data, &options)?;
        if defined {
            out.defined(v, name, None, covers, done(w)?);
        } else {
            out.ok(v, name, covers, done(w)?);
        }
    }
    let mut w = writer(v);
    w.add_dense("scalar", &[], DType::F64, &le(&[2.5f64], f64::to_le_bytes), &WriteOptions::raw())?;
    w.add_dense("empty", &[0, 4], DType::F32, &[], &WriteOptions::raw())?;
    w.add_dense("empty-zstd", &[3, 0], DType::I16, &[], &WriteOptions::zstd(3))?;
    out.ok(v, "scalar-and-zero-size", "a scalar, zero-size tensors raw and zstd", done(w)?);
    out.ok(v, "no-objects", "a file with no objects", done(writer(v))?);
    let mut w = writer(v);
    for i in 0..150u8 {
        w.add_dense(
            &format!("layer.{i:03}.weight"),
            &[4],
            DType::U8,
            &elements(DType::U8, 4, i),
            &WriteOptions::raw(),
        )?;
    }
    out.ok(v, "many-objects", "150 small objects", done(w)?);
    let values = le(&[1.5f32, -2.0, 3.25], f32::to_le_bytes);
    let mut w = writer(v);
    w.add_csr(
        "csr",
        &[3, 4],
        Csr { dtype: DType::F32, values: &values, indices: &[1, 0, 3], indptr: &[0, 1, 1, 3] },
        &WriteOptions::raw(),
    )?;
    w.add_coo(
        "coo",
        &[4, 5],
        Coo { dtype: DType::F32, values: &values, coords: &[0, 2, 3, 4, 0, 1] },
        &WriteOptions::zstd(1),
    )?;
    out.ok(v, "sparse", "CSR (raw) and COO (zstd) matrices", done(w)?);
    // Two objects that alias one blob.
    let mut w = writer(v);
    let bytes = elements(DType::U16, 8, 3);
    let c = Component::new(DType::U16, 0, 16);
    w.add_stored(
        Object::new("a", vec![8], Format::Dense),
        &[StoredComponent { role: "data", component: c.clone(), bytes: &bytes }],
    )?;
    let file = alias_manifest(&done(w)?, v)?;
    out.defined(
        v,
        "aliasing",
        None,
        "two objects whose data is the same blob (exact aliasing; the specs neither allow nor \
         forbid it)",
        file,
    );
    // Padding that is not zero: writers MUST zero it, readers MAY ignore it.
    let mut w = writer(v);
    w.add_dense("a", &[3], DType::U8, &[1, 2, 3], &WriteOptions::raw())?;
    w.add_dense("b", &[2], DType::U16, &elements(DType::U16, 2, 4), &WriteOptions::raw())?;
    let mut file = done(w)?;
    for range in [8..64, 67..128] {
        if file[range.clone()].iter().any(|&b| b != 0) {
            return unreachable_recipe();
        }
        file[range].fill(0xAA);
    }
    out.defined(
        v,
        "nonzero-padding",
        None,
        "padding bytes 0xAA before and between blobs (writers must zero them; readers may \
         ignore them)",
        file,
    );
    Ok(())
}

/// Rewrites a one-object file so that a second object "b" aliases the first one's blob.
pub(super) fn alias_manifest(file: &[u8], v: Version) -> Result<Vec<u8>> {
    let parsed = ztensor_format::parse_file(file, &Default::default())?;
    let mut manifest = parsed.manifest().clone();
    let mut b = manifest.objects[0].clone();
    b.name = "b".into();
    manifest.objects.push(b);
    let end = usize::try_from(parsed.location().offset)?;
    framed_bytes(v.container(), &manifest.encode()?, end).map(|mut f| {
        f[..end].copy_from_slice(&file[..end]);
        f
    })
}

pub(super) fn attributes_kitchen_sink() -> Value {
    text_map([
        ("text", Value::from("é ☃")),
        ("int", Value::Integer(-7)),
        ("u64_max", Value::Integer(i128::from(u64::MAX))),
        ("most_negative", Value::Integer(CBOR_INT_MIN)),
        ("float", Value::Float(0.25)),
        ("float_integral", Value::Float(3.0)),
        ("nan", Value::Float(f64::NAN)),
        ("inf", Value::Float(f64::NEG_INFINITY)),
        ("bytes", Value::Bytes(vec![0, 1, 254, 255])),
        ("tag", Value::Tag(1, Box::new(Value::Integer(1_700_000_000)))),
        ("list", Value::Array(vec![Value::Null, Value::Bool(true), Value::Array(vec![])])),
        (
            "non_text_keys",
            Value::Map(vec![
                (Value::Integer(1), Value::from("one")),
                (Value::Bool(false), Value::Null),
            ]),
        ),
        ("nested", text_map([("deeper", text_map([("deepest", Value::from(1u64))]))])),
    ])
}

pub(super) fn valid_v1(out: &mut Out, v: Version) -> Result<()> {
    let mut w = writer(v);
    w.set_attributes(ztensor_format::Attributes::try_from(attributes_kitchen_sink())?)?;
    let spec = ComponentSpec { role: "data", dtype: DType::U8, logical_type: None, data: &[1, 2] };
    w.add_object(
        "w",
        &[2],
        Format::Dense,
        Some(ztensor_format::Attributes::try_from(attributes_kitchen_sink())?),
        &[spec],
        &WriteOptions::raw(),
    )?;
    out.ok(v, "attributes-every-kind", "file and object attributes of every CBOR kind", done(w)?);

    let mut w = writer(v);
    let specs = [
        ComponentSpec {
            role: "packed_weight",
            dtype: DType::I32,
            logical_type: None,
            data: &elements(DType::I32, 4, 4),
        },
        ComponentSpec {
            role: "scales",
            dtype: DType::F16,
            logical_type: None,
            data: &elements(DType::F16, 2, 5),
        },
        ComponentSpec {
            role: "zeros",
            dtype: DType::F16,
            logical_type: None,
            data: &elements(DType::F16, 2, 6),
        },
    ];
    let attrs = text_map([
        ("bits", 4u64.into()),
        ("group_size", 16u64.into()),
        ("packing", "8_per_i32".into()),
    ]);
    w.add_object(
        "q",
        &[4, 8],
        Format::QuantizedGroup,
        Some(ztensor_format::Attributes::try_from(attrs)?),
        &specs,
        &WriteOptions::raw(),
    )?;
    out.ok(v, "quantized-group", "quantized_group with packed_weight, scales, zeros", done(w)?);

    let mut w = writer(v);
    let spec =
        ComponentSpec { role: "blocks", dtype: DType::U8, logical_type: None, data: &[7, 7, 7] };
    w.add_object(
        "custom",
        &[3],
        Format::Unknown("blocked_sparse".into()),
        None,
        &[spec],
        &WriteOptions::raw(),
    )?;
    out.ok(
        v,
        "unknown-format",
        "an object format this implementation does not know, preserved",
        done(w)?,
    );

    for (t, covers) in [
        (LogicalType::F8E4M3Fn, "f8_e4m3fn"),
        (LogicalType::F8E5M2, "f8_e5m2"),
        (LogicalType::Complex64, "complex64"),
        (LogicalType::Complex128, "complex128"),
    ] {
        let dtype = t.storage().unwrap_or(DType::U8);
        let data = elements(dtype, usize::try_from(3 * t.ratio()).unwrap_or(3), 7);
        let mut w = writer(v);
        let spec = ComponentSpec { role: "data", dtype, logical_type: Some(&t), data: &data };
        w.add_object("x", &[3], Format::Dense, None, &[spec], &WriteOptions::raw())?;
        out.ok(v, &format!("logical-{}", t.name()), &format!("logical type {covers}"), done(w)?);
    }

    // Objects that cannot be decoded, in otherwise valid files.
    let mut w = writer(v);
    let mut c = Component::new(DType::U8, 0, 4);
    c.dtype = StorageType::Unknown("f4".into());
    w.add_stored(
        Object::new("odd", vec![8], Format::Dense),
        &[StoredComponent { role: "data", component: c, bytes: &[0; 4] }],
    )?;
    w.add_dense("ok", &[2], DType::U8, &[1, 2], &WriteOptions::raw())?;
    out.ok(
        v,
        "object-unknown-dtype",
        "one object of an unknown dtype: reported, the file stays valid",
        done(w)?,
    );
    let mut w = writer(v);
    let mut c = Component::new(DType::U8, 0, 4);
    c.encoding = Encoding::Unknown("lz4".into());
    w.add_stored(
        Object::new("odd", vec![4], Format::Dense),
        &[StoredComponent { role: "data", component: c, bytes: &[0; 4] }],
    )?;
    out.ok(v, "object-unknown-encoding", "one object of an unknown encoding", done(w)?);
    let mut w = writer(v);
    let mut c = Component::new(DType::U8, 0, 4);
    c.digest = Some(Digest::Crc32c(0));
    w.add_stored(
        Object::new("bad", vec![4], Format::Dense),
        &[StoredComponent { role: "data", component: c, bytes: &[1, 2, 3, 4] }],
    )?;
    out.ok(v, "object-digest-mismatch", "one object whose digest does not match", done(w)?);
    let mut w = writer(v);
    let mut c = Component::new(DType::U8, 0, 4);
    c.digest = Some(Digest::Unknown("xxh3:0011223344556677".into()));
    w.add_stored(
        Object::new("x", vec![4], Format::Dense),
        &[StoredComponent { role: "data", component: c, bytes: &[1, 2, 3, 4] }],
    )?;
    out.defined(
        v,
        "digest-unknown-algorithm",
        None,
        "a digest of an unknown algorithm (xxh3): unverifiable; readers skip or refuse it",
        done(w)?,
    );
    let mut w = writer(v);
    w.add_dense("b", &[3], DType::Bool, &[0, 1, 2], &WriteOptions::raw())?;
    out.ok(
        v,
        "object-bool-invalid",
        "bool byte 2: the object is reported, the file stays valid",
        done(w)?,
    );

    // The reference writers' manifest style: struct key order, definite maps, uppercase crc32c.
    let version = v.default_version_string().unwrap_or("1.2.0");
    let manifest = m(vec![
        ("version", t(version)),
        ("attributes", text_map([("framework", t("PyTorch"))])),
        (
            "objects",
            m(vec![(
                "w",
                m(vec![
                    ("shape", shape(&[4])),
                    ("format", t("dense")),
                    (
                        "components",
                        m(vec![(
                            "data",
                            comp("f32", 64, 16, vec![("digest", t("crc32c:0x00000000"))]),
                        )]),
                    ),
                ]),
            )]),
        ),
    ]);
    let mut bytes = Vec::new();
    ordered(&manifest, false, &mut bytes);
    let mut file = framed_bytes(Container::V1, &bytes, 80)?;
    // The digest of 16 zero bytes, written the reference way.
    let crc = ztensor_io::codec::digest_of(&DigestAlgorithm::Crc32c, &[0; 16])
        .map(|d| d.to_string())
        .unwrap_or_default();
    let at = find(&file, b"crc32c:0x00000000")?;
    file[at..at + 17].copy_from_slice(crc.as_bytes());
    out.ok(v, "reference-style", "struct key order, definite maps, uppercase crc32c", file);
    Ok(())
}

pub(super) fn valid_v1_2_only(out: &mut Out) -> Result<()> {
    let v = Version::V1_2;
    for t in
        [LogicalType::F8E4M3Fnuz, LogicalType::F8E5M2Fnuz, LogicalType::Unknown("f4_e2m1".into())]
    {
        let mut w = writer(v);
        let spec = ComponentSpec {
            role: "data",
            dtype: DType::U8,
            logical_type: Some(&t),
            data: &[1, 2, 3],
        };
        w.add_object("x", &[3], Format::Dense, None, &[spec], &WriteOptions::raw())?;
        out.ok(
            v,
            &format!("logical-{}", t.name()),
            &format!("logical type {}", t.name()),
            done(w)?,
        );
    }
    // A 1.2 zstd component without uncompressed_length: accepted unless strict.
    let z = ztensor_io::codec::zstd_encode(&[5; 16], 3)?;
    let manifest = v1_one(
        "1.2.0",
        "dense",
        &[16],
        vec![("data", comp("u8", 64, z.len() as u64, vec![("encoding", t("zstd"))]))],
    );
    let mut fixed = MAGIC_V1.to_vec();
    fixed.resize(64, 0);
    fixed.extend_from_slice(&z);
    let cbor = cbor::encode(&manifest)?;
    fixed.extend_from_slice(&cbor);
    fixed.extend_from_slice(&Container::V1.encode_trailer(cbor.len() as u64));
    out.defined(
        v,
        "zstd-without-uncompressed-length",
        Some(K::UncompressedLengthMissing),
        "zstd without the uncompressed_length 1.2 requires (the reference reader accepts it)",
        fixed,
    );
    // A minor version from the future: minor versions only add optional fields.
    let manifest = v1_one("1.9.0", "dense", &[4], vec![("data", comp("u8", 64, 4, vec![]))]);
    let mut file = framed(Container::V1, &manifest, 68)?;
    file[64..68].copy_from_slice(&[9, 8, 7, 6]);
    out.defined(v, "version-1.9", None, "manifest version 1.9.0, a minor version to come", file);
    // Rules enforced only under strict validation.
    let one = |name: &str, format: &str, dims: &[u64], components: Vec<(&str, Value)>| {
        m(vec![
            ("version", t("1.2.0")),
            (
                "objects",
                m(vec![(
                    name,
                    m(vec![
                        ("shape", shape(dims)),
                        ("format", t(format)),
                        ("components", m(components)),
                    ]),
                )]),
            ),
        ])
    };
    let mut file = framed(
        Container::V1,
        &one("", "dense", &[2], vec![("data", comp("u8", 64, 2, vec![]))]),
        66,
    )?;
    file[64..66].copy_from_slice(&[1, 2]);
    out.defined(v, "name-empty", Some(K::NameEmpty), "an object named \"\"", file);
    let manifest = one(
        "w",
        "dense",
        &[2],
        vec![("data", comp("u8", 64, 2, vec![])), ("extra", comp("u8", 128, 2, vec![]))],
    );
    let mut file = framed(Container::V1, &manifest, 130)?;
    file[64..66].copy_from_slice(&[1, 2]);
    file[128..130].copy_from_slice(&[3, 4]);
    out.defined(
        v,
        "component-unexpected",
        Some(K::ComponentUnexpected),
        "a dense object with a component \"extra\" besides data",
        file,
    );
    let mut w = writer(v);
    let values = le(&[1.0f32, 2.0], f32::to_le_bytes);
    let indptr = le(&[0u64, 2], u64::to_le_bytes);
    let indices = le(&[3u64, 1], u64::to_le_bytes);
    w.add_object(
        "csr",
        &[1, 4],
        Format::SparseCsr,
        None,
        &[
            ComponentSpec {
                role: "indices",
                dtype: DType::U64,
                logical_type: None,
                data: &indices,
            },
            ComponentSpec { role: "indptr", dtype: DType::U64, logical_type: None, data: &indptr },
            ComponentSpec { role: "values", dtype: DType::F32, logical_type: None, data: &values },
        ],
        &WriteOptions::raw(),
    )?;
    out.defined(
        v,
        "csr-indices-unsorted",
        Some(K::CsrIndicesUnsorted),
        "CSR column indices 3, 1 in one row (scipy allows unsorted rows)",
        done(w)?,
    );
    Ok(())
}

pub(super) fn valid_v0_1(out: &mut Out) -> Result<()> {
    let v = Version::V0_1;
    // Big-endian data.
    let values = [1.0f32, -2.5, 1e-3];
    let be: Vec<u8> = values.iter().flat_map(|x| x.to_be_bytes()).collect();
    let mut c = Component::new(DType::F32, 0, 12);
    c.set_byte_order(ByteOrder::Big);
    let mut w = writer(v);
    w.add_stored(
        Object::new("be", vec![3], Format::Dense),
        &[StoredComponent { role: "data", component: c, bytes: &be }],
    )?;
    out.ok(v, "big-endian", "data_endianness big: reported little-endian", done(w)?);
    // Big-endian single-blob COO.
    let mut blob = Vec::new();
    for (r, col, val) in [(0u64, 2u64, 300i16), (2, 1, -7)] {
        blob.extend_from_slice(&r.to_be_bytes());
        blob.extend_from_slice(&col.to_be_bytes());
        blob.extend_from_slice(&val.to_be_bytes());
    }
    let mut c = Component::new(DType::I16, 0, blob.len() as u64);
    c.set_byte_order(ByteOrder::Big);
    let mut o = Object::new("s", vec![3, 3], Format::SparseCoo);
    o.packing = Packing::V0Single;
    let mut w = writer(v);
    w.add_stored(o, &[StoredComponent { role: "data", component: c, bytes: &blob }])?;
    out.ok(v, "big-endian-sparsecoo", "big-endian single-blob COO", done(w)?);
    // The reference writer's style: indefinite maps, declaration order, layout, custom fields.
    let tensor = |name: &str,
                  offset: u64,
                  size: u64,
                  dtype: &str,
                  layout: &str,
                  dims: &[u64],
                  extra: Vec<(&str, Value)>| {
        let mut e = vec![
            ("name", t(name)),
            ("offset", u(offset)),
            ("size", u(size)),
            ("dtype", t(dtype)),
            ("layout", t(layout)),
            ("shape", shape(dims)),
            ("encoding", t("raw")),
        ];
        e.extend(extra);
        m(e)
    };
    let manifest = Value::Array(vec![
        tensor(
            "w",
            64,
            8,
            "float32",
            "dense",
            &[2],
            vec![
                ("data_endianness", t("little")),
                ("checksum", t("crc32c:0x00000000")),
                ("author", t("someone")),
            ],
        ),
        tensor("csr", 128, 24 + 8 + 4, "int32", "sparsecsr", &[2, 2], vec![]),
    ]);
    let mut bytes = Vec::new();
    ordered(&manifest, true, &mut bytes);
    let mut file = MAGIC_V0_1.to_vec();
    file.resize(128, 0);
    file.extend_from_slice(&le(&[0u64, 1, 1], u64::to_le_bytes));
    file.extend_from_slice(&le(&[1u64], u64::to_le_bytes));
    file.extend_from_slice(&le(&[42i32], i32::to_le_bytes));
    file.resize(192, 0);
    file.extend_from_slice(&bytes);
    file.extend_from_slice(&Container::V0_1.encode_trailer(bytes.len() as u64));
    let crc = ztensor_io::codec::digest_of(&DigestAlgorithm::Crc32c, &[0; 8])
        .map(|d| d.to_string())
        .unwrap_or_default();
    let at = find(&file, b"crc32c:0x00000000")?;
    file[at..at + 17].copy_from_slice(crc.as_bytes());
    out.ok(
        v,
        "reference-style",
        "indefinite maps in declaration order, layout, a custom field, uppercase crc32c",
        file,
    );
    // The seed texts' variants: no layout at all; layout "sparse" with sparse_format.
    let manifest = Value::Array(vec![
        m(vec![
            ("name", t("a")),
            ("offset", u(64)),
            ("size", u(4)),
            ("dtype", t("int32")),
            ("shape", shape(&[])),
            ("encoding", t("raw")),
        ]),
        m(vec![
            ("name", t("b")),
            ("offset", u(128)),
            ("size", u(24 + 9)),
            ("dtype", t("int8")),
            ("shape", shape(&[2, 3])),
            ("encoding", t("raw")),
            ("layout", t("sparse")),
            ("sparse_format", t("csr")),
        ]),
    ]);
    let mut file = MAGIC_V0_1.to_vec();
    file.resize(64, 0);
    file.extend_from_slice(&le(&[9i32], i32::to_le_bytes));
    file.resize(128, 0);
    file.extend_from_slice(&le(&[0u64, 1, 1], u64::to_le_bytes));
    file.extend_from_slice(&le(&[2u64], u64::to_le_bytes));
    file.push(0x7f);
    file.resize(192, 0);
    let cbor = cbor::encode(&manifest)?;
    file.extend_from_slice(&cbor);
    file.extend_from_slice(&Container::V0_1.encode_trailer(cbor.len() as u64));
    out.ok(
        v,
        "seed-variants",
        "no layout (seed 000) and layout sparse + sparse_format (seed 003)",
        file,
    );
    out.ok(
        v,
        "minimal-17-bytes",
        "the 17-byte file with no tensors",
        framed(Container::V0_1, &Value::Array(vec![]), 8)?,
    );
    let mut w = writer(v);
    w.add_dense("b", &[3], DType::Bool, &[0, 1, 2], &WriteOptions::raw())?;
    out.ok(v, "bool-nonzero-true", "bool byte 2 is true in v0.1, not an error", done(w)?);
    Ok(())
}
