//! Writing zTensor 2 in canonical form (`spec/ztensor-2.md` §5.3): any [`TensorSource`] (every
//! zTensor version, safetensors, TensorBuffers, …) becomes a file whose bytes depend on its
//! content alone.
//!
//! - Objects in the byte order of their names, parts in the byte order of theirs; each blob at
//!   the next multiple of 64 KiB from 65536, zero padding between, the manifest at the next one
//!   after the last blob, the footer right after it.
//! - Parts with identical decoded bytes share one blob (equality confirmed on the bytes, read
//!   back from the output, not taken from a hash); zero-length parts share one empty blob at the
//!   boundary where the next blob starts.
//! - No encoding; every part carries an `xxh3` digest of its bytes.
//! - Parts stream from the source in pieces of a few MiB when the source reads in pieces, so a
//!   tensor of any size costs a few pieces of memory.
//!
//! What was written is read back through this crate's own validation (container, CBOR,
//! schema, layouts) before it is reported written, and a file's sink publishes through a
//! temporary file and a rename.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ztensor_format::{DType, Format, LogicalType, Refused, StorageType};
use ztensor_io::{ObjectData, ObjectInfo, TensorSource};
use ztensor_par::ParOptions;

use crate::cbor::{Value, encode};
use crate::container::{FOOTER_LEN, MAGIC, MAX_MANIFEST, VERSION};
use crate::error::{Error, Result};
use crate::manifest::{Dtype, elements};
use crate::model::{attributes_2_encoded, layout_of, stored_size, types_2};

/// Where canonical form places blobs: multiples of 64 KiB.
pub const CANONICAL_ALIGNMENT: u64 = 1 << 16;

/// How many decoded bytes one piece of a part holds while it streams.
const PIECE: usize = 4 << 20;

/// What a writer may seek in, read back from and cut: a file, or a `Cursor<Vec<u8>>`.
pub trait Output: Read + Write + Seek {
    /// Cuts (or extends with zeros) the output to `len` bytes.
    ///
    /// # Errors
    /// I/O errors.
    fn set_len(&mut self, len: u64) -> std::io::Result<()>;

    /// Told that the `len` bytes at `offset` are written and stay as they are, so that they
    /// can start on their way to the disk while the rest is written (the final sync then waits
    /// for little more than the end). Only a hint: the default does nothing.
    fn written(&mut self, offset: u64, len: u64) {
        let _ = (offset, len);
    }
}

impl Output for std::fs::File {
    fn set_len(&mut self, len: u64) -> std::io::Result<()> {
        std::fs::File::set_len(self, len)
    }

    /// Starts write-back of the range without waiting for it (`sync_file_range` on Linux;
    /// nothing elsewhere).
    fn written(&mut self, offset: u64, len: u64) {
        ztensor_io::low_level::start_writeback(self, offset, len);
    }
}

impl Output for std::io::Cursor<Vec<u8>> {
    fn set_len(&mut self, len: u64) -> std::io::Result<()> {
        let len = usize::try_from(len).map_err(std::io::Error::other)?;
        self.get_mut().resize(len, 0);
        Ok(())
    }
}

/// Told the decoded bytes of each part once it is written (for a progress bar).
pub type Progress = std::sync::Arc<dyn Fn(u64) + Send + Sync>;

/// How to write.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct WriteOptions {
    /// Leave out the file's and the objects' attributes instead of refusing those zTensor 2
    /// cannot hold.
    pub drop_attributes: bool,
    /// Store every part under `zt.zstd-seekable/1` at this zstd level (1 MiB frames compressed
    /// in parallel), instead of raw. The file is then not in canonical form (which has no
    /// encodings), and its bytes depend on the zstd library's.
    pub zstd: Option<i32>,
    /// Told the decoded bytes of each part once it is written.
    pub progress: Option<Progress>,
    /// With zstd, what the compression runs on, as the 1.x engine's: a pool of exactly
    /// [`ParOptions::threads`] workers (named `zt-work-{i}`; 0: one per core), and
    /// [`ParOptions::budget_for`] those threads as the most bytes held by parts compressed
    /// ahead of their turn (what was read of them and what they compressed to; a part larger
    /// than half of it streams through the encoder when its turn comes). A raw write runs on
    /// the calling thread alone. Neither setting changes the bytes written.
    pub par: ParOptions,
}

impl std::fmt::Debug for WriteOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteOptions")
            .field("drop_attributes", &self.drop_attributes)
            .field("zstd", &self.zstd)
            .field("progress", &self.progress.is_some())
            .field("par", &self.par)
            .finish()
    }
}

impl WriteOptions {
    /// These options, telling `progress` the decoded bytes of each part once it is written.
    #[must_use]
    pub fn progress(mut self, progress: Progress) -> WriteOptions {
        self.progress = Some(progress);
        self
    }

    /// These options, storing parts under `zt.zstd-seekable/1` at `level` (`None`: raw, the
    /// canonical form).
    #[must_use]
    pub fn zstd(mut self, level: Option<i32>) -> WriteOptions {
        self.zstd = level;
        self
    }

    /// These options, compressing on `par`'s threads within its memory budget (see
    /// [`WriteOptions::par`]).
    #[must_use]
    pub fn par(mut self, par: ParOptions) -> WriteOptions {
        self.par = par;
        self
    }

    /// These options, leaving attributes out when `drop` is set.
    #[must_use]
    pub fn drop_attributes(mut self, drop: bool) -> WriteOptions {
        self.drop_attributes = drop;
        self
    }
}

/// What a write produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Summary {
    /// Objects written.
    pub objects: usize,
    /// Parts written (every part of every object).
    pub parts: usize,
    /// Distinct blobs in the file (parts that share one are counted once).
    pub blobs: usize,
    /// Decoded bytes of every part, shared or not.
    pub decoded: u64,
    /// The file's length.
    pub len: u64,
}

fn align(offset: u64) -> Result<u64> {
    offset
        .checked_add(CANONICAL_ALIGNMENT - 1)
        .map(|n| n & !(CANONICAL_ALIGNMENT - 1))
        .ok_or_else(|| Error::io("placing a blob", std::io::Error::other("past 2^64 bytes")))
}

/// One part as it will be written: its types and where its bytes come from.
pub(crate) struct PlannedPart {
    pub(crate) role: String,
    pub(crate) dtype: Dtype,
    pub(crate) logical: Option<String>,
    /// A 1.x `bool` component: its bytes are made 0 or 1 ([`bool_piece`]).
    pub(crate) bools: bool,
}

/// One object as it will be written.
pub(crate) struct Planned {
    pub(crate) layout: String,
    pub(crate) shape: Vec<u64>,
    pub(crate) attributes: Option<Vec<u8>>,
    pub(crate) parts: Vec<PlannedPart>,
}

/// Object `info` in zTensor 2 terms, or why it cannot be written.
/// Whether the components `info` lists are those a read gives. A v0.1 sparse tensor lists the
/// one blob it is stored in and reads as its three arrays: it is planned from a read.
pub(crate) fn listed_as_read(info: &ObjectInfo<'_>) -> bool {
    match info.format.required_roles() {
        Some(roles) if info.format != Format::Dense => {
            info.components.iter().all(|c| roles.contains(&c.role.as_ref()))
        }
        _ => true,
    }
}

