//! Integration tests of ztensor-format.

/// Builders for hand-made files.
mod support;

/// One accepting and one rejecting case per rule.
mod rules;
