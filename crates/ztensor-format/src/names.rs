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
