//! The writer: every version, one component at a time, published atomically. `options`: what
//! to write and how; `file`: a writer to a path, published atomically; `streaming`: the protocol
//! for code that places blobs itself.

mod file;
pub(crate) mod options;
mod sparse;
mod streaming;

pub use self::file::FileWriter;
pub(crate) use self::file::delegate_writing;
pub(crate) use self::options::SpecInfo;
pub use self::options::{ComponentSpec, Compression, Coo, Csr, StoredComponent, WriteOptions};
pub use self::streaming::{BlobSlot, BlobWriter, PlacedBlob, Streaming};
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use ztensor_format::{
    Attributes, Component, DType, Encoding, Error as FormatError, ErrorKind as Rule, Format,
    LogicalType, Manifest, ManifestBuilder, MxType, Object, OffsetAllocator, Version,
    element_count,
};

use crate::codec::{Hasher, zstd_encode};
use ztensor_source::ReadAt;
use ztensor_source::{Error, Result};

/// Writes a zTensor file of a chosen version to any [`Write`] sink.
///
/// Each component is encoded, digested and written as soon as it is added, so memory does not
/// grow with the file. Blobs are placed by [`OffsetAllocator`], in the order they are added, with
/// zero padding. Each object is checked against every rule a reader applies when it is added
/// (see [`ManifestBuilder`]) and kept as its manifest encoding; [`Writer::finish`] writes the
/// manifest.
#[derive(Debug)]
pub struct Writer<W: Write> {
    sink: W,
    /// The objects so far, each checked and kept encoded as it was added.
    manifest: ManifestBuilder,
    alloc: OffsetAllocator,
    written: u64,
    /// For a file sink ([`FileWriter`]): blob bytes may be written at their offsets by other
    /// threads ([`Writer::blob_slot`]) while the sink moves past them.
    positioned: Option<Positioned<W>>,
    /// The file written, when there is one: I/O errors name it.
    path: Option<Arc<Path>>,
    /// What has been added so far.
    tally: Tally,
    /// What was copied from other files' blobs that several components share, so that each
    /// is written once (see [`crate::copy`]).
    pub(crate) copied: crate::sharing::Memo,
}

/// What a [`Writer`] has been given so far, counted as each object is added: what a summary of
/// the write reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Tally {
    /// Objects added.
    pub objects: u64,
    /// Their components.
    pub components: u64,
    /// Of those, the ones stored raw.
    pub raw_components: u64,
    /// Their stored bytes (blobs, not counting padding or the manifest); a blob that several
    /// components share, copied once, counts once.
    pub stored: u64,
    /// Their decoded bytes, where known without decoding ([`ztensor_format::decoded_len`]).
    pub decoded: u64,
    /// Components whose decoded length is not known without decoding (zstd components of
    /// versions without `uncompressed_length`, other than dense data).
    pub decoded_unknown: u64,
}

/// A second handle on a file sink, and how to move the sink past bytes written through it. The
/// sink is a file this writer created: bytes skipped and never written read as zeros.
struct Positioned<W> {
    file: Arc<File>,
    skip: fn(&mut W, u64) -> std::io::Result<()>,
}

impl<W> std::fmt::Debug for Positioned<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Positioned").field("file", &self.file).finish_non_exhaustive()
    }
}

const ZEROS: [u8; 64] = [0; 64];

impl<W: Write> Writer<W> {
    /// The written file's path, for error messages.
    fn path_buf(&self) -> Option<std::path::PathBuf> {
        self.path.as_deref().map(Path::to_owned)
    }

    /// An I/O error while doing `what` to the written file.
    fn io_error(&self, what: &str, e: std::io::Error) -> Error {
        Error::io(what, self.path_buf(), e)
    }

    /// Starts a file of `version` on `sink`, writing the header.
    ///
    /// # Errors
    /// I/O errors.
    pub fn new(mut sink: W, version: Version) -> Result<Writer<W>> {
        let magic = version.container().magic();
        sink.write_all(&magic).map_err(|e| Error::io("writing the header", None, e))?;
        Ok(Writer {
            sink,
            manifest: ManifestBuilder::new(version),
            alloc: OffsetAllocator::new(),
            written: magic.len() as u64,
            positioned: None,
            path: None,
            tally: Tally::default(),
            copied: crate::sharing::Memo::default(),
        })
    }

