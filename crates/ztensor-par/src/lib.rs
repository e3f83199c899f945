//! Parallel zTensor writing, repacking and verifying, with output **byte-identical to the
//! sequential `ztensor-io` writer for any thread count**.
//!
//! Writing: a dispatcher thread admits each component's fixed-size pieces (the zstd frame size,
//! [`WriteOptions::chunk_size`], never a function of the thread count) under a memory budget; the
//! rayon pool's workers read their own source pieces, check source digests over the bytes they
//! read, compress and digest; the calling thread writes them in input order
//! through `ztensor-io`'s own streaming API, so offsets, padding and the manifest come from the
//! same code as the sequential writer's. One large tensor is spread over every core, because its
//! pieces are independent zstd frames (with a seek table, so readers can decode it in parallel
//! too). Objects that are not plain dense tensors (sparse, quantized, stored-byte copies) are
//! written, in their turn, by the sequential code itself.
//!
//! Reading: [`verify_all`] and [`load_all`] decode and check every object on all cores.
//!
//! # Example
//!
//! ```
//! use ztensor_format::{DType, Options, Version};
//! use ztensor_io::{Reader, WriteOptions, Writer};
//! use ztensor_par::{ParOptions, Tensor, write_tensors};
//!
//! let data: Vec<u8> = (0..4096u32).flat_map(|v| (v as f32).to_le_bytes()).collect();
//! let tensors = [Tensor::new("w", &[64, 64], DType::F32, &data)];
//! let mut options = WriteOptions::zstd(3);
//! options.chunk_size = Some(4096); // four frames, compressed in parallel
//!
//! let mut parallel = Writer::new(Vec::new(), Version::V1_2)?;
//! write_tensors(&tensors, &mut parallel, &options, &ParOptions::with_threads(4), &())?;
//! let mut sequential = Writer::new(Vec::new(), Version::V1_2)?;
//! sequential.add_dense("w", &[64, 64], DType::F32, &data, &options)?;
//! assert_eq!(parallel.finish()?.0, sequential.finish()?.0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod ahead;
mod memory;
mod pipeline;
pub mod simulate;
mod sink;
mod verify;

pub use crate::ahead::Ahead;
pub use crate::memory::InMemory;
pub use crate::pipeline::Budget;
pub use crate::sink::ZtSink;
pub use crate::verify::{verify_all, verify_source};

use std::borrow::Cow;
use std::io::Write;
use std::path::Path;

use rayon::prelude::*;
use ztensor_format::{
    Attributes, ByteOrder, DType, Encoding, Format, LogicalType, Options, Packing, Version,
};
use ztensor_io::codec::{parse_seek_table_at_end, zstd_decode_into};
use ztensor_io::low_level::{Streaming, check_copy, copies_stored, shares_blob, write_options_for};
use ztensor_io::{
    Component, ComponentData, CopyOptions, Error, FileWriter, ObjectData, ReadAt, Reader, Result,
    WriteOptions, Writer, copy_object,
};

use crate::pipeline::{Input, Item};

/// Progress hooks, called from the pipeline's threads. Every method has an empty default;
/// `()` is the no-op implementation.
pub trait Progress: Sync {
    /// `n` more decoded input bytes were read.
    fn bytes_in(&self, n: u64) {
        let _ = n;
    }
    /// `n` more stored bytes were written.
    fn bytes_out(&self, n: u64) {
        let _ = n;
    }
    /// `n` more decoded bytes are done: compressed and placed in the output (written, or
    /// handed to a thread that writes them at their offset), or verified. What a progress bar
    /// should show: it reaches the total when the work does, not when the input is read.
    fn bytes_done(&self, n: u64) {
        let _ = n;
    }
    /// An object was written completely.
    fn object_done(&self, name: &str) {
        let _ = name;
    }
}

impl Progress for () {}

