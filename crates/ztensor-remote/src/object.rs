//! A remote object read as a [`ReadAt`]: ranged GETs pinned to the version first seen, with a
//! small cache so the many small reads a reader makes at the start and end of a file cost one
//! request each end.

use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use futures_util::StreamExt;
use object_store::{GetOptions, GetRange, GetResult, ObjectStore, ObjectStoreExt};
use ztensor_source::ReadAt;

use crate::counters::{Counters, Transfer};
use crate::error::{Error, ErrorKind};
use crate::location::Location;
use crate::store::{self, RemoteOptions};

/// How much of the object's end the open fetches: a zTensor trailer and manifest (or a whole
/// small file) in the same request that learns the size and version.
pub const SUFFIX_LEN: u64 = 192 << 10;
/// The least a read that misses the cache fetches (and keeps): the headers at a file's start
/// and the small reads near them.
pub const BLOCK_LEN: u64 = 64 << 10;
/// Reads at least this long go straight to the server into the caller's buffer, uncached:
/// tensor data, read once.
const DIRECT_LEN: usize = 1 << 20;
/// Cached blocks besides the suffix (each at most [`DIRECT_LEN`]).
const MAX_BLOCKS: usize = 8;

/// An object in a remote store, read by ranges. Opening it costs one request (a suffix range
/// that returns the object's size, ETag and last bytes); each read that misses the cache costs
/// one more. Every request after the first is pinned to the version first seen (`If-Match`
/// its ETag, or `If-Unmodified-Since` its modification time when the store gives no ETag): an
/// object replaced while it is read is refused with [`ErrorKind::Changed`], never mixed.
/// Clones share the connection, the cache and the counters.
#[derive(Debug, Clone)]
pub struct RemoteObject {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    location: Location,
    shown: String,
    store: Arc<dyn ObjectStore>,
    path: object_store::path::Path,
    options: RemoteOptions,
    len: u64,
    e_tag: Option<String>,
    last_modified: Option<chrono::DateTime<chrono::Utc>>,
    counters: Arc<Counters>,
    /// The object's last bytes, fetched by the open.
    suffix: Bytes,
    /// Blocks fetched by reads that missed, most recent last.
    blocks: Mutex<Vec<(u64, Bytes)>>,
    /// One permit per ranged GET in flight ([`RemoteOptions::concurrency`]), shared by every
    /// thread reading the object.
    gate: tokio::sync::Semaphore,
    /// Ranges fetched ahead of in-order readers.
    ahead: Mutex<Ahead>,
}

/// A range fetched ahead: its bytes, or why they could not be had, once they are there.
type Pending =
    futures_util::future::Shared<futures_util::future::BoxFuture<'static, Result<Chunks, Error>>>;

/// A body as it arrived: its chunks, in order, never copied into one buffer (the bytes are
/// copied once, into the reader's).
#[derive(Debug, Clone)]
struct Chunks(Arc<[Bytes]>);

impl Chunks {
    fn len(&self) -> u64 {
        self.0.iter().map(|c| c.len() as u64).sum()
    }

    /// The slices that hold `len` bytes from `at`, in order (fewer bytes when the chunks end
    /// first).
    fn slices(&self, mut at: u64, len: u64) -> impl Iterator<Item = &[u8]> {
        let mut left = len;
        self.0.iter().filter_map(move |chunk| {
            let n = chunk.len() as u64;
            if left == 0 || at >= n {
                at = at.saturating_sub(n);
                return None;
            }
            let take = (n - at).min(left);
            let slice = &chunk[to_usize(at)..to_usize(at + take)];
            (at, left) = (0, left - take);
            Some(slice)
        })
    }

    /// Fills `dest` with the bytes from `at`; false when they do not reach that far.
    #[cfg(test)]
    fn copy_to(&self, at: u64, dest: &mut [u8]) -> bool {
        let mut filled = 0;
        for slice in self.slices(at, dest.len() as u64) {
            dest[filled..filled + slice.len()].copy_from_slice(slice);
            filled += slice.len();
        }
        filled == dest.len()
    }
}

/// Where a large read's bytes go.
enum Out<'a> {
    /// Into a buffer as long as the read.
    Into(&'a mut [u8]),
    /// Handed on in order ([`ReadAt::read_each_at`]): what is held (fetched ahead, the
    /// suffix, a cached block) as it is; what must be fetched now, into `scratch` a piece at
    /// a time.
    Each { scratch: &'a mut [u8], each: &'a mut dyn FnMut(&[u8]) -> std::io::Result<()> },
}

impl Out<'_> {
    /// `bytes`, which lie `at` bytes into the read.
    fn held(&mut self, at: u64, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Out::Into(buf) => {
                let dest = buf.get_mut(to_usize(at)..).and_then(|d| d.get_mut(..bytes.len()));
                dest.ok_or(std::io::ErrorKind::UnexpectedEof)?.copy_from_slice(bytes);
                Ok(())
            }
            Out::Each { each, .. } => each(bytes),
        }
    }

    /// `len` bytes of `chunks` from `from`, which lie `at` bytes into the read; false when the
    /// chunks end first.
    fn chunks(
        &mut self,
        mut at: u64,
        chunks: &Chunks,
        from: u64,
        len: u64,
    ) -> std::io::Result<bool> {
        let mut given = 0;
        for slice in chunks.slices(from, len) {
            self.held(at, slice)?;
            at += slice.len() as u64;
            given += slice.len() as u64;
        }
        Ok(given == len)
    }
}

