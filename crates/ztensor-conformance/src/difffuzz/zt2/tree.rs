//! zTensor 2's own changes to a manifest's value tree, which know its structure: objects,
//! their parts, each part's blob, and the words of its vocabulary.

use ciborium::Value as Cbor;

use super::super::mutate::{at_path, keyed, paths, pick};
use super::layout::Layout;

/// The value at `path` (positions in arrays and maps, as [`paths`] gives them).
pub(super) fn at<'t>(tree: &'t Cbor, path: &[usize]) -> Option<&'t Cbor> {
    let mut value = tree;
    for &i in path {
        value = match value {
            Cbor::Array(items) => items.get(i)?,
            Cbor::Map(entries) => &entries.get(i)?.1,
            _ => return None,
        };
    }
    Some(value)
}

/// [`at`], to change.
pub(super) fn at_mut<'t>(tree: &'t mut Cbor, path: &[usize]) -> Option<&'t mut Cbor> {
    at_path(tree, path)
}

fn is_key(key: &Cbor, name: &str) -> bool {
    matches!(key, Cbor::Text(k) if k == name)
}

/// The value of `key` in a map's entries (the first, if it is given twice).
pub(super) fn field<'m>(map: &'m [(Cbor, Cbor)], key: &str) -> Option<&'m Cbor> {
    map.iter().find(|(k, _)| is_key(k, key)).map(|(_, v)| v)
}

/// Sets `key` in a map: its value replaced, or the entry added.
pub(super) fn set(map: &mut Vec<(Cbor, Cbor)>, key: &str, value: Cbor) {
    match map.iter_mut().find(|(k, _)| is_key(k, key)) {
        Some((_, v)) => *v = value,
        None => map.push((Cbor::Text(key.to_owned()), value)),
    }
}

fn remove(map: &mut Vec<(Cbor, Cbor)>, key: &str) {
    map.retain(|(k, _)| !is_key(k, key));
}

fn uint(value: &Cbor) -> Option<u64> {
    match value {
        Cbor::Integer(i) => u64::try_from(i128::from(*i)).ok(),
        _ => None,
    }
}

/// A blob's `[offset, length]`.
pub(super) fn pair(offset: u64, length: u64) -> Cbor {
    Cbor::Array(vec![Cbor::Integer(offset.into()), Cbor::Integer(length.into())])
}

/// A part's blob, when it is `[offset, length]`.
pub(super) fn blob_of(part: &[(Cbor, Cbor)]) -> Option<(u64, u64)> {
    match field(part, "blob")? {
        Cbor::Array(items) if items.len() == 2 => Some((uint(&items[0])?, uint(&items[1])?)),
        _ => None,
    }
}

/// The paths of the manifest's parts: the maps at `objects.<name>.parts.<name>`, wherever the
/// changes made so far have left them.
pub(super) fn parts(tree: &Cbor) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let Cbor::Map(root) = tree else { return out };
    for (i, (key, objects)) in root.iter().enumerate() {
        let (true, Cbor::Map(objects)) = (is_key(key, "objects"), objects) else { continue };
        for (j, (_, object)) in objects.iter().enumerate() {
            let Cbor::Map(fields) = object else { continue };
            for (k, (key, parts)) in fields.iter().enumerate() {
                let (true, Cbor::Map(parts)) = (is_key(key, "parts"), parts) else { continue };
                for (l, (_, part)) in parts.iter().enumerate() {
                    if matches!(part, Cbor::Map(_)) {
                        out.push(vec![i, j, k, l]);
                    }
                }
            }
        }
    }
    out
}

/// The parts that have a `[offset, length]` blob.
fn placed(tree: &Cbor) -> Vec<Vec<usize>> {
    parts(tree)
        .into_iter()
        .filter(|p| matches!(at(tree, p), Some(Cbor::Map(part)) if blob_of(part).is_some()))
        .collect()
}

