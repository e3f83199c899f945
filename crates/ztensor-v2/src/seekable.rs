//! The `zt.zstd-seekable/1` encoding (`spec/ztensor-2.md` §4.6): independent zstd frames, each
//! with a content checksum and at most 16 MiB decoded, all but the last of one size, then a
//! seek table in a skippable frame. The table is checked against the profile's rules before a
//! byte is decoded, so a part decodes frame by frame (a few MiB held, whatever its size) and a
//! frame can be found by its decoded offset.
//!
//! The frames are compressed with the `zstd` crate (the reference library's bindings): its
//! frame format and checksum are what makes a frame decodable anywhere. The seek table around
//! them is this module's.

use rayon::prelude::*;
use ztensor_io::ReadAt;

use crate::error::{Error, Result, Rule};

/// The id of the encoding.
pub const ID: &str = "zt.zstd-seekable/1";
/// How many decoded bytes a frame this writer makes holds (the last may hold fewer).
pub const FRAME: usize = 1 << 20;
/// The most decoded bytes a frame may hold.
pub const MAX_FRAME: u64 = 16 << 20;

const SKIPPABLE_MAGIC: u32 = 0x184D_2A5E;
const SEEKABLE_MAGIC: u32 = 0x8F92_EAB1;
/// Magic, N, descriptor: the table's last 9 bytes.
const TAIL: u64 = 9;
const TAIL_LEN: usize = 9;

fn encoding(message: impl Into<String>) -> Error {
    Error::rule(Rule::Encoding, message)
}

/// A checked seek table: each frame's stored and decoded length, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeekTable {
    /// (stored length, decoded length) of each frame.
    pub frames: Vec<(u64, u64)>,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Reads and checks the seek table of the encoded stream at `offset..offset + len` of
