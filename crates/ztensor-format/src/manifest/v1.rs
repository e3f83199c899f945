//! The v1.1 / v1.2 wire schema: a root map of `version`, `attributes`, `objects`.
//!
//! One decoder serves both minors and keys off field presence, not the version string: files
//! written by a v1.2 appender onto a v1.1 file keep `"1.1.0"` but carry `type` and
//! `uncompressed_length`. The v1.1 spellings of logical types in `dtype` (`f8_e4m3`, `f8_e5m2`,
//! `complex64`, `complex128`) decode into the same model as the v1.2 `type` field.

use std::collections::BTreeMap;

use super::{
    ByteOrder, Component, Encoding, Format, Manifest, Object, Packing, Version, check_attributes,
    check_name, missing, take_shape, take_text, take_u64, text_entries, wrong_type,
};
use crate::digest::Digest;
use crate::dtype::{DType, LogicalType, StorageType};
use crate::error::{Error, ErrorKind, Result};
use crate::limits::Limits;
use crate::value::Value;

/// Parses a v1 version string: the major must be 1; minor 0 and 1 mean v1.1, 2 and above v1.2
/// (later minors only add optional fields, so they read as v1.2).
///
/// # Errors
/// [`ErrorKind::VersionUnsupported`] when the string has no numeric major of 1.
pub fn parse_version(s: &str) -> Result<Version> {
    let mut parts = s.split('.');
    let major = parts.next().unwrap_or("");
    let unsupported = || {
        Error::new(ErrorKind::VersionUnsupported, "version string does not name major version 1")
            .field("version")
            .expected_found("\"1.x\"", format!("{s:?}"))
    };
    if major != "1" {
        return Err(unsupported());
    }
    let minor: String =
        parts.next().unwrap_or("0").chars().take_while(char::is_ascii_digit).collect();
    if minor.is_empty() {
        return Err(unsupported());
    }
    // Any number of digits: compare as a decimal string without overflow.
    let minor = minor.trim_start_matches('0');
    Ok(if minor.is_empty() || minor == "1" { Version::V1_1 } else { Version::V1_2 })
}

pub(crate) fn from_value(root: Value, limits: &Limits) -> Result<Manifest> {
    let Value::Map(root) = root else {
        return Err(Error::new(ErrorKind::SchemaRoot, "a v1.x manifest must be a CBOR map")
            .expected_found("map", root.kind_name()));
    };
    let mut version = None;
    let mut attributes = None;
    let mut objects = None;
    let mut extra = Vec::new();
    for (key, value) in text_entries(root, "the manifest root")? {
        match key.as_str() {
            "version" => version = Some(take_text(value, "version")?),
            "attributes" => attributes = optional(value),
            "objects" => objects = Some(value),
            _ => extra.push((key, value)),
        }
    }
    let version_string = version.ok_or_else(|| missing("version"))?;
    let version = parse_version(&version_string)?;
    if let Some(attributes) = &attributes {
        check_attributes(attributes, "attributes")?;
    }
    let objects = match objects.ok_or_else(|| missing("objects"))? {
        Value::Map(m) => m,
        other => return Err(wrong_type("objects", "map", &other)),
    };
    if objects.len() > limits.max_objects {
        return Err(Error::new(ErrorKind::TooManyObjects, "more objects than the limit")
            .expected_found(format!("<= {}", limits.max_objects), objects.len()));
    }
    let objects = text_entries(objects, "the objects map")?
        .into_iter()
        .map(|(name, value)| object(name.clone(), value, limits).map_err(|e| e.in_object(&name)))
        .collect::<Result<Vec<_>>>()?;
    Ok(Manifest { version, version_string: Some(version_string), attributes, objects, extra })
}

/// Optional fields accept `null` as absent, as the reference decoders do.
fn optional(value: Value) -> Option<Value> {
    match value {
        Value::Null => None,
        v => Some(v),
    }
}

