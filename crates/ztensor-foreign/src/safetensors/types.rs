//! The dtypes of safetensors and zTensor, one for the other, and the attributes that carry a
//! dtype zTensor lacks.

use safetensors::Dtype;
use ztensor_format::{DType, LogicalType, MxType};
use ztensor_io::ObjectInfo;

use crate::error::{Error, ErrorKind, Result};

/// The largest header accepted, the `safetensors` crate's own limit.
pub const MAX_HEADER_LEN: u64 = 100_000_000;

/// The microscaling type a safetensors dtype is (`F4`, `F6_E2M3`, `F6_E3M2`, `F8_E8M0`): stored
/// as zTensor 2 stores it, and registered by no zTensor 1.x.
pub fn mx_type(dtype: Dtype) -> Option<MxType> {
    Some(match dtype {
        Dtype::F4 => MxType::F4E2M1,
        Dtype::F6_E2M3 => MxType::F6E2M3,
        Dtype::F6_E3M2 => MxType::F6E3M2,
        Dtype::F8_E8M0 => MxType::F8E8M0,
        _ => return None,
    })
}

/// The zTensor storage type and logical type that hold a safetensors dtype byte for byte: the
/// microscaling dtypes are `u8` of their [`MxType`] (zTensor 2's types; a zTensor 1.x writer
/// refuses them).
///
/// # Errors
/// [`ErrorKind::Unrepresentable`] for a dtype this crate does not know.
pub fn ztensor_type(dtype: Dtype) -> Result<(DType, Option<LogicalType>)> {
    if let Some(mx) = mx_type(dtype) {
        return Ok((DType::U8, Some(mx.logical_type())));
    }
    Ok(match dtype {
        Dtype::BOOL => (DType::Bool, None),
        Dtype::U8 => (DType::U8, None),
        Dtype::I8 => (DType::I8, None),
        Dtype::U16 => (DType::U16, None),
        Dtype::I16 => (DType::I16, None),
        Dtype::U32 => (DType::U32, None),
        Dtype::I32 => (DType::I32, None),
        Dtype::U64 => (DType::U64, None),
        Dtype::I64 => (DType::I64, None),
        Dtype::F16 => (DType::F16, None),
        Dtype::BF16 => (DType::BF16, None),
        Dtype::F32 => (DType::F32, None),
        Dtype::F64 => (DType::F64, None),
        Dtype::F8_E4M3 => (DType::U8, Some(LogicalType::F8E4M3Fn)),
        Dtype::F8_E5M2 => (DType::U8, Some(LogicalType::F8E5M2)),
        Dtype::F8_E4M3FNUZ => (DType::U8, Some(LogicalType::F8E4M3Fnuz)),
        Dtype::F8_E5M2FNUZ => (DType::U8, Some(LogicalType::F8E5M2Fnuz)),
        Dtype::C64 => (DType::F32, Some(LogicalType::Complex64)),
        other => {
            return Err(Error::new(
                ErrorKind::Unrepresentable,
                format!("safetensors dtype {other} has no zTensor type"),
            ));
        }
    })
}

/// The safetensors dtype that holds a zTensor storage type and logical type byte for byte.
///
/// # Errors
/// [`ErrorKind::Unrepresentable`] for `complex128` and unknown logical types.
pub fn safetensors_dtype(dtype: DType, logical: Option<&LogicalType>) -> Result<Dtype> {
    let unrepresentable =
        |what: String| Error::new(ErrorKind::Unrepresentable, format!("safetensors has no {what}"));
    if let (DType::U8, Some(mx)) = (dtype, logical.and_then(MxType::of)) {
        return Ok(match mx {
            MxType::F4E2M1 => Dtype::F4,
            MxType::F6E2M3 => Dtype::F6_E2M3,
            MxType::F6E3M2 => Dtype::F6_E3M2,
            MxType::F8E8M0 => Dtype::F8_E8M0,
        });
    }
    Ok(match (dtype, logical) {
        (DType::Bool, None) => Dtype::BOOL,
        (DType::U8, None) => Dtype::U8,
        (DType::I8, None) => Dtype::I8,
        (DType::U16, None) => Dtype::U16,
        (DType::I16, None) => Dtype::I16,
        (DType::U32, None) => Dtype::U32,
        (DType::I32, None) => Dtype::I32,
        (DType::U64, None) => Dtype::U64,
        (DType::I64, None) => Dtype::I64,
        (DType::F16, None) => Dtype::F16,
        (DType::BF16, None) => Dtype::BF16,
        (DType::F32, None) => Dtype::F32,
        (DType::F64, None) => Dtype::F64,
        (DType::U8, Some(LogicalType::F8E4M3Fn)) => Dtype::F8_E4M3,
        (DType::U8, Some(LogicalType::F8E5M2)) => Dtype::F8_E5M2,
        (DType::U8, Some(LogicalType::F8E4M3Fnuz)) => Dtype::F8_E4M3FNUZ,
        (DType::U8, Some(LogicalType::F8E5M2Fnuz)) => Dtype::F8_E5M2FNUZ,
        (DType::F32, Some(LogicalType::Complex64)) => Dtype::C64,
        (d, Some(t)) => {
            return Err(unrepresentable(format!("dtype for {d} with logical type {t}")));
        }
        #[allow(unreachable_patterns)]
        (d, None) => return Err(unrepresentable(format!("dtype for {d}"))),
    })
}

/// The attribute keys that record a carried tensor's safetensors dtype and shape.
pub const CARRIED_DTYPE: &str = "safetensors.dtype";
/// See [`CARRIED_DTYPE`].
pub const CARRIED_SHAPE: &str = "safetensors.shape";

/// The safetensors dtype and shape a carried `u8` object records, when its attributes are
/// exactly those of a carried tensor and its bytes fit them.
pub(crate) fn carried(o: &ObjectInfo<'_>, len: u64) -> Option<(Dtype, Vec<u64>)> {
    let attributes = o.attributes.as_deref()?;
    if attributes.len() != 2 {
        return None;
    }
    let name = attributes.get(CARRIED_DTYPE)?.as_text()?;
    let dtype: Dtype = serde_json::from_value(serde_json::Value::String(name.to_owned())).ok()?;
    let shape: Vec<u64> =
        attributes.get(CARRIED_SHAPE)?.as_array()?.map(|v| v.as_u64()).collect::<Option<_>>()?;
    let elements = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d))?;
    let bits = elements.checked_mul(dtype.bitsize() as u64)?;
    (bits.div_ceil(8) == len && bits % 8 == 0).then_some((dtype, shape))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each microscaling type goes to the safetensors dtype of its name and back, and the
    /// crate's element size is the type's.
    #[test]
    fn microscaling_types_and_safetensors_dtypes_agree() {
        for mx in MxType::ALL {
            let dtype = safetensors_dtype(DType::U8, Some(&mx.logical_type())).unwrap();
            assert_eq!(dtype.to_string(), mx.safetensors_name());
            assert_eq!(dtype.bitsize() as u64, mx.bits());
            assert_eq!(mx_type(dtype), Some(mx));
            assert_eq!(ztensor_type(dtype).unwrap(), (DType::U8, Some(mx.logical_type())));
        }
        assert_eq!(mx_type(Dtype::F8_E4M3), None);
    }
}
