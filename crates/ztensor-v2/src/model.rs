//! Between the 1.2 object model (what every reader of this workspace gives) and zTensor 2's
//! objects: layouts, storage and logical types, attribute values. Both directions are here, so
//! that a conversion and its way back are one table read two ways.
//!
//! | 1.2 | zTensor 2 |
//! |---|---|
//! | `dense` | `dense` |
//! | `sparse_csr` (u64 indices) | `zt.sparse_csr/1` |
//! | `sparse_coo` (u64 coordinates, structure of arrays) | `zt.sparse_coo/1` |
//! | `quantized_group`, and any format with no zTensor 2 layout (`F`) | `ztensor1.F/1`, read structurally |
//! | a format spelled as a namespaced id (`zt.mx/1`, `gguf.q4_0/1`, `x.custom/1`) | the same id |
//! | `bool` | `u8` with logical type `bool` |
//! | a logical type (`f8_e4m3fn`, `complex64`, …) | the same `type`, on the storage type it pins |
//!
//! 1.x `quantized_group` is not `zt.quant_group/1`: the latter's attributes fix an axis, a packing
//! order, a scale form and a zero-point form that a 1.x file does not record, and guessing them
//! would change what the numbers mean. It travels under this project's own namespace instead,
//! which zTensor 2 readers expose structurally (shape, attributes, parts) and this one turns
//! back into `quantized_group`.

use ztensor_format::{Attributes, DType, Format, LogicalType, Refused, ValueRef};

use crate::cbor::{MAX_DEPTH, Value};
use crate::error::{Error, Result};
use crate::manifest::{Dtype, MAX_NAME, Part, logical};

/// The namespace under which 1.x formats with no zTensor 2 layout travel (`ztensor1.F/1`).
pub const CARRIED: &str = "ztensor1.";

/// The zTensor 2 layout id of a 1.x format.
pub fn layout_of(format: &Format) -> String {
    match format {
        Format::Dense => "dense".to_owned(),
        Format::SparseCsr => "zt.sparse_csr/1".to_owned(),
        Format::SparseCoo => "zt.sparse_coo/1".to_owned(),
        // Already a zTensor 2 id (what reading a zTensor 2 file gave): as it is.
        Format::Unknown(s) if is_namespaced(s) => s.to_string(),
        other => format!("{CARRIED}{}/1", other.name()),
    }
}

/// The 1.x format of a zTensor 2 layout id (the way back of [`layout_of`]).
pub fn format_of(layout: &str) -> Format {
    match layout {
        "dense" => Format::Dense,
        "zt.sparse_csr/1" => Format::SparseCsr,
        "zt.sparse_coo/1" => Format::SparseCoo,
        other => match other.strip_prefix(CARRIED).and_then(|f| f.strip_suffix("/1")) {
            Some(carried) if !carried.is_empty() => Format::from_name(carried),
            _ => Format::Unknown(other.into()),
        },
    }
}

/// Whether `id` reads as a zTensor 2 registry id: a namespace, a dot, a name, `/` and a
/// version (`zt.mx/1`, `gguf.q4_k/1`, `x.custom/1`).
fn is_namespaced(id: &str) -> bool {
    let Some((name, version)) = id.rsplit_once('/') else { return false };
    !version.is_empty()
        && version.bytes().all(|b| b.is_ascii_digit())
        && name.split_once('.').is_some_and(|(ns, rest)| !ns.is_empty() && !rest.is_empty())
}

/// A zTensor 2 storage type in the 1.2 model.
pub fn dtype_1x(dtype: Dtype) -> DType {
    match dtype {
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
    }
}

/// A part's storage and logical types in the 1.2 model: `u8` + `bool` is the 1.x `bool` type;
/// any other logical type keeps its name.
pub fn types_1x(part: &Part) -> (DType, Option<LogicalType>) {
    let dtype = dtype_1x(part.dtype);
    match part.logical.as_deref() {
        None => (dtype, None),
        Some("bool") => (DType::Bool, None),
        Some(name) => (dtype, Some(LogicalType::from_name(name))),
    }
}