/// Object `info` in zTensor 2 terms (its parts from `data` when given: see
/// [`listed_as_read`]), or why it cannot be written.
pub(crate) fn plan(
    info: &ObjectInfo<'_>,
    data: Option<&ObjectData<'_>>,
    options: &WriteOptions,
) -> Result<Planned> {
    let name = info.name.as_ref();
    let within = |e: Error| e.within(&format!("object {name:?}"));
    if let Some(reason) = &info.unsupported {
        // The reason names the object already when its source put it there.
        return Err(if reason.object() == Some(name) {
            Error::unrepresentable(
                Refused::Dtype,
                format!("{reason}; it cannot be decoded here, so it cannot be written"),
            )
        } else {
            within(Error::unrepresentable(
                Refused::Dtype,
                format!("it cannot be decoded here, so it cannot be written: {reason}"),
            ))
        });
    }
    if name.is_empty() || name.len() > crate::manifest::MAX_NAME || name.contains('\0') {
        return Err(within(Error::unrepresentable(
            Refused::Dtype,
            "zTensor 2 names are 1 to 1024 bytes without U+0000",
        )));
    }
    if info.components.is_empty() {
        return Err(within(Error::unrepresentable(
            Refused::Dtype,
            "a zTensor 2 object has at least one part",
        )));
    }
    let n = elements(&info.shape).filter(|_| info.shape.len() <= crate::manifest::MAX_RANK);
    let Some(n) = n else {
        return Err(within(Error::unrepresentable(
            Refused::Dtype,
            "zTensor 2 shapes have rank 64 at most and fewer than 2^64 elements",
        )));
    };
    let listed: Vec<(&str, StorageType, Option<&LogicalType>, Option<u64>)> = match data {
        Some(data) => data
            .components
            .iter()
            .map(|(role, c)| {
                let len = Some(c.bytes.len() as u64);
                (role.as_str(), StorageType::Known(c.dtype), c.logical_type.as_ref(), len)
            })
            .collect(),
        None => info
            .components
            .iter()
            .map(|c| (c.role.as_ref(), c.dtype.clone(), c.logical_type.as_ref(), c.decoded_len))
            .collect(),
    };
    let mut parts = Vec::with_capacity(listed.len());
    for (role, storage, logical_type, decoded_len) in listed {
        let Some(dtype) = storage.known() else {
            return Err(within(Error::unrepresentable(
                Refused::Dtype,
                format!("component {role:?} has dtype {storage}, which zTensor 2 lacks"),
            )));
        };
        let (dtype, logical) = types_2(dtype, logical_type)
            .map_err(|e| within(e.within(&format!("component {role:?}"))))?;
        if role.is_empty() || role.len() > crate::manifest::MAX_NAME || role.contains('\0') {
            return Err(within(Error::unrepresentable(
                Refused::Dtype,
                format!("component {role:?}: zTensor 2 part names are 1 to 1024 bytes"),
            )));
        }
        // A dense tensor's size follows its type in zTensor 2: a 1.x logical type that zTensor
        // 2 registers with another size (1.x FP4 holds one value a byte) does not fit.
        if info.format == Format::Dense
            && let (Some(len), Some(size)) =
                (decoded_len, stored_size(dtype, logical.as_deref(), n))
            && len != size
        {
            return Err(within(Error::unrepresentable(
                Refused::Dtype,
                format!(
                    "{n} elements of {} take {size} bytes in zTensor 2, and this tensor holds \
                     {len}",
                    logical.as_deref().unwrap_or(dtype.name())
                ),
            )));
        }
        let bools = storage.known() == Some(DType::Bool);
        parts.push(PlannedPart { role: role.to_owned(), dtype, logical, bools });
    }
    parts.sort_by(|a, b| a.role.as_bytes().cmp(b.role.as_bytes()));
    let attributes = match (&info.attributes, options.drop_attributes) {
        (Some(a), false) => attributes_2_encoded(a, 4, Refused::ObjectAttributes)
            .map_err(within)?
            .map(<[u8]>::to_vec),
        _ => None,
    };
    Ok(Planned { layout: layout_of(&info.format), shape: info.shape.to_vec(), attributes, parts })
}

/// `piece` of a `bool` part with every non-zero byte made 1 (zTensor 0.1 reads any non-zero
/// byte as true; zTensor 2, as 1.x, holds only 0 and 1), copied into `scratch` only when a byte
/// changes.
pub(crate) fn bool_piece<'a>(piece: &'a [u8], scratch: &'a mut Vec<u8>) -> &'a [u8] {
    if piece.iter().all(|&b| b <= 1) {
        return piece;
    }
    scratch.clear();
    scratch.extend(piece.iter().map(|&b| u8::from(b != 0)));
    scratch
}

/// What gives a part's bytes: called once, it hands each piece in order to its argument.
pub(crate) type Fill<'a> = dyn FnMut(&mut dyn FnMut(&[u8]) -> Result<()>) -> Result<()> + 'a;

/// The state of one write.
struct Placer<'o> {
    out: &'o mut dyn Output,
    /// Where the last blob ended.
    cursor: u64,
    /// Blobs written, by (length, XXH3-64), to share identical ones: the first of each key
    /// (a few bytes a blob, not a list each).
    by_content: HashMap<(u64, u64), u64>,
    /// Blobs written after the first of their key (bytes of the same length and hash that
    /// differ), in the order written: all but never any.
    collided: HashMap<(u64, u64), Vec<u64>>,
    /// The empty blob, once one is placed.
    empty: Option<u64>,
    blobs: usize,
    /// The zstd level parts are encoded at (`zt.zstd-seekable/1`), if they are.
    zstd: Option<i32>,
    /// The pool zstd parts are compressed on.
    pool: Option<Arc<rayon::ThreadPool>>,
    /// Where the bytes not yet handed to [`Output::written`] start.
    unannounced: u64,
}

/// How many final bytes the writer gathers before it starts them on their way to the disk:
/// one call per this many, not one per small part.
const WRITEBACK_STEP: u64 = 8 << 20;

