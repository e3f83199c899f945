//! `ztensor_rs._native`, the extension module under the `ztensor_rs` Python package.
//!
//! The Python layer (`python/ztensor_rs/_api.py`, whose public names `__init__.py` re-exports)
//! gives the API people use: `safe_open`, `load_file`, `save_file`, `load`, `save`. This module
//! gives it what only Rust can: files of
//! every format opened through the tensor-source interface, object descriptions, decoded and
//! checked component bytes (borrowed from the file's map when nothing had to be decoded,
//! exported through the buffer protocol without a copy), and writing on the parallel engine.
//! The GIL is released while bytes are read, decoded, hashed or written.
//!
//! Inputs are recognised and opened by the format registry (`opening`); bytes are lent to
//! Python from `memory` (the buffer protocol is a C interface: it fills a `Py_buffer`, the one
//! `unsafe` of its own besides opening maps and viewing the buffers handed to `save`); `errors`
//! maps every layer's errors to the package's exceptions; `values` converts attributes. Every
//! `unsafe` block says why it holds.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};
use rayon::prelude::*;
use ztensor_format::{DType, DigestAlgorithm, Version};
use ztensor_io::{FileWriter, WriteOptions, Writer};
use ztensor_par::{ParOptions, Tensor};

mod dlpack;
mod errors;
mod memory;
mod opening;
mod plans;
mod values;

