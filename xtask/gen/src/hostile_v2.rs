//! Hostile zTensor 2 files (`fixtures/external/ztensor2/hostile/`): valid framing (magic,
//! footer, a manifest in deterministic CBOR with a correct hash) around content that tries to
//! make a reader spend what it merely claims, decode the same bytes without end, chase shards
//! that are not there, or mislead a terminal. `crates/ztensor-cli/tests/hostile.rs` runs every
//! command on each under an address-space cap.

use anyhow::Result;
use ztensor_v2::cbor::{Value, encode};

use crate::hostile::Hostile;

fn text(s: &str) -> Value {
    Value::Text(s.to_owned())
}

fn uints(items: &[u64]) -> Value {
    Value::Array(items.iter().map(|&n| Value::Uint(n)).collect())
}

fn map(entries: Vec<(&str, Value)>) -> Value {
    Value::Map(entries.into_iter().map(|(k, v)| (text(k), v)).collect())
}

/// A part: its dtype, blob and any other fields.
fn part(dtype: &str, blob: (u64, u64), more: Vec<(&str, Value)>) -> Value {
    let mut entries = vec![("dtype", text(dtype)), ("blob", uints(&[blob.0, blob.1]))];
    entries.extend(more);
    map(entries)
}

fn object(shape: &[u64], layout: &str, parts: Vec<(&str, Value)>) -> Value {
    map(vec![("shape", uints(shape)), ("layout", text(layout)), ("parts", map(parts))])
}

/// A zTensor 2 file: the magic, `blob` at 65536 (if any), the manifest at the next 64 KiB
/// boundary, the footer.
fn file(blob: &[u8], manifest: &Value) -> Vec<u8> {
    let mut out = ztensor_v2::MAGIC.to_vec();
    let align = |n: usize| n.div_ceil(65536) * 65536;
    if !blob.is_empty() {
        out.resize(65536, 0);
        out.extend_from_slice(blob);
    }
    let at = align(out.len().max(8));
    out.resize(at, 0);
    let manifest = encode(manifest);
    out.extend_from_slice(&manifest);
    out.extend((at as u64).to_le_bytes());
    out.extend((manifest.len() as u64).to_le_bytes());
    out.extend(xxhash_rust::xxh3::xxh3_64(&manifest).to_le_bytes());
    out.extend(ztensor_v2::VERSION.to_le_bytes());
    out.extend(0u32.to_le_bytes());
    out.extend(ztensor_v2::MAGIC);
    out
}

/// `len` zero bytes as a `zt.zstd-seekable/1` stream, with the xxh3 digest of the bytes.
fn seekable_zeros(len: u64) -> Result<(Vec<u8>, String)> {
    let mut stream = Vec::new();
    let mut encoder = ztensor_v2::seekable::Encoder::new(19);
    let mut hash = xxhash_rust::xxh3::Xxh3::new();
    let piece = vec![0u8; 1 << 20];
    let mut left = len;
    let mut store = |b: &[u8]| -> ztensor_v2::Result<()> {
        stream.extend_from_slice(b);
        Ok(())
    };
    while left > 0 {
        let n = usize::try_from(left.min(piece.len() as u64))?;
        hash.update(&piece[..n]);
        encoder.push(&piece[..n], &mut store)?;
        left -= n as u64;
    }
    encoder.finish(&mut store)?;
    Ok((stream, format!("xxh3:{:016x}", hash.digest())))
}

