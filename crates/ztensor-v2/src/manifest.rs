//! The manifest's schema (`spec/ztensor-2.md` §2.4–2.8): objects made of parts that point at
//! blobs, the shard table, attributes; parsed from the decoded tree, then validated as a whole.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use ztensor_format::Attributes;

use crate::cbor::{MAX_VALUES, Value};
use crate::error::{Error, Result, Rule};

/// The finest alignment of a blob, and the lowest offset one may start at.
pub const ALIGNMENT: u64 = 4096;
/// The highest rank.
pub const MAX_RANK: usize = 64;
/// The longest name, in bytes.
pub const MAX_NAME: usize = 1024;

/// A storage type: the 12 of zTensor 2, all little-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Dtype {
    F64,
    F32,
    F16,
    Bf16,
    I64,
    I32,
    I16,
    I8,
    U64,
    U32,
    U16,
    U8,
}

impl Dtype {
    /// The type named `name` (`bf16`), if it is one of the 12.
    pub fn from_name(name: &str) -> Option<Dtype> {
        Some(match name {
            "f64" => Dtype::F64,
            "f32" => Dtype::F32,
            "f16" => Dtype::F16,
            "bf16" => Dtype::Bf16,
            "i64" => Dtype::I64,
            "i32" => Dtype::I32,
            "i16" => Dtype::I16,
            "i8" => Dtype::I8,
            "u64" => Dtype::U64,
            "u32" => Dtype::U32,
            "u16" => Dtype::U16,
            "u8" => Dtype::U8,
            _ => return None,
        })
    }

    /// The type's name (`bf16`).
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F64 => "f64",
            Dtype::F32 => "f32",
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
            Dtype::I64 => "i64",
            Dtype::I32 => "i32",
            Dtype::I16 => "i16",
            Dtype::I8 => "i8",
            Dtype::U64 => "u64",
            Dtype::U32 => "u32",
            Dtype::U16 => "u16",
            Dtype::U8 => "u8",
        }
    }

    /// Bytes per element.
    pub fn width(self) -> u64 {
        match self {
            Dtype::F64 | Dtype::I64 | Dtype::U64 => 8,
            Dtype::F32 | Dtype::I32 | Dtype::U32 => 4,
            Dtype::F16 | Dtype::Bf16 | Dtype::I16 | Dtype::U16 => 2,
            Dtype::I8 | Dtype::U8 => 1,
        }
    }
}

/// How many bytes `n` elements of a logical type take.
type StoredSize = fn(u64) -> Option<u64>;

/// The registered logical types: each pins its storage type and gives the stored size of `n`
/// elements. `None` for a type this registry does not hold (legal, but not to be decoded).
pub(crate) fn logical(name: &str) -> Option<(Dtype, StoredSize)> {
    Some(match name {
        "bool" | "f8_e4m3fn" | "f8_e5m2" | "f8_e4m3fnuz" | "f8_e5m2fnuz" | "f8_e8m0" => {
            (Dtype::U8, Some)
        }
        "f4_e2m1" => (Dtype::U8, |n| Some(n.div_ceil(2))),
        "complex64" => (Dtype::F32, |n| n.checked_mul(8)),
        "complex128" => (Dtype::F64, |n| n.checked_mul(16)),
        _ => return None,
    })
}

/// A name that many entries of a manifest share (a layout, a part's role, a logical type, an
/// encoding, a shard): held once, each entry holding a counted reference to it.
pub type Shared = Arc<str>;

/// The names a manifest shares, each held once ([`Shared`]).
#[derive(Default)]
pub(crate) struct Interner {
    names: HashSet<Shared>,
}

impl Interner {
    /// The one copy of `name`.
    pub(crate) fn get(&mut self, name: &str) -> Shared {
        if let Some(shared) = self.names.get(name) {
            return Arc::clone(shared);
        }
        let shared: Shared = name.into();
        self.names.insert(Arc::clone(&shared));
        shared
    }
}

/// A part: one array of one storage type, in a blob.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    /// The storage type.
    pub dtype: Dtype,
    /// The logical type's name, when the part has one.
    pub logical: Option<Shared>,
    /// The blob: offset and length in the file the part lies in.
    pub blob: (u64, u64),
    /// The shard the blob lies in (`None`: this file).
    pub shard: Option<Shared>,
    /// The encoding's name (`None`: raw).
    pub encoding: Option<Shared>,
    /// The decoded length, for an encoded part.
    pub decoded_length: Option<u64>,
    /// The digest string (`xxh3:…`, `sha256:…`) of the decoded bytes.
    pub digest: Option<Box<str>>,
}

impl Part {
    /// How many bytes the part decodes to.
    pub fn decoded_len(&self) -> u64 {
        self.decoded_length.unwrap_or(self.blob.1)
    }
}

/// Entries by name, in the byte order of their names: a sorted list, not a tree. A manifest of
/// a million one-part objects holds a million objects and a million part lists, and a tree's
/// node is sized for eleven entries; entry `i` of the list is also object `i` of the
/// tensor-source interface.
#[derive(Debug, Clone, PartialEq)]
pub struct Named<T, K = String>(Vec<(K, T)>);

/// An object's parts by name (role names are shared: most objects have the same few).
pub type Parts = Named<Part, Shared>;

impl<T, K> Default for Named<T, K> {
    fn default() -> Named<T, K> {
        Named(Vec::new())
    }
}

impl<T, K: AsRef<str>> Named<T, K> {
    /// The entries `entries` (names unique), sorted by name.
    pub fn new(mut entries: Vec<(K, T)>) -> Named<T, K> {
        entries.sort_by(|a, b| a.0.as_ref().as_bytes().cmp(b.0.as_ref().as_bytes()));
        entries.shrink_to_fit();
        Named(entries)
    }

    /// The entry named `name`.
    pub fn get(&self, name: &str) -> Option<&T> {
        self.get_key_value(name).map(|(_, v)| v)
    }

    /// The entry named `name`, with its name.
    pub fn get_key_value(&self, name: &str) -> Option<(&K, &T)> {
        let i =
            self.0.binary_search_by(|(n, _)| n.as_ref().as_bytes().cmp(name.as_bytes())).ok()?;
        let (n, v) = &self.0[i];
        Some((n, v))
    }

