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
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use crossbeam_channel::{Receiver, Sender};
use ztensor_format::{
    Attributes, Component, DType, Digest, DigestAlgorithm, Error as FormatError, ErrorKind as Rule,
    Format, LogicalType, Object,
};
use ztensor_io::codec::{Combiner, Hasher, Share, seek_table, zstd_encode};
use ztensor_io::low_level::{BlobSlot, Streaming};
use ztensor_io::{Compression, Error, ReadAt, Result, WriteOptions, Writer};

use crate::Progress;

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
    /// Anything else, written by the sequential code on the writing thread, in order.
    Sequential(SequentialWrite<'a, W>),
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

/// Piece bytes that give their budget back when the last holder (the writing side, or the hash
/// chain) drops them. Raw pieces of data already in memory (slices, maps) are borrowed, not
/// copied.
struct Tracked<'b> {
    bytes: Cow<'b, [u8]>,
    cost: u64,
    budget: &'b Budget,
}

impl Drop for Tracked<'_> {
    fn drop(&mut self) {
        self.budget.give(self.cost);
    }
}

/// A prepared piece: its stored bytes, its input length, and (for a component of one piece)
/// its digest.
struct Prepared<'b> {
    bytes: Arc<Tracked<'b>>,
    input_len: u64,
    digest: Option<ztensor_format::Digest>,
    /// Whether a component of one piece is stored raw although zstd was asked for, zstd not
    /// making it smaller ([`WriteOptions::stores_raw`]).
    raw: bool,
}

/// What workers send the writing side: a piece (by sequence number), the digest of a
/// component of several pieces (by item), or the verdict on a raw source component's digest
/// (by item; `Digest(None)` when it matched, an error when not).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Piece(usize),
    Digest(usize),
    Source(usize),
}

enum Payload<'b> {
    Piece(Prepared<'b>),
    Digest(Option<Digest>),
}

type Message<'b> = (Key, Result<Payload<'b>>);

/// The digest of a component of several pieces, fed in order by whichever worker finishes the
/// next piece: one hasher per component, different components hashed at once. Where the
/// algorithm allows ([`Combiner`]: CRC-32C, and BLAKE3 over pieces of one power-of-two size),
/// each worker hashes its own piece and the chain only combines the shares, in order.
struct Chain<'b> {
    state: Mutex<ChainState<'b>>,
    kernels: Kernels,
    pieces: usize,
    end: ChainEnd,
    /// For computing shares outside the lock; `None` to hash the pieces in order.
    shares: Option<Combiner>,
}

/// An item's chain, if it has one: boxed, because a chain holds hash states (hundreds of bytes),
/// most items have none, and a file may hold millions of items.
type MaybeChain<'b> = Option<Box<Chain<'b>>>;

/// What a chain hashes, and what it sends when it has hashed every piece.
enum ChainEnd {
    /// The written bytes (and, for zstd of several frames, the seek table): `Key::Digest`.
    Output { zstd: bool },
    /// The source's stored bytes, as the workers read them: `Key::Source`, checked here.
    Source { expected: Digest },
}

struct ChainState<'b> {
    next: usize,
    busy: bool,
    hasher: Option<Hasher>,
    pending: BTreeMap<usize, (Arc<Tracked<'b>>, u64)>,
    frames: Vec<(u64, u64)>,
    /// The shares combined so far, and those that came before their turn (with their frame).
    combiner: Option<Combiner>,
    shared: BTreeMap<usize, (Share, (u64, u64))>,
}

