//! The reader: one API over every version and every source.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;

use ztensor_format::data::{
    check_bool, check_coo, check_csr, indices_to_u64, swap_bytes, unpack_v0_coo, unpack_v0_csr,
};
use ztensor_format::{
    ByteOrder, Component, Container, DType, Digest, DigestAlgorithm, Encoding, ErrorKind as Rule,
    Format, LogicalType, Manifest, ObjectRef, Options, Packing, ValidatedManifest, Version, role,
    validate,
};

use crate::codec::{digest_of, zstd_decode};

pub use ztensor_source::{ComponentData, ObjectData};
use ztensor_source::{Error, Result};
use ztensor_source::{FileSource, ReadAt};

mod stream;
mod tensor_source;
pub(crate) use stream::{Elements, PIECE, convertible};
pub use tensor_source::ZtensorObjects;

/// Reads a zTensor file of any version from any [`ReadAt`] source.
///
/// Opening reads only the header, the trailer and the manifest, and validates the manifest;
/// component bytes are read on demand. A `Reader` is `Send + Sync` when its source is: many
/// threads can read different objects of one open file at once.
#[derive(Debug)]
pub struct Reader<S> {
    source: S,
    /// Shared with the readers [`Reader::as_dyn`] makes.
    manifest: std::sync::Arc<ValidatedManifest>,
    options: Options,
    /// Which blobs several components share, for the copy paths; shared like the manifest.
    sharing: std::sync::Arc<crate::sharing::Sharing>,
}

/// The outcome of checking one component's digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DigestCheck {
    /// The component has no digest.
    Absent,
    /// The digest matches the stored bytes.
    Verified(DigestAlgorithm),
    /// The digest uses an algorithm this crate cannot compute: neither a pass nor a failure.
    Unverifiable(String),
}

/// A storage element type that can be viewed in place: `&[f32]` over `f32` data, `&[u16]` over
/// `u16`, `f16` or `bf16` data, `&[u8]` over `u8` or `bool` data, and so on.
pub trait Element: bytemuck::Pod {
    /// The storage dtypes whose bytes are valid values of `Self`.
    const DTYPES: &'static [DType];
}

macro_rules! element {
    ($($t:ty => [$($d:ident),*];)*) => {
        $(impl Element for $t {
            const DTYPES: &'static [DType] = &[$(DType::$d),*];
        })*
    };
}

element! {
    f64 => [F64];
    f32 => [F32];
    half::f16 => [F16];
    half::bf16 => [BF16];
    i64 => [I64];
    i32 => [I32];
    i16 => [I16];
    i8 => [I8];
    u64 => [U64];
    u32 => [U32];
    u16 => [U16, F16, BF16];
    u8 => [U8, Bool];
}

impl Reader<FileSource> {
    /// Opens a file with default options, reading it with positional reads. A file another
    /// process is appending to, or whose last append was interrupted, is read as it was before
    /// that append (see [`FileSource::open`]).
    ///
    /// # Errors
    /// I/O errors, and the first rule of `spec/rules.md` the file breaks.
    pub fn open(path: impl AsRef<Path>) -> Result<Reader<FileSource>> {
        Reader::open_with(path, &Options::default())
    }

    /// Opens a file with the given limits and strictness.
    ///
    /// # Errors
    /// As [`Reader::open`].
    pub fn open_with(path: impl AsRef<Path>, options: &Options) -> Result<Reader<FileSource>> {
        Reader::new(FileSource::open(path)?, options)
    }
}

/// Checks `stored`, the stored bytes of component `c` (`role` of object `name`), against its
/// digest.
pub(crate) fn check_digest(
    name: &str,
    role: &str,
    c: &Component,
    stored: &[u8],
) -> Result<DigestCheck> {
    let context =
        |e: ztensor_format::Error| Error::from(e.in_object(name).in_component(role).at(c.offset));
    match &c.digest {
        None => Ok(DigestCheck::Absent),
        Some(Digest::Unknown(s)) => Ok(DigestCheck::Unverifiable(s.to_string())),
        Some(Digest::Malformed(s)) => Err(context(ztensor_format::Error::new(
            Rule::DigestMalformed,
            format!("digest {s:?} cannot be parsed"),
        ))),
        Some(expected) => {
            let algorithm = expected.algorithm();
            match digest_of(&algorithm, stored) {
                Some(actual) if actual == *expected => Ok(DigestCheck::Verified(algorithm)),
                Some(actual) => Err(context(
                    ztensor_format::Error::new(
                        Rule::DigestMismatch,
                        "digest differs from the stored bytes",
                    )
                    .expected_found(expected, actual),
                )),
                None => Ok(DigestCheck::Unverifiable(expected.to_string())),
            }
        }
    }
}