    /// Where the entry named `name` is in the list.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.0.binary_search_by(|(n, _)| n.as_ref().as_bytes().cmp(name.as_bytes())).ok()
    }

    /// Entry `index`, with its name (in name order).
    pub fn at(&self, index: usize) -> Option<(&K, &T)> {
        self.0.get(index).map(|(n, v)| (n, v))
    }

    /// The names, in order.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &K> {
        self.0.iter().map(|(n, _)| n)
    }

    /// The entries, in the order of their names.
    pub fn values(&self) -> impl ExactSizeIterator<Item = &T> {
        self.0.iter().map(|(_, v)| v)
    }

    /// Names and entries, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&K, &T)> {
        self.0.iter().map(|(n, v)| (n, v))
    }

    /// How many entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<T, K: AsRef<str>> std::ops::Index<&str> for Named<T, K> {
    type Output = T;

    /// # Panics
    /// When there is no entry `name`.
    fn index(&self, name: &str) -> &T {
        self.get(name).unwrap_or_else(|| panic!("no entry {name:?}"))
    }
}

/// The iterator over a [`Named`] list's names and entries.
pub type NamedIter<'a, T, K = String> =
    std::iter::Map<std::slice::Iter<'a, (K, T)>, fn(&'a (K, T)) -> (&'a K, &'a T)>;

impl<'a, T, K> IntoIterator for &'a Named<T, K> {
    type Item = (&'a K, &'a T);
    type IntoIter = NamedIter<'a, T, K>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(n, v)| (n, v))
    }
}

/// An object: a shape, a layout and named parts.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    /// The shape (row-major).
    pub shape: Vec<u64>,
    /// The layout's name (`dense`, `zt.sparse_csr/1`, …).
    pub layout: Shared,
    /// The parts, by name.
    pub parts: Parts,
    /// The object's attributes (a map whose keys are names), held as the manifest stores them:
    /// their deterministic CBOR, read in place (an attribute array of millions of items costs
    /// what its bytes do, not a tree several times their size).
    pub attributes: Option<Box<Attributes>>,
}

/// An entry of the shard table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    /// The shard file's exact size.
    pub size: u64,
    /// The digest string of the whole shard file.
    pub digest: String,
}

/// A validated manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// The objects, by name (in the byte order of their names).
    pub objects: Named<Object>,
    /// The shard table.
    pub shards: BTreeMap<String, Shard>,
    /// The file's attributes (a map whose keys are names), held as the manifest stores them
    /// (see [`Object::attributes`]).
    pub attributes: Option<Attributes>,
}

fn schema(message: impl Into<String>) -> Error {
    Error::rule(Rule::Schema, message)
}

/// The entries of a map whose keys must be text (`what` names it in messages).
fn text_map<'v>(value: &'v Value, what: &str) -> Result<Vec<(&'v str, &'v Value)>> {
    let Value::Map(entries) = value else { return Err(schema(format!("{what} is not a map"))) };
    entries
        .iter()
        .map(|(k, v)| {
            k.as_text()
                .map(|k| (k, v))
                .ok_or_else(|| schema(format!("a key of {what} is not text")))
        })
        .collect()
}

/// The value of `key` in a map whose other keys (text or not) are ignored.
fn field<'v>(entries: &'v [(Value, Value)], key: &str) -> Option<&'v Value> {
    entries.iter().find(|(k, _)| k.as_text() == Some(key)).map(|(_, v)| v)
}

fn check_name(name: &str, what: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_NAME || name.contains('\0') {
        return Err(Error::rule(
            Rule::Name,
            format!("{what} {name:?} is empty, longer than {MAX_NAME} bytes or holds U+0000"),
        ));
    }
    Ok(())
}

fn check_shard_name(name: &str) -> Result<()> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > 64 || name.starts_with('.') || !name.chars().all(allowed) {
        return Err(Error::rule(
            Rule::ShardName,
            format!(
                "shard name {name:?} is not 1 to 64 of A-Z a-z 0-9 . _ - (not starting with .)"
            ),
        ));
    }
    Ok(())
}

fn check_digest(digest: &str) -> Result<()> {
    let ok = digest.split_once(':').is_some_and(|(algo, hex)| {
        !algo.is_empty()
            && algo.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            && !hex.is_empty()
            && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    });
    if ok { Ok(()) } else { Err(schema(format!("digest {digest:?} is not ALGO:lowercase-hex"))) }
}

fn attributes(value: Option<&Value>, what: &str) -> Result<Option<Attributes>> {
    let Some(value) = value else { return Ok(None) };
    check_attributes(value, what)?;
    attributes_of(&crate::cbor::encode(value), what).map(Some)
}

/// Attributes are a map whose keys are names.
fn check_attributes(value: &Value, what: &str) -> Result<()> {
    for (key, _) in text_map(value, what)? {
        check_name(key, "an attribute key")?;
    }
    Ok(())
}

/// The attributes whose deterministic CBOR is `encoded` (one item, its rules checked: the
/// manifest's decoder read it), checked as [`check_attributes`] checks a tree (`what` names
/// them in messages) and kept as those bytes: the encoding zTensor 2 requires (§2.2, RFC 8949
/// §4.2.1) is the one [`Attributes`] holds, so the bytes kept are the manifest's own.
pub(crate) fn attributes_of(encoded: &[u8], what: &str) -> Result<Attributes> {
    if encoded.first().map(|b| b >> 5) != Some(5) {
        return Err(schema(format!("{what} is not a map")));
    }
    // Checked by the manifest's decoder: this copies the bytes, and only refuses what a tree
    // made by hand (`parse`) may hold, a key given twice or nesting past the limit.
    let attributes = Attributes::from_cbor(encoded, crate::cbor::MAX_DEPTH + 1)
        .map_err(|e| schema(format!("{what}: {e}")))?;
    debug_assert_eq!(attributes.as_bytes(), encoded, "deterministic CBOR is kept as it is");
    if attributes.entries().any(|(k, _)| k.as_text().is_none()) {
        return Err(schema(format!("a key of {what} is not text")));
    }
    for (key, _) in attributes.entries() {
        check_name(key.as_text().unwrap_or_default(), "an attribute key")?;
    }
    Ok(attributes)
}

fn optional_text<'v>(entries: &'v [(Value, Value)], key: &str) -> Result<Option<&'v str>> {
    match field(entries, key) {
        None => Ok(None),
        Some(v) => v.as_text().map(Some).ok_or_else(|| schema(format!("`{key}` is not text"))),
    }
}

