//! One interface over every input format: a [`TensorSource`] lists objects (names, shapes,
//! types, attributes) and gives their decoded bytes, checked against the digests the format has;
//! a [`TensorSink`] writes everything a source holds. Each format implements them once, in its
//! own crate (zTensor 0.1/1.x in `ztensor-io`, zTensor 2, safetensors, TensorBuffers, …), and
//! the commands that look at files or convert them are written once, against these traits.

use std::borrow::Cow;

use ztensor_format::{Attributes, DType, Digest, Encoding, Format, LogicalType, StorageType};

use std::any::Any;
use std::sync::Arc;

use crate::data::ObjectData;
use crate::error::Result;
use crate::source::ReadAt;

/// The piece size objects are read and checked in when no caller says otherwise (4 MiB): what
/// a reader holds of a huge object at once.
pub const PIECE: usize = 4 << 20;

/// What an object of a tensor source is, whatever format it comes from: the 1.2 object model.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectInfo<'a> {
    /// Its name.
    pub name: Cow<'a, str>,
    /// Its shape.
    pub shape: Cow<'a, [u64]>,
    /// Its format (`Dense` for every tensor of a format without others).
    pub format: Format,
    /// Its attributes, when the format has them and it has any.
    pub attributes: Option<Cow<'a, Attributes>>,
    /// Its components, sorted by role.
    pub components: Vec<ComponentInfo<'a>>,
    /// Why this implementation cannot decode it (a dtype with no zTensor type, an unknown
    /// encoding), as the error reading it gives (its rule, and `refused()` saying a dtype was
    /// what stood in the way), or `None`.
    pub unsupported: Option<ztensor_format::Error>,
    /// Where it lies when a source spans several files (the shard's file name).
    pub location: Option<Cow<'a, str>>,
}

impl ObjectInfo<'_> {
    /// The component of `role`.
    pub fn component(&self, role: &str) -> Option<&ComponentInfo<'_>> {
        self.components.iter().find(|c| c.role == role)
    }

    /// Stored bytes of all its components.
    pub fn stored_len(&self) -> u64 {
        self.components.iter().map(|c| c.stored_len).sum()
    }
}

/// One component of an object as decoded (as [`TensorSource::read`] gives it): what
/// [`TensorSource::verify`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// Its role.
    pub role: String,
    /// Its storage type.
    pub dtype: DType,
    /// Its logical type, if any.
    pub logical_type: Option<LogicalType>,
    /// Its decoded length in bytes.
    pub len: u64,
}

impl Decoded {
    /// A component of `dtype` with no logical type.
    pub fn plain(role: &str, dtype: DType, len: u64) -> Decoded {
        Decoded { role: role.to_owned(), dtype, logical_type: None, len }
    }
}

/// One component of an [`ObjectInfo`].
#[derive(Debug, Clone, PartialEq)]
pub struct ComponentInfo<'a> {
    /// Its role (`data` for a dense tensor).
    pub role: Cow<'a, str>,
    /// The storage type; `Unknown` with the source format's own name for types zTensor lacks.
    pub dtype: StorageType,
    /// The logical type, if any.
    pub logical_type: Option<LogicalType>,
    /// Decoded length in bytes, when known without decoding.
    pub decoded_len: Option<u64>,
    /// Stored length in bytes.
    pub stored_len: u64,
    /// Where the stored bytes start in their file, when they lie in one.
    pub offset: Option<u64>,
    /// The encoding of the stored bytes.
    pub encoding: Encoding,
    /// The digest of the stored bytes, when the format keeps one.
    pub digest: Option<Digest>,
}

impl ComponentInfo<'_> {
    /// The storage type, when known.
    pub fn known_dtype(&self) -> Option<DType> {
        self.dtype.known()
    }
}

/// Where the stored bytes of one object lie: the ranges of `source` that reading it reads, in
/// the order it reads them ([`TensorSource::stored_ranges`]).
pub struct StoredRanges<'a> {
    /// The byte source they lie in.
    pub source: &'a dyn ReadAt,
    /// The ranges, in the order a read of the object reads them.
    pub ranges: Vec<std::ops::Range<u64>>,
}

impl std::fmt::Debug for StoredRanges<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredRanges")
            .field("source_len", &self.source.len())
            .field("ranges", &self.ranges)
            .finish()
    }
}

