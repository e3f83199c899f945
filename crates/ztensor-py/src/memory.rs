//! Tensor bytes lent to Python: an open input with where its bytes lie in memory, and the
//! read-only buffer (`Bytes`) that borrows from it without a copy.

use std::borrow::Cow;
use std::ffi::{c_int, c_void};
use std::sync::Arc;

use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;
use ztensor_io::TensorSource;

/// An open input: a tensor source of any format, and where its bytes lie in memory when they
/// do (a map, or bytes handed over), so component bytes borrowed from there go to Python
/// without a copy.
pub(crate) struct Opened {
    pub(crate) source: Box<dyn TensorSource + Send + Sync>,
    /// Start and length of the memory the source reads from, when it is in memory.
    pub(crate) base: Option<(*const u8, usize)>,
    /// The file it was opened from (`None` for bytes given).
    pub(crate) path: Option<std::path::PathBuf>,
    /// The mapped file's identity, taken before and after it was opened and the same both
    /// times (`None` when it was not mapped, or changed meanwhile): a private map of it
    /// ([`Opened::private`]) is made only of that same file.
    pub(crate) identity: Option<Identity>,
}

/// What tells one file from another, or from itself changed: device, inode, size and
/// modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Identity {
    device: u64,
    inode: u64,
    len: u64,
    modified: Option<std::time::SystemTime>,
}

impl Identity {
    pub(crate) fn of(metadata: &std::fs::Metadata) -> Identity {
        #[cfg(unix)]
        let (device, inode) = {
            use std::os::unix::fs::MetadataExt;
            (metadata.dev(), metadata.ino())
        };
        #[cfg(not(unix))]
        let (device, inode) = (0, 0);
        Identity { device, inode, len: metadata.len(), modified: metadata.modified().ok() }
    }
}

// SAFETY: `base` points into memory that `source` owns (a read-only map, or a byte vector it
// never changes) for as long as `source` lives, and nothing writes through it: sharing or
// sending that read-only address is as safe as sharing the source itself, which is
// `Send + Sync`.
unsafe impl Send for Opened {}
// SAFETY: as for `Send`: the pointer is only read, and the memory is never written.
unsafe impl Sync for Opened {}

impl Opened {
    /// A private, writable, copy-on-write map of `len` bytes at `start` of the mapped file
    /// (the source's memory is the whole file from its first byte), when the file at its path
    /// is still the one opened: what a consumer that may write is given instead of the shared
    /// read-only map, so its writes reach neither the file nor other views of it.
    pub(crate) fn private(&self, start: usize, len: usize) -> Option<ztensor_io::PrivateMap> {
        let (path, seen) = (self.path.as_ref()?, self.identity?);
        let file = std::fs::File::open(path).ok()?;
        if Identity::of(&file.metadata().ok()?) != seen {
            return None;
        }
        // SAFETY: the same contract the shared map was made under (see `open_path`): files
        // are replaced by rename, not changed in place, while mapped; the identity check
        // above makes sure this is the file that was opened, not one put in its place.
        unsafe { ztensor_io::PrivateMap::map(&file, start as u64, len) }.ok()
    }

    /// Where `bytes` lie in the source's memory, when they were borrowed from it.
    pub(crate) fn shared(&self, bytes: &[u8]) -> Option<usize> {
        let (base, len) = self.base?;
        let at = (bytes.as_ptr() as usize).checked_sub(base as usize)?;
        (at.checked_add(bytes.len())? <= len).then_some(at)
    }