/// Read-ahead. Large reads are grouped into streams of reads in order (each starting about
/// where the stream's furthest read ended, as a reader taking tensors one after another, or a
/// few threads taking one tensor's pieces, reads); for each stream, the ranges after its
/// furthest read are fetched before they are asked for, one range at first and twice as many
/// with each read in order, within [`RemoteOptions::read_ahead`] bytes fetched and not yet
/// read in all. A read that belongs to no stream starts one (the least recently used of
/// [`STREAMS`] gives way, what it fetched dropped), so reading one tensor of many, or
/// skipping some, fetches little that is not used; the read-ahead stops at the suffix the
/// open holds, so a whole read fetches each byte once.
///
/// A reader that says what it will read ([`ReadAt::will_need`], as the parallel engine does)
/// is followed by that plan instead: its ranges are fetched ahead in its order from the start,
/// within the same budget, whatever order they lie in in the object.
#[derive(Default)]
struct Ahead {
    /// Ranges fetched or being fetched, by start, none overlapping another and none crossing a
    /// multiple of [`RemoteOptions::range_len`]: a stream's are aligned to it and that long (the
    /// last may be shorter).
    ranges: std::collections::BTreeMap<u64, Fetched>,
    streams: Vec<Stream>,
    /// Counts reads, to tell the least recently used stream.
    tick: u64,
    /// What the reader said it will read and was not fetched ahead yet, in its order: the
    /// front's start is the next byte to fetch.
    plan: std::collections::VecDeque<Range<u64>>,
}

/// A range fetched ahead.
struct Fetched {
    len: u64,
    bytes: Pending,
    /// The stream that asked for it ([`PLANNED`]: the plan).
    by: u64,
    /// How many of its bytes reads have taken: once all it was fetched for, it is let go.
    used: u64,
    /// How many of its bytes it was fetched for: all of a stream's; those of the plan's
    /// ranges it covers (not the gaps between them).
    need: u64,
}

/// The `by` of ranges fetched for a plan (streams are numbered from 1).
const PLANNED: u64 = 0;
/// The most ranges held for a plan at once (ranges of small tensors are small).
const MAX_PLANNED: usize = 256;
/// A plan's ranges that lie this close after one another are fetched together (the padding
/// between a file's tensors is fetched with them).
const PLAN_GAP: u64 = 4 << 10;
/// How far into the plan a read is looked for, to learn that it read bytes of the plan
/// before they were fetched ahead (so they are not fetched again).
const PLAN_SEARCH: usize = 64;

/// Reads in order.
#[derive(Debug, Clone, Copy)]
struct Stream {
    id: u64,
    /// Where its first read started.
    start: u64,
    /// The end of its furthest read.
    frontier: u64,
    /// How many ranges to keep fetched ahead of it.
    depth: u64,
    /// The read it last had.
    used: u64,
}

/// The most streams of in-order reads followed at once.
const STREAMS: usize = 4;

impl std::fmt::Debug for Ahead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ahead")
            .field("ranges", &self.ranges.len())
            .field("streams", &self.streams)
            .finish_non_exhaustive()
    }
}

impl Ahead {
    /// Whether a plan is being followed: ranges of it are still to fetch, or held.
    fn planning(&self) -> bool {
        !self.plan.is_empty() || self.ranges.values().any(|f| f.by == PLANNED)
    }

    /// Whether `range` is something the plan fetched or will fetch.
    fn in_plan(&self, range: &Range<u64>) -> bool {
        let overlaps = |r: &Range<u64>| r.start < range.end && range.start < r.end;
        self.plan.iter().take(PLAN_SEARCH).any(overlaps)
            || self
                .ranges
                .range(..range.end)
                .next_back()
                .is_some_and(|(&start, f)| f.by == PLANNED && start + f.len > range.start)
    }

    /// A read of `range` was made: when it reached bytes of the plan not fetched yet (the
    /// reader is ahead of the read-ahead), those and the plan's ranges before them are read
    /// by the readers themselves, never fetched ahead.
    fn passed(&mut self, range: &Range<u64>) {
        let at = self
            .plan
            .iter()
            .take(PLAN_SEARCH)
            .position(|r| r.start < range.end && range.start < r.end);
        if let Some(at) = at {
            self.plan.drain(..at);
            if let Some(front) = self.plan.front_mut() {
                front.start = front.start.max(range.end);
                if front.start >= front.end {
                    self.plan.pop_front();
                }
            }
        }
    }

