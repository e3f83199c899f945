//! Deterministic recipes for every fixture under `fixtures/v0.1`, `fixtures/v1.1` and
//! `fixtures/v1.2`: valid files, files in the styles the public reference writers produce, and
//! one or more reject files per rule of `spec/rules.md`.

use anyhow::Result;
use ztensor_format::{
    ByteOrder, CBOR_INT_MIN, Component, Container, DType, Digest, DigestAlgorithm, Encoding,
    ErrorKind as K, Format, LogicalType, MAGIC_V0_1, MAGIC_V1, Object, Packing, StorageType, Value,
    Version, cbor, text_map,
};
use ztensor_io::{ComponentSpec, Coo, Csr, StoredComponent, WriteOptions, Writer};

/// What a fixture must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// Be accepted.
    Ok,
    /// Be rejected with this rule.
    Reject(K),
    /// Either: the specs let readers differ (a MAY, an unstated case, or a rule enforced only
    /// under strict validation, named here). Graded as accepted or rejected, never as a failure;
    /// an accepting reader must still report the content of the golden dump.
    Defined(Option<K>),
}

/// One fixture file.
#[derive(Debug, Clone)]
pub struct Fixture {
    /// Path under `fixtures/`.
    pub path: String,
    /// The version it belongs to.
    pub version: Version,
    /// What it covers, in a few words.
    pub covers: String,
    /// What an implementation must do with it.
    pub expect: Expect,
    /// The bytes.
    pub bytes: Vec<u8>,
}

fn dir(v: Version) -> &'static str {
    match v {
        Version::V0_1 => "v0.1",
        Version::V1_1 => "v1.1",
        Version::V1_2 => "v1.2",
    }
}

struct Out {
    list: Vec<Fixture>,
}

impl Out {
    /// Files a fixture under the folder its expectation names.
    fn push(&mut self, v: Version, name: &str, covers: &str, expect: Expect, bytes: Vec<u8>) {
        let folder = match expect {
            Expect::Ok => "valid",
            Expect::Reject(_) => "reject",
            Expect::Defined(_) => "implementation-defined",
        };
        self.list.push(Fixture {
            path: format!("{}/{folder}/{name}.zt", dir(v)),
            version: v,
            covers: covers.into(),
            expect,
            bytes,
        });
    }
    fn ok(&mut self, v: Version, name: &str, covers: &str, bytes: Vec<u8>) {
        self.push(v, name, covers, Expect::Ok, bytes);
    }
    fn defined(&mut self, v: Version, name: &str, strict: Option<K>, covers: &str, bytes: Vec<u8>) {
        self.push(v, name, covers, Expect::Defined(strict), bytes);
    }
    fn reject(&mut self, v: Version, kind: K, variant: &str, covers: &str, bytes: Vec<u8>) {
        let name = if variant.is_empty() {
            kind.id().to_owned()
        } else {
            format!("{}--{variant}", kind.id())
        };
        self.push(v, &name, covers, Expect::Reject(kind), bytes);
    }
}

fn le<T: Copy, const N: usize>(values: &[T], to: fn(T) -> [u8; N]) -> Vec<u8> {
    values.iter().flat_map(|&v| to(v)).collect()
}

/// `n` deterministic elements of `dtype` (bools 0/1).
fn elements(dtype: DType, n: usize, seed: u8) -> Vec<u8> {
    let size = usize::try_from(dtype.size()).unwrap_or(1);
    (0..n * size)
        .map(|i| {
            let b = u8::try_from((i * 37 + usize::from(seed) * 11) % 251).unwrap_or(0);
            if dtype == DType::Bool { b & 1 } else { b }
        })
        .collect()
}

fn writer(v: Version) -> Writer<Vec<u8>> {
    Writer::new(Vec::new(), v).expect("a Vec never fails")
}

fn done(w: Writer<Vec<u8>>) -> Result<Vec<u8>> {
    Ok(w.finish()?.0)
}