/// `source`, which must decode to exactly `decoded_length` bytes: the trailing magic, the
/// descriptor's reserved bits, the skippable frame around the table, frames of at most 16 MiB
/// that tile the bytes before the table, equal sizes but for the last, and their sum.
///
/// # Errors
/// `encoding` for each broken rule; I/O errors.
pub fn seek_table(
    source: &dyn ReadAt,
    offset: u64,
    len: u64,
    decoded_length: u64,
) -> Result<SeekTable> {
    let read = |at: u64, buf: &mut [u8]| {
        source.read_exact_at(offset + at, buf).map_err(|e| Error::io("reading a seek table", e))
    };
    if len < 8 + TAIL {
        return Err(encoding(format!("{len} bytes is too short for a seekable stream (17)")));
    }
    let mut tail = [0u8; TAIL_LEN];
    read(len - TAIL, &mut tail)?;
    if u32_at(&tail, 5) != SEEKABLE_MAGIC {
        return Err(encoding("the stream does not end with the seekable magic"));
    }
    let descriptor = tail[4];
    // Bit 7: a checksum column. Bits 6 to 2 are reserved; bits 1 and 0 are unused (not read).
    if descriptor & 0x7c != 0 {
        return Err(encoding(format!(
            "seek table descriptor {descriptor:#04x} sets reserved bits"
        )));
    }
    let entry_len: usize = if descriptor & 0x80 != 0 { 12 } else { 8 };
    let entry = entry_len as u64;
    let n = u64::from(u32_at(&tail, 0));
    let table_len = n
        .checked_mul(entry)
        .and_then(|b| b.checked_add(TAIL))
        .filter(|&t| t.checked_add(8).is_some_and(|whole| whole <= len))
        .ok_or_else(|| encoding(format!("a seek table of {n} frames is longer than the stream")))?;
    let start = len - 8 - table_len;
    let mut head = [0u8; 8];
    read(start, &mut head)?;
    if u32_at(&head, 0) != SKIPPABLE_MAGIC || u64::from(u32_at(&head, 4)) != table_len {
        return Err(encoding("the seek table is not in a skippable frame of its length"));
    }
    // The table is at most the stream's size, which the file holds.
    let entries_len = usize::try_from(n * entry).map_err(|_| encoding("a seek table too large"))?;
    let mut entries = ztensor_io::try_zeroed(entries_len as u64, "a seek table")
        .map_err(|e| Error::io("reading a seek table", e))?;
    read(start + 8, &mut entries)?;
    let mut frames = Vec::with_capacity(usize::try_from(n).unwrap_or(0).min(1 << 20));
    let (mut stored_sum, mut decoded_sum) = (0u64, 0u64);
    for e in entries.chunks_exact(entry_len) {
        let (stored, decoded) = (u64::from(u32_at(e, 0)), u64::from(u32_at(e, 4)));
        if decoded > MAX_FRAME {
            return Err(encoding(format!("a frame of {decoded} decoded bytes (at most 16 MiB)")));
        }
        // A frame with a checksum takes at least 12 bytes, and no zstd frame of `decoded` bytes
        // is longer than zstd's bound for them: what a frame holds stays within a few times 16
        // MiB, and entries cannot outnumber the bytes they describe.
        // `decoded` is at most 16 MiB here.
        let bound = usize::try_from(decoded)
            .map_or(u64::MAX, |d| zstd::zstd_safe::compress_bound(d) as u64 + 64);
        if !(12..=bound).contains(&stored) {
            return Err(encoding(format!(
                "a frame of {stored} bytes for {decoded} decoded (12 to {bound})"
            )));
        }
        stored_sum += stored;
        decoded_sum += decoded;
        frames.push((stored, decoded));
    }
    if let Some(&(_, first)) = frames.first()
        && frames[..frames.len() - 1].iter().any(|&(_, d)| d != first)
    {
        return Err(encoding("frames before the last differ in decoded size"));
    }
    if stored_sum != start {
        return Err(encoding(format!(
            "the frames hold {stored_sum} bytes, and {start} precede the seek table"
        )));
    }
    if decoded_sum != decoded_length {
        return Err(encoding(format!(
            "the frames decode to {decoded_sum} bytes, and the part says {decoded_length}"
        )));
    }
    Ok(SeekTable { frames })
}

/// Checks that `stored`, frame `i`'s bytes, are exactly one zstd frame (not a frame followed by
/// others or by skippable padding, which zstd would decode too) and that it carries a content
/// checksum.
fn check_frame(i: usize, stored: &[u8]) -> Result<()> {
    let one = zstd::zstd_safe::find_frame_compressed_size(stored).ok() == Some(stored.len());
    if !one || stored.len() < 5 || u32_at(stored, 0) != 0xFD2F_B528 || stored[4] & 0x04 == 0 {
        return Err(encoding(format!("frame {i} is not one zstd frame with a checksum")));
    }
    Ok(())
}

/// Decodes the stream at `offset` of `source` (its table `table`), frame by frame: `each` gets
/// every frame's decoded bytes in order. Each frame must carry a content checksum (checked by
/// zstd) and decode to exactly its length.
///
/// # Errors
/// `encoding`; I/O errors; `each`'s errors.
pub fn decode(
    source: &dyn ReadAt,
    offset: u64,
    table: &SeekTable,
    each: &mut dyn FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    let mut decompressor =
        zstd::bulk::Decompressor::new().map_err(|e| Error::io("starting zstd", e))?;
    let (mut stored, mut decoded) = (Vec::new(), Vec::new());
    let mut at = offset;
    for (i, &(len, want)) in table.frames.iter().enumerate() {
        // Frames are at most 16 MiB decoded; stored ones at most what the file holds.
        stored.resize(usize::try_from(len).map_err(|_| encoding("a frame too large"))?, 0);
        source.read_exact_at(at, &mut stored).map_err(|e| Error::io("reading a frame", e))?;
        at += len;
        // The frame header: magic, then the descriptor, whose bit 2 says a checksum follows.
        check_frame(i, &stored)?;
        decoded.clear();
        // At most 16 MiB: the table was checked.
        decoded.resize(usize::try_from(want).map_err(|_| encoding("a frame too large"))?, 0);
        let n = decompressor
            .decompress_to_buffer(&stored, &mut decoded[..])
            .map_err(|e| encoding(format!("frame {i}: {e}")))?;
        if n as u64 != want {
            return Err(encoding(format!("frame {i} decodes to {n} bytes, the table says {want}")));
        }
        each(&decoded)?;
    }
    Ok(())
}