/// Tells the byte sources of `source` that the stored bytes of its objects `order` are about
/// to be read, in that order ([`ReadAt::will_need`]): a remote object then fetches them ahead
/// in a few large requests instead of a request for each piece of each object. Each source an
/// object lies in (a shard of a checkpoint) is told its own part of the order; a source in
/// memory needs no telling. What a source cannot say the place of is left out. Every
/// consumer that reads a source's objects in an order of its own calls this first.
pub fn will_read(source: &dyn TensorSource, order: impl IntoIterator<Item = usize>) {
    let mut by_source: Vec<(&dyn ReadAt, Vec<std::ops::Range<u64>>)> = Vec::new();
    for index in order {
        let Some(stored) = source.stored_ranges(index) else { continue };
        if stored.source.as_slice().is_some() {
            continue;
        }
        match by_source.iter_mut().find(|(s, _)| std::ptr::addr_eq(*s, stored.source)) {
            Some((_, ranges)) => ranges.extend(stored.ranges),
            None => by_source.push((stored.source, stored.ranges)),
        }
    }
    for (bytes, ranges) in by_source {
        if !ranges.is_empty() {
            bytes.will_need(&ranges);
        }
    }
}

/// Where a dense object's raw little-endian bytes lie, so a reader (the parallel engine) can
/// read them in pieces itself: `len` bytes of `source` at `offset`. Only offered for bytes
/// with no digest to check and nothing to decode.
#[derive(Clone, Copy)]
pub struct RawRange<'a> {
    /// The byte source they lie in.
    pub source: &'a dyn ReadAt,
    /// Where they start.
    pub offset: u64,
    /// How many.
    pub len: u64,
}

impl RawRange<'_> {
    /// Reads the range in pieces of at most `piece` bytes into one reused buffer, handing each
    /// to `f` in order: a huge tensor costs one piece of memory.
    ///
    /// # Errors
    /// The source's read errors, with the file offset that failed.
    pub fn read_pieces(&self, piece: u64, mut f: impl FnMut(&[u8])) -> Result<()> {
        self.try_pieces(piece, |bytes| {
            f(bytes);
            Ok(())
        })
    }

    /// As [`RawRange::read_pieces`], for an `f` that may fail: reading stops at its first
    /// error, which is returned as it was.
    ///
    /// # Errors
    /// The source's read errors, with the file offset that failed; `f`'s.
    pub fn try_pieces(&self, piece: u64, mut f: impl FnMut(&[u8]) -> Result<()>) -> Result<()> {
        let piece = piece.clamp(1, self.len.max(1));
        let mut buf = vec![0u8; usize::try_from(piece).unwrap_or(0)];
        let mut at = 0u64;
        while at < self.len {
            let n = usize::try_from((self.len - at).min(piece)).unwrap_or(0);
            let offset = self.offset.saturating_add(at);
            self.source.read_exact_at(offset, &mut buf[..n]).map_err(|e| {
                crate::Error::io(format!("reading byte {offset} of the source"), None, e)
            })?;
            f(&buf[..n])?;
            at += n as u64;
        }
        Ok(())
    }
}

impl std::fmt::Debug for RawRange<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawRange").field("offset", &self.offset).field("len", &self.len).finish()
    }
}

/// A file of tensors in any format, as the commands read it: objects listed by index in the
/// source's own order, decoded on demand.
pub trait TensorSource: Sync {
    /// What the input is, for people: `zTensor 1.2`, `safetensors`, `TensorBuffers`, ….
    fn format_name(&self) -> Cow<'_, str>;

    /// File-level attributes in the zTensor model (safetensors `__metadata__` as a text map,
    /// TensorBuffers metadata under `tensorbuffers.*` keys).
    fn attributes(&self) -> Option<Cow<'_, Attributes>>;