/// A part's fields as found, before the rules on them are checked ([`PartFields::check`]).
#[derive(Default)]
struct PartFields<'v> {
    dtype: Option<&'v str>,
    logical: Option<&'v str>,
    blob: Option<(u64, u64)>,
    shard: Option<&'v str>,
    encoding: Option<&'v str>,
    decoded_length: Option<u64>,
    digest: Option<&'v str>,
}

impl PartFields<'_> {
    /// The part, its fields checked in the order the schema gives them.
    fn check(self, names: &mut Interner) -> Result<Part> {
        let dtype = self.dtype.ok_or_else(|| schema("a part has no `dtype`"))?;
        let dtype =
            Dtype::from_name(dtype).ok_or_else(|| schema(format!("unknown dtype {dtype:?}")))?;
        if let Some((pinned, _)) = self.logical.and_then(logical)
            && pinned != dtype
        {
            return Err(schema(format!(
                "logical type {:?} is stored as {}, not {}",
                self.logical.unwrap_or_default(),
                pinned.name(),
                dtype.name()
            )));
        }
        let blob = self.blob.ok_or_else(|| schema("a part has no `blob`"))?;
        if let Some(shard) = self.shard {
            check_shard_name(shard)?;
        }
        if self.encoding.is_some() != self.decoded_length.is_some() {
            return Err(schema("`decoded_length` is given exactly when `encoding` is"));
        }
        if let Some(d) = self.digest {
            check_digest(d)?;
        }
        Ok(Part {
            dtype,
            logical: self.logical.map(|l| names.get(l)),
            blob,
            shard: self.shard.map(|s| names.get(s)),
            encoding: self.encoding.map(|e| names.get(e)),
            decoded_length: self.decoded_length,
            digest: self.digest.map(Box::from),
        })
    }
}

fn part(value: &Value, names: &mut Interner) -> Result<Part> {
    let Value::Map(entries) = value else { return Err(schema("a part is not a map")) };
    let dtype = optional_text(entries, "dtype")?;
    let logical = optional_text(entries, "type")?;
    let blob = match field(entries, "blob") {
        Some(Value::Array(a)) if a.len() == 2 => match (a[0].as_uint(), a[1].as_uint()) {
            (Some(offset), Some(len)) => Some((offset, len)),
            _ => return Err(schema("`blob` is not two unsigned integers")),
        },
        Some(_) => return Err(schema("`blob` is not [offset, length]")),
        None => None,
    };
    let shard = optional_text(entries, "shard")?;
    let encoding = optional_text(entries, "encoding")?;
    let decoded_length = match field(entries, "decoded_length") {
        None => None,
        Some(v) => {
            Some(v.as_uint().ok_or_else(|| schema("`decoded_length` is not an unsigned integer"))?)
        }
    };
    let digest = optional_text(entries, "digest")?;
    PartFields { dtype, logical, blob, shard, encoding, decoded_length, digest }.check(names)
}

fn object(value: &Value, names: &mut Interner) -> Result<Object> {
    let Value::Map(entries) = value else { return Err(schema("an object is not a map")) };
    let shape = match field(entries, "shape") {
        Some(Value::Array(dims)) => dims
            .iter()
            .map(|d| d.as_uint().ok_or_else(|| schema("a dimension is not an unsigned integer")))
            .collect::<Result<Vec<u64>>>()?,
        Some(_) => return Err(schema("`shape` is not an array")),
        None => return Err(schema("an object has no `shape`")),
    };
    let layout = names
        .get(optional_text(entries, "layout")?.ok_or_else(|| schema("an object has no `layout`"))?);
    let parts_value = field(entries, "parts").ok_or_else(|| schema("an object has no `parts`"))?;
    let mut named = Vec::new();
    for (name, value) in text_map(parts_value, "`parts`")? {
        check_name(name, "part name")?;
        named.push((names.get(name), part(value, names)?));
    }
    let parts = Parts::new(named);
    if parts.is_empty() {
        return Err(schema("an object has no parts"));
    }
    let attributes = attributes(field(entries, "attributes"), "an object's `attributes`")?;
    Ok(Object { shape, layout, parts, attributes: attributes.map(Box::new) })
}

/// Parses the decoded manifest (§2.4–2.7), checking the schema, names and shard names.
///
/// # Errors
/// `schema`, `name` or `shard_name`.
pub fn parse(root: &Value) -> Result<Manifest> {
    let Value::Map(entries) = root else { return Err(schema("the manifest is not a map")) };
    let objects_value =
        field(entries, "objects").ok_or_else(|| schema("the manifest has no `objects`"))?;
    let mut named = Vec::new();
    let mut names = Interner::default();
    for (name, value) in text_map(objects_value, "`objects`")? {
        check_name(name, "object name")?;
        named.push((name.to_owned(), object(value, &mut names)?));
    }
    let objects = Named::new(named);
    let shards = shard_table(field(entries, "shards"))?;
    let attributes = attributes(field(entries, "attributes"), "`attributes`")?;
    Ok(Manifest { objects, shards, attributes })
}

/// The shard table (the value of `shards`, if the manifest has one).
fn shard_table(table: Option<&Value>) -> Result<BTreeMap<String, Shard>> {
    let mut shards = BTreeMap::new();
    if let Some(table) = table {
        for (name, value) in text_map(table, "`shards`")? {
            check_shard_name(name)?;
            let Value::Map(e) = value else { return Err(schema("a shard entry is not a map")) };
            let size = field(e, "size").and_then(Value::as_uint);
            let digest = optional_text(e, "digest")?;
            let (Some(size), Some(digest)) = (size, digest) else {
                return Err(schema(format!("shard {name:?} needs `size` and `digest`")));
            };
            check_digest(digest)?;
            shards.insert(name.to_owned(), Shard { size, digest: digest.to_owned() });
        }
    }
    Ok(shards)
}

/// Checks the manifest's CBOR (§2.2) and parses it (§2.4–2.7) as [`crate::cbor::decode`] then
/// [`parse`] would, without building the whole tree: the objects are decoded one at a time, so a
/// manifest of a million objects never holds a million decoded items at once.
///
/// # Errors
/// The CBOR rules (the message says so), `manifest_too_large` past [`MAX_VALUES`] items, then
/// as [`parse`].
pub fn parse_bytes(bytes: &[u8]) -> Result<Manifest> {
    parse_bytes_within(bytes, MAX_VALUES)
}

/// [`parse_bytes`] with a value budget of `max_values` items.
pub(crate) fn parse_bytes_within(bytes: &[u8], max_values: u64) -> Result<Manifest> {
    match direct::manifest(direct::Bytes::Memory(bytes), max_values)? {
        Some((manifest, _)) => Ok(manifest),
        None => parse_in_steps(bytes, max_values),
    }
}

