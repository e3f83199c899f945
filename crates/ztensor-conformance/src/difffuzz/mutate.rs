//! The changes a case makes to a generated file ([`Mutation`]): on the manifest as a CBOR value
//! tree, re-encoded inside valid framing, and on the bytes.

use anyhow::{Result, bail};
use ciborium::Value as Cbor;
use serde::{Deserialize, Serialize};
use ztensor_format::Container;

use super::rng::Rng;

/// Where a byte-level change lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Region {
    /// The header magic.
    Header,
    /// Between the header and the manifest: blobs and the padding between them.
    Data,
    /// The manifest's bytes.
    Manifest,
    /// The manifest-size field (and, in 1.x, the footer magic).
    Trailer,
}

/// One change to a generated file. Tree changes pick their node by its number in a pre-order
/// walk of the manifest's values (modulo their count), so a change still lands somewhere
/// after the model it applies to is made smaller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Mutation {
    /// Removes a value from its map (the whole entry) or array.
    Drop {
        /// The value's number.
        node: u32,
    },
    /// Gives a value twice in its parent (a map entry twice: a duplicate key).
    Duplicate {
        /// The value's number.
        node: u32,
    },
    /// Replaces a value with one of another CBOR type.
    Retype {
        /// The value's number.
        node: u32,
        /// The new type (modulo 8: null, bool, integer, negative, float, text, bytes, array).
        kind: u8,
    },
    /// Replaces a value with an edge integer (0, lengths, 2^32, 2^63, negatives...).
    Int {
        /// The value's number.
        node: u32,
        /// Which edge integer.
        pick: u8,
    },
    /// Replaces a value with a text from a hostile list (empty, non-ASCII, path-like, NUL,
    /// bidirectional, a type or version name).
    Text {
        /// The value's number.
        node: u32,
        /// Which text.
        pick: u8,
    },
    /// Renames the map key of a value (an object's name, a field) to a hostile text.
    Key {
        /// The value's number.
        node: u32,
        /// Which text.
        pick: u8,
    },
    /// Swaps a value with a sibling's.
    Swap {
        /// The value's number.
        node: u32,
        /// The sibling's position (modulo their count).
        other: u32,
    },
    /// Wraps a value in arrays.
    Nest {
        /// The value's number.
        node: u32,
        /// How many arrays deep.
        depth: u8,
    },
    /// Sets `attributes` in the map holding a value (or the value itself, a map) to
    /// generated ones: nested maps and arrays, edge numbers, NaN, texts, bytes.
    Attributes {
        /// The value's number.
        node: u32,
        /// The seed of the attributes.
        seed: u32,
    },
    /// Gives an object's shape a higher rank by leading dimensions of 1 (the element count
    /// kept: a dense object stays valid at ranks 4 to 8).
    Rank {
        /// Which shape (by its number among the manifest's `shape` arrays).
        node: u32,
        /// The rank wanted.
        rank: u8,
    },
    /// Points one component at another's blob: its placement, encoding and digest fields
    /// become the other's (aliasing where sizes agree).
    Alias {
        /// Which component (by its number among the maps with an `offset`).
        node: u32,
        /// Which other component.
        other: u32,
    },
    /// Changes a byte of a region.
    Flip {
        /// The region.
        region: Region,
        /// The byte (modulo the region's length).
        at: u32,
        /// The bits changed.
        xor: u8,
    },
    /// Cuts the file short.
    Truncate {
        /// The new length (modulo the length).
        at: u32,
    },
    /// Changes the manifest-size field.
    Size {
        /// Added to the size.
        delta: i8,
    },
    /// zTensor 2: replaces the text of a `dtype`, `type`, `layout`, `encoding`, `digest` or
    /// `shard` field with a word of that field's vocabulary: registered, unknown, misspelt;
    /// for a digest, the right SHA-256 or XXH3-64 of the part's stored bytes, a wrong one,
    /// upper case, an unknown algorithm, malformed.
    Vocab {
        /// Which field (by its number among those fields, in that order of keys).
        node: u32,
        /// Which word.
        pick: u8,
    },
    /// zTensor 2: moves or resizes a part's blob (`[offset, length]`): by the alignment, by a
    /// byte, to 0, onto the first blob or the manifest, past the file.
    Place {
        /// Which part (by its number among the manifest's parts that have a blob).
        node: u32,
        /// Which change.
        pick: u8,
    },
    /// zTensor 2: a shard table and parts in shards: a valid table whose shard is not there,
    /// a part naming a shard the table lacks, badly named shards, a malformed entry.
    Shard {
        /// Which part (by its number among the manifest's parts).
        node: u32,
        /// Which change.
        pick: u8,
    },
    /// zTensor 2: swaps two entries of a map once the manifest's keys are sorted (keys out of
    /// deterministic order).
    Reorder {
        /// The value whose entry moves (by its number, as for the tree changes).
        node: u32,
        /// The entry it trades places with (modulo the map's length).
        other: u32,
    },
    /// zTensor 2: writes one value in a form deterministic CBOR forbids: a longer head than
    /// needed, an indefinite length, a tag, a float (or a float of the wrong width).
    Head {
        /// The value (by its number, as for the tree changes).
        node: u32,
        /// Which form (modulo 4).
        pick: u8,
    },
    /// zTensor 2: changes a byte inside a blob.
    Blob {
        /// Which blob (by its number among the file's non-empty blobs, as placed).
        node: u32,
        /// The byte (modulo the blob's length).
        at: u32,
        /// The bits changed.
        xor: u8,
    },
}

