//! The manifest as parsed: objects of parts, the shard table, and the dtypes parts have.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use ztensor_format::Attributes;

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

/// How many elements `shape` holds, or `None` when the product overflows.
pub fn elements(shape: &[u64]) -> Option<u64> {
    shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d))
}
