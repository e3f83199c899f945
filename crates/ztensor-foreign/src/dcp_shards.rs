//! The safetensors shards a Distributed Checkpoint saves through DCP's
//! `HuggingFaceStorageWriter` with `save_distributed`: each rank writes
//! `shard-RRRRR-model-IIIII-of-NNNNN.safetensors`, holding its chunk of each tensor under the
//! tensor's own name, and records where each chunk lies in the header's `__metadata__`:
//! `DCP_SHARDING_INFO` is JSON, `{"name": {"saved_offsets": [..]}, ..}`. No `.metadata` and no
//! index is written.
//!
//! [`DcpShards`] is a tensor source whose objects are the chunks (named as
//! `ztensor_foreign::dcp` names a Distributed Checkpoint's chunks: the tensor's name,
//! with the chunk's offsets when it is not the whole tensor), and [`DcpShards::tensors`] their
//! layout. Stitching them into whole tensors, checked for overlaps and holes, is
//! `ztensor_shard::Stitched`'s work, which the format registry puts on top.
//!
//! No file records a tensor's global shape: it is where its chunks end, as torch's own
//! consolidation takes it. A hole or an overlap inside that extent is told (so is a rank's file
//! taken away from the middle: its chunks leave holes); a missing last chunk along a dimension
//! (the last rank's file taken away) cannot be told from a smaller tensor. Nor can the shards'
//! numbering tell it: a rank with nothing to save writes no file.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use ztensor_format::{Attributes, DType, LogicalType, StorageType};
use ztensor_io::{FileSource, ObjectData, ObjectInfo, RawRange, ReadAt, TensorSource};

use crate::error::{Error, ErrorKind, Result};
use crate::safetensors::SafetensorsFile;

/// The `__metadata__` key holding each chunk's offsets.
pub const SHARDING_INFO: &str = "DCP_SHARDING_INFO";

/// The most shard files one checkpoint may have (more than any world size in use, and each is
/// held open while it is read).
pub const MAX_SHARDS: usize = 1 << 16;

/// Whether a safetensors file's `__metadata__` says DCP wrote it as one rank's shard.
pub fn is_shard(metadata: &BTreeMap<String, String>) -> bool {
    metadata.contains_key(SHARDING_INFO)
}

/// Whether `name` is a shard's as DCP names them: `shard-00001-model-00001-of-00001.safetensors`.
pub fn is_shard_name(name: &str) -> bool {
    shard_number(name).is_some()
}

/// The rank number of a shard named as DCP names them (1 for `shard-00001-…`).
fn shard_number(name: &str) -> Option<u64> {
    let rest = name.strip_prefix("shard-")?.strip_suffix(".safetensors")?;
    let (shard, rest) = rest.split_once("-model-")?;
    let (index, count) = rest.split_once("-of-")?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !(digits(shard) && digits(index) && digits(count)) {
        return None;
    }
    shard.parse().ok()
}

/// One tensor of the checkpoint: its type, its extent and its chunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardedTensor {
    /// Its name (the flattened state dict key).
    pub name: String,
    /// Its dtype as PyTorch names it (`bfloat16`), or as the first shard holding it names it
    /// when torch has no name for it.
    pub dtype: String,
    /// Its global shape: where its chunks end, in each dimension.
    pub shape: Vec<u64>,
    /// Its chunks, in the order of the shard files.
    pub chunks: Vec<ShardedChunk>,
}

/// One chunk of a tensor: the object holding it and where it lies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardedChunk {
    /// Its object's name in [`DcpShards`].
    pub object: String,
    /// Its offset in each dimension.
    pub offsets: Vec<u64>,
    /// Its length in each dimension.
    pub sizes: Vec<u64>,
}

/// The chunks of a checkpoint saved as DCP's safetensors shards, as one tensor source.
pub struct DcpShards<S> {
    /// Each shard file's name and its reader.
    files: Vec<(String, SafetensorsFile<S>)>,
    /// Each object: its file, its tensor there, and its name.
    objects: Vec<(usize, usize, String)>,
    names: HashMap<String, usize>,
    tensors: Vec<ShardedTensor>,
}

impl<S> std::fmt::Debug for DcpShards<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DcpShards")
            .field("files", &self.files.len())
            .field("chunks", &self.objects.len())
            .finish()
    }
}

#[derive(serde::Deserialize)]
struct Placed {
    saved_offsets: Vec<u64>,
}

fn malformed(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Malformed, message.into())
}

