//! The reader: validates everything the reference reader does not.

use std::borrow::Cow;
use std::collections::HashMap;

use ztensor_io::ReadAt;

use crate::error::{Error, ErrorKind, Result};
use crate::schema::{Metadata, TensorEntry, decode_metadata, tensor_id};

/// The magic at both ends of a file.
pub const MAGIC: [u8; 4] = *b"TBS1";

/// Limits and strictness for reading.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadOptions {
    /// Most tensors accepted. Default 1,000,000 (the reference verifier's table limit).
    pub max_tensors: usize,
    /// Also require every id to be the FNV-1a hash of its name.
    pub strict: bool,
}

impl ReadOptions {
    /// Default limits, ids checked.
    pub fn strict() -> ReadOptions {
        ReadOptions { strict: true, ..ReadOptions::default() }
    }

    /// The same options with another tensor limit.
    #[must_use]
    pub fn with_max_tensors(mut self, max_tensors: usize) -> ReadOptions {
        self.max_tensors = max_tensors;
        self
    }
}

impl Default for ReadOptions {
    fn default() -> ReadOptions {
        ReadOptions { max_tensors: 1_000_000, strict: false }
    }
}

/// A validated TensorBuffers file over any [`ReadAt`] source.
#[derive(Debug)]
pub struct TbFile<S> {
    source: S,
    metadata: Metadata,
    metadata_offset: u64,
    by_name: HashMap<String, usize>,
}

fn read<S: ReadAt>(source: &S, offset: u64, len: u64, what: &str) -> Result<Vec<u8>> {
    usize::try_from(len).map_err(|_| {
        Error::new(ErrorKind::MetadataOutOfBounds, format!("{what} does not fit in memory"))
    })?;
    let mut buf =
        ztensor_io::try_zeroed(len, what).map_err(|e| Error::io(format!("reading {what}"), e))?;
    source.read_exact_at(offset, &mut buf).map_err(|e| Error::io(format!("reading {what}"), e))?;
    Ok(buf)
}

impl<S: ReadAt> TbFile<S> {
    /// Reads and validates a file: both magics, the metadata size against the file length, the
    /// FlatBuffer (verified with limits), every tensor's data type, bounds and size, and unique
    /// names; with `strict`, ids.
    ///
    /// # Errors
    /// The first rule of `spec/tensorbuffers.md` the file breaks, and I/O errors.
    pub fn new(source: S, options: &ReadOptions) -> Result<TbFile<S>> {
        let len = source.len();
        if len < 12 {
            return Err(Error::new(
                ErrorKind::FileTooSmall,
                format!("{len} bytes is shorter than the 12-byte minimum"),
            ));
        }
        if read(&source, 0, 4, "the header")? != MAGIC {
            return Err(Error::new(ErrorKind::HeaderMagic, "file does not start with TBS1").at(0));
        }
        let tail = read(&source, len - 8, 8, "the trailer")?;
        if tail[4..] != MAGIC {
            return Err(
                Error::new(ErrorKind::FooterMagic, "file does not end with TBS1").at(len - 4)
            );
        }
        let m = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
        if m + 12 > len {
            return Err(Error::new(
                ErrorKind::MetadataOutOfBounds,
                format!("metadata size {m} does not fit in a {len}-byte file"),
            )
            .at(len - 8));
        }
        let metadata_offset = len - 8 - m;
        let owned;
        let bytes = match source.as_slice() {
            Some(all) => all
                .get(
                    usize::try_from(metadata_offset).unwrap_or(usize::MAX)
                        ..usize::try_from(len - 8).unwrap_or(0),
                )
                .unwrap_or_default(),
            None => {
                owned = read(&source, metadata_offset, m, "the metadata")?;
                &owned[..]
            }
        };
        // Tables: the root, every tensor and every operation.
        let max_tables = options.max_tensors.saturating_mul(2).saturating_add(1);
        let metadata = decode_metadata(bytes, max_tables).map_err(|e| e.at(metadata_offset))?;
        if metadata.tensors.len() > options.max_tensors {
            return Err(Error::new(
                ErrorKind::TooManyTensors,
                format!("{} tensors, limit {}", metadata.tensors.len(), options.max_tensors),
            ));
        }
        let mut by_name = HashMap::with_capacity(metadata.tensors.len());
        for (i, t) in metadata.tensors.iter().enumerate() {
            check_entry(t, metadata_offset, options)?;
            if by_name.insert(t.name.clone(), i).is_some() {
                return Err(Error::new(ErrorKind::DuplicateName, "two tensors share this name")
                    .in_object(&t.name));
            }
        }
        Ok(TbFile { source, metadata, metadata_offset, by_name })
    }

    /// The metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// The tensors, in file order.
    pub fn tensors(&self) -> &[TensorEntry] {
        &self.metadata.tensors
    }

    /// Where the metadata starts, which is also the end of the data region.
    pub fn metadata_offset(&self) -> u64 {
        self.metadata_offset
    }

    /// The tensor called `name` (looked up by name: files are not sorted by id).
    pub fn get(&self, name: &str) -> Option<&TensorEntry> {
        self.by_name.get(name).map(|&i| &self.metadata.tensors[i])
    }

