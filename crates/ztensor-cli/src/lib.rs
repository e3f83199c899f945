//! The `ztensor` command-line tool's library part: the options every command reads with, and
//! what an error past a machine-fitted limit says.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

/// The options every command reads with: [`ztensor_io::machine_limits`] (the default limits,
/// the decode limit fitted to this machine's memory), strict rules when asked.
pub fn options(strict: bool) -> ztensor_format::Options {
    let mut options = ztensor_io::machine_options(strict);
    if let Some(&ratio) = MAX_EXPANSION.get() {
        options.limits.max_expansion = ratio;
    }
    options
}

static MAX_EXPANSION: std::sync::OnceLock<u64> = std::sync::OnceLock::new();

/// Sets [`Limits::max_expansion`](ztensor_format::Limits::max_expansion) for every later
/// [`options`] (the `--max-expansion` flag); the first call wins.
pub fn set_max_expansion(ratio: u64) {
    let _ = MAX_EXPANSION.set(ratio);
}

/// A note for an error that broke a resource limit which [`options`] lowered to fit this
/// machine (`too_many_objects`, `manifest_too_large`, `decoded_too_large`), saying so; empty for
/// any other error, or when the limit is the format's default.
pub fn limit_note(rule: Option<ztensor_format::ErrorKind>) -> String {
    use ztensor_format::{ErrorKind, Limits};
    let (fitted, default) = (ztensor_io::machine_limits(), Limits::default());
    let lowered = match rule {
        Some(ErrorKind::TooManyObjects) => fitted.max_objects < default.max_objects,
        Some(ErrorKind::ManifestTooLarge) => {
            fitted.max_manifest_values < default.max_manifest_values
        }
        Some(ErrorKind::DecodedTooLarge) => fitted.max_whole_len < default.max_whole_len,
        _ => false,
    };
    if !lowered {
        return String::new();
    }
    let room = [ztensor_io::physical_memory(), ztensor_io::address_space_cap()]
        .into_iter()
        .flatten()
        .min()
        .map_or(String::new(), |r| format!(" ({} MiB of memory or address space)", r >> 20));
    format!("\n  note: this limit is lowered to fit this machine{room}")
}
