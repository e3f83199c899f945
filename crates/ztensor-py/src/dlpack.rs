//! DLPack export of a component's bytes (`__dlpack__`), so `torch.from_dlpack`,
//! `numpy.from_dlpack` and JAX take them without a copy, bfloat16 and FP8 included (NumPy itself
//! cannot export those: its arrays of them are `ml_dtypes` extension types).
//!
//! The DLPack structures, capsules and the request's rules (ABI version, device, `copy`) come
//! from `dlpark`; this module says what the bytes are (element type, shape) and who keeps them
//! alive (the Python object that owns them, [`Exportable`], held by the capsule's context until
//! the consumer lets go).

use std::ffi::c_void;

use dlpark::ffi::{
    DLDataType, DLDataTypeCode, DLDevice, DLManagedTensor, DLManagedTensorVersioned,
};
use dlpark::metadata::Dynamic;
use dlpark::python::{DlpackExporter, ExportRequest, export_dlpack};
use dlpark::{DlpackFlags, Managed, ManagedTensorBase};
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::prelude::*;
use ztensor_format::{DType, LogicalType};

/// Bytes a Python object owns (or borrows from a file it keeps open), as DLPack exports them.
pub(crate) trait Exportable:
    pyo3::PyClass<Frozen = pyo3::pyclass::boolean_struct::True> + Sync
{
    /// The first byte and the length.
    fn raw(&self) -> (*const u8, usize);
    /// Whether the bytes lie in a file's shared, read-only map.
    fn mapped(&self) -> bool;
    /// A new object holding a copy of the bytes, its own.
    ///
    /// # Errors
    /// Python's, making the object.
    fn copied<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, Self>>;
    /// A new object over a private copy-on-write map of mapped bytes; `None` where none can
    /// be made.
    ///
    /// # Errors
    /// Python's, making the object.
    fn private<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, Self>>>;
    /// Lets bytes of the object's own be lent writable from now on.
    fn lend_writable(&self) -> bool;
}

/// The DLPack element type of a storage type, or of a logical type where DLPack has one.
fn element(dtype: DType, logical: Option<&LogicalType>) -> (DLDataType, u64) {
    use DLDataTypeCode as C;
    let scalar = |code, bits: u8| (DLDataType::scalar(code, bits), u64::from(bits) / 8);
    match logical {
        Some(LogicalType::F8E4M3Fn) => return scalar(C::FLOAT8_E4M3FN, 8),
        Some(LogicalType::F8E5M2) => return scalar(C::FLOAT8_E5M2, 8),
        Some(LogicalType::F8E4M3Fnuz) => return scalar(C::FLOAT8_E4M3FNUZ, 8),
        Some(LogicalType::F8E5M2Fnuz) => return scalar(C::FLOAT8_E5M2FNUZ, 8),
        Some(LogicalType::Complex64) => return scalar(C::COMPLEX, 64),
        Some(LogicalType::Complex128) => return scalar(C::COMPLEX, 128),
        Some(t) if ztensor_format::MxType::of(t) == Some(ztensor_format::MxType::F8E8M0) => {
            return scalar(C::FLOAT8_E8M0FNU, 8);
        }
        // A logical type this package does not know is read as its storage type, as the
        // format allows.
        Some(LogicalType::Unknown(_)) | None => {}
    }
    let bits = u8::try_from(dtype.size() * 8).unwrap_or(u8::MAX);
    let code = match dtype {
        DType::F64 | DType::F32 | DType::F16 => C::FLOAT,
        DType::BF16 => C::BFLOAT,
        DType::I64 | DType::I32 | DType::I16 | DType::I8 => C::INT,
        DType::U64 | DType::U32 | DType::U16 | DType::U8 => C::UINT,
        DType::Bool => C::BOOL,
    };
    scalar(code, bits)
}

