//! Work done ahead of its turn: jobs started in order as the engine's [`Budget`] admits them,
//! run on a pool, and taken in that order by one consumer. What a writer whose layout is
//! placed by seeking (zTensor 2) compresses its parts with, on the same budget and admission
//! rule as the pipeline's pieces.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_channel::Receiver;

use crate::Budget;

/// Results of jobs started ahead of their turn, taken in the order the jobs were given.
///
/// A feeder thread (of the caller's scope) walks the jobs in order, takes each one's cost from
/// the budget (waiting while it is used up), and starts it on the pool; no job waits for
/// another to finish, so there are no batches with a tail of idle workers. The consumer takes
/// the results one by one with [`Ahead::take`], which gives each one's cost back. Dropped (the
/// consumer is done, or failed), nothing more starts; what runs finishes and is dropped.
///
/// ```
/// let pool = std::sync::Arc::new(rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap());
/// std::thread::scope(|scope| {
///     let jobs = (0..100u64).map(|i| (i, 10));
///     let mut ahead = ztensor_par::Ahead::start(scope, pool, 50, jobs, |i| i * i);
///     for i in 0..100 {
///         assert_eq!(ahead.take(), Some(i * i));
///     }
///     assert_eq!(ahead.take(), None);
/// });
/// ```
pub struct Ahead<T> {
    /// Each result as it finishes: its place among the jobs, its cost, the result.
    done: Option<Receiver<(usize, u64, T)>>,
    /// Results that finished before their turn.
    early: BTreeMap<usize, (u64, T)>,
    /// The place of the next result to take.
    next: usize,
    gate: Arc<Gate>,
}

impl<T> std::fmt::Debug for Ahead<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ahead").field("next", &self.next).finish_non_exhaustive()
    }
}

/// The bytes in flight, and whether the consumer has gone.
struct Gate {
    budget: Budget,
    stopped: AtomicBool,
}

impl<T: Send> Ahead<T> {
    /// Starts `work` on each job of `jobs` (a job and its cost against `limit` bytes in flight,
    /// in the order the results are to be taken) on `pool`, fed by a thread of `scope`.
    ///
    /// The pool should be one the consumer does not run on: the consumer waits for results,
    /// and a consumer running on a pool's only (or every) worker would wait for itself.
    pub fn start<'s, 'e, J, I, F>(
        scope: &'s std::thread::Scope<'s, 'e>,
        pool: Arc<rayon::ThreadPool>,
        limit: u64,
        jobs: I,
        work: F,
    ) -> Ahead<T>
    where
        T: 's,
        J: Send + 's,
        I: Iterator<Item = (J, u64)> + Send + 's,
        F: Fn(J) -> T + Sync + Send + 's,
    {
        let gate = Arc::new(Gate { budget: Budget::new(limit), stopped: AtomicBool::new(false) });
        let (tx, rx) = crossbeam_channel::unbounded();
        let feeder = gate.clone();
        scope.spawn(move || {
            let work = &work;
            // Jobs are started from outside the pool (the feeder waits on the budget, no
            // worker does), first come first taken.
            pool.in_place_scope(|s| {
                for (place, (job, cost)) in jobs.enumerate() {
                    if !feeder.budget.take(cost, &feeder.stopped) {
                        return;
                    }
                    let tx = tx.clone();
                    s.spawn(move |_| {
                        // The consumer may have gone: nothing to tell it.
                        let _ = tx.send((place, cost, work(job)));
                    });
                }
            });
        });
        Ahead { done: Some(rx), early: BTreeMap::new(), next: 0, gate }
    }

    /// Nothing started ahead: every [`Ahead::take`] answers `None`.
    pub fn none() -> Ahead<T> {
        let gate = Arc::new(Gate { budget: Budget::new(0), stopped: AtomicBool::new(false) });
        Ahead { done: None, early: BTreeMap::new(), next: 0, gate }
    }

    /// The result of the next job, in the order given, once it is done; its cost is given back
    /// to the budget. `None` when there is none: every job taken, none started, or the feeder
    /// stopped (its jobs ran out where a job could not be made).
    pub fn take(&mut self) -> Option<T> {
        let done = self.done.as_ref()?;
        let (cost, result) = match self.early.remove(&self.next) {
            Some(early) => early,
            None => loop {
                let (place, cost, result) = done.recv().ok()?;
                if place == self.next {
                    break (cost, result);
                }
                self.early.insert(place, (cost, result));
            },
        };
        self.next += 1;
        self.gate.budget.give(cost);
        Some(result)
    }

    /// The most bytes that were in flight at once.
    pub fn peak(&self) -> u64 {
        self.gate.budget.peak()
    }
}

impl<T> Drop for Ahead<T> {
    fn drop(&mut self) {
        // Nothing more starts; what is running finishes and is dropped.
        self.gate.stopped.store(true, Ordering::Relaxed);
        self.gate.budget.wake();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(threads: usize) -> Arc<rayon::ThreadPool> {
        Arc::new(rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap())
    }

    #[test]
    fn results_come_in_order_within_the_budget() {
        std::thread::scope(|scope| {
            // Later jobs finish first: the order taken is still the order given.
            let jobs = (0..40u64).map(|i| (i, 100));
            let mut ahead = Ahead::start(scope, pool(4), 300, jobs, |i| {
                std::thread::sleep(std::time::Duration::from_micros(200 * (40 - i)));
                i
            });
            let taken: Vec<u64> = std::iter::from_fn(|| ahead.take()).collect();
            assert_eq!(taken, (0..40).collect::<Vec<_>>());
            assert!(ahead.peak() <= 300, "{} bytes in flight", ahead.peak());
            assert!(ahead.peak() >= 100);
        });
    }

    #[test]
    fn a_job_larger_than_the_budget_runs_alone() {
        std::thread::scope(|scope| {
            let jobs = [(1u8, 10u64), (2, 1000), (3, 10)].into_iter();
            let mut ahead = Ahead::start(scope, pool(2), 50, jobs, |j| j);
            assert_eq!((ahead.take(), ahead.take(), ahead.take()), (Some(1), Some(2), Some(3)));
            assert_eq!(ahead.peak(), 1000);
        });
    }

    #[test]
    fn dropped_it_starts_nothing_more() {
        let started = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|scope| {
            let jobs = (0..1000u32).map(|i| (i, 10));
            let mut ahead = Ahead::start(scope, pool(2), 20, jobs, |i| {
                started.fetch_add(1, Ordering::Relaxed);
                i
            });
            assert_eq!(ahead.take(), Some(0));
            drop(ahead);
        });
        // The budget holds two jobs at a time: at most a few more than the one taken started.
        let started = started.load(Ordering::Relaxed);
        assert!(started < 10, "{started} jobs started after the consumer went");
    }

    #[test]
    fn none_gives_nothing() {
        let mut ahead: Ahead<u8> = Ahead::none();
        assert_eq!(ahead.take(), None);
    }
}
