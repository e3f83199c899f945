//! `ztensor_rs._native`, the extension module under the `ztensor_rs` Python package.
//!
//! The Python layer (`python/ztensor_rs/__init__.py`) gives the API people use: `safe_open`,
//! `load_file`, `save_file`, `load`, `save`. This module gives it what only Rust can: files of
//! every format opened through the tensor-source interface, object descriptions, decoded and
//! checked component bytes (borrowed from the file's map when nothing had to be decoded,
//! exported through the buffer protocol without a copy), and writing on the parallel engine.
//! The GIL is released while bytes are read, decoded, hashed or written.
//!
//! Besides the crates below it, this is the one crate with `unsafe`: the buffer protocol is a C
//! interface (it fills a `Py_buffer`), and maps are opened here. Every block says why it holds.

use std::borrow::Cow;
use std::ffi::{c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyBufferError, PyOSError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple,
};
use rayon::prelude::*;
use ztensor_format::attributes::Item as Cbor;
use ztensor_format::{
    Attributes, DType, DigestAlgorithm, Encoding, Options, StorageType, Value, ValueRef, Version,
};
use ztensor_io::{FileWriter, TensorSource, WriteOptions, Writer};
use ztensor_par::{ParOptions, Tensor};

/// An error of any layer, turned into the Python exception for it (classes from
/// `ztensor_rs._errors`, so they can also derive from `ValueError`, `KeyError`, …).
struct Raised(PyErr);

impl From<PyErr> for Raised {
    fn from(e: PyErr) -> Raised {
        Raised(e)
    }
}

impl From<Raised> for PyErr {
    fn from(e: Raised) -> PyErr {
        e.0
    }
}

type PyResultR<T> = std::result::Result<T, Raised>;

/// The exception class `name` of `ztensor_rs._errors`, called with `message` and given the
/// attributes `rule`, `object` and `offset`.
fn exception(
    py: Python<'_>,
    name: &str,
    message: String,
    rule: Option<&str>,
    object: Option<&str>,
    offset: Option<u64>,
) -> PyErr {
    let made = (|| -> PyResult<PyErr> {
        let class = py.import("ztensor_rs._errors")?.getattr(name)?;
        let value = class.call1((message,))?;
        value.setattr("rule", rule)?;
        value.setattr("object", object)?;
        value.setattr("offset", offset)?;
        Ok(PyErr::from_value(value))
    })();
    made.unwrap_or_else(|e| e)
}

/// An `OSError` with the operating system's errno: the one the system gave, or for a refusal
/// of our own (a FIFO given as input, a file over a cap) the errno that says the same. An I/O
/// failure with no such errno is a `ZTensorError`, never an `OSError` with errno 0.
fn io_error(e: &std::io::Error, message: String) -> PyErr {
    use std::io::ErrorKind as K;
    let errno = e.raw_os_error().or(match e.kind() {
        K::NotFound => Some(libc_errno::ENOENT),
        K::PermissionDenied => Some(libc_errno::EACCES),
        K::AlreadyExists => Some(libc_errno::EEXIST),
        K::InvalidInput => Some(libc_errno::EINVAL),
        K::IsADirectory => Some(libc_errno::EISDIR),
        K::NotADirectory => Some(libc_errno::ENOTDIR),
        K::FileTooLarge => Some(libc_errno::EFBIG),
        K::StorageFull => Some(libc_errno::ENOSPC),
        K::OutOfMemory => Some(libc_errno::ENOMEM),
        K::Interrupted => Some(libc_errno::EINTR),
        K::WouldBlock => Some(libc_errno::EAGAIN),
        _ => None,
    });
    match errno {
        // OSError(errno, message) picks the subclass (FileNotFoundError, PermissionError, …).
        Some(errno) => PyOSError::new_err((errno, message)),
        None => Python::attach(|py| exception(py, "ZTensorError", message, None, None, None)),
    }
}

