//! The error type of this crate.

use std::fmt;
use std::path::PathBuf;

use ztensor_format::ErrorKind as Rule;

/// What went wrong.
#[derive(Debug)]
#[non_exhaustive]
pub enum ErrorKind {
    /// An I/O operation failed.
    Io {
        /// The operation, for people ("reading the manifest").
        what: String,
        /// The file, where known.
        path: Option<PathBuf>,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The file (or the content given to a writer) breaks a rule of `spec/rules.md`.
    Format(ztensor_format::Error),
    /// No object or component of that name.
    NotFound {
        /// The object name.
        object: String,
        /// The component role, when the object exists but the role does not.
        role: Option<String>,
    },
    /// The object exists but cannot be decoded here; the inner error names the reason (its
    /// kind is an object-level rule such as `dtype_unknown`).
    Unsupported(ztensor_format::Error),
    /// A zero-copy view was asked for where none is possible (compressed or big-endian data, a
    /// source that is not in memory, a dtype of another width, a misaligned slice). The owned
    /// read paths work in all these cases.
    View(String),
    /// The work itself failed, not the data: threads could not start, a worker panicked, a
    /// codec failed on valid input. Not a rule of the format.
    Failed(String),
    /// Another process is writing the file and the caller asked not to wait for it.
    Busy {
        /// The file.
        path: PathBuf,
    },
}

/// An error of this crate: boxed, so results stay small.
pub struct Error(Box<ErrorKind>);

impl Error {
    /// The kind of error.
    pub fn kind(&self) -> &ErrorKind {
        &self.0
    }

    /// The rule of `spec/rules.md` that was broken, when the error is about the format.
    pub fn rule(&self) -> Option<Rule> {
        match &*self.0 {
            ErrorKind::Format(e) | ErrorKind::Unsupported(e) => Some(e.kind()),
            _ => None,
        }
    }

    /// The operating system's error behind an [`ErrorKind::Io`] error.
    pub fn os_error(&self) -> Option<&std::io::Error> {
        match &*self.0 {
            ErrorKind::Io { source, .. } => Some(source),
            _ => None,
        }
    }

    /// The operating system's error behind `source`: an I/O error itself, or the one inside this
    /// crate's I/O error. For other crates' errors that keep either as their source.
    pub fn os_error_in<'e>(
        source: &'e (dyn std::error::Error + Send + Sync + 'static),
    ) -> Option<&'e std::io::Error> {
        match source.downcast_ref::<std::io::Error>() {
            Some(e) => Some(e),
            None => source.downcast_ref::<Error>()?.os_error(),
        }
    }

    /// The format error, when there is one.
    pub fn format_error(&self) -> Option<&ztensor_format::Error> {
        match &*self.0 {
            ErrorKind::Format(e) | ErrorKind::Unsupported(e) => Some(e),
            _ => None,
        }
    }

    /// An I/O error while doing `what` (on `path`, when known), for code that reads sources
    /// on this crate's behalf.
    pub fn io(what: impl Into<String>, path: Option<PathBuf>, source: std::io::Error) -> Error {
        Error(Box::new(ErrorKind::Io { what: what.into(), path, source }))
    }

    /// No object called `object` (or no component `role` of it): for tensor sources of other
    /// formats.
    pub fn not_found(object: &str, role: Option<&str>) -> Error {
        Error(Box::new(ErrorKind::NotFound {
            object: object.to_owned(),
            role: role.map(str::to_owned),
        }))
    }

    /// Another process holds the write lock of the file at `path` ([`ErrorKind::Busy`]).
    pub fn busy(path: PathBuf) -> Error {
        Error(Box::new(ErrorKind::Busy { path }))
    }

    /// A typed view of bytes that cannot be had (misaligned, of another type).
    pub fn view(message: impl Into<String>) -> Error {
        Error(Box::new(ErrorKind::View(message.into())))
    }

    /// The work failed for a reason that is not the data's (see [`ErrorKind::Failed`]): for the
    /// parallel engine and other code that runs this crate's work.
    pub fn failed(message: impl Into<String>) -> Error {
        Error(Box::new(ErrorKind::Failed(message.into())))
    }

    /// An object that exists but cannot be decoded here, for the reason `e` gives (an
    /// object-level rule such as `dtype_unknown`): for tensor sources of other formats.
    pub fn unsupported(e: ztensor_format::Error) -> Error {
        Error(Box::new(ErrorKind::Unsupported(e)))
    }

    /// Object `object`'s component `role` has a storage type this implementation does not
    /// know (rule `dtype_unknown`): unsupported, not broken.
    pub fn dtype_unknown(object: &str, role: &str) -> Error {
        Error::unsupported(
            ztensor_format::Error::new(Rule::DtypeUnknown, "unknown dtype")
                .in_object(object)
                .in_component(role),
        )
    }

    /// Data that breaks `rule` of the format, saying how.
    pub fn broken(rule: Rule, message: impl Into<String>) -> Error {
        Error::from(ztensor_format::Error::new(rule, message))
    }
}

impl From<ztensor_format::Error> for Error {
    fn from(e: ztensor_format::Error) -> Error {
        Error(Box::new(ErrorKind::Format(e)))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.0 {
            ErrorKind::Io { what, path: Some(p), source } => {
                write!(f, "{what} {}: {source}", p.display())
            }
            ErrorKind::Io { what, path: None, source } => write!(f, "{what}: {source}"),
            ErrorKind::Format(e) => write!(f, "{e}"),
            ErrorKind::NotFound { object, role: None } => write!(f, "no object named {object:?}"),
            ErrorKind::NotFound { object, role: Some(r) } => {
                write!(f, "object {object:?} has no component {r:?}")
            }
            ErrorKind::Unsupported(e) => write!(f, "unsupported object: {e}"),
            ErrorKind::View(m) => write!(f, "no zero-copy view: {m}"),
            ErrorKind::Failed(m) => f.write_str(m),
            ErrorKind::Busy { path } => {
                write!(f, "{} is being written by another process", path.display())
            }
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Error({self})")
    }
}

/// The message already says what the inner error says (an I/O error's cause, a format error
/// whole), so there is no `source()`: error reporters that print the chain would say it twice.
/// The inner errors stay reachable through [`Error::kind`] and [`Error::format_error`].
impl std::error::Error for Error {}

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Whether the data said no, as opposed to a request that failed, and what content a target
/// could not hold: read through [`Verdict`](ztensor_format::Verdict) (`use
/// ztensor_format::Verdict`).
impl ztensor_format::Verdict for Error {
    fn is_rejection(&self) -> bool {
        self.rule().is_some() && !matches!(&*self.0, ErrorKind::NotFound { .. })
    }
    fn refused(&self) -> Option<ztensor_format::Refused> {
        self.format_error()?.refused()
    }
    fn rule(&self) -> Option<ztensor_format::ErrorKind> {
        Error::rule(self)
    }
    fn failure(&self) -> ztensor_format::Failure {
        use ztensor_format::Failure;
        match &*self.0 {
            ErrorKind::Io { source, .. } => Failure::io(source),
            ErrorKind::Format(_) => Failure::Format,
            ErrorKind::Unsupported(_) => Failure::Unsupported,
            ErrorKind::NotFound { .. } => Failure::NotFound,
            _ => Failure::Other,
        }
    }
    fn object(&self) -> Option<&str> {
        match &*self.0 {
            ErrorKind::NotFound { object, .. } => Some(object),
            _ => self.format_error()?.object(),
        }
    }
    fn offset(&self) -> Option<u64> {
        self.format_error()?.offset()
    }
}
