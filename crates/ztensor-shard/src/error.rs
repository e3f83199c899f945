//! The error type of this crate, shared by `ztensor-shard-write` (planning and writing).

use std::fmt;
use std::path::{Path, PathBuf};

/// What went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// An index, plan or receipt that is not what these crates write (bad JSON, a missing
    /// field, a shard name with a directory part).
    Malformed,
    /// An index and its shards disagree: a listed tensor missing, one not listed or listed
    /// twice, a shard of another size than the index records, a digest that differs.
    IndexMismatch,
    /// The input changed since the plan was made (a file of another size, an object gone).
    Stale,
    /// `finalize` found units without a receipt or a shard.
    Incomplete,
    /// A unit number the plan does not have (a mistake of the request, not of the plan).
    NoSuchUnit,
    /// The chunks a tensor is saved in (a Distributed Checkpoint's) do not make it whole:
    /// they overlap, leave a hole, disagree in dtype or shape, or lie past the tensor.
    Chunks,
    /// A zTensor error reading the input or writing a shard.
    ZTensor,
    /// An I/O error.
    Io,
}

/// An error of this crate, with the file it concerns when there is one.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    path: Option<PathBuf>,
    ztensor: Option<Box<ztensor_io::Error>>,
}

/// This crate's result.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error of `kind` saying `message` (for `ztensor-shard-write`, which shares this type).
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error { kind, message: message.into(), path: None, ztensor: None }
    }

    /// An I/O error met doing `what` to `path`, keeping the system's error.
    pub fn io(what: &str, path: &Path, e: &std::io::Error) -> Error {
        // The system's error is kept (as the zTensor crates' I/O error), errno and all.
        let kept = match e.raw_os_error() {
            Some(n) => std::io::Error::from_raw_os_error(n),
            None => std::io::Error::new(e.kind(), e.to_string()),
        };
        let inner = ztensor_io::Error::io(what, Some(path.to_owned()), kept);
        Error {
            ztensor: Some(Box::new(inner)),
            ..Error::new(ErrorKind::Io, format!("{what}: {e}")).with_path(path)
        }
    }

    /// The same error (its kind, and the zTensor error it keeps, whose verdict and system
    /// error stand), told with `message`.
    #[must_use]
    pub fn reworded(mut self, message: String) -> Error {
        self.message = message;
        self
    }

    /// This error, about the file at `path`.
    #[must_use]
    pub fn with_path(mut self, path: &Path) -> Error {
        self.path = Some(path.to_owned());
        self
    }

    /// The kind of error.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// What went wrong, in words.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The file concerned, if known.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The zTensor error behind a [`ErrorKind::ZTensor`] error.
    pub fn ztensor_error(&self) -> Option<&ztensor_io::Error> {
        self.ztensor.as_deref()
    }
}

impl From<ztensor_io::Error> for Error {
    fn from(e: ztensor_io::Error) -> Error {
        // An I/O failure is one whatever crate met it (a planted link, a FIFO, a full disk).
        let (kind, message, path) = match e.kind() {
            ztensor_io::ErrorKind::Io { what, path, source } => {
                (ErrorKind::Io, format!("{what}: {source}"), path.clone())
            }
            _ => (ErrorKind::ZTensor, e.to_string(), None),
        };
        Error { kind, message, path, ztensor: Some(Box::new(e)) }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(p) => write!(f, "{}: {}", p.display(), self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.ztensor.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Whether the data said no, as opposed to a request that failed, and what content a target
/// could not hold: read through [`Verdict`](ztensor_format::Verdict) (`use
/// ztensor_format::Verdict`).
impl ztensor_format::Verdict for Error {
    fn is_rejection(&self) -> bool {
        match self.kind {
            ErrorKind::Malformed | ErrorKind::IndexMismatch | ErrorKind::Chunks => true,
            ErrorKind::ZTensor => self.ztensor_error().is_some_and(ztensor_io::Error::is_rejection),
            _ => false,
        }
    }
    fn refused(&self) -> Option<ztensor_format::Refused> {
        self.ztensor_error()?.refused()
    }
    fn rule(&self) -> Option<ztensor_format::ErrorKind> {
        self.ztensor_error()?.rule()
    }
    fn failure(&self) -> ztensor_format::Failure {
        use ztensor_format::Failure;
        match (self.ztensor_error(), self.kind) {
            (Some(inner), _) => inner.failure(),
            // An I/O failure here is told in the message (which file, what was done); the
            // system's own error is not kept.
            (None, ErrorKind::Io) => Failure::Other,
            (None, ErrorKind::Malformed | ErrorKind::IndexMismatch | ErrorKind::Chunks) => {
                Failure::Format
            }
            // What a writer of plans meets (an input changed, units not done, no such unit):
            // requests that failed, as `is_rejection` says.
            (None, _) => Failure::Other,
        }
    }
    fn object(&self) -> Option<&str> {
        ztensor_format::Verdict::object(self.ztensor_error()?)
    }
    fn offset(&self) -> Option<u64> {
        ztensor_format::Verdict::offset(self.ztensor_error()?)
    }
}
