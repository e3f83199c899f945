//! An object's components by role: the standard roles stored without an allocation, any other
//! owned, in one vector (or none) whatever the object's size.

use std::fmt;

use super::Component;

/// A role as stored: the standard roles by their place in [`STANDARD_ROLES`], any other
/// owned, so the common object costs no allocation for its role.
#[derive(Debug, Clone, PartialEq, Eq)]
enum RoleName {
    Standard(u8),
    Other(Box<str>),
}

const STANDARD_ROLES: [&str; 8] = {
    use crate::role::*;
    [DATA, VALUES, INDICES, INDPTR, COORDS, PACKED_WEIGHT, SCALES, ZEROS]
};

impl RoleName {
    fn as_str(&self) -> &str {
        match self {
            RoleName::Standard(i) => STANDARD_ROLES[usize::from(*i)],
            RoleName::Other(s) => s,
        }
    }

    fn into_string(self) -> String {
        match self {
            RoleName::Standard(i) => STANDARD_ROLES[usize::from(i)].to_owned(),
            RoleName::Other(s) => s.into(),
        }
    }
}

impl PartialOrd for RoleName {
    fn partial_cmp(&self, other: &RoleName) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for RoleName {
    fn cmp(&self, other: &RoleName) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

/// The stored form of a role: one of the standard roles without an allocation, any other owned.
fn role_name(role: String) -> RoleName {
    match (0u8..).zip(STANDARD_ROLES).find(|(_, known)| *known == role) {
        Some((i, _)) => RoleName::Standard(i),
        None => RoleName::Other(role.into()),
    }
}

/// An object's components by role, in role order, as a map would hold them.
///
/// A sorted vector rather than a `BTreeMap`: objects have one to a few components, and a B-tree
/// allocates room for eleven entries in its first node (about 2.4 KB here) whatever it holds,
/// which made a decoded manifest cost some thirty times its bytes. Building one from entries in
/// any order is a sort; lookups are binary searches. The one component of the common object (a
/// dense tensor) is held inline, and the standard roles are not allocated: a manifest of a
/// million tensors holds a million of these.
#[derive(Clone)]
pub struct Components(Slots);

#[derive(Clone)]
enum Slots {
    One([(RoleName, Component); 1]),
    Many(Vec<(RoleName, Component)>),
}

impl Default for Components {
    fn default() -> Components {
        Components::new()
    }
}

impl PartialEq for Components {
    fn eq(&self, other: &Components) -> bool {
        self.slice() == other.slice()
    }
}

impl Eq for Components {}

impl fmt::Debug for Components {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Components {
    /// No components.
    pub fn new() -> Components {
        Components(Slots::Many(Vec::new()))
    }

    fn slice(&self) -> &[(RoleName, Component)] {
        match &self.0 {
            Slots::One(one) => one,
            Slots::Many(many) => many,
        }
    }

    fn slice_mut(&mut self) -> &mut [(RoleName, Component)] {
        match &mut self.0 {
            Slots::One(one) => one,
            Slots::Many(many) => many,
        }
    }

    /// The entries as a vector, to grow or shrink.
    fn vec_mut(&mut self) -> &mut Vec<(RoleName, Component)> {
        if let Slots::One(_) = self.0 {
            let Slots::One([one]) = std::mem::replace(&mut self.0, Slots::Many(Vec::new())) else {
                unreachable!("matched just above")
            };
            self.0 = Slots::Many(vec![one]);
        }
        match &mut self.0 {
            Slots::Many(many) => many,
            Slots::One(_) => unreachable!("made a vector just above"),
        }
    }

    /// Holds a single entry inline again, and gives back room a vector no longer uses.
    fn settle(&mut self) {
        if let Slots::Many(many) = &mut self.0 {
            if many.len() == 1 {
                let one = many.pop().expect("one entry");
                self.0 = Slots::One([one]);
            } else {
                many.shrink_to_fit();
            }
        }
    }

    /// Builds the map from entries in any order; a role given twice keeps its last component
    /// (as inserting would). Also says whether a role was given twice.
    pub fn from_entries(entries: Vec<(String, Component)>) -> (Components, bool) {
        let mut entries: Vec<(RoleName, Component)> =
            entries.into_iter().map(|(r, c)| (role_name(r), c)).collect();
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
        let mut components = Components(Slots::Many(entries));
        components.settle();
        (components, repeated)
    }

    fn find(&self, role: &str) -> Result<usize, usize> {
        self.slice().binary_search_by(|(r, _)| r.as_str().cmp(role))
    }

    /// Adds or replaces the component of `role`, returning the one it replaced.
    pub fn insert(&mut self, role: String, component: Component) -> Option<Component> {
        match self.find(&role) {
            Ok(i) => Some(std::mem::replace(&mut self.slice_mut()[i].1, component)),
            Err(i) => {
                if self.is_empty() {
                    self.0 = Slots::One([(role_name(role), component)]);
                } else {
                    self.vec_mut().insert(i, (role_name(role), component));
                }
                None
            }
        }
    }

    /// The component of `role`.
    pub fn get(&self, role: &str) -> Option<&Component> {
        self.find(role).ok().map(|i| &self.slice()[i].1)
    }

    /// The role as stored and the component of `role`.
    pub fn get_key_value(&self, role: &str) -> Option<(&str, &Component)> {
        self.find(role).ok().map(|i| {
            let (r, c) = &self.slice()[i];
            (r.as_str(), c)
        })
    }

    /// The component of `role`, to change.
    pub fn get_mut(&mut self, role: &str) -> Option<&mut Component> {
        self.find(role).ok().map(|i| &mut self.slice_mut()[i].1)
    }

    /// Removes and returns the component of `role`.
    pub fn remove(&mut self, role: &str) -> Option<Component> {
        let i = self.find(role).ok()?;
        let (_, removed) = self.vec_mut().remove(i);
        self.settle();
        Some(removed)
    }

    /// Whether there is a component of `role`.
    pub fn contains_key(&self, role: &str) -> bool {
        self.find(role).is_ok()
    }

    /// How many components.
    pub fn len(&self) -> usize {
        self.slice().len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.slice().is_empty()
    }

    /// Removes them all.
    pub fn clear(&mut self) {
        self.0 = Slots::Many(Vec::new());
    }

    /// Roles and components, in role order.
    pub fn iter(&self) -> ComponentsIter<'_> {
        ComponentsIter(self.slice().iter())
    }

    /// The roles, in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &str> + ExactSizeIterator + Clone {
        self.slice().iter().map(|(r, _)| r.as_str())
    }

    /// The components, in role order.
    pub fn values(
        &self,
    ) -> impl DoubleEndedIterator<Item = &Component> + ExactSizeIterator + Clone {
        self.slice().iter().map(|(_, c)| c)
    }

    /// The components, in role order, to change.
    pub fn values_mut(
        &mut self,
    ) -> impl DoubleEndedIterator<Item = &mut Component> + ExactSizeIterator {
        self.slice_mut().iter_mut().map(|(_, c)| c)
    }
}

/// The iterator of [`Components::iter`]: `(role, component)` in role order.
#[derive(Debug, Clone)]
pub struct ComponentsIter<'a>(std::slice::Iter<'a, (RoleName, Component)>);

