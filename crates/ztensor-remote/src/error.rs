//! One error type: what failed, on which URL, and the server's own code when it gave one.
//! Messages name the URL as [`Location`](crate::Location) shows it (no user, password or
//! query string) and never a credential or signature.

use std::fmt;
use std::io;

/// What kind of failure an [`Error`] is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Not a URL this crate reads or writes (unknown scheme, no bucket, no key, a query).
    InvalidUrl,
    /// The object, bucket or container does not exist.
    NotFound,
    /// The client cannot be configured as asked: a setting the store does not know, or an
    /// AWS profile named (`AWS_PROFILE`) and found in neither `~/.aws` file.
    Config,
    /// The server refused the credentials or the request (HTTP 401/403); `code` is the
    /// server's error code (`SignatureDoesNotMatch`, `InvalidAccessKeyId`, `AccessDenied`..).
    Denied {
        /// The server's error code, when its answer carried one.
        code: Option<String>,
    },
    /// The object changed while it was read (its ETag or modification time moved): the bytes
    /// read so far belong to another version, and nothing is mixed.
    Changed,
    /// The operation did not finish within the time bound
    /// ([`RemoteOptions::timeout`](crate::RemoteOptions::timeout)).
    TimedOut,
    /// The scheme is read only (`http://`, `https://`) and a write was asked.
    ReadOnly,
    /// Any other failure of a request: an unreachable endpoint, a server that kept failing
    /// after the retries, a malformed answer.
    Request,
}

/// A failed remote operation, naming the URL.
#[derive(Debug, Clone)]
pub struct Error {
    kind: ErrorKind,
    url: String,
    message: String,
}

impl Error {
    pub(crate) fn new(
        kind: ErrorKind,
        url: impl Into<String>,
        message: impl Into<String>,
    ) -> Error {
        Error { kind, url: url.into(), message: message.into() }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// The URL it concerns, as shown in messages (no credentials, no query string).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `object_store`'s error as ours, for an operation (`what`) on `url`.
    pub(crate) fn from_store(what: &str, url: &str, e: object_store::Error) -> Error {
        use object_store::Error as E;
        let text = e.to_string();
        let kind = match &e {
            E::NotFound { .. } => ErrorKind::NotFound,
            E::Precondition { .. } | E::NotModified { .. } => ErrorKind::Changed,
            E::PermissionDenied { .. } | E::Unauthenticated { .. } => {
                ErrorKind::Denied { code: server_code(&text) }
            }
            _ if status_in(&text, &["403 Forbidden", "401 Unauthorized"]) => {
                ErrorKind::Denied { code: server_code(&text) }
            }
            _ if status_in(&text, &["404 Not Found"]) => ErrorKind::NotFound,
            _ if status_in(&text, &["412 Precondition Failed"]) => ErrorKind::Changed,
            _ => ErrorKind::Request,
        };
        let message = match &kind {
            ErrorKind::NotFound => format!("{what}: no such object or bucket"),
            ErrorKind::Denied { code: Some(code) } => {
                format!("{what}: refused by the server ({code})")
            }
            ErrorKind::Denied { code: None } => {
                format!("{what}: refused by the server: {}", scrub(&text))
            }
            ErrorKind::Changed => {
                format!(
                    "{what}: the object changed while it was read (its ETag moved); nothing read from it is used"
                )
            }
            _ => format!("{what}: {}", scrub(&text)),
        };
        Error::new(kind, url, message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.url, self.message)
    }
}

impl std::error::Error for Error {}

/// As an I/O error (what [`ReadAt`](ztensor_io::ReadAt) and [`std::io::Write`] return), of
/// the nearest I/O kind, this error inside.
impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        io::Error::new(io_kind(&e.kind), e)
    }
}

/// A failed request is no rejection: the store said no, as a file system would
/// ([`Failure::Io`](ztensor_format::Failure::Io) of the nearest I/O kind, as [`io::Error`]
/// has it).
impl ztensor_format::Verdict for Error {
    fn is_rejection(&self) -> bool {
        false
    }
    fn failure(&self) -> ztensor_format::Failure {
        ztensor_format::Failure::Io(io_kind(&self.kind), None)
    }
}

/// The nearest I/O kind of a remote failure.
fn io_kind(kind: &ErrorKind) -> io::ErrorKind {
    match kind {
        ErrorKind::NotFound => io::ErrorKind::NotFound,
        ErrorKind::Denied { .. } => io::ErrorKind::PermissionDenied,
        ErrorKind::TimedOut => io::ErrorKind::TimedOut,
        ErrorKind::InvalidUrl | ErrorKind::Config => io::ErrorKind::InvalidInput,
        ErrorKind::ReadOnly => io::ErrorKind::ReadOnlyFilesystem,
        ErrorKind::Changed | ErrorKind::Request => io::ErrorKind::Other,
    }
}

/// Whether `text` carries one of the HTTP `statuses`.
fn status_in(text: &str, statuses: &[&str]) -> bool {
    statuses.iter().any(|s| text.contains(s))
}

/// The server's error code from an S3/GCS/Azure XML answer quoted in `text`
/// (`<Code>SignatureDoesNotMatch</Code>`), when there is one.
fn server_code(text: &str) -> Option<String> {
    let start = text.find("<Code>")? + "<Code>".len();
    let len = text.get(start..)?.find("</Code>")?;
    let code = text.get(start..start + len)?;
    let plain = !code.is_empty()
        && code.len() <= 64
        && code.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_');
    plain.then(|| code.to_owned())
}

/// `text` without what may carry a secret: a server's XML answer may quote the string it
/// signed and the access key id; query strings may carry presigned signatures. Everything from
/// the first `<` (the quoted answer) or `?` (a query) on is cut, and the length bounded.
pub(crate) fn scrub(text: &str) -> String {
    let cut = text.find(['<', '?']).unwrap_or(text.len());
    let mut shown: String = text[..cut].chars().take(400).collect();
    if shown.len() < text.len() {
        shown.push_str(" [..]");
    }
    shown.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_codes_are_found_and_secrets_cut() {
        let text = "Client error with status 403 Forbidden: <?xml version=\"1.0\"?><Error>\
                    <Code>SignatureDoesNotMatch</Code><StringToSign>AWS4 secret</StringToSign>";
        assert_eq!(server_code(text).as_deref(), Some("SignatureDoesNotMatch"));
        assert_eq!(server_code("no xml here"), None);
        assert_eq!(server_code("<Code>bad code with spaces</Code>"), None);
        let shown = scrub(text);
        assert!(!shown.contains("secret"), "{shown}");
        assert!(shown.contains("403 Forbidden"), "{shown}");
        assert!(!scrub("GET http://h/b/k?X-Amz-Signature=abc").contains("abc"));
    }

    #[test]
    fn io_errors_keep_the_kind_and_the_url() {
        let e = Error::new(ErrorKind::NotFound, "s3://b/k", "reading: no such object or bucket");
        let io: io::Error = e.into();
        assert_eq!(io.kind(), io::ErrorKind::NotFound);
        assert_eq!(io.to_string(), "s3://b/k: reading: no such object or bucket");
    }
}
