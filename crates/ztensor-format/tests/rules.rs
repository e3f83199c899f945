//! One accepting and one rejecting case for every rule this crate enforces, asserted on the
//! error kind; and a check that no rule of `ErrorKind::ALL` is left without cases.

use std::collections::BTreeSet;

use ztensor_format::data::{check_bool, check_coo, check_csr};
use ztensor_format::{
    Container, ErrorKind, Layer, Limits, Manifest, Options, Value, Version, cbor, parse_file,
    text_map,
};

use crate::support::*;

/// How a case is checked.
enum Check {
    /// Two files: `accept` parses, `reject` is refused with the case's kind (file-level rules),
    /// or parses with object "w" unsupported for that kind (object-level rules).
    Files { accept: Vec<u8>, reject: Vec<u8>, options: Options },
    /// Two computations (data and writer rules).
    Calls {
        accept: Box<dyn Fn() -> ztensor_format::Result<()>>,
        reject: Box<dyn Fn() -> ztensor_format::Result<()>>,
    },
}

struct Case {
    kind: ErrorKind,
    check: Check,
}

const END: u64 = 512;

fn f32_dense(offset: u64, length: u64, dims: &[u64]) -> Value {
    obj("dense", dims, vec![("data", comp("f32", offset, length, vec![]))])
}

/// The baseline: one dense f32 [2, 2] object "w" at offset 64.
fn base_manifest() -> Value {
    root("1.2.0", vec![("w", f32_dense(64, 16, &[2, 2]))])
}

fn base() -> Vec<u8> {
    v1_file(&base_manifest(), END)
}

fn one(version: &str, object: Value) -> Vec<u8> {
    v1_file(&root(version, vec![("w", object)]), END)
}

fn files(kind: ErrorKind, accept: Vec<u8>, reject: Vec<u8>) -> Case {
    Case { kind, check: Check::Files { accept, reject, options: Options::default() } }
}

fn files_with(kind: ErrorKind, accept: Vec<u8>, reject: Vec<u8>, options: Options) -> Case {
    Case { kind, check: Check::Files { accept, reject, options } }
}

fn strict(kind: ErrorKind, accept: Vec<u8>, reject: Vec<u8>) -> Case {
    files_with(kind, accept, reject, Options::strict())
}

fn calls(
    kind: ErrorKind,
    accept: impl Fn() -> ztensor_format::Result<()> + 'static,
    reject: impl Fn() -> ztensor_format::Result<()> + 'static,
) -> Case {
    Case { kind, check: Check::Calls { accept: Box::new(accept), reject: Box::new(reject) } }
}

fn limits(edit: impl FnOnce(&mut Limits)) -> Options {
    let mut options = Options::default();
    edit(&mut options.limits);
    options
}

/// Replaces the manifest size field of a file.
fn with_size(mut file: Vec<u8>, container: Container, size: u64) -> Vec<u8> {
    let at = file.len() - container.trailer_len() as usize;
    file[at..at + 8].copy_from_slice(&size.to_le_bytes());
    file
}

fn nested(depth: usize) -> Value {
    (0..depth).fold(Value::Integer(0), |inner, _| Value::Array(vec![inner]))
}

fn csr(
    version: &str,
    dims: &[u64],
    index_dtype: &str,
    indices_len: u64,
    indptr_len: u64,
) -> Vec<u8> {
    one(
        version,
        obj(
            "sparse_csr",
            dims,
            vec![
                ("values", comp("f32", 64, 8, vec![])),
                ("indices", comp(index_dtype, 128, indices_len, vec![])),
                ("indptr", comp(index_dtype, 192, indptr_len, vec![])),
            ],
        ),
    )
}

fn quantized(scales_len: u64) -> Vec<u8> {
    one(
        "1.2.0",
        obj(
            "quantized_group",
            &[4, 8],
            vec![
                ("packed_weight", comp("i32", 64, 16, vec![])),
                ("scales", comp("f16", 128, scales_len, vec![])),
                ("zeros", comp("f16", 192, 4, vec![])),
            ],
        ),
    )
}

fn v0(tensors: Vec<Value>) -> Vec<u8> {
    v0_file(&Value::Array(tensors), END)
}

