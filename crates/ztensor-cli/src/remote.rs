//! Inputs in object storage: `s3://`, `gs://`, `az://` and `http(s)://` wherever a command
//! reads a file, each object opened once per process (recognising it and opening it share the
//! one open request and its cached ends) and read through the format registry's one door
//! ([`ztensor_registry::Detected::object`]).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, OnceLock, PoisonError};

use anyhow::{Result, anyhow};
use ztensor_remote::{Location, RemoteObject, RemoteOptions, RemoteUpload};

static OPTIONS: OnceLock<RemoteOptions> = OnceLock::new();

/// Every object this process opened, by URL.
static OPENED: OnceLock<Mutex<HashMap<String, RemoteObject>>> = OnceLock::new();

/// Sets how remote objects are reached (`--no-sign-request`, `--remote-timeout`); the first
/// call wins.
pub(crate) fn configure(options: RemoteOptions) {
    let _ = OPTIONS.set(options);
}

/// The URL `path` is, when it is one rather than a local path.
pub(crate) fn url_of(path: &Path) -> Option<&str> {
    path.to_str().filter(|s| ztensor_remote::is_url(s))
}

/// Whether the URLs `a` and `b` name the same object (as parsed: scheme, bucket and key; a
/// URL that does not parse is compared as written).
pub(crate) fn same_object(a: &str, b: &str) -> bool {
    ztensor_registry::same_file(std::path::Path::new(a), std::path::Path::new(b))
}

/// Refuses outputs (`outputs`, URLs) that are objects the command reads (`inputs`, paths or
/// URLs): writing one would replace an input, as a local output over its input is refused.
///
/// # Errors
/// The first output that is an input, naming both.
pub(crate) fn not_over_inputs(
    inputs: &[std::path::PathBuf],
    outputs: impl IntoIterator<Item = String>,
) -> Result<()> {
    for output in outputs {
        let hit = inputs.iter().filter_map(|p| url_of(p)).find(|i| same_object(i, &output));
        if let Some(input) = hit {
            anyhow::bail!(
                "{output} is also the input {input}; writing there would replace it (choose \
                 another output prefix)"
            );
        }
    }
    Ok(())
}

/// The object at `url`, opened on first use (one request: its size, version and last bytes).
///
/// # Errors
/// A malformed URL, a missing object or bucket, refused credentials, a server that kept
/// failing: each naming the URL (status 2).
pub(crate) fn object(url: &str) -> Result<RemoteObject> {
    let opened = OPENED.get_or_init(Mutex::default);
    if let Some(object) = opened.lock().unwrap_or_else(PoisonError::into_inner).get(url) {
        return Ok(object.clone());
    }
    let location = Location::parse(url).map_err(|e| anyhow!("{e}"))?;
    let options = OPTIONS.get().cloned().unwrap_or_default();
    let object = RemoteObject::open(&location, &options).map_err(|e| anyhow!("{e}"))?;
    opened.lock().unwrap_or_else(PoisonError::into_inner).insert(url.to_owned(), object.clone());
    Ok(object)
}

/// What the object at `url` is, by its content (as [`ztensor_registry::detect`] tells a file).
pub(crate) fn detect(url: &str) -> Result<ztensor_registry::Kind> {
    let object = object(url)?;
    ztensor_registry::detect_source(&object, Some(Path::new(url))).map_err(|e| anyhow!("{e}"))
}

/// With `ZTENSOR_REMOTE_STATS` set, tells on standard error what each remote input cost:
/// requests sent (retries counted) and bytes received, for every object read (the shards a
/// reader opened beside an index or a zTensor 2 root too), and their sum.
pub(crate) fn report() {
    if std::env::var_os("ZTENSOR_REMOTE_STATS").is_none() {
        return;
    }
    // (`request`, `byte` and `object` take an s: no import of the commands' vocabulary, which
    // imports this module.)
    let count = |n: u64, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    // Every object read, the shards a reader opened beside an index or a root included.
    let transfers = ztensor_remote::transfers();
    for (url, t) in &transfers {
        eprintln!(
            "ztensor: {url}: {}, {} received",
            count(t.requests, "request"),
            count(t.bytes, "byte")
        );
    }
    if transfers.len() > 1 {
        let (requests, bytes) =
            transfers.iter().fold((0, 0), |(r, b), (_, t)| (r + t.requests, b + t.bytes));
        eprintln!(
            "ztensor: {} read: {}, {} received",
            count(transfers.len() as u64, "object"),
            count(requests, "request"),
            count(bytes, "byte")
        );
    }
}

/// The bytes each output in object storage received, by URL.
static UPLOADED: OnceLock<Mutex<HashMap<String, u64>>> = OnceLock::new();

/// How this process reaches object storage (`--no-sign-request`, `--remote-timeout`), its
/// uploads holding at most a quarter of `memory` (`--memory`) in parts in flight (at least one
/// part).
pub(crate) fn options(memory: Option<u64>) -> RemoteOptions {
    let mut options = OPTIONS.get().cloned().unwrap_or_default();
    if let Some(memory) = memory {
        let parts = memory / 4 / ztensor_remote::PART_LEN as u64;
        options.upload_parts = usize::try_from(parts).unwrap_or(usize::MAX).max(1);
    }
    options
}

/// An upload of the object at `url`: nothing appears there before [`publish`]; dropped
/// unpublished (on an error), it is aborted. Its parts in flight as [`options`] allows.
///
/// # Errors
/// A malformed URL, `http(s)://` (read only), the client's configuration.
pub(crate) fn upload(url: &str, memory: Option<u64>) -> Result<RemoteUpload> {
    let location = Location::parse(url).map_err(|e| anyhow!("{e}"))?;
    RemoteUpload::create(&location, &options(memory)).map_err(|e| anyhow!("{e}"))
}

/// The sharded output under the prefix `url` (`s3://bucket/dir/`), its uploads as
/// [`options`] allows.
pub(crate) fn prefix(url: &str, memory: Option<u64>) -> ztensor_shard_write::Prefix {
    ztensor_shard_write::Prefix::new(url, options(memory))
}

/// [`ztensor_shard_write::Prefix::check_free`], its refusal naming `--force`.
///
/// # Errors
/// An index there already (without `force`); a failed request.
pub(crate) fn check_free(
    prefix: &ztensor_shard_write::Prefix,
    index: &str,
    force: bool,
) -> Result<Option<String>> {
    prefix.check_free(index, force).map_err(|e| match e {
        ztensor_shard_write::Occupant::Index(_) => anyhow!("{e}; --force replaces it"),
        other => anyhow!("{other}"),
    })
}

/// Completes `upload` of `url`: the object appears whole.
///
/// # Errors
/// The completion's error, naming the URL (the upload is then aborted).
pub(crate) fn publish(url: &str, upload: RemoteUpload) -> Result<()> {
    let len = upload.written();
    upload.finish().map_err(|e| anyhow!("{e}"))?;
    published(url, len);
    Ok(())
}

/// Records that this process published `len` bytes at `url`.
fn published(url: &str, len: u64) {
    UPLOADED
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(url.to_owned(), len);
}

/// The length of the object this process published at `url`.
pub(crate) fn uploaded(url: &str) -> Option<u64> {
    UPLOADED.get()?.lock().unwrap_or_else(PoisonError::into_inner).get(url).copied()
}

/// Publishes `bytes` as the object at `url`.
///
/// # Errors
/// The upload's.
pub(crate) fn put(url: &str, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut up = upload(url, None)?;
    up.write_all(bytes).map_err(|e| anyhow!("{url}: {e}"))?;
    publish(url, up)
}
