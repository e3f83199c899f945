//! Writing a sharded zTensor 2 model (`spec/ztensor-2.md` §6): shard files that are each a
//! complete canonical zTensor 2 file of some of the objects (readable alone, by any reader),
//! and a root beside them whose shard table names each shard with its exact size and SHA-256,
//! and whose objects point at their parts in the shards. Names follow the positional
//! convention (`model.zt`, `model-00001-of-00002.zt`), so the default resolver of every
//! reader finds them; the directory resolver finds them after a rename.
//!
//! Nothing is published until everything is written and checked: each file is written to a
//! temporary file beside its destination, the shards are renamed into place, then the root.

use std::path::{Path, PathBuf};

use ztensor_io::{Excluding, FileSource, TensorSource};

use crate::cbor::{Value, decode, encode};
use crate::container::{MAGIC, MAX_MANIFEST};
use crate::error::{Error, Result};
use crate::shards::{positional_path, whole_digest};
use crate::write::{CANONICAL_ALIGNMENT, WriteOptions, file_attributes_2, footer, write_with};

/// What [`write_sharded`] wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardedSummary {
    /// The root's path.
    pub root: PathBuf,
    /// The root's length.
    pub root_len: u64,
    /// Each shard: its name in the table, its path and its length.
    pub shards: Vec<(String, PathBuf, u64)>,
    /// Objects written.
    pub objects: usize,
    /// Parts written.
    pub parts: usize,
    /// Decoded bytes of every part.
    pub decoded: u64,
}

/// Groups of `source`'s objects (indices, in the byte order of their names) of at most `limit`
/// decoded bytes each; an object larger than `limit` is a group of its own. No object gives
/// one empty group.
pub fn split_by_size(source: &dyn TensorSource, limit: u64) -> Vec<Vec<usize>> {
    let mut order: Vec<(String, usize, u64)> = (0..source.len())
        .filter_map(|i| {
            let info = source.info(i)?;
            let bytes = info.components.iter().map(|c| c.decoded_len.unwrap_or(c.stored_len)).sum();
            Some((info.name.into_owned(), i, bytes))
        })
        .collect();
    order.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let mut groups: Vec<Vec<usize>> = vec![Vec::new()];
    let mut filled = 0u64;
    for (_, index, bytes) in order {
        let current = groups.last().map_or(0, Vec::len);
        if current > 0 && filled.saturating_add(bytes) > limit {
            groups.push(Vec::new());
            filled = 0;
        }
        filled = filled.saturating_add(bytes);
        if let Some(group) = groups.last_mut() {
            group.push(index);
        }
    }
    groups
}

/// The names of `count` shards: `00001-of-00003` and so on (wider past 99999).
pub fn shard_names(count: usize) -> Vec<String> {
    let width = count.to_string().len().max(5);
    (1..=count).map(|i| format!("{i:0width$}-of-{count:0width$}")).collect()
}

/// The paths [`write_sharded`] writes for a root at `root` and `count` shards: the root, then
/// each shard.
pub fn sharded_paths(root: &Path, count: usize) -> Vec<PathBuf> {
    let mut paths = vec![root.to_path_buf()];
    paths.extend(shard_names(count).iter().map(|n| positional_path(root, n)));
    paths
}

