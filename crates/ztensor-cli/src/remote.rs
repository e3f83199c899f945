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

/// An upload of the object at `url`: nothing appears there before [`publish`]; dropped
/// unpublished (on an error), it is aborted. With `memory` (`--memory`), its parts in flight
/// hold at most a quarter of it (at least one part).
///
/// # Errors
/// A malformed URL, `http(s)://` (read only), the client's configuration.
pub(crate) fn upload(url: &str, memory: Option<u64>) -> Result<RemoteUpload> {
    let location = Location::parse(url).map_err(|e| anyhow!("{e}"))?;
    let mut options = OPTIONS.get().cloned().unwrap_or_default();
    if let Some(memory) = memory {
        let parts = memory / 4 / ztensor_remote::PART_LEN as u64;
        options.upload_parts = usize::try_from(parts).unwrap_or(usize::MAX).max(1);
    }
    RemoteUpload::create(&location, &options).map_err(|e| anyhow!("{e}"))
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

/// Objects under a prefix (`s3://bucket/dir/`), where a sharded output goes: each shard an
/// upload published whole when it is written, removed again if the checkpoint fails.
pub(crate) struct Prefix {
    /// The prefix, without its trailing `/`.
    base: String,
    memory: Option<u64>,
    /// For a write whose objects stand only together (a checkpoint's shards and index in
    /// one `convert`): what it published, deleted if a signal stops the process first.
    provisional: Option<ztensor_remote::Provisional>,
}

impl Prefix {
    /// The prefix `url` (`s3://bucket/dir/`), uploads holding at most a quarter of `memory`.
    pub(crate) fn new(url: &str, memory: Option<u64>) -> Prefix {
        Prefix { base: url.trim_end_matches('/').to_owned(), memory, provisional: None }
    }

    /// Every object published through this prefix (each shard, then the index) stands only
    /// once the write is done: a signal before deletes them all (see
    /// [`ztensor_remote::Provisional`]).
    pub(crate) fn all_or_nothing(mut self) -> Prefix {
        self.provisional = Some(ztensor_remote::Provisional::new());
        self
    }

    /// Refuses a prefix that holds a checkpoint's index at `index` already, unless `force`,
    /// which removes that index first (so that what is left while the new shards are published,
    /// or after a failure, is never an index naming shards that changed or went), and returns
    /// a note saying so.
    ///
    /// # Errors
    /// The index there, without `force`; a failed request other than "no such object".
    pub(crate) fn check_free(&self, index: &str, force: bool) -> Result<Option<String>> {
        use ztensor_shard_write::Destination;
        let url = self.locate(index);
        let location = Location::parse(&url).map_err(|e| anyhow!("{e}"))?;
        let options = OPTIONS.get().cloned().unwrap_or_default();
        match RemoteObject::open(&location, &options) {
            Err(e) if *e.kind() == ztensor_remote::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(anyhow!("{e}")),
            Ok(_) if force => {
                ztensor_remote::delete(&location, &options).map_err(|e| anyhow!("{e}"))?;
                Ok(Some(format!(
                    "--force: removed {url} first; shards of the checkpoint there before under \
                     other names than this one's are left as they were"
                )))
            }
            Ok(_) => Err(anyhow!(
                "{}/ holds a sharded checkpoint already ({url}); --force replaces it",
                self.base
            )),
        }
    }
}

impl ztensor_shard_write::Destination for Prefix {
    type Object = RemoteUpload;

    fn locate(&self, name: &str) -> String {
        format!("{}/{name}", self.base)
    }

    fn create(&self, name: &str) -> std::io::Result<RemoteUpload> {
        upload(&self.locate(name), self.memory).map_err(|e| std::io::Error::other(format!("{e:#}")))
    }

    fn publish(&self, name: &str, object: RemoteUpload) -> std::io::Result<()> {
        let url = self.locate(name);
        let held = match &self.provisional {
            Some(set) => {
                let location = Location::parse(&url).map_err(std::io::Error::from)?;
                set.hold(&location, &OPTIONS.get().cloned().unwrap_or_default());
                Some((set, location))
            }
            None => None,
        };
        let published = publish(&url, object);
        if published.is_err()
            && let Some((set, location)) = held
        {
            // Nothing of this write's is there: what is (a user's own object at the name) is
            // not deleted by a signal that comes later.
            set.release(&location);
        }
        published.map_err(|e| std::io::Error::other(format!("{e:#}")))
    }

    fn remove(&self, name: &str) -> std::io::Result<()> {
        let location = Location::parse(&self.locate(name)).map_err(std::io::Error::from)?;
        let options = OPTIONS.get().cloned().unwrap_or_default();
        ztensor_remote::delete(&location, &options).map_err(std::io::Error::from)
    }

    fn open(&self, name: &str) -> std::io::Result<Option<Box<dyn ztensor_io::ReadAt>>> {
        let location = Location::parse(&self.locate(name)).map_err(std::io::Error::from)?;
        let options = OPTIONS.get().cloned().unwrap_or_default();
        match RemoteObject::open(&location, &options) {
            Ok(object) => Ok(Some(Box::new(object))),
            Err(e) if *e.kind() == ztensor_remote::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(std::io::Error::from(e)),
        }
    }

    fn seen(&self, name: &str) -> std::io::Result<ztensor_shard_write::Seen> {
        let location = Location::parse(&self.locate(name)).map_err(std::io::Error::from)?;
        let options = OPTIONS.get().cloned().unwrap_or_default();
        Ok(match ztensor_remote::seen(&location, &options).map_err(std::io::Error::from)? {
            ztensor_remote::Expected::Object(tag) => ztensor_shard_write::Seen::Object(tag),
            _ => ztensor_shard_write::Seen::Nothing,
        })
    }

    fn publish_if(
        &self,
        name: &str,
        object: RemoteUpload,
        seen: &ztensor_shard_write::Seen,
    ) -> std::io::Result<bool> {
        let expected = match seen {
            ztensor_shard_write::Seen::Nothing => ztensor_remote::Expected::Nothing,
            ztensor_shard_write::Seen::Object(tag) => ztensor_remote::Expected::Object(tag.clone()),
            _ => return self.publish(name, object).map(|()| true),
        };
        let len = object.written();
        match object.finish_if(expected) {
            Ok(_) => {
                published(&self.locate(name), len);
                Ok(true)
            }
            Err(e) if *e.kind() == ztensor_remote::ErrorKind::Changed => Ok(false),
            Err(e) => Err(std::io::Error::from(e)),
        }
    }
}

/// The bytes of the object at `url`, at most `max` of them (a plan, say).
///
/// # Errors
/// The object's, or one longer than `max`.
pub(crate) fn read_small(url: &str, max: u64) -> Result<Vec<u8>> {
    use ztensor_io::ReadAt;
    let object = object(url)?;
    if object.len() > max {
        anyhow::bail!("{url}: {} bytes, over the {max} read for it", object.len());
    }
    let mut bytes = vec![0u8; usize::try_from(object.len())?];
    object.read_exact_at(0, &mut bytes).map_err(|e| anyhow!("{url}: {e}"))?;
    Ok(bytes)
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