    /// The stream `range` continues (or a new one), and the ranges fetched ahead it overlaps.
    fn enter(
        &mut self,
        range: &Range<u64>,
        step: u64,
        budget: u64,
    ) -> (u64, Vec<(u64, u64, Pending)>) {
        self.tick += 1;
        let tick = self.tick;
        let max_depth = (budget / step).max(1);
        let found = self
            .streams
            .iter_mut()
            .filter(|s| {
                range.start <= s.frontier.saturating_add(step)
                    && range.start.saturating_add(budget) >= s.frontier
            })
            .min_by_key(|s| s.frontier.abs_diff(range.start));
        let id = match found {
            Some(s) => {
                // At least as far ahead as this read was long: the next is likely as long.
                let read = (range.end - range.start).div_ceil(step);
                s.depth = (s.depth * 2).max(read).clamp(1, max_depth);
                s.frontier = s.frontier.max(range.end);
                s.used = tick;
                s.id
            }
            None => {
                if self.streams.len() >= STREAMS
                    && let Some(gone) = self.streams.iter().min_by_key(|s| s.used).map(|s| s.id)
                {
                    self.streams.retain(|s| s.id != gone);
                    self.ranges.retain(|_, f| f.by != gone);
                }
                self.streams.push(Stream {
                    id: tick,
                    start: range.start,
                    frontier: range.end,
                    depth: 0,
                    used: tick,
                });
                tick
            }
        };
        let first = range.start - range.start % step;
        let taken = self
            .ranges
            .range(first..range.end)
            .map(|(&start, f)| (start, f.len, f.bytes.clone()))
            .collect();
        // What lies a whole range before this read is not read again: readers in order (a
        // few threads taking one tensor's pieces) read at most a range behind one another.
        self.ranges.retain(|&start, f| f.by != id || start + f.len + step > range.start);
        (id, taken)
    }
}

impl RemoteObject {
    /// Opens the object at `location`: one GET of its last [`SUFFIX_LEN`] bytes (all of a
    /// smaller object), which also says its size and version.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] for a missing object or bucket, [`ErrorKind::Denied`] with the
    /// server's code for refused credentials, [`ErrorKind::TimedOut`] past the time bound,
    /// [`ErrorKind::Request`] for any other failure; each naming the URL.
    pub fn open(location: &Location, options: &RemoteOptions) -> Result<RemoteObject, Error> {
        let counters = Arc::new(Counters::default());
        crate::counters::opened(&location.to_string(), &counters);
        let store = store::store(location, options, &counters)?.object;
        let path = location.store_path()?;
        let shown = location.to_string();
        let opening = async {
            let suffix =
                GetOptions { range: Some(GetRange::Suffix(SUFFIX_LEN)), ..GetOptions::default() };
            match store.get_opts(&path, suffix).await {
                Ok(got) => {
                    let meta = got.meta.clone();
                    let range = got.range.clone();
                    let bytes = body(&shown, "opening", got, &counters).await?;
                    if range.end != meta.size || bytes.len() as u64 != range.end - range.start {
                        return Err(Error::new(
                            ErrorKind::Request,
                            &shown,
                            format!(
                                "opening: the server answered bytes {range:?} of {}, not the object's end",
                                meta.size
                            ),
                        ));
                    }
                    Ok((meta, bytes))
                }
                // A store whose client takes no suffix ranges (Azure): its size from a HEAD,
                // then the same last bytes by a bounded range, pinned to the version seen.
                Err(object_store::Error::NotSupported { .. }) => {
                    let meta = store
                        .head(&path)
                        .await
                        .map_err(|e| Error::from_store("opening", &shown, e))?;
                    if meta.size == 0 {
                        return Ok((meta, Bytes::new()));
                    }
                    let start = meta.size.saturating_sub(SUFFIX_LEN);
                    let bounded = GetOptions {
                        range: Some(GetRange::Bounded(start..meta.size)),
                        if_match: meta.e_tag.clone(),
                        ..GetOptions::default()
                    };
                    let got = store
                        .get_opts(&path, bounded)
                        .await
                        .map_err(|e| Error::from_store("opening", &shown, e))?;
                    let bytes = body(&shown, "opening", got, &counters).await?;
                    if bytes.len() as u64 != meta.size - start {
                        return Err(Error::new(
                            ErrorKind::Request,
                            &shown,
                            format!(
                                "opening: the server answered {} bytes for the last {} of {}",
                                bytes.len(),
                                meta.size - start,
                                meta.size
                            ),
                        ));
                    }
                    Ok((meta, bytes))
                }
                // An empty object has no suffix to give (416): its size comes from a HEAD.
                Err(e) if !range_refused(&e) => Err(Error::from_store("opening", &shown, e)),
                Err(_) => {
                    let meta = store
                        .head(&path)
                        .await
                        .map_err(|e| Error::from_store("opening", &shown, e))?;
                    if meta.size != 0 {
                        return Err(Error::new(
                            ErrorKind::Request,
                            &shown,
                            "opening: the server refused a range request on a non-empty object",
                        ));
                    }
                    Ok((meta, Bytes::new()))
                }
            }
        };
        let (meta, suffix) = store::block_on(&shown, "opening", options.timeout, opening)?;
        Ok(RemoteObject {
            inner: Arc::new(Inner {
                location: location.clone(),
                shown,
                store,
                path,
                options: options.clone(),
                len: meta.size,
                e_tag: meta.e_tag.clone(),
                last_modified: Some(meta.last_modified),
                counters,
                suffix,
                blocks: Mutex::new(Vec::new()),
                gate: tokio::sync::Semaphore::new(options.concurrency.max(1)),
                ahead: Mutex::new(Ahead::default()),
            }),
        })
    }

