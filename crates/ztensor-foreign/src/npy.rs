//! NumPy `.npy` out, so people can look at a tensor with the tools they have, and the element
//! conversions behind it (also used to print values).
//!
//! Types NumPy has are written as they are; `bf16`, the FP8 types and the microscaling types
//! (packed FP4 and FP6, E8M0), which it lacks, are widened to `f32` (exactly: every value of
//! those types is an `f32` value); `complex64` and `complex128` become `<c8` and `<c16`. Sparse objects (CSR, COO) are written dense, within a
//! size limit. Quantized groups have no array form and are refused.

use std::io::Write;

use half::{bf16, f16};
use ztensor_format::data::{check_coo, check_csr, indices_to_u64};
use ztensor_format::{DType, Format, LogicalType};
use ztensor_io::{ComponentData, TensorSource};

use crate::error::{Error, ErrorKind, Result};

/// An array ready for `.npy`: NumPy type string, shape and little-endian bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    /// The NumPy `descr`, e.g. `<f4`.
    pub descr: &'static str,
    /// The shape.
    pub shape: Vec<u64>,
    /// The elements, C order, little-endian.
    pub data: Vec<u8>,
    /// How the stored elements were changed, if they were (widened or densified).
    pub note: Option<String>,
}

/// The default bound on the bytes of a densified sparse object.
pub const DEFAULT_MAX_DENSE: u64 = 1 << 30;

/// The NumPy type of a storage type, when NumPy has it.
pub fn descr(dtype: DType) -> Option<&'static str> {
    Some(match dtype {
        DType::Bool => "|b1",
        DType::U8 => "|u1",
        DType::I8 => "|i1",
        DType::U16 => "<u2",
        DType::I16 => "<i2",
        DType::U32 => "<u4",
        DType::I32 => "<i4",
        DType::U64 => "<u8",
        DType::I64 => "<i8",
        DType::F16 => "<f2",
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        _ => return None,
    })
}

/// An FP8 byte as `f32`: `exponent_bits` of exponent with `bias`; `fnuz` types have no
/// infinities and a single NaN (0x80, the pattern of negative zero); the others follow IEEE 754
/// (e5m2) or have NaN only at all-ones (e4m3fn).
fn fp8(byte: u8, exponent_bits: u32, bias: i32, fnuz: bool) -> f32 {
    let mantissa_bits = 7 - exponent_bits;
    let sign = if byte & 0x80 != 0 { -1.0f32 } else { 1.0 };
    let exponent = i32::from((byte >> mantissa_bits) & ((1 << exponent_bits) - 1));
    let mantissa = f32::from(byte & ((1 << mantissa_bits) - 1));
    let scale = f32::from(1u16 << mantissa_bits);
    let max_exponent = (1 << exponent_bits) - 1;
    if fnuz {
        if byte == 0x80 {
            return f32::NAN;
        }
    } else if exponent == max_exponent {
        if exponent_bits == 5 {
            // e5m2: IEEE 754 infinities and NaNs.
            return if mantissa == 0.0 { sign * f32::INFINITY } else { f32::NAN };
        }
        if mantissa == scale - 1.0 {
            // e4m3fn: only S.1111.111 is NaN; there are no infinities.
            return f32::NAN;
        }
    }
    if exponent == 0 {
        sign * (mantissa / scale) * 2f32.powi(1 - bias)
    } else {
        sign * (1.0 + mantissa / scale) * 2f32.powi(exponent - bias)
    }
}

/// The value of one FP8 byte of a logical type, as `f32` (`None` for other types).
pub fn fp8_to_f32(byte: u8, logical: &LogicalType) -> Option<f32> {
    Some(match logical {
        LogicalType::F8E4M3Fn => fp8(byte, 4, 7, false),
        LogicalType::F8E5M2 => fp8(byte, 5, 15, false),
        LogicalType::F8E4M3Fnuz => fp8(byte, 4, 8, true),
        LogicalType::F8E5M2Fnuz => fp8(byte, 5, 16, true),
        // The E8M0 scale: 2^(byte − 127), 0xFF NaN (2^−127 is an f32 subnormal, exact).
        t if ztensor_format::MxType::of(t) == Some(ztensor_format::MxType::F8E8M0) => match byte {
            0xff => f32::NAN,
            0 => f32::from_bits(1 << 22),
            e => f32::from_bits(u32::from(e) << 23),
        },
        _ => return None,
    })
}