/// Reads the header, the trailer ending at `end` and the manifest, and validates it.
pub(crate) fn load_manifest<S: ReadAt>(
    source: &S,
    end: u64,
    options: &Options,
) -> Result<ValidatedManifest> {
    let len = end.min(source.len());
    let head = read_vec(source, 0, len.min(8), "the header")?;
    let container = Container::detect(&head)?;
    let trailer = container.trailer_len().min(len);
    let tail = read_vec(source, len - trailer, trailer, "the trailer")?;
    let location = container.locate_manifest(len, &tail, &options.limits)?;
    let manifest = {
        let owned;
        let bytes = match source.as_slice() {
            Some(all) => {
                // In bounds: `locate_manifest` checked the range against the length.
                let start = usize::try_from(location.offset).unwrap_or(usize::MAX);
                let end = usize::try_from(location.offset + location.len).unwrap_or(usize::MAX);
                all.get(start..end).unwrap_or_default()
            }
            None => {
                owned = read_vec(source, location.offset, location.len, "the manifest")?;
                &owned[..]
            }
        };
        Manifest::decode(container, bytes, &options.limits)
            .map_err(|e| e.shifted(location.offset))?
    };
    Ok(validate(manifest, location, options)?)
}

pub(crate) fn read_vec<S: ReadAt>(
    source: &S,
    offset: u64,
    len: u64,
    what: &str,
) -> Result<Vec<u8>> {
    usize::try_from(len).map_err(|_| {
        Error::broken(Rule::BlobOutOfBounds, format!("{what} does not fit in memory"))
    })?;
    let mut buf = ztensor_source::try_zeroed(len, what)
        .map_err(|e| Error::io(format!("reading {what}"), None, e))?;
    source
        .read_exact_at(offset, &mut buf)
        .map_err(|e| Error::io(format!("reading {what}"), None, e))?;
    Ok(buf)
}

impl<S: ReadAt> Reader<S> {
    /// Checks the file's padding for zeros (rule `padding_nonzero`, which 1.1 and 1.2 writers
    /// must keep): reads every range of the data area that no component covers
    /// ([`ValidatedManifest::padding`]), 64 KiB at a time. 0.1 leaves padding undefined, so a
    /// 0.1 file has nothing to check.
    ///
    /// # Errors
    /// `padding_nonzero` naming the first byte that is not zero; the source's read errors.
    pub fn check_padding(&self) -> Result<()> {
        const PIECE: u64 = 64 << 10;
        let mut buf = Vec::new();
        for gap in self.manifest.padding() {
            let mut at = gap.start;
            while at < gap.end {
                let n = (gap.end - at).min(PIECE);
                buf.resize(usize::try_from(n).unwrap_or(0), 0);
                self.source
                    .read_exact_at(at, &mut buf)
                    .map_err(|e| Error::io(format!("reading the padding at byte {at}"), None, e))?;
                ztensor_format::check_padding(at, &buf)?;
                at += n;
            }
        }
        Ok(())
    }

    /// Reads and validates the manifest of `source`.
    ///
    /// # Errors
    /// I/O errors, and the first rule of `spec/rules.md` the file breaks.
    pub fn new(source: S, options: &Options) -> Result<Reader<S>> {
        let end = source.len();
        Reader::with_end(source, end, options)
    }

    /// Reads and validates the file as if it ended at `end`: the trailer is the bytes just
    /// before `end`. Used to fall back to an earlier complete manifest of an appended file.
    ///
    /// # Errors
    /// As [`Reader::new`].
    pub fn with_end(source: S, end: u64, options: &Options) -> Result<Reader<S>> {
        let manifest = load_manifest(&source, end, options)?;
        Ok(Reader {
            source,
            manifest: std::sync::Arc::new(manifest),
            options: options.clone(),
            sharing: std::sync::Arc::default(),
        })
    }

