//! PyTorch's dtypes as its pickles name them: what the pickle machine recognises in a
//! checkpoint and what the checkpoint reader sizes storages by.

/// PyTorch's dtypes: the name, the legacy storage class, the element size.
const DTYPES: &[(&str, Option<&str>, u64)] = &[
    ("float64", Some("DoubleStorage"), 8),
    ("float32", Some("FloatStorage"), 4),
    ("float16", Some("HalfStorage"), 2),
    ("bfloat16", Some("BFloat16Storage"), 2),
    ("int64", Some("LongStorage"), 8),
    ("int32", Some("IntStorage"), 4),
    ("int16", Some("ShortStorage"), 2),
    ("int8", Some("CharStorage"), 1),
    ("uint8", Some("ByteStorage"), 1),
    ("bool", Some("BoolStorage"), 1),
    ("complex128", Some("ComplexDoubleStorage"), 16),
    ("complex64", Some("ComplexFloatStorage"), 8),
    ("complex32", Some("ComplexHalfStorage"), 4),
    ("uint16", None, 2),
    ("uint32", None, 4),
    ("uint64", None, 8),
    ("float8_e4m3fn", None, 1),
    ("float8_e5m2", None, 1),
    ("float8_e4m3fnuz", None, 1),
    ("float8_e5m2fnuz", None, 1),
    ("float8_e8m0fnu", None, 1),
    ("qint8", Some("QInt8Storage"), 1),
    ("quint8", Some("QUInt8Storage"), 1),
    ("qint32", Some("QInt32Storage"), 4),
    ("quint4x2", Some("QUInt4x2Storage"), 1),
    ("quint2x4", Some("QUInt2x4Storage"), 1),
];

/// The dtype a legacy storage class (`FloatStorage`) holds.
pub(crate) fn dtype_of_storage(class: &str) -> Option<&'static str> {
    DTYPES.iter().find(|(_, s, _)| *s == Some(class)).map(|(d, _, _)| *d)
}

/// The dtype called `name` (`float8_e4m3fn`), as a static name.
pub(crate) fn dtype_named(name: &str) -> Option<&'static str> {
    DTYPES.iter().find(|(d, _, _)| *d == name).map(|(d, _, _)| *d)
}

/// The bytes of one element of `dtype` (1 for a name not in the table).
pub(crate) fn element_size(dtype: &str) -> u64 {
    DTYPES.iter().find(|(d, _, _)| *d == dtype).map_or(1, |(_, _, n)| *n)
}
