//! The one door every byte from the network comes through: the HTTP client each store is built
//! with, whatever `object_store` does with it (reads, uploads, listings, credential fetches).
//!
//! - **Each answer's body is bounded by what was asked**, here and not in the HTTP library: a
//!   ranged GET by the range's length, an error answer by [`ERROR_BODY_LEN`] (cut there: only
//!   its status and error code are used), any other answer (a completion, a listing, a token)
//!   by [`ANSWER_LEN`]. A success answer past its bound fails the request with [`Refused`].
//! - **No redirect leaves a signed endpoint**: an S3, GCS or Azure request follows a redirect
//!   only within its own origin (scheme, host and port); one to another origin fails naming
//!   both, so no signature or session token is sent anywhere else. A plain `http(s)://` input
//!   may follow up to [`MAX_REDIRECTS`] redirects, never from `https` to `http`, never to
//!   another origin on a loopback, link-local, private or metadata address, and with no
//!   credential (it carries none).
//! - Each request is counted ([`Counters`]).

use std::error::Error as StdError;
use std::fmt;
use std::net::IpAddr;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use object_store::ClientOptions;
use object_store::client::{
    ClientConfigKey, HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest,
    HttpResponse, HttpResponseBody, HttpService,
};

use crate::counters::Counters;
use crate::error::Refused;

/// The most bytes of an error answer read (the rest is not read): enough for any store's XML
/// or JSON error document, of which only the error code is used.
pub const ERROR_BODY_LEN: u64 = 64 << 10;

/// The most bytes of a success answer that is no ranged read (a multipart upload's
/// completion, a listing page, a credential or token answer): a listing page of a thousand
/// keys of the longest length S3 allows is under 2 MiB.
pub const ANSWER_LEN: u64 = 8 << 20;

/// The most redirects a plain `http(s)://` read follows (public model hosts redirect once or
/// twice, to a CDN).
pub const MAX_REDIRECTS: usize = 5;

/// Which redirects a client follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Redirects {
    /// A signed store's: within its origin only.
    SameOrigin,
    /// A plain web server's: a few, to public addresses, never to plain `http` from `https`.
    Public,
}

/// The connector each store is built with: its own reqwest client (the options
/// `object_store` was given, our redirect rule), each request counted, every body bounded.
#[derive(Debug)]
pub(crate) struct Connector {
    pub(crate) counters: Arc<Counters>,
    pub(crate) redirects: Redirects,
}

impl HttpConnector for Connector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        let inner = match scripted_client() {
            Some(scripted) => scripted,
            None => HttpClient::new(client(options, self.redirects).map_err(|e| {
                object_store::Error::Generic { store: "HTTP", source: Box::new(e) }
            })?),
        };
        Ok(HttpClient::new(Service {
            inner,
            counters: Arc::clone(&self.counters),
            redirects: self.redirects,
        }))
    }
}

/// The scripted answers' client, when a script is set (feature `fuzzing`): it needs no network
/// client, whose build reads the system's certificates (most of a fuzzer's time per input).
#[cfg(feature = "fuzzing")]
fn scripted_client() -> Option<HttpClient> {
    crate::scripted::active().then(|| HttpClient::new(crate::scripted::Scripted))
}

#[cfg(not(feature = "fuzzing"))]
fn scripted_client() -> Option<HttpClient> {
    None
}

#[derive(Debug)]
struct Service {
    inner: HttpClient,
    counters: Arc<Counters>,
    redirects: Redirects,
}

#[async_trait::async_trait]
impl HttpService for Service {
    async fn call(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        let asked = Asked::of(&req);
        let from = origin_of(&req.uri().to_string());
        let response = self.inner.execute(req).await?;
        let status = response.status();
        if status.is_redirection()
            && let Some(to) = response.headers().get("location").and_then(|v| v.to_str().ok())
        {
            // What the policy stopped: never handed on, and said why.
            let first = from.as_deref().and_then(|f| url::Url::parse(f).ok());
            let next = target(first.as_ref(), to);
            let why = match (&first, &next) {
                (Some(first), Some(next)) => {
                    follow(self.redirects, first, next, 0).err().unwrap_or("too many redirects")
                }
                _ => "to an address that is no URL",
            };
            let to = next.map_or_else(
                || "an address that is no URL".to_owned(),
                |u| u.origin().ascii_serialization(),
            );
            let from = from.unwrap_or_default();
            return Err(HttpError::new(
                HttpErrorKind::Unknown,
                Refused::Redirect { from, to, why },
            ));
        }
        let (parts, body) = response.into_parts();
        if status.is_success() {
            let body = Capped::new(body, asked.bound, Over::Fail(asked.what));
            return Ok(HttpResponse::from_parts(parts, HttpResponseBody::new(body)));
        }
        // An error answer: its first bytes are read for the server's code, the rest is not
        // read, and the client is handed a document of that code alone, so no text of the
        // server's (which may quote the request, credentials included) goes further.
        let code = error_code(Capped::new(body, ERROR_BODY_LEN, Over::Cut)).await;
        let doc = code.map_or_else(String::new, |c| format!("<Error><Code>{c}</Code></Error>"));
        Ok(HttpResponse::from_parts(parts, HttpResponseBody::from(doc)))
    }
}

