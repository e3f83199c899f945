//! Copying objects between readers and writers of any version: stored bytes as they are where
//! the target can hold them, decoded and written again (digests checked first) otherwise.
//!
//! The 1.x format lets components of different objects point at the same blob (the same offset
//! and length). A copy keeps them sharing: the blob is written once and later components point
//! at the copy, so a file of a million aliases of one large blob copies to about its own size.
//! Stored copies share any such blob; re-encoded copies share the blob of dense objects stored
//! exactly alike (the same encoding of the same bytes gives the same bytes). Whatever cannot
//! stay shared is counted once per object before anything is written, against the expansion
//! limit ([`check_copy`]), so a small file cannot make a copy write terabytes.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::io::Write;

use ztensor_format::{
    ByteOrder, Component, DType, Digest, DigestAlgorithm, Encoding, Format, Packing, Version,
};

use crate::handle::Object;
use crate::reader::Reader;
use crate::sharing::{BlobKey, EncodedCopy, StoredCopy};
use crate::writer::{Blob, Compression, WriteOptions, Writer};
use ztensor_source::ReadAt;
use ztensor_source::{Error, Result};

/// The key a writer remembers a shared blob of `reader` by, when (`offset`, `length`) is one,
/// in an object of `packing`.
fn shared_key<S: ReadAt>(reader: &Reader<S>, packing: &Packing, c: &Component) -> Option<BlobKey> {
    let range = (c.offset, c.length);
    (*packing == Packing::Split
        && c.length > 0
        && reader.sharing().shared(reader.manifest()).contains(&range))
    .then(|| (reader.sharing().id, c.offset, c.length))
}

/// The one component of a dense object whose blob is shared and which a copy may encode once
/// for all its aliases: split, supported, nothing else in it.
fn dense_shared<'r, S: ReadAt>(
    handle: &Object<'r, S>,
) -> Option<(&'r str, &'r Component, BlobKey)> {
    let o = handle.model();
    if o.format != Format::Dense || o.components.len() != 1 || handle.unsupported().is_some() {
        return None;
    }
    let (role, c) = o.components.iter().next()?;
    Some((role, c, shared_key(handle.reader(), &o.packing, c)?))
}

/// Whether any blob of `object` is shared with another component of its file: copies write
/// such a blob once (see [`copy_object`]), so an engine that copies objects itself leaves
/// these to it.
pub fn shares_blob<S: ReadAt>(object: &Object<'_, S>) -> bool {
    let o = object.model();
    o.components.values().any(|c| shared_key(object.reader(), &o.packing, c).is_some())
}

