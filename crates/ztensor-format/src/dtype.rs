//! Storage dtypes (the 13 primitives) and logical types (what the stored bytes mean).

use std::fmt;

/// One of the 13 storage types of every zTensor version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// IEEE 754 binary64.
    F64,
    /// IEEE 754 binary32.
    F32,
    /// IEEE 754 binary16.
    F16,
    /// bfloat16.
    BF16,
    /// Two's complement 64-bit.
    I64,
    /// Two's complement 32-bit.
    I32,
    /// Two's complement 16-bit.
    I16,
    /// Two's complement 8-bit.
    I8,
    /// Unsigned 64-bit.
    U64,
    /// Unsigned 32-bit.
    U32,
    /// Unsigned 16-bit.
    U16,
    /// Unsigned 8-bit.
    U8,
    /// One byte per value (v1.x: exactly 0x00 or 0x01; v0.1: non-zero is true).
    Bool,
}

impl DType {
    /// All 13 storage types.
    pub const ALL: [DType; 13] = [
        DType::F64,
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I64,
        DType::I32,
        DType::I16,
        DType::I8,
        DType::U64,
        DType::U32,
        DType::U16,
        DType::U8,
        DType::Bool,
    ];

    /// Bytes per element.
    pub fn size(self) -> u64 {
        match self {
            DType::F64 | DType::I64 | DType::U64 => 8,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::I8 | DType::U8 | DType::Bool => 1,
        }
    }

    /// The v1.x spelling (`f32`, `bf16`, `u8`, …), also used by the conformance dump.
    pub fn name(self) -> &'static str {
        match self {
            DType::F64 => "f64",
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I64 => "i64",
            DType::I32 => "i32",
            DType::I16 => "i16",
            DType::I8 => "i8",
            DType::U64 => "u64",
            DType::U32 => "u32",
            DType::U16 => "u16",
            DType::U8 => "u8",
            DType::Bool => "bool",
        }
    }

    /// The v0.1 spelling (`float32`, `bfloat16`, `uint8`, …).
    pub fn v0_name(self) -> &'static str {
        match self {
            DType::F64 => "float64",
            DType::F32 => "float32",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::I64 => "int64",
            DType::I32 => "int32",
            DType::I16 => "int16",
            DType::I8 => "int8",
            DType::U64 => "uint64",
            DType::U32 => "uint32",
            DType::U16 => "uint16",
            DType::U8 => "uint8",
            DType::Bool => "bool",
        }
    }

    /// Parses a v1.x spelling (exact, case-sensitive as the specs say).
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Parses a v0.1 spelling.
    pub fn from_v0_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.v0_name() == name)
    }

    /// Whether this is one of the eight integer types.
    pub fn is_integer(self) -> bool {
        matches!(
            self,
            DType::I64
                | DType::I32
                | DType::I16
                | DType::I8
                | DType::U64
                | DType::U32
                | DType::U16
                | DType::U8
        )
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A component's storage type as the file states it: one of the 13, or a string this
/// implementation does not know (which makes the object unsupported, not the file invalid).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum StorageType {
    /// A known storage type.
    Known(DType),
    /// An unknown dtype string, preserved.
    Unknown(crate::Spelling),
}

impl StorageType {
    /// The known dtype, if any.
    pub fn known(&self) -> Option<DType> {
        match self {
            StorageType::Known(d) => Some(*d),
            StorageType::Unknown(_) => None,
        }
    }
}

impl From<DType> for StorageType {
    fn from(d: DType) -> StorageType {
        StorageType::Known(d)
    }
}

impl fmt::Display for StorageType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StorageType::Known(d) => f.write_str(d.name()),
            StorageType::Unknown(s) => f.write_str(s),
        }
    }
}

/// What a component's bytes mean, beyond their storage type (v1.2 `type`; v1.1 spells the
/// same types as dtypes).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LogicalType {
    /// FP8 E4M3, finite-only variant (OCP / NVIDIA); v1.1 calls it `f8_e4m3`.
    F8E4M3Fn,
    /// FP8 E5M2 (OCP).
    F8E5M2,
    /// FP8 E4M3, finite, unsigned zero (AMD).
    F8E4M3Fnuz,
    /// FP8 E5M2, finite, unsigned zero (AMD).
    F8E5M2Fnuz,
    /// Interleaved `[real, imag]` pairs of `f32`.
    Complex64,
    /// Interleaved `[real, imag]` pairs of `f64`.
    Complex128,
    /// A logical type this implementation does not know, preserved. Readers may fall back to
    /// the storage type.
    Unknown(crate::Spelling),
}