    /// A tensor's little-endian bytes: borrowed from memory-backed sources, read otherwise. Data
    /// is not aligned in TensorBuffers files; copy it (`to_vec`) or use unaligned reads.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`], and I/O errors.
    pub fn data(&self, name: &str) -> Result<Cow<'_, [u8]>> {
        let t = self
            .get(name)
            .ok_or_else(|| Error::new(ErrorKind::NotFound, "no such tensor").in_object(name))?;
        let (start, size) = (u64::from(t.data_offset), u64::from(t.data_size));
        if let Some(all) = self.source.as_slice() {
            // Validated against the data region at open.
            let s = usize::try_from(start).unwrap_or(usize::MAX);
            if let Some(b) = s
                .checked_add(usize::try_from(size).unwrap_or(usize::MAX))
                .and_then(|e| all.get(s..e))
            {
                return Ok(Cow::Borrowed(b));
            }
        }
        read(&self.source, start, size, "tensor data").map(Cow::Owned)
    }

    /// The source.
    pub fn source(&self) -> &S {
        &self.source
    }
}

fn check_entry(t: &TensorEntry, data_end: u64, options: &ReadOptions) -> Result<()> {
    let (offset, size) = (u64::from(t.data_offset), u64::from(t.data_size));
    if offset < 4 || offset + size > data_end {
        return Err(Error::new(
            ErrorKind::DataOutOfBounds,
            format!(
                "data [{offset}, {}) is outside the data region [4, {data_end})",
                offset + size
            ),
        )
        .in_object(&t.name)
        .at(offset));
    }
    let expected =
        t.shape.iter().try_fold(t.data_type.size(), |acc, &d| acc.checked_mul(u64::from(d)));
    if expected != Some(size) {
        let expected = expected.map_or_else(|| "an overflowing size".to_owned(), |e| e.to_string());
        return Err(Error::new(
            ErrorKind::SizeMismatch,
            format!("data_size is {size}, the shape and type need {expected}"),
        )
        .in_object(&t.name));
    }
    if options.strict && t.id != tensor_id(&t.name) {
        return Err(Error::new(
            ErrorKind::IdMismatch,
            format!("id {:#018x} is not the hash of the name ({:#018x})", t.id, tensor_id(&t.name)),
        )
        .in_object(&t.name));
    }
    Ok(())
}

/// Every tensor in file order, as dense objects with one raw `data` component; the metadata
/// zTensor has no field for as `tensorbuffers.*` file attributes (which [`crate::TbSink`]
/// restores).
impl<S: ReadAt> ztensor_io::TensorSource for TbFile<S> {
    fn format_name(&self) -> Cow<'_, str> {
        Cow::Owned(format!("TensorBuffers (version {:?})", self.metadata.version))
    }

    fn attributes(&self) -> Option<Cow<'_, ztensor_format::Attributes>> {
        self.try_attributes().ok().flatten()
    }

    fn try_attributes(&self) -> ztensor_io::Result<Option<Cow<'_, ztensor_format::Attributes>>> {
        let kept = crate::metadata::kept_metadata(&self.metadata);
        if kept.is_empty() {
            return Ok(None);
        }
        let attributes = ztensor_format::Attributes::try_from(ztensor_format::text_map(kept))?;
        Ok(Some(Cow::Owned(attributes)))
    }

    fn attributes_origin(&self) -> Cow<'_, str> {
        Cow::Borrowed("the TensorBuffers metadata")
    }

    fn len(&self) -> usize {
        self.metadata.tensors.len()
    }

    fn info(&self, index: usize) -> Option<ztensor_io::ObjectInfo<'_>> {
        let t = self.metadata.tensors.get(index)?;
        let len = u64::from(t.data_size);
        Some(ztensor_io::ObjectInfo {
            name: Cow::Borrowed(&t.name),
            shape: Cow::Owned(t.shape.iter().map(|&d| u64::from(d)).collect()),
            format: ztensor_format::Format::Dense,
            attributes: None,
            components: vec![ztensor_io::ComponentInfo {
                role: Cow::Borrowed(ztensor_io::role::DATA),
                dtype: t.data_type.dtype().into(),
                logical_type: None,
                decoded_len: Some(len),
                stored_len: len,
                offset: Some(u64::from(t.data_offset)),
                encoding: ztensor_format::Encoding::Raw,
                digest: None,
            }],
            unsupported: None,
            location: None,
        })
    }

    fn name(&self, index: usize) -> Option<Cow<'_, str>> {
        self.metadata.tensors.get(index).map(|t| Cow::Borrowed(t.name.as_str()))
    }

    fn find(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    fn read(&self, index: usize) -> ztensor_io::Result<ztensor_io::ObjectData<'_>> {
        let t = self
            .metadata
            .tensors
            .get(index)
            .ok_or_else(|| ztensor_io::Error::not_found(&format!("#{index}"), None))?;
        let bytes = self.data(&t.name).map_err(|e| {
            ztensor_io::Error::io(
                format!("reading tensor {:?}", t.name),
                None,
                std::io::Error::other(e.to_string()),
            )
        })?;
        let mut components = std::collections::BTreeMap::new();
        let data =
            ztensor_io::ComponentData { dtype: t.data_type.dtype(), logical_type: None, bytes };
        components.insert(ztensor_io::role::DATA.to_owned(), data);
        Ok(ztensor_io::ObjectData {
            name: t.name.clone(),
            shape: t.shape.iter().map(|&d| u64::from(d)).collect(),
            format: ztensor_format::Format::Dense,
            attributes: None,
            components,
        })
    }

    fn raw(&self, index: usize) -> Option<ztensor_io::RawRange<'_>> {
        let t = self.metadata.tensors.get(index)?;
        Some(ztensor_io::RawRange {
            source: &self.source,
            offset: u64::from(t.data_offset),
            len: u64::from(t.data_size),
        })
    }
}
