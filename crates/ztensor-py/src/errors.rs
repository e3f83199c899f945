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
pub(crate) fn io_error(kind: std::io::ErrorKind, raw: Option<i32>, message: String) -> PyErr {
    use std::io::ErrorKind as K;
    let errno = raw.or(match kind {
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

/// The error of any crate as the Python exception for it, decided by its
/// [`Verdict`](ztensor_format::Verdict) and nothing else: an I/O failure is the `OSError` of
/// its errno, a broken rule a `FormatError`, valid content not decoded an `UnsupportedError`,
/// a name not found an `ObjectNotFoundError`, anything else a `ZTensorError`; each with the
/// rule, object and offset the error gives.
pub(crate) fn raise<E>(py: Python<'_>, e: &E) -> PyErr
where
    E: ztensor_format::Verdict + std::fmt::Display + ?Sized,
{
    use ztensor_format::Failure;
    let message = e.to_string();
    let class = match e.failure() {
        Failure::Io(kind, raw) => return io_error(kind, raw, message),
        Failure::Format => "FormatError",
        Failure::Unsupported => "UnsupportedError",
        Failure::NotFound => "ObjectNotFoundError",
        _ => "ZTensorError",
    };
    exception(py, class, message, e.rule_id(), e.object(), e.offset())
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