    /// Where it is.
    pub fn location(&self) -> &Location {
        &self.inner.location
    }

    /// Opens the object `name` beside this one (in the same "directory" of its bucket), with
    /// the same options: a sharded checkpoint's shard beside its index, say. `name` is a plain
    /// name (no `/`, not `.` or `..`).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidUrl`] for a name that is not plain; as [`RemoteObject::open`].
    pub fn sibling(&self, name: &str) -> Result<RemoteObject, Error> {
        let shown = self.inner.location.to_string();
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\']) {
            return Err(Error::new(
                ErrorKind::InvalidUrl,
                shown,
                format!("{name:?} is not a plain name of an object beside this one"),
            ));
        }
        let base = shown.rsplit_once('/').map_or(shown.as_str(), |(dir, _)| dir);
        let location = Location::parse(&format!("{base}/{name}"))?;
        RemoteObject::open(&location, &self.inner.options)
    }

    /// The version it is read at (its ETag), when the store gives one.
    pub fn e_tag(&self) -> Option<&str> {
        self.inner.e_tag.as_deref()
    }

    /// The requests sent and bytes received for it so far (by it and its clones).
    pub fn transfer(&self) -> Transfer {
        self.inner.counters.get()
    }

    /// A ranged GET of `range` pinned to the version first seen, once a permit of the
    /// object's [`RemoteOptions::concurrency`] is free.
    async fn get(
        &self,
        range: Range<u64>,
    ) -> Result<(GetResult, tokio::sync::SemaphorePermit<'_>), Error> {
        let inner = &*self.inner;
        let permit = inner.gate.acquire().await.map_err(|_| {
            Error::new(ErrorKind::Request, &inner.shown, "reading: the object was closed")
        })?;
        let options = GetOptions {
            range: Some(GetRange::Bounded(range)),
            if_match: inner.e_tag.clone(),
            if_unmodified_since: if inner.e_tag.is_none() { inner.last_modified } else { None },
            ..GetOptions::default()
        };
        let got = inner
            .store
            .get_opts(&inner.path, options)
            .await
            .map_err(|e| Error::from_store("reading", &inner.shown, e))?;
        if got.meta.e_tag != inner.e_tag || got.meta.size != inner.len {
            return Err(changed(&inner.shown));
        }
        Ok((got, permit))
    }

    /// Bytes `range` of the object into `dest` (as long as the range), fetched in ranged GETs
    /// of [`RemoteOptions::range_len`] at most, up to [`RemoteOptions::concurrency`] at once,
    /// each written where it belongs as it arrives and bounded by the time bound on its own.
    fn fetch_into(&self, range: Range<u64>, dest: &mut [u8]) -> Result<(), Error> {
        let inner = &*self.inner;
        let step = inner.options.range_len.max(RemoteOptions::MIN_RANGE_LEN);
        let step = usize::try_from(step).unwrap_or(usize::MAX);
        let pieces = dest.chunks_mut(step).zip((range.start..range.end).step_by(step));
        let requests = pieces.map(|(piece, start)| {
            let end = start + piece.len() as u64;
            let one = async move {
                let (got, _permit) = self.get(start..end).await?;
                body_into(&inner.shown, "reading", got, piece, &inner.counters).await
            };
            crate::store::timed(&inner.shown, "reading", inner.options.timeout, one)
        });
        store::block_on_all(futures_util::future::try_join_all(requests)).map(|_| ())
    }

    /// Bytes `range` of the object, fetched in one ranged GET pinned to its version.
    fn fetch(&self, range: Range<u64>) -> Result<Bytes, Error> {
        let inner = &*self.inner;
        let want = range.end - range.start;
        let fetching = async {
            let (got, _permit) = self.get(range.clone()).await?;
            body(&inner.shown, "reading", got, &inner.counters).await
        };
        let bytes = store::block_on(&inner.shown, "reading", inner.options.timeout, fetching)?;
        if bytes.len() as u64 != want {
            return Err(Error::new(
                ErrorKind::Request,
                &inner.shown,
                format!(
                    "reading bytes {range:?}: the server sent {} bytes, not {want}",
                    bytes.len()
                ),
            ));
        }
        Ok(bytes)
    }

    /// Copies `buf.len()` bytes at `offset` from the suffix or a cached block, when one holds
    /// them all.
    fn cached(&self, offset: u64, buf: &mut [u8]) -> bool {
        let inner = &*self.inner;
        let end = offset + buf.len() as u64;
        let suffix_start = inner.len - inner.suffix.len() as u64;
        if offset >= suffix_start {
            // Within the suffix, which is in memory: the difference fits.
            let at = usize::try_from(offset - suffix_start).unwrap_or(usize::MAX);
            if let Some(held) = at.checked_add(buf.len()).and_then(|e| inner.suffix.get(at..e)) {
                buf.copy_from_slice(held);
                return true;
            }
            return false;
        }
        let blocks = inner.blocks.lock().unwrap_or_else(PoisonError::into_inner);
        for (start, bytes) in blocks.iter().rev() {
            if offset >= *start && end <= start + bytes.len() as u64 {
                let at = usize::try_from(offset - start).unwrap_or(usize::MAX);
                if let Some(held) = at.checked_add(buf.len()).and_then(|e| bytes.get(at..e)) {
                    buf.copy_from_slice(held);
                    return true;
                }
            }
        }
        false
    }
}

