//! Reject files: one or more for each rule.

use super::build::*;
use anyhow::Result;
use ztensor_format::{Container, ErrorKind as K, Value, Version, cbor};

/// One reject file per rule that applies to v1.x, each the smallest change from a valid file.
pub(super) fn rejects_v1(out: &mut Out, v: Version) -> Result<()> {
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

pub(super) fn rejects_v0_1(out: &mut Out) -> Result<()> {
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