/// Refuses copying the objects of `reader` that `keep` selects (given each one's position and
/// name) into `writer` with `options` when the copy would write more than the reader's
/// [`Limits::max_expanded_len`](ztensor_format::Limits::max_expanded_len) allows for its
/// source's length, counted before anything is written: stored copies and re-encoded dense
/// aliases (see [`copy_object`]) count a shared blob once, anything else encoded again counts
/// its decoded bytes once per object. [`copy_all`], [`rewrite`](crate::rewrite) and the first
/// [`copy_object`] from a reader into a writer check it themselves; returns the count.
///
/// # Errors
/// [`ErrorKind::Format`](crate::ErrorKind::Format) with rule `decoded_too_large`.
pub fn check_copy<S: ReadAt, W: Write>(
    reader: &Reader<S>,
    writer: &mut Writer<W>,
    options: &CopyOptions,
    keep: &dyn Fn(usize, &str) -> bool,
) -> Result<u64> {
    let target = writer.version();
    let limits = &reader.options().limits;
    let input_len = reader.source().len();
    let allowed = limits.max_expanded_len(input_len);
    let mut stored_seen = HashSet::new();
    let mut encoded_seen: HashMap<BlobKey, Vec<(&Component, Option<u64>)>> = HashMap::new();
    let mut total = 0u64;
    for (i, handle) in reader.objects().enumerate() {
        if !keep(i, handle.name()) {
            continue;
        }
        let o = handle.model();
        let add = if copies_stored(o, target, options) {
            o.components
                .values()
                .map(|c| match shared_key(reader, &o.packing, c) {
                    Some(key) if !stored_seen.insert(key) => 0,
                    _ => c.length,
                })
                .fold(0, u64::saturating_add)
        } else if let Some((role, c, key)) = dense_shared(&handle) {
            let decoded = handle.entry().decoded_len(role);
            let seen = encoded_seen.entry(key).or_default();
            if seen.iter().any(|&(s, d)| s == c && d == decoded) {
                0
            } else {
                seen.push((c, decoded));
                decoded.unwrap_or(c.length)
            }
        } else {
            o.components
                .iter()
                .map(|(role, c)| ztensor_format::decoded_len(o, role, c).unwrap_or(c.length))
                .fold(0, u64::saturating_add)
        };
        total = total.saturating_add(add);
        if total > allowed {
            return Err(ztensor_format::Error::new(
                ztensor_format::ErrorKind::DecodedTooLarge,
                format!(
                    "copying its objects would write more than {allowed} bytes (by object \
                     {:?}), over {} times the input's {input_len} bytes: objects that share a \
                     blob are written once each where the copy encodes them again; the \
                     max_expansion limit (--max-expansion) raises it",
                    handle.name(),
                    limits.max_expansion
                ),
            )
            .into());
        }
    }
    writer.copied.checked.insert(reader.sharing().id);
    Ok(total)
}

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
    check_copy(reader, writer, options, &|_, _| true)?;
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
    let reader = handle.reader();
    if !writer.copied.checked.contains(&reader.sharing().id) {
        // A copy object by object (an append, say) is checked as a copy of the whole file.
        check_copy(reader, writer, options, &|_, _| true)?;
    }
    let object = handle.model();
    let target = writer.version();
    if copies_stored(object, target, options) {
        return copy_stored(handle, writer, options);
    }
    if let Some(reason) = handle.unsupported() {
        return Err(Error::unsupported(reason.clone()));
    }
    let write_options = write_options_for(object, options);
    // A dense object stored exactly like one already encoded into this writer would encode to
    // the same bytes: it points at them instead.
    let shared = dense_shared(&handle)
        .map(|(role, c, key)| (role, c, key, handle.entry().decoded_len(role)));
    if let Some((role, c, key, decoded)) = shared {
        let earlier = writer.copied.encoded.get(&key).and_then(|copies| {
            copies
                .iter()
                .find(|e| e.source == *c && e.decoded == decoded && e.options == write_options)
        });
        if let Some(earlier) = earlier {
            let placed = earlier.placed.clone();
            let mut object = object.clone();
            if options.drop_attributes {
                object.attributes = None;
            }
            let at = Blob::At(placed.offset);
            return writer.add_placed(object, &[(role, placed, at)]).map(drop);
        }
    }
    write_encoded(handle, writer, options, &write_options)?;
    if let Some((role, c, key, decoded)) = shared {
        let last = writer.manifest().len().checked_sub(1);
        let placed = match last {
            Some(i) => writer.manifest().object(i)?.components.remove(role),
            None => None,
        };
        if let Some(placed) = placed {
            let copy = EncodedCopy { source: c.clone(), decoded, options: write_options, placed };
            writer.copied.encoded.entry(key).or_default().push(copy);
        }
    }
    Ok(())
}

