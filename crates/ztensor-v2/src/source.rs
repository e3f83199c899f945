//! A zTensor 2 file as a [`TensorSource`]: its objects in the 1.2 object model, so that every
//! command, the engine and the Python package read it as they read any other input.
//!
//! `dense` objects map one to one (a `data` component; `bool` becomes the 1.2 `bool` type,
//! the FP8 and complex logical types keep their names; packed FP4 and E8M0 have no 1.2 form
//! yet). Other layouts, encodings this
//! reader does not decode and parts in shards are listed, with the reason they cannot be read.

use std::borrow::Cow;
use std::collections::BTreeMap;

use ztensor_format::{
    Attributes, DType, Encoding, ErrorKind as Rule1, Format, LogicalType, StorageType,
};
use ztensor_io::{ComponentData, ComponentInfo, ObjectData, ObjectInfo, ReadAt, TensorSource};

use crate::cbor::Value;
use crate::error::ErrorKind;
use crate::file::File;
use crate::manifest::{Dtype, Object, Part};

/// An object's storage and logical types in the 1.2 model.
fn types_of(part: &Part) -> (DType, Option<LogicalType>) {
    let dtype = match part.dtype {
        Dtype::F64 => DType::F64,
        Dtype::F32 => DType::F32,
        Dtype::F16 => DType::F16,
        Dtype::Bf16 => DType::BF16,
        Dtype::I64 => DType::I64,
        Dtype::I32 => DType::I32,
        Dtype::I16 => DType::I16,
        Dtype::I8 => DType::I8,
        Dtype::U64 => DType::U64,
        Dtype::U32 => DType::U32,
        Dtype::U16 => DType::U16,
        Dtype::U8 => DType::U8,
    };
    match part.logical.as_deref() {
        None => (dtype, None),
        Some("bool") => (DType::Bool, None),
        Some(name) => (dtype, Some(LogicalType::from_name(name))),
    }
}

/// Why object `o` cannot be read into the 1.2 model here, if it cannot.
fn unsupported(name: &str, o: &Object) -> Option<ztensor_format::Error> {
    let reason = |rule: Rule1, m: String| Some(ztensor_format::Error::new(rule, m).in_object(name));
    if o.layout != "dense" {
        return reason(
            Rule1::LayoutUnknown,
            format!("layout {:?} is not read into the 1.2 model yet (only dense is)", o.layout),
        );
    }
    let data = o.parts.get("data")?;
    if let Some(shard) = &data.shard {
        return reason(
            Rule1::InvalidInput,
            format!("its data is in shard {shard:?}, which is not resolved"),
        );
    }
    match data.encoding.as_deref() {
        None | Some("zt.zstd-seekable/1") => {}
        Some(other) => {
            return reason(
                Rule1::EncodingUnknown,
                format!("encoding {other:?} is not one this reader decodes"),
            );
        }
    }
    match data.logical.as_deref() {
        Some("f8_e8m0") => {
            return reason(
                Rule1::LogicalTypeMismatch,
                "f8_e8m0 has no type in the 1.2 model".into(),
            );
        }
        Some("f4_e2m1") => {
            return reason(
                Rule1::LogicalTypeMismatch,
                "f4_e2m1 packs two values per byte, and the 1.2 model holds one per byte".into(),
            );
        }
        _ => {}
    }
    None
}

/// A v2 attribute value in the 1.2 model's CBOR value tree.
fn value(v: &Value) -> ztensor_format::Value {
    use ztensor_format::Value as V;
    match v {
        Value::Uint(n) => V::Integer(i128::from(*n)),
        Value::Nint(n) => V::Integer(-1 - i128::from(*n)),
        Value::Bytes(b) => V::Bytes(b.clone()),
        Value::Text(t) => V::Text(t.clone()),
        Value::Array(items) => V::Array(items.iter().map(value).collect()),
        Value::Map(entries) => V::Map(entries.iter().map(|(k, v)| (value(k), value(v))).collect()),
        Value::Bool(b) => V::Bool(*b),
        Value::Null => V::Null,
        Value::Float(f) => V::Float(*f),
    }
}

