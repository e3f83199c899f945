//! The v1.1 / v1.2 wire schema: a root map of `version`, `attributes`, `objects`.
//!
//! One decoder serves both minors and keys off field presence, not the version string: files
//! written by a v1.2 appender onto a v1.1 file keep `"1.1.0"` but carry `type` and
//! `uncompressed_length`. The v1.1 spellings of logical types in `dtype` (`f8_e4m3`, `f8_e5m2`,
//! `complex64`, `complex128`) decode into the same model as the v1.2 `type` field.

use super::{
    ByteOrder, Component, Components, Encoding, Format, Manifest, Object, Packing, Version,
    check_attributes, check_name, missing, take_shape, take_text, take_u64, text_entries,
    text_key_order, wrong_type,
};
use crate::attributes::Attributes;
use crate::cbor::{Decoder, Entry, Head};
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
    let attributes = checked_attributes(attributes)?;
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

/// Attributes decoded into a tree, checked to be a map and kept encoded.
fn checked_attributes(attributes: Option<Value>) -> Result<Option<Attributes>> {
    let Some(attributes) = attributes else { return Ok(None) };
    check_attributes(&attributes, "attributes")?;
    Attributes::try_from(attributes).map(Some)
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
    let attributes = checked_attributes(attributes)?;
    let components = match components.ok_or_else(|| missing("components"))? {
        Value::Map(m) => m,
        other => return Err(wrong_type("components", "map", &other)),
    };
    let mut entries = Vec::new();
    for (role, value) in text_entries(components, "a components map")? {
        let component = component(value).map_err(|e| e.in_component(&role))?;
        entries.push((role, component));
    }
    let (by_role, _) = Components::from_entries(entries);
    let shape = shape.ok_or_else(|| missing("shape"))?;
    let mut object = Object::new(name, shape, format.ok_or_else(|| missing("format"))?)
        .with_attributes(attributes);
    object.components = by_role;
    if !extra.is_empty() {
        *object.extra_mut() = extra;
    }
    Ok(object)
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
    let fields = ComponentFields {
        dtype: &dtype_name,
        logical_type: logical.as_deref(),
        offset,
        length,
        uncompressed_length,
        encoding,
        digest,
        extra,
    };
    fields.finish()
}

/// A component map's fields once read, by either decoder.
struct ComponentFields<'s> {
    dtype: &'s str,
    logical_type: Option<&'s str>,
    offset: Option<u64>,
    length: Option<u64>,
    uncompressed_length: Option<u64>,
    encoding: Encoding,
    digest: Option<Digest>,
    extra: Vec<(String, Value)>,
}

impl ComponentFields<'_> {
    fn finish(self) -> Result<Component> {
        let dtype_name = self.dtype;
        let mut logical_type = self.logical_type.map(LogicalType::from_name);
        let dtype = if let Some(d) = DType::from_name(dtype_name) {
            StorageType::Known(d)
        } else if let Some(spelled) = LogicalType::from_v1_1_dtype_name(dtype_name) {
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
                .map_or_else(|| StorageType::Unknown(dtype_name.into()), StorageType::Known);
            logical_type = Some(spelled);
            storage
        } else {
            StorageType::Unknown(dtype_name.into())
        };
        let offset = self.offset.ok_or_else(|| missing("offset"))?;
        let length = self.length.ok_or_else(|| missing("length"))?;
        let mut component = Component::new(dtype, offset, length);
        component.logical_type = logical_type;
        component.uncompressed_length = self.uncompressed_length;
        component.encoding = self.encoding;
        component.digest = self.digest;
        if !self.extra.is_empty() {
            *component.extra_mut() = self.extra;
        }
        Ok(component)
    }
}

/// Decodes the common shape of a v1.x manifest straight from its bytes, without building a
/// value tree for the structural maps (the root, `objects`, each object and component); only
/// attributes and unknown keys become [`Value`]s.
///
/// It returns `None` as soon as the bytes depart from that shape in any way: malformed CBOR,
/// indefinite lengths or tags in the structure, a repeated key, a field of the wrong type, a
/// missing field, a limit. The caller then decodes the general way, which reports exactly what
/// is wrong. Whenever this returns a manifest, it is the one the general way builds from the same
/// bytes (a property test holds the two to it, on valid and mutated manifests).
pub(crate) fn decode_direct(bytes: &[u8], limits: &Limits) -> Option<Manifest> {
    let mut d = Direct {
        cbor: Decoder::bounded(bytes, limits.max_cbor_depth, limits.max_manifest_values),
        limits,
    };
    let manifest = d.root()?;
    d.cbor.at_end().then_some(manifest)
}