impl RemoteObject {
    /// A large read (tensor data) of `len` bytes at `offset`: what a cached block holds at its
    /// start and the suffix at its end are taken from there, the rest fetched in parallel
    /// ranged GETs ([`Self::read_through`]), uncached, so a convert fetches each byte of its
    /// input about once. The bytes go to `out` in order.
    fn read_large(&self, offset: u64, len: u64, out: &mut Out<'_>) -> std::io::Result<()> {
        let inner = &*self.inner;
        let end = offset + len;
        let suffix_start = inner.len - inner.suffix.len() as u64;
        let (mut lo, hi) = (offset, end.min(suffix_start).max(offset));
        if lo < hi {
            let covering = {
                let blocks = inner.blocks.lock().unwrap_or_else(PoisonError::into_inner);
                blocks
                    .iter()
                    .filter(|(start, bytes)| *start <= lo && lo < start + bytes.len() as u64)
                    .max_by_key(|(start, bytes)| start + bytes.len() as u64)
                    .cloned()
            };
            if let Some((start, bytes)) = covering {
                let stop = (start + bytes.len() as u64).min(hi);
                let held = bytes.get(to_usize(lo - start)..to_usize(stop - start));
                out.held(0, held.ok_or(std::io::ErrorKind::UnexpectedEof)?)?;
                lo = stop;
            }
        }
        if lo < hi {
            self.read_through(lo..hi, offset, out)?;
        }
        if end > suffix_start {
            let from = offset.max(suffix_start);
            let held =
                inner.suffix.get(to_usize(from - suffix_start)..to_usize(end - suffix_start));
            out.held(from - offset, held.ok_or(std::io::ErrorKind::UnexpectedEof)?)?;
        }
        Ok(())
    }

    /// Bytes `range` of the object, which lie `range.start - base` bytes into a read, fetched
    /// now ([`Self::fetch_into`]) into `out`.
    fn fetch_out(&self, range: Range<u64>, base: u64, out: &mut Out<'_>) -> std::io::Result<()> {
        match out {
            Out::Into(buf) => {
                let dest = buf.get_mut(to_usize(range.start - base)..to_usize(range.end - base));
                Ok(self.fetch_into(range, dest.ok_or(std::io::ErrorKind::UnexpectedEof)?)?)
            }
            Out::Each { scratch, each } => {
                let mut at = range.start;
                while at < range.end {
                    let n = to_usize(range.end - at).min(scratch.len());
                    self.fetch_into(at..at + n as u64, &mut scratch[..n])?;
                    each(&scratch[..n])?;
                    at += n as u64;
                }
                Ok(())
            }
        }
    }

    /// Bytes `range`, which lie `range.start - base` bytes into a read, into `out`: what was
    /// fetched ahead taken from there, the rest fetched now ([`Self::fetch_out`]); then, for a
    /// read in order, the ranges after it asked for.
    fn read_through(&self, range: Range<u64>, base: u64, out: &mut Out<'_>) -> std::io::Result<()> {
        let inner = &*self.inner;
        let step = inner.options.range_len.max(RemoteOptions::MIN_RANGE_LEN);
        let budget = inner.options.read_ahead;
        if budget == 0 {
            return self.fetch_out(range, base, out);
        }
        let (stream, taken) = {
            let mut ahead = inner.ahead.lock().unwrap_or_else(PoisonError::into_inner);
            ahead.passed(&range);
            ahead.enter(&range, step, budget)
        };
        // What was fetched ahead, as it is; the gaps between fetched now.
        let mut at = range.start;
        for (start, len, pending) in taken {
            let (lo, hi) = (start.max(range.start), (start + len).min(range.end));
            if lo >= hi {
                continue;
            }
            if at < lo {
                self.fetch_out(at..lo, base, out)?;
            }
            let chunks = store::block_on_all(pending)?;
            if !out.chunks(lo - base, &chunks, lo - start, hi - lo)? {
                return Err(Error::new(
                    ErrorKind::Request,
                    &inner.shown,
                    "reading: a range fetched ahead is short",
                )
                .into());
            }
            at = hi;
            // A range whose every byte was taken is let go at once, so the read-ahead budget
            // holds only what is still to be read.
            let mut ahead = inner.ahead.lock().unwrap_or_else(PoisonError::into_inner);
            if let std::collections::btree_map::Entry::Occupied(mut f) = ahead.ranges.entry(start) {
                f.get_mut().used += hi - lo;
                if f.get().used >= f.get().need {
                    f.remove();
                    // Room for the plan's next range at once, not after the whole read.
                    if ahead.planning() {
                        self.fetch_planned(&mut ahead, step, budget);
                    }
                }
            }
        }
        if at < range.end {
            self.fetch_out(at..range.end, base, out)?;
        }
        let mut ahead = inner.ahead.lock().unwrap_or_else(PoisonError::into_inner);
        if ahead.planning() {
            self.fetch_planned(&mut ahead, step, budget);
        } else {
            drop(ahead);
            self.fetch_ahead(stream, step, budget);
        }
        Ok(())
    }