    /// This reader over its source seen through [`ReadAt`] (`&dyn ReadAt`), sharing the
    /// manifest: for code that takes readers of any source as one type.
    pub fn as_dyn(&self) -> Reader<&dyn ReadAt>
    where
        S: ReadAt,
    {
        Reader {
            source: &self.source,
            manifest: std::sync::Arc::clone(&self.manifest),
            options: self.options.clone(),
            sharing: std::sync::Arc::clone(&self.sharing),
        }
    }

    /// Which blobs of this file several components share (see [`crate::sharing::Sharing`]).
    pub(crate) fn sharing(&self) -> &crate::sharing::Sharing {
        &self.sharing
    }

    /// The validated manifest.
    pub fn manifest(&self) -> &ValidatedManifest {
        &self.manifest
    }

    /// The file's version.
    pub fn version(&self) -> Version {
        self.manifest.version()
    }

    /// The options the reader was opened with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The source.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// Decodes the object called `name`: `reader.object(name)?.read()`.
    ///
    /// # Errors
    /// As [`Reader::object`] and [`Object::read`](crate::Object::read).
    pub fn read_object(&self, name: &str) -> Result<ObjectData<'_>> {
        self.object(name)?.read()
    }

    /// Decodes the object called `name`, checking its digests:
    /// `reader.object(name)?.read_verified()`.
    ///
    /// # Errors
    /// As [`Reader::object`] and [`Object::read_verified`](crate::Object::read_verified).
    pub fn read_object_verified(&self, name: &str) -> Result<ObjectData<'_>> {
        self.object(name)?.read_verified()
    }

    /// Stored bytes at `offset`, borrowed from memory-backed sources.
    pub(crate) fn stored_range(&self, offset: u64, length: u64) -> Result<Cow<'_, [u8]>> {
        if let Some(all) = self.source.as_slice() {
            // Validation put every blob inside the file.
            let start = usize::try_from(offset).unwrap_or(usize::MAX);
            let end = usize::try_from(offset.saturating_add(length)).unwrap_or(usize::MAX);
            if let Some(bytes) = all.get(start..end) {
                return Ok(Cow::Borrowed(bytes));
            }
        }
        read_vec(&self.source, offset, length, "a component").map(Cow::Owned)
    }

    /// Decodes component `c` (`role`) of `object`, after checking its digest when `verify`.
    pub(crate) fn decode_component(
        &self,
        object: ObjectRef<'_>,
        role: &str,
        c: &Component,
        verify: bool,
    ) -> Result<Cow<'_, [u8]>> {
        let name = object.name();
        let stored = self.stored_range(c.offset, c.length)?;
        if verify {
            check_digest(name, role, c, &stored)?;
        }
        let mut bytes = match c.encoding {
            Encoding::Raw => stored,
            Encoding::Zstd if !crate::codec::ZSTD => no_zstd(name, role)?,
            Encoding::Zstd => {
                let limit = self.options.limits.whole_decode_limit();
                let expected = object.decoded_len(role);
                let decoded = zstd_decode(&stored, expected, limit)
                    .map_err(|e| Error::from(e.in_object(name).in_component(role).at(c.offset)))?;
                Cow::Owned(decoded)
            }
            Encoding::Unknown(_) => unknown_encoding(name, role)?,
        };
        if *c.byte_order() == ByteOrder::Big && object.object().packing == Packing::Split {
            let width = c.dtype.known().map_or(1, DType::size);
            if width > 1 {
                swap_bytes(bytes.to_mut(), usize::try_from(width).unwrap_or(1));
            }
        }
        Ok(bytes)
    }

    /// Decodes component `c` (`role`) of `object` in order, in pieces of `piece` bytes (the
    /// last may be shorter), handing each to `each`: memory is two pieces and the zstd window
    /// whatever the component's size. Stored bytes are read in pieces too, and with `verify`
    /// the digest is computed as they pass and checked at the end, so a caller must treat what
    /// it was given as unverified until this returns. The decoded length is checked as bytes
    /// come (more than declared or than `limit` fails at once) and at the end. Returns the
    /// decoded length.
    // The component, what to check, and how: each argument is one the callers set apart.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn stream_component(
        &self,
        object: ObjectRef<'_>,
        role: &str,
        c: &Component,
        verify: bool,
        limit: u64,
        piece: usize,
        each: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<u64> {
        let name = object.name();
        let context = |e: ztensor_format::Error| {
            Error::from(e.in_object(name).in_component(role).at(c.offset))
        };
        let piece = piece.max(64);
        // The digest, when one is to be checked here; `Digest::Malformed` and ones this build
        // cannot compute are left to `check_digest` on no bytes (it needs none to say so).
        let mut hasher = None;
        if verify {
            hasher = c.digest.as_ref().and_then(|d| match d {
                Digest::Sha256(_) | Digest::Blake3(_) | Digest::Crc32c(_) => {
                    crate::codec::Hasher::new(&d.algorithm())
                }
                _ => None,
            });
            if hasher.is_none() && c.digest.is_some() {
                check_digest(name, role, c, &[])?;
            }
        }
        let mut stored = StoredReader {
            source: &self.source,
            at: c.offset,
            end: c.offset.saturating_add(c.length),
            hasher: hasher.as_mut(),
        };
        let swap = (*c.byte_order() == ByteOrder::Big && object.object().packing == Packing::Split)
            .then(|| c.dtype.known().map_or(1, DType::size))
            .and_then(|w| usize::try_from(w).ok())
            .filter(|&w| w > 1);
        let expected = object.decoded_len(role);
        let cap = expected.unwrap_or(limit).min(limit);
        // No larger than the component needs: a file of a million small tensors must not
        // zero a full piece for each.
        let most = match c.encoding {
            Encoding::Raw => c.length,
            _ => cap,
        };
        let piece = piece.min(usize::try_from(most).unwrap_or(usize::MAX)).max(1);
        // Whole elements per piece, so a byte-order swap never splits one.
        let piece = swap.map_or(piece, |w| (piece / w).max(1) * w);
        let mut buf = ztensor_source::try_zeroed(piece as u64, "a decoding piece")
            .map_err(|e| Error::io("decoding", None, e))?;
        let io_error = |e: std::io::Error| Error::io(format!("reading {name:?}/{role}"), None, e);
        // The decoding, as the whole-component path does it, in its order of checks.
        let mut decode = |stored: &mut StoredReader<'_, S>| -> Result<u64> {
            let mut total = 0u64;
            let mut give = |bytes: &mut [u8], total: &mut u64| -> Result<()> {
                *total += bytes.len() as u64;
                if let Some(w) = swap {
                    swap_bytes(bytes, w);
                }
                each(bytes)
            };
            match c.encoding {
                Encoding::Raw => loop {
                    let n = fill(stored, &mut buf).map_err(io_error)?;
                    if n == 0 {
                        break;
                    }
                    give(&mut buf[..n], &mut total)?;
                },
                Encoding::Zstd if !crate::codec::ZSTD => no_zstd(name, role)?,
                Encoding::Zstd => {
                    let most = crate::codec::zstd_max_decoded(c.length);
                    if let Some(n) = expected.filter(|&n| n > most) {
                        return Err(context(
                            ztensor_format::Error::new(
                                Rule::DecodedSizeMismatch,
                                "no zstd stream of this size decodes to the declared size",
                            )
                            .expected_found(n, format!("at most {most}")),
                        ));
                    }
                    if let Some(n) = expected.filter(|&n| n > limit) {
                        return Err(context(
                            ztensor_format::Error::new(
                                Rule::DecodedTooLarge,
                                "decoded size is above the limit",
                            )
                            .expected_found(format!("<= {limit}"), n),
                        ));
                    }
                    let decode_failed = |e: std::io::Error| {
                        context(ztensor_format::Error::new(
                            Rule::DecodeFailed,
                            format!("zstd: {e}"),
                        ))
                    };
                    let mut lent = crate::codec::Context::lend();
                    let mut decoder = crate::codec::zstd_reader(
                        crate::codec::Stored::Reader(&mut *stored),
                        &mut lent,
                    )
                    .map_err(decode_failed)?;
                    loop {
                        let n = fill(&mut decoder, &mut buf).map_err(decode_failed)?;
                        if n == 0 {
                            break;
                        }
                        if total + n as u64 > cap {
                            let e = match expected {
                                Some(want) => ztensor_format::Error::new(
                                    Rule::DecodedSizeMismatch,
                                    "zstd output is longer than expected",
                                )
                                .expected_found(want, format!("more than {want}")),
                                None => ztensor_format::Error::new(
                                    Rule::DecodedTooLarge,
                                    "zstd output passes the decoded size limit",
                                )
                                .expected_found(format!("<= {cap}"), format!("more than {cap}")),
                            };
                            return Err(context(e));
                        }
                        give(&mut buf[..n], &mut total)?;
                    }
                    if let Some(want) = expected.filter(|&want| want != total) {
                        return Err(context(
                            ztensor_format::Error::new(
                                Rule::DecodedSizeMismatch,
                                "zstd output is shorter than expected",
                            )
                            .expected_found(want, total),
                        ));
                    }
                }
                Encoding::Unknown(_) => return unknown_encoding::<u64>(name, role),
            }
            Ok(total)
        };
        let outcome = decode(&mut stored);
        // Every stored byte goes through the digest (what follows the frames too), and a
        // digest that differs is the fault reported first, as when it is checked before
        // decoding.
        let drained = std::io::copy(&mut stored, &mut std::io::sink()).map_err(io_error);
        if let (Some(h), Some(expected)) = (hasher, &c.digest)
            && drained.is_ok()
        {
            let actual = h.finish();
            if actual != *expected {
                return Err(context(
                    ztensor_format::Error::new(
                        Rule::DigestMismatch,
                        "digest differs from the stored bytes",
                    )
                    .expected_found(expected, actual),
                ));
            }
        }
        let total = outcome?;
        drained?;
        Ok(total)
    }

    /// Decodes a whole object of this reader's manifest into the 1.2 object model.
    pub(crate) fn read_checked<'a>(
        &'a self,
        object: ObjectRef<'a>,
        verify: bool,
    ) -> Result<ObjectData<'a>> {
        let name = object.name();
        if let Some(reason) = object.unsupported() {
            return Err(Error::unsupported(reason.clone()));
        }
        let o = object.object();
        let mut components = BTreeMap::new();
        match o.packing {
            Packing::Split => {
                for (role, c) in o.components.iter() {
                    let dtype = c.dtype.known().ok_or_else(|| Error::dtype_unknown(name, role))?;
                    let bytes = self.decode_component(object, role, c, verify)?;
                    components.insert(
                        role.to_owned(),
                        ComponentData { dtype, logical_type: c.logical_type.clone(), bytes },
                    );
                }
            }
            Packing::V0Single => {
                let c = &o.components[role::DATA];
                let dtype =
                    c.dtype.known().ok_or_else(|| Error::dtype_unknown(name, role::DATA))?;
                let blob = self.decode_component(object, role::DATA, c, verify)?;
                let big = *c.byte_order() == ByteOrder::Big;
                let context =
                    |e: ztensor_format::Error| Error::from(e.in_object(name).at(c.offset));
                let (unpacked, index_role) = match o.format {
                    Format::SparseCsr => (
                        unpack_v0_csr(&blob, o.shape[0], dtype, big).map_err(context)?,
                        role::INDICES,
                    ),
                    _ => (
                        unpack_v0_coo(&blob, o.shape.len(), dtype, big).map_err(context)?,
                        role::COORDS,
                    ),
                };
                let part = |bytes: Vec<u8>, dtype| ComponentData {
                    dtype,
                    logical_type: None,
                    bytes: Cow::Owned(bytes),
                };
                components.insert(role::VALUES.to_owned(), part(unpacked.values, dtype));
                components.insert(index_role.to_owned(), part(unpacked.indices, DType::U64));
                if o.format == Format::SparseCsr {
                    components.insert(role::INDPTR.to_owned(), part(unpacked.indptr, DType::U64));
                }
            }
        }
        let format = o.format.clone();
        Ok(ObjectData {
            name: o.name.clone(),
            shape: o.shape.clone(),
            format,
            attributes: o.attributes.as_deref().map(Cow::Borrowed),
            components,
        })
    }

    /// Checks decoded data against the data rules (see [`Object::check`]).
    pub(crate) fn check_decoded(&self, data: &ObjectData<'_>, strict: bool) -> Result<()> {
        let name = data.name.as_str();
        let context = |e: ztensor_format::Error| Error::from(e.in_object(name));
        if self.version() != Version::V0_1 {
            for (role, c) in &data.components {
                if c.dtype == DType::Bool {
                    check_bool(&c.bytes).map_err(|e| context(e.in_component(role)))?;
                }
            }
        }
        check_sparse(data, &data.format, strict).map(drop)
    }
}