/// The bytes of a manifest read at a time by [`parse_read`] (more when one item needs more).
pub(crate) const WINDOW: usize = 1 << 20;

/// Parses a manifest of `len` bytes read `window` bytes at a time with `read(at, buf)`, in one
/// pass and without holding its bytes; `None` when it is not parsed so, and [`parse_bytes`] on
/// the whole of it is to give the verdict. With the manifest, the XXH3-64 of its bytes.
///
/// # Errors
/// Those of `read`.
pub(crate) fn parse_read(
    len: u64,
    window: usize,
    read: &mut dyn FnMut(u64, &mut [u8]) -> Result<()>,
) -> Result<Option<(Manifest, u64)>> {
    direct::manifest(direct::Bytes::Read { len, window, read }, MAX_VALUES)
}

/// [`parse_bytes`] the general way: the CBOR checked whole (and its items counted against
/// `max_values`), then the objects decoded one at a time into trees and parsed, then the rest.
fn parse_in_steps(bytes: &[u8], max_values: u64) -> Result<Manifest> {
    use crate::cbor;
    let cbor_error = |e: Error| e.within("in the manifest's CBOR");
    // Every item was counted before any is decoded: what follows decodes parts of what was
    // counted, and builds no more items than that.
    // The refusals below are those `parse` gives the whole tree, found without building it.
    let root = cbor::map_entries_within(bytes, max_values).map_err(cbor_error)?;
    let Some(root) = root else { return Err(schema("the manifest is not a map")) };
    let Some((_, range)) = root.iter().find(|(k, _)| k.as_text() == Some("objects")) else {
        return Err(schema("the manifest has no `objects`"));
    };
    let Some(entries) = cbor::entries_at(bytes, range.clone(), 1)? else {
        return Err(schema("`objects` is not a map"));
    };
    // Every key is text before any object is looked at (as the whole tree's parse has it).
    if entries.iter().any(|(k, _)| k.as_text().is_none()) {
        return Err(schema("a key of `objects` is not text"));
    }
    let mut named = Vec::with_capacity(entries.len());
    let mut names = Interner::default();
    for (key, range) in entries {
        // The name decoded with the key is kept, not copied.
        let Value::Text(name) = key else { return Err(schema("a key of `objects` is not text")) };
        check_name(&name, "object name")?;
        named.push((name, object_at(bytes, range, &mut names)?));
    }
    let objects = Named::new(named);
    // The shard table is decoded whole; the attributes are kept as their bytes; keys not known
    // (checked above) are left: nothing is built of them.
    let range_of = |name: &str| root.iter().find(|(k, _)| k.as_text() == Some(name));
    let table = range_of("shards").map(|(_, range)| cbor::decode_at(bytes, range.clone(), 1));
    let shards = shard_table(table.transpose()?.as_ref())?;
    let attributes = range_of("attributes")
        .map(|(_, range)| attributes_of(&bytes[range.clone()], "`attributes`"))
        .transpose()?;
    Ok(Manifest { objects, shards, attributes })
}

/// The object at `range` of the checked manifest `bytes`, parsed as [`object`] parses its tree
/// but for its attributes, kept as their bytes (never decoded into a tree).
fn object_at(bytes: &[u8], range: std::ops::Range<usize>, names: &mut Interner) -> Result<Object> {
    use crate::cbor;
    let Some(entries) = cbor::entries_at(bytes, range.clone(), 2)? else {
        // Not a map: the tree's parse says so.
        return object(&cbor::decode_at(bytes, range, 2)?, names);
    };
    let mut tree = Vec::with_capacity(entries.len());
    let mut encoded = None;
    for (key, range) in entries {
        if key.as_text() == Some("attributes") {
            encoded = Some(range);
        } else {
            tree.push((key, cbor::decode_at(bytes, range, 3)?));
        }
    }
    // The attributes are the last thing `object` checks: their verdict comes in the same order.
    let mut o = object(&Value::Map(tree), names)?;
    if let Some(range) = encoded {
        let attributes = attributes_of(&bytes[range], "an object's `attributes`")?;
        o.attributes = Some(Box::new(attributes));
    }
    Ok(o)
}

/// The manifest read in one pass, objects built straight from the bytes with no tree between,
/// every CBOR rule checked on the way. Anything out of the plain case (a key of an object or a
/// part that is not text, a field of another type) or a broken rule gives `None`, and
/// [`parse_bytes`] takes the general way, which gives the verdict: so this path only ever
/// accepts what the general one accepts, with the same result (the corpus tests compare them
/// on every manifest and on damaged copies of each).
mod direct {
    use xxhash_rust::xxh3::Xxh3;

    use ztensor_format::Attributes;

    use super::{
        Interner, Manifest, Named, Object, Part, PartFields, Parts, Shared, attributes_of,
        check_name, shard_table,
    };
    use crate::cbor::{Decoder, KeyOrder, Value};
    use crate::error::Result;

