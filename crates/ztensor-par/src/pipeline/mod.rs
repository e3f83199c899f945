//! The engine: a dispatcher thread (`zt-read`) admits pieces in input order under a memory
//! budget; the rayon pool's workers (`zt-work-N`) read their own raw source pieces (positioned
//! reads, or borrowed from a map), check the source digest over exactly the bytes they read (a
//! per-component chain, hashed in order by whichever worker holds the next piece, or combined
//! from per-piece shares where the algorithm allows: [`Combiner`]), compress and digest. zstd
//! source components whose seek-table frames are the pieces, and one-piece ones, are decoded by
//! the workers; any other is decoded on the dispatcher, a stream each. The calling thread places
//! the pieces in input order through the sequential writer's own streaming API; when the output
//! is a file ([`ztensor_io::FileWriter`], Unix) it only reserves each piece's slot
//! ([`BlobWriter::slot`](ztensor_io::low_level::BlobWriter::slot)) and a worker writes the bytes there with a positioned write, so no
//! single thread copies every byte out.
//!
//! Determinism comes from the split of work: only *preparing* bytes is parallel. Placement
//! (offsets, padding, manifest) happens on one thread, in input order, with the same
//! `ztensor-io` functions the sequential writer uses; pieces are fixed-size chunks of the input,
//! never a function of the thread count.

use std::borrow::Cow;
use std::io::Write;
use std::ops::Range;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use ztensor_format::{
    Attributes, DType, Digest, Error as FormatError, ErrorKind as Rule, Format, LogicalType, Object,
};
use ztensor_io::{Compression, Error, ReadAt, Result, WriteOptions, Writer};

use crate::Progress;

mod budget;
mod chain;
mod consume;
mod produce;
mod read;
mod simulated;
#[cfg(test)]
mod tests;

pub use budget::Budget;
pub(crate) use budget::*;
use chain::*;
use consume::*;
use produce::*;
pub(crate) use read::*;
pub use simulated::Simulation;

/// Where a streamed component's decoded bytes come from.
pub(crate) enum Input<'a> {
    /// Bytes in memory.
    Slice(&'a [u8]),
    /// A raw component of the source file; `swap` is the element width to byte-swap (big-endian
    /// v0.1 data), if any; `digest` the digest of its stored bytes, checked as they are read.
    Raw { offset: u64, swap: Option<usize>, digest: Option<Digest> },
    /// A zstd component of the source file, decoded as a stream; `digest` as for `Raw`.
    Zstd { offset: u64, stored: u64, digest: Option<Digest> },
    /// A zstd component of the source file whose seek table's frames are exactly the pieces
    /// (planned by [`frames_as_pieces`]): each worker reads and decodes its own frame, the last
    /// piece also reads the table, so the source digest covers every stored byte; `digest` as
    /// for `Raw`.
    Frames {
        offset: u64,
        stored: u64,
        frames: Vec<ztensor_io::codec::Frame>,
        digest: Option<Digest>,
    },
}

/// A zstd component that is one piece (it decodes to no more than the piece size) as one
/// "frame" of all its stored bytes, so a worker decodes it while others proceed, instead of the
/// dispatcher. `None` for more than one piece, or a size no stream of `stored` bytes reaches.
pub(crate) fn whole_as_piece(
    stored: u64,
    len: u64,
    options: &WriteOptions,
) -> Option<Vec<ztensor_io::codec::Frame>> {
    let one = pieces_of(len, piece_size(options, len)) == 1;
    (one && len <= ztensor_io::codec::zstd_max_decoded(stored)).then(|| {
        vec![ztensor_io::codec::Frame { offset: 0, compressed: stored, decompressed: len }]
    })
}

