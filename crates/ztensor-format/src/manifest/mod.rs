//! The one in-memory model that every zTensor version decodes into: a manifest of objects made
//! of components.
//!
//! Version-specific wire schemas live in [`v0_1`] and [`v1`]; everything above them sees only
//! this model.

use std::fmt;

use crate::attributes::Attributes;
use crate::digest::Digest;
use crate::dtype::{LogicalType, StorageType};
use crate::error::{Error, ErrorKind, Result};
use crate::framing::Container;
use crate::limits::Limits;
use crate::value::Value;

mod components;
pub mod v0_1;
pub mod v1;

pub use components::{Components, ComponentsIntoIter, ComponentsIter};

/// The spec revision a file follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Version {
    /// zTensor 0.1 (`ZTEN0001`, CBOR array of tensor maps).
    V0_1,
    /// zTensor 1.1 (`ZTEN1000`, CBOR map of objects; version string minor ≤ 1).
    V1_1,
    /// zTensor 1.2 (`ZTEN1000`; version string minor ≥ 2: logical types, `uncompressed_length`).
    V1_2,
}

impl Version {
    /// The container this version is framed in.
    pub fn container(self) -> Container {
        match self {
            Version::V0_1 => Container::V0_1,
            Version::V1_1 | Version::V1_2 => Container::V1,
        }
    }

    /// The version string a writer puts in the manifest (`None` for v0.1, which has none).
    pub fn default_version_string(self) -> Option<&'static str> {
        match self {
            Version::V0_1 => None,
            Version::V1_1 => Some("1.1.0"),
            Version::V1_2 => Some("1.2.0"),
        }
    }

    /// The short label used by the conformance dump: `zt-0.1`, `zt-1.1`, `zt-1.2`.
    pub fn label(self) -> &'static str {
        match self {
            Version::V0_1 => "zt-0.1",
            Version::V1_1 => "zt-1.1",
            Version::V1_2 => "zt-1.2",
        }
    }

    /// Parses `0.1`, `1.1` or `1.2` (as given on a command line).
    pub fn from_short(s: &str) -> Option<Version> {
        match s {
            "0.1" => Some(Version::V0_1),
            "1.1" => Some(Version::V1_1),
            "1.2" => Some(Version::V1_2),
            _ => None,
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Version::V0_1 => "0.1",
            Version::V1_1 => "1.1",
            Version::V1_2 => "1.2",
        })
    }
}

/// An object's layout schema.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Format {
    /// One `data` component, row-major.
    Dense,
    /// `values`, `indices`, `indptr`.
    SparseCsr,
    /// `values`, `coords` (structure of arrays).
    SparseCoo,
    /// `packed_weight`, `scales`, `zeros`.
    QuantizedGroup,
    /// A format this implementation does not know, preserved.
    Unknown(crate::Spelling),
}

impl Format {
    /// The v1.x spelling.
    pub fn name(&self) -> &str {
        match self {
            Format::Dense => "dense",
            Format::SparseCsr => "sparse_csr",
            Format::SparseCoo => "sparse_coo",
            Format::QuantizedGroup => "quantized_group",
            Format::Unknown(s) => s,
        }
    }

    /// Parses the v1.x spelling; unknown strings are preserved.
    pub fn from_name(name: &str) -> Format {
        match name {
            "dense" => Format::Dense,
            "sparse_csr" => Format::SparseCsr,
            "sparse_coo" => Format::SparseCoo,
            "quantized_group" => Format::QuantizedGroup,
            other => Format::Unknown(other.into()),
        }
    }

