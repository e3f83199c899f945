//! Integration tests of ztensor-par.

// Test data is small; its lengths always fit.
#![allow(clippy::cast_possible_truncation)]

/// Parallel output equals sequential output, byte for byte, for any thread count.
mod identical;

/// Failing sources and sinks, memory budget, the parallel read side.
mod behaviour;

/// What is verified and read: seek tables, aliases, digests combined from pieces, the order
/// of reads.
mod verification;

/// The engine with simulated kernels, at worker counts beyond the machine's cores.
mod simulate;
