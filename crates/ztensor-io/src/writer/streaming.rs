//! The streaming protocol: blobs placed by the caller, written in order or at reserved
//! offsets by any thread.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use ztensor_format::{
    Component, DType, Encoding, Error as FormatError, ErrorKind as Rule, Format, LogicalType,
    Object, Version,
};

use ztensor_source::{Error, Result};

use super::{SpecInfo, Writer};

/// Where the next bytes of a blob go in a file being written: any thread may write them, at
/// their offset, with [`BlobSlot::write`]. Given by [`BlobWriter::slot`].
#[derive(Debug, Clone)]
pub struct BlobSlot {
    pub(super) offset: u64,
    pub(super) len: u64,
    pub(super) file: Arc<File>,
    pub(super) path: Option<Arc<Path>>,
}

impl BlobSlot {
    /// The file offset of the slot.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The slot's length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the slot is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Writes the slot's bytes at its offset (a positioned write: no shared file position).
    ///
    /// # Errors
    /// `bytes` not of the slot's length (`invalid_input`), and I/O errors.
    pub fn write(&self, bytes: &[u8]) -> Result<()> {
        if bytes.len() as u64 != self.len {
            return Err(Error::from(
                FormatError::new(Rule::InvalidInput, "bytes of another length than the slot")
                    .expected_found(self.len, bytes.len()),
            ));
        }
        write_all_at(&self.file, bytes, self.offset).map_err(|e| {
            Error::io("writing a component into", self.path.as_deref().map(Path::to_owned), e)
        })?;
        ztensor_source::start_writeback(&self.file, self.offset, self.len);
        Ok(())
    }
}

#[cfg(unix)]
pub(super) fn write_all_at(file: &File, bytes: &[u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, bytes, offset)
}

#[cfg(not(unix))]
pub(super) fn write_all_at(_: &File, _: &[u8], _: u64) -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}

/// A blob being written, from [`Streaming::blob`]: its bytes go in order, through
/// [`BlobWriter::write`] or, when the writer is a file, a reserved [`BlobSlot`] that any thread
/// fills; [`BlobWriter::finish`] gives the [`PlacedBlob`] a component is described from. While it
/// lives it holds the writer, so nothing else can be written in the middle of the blob.
#[derive(Debug)]
pub struct BlobWriter<'w, W: Write> {
    pub(super) writer: &'w mut Writer<W>,
    pub(super) offset: u64,
}

impl<W: Write> BlobWriter<'_, W> {
    /// Where the blob starts in the file.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Appends `bytes` to the blob.
    ///
    /// # Errors
    /// I/O errors.
    pub fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.writer.blob_bytes(bytes)
    }

    /// Reserves the next `len` bytes of the blob for a positioned write by any thread, when the
    /// writer's sink is a file that allows it (a [`FileWriter`](super::FileWriter)'s, on Unix); `None` otherwise
    /// (write the bytes with [`BlobWriter::write`]). Exactly `len` bytes must be written to the
    /// slot before the writer finishes.
    ///
    /// # Errors
    /// I/O errors.
    pub fn slot(&mut self, len: u64) -> Result<Option<BlobSlot>> {
        self.writer.blob_slot(len)
    }

    /// Ends the blob: where it lies, for the component that describes it.
    pub fn finish(self) -> PlacedBlob {
        PlacedBlob {
            offset: self.offset,
            len: self.writer.written - self.offset,
            version: self.writer.version(),
        }
    }
}

/// A finished blob, from [`BlobWriter::finish`]: where it lies, to build the component that
/// describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlacedBlob {
    pub(super) offset: u64,
    pub(super) len: u64,
    pub(super) version: Version,
}

impl PlacedBlob {
    /// Where the blob starts in the file.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Its length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A raw component of `dtype` stored in this blob.
    pub fn raw(self, dtype: DType) -> Component {
        Component::new(dtype, self.offset, self.len)
    }

    /// A zstd component of `dtype` stored in this blob, decoding to `decoded_len` bytes
    /// (recorded as `uncompressed_length` in 1.2, the one version that defines it).
    pub fn zstd(self, dtype: DType, decoded_len: u64) -> Component {
        let mut component = Component::new(dtype, self.offset, self.len);
        component.encoding = Encoding::Zstd;
        if self.version == Version::V1_2 {
            component.uncompressed_length = Some(decoded_len);
        }
        component
    }
}

/// The streaming protocol of a [`Writer`], for code that places blobs itself (the parallel
/// engine): check an object, write its blob through a [`BlobWriter`], describe the component
/// from the [`PlacedBlob`], then add the object. Placement is exactly what the whole-component
/// methods give.
pub trait Streaming {
    /// The writer's sink.
    type Sink: Write;

    /// Checks that a dense object with one `data` component of these types and decoded
    /// length can be written in this file's version: what [`Writer::add_object`] checks
    /// before it writes.
    ///
    /// # Errors
    /// As [`Writer::add_object`].
    fn check_dense(
        &self,
        name: &str,
        shape: &[u64],
        dtype: DType,
        logical_type: Option<&LogicalType>,
        len: u64,
    ) -> Result<()>;

    /// Pads to the next aligned offset and begins a blob there.
    ///
    /// # Errors
    /// I/O errors.
    fn blob(&mut self) -> Result<BlobWriter<'_, Self::Sink>>;

    /// Adds an object whose components were written as blobs; [`Writer::finish`] validates
    /// it with the rest of the manifest.
    ///
    /// # Errors
    /// `duplicate_name`.
    fn push_object(&mut self, object: Object) -> Result<()>;
}

impl<W: Write> Streaming for Writer<W> {
    type Sink = W;

    fn check_dense(
        &self,
        name: &str,
        shape: &[u64],
        dtype: DType,
        logical_type: Option<&LogicalType>,
        len: u64,
    ) -> Result<()> {
        let info = SpecInfo { role: crate::role::DATA, dtype, logical_type, len };
        self.check_object(name, shape, &Format::Dense, &[info])
    }

    fn blob(&mut self) -> Result<BlobWriter<'_, W>> {
        let offset = self.begin_blob()?;
        Ok(BlobWriter { writer: self, offset })
    }

    fn push_object(&mut self, object: Object) -> Result<()> {
        self.push_streamed(object)
    }
}
