//! Component codecs: bounded zstd decoding and encoding, and digests.

use std::io::Read;

use sha2::Digest as _;
use ztensor_format::{Digest, DigestAlgorithm, Error, ErrorKind};

/// Bytes reserved up front when decoding; output beyond this grows as it arrives, so a hostile
/// declared size never becomes an allocation by itself.
const INITIAL_RESERVE: u64 = 64 << 20;

/// The most bytes a zstd stream of `stored` bytes can decode to. A block holds at most 128 KiB
/// and takes at least 4 bytes (an RLE block: a 3-byte header and the byte), so no stream expands
/// more than 32,768 times; a manifest or seek table that claims more describes no real stream,
/// and nothing should be allocated on its word.
pub fn zstd_max_decoded(stored: u64) -> u64 {
    stored.saturating_mul(32_768)
}

/// Decodes a zstd stream (one or more frames). With `expected`, the output must be exactly that
/// long; without it, it may be at most `limit` bytes.
///
/// # Errors
/// [`ErrorKind::DecodeFailed`] for a corrupt stream, [`ErrorKind::DecodedSizeMismatch`] for
/// output of another length than `expected`, [`ErrorKind::DecodedTooLarge`] past `limit`.
pub fn zstd_decode(stored: &[u8], expected: Option<u64>, limit: u64) -> Result<Vec<u8>, Error> {
    let cap = expected.unwrap_or(limit).min(limit);
    if let Some(n) = expected.filter(|&n| n > zstd_max_decoded(stored.len() as u64)) {
        return Err(Error::new(
            ErrorKind::DecodedSizeMismatch,
            "no zstd stream of this size decodes to the declared size",
        )
        .expected_found(n, format!("at most {}", zstd_max_decoded(stored.len() as u64))));
    }
    if let Some(n) = expected.filter(|&n| n > limit) {
        return Err(Error::new(ErrorKind::DecodedTooLarge, "decoded size is above the limit")
            .expected_found(format!("<= {limit}"), n));
    }
    let mut out = Vec::new();
    // A declared size (plausible for the stream, within the limit) is reserved exactly, so the
    // buffer never doubles past it; otherwise it grows with what actually decodes, from a
    // start no larger than the stream could decode to (a 10-byte stream reserved 64 MiB).
    let reserve = match expected {
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
        None => {
            let most = zstd_max_decoded(stored.len() as u64);
            usize::try_from(cap.min(INITIAL_RESERVE).min(most)).unwrap_or(0)
        }
    };
    let no_memory = || {
        Error::new(
            ErrorKind::DecodedTooLarge,
            "the system refused the memory for the decoded data (a limit lower than the \
             decoded size would refuse it up front)",
        )
    };
    out.try_reserve_exact(reserve).map_err(|_| no_memory())?;
    let mut context = Context::lend();
    // A declared size is decoded in one call, straight into the buffer; what does not decode
    // to exactly that size goes the streaming way, which says how it differs.
    if expected.is_some() && out.capacity() == reserve && context.at_once(stored, &mut out) {
        return Ok(out);
    }
    out.clear();
    let decoder = zstd_reader(Stored::<&[u8]>::Slice(stored), &mut context)
        .map_err(|e| Error::new(ErrorKind::DecodeFailed, format!("zstd: {e}")))?;
    decoder.take(cap.saturating_add(1)).read_to_end(&mut out).map_err(|e| {
        // Growing the buffer is fallible in `read_to_end`: a refusal is not a corrupt stream.
        if e.kind() == std::io::ErrorKind::OutOfMemory {
            no_memory()
        } else {
            Error::new(ErrorKind::DecodeFailed, format!("zstd: {e}"))
        }
    })?;
    let got = out.len() as u64;
    match expected {
        Some(n) if got != n => Err(Error::new(
            ErrorKind::DecodedSizeMismatch,
            if got > n {
                "zstd output is longer than expected"
            } else {
                "zstd output is shorter than expected"
            },
        )
        .expected_found(n, if got > n { format!("more than {n}") } else { got.to_string() })),
        None if got > cap => {
            Err(Error::new(ErrorKind::DecodedTooLarge, "zstd output passes the decoded size limit")
                .expected_found(format!("<= {cap}"), format!("more than {cap}")))
        }
        _ => Ok(out),
    }
}

