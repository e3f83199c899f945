//! The client side: a private tokio runtime behind a blocking API, the store for a
//! [`Location`] configured from the environment as each provider's own tools are, and a
//! counter of the requests sent.

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use object_store::multipart::MultipartStore;
use object_store::{ClientOptions, ObjectStore, RetryConfig};

use crate::counters::Counters;
use crate::error::{Error, ErrorKind};
use crate::http::{Connector, Redirects};
use crate::location::{Location, Scheme};

/// How remote objects are reached.
#[derive(Debug, Clone)]
pub struct RemoteOptions {
    /// Send unsigned requests (a public bucket; as `aws s3 --no-sign-request`): no credentials
    /// are looked for.
    pub unsigned: bool,
    /// The bound on one operation (an open, a read, a part upload, completing an upload),
    /// retries included; past it the operation fails with [`ErrorKind::TimedOut`] and the
    /// last error seen. Default: 2 minutes.
    pub timeout: Duration,
    /// Settings that override the environment, as `object_store`'s configuration keys for the
    /// store (`aws_endpoint`, `aws_access_key_id`, `aws_region`, `google_service_account`,
    /// `azure_storage_account_name`, ..), as a Python user's `storage_options`. An unknown key
    /// is refused when the store is configured.
    pub settings: Vec<(String, String)>,
    /// The most ranged GETs of one object in flight at once, across every thread reading it
    /// (at least 1). Default [`RemoteOptions::DEFAULT_CONCURRENCY`].
    pub concurrency: usize,
    /// The length of each ranged GET a large read is split into (at least 64 KiB). Default
    /// [`RemoteOptions::DEFAULT_RANGE_LEN`].
    pub range_len: u64,
    /// The most parts of one upload in flight at once (at least 1), each
    /// [`PART_LEN`](crate::PART_LEN) bytes held until it is sent: the memory an upload takes.
    /// Default [`PARALLEL_PARTS`](crate::PARALLEL_PARTS).
    pub upload_parts: usize,
    /// The most bytes of an object fetched ahead of a reader that reads it in order (its
    /// tensors one after another), so the next ranges arrive while the last ones are used:
    /// memory held beside the reader's own. 0 fetches nothing ahead. Default
    /// [`RemoteOptions::DEFAULT_READ_AHEAD`].
    pub read_ahead: u64,
}

impl RemoteOptions {
    /// Ranged GETs of one object in flight at once, by default: at the 50-100 MB/s one
    /// connection to S3 carries, 32 of them fill a 10-25 Gb/s link.
    pub const DEFAULT_CONCURRENCY: usize = 32;
    /// The length of each ranged GET, by default: 8 MiB, the part size S3's own tools use.
    pub const DEFAULT_RANGE_LEN: u64 = 8 << 20;
    /// The least [`RemoteOptions::range_len`] used.
    pub const MIN_RANGE_LEN: u64 = 64 << 10;
    /// Bytes fetched ahead of an in-order reader, by default: 64 MiB, eight ranges.
    pub const DEFAULT_READ_AHEAD: u64 = 64 << 20;
}

impl Default for RemoteOptions {
    fn default() -> RemoteOptions {
        RemoteOptions {
            unsigned: false,
            timeout: Duration::from_secs(120),
            settings: Vec::new(),
            concurrency: RemoteOptions::DEFAULT_CONCURRENCY,
            range_len: RemoteOptions::DEFAULT_RANGE_LEN,
            upload_parts: crate::PARALLEL_PARTS,
            read_ahead: RemoteOptions::DEFAULT_READ_AHEAD,
        }
    }
}

/// The runtime every remote operation runs on: two worker threads, started by the first
/// store configured ([`started`]). The rest of the workspace is synchronous; it blocks on this
/// runtime's futures.
static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();

/// Starts the runtime if it is not running: an error naming `url` when its threads cannot be
/// started (an address-space or thread limit), never a panic.
fn started(url: &str) -> Result<&'static tokio::runtime::Runtime, Error> {
    if let Some(runtime) = RUNTIME.get() {
        return Ok(runtime);
    }
    let built = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("zt-remote")
        .enable_all()
        .build()
        .map_err(|e| {
            Error::new(
                ErrorKind::Request,
                url,
                format!("starting the client's threads: {e} (a thread or memory limit?)"),
            )
        })?;
    // Two threads racing here: one runtime is kept, the other dropped unused.
    Ok(RUNTIME.get_or_init(|| built))
}

/// The running runtime. Every operation configures its store first, which starts it
/// ([`store`]), so it is running by the time anything is run on it.
fn runtime() -> &'static tokio::runtime::Runtime {
    RUNTIME.get().expect("the runtime is started when the first store is configured")
}

/// Runs `future` to its end on the private runtime, within `timeout`: past it,
/// [`ErrorKind::TimedOut`] naming `url` and what was being done.
pub(crate) fn block_on<T>(
    url: &str,
    what: &str,
    timeout: Duration,
    future: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    runtime().block_on(timed(url, what, timeout, future))
}