use crate::errors::*;
use crate::memory::*;
use crate::opening::*;
use crate::values::*;

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

    /// `e` naming the file this was opened from.
    fn named(&self, py: Python<'_>, e: PyErr) -> PyErr {
        naming(py, e, self.opened.path.as_deref())
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

    /// The file whose memory map the borrowed component bytes lie in (at
    /// [`Bytes::offset`](memory::Bytes)), or `None` (bytes given, or nothing mapped): where
    /// another map of the same bytes (a torch storage) can be made.
    #[getter]
    fn mapped_path(&self) -> Option<std::path::PathBuf> {
        self.opened.base.and(self.opened.path.clone())
    }

    /// Object names in the file's order.
    fn names(&self) -> Vec<String> {
        let source = &self.opened.source;
        (0..source.len()).filter_map(|i| source.name(i).map(Cow::into_owned)).collect()
    }

    /// The file attributes as Python data, or `None`.
    fn attributes<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let attributes =
            self.opened.source.try_attributes().map_err(|e| self.named(py, raise(py, &e)))?;
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
        out.set_item("unsupported", info.unsupported.as_ref().map(ztensor_format::Error::message))?;
        out.set_item("location", info.location.as_deref())?;
        Ok(out)
    }

    /// The decoded components of object `name`, by role: `(dtype, logical type, bytes)`, every
    /// digest and data rule checked. The GIL is released while reading.
    fn read<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyDict>> {
        let index = self.index(py, name)?;
        let opened = Arc::clone(&self.opened);
        let parts =
            py.detach(move || opened.read(index)).map_err(|e| self.named(py, raise(py, &e)))?;
        self.parts_to_python(py, parts)
    }

    /// Object `name` read whole, as one tuple `(name, format, shape, attributes, components)`
    /// (components as [`File::read`] gives them): what `get_tensor` needs, in one call.
    fn object<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyTuple>> {
        let index = self.index(py, name)?;
        let opened = Arc::clone(&self.opened);
        let parts =
            py.detach(move || opened.read(index)).map_err(|e| self.named(py, raise(py, &e)))?;
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
            let parts = parts.map_err(|e| self.named(py, raise(py, &e)))?;
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

/// What the file at `path` is, by its content: the format registry's identifier
/// (`ztensor`, `safetensors`, `safetensors-sharded`, `ztensor-sharded`, `tensorbuffers`,
/// `npy`, `npz`, `gguf`, `pytorch`), as the command-line tool tells it.
#[pyfunction]
fn detect(py: Python<'_>, path: PathBuf) -> PyResult<&'static str> {
    ztensor_registry::detect(&path)
        .map(|kind| kind.format().id)
        .map_err(|e| naming(py, raise(py, &e), Some(&path)))
}

/// Reads a file of tensors held in `data` (copied once; arrays then borrow from that copy).
#[pyfunction]
#[pyo3(name = "open_bytes")]
fn open_from_bytes(py: Python<'_>, data: &[u8]) -> PyResult<File> {
    Ok(File { opened: Arc::new(open_bytes(py, data.to_vec())?) })
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
/// when `path` is `None`. What is written is `version` (a target name: "0.1", "1.1", "1.2",
/// "2", "safetensors", "tensorbuffers", …) or what `path`'s extension names (`.safetensors`,
/// `.tb`, `.zt`: zTensor 1.2), zTensor 1.2 for a name of no format, by the registry's rules for
/// a conversion ([`ztensor_registry::Conversion::check`]). Compression and digests run on
/// `threads` threads (0: one per core) with the GIL released; the output does not depend on
/// the thread count.
#[pyfunction]
#[pyo3(signature = (tensors, path = None, attributes = None, version = None, zstd = None, digest = None, threads = 0))]
#[allow(clippy::too_many_arguments)]
fn save<'py>(
    py: Python<'py>,
    tensors: Vec<Item<'py>>,
    path: Option<PathBuf>,
    attributes: Option<Bound<'py, PyAny>>,
    version: Option<&str>,
    zstd: Option<i32>,
    digest: Option<&str>,
    threads: usize,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    use ztensor_registry::{Conversion, Request, Spelling, Target};
    let digest = digest_of(digest)?;
    let named = path.as_deref().unwrap_or(std::path::Path::new(""));
    let checked = Conversion::check(&Request {
        to: target_named(version)?,
        unnamed: Some(Target::Zt(Version::V1_2)),
        zstd,
        digest: digest.is_some(),
        ..Request::new(std::path::Path::new(""), named, Spelling::PythonSave)
    })
    .map_err(refused)?;
    if checked.sharding.is_some() {
        return Err(PyValueError::new_err(format!(
            "{} is a directory: save_file writes one file",
            named.display()
        )));
    }
    let mut options = match zstd {
        Some(level) => WriteOptions::zstd(level),
        None => WriteOptions::raw(),
    };
    if let Some(d) = digest {
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
    let written = py.detach(|| match checked.target {
        Target::Zt(version) => {
            write_zt(&parsed, path.as_deref(), attributes, version, &options, &par)
                .map_err(ztensor_registry::WriteError::Zt)
        }
        // Any other format through the conversion's sink, the tensors as its source.
        target => {
            let source = ztensor_par::InMemory::new(&parsed, attributes)
                .map_err(ztensor_registry::WriteError::Zt)?;
            let options = ztensor_registry::WriteOptions::new(target, zstd).par(par);
            write_converted(&source, path.as_deref(), &options).map(|(bytes, _)| bytes)
        }
    });
    drop(parsed);
    drop(slices);
    let written = written.map_err(|e| raise(py, &e))?;
    Ok(written.map(|bytes| PyBytes::new(py, &bytes)))
}

/// Writes `tensors` as zTensor `version` on the engine: to the object or file `path` names
/// (published whole), or to memory, returned.
fn write_zt(
    tensors: &[Tensor<'_>],
    path: Option<&std::path::Path>,
    attributes: Option<ztensor_format::Attributes>,
    version: Version,
    options: &WriteOptions,
    par: &ParOptions,
) -> ztensor_io::Result<Option<Vec<u8>>> {
    // An object in a bucket: a streamed multipart upload, published whole at the end
    // (aborted on an error). (A plain match: if-let guards are newer than the declared
    // minimum Rust 1.89.)
    match (path, path.and_then(url_of)) {
        (Some(_), Some(url)) => {
            let mut w = Writer::new(upload(url)?, version)?;
            if let Some(a) = attributes {
                w.set_attributes(a)?;
            }
            ztensor_par::write_tensors(tensors, &mut w, options, par, &())?;
            let (up, _) = w.finish()?;
            up.finish().map_err(remote_error)?;
            Ok(None)
        }
        (Some(path), None) => {
            let mut w = FileWriter::create(path, version)?;
            if let Some(a) = attributes {
                w.set_attributes(a)?;
            }
            ztensor_par::write_tensors(tensors, w.writer_mut(), options, par, &())?;
            w.finish()?;
            Ok(None)
        }
        (None, _) => {
            let mut w = Writer::new(Vec::new(), version)?;
            if let Some(a) = attributes {
                w.set_attributes(a)?;
            }
            ztensor_par::write_tensors(tensors, &mut w, options, par, &())?;
            Ok(Some(w.finish()?.0))
        }
    }
}

/// Writes `source` through the registry's conversion: to the object or file `path` names
/// (published whole), or to memory, returned.
fn write_converted(
    source: &(dyn ztensor_io::TensorSource + Send + Sync),
    path: Option<&std::path::Path>,
    options: &ztensor_registry::WriteOptions,
) -> Result<(Option<Vec<u8>>, usize), ztensor_registry::WriteError> {
    use ztensor_registry::WriteError;
    match (path, path.and_then(url_of)) {
        (Some(_), Some(url)) => {
            let up = upload(url).map_err(WriteError::Zt)?;
            let (up, written) = ztensor_registry::write_to(source, up, options)?;
            up.finish().map_err(|e| WriteError::Zt(remote_error(e)))?;
            Ok((None, written.objects))
        }
        (Some(path), None) => {
            ztensor_registry::write_file(source, path, options).map(|w| (None, w.objects))
        }
        (None, _) => {
            let (bytes, written) = ztensor_registry::write_to(source, Vec::new(), options)?;
            Ok((Some(bytes), written.objects))
        }
    }
}

/// The target a `to=` or `version=` name asks for, if any.
fn target_named(name: Option<&str>) -> PyResult<Option<ztensor_registry::Target>> {
    name.map(|n| {
        ztensor_registry::Target::from_name(n).map_err(|e| PyValueError::new_err(e.to_string()))
    })
    .transpose()
}

/// A request the registry's rules refuse: `ValueError`, as the command-line tool's usage
/// errors are.
fn refused(e: ztensor_registry::Refusal) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// The URL `path` is (`s3://`, `gs://`, `az://`, `http(s)://`), when it is one.
fn url_of(path: &std::path::Path) -> Option<&str> {
    path.to_str().filter(|p| ztensor_remote::is_url(p))
}

/// A remote failure as an I/O error of the writer (its message naming the URL).
fn remote_error(e: ztensor_remote::Error) -> ztensor_io::Error {
    ztensor_io::Error::io("writing to object storage", None, std::io::Error::from(e))
}

/// An upload of the object at `url`, configured from the environment as reads are; nothing
/// appears there until it is finished.
fn upload(url: &str) -> ztensor_io::Result<ztensor_remote::RemoteUpload> {
    let location = ztensor_remote::Location::parse(url).map_err(remote_error)?;
    ztensor_remote::RemoteUpload::create(&location, &ztensor_remote::RemoteOptions::default())
        .map_err(remote_error)
}

/// Converts the file at `input` (any format this package reads) to `output`, published
/// atomically, as `to` (a name of the registry's table of formats written: "2", "0.1", "1.1",
/// "1.2", "zt", "safetensors", "tensorbuffers", …) or, without it, what `output`'s extension
/// names, through the registry's one conversion and its rules, the command-line tool's
/// (`Conversion::check`: the same request gets the same refusal). `zstd`: zTensor 2's parts
/// under `zt.zstd-seekable/1`, zTensor 1.x's tensors zstd-compressed. Attributes the target
/// cannot hold are refused unless `drop_attributes`. Compression runs on `threads` threads
/// (0: one per core), whatever the target. Returns how many objects were written. Runs with
/// the GIL released.
#[pyfunction]
#[pyo3(signature = (input, output, to = None, zstd = None, drop_attributes = false, threads = 0))]
fn convert(
    py: Python<'_>,
    input: PathBuf,
    output: PathBuf,
    to: Option<&str>,
    zstd: Option<i32>,
    drop_attributes: bool,
    threads: usize,
) -> PyResult<usize> {
    use ztensor_registry::{Conversion, Request, Spelling};
    let checked = Conversion::check(&Request {
        to: target_named(to)?,
        zstd,
        ..Request::new(&input, &output, Spelling::Python)
    })
    .map_err(refused)?;
    if checked.sharding.is_some() {
        return Err(PyValueError::new_err(format!(
            "{} is a directory: convert() writes one file (a sharded checkpoint is written by \
             `ztensor convert {} {}`)",
            output.display(),
            input.display(),
            output.display()
        )));
    }
    let options = open_options().writing(checked.target);
    let opened = match url_of(&input) {
        Some(url) => {
            let remote = ztensor_remote::RemoteOptions::default();
            py.detach(|| ztensor_registry::open_url(url, &options, &remote))
        }
        None => ztensor_registry::open(&input, &options),
    }
    .map_err(|e| naming(py, raise(py, &e), Some(&input)))?;
    // Neither the input nor a file its content lies in is replaced, unless it is a zTensor
    // file rewritten as zTensor in place, whose lock is then held from the read to the rename.
    checked.check_input(opened.kind(), opened.files()).map_err(refused)?;
    let _lock = match checked.in_place(opened.kind()) {
        true => {
            Some(py.detach(|| ztensor_io::WriteLock::acquire(&output)).map_err(|e| raise(py, &e))?)
        }
        false => None,
    };
    let source = opened.into_source();
    let options = ztensor_registry::WriteOptions::new(checked.target, zstd)
        .drop_attributes(drop_attributes)
        .par(ParOptions { threads, ..ParOptions::default() });
    let (_, objects) = py
        .detach(|| write_converted(&*source, Some(&output), &options))
        .map_err(|e| raise(py, &e))?;
    Ok(objects)
}

/// The content identity of the file at `path` (any format this package reads): the zTensor 2
/// content digest of its objects, `algorithm` "sha256" or "xxh3". A zTensor 1.x file and its
/// zTensor 2 conversion have the same one.
#[pyfunction]
#[pyo3(signature = (path, algorithm = "sha256"))]
fn content_id(py: Python<'_>, path: PathBuf, algorithm: &str) -> PyResult<String> {
    let algorithm = ztensor_v2::IdAlgorithm::from_name(algorithm).ok_or_else(|| {
        PyValueError::new_err(format!("algorithm {algorithm:?}: \"sha256\" or \"xxh3\""))
    })?;
    let options = open_options();
    py.detach(|| ztensor_registry::content_id(&path, &options, algorithm))
        .map_err(|e| naming(py, raise(py, &e), Some(&path)))
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
    m.add_function(wrap_pyfunction!(convert, m)?)?;
    m.add_function(wrap_pyfunction!(content_id, m)?)?;
    m.add_function(wrap_pyfunction!(plans::plan_units, m)?)?;
    m.add_function(wrap_pyfunction!(plans::run_unit, m)?)?;
    m.add_function(wrap_pyfunction!(plans::finalize, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