/// Decompresses `stored` into exactly `out`: the stream must produce `out.len()` bytes, no more
/// and no fewer. For callers that place frames side by side in one buffer.
///
/// # Errors
/// [`ErrorKind::DecodeFailed`] for a corrupt stream, [`ErrorKind::DecodedSizeMismatch`] for
/// output of another length.
pub fn zstd_decode_into(stored: &[u8], out: &mut [u8]) -> Result<(), Error> {
    let failed = |e: std::io::Error| Error::new(ErrorKind::DecodeFailed, format!("zstd: {e}"));
    let mut context = Context::lend();
    if context.at_once(stored, out) {
        return Ok(());
    }
    let mut decoder = zstd_reader(Stored::<&[u8]>::Slice(stored), &mut context).map_err(failed)?;
    let n = out.len() as u64;
    let mut filled = 0;
    while filled < out.len() {
        match decoder.read(&mut out[filled..]).map_err(failed)? {
            0 => {
                return Err(Error::new(
                    ErrorKind::DecodedSizeMismatch,
                    "zstd output is shorter than expected",
                )
                .expected_found(n, filled));
            }
            k => filled += k,
        }
    }
    let mut extra = [0u8; 1];
    if decoder.read(&mut extra).map_err(failed)? != 0 {
        return Err(Error::new(
            ErrorKind::DecodedSizeMismatch,
            "zstd output is longer than expected",
        )
        .expected_found(n, format!("more than {n}")));
    }
    Ok(())
}

/// Whether this build has zstd (the `zstd` feature, on by default). Without it, zstd
/// components are unsupported: reading one is an
/// [`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported) error naming the feature, and
/// the zstd functions of this module fail with [`NO_ZSTD`].
pub const ZSTD: bool = cfg!(feature = "zstd");

/// What the zstd functions of a build without the `zstd` feature say.
pub const NO_ZSTD: &str = "this build of ztensor-io has no zstd (its `zstd` feature is off)";

/// A zstd decoding context lent by this thread for one decode, and given back when dropped.
///
/// Making a context costs an allocation and the clearing of its tables (a tenth of the time
/// of reading a small zstd component); a thread keeps one spare between decodes instead. A
/// context that grew past [`Context::KEEP_AT_MOST`] (a frame with a large window) is freed
/// rather than kept, so what a thread holds between decodes stays small whatever it read.
#[cfg(feature = "zstd")]
pub(crate) struct Context(Option<zstd::zstd_safe::DCtx<'static>>);

#[cfg(feature = "zstd")]
thread_local! {
    static SPARE: std::cell::Cell<Option<zstd::zstd_safe::DCtx<'static>>> =
        const { std::cell::Cell::new(None) };
}

#[cfg(feature = "zstd")]
impl Context {
    /// The most bytes a context may hold and still be kept for the thread's next decode.
    const KEEP_AT_MOST: usize = 1 << 20;

    /// This thread's spare context, or a new one when it has none (or is lending it already).
    pub(crate) fn lend() -> Context {
        Context(SPARE.try_with(std::cell::Cell::take).ok().flatten())
    }

    /// The context itself, made now if the thread had no spare.
    fn dctx(&mut self) -> std::io::Result<&mut zstd::zstd_safe::DCtx<'static>> {
        if self.0.is_none() {
            let mut fresh = zstd::zstd_safe::DCtx::try_create().ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::OutOfMemory, "no memory for a zstd context")
            })?;
            fresh.init().map_err(|code| {
                std::io::Error::other(zstd::zstd_safe::get_error_name(code).to_owned())
            })?;
            self.0 = Some(fresh);
        }
        self.0.as_mut().ok_or_else(|| std::io::Error::other("no zstd context"))
    }

    /// Decodes all of `stored` in one call into `out`, which must take exactly its capacity
    /// (a slice's length, an empty vector's reserve): no window buffer and no copy out of
    /// one. `false` for anything else (another length, a corrupt stream, bytes after the
    /// last frame), for the streaming path to say what.
    fn at_once<C: zstd::zstd_safe::WriteBuf + ?Sized>(
        &mut self,
        stored: &[u8],
        out: &mut C,
    ) -> bool {
        let capacity = out.capacity();
        let Ok(dctx) = self.dctx() else { return false };
        let done = dctx.decompress(out, stored);
        // A failed call can leave the session anywhere: start the next one clean.
        let _ = dctx.reset(zstd::zstd_safe::ResetDirective::SessionOnly);
        done.is_ok_and(|n| n == capacity)
    }
}

