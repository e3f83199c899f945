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

mod ahead;
mod body;

use ahead::{Ahead, PLANNED};
use body::{Out, Pending, body, body_chunks, body_into, changed, range_refused};

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

#[cfg(test)]
mod tests {
    use super::body::Chunks;
    use super::*;

    #[test]
    fn a_refused_range_is_told_by_its_status_not_by_digits_elsewhere() {
        let said = |text: &str| object_store::Error::Generic {
            store: "S3",
            source: text.to_owned().into(),
        };
        // A refusal whose endpoint port and time taken hold "416": not a refused range.
        let denied = "Error performing GET http://127.0.0.1:41623/b/k.zt in 3.416ms - Server \
                      returned non-2xx status code: 403 Forbidden: <Error><Code>AccessDenied";
        assert!(!range_refused(&said(denied)));
        let refused = "Error performing GET http://127.0.0.1:9000/b/k.zt in 2ms - Server \
                       returned non-2xx status code: 416 Range Not Satisfiable: ";
        assert!(range_refused(&said(refused)));
    }

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
