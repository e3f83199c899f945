//! Attributes held as the manifest stores them (deterministic CBOR, read in place) give back
//! exactly the values written, on every way a manifest is read; and a content digest computed
//! from the data hashes a blob that parts share once, with the identity of the same content
//! stored without sharing.

use sha2::Digest as _;
use ztensor_format::attributes::Item;
use ztensor_io::TensorSource;
use ztensor_v2::cbor::{Value, encode};
use ztensor_v2::{File, IdAlgorithm, MAX_MANIFEST, Rule, content_digest};

fn text(s: &str) -> Value {
    Value::Text(s.to_owned())
}

fn map(entries: Vec<(&str, Value)>) -> Value {
    Value::Map(entries.into_iter().map(|(k, v)| (text(k), v)).collect())
}

/// A file: each blob at its own 64 KiB boundary from 65536, then the manifest `manifest` makes
/// of their offsets (its bytes as given), then the footer.
fn file_of(blobs: &[&[u8]], manifest: impl FnOnce(&[u64]) -> Vec<u8>) -> Vec<u8> {
    let mut bytes = ztensor_v2::MAGIC.to_vec();
    let mut offsets = Vec::new();
    for blob in blobs {
        bytes.resize(bytes.len().div_ceil(65536).max(1) * 65536, 0);
        offsets.push(bytes.len() as u64);
        bytes.extend_from_slice(blob);
    }
    bytes.resize(bytes.len().div_ceil(65536) * 65536, 0);
    let at = bytes.len() as u64;
    let manifest = manifest(&offsets);
    bytes.extend(&manifest);
    bytes.extend(at.to_le_bytes());
    bytes.extend((manifest.len() as u64).to_le_bytes());
    bytes.extend(xxhash_rust::xxh3::xxh3_64(&manifest).to_le_bytes());
    bytes.extend(ztensor_v2::VERSION.to_le_bytes());
    bytes.extend(0u32.to_le_bytes());
    bytes.extend(ztensor_v2::MAGIC);
    bytes
}

fn xxh3(bytes: &[u8]) -> String {
    format!("xxh3:{:016x}", xxhash_rust::xxh3::xxh3_64(bytes))
}

/// A dense u8 object of `len` bytes at `at`, with `more` fields in its part and `attributes`.
fn object(at: u64, len: u64, more: Vec<(&str, Value)>, attributes: Option<Value>) -> Value {
    let mut part = vec![
        ("dtype", text("u8")),
        ("blob", Value::Array(vec![Value::Uint(at), Value::Uint(len)])),
    ];
    part.extend(more);
    let mut o = vec![
        ("shape", Value::Array(vec![Value::Uint(len)])),
        ("layout", text("dense")),
        ("parts", map(vec![("data", map(part))])),
    ];
    o.extend(attributes.map(|a| ("attributes", a)));
    map(o)
}

/// The manifest `{"objects": objects, "attributes": <attributes, as given>}`: the file's
/// attributes spliced in as bytes, so that a test may give bytes no tree encodes to.
fn manifest_with(objects: Value, attributes: Option<&[u8]>) -> Vec<u8> {
    let mut out = vec![0xa1 + u8::from(attributes.is_some())];
    out.extend(encode(&text("objects")));
    out.extend(encode(&objects));
    if let Some(a) = attributes {
        out.extend(encode(&text("attributes")));
        out.extend_from_slice(a);
    }
    out
}

/// `bytes` opened from memory, and from a file (its manifest read a window at a time).
fn opened(bytes: &[u8]) -> [ztensor_v2::Result<File<&'static dyn ztensor_io::ReadAt>>; 2] {
    // One directory for the test binary: the sources are leaked, so is it (a static is never
    // dropped), under a name of its own.
    static DIR: std::sync::OnceLock<ztensor_testkit::Scratch> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| ztensor_testkit::scratch("v2-attributes"));
    let path = dir.join(format!("{:016x}.zt", xxhash_rust::xxh3::xxh3_64(bytes)));
    std::fs::write(&path, bytes).unwrap();
    let source = ztensor_io::FileSource::open(&path).unwrap();
    // Leaked: a few small sources, for the length of a test.
    let sources: [&'static dyn ztensor_io::ReadAt; 2] =
        [Box::leak(Box::new(bytes.to_vec())), Box::leak(Box::new(source))];
    let opened = sources.map(|s| File::open(s, MAX_MANIFEST));
    let _ = std::fs::remove_file(&path);
    opened
}

