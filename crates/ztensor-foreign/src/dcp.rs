//! PyTorch Distributed Checkpoints as DCP's own `FileSystemWriter` saves them: a directory of
//! `.metadata` (a pickle of DCP's records: each entry's dtype, global size and chunks, and
//! where each chunk lies) and data files (`__0_0.distcp`, …) holding each chunk as a
//! `torch.save` archive at an offset.
//!
//! The pickle is run by this crate's restricted machine, which models DCP's record classes and
//! executes nothing. [`read_layout`] gives the checkpoint's layout; [`DcpChunks`] is a tensor
//! source whose objects are the chunks (read from their archives as any `torch.save` file is).
//! Stitching the chunks into whole tensors is `ztensor_shard::Stitched`'s work, which the
//! format registry puts on top.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use ztensor_format::Attributes;
use ztensor_io::{ObjectData, ObjectInfo, RawRange, ReadAt, TensorSource};

use crate::error::{Error, ErrorKind, Result};
use crate::pickle::{self, Id, Node, Pickle};
use crate::torch::TorchFile;

/// The name of the metadata file in a checkpoint's directory.
pub const METADATA: &str = ".metadata";

/// The largest `.metadata` read (a checkpoint of a million tensors is well under it).
pub const MAX_METADATA_LEN: u64 = 1 << 30;

/// What a checkpoint holds: its tensors and the names of its other entries.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DcpLayout {
    /// Every tensor, in the metadata's order.
    pub tensors: Vec<DcpTensor>,
    /// Entries that are not tensors (values DCP serialized to bytes), by name.
    pub other: Vec<String>,
}

/// One tensor of a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DcpTensor {
    /// Its name (the flattened state dict key).
    pub name: String,
    /// Its dtype as PyTorch names it (`bfloat16`).
    pub dtype: String,
    /// Its global shape.
    pub shape: Vec<u64>,
    /// Its chunks.
    pub chunks: Vec<DcpChunk>,
}

/// One chunk of a tensor and where it is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DcpChunk {
    /// Its offset in each dimension.
    pub offsets: Vec<u64>,
    /// Its length in each dimension.
    pub sizes: Vec<u64>,
    /// The data file holding it (a plain name in the checkpoint's directory).
    pub file: String,
    /// Where its `torch.save` archive starts in that file.
    pub offset: u64,
    /// The archive's length (as stored: compressed when `zstd`).
    pub length: u64,
    /// Whether it is stored through DCP's ZStandard extension (`stream.zstd/1`): the archive
    /// compressed as one zstd stream.
    pub zstd: bool,
}

/// The storage extension descriptor of DCP's ZStandard extension, without its version.
const ZSTD_EXTENSION: &str = "stream.zstd";

impl DcpChunk {
    /// The name its object has in [`DcpChunks`]: the tensor's, with the chunk's offsets when
    /// it is not the whole tensor (`layer.weight@0,512`).
    pub fn object_name(&self, tensor: &DcpTensor) -> String {
        if self.sizes == tensor.shape {
            tensor.name.clone()
        } else {
            let offsets: Vec<String> = self.offsets.iter().map(u64::to_string).collect();
            format!("{}@{}", tensor.name, offsets.join(","))
        }
    }
}

fn malformed(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Malformed, message.into())
}