impl<'b> Chain<'b> {
    /// A chain over `pieces` pieces of `size` bytes (`exact`: every piece but the last is that
    /// long), hashing with `algorithm`; `None` for an algorithm this crate cannot compute.
    fn new(
        algorithm: &DigestAlgorithm,
        pieces: usize,
        size: u64,
        exact: bool,
        end: ChainEnd,
        kernels: Kernels,
    ) -> Option<Chain<'b>> {
        let hasher = Hasher::new(algorithm)?;
        // BLAKE3 combines only pieces of exactly the power-of-two size, and at least two.
        let shares = Combiner::new(algorithm, size)
            .filter(|_| *algorithm == DigestAlgorithm::Crc32c || (exact && pieces > 1));
        let state = ChainState {
            next: 0,
            busy: false,
            hasher: Some(hasher),
            pending: BTreeMap::new(),
            frames: Vec::new(),
            combiner: shares.clone(),
            shared: BTreeMap::new(),
        };
        Some(Chain { state: Mutex::new(state), kernels, pieces, end, shares })
    }

    /// Adds piece `index`; hashes every piece that is now next in line, unless another worker
    /// is already doing so (or, with a combiner, hashes this piece here and combines the shares
    /// now in line). Sends the digest after the last piece.
    fn push(
        &self,
        item: usize,
        index: usize,
        piece: Arc<Tracked<'b>>,
        input_len: u64,
        tx: &Sender<Message<'b>>,
    ) {
        let lock = || self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(shares) = &self.shares {
            self.kernels.digest_latency(input_len);
            let share = shares.share(index as u64, &piece.bytes);
            let frame = (piece.bytes.len() as u64, input_len);
            drop(piece);
            let mut state = lock();
            state.shared.insert(index, (share, frame));
            loop {
                let next = state.next;
                let Some((share, frame)) = state.shared.remove(&next) else { return };
                if let Some(c) = state.combiner.as_mut() {
                    c.push(share);
                }
                state.frames.push(frame);
                state.next += 1;
                if state.next == self.pieces {
                    let combiner = state.combiner.take();
                    self.send(item, &state.frames, Sum::Combined(combiner), tx);
                    return;
                }
            }
        }
        let mut state = lock();
        state.pending.insert(index, (piece, input_len));
        if state.busy {
            return;
        }
        state.busy = true;
        loop {
            let next = state.next;
            let Some((piece, input_len)) = state.pending.remove(&next) else {
                state.busy = false;
                return;
            };
            let mut hasher = state.hasher.take();
            drop(state);
            self.kernels.digest_latency(input_len);
            if let Some(h) = hasher.as_mut() {
                h.update(&piece.bytes);
            }
            let frame = (piece.bytes.len() as u64, input_len);
            drop(piece);
            state = lock();
            state.hasher = hasher;
            state.frames.push(frame);
            state.next += 1;
            if state.next == self.pieces {
                let hasher = state.hasher.take();
                self.send(item, &state.frames, Sum::Hashed(hasher), tx);
                state.busy = false;
                return;
            }
        }
    }

    /// Sends the chain's result: the output digest (with the seek table of `frames` hashed in,
    /// for zstd of several frames), or the verdict on the source digest.
    fn send(&self, item: usize, frames: &[(u64, u64)], sum: Sum, tx: &Sender<Message<'b>>) {
        let table = match &self.end {
            ChainEnd::Output { zstd: true } if self.pieces > 1 => Some(table_of(frames)),
            _ => None,
        };
        let digest = (|| -> Result<Option<Digest>> {
            let table = table.transpose()?;
            let table = table.as_deref().unwrap_or_default();
            Ok(match sum {
                Sum::Hashed(mut hasher) => {
                    if let Some(h) = hasher.as_mut() {
                        h.update(table);
                    }
                    hasher.map(Hasher::finish)
                }
                Sum::Combined(combiner) => combiner.and_then(|mut c| {
                    // A table after BLAKE3 pieces cannot be combined (never planned so).
                    c.tail(table).then(|| c.finish()).flatten()
                }),
            })
        })();
        let message = match &self.end {
            ChainEnd::Output { .. } => (Key::Digest(item), digest.map(Payload::Digest)),
            ChainEnd::Source { expected } => {
                let verdict = match digest {
                    Ok(Some(actual)) if actual == *expected => Ok(Payload::Digest(None)),
                    Ok(actual) => Err(Error::from(source_mismatch(
                        expected,
                        actual.map_or("none".to_owned(), |a| a.to_string()),
                    ))),
                    Err(e) => Err(e),
                };
                (Key::Source(item), verdict)
            }
        };
        let _ = tx.send(message);
    }
}

/// How a chain summed its pieces.
enum Sum {
    /// In order, by one hasher.
    Hashed(Option<Hasher>),
    /// By shares, combined in order.
    Combined(Option<Combiner>),
}

/// The seek table of frames of (compressed, decompressed) sizes.
fn table_of(frames: &[(u64, u64)]) -> Result<Vec<u8>> {
    let sizes: Option<Vec<(u32, u32)>> = frames
        .iter()
        .map(|&(c, d)| Some((u32::try_from(c).ok()?, u32::try_from(d).ok()?)))
        .collect();
    let sizes = sizes.ok_or_else(|| {
        Error::from(FormatError::new(Rule::InvalidInput, "a frame larger than 4 GiB"))
    })?;
    Ok(seek_table(&sizes))
}

/// What compresses and digests the pieces: the real kernels, or per-byte latencies standing in
/// for them ([`crate::simulate`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) enum Kernels {
    #[default]
    Real,
    Simulated(crate::simulate::Simulation),
}

impl Kernels {
    /// Spends what digesting the output of `input_len` input bytes would, when simulated.
    fn digest_latency(&self, input_len: u64) {
        if let Kernels::Simulated(s) = self {
            crate::simulate::spend(s.digest_ns_per_byte, input_len);
        }
    }
}

/// How long the two ordered ends of the engine waited, in nanoseconds: the reading side for
/// budget, the writing side for the next piece in order.
#[derive(Debug, Default)]
pub(crate) struct Waits {
    pub(crate) budget: AtomicU64,
    pub(crate) order: AtomicU64,
}

fn add_since(counter: &AtomicU64, start: std::time::Instant) {
    let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    counter.fetch_add(ns, Ordering::Relaxed);
}

/// A count of bytes in flight, with backpressure: taking blocks while the budget is used,
/// except that one piece is always admitted when nothing is in flight (so a piece larger than
/// the budget still makes progress, alone).
pub(crate) struct Budget {
    limit: u64,
    used: Mutex<u64>,
    freed: Condvar,
    /// How many are waiting in `take`; changed and read only with `used` locked, so a `give`
    /// that sees none has no one to wake (a wake is a system call, and pieces are given back
    /// by the million when objects are small).
    waiting: std::sync::atomic::AtomicUsize,
    peak: Mutex<u64>,
    /// Where the engine's ends record how long they waited.
    pub(crate) waits: Waits,
}

