//! zTensor 2 files read through the tensor-source interface, and converted to zTensor 1.2.

use std::path::PathBuf;

use ztensor_format::{DType, Options, Verdict, Version};
use ztensor_io::{Reader, TensorSink, TensorSource, WriteOptions, Writer};
use ztensor_v2::File;

fn file(dir: &str, name: &str) -> File<Vec<u8>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../ztensor-conformance/fixtures/external/ztensor2")
        .join(dir)
        .join(format!("{name}.zt"));
    File::open(std::fs::read(path).unwrap(), ztensor_v2::MAX_MANIFEST).unwrap()
}

#[test]
fn dense_objects_read_as_the_1_2_model() {
    let f = file("valid", "canonical-basic");
    let names: Vec<String> = (0..f.len()).map(|i| f.name(i).unwrap().into_owned()).collect();
    assert_eq!(names, ["a.bias", "a.weight", "tied"]);
    let bias = f.read(f.find("a.bias").unwrap()).unwrap();
    assert_eq!((bias.shape.as_slice(), bias.components["data"].dtype), (&[4][..], DType::F32));
    assert_eq!(bias.components["data"].bytes.as_ref(), [1u8; 16]);
    let tied = f.read(f.find("tied").unwrap()).unwrap();
    assert_eq!(tied.components["data"].dtype, DType::BF16);
    assert_eq!(tied.components["data"].bytes.as_ref(), [2u8; 16]);
    let info = f.info(f.find("a.weight").unwrap()).unwrap();
    assert_eq!(info.shape.as_ref(), [2, 4]);
    assert!(info.unsupported.is_none());
}

#[test]
fn what_cannot_be_read_says_why() {
    // A layout this reader does not interpret is read structurally: its parts as components,
    // under its own id.
    let unknown = file("valid", "unknown-layout-structural");
    let info = unknown.info(0).unwrap();
    assert!(info.unsupported.is_none(), "{info:?}");
    assert_eq!(info.format, ztensor_format::Format::Unknown("x.custom/1".into()));
    let data = unknown.read(0).unwrap();
    assert_eq!(data.components.len(), info.components.len());
    let encoded = file("valid", "view-unknown-encoding-refused");
    assert!(encoded.info(0).unwrap().unsupported.is_some());
    // A broken digest is the data saying no.
    let damaged = file("reject", "verify-digest-mismatch");
    let e = damaged.read(0).unwrap_err();
    assert!(e.is_rejection(), "{e}");
    let bool_byte = file("reject", "bool-invalid-byte");
    assert!(bool_byte.read(0).unwrap_err().is_rejection());
    // Attributes of every kind carry over.
    let kitchen = file("valid", "attributes-kitchen-sink");
    assert!(kitchen.attributes().is_some_and(|a| !a.is_empty()));
}

/// Each valid file whose objects are all dense converts to zTensor 1.2 through the zTensor
/// sink, and reads back with the same shapes, types and bytes.
#[test]
fn dense_files_convert_to_1_2() {
    let mut converted = 0;
    for name in [
        "minimal",
        "canonical-basic",
        "scalar",
        "zero-size-tensor",
        "verify-ok",
        "aliased-identical-blobs",
        "attributes-kitchen-sink",
        "empty-objects",
    ] {
        let f = file("valid", name);
        let mut out = Writer::new(Vec::new(), Version::V1_2).unwrap();
        let par = ztensor_par::ParOptions::with_threads(2);
        ztensor_par::ZtSink::new(&mut out, WriteOptions::raw(), &par, &())
            .write_all(&f)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let bytes = out.finish().unwrap().0;
        let back = Reader::new(&bytes[..], &Options::default()).unwrap();
        assert_eq!(TensorSource::len(&back), f.len(), "{name}");
        for i in 0..f.len() {
            let (a, b) =
                (f.read(i).unwrap(), back.read(back.find(&f.name(i).unwrap()).unwrap()).unwrap());
            assert_eq!(
                (&a.shape, &a.components["data"].dtype),
                (&b.shape, &b.components["data"].dtype),
                "{name}"
            );
            assert_eq!(
                a.components["data"].logical_type, b.components["data"].logical_type,
                "{name}"
            );
            assert_eq!(a.components["data"].bytes, b.components["data"].bytes, "{name}");
        }
        converted += 1;
    }
    assert_eq!(converted, 8);
    // Packed FP4 reads as its packed bytes (two values a byte, the shape counting values); a
    // 1.2 writer refuses it, naming zTensor 2, rather than converting wrongly.
    // (The corpus file's padding nibble is not zero, a fault found on read: cleared here.)
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../ztensor-conformance/fixtures/external/ztensor2/valid/f4-packed-odd-count.zt");
    let mut bytes = std::fs::read(path).unwrap();
    assert!(file("valid", "f4-packed-odd-count").read(0).is_err());
    let container = ztensor_v2::open(&&bytes[..], ztensor_v2::MAX_MANIFEST).unwrap();
    let manifest = container.manifest.unwrap();
    let part = &manifest.objects.get("t").unwrap().parts["data"];
    assert!(part.digest.is_none() && part.encoding.is_none());
    let last = usize::try_from(part.blob.0 + part.blob.1 - 1).unwrap();
    bytes[last] &= 0x0f;
    let f4 = File::open(bytes, ztensor_v2::MAX_MANIFEST).unwrap();
    assert!(f4.info(0).unwrap().unsupported.is_none());
    let data = f4.read(0).unwrap();
    let c = &data.components["data"];
    assert_eq!(c.logical_type, Some(ztensor_format::MxType::F4E2M1.logical_type()));
    let values: u64 = data.shape.iter().product();
    assert_eq!(values % 2, 1, "the fixture's count is odd");
    assert_eq!(Some(c.bytes.len() as u64), values.checked_add(1).map(|n| n / 2));
    let mut out = Writer::new(Vec::new(), Version::V1_2).unwrap();
    let par = ztensor_par::ParOptions::with_threads(2);
    let refused = ztensor_par::ZtSink::new(&mut out, WriteOptions::raw(), &par, &())
        .write_all(&f4)
        .expect_err("zTensor 1.2 has no FP4");
    let said = refused.to_string();
    assert!(said.contains("f4_e2m1") && said.contains("write zTensor 2"), "{said}");
}