/// The value of a code of the OCP microscaling element types FP4 and FP6 (E2M1, E2M3, E3M2):
/// a sign bit over `exponent_bits` of exponent (bias `bias`) and `mantissa_bits` of mantissa,
/// exponent 0 subnormal; no infinities and no NaN.
fn minifloat(code: u8, exponent_bits: u32, mantissa_bits: u32, bias: i32) -> f32 {
    let sign = if code >> (exponent_bits + mantissa_bits) & 1 != 0 { -1.0f32 } else { 1.0 };
    let exponent = i32::from((code >> mantissa_bits) & ((1 << exponent_bits) - 1));
    let scale = f32::from(1u8 << mantissa_bits);
    let mantissa = f32::from(code & ((1 << mantissa_bits) - 1)) / scale;
    match exponent {
        0 => sign * mantissa * 2f32.powi(1 - bias),
        e => sign * (1.0 + mantissa) * 2f32.powi(e - bias),
    }
}

/// The packed microscaling elements in `bytes` (element `i` at bits `b·i..b·(i+1)` of the
/// little-endian bit stream) widened to `f32`: as many as the whole bytes hold (the bits of a
/// last partial element, padding, included as an element when they fill one: the caller
/// keeps the count it has).
fn widen_packed(bytes: &[u8], mx: ztensor_format::MxType) -> Vec<u8> {
    use ztensor_format::MxType;
    let (bits, value): (usize, fn(u8) -> f32) = match mx {
        MxType::F4E2M1 => (4, |c| minifloat(c, 2, 1, 1)),
        MxType::F6E2M3 => (6, |c| minifloat(c, 2, 3, 1)),
        MxType::F6E3M2 => (6, |c| minifloat(c, 3, 2, 3)),
        // One byte an element: widened by `fp8_to_f32`.
        MxType::F8E8M0 => return Vec::new(),
    };
    let count = bytes.len() * 8 / bits;
    let mut out = Vec::with_capacity(count * 4);
    for i in 0..count {
        let (at, shift) = (i * bits / 8, i * bits % 8);
        let low = u16::from(bytes[at]);
        let high = bytes.get(at + 1).map_or(0, |&b| u16::from(b));
        // At most six bits: a byte.
        let code = ((low | high << 8) >> shift).to_le_bytes()[0] & ((1 << bits) - 1);
        out.extend_from_slice(&value(code).to_le_bytes());
    }
    out
}

/// The packed microscaling type of elements of `logical` on `dtype`, when they are one (FP4,
/// FP6): their bytes do not count their elements.
pub fn packed(dtype: DType, logical: Option<&LogicalType>) -> Option<ztensor_format::MxType> {
    use ztensor_format::MxType;
    let mx = MxType::of(logical?).filter(|mx| *mx != MxType::F8E8M0)?;
    (dtype == DType::U8).then_some(mx)
}

/// The input bytes of a piece that widens to whole elements: a multiple of this (3 for FP6,
/// whose four elements take three bytes; the element size otherwise).
pub fn piece_unit(dtype: DType, logical: Option<&LogicalType>) -> usize {
    use ztensor_format::MxType;
    match packed(dtype, logical) {
        Some(MxType::F6E2M3 | MxType::F6E3M2) => 3,
        Some(_) => 1,
        None => usize::try_from(dtype.size()).unwrap_or(1).max(1),
    }
}

fn widen(bytes: &[u8], f: impl Fn(&[u8]) -> f32, width: usize) -> Vec<u8> {
    bytes.chunks_exact(width).flat_map(|c| f(c).to_le_bytes()).collect()
}