/// A 1.x storage and logical type as a zTensor 2 part's `dtype` and `type`.
///
/// # Errors
/// Unrepresentable: a logical type on `bool`, or a logical type zTensor 2 registers on another
/// storage type.
pub fn types_2(
    dtype: DType,
    logical_type: Option<&LogicalType>,
) -> Result<(Dtype, Option<String>)> {
    let plain = match dtype {
        DType::F64 => Dtype::F64,
        DType::F32 => Dtype::F32,
        DType::F16 => Dtype::F16,
        DType::BF16 => Dtype::Bf16,
        DType::I64 => Dtype::I64,
        DType::I32 => Dtype::I32,
        DType::I16 => Dtype::I16,
        DType::I8 => Dtype::I8,
        DType::U64 => Dtype::U64,
        DType::U32 => Dtype::U32,
        DType::U16 => Dtype::U16,
        DType::U8 => Dtype::U8,
        DType::Bool => {
            if let Some(t) = logical_type {
                return Err(Error::unrepresentable(
                    Refused::Dtype,
                    format!("logical type {:?} on bool has no zTensor 2 form", t.name()),
                ));
            }
            return Ok((Dtype::U8, Some("bool".to_owned())));
        }
    };
    let Some(t) = logical_type else { return Ok((plain, None)) };
    let name = t.name();
    if let Some((pinned, _)) = logical(name)
        && pinned != plain
    {
        return Err(Error::unrepresentable(
            Refused::Dtype,
            format!(
                "logical type {name:?} is stored as {} in zTensor 2, and this is {}",
                pinned.name(),
                plain.name()
            ),
        ));
    }
    Ok((plain, Some(name.to_owned())))
}

/// How many bytes `n` elements of `dtype` with logical type `logical` take in zTensor 2, when
/// the registry says (`None` for a logical type it does not hold).
pub fn stored_size(dtype: Dtype, logical_type: Option<&str>, n: u64) -> Option<u64> {
    match logical_type {
        Some(name) => logical(name).and_then(|(_, size)| size(n)),
        None => n.checked_mul(dtype.width()),
    }
}

/// A zTensor 2 manifest value in the 1.2 model's value tree.
pub fn value_1x(v: &Value) -> ztensor_format::Value {
    use ztensor_format::Value as V;
    match v {
        Value::Uint(n) => V::Integer(i128::from(*n)),
        Value::Nint(n) => V::Integer(-1 - i128::from(*n)),
        Value::Bytes(b) => V::Bytes(b.clone()),
        Value::Text(t) => V::Text(t.clone()),
        Value::Array(items) => V::Array(items.iter().map(value_1x).collect()),
        Value::Map(entries) => {
            V::Map(entries.iter().map(|(k, v)| (value_1x(k), value_1x(v))).collect())
        }
        Value::Bool(b) => V::Bool(*b),
        Value::Null => V::Null,
        Value::Float(f) => V::Float(*f),
    }
}

