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

    /// `object_store`'s error as ours, for an operation (`what`) on `url`. The message is
    /// built from our words, the HTTP status and the server's error code: never from
    /// `object_store`'s text (which names the request's URL, user and password included, and
    /// quotes the server's answer, which may quote the request's credentials).
    pub(crate) fn from_store(what: &str, url: &str, e: object_store::Error) -> Error {
        use object_store::Error as E;
        let found = Found::in_chain(&e);
        // Credentials looked for last at the instance metadata service, and not found there
        // (no such service here, or it refused): that no credentials were found is what to
        // say, not the service's answer. `object_store`'s error names the address it asked.
        if found.metadata {
            return Error::new(
                ErrorKind::Config,
                url,
                format!(
                    "{what}: no AWS credentials found (the instance metadata service at \
                     169.254.169.254 gave none: {}); looked for {}",
                    found.describe(&e),
                    crate::profile::where_credentials_are_looked_for()
                ),
            );
        }
        let status = found.status;
        let kind = match (&e, status) {
            (E::NotFound { .. }, _) | (_, Some(404)) => ErrorKind::NotFound,
            (E::Precondition { .. } | E::NotModified { .. }, _) | (_, Some(412 | 304)) => {
                ErrorKind::Changed
            }
            (E::PermissionDenied { .. } | E::Unauthenticated { .. }, _) | (_, Some(401 | 403)) => {
                ErrorKind::Denied { code: found.code.clone() }
            }
            _ => ErrorKind::Request,
        };
        let message = match &kind {
            ErrorKind::NotFound => format!("{what}: no such object or bucket"),
            ErrorKind::Denied { code } => {
                let status = status.map_or_else(String::new, |s| format!("HTTP {s}"));
                let code = code.as_deref().map_or_else(String::new, |c| format!(", {c}"));
                format!("{what}: refused by the server ({status}{code})")
            }
            ErrorKind::Changed => format!(
                "{what}: the object changed while it was read (its ETag moved); nothing read from it is used"
            ),
            _ => format!("{what}: {}", found.describe(&e)),
        };
        Error::new(kind, url, message)
    }
}

/// What an `object_store` error's source chain tells, by type.
#[derive(Debug, Default)]
struct Found {
    /// The HTTP status of the answer that failed the request.
    status: Option<u16>,
    /// The server's error code, parsed from its answer.
    code: Option<String>,
    /// A refusal of ours (an oversized answer, a redirect not followed).
    refused: Option<String>,
    /// A transport failure: its kind, and the innermost cause (an operating system error).
    transport: Option<(object_store::client::HttpErrorKind, String)>,
    /// The server redirected without saying where.
    bare_redirect: bool,
    /// The failure was the instance metadata service's (credentials looked for there).
    metadata: bool,
}

