//! Integration tests of ztensor-tensorbuffers.

// Test files are small; their lengths always fit.
#![allow(clippy::cast_possible_truncation)]

/// The shared sample, byte-exact writing, round trips through zTensor.
mod sample;

/// Every rejection the facts document lists.
mod reject;