impl<'a> Iterator for ComponentsIter<'a> {
    type Item = (&'a str, &'a Component);
    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(r, c)| (r.as_str(), c))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl DoubleEndedIterator for ComponentsIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back().map(|(r, c)| (r.as_str(), c))
    }
}

impl ExactSizeIterator for ComponentsIter<'_> {}

impl<'a> IntoIterator for &'a Components {
    type Item = (&'a str, &'a Component);
    type IntoIter = ComponentsIter<'a>;
    fn into_iter(self) -> ComponentsIter<'a> {
        self.iter()
    }
}

impl IntoIterator for Components {
    type Item = (String, Component);
    type IntoIter = ComponentsIntoIter;
    fn into_iter(self) -> ComponentsIntoIter {
        let entries = match self.0 {
            Slots::One([one]) => vec![one],
            Slots::Many(many) => many,
        };
        ComponentsIntoIter(entries.into_iter())
    }
}

/// The iterator of [`Components`]'s `into_iter`: owned `(role, component)` in role order.
#[derive(Debug)]
pub struct ComponentsIntoIter(std::vec::IntoIter<(RoleName, Component)>);

impl Iterator for ComponentsIntoIter {
    type Item = (String, Component);
    fn next(&mut self) -> Option<(String, Component)> {
        self.0.next().map(|(r, c)| (r.into_string(), c))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl ExactSizeIterator for ComponentsIntoIter {}

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
