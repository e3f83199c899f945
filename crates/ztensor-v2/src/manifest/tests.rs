//! The manifest parsed from the corpus's files and the reference's, and from hostile bytes.

use super::parse::{direct, parse_in_steps};
use super::*;
use crate::cbor::{MAX_VALUES, Value};
use crate::error::{Error, Result, Rule};

/// The manifest of every zTensor 2 file under the corpus and the reference's frozen files.
fn corpus_manifests() -> Vec<(String, Vec<u8>)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../ztensor-conformance");
    let mut dirs = vec![root.join("fixtures/producers/v2/reference-2.1.1")];
    for group in ["valid", "reject", "hostile"] {
        dirs.push(root.join("fixtures/external/ztensor2").join(group));
    }
    let mut out = Vec::new();
    for dir in dirs {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            let Some(footer) = bytes.len().checked_sub(40).map(|at| &bytes[at..]) else {
                continue;
            };
            let field = |at: usize| {
                let n = u64::from_le_bytes(footer[at..at + 8].try_into().unwrap());
                usize::try_from(n).unwrap_or(usize::MAX)
            };
            let (at, len) = (field(0), field(8));
            if let Some(m) = at.checked_add(len).and_then(|end| bytes.get(at..end))
                && len > 0
            {
                out.push((path.display().to_string(), m.to_vec()));
            }
        }
    }
    out
}

/// A manifest of one empty-shaped object `t` (its `extra` entries and parts appended as
/// given) and the root entries `root`, each `(key, encoded value)`; keys given in their
/// deterministic order.
fn manifest_of(root: &[(&str, Vec<u8>)], object_extra: &[(&str, Vec<u8>)]) -> Vec<u8> {
    use crate::cbor::encode;
    use ztensor_format::cbor::head;
    let text = |s: &str| encode(&Value::Text(s.to_owned()));
    let mut object = Vec::new();
    let part = Value::Map(vec![
        (Value::Text("blob".into()), Value::Array(vec![Value::Uint(4096), Value::Uint(0)])),
        (Value::Text("dtype".into()), Value::Text("u8".into())),
    ]);
    let mut fields = vec![
        ("parts", encode(&Value::Map(vec![(Value::Text("data".into()), part)]))),
        ("shape", encode(&Value::Array(vec![Value::Uint(0)]))),
        ("layout", text("dense")),
    ];
    fields.extend(object_extra.iter().cloned());
    fields.sort_by_key(|(k, _)| text(k));
    head(&mut object, 5, fields.len() as u64);
    for (k, v) in fields {
        object.extend(text(k));
        object.extend(v);
    }
    let mut objects = Vec::new();
    head(&mut objects, 5, 1);
    objects.extend(text("t"));
    objects.extend(object);
    let mut entries: Vec<(&str, Vec<u8>)> = root.to_vec();
    entries.push(("objects", objects));
    entries.sort_by_key(|(k, _)| text(k));
    let mut out = Vec::new();
    head(&mut out, 5, entries.len() as u64);
    for (k, v) in entries {
        out.extend(text(k));
        out.extend(v);
    }
    out
}

/// An array of `n` zeros, or a map `{"a": that}`.
fn zeros(n: u64) -> Vec<u8> {
    let mut out = Vec::new();
    ztensor_format::cbor::head(&mut out, 4, n);
    out.resize(out.len() + usize::try_from(n).unwrap(), 0);
    out
}

fn attribute_of(value: Vec<u8>) -> Vec<u8> {
    let mut out = vec![0xa1, 0x61, b'a'];
    out.extend(value);
    out
}

/// A map of `n` entries `kNNNNNNN: 0`, keys in order.
fn wide_map(n: u64) -> Vec<u8> {
    let mut out = Vec::new();
    ztensor_format::cbor::head(&mut out, 5, n);
    for i in 0..n {
        out.extend(crate::cbor::encode(&Value::Text(format!("k{i:08}"))));
        out.push(0);
    }
    out
}

/// The manifest's verdict read whole and a window at a time (the general path giving it
/// when the one-pass one does not), with a budget of `max_values` items.
fn verdicts(bytes: &[u8], max_values: u64) -> [Result<Manifest>; 2] {
    let whole = parse_bytes_within(bytes, max_values);
    let mut read = |at: u64, buf: &mut [u8]| {
        let at = usize::try_from(at).unwrap();
        buf.copy_from_slice(&bytes[at..at + buf.len()]);
        Ok(())
    };
    let read = direct::Bytes::Read { len: bytes.len() as u64, window: 4096, read: &mut read };
    let windowed = match direct::manifest(read, max_values) {
        Ok(Some((m, _))) => Ok(m),
        Ok(None) => parse_in_steps(bytes, max_values),
        Err(e) => Err(e),
    };
    [whole, windowed]
}