pub fn all() -> Result<Vec<Hostile>> {
    let mut out = Vec::new();
    let seekable = |decoded: u64, digest: &str| {
        vec![
            ("encoding", text(ztensor_v2::seekable::ID)),
            ("decoded_length", Value::Uint(decoded)),
            ("digest", text(digest)),
        ]
    };

    // 1 GiB of honest zstd-seekable output from a small stream: commands stream it frame by
    // frame, or refuse a whole read past the limit, within the cap.
    let gib = 1u64 << 30;
    let (stream, digest) = seekable_zeros(gib)?;
    let blob = (65536, stream.len() as u64);
    let manifest = map(vec![(
        "objects",
        map(vec![(
            "zeros",
            object(&[gib], "dense", vec![("data", part("u8", blob, seekable(gib, &digest)))]),
        )]),
    )]);
    out.push(Hostile {
        name: "seekable-1g.zt",
        tries: "1 GiB decoded from a small zt.zstd-seekable/1 stream",
        bytes: file(&stream, &manifest),
    });

    // Sixty-four objects sharing one seekable blob of 16 MiB: every alias decodes it again.
    let mib16 = 16u64 << 20;
    let (stream, digest) = seekable_zeros(mib16)?;
    let blob = (65536, stream.len() as u64);
    let objects = (0..64)
        .map(|i| {
            let parts = vec![("data", part("u8", blob, seekable(mib16, &digest)))];
            (text(&format!("alias{i:02}")), object(&[mib16], "dense", parts))
        })
        .collect();
    let manifest = map(vec![("objects", Value::Map(objects))]);
    out.push(Hostile {
        name: "aliases-64x16m.zt",
        tries: "64 objects sharing one 16 MiB zt.zstd-seekable/1 blob (1 GiB of decoding)",
        bytes: file(&stream, &manifest),
    });

    // A seek table that claims 2^40 decoded bytes from a few hundred: refused before a
    // buffer is sized by it.
    let (mut stream, _) = seekable_zeros(1 << 20)?;
    // The table's one entry (compressed size, decompressed size, both u32 LE, then a checksum
    // when the descriptor's top bit says so), just before the 9-byte footer.
    let descriptor = stream[stream.len() - 5];
    let entry = stream.len() - 9 - if descriptor & 0x80 != 0 { 12 } else { 8 };
    stream[entry + 4..entry + 8].copy_from_slice(&u32::MAX.to_le_bytes());
    let blob = (65536, stream.len() as u64);
    let claimed = 1u64 << 40;
    let manifest = map(vec![(
        "objects",
        map(vec![(
            "claims",
            object(
                &[claimed],
                "dense",
                vec![(
                    "data",
                    part(
                        "u8",
                        blob,
                        vec![
                            ("encoding", text(ztensor_v2::seekable::ID)),
                            ("decoded_length", Value::Uint(claimed)),
                        ],
                    ),
                )],
            ),
        )]),
    )]);
    out.push(Hostile {
        name: "seek-table-claims-1t.zt",
        tries: "a seek table and decoded_length claiming 1 TiB from a few hundred bytes",
        bytes: file(&stream, &manifest),
    });

    // Twenty thousand objects, all empty, sharing the one empty blob.
    let objects = (0..20_000)
        .map(|i| {
            let parts = vec![("data", part("u8", (65536, 0), vec![]))];
            (text(&format!("o{i:05}")), object(&[0], "dense", parts))
        })
        .collect();
    let manifest = map(vec![("objects", Value::Map(objects))]);
    out.push(Hostile {
        name: "objects-20k.zt",
        tries: "20,000 objects (the manifest's cost per object, in every table)",
        bytes: file(&[], &manifest),
    });

    // A thousand shards that are not there, each holding one object's part: resolving them
    // lists the directory once and stats each positional name, and every object is
    // unreadable, said once each.
    let shards = (0..1000)
        .map(|i| {
            let entry = map(vec![
                ("size", Value::Uint(4096 + 48)),
                ("digest", text(&format!("xxh3:{i:016x}"))),
            ]);
            (text(&format!("s{i:04}")), entry)
        })
        .collect();
    let objects = (0..1000)
        .map(|i| {
            let shard = vec![("shard", text(&format!("s{i:04}")))];
            let parts = vec![("data", part("u8", (4096, 1), shard))];
            (text(&format!("w{i:04}")), object(&[1], "dense", parts))
        })
        .collect();
    let manifest = map(vec![("shards", Value::Map(shards)), ("objects", Value::Map(objects))]);
    out.push(Hostile {
        name: "shards-1000-missing.zt",
        tries: "1,000 shards that are not there, each holding an object",
        bytes: file(&[], &manifest),
    });

    // Names that would act on a terminal.
    let blob = (65536, 1);
    let objects = ["\u{1b}[2J\u{1b}[31mred", "two\nlines", "back\rwards", "x\u{202e}txt.exe"]
        .iter()
        .map(|n| (text(n), object(&[1], "dense", vec![("data", part("u8", blob, vec![]))])))
        .collect();
    let attributes = map(vec![("\u{1b}]0;title\u{7}", text("\u{1b}[5mblink"))]);
    let manifest = map(vec![("objects", Value::Map(objects)), ("attributes", attributes)]);
    out.push(Hostile {
        name: "terminal-names.zt",
        tries: "escape sequences, newlines, carriage returns and a bidi override in names and \
                attributes",
        bytes: file(&[7], &manifest),
    });

    // A CSR matrix of 2^32 x 2^32 whose row pointers run past its indices.
    // (Each part on a 4096-byte boundary of the one region written.)
    let mut blob = vec![0u8; 8192 + 4];
    blob[8..16].copy_from_slice(&(1u64 << 40).to_le_bytes());
    blob[8192..].copy_from_slice(&1f32.to_le_bytes());
    let parts = vec![
        ("indptr", part("u64", (65536, 16), vec![])),
        ("indices", part("u64", (65536 + 4096, 8), vec![])),
        ("values", part("f32", (65536 + 8192, 4), vec![])),
    ];
    let manifest = map(vec![(
        "objects",
        map(vec![("sparse", object(&[1, 1 << 32], "zt.sparse_csr/1", parts))]),
    )]);
    out.push(Hostile {
        name: "csr-indptr-claims-2e40.zt",
        tries: "a CSR matrix whose row pointers end 2^40 values past its one index",
        bytes: file(&blob, &manifest),
    });

    // An attribute array of 200,000 items, and attributes nested 30 deep.
    let mut deep = Value::Uint(1);
    for _ in 0..30 {
        deep = Value::Array(vec![deep]);
    }
    let wide = Value::Array((0..200_000u64).map(|i| Value::Uint(i % 24)).collect());
    let objects =
        map(vec![("w", object(&[1], "dense", vec![("data", part("u8", (65536, 1), vec![]))]))]);
    let manifest =
        map(vec![("objects", objects), ("attributes", map(vec![("deep", deep), ("wide", wide)]))]);
    out.push(Hostile {
        name: "attributes-200k-and-deep.zt",
        tries: "an attribute array of 200,000 items and one nested 30 deep",
        bytes: file(&[7], &manifest),
    });
    Ok(out)
}