    /// Fetches the plan's next ranges ahead, in its order, within the read-ahead budget and
    /// [`MAX_PLANNED`] ranges: each up to the next multiple of `step` (a server may charge
    /// each request for the whole object, as moto does: ranges are never cut shorter),
    /// joining the plan's ranges that follow within [`PLAN_GAP`]; never bytes already held,
    /// nor the suffix.
    fn fetch_planned(&self, ahead: &mut Ahead, step: u64, budget: u64) {
        let end = self.inner.len - self.inner.suffix.len() as u64;
        let mut held: u64 = ahead.ranges.values().map(|f| f.len).sum();
        let mut count = ahead.ranges.values().filter(|f| f.by == PLANNED).count();
        while count < MAX_PLANNED {
            let Some(front) = ahead.plan.front_mut() else { break };
            let start = front.start;
            if start >= front.end.min(end) {
                ahead.plan.pop_front();
                continue;
            }
            // Bytes held already (the plan named them twice): skipped.
            let before = ahead.ranges.range(..=start).next_back();
            if let Some(covered) = before.map(|(&at, f)| at + f.len).filter(|&e| e > start) {
                front.start = covered;
                continue;
            }
            // Up to the next multiple of `step`, the next range held, and the suffix.
            let next_held = ahead.ranges.range(start + 1..).next().map_or(u64::MAX, |(&at, _)| at);
            let limit =
                (start / step).saturating_add(1).saturating_mul(step).min(next_held).min(end);
            // The ranges it covers: `whole` of them, and part of the next when `partly`.
            let (mut stop, mut need, mut whole, mut partly) = (start, 0, 0, false);
            for r in &ahead.plan {
                let from = if whole == 0 { start } else { r.start };
                if whole > 0 && (from < stop || from - stop > PLAN_GAP || from >= limit) {
                    break;
                }
                let to = r.end.min(limit);
                need += to - from;
                stop = to;
                if to < r.end {
                    partly = true;
                    break;
                }
                whole += 1;
            }
            if held + (stop - start) > budget {
                break;
            }
            ahead.plan.drain(..whole);
            if partly && let Some(front) = ahead.plan.front_mut() {
                front.start = stop;
            }
            let bytes = self.fetch_one_ahead(start..stop);
            let fetched = Fetched { len: stop - start, bytes, by: PLANNED, used: 0, need };
            ahead.ranges.insert(start, fetched);
            held += stop - start;
            count += 1;
        }
    }

    /// Asks for the ranges after `stream`'s furthest read, as many as its depth allows, within
    /// the read-ahead budget, up to the object's suffix (which the open holds).
    fn fetch_ahead(&self, stream: u64, step: u64, budget: u64) {
        let inner = &*self.inner;
        let end = inner.len - inner.suffix.len() as u64;
        let mut ahead = inner.ahead.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(&Stream { frontier, depth, .. }) = ahead.streams.iter().find(|s| s.id == stream)
        else {
            return;
        };
        // From the first whole range past the furthest read: bytes before it are read by the
        // readers themselves.
        let mut start = frontier.div_ceil(step) * step;
        // Not into bytes another stream began at further on: that one reads them (as threads
        // that each take some of a file's tensors do).
        let theirs = ahead.streams.iter().filter(|s| s.id != stream && s.start >= frontier);
        let end = theirs.map(|s| s.start).fold(end, u64::min);
        let last = start.saturating_add(depth * step).min(end);
        let mut held: u64 = ahead.ranges.values().map(|f| f.len).sum();
        while start < last {
            let len = step.min(end - start);
            if held + len > budget || start + len > end {
                break;
            }
            if let std::collections::btree_map::Entry::Vacant(slot) = ahead.ranges.entry(start) {
                let bytes = self.fetch_one_ahead(start..start + len);
                slot.insert(Fetched { len, bytes, by: stream, used: 0, need: len });
                held += len;
            }
            start += len;
        }
    }
}

impl RemoteObject {
    /// Whether the plan fetched, or will fetch, some of `range` (so a small read takes it from
    /// there instead of fetching a block of its own).
    fn planned(&self, range: Range<u64>) -> bool {
        let ahead = self.inner.ahead.lock().unwrap_or_else(PoisonError::into_inner);
        ahead.planning() && ahead.in_plan(&range)
    }

