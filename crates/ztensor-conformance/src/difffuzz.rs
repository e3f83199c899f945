//! Differential fuzzing of any implementation that speaks the reading protocol
//! (`ztensor-conformance fuzz --impl CMD`).
//!
//! Each case is a file made from a seed: a model from the generator behind the property tests
//! ([`crate::model::Model`]), written by this project's writer, then changed by a list of
//! [`Mutation`]s, first on the manifest as a CBOR value tree (re-encoded inside valid
//! framing), then on the bytes. The implementation's verdict is compared with this project's
//! strict and lenient readers and any divergence classified ([`Class`]). A divergent case is
//! reduced (mutations dropped, objects and shapes made smaller, byte changes undone) while it
//! keeps its class and first difference, then reported with its recipe, from which it is made
//! again byte for byte.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use ciborium::Value as Cbor;
use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};
use ztensor_format::{Container, DigestAlgorithm, Encoding, Version};

use crate::implementation::{Implementation, Ran, Verdict};
use crate::model::Model;
use crate::runner::{difference, projection};

/// A small, fast, seedable generator (SplitMix64): the cases of a seed are the same on every
/// machine and in every release of this crate that keeps this function.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// The generator of `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// 32 random bits.
    #[allow(clippy::cast_possible_truncation)]
    pub fn u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
}

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
    fn on_tree(&self) -> bool {
        !matches!(self, Mutation::Flip { .. } | Mutation::Truncate { .. } | Mutation::Size { .. })
    }
}

/// A case: the generator's input bytes and the changes made to the file it writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recipe {
    /// The seed the case was made from (`--seed SEED --runs 1` makes it again).
    pub seed: u64,
    /// The generator's input, hex ([`Model::from_bytes`]).
    pub model: String,
    /// The changes, in order.
    pub mutations: Vec<Mutation>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn unhex(text: &str) -> Result<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        bail!("not an even number of hex digits: {text:?}");
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).context("not hex"))
        .collect()
}

/// The versions cases may have.
pub const VERSIONS: [Version; 3] = [Version::V0_1, Version::V1_1, Version::V1_2];

impl Recipe {
    /// The case of `seed`, of one of `versions` (all when empty).
    pub fn generate(seed: u64, versions: &[Version]) -> Recipe {
        let mut rng = Rng::new(seed);
        let versions = if versions.is_empty() { &VERSIONS[..] } else { versions };
        let version = versions[usize::try_from(rng.below(versions.len() as u64)).unwrap_or(0)];
        let mut model = vec![0u8; 48];
        for b in &mut model {
            #[allow(clippy::cast_possible_truncation)]
            let random = rng.next_u64() as u8;
            *b = random;
        }
        // The generator picks the version by the first byte (modulo 3), and the count by the
        // second (modulo 9): up to three objects keeps files small and fast.
        #[allow(clippy::cast_possible_truncation)]
        let index = VERSIONS.iter().position(|&v| v == version).unwrap_or(0) as u8;
        model[0] = index;
        #[allow(clippy::cast_possible_truncation)]
        let count = 1 + rng.below(3) as u8;
        model[1] = count;
        let changes = match rng.below(8) {
            0 | 1 => 0,
            2..=5 => 1,
            6 => 2,
            _ => 3,
        };
        let mut mutations: Vec<Mutation> =
            (0..changes).map(|_| Mutation::random(&mut rng)).collect();
        if changes == 0 {
            // Valid files of what the generator alone does not make: ranks 4 to 8, file and
            // object attributes of every kind.
            #[allow(clippy::cast_possible_truncation)]
            let rank = 4 + rng.below(5) as u8;
            if rng.below(2) == 0 {
                mutations.push(Mutation::Rank { node: rng.u32(), rank });
            }
            if rng.below(2) == 0 {
                mutations.push(Mutation::Attributes { node: 0, seed: rng.u32() });
            }
        }
        Recipe { seed, model: hex(&model), mutations }
    }

    /// The file the recipe makes.
    ///
    /// # Errors
    /// When the recipe's model hex is broken (a recipe read from a file), or the generator's
    /// model is refused by the writer (a bug of this project).
    pub fn build(&self) -> Result<Vec<u8>> {
        let model = Model::from_bytes(&unhex(&self.model)?);
        let (mut file, _) = model.write().context("writing the generated model")?;
        let (tree, bytes): (Vec<&Mutation>, Vec<&Mutation>) =
            self.mutations.iter().partition(|m| m.on_tree());
        if !tree.is_empty() {
            file = rewrite_manifest(&file, &tree)?;
        }
        for m in bytes {
            apply_bytes(&mut file, m);
        }
        Ok(file)
    }
}

