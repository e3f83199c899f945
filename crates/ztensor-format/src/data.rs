//! Checks and transformations of decoded component bytes: sparse index structure, bool bytes,
//! byte order, and the v0.1 single-blob sparse layouts. Pure functions over slices; the reader
//! calls them after it has fetched and decoded the bytes.

use crate::dtype::DType;
use crate::error::{Error, ErrorKind, Result};

/// Checks that every byte of a v1.x bool component is 0x00 or 0x01.
///
/// # Errors
/// [`ErrorKind::BoolInvalid`] naming the index of the first bad byte.
pub fn check_bool(bytes: &[u8]) -> Result<()> {
    check_bool_at(bytes, 0)
}

/// As [`check_bool`], for a piece of a component that starts at element `first`: the error
/// names the element's index in the whole component.
///
/// # Errors
/// [`ErrorKind::BoolInvalid`] naming the index of the first bad byte.
pub fn check_bool_at(bytes: &[u8], first: u64) -> Result<()> {
    match bytes.iter().position(|&b| b > 1) {
        None => Ok(()),
        Some(i) => Err(Error::new(
            ErrorKind::BoolInvalid,
            format!("bool element {} is not 0 or 1", first + i as u64),
        )
        .expected_found("0x00 or 0x01", format!("{:#04x}", bytes[i]))),
    }
}

/// Reverses the byte order of each `width`-byte element in place (big ⇄ little endian).
/// A trailing partial element is left as it is.
pub fn swap_bytes(bytes: &mut [u8], width: usize) {
    if width > 1 {
        for element in bytes.chunks_exact_mut(width) {
            element.reverse();
        }
    }
}

/// Reads little-endian integers of `dtype` as `u64` indices. Negative values cannot index
/// anything and are reported as out of bounds.
///
/// # Errors
/// [`ErrorKind::SparseIndexDtype`] for a non-integer dtype, [`ErrorKind::ComponentLengthNotMultiple`]
/// when `bytes` is not a whole number of elements, [`ErrorKind::SparseIndexOutOfBounds`] for a
/// negative value.
pub fn indices_to_u64(dtype: DType, bytes: &[u8]) -> Result<Vec<u64>> {
    if !dtype.is_integer() {
        return Err(Error::new(
            ErrorKind::SparseIndexDtype,
            format!("index dtype {dtype} is not an integer type"),
        ));
    }
    let width = usize::try_from(dtype.size()).unwrap_or(8);
    if !bytes.len().is_multiple_of(width) {
        return Err(Error::new(
            ErrorKind::ComponentLengthNotMultiple,
            "index bytes are not a whole number of elements",
        )
        .expected_found(format!("a multiple of {width}"), bytes.len()));
    }
    let mut out = Vec::with_capacity(bytes.len() / width);
    for (i, chunk) in bytes.chunks_exact(width).enumerate() {
        let mut le = [0u8; 8];
        le[..width].copy_from_slice(chunk);
        let signed = matches!(dtype, DType::I8 | DType::I16 | DType::I32 | DType::I64);
        let negative = signed && chunk[width - 1] & 0x80 != 0;
        if negative {
            return Err(Error::new(
                ErrorKind::SparseIndexOutOfBounds,
                format!("index {i} is negative"),
            ));
        }
        out.push(u64::from_le_bytes(le));
    }
    Ok(out)
}

/// Checks a CSR structure against its `[rows, cols]` shape: `indptr` has `rows + 1` entries,
/// starts at 0, never decreases and ends at `indices.len()`; every index is below `cols`; and,
/// when `strict`, indices increase strictly within each row.
///
/// # Errors
/// [`ErrorKind::CsrIndptrCount`], [`ErrorKind::CsrIndptrInvalid`],
/// [`ErrorKind::SparseIndexOutOfBounds`], [`ErrorKind::CsrIndicesUnsorted`].
pub fn check_csr(
    rows: u64,
    cols: u64,
    indptr: &[u64],
    indices: &[u64],
    strict: bool,
) -> Result<()> {
    if Some(indptr.len() as u64) != rows.checked_add(1) {
        return Err(Error::new(ErrorKind::CsrIndptrCount, "indptr must hold rows + 1 entries")
            .in_component("indptr")
            .expected_found(format!("{rows} + 1"), indptr.len()));
    }
    let invalid =
        |message: String| Error::new(ErrorKind::CsrIndptrInvalid, message).in_component("indptr");
    if indptr.first() != Some(&0) {
        return Err(invalid(format!(
            "indptr starts at {}, not 0",
            indptr.first().copied().unwrap_or(0)
        )));
    }
    if let Some(i) = indptr.windows(2).position(|w| w[1] < w[0]) {
        return Err(invalid(format!("indptr decreases at row {i}")));
    }
    let nnz = indices.len() as u64;
    if indptr.last() != Some(&nnz) {
        return Err(invalid(format!(
            "indptr ends at {}, not at nnz = {nnz}",
            indptr.last().copied().unwrap_or(0)
        )));
    }
    if let Some(i) = indices.iter().position(|&c| c >= cols) {
        return Err(Error::new(
            ErrorKind::SparseIndexOutOfBounds,
            format!("column index {} at position {i} is not below {cols}", indices[i]),
        )
        .in_component("indices"));
    }
    if strict {
        for (row, w) in indptr.windows(2).enumerate() {
            // indptr is non-decreasing and ends at nnz, so each row's range is in bounds.
            let (start, end) = (
                usize::try_from(w[0]).unwrap_or(usize::MAX),
                usize::try_from(w[1]).unwrap_or(usize::MAX),
            );
            let row_indices = indices.get(start..end).unwrap_or_default();
            if row_indices.windows(2).any(|p| p[1] <= p[0]) {
                return Err(Error::new(
                    ErrorKind::CsrIndicesUnsorted,
                    format!("column indices of row {row} do not strictly increase"),
                )
                .in_component("indices"));
            }
        }
    }
    Ok(())
}