/// Edge integers for [`Mutation::Int`].
const INTS: [i128; 16] = [
    0,
    1,
    -1,
    7,
    8,
    64,
    255,
    4096,
    65_536,
    1 << 31,
    1 << 32,
    1 << 53,
    1 << 63,
    u64::MAX as i128,
    -(1 << 63),
    3,
];

/// Hostile or confusable texts for [`Mutation::Text`] and [`Mutation::Key`].
const TEXTS: [&str; 20] = [
    "",
    "é",
    "名前",
    "../../etc/passwd",
    "a\u{0}b",
    "object.0",
    "data",
    "values",
    "float16",
    "bfloat16",
    "f8_e4m3fn",
    "zstd",
    "raw",
    "dense",
    "sparse_csr",
    "1.9.0",
    "0.1",
    "sha256:00",
    "\u{202e}txt.exe",
    "x",
];

impl Mutation {
    /// A random change.
    pub fn random(rng: &mut Rng) -> Mutation {
        let node = rng.u32();
        #[allow(clippy::cast_possible_truncation)]
        let byte = |rng: &mut Rng| rng.below(256) as u8;
        match rng.below(17) {
            0 | 1 => Mutation::Drop { node },
            2 => Mutation::Duplicate { node },
            3 => Mutation::Retype { node, kind: byte(rng) },
            4 | 5 => Mutation::Int { node, pick: byte(rng) },
            6 => Mutation::Text { node, pick: byte(rng) },
            7 => Mutation::Key { node, pick: byte(rng) },
            8 => Mutation::Swap { node, other: rng.u32() },
            9 => Mutation::Nest { node, depth: 1 + byte(rng) % 40 },
            10 | 11 => Mutation::Attributes { node, seed: rng.u32() },
            12 => {
                let region = [Region::Header, Region::Data, Region::Data, Region::Manifest]
                    [usize::try_from(rng.below(4)).unwrap_or(0)];
                Mutation::Flip { region, at: rng.u32(), xor: 1 << rng.below(8) }
            }
            13 => Mutation::Truncate { at: rng.u32() },
            14 => Mutation::Rank { node, rank: 4 + byte(rng) % 5 },
            15 => Mutation::Alias { node, other: rng.u32() },
            _ => {
                #[allow(clippy::cast_possible_truncation)]
                let delta = (rng.below(17) as i8) - 8;
                Mutation::Size { delta }
            }
        }
    }

    /// Whether it changes the manifest's value tree (applied before the byte changes).
    pub(super) fn on_tree(&self) -> bool {
        !matches!(
            self,
            Mutation::Flip { .. }
                | Mutation::Truncate { .. }
                | Mutation::Size { .. }
                | Mutation::Blob { .. }
        )
    }
}