impl LogicalType {
    /// The v1.2 `type` spelling.
    pub fn name(&self) -> &str {
        match self {
            LogicalType::F8E4M3Fn => "f8_e4m3fn",
            LogicalType::F8E5M2 => "f8_e5m2",
            LogicalType::F8E4M3Fnuz => "f8_e4m3fnuz",
            LogicalType::F8E5M2Fnuz => "f8_e5m2fnuz",
            LogicalType::Complex64 => "complex64",
            LogicalType::Complex128 => "complex128",
            LogicalType::Unknown(s) => s,
        }
    }

    /// Parses a v1.2 `type` string; unknown strings are preserved.
    pub fn from_name(name: &str) -> LogicalType {
        match name {
            "f8_e4m3fn" => LogicalType::F8E4M3Fn,
            "f8_e5m2" => LogicalType::F8E5M2,
            "f8_e4m3fnuz" => LogicalType::F8E4M3Fnuz,
            "f8_e5m2fnuz" => LogicalType::F8E5M2Fnuz,
            "complex64" => LogicalType::Complex64,
            "complex128" => LogicalType::Complex128,
            other => LogicalType::Unknown(other.into()),
        }
    }

    /// The storage type a known logical type must be stored as.
    pub fn storage(&self) -> Option<DType> {
        match self {
            LogicalType::F8E4M3Fn
            | LogicalType::F8E5M2
            | LogicalType::F8E4M3Fnuz
            | LogicalType::F8E5M2Fnuz => Some(DType::U8),
            LogicalType::Complex64 => Some(DType::F32),
            LogicalType::Complex128 => Some(DType::F64),
            LogicalType::Unknown(_) => None,
        }
    }

    /// Storage elements per logical element (2 for complex, 1 otherwise, 1 when unknown).
    pub fn ratio(&self) -> u64 {
        match self {
            LogicalType::Complex64 | LogicalType::Complex128 => 2,
            _ => 1,
        }
    }

    /// The v1.1 `dtype` spelling of this logical type, where v1.1 has one.
    pub fn v1_1_dtype_name(&self) -> Option<&'static str> {
        match self {
            LogicalType::F8E4M3Fn => Some("f8_e4m3"),
            LogicalType::F8E5M2 => Some("f8_e5m2"),
            LogicalType::Complex64 => Some("complex64"),
            LogicalType::Complex128 => Some("complex128"),
            _ => None,
        }
    }

    /// Parses a v1.1 `dtype` that names a logical type (`f8_e4m3`, `f8_e5m2`, `complex64`,
    /// `complex128`), giving the logical type it stands for.
    pub fn from_v1_1_dtype_name(name: &str) -> Option<LogicalType> {
        match name {
            "f8_e4m3" => Some(LogicalType::F8E4M3Fn),
            "f8_e5m2" => Some(LogicalType::F8E5M2),
            "complex64" => Some(LogicalType::Complex64),
            "complex128" => Some(LogicalType::Complex128),
            _ => None,
        }
    }
}

impl fmt::Display for LogicalType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The microscaling element types (OCP MX: FP4 E2M1, FP6 E2M3 and E3M2, the E8M0 scale) that
/// zTensor 2 and safetensors hold and zTensor 1.x does not register. In the object model they
/// are a `u8` component of this logical type, its shape counting elements, its bytes as
/// zTensor 2 and safetensors store them:
///
/// - `f8_e8m0` (zTensor 2 registry): one byte an element, the exponent `e` meaning `2^(e−127)`,
///   `0xFF` NaN.
/// - `f4_e2m1` (zTensor 2 registry): two elements a byte, the first in the low nibble; an odd
///   count leaves the last byte's high nibble zero.
/// - `f6_e2m3`, `f6_e3m2` (not in zTensor 2's registry, named as it names FP4; a logical type
///   its readers keep without decoding): four elements in three bytes, packed as a stream of
///   bits from each byte's least significant bit up, element `i` in bits `6i..6i+6`; the bits
///   past the last element are zero.
///
/// The same rule for all: element `i` of `b` bits is bits `b·i..b·(i+1)` of the little-endian
/// bit stream, which is FP4's low-nibble-first order.
///
/// ```
/// use ztensor_format::{LogicalType, MxType};
/// let fp4 = MxType::of(&LogicalType::from_name("f4_e2m1")).unwrap();
/// assert_eq!((fp4.bits(), fp4.stored_len(5), fp4.safetensors_name()), (4, Some(3), "F4"));
/// assert_eq!(MxType::F6E3M2.stored_len(4), Some(3));
/// assert_eq!(MxType::of(&LogicalType::F8E4M3Fn), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MxType {
    /// FP4 E2M1, two a byte.
    F4E2M1,
    /// FP6 E2M3, four in three bytes.
    F6E2M3,
    /// FP6 E3M2, four in three bytes.
    F6E3M2,
    /// The E8M0 scale, one a byte.
    F8E8M0,
}

