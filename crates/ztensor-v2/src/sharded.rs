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

use crate::cbor::Value;
use crate::container::MAGIC;
use crate::error::{Error, Result};
use crate::shards::{positional_path, whole_digest};
use crate::write::{
    CANONICAL_ALIGNMENT, ManifestOut, WriteOptions, encoded_key, file_attributes_2, footer,
    write_with,
};

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
    // Each object's name (in one buffer: where it starts, its length), index and bytes.
    let mut names = String::new();
    let mut order: Vec<(usize, usize, usize, u64)> = Vec::with_capacity(source.len());
    for i in 0..source.len() {
        let Some(info) = source.info(i) else { continue };
        let bytes = info.components.iter().map(|c| c.decoded_len.unwrap_or(c.stored_len)).sum();
        order.push((names.len(), info.name.len(), i, bytes));
        names.push_str(&info.name);
    }
    let name = |&(start, len, _, _): &(usize, usize, usize, u64)| &names.as_bytes()[start..][..len];
    order.sort_by(|a, b| name(a).cmp(name(b)));
    ztensor_io::split_by_size(order.iter().map(|&(_, _, _, bytes)| bytes), limit)
        .into_iter()
        .map(|range| order[range].iter().map(|&(_, _, index, _)| index).collect())
        .collect()
}

/// The names of `count` shards: `00001-of-00003` and so on (wider past 99999).
pub fn shard_names(count: usize) -> Vec<String> {
    (1..=count).map(|i| ztensor_io::shard_label(i, count)).collect()
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
    drop(seen);
    // The root's attributes are checked before any shard is written, and held encoded.
    let attributes = file_attributes_2(source, options)?;
    let publish = |path: &Path| {
        let path = path.to_path_buf();
        move |e: ztensor_io::Error| Error::source(&format!("writing {}", path.display()), e)
    };
    let mut summary = ShardedSummary { root: root.to_path_buf(), ..ShardedSummary::default() };
    let mut files = Vec::with_capacity(groups.len());
    // Each shard: its name, its objects (a view of the source) and what was placed in it,
    // from which the root's entries are encoded when the root is written.
    let mut shards = Vec::with_capacity(groups.len());
    let mut table = Vec::with_capacity(groups.len());
    for (name, group) in shard_names(groups.len()).into_iter().zip(groups) {
        let path = positional_path(root, &name);
        let view = Excluding::keeping(source, group.clone());
        let mut file = ztensor_io::AtomicFile::create(&path).map_err(publish(&path))?;
        let handle = file.file_mut().map_err(|e| Error::io("writing a shard", e))?;
        let (written, placed) = write_with(&view, handle, options, false)
            .map_err(|e| e.within(&format!("shard {name}")))?;
        let copy = handle.try_clone().map_err(|e| Error::io("reading a shard back", e))?;
        let bytes = FileSource::new(copy).map_err(|e| Error::io("reading a shard back", e))?;
        let digest = whole_digest(&bytes, "sha256")?.unwrap_or_default();
        summary.objects += written.objects;
        summary.parts += written.parts;
        summary.decoded += written.decoded;
        summary.shards.push((name.clone(), path, written.len));
        table.push((name.clone(), written.len, digest));
        shards.push((name, view, placed));
        files.push(file);
    }
    // The root's entries in the order deterministic CBOR gives their names (shorter first,
    // then bytewise): each a shard and a place in it.
    let many = || invalid("over 2^32 objects".to_owned());
    let mut keys: Vec<(u32, u32)> = Vec::with_capacity(summary.objects);
    for (s, (_, _, placed)) in shards.iter().enumerate() {
        let s = u32::try_from(s).map_err(|_| many())?;
        for k in 0..placed.order.len() {
            keys.push((s, u32::try_from(k).map_err(|_| many())?));
        }
    }
    let name = |&(s, k): &(u32, u32)| shards[s as usize].2.order.name(k as usize);
    keys.sort_unstable_by(|a, b| {
        let (a, b) = (name(a), name(b));
        (a.len(), a.as_bytes()).cmp(&(b.len(), b.as_bytes()))
    });
    if let Some(pair) = keys.windows(2).find(|p| name(&p[0]) == name(&p[1])) {
        return Err(Error::unrepresentable(
            ztensor_format::Refused::Dtype,
            format!("object {:?} is given twice, and zTensor 2 names are unique", name(&pair[0])),
        ));
    }
    let shard_table = (!table.is_empty()).then(|| shard_table(&table));

    // The root holds no blob: the magic, zeros to the manifest at the first boundary, the
    // manifest (each entry encoded as it is written, and read back a batch at a time, with
    // the shard table: shard references and bounds too), the footer.
    let mut file = ztensor_io::AtomicFile::create(root).map_err(publish(root))?;
    let handle = file.file_mut().map_err(|e| Error::io("writing the root", e))?;
    let at = CANONICAL_ALIGNMENT;
    {
        use std::io::{Seek, SeekFrom, Write};
        let io = |e| Error::io("writing the root", e);
        handle.write_all(&MAGIC).map_err(io)?;
        handle.set_len(at).map_err(io)?;
        handle.seek(SeekFrom::Start(at)).map_err(io)?;
        let what = "the root written";
        let mut manifest = ManifestOut::start(
            &mut *handle,
            at,
            shard_table.as_ref(),
            keys.len(),
            attributes.as_deref(),
            what,
        )?;
        for key in &keys {
            let (shard, view, placed) = &shards[key.0 as usize];
            let k = key.1 as usize;
            let entry = placed.entry(view, k, options, Some(shard))?;
            manifest.object(&encoded_key(placed.order.name(k)), &entry.pieces())?;
        }
        let (len, hash) = manifest.finish()?;
        handle.write_all(&footer(at, len, hash)).map_err(io)?;
        handle.flush().map_err(io)?;
        summary.root_len = at + len + crate::container::FOOTER_LEN;
    }
    drop(keys);
    drop(shards);

    for (file, (_, path, _)) in files.into_iter().zip(&summary.shards) {
        file.persist().map_err(publish(path))?;
    }
    file.persist().map_err(publish(root))?;
    Ok(summary)
}

/// The root's shard table: each shard's name to its size and digest.
fn shard_table(table: &[(String, u64, String)]) -> Value {
    let text = |s: &str| Value::Text(s.to_owned());
    Value::Map(
        table
            .iter()
            .map(|(name, size, digest)| {
                let entry =
                    vec![(text("size"), Value::Uint(*size)), (text("digest"), text(digest))];
                (text(name), Value::Map(entry))
            })
            .collect(),
    )
}
