//! Positions of named items, found by name without a second copy of every name.

use std::hash::BuildHasher as _;

use crate::manifest::text_key_order as key;

/// Indices of items found by their names, which the items themselves keep: a lookup costs
/// no copy of each name (a manifest may name a million objects).
///
/// While items come in order (item `i` added `i`-th, names strictly increasing as
/// deterministic CBOR sorts text keys: shorter first, then bytewise), as the maps of canonical
/// manifests give them, the index keeps nothing but their count and finds a name by binary
/// search. The first item out of that order moves the items into a hash table keyed per
/// index, so names chosen by a hostile file cannot be made to collide.
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
#[derive(Debug, Clone)]
pub struct NameIndex {
    table: hashbrown::HashTable<usize>,
    hasher: std::hash::RandomState,
    /// How many items came in order, while all have; `None` once the table holds them.
    ordered: Option<usize>,
    /// Room to make in the table when it is first needed.
    hint: usize,
}

impl Default for NameIndex {
    fn default() -> NameIndex {
        NameIndex::with_capacity(0)
    }
}

impl NameIndex {
    /// An empty index for about `n` names (room is made only if they come out of order).
    pub fn with_capacity(n: usize) -> NameIndex {
        NameIndex {
            table: hashbrown::HashTable::new(),
            hasher: std::hash::RandomState::new(),
            ordered: Some(0),
            hint: n,
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
        if let Some(n) = self.ordered {
            if index == n && (n == 0 || key(name_of(n - 1)) < key(name)) {
                self.ordered = Some(n + 1);
                return None;
            }
            if let Some(j) = search(n, name, &name_of) {
                return Some(j);
            }
            // Out of order: the items so far go into the table, and the rest after them.
            let hasher = &self.hasher;
            self.table.reserve(self.hint.max(n + 1), |&j| hasher.hash_one(name_of(j)));
            for j in 0..n {
                self.table.insert_unique(hasher.hash_one(name_of(j)), j, |&k| {
                    hasher.hash_one(name_of(k))
                });
            }
            self.ordered = None;
        }
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
        match self.ordered {
            Some(n) => search(n, name, &name_of),
            None => self.table.find(self.hasher.hash_one(name), |&i| name_of(i) == name).copied(),
        }
    }

    /// Whether every item so far came in canonical order (item `i` `i`-th, names increasing in
    /// deterministic CBOR's key order): then item order is name order.
    pub fn is_in_order(&self) -> bool {
        self.ordered.is_some()
    }

    /// How many names.
    pub fn len(&self) -> usize {
        self.ordered.unwrap_or_else(|| self.table.len())
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Item `0..n` called `name`, of items in order.
fn search<'n>(n: usize, name: &str, name_of: &impl Fn(usize) -> &'n str) -> Option<usize> {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match key(name_of(mid)).cmp(&key(name)) {
            std::cmp::Ordering::Less => lo = mid + 1,
            std::cmp::Ordering::Greater => hi = mid,
            std::cmp::Ordering::Equal => return Some(mid),
        }
    }
    None
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

#[cfg(test)]
mod tests {
    use super::NameIndex;
    use std::collections::HashMap;

    /// Against a map of first indices: names in canonical order for a while (so the index
    /// keeps no table), then anything, repeats included; every insert and lookup agrees.
    #[test]
    fn agrees_with_a_map_in_order_and_out_of_it() {
        let mut rng = ztensor_testkit::Rng::new(0x2545_f491_4f6c_dd1d);
        let mut next = move |n: u64| rng.below(n);
        for round in 0..300 {
            let ordered = usize::try_from(next(40)).unwrap();
            let mut names: Vec<String> = Vec::new();
            for i in 0..60 {
                let name = if i < ordered {
                    // Increasing: shorter first, then bytewise.
                    format!("{}{:03}", "n".repeat(1 + i / 20), i % 20)
                } else {
                    format!("{}{}", "n".repeat(1 + usize::try_from(next(3)).unwrap()), next(30))
                };
                names.push(name);
            }
            let mut index = NameIndex::with_capacity(names.len());
            let mut model: HashMap<&str, usize> = HashMap::new();
            for (i, name) in names.iter().enumerate() {
                let want = model.get(name.as_str()).copied();
                assert_eq!(index.insert(i, |j| names[j].as_str()), want, "round {round} #{i}");
                model.entry(name).or_insert(i);
                assert_eq!(index.len(), model.len(), "round {round} #{i}");
            }
            for probe in names.iter().map(String::as_str).chain(["", "n", "zz", "nnnn999"]) {
                let got = index.find(probe, |j| names[j].as_str());
                assert_eq!(got, model.get(probe).copied(), "round {round}: {probe}");
            }
        }
    }

    /// Items added in order keep no table: a million names cost no index memory.
    #[test]
    fn items_in_order_need_no_table() {
        let names: Vec<String> = (0..10_000).map(|i| format!("t{i:07}")).collect();
        let mut index = NameIndex::with_capacity(names.len());
        for i in 0..names.len() {
            assert_eq!(index.insert(i, |j| names[j].as_str()), None);
        }
        assert_eq!(index.table.capacity(), 0);
        assert!(index.is_in_order());
        assert_eq!(index.find("t0004321", |j| names[j].as_str()), Some(4321));
        // One out of order, and the table takes them all.
        let mut more = names.clone();
        more.push("a".into());
        assert_eq!(index.insert(names.len(), |j| more[j].as_str()), None);
        assert!(index.table.capacity() > names.len());
        assert!(!index.is_in_order());
        assert_eq!(index.find("t0004321", |j| more[j].as_str()), Some(4321));
        assert_eq!(index.find("a", |j| more[j].as_str()), Some(names.len()));
    }
}