    /// As [`TensorSource::attributes`], for sources that build their attributes on demand and
    /// may fail to (a value count past the limits, memory that cannot be had): writers and
    /// reports call this, so that attributes are never dropped without a word.
    ///
    /// # Errors
    /// What stopped the attributes being built.
    fn try_attributes(&self) -> Result<Option<Cow<'_, Attributes>>> {
        Ok(self.attributes())
    }

    /// What the file attributes are called in the source format, for messages
    /// (`__metadata__` for safetensors).
    fn attributes_origin(&self) -> Cow<'_, str> {
        Cow::Borrowed("the file attributes")
    }

    /// How many objects.
    fn len(&self) -> usize;

    /// Whether it holds no object.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Object `index` (`0..len()`); `None` past the end.
    fn info(&self, index: usize) -> Option<ObjectInfo<'_>>;

    /// The name of object `index`, without describing the rest of it.
    fn name(&self, index: usize) -> Option<Cow<'_, str>> {
        self.info(index).map(|o| Cow::Owned(o.name.into_owned()))
    }

    /// The index of the first object called `name`.
    fn find(&self, name: &str) -> Option<usize> {
        (0..self.len()).find(|&i| self.name(i).is_some_and(|n| n == name))
    }

    /// Decodes object `index` into the 1.2 object model, checking every digest the format keeps
    /// on the very bytes decoded.
    ///
    /// # Errors
    /// `NotFound` past the end; `Unsupported` for objects that cannot be decoded here; the
    /// format's decoding and digest errors; I/O errors.
    fn read(&self, index: usize) -> Result<ObjectData<'_>>;

    /// The decoded bytes of object `index`'s components as [`TensorSource::read`] gives them,
    /// in pieces of at most `piece` bytes: `each(role, piece)`, component after component in
    /// role order. Sources that can decode in pieces (zTensor, every layout) hold a few
    /// pieces whatever the object's size; the default reads the object whole and hands it
    /// over in pieces. Digests are checked as for `read`, but only when this returns: a caller
    /// must not publish what it was given before then.
    ///
    /// # Errors
    /// As [`TensorSource::read`], and `each`'s errors.
    fn read_pieces(
        &self,
        index: usize,
        piece: usize,
        each: &mut dyn FnMut(&str, &[u8]) -> Result<()>,
    ) -> Result<()> {
        // Bytes that lie raw in the source (no digest, little-endian) are read in pieces.
        if let Some(info) = self.info(index).filter(|o| {
            o.format == Format::Dense && o.components.len() == 1 && o.unsupported.is_none()
        }) && let Some(range) = self.raw(index)
        {
            let role = info.components[0].role.clone();
            return range.try_pieces(piece.max(1) as u64, |bytes| each(&role, bytes));
        }
        hand_over(&self.read(index)?, piece, each)
    }

    /// Whether [`TensorSource::read_pieces`], [`TensorSource::read_part`] and
    /// [`TensorSource::verify`] hold a few pieces of object `index` rather than all of it
    /// decoded: writers then take it part by part instead of whole. zTensor: every object; the
    /// default: none (its pieces are cut from a whole read).
    fn reads_in_pieces(&self, index: usize) -> bool {
        let _ = index;
        false
    }

    /// The decoded bytes of component `role` of object `index`, as [`TensorSource::read`]
    /// gives them, in pieces of at most `piece` bytes; digests as for
    /// [`TensorSource::read_pieces`]. Sources that keep components apart (zTensor) decode that
    /// one alone; the default reads the object through and keeps that component's pieces.
    ///
    /// # Errors
    /// As [`TensorSource::read_pieces`].
    fn read_part(
        &self,
        index: usize,
        role: &str,
        piece: usize,
        each: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        self.read_pieces(index, piece, &mut |r, bytes| if r == role { each(bytes) } else { Ok(()) })
    }

    /// Reads object `index` through in pieces, checking every digest the format keeps and the
    /// data rules of [`TensorSource::check`], and says what each component decoded to, in role
    /// order (as [`TensorSource::read`] gives them). zTensor checks its rules as the pieces
    /// pass (memory: a few pieces, whatever the object's size); the default reads the pieces
    /// and counts them, for formats with no data rules of their own.
    ///
    /// # Errors
    /// As [`TensorSource::read`] and [`TensorSource::check`].
    fn verify(&self, index: usize) -> Result<Vec<Decoded>> {
        let info =
            self.info(index).ok_or_else(|| crate::Error::not_found(&format!("#{index}"), None))?;
        let mut lengths: Vec<(String, u64)> = Vec::new();
        self.read_pieces(index, 4 << 20, &mut |role, bytes| {
            match lengths.last_mut() {
                Some((r, n)) if r == role => *n += bytes.len() as u64,
                _ => lengths.push((role.to_owned(), bytes.len() as u64)),
            }
            Ok(())
        })?;
        info.components
            .iter()
            .map(|c| {
                let dtype = c
                    .dtype
                    .known()
                    .ok_or_else(|| crate::Error::dtype_unknown(&info.name, &c.role))?;
                let len = lengths.iter().find(|(r, _)| *r == *c.role).map_or(0, |(_, n)| *n);
                Ok(Decoded {
                    role: c.role.clone().into_owned(),
                    dtype,
                    logical_type: c.logical_type.clone(),
                    len,
                })
            })
            .collect()
    }

    /// Checks decoded data of object `index` against the format's data rules (zTensor's CSR,
    /// COO and bool rules; nothing for formats without such rules).
    ///
    /// # Errors
    /// The first rule broken.
    fn check(&self, index: usize, data: &ObjectData<'_>) -> Result<()> {
        let _ = (index, data);
        Ok(())
    }

    /// Where the raw bytes of dense object `index` lie, when a reader may read them itself
    /// (raw, little-endian, no digest to check).
    fn raw(&self, index: usize) -> Option<RawRange<'_>> {
        let _ = index;
        None
    }

    /// Where the stored bytes of object `index` lie, in the order reading it reads them: what
    /// [`will_read`] tells the byte source before objects are read. The default gives the
    /// raw range where there is one ([`TensorSource::raw`]); formats with digests, encodings
    /// or several components say where theirs lie.
    fn stored_ranges(&self, index: usize) -> Option<StoredRanges<'_>> {
        let raw = self.raw(index)?;
        let end = raw.offset.checked_add(raw.len)?;
        Some(StoredRanges {
            source: raw.source,
            ranges: std::iter::once(raw.offset..end).collect(),
        })
    }

    /// Entries of the input this source does not present as objects, by name: what a
    /// Distributed Checkpoint saved that is not a tensor (a step count, a scheduler's state).
    /// Commands name them, so nothing is dropped without a word. None for most formats.
    fn left_out(&self) -> Vec<String> {
        Vec::new()
    }

    /// The container the source's objects lie in as stored, and which of its objects it
    /// presents, so that a sink of that container's own format can carry them as stored
    /// (copying stored bytes, encodings and digests where the target can hold them) instead of
    /// decoding and encoding them again. The zTensor 0.1/1.x reader gives its file (a view of
    /// some of its objects, that file and their positions); `None` for sources whose objects a
    /// sink can only read decoded.
    fn stored(&self) -> Option<Stored<'_>> {
        None
    }
}