struct Direct<'a, 'l> {
    cbor: Decoder<'a>,
    limits: &'l Limits,
}

/// Keys already seen in a small structural map, one bit per known key.
#[derive(Default)]
struct Seen(u16);

impl Seen {
    /// Marks key `bit`; `None` if it was already there.
    fn mark(&mut self, bit: u8) -> Option<()> {
        let mask = 1u16 << bit;
        if self.0 & mask != 0 {
            return None;
        }
        self.0 |= mask;
        Some(())
    }
}

impl<'a> Direct<'a, '_> {
    /// The entry count of a map that opens at nesting `depth` (`None` inside for an
    /// indefinite-length one, as real writers emit: its entries end at a break, [`Self::more`]).
    fn map(&mut self, depth: usize) -> Option<Option<usize>> {
        if depth > self.cbor.max_depth() {
            return None;
        }
        let at = self.cbor.pos();
        match self.cbor.head().ok()? {
            Head::Map(Some(n)) => self.cbor.count(at, n, 2).ok().map(Some),
            Head::Map(None) => Some(None),
            _ => None,
        }
    }

    /// The item count of an array that opens at nesting `depth`, as [`Self::map`].
    fn array(&mut self, depth: usize) -> Option<Option<usize>> {
        if depth > self.cbor.max_depth() {
            return None;
        }
        let at = self.cbor.pos();
        match self.cbor.head().ok()? {
            Head::Array(Some(n)) => self.cbor.count(at, n, 1).ok().map(Some),
            Head::Array(None) => Some(None),
            _ => None,
        }
    }

    /// Whether a map or array of `len` entries (`None`: indefinite) has one after the `done`
    /// already read; an indefinite one's break is consumed.
    fn more(&mut self, len: Option<usize>, done: usize) -> Option<bool> {
        match len {
            Some(n) => Some(done < n),
            None => self.cbor.at_break().ok().map(|at_break| !at_break),
        }
    }

    fn text(&mut self) -> Option<&'a str> {
        self.cbor.borrowed_text()
    }

    fn uint(&mut self) -> Option<u64> {
        match self.cbor.head().ok()? {
            Head::Uint(v) => Some(v),
            _ => None,
        }
    }

    /// `null` (as absent) or what `read` reads.
    fn nullable<T>(&mut self, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
        if self.cbor.peek() == Some(0xf6) {
            self.cbor.take(1).ok()?;
            return Some(None);
        }
        read(self).map(Some)
    }

    /// Any item, as a value (attributes, unknown keys).
    fn value(&mut self, depth: usize) -> Option<Value> {
        self.cbor.item(depth).ok()
    }

    /// Attributes: `null` (absent) or a map, checked as [`Decoder::item`] checks it and kept
    /// in deterministic CBOR rather than as a tree.
    fn attributes(&mut self, depth: usize) -> Option<Option<Attributes>> {
        if self.cbor.peek() == Some(0xf6) {
            self.cbor.take(1).ok()?;
            return Some(None);
        }
        let mut encoded = Vec::new();
        self.cbor.canonical(depth, &mut encoded).ok()?;
        Attributes::from_canonical_checked(encoded, "attributes").ok().map(Some)
    }

    /// An unknown key's entry, refused if it repeats an earlier unknown key.
    ///
    /// Real manifests have few unknown keys; past a handful this decoder gives up and leaves the
    /// map to the general decoder, rather than check each new key against all earlier ones.
    fn extra(&mut self, extra: &mut Vec<(String, Value)>, key: &str, depth: usize) -> Option<()> {
        const MOST: usize = 16;
        if extra.len() >= MOST || extra.iter().any(|(k, _)| k == key) {
            return None;
        }
        let value = self.value(depth)?;
        extra.push((key.to_owned(), value));
        Some(())
    }

    fn root(&mut self) -> Option<Manifest> {
        let n = self.map(1)?;
        let mut seen = Seen::default();
        let (mut version, mut attributes, mut objects) = (None, None, None);
        let mut extra = Vec::new();
        let mut done = 0;
        while self.more(n, done)? {
            done += 1;
            match self.text()? {
                "version" => {
                    seen.mark(0)?;
                    version = Some(self.text()?);
                }
                "attributes" => {
                    seen.mark(1)?;
                    attributes = self.attributes(2)?;
                }
                "objects" => {
                    seen.mark(2)?;
                    objects = Some(self.objects()?);
                }
                key => self.extra(&mut extra, key, 2)?,
            }
        }
        let version_string = version?;
        let version = parse_version(version_string).ok()?;
        Some(Manifest {
            version,
            version_string: Some(version_string.to_owned()),
            attributes,
            objects: objects?,
            extra,
        })
    }

    fn objects(&mut self) -> Option<Vec<Object>> {
        let n = self.map(2)?;
        if n.is_some_and(|n| n > self.limits.max_objects) {
            return None;
        }
        let mut objects: Vec<Object> = Vec::with_capacity(n.unwrap_or(0));
        // Names in strictly increasing order cannot repeat. Writers sort them, in bytewise
        // order (a sorted map) or in deterministic CBOR's (shorter first): while either holds,
        // no set of the names is needed, which at a million objects is tens of megabytes.
        let (mut bytewise, mut deterministic) = (true, true);
        while self.more(n, objects.len())? {
            if objects.len() == self.limits.max_objects {
                return None;
            }
            let name = self.text()?;
            if let Some(last) = objects.last() {
                let last = last.name.as_str();
                bytewise &= last < name;
                deterministic &= text_key_order(last) < text_key_order(name);
            }
            check_name(name, self.limits).ok()?;
            objects.push(self.object(name)?);
        }
        if !bytewise && !deterministic {
            let mut index = crate::NameIndex::with_capacity(objects.len());
            for i in 0..objects.len() {
                if index.insert(i, |j| &objects[j].name).is_some() {
                    // A repeated key: the general decoder says so, with its place.
                    return None;
                }
            }
        }
        Some(objects)
    }

    fn object(&mut self, name: &str) -> Option<Object> {
        let n = self.map(3)?;
        let mut seen = Seen::default();
        let (mut shape, mut format, mut attributes, mut components) = (None, None, None, None);
        let mut extra = Vec::new();
        let mut done = 0;
        while self.more(n, done)? {
            done += 1;
            match self.text()? {
                "shape" => {
                    seen.mark(0)?;
                    let rank = self.array(4)?;
                    if rank.is_some_and(|rank| rank > self.limits.max_rank) {
                        return None;
                    }
                    // Room for exactly the rank: a collected `Vec` would start at four.
                    let mut dims = Vec::with_capacity(rank.unwrap_or(0));
                    while self.more(rank, dims.len())? {
                        if dims.len() == self.limits.max_rank {
                            return None;
                        }
                        dims.push(self.uint()?);
                    }
                    shape = Some(dims);
                }
                "format" => {
                    seen.mark(1)?;
                    format = Some(Format::from_name(self.text()?));
                }
                "attributes" => {
                    seen.mark(2)?;
                    attributes = self.attributes(4)?;
                }
                "components" => {
                    seen.mark(3)?;
                    let count = self.map(4)?;
                    // The count is the file's claim: room for a few, more as they come.
                    let mut entries = Vec::with_capacity(count.unwrap_or(0).min(4));
                    while self.more(count, entries.len())? {
                        let role = self.text()?.to_owned();
                        entries.push((role, self.component()?));
                    }
                    // A role given twice is for the general decoder to report.
                    let (by_role, repeated) = Components::from_entries(entries);
                    if repeated {
                        return None;
                    }
                    components = Some(by_role);
                }
                key => self.extra(&mut extra, key, 4)?,
            }
        }
        let mut object = Object::new(name, shape?, format?).with_attributes(attributes);
        object.components = components?;
        if !extra.is_empty() {
            *object.extra_mut() = extra;
        }
        Some(object)
    }

    fn component(&mut self) -> Option<Component> {
        let n = self.map(5)?;
        let mut seen = Seen::default();
        let (mut dtype, mut logical_type, mut offset, mut length) = (None, None, None, None);
        let (mut uncompressed_length, mut encoding, mut digest) = (None, Encoding::Raw, None);
        let mut extra = Vec::new();
        let mut done = 0;
        while self.more(n, done)? {
            done += 1;
            match self.text()? {
                "dtype" => {
                    seen.mark(0)?;
                    dtype = Some(self.text()?);
                }
                "type" => {
                    seen.mark(1)?;
                    logical_type = self.nullable(Self::text)?;
                }
                "offset" => {
                    seen.mark(2)?;
                    offset = Some(self.uint()?);
                }
                "length" => {
                    seen.mark(3)?;
                    length = Some(self.uint()?);
                }
                "uncompressed_length" => {
                    seen.mark(4)?;
                    uncompressed_length = self.nullable(Self::uint)?;
                }
                "encoding" => {
                    seen.mark(5)?;
                    if let Some(name) = self.nullable(Self::text)? {
                        encoding = Encoding::from_name(name);
                    }
                }
                "digest" => {
                    seen.mark(6)?;
                    digest = self.nullable(Self::text)?.map(Digest::parse);
                }
                key => self.extra(&mut extra, key, 6)?,
            }
        }
        let fields = ComponentFields {
            dtype: dtype?,
            logical_type,
            offset,
            length,
            uncompressed_length,
            encoding,
            digest,
            extra,
        };
        fields.finish().ok()
    }
}