    /// Continues a file whose first `written` bytes (header and blobs, ending with the data of
    /// the manifest `base`) are already on `sink`: used by append.
    ///
    /// # Errors
    /// When `base` breaks a rule (see [`ManifestBuilder::resume`]).
    pub(crate) fn resume(sink: W, base: Manifest, written: u64) -> Result<Writer<W>> {
        Ok(Writer {
            sink,
            manifest: ManifestBuilder::resume(base, written)?,
            alloc: OffsetAllocator::starting_at(written),
            written,
            positioned: None,
            path: None,
            tally: Tally::default(),
            copied: crate::sharing::Memo::default(),
        })
    }

    /// The version being written.
    pub fn version(&self) -> Version {
        self.manifest.version()
    }

    /// The manifest so far: its objects by name and index, or decoded back whole.
    pub fn manifest(&self) -> &ManifestBuilder {
        &self.manifest
    }

    /// Sets the file attributes (a map; v1.x only).
    ///
    /// # Errors
    /// `unrepresentable` for v0.1.
    pub fn set_attributes(&mut self, attributes: Attributes) -> Result<()> {
        if self.version() == Version::V0_1 {
            return Err(unrepresentable("v0.1 has no file attributes")
                .refusing(ztensor_format::Refused::FileAttributes)
                .into());
        }
        self.manifest.set_attributes(Some(attributes));
        Ok(())
    }

    /// Adds a dense object with one `data` component.
    ///
    /// # Errors
    /// `dense_size_mismatch` when `data` does not hold `product(shape)` elements, and as
    /// [`Writer::add_object`].
    pub fn add_dense(
        &mut self,
        name: &str,
        shape: &[u64],
        dtype: DType,
        data: &[u8],
        options: &WriteOptions,
    ) -> Result<()> {
        let spec = ComponentSpec { role: "data", dtype, logical_type: None, data };
        self.add_object(name, shape, Format::Dense, None, &[spec], options)
    }