/// Attribute values of every kind the manifest permits: integers at CBOR's edges, floats of
/// each width (NaN, −0, infinities), bytes, text, nested maps with keys of any kind, arrays
/// of many items, empty containers.
fn kitchen_sink() -> Value {
    let nested = Value::Map(vec![
        (Value::Uint(1), text("one")),
        (Value::Nint(0), text("minus one")),
        (Value::Bytes(vec![1, 2]), Value::Null),
        (Value::Float(0.5), text("a half")),
        (Value::Array(vec![Value::Uint(1)]), Value::Bool(true)),
        (Value::Bool(false), Value::Null),
        (text("deeper"), map(vec![("list", Value::Array(vec![Value::Array(vec![])]))])),
    ]);
    let many: Vec<Value> = (0..50_000u64)
        .map(|i| match i % 5 {
            0 => Value::Uint(i),
            1 => Value::Nint(i),
            2 => Value::Float(i as f64 / 3.0),
            3 => text(&format!("v{i}")),
            _ => Value::Bytes(i.to_le_bytes().to_vec()),
        })
        .collect();
    map(vec![
        ("u64 max", Value::Uint(u64::MAX)),
        ("nint max", Value::Nint(u64::MAX)),
        ("minus one", Value::Nint(0)),
        ("edges", Value::Array([23, 24, 255, 256, 65535, 65536].map(Value::Uint).to_vec())),
        ("bytes", Value::Bytes(vec![0, 1, 0xfe, 0xff])),
        ("no bytes", Value::Bytes(vec![])),
        ("text", text("é ✓ \"quoted\"\n")),
        ("half", Value::Float(1.5)),
        ("single", Value::Float(f64::from(0.1f32))),
        ("double", Value::Float(0.1)),
        ("nan", Value::Float(f64::NAN)),
        ("minus zero", Value::Float(-0.0)),
        (
            "infinities",
            Value::Array(vec![Value::Float(f64::INFINITY), Value::Float(-1e300 * 1e10)]),
        ),
        ("flags", Value::Array(vec![Value::Bool(true), Value::Bool(false), Value::Null])),
        ("nested", nested),
        ("empty map", Value::Map(vec![])),
        ("empty array", Value::Array(vec![])),
        ("many", Value::Array(many)),
    ])
}

#[test]
fn attribute_values_read_back_exactly() {
    let attributes = kitchen_sink();
    let encoded = encode(&attributes);
    let blob = [7u8; 3];
    let bytes = file_of(&[&blob], |at| {
        let objects = map(vec![("t", object(at[0], 3, vec![], Some(attributes.clone())))]);
        manifest_with(objects, Some(&encoded))
    });
    // The values in file order, in the 1.2 model's tree.
    let expected = ztensor_v2::model::value_1x(&ztensor_v2::cbor::decode(&encoded).unwrap());
    let mut manifests = Vec::new();
    for file in opened(&bytes) {
        let file = file.unwrap();
        let m = file.manifest().unwrap().clone();
        let object = m.objects.get("t").unwrap().attributes.as_deref().unwrap();
        for a in [m.attributes.as_ref().unwrap(), object] {
            // Kept as the manifest's bytes, read in place.
            assert_eq!(a.as_bytes(), encoded);
            assert_eq!(a.to_value(), expected);
            assert_eq!(a.get("u64 max").unwrap().as_u64(), Some(u64::MAX));
            let nint = a.get("nint max").unwrap().item();
            assert!(matches!(nint, Item::Integer(i) if i == -(1i128 << 64)), "{nint:?}");
            assert!(matches!(a.get("minus one").unwrap().item(), Item::Integer(-1)));
            assert!(matches!(a.get("bytes").unwrap().item(), Item::Bytes([0, 1, 0xfe, 0xff])));
            assert_eq!(a.get("text").unwrap().as_text(), Some("é ✓ \"quoted\"\n"));
            assert_eq!(a.get("double").unwrap().as_f64(), Some(0.1));
            assert_eq!(a.get("single").unwrap().as_f64(), Some(f64::from(0.1f32)));
            assert!(a.get("nan").unwrap().as_f64().unwrap().is_nan());
            let zero = a.get("minus zero").unwrap().as_f64().unwrap();
            assert_eq!(zero.to_bits(), (-0.0f64).to_bits());
            assert_eq!(a.get("many").unwrap().as_array().unwrap().len(), 50_000);
            let nested = a.get("nested").unwrap().as_map().unwrap();
            // Keys of any kind, in the bytewise order of their encodings (as the file holds
            // them: not shorter encodings first).
            let keys: Vec<String> = nested.map(|(k, _)| k.to_string()).collect();
            assert_eq!(keys, ["1", "-1", "h'0102'", "\"deeper\"", "[1]", "false", "0.5"]);
        }
        // What the tensor-source interface (the CLI, Python) gives: the same attributes.
        assert_eq!(file.attributes().as_deref(), m.attributes.as_ref());
        assert_eq!(file.info(0).unwrap().attributes.as_deref(), Some(object));
        assert_eq!(file.read(0).unwrap().attributes.as_deref(), Some(object));
        manifests.push(m);
    }
    // Every way of parsing a manifest agrees: in one pass from memory and through windows (the
    // files above), the general way, and from the decoded tree.
    let footer = ztensor_v2::Footer::parse(bytes[bytes.len() - 40..].try_into().unwrap());
    let at = usize::try_from(footer.manifest_offset).unwrap();
    let manifest = &bytes[at..at + usize::try_from(footer.manifest_length).unwrap()];
    let from_tree =
        ztensor_v2::manifest::parse(&ztensor_v2::cbor::decode(manifest).unwrap()).unwrap();
    assert_eq!(manifests[0], manifests[1]);
    assert_eq!(manifests[0], ztensor_v2::manifest::parse_bytes(manifest).unwrap());
    assert_eq!(manifests[0], from_tree);
}