/// A file framed by hand around a manifest value (encoded in RFC 8949 deterministic form), with
/// a zeroed data area of `data_end` bytes.
fn framed(container: Container, manifest: &Value, data_end: usize) -> Result<Vec<u8>> {
    framed_bytes(container, &cbor::encode(manifest)?, data_end)
}

fn framed_bytes(container: Container, manifest: &[u8], data_end: usize) -> Result<Vec<u8>> {
    let mut file = match container {
        Container::V0_1 => MAGIC_V0_1.to_vec(),
        Container::V1 => MAGIC_V1.to_vec(),
    };
    file.resize(data_end.max(8), 0);
    file.extend_from_slice(manifest);
    file.extend_from_slice(&container.encode_trailer(manifest.len() as u64));
    Ok(file)
}

/// A CBOR encoder that keeps map entries in the given order, with definite or indefinite
/// lengths: how the reference writers lay manifests out (struct declaration order; the 0.1
/// writer's indefinite-length maps).
fn ordered(value: &Value, indefinite_maps: bool, out: &mut Vec<u8>) {
    let head = |out: &mut Vec<u8>, major: u8, n: u64| {
        let m = major << 5;
        match n {
            0..=23 => out.push(m | u8::try_from(n).unwrap_or(0)),
            24..=0xff => out.extend_from_slice(&[m | 24, u8::try_from(n).unwrap_or(0)]),
            0x100..=0xffff => {
                out.push(m | 25);
                out.extend_from_slice(&u16::try_from(n).unwrap_or(0).to_be_bytes());
            }
            _ => {
                out.push(m | 27);
                out.extend_from_slice(&n.to_be_bytes());
            }
        }
    };
    match value {
        Value::Map(entries) => {
            if indefinite_maps {
                out.push(0xbf);
            } else {
                head(out, 5, entries.len() as u64);
            }
            for (k, v) in entries {
                ordered(k, indefinite_maps, out);
                ordered(v, indefinite_maps, out);
            }
            if indefinite_maps {
                out.push(0xff);
            }
        }
        Value::Array(items) => {
            head(out, 4, items.len() as u64);
            for item in items {
                ordered(item, indefinite_maps, out);
            }
        }
        other => out.extend_from_slice(&cbor::encode(other).unwrap_or_default()),
    }
}

fn m(entries: Vec<(&str, Value)>) -> Value {
    Value::Map(entries.into_iter().map(|(k, v)| (Value::from(k), v)).collect())
}

fn u(v: u64) -> Value {
    Value::from(v)
}

fn t(s: &str) -> Value {
    Value::from(s)
}

fn shape(dims: &[u64]) -> Value {
    Value::Array(dims.iter().map(|&d| u(d)).collect())
}

/// A v1 manifest of one object "w" made of the given component maps.
fn v1_one(version: &str, format: &str, dims: &[u64], components: Vec<(&str, Value)>) -> Value {
    m(vec![
        ("version", t(version)),
        (
            "objects",
            m(vec![(
                "w",
                m(vec![
                    ("shape", shape(dims)),
                    ("format", t(format)),
                    ("components", m(components)),
                ]),
            )]),
        ),
    ])
}

fn comp(dtype: &str, offset: u64, length: u64, extra: Vec<(&str, Value)>) -> Value {
    let mut e = vec![("dtype", t(dtype)), ("offset", u(offset)), ("length", u(length))];
    e.extend(extra);
    m(e)
}

/// Every fixture, in a fixed order.
///
/// # Errors
/// Only if a recipe itself is wrong (a writer refusing its input).
pub fn all() -> Result<Vec<Fixture>> {
    let mut out = Out { list: Vec::new() };
    for v in [Version::V0_1, Version::V1_1, Version::V1_2] {
        valid_common(&mut out, v)?;
    }
    valid_v1(&mut out, Version::V1_1)?;
    valid_v1(&mut out, Version::V1_2)?;
    valid_v1_2_only(&mut out)?;
    valid_v0_1(&mut out)?;
    rejects_v1(&mut out, Version::V1_2)?;
    rejects_v1(&mut out, Version::V1_1)?;
    rejects_v0_1(&mut out)?;
    from_fuzzing(&mut out)?;
    Ok(out.list)
}

