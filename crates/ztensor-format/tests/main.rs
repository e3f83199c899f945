//! Integration tests of ztensor-format.

// Test builders lay out small hand-made files; their lengths always fit.
#![allow(clippy::cast_possible_truncation)]

/// Builders for hand-made files.
mod support;

/// One accepting and one rejecting case per rule.
mod rules;

/// Manifests in the byte-level style of the public reference writers.
mod real_writers;

/// decode(encode(m)) == m for every version; the CBOR codec against an independent one.
mod roundtrip;

/// `spec/rules.md` agrees with `ErrorKind::ALL`.
mod spec_rules;