/// Decodes the stream at `offset` of `source` (its table `table`) into `out` (exactly the
/// decoded length), its frames decoded in parallel on the current rayon pool: each frame's
/// place in `out` is known from the table, so frames need no order. The same rules as
/// [`decode`].
///
/// # Errors
/// As [`decode`].
pub fn decode_into(
    source: &dyn ReadAt,
    offset: u64,
    table: &SeekTable,
    out: &mut [u8],
) -> Result<()> {
    let total: u64 = table.frames.iter().map(|f| f.1).sum();
    if total != out.len() as u64 {
        return Err(encoding(format!("the frames decode to {total} bytes, not {}", out.len())));
    }
    // Each frame's stored offset and its slice of `out` (all frames but the last are one size).
    let mut at = offset;
    let mut jobs = Vec::with_capacity(table.frames.len());
    let mut rest = out;
    for (i, &(len, want)) in table.frames.iter().enumerate() {
        let want = usize::try_from(want).map_err(|_| encoding("a frame too large"))?;
        let (slice, tail) = std::mem::take(&mut rest).split_at_mut(want);
        rest = tail;
        jobs.push((i, at, len, slice));
        at += len;
    }
    // One decompressor for each run of frames a thread takes, not one for every frame.
    jobs.into_par_iter().try_for_each_init(
        zstd::bulk::Decompressor::new,
        |made, (i, at, len, slice)| {
            let decompressor = made.as_mut().map_err(|e| {
                Error::io("starting zstd", std::io::Error::new(e.kind(), e.to_string()))
            })?;
            let mut stored = ztensor_io::try_zeroed(len, "a frame")
                .map_err(|e| Error::io("reading a frame", e))?;
            source.read_exact_at(at, &mut stored).map_err(|e| Error::io("reading a frame", e))?;
            check_frame(i, &stored)?;
            let n = decompressor
                .decompress_to_buffer(&stored, slice)
                .map_err(|e| encoding(format!("frame {i}: {e}")))?;
            if n != slice.len() {
                return Err(encoding(format!(
                    "frame {i} decodes to {n} bytes, the table says {}",
                    slice.len()
                )));
            }
            Ok(())
        },
    )
}

/// Compresses decoded bytes as they come into a seekable stream: frames of [`FRAME`] bytes,
/// a batch of them compressed in parallel, each with a checksum and no content size (as the
/// reference writes them), then the seek table.
#[derive(Debug)]
pub struct Encoder {
    pending: Vec<u8>,
    frames: Vec<(u32, u32)>,
    /// The level, the compressors and the buffers of frames already handed over.
    spare: Spare,
    /// The pool the frames are compressed on (`None`: the calling thread's).
    pool: Option<std::sync::Arc<rayon::ThreadPool>>,
}

impl Encoder {
    /// An encoder at zstd `level`, compressing on the calling thread's rayon pool.
    pub fn new(level: i32) -> Encoder {
        Encoder::with_pool(level, None)
    }

    /// An encoder at zstd `level`, compressing on `pool` (`None`: the calling thread's).
    pub(crate) fn with_pool(
        level: i32,
        pool: Option<std::sync::Arc<rayon::ThreadPool>>,
    ) -> Encoder {
        let spare = Spare::new(level, Self::batch(threads_of(pool.as_deref())));
        Encoder { pending: Vec::new(), frames: Vec::new(), spare, pool }
    }

