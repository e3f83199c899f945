//! The writer, byte-identical to the real writer for the same tensors in the same order, and a
//! working append.

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::Path;

use ztensor_io::{AtomicFile, FileSource};

use crate::error::{Error, ErrorKind, Result};
use crate::read::{MAGIC, ReadOptions, TbFile};
use crate::schema::{DataType, Metadata, Operation, TensorRef, encode_tables, tensor_id};

/// Writes a TensorBuffers file: the magic, each tensor's bytes back to back as they are added (no
/// padding), then the metadata, its size and the magic.
#[derive(Debug)]
pub struct TbWriter<W: Write> {
    sink: W,
    /// The version, model and operations (the tensors are in `tensors`).
    metadata: Metadata,
    tensors: Tables,
    /// File offset of the next tensor's data.
    end: u64,
}

/// The tensors written, compactly: their names and shapes in one buffer each and a fixed-size
/// entry a tensor (a few dozen bytes, not two allocations and a copy of the name in a set), and
/// their ids (FNV-1a of the name, which the file stores) as the index that finds a name given
/// twice.
#[derive(Debug, Default)]
struct Tables {
    names: String,
    shapes: Vec<u32>,
    entries: Vec<Entry>,
    /// The first entry of each id.
    by_id: HashMap<u64, usize>,
    /// Later entries whose names share an id with an earlier, different, name.
    collided: HashMap<u64, Vec<usize>>,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    id: u64,
    /// Where the name starts in `names`, and its length.
    name: (usize, usize),
    /// Where the shape starts in `shapes`, and its rank.
    shape: (usize, usize),
    data_type: DataType,
    data_offset: u32,
    data_size: u32,
}

impl Tables {
    fn name(&self, e: &Entry) -> &str {
        &self.names[e.name.0..][..e.name.1]
    }

    fn contains(&self, name: &str) -> bool {
        let id = tensor_id(name);
        let Some(&first) = self.by_id.get(&id) else { return false };
        let more = self.collided.get(&id).into_iter().flatten();
        std::iter::once(&first).chain(more).any(|&i| self.name(&self.entries[i]) == name)
    }

    fn push(&mut self, name: &str, id: u64, shape: &[u32], table: (DataType, u32, u32)) {
        let at = self.entries.len();
        let (data_type, data_offset, data_size) = table;
        let entry = Entry {
            id,
            name: (self.names.len(), name.len()),
            shape: (self.shapes.len(), shape.len()),
            data_type,
            data_offset,
            data_size,
        };
        self.names.push_str(name);
        self.shapes.extend_from_slice(shape);
        self.entries.push(entry);
        // Indexed by the id of the name (what the entry stores may be another, in a file
        // resumed).
        let key = tensor_id(name);
        match self.by_id.entry(key) {
            std::collections::hash_map::Entry::Occupied(_) => {
                self.collided.entry(key).or_default().push(at);
            }
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(at);
            }
        }
    }

    /// The entries as the encoder takes them, in order.
    fn tables(&self) -> impl Iterator<Item = TensorRef<'_>> {
        self.entries.iter().map(|e| TensorRef {
            name: self.name(e),
            id: e.id,
            shape: &self.shapes[e.shape.0..][..e.shape.1],
            data_type: e.data_type,
            data_offset: e.data_offset,
            data_size: e.data_size,
        })
    }

    /// About the bytes of the encoded tables: each name and shape with their length words
    /// and padding, a table and its vtable's share, and its place in the vector.
    fn encoded_len(&self) -> usize {
        let each = 4 + 3 + 4 + 40 + 4;
        self.names.len() + 4 * self.shapes.len() + self.entries.len() * each + 1024
    }
}

/// What [`TbWriter::add_from`] hands its `fill`: give it the tensor's bytes, piece by piece.
pub type Pieces<'a> = dyn FnMut(&[u8]) -> Result<()> + 'a;

impl<W: Write> TbWriter<W> {
    /// Starts a file on `sink`.
    ///
    /// # Errors
    /// I/O errors.
    pub fn new(mut sink: W) -> Result<TbWriter<W>> {
        sink.write_all(&MAGIC).map_err(|e| Error::io("writing the magic", e))?;
        Ok(TbWriter { sink, metadata: Metadata::default(), tensors: Tables::default(), end: 4 })
    }

    /// Continues a file whose first `end` bytes (magic and data of `metadata`'s tensors) are
    /// already on `sink`.
    fn resume(sink: W, mut metadata: Metadata, end: u64) -> TbWriter<W> {
        let mut tensors = Tables::default();
        for t in std::mem::take(&mut metadata.tensors) {
            tensors.push(&t.name, t.id, &t.shape, (t.data_type, t.data_offset, t.data_size));
        }
        TbWriter { sink, metadata, tensors, end }
    }