/// The layout of the checkpoint whose `.metadata` is `bytes`.
///
/// # Errors
/// [`ErrorKind::Malformed`] for a pickle the machine refuses (a global outside DCP's records,
/// named) or records not of the shape DCP writes; [`ErrorKind::Unrepresentable`] for chunks stored
/// through a storage extension other than DCP's ZStandard one (which is undone when read).
pub fn read_layout(bytes: &[u8]) -> Result<DcpLayout> {
    let (pickle, _) = pickle::load(bytes, &mut |_, _| {
        Err(malformed("a persistent id in a checkpoint's .metadata"))
    })?;
    let p = Records { pickle: &pickle };
    let root = p.record(pickle.root, "Metadata")?;
    let entries = p.dict(p.field(root, "state_dict_metadata")?)?;
    let storage = p.dict(p.field(root, "storage_data")?)?;
    // Where each (entry, chunk offsets) lies: file, offset, length, and whether compressed.
    type Stored = (String, u64, u64, bool);
    let mut stored: HashMap<(String, Vec<u64>), Stored> = HashMap::new();
    for (index, info) in storage {
        let index = p.record(index, "MetadataIndex")?;
        let fqn = p.text(p.field(index, "fqn")?)?;
        let offsets = match p.field(index, "offset") {
            Ok(o) if !matches!(pickle.node(o), Node::None) => p.dims(o)?,
            _ => Vec::new(),
        };
        let info = p.record(info, "_StorageInfo")?;
        // Storage extensions, applied in order when saved: DCP's ZStandard one (version 1, as
        // DCP itself reads it) is undone; any other is refused, named.
        let mut zstd = false;
        if let Ok(t) = p.field(info, "transform_descriptors")
            && !matches!(pickle.node(t), Node::None)
        {
            for &d in p.items(t)? {
                let descriptor = p.text(d)?;
                let (name, version) = descriptor.split_once('/').unwrap_or((&descriptor, ""));
                if name == ZSTD_EXTENSION && version.split('.').next() == Some("1") && !zstd {
                    zstd = true;
                } else {
                    return Err(Error::new(
                        ErrorKind::Unrepresentable,
                        format!(
                            "{fqn:?} is stored through the DCP storage extension {descriptor:?}, \
                             which this reader does not undo (it undoes {ZSTD_EXTENSION}/1)"
                        ),
                    ));
                }
            }
        }
        let file = p.text(p.field(info, "relative_path")?)?;
        let offset = p.int(p.field(info, "offset")?)?;
        let length = p.int(p.field(info, "length")?)?;
        stored.insert((fqn, offsets), (file, offset, length, zstd));
    }
    let mut layout = DcpLayout::default();
    for (name, entry) in entries {
        let name = p.text(name)?;
        let class = match pickle.node(entry) {
            Node::Record(class, _) => class.name(),
            other => return Err(malformed(format!("entry {name:?} is {}", other.kind()))),
        };
        if class == "BytesStorageMetadata" {
            layout.other.push(name);
            continue;
        }
        let entry = p.record(entry, "TensorStorageMetadata")?;
        let properties = p.record(p.field(entry, "properties")?, "TensorProperties")?;
        let dtype = p.dtype(properties)?;
        let shape = p.dims(p.field(entry, "size")?)?;
        let mut chunks = Vec::new();
        for &chunk in p.items(p.field(entry, "chunks")?)? {
            let chunk = p.record(chunk, "ChunkStorageMetadata")?;
            let offsets = p.dims(p.field(chunk, "offsets")?)?;
            let sizes = p.dims(p.field(chunk, "sizes")?)?;
            // The name is copied to look the chunk up and its file's name kept with it.
            p.spend(2 * name.len() + 64)?;
            let (file, offset, length, zstd) =
                stored.get(&(name.clone(), offsets.clone())).cloned().ok_or_else(|| {
                    malformed(format!(
                        "tensor {name:?}: its chunk at {offsets:?} is stored nowhere"
                    ))
                })?;
            p.spend(file.len())?;
            chunks.push(DcpChunk { offsets, sizes, file, offset, length, zstd });
        }
        layout.tensors.push(DcpTensor { name, dtype, shape, chunks });
    }
    Ok(layout)
}

/// Reads DCP's records out of the pickle.
struct Records<'p> {
    pickle: &'p Pickle,
}