/// The frames of a seek-table zstd component of `stored` bytes at `offset`, decoding to `len`
/// bytes, when they are exactly the pieces `options` cut `len` into, each plausible (no frame
/// claims more than its bytes could decode to): then workers decode them independently.
/// `None` (decode as one stream) for anything else, including a table that cannot be read.
pub(crate) fn frames_as_pieces<S: ReadAt>(
    source: &S,
    offset: u64,
    stored: u64,
    len: u64,
    options: &WriteOptions,
) -> Option<Vec<ztensor_io::codec::Frame>> {
    let end = offset.checked_add(stored)?;
    let mut footer = [0u8; 9];
    source.read_exact_at(end.checked_sub(9)?, &mut footer).ok()?;
    let table_len = ztensor_io::codec::seek_table_len(&footer)?;
    // At most 2^20 frames (4 TiB of 4 MiB frames); a larger table is decoded as a stream.
    if table_len as u64 > stored || table_len > (8 << 20) + 17 {
        return None;
    }
    let mut table = vec![0u8; table_len];
    source.read_exact_at(end - table_len as u64, &mut table).ok()?;
    let frames = ztensor_io::codec::parse_seek_table_at_end(&table, stored)?;
    let size = piece_size(options, len);
    let aligned = frames.len() > 1
        && frames.len() == pieces_of(len, size)
        && frames.iter().enumerate().all(|(i, f)| {
            f.decompressed == (len - i as u64 * size).min(size)
                && f.decompressed <= ztensor_io::codec::zstd_max_decoded(f.compressed)
        });
    aligned.then_some(frames)
}

/// The object a streamed item becomes, less its `data` component: a dense object of a name,
/// shape and attributes borrowed from the source where they can be. Built only when it joins
/// the manifest, so that the plan of a file of a million objects holds no copy of each.
pub(crate) enum Template<'a> {
    /// The name and shape of an object of a zTensor source, and its attributes when `true`.
    Like(&'a Object, bool),
    /// These parts (of another format's object, or tensors given in memory).
    Parts(Box<Parts<'a>>),
}

/// A dense object's parts, borrowed where they can be.
pub(crate) struct Parts<'a> {
    pub(crate) name: Cow<'a, str>,
    pub(crate) shape: Cow<'a, [u64]>,
    pub(crate) attributes: Option<Cow<'a, Attributes>>,
}

impl Template<'_> {
    fn name(&self) -> &str {
        match self {
            Template::Like(o, _) => &o.name,
            Template::Parts(p) => &p.name,
        }
    }

    fn shape(&self) -> &[u64] {
        match self {
            Template::Like(o, _) => &o.shape,
            Template::Parts(p) => &p.shape,
        }
    }

    fn build(self) -> Object {
        let (name, shape, attributes) = match self {
            Template::Like(o, keep) => (
                o.name.clone(),
                o.shape.clone(),
                keep.then(|| o.attributes.as_deref().cloned()).flatten(),
            ),
            Template::Parts(p) => {
                let Parts { name, shape, attributes } = *p;
                (name.into_owned(), shape.into_owned(), attributes.map(Cow::into_owned))
            }
        };
        let mut object = Object::new(name, shape, Format::Dense);
        object.attributes = attributes.map(Box::new);
        object
    }
}

/// An object written by the sequential code, on the writing thread.
pub(crate) type SequentialWrite<'a, W> = Box<dyn FnOnce(&mut Writer<W>) -> Result<u64> + 'a>;

/// One object to write, in input order.
#[allow(clippy::large_enum_variant, reason = "items pass through one by one, as planned")]
pub(crate) enum Item<'a, W: Write> {
    /// A dense object with one `data` component, streamed through the parallel stages.
    Stream {
        object: Template<'a>,
        dtype: DType,
        logical_type: Option<LogicalType>,
        len: u64,
        input: Input<'a>,
        options: WriteOptions,
    },
    /// Anything else, written by the sequential code on the writing thread, in order, with the
    /// ranges of the source it reads (what it can say before it runs; empty when nothing).
    Sequential(SequentialWrite<'a, W>, Vec<Range<u64>>),
}

/// What the writing side does for each item.
enum Work<'a, W: Write> {
    Stream {
        object: Template<'a>,
        dtype: DType,
        logical_type: Option<LogicalType>,
        len: u64,
        options: WriteOptions,
        /// Whether a source chain checks the source's digest (its verdict comes as
        /// `Key::Source`; the object joins the manifest only after it).
        checked: bool,
    },
    Sequential(SequentialWrite<'a, W>),
}