impl Budget {
    pub(crate) fn new(limit: u64) -> Budget {
        Budget {
            limit,
            used: Mutex::new(0),
            freed: Condvar::new(),
            waiting: std::sync::atomic::AtomicUsize::new(0),
            peak: Mutex::new(0),
            waits: Waits::default(),
        }
    }

    /// Admits `n` bytes, waiting for room; `false` (nothing admitted) when the run is aborted.
    fn take(&self, n: u64, abort: &AtomicBool) -> bool {
        let mut used = self.used.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut waited = None;
        loop {
            if abort.load(Ordering::Relaxed) {
                return false;
            }
            if *used == 0 || used.saturating_add(n) <= self.limit {
                break;
            }
            waited.get_or_insert_with(std::time::Instant::now);
            self.waiting.fetch_add(1, Ordering::Relaxed);
            used = self.freed.wait(used).unwrap_or_else(std::sync::PoisonError::into_inner);
            self.waiting.fetch_sub(1, Ordering::Relaxed);
        }
        if let Some(start) = waited {
            add_since(&self.waits.budget, start);
        }
        *used += n;
        let mut peak = self.peak.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *peak = (*peak).max(*used);
        true
    }

    fn give(&self, n: u64) {
        let mut used = self.used.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *used = used.saturating_sub(n);
        if self.waiting.load(Ordering::Relaxed) > 0 {
            self.freed.notify_all();
        }
    }

    fn wake(&self) {
        let _guard = self.used.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        self.freed.notify_all();
    }

    /// The most bytes ever in flight at once.
    pub(crate) fn peak(&self) -> u64 {
        *self.peak.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The piece size of a component: its zstd frame size, or (raw) the same fixed unit.
pub(crate) fn piece_size(options: &WriteOptions, len: u64) -> u64 {
    match options.chunk_size {
        Some(c) if c > 0 => c,
        _ => len.max(1),
    }
}

/// Positional reads of `len` bytes from `offset`, as a stream.
struct RangeReader<'a, S> {
    source: &'a S,
    at: u64,
    end: u64,
}

impl<S: ReadAt> Read for RangeReader<'_, S> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = usize::try_from((self.end - self.at).min(buf.len() as u64)).unwrap_or(buf.len());
        if n == 0 {
            return Ok(0);
        }
        self.source
            .read_exact_at(self.at, &mut buf[..n])
            .map_err(|e| std::io::Error::new(e.kind(), SourceRead(e)))?;
        self.at += n as u64;
        Ok(n)
    }
}

/// A failed read of the source, told apart from a corrupt zstd stream that the decoder reports
/// through the same `io::Error`: the first is an I/O failure, the second the data saying no.
#[derive(Debug)]
struct SourceRead(std::io::Error);

impl std::fmt::Display for SourceRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for SourceRead {}

/// The error a source zstd stream failed with: an I/O error when the source could not be
/// read, `decode_failed` otherwise.
fn stream_error(e: std::io::Error) -> Error {
    if e.get_ref().is_some_and(|inner| inner.is::<SourceRead>()) {
        Error::io("reading the source", None, e)
    } else {
        Error::from(FormatError::new(Rule::DecodeFailed, format!("source zstd: {e}")))
    }
}

/// A reader that hashes what passes through it.
struct Hashing<R> {
    inner: R,
    hasher: Option<Hasher>,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(h) = self.hasher.as_mut() {
            h.update(&buf[..n]);
        }
        Ok(n)
    }
}

type ZstdStream<'a, S> =
    zstd::stream::read::Decoder<'static, std::io::BufReader<Hashing<RangeReader<'a, S>>>>;

/// Checks a finished source digest.
fn check_digest(expected: Option<&Digest>, hasher: Option<Hasher>) -> Option<FormatError> {
    let (expected, actual) = (expected?, hasher?.finish());
    (actual != *expected).then(|| source_mismatch(expected, actual))
}

/// The error of a source whose stored bytes do not have the digest its manifest states.
fn source_mismatch(expected: &Digest, actual: impl std::fmt::Display) -> FormatError {
    FormatError::new(Rule::DigestMismatch, "source digest differs from the stored bytes")
        .expected_found(expected, actual)
}

/// One piece of one streamed item.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Unit {
    item: usize,
    start: u64,
    len: u64,
    index: usize,
    count: usize,
}

/// How many pieces of `size` a component of `len` bytes is cut into (one when empty).
pub(crate) fn pieces_of(len: u64, size: u64) -> usize {
    usize::try_from(len.div_ceil(size.max(1)).max(1)).unwrap_or(usize::MAX)
}