impl<S: ReadAt> DcpShards<S> {
    /// The chunks the shard `files` (each named) hold. Every file must carry
    /// [`SHARDING_INFO`] naming each of its tensors, once, at offsets of its rank; the same
    /// chunk may not be saved twice.
    ///
    /// # Errors
    /// [`ErrorKind::Malformed`], naming the file and tensor, for a file without the sharding
    /// information, information that is not DCP's JSON or does not match the file's tensors,
    /// offsets past `u64`, or a chunk saved twice.
    pub fn new(files: Vec<(String, SafetensorsFile<S>)>) -> Result<DcpShards<S>> {
        if files.len() > MAX_SHARDS {
            return Err(malformed(format!(
                "{} shard files, over the {MAX_SHARDS} read",
                files.len()
            )));
        }
        // Each tensor's chunks, by name, in the order of the files.
        let mut chunks: BTreeMap<String, Vec<(usize, usize, Vec<u64>)>> = BTreeMap::new();
        for (f, (file_name, file)) in files.iter().enumerate() {
            let in_file = |m: String| malformed(format!("{file_name}: {m}"));
            let info = file.metadata().get(SHARDING_INFO).ok_or_else(|| {
                in_file(format!(
                    "no {SHARDING_INFO} in its __metadata__: not a shard a Distributed \
                     Checkpoint saved"
                ))
            })?;
            let placed: BTreeMap<String, Placed> = serde_json::from_str(info)
                .map_err(|e| in_file(format!("its {SHARDING_INFO}: {e}")))?;
            for (t, tensor) in file.tensors().iter().enumerate() {
                let offsets = match placed.get(&tensor.name) {
                    Some(p) => &p.saved_offsets,
                    None => {
                        return Err(in_file(format!(
                            "tensor {:?} is not in its {SHARDING_INFO}",
                            tensor.name
                        )));
                    }
                };
                if offsets.len() != tensor.shape.len() {
                    return Err(in_file(format!(
                        "tensor {:?} has {} offsets for {} dimensions",
                        tensor.name,
                        offsets.len(),
                        tensor.shape.len()
                    )));
                }
                if offsets.iter().zip(&tensor.shape).any(|(o, s)| o.checked_add(*s).is_none()) {
                    return Err(in_file(format!(
                        "tensor {:?} lies past any extent: offsets {offsets:?} for shape {:?}",
                        tensor.name, tensor.shape
                    )));
                }
                chunks.entry(tensor.name.clone()).or_default().push((f, t, offsets.clone()));
            }
            // Each tensor was found in it: more entries name tensors the file lacks.
            if placed.len() != file.tensors().len() {
                return Err(in_file(format!(
                    "its {SHARDING_INFO} places {} tensors where the file holds {}",
                    placed.len(),
                    file.tensors().len()
                )));
            }
        }
        let mut objects = Vec::new();
        let mut names = HashMap::new();
        let mut tensors = Vec::with_capacity(chunks.len());
        for (name, mut held) in chunks {
            let (f0, t0, _) = held[0];
            let first = &files[f0].1.tensors()[t0];
            let rank = first.shape.len();
            // Where the chunks end (chunks of another rank are told by the stitching).
            let mut shape = vec![0u64; rank];
            for &(f, t, ref offsets) in &held {
                let sizes = &files[f].1.tensors()[t].shape;
                for d in 0..rank.min(sizes.len()) {
                    shape[d] = shape[d].max(offsets[d] + sizes[d]);
                }
            }
            // A rank whose share of a dimension is nothing saves an empty chunk (several
            // ranks, at the same offsets): it holds nothing, and is left out unless the
            // tensor itself is empty.
            let empty =
                |&(f, t, _): &(usize, usize, Vec<u64>)| files[f].1.tensors()[t].shape.contains(&0);
            if held.iter().any(|c| !empty(c)) {
                held.retain(|c| !empty(c));
            } else {
                held.truncate(1);
            }
            let dtype = dtype_name(&files[f0].1, t0).unwrap_or_else(|| first.dtype.to_string());
            let mut tensor = ShardedTensor { name: name.clone(), dtype, shape, chunks: vec![] };
            for (f, t, offsets) in held {
                let sizes = files[f].1.tensors()[t].shape.clone();
                let object = if sizes == tensor.shape {
                    name.clone()
                } else {
                    let at: Vec<String> = offsets.iter().map(u64::to_string).collect();
                    format!("{name}@{}", at.join(","))
                };
                if names.insert(object.clone(), objects.len()).is_some() {
                    return Err(malformed(format!(
                        "tensor {name:?}: its chunk at {offsets:?} is {object:?}, as another \
                         chunk or tensor is named (saved twice? again in {})",
                        files[f].0
                    )));
                }
                objects.push((f, t, object.clone()));
                tensor.chunks.push(ShardedChunk { object, offsets, sizes });
            }
            tensors.push(tensor);
        }
        Ok(DcpShards { files, objects, names, tensors })
    }