/// Files crafted to make a reader decode what the file only points at many times: blobs that
/// many parts alias, and streams that claim far more than the file holds.
mod crafted {
    use std::sync::atomic::{AtomicU64, Ordering};

    use ztensor_v2::cbor::{Value, encode};

    pub fn text(s: &str) -> Value {
        Value::Text(s.to_owned())
    }

    fn uints(items: &[u64]) -> Value {
        Value::Array(items.iter().map(|&n| Value::Uint(n)).collect())
    }

    fn map(entries: Vec<(&str, Value)>) -> Value {
        Value::Map(entries.into_iter().map(|(k, v)| (text(k), v)).collect())
    }

    /// `len` zero bytes (a multiple of 16 MiB) as a `zt.zstd-seekable/1` stream: one frame of
    /// 16 MiB compressed once, repeated, then the seek table.
    pub fn zeros(len: u64) -> Vec<u8> {
        let frame_len = ztensor_v2::seekable::MAX_FRAME;
        assert_eq!(len % frame_len, 0);
        let mut c = zstd::bulk::Compressor::new(3).unwrap();
        c.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true)).unwrap();
        let frame = c.compress(&vec![0u8; usize::try_from(frame_len).unwrap()]).unwrap();
        let n = len / frame_len;
        let mut out = Vec::new();
        for _ in 0..n {
            out.extend(&frame);
        }
        out.extend(0x184D_2A5Eu32.to_le_bytes());
        out.extend(u32::try_from(n * 8 + 9).unwrap().to_le_bytes());
        for _ in 0..n {
            out.extend(u32::try_from(frame.len()).unwrap().to_le_bytes());
            out.extend(u32::try_from(frame_len).unwrap().to_le_bytes());
        }
        out.extend(u32::try_from(n).unwrap().to_le_bytes());
        out.push(0);
        out.extend(0x8F92_EAB1u32.to_le_bytes());
        out
    }

    /// A part of `dtype` whose blob is `blob`; `decoded` for a seekable one.
    pub fn part(dtype: &str, blob: (u64, u64), decoded: Option<u64>) -> Value {
        let mut entries = vec![("dtype", text(dtype)), ("blob", uints(&[blob.0, blob.1]))];
        if let Some(len) = decoded {
            entries.push(("encoding", text(ztensor_v2::seekable::ID)));
            entries.push(("decoded_length", Value::Uint(len)));
        }
        map(entries)
    }

    pub fn object(shape: &[u64], layout: &str, parts: Vec<(&str, Value)>) -> Value {
        map(vec![("shape", uints(shape)), ("layout", text(layout)), ("parts", map(parts))])
    }

    /// A file of `blobs` (each at the next 64 KiB boundary from 65536; their places
    /// returned by `objects`, which gives the objects by name).
    pub fn file(
        blobs: &[&[u8]],
        objects: impl FnOnce(&[(u64, u64)]) -> Vec<(String, Value)>,
    ) -> Vec<u8> {
        let mut out = ztensor_v2::MAGIC.to_vec();
        let align = |n: usize| n.div_ceil(65536) * 65536;
        let mut places = Vec::new();
        for blob in blobs {
            out.resize(align(out.len()), 0);
            places.push((out.len() as u64, blob.len() as u64));
            out.extend_from_slice(blob);
        }
        let mut objects = objects(&places);
        objects.sort_by(|a, b| a.0.cmp(&b.0));
        let objects = objects.into_iter().map(|(k, v)| (text(&k), v)).collect();
        let manifest = encode(&Value::Map(vec![(text("objects"), Value::Map(objects))]));
        let at = align(out.len());
        out.resize(at, 0);
        out.extend_from_slice(&manifest);
        out.extend((at as u64).to_le_bytes());
        out.extend((manifest.len() as u64).to_le_bytes());
        out.extend(xxhash_rust::xxh3::xxh3_64(&manifest).to_le_bytes());
        out.extend(ztensor_v2::VERSION.to_le_bytes());
        out.extend(0u32.to_le_bytes());
        out.extend(ztensor_v2::MAGIC);
        out
    }

    /// `count` dense `u8` objects whose one part each is the one seekable blob of `len` zeros.
    pub fn aliases(count: usize, len: u64) -> Vec<u8> {
        file(&[&zeros(len)], |places| {
            (0..count)
                .map(|i| {
                    let data = part("u8", places[0], Some(len));
                    (format!("alias{i:06}"), object(&[len], "dense", vec![("data", data)]))
                })
                .collect()
        })
    }

    /// A CSR matrix of `rows` empty rows whose `u64` row pointers (all zero) are a seekable
    /// stream.
    pub fn csr(rows: u64) -> Vec<u8> {
        let len = (rows + 1) * 8;
        file(&[&zeros(len)], |places| {
            let at = places[0].0;
            let parts = vec![
                ("indices", part("u64", (at, 0), None)),
                ("indptr", part("u64", places[0], Some(len))),
                ("values", part("f32", (at, 0), None)),
            ];
            vec![("csr".to_owned(), object(&[rows, 4], "zt.sparse_csr/1", parts))]
        })
    }

    /// Bytes that count what is read from them.
    pub struct Counted {
        pub bytes: Vec<u8>,
        pub read: AtomicU64,
    }

    impl ztensor_io::ReadAt for Counted {
        fn len(&self) -> u64 {
            self.bytes.len() as u64
        }
        fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
            self.read.fetch_add(buf.len() as u64, Ordering::Relaxed);
            self.bytes.read_exact_at(offset, buf)
        }
    }
}

