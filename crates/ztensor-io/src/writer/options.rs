//! What to write: per-component options, and the parts of a component or object.

use ztensor_format::{Component, DType, DigestAlgorithm, LogicalType};

/// How a component's bytes are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// As they are.
    #[default]
    Raw,
    /// zstd at a level (1..=22; 0 means zstd's default, 3).
    Zstd(i32),
}

/// Per-component write options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteOptions {
    /// Raw or zstd.
    pub compression: Compression,
    /// A digest of the stored bytes to record, if any.
    pub digest: Option<DigestAlgorithm>,
    /// zstd components larger than this are compressed as independent frames of this many input
    /// bytes, followed by a seek table, so they can be compressed and decompressed in parallel.
    /// `None` writes one frame. Default [`DEFAULT_ZSTD_CHUNK`](crate::codec::DEFAULT_ZSTD_CHUNK).
    pub chunk_size: Option<u64>,
    /// With zstd: store a component raw when its zstd encoding would be no smaller than its
    /// decoded bytes (a small or incompressible tensor: zstd's frame header alone is 9 bytes
    /// or more). Decided for components of one frame (no larger than `chunk_size`), whose
    /// whole encoding is known before any of it is written; the frames of a larger component
    /// are written as they are made, so it stays zstd (an incompressible frame grows by a few
    /// bytes in 128 KiB). The same decision in the sequential writer, the streaming writer and
    /// the parallel engine, so their output stays byte-identical. Off by default: the
    /// encoding asked for is the encoding written.
    pub raw_if_not_smaller: bool,
}

impl Default for WriteOptions {
    fn default() -> WriteOptions {
        WriteOptions {
            compression: Compression::Raw,
            digest: None,
            chunk_size: Some(crate::codec::DEFAULT_ZSTD_CHUNK),
            raw_if_not_smaller: false,
        }
    }
}

impl WriteOptions {
    /// Raw, no digest.
    pub fn raw() -> WriteOptions {
        WriteOptions::default()
    }

    /// zstd at `level`, no digest.
    pub fn zstd(level: i32) -> WriteOptions {
        WriteOptions { compression: Compression::Zstd(level), ..WriteOptions::default() }
    }

    /// The same options with a digest.
    #[must_use]
    pub fn with_digest(mut self, algorithm: DigestAlgorithm) -> WriteOptions {
        self.digest = Some(algorithm);
        self
    }

    /// The same options storing raw what zstd would not make smaller
    /// ([`raw_if_not_smaller`](WriteOptions::raw_if_not_smaller)).
    #[must_use]
    pub fn raw_if_not_smaller(mut self) -> WriteOptions {
        self.raw_if_not_smaller = true;
        self
    }

    /// Whether a component of `decoded` bytes that zstd encoded to `stored` bytes is stored
    /// raw instead: with [`raw_if_not_smaller`](WriteOptions::raw_if_not_smaller), when it is
    /// one frame and the encoding is no smaller.
    pub fn stores_raw(&self, decoded: u64, stored: u64) -> bool {
        self.raw_if_not_smaller
            && matches!(self.compression, Compression::Zstd(_))
            && stored >= decoded
            && self.chunk_size.is_none_or(|chunk| decoded <= chunk)
    }
}

/// One component to write: its role, types and decoded little-endian bytes.
#[derive(Debug, Clone, Copy)]
pub struct ComponentSpec<'a> {
    /// The role (`data`, `values`, `scales`, …).
    pub role: &'a str,
    /// The storage type.
    pub dtype: DType,
    /// The logical type, if any.
    pub logical_type: Option<&'a LogicalType>,
    /// The decoded, little-endian bytes.
    pub data: &'a [u8],
}

/// The parts of a CSR matrix: little-endian values of `dtype`, and u64 column indices and row
/// pointers.
#[derive(Debug, Clone, Copy)]
pub struct Csr<'a> {
    /// The values' storage type.
    pub dtype: DType,
    /// The non-zero values, little-endian.
    pub values: &'a [u8],
    /// The column index of each value.
    pub indices: &'a [u64],
    /// Row pointers, `rows + 1` of them.
    pub indptr: &'a [u64],
}

/// The parts of a COO tensor: little-endian values of `dtype` and u64 coordinates in
/// structure-of-arrays order (`coords[d * nnz + i]` is coordinate `d` of value `i`).
#[derive(Debug, Clone, Copy)]
pub struct Coo<'a> {
    /// The values' storage type.
    pub dtype: DType,
    /// The non-zero values, little-endian.
    pub values: &'a [u8],
    /// The coordinates.
    pub coords: &'a [u64],
}

/// What [`Writer::check_object`] needs to know of a component: its role, types and decoded
/// length.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SpecInfo<'a> {
    /// The role.
    pub role: &'a str,
    /// The storage type.
    pub dtype: DType,
    /// The logical type, if any.
    pub logical_type: Option<&'a LogicalType>,
    /// The decoded length in bytes.
    pub len: u64,
}

/// A component already encoded elsewhere (stored bytes plus how they are stored), copied
/// without decoding. Used to repack and migrate files without recompressing.
#[derive(Debug, Clone)]
pub struct StoredComponent<'a> {
    /// The role.
    pub role: &'a str,
    /// The component's description; its offset is ignored and its length must match `bytes`.
    pub component: Component,
    /// The stored bytes.
    pub bytes: &'a [u8],
}