/// The NumPy form of a dense component: type, bytes (the component's own when they need no
/// widening), and how they were changed. Element by element, so it takes a component in pieces
/// too, each a whole number of elements of both types (a multiple of
/// `lcm(dtype.size(), width(descr))` bytes): a printer widens a huge tensor a piece at a time.
///
/// # Errors
/// [`ErrorKind::Unrepresentable`] for a type NumPy lacks.
pub fn dense(c: ComponentData<'_>) -> Result<(&'static str, Vec<u8>, Option<String>)> {
    let unrepresentable = |what: String| Error::new(ErrorKind::Unrepresentable, what);
    let bytes = &c.bytes;
    Ok(match (&c.logical_type, c.dtype) {
        (None, DType::BF16) => (
            "<f4",
            widen(bytes, |b| bf16::from_le_bytes([b[0], b[1]]).to_f32(), 2),
            Some("bf16 widened to f32 (exact)".into()),
        ),
        (None, d) => (
            descr(d).ok_or_else(|| unrepresentable(format!("NumPy has no type for {d}")))?,
            c.bytes.into_owned(),
            None,
        ),
        (Some(LogicalType::Complex64), DType::F32) => ("<c8", c.bytes.into_owned(), None),
        (Some(LogicalType::Complex128), DType::F64) => ("<c16", c.bytes.into_owned(), None),
        (Some(t), DType::U8) if fp8_to_f32(0, t).is_some() => {
            let data = widen(bytes, |b| fp8_to_f32(b[0], t).unwrap_or(f32::NAN), 1);
            ("<f4", data, Some(format!("{t} widened to f32 (exact)")))
        }
        (Some(t), d) if packed(d, Some(t)).is_some() => {
            let data = packed(d, Some(t)).map(|mx| widen_packed(bytes, mx)).unwrap_or_default();
            ("<f4", data, Some(format!("packed {t} widened to f32 (exact)")))
        }
        (Some(t), d) => return Err(unrepresentable(format!("NumPy has no type for {d} as {t}"))),
    })
}

/// The object called `name` as an array. Sparse objects are densified when the dense array
/// takes at most `max_dense` bytes.
///
/// # Errors
/// [`ErrorKind::NotFound`], [`ErrorKind::Unrepresentable`] (quantized groups, sparse objects
/// over the bound, types NumPy lacks), and read errors (damaged data is never written).
pub fn array<T: TensorSource + ?Sized>(source: &T, name: &str, max_dense: u64) -> Result<Array> {
    array_of(source, name, max_dense).map_err(|e| e.in_object(name))
}

