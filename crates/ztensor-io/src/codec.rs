//! Component codecs: bounded zstd decoding and encoding, and digests.

use std::io::Read;

use sha2::Digest as _;
use ztensor_format::{Digest, DigestAlgorithm, Error, ErrorKind};

/// Bytes reserved up front when decoding; output beyond this grows as it arrives, so a hostile
/// declared size never becomes an allocation by itself.
const INITIAL_RESERVE: u64 = 64 << 20;

/// Decodes a zstd stream (one or more frames). With `expected`, the output must be exactly that
/// long; without it, it may be at most `limit` bytes.
///
/// # Errors
/// [`ErrorKind::DecodeFailed`] for a corrupt stream, [`ErrorKind::DecodedSizeMismatch`] for
/// output of another length than `expected`, [`ErrorKind::DecodedTooLarge`] past `limit`.
pub fn zstd_decode(stored: &[u8], expected: Option<u64>, limit: u64) -> Result<Vec<u8>, Error> {
    let cap = expected.unwrap_or(limit).min(limit);
    if let Some(n) = expected.filter(|&n| n > limit) {
        return Err(Error::new(ErrorKind::DecodedTooLarge, "decoded size is above the limit")
            .expected_found(format!("<= {limit}"), n));
    }
    let mut out = Vec::new();
    let reserve = usize::try_from(cap.min(INITIAL_RESERVE)).unwrap_or(0);
    out.try_reserve_exact(reserve).map_err(|_| {
        Error::new(ErrorKind::DecodedTooLarge, "cannot reserve memory for the decoded data")
    })?;
    let decoder = zstd::stream::read::Decoder::with_buffer(stored)
        .map_err(|e| Error::new(ErrorKind::DecodeFailed, format!("zstd: {e}")))?;
    decoder
        .take(cap.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| Error::new(ErrorKind::DecodeFailed, format!("zstd: {e}")))?;
    let got = out.len() as u64;
    match expected {
        Some(n) if got != n => Err(Error::new(
            ErrorKind::DecodedSizeMismatch,
            if got > n {
                "zstd output is longer than expected"
            } else {
                "zstd output is shorter than expected"
            },
        )
        .expected_found(n, if got > n { format!("more than {n}") } else { got.to_string() })),
        None if got > cap => {
            Err(Error::new(ErrorKind::DecodedTooLarge, "zstd output passes the decoded size limit")
                .expected_found(format!("<= {cap}"), format!("more than {cap}")))
        }
        _ => Ok(out),
    }
}

/// Compresses `data` as one zstd frame at `level` (0 means zstd's default, 3), recording the
/// content size in the frame header.
///
/// # Errors
/// Only if zstd itself fails.
pub fn zstd_encode(data: &[u8], level: i32) -> std::io::Result<Vec<u8>> {
    let mut encoder = zstd::bulk::Compressor::new(level)?;
    encoder.include_contentsize(true)?;
    encoder.compress(data)
}

/// An incremental digest of one of the three algorithms this crate computes.
#[derive(Debug, Clone)]
pub enum Hasher {
    /// CRC-32C.
    Crc32c(u32),
    /// SHA-256.
    Sha256(sha2::Sha256),
    /// BLAKE3.
    Blake3(Box<blake3::Hasher>),
}

impl Hasher {
    /// A hasher for `algorithm`, or `None` for an algorithm this crate cannot compute.
    pub fn new(algorithm: &DigestAlgorithm) -> Option<Hasher> {
        match algorithm {
            DigestAlgorithm::Crc32c => Some(Hasher::Crc32c(0)),
            DigestAlgorithm::Sha256 => Some(Hasher::Sha256(sha2::Sha256::new())),
            DigestAlgorithm::Blake3 => Some(Hasher::Blake3(Box::new(blake3::Hasher::new()))),
            DigestAlgorithm::Unknown(_) => None,
        }
    }

    /// Feeds bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        match self {
            Hasher::Crc32c(c) => *c = crc32c::crc32c_append(*c, bytes),
            Hasher::Sha256(h) => h.update(bytes),
            Hasher::Blake3(h) => {
                h.update(bytes);
            }
        }
    }

    /// The digest of everything fed.
    pub fn finish(self) -> Digest {
        match self {
            Hasher::Crc32c(c) => Digest::Crc32c(c),
            Hasher::Sha256(h) => Digest::Sha256(h.finalize().into()),
            Hasher::Blake3(h) => Digest::Blake3(*h.finalize().as_bytes()),
        }
    }
}

/// The digest of `bytes` under `algorithm`, or `None` for an algorithm this crate cannot compute.
pub fn digest_of(algorithm: &DigestAlgorithm, bytes: &[u8]) -> Option<Digest> {
    let mut h = Hasher::new(algorithm)?;
    h.update(bytes);
    Some(h.finish())
}

/// The lowercase hex SHA-256 of `bytes` (the conformance dump's content hash).
pub fn sha256_hex(bytes: &[u8]) -> String {
    ztensor_format::to_hex(&sha2::Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zstd_sizes_are_exact() {
        let data = vec![7u8; 1000];
        let z = zstd_encode(&data, 3).unwrap();
        assert_eq!(zstd_decode(&z, Some(1000), 1 << 20).unwrap(), data);
        assert_eq!(zstd_decode(&z, None, 1 << 20).unwrap(), data);
        assert_eq!(
            zstd_decode(&z, Some(999), 1 << 20).unwrap_err().kind(),
            ErrorKind::DecodedSizeMismatch
        );
        assert_eq!(
            zstd_decode(&z, Some(1001), 1 << 20).unwrap_err().kind(),
            ErrorKind::DecodedSizeMismatch
        );
        assert_eq!(zstd_decode(&z, None, 999).unwrap_err().kind(), ErrorKind::DecodedTooLarge);
        assert_eq!(
            zstd_decode(&z, Some(1000), 999).unwrap_err().kind(),
            ErrorKind::DecodedTooLarge
        );
        assert_eq!(
            zstd_decode(&z[..z.len() - 1], Some(1000), 1 << 20).unwrap_err().kind(),
            ErrorKind::DecodeFailed
        );
        assert_eq!(
            zstd_decode(b"not zstd", None, 1 << 20).unwrap_err().kind(),
            ErrorKind::DecodeFailed
        );
        // A sequence of frames is one stream.
        let two =
            [zstd_encode(&data[..400], 1).unwrap(), zstd_encode(&data[400..], 1).unwrap()].concat();
        assert_eq!(zstd_decode(&two, Some(1000), 1 << 20).unwrap(), data);
    }

    #[test]
    fn known_digests() {
        // Check values from the algorithms' published test vectors.
        assert_eq!(
            digest_of(&DigestAlgorithm::Crc32c, b"123456789"),
            Some(Digest::Crc32c(0xe306_9283))
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let Some(Digest::Blake3(b)) = digest_of(&DigestAlgorithm::Blake3, b"") else {
            panic!("blake3")
        };
        assert_eq!(
            ztensor_format::to_hex(&b),
            "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
        );
        assert_eq!(digest_of(&DigestAlgorithm::Unknown("xxh3".into()), b""), None);
    }
}