    /// The component roles a known format requires (and, in strict mode, the only ones it
    /// allows).
    pub fn required_roles(&self) -> Option<&'static [&'static str]> {
        match self {
            Format::Dense => Some(&["data"]),
            Format::SparseCsr => Some(&["values", "indices", "indptr"]),
            Format::SparseCoo => Some(&["values", "coords"]),
            Format::QuantizedGroup => Some(&["packed_weight", "scales", "zeros"]),
            Format::Unknown(_) => None,
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a component's stored bytes are encoded.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// The bytes as they are.
    Raw,
    /// A Zstandard stream (one or more frames).
    Zstd,
    /// An encoding this implementation does not know, preserved.
    Unknown(crate::Spelling),
}

impl Encoding {
    /// The spelling used by every version.
    pub fn name(&self) -> &str {
        match self {
            Encoding::Raw => "raw",
            Encoding::Zstd => "zstd",
            Encoding::Unknown(s) => s,
        }
    }

    /// Parses an encoding string; unknown strings are preserved.
    pub fn from_name(name: &str) -> Encoding {
        match name {
            "raw" => Encoding::Raw,
            "zstd" => Encoding::Zstd,
            other => Encoding::Unknown(other.into()),
        }
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The byte order of a component's decoded elements. Only v0.1 can say `Big`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum ByteOrder {
    /// Little-endian (every v1.x file, and v0.1 by default).
    #[default]
    Little,
    /// Big-endian (v0.1 `data_endianness: "big"`).
    Big,
    /// A v0.1 `data_endianness` string this implementation does not know, preserved.
    Unknown(crate::Spelling),
}

/// How an object's components hold its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Packing {
    /// One blob per role, as v1.x and v0.1 dense tensors store them.
    #[default]
    Split,
    /// A v0.1 sparse tensor: one blob (role `data`) holding, for CSR, `indptr` (u64 × rows+1),
    /// then `indices` (u64 × nnz), then `values`; for COO, `nnz` records of `rank` u64
    /// coordinates followed by one value. The component's dtype is the value dtype.
    V0Single,
}

/// One contiguous blob and how to read it.
///
/// The fields most components leave at their defaults (a byte order other than little-endian,
/// which only v0.1 can state, and unknown keys) are kept out of line, behind
/// [`byte_order`](Component::byte_order) and [`extra`](Component::extra): a manifest holds a
/// component per tensor, and the common one costs a pointer for them rather than their room.
#[derive(Clone, PartialEq, Eq)]
pub struct Component {
    /// The storage type.
    pub dtype: StorageType,
    /// The logical type, when the bytes mean more than the storage type.
    pub logical_type: Option<LogicalType>,
    /// Absolute file offset of the stored bytes.
    pub offset: u64,
    /// Stored (possibly compressed) length in bytes.
    pub length: u64,
    /// Decoded length in bytes, when the file states it (v1.2 `uncompressed_length`).
    pub uncompressed_length: Option<u64>,
    /// The encoding of the stored bytes.
    pub encoding: Encoding,
    /// The digest of the stored bytes.
    pub digest: Option<Digest>,
    rare: Rare<ComponentRare>,
}

/// What a [`Component`] rarely holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct ComponentRare {
    byte_order: ByteOrder,
    extra: Vec<(String, Value)>,
}

/// Fields left at their defaults in nearly every item, out of line: `None` until one is set,
/// and equal to a default value when it is `None`.
#[derive(Clone, Default)]
struct Rare<T>(Option<Box<T>>);

impl<T: Default> Rare<T> {
    fn get(&self) -> Option<&T> {
        self.0.as_deref()
    }

    fn get_mut(&mut self) -> &mut T {
        self.0.get_or_insert_with(Box::default)
    }
}

impl<T: Default + PartialEq> PartialEq for Rare<T> {
    fn eq(&self, other: &Rare<T>) -> bool {
        match (self.get(), other.get()) {
            (Some(a), Some(b)) => a == b,
            (Some(x), None) | (None, Some(x)) => *x == T::default(),
            (None, None) => true,
        }
    }
}

impl<T: Default + Eq> Eq for Rare<T> {}

impl fmt::Debug for Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Component")
            .field("dtype", &self.dtype)
            .field("logical_type", &self.logical_type)
            .field("offset", &self.offset)
            .field("length", &self.length)
            .field("uncompressed_length", &self.uncompressed_length)
            .field("encoding", &self.encoding)
            .field("digest", &self.digest)
            .field("byte_order", self.byte_order())
            .field("extra", &self.extra())
            .finish()
    }
}

impl Component {
    /// A raw little-endian component with no logical type and no digest.
    pub fn new(dtype: impl Into<StorageType>, offset: u64, length: u64) -> Component {
        Component {
            dtype: dtype.into(),
            logical_type: None,
            offset,
            length,
            uncompressed_length: None,
            encoding: Encoding::Raw,
            digest: None,
            rare: Rare::default(),
        }
    }

    /// The byte order of the decoded elements.
    pub fn byte_order(&self) -> &ByteOrder {
        self.rare.get().map_or(&ByteOrder::Little, |r| &r.byte_order)
    }

    /// Sets the byte order of the decoded elements.
    pub fn set_byte_order(&mut self, byte_order: ByteOrder) {
        if byte_order != ByteOrder::Little || self.rare.get().is_some() {
            self.rare.get_mut().byte_order = byte_order;
        }
    }