/// The POSIX numbers of the errors above (the same on every platform CPython names them for).
mod libc_errno {
    pub const ENOENT: i32 = 2;
    pub const EINTR: i32 = 4;
    pub const EAGAIN: i32 = 11;
    pub const ENOMEM: i32 = 12;
    pub const EACCES: i32 = 13;
    pub const EEXIST: i32 = 17;
    pub const ENOTDIR: i32 = 20;
    pub const EISDIR: i32 = 21;
    pub const EINVAL: i32 = 22;
    pub const EFBIG: i32 = 27;
    pub const ENOSPC: i32 = 28;
}

fn raise_io(py: Python<'_>, e: &ztensor_io::Error) -> PyErr {
    use ztensor_io::ErrorKind as K;
    match e.kind() {
        K::Io { source, .. } => io_error(source, e.to_string()),
        K::Format(f) => {
            exception(py, "FormatError", e.to_string(), Some(f.kind().id()), f.object(), f.offset())
        }
        K::Unsupported(f) => exception(
            py,
            "UnsupportedError",
            e.to_string(),
            Some(f.kind().id()),
            f.object(),
            f.offset(),
        ),
        K::NotFound { object, .. } => {
            exception(py, "ObjectNotFoundError", e.to_string(), None, Some(object), None)
        }
        _ => exception(py, "ZTensorError", e.to_string(), None, None, None),
    }
}

fn raise_foreign(py: Python<'_>, e: &ztensor_foreign::Error) -> PyErr {
    use ztensor_foreign::ErrorKind as K;
    if let Some(inner) = e.ztensor_error() {
        return raise_io(py, inner);
    }
    match e.kind() {
        K::Io => match e.io_error() {
            Some(source) => io_error(source, e.to_string()),
            None => exception(py, "ZTensorError", e.to_string(), None, e.tensor(), None),
        },
        K::NotFound => exception(py, "ObjectNotFoundError", e.to_string(), None, e.tensor(), None),
        K::Unrepresentable => {
            exception(py, "UnsupportedError", e.to_string(), None, e.tensor(), None)
        }
        _ => exception(py, "FormatError", e.to_string(), None, e.tensor(), None),
    }
}

fn raise_tb(py: Python<'_>, e: &ztensor_tensorbuffers::Error) -> PyErr {
    if e.kind() == ztensor_tensorbuffers::ErrorKind::Io {
        return match e.io_error() {
            Some(source) => io_error(source, e.to_string()),
            None => exception(py, "ZTensorError", e.to_string(), None, e.tensor_name(), None),
        };
    }
    exception(py, "FormatError", e.to_string(), Some(e.kind().id()), e.tensor_name(), e.offset())
}

/// An open input: a tensor source of any format, and where its bytes lie in memory when they
/// do (a map, or bytes handed over), so component bytes borrowed from there go to Python
/// without a copy.
struct Opened {
    source: Box<dyn TensorSource + Send + Sync>,
    /// Start and length of the memory the source reads from, when it is in memory.
    base: Option<(*const u8, usize)>,
}

// SAFETY: `base` points into memory that `source` owns (a read-only map, or a byte vector it
// never changes) for as long as `source` lives, and nothing writes through it: sharing or
// sending that read-only address is as safe as sharing the source itself, which is
// `Send + Sync`.
unsafe impl Send for Opened {}
// SAFETY: as for `Send`: the pointer is only read, and the memory is never written.
unsafe impl Sync for Opened {}

impl Opened {
    /// Where `bytes` lie in the source's memory, when they were borrowed from it.
    fn shared(&self, bytes: &[u8]) -> Option<usize> {
        let (base, len) = self.base?;
        let at = (bytes.as_ptr() as usize).checked_sub(base as usize)?;
        (at.checked_add(bytes.len())? <= len).then_some(at)
    }

    /// Object `index`, decoded, with every digest the format keeps and its data rules checked.
    fn read(&self, index: usize) -> ztensor_io::Result<Vec<Part>> {
        let data = self.source.read(index)?;
        self.source.check(index, &data)?;
        Ok(data
            .components
            .into_iter()
            .map(|(role, c)| {
                let bytes = match &c.bytes {
                    Cow::Borrowed(b) => match self.shared(b) {
                        Some(start) => Data::Shared { start, len: <[u8]>::len(b) },
                        None => Data::Owned(b.to_vec().into_boxed_slice()),
                    },
                    Cow::Owned(_) => Data::Owned(c.bytes.into_owned().into_boxed_slice()),
                };
                Part {
                    role,
                    dtype: c.dtype.name(),
                    logical: c.logical_type.map(|l| l.name().to_owned()),
                    bytes,
                }
            })
            .collect())
    }
}