impl Records<'_> {
    /// The state of record `id`, which must be of `class`.
    fn record(&self, id: Id, class: &str) -> Result<Id> {
        match self.pickle.node(id) {
            Node::Record(c, Some(state)) if c.name() == class => Ok(*state),
            other => Err(malformed(format!("a {} where DCP writes a {class}", other.kind()))),
        }
    }

    /// Field `name` of a record's state (a dict of fields), found through the dict's index:
    /// records sharing one huge state dict cost a lookup each, not a scan.
    fn field(&self, state: Id, name: &str) -> Result<Id> {
        let Node::Dict(d) = self.pickle.node(state) else {
            return Err(malformed(format!(
                "a record whose state is not a dict (looking for {name:?})"
            )));
        };
        self.pickle
            .get_str(d, name)
            .ok_or_else(|| malformed(format!("a record without its field {name:?}")))
    }

    /// Charges `n` bytes of what is copied out of the pickle to its memory budget: a value
    /// shared by many records is paid for at each copy, so sharing cannot multiply memory
    /// past what the pickle's length allows.
    fn spend(&self, n: usize) -> Result<()> {
        self.pickle.budget.spend(n, "records, copied out")
    }

    fn dict(&self, id: Id) -> Result<Vec<(Id, Id)>> {
        match self.pickle.node(id) {
            Node::Dict(d) => {
                self.spend(16 * d.items.len())?;
                Ok(d.items.clone())
            }
            other => Err(malformed(format!("{} where DCP writes a dict", other.kind()))),
        }
    }

    fn items(&self, id: Id) -> Result<&[Id]> {
        match self.pickle.node(id) {
            Node::List(v) | Node::Tuple(v) => Ok(v),
            other => Err(malformed(format!("{} where DCP writes a list", other.kind()))),
        }
    }

    fn text(&self, id: Id) -> Result<String> {
        match self.pickle.node(id) {
            Node::Str(s) => {
                self.spend(24 + s.len())?;
                Ok(s.clone())
            }
            other => Err(malformed(format!("{} where DCP writes a str", other.kind()))),
        }
    }

    fn int(&self, id: Id) -> Result<u64> {
        match self.pickle.node(id) {
            Node::Int(n) => {
                u64::try_from(*n).map_err(|_| malformed(format!("a length or offset of {n}")))
            }
            other => Err(malformed(format!("{} where DCP writes an int", other.kind()))),
        }
    }

    /// A tuple of offsets or sizes: one per dimension, so no longer than a tensor's rank may
    /// be.
    fn dims(&self, id: Id) -> Result<Vec<u64>> {
        let items = self.items(id)?;
        if items.len() > ztensor_format::Limits::default().max_rank {
            return Err(malformed(format!("offsets or sizes of {} dimensions", items.len())));
        }
        self.spend(24 + 8 * items.len())?;
        items.iter().map(|&d| self.int(d)).collect()
    }

    /// The dtype of a `TensorProperties` state: a tuple whose first item is the dtype (how
    /// the class pickles itself), or a dict of fields (older versions).
    fn dtype(&self, state: Id) -> Result<String> {
        let dtype = match self.pickle.node(state) {
            Node::Tuple(items) if !items.is_empty() => items[0],
            Node::Dict(_) => self.field(state, "dtype")?,
            other => return Err(malformed(format!("tensor properties of {}", other.kind()))),
        };
        match self.pickle.node(dtype) {
            Node::Global(pickle::Global::Dtype(d)) => Ok((*d).to_owned()),
            other => Err(malformed(format!("a dtype that is {}", other.kind()))),
        }
    }
}

/// `len` bytes of a data file from `start`: one chunk's archive.
#[derive(Debug)]
struct Part<S> {
    file: Arc<S>,
    start: u64,
    len: u64,
}