/// How the parallel engine runs. None of these settings changes the bytes written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParOptions {
    /// Worker threads; 0 means one per available core.
    pub threads: usize,
    /// Most bytes held between reading and writing at once (input pieces and their encoded
    /// output). A single piece larger than this is still admitted, alone. 0 (the default)
    /// means [`ParOptions::AUTO_BUDGET_PER_THREAD`] per worker thread, at most
    /// [`ParOptions::AUTO_BUDGET_MAX`]: what keeps every worker busy, and no more.
    pub memory_budget: u64,
}

impl ParOptions {
    /// Default options with `threads` workers.
    pub fn with_threads(threads: usize) -> ParOptions {
        ParOptions { threads, ..ParOptions::default() }
    }

    /// The automatic memory budget per worker thread: sixteen 4 MiB pieces, each with room
    /// for its encoded output.
    pub const AUTO_BUDGET_PER_THREAD: u64 = 64 << 20;
    /// The most the automatic memory budget grows to, however many threads.
    pub const AUTO_BUDGET_MAX: u64 = 512 << 20;

    /// The least memory budget a run with pieces of `piece` bytes (a zstd frame; raw
    /// components are read in 4 MiB pieces whatever it is) can keep: one piece in flight with
    /// its encoded output. A smaller [`ParOptions::memory_budget`] is not refused here (one piece
    /// is always admitted), but it is not what was asked for either: front ends refuse it.
    pub fn least_budget(piece: u64) -> u64 {
        piece.max(RAW_PIECE).saturating_mul(2)
    }

    /// The memory budget of a run on `threads` workers: [`ParOptions::memory_budget`], or the
    /// automatic one when that is 0.
    pub fn budget_for(&self, threads: usize) -> u64 {
        match self.memory_budget {
            0 => (threads as u64)
                .saturating_mul(ParOptions::AUTO_BUDGET_PER_THREAD)
                .clamp(ParOptions::AUTO_BUDGET_PER_THREAD, ParOptions::AUTO_BUDGET_MAX),
            set => set,
        }
    }

    /// A pool of exactly [`ParOptions::threads`] workers (one per available core when 0),
    /// named `zt-work-{i}`: the pool this engine runs on, for other writers to run on the same
    /// terms.
    ///
    /// # Errors
    /// When the threads cannot be started.
    pub fn pool(&self) -> Result<rayon::ThreadPool> {
        let threads = if self.threads == 0 {
            std::thread::available_parallelism().map_or(1, usize::from)
        } else {
            self.threads
        };
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            // Named by role, so per-thread CPU can be read from outside (`/proc/PID/task`).
            .thread_name(|i| format!("zt-work-{i}"))
            .build()
            .map_err(|e| Error::failed(format!("cannot start threads: {e}")))
    }
}

/// What a run measured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// The most bytes in flight at once (at most the budget, unless one piece alone exceeded it).
    pub peak_in_flight: u64,
}

/// An in-memory dense tensor to write.
#[derive(Debug, Clone)]
pub struct Tensor<'a> {
    /// The object name.
    pub name: &'a str,
    /// The shape.
    pub shape: &'a [u64],
    /// The storage type.
    pub dtype: DType,
    /// The logical type, if any.
    pub logical_type: Option<LogicalType>,
    /// Little-endian data.
    pub data: &'a [u8],
    /// Object attributes, if any.
    pub attributes: Option<Attributes>,
}

