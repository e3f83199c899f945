//! Reading members of a zip archive: stored or deflated, to exactly their declared size, with
//! their CRC-32 checked (the readers that need it, behind the `numpy` and `torch` features).

use std::io::Read;

use ztensor_io::ReadAt;

use super::{Member, Method, malformed};
use crate::error::{Error, ErrorKind, Result};

/// Bytes `at..end` of a source, read in order.
pub(crate) struct At<'a, S: ?Sized> {
    pub(crate) source: &'a S,
    pub(crate) at: u64,
    pub(crate) end: u64,
}

impl<S: ReadAt + ?Sized> Read for At<'_, S> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = usize::try_from(self.end.saturating_sub(self.at))
            .unwrap_or(usize::MAX)
            .min(buf.len())
            .min(8 << 20);
        self.source.read_exact_at(self.at, &mut buf[..n])?;
        self.at += n as u64;
        Ok(n)
    }
}

/// A member's CRC-32 differs from its bytes': the payload of the I/O error that says so, so
/// that callers can tell it from other failures by type.
#[derive(Debug)]
pub(crate) struct CrcMismatch(pub(crate) String);

impl std::fmt::Display for CrcMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "member {:?}: CRC-32 mismatch", self.0)
    }
}

impl std::error::Error for CrcMismatch {}

/// Whether `e` says a member's CRC-32 did not match.
pub(crate) fn is_crc_mismatch(e: &std::io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<CrcMismatch>())
}

enum Stream<'a, S: ?Sized> {
    Stored(At<'a, S>),
    Deflated(Box<flate2::read::DeflateDecoder<At<'a, S>>>),
}

/// A member's bytes as a stream, inflated when deflated: it fails as soon as more bytes come
/// than the member declares, and at its end when fewer came or the CRC-32 differs. Nothing is
/// held but the inflater's window.
pub(crate) struct MemberReader<'a, S: ?Sized> {
    stream: Stream<'a, S>,
    member: &'a Member,
    produced: u64,
    crc: flate2::Crc,
}

impl<S: ReadAt + ?Sized> Read for MemberReader<'_, S> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let invalid = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidData, m);
        let n = match &mut self.stream {
            Stream::Stored(r) => r.read(buf),
            Stream::Deflated(r) => r.read(buf),
        }
        .map_err(|e| invalid(format!("member {:?}: {e}", self.member.name)))?;
        if n > 0 {
            self.produced += n as u64;
            if self.produced > self.member.size {
                return Err(invalid(format!(
                    "member {:?} holds more than the {} bytes it declares",
                    self.member.name, self.member.size
                )));
            }
            self.crc.update(&buf[..n]);
        } else if !buf.is_empty() {
            if self.produced != self.member.size {
                return Err(invalid(format!(
                    "member {:?} holds {} bytes, not the {} it declares",
                    self.member.name, self.produced, self.member.size
                )));
            }
            if self.crc.sum() != self.member.crc32 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    CrcMismatch(self.member.name.clone()),
                ));
            }
        }
        Ok(n)
    }
}

impl Member {
    /// The member's bytes, inflated when deflated, refused when they would exceed `limit` or
    /// differ from the declared size or CRC-32.
    pub(crate) fn bytes<S: ReadAt + ?Sized>(&self, source: &S, limit: u64) -> Result<Vec<u8>> {
        self.check_limit(limit)?;
        // Exactly the declared size, asked for fallibly; the stream fails past it.
        let mut out = ztensor_io::try_with_capacity(self.size, &format!("member {:?}", self.name))
            .map_err(|e| Error::new(ErrorKind::Io, e.to_string()))?;
        self.reader(source).read_to_end(&mut out).map_err(|e| malformed(e.to_string()))?;
        Ok(out)
    }

    /// The member's bytes as a stream (see [`MemberReader`]).
    pub(crate) fn reader<'a, S: ReadAt + ?Sized>(&'a self, source: &'a S) -> MemberReader<'a, S> {
        let stored = At { source, at: self.offset, end: self.offset + self.compressed };
        let stream = match self.method {
            Method::Stored => Stream::Stored(stored),
            Method::Deflated => {
                Stream::Deflated(Box::new(flate2::read::DeflateDecoder::new(stored)))
            }
        };
        MemberReader { stream, member: self, produced: 0, crc: flate2::Crc::new() }
    }

    /// Refuses a member that declares more than `limit` bytes.
    pub(crate) fn check_limit(&self, limit: u64) -> Result<()> {
        if self.size > limit {
            return Err(Error::new(
                ErrorKind::Malformed,
                format!(
                    "member {:?} declares {} bytes, over the {limit}-byte limit",
                    self.name, self.size
                ),
            ));
        }
        Ok(())
    }
}
