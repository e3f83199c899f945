//! The memory budget pieces are admitted under, the kernels and the time spent waiting.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};

use ztensor_io::WriteOptions;

/// What compresses and digests the pieces: the real kernels, or per-byte latencies standing in
/// for them ([`crate::simulate`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) enum Kernels {
    #[default]
    Real,
    Simulated(super::simulated::Simulation),
}

impl Kernels {
    /// Spends what digesting the output of `input_len` input bytes would, when simulated.
    pub(super) fn digest_latency(&self, input_len: u64) {
        if let Kernels::Simulated(s) = self {
            super::simulated::spend(s.digest_ns_per_byte, input_len);
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

pub(super) fn add_since(counter: &AtomicU64, start: std::time::Instant) {
    let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    counter.fetch_add(ns, Ordering::Relaxed);
}

/// A count of bytes in flight, with backpressure: taking blocks while the budget is used,
/// except that one piece is always admitted when nothing is in flight (so a piece larger than
/// the budget still makes progress, alone). The engine's, and zTensor 2's writer's for the
/// parts it compresses ahead: one admission rule for every target.
///
/// ```
/// use std::sync::atomic::AtomicBool;
/// use ztensor_par::Budget;
///
/// let budget = Budget::new(10);
/// let go = AtomicBool::new(false);
/// assert!(budget.take(25, &go)); // alone, a piece larger than the budget is admitted
/// budget.give(25);
/// assert!(budget.take(4, &go) && budget.take(6, &go));
/// assert_eq!(budget.peak(), 25);
/// ```
pub struct Budget {
    pub(super) limit: u64,
    pub(super) used: Mutex<u64>,
    pub(super) freed: Condvar,
    /// How many are waiting in `take`; changed and read only with `used` locked, so a `give`
    /// that sees none has no one to wake (a wake is a system call, and pieces are given back
    /// by the million when objects are small).
    pub(super) waiting: std::sync::atomic::AtomicUsize,
    pub(super) peak: Mutex<u64>,
    /// Where the engine's ends record how long they waited.
    pub(crate) waits: Waits,
}

impl std::fmt::Debug for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Budget").field("limit", &self.limit).finish_non_exhaustive()
    }
}

impl Budget {
    /// A budget of `limit` bytes in flight.
    pub fn new(limit: u64) -> Budget {
        Budget {
            limit,
            used: Mutex::new(0),
            freed: Condvar::new(),
            waiting: std::sync::atomic::AtomicUsize::new(0),
            peak: Mutex::new(0),
            waits: Waits::default(),
        }
    }

    /// Admits `n` bytes, waiting for room; `false` (nothing admitted) once `abort` is set
    /// (whoever sets it calls [`Budget::wake`]).
    pub fn take(&self, n: u64, abort: &AtomicBool) -> bool {
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

    /// Gives `n` admitted bytes back.
    pub fn give(&self, n: u64) {
        let mut used = self.used.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *used = used.saturating_sub(n);
        if self.waiting.load(Ordering::Relaxed) > 0 {
            self.freed.notify_all();
        }
    }

    /// Wakes every waiting [`Budget::take`], to look at its `abort` again.
    pub fn wake(&self) {
        let _guard = self.used.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        self.freed.notify_all();
    }

    /// The most bytes ever in flight at once.
    pub fn peak(&self) -> u64 {
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