/// Checks COO coordinates, structure-of-arrays (`coords[d * nnz + i]` is coordinate `d` of
/// non-zero `i`), against `shape`.
///
/// # Errors
/// [`ErrorKind::SparseNnzMismatch`] when `coords` is not `rank × nnz` long,
/// [`ErrorKind::SparseIndexOutOfBounds`] for a coordinate outside the shape.
pub fn check_coo(shape: &[u64], coords: &[u64], nnz: u64) -> Result<()> {
    let rank = shape.len() as u64;
    if rank.checked_mul(nnz) != Some(coords.len() as u64) {
        return Err(Error::new(
            ErrorKind::SparseNnzMismatch,
            "coords must hold rank × nnz entries",
        )
        .in_component("coords")
        .expected_found(format!("{rank} × {nnz}"), coords.len()));
    }
    let nnz = usize::try_from(nnz).unwrap_or(usize::MAX);
    for (d, (&dim, column)) in shape.iter().zip(coords.chunks(nnz.max(1))).enumerate() {
        if let Some(i) = column.iter().position(|&c| c >= dim) {
            return Err(Error::new(
                ErrorKind::SparseIndexOutOfBounds,
                format!("coordinate {d} of non-zero {i} is {}, not below {dim}", column[i]),
            )
            .in_component("coords"));
        }
    }
    Ok(())
}

/// A v0.1 single-blob sparse tensor split into v1.2-style components, all little-endian.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unpacked {
    /// The non-zero values.
    pub values: Vec<u8>,
    /// CSR: column indices (u64 LE). COO: coordinates (u64 LE), structure of arrays.
    pub indices: Vec<u8>,
    /// CSR: row pointers (u64 LE). COO: empty.
    pub indptr: Vec<u8>,
}

fn packed_error(message: String) -> Error {
    Error::new(ErrorKind::SparsePackedSize, message).in_component("data")
}

/// Splits a decoded v0.1 `sparsecsr` blob (`indptr` u64 × rows+1, `indices` u64 × nnz, values
/// × nnz). `big_endian` says the blob's elements are big-endian; output is little-endian.
///
/// # Errors
/// [`ErrorKind::SparsePackedSize`] when the length fits no nnz, [`ErrorKind::CsrIndptrInvalid`]
/// when the last row pointer disagrees with the nnz the length implies.
pub fn unpack_v0_csr(blob: &[u8], rows: u64, value: DType, big_endian: bool) -> Result<Unpacked> {
    let value_size = usize::try_from(value.size()).unwrap_or(8);
    let indptr_len = rows
        .checked_add(1)
        .and_then(|n| n.checked_mul(8))
        .and_then(|n| usize::try_from(n).ok())
        .filter(|&n| n <= blob.len())
        .ok_or_else(|| {
            packed_error(format!("{} bytes cannot hold indptr for {rows} rows", blob.len()))
        })?;
    let rest = blob.len() - indptr_len;
    if !rest.is_multiple_of(8 + value_size) {
        return Err(packed_error(format!(
            "{rest} bytes after indptr are not a whole number of (8 + {value_size})-byte non-zeros"
        )));
    }
    let nnz = rest / (8 + value_size);
    let mut indptr = blob[..indptr_len].to_vec();
    let mut indices = blob[indptr_len..indptr_len + nnz * 8].to_vec();
    let mut values = blob[indptr_len + nnz * 8..].to_vec();
    if big_endian {
        swap_bytes(&mut indptr, 8);
        swap_bytes(&mut indices, 8);
        swap_bytes(&mut values, value_size);
    }
    let last =
        indptr.rchunks_exact(8).next().map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])));
    if last != Some(nnz as u64) {
        return Err(Error::new(
            ErrorKind::CsrIndptrInvalid,
            format!(
                "last row pointer {} disagrees with the {nnz} non-zeros the size implies",
                last.unwrap_or(0)
            ),
        )
        .in_component("data"));
    }
    Ok(Unpacked { values, indices, indptr })
}