/// Where the manifest of a file this project wrote lies: (container, offset, length).
pub(super) fn manifest_span(file: &[u8]) -> Result<(Container, usize, usize)> {
    let container = Container::detect(file).map_err(|e| anyhow::anyhow!("{e}"))?;
    let trailer = usize::try_from(container.trailer_len())?;
    let Some(tail) = file.len().checked_sub(trailer).map(|at| &file[at..]) else {
        bail!("shorter than a trailer");
    };
    let limits = ztensor_format::Limits::default();
    let at = container
        .locate_manifest(file.len() as u64, tail, &limits)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok((container, usize::try_from(at.offset)?, usize::try_from(at.len)?))
}

/// The file with its manifest decoded, changed by `changes` and encoded again, in valid
/// framing.
pub(super) fn rewrite_manifest(file: &[u8], changes: &[&Mutation]) -> Result<Vec<u8>> {
    let (container, offset, len) = manifest_span(file)?;
    let mut tree: Cbor = ciborium::from_reader(&file[offset..offset + len])
        .map_err(|e| anyhow::anyhow!("our own manifest does not decode: {e}"))?;
    for change in changes {
        apply_tree(&mut tree, change);
    }
    let mut manifest = Vec::new();
    ciborium::into_writer(&tree, &mut manifest).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut out = file[..offset].to_vec();
    out.extend_from_slice(&manifest);
    out.extend_from_slice(&container.encode_trailer(manifest.len() as u64));
    Ok(out)
}

/// The paths of every value of a tree, in pre-order (the root's is empty); a map's children
/// are its entries' values.
pub(super) fn paths(tree: &Cbor) -> Vec<Vec<usize>> {
    fn walk(value: &Cbor, path: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        out.push(path.clone());
        let children: Vec<&Cbor> = match value {
            Cbor::Array(items) => items.iter().collect(),
            Cbor::Map(entries) => entries.iter().map(|(_, v)| v).collect(),
            _ => return,
        };
        for (i, child) in children.into_iter().enumerate() {
            path.push(i);
            walk(child, path, out);
            path.pop();
        }
    }
    let mut out = Vec::new();
    walk(tree, &mut Vec::new(), &mut out);
    out
}

pub(super) fn at_path<'t>(tree: &'t mut Cbor, path: &[usize]) -> Option<&'t mut Cbor> {
    let mut value = tree;
    for &i in path {
        value = match value {
            Cbor::Array(items) => items.get_mut(i)?,
            Cbor::Map(entries) => &mut entries.get_mut(i)?.1,
            _ => return None,
        };
    }
    Some(value)
}

pub(super) fn pick<T: Copy>(items: &[T], n: u32) -> T {
    items[usize::try_from(n).unwrap_or(0) % items.len()]
}

/// An integer value from the edge list.
fn edge_int(n: u8) -> Cbor {
    let v = pick(&INTS, u32::from(n));
    ciborium::value::Integer::try_from(v).map_or(Cbor::Null, Cbor::Integer)
}

/// Generated attribute values: maps, arrays, edge numbers, texts, bytes, up to `depth` deep.
fn attribute_value(rng: &mut Rng, depth: u32) -> Cbor {
    match rng.below(if depth == 0 { 7 } else { 9 }) {
        0 => Cbor::Null,
        1 => Cbor::Bool(rng.below(2) == 1),
        #[allow(clippy::cast_possible_truncation)]
        2 => edge_int(rng.below(256) as u8),
        3 => Cbor::Float(pick(&[0.5, -0.0, f64::NAN, f64::INFINITY, 1e300, 0.1], rng.u32())),
        4 => Cbor::Text(pick(&TEXTS, rng.u32()).to_owned()),
        #[allow(clippy::cast_possible_truncation)]
        5 => Cbor::Bytes((0..rng.below(5)).map(|i| i as u8).collect()),
        6 => Cbor::Text(String::new()),
        7 => Cbor::Array((0..rng.below(4)).map(|_| attribute_value(rng, depth - 1)).collect()),
        _ => Cbor::Map(
            (0..rng.below(4))
                .map(|_| {
                    let key = Cbor::Text(pick(&TEXTS, rng.u32()).to_owned());
                    (key, attribute_value(rng, depth - 1))
                })
                .collect(),
        ),
    }
}

