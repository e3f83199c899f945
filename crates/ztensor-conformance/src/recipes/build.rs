//! What the recipes are made of: fixtures, where they are filed, and the bytes and CBOR
//! values they are built from.

use anyhow::Result;
use ztensor_format::{
    Container, DType, ErrorKind as K, MAGIC_V0_1, MAGIC_V1, Value, Version, cbor,
};
use ztensor_io::Writer;

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

pub(super) fn dir(v: Version) -> &'static str {
    match v {
        Version::V0_1 => "v0.1",
        Version::V1_1 => "v1.1",
        Version::V1_2 => "v1.2",
    }
}

pub(super) struct Out {
    pub(super) list: Vec<Fixture>,
}

impl Out {
    /// Files a fixture under the folder its expectation names.
    pub(super) fn push(
        &mut self,
        v: Version,
        name: &str,
        covers: &str,
        expect: Expect,
        bytes: Vec<u8>,
    ) {
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
    pub(super) fn ok(&mut self, v: Version, name: &str, covers: &str, bytes: Vec<u8>) {
        self.push(v, name, covers, Expect::Ok, bytes);
    }
    pub(super) fn defined(
        &mut self,
        v: Version,
        name: &str,
        strict: Option<K>,
        covers: &str,
        bytes: Vec<u8>,
    ) {
        self.push(v, name, covers, Expect::Defined(strict), bytes);
    }
    pub(super) fn reject(
        &mut self,
        v: Version,
        kind: K,
        variant: &str,
        covers: &str,
        bytes: Vec<u8>,
    ) {
        let name = if variant.is_empty() {
            kind.id().to_owned()
        } else {
            format!("{}--{variant}", kind.id())
        };
        self.push(v, &name, covers, Expect::Reject(kind), bytes);
    }
}

pub(super) fn le<T: Copy, const N: usize>(values: &[T], to: fn(T) -> [u8; N]) -> Vec<u8> {
    values.iter().flat_map(|&v| to(v)).collect()
}

/// `n` deterministic elements of `dtype` (bools 0/1).
pub(super) fn elements(dtype: DType, n: usize, seed: u8) -> Vec<u8> {
    let size = usize::try_from(dtype.size()).unwrap_or(1);
    (0..n * size)
        .map(|i| {
            let b = u8::try_from((i * 37 + usize::from(seed) * 11) % 251).unwrap_or(0);
            if dtype == DType::Bool { b & 1 } else { b }
        })
        .collect()
}

pub(super) fn writer(v: Version) -> Writer<Vec<u8>> {
    Writer::new(Vec::new(), v).expect("a Vec never fails")
}

pub(super) fn done(w: Writer<Vec<u8>>) -> Result<Vec<u8>> {
    Ok(w.finish()?.0)
}

/// A file framed by hand around a manifest value (encoded in RFC 8949 deterministic form), with
/// a zeroed data area of `data_end` bytes.
pub(super) fn framed(container: Container, manifest: &Value, data_end: usize) -> Result<Vec<u8>> {
    framed_bytes(container, &cbor::encode(manifest)?, data_end)
}

pub(super) fn framed_bytes(
    container: Container,
    manifest: &[u8],
    data_end: usize,
) -> Result<Vec<u8>> {
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
pub(super) fn ordered(value: &Value, indefinite_maps: bool, out: &mut Vec<u8>) {
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

pub(super) fn m(entries: Vec<(&str, Value)>) -> Value {
    Value::Map(entries.into_iter().map(|(k, v)| (Value::from(k), v)).collect())
}

pub(super) fn u(v: u64) -> Value {
    Value::from(v)
}

pub(super) fn t(s: &str) -> Value {
    Value::from(s)
}

pub(super) fn shape(dims: &[u64]) -> Value {
    Value::Array(dims.iter().map(|&d| u(d)).collect())
}

/// A v1 manifest of one object "w" made of the given component maps.
pub(super) fn v1_one(
    version: &str,
    format: &str,
    dims: &[u64],
    components: Vec<(&str, Value)>,
) -> Value {
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

pub(super) fn comp(dtype: &str, offset: u64, length: u64, extra: Vec<(&str, Value)>) -> Value {
    let mut e = vec![("dtype", t(dtype)), ("offset", u(offset)), ("length", u(length))];
    e.extend(extra);
    m(e)
}

/// The position of `needle` in `haystack`; a recipe that patches bytes must find them.
pub(super) fn find(haystack: &[u8], needle: &[u8]) -> Result<usize> {
    haystack
        .windows(needle.len())
        .position(|w| w == needle)
        .ok_or_else(|| anyhow::anyhow!("recipe placeholder not found"))
}

pub(super) fn unreachable_recipe<T>() -> Result<T> {
    anyhow::bail!("a recipe built the wrong value")
}