/// Files differential fuzzing found a reference implementation accepting, reduced
/// (`ztensor-conformance fuzz`; `findings/` and the matrix's "Fuzz findings"), where they teach
/// a case the hand-made files do not: each is made again from its fuzz recipe, the generator's
/// input and its changes.
fn from_fuzzing(out: &mut Out) -> Result<()> {
    use crate::difffuzz::{Mutation, Recipe, Region};
    let cases = [
        (
            Version::V0_1,
            K::CborDuplicateKey,
            "tensor-attributes",
            "a tensor map repeats its `attributes` field (reference 0.1.0 keeps one)",
            "000100005e00000000007e0000000000000000000000000000000000000000000000000000000000\
             0000000000000000",
            vec![
                Mutation::Attributes { node: 4_169_814_353, seed: 4_136_527_310 },
                Mutation::Duplicate { node: 2_159_485_159 },
            ],
        ),
        (
            Version::V1_1,
            K::CborDuplicateKey,
            "object",
            "the objects map gives an object twice (reference 1.1.1 keeps one)",
            "0103000000000000e30000eb00000097e6000000cf0000000000000f000000000000000000000000\
             0000000000000000",
            vec![Mutation::Duplicate { node: 3_198_159_458 }],
        ),
        (
            Version::V1_2,
            K::CborDuplicateKey,
            "object",
            "the objects map gives an object twice (reference 1.2.3 keeps one)",
            "0202000039000000007e00000066000000007ec200000000000000000000000000000000000000\
             000000000000000000",
            vec![Mutation::Duplicate { node: 502_775_038 }],
        ),
        (
            Version::V0_1,
            K::CborSyntax,
            "truncated",
            "the manifest ends inside an item, after a size that says so (reference 0.1.0 reads no tensor)",
            "0003cd005e1f2c0000000b00e30600d10000e5007d00d3926770000000a100000000000000000000\
             0000000000000000",
            vec![
                Mutation::Int { node: 733_481_968, pick: 182 },
                Mutation::Truncate { at: 1_200_391_779 },
            ],
        ),
        (
            Version::V0_1,
            K::SchemaFieldType,
            "checksum",
            "a tensor's `checksum` is a byte string (reference 0.1.0 ignores it)",
            "00020000ff00000000000e23000000820000000000fa000000000000000000000000000000000000\
             0000000000000000",
            vec![Mutation::Retype { node: 2_472_309_336, kind: 166 }],
        ),
        (
            Version::V0_1,
            K::ShapeOverflow,
            "",
            "a shape of [2^63, 4, 0]: no elements, but its product of dimensions and element size overflows 64 bits (reference 0.1.0 reads it)",
            "000300000b00ef000000fb000000000000001b63000000b600000000438f00000000000000000000\
             0000000000000000",
            vec![Mutation::Int { node: 3_135_605_958, pick: 252 }],
        ),
        (
            Version::V0_1,
            K::ComponentLengthNotMultiple,
            "",
            "a float64 tensor of 2 bytes, its blob inside another's (reference 0.1.0 reads one element)",
            "000300000000000000000000a2000000000000006e00000000000000000000000000000000000000\
             0000000000000000",
            vec![Mutation::Alias { node: 4_048_202_392, other: 170_358_946 }],
        ),
        (
            Version::V0_1,
            K::KeyNotText,
            "",
            "a tensor map with a byte-string key (reference 0.1.0 reads it as its text)",
            "0002a10099000000002a006200ea0000000073b20000000000000000000000000000000000000000\
             0000000000000000",
            vec![Mutation::Flip { region: Region::Manifest, at: 1_577_208_941, xor: 32 }],
        ),
        (
            Version::V0_1,
            K::BlobPartialOverlap,
            "",
            "two tensors whose blobs start together and end apart (reference 0.1.0 reads both)",
            "000200001f5d610c000000000000008e521b000000e9000000000000000000000000000000000000\
             0000000000000000",
            vec![Mutation::Int { node: 2_966_577_896, pick: 5 }],
        ),
        (
            Version::V0_1,
            K::SchemaRoot,
            "tagged",
            "the manifest array under a CBOR tag (reference 0.1.0 ignores the tag)",
            "000200007d0000000000000000bb0000000000be0000000000000000000000000000000000000000\
             0000000000000000",
            vec![Mutation::Size { delta: 2 }],
        ),
        (
            Version::V1_1,
            K::SchemaRoot,
            "tagged",
            "the manifest map under a CBOR tag (reference 1.1.1 ignores the tag)",
            "010200007d0000000000000000bb0000000000be0000000000000000000000000000000000000000\
             0000000000000000",
            vec![Mutation::Size { delta: 2 }],
        ),
        (
            Version::V1_1,
            K::KeyNotText,
            "object-bytes",
            "an object map with a byte-string key (reference 1.1.1 reads it as its text)",
            "01020000000000000000004f217d0000000000000000000000000000000000000000000000000000\
             0000000000000000",
            vec![Mutation::Flip { region: Region::Manifest, at: 2_991_870_075, xor: 32 }],
        ),
        (
            Version::V1_2,
            K::KeyNotText,
            "root-bytes",
            "the manifest root has a byte-string key (reference 1.2.3 reads it as its text)",
            "02012600e900000062ce000000000000000000000000000000000000000000000000000000000000\
             0000000000000000",
            vec![Mutation::Flip { region: Region::Manifest, at: 292_188_169, xor: 32 }],
        ),
    ];
    for (v, kind, variant, covers, model, mutations) in cases {
        let recipe = Recipe { seed: 0, model: model.to_owned(), mutations, zt2: None };
        out.reject(v, kind, variant, covers, recipe.build()?);
    }
    Ok(())
}

