//! Copying objects between readers and writers of any version: stored bytes as they are where
//! the target can hold them, decoded and written again (digests checked first) otherwise.

use std::io::Write;

use ztensor_format::{
    ByteOrder, DType, Digest, DigestAlgorithm, Encoding, Format, Packing, Version,
};

use crate::error::{Error, Result};
use crate::handle::Object;
use crate::reader::Reader;
use crate::source::ReadAt;
use crate::writer::{Compression, StoredComponent, WriteOptions, Writer};

/// What to do with digests when copying objects.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum DigestChoice {
    /// Keep each component's digest algorithm (recomputed when the stored bytes change).
    #[default]
    Keep,
    /// Write no digests.
    Drop,
    /// Give every component a digest of this algorithm.
    Set(DigestAlgorithm),
}

/// How objects are copied into a writer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyOptions {
    /// `None` keeps each component's encoding (copying the stored bytes where the target can
    /// hold them); `Some` re-encodes every component.
    pub compression: Option<Compression>,
    /// Digests.
    pub digest: DigestChoice,
    /// Frame size for components that are (re)compressed; see [`WriteOptions::chunk_size`].
    pub chunk_size: Option<u64>,
    /// Leave out the file attributes and every object's attributes (for a target version that
    /// has no place for them, or a copy that should not carry them).
    pub drop_attributes: bool,
    /// For components that are (re)compressed with zstd: store raw those zstd does not make
    /// smaller; see [`WriteOptions::raw_if_not_smaller`].
    pub raw_if_not_smaller: bool,
}

impl Default for CopyOptions {
    fn default() -> CopyOptions {
        CopyOptions {
            compression: None,
            digest: DigestChoice::Keep,
            chunk_size: Some(crate::codec::DEFAULT_ZSTD_CHUNK),
            drop_attributes: false,
            raw_if_not_smaller: false,
        }
    }
}

/// Copies every object and the file attributes of `reader` into `writer`, in manifest order,
/// converting between versions as needed.
///
/// # Errors
/// `unrepresentable`, naming the object, for content the writer's version cannot express (file
/// attributes or quantized objects in v0.1, logical types 1.1 has no dtype for, …); decoding
/// errors of the source; I/O errors.
pub fn copy_all<S: ReadAt, W: Write>(
    reader: &Reader<S>,
    writer: &mut Writer<W>,
    options: &CopyOptions,
) -> Result<()> {
    if let Some(attributes) = &reader.manifest().manifest().attributes
        && !options.drop_attributes
    {
        writer.set_attributes(attributes.clone())?;
    }
    // By handle: every object, those a v0.1 file's repeated names shadow included.
    for object in reader.objects() {
        copy_object(object, writer, options)?;
    }
    Ok(())
}

/// Copies one object (a handle of its reader) into `writer`: stored bytes as they are where the target
/// version can hold them and no re-encoding is asked for, otherwise decoded and written again,
/// after checking the source digests (which stored copies keep, still checkable).
///
/// # Errors
/// As [`copy_all`].
pub fn copy_object<S: ReadAt, W: Write>(
    handle: Object<'_, S>,
    writer: &mut Writer<W>,
    options: &CopyOptions,
) -> Result<()> {
    let object = handle.model();
    let target = writer.version();
    let stored_ok = copies_stored(object, target, options);
    if stored_ok {
        let mut stored = Vec::with_capacity(object.components.len());
        for part in handle.components() {
            let mut component = part.model().clone();
            if target != Version::V1_2 {
                // Only 1.2 defines `uncompressed_length`.
                component.uncompressed_length = None;
            } else if component.encoding == Encoding::Zstd
                && component.uncompressed_length.is_none()
            {
                // 1.2 requires it: take it from the shape where it determines it, otherwise
                // decode once to learn it (the stored bytes are still copied as they are).
                component.uncompressed_length = match part.decoded_len() {
                    Some(n) => Some(n),
                    None => Some(part.decoded()?.len() as u64),
                };
            }
            stored.push((part.role(), component, part.stored()?));
        }
        let parts: Vec<StoredComponent<'_>> = stored
            .iter()
            .map(|(role, component, bytes)| StoredComponent {
                role,
                component: component.clone(),
                bytes,
            })
            .collect();
        let mut object = object.clone();
        if options.drop_attributes {
            object.attributes = None;
        }
        return writer.add_stored(object, &parts);
    }
    if let Some(reason) = handle.unsupported() {
        return Err(Error::unsupported(reason.clone()));
    }
    // Encoding again would give the data a fresh, valid digest: check the old one on the bytes
    // that are decoded, and the data rules, so damage is reported instead of laundered.
    let write_options = write_options_for(object, options);
    let attributes = object.attributes.as_deref().filter(|_| !options.drop_attributes);
    if crate::write_stream::streams(writer, &write_options, &object.format) {
        let meta = crate::write_stream::Meta {
            name: &object.name,
            shape: &object.shape,
            format: &object.format,
            attributes: attributes.cloned(),
        };
        let parts = crate::write_stream::ObjectParts(&handle);
        crate::write_stream::write_streamed(writer, meta, &parts, &write_options)?;
        return Ok(());
    }
    let mut data = handle.read_verified()?;
    handle.check(&data)?;
    if options.drop_attributes {
        data.attributes = None;
    }
    crate::write_data::write_data(writer, &data, &write_options)
}

