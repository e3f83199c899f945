//! PyTorch checkpoints in: the zip archives `torch.save` writes (`pytorch_model.bin`, `*.pt`,
//! `*.pth`, PyTorch 1.6 and later), read without executing anything.
//!
//! The archive holds `<name>/data.pkl`, a pickle of the saved object whose tensors name their
//! storages by persistent id, and one member `<name>/data/<key>` per storage with its raw
//! bytes (`<name>/byteorder` says `little` or `big`). The pickle is run by a restricted machine
//! that models the few globals a state dict uses (`torch._utils._rebuild_tensor_v2`/`_v3`,
//! `_rebuild_parameter`, the storage types, `collections.OrderedDict`, `torch.Size`,
//! `_codecs.encode` and NumPy scalars) and refuses every other by name.
//!
//! What the checkpoint holds becomes objects and attributes:
//! - every tensor becomes a dense object named by its path through dicts, lists and tuples
//!   (`model_state_dict.fc.weight`, `optimizer.state.0.exp_avg`; a checkpoint that is a single
//!   tensor is named after the file);
//! - storage offsets and strides are honoured: a view becomes the contiguous tensor it shows;
//!   tensors sharing a storage each read their own elements of it, and each storage's CRC-32 is
//!   checked once, when the first of its tensors is read;
//! - every value outside the tensors that is plain data (numbers, strings, bytes, lists,
//!   dicts, NumPy scalars) becomes a file attribute under its dotted path (`epoch`,
//!   `optimizer.param_groups`);
//! - dtypes: every one zTensor holds, FP8 as `u8` with the 1.2 logical type, complex as pairs;
//!   others (quantized, `complex32`, `float8_e8m0fnu`) are objects that cannot be decoded;
//! - sparse COO and CSR tensors become `sparse_coo` (`coords`, `values`) and `sparse_csr`
//!   (`indptr`, `indices`, `values`) objects, their int64 indices given as `u64` once none is
//!   negative; other layouts (CSC, BSR), hybrid sparse tensors and quantized tensors are refused.
//!
//! Legacy checkpoints (before 1.6, or saved with `_use_new_zipfile_serialization=False`: a
//! sequence of pickles followed by the raw storages) are read too. TorchScript archives are
//! refused by name.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use ztensor_format::{DType, Encoding, Format, LogicalType, StorageType, Value};
use ztensor_io::{
    ComponentData, ComponentInfo, FileSource, ObjectData, ObjectInfo, RawRange, ReadAt,
    TensorSource,
};

use crate::error::{Error, ErrorKind, Result};
use crate::pickle::{Id, Node, Pickle, SparseRef, TensorRef};
use crate::torch_dtypes::element_size;

mod layout;
mod strided;

pub use layout::MAX_PICKLE;
use layout::{Storage, legacy, malformed, zipped};
use strided::{Window, each_offset, permute_in_place};

/// How deep dicts, lists and tuples may nest (a cycle is refused by this too).
const MAX_DEPTH: u32 = 128;

/// The zTensor types of a PyTorch dtype, or why there are none.
fn types_of(dtype: &str) -> std::result::Result<(DType, Option<LogicalType>), String> {
    ztensor_format::torch_dtype(dtype).ok_or_else(|| {
        if dtype.starts_with("qint") || dtype.starts_with("quint") {
            format!("torch.{dtype}: a quantized dtype, which zTensor does not hold")
        } else {
            format!("torch.{dtype} has no zTensor type")
        }
    })
}
/// One tensor of the checkpoint.
#[derive(Debug)]
struct Tensor {
    name: String,
    storage: usize,
    dtype: &'static str,
    types: std::result::Result<(DType, Option<LogicalType>), String>,
    /// Element size, bytes.
    size: u64,
    /// In elements.
    offset: u64,
    shape: Vec<u64>,
    strides: Vec<u64>,
    numel: u64,
    /// One past the last element it reads, relative to `offset` (0 when empty).
    span: u64,
    contiguous: bool,
}