/// A decoded component, before it becomes Python objects.
struct Part {
    role: String,
    dtype: &'static str,
    logical: Option<String>,
    bytes: Data,
}

enum Data {
    /// `len` bytes at `start` of the source's memory.
    Shared {
        start: usize,
        len: usize,
    },
    Owned(Box<[u8]>),
}

/// Read-only bytes of one component, exported through the buffer protocol: `numpy.frombuffer`
/// and `memoryview` see them without a copy. Bytes of a mapped file keep the file open.
#[pyclass(frozen, module = "ztensor_rs._native")]
struct Bytes {
    owner: Owner,
}

enum Owner {
    Shared { file: Arc<Opened>, start: usize, len: usize },
    Owned(Box<[u8]>),
}

impl Bytes {
    fn new(file: &Arc<Opened>, data: Data) -> Bytes {
        let owner = match data {
            Data::Shared { start, len } => Owner::Shared { file: Arc::clone(file), start, len },
            Data::Owned(b) => Owner::Owned(b),
        };
        Bytes { owner }
    }

    /// The first byte and the length.
    fn raw(&self) -> (*const u8, usize) {
        match &self.owner {
            Owner::Shared { file, start, len } => match file.base {
                // `start + len` lies within the memory (`Opened::shared` checked it).
                Some((base, _)) => (base.wrapping_add(*start), *len),
                None => (std::ptr::null(), 0),
            },
            Owner::Owned(b) => (b.as_ptr(), b.len()),
        }
    }
}

#[pymethods]
impl Bytes {
    /// Fills `view` with the bytes, read-only, one-dimensional, format `B`.
    ///
    /// # Safety
    /// Called by Python with a `Py_buffer` to fill (or null, refused).
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("no buffer view to fill"));
        }
        if flags & ffi::PyBUF_WRITABLE == ffi::PyBUF_WRITABLE {
            return Err(PyBufferError::new_err(
                "tensor data is read-only; copy it (numpy: .copy()) to change it",
            ));
        }
        let (ptr, len) = slf.get().raw();
        let len = isize::try_from(len).map_err(|_| PyBufferError::new_err("too large"))?;
        // SAFETY: `view` is a valid, writable `Py_buffer` (Python's contract for
        // `__getbuffer__`; null was refused above). `obj` takes a new reference to `slf`, which
        // owns the bytes (or the file whose memory holds them), so the pointer stays valid until
        // Python releases the view; the memory is never written. `format` points to a static
        // C string that Python only reads; `shape` and `strides` point into the view itself,
        // as the protocol allows for one dimension.
        unsafe {
            (*view).obj = slf.into_any().into_ptr();
            (*view).buf = ptr.cast_mut().cast::<c_void>();
            (*view).len = len;
            (*view).readonly = 1;
            (*view).itemsize = 1;
            (*view).format = if flags & ffi::PyBUF_FORMAT == ffi::PyBUF_FORMAT {
                c"B".as_ptr().cast_mut()
            } else {
                std::ptr::null_mut()
            };
            (*view).ndim = 1;
            (*view).shape = if flags & ffi::PyBUF_ND == ffi::PyBUF_ND {
                &raw mut (*view).len
            } else {
                std::ptr::null_mut()
            };
            (*view).strides = if flags & ffi::PyBUF_STRIDES == ffi::PyBUF_STRIDES {
                &raw mut (*view).itemsize
            } else {
                std::ptr::null_mut()
            };
            (*view).suboffsets = std::ptr::null_mut();
            (*view).internal = std::ptr::null_mut();
        }
        Ok(())
    }

    fn __len__(&self) -> usize {
        self.raw().1
    }

    /// Whether the bytes are borrowed from the file's memory map (no copy was made).
    #[getter]
    fn zero_copy(&self) -> bool {
        matches!(self.owner, Owner::Shared { .. })
    }
}