impl<'a> Tensor<'a> {
    /// A tensor with no logical type and no attributes.
    pub fn new(name: &'a str, shape: &'a [u64], dtype: DType, data: &'a [u8]) -> Tensor<'a> {
        Tensor { name, shape, dtype, logical_type: None, data, attributes: None }
    }
}

/// Writes `tensors` in order, exactly as calling [`Writer::add_object`] (a dense object with one
/// `data` component) for each would, but compressing and digesting on all threads.
///
/// # Errors
/// As [`Writer::add_object`], plus compression failures; on error the writer must be discarded.
pub fn write_tensors<W: Write>(
    tensors: &[Tensor<'_>],
    writer: &mut Writer<W>,
    options: &WriteOptions,
    par: &ParOptions,
    progress: &dyn Progress,
) -> Result<Stats> {
    // Every tensor the version cannot hold is refused before the first byte is written.
    for t in tensors {
        writer.check_dense(
            t.name,
            t.shape,
            t.dtype,
            t.logical_type.as_ref(),
            t.data.len() as u64,
        )?;
    }
    let items = tensors.iter().map(|t| {
        let len = t.data.len() as u64;
        let object = template(t.name, t.shape, t.attributes.as_ref());
        let input = Input::Slice(t.data);
        stream::<W>(object, t.dtype, t.logical_type.clone(), len, input, options)
    });
    run::<&[u8], W>(None, items, writer, par, progress)
}

/// A dense object without components yet, borrowing its parts: what a streamed item fills in.
fn template<'a>(
    name: &'a str,
    shape: &'a [u64],
    attributes: Option<&'a Attributes>,
) -> pipeline::Template<'a> {
    pipeline::Template::Parts(Box::new(pipeline::Parts {
        name: Cow::Borrowed(name),
        shape: Cow::Borrowed(shape),
        attributes: attributes.map(Cow::Borrowed),
    }))
}

/// A dense object whose one `data` component streams through the parallel stages.
fn stream<'a, W: Write>(
    object: pipeline::Template<'a>,
    dtype: DType,
    logical_type: Option<LogicalType>,
    len: u64,
    input: Input<'a>,
    options: &WriteOptions,
) -> Item<'a, W> {
    Item::Stream { object, dtype, logical_type, len, input, options: options.clone() }
}

/// Copies every object and the file attributes of `reader` into `writer`, exactly as
/// [`ztensor_io::copy_all`] would with the same `copy` options, but decoding, compressing and
/// digesting on all threads.
///
/// # Errors
/// As [`ztensor_io::copy_all`]; on error the writer must be discarded.
pub fn repack<S: ReadAt, W: Write>(
    reader: &Reader<S>,
    writer: &mut Writer<W>,
    copy: &CopyOptions,
    par: &ParOptions,
    progress: &dyn Progress,
) -> Result<Stats> {
    repack_only(reader, writer, copy, par, progress, &|_| true)
}

/// As [`repack`], for the objects whose names `keep` returns true for.
///
/// # Errors
/// As [`repack`].
pub fn repack_only<S: ReadAt, W: Write>(
    reader: &Reader<S>,
    writer: &mut Writer<W>,
    copy: &CopyOptions,
    par: &ParOptions,
    progress: &dyn Progress,
    keep: &dyn Fn(&str) -> bool,
) -> Result<Stats> {
    repack_objects(reader, writer, copy, true, par, progress, &|_, name| keep(name))
}