/// The structure rules of a CSR or COO object's decoded data, read as `format` (the object's
/// own, or the sparse layout another format's object has): CSR row pointers start at 0, never
/// decrease and end at the count of indices, each row's columns lie below the column count
/// (and, with `strict`, increase strictly), and values and indices agree in count; COO
/// coordinates lie within the shape, one tuple a value. Index components may be of any
/// unsigned width. Returns the coordinates of a COO object (widened), for rules a format adds;
/// other formats pass with nothing.
///
/// # Errors
/// The rule broken, naming the object (and the component, for indices that do not widen).
pub fn check_sparse(
    data: &ObjectData<'_>,
    format: &Format,
    strict: bool,
) -> Result<Option<Vec<u64>>> {
    let name = data.name.as_str();
    let context = |e: ztensor_format::Error| Error::from(e.in_object(name));
    let values_count = || -> Option<u64> {
        let v = data.components.get(role::VALUES)?;
        let size = v.dtype.size() * v.logical_type.as_ref().map_or(1, LogicalType::ratio);
        Some(v.bytes.len() as u64 / size.max(1))
    };
    let widened = |role: &str| -> Result<Option<Vec<u64>>> {
        data.components
            .get(role)
            .map(|c| indices_to_u64(c.dtype, &c.bytes).map_err(|e| context(e.in_component(role))))
            .transpose()
    };
    match format {
        Format::SparseCsr => {
            let (Some(indices), Some(indptr)) = (widened(role::INDICES)?, widened(role::INDPTR)?)
            else {
                return Ok(None);
            };
            if let [rows, cols] = data.shape[..] {
                check_csr(rows, cols, &indptr, &indices, strict).map_err(context)?;
            }
            if values_count().is_some_and(|n| n != indices.len() as u64) {
                return Err(context(ztensor_format::Error::new(
                    Rule::SparseNnzMismatch,
                    "values and indices hold different counts",
                )));
            }
            Ok(None)
        }
        Format::SparseCoo => {
            let Some(coords) = widened(role::COORDS)? else { return Ok(None) };
            check_coo(&data.shape, &coords, values_count().unwrap_or(0)).map_err(context)?;
            Ok(Some(coords))
        }
        _ => Ok(None),
    }
}

