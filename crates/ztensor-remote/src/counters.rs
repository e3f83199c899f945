//! What the requests of an object or upload cost, counted as they are made.

use std::sync::atomic::{AtomicU64, Ordering};

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
