//! The `ztensor` command-line tool's library part: the conformance dump, shared with the
//! conformance tooling so that golden dumps and the tool can never disagree.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod dump;

/// The options every command reads with: [`ztensor_io::machine_limits`] (the default limits,
/// the decode limit fitted to this machine's memory), strict rules when asked.
pub fn options(strict: bool) -> ztensor_format::Options {
    let mut options = ztensor_format::Options::default();
    options.limits = ztensor_io::machine_limits();
    options.strict = strict;
    options
}