    /// Object `index`, decoded, with every digest the format keeps and its data rules checked.
    pub(crate) fn read(&self, index: usize) -> ztensor_io::Result<Vec<Part>> {
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
pub(crate) struct Part {
    pub(crate) role: String,
    pub(crate) dtype: &'static str,
    pub(crate) logical: Option<String>,
    pub(crate) bytes: Data,
}

pub(crate) enum Data {
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
pub(crate) struct Bytes {
    pub(crate) owner: Owner,
    /// Whether decoded bytes may be lent writable ([`Bytes::lend_writable`]): only to a
    /// consumer that asked for them so (a torch tensor), so NumPy arrays stay read-only.
    writable: std::sync::atomic::AtomicBool,
}

pub(crate) enum Owner {
    Shared {
        file: Arc<Opened>,
        start: usize,
        len: usize,
    },
    Owned(OwnedBytes),
    /// A private copy-on-write map of bytes of the file: pages written become this object's
    /// own; the file and every other view stay as they were.
    Private(PrivateBytes),
}

/// A private map's bytes, held with the address of their first byte (taken once, so reading it
/// needs no mutable access).
pub(crate) struct PrivateBytes {
    _map: ztensor_io::PrivateMap,
    ptr: *mut u8,
    len: usize,
}

impl PrivateBytes {
    fn new(mut map: ztensor_io::PrivateMap) -> PrivateBytes {
        let (ptr, len) = (map.as_mut_ptr(), map.len());
        PrivateBytes { _map: map, ptr, len }
    }
}

// SAFETY: the map is owned by this value alone and unmapped only when it drops; Rust never
// reads or writes the bytes through it after construction (only their address and length), so
// moving or sharing the pointer is as safe as the map itself.
unsafe impl Send for PrivateBytes {}
// SAFETY: as for `Send`.
unsafe impl Sync for PrivateBytes {}

/// Decoded bytes that belong to one `Bytes` alone, held by a raw pointer rather than a `Box`:
/// they may be lent writable (a torch tensor takes them without a copy), and memory written
/// through a buffer Python holds must not sit behind a Rust reference.
pub(crate) struct OwnedBytes {
    ptr: *mut [u8],
}

impl OwnedBytes {
    fn new(bytes: Box<[u8]>) -> OwnedBytes {
        OwnedBytes { ptr: Box::into_raw(bytes) }
    }
}

impl Drop for OwnedBytes {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `Box::into_raw` and is freed once, here; every view Python
        // took holds a reference to the `Bytes` that owns this, so none outlives it.
        drop(unsafe { Box::from_raw(self.ptr) });
    }
}

// SAFETY: the bytes are a heap allocation owned by this value alone; Rust never reads or
// writes them after construction (only their address and length), so moving or sharing the
// pointer between threads is as safe as the `Box` it came from.
unsafe impl Send for OwnedBytes {}
// SAFETY: as for `Send`.
unsafe impl Sync for OwnedBytes {}

impl Bytes {
    pub(crate) fn new(file: &Arc<Opened>, data: Data) -> Bytes {
        let owner = match data {
            Data::Shared { start, len } => Owner::Shared { file: Arc::clone(file), start, len },
            Data::Owned(b) => Owner::Owned(OwnedBytes::new(b)),
        };
        Bytes { owner, writable: std::sync::atomic::AtomicBool::new(false) }
    }

    /// A new `Bytes` holding a copy of these, its own (decoded bytes, so they may be lent
    /// writable).
    pub(crate) fn copied<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, Bytes>> {
        let (ptr, len) = self.raw();
        let bytes: &[u8] = if len == 0 {
            &[]
        } else {
            // SAFETY: `raw` gives memory this object keeps alive, and nothing frees it while
            // `self` is borrowed; only length 0 comes with a null pointer, handled above.
            unsafe { std::slice::from_raw_parts(ptr, len) }
        };
        let copy = Bytes {
            owner: Owner::Owned(OwnedBytes::new(bytes.to_vec().into_boxed_slice())),
            writable: std::sync::atomic::AtomicBool::new(false),
        };
        Bound::new(py, copy)
    }

    /// A new `Bytes` over a private copy-on-write map of these bytes of the file, writable
    /// (see [`Opened::private`]); `None` for bytes not borrowed from a mapped file, none at
    /// all, or a file no longer the one opened.
    pub(crate) fn private<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, Bytes>>> {
        let Owner::Shared { file, start, len } = &self.owner else { return Ok(None) };
        if *len == 0 {
            return Ok(None);
        }
        let Some(map) = py.detach(|| file.private(*start, *len)) else { return Ok(None) };
        let private = Bytes {
            owner: Owner::Private(PrivateBytes::new(map)),
            writable: std::sync::atomic::AtomicBool::new(false),
        };
        Bound::new(py, private).map(Some)
    }

    /// The first byte and the length.
    pub(crate) fn raw(&self) -> (*const u8, usize) {
        match &self.owner {
            Owner::Shared { file, start, len } => match file.base {
                // `start + len` lies within the memory (`Opened::shared` checked it).
                Some((base, _)) => (base.wrapping_add(*start), *len),
                None => (std::ptr::null(), 0),
            },
            Owner::Owned(b) => (b.ptr.cast::<u8>().cast_const(), b.ptr.len()),
            Owner::Private(p) => (p.ptr.cast_const(), p.len),
        }
    }
}

impl crate::dlpack::Exportable for Bytes {
    fn raw(&self) -> (*const u8, usize) {
        Bytes::raw(self)
    }
    fn mapped(&self) -> bool {
        matches!(self.owner, Owner::Shared { .. })
    }
    fn copied<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, Bytes>> {
        Bytes::copied(self, py)
    }
    fn private<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, Bytes>>> {
        Bytes::private(self, py)
    }
    fn lend_writable(&self) -> bool {
        Bytes::lend_writable(self)
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
        // Bytes borrowed from the file's memory are read-only; decoded bytes are this object's
        // own, lent writable once `lend_writable` allowed it (a torch tensor takes them without
        // a copy), read-only otherwise (NumPy arrays of this package are read-only).
        let writable = flags & ffi::PyBUF_WRITABLE == ffi::PyBUF_WRITABLE;
        let lent = slf.get().writable.load(std::sync::atomic::Ordering::Relaxed);
        if writable && !(lent && matches!(slf.get().owner, Owner::Owned(_) | Owner::Private(_))) {
            return Err(PyBufferError::new_err(
                "tensor data is read-only; copy it (numpy: .copy()) to change it",
            ));
        }
        let (ptr, len) = slf.get().raw();
        let len = isize::try_from(len).map_err(|_| PyBufferError::new_err("too large"))?;
        // SAFETY: `view` is a valid, writable `Py_buffer` (Python's contract for
        // `__getbuffer__`; null was refused above). `obj` takes a new reference to `slf`, which
        // owns the bytes (or the file whose memory holds them), so the pointer stays valid until
        // Python releases the view. Memory borrowed from the file is never written (a writable
        // view was refused above); owned bytes lent writable are behind no Rust reference. `format` points to a static
        // C string that Python only reads; `shape` and `strides` point into the view itself,
        // as the protocol allows for one dimension.
        unsafe {
            (*view).obj = slf.into_any().into_ptr();
            (*view).buf = ptr.cast_mut().cast::<c_void>();
            (*view).len = len;
            (*view).readonly = c_int::from(!writable);
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
        matches!(self.owner, Owner::Shared { .. } | Owner::Private(_))
    }

    /// Lets decoded bytes be lent writable from now on, and answers whether they can be: they
    /// are this object's own (never the file's memory). For a consumer that takes them as its
    /// own (a torch tensor, writable); NumPy arrays over them would then be writable too.
    pub(crate) fn lend_writable(&self) -> bool {
        let owned = matches!(self.owner, Owner::Owned(_) | Owner::Private(_));
        self.writable.store(owned, std::sync::atomic::Ordering::Relaxed);
        owned
    }

    /// A DLPack capsule of these bytes as a tensor of `dtype` (a storage type: `f32`, `bf16`,
    /// ...) and `logical` type (`f8_e4m3fn`, `complex64`, ...), shaped `shape`: what a
    /// component's `__dlpack__` answers. Bytes of the file's map are exported as a private
    /// copy-on-write map of them (writable: a consumer's writes stay its own).
    #[pyo3(signature = (dtype, logical, shape, *, stream=None, max_version=None, dl_device=None, copy=None))]
    #[allow(clippy::too_many_arguments)]
    fn dlpack<'py>(
        slf: Bound<'py, Self>,
        dtype: &str,
        logical: Option<&str>,
        shape: Vec<u64>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(u32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        crate::dlpack::export(slf, dtype, logical, shape, stream, max_version, dl_device, copy)
    }

    /// Where a DLPack consumer finds the bytes: `(1, 0)`, the CPU.
    fn dlpack_device(&self) -> (u32, i32) {
        (1, 0)
    }

    /// Where borrowed bytes lie in the memory they are borrowed from (for a mapped file, the
    /// offset in the file: see `File.mapped_path`); `None` for decoded bytes.
    #[getter]
    fn offset(&self) -> Option<usize> {
        match self.owner {
            Owner::Shared { start, .. } => Some(start),
            Owner::Owned(_) | Owner::Private(_) => None,
        }
    }
}