impl Placer<'_> {
    fn io(what: &str) -> impl Fn(std::io::Error) -> Error + '_ {
        move |e| Error::io(what, e)
    }

    /// Whether the `len` bytes at `a` and at `b` of the output are the same.
    fn same(&mut self, a: u64, b: u64, len: u64) -> Result<bool> {
        // Pieces of at most PIECE bytes: the casts below cannot truncate.
        let size = usize::try_from(len).map_or(PIECE, |l| l.min(PIECE));
        let (mut x, mut y) = (vec![0u8; size], vec![0u8; size]);
        let (mut a, mut b, mut left) = (a, b, len);
        while left > 0 {
            #[allow(clippy::cast_possible_truncation)]
            let n = left.min(size as u64) as usize;
            for (at, buf) in [(a, &mut x), (b, &mut y)] {
                self.out.seek(SeekFrom::Start(at)).map_err(Self::io("reading back a blob"))?;
                self.out.read_exact(&mut buf[..n]).map_err(Self::io("reading back a blob"))?;
            }
            if x[..n] != y[..n] {
                return Ok(false);
            }
            (a, b, left) = (a + n as u64, b + n as u64, left - n as u64);
        }
        Ok(true)
    }

    /// Writes one part's bytes, given by `fill` (which calls its argument with each piece in
    /// order), at the next boundary; returns where the part's blob is and its digest string.
    fn part(&mut self, bools: bool, fill: &mut Fill<'_>) -> Result<Placed> {
        let offset = align(self.cursor)?;
        self.out.seek(SeekFrom::Start(offset)).map_err(Self::io("writing a blob"))?;
        // The digest covers the decoded bytes; sharing compares the stored ones.
        let mut decoded_hash = xxhash_rust::xxh3::Xxh3::new();
        let mut stored_hash = xxhash_rust::xxh3::Xxh3::new();
        let (mut decoded_len, mut len) = (0u64, 0u64);
        let out = &mut *self.out;
        let mut scratch = Vec::new();
        let pool = &self.pool;
        let mut encoder =
            self.zstd.map(|level| crate::seekable::Encoder::with_pool(level, pool.clone()));
        // Raw parts are stored as they decode: one hash serves both.
        let encoded = encoder.is_some();
        let mut store = |bytes: &[u8]| -> Result<()> {
            if encoded {
                stored_hash.update(bytes);
            }
            len += bytes.len() as u64;
            out.write_all(bytes).map_err(Self::io("writing a blob"))
        };
        fill(&mut |piece| {
            let piece = if bools { bool_piece(piece, &mut scratch) } else { piece };
            decoded_hash.update(piece);
            decoded_len += piece.len() as u64;
            match &mut encoder {
                Some(e) => e.push(piece, &mut store),
                None => store(piece),
            }
        })?;
        if let Some(e) = encoder {
            e.finish(&mut store)?;
        }
        let decoded_digest = decoded_hash.digest();
        let hash = if encoded { stored_hash.digest() } else { decoded_digest };
        self.settle(offset, len, hash, decoded_digest, decoded_len)
    }

    /// Writes a part compressed ahead of its turn at the next boundary.
    fn part_compressed(&mut self, part: &Compressed) -> Result<Placed> {
        let offset = align(self.cursor)?;
        self.out.seek(SeekFrom::Start(offset)).map_err(Self::io("writing a blob"))?;
        let mut len = 0u64;
        for piece in &part.stream {
            self.out.write_all(piece).map_err(Self::io("writing a blob"))?;
            len += piece.len() as u64;
        }
        self.settle(offset, len, part.stored_hash, part.decoded_hash, part.decoded_len)
    }

    /// Where the `len` stored bytes just written at `offset` (their xxh3 `hash`; the decoded
    /// bytes' `decoded_hash` and length) end up: an earlier identical blob (what was written
    /// goes again), the one empty blob, or here.
    fn settle(
        &mut self,
        offset: u64,
        len: u64,
        hash: u64,
        decoded_hash: u64,
        decoded_len: u64,
    ) -> Result<Placed> {
        let placed = |blob| Placed { blob, digest: decoded_hash, decoded_len };
        if len == 0 {
            // One empty blob, where the next blob will start (it holds no byte, so it overlaps
            // nothing).
            let at = *self.empty.get_or_insert(offset);
            return Ok(placed((at, 0)));
        }
        let key = (len, hash);
        if let Some(&first) = self.by_content.get(&key) {
            let more = self.collided.get(&key).cloned().unwrap_or_default();
            for earlier in std::iter::once(first).chain(more) {
                if self.same(earlier, offset, len)? {
                    // Shared: what was just written goes again.
                    self.out.set_len(self.cursor).map_err(Self::io("sharing a blob"))?;
                    return Ok(placed((earlier, len)));
                }
            }
            self.collided.entry(key).or_default().push(offset);
        } else {
            self.by_content.insert(key, offset);
        }
        self.blobs += 1;
        self.cursor = offset + len;
        // What lies before the cursor stays: a blob found again later is cut after it. The
        // range ends on a boundary of 64 KiB (a multiple of any page size), so that such a cut
        // never falls inside a page already on its way to the disk (which the kernel would
        // wait for, then write again).
        let end = self.cursor / CANONICAL_ALIGNMENT * CANONICAL_ALIGNMENT;
        if end.saturating_sub(self.unannounced) >= WRITEBACK_STEP {
            self.out.written(self.unannounced, end - self.unannounced);
            self.unannounced = end;
        }
        Ok(placed((offset, len)))
    }
}

/// A part compressed ahead of its turn (`zt.zstd-seekable/1`): its stream in pieces (the
/// frames, then the seek table), the xxh3 of those bytes, and the xxh3 and length of the
/// decoded ones.
struct Compressed {
    stream: Vec<Vec<u8>>,
    stored_hash: u64,
    decoded_hash: u64,
    decoded_len: u64,
}

/// A part to compress ahead: object `index`'s part `role` (`bools`: made 0 or 1 first).
struct Job {
    index: usize,
    role: String,
    bools: bool,
    len: u64,
}

/// Compresses one part whole, its frames in parallel.
fn compress_part(
    source: &dyn TensorSource,
    job: &Job,
    spare: &crate::seekable::Spare,
) -> Result<Compressed> {
    // Raw bytes a reader may read itself (plain dense data, no digest to check) go straight
    // into the part's buffer, instead of through the source's pieces and a copy.
    let raw = source.raw(job.index).filter(|_| job.role == ztensor_io::role::DATA);
    let held: std::borrow::Cow<'_, [u8]> = match (raw.as_ref().and_then(in_place), raw) {
        (Some(bytes), _) => std::borrow::Cow::Borrowed(bytes),
        (None, Some(range)) if range.len == job.len => {
            let mut bytes = ztensor_io::try_zeroed(range.len, "a part compressed ahead")
                .map_err(|e| Error::io("compressing a part", e))?;
            range
                .source
                .read_exact_at(range.offset, &mut bytes)
                .map_err(|e| Error::io("reading a part", e))?;
            std::borrow::Cow::Owned(bytes)
        }
        (None, _) => {
            let mut bytes = ztensor_io::try_with_capacity(job.len, "a part compressed ahead")
                .map_err(|e| Error::io("compressing a part", e))?;
            let longer = || {
                ztensor_io::Error::failed(format!(
                    "part {:?} decodes to more than the {} bytes its source said",
                    job.role, job.len
                ))
            };
            source
                .read_part(job.index, &job.role, PIECE, &mut |piece| {
                    if bytes.len() + piece.len() > usize::try_from(job.len).unwrap_or(usize::MAX) {
                        return Err(longer());
                    }
                    bytes.extend_from_slice(piece);
                    Ok(())
                })
                .map_err(|e| {
                    let name = source.name(job.index).unwrap_or_default().into_owned();
                    read_error(&name, e)
                })?;
            std::borrow::Cow::Owned(bytes)
        }
    };
    let bytes = if job.bools && held.iter().any(|&b| b > 1) {
        std::borrow::Cow::Owned(held.iter().map(|&b| u8::from(b != 0)).collect())
    } else {
        held
    };
    let chunks: Vec<&[u8]> = bytes.chunks(crate::seekable::FRAME).collect();
    let frames = crate::seekable::compress_frames(&chunks, spare)?;
    // Frames of at most 1 MiB compress to well under 4 GiB.
    #[allow(clippy::cast_possible_truncation)]
    let sizes: Vec<(u32, u32)> = frames.iter().map(|(f, d)| (f.len() as u32, *d)).collect();
    let mut stream: Vec<Vec<u8>> = frames.into_iter().map(|(f, _)| f).collect();
    stream.push(crate::seekable::table(&sizes)?);
    let mut stored = xxhash_rust::xxh3::Xxh3::new();
    stream.iter().for_each(|piece| stored.update(piece));
    Ok(Compressed {
        stream,
        stored_hash: stored.digest(),
        decoded_hash: xxhash_rust::xxh3::xxh3_64(&bytes),
        decoded_len: bytes.len() as u64,
    })
}

/// Whether object `index` of `source` (listed as `info`) is read in pieces: not COO (read
/// whole, to find coordinates given twice), not planned from a read, and read so by its
/// source. Its parts are compressed ahead of their turn when they are small enough.
fn in_pieces(source: &dyn TensorSource, index: usize, info: &ObjectInfo<'_>) -> bool {
    source.reads_in_pieces(index) && listed_as_read(info) && info.format != Format::SparseCoo
}

/// The decoded length of part `part` of an object read in pieces (listed as `info`) when it
/// is compressed ahead of its turn: when its source states it (one that may decode to more
/// than it is stored as streams when its turn comes) and it is at most `limit` (what may be in
/// flight; a larger one streams through the encoder when its turn comes).
fn ahead_len(info: &ObjectInfo<'_>, part: &PlannedPart, limit: u64) -> Option<u64> {
    let c = info.components.iter().find(|c| c.role == part.role.as_str());
    c.and_then(|c| c.decoded_len).filter(|&len| len <= limit)
}

/// The parts of object `index` to compress ahead, in writing order (see [`ahead_len`]).
fn ahead_jobs(
    source: &dyn TensorSource,
    index: usize,
    options: &WriteOptions,
    limit: u64,
) -> Result<Vec<Job>> {
    let Some(info) = source.info(index) else { return Ok(Vec::new()) };
    if !in_pieces(source, index, &info) {
        return Ok(Vec::new());
    }
    let planned = plan(&info, None, options)?;
    Ok(planned
        .parts
        .into_iter()
        .filter_map(|p| {
            let len = ahead_len(&info, &p, limit)?;
            Some(Job { index, role: p.role, bools: p.bools, len })
        })
        .collect())
}

