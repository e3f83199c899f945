//! Verifying every object of an input on all threads, in the order its bytes lie: a disk is
//! read front to back, and a remote object's read-ahead follows the plan in a few large
//! requests instead of one per piece.

use std::sync::atomic::{AtomicUsize, Ordering};

use ztensor_format::DType;
use ztensor_io::{ReadAt, Reader, Result};

use crate::{ParOptions, Progress, RAW_PIECE};

/// Runs `check` on each of `order` (indexes) on every thread of `pool`, each thread taking the
/// next index in turn, so the objects are worked on about in that order (not split in blocks
/// per thread, as a parallel iterator splits them). Returns each index with its outcome.
fn in_order<T: Send>(
    pool: &rayon::ThreadPool,
    order: &[usize],
    check: impl Fn(usize) -> T + Sync,
) -> Vec<(usize, T)> {
    let next = AtomicUsize::new(0);
    pool.broadcast(|_| {
        let mut mine = Vec::new();
        while let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
            mine.push((i, check(i)));
        }
        mine
    })
    .into_iter()
    .flatten()
    .collect()
}

/// Verifies every object of any tensor source (safetensors, a sharded checkpoint,
/// TensorBuffers, zTensor) on `par.threads` threads: each is read, with every digest its format
/// keeps checked on the bytes read, and checked against the format's data rules. Returns each
/// object's outcome, in the source's order (one slot each: at a million objects a name apiece
/// would cost tens of megabytes; [`TensorSource::name`](ztensor_io::TensorSource::name) gives
/// the names of those that failed); an object this implementation cannot
/// decode has [`ErrorKind::Unsupported`](ztensor_io::ErrorKind::Unsupported), for the caller to
/// tell from damage. `progress` hears of each object's stored bytes as it is done.
///
/// Objects whose bytes the source can place ([`TensorSource::stored_ranges`](
/// ztensor_io::TensorSource::stored_ranges)) are read in the order they lie in each file, and
/// each file is told that order first ([`ztensor_io::will_read`]).
///
/// # Errors
/// Only if the threads cannot be started; per-object failures are in the result.
pub fn verify_source(
    source: &dyn ztensor_io::TensorSource,
    par: &ParOptions,
    progress: &dyn Progress,
) -> Result<Vec<Result<()>>> {
    let pool = par.pool()?;
    // Raw bytes with no digest and no data rule (anything but bool) are only read, in pieces:
    // a huge tensor does not cost its size in memory per thread.
    let plain = |i: usize| {
        source.info(i).is_some_and(|o| {
            o.unsupported.is_none()
                && o.components.iter().all(|c| c.dtype.known() != Some(DType::Bool))
        })
    };
    // Objects whose bytes the source can place are read source by source (the shards of a
    // checkpoint, by first appearance), each in the order its bytes lie; the others after.
    let mut sources: Vec<&dyn ReadAt> = Vec::new();
    let mut keys: Vec<(usize, u64)> = Vec::with_capacity(source.len());
    for i in 0..source.len() {
        keys.push(match source.stored_ranges(i) {
            Some(stored) => {
                let known = sources.iter().position(|s| std::ptr::addr_eq(*s, stored.source));
                let ordinal = known.unwrap_or_else(|| {
                    sources.push(stored.source);
                    sources.len() - 1
                });
                (ordinal, stored.ranges.iter().map(|r| r.start).min().unwrap_or(u64::MAX))
            }
            None => (usize::MAX, i as u64),
        });
    }
    drop(sources);
    let mut order: Vec<usize> = (0..source.len()).collect();
    order.sort_by_key(|&i| keys[i]);
    drop(keys);
    ztensor_io::will_read(source, order.iter().copied());
    let done = in_order(&pool, &order, |i| {
        let name = source.name(i).map_or_else(|| format!("#{i}"), |n| n.into_owned());
        let info = source.info(i);
        let outcome = match source.raw(i).filter(|_| plain(i)) {
            Some(range) => range.read_pieces(RAW_PIECE, |_| {}),
            // Read through with digests and data rules checked: in pieces where the source
            // reads in pieces (zTensor shards), whole otherwise.
            None => source.verify(i).map(drop),
        };
        let stored = info.as_ref().map_or(0, |o| o.stored_len());
        progress.bytes_in(stored);
        progress.bytes_done(stored);
        progress.object_done(&name);
        outcome
    });
    let mut verdicts: Vec<Result<()>> = (0..source.len()).map(|_| Ok(())).collect();
    for (i, outcome) in done {
        verdicts[i] = outcome;
    }
    Ok(verdicts)
}

/// Verifies every object on `par.threads` threads: every digest, and the data rules (the strict
/// ones too when the reader was opened strict). Returns each object's outcome, in manifest order.
/// `progress` hears of each object's stored bytes as it is done. Every object streams through
/// in pieces ([`ztensor_io::Object::verify`]): memory is a few pieces per thread, whatever an
/// object's size or layout. Objects are taken in the order their bytes lie in the file, which
/// is told that order first ([`ztensor_io::will_read`]): a remote object is read in a few large
/// requests, a disk front to back.
///
/// # Errors
/// Only if the threads cannot be started; per-object failures are in the result.
pub fn verify_all<'r, S: ReadAt>(
    reader: &'r Reader<S>,
    par: &ParOptions,
    progress: &dyn Progress,
) -> Result<Vec<(&'r str, Result<()>)>> {
    let pool = par.pool()?;
    // Objects may legally share a blob. A dense object's verdict depends only on its one
    // component and decoded length, so aliases of one already checked are not decoded again
    // (a 35 KB file of 16 aliases of a 1 GiB blob would otherwise decode 16 GiB).
    let first_alias = reader.manifest().aliases();
    // Every object streams through in pieces: digests on the stored bytes, the data rules
    // on the decoded ones as they pass, whatever its size or layout.
    let check = |object: &ztensor_io::Object<'_, S>| -> Result<()> { object.verify() };
    // One slot per object, filled in place: at a million objects, each per-object vector
    // costs megabytes.
    let mut verdicts: Vec<(&'r str, Result<()>)> =
        reader.objects().map(|object| (object.name(), Ok(()))).collect();
    let object = |i: usize| reader.object_at(i).expect("an index of the manifest");
    // Where each object's bytes start (its first component's): the order they are read in.
    let starts: Vec<u64> = reader
        .manifest()
        .objects()
        .map(|o| o.object().components.values().map(|c| c.offset).min().unwrap_or(u64::MAX))
        .collect();
    let mut order: Vec<usize> = (0..verdicts.len()).filter(|&i| first_alias[i] == i).collect();
    order.sort_by_key(|&i| (starts[i], i));
    drop(starts);
    ztensor_io::will_read(reader, order.iter().copied());
    let done = in_order(&pool, &order, |i| {
        let object = object(i);
        let verdict = check(&object);
        progress.bytes_in(object.stored_len());
        progress.bytes_done(object.stored_len());
        progress.object_done(object.name());
        verdict
    });
    for (i, verdict) in done {
        verdicts[i].1 = verdict;
    }
    // The alias of a sound object is sound; of a faulty one, checked itself so that its error
    // names it.
    for (i, &first) in first_alias.iter().enumerate() {
        if first != i {
            let object = object(i);
            if verdicts[first].1.is_err() {
                verdicts[i].1 = check(&object);
            }
            progress.bytes_in(object.stored_len());
            progress.bytes_done(object.stored_len());
            progress.object_done(object.name());
        }
    }
    Ok(verdicts)
}