/// One object of the checkpoint: a dense tensor (one part, `data`) or a sparse one (COO:
/// `coords`, `values`; CSR: `indptr`, `indices`, `values`), each part a view of a storage.
#[derive(Debug)]
struct Entry {
    name: String,
    format: Format,
    shape: Vec<u64>,
    parts: Vec<(&'static str, Tensor)>,
}

/// The roles of a sparse object's int64 index parts, given as `u64` (checked non-negative).
fn is_index(role: &str) -> bool {
    matches!(role, "coords" | "indptr" | "indices")
}

/// A validated PyTorch checkpoint over any byte source.
#[derive(Debug)]
pub struct TorchFile<S> {
    source: S,
    protocol: u8,
    legacy: bool,
    big_endian: bool,
    storages: Vec<Storage>,
    tensors: Vec<Entry>,
    /// The values other than tensors, or why they cannot be attributes (two of one name).
    attributes: std::result::Result<Option<ztensor_format::Attributes>, ztensor_format::Error>,
    limit: u64,
}

impl TorchFile<FileSource> {
    /// Opens the checkpoint at `path`; a checkpoint that is one tensor names it after the file.
    ///
    /// # Errors
    /// As [`TorchFile::new`], with the path in the message.
    pub fn open(path: impl AsRef<Path>) -> Result<TorchFile<FileSource>> {
        let path = path.as_ref();
        let file = ztensor_io::open_input(path)?;
        let source = FileSource::new(file).map_err(|e| Error::io("cannot read", path, e))?;
        let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("tensor").to_owned();
        let limit = ztensor_io::machine_limits().whole_decode_limit();
        TorchFile::new(source, &name, limit).map_err(|e| e.with_path(path))
    }
}

impl<S: ReadAt> TorchFile<S> {
    /// Reads the archive in `source` and runs its pickle: every storage is found and sized,
    /// every tensor's elements lie inside its storage. A checkpoint that is a single tensor
    /// calls it `name`; tensors decode to at most `limit` bytes.
    ///
    /// # Errors
    /// [`ErrorKind::Malformed`] for a damaged archive or pickle, a global outside the list
    /// (named), a tensor past its storage, two tensors of one name; I/O errors.
    pub fn new(source: S, name: &str, limit: u64) -> Result<TorchFile<S>> {
        let mut head = [0u8; 2];
        source
            .read_exact_at(0, &mut head[..usize::try_from(source.len().min(2)).unwrap_or(0)])
            .map_err(|e| Error::new(ErrorKind::Io, format!("reading the first bytes: {e}")))?;
        let layout =
            if matches!(head, [0x80, 2..=5]) { legacy(&source)? } else { zipped(&source)? };
        let (pickle, seen) = layout.pickle;
        let mut walk = Walk {
            pickle: &pickle,
            budget: pickle.nodes.len().saturating_mul(4).saturating_add(1024),
            tensors: Vec::new(),
            attributes: Vec::new(),
            has_tensor: HashMap::new(),
        };
        walk.walk(pickle.root, name, true, 0)?;
        let (found, attributes) = (walk.tensors, walk.attributes);

        let mut storages: Vec<Storage> = Vec::new();
        let mut by_key: HashMap<String, usize> = HashMap::new();
        let mut tensors = Vec::with_capacity(found.len());
        let mut names = std::collections::HashSet::new();
        for (name, found) in found {
            if !names.insert(name.clone()) {
                return Err(malformed(format!("two tensors are called {name:?}")));
            }
            let (format, shape, views) = match found {
                Found::Dense(t) => (Format::Dense, t.shape.clone(), vec![("data", t)]),
                Found::Sparse(s) => {
                    let format = if s.layout == "sparse_coo" {
                        Format::SparseCoo
                    } else {
                        Format::SparseCsr
                    };
                    (format, s.shape, s.parts)
                }
            };
            let mut parts = Vec::with_capacity(views.len());
            for (role, t) in views {
                let (dtype, numel) =
                    seen.get(&t.storage.key).copied().unwrap_or((t.storage.dtype, t.storage.numel));
                let storage_bytes = numel
                    .checked_mul(element_size(dtype))
                    .ok_or_else(|| malformed(format!("storage {:?} overflows", t.storage.key)))?;
                let index = match by_key.get(&t.storage.key) {
                    Some(&i) => i,
                    None => {
                        let storage = (layout.storage)(&t.storage.key).ok_or_else(|| {
                            malformed(format!("storage {:?} is not in the file", t.storage.key))
                        })?;
                        storages.push(storage);
                        by_key.insert(t.storage.key.clone(), storages.len() - 1);
                        storages.len() - 1
                    }
                };
                let stored = &storages[index];
                if stored.len != storage_bytes {
                    return Err(malformed(format!(
                        "storage {:?} holds {} bytes; the pickle says {numel} elements of {dtype} \
                         ({storage_bytes} bytes)",
                        stored.key, stored.len
                    ))
                    .in_object(&name));
                }
                parts.push((role, Tensor::new(name.clone(), index, &t, storage_bytes)?));
            }
            if format != Format::Dense {
                sparse_parts_agree(&format, &shape, &parts).map_err(|e| e.in_object(&name))?;
            }
            tensors.push(Entry { name, format, shape, parts });
        }
        Ok(TorchFile {
            source,
            protocol: pickle.protocol,
            legacy: layout.legacy,
            big_endian: layout.big_endian,
            storages,
            tensors,
            attributes: if attributes.is_empty() {
                Ok(None)
            } else {
                ztensor_format::Attributes::try_from(Value::Map(attributes)).map(Some)
            },
            limit,
        })
    }