#[cfg(feature = "zstd")]
impl Drop for Context {
    fn drop(&mut self) {
        if let Some(context) = self.0.take().filter(|c| c.sizeof() <= Context::KEEP_AT_MOST) {
            // A thread being torn down keeps nothing.
            let _ = SPARE.try_with(|spare| spare.set(Some(context)));
        }
    }
}

/// Without the `zstd` feature, no context.
#[cfg(not(feature = "zstd"))]
pub(crate) struct Context;

#[cfg(not(feature = "zstd"))]
impl Context {
    /// Nothing to lend.
    pub(crate) fn lend() -> Context {
        Context
    }

    /// Nothing decodes.
    fn at_once<C: ?Sized>(&mut self, stored: &[u8], out: &mut C) -> bool {
        let _ = (stored, out);
        false
    }
}

/// A streaming zstd decoder of `stored` (every frame in turn; skippable frames skipped),
/// reading it through a buffer of zstd's preferred input size, or straight from a slice,
/// in `context` (whose session is reset first).
///
/// # Errors
/// zstd's own, and `Unsupported` without the `zstd` feature.
#[cfg(feature = "zstd")]
pub(crate) fn zstd_reader<'a, R: Read + 'a>(
    stored: Stored<'a, R>,
    context: &'a mut Context,
) -> std::io::Result<Box<dyn Read + 'a>> {
    use zstd::stream::read::Decoder;
    let dctx = context.dctx()?;
    Ok(match stored {
        Stored::Reader(r) => Box::new(Decoder::with_context(
            std::io::BufReader::with_capacity(zstd::zstd_safe::DCtx::in_size(), r),
            dctx,
        )),
        Stored::Slice(s) => Box::new(Decoder::with_context(s, dctx)),
    })
}

/// A streaming zstd decoder of `stored` that owns its context: for a decoder handed out
/// (a borrowed context cannot go with it).
///
/// # Errors
/// zstd's own, and `Unsupported` without the `zstd` feature.
#[cfg(feature = "zstd")]
pub(crate) fn zstd_stream<'a, R: Read + 'a>(stored: R) -> std::io::Result<Box<dyn Read + 'a>> {
    Ok(Box::new(zstd::stream::read::Decoder::new(stored)?))
}

/// Without the `zstd` feature, no decoder.
///
/// # Errors
/// Always `Unsupported`.
#[cfg(not(feature = "zstd"))]
pub(crate) fn zstd_stream<'a, R: Read + 'a>(stored: R) -> std::io::Result<Box<dyn Read + 'a>> {
    drop(stored);
    Err(std::io::Error::new(std::io::ErrorKind::Unsupported, NO_ZSTD))
}

/// Without the `zstd` feature, no decoder.
///
/// # Errors
/// Always `Unsupported`.
#[cfg(not(feature = "zstd"))]
pub(crate) fn zstd_reader<'a, R: Read + 'a>(
    stored: Stored<'a, R>,
    context: &'a mut Context,
) -> std::io::Result<Box<dyn Read + 'a>> {
    let _ = (stored, context);
    Err(std::io::Error::new(std::io::ErrorKind::Unsupported, NO_ZSTD))
}