fn cases() -> Vec<Case> {
    use ErrorKind as K;
    let base_len = base().len() as u64;
    let digest64 = "ab".repeat(32);
    let dup_key_manifest = {
        let mut b = vec![0xa3];
        for v in [
            text("version"),
            text("1.2.0"),
            text("objects"),
            Value::Map(vec![]),
            text("version"),
            text("1.2.0"),
        ] {
            b.extend(cbor::encode(&v).unwrap());
        }
        b
    };
    let with_int_key = {
        let Value::Map(mut c) = comp("f32", 64, 16, vec![]) else { unreachable!() };
        c.push((Value::Integer(7), text("x")));
        one("1.2.0", obj("dense", &[2, 2], vec![("data", Value::Map(c))]))
    };
    let mut bad_header = base();
    bad_header[0] = b'X';
    let mut bad_footer = base();
    *bad_footer.last_mut().unwrap() = b'1';
    let csr_ok = csr("1.2.0", &[2, 2], "u64", 16, 24);
    let v0_csr = |size: u64| {
        v0(vec![tensor("w", "uint8", &[2, 2], 64, size, vec![("layout", text("sparsecsr"))])])
    };

    vec![
        files(K::FileTooSmall, minimal_v0(), ztensor_format_frame_empty_v1()),
        files(K::HeaderMagic, base(), bad_header),
        files(K::FooterMagic, base(), bad_footer),
        files(K::ManifestTooLarge, base(), with_size(base(), Container::V1, (1 << 30) + 1)),
        files(K::ManifestOutOfBounds, base(), with_size(base(), Container::V1, base_len - 24 + 1)),
        files(K::CborSyntax, base(), frame(Container::V1, &[], Some(64), &[0xbf, 0x61])),
        files(
            K::CborTrailingBytes,
            base(),
            frame(
                Container::V1,
                &[],
                Some(END),
                &[cbor::encode(&base_manifest()).unwrap(), vec![0]].concat(),
            ),
        ),
        files(K::CborDuplicateKey, base(), frame(Container::V1, &[], Some(64), &dup_key_manifest)),
        files(
            K::CborDepth,
            v1_file(
                &map(vec![
                    ("version", text("1.2.0")),
                    ("objects", map(vec![])),
                    ("attributes", map(vec![("a", nested(60))])),
                ]),
                64,
            ),
            v1_file(
                &map(vec![
                    ("version", text("1.2.0")),
                    ("objects", map(vec![])),
                    ("attributes", map(vec![("a", nested(70))])),
                ]),
                64,
            ),
        ),
        files(K::SchemaRoot, base(), v1_file(&Value::Array(vec![]), 64)),
        files(
            K::SchemaMissingField,
            base(),
            one(
                "1.2.0",
                obj(
                    "dense",
                    &[2, 2],
                    vec![("data", map(vec![("dtype", text("f32")), ("offset", uint(64))]))],
                ),
            ),
        ),
        files(
            K::SchemaFieldType,
            base(),
            one(
                "1.2.0",
                obj(
                    "dense",
                    &[2, 2],
                    vec![(
                        "data",
                        map(vec![
                            ("dtype", text("f32")),
                            ("offset", text("64")),
                            ("length", uint(16)),
                        ]),
                    )],
                ),
            ),
        ),
        files(K::KeyNotText, base(), with_int_key),
        files(
            K::AttributesNotAMap,
            v1_file(
                &map(vec![
                    ("version", text("1.2.0")),
                    ("objects", map(vec![])),
                    ("attributes", map(vec![])),
                ]),
                64,
            ),
            v1_file(
                &map(vec![
                    ("version", text("1.2.0")),
                    ("objects", map(vec![])),
                    ("attributes", uint(7)),
                ]),
                64,
            ),
        ),
        files(
            K::VersionUnsupported,
            base(),
            v1_file(&root("2.0.0", vec![("w", f32_dense(64, 16, &[2, 2]))]), END),
        ),
        files_with(
            K::TooManyObjects,
            base(),
            v1_file(
                &root(
                    "1.2.0",
                    vec![("w", f32_dense(64, 16, &[2, 2])), ("x", f32_dense(128, 16, &[2, 2]))],
                ),
                END,
            ),
            limits(|l| l.max_objects = 1),
        ),
        files_with(
            K::NameTooLong,
            base(),
            v1_file(&root("1.2.0", vec![("weights", f32_dense(64, 16, &[2, 2]))]), END),
            limits(|l| l.max_name_len = 4),
        ),
        strict(
            K::NameEmpty,
            base(),
            v1_file(&root("1.2.0", vec![("", f32_dense(64, 16, &[2, 2]))]), END),
        ),
        strict(
            K::NameNul,
            base(),
            v1_file(&root("1.2.0", vec![("a\0b", f32_dense(64, 16, &[2, 2]))]), END),
        ),
        strict(
            K::DuplicateName,
            v0(vec![
                tensor("a", "uint8", &[1], 64, 1, vec![]),
                tensor("b", "uint8", &[1], 128, 1, vec![]),
            ]),
            v0(vec![
                tensor("a", "uint8", &[1], 64, 1, vec![]),
                tensor("a", "uint8", &[1], 128, 1, vec![]),
            ]),
        ),
        files(
            K::ShapeRank,
            one("1.2.0", f32_dense(64, 4, &[1; 64])),
            one("1.2.0", f32_dense(64, 4, &[1; 65])),
        ),
        files(K::ShapeOverflow, base(), one("1.2.0", f32_dense(64, 16, &[u64::MAX, 2]))),
        files(
            K::DtypeUnknown,
            base(),
            one("1.2.0", obj("dense", &[2, 2], vec![("data", comp("f4", 64, 16, vec![]))])),
        ),
        files(
            K::EncodingUnknown,
            base(),
            one(
                "1.2.0",
                obj(
                    "dense",
                    &[2, 2],
                    vec![("data", comp("f32", 64, 16, vec![("encoding", text("lz4"))]))],
                ),
            ),
        ),
        files(
            K::EndiannessUnknown,
            v0(vec![tensor("w", "float32", &[2], 64, 8, vec![("data_endianness", text("big"))])]),
            v0(vec![tensor(
                "w",
                "float32",
                &[2],
                64,
                8,
                vec![("data_endianness", text("middle"))],
            )]),
        ),
        files(
            K::LayoutUnknown,
            v0(vec![tensor("w", "float32", &[2], 64, 8, vec![("layout", text("dense"))])]),
            v0(vec![tensor("w", "float32", &[2], 64, 8, vec![("layout", text("blocked"))])]),
        ),
        files(
            K::DigestMalformed,
            one(
                "1.2.0",
                obj(
                    "dense",
                    &[2, 2],
                    vec![(
                        "data",
                        comp("f32", 64, 16, vec![("digest", text(&format!("blake3:{digest64}")))]),
                    )],
                ),
            ),
            one(
                "1.2.0",
                obj(
                    "dense",
                    &[2, 2],
                    vec![("data", comp("f32", 64, 16, vec![("digest", text("sha256:xyz"))]))],
                ),
            ),
        ),
        files_with(
            K::DecodedTooLarge,
            one(
                "1.2.0",
                obj(
                    "dense",
                    &[2],
                    vec![(
                        "data",
                        comp(
                            "f32",
                            64,
                            5,
                            vec![("encoding", text("zstd")), ("uncompressed_length", uint(8))],
                        ),
                    )],
                ),
            ),
            one(
                "1.2.0",
                obj(
                    "dense",
                    &[4],
                    vec![(
                        "data",
                        comp(
                            "f32",
                            64,
                            5,
                            vec![("encoding", text("zstd")), ("uncompressed_length", uint(16))],
                        ),
                    )],
                ),
            ),
            limits(|l| l.max_decoded_len = 8),
        ),
        files(
            K::LogicalTypeMismatch,
            one(
                "1.2.0",
                obj(
                    "dense",
                    &[2],
                    vec![("data", comp("f32", 64, 16, vec![("type", text("complex64"))]))],
                ),
            ),
            one(
                "1.2.0",
                obj(
                    "dense",
                    &[2],
                    vec![("data", comp("u8", 64, 16, vec![("type", text("complex64"))]))],
                ),
            ),
        ),
        files(
            K::BlobOutOfBounds,
            one("1.2.0", f32_dense(384, 128, &[32])),
            one("1.2.0", f32_dense(448, 128, &[32])),
        ),
        files(K::BlobOverlapsHeader, base(), one("1.2.0", f32_dense(0, 16, &[2, 2]))),
        files(
            K::BlobMisaligned,
            one("1.2.0", f32_dense(128, 16, &[2, 2])),
            one("1.2.0", f32_dense(72, 16, &[2, 2])),
        ),
        files(
            K::BlobPartialOverlap,
            v1_file(
                &root(
                    "1.2.0",
                    vec![("a", f32_dense(64, 128, &[32])), ("b", f32_dense(64, 128, &[32]))],
                ),
                END,
            ),
            v1_file(
                &root(
                    "1.2.0",
                    vec![("a", f32_dense(64, 128, &[32])), ("b", f32_dense(128, 16, &[4]))],
                ),
                END,
            ),
        ),
        files(
            K::ComponentMissing,
            base(),
            one("1.2.0", obj("dense", &[2, 2], vec![("values", comp("f32", 64, 16, vec![]))])),
        ),
        strict(
            K::ComponentUnexpected,
            base(),
            one(
                "1.2.0",
                obj(
                    "dense",
                    &[2, 2],
                    vec![
                        ("data", comp("f32", 64, 16, vec![])),
                        ("extra", comp("u8", 128, 1, vec![])),
                    ],
                ),
            ),
        ),
        files(K::DenseSizeMismatch, base(), one("1.2.0", f32_dense(64, 12, &[2, 2]))),
        files(K::ComponentLengthNotMultiple, quantized(4), quantized(3)),
        strict(
            K::UncompressedLengthMissing,
            one(
                "1.2.0",
                obj(
                    "dense",
                    &[2, 2],
                    vec![(
                        "data",
                        comp(
                            "f32",
                            64,
                            10,
                            vec![("encoding", text("zstd")), ("uncompressed_length", uint(16))],
                        ),
                    )],
                ),
            ),
            one(
                "1.2.0",
                obj(
                    "dense",
                    &[2, 2],
                    vec![("data", comp("f32", 64, 10, vec![("encoding", text("zstd"))]))],
                ),
            ),
        ),
        files(
            K::UncompressedLengthMismatch,
            one(
                "1.2.0",
                obj(
                    "dense",
                    &[2, 2],
                    vec![("data", comp("f32", 64, 16, vec![("uncompressed_length", uint(16))]))],
                ),
            ),
            one(
                "1.2.0",
                obj(
                    "dense",
                    &[2, 2],
                    vec![("data", comp("f32", 64, 16, vec![("uncompressed_length", uint(8))]))],
                ),
            ),
        ),
        files(K::SparseRank, csr_ok.clone(), csr("1.2.0", &[2, 2, 2], "u64", 16, 24)),
        files(
            K::SparseIndexDtype,
            csr("1.1.0", &[2, 2], "i64", 16, 24),
            csr("1.2.0", &[2, 2], "i64", 16, 24),
        ),
        files(K::CsrIndptrCount, csr_ok.clone(), csr("1.2.0", &[2, 2], "u64", 16, 16)),
        files(K::SparseNnzMismatch, csr_ok, csr("1.2.0", &[2, 2], "u64", 24, 24)),
        files(K::SparsePackedSize, v0_csr(42), v0_csr(43)),
        calls(
            K::CsrIndptrInvalid,
            || check_csr(2, 2, &[0, 1, 2], &[1, 0], false),
            || check_csr(2, 2, &[1, 1, 2], &[1, 0], false),
        ),
        calls(
            K::SparseIndexOutOfBounds,
            || check_coo(&[2, 3], &[1, 0, 2, 0], 2),
            || check_coo(&[2, 3], &[1, 0, 3, 0], 2),
        ),
        calls(
            K::CsrIndicesUnsorted,
            || check_csr(1, 2, &[0, 2], &[0, 1], true),
            || check_csr(1, 2, &[0, 2], &[1, 0], true),
        ),
        calls(K::BoolInvalid, || check_bool(&[0, 1, 1]), || check_bool(&[0, 1, 2])),
        calls(
            K::Unrepresentable,
            || Manifest::new(Version::V0_1).encode().map(drop),
            || {
                let mut m = Manifest::new(Version::V0_1);
                m.attributes = Some(
                    ztensor_format::Attributes::try_from(text_map([("a", Value::from(1u64))]))
                        .unwrap(),
                );
                m.encode().map(drop)
            },
        ),
        calls(
            K::InvalidInput,
            || Manifest::new(Version::V1_2).encode().map(drop),
            || {
                let mut m = Manifest::new(Version::V1_2);
                m.version_string = Some("1.1.0".into());
                m.encode().map(drop)
            },
        ),
        // Padding is read only by who checks it: the file opens either way.
        calls(K::PaddingNonzero, || padding_of(&base()), || padding_of(&dirty_padding())),
    ]
}