    /// Starts fetching `range` on the runtime, to be had from the handle when it is needed.
    fn fetch_one_ahead(&self, range: Range<u64>) -> Pending {
        let me = self.clone();
        let len = range.end - range.start;
        let task = store::spawn(async move {
            let timeout = me.inner.options.timeout;
            let shown = me.inner.shown.clone();
            store::timed(&shown, "reading ahead", timeout, async {
                let (got, _permit) = me.get(range).await?;
                let chunks = body_chunks(&me.inner.shown, got, &me.inner.counters).await?;
                if chunks.len() == len {
                    Ok(chunks)
                } else {
                    Err(Error::new(
                        ErrorKind::Request,
                        &me.inner.shown,
                        format!("reading ahead: the server sent {} bytes, not {len}", chunks.len()),
                    ))
                }
            })
            .await
        });
        let shown = self.inner.shown.clone();
        let pending = async move {
            task.await.unwrap_or_else(|_| {
                Err(Error::new(ErrorKind::Request, shown, "reading ahead: the task stopped"))
            })
        };
        let pending: futures_util::future::BoxFuture<'static, _> = Box::pin(pending);
        futures_util::FutureExt::shared(pending)
    }
}

/// An offset within a buffer in memory (so it fits; `usize::MAX`, refused by `get`, if not).
fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

impl ReadAt for RemoteObject {
    fn len(&self) -> u64 {
        self.inner.len
    }

    /// Follows the plan from now on: what was fetched ahead before is let go, and the plan's
    /// first ranges are asked for at once (see [`RemoteObject`]'s read-ahead). The plan is
    /// ignored when [`RemoteOptions::read_ahead`] holds less than one range (0, say).
    fn will_need(&self, ranges: &[Range<u64>]) {
        let inner = &*self.inner;
        let budget = inner.options.read_ahead;
        if budget < RemoteOptions::MIN_RANGE_LEN {
            // Not one range would fit: reads go as they would without a plan.
            return;
        }
        let step = inner.options.range_len.max(RemoteOptions::MIN_RANGE_LEN);
        let end = inner.len - inner.suffix.len() as u64;
        // Not what the open holds (the suffix), nor what a cached block holds where a range
        // starts (a read takes that from the block: the headers' block, say, which the first
        // tensor's bytes begin in), nor a range the plan named before (objects sharing a
        // blob: a copy reads it once).
        let mut named = std::collections::BTreeMap::<u64, u64>::new();
        let plan: std::collections::VecDeque<Range<u64>> = {
            let blocks = inner.blocks.lock().unwrap_or_else(PoisonError::into_inner);
            ranges
                .iter()
                .filter(|r| {
                    let before = named.range(..=r.start).next_back();
                    if before.is_some_and(|(_, &stop)| r.end <= stop) {
                        return false;
                    }
                    let stop = named.entry(r.start).or_insert(r.end);
                    *stop = (*stop).max(r.end);
                    true
                })
                .map(|r| {
                    let held = blocks
                        .iter()
                        .map(|(at, bytes)| (*at, at + bytes.len() as u64))
                        .filter(|&(at, stop)| at <= r.start && r.start < stop)
                        .map(|(_, stop)| stop)
                        .max();
                    held.unwrap_or(r.start)..r.end.min(end)
                })
                .filter(|r| !r.is_empty())
                .collect()
        };
        let mut ahead = inner.ahead.lock().unwrap_or_else(PoisonError::into_inner);
        // What an earlier plan fetched and this one names again is kept (advice given twice
        // for the same reads, by a writer and then by the engine it runs, fetches them once);
        // the rest is let go.
        let named: std::collections::BTreeMap<u64, u64> =
            plan.iter().map(|r| (r.start, r.end)).collect();
        let wanted = |at: u64, len: u64| {
            named.range(..at.saturating_add(len)).next_back().is_some_and(|(_, &end)| end > at)
                || named.range(at..at.saturating_add(len)).next().is_some()
        };
        ahead.ranges.retain(|&at, f| f.by == PLANNED && wanted(at, f.len));
        ahead.streams.clear();
        ahead.plan = plan;
        self.fetch_planned(&mut ahead, step, budget);
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let len = self.inner.len;
        let end = offset.checked_add(buf.len() as u64).filter(|&e| e <= len);
        let Some(end) = end else { return Err(std::io::ErrorKind::UnexpectedEof.into()) };
        if buf.is_empty() || self.cached(offset, buf) {
            return Ok(());
        }
        if buf.len() >= DIRECT_LEN || self.planned(offset..end) {
            return self.read_large(offset, buf.len() as u64, &mut Out::Into(buf));
        }
        // A small read that missed: fetch a block from here (up to the suffix, which is held).
        let suffix_start = len - self.inner.suffix.len() as u64;
        let block_end = offset.saturating_add(BLOCK_LEN).max(end).min(suffix_start.max(end));
        let bytes = self.fetch(offset..block_end)?;
        buf.copy_from_slice(&bytes[..buf.len()]);
        let mut blocks = self.inner.blocks.lock().unwrap_or_else(PoisonError::into_inner);
        if blocks.len() >= MAX_BLOCKS {
            blocks.remove(0);
        }
        blocks.push((offset, bytes));
        Ok(())
    }