/// Starts `future` on the private runtime, to run whether or not its handle is awaited.
pub(crate) fn spawn<T: Send + 'static>(
    future: impl Future<Output = T> + Send + 'static,
) -> tokio::task::JoinHandle<T> {
    runtime().spawn(future)
}

/// Runs `future` to its end on the private runtime, with no bound of its own: each request
/// in it is bounded ([`timed`]).
pub(crate) fn block_on_all<T>(future: impl Future<Output = T>) -> T {
    runtime().block_on(future)
}

/// `future` within `timeout`: past it, [`ErrorKind::TimedOut`] naming `url` and what was being
/// done.
pub(crate) async fn timed<T>(
    url: &str,
    what: &str,
    timeout: Duration,
    future: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    match tokio::time::timeout(timeout, future).await {
        Ok(result) => result,
        Err(_) => Err(Error::new(
            ErrorKind::TimedOut,
            url,
            format!(
                "{what}: no answer within {} s (the time bound; an option sets it)",
                timeout.as_secs()
            ),
        )),
    }
}

/// Enters the runtime's context (for `object_store` calls that spawn tasks).
pub(crate) fn enter() -> tokio::runtime::EnterGuard<'static> {
    runtime().enter()
}

/// The retry policy: `object_store`'s (5xx, throttling, dropped connections and cut bodies
/// retried with exponential backoff, a cut body resumed from the byte where it stopped),
/// bounded by most of the operation's time bound so its last error is the one reported.
fn retry(options: &RemoteOptions) -> RetryConfig {
    #[cfg_attr(not(feature = "fuzzing"), allow(unused_mut))]
    let mut config = RetryConfig {
        max_retries: 10,
        retry_timeout: options.timeout.mul_f64(0.9),
        ..RetryConfig::default()
    };
    // Scripted answers are retried as real ones are, without the waits between tries: a
    // fuzzer's input is a few microseconds of work, not a backoff schedule.
    #[cfg(feature = "fuzzing")]
    if crate::scripted::active() {
        config.backoff = object_store::BackoffConfig {
            // Not zero: the next wait is drawn from `init..previous * base`, which must not be
            // empty.
            init_backoff: std::time::Duration::from_micros(1),
            max_backoff: std::time::Duration::from_micros(1),
            base: 2.0,
        };
    }
    config
}

/// A configured store: for reading and whole puts, and (every writable store) for multipart
/// uploads by id, which a signal handler can abort.
#[derive(Clone)]
pub(crate) struct Stores {
    pub(crate) object: Arc<dyn ObjectStore>,
    pub(crate) multipart: Option<Arc<dyn MultipartStore>>,
}

impl std::fmt::Debug for Stores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stores").field("object", &self.object).finish_non_exhaustive()
    }
}

fn both<S: ObjectStore + MultipartStore>(store: S) -> Stores {
    let store = Arc::new(store);
    Stores { object: Arc::clone(&store) as Arc<dyn ObjectStore>, multipart: Some(store) }
}

/// The store `location` is in, configured from the environment, its requests counted in
/// `counters`.
///
/// S3: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION` or
/// `AWS_DEFAULT_REGION`, `AWS_ENDPOINT_URL` (an `http://` endpoint, for a local server, is used
/// as given), and the other `AWS_*` variables `object_store` reads (web identity, container
/// credentials, instance metadata). GCS: `GOOGLE_SERVICE_ACCOUNT` (a key file),
/// `GOOGLE_SERVICE_ACCOUNT_KEY`, `GOOGLE_APPLICATION_CREDENTIALS`. Azure:
/// `AZURE_STORAGE_ACCOUNT_NAME`, `AZURE_STORAGE_ACCOUNT_KEY`, `AZURE_STORAGE_SAS_TOKEN`, the
/// `AZURE_*` client-secret variables.
pub(crate) fn store(
    location: &Location,
    options: &RemoteOptions,
    counters: &Arc<Counters>,
) -> Result<Stores, Error> {
    started(&location.to_string())?;
    let redirects = match location.scheme() {
        Scheme::Http => Redirects::Public,
        Scheme::S3 | Scheme::Gcs | Scheme::Azure => Redirects::SameOrigin,
    };
    let connector = Connector { counters: Arc::clone(counters), redirects };
    let shown = location.to_string();
    let built: object_store::Result<Stores> = match location.scheme() {
        Scheme::S3 => {
            let mut builder = object_store::aws::AmazonS3Builder::from_env()
                .with_bucket_name(location.bucket())
                .with_retry(retry(options))
                .with_http_connector(connector)
                .with_skip_signature(options.unsigned);
            builder = with_profile(&shown, builder)?;
            for (key, value) in &options.settings {
                builder = builder.with_config(setting(&shown, key)?, value);
            }
            if !options.unsigned {
                no_credentials(&shown, &builder)?;
            }
            // An `http://` endpoint (a local server) is used as given.
            let endpoint =
                builder.get_config_value(&object_store::aws::AmazonS3ConfigKey::Endpoint);
            if endpoint.is_some_and(|e| e.starts_with("http://")) {
                builder = builder.with_allow_http(true);
            }
            builder.build().map(both)
        }
        Scheme::Gcs => settings(
            &shown,
            options,
            object_store::gcp::GoogleCloudStorageBuilder::from_env(),
            |b, k, v| b.with_config(k, v),
        )?
        .with_bucket_name(location.bucket())
        .with_retry(retry(options))
        .with_http_connector(connector)
        .with_skip_signature(options.unsigned)
        .build()
        .map(both),
        Scheme::Azure => settings(
            &shown,
            options,
            object_store::azure::MicrosoftAzureBuilder::from_env(),
            |b, k, v| b.with_config(k, v),
        )?
        .with_container_name(location.bucket())
        .with_retry(retry(options))
        .with_http_connector(connector)
        .with_skip_signature(options.unsigned)
        .build()
        .map(both),
        Scheme::Http => object_store::http::HttpBuilder::new()
            .with_url(location.bucket())
            .with_retry(retry(options))
            .with_http_connector(connector)
            .with_client_options(ClientOptions::new().with_allow_http(true))
            .build()
            .map(|s| Stores { object: Arc::new(s), multipart: None }),
    };
    built.map_err(|e| Error::from_store("configuring the client", &shown, e))
}