    /// Reads a key of a map that must be text, checking its place after the one before.
    fn key<'a>(d: &mut Decoder<'a>, order: &mut KeyOrder, depth: usize) -> Option<&'a str> {
        let start = d.at();
        let key = d.text(depth).ok()??;
        order.next(d, start).ok()?;
        Some(key)
    }

    /// Where the manifest's bytes come from: all in memory, or read from a file a window at a
    /// time (`read(at, buf)` fills `buf` with the bytes at `at`), hashed as they arrive.
    pub(crate) enum Bytes<'a> {
        /// The whole manifest.
        Memory(&'a [u8]),
        /// A manifest of `len` bytes read on demand, `window` bytes at least at a time.
        Read { len: u64, window: usize, read: &'a mut dyn FnMut(u64, &mut [u8]) -> Result<()> },
    }

    /// A window on the manifest: the bytes from `base` on, read so far and not yet passed.
    struct Window<'a> {
        bytes: Bytes<'a>,
        buf: Vec<u8>,
        base: u64,
        pos: usize,
        hash: Xxh3,
        /// Items the manifest may still hold, of `max_values`: spent as items are passed.
        values_left: u64,
        max_values: u64,
    }

    impl<'a> Window<'a> {
        fn new(bytes: Bytes<'a>, max_values: u64) -> Window<'a> {
            Window {
                bytes,
                buf: Vec::new(),
                base: 0,
                pos: 0,
                hash: Xxh3::new(),
                values_left: max_values,
                max_values,
            }
        }

        /// The manifest's length.
        fn len(&self) -> u64 {
            match &self.bytes {
                Bytes::Memory(b) => b.len() as u64,
                Bytes::Read { len, .. } => *len,
            }
        }

        /// The bytes not yet passed, and how many of the manifest follow them.
        fn rest(&self) -> (&[u8], usize) {
            let (bytes, end) = match &self.bytes {
                Bytes::Memory(b) => (&b[self.pos..], b.len() as u64),
                Bytes::Read { .. } => (&self.buf[self.pos..], self.base + self.buf.len() as u64),
            };
            (bytes, usize::try_from(self.len() - end).unwrap_or(usize::MAX))
        }

        /// Reads on: the bytes not yet passed move to the front, and as many again are read
        /// after them (at least a window). `false` when the manifest has no more.
        fn more(&mut self) -> Result<bool> {
            let len = self.len();
            let Bytes::Read { read, window, .. } = &mut self.bytes else { return Ok(false) };
            let end = self.base + self.buf.len() as u64;
            if end == len {
                return Ok(false);
            }
            self.buf.drain(..self.pos);
            self.base += self.pos as u64;
            self.pos = 0;
            let want = self.buf.len().max(*window).max(1) as u64;
            let add = usize::try_from(want.min(len - end)).unwrap_or(usize::MAX);
            let kept = self.buf.len();
            // A window that cannot grow gives up: the general way reads the manifest whole,
            // and says so when the memory is refused.
            if self.buf.try_reserve_exact(add).is_err() {
                return Ok(false);
            }
            self.buf.resize(kept + add, 0);
            read(end, &mut self.buf[kept..])?;
            self.hash.update(&self.buf[kept..]);
            Ok(true)
        }

        /// The next item (or items) that `f` reads: `f` is given a reader on the bytes not
        /// yet passed and tried again on more when it fails before the manifest's end. `None`:
        /// it fails with the whole rest before it.
        fn next<T>(
            &mut self,
            mut f: impl FnMut(&mut Decoder<'_>) -> Option<T>,
        ) -> Result<Option<T>> {
            loop {
                let (values_left, max_values) = (self.values_left, self.max_values);
                let (bytes, beyond) = self.rest();
                let mut d = Decoder::window(bytes, beyond, values_left, max_values);
                if let Some(value) = f(&mut d) {
                    let (at, values_left) = (d.at(), d.values_left());
                    self.pos += at;
                    self.values_left = values_left;
                    return Ok(Some(value));
                }
                if !self.more()? {
                    return Ok(None);
                }
            }
        }

        /// Whether every byte was read and passed, and the XXH3-64 of those read.
        fn finish(mut self) -> Result<(bool, u64)> {
            while self.more()? {}
            let passed = self.rest().0.is_empty();
            Ok((passed, self.hash.digest()))
        }
    }

    /// The order of a map's keys across windows: the last key's encoding is kept.
    #[derive(Default)]
    struct Order(Option<Vec<u8>>);

    impl Order {
        /// Whether `key` (an encoding) sorts strictly after the last one.
        fn after(&self, key: &[u8]) -> bool {
            self.0.as_deref().is_none_or(|last| last < key)
        }

        fn set(&mut self, key: &[u8]) {
            let last = self.0.get_or_insert_with(Vec::new);
            last.clear();
            last.extend_from_slice(key);
        }

        /// As [`Order::set`] for a text key, encoded again rather than copied from a window.
        fn set_text(&mut self, key: &str) {
            let last = self.0.get_or_insert_with(Vec::new);
            last.clear();
            ztensor_format::cbor::head(last, 3, key.len() as u64);
            last.extend_from_slice(key.as_bytes());
        }
    }

    /// The manifest, parsed in one pass straight from its bytes; `Ok(None)` when the general
    /// way is to give the verdict. For bytes read from a file, also the XXH3-64 of the bytes.
    pub(crate) fn manifest(bytes: Bytes<'_>, max_values: u64) -> Result<Option<(Manifest, u64)>> {
        let mut w = Window::new(bytes, max_values);
        let Some(n) = w.next(|d| d.head(5, 0).ok()?)? else { return Ok(None) };
        let mut order = Order::default();
        let mut names = Interner::default();
        let mut objects = None;
        let (mut shards, mut attributes) = (None, None);
        for _ in 0..n {
            // The key, with the value unless it is `objects`. Only the shard table and the
            // attributes are kept; any other key and its value (text or not) are checked and
            // passed, building nothing.
            let entry = w.next(|d| {
                let key = match d.text(1).ok()? {
                    Some(text) => Some(text.to_owned()),
                    None => {
                        d.skip(1).ok()?;
                        None
                    }
                };
                let encoded = &d.bytes()[..d.at()];
                if !order.after(encoded) {
                    return None;
                }
                // `None`: the objects, read next; `Some(None)`: passed.
                let kept = match key {
                    Some(key) if key == "objects" => None,
                    Some(key) if key == "shards" => Some(Some(Kept::Shards(d.value(1).ok()?))),
                    // Checked, then kept as their bytes: never a tree.
                    Some(key) if key == "attributes" => {
                        let start = d.at();
                        d.skip(1).ok()?;
                        let attributes = attributes_of(&d.bytes()[start..d.at()], "").ok()?;
                        Some(Some(Kept::Attributes(attributes)))
                    }
                    _ => {
                        d.skip(1).ok()?;
                        Some(None)
                    }
                };
                Some((encoded.to_vec(), kept))
            })?;
            let Some((encoded, kept)) = entry else { return Ok(None) };
            order.set(&encoded);
            match kept {
                Some(Some(Kept::Shards(value))) => shards = Some(value),
                Some(Some(Kept::Attributes(a))) => attributes = Some(a),
                Some(None) => {}
                None => match self::objects(&mut w, &mut names)? {
                    Some(o) => objects = Some(o),
                    None => return Ok(None),
                },
            }
        }
        let (passed, hash) = w.finish()?;
        if !passed {
            return Ok(None);
        }
        // The shard table is small: parsed from its tree.
        let Ok(shards) = shard_table(shards.as_ref()) else { return Ok(None) };
        let Some(objects) = objects else { return Ok(None) };
        Ok(Some((Manifest { objects, shards, attributes }, hash)))
    }

    /// A value of the root that the one-pass parse keeps.
    enum Kept {
        /// The shard table's tree.
        Shards(Value),
        /// The file's attributes.
        Attributes(Attributes),
    }

    fn objects(w: &mut Window<'_>, names: &mut Interner) -> Result<Option<Named<Object>>> {
        let Some(n) = w.next(|d| d.head(5, 1).ok()?)? else { return Ok(None) };
        // Room for the count claimed, up to what the manifest's bytes can hold: an object
        // takes 40 bytes of CBOR at least (its name, layout, shape and a part with its type
        // and blob), so a hostile count reserves no more than a fraction of the manifest.
        let most = w.len() / 40;
        let mut named = Vec::with_capacity(usize::try_from(n.min(most)).unwrap_or(0));
        let mut order = Order::default();
        for _ in 0..n {
            let entry = w.next(|d| {
                let name = d.text(2).ok()??;
                let encoded = &d.bytes()[..d.at()];
                if !order.after(encoded) {
                    return None;
                }
                check_name(name, "object name").ok()?;
                Some((name.to_owned(), object(d, names)?))
            })?;
            let Some((name, object)) = entry else { return Ok(None) };
            order.set_text(&name);
            named.push((name, object));
        }
        Ok(Some(Named::new(named)))
    }

    fn object(d: &mut Decoder<'_>, names: &mut Interner) -> Option<Object> {
        let n = d.head(5, 2).ok()??;
        let (mut shape, mut layout, mut parts, mut attributes) = (None, None, None, None);
        let mut order = KeyOrder::default();
        for _ in 0..n {
            match key(d, &mut order, 3)? {
                "shape" => {
                    let rank = d.head(4, 3).ok()??;
                    let mut dims = Vec::with_capacity(usize::try_from(rank.min(64)).ok()?);
                    for _ in 0..rank {
                        dims.push(d.head(0, 4).ok()??);
                    }
                    shape = Some(dims);
                }
                "layout" => layout = Some(d.text(3).ok()??),
                "parts" => parts = Some(self::parts(d, names)?),
                "attributes" => {
                    let start = d.at();
                    d.skip(3).ok()?;
                    let encoded = &d.bytes()[start..d.at()];
                    attributes = Some(Box::new(attributes_of(encoded, "").ok()?));
                }
                _ => d.skip(3).ok()?,
            }
        }
        let parts = Parts::new(parts?);
        if parts.is_empty() {
            return None;
        }
        Some(Object { shape: shape?, layout: names.get(layout?), parts, attributes })
    }

    fn parts(d: &mut Decoder<'_>, names: &mut Interner) -> Option<Vec<(Shared, Part)>> {
        let n = d.head(5, 3).ok()??;
        let mut named = Vec::with_capacity(usize::try_from(n.min(8)).ok()?);
        let mut order = KeyOrder::default();
        for _ in 0..n {
            let name = key(d, &mut order, 4)?;
            check_name(name, "part name").ok()?;
            named.push((names.get(name), part(d, names)?));
        }
        Some(named)
    }

    fn part(d: &mut Decoder<'_>, names: &mut Interner) -> Option<Part> {
        let n = d.head(5, 4).ok()??;
        let mut f = PartFields::default();
        let mut order = KeyOrder::default();
        for _ in 0..n {
            match key(d, &mut order, 5)? {
                "dtype" => f.dtype = Some(d.text(5).ok()??),
                "type" => f.logical = Some(d.text(5).ok()??),
                "blob" => {
                    if d.head(4, 5).ok()?? != 2 {
                        return None;
                    }
                    let offset = d.head(0, 6).ok()??;
                    f.blob = Some((offset, d.head(0, 6).ok()??));
                }
                "shard" => f.shard = Some(d.text(5).ok()??),
                "encoding" => f.encoding = Some(d.text(5).ok()??),
                "decoded_length" => f.decoded_length = Some(d.head(0, 5).ok()??),
                "digest" => f.digest = Some(d.text(5).ok()??),
                _ => d.skip(5).ok()?,
            }
        }
        f.check(names).ok()
    }
}

/// How many elements `shape` holds, or `None` when the product overflows.
pub fn elements(shape: &[u64]) -> Option<u64> {
    shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d))
}