    /// Adds an object of any format: each component is encoded, digested and written now.
    ///
    /// # Errors
    /// `duplicate_name`; `unrepresentable` for what the version cannot express (in v0.1 anything
    /// but dense objects and the sparse helpers, logical types, object attributes with keys v0.1
    /// defines; in v1.1 logical types it has no dtype spelling for); `dense_size_mismatch` and
    /// `component_length_not_multiple` for data of the wrong size; I/O errors.
    pub fn add_object(
        &mut self,
        name: &str,
        shape: &[u64],
        format: Format,
        attributes: Option<Attributes>,
        components: &[ComponentSpec<'_>],
        options: &WriteOptions,
    ) -> Result<()> {
        let infos: Vec<SpecInfo<'_>> = components
            .iter()
            .map(|c| SpecInfo {
                role: c.role,
                dtype: c.dtype,
                logical_type: c.logical_type,
                len: c.data.len() as u64,
            })
            .collect();
        self.check_object(name, shape, &format, &infos)?;
        let mut object = Object::new(name, shape.to_vec(), format);
        object.attributes = attributes.map(Box::new);
        for spec in components {
            let component =
                self.write_component(spec.dtype, spec.logical_type.cloned(), spec.data, options)?;
            object.components.insert(spec.role.to_owned(), component);
        }
        self.push(object)
    }

    /// Checks that an object with components of these types and decoded lengths can be written
    /// in this file's version: the name is new, the version can express it, and the sizes agree
    /// with the shape. [`Writer::add_object`] runs exactly these checks; streaming writers run
    /// them before they start.
    ///
    /// # Errors
    /// As [`Writer::add_object`].
    pub(crate) fn check_object(
        &self,
        name: &str,
        shape: &[u64],
        format: &Format,
        components: &[SpecInfo<'_>],
    ) -> Result<()> {
        self.check_name(name)?;
        let version = self.version();
        if version == Version::V0_1
            && (*format != Format::Dense || components.len() != 1 || components[0].role != "data")
        {
            return Err(unrepresentable(
                "v0.1 stores dense tensors with one `data` blob (use add_csr / add_coo for sparse)",
            )
            .in_object(name)
            .into());
        }
        let count = element_count(shape)
            .ok_or_else(|| Error::broken(Rule::ShapeOverflow, "shape overflows"))?;
        for spec in components {
            if let Some(t) = spec.logical_type {
                check_logical(version, t, spec.dtype)
                    .map_err(|e| e.in_object(name).in_component(spec.role))?;
            }
            // A microscaling type in its packed form (zTensor 2's FP4 and FP6, fewer bytes
            // than elements): zTensor 1.x holds unknown logical types one storage element an
            // element, so it has no form for these bytes.
            if let Some(mx) = spec.logical_type.and_then(MxType::of)
                && *format == Format::Dense
                && spec.role == "data"
                && mx.bits() < 8
                && spec.len != count
                && Some(spec.len) == mx.stored_len(count)
            {
                return Err(FormatError::new(
                    Rule::Unrepresentable,
                    format!(
                        "packed {} ({}) has no zTensor {version} form (an unknown logical type is \
                         one byte an element there): write zTensor 2 (`--to 2`)",
                        mx.name(),
                        mx.describe()
                    ),
                )
                .refusing(ztensor_format::Refused::Dtype)
                .in_object(name)
                .into());
            }
            let size = spec.dtype.size() * spec.logical_type.map_or(1, LogicalType::ratio);
            if !(spec.len).is_multiple_of(size) {
                return Err(FormatError::new(
                    Rule::ComponentLengthNotMultiple,
                    "data is not a whole number of elements",
                )
                .in_object(name)
                .in_component(spec.role)
                .into());
            }
            if *format == Format::Dense
                && spec.role == "data"
                && Some(spec.len) != count.checked_mul(size)
            {
                return Err(FormatError::new(
                    Rule::DenseSizeMismatch,
                    "data size disagrees with the shape",
                )
                .in_object(name)
                .expected_found(count.saturating_mul(size), spec.len)
                .into());
            }
        }
        Ok(())
    }

    /// Adds an object whose components are copied as stored (no decoding or re-encoding).
    ///
    /// # Errors
    /// As [`Writer::add_object`]; `invalid_input` when a component's length differs from its
    /// bytes.
    pub fn add_stored(&mut self, object: Object, components: &[StoredComponent<'_>]) -> Result<()> {
        for c in components {
            if c.component.length != c.bytes.len() as u64 {
                return Err(Error::broken(
                    Rule::InvalidInput,
                    "stored component length differs from its bytes",
                ));
            }
        }
        let placed: Vec<(&str, Component, Blob<'_>)> = components
            .iter()
            .map(|c| (c.role, c.component.clone(), Blob::Bytes(c.bytes)))
            .collect();
        self.add_placed(object, &placed).map(drop)
    }

    /// Adds an object whose components are stored bytes to write, blobs this writer already
    /// holds, or the blob of an earlier component of the same object ([`Blob`]); each
    /// component's offset is set to where its blob lies, its length must be that blob's.
    /// Returns the offsets, in the order given.
    ///
    /// # Errors
    /// As [`Writer::add_stored`].
    pub(crate) fn add_placed(
        &mut self,
        mut object: Object,
        components: &[(&str, Component, Blob<'_>)],
    ) -> Result<Vec<u64>> {
        // The object as it will be, its blobs where the allocator will put them, checked
        // (its name included) before any byte is written: a refused object leaves nothing in
        // the file.
        object.components.clear();
        let mut alloc = self.alloc.clone();
        let mut end = self.written;
        let mut offsets = Vec::with_capacity(components.len());
        for (role, c, blob) in components {
            let offset = match *blob {
                Blob::Bytes(_) | Blob::Read { .. } => alloc.reserve(c.length)?,
                Blob::At(offset) => offset,
                Blob::SameAs(k) => *offsets.get(k).ok_or_else(|| {
                    Error::broken(Rule::InvalidInput, "a component's blob is not an earlier one")
                })?,
            };
            let mut component = c.clone();
            component.offset = offset;
            end = end.max(offset.saturating_add(component.length));
            object.components.insert((*role).to_owned(), component);
            offsets.push(offset);
        }
        self.manifest.check(&object, end)?;
        for (_, c, blob) in components {
            // At the offset reserved above: the allocator places blobs in order.
            match *blob {
                Blob::Bytes(bytes) => {
                    self.write_blob(bytes)?;
                }
                Blob::Read { source, offset } => {
                    self.write_blob_from(source, offset, c.length)?;
                }
                Blob::At(_) | Blob::SameAs(_) => {}
            }
        }
        self.push(object)?;
        // What was written: a blob already in the file is not stored again.
        let reused = components
            .iter()
            .filter(|(_, _, blob)| matches!(blob, Blob::At(_) | Blob::SameAs(_)))
            .map(|(_, c, _)| c.length)
            .fold(0, u64::saturating_add);
        self.tally.stored = self.tally.stored.saturating_sub(reused);
        Ok(offsets)
    }

    /// Low-level streaming: starts a blob at the next aligned offset (writing the padding) and
    /// returns its offset. Write its bytes with [`Writer::blob_bytes`], then describe it in an
    /// object given to [`Writer::push_object`]. Placing blobs this way gives the same bytes as
    /// the whole-component methods.
    ///
    /// # Errors
    /// I/O errors.
    pub(crate) fn begin_blob(&mut self) -> Result<u64> {
        let offset = self.alloc.start()?;
        self.pad_to(offset)?;
        Ok(offset)
    }

    /// Moves the sink from where it is written to `offset` (a blob's aligned start): zeros
    /// written, or, into a file whose blobs are written in place, a skip (a new file reads as
    /// zeros where nothing was written, so the writing thread makes no system call between
    /// the slots that workers fill).
    fn pad_to(&mut self, offset: u64) -> Result<()> {
        let mut pad = offset - self.written;
        if let Some(positioned) = &self.positioned {
            (positioned.skip)(&mut self.sink, pad)
                .map_err(|e| self.io_error("writing padding into", e))?;
            pad = 0;
        }
        while pad > 0 {
            let n = pad.min(64);
            self.sink
                .write_all(&ZEROS[..n as usize])
                .map_err(|e| self.io_error("writing padding into", e))?;
            pad -= n;
        }
        self.written = offset;
        Ok(())
    }

    /// Low-level streaming: appends bytes to the blob begun by [`Writer::begin_blob`].
    ///
    /// # Errors
    /// I/O errors.
    pub(crate) fn blob_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        self.alloc.extend(bytes.len() as u64)?;
        self.sink
            .write_all(bytes)
            .map_err(|e| Error::io("writing a component into", self.path_buf(), e))?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// Low-level streaming: how many bytes were written since `offset` (the start of the blob
    /// being written).
    pub(crate) fn written_since(&self, offset: u64) -> u64 {
        self.written - offset
    }

    /// Low-level streaming: reserves the next `len` bytes of the blob begun by
    /// [`Writer::begin_blob`] for a positioned write by any thread, when the sink is a file that
    /// allows it (a [`FileWriter`]'s, on Unix); `None` otherwise (write the bytes with
    /// [`Writer::blob_bytes`]). The caller writes exactly `len` bytes to the slot before the
    /// writer finishes; placement is the same as [`Writer::blob_bytes`] gives.
    ///
    /// # Errors
    /// I/O errors.
    pub(crate) fn blob_slot(&mut self, len: u64) -> Result<Option<BlobSlot>> {
        let Some(positioned) = &self.positioned else { return Ok(None) };
        self.alloc.extend(len)?;
        (positioned.skip)(&mut self.sink, len)
            .map_err(|e| Error::io("writing a component into", self.path_buf(), e))?;
        let slot = BlobSlot {
            offset: self.written,
            len,
            file: Arc::clone(&positioned.file),
            path: self.path.clone(),
        };
        self.written += len;
        Ok(Some(slot))
    }

    /// Low-level streaming: adds an object whose components were written with
    /// [`Writer::begin_blob`] and [`Writer::blob_bytes`]. [`Writer::finish`] validates it with
    /// the rest of the manifest.
    ///
    /// # Errors
    /// `duplicate_name`.
    pub(crate) fn push_streamed(&mut self, object: Object) -> Result<()> {
        self.check_name(&object.name)?;
        self.push(object)
    }

    pub(crate) fn check_name(&self, name: &str) -> Result<()> {
        if self.manifest.contains(name) {
            return Err(FormatError::new(
                Rule::DuplicateName,
                "an object of this name was already written",
            )
            .in_object(name)
            .into());
        }
        Ok(())
    }

    /// Checks `object` against every rule a reader applies, with the data area as it stands,
    /// and adds it to the manifest.
    fn push(&mut self, object: Object) -> Result<()> {
        self.manifest.push(&object, self.written)?;
        let t = &mut self.tally;
        t.objects += 1;
        for (role, c) in &object.components {
            t.components += 1;
            t.raw_components += u64::from(c.encoding == Encoding::Raw);
            t.stored = t.stored.saturating_add(c.length);
            match ztensor_format::decoded_len(&object, role, c) {
                Some(n) => t.decoded = t.decoded.saturating_add(n),
                None => t.decoded_unknown += 1,
            }
        }
        Ok(())
    }

    /// What has been added so far: objects, components, stored and decoded bytes.
    pub fn tally(&self) -> Tally {
        self.tally
    }

    fn write_component(
        &mut self,
        dtype: DType,
        logical_type: Option<LogicalType>,
        data: &[u8],
        options: &WriteOptions,
    ) -> Result<Component> {
        let (stored, encoding, uncompressed) = match options.compression {
            Compression::Raw => (std::borrow::Cow::Borrowed(data), Encoding::Raw, None),
            Compression::Zstd(level) => {
                let z = match options.chunk_size {
                    Some(chunk) => crate::codec::zstd_encode_chunked(data, level, chunk),
                    None => zstd_encode(data, level),
                }
                .map_err(|e| Error::io("compressing", None, e))?;
                if options.stores_raw(data.len() as u64, z.len() as u64) {
                    (std::borrow::Cow::Borrowed(data), Encoding::Raw, None)
                } else {
                    (std::borrow::Cow::Owned(z), Encoding::Zstd, Some(data.len() as u64))
                }
            }
        };
        let digest = match &options.digest {
            None => None,
            Some(algorithm) => {
                let mut h = Hasher::new(algorithm).ok_or_else(|| {
                    Error::broken(
                        Rule::InvalidInput,
                        format!("cannot compute digest {}", algorithm.name()),
                    )
                })?;
                h.update(&stored);
                Some(h.finish())
            }
        };
        let offset = self.write_blob(&stored)?;
        Ok(self.describe_component(
            dtype,
            logical_type,
            offset,
            stored.len() as u64,
            uncompressed,
            encoding,
            digest,
        ))
    }

    /// The description of a component written at `offset`: what [`Writer::add_object`] records
    /// for data it encoded itself. `decoded_len` is the input length of zstd data.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn describe_component(
        &self,
        dtype: DType,
        logical_type: Option<LogicalType>,
        offset: u64,
        stored_len: u64,
        decoded_len: Option<u64>,
        encoding: Encoding,
        digest: Option<ztensor_format::Digest>,
    ) -> Component {
        let mut component = Component::new(dtype, offset, stored_len);
        component.logical_type = logical_type;
        component.encoding = encoding;
        component.digest = digest;
        // 1.1 does not define `uncompressed_length`; 1.2 requires it on zstd components.
        if self.version() == Version::V1_2 {
            component.uncompressed_length = decoded_len;
        }
        component
    }

    /// Pads to the next aligned offset and writes one blob.
    fn write_blob(&mut self, bytes: &[u8]) -> Result<u64> {
        let offset = self.alloc.reserve(bytes.len() as u64)?;
        let mut pad = offset - self.written;
        while pad > 0 {
            let n = pad.min(64);
            self.sink
                .write_all(&ZEROS[..n as usize])
                .map_err(|e| self.io_error("writing padding into", e))?;
            pad -= n;
        }
        self.sink
            .write_all(bytes)
            .map_err(|e| Error::io("writing a component into", self.path_buf(), e))?;
        self.written = offset + bytes.len() as u64;
        Ok(offset)
    }

    /// Writes `len` bytes of `source` from `offset` as the next blob, a piece at a time
    /// (memory: one piece, whatever the blob's size; none when the source hands out bytes it
    /// holds, see [`ReadAt::read_each_at`]); returns its offset. Into a file, each piece is a
    /// positioned write, and write-back starts every piece's length, so the final sync finds
    /// the blob on its way to the disk. On an error the writer must be discarded (part of the
    /// blob may be written).
    fn write_blob_from(&mut self, source: &dyn ReadAt, offset: u64, len: u64) -> Result<u64> {
        let at = self.alloc.reserve(len)?;
        self.pad_to(at)?;
        let positioned = self.positioned.as_ref().map(|p| (Arc::clone(&p.file), p.skip));
        let piece = len.min(crate::reader::PIECE as u64);
        let mut scratch = ztensor_source::try_zeroed(piece, "a piece of a stored copy")
            .map_err(|e| Error::io("reading a stored copy", None, e))?;
        // Bytes handed on and written so far, and how far write-back was started.
        let (mut done, mut started) = (0u64, 0u64);
        let mut failed_write = None;
        let sink = &mut self.sink;
        let read = source.read_each_at(offset, len, &mut scratch, &mut |bytes| {
            if done + bytes.len() as u64 > len {
                return Err(std::io::Error::other("the source handed on more bytes than asked"));
            }
            let wrote = match &positioned {
                Some((file, _)) => streaming::write_all_at(file, bytes, at + done),
                None => sink.write_all(bytes),
            };
            if let Err(e) = wrote {
                failed_write = Some(e);
                return Err(std::io::Error::other("the write failed"));
            }
            done += bytes.len() as u64;
            if let Some((file, _)) = &positioned
                && (done - started >= piece || done == len)
            {
                ztensor_source::start_writeback(file, at + started, done - started);
                started = done;
            }
            Ok(())
        });
        if let Some(e) = failed_write {
            return Err(Error::io("writing a component into", self.path_buf(), e));
        }
        if let Err(e) = read {
            let from = offset.saturating_add(done);
            return Err(Error::io(format!("reading byte {from} of the source"), None, e));
        }
        if done != len {
            let e = std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("the source handed on {done} bytes, not {len}"),
            );
            return Err(Error::io("reading a stored copy", None, e));
        }
        if let Some((_, skip)) = &positioned {
            skip(&mut self.sink, len)
                .map_err(|e| Error::io("writing a component into", self.path_buf(), e))?;
        }
        self.written = at + len;
        Ok(at)
    }

    /// Writes the manifest and the trailer, and returns the sink and the file length.
    ///
    /// # Errors
    /// What the version cannot express in the file attributes (the file must then be
    /// discarded), and I/O errors.
    pub fn finish(self) -> Result<(W, u64)> {
        let path = self.path_buf();
        let (mut sink, trailer, len) = self.finish_manifest()?;
        let io = |e| Error::io("writing the trailer of", path.clone(), e);
        sink.write_all(&trailer).map_err(io)?;
        sink.flush().map_err(io)?;
        Ok((sink, len))
    }

    /// Validates and writes the manifest, and returns the sink, the trailer still to write, and
    /// the final file length. Append uses it to make the manifest durable before the trailer
    /// that points at it.
    pub(crate) fn finish_manifest(mut self) -> Result<(W, Vec<u8>, u64)> {
        let container = self.version().container();
        let path = self.path_buf();
        // Every object was checked as it was added. The manifest is encoded object by object
        // straight into the sink: the manifest of a million objects never exists whole in
        // memory.
        let sink = &mut self.sink;
        let mut failed = None;
        let encoded = self.manifest.encode_in_blocks(&mut |block| {
            sink.write_all(block).map_err(|e| {
                failed = Some(e);
                FormatError::new(Rule::InvalidInput, "the manifest could not be written")
            })
        });
        let len = match (encoded, failed) {
            (_, Some(e)) => return Err(Error::io("writing the manifest of", path, e)),
            (encoded, None) => encoded?,
        };
        let file_len = self.written + len + container.trailer_len();
        Ok((self.sink, container.encode_trailer(len), file_len))
    }
}

/// Where a component given to [`Writer::add_placed`] lies.
#[derive(Clone, Copy)]
pub(crate) enum Blob<'a> {
    /// Its stored bytes, to be written now.
    Bytes(&'a [u8]),
    /// Its stored bytes, read from `source` at `offset` (as long as the component says) and
    /// written now, a piece at a time.
    Read { source: &'a dyn ReadAt, offset: u64 },
    /// A blob of this length already in the file, at this offset.
    At(u64),
    /// The blob of the component at this position in the same call.
    SameAs(usize),
}

impl std::fmt::Debug for Blob<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Blob::Bytes(bytes) => f.debug_tuple("Bytes").field(&bytes.len()).finish(),
            Blob::Read { offset, .. } => f.debug_struct("Read").field("offset", offset).finish(),
            Blob::At(offset) => f.debug_tuple("At").field(offset).finish(),
            Blob::SameAs(k) => f.debug_tuple("SameAs").field(k).finish(),
        }
    }
}

fn unrepresentable(message: &str) -> FormatError {
    FormatError::new(Rule::Unrepresentable, message)
}

/// What a version can say about logical types, beyond the model's own checks.
fn check_logical(version: Version, t: &LogicalType, dtype: DType) -> Result<(), FormatError> {
    if let Some(need) = t.storage()
        && need != dtype
    {
        return Err(FormatError::new(
            Rule::LogicalTypeMismatch,
            format!("logical type {t} needs dtype {need}"),
        )
        .expected_found(need, dtype));
    }
    match version {
        Version::V0_1 => Err(unrepresentable("v0.1 has no logical types")),
        Version::V1_1 if t.v1_1_dtype_name().is_none() => Err(FormatError::new(
            Rule::Unrepresentable,
            format!("v1.1 has no dtype for logical type {t}"),
        )),
        _ => Ok(()),
    }
}
