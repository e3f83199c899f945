//! The GGML tensor types: each one's block of elements and its bytes.

use ztensor_format::DType;

/// A GGML tensor type: its name, elements per block and bytes per block, and the zTensor type
/// of plain (block size 1) types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GgmlType {
    /// The type number in the file.
    pub id: u32,
    /// Its name (`Q4_K`, `F16`, …).
    pub name: &'static str,
    /// Elements per block (1 for plain types).
    pub block: u64,
    /// Bytes per block.
    pub size: u64,
    /// The zTensor storage type of a plain type.
    pub dtype: Option<DType>,
}

const fn t(id: u32, name: &'static str, block: u64, size: u64, dtype: Option<DType>) -> GgmlType {
    GgmlType { id, name, block, size, dtype }
}

/// Every GGML type this reader knows (ggml's `ggml_type`; numbers 4, 5 and 31-33 are retired).
pub const TYPES: &[GgmlType] = &[
    t(0, "F32", 1, 4, Some(DType::F32)),
    t(1, "F16", 1, 2, Some(DType::F16)),
    t(2, "Q4_0", 32, 18, None),
    t(3, "Q4_1", 32, 20, None),
    t(6, "Q5_0", 32, 22, None),
    t(7, "Q5_1", 32, 24, None),
    t(8, "Q8_0", 32, 34, None),
    t(9, "Q8_1", 32, 40, None),
    t(10, "Q2_K", 256, 84, None),
    t(11, "Q3_K", 256, 110, None),
    t(12, "Q4_K", 256, 144, None),
    t(13, "Q5_K", 256, 176, None),
    t(14, "Q6_K", 256, 210, None),
    t(15, "Q8_K", 256, 292, None),
    t(16, "IQ2_XXS", 256, 66, None),
    t(17, "IQ2_XS", 256, 74, None),
    t(18, "IQ3_XXS", 256, 98, None),
    t(19, "IQ1_S", 256, 50, None),
    t(20, "IQ4_NL", 32, 18, None),
    t(21, "IQ3_S", 256, 110, None),
    t(22, "IQ2_S", 256, 82, None),
    t(23, "IQ4_XS", 256, 136, None),
    t(24, "I8", 1, 1, Some(DType::I8)),
    t(25, "I16", 1, 2, Some(DType::I16)),
    t(26, "I32", 1, 4, Some(DType::I32)),
    t(27, "I64", 1, 8, Some(DType::I64)),
    t(28, "F64", 1, 8, Some(DType::F64)),
    t(29, "IQ1_M", 256, 56, None),
    t(30, "BF16", 1, 2, Some(DType::BF16)),
    t(34, "TQ1_0", 256, 54, None),
    t(35, "TQ2_0", 256, 66, None),
    t(39, "MXFP4", 32, 17, None),
    t(40, "NVFP4", 64, 36, None),
    t(41, "Q1_0", 128, 18, None),
];

/// The GGML type of number `id`.
pub fn ggml_type(id: u32) -> Option<&'static GgmlType> {
    TYPES.iter().find(|t| t.id == id)
}