/// The server's error code in the first [`ERROR_BODY_LEN`] bytes of an error answer. A body
/// that fails part-way gives what came before.
async fn error_code(mut body: Capped) -> Option<String> {
    let mut held = Vec::new();
    while let Some(Ok(frame)) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
    {
        if let Ok(data) = frame.into_data() {
            held.extend_from_slice(&data);
        }
    }
    crate::error::server_code(&String::from_utf8_lossy(&held))
}

/// What a request asked for, so its answer can be bounded by it.
struct Asked {
    bound: u64,
    what: &'static str,
}

impl Asked {
    fn of(req: &HttpRequest) -> Asked {
        if req.method() == "HEAD" {
            return Asked { bound: 0, what: "a HEAD request asks for" };
        }
        let range = req.headers().get("range").and_then(|v| v.to_str().ok());
        match range.and_then(range_len) {
            Some(bound) => Asked { bound, what: "the range asked for" },
            None => Asked { bound: ANSWER_LEN, what: "an answer may have" },
        }
    }
}

/// The length of a `Range: bytes=A-B` or `bytes=-N` request, when it is one bounded range.
fn range_len(header: &str) -> Option<u64> {
    let spec = header.trim().strip_prefix("bytes=")?;
    if spec.contains(',') {
        return None;
    }
    let (a, b) = spec.split_once('-')?;
    if a.is_empty() {
        return b.trim().parse().ok();
    }
    let (a, b): (u64, u64) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
    b.checked_sub(a)?.checked_add(1)
}

