//! The calling thread's side: pieces placed in input order through the sequential writer's
//! streaming API, or their slots reserved for workers' positioned writes.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::{Receiver, Sender};
use ztensor_format::Component;
use ztensor_io::low_level::{BlobSlot, Streaming};
use ztensor_io::{Compression, Error, Result, Writer};

use crate::Progress;

use super::*;

/// Finished pieces waiting for a worker to write them at their slots. Every worker task takes
/// the waiting writes first, before it reads or compresses another piece, so bytes leave memory
/// as soon as their place is known instead of queueing behind reads.
pub(super) struct WriteQueue<'b> {
    pub(super) tx: Sender<(BlobSlot, Arc<Tracked<'b>>)>,
    pub(super) rx: Receiver<(BlobSlot, Arc<Tracked<'b>>)>,
    /// The first failure of a write, if any.
    pub(super) failed: Mutex<Option<Error>>,
    /// Whether a task that drains the queue is spawned and not yet started: one is enough, so
    /// a piece does not cost a task of its own (with hundreds of workers, every task is a trip
    /// through the pool's shared queues).
    pub(super) drain_pending: AtomicBool,
    /// Whether a worker is draining the queue now.
    pub(super) draining: AtomicBool,
}

impl WriteQueue<'_> {
    /// Writes every piece waiting now. A failure stops the run and is reported when it ends;
    /// after one, waiting pieces are dropped unwritten (their budget given back).
    ///
    /// One worker drains at a time: writes to one file serialize in the kernel anyway (the
    /// inode's lock), and hundreds of workers writing at once only spin on it. A worker that
    /// finds another draining goes on to its own work; the drainer looks again after it lets
    /// go, so a piece queued meanwhile is never left behind.
    pub(super) fn drain(&self, abort: &AtomicBool, budget: &Budget) {
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
pub(super) struct Writes<'r, 's, 'b> {
    pub(super) scope: &'r rayon::Scope<'s>,
    pub(super) queue: &'s WriteQueue<'b>,
    pub(super) abort: &'s AtomicBool,
    pub(super) budget: &'b Budget,
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

/// Messages that arrived before they were wanted, by key.
pub(super) struct Inbox<'r, 'b> {
    pub(super) rx: &'r Receiver<Message<'b>>,
    pub(super) waiting: HashMap<Key, Result<Payload<'b>>>,
    /// Where the time spent waiting is added.
    pub(super) waited: &'r AtomicU64,
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
pub(super) struct Written<'a> {
    pub(super) object: Template<'a>,
    pub(super) component: Component,
    /// The item whose hash chain still owes the component's digest, if any.
    pub(super) chain: Option<usize>,
    /// The item whose source chain still owes its verdict on the source digest, if any.
    pub(super) source: Option<usize>,
}

/// Objects whose bytes are written, added to the manifest in input order as their digests
/// arrive. Writing the next objects' bytes does not wait for a digest, so pieces that are
/// hashed are written (and their memory given back) while a long component is still hashing.
/// A repeated name is refused when the second object is added ([`Streaming::push_object`]).
pub(super) struct Pending<'a>(std::collections::VecDeque<Written<'a>>);

impl Pending<'_> {
    /// Adds the objects at the front whose digests are known; with `wait`, all of them.
    pub(super) fn settle<W: Write>(
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
pub(super) fn consume<'b: 's, 's, W: Write>(
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

pub(super) fn unreachable_payload<T>() -> Result<T> {
    // Keys say what a payload is; a mismatch would be a bug here, reported rather than panicking.
    Err(Error::failed("pipeline message out of place"))
}
