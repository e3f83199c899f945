//! Reading raw source pieces: positioned ranges, hashed as they are read, and the units
//! (components cut into pieces) a window admits.

use std::io::Read;

use ztensor_format::{Digest, Error as FormatError, ErrorKind as Rule};
use ztensor_io::codec::Hasher;
use ztensor_io::{Error, ReadAt};

/// Positional reads of `len` bytes from `offset`, as a stream.
pub(super) struct RangeReader<'a, S> {
    pub(super) source: &'a S,
    pub(super) at: u64,
    pub(super) end: u64,
}

impl<S: ReadAt> Read for RangeReader<'_, S> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = usize::try_from((self.end - self.at).min(buf.len() as u64)).unwrap_or(buf.len());
        if n == 0 {
            return Ok(0);
        }
        self.source
            .read_exact_at(self.at, &mut buf[..n])
            .map_err(|e| std::io::Error::new(e.kind(), SourceRead(e)))?;
        self.at += n as u64;
        Ok(n)
    }
}

/// A failed read of the source, told apart from a corrupt zstd stream that the decoder reports
/// through the same `io::Error`: the first is an I/O failure, the second the data saying no.
#[derive(Debug)]
pub(super) struct SourceRead(std::io::Error);

impl std::fmt::Display for SourceRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for SourceRead {}

/// The error a source zstd stream failed with: an I/O error when the source could not be
/// read, `decode_failed` otherwise.
pub(super) fn stream_error(e: std::io::Error) -> Error {
    if e.get_ref().is_some_and(|inner| inner.is::<SourceRead>()) {
        Error::io("reading the source", None, e)
    } else {
        Error::from(FormatError::new(Rule::DecodeFailed, format!("source zstd: {e}")))
    }
}

/// A reader that hashes what passes through it.
pub(super) struct Hashing<R> {
    pub(super) inner: R,
    pub(super) hasher: Option<Hasher>,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(h) = self.hasher.as_mut() {
            h.update(&buf[..n]);
        }
        Ok(n)
    }
}

pub(super) type ZstdStream<'a, S> =
    zstd::stream::read::Decoder<'static, std::io::BufReader<Hashing<RangeReader<'a, S>>>>;

/// Checks a finished source digest.
pub(super) fn check_digest(
    expected: Option<&Digest>,
    hasher: Option<Hasher>,
) -> Option<FormatError> {
    let (expected, actual) = (expected?, hasher?.finish());
    (actual != *expected).then(|| source_mismatch(expected, actual))
}

/// The error of a source whose stored bytes do not have the digest its manifest states.
pub(super) fn source_mismatch(expected: &Digest, actual: impl std::fmt::Display) -> FormatError {
    FormatError::new(Rule::DigestMismatch, "source digest differs from the stored bytes")
        .expected_found(expected, actual)
}

/// One piece of one streamed item.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Unit {
    pub(super) item: usize,
    pub(super) start: u64,
    pub(super) len: u64,
    pub(super) index: usize,
    pub(super) count: usize,
}

/// How many pieces of `size` a component of `len` bytes is cut into (one when empty).
pub(crate) fn pieces_of(len: u64, size: u64) -> usize {
    usize::try_from(len.div_ceil(size.max(1)).max(1)).unwrap_or(usize::MAX)
}

/// Every piece of every streamed item of `plan`, in order, generated as they are reached.
pub(super) fn units(plan: &[Option<(u64, u64)>]) -> impl Iterator<Item = Unit> + '_ {
    plan.iter().enumerate().filter_map(|(i, p)| p.map(|p| (i, p))).flat_map(
        |(item, (len, size))| {
            let count = pieces_of(len, size);
            (0..count).map(move |index| {
                let start = index as u64 * size;
                Unit { item, start, len: len.saturating_sub(start).min(size), index, count }
            })
        },
    )
}
