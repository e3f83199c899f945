//! Positions of named items, found by name without a second copy of every name.

use std::hash::BuildHasher as _;

/// Indices of items hashed by their names, which the items themselves keep: a lookup costs
/// no copy of each name (a manifest may name a million objects). The hash is keyed per index,
/// so names chosen by a hostile file cannot be made to collide.
///
/// Every method takes `name_of`, the name of the item at an index, from wherever the items
/// live.
///
/// ```
/// use ztensor_format::NameIndex;
/// let names = ["w", "b", "w"];
/// let mut index = NameIndex::with_capacity(names.len());
/// assert_eq!(index.insert(0, |i| names[i]), None);
/// assert_eq!(index.insert(1, |i| names[i]), None);
/// assert_eq!(index.insert(2, |i| names[i]), Some(0), "the first keeps the name");
/// assert_eq!(index.find("b", |i| names[i]), Some(1));
/// assert_eq!(index.find("x", |i| names[i]), None);
/// ```
#[derive(Debug, Clone, Default)]
pub struct NameIndex {
    table: hashbrown::HashTable<usize>,
    hasher: std::hash::RandomState,
}

impl NameIndex {
    /// An empty index with room for `n` names.
    pub fn with_capacity(n: usize) -> NameIndex {
        NameIndex {
            table: hashbrown::HashTable::with_capacity(n),
            hasher: std::hash::RandomState::new(),
        }
    }

    /// Adds item `index` under its name; when another item already has that name, leaves the
    /// index as it is and returns that item's index.
    pub fn insert<'n>(
        &mut self,
        index: usize,
        name_of: impl Fn(usize) -> &'n str,
    ) -> Option<usize> {
        let name = name_of(index);
        let hasher = &self.hasher;
        match self.table.entry(
            hasher.hash_one(name),
            |&j| name_of(j) == name,
            |&j| hasher.hash_one(name_of(j)),
        ) {
            hashbrown::hash_table::Entry::Occupied(e) => Some(*e.get()),
            hashbrown::hash_table::Entry::Vacant(slot) => {
                slot.insert(index);
                None
            }
        }
    }

    /// The index of the item called `name`.
    pub fn find<'n>(&self, name: &str, name_of: impl Fn(usize) -> &'n str) -> Option<usize> {
        self.table.find(self.hasher.hash_one(name), |&i| name_of(i) == name).copied()
    }

    /// How many names.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
}

/// A spelling this implementation does not recognise (a dtype, encoding, format, byte order,
/// logical type or digest), kept as the file wrote it.
///
/// One pointer wide, so the enums that fall back to it are two words: a manifest holds one of
/// each per component, and nearly all of them are known spellings.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
// A `Box<str>` is two words; the point is one.
#[allow(clippy::box_collection)]
pub struct Spelling(Box<String>);

impl Spelling {
    /// The text as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for Spelling {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Spelling {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for Spelling {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Spelling {
    fn from(s: &str) -> Spelling {
        Spelling(Box::new(s.to_owned()))
    }
}

impl From<String> for Spelling {
    fn from(s: String) -> Spelling {
        Spelling(Box::new(s))
    }
}

impl From<Spelling> for String {
    fn from(s: Spelling) -> String {
        *s.0
    }
}

impl PartialEq<str> for Spelling {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Spelling {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::fmt::Debug for Spelling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl std::fmt::Display for Spelling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self)
    }
}