/// Each way a manifest can hold many items (a long attribute array, keys the schema does
/// not know at the root or in an object, a wide shard table, any of them where the
/// one-pass parse leaves the verdict to the general one) draws on one budget: past it,
/// `manifest_too_large`; within it, the manifest reads.
#[test]
fn every_item_counts_against_the_value_budget() {
    let n = 50_000u64;
    let mut shard_table = Vec::new();
    ztensor_format::cbor::head(&mut shard_table, 5, n);
    for i in 0..n {
        shard_table.extend(crate::cbor::encode(&Value::Text(format!("s{i:08}"))));
        shard_table.extend(crate::cbor::encode(&Value::Map(vec![
            (Value::Text("size".into()), Value::Uint(0)),
            (Value::Text("digest".into()), Value::Text("xxh3:00".into())),
        ])));
    }
    // An object key that is not text sends the parse the general way.
    let mut odd_key = vec![0xa1, 0x00];
    odd_key.extend(zeros(n));
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("file attributes", manifest_of(&[("attributes", attribute_of(zeros(n)))], &[])),
        ("object attributes", manifest_of(&[], &[("attributes", attribute_of(zeros(n)))])),
        ("root keys", manifest_of(&[("unknown", wide_map(n))], &[])),
        ("object keys", manifest_of(&[], &[("unknown", wide_map(n))])),
        ("shard table", manifest_of(&[("shards", shard_table)], &[])),
        ("general way", manifest_of(&[], &[("zz", odd_key)])),
    ];
    for (what, bytes) in &cases {
        for verdict in verdicts(bytes, n) {
            let e = verdict.expect_err(what);
            assert_eq!(e.broken(), Some(Rule::ManifestTooLarge), "{what}: {e}");
        }
        for verdict in verdicts(bytes, 8 * n) {
            let m = verdict.unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(m.objects.len(), 1, "{what}");
        }
        assert!(parse_bytes(bytes).is_ok(), "{what}: within the default budget");
    }
}

/// What reading `bytes` a window of `window` at a time gives.
fn windowed(bytes: &[u8], window: usize) -> Option<(Manifest, u64)> {
    let mut read = |at: u64, buf: &mut [u8]| {
        let at = usize::try_from(at).unwrap();
        buf.copy_from_slice(&bytes[at..at + buf.len()]);
        Ok(())
    };
    parse_read(bytes.len() as u64, window, &mut read).unwrap()
}

/// The one-pass parse, in memory and read through windows of any size, accepts only what
/// the general parse accepts, with the same manifest, and hashes the bytes it read; it
/// accepts every manifest of the valid groups (so the comparison is not empty).
#[test]
fn one_pass_is_the_general_parse() {
    let manifests = corpus_manifests();
    let (mut accepted, mut valid) = (0, 0);
    for (path, m) in &manifests {
        let mut cases = vec![m.clone(), m[..m.len() / 2].to_vec()];
        // Damaged copies: a bit, a major type and a whole byte changed, at up to 48 places
        // (of the manifests of up to 64 KiB: the hostile ones are whole only).
        let stride = (m.len() / 48).max(1);
        let damaged = if m.len() <= 64 << 10 { m.len() } else { 0 };
        for at in (0..damaged).step_by(stride) {
            for flip in [0x01, 0x20, 0xff] {
                let mut d = m.clone();
                d[at] ^= flip;
                cases.push(d);
            }
        }
        let is_valid = path.contains("/valid/") || path.contains("reference-2.1.1");
        for (i, case) in cases.iter().enumerate() {
            let general = parse_in_steps(case, MAX_VALUES);
            let windows: &[usize] = if i == 0 { &[1, 2, 7, 64, 4096, WINDOW] } else { &[3, 4096] };
            for &window in windows {
                let one_pass = windowed(case, window);
                if let Some((manifest, hash)) = &one_pass {
                    assert_eq!(*hash, xxhash_rust::xxh3::xxh3_64(case), "{path}");
                    let general = general.as_ref().unwrap_or_else(|e| {
                        panic!("{path} case {i}: accepted in one pass, refused: {e}")
                    });
                    assert_eq!(manifest, general, "{path} case {i} window {window}");
                    accepted += 1;
                } else if i == 0 && is_valid {
                    panic!("{path}: a valid manifest is not parsed in one pass");
                }
            }
            match parse_bytes(case) {
                Ok(m) => assert_eq!(Some(&m), general.as_ref().ok(), "{path} case {i}"),
                Err(e) => {
                    assert_eq!(Some(e.broken()), general.as_ref().err().map(Error::broken));
                }
            }
            valid += usize::from(i == 0 && is_valid);
        }
    }
    assert!(valid > 20 && accepted > 200, "{valid} valid, {accepted} accepted");
}