/// Where the manifest of a file this project wrote lies: (container, offset, length).
fn manifest_span(file: &[u8]) -> Result<(Container, usize, usize)> {
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
fn rewrite_manifest(file: &[u8], changes: &[&Mutation]) -> Result<Vec<u8>> {
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
fn paths(tree: &Cbor) -> Vec<Vec<usize>> {
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

fn at_path<'t>(tree: &'t mut Cbor, path: &[usize]) -> Option<&'t mut Cbor> {
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

fn pick<T: Copy>(items: &[T], n: u32) -> T {
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

fn apply_tree(tree: &mut Cbor, change: &Mutation) {
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
fn keyed(tree: &Cbor, key: &str) -> Vec<Vec<usize>> {
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

fn apply_bytes(file: &mut Vec<u8>, change: &Mutation) {
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

/// A divergence's class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// Another exit status, a signal, or output that is not a dump.
    Crash,
    /// No answer within the timeout.
    Hang,
    /// Accepted a file both of this project's readers reject.
    AcceptsInvalid,
    /// Rejected a file this project's strict reader accepts.
    RejectsValid,
    /// Both accept, and the content differs.
    Misreads,
    /// A writer wrote a file that breaks a rule or holds other content than it was given.
    WritesInvalid,
}

impl Class {
    /// Every class, in report order.
    pub const ALL: [Class; 6] = [
        Class::Crash,
        Class::Hang,
        Class::AcceptsInvalid,
        Class::RejectsValid,
        Class::Misreads,
        Class::WritesInvalid,
    ];

    /// The class's name (`accepts-invalid`): directory and report name.
    pub fn name(self) -> &'static str {
        match self {
            Class::Crash => "crash",
            Class::Hang => "hang",
            Class::AcceptsInvalid => "accepts-invalid",
            Class::RejectsValid => "rejects-valid",
            Class::Misreads => "misreads",
            Class::WritesInvalid => "writes-invalid",
        }
    }
}

/// This project's verdicts on a file.
#[derive(Debug, Clone)]
pub struct Ours {
    /// The lenient reader's dump, and whether it accepted.
    pub lenient: (Json, bool),
    /// The strict reader's dump, and whether it accepted.
    pub strict: (Json, bool),
    /// What the file has that the specs leave to each reader (a digest other than SHA-256,
    /// aliasing, nonzero padding, ...), if anything: accepting or rejecting it is no
    /// divergence.
    pub latitude: Option<String>,
}

/// This project's readers on the file at `path` (holding `bytes`).
///
/// # Errors
/// When the file cannot be read at all.
pub fn ours(path: &Path, bytes: &[u8]) -> Result<Ours> {
    // The lenient dump exactly as `ztensor-conformance dump FILE` prints it.
    let lenient = ztensor_dump::file(path)?;
    let reader = ztensor_io::Reader::new(bytes, &ztensor_dump::options()).ok();
    judged(lenient, reader.as_ref(), bytes)
}

/// [`Ours`] from the lenient dump, the lenient reader (when it opened) and the bytes: the
/// strict verdict is taken without a dump of its own (an accepted file's is the lenient one:
/// the same content), and what the specs leave open is looked for.
fn judged(
    lenient: (Json, bool),
    reader: Option<&ztensor_io::Reader<&[u8]>>,
    bytes: &[u8],
) -> Result<Ours> {
    let strict = match crate::strict_rejection(bytes)? {
        Some(rejected) => (rejected, false),
        None => (lenient.0.clone(), true),
    };
    let mut latitude = reader.and_then(|r| latitude(r, bytes));
    if latitude.is_none() && lenient.1 != strict.1 {
        latitude = Some("a rule only strict readers enforce".to_owned());
    }
    // An object this reader cannot read (an unknown type or layout, a digest that does not
    // match) leaves the file readable here; another reader may refuse the whole file.
    let object_errors = lenient.0["objects"]
        .as_array()
        .is_some_and(|objects| objects.iter().any(|o| !o["error"].is_null()));
    if latitude.is_none() && object_errors {
        latitude = Some("an object this reader reports as unreadable".to_owned());
    }
    Ok(Ours { lenient, strict, latitude })
}

/// What a file readable here (`reader`, over its `bytes`) has that the specs leave to each
/// reader (the corpus's implementation-defined kinds).
fn latitude(reader: &ztensor_io::Reader<&[u8]>, bytes: &[u8]) -> Option<String> {
    let version = reader.version();
    let mut spans: Vec<(u64, u64)> = Vec::new();
    for object in reader.objects() {
        for (_, c) in &object.model().components {
            if let Some(d) = &c.digest
                && d.algorithm() != DigestAlgorithm::Sha256
            {
                return Some(format!(
                    "a {:?} digest (its algorithm or case is open)",
                    d.algorithm()
                ));
            }
            if version == Version::V1_2
                && c.encoding == Encoding::Zstd
                && c.uncompressed_length.is_none()
            {
                return Some("zstd without uncompressed_length".to_owned());
            }
            if c.length > 0 {
                spans.push((c.offset, c.length));
            }
        }
    }
    spans.sort_unstable();
    if spans.windows(2).any(|w| w[0].0 == w[1].0) {
        return Some("two objects sharing a blob".to_owned());
    }
    // Padding: the bytes after the header and before the manifest that no blob covers.
    let (_, manifest_at, _) = manifest_span(bytes).ok()?;
    let mut at = 8u64;
    for (offset, len) in spans.iter().copied().chain([(manifest_at as u64, 0)]) {
        let gap = bytes.get(usize::try_from(at).ok()?..usize::try_from(offset).ok()?);
        if gap.is_some_and(|g| g.iter().any(|&b| b != 0)) {
            return Some("nonzero padding".to_owned());
        }
        at = at.max(offset + len);
    }
    None
}

/// A divergence: its class and what told it apart (the first difference, the rule, the
/// exit), which deduplicates findings.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Divergence {
    /// The class.
    pub class: Class,
    /// What told it apart, with numbers and hashes left out.
    pub key: String,
}

/// The first place two JSON values differ, as a path with array positions left out
/// (`objects.components.data.dtype`).
fn first_difference(a: &Json, b: &Json, path: &str) -> Option<String> {
    match (a, b) {
        // What differs inside attributes is one difference, whichever key it is.
        _ if path.ends_with("attributes") && a != b => Some(path.to_owned()),
        (Json::Object(x), Json::Object(y)) => {
            for (k, v) in x {
                let child = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                if let Some(d) = first_difference(v, y.get(k).unwrap_or(&Json::Null), &child) {
                    return Some(d);
                }
            }
            y.keys().find(|k| !x.contains_key(*k)).map(|k| format!("{path}.{k}"))
        }
        (Json::Array(x), Json::Array(y)) if x.len() == y.len() => {
            x.iter().zip(y).find_map(|(v, w)| first_difference(v, w, path))
        }
        (Json::Array(_), Json::Array(_)) => Some(format!("{path} (count)")),
        _ if a == b => None,
        _ => Some(path.to_owned()),
    }
}

/// Classifies the implementation's verdict against ours; `None` when they agree (or differ
/// only where the specs let readers differ).
pub fn classify(ours: &Ours, theirs: &Verdict) -> Option<(Divergence, String)> {
    let divergence =
        |class, key: String, detail: String| Some((Divergence { class, key: mask(&key) }, detail));
    let (lenient, lenient_ok) = &ours.lenient;
    let (strict, strict_ok) = &ours.strict;
    match theirs {
        // A crash is told apart by how it ended and, for a panic, where.
        Verdict::Crash(why) => {
            // The panic's source file by its last two components (no line, no toolchain hash).
            let place = why.split_once("panicked at ").map(|(_, at)| {
                let path = at.split(':').next().unwrap_or_default();
                let parts: Vec<&str> = path.rsplit('/').take(2).collect();
                parts.into_iter().rev().collect::<Vec<_>>().join("/")
            });
            let ended = why.split(':').next().unwrap_or_default();
            let key = place.map_or_else(|| ended.to_owned(), |p| format!("{ended}: panic at {p}"));
            divergence(Class::Crash, key, why.clone())
        }
        Verdict::Hang => divergence(Class::Hang, "hang".to_owned(), "no answer".to_owned()),
        Verdict::Accepted(dump) => {
            if !lenient_ok && !strict_ok {
                let rule = strict["error"]["kind"].as_str().unwrap_or("rejected").to_owned();
                let message = strict["error"]["message"].as_str().unwrap_or("").to_owned();
                return divergence(
                    Class::AcceptsInvalid,
                    rule.clone(),
                    format!("accepted a file that breaks {rule}: {message}"),
                );
            }
            let (a, b) = (projection(lenient), projection(dump));
            if a == b {
                return None;
            }
            let key = first_difference(&a, &b, "").unwrap_or_else(|| "content".to_owned());
            divergence(Class::Misreads, key, difference(&a, &b))
        }
        Verdict::Rejected(dump) => {
            if !strict_ok || ours.latitude.is_some() {
                return None;
            }
            let kind = dump["error"]["kind"].as_str().unwrap_or("rejected").to_owned();
            let message = dump["error"]["message"].as_str().unwrap_or("").to_owned();
            divergence(Class::RejectsValid, kind, format!("rejected a valid file: {message}"))
        }
    }
}

/// A key with its numbers and hex strings (digests, hashes) left out, so that findings
/// differing only in those are one.
fn mask(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        let hex = word.len() >= 8 && word.chars().all(|c| c.is_ascii_hexdigit());
        if hex || (!word.is_empty() && word.chars().all(|c| c.is_ascii_digit())) {
            out.push('#');
        } else {
            for c in word.chars() {
                if !c.is_ascii_digit() {
                    out.push(c);
                } else if !out.ends_with('#') {
                    out.push('#');
                }
            }
        }
        word.clear();
    };
    for c in key.chars() {
        if c.is_ascii_alphanumeric() {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out.chars().take(160).collect()
}

/// How long or how many cases a run takes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Budget {
    /// Cases made until this many seconds have passed.
    Seconds(f64),
    /// This many cases.
    Runs(u64),
}

/// A fuzzing run's settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// The implementation's command (`COMMAND FILE`; `COMMAND --serve` where it speaks it).
    pub command: String,
    /// How long to run.
    pub budget: Budget,
    /// Case `i` is made from `seed + i`.
    pub seed: u64,
    /// The versions cases may have (all when empty).
    pub versions: Vec<Version>,
    /// How long one file may take.
    pub timeout: Duration,
    /// Where findings are written (`<class>/<n>.zt` and `.json`), if anywhere.
    pub out: Option<PathBuf>,
    /// Whether an `out` that exists and holds files may be replaced.
    pub force: bool,
    /// Implementation calls a finding's reduction may make.
    pub minimize_calls: u32,
    /// Seconds a finding's reduction may take (a hang costs the timeout each time it is
    /// tried again).
    pub minimize_seconds: f64,
    /// Whether `COMMAND --serve` is tried (else a process per file).
    pub serve: bool,
    /// Whether the implementation is fuzzed as a writer (`COMMAND RECIPE OUT`).
    pub writer: bool,
}

impl Config {
    /// The defaults: 60 s from seed 0, every version, 10 s a file, nothing written.
    pub fn new(command: &str) -> Config {
        Config {
            command: command.to_owned(),
            budget: Budget::Seconds(60.0),
            seed: 0,
            versions: Vec::new(),
            timeout: Duration::from_secs(10),
            out: None,
            force: false,
            minimize_calls: 400,
            minimize_seconds: 60.0,
            serve: true,
            writer: false,
        }
    }
}

/// What one case came to.
#[derive(Debug, Clone)]
pub struct Judged {
    /// The file: the one read (reading), or the one written (writing; empty when none was).
    pub file: Vec<u8>,
    /// The implementation's verdict, as the report gives it.
    pub theirs: Json,
    /// Ours, as the report gives it: our strict and lenient verdicts (reading), the recipe
    /// the writer was given (writing).
    pub ours: Json,
    /// The writer recipe the implementation was given (writing).
    pub writer_recipe: Option<Json>,
    /// The divergence, if any, and what differed.
    pub divergence: Option<(Divergence, String)>,
}

/// One way of asking an implementation about cases: as a reader or as a writer.
trait Judge {
    /// The verdicts on the case of `recipe`.
    fn judge(&mut self, recipe: &Recipe) -> Result<Judged>;
    /// Whether files go to one `--serve` process, and the processes started.
    fn processes(&self) -> (bool, u64);
    /// Whether the implementation is called in this process.
    fn in_process(&self) -> bool {
        false
    }
}

/// The implementation as a reader: each case's file is read by it and by ours.
struct Reading {
    implementation: Implementation,
    dir: PathBuf,
    /// Cases read so far: each is written under a name of its own, so that an answer naming
    /// its file (`--serve`) can only name the one asked.
    read: u64,
}

fn ours_json(ours: &Ours) -> Json {
    json!({
        "lenient": {"accepted": ours.lenient.1, "dump": ours.lenient.0},
        "strict": {"accepted": ours.strict.1, "dump": ours.strict.0},
        "latitude": ours.latitude,
    })
}

impl Judge for Reading {
    fn judge(&mut self, recipe: &Recipe) -> Result<Judged> {
        let file = recipe.build()?;
        self.read += 1;
        let path = self.dir.join(format!("case-{}.zt", self.read));
        std::fs::write(&path, &file)?;
        let ours = ours(&path, &file);
        let theirs = self.implementation.read(&path);
        let _ = std::fs::remove_file(&path);
        Ok(read_judged(file, &ours?, &theirs))
    }

    fn processes(&self) -> (bool, u64) {
        (self.implementation.persistent(), self.implementation.processes())
    }
}

/// What a reader's verdict on `file` came to beside ours.
fn read_judged(file: Vec<u8>, ours: &Ours, theirs: &Verdict) -> Judged {
    Judged {
        divergence: classify(ours, theirs),
        theirs: verdict_json(theirs),
        ours: ours_json(ours),
        writer_recipe: None,
        file,
    }
}

/// An implementation read in this process: each case's bytes are given to it and to ours.
struct InProcessReading<'a> {
    implementation: &'a mut dyn InProcess,
}

impl Judge for InProcessReading<'_> {
    fn judge(&mut self, recipe: &Recipe) -> Result<Judged> {
        let file = recipe.build()?;
        let ours = ours_in_process(&file)?;
        let call = std::panic::AssertUnwindSafe(|| self.implementation.read(&file));
        let theirs = std::panic::catch_unwind(call).unwrap_or_else(|panic| {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_owned());
            Verdict::Crash(format!("panicked: {message}"))
        });
        Ok(read_judged(file, &ours, &theirs))
    }

    fn processes(&self) -> (bool, u64) {
        (false, 0)
    }

    fn in_process(&self) -> bool {
        true
    }
}