impl MxType {
    /// Every microscaling type.
    pub const ALL: [MxType; 4] = [MxType::F4E2M1, MxType::F6E2M3, MxType::F6E3M2, MxType::F8E8M0];

    /// The logical type's name (zTensor 2 `type`).
    pub fn name(self) -> &'static str {
        match self {
            MxType::F4E2M1 => "f4_e2m1",
            MxType::F6E2M3 => "f6_e2m3",
            MxType::F6E3M2 => "f6_e3m2",
            MxType::F8E8M0 => "f8_e8m0",
        }
    }

    /// The microscaling type named `name`, if it is one.
    pub fn from_name(name: &str) -> Option<MxType> {
        MxType::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The microscaling type logical type `t` names, if it names one.
    pub fn of(t: &LogicalType) -> Option<MxType> {
        match t {
            LogicalType::Unknown(name) => MxType::from_name(name),
            _ => None,
        }
    }

    /// This type as a logical type of the object model.
    pub fn logical_type(self) -> LogicalType {
        LogicalType::Unknown(self.name().into())
    }

    /// Bits an element.
    pub fn bits(self) -> u64 {
        match self {
            MxType::F4E2M1 => 4,
            MxType::F6E2M3 | MxType::F6E3M2 => 6,
            MxType::F8E8M0 => 8,
        }
    }

    /// The bytes `n` elements take (`None` on overflow).
    pub fn stored_len(self, n: u64) -> Option<u64> {
        Some(n.checked_mul(self.bits())?.div_ceil(8))
    }

    /// The safetensors dtype that stores this type the same way.
    pub fn safetensors_name(self) -> &'static str {
        match self {
            MxType::F4E2M1 => "F4",
            MxType::F6E2M3 => "F6_E2M3",
            MxType::F6E3M2 => "F6_E3M2",
            MxType::F8E8M0 => "F8_E8M0",
        }
    }

    /// What the type is, in words, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            MxType::F4E2M1 => "FP4, two elements a byte",
            MxType::F6E2M3 | MxType::F6E3M2 => "FP6, four elements in three bytes",
            MxType::F8E8M0 => "the E8M0 scale exponent",
        }
    }
}

/// The bytes a dense tensor of `n` elements of storage type `dtype` and logical type
/// `logical` takes, as every writer and in-memory source counts them: `n` times the storage
/// width times the logical type's ratio (two for complex), or for a microscaling type on `u8`
/// its packed length ([`MxType::stored_len`]). `None` on overflow.
///
/// ```
/// use ztensor_format::{DType, LogicalType, MxType, dense_len};
/// assert_eq!(dense_len(DType::F32, Some(&LogicalType::Complex64), 3), Some(24));
/// assert_eq!(dense_len(DType::U8, Some(&MxType::F4E2M1.logical_type()), 5), Some(3));
/// assert_eq!(dense_len(DType::BF16, None, 4), Some(8));
/// ```
pub fn dense_len(dtype: DType, logical: Option<&LogicalType>, n: u64) -> Option<u64> {
    match logical.and_then(MxType::of) {
        Some(mx) if dtype == DType::U8 => mx.stored_len(n),
        _ => n.checked_mul(dtype.size())?.checked_mul(logical.map_or(1, LogicalType::ratio)),
    }
}

