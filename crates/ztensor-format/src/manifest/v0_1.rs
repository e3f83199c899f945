//! The v0.1 wire schema: a CBOR array of per-tensor maps.
//!
//! Real v0.1 files come from a writer that emits indefinite-length maps and a `layout` of
//! `dense`, `sparsecoo` or `sparsecsr`; seed 000 has no `layout` at all (absent means dense), and
//! seed 003 spells sparse tensors as `layout: "sparse"` plus `sparse_format`. All three decode
//! here. Keys other than the standard ones are the tensor's custom fields and become the
//! object's attributes.

use std::collections::BTreeMap;

use super::{
    ByteOrder, Component, Components, Encoding, Format, Manifest, Object, Packing, Version,
    check_name, missing, take_shape, take_text, take_u64, text_entries, wrong_type,
};
use crate::attributes::Attributes;
use crate::cbor::{Decoder, Entry, Head};
use crate::digest::Digest;
use crate::dtype::{DType, StorageType};
use crate::error::{Error, ErrorKind, Result};
use crate::limits::Limits;
use crate::value::Value;

/// The keys v0.1 defines; every other key of a tensor map is a custom field.
pub const STANDARD_KEYS: [&str; 10] = [
    "name",
    "offset",
    "size",
    "dtype",
    "shape",
    "encoding",
    "layout",
    "data_endianness",
    "checksum",
    "sparse_format",
];

/// The role of the one blob of every v0.1 tensor.
pub const DATA_ROLE: &str = "data";