/// The writer recipe (`ztensor-recipe/1`) of a case: the content of the model its generator
/// input makes (its changes are for readers), for any writer to write.
///
/// # Errors
/// When the recipe's model hex is broken, or our writer refuses the generated model.
pub fn writer_recipe(recipe: &Recipe) -> Result<crate::writer_check::Recipe> {
    use crate::writer_check::{RecipeComponent, RecipeObject, Target};
    let model = Model::from_bytes(&unhex(&recipe.model)?);
    let (_, expect) = model.write().context("writing the generated model")?;
    let objects = model
        .objects
        .iter()
        .zip(expect)
        .map(|(spec, e)| RecipeObject {
            name: e.name,
            format: e.format.name().to_owned(),
            shape: e.shape,
            attributes: None,
            zstd: !matches!(spec.options.compression, ztensor_io::Compression::Raw),
            digest: e.digest,
            components: e
                .components
                .into_iter()
                .map(|(role, (dtype, logical_type, bytes))| RecipeComponent {
                    role,
                    dtype,
                    logical_type,
                    bytes,
                })
                .collect(),
        })
        .collect();
    Ok(crate::writer_check::Recipe {
        name: format!("fuzz-{}", recipe.seed),
        version: Target::Zt(model.version),
        covers: "a generated model".to_owned(),
        attributes: None,
        objects,
    })
}

/// The bytes of a written file kept with a finding when it is larger than its recipe can need.
const KEPT_OF_TOO_LARGE: u64 = 1 << 20;

/// The first `n` bytes of `file` (none when it cannot be read).
fn head(file: &Path, n: u64) -> Vec<u8> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    if let Ok(f) = std::fs::File::open(file) {
        let _ = f.take(n).read_to_end(&mut bytes);
    }
    bytes
}

/// The implementation as a writer (the writer protocol, `COMMAND RECIPE OUT`): each case's
/// content is given it as a recipe, and what it writes is graded by the writer check.
struct Writing {
    program: String,
    args: Vec<String>,
    timeout: Duration,
    dir: PathBuf,
    started: u64,
}

impl Writing {
    fn new(command: &str, timeout: Duration, dir: &Path) -> Result<Writing> {
        let mut words = command.split_whitespace().map(str::to_owned);
        let Some(program) = words.next() else { bail!("empty --impl command") };
        Ok(Writing { program, args: words.collect(), timeout, dir: dir.to_owned(), started: 0 })
    }
}