/// Limits fitted to this machine, as the command-line tool reads with.
fn options() -> Options {
    let mut options = Options::default();
    options.limits = ztensor_io::machine_limits();
    options
}

/// A refusal of the format registry as the Python exception its reader's error maps to.
fn raise_open(py: Python<'_>, e: &ztensor_registry::OpenError) -> PyErr {
    use ztensor_registry::{ErrorKind as K, OpenError};
    match e {
        OpenError::Detect(d) => match (d.kind(), d.io()) {
            (K::Io, Some(io)) => raise_io(py, io),
            (K::NotRead | K::Disabled, _) => {
                exception(py, "FormatError", d.to_string(), None, None, None)
            }
            _ => exception(py, "ZTensorError", d.to_string(), None, None, None),
        },
        OpenError::Zt(e) => raise_io(py, e),
        OpenError::Foreign(e) => raise_foreign(py, e),
        OpenError::TensorBuffers(e) => raise_tb(py, e),
        OpenError::Shard(e) => match e.ztensor_error() {
            Some(z) => raise_io(py, z),
            None if e.kind() == ztensor_shard::ErrorKind::Io => {
                io_error(&std::io::Error::other(e.to_string()), e.to_string())
            }
            None => exception(py, "FormatError", e.to_string(), None, None, None),
        },
        other => exception(py, "ZTensorError", other.to_string(), None, None, None),
    }
}

/// What the registry opens, kept with where its bytes lie in memory.
fn opened(
    py: Python<'_>,
    result: Result<ztensor_registry::Opened, ztensor_registry::OpenError>,
) -> PyResultR<Opened> {
    let opened = result.map_err(|e| Raised(raise_open(py, &e)))?;
    let base = opened.memory();
    Ok(Opened { source: opened.into_source(), base })
}

fn open_options() -> ztensor_registry::OpenOptions {
    ztensor_registry::OpenOptions { options: options(), carry_unknown_dtypes: false }
}

/// Opens the file at `path` through the format registry: mapped (zTensor, safetensors and
/// GGUF tensors then borrowed from the map) when `mmap`, else read with positional reads.
fn open_path(py: Python<'_>, path: &Path, mmap: bool) -> PyResultR<Opened> {
    let options = open_options();
    if mmap {
        // SAFETY: the file must not be truncated or changed while mapped. Files this package
        // writes are replaced by rename, never changed in place; for other writers the
        // documentation of `safe_open` states the rule (and `mmap=False` reads without a
        // map), as for any memory-mapped reader.
        opened(py, unsafe { ztensor_registry::open_mapped(path, &options) })
    } else {
        opened(py, ztensor_registry::open(path, &options))
    }
}

/// Opens `data` through the format registry; every format's tensors are borrowed from it.
fn open_bytes(py: Python<'_>, data: Vec<u8>) -> PyResultR<Opened> {
    opened(py, ztensor_registry::open_bytes(data, &open_options()))
}

/// A CBOR value as Python data: text as `str`, integers as `int`, byte strings as `bytes`,
/// arrays as `list`, maps as `dict` (keys converted the same way; a key Python cannot hash,
/// such as a list, becomes a tuple), tags as their content.
fn to_python<'py>(py: Python<'py>, value: ValueRef<'_>) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value.item() {
        Cbor::Integer(i) => i.into_pyobject(py)?.into_any(),
        Cbor::Bytes(b) => PyBytes::new(py, b).into_any(),
        Cbor::Text(t) => PyString::new(py, t).into_any(),
        Cbor::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_python(py, item)?)?;
            }
            list.into_any()
        }
        Cbor::Map(entries) => {
            let dict = PyDict::new(py);
            for (k, v) in entries {
                let mut key = to_python(py, k)?;
                if let Ok(list) = key.cast::<PyList>() {
                    key = PyTuple::new(py, list.iter())?.into_any();
                }
                dict.set_item(key, to_python(py, v)?)?;
            }
            dict.into_any()
        }
        Cbor::Tag(_, inner) => to_python(py, inner)?,
        Cbor::Bool(b) => PyBool::new(py, b).to_owned().into_any(),
        Cbor::Null | Cbor::Undefined => py.None().into_bound(py),
        Cbor::Simple(s) => s.into_pyobject(py)?.into_any(),
        Cbor::Float(f) => PyFloat::new(py, f).into_any(),
    })
}

