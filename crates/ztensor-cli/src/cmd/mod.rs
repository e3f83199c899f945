//! The subcommands.

pub mod convert;
pub mod diff;
pub mod edit;
pub mod info;
pub mod look;
pub mod manual;
mod outdir;
pub mod plan;
mod replace;
pub mod stdin;
pub mod stdout;
pub mod tb;
pub mod text;
pub mod verify;

use std::path::Path;

use anyhow::Result;

/// What kind of file an input is: the registry's kinds.
pub use ztensor_registry::Kind;

/// Whether `a` and `b` are the same file or object ([`ztensor_registry::same_file`]).
pub fn same_file(a: &Path, b: &Path) -> bool {
    ztensor_registry::same_file(a, b)
}

/// Refuses to write `output` over `input` (a request that would replace the user's file with
/// something else: another format, an extracted array), by the registry's rule
/// ([`ztensor_registry::not_over`]).
pub fn not_over(input: &Path, output: &Path, what: &str) -> Result<()> {
    ztensor_registry::not_over(input, output, what).map_err(|e| anyhow::anyhow!("{e}"))
}

/// Recognises a file by content, through the format registry ([`ztensor_registry::detect`]):
/// a file it cannot serve (a directory, a format not read, one that cannot be opened) is a
/// failed request, status 2.
pub fn detect(path: &Path) -> Result<Kind> {
    if let Some(url) = crate::remote::url_of(path) {
        return crate::remote::detect(url);
    }
    crate::told::tell(path).map_err(|e| anyhow::anyhow!("{e}"))
}

/// The decoded bytes of a tensor as its source describes it (its stored bytes where the
/// decoded length is not known without decoding): what progress counts for it.
pub fn decoded_of(o: &ztensor_io::ObjectInfo<'_>) -> u64 {
    o.components.iter().map(|c| c.decoded_len.unwrap_or(c.stored_len)).sum()
}