/// The reference a capsule's context holds, given back when the deleter drops it, on whatever
/// thread that is: with the interpreter attached there and then (a capsule's destructor runs
/// with the GIL held but outside pyo3, which would otherwise defer the release to its next
/// call).
struct Held(Option<Py<PyAny>>);

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(owner) = self.0.take() {
            // Where the interpreter cannot be attached (it is shutting down), the closure is
            // dropped uncalled, and pyo3 defers the release.
            let _ = Python::try_attach(move |_| drop(owner));
        }
    }
}

/// One export: the object that keeps the memory alive, where the elements are, their type and
/// shape, and whether a consumer may write them.
struct Export {
    owner: Py<PyAny>,
    data: *mut c_void,
    dtype: DLDataType,
    shape: Vec<i64>,
    read_only: bool,
}

impl Export {
    fn managed<M: ManagedTensorBase>(&self, py: Python<'_>) -> PyResult<Managed<M>> {
        // The context holds a reference to the `Bytes` (so to the map or the decoded buffer)
        // until the consumer calls the deleter.
        let context = Box::new(Held(Some(self.owner.clone_ref(py))));
        let mut tensor = Dynamic::compact(self.shape.clone())
            .initialize_as::<M>(context)
            .map_err(|e| PyValueError::new_err(format!("cannot describe the tensor: {e}")))?;
        tensor.set_data(self.data).set_device(DLDevice::CPU).set_dtype(self.dtype);
        if self.read_only {
            tensor
                .set_flags(DlpackFlags::READ_ONLY)
                .map_err(|e| PyBufferError::new_err(e.to_string()))?;
        }
        // SAFETY: `data` points at `product(shape)` elements of `dtype` (checked in `export`)
        // that the context's `Bytes` keeps alive until the deleter runs; the strides are the
        // compact ones `Dynamic::compact` wrote; `READ_ONLY` is set for memory that must not be
        // written (a read-only map), and decoded bytes exported writable belong to the `Bytes`
        // alone and sit behind no Rust reference.
        Ok(unsafe { tensor.finish() })
    }
}

impl DlpackExporter for Export {
    fn device(&self) -> DLDevice {
        DLDevice::CPU
    }

    fn flags(&self) -> DlpackFlags {
        if self.read_only { DlpackFlags::READ_ONLY } else { DlpackFlags::empty() }
    }

    fn prepare_export(&self, _py: Python<'_>, _request: &ExportRequest<'_>) -> PyResult<()> {
        // CPU memory, already in place: no stream to wait on.
        Ok(())
    }

    fn export_legacy(&self, py: Python<'_>) -> PyResult<Managed<DLManagedTensor>> {
        self.managed(py)
    }

    fn export_versioned(&self, py: Python<'_>) -> PyResult<Managed<DLManagedTensorVersioned>> {
        self.managed(py)
    }
}

