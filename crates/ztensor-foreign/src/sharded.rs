//! Hugging Face sharded checkpoints: `model.safetensors.index.json` naming, for every tensor,
//! the shard (`model-0000N-of-0000M.safetensors`, beside the index) that holds it.
//!
//! Opening checks that the index and the shards agree: every listed tensor is in the shard the
//! index names, no shard holds a tensor the index does not list there, no tensor is listed or
//! stored twice, and the shards' `__metadata__` do not contradict each other.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use std::borrow::Cow;

pub use ztensor_io::weight_map::{WeightMap, is_plain_name};
use ztensor_io::{FileSource, ObjectData, ObjectInfo, RawRange, ReadAt, TensorSource};

use crate::error::{Error, ErrorKind, Result};
use crate::safetensors::{SafetensorsFile, metadata_attributes, tensor_data, tensor_info};

/// The largest index file read (real ones are well under a megabyte).
pub const MAX_INDEX_LEN: u64 = 256 << 20;

/// Whether `path` names a sharded checkpoint's index (`*.safetensors.index.json`).
pub fn is_index(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(".safetensors.index.json"))
}

/// A sharded checkpoint whose index and shards agree.
#[derive(Debug)]
pub struct ShardedSafetensors<S> {
    index: PathBuf,
    shards: Vec<(PathBuf, SafetensorsFile<S>)>,
    /// How many tensors come before each shard, and after the last: object `i` is in the
    /// shard whose range holds it, found by binary search.
    starts: Vec<usize>,
    /// Every tensor by name, as an object index (no second copy of the names: they are read
    /// from the shards).
    by_name: ztensor_format::NameIndex,
    metadata: BTreeMap<String, String>,
}

#[derive(serde::Deserialize)]
struct Index {
    weight_map: WeightMap,
}

fn mismatch(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::IndexMismatch, message)
}

impl ShardedSafetensors<FileSource> {
    /// Reads the index at `path` and opens every shard it names (with positional reads).
    ///
    /// # Errors
    /// [`ErrorKind::Malformed`] for an index that is not JSON with a `weight_map` of names to
    /// plain file names, or a malformed shard; [`ErrorKind::IndexMismatch`] when index and
    /// shards disagree; I/O errors.
    pub fn open(path: impl AsRef<Path>) -> Result<ShardedSafetensors<FileSource>> {
        let path = path.as_ref();
        ShardedSafetensors::open_with(path, |shard| SafetensorsFile::open(shard))
    }
}

impl<S: ReadAt> ShardedSafetensors<S> {
    /// Reads the index at `path`, opening each shard with `open_shard`.
    ///
    /// # Errors
    /// As [`ShardedSafetensors::open`].
    pub fn open_with(
        path: &Path,
        open_shard: impl FnMut(&Path) -> Result<SafetensorsFile<S>>,
    ) -> Result<ShardedSafetensors<S>> {
        let malformed = |m: String| Error::new(ErrorKind::Malformed, m).with_path(path);
        let len = std::fs::metadata(path).map_err(|e| Error::io("cannot open", path, e))?.len();
        if len > MAX_INDEX_LEN {
            return Err(malformed(format!(
                "index of {len} bytes, over the {MAX_INDEX_LEN}-byte limit"
            )));
        }
        let bytes = ztensor_io::read_input(path, MAX_INDEX_LEN)?;
        ShardedSafetensors::open_index(path, &bytes, open_shard)
    }

