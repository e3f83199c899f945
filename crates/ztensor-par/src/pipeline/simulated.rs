//! The kernels' stand-ins for [`crate::simulate`]: per-byte latencies a worker spends asleep
//! instead of compressing and digesting, and the simulated output's size.

use std::time::Duration;

/// What a worker spends per input byte instead of running the kernels.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Simulation {
    /// Nanoseconds per input byte of compressing (zstd in the real run).
    pub compress_ns_per_byte: f64,
    /// Nanoseconds per input byte of digesting the output (the real digest runs over the
    /// compressed bytes; the caller folds the compression ratio into this figure).
    pub digest_ns_per_byte: f64,
}

/// Sleeps for `ns_per_byte × bytes`.
pub(crate) fn spend(ns_per_byte: f64, bytes: u64) {
    #[allow(clippy::cast_precision_loss, reason = "a latency; a relative error of 2^-53")]
    let ns = ns_per_byte * bytes as f64;
    if ns >= 1.0 {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "positive")]
        std::thread::sleep(Duration::from_nanos(ns as u64));
    }
}

/// The simulated compressed size of a piece: one byte per KiB, at least one.
pub(crate) fn output_len(input_len: u64) -> usize {
    usize::try_from(input_len / 1024).unwrap_or(usize::MAX).max(1)
}