pub(super) fn apply_tree(tree: &mut Cbor, change: &Mutation) {
    let all = paths(tree);
    let node = match change {
        Mutation::Drop { node }
        | Mutation::Duplicate { node }
        | Mutation::Retype { node, .. }
        | Mutation::Int { node, .. }
        | Mutation::Text { node, .. }
        | Mutation::Key { node, .. }
        | Mutation::Swap { node, .. }
        | Mutation::Nest { node, .. }
        | Mutation::Attributes { node, .. }
        | Mutation::Rank { node, .. }
        | Mutation::Alias { node, .. } => *node,
        _ => return,
    };
    if let Mutation::Rank { node, rank } = change {
        return reshape(tree, *node, *rank);
    }
    if let Mutation::Alias { node, other } = change {
        return alias(tree, *node, *other);
    }
    let path = pick(&all.iter().map(Vec::as_slice).collect::<Vec<_>>(), node).to_vec();
    let (parent_path, index) = match path.split_last() {
        Some((&i, parent)) => (parent.to_vec(), Some(i)),
        None => (Vec::new(), None),
    };
    match change {
        Mutation::Drop { .. } | Mutation::Duplicate { .. } | Mutation::Key { .. } => {
            let (Some(i), Some(parent)) = (index, at_path(tree, &parent_path)) else { return };
            match (change, parent) {
                (Mutation::Drop { .. }, Cbor::Array(items)) => drop(items.remove(i)),
                (Mutation::Drop { .. }, Cbor::Map(entries)) => drop(entries.remove(i)),
                (Mutation::Duplicate { .. }, Cbor::Array(items)) => {
                    let item = items[i].clone();
                    items.insert(i, item);
                }
                (Mutation::Duplicate { .. }, Cbor::Map(entries)) => {
                    let entry = entries[i].clone();
                    entries.insert(i + 1, entry);
                }
                (Mutation::Key { pick: p, .. }, Cbor::Map(entries)) => {
                    entries[i].0 = Cbor::Text(pick(&TEXTS, u32::from(*p)).to_owned());
                }
                _ => {}
            }
        }
        Mutation::Swap { other, .. } => {
            let (Some(i), Some(parent)) = (index, at_path(tree, &parent_path)) else { return };
            let n = match parent {
                Cbor::Array(items) => items.len(),
                Cbor::Map(entries) => entries.len(),
                _ => return,
            };
            let j = usize::try_from(*other).unwrap_or(0) % n;
            match parent {
                Cbor::Array(items) => items.swap(i, j),
                Cbor::Map(entries) => {
                    let (a, b) = (entries[i].1.clone(), entries[j].1.clone());
                    entries[i].1 = b;
                    entries[j].1 = a;
                }
                _ => {}
            }
        }
        Mutation::Attributes { seed, .. } => {
            let mut rng = Rng::new(u64::from(*seed));
            let value = attribute_value(&mut rng, 3);
            // The value's own map, or the map holding it.
            let target = match at_path(tree, &path) {
                Some(Cbor::Map(_)) => path.clone(),
                _ => parent_path,
            };
            if let Some(Cbor::Map(entries)) = at_path(tree, &target) {
                let key = Cbor::Text("attributes".to_owned());
                match entries.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, v)) => *v = value,
                    None => entries.push((key, value)),
                }
            }
        }
        _ => {
            let Some(value) = at_path(tree, &path) else { return };
            *value = match change {
                Mutation::Retype { kind, .. } => match kind % 8 {
                    0 => Cbor::Null,
                    1 => Cbor::Bool(true),
                    2 => Cbor::Integer(7.into()),
                    3 => Cbor::Integer((-7).into()),
                    4 => Cbor::Float(1.5),
                    5 => Cbor::Text("7".to_owned()),
                    6 => Cbor::Bytes(vec![7]),
                    _ => Cbor::Array(vec![Cbor::Integer(7.into())]),
                },
                Mutation::Int { pick: p, .. } => edge_int(*p),
                Mutation::Text { pick: p, .. } => {
                    Cbor::Text(pick(&TEXTS, u32::from(*p)).to_owned())
                }
                Mutation::Nest { depth, .. } => {
                    let mut v = value.clone();
                    for _ in 0..*depth {
                        v = Cbor::Array(vec![v]);
                    }
                    v
                }
                _ => return,
            };
        }
    }
}