fn valid_common(out: &mut Out, v: Version) -> Result<()> {
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
fn alias_manifest(file: &[u8], v: Version) -> Result<Vec<u8>> {
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

fn attributes_kitchen_sink() -> Value {
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

fn valid_v1(out: &mut Out, v: Version) -> Result<()> {
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

fn valid_v1_2_only(out: &mut Out) -> Result<()> {
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

fn valid_v0_1(out: &mut Out) -> Result<()> {
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

/// One reject file per rule that applies to v1.x, each the smallest change from a valid file.
fn rejects_v1(out: &mut Out, v: Version) -> Result<()> {
    let vs = v.default_version_string().unwrap_or("1.2.0");
    let dense = |offset: u64, length: u64, dims: &[u64]| {
        v1_one(vs, "dense", dims, vec![("data", comp("f32", offset, length, vec![]))])
    };
    let base = || framed(Container::V1, &dense(64, 16, &[2, 2]), 512);
    let mut r = |kind: K, variant: &str, covers: &str, bytes: Vec<u8>| {
        out.reject(v, kind, variant, covers, bytes)
    };

    let b = base()?;
    r(
        K::FileTooSmall,
        "",
        "24 bytes: header, a zero size, footer",
        framed_bytes(Container::V1, &[], 8)?,
    );
    let mut x = b.clone();
    x[0] = b'X';
    r(K::HeaderMagic, "", "first byte of the magic altered", x);
    let mut x = b.clone();
    if let Some(last) = x.last_mut() {
        *last = b'1';
    }
    r(K::FooterMagic, "", "last byte of the footer altered", x);
    let size_at = b.len() - 16;
    let mut x = b.clone();
    x[size_at..size_at + 8].copy_from_slice(&((1u64 << 30) + 1).to_le_bytes());
    r(K::ManifestTooLarge, "", "declared manifest size 1 GiB + 1", x);
    let mut x = b.clone();
    x[size_at..size_at + 8].copy_from_slice(&(b.len() as u64 - 23).to_le_bytes());
    r(K::ManifestOutOfBounds, "", "declared manifest size one byte more than the file holds", x);
    r(
        K::CborSyntax,
        "truncated",
        "manifest cut inside a map",
        framed_bytes(Container::V1, &[0xbf, 0x61], 64)?,
    );
    r(
        K::CborSyntax,
        "bad-utf8",
        "a text key that is not UTF-8",
        framed_bytes(Container::V1, &[0xa1, 0x62, 0xff, 0xfe, 0x00], 64)?,
    );
    let mut trailing = cbor::encode(&dense(64, 16, &[2, 2]))?;
    trailing.push(0);
    r(
        K::CborTrailingBytes,
        "",
        "a zero byte after the manifest's CBOR item",
        framed_bytes(Container::V1, &trailing, 512)?,
    );
    let mut dup = vec![0xa3];
    for val in [t("version"), t(vs), t("objects"), Value::Map(vec![]), t("version"), t(vs)] {
        dup.extend(cbor::encode(&val)?);
    }
    r(
        K::CborDuplicateKey,
        "",
        "the root map repeats \"version\"",
        framed_bytes(Container::V1, &dup, 64)?,
    );
    let deep = (0..70).fold(Value::Integer(0), |inner, _| Value::Array(vec![inner]));
    let manifest =
        m(vec![("version", t(vs)), ("objects", m(vec![])), ("attributes", m(vec![("a", deep)]))]);
    r(
        K::CborDepth,
        "",
        "attributes nested 70 deep (limit 64)",
        framed(Container::V1, &manifest, 64)?,
    );
    r(
        K::SchemaRoot,
        "",
        "the manifest is an array",
        framed(Container::V1, &Value::Array(vec![]), 64)?,
    );
    r(
        K::SchemaMissingField,
        "",
        "a component without length",
        framed(
            Container::V1,
            &v1_one(
                vs,
                "dense",
                &[2, 2],
                vec![("data", m(vec![("dtype", t("f32")), ("offset", u(64))]))],
            ),
            512,
        )?,
    );
    r(
        K::SchemaFieldType,
        "",
        "offset given as text",
        framed(
            Container::V1,
            &v1_one(
                vs,
                "dense",
                &[2, 2],
                vec![(
                    "data",
                    m(vec![("dtype", t("f32")), ("offset", t("64")), ("length", u(16))]),
                )],
            ),
            512,
        )?,
    );
    let Value::Map(mut c) = comp("f32", 64, 16, vec![]) else { unreachable_recipe()? };
    c.push((Value::Integer(7), t("x")));
    r(
        K::KeyNotText,
        "",
        "a component map with an integer key",
        framed(Container::V1, &v1_one(vs, "dense", &[2, 2], vec![("data", Value::Map(c))]), 512)?,
    );
    r(
        K::AttributesNotAMap,
        "",
        "file attributes = 7",
        framed(
            Container::V1,
            &m(vec![("version", t(vs)), ("objects", m(vec![])), ("attributes", u(7))]),
            64,
        )?,
    );
    r(
        K::VersionUnsupported,
        "",
        "version 2.0.0",
        framed(
            Container::V1,
            &v1_one("2.0.0", "dense", &[2, 2], vec![("data", comp("f32", 64, 16, vec![]))]),
            512,
        )?,
    );
    r(K::ShapeRank, "", "rank 65", framed(Container::V1, &dense(64, 4, &[1; 65]), 512)?);
    r(
        K::ShapeOverflow,
        "",
        "shape [2^64 - 1, 2]",
        framed(Container::V1, &dense(64, 16, &[u64::MAX, 2]), 512)?,
    );
    r(
        K::LogicalTypeMismatch,
        "",
        "complex64 over u8",
        framed(
            Container::V1,
            &v1_one(
                vs,
                "dense",
                &[2],
                vec![("data", comp("u8", 64, 16, vec![("type", t("complex64"))]))],
            ),
            512,
        )?,
    );
    r(
        K::BlobOutOfBounds,
        "",
        "a blob running into the manifest",
        framed(Container::V1, &dense(448, 128, &[32]), 512)?,
    );
    r(
        K::BlobOverlapsHeader,
        "",
        "a blob at offset 0",
        framed(Container::V1, &dense(0, 16, &[2, 2]), 512)?,
    );
    r(
        K::BlobMisaligned,
        "",
        "a blob at offset 72",
        framed(Container::V1, &dense(72, 16, &[2, 2]), 512)?,
    );
    let two = m(vec![
        ("version", t(vs)),
        (
            "objects",
            m(vec![
                (
                    "a",
                    m(vec![
                        ("shape", shape(&[32])),
                        ("format", t("dense")),
                        ("components", m(vec![("data", comp("f32", 64, 128, vec![]))])),
                    ]),
                ),
                (
                    "b",
                    m(vec![
                        ("shape", shape(&[4])),
                        ("format", t("dense")),
                        ("components", m(vec![("data", comp("f32", 128, 16, vec![]))])),
                    ]),
                ),
            ]),
        ),
    ]);
    r(K::BlobPartialOverlap, "", "[64, 192) and [128, 144)", framed(Container::V1, &two, 512)?);
    r(
        K::ComponentMissing,
        "",
        "a dense object without data",
        framed(
            Container::V1,
            &v1_one(vs, "dense", &[2, 2], vec![("values", comp("f32", 64, 16, vec![]))]),
            512,
        )?,
    );
    r(
        K::DenseSizeMismatch,
        "",
        "f32 [2, 2] in 12 bytes",
        framed(Container::V1, &dense(64, 12, &[2, 2]), 512)?,
    );
    r(
        K::DenseSizeMismatch,
        "uncompressed-length",
        "zstd f32 [2, 2] declaring 12 decoded bytes",
        framed(
            Container::V1,
            &v1_one(
                vs,
                "dense",
                &[2, 2],
                vec![(
                    "data",
                    comp(
                        "f32",
                        64,
                        9,
                        vec![("encoding", t("zstd")), ("uncompressed_length", u(12))],
                    ),
                )],
            ),
            512,
        )?,
    );
    let q = |scales_len: u64| {
        v1_one(
            vs,
            "quantized_group",
            &[4, 8],
            vec![
                ("packed_weight", comp("i32", 64, 16, vec![])),
                ("scales", comp("f16", 128, scales_len, vec![])),
                ("zeros", comp("f16", 192, 4, vec![])),
            ],
        )
    };
    r(
        K::ComponentLengthNotMultiple,
        "",
        "f16 scales of 3 bytes",
        framed(Container::V1, &q(3), 512)?,
    );
    r(
        K::UncompressedLengthMismatch,
        "",
        "raw component declaring uncompressed_length 8 for 16 bytes",
        framed(
            Container::V1,
            &v1_one(
                vs,
                "dense",
                &[2, 2],
                vec![("data", comp("f32", 64, 16, vec![("uncompressed_length", u(8))]))],
            ),
            512,
        )?,
    );
    let csr = |dims: &[u64], index: &str, indices: u64, indptr: u64| {
        v1_one(
            vs,
            "sparse_csr",
            dims,
            vec![
                ("values", comp("f32", 64, 8, vec![])),
                ("indices", comp(index, 128, indices, vec![])),
                ("indptr", comp(index, 192, indptr, vec![])),
            ],
        )
    };
    r(
        K::SparseRank,
        "",
        "CSR of rank 3",
        framed(Container::V1, &csr(&[2, 2, 2], "u64", 16, 24), 512)?,
    );
    if v == Version::V1_2 {
        r(
            K::SparseIndexDtype,
            "",
            "i64 indices (1.2 requires u64)",
            framed(Container::V1, &csr(&[2, 2], "i64", 16, 24), 512)?,
        );
    } else {
        r(
            K::SparseIndexDtype,
            "",
            "f32 indices (1.1 requires an integer type)",
            framed(Container::V1, &csr(&[2, 2], "f32", 16, 24), 512)?,
        );
    }
    r(
        K::CsrIndptrCount,
        "",
        "indptr with 2 entries for 2 rows",
        framed(Container::V1, &csr(&[2, 2], "u64", 16, 16), 512)?,
    );
    r(
        K::SparseNnzMismatch,
        "",
        "3 indices for 2 values",
        framed(Container::V1, &csr(&[2, 2], "u64", 24, 24), 512)?,
    );
    Ok(())
}

fn rejects_v0_1(out: &mut Out) -> Result<()> {
    let v = Version::V0_1;
    let tensor = |name: &str,
                  dtype: &str,
                  dims: &[u64],
                  offset: u64,
                  size: u64,
                  extra: Vec<(&str, Value)>| {
        let mut e = vec![
            ("name", t(name)),
            ("offset", u(offset)),
            ("size", u(size)),
            ("dtype", t(dtype)),
            ("shape", shape(dims)),
            ("encoding", t("raw")),
        ];
        e.extend(extra);
        m(e)
    };
    let file = |tensors: Vec<Value>| framed(Container::V0_1, &Value::Array(tensors), 512);
    // Two tensors of one name: the reference v0.1 writer makes such files and its reader lists
    // both, so readers accept them unless strict (the rejecting case is in the rules tests).
    let mut duplicate = file(vec![
        tensor("a", "uint8", &[1], 64, 1, vec![]),
        tensor("a", "uint8", &[1], 128, 1, vec![]),
    ])?;
    // Different contents, so each object's dump shows its own bytes.
    (duplicate[64], duplicate[128]) = (1, 2);
    let mut r = |kind: K, variant: &str, covers: &str, bytes: Vec<u8>| {
        out.reject(v, kind, variant, covers, bytes)
    };
    r(
        K::FileTooSmall,
        "",
        "16 bytes with a zero manifest size",
        framed_bytes(Container::V0_1, &[], 8)?,
    );
    let mut x = file(vec![tensor("w", "float32", &[2], 64, 8, vec![])])?;
    x[7] = b'2';
    r(K::HeaderMagic, "", "ZTEN0002", x);
    r(K::SchemaRoot, "", "the manifest is a map", framed(Container::V0_1, &m(vec![]), 8)?);
    r(
        K::SchemaMissingField,
        "",
        "a tensor without encoding",
        file(vec![m(vec![
            ("name", t("w")),
            ("offset", u(64)),
            ("size", u(8)),
            ("dtype", t("float32")),
            ("shape", shape(&[2])),
        ])])?,
    );
    r(
        K::DenseSizeMismatch,
        "",
        "float32 [2] in 4 bytes",
        file(vec![tensor("w", "float32", &[2], 64, 4, vec![])])?,
    );
    r(K::BlobMisaligned, "", "offset 65", file(vec![tensor("w", "uint8", &[1], 65, 1, vec![])])?);
    r(
        K::BlobOutOfBounds,
        "",
        "a blob past the data area",
        file(vec![tensor("w", "uint8", &[64], 480, 64, vec![])])?,
    );
    r(
        K::SparsePackedSize,
        "",
        "sparsecsr of 43 bytes",
        file(vec![tensor("s", "uint8", &[2, 2], 64, 43, vec![("layout", t("sparsecsr"))])])?,
    );
    r(
        K::SparseRank,
        "",
        "sparsecsr of rank 1",
        file(vec![tensor("s", "uint8", &[4], 64, 16 + 9, vec![("layout", t("sparsecsr"))])])?,
    );
    out.defined(
        v,
        "duplicate-name",
        Some(K::DuplicateName),
        "two tensors named a, as the reference writer makes them",
        duplicate,
    );
    Ok(())
}

/// The position of `needle` in `haystack`; a recipe that patches bytes must find them.
fn find(haystack: &[u8], needle: &[u8]) -> Result<usize> {
    haystack
        .windows(needle.len())
        .position(|w| w == needle)
        .ok_or_else(|| anyhow::anyhow!("recipe placeholder not found"))
}

fn unreachable_recipe<T>() -> Result<T> {
    anyhow::bail!("a recipe built the wrong value")
}