    /// Checks the CRC-32 of storage `index`'s member, once.
    fn verify(&self, index: usize) -> std::result::Result<(), String> {
        let storage = &self.storages[index];
        storage
            .verified
            .get_or_init(|| {
                let Some(expected) = storage.crc32 else { return Ok(()) };
                let mut crc = flate2::Crc::new();
                let mut buf = vec![0u8; usize::try_from(storage.len.min(1 << 20)).unwrap_or(0)];
                let mut at = 0u64;
                while at < storage.len {
                    let n = usize::try_from((storage.len - at).min(1 << 20)).unwrap_or(0);
                    self.source
                        .read_exact_at(storage.offset + at, &mut buf[..n])
                        .map_err(|e| format!("reading storage {:?}: {e}", storage.key))?;
                    crc.update(&buf[..n]);
                    at += n as u64;
                }
                if crc.sum() == expected {
                    Ok(())
                } else {
                    Err(format!("storage {:?}: CRC-32 mismatch", storage.key))
                }
            })
            .clone()
    }
}

/// The parts of a sparse tensor agree with each other and with its shape: int64 indices of the
/// counts the layout gives, one-dimensional values (hybrid tensors, with dense dimensions in
/// their values, are not read).
fn sparse_parts_agree(
    format: &Format,
    shape: &[u64],
    parts: &[(&'static str, Tensor)],
) -> Result<()> {
    let part = |role: &str| parts.iter().find(|(r, _)| *r == role).map(|(_, t)| t);
    let values = part("values").ok_or_else(|| malformed("a sparse tensor without values"))?;
    let [nnz] = values.shape[..] else {
        return Err(malformed(format!(
            "a sparse tensor with values of shape {:?} (hybrid sparse tensors are not read)",
            values.shape
        )));
    };
    for (role, t) in parts.iter().filter(|(r, _)| is_index(r)) {
        if t.dtype != "int64" {
            return Err(malformed(format!("sparse {role} of {}, not int64", t.dtype)));
        }
    }
    let expected: Vec<(&str, Vec<u64>)> = match format {
        Format::SparseCoo => vec![("coords", vec![shape.len() as u64, nnz])],
        _ => {
            let [rows, _] = shape[..] else {
                return Err(malformed(format!("a CSR tensor of shape {shape:?}")));
            };
            vec![("indptr", vec![rows.saturating_add(1)]), ("indices", vec![nnz])]
        }
    };
    for (role, want) in expected {
        let got = part(role).map(|t| t.shape.clone()).unwrap_or_default();
        if got != want {
            return Err(malformed(format!(
                "sparse {role} of shape {got:?} for a {format} tensor of shape {shape:?} with {nnz} values"
            )));
        }
    }
    Ok(())
}

impl Tensor {
    fn new(name: String, storage: usize, t: &TensorRef, storage_bytes: u64) -> Result<Tensor> {
        let size = element_size(t.dtype);
        let bad = |m: String| malformed(m).in_object(&name);
        let numel = t.shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d)).ok_or_else(|| {
            bad(format!("shape {:?} has more elements than can be counted", t.shape))
        })?;
        let decoded = numel.checked_mul(size);
        // One past the last element read, in elements from the offset.
        let span = if numel == 0 {
            0
        } else {
            t.shape
                .iter()
                .zip(&t.strides)
                .try_fold(1u64, |a, (&d, &s)| (d - 1).checked_mul(s).and_then(|x| a.checked_add(x)))
                .ok_or_else(|| bad(format!("strides {:?} overflow", t.strides)))?
        };
        let end = t.offset.checked_add(span).and_then(|e| e.checked_mul(size));
        if decoded.is_none() || end.is_none_or(|e| e > storage_bytes) {
            return Err(bad(format!(
                "shape {:?} with strides {:?} at offset {} reads past its storage of {storage_bytes} bytes",
                t.shape, t.strides, t.offset
            )));
        }
        let mut expected = 1u64;
        let mut contiguous = true;
        for (&d, &s) in t.shape.iter().zip(&t.strides).rev() {
            if d > 1 && s != expected {
                contiguous = false;
            }
            expected = expected.saturating_mul(d);
        }
        Ok(Tensor {
            name,
            storage,
            dtype: t.dtype,
            types: types_of(t.dtype),
            size,
            offset: t.offset,
            shape: t.shape.clone(),
            strides: t.strides.clone(),
            numel,
            span,
            contiguous,
        })
    }
}

/// Turns the pickled object into named tensors and attributes.
struct Walk<'p> {
    pickle: &'p Pickle,
    /// Values still to visit: shared values are visited once per path, so a pickle that
    /// shares one list everywhere cannot make the walk exponential.
    budget: usize,
    tensors: Vec<(String, Found)>,
    attributes: Vec<(Value, Value)>,
    has_tensor: HashMap<Id, bool>,
}