    /// How many whole frames are compressed together (and so held at once) on `threads`.
    fn batch(threads: usize) -> usize {
        threads.max(1) * 2
    }

    /// How many bytes a batch holds on a pool of `threads`: pieces of this size are
    /// compressed where they lie, never copied into the encoder.
    pub(crate) fn batch_len(threads: usize) -> usize {
        Self::batch(threads) * FRAME
    }

    /// [`Encoder::batch_len`] on the pool this encoder compresses on.
    fn whole(&self) -> usize {
        Self::batch_len(threads_of(self.pool.as_deref()))
    }

    fn compress(
        &mut self,
        chunks: &[&[u8]],
        out: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        let spare = &self.spare;
        let frames = match &self.pool {
            Some(pool) => pool.install(|| compress_frames(chunks, spare))?,
            None => compress_frames(chunks, spare)?,
        };
        for (frame, decoded) in frames {
            // Frames of at most 1 MiB compress to well under 4 GiB.
            #[allow(clippy::cast_possible_truncation)]
            self.frames.push((frame.len() as u32, decoded));
            out(&frame)?;
            self.spare.give([frame]);
        }
        Ok(())
    }

    /// Takes `bytes`; whole batches of frames are compressed and handed to `out`.
    ///
    /// # Errors
    /// Compression errors, `out`'s errors.
    pub fn push(&mut self, bytes: &[u8], out: &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<()> {
        let whole = self.whole();
        let mut bytes = bytes;
        // First the batch begun in `pending`, completed from `bytes`. `pending` holds more than
        // a batch only when a batch has become smaller since it began (this runs on fewer
        // threads): its whole batches go, and what is left is completed in turn.
        while !self.pending.is_empty() {
            let fill = whole.saturating_sub(self.pending.len()).min(bytes.len());
            self.pending.extend_from_slice(&bytes[..fill]);
            bytes = &bytes[fill..];
            if self.pending.len() < whole {
                return Ok(());
            }
            let pending = std::mem::take(&mut self.pending);
            let done = self.batches(&pending, whole, out)?;
            self.pending = pending;
            self.pending.drain(..done);
        }
        // Then whole batches straight from where they lie; the rest waits in `pending`.
        let done = self.batches(bytes, whole, out)?;
        self.pending.extend_from_slice(&bytes[done..]);
        Ok(())
    }

    /// Compresses the whole batches (of `whole` bytes) at the start of `bytes`, one at a time,
    /// and says how many bytes they held. Every batch starts at a multiple of FRAME from the
    /// start of the stream.
    fn batches(
        &mut self,
        bytes: &[u8],
        whole: usize,
        out: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<usize> {
        let done = bytes.len() / whole * whole;
        for batch in bytes[..done].chunks(whole) {
            self.compress(&batch.chunks(FRAME).collect::<Vec<_>>(), out)?;
        }
        Ok(done)
    }

    /// Compresses what is left and hands over the seek table.
    ///
    /// # Errors
    /// Compression errors, `out`'s errors.
    pub fn finish(mut self, out: &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<()> {
        let pending = std::mem::take(&mut self.pending);
        let chunks: Vec<&[u8]> = pending.chunks(FRAME).collect();
        self.compress(&chunks, out)?;
        out(&table(&self.frames)?)
    }
}

/// The threads of `pool`, or of the calling thread's pool.
fn threads_of(pool: Option<&rayon::ThreadPool>) -> usize {
    pool.map_or_else(rayon::current_num_threads, rayon::ThreadPool::current_num_threads)
}

/// Each of `chunks` (at most [`FRAME`] bytes) compressed into one frame with a checksum and no
/// content size, in parallel, with its decoded size; at `spare`'s level, with its compressors
/// and buffers.
///
/// # Errors
/// Compression errors.
pub(crate) fn compress_frames(chunks: &[&[u8]], spare: &Spare) -> Result<Vec<(Vec<u8>, u32)>> {
    let frames: Vec<std::io::Result<(Vec<u8>, u32)>> = chunks
        .par_iter()
        .map(|&chunk| {
            let mut frame = spare.buffer(chunk.len());
            let mut compressor = spare.compressor()?;
            let done = compressor.compress_to_buffer(chunk, &mut frame);
            spare.keep_compressor(compressor);
            done?;
            // A chunk is at most FRAME (1 MiB) bytes.
            #[allow(clippy::cast_possible_truncation)]
            Ok((frame, chunk.len() as u32))
        })
        .collect();
    frames.into_iter().map(|f| f.map_err(|e| Error::io("compressing a frame", e))).collect()
}

/// What one write keeps between its frames: compressors (a new one per part and per split of
/// the work zeroed its tables in fresh pages each time) and the buffers of frames already
/// written, handed back (a frame compressed into a new buffer each time wrote into fresh pages:
/// the allocator hands blocks of a megabyte back to the system once they are freed, and takes
/// new ones for the next; together about 50,000 page faults in a 1 GiB write). Both go with the
/// write: nothing stays with the threads that ran it.
///
/// Holds at most as many compressors as ran at once, and at most `most` buffers, each of a
/// whole frame's bound; only whole frames are compressed into kept buffers, so a part of a few
/// bytes does not hold a megabyte while it waits for its turn. A frame depends only on its
/// bytes and the parameters, never on what its compressor did before (`ZSTD_compress2` starts
/// a new frame each call).
pub(crate) struct Spare {
    level: i32,
    compressors: std::sync::Mutex<Vec<zstd::bulk::Compressor<'static>>>,
    buffers: std::sync::Mutex<Vec<Vec<u8>>>,
    most: usize,
}

impl std::fmt::Debug for Spare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let buffers = self.buffers.lock().map_or(0, |k| k.len());
        let compressors = self.compressors.lock().map_or(0, |k| k.len());
        f.debug_struct("Spare")
            .field("level", &self.level)
            .field("compressors", &compressors)
            .field("buffers", &buffers)
            .field("most", &self.most)
            .finish()
    }
}

impl Spare {
    /// Compresses at zstd `level`; keeps at most `most` buffers.
    pub(crate) fn new(level: i32, most: usize) -> Spare {
        Spare {
            level,
            compressors: std::sync::Mutex::new(Vec::new()),
            buffers: std::sync::Mutex::new(Vec::new()),
            most,
        }
    }

