//! Integration tests of sharded checkpoints.

// Test data is small; its values are meant to wrap.
#![allow(clippy::cast_possible_truncation)]

mod sharded;