/// What a part compressed ahead counts against the bytes in flight: its decoded length, and
/// at least this much, so that a run of small or empty parts is not compressed all at once
/// and held, hundreds of thousands of them, until the writer takes them. Changes when parts
/// are compressed, never what is written.
const AHEAD_LEAST: u64 = 64 << 10;

fn ahead_cost(len: u64) -> u64 {
    len.max(AHEAD_LEAST)
}

/// The decoded bytes of parts compressed ahead and not yet written, at most: half the memory
/// budget of a run on `threads` (each part is held as read and as compressed; by default
/// enough that every worker has parts to compress while the writer waits on the disk), and at
/// least one frame.
fn ahead_limit(options: &WriteOptions, threads: usize) -> u64 {
    (options.par.budget_for(threads) / 2).max(crate::seekable::FRAME as u64)
}

/// Bytes in flight between the compressors and the writer: taken before a part is started,
/// given back when the writer has it. Stopped when the writer goes (an error), so that
/// nothing more starts.
struct Budget {
    state: std::sync::Mutex<(u64, bool)>,
    changed: std::sync::Condvar,
    limit: u64,
}

impl Budget {
    /// Takes `n` bytes once they fit (at once when nothing is in flight); `false` once stopped.
    fn take(&self, n: u64) -> bool {
        let Ok(mut state) = self.state.lock() else { return false };
        while !state.1 && state.0 > 0 && state.0.saturating_add(n) > self.limit {
            match self.changed.wait(state) {
                Ok(s) => state = s,
                Err(_) => return false,
            }
        }
        state.0 += n;
        !state.1
    }

    fn give(&self, n: u64) {
        if let Ok(mut state) = self.state.lock() {
            state.0 = state.0.saturating_sub(n);
        }
        self.changed.notify_all();
    }

    fn stop(&self) {
        if let Ok(mut state) = self.state.lock() {
            state.1 = true;
        }
        self.changed.notify_all();
    }
}

/// Parts compressed ahead, each started as soon as the bytes in flight allow and taken by
/// the writer in writing order. No part waits for another to finish (no batches with a tail
/// of idle cores): a worker done with one part's frames takes the next part's.
///
/// Which parts go ahead is found as they are reached (object by object, by [`ahead_jobs`]),
/// by the feeder and by the writer alike, so no list of them is held: the writer takes the
/// `n`-th part it finds to be compressed ahead as the `n`-th the feeder started.
struct Ahead {
    /// Each compressed part as it finishes, with its place among the parts compressed ahead.
    done: Option<crossbeam_channel::Receiver<(usize, Result<Compressed>)>>,
    /// Parts that finished before their turn.
    early: std::collections::BTreeMap<usize, Result<Compressed>>,
    /// The place of the next part the writer takes among the parts compressed ahead.
    next: usize,
    budget: std::sync::Arc<Budget>,
    /// The compressors of the parts, and the frame buffers the writer has written for their
    /// next frames.
    spare: std::sync::Arc<crate::seekable::Spare>,
}

impl Ahead {
    /// Starts compressing the parts of the objects of `order` that go ahead ([`ahead_jobs`]),
    /// in writing order, on `pool`, fed by a thread of `scope`.
    fn start<'s>(
        scope: &'s std::thread::Scope<'s, '_>,
        (source, order, options): (&'s dyn TensorSource, &'s Order, &'s WriteOptions),
        (level, limit): (i32, u64),
        pool: Option<Arc<rayon::ThreadPool>>,
    ) -> Ahead {
        let budget = std::sync::Arc::new(Budget {
            state: std::sync::Mutex::new((0, false)),
            changed: std::sync::Condvar::new(),
            limit,
        });
        // The frames of the parts in flight and of the one being written: as many buffers as
        // can be in use at once.
        let frames = usize::try_from(limit / crate::seekable::FRAME as u64).unwrap_or(usize::MAX);
        let threads = pool.as_ref().map_or(1, |p| p.current_num_threads());
        let most = frames.saturating_mul(2).saturating_add(threads);
        let spare = std::sync::Arc::new(crate::seekable::Spare::new(level, most));
        let made = |done| Ahead {
            done,
            early: std::collections::BTreeMap::new(),
            next: 0,
            budget: budget.clone(),
            spare: spare.clone(),
        };
        // The write's own pool, never the caller's: the writer waits for these parts, and had
        // they been queued on the caller's pool, a writer running on that pool's only (or
        // every) worker would wait for itself.
        let Some(pool) = pool else { return made(None) };
        let (tx, rx) = crossbeam_channel::unbounded();
        let feeder = budget.clone();
        let spare = spare.clone();
        scope.spawn(move || {
            let spare = &*spare;
            // Parts are started from outside the pool (the feeder waits on the budget, no
            // worker does), first come first taken; each part's frames then go to whichever
            // workers are free.
            pool.in_place_scope(|s| {
                let mut seq = 0;
                for k in 0..order.len() {
                    // An object that cannot be planned was refused before any part was
                    // written; nothing more goes ahead (the writer streams what is left).
                    let Ok(jobs) = ahead_jobs(source, order.index(k), options, limit) else {
                        return;
                    };
                    for job in jobs {
                        if !feeder.take(ahead_cost(job.len)) {
                            return;
                        }
                        let tx = tx.clone();
                        let place = seq;
                        seq += 1;
                        s.spawn(move |_| {
                            // The writer may have gone (an error): nothing to tell it.
                            let _ = tx.send((place, compress_part(source, &job, spare)));
                        });
                    }
                }
            });
        });
        made(Some(rx))
    }

    /// The next part compressed ahead, of decoded length `len`: the writer asks for each part
    /// [`ahead_len`] says goes ahead, in writing order. `None` when none was compressed
    /// ahead (no pool, or the feeder stopped).
    fn take(&mut self, len: u64) -> Option<Result<Compressed>> {
        let done = self.done.as_ref()?;
        let compressed = match self.early.remove(&self.next) {
            Some(c) => c,
            None => loop {
                let (seq, c) = done.recv().ok()?;
                if seq == self.next {
                    break c;
                }
                self.early.insert(seq, c);
            },
        };
        self.next += 1;
        self.budget.give(ahead_cost(len));
        Some(compressed)
    }

    /// Hands back the buffers of a part once it is written.
    fn give_back(&self, part: Compressed) {
        self.spare.give(part.stream);
    }
}

impl Drop for Ahead {
    fn drop(&mut self) {
        // Nothing more starts; what is running finishes and is dropped.
        self.budget.stop();
    }
}

/// Where a part went: its blob, the XXH3-64 of its decoded bytes and their length.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Placed {
    blob: (u64, u64),
    digest: u64,
    decoded_len: u64,
}

/// Writes `source` to `out` in canonical zTensor 2 form (or with zstd-seekable parts, when
/// `options` say so), from its start.
///
/// # Errors
/// Unrepresentable content (named, before anything is written: dtypes zTensor 2 lacks, objects
/// this build cannot decode, names given twice or breaking zTensor 2's rules, attributes it
/// cannot hold unless dropped; a COO tensor's coordinates given twice, found when it is read),
/// the source's read errors, I/O errors. A file's sink then publishes nothing; an output given
/// to [`Zt2Sink::to_output`] is left as far as it was written.
pub fn write(
    source: &dyn TensorSource,
    out: &mut dyn Output,
    options: &WriteOptions,
) -> Result<Summary> {
    write_with(source, out, options, true).map(|(summary, _)| summary)
}