/// As [`repack`], for the objects `keep` returns true for (given each one's position in the
/// reader's order and its name), and the file attributes only with `file_attributes`.
pub(crate) fn repack_objects<S: ReadAt, W: Write>(
    reader: &Reader<S>,
    writer: &mut Writer<W>,
    copy: &CopyOptions,
    file_attributes: bool,
    par: &ParOptions,
    progress: &dyn Progress,
    keep: &dyn Fn(usize, &str) -> bool,
) -> Result<Stats> {
    // What the copy will write, counted before anything is: a blob that objects share once.
    check_copy(reader, writer, copy, keep)?;
    if let Some(attributes) = &reader.manifest().manifest().attributes
        && !copy.drop_attributes
        && file_attributes
    {
        writer.set_attributes(attributes.clone())?;
    }
    let target = writer.version();
    // Planned as the engine reaches them: no list of every item.
    let kept = reader.objects().enumerate().filter(|(i, o)| keep(*i, o.name()));
    let items = kept.map(|(_, handle)| {
        let object = handle.entry();
        let o = object.object();
        let streamed = (|| {
            // Objects sharing a blob are written by `copy_object`, which writes the blob once.
            if object.unsupported().is_some()
                || copies_stored(o, target, copy)
                || shares_blob(&handle)
            {
                return None;
            }
            if o.packing != Packing::Split || o.format != Format::Dense || o.components.len() != 1 {
                return None;
            }
            let c = o.components.get("data")?;
            let dtype = c.dtype.known()?;
            let len = object.decoded_len("data")?;
            let options = write_options_for(o, copy);
            // The source digest is checked as the bytes are read (unknown algorithms cannot be).
            let digest = c.digest.clone().filter(|d| d.bytes().is_some());
            let input = match (&c.encoding, c.byte_order()) {
                (Encoding::Raw, ByteOrder::Little) => {
                    Input::Raw { offset: c.offset, swap: None, digest }
                }
                (Encoding::Raw, ByteOrder::Big) => Input::Raw {
                    offset: c.offset,
                    swap: usize::try_from(dtype.size()).ok().filter(|&w| w > 1),
                    digest,
                },
                (Encoding::Zstd, ByteOrder::Little) => {
                    // Frames that are exactly the pieces are decoded by the workers, each its
                    // own; any other zstd component as one stream.
                    let (offset, stored) = (c.offset, c.length);
                    let frames =
                        pipeline::frames_as_pieces(reader.source(), offset, stored, len, &options)
                            .or_else(|| pipeline::whole_as_piece(stored, len, &options));
                    match frames {
                        Some(frames) => Input::Frames { offset, stored, frames, digest },
                        None => Input::Zstd { offset, stored, digest },
                    }
                }
                _ => return None,
            };
            let template = pipeline::Template::Like(o, !copy.drop_attributes);
            Some(stream(template, dtype, c.logical_type.clone(), len, input, &options))
        })();
        streamed.unwrap_or_else(|| {
            // It reads its components' stored bytes (copied as they are, or decoded).
            let reads = o
                .components
                .values()
                .filter_map(|c| Some(c.offset..c.offset.checked_add(c.length)?))
                .collect();
            Item::Sequential(
                Box::new(move |w: &mut Writer<W>| {
                    copy_object(handle, w, copy)?;
                    Ok(handle.entry().decoded_lens().map(|(_, n)| n.unwrap_or(0)).sum())
                }),
                reads,
            )
        })
    });
    run(Some(reader.source()), items, writer, par, progress)
}

/// Repacks `input` into `output` (written atomically) in `version`.
///
/// # Errors
/// As [`repack`], and I/O errors; on any error `output` is left untouched.
pub fn repack_file(
    input: &Path,
    output: &Path,
    version: Version,
    copy: &CopyOptions,
    par: &ParOptions,
    progress: &dyn Progress,
) -> Result<(u64, Stats)> {
    let reader = Reader::open_with(input, &Options::default())?;
    let mut writer = FileWriter::create(output, version)?;
    let stats = repack(&reader, writer.writer_mut(), copy, par, progress)?;
    Ok((writer.finish()?, stats))
}

fn run<'a, S: ReadAt, W: Write>(
    source: Option<&'a S>,
    items: impl IntoIterator<Item = Item<'a, W>>,
    writer: &mut Writer<W>,
    par: &ParOptions,
    progress: &dyn Progress,
) -> Result<Stats> {
    let pool = par.pool()?;
    let budget = Budget::new(par.budget_for(pool.current_num_threads()));
    pipeline::run(source, items, writer, &pool, &budget, progress, pipeline::Kernels::Real)?;
    Ok(Stats { peak_in_flight: budget.peak() })
}

/// The piece size of parallel reads of raw components.
pub(crate) const RAW_PIECE: u64 = 4 << 20;