/// A tensor the walk found.
enum Found {
    Dense(TensorRef),
    Sparse(SparseRef),
}

fn join(prefix: &str, key: &str, root: bool) -> String {
    if root { key.to_owned() } else { format!("{prefix}.{key}") }
}

impl Walk<'_> {
    fn spend(&mut self, depth: u32) -> Result<()> {
        if depth > MAX_DEPTH {
            return Err(malformed(format!(
                "the checkpoint nests deeper than {MAX_DEPTH} (or holds a cycle)"
            )));
        }
        self.budget = self.budget.checked_sub(1).ok_or_else(|| {
            malformed("the checkpoint shares values so often that listing them would not end")
        })?;
        Ok(())
    }

    /// Charges `n` bytes of names or copied text to the pickle's memory budget: a long string
    /// shared by many values cannot make the names and attributes grow past what the pickle's
    /// length allows.
    fn spend_bytes(&mut self, n: usize) -> Result<()> {
        self.pickle.budget.spend(n, "names and copied values")
    }

    fn children(&self, id: Id) -> Vec<(Option<Id>, Id)> {
        match self.pickle.node(id) {
            Node::Dict(d) => d.items.iter().map(|&(k, v)| (Some(k), v)).collect(),
            Node::List(v) | Node::Tuple(v) | Node::Set(v) => v.iter().map(|&v| (None, v)).collect(),
            _ => Vec::new(),
        }
    }

    fn has_tensor(&mut self, id: Id, depth: u32) -> Result<bool> {
        if let Some(&known) = self.has_tensor.get(&id) {
            return Ok(known);
        }
        self.spend(depth)?;
        let found = match self.pickle.node(id) {
            Node::Tensor(_) | Node::Sparse(_) => true,
            _ => {
                let mut found = false;
                for (_, child) in self.children(id) {
                    if self.has_tensor(child, depth + 1)? {
                        found = true;
                        break;
                    }
                }
                found
            }
        };
        self.has_tensor.insert(id, found);
        Ok(found)
    }

    fn key(&self, key: Id) -> Result<String> {
        match self.pickle.node(key) {
            Node::Str(s) => Ok(s.clone()),
            Node::Int(i) => Ok(i.to_string()),
            Node::Bool(b) => Ok(if *b { "True" } else { "False" }.to_owned()),
            other => Err(malformed(format!(
                "a dict holding tensors under a key that is {}: names need str or int keys",
                other.kind()
            ))),
        }
    }

    fn walk(&mut self, id: Id, name: &str, root: bool, depth: u32) -> Result<()> {
        self.spend(depth)?;
        match self.pickle.node(id) {
            Node::Tensor(t) => {
                self.tensors.push((name.to_owned(), Found::Dense((**t).clone())));
            }
            Node::Sparse(s) => {
                self.tensors.push((name.to_owned(), Found::Sparse((**s).clone())));
            }
            Node::Dict(_) | Node::List(_) | Node::Tuple(_) | Node::Set(_) => {
                for (i, (key, child)) in self.children(id).into_iter().enumerate() {
                    let key = match key {
                        Some(k) => self.key(k)?,
                        None => i.to_string(),
                    };
                    let child_name = join(name, &key, root);
                    self.spend_bytes(child_name.len())?;
                    if self.has_tensor(child, depth + 1)? {
                        self.walk(child, &child_name, false, depth + 1)?;
                    } else {
                        let value = self.value(child, depth + 1)?;
                        self.attributes.push((Value::Text(child_name), value));
                    }
                }
            }
            _ => {
                let value = self.value(id, depth)?;
                self.attributes.push((Value::Text(name.to_owned()), value));
            }
        }
        Ok(())
    }

    /// A value without tensors, as plain data.
    fn value(&mut self, id: Id, depth: u32) -> Result<Value> {
        self.spend(depth)?;
        Ok(match self.pickle.node(id) {
            Node::None => Value::Null,
            Node::Bool(b) => Value::Bool(*b),
            Node::Int(i)
                if (ztensor_format::CBOR_INT_MIN..=ztensor_format::CBOR_INT_MAX).contains(i) =>
            {
                Value::Integer(*i)
            }
            Node::Int(i) => Value::Text(i.to_string()),
            Node::Float(f) => Value::Float(*f),
            Node::Str(s) => {
                self.spend_bytes(s.len())?;
                Value::Text(s.clone())
            }
            Node::Bytes(b) => {
                self.spend_bytes(b.len())?;
                Value::Bytes(b.clone())
            }
            Node::List(_) | Node::Tuple(_) | Node::Set(_) => {
                let mut items = Vec::new();
                for (_, child) in self.children(id) {
                    items.push(self.value(child, depth + 1)?);
                }
                Value::Array(items)
            }
            Node::Dict(_) => {
                let mut items = Vec::new();
                for (key, child) in self.children(id) {
                    let key = match key {
                        Some(k) => self.value(k, depth + 1)?,
                        None => Value::Null,
                    };
                    items.push((key, self.value(child, depth + 1)?));
                }
                Value::Map(items)
            }
            Node::Global(g) => Value::Text(g.describe()),
            Node::Storage(s) => Value::Text(format!("a torch storage ({})", s.key)),
            Node::Tensor(_) | Node::Sparse(_) => {
                return Err(malformed(
                    "a tensor where only plain values can be (a dict key, or inside a key)",
                ));
            }
            Node::NumpyDtype(descr, _) => Value::Text(format!("numpy.dtype({descr:?})")),
            Node::Record(class, _) => Value::Text(format!("a Distributed Checkpoint {class}")),
        })
    }
}