/// What happens to a body past its bound.
#[derive(Debug, Clone, Copy)]
enum Over {
    /// The request fails ([`Refused::Oversized`]).
    Fail(&'static str),
    /// The body ends there (an error answer: its start holds its code).
    Cut,
}

/// A body that yields at most `left` more bytes.
struct Capped {
    inner: HttpResponseBody,
    bound: u64,
    left: u64,
    over: Over,
    done: bool,
}

impl Capped {
    fn new(inner: HttpResponseBody, bound: u64, over: Over) -> Capped {
        Capped { inner, bound, left: bound, over, done: false }
    }
}

impl Body for Capped {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        if self.done {
            return Poll::Ready(None);
        }
        let frame = match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            other => return other,
        };
        let Ok(mut data) = frame.into_data() else {
            // Trailers: nothing to count.
            return Poll::Ready(None);
        };
        let len = data.len() as u64;
        if len <= self.left {
            self.left -= len;
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        self.done = true;
        match self.over {
            Over::Cut => {
                data.truncate(usize::try_from(self.left).unwrap_or(usize::MAX));
                self.left = 0;
                Poll::Ready(Some(Ok(Frame::data(data))))
            }
            Over::Fail(what) => Poll::Ready(Some(Err(HttpError::new(
                HttpErrorKind::Decode,
                Refused::Oversized { bound: self.bound, what },
            )))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let inner = self.inner.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(inner.lower().min(self.left));
        hint.set_upper(inner.upper().map_or(self.left, |u| u.min(self.left)));
        hint
    }
}

/// `scheme://host:port` of `url`, lowercased, when it has one.
fn origin_of(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    Some(parsed.origin().ascii_serialization())
}

/// Where a redirect's `Location` points, resolved against the URL first asked.
fn target(first: Option<&url::Url>, location: &str) -> Option<url::Url> {
    match first {
        Some(base) => base.join(location).ok(),
        None => url::Url::parse(location).ok(),
    }
}

/// Whether a redirect from `first` (the URL first asked) to `next` after `hops` redirects is
/// followed, or why not.
fn follow(
    redirects: Redirects,
    first: &url::Url,
    next: &url::Url,
    hops: usize,
) -> Result<(), &'static str> {
    let same_origin = first.origin() == next.origin();
    match redirects {
        Redirects::SameOrigin if same_origin && hops < MAX_REDIRECTS => Ok(()),
        Redirects::SameOrigin => Err("a signed request never leaves its endpoint"),
        Redirects::Public => {
            if hops >= MAX_REDIRECTS {
                return Err("too many redirects");
            }
            if first.scheme() == "https" && next.scheme() != "https" {
                return Err("from https to plain http");
            }
            if !matches!(next.scheme(), "http" | "https") {
                return Err("not an http(s) URL");
            }
            if !same_origin && next.host().is_some_and(|h| internal(&h)) {
                return Err("to a loopback, link-local, private or metadata address");
            }
            Ok(())
        }
    }
}

/// Whether `host` is an address a public server has no business sending a client to: a
/// loopback, link-local (cloud metadata), private or unspecified address, `localhost`, or a
/// cloud's metadata name.
fn internal(host: &url::Host<&str>) -> bool {
    let ip = match host {
        url::Host::Ipv4(v4) => IpAddr::V4(*v4),
        url::Host::Ipv6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(*v6),
        },
        url::Host::Domain(name) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            return name == "localhost"
                || name.ends_with(".localhost")
                || name == "metadata"
                || name == "metadata.google.internal"
                || name.ends_with(".internal");
        }
    };
    match ip {
        IpAddr::V4(v4) => {
            v4.is_loopback()
                || v4.is_link_local()
                || v4.is_private()
                || v4.is_unspecified()
                || v4.is_broadcast()
                // Carrier-grade NAT, where some clouds put their metadata service.
                || (v4.octets()[0] == 100 && (64..128).contains(&v4.octets()[1]))
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || (first & 0xffc0) == 0xfe80
                || (first & 0xfe00) == 0xfc00
        }
    }
}

/// A configuration value that is no valid setting, named.
#[derive(Debug)]
struct BadOption(String);

impl fmt::Display for BadOption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl StdError for BadOption {}