/// A 1.2 value as a zTensor 2 manifest value, `depth` levels below the manifest's root.
///
/// # Errors
/// Unrepresentable: tags, `undefined` and other simple values (the manifest permits none), a
/// map with a key given twice, nesting past the manifest's limit.
pub fn value_2(v: &ztensor_format::Value, depth: usize, refused: Refused) -> Result<Value> {
    use ztensor_format::Value as V;
    let no = |what: &str| {
        Err(Error::unrepresentable(refused, format!("{what} has no place in a zTensor 2 manifest")))
    };
    if depth > MAX_DEPTH {
        return no(&format!("a value nested deeper than {MAX_DEPTH} levels"));
    }
    Ok(match v {
        V::Integer(i) => match u64::try_from(*i) {
            Ok(n) => Value::Uint(n),
            // CBOR's range: −1 − n for n up to 2⁶⁴ − 1.
            Err(_) => match u64::try_from(-1 - *i) {
                Ok(n) => Value::Nint(n),
                Err(_) => return no(&format!("the integer {i}")),
            },
        },
        V::Bytes(b) => Value::Bytes(b.clone()),
        V::Text(t) => Value::Text(t.clone()),
        V::Array(items) => Value::Array(
            items.iter().map(|i| value_2(i, depth + 1, refused)).collect::<Result<_>>()?,
        ),
        V::Map(entries) => {
            let mut out = Vec::with_capacity(entries.len());
            let mut keys = std::collections::HashSet::with_capacity(entries.len());
            for (k, v) in entries {
                let key = value_2(k, depth + 1, refused)?;
                if !keys.insert(crate::cbor::encode(&key)) {
                    return no("a map with a key given twice");
                }
                out.push((key, value_2(v, depth + 1, refused)?));
            }
            Value::Map(out)
        }
        V::Bool(b) => Value::Bool(*b),
        V::Null => Value::Null,
        V::Float(f) => Value::Float(*f),
        V::Tag(tag, _) => return no(&format!("a value with CBOR tag {tag}")),
        V::Undefined => return no("`undefined`"),
        V::Simple(n) => return no(&format!("the CBOR simple value {n}")),
    })
}

/// 1.2 attributes as a zTensor 2 `attributes` map whose values sit `depth` levels below the
/// manifest's root (2 for the file's, 4 for an object's); `None` for an empty map (zTensor 2
/// writers leave empty maps out).
///
/// # Errors
/// Unrepresentable: a key that is not text or breaks the name rules (empty, longer than 1024
/// bytes, holding U+0000), and what [`value_2`] refuses.
pub fn attributes_2(a: &Attributes, depth: usize, refused: Refused) -> Result<Option<Value>> {
    let value = a.to_value();
    let ztensor_format::Value::Map(entries) = &value else {
        return Err(Error::unrepresentable(refused, "attributes that are not a map"));
    };
    if entries.is_empty() {
        return Ok(None);
    }
    for (k, _) in entries {
        let ok =
            k.as_text().is_some_and(|k| !k.is_empty() && k.len() <= MAX_NAME && !k.contains('\0'));
        if !ok {
            return Err(Error::unrepresentable(
                refused,
                format!(
                    "attribute key {} is not a name zTensor 2 allows (text, 1 to {MAX_NAME} \
                     bytes, no U+0000)",
                    ztensor_format::Value::to_string(k)
                ),
            ));
        }
    }
    value_2(&value, depth - 1, refused).map(Some)
}

/// [`attributes_2`] without a tree: the attributes' own encoding, which is already the one a
/// zTensor 2 manifest holds (deterministic CBOR, RFC 8949 §4.2.1, for both), once every item is
/// checked to be one the manifest permits, in the order and with the refusals of
/// [`attributes_2`]. A writer copies these bytes into the manifest: an attribute array of
/// millions of items costs what its bytes do, not a tree several times their size.
///
/// # Errors
/// As [`attributes_2`].
pub fn attributes_2_encoded(
    a: &Attributes,
    depth: usize,
    refused: Refused,
) -> Result<Option<&[u8]>> {
    if a.is_empty() {
        return Ok(None);
    }
    for (k, _) in a.entries() {
        let ok =
            k.as_text().is_some_and(|k| !k.is_empty() && k.len() <= MAX_NAME && !k.contains('\0'));
        if !ok {
            return Err(Error::unrepresentable(
                refused,
                format!(
                    "attribute key {k} is not a name zTensor 2 allows (text, 1 to {MAX_NAME} \
                     bytes, no U+0000)"
                ),
            ));
        }
    }
    permitted(a.root(), depth - 1, refused)?;
    Ok(Some(a.as_bytes()))
}