/// Where a zstd stream's bytes come from.
#[cfg_attr(not(feature = "zstd"), allow(dead_code))]
pub(crate) enum Stored<'a, R> {
    /// A reader, read in zstd's preferred input size.
    Reader(R),
    /// Bytes in memory.
    Slice(&'a [u8]),
}

/// Compresses `data` as one zstd frame at `level` (0 means zstd's default, 3), recording the
/// content size in the frame header and a content checksum at its end, so that damaged data
/// fails to decode instead of decoding to wrong values.
///
/// # Errors
/// Only if zstd itself fails; `Unsupported` without the `zstd` feature.
#[cfg(not(feature = "zstd"))]
pub fn zstd_encode(data: &[u8], level: i32) -> std::io::Result<Vec<u8>> {
    let _ = (data, level);
    Err(std::io::Error::new(std::io::ErrorKind::Unsupported, NO_ZSTD))
}

/// Compresses `data` as one zstd frame at `level` (0 means zstd's default, 3), recording the
/// content size in the frame header and a content checksum at its end, so that damaged data
/// fails to decode instead of decoding to wrong values.
///
/// # Errors
/// Only if zstd itself fails; `Unsupported` without the `zstd` feature.
#[cfg(feature = "zstd")]
pub fn zstd_encode(data: &[u8], level: i32) -> std::io::Result<Vec<u8>> {
    // One compression context per thread and level, reused: creating one (and its tables) per
    // frame costs more than compressing a small frame. Output depends only on data and
    // parameters, never on the context's history.
    thread_local! {
        static CONTEXT: std::cell::RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
            const { std::cell::RefCell::new(None) };
    }
    CONTEXT.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.as_ref().is_none_or(|(l, _)| *l != level) {
            let mut encoder = zstd::bulk::Compressor::new(level)?;
            encoder.include_contentsize(true)?;
            encoder.include_checksum(true)?;
            *slot = Some((level, encoder));
        }
        match slot.as_mut() {
            Some((_, encoder)) => encoder.compress(data),
            None => Err(std::io::ErrorKind::Other.into()),
        }
    })
}

/// The default size of the independently compressed pieces of a large zstd component: 4 MiB of
/// input per frame. A fixed number, never derived from the thread count, so output does not
/// depend on how many threads wrote it.
pub const DEFAULT_ZSTD_CHUNK: u64 = 4 << 20;

const SKIPPABLE_MAGIC: u32 = 0x184D_2A5E;
const SEEKABLE_MAGIC: u32 = 0x8F92_EAB1;

/// One frame of a chunked zstd component, from its seek table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// Offset of the frame in the stored bytes.
    pub offset: u64,
    /// Compressed length.
    pub compressed: u64,
    /// Decompressed length.
    pub decompressed: u64,
}

/// The seek table of the zstd seekable format, as a skippable frame: ordinary decoders skip it,
/// and readers that know it can decode the frames in parallel. `frames` are (compressed,
/// decompressed) sizes.
pub fn seek_table(frames: &[(u32, u32)]) -> Vec<u8> {
    let entries = frames.len() * 8;
    let mut out = Vec::with_capacity(entries + 17);
    out.extend_from_slice(&SKIPPABLE_MAGIC.to_le_bytes());
    out.extend_from_slice(&u32::try_from(entries + 9).unwrap_or(u32::MAX).to_le_bytes());
    for &(c, d) in frames {
        out.extend_from_slice(&c.to_le_bytes());
        out.extend_from_slice(&d.to_le_bytes());
    }
    out.extend_from_slice(&u32::try_from(frames.len()).unwrap_or(u32::MAX).to_le_bytes());
    out.push(0); // no per-frame checksums
    out.extend_from_slice(&SEEKABLE_MAGIC.to_le_bytes());
    out
}