    /// Sets the byte order, returning the component (builder style).
    #[must_use]
    pub fn with_byte_order(mut self, byte_order: ByteOrder) -> Component {
        self.set_byte_order(byte_order);
        self
    }

    /// Keys of the component map this implementation does not know, preserved (v1.x).
    pub fn extra(&self) -> &[(String, Value)] {
        self.rare.get().map_or(&[], |r| &r.extra)
    }

    /// The unknown keys, to change.
    pub fn extra_mut(&mut self) -> &mut Vec<(String, Value)> {
        &mut self.rare.get_mut().extra
    }
}

/// A named object: shape, format, attributes and components.
///
/// Unknown keys, which few objects have, are kept out of line behind
/// [`extra`](Object::extra), as are the attributes: a manifest may hold a million objects.
#[derive(Clone, PartialEq, Eq)]
pub struct Object {
    /// The object's name (v1.x `objects` key, v0.1 `name`).
    pub name: String,
    /// The logical shape; empty for a scalar.
    pub shape: Vec<u64>,
    /// The layout schema.
    pub format: Format,
    /// Per-object attributes; for v0.1, the tensor map's custom keys.
    pub attributes: Option<Box<Attributes>>,
    /// The components by role.
    pub components: Components,
    /// How the components hold the data.
    pub packing: Packing,
    extra: Rare<Vec<(String, Value)>>,
}

impl fmt::Debug for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Object")
            .field("name", &self.name)
            .field("shape", &self.shape)
            .field("format", &self.format)
            .field("attributes", &self.attributes)
            .field("components", &self.components)
            .field("packing", &self.packing)
            .field("extra", &self.extra())
            .finish()
    }
}

impl Object {
    /// An object with no attributes and no components yet.
    pub fn new(name: impl Into<String>, shape: Vec<u64>, format: Format) -> Object {
        Object {
            name: name.into(),
            shape,
            format,
            attributes: None,
            components: Components::new(),
            packing: Packing::Split,
            extra: Rare::default(),
        }
    }

    /// Adds a component, returning the object (builder style).
    #[must_use]
    pub fn with_component(mut self, role: impl Into<String>, component: Component) -> Object {
        self.components.insert(role.into(), component);
        self
    }

    /// Sets the attributes, returning the object (builder style).
    #[must_use]
    pub fn with_attributes(mut self, attributes: Option<Attributes>) -> Object {
        self.attributes = attributes.map(Box::new);
        self
    }

    /// The attributes, if any.
    pub fn attributes(&self) -> Option<&Attributes> {
        self.attributes.as_deref()
    }

    /// Keys of the object map this implementation does not know, preserved (v1.x).
    pub fn extra(&self) -> &[(String, Value)] {
        self.extra.get().map_or(&[], Vec::as_slice)
    }

    /// The unknown keys, to change.
    pub fn extra_mut(&mut self) -> &mut Vec<(String, Value)> {
        self.extra.get_mut()
    }
}

/// A decoded manifest: the version, file attributes and objects in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The spec revision.
    pub version: Version,
    /// The version string the file declares (`None` for v0.1, which has none).
    pub version_string: Option<String>,
    /// File-level attributes (v1.x only).
    pub attributes: Option<Attributes>,
    /// The objects, in the order the manifest lists them.
    pub objects: Vec<Object>,
    /// Root keys this implementation does not know, preserved (v1.x).
    pub extra: Vec<(String, Value)>,
}

impl Manifest {
    /// An empty manifest of `version`, with that version's default version string.
    pub fn new(version: Version) -> Manifest {
        Manifest {
            version,
            version_string: version.default_version_string().map(str::to_owned),
            attributes: None,
            objects: Vec::new(),
            extra: Vec::new(),
        }
    }

    /// Decodes manifest bytes found in a `container`. Offsets in errors are relative to the
    /// start of `bytes`; [`Error::shifted`] turns them into file offsets.
    ///
    /// Decoding checks CBOR well-formedness and the schema; [`crate::validate`] checks the rest.
    ///
    /// # Errors
    /// The CBOR and schema rules of `spec/rules.md`.
    pub fn decode(container: Container, bytes: &[u8], limits: &Limits) -> Result<Manifest> {
        let direct = match container {
            Container::V0_1 => v0_1::decode_direct(bytes, limits),
            Container::V1 => v1::decode_direct(bytes, limits),
        };
        if let Some(manifest) = direct {
            return Ok(manifest);
        }
        Manifest::decode_general(container, bytes, limits)
    }