    /// Sets the optional model name (real writers never set it).
    pub fn set_model(&mut self, model: Option<String>) {
        self.metadata.model = model;
    }

    /// Sets the version string (default `"1.0.0"`, the only one real writers use).
    pub fn set_version(&mut self, version: String) {
        self.metadata.version = version;
    }

    /// Sets the operations carried in the metadata (`None` omits the field, as files from before
    /// it existed did).
    pub fn set_operations(&mut self, operations: Option<Vec<Operation>>) {
        self.metadata.operations = operations;
    }

    /// Adds a tensor: its little-endian bytes are written now.
    ///
    /// # Errors
    /// [`ErrorKind::DuplicateName`]; [`ErrorKind::SizeMismatch`] when `data` is not
    /// product(shape) elements; [`ErrorKind::Unrepresentable`] for a dimension, size or offset
    /// beyond u32 (the format's field widths) instead of truncating; I/O errors.
    pub fn add(
        &mut self,
        name: &str,
        data_type: DataType,
        shape: &[u64],
        data: &[u8],
    ) -> Result<()> {
        // Checked before anything is written, as a whole buffer allows.
        let expected = shape.iter().try_fold(data_type.size(), |acc, &d| acc.checked_mul(d));
        if expected != Some(data.len() as u64) && !self.tensors.contains(name) {
            return Err(Error::new(
                ErrorKind::SizeMismatch,
                "data length disagrees with the shape and type",
            )
            .in_object(name));
        }
        self.add_from(name, data_type, shape, &mut |write| write(data))
    }