    /// The checkpoint whose index is `bytes` (read from `path`, which messages name: a file,
    /// or an object's URL), each shard opened with `open_shard` at its path beside the index.
    ///
    /// # Errors
    /// As [`ShardedSafetensors::open`].
    pub fn open_index(
        path: &Path,
        bytes: &[u8],
        mut open_shard: impl FnMut(&Path) -> Result<SafetensorsFile<S>>,
    ) -> Result<ShardedSafetensors<S>> {
        let malformed = |m: String| Error::new(ErrorKind::Malformed, m).with_path(path);
        if bytes.len() as u64 > MAX_INDEX_LEN {
            return Err(malformed(format!(
                "index of {} bytes, over the {MAX_INDEX_LEN}-byte limit",
                bytes.len()
            )));
        }
        let index: Index =
            serde_json::from_slice(bytes).map_err(|e| malformed(format!("index: {e}")))?;
        // Tensor → shard, checking names: each shard's name is kept once, and each listed
        // tensor points at it (a million tensors name a handful of shards).
        let mut shard_names: Vec<&str> = Vec::new();
        let mut listed: HashMap<&str, u32> = HashMap::with_capacity(index.weight_map.0.len());
        {
            let mut interned: HashMap<&str, u32> = HashMap::new();
            for (tensor, shard) in &index.weight_map.0 {
                if !is_plain_name(shard) {
                    return Err(malformed(format!(
                        "shard {shard:?} of tensor {tensor:?} is not a plain file name beside \
                         the index"
                    )));
                }
                let id = *interned.entry(shard).or_insert_with(|| {
                    shard_names.push(shard);
                    u32::try_from(shard_names.len() - 1).unwrap_or(u32::MAX)
                });
                if listed.insert(tensor, id).is_some() {
                    return Err(
                        mismatch(format!("tensor {tensor:?} is listed twice")).with_path(path)
                    );
                }
            }
        }
        let listed_in = |tensor: &str| listed.get(tensor).map(|&id| shard_names[id as usize]);
        let mut order: Vec<usize> = (0..shard_names.len()).collect();
        order.sort_unstable_by_key(|&k| shard_names[k]);
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let mut shards: Vec<(PathBuf, SafetensorsFile<S>)> = Vec::with_capacity(order.len());
        let mut by_name = ztensor_format::NameIndex::with_capacity(listed.len());
        let mut starts = vec![0usize];
        let mut stored = 0usize;
        let mut metadata: BTreeMap<String, String> = BTreeMap::new();
        for name in order.into_iter().map(|k| shard_names[k]) {
            let shard_path = dir.join(name);
            let file = open_shard(&shard_path).map_err(|e| {
                let not_found =
                    e.io_error().is_some_and(|io| io.kind() == std::io::ErrorKind::NotFound);
                if e.kind() == ErrorKind::Io && not_found {
                    let count = listed.values().filter(|&&id| shard_names[id as usize] == name);
                    Error::new(
                        ErrorKind::Io,
                        format!(
                            "cannot open: shard {name:?} is missing: the index {} lists {} \
                             tensor(s) in it, and no such file is beside it",
                            path.display(),
                            count.count()
                        ),
                    )
                    .with_io_source(std::io::ErrorKind::NotFound.into())
                    .with_path(&shard_path)
                } else {
                    e.with_path(&shard_path)
                }
            })?;
            for t in file.tensors() {
                match listed_in(&t.name) {
                    Some(expected) if expected == name => {}
                    Some(expected) => {
                        // The shard it is listed in, when opened already, may hold it too.
                        let twice = shards.iter().any(|(p, f): &(PathBuf, SafetensorsFile<S>)| {
                            p.file_name().is_some_and(|n| n == expected)
                                && f.find(&t.name).is_some()
                        });
                        let message = if twice {
                            format!("tensor {:?} is in both {expected} and {name}", t.name)
                        } else {
                            format!(
                                "tensor {:?} is listed in {expected} but stored in {name}",
                                t.name
                            )
                        };
                        return Err(mismatch(message).with_path(path));
                    }
                    None => {
                        return Err(mismatch(format!(
                            "tensor {:?} in {name} is not listed in the index",
                            t.name
                        ))
                        .with_path(path));
                    }
                }
            }
            for (k, v) in file.metadata() {
                match metadata.get(k) {
                    Some(prev) if prev != v => {
                        return Err(mismatch(format!(
                            "shards disagree on __metadata__ {k:?}: {prev:?} and {v:?} (in {name})"
                        ))
                        .with_path(path));
                    }
                    _ => {
                        metadata.insert(k.clone(), v.clone());
                    }
                }
            }
            stored += file.tensors().len();
            starts.push(starts.last().copied().unwrap_or(0) + file.tensors().len());
            shards.push((shard_path, file));
        }
        // Every tensor is in the shard the index lists it in, and a shard holds each name
        // once: so no name is in two shards, and every listed one was stored unless fewer
        // were stored than listed.
        if stored < listed.len() {
            let mut found: HashMap<&str, ()> = HashMap::with_capacity(stored);
            for (_, file) in &shards {
                found.extend(file.tensors().iter().map(|t| (t.name.as_str(), ())));
            }
            let mut missing: Vec<(&str, &str)> = listed
                .iter()
                .filter(|(t, _)| !found.contains_key(**t))
                .map(|(t, &id)| (*t, shard_names[id as usize]))
                .collect();
            missing.sort_unstable();
            if let Some((tensor, shard)) = missing.first() {
                return Err(mismatch(format!(
                    "tensor {tensor:?} is listed in {shard} but not stored there ({} listed \
                     tensor(s) missing)",
                    missing.len()
                ))
                .with_path(path));
            }
        }
        drop(listed);
        drop(index);
        let name_of = |i: usize| {
            let at = starts.partition_point(|&s| s <= i) - 1;
            shards[at].1.tensors()[i - starts[at]].name.as_str()
        };
        for i in 0..stored {
            if by_name.insert(i, name_of).is_some() {
                return Err(
                    mismatch(format!("tensor {:?} is in two shards", name_of(i))).with_path(path)
                );
            }
        }
        Ok(ShardedSafetensors { index: path.to_owned(), shards, starts, by_name, metadata })
    }

