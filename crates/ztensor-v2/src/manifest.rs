//! The manifest's schema (`spec/ztensor-2.md` §2.4–2.8): objects made of parts that point at
//! blobs, the shard table, attributes; parsed from the decoded tree, then validated as a whole.

use std::collections::BTreeMap;

use crate::cbor::Value;
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

/// A part: one array of one storage type, in a blob.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    /// The storage type.
    pub dtype: Dtype,
    /// The logical type's name, when the part has one.
    pub logical: Option<String>,
    /// The blob: offset and length in the file the part lies in.
    pub blob: (u64, u64),
    /// The shard the blob lies in (`None`: this file).
    pub shard: Option<String>,
    /// The encoding's name (`None`: raw).
    pub encoding: Option<String>,
    /// The decoded length, for an encoded part.
    pub decoded_length: Option<u64>,
    /// The digest string (`xxh3:…`, `sha256:…`) of the decoded bytes.
    pub digest: Option<String>,
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
pub struct Named<T>(Vec<(String, T)>);

/// An object's parts by name.
pub type Parts = Named<Part>;

impl<T> Default for Named<T> {
    fn default() -> Named<T> {
        Named(Vec::new())
    }
}

impl<T> Named<T> {
    /// The entries `entries` (names unique), sorted by name.
    pub fn new(mut entries: Vec<(String, T)>) -> Named<T> {
        entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        entries.shrink_to_fit();
        Named(entries)
    }

    /// The entry named `name`.
    pub fn get(&self, name: &str) -> Option<&T> {
        self.get_key_value(name).map(|(_, v)| v)
    }

    /// The entry named `name`, with its name.
    pub fn get_key_value(&self, name: &str) -> Option<(&String, &T)> {
        let i = self.0.binary_search_by(|(n, _)| n.as_bytes().cmp(name.as_bytes())).ok()?;
        let (n, v) = &self.0[i];
        Some((n, v))
    }

    /// Where the entry named `name` is in the list.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.0.binary_search_by(|(n, _)| n.as_bytes().cmp(name.as_bytes())).ok()
    }

    /// Entry `index`, with its name (in name order).
    pub fn at(&self, index: usize) -> Option<(&String, &T)> {
        self.0.get(index).map(|(n, v)| (n, v))
    }

    /// The names, in order.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &String> {
        self.0.iter().map(|(n, _)| n)
    }

    /// The entries, in the order of their names.
    pub fn values(&self) -> impl ExactSizeIterator<Item = &T> {
        self.0.iter().map(|(_, v)| v)
    }

    /// Names and entries, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&String, &T)> {
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

impl<T> std::ops::Index<&str> for Named<T> {
    type Output = T;

    /// # Panics
    /// When there is no entry `name`.
    fn index(&self, name: &str) -> &T {
        self.get(name).unwrap_or_else(|| panic!("no entry {name:?}"))
    }
}

/// The iterator over a [`Named`] list's names and entries.
pub type NamedIter<'a, T> =
    std::iter::Map<std::slice::Iter<'a, (String, T)>, fn(&'a (String, T)) -> (&'a String, &'a T)>;

impl<'a, T> IntoIterator for &'a Named<T> {
    type Item = (&'a String, &'a T);
    type IntoIter = NamedIter<'a, T>;

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
    pub layout: String,
    /// The parts, by name.
    pub parts: Parts,
    /// The object's attributes (a map), as stored.
    pub attributes: Option<Value>,
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
    /// The file's attributes (a map), as stored.
    pub attributes: Option<Value>,
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

fn attributes(value: Option<&Value>, what: &str) -> Result<Option<Value>> {
    let Some(value) = value else { return Ok(None) };
    for (key, _) in text_map(value, what)? {
        check_name(key, "an attribute key")?;
    }
    Ok(Some(value.clone()))
}

fn optional_text<'v>(entries: &'v [(Value, Value)], key: &str) -> Result<Option<&'v str>> {
    match field(entries, key) {
        None => Ok(None),
        Some(v) => v.as_text().map(Some).ok_or_else(|| schema(format!("`{key}` is not text"))),
    }
}