/// Reads the seek table at the end of a stored zstd component, if it has a well-formed one
/// whose frames exactly tile the bytes before it. `None` means: decode sequentially.
pub fn parse_seek_table(stored: &[u8]) -> Option<Vec<Frame>> {
    let len = stored.len();
    let table_len = seek_table_len(stored.get(len.checked_sub(9)?..)?)?;
    parse_seek_table_at_end(stored.get(len.checked_sub(table_len)?..)?, len as u64)
}

/// The length of the seek table whose last 9 bytes (the seekable footer) are `footer`, or `None`
/// when they are not a seekable footer. Read the table itself (that many bytes at the end of the
/// stored component) for [`parse_seek_table_at_end`].
pub fn seek_table_len(footer: &[u8]) -> Option<usize> {
    let footer = footer.get(footer.len().checked_sub(9)?..)?;
    if u32_at(footer, 5)? != SEEKABLE_MAGIC || footer[4] & 0x80 != 0 {
        return None;
    }
    usize::try_from(u32_at(footer, 0)?).ok()?.checked_mul(8)?.checked_add(17)
}

/// [`parse_seek_table`] from the table alone: `table` is the last bytes of a stored component
/// of `stored_len` bytes (as many as [`seek_table_len`] says), so a large component's frames
/// are known without reading it.
pub fn parse_seek_table_at_end(table: &[u8], stored_len: u64) -> Option<Vec<Frame>> {
    let table_len = table.len();
    let count = table_len.checked_sub(17)? / 8;
    if count * 8 + 17 != table_len
        || seek_table_len(table)? != table_len
        || u32_at(table, 0)? != SKIPPABLE_MAGIC
        || usize::try_from(u32_at(table, 4)?).ok()? != table_len - 8
    {
        return None;
    }
    let start = stored_len.checked_sub(table_len as u64)?;
    let mut frames = Vec::with_capacity(count);
    let mut offset = 0u64;
    for i in 0..count {
        let c = u64::from(u32_at(table, 8 + i * 8)?);
        let d = u64::from(u32_at(table, 12 + i * 8)?);
        frames.push(Frame { offset, compressed: c, decompressed: d });
        offset = offset.checked_add(c)?;
    }
    (offset == start).then_some(frames)
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at.checked_add(4)?).map(|x| u32::from_le_bytes([x[0], x[1], x[2], x[3]]))
}

/// Compresses `data` as independent zstd frames of `chunk` input bytes (the last may be
/// shorter). With more than one frame, a seek table follows. Data that fits one chunk gives the
/// same bytes as [`zstd_encode`]. The result depends only on the data, the level and the chunk
/// size.
///
/// # Errors
/// `InvalidInput` for a chunk of 0 or above 1 GiB, and zstd's own errors.
pub fn zstd_encode_chunked(data: &[u8], level: i32, chunk: u64) -> std::io::Result<Vec<u8>> {
    let chunk = usize::try_from(chunk)
        .ok()
        .filter(|&c| c > 0 && c <= 1 << 30)
        .ok_or(std::io::ErrorKind::InvalidInput)?;
    if data.len() <= chunk {
        return zstd_encode(data, level);
    }
    let mut out = Vec::new();
    let mut frames = Vec::new();
    for piece in data.chunks(chunk) {
        let z = zstd_encode(piece, level)?;
        frames.push((
            u32::try_from(z.len()).map_err(|_| std::io::ErrorKind::InvalidData)?,
            u32::try_from(piece.len()).map_err(|_| std::io::ErrorKind::InvalidData)?,
        ));
        out.extend_from_slice(&z);
    }
    out.extend_from_slice(&seek_table(&frames));
    Ok(out)
}

/// An incremental digest of one of the three algorithms this crate computes.
#[derive(Debug, Clone)]
pub enum Hasher {
    /// CRC-32C.
    Crc32c(u32),
    /// SHA-256.
    Sha256(sha2::Sha256),
    /// BLAKE3 (with the `blake3` feature, on by default).
    #[cfg(feature = "blake3")]
    Blake3(Box<blake3::Hasher>),
}