/// `source`'s file attributes as zTensor 2 holds them, encoded (`None` when `options` drop
/// them): their own bytes, checked, never a tree of them.
pub(crate) fn file_attributes_2(
    source: &dyn TensorSource,
    options: &WriteOptions,
) -> Result<Option<Vec<u8>>> {
    if options.drop_attributes {
        return Ok(None);
    }
    let attributes =
        source.try_attributes().map_err(|e| Error::source("reading the file's attributes", e))?;
    match attributes {
        Some(a) => attributes_2_encoded(&a, 2, Refused::FileAttributes)
            .map(|b| b.map(<[u8]>::to_vec))
            .map_err(|e| e.within("the file's attributes")),
        None => Ok(None),
    }
}

/// A source's objects in the byte order of their names (the order their blobs are written
/// in), the names held in one buffer: a few bytes an object besides its name, not a `String`
/// and an allocation each.
pub(crate) struct Order {
    names: String,
    /// Each object's name (where it starts in `names`, its length) and index in the source,
    /// in the byte order of the names.
    entries: Vec<(usize, u32, u32)>,
}

impl Order {
    /// The objects of `source`, each checked to be writable (planned, from a read where its
    /// listing is not what a read gives), in the byte order of their names.
    ///
    /// # Errors
    /// What [`plan`] refuses, read errors, and names given twice.
    fn of(source: &dyn TensorSource, options: &WriteOptions) -> Result<Order> {
        let gone = || Error::io("listing objects", std::io::Error::other("object gone"));
        let mut order = Order { names: String::new(), entries: Vec::with_capacity(source.len()) };
        for index in 0..source.len() {
            let info = source.info(index).ok_or_else(gone)?;
            if listed_as_read(&info) {
                plan(&info, None, options)?;
            } else {
                let data = source.read(index).map_err(|e| read_error(&info.name, e))?;
                plan(&info, Some(&data), options)?;
            }
            // Names are at most 1024 bytes ([`plan`] refuses longer ones).
            let many = || Error::io("listing objects", std::io::Error::other("over 2^32 objects"));
            let len = u32::try_from(info.name.len()).map_err(|_| many())?;
            let at = u32::try_from(index).map_err(|_| many())?;
            order.entries.push((order.names.len(), len, at));
            order.names.push_str(&info.name);
        }
        order.names.shrink_to_fit();
        let Order { names, entries } = &mut order;
        let name =
            |&(start, len, _): &(usize, u32, u32)| &names.as_bytes()[start..][..len as usize];
        entries.sort_by(|a, b| name(a).cmp(name(b)));
        if let Some(k) = (1..order.len()).find(|&k| order.name(k - 1) == order.name(k)) {
            return Err(Error::unrepresentable(
                Refused::Dtype,
                format!(
                    "object {:?} is given twice, and zTensor 2 names are unique",
                    order.name(k)
                ),
            ));
        }
        Ok(order)
    }

    /// How many objects.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The `k`-th name in byte order.
    pub(crate) fn name(&self, k: usize) -> &str {
        let (start, len, _) = self.entries[k];
        &self.names[start..][..len as usize]
    }

    /// The source's index of the `k`-th object.
    fn index(&self, k: usize) -> usize {
        self.entries[k].2 as usize
    }

    /// The places (in this order) of the objects in the order deterministic CBOR gives their
    /// names as map keys: shorter first, then bytewise (the byte order these are in already).
    fn key_order(&self) -> Vec<u32> {
        // The casts cannot truncate: there are at most 2^32 objects ([`Order::of`]).
        #[allow(clippy::cast_possible_truncation)]
        let mut keys: Vec<u32> = (0..self.len() as u32).collect();
        // Stable: names of one length stay in byte order.
        keys.sort_by_key(|&k| self.entries[k as usize].1);
        keys
    }
}

/// The CBOR of `name` as a map key.
pub(crate) fn encoded_key(name: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(name.len() + 3);
    crate::cbor::head(3, name.len() as u64, &mut key);
    key.extend_from_slice(name.as_bytes());
    key
}

/// What a write placed, kept compactly (a few words a part) until the manifest is written:
/// each object's entry is encoded then from its source again ([`plan`] on its listing) and
/// where its parts went, instead of being held encoded.
pub(crate) struct Written {
    /// The objects, in writing order.
    pub(crate) order: Order,
    /// Where the parts of each object (in writing order) start in `parts`, and a last entry
    /// where they end.
    starts: Vec<usize>,
    parts: Vec<Placed>,
    /// The plans of objects planned from a read (their parts known only from it), by place.
    read: HashMap<usize, Planned>,
    zstd: bool,
}

impl Written {
    /// The encoded entry (object map) of the `k`-th object of `source` (the source written),
    /// with `shard` in each part when given (a root's entry).
    ///
    /// # Errors
    /// What [`plan`] refuses; a source whose listing changed since it was written.
    pub(crate) fn entry(
        &self,
        source: &dyn TensorSource,
        k: usize,
        options: &WriteOptions,
        shard: Option<&str>,
    ) -> Result<Vec<u8>> {
        let index = self.order.index(k);
        let changed = || {
            Error::io("writing the manifest", std::io::Error::other("an object's listing changed"))
        };
        let again;
        let planned = match self.read.get(&k) {
            Some(planned) => planned,
            None => {
                let info = source.info(index).ok_or_else(changed)?;
                again = plan(&info, None, options)?;
                &again
            }
        };
        let placed = &self.parts[self.starts[k]..self.starts[k + 1]];
        if placed.len() != planned.parts.len() {
            return Err(changed());
        }
        Ok(object_entry(planned, placed, self.zstd, shard))
    }

    /// Checks that the blobs of different parts are the same or disjoint (checked within
    /// each batch when the manifest is read back, and across them here).
    fn check_overlaps(&self) -> Result<()> {
        let mut blobs: Vec<(u64, u64)> =
            self.parts.iter().map(|p| p.blob).filter(|&(_, len)| len > 0).collect();
        blobs.sort_unstable();
        blobs.dedup();
        match blobs.windows(2).find(|w| w[0].0 + w[0].1 > w[1].0) {
            Some(w) => Err(Error::rule(
                crate::error::Rule::BlobOverlap,
                format!("blobs at {} and {} overlap without being the same", w[0].0, w[1].0),
            )
            .within("the manifest written")),
            None => Ok(()),
        }
    }
}

/// An object's manifest entry, encoded: `planned` with its parts placed at `placed` (in the
/// same order), `shard` in each part when given. The attributes go in as their own bytes,
/// after the other keys (`attributes` is the longest key, so deterministic CBOR sorts it
/// last).
fn object_entry(planned: &Planned, placed: &[Placed], zstd: bool, shard: Option<&str>) -> Vec<u8> {
    let text = |s: &str| Value::Text(s.to_owned());
    let mut parts = Vec::with_capacity(planned.parts.len());
    for (p, placed) in planned.parts.iter().zip(placed) {
        let (offset, len) = placed.blob;
        let mut entries = vec![
            (text("dtype"), text(p.dtype.name())),
            (text("blob"), Value::Array(vec![Value::Uint(offset), Value::Uint(len)])),
            (text("digest"), Value::Text(format!("xxh3:{:016x}", placed.digest))),
        ];
        if zstd {
            entries.push((text("encoding"), text(crate::seekable::ID)));
            entries.push((text("decoded_length"), Value::Uint(placed.decoded_len)));
        }
        if let Some(t) = &p.logical {
            entries.push((text("type"), text(t)));
        }
        if let Some(s) = shard {
            entries.push((text("shard"), text(s)));
        }
        parts.push((text(&p.role), Value::Map(entries)));
    }
    let object = vec![
        (text("shape"), Value::Array(planned.shape.iter().map(|&d| Value::Uint(d)).collect())),
        (text("layout"), text(&planned.layout)),
        (text("parts"), Value::Map(parts)),
    ];
    let Some(attributes) = &planned.attributes else {
        return encode(&Value::Map(object));
    };
    let mut out = Vec::with_capacity(attributes.len() + 256);
    crate::cbor::head(5, object.len() as u64 + 1, &mut out);
    let mut entries: Vec<(Vec<u8>, &Value)> = object.iter().map(|(k, v)| (encode(k), v)).collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    for (k, v) in entries {
        out.extend(k);
        out.extend(encode(v));
    }
    out.extend(encode(&text("attributes")));
    out.extend_from_slice(attributes);
    out
}