    /// Adds a tensor whose little-endian bytes `fill` hands over in pieces, in order, to the
    /// function it is given: a tensor of any size passes through in pieces. Everything the
    /// format can refuse is checked before the first byte; a `fill` that fails, or gives
    /// another length than the shape says, leaves the writer's output unusable (write through
    /// a temporary file, as [`create`] does).
    ///
    /// # Errors
    /// As [`TbWriter::add`], and `fill`'s errors.
    pub fn add_from(
        &mut self,
        name: &str,
        data_type: DataType,
        shape: &[u64],
        fill: &mut dyn FnMut(&mut Pieces<'_>) -> Result<()>,
    ) -> Result<()> {
        if self.tensors.contains(name) {
            return Err(Error::new(
                ErrorKind::DuplicateName,
                "a tensor of this name was already written",
            )
            .in_object(name));
        }
        let too_big = |what: &str| {
            Error::new(
                ErrorKind::Unrepresentable,
                format!("{what} does not fit in the format's u32 fields"),
            )
            .in_object(name)
        };
        let shape32 = shape
            .iter()
            .map(|&d| u32::try_from(d).map_err(|_| too_big("a dimension")))
            .collect::<Result<Vec<u32>>>()?;
        let mismatch = || {
            Error::new(ErrorKind::SizeMismatch, "data length disagrees with the shape and type")
                .in_object(name)
        };
        let len = shape
            .iter()
            .try_fold(data_type.size(), |acc, &d| acc.checked_mul(d))
            .ok_or_else(mismatch)?;
        let data_size = u32::try_from(len).map_err(|_| too_big("the data size"))?;
        let data_offset = u32::try_from(self.end).map_err(|_| too_big("the data offset"))?;
        // The end of this tensor must stay addressable too, or the next offset would be lost.
        let end = self.end + len;
        if end > u64::from(u32::MAX) {
            return Err(too_big("the end of the data"));
        }
        let mut written = 0u64;
        let sink = &mut self.sink;
        fill(&mut |piece| {
            written += piece.len() as u64;
            if written > len {
                return Err(mismatch());
            }
            sink.write_all(piece).map_err(|e| Error::io("writing tensor data", e))
        })?;
        if written != len {
            return Err(mismatch());
        }
        self.end = end;
        self.tensors.push(name, tensor_id(name), &shape32, (data_type, data_offset, data_size));
        Ok(())
    }

    /// Writes the metadata, its size and the closing magic; returns the sink and the file length.
    ///
    /// # Errors
    /// I/O errors.
    pub fn finish(mut self) -> Result<(W, u64)> {
        // The index of names is not needed to encode: gone before the buffer is built.
        let mut tensors = std::mem::take(&mut self.tensors);
        drop((std::mem::take(&mut tensors.by_id), std::mem::take(&mut tensors.collided)));
        let count = tensors.entries.len();
        let fbb = encode_tables(&self.metadata, count, tensors.tables(), tensors.encoded_len());
        drop(tensors);
        let fb = fbb.finished_data();
        let m = u32::try_from(fb.len())
            .map_err(|_| Error::new(ErrorKind::Unrepresentable, "metadata larger than 4 GiB"))?;
        let io = |e| Error::io("writing the metadata", e);
        self.sink.write_all(fb).map_err(io)?;
        self.sink.write_all(&m.to_le_bytes()).map_err(io)?;
        self.sink.write_all(&MAGIC).map_err(io)?;
        self.sink.flush().map_err(io)?;
        Ok((self.sink, self.end + fb.len() as u64 + 8))
    }
}

/// Writes a TensorBuffers file at a path, published atomically (temporary file and rename).
///
/// # Errors
/// I/O errors.
pub fn create(path: impl AsRef<Path>) -> Result<TbWriter<AtomicFile>> {
    let file = AtomicFile::create(path).map_err(io_error)?;
    TbWriter::new(file)
}

fn io_error(e: ztensor_io::Error) -> Error {
    Error::from(e)
}

impl TbWriter<AtomicFile> {
    /// Finishes and renames the file into place.
    ///
    /// # Errors
    /// I/O errors; the target is then untouched.
    pub fn persist(self) -> Result<u64> {
        let (file, len) = self.finish()?;
        file.persist().map_err(io_error)?;
        Ok(len)
    }
}

/// Adds tensors to an existing file. The result is one container: the old data, the new data, and
/// one metadata listing both (old offsets unchanged). The file is rebuilt beside the original and
/// renamed over it, so the original is never truncated under a reader that has it mapped. The
/// file's write lock is held from before it is read until the rename, so a concurrent writer
/// cannot slip in between and be lost.
///
/// # Errors
/// Any rule the existing file breaks, the errors of `add`, and I/O errors; the file is then
/// untouched.
pub fn append(
    path: impl AsRef<Path>,
    options: &ReadOptions,
    add: impl FnOnce(&mut TbWriter<AtomicFile>) -> Result<()>,
) -> Result<u64> {
    let path = path.as_ref();
    let _lock = ztensor_io::WriteLock::acquire(path).map_err(io_error)?;
    let file = ztensor_io::open_input(path).map_err(io_error)?;
    let source = FileSource::new(file).map_err(|e| Error::io("cannot stat", e))?;
    let reader = TbFile::new(source, options)?;
    let end = reader.metadata_offset();
    let mut out = AtomicFile::create(path).map_err(io_error)?;
    // Copy magic + data region.
    let mut copied = 0u64;
    let mut chunk = vec![0u8; 1 << 20];
    while copied < end {
        let n = usize::try_from((end - copied).min(chunk.len() as u64)).unwrap_or(chunk.len());
        ztensor_io::ReadAt::read_exact_at(reader.source(), copied, &mut chunk[..n])
            .map_err(|e| Error::io("copying data", e))?;
        out.write_all(&chunk[..n]).map_err(|e: io::Error| Error::io("copying data", e))?;
        copied += n as u64;
    }
    let mut writer = TbWriter::resume(out, reader.metadata().clone(), end);
    add(&mut writer)?;
    writer.persist()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tensor_given_in_pieces_is_the_tensor_given_whole() {
        let data: Vec<u8> = (0..4000u32).flat_map(|v| (v as f32).to_le_bytes()).collect();
        let mut whole = TbWriter::new(Vec::new()).unwrap();
        whole.add("w", DataType::Float32, &[40, 100], &data).unwrap();
        let mut pieces = TbWriter::new(Vec::new()).unwrap();
        pieces
            .add_from("w", DataType::Float32, &[40, 100], &mut |write| {
                data.chunks(333).try_for_each(&mut *write)
            })
            .unwrap();
        assert_eq!(whole.finish().unwrap().0, pieces.finish().unwrap().0);
        // Too few or too many bytes: refused, the tensor not listed.
        for give in [&data[..15996], &[data.as_slice(), &[0; 4]].concat()[..]] {
            let mut w = TbWriter::new(Vec::new()).unwrap();
            let e = w
                .add_from("w", DataType::Float32, &[40, 100], &mut |write| write(give))
                .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::SizeMismatch);
            assert!(w.tensors.entries.is_empty());
        }
    }

    #[test]
    fn offsets_beyond_u32_are_refused_not_truncated() {
        // A writer 2 bytes short of 4 GiB (as if that much data were already written).
        let mut w = TbWriter::resume(Vec::new(), Metadata::default(), u64::from(u32::MAX) - 2);
        let err = w.add("x", DataType::UInt8, &[4], &[1, 2, 3, 4]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unrepresentable);
        w.add("y", DataType::UInt8, &[2], &[1, 2]).unwrap();
        let err = w.add("z", DataType::UInt8, &[1], &[1]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unrepresentable);
    }
}