/// Every piece of every streamed item of `plan`, in order, generated as they are reached.
fn units(plan: &[Option<(u64, u64)>]) -> impl Iterator<Item = Unit> + '_ {
    plan.iter().enumerate().filter_map(|(i, p)| p.map(|p| (i, p))).flat_map(
        |(item, (len, size))| {
            let count = pieces_of(len, size);
            (0..count).map(move |index| {
                let start = index as u64 * size;
                Unit { item, start, len: len.saturating_sub(start).min(size), index, count }
            })
        },
    )
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
    for item in items {
        let (mut chain, mut source_chain) = (None, None);
        let Item::Stream { object, dtype, logical_type, len, input, options } = item else {
            let Item::Sequential(write) = item else { unreachable!("matched Stream above") };
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
        chains.push(chain);
        source_chains.push(source_chain);
        inputs.push(Some((input, options.clone())));
        work.push(Work::Stream { object, dtype, logical_type, len, options, checked });
    }
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

/// Finished pieces waiting for a worker to write them at their slots. Every worker task takes
/// the waiting writes first, before it reads or compresses another piece, so bytes leave memory
/// as soon as their place is known instead of queueing behind reads.
struct WriteQueue<'b> {
    tx: Sender<(BlobSlot, Arc<Tracked<'b>>)>,
    rx: Receiver<(BlobSlot, Arc<Tracked<'b>>)>,
    /// The first failure of a write, if any.
    failed: Mutex<Option<Error>>,
    /// Whether a task that drains the queue is spawned and not yet started: one is enough, so
    /// a piece does not cost a task of its own (with hundreds of workers, every task is a trip
    /// through the pool's shared queues).
    drain_pending: AtomicBool,
    /// Whether a worker is draining the queue now.
    draining: AtomicBool,
}

impl WriteQueue<'_> {
    /// Writes every piece waiting now. A failure stops the run and is reported when it ends;
    /// after one, waiting pieces are dropped unwritten (their budget given back).
    ///
    /// One worker drains at a time: writes to one file serialize in the kernel anyway (the
    /// inode's lock), and hundreds of workers writing at once only spin on it. A worker that
    /// finds another draining goes on to its own work; the drainer looks again after it lets
    /// go, so a piece queued meanwhile is never left behind.
    fn drain(&self, abort: &AtomicBool, budget: &Budget) {
        loop {
            if self.draining.swap(true, Ordering::SeqCst) {
                return;
            }
            while let Ok((slot, bytes)) = self.rx.try_recv() {
                if abort.load(Ordering::Relaxed) {
                    continue;
                }
                if let Err(e) = slot.write(&bytes.bytes) {
                    let mut first =
                        self.failed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    first.get_or_insert(e);
                    abort.store(true, Ordering::Relaxed);
                    budget.wake();
                }
            }
            self.draining.store(false, Ordering::SeqCst);
            if self.rx.is_empty() {
                return;
            }
        }
    }
}

/// Positioned writes of finished pieces, run by the workers.
struct Writes<'r, 's, 'b> {
    scope: &'r rayon::Scope<'s>,
    queue: &'s WriteQueue<'b>,
    abort: &'s AtomicBool,
    budget: &'b Budget,
}

impl<'b: 's, 's> Writes<'_, 's, 'b> {
    /// Queues `bytes` for a worker to write at `slot` (with a task of its own, so it is written
    /// even when no other piece is left to start).
    fn spawn(&self, slot: BlobSlot, bytes: Arc<Tracked<'b>>) {
        let _ = self.queue.tx.send((slot, bytes));
        // A drain task spawned and not yet started will take this piece too: it clears the
        // flag before it drains, and the piece was queued before the flag was read.
        if self.queue.drain_pending.swap(true, Ordering::SeqCst) {
            return;
        }
        let (queue, abort, budget) = (self.queue, self.abort, self.budget);
        self.scope.spawn(move |_| {
            queue.drain_pending.store(false, Ordering::SeqCst);
            queue.drain(abort, budget);
        });
    }

    /// Bytes made here (a seek table), outside the budget.
    fn untracked(&self, bytes: Vec<u8>) -> Arc<Tracked<'b>> {
        Arc::new(Tracked { bytes: Cow::Owned(bytes), cost: 0, budget: self.budget })
    }

    fn failed(&self) -> bool {
        self.abort.load(Ordering::Relaxed)
            && self.queue.failed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).is_some()
    }
}

/// What a worker starts a piece from.
enum Job<'b> {
    /// Bytes already at hand (a slice, or zstd source output decoded in order).
    Ready(Cow<'b, [u8]>),
    /// A piece of a raw source component, read by the worker itself: `at` in the source,
    /// `swap` the element width to byte-swap after reading.
    Raw { at: u64, swap: Option<usize> },
    /// A frame of a seek-table zstd source component: `read` stored bytes at `at` (the last
    /// piece's include the table), of which the first `compressed` are the frame, decoded by the
    /// worker; `stored_cost` the budget those stored bytes hold.
    Frame { at: u64, read: u64, compressed: u64, stored_cost: u64 },
}