impl Judge for Writing {
    fn judge(&mut self, recipe: &Recipe) -> Result<Judged> {
        let given = writer_recipe(recipe)?;
        let recipe_json = given.to_json();
        let recipe_path = self.dir.join("recipe.json");
        std::fs::write(&recipe_path, serde_json::to_string_pretty(&recipe_json)? + "\n")?;
        let out = self.dir.join("written.zt");
        let _ = std::fs::remove_file(&out);
        self.started += 1;
        let mut command = std::process::Command::new(&self.program);
        command.args(&self.args).arg(&recipe_path).arg(&out);
        let ended = crate::implementation::run_to_end(
            &mut command,
            self.timeout,
            crate::implementation::MESSAGES_LIMIT,
        )
        .with_context(|| format!("cannot run {:?}", self.program))?;
        // What it wrote, unless it is larger than this recipe can need: then only its first
        // bytes are kept with the finding.
        let (written, too_large) = match crate::writer_check::read_written(&given, &out) {
            Ok(Ok(bytes)) => (bytes, None),
            Ok(Err(why)) => (head(&out, KEPT_OF_TOO_LARGE), Some(why)),
            Err(_) => (Vec::new(), None),
        };
        let judged = |theirs: Json, divergence| Judged {
            file: written.clone(),
            theirs,
            ours: json!({"recipe": recipe_json}),
            writer_recipe: Some(recipe_json.clone()),
            divergence,
        };
        let (status, stderr) = match ended {
            Ran::Ended(status, _, stderr) => (status, stderr),
            Ran::Hang => {
                let d =
                    (Divergence { class: Class::Hang, key: "hang".to_owned() }, "no answer".into());
                return Ok(judged(json!({"verdict": "hang"}), Some(d)));
            }
            Ran::Flooded(limit) => {
                let why = format!("printed more than {limit} bytes on stdout");
                let d = (Divergence { class: Class::Crash, key: mask(&why) }, why.clone());
                return Ok(judged(json!({"verdict": "crash", "why": why}), Some(d)));
            }
        };
        let stderr = String::from_utf8_lossy(&stderr);
        let said = stderr.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
        if status.code() == Some(0)
            && let Some(why) = too_large
        {
            let key = "wrote more than the recipe can need".to_owned();
            let d = (Divergence { class: Class::WritesInvalid, key }, why);
            let kept = written.len();
            return Ok(judged(json!({"verdict": "written", "check": d.1, "kept": kept}), Some(d)));
        }
        Ok(match status.code() {
            Some(0) if out.exists() => match crate::writer_check::check(&given, &written) {
                Ok(()) => judged(json!({"verdict": "written"}), None),
                Err(why) => {
                    // Told apart by what the check says, names, numbers and the details in
                    // parentheses left out.
                    let key: String = why
                        .split(" (")
                        .next()
                        .unwrap_or_default()
                        .split('"')
                        .enumerate()
                        .map(|(i, part)| if i % 2 == 1 { "…" } else { part })
                        .collect();
                    let d = (Divergence { class: Class::WritesInvalid, key: mask(&key) }, why);
                    judged(json!({"verdict": "written", "check": d.1}), Some(d))
                }
            },
            Some(crate::writer_check::UNSUPPORTED) => {
                judged(json!({"verdict": "unsupported", "why": said}), None)
            }
            _ => {
                let ended =
                    match (status.code(), std::os::unix::process::ExitStatusExt::signal(&status)) {
                        (Some(0), _) => "exit status 0 without writing the file".to_owned(),
                        (Some(code), _) => format!("exit status {code}"),
                        (None, Some(signal)) => format!("killed by signal {signal}"),
                        (None, None) => "ended without a status".to_owned(),
                    };
                let why = if said.is_empty() { ended.clone() } else { format!("{ended}: {said}") };
                let d = (Divergence { class: Class::Crash, key: mask(&ended) }, why.clone());
                judged(json!({"verdict": "crash", "why": why}), Some(d))
            }
        })
    }

    fn processes(&self) -> (bool, u64) {
        (false, self.started)
    }
}

/// One reported divergence, reduced.
#[derive(Debug, Clone)]
pub struct Finding {
    /// Its class and key.
    pub divergence: Divergence,
    /// What differed, in words.
    pub detail: String,
    /// The reduced case.
    pub recipe: Recipe,
    /// Which case of the run found it first.
    pub case: u64,
    /// Seconds from the run's start to the first case of this divergence.
    pub found_after: f64,
    /// How many cases gave this divergence (before reduction).
    pub hits: u64,
    /// The verdicts on the reduced case.
    pub judged: Judged,
    /// Where it was written, if it was.
    pub written: Option<PathBuf>,
}

/// A run's outcome.
#[derive(Debug)]
pub struct Report {
    /// Cases made and read (or written).
    pub cases: u64,
    /// Seconds the run took (reduction included).
    pub seconds: f64,
    /// Seconds spent making and reading cases (reduction not included).
    pub fuzzing_seconds: f64,
    /// Whether the implementation was read through `--serve`.
    pub persistent: bool,
    /// Processes the implementation was started as.
    pub processes: u64,
    /// Whether the implementation was called in this process ([`run_in_process`]).
    pub in_process: bool,
    /// The distinct divergences, reduced, in the order found.
    pub findings: Vec<Finding>,
    /// The run's settings.
    pub seed: u64,
    /// The command.
    pub command: String,
    /// Whether the implementation was fuzzed as a writer.
    pub writer: bool,
    /// Whether a signal stopped the run ([`crate::implementation::stop_all`]): the findings
    /// are those found so far, unreduced.
    pub interrupted: bool,
}

/// Reduces `recipe` while it keeps `divergence`: fewer mutations, fewer objects, generator
/// bytes set to zero (smaller shapes and ranks, first choices), then byte changes made
/// single bits; at most `calls` implementation calls and `seconds`.
fn minimize(
    judge: &mut dyn Judge,
    recipe: &Recipe,
    divergence: &Divergence,
    (calls, seconds): (u32, f64),
) -> Result<Recipe> {
    let mut best = recipe.clone();
    let mut left = calls;
    let started = Instant::now();
    let mut keeps = |candidate: &Recipe, left: &mut u32| -> Result<bool> {
        let stopping = crate::implementation::stopping;
        if *left == 0 || started.elapsed().as_secs_f64() > seconds || stopping() {
            return Ok(false);
        }
        *left -= 1;
        let judged = judge.judge(candidate);
        // A verdict given while a signal stops the run is not the implementation's.
        if stopping() {
            return Ok(false);
        }
        Ok(judged?.divergence.is_some_and(|(d, _)| d == *divergence))
    };
    // Mutations, last first.
    let mut i = best.mutations.len();
    while i > 0 {
        i -= 1;
        let mut candidate = best.clone();
        candidate.mutations.remove(i);
        if keeps(&candidate, &mut left)? {
            best = candidate;
        }
    }
    // Fewer objects: the generator's second byte is the count.
    let mut model = unhex(&best.model)?;
    while model.get(1).is_some_and(|&c| c % 9 > 1) {
        let mut smaller = model.clone();
        smaller[1] = model[1] % 9 - 1;
        let candidate = Recipe { model: hex(&smaller), ..best.clone() };
        if !keeps(&candidate, &mut left)? {
            break;
        }
        model = smaller;
        best = candidate;
    }
    // Each later byte zero (the first is the version).
    for at in 2..model.len() {
        if model[at] == 0 {
            continue;
        }
        let mut smaller = model.clone();
        smaller[at] = 0;
        let candidate = Recipe { model: hex(&smaller), ..best.clone() };
        if keeps(&candidate, &mut left)? {
            model = smaller;
            best = candidate;
        }
    }
    // Byte changes: the lowest bit that keeps it.
    for i in 0..best.mutations.len() {
        if let Mutation::Flip { region, at, xor } = best.mutations[i].clone()
            && xor.count_ones() > 1
        {
            for bit in 0..8 {
                let one = 1u8 << bit;
                if xor & one == 0 {
                    continue;
                }
                let mut candidate = best.clone();
                candidate.mutations[i] = Mutation::Flip { region, at, xor: one };
                if keeps(&candidate, &mut left)? {
                    best = candidate;
                    break;
                }
            }
        }
    }
    Ok(best)
}

/// Whether `out` can take the findings: missing, empty, or (with `force`) to be replaced.
fn check_out(out: &Path, force: bool) -> Result<bool> {
    if !out.exists() {
        return Ok(false);
    }
    let busy = std::fs::read_dir(out)
        .with_context(|| format!("{} is not a directory", out.display()))?
        .next()
        .is_some();
    if busy && !force {
        bail!("{} exists and is not empty (--force replaces what it holds)", out.display());
    }
    Ok(busy)
}