/// The paths of the values of map entries keyed `key`.
pub(super) fn keyed(tree: &Cbor, key: &str) -> Vec<Vec<usize>> {
    paths(tree)
        .into_iter()
        .filter(|path| {
            let Some((&i, parent)) = path.split_last() else { return false };
            let mut value = tree;
            for &j in parent {
                value = match value {
                    Cbor::Array(items) => &items[j],
                    Cbor::Map(entries) => &entries[j].1,
                    _ => return false,
                };
            }
            matches!(value, Cbor::Map(entries)
                if entries.get(i).is_some_and(|(k, _)| *k == Cbor::Text(key.to_owned())))
        })
        .collect()
}

/// [`Mutation::Rank`].
fn reshape(tree: &mut Cbor, node: u32, rank: u8) {
    let shapes = keyed(tree, "shape");
    if shapes.is_empty() {
        return;
    }
    let path = shapes[usize::try_from(node).unwrap_or(0) % shapes.len()].clone();
    if let Some(Cbor::Array(dims)) = at_path(tree, &path) {
        while dims.len() < usize::from(rank.min(64)) {
            dims.insert(0, Cbor::Integer(1.into()));
        }
    }
}

/// [`Mutation::Alias`].
fn alias(tree: &mut Cbor, node: u32, other: u32) {
    // A component is a map with an `offset`; its map's path is the offset's parent.
    let components: Vec<Vec<usize>> = keyed(tree, "offset")
        .into_iter()
        .filter_map(|p| p.split_last().map(|(_, parent)| parent.to_vec()))
        .collect();
    if components.len() < 2 {
        return;
    }
    let n = components.len();
    let a = usize::try_from(node).unwrap_or(0) % n;
    let b = (a + 1 + usize::try_from(other).unwrap_or(0) % (n - 1)) % n;
    let placement = ["offset", "length", "size", "encoding", "digest", "checksum"];
    let Some(Cbor::Map(source)) = at_path(tree, &components[b]).cloned() else { return };
    let Some(Cbor::Map(target)) = at_path(tree, &components[a]) else { return };
    for (key, value) in source {
        let Cbor::Text(name) = &key else { continue };
        if !placement.contains(&name.as_str()) && name != "uncompressed_length" {
            continue;
        }
        match target.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => *v = value,
            None => target.push((key, value)),
        }
    }
}

pub(super) fn apply_bytes(file: &mut Vec<u8>, change: &Mutation) {
    if file.is_empty() {
        return;
    }
    let len = file.len();
    let index = |at: u32, n: usize| usize::try_from(at).unwrap_or(0) % n.max(1);
    match change {
        Mutation::Truncate { at } => file.truncate(index(*at, len)),
        Mutation::Size { delta } => {
            // The size field is the first eight bytes of the trailer, as written.
            let Ok((container, _, _)) = manifest_span(file) else { return };
            let Ok(trailer) = usize::try_from(container.trailer_len()) else { return };
            let Some(at) = len.checked_sub(trailer) else { return };
            let mut field = [0u8; 8];
            field.copy_from_slice(&file[at..at + 8]);
            let size = u64::from_le_bytes(field).wrapping_add_signed(i64::from(*delta));
            file[at..at + 8].copy_from_slice(&size.to_le_bytes());
        }
        Mutation::Flip { region, at, xor } => {
            let (start, end) = match (region, manifest_span(file)) {
                (Region::Header, _) => (0, 8.min(len)),
                (Region::Data, Ok((_, offset, _))) => (8.min(offset), offset),
                (Region::Manifest, Ok((_, offset, mlen))) => (offset, offset + mlen),
                (Region::Trailer, Ok((_, offset, mlen))) => (offset + mlen, len),
                (_, Err(_)) => (0, len),
            };
            if end > start {
                file[start + index(*at, end - start)] ^= xor.max(&1);
            }
        }
        _ => {}
    }
}