/// The manifest's CBOR, deterministic (RFC 8949 §4.2.1), encoded object by object.
pub(crate) fn encode(manifest: &Manifest, out: &mut crate::cbor::Blocks<'_>) -> Result<()> {
    let root = root_entries(manifest)?;
    // The objects in the order of their encoded names, which is shorter names first, then
    // bytewise: each is encoded and handed on in turn, never all at once.
    let order = crate::manifest::name_order(&manifest.objects)?;
    encode_with(root, order.len(), out, |out| {
        for &i in &order {
            let object = &manifest.objects[i];
            crate::cbor::encode_into(&Value::Text(object.name.clone()), &mut out.buf)?;
            object_into(object, &mut out.buf).map_err(|e| e.in_object(&object.name))?;
            out.maybe_flush()?;
        }
        Ok(())
    })
}

/// The root map's entries other than the objects, checked and encoded, in deterministic order,
/// with `None` where the objects map goes.
pub(crate) type RootEntries = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// [`RootEntries`] of `manifest` (its objects aside).
pub(crate) fn root_entries(manifest: &Manifest) -> Result<RootEntries> {
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
    push_extra(&mut root, &manifest.extra, &["version", "attributes", "objects"])?;
    let objects_key = crate::cbor::encode(&Value::from("objects"))?;
    let mut entries: RootEntries = vec![(objects_key, None)];
    for (key, value) in &root {
        entries.push((crate::cbor::encode(key)?, Some(crate::cbor::encode(value)?)));
    }
    if let Some(attributes) = &manifest.attributes {
        let key = crate::cbor::encode(&Value::from("attributes"))?;
        entries.push((key, Some(attributes.as_bytes().to_vec())));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    if entries.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err(Error::new(ErrorKind::CborDuplicateKey, "map to encode repeats a key"));
    }
    Ok(entries)
}