fn part(value: &Value) -> Result<Part> {
    let Value::Map(entries) = value else { return Err(schema("a part is not a map")) };
    let dtype = optional_text(entries, "dtype")?.ok_or_else(|| schema("a part has no `dtype`"))?;
    let dtype =
        Dtype::from_name(dtype).ok_or_else(|| schema(format!("unknown dtype {dtype:?}")))?;
    let logical = optional_text(entries, "type")?.map(str::to_owned);
    if let Some((pinned, _)) = logical.as_deref().and_then(self::logical)
        && pinned != dtype
    {
        return Err(schema(format!(
            "logical type {:?} is stored as {}, not {}",
            logical.as_deref().unwrap_or_default(),
            pinned.name(),
            dtype.name()
        )));
    }
    let blob = match field(entries, "blob") {
        Some(Value::Array(a)) if a.len() == 2 => match (a[0].as_uint(), a[1].as_uint()) {
            (Some(offset), Some(len)) => (offset, len),
            _ => return Err(schema("`blob` is not two unsigned integers")),
        },
        Some(_) => return Err(schema("`blob` is not [offset, length]")),
        None => return Err(schema("a part has no `blob`")),
    };
    let shard = optional_text(entries, "shard")?.map(str::to_owned);
    if let Some(shard) = &shard {
        check_shard_name(shard)?;
    }
    let encoding = optional_text(entries, "encoding")?.map(str::to_owned);
    let decoded_length = match field(entries, "decoded_length") {
        None => None,
        Some(v) => {
            Some(v.as_uint().ok_or_else(|| schema("`decoded_length` is not an unsigned integer"))?)
        }
    };
    if encoding.is_some() != decoded_length.is_some() {
        return Err(schema("`decoded_length` is given exactly when `encoding` is"));
    }
    let digest = optional_text(entries, "digest")?.map(str::to_owned);
    if let Some(d) = &digest {
        check_digest(d)?;
    }
    Ok(Part { dtype, logical, blob, shard, encoding, decoded_length, digest })
}

fn object(value: &Value) -> Result<Object> {
    let Value::Map(entries) = value else { return Err(schema("an object is not a map")) };
    let shape = match field(entries, "shape") {
        Some(Value::Array(dims)) => dims
            .iter()
            .map(|d| d.as_uint().ok_or_else(|| schema("a dimension is not an unsigned integer")))
            .collect::<Result<Vec<u64>>>()?,
        Some(_) => return Err(schema("`shape` is not an array")),
        None => return Err(schema("an object has no `shape`")),
    };
    let layout = optional_text(entries, "layout")?
        .ok_or_else(|| schema("an object has no `layout`"))?
        .to_owned();
    let parts_value = field(entries, "parts").ok_or_else(|| schema("an object has no `parts`"))?;
    let mut named = Vec::new();
    for (name, value) in text_map(parts_value, "`parts`")? {
        check_name(name, "part name")?;
        named.push((name.to_owned(), part(value)?));
    }
    let parts = Parts::new(named);
    if parts.is_empty() {
        return Err(schema("an object has no parts"));
    }
    let attributes = attributes(field(entries, "attributes"), "an object's `attributes`")?;
    Ok(Object { shape, layout, parts, attributes })
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
    for (name, value) in text_map(objects_value, "`objects`")? {
        check_name(name, "object name")?;
        named.push((name.to_owned(), object(value)?));
    }
    let objects = Named::new(named);
    let mut shards = BTreeMap::new();
    if let Some(table) = field(entries, "shards") {
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
    let attributes = attributes(field(entries, "attributes"), "`attributes`")?;
    Ok(Manifest { objects, shards, attributes })
}

/// Checks the manifest's CBOR (§2.2) and parses it (§2.4–2.7) as [`crate::cbor::decode`] then
/// [`parse`] would, without building the whole tree: the objects are decoded one at a time, so a
/// manifest of a million objects never holds a million decoded items at once.
///
/// # Errors
/// The CBOR rules (the message says so), then as [`parse`].
pub fn parse_bytes(bytes: &[u8]) -> Result<Manifest> {
    use crate::cbor;
    let cbor_error = |e: Error| e.within("in the manifest's CBOR");
    let whole = || parse(&cbor::decode(bytes).map_err(cbor_error)?);
    let Some(root) = cbor::map_entries(bytes).map_err(cbor_error)? else { return whole() };
    let Some((_, range)) = root.iter().find(|(k, _)| k.as_text() == Some("objects")) else {
        return whole();
    };
    // A manifest whose `objects` is not a map gets the schema error from the whole tree.
    let Some(entries) = cbor::entries_at(bytes, range.clone(), 1)? else { return whole() };
    // Every key is text before any object is looked at (as the whole tree's parse has it).
    if entries.iter().any(|(k, _)| k.as_text().is_none()) {
        return Err(schema("a key of `objects` is not text"));
    }
    let mut named = Vec::with_capacity(entries.len());
    for (key, range) in entries {
        // The name decoded with the key is kept, not copied.
        let Value::Text(name) = key else { return Err(schema("a key of `objects` is not text")) };
        check_name(&name, "object name")?;
        let value = cbor::decode_at(bytes, range, 2)?;
        named.push((name, object(&value)?));
    }
    let objects = Named::new(named);
    // The rest (shards, attributes, keys not known) is decoded whole, with no objects.
    let mut rest = Vec::with_capacity(root.len());
    for (key, range) in root {
        if key.as_text() != Some("objects") {
            let value = cbor::decode_at(bytes, range, 1)?;
            rest.push((key, value));
        }
    }
    rest.push((Value::Text("objects".to_owned()), Value::Map(Vec::new())));
    let mut manifest = parse(&Value::Map(rest))?;
    manifest.objects = objects;
    Ok(manifest)
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
                    let shard = m.shards.get(s).ok_or_else(|| {
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
    let names: Vec<&str> = o.parts.keys().map(String::as_str).collect();
    match o.layout.as_str() {
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