impl<S: ReadAt> ReadAt for Part<S> {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        if offset.checked_add(buf.len() as u64).is_none_or(|end| end > self.len) {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        self.file.read_exact_at(self.start + offset, buf)
    }
    fn will_need(&self, ranges: &[std::ops::Range<u64>]) {
        let inside = ranges.iter().filter_map(|r| {
            let end = r.end.min(self.len);
            (r.start < end).then(|| self.start + r.start..self.start + end)
        });
        self.file.will_need(&inside.collect::<Vec<_>>());
    }
    fn read_each_at(
        &self,
        offset: u64,
        len: u64,
        scratch: &mut [u8],
        each: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        if offset.checked_add(len).is_none_or(|end| end > self.len) {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        self.file.read_each_at(self.start + offset, len, scratch, each)
    }
}

/// The chunks of a checkpoint as a tensor source: one dense object per chunk (named by
/// [`DcpChunk::object_name`]), read from its `torch.save` archive in its data file.
pub struct DcpChunks<S> {
    chunks: Vec<Chunk<S>>,
    names: HashMap<String, usize>,
}

/// One chunk's archive.
enum Chunk<S> {
    /// Stored as it is: read in place.
    Stored(TorchFile<Part<S>>),
    /// Compressed by DCP's ZStandard extension: described by the metadata, decompressed and
    /// read when it is read.
    Zstd(Box<Packed<S>>),
}

/// The most bytes a compressed chunk's archive may decode to beyond the tensor's own: the
/// `torch.save` archive's framing (its pickle, version and byte-order records, the zip's
/// headers and alignment), a few KiB in what torch writes.
pub const ARCHIVE_FRAMING: u64 = 64 << 10;

/// The bytes of a tensor of `shape` and `dtype` (and `logical`'s elements of it each), or
/// `None` past `u64`.
fn declared_len(
    shape: &[u64],
    dtype: ztensor_format::DType,
    logical: Option<&ztensor_format::LogicalType>,
) -> Option<u64> {
    let elements = shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d))?;
    let ratio = logical.map_or(1, ztensor_format::LogicalType::ratio);
    elements.checked_mul(ratio)?.checked_mul(dtype.size())
}

/// A chunk DCP compressed: where it lies, and what the metadata says it holds.
struct Packed<S> {
    part: Part<S>,
    name: String,
    dtype: ztensor_format::DType,
    logical: Option<ztensor_format::LogicalType>,
    shape: Vec<u64>,
    /// The decompressed archive's most bytes: what the metadata declares the chunk holds and
    /// [`ARCHIVE_FRAMING`], within the machine's limit.
    limit: u64,
}