fn attributes(v: Option<&Value>) -> Option<Attributes> {
    // The manifest's rules made it a map of the permitted items: it converts.
    v.and_then(|v| Attributes::try_from(value(v)).ok())
}

/// How a v2 error reaches the 1.2 interface: a refusal is `Unsupported`, a broken rule the
/// nearest 1.x rule (the message names the v2 one), I/O as I/O.
fn to_io(name: &str, e: crate::Error) -> ztensor_io::Error {
    let message = e.to_string();
    match e.kind() {
        ErrorKind::Io(_) => ztensor_io::Error::io(message, None, std::io::Error::other(e)),
        ErrorKind::Unsupported => ztensor_io::Error::unsupported(
            ztensor_format::Error::new(Rule1::EncodingUnknown, message).in_object(name),
        ),
        ErrorKind::Rule(rule) => {
            let nearest = match rule {
                crate::Rule::Digest => Rule1::DigestMismatch,
                crate::Rule::LayoutData => Rule1::BoolInvalid,
                _ => Rule1::DecodeFailed,
            };
            ztensor_io::Error::from(ztensor_format::Error::new(nearest, message).in_object(name))
        }
    }
}

impl<S: ReadAt> File<S> {
    fn object_at(&self, index: usize) -> Option<(&String, &Object)> {
        self.manifest()?.objects.get_key_value(self.names.get(index)?)
    }
}

impl<S: ReadAt> TensorSource for File<S> {
    fn format_name(&self) -> Cow<'_, str> {
        Cow::Borrowed("zTensor 2")
    }

    fn attributes(&self) -> Option<Cow<'_, Attributes>> {
        attributes(self.manifest()?.attributes.as_ref()).map(Cow::Owned)
    }

    fn len(&self) -> usize {
        self.manifest().map_or(0, |m| m.objects.len())
    }

    fn info(&self, index: usize) -> Option<ObjectInfo<'_>> {
        let (name, o) = self.object_at(index)?;
        let components = o
            .parts
            .iter()
            .map(|(role, p)| {
                let (dtype, logical_type) = types_of(p);
                ComponentInfo {
                    role: Cow::Borrowed(role.as_str()),
                    dtype: StorageType::Known(dtype),
                    logical_type,
                    decoded_len: Some(p.decoded_len()),
                    stored_len: p.blob.1,
                    offset: p.shard.is_none().then_some(p.blob.0),
                    encoding: if p.encoding.is_some() { Encoding::Zstd } else { Encoding::Raw },
                    digest: None,
                }
            })
            .collect();
        Some(ObjectInfo {
            name: Cow::Borrowed(name.as_str()),
            shape: Cow::Borrowed(o.shape.as_slice()),
            format: Format::Dense,
            attributes: attributes(o.attributes.as_ref()).map(Cow::Owned),
            components,
            unsupported: unsupported(name, o),
            location: None,
        })
    }

    fn read(&self, index: usize) -> ztensor_io::Result<ObjectData<'_>> {
        let (name, o) = self
            .object_at(index)
            .ok_or_else(|| ztensor_io::Error::not_found(&format!("#{index}"), None))?;
        if let Some(reason) = unsupported(name, o) {
            return Err(ztensor_io::Error::unsupported(reason));
        }
        // Digests and the logical type's rules checked on the bytes that are returned.
        let (bytes, _) = self.verified(name, "data").map_err(|e| to_io(name, e))?;
        let (dtype, logical_type) = types_of(&o.parts["data"]);
        let mut components = BTreeMap::new();
        components.insert(
            "data".to_owned(),
            ComponentData { dtype, logical_type, bytes: Cow::Owned(bytes) },
        );
        Ok(ObjectData {
            name: name.clone(),
            shape: o.shape.clone(),
            format: Format::Dense,
            attributes: attributes(o.attributes.as_ref()).map(Cow::Owned),
            components,
        })
    }
}