/// Whether [`copy_object`] copies `object`'s stored bytes as they are (rather than decoding and
/// encoding them again) when writing `target` with `options`.
pub fn copies_stored(
    object: &ztensor_format::Object,
    target: Version,
    options: &CopyOptions,
) -> bool {
    options.compression.is_none()
        && stored_representable(object, target)
        && match &options.digest {
            DigestChoice::Keep => true,
            DigestChoice::Drop => object.components.values().all(|c| c.digest.is_none()),
            DigestChoice::Set(_) => false,
        }
}

/// The write options [`copy_object`] uses when it encodes `object` again: the requested
/// compression, or zstd level 3 when the object's first component was zstd; the requested
/// digest, or the first component's known algorithm.
pub fn write_options_for(object: &ztensor_format::Object, options: &CopyOptions) -> WriteOptions {
    let first = object.components.values().next();
    let compression = options.compression.unwrap_or(match first.map(|c| &c.encoding) {
        Some(Encoding::Zstd) => Compression::Zstd(3),
        _ => Compression::Raw,
    });
    let digest = match &options.digest {
        DigestChoice::Keep => first
            .and_then(|c| c.digest.as_ref())
            .map(Digest::algorithm)
            .filter(|a| !matches!(a, DigestAlgorithm::Unknown(_))),
        DigestChoice::Drop => None,
        DigestChoice::Set(a) => Some(a.clone()),
    };
    WriteOptions {
        compression,
        digest,
        chunk_size: options.chunk_size,
        raw_if_not_smaller: options.raw_if_not_smaller,
    }
}

/// Whether `object`'s stored form is something `target` can hold as it is.
fn stored_representable(object: &ztensor_format::Object, target: Version) -> bool {
    let little = object.components.values().all(|c| *c.byte_order() == ByteOrder::Little);
    match target {
        Version::V0_1 => {
            object.components.values().all(|c| c.logical_type.is_none())
                && match object.packing {
                    Packing::V0Single => true,
                    Packing::Split => {
                        object.format == Format::Dense
                            && object.components.len() == 1
                            && object.components.contains_key("data")
                    }
                }
        }
        Version::V1_1 | Version::V1_2 => {
            let logical_ok = object.components.values().all(|c| match (&c.logical_type, target) {
                (None, _) | (Some(_), Version::V1_2) => true,
                (Some(t), _) => t.v1_1_dtype_name().is_some() && t.storage() == c.dtype.known(),
            });
            let index_ok = target != Version::V1_2
                || !matches!(object.format, Format::SparseCsr | Format::SparseCoo)
                || ["indices", "indptr", "coords"]
                    .iter()
                    .filter_map(|r| object.components.get(r))
                    .all(|c| c.dtype.known() == Some(DType::U64));
            object.packing == Packing::Split && little && logical_ok && index_ok
        }
    }
}