fn object(name: String, value: Value, limits: &Limits) -> Result<Object> {
    check_name(&name, limits)?;
    let Value::Map(map) = value else {
        return Err(wrong_type("object", "map", &value));
    };
    let (mut shape, mut format, mut attributes, mut components) = (None, None, None, None);
    let mut extra = Vec::new();
    for (key, value) in text_entries(map, "an object map")? {
        match key.as_str() {
            "shape" => shape = Some(take_shape(value, limits)?),
            "format" => format = Some(Format::from_name(&take_text(value, "format")?)),
            "attributes" => attributes = optional(value),
            "components" => components = Some(value),
            _ => extra.push((key, value)),
        }
    }
    if let Some(attributes) = &attributes {
        check_attributes(attributes, "attributes")?;
    }
    let components = match components.ok_or_else(|| missing("components"))? {
        Value::Map(m) => m,
        other => return Err(wrong_type("components", "map", &other)),
    };
    let mut by_role = BTreeMap::new();
    for (role, value) in text_entries(components, "a components map")? {
        let component = component(value).map_err(|e| e.in_component(&role))?;
        by_role.insert(role, component);
    }
    Ok(Object {
        name,
        shape: shape.ok_or_else(|| missing("shape"))?,
        format: format.ok_or_else(|| missing("format"))?,
        attributes,
        components: by_role,
        packing: Packing::Split,
        extra,
    })
}

fn component(value: Value) -> Result<Component> {
    let Value::Map(map) = value else {
        return Err(wrong_type("component", "map", &value));
    };
    let (mut dtype, mut logical, mut offset, mut length) = (None, None, None, None);
    let (mut uncompressed_length, mut encoding, mut digest) = (None, Encoding::Raw, None);
    let mut extra = Vec::new();
    for (key, value) in text_entries(map, "a component map")? {
        match key.as_str() {
            "dtype" => dtype = Some(take_text(value, "dtype")?),
            "type" => logical = optional(value).map(|v| take_text(v, "type")).transpose()?,
            "offset" => offset = Some(take_u64(&value, "offset")?),
            "length" => length = Some(take_u64(&value, "length")?),
            "uncompressed_length" => {
                uncompressed_length =
                    optional(value).map(|v| take_u64(&v, "uncompressed_length")).transpose()?;
            }
            "encoding" => {
                if let Some(v) = optional(value) {
                    encoding = Encoding::from_name(&take_text(v, "encoding")?);
                }
            }
            "digest" => {
                digest = optional(value)
                    .map(|v| take_text(v, "digest"))
                    .transpose()?
                    .map(|s| Digest::parse(&s));
            }
            _ => extra.push((key, value)),
        }
    }
    let dtype_name = dtype.ok_or_else(|| missing("dtype"))?;
    let mut logical_type = logical.map(|s| LogicalType::from_name(&s));
    let dtype = if let Some(d) = DType::from_name(&dtype_name) {
        StorageType::Known(d)
    } else if let Some(spelled) = LogicalType::from_v1_1_dtype_name(&dtype_name) {
        // v1.1 puts f8 and complex types in `dtype`.
        if logical_type.as_ref().is_some_and(|t| *t != spelled) {
            return Err(Error::new(
                ErrorKind::LogicalTypeMismatch,
                "dtype and type name different logical types",
            )
            .field("type")
            .expected_found(spelled.name(), logical_type.as_ref().map_or("", |t| t.name())));
        }
        let storage = spelled
            .storage()
            .map_or_else(|| StorageType::Unknown(dtype_name.clone()), StorageType::Known);
        logical_type = Some(spelled);
        storage
    } else {
        StorageType::Unknown(dtype_name)
    };
    Ok(Component {
        dtype,
        logical_type,
        offset: offset.ok_or_else(|| missing("offset"))?,
        length: length.ok_or_else(|| missing("length"))?,
        uncompressed_length,
        encoding,
        digest,
        byte_order: ByteOrder::Little,
        extra,
    })
}

pub(crate) fn to_value(manifest: &Manifest) -> Result<Value> {
    let version_string = match &manifest.version_string {
        Some(s) => s.clone(),
        None => manifest.version.default_version_string().unwrap_or("1.2.0").to_owned(),
    };
    if parse_version(&version_string)? != manifest.version {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "version string disagrees with the manifest version",
        )
        .field("version")
        .expected_found(manifest.version, format!("{version_string:?}")));
    }
    let mut root = vec![(Value::from("version"), Value::Text(version_string))];
    if let Some(attributes) = &manifest.attributes {
        check_attributes(attributes, "attributes")
            .map_err(|e| e.kind_into(ErrorKind::InvalidInput))?;
        root.push((Value::from("attributes"), attributes.clone()));
    }
    let mut objects = Vec::with_capacity(manifest.objects.len());
    for object in &manifest.objects {
        let value = object_value(object).map_err(|e| e.in_object(&object.name))?;
        objects.push((Value::Text(object.name.clone()), value));
    }
    root.push((Value::from("objects"), Value::Map(objects)));
    push_extra(&mut root, &manifest.extra, &["version", "attributes", "objects"])?;
    Ok(Value::Map(root))
}