    /// A buffer for the frame of a chunk of `len` bytes: a kept one for a whole frame, else a
    /// new one of the chunk's bound.
    fn buffer(&self, len: usize) -> Vec<u8> {
        let bound = zstd::zstd_safe::compress_bound(len);
        let kept =
            if len == FRAME { self.buffers.lock().ok().and_then(|mut k| k.pop()) } else { None };
        let mut buffer = kept.unwrap_or_default();
        buffer.clear();
        buffer.reserve(bound);
        buffer
    }

    /// Keeps those of `buffers` that hold a whole frame, while there is room.
    pub(crate) fn give(&self, buffers: impl IntoIterator<Item = Vec<u8>>) {
        let Ok(mut kept) = self.buffers.lock() else { return };
        let whole = zstd::zstd_safe::compress_bound(FRAME);
        for buffer in buffers {
            if kept.len() >= self.most {
                return;
            }
            if buffer.capacity() >= whole {
                kept.push(buffer);
            }
        }
    }

    /// A kept compressor, or a new one (checksum on, content size off).
    fn compressor(&self) -> std::io::Result<zstd::bulk::Compressor<'static>> {
        if let Some(c) = self.compressors.lock().ok().and_then(|mut k| k.pop()) {
            return Ok(c);
        }
        let mut c = zstd::bulk::Compressor::new(self.level)?;
        c.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true))?;
        c.set_parameter(zstd::zstd_safe::CParameter::ContentSizeFlag(false))?;
        Ok(c)
    }

    fn keep_compressor(&self, c: zstd::bulk::Compressor<'static>) {
        if let Ok(mut kept) = self.compressors.lock() {
            kept.push(c);
        }
    }
}