impl<S: ReadAt> TensorSource for TorchFile<S> {
    fn format_name(&self) -> Cow<'_, str> {
        let layout = if self.legacy { "legacy torch.save" } else { "torch.save" };
        Cow::Owned(format!("PyTorch checkpoint ({layout}, pickle protocol {})", self.protocol))
    }

    fn attributes(&self) -> Option<Cow<'_, ztensor_format::Attributes>> {
        self.attributes.as_ref().ok()?.as_ref().map(Cow::Borrowed)
    }

    fn try_attributes(&self) -> ztensor_io::Result<Option<Cow<'_, ztensor_format::Attributes>>> {
        match &self.attributes {
            Ok(attributes) => Ok(attributes.as_ref().map(Cow::Borrowed)),
            Err(e) => Err(ztensor_io::Error::from(e.clone())),
        }
    }

    fn attributes_origin(&self) -> Cow<'_, str> {
        Cow::Borrowed("the checkpoint's values other than tensors")
    }

    fn len(&self) -> usize {
        self.tensors.len()
    }

    fn info(&self, index: usize) -> Option<ObjectInfo<'_>> {
        let e = self.tensors.get(index)?;
        let components = e
            .parts
            .iter()
            .map(|(role, t)| {
                let (dtype, logical_type) = match &t.types {
                    Ok(_) if is_index(role) => (StorageType::from(DType::U64), None),
                    Ok((d, l)) => (StorageType::from(*d), l.clone()),
                    Err(_) => (StorageType::Unknown(t.dtype.into()), None),
                };
                let len = t.numel * t.size;
                let storage = &self.storages[t.storage];
                let offset = (t.contiguous && storage.deflated.is_none() && !self.big_endian)
                    .then(|| storage.offset + t.offset * t.size);
                ComponentInfo {
                    role: Cow::Borrowed(role),
                    dtype,
                    logical_type,
                    decoded_len: Some(len),
                    stored_len: len,
                    offset,
                    encoding: Encoding::Raw,
                    digest: None,
                }
            })
            .collect();
        Some(ObjectInfo {
            name: Cow::Borrowed(&e.name),
            shape: Cow::Borrowed(&e.shape),
            format: e.format.clone(),
            attributes: None,
            components,
            unsupported: e
                .parts
                .iter()
                .find_map(|(_, t)| t.types.as_ref().err())
                .map(|reason| crate::error::unknown_dtype(reason.as_str(), &e.name)),
            location: None,
        })
    }

    /// A dense tensor whose elements lie in order in a stored (not deflated) little-endian
    /// storage, once that storage's CRC-32 was checked (a mismatch gives `None`, so the read
    /// that follows reports it): readers then take it in pieces at their own offsets.
    fn raw(&self, index: usize) -> Option<RawRange<'_>> {
        let e = self.tensors.get(index)?;
        let [(role, t)] = e.parts.as_slice() else { return None };
        let storage = &self.storages[t.storage];
        let plain = e.format == Format::Dense && !is_index(role) && t.types.is_ok();
        if !plain || !t.contiguous || storage.deflated.is_some() || self.big_endian {
            return None;
        }
        self.verify(t.storage).ok()?;
        Some(RawRange {
            source: &self.source,
            offset: storage.offset + t.offset * t.size,
            len: t.numel * t.size,
        })
    }

    fn read(&self, index: usize) -> ztensor_io::Result<ObjectData<'_>> {
        let e = self
            .tensors
            .get(index)
            .ok_or_else(|| ztensor_io::Error::not_found(&format!("#{index}"), None))?;
        let mut components = BTreeMap::new();
        for (role, t) in &e.parts {
            let (dtype, logical_type) = t.types.clone().map_err(|reason| {
                ztensor_io::Error::unsupported(
                    ztensor_format::Error::new(ztensor_format::ErrorKind::DtypeUnknown, reason)
                        .refusing(ztensor_format::Refused::Dtype)
                        .in_object(&e.name),
                )
            })?;
            let bytes = self.read_part(t, dtype)?;
            let (dtype, logical_type) = if is_index(role) {
                // int64 indices given as u64: the same bytes, once none is negative.
                if bytes.chunks_exact(8).any(|c| c[7] & 0x80 != 0) {
                    return Err(ztensor_format::Error::new(
                        ztensor_format::ErrorKind::SparseIndexOutOfBounds,
                        format!("a negative {role} element"),
                    )
                    .in_object(&e.name)
                    .in_component(role)
                    .into());
                }
                (DType::U64, None)
            } else {
                (dtype, logical_type)
            };
            components.insert(
                (*role).to_owned(),
                ComponentData { dtype, logical_type, bytes: Cow::Owned(bytes) },
            );
        }
        Ok(ObjectData {
            name: e.name.clone(),
            shape: e.shape.clone(),
            format: e.format.clone(),
            attributes: None,
            components,
        })
    }
}