/// Python data as attributes: a `dict` converted as [`from_python`] converts it.
fn attributes_from_python(value: &Bound<'_, PyAny>) -> PyResult<Attributes> {
    if !value.is_instance_of::<PyDict>() {
        return Err(PyValueError::new_err(format!(
            "attributes must be a dict, not {}",
            value.get_type().name()?
        )));
    }
    Attributes::try_from(from_python(value, 0)?)
        .map_err(|e| PyValueError::new_err(format!("attributes: {}", e.message())))
}

/// Python data as a CBOR value: the inverse of [`to_python`] for `str`, `int`, `float`,
/// `bool`, `None`, `bytes`, lists, tuples and dicts.
fn from_python(value: &Bound<'_, PyAny>, depth: usize) -> PyResult<Value> {
    if depth > 64 {
        return Err(PyValueError::new_err("attributes nested more than 64 deep"));
    }
    if value.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = value.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if value.is_instance_of::<PyInt>() {
        let i: i128 = value
            .extract()
            .map_err(|_| PyValueError::new_err("an integer attribute outside -2^64 ..= 2^64-1"))?;
        return Ok(Value::Integer(i));
    }
    if let Ok(f) = value.cast::<PyFloat>() {
        return Ok(Value::Float(f.value()));
    }
    if let Ok(s) = value.cast::<PyString>() {
        return Ok(Value::Text(s.to_str()?.to_owned()));
    }
    if let Ok(b) = value.cast::<PyBytes>() {
        return Ok(Value::Bytes(b.as_bytes().to_vec()));
    }
    if let Ok(b) = value.cast::<PyByteArray>() {
        return Ok(Value::Bytes(b.to_vec()));
    }
    if let Ok(d) = value.cast::<PyDict>() {
        let mut entries = Vec::with_capacity(d.len());
        for (k, v) in d.iter() {
            entries.push((from_python(&k, depth + 1)?, from_python(&v, depth + 1)?));
        }
        return Ok(Value::Map(entries));
    }
    if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        let mut items = Vec::new();
        for item in value.try_iter()? {
            items.push(from_python(&item?, depth + 1)?);
        }
        return Ok(Value::Array(items));
    }
    Err(PyValueError::new_err(format!(
        "an attribute of type {} (attributes hold str, int, float, bool, None, bytes, lists and dicts)",
        value.get_type().name()?
    )))
}

fn storage_name(t: &StorageType) -> &str {
    match t {
        StorageType::Known(d) => d.name(),
        StorageType::Unknown(s) => s,
    }
}

fn encoding_name(e: &Encoding) -> &str {
    e.name()
}

/// No object `name` in `source`: the error names it and, as the command-line tool does, the
/// closest names the source holds.
fn not_found(py: Python<'_>, source: &dyn TensorSource, name: &str) -> PyErr {
    let close = ztensor_io::close_names(source, name);
    let hint = match close.as_slice() {
        [] => String::new(),
        [one] => format!("; did you mean {one:?}?"),
        more => format!(
            "; did you mean one of {}?",
            more.iter().map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", ")
        ),
    };
    let message = format!("no object called {name:?}{hint}");
    exception(py, "ObjectNotFoundError", message, None, Some(name), None)
}

/// A file of tensors opened for reading: any zTensor version, safetensors (a file or a sharded
/// checkpoint's index) or TensorBuffers.
#[pyclass(frozen, module = "ztensor_rs._native")]
struct File {
    opened: Arc<Opened>,
}

impl File {
    fn index(&self, py: Python<'_>, name: &str) -> PyResult<usize> {
        let source = &*self.opened.source;
        source.find(name).ok_or_else(|| not_found(py, source, name))
    }