/// Makes the output directory: created when missing; the findings, summaries and reports of
/// an earlier run removed from one that holds them (with `force`, [`check_out`]).
fn prepare_out(out: &Path, force: bool) -> Result<()> {
    if check_out(out, force)? {
        for class in Class::ALL {
            let dir = out.join(class.name());
            if dir.exists() {
                std::fs::remove_dir_all(&dir)?;
            }
        }
        for file in ["summary.json", "summary.txt", "junit.xml"] {
            let _ = std::fs::remove_file(out.join(file));
        }
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))
}

/// Runs the fuzzer.
///
/// # Errors
/// Usage errors (the command cannot be run or never prints a dump, the output directory is
/// taken) at once; I/O errors of the working directory.
pub fn run(config: &Config, progress: impl FnMut(u64, usize)) -> Result<Report> {
    // A directory that is taken is told at once; one that --force replaces is emptied only
    // once the implementation has answered (a mistyped command loses no earlier findings).
    if let Some(out) = &config.out {
        check_out(out, config.force)?;
    }
    let work = crate::scratch::Scratch::new("fuzz")?;
    let versions = if config.versions.is_empty() { &VERSIONS[..] } else { &config.versions };
    let mut judge: Box<dyn Judge> = if config.writer {
        let mut writing = Writing::new(&config.command, config.timeout, work.path())?;
        // A command that cannot be started is told at once.
        writing.judge(&Recipe::generate(config.seed, versions))?;
        writing.started = 0;
        Box::new(writing)
    } else {
        // The probe: a small valid file of the first version asked for.
        let probe = work.path().join("probe.zt");
        let index = VERSIONS.iter().position(|v| *v == versions[0]).unwrap_or(0);
        #[allow(clippy::cast_possible_truncation)]
        let probe_model = Model::from_bytes(&[index as u8, 1, 0, 0, 2, 3, 1, 1]);
        std::fs::write(&probe, probe_model.write().context("writing the probe")?.0)?;
        let implementation =
            Implementation::start(&config.command, config.timeout, &probe, config.serve)?;
        Box::new(Reading { implementation, dir: work.path().to_owned(), read: 0 })
    };
    fuzz_with(config, &mut *judge, progress)
}

/// As [`run`], against `implementation` read in this process (`config.command` names it in
/// the report; `timeout`, `serve` and `writer` do not apply). A panic is a crash, with its
/// message; a hang is not told (nothing can stop a call in this process: libFuzzer's
/// `-timeout` does that for the `differential` target).
///
/// # Errors
/// As [`run`].
pub fn run_in_process(
    config: &Config,
    implementation: &mut dyn InProcess,
    progress: impl FnMut(u64, usize),
) -> Result<Report> {
    if let Some(out) = &config.out {
        check_out(out, config.force)?;
    }
    fuzz_with(config, &mut InProcessReading { implementation }, progress)
}

/// The fuzzing loop, the reduction of what diverged, and the report.
fn fuzz_with(
    config: &Config,
    judge: &mut dyn Judge,
    mut progress: impl FnMut(u64, usize),
) -> Result<Report> {
    let versions = if config.versions.is_empty() { &VERSIONS[..] } else { &config.versions };
    if let Some(out) = &config.out {
        prepare_out(out, config.force)?;
    }
    let started = Instant::now();
    let mut seen: Vec<(Divergence, String, Recipe, u64, f64, u64, Judged)> = Vec::new();
    let mut cases = 0u64;
    let stopping = crate::implementation::stopping;
    loop {
        let done = match config.budget {
            Budget::Runs(n) => cases >= n,
            Budget::Seconds(s) => started.elapsed().as_secs_f64() >= s,
        };
        if done || stopping() {
            break;
        }
        let seed = config.seed.wrapping_add(cases);
        let mut recipe = Recipe::generate(seed, versions);
        if config.writer {
            // A writer is given content; the changes are for readers.
            recipe.mutations.clear();
        }
        let judged = judge.judge(&recipe);
        // A signal stopped the run (and killed the implementation): this case's verdict is
        // not the implementation's.
        if stopping() {
            break;
        }
        let judged = judged?;
        if let Some((divergence, detail)) = judged.divergence.clone() {
            match seen.iter_mut().find(|s| s.0 == divergence) {
                Some(s) => s.5 += 1,
                None => seen.push((
                    divergence,
                    detail,
                    recipe,
                    cases,
                    started.elapsed().as_secs_f64(),
                    1,
                    judged,
                )),
            }
        }
        cases += 1;
        if cases.is_multiple_of(256) {
            progress(cases, seen.len());
        }
    }
    let fuzzing_seconds = started.elapsed().as_secs_f64();
    let mut findings = Vec::with_capacity(seen.len());
    let mut numbers = std::collections::BTreeMap::<Class, usize>::new();
    for (divergence, detail, recipe, case, found_after, hits, first) in seen {
        // Reduced, unless the run is being stopped: then as first found.
        let (recipe, judged, detail) = if stopping() {
            (recipe, first, detail)
        } else {
            let limits = (config.minimize_calls, config.minimize_seconds);
            let reduced = minimize(judge, &recipe, &divergence, limits)?;
            // The reduced case, once more for its verdicts (a flaky divergence keeps the
            // original).
            let again = judge.judge(&reduced);
            let again = if stopping() { first.clone() } else { again? };
            match &again.divergence {
                _ if stopping() => (recipe, first, detail),
                Some((d, detail)) if *d == divergence => (reduced, again.clone(), detail.clone()),
                _ => {
                    let judged = judge.judge(&recipe)?;
                    (recipe, judged, detail)
                }
            }
        };
        let mut finding =
            Finding { divergence, detail, recipe, case, found_after, hits, judged, written: None };
        if let Some(out) = &config.out {
            let n = numbers.entry(finding.divergence.class).or_insert(0);
            *n += 1;
            finding.written = Some(write_finding(out, *n, &finding, config)?);
        }
        findings.push(finding);
    }
    let (persistent, processes) = judge.processes();
    let report = Report {
        cases,
        seconds: started.elapsed().as_secs_f64(),
        fuzzing_seconds,
        persistent,
        processes,
        in_process: judge.in_process(),
        findings,
        seed: config.seed,
        command: config.command.clone(),
        writer: config.writer,
        interrupted: stopping(),
    };
    if let Some(out) = &config.out {
        std::fs::write(out.join("summary.json"), serde_json::to_string_pretty(&to_json(&report))?)?;
        std::fs::write(out.join("summary.txt"), table(&report))?;
        std::fs::write(out.join("junit.xml"), to_junit(&report))?;
    }
    Ok(report)
}

fn verdict_json(v: &Verdict) -> Json {
    match v {
        Verdict::Accepted(dump) => json!({"verdict": "accepted", "dump": dump}),
        Verdict::Rejected(dump) => json!({"verdict": "rejected", "dump": dump}),
        Verdict::Crash(why) => json!({"verdict": "crash", "why": why}),
        Verdict::Hang => json!({"verdict": "hang"}),
    }
}

fn finding_json(f: &Finding, command: &str, writer: bool) -> Json {
    let file = f.written.as_ref().map(|p| p.display().to_string());
    let recipe_file =
        f.written.as_ref().map(|p| p.with_extension("recipe.json").display().to_string());
    let reproduce = if writer {
        recipe_file.as_ref().map(|r| format!("{command} {r} OUT"))
    } else {
        file.as_ref().map(|p| format!("{command} {p}"))
    };
    let mode = if writer { " --writer" } else { "" };
    json!({
        "class": f.divergence.class.name(),
        "key": f.divergence.key,
        "detail": f.detail,
        "case": f.case,
        "found_after_seconds": f.found_after,
        "hits": f.hits,
        "recipe": f.recipe,
        "theirs": f.judged.theirs,
        "ours": f.judged.ours,
        "file": file,
        "writer_recipe": if writer { recipe_file } else { None },
        "reproduce": reproduce,
        "regenerate": format!(
            "ztensor-conformance fuzz{mode} --impl '{command}' --seed {} --runs 1",
            f.recipe.seed
        ),
    })
}