impl Found {
    fn in_chain(e: &object_store::Error) -> Found {
        // `object_store` does not export the type that carries a failed answer's status
        // (its `RetryError` lives in a private module), so the status is read from its text:
        // "status code: 403 Forbidden". The body in that text is the one our client let
        // through (`crate::http`), an error document holding only the server's code.
        let text = e.to_string();
        let mut found = Found {
            status: status_in_text(&text),
            code: server_code(&text),
            bare_redirect: text.contains("redirect without LOCATION"),
            metadata: text.contains("169.254.169.254"),
            ..Found::default()
        };
        let mut link: Option<&(dyn std::error::Error + 'static)> = Some(e);
        while let Some(at) = link {
            if let Some(refused) = at.downcast_ref::<Refused>() {
                found.refused.get_or_insert_with(|| refused.to_string());
            }
            if let Some(http) = at.downcast_ref::<object_store::client::HttpError>()
                && found.transport.is_none()
            {
                let mut innermost: &(dyn std::error::Error + 'static) = http;
                while let Some(next) = innermost.source() {
                    innermost = next;
                }
                found.transport = Some((http.kind(), scrub(&innermost.to_string())));
            }
            link = at.source();
        }
        // A refusal of ours that names the address (a redirect to it) is not the service's.
        found.metadata &= found.refused.is_none();
        found
    }

    /// The failure in our words.
    fn describe(&self, e: &object_store::Error) -> String {
        use object_store::client::HttpErrorKind as K;
        if let Some(refused) = &self.refused {
            return refused.clone();
        }
        if let Some(status) = self.status {
            let reason = http_reason(status);
            return match &self.code {
                Some(code) => format!("the server answered HTTP {status}{reason} ({code})"),
                None => format!("the server answered HTTP {status}{reason}"),
            };
        }
        if self.bare_redirect {
            return "the server redirected without saying where (often a bucket in another region than the one configured)".to_owned();
        }
        if let Some((kind, cause)) = &self.transport {
            let what = match kind {
                K::Connect => "could not connect",
                K::Request => "the request could not be sent",
                K::Timeout => "no answer in time",
                K::Interrupted => "the connection was cut",
                K::Decode => "the answer could not be read",
                _ => "the request failed",
            };
            return format!("{what}: {cause}");
        }
        // A failure before any request (a configuration `object_store` refused): its text
        // names no request, but may quote a value given, so it is redacted too.
        scrub(&e.to_string())
    }
}

/// `" Forbidden"` for 403: the standard reason of an HTTP status, with its space.
fn http_reason(status: u16) -> String {
    reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .map_or_else(String::new, |r| format!(" {r}"))
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.url, self.message)
    }
}

impl std::error::Error for Error {}

/// As an I/O error (what [`ReadAt`](ztensor_source::ReadAt) and [`std::io::Write`] return), of
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

/// The HTTP status `object_store` quotes in `text` (`status code: 403 Forbidden`).
pub(crate) fn status_in_text(text: &str) -> Option<u16> {
    let at = text.find("status code: ")? + "status code: ".len();
    let digits = text.get(at..at + 3)?;
    digits.bytes().all(|b| b.is_ascii_digit()).then(|| digits.parse().ok()).flatten()
}

/// The server's error code from an S3/GCS/Azure XML answer quoted in `text`
/// (`<Code>SignatureDoesNotMatch</Code>`), when there is one.
pub(crate) fn server_code(text: &str) -> Option<String> {
    let start = text.find("<Code>")? + "<Code>".len();
    let len = text.get(start..)?.find("</Code>")?;
    let code = text.get(start..start + len)?;
    let plain = !code.is_empty()
        && code.len() <= 64
        && code.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_');
    plain.then(|| code.to_owned())
}

/// `text` without what may carry a secret: a server's XML answer may quote the string it
/// signed and the access key id; query strings may carry presigned signatures; a URL's user
/// information its password; and the credentials this process was given are cut wherever
/// they appear. Everything from the first `<` (the quoted answer) or `?` (a query) on is
/// cut, and the length bounded.
pub(crate) fn scrub(text: &str) -> String {
    let cut = text.find(['<', '?']).unwrap_or(text.len());
    let redacted = redact(&text[..cut]);
    let mut shown: String = redacted.chars().take(400).collect();
    if shown.len() < redacted.len() || cut < text.len() {
        shown.push_str(" [..]");
    }
    shown.trim_end().to_owned()
}

/// `text` with every URL's user information (`user:password@`) removed and every credential
/// this process was given ([`secrets`]) replaced by `[redacted]`.
pub(crate) fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let authority_end = tail.find(['/', ' ', ')', '"', '\'', '\n']).unwrap_or(tail.len());
        let authority = &tail[..authority_end];
        match authority.rfind('@') {
            Some(user_end) => out.push_str(&authority[user_end + 1..]),
            None => out.push_str(authority),
        }
        rest = &tail[authority_end..];
    }
    out.push_str(rest);
    for secret in secrets() {
        if out.contains(secret.as_str()) {
            out = out.replace(secret.as_str(), "[redacted]");
        }
    }
    out
}