    /// `(name, format, shape, attributes, components)` of object `index`, read as `parts`.
    fn described<'py>(
        &self,
        py: Python<'py>,
        index: usize,
        parts: Vec<Part>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let info = self.opened.source.info(index).ok_or_else(|| {
            exception(py, "ZTensorError", "an object vanished".into(), None, None, None)
        })?;
        let attributes = info.attributes.as_ref().map(|a| to_python(py, a.root())).transpose()?;
        PyTuple::new(
            py,
            [
                PyString::new(py, &info.name).into_any(),
                PyString::new(py, info.format.name()).into_any(),
                PyTuple::new(py, info.shape.iter())?.into_any(),
                attributes.unwrap_or_else(|| py.None().into_bound(py)),
                self.parts_to_python(py, parts)?.into_any(),
            ],
        )
    }

    fn parts_to_python<'py>(
        &self,
        py: Python<'py>,
        parts: Vec<Part>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        for part in parts {
            let bytes = Bytes::new(&self.opened, part.bytes);
            out.set_item(part.role, (part.dtype, part.logical, Bound::new(py, bytes)?))?;
        }
        Ok(out)
    }
}

#[pymethods]
impl File {
    /// What the file is, for people: `zTensor 1.2`, `safetensors`, `TensorBuffers (…)`.
    #[getter]
    fn format(&self) -> String {
        self.opened.source.format_name().into_owned()
    }

    /// Whether component bytes are borrowed from memory (a map, or bytes given) when they need
    /// no decoding.
    #[getter]
    fn mapped(&self) -> bool {
        self.opened.base.is_some()
    }

    /// Object names in the file's order.
    fn names(&self) -> Vec<String> {
        let source = &self.opened.source;
        (0..source.len()).filter_map(|i| source.name(i).map(Cow::into_owned)).collect()
    }

    /// The file attributes as Python data, or `None`.
    fn attributes<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let attributes = self.opened.source.try_attributes().map_err(|e| raise_io(py, &e))?;
        attributes.map(|a| to_python(py, a.root())).transpose()
    }

    /// A description of object `name`: format, shape, attributes, components (dtype, logical
    /// type, encoding, lengths, digest), why it cannot be decoded (or `None`), and the shard
    /// it lies in for sharded checkpoints.
    fn info<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyDict>> {
        let index = self.index(py, name)?;
        let source = &*self.opened.source;
        let info = source.info(index).ok_or_else(|| not_found(py, source, name))?;
        let out = PyDict::new(py);
        out.set_item("name", info.name.as_ref())?;
        out.set_item("format", info.format.name())?;
        out.set_item("shape", PyTuple::new(py, info.shape.iter())?)?;
        out.set_item(
            "attributes",
            info.attributes.as_ref().map(|a| to_python(py, a.root())).transpose()?,
        )?;
        let components = PyDict::new(py);
        for c in &info.components {
            let d = PyDict::new(py);
            d.set_item("dtype", storage_name(&c.dtype))?;
            d.set_item("type", c.logical_type.as_ref().map(|l| l.name().to_owned()))?;
            d.set_item("encoding", encoding_name(&c.encoding))?;
            d.set_item("stored_length", c.stored_len)?;
            d.set_item("decoded_length", c.decoded_len)?;
            d.set_item("offset", c.offset)?;
            d.set_item("digest", c.digest.as_ref().map(ToString::to_string))?;
            components.set_item(c.role.as_ref(), d)?;
        }
        out.set_item("components", components)?;
        out.set_item("unsupported", info.unsupported.as_deref())?;
        out.set_item("location", info.location.as_deref())?;
        Ok(out)
    }

    /// The decoded components of object `name`, by role: `(dtype, logical type, bytes)`, every
    /// digest and data rule checked. The GIL is released while reading.
    fn read<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyDict>> {
        let index = self.index(py, name)?;
        let opened = Arc::clone(&self.opened);
        let parts = py.detach(move || opened.read(index)).map_err(|e| raise_io(py, &e))?;
        self.parts_to_python(py, parts)
    }

    /// Object `name` read whole, as one tuple `(name, format, shape, attributes, components)`
    /// (components as [`File::read`] gives them): what `get_tensor` needs, in one call.
    fn object<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyTuple>> {
        let index = self.index(py, name)?;
        let opened = Arc::clone(&self.opened);
        let parts = py.detach(move || opened.read(index)).map_err(|e| raise_io(py, &e))?;
        self.described(py, index, parts)
    }

    /// Every object, read on `threads` threads (0: one per core) with the GIL released:
    /// `[(name, format, shape, attributes, components)]` in the file's order.
    #[pyo3(signature = (threads = 0))]
    fn read_all<'py>(&self, py: Python<'py>, threads: usize) -> PyResult<Bound<'py, PyList>> {
        let opened = Arc::clone(&self.opened);
        let results = py.detach(move || -> Result<Vec<_>, String> {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(|i| format!("zt-work-{i}"))
                .build()
                .map_err(|e| e.to_string())?;
            Ok(pool.install(|| {
                (0..opened.source.len()).into_par_iter().map(|i| opened.read(i)).collect::<Vec<_>>()
            }))
        });
        let results = results.map_err(|e| exception(py, "ZTensorError", e, None, None, None))?;
        let out = PyList::empty(py);
        for (i, parts) in results.into_iter().enumerate() {
            let parts = parts.map_err(|e| raise_io(py, &e))?;
            out.append(self.described(py, i, parts)?)?;
        }
        Ok(out)
    }
}

