//! Builders for hand-made files: any manifest value (valid or not) framed around any blobs.

use ztensor_format::{Container, MAGIC_V0_1, MAGIC_V1, Value, cbor};

/// A text-keyed map.
pub fn map(entries: Vec<(&str, Value)>) -> Value {
    Value::Map(entries.into_iter().map(|(k, v)| (Value::from(k), v)).collect())
}

pub fn uint(v: u64) -> Value {
    Value::from(v)
}

pub fn text(s: &str) -> Value {
    Value::from(s)
}

pub fn shape(dims: &[u64]) -> Value {
    Value::Array(dims.iter().map(|&d| Value::from(d)).collect())
}

/// A v1 component map: dtype, offset, length, plus extra fields.
pub fn comp(dtype: &str, offset: u64, length: u64, extra: Vec<(&str, Value)>) -> Value {
    let mut e = vec![("dtype", text(dtype)), ("offset", uint(offset)), ("length", uint(length))];
    e.extend(extra);
    map(e)
}

/// A v1 object map.
pub fn obj(format: &str, dims: &[u64], components: Vec<(&str, Value)>) -> Value {
    map(vec![("shape", shape(dims)), ("format", text(format)), ("components", map(components))])
}

/// A v1 root map with the given version string and objects.
pub fn root(version: &str, objects: Vec<(&str, Value)>) -> Value {
    map(vec![("version", text(version)), ("objects", map(objects))])
}

/// A v0.1 tensor map with the standard required fields, plus extra fields.
pub fn tensor(
    name: &str,
    dtype: &str,
    dims: &[u64],
    offset: u64,
    size: u64,
    extra: Vec<(&str, Value)>,
) -> Value {
    let mut e = vec![
        ("name", text(name)),
        ("offset", uint(offset)),
        ("size", uint(size)),
        ("dtype", text(dtype)),
        ("shape", shape(dims)),
        ("encoding", text("raw")),
    ];
    e.extend(extra);
    map(e)
}

/// Lays out blobs after the header (zero padding between), then the manifest bytes and the
/// trailer. The data area ends at `data_end` or right after the last blob.
pub fn frame(
    container: Container,
    blobs: &[(u64, Vec<u8>)],
    data_end: Option<u64>,
    manifest: &[u8],
) -> Vec<u8> {
    let mut file = match container {
        Container::V0_1 => MAGIC_V0_1.to_vec(),
        Container::V1 => MAGIC_V1.to_vec(),
    };
    for (offset, bytes) in blobs {
        let start = *offset as usize;
        let end = start + bytes.len();
        if file.len() < end {
            file.resize(end, 0);
        }
        file[start..end].copy_from_slice(bytes);
    }
    if let Some(end) = data_end {
        file.resize(end as usize, 0);
    }
    file.extend_from_slice(manifest);
    file.extend_from_slice(&container.encode_trailer(manifest.len() as u64));
    file
}

/// A v1 file around a manifest value; the data area is exactly large enough for the blobs
/// the manifest names, zero-filled.
pub fn v1_file(manifest: &Value, data_end: u64) -> Vec<u8> {
    frame(Container::V1, &[], Some(data_end), &cbor::encode(manifest).expect("encodable"))
}

/// A v0.1 file around a manifest value.
pub fn v0_file(manifest: &Value, data_end: u64) -> Vec<u8> {
    frame(Container::V0_1, &[], Some(data_end), &cbor::encode(manifest).expect("encodable"))
}