    /// Every tensor, by name, with its chunks.
    pub fn tensors(&self) -> &[ShardedTensor] {
        &self.tensors
    }

    /// The shard files' names, in the order read.
    pub fn file_names(&self) -> impl Iterator<Item = &str> {
        self.files.iter().map(|(name, _)| name.as_str())
    }
}

/// The torch name of the dtype of tensor `t` of `file`.
fn dtype_name<S: ReadAt>(file: &SafetensorsFile<S>, t: usize) -> Option<String> {
    let info = file.info(t)?;
    let data = info.component(ztensor_io::role::DATA)?;
    let dtype: DType = match data.dtype {
        StorageType::Known(d) => d,
        StorageType::Unknown(_) => return None,
    };
    let logical: Option<&LogicalType> = data.logical_type.as_ref();
    ztensor_format::torch_name(dtype, logical).map(str::to_owned)
}

impl DcpShards<FileSource> {
    /// The shards in the directory `dir`: every `*.safetensors` file in it (as torch's own
    /// consolidation takes them), each opened as inputs are.
    ///
    /// # Errors
    /// As [`DcpShards::new`]; [`ErrorKind::Malformed`] for a directory with no safetensors
    /// file; I/O errors naming the file.
    pub fn open_dir(dir: &Path) -> Result<DcpShards<FileSource>> {
        let names = shard_files(dir)?;
        let mut files = Vec::with_capacity(names.len());
        for name in names {
            let file = SafetensorsFile::open(dir.join(&name))?;
            files.push((name, file));
        }
        DcpShards::new(files).map_err(|e| e.with_path(dir))
    }
}

/// The names of the `*.safetensors` files in `dir` (links followed; other entries skipped),
/// sorted.
///
/// # Errors
/// I/O errors naming the directory; [`ErrorKind::Malformed`] for none, or more than
/// [`MAX_SHARDS`].
pub fn shard_files(dir: &Path) -> Result<Vec<String>> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io("cannot list", dir, e))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("cannot list", dir, e))?;
        let name = match entry.file_name().into_string() {
            Ok(name) => name,
            // Torch's consolidation would read it: named, not passed over.
            Err(name) if name.to_string_lossy().ends_with(".safetensors") => {
                return Err(malformed(format!(
                    "{:?}: a shard name that is not UTF-8",
                    name.to_string_lossy()
                ))
                .with_path(dir));
            }
            Err(_) => continue,
        };
        if !name.ends_with(".safetensors") || !entry.path().is_file() {
            continue;
        }
        if names.len() == MAX_SHARDS {
            return Err(malformed(format!("more than {MAX_SHARDS} shard files")).with_path(dir));
        }
        names.push(name);
    }
    if names.is_empty() {
        return Err(malformed("no safetensors file in it").with_path(dir));
    }
    names.sort_unstable();
    Ok(names)
}

impl<S: ReadAt> DcpShards<S> {
    fn object(&self, index: usize) -> Option<(&SafetensorsFile<S>, usize, &str)> {
        let (f, t, name) = self.objects.get(index)?;
        Some((&self.files[*f].1, *t, name))
    }
}

impl<S: ReadAt> TensorSource for DcpShards<S> {
    fn format_name(&self) -> Cow<'_, str> {
        Cow::Borrowed("DCP safetensors shards")
    }
    fn attributes(&self) -> Option<Cow<'_, Attributes>> {
        None
    }
    fn len(&self) -> usize {
        self.objects.len()
    }
    fn info(&self, index: usize) -> Option<ObjectInfo<'_>> {
        let (file, t, name) = self.object(index)?;
        let mut info = file.info(t)?;
        info.name = Cow::Borrowed(name);
        Some(info)
    }
    fn name(&self, index: usize) -> Option<Cow<'_, str>> {
        self.object(index).map(|(_, _, name)| Cow::Borrowed(name))
    }
    fn find(&self, name: &str) -> Option<usize> {
        self.names.get(name).copied()
    }
    fn read(&self, index: usize) -> ztensor_io::Result<ObjectData<'_>> {
        let (file, t, name) = self
            .object(index)
            .ok_or_else(|| ztensor_io::Error::not_found(&format!("#{index}"), None))?;
        let mut data = file.read(t)?;
        name.clone_into(&mut data.name);
        Ok(data)
    }
    fn raw(&self, index: usize) -> Option<RawRange<'_>> {
        let (file, t, _) = self.object(index)?;
        file.raw(t)
    }
}

#[cfg(test)]
mod tests;