/// The zTensor storage and logical types of a PyTorch dtype, by the name torch gives it
/// (`bfloat16`, `float8_e4m3fn`): the one table every reader of PyTorch's files (checkpoints,
/// Distributed Checkpoints) goes by. `None` for a dtype zTensor has no type for (`complex32`,
/// the quantized ones, `float8_e8m0fnu`).
///
/// ```
/// use ztensor_format::{DType, LogicalType, torch_dtype};
/// assert_eq!(torch_dtype("bfloat16"), Some((DType::BF16, None)));
/// assert_eq!(torch_dtype("float8_e5m2"), Some((DType::U8, Some(LogicalType::F8E5M2))));
/// assert_eq!(torch_dtype("complex32"), None);
/// ```
pub fn torch_dtype(name: &str) -> Option<(DType, Option<LogicalType>)> {
    Some(match name {
        "float64" => (DType::F64, None),
        "float32" => (DType::F32, None),
        "float16" => (DType::F16, None),
        "bfloat16" => (DType::BF16, None),
        "int64" => (DType::I64, None),
        "int32" => (DType::I32, None),
        "int16" => (DType::I16, None),
        "int8" => (DType::I8, None),
        "uint8" => (DType::U8, None),
        "uint16" => (DType::U16, None),
        "uint32" => (DType::U32, None),
        "uint64" => (DType::U64, None),
        "bool" => (DType::Bool, None),
        "complex64" => (DType::F32, Some(LogicalType::Complex64)),
        "complex128" => (DType::F64, Some(LogicalType::Complex128)),
        "float8_e4m3fn" => (DType::U8, Some(LogicalType::F8E4M3Fn)),
        "float8_e5m2" => (DType::U8, Some(LogicalType::F8E5M2)),
        "float8_e4m3fnuz" => (DType::U8, Some(LogicalType::F8E4M3Fnuz)),
        "float8_e5m2fnuz" => (DType::U8, Some(LogicalType::F8E5M2Fnuz)),
        _ => return None,
    })
}

/// The name PyTorch gives the dtype of zTensor's `dtype` and `logical` types: the inverse of
/// [`torch_dtype`], for writers of PyTorch's records. `None` for a type torch has no dtype for.
///
/// ```
/// use ztensor_format::{DType, LogicalType, torch_name};
/// assert_eq!(torch_name(DType::BF16, None), Some("bfloat16"));
/// assert_eq!(torch_name(DType::U8, Some(&LogicalType::F8E5M2)), Some("float8_e5m2"));
/// assert_eq!(torch_name(DType::U16, Some(&LogicalType::F8E5M2)), None);
/// ```
pub fn torch_name(dtype: DType, logical: Option<&LogicalType>) -> Option<&'static str> {
    TORCH_NAMES
        .iter()
        .copied()
        .find(|name| torch_dtype(name).is_some_and(|(d, l)| d == dtype && l.as_ref() == logical))
}

/// Every dtype name [`torch_dtype`] knows.
const TORCH_NAMES: [&str; 19] = [
    "float64",
    "float32",
    "float16",
    "bfloat16",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bool",
    "complex64",
    "complex128",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_sizes() {
        let total: u64 = DType::ALL.iter().map(|d| d.size()).sum();
        assert_eq!(total, 3 * 8 + 3 * 4 + 4 * 2 + 3);
        for d in DType::ALL {
            assert_eq!(DType::from_name(d.name()), Some(d));
            assert_eq!(DType::from_v0_name(d.v0_name()), Some(d));
        }
        assert_eq!(DType::from_name("float32"), None);
        assert_eq!(DType::from_v0_name("f32"), None);
        assert_eq!(DType::from_name("F32"), None);
    }

    #[test]
    fn every_torch_name_is_its_own_inverse() {
        for name in TORCH_NAMES {
            let (dtype, logical) = torch_dtype(name).expect(name);
            assert_eq!(torch_name(dtype, logical.as_ref()), Some(name));
        }
    }

    #[test]
    fn logical_types() {
        for name in
            ["f8_e4m3fn", "f8_e5m2", "f8_e4m3fnuz", "f8_e5m2fnuz", "complex64", "complex128"]
        {
            let t = LogicalType::from_name(name);
            assert!(!matches!(t, LogicalType::Unknown(_)));
            assert_eq!(t.name(), name);
        }
        assert_eq!(LogicalType::Complex128.storage(), Some(DType::F64));
        assert_eq!(LogicalType::Complex64.ratio(), 2);
        assert_eq!(LogicalType::from_v1_1_dtype_name("f8_e4m3"), Some(LogicalType::F8E4M3Fn));
        assert_eq!(LogicalType::F8E4M3Fnuz.v1_1_dtype_name(), None);
        assert_eq!(LogicalType::from_name("f4_e2m1"), LogicalType::Unknown("f4_e2m1".into()));
    }
}