/// The container behind a [`TensorSource`] ([`TensorSource::stored`]): its bytes, the
/// container as its format's crate parsed it, and which of its objects the source presents.
pub struct Stored<'a> {
    /// The container's bytes.
    pub bytes: &'a dyn ReadAt,
    /// The container as the crate of its format parsed it, shared: opaque here, downcast by
    /// that crate (`ztensor_io::ZtensorObjects::of`), so a sink of the same format reopens it
    /// without parsing it again.
    pub parsed: Arc<dyn Any + Send + Sync>,
    /// The positions, in the container's object order, of the objects the source presents,
    /// ascending; `None` when it presents them all.
    pub positions: Option<Vec<usize>>,
}

impl std::fmt::Debug for Stored<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stored")
            .field("len", &self.bytes.len())
            .field("positions", &self.positions.as_ref().map(Vec::len))
            .finish_non_exhaustive()
    }
}

impl Stored<'_> {
    /// Whether the object at `position` of the container's order is one the source presents.
    pub fn presents(&self, position: usize) -> bool {
        self.positions.as_ref().is_none_or(|p| p.binary_search(&position).is_ok())
    }
}

/// An output that takes everything a [`TensorSource`] holds: a zTensor writer of any version
/// (`ztensor_par::ZtSink`), a safetensors file (`ztensor_foreign::safetensors::SafetensorsSink`)
/// or a TensorBuffers file (`ztensor_tensorbuffers::TbSink`).
pub trait TensorSink {
    /// The sink's error: its format's, which says what the target cannot represent.
    type Error;