/// The bytes of manifest entries read back at a time through this crate's reader.
const CHECK_BATCH: usize = 1 << 20;

/// A manifest on its way out: written in pieces as it is made (its entries are never held
/// all at once), hashed, and read back through this crate's own validation a batch of
/// entries at a time, each batch as a manifest of its own (with the shard table); the file's
/// attributes are checked apart, without a tree of them ([`check_file_attributes`]).
pub(crate) struct ManifestOut<'o> {
    out: &'o mut dyn Write,
    pending: Vec<u8>,
    hash: xxhash_rust::xxh3::Xxh3,
    len: u64,
    /// The shard table's key and value, encoded (a root's), which every batch holds too.
    shards: Option<Vec<u8>>,
    /// The file's attributes, encoded.
    attributes: Option<&'o [u8]>,
    batch: Vec<u8>,
    batched: u64,
    /// The last object key written, which the next must sort after.
    last: Vec<u8>,
    /// Where blobs of this file must end (the manifest's offset), and the manifest's offset.
    at: u64,
    what: &'static str,
}

impl<'o> ManifestOut<'o> {
    /// Starts the manifest of `objects` objects at offset `at` of `out` (where it is
    /// positioned): the shard table first when given, then the objects ([`Self::object`]
    /// each, in key order), then the attributes ([`Self::finish`]). `what` names it in
    /// errors (`the manifest written`).
    pub(crate) fn start(
        out: &'o mut dyn Write,
        at: u64,
        shards: Option<&Value>,
        objects: usize,
        attributes: Option<&'o [u8]>,
        what: &'static str,
    ) -> Result<ManifestOut<'o>> {
        let shards = shards.map(|table| {
            let mut entry = encode(&Value::Text("shards".to_owned()));
            entry.extend(encode(table));
            entry
        });
        let mut m = ManifestOut {
            out,
            pending: Vec::new(),
            hash: xxhash_rust::xxh3::Xxh3::new(),
            len: 0,
            shards,
            attributes,
            batch: Vec::new(),
            batched: 0,
            last: Vec::new(),
            at,
            what,
        };
        // The root's keys in deterministic order: `shards`, `objects`, `attributes`.
        let keys = 1 + u64::from(m.shards.is_some()) + u64::from(attributes.is_some());
        let mut head = Vec::new();
        crate::cbor::head(5, keys, &mut head);
        if let Some(s) = &m.shards {
            head.extend_from_slice(s);
        }
        head.extend(encode(&Value::Text("objects".to_owned())));
        crate::cbor::head(5, objects as u64, &mut head);
        m.put(&head)?;
        Ok(m)
    }

    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        self.hash.update(bytes);
        self.len += bytes.len() as u64;
        if self.len > MAX_MANIFEST {
            return Err(Error::unrepresentable(
                Refused::Dtype,
                format!("a manifest of more than {MAX_MANIFEST} bytes (zTensor 2 allows 1 GiB)"),
            ));
        }
        self.pending.extend_from_slice(bytes);
        if self.pending.len() >= PIECE {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.out.write_all(&self.pending).map_err(|e| Error::io("writing the manifest", e))?;
        self.pending.clear();
        Ok(())
    }

    /// The next object's entry: its encoded key (after the last one's) and encoded map.
    pub(crate) fn object(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        if !self.last.is_empty() && self.last.as_slice() >= key {
            return Err(Error::rule(
                crate::error::Rule::CborDeterminism,
                "the objects' keys are not in deterministic order",
            )
            .within(self.what));
        }
        self.last.clear();
        self.last.extend_from_slice(key);
        self.put(key)?;
        self.put(value)?;
        self.batch.extend_from_slice(key);
        self.batch.extend_from_slice(value);
        self.batched += 1;
        if self.batch.len() >= CHECK_BATCH {
            self.check()?;
        }
        Ok(())
    }

    /// Reads the batch of entries back as a manifest of its own.
    fn check(&mut self) -> Result<()> {
        let keys = 1 + u64::from(self.shards.is_some());
        let mut bytes = Vec::with_capacity(self.batch.len() + 64);
        crate::cbor::head(5, keys, &mut bytes);
        if let Some(s) = &self.shards {
            bytes.extend_from_slice(s);
        }
        bytes.extend(encode(&Value::Text("objects".to_owned())));
        crate::cbor::head(5, self.batched, &mut bytes);
        bytes.extend_from_slice(&self.batch);
        self.batch.clear();
        self.batched = 0;
        let parsed = crate::manifest::parse_bytes(&bytes).map_err(|e| e.within(self.what))?;
        // Every blob of this file lies before the manifest (an empty one may be where it
        // starts), which is held apart from them so.
        crate::manifest::validate(&parsed, self.at, (self.at, 0)).map_err(|e| e.within(self.what))
    }

    /// Writes the attributes and checks the last batch; returns the manifest's length and
    /// XXH3-64.
    pub(crate) fn finish(mut self) -> Result<(u64, u64)> {
        if let Some(a) = self.attributes {
            self.put(&encode(&Value::Text("attributes".to_owned())))?;
            self.put(a)?;
            check_file_attributes(a).map_err(|e| e.within(self.what))?;
        }
        self.flush()?;
        self.check()?;
        Ok((self.len, self.hash.digest()))
    }
}

/// Checks the file's attributes, `encoded`, as a reader reads them at their place in a
/// manifest: one item of deterministic CBOR within the nesting and the items a manifest
/// allows, a map whose keys are names (1 to 1024 bytes without U+0000). Only the keys are
/// built: attributes of millions of values cost their bytes here, not a tree of them (twice,
/// as a reader's copy of it).
fn check_file_attributes(encoded: &[u8]) -> Result<()> {
    let mut root = Vec::with_capacity(encoded.len() + 16);
    crate::cbor::head(5, 1, &mut root);
    root.extend(encode(&Value::Text("attributes".to_owned())));
    root.extend_from_slice(encoded);
    let schema = |m: &str| Error::rule(crate::error::Rule::Schema, m.to_owned());
    let entries = crate::cbor::map_entries(&root)?.unwrap_or_default();
    let range = entries.first().map(|(_, r)| r.clone()).ok_or_else(|| schema("no attributes"))?;
    let keys = crate::cbor::entries_at(&root, range, 1)?
        .ok_or_else(|| schema("the file's attributes are not a map"))?;
    for (key, _) in keys {
        let Some(key) = key.as_text() else {
            return Err(schema("a key of the file's attributes is not text"));
        };
        if key.is_empty() || key.len() > crate::manifest::MAX_NAME || key.contains('\0') {
            return Err(Error::rule(
                crate::error::Rule::Name,
                format!(
                    "an attribute key {key:?} is empty, longer than {} bytes or holds U+0000",
                    crate::manifest::MAX_NAME
                ),
            ));
        }
    }
    Ok(())
}