fn push_extra(
    map: &mut Vec<(Value, Value)>,
    extra: &[(String, Value)],
    known: &[&str],
) -> Result<()> {
    for (key, value) in extra {
        if known.contains(&key.as_str()) {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                format!("extra key {key:?} shadows a defined field"),
            ));
        }
        map.push((Value::Text(key.clone()), value.clone()));
    }
    Ok(())
}

fn object_value(object: &Object) -> Result<Value> {
    if object.packing != Packing::Split {
        return Err(Error::new(
            ErrorKind::Unrepresentable,
            "v1.x has no single-blob sparse layout; convert the object to separate components",
        ));
    }
    let shape = object.shape.iter().map(|&d| Value::from(d)).collect();
    let mut map = vec![
        (Value::from("shape"), Value::Array(shape)),
        (Value::from("format"), Value::from(object.format.name())),
    ];
    if let Some(attributes) = &object.attributes {
        check_attributes(attributes, "attributes")
            .map_err(|e| e.kind_into(ErrorKind::InvalidInput))?;
        map.push((Value::from("attributes"), attributes.clone()));
    }
    let mut components = Vec::with_capacity(object.components.len());
    for (role, component) in &object.components {
        let value = component_value(component).map_err(|e| e.in_component(role))?;
        components.push((Value::Text(role.clone()), value));
    }
    map.push((Value::from("components"), Value::Map(components)));
    push_extra(&mut map, &object.extra, &["shape", "format", "attributes", "components"])?;
    Ok(Value::Map(map))
}

fn component_value(c: &Component) -> Result<Value> {
    if c.byte_order != ByteOrder::Little {
        return Err(Error::new(
            ErrorKind::Unrepresentable,
            "v1.x stores little-endian data only; byte-swap first",
        ));
    }
    let mut map = Vec::with_capacity(7);
    map.push((Value::from("dtype"), Value::from(c.dtype.to_string())));
    // Both minors write a logical type as `type`. 1.1 also spells four of them as dtypes
    // (`f8_e4m3`, …), and we read that spelling, but the reference 1.1 and 1.2 readers reject a
    // whole file that uses it, while they read `dtype` + `type` (ignoring `type`).
    if let Some(t) = &c.logical_type {
        map.push((Value::from("type"), Value::from(t.name())));
    }
    map.push((Value::from("offset"), Value::from(c.offset)));
    map.push((Value::from("length"), Value::from(c.length)));
    if let Some(n) = c.uncompressed_length {
        map.push((Value::from("uncompressed_length"), Value::from(n)));
    }
    if c.encoding != Encoding::Raw {
        map.push((Value::from("encoding"), Value::from(c.encoding.name())));
    }
    if let Some(d) = &c.digest {
        map.push((Value::from("digest"), Value::Text(d.to_string())));
    }
    push_extra(
        &mut map,
        &c.extra,
        &["dtype", "type", "offset", "length", "uncompressed_length", "encoding", "digest"],
    )?;
    Ok(Value::Map(map))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_strings() {
        assert_eq!(parse_version("1.1.0").unwrap(), Version::V1_1);
        assert_eq!(parse_version("1.0").unwrap(), Version::V1_1);
        assert_eq!(parse_version("1").unwrap(), Version::V1_1);
        assert_eq!(parse_version("1.2.0").unwrap(), Version::V1_2);
        assert_eq!(parse_version("1.10.3").unwrap(), Version::V1_2);
        assert_eq!(parse_version("1.99999999999999999999999").unwrap(), Version::V1_2);
        assert_eq!(parse_version("1.02").unwrap(), Version::V1_2);
        assert_eq!(parse_version("1.01").unwrap(), Version::V1_1);
        for bad in ["2.0.0", "", "v1.2", "1.x", "01.2", "0.1.0"] {
            assert_eq!(
                parse_version(bad).unwrap_err().kind(),
                ErrorKind::VersionUnsupported,
                "{bad:?}"
            );
        }
    }
}
