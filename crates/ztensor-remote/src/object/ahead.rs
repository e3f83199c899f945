//! Read-ahead: ranges fetched before they are read, for readers in order (streams) and for
//! readers that said what they will read (a plan).

use super::*;

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
pub(super) struct Ahead {
    /// Ranges fetched or being fetched, by start, none overlapping another and none crossing a
    /// multiple of [`RemoteOptions::range_len`]: a stream's are aligned to it and that long (the
    /// last may be shorter).
    pub(super) ranges: std::collections::BTreeMap<u64, Fetched>,
    pub(super) streams: Vec<Stream>,
    /// Counts reads, to tell the least recently used stream.
    pub(super) tick: u64,
    /// What the reader said it will read and was not fetched ahead yet, in its order: the
    /// front's start is the next byte to fetch.
    pub(super) plan: std::collections::VecDeque<Range<u64>>,
}

/// A range fetched ahead.
pub(super) struct Fetched {
    pub(super) len: u64,
    pub(super) bytes: Pending,
    /// The stream that asked for it ([`PLANNED`]: the plan).
    pub(super) by: u64,
    /// How many of its bytes reads have taken: once all it was fetched for, it is let go.
    pub(super) used: u64,
    /// How many of its bytes it was fetched for: all of a stream's; those of the plan's
    /// ranges it covers (not the gaps between them).
    pub(super) need: u64,
}

/// The `by` of ranges fetched for a plan (streams are numbered from 1).
pub(super) const PLANNED: u64 = 0;
/// The most ranges held for a plan at once (ranges of small tensors are small).
pub(super) const MAX_PLANNED: usize = 256;
/// A plan's ranges that lie this close after one another are fetched together (the padding
/// between a file's tensors is fetched with them).
pub(super) const PLAN_GAP: u64 = 4 << 10;
/// How far into the plan a read is looked for, to learn that it read bytes of the plan
/// before they were fetched ahead (so they are not fetched again).
pub(super) const PLAN_SEARCH: usize = 64;

/// Reads in order.
#[derive(Debug, Clone, Copy)]
pub(super) struct Stream {
    pub(super) id: u64,
    /// Where its first read started.
    pub(super) start: u64,
    /// The end of its furthest read.
    pub(super) frontier: u64,
    /// How many ranges to keep fetched ahead of it.
    pub(super) depth: u64,
    /// The read it last had.
    pub(super) used: u64,
}

/// The most streams of in-order reads followed at once.
pub(super) const STREAMS: usize = 4;

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
    pub(super) fn planning(&self) -> bool {
        !self.plan.is_empty() || self.ranges.values().any(|f| f.by == PLANNED)
    }

    /// Whether `range` is something the plan fetched or will fetch.
    pub(super) fn in_plan(&self, range: &Range<u64>) -> bool {
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
    pub(super) fn passed(&mut self, range: &Range<u64>) {
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
    pub(super) fn enter(
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
    /// A large read (tensor data) of `len` bytes at `offset`: what a cached block holds at its
    /// start and the suffix at its end are taken from there, the rest fetched in parallel
    /// ranged GETs ([`Self::read_through`]), uncached, so a convert fetches each byte of its
    /// input about once. The bytes go to `out` in order.
    pub(super) fn read_large(
        &self,
        offset: u64,
        len: u64,
        out: &mut Out<'_>,
    ) -> std::io::Result<()> {
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
    pub(super) fn fetch_out(
        &self,
        range: Range<u64>,
        base: u64,
        out: &mut Out<'_>,
    ) -> std::io::Result<()> {
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
    pub(super) fn read_through(
        &self,
        range: Range<u64>,
        base: u64,
        out: &mut Out<'_>,
    ) -> std::io::Result<()> {
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
    pub(super) fn fetch_planned(&self, ahead: &mut Ahead, step: u64, budget: u64) {
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
    pub(super) fn fetch_ahead(&self, stream: u64, step: u64, budget: u64) {
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
    pub(super) fn planned(&self, range: Range<u64>) -> bool {
        let ahead = self.inner.ahead.lock().unwrap_or_else(PoisonError::into_inner);
        ahead.planning() && ahead.in_plan(&range)
    }

    /// Starts fetching `range` on the runtime, to be had from the handle when it is needed.
    pub(super) fn fetch_one_ahead(&self, range: Range<u64>) -> Pending {
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
