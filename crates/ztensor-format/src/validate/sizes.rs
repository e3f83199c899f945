//! Sizes from shapes and dtypes: decoded lengths, element counts, sparse ranks.

use crate::dtype::LogicalType;
use crate::error::{Error, ErrorKind, Result};
use crate::manifest::{Component, Encoding, Format, Object, Packing};

/// The decoded length of component `role` (`c`) of `object`, when it is known without decoding:
/// a raw component's length, a zstd component's `uncompressed_length`, or what the shape and
/// dtype of a dense tensor's data give.
pub fn decoded_len(object: &Object, role: &str, c: &Component) -> Option<u64> {
    match c.encoding {
        Encoding::Raw => Some(c.length),
        Encoding::Zstd => c.uncompressed_length.or_else(|| {
            let dense_data = object.format == Format::Dense
                && object.packing == Packing::Split
                && role == crate::role::DATA;
            dense_data
                .then(|| element_count(&object.shape)?.checked_mul(element_size(c)?))
                .flatten()
        }),
        Encoding::Unknown(_) => None,
    }
}

/// The number of elements of `shape` (1 for a scalar), or `None` on overflow.
pub fn element_count(shape: &[u64]) -> Option<u64> {
    shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d))
}

/// Bytes per logical element of a component: storage size × logical ratio.
pub fn element_size(component: &Component) -> Option<u64> {
    let dtype = component.dtype.known()?;
    Some(dtype.size() * component.logical_type.as_ref().map_or(1, LogicalType::ratio))
}

/// The rows of a CSR shape, which must have rank 2.
pub(super) fn csr_rows(shape: &[u64]) -> Result<u64> {
    match shape {
        [rows, _] => Ok(*rows),
        _ => Err(Error::new(ErrorKind::SparseRank, "sparse_csr objects must have rank 2")
            .field("shape")
            .expected_found(2, shape.len())),
    }
}

/// COO shapes must have rank 1 or more.
pub(super) fn coo_rank(shape: &[u64]) -> Result<u64> {
    if shape.is_empty() {
        return Err(Error::new(
            ErrorKind::SparseRank,
            "sparse_coo objects must have rank 1 or more",
        )
        .field("shape")
        .expected_found(">= 1", 0));
    }
    Ok(shape.len() as u64)
}

pub(super) fn overflow(shape: &[u64]) -> Error {
    Error::new(ErrorKind::ShapeOverflow, "shape × element size overflows 64 bits")
        .field("shape")
        .expected_found("a byte size below 2^64", format!("{shape:?}"))
}