/// A thousand objects whose parts are one seekable blob: checking them decodes it once (the
/// bytes read are the stream's and the manifest's, not a thousand streams'), and each alias
/// has its own verdict and its length.
#[test]
fn a_blob_many_parts_alias_is_checked_once() {
    use std::sync::atomic::Ordering;
    let len = 64u64 << 20;
    let bytes = crafted::aliases(1000, len);
    let stream = crafted::zeros(len).len() as u64;
    let size = bytes.len() as u64;
    let counted = crafted::Counted { bytes, read: Default::default() };
    let source: &dyn ztensor_io::ReadAt = &counted;
    let f = File::open(source, ztensor_v2::MAX_MANIFEST).unwrap();
    assert_eq!(f.check_cost(), len);
    let opened = counted.read.load(Ordering::Relaxed);
    for i in 0..f.len() {
        let decoded = TensorSource::verify(&f, i).unwrap();
        assert_eq!(decoded[0].len, len);
    }
    let name = f.name(999).unwrap().into_owned();
    let check = f.check_part(&name, "data", true).unwrap();
    assert_eq!(check.decoded_len, len);
    let read = counted.read.load(Ordering::Relaxed) - opened;
    assert!(read <= 2 * stream, "{read} bytes read for a stream of {stream} (file {size})");
}

