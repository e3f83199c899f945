//! The one in-memory model that every zTensor version decodes into: a manifest of objects made
//! of components.
//!
//! Version-specific wire schemas live in [`v0_1`] and [`v1`]; everything above them sees only
//! this model.

use std::fmt;

use crate::digest::Digest;
use crate::dtype::{LogicalType, StorageType};
use crate::error::{Error, ErrorKind, Result};
use crate::framing::Container;
use crate::limits::Limits;
use crate::value::Value;

pub mod v0_1;
pub mod v1;

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
    Unknown(String),
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
            other => Format::Unknown(other.to_owned()),
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
    Unknown(String),
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
            other => Encoding::Unknown(other.to_owned()),
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
    Unknown(String),
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
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// The byte order of the decoded elements.
    pub byte_order: ByteOrder,
    /// Keys of the component map this implementation does not know, preserved (v1.x).
    pub extra: Vec<(String, Value)>,
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
            byte_order: ByteOrder::Little,
            extra: Vec::new(),
        }
    }
}

/// An object's components by role, in role order, as a map would hold them.
///
/// A sorted vector rather than a `BTreeMap`: objects have one to a few components, and a B-tree
/// allocates room for eleven entries in its first node (about 2.4 KB here) whatever it holds,
/// which made a decoded manifest cost some thirty times its bytes. Building one from entries in
/// any order is a sort; lookups are binary searches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Components(Vec<(String, Component)>);

impl Components {
    /// No components.
    pub fn new() -> Components {
        Components(Vec::new())
    }

    /// Builds the map from entries in any order; a role given twice keeps its last component
    /// (as inserting would). Also says whether a role was given twice.
    pub fn from_entries(mut entries: Vec<(String, Component)>) -> (Components, bool) {
        // Stable, so among equal roles the last given is last.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let before = entries.len();
        entries.dedup_by(|later, earlier| {
            let same = later.0 == earlier.0;
            if same {
                std::mem::swap(later, earlier);
            }
            same
        });
        let repeated = entries.len() != before;
        // Objects usually have one to three components; a vector grown by pushes holds room
        // for four, and a manifest holds millions of these.
        entries.shrink_to_fit();
        (Components(entries), repeated)
    }

    fn find(&self, role: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(r, _)| r.as_str().cmp(role))
    }

    /// Adds or replaces the component of `role`, returning the one it replaced.
    pub fn insert(&mut self, role: String, component: Component) -> Option<Component> {
        match self.find(&role) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, component)),
            Err(i) => {
                self.0.insert(i, (role, component));
                None
            }
        }
    }

    /// The component of `role`.
    pub fn get(&self, role: &str) -> Option<&Component> {
        self.find(role).ok().map(|i| &self.0[i].1)
    }

    /// Where the component of `role` is in role order.
    pub(crate) fn index_of(&self, role: &str) -> Option<usize> {
        self.find(role).ok()
    }

    /// The role as stored and the component of `role`.
    pub fn get_key_value(&self, role: &str) -> Option<(&String, &Component)> {
        self.find(role).ok().map(|i| (&self.0[i].0, &self.0[i].1))
    }

    /// The component of `role`, to change.
    pub fn get_mut(&mut self, role: &str) -> Option<&mut Component> {
        self.find(role).ok().map(|i| &mut self.0[i].1)
    }

    /// Removes and returns the component of `role`.
    pub fn remove(&mut self, role: &str) -> Option<Component> {
        self.find(role).ok().map(|i| self.0.remove(i).1)
    }

    /// Whether there is a component of `role`.
    pub fn contains_key(&self, role: &str) -> bool {
        self.find(role).is_ok()
    }

    /// How many components.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Removes them all.
    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// Roles and components, in role order.
    pub fn iter(&self) -> ComponentsIter<'_> {
        ComponentsIter(self.0.iter())
    }

    /// The roles, in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &String> + ExactSizeIterator + Clone {
        self.0.iter().map(|(r, _)| r)
    }

    /// The components, in role order.
    pub fn values(
        &self,
    ) -> impl DoubleEndedIterator<Item = &Component> + ExactSizeIterator + Clone {
        self.0.iter().map(|(_, c)| c)
    }

    /// The components, in role order, to change.
    pub fn values_mut(
        &mut self,
    ) -> impl DoubleEndedIterator<Item = &mut Component> + ExactSizeIterator {
        self.0.iter_mut().map(|(_, c)| c)
    }
}

