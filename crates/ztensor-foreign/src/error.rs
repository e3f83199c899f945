//! The error type of this crate.

use std::fmt;
use std::path::{Path, PathBuf};

/// What went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The input breaks a rule of its own format (a malformed safetensors header, data that
    /// does not match it, a malformed index).
    Malformed,
    /// A sharded checkpoint's index and shards disagree: a listed tensor missing, one not listed,
    /// or one in two shards.
    IndexMismatch,
    /// Content the target format cannot hold (a sparse object in safetensors, an MX dtype in
    /// zTensor, …).
    Unrepresentable,
    /// No object or tensor of that name.
    NotFound,
    /// An error of the zTensor side, reading or writing.
    ZTensor,
    /// An I/O error.
    Io,
}

/// An error: a kind, a message, and where known the file and the tensor.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    path: Option<PathBuf>,
    tensor: Option<String>,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
    refused: Option<ztensor_format::Refused>,
}

/// Why a tensor of dtype zTensor has no type for is unsupported, as [`ObjectInfo::unsupported`]
/// and the error reading it carry it: `dtype_unknown`, refused for its dtype.
///
/// [`ObjectInfo::unsupported`]: ztensor_io::ObjectInfo::unsupported
pub(crate) fn unknown_dtype(reason: impl Into<String>, name: &str) -> ztensor_format::Error {
    ztensor_format::Error::new(ztensor_format::ErrorKind::DtypeUnknown, reason)
        .refusing(ztensor_format::Refused::Dtype)
        .in_object(name)
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
            path: None,
            tensor: None,
            source: None,
            refused: None,
        }
    }

    /// Says what content the target could not hold.
    pub(crate) fn refusing(mut self, what: ztensor_format::Refused) -> Error {
        self.refused = Some(what);
        self
    }

    pub(crate) fn io(what: impl Into<String>, path: &Path, e: std::io::Error) -> Error {
        let mut error = Error::new(ErrorKind::Io, format!("{}: {e}", what.into()));
        error.path = Some(path.to_owned());
        error.source = Some(Box::new(e));
        error
    }

    /// Keeps `e` as the operating system's error behind this one (see [`Error::io_error`]).
    pub(crate) fn with_io_source(mut self, e: std::io::Error) -> Error {
        self.source = Some(Box::new(e));
        self
    }

    /// Names `path` as the file the error is about, unless it names one already: for a
    /// reader made with `new` over a file opened elsewhere.
    #[must_use]
    pub fn with_path(mut self, path: &Path) -> Error {
        self.path.get_or_insert_with(|| path.to_owned());
        self
    }

    pub(crate) fn in_object(mut self, name: &str) -> Error {
        self.tensor.get_or_insert_with(|| name.to_owned());
        self
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// What went wrong, in words (without the file and tensor that `Display` adds).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The file concerned, if known.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The object (tensor) concerned, if known: the name every error type of the workspace
    /// gives it (`ztensor_format::Error::object`).
    pub fn object(&self) -> Option<&str> {
        self.tensor.as_deref()
    }

    /// The zTensor error behind a [`ErrorKind::ZTensor`] error.
    pub fn ztensor_error(&self) -> Option<&ztensor_io::Error> {
        self.source.as_ref()?.downcast_ref()
    }

    /// The operating system's error behind an [`ErrorKind::Io`] error, where there is one.
    pub fn io_error(&self) -> Option<&std::io::Error> {
        ztensor_io::Error::os_error_in(self.source.as_deref()?)
    }
}

impl From<ztensor_io::Error> for Error {
    fn from(e: ztensor_io::Error) -> Error {
        // An I/O failure is one whatever crate met it (opening an input, refusing a FIFO).
        let mut error = match e.kind() {
            ztensor_io::ErrorKind::Io { what, path, source } => {
                let mut error = Error::new(ErrorKind::Io, format!("{what}: {source}"));
                error.path.clone_from(path);
                error
            }
            _ => Error::new(ErrorKind::ZTensor, e.to_string()),
        };
        error.source = Some(Box::new(e));
        error
    }
}

impl From<ztensor_format::Error> for Error {
    fn from(e: ztensor_format::Error) -> Error {
        Error::from(ztensor_io::Error::from(e))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(path) = &self.path {
            write!(f, "{}: ", path.display())?;
        }
        if let Some(tensor) = &self.tensor {
            write!(f, "tensor {tensor:?}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// The message already carries the inner error's text, so there is no `source()`: reporters that
/// print the chain would say it twice.
impl std::error::Error for Error {}

/// The result type of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Whether the data said no, as opposed to a request that failed, and what content a target
/// could not hold: read through [`Verdict`](ztensor_format::Verdict) (`use
/// ztensor_format::Verdict`).
impl ztensor_format::Verdict for Error {
    fn is_rejection(&self) -> bool {
        match self.kind {
            ErrorKind::Malformed | ErrorKind::IndexMismatch | ErrorKind::Unrepresentable => true,
            ErrorKind::ZTensor => self.ztensor_error().is_some_and(ztensor_io::Error::is_rejection),
            _ => false,
        }
    }
    fn refused(&self) -> Option<ztensor_format::Refused> {
        self.refused.or_else(|| self.ztensor_error()?.refused())
    }
    fn rule(&self) -> Option<ztensor_format::ErrorKind> {
        self.ztensor_error()?.rule()
    }
    fn failure(&self) -> ztensor_format::Failure {
        use ztensor_format::Failure;
        if let Some(inner) = self.ztensor_error() {
            return inner.failure();
        }
        match self.kind {
            ErrorKind::Io => self.io_error().map_or(Failure::Other, Failure::io),
            ErrorKind::NotFound => Failure::NotFound,
            ErrorKind::Unrepresentable => Failure::Unsupported,
            ErrorKind::Malformed | ErrorKind::IndexMismatch => Failure::Format,
            // A zTensor error not kept: no verdict to give but a failed request's.
            _ => Failure::Other,
        }
    }
    fn object(&self) -> Option<&str> {
        match self.ztensor_error() {
            Some(inner) => ztensor_format::Verdict::object(inner),
            None => Error::object(self),
        }
    }
    fn offset(&self) -> Option<u64> {
        ztensor_format::Verdict::offset(self.ztensor_error()?)
    }
}