/// The padding of `file` checked for zeros, as `verify --strict` reads it.
fn padding_of(file: &[u8]) -> ztensor_format::Result<()> {
    let manifest = parse_file(file, &Options::strict())?;
    let gaps = manifest.padding();
    assert!(!gaps.is_empty(), "a file with padding");
    for gap in gaps {
        let bytes = &file[usize::try_from(gap.start).unwrap()..usize::try_from(gap.end).unwrap()];
        ztensor_format::check_padding(gap.start, bytes)?;
    }
    Ok(())
}

/// The base file with one byte of the padding between its blob and its manifest not zero.
fn dirty_padding() -> Vec<u8> {
    let mut file = base();
    file[100] = 0x5a;
    file
}

/// The smallest valid file of any version: 17 bytes, the zero-tensor v0.1 file of seed 000 §7.
fn minimal_v0() -> Vec<u8> {
    let file = v0_file(&Value::Array(vec![]), 8);
    assert_eq!(file, b"ZTEN0001\x80\x01\0\0\0\0\0\0\0");
    file
}

fn ztensor_format_frame_empty_v1() -> Vec<u8> {
    // 24 bytes: header, a zero manifest size and the footer magic; one byte short.
    frame(Container::V1, &[], Some(8), &[])
}

#[test]
fn every_rule_has_an_accepting_and_a_rejecting_case() {
    let covered: BTreeSet<ErrorKind> = cases().iter().map(|c| c.kind).collect();
    let missing: Vec<&str> = ErrorKind::ALL
        .iter()
        .filter(|k| k.layer() != Layer::Decode && !covered.contains(k))
        .map(|k| k.id())
        .collect();
    assert!(missing.is_empty(), "rules without cases: {missing:?}");
}

