//! This project's verdicts on a case: its strict and lenient readers, and what the specs leave
//! to each reader; and its lenient reader as an implementation called in this process.

use std::path::Path;

use anyhow::{Context as _, Result};
use serde_json::Value as Json;
use ztensor_format::{DigestAlgorithm, Encoding, Version};

use super::mutate::manifest_span;
pub use super::verdicts::Ours;
use super::verdicts::object_errors;
use super::zt2;
use crate::implementation::Verdict;

/// This project's readers on the file at `path` (holding `bytes`); for a zTensor 2 file (one
/// that starts with its magic), its zTensor 2 reader (see [`zt2`]).
///
/// # Errors
/// When the file cannot be read at all.
pub fn ours(path: &Path, bytes: &[u8]) -> Result<Ours> {
    if zt2::is_zt2(bytes) {
        return zt2::ours(path, bytes);
    }
    // The lenient dump exactly as `ztensor-conformance dump FILE` prints it.
    let lenient = ztensor_dump::file(path)?;
    let reader = ztensor_io::Reader::new(bytes, &ztensor_dump::options()).ok();
    judged(lenient, reader.as_ref(), bytes)
}

/// [`Ours`] from the lenient dump, the lenient reader (when it opened) and the bytes: the
/// strict verdict is taken without a dump of its own (an accepted file's is the lenient one:
/// the same content), and what the specs leave open is looked for.
fn judged(
    lenient: (Json, bool),
    reader: Option<&ztensor_io::Reader<&[u8]>>,
    bytes: &[u8],
) -> Result<Ours> {
    let strict = match crate::strict_rejection(bytes)? {
        Some(rejected) => (rejected, false),
        None => (lenient.0.clone(), true),
    };
    let mut latitude = reader.and_then(|r| latitude(r, bytes));
    if latitude.is_none() && lenient.1 != strict.1 {
        latitude = Some("a rule only strict readers enforce".to_owned());
    }
    // An object this reader cannot read (an unknown type or layout, a digest that does not
    // match) leaves the file readable here; another reader may refuse the whole file.
    if latitude.is_none() && object_errors(&lenient.0) {
        latitude = Some("an object this reader reports as unreadable".to_owned());
    }
    Ok(Ours { lenient, strict, latitude, loose: Vec::new() })
}

/// What a file readable here (`reader`, over its `bytes`) has that the specs leave to each
/// reader (the corpus's implementation-defined kinds).
pub(super) fn latitude(reader: &ztensor_io::Reader<&[u8]>, bytes: &[u8]) -> Option<String> {
    let version = reader.version();
    let mut spans: Vec<(u64, u64)> = Vec::new();
    for object in reader.objects() {
        for (_, c) in &object.model().components {
            if let Some(d) = &c.digest
                && d.algorithm() != DigestAlgorithm::Sha256
            {
                return Some(format!(
                    "a {:?} digest (its algorithm or case is open)",
                    d.algorithm()
                ));
            }
            if version == Version::V1_2
                && c.encoding == Encoding::Zstd
                && c.uncompressed_length.is_none()
            {
                return Some("zstd without uncompressed_length".to_owned());
            }
            if c.length > 0 {
                spans.push((c.offset, c.length));
            }
        }
    }
    spans.sort_unstable();
    if spans.windows(2).any(|w| w[0].0 == w[1].0) {
        return Some("two objects sharing a blob".to_owned());
    }
    // Padding: the bytes after the header and before the manifest that no blob covers.
    let (_, manifest_at, _) = manifest_span(bytes).ok()?;
    let mut at = 8u64;
    for (offset, len) in spans.iter().copied().chain([(manifest_at as u64, 0)]) {
        let gap = bytes.get(usize::try_from(at).ok()?..usize::try_from(offset).ok()?);
        if gap.is_some_and(|g| g.iter().any(|&b| b != 0)) {
            return Some("nonzero padding".to_owned());
        }
        at = at.max(offset + len);
    }
    None
}

/// An implementation read in this process, through a call instead of the protocol: for Rust
/// implementations, and for the coverage-guided `differential` fuzz target.
pub trait InProcess {
    /// Its verdict on a file of `bytes`.
    fn read(&mut self, bytes: &[u8]) -> Verdict;
}

/// This project's lenient reader in the dump protocol, in this process, reading through a
/// source that gives at most `chunk` bytes a read (`None`: the bytes as one slice): the dump
/// `ztensor-conformance dump` prints for a zTensor file (0.1, 1.x or 2), reached another way.
#[derive(Debug, Clone, Copy)]
pub struct OursInProcess {
    /// The most bytes one read of the source gives.
    pub chunk: Option<usize>,
}

impl InProcess for OursInProcess {
    fn read(&mut self, bytes: &[u8]) -> Verdict {
        let opened = match (self.chunk, zt2::is_zt2(bytes)) {
            (None, false) => lenient_of(bytes),
            (Some(n), false) => lenient_of(ztensor_io::Chunked::new(bytes, n)),
            (None, true) => zt2::lenient_of(bytes),
            (Some(n), true) => zt2::lenient_of(ztensor_io::Chunked::new(bytes, n)),
        };
        match opened {
            Some((dump, true)) => Verdict::Accepted(dump),
            Some((dump, false)) => Verdict::Rejected(dump),
            None => Verdict::Crash("the reader failed with an error that names no rule".to_owned()),
        }
    }
}

/// The lenient dump of a zTensor (0.1/1.x) file read from `source`, as `ztensor_dump::file`
/// gives it; `None` for an error that is not a verdict.
fn lenient_of<S: ztensor_io::ReadAt>(source: S) -> Option<(Json, bool)> {
    match ztensor_io::Reader::new(source, &ztensor_dump::options()) {
        Ok(reader) => Some((ztensor_dump::accepted(&reader), true)),
        Err(e) => {
            e.format_error().map(|f| (ztensor_dump::rejected(f.kind().id(), &f.to_string()), false))
        }
    }
}

/// This project's verdicts on `bytes`, in this process (no file): as [`ours`] for a zTensor
/// file (a zTensor 2 file's shards are not looked for: it has no directory).
///
/// # Errors
/// When a reader fails with an error that is not a verdict (a bug, for bytes in memory).
pub fn ours_in_process(bytes: &[u8]) -> Result<Ours> {
    if zt2::is_zt2(bytes) {
        return zt2::ours_in_process(bytes);
    }
    match ztensor_io::Reader::new(bytes, &ztensor_dump::options()) {
        Ok(reader) => judged((ztensor_dump::accepted(&reader), true), Some(&reader), bytes),
        Err(e) => {
            let f = e.format_error().context("the lenient reader gave no verdict")?;
            judged((ztensor_dump::rejected(f.kind().id(), &f.to_string()), false), None, bytes)
        }
    }
}
