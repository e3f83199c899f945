//! The `ztensor` command-line tool's library part: the conformance dump, shared with the
//! conformance tooling so that golden dumps and the tool can never disagree.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod dump;
