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
    /// Each tensor's shard (a position in `shards`).
    shard_of: HashMap<String, usize>,
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
        mut open_shard: impl FnMut(&Path) -> Result<SafetensorsFile<S>>,
    ) -> Result<ShardedSafetensors<S>> {
        let malformed = |m: String| Error::new(ErrorKind::Malformed, m).with_path(path);
        let len = std::fs::metadata(path).map_err(|e| Error::io("cannot open", path, e))?.len();
        if len > MAX_INDEX_LEN {
            return Err(malformed(format!(
                "index of {len} bytes, over the {MAX_INDEX_LEN}-byte limit"
            )));
        }
        let bytes = ztensor_io::read_input(path, MAX_INDEX_LEN)?;
        let index: Index =
            serde_json::from_slice(&bytes).map_err(|e| malformed(format!("index: {e}")))?;
        // Tensor → shard, checking names.
        let mut listed: HashMap<&str, &str> = HashMap::new();
        for (tensor, shard) in &index.weight_map.0 {
            if !is_plain_name(shard) {
                return Err(malformed(format!(
                    "shard {shard:?} of tensor {tensor:?} is not a plain file name beside the index"
                )));
            }
            if listed.insert(tensor, shard).is_some() {
                return Err(mismatch(format!("tensor {tensor:?} is listed twice")).with_path(path));
            }
        }
        let mut shard_names: Vec<&str> = listed.values().copied().collect();
        shard_names.sort_unstable();
        shard_names.dedup();
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let mut shards = Vec::with_capacity(shard_names.len());
        let mut seen: HashMap<String, &str> = HashMap::new();
        let mut shard_of: HashMap<String, usize> = HashMap::new();
        let mut starts = vec![0usize];
        let mut metadata: BTreeMap<String, String> = BTreeMap::new();
        for name in shard_names {
            let shard_path = dir.join(name);
            let file = open_shard(&shard_path).map_err(|e| {
                if e.kind() == ErrorKind::Io && !shard_path.exists() {
                    let count = listed.values().filter(|s| **s == name).count();
                    Error::new(
                        ErrorKind::Io,
                        format!(
                            "cannot open: shard {name:?} is missing: the index {} lists {count} \
                             tensor(s) in it, and no such file is beside it",
                            path.display()
                        ),
                    )
                    .with_io_source(std::io::ErrorKind::NotFound.into())
                    .with_path(&shard_path)
                } else {
                    e.with_path(&shard_path)
                }
            })?;
            for t in file.tensors() {
                shard_of.insert(t.name.clone(), shards.len());
                if let Some(first) = seen.insert(t.name.clone(), name) {
                    return Err(mismatch(format!(
                        "tensor {:?} is in both {first} and {name}",
                        t.name
                    ))
                    .with_path(path));
                }
                match listed.get(t.name.as_str()) {
                    Some(&expected) if expected == name => {}
                    Some(&expected) => {
                        return Err(mismatch(format!(
                            "tensor {:?} is listed in {expected} but stored in {name}",
                            t.name
                        ))
                        .with_path(path));
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
            starts.push(starts.last().copied().unwrap_or(0) + file.tensors().len());
            shards.push((shard_path, file));
        }
        let mut missing: Vec<(&str, &str)> =
            listed.iter().filter(|(t, _)| !seen.contains_key(**t)).map(|(t, s)| (*t, *s)).collect();
        missing.sort_unstable();
        if let Some((tensor, shard)) = missing.first() {
            return Err(mismatch(format!(
                "tensor {tensor:?} is listed in {shard} but not stored there ({} listed tensor(s) missing)",
                missing.len()
            ))
            .with_path(path));
        }
        Ok(ShardedSafetensors { index: path.to_owned(), shards, starts, shard_of, metadata })
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
        let at = *self.shard_of.get(name)?;
        Some(self.starts[at] + self.shards.get(at)?.1.find(name)?)
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
}