fn array_of<T: TensorSource + ?Sized>(source: &T, name: &str, max_dense: u64) -> Result<Array> {
    let index = source.find(name).ok_or_else(|| {
        Error::new(ErrorKind::NotFound, ztensor_io::Error::not_found(name, None).to_string())
    })?;
    // Damaged data is never written: digests are checked on the bytes that are decoded.
    let mut data = source.read(index)?;
    let unrepresentable = |what: String| Error::new(ErrorKind::Unrepresentable, what);
    let shape = data.shape.clone();
    match data.format {
        Format::Dense => {
            let c = data
                .components
                .remove("data")
                .ok_or_else(|| unrepresentable("a dense object without a data component".into()))?;
            let packed = packed(c.dtype, c.logical_type.as_ref());
            let (descr, mut bytes, note) = dense(c)?;
            if packed.is_some() {
                // The padding bits after the last element are no element.
                let count = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
                let len = count.and_then(|n| usize::try_from(n).ok()?.checked_mul(4));
                if len.is_none_or(|len| len > bytes.len()) {
                    return Err(unrepresentable(format!(
                        "the packed elements do not fill shape {shape:?}"
                    )));
                }
                bytes.truncate(len.unwrap_or(0));
            }
            Ok(Array { descr, shape, data: bytes, note })
        }
        Format::SparseCsr | Format::SparseCoo => {
            let values = data
                .components
                .remove("values")
                .ok_or_else(|| unrepresentable("a sparse object without values".into()))?;
            let (descr, bytes, note) = dense(values)?;
            let width = width(descr);
            let nnz = bytes.len() / width;
            let count = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
            let total = count.and_then(|n| n.checked_mul(width as u64)).filter(|&b| b <= max_dense);
            let Some(total) = total.and_then(|t| usize::try_from(t).ok()) else {
                return Err(unrepresentable(format!(
                    "the dense form of this {} object would exceed {max_dense} bytes",
                    data.format
                )));
            };
            let mut dense = vec![0u8; total];
            let broken = || Error::new(ErrorKind::ZTensor, "the sparse structure is inconsistent");
            // Indices of any integer dtype, checked by the rules every reader applies.
            let checked = |e: ztensor_format::Error| Error::from(ztensor_io::Error::from(e));
            let component = |role: &str| {
                let c = data.components.get(role).ok_or_else(broken)?;
                indices_to_u64(c.dtype, &c.bytes).map_err(|e| checked(e.in_component(role)))
            };
            // Positions of the non-zeros in C order.
            let mut positions = Vec::with_capacity(nnz);
            if data.format == Format::SparseCsr {
                let (indptr, indices) = (component("indptr")?, component("indices")?);
                let [rows, cols] = shape[..] else { return Err(broken()) };
                check_csr(rows, cols, &indptr, &indices, false).map_err(checked)?;
                for (row, w) in (0..rows).zip(indptr.windows(2)) {
                    let range = usize::try_from(w[0]).ok().zip(usize::try_from(w[1]).ok());
                    let row_indices =
                        range.and_then(|(a, b)| indices.get(a..b)).ok_or_else(broken)?;
                    positions.extend(row_indices.iter().map(|&c| row * cols + c));
                }
            } else {
                let coords = component("coords")?;
                check_coo(&shape, &coords, nnz as u64).map_err(checked)?;
                for i in 0..nnz {
                    let mut at = 0u64;
                    for (d, &dim) in shape.iter().enumerate() {
                        at = at * dim + *coords.get(d * nnz + i).ok_or_else(broken)?;
                    }
                    positions.push(at);
                }
            }
            if positions.len() != nnz {
                return Err(broken());
            }
            for (i, at) in positions.into_iter().enumerate() {
                // In range: every coordinate is below its dimension.
                let at = usize::try_from(at).map_err(|_| broken())? * width;
                dense[at..at + width].copy_from_slice(&bytes[i * width..(i + 1) * width]);
            }
            let format = if data.format == Format::SparseCsr { "CSR" } else { "COO" };
            let note = Some(match note {
                Some(n) => format!("{format} densified; {n}"),
                None => format!("{format} densified"),
            });
            Ok(Array { descr, shape, data: dense, note })
        }
        other => Err(unrepresentable(format!("a {other} object has no NumPy array form"))),
    }
}

/// The bytes of one element of a NumPy type this module writes.
pub fn width(descr: &str) -> usize {
    match descr {
        "|b1" | "|u1" | "|i1" => 1,
        "<u2" | "<i2" | "<f2" => 2,
        "<u4" | "<i4" | "<f4" => 4,
        "<c16" => 16,
        _ => 8,
    }
}

/// Writes `array` as a version 1.0 `.npy` file (version 2.0 when the header needs it).
///
/// # Errors
/// I/O errors.
pub fn write(out: &mut impl Write, array: &Array) -> std::io::Result<()> {
    write_header(out, array.descr, &array.shape)?;
    out.write_all(&array.data)
}