/// Copies `handle`'s stored bytes as they are, each shared blob once into `writer`.
fn copy_stored<S: ReadAt, W: Write>(
    handle: Object<'_, S>,
    writer: &mut Writer<W>,
    options: &CopyOptions,
) -> Result<()> {
    enum From<'b> {
        Bytes(Cow<'b, [u8]>),
        /// Read from the source at this offset as it is written (a source not in memory).
        Read(u64),
        At(u64),
        SameAs(usize),
    }
    // Stored bytes of a source in memory are written from there; any other's are read a piece
    // at a time as they are written, so a large tensor is never held whole.
    let source = handle.reader().source();
    let in_memory = source.as_slice().is_some();
    let object = handle.model();
    let target = writer.version();
    let mut parts = Vec::with_capacity(object.components.len());
    let mut keys = Vec::with_capacity(object.components.len());
    for part in handle.components() {
        let mut component = part.model().clone();
        let key = shared_key(handle.reader(), &object.packing, &component);
        let earlier = key.and_then(|key| writer.copied.stored.get(&key));
        if target != Version::V1_2 {
            // Only 1.2 defines `uncompressed_length`.
            component.uncompressed_length = None;
        } else if component.encoding == Encoding::Zstd && component.uncompressed_length.is_none() {
            // 1.2 requires it: take it from the shape where it determines it, otherwise
            // decode once to learn it (the stored bytes are still copied as they are), once
            // for a blob that several components share.
            component.uncompressed_length = match (part.decoded_len(), earlier) {
                (Some(n), _) => Some(n),
                (None, Some(StoredCopy { zstd_len: Some(n), .. })) => Some(*n),
                (None, _) => Some(part.decoded()?.len() as u64),
            };
        }
        let from = match (earlier, key.and_then(|k| keys.iter().position(|&x| x == Some(k)))) {
            (Some(earlier), _) => From::At(earlier.offset),
            (None, Some(k)) => From::SameAs(k),
            (None, None) if !in_memory => From::Read(part.model().offset),
            (None, None) => From::Bytes(part.stored()?),
        };
        keys.push(key);
        parts.push((part.role(), component, from));
    }
    let placed: Vec<(&str, Component, Blob<'_>)> = parts
        .iter()
        .map(|(role, component, from)| {
            let blob = match from {
                From::Bytes(bytes) => Blob::Bytes(bytes),
                From::Read(offset) => Blob::Read { source, offset: *offset },
                From::At(offset) => Blob::At(*offset),
                From::SameAs(k) => Blob::SameAs(*k),
            };
            if let Blob::Bytes(bytes) = blob
                && bytes.len() as u64 != component.length
            {
                return Err(Error::broken(
                    ztensor_format::ErrorKind::InvalidInput,
                    "stored component length differs from its bytes",
                ));
            }
            Ok((*role, component.clone(), blob))
        })
        .collect::<Result<_>>()?;
    let mut copy = object.clone();
    if options.drop_attributes {
        copy.attributes = None;
    }
    let offsets = writer.add_placed(copy, &placed)?;
    for ((key, offset), (_, component, _)) in keys.into_iter().zip(offsets).zip(&parts) {
        let Some(key) = key else { continue };
        let entry =
            writer.copied.stored.entry(key).or_insert(StoredCopy { offset, zstd_len: None });
        if component.encoding == Encoding::Zstd {
            entry.zstd_len = entry.zstd_len.or(component.uncompressed_length);
        }
    }
    Ok(())
}

/// Decodes `handle` (its digests and data rules checked) and writes it encoded again.
fn write_encoded<S: ReadAt, W: Write>(
    handle: Object<'_, S>,
    writer: &mut Writer<W>,
    options: &CopyOptions,
    write_options: &WriteOptions,
) -> Result<()> {
    let object = handle.model();
    // Encoding again would give the data a fresh, valid digest: check the old one on the bytes
    // that are decoded, and the data rules, so damage is reported instead of laundered.
    let attributes = object.attributes.as_deref().filter(|_| !options.drop_attributes);
    if crate::write_stream::streams(writer, write_options, &object.format) {
        let meta = crate::write_stream::Meta {
            name: &object.name,
            shape: &object.shape,
            format: &object.format,
            attributes: attributes.cloned(),
        };
        let parts = crate::write_stream::ObjectParts(&handle);
        crate::write_stream::write_streamed(writer, meta, &parts, write_options)?;
        return Ok(());
    }
    let mut data = handle.read_verified()?;
    handle.check(&data)?;
    if options.drop_attributes {
        data.attributes = None;
    }
    crate::write_data::write_data(writer, &data, write_options)
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