pub(crate) fn from_value(root: Value, limits: &Limits) -> Result<Manifest> {
    let Value::Array(entries) = root else {
        return Err(Error::new(ErrorKind::SchemaRoot, "a v0.1 manifest must be a CBOR array")
            .expected_found("array", root.kind_name()));
    };
    if entries.len() > limits.max_objects {
        return Err(Error::new(ErrorKind::TooManyObjects, "more tensors than the limit")
            .expected_found(format!("<= {}", limits.max_objects), entries.len()));
    }
    let objects = entries
        .into_iter()
        .enumerate()
        .map(|(index, entry)| {
            tensor(entry, limits).map_err(|e| {
                if e.object().is_some() { e } else { e.in_object(&format!("#{index}")) }
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Manifest {
        version: Version::V0_1,
        version_string: None,
        attributes: None,
        objects,
        extra: Vec::new(),
    })
}

fn optional(value: Value) -> Option<Value> {
    match value {
        Value::Null => None,
        v => Some(v),
    }
}

fn tensor(entry: Value, limits: &Limits) -> Result<Object> {
    let Value::Map(map) = entry else {
        return Err(wrong_type("tensor", "map", &entry));
    };
    let mut fields: BTreeMap<&'static str, Value> = BTreeMap::new();
    let mut custom = Custom::new();
    for (key, value) in text_entries(map, "a tensor map")? {
        match STANDARD_KEYS.iter().find(|k| **k == key) {
            Some(k) => {
                fields.insert(k, value);
            }
            None => custom.push(&key, &value)?,
        }
    }
    tensor_of(fields, custom, limits)
}

/// A tensor's custom fields as they are read: the encoding of an indefinite-length map of them,
/// made deterministic once complete. Values read straight from a file are never a tree.
struct Custom {
    map: Vec<u8>,
    any: bool,
}

impl Custom {
    fn new() -> Custom {
        Custom { map: vec![0xbf], any: false }
    }

    /// Adds `key`, whose value the caller appends to `map` next.
    fn key(&mut self, key: &str) {
        crate::cbor::text_head(&mut self.map, key.len() as u64);
        self.map.extend_from_slice(key.as_bytes());
        self.any = true;
    }

    fn push(&mut self, key: &str, value: &Value) -> Result<()> {
        self.key(key);
        crate::cbor::encode_into(value, &mut self.map)
    }

    /// The custom fields as attributes (`None` when there are none).
    fn finish(mut self) -> Result<Option<Attributes>> {
        if !self.any {
            return Ok(None);
        }
        self.map.push(0xff);
        // Every item was checked as it was read (or built): no depth limit applies again.
        Attributes::from_cbor(&self.map, usize::MAX).map(Some)
    }
}

/// A tensor from its standard fields and its custom ones.
fn tensor_of(
    mut fields: BTreeMap<&'static str, Value>,
    mut custom: Custom,
    limits: &Limits,
) -> Result<Object> {
    let name = take_text(fields.remove("name").ok_or_else(|| missing("name"))?, "name")?;
    let context = |e: Error| e.in_object(&name);
    check_name(&name, limits).map_err(context)?;
    let required = |fields: &mut BTreeMap<&'static str, Value>, key: &'static str| {
        fields.remove(key).ok_or_else(|| missing(key).in_object(&name))
    };
    let offset = take_u64(&required(&mut fields, "offset")?, "offset").map_err(context)?;
    let size = take_u64(&required(&mut fields, "size")?, "size").map_err(context)?;
    let dtype = take_text(required(&mut fields, "dtype")?, "dtype").map_err(context)?;
    let shape = take_shape(required(&mut fields, "shape")?, limits).map_err(context)?;
    let encoding = take_text(required(&mut fields, "encoding")?, "encoding").map_err(context)?;
    let text = |fields: &mut BTreeMap<&'static str, Value>, key: &'static str| {
        fields
            .remove(key)
            .and_then(optional)
            .map(|v| take_text(v, key))
            .transpose()
            .map_err(context)
    };
    let layout = text(&mut fields, "layout")?;
    let endianness = text(&mut fields, "data_endianness")?;
    let checksum = text(&mut fields, "checksum")?;
    let sparse_format = fields.remove("sparse_format");

    let sparse_kind = |sf: &Option<Value>| match sf.as_ref().and_then(Value::as_text) {
        Some(s) if s.eq_ignore_ascii_case("csr") => Some(Format::SparseCsr),
        Some(s) if s.eq_ignore_ascii_case("coo") => Some(Format::SparseCoo),
        _ => None,
    };
    let (format, packing, keep_sparse_format) = match layout.as_deref() {
        None | Some("dense") => (Format::Dense, Packing::Split, true),
        Some("sparsecsr") => (Format::SparseCsr, Packing::V0Single, true),
        Some("sparsecoo") => (Format::SparseCoo, Packing::V0Single, true),
        Some("sparse") => match sparse_kind(&sparse_format) {
            Some(format) => (format, Packing::V0Single, false),
            None => (Format::Unknown("sparse".into()), Packing::V0Single, true),
        },
        Some(other) => (Format::Unknown(other.into()), Packing::V0Single, true),
    };
    if keep_sparse_format && let Some(sf) = sparse_format {
        custom.push("sparse_format", &sf).map_err(context)?;
    }

    let dtype =
        DType::from_v0_name(&dtype).map_or(StorageType::Unknown(dtype.into()), StorageType::Known);
    let mut component = Component::new(dtype, offset, size);
    component.encoding = Encoding::from_name(&encoding);
    component.digest = checksum.map(|c| Digest::parse(&c));
    component.set_byte_order(match endianness.as_deref() {
        None | Some("little") => ByteOrder::Little,
        Some("big") => ByteOrder::Big,
        Some(other) => ByteOrder::Unknown(other.into()),
    });
    let mut components = Components::new();
    components.insert(DATA_ROLE.to_owned(), component);
    let attributes = custom.finish().map_err(context)?.map(Box::new);
    let mut object = Object::new(name, shape, format);
    object.attributes = attributes;
    object.components = components;
    object.packing = packing;
    Ok(object)
}

/// Decodes a v0.1 manifest straight from its bytes, one tensor map at a time: each map's
/// standard fields become values, its custom fields deterministic CBOR, and no tree of the whole
/// manifest is built (a million tensors would cost a gigabyte as one).
///
/// It returns `None` as soon as anything is unusual: malformed CBOR, a key that is not a
/// definite text string, a repeated key, more keys than a tensor map has, a limit, a field the
/// schema refuses. The caller then decodes the general way, which reports exactly what is wrong.
/// Whenever this returns a manifest, it is the one the general way builds from the same bytes
/// (a property test holds the two to it, on valid and mutated manifests).
pub(crate) fn decode_direct(bytes: &[u8], limits: &Limits) -> Option<Manifest> {
    let mut cbor = Decoder::bounded(bytes, limits.max_cbor_depth, limits.max_manifest_values);
    if cbor.max_depth() < 1 {
        return None;
    }
    let at = cbor.pos();
    let Ok(Head::Array(declared)) = cbor.head() else { return None };
    let declared = match declared {
        Some(n) => Some(cbor.count(at, n, 1).ok()?),
        None => None,
    };
    if declared.is_some_and(|n| n > limits.max_objects) {
        return None;
    }
    let mut objects = Vec::with_capacity(declared.unwrap_or(0));
    loop {
        if declared == Some(objects.len()) || (declared.is_none() && cbor.at_break().ok()?) {
            break;
        }
        if objects.len() >= limits.max_objects {
            return None;
        }
        objects.push(direct_tensor(&mut cbor, limits)?);
    }
    cbor.at_end().then_some(Manifest {
        version: Version::V0_1,
        version_string: None,
        attributes: None,
        objects,
        extra: Vec::new(),
    })
}

/// One tensor map of [`decode_direct`], at nesting depth 2.
fn direct_tensor(cbor: &mut Decoder<'_>, limits: &Limits) -> Option<Object> {
    // Past this many keys the map is left to the general decoder, rather than check each new
    // key against all before it (a tensor map has ten standard keys and a few custom ones).
    const MOST_KEYS: usize = 64;
    if cbor.max_depth() < 2 {
        return None;
    }
    let at = cbor.pos();
    let Ok(Head::Map(declared)) = cbor.head() else { return None };
    let declared = match declared {
        Some(n) => Some(cbor.count(at, n, 2).ok()?),
        None => None,
    };
    let mut fields: BTreeMap<&'static str, Value> = BTreeMap::new();
    let mut custom = Custom::new();
    let mut keys: Vec<&str> = Vec::new();
    loop {
        if declared == Some(keys.len()) || (declared.is_none() && cbor.at_break().ok()?) {
            break;
        }
        let key = cbor.borrowed_text()?;
        if keys.len() >= MOST_KEYS || keys.contains(&key) {
            return None;
        }
        keys.push(key);
        match STANDARD_KEYS.iter().find(|k| **k == key) {
            Some(k) => {
                fields.insert(k, cbor.item(3).ok()?);
            }
            None => {
                custom.key(key);
                cbor.canonical(3, &mut custom.map).ok()?;
            }
        }
    }
    tensor_of(fields, custom, limits).ok()
}

/// The manifest's CBOR, deterministic (RFC 8949 §4.2.1), encoded tensor by tensor into `out`.
pub(crate) fn encode(manifest: &Manifest, out: &mut crate::cbor::Blocks<'_>) -> Result<()> {
    check_root(manifest)?;
    crate::manifest::name_order(&manifest.objects)?;
    encode_with(manifest.objects.len(), out, |out| {
        for object in &manifest.objects {
            tensor_into(object, &mut out.buf).map_err(|e| e.in_object(&object.name))?;
            out.maybe_flush()?;
        }
        Ok(())
    })
}

/// Refuses what a v0.1 manifest has no place for in `manifest`'s root (its objects aside).
pub(crate) fn check_root(manifest: &Manifest) -> Result<()> {
    let unrepresentable =
        |what: &str| Error::new(ErrorKind::Unrepresentable, format!("v0.1 cannot express {what}"));
    if manifest.attributes.is_some() {
        return Err(unrepresentable("file attributes").refusing(crate::Refused::FileAttributes));
    }
    if !manifest.extra.is_empty() || manifest.version_string.is_some() {
        return Err(unrepresentable("a version string or extra root keys"));
    }
    Ok(())
}

/// Encodes a manifest of `count` tensors that `tensors` writes, in order.
pub(crate) fn encode_with(
    count: usize,
    out: &mut crate::cbor::Blocks<'_>,
    tensors: impl FnOnce(&mut crate::cbor::Blocks<'_>) -> Result<()>,
) -> Result<()> {
    crate::cbor::array_head(&mut out.buf, count as u64);
    tensors(out)
}

/// Appends `object`'s tensor map, as the manifest array holds it, to `out`.
pub(crate) fn tensor_into(object: &Object, out: &mut Vec<u8>) -> Result<()> {
    let mut entries = Vec::new();
    for (key, value) in tensor_value(object)? {
        entries.push((crate::cbor::encode(&key)?, Entry::Value(value)));
    }
    if let Some(attributes) = &object.attributes {
        let unrepresentable = |what: String| {
            Error::new(ErrorKind::Unrepresentable, format!("v0.1 cannot express {what}"))
        };
        for (key, value) in attributes.entries() {
            let Some(k) = key.as_text() else {
                return Err(unrepresentable("a custom field whose key is not text".into()));
            };
            // `sparse_format` is kept as a custom field unless it completes `layout: "sparse"`.
            if STANDARD_KEYS.contains(&k) && k != "sparse_format" {
                return Err(unrepresentable(format!(
                    "a custom field named {k:?}, which v0.1 defines"
                )));
            }
            entries.push((key.as_bytes().to_vec(), Entry::Encoded(value.as_bytes())));
        }
    }
    crate::cbor::encode_map_into(entries, out)
}

/// Decodes a tensor map that [`tensor_into`] encoded.
pub(crate) fn tensor_from(bytes: &[u8], limits: &Limits) -> Result<Object> {
    let value =
        crate::cbor::decode_bounded(bytes, limits.max_cbor_depth, limits.max_manifest_values)?;
    tensor(value, limits)
}

/// The standard fields of `object`'s tensor map (its custom fields aside).
fn tensor_value(object: &Object) -> Result<Vec<(Value, Value)>> {
    let unrepresentable = |what: String| {
        Error::new(ErrorKind::Unrepresentable, format!("v0.1 cannot express {what}"))
    };
    let layout = match (&object.format, object.packing) {
        (Format::Dense, Packing::Split) => "dense",
        (Format::SparseCsr, Packing::V0Single) => "sparsecsr",
        (Format::SparseCoo, Packing::V0Single) => "sparsecoo",
        (Format::Unknown(layout), Packing::V0Single) => &**layout,
        (format, _) => {
            return Err(unrepresentable(format!(
                "a {format} object in this packing; convert it first"
            )));
        }
    };
    if !object.extra().is_empty() {
        return Err(unrepresentable("extra object keys".into()));
    }
    let (Some(c), 1) = (object.components.get(DATA_ROLE), object.components.len()) else {
        return Err(unrepresentable(
            "an object whose components are not exactly one `data` blob".into(),
        ));
    };
    if let Some(t) = &c.logical_type {
        return Err(unrepresentable(format!("logical type {t}")));
    }
    if c.uncompressed_length.is_some() {
        return Err(unrepresentable("uncompressed_length".into()));
    }
    if !c.extra().is_empty() {
        return Err(unrepresentable("extra component keys".into()));
    }
    let dtype = match &c.dtype {
        StorageType::Known(d) => d.v0_name().to_owned(),
        StorageType::Unknown(s) => s.to_string(),
    };
    let mut map = vec![
        (Value::from("name"), Value::Text(object.name.clone())),
        (Value::from("offset"), Value::from(c.offset)),
        (Value::from("size"), Value::from(c.length)),
        (Value::from("dtype"), Value::Text(dtype)),
        (
            Value::from("shape"),
            Value::Array(object.shape.iter().map(|&d| Value::from(d)).collect()),
        ),
        (Value::from("encoding"), Value::from(c.encoding.name())),
        (Value::from("layout"), Value::from(layout)),
    ];
    // Like the reference writer, state the byte order of raw multi-byte data explicitly.
    let multi_byte = c.dtype.known().is_some_and(|d| d.size() > 1);
    match c.byte_order() {
        ByteOrder::Little if c.encoding == Encoding::Raw && multi_byte => {
            map.push((Value::from("data_endianness"), Value::from("little")));
        }
        ByteOrder::Little => {}
        ByteOrder::Big => map.push((Value::from("data_endianness"), Value::from("big"))),
        ByteOrder::Unknown(s) => {
            map.push((Value::from("data_endianness"), Value::Text(s.to_string())));
        }
    }
    if let Some(d) = &c.digest {
        map.push((Value::from("checksum"), Value::Text(d.to_string())));
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framing::Container;

    /// Every v0.1 file in the fixtures, the reference writer's among them (indefinite-length
    /// maps, custom fields): the direct decoder reads each manifest the general decoder reads,
    /// and reads it the same.
    #[test]
    fn the_direct_decoder_reads_the_files_writers_wrote() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
        let mut direct = 0;
        for dir in ["v0.1/valid", "producers/v0.1/reference-0.1.0"] {
            for entry in std::fs::read_dir(root.join(dir)).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_none_or(|e| e != "zt") {
                    continue;
                }
                let file = std::fs::read(&path).unwrap();
                let limits = Limits::default();
                let trailer = usize::try_from(Container::V0_1.trailer_len()).unwrap();
                let tail = &file[file.len() - trailer..];
                let location = Container::V0_1.locate_manifest(file.len() as u64, tail, &limits);
                let Ok(location) = location else { continue };
                let start = usize::try_from(location.offset).unwrap();
                let bytes = &file[start..start + usize::try_from(location.len).unwrap()];
                let Ok(general) = Manifest::decode_general(Container::V0_1, bytes, &limits) else {
                    continue;
                };
                let read = decode_direct(bytes, &limits);
                assert_eq!(read.as_ref(), Some(&general), "{}", path.display());
                direct += 1;
            }
        }
        assert!(direct >= 30, "{direct} files");
    }
}
