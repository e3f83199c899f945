//! Where an object lives: `s3://BUCKET/KEY`, `gs://BUCKET/KEY`, `az://CONTAINER/KEY`,
//! `http(s)://HOST/PATH`, parsed once and shown without credentials.

use std::fmt;

use crate::error::{Error, ErrorKind};

/// The object stores a [`Location`] can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Scheme {
    /// Amazon S3 and S3-compatible stores (MinIO, R2, moto): `s3://`.
    S3,
    /// Google Cloud Storage: `gs://`.
    Gcs,
    /// Azure Blob Storage: `az://CONTAINER/KEY` (the account from `AZURE_STORAGE_ACCOUNT_NAME`).
    Azure,
    /// A plain web server answering range requests: `http://`, `https://` (read only).
    Http,
}

impl Scheme {
    /// Whether objects of this scheme can be written (every store but plain HTTP).
    pub fn writable(self) -> bool {
        !matches!(self, Scheme::Http)
    }
}

/// Whether `text` is a URL (`SCHEME://...`) rather than a local path: it starts with a scheme
/// name (a letter, then letters, digits, `+`, `-` or `.`) and `://`. A URL of a scheme this
/// crate does not know is still a URL, refused by [`Location::parse`] with its scheme named,
/// never taken for a file.
pub fn is_url(text: &str) -> bool {
    let Some((scheme, _)) = text.split_once("://") else { return false };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// A parsed object URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    scheme: Scheme,
    /// The bucket or container; for HTTP the origin (`http://host:port`).
    bucket: String,
    /// The key inside the bucket (for HTTP the path without its leading `/`), as written
    /// (percent-decoded for HTTP).
    key: String,
    /// The URL as shown: no user, password or query.
    shown: String,
}