/// As [`write()`], with the file's attributes left out when `file_attributes` is false (a
/// shard's: they go in the root), returning what was placed besides (to write a root's
/// entries from).
pub(crate) fn write_with(
    source: &dyn TensorSource,
    out: &mut dyn Output,
    options: &WriteOptions,
    file_attributes: bool,
) -> Result<(Summary, Written)> {
    // Everything that cannot be written is found before a byte is. The file's attributes are
    // held encoded: a tree of them costs tens of bytes a value.
    let file_attributes = match file_attributes {
        true => file_attributes_2(source, options)?,
        false => None,
    };
    let order = Order::of(source, options)?;

    // With zstd, every part is compressed on one pool of the threads asked for: those
    // compressed ahead of their turn and those streamed through the encoder when it comes.
    let pool = match options.zstd {
        Some(_) => Some(Arc::new(
            options.par.pool().map_err(|e| Error::source("starting the compression threads", e))?,
        )),
        None => None,
    };
    let threads = pool.as_ref().map_or(1, |p| p.current_num_threads());
    let batch = pool.as_ref().map(|_| crate::seekable::Encoder::batch_len(threads));
    let limit = ahead_limit(options, threads);

    out.seek(SeekFrom::Start(0)).map_err(|e| Error::io("writing the magic", e))?;
    out.set_len(0).map_err(|e| Error::io("emptying the output", e))?;
    out.write_all(&MAGIC).map_err(|e| Error::io("writing the magic", e))?;
    let mut placer = Placer {
        out,
        cursor: MAGIC.len() as u64,
        by_content: HashMap::new(),
        collided: HashMap::new(),
        empty: None,
        blobs: 0,
        zstd: options.zstd,
        pool: pool.clone(),
        unannounced: 0,
    };
    let mut summary = Summary::default();
    let mut starts = Vec::with_capacity(order.len() + 1);
    let mut placements = Vec::with_capacity(order.len());
    let mut read = HashMap::new();
    std::thread::scope(|scope| -> Result<()> {
        let level = options.zstd.unwrap_or(3);
        // With zstd, parts are compressed ahead on every thread while those before them are
        // written.
        let mut ahead = Ahead::start(scope, (source, &order, options), (level, limit), pool);
        for k in 0..order.len() {
            let (name, index) = (order.name(k), order.index(k));
            let info = source.info(index).ok_or_else(|| {
                Error::io("listing objects", std::io::Error::other("an object went away"))
            })?;
            // COO is read whole: zTensor 2 forbids a coordinate tuple given twice, which 1.x
            // allows.
            let coo = info.format == Format::SparseCoo;
            let in_pieces = in_pieces(source, index, &info);
            let whole = if in_pieces {
                None
            } else {
                Some(source.read(index).map_err(|e| read_error(name, e))?)
            };
            if let Some(data) = whole.as_ref().filter(|_| coo)
                && let Some(coords) = data.components.get("coords")
            {
                let coords = ztensor_format::data::indices_to_u64(coords.dtype, &coords.bytes)
                    .map_err(|e| read_error(name, e.into()))?;
                if let Some(tuple) = crate::profiles::duplicate_tuple(data.shape.len(), &coords) {
                    return Err(Error::unrepresentable(
                        Refused::Dtype,
                        format!(
                            "object {name:?}: coordinates {tuple:?} are given twice, and a zTensor 2 \
                         COO object holds each once"
                        ),
                    ));
                }
            }
            let listed = listed_as_read(&info);
            let planned = plan(&info, whole.as_ref().filter(|_| !listed), options)?;
            // Which parts were compressed ahead, as the feeder found them.
            let ahead_lens: Vec<Option<u64>> = planned
                .parts
                .iter()
                .map(|p| {
                    if in_pieces && pool_used(options) { ahead_len(&info, p, limit) } else { None }
                })
                .collect();
            drop(info);
            starts.push(placements.len());
            for (p, ahead_len) in planned.parts.iter().zip(ahead_lens) {
                let placed = match &whole {
                    Some(data) => {
                        let bytes = data.components.get(&p.role).map(|c| c.bytes.as_ref());
                        let bytes = bytes.ok_or_else(|| {
                            let missing = format!("component {:?} was not read", p.role);
                            read_error(name, ztensor_io::Error::failed(&missing))
                        })?;
                        placer.part(p.bools, &mut |each| {
                            bytes.chunks(piece_of(p.bools, batch)).try_for_each(&mut *each)?;
                            // An empty part is one empty piece.
                            if bytes.is_empty() { each(&[]) } else { Ok(()) }
                        })?
                    }
                    // Raw bytes the source holds in memory (a map, a buffer) go out from where
                    // they lie, without a copy into pieces first.
                    None => match ahead_len.and_then(|len| ahead.take(len)) {
                        Some(compressed) => {
                            let compressed = compressed?;
                            let placed = placer.part_compressed(&compressed)?;
                            ahead.give_back(compressed);
                            placed
                        }
                        None => match in_memory(source, index, &p.role) {
                            Some(bytes) => placer.part(p.bools, &mut |each| {
                                bytes.chunks(piece_of(p.bools, batch)).try_for_each(&mut *each)?;
                                if bytes.is_empty() { each(&[]) } else { Ok(()) }
                            })?,
                            None => placer.part(p.bools, &mut |each| {
                                let mut failed = None;
                                source
                                    .read_part(index, &p.role, PIECE, &mut |piece| {
                                        each(piece).map_err(|e| {
                                            let message = e.to_string();
                                            failed = Some(e);
                                            ztensor_io::Error::io(
                                                message,
                                                None,
                                                std::io::Error::other("write"),
                                            )
                                        })
                                    })
                                    .map_err(|e| {
                                        failed.take().unwrap_or_else(|| read_error(name, e))
                                    })
                            })?,
                        },
                    },
                };
                if let Some(progress) = &options.progress {
                    progress(placed.decoded_len);
                }
                summary.parts += 1;
                summary.decoded += placed.decoded_len;
                placements.push(placed);
            }
            if !listed {
                read.insert(k, planned);
            }
            summary.objects += 1;
        }
        Ok(())
    })?;
    starts.push(placements.len());
    let written = Written { order, starts, parts: placements, read, zstd: options.zstd.is_some() };
    let at = align(placer.cursor)?;
    summary.blobs = placer.blobs + usize::from(placer.empty.is_some());
    drop(placer.by_content);
    drop(placer.collided);
    let out = placer.out;
    out.set_len(at).map_err(|e| Error::io("writing the manifest", e))?;
    out.seek(SeekFrom::Start(at)).map_err(|e| Error::io("writing the manifest", e))?;
    // The manifest: `objects` (its entries in the order of their encoded names, as
    // deterministic CBOR sorts a map), then `attributes` (a longer key sorts later); each
    // entry encoded as it is written, and read back a batch at a time.
    let keys = written.order.key_order();
    let what = "the manifest written";
    let mut manifest =
        ManifestOut::start(&mut *out, at, None, keys.len(), file_attributes.as_deref(), what)?;
    for &k in &keys {
        let k = k as usize;
        let entry = written.entry(source, k, options, None)?;
        manifest.object(&encoded_key(written.order.name(k)), &entry)?;
    }
    let (len, hash) = manifest.finish()?;
    drop(keys);
    written.check_overlaps()?;
    out.write_all(&footer(at, len, hash)).map_err(|e| Error::io("writing the footer", e))?;
    out.flush().map_err(|e| Error::io("writing the footer", e))?;
    summary.len = at + len + FOOTER_LEN;
    Ok((summary, written))
}

/// Whether parts are compressed ahead at all (with zstd, on the write's pool).
fn pool_used(options: &WriteOptions) -> bool {
    options.zstd.is_some()
}

/// The size of the pieces a part held in memory is handed over in: [`PIECE`] (small enough
/// that the bytes hashed are still in cache when they are written: one piece of a 125 MiB part
/// made the canonical write of 1 GiB 0.44 -> 0.56 s), or with zstd `batch`, a batch of the
/// encoder's frames, which it compresses where they lie instead of copying them in first. Bool
/// bytes are copied as 0 or 1 first, in [`PIECE`]s.
fn piece_of(bools: bool, batch: Option<usize>) -> usize {
    match batch {
        Some(batch) if !bools => batch,
        _ => PIECE,
    }
}

/// The bytes of part `role` of object `index` when the source holds them raw in memory (a
/// dense tensor without a digest to check, in a map or a buffer).
fn in_memory<'s>(source: &'s dyn TensorSource, index: usize, role: &str) -> Option<&'s [u8]> {
    if role != ztensor_io::role::DATA {
        return None;
    }
    in_place(&source.raw(index)?)
}