fn write_finding(out: &Path, n: usize, f: &Finding, config: &Config) -> Result<PathBuf> {
    let dir = out.join(f.divergence.class.name());
    std::fs::create_dir_all(&dir)?;
    let file = dir.join(format!("{n}.zt"));
    std::fs::write(&file, &f.judged.file)?;
    if let Some(recipe) = &f.judged.writer_recipe {
        std::fs::write(
            file.with_extension("recipe.json"),
            serde_json::to_string_pretty(recipe)? + "\n",
        )?;
    }
    let mut with_path = f.clone();
    with_path.written = Some(file.clone());
    std::fs::write(
        dir.join(format!("{n}.json")),
        serde_json::to_string_pretty(&finding_json(&with_path, &config.command, config.writer))?
            + "\n",
    )?;
    Ok(file)
}

/// Files a second through the implementation, over the fuzzing part of the run.
pub fn rate(report: &Report) -> f64 {
    report.cases as f64 / report.fuzzing_seconds.max(1e-9)
}

/// The report as a table: one line per finding, then totals by class.
pub fn table(report: &Report) -> String {
    let mut out = String::new();
    let mode = if report.in_process {
        "in this process".to_owned()
    } else {
        format!(
            "{}; {} process{}",
            if report.persistent { "persistent (--serve)" } else { "a process per file" },
            report.processes,
            if report.processes == 1 { "" } else { "es" },
        )
    };
    let _ = writeln!(
        out,
        "{} cases in {:.1} s ({:.0} files/s, {mode}), seed {}",
        report.cases,
        report.fuzzing_seconds,
        rate(report),
        report.seed
    );
    if report.interrupted {
        let _ = writeln!(out, "stopped by a signal: the findings so far, not reduced");
    }
    if report.findings.is_empty() {
        let _ = writeln!(out, "no divergence");
        return out;
    }
    let _ =
        writeln!(out, "\n{:<16}  {:>5}  {:>8}  {:<40}  DETAIL", "CLASS", "HITS", "FOUND S", "FILE");
    for f in &report.findings {
        let file = f.written.as_ref().map_or_else(
            || format!("--seed {} --runs 1", f.recipe.seed),
            |p| p.display().to_string(),
        );
        let detail: String = f.detail.chars().take(100).collect();
        let _ = writeln!(
            out,
            "{:<16}  {:>5}  {:>8.2}  {:<40}  {detail}",
            f.divergence.class.name(),
            f.hits,
            f.found_after,
            file
        );
    }
    let counts: Vec<String> = Class::ALL
        .iter()
        .filter_map(|&c| {
            let n = report.findings.iter().filter(|f| f.divergence.class == c).count();
            (n > 0).then(|| format!("{} {n}", c.name()))
        })
        .collect();
    let _ =
        writeln!(out, "\n{} distinct divergences: {}", report.findings.len(), counts.join(", "));
    out
}

/// The report as JSON.
pub fn to_json(report: &Report) -> Json {
    let by_class: serde_json::Map<String, Json> = Class::ALL
        .iter()
        .map(|&c| {
            let n = report.findings.iter().filter(|f| f.divergence.class == c).count();
            (c.name().to_owned(), json!(n))
        })
        .collect();
    json!({
        "report": "ztensor-fuzz/1",
        "command": report.command,
        "seed": report.seed,
        "cases": report.cases,
        "seconds": report.seconds,
        "files_per_second": rate(report),
        "persistent": report.persistent,
        "processes": report.processes,
        "in_process": report.in_process,
        "by_class": by_class,
        "writer": report.writer,
        "interrupted": report.interrupted,
        "findings": report
            .findings
            .iter()
            .map(|f| finding_json(f, &report.command, report.writer))
            .collect::<Vec<_>>(),
    })
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The report as JUnit XML: one test case per class, failing with each finding.
pub fn to_junit(report: &Report) -> String {
    let failures = report.findings.len();
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"ztensor-fuzz\">\n  \
         <testsuite name=\"differential\" tests=\"{}\" failures=\"{failures}\">\n",
        Class::ALL.len()
    );
    for class in Class::ALL {
        let _ = write!(out, "    <testcase classname=\"differential\" name=\"{}\">", class.name());
        for f in report.findings.iter().filter(|f| f.divergence.class == class) {
            let _ = write!(
                out,
                "<failure message=\"{}\"/>",
                xml_escape(&format!("{} (seed {})", f.detail, f.recipe.seed))
            );
        }
        out.push_str("</testcase>\n");
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

/// The options of `ztensor-conformance fuzz`, as the command line gives them.
#[derive(Debug, Clone, clap::Args)]
pub struct FuzzArgs {
    /// The implementation: a reader (`COMMAND FILE` prints a conformance dump; `COMMAND
    /// --serve` is tried first), or with --writer a writer (`COMMAND RECIPE OUT`). In process,
    /// only its name in the reports.
    #[arg(long = "impl", value_name = "COMMAND")]
    pub implementation: String,
    /// Fuzz a writer: each case's content is given it as a recipe, and what it writes is
    /// graded by the writer check (writes-invalid, crash, hang; exit 3, cannot write this, is
    /// no divergence).
    #[arg(long)]
    pub writer: bool,
    /// Make cases for N seconds [default: 60].
    #[arg(long, value_name = "N", value_parser = non_negative, conflicts_with = "runs")]
    pub seconds: Option<f64>,
    /// Make N cases (instead of --seconds).
    #[arg(long, value_name = "N")]
    pub runs: Option<u64>,
    /// Case i is made from seed S + i, so `--seed S+i --runs 1` makes it again.
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub seed: u64,
    /// Write each distinct divergence, reduced, to DIR/CLASS/N.zt with N.json, beside
    /// DIR/summary.json, summary.txt and junit.xml. DIR is created.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Write into an --out DIR that already holds files (emptied once the implementation has
    /// answered).
    #[arg(long, requires = "out")]
    pub force: bool,
    /// Only cases of this version (0.1, 1.1 or 1.2; repeatable) [default: every version].
    #[arg(long = "version", value_name = "V", value_parser = version)]
    pub versions: Vec<Version>,
    /// Seconds the implementation has for one file before its process group is killed and
    /// the case is a hang [default: 10].
    #[arg(long, value_name = "SECONDS", value_parser = positive)]
    pub timeout: Option<f64>,
    /// Seconds the reduction of each distinct divergence may take.
    #[arg(long, value_name = "N", value_parser = non_negative, default_value_t = 60.0)]
    pub minimize_seconds: f64,
    /// Start the implementation once per file (`COMMAND FILE`) instead of asking for the
    /// persistent protocol (`COMMAND --serve`).
    #[arg(long)]
    pub process_per_file: bool,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also write a JUnit XML report to FILE.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
}

/// A number of seconds: finite, 0 or more.
fn non_negative(text: &str) -> std::result::Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && *n >= 0.0)
        .ok_or_else(|| "not a number of 0 or more".to_owned())
}

/// A number of seconds above 0.
fn positive(text: &str) -> std::result::Result<f64, String> {
    non_negative(text)?;
    text.parse::<f64>().ok().filter(|n| *n > 0.0).ok_or_else(|| "must be above 0".to_owned())
}