/// `builder` with what the AWS profile gives and the environment does not, as the AWS tools
/// resolve it: keys from the environment win over the profile's (and the profile's over the
/// container and instance credentials `object_store` looks for last); `AWS_REGION` /
/// `AWS_DEFAULT_REGION` over its `region`; `AWS_ENDPOINT_URL` over its `endpoint_url`. A
/// profile `AWS_PROFILE` names must exist; the default one may not.
fn with_profile(
    shown: &str,
    mut builder: object_store::aws::AmazonS3Builder,
) -> Result<object_store::aws::AmazonS3Builder, Error> {
    use object_store::aws::AmazonS3ConfigKey as Key;
    let (name, named, credentials, config) = crate::profile::from_env();
    let Some(profile) = crate::profile::read(&name, credentials.as_deref(), config.as_deref())
    else {
        if !named {
            return Ok(builder);
        }
        let files = [credentials, config]
            .iter()
            .flatten()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(" nor ");
        return Err(Error::new(
            ErrorKind::Config,
            shown,
            format!(
                "configuring the client: the profile {name:?} (AWS_PROFILE) is in neither {files}"
            ),
        ));
    };
    if builder.get_config_value(&Key::AccessKeyId).is_none()
        && let (Some(id), Some(secret)) = (profile.access_key_id, profile.secret_access_key)
    {
        builder = builder.with_access_key_id(id).with_secret_access_key(secret);
        if let Some(token) = profile.session_token {
            builder = builder.with_token(token);
        }
    }
    let env_region =
        ["AWS_REGION", "AWS_DEFAULT_REGION"].iter().any(|v| std::env::var_os(v).is_some());
    if !env_region && let Some(region) = profile.region {
        builder = builder.with_region(region);
    }
    if builder.get_config_value(&Key::Endpoint).is_none()
        && let Some(endpoint) = profile.endpoint_url
    {
        builder = builder.with_endpoint(endpoint);
    }
    Ok(builder)
}

/// Refuses a signed S3 store that would look for credentials only in the instance metadata
/// service when `AWS_EC2_METADATA_DISABLED` says not to (as the AWS tools honour it): no
/// credentials were found, and saying so beats a refusal from an address nobody meant to ask.
fn no_credentials(shown: &str, builder: &object_store::aws::AmazonS3Builder) -> Result<(), Error> {
    use object_store::aws::AmazonS3ConfigKey as Key;
    let has = |key: Key| builder.get_config_value(&key).is_some_and(|v| !v.is_empty());
    let elsewhere = has(Key::AccessKeyId)
        || has(Key::SecretAccessKey)
        || (has(Key::WebIdentityTokenFile) && has(Key::RoleArn))
        || has(Key::ContainerCredentialsRelativeUri)
        || has(Key::ContainerCredentialsFullUri);
    let disabled = std::env::var("AWS_EC2_METADATA_DISABLED")
        .is_ok_and(|v| v.trim().eq_ignore_ascii_case("true"));
    if elsewhere || !disabled {
        return Ok(());
    }
    Err(Error::new(
        ErrorKind::Config,
        shown,
        format!(
            "no AWS credentials found (the instance metadata service is off: \
             AWS_EC2_METADATA_DISABLED); looked for {}",
            crate::profile::where_credentials_are_looked_for()
        ),
    ))
}

/// `key` as a configuration key of a store's builder.
fn setting<K: std::str::FromStr>(shown: &str, key: &str) -> Result<K, Error> {
    key.parse().map_err(|_| {
        Error::new(
            ErrorKind::Config,
            shown,
            format!("configuring the client: no setting {key:?} for this store"),
        )
    })
}

/// `builder` with the settings of `options` applied by `apply`.
fn settings<B, K: std::str::FromStr>(
    shown: &str,
    options: &RemoteOptions,
    mut builder: B,
    apply: impl Fn(B, K, &str) -> B,
) -> Result<B, Error> {
    for (key, value) in &options.settings {
        builder = apply(builder, setting(shown, key)?, value);
    }
    Ok(builder)
}