impl Hasher {
    /// A hasher for `algorithm`, or `None` for an algorithm this crate cannot compute (an
    /// unknown one, and BLAKE3 without the `blake3` feature).
    pub fn new(algorithm: &DigestAlgorithm) -> Option<Hasher> {
        match algorithm {
            DigestAlgorithm::Crc32c => Some(Hasher::Crc32c(0)),
            DigestAlgorithm::Sha256 => Some(Hasher::Sha256(sha2::Sha256::new())),
            #[cfg(feature = "blake3")]
            DigestAlgorithm::Blake3 => Some(Hasher::Blake3(Box::new(blake3::Hasher::new()))),
            #[cfg(not(feature = "blake3"))]
            DigestAlgorithm::Blake3 => None,
            DigestAlgorithm::Unknown(_) => None,
        }
    }

    /// Feeds bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        match self {
            Hasher::Crc32c(c) => *c = crc32c::crc32c_append(*c, bytes),
            Hasher::Sha256(h) => h.update(bytes),
            #[cfg(feature = "blake3")]
            Hasher::Blake3(h) => {
                h.update(bytes);
            }
        }
    }

    /// The digest of everything fed.
    pub fn finish(self) -> Digest {
        match self {
            Hasher::Crc32c(c) => Digest::Crc32c(c),
            Hasher::Sha256(h) => Digest::Sha256(Box::new(h.finalize().into())),
            #[cfg(feature = "blake3")]
            Hasher::Blake3(h) => Digest::Blake3(Box::new(*h.finalize().as_bytes())),
        }
    }
}

/// One piece's share of a [`Combiner`]'s digest, computed on any thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Share {
    /// The CRC-32C of the piece, and its length.
    Crc32c {
        /// The piece's CRC-32C.
        crc: u32,
        /// The piece's length in bytes.
        len: u64,
    },
    /// The BLAKE3 chaining value of the piece as a subtree at its offset, and its length.
    Blake3 {
        /// The subtree's chaining value.
        cv: [u8; 32],
        /// The piece's length in bytes.
        len: u64,
    },
}

/// A digest of consecutive pieces that are hashed independently — in any order, on any thread
/// ([`Combiner::share`]) — and combined in order ([`Combiner::push`]), so one large component
/// is not hashed on one core. CRC-32C combines any pieces; BLAKE3 combines pieces of one
/// power-of-two size of at least 1 KiB (BLAKE3's chunk), the last shorter or equal, at least two
/// of them: each piece is then a subtree of BLAKE3's own tree. SHA-256 has no such form.
#[derive(Debug, Clone)]
#[cfg_attr(not(feature = "blake3"), allow(dead_code))]
pub struct Combiner {
    piece: u64,
    pushed: u64,
    /// Whether a piece shorter than `piece` was pushed: it must be the last.
    short: bool,
    state: CombinerState,
}

#[derive(Debug, Clone)]
enum CombinerState {
    Crc32c(u32),
    #[cfg(feature = "blake3")]
    Blake3(Vec<blake3::hazmat::ChainingValue>),
}

impl Combiner {
    /// A combiner of `algorithm` over pieces of `piece` bytes, or `None` when the algorithm
    /// cannot be combined from pieces of that size.
    pub fn new(algorithm: &DigestAlgorithm, piece: u64) -> Option<Combiner> {
        let state = match algorithm {
            DigestAlgorithm::Crc32c => CombinerState::Crc32c(0),
            #[cfg(feature = "blake3")]
            DigestAlgorithm::Blake3
                if piece.is_power_of_two() && piece >= blake3::CHUNK_LEN as u64 =>
            {
                CombinerState::Blake3(Vec::new())
            }
            _ => return None,
        };
        Some(Combiner { piece, pushed: 0, short: false, state })
    }