/// The dispatcher: admits every piece in order (taking budget first) and hands it to the pool.
/// Raw source pieces are read, checked and compressed by the workers; only zstd source
/// components, a stream each, are decoded here.
#[allow(clippy::too_many_arguments)]
fn produce<'a, 's, 'b, S: ReadAt>(
    source: Option<&'a S>,
    inputs: &'s [Option<(Input<'a>, WriteOptions)>],
    plan: &[Option<(u64, u64)>],
    chains: (&'s [MaybeChain<'b>], &'s [MaybeChain<'b>]),
    scope: &rayon::Scope<'s>,
    ends: (Sender<Message<'b>>, &'b Budget, &'s AtomicBool, &'s WriteQueue<'b>),
    progress: &dyn Progress,
    kernels: Kernels,
) -> Result<()>
where
    'a: 'b,
    'b: 's,
{
    let (chains, source_chains) = chains;
    let (tx, budget, abort, queue) = ends;
    let mut stream: Option<(usize, ZstdStream<'a, S>)> = None;
    let fail = |seq: usize, error: Error, cost: u64| {
        budget.give(cost);
        let _ = tx.send((Key::Piece(seq), Err(error)));
    };
    // Raw pieces of a source in memory (a map) are borrowed, never copied.
    let mapped: Option<&'a [u8]> = source.and_then(ReadAt::as_slice);
    for (seq, unit) in units(plan).enumerate() {
        let Unit { item, start, len, index, count } = unit;
        let Some((input, options)) = &inputs[item] else { continue };
        let last = index + 1 == count;
        let compress = matches!(options.compression, Compression::Zstd(_));
        let bound = if compress {
            zstd::zstd_safe::compress_bound(usize::try_from(len).unwrap_or(0)) as u64
        } else {
            0
        };
        let owned = match input {
            Input::Slice(_) => false,
            Input::Raw { swap: None, .. } => mapped.is_none(),
            _ => true,
        };
        // The input's share, then the compressed output's: split again by the worker.
        let in_cost = if owned || !compress { len } else { 0 };
        // A big-endian piece whose stored bytes a source chain hashes is swapped on a copy.
        let swap_cost = match input {
            Input::Raw { swap: Some(_), .. } if source_chains[item].is_some() => len,
            _ => 0,
        };
        // A frame's stored bytes, read by the worker, until decoded (and hashed).
        let frame = match input {
            Input::Frames { offset, stored, frames, .. } => frames.get(index).map(|f| {
                let read = if last { stored - f.offset } else { f.compressed };
                (offset + f.offset, read, f.compressed)
            }),
            _ => None,
        };
        let stored_cost = match frame {
            Some((_, read, _)) if mapped.is_none() => read,
            _ => 0,
        };
        let cost = bound + in_cost + swap_cost + stored_cost;
        if !budget.take(cost, abort) {
            return Ok(());
        }
        let job = match input {
            Input::Slice(all) => {
                let (s, e) = (
                    usize::try_from(start).unwrap_or(0),
                    usize::try_from(start + len).unwrap_or(0),
                );
                Job::Ready(Cow::Borrowed(&all[s..e]))
            }
            Input::Raw { offset, swap, .. } => {
                if source.is_none() {
                    fail(seq, no_source(), cost);
                    return Ok(());
                }
                let Some(at) = offset.checked_add(start) else {
                    fail(
                        seq,
                        Error::from(FormatError::new(Rule::InvalidInput, "offset overflow")),
                        cost,
                    );
                    return Ok(());
                };
                Job::Raw { at, swap: *swap }
            }
            Input::Frames { .. } => {
                let Some((at, read, compressed)) = frame.filter(|_| source.is_some()) else {
                    fail(seq, no_source(), cost);
                    return Ok(());
                };
                Job::Frame { at, read, compressed, stored_cost }
            }
            Input::Zstd { offset, stored, digest } => {
                let src = source.ok_or_else(no_source)?;
                if stream.as_ref().is_none_or(|(i, _)| *i != item) {
                    let hasher = digest.as_ref().and_then(|d| Hasher::new(&d.algorithm()));
                    let range = Hashing {
                        inner: RangeReader { source: src, at: *offset, end: offset + stored },
                        hasher,
                    };
                    match zstd::stream::read::Decoder::new(range) {
                        Ok(d) => stream = Some((item, d)),
                        Err(e) => {
                            fail(seq, stream_error(e), cost);
                            return Ok(());
                        }
                    }
                }
                let mut buf = vec![0u8; usize::try_from(len).unwrap_or(0)];
                let mut failure = None;
                if let Some((_, d)) = stream.as_mut() {
                    if let Err(e) = d.read_exact(&mut buf) {
                        failure = Some(if e.kind() == std::io::ErrorKind::UnexpectedEof {
                            Error::from(FormatError::new(
                                Rule::DecodedSizeMismatch,
                                "source zstd output is shorter than expected",
                            ))
                        } else {
                            stream_error(e)
                        });
                    } else if last {
                        // The stream must end here; then every stored byte must have been hashed.
                        let mut one = [0u8; 1];
                        match d.read(&mut one) {
                            Ok(0) => {}
                            Ok(_) => {
                                failure = Some(Error::from(FormatError::new(
                                    Rule::DecodedSizeMismatch,
                                    "source zstd output is longer than expected",
                                )))
                            }
                            Err(e) => failure = Some(stream_error(e)),
                        }
                    }
                }
                if last
                    && failure.is_none()
                    && let Some((_, d)) = stream.take()
                {
                    let mut rest = d.finish().into_inner();
                    if let Err(e) = std::io::copy(&mut rest, &mut std::io::sink()) {
                        failure = Some(stream_error(e));
                    } else {
                        failure = check_digest(digest.as_ref(), rest.hasher).map(Error::from);
                    }
                }
                if let Some(f) = failure {
                    fail(seq, f, cost);
                    return Ok(());
                }
                Job::Ready(Cow::Owned(buf))
            }
        };
        // Admitted: counted as read (a worker reads raw source pieces as it starts them).
        progress.bytes_in(len);
        let single = count == 1;
        let options = options.clone();
        let tx = tx.clone();
        let (chain, source_chain) = (chains[item].as_deref(), source_chains[item].as_deref());
        let task = move || {
            // Finished pieces whose place is known go out first.
            queue.drain(abort, budget);
            let work = panic::catch_unwind(AssertUnwindSafe(|| {
                // Read (raw source pieces), then hand the source chain exactly the bytes that
                // are then compressed and written.
                let (input, swap, hashed) = match job {
                    Job::Ready(bytes) => (bytes, None, false),
                    Job::Raw { at, swap } => match read_piece(source, mapped, at, len) {
                        Ok(bytes) => (bytes, swap, false),
                        Err(e) => {
                            budget.give(cost);
                            let _ = tx.send((Key::Piece(seq), Err(e)));
                            return;
                        }
                    },
                    Job::Frame { at, read, compressed, stored_cost } => {
                        let decoded = read_piece(source, mapped, at, read).and_then(|bytes| {
                            // The source chain hashes the stored bytes this worker decodes.
                            let stored = Arc::new(Tracked { bytes, cost: stored_cost, budget });
                            if let Some(chain) = source_chain {
                                chain.push(item, index, Arc::clone(&stored), len, &tx);
                            }
                            let frame = usize::try_from(compressed)
                                .ok()
                                .and_then(|n| stored.bytes.get(..n))
                                .unwrap_or_default();
                            let mut out = vec![0u8; usize::try_from(len).unwrap_or(0)];
                            ztensor_io::codec::zstd_decode_into(frame, &mut out)?;
                            Ok(out)
                        });
                        match decoded {
                            Ok(out) => (Cow::Owned(out), None, true),
                            Err(e) => {
                                // The stored bytes gave theirs back when dropped.
                                budget.give(cost - stored_cost);
                                let _ = tx.send((Key::Piece(seq), Err(e)));
                                return;
                            }
                        }
                    }
                };
                let mut input = Arc::new(Tracked { bytes: input, cost: in_cost, budget });
                if let Some(chain) = source_chain.filter(|_| !hashed) {
                    chain.push(item, index, Arc::clone(&input), len, &tx);
                }
                if let Some(width) = swap {
                    // Big-endian elements. Swapped in place when nothing else holds the stored
                    // bytes; else (a source chain still to hash them) on a copy the dispatcher
                    // budgeted for.
                    if let Some(only) = Arc::get_mut(&mut input) {
                        ztensor_format::data::swap_bytes(only.bytes.to_mut(), width);
                    } else {
                        let mut copy = input.bytes.to_vec();
                        ztensor_format::data::swap_bytes(&mut copy, width);
                        input =
                            Arc::new(Tracked { bytes: Cow::Owned(copy), cost: swap_cost, budget });
                    }
                }
                match prepare(input, &options, single, bound, budget, kernels) {
                    Ok(prepared) => {
                        let bytes = Arc::clone(&prepared.bytes);
                        let input_len = prepared.input_len;
                        let _ = tx.send((Key::Piece(seq), Ok(Payload::Piece(prepared))));
                        if let Some(chain) = chain {
                            chain.push(item, index, bytes, input_len, &tx);
                        }
                    }
                    Err(e) => {
                        let _ = tx.send((Key::Piece(seq), Err(e)));
                    }
                }
            }));
            if let Err(p) = work {
                // Stop the run (the reading side may be waiting for budget this piece held),
                // tell the writing side, and let the scope re-raise the panic at its end.
                abort.store(true, Ordering::Relaxed);
                budget.wake();
                let stopped = Error::failed("a worker thread panicked");
                let _ = tx.send((Key::Piece(seq), Err(stopped)));
                panic::resume_unwind(p);
            }
        };
        if len == 0 {
            // Nothing to read, compress or hash: done here, not handed to a worker (a task
            // per empty piece wakes a sleeping worker each time, which costs more than a
            // checkpoint of a million empty tensors takes to write).
            task();
        } else {
            scope.spawn(move |_| task());
        }
        if abort.load(Ordering::Relaxed) {
            return Ok(());
        }
    }
    Ok(())
}

/// A piece of a raw source component: borrowed from the map when the source is one, else read.
fn read_piece<'a, S: ReadAt>(
    source: Option<&'a S>,
    mapped: Option<&'a [u8]>,
    at: u64,
    len: u64,
) -> Result<Cow<'a, [u8]>> {
    let in_memory = mapped.and_then(|all| {
        let s = usize::try_from(at).ok()?;
        all.get(s..s.checked_add(usize::try_from(len).ok()?)?)
    });
    if let Some(bytes) = in_memory {
        return Ok(Cow::Borrowed(bytes));
    }
    let src = source.ok_or_else(no_source)?;
    let mut buf = vec![0u8; usize::try_from(len).unwrap_or(0)];
    src.read_exact_at(at, &mut buf).map_err(|e| Error::io("reading the source", None, e))?;
    Ok(Cow::Owned(buf))
}