/// The stored size of `n` elements of `part` (by its logical type, else its storage type), or
/// `None` for a logical type not in the registry (or an overflow).
fn stored_size(part: &Part, n: u64) -> Option<u64> {
    match &part.logical {
        Some(name) => logical(name).and_then(|(_, size)| size(n)),
        None => n.checked_mul(part.dtype.width()),
    }
}

/// Validates the manifest as a whole (§2.8): shapes, blob placement and bounds against a file
/// whose blobs must end by `region_end` (its size less the footer), shard references, the
/// rules of the layouts this reader knows, and that blobs of one file are identical or
/// disjoint (the manifest's own blob, `manifest`, included).
///
/// # Errors
/// `shape`, `blob_alignment`, `shard_ref`, `blob_bounds`, `layout_rule`, `dense_size` or
/// `blob_overlap`.
pub fn validate(m: &Manifest, region_end: u64, manifest: (u64, u64)) -> Result<()> {
    let mut ranges: BTreeMap<Option<&str>, Vec<(u64, u64)>> = BTreeMap::new();
    ranges.entry(None).or_default().push(manifest);
    for (name, o) in &m.objects {
        let at = |e: Error| e.within(&format!("object {name:?}"));
        if o.shape.len() > MAX_RANK {
            return Err(at(Error::rule(
                Rule::Shape,
                format!("rank {} is above {MAX_RANK}", o.shape.len()),
            )));
        }
        let n = elements(&o.shape).ok_or_else(|| {
            at(Error::rule(Rule::Shape, "the dimensions' product overflows 64 bits"))
        })?;
        for (part_name, p) in &o.parts {
            let (offset, len) = p.blob;
            if offset % ALIGNMENT != 0 || offset < ALIGNMENT {
                return Err(at(Error::rule(
                    Rule::BlobAlignment,
                    format!(
                        "part {part_name:?}: offset {offset} is not a multiple of 4096 at or after 4096"
                    ),
                )));
            }
            let end = match &p.shard {
                None => region_end,
                Some(s) => {
                    let shard = m.shards.get(&**s).ok_or_else(|| {
                        at(Error::rule(
                            Rule::ShardRef,
                            format!("part {part_name:?}: shard {s:?} is not in the table"),
                        ))
                    })?;
                    shard.size.saturating_sub(40)
                }
            };
            if offset.checked_add(len).is_none_or(|e| e > end) {
                return Err(at(Error::rule(
                    Rule::BlobBounds,
                    format!("part {part_name:?}: bytes {offset}+{len} pass {end}"),
                )));
            }
            ranges.entry(p.shard.as_deref()).or_default().push(p.blob);
        }
        layout_rules(o, n).map_err(at)?;
    }
    for (file, mut list) in ranges {
        list.retain(|&(_, len)| len > 0);
        list.sort_unstable();
        list.dedup();
        for pair in list.windows(2) {
            let ((a, alen), (b, _)) = (pair[0], pair[1]);
            if a + alen > b {
                let file = file.map_or_else(|| "this file".to_owned(), |s| format!("shard {s:?}"));
                return Err(Error::rule(
                    Rule::BlobOverlap,
                    format!("blobs at {a} and {b} of {file} overlap without being the same"),
                ));
            }
        }
    }
    Ok(())
}

