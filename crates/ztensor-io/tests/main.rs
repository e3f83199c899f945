//! Integration tests of ztensor-io.

// Test data is small; its lengths always fit.
#![allow(clippy::cast_possible_truncation)]

/// Object and component handles.
mod handles;

/// Generated objects written and read back, through every kind of source.
mod roundtrip;

/// Damaged and hostile files.
mod hostile;

/// v0.1 specifics: big-endian data and single-blob sparse tensors.
mod v0_1;

/// Atomic publication.
mod publish;

/// Append, cut at every byte, recovery and repair.
mod append;

/// Conversion between versions, and removal.
mod convert;

/// Sparse objects streamed against whole reads.
mod streamed;

/// Blobs that several objects share: copied once, what cannot stay shared counted first.
mod shared;