/// Aliases of one blob share its decoding, not their verdicts: each has its own digest and
/// logical type checked on what the one pass found.
#[test]
fn aliases_keep_their_own_verdicts() {
    use ztensor_v2::cbor::Value;
    let bytes = crafted::file(&[&[0, 1, 2]], |places| {
        let with = |logical: Option<&str>, digest: Option<String>| {
            let Value::Map(mut entries) = crafted::part("u8", places[0], None) else {
                unreachable!()
            };
            if let Some(l) = logical {
                entries.push((crafted::text("type"), crafted::text(l)));
            }
            if let Some(d) = digest {
                entries.push((crafted::text("digest"), crafted::text(&d)));
            }
            entries.sort_by(|a, b| {
                let key = |v: &Value| ztensor_v2::cbor::encode(v);
                key(&a.0).cmp(&key(&b.0))
            });
            crafted::object(&[3], "dense", vec![("data", Value::Map(entries))])
        };
        let right = format!("xxh3:{:016x}", xxhash_rust::xxh3::xxh3_64(&[0, 1, 2]));
        vec![
            ("a".to_owned(), with(None, Some(right))),
            ("b".to_owned(), with(None, Some(format!("xxh3:{:016x}", 7)))),
            ("c".to_owned(), with(Some("bool"), None)),
            ("d".to_owned(), with(None, None)),
        ]
    });
    let f = File::open(bytes, ztensor_v2::MAX_MANIFEST).unwrap();
    assert_eq!(f.verify("a", "data").unwrap(), ztensor_v2::DigestCheck::Verified);
    assert_eq!(f.verify("b", "data").unwrap_err().broken(), Some(ztensor_v2::Rule::Digest));
    assert_eq!(f.verify("c", "data").unwrap_err().broken(), Some(ztensor_v2::Rule::LayoutData));
    assert_eq!(f.verify("d", "data").unwrap(), ztensor_v2::DigestCheck::Absent);
    let sha = f.check_part("d", "data", true).unwrap().sha256.unwrap();
    assert_eq!(ztensor_format::to_hex(&sha[..]), ztensor_io::codec::sha256_hex(&[0, 1, 2]));
}

/// What checking a file decodes is held to the expansion budget before a byte is decoded: two
/// 1 GiB streams of a few KiB each are refused (a blob counts once, however many alias it), and
/// pass once the budget is raised.
#[test]
fn checks_past_the_expansion_budget_are_refused_before_decoding() {
    use std::sync::atomic::Ordering;
    let gib = 1u64 << 30;
    let stream = crafted::zeros(gib);
    let bytes = crafted::file(&[&stream, &stream], |places| {
        places
            .iter()
            .enumerate()
            .map(|(i, &blob)| {
                let data = crafted::part("u8", blob, Some(gib));
                (format!("z{i}"), crafted::object(&[gib], "dense", vec![("data", data)]))
            })
            .collect()
    });
    let counted = crafted::Counted { bytes, read: Default::default() };
    let source: &dyn ztensor_io::ReadAt = &counted;
    let f = File::open(source, ztensor_v2::MAX_MANIFEST).unwrap();
    assert_eq!(f.check_cost(), 2 * gib);
    let opened = counted.read.load(Ordering::Relaxed);
    let e = TensorSource::verify(&f, 0).unwrap_err();
    let kind = e.format_error().map(ztensor_format::Error::kind);
    assert_eq!(kind, Some(ztensor_format::ErrorKind::DecodedTooLarge), "{e}");
    assert!(e.to_string().contains("\"z0\""), "{e}");
    let read = counted.read.load(Ordering::Relaxed) - opened;
    assert!(read < 4096, "{read} bytes read: only seek tables, nothing decoded");
    let mut limits = f.limits().clone();
    assert!(f.check_expansion(&limits).is_err());
    limits.max_expansion = 1 << 20;
    assert_eq!(f.check_expansion(&limits).unwrap(), 2 * gib);
}

/// A CSR object is held whole to check its structure: row pointers that decode to 2 GiB are
/// past the expansion budget of a file of a few KiB, and, with the budget raised, past a
/// whole-decode limit of 1 GiB; refused either way before anything is allocated or read.
#[test]
fn a_csr_object_past_the_whole_decode_limit_is_refused_before_allocation() {
    use std::sync::atomic::Ordering;
    let rows = (1u64 << 28) - 1;
    let counted = crafted::Counted { bytes: crafted::csr(rows), read: Default::default() };
    let source: &dyn ztensor_io::ReadAt = &counted;
    let f = File::open(source, ztensor_v2::MAX_MANIFEST).unwrap();
    let opened = counted.read.load(Ordering::Relaxed);
    let too_large = |e: &ztensor_io::Error| {
        e.format_error().map(ztensor_format::Error::kind)
            == Some(ztensor_format::ErrorKind::DecodedTooLarge)
    };
    let e = TensorSource::verify(&f, 0).unwrap_err();
    assert!(too_large(&e) && e.to_string().contains("more than"), "{e}");
    let mut limits = f.limits().clone();
    limits.max_expansion = 1 << 30;
    limits.max_whole_len = 1 << 30;
    let f = f.with_limits(limits);
    let e = TensorSource::verify(&f, 0).unwrap_err();
    assert!(too_large(&e) && e.to_string().contains("held whole"), "{e}");
    let e = TensorSource::read(&f, 0).unwrap_err();
    assert!(too_large(&e), "{e}");
    let read = counted.read.load(Ordering::Relaxed) - opened;
    assert!(read < 4096, "{read} bytes read: only seek tables, nothing decoded");
}