impl Location {
    /// Parses `url`.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidUrl`]: not a URL, an unknown scheme, no bucket or no key, a user or
    /// password in the URL, a query string or fragment (a presigned URL's signature would
    /// be dropped by the client, so it is refused rather than read unsigned).
    pub fn parse(url: &str) -> Result<Location, Error> {
        let invalid = |why: &str| {
            Error::new(
                ErrorKind::InvalidUrl,
                shown_loosely(url),
                format!("not an object URL: {why}"),
            )
        };
        if !is_url(url) {
            return Err(invalid(
                "expected s3://BUCKET/KEY, gs://BUCKET/KEY, az://CONTAINER/KEY or http(s)://HOST/PATH",
            ));
        }
        let (scheme_text, rest) = url.split_once("://").unwrap_or_default();
        let scheme = match scheme_text.to_ascii_lowercase().as_str() {
            "s3" | "s3a" => Scheme::S3,
            "gs" | "gcs" => Scheme::Gcs,
            "az" | "azure" | "abfs" => Scheme::Azure,
            "http" | "https" => Scheme::Http,
            other => {
                return Err(invalid(&format!(
                    "the scheme {other:?} is not one of s3, gs, az, http, https"
                )));
            }
        };
        if scheme == Scheme::Http {
            return Location::parse_http(url).map_err(|why| invalid(&why));
        }
        if rest.contains(['?', '#']) {
            return Err(invalid("a query string or fragment is not part of an object key"));
        }
        let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(invalid("no bucket"));
        }
        if bucket.contains('@') {
            return Err(invalid("credentials do not belong in the URL; use the environment"));
        }
        if !bucket.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_')) {
            return Err(invalid(&format!("{bucket:?} is not a bucket name")));
        }
        if key.is_empty() || key.ends_with('/') {
            return Err(invalid("no object key after the bucket"));
        }
        if key.split('/').any(|s| s.is_empty() || s == "." || s == "..") {
            return Err(invalid("an empty, `.` or `..` segment in the key"));
        }
        let shown = format!("{}://{bucket}/{key}", scheme_text.to_ascii_lowercase());
        Ok(Location { scheme, bucket: bucket.to_owned(), key: key.to_owned(), shown })
    }

    fn parse_http(url: &str) -> Result<Location, String> {
        let parsed = url::Url::parse(url).map_err(|e| e.to_string())?;
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err("credentials do not belong in the URL".to_owned());
        }
        if parsed.query().is_some() || parsed.fragment().is_some() {
            return Err("a query string or fragment (a presigned URL) is not supported".to_owned());
        }
        let host = parsed.host_str().filter(|h| !h.is_empty()).ok_or("no host")?;
        let origin = match parsed.port() {
            Some(port) => format!("{}://{host}:{port}", parsed.scheme()),
            None => format!("{}://{host}", parsed.scheme()),
        };
        let key = parsed.path().trim_start_matches('/');
        if key.is_empty() || key.ends_with('/') {
            return Err("no file path after the host".to_owned());
        }
        let shown = format!("{origin}/{key}");
        Ok(Location { scheme: Scheme::Http, bucket: origin, key: key.to_owned(), shown })
    }

    /// The store it is in.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The bucket or container (for HTTP, the origin `http(s)://host[:port]`).
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The object's key in its bucket (for HTTP, its path without the leading `/`).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The object's key as `object_store` names it.
    pub(crate) fn store_path(&self) -> Result<object_store::path::Path, Error> {
        let parsed = if self.scheme == Scheme::Http {
            object_store::path::Path::from_url_path(&self.key)
        } else {
            object_store::path::Path::parse(&self.key)
        };
        parsed.map_err(|e| {
            Error::new(ErrorKind::InvalidUrl, &self.shown, format!("not an object key: {e}"))
        })
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

/// `url` as an error may show it before it parsed: without anything from a `?`, and without a
/// user or password before an `@` in the authority.
fn shown_loosely(url: &str) -> String {
    let url = url.split(['?', '#']).next().unwrap_or_default();
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
            let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
            let sep = if rest.contains('/') { "/" } else { "" };
            format!("{scheme}://{host}{sep}{path}")
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_told_from_paths() {
        for url in ["s3://b/k", "gs://b/k", "az://c/k", "https://h/p", "ftp://h/p", "S3://b/k"] {
            assert!(is_url(url), "{url}");
        }
        for path in ["model.zt", "/tmp/a://b", "./s3:/b/k", "C:\\m.zt", "://x", "1s3://b"] {
            assert!(!is_url(path), "{path}");
        }
    }

    #[test]
    fn object_urls_parse() {
        let l = Location::parse("s3://bucket/dir/model.zt").unwrap();
        assert_eq!((l.scheme(), l.bucket(), l.key()), (Scheme::S3, "bucket", "dir/model.zt"));
        assert_eq!(l.to_string(), "s3://bucket/dir/model.zt");
        let l = Location::parse("gs://b/m.safetensors").unwrap();
        assert_eq!(l.scheme(), Scheme::Gcs);
        let l = Location::parse("az://container/m.zt").unwrap();
        assert_eq!((l.scheme(), l.bucket()), (Scheme::Azure, "container"));
        let l = Location::parse("http://127.0.0.1:8080/files/m%20x.zt").unwrap();
        assert_eq!(
            (l.scheme(), l.bucket(), l.key()),
            (Scheme::Http, "http://127.0.0.1:8080", "files/m%20x.zt")
        );
        assert!(!l.scheme().writable());
        assert_eq!(l.store_path().unwrap().as_ref(), "files/m x.zt");
    }

    #[test]
    fn malformed_urls_are_refused_with_the_reason() {
        for (url, why) in [
            ("s3://", "no bucket"),
            ("s3:///k", "no bucket"),
            ("s3://bucket", "no object key"),
            ("s3://bucket/", "no object key"),
            ("s3://bucket/dir/", "no object key"),
            ("s3://b/a//c", "segment"),
            ("s3://b/../c", "segment"),
            ("s3://b/k?versionId=1", "query"),
            ("s3://key:secret@b/k", "credentials"),
            ("s3://b*d/k", "bucket name"),
            ("ftp://h/p", "\"ftp\""),
            ("https://h/", "no file path"),
            ("https://u:pw@h/p", "credentials"),
            ("https://h/p?X-Amz-Signature=abc", "query"),
            ("model.zt", "expected s3://"),
        ] {
            let e = Location::parse(url).unwrap_err();
            assert_eq!(e.kind(), &ErrorKind::InvalidUrl, "{url}");
            let text = e.to_string();
            assert!(text.contains(why), "{url}: {text}");
            assert!(
                !text.contains("secret") && !text.contains("pw") && !text.contains("abc"),
                "{text}"
            );
        }
    }
}
