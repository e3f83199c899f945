//! What the requests of an object or upload cost, counted as they are made.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// What a remote object or upload has cost so far: HTTP requests sent (retries included) and
/// body bytes received.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Transfer {
    /// HTTP requests sent, every retry and resumption counted.
    pub requests: u64,
    /// Bytes of object data received.
    pub bytes: u64,
}

/// The shared counters behind [`Transfer`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) requests: AtomicU64,
    bytes: AtomicU64,
}

impl Counters {
    pub(crate) fn add_bytes(&self, n: usize) {
        self.bytes.fetch_add(n as u64, Ordering::Relaxed);
    }

    pub(crate) fn get(&self) -> Transfer {
        Transfer {
            requests: self.requests.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
        }
    }
}

/// Every object this process opened for reading, by URL, with its counters: what
/// [`transfers`] sums.
static OPENED: Mutex<Vec<(String, Arc<Counters>)>> = Mutex::new(Vec::new());

/// Counts the object at `url` (its reads, through `counters`) in [`transfers`].
pub(crate) fn opened(url: &str, counters: &Arc<Counters>) {
    OPENED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((url.to_owned(), Arc::clone(counters)));
}

/// What reading objects has cost this process so far, by URL (an object opened more than once
/// summed): every object opened, those a reader opened itself (the shards beside an index or a
/// zTensor 2 root) included.
pub fn transfers() -> Vec<(String, Transfer)> {
    let opened = OPENED.lock().unwrap_or_else(PoisonError::into_inner);
    let mut by_url: std::collections::BTreeMap<&str, Transfer> = std::collections::BTreeMap::new();
    for (url, counters) in opened.iter() {
        let t = counters.get();
        let sum = by_url.entry(url).or_default();
        sum.requests += t.requests;
        sum.bytes += t.bytes;
    }
    by_url.into_iter().map(|(url, t)| (url.to_owned(), t)).collect()
}
