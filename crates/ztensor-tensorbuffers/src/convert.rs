//! Conversion between TensorBuffers and every zTensor version.
//!
//! TensorBuffers → zTensor writes each tensor as a dense object, in file order, and keeps what
//! zTensor has no field for as file attributes: `tensorbuffers.version` (when not `"1.0.0"`),
//! `tensorbuffers.model`, `tensorbuffers.operations` (when present and not empty; `null` when the
//! field was absent), and `tensorbuffers.order` (the tensor order, when zero-size tensors make
//! blob offsets ambiguous). Going back restores them, so TensorBuffers → zTensor 1.2 →
//! TensorBuffers reproduces the original bytes.

use std::io::Write;

use ztensor_format::{Encoding, Format, Packing, Value, Version, text_map};
use ztensor_io::{ReadAt, Reader, WriteOptions, Writer, role};

use crate::error::{Error, ErrorKind, Result};
use crate::read::TbReader;
use crate::schema::{DataType, Operation};
use crate::write::TbWriter;

/// Copies every tensor of a TensorBuffers file into a zTensor writer.
///
/// # Errors
/// [`ErrorKind::Unrepresentable`] when the target is v0.1 and the file carries metadata v0.1 has
/// no place for (a model, operations, a version other than 1.0.0); the writer's errors.
pub fn to_ztensor<S: ReadAt, W: Write>(
    tb: &TbReader<S>,
    writer: &mut Writer<W>,
    options: &WriteOptions,
) -> Result<()> {
    let meta = tb.metadata();
    let mut attributes = Vec::new();
    if meta.version != "1.0.0" {
        attributes.push(("tensorbuffers.version", Value::from(meta.version.clone())));
    }
    if let Some(model) = &meta.model {
        attributes.push(("tensorbuffers.model", Value::from(model.clone())));
    }
    match &meta.operations {
        None => attributes.push(("tensorbuffers.operations", Value::Null)),
        Some(ops) if !ops.is_empty() => attributes.push((
            "tensorbuffers.operations",
            Value::Array(ops.iter().map(op_to_value).collect()),
        )),
        Some(_) => {}
    }
    if meta.tensors.iter().any(|t| t.data_size == 0) {
        let names = meta.tensors.iter().map(|t| Value::from(t.name.clone())).collect();
        attributes.push(("tensorbuffers.order", Value::Array(names)));
    }
    if !attributes.is_empty() {
        if writer.version() == Version::V0_1 {
            let what: Vec<&str> = attributes.iter().map(|(k, _)| *k).collect();
            return Err(Error::new(
                ErrorKind::Unrepresentable,
                format!("zTensor 0.1 has no file attributes to keep {}", what.join(", ")),
            ));
        }
        writer.set_attributes(text_map(attributes))?;
    }
    for t in &meta.tensors {
        let data = tb.data(&t.name)?;
        let shape: Vec<u64> = t.shape.iter().map(|&d| u64::from(d)).collect();
        writer.add_dense(&t.name, &shape, t.data_type.dtype(), &data, options)?;
    }
    Ok(())
}

fn op_to_value(op: &Operation) -> Value {
    text_map([
        ("id", Value::from(op.id)),
        ("operation", Value::Integer(i128::from(op.operation))),
        ("output", Value::from(op.output)),
        (
            "input_operations",
            Value::Array(op.input_operations.iter().map(|&i| Value::from(i)).collect()),
        ),
    ])
}

fn op_from_value(v: &Value) -> Option<Operation> {
    let get =
        |key: &str| v.as_map()?.iter().find(|(k, _)| k.as_text() == Some(key)).map(|(_, v)| v);
    Some(Operation {
        id: get("id")?.as_u64()?,
        operation: match get("operation")? {
            &Value::Integer(i) => i8::try_from(i).ok()?,
            _ => return None,
        },
        output: get("output")?.as_u64()?,
        input_operations: get("input_operations")?
            .as_array()?
            .iter()
            .map(Value::as_u64)
            .collect::<Option<Vec<u64>>>()?,
    })
}