/// The credentials this process was given in its environment, as the stores read them, and
/// the passwords in their endpoint URLs: the strings no message may hold.
pub(crate) fn secrets() -> Vec<String> {
    const SECRET: [&str; 12] = [
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_SECURITY_TOKEN",
        "AWS_ACCESS_KEY_ID",
        "AZURE_STORAGE_ACCOUNT_KEY",
        "AZURE_STORAGE_ACCESS_KEY",
        "AZURE_STORAGE_SAS_TOKEN",
        "AZURE_STORAGE_TOKEN",
        "AZURE_CLIENT_SECRET",
        "GOOGLE_SERVICE_ACCOUNT_KEY",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN",
        "AZURE_FEDERATED_TOKEN",
    ];
    const URLS: [&str; 5] = [
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT",
        "AWS_ENDPOINT_URL_S3",
        "GOOGLE_STORAGE_ENDPOINT",
        "AZURE_STORAGE_ENDPOINT",
    ];
    let mut found: Vec<String> = SECRET.iter().filter_map(|v| std::env::var(v).ok()).collect();
    for var in URLS {
        if let Ok(endpoint) = std::env::var(var)
            && let Ok(url) = url::Url::parse(&endpoint)
        {
            found.extend(url.password().map(str::to_owned));
            if !url.username().is_empty() {
                found.push(url.username().to_owned());
            }
        }
    }
    // Short values would redact ordinary words; no real credential is this short.
    found.retain(|s| s.len() >= 6);
    found
}

/// A request the client refused to complete, for a reason of ours rather than the server's
/// or the transport's. Found in an error's source chain, it gives the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refused {
    /// A success answer longer than what was asked.
    Oversized {
        /// What was asked for.
        bound: u64,
        /// What the request asked (a range, an answer).
        what: &'static str,
    },
    /// A redirect this client does not follow.
    Redirect {
        /// The origin the request was sent to.
        from: String,
        /// The origin (or URL without credentials and query) it was sent on to.
        to: String,
        /// Why not.
        why: &'static str,
    },
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::Oversized { bound, what } => {
                write!(f, "the server's answer is longer than the {bound} bytes {what}")
            }
            Refused::Redirect { from, to, why } => {
                write!(f, "the server at {from} redirected to {to}: not followed ({why})")
            }
        }
    }
}

impl std::error::Error for Refused {}

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
        let shown = scrub("Error performing GET http://user:hunter2secret@host:9000/b/k in 1s");
        assert!(!shown.contains("hunter2secret") && !shown.contains("user"), "{shown}");
        assert!(shown.contains("http://host:9000/b/k"), "{shown}");
    }

    #[test]
    fn a_failure_of_the_instance_metadata_service_says_no_credentials_were_found() {
        let e = object_store::Error::Generic {
            store: "S3",
            source: "Error performing PUT http://169.254.169.254/latest/api/token in 1ms - \
                     Server returned non-2xx status code: 403 Forbidden: "
                .into(),
        };
        let e = Error::from_store("opening", "s3://b/k", e);
        assert_eq!(e.kind(), &ErrorKind::Config);
        let text = e.to_string();
        assert!(text.contains("no AWS credentials found"), "{text}");
        assert!(text.contains("HTTP 403") && text.contains("--no-sign-request"), "{text}");
        // Our refusal of a redirect to that address is not the service's answer.
        let refused = object_store::Error::Generic {
            store: "S3",
            source: Box::new(Refused::Redirect {
                from: "http://127.0.0.1:9".into(),
                to: "http://169.254.169.254".into(),
                why: "a signed request never leaves its endpoint",
            }),
        };
        let e = Error::from_store("opening", "s3://b/k", refused);
        assert_eq!(e.kind(), &ErrorKind::Request, "{e}");
        assert!(e.to_string().contains("never leaves"), "{e}");
    }

    #[test]
    fn io_errors_keep_the_kind_and_the_url() {
        let e = Error::new(ErrorKind::NotFound, "s3://b/k", "reading: no such object or bucket");
        let io: io::Error = e.into();
        assert_eq!(io.kind(), io::ErrorKind::NotFound);
        assert_eq!(io.to_string(), "s3://b/k: reading: no such object or bucket");
    }
}
