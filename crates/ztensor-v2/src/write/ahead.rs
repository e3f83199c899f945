//! Parts compressed ahead of their turn on the write's pool, within its memory budget.

use super::*;

/// A part compressed ahead of its turn (`zt.zstd-seekable/1`): its stream in pieces (the
/// frames, then the seek table), the xxh3 of those bytes, and the xxh3 and length of the
/// decoded ones.
pub(super) struct Compressed {
    pub(super) stream: Vec<Vec<u8>>,
    pub(super) stored_hash: u64,
    pub(super) decoded_hash: u64,
    pub(super) decoded_len: u64,
}

/// A part to compress ahead: object `index`'s part `role` (`bools`: made 0 or 1 first).
pub(super) struct Job {
    pub(super) index: usize,
    pub(super) role: String,
    pub(super) bools: bool,
    pub(super) len: u64,
}

/// Compresses one part whole, its frames in parallel.
pub(super) fn compress_part(
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
pub(super) fn in_pieces(source: &dyn TensorSource, index: usize, info: &ObjectInfo<'_>) -> bool {
    source.reads_in_pieces(index) && listed_as_read(info) && info.format != Format::SparseCoo
}

/// The decoded length of part `part` of an object read in pieces (listed as `info`) when it
/// is compressed ahead of its turn: when its source states it (one that may decode to more
/// than it is stored as streams when its turn comes) and it is at most `limit` (what may be in
/// flight; a larger one streams through the encoder when its turn comes).
pub(super) fn ahead_len(info: &ObjectInfo<'_>, part: &PlannedPart, limit: u64) -> Option<u64> {
    let c = info.components.iter().find(|c| c.role == part.role.as_str());
    c.and_then(|c| c.decoded_len).filter(|&len| len <= limit)
}

/// The parts of object `index` to compress ahead, in writing order (see [`ahead_len`]).
pub(super) fn ahead_jobs(
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
pub(super) const AHEAD_LEAST: u64 = 64 << 10;

pub(super) fn ahead_cost(len: u64) -> u64 {
    len.max(AHEAD_LEAST)
}

/// The decoded bytes of parts compressed ahead and not yet written, at most: half the memory
/// budget of a run on `threads` (each part is held as read and as compressed; by default
/// enough that every worker has parts to compress while the writer waits on the disk), and at
/// least one frame.
pub(super) fn ahead_limit(options: &WriteOptions, threads: usize) -> u64 {
    (options.par.budget_for(threads) / 2).max(crate::seekable::FRAME as u64)
}

/// Parts compressed ahead, on the engine's facility for work done ahead of its turn
/// ([`ztensor_par::Ahead`]): each started as soon as the bytes in flight allow (the engine's
/// budget and admission rule) and taken by the writer in writing order. No part waits for
/// another to finish: a worker done with one part's frames takes the next part's.
///
/// Which parts go ahead is found as they are reached (object by object, by [`ahead_jobs`]),
/// by the feeder and by the writer alike, so no list of them is held: the writer takes the
/// `n`-th part it finds to be compressed ahead as the `n`-th the feeder started.
pub(super) struct Ahead {
    parts: ztensor_par::Ahead<Result<Compressed>>,
    /// The compressors of the parts, and the frame buffers the writer has written for their
    /// next frames.
    pub(super) spare: std::sync::Arc<crate::seekable::Spare>,
}

impl Ahead {
    /// Starts compressing the parts of the objects of `order` that go ahead ([`ahead_jobs`]),
    /// in writing order, on `pool`, fed by a thread of `scope`.
    pub(super) fn start<'s>(
        scope: &'s std::thread::Scope<'s, '_>,
        (source, order, options): (&'s dyn TensorSource, &'s Order, &'s WriteOptions),
        (level, limit): (i32, u64),
        pool: Option<Arc<rayon::ThreadPool>>,
    ) -> Ahead {
        // The frames of the parts in flight and of the one being written: as many buffers as
        // can be in use at once.
        let frames = usize::try_from(limit / crate::seekable::FRAME as u64).unwrap_or(usize::MAX);
        let threads = pool.as_ref().map_or(1, |p| p.current_num_threads());
        let most = frames.saturating_mul(2).saturating_add(threads);
        let spare = std::sync::Arc::new(crate::seekable::Spare::new(level, most));
        // The write's own pool, never the caller's: the writer waits for these parts, and had
        // they been queued on the caller's pool, a writer running on that pool's only (or
        // every) worker would wait for itself.
        let Some(pool) = pool else {
            return Ahead { parts: ztensor_par::Ahead::none(), spare };
        };
        // An object that cannot be planned was refused before any part was written; nothing
        // more goes ahead (the writer streams what is left).
        let jobs = (0..order.len())
            .map(move |k| ahead_jobs(source, order.index(k), options, limit))
            .map_while(Result::ok)
            .flatten()
            .map(|job| {
                let cost = ahead_cost(job.len);
                (job, cost)
            });
        let compressors = spare.clone();
        let parts = ztensor_par::Ahead::start(scope, pool, limit, jobs, move |job| {
            compress_part(source, &job, &compressors)
        });
        Ahead { parts, spare }
    }

    /// The next part compressed ahead: the writer asks for each part [`ahead_len`] says goes
    /// ahead, in writing order. `None` when none was compressed ahead (no pool, or the feeder
    /// stopped).
    pub(super) fn take(&mut self) -> Option<Result<Compressed>> {
        self.parts.take()
    }

    /// Hands back the buffers of a part once it is written.
    pub(super) fn give_back(&self, part: Compressed) {
        self.spare.give(part.stream);
    }
}