/// A component's decoded bytes, with the frames of a chunked zstd component (one that carries a
/// seek table) decoded in parallel on the current rayon pool, and a large raw one read in
/// pieces on all threads.
///
/// # Errors
/// As [`Component::decoded`].
pub fn decoded_parallel<S: ReadAt>(component: Component<'_, S>) -> Result<Vec<u8>> {
    let object = component.object();
    let reader = object.reader();
    let (name, role) = (object.name(), component.role());
    let c = component.model();
    let expected = component.decoded_len();
    let split = object.model().packing == Packing::Split && *c.byte_order() == ByteOrder::Little;
    // A large raw component is read in pieces on all threads: the copy and the page faults of
    // the fresh buffer are shared out, instead of one thread doing them for the whole tensor.
    if c.encoding == Encoding::Raw
        && split
        && object.unsupported().is_none()
        && c.length >= 2 * RAW_PIECE
    {
        let end = c.offset.checked_add(c.length).filter(|&e| e <= reader.source().len());
        let len = usize::try_from(c.length).ok().filter(|_| end.is_some());
        if let Some(len) = len {
            let mut buf = ztensor_io::try_zeroed(len as u64, &format!("{name:?}/{role}"))
                .map_err(|e| Error::io(format!("reading {name:?}/{role}"), None, e))?;
            let piece = usize::try_from(RAW_PIECE).unwrap_or(usize::MAX);
            buf.par_chunks_mut(piece).enumerate().try_for_each(|(i, chunk)| {
                let at = c.offset + (i * piece) as u64;
                reader.source().read_exact_at(at, chunk).map_err(|e| {
                    Error::io(format!("reading {name:?}/{role} at byte {at}"), None, e)
                })
            })?;
            return Ok(buf);
        }
    }
    if c.encoding == Encoding::Zstd && split && object.unsupported().is_none() {
        // The frames from the seek table alone: each worker then reads its own frame's bytes
        // (a file is not copied whole into memory first by one thread), or borrows them from a
        // memory-backed source.
        let source = reader.source();
        let at = |offset: u64, len: u64| -> Result<Cow<'_, [u8]>> {
            let io = |e| Error::io(format!("reading {name:?}/{role}"), None, e);
            let start = c
                .offset
                .checked_add(offset)
                .ok_or_else(|| io(std::io::Error::from(std::io::ErrorKind::UnexpectedEof)))?;
            match source.as_slice() {
                Some(all) => usize::try_from(start)
                    .ok()
                    .zip(usize::try_from(len).ok())
                    .and_then(|(s, n)| all.get(s..s.checked_add(n)?))
                    .map(Cow::Borrowed)
                    .ok_or_else(|| io(std::io::Error::from(std::io::ErrorKind::UnexpectedEof))),
                None => {
                    let mut buf = ztensor_io::try_zeroed(len, "a zstd frame").map_err(io)?;
                    source.read_exact_at(start, &mut buf).map_err(io)?;
                    Ok(Cow::Owned(buf))
                }
            }
        };
        let frames = (|| {
            let footer = at(c.length.checked_sub(9)?, 9).ok()?;
            let table_len = ztensor_io::codec::seek_table_len(&footer)? as u64;
            let table = at(c.length.checked_sub(table_len)?, table_len).ok()?;
            parse_seek_table_at_end(&table, c.length)
        })();
        if let Some(frames) = frames.filter(|f| f.len() > 1) {
            let total: u64 = frames.iter().fold(0, |t, f| t.saturating_add(f.decompressed));
            let limit = reader.options().limits.whole_decode_limit();
            // The buffer is sized by the seek table: only when every frame could really decode
            // to what the table says (a 385-byte file must not buy 64 GiB).
            let plausible = frames
                .iter()
                .all(|f| f.decompressed <= ztensor_io::codec::zstd_max_decoded(f.compressed));
            if expected.is_some_and(|e| e != total) || total > limit || !plausible {
                // Let the sequential path report the exact error.
                return Ok(component.decoded()?.into_owned());
            }
            let context = |e: ztensor_format::Error| {
                Error::from(e.in_object(name).in_component(role).at(c.offset))
            };
            // Each frame decodes straight into its place in one buffer.
            let mut out = ztensor_io::try_zeroed(total, &format!("{name:?}/{role}"))
                .map_err(|e| Error::io(format!("decoding {name:?}/{role}"), None, e))?;
            let mut slots = Vec::with_capacity(frames.len());
            let mut rest = &mut out[..];
            for f in &frames {
                let (slot, tail) = rest.split_at_mut(usize::try_from(f.decompressed).unwrap_or(0));
                slots.push(slot);
                rest = tail;
            }
            frames.par_iter().zip(slots).try_for_each(|(f, slot)| {
                if source.as_slice().is_some() {
                    let bytes = at(f.offset, f.compressed)?;
                    return zstd_decode_into(&bytes, slot).map_err(context);
                }
                // Each worker reads frames into one buffer of its own, reused: fresh pages for
                // every frame would double the page faults of the decode.
                FRAME.with_borrow_mut(|buf| {
                    let io = |e| Error::io(format!("reading {name:?}/{role}"), None, e);
                    let len = usize::try_from(f.compressed)
                        .map_err(|_| io(std::io::Error::from(std::io::ErrorKind::OutOfMemory)))?;
                    if buf.len() < len {
                        buf.try_reserve_exact(len - buf.len()).map_err(|_| {
                            io(std::io::Error::from(std::io::ErrorKind::OutOfMemory))
                        })?;
                        buf.resize(len, 0);
                    }
                    let start = c.offset.saturating_add(f.offset);
                    source.read_exact_at(start, &mut buf[..len]).map_err(io)?;
                    zstd_decode_into(&buf[..len], slot).map_err(context)
                })
            })?;
            return Ok(out);
        }
    }
    Ok(component.decoded()?.into_owned())
}