fn no_source() -> Error {
    Error::failed("a file input without a source")
}

/// Compresses one piece and, when it is a whole component, digests it. A raw piece is written
/// as it is (the same bytes a source chain may be hashing); a compressed one is tracked with
/// `out_cost` of the budget.
fn prepare<'b>(
    input: Arc<Tracked<'b>>,
    options: &WriteOptions,
    whole_component: bool,
    out_cost: u64,
    budget: &'b Budget,
    kernels: Kernels,
) -> Result<Prepared<'b>> {
    let input_len = input.bytes.len() as u64;
    let mut raw = false;
    let bytes = match (options.compression, kernels) {
        (Compression::Zstd(_), Kernels::Simulated(s)) => {
            crate::simulate::spend(s.compress_ns_per_byte, input_len);
            let out = crate::simulate::output_len(input_len);
            drop(input);
            Arc::new(Tracked { bytes: Cow::Owned(vec![0; out]), cost: out_cost, budget })
        }
        (Compression::Raw, _) => input,
        (Compression::Zstd(level), Kernels::Real) => {
            // Tracked from here on, so the budget is given back whatever happens.
            let mut t = Tracked { bytes: Cow::Borrowed(&[]), cost: out_cost, budget };
            let z = zstd_encode(&input.bytes, level)
                .map_err(|e| Error::failed(format!("zstd: {e}")))?;
            if whole_component && options.stores_raw(input_len, z.len() as u64) {
                raw = true;
                input
            } else {
                drop(input);
                t.bytes = Cow::Owned(z);
                Arc::new(t)
            }
        }
    };
    let digest = match (&options.digest, whole_component) {
        (Some(a), true) => {
            kernels.digest_latency(input_len);
            let mut h = Hasher::new(a).ok_or_else(|| {
                Error::from(FormatError::new(Rule::InvalidInput, "unknown digest"))
            })?;
            h.update(&bytes.bytes);
            Some(h.finish())
        }
        _ => None,
    };
    Ok(Prepared { bytes, input_len, digest, raw })
}