    /// What the sink writes, for messages (`zTensor 1.2`, `safetensors`, …).
    fn format_name(&self) -> Cow<'_, str>;

    /// Writes every object of `source`, and its file attributes, checking first what this
    /// format cannot hold; returns how many objects were written.
    ///
    /// # Errors
    /// What the target cannot represent (naming the object), the source's read errors and the
    /// sink's write errors; the output must then be discarded.
    fn write_all(&mut self, source: &dyn TensorSource) -> std::result::Result<usize, Self::Error>;
}

/// Hands the components of `data`, decoded whole, to `each` in pieces of `piece` bytes.
fn hand_over(
    data: &ObjectData<'_>,
    piece: usize,
    each: &mut dyn FnMut(&str, &[u8]) -> Result<()>,
) -> Result<()> {
    for (role, c) in &data.components {
        for chunk in c.bytes.chunks(piece.max(1)) {
            each(role, chunk)?;
        }
    }
    Ok(())
}

/// Refuses `source` (an input of `input_len` bytes) when its objects together decode to more
/// than [`Limits::max_expanded_len`](ztensor_format::Limits::max_expanded_len): checked on
/// what the objects declare, before anything is read or written. Each component counts, so a
/// blob shared by many objects counts once for each: what a copy or conversion, which writes
/// each of them, produces. Returns the total.
///
/// # Errors
/// [`ErrorKind::Format`](crate::ErrorKind::Format) with rule `decoded_too_large`.
pub fn check_expansion(
    source: &dyn TensorSource,
    input_len: u64,
    limits: &ztensor_format::Limits,
) -> Result<u64> {
    expansion(source, input_len, limits, false)
}

/// As [`check_expansion`], for a command that decodes each stored range once however many
/// components share it (a dump, a verification): a blob shared by many objects counts once.
///
/// # Errors
/// [`ErrorKind::Format`](crate::ErrorKind::Format) with rule `decoded_too_large`.
pub fn check_read_expansion(
    source: &dyn TensorSource,
    input_len: u64,
    limits: &ztensor_format::Limits,
) -> Result<u64> {
    expansion(source, input_len, limits, true)
}

fn expansion(
    source: &dyn TensorSource,
    input_len: u64,
    limits: &ztensor_format::Limits,
    shared_once: bool,
) -> Result<u64> {
    let allowed = limits.max_expanded_len(input_len);
    let mut total = 0u64;
    // Stored ranges counted so far (when shared ones count once), with the most any of their
    // components declares.
    let mut counted: std::collections::HashMap<(u64, u64, Encoding), u64> =
        std::collections::HashMap::new();
    for i in 0..source.len() {
        let Some(info) = source.info(i) else { continue };
        for c in &info.components {
            let decoded = c.decoded_len.unwrap_or(c.stored_len);
            let shared = c.offset.filter(|_| shared_once && c.stored_len > 0);
            let Some(offset) = shared else {
                total = total.saturating_add(decoded);
                continue;
            };
            let before = counted.entry((offset, c.stored_len, c.encoding.clone())).or_insert(0);
            if decoded > *before {
                total = total.saturating_add(decoded - *before);
                *before = decoded;
            }
        }
        if total > allowed {
            return Err(ztensor_format::Error::new(
                ztensor_format::ErrorKind::DecodedTooLarge,
                format!(
                    "its objects decode to more than {allowed} bytes (by object {:?}), over {} \
                     times the input's {input_len} bytes: a crafted expansion, or a limit to raise",
                    info.name, limits.max_expansion
                ),
            )
            .into());
        }
    }
    Ok(total)
}

/// The label of shard `index` (counted from 1) of `count`: `00001-of-00003`, both numbers
/// zero-padded to five digits, or to the digits of `count` past 99999 so that every label of a
/// checkpoint has one width and they sort as they number. The one naming rule of every sharded
/// writer (zTensor 1.x `STEM-00001-of-00003.zt`, zTensor 2 the same label in the shard's path).
pub fn shard_label(index: usize, count: usize) -> String {
    let width = count.to_string().len().max(5);
    format!("{index:0width$}-of-{count:0width$}")
}