    /// Read a piece as long as `scratch` at a time: a large piece, or one the plan holds, hands
    /// on what was fetched ahead (and the suffix) as the chunks it arrived in, uncopied; a
    /// small one is read through `scratch`.
    fn read_each_at(
        &self,
        offset: u64,
        len: u64,
        scratch: &mut [u8],
        each: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let end = offset.checked_add(len).filter(|&e| e <= self.inner.len);
        let end = end.ok_or(std::io::ErrorKind::UnexpectedEof)?;
        if len == 0 {
            return Ok(());
        }
        if scratch.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "no room to read into",
            ));
        }
        // A piece at a time, as long as `scratch`, as reads into it would go: each piece
        // takes what the read-ahead holds by then.
        let mut at = offset;
        while at < end {
            let n = to_usize(end - at).min(scratch.len());
            if n >= DIRECT_LEN || self.planned(at..at + n as u64) {
                self.read_large(at, n as u64, &mut Out::Each { scratch, each })?;
            } else {
                self.read_exact_at(at, &mut scratch[..n])?;
                each(&scratch[..n])?;
            }
            at += n as u64;
        }
        Ok(())
    }
}

/// The body of `got`, read to its end (`object_store` resumes a body cut mid-way from the
/// byte where it stopped, pinned to the same ETag), counted.
async fn body(
    shown: &str,
    what: &str,
    got: GetResult,
    counters: &Counters,
) -> Result<Bytes, Error> {
    let len = got.range.end - got.range.start;
    let mut stream = got.into_stream();
    let mut out = Vec::with_capacity(usize::try_from(len).unwrap_or(0).min(DIRECT_LEN * 64));
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| Error::from_store(what, shown, e))?;
        counters.add_bytes(chunk.len());
        if out.len() as u64 + chunk.len() as u64 > len {
            return Err(Error::new(
                ErrorKind::Request,
                shown,
                format!("{what}: the server sent more than the {len} bytes asked"),
            ));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(out))
}

/// The body of `got` as it arrives, its chunks kept as they are (resumed as [`body`] is),
/// counted.
async fn body_chunks(shown: &str, got: GetResult, counters: &Counters) -> Result<Chunks, Error> {
    let len = got.range.end - got.range.start;
    let mut stream = got.into_stream();
    let (mut chunks, mut total) = (Vec::new(), 0u64);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| Error::from_store("reading ahead", shown, e))?;
        counters.add_bytes(chunk.len());
        total += chunk.len() as u64;
        if total > len {
            return Err(Error::new(
                ErrorKind::Request,
                shown,
                format!("reading ahead: the server sent more than the {len} bytes asked"),
            ));
        }
        chunks.push(chunk);
    }
    Ok(Chunks(chunks.into()))
}

/// The body of `got` written into `dest`, which is exactly as long as the range asked for
/// (resumed as [`body`] is), counted.
async fn body_into(
    shown: &str,
    what: &str,
    got: GetResult,
    dest: &mut [u8],
    counters: &Counters,
) -> Result<(), Error> {
    let want = dest.len();
    let short = |n: usize| {
        Error::new(
            ErrorKind::Request,
            shown,
            format!("{what}: the server sent {n} bytes, not the {want} asked"),
        )
    };
    if got.range.end - got.range.start != dest.len() as u64 {
        let n = usize::try_from(got.range.end - got.range.start).unwrap_or(usize::MAX);
        return Err(short(n));
    }
    let mut stream = got.into_stream();
    let mut at = 0usize;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| Error::from_store(what, shown, e))?;
        counters.add_bytes(chunk.len());
        let Some(place) = at.checked_add(chunk.len()).and_then(|end| dest.get_mut(at..end)) else {
            return Err(Error::new(
                ErrorKind::Request,
                shown,
                format!("{what}: the server sent more than the {want} bytes asked"),
            ));
        };
        place.copy_from_slice(&chunk);
        at += chunk.len();
    }
    if at != dest.len() {
        return Err(short(at));
    }
    Ok(())
}

fn changed(shown: &str) -> Error {
    Error::new(
        ErrorKind::Changed,
        shown,
        "reading: the object changed while it was read (its ETag or size moved); nothing read from it is used",
    )
}

/// Whether a failed suffix request was the server refusing the range (an empty object answers
/// one with 416), which a HEAD then explains.
fn range_refused(e: &object_store::Error) -> bool {
    let text = e.to_string();
    text.contains("416") || text.contains("Range Not Satisfiable")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_copy_any_range_across_their_seams() {
        let whole: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        // Seams at uneven places, an empty chunk among them.
        let cuts = [0, 7, 7, 300, 301, 999, 1000];
        let chunks =
            Chunks(cuts.windows(2).map(|w| Bytes::copy_from_slice(&whole[w[0]..w[1]])).collect());
        assert_eq!(chunks.len(), 1000);
        for (at, n) in [(0, 1000), (0, 7), (5, 10), (7, 294), (299, 3), (998, 2), (1000, 0)] {
            let mut dest = vec![0u8; n];
            assert!(chunks.copy_to(at as u64, &mut dest), "{at}+{n}");
            assert_eq!(dest, whole[at..at + n], "{at}+{n}");
        }
        // Past the end: refused.
        assert!(!chunks.copy_to(999, &mut [0u8; 2]));
        assert!(!chunks.copy_to(2000, &mut [0u8; 1]));
    }
}
