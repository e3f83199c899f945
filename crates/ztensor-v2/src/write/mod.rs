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

mod ahead;
mod manifest_out;
mod place;
mod plan;
mod sink;
#[cfg(all(test, target_os = "linux"))]
mod tests;

use self::ahead::*;
pub(crate) use self::manifest_out::ManifestOut;
pub(crate) use self::place::Written;
use self::place::*;
pub(crate) use self::plan::{
    Fill, Order, Planned, PlannedPart, bool_piece, encoded_key, file_attributes_2, listed_as_read,
    plan,
};
pub use self::sink::Zt2Sink;

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
    // The objects are read in name order: a remote input fetches them ahead in that order.
    ztensor_io::will_read(source, (0..order.len()).map(|k| order.index(k)));

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
                    None => match ahead_len.and_then(|_| ahead.take()) {
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
        manifest.object(&encoded_key(written.order.name(k)), &entry.pieces())?;
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