/// Splits items of `sizes` bytes, in the order given, into consecutive groups of at most
/// `limit` bytes each: an item starts a new group when it would take the current one past
/// `limit`, so an item larger than `limit` is a group of its own. Returns each group's range
/// of item indices; no items give one empty group. The one rule every sharded writer splits
/// by (zTensor 1.x shards in input order, zTensor 2 shards in the order of the names).
pub fn split_by_size(
    sizes: impl IntoIterator<Item = u64>,
    limit: u64,
) -> Vec<std::ops::Range<usize>> {
    let mut groups = Vec::new();
    let (mut start, mut filled, mut count) = (0usize, 0u64, 0usize);
    for (i, bytes) in sizes.into_iter().enumerate() {
        if i > start && filled.saturating_add(bytes) > limit {
            groups.push(start..i);
            start = i;
            filled = 0;
        }
        filled = filled.saturating_add(bytes);
        count = i + 1;
    }
    groups.push(start..count);
    groups
}

/// A source without some of its objects: those `exclude` names are not there. Indices are the
/// kept objects', in the inner source's order.
pub struct Excluding<'a> {
    inner: &'a dyn TensorSource,
    keep: Vec<usize>,
}

impl<'a> Excluding<'a> {
    /// `inner` without the objects whose names `exclude` returns true for.
    pub fn new(inner: &'a dyn TensorSource, exclude: impl Fn(&str) -> bool) -> Excluding<'a> {
        let keep =
            (0..inner.len()).filter(|&i| inner.name(i).is_some_and(|n| !exclude(&n))).collect();
        Excluding { inner, keep }
    }

    /// `inner` with only the objects at `keep` (indices of `inner`, ascending and distinct;
    /// others are ignored), for callers that found them by name already.
    pub fn keeping(inner: &'a dyn TensorSource, mut keep: Vec<usize>) -> Excluding<'a> {
        keep.retain(|&i| i < inner.len());
        keep.sort_unstable();
        keep.dedup();
        Excluding { inner, keep }
    }

    /// How many objects were left out.
    pub fn excluded(&self) -> usize {
        self.inner.len() - self.keep.len()
    }
}

impl std::fmt::Debug for Excluding<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Excluding")
            .field("inner", &self.inner.format_name())
            .field("kept", &self.keep.len())
            .finish()
    }
}

impl TensorSource for Excluding<'_> {
    fn format_name(&self) -> Cow<'_, str> {
        self.inner.format_name()
    }
    fn attributes(&self) -> Option<Cow<'_, Attributes>> {
        self.inner.attributes()
    }
    fn try_attributes(&self) -> Result<Option<Cow<'_, Attributes>>> {
        self.inner.try_attributes()
    }
    fn attributes_origin(&self) -> Cow<'_, str> {
        self.inner.attributes_origin()
    }
    fn len(&self) -> usize {
        self.keep.len()
    }
    fn info(&self, index: usize) -> Option<ObjectInfo<'_>> {
        self.inner.info(*self.keep.get(index)?)
    }
    fn name(&self, index: usize) -> Option<Cow<'_, str>> {
        self.inner.name(*self.keep.get(index)?)
    }
    fn find(&self, name: &str) -> Option<usize> {
        let inner = self.inner.find(name)?;
        self.keep.binary_search(&inner).ok()
    }
    fn read(&self, index: usize) -> Result<ObjectData<'_>> {
        match self.keep.get(index) {
            Some(&i) => self.inner.read(i),
            None => Err(crate::Error::not_found(&format!("#{index}"), None)),
        }
    }
    fn check(&self, index: usize, data: &ObjectData<'_>) -> Result<()> {
        match self.keep.get(index) {
            Some(&i) => self.inner.check(i, data),
            None => Ok(()),
        }
    }
    fn read_pieces(
        &self,
        index: usize,
        piece: usize,
        each: &mut dyn FnMut(&str, &[u8]) -> Result<()>,
    ) -> Result<()> {
        match self.keep.get(index) {
            Some(&i) => self.inner.read_pieces(i, piece, each),
            None => Err(crate::Error::not_found(&format!("#{index}"), None)),
        }
    }
    fn read_part(
        &self,
        index: usize,
        role: &str,
        piece: usize,
        each: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        match self.keep.get(index) {
            Some(&i) => self.inner.read_part(i, role, piece, each),
            None => Err(crate::Error::not_found(&format!("#{index}"), None)),
        }
    }
    fn reads_in_pieces(&self, index: usize) -> bool {
        self.keep.get(index).is_some_and(|&i| self.inner.reads_in_pieces(i))
    }
    fn verify(&self, index: usize) -> Result<Vec<Decoded>> {
        match self.keep.get(index) {
            Some(&i) => self.inner.verify(i),
            None => Err(crate::Error::not_found(&format!("#{index}"), None)),
        }
    }
    fn raw(&self, index: usize) -> Option<RawRange<'_>> {
        self.inner.raw(*self.keep.get(index)?)
    }
    fn stored_ranges(&self, index: usize) -> Option<StoredRanges<'_>> {
        self.inner.stored_ranges(*self.keep.get(index)?)
    }
    fn left_out(&self) -> Vec<String> {
        self.inner.left_out()
    }
    fn stored(&self) -> Option<Stored<'_>> {
        let inner = self.inner.stored()?;
        let positions = match &inner.positions {
            None => self.keep.clone(),
            Some(p) => self.keep.iter().filter_map(|&i| p.get(i).copied()).collect(),
        };
        Some(Stored { positions: Some(positions), ..inner })
    }
}