impl<S: ReadAt> TorchFile<S> {
    /// The elements of one tensor view, in C order and little-endian.
    fn read_part(&self, t: &Tensor, dtype: DType) -> ztensor_io::Result<Vec<u8>> {
        let len = t.numel * t.size;
        if len > self.limit {
            return Err(ztensor_format::Error::new(
                ztensor_format::ErrorKind::DecodedTooLarge,
                format!(
                    "{len} bytes ({} elements of shape {:?}), over the {}-byte limit",
                    t.numel, t.shape, self.limit
                ),
            )
            .in_object(&t.name)
            .into());
        }
        let storage = &self.storages[t.storage];
        let digest_failed = |message: String| {
            ztensor_io::Error::from(
                ztensor_format::Error::new(ztensor_format::ErrorKind::DigestMismatch, message)
                    .in_object(&t.name),
            )
        };
        let io_failed = |e: std::io::Error| {
            ztensor_io::Error::io(format!("reading storage {:?}", storage.key), None, e)
        };
        // Offsets were checked at open: the view lies inside its storage, whose bytes lie inside
        // the file (stored) or inflate to exactly its size (deflated).
        let first = t.offset * t.size;
        let size = usize::try_from(t.size).unwrap_or(1);
        // The one buffer of the view's size, asked for fallibly; every path below fills it
        // without a second buffer of that size beside it.
        let mut bytes = ztensor_io::try_with_capacity(len, &format!("tensor {:?}", t.name))
            .map_err(|e| ztensor_io::Error::io("reading", None, e))?;
        let element = |at: u64| first + at * t.size;
        match &storage.deflated {
            None => {
                self.verify(t.storage).map_err(digest_failed)?;
                let read =
                    |at: u64, buf: &mut [u8]| self.source.read_exact_at(storage.offset + at, buf);
                let innermost = t.strides.last().copied().unwrap_or(1);
                if t.contiguous {
                    bytes.resize(usize::try_from(len).unwrap_or(0), 0);
                    read(first, &mut bytes).map_err(io_failed)?;
                } else if t.span * t.size <= 16 << 20 {
                    // A view over a small span: that span once, then its elements.
                    let mut window = vec![0u8; usize::try_from(t.span * t.size).unwrap_or(0)];
                    read(first, &mut window).map_err(io_failed)?;
                    each_offset(&t.shape, &t.strides, t.numel, |at| {
                        let at = usize::try_from(at).unwrap_or(0) * size;
                        bytes.extend_from_slice(&window[at..at + size]);
                        Ok(())
                    })
                    .map_err(io_failed)?;
                } else if t.span == t.numel {
                    // Every element of the span once, reordered (a transposed view): the span is
                    // read into the tensor's buffer and permuted in place.
                    bytes.resize(usize::try_from(len).unwrap_or(0), 0);
                    read(first, &mut bytes).map_err(io_failed)?;
                    permute_in_place(&mut bytes, size, &t.shape, &t.strides).map_err(io_failed)?;
                } else if innermost == 1 && t.shape.last().is_some_and(|&d| d > 1) {
                    // Rows that are contiguous (a slice of a larger tensor): one read per row.
                    let row = t.shape.last().copied().unwrap_or(1);
                    let rows = t.numel / row.max(1);
                    let outer = &t.shape[..t.shape.len() - 1];
                    let outer_strides = &t.strides[..t.strides.len() - 1];
                    let row_len = usize::try_from(row * t.size).unwrap_or(0);
                    each_offset(outer, outer_strides, rows, |at| {
                        let start = bytes.len();
                        bytes.resize(start + row_len, 0);
                        read(element(at), &mut bytes[start..])
                    })
                    .map_err(io_failed)?;
                } else {
                    // Elements strewn over a large storage: read through a small window that
                    // moves with them.
                    let mut window = Window::new(storage.offset + first, t.span * t.size);
                    each_offset(&t.shape, &t.strides, t.numel, |at| {
                        bytes.extend_from_slice(window.get(&self.source, at * t.size, size)?);
                        Ok(())
                    })
                    .map_err(io_failed)?;
                }
            }
            Some(member) => {
                // Inflated once, and kept: every view of it reads from memory.
                let inflated = storage
                    .inflated
                    .get_or_init(|| {
                        member.bytes(&self.source, self.limit).map_err(|e| e.message().to_owned())
                    })
                    .as_ref()
                    .map_err(|message| {
                        if message.contains("CRC-32") {
                            digest_failed(message.clone())
                        } else {
                            io_failed(std::io::Error::other(message.clone()))
                        }
                    })?;
                each_offset(&t.shape, &t.strides, t.numel, |at| {
                    let at = usize::try_from(element(at)).unwrap_or(usize::MAX);
                    let part = inflated.get(at..at.saturating_add(size)).ok_or_else(|| {
                        std::io::Error::other("an element past its inflated storage")
                    })?;
                    bytes.extend_from_slice(part);
                    Ok(())
                })
                .map_err(io_failed)?;
            }
        }
        if self.big_endian {
            ztensor_format::data::swap_bytes(
                &mut bytes,
                usize::try_from(dtype.size()).unwrap_or(1),
            );
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests;