    /// [`Manifest::decode`] through the general CBOR value tree only, without the direct path
    /// it tries first. Same results, slower; public so tests outside this crate can hold
    /// the two paths to each other.
    ///
    /// # Errors
    /// As [`Manifest::decode`].
    #[doc(hidden)]
    pub fn decode_general(container: Container, bytes: &[u8], limits: &Limits) -> Result<Manifest> {
        let root =
            crate::cbor::decode_bounded(bytes, limits.max_cbor_depth, limits.max_manifest_values)?;
        match container {
            Container::V0_1 => v0_1::from_value(root, limits),
            Container::V1 => v1::from_value(root, limits),
        }
    }

    /// Encodes this manifest in deterministic CBOR, in the wire schema of `self.version`.
    ///
    /// # Errors
    /// [`ErrorKind::Unrepresentable`] when the version cannot express some content (see
    /// `spec/`), [`ErrorKind::DuplicateName`] for repeated object names.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.encode_in_blocks(&mut |block| {
            out.extend_from_slice(block);
            Ok(())
        })?;
        Ok(out)
    }

    /// Encodes as [`Manifest::encode`] does, handing the bytes to `write` in order, in blocks
    /// of about 64 KiB, as they are made: the manifest of a million objects never exists whole
    /// in memory. Returns the number of bytes handed on. An error from `write` stops the
    /// encoding and is returned as it is; `write` may then have received part of the manifest.
    ///
    /// # Errors
    /// As [`Manifest::encode`], and the errors of `write`.
    pub fn encode_in_blocks(&self, write: &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<u64> {
        let mut out = crate::cbor::Blocks::new(write);
        match self.version {
            Version::V0_1 => v0_1::encode(self, &mut out)?,
            Version::V1_1 | Version::V1_2 => v1::encode(self, &mut out)?,
        }
        out.finish()
    }

    /// The object called `name` (a linear scan; [`crate::ValidatedManifest`] has an index).
    pub fn object(&self, name: &str) -> Option<&Object> {
        self.objects.iter().find(|o| o.name == name)
    }
}

/// The key by which deterministic CBOR (RFC 8949 §4.2.1) orders a text key: its encoding
/// starts with its length, so shorter names come first, then bytewise.
pub(crate) fn text_key_order(name: &str) -> (usize, &[u8]) {
    (name.len(), name.as_bytes())
}

/// The indices of `objects` in the order of their names as deterministic CBOR sorts text keys
/// ([`text_key_order`]).
///
/// # Errors
/// [`ErrorKind::DuplicateName`] for a name given twice.
pub(crate) fn name_order(objects: &[Object]) -> Result<Vec<usize>> {
    let key = |i: usize| text_key_order(&objects[i].name);
    let mut order: Vec<usize> = (0..objects.len()).collect();
    // Writers add objects in order, and the sort finds such runs in one pass.
    order.sort_by(|&a, &b| key(a).cmp(&key(b)));
    if let Some(w) = order.windows(2).find(|w| key(w[0]) == key(w[1])) {
        return Err(Error::new(ErrorKind::DuplicateName, "two objects share a name")
            .in_object(&objects[w[1].max(w[0])].name));
    }
    Ok(order)
}

/// Reads a text-keyed structural map into (key, value) pairs, rejecting non-text keys.
pub(crate) fn text_entries(
    map: Vec<(Value, Value)>,
    what: &'static str,
) -> Result<Vec<(String, Value)>> {
    map.into_iter()
        .map(|(k, v)| match k {
            Value::Text(k) => Ok((k, v)),
            other => Err(Error::new(
                ErrorKind::KeyNotText,
                format!("{what} has a key of kind {}, not text", other.kind_name()),
            )),
        })
        .collect()
}

/// A field of the wrong type.
pub(crate) fn wrong_type(field: &'static str, expected: &str, found: &Value) -> Error {
    Error::new(ErrorKind::SchemaFieldType, "field has the wrong type")
        .field(field)
        .expected_found(expected, found.kind_name())
}

pub(crate) fn missing(field: &'static str) -> Error {
    Error::new(ErrorKind::SchemaMissingField, "required field is absent").field(field)
}

pub(crate) fn take_text(value: Value, field: &'static str) -> Result<String> {
    match value {
        Value::Text(s) => Ok(s),
        other => Err(wrong_type(field, "text string", &other)),
    }
}