/// The iterator of [`Components::iter`]: `(role, component)` in role order.
#[derive(Debug, Clone)]
pub struct ComponentsIter<'a>(std::slice::Iter<'a, (String, Component)>);

impl<'a> Iterator for ComponentsIter<'a> {
    type Item = (&'a String, &'a Component);
    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(r, c)| (r, c))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl DoubleEndedIterator for ComponentsIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back().map(|(r, c)| (r, c))
    }
}

impl ExactSizeIterator for ComponentsIter<'_> {}

impl<'a> IntoIterator for &'a Components {
    type Item = (&'a String, &'a Component);
    type IntoIter = ComponentsIter<'a>;
    fn into_iter(self) -> ComponentsIter<'a> {
        self.iter()
    }
}

impl IntoIterator for Components {
    type Item = (String, Component);
    type IntoIter = std::vec::IntoIter<(String, Component)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl FromIterator<(String, Component)> for Components {
    fn from_iter<I: IntoIterator<Item = (String, Component)>>(entries: I) -> Components {
        Components::from_entries(entries.into_iter().collect()).0
    }
}

impl std::ops::Index<&str> for Components {
    type Output = Component;
    /// # Panics
    /// When there is no component of `role`, as a map's index does.
    fn index(&self, role: &str) -> &Component {
        self.get(role).unwrap_or_else(|| panic!("no component {role:?}"))
    }
}

/// A named object: shape, format, attributes and components.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// The object's name (v1.x `objects` key, v0.1 `name`).
    pub name: String,
    /// The logical shape; empty for a scalar.
    pub shape: Vec<u64>,
    /// The layout schema.
    pub format: Format,
    /// Per-object attributes; for v0.1, the tensor map's custom keys.
    pub attributes: Option<Value>,
    /// The components by role.
    pub components: Components,
    /// How the components hold the data.
    pub packing: Packing,
    /// Keys of the object map this implementation does not know, preserved (v1.x).
    pub extra: Vec<(String, Value)>,
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
            extra: Vec::new(),
        }
    }

    /// Adds a component, returning the object (builder style).
    #[must_use]
    pub fn with_component(mut self, role: impl Into<String>, component: Component) -> Object {
        self.components.insert(role.into(), component);
        self
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
    pub attributes: Option<Value>,
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
        if container == Container::V1
            && let Some(manifest) = v1::decode_direct(bytes, limits)
        {
            return Ok(manifest);
        }
        Manifest::decode_general(container, bytes, limits)
    }

    /// [`Manifest::decode`] through the general CBOR value tree only, without the direct path
    /// it tries first for v1.x. Same results, slower; public so tests outside this crate can hold
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
        let mut names = std::collections::HashSet::with_capacity(self.objects.len());
        for object in &self.objects {
            if !names.insert(object.name.as_str()) {
                return Err(Error::new(ErrorKind::DuplicateName, "two objects share a name")
                    .in_object(&object.name));
            }
        }
        let value = match self.version {
            Version::V0_1 => v0_1::to_value(self)?,
            Version::V1_1 | Version::V1_2 => v1::to_value(self)?,
        };
        crate::cbor::encode(&value)
    }

    /// The object called `name` (a linear scan; [`crate::ValidatedManifest`] has an index).
    pub fn object(&self, name: &str) -> Option<&Object> {
        self.objects.iter().find(|o| o.name == name)
    }
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
        let pairs: Vec<(String, u64)> = m.iter().map(|(r, c)| (r.clone(), c.offset)).collect();
        assert_eq!(pairs, [("indices".to_owned(), 3), ("values".to_owned(), 4)]);
        // Against a B-tree map built the same way.
        let tree: std::collections::BTreeMap<String, Component> =
            m.iter().map(|(r, c)| (r.clone(), c.clone())).collect();
        assert!(tree.iter().eq(m.iter()));
    }

    #[test]
    fn from_entries_sorts_and_the_last_of_a_repeated_role_wins() {
        let entries = vec![("b".into(), c(1)), ("a".into(), c(2)), ("b".into(), c(3))];
        let (m, repeated) = Components::from_entries(entries);
        assert!(repeated);
        assert_eq!(
            m.iter().map(|(r, c)| (r.as_str(), c.offset)).collect::<Vec<_>>(),
            [("a", 2), ("b", 3)]
        );
        let (m, repeated) = Components::from_entries(vec![("z".into(), c(1)), ("y".into(), c(2))]);
        assert!(!repeated);
        assert_eq!(m.keys().collect::<Vec<_>>(), ["y", "z"]);
    }
}