/// Encodes the root `entries` with an objects map of `count` entries that `objects` writes,
/// keys and values, in order.
pub(crate) fn encode_with(
    entries: RootEntries,
    count: usize,
    out: &mut crate::cbor::Blocks<'_>,
    objects: impl FnOnce(&mut crate::cbor::Blocks<'_>) -> Result<()>,
) -> Result<()> {
    let mut objects = Some(objects);
    crate::cbor::map_head(&mut out.buf, entries.len() as u64);
    for (key, value) in &entries {
        out.buf.extend_from_slice(key);
        match value {
            Some(value) => out.buf.extend_from_slice(value),
            None => {
                crate::cbor::map_head(&mut out.buf, count as u64);
                if let Some(objects) = objects.take() {
                    objects(out)?;
                }
            }
        }
    }
    Ok(())
}

/// Appends `object`'s value, as the objects map holds it under its name, to `out`.
pub(crate) fn object_into(object: &Object, out: &mut Vec<u8>) -> Result<()> {
    let mut entries = Vec::new();
    for (key, value) in object_value(object)? {
        entries.push((crate::cbor::encode(&key)?, Entry::Value(value)));
    }
    if let Some(attributes) = &object.attributes {
        entries.push((
            crate::cbor::encode(&Value::from("attributes"))?,
            Entry::Encoded(attributes.as_bytes()),
        ));
    }
    crate::cbor::encode_map_into(entries, out)
}

/// Decodes the value of the object called `name` that [`object_into`] encoded.
pub(crate) fn object_from(name: &str, bytes: &[u8], limits: &Limits) -> Result<Object> {
    let value =
        crate::cbor::decode_bounded(bytes, limits.max_cbor_depth, limits.max_manifest_values)?;
    object(name.to_owned(), value, limits)
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

/// The entries of `object`'s map (its attributes aside).
fn object_value(object: &Object) -> Result<Vec<(Value, Value)>> {
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
    let mut components = Vec::with_capacity(object.components.len());
    for (role, component) in &object.components {
        let value = component_value(component).map_err(|e| e.in_component(role))?;
        components.push((Value::Text(role.to_owned()), value));
    }
    map.push((Value::from("components"), Value::Map(components)));
    push_extra(&mut map, object.extra(), &["shape", "format", "attributes", "components"])?;
    Ok(map)
}

fn component_value(c: &Component) -> Result<Value> {
    if *c.byte_order() != ByteOrder::Little {
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
        c.extra(),
        &["dtype", "type", "offset", "length", "uncompressed_length", "encoding", "digest"],
    )?;
    Ok(Value::Map(map))
}

#[cfg(test)]
mod tests;