    /// The share of piece `index` (its bytes `bytes`: `piece` of them, or fewer for the last).
    pub fn share(&self, index: u64, bytes: &[u8]) -> Share {
        #[cfg(not(feature = "blake3"))]
        let _ = index;
        let len = bytes.len() as u64;
        match self.state {
            CombinerState::Crc32c(_) => Share::Crc32c { crc: crc32c::crc32c(bytes), len },
            #[cfg(feature = "blake3")]
            CombinerState::Blake3(_) => {
                use blake3::hazmat::HasherExt;
                let mut h = blake3::Hasher::new();
                h.set_input_offset(index.saturating_mul(self.piece));
                h.update(bytes);
                Share::Blake3 { cv: h.finalize_non_root(), len }
            }
        }
    }

    /// Adds the next piece's share, in order. A share of another kind, a BLAKE3 piece longer
    /// than the piece size, or one after a short piece is refused (`false`) and changes nothing.
    pub fn push(&mut self, share: Share) -> bool {
        match (&mut self.state, share) {
            (CombinerState::Crc32c(crc), Share::Crc32c { crc: next, len }) => {
                let Ok(len) = usize::try_from(len) else { return false };
                *crc = crc32c::crc32c_combine(*crc, next, len);
            }
            #[cfg(feature = "blake3")]
            (CombinerState::Blake3(stack), Share::Blake3 { cv, len }) => {
                if len > self.piece || self.short {
                    return false;
                }
                // Merge what the pieces so far complete, lazily (the newest stays unmerged
                // until more input follows), as BLAKE3 merges its chunks.
                let keep = self.pushed.count_ones() as usize;
                while stack.len() > keep {
                    let (Some(right), Some(left)) = (stack.pop(), stack.pop()) else { break };
                    stack.push(blake3::hazmat::merge_subtrees_non_root(
                        &left,
                        &right,
                        blake3::hazmat::Mode::Hash,
                    ));
                }
                stack.push(cv);
                self.short = len < self.piece;
            }
            _ => return false,
        }
        self.pushed += 1;
        true
    }

    /// Adds bytes after the pieces (a seek table), hashed here: CRC-32C only (`false` for
    /// BLAKE3, whose tree has no room for them, unless there are none).
    pub fn tail(&mut self, bytes: &[u8]) -> bool {
        match &mut self.state {
            CombinerState::Crc32c(crc) => {
                *crc = crc32c::crc32c_append(*crc, bytes);
                true
            }
            #[cfg(feature = "blake3")]
            CombinerState::Blake3(_) => bytes.is_empty(),
        }
    }

    /// The digest of all the pieces, or `None` for BLAKE3 over fewer than two pieces (a single
    /// piece is hashed whole, with [`Hasher`]).
    pub fn finish(self) -> Option<Digest> {
        match self.state {
            CombinerState::Crc32c(crc) => Some(Digest::Crc32c(crc)),
            #[cfg(feature = "blake3")]
            CombinerState::Blake3(mut stack) => {
                let mut right = stack.pop()?;
                let mut left = stack.pop()?;
                while let Some(next) = stack.pop() {
                    right = blake3::hazmat::merge_subtrees_non_root(
                        &left,
                        &right,
                        blake3::hazmat::Mode::Hash,
                    );
                    left = next;
                }
                let root =
                    blake3::hazmat::merge_subtrees_root(&left, &right, blake3::hazmat::Mode::Hash);
                Some(Digest::Blake3(Box::new(*root.as_bytes())))
            }
        }
    }
}

/// The digest of `bytes` under `algorithm`, or `None` for an algorithm this crate cannot compute.
pub fn digest_of(algorithm: &DigestAlgorithm, bytes: &[u8]) -> Option<Digest> {
    let mut h = Hasher::new(algorithm)?;
    h.update(bytes);
    Some(h.finish())
}

/// The lowercase hex SHA-256 of `bytes` (the conformance dump's content hash).
pub fn sha256_hex(bytes: &[u8]) -> String {
    ztensor_format::to_hex(&sha2::Sha256::digest(bytes))
}

#[cfg(test)]
mod tests;
