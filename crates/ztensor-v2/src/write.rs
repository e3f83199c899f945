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
use crate::model::{attributes_2, layout_of, stored_size, types_2};

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
    pub(crate) attributes: Option<Value>,
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
        (Some(a), false) => attributes_2(a, 4, Refused::ObjectAttributes).map_err(within)?,
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
    /// Blobs written, by (length, XXH3-64), to share identical ones.
    by_content: HashMap<(u64, u64), Vec<u64>>,
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
        let digest = format!("xxh3:{decoded_hash:016x}");
        let placed = |blob| Placed { blob, digest, decoded_len };
        if len == 0 {
            // One empty blob, where the next blob will start (it holds no byte, so it overlaps
            // nothing).
            let at = *self.empty.get_or_insert(offset);
            return Ok(placed((at, 0)));
        }
        let candidates = self.by_content.get(&(len, hash)).cloned().unwrap_or_default();
        for earlier in candidates {
            if self.same(earlier, offset, len)? {
                // Shared: what was just written goes again.
                self.out.set_len(self.cursor).map_err(Self::io("sharing a blob"))?;
                return Ok(placed((earlier, len)));
            }
        }
        self.by_content.entry((len, hash)).or_default().push(offset);
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

/// The parts to compress ahead, in writing order: those of objects read in pieces (not COO,
/// not read whole), each of at most what may be in flight ([`ahead_limit`]; a larger one
/// streams through the encoder when its turn comes).
fn ahead_jobs(
    source: &dyn TensorSource,
    order: &[(String, usize)],
    options: &WriteOptions,
    limit: u64,
) -> Result<Vec<Job>> {
    let mut jobs = Vec::new();
    for (_, index) in order {
        let Some(info) = source.info(*index) else { continue };
        let in_pieces = source.reads_in_pieces(*index)
            && listed_as_read(&info)
            && info.format != Format::SparseCoo;
        if !in_pieces {
            continue;
        }
        for p in plan(&info, None, options)?.parts {
            // Only parts whose decoded length is known: one that may decode to more than it
            // is stored as streams when its turn comes.
            let c = info.components.iter().find(|c| c.role == p.role.as_str());
            if let Some(len) = c.and_then(|c| c.decoded_len).filter(|&len| len <= limit) {
                jobs.push(Job { index: *index, role: p.role, bools: p.bools, len });
            }
        }
    }
    Ok(jobs)
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
struct Ahead {
    /// Each compressed part as it finishes, with its place in `order`.
    done: Option<crossbeam_channel::Receiver<(usize, Result<Compressed>)>>,
    /// Parts that finished before their turn.
    early: std::collections::BTreeMap<usize, Result<Compressed>>,
    /// The parts compressed ahead in writing order: object, role, decoded length.
    order: Vec<(usize, String, u64)>,
    /// The place in `order` of the next part the writer takes.
    next: usize,
    budget: std::sync::Arc<Budget>,
    /// The compressors of the parts, and the frame buffers the writer has written for their
    /// next frames.
    spare: std::sync::Arc<crate::seekable::Spare>,
}

impl Ahead {
    /// Starts compressing `jobs` (in writing order) on `pool`, fed by a thread of `scope`.
    fn start<'s>(
        scope: &'s std::thread::Scope<'s, '_>,
        source: &'s dyn TensorSource,
        jobs: Vec<Job>,
        (level, limit): (i32, u64),
        pool: Option<Arc<rayon::ThreadPool>>,
    ) -> Ahead {
        let budget = std::sync::Arc::new(Budget {
            state: std::sync::Mutex::new((0, false)),
            changed: std::sync::Condvar::new(),
            limit,
        });
        let order = jobs.iter().map(|j| (j.index, j.role.clone(), j.len)).collect();
        // The frames of the parts in flight and of the one being written: as many buffers as
        // can be in use at once.
        let frames = usize::try_from(limit / crate::seekable::FRAME as u64).unwrap_or(usize::MAX);
        let threads = pool.as_ref().map_or(1, |p| p.current_num_threads());
        let most = frames.saturating_mul(2).saturating_add(threads);
        let spare = std::sync::Arc::new(crate::seekable::Spare::new(level, most));
        let made = |done, order| Ahead {
            done,
            early: std::collections::BTreeMap::new(),
            order,
            next: 0,
            budget: budget.clone(),
            spare: spare.clone(),
        };
        // The write's own pool, never the caller's: the writer waits for these parts, and had
        // they been queued on the caller's pool, a writer running on that pool's only (or
        // every) worker would wait for itself.
        let (false, Some(pool)) = (jobs.is_empty(), pool) else { return made(None, Vec::new()) };
        let (tx, rx) = crossbeam_channel::unbounded();
        let feeder = budget.clone();
        let spare = spare.clone();
        scope.spawn(move || {
            let spare = &*spare;
            // Parts are started from outside the pool (the feeder waits on the budget, no
            // worker does), first come first taken; each part's frames then go to whichever
            // workers are free.
            pool.in_place_scope(|s| {
                for (seq, job) in jobs.into_iter().enumerate() {
                    if !feeder.take(job.len) {
                        return;
                    }
                    let tx = tx.clone();
                    s.spawn(move |_| {
                        // The writer may have gone (an error): nothing to tell it.
                        let _ = tx.send((seq, compress_part(source, &job, spare)));
                    });
                }
            });
        });
        made(Some(rx), order)
    }

    /// Part `role` of object `index` if it was compressed ahead (the parts come in writing
    /// order; one not compressed ahead is not among them).
    fn take(&mut self, index: usize, role: &str) -> Option<Result<Compressed>> {
        let (i, r, len) = self.order.get(self.next)?;
        if *i != index || r != role {
            return None;
        }
        let len = *len;
        let compressed = match self.early.remove(&self.next) {
            Some(c) => c,
            None => loop {
                let (seq, c) = self.done.as_ref()?.recv().ok()?;
                if seq == self.next {
                    break c;
                }
                self.early.insert(seq, c);
            },
        };
        self.next += 1;
        self.budget.give(len);
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

/// Where a part went: its blob, the digest of its decoded bytes and their length.
struct Placed {
    blob: (u64, u64),
    digest: String,
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

/// An object's entry of a manifest: its encoded name and encoded object map.
pub(crate) type Encoded = (Vec<u8>, Vec<u8>);

/// `source`'s file attributes as zTensor 2 holds them (`None` when `options` drop them).
pub(crate) fn file_attributes_2(
    source: &dyn TensorSource,
    options: &WriteOptions,
) -> Result<Option<Value>> {
    if options.drop_attributes {
        return Ok(None);
    }
    let attributes =
        source.try_attributes().map_err(|e| Error::source("reading the file's attributes", e))?;
    match attributes {
        Some(a) => attributes_2(&a, 2, Refused::FileAttributes)
            .map_err(|e| e.within("the file's attributes")),
        None => Ok(None),
    }
}

/// As [`write()`], with the file's attributes left out when `file_attributes` is false (a
/// shard's: they go in the root), returning the objects' manifest entries besides.
pub(crate) fn write_with(
    source: &dyn TensorSource,
    out: &mut dyn Output,
    options: &WriteOptions,
    file_attributes: bool,
) -> Result<(Summary, Vec<Encoded>)> {
    // Everything that cannot be written is found before a byte is.
    let file_attributes = if file_attributes { file_attributes_2(source, options)? } else { None };
    let mut order: Vec<(String, usize)> = Vec::with_capacity(source.len());
    for index in 0..source.len() {
        let info = source
            .info(index)
            .ok_or_else(|| Error::io("listing objects", std::io::Error::other("object gone")))?;
        if listed_as_read(&info) {
            plan(&info, None, options)?;
        } else {
            let data = source.read(index).map_err(|e| read_error(&info.name, e))?;
            plan(&info, Some(&data), options)?;
        }
        order.push((info.name.into_owned(), index));
    }
    order.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    if let Some(pair) = order.windows(2).find(|p| p[0].0 == p[1].0) {
        return Err(Error::unrepresentable(
            Refused::Dtype,
            format!("object {:?} is given twice, and zTensor 2 names are unique", pair[0].0),
        ));
    }

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
        empty: None,
        blobs: 0,
        zstd: options.zstd,
        pool: pool.clone(),
        unannounced: 0,
    };
    let mut summary = Summary::default();
    let text = |s: &str| Value::Text(s.to_owned());
    let mut objects = Vec::with_capacity(order.len());
    // With zstd, parts are compressed ahead on every thread while those before them are written.
    let jobs = match options.zstd {
        Some(_) => ahead_jobs(source, &order, options, limit)?,
        None => Vec::new(),
    };
    std::thread::scope(|scope| -> Result<()> {
        let level = options.zstd.unwrap_or(3);
        let mut ahead = Ahead::start(scope, source, jobs, (level, limit), pool);
        for (name, index) in order {
            let info = source.info(index).ok_or_else(|| {
                Error::io("listing objects", std::io::Error::other("an object went away"))
            })?;
            // COO is read whole: zTensor 2 forbids a coordinate tuple given twice, which 1.x
            // allows.
            let coo = info.format == Format::SparseCoo;
            let in_pieces = source.reads_in_pieces(index) && listed_as_read(&info) && !coo;
            let whole = if in_pieces {
                None
            } else {
                Some(source.read(index).map_err(|e| read_error(&name, e))?)
            };
            if let Some(data) = whole.as_ref().filter(|_| coo)
                && let Some(coords) = data.components.get("coords")
            {
                let coords = ztensor_format::data::indices_to_u64(coords.dtype, &coords.bytes)
                    .map_err(|e| read_error(&name, e.into()))?;
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
            let planned = plan(&info, whole.as_ref().filter(|_| !listed_as_read(&info)), options)?;
            drop(info);
            let mut parts = Vec::with_capacity(planned.parts.len());
            for p in &planned.parts {
                let placed = match &whole {
                    Some(data) => {
                        let bytes = data.components.get(&p.role).map(|c| c.bytes.as_ref());
                        let bytes = bytes.ok_or_else(|| {
                            let missing = format!("component {:?} was not read", p.role);
                            read_error(&name, ztensor_io::Error::failed(&missing))
                        })?;
                        placer.part(p.bools, &mut |each| {
                            bytes.chunks(piece_of(p.bools, batch)).try_for_each(&mut *each)?;
                            // An empty part is one empty piece.
                            if bytes.is_empty() { each(&[]) } else { Ok(()) }
                        })?
                    }
                    // Raw bytes the source holds in memory (a map, a buffer) go out from where
                    // they lie, without a copy into pieces first.
                    None => match ahead.take(index, &p.role) {
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
                                        failed.take().unwrap_or_else(|| read_error(&name, e))
                                    })
                            })?,
                        },
                    },
                };
                let Placed { blob, digest, decoded_len } = placed;
                if let Some(progress) = &options.progress {
                    progress(decoded_len);
                }
                summary.parts += 1;
                summary.decoded += decoded_len;
                let mut entries = vec![
                    (text("dtype"), text(p.dtype.name())),
                    (text("blob"), Value::Array(vec![Value::Uint(blob.0), Value::Uint(blob.1)])),
                    (text("digest"), Value::Text(digest)),
                ];
                if options.zstd.is_some() {
                    entries.push((text("encoding"), text(crate::seekable::ID)));
                    entries.push((text("decoded_length"), Value::Uint(decoded_len)));
                }
                if let Some(t) = &p.logical {
                    entries.push((text("type"), text(t)));
                }
                parts.push((Value::Text(p.role.clone()), Value::Map(entries)));
            }
            let mut object = vec![
                (
                    text("shape"),
                    Value::Array(planned.shape.iter().map(|&d| Value::Uint(d)).collect()),
                ),
                (text("layout"), Value::Text(planned.layout)),
                (text("parts"), Value::Map(parts)),
            ];
            if let Some(a) = planned.attributes {
                object.push((text("attributes"), a));
            }
            // Each object is encoded as it is done: a manifest of a million objects is held as
            // their bytes, not as a million trees.
            objects.push((encode(&Value::Text(name)), encode(&Value::Map(object))));
            summary.objects += 1;
        }
        Ok(())
    })?;
    // The manifest: `objects` (its entries in the order of their encoded names, as
    // deterministic CBOR sorts a map), then `attributes` (a longer key sorts later).
    objects.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let mut manifest = Vec::new();
    crate::cbor::head(5, 1 + u64::from(file_attributes.is_some()), &mut manifest);
    manifest.extend(encode(&text("objects")));
    crate::cbor::head(5, objects.len() as u64, &mut manifest);
    for (key, value) in &objects {
        manifest.extend(key);
        manifest.extend(value);
    }
    if let Some(a) = file_attributes {
        manifest.extend(encode(&text("attributes")));
        manifest.extend(encode(&a));
    }
    if manifest.len() as u64 > MAX_MANIFEST {
        return Err(Error::unrepresentable(
            Refused::Dtype,
            format!("a manifest of {} bytes (zTensor 2 allows 1 GiB)", manifest.len()),
        ));
    }
    let at = align(placer.cursor)?;
    let len = manifest.len() as u64;
    let footer = footer(at, &manifest);
    let out = placer.out;
    let end = at + len + FOOTER_LEN;
    out.set_len(at).map_err(|e| Error::io("writing the manifest", e))?;
    out.seek(SeekFrom::Start(at)).map_err(|e| Error::io("writing the manifest", e))?;
    out.write_all(&manifest).map_err(|e| Error::io("writing the manifest", e))?;
    out.write_all(&footer).map_err(|e| Error::io("writing the footer", e))?;
    out.flush().map_err(|e| Error::io("writing the footer", e))?;
    // What was written is what this crate reads as valid.
    let parsed =
        crate::manifest::parse_bytes(&manifest).map_err(|e| e.within("the manifest written"))?;
    crate::manifest::validate(&parsed, at + len, (at, len))
        .map_err(|e| e.within("the manifest written"))?;
    summary.blobs = placer.blobs + usize::from(placer.empty.is_some());
    summary.len = end;
    Ok((summary, objects))
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

/// The footer of a file whose manifest `manifest` lies at `at`.
pub(crate) fn footer(at: u64, manifest: &[u8]) -> Vec<u8> {
    let mut footer = Vec::with_capacity(40);
    footer.extend(at.to_le_bytes());
    footer.extend((manifest.len() as u64).to_le_bytes());
    footer.extend(xxhash_rust::xxh3::xxh3_64(manifest).to_le_bytes());
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