/// The names of `source` closest to `name`, which it does not hold, closest first (at most
/// three): what "did you mean" offers. Close is within a third of the name's length in edit
/// distance (at least 2); names much longer or shorter cannot be that close and are not
/// measured, as a source's names may be long and many.
pub fn close_names(source: &dyn TensorSource, name: &str) -> Vec<String> {
    let chars = name.chars().count();
    let within = (chars / 3).max(2);
    let mut close: Vec<(usize, String)> = (0..source.len())
        .filter_map(|i| source.name(i))
        .filter(|n| n.len() <= 4 * (chars + within) && n.chars().count().abs_diff(chars) <= within)
        .filter_map(|n| {
            let d = edit_distance(name, &n);
            (d <= within).then(|| (d, n.into_owned()))
        })
        .collect();
    close.sort();
    close.into_iter().take(3).map(|(_, n)| n).collect()
}

/// The Levenshtein distance between `a` and `b`, in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let substitution = previous + usize::from(ca != cb);
            previous = row[j + 1];
            row[j + 1] = substitution.min(previous + 1).min(row[j] + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod close_names_tests {
    use super::*;

    #[test]
    fn distances() {
        for (a, b, d) in [
            ("", "", 0),
            ("abc", "abc", 0),
            ("abc", "abd", 1),
            ("ab", "abc", 1),
            ("kitten", "sitting", 3),
            ("é", "e", 1),
        ] {
            assert_eq!(edit_distance(a, b), d, "{a} {b}");
            assert_eq!(edit_distance(b, a), d, "{b} {a}");
        }
    }

    /// Greedy groups: filled up to the limit exactly, a larger item alone, and one empty group
    /// for nothing.
    #[test]
    fn shard_labels_have_one_width() {
        assert_eq!(shard_label(1, 1), "00001-of-00001");
        assert_eq!(shard_label(2, 2), "00002-of-00002");
        assert_eq!(shard_label(1, 99999), "00001-of-99999");
        assert_eq!(shard_label(99999, 99999), "99999-of-99999");
        assert_eq!(shard_label(1, 100_000), "000001-of-100000");
        assert_eq!(shard_label(100_000, 100_000), "100000-of-100000");
    }

    #[test]
    fn splits_greedily_by_size() {
        let split = |sizes: &[u64], limit| split_by_size(sizes.iter().copied(), limit);
        assert_eq!(split(&[], 10), vec![std::ops::Range { start: 0, end: 0 }]);
        assert_eq!(split(&[4, 6, 1], 10), [0..2, 2..3]);
        assert_eq!(split(&[4, 7, 3], 10), [0..1, 1..3]);
        // A group past the limit (one large item) takes nothing more, not even an empty one.
        assert_eq!(split(&[25, 1, 30, 0, 0], 10), [0..1, 1..2, 2..3, 3..5]);
        assert_eq!(split(&[0, 0, 10, 0], 10), vec![std::ops::Range { start: 0, end: 4 }]);
        assert_eq!(split(&[u64::MAX, 1], u64::MAX - 1), [0..1, 1..2]);
    }
}