/// Checks that the item `v`, `depth` levels below the manifest's root, and everything in it are
/// what [`value_2`] converts (the same refusals, in the same order).
fn permitted(v: ValueRef<'_>, depth: usize, refused: Refused) -> Result<()> {
    use ztensor_format::attributes::Item;
    let no = |what: &str| {
        Err(Error::unrepresentable(refused, format!("{what} has no place in a zTensor 2 manifest")))
    };
    if depth > MAX_DEPTH {
        return no(&format!("a value nested deeper than {MAX_DEPTH} levels"));
    }
    match v.item() {
        // CBOR's range, which deterministic CBOR never leaves.
        Item::Integer(i) if u64::try_from(i).is_err() && u64::try_from(-1 - i).is_err() => {
            no(&format!("the integer {i}"))
        }
        Item::Array(items) => items.into_iter().try_for_each(|i| permitted(i, depth + 1, refused)),
        // Attributes never repeat a key.
        Item::Map(entries) => entries.into_iter().try_for_each(|(k, v)| {
            permitted(k, depth + 1, refused)?;
            permitted(v, depth + 1, refused)
        }),
        Item::Tag(tag, _) => no(&format!("a value with CBOR tag {tag}")),
        Item::Undefined => no("`undefined`"),
        Item::Simple(n) => no(&format!("the CBOR simple value {n}")),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cbor::encode;

    #[test]
    fn layouts_go_there_and_back() {
        for format in [
            Format::Dense,
            Format::SparseCsr,
            Format::SparseCoo,
            Format::QuantizedGroup,
            Format::Unknown("blocked_sparse".into()),
            Format::Unknown("zt.mx/1".into()),
            Format::Unknown("x.custom/2".into()),
        ] {
            assert_eq!(format_of(&layout_of(&format)), format, "{format}");
        }
        assert_eq!(layout_of(&Format::QuantizedGroup), "ztensor1.quantized_group/1");
        assert_eq!(layout_of(&Format::Unknown("a/b".into())), "ztensor1.a/b/1");
        assert_eq!(format_of("ztensor1.a/b/1"), Format::Unknown("a/b".into()));
        assert_eq!(format_of("ztensor1./1"), Format::Unknown("ztensor1./1".into()));
    }

    #[test]
    fn types_go_there_and_back() {
        let part = |dtype, logical: Option<String>| Part {
            dtype,
            logical: logical.map(Into::into),
            blob: (4096, 0),
            shard: None,
            encoding: None,
            decoded_length: None,
            digest: None,
        };
        for dtype in DType::ALL {
            let (d2, l2) = types_2(dtype, None).unwrap();
            assert_eq!(types_1x(&part(d2, l2)), (dtype, None));
        }
        for (dtype, t) in [
            (DType::U8, LogicalType::F8E4M3Fn),
            (DType::U8, LogicalType::F8E5M2Fnuz),
            (DType::F32, LogicalType::Complex64),
            (DType::F64, LogicalType::Complex128),
            (DType::I16, LogicalType::Unknown("x.q/1".into())),
        ] {
            let (d2, l2) = types_2(dtype, Some(&t)).unwrap();
            assert_eq!(types_1x(&part(d2, l2)), (dtype, Some(t)));
        }
        // Registered in zTensor 2 on another storage type.
        assert!(types_2(DType::F32, Some(&LogicalType::Complex128)).is_err());
        assert!(types_2(DType::I8, Some(&LogicalType::Unknown("f8_e8m0".into()))).is_err());
        assert!(types_2(DType::Bool, Some(&LogicalType::F8E5M2)).is_err());
    }

    #[test]
    fn values_and_attributes() {
        use ztensor_format::Value as V;
        let tree = V::Map(vec![
            (V::Text("n".into()), V::Integer(-(1i128 << 64))),
            (V::Text("u".into()), V::Integer(i128::from(u64::MAX))),
            (V::Text("f".into()), V::Float(0.1)),
            (V::Text("x".into()), V::Array(vec![V::Bytes(vec![1]), V::Null, V::Bool(true)])),
        ]);
        let a = Attributes::try_from(tree).unwrap();
        let v2 = attributes_2(&a, 4, Refused::ObjectAttributes).unwrap().unwrap();
        assert_eq!(value_1x(&v2), a.to_value());
        let empty = Attributes::try_from(V::Map(vec![])).unwrap();
        assert_eq!(attributes_2(&empty, 2, Refused::FileAttributes).unwrap(), None);
        for bad in [
            V::Map(vec![(V::Integer(1), V::Null)]),
            V::Map(vec![(V::Text(String::new()), V::Null)]),
            V::Map(vec![(V::Text("a\0".into()), V::Null)]),
            V::Map(vec![(V::Text("t".into()), V::Tag(1, Box::new(V::Null)))]),
            V::Map(vec![(V::Text("u".into()), V::Undefined)]),
        ] {
            let a = Attributes::try_from(bad).unwrap();
            let e = attributes_2(&a, 2, Refused::FileAttributes).unwrap_err();
            assert_eq!(ztensor_format::Verdict::refused(&e), Some(Refused::FileAttributes));
        }
        // Nesting: an object's attribute value may hold 28 levels, not 29.
        let nested = |n: usize| (0..n).fold(V::Null, |v, _| V::Array(vec![v]));
        let at = |n| {
            let a = Attributes::try_from(V::Map(vec![(V::Text("d".into()), nested(n))])).unwrap();
            attributes_2(&a, 4, Refused::ObjectAttributes)
        };
        assert!(at(28).is_ok());
        assert!(at(29).is_err());
    }

    /// The attributes' own bytes are what the tree [`attributes_2`] makes encodes to, and the
    /// same attributes are refused with the same words.
    #[test]
    fn attributes_go_into_zt2_as_their_bytes() {
        use ztensor_format::Value as V;
        let text = |s: &str| V::Text(s.to_owned());
        let nested = |n: usize| (0..n).fold(V::Null, |v, _| V::Array(vec![v]));
        let maps = [
            V::Map(vec![]),
            V::Map(vec![
                (text("n"), V::Integer(-(1i128 << 64))),
                (text("u"), V::Integer(i128::from(u64::MAX))),
                (text("f"), V::Array(vec![V::Float(0.1), V::Float(1.5), V::Float(f64::NAN)])),
                (text("b"), V::Bytes(vec![0, 255])),
                (text("m"), V::Map(vec![(V::Integer(-3), V::Null), (V::Bool(true), text("t"))])),
                (text("x"), V::Array((0..1000).map(|i| V::Integer(i * 1000)).collect())),
            ]),
            V::Map(vec![(V::Integer(1), V::Null)]),
            V::Map(vec![(text(""), V::Null)]),
            V::Map(vec![(text("a\0"), V::Null)]),
            V::Map(vec![(text(&"k".repeat(MAX_NAME + 1)), V::Null)]),
            V::Map(vec![(text("t"), V::Array(vec![V::Null, V::Tag(1, Box::new(V::Null))]))]),
            V::Map(vec![(text("k"), V::Map(vec![(V::Tag(2, Box::new(V::Null)), V::Null)]))]),
            V::Map(vec![(text("u"), V::Undefined), (text("v"), V::Simple(16))]),
            V::Map(vec![(text("s"), V::Simple(16))]),
            V::Map(vec![(text("d"), nested(28))]),
            V::Map(vec![(text("d"), nested(29)), (text("e"), V::Undefined)]),
        ];
        for (i, map) in maps.into_iter().enumerate() {
            let a = Attributes::try_from(map).unwrap();
            for (depth, refused) in [(2, Refused::FileAttributes), (4, Refused::ObjectAttributes)] {
                let tree = attributes_2(&a, depth, refused).map(|v| v.map(|v| encode(&v)));
                let bytes = attributes_2_encoded(&a, depth, refused).map(|b| b.map(<[u8]>::to_vec));
                match (tree, bytes) {
                    (Ok(tree), Ok(bytes)) => assert_eq!(tree, bytes, "case {i}"),
                    (Err(tree), Err(bytes)) => {
                        assert_eq!(tree.to_string(), bytes.to_string(), "case {i}");
                        let refusal = ztensor_format::Verdict::refused(&bytes);
                        assert_eq!(refusal, Some(refused), "case {i}");
                    }
                    (tree, bytes) => panic!("case {i} at {depth}: {tree:?} / {bytes:?}"),
                }
            }
        }
    }
}
