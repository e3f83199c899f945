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

use crate::implementation::{Implementation, Verdict};
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
        match rng.below(15) {
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
    if !text.len().is_multiple_of(2) {
        bail!("odd-length hex");
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
        let mutations = (0..changes).map(|_| Mutation::random(&mut rng)).collect();
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
        | Mutation::Attributes { node, .. } => *node,
        _ => return,
    };
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
}

impl Class {
    /// Every class, in report order.
    pub const ALL: [Class; 5] =
        [Class::Crash, Class::Hang, Class::AcceptsInvalid, Class::RejectsValid, Class::Misreads];

    /// The class's name (`accepts-invalid`): directory and report name.
    pub fn name(self) -> &'static str {
        match self {
            Class::Crash => "crash",
            Class::Hang => "hang",
            Class::AcceptsInvalid => "accepts-invalid",
            Class::RejectsValid => "rejects-valid",
            Class::Misreads => "misreads",
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
    let lenient = ztensor_dump::file(path)?;
    let strict = crate::strict_dump(path)?;
    let mut latitude = latitude(bytes);
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

/// What a file readable here has that the specs leave to each reader (the corpus's
/// implementation-defined kinds).
fn latitude(bytes: &[u8]) -> Option<String> {
    let reader = ztensor_io::Reader::new(bytes, &ztensor_format::Options::default()).ok()?;
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
            let place = why.split_once("panicked at ").map(|(_, at)| {
                at.split_whitespace().next().unwrap_or_default().trim_end_matches(':').to_owned()
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

/// A key with its digits left out, so that findings differing only in numbers are one.
fn mask(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for c in key.chars() {
        if c.is_ascii_digit() {
            if !out.ends_with('#') {
                out.push('#');
            }
        } else {
            out.push(c);
        }
    }
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
        }
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
    /// The reduced file.
    pub file: Vec<u8>,
    /// Which case of the run found it first, and after how long.
    pub case: u64,
    /// Seconds from the run's start to the first case of this divergence.
    pub found_after: f64,
    /// How many cases gave this divergence (before reduction).
    pub hits: u64,
    /// The implementation's verdict on the reduced file, and ours.
    pub theirs: Verdict,
    /// Our lenient and strict verdicts on the reduced file.
    pub ours: Ours,
    /// Where it was written, if it was.
    pub written: Option<PathBuf>,
}

/// A run's outcome.
#[derive(Debug)]
pub struct Report {
    /// Cases made and read.
    pub cases: u64,
    /// Seconds the run took (reduction included).
    pub seconds: f64,
    /// Seconds spent making and reading cases (reduction not included).
    pub fuzzing_seconds: f64,
    /// Whether the implementation was read through `--serve`.
    pub persistent: bool,
    /// Processes the implementation was started as.
    pub processes: u64,
    /// The distinct divergences, reduced, in the order found.
    pub findings: Vec<Finding>,
    /// The run's settings.
    pub seed: u64,
    /// The command.
    pub command: String,
}

/// A private directory for the files cases are written to.
fn work_dir() -> Result<PathBuf> {
    let base = std::env::temp_dir();
    for attempt in 0..100u32 {
        let dir = base.join(format!("ztensor-fuzz-{}-{attempt}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e).context("creating a working directory"),
        }
    }
    bail!("no working directory could be created under {}", base.display())
}

/// Removes the working directory however the run ends.
struct WorkDir(PathBuf);

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A case tried: its file, our verdicts, the implementation's, and the divergence if any.
type Tried = (Vec<u8>, Ours, Verdict, Option<(Divergence, String)>);

/// Makes the case of `recipe` in `dir` and reads it both ways.
fn try_case(implementation: &mut Implementation, dir: &Path, recipe: &Recipe) -> Result<Tried> {
    let file = recipe.build()?;
    let path = dir.join("case.zt");
    std::fs::write(&path, &file)?;
    let ours = ours(&path, &file)?;
    let theirs = implementation.read(&path);
    let divergence = classify(&ours, &theirs);
    Ok((file, ours, theirs, divergence))
}

/// Reduces `recipe` while it keeps `divergence`: fewer mutations, fewer objects, generator
/// bytes set to zero (smaller shapes and ranks, first choices), then byte changes made
/// single bits; at most `calls` implementation calls and `seconds`.
fn minimize(
    implementation: &mut Implementation,
    dir: &Path,
    recipe: &Recipe,
    divergence: &Divergence,
    (calls, seconds): (u32, f64),
) -> Result<Recipe> {
    let mut best = recipe.clone();
    let mut left = calls;
    let started = Instant::now();
    let mut keeps = |candidate: &Recipe, left: &mut u32| -> Result<bool> {
        if *left == 0 || started.elapsed().as_secs_f64() > seconds {
            return Ok(false);
        }
        *left -= 1;
        Ok(try_case(implementation, dir, candidate)?.3.is_some_and(|(d, _)| d == *divergence))
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

/// Makes the output directory: created when missing; one that holds anything is replaced
/// only with `force`.
fn prepare_out(out: &Path, force: bool) -> Result<()> {
    if out.exists() {
        let busy = std::fs::read_dir(out)
            .with_context(|| format!("{} is not a directory", out.display()))?
            .next()
            .is_some();
        if busy && !force {
            bail!("{} exists and is not empty (--force replaces what it holds)", out.display());
        }
        if busy {
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
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))
}

/// Runs the fuzzer.
///
/// # Errors
/// Usage errors (the command cannot be run or never prints a dump, the output directory is
/// taken) at once; I/O errors of the working directory.
pub fn run(config: &Config, mut progress: impl FnMut(u64, usize)) -> Result<Report> {
    if let Some(out) = &config.out {
        prepare_out(out, config.force)?;
    }
    let work = WorkDir(work_dir()?);
    // The probe: a small valid file of the first version asked for.
    let probe = work.0.join("probe.zt");
    let versions = if config.versions.is_empty() { &VERSIONS[..] } else { &config.versions };
    let index = VERSIONS.iter().position(|v| *v == versions[0]).unwrap_or(0);
    #[allow(clippy::cast_possible_truncation)]
    let probe_model = Model::from_bytes(&[index as u8, 1, 0, 0, 2, 3, 1, 1]);
    std::fs::write(&probe, probe_model.write().context("writing the probe")?.0)?;
    let mut implementation =
        Implementation::start(&config.command, config.timeout, &probe, config.serve)?;
    let started = Instant::now();
    let mut seen: Vec<(Divergence, String, Recipe, u64, f64, u64)> = Vec::new();
    let mut cases = 0u64;
    loop {
        let done = match config.budget {
            Budget::Runs(n) => cases >= n,
            Budget::Seconds(s) => started.elapsed().as_secs_f64() >= s,
        };
        if done {
            break;
        }
        let seed = config.seed.wrapping_add(cases);
        let recipe = Recipe::generate(seed, versions);
        if let (_, _, _, Some((divergence, detail))) =
            try_case(&mut implementation, &work.0, &recipe)?
        {
            match seen.iter_mut().find(|s| s.0 == divergence) {
                Some(s) => s.5 += 1,
                None => seen.push((
                    divergence,
                    detail,
                    recipe,
                    cases,
                    started.elapsed().as_secs_f64(),
                    1,
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
    for (divergence, detail, recipe, case, found_after, hits) in seen {
        let limits = (config.minimize_calls, config.minimize_seconds);
        let reduced = minimize(&mut implementation, &work.0, &recipe, &divergence, limits)?;
        // The reduced case, once more for its verdicts (a flaky divergence keeps the original).
        let (recipe, file, ours, theirs, detail) =
            match try_case(&mut implementation, &work.0, &reduced)? {
                (file, ours, theirs, Some((d, detail))) if d == divergence => {
                    (reduced, file, ours, theirs, detail)
                }
                _ => {
                    let file = recipe.build()?;
                    let path = work.0.join("case.zt");
                    std::fs::write(&path, &file)?;
                    let ours = self::ours(&path, &file)?;
                    let theirs = implementation.read(&path);
                    (recipe, file, ours, theirs, detail)
                }
            };
        let mut finding = Finding {
            divergence,
            detail,
            recipe,
            file,
            case,
            found_after,
            hits,
            theirs,
            ours,
            written: None,
        };
        if let Some(out) = &config.out {
            let n = numbers.entry(finding.divergence.class).or_insert(0);
            *n += 1;
            finding.written = Some(write_finding(out, *n, &finding, &config.command)?);
        }
        findings.push(finding);
    }
    let report = Report {
        cases,
        seconds: started.elapsed().as_secs_f64(),
        fuzzing_seconds,
        persistent: implementation.persistent(),
        processes: implementation.processes(),
        findings,
        seed: config.seed,
        command: config.command.clone(),
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

fn finding_json(f: &Finding, command: &str) -> Json {
    let file = f.written.as_ref().map(|p| p.display().to_string());
    json!({
        "class": f.divergence.class.name(),
        "key": f.divergence.key,
        "detail": f.detail,
        "case": f.case,
        "found_after_seconds": f.found_after,
        "hits": f.hits,
        "recipe": f.recipe,
        "theirs": verdict_json(&f.theirs),
        "ours": {
            "lenient": {"accepted": f.ours.lenient.1, "dump": f.ours.lenient.0},
            "strict": {"accepted": f.ours.strict.1, "dump": f.ours.strict.0},
            "latitude": f.ours.latitude,
        },
        "file": file,
        "reproduce": file.as_ref().map(|p| format!("{command} {p}")),
        "regenerate": format!(
            "ztensor-conformance fuzz --impl '{command}' --seed {} --runs 1",
            f.recipe.seed
        ),
    })
}

fn write_finding(out: &Path, n: usize, f: &Finding, command: &str) -> Result<PathBuf> {
    let dir = out.join(f.divergence.class.name());
    std::fs::create_dir_all(&dir)?;
    let file = dir.join(format!("{n}.zt"));
    std::fs::write(&file, &f.file)?;
    let mut with_path = f.clone();
    with_path.written = Some(file.clone());
    std::fs::write(
        dir.join(format!("{n}.json")),
        serde_json::to_string_pretty(&finding_json(&with_path, command))? + "\n",
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
    let _ = writeln!(
        out,
        "{} cases in {:.1} s ({:.0} files/s, {}; {} process{}), seed {}",
        report.cases,
        report.fuzzing_seconds,
        rate(report),
        if report.persistent { "persistent (--serve)" } else { "a process per file" },
        report.processes,
        if report.processes == 1 { "" } else { "es" },
        report.seed
    );
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
        "by_class": by_class,
        "findings": report.findings.iter().map(|f| finding_json(f, &report.command)).collect::<Vec<_>>(),
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
            let _ = latitude(&file);
        }
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
        let a = json!({"objects": [{"shape": [2], "components": {"data": {"dtype": "f16"}}}]});
        let b = json!({"objects": [{"shape": [2], "components": {"data": {"dtype": "bf16"}}}]});
        assert_eq!(first_difference(&a, &b, "").as_deref(), Some("objects.components.data.dtype"));
        assert_eq!(first_difference(&a, &a, ""), None);
    }
}