/// The metadata rules of the layouts this reader knows (`dense`, `zt.sparse_csr/1`, and the
/// profiles of [`crate::profiles`]); any other layout is read structurally only.
fn layout_rules(o: &Object, n: u64) -> Result<()> {
    let names: Vec<&str> = o.parts.keys().map(AsRef::as_ref).collect();
    match &*o.layout {
        "dense" => {
            let Some(data) = o.parts.get("data").filter(|_| names == ["data"]) else {
                return Err(Error::rule(
                    Rule::LayoutRule,
                    "a dense object has exactly one part, `data`",
                ));
            };
            match stored_size(data, n) {
                Some(size) if size != data.decoded_len() => Err(Error::rule(
                    Rule::DenseSize,
                    format!(
                        "{n} elements are {size} bytes, and `data` holds {}",
                        data.decoded_len()
                    ),
                )),
                Some(_) => Ok(()),
                // A logical type this registry does not hold: its size is not known here.
                None if data.logical.as_deref().is_some_and(|l| logical(l).is_none()) => Ok(()),
                None => Err(Error::rule(Rule::DenseSize, "the data's size overflows 64 bits")),
            }
        }
        "zt.sparse_csr/1" => {
            let rule = |m: &str| Error::rule(Rule::LayoutRule, m.to_owned());
            if names != ["indices", "indptr", "values"] {
                return Err(rule("a CSR object has exactly the parts values, indices and indptr"));
            }
            if o.shape.len() != 2 {
                return Err(rule("a CSR object has rank 2"));
            }
            let (values, indices, indptr) =
                (&o.parts["values"], &o.parts["indices"], &o.parts["indptr"]);
            if !matches!(indices.dtype, Dtype::U32 | Dtype::U64) || indices.logical.is_some() {
                return Err(rule("CSR indices are u32 or u64, with no logical type"));
            }
            if indptr.dtype != indices.dtype || indptr.logical.is_some() {
                return Err(rule("CSR indptr has the indices' type, with no logical type"));
            }
            let w = indices.dtype.width();
            let rows = o.shape[0]
                .checked_add(1)
                .ok_or_else(|| Error::rule(Rule::Shape, "the row count overflows"))?;
            if rows.checked_mul(w) != Some(indptr.decoded_len()) {
                return Err(rule("CSR indptr holds one entry per row and one more"));
            }
            if indices.decoded_len() % w != 0 {
                return Err(rule("CSR indices are not whole entries"));
            }
            let nnz = indices.decoded_len() / w;
            if let Some(size) = stored_size(values, nnz)
                && size != values.decoded_len()
            {
                return Err(rule("CSR values are not one per index"));
            }
            Ok(())
        }
        _ => crate::profiles::check(o),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The manifest of every zTensor 2 file under the corpus and the reference's frozen files.
    fn corpus_manifests() -> Vec<(String, Vec<u8>)> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../ztensor-conformance");
        let mut dirs = vec![root.join("fixtures/producers/v2/reference-2.1.1")];
        for group in ["valid", "reject", "hostile"] {
            dirs.push(root.join("fixtures/external/ztensor2").join(group));
        }
        let mut out = Vec::new();
        for dir in dirs {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let bytes = std::fs::read(&path).unwrap();
                let Some(footer) = bytes.len().checked_sub(40).map(|at| &bytes[at..]) else {
                    continue;
                };
                let field = |at: usize| {
                    let n = u64::from_le_bytes(footer[at..at + 8].try_into().unwrap());
                    usize::try_from(n).unwrap_or(usize::MAX)
                };
                let (at, len) = (field(0), field(8));
                if let Some(m) = at.checked_add(len).and_then(|end| bytes.get(at..end))
                    && len > 0
                {
                    out.push((path.display().to_string(), m.to_vec()));
                }
            }
        }
        out
    }

    /// A manifest of one empty-shaped object `t` (its `extra` entries and parts appended as
    /// given) and the root entries `root`, each `(key, encoded value)`; keys given in their
    /// deterministic order.
    fn manifest_of(root: &[(&str, Vec<u8>)], object_extra: &[(&str, Vec<u8>)]) -> Vec<u8> {
        use crate::cbor::encode;
        use ztensor_format::cbor::head;
        let text = |s: &str| encode(&Value::Text(s.to_owned()));
        let mut object = Vec::new();
        let part = Value::Map(vec![
            (Value::Text("blob".into()), Value::Array(vec![Value::Uint(4096), Value::Uint(0)])),
            (Value::Text("dtype".into()), Value::Text("u8".into())),
        ]);
        let mut fields = vec![
            ("parts", encode(&Value::Map(vec![(Value::Text("data".into()), part)]))),
            ("shape", encode(&Value::Array(vec![Value::Uint(0)]))),
            ("layout", text("dense")),
        ];
        fields.extend(object_extra.iter().cloned());
        fields.sort_by_key(|(k, _)| text(k));
        head(&mut object, 5, fields.len() as u64);
        for (k, v) in fields {
            object.extend(text(k));
            object.extend(v);
        }
        let mut objects = Vec::new();
        head(&mut objects, 5, 1);
        objects.extend(text("t"));
        objects.extend(object);
        let mut entries: Vec<(&str, Vec<u8>)> = root.to_vec();
        entries.push(("objects", objects));
        entries.sort_by_key(|(k, _)| text(k));
        let mut out = Vec::new();
        head(&mut out, 5, entries.len() as u64);
        for (k, v) in entries {
            out.extend(text(k));
            out.extend(v);
        }
        out
    }

    /// An array of `n` zeros, or a map `{"a": that}`.
    fn zeros(n: u64) -> Vec<u8> {
        let mut out = Vec::new();
        ztensor_format::cbor::head(&mut out, 4, n);
        out.resize(out.len() + usize::try_from(n).unwrap(), 0);
        out
    }

    fn attribute_of(value: Vec<u8>) -> Vec<u8> {
        let mut out = vec![0xa1, 0x61, b'a'];
        out.extend(value);
        out
    }

    /// A map of `n` entries `kNNNNNNN: 0`, keys in order.
    fn wide_map(n: u64) -> Vec<u8> {
        let mut out = Vec::new();
        ztensor_format::cbor::head(&mut out, 5, n);
        for i in 0..n {
            out.extend(crate::cbor::encode(&Value::Text(format!("k{i:08}"))));
            out.push(0);
        }
        out
    }

    /// The manifest's verdict read whole and a window at a time (the general path giving it
    /// when the one-pass one does not), with a budget of `max_values` items.
    fn verdicts(bytes: &[u8], max_values: u64) -> [Result<Manifest>; 2] {
        let whole = parse_bytes_within(bytes, max_values);
        let mut read = |at: u64, buf: &mut [u8]| {
            let at = usize::try_from(at).unwrap();
            buf.copy_from_slice(&bytes[at..at + buf.len()]);
            Ok(())
        };
        let read = direct::Bytes::Read { len: bytes.len() as u64, window: 4096, read: &mut read };
        let windowed = match direct::manifest(read, max_values) {
            Ok(Some((m, _))) => Ok(m),
            Ok(None) => parse_in_steps(bytes, max_values),
            Err(e) => Err(e),
        };
        [whole, windowed]
    }

    /// Each way a manifest can hold many items (a long attribute array, keys the schema does
    /// not know at the root or in an object, a wide shard table, any of them where the
    /// one-pass parse leaves the verdict to the general one) draws on one budget: past it,
    /// `manifest_too_large`; within it, the manifest reads.
    #[test]
    fn every_item_counts_against_the_value_budget() {
        let n = 50_000u64;
        let mut shard_table = Vec::new();
        ztensor_format::cbor::head(&mut shard_table, 5, n);
        for i in 0..n {
            shard_table.extend(crate::cbor::encode(&Value::Text(format!("s{i:08}"))));
            shard_table.extend(crate::cbor::encode(&Value::Map(vec![
                (Value::Text("size".into()), Value::Uint(0)),
                (Value::Text("digest".into()), Value::Text("xxh3:00".into())),
            ])));
        }
        // An object key that is not text sends the parse the general way.
        let mut odd_key = vec![0xa1, 0x00];
        odd_key.extend(zeros(n));
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("file attributes", manifest_of(&[("attributes", attribute_of(zeros(n)))], &[])),
            ("object attributes", manifest_of(&[], &[("attributes", attribute_of(zeros(n)))])),
            ("root keys", manifest_of(&[("unknown", wide_map(n))], &[])),
            ("object keys", manifest_of(&[], &[("unknown", wide_map(n))])),
            ("shard table", manifest_of(&[("shards", shard_table)], &[])),
            ("general way", manifest_of(&[], &[("zz", odd_key)])),
        ];
        for (what, bytes) in &cases {
            for verdict in verdicts(bytes, n) {
                let e = verdict.expect_err(what);
                assert_eq!(e.broken(), Some(Rule::ManifestTooLarge), "{what}: {e}");
            }
            for verdict in verdicts(bytes, 8 * n) {
                let m = verdict.unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(m.objects.len(), 1, "{what}");
            }
            assert!(parse_bytes(bytes).is_ok(), "{what}: within the default budget");
        }
    }

    /// What reading `bytes` a window of `window` at a time gives.
    fn windowed(bytes: &[u8], window: usize) -> Option<(Manifest, u64)> {
        let mut read = |at: u64, buf: &mut [u8]| {
            let at = usize::try_from(at).unwrap();
            buf.copy_from_slice(&bytes[at..at + buf.len()]);
            Ok(())
        };
        parse_read(bytes.len() as u64, window, &mut read).unwrap()
    }

    /// The one-pass parse, in memory and read through windows of any size, accepts only what
    /// the general parse accepts, with the same manifest, and hashes the bytes it read; it
    /// accepts every manifest of the valid groups (so the comparison is not empty).
    #[test]
    fn one_pass_is_the_general_parse() {
        let manifests = corpus_manifests();
        let (mut accepted, mut valid) = (0, 0);
        for (path, m) in &manifests {
            let mut cases = vec![m.clone(), m[..m.len() / 2].to_vec()];
            // Damaged copies: a bit, a major type and a whole byte changed, at up to 48 places
            // (of the manifests of up to 64 KiB: the hostile ones are whole only).
            let stride = (m.len() / 48).max(1);
            let damaged = if m.len() <= 64 << 10 { m.len() } else { 0 };
            for at in (0..damaged).step_by(stride) {
                for flip in [0x01, 0x20, 0xff] {
                    let mut d = m.clone();
                    d[at] ^= flip;
                    cases.push(d);
                }
            }
            let is_valid = path.contains("/valid/") || path.contains("reference-2.1.1");
            for (i, case) in cases.iter().enumerate() {
                let general = parse_in_steps(case, MAX_VALUES);
                let windows: &[usize] =
                    if i == 0 { &[1, 2, 7, 64, 4096, WINDOW] } else { &[3, 4096] };
                for &window in windows {
                    let one_pass = windowed(case, window);
                    if let Some((manifest, hash)) = &one_pass {
                        assert_eq!(*hash, xxhash_rust::xxh3::xxh3_64(case), "{path}");
                        let general = general.as_ref().unwrap_or_else(|e| {
                            panic!("{path} case {i}: accepted in one pass, refused: {e}")
                        });
                        assert_eq!(manifest, general, "{path} case {i} window {window}");
                        accepted += 1;
                    } else if i == 0 && is_valid {
                        panic!("{path}: a valid manifest is not parsed in one pass");
                    }
                }
                match parse_bytes(case) {
                    Ok(m) => assert_eq!(Some(&m), general.as_ref().ok(), "{path} case {i}"),
                    Err(e) => {
                        assert_eq!(Some(e.broken()), general.as_ref().err().map(Error::broken));
                    }
                }
                valid += usize::from(i == 0 && is_valid);
            }
        }
        assert!(valid > 20 && accepted > 200, "{valid} valid, {accepted} accepted");
    }
}