/// Splits a decoded v0.1 `sparsecoo` blob: `nnz` records of `rank` u64 coordinates followed by
/// one value (array of structures), into values and structure-of-arrays coordinates.
///
/// # Errors
/// [`ErrorKind::SparsePackedSize`] when the length is not a whole number of records.
pub fn unpack_v0_coo(blob: &[u8], rank: usize, value: DType, big_endian: bool) -> Result<Unpacked> {
    let value_size = usize::try_from(value.size()).unwrap_or(8);
    let record = rank.checked_mul(8).and_then(|n| n.checked_add(value_size)).unwrap_or(usize::MAX);
    if !blob.len().is_multiple_of(record) {
        return Err(packed_error(format!(
            "{} bytes are not a whole number of {record}-byte records",
            blob.len()
        )));
    }
    let nnz = blob.len() / record;
    let mut values = Vec::with_capacity(nnz * value_size);
    let mut coords = vec![0u8; nnz * rank * 8];
    for (i, rec) in blob.chunks_exact(record).enumerate() {
        for d in 0..rank {
            let mut c: [u8; 8] = rec[d * 8..d * 8 + 8].try_into().unwrap_or([0; 8]);
            if big_endian {
                c.reverse();
            }
            let at = (d * nnz + i) * 8;
            coords[at..at + 8].copy_from_slice(&c);
        }
        let mut v = rec[rank * 8..].to_vec();
        if big_endian {
            v.reverse();
        }
        values.extend_from_slice(&v);
    }
    Ok(Unpacked { values, indices: coords, indptr: Vec::new() })
}

/// Little-endian bytes of `values`.
pub fn u64s_to_le(values: &[u64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swap_and_indices() {
        let mut b = [1, 2, 3, 4, 5, 6, 7];
        swap_bytes(&mut b, 2);
        assert_eq!(b, [2, 1, 4, 3, 6, 5, 7]);
        assert_eq!(indices_to_u64(DType::U16, &[1, 0, 0, 1]).unwrap(), [1, 256]);
        assert_eq!(
            indices_to_u64(DType::I16, &[0, 0x80]).unwrap_err().kind(),
            ErrorKind::SparseIndexOutOfBounds
        );
        assert_eq!(
            indices_to_u64(DType::F32, &[0; 4]).unwrap_err().kind(),
            ErrorKind::SparseIndexDtype
        );
        assert_eq!(
            indices_to_u64(DType::U32, &[0; 3]).unwrap_err().kind(),
            ErrorKind::ComponentLengthNotMultiple
        );
    }

    #[test]
    fn v0_coo_is_transposed_to_soa() {
        // Two non-zeros of a rank-2 u8 tensor: (1, 2) = 7 and (3, 4) = 9.
        let mut blob = Vec::new();
        for (r, c, v) in [(1u64, 2u64, 7u8), (3, 4, 9)] {
            blob.extend_from_slice(&r.to_le_bytes());
            blob.extend_from_slice(&c.to_le_bytes());
            blob.push(v);
        }
        let u = unpack_v0_coo(&blob, 2, DType::U8, false).unwrap();
        assert_eq!(u.values, [7, 9]);
        assert_eq!(u.indices, u64s_to_le(&[1, 3, 2, 4]));
        assert_eq!(
            unpack_v0_coo(&blob[1..], 2, DType::U8, false).unwrap_err().kind(),
            ErrorKind::SparsePackedSize
        );
    }

    #[test]
    fn v0_csr_big_endian() {
        // [[0, 5], [6, 0]] as big-endian u16 values.
        let mut blob = Vec::new();
        for p in [0u64, 1, 2] {
            blob.extend_from_slice(&p.to_be_bytes());
        }
        for i in [1u64, 0] {
            blob.extend_from_slice(&i.to_be_bytes());
        }
        for v in [5u16, 6] {
            blob.extend_from_slice(&v.to_be_bytes());
        }
        let u = unpack_v0_csr(&blob, 2, DType::U16, true).unwrap();
        assert_eq!(u.indptr, u64s_to_le(&[0, 1, 2]));
        assert_eq!(u.indices, u64s_to_le(&[1, 0]));
        assert_eq!(u.values, [5, 0, 6, 0]);
        // The last row pointer must agree with the size.
        let mut bad = blob.clone();
        bad[23] = 1;
        assert_eq!(
            unpack_v0_csr(&bad, 2, DType::U16, true).unwrap_err().kind(),
            ErrorKind::CsrIndptrInvalid
        );
    }
}