/// Writes the header of a `.npy` file of `descr` elements in `shape` (C order): the elements
/// follow, little-endian, `shape`'s product of them.
///
/// # Errors
/// I/O errors.
pub fn write_header(out: &mut impl Write, descr: &str, shape: &[u64]) -> std::io::Result<()> {
    let shape = match shape {
        [] => "()".to_owned(),
        [d] => format!("({d},)"),
        dims => format!("({})", dims.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")),
    };
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // Magic (6) + version (2) + length (2 or 4) + dict + '\n', padded to 64 bytes.
    let v1 = 10 + dict.len() < usize::from(u16::MAX);
    let prefix = if v1 { 10 } else { 12 };
    let total = (prefix + dict.len() + 1).next_multiple_of(64);
    dict.extend(std::iter::repeat_n(' ', total - prefix - dict.len() - 1));
    dict.push('\n');
    out.write_all(b"\x93NUMPY")?;
    if v1 {
        out.write_all(&[1, 0])?;
        out.write_all(&u16::try_from(dict.len()).unwrap_or(u16::MAX).to_le_bytes())?;
    } else {
        out.write_all(&[2, 0])?;
        out.write_all(&u32::try_from(dict.len()).unwrap_or(u32::MAX).to_le_bytes())?;
    }
    out.write_all(dict.as_bytes())
}

/// The values of an array as text, C order, at most `limit` of them.
pub fn values(array: &Array, limit: usize) -> Vec<String> {
    let width = width(array.descr);
    let word = |c: &[u8]| -> [u8; 8] {
        let mut w = [0u8; 8];
        w[..c.len().min(8)].copy_from_slice(&c[..c.len().min(8)]);
        w
    };
    array
        .data
        .chunks_exact(width)
        .take(limit)
        .map(|c| {
            let w = word(c);
            match array.descr {
                "|b1" => (c[0] != 0).to_string(),
                "|u1" => c[0].to_string(),
                "|i1" => i8::from_le_bytes([c[0]]).to_string(),
                "<u2" => u16::from_le_bytes([c[0], c[1]]).to_string(),
                "<i2" => i16::from_le_bytes([c[0], c[1]]).to_string(),
                "<f2" => f16::from_le_bytes([c[0], c[1]]).to_string(),
                "<u4" => u32::from_le_bytes([c[0], c[1], c[2], c[3]]).to_string(),
                "<i4" => i32::from_le_bytes([c[0], c[1], c[2], c[3]]).to_string(),
                "<f4" => f32::from_le_bytes([c[0], c[1], c[2], c[3]]).to_string(),
                "<u8" => u64::from_le_bytes(w).to_string(),
                "<i8" => i64::from_le_bytes(w).to_string(),
                "<f8" => f64::from_le_bytes(w).to_string(),
                "<c8" => {
                    let re = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                    let im = f32::from_le_bytes([c[4], c[5], c[6], c[7]]);
                    format!("{re}{im:+}i")
                }
                _ => {
                    let re = f64::from_le_bytes(w);
                    let im = f64::from_le_bytes(word(&c[8..]));
                    format!("{re}{im:+}i")
                }
            }
        })
        .collect()
}

/// How many elements an array has.
pub fn len(array: &Array) -> u64 {
    array.shape.iter().product()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ztensor_format::MxType;

    fn floats(bytes: &[u8]) -> Vec<f32> {
        bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
    }

    #[test]
    fn fp4_and_fp6_codes_are_the_ocp_values() {
        // OCP Microscaling 1.0, §5.3.3: E2M1's eight magnitudes; E2M3's and E3M2's smallest
        // subnormal and largest normal; the sign bit on top.
        let e2m1: Vec<f32> = (0..8).map(|c| minifloat(c, 2, 1, 1)).collect();
        assert_eq!(e2m1, [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]);
        assert_eq!(minifloat(0b1111, 2, 1, 1), -6.0);
        assert_eq!((minifloat(1, 2, 3, 1), minifloat(0x1F, 2, 3, 1)), (0.125, 7.5));
        assert_eq!((minifloat(1, 3, 2, 3), minifloat(0x1F, 3, 2, 3)), (0.0625, 28.0));
        assert_eq!(minifloat(0x3F, 3, 2, 3), -28.0);
    }

    #[test]
    fn packed_elements_widen_in_stream_order_pieces_of_whole_elements() {
        // FP4: element 0 in the low nibble.
        assert_eq!(floats(&widen_packed(&[0x21, 0x0F], MxType::F4E2M1)), [0.5, 1.0, -6.0, 0.0]);
        // FP6: four elements in three bytes, element i at bits 6i..6i+6.
        let codes = [0x01u32, 0x1F, 0x21, 0x3F];
        let stream: u32 = codes.iter().enumerate().map(|(i, c)| c << (6 * i)).sum();
        let bytes = &stream.to_le_bytes()[..3];
        assert_eq!(floats(&widen_packed(bytes, MxType::F6E3M2)), [0.0625, 28.0, -0.0625, -28.0]);
        assert_eq!(piece_unit(DType::U8, Some(&MxType::F6E2M3.logical_type())), 3);
        assert_eq!(piece_unit(DType::U8, Some(&MxType::F4E2M1.logical_type())), 1);
        assert_eq!(piece_unit(DType::F32, None), 4);
    }
}