impl<S: ReadAt> Chunk<S> {
    fn info(&self) -> Option<ObjectInfo<'_>> {
        let p = match self {
            Chunk::Stored(file) => return file.info(0),
            Chunk::Zstd(p) => p,
        };
        Some(ObjectInfo {
            name: Cow::Borrowed(&p.name),
            shape: Cow::Borrowed(&p.shape),
            format: ztensor_format::Format::Dense,
            attributes: None,
            components: vec![ztensor_io::ComponentInfo {
                role: Cow::Borrowed(ztensor_io::role::DATA),
                dtype: ztensor_format::StorageType::Known(p.dtype),
                logical_type: p.logical.clone(),
                decoded_len: declared_len(&p.shape, p.dtype, p.logical.as_ref()),
                stored_len: p.part.len,
                offset: None,
                encoding: ztensor_format::Encoding::Zstd,
                digest: None,
            }],
            unsupported: None,
            location: None,
        })
    }

    fn name(&self) -> Option<Cow<'_, str>> {
        match self {
            Chunk::Stored(file) => file.name(0),
            Chunk::Zstd(p) => Some(Cow::Borrowed(&p.name)),
        }
    }

    fn read(&self) -> ztensor_io::Result<ObjectData<'_>> {
        let p = match self {
            Chunk::Stored(file) => return file.read(0),
            Chunk::Zstd(p) => p,
        };
        let failed = |what: String| -> ztensor_io::Error {
            ztensor_format::Error::new(ztensor_format::ErrorKind::DecodeFailed, what)
                .in_object(&p.name)
                .into()
        };
        let mut stored = ztensor_io::try_with_capacity(p.part.len, &format!("chunk {:?}", p.name))
            .map_err(|e| ztensor_io::Error::io("reading", None, e))?;
        stored.resize(usize::try_from(p.part.len).unwrap_or(0), 0);
        p.part
            .read_exact_at(0, &mut stored)
            .map_err(|e| ztensor_io::Error::io("reading a compressed chunk", None, e))?;
        let archive = ztensor_io::codec::zstd_decode(&stored, None, p.limit)
            .map_err(|e| ztensor_io::Error::from(e.in_object(&p.name)))?;
        drop(stored);
        let file = TorchFile::new(archive, &p.name, p.limit)
            .map_err(|e| failed(format!("its decompressed archive: {e}")))?;
        if file.len() != 1 {
            return Err(failed(format!(
                "its decompressed archive holds {} tensors, not one",
                file.len()
            )));
        }
        let data = file.read(0)?;
        let owned = ObjectData {
            name: p.name.clone(),
            shape: data.shape.clone(),
            format: data.format.clone(),
            attributes: None,
            components: data
                .components
                .into_iter()
                .map(|(role, c)| {
                    let c = ztensor_io::ComponentData {
                        dtype: c.dtype,
                        logical_type: c.logical_type,
                        bytes: Cow::Owned(c.bytes.into_owned()),
                    };
                    (role, c)
                })
                .collect(),
        };
        let typed =
            owned.components.get(ztensor_io::role::DATA).map(|c| (c.dtype, &c.logical_type));
        if owned.shape != p.shape || typed != Some((p.dtype, &p.logical)) {
            return Err(failed(format!(
                "its decompressed archive holds a tensor of shape {:?}, not the {:?} of {} the \
                 metadata says",
                owned.shape,
                p.shape,
                p.dtype.name()
            )));
        }
        Ok(owned)
    }

    fn raw(&self) -> Option<RawRange<'_>> {
        match self {
            Chunk::Stored(file) => file.raw(0),
            Chunk::Zstd(_) => None,
        }
    }
}

impl<S> std::fmt::Debug for DcpChunks<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DcpChunks").field("chunks", &self.chunks.len()).finish()
    }
}