/// Opens `path` (any format this package reads); with `mmap`, through a read-only memory map.
#[pyfunction]
#[pyo3(signature = (path, mmap = true))]
fn open(py: Python<'_>, path: PathBuf, mmap: bool) -> PyResult<File> {
    let opened = open_path(py, &path, mmap);
    // Readers never wait on a lock held by someone who is not writing; they say so.
    for locked in ztensor_io::read_without_lock() {
        let message = format!(
            "{} is locked by another process that is not appending to it; read as it stands \
             without waiting for the lock",
            locked.display()
        );
        let message = std::ffi::CString::new(message.replace('\0', "?")).unwrap_or_default();
        let category = py.get_type::<pyo3::exceptions::PyUserWarning>();
        PyErr::warn(py, &category, &message, 1)?;
    }
    Ok(File { opened: Arc::new(opened?) })
}

/// Reads a file of tensors held in `data` (copied once; arrays then borrow from that copy).
/// What the file at `path` is, by its content: the format registry's identifier
/// (`ztensor`, `safetensors`, `safetensors-sharded`, `ztensor-sharded`, `tensorbuffers`,
/// `npy`, `npz`, `gguf`, `pytorch`), as the command-line tool tells it.
#[pyfunction]
fn detect(py: Python<'_>, path: PathBuf) -> PyResult<&'static str> {
    ztensor_registry::detect(&path)
        .map(|kind| kind.format().id)
        .map_err(|e| raise_open(py, &ztensor_registry::OpenError::Detect(e)))
}

#[pyfunction]
#[pyo3(name = "open_bytes")]
fn open_from_bytes(py: Python<'_>, data: &[u8]) -> PyResult<File> {
    Ok(File { opened: Arc::new(open_bytes(py, data.to_vec())?) })
}

fn version_of(v: &str) -> PyResult<Version> {
    match v {
        "0.1" => Ok(Version::V0_1),
        "1.1" => Ok(Version::V1_1),
        "1.2" => Ok(Version::V1_2),
        other => Err(PyValueError::new_err(format!(
            "version {other:?}: this package writes \"0.1\", \"1.1\" and \"1.2\""
        ))),
    }
}

fn digest_of(d: Option<&str>) -> PyResult<Option<DigestAlgorithm>> {
    Ok(match d {
        None | Some("none") => None,
        Some("crc32c") => Some(DigestAlgorithm::Crc32c),
        Some("sha256") => Some(DigestAlgorithm::Sha256),
        Some("blake3") => Some(DigestAlgorithm::Blake3),
        Some(other) => {
            return Err(PyValueError::new_err(format!(
                "digest {other:?}: one of \"crc32c\", \"sha256\", \"blake3\" or None"
            )));
        }
    })
}

/// One tensor to write, as the Python layer hands it over.
type Item<'py> = (String, String, Option<String>, Vec<u64>, PyBuffer<u8>);

/// Writes dense tensors `[(name, dtype, logical type, shape, bytes)]` (little-endian, C order,
/// `bytes` any contiguous buffer) to `path`, published atomically, or returns the file's bytes
/// when `path` is `None`. Compression and digests run on `threads` threads (0: one per core)
/// with the GIL released; the output does not depend on the thread count.
#[pyfunction]
#[pyo3(signature = (tensors, path = None, attributes = None, version = "1.2", zstd = None, digest = None, threads = 0))]
#[allow(clippy::too_many_arguments)]
fn save<'py>(
    py: Python<'py>,
    tensors: Vec<Item<'py>>,
    path: Option<PathBuf>,
    attributes: Option<Bound<'py, PyAny>>,
    version: &str,
    zstd: Option<i32>,
    digest: Option<&str>,
    threads: usize,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let version = version_of(version)?;
    let mut options = match zstd {
        Some(level) if (1..=22).contains(&level) => WriteOptions::zstd(level),
        Some(level) => {
            return Err(PyValueError::new_err(format!("zstd level {level}: between 1 and 22")));
        }
        None => WriteOptions::raw(),
    };
    if let Some(d) = digest_of(digest)? {
        options = options.with_digest(d);
    }
    let attributes =
        attributes.filter(|a| !a.is_none()).map(|a| attributes_from_python(&a)).transpose()?;
    let mut slices = Vec::with_capacity(tensors.len());
    for (name, _, _, _, buffer) in &tensors {
        if !buffer.is_c_contiguous() {
            return Err(PyValueError::new_err(format!("tensor {name:?}: bytes not contiguous")));
        }
        let (ptr, len) = (buffer.buf_ptr().cast::<u8>().cast_const(), buffer.len_bytes());
        // SAFETY: `buffer` holds the exporter's buffer (a contiguous block of `len` bytes at
        // `ptr`) until it is dropped at the end of this function, after the slices' last use.
        // Python code that writes into those bytes from another thread while the GIL is
        // released below races with this read, as with any function that releases the GIL
        // over a buffer; the documentation says not to.
        slices.push(unsafe { std::slice::from_raw_parts(ptr, len) });
    }
    let mut parsed = Vec::with_capacity(tensors.len());
    for ((name, dtype, logical, shape, _), data) in tensors.iter().zip(&slices) {
        let dtype = DType::from_name(dtype)
            .ok_or_else(|| PyValueError::new_err(format!("tensor {name:?}: dtype {dtype:?}")))?;
        let mut tensor = Tensor::new(name, shape, dtype, data);
        tensor.logical_type = logical.as_deref().map(ztensor_format::LogicalType::from_name);
        parsed.push(tensor);
    }
    let par = ParOptions { threads, ..ParOptions::default() };
    let written = py.detach(|| -> ztensor_io::Result<Option<Vec<u8>>> {
        match &path {
            Some(path) => {
                let mut w = FileWriter::create(path, version)?;
                if let Some(a) = attributes {
                    w.set_attributes(a)?;
                }
                ztensor_par::write_tensors(&parsed, w.writer_mut(), &options, &par, &())?;
                w.finish()?;
                Ok(None)
            }
            None => {
                let mut w = Writer::new(Vec::new(), version)?;
                if let Some(a) = attributes {
                    w.set_attributes(a)?;
                }
                ztensor_par::write_tensors(&parsed, &mut w, &options, &par, &())?;
                Ok(Some(w.finish()?.0))
            }
        }
    });
    drop(parsed);
    drop(slices);
    let written = written.map_err(|e| raise_io(py, &e))?;
    Ok(written.map(|bytes| PyBytes::new(py, &bytes)))
}

/// The extension module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<File>()?;
    m.add_class::<Bytes>()?;
    m.add_function(wrap_pyfunction!(open, m)?)?;
    m.add_function(wrap_pyfunction!(detect, m)?)?;
    m.add_function(wrap_pyfunction!(open_from_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(save, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