    /// The index's path.
    pub fn index(&self) -> &Path {
        &self.index
    }

    /// The shards, in file-name order, with their paths.
    pub fn shards(&self) -> &[(PathBuf, SafetensorsFile<S>)] {
        &self.shards
    }

    /// The same checkpoint with its merged `__metadata__` set aside (for conversions told to
    /// drop it).
    pub fn without_metadata(mut self) -> ShardedSafetensors<S> {
        self.metadata.clear();
        self
    }

    /// Carries tensors of dtypes zTensor has no type for as bytes, in every shard (see
    /// [`SafetensorsFile::carry_unknown_dtypes`]).
    #[must_use]
    pub fn carry_unknown_dtypes(mut self, carry: bool) -> ShardedSafetensors<S> {
        self.shards =
            self.shards.into_iter().map(|(p, f)| (p, f.carry_unknown_dtypes(carry))).collect();
        self
    }

    /// The shards, with their paths, taken out.
    pub fn into_shards(self) -> Vec<(PathBuf, SafetensorsFile<S>)> {
        self.shards
    }

    /// The shards' `__metadata__`, merged.
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }

    /// How many tensors, and how many bytes of tensor data, in all.
    pub fn totals(&self) -> (usize, u64) {
        self.shards.iter().fold((0, 0), |(n, b), (_, f)| {
            (n + f.tensors().len(), b + f.tensors().iter().map(|t| t.len).sum::<u64>())
        })
    }
}

impl<S: ReadAt> ShardedSafetensors<S> {
    /// The name of object `index` (which exists).
    fn name_at(&self, index: usize) -> &str {
        self.locate(index).map_or("", |(_, file, i)| file.tensors()[i].name.as_str())
    }

    /// The shard and the tensor of object `index`, counting shard by shard.
    fn locate(&self, index: usize) -> Option<(&Path, &SafetensorsFile<S>, usize)> {
        // The last shard whose first object is at or before `index`.
        let at = self.starts.partition_point(|&s| s <= index).checked_sub(1)?;
        let (path, file) = self.shards.get(at)?;
        let i = index - self.starts[at];
        (i < file.tensors().len()).then_some((path.as_path(), file, i))
    }
}

/// Every tensor of every shard, shard by shard in file-name order, each in data order (the
/// order a sink writes them in); each object's location is its shard's file name.
impl<S: ReadAt> TensorSource for ShardedSafetensors<S> {
    fn format_name(&self) -> Cow<'_, str> {
        Cow::Owned(format!("sharded safetensors ({} shards)", self.shards.len()))
    }

    fn attributes(&self) -> Option<Cow<'_, ztensor_format::Attributes>> {
        metadata_attributes(&self.metadata).map(Cow::Owned)
    }

    fn attributes_origin(&self) -> Cow<'_, str> {
        Cow::Borrowed("__metadata__")
    }

    fn len(&self) -> usize {
        self.starts.last().copied().unwrap_or(0)
    }

    fn info(&self, index: usize) -> Option<ObjectInfo<'_>> {
        let (path, file, i) = self.locate(index)?;
        let name = path.file_name().and_then(|n| n.to_str());
        Some(tensor_info(&file.tensors()[i], name, file.carries_unknown()))
    }

    fn name(&self, index: usize) -> Option<Cow<'_, str>> {
        let (_, file, i) = self.locate(index)?;
        Some(Cow::Borrowed(file.tensors()[i].name.as_str()))
    }

    fn find(&self, name: &str) -> Option<usize> {
        self.by_name.find(name, |i| self.name_at(i))
    }

    fn read(&self, index: usize) -> ztensor_io::Result<ObjectData<'_>> {
        let (_, file, i) = self
            .locate(index)
            .ok_or_else(|| ztensor_io::Error::not_found(&format!("#{index}"), None))?;
        tensor_data(file, &file.tensors()[i])
    }

    fn raw(&self, index: usize) -> Option<RawRange<'_>> {
        let (_, file, i) = self.locate(index)?;
        file.raw(i)
    }

    fn stored_ranges(&self, index: usize) -> Option<ztensor_io::StoredRanges<'_>> {
        let (_, file, i) = self.locate(index)?;
        file.stored_ranges(i)
    }
}