impl<S: ReadAt> DcpChunks<S> {
    /// The chunks of `layout`, each read from the data file `open` gives for its name (opened
    /// once per file). Each archive must lie inside its file and hold one tensor.
    ///
    /// # Errors
    /// [`ErrorKind::Malformed`], naming the tensor, for a chunk past its file, a data file
    /// named with a directory, or an archive that is not one tensor; `open`'s errors.
    pub fn open(
        layout: &DcpLayout,
        mut open: impl FnMut(&str) -> Result<S>,
    ) -> Result<DcpChunks<S>> {
        let mut files: HashMap<String, Arc<S>> = HashMap::new();
        let mut chunks = Vec::new();
        let mut names = HashMap::new();
        let limit = ztensor_io::machine_limits().whole_decode_limit();
        for t in &layout.tensors {
            for c in &t.chunks {
                if c.file.is_empty()
                    || c.file.contains(['/', '\\'])
                    || c.file == "."
                    || c.file == ".."
                {
                    return Err(malformed(format!(
                        "tensor {:?}: its data file {:?} is not a plain name in the checkpoint",
                        t.name, c.file
                    )));
                }
                let file = match files.get(&c.file) {
                    Some(f) => f.clone(),
                    None => {
                        let f = Arc::new(open(&c.file)?);
                        files.insert(c.file.clone(), f.clone());
                        f
                    }
                };
                if c.offset.checked_add(c.length).is_none_or(|end| end > file.len()) {
                    return Err(malformed(format!(
                        "tensor {:?}: its chunk at {:?} lies past the end of {} ({} bytes from {} in a file of {})",
                        t.name,
                        c.offsets,
                        c.file,
                        c.length,
                        c.offset,
                        file.len()
                    )));
                }
                let name = c.object_name(t);
                let part = Part { file, start: c.offset, len: c.length };
                let chunk = if c.zstd {
                    let (dtype, logical) =
                        ztensor_format::torch_dtype(&t.dtype).ok_or_else(|| {
                            malformed(format!(
                                "tensor {:?}: dtype {:?} has no zTensor type",
                                t.name, t.dtype
                            ))
                        })?;
                    let declared = declared_len(&c.sizes, dtype, logical.as_ref())
                        .ok_or_else(|| {
                            malformed(format!(
                                "tensor {:?}: its chunk at {:?} of sizes {:?} holds more bytes than a file can",
                                t.name, c.offsets, c.sizes
                            ))
                        })?;
                    Chunk::Zstd(Box::new(Packed {
                        part,
                        name: name.clone(),
                        dtype,
                        logical,
                        shape: c.sizes.clone(),
                        limit: limit.min(declared.saturating_add(ARCHIVE_FRAMING)),
                    }))
                } else {
                    let file = TorchFile::new(part, &name, limit).map_err(|e| {
                        malformed(format!("tensor {:?}: its chunk at {:?}: {e}", t.name, c.offsets))
                    })?;
                    if file.len() != 1 {
                        return Err(malformed(format!(
                            "tensor {:?}: its chunk at {:?} holds {} tensors, not one",
                            t.name,
                            c.offsets,
                            file.len()
                        )));
                    }
                    Chunk::Stored(file)
                };
                if names.insert(name.clone(), chunks.len()).is_some() {
                    return Err(malformed(format!("two chunks are both {name:?}")));
                }
                chunks.push(chunk);
            }
        }
        Ok(DcpChunks { chunks, names })
    }

    /// Opens the chunks of the checkpoint in the directory `dir`, its data files as inputs are
    /// opened.
    ///
    /// # Errors
    /// As [`DcpChunks::open`].
    pub fn open_dir(layout: &DcpLayout, dir: &Path) -> Result<DcpChunks<ztensor_io::FileSource>> {
        DcpChunks::open(layout, |name| {
            let path = dir.join(name);
            let file = ztensor_io::open_input(&path)?;
            ztensor_io::FileSource::new(file).map_err(|e| Error::io("cannot read", &path, e))
        })
    }
}

/// Reads the `.metadata` of the checkpoint in the directory `dir` and its layout.
///
/// # Errors
/// As [`read_layout`]; I/O errors naming the file.
pub fn read_dir_layout(dir: &Path) -> Result<DcpLayout> {
    let path = dir.join(METADATA);
    let bytes = ztensor_io::read_input(&path, MAX_METADATA_LEN)?;
    read_layout(&bytes).map_err(|e| e.with_path(&path))
}

impl<S: ReadAt> TensorSource for DcpChunks<S> {
    fn format_name(&self) -> Cow<'_, str> {
        Cow::Borrowed("DCP FileSystemWriter files")
    }
    fn attributes(&self) -> Option<Cow<'_, Attributes>> {
        None
    }
    fn len(&self) -> usize {
        self.chunks.len()
    }
    fn info(&self, index: usize) -> Option<ObjectInfo<'_>> {
        self.chunks.get(index)?.info()
    }
    fn name(&self, index: usize) -> Option<Cow<'_, str>> {
        self.chunks.get(index)?.name()
    }
    fn find(&self, name: &str) -> Option<usize> {
        self.names.get(name).copied()
    }
    fn read(&self, index: usize) -> ztensor_io::Result<ObjectData<'_>> {
        match self.chunks.get(index) {
            Some(chunk) => chunk.read(),
            None => Err(ztensor_io::Error::not_found(&format!("#{index}"), None)),
        }
    }
    fn raw(&self, index: usize) -> Option<RawRange<'_>> {
        self.chunks.get(index)?.raw()
    }
}

#[cfg(test)]
mod tests;