/// The fields [`vocab`] changes, and the words of each.
const FIELDS: [(&str, &[&str]); 5] = [
    (
        "dtype",
        &[
            "f64",
            "f32",
            "f16",
            "bf16",
            "i64",
            "i32",
            "i16",
            "i8",
            "u64",
            "u32",
            "u16",
            "u8",
            "bool",
            "f8_e4m3fn",
            "float32",
            "u128",
            "F32",
            "",
        ],
    ),
    (
        "type",
        &[
            "bool",
            "f8_e4m3fn",
            "f8_e5m2",
            "f8_e4m3fnuz",
            "f8_e5m2fnuz",
            "f8_e8m0",
            "f4_e2m1",
            "complex64",
            "complex128",
            "f32",
            "vendor.fp6/1",
            "",
        ],
    ),
    (
        "layout",
        &[
            "dense",
            "zt.sparse_csr/1",
            "zt.sparse_coo/1",
            "zt.quant_group/1",
            "zt.mx/1",
            "gguf.q4_0/1",
            "gguf.q8_0/1",
            "gguf.f32/1",
            "ztensor1.quantized_group/1",
            "vendor.layout/1",
            "sparse_csr",
            "Dense",
            "",
        ],
    ),
    ("encoding", &["zt.zstd-seekable/1", "zstd", "raw", "vendor.lz4/1", "zt.zstd-seekable/2", ""]),
    ("shard", &["s-1", "00001-of-00002", "../x", ".hidden", "a/b", "", "model-00001-of-00002.zt"]),
];

/// [`Mutation::Vocab`](super::super::Mutation::Vocab): a `dtype`, `type`, `layout`,
/// `encoding`, `shard` or `digest` field given another word of its vocabulary.
pub(super) fn vocab(tree: &mut Cbor, node: u32, choice: u8, layout: &Layout) {
    let mut found: Vec<(Vec<usize>, Option<&[&str]>)> = Vec::new();
    for (key, words) in FIELDS {
        found.extend(keyed(tree, key).into_iter().map(|p| (p, Some(words))));
    }
    found.extend(keyed(tree, "digest").into_iter().map(|p| (p, None)));
    if found.is_empty() {
        return;
    }
    let (path, words) = found[usize::try_from(node).unwrap_or(0) % found.len()].clone();
    let word = match words {
        Some(words) => pick(words, u32::from(choice)).to_owned(),
        None => digest_word(tree, &path, choice, layout),
    };
    if let Some(value) = at_path(tree, &path) {
        *value = Cbor::Text(word);
    }
}

/// A digest for the part holding the `digest` at `path`: the right SHA-256 or XXH3-64 of its
/// stored bytes (right for a raw part), a wrong one, upper case, too short, of an unknown
/// algorithm, malformed.
fn digest_word(tree: &Cbor, path: &[usize], choice: u8, layout: &Layout) -> String {
    let part = path.split_last().and_then(|(_, parent)| at(tree, parent));
    let stored = match part {
        Some(Cbor::Map(part)) => blob_of(part).and_then(|(offset, len)| {
            let start = usize::try_from(offset).ok()?;
            layout.data.get(start..start.checked_add(usize::try_from(len).ok()?)?)
        }),
        _ => None,
    }
    .unwrap_or_default();
    let sha256 = ztensor_io::codec::sha256_hex(stored);
    let xxh3 = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(stored));
    let current = match at(tree, path) {
        Some(Cbor::Text(t)) => t.clone(),
        _ => format!("xxh3:{xxh3}"),
    };
    match choice % 10 {
        0 => format!("sha256:{sha256}"),
        1 => format!("xxh3:{xxh3}"),
        2 => "xxh3:0000000000000000".to_owned(),
        3 => current.to_uppercase(),
        4 => "xxh3:ab".to_owned(),
        5 => "md5:d41d8cd98f00b204e9800998ecf8427e".to_owned(),
        6 => "xxh3".to_owned(),
        7 => String::new(),
        8 => format!("sha256:{}", &sha256[..63]),
        _ => "xxh3:".to_owned(),
    }
}

/// [`Mutation::Place`](super::super::Mutation::Place): a part's blob moved or resized.
pub(super) fn place(tree: &mut Cbor, node: u32, choice: u8, layout: &Layout) {
    let parts = placed(tree);
    if parts.is_empty() {
        return;
    }
    let path = &parts[usize::try_from(node).unwrap_or(0) % parts.len()];
    let Some(Cbor::Map(part)) = at_path(tree, path) else { return };
    let Some((offset, len)) = blob_of(part) else { return };
    let a = layout.alignment;
    let manifest = layout.data.len() as u64;
    let first = layout.blobs.first().map_or(a, |b| b.0);
    let (offset, len) = match choice % 10 {
        0 => (offset.saturating_add(a), len),
        1 => (offset.saturating_sub(a), len),
        2 => (0, len),
        3 => (offset.saturating_add(1), len),
        4 => (offset, len.saturating_add(1)),
        5 => (offset, len.saturating_sub(1)),
        6 => (offset, 0),
        7 => (manifest, len),
        8 => (first, len),
        _ => (offset, u64::MAX - offset / 2),
    };
    set(part, "blob", pair(offset, len));
}