/// A version cases may have.
fn version(text: &str) -> std::result::Result<Version, String> {
    match text {
        "0.1" => Ok(Version::V0_1),
        "1.1" => Ok(Version::V1_1),
        "1.2" => Ok(Version::V1_2),
        _ => Err("0.1, 1.1 or 1.2".to_owned()),
    }
}

impl FuzzArgs {
    /// The run these options ask for; `in_process` when the implementation is a call in this
    /// process, for which `--timeout`, `--process-per-file` and `--writer` mean nothing.
    ///
    /// # Errors
    /// One of those options given for an implementation in this process.
    pub fn config(&self, in_process: bool) -> Result<Config> {
        if in_process {
            let given = [
                ("--timeout", self.timeout.is_some()),
                ("--process-per-file", self.process_per_file),
                ("--writer", self.writer),
            ];
            if let Some((flag, _)) = given.iter().find(|(_, given)| *given) {
                bail!("{flag} does not apply to an implementation in this process");
            }
        }
        let mut config = Config::new(&self.implementation);
        config.budget = match (self.seconds, self.runs) {
            (_, Some(n)) => Budget::Runs(n),
            (Some(s), None) => Budget::Seconds(s),
            (None, None) => config.budget,
        };
        config.seed = self.seed;
        config.versions.clone_from(&self.versions);
        if let Some(seconds) = self.timeout {
            config.timeout = Duration::from_secs_f64(seconds);
        }
        config.minimize_seconds = self.minimize_seconds;
        config.out.clone_from(&self.out);
        config.force = self.force;
        config.serve = !self.process_per_file;
        config.writer = self.writer;
        Ok(config)
    }
}

/// `ztensor-conformance fuzz ARGS`, for a binary of its own: `ARGS` parsed (as the `fuzz`
/// command's options, [`FuzzArgs`]; `--help` prints them), then [`fuzz`].
///
/// # Errors
/// Usage errors (with clap's message, which names the argument), and [`fuzz`]'s.
pub fn command_line(args: &[String], in_process: Option<&mut dyn InProcess>) -> Result<bool> {
    /// The `fuzz` command alone.
    #[derive(clap::Parser)]
    #[command(name = "fuzz")]
    struct Fuzz {
        #[command(flatten)]
        args: FuzzArgs,
    }
    let parsed = <Fuzz as clap::Parser>::try_parse_from(
        std::iter::once("fuzz".to_owned()).chain(args.iter().cloned()),
    );
    match parsed {
        Ok(parsed) => fuzz(&parsed.args, in_process),
        Err(e) if !e.use_stderr() => {
            // --help: what was asked for, not an error.
            print!("{}", e.render());
            Ok(true)
        }
        Err(e) => bail!("{}", e.render().to_string().trim_end()),
    }
}

/// The `fuzz` command: the run `args` ask for made, its table (or JSON with `--json`)
/// printed; `Ok(true)` when nothing diverged. With `in_process`, that implementation is
/// fuzzed in this process ([`run_in_process`]; `--impl` then only names it, and `--timeout`,
/// `--process-per-file` and `--writer` are refused): for a Rust implementation's own binary
/// (the reference adapters' `--fuzz-in-process`).
///
/// # Errors
/// [`FuzzArgs::config`]'s, and [`run`]'s.
pub fn fuzz(args: &FuzzArgs, in_process: Option<&mut dyn InProcess>) -> Result<bool> {
    let config = args.config(in_process.is_some())?;
    let quiet = args.json || !std::io::IsTerminal::is_terminal(&std::io::stderr());
    let progress = |cases, found| {
        if !quiet {
            eprint!("\r{cases} cases, {found} divergences");
        }
    };
    let report = match in_process {
        Some(implementation) => run_in_process(&config, implementation, progress)?,
        None => run(&config, progress)?,
    };
    if !quiet {
        eprintln!();
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&to_json(&report))?);
    } else {
        print!("{}", table(&report));
    }
    if let Some(path) = &args.junit {
        std::fs::write(path, to_junit(&report))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(report.findings.is_empty())
}

/// An implementation read in this process, through a call instead of the protocol: for Rust
/// implementations, and for the coverage-guided `differential` fuzz target.
pub trait InProcess {
    /// Its verdict on a file of `bytes`.
    fn read(&mut self, bytes: &[u8]) -> Verdict;
}

/// This project's lenient reader in the dump protocol, in this process, reading through a
/// source that gives at most `chunk` bytes a read (`None`: the bytes as one slice): the dump
/// `ztensor-conformance dump` prints for a zTensor file, reached another way.
#[derive(Debug, Clone, Copy)]
pub struct OursInProcess {
    /// The most bytes one read of the source gives.
    pub chunk: Option<usize>,
}

impl InProcess for OursInProcess {
    fn read(&mut self, bytes: &[u8]) -> Verdict {
        let opened = match self.chunk {
            None => lenient_of(bytes),
            Some(n) => lenient_of(ztensor_io::Chunked::new(bytes, n)),
        };
        match opened {
            Some((dump, true)) => Verdict::Accepted(dump),
            Some((dump, false)) => Verdict::Rejected(dump),
            None => Verdict::Crash("the reader failed with an error that names no rule".to_owned()),
        }
    }
}

/// The lenient dump of a zTensor (0.1/1.x) file read from `source`, as `ztensor_dump::file`
/// gives it; `None` for an error that is not a verdict.
fn lenient_of<S: ztensor_io::ReadAt>(source: S) -> Option<(Json, bool)> {
    match ztensor_io::Reader::new(source, &ztensor_dump::options()) {
        Ok(reader) => Some((ztensor_dump::accepted(&reader), true)),
        Err(e) => {
            e.format_error().map(|f| (ztensor_dump::rejected(f.kind().id(), &f.to_string()), false))
        }
    }
}

/// This project's verdicts on `bytes`, in this process (no file): as [`ours`] for a zTensor
/// file.
///
/// # Errors
/// When a reader fails with an error that is not a verdict (a bug, for bytes in memory).
pub fn ours_in_process(bytes: &[u8]) -> Result<Ours> {
    match ztensor_io::Reader::new(bytes, &ztensor_dump::options()) {
        Ok(reader) => judged((ztensor_dump::accepted(&reader), true), Some(&reader), bytes),
        Err(e) => {
            let f = e.format_error().context("the lenient reader gave no verdict")?;
            judged((ztensor_dump::rejected(f.kind().id(), &f.to_string()), false), None, bytes)
        }
    }
}

/// The bytes of one [`Mutation`] in [`Recipe::from_fuzz_bytes`]: an operation byte, a `u32`
/// node or position, two parameter bytes.
const RECORD: usize = 7;
/// The generator's input in [`Recipe::from_fuzz_bytes`].
const MODEL: usize = 48;

impl Mutation {
    /// The change a 7-byte record describes (every record describes one).
    pub fn from_record(r: &[u8; RECORD]) -> Mutation {
        let node = u32::from_le_bytes([r[1], r[2], r[3], r[4]]);
        let (a, b) = (r[5], r[6]);
        match r[0] % 14 {
            0 => Mutation::Drop { node },
            1 => Mutation::Duplicate { node },
            2 => Mutation::Retype { node, kind: a },
            3 => Mutation::Int { node, pick: a },
            4 => Mutation::Text { node, pick: a },
            5 => Mutation::Key { node, pick: a },
            6 => Mutation::Swap { node, other: u32::from(a) },
            7 => Mutation::Nest { node, depth: 1 + a % 40 },
            8 => Mutation::Attributes { node, seed: u32::from_le_bytes([a, b, r[1], r[2]]) },
            9 => {
                let region = [Region::Header, Region::Data, Region::Manifest, Region::Trailer]
                    [usize::from(b % 4)];
                Mutation::Flip { region, at: node, xor: a.max(1) }
            }
            10 => Mutation::Truncate { at: node },
            11 => Mutation::Rank { node, rank: 4 + a % 5 },
            12 => Mutation::Alias { node, other: u32::from(a) },
            #[allow(clippy::cast_possible_wrap)]
            _ => Mutation::Size { delta: a as i8 },
        }
    }
}