/// The seek table of a stream of `frames` (stored and decoded sizes), without checksums.
///
/// # Errors
/// More frames than a table counts.
pub(crate) fn table(frames: &[(u32, u32)]) -> Result<Vec<u8>> {
    let n = u32::try_from(frames.len()).map_err(|_| encoding("too many frames"))?;
    let size = n.checked_mul(8).and_then(|b| b.checked_add(9));
    let size = size.ok_or_else(|| encoding("too many frames"))?;
    let mut table = Vec::with_capacity(8 + frames.len() * 8 + 9);
    table.extend(SKIPPABLE_MAGIC.to_le_bytes());
    table.extend(size.to_le_bytes());
    for (stored, decoded) in frames {
        table.extend(stored.to_le_bytes());
        table.extend(decoded.to_le_bytes());
    }
    table.extend(n.to_le_bytes());
    table.push(0);
    table.extend(SEEKABLE_MAGIC.to_le_bytes());
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(data: &[u8], pieces: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut e = Encoder::new(3);
        for piece in data.chunks(pieces.max(1)) {
            e.push(piece, &mut |b| {
                out.extend_from_slice(b);
                Ok(())
            })
            .unwrap();
        }
        e.finish(&mut |b| {
            out.extend_from_slice(b);
            Ok(())
        })
        .unwrap();
        out
    }

    fn decoded(stream: &[u8], len: u64) -> Result<Vec<u8>> {
        let table = seek_table(&stream, 0, stream.len() as u64, len)?;
        let mut out = Vec::new();
        decode(&stream, 0, &table, &mut |b| {
            out.extend_from_slice(b);
            Ok(())
        })?;
        Ok(out)
    }

    #[test]
    fn round_trips_at_frame_edges() {
        for len in [0, 1, FRAME - 1, FRAME, FRAME + 1, 3_000_000] {
            let data: Vec<u8> = (0..len).map(|i| u8::try_from(i % 251).unwrap()).collect();
            for pieces in [7777, FRAME, 5 << 20] {
                let stream = encode(&data, pieces);
                assert!(decoded(&stream, len as u64).unwrap() == data, "{len} in {pieces}");
                let table = seek_table(&&stream[..], 0, stream.len() as u64, len as u64).unwrap();
                let mut parallel = vec![0u8; len];
                decode_into(&&stream[..], 0, &table, &mut parallel).unwrap();
                assert!(parallel == data);
                // What zstd itself decodes (it skips the table's skippable frame).
                assert!(zstd::decode_all(&stream[..]).unwrap() == data);
            }
        }
    }

    /// Pieces of any size, whole batches among them compressed where they lie and the rest
    /// gathered, give the stream one piece gives, on any number of threads.
    #[test]
    fn the_stream_does_not_depend_on_the_pieces() {
        let len = 5 * FRAME + 12_345;
        let data: Vec<u8> = (0..len).map(|i| u8::try_from(i * 7 % 253).unwrap()).collect();
        let encode_in = |sizes: &[usize]| {
            let mut out = Vec::new();
            let mut e = Encoder::new(3);
            let (mut at, mut k) = (0, 0);
            while at < len {
                let n = sizes[k % sizes.len()].min(len - at);
                e.push(&data[at..at + n], &mut |b| {
                    out.extend_from_slice(b);
                    Ok(())
                })
                .unwrap();
                (at, k) = (at + n, k + 1);
            }
            e.finish(&mut |b| {
                out.extend_from_slice(b);
                Ok(())
            })
            .unwrap();
            out
        };
        let whole = encode_in(&[len]);
        assert!(decoded(&whole, len as u64).unwrap() == data);
        for threads in [1, 3] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            // With one thread a batch is 2 MiB: pieces of exactly one batch, a batch begun and
            // finished by the next piece, and pieces that straddle batches.
            let sizes: [&[usize]; 7] = [
                &[len],
                &[2 * FRAME],
                &[FRAME / 2, 3 * FRAME / 2],
                &[FRAME + 3],
                &[3 * FRAME],
                &[100_003, 3 * FRAME, 17],
                &[77_777],
            ];
            for sizes in sizes {
                let stream = pool.install(|| encode_in(sizes));
                assert!(stream == whole, "{threads} threads, pieces of {sizes:?}");
            }
        }
        // Pushed from a pool of 3 threads (batches of 6 MiB), then of 1 (batches of 2 MiB):
        // what waits from the first push is still written first.
        let (three, one) = (
            rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap(),
            rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap(),
        );
        for first in [FRAME / 2, 5 * FRAME - 1] {
            let mut stream = Vec::new();
            let mut keep = |b: &[u8]| {
                stream.extend_from_slice(b);
                Ok(())
            };
            let mut e = Encoder::new(3);
            three.install(|| e.push(&data[..first], &mut keep)).unwrap();
            assert!(!e.pending.is_empty(), "nothing compressed yet");
            one.install(|| {
                e.push(&data[first..first + 10], &mut keep)?;
                e.push(&data[first + 10..], &mut keep)?;
                e.finish(&mut keep)
            })
            .unwrap();
            assert!(stream == whole, "{first} bytes first");
        }
    }

    /// Only buffers that hold a whole frame are kept, at most as many as asked; a kept buffer
    /// goes only to a whole frame, emptied; a shorter chunk gets a buffer of its own bound.
    #[test]
    fn spare_buffers_are_bounded() {
        let spare = Spare::new(3, 2);
        let whole = zstd::zstd_safe::compress_bound(FRAME);
        let mut used = Vec::with_capacity(whole);
        used.extend_from_slice(b"frame");
        spare.give([Vec::with_capacity(10), used, Vec::with_capacity(whole)]);
        spare.give([Vec::with_capacity(whole)]);
        assert_eq!(spare.buffers.lock().unwrap().len(), 2);
        let small = spare.buffer(12);
        assert!(small.capacity() < 1024, "{}", small.capacity());
        assert_eq!(spare.buffers.lock().unwrap().len(), 2, "a short chunk takes none");
        for _ in 0..2 {
            let b = spare.buffer(FRAME);
            assert!(b.is_empty() && b.capacity() >= whole);
        }
        assert_eq!(spare.buffers.lock().unwrap().len(), 0);
        assert!(spare.buffer(FRAME).capacity() >= whole, "a new one once none is kept");
    }

    /// A frame from a compressor that has already made others (of other bytes, whole and short)
    /// is the frame a new compressor makes, at the fast levels and at those that search harder
    /// (7: the row matcher; 19: the optimal parser).
    #[test]
    fn kept_compressors_make_the_frames_new_ones_make() {
        let bytes = |seed: u64, n: usize| -> Vec<u8> {
            (0..n as u64)
                .map(|i| ((i.wrapping_mul(seed) >> 7) ^ (i / 3)).to_le_bytes()[0])
                .collect()
        };
        let (a, b, c) = (bytes(0x9e37, 150_000), bytes(0x51ed, 150_000), bytes(7, 40_000));
        for level in [1, 3, 7, 19] {
            let fresh = |chunk: &[u8]| {
                let mut z = zstd::bulk::Compressor::new(level).unwrap();
                z.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true)).unwrap();
                z.set_parameter(zstd::zstd_safe::CParameter::ContentSizeFlag(false)).unwrap();
                z.compress(chunk).unwrap()
            };
            let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
            let spare = Spare::new(level, 4);
            pool.install(|| {
                compress_frames(&[&a[..], &c[..]], &spare).unwrap();
                let again = compress_frames(&[&b[..], &c[..], &a[..]], &spare).unwrap();
                assert_eq!(spare.compressors.lock().unwrap().len(), 1, "one kept, reused");
                for (made, chunk) in again.iter().zip([&b, &c, &a]) {
                    assert!(made.0 == fresh(chunk), "level {level}");
                }
            });
        }
    }

    /// The layout the reference writer gives a 3,000,000-byte input: three frames of 1 MiB, 1 MiB
    /// and the rest, and a table without a checksum column.
    #[test]
    fn the_table_has_the_reference_layout() {
        let stream = encode(&vec![0u8; 3_000_000], 1 << 20);
        let tail = &stream[stream.len() - 9..];
        assert_eq!(tail, [3, 0, 0, 0, 0, 0xb1, 0xea, 0x92, 0x8f]);
        let table = seek_table(&&stream[..], 0, stream.len() as u64, 3_000_000).unwrap();
        let decoded: Vec<u64> = table.frames.iter().map(|f| f.1).collect();
        assert_eq!(decoded, [1 << 20, 1 << 20, 3_000_000 - (2 << 20)]);
    }

    #[test]
    fn each_rule_of_the_table() {
        let data = vec![5u8; FRAME + 10];
        let stream = encode(&data, FRAME);
        let rule = |s: &[u8], len: u64| decoded(s, len).err().and_then(|e| e.broken());
        assert_eq!(rule(&stream, data.len() as u64 + 1), Some(Rule::Encoding), "sum");
        let mut bad = stream.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert_eq!(rule(&bad, data.len() as u64), Some(Rule::Encoding), "magic");
        let mut bad = stream.clone();
        let at = bad.len() - 5;
        bad[at] = 0x04;
        assert_eq!(rule(&bad, data.len() as u64), Some(Rule::Encoding), "reserved bit");
        bad[at] = 0x01;
        assert!(decoded(&bad, data.len() as u64).is_ok(), "an unused bit is not read");
        let mut bad = stream.clone();
        let at = bad.len() - 9;
        bad[at] = 200;
        assert_eq!(rule(&bad, data.len() as u64), Some(Rule::Encoding), "frame count");
        // A frame that does not decode to its length: the table's first entry says one more.
        let mut bad = stream.clone();
        let entries = bad.len() - 9 - 16;
        bad[entries + 4] = bad[entries + 4].wrapping_add(1);
        assert_eq!(rule(&bad, data.len() as u64 + 1), Some(Rule::Encoding), "frame length");
        // Damaged frame bytes fail zstd's checksum or its decoding.
        let mut bad = stream.clone();
        bad[20] ^= 0xff;
        assert!(decoded(&bad, data.len() as u64).is_err());
        assert_eq!(rule(&[0u8; 10], 0), Some(Rule::Encoding), "too short");
        // One table entry holding two frames (the second without a checksum) is refused, though
        // zstd would decode both.
        let mut plain = zstd::bulk::Compressor::new(3).unwrap();
        plain.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(false)).unwrap();
        let mut checked = zstd::bulk::Compressor::new(3).unwrap();
        checked.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true)).unwrap();
        let mut frames = checked.compress(&[1u8; 100]).unwrap();
        frames.extend(plain.compress(&[2u8; 100]).unwrap());
        let mut two = frames.clone();
        two.extend(0x184D_2A5Eu32.to_le_bytes());
        two.extend(17u32.to_le_bytes());
        two.extend(u32::try_from(frames.len()).unwrap().to_le_bytes());
        two.extend(200u32.to_le_bytes());
        two.extend(1u32.to_le_bytes());
        two.push(0);
        two.extend(0x8F92_EAB1u32.to_le_bytes());
        assert_eq!(rule(&two, 200), Some(Rule::Encoding), "two frames in one entry");
    }
}
