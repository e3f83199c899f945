//! Errors of every layer as the Python exceptions for them (classes from `ztensor_rs._errors`,
//! with `rule`, `object` and `offset`).

use pyo3::exceptions::PyOSError;
use ztensor_io::TensorSource;

use pyo3::prelude::*;

/// An error of any layer, turned into the Python exception for it (classes from
/// `ztensor_rs._errors`, so they can also derive from `ValueError`, `KeyError`, …).
pub(crate) struct Raised(pub(crate) PyErr);

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

pub(crate) type PyResultR<T> = std::result::Result<T, Raised>;

/// The exception class `name` of `ztensor_rs._errors`, called with `message` and given the
/// attributes `rule`, `object` and `offset`.
pub(crate) fn exception(
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

/// `e` with the file it concerns: a `ZTensorError` gets `filename` and a message that starts
/// with the path (unless it names it already); an `OSError` gets `filename`, which its text then
/// shows, as Python's own file errors do.
pub(crate) fn naming(py: Python<'_>, e: PyErr, path: Option<&std::path::Path>) -> PyErr {
    let Some(path) = path else { return e };
    let value = e.value(py);
    let shown = path.display().to_string();
    let named = (|| -> PyResult<()> {
        let ours = py.import("ztensor_rs._errors")?.getattr("ZTensorError")?;
        if value.is_instance(&ours)? {
            let message: String = value.str()?.extract()?;
            if !message.contains(&shown) {
                value.setattr("args", (format!("{shown}: {message}"),))?;
            }
            value.setattr("filename", &shown)?;
        } else if value.is_instance_of::<PyOSError>() && value.getattr("filename")?.is_none() {
            value.setattr("filename", &shown)?;
        }
        Ok(())
    })();
    match named {
        Ok(()) => e,
        Err(failed) => failed,
    }
}

/// An `OSError` with the operating system's errno: the one the system gave, or for a refusal
/// of our own (a FIFO given as input, a file over a cap) the errno that says the same. An I/O
/// failure with no such errno is a `ZTensorError`, never an `OSError` with errno 0.
pub(crate) fn io_error(e: &std::io::Error, message: String) -> PyErr {
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
        K::ReadOnlyFilesystem => Some(libc_errno::EROFS),
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
pub(crate) mod libc_errno {
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
    pub const EROFS: i32 = 30;
}

pub(crate) fn raise_io(py: Python<'_>, e: &ztensor_io::Error) -> PyErr {
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

pub(crate) fn raise_foreign(py: Python<'_>, e: &ztensor_foreign::Error) -> PyErr {
    use ztensor_foreign::ErrorKind as K;
    if let Some(inner) = e.ztensor_error() {
        return raise_io(py, inner);
    }
    match e.kind() {
        K::Io => match e.io_error() {
            Some(source) => io_error(source, e.to_string()),
            None => exception(py, "ZTensorError", e.to_string(), None, e.object(), None),
        },
        K::NotFound => exception(py, "ObjectNotFoundError", e.to_string(), None, e.object(), None),
        K::Unrepresentable => {
            exception(py, "UnsupportedError", e.to_string(), None, e.object(), None)
        }
        _ => exception(py, "FormatError", e.to_string(), None, e.object(), None),
    }
}

pub(crate) fn raise_tb(py: Python<'_>, e: &ztensor_tensorbuffers::Error) -> PyErr {
    if e.kind() == ztensor_tensorbuffers::ErrorKind::Io {
        return match e.io_error() {
            Some(source) => io_error(source, e.to_string()),
            None => exception(py, "ZTensorError", e.to_string(), None, e.object(), None),
        };
    }
    exception(py, "FormatError", e.to_string(), Some(e.kind().id()), e.object(), e.offset())
}

/// A refusal of the format registry as the Python exception its reader's error maps to.
pub(crate) fn raise_open(py: Python<'_>, e: &ztensor_registry::OpenError) -> PyErr {
    use ztensor_registry::{ErrorKind as K, OpenError};
    match e {
        OpenError::Detect(d) => match (d.kind(), d.io()) {
            (K::Io, Some(io)) => raise_io(py, io),
            // A directory where a file was asked for: `IsADirectoryError`, an `OSError` as
            // for any path that cannot be read.
            (K::Directory, _) => PyOSError::new_err((libc_errno::EISDIR, d.to_string())),
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
        OpenError::Zt2(e) => match (e.broken(), e.kind()) {
            // The input failed while it was written or identified: its own error.
            (None, ztensor_v2::ErrorKind::Source(source)) => raise_io(py, source),
            (Some(rule), _) => {
                exception(py, "FormatError", e.to_string(), Some(rule.id()), None, e.offset())
            }
            (None, ztensor_v2::ErrorKind::Io(io)) => io_error(io, e.to_string()),
            (None, _) => exception(py, "ZTensorError", e.to_string(), None, None, None),
        },
        // A missing object is `FileNotFoundError`, refused credentials `PermissionError`, as
        // for a local file.
        OpenError::Remote(r) => io_error(&std::io::Error::from(r.clone()), r.to_string()),
        other => exception(py, "ZTensorError", other.to_string(), None, None, None),
    }
}

/// No object `name` in `source`: the error names it and, as the command-line tool does, the
/// closest names the source holds.
pub(crate) fn not_found(py: Python<'_>, source: &dyn TensorSource, name: &str) -> PyErr {
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