pub(crate) fn take_u64(value: &Value, field: &'static str) -> Result<u64> {
    value.as_u64().ok_or_else(|| wrong_type(field, "unsigned integer", value))
}

pub(crate) fn take_shape(value: Value, limits: &Limits) -> Result<Vec<u64>> {
    let Value::Array(items) = value else {
        return Err(wrong_type("shape", "array of unsigned integers", &value));
    };
    if items.len() > limits.max_rank {
        return Err(Error::new(ErrorKind::ShapeRank, "shape has more dimensions than the limit")
            .field("shape")
            .expected_found(format!("rank <= {}", limits.max_rank), items.len()));
    }
    items.iter().map(|d| take_u64(d, "shape")).collect()
}

pub(crate) fn check_name(name: &str, limits: &Limits) -> Result<()> {
    if name.len() > limits.max_name_len {
        return Err(Error::new(ErrorKind::NameTooLong, "object name is longer than the limit")
            .expected_found(format!("<= {} bytes", limits.max_name_len), name.len()));
    }
    Ok(())
}

pub(crate) fn check_attributes(value: &Value, field: &'static str) -> Result<()> {
    if value.as_map().is_none() {
        return Err(Error::new(ErrorKind::AttributesNotAMap, "attributes must be a map")
            .field(field)
            .expected_found("map", value.kind_name()));
    }
    Ok(())
}

#[cfg(test)]
mod components_tests {
    use super::*;
    use crate::DType;

    fn c(offset: u64) -> Component {
        Component::new(DType::U8, offset, 1)
    }

    #[test]
    fn behaves_as_a_map_in_role_order() {
        let mut m = Components::new();
        assert_eq!(m.insert("values".into(), c(1)), None);
        assert_eq!(m.insert("indptr".into(), c(2)), None);
        assert_eq!(m.insert("indices".into(), c(3)), None);
        assert_eq!(m.insert("values".into(), c(4)), Some(c(1)));
        assert_eq!(m.keys().collect::<Vec<_>>(), ["indices", "indptr", "values"]);
        assert_eq!(m["values"], c(4));
        assert_eq!(m.get("nope"), None);
        assert!(m.contains_key("indptr"));
        assert_eq!(m.remove("indptr"), Some(c(2)));
        assert_eq!(m.len(), 2);
        let pairs: Vec<(&str, u64)> = m.iter().map(|(r, c)| (r, c.offset)).collect();
        assert_eq!(pairs, [("indices", 3), ("values", 4)]);
    }

    #[test]
    fn every_sequence_of_changes_matches_a_btree_map() {
        // From one component (held inline) to several (a vector) and back, in every order of
        // a few roles, standard and not: the same answers as a B-tree map given the same calls.
        let roles = ["data", "values", "x", "indptr"];
        for seed in 0u64..400 {
            let mut m = Components::new();
            let mut tree = std::collections::BTreeMap::new();
            let mut state = seed;
            for step in 0..12u64 {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let role = roles[(state >> 33) as usize % roles.len()];
                if (state >> 40) % 3 == 0 {
                    assert_eq!(m.remove(role), tree.remove(role), "seed {seed} step {step}");
                } else {
                    let got = m.insert(role.to_owned(), c(step));
                    assert_eq!(got, tree.insert(role.to_owned(), c(step)), "seed {seed}");
                }
                assert_eq!(m.len(), tree.len());
                assert!(m.iter().eq(tree.iter().map(|(r, c)| (r.as_str(), c))), "seed {seed}");
                let rebuilt: Components = tree.clone().into_iter().collect();
                assert_eq!(rebuilt, m, "built at once or by steps, the same map");
                assert_eq!(
                    m.clone().into_iter().collect::<Vec<_>>(),
                    tree.clone().into_iter().collect::<Vec<_>>()
                );
            }
        }
    }

    #[test]
    fn from_entries_sorts_and_the_last_of_a_repeated_role_wins() {
        let entries = vec![("b".into(), c(1)), ("a".into(), c(2)), ("b".into(), c(3))];
        let (m, repeated) = Components::from_entries(entries);
        assert!(repeated);
        assert_eq!(m.iter().map(|(r, c)| (r, c.offset)).collect::<Vec<_>>(), [("a", 2), ("b", 3)]);
        let (m, repeated) = Components::from_entries(vec![("z".into(), c(1)), ("y".into(), c(2))]);
        assert!(!repeated);
        assert_eq!(m.keys().collect::<Vec<_>>(), ["y", "z"]);
    }
}