/// Messages that arrived before they were wanted, by key.
struct Inbox<'r, 'b> {
    rx: &'r Receiver<Message<'b>>,
    waiting: HashMap<Key, Result<Payload<'b>>>,
    /// Where the time spent waiting is added.
    waited: &'r AtomicU64,
}

impl<'b> Inbox<'_, 'b> {
    /// The message for `key`, waiting for it.
    fn wait(&mut self, key: Key) -> Result<Payload<'b>> {
        if let Some(p) = self.poll(key) {
            return p;
        }
        let start = std::time::Instant::now();
        let outcome = loop {
            if let Some(p) = self.waiting.remove(&key) {
                break p;
            }
            match self.rx.recv() {
                Ok((k, p)) => {
                    self.waiting.insert(k, p);
                }
                Err(_) => break Err(Error::failed("the pipeline stopped early")),
            }
        };
        add_since(self.waited, start);
        outcome
    }

    /// The message for `key`: waiting for it with `wait`, else only if it has arrived.
    fn get(&mut self, key: Key, wait: bool) -> Option<Result<Payload<'b>>> {
        if wait { Some(self.wait(key)) } else { self.poll(key) }
    }

    /// The message for `key` if it has arrived, without waiting.
    fn poll(&mut self, key: Key) -> Option<Result<Payload<'b>>> {
        while let Ok((k, p)) = self.rx.try_recv() {
            self.waiting.insert(k, p);
        }
        self.waiting.remove(&key)
    }
}

/// A streamed object whose bytes are written, waiting (in input order) to be added to the
/// manifest.
struct Written<'a> {
    object: Template<'a>,
    component: Component,
    /// The item whose hash chain still owes the component's digest, if any.
    chain: Option<usize>,
    /// The item whose source chain still owes its verdict on the source digest, if any.
    source: Option<usize>,
}

/// Objects whose bytes are written, added to the manifest in input order as their digests
/// arrive. Writing the next objects' bytes does not wait for a digest, so pieces that are
/// hashed are written (and their memory given back) while a long component is still hashing.
/// A repeated name is refused when the second object is added ([`Streaming::push_object`]).
struct Pending<'a>(std::collections::VecDeque<Written<'a>>);

impl Pending<'_> {
    /// Adds the objects at the front whose digests are known; with `wait`, all of them.
    fn settle<W: Write>(
        &mut self,
        writer: &mut Writer<W>,
        inbox: &mut Inbox<'_, '_>,
        progress: &dyn Progress,
        wait: bool,
    ) -> Result<()> {
        while let Some(front) = self.0.front_mut() {
            if let Some(item) = front.source {
                let Some(message) = inbox.get(Key::Source(item), wait) else { return Ok(()) };
                front.source = None;
                // A mismatch ends the run: nothing is published.
                message?;
            }
            if let Some(item) = front.chain {
                let Some(message) = inbox.get(Key::Digest(item), wait) else { return Ok(()) };
                front.chain = None;
                let Payload::Digest(d) = message? else { unreachable_payload()? };
                front.component.digest = d;
            }
            let Some(Written { object, component, .. }) = self.0.pop_front() else { break };
            let mut object = object.build();
            object.components.insert("data".to_owned(), component);
            let name = object.name.clone();
            writer.push_object(object)?;
            progress.object_done(&name);
        }
        Ok(())
    }
}