/// Copies every object of a zTensor file (any version) into a TensorBuffers writer.
///
/// # Errors
/// [`ErrorKind::Unrepresentable`], naming the object, for what TensorBuffers cannot hold:
/// non-dense objects, bool/f16/bf16 data, logical types (FP8, complex), objects of unknown
/// encoding; and, unless `drop_attributes`, attributes other than the `tensorbuffers.*` ones.
/// Compressed data is decoded first.
pub fn from_ztensor<S: ReadAt, W: Write>(
    reader: &Reader<S>,
    tb: &mut TbWriter<W>,
    drop_attributes: bool,
) -> Result<()> {
    let manifest = reader.manifest().manifest();
    let refuse =
        |name: &str, what: String| Error::new(ErrorKind::Unrepresentable, what).tensor(name);
    let mut order: Option<Vec<String>> = None;
    if let Some(Value::Map(entries)) = &manifest.attributes {
        for (key, value) in entries {
            match (key.as_text(), value) {
                (Some("tensorbuffers.version"), Value::Text(v)) => tb.set_version(v.clone()),
                (Some("tensorbuffers.model"), Value::Text(m)) => tb.set_model(Some(m.clone())),
                (Some("tensorbuffers.operations"), Value::Null) => tb.set_operations(None),
                (Some("tensorbuffers.operations"), Value::Array(ops)) => {
                    let ops = ops.iter().map(op_from_value).collect::<Option<Vec<_>>>();
                    let ops = ops.ok_or_else(|| {
                        Error::new(
                            ErrorKind::Unrepresentable,
                            "tensorbuffers.operations is malformed",
                        )
                    })?;
                    tb.set_operations(Some(ops));
                }
                (Some("tensorbuffers.order"), Value::Array(names)) => {
                    order = names.iter().map(|n| n.as_text().map(str::to_owned)).collect();
                }
                (k, _) if !drop_attributes => {
                    let k = k.map_or_else(|| key.to_string(), str::to_owned);
                    return Err(Error::new(
                        ErrorKind::Unrepresentable,
                        format!(
                            "TensorBuffers has no file attributes (found {k:?}); drop them explicitly to convert"
                        ),
                    ));
                }
                _ => {}
            }
        }
    }
    // File order: as recorded, else by where each object's data lies.
    let mut objects: Vec<_> = reader.objects().collect();
    let recorded = order.filter(|o| {
        let mut a: Vec<&str> = o.iter().map(String::as_str).collect();
        let mut b: Vec<&str> = objects.iter().map(|x| x.name()).collect();
        a.sort_unstable();
        b.sort_unstable();
        a == b
    });
    match recorded {
        Some(o) => objects.sort_by_key(|x| o.iter().position(|n| n == x.name())),
        None => objects.sort_by(|a, b| {
            let key = |o: &ztensor_io::Object<'_, S>| {
                o.model().components.values().map(|c| c.offset).min().unwrap_or(0)
            };
            key(a).cmp(&key(b)).then_with(|| a.name().cmp(b.name()))
        }),
    }
    for object in objects {
        let (name, o) = (object.name(), object.model());
        if o.format != Format::Dense || o.packing != Packing::Split {
            return Err(refuse(
                name,
                format!("TensorBuffers holds dense tensors only, not {}", o.format),
            ));
        }
        if o.attributes.is_some() && !drop_attributes {
            return Err(refuse(
                name,
                "TensorBuffers has no object attributes; drop them explicitly to convert".into(),
            ));
        }
        let Some(c) = o.components.get(role::DATA) else {
            return Err(refuse(name, "dense object without data".into()));
        };
        if let Some(t) = &c.logical_type {
            return Err(refuse(name, format!("TensorBuffers has no logical type {t}")));
        }
        if let Encoding::Unknown(e) = &c.encoding {
            return Err(refuse(name, format!("unknown encoding {e}")));
        }
        let dtype =
            c.dtype.known().ok_or_else(|| refuse(name, format!("unknown dtype {}", c.dtype)))?;
        let data_type = DataType::from_dtype(dtype)
            .ok_or_else(|| refuse(name, format!("TensorBuffers has no {dtype} type")))?;
        // TensorBuffers keeps no digest: check ours on the bytes converted.
        let data = object.component(role::DATA)?.decoded_verified()?;
        tb.add(name, data_type, &o.shape, &data)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_survive_attribute_form() {
        let op = Operation { id: 7, operation: -3, output: 9, input_operations: vec![1, 2] };
        assert_eq!(op_from_value(&op_to_value(&op)), Some(op));
        assert_eq!(op_from_value(&Value::from(1u64)), None);
    }
}