/// The content digest takes an object's attributes verbatim (§5.4): from the manifest, from the
/// data (the attributes carried through the 1.2 model), and as the spec spells the value.
#[test]
fn attributes_enter_the_identity_verbatim() {
    let attributes = kitchen_sink();
    let blob = [7u8; 3];
    let digest = xxh3(&blob);
    let part = vec![("digest", text(&digest))];
    let bytes = file_of(&[&blob], |at| {
        let objects = map(vec![("t", object(at[0], 3, part.clone(), Some(attributes.clone())))]);
        manifest_with(objects, Some(&encode(&map(vec![("file", Value::Null)]))))
    });
    let content = Value::Array(vec![
        text(ztensor_v2::CONTENT_TAG),
        map(vec![(
            "t",
            map(vec![
                ("shape", Value::Array(vec![Value::Uint(3)])),
                ("layout", text("dense")),
                ("attributes", attributes),
                (
                    "parts",
                    map(vec![(
                        "data",
                        map(vec![("dtype", text("u8")), ("digest", text(&digest))]),
                    )]),
                ),
            ]),
        )]),
    ]);
    let hash = sha2::Sha256::digest(encode(&content));
    let expected = format!("sha256:{}", ztensor_format::to_hex(&hash));
    for file in opened(&bytes) {
        let file = file.unwrap();
        assert_eq!(file.content_digest(IdAlgorithm::Sha256).unwrap(), expected);
        assert_eq!(content_digest(&file, IdAlgorithm::Sha256).unwrap(), expected);
    }
}

/// What the attributes' rules refuse, the same on every way a manifest is read.
#[test]
fn attributes_that_break_a_rule_are_refused() {
    let cases: Vec<(&str, Vec<u8>, Rule)> = vec![
        ("not a map", encode(&Value::Array(vec![])), Rule::Schema),
        (
            "a key that is not text",
            encode(&Value::Map(vec![(Value::Uint(1), Value::Null)])),
            Rule::Schema,
        ),
        ("an empty key", encode(&map(vec![("", Value::Null)])), Rule::Name),
        ("a key holding U+0000", encode(&map(vec![("a\0", Value::Null)])), Rule::Name),
        // {"a": 1(0)}: a tag.
        ("a tag", vec![0xa1, 0x61, b'a', 0xc1, 0x00], Rule::CborSyntax),
        // {"a": {"b": 0, "a": 0}}: nested keys out of order.
        (
            "nested keys out of order",
            vec![0xa1, 0x61, b'a', 0xa2, 0x61, b'b', 0x00, 0x61, b'a', 0x00],
            Rule::CborDeterminism,
        ),
        // {"a": {1: 0, 1: 0}}: a nested key given twice.
        (
            "a nested key twice",
            vec![0xa1, 0x61, b'a', 0xa2, 0x01, 0x00, 0x01, 0x00],
            Rule::CborDuplicateKey,
        ),
        // {"a": 1.5 as a single}: a float wider than it needs.
        (
            "a wide float",
            vec![0xa1, 0x61, b'a', 0xfa, 0x3f, 0xc0, 0x00, 0x00],
            Rule::CborDeterminism,
        ),
    ];
    let blob = [0u8; 1];
    for (what, attributes, rule) in cases {
        for on_object in [false, true] {
            let bytes = file_of(&[&blob], |at| {
                let mut o = encode(&object(at[0], 1, vec![], None));
                if on_object {
                    // The object's map gains `attributes`, its last key.
                    o[0] += 1;
                    o.extend(encode(&text("attributes")));
                    o.extend_from_slice(&attributes);
                }
                let mut objects = vec![0xa1];
                objects.extend(encode(&text("t")));
                objects.extend(o);
                let mut out = vec![0xa1 + u8::from(!on_object)];
                out.extend(encode(&text("objects")));
                out.extend(objects);
                if !on_object {
                    out.extend(encode(&text("attributes")));
                    out.extend_from_slice(&attributes);
                }
                out
            });
            for file in opened(&bytes) {
                let e = file.map(drop).expect_err(what);
                assert_eq!(e.broken(), Some(rule), "{what} (on the object: {on_object}): {e}");
            }
        }
    }
}