/// The reqwest client `object_store` would build from `options`, with `redirects`' policy:
/// every setting it reads through [`ClientConfigKey`] is applied as it applies it, and
/// compression is off (a compressed answer's length is not the object's).
fn client(options: &ClientOptions, redirects: Redirects) -> Result<reqwest::Client, BadOption> {
    use ClientConfigKey as K;
    let get = |key: K| options.get_config_value(&key);
    let flag = |key: K| get(key).is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    let duration = |key: K| -> Result<Option<Duration>, BadOption> {
        get(key)
            .map(|v| {
                humantime::parse_duration(v.trim())
                    .map_err(|_| BadOption(format!("{key:?} is no duration: {v:?}")))
            })
            .transpose()
    };
    let number = |key: K| -> Result<Option<u64>, BadOption> {
        get(key)
            .map(|v| {
                u64::from_str(v.trim())
                    .map_err(|_| BadOption(format!("{key:?} is no number: {v:?}")))
            })
            .transpose()
    };

    let policy = reqwest::redirect::Policy::custom(move |attempt| {
        let hops = attempt.previous().len();
        let Some(first) = attempt.previous().first().cloned() else { return attempt.stop() };
        match follow(redirects, &first, attempt.url(), hops) {
            Ok(()) => attempt.follow(),
            // The redirect answer comes back to the service, which refuses it naming both.
            Err(_) => attempt.stop(),
        }
    });
    let mut builder = reqwest::ClientBuilder::new()
        .redirect(policy)
        .no_gzip()
        .no_brotli()
        .no_zstd()
        .no_deflate()
        .https_only(!flag(K::AllowHttp));
    if let Some(agent) = get(K::UserAgent) {
        builder = builder.user_agent(agent);
    } else {
        builder = builder.user_agent(concat!("ztensor-remote/", env!("CARGO_PKG_VERSION")));
    }
    if let Some(proxy) = get(K::ProxyUrl) {
        let mut proxy = reqwest::Proxy::all(&proxy)
            .map_err(|_| BadOption("the proxy URL (ProxyUrl) is no URL".to_owned()))?;
        if let Some(pem) = get(K::ProxyCaCertificate) {
            let certificate =
                reqwest::tls::Certificate::from_pem(pem.as_bytes()).map_err(|_| {
                    BadOption("the proxy's CA certificate is no PEM certificate".to_owned())
                })?;
            builder = builder.add_root_certificate(certificate);
        }
        if let Some(excludes) = get(K::ProxyExcludes) {
            proxy = proxy.no_proxy(reqwest::NoProxy::from_string(&excludes));
        }
        builder = builder.proxy(proxy);
    }
    if let Some(t) = duration(K::Timeout)? {
        builder = builder.timeout(t);
    }
    if let Some(t) = duration(K::ConnectTimeout)? {
        builder = builder.connect_timeout(t);
    }
    if let Some(t) = duration(K::PoolIdleTimeout)? {
        builder = builder.pool_idle_timeout(t);
    }
    if let Some(n) = number(K::PoolMaxIdlePerHost)? {
        builder = builder.pool_max_idle_per_host(usize::try_from(n).unwrap_or(usize::MAX));
    }
    if let Some(t) = duration(K::Http2KeepAliveInterval)? {
        builder = builder.http2_keep_alive_interval(t);
    }
    if let Some(t) = duration(K::Http2KeepAliveTimeout)? {
        builder = builder.http2_keep_alive_timeout(t);
    }
    if flag(K::Http2KeepAliveWhileIdle) {
        builder = builder.http2_keep_alive_while_idle(true);
    }
    if let Some(n) = number(K::Http2MaxFrameSize)? {
        builder = builder.http2_max_frame_size(u32::try_from(n).ok());
    }
    if flag(K::Http1Only) {
        builder = builder.http1_only();
    }
    if flag(K::Http2Only) {
        builder = builder.http2_prior_knowledge();
    }
    if flag(K::AllowInvalidCertificates) {
        builder = builder.danger_accept_invalid_certs(true);
    }
    builder
        .build()
        .map_err(|_| BadOption("the HTTP client cannot be built with these options".to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_give_their_length() {
        assert_eq!(range_len("bytes=0-0"), Some(1));
        assert_eq!(range_len("bytes=100-199"), Some(100));
        assert_eq!(range_len("bytes=-65536"), Some(65536));
        assert_eq!(range_len("bytes=100-"), None);
        assert_eq!(range_len("bytes=5-4"), None);
        assert_eq!(range_len("bytes=0-1,4-5"), None);
        assert_eq!(range_len("items=0-1"), None);
        assert_eq!(range_len(&format!("bytes=0-{}", u64::MAX)), None);
    }

    #[test]
    fn redirects_are_followed_only_where_the_rule_says() {
        let u = |s: &str| url::Url::parse(s).unwrap();
        let signed = Redirects::SameOrigin;
        assert!(
            follow(signed, &u("https://s3.example/b/k"), &u("https://s3.example/b/k2"), 0).is_ok()
        );
        for off in
            ["https://other.example/b/k", "http://s3.example/b/k", "https://s3.example:444/k"]
        {
            assert!(follow(signed, &u("https://s3.example/b/k"), &u(off), 0).is_err(), "{off}");
        }
        let public = Redirects::Public;
        let first = u("https://models.example/m.zt");
        assert!(follow(public, &first, &u("https://cdn.example/m.zt"), 0).is_ok());
        assert!(follow(public, &first, &u("https://cdn.example/m.zt"), MAX_REDIRECTS).is_err());
        for refused in [
            "http://cdn.example/m.zt",
            "https://169.254.169.254/latest/meta-data/",
            "https://127.0.0.1/m.zt",
            "https://10.1.2.3/m.zt",
            "https://[::1]/m.zt",
            "https://[::ffff:169.254.169.254]/",
            "https://[fe80::1]/m.zt",
            "https://localhost/m.zt",
            "https://metadata.google.internal/computeMetadata/v1/",
            "https://100.100.100.200/",
            "ftp://cdn.example/m.zt",
        ] {
            assert!(follow(public, &first, &u(refused), 0).is_err(), "{refused}");
        }
        // Within the first origin, even a loopback server may redirect (a local test server).
        let local = u("http://127.0.0.1:8000/a");
        assert!(follow(public, &local, &u("http://127.0.0.1:8000/b"), 0).is_ok());
        assert!(follow(public, &local, &u("http://127.0.0.1:9000/b"), 0).is_err());
    }
}