/// The bytes of `raw` where they lie, when its source holds them in memory.
fn in_place<'s>(raw: &ztensor_io::RawRange<'s>) -> Option<&'s [u8]> {
    let start = usize::try_from(raw.offset).ok()?;
    let end = start.checked_add(usize::try_from(raw.len).ok()?)?;
    raw.source.as_slice()?.get(start..end)
}

/// The footer of a file whose manifest of `len` bytes (their XXH3-64 `hash`) lies at `at`.
pub(crate) fn footer(at: u64, len: u64, hash: u64) -> Vec<u8> {
    let mut footer = Vec::with_capacity(40);
    footer.extend(at.to_le_bytes());
    footer.extend(len.to_le_bytes());
    footer.extend(hash.to_le_bytes());
    footer.extend(VERSION.to_le_bytes());
    footer.extend(0u32.to_le_bytes());
    footer.extend(MAGIC);
    footer
}

/// A source's read error, for object `name`.
fn read_error(name: &str, e: ztensor_io::Error) -> Error {
    Error::reading(name, e)
}

/// A [`TensorSink`](ztensor_io::TensorSink) writing canonical zTensor 2 ([`write()`]): to a path
/// (through a temporary file renamed over it once everything is written and checked), or to
/// any [`Output`].
///
/// ```
/// use ztensor_io::{TensorSink, TensorSource, WriteOptions, Writer};
/// use ztensor_format::{DType, Version};
///
/// let mut w = Writer::new(Vec::new(), Version::V1_2)?;
/// w.add_dense("w", &[2], DType::U8, &[1, 2], &WriteOptions::raw())?;
/// let one = ztensor_io::Reader::new(w.finish()?.0, &Default::default())?;
///
/// let mut sink = ztensor_v2::Zt2Sink::to_output(std::io::Cursor::new(Vec::new()));
/// sink.write_all(&one)?;
/// let bytes = sink.into_inner().expect("an output's sink").into_inner();
/// let two = ztensor_v2::File::open(bytes, ztensor_v2::MAX_MANIFEST)?;
/// assert_eq!(two.read(0)?.components["data"].bytes.as_ref(), [1, 2]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Zt2Sink<W = std::fs::File> {
    target: Target<W>,
    options: WriteOptions,
    summary: Option<Summary>,
}

#[derive(Debug)]
enum Target<W> {
    File(PathBuf),
    Output(W),
}

impl Zt2Sink {
    /// A sink writing the file `path`.
    pub fn new(path: impl AsRef<Path>) -> Zt2Sink {
        Zt2Sink {
            target: Target::File(path.as_ref().to_owned()),
            options: WriteOptions::default(),
            summary: None,
        }
    }
}

impl<W: Output> Zt2Sink<W> {
    /// A sink writing to `out` from its start.
    pub fn to_output(out: W) -> Zt2Sink<W> {
        Zt2Sink { target: Target::Output(out), options: WriteOptions::default(), summary: None }
    }

    /// Writes with `options`.
    #[must_use]
    pub fn with_options(mut self, options: WriteOptions) -> Zt2Sink<W> {
        self.options = options;
        self
    }

    /// What the last write produced.
    pub fn summary(&self) -> Option<&Summary> {
        self.summary.as_ref()
    }

    /// The output given to [`Zt2Sink::to_output`] (`None` for a file's sink).
    pub fn into_inner(self) -> Option<W> {
        match self.target {
            Target::Output(out) => Some(out),
            Target::File(_) => None,
        }
    }
}

impl<W: Output> ztensor_io::TensorSink for Zt2Sink<W> {
    type Error = Error;

    fn format_name(&self) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed("zTensor 2")
    }

    /// # Errors
    /// As [`write()`]; a file's path is then untouched.
    fn write_all(&mut self, source: &dyn TensorSource) -> Result<usize> {
        self.summary = None;
        let summary = match &mut self.target {
            Target::File(path) => {
                let publish = |e: ztensor_io::Error| {
                    Error::io(&format!("writing {}", path.display()), std::io::Error::other(e))
                };
                let mut file = ztensor_io::AtomicFile::create(&*path).map_err(publish)?;
                let handle = file.file_mut().map_err(|e| Error::io("writing", e))?;
                let summary = write(source, handle, &self.options)?;
                file.persist().map_err(publish)?;
                summary
            }
            Target::Output(out) => write(source, out, &self.options)?,
        };
        let objects = summary.objects;
        self.summary = Some(summary);
        Ok(objects)
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::collections::BTreeSet;
    use std::io::Cursor;
    use std::sync::atomic::{AtomicBool, Ordering};

    use ztensor_format::{DType, Version};
    use ztensor_io::TensorSink;

    use super::*;

    /// The names of this process's threads that are compression workers (`zt-work-{i}`), as
    /// the kernel lists them now.
    fn workers() -> Vec<String> {
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return Vec::new() };
        let comm = |t: std::fs::DirEntry| std::fs::read_to_string(t.path().join("comm")).ok();
        let names = tasks.flatten().filter_map(comm).map(|c| c.trim_end().to_owned());
        names.filter(|c| c.starts_with("zt-work-")).collect()
    }

    /// A zstd write runs on exactly the workers its `ParOptions` ask for, both the parts
    /// compressed ahead and the one streamed through the encoder at its turn (none on the
    /// caller's pool, none on a pool sized from it), and the bytes do not depend on how many.
    /// No other test of this binary starts `zt-work-` threads.
    #[test]
    fn a_zstd_write_runs_on_exactly_the_threads_asked_for() {
        let mut w = ztensor_io::Writer::new(Vec::new(), Version::V1_2).unwrap();
        let raw = ztensor_io::WriteOptions::raw();
        // Four parts of 4 MiB, compressed ahead; one of 24 MiB, over the 8 MiB a budget of
        // 16 MiB lets ahead, streamed when its turn comes.
        for (name, mib) in [("a", 4u32), ("b", 4), ("c", 24), ("d", 4), ("e", 4)] {
            let len = mib << 18;
            let data: Vec<u8> = (0..len).flat_map(|i| (i / 7).to_le_bytes()).collect();
            w.add_dense(name, &[u64::from(len)], DType::U32, &data, &raw).unwrap();
        }
        let source = ztensor_io::Reader::new(w.finish().unwrap().0, &Default::default()).unwrap();
        let mut written = Vec::new();
        for threads in [1, 3] {
            let par = ParOptions { threads, memory_budget: 16 << 20 };
            let options = WriteOptions::default().zstd(Some(1)).par(par);
            let done = AtomicBool::new(false);
            let (bytes, peak, seen) = std::thread::scope(|s| {
                let writing = s.spawn(|| {
                    let mut sink =
                        Zt2Sink::to_output(Cursor::new(Vec::new())).with_options(options);
                    let wrote = sink.write_all(&source);
                    done.store(true, Ordering::SeqCst);
                    wrote.unwrap();
                    sink.into_inner().unwrap().into_inner()
                });
                let (mut peak, mut seen) = (0, BTreeSet::new());
                while !done.load(Ordering::SeqCst) {
                    let now = workers();
                    peak = peak.max(now.len());
                    seen.extend(now);
                }
                (writing.join().unwrap(), peak, seen)
            });
            let expected: BTreeSet<String> = (0..threads).map(|i| format!("zt-work-{i}")).collect();
            assert_eq!(peak, threads, "workers at once, asked for {threads}");
            assert_eq!(seen, expected, "asked for {threads}");
            // A pool's threads end once it is dropped, though not before the drop returns.
            let gone = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while !workers().is_empty() && std::time::Instant::now() < gone {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            assert!(workers().is_empty(), "the workers end after the write");
            written.push(bytes);
        }
        assert!(written[0] == written[1], "the file depends on the thread count");
    }
}