/// Objects whose parts alias one blob have the identity of the same content stored without
/// sharing, computed from the data (the blob hashed once) and from the manifest; an alias whose
/// own digest is wrong is still refused.
#[test]
fn aliases_hash_once_with_the_identity_of_copies() {
    let blob: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let len = blob.len() as u64;
    let mut seekable = Vec::new();
    let mut encoder = ztensor_v2::seekable::Encoder::new(3);
    let mut store = |b: &[u8]| {
        seekable.extend_from_slice(b);
        Ok(())
    };
    encoder.push(&blob, &mut store).unwrap();
    encoder.finish(&mut store).unwrap();
    let names = ["a", "b", "c", "d"];
    // Each object's part: raw, or zstd-seekable (the digest is the decoded bytes').
    let part = |encoded: bool, digest: &str| {
        let mut more = vec![("digest", text(digest))];
        if encoded {
            more.push(("encoding", text(ztensor_v2::seekable::ID)));
            more.push(("decoded_length", Value::Uint(len)));
        }
        more
    };
    let good = xxh3(&blob);
    for encoded in [false, true] {
        let stored: &[u8] = if encoded { &seekable } else { &blob };
        let stored_len = stored.len() as u64;
        let objects = |at: &[u64], digests: &[&str]| {
            let entries = names.iter().enumerate().map(|(i, n)| {
                let at = at[i.min(at.len() - 1)];
                let mut o = object(at, stored_len, part(encoded, digests[i]), None);
                // The object's shape is its decoded length.
                if let Value::Map(entries) = &mut o {
                    entries[0].1 = Value::Array(vec![Value::Uint(len)]);
                }
                (*n, o)
            });
            map(entries.collect())
        };
        let all_good = [good.as_str(); 4];
        let shared = file_of(&[stored], |at| manifest_with(objects(at, &all_good), None));
        let copies = file_of(&[stored; 4], |at| manifest_with(objects(at, &all_good), None));
        let [shared, copies] =
            [&shared, &copies].map(|b| File::open(b.clone(), MAX_MANIFEST).unwrap());
        for algorithm in [IdAlgorithm::Sha256, IdAlgorithm::Xxh3] {
            let id = copies.content_digest(algorithm).unwrap();
            assert_eq!(shared.content_digest(algorithm).unwrap(), id);
            assert_eq!(content_digest(&copies, algorithm).unwrap(), id, "encoded: {encoded}");
            assert_eq!(content_digest(&shared, algorithm).unwrap(), id, "encoded: {encoded}");
        }
        // The third alias's digest is wrong: the blob it shares was hashed already, and its own
        // check still refuses it.
        let wrong = xxh3(b"something else");
        let digests = [good.as_str(), good.as_str(), wrong.as_str(), good.as_str()];
        let damaged = file_of(&[stored], |at| manifest_with(objects(at, &digests), None));
        let damaged = File::open(damaged, MAX_MANIFEST).unwrap();
        let e = content_digest(&damaged, IdAlgorithm::Sha256).unwrap_err();
        assert!(e.to_string().contains("\"c\""), "{e}");
        assert!(e.to_string().contains("digest"), "{e}");
    }
}