/// [`Mutation::Shard`](super::super::Mutation::Shard): a shard table, and a part in a shard.
pub(super) fn shard(tree: &mut Cbor, node: u32, choice: u8) {
    let entry = |size: u64, digest: Option<&str>| {
        let mut map = vec![(Cbor::Text("size".to_owned()), Cbor::Integer(size.into()))];
        if let Some(d) = digest {
            map.push((Cbor::Text("digest".to_owned()), Cbor::Text(d.to_owned())));
        }
        Cbor::Map(map)
    };
    let zero = Some("xxh3:0000000000000000");
    let (table, shard) = match choice % 6 {
        // Valid: a shard that is not beside the file.
        0 => (Some(("s-1", entry(16 << 20, zero))), Some("s-1")),
        // A part in a shard the table does not list.
        1 => (None, Some("s-1")),
        2 => (Some(("s-1", entry(16 << 20, zero))), Some("../s-1")),
        // Smaller than a footer; without a digest.
        3 => (Some(("s-1", entry(10, Some("xxh3:00")))), Some("s-1")),
        4 => (Some((".hidden", entry(16 << 20, zero))), None),
        _ => (Some(("s-1", entry(4096, None))), Some("s-1")),
    };
    let parts = parts(tree);
    if let (Some(name), false) = (shard, parts.is_empty()) {
        let path = &parts[usize::try_from(node).unwrap_or(0) % parts.len()];
        if let Some(Cbor::Map(part)) = at_path(tree, path) {
            set(part, "shard", Cbor::Text(name.to_owned()));
        }
    }
    if let (Some((name, entry)), Cbor::Map(root)) = (table, tree) {
        set(root, "shards", Cbor::Map(vec![(Cbor::Text(name.to_owned()), entry)]));
    }
}

/// [`Mutation::Alias`](super::super::Mutation::Alias) for zTensor 2: a part points at another
/// part's blob, its `blob`, `shard`, `encoding`, `decoded_length` and `digest` made the
/// other's (aliasing where the sizes agree, which zTensor 2 allows).
pub(super) fn alias(tree: &mut Cbor, node: u32, other: u32) {
    let parts = placed(tree);
    if parts.len() < 2 {
        return;
    }
    let n = parts.len();
    let a = usize::try_from(node).unwrap_or(0) % n;
    let b = (a + 1 + usize::try_from(other).unwrap_or(0) % (n - 1)) % n;
    let Some(Cbor::Map(source)) = at(tree, &parts[b]).cloned() else { return };
    let Some(Cbor::Map(target)) = at_path(tree, &parts[a]) else { return };
    for key in ["blob", "shard", "encoding", "decoded_length", "digest"] {
        match field(&source, key) {
            Some(value) => set(target, key, value.clone()),
            None => remove(target, key),
        }
    }
}

/// [`Mutation::Reorder`](super::super::Mutation::Reorder): the entry holding value `node`
/// trades places with another of its map (keys out of order, once they were sorted).
pub(super) fn reorder(tree: &mut Cbor, node: u32, other: u32) {
    let in_maps: Vec<Vec<usize>> = paths(tree)
        .into_iter()
        .filter(|p| {
            p.split_last().is_some_and(
                |(_, parent)| matches!(at(tree, parent), Some(Cbor::Map(m)) if m.len() > 1),
            )
        })
        .collect();
    if in_maps.is_empty() {
        return;
    }
    let path = &in_maps[usize::try_from(node).unwrap_or(0) % in_maps.len()];
    let Some((&i, parent)) = path.split_last() else { return };
    let Some(Cbor::Map(entries)) = at_path(tree, parent) else { return };
    let n = entries.len();
    let mut j = usize::try_from(other).unwrap_or(0) % n;
    if j == i {
        j = (i + 1) % n;
    }
    entries.swap(i, j);
}