/// What `__dlpack__` answers for `bytes` holding elements of `dtype` (and `logical`), shaped
/// `shape`. `copy=True` exports a private copy (writable); otherwise decoded bytes themselves,
/// and bytes of the file's map as a private copy-on-write map of them: zero-copy until
/// written, flagged read-only to a consumer of DLPack 1.0 or later, and written in pages of
/// its own by any that writes anyway (a copy where no such map can be made, refused with
/// `copy=False`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn export<'py, B: Exportable>(
    bytes: Bound<'py, B>,
    dtype: &str,
    logical: Option<&str>,
    shape: Vec<u64>,
    stream: Option<&Bound<'py, PyAny>>,
    max_version: Option<(u32, u32)>,
    dl_device: Option<(u32, i32)>,
    copy: Option<bool>,
) -> PyResult<Py<PyAny>> {
    let py = bytes.py();
    let storage = DType::from_name(dtype)
        .ok_or_else(|| PyValueError::new_err(format!("unknown storage type {dtype:?}")))?;
    let logical = logical.map(LogicalType::from_name);
    let len = bytes.get().raw().1 as u64;
    let count = shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d));
    let mx = logical.as_ref().and_then(ztensor_format::MxType::of);
    let mut shape = shape;
    let dtype = if mx == Some(ztensor_format::MxType::F4E2M1)
        && count.is_some_and(|n| n.div_ceil(2) == len)
    {
        // Packed FP4, two elements a byte: DLPack's FLOAT4_E2M1FN of two lanes, the shape
        // counting bytes along the last dimension, as torch's `float4_e2m1fn_x2` is exported
        // and taken (torch refuses one lane).
        match shape.last_mut() {
            Some(last) if *last % 2 == 0 => *last /= 2,
            _ => {
                return Err(PyBufferError::new_err(format!(
                    "packed f4_e2m1 of shape {shape:?}: DLPack's two-lane FP4 (torch's \
                     float4_e2m1fn_x2) needs an even last dimension"
                )));
            }
        }
        DLDataType { code: DLDataTypeCode::FLOAT4_E2M1FN, bits: 4, lanes: 2 }
    } else if let Some(code) = mx
        .and_then(|mx| match mx {
            ztensor_format::MxType::F6E2M3 => Some(DLDataTypeCode::FLOAT6_E2M3FN),
            ztensor_format::MxType::F6E3M2 => Some(DLDataTypeCode::FLOAT6_E3M2FN),
            _ => None,
        })
        .filter(|_| count.and_then(|n| n.checked_mul(6)).map(|b| b.div_ceil(8)) == Some(len))
    {
        // Packed FP6, as DLPack 1.1 describes it: six bits, one lane, the element `i` at bits
        // `6i..6i+6` of the little-endian bit stream (this format's packing), the shape
        // counting elements.
        DLDataType { code, bits: 6, lanes: 1 }
    } else {
        // Elements of the logical type when the shape counts those, else of the storage type
        // (a shape that counts storage elements, as some writers give for complex data).
        [element(storage, logical.as_ref()), element(storage, None)]
            .into_iter()
            .find(|(_, size)| count.and_then(|n| n.checked_mul(*size)) == Some(len))
            .ok_or_else(|| {
                PyBufferError::new_err(format!(
                    "{len} bytes do not hold a tensor of shape {shape:?} and type {}",
                    logical.as_ref().map_or(dtype, |l| l.name())
                ))
            })?
            .0
    };
    let shape = shape
        .iter()
        .map(|&d| i64::try_from(d))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| PyBufferError::new_err("a dimension past DLPack's range"))?;

    // The file's map is shared and read-only; consumers do not all honour DLPack's read-only
    // flag (torch writes through it), and a write there faults. Mapped bytes are exported as
    // a private copy-on-write map of them instead: zero-copy until written, and what is
    // written stays the consumer's. Where none can be made (bytes given, a file replaced since
    // it was opened), a copy.
    let mapped = bytes.get().mapped();
    let copied = copy == Some(true);
    let bytes = if copied {
        bytes.get().copied(py)?
    } else if mapped {
        match bytes.get().private(py)? {
            Some(private) => private,
            None if copy == Some(false) => {
                return Err(PyBufferError::new_err(
                    "tensor data lies in the file's read-only map, of which no private map can \
                     be made (the file was replaced since it was opened, or is not a file): \
                     allow a copy",
                ));
            }
            None => bytes.get().copied(py)?,
        }
    } else {
        bytes
    };
    // A private map of the file is flagged read-only to a consumer that can be told (NumPy
    // then makes read-only arrays of it, as of the file); one that cannot (DLPack before 1.0:
    // JAX) or does not listen (torch) writes to pages of its own.
    let legacy = max_version.is_none_or(|(major, _)| major < 1);
    let read_only = mapped && !copied && !legacy;
    // What was made here is what `dlpark` is asked to export, without a copy of its own.
    let made = copied || mapped;
    let request =
        ExportRequest::parse(stream, max_version, dl_device, if made { None } else { copy })?;
    if !read_only {
        // Decoded bytes (or a private map) are this object's own: a consumer may write them
        // (the component's NumPy array sees a change to decoded bytes, as a torch tensor made
        // from NumPy would).
        bytes.get().lend_writable();
    }
    let data = bytes.get().raw().0.cast_mut().cast::<c_void>();
    let export = Export { owner: bytes.into_any().unbind(), data, dtype, shape, read_only };
    export_dlpack(&export, py, request)
}