/// The writing side: every item in order; streamed pieces as they arrive, reordered.
fn consume<'b: 's, 's, W: Write>(
    items: Vec<Work<'_, W>>,
    plan: &[Option<(u64, u64)>],
    writer: &mut Writer<W>,
    rx: &Receiver<Message<'b>>,
    writes: &Writes<'_, 's, 'b>,
    progress: &dyn Progress,
) -> Result<()> {
    let mut inbox = Inbox { rx, waiting: HashMap::new(), waited: &writes.budget.waits.order };
    let mut pending = Pending(std::collections::VecDeque::new());
    let mut seq = 0usize;
    for (item, work) in items.into_iter().enumerate() {
        match work {
            Work::Sequential(write) => {
                pending.settle(writer, &mut inbox, progress, true)?;
                progress.bytes_done(write(writer)?);
            }
            Work::Stream { object, dtype, logical_type, len, options, checked } => {
                writer.check_dense(
                    object.name(),
                    object.shape(),
                    dtype,
                    logical_type.as_ref(),
                    len,
                )?;
                let pieces = plan[item].map_or(1, |(len, size)| pieces_of(len, size));
                let mut frames = Vec::with_capacity(pieces);
                let mut digest = None;
                let mut raw = false;
                let mut blob = writer.blob()?;
                for _ in 0..pieces {
                    let Payload::Piece(p) = inbox.wait(Key::Piece(seq))? else {
                        unreachable_payload()?
                    };
                    seq += 1;
                    let n = p.bytes.bytes.len() as u64;
                    // Placed here, in order; written by a worker when the sink is a file.
                    match blob.slot(n)? {
                        // Nothing to write (an empty tensor): no task for a worker.
                        Some(_) if n == 0 => {}
                        Some(slot) => {
                            if writes.failed() {
                                return Ok(());
                            }
                            writes.spawn(slot, p.bytes);
                        }
                        None => blob.write(&p.bytes.bytes)?,
                    }
                    frames.push((n, p.input_len));
                    digest = p.digest;
                    raw = p.raw;
                    progress.bytes_done(p.input_len);
                    progress.bytes_out(n);
                }
                let zstd = matches!(options.compression, Compression::Zstd(_)) && !raw;
                if zstd && pieces > 1 {
                    let table = table_of(&frames)?;
                    let n = table.len() as u64;
                    match blob.slot(n)? {
                        Some(slot) => writes.spawn(slot, writes.untracked(table)),
                        None => blob.write(&table)?,
                    }
                    progress.bytes_out(n);
                }
                let placed = blob.finish();
                let mut component = if zstd { placed.zstd(dtype, len) } else { placed.raw(dtype) };
                component.logical_type = logical_type;
                component.digest = digest;
                let chain = (pieces > 1 && options.digest.is_some()).then_some(item);
                let source = checked.then_some(item);
                pending.0.push_back(Written { object, component, chain, source });
                pending.settle(writer, &mut inbox, progress, false)?;
            }
        }
    }
    pending.settle(writer, &mut inbox, progress, true)
}

fn unreachable_payload<T>() -> Result<T> {
    // Keys say what a payload is; a mismatch would be a bug here, reported rather than panicking.
    Err(Error::failed("pipeline message out of place"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ztensor_format::{DType, Options, Version};
    use ztensor_io::Reader;

    #[test]
    fn frames_are_pieces_only_when_they_tile_alike() {
        let data: Vec<u8> = (0..20_000u32).map(|i| (i % 249) as u8).collect();
        let chunked = WriteOptions { chunk_size: Some(2048), ..WriteOptions::zstd(3) };
        let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
        w.add_dense("w", &[20_000], DType::U8, &data, &chunked).unwrap();
        w.add_dense("one", &[100], DType::U8, &data[..100], &chunked).unwrap();
        let file = w.finish().unwrap().0;
        let reader = Reader::new(&file[..], &Options::default()).unwrap();
        let at = |name: &str| {
            let c = &reader.object(name).unwrap().model().components["data"];
            (c.offset, c.length)
        };
        let (offset, stored) = at("w");
        let source = &file[..];
        let frames = frames_as_pieces(&source, offset, stored, 20_000, &chunked).unwrap();
        assert_eq!(frames.len(), 10);
        assert_eq!(frames.iter().map(|f| f.decompressed).sum::<u64>(), 20_000);
        // Other pieces than the frames, another declared length, or one frame: a stream.
        let other = WriteOptions { chunk_size: Some(4096), ..WriteOptions::zstd(3) };
        assert!(frames_as_pieces(&source, offset, stored, 20_000, &other).is_none());
        assert!(frames_as_pieces(&source, offset, stored, 19_999, &chunked).is_none());
        let (offset, stored) = at("one");
        assert!(frames_as_pieces(&source, offset, stored, 100, &chunked).is_none());
        // A table past the component's start, or cut short: a stream, not an error.
        assert!(frames_as_pieces(&source, offset, 5, 100, &chunked).is_none());
        // One piece: one "frame" of every stored byte; a claim past what they decode to: none.
        let whole = whole_as_piece(stored, 100, &chunked).unwrap();
        assert_eq!((whole.len(), whole[0].compressed, whole[0].decompressed), (1, stored, 100));
        assert!(whole_as_piece(stored, 100_000, &chunked).is_none());
        assert!(
            whole_as_piece(10, ztensor_io::codec::zstd_max_decoded(10) + 1, &WriteOptions::zstd(1))
                .is_none()
        );
    }
}