/// How many items the pipeline takes in at a time: what it keeps per item (the halves each
/// side works from) is held for a window of this many, not for every item of a checkpoint of a
/// million tensors. Offsets are allocated in item order whatever the window, so the output is
/// the same bytes; between windows the workers wait once for the last pieces of the one before.
const WINDOW: usize = 1 << 14;

/// Runs the pipeline over `items`, writing through `writer`, a window of items at a time.
pub(crate) fn run<'a, S: ReadAt, W: Write>(
    source: Option<&'a S>,
    items: impl IntoIterator<Item = Item<'a, W>>,
    writer: &mut Writer<W>,
    pool: &rayon::ThreadPool,
    budget: &Budget,
    progress: &dyn Progress,
    kernels: Kernels,
) -> Result<()> {
    let mut items = items.into_iter().peekable();
    while items.peek().is_some() {
        run_window(source, items.by_ref().take(WINDOW), writer, pool, budget, progress, kernels)?;
    }
    Ok(())
}

/// Notes that `range` of the source is read next, joined to the last range when it follows
/// it directly. Empty ranges are left out.
fn note_read(reads: &mut Vec<Range<u64>>, range: Range<u64>) {
    if range.is_empty() {
        return;
    }
    match reads.last_mut() {
        Some(last) if last.end == range.start => last.end = range.end,
        _ => reads.push(range),
    }
}