/// Writes `source` as a sharded zTensor 2 model: the objects of `groups[k]` (indices of
/// `source`; each object in exactly one group) in shard `k + 1`, a canonical file of its own
/// at its positional path beside `root`, and the root at `root` (file attributes there).
/// Parts are written as [`write()`](crate::write()) writes them (`options`).
///
/// # Errors
/// As [`write()`](crate::write()); groups that are not a partition of the objects, or object
/// names given twice; I/O errors (then nothing is published, unless the failure comes while
/// the finished files are renamed into place).
pub fn write_sharded(
    source: &dyn TensorSource,
    root: &Path,
    groups: &[Vec<usize>],
    options: &WriteOptions,
) -> Result<ShardedSummary> {
    let invalid = |m: String| Error::io("splitting into shards", std::io::Error::other(m));
    let mut seen = vec![false; source.len()];
    for &index in groups.iter().flatten() {
        match seen.get_mut(index) {
            Some(s) if !*s => *s = true,
            Some(_) => return Err(invalid(format!("object {index} is in two shards"))),
            None => return Err(invalid(format!("there is no object {index}"))),
        }
    }
    if let Some(index) = seen.iter().position(|s| !s) {
        return Err(invalid(format!("object {index} is in no shard")));
    }
    // The root's attributes are checked before any shard is written.
    let attributes = file_attributes_2(source, options)?;
    let publish = |path: &Path| {
        let path = path.to_path_buf();
        move |e: ztensor_io::Error| Error::source(&format!("writing {}", path.display()), e)
    };
    let mut summary = ShardedSummary { root: root.to_path_buf(), ..ShardedSummary::default() };
    let mut files = Vec::with_capacity(groups.len());
    let mut entries = Vec::new();
    let mut table = Vec::with_capacity(groups.len());
    for (name, group) in shard_names(groups.len()).into_iter().zip(groups) {
        let path = positional_path(root, &name);
        let view = Excluding::keeping(source, group.clone());
        let mut file = ztensor_io::AtomicFile::create(&path).map_err(publish(&path))?;
        let handle = file.file_mut().map_err(|e| Error::io("writing a shard", e))?;
        let (written, objects) = write_with(&view, handle, options, false)
            .map_err(|e| e.within(&format!("shard {name}")))?;
        let copy = handle.try_clone().map_err(|e| Error::io("reading a shard back", e))?;
        let bytes = FileSource::new(copy).map_err(|e| Error::io("reading a shard back", e))?;
        let digest = whole_digest(&bytes, "sha256")?.unwrap_or_default();
        for (key, value) in objects {
            entries.push((key, in_shard(&value, &name)?));
        }
        summary.objects += written.objects;
        summary.parts += written.parts;
        summary.decoded += written.decoded;
        summary.shards.push((name.clone(), path, written.len));
        table.push((name, written.len, digest));
        files.push(file);
    }
    entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    if let Some(pair) = entries.windows(2).find(|p| p[0].0 == p[1].0) {
        let name = decode(&pair[0].0).ok().and_then(|v| v.as_text().map(str::to_owned));
        return Err(Error::unrepresentable(
            ztensor_format::Refused::Dtype,
            format!("object {name:?} is given twice, and zTensor 2 names are unique"),
        ));
    }
    let manifest = root_manifest(&table, &entries, attributes.as_ref())?;
    drop(entries);

    // The root holds no blob: the magic, zeros to the manifest at the first boundary, the
    // manifest, the footer.
    let mut file = ztensor_io::AtomicFile::create(root).map_err(publish(root))?;
    let handle = file.file_mut().map_err(|e| Error::io("writing the root", e))?;
    let at = CANONICAL_ALIGNMENT;
    let len = manifest.len() as u64;
    {
        use std::io::{Seek, SeekFrom, Write};
        let io = |e| Error::io("writing the root", e);
        handle.write_all(&MAGIC).map_err(io)?;
        handle.set_len(at).map_err(io)?;
        handle.seek(SeekFrom::Start(at)).map_err(io)?;
        handle.write_all(&manifest).map_err(io)?;
        handle.write_all(&footer(at, &manifest)).map_err(io)?;
        handle.flush().map_err(io)?;
    }
    // What was written is what this crate reads as valid, shard references and bounds too.
    let parsed =
        crate::manifest::parse_bytes(&manifest).map_err(|e| e.within("the root written"))?;
    crate::manifest::validate(&parsed, at + len, (at, len))
        .map_err(|e| e.within("the root written"))?;
    summary.root_len = at + len + crate::container::FOOTER_LEN;

    for (file, (_, path, _)) in files.into_iter().zip(&summary.shards) {
        file.persist().map_err(publish(path))?;
    }
    file.persist().map_err(publish(root))?;
    Ok(summary)
}

/// An object's encoded map with `shard` set to `shard` in each of its parts.
fn in_shard(object: &[u8], shard: &str) -> Result<Vec<u8>> {
    let mut value = decode(object).map_err(|e| e.within("an object written"))?;
    if let Value::Map(entries) = &mut value {
        for (key, parts) in entries.iter_mut() {
            if key.as_text() != Some("parts") {
                continue;
            }
            let Value::Map(parts) = parts else { continue };
            for (_, part) in parts.iter_mut() {
                if let Value::Map(fields) = part {
                    fields.push((Value::Text("shard".to_owned()), Value::Text(shard.to_owned())));
                }
            }
        }
    }
    Ok(encode(&value))
}

/// The root's manifest: `shards` (each name to its size and digest), `objects` (entries as
/// given, sorted), then `attributes` (the order deterministic CBOR gives these keys).
fn root_manifest(
    table: &[(String, u64, String)],
    objects: &[(Vec<u8>, Vec<u8>)],
    attributes: Option<&Value>,
) -> Result<Vec<u8>> {
    let text = |s: &str| Value::Text(s.to_owned());
    let shards = Value::Map(
        table
            .iter()
            .map(|(name, size, digest)| {
                let entry =
                    vec![(text("size"), Value::Uint(*size)), (text("digest"), text(digest))];
                (text(name), Value::Map(entry))
            })
            .collect(),
    );
    let mut manifest = Vec::new();
    let keys = 1 + u64::from(!table.is_empty()) + u64::from(attributes.is_some());
    crate::cbor::head(5, keys, &mut manifest);
    if !table.is_empty() {
        manifest.extend(encode(&text("shards")));
        manifest.extend(encode(&shards));
    }
    manifest.extend(encode(&text("objects")));
    crate::cbor::head(5, objects.len() as u64, &mut manifest);
    for (key, value) in objects {
        manifest.extend(key);
        manifest.extend(value);
    }
    if let Some(a) = attributes {
        manifest.extend(encode(&text("attributes")));
        manifest.extend(encode(a));
    }
    if manifest.len() as u64 > MAX_MANIFEST {
        return Err(Error::unrepresentable(
            ztensor_format::Refused::Dtype,
            format!("a root manifest of {} bytes (zTensor 2 allows 1 GiB)", manifest.len()),
        ));
    }
    Ok(manifest)
}