/// A component's stored bytes read in order, hashed as they pass when asked.
struct StoredReader<'a, S> {
    source: &'a S,
    at: u64,
    end: u64,
    hasher: Option<&'a mut crate::codec::Hasher>,
}

impl<S: ReadAt> std::io::Read for StoredReader<'_, S> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = usize::try_from(self.end.saturating_sub(self.at))
            .unwrap_or(usize::MAX)
            .min(buf.len())
            .min(4 << 20);
        self.source.read_exact_at(self.at, &mut buf[..n])?;
        if let Some(h) = self.hasher.as_deref_mut() {
            h.update(&buf[..n]);
        }
        self.at += n as u64;
        Ok(n)
    }
}

/// Reads from `r` until `buf` is full or the stream ends; how many bytes came.
fn fill(r: &mut dyn std::io::Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// A zstd component read by a build without the `zstd` feature: unsupported, as an unknown
/// encoding is, with the reason.
pub(crate) fn no_zstd<T>(name: &str, role: &str) -> Result<T> {
    Err(Error::unsupported(
        ztensor_format::Error::new(Rule::EncodingUnknown, crate::codec::NO_ZSTD)
            .in_object(name)
            .in_component(role),
    ))
}

/// An unknown encoding met while decoding. Validation marks objects with unknown encodings
/// unsupported, so this is not reached; it still answers with the right error rather than
/// panicking.
pub(crate) fn unknown_encoding<T>(name: &str, role: &str) -> Result<T> {
    Err(Error::unsupported(
        ztensor_format::Error::new(Rule::EncodingUnknown, "unknown encoding")
            .in_object(name)
            .in_component(role),
    ))
}