thread_local! {
    /// A worker's buffer for the compressed bytes of the frame it decodes.
    static FRAME: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn missing(name: &str, role: &str) -> ztensor_format::Error {
    ztensor_format::Error::new(
        ztensor_format::ErrorKind::ComponentMissing,
        format!("no component {role:?}"),
    )
    .in_object(name)
}

/// Decodes every object on `par.threads` threads, in manifest order: split components through
/// [`decoded_parallel`], v0.1 single-blob sparse tensors through [`Reader::read_object`].
///
/// # Errors
/// The first object that cannot be decoded.
pub fn load_all<S: ReadAt>(
    reader: &Reader<S>,
    par: &ParOptions,
) -> Result<Vec<ObjectData<'static>>> {
    let pool = par.pool()?;
    pool.install(|| {
        reader
            .objects()
            .collect::<Vec<_>>()
            .par_iter()
            .map(|object| {
                let o = object.model();
                if let Some(reason) = object.unsupported() {
                    return Err(Error::from(reason.clone()));
                }
                if o.packing != Packing::Split {
                    return Ok(object.read()?.into_owned());
                }
                let mut components = std::collections::BTreeMap::new();
                for component in object.components() {
                    let role = component.role();
                    let dtype = component
                        .dtype()
                        .ok_or_else(|| Error::from(missing(object.name(), role)))?;
                    let bytes = decoded_parallel(component)?;
                    components.insert(
                        role.to_owned(),
                        ComponentData {
                            dtype,
                            logical_type: component.logical_type().cloned(),
                            bytes: bytes.into(),
                        },
                    );
                }
                Ok(ObjectData {
                    name: o.name.clone(),
                    shape: o.shape.clone(),
                    format: o.format.clone(),
                    attributes: o.attributes.as_deref().cloned().map(std::borrow::Cow::Owned),
                    components,
                })
            })
            .collect()
    })
}
