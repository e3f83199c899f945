//! The dispatcher's side: admitting pieces under the budget and preparing each (read,
//! decode, check, compress, digest) on the pool.

use std::borrow::Cow;
use std::io::Read;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_channel::Sender;
use ztensor_format::{Error as FormatError, ErrorKind as Rule};
use ztensor_io::codec::{Hasher, zstd_encode};
use ztensor_io::{Compression, Error, ReadAt, Result, WriteOptions};

use crate::Progress;

use super::*;

/// What a worker starts a piece from.
pub(super) enum Job<'b> {
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
pub(super) fn produce<'a, 's, 'b, S: ReadAt>(
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
pub(super) fn read_piece<'a, S: ReadAt>(
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

pub(super) fn no_source() -> Error {
    Error::failed("a file input without a source")
}

/// Compresses one piece and, when it is a whole component, digests it. A raw piece is written
/// as it is (the same bytes a source chain may be hashing); a compressed one is tracked with
/// `out_cost` of the budget.
pub(super) fn prepare<'b>(
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
            super::simulated::spend(s.compress_ns_per_byte, input_len);
            let out = super::simulated::output_len(input_len);
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