impl Recipe {
    /// The recipe fuzzer bytes describe: the generator's input (48 bytes, zeros where short),
    /// then up to eight 7-byte change records. Every input is a recipe, and
    /// [`Recipe::mutate_fuzz_bytes`] changes them as structure, not as noise.
    pub fn from_fuzz_bytes(data: &[u8]) -> Recipe {
        let mut model = data.get(..MODEL).unwrap_or(data).to_vec();
        model.resize(MODEL, 0);
        let mutations = data
            .get(MODEL..)
            .unwrap_or_default()
            .chunks_exact(RECORD)
            .take(8)
            .map(|r| Mutation::from_record(r.try_into().unwrap_or(&[0; RECORD])))
            .collect();
        Recipe { seed: 0, model: hex(&model), mutations }
    }

    /// A structure-aware change to fuzzer bytes (for libFuzzer's custom mutator): a record
    /// added, dropped or rewritten, or a generator choice changed; the new length, at most
    /// `max`.
    pub fn mutate_fuzz_bytes(data: &mut Vec<u8>, max: usize, seed: u32) -> usize {
        let mut rng = Rng::new(u64::from(seed));
        if data.len() < MODEL {
            data.resize(MODEL, 0);
        }
        let records = (data.len() - MODEL) / RECORD;
        data.truncate(MODEL + records * RECORD);
        let mut record = [0u8; RECORD];
        for b in &mut record {
            #[allow(clippy::cast_possible_truncation)]
            let random = rng.next_u64() as u8;
            *b = random;
        }
        let at = |rng: &mut Rng, n: usize| usize::try_from(rng.below(n as u64)).unwrap_or(0);
        match rng.below(4) {
            0 if records < 8 && data.len() + RECORD <= max => data.extend_from_slice(&record),
            1 if records > 0 => {
                let i = MODEL + at(&mut rng, records) * RECORD;
                data.drain(i..i + RECORD);
            }
            2 if records > 0 => {
                let i = MODEL + at(&mut rng, records) * RECORD;
                data[i..i + RECORD].copy_from_slice(&record);
            }
            _ => {
                let i = at(&mut rng, MODEL);
                data[i] = record[0];
            }
        }
        data.truncate(max);
        data.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recipe_makes_the_same_file_again_and_goes_through_json() {
        for seed in 0..200 {
            let recipe = Recipe::generate(seed, &[]);
            assert_eq!(recipe, Recipe::generate(seed, &[]));
            let again: Recipe =
                serde_json::from_value(serde_json::to_value(&recipe).unwrap()).unwrap();
            assert_eq!(again, recipe);
            assert_eq!(recipe.build().unwrap(), again.build().unwrap(), "seed {seed}");
        }
    }

    /// Any recipe builds (a case is never lost to the fuzzer's own fault), and what the specs
    /// leave open is found on whatever it builds: changes on changes, up to eight at once.
    #[test]
    fn every_recipe_builds() {
        let mut rng = Rng::new(11);
        for seed in 0..3000 {
            let mut recipe = Recipe::generate(seed, &[]);
            for _ in 0..rng.below(6) {
                recipe.mutations.push(Mutation::random(&mut rng));
            }
            let file = recipe.build().unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            if let Ok(reader) = ztensor_io::Reader::new(&file[..], &ztensor_dump::options()) {
                let _ = latitude(&reader, &file);
            }
        }
    }

    /// The in-process target's body holds on whatever bytes it is given, and its mutator
    /// keeps to the length it is allowed.
    #[test]
    fn the_differential_body_and_its_mutator() {
        let mut rng = Rng::new(5);
        let mut data = Vec::new();
        for i in 0..1500u32 {
            let max = [16, 48, 60, 200][usize::try_from(i % 4).unwrap()];
            let len = Recipe::mutate_fuzz_bytes(&mut data, max, rng.u32());
            assert!(len <= max && len == data.len(), "{len} of at most {max}");
            crate::fuzz::differential(&data);
            if i % 50 == 0 {
                data.clear();
            }
        }
        // The records decode to every kind of change.
        let kinds: std::collections::BTreeSet<String> = (0..=255u8)
            .map(|op| {
                let m = Mutation::from_record(&[op, 1, 0, 0, 0, 3, 4]);
                format!("{m:?}").split_whitespace().next().unwrap_or_default().to_owned()
            })
            .collect();
        assert_eq!(kinds.len(), 14, "{kinds:?}");
    }

    /// Leading dimensions of 1 keep a dense object valid: files our strict reader accepts with
    /// rank 8 come of it.
    #[test]
    fn higher_ranks_stay_valid() {
        let mut valid = 0;
        for seed in 0..100 {
            let recipe = Recipe {
                mutations: vec![Mutation::Rank { node: 0, rank: 8 }],
                ..Recipe::generate(seed, &[Version::V1_2])
            };
            let file = recipe.build().unwrap();
            let mut options = ztensor_format::Options::default();
            options.strict = true;
            if let Ok(reader) = ztensor_io::Reader::new(&file[..], &options)
                && reader.objects().any(|o| o.model().shape.len() == 8)
            {
                valid += 1;
            }
        }
        assert!(valid > 20, "{valid} valid rank-8 files of 100");
    }

    #[test]
    fn versions_are_kept_to_those_asked_for() {
        for seed in 0..50 {
            let file = Recipe { mutations: vec![], ..Recipe::generate(seed, &[Version::V0_1]) }
                .build()
                .unwrap();
            assert_eq!(&file[..8], b"ZTEN0001");
        }
    }

    #[test]
    fn each_tree_change_changes_the_manifest() {
        let base = Recipe { mutations: vec![], ..Recipe::generate(3, &[Version::V1_2]) };
        let plain = base.build().unwrap();
        let changes = [
            Mutation::Drop { node: 1 },
            Mutation::Duplicate { node: 1 },
            Mutation::Retype { node: 2, kind: 0 },
            Mutation::Int { node: 3, pick: 13 },
            Mutation::Text { node: 2, pick: 1 },
            Mutation::Key { node: 1, pick: 2 },
            Mutation::Nest { node: 2, depth: 3 },
            Mutation::Attributes { node: 0, seed: 9 },
            Mutation::Flip { region: Region::Data, at: 0, xor: 1 },
            Mutation::Truncate { at: 40 },
            Mutation::Size { delta: -1 },
            Mutation::Rank { node: 0, rank: 8 },
            Mutation::Alias { node: 0, other: 0 },
        ];
        for change in changes {
            let recipe = Recipe { mutations: vec![change.clone()], ..base.clone() };
            assert_ne!(recipe.build().unwrap(), plain, "{change:?}");
        }
    }

    #[test]
    fn masking_and_first_differences() {
        assert_eq!(
            mask("exit status 101: panicked at src/x.rs:12:5"),
            "exit status #: panicked at src/x.rs:#:#"
        );
        assert_eq!(mask("expected blake3:5f3a9c01bb, u64 f16"), "expected blake#:#, u# f#");
        let a = json!({"objects": [{"shape": [2], "components": {"data": {"dtype": "f16"}}}]});
        let b = json!({"objects": [{"shape": [2], "components": {"data": {"dtype": "bf16"}}}]});
        assert_eq!(first_difference(&a, &b, "").as_deref(), Some("objects.components.data.dtype"));
        assert_eq!(first_difference(&a, &a, ""), None);
    }
}