#[test]
fn cases_accept_and_reject_as_specified() {
    let mut failures = Vec::new();
    for case in cases() {
        let id = case.kind.id();
        match case.check {
            Check::Files { accept, reject, options } => {
                match parse_file(&accept, &options) {
                    Ok(m) => {
                        if let Some(o) = m.objects().find(|o| o.unsupported().is_some()) {
                            failures.push(format!(
                                "{id}: accepting file has unsupported object: {:?}",
                                o.unsupported()
                            ));
                        }
                    }
                    Err(e) => failures.push(format!("{id}: accepting file rejected: {e}")),
                }
                let got = parse_file(&reject, &options);
                match case.kind.layer() {
                    Layer::Object => match got {
                        Ok(m) => {
                            let kind = m.get("w").and_then(|o| o.unsupported()).map(|e| e.kind());
                            if kind != Some(case.kind) {
                                failures.push(format!("{id}: object-level reason was {kind:?}"));
                            }
                        }
                        Err(e) => failures
                            .push(format!("{id}: object-level fault rejected the file: {e}")),
                    },
                    _ => match got {
                        Err(e) if e.kind() == case.kind => {}
                        Err(e) => failures.push(format!("{id}: rejected with the wrong rule: {e}")),
                        Ok(_) => failures.push(format!("{id}: rejecting file accepted")),
                    },
                }
                if case.kind.strict_only() {
                    let mut lenient = options.clone();
                    lenient.strict = false;
                    if let Err(e) = parse_file(&reject, &lenient) {
                        failures.push(format!(
                            "{id}: strict-only rule enforced without strict mode: {e}"
                        ));
                    }
                }
            }
            Check::Calls { accept, reject } => {
                if let Err(e) = accept() {
                    failures.push(format!("{id}: accepting call failed: {e}"));
                }
                match reject() {
                    Err(e) if e.kind() == case.kind => {}
                    Err(e) => failures.push(format!("{id}: rejected with the wrong rule: {e}")),
                    Ok(()) => failures.push(format!("{id}: rejecting call succeeded")),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} failure(s):\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn v0_1_manifest_must_be_an_array() {
    let file = v0_file(&map(vec![]), 8);
    assert_eq!(parse_file(&file, &Options::default()).unwrap_err().kind(), ErrorKind::SchemaRoot);
}

#[test]
fn tightened_manifest_limit_applies() {
    let file = base();
    let options = limits(|l| l.max_manifest_len = 16);
    let err = parse_file(&file, &options).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ManifestTooLarge);
    assert_eq!(err.offset(), Some(file.len() as u64 - 16));
}

#[test]
fn errors_locate_the_fault() {
    let err =
        parse_file(&one("1.2.0", f32_dense(72, 16, &[2, 2])), &Options::default()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BlobMisaligned);
    assert_eq!((err.object(), err.component(), err.offset()), (Some("w"), Some("data"), Some(72)));
    // A CBOR fault is reported at its absolute file offset (manifest starts at 64 here).
    let err = parse_file(
        &frame(Container::V1, &[], Some(64), &[0xa1, 0x61, b'a', 0xff]),
        &Options::default(),
    )
    .unwrap_err();
    assert_eq!((err.kind(), err.offset()), (ErrorKind::CborSyntax, Some(67)));
}

#[test]
fn zero_length_blobs_never_overlap() {
    let file = v1_file(
        &root("1.2.0", vec![("e", f32_dense(64, 0, &[0, 4])), ("w", f32_dense(64, 16, &[2, 2]))]),
        END,
    );
    let m = parse_file(&file, &Options::strict()).unwrap();
    assert_eq!(m.get("e").and_then(|o| o.decoded_len("data")), Some(0));
}