/// Runs the pipeline over one window of items.
fn run_window<'a, S: ReadAt, W: Write>(
    source: Option<&'a S>,
    items: impl Iterator<Item = Item<'a, W>>,
    writer: &mut Writer<W>,
    pool: &rayon::ThreadPool,
    budget: &Budget,
    progress: &dyn Progress,
    kernels: Kernels,
) -> Result<()> {
    // Each streamed item's length and piece size: its units of work are generated from these
    // as they are reached (never planned up front: a small file of many large aliases would
    // otherwise cost memory for pieces before any is read). Items are split as they come, in
    // one pass: inputs go to the reading side, everything else to the writing side, and no
    // list of whole items is held beside the halves.
    // Room for all, when the items can say how many at most (a filtered list of objects).
    let n = match items.size_hint() {
        (_, Some(most)) => most,
        (least, None) => least,
    };
    let mut plan: Vec<Option<(u64, u64)>> = Vec::with_capacity(n);
    let mut chains: Vec<MaybeChain<'_>> = Vec::with_capacity(n);
    let mut source_chains: Vec<MaybeChain<'_>> = Vec::with_capacity(n);
    let mut inputs: Vec<Option<(Input<'a>, WriteOptions)>> = Vec::with_capacity(n);
    let mut work = Vec::with_capacity(n);
    // The source bytes this window reads, in the order it reads them.
    let mut reads: Vec<Range<u64>> = Vec::new();
    for item in items {
        let (mut chain, mut source_chain) = (None, None);
        let Item::Stream { object, dtype, logical_type, len, input, options } = item else {
            let Item::Sequential(write, read) = item else { unreachable!("matched Stream above") };
            for range in read {
                note_read(&mut reads, range);
            }
            plan.push(None);
            chains.push(None);
            source_chains.push(None);
            inputs.push(None);
            work.push(Work::Sequential(write));
            continue;
        };
        // Pieces are planned from the declared length: never one no stream could decode to.
        if let Input::Zstd { stored, .. } = input
            && len > ztensor_io::codec::zstd_max_decoded(stored)
        {
            return Err(Error::from(
                FormatError::new(
                    Rule::DecodedSizeMismatch,
                    "no zstd stream of this size decodes to the declared size",
                )
                .expected_found(
                    len,
                    format!("at most {}", ztensor_io::codec::zstd_max_decoded(stored)),
                )
                .in_object(object.name()),
            ));
        }
        let size = piece_size(&options, len);
        let count = pieces_of(len, size);
        plan.push(Some((len, size)));
        let zstd = matches!(options.compression, Compression::Zstd(_));
        if count > 1 {
            // Raw output pieces are exactly the piece size; compressed ones are not.
            chain = options
                .digest
                .as_ref()
                .and_then(|a| Chain::new(a, count, size, !zstd, ChainEnd::Output { zstd }, kernels))
                .map(Box::new);
        }
        // A raw source component's digest is checked over the pieces the workers read.
        if let Input::Raw { digest: Some(d), .. } | Input::Frames { digest: Some(d), .. } = &input {
            // Raw source pieces are exactly the piece size; stored frames are not.
            let exact = matches!(input, Input::Raw { .. });
            let end = ChainEnd::Source { expected: d.clone() };
            source_chain =
                Chain::new(&d.algorithm(), count, size, exact, end, kernels).map(Box::new);
        }
        let checked = source_chain.is_some();
        let read = match &input {
            Input::Raw { offset, .. } => Some((*offset, len)),
            Input::Zstd { offset, stored, .. } | Input::Frames { offset, stored, .. } => {
                Some((*offset, *stored))
            }
            Input::Slice(_) => None,
        };
        // A range past the end of what offsets can say is not noted: its read fails in turn.
        if let Some((start, end)) = read.and_then(|(at, n)| Some((at, at.checked_add(n)?))) {
            note_read(&mut reads, start..end);
        }
        chains.push(chain);
        source_chains.push(source_chain);
        inputs.push(Some((input, options.clone())));
        work.push(Work::Stream { object, dtype, logical_type, len, options, checked });
    }
    // A source slow to start a read (a remote object) fetches them ahead.
    if let Some(src) = source.filter(|s| s.as_slice().is_none() && !reads.is_empty()) {
        src.will_need(&reads);
    }
    drop(reads);
    let abort = AtomicBool::new(false);
    // The producer owns the only sender (tasks hold clones): when it stops, for whatever
    // reason, the channel disconnects and the writing side stops waiting.
    let (tx, rx) = crossbeam_channel::unbounded::<Message<'_>>();

    // The first failure of a positioned write by a worker, if any.
    let (queued, pending_writes) = crossbeam_channel::unbounded();
    let queue = WriteQueue {
        tx: queued,
        rx: pending_writes,
        failed: Mutex::new(None),
        drain_pending: AtomicBool::new(false),
        draining: AtomicBool::new(false),
    };
    let outcome = pool.in_place_scope(|scope| {
        std::thread::scope(|threads| {
            let (inputs, plan, abort, queue) = (&inputs, &plan, &abort, &queue);
            let chains = (chains.as_slice(), source_chains.as_slice());
            let producer = std::thread::Builder::new()
                .name("zt-read".into())
                .spawn_scoped(threads, move || {
                    let ends = (tx, budget, abort, queue);
                    produce(source, inputs, plan, chains, scope, ends, progress, kernels)
                })
                .map_err(|e| Error::io("starting the reading thread", None, e))?;
            // A panic here (in the writer or a progress hook) must not leave the reading thread
            // waiting for budget that only this side gives back: stop it, then re-raise.
            let writes = Writes { scope, queue, abort, budget };
            let result = panic::catch_unwind(AssertUnwindSafe(|| {
                consume(work, plan, writer, &rx, &writes, progress)
            }));
            if !matches!(result, Ok(Ok(_))) {
                abort.store(true, Ordering::Relaxed);
                budget.wake();
            }
            drop(rx);
            let produced = producer.join();
            let result = result.unwrap_or_else(|p| panic::resume_unwind(p));
            let produced = produced.unwrap_or_else(|p| panic::resume_unwind(p));
            // A reading failure is the cause; the writing side only saw its symptom.
            produced.and(result)
        })
    });
    // Every write has ended here (the scope waits for its tasks); a failed one fails the run.
    match queue.failed.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner) {
        Some(e) => Err(e),
        None => outcome,
    }
}
